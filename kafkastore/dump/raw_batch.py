"""The dump's raw header parse: an entry's header fields read straight from the file's bytes.

The kernels' batch objects (:func:`kafkastore.records.read_batch`) take the entries Kafka
writes; ``kafka-dump-log.sh`` also prints entries they refuse, from the header bytes alone,
as Kafka's ``FileChannelRecordBatch`` reads them: a magic byte above 2 (read as v2), a v2
entry shorter than its 61-byte header (the header is read on into the next entry), a legacy
entry whose codec the kernels refuse. Entries larger than 8 MiB are also shown from their
header, their CRC computed in 1 MiB windows, so that a shallow dump never holds one whole.

:class:`RawBatch` is that header with the attributes the batch line prints;
:func:`legacy_meta` reads one legacy message's stored CRC and sizes (Kafka prints the inner
messages' own). The header fields come from :func:`kafkastore.batch_header.read_batch_header`,
the one header accessor; what is the dump's own is Kafka's reading of a short or odd entry
(how much it reads, which magic it refuses) and the CRC check. Objects are built once and
only read: safe to share.
"""

from __future__ import annotations

import zlib

import crc32c

from kafkastore.batch_header import (
    ATTRIBUTES_OFFSET,
    INT32,
    LEGACY_HEADER_SIZE_V0,
    LEGACY_HEADER_SIZE_V1,
    LEGACY_PREFIX,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    EntryHeader,
    read_batch_header,
)
from kafkastore.dump.java_format import signed8
from kafkastore.errors import CorruptRecordError
from kafkastore.file_records import FileRecords

__all__ = ["V2_HEADER_SIZE", "RawBatch", "legacy_meta"]

V2_HEADER_SIZE = RECORD_BATCH_OVERHEAD
_STREAM_WINDOW = 1 << 20     # the CRC of a large entry is computed this many bytes at a time


class RawBatch:
    """One entry's header fields read straight from its bytes, as Kafka's
    ``FileChannelRecordBatch`` reads them, for the entries the kernels' batch objects do
    not take (a magic byte above 2, a v2 entry shorter than its header) or that are too
    large to read whole. Has the attributes :func:`kafkastore.dump.batch_line` uses: those
    of :class:`kafkastore.batch_header.BatchHeader`, the one header accessor, plus
    ``is_valid()``."""

    def __init__(self, fr: FileRecords, h: EntryHeader) -> None:
        magic = signed8(h.magic)
        # Kafka reads a whole header even past a short entry's end (from the next entry)
        want = V2_HEADER_SIZE if magic >= 2 else \
            LEGACY_HEADER_SIZE_V1 if magic else LEGACY_HEADER_SIZE_V0
        head = fr.read(h.position, want)
        if len(head) < want:
            raise CorruptRecordError(
                f"Failed to read record batch header at position {h.position}: the file "
                f"ends {len(head)} bytes into it", position=h.position)
        if magic < 0:
            # LegacyRecord.headerSize(magic) throws for anything but 0 and 1
            raise CorruptRecordError(f"Invalid magic: {magic}", position=h.position,
                                     offset=h.base_offset)
        header = read_batch_header(head)
        self._header = header
        self.position = h.position
        self.size_in_bytes = h.size
        self.attributes = header.attributes & 0xFF
        self._valid = self._check_crc(fr, h, ATTRIBUTES_OFFSET if magic >= 2 else MAGIC_OFFSET) \
            if (magic < 2 or h.size >= V2_HEADER_SIZE) else False

    def __getattr__(self, name: str):
        # every other field is the header's (magic, offsets, timestamps, producer fields,
        # record_count, last_sequence, timestamp_type, is_control, ...)
        if name == "_header":
            raise AttributeError(name)
        return getattr(self._header, name)

    def _check_crc(self, fr: FileRecords, h: EntryHeader, start: int) -> bool:
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
    _, _, crc, magic, _ = LEGACY_PREFIX.unpack_from(view)
    key_at = LEGACY_HEADER_SIZE_V0 if magic == 0 else LEGACY_HEADER_SIZE_V1
    key_size = INT32.unpack_from(view, key_at)[0]
    value_size = INT32.unpack_from(view, key_at + 4 + max(key_size, 0))[0]
    return crc, zlib.crc32(view[MAGIC_OFFSET:]) == crc, key_size, value_size
