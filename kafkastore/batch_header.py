"""The header of one log entry: its layout constants and the one accessor that reads it.

Kafka's ``DefaultRecordBatch`` header view (and ``FileLogInputStream.FileChannelRecordBatch``
for the fields a file walk reads first), for every layer above the kernels. No module above
the kernels spells a header offset, a mask or a header struct of its own: they come from
here, and the values from :mod:`kafkastore._kernels` (``consts``), the Python mirror of the
compiled kernels' ``_ext/consts.pxd``.

Layouts (byte offsets from the entry's first byte, big-endian; kafka-storage.md §2):

* every entry: ``offset`` int64, ``size`` int32 (:data:`ENTRY_PREFIX`, :data:`LOG_OVERHEAD`
  bytes), then ``size`` bytes; the magic byte is at :data:`MAGIC_OFFSET` in every format;
* magic 2 (:data:`V2_HEADER`, :data:`RECORD_BATCH_OVERHEAD` = 61 bytes): baseOffset,
  batchLength, partitionLeaderEpoch, magic, crc (unsigned, CRC-32C of attributes to the
  end), attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
  producerEpoch, baseSequence, recordsCount; the records follow;
* magic 0/1 (:data:`LEGACY_PREFIX`): offset, size, crc (unsigned, CRC-32 of magic to the
  end), magic, attributes, and for magic 1 a timestamp int64 at
  :data:`LEGACY_TIMESTAMP_OFFSET`.

:func:`read_batch_header` reads one entry's header from a buffer into a
:class:`BatchHeader`, any magic. :class:`EntryHeader` is the light form a file walk yields
(the six fields the walk kernel returns; :class:`BatchHeader` starts with the same six, in
the same order, so code written for the light form takes the full one).
:func:`header_field` gathers one field of many entries into a numpy array.

Plain data and pure functions: safe from any thread.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from kafkastore._kernels import consts as _consts
from kafkastore.errors import CorruptRecordError
from kafkastore.types import CompressionType, TimestampType

__all__ = [
    "BatchHeader",
    "EntryHeader",
    "read_batch_header",
    "header_field",
    "increment_sequence",
    "ENTRY_PREFIX",
    "V2_HEADER",
    "LEGACY_PREFIX",
    "INT16",
    "INT32",
    "INT64",
    "UINT32",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "HEADER_SIZE_UP_TO_MAGIC",
    "MIN_ENTRY_SIZE",
    "BASE_OFFSET_OFFSET",
    "LENGTH_OFFSET",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "CRC_OFFSET",
    "ATTRIBUTES_OFFSET",
    "LAST_OFFSET_DELTA_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "PRODUCER_ID_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "CODEC_MASK",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "CONTROL_MASK",
    "DELETE_HORIZON_MASK",
    "LEGACY_CRC_OFFSET",
    "LEGACY_ATTRIBUTES_OFFSET",
    "LEGACY_TIMESTAMP_OFFSET",
    "LEGACY_HEADER_SIZE_V0",
    "LEGACY_HEADER_SIZE_V1",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
]

# -- constants (values from the kernels' one definition) --------------------------------------

LOG_OVERHEAD = _consts.LOG_OVERHEAD
MAGIC_OFFSET = _consts.MAGIC_OFFSET
HEADER_SIZE_UP_TO_MAGIC = _consts.HEADER_SIZE_UP_TO_MAGIC
MIN_ENTRY_SIZE = _consts.MIN_ENTRY_SIZE

BASE_OFFSET_OFFSET = _consts.BASE_OFFSET_OFFSET
LENGTH_OFFSET = _consts.LENGTH_OFFSET
PARTITION_LEADER_EPOCH_OFFSET = _consts.PARTITION_LEADER_EPOCH_OFFSET
CRC_OFFSET = _consts.CRC_OFFSET
ATTRIBUTES_OFFSET = _consts.ATTRIBUTES_OFFSET
LAST_OFFSET_DELTA_OFFSET = _consts.LAST_OFFSET_DELTA_OFFSET
BASE_TIMESTAMP_OFFSET = _consts.BASE_TIMESTAMP_OFFSET
MAX_TIMESTAMP_OFFSET = _consts.MAX_TIMESTAMP_OFFSET
PRODUCER_ID_OFFSET = _consts.PRODUCER_ID_OFFSET
PRODUCER_EPOCH_OFFSET = _consts.PRODUCER_EPOCH_OFFSET
BASE_SEQUENCE_OFFSET = _consts.BASE_SEQUENCE_OFFSET
RECORDS_COUNT_OFFSET = _consts.RECORDS_COUNT_OFFSET
RECORD_BATCH_OVERHEAD = _consts.RECORD_BATCH_OVERHEAD

CODEC_MASK = _consts.CODEC_MASK
TIMESTAMP_TYPE_MASK = _consts.TIMESTAMP_TYPE_MASK
TRANSACTIONAL_MASK = _consts.TRANSACTIONAL_MASK
CONTROL_MASK = _consts.CONTROL_MASK
DELETE_HORIZON_MASK = _consts.DELETE_HORIZON_MASK

LEGACY_CRC_OFFSET = _consts.LEGACY_CRC_OFFSET
LEGACY_ATTRIBUTES_OFFSET = _consts.LEGACY_ATTRIBUTES_OFFSET
LEGACY_TIMESTAMP_OFFSET = _consts.LEGACY_TIMESTAMP_OFFSET
#: The whole header of a v0 / v1 message, prefix included (to the key length).
LEGACY_HEADER_SIZE_V0 = LOG_OVERHEAD + _consts.LEGACY_HEADER_V0
LEGACY_HEADER_SIZE_V1 = LOG_OVERHEAD + _consts.LEGACY_HEADER_V1

#: Kafka's "none" values of the v2 header fields (``RecordBatch.NO_*``).
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

#: Every entry's prefix: offset int64, size int32.
ENTRY_PREFIX = struct.Struct(">qi")
#: The 61-byte v2 batch header, from the entry's first byte: baseOffset, batchLength,
#: partitionLeaderEpoch, magic, crc (unsigned), attributes, lastOffsetDelta,
#: baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount.
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
#: A legacy message's header up to its attributes: offset, size, crc (unsigned), magic,
#: attributes.
LEGACY_PREFIX = struct.Struct(">qiIbb")
#: The header's field types, to read or patch one field in place.
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")

# the structs and the constants describe one layout
assert V2_HEADER.size == RECORD_BATCH_OVERHEAD
assert LEGACY_PREFIX.size == LEGACY_ATTRIBUTES_OFFSET + 1
assert struct.calcsize(">qiib") == CRC_OFFSET and struct.calcsize(">qiibIhiqqqhi") == \
    RECORDS_COUNT_OFFSET

_INT_MAX = (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_WRAP = 1 << 64
_tuple_new = tuple.__new__   # the NamedTuples below without their Python-level __new__
_unpack_v2 = V2_HEADER.unpack_from


def _wrap32(n: int) -> int:
    return ((n + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: ``sequence + increment``, wrapping
    past ``Integer.MAX_VALUE`` to 0, in Java ``int`` arithmetic throughout (so any two
    ints, even a corrupt header's, give Java's answer)."""
    if 0 <= sequence <= _INT_MAX and 0 <= increment <= _INT_MAX:
        # every sound header: no step of Java's arithmetic overflows (the per-append path)
        if sequence > _INT_MAX - increment:
            return increment - (_INT_MAX - sequence) - 1
        return sequence + increment
    if sequence > _wrap32(_INT_MAX - increment):
        return _wrap32(increment - _wrap32(_INT_MAX - sequence) - 1)
    return _wrap32(sequence + increment)


