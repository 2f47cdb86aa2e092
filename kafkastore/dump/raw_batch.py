"""The dump's raw header parse: an entry's header fields read straight from the file's bytes.

The kernels' batch objects (:func:`kafkastore.records.read_batch`) take the entries Kafka
writes; ``kafka-dump-log.sh`` also prints entries they refuse, from the header bytes alone,
as Kafka's ``FileChannelRecordBatch`` reads them: a magic byte above 2 (read as v2), a v2
entry shorter than its 61-byte header (the header is read on into the next entry), a legacy
entry whose codec the kernels refuse. Entries larger than 8 MiB are also shown from their
header, their CRC computed in 1 MiB windows, so that a shallow dump never holds one whole.

:class:`RawBatch` is that header with the attributes the batch line prints;
:func:`legacy_meta` reads one legacy message's stored CRC and sizes (Kafka prints the inner
messages' own). This is the only place the dump parses header bytes itself. Layouts:
:data:`kafkastore.records.V2_HEADER` (v2) and the legacy prefix below (offset, size, crc,
magic, attributes; then a v1 timestamp). Objects are built once and only read: safe to
share.
"""

from __future__ import annotations

import struct
import zlib

import crc32c

from kafkastore.dump.java_format import increment_sequence, signed8, wrap64
from kafkastore.errors import CorruptRecordError
from kafkastore.file_records import BatchHeader, FileRecords
from kafkastore.records import V2_HEADER
from kafkastore.types import TimestampType

__all__ = ["V2_HEADER_SIZE", "RawBatch", "legacy_meta"]

V2_HEADER_SIZE = 61          # RECORD_BATCH_OVERHEAD
_LEGACY_HEADER_V1 = 26       # 12-byte prefix + crc, magic, attributes, timestamp
_STREAM_WINDOW = 1 << 20     # the CRC of a large entry is computed this many bytes at a time

_LEGACY_PREFIX = struct.Struct(
    ">"
    "q"  # offset (a wrapper's: its last inner offset)
    "i"  # size
    "I"  # crc: CRC-32 of [magic, end)
    "b"  # magic
    "b"  # attributes
)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RawBatch:
    """One entry's header fields read straight from its bytes, as Kafka's
    ``FileChannelRecordBatch`` reads them, for the entries the kernels' batch objects do
    not take (a magic byte above 2, a v2 entry shorter than its header) or that are too
    large to read whole. Has the attributes :func:`kafkastore.dump.batch_line` uses."""

    partition_leader_epoch = producer_id = producer_epoch = base_sequence = -1
    last_sequence = -1
    record_count = None
    is_transactional = is_control = has_delete_horizon = False
    delete_horizon_ms = None

    def __init__(self, fr: FileRecords, h: BatchHeader) -> None:
        self.position = h.position
        self.size_in_bytes = h.size
        magic = signed8(h.magic)
        self.magic = magic
        # Kafka reads a whole header even past a short entry's end (from the next entry)
        want = V2_HEADER_SIZE if magic >= 2 else _LEGACY_HEADER_V1 if magic else 18
        head = fr.read(h.position, want)
        if len(head) < want:
            raise CorruptRecordError(
                f"Failed to read record batch header at position {h.position}: the file "
                f"ends {len(head)} bytes into it", position=h.position)
        if magic < 0:
            # LegacyRecord.headerSize(magic) throws for anything but 0 and 1
            raise CorruptRecordError(f"Invalid magic: {magic}", position=h.position,
                                     offset=h.base_offset)
        if magic >= 2:
            (self.base_offset, _, self.partition_leader_epoch, _, self.crc, attributes,
             delta, base_ts, self.max_timestamp, self.producer_id, self.producer_epoch,
             self.base_sequence, self.record_count) = V2_HEADER.unpack(head)
            self.last_offset = wrap64(self.base_offset + delta)
            self.last_sequence = (-1 if self.base_sequence == -1 else
                                  increment_sequence(self.base_sequence, delta))
            self.is_transactional = bool(attributes & 0x10)
            self.is_control = bool(attributes & 0x20)
            self.has_delete_horizon = bool(attributes & 0x40)
            self.delete_horizon_ms = base_ts if self.has_delete_horizon else None
            self.timestamp_type = TimestampType((attributes >> 3) & 1)
            crc_from = 21
        else:
            _, _, self.crc, _, attributes = _LEGACY_PREFIX.unpack_from(head)
            self.base_offset = self.last_offset = h.base_offset
            if magic == 0:
                self.timestamp_type = TimestampType.NO_TIMESTAMP_TYPE
                self.max_timestamp = -1
            else:
                self.timestamp_type = TimestampType((attributes >> 3) & 1)
                self.max_timestamp = _I64.unpack_from(head, 18)[0]
            crc_from = 16
        self.attributes = attributes & 0xFF
        self._valid = self._check_crc(fr, h, crc_from) if (
            magic < 2 or h.size >= V2_HEADER_SIZE) else False

    def _check_crc(self, fr: FileRecords, h: BatchHeader, start: int) -> bool:
        crc_fn = crc32c.crc32c if self.magic >= 2 else zlib.crc32
        value = 0
        pos, end = h.position + start, h.position + h.size
        while pos < end:
            chunk = fr.read(pos, min(_STREAM_WINDOW, end - pos))
            if not chunk:
                raise CorruptRecordError(f"file ended inside the batch at position "
                                         f"{h.position}", position=h.position)
            value = crc_fn(chunk, value)
            pos += len(chunk)
        return value == self.crc

    def is_valid(self) -> bool:
        return self._valid


def legacy_meta(entry) -> tuple[int, bool, int, int]:
    """``(crc, isValid, keySize, valueSize)`` of one legacy message, sizes as stored."""
    view = memoryview(entry)
    _, _, crc, magic, _ = _LEGACY_PREFIX.unpack_from(view)
    key_at = 18 if magic == 0 else 26
    key_size = _I32.unpack_from(view, key_at)[0]
    value_size = _I32.unpack_from(view, key_at + 4 + max(key_size, 0))[0]
    return crc, zlib.crc32(view[16:]) == crc, key_size, value_size