class EntryHeader(NamedTuple):
    """The light form of a header: what a file walk reads of one entry (Kafka's
    ``FileChannelRecordBatch`` before it loads the rest of the header). The first six
    fields of :class:`BatchHeader`, in the same order."""

    position: int
    size: int               # whole entry, 12-byte prefix included
    magic: int
    base_offset: int        # the offset field (a legacy wrapper's is its *last* inner offset)
    last_offset: int
    max_timestamp: int      # -1 for magic 0


class BatchHeader(NamedTuple):
    """One entry's header, any magic (Kafka's ``DefaultRecordBatch`` /
    ``AbstractLegacyRecordBatch`` header fields, as ``FileChannelRecordBatch`` reads them).

    Read with :func:`read_batch_header`. A legacy entry (magic below 2) has no v2 fields: its
    ``base_offset`` and ``last_offset`` are its offset field (a compressed wrapper's is its
    last inner offset), and it reads as Kafka's legacy batch does: partition leader epoch,
    producer id, producer epoch and base sequence -1, ``last_offset_delta`` 0,
    ``base_timestamp`` its ``max_timestamp`` (its timestamp, -1 for magic 0) and
    ``record_count`` None (Kafka's ``countOrNull``). ``magic`` is signed, as Kafka's byte.
    """

    position: int           # of the entry's first byte in the buffer read
    size: int               # whole entry, 12-byte prefix included
    magic: int
    base_offset: int
    last_offset: int        # base_offset + last_offset_delta, wrapped to int64 as in Java
    max_timestamp: int
    partition_leader_epoch: int
    crc: int                # unsigned, as stored
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int | None

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK) and self.magic >= 2

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK) and self.magic >= 2

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK) and self.magic >= 2

    @property
    def delete_horizon_ms(self) -> int | None:
        """Kafka's ``deleteHorizonMs``: the base timestamp when the delete-horizon flag is
        set, else None (``OptionalLong.empty``)."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def codec(self) -> int:
        """The compression codec id (attribute bits 0-2)."""
        return self.attributes & CODEC_MASK

    @property
    def compression(self) -> CompressionType:
        """The codec as a :class:`~kafkastore.types.CompressionType` (Kafka's
        ``compressionType``; ValueError for an id Kafka does not know)."""
        return CompressionType(self.attributes & CODEC_MASK)

    @property
    def size_in_bytes(self) -> int:
        """Kafka's ``sizeInBytes``: :attr:`size`, the name the batch objects use."""
        return self.size

    @property
    def timestamp_type(self) -> TimestampType:
        """``NO_TIMESTAMP_TYPE`` for magic 0, else attribute bit 3."""
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)

    @property
    def last_sequence(self) -> int:
        """Kafka's ``lastSequence``: the base sequence plus the offset delta (wrapping),
        -1 without a sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def read_batch_header(buffer, position: int = 0) -> BatchHeader:
    """The header of the entry at ``position`` of ``buffer`` (bytes, bytearray, a mmap or a
    byte memoryview), any magic; a magic above 2 is read as a v2 header, as Kafka does.

    Only the header is read: no CRC, size or record is checked. A negative magic byte
    is read with the v0 layout, as Kafka's ``FileLogInputStream`` takes any magic below
    2 for a legacy entry (its ``LegacyRecord`` then refuses it: a reader of the records
    checks ``magic``). Raises :class:`~kafkastore.errors.CorruptRecordError` (with
    ``position``) when the buffer ends before the header does (61 bytes for magic 2, 26
    for magic 1, 18 for magic 0 or below, 17 to reach the magic byte).
    """
    if position < 0:
        raise ValueError(f"negative position {position}")
    try:   # the common case, a v2 batch: one unpack
        base, length, epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, pepoch, seq, \
            count = _unpack_v2(buffer, position)
    except struct.error:
        return _read_legacy(buffer, position)
    if magic < 2:
        return _read_legacy(buffer, position)
    last = base + delta
    if last > _LONG_MAX or last < _LONG_MIN:
        last = (last - _LONG_MIN) % _WRAP + _LONG_MIN
    return _tuple_new(BatchHeader, (position, length + LOG_OVERHEAD, magic, base, last, max_ts,
                                    epoch, crc, attrs, delta, base_ts, pid, pepoch, seq, count))


def _read_legacy(buffer, position: int) -> BatchHeader:
    """:func:`read_batch_header` for a buffer too short for a v2 header or a magic < 2."""
    have = len(buffer) - position
    if have >= HEADER_SIZE_UP_TO_MAGIC:
        magic = buffer[position + MAGIC_OFFSET]
        magic = magic - 256 if magic > 127 else magic
        want = RECORD_BATCH_OVERHEAD if magic >= 2 else \
            LEGACY_HEADER_SIZE_V1 if magic == 1 else LEGACY_HEADER_SIZE_V0
    else:
        want = HEADER_SIZE_UP_TO_MAGIC
    if have < want:
        raise CorruptRecordError(
            f"Failed to read record batch header at position {position}: the data ends "
            f"{max(have, 0)} bytes into it", position=position)
    offset, size, crc, magic, attrs = LEGACY_PREFIX.unpack_from(buffer, position)
    max_ts = INT64.unpack_from(buffer, position + LEGACY_TIMESTAMP_OFFSET)[0] if magic == 1 \
        else NO_TIMESTAMP
    return _tuple_new(BatchHeader, (position, size + LOG_OVERHEAD, magic, offset, offset,
                                    max_ts, NO_PARTITION_LEADER_EPOCH, crc, attrs, 0, max_ts,
                                    NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, None))


def header_field(data, positions: np.ndarray, at: int, dtype: str) -> np.ndarray:
    """One big-endian header field (``dtype`` such as ``">i8"``, at byte ``at`` of the
    entry: one of the ``*_OFFSET`` constants) of every entry at ``positions`` of ``data``,
    as a numpy array: a vectorised read of, say, the producer ids of a chunk's v2 batches.
    Every position must have ``at`` + the field's width bytes after it (a scanned entry's
    header does)."""
    width = np.dtype(dtype).itemsize
    view = np.frombuffer(data, np.uint8)
    # (copied: no view of ``data`` outlives the call, so a mapped file can be unmapped)
    return view[np.asarray(positions, dtype=np.int64)[:, None]
                + np.arange(at, at + width)].copy().view(dtype).ravel()
