"""Kafka record batches: read, scan, decode to columns, and write.

Pure-Python twin of ``kafkastore/_ext/record_batch.pyx``: the same names,
signatures, results and errors. It is the readable reference and the oracle
the compiled kernel is tested against.

Entries in a log
----------------
A log (a ``.log`` segment, a fetch response, a ``.bin`` vector) is entries
back to back, with no file header and no padding. Every entry starts with::

    offset   int64    0   v2: base offset; v0/v1: the message's (last) offset
    size     int32    8   bytes after these 12 (LOG_OVERHEAD)
    ...              12   v2: partitionLeaderEpoch; v0/v1: crc
    magic    int8    16   0, 1 or 2 -- at byte 16 in every format

so a reader dispatches on byte 16 before parsing anything else.

RecordBatch v2 (magic 2), 61-byte header, big-endian
----------------------------------------------------
::

    baseOffset            int64    0   first offset of the original batch
    batchLength           int32    8   total size - 12
    partitionLeaderEpoch  int32   12   not covered by the CRC
    magic                 int8    16   2
    crc                   uint32  17   CRC-32C of bytes [21, end)
    attributes            int16   21   bits 0-2 codec, 3 timestamp type,
                                       4 transactional, 5 control,
                                       6 delete horizon set
    lastOffsetDelta       int32   23
    baseTimestamp         int64   27   first record's timestamp, or the
                                       delete horizon when bit 6 is set
    maxTimestamp          int64   35
    producerId            int64   43
    producerEpoch         int16   51
    baseSequence          int32   53
    recordsCount          int32   57
    records                       61   raw, or one compressed stream

Record (inside the records section)::

    length          varint   bytes after this field
    attributes      int8     unused
    timestampDelta  varlong
    offsetDelta     varint
    keyLength       varint   negative = null
    key             bytes
    valueLength     varint   negative = null
    value           bytes
    headersCount    varint   must be >= 0
      headerKeyLength   varint  must be >= 0
      headerKey         UTF-8
      headerValueLength varint  negative = null
      headerValue       bytes

Legacy message (magic 0 and 1), after the 12-byte offset and size::

    crc         uint32   0   CRC-32 (IEEE) of bytes [4, end)
    magic       int8     4
    attributes  int8     5   bits 0-2 codec, bit 3 (v1) timestamp type
    timestamp   int64    6   v1 only
    keyLength   int32        negative = null
    key
    valueLength int32        negative = null
    value

A compressed legacy message (a wrapper) carries a compressed stream of inner
entries as its value. Inner offsets are absolute for v0 and relative
(0..n-1) for v1, where the wrapper's offset is the last inner offset.
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import numpy as np

from kafkastore._pure.varint import check_position
from kafkastore.errors import (
    CorruptRecordError,
    InvalidCrcError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from kafkastore.types import CompressionType, TimestampType

__all__ = [
    "Record",
    "RecordBatch",
    "LegacyRecordBatch",
    "BatchScan",
    "iter_batches",
    "read_batch",
    "scan_batches",
    "decode_columns",
    "encode_batch_v2",
    "set_decompressor",
    "set_column_pool_limit",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
]

# -- layout constants (mirrored by _ext/consts.pxd) -------------------------
LOG_OVERHEAD = 12  # offset int64 + size int32
MAGIC_OFFSET = 16
HEADER_SIZE_UP_TO_MAGIC = 17
MIN_ENTRY_SIZE = 14  # smallest legal size field: a v0 message (LegacyRecord.RECORD_OVERHEAD_V0)
RECORD_BATCH_OVERHEAD = 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
RECORDS_COUNT_OFFSET = 57
MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key, value, headers: 1 byte each
LEGACY_HEADER_V0 = 6  # crc + magic + attributes
LEGACY_HEADER_V1 = 14  # + timestamp
LEGACY_OVERHEAD_V1 = 22  # v1 header + key and value lengths

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

DEFAULT_MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024

INT32_MAX = (1 << 31) - 1
_I64 = 1 << 64

HEADER = struct.Struct(
    ">"
    "q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # recordsCount
)
ENTRY_PREFIX = struct.Struct(">qi")  # offset, size
LEGACY_V0 = struct.Struct(">Ibb")  # crc, magic, attributes
LEGACY_V1 = struct.Struct(">Ibbq")  # crc, magic, attributes, timestamp
_I32 = struct.Struct(">i")
_TS_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)
_CODECS = tuple(CompressionType)
_EMPTY = ()

# The codec layer sits above the kernels, so it is handed in rather than
# imported: ``fn(codec, data, max_size, magic) -> bytes``.
_decompress = None


def set_decompressor(fn) -> None:
    """Install the function that inflates compressed payloads.

    ``kafkastore.records`` installs ``kafkastore.compression.decompress`` at
    import; the kernel itself knows no codec.
    """
    global _decompress
    _decompress = fn


_pool_limit = 256 * 1024 * 1024


def set_column_pool_limit(limit):
    """Bound the memory :func:`decode_columns` keeps for reuse; return the old bound.

    The compiled kernel reuses the pages of large freed column buffers; the
    pure twin allocates with numpy every time and only records the bound.
    """
    global _pool_limit
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"pool limit must be a non-negative int, not {limit!r}")
    old, _pool_limit = _pool_limit, limit
    return old


def _column_pool_retained():
    """Bytes of written pages the pool holds (for tests): none in the pure twin."""
    return 0


def _wrap64(value: int) -> int:
    """Java long arithmetic: wrap to int64."""
    return ((value + (1 << 63)) % _I64) - (1 << 63)


def _wrap32(value: int) -> int:
    """Java int arithmetic: wrap to int32."""
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _last_sequence(base_sequence: int, delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` in Java int arithmetic.

    A sequence wraps past INT32_MAX back to 0; a corrupt negative delta is
    computed exactly as Java computes it.
    """
    if base_sequence == -1:
        return -1
    if base_sequence > _wrap32(INT32_MAX - delta):
        return _wrap32(delta - _wrap32(INT32_MAX - base_sequence) - 1)
    return _wrap32(base_sequence + delta)


def _inflate(codec: int, data, limit: int, magic: int, position: int):
    if _decompress is None:
        raise UnsupportedCompressionError(
            "no decompressor installed (import kafkastore.records)", position=position
        )
    try:
        return _decompress(codec, data, limit, magic)
    except (CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError) as err:
        if err.position is None:
            err.position = position
        raise


def _codec(attributes: int, magic: int, position: int) -> CompressionType:
    codec = attributes & CODEC_MASK
    if codec > 4 or (codec == 4 and magic < 2):
        raise UnsupportedCompressionError(
            f"Unknown compression type id {codec} for magic {magic}", position=position
        )
    return _CODECS[codec]


# -- records ------------------------------------------------------------------


class Record:
    """One record read from a batch. Immutable.

    ``timestamp`` is what a Kafka consumer reports: the batch's maxTimestamp
    for a LogAppendTime batch (the wrapper's timestamp for a legacy
    wrapper), -1 for magic 0. ``headers`` is a tuple of ``(str, bytes | None)``
    pairs; header keys are decoded as UTF-8 with ``surrogateescape`` so that
    invalid bytes survive a round trip.
    """

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=_EMPTY):
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "timestamp_type", timestamp_type)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "headers", headers)

    def __setattr__(self, name, value):
        raise AttributeError("Record is immutable")

    def _fields(self):
        return (self.offset, self.timestamp, int(self.timestamp_type), self.key,
                self.value, self.headers)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"key={self.key!r}, value={_short(self.value)}, headers={self.headers!r})"
        )


def _short(value):
    if value is not None and len(value) > 40:
        return repr(bytes(value[:40])) + "..."
    return repr(value)


def _read_varint(data, pos: int, end: int, bits: int, where: int) -> tuple[int, int]:
    """Zig-zag varint/varlong at ``pos``, bounded by ``end``."""
    value = 0
    shift = 0
    max_shift = 28 if bits == 32 else 63
    while True:
        if pos >= end:
            raise CorruptRecordError("Found invalid record structure: truncated varint",
                                     position=where)
        b = data[pos]
        pos += 1
        if not b & 0x80:
            value |= b << shift
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > max_shift:
            raise CorruptRecordError(
                "Varint is too long, the most significant bit in the 5th byte is set"
                if bits == 32 else
                "Varlong is too long, most significant bit in the 10th byte is set",
                position=where)
    value &= (1 << bits) - 1
    return (value >> 1) ^ -(value & 1), pos


def _parse_record(data, pos: int, end: int, where: int):
    """Parse one v2 record at ``pos``.

    Returns ``(next_pos, ts_delta, offset_delta, key_span, value_span,
    header_count, headers_start, headers_end)`` where a span is
    ``(start, length)`` with length -1 for null. Every length is checked
    against the record's own declared size before anything is read.
    """
    length, pos = _read_varint(data, pos, end, 32, where)
    if length < 0 or length > end - pos:
        raise CorruptRecordError(
            f"Invalid record size: expected {length} bytes in record payload, but the "
            f"buffer has only {end - pos} remaining bytes", position=where)
    start = pos
    rend = pos + length
    if pos >= rend:
        raise CorruptRecordError("Found invalid record structure: empty record",
                                 position=where)
    pos += 1  # attributes: unused
    ts_delta, pos = _read_varint(data, pos, rend, 64, where)
    offset_delta, pos = _read_varint(data, pos, rend, 32, where)
    key_len, pos = _read_varint(data, pos, rend, 32, where)
    if key_len >= 0:
        if key_len > rend - pos:
            raise CorruptRecordError("Found invalid record structure: key past record end",
                                     position=where)
        key = (pos, key_len)
        pos += key_len
    else:
        key = (pos, -1)
    value_len, pos = _read_varint(data, pos, rend, 32, where)
    if value_len >= 0:
        if value_len > rend - pos:
            raise CorruptRecordError(
                "Found invalid record structure: value past record end", position=where)
        value = (pos, value_len)
        pos += value_len
    else:
        value = (pos, -1)
    count, pos = _read_varint(data, pos, rend, 32, where)
    if count < 0:
        raise CorruptRecordError(f"Found invalid number of record headers {count}",
                                 position=where)
    if count > (rend - pos) // 2:  # each header takes at least 2 bytes
        raise CorruptRecordError(
            f"Found invalid number of record headers {count}: more than the record holds",
            position=where)
    headers_start = pos
    for _ in range(count):
        hkey_len, pos = _read_varint(data, pos, rend, 32, where)
        if hkey_len < 0:
            raise CorruptRecordError("Invalid negative header key size", position=where)
        if hkey_len > rend - pos:
            raise CorruptRecordError(
                "Found invalid record structure: header key past record end",
                position=where)
        pos += hkey_len
        hval_len, pos = _read_varint(data, pos, rend, 32, where)
        if hval_len >= 0:
            if hval_len > rend - pos:
                raise CorruptRecordError(
                    "Found invalid record structure: header value past record end",
                    position=where)
            pos += hval_len
    if pos != rend:
        raise CorruptRecordError(
            f"Invalid record size: expected to read {length} bytes in record payload, "
            f"but instead read {pos - start}", position=where)
    return pos, ts_delta, offset_delta, key, value, count, headers_start, rend


def _decode_headers(data, pos: int, count: int) -> tuple:
    """Headers of an already validated record."""
    out = []
    for _ in range(count):
        klen, pos = _read_varint(data, pos, len(data), 32, 0)
        hkey = bytes(data[pos:pos + klen]).decode("utf-8", "surrogateescape")
        pos += klen
        vlen, pos = _read_varint(data, pos, len(data), 32, 0)
        if vlen >= 0:
            hval = bytes(data[pos:pos + vlen])
            pos += vlen
        else:
            hval = None
        out.append((hkey, hval))
    return tuple(out)


def _span_bytes(data, span):
    start, length = span
    return None if length < 0 else bytes(data[start:start + length])


# -- v2 batches -----------------------------------------------------------------


class RecordBatch:
    """A magic 2 record batch over a buffer, parsed lazily.

    The 61-byte header is decoded on construction; records are decoded only
    when the batch is iterated, and a compressed payload is inflated then
    (bounded by ``max_decompressed_bytes``). The batch keeps a zero-copy view
    of the caller's buffer, so a ``bytearray`` or ``mmap`` under it must not
    shrink while the batch is alive.

    Construction checks only what is needed to read the header safely: the
    magic, that ``batchLength`` covers the header, and that the buffer holds
    the whole batch. :meth:`validate` checks the CRC; iteration checks each
    record's structure. Not thread-safe to iterate concurrently with the
    buffer's owner mutating it; otherwise immutable.
    """

    __slots__ = (
        "_view", "position", "base_offset", "batch_length", "partition_leader_epoch",
        "magic", "crc", "attributes", "last_offset_delta", "first_timestamp",
        "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
        "record_count", "max_decompressed_bytes",
    )

    def __init__(self, buffer, position: int = 0, *,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
        view = memoryview(buffer)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        check_position(position, len(view))
        avail = len(view) - position
        if avail < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, "
                f"only {avail} remain", position=position)
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.first_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = HEADER.unpack_from(view, position)
        if self.magic != 2:
            raise CorruptRecordError(f"Unsupported magic byte {self.magic}",
                                     position=position, offset=self.base_offset)
        if self.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch size {LOG_OVERHEAD + self.batch_length} is smaller than the "
                f"minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                position=position, offset=self.base_offset)
        if self.batch_length > avail - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch of {LOG_OVERHEAD + self.batch_length} bytes extends past the "
                f"end of the buffer ({avail} bytes remain)",
                position=position, offset=self.base_offset)
        self._view = view[position:position + LOG_OVERHEAD + self.batch_length]
        self.position = position
        self.max_decompressed_bytes = max_decompressed_bytes

    # derived header fields
    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return _wrap64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return _wrap64(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> CompressionType:
        return _codec(self.attributes, 2, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.first_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self) -> int:
        return _last_sequence(self.base_sequence, self.last_offset_delta)

    def compute_crc(self) -> int:
        """CRC-32C of bytes [21, end), as stored in a valid batch."""
        return crc32c.crc32c(self._view[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        """Kafka's ``isValid``: size >= 61 and the stored CRC matches."""
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        """Kafka's ``ensureValid``; raises :class:`InvalidCrcError`."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise InvalidCrcError(
                f"Record batch is corrupt (stored crc = {self.crc}, computed crc = "
                f"{computed})", stored=self.crc, computed=computed,
                position=self.position, offset=self.base_offset)

    def to_bytes(self) -> bytes:
        """The whole entry, 12-byte prefix included."""
        return bytes(self._view)

    def payload(self):
        """The records section as stored (compressed or not), zero-copy."""
        return self._view[RECORD_BATCH_OVERHEAD:]

    def _records_data(self):
        codec = self.attributes & CODEC_MASK
        if codec == 0:
            return self.payload()
        self.compression  # raises for an unknown codec
        return _inflate(codec, self.payload(), self.max_decompressed_bytes, 2,
                        self.position)

    def __iter__(self):
        if self.record_count < 0:
            raise CorruptRecordError(f"Found invalid record count {self.record_count}",
                                     position=self.position, offset=self.base_offset)
        return self._records(self._records_data())

    def record_summary(self):
        """What LogValidator needs of the records, decoding no key, value or header.

        Returns ``(count, max_timestamp, index_of_max, min_timestamp, null_keys,
        sequential)``: the records parsed (they must be ``record_count``, with every
        length checked as when iterating); the largest record timestamp
        (``firstTimestamp + delta``) above -1 and the index of the first record holding
        it (-1, -1 if none); the smallest timestamp other than -1 (None if none); how
        many records have a null key; whether the offset deltas are 0, 1, 2, ...
        """
        if self.record_count < 0:
            raise CorruptRecordError(f"Found invalid record count {self.record_count}",
                                     position=self.position, offset=self.base_offset)
        data = self._records_data()
        where = self.position
        end = len(data)
        pos = 0
        max_ts, max_index, min_ts, nulls, sequential = -1, -1, None, 0, True
        for i in range(self.record_count):
            if pos >= end:
                raise CorruptRecordError(
                    "Incorrect declared batch size, premature EOF reached",
                    position=where, offset=self.base_offset)
            pos, ts_delta, offset_delta, key, _value, _count, _hs, _he = \
                _parse_record(data, pos, end, where)
            ts = _wrap64(self.first_timestamp + ts_delta)
            if ts > max_ts:
                max_ts, max_index = ts, i
            if ts != -1 and (min_ts is None or ts < min_ts):
                min_ts = ts
            if key[1] < 0:
                nulls += 1
            if offset_delta != i:
                sequential = False
        if pos != end:
            raise CorruptRecordError(
                "Incorrect declared batch size, records still remaining in file",
                position=where, offset=self.base_offset)
        return self.record_count, max_ts, max_index, min_ts, nulls, sequential

    def _records(self, data):
        where = self.position
        end = len(data)
        pos = 0
        log_append = self.attributes & TIMESTAMP_TYPE_MASK
        ts_type = self.timestamp_type
        for _ in range(self.record_count):
            if pos >= end:
                raise CorruptRecordError(
                    "Incorrect declared batch size, premature EOF reached",
                    position=where, offset=self.base_offset)
            (pos, ts_delta, offset_delta, key, value, count, hstart,
             _hend) = _parse_record(data, pos, end, where)
            ts = self.max_timestamp if log_append else _wrap64(self.first_timestamp + ts_delta)
            headers = _decode_headers(data, hstart, count) if count else _EMPTY
            yield Record(_wrap64(self.base_offset + offset_delta), ts, ts_type,
                         _span_bytes(data, key), _span_bytes(data, value), headers)
        if pos != end:
            raise CorruptRecordError(
                "Incorrect declared batch size, records still remaining in file",
                position=where, offset=self.base_offset)

    def __repr__(self):
        return (
            f"RecordBatch(magic=2, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, count={self.record_count}, "
            f"size={self.size_in_bytes}, position={self.position})"
        )


# -- legacy messages --------------------------------------------------------------


class LegacyRecordBatch:
    """A magic 0 or 1 message (a "batch" of one, or a compressed wrapper).

    Exposes the same attributes as :class:`RecordBatch`, with Kafka's values
    for legacy formats: no producer state (-1), leader epoch -1, never
    transactional or control, ``record_count`` None. ``last_offset`` is the
    stored offset; ``base_offset`` of a wrapper is the first inner offset,
    which needs decompression, so it is computed on first use (like Kafka).
    Iterating a wrapper inflates its value and yields the inner messages
    with absolute offsets.
    """

    __slots__ = (
        "_view", "position", "last_offset", "batch_length", "magic", "crc",
        "attributes", "timestamp", "max_decompressed_bytes", "_key", "_value", "_inner",
        "_inner_messages",
    )

    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    last_offset_delta = None
    record_count = None
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    delete_horizon_ms = None

    def __init__(self, buffer, position: int = 0, *,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
        view = memoryview(buffer)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        check_position(position, len(view))
        avail = len(view) - position
        if avail < LOG_OVERHEAD + MIN_ENTRY_SIZE:
            raise CorruptRecordError("legacy message truncated", position=position)
        offset, size = ENTRY_PREFIX.unpack_from(view, position)
        magic = view[position + MAGIC_OFFSET]
        if magic > 1:
            raise CorruptRecordError(f"Unsupported magic byte {magic}", position=position,
                                     offset=offset)
        if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
            raise CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead for "
                f"magic {magic}", position=position, offset=offset)
        if size > avail - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Message of {LOG_OVERHEAD + size} bytes extends past the end of the buffer",
                position=position, offset=offset)
        entry = view[position:position + LOG_OVERHEAD + size]
        body = LOG_OVERHEAD
        if magic == 0:
            self.crc, _, self.attributes = LEGACY_V0.unpack_from(entry, body)
            self.timestamp = -1
            pos = body + LEGACY_HEADER_V0
        else:
            self.crc, _, self.attributes, self.timestamp = LEGACY_V1.unpack_from(entry, body)
            pos = body + LEGACY_HEADER_V1
        self.attributes &= 0xFF
        end = len(entry)
        key_len = _I32.unpack_from(entry, pos)[0]
        pos += 4
        if key_len >= 0:
            if key_len > end - pos - 4:
                raise CorruptRecordError("message key extends past the message end",
                                         position=position, offset=offset)
            self._key = (pos, key_len)
            pos += key_len
        else:
            self._key = (pos, -1)
        value_len = _I32.unpack_from(entry, pos)[0]
        pos += 4
        if value_len >= 0:
            if value_len > end - pos:
                raise CorruptRecordError("message value extends past the message end",
                                         position=position, offset=offset)
            self._value = (pos, value_len)
        else:
            self._value = (pos, -1)
        self._view = entry
        self.position = position
        self.last_offset = offset
        self.batch_length = size
        self.magic = magic
        self.max_decompressed_bytes = max_decompressed_bytes
        self._inner = None

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def next_offset(self) -> int:
        return _wrap64(self.last_offset + 1)

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def first_timestamp(self) -> int:
        return self.timestamp

    @property
    def compression(self) -> CompressionType:
        return _codec(self.attributes, self.magic, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def key(self):
        return _span_bytes(self._view, self._key)

    @property
    def value(self):
        return _span_bytes(self._view, self._value)

    @property
    def base_offset(self) -> int:
        if self.attributes & CODEC_MASK == 0:
            return self.last_offset
        return self._inner_records()[0].offset

    def compute_crc(self) -> int:
        """CRC-32 of bytes [magic, end), as stored in a valid message."""
        return zlib.crc32(self._view[LOG_OVERHEAD + 4:])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise InvalidCrcError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                stored=self.crc, computed=computed, position=self.position,
                offset=self.last_offset)

    def validate_inner(self) -> None:
        """Check the CRC of every inner message of a compressed wrapper (Kafka's
        ``LogValidator`` does for legacy compressed input: the wrapper's CRC covers the
        compressed bytes only); an uncompressed message has none. Raises
        :class:`~kafkastore.errors.InvalidCrcError` at the wrapper's position with the
        inner message's offset."""
        if self.attributes & CODEC_MASK == 0:
            return
        self._inner_records()
        for msg in self._inner_messages:
            computed = msg.compute_crc()
            if computed != msg.crc:
                raise InvalidCrcError(
                    f"Record is corrupt (stored crc = {msg.crc}, computed crc = {computed}) "
                    f"in an inner message of the compressed message", stored=msg.crc,
                    computed=computed, position=self.position, offset=msg.last_offset)

    def to_bytes(self) -> bytes:
        return bytes(self._view)

    def payload(self):
        """The message value as stored (the compressed stream of a wrapper)."""
        start, length = self._value
        return None if length < 0 else self._view[start:start + length]

    def __iter__(self):
        if self.attributes & CODEC_MASK == 0:
            return iter((Record(self.last_offset, self.timestamp, self.timestamp_type,
                                self.key, self.value, _EMPTY),))
        return iter(self._inner_records())

    def _inner_records(self) -> list:
        if self._inner is None:
            self._inner = self._decode_wrapper()
        return self._inner

    def _decode_wrapper(self) -> list:
        where = self.position
        codec = self.compression
        payload = self.payload()
        if payload is None:
            raise CorruptRecordError("compressed message has a null value",
                                     position=where, offset=self.last_offset)
        data = memoryview(_inflate(int(codec), payload, self.max_decompressed_bytes,
                                   self.magic, where))
        inner = []
        pos = 0
        end = len(data)
        while pos < end:
            if end - pos < LOG_OVERHEAD + MIN_ENTRY_SIZE:
                raise CorruptRecordError("truncated inner message in compressed message",
                                         position=where, offset=self.last_offset)
            try:
                msg = LegacyRecordBatch(data, pos,
                                        max_decompressed_bytes=self.max_decompressed_bytes)
            except CorruptRecordError as err:
                err.position = where
                raise
            if msg.magic != self.magic:
                raise CorruptRecordError(
                    f"inner message magic {msg.magic} does not match wrapper magic "
                    f"{self.magic}", position=where, offset=self.last_offset)
            if msg.attributes & CODEC_MASK:
                raise CorruptRecordError(
                    "compressed message contains a compressed inner message",
                    position=where, offset=self.last_offset)
            inner.append(msg)
            pos += msg.size_in_bytes
        if not inner:
            raise CorruptRecordError("compressed message has no inner messages",
                                     position=where, offset=self.last_offset)
        self._inner_messages = inner
        wrapper_offset = self.last_offset
        if self.magic == 0:
            base = 0  # v0 inner offsets are absolute
        else:
            last_inner = inner[-1].last_offset
            if wrapper_offset == 0:
                base = 0  # some librdkafka versions leave the wrapper offset at 0
            elif wrapper_offset < last_inner:
                raise CorruptRecordError(
                    f"wrapper offset {wrapper_offset} is below its last inner offset "
                    f"{last_inner}", position=where, offset=wrapper_offset)
            else:
                base = wrapper_offset - last_inner
        log_append = self.magic == 1 and self.attributes & TIMESTAMP_TYPE_MASK
        out = []
        for msg in inner:
            if log_append:
                ts, ts_type = self.timestamp, TimestampType.LOG_APPEND_TIME
            else:
                ts, ts_type = msg.timestamp, msg.timestamp_type
            out.append(Record(_wrap64(base + msg.last_offset), ts, ts_type, msg.key,
                              msg.value, _EMPTY))
        return out

    def __repr__(self):
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.last_offset}, "
            f"codec={self.attributes & CODEC_MASK}, size={self.size_in_bytes}, "
            f"position={self.position})"
        )


# -- walking a buffer of entries --------------------------------------------------


def _bounds(view, start, end):
    n = len(view)
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise TypeError("start and end must be ints")
    if end is None or end > n:
        end = n
    if start < 0 or start > end:
        raise ValueError(f"start {start} is outside [0, {end}]")
    return start, end


def _as_view(buffer):
    view = memoryview(buffer)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def read_batch(buffer, position: int = 0, *,
               max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
    """The entry at ``position`` as a :class:`RecordBatch` or :class:`LegacyRecordBatch`.

    Raises :class:`CorruptRecordError` when fewer than 17 bytes remain, the
    size field is below 14, the entry is incomplete, or the magic is not 0-2.
    """
    view = _as_view(buffer)
    check_position(position, len(view))
    avail = len(view) - position
    if avail < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError("entry header truncated", position=position)
    offset, size = ENTRY_PREFIX.unpack_from(view, position)
    if size < MIN_ENTRY_SIZE:
        raise CorruptRecordError(
            f"Record size {size} is smaller than the minimum record overhead "
            f"({MIN_ENTRY_SIZE})", position=position, offset=offset)
    magic = view[position + MAGIC_OFFSET]
    if magic == 2:
        return RecordBatch(view, position, max_decompressed_bytes=max_decompressed_bytes)
    if magic < 2:
        return LegacyRecordBatch(view, position,
                                 max_decompressed_bytes=max_decompressed_bytes)
    raise CorruptRecordError(f"Unsupported magic byte {magic}", position=position,
                             offset=offset)


def iter_batches(buffer, start: int = 0, end: int | None = None, *, validate: bool = True,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
    """Yield every entry of ``buffer[start:end]`` as a batch object.

    Follows Kafka's ``FileLogInputStream``: fewer than 18 bytes left, or an
    entry that extends past ``end``, ends the iteration silently (a partial
    tail is what a crash leaves); a size field below 14 or an unknown magic
    raises :class:`CorruptRecordError`. With ``validate`` each batch's CRC is
    checked before it is yielded (:class:`InvalidCrcError`).
    """
    view = _as_view(buffer)
    pos, end = _bounds(view, start, end)
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        size = _I32.unpack_from(view, pos + 8)[0]
        if size < MIN_ENTRY_SIZE:
            raise CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({MIN_ENTRY_SIZE})", position=pos)
        if size > end - pos - LOG_OVERHEAD:
            return
        batch = read_batch(view[:end], pos, max_decompressed_bytes=max_decompressed_bytes)
        if validate:
            batch.validate()
        yield batch
        pos += LOG_OVERHEAD + size


class BatchScan:
    """Result of :func:`scan_batches`: one row per entry, in numpy columns.

    Columns: ``position`` (int64), ``size`` (int64, 12-byte prefix
    included), ``magic`` (int8), ``base_offset`` (int64; -1 for a compressed
    legacy wrapper, whose first offset needs decompression), ``last_offset``
    (int64), ``max_timestamp`` (int64; -1 for magic 0), ``record_count``
    (int32; -1 for a compressed legacy wrapper).

    ``valid_bytes`` counts the bytes from ``start`` up to the end of the last
    good entry. ``error`` is None when the scan reached ``end`` or stopped at
    a partial tail, otherwise the :class:`CorruptRecordError` that stopped it.
    """

    __slots__ = ("position", "size", "magic", "base_offset", "last_offset",
                 "max_timestamp", "record_count", "valid_bytes", "error", "start", "end")

    def __len__(self):
        return len(self.position)

    @property
    def truncated(self) -> bool:
        """True when bytes follow the last good entry (partial or corrupt)."""
        return self.start + self.valid_bytes < self.end

    def __repr__(self):
        return (f"BatchScan(entries={len(self)}, valid_bytes={self.valid_bytes}, "
                f"error={self.error!r})")


_SCAN_COLUMNS = (
    ("position", np.int64), ("size", np.int64), ("magic", np.int8),
    ("base_offset", np.int64), ("last_offset", np.int64), ("max_timestamp", np.int64),
    ("record_count", np.int32),
)


def scan_batches(buffer, start: int = 0, end: int | None = None, *,
                 validate: bool = True) -> BatchScan:
    """Walk the entries of ``buffer[start:end]`` reading only their headers.

    Never raises for bad bytes: it stops at the first entry that is
    incomplete (``error`` None) or corrupt (``error`` set) and reports how
    many bytes were good. This is what recovery and index building use.
    With ``validate`` each entry's CRC is checked (CRC-32C for v2, CRC-32
    for v0/v1), as Kafka's ``LogSegment.recover`` does.
    """
    view = _as_view(buffer)
    pos, end = _bounds(view, start, end)
    scan = BatchScan()
    scan.start, scan.end = pos, end
    rows = []
    error = None
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        offset, size = ENTRY_PREFIX.unpack_from(view, pos)
        if size < MIN_ENTRY_SIZE:
            error = CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({MIN_ENTRY_SIZE})", position=pos, offset=offset)
            break
        if size > end - pos - LOG_OVERHEAD:
            break
        magic = view[pos + MAGIC_OFFSET]
        try:
            if magic == 2:
                if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                    raise CorruptRecordError(
                        f"Record batch size {LOG_OVERHEAD + size} is smaller than the "
                        f"minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                        position=pos, offset=offset)
                h = HEADER.unpack_from(view, pos)
                if validate:
                    computed = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + size])
                    if computed != h[4]:
                        raise InvalidCrcError(
                            f"Record batch is corrupt (stored crc = {h[4]}, computed crc "
                            f"= {computed})", stored=h[4], computed=computed,
                            position=pos, offset=offset)
                rows.append((pos, LOG_OVERHEAD + size, 2, offset,
                             _wrap64(offset + h[6]), h[8], h[12]))
            elif magic < 2:
                if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
                    raise CorruptRecordError(
                        f"Record size {size} is smaller than the minimum record overhead "
                        f"for magic {magic}", position=pos, offset=offset)
                crc, _, attributes = LEGACY_V0.unpack_from(view, pos + LOG_OVERHEAD)
                if validate:
                    computed = zlib.crc32(view[pos + LOG_OVERHEAD + 4:pos + LOG_OVERHEAD + size])
                    if computed != crc:
                        raise InvalidCrcError(
                            f"Record is corrupt (stored crc = {crc}, computed crc = "
                            f"{computed})", stored=crc, computed=computed,
                            position=pos, offset=offset)
                ts = -1 if magic == 0 else LEGACY_V1.unpack_from(view, pos + LOG_OVERHEAD)[3]
                compressed = attributes & CODEC_MASK
                rows.append((pos, LOG_OVERHEAD + size, magic,
                             -1 if compressed else offset, offset, ts,
                             -1 if compressed else 1))
            else:
                raise CorruptRecordError(f"Unsupported magic byte {magic}", position=pos,
                                         offset=offset)
        except CorruptRecordError as err:
            error = err
            break
        pos += LOG_OVERHEAD + size
    for i, (name, dtype) in enumerate(_SCAN_COLUMNS):
        setattr(scan, name, np.array([r[i] for r in rows], dtype=dtype))
    scan.valid_bytes = (int(scan.position[-1]) + int(scan.size[-1]) - scan.start) if rows else 0
    scan.error = error
    return scan


# -- columnar decode ---------------------------------------------------------------

COLUMN_NAMES = (
    "offset", "timestamp", "timestamp_type", "key_offsets", "key_data", "key_null",
    "value_offsets", "value_data", "value_null", "header_count",
)


def decode_columns(buffer, start: int = 0, end: int | None = None, *,
                   validate: bool = True, include_control: bool = False,
                   max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                   headers: bool = False) -> dict:
    """Decode every record of ``buffer[start:end]`` into numpy columns.

    Returns a dict: ``offset``, ``timestamp`` (int64), ``timestamp_type``
    (int8), ``key_offsets``/``value_offsets`` (int64, n+1 Arrow-style
    offsets into ``key_data``/``value_data``, uint8), ``key_null``/
    ``value_null`` (bool, True where null) and ``header_count`` (int32).
    With ``headers`` it also holds the headers themselves (h of them in
    all): ``header_offsets`` (int64, n+1: record i's headers are entries
    ``header_offsets[i]:header_offsets[i + 1]``), ``header_key_offsets``/
    ``header_value_offsets`` (int64, h+1, into ``header_key_data``/
    ``header_value_data``, uint8: the raw bytes, keys not decoded) and
    ``header_value_null`` (bool, h). Legacy messages have no headers.
    Control batches are skipped unless ``include_control``. Entries are
    walked, checked and rejected as :func:`iter_batches` does, in two
    passes: headers, CRCs of compressed batches, inflation and legacy
    messages first, then each uncompressed batch's CRC and records. When a
    buffer holds several bad entries, the error raised is therefore the
    first one in that order, not necessarily the first in the buffer.
    """
    # Same two passes, in the same order, as the compiled kernel (so both
    # raise the same error first): pass 1 checks headers, inflates compressed
    # payloads and reads legacy messages; pass 2 checks an uncompressed
    # batch's CRC right before parsing it.
    parts = []
    for batch in iter_batches(buffer, start, end, validate=False,
                              max_decompressed_bytes=max_decompressed_bytes):
        if batch.magic != 2:
            if validate:
                batch.validate()
            parts.append((None, list(batch)))
            continue
        if batch.is_control and not include_control:
            if validate:
                batch.validate()
            continue
        if batch.record_count < 0:
            raise CorruptRecordError(
                f"Found invalid record count {batch.record_count}",
                position=batch.position, offset=batch.base_offset)
        if batch.attributes & CODEC_MASK:
            if validate:
                batch.validate()
            data = batch._records_data()
            records_len = len(data)
        else:
            data = None
            records_len = batch.batch_length - (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
        if batch.record_count > records_len // MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record count {batch.record_count} exceeds what {records_len} bytes "
                f"can hold", position=batch.position, offset=batch.base_offset)
        parts.append((batch, data))
    offsets, timestamps, ts_types, header_counts = [], [], [], []
    keys, values = [], []
    header_offsets, header_keys, header_values = [0], [], []
    for batch, data in parts:
        if batch is None:
            recs = data
        else:
            if data is None:
                if validate:
                    batch.validate()
                data = batch.payload()
            recs = batch._records(data)
        for rec in recs:
            offsets.append(rec.offset)
            timestamps.append(rec.timestamp)
            ts_types.append(int(rec.timestamp_type))
            keys.append(rec.key)
            values.append(rec.value)
            header_counts.append(len(rec.headers))
            if headers:
                for hkey, hval in rec.headers:
                    # Record.headers decoded the key with surrogateescape, which
                    # gives back the stored bytes exactly, valid UTF-8 or not
                    header_keys.append(hkey.encode("utf-8", "surrogateescape"))
                    header_values.append(hval)
                header_offsets.append(len(header_keys))
    out = {
        "offset": np.array(offsets, dtype=np.int64),
        "timestamp": np.array(timestamps, dtype=np.int64),
        "timestamp_type": np.array(ts_types, dtype=np.int8),
        "header_count": np.array(header_counts, dtype=np.int32),
    }
    binary = [("key", keys), ("value", values)]
    if headers:
        out["header_offsets"] = np.array(header_offsets, dtype=np.int64)
        binary += [("header_key", header_keys), ("header_value", header_values)]
    for name, items in binary:
        lengths = np.array([0 if b is None else len(b) for b in items], dtype=np.int64)
        offs = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offs[1:])
        out[name + "_offsets"] = offs
        out[name + "_data"] = np.frombuffer(
            b"".join(b for b in items if b is not None), dtype=np.uint8).copy()
        if name != "header_key":  # header keys are never null
            out[name + "_null"] = np.array([b is None for b in items], dtype=bool)
    return out


# -- writing v2 batches -------------------------------------------------------------


def _as_bytes(obj, what: str):
    if obj is None:
        return None
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        raise TypeError(f"record {what} must be bytes-like or None, not str")
    try:
        return bytes(memoryview(obj))
    except TypeError:
        raise TypeError(
            f"record {what} must be bytes-like or None, not {type(obj).__name__}"
        ) from None


def _unpack_record(rec):
    """``(key, value, timestamp, headers)`` from a tuple or a record-like object."""
    if isinstance(rec, (tuple, list)):
        n = len(rec)
        if not 2 <= n <= 4:
            raise TypeError("a record tuple is (key, value[, timestamp[, headers]])")
        key, value = rec[0], rec[1]
        ts = rec[2] if n > 2 else None
        headers = rec[3] if n > 3 else None
    else:
        try:
            key, value = rec.key, rec.value
        except AttributeError:
            raise TypeError(
                "a record is a (key, value[, timestamp[, headers]]) tuple or an object "
                f"with key and value attributes, not {type(rec).__name__}") from None
        ts = getattr(rec, "timestamp", None)
        headers = getattr(rec, "headers", None)
    if ts is not None and not isinstance(ts, int):
        raise TypeError(f"record timestamp must be an int or None, not {type(ts).__name__}")
    return key, value, ts, headers


def _encode_headers(headers) -> tuple[int, bytes]:
    if not headers:
        return 0, b""
    out = bytearray()
    n = 0
    for item in headers:
        try:
            hkey, hval = item
        except (TypeError, ValueError):
            raise TypeError("a header is a (key, value) pair") from None
        if isinstance(hkey, str):
            hkey = hkey.encode("utf-8", "surrogateescape")
        elif hkey is None:
            raise TypeError("header keys cannot be null")
        else:
            hkey = _as_bytes(hkey, "header key")
        hval = _as_bytes(hval, "header value")
        out += _uvarint(_zz32(len(hkey)))
        out += hkey
        if hval is None:
            out += b"\x01"  # zig-zag of -1
        else:
            out += _uvarint(_zz32(len(hval)))
            out += hval
        n += 1
    return n, bytes(out)


def _zz32(v: int) -> int:
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


def _zz64(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF


def _uvarint(zz: int) -> bytes:
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def _check_attributes(value: int) -> int:
    """Any 16-bit pattern (the field is an int16; Kafka reads it as a short)."""
    if not isinstance(value, int):
        raise TypeError(f"attributes must be an int, not {type(value).__name__}")
    if not -0x8000 <= value <= 0xFFFF:
        raise ValueError(f"attributes {value} do not fit 16 bits")
    return value & 0xFFFF


def _check_int(value: int, bits: int, what: str) -> int:
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise ValueError(f"{what} {value} is outside the int{bits} range")
    return value


def encode_batch_v2(records, base_offset: int = 0, partition_leader_epoch: int = -1,
                    attributes: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                    base_sequence: int = -1, default_timestamp: int = -1,
                    max_timestamp: int | None = None, last_offset_delta: int | None = None,
                    offsets=None, delete_horizon_ms: int | None = None,
                    compress=None) -> bytes:
    """Build one magic 2 batch; return its bytes, CRC-32C included.

    ``records`` items are ``(key, value[, timestamp[, headers]])`` tuples or
    objects with ``key``/``value`` (and optional ``timestamp``/``headers``)
    attributes, such as a decoded :class:`Record`. A record without a
    timestamp gets ``default_timestamp``. ``attributes`` carries the codec,
    timestamp type, transactional and control bits; bit 6 is set when
    ``delete_horizon_ms`` is given, and then ``baseTimestamp`` is the
    horizon. ``offsets`` optionally gives each record's absolute offset
    (strictly increasing, within int32 of ``base_offset``), as a compacted
    batch keeps; ``last_offset_delta`` may then exceed the last record's.
    ``max_timestamp`` overrides the computed maximum (used for
    LogAppendTime). ``compress(view) -> bytes`` compresses the records
    section when the codec bits are not 0.
    """
    _check_int(base_offset, 64, "base offset")
    _check_int(partition_leader_epoch, 32, "partition leader epoch")
    _check_attributes(attributes)
    _check_int(producer_id, 64, "producer id")
    _check_int(producer_epoch, 16, "producer epoch")
    _check_int(base_sequence, 32, "base sequence")
    _check_int(default_timestamp, 64, "timestamp")
    if max_timestamp is not None:
        _check_int(max_timestamp, 64, "max timestamp")
    if last_offset_delta is not None:
        _check_int(last_offset_delta, 32, "last offset delta")
    if delete_horizon_ms is not None:
        _check_int(delete_horizon_ms, 64, "delete horizon")
    records = records if isinstance(records, (list, tuple)) else list(records)
    n = len(records)
    if offsets is not None:
        offsets = list(offsets)
        if len(offsets) != n:
            raise ValueError(f"{len(offsets)} offsets given for {n} records")
    attributes &= 0x3F  # bit 6 is ours to set; bits 7-15 are unused and written as 0
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    items = []
    timestamps = []
    prev_delta = -1
    for i, rec in enumerate(records):
        key, value, ts, headers = _unpack_record(rec)
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        ts = default_timestamp if ts is None else _check_int(ts, 64, "timestamp")
        if offsets is None:
            delta = i
        else:
            _check_int(offsets[i], 64, "offset")
            delta = offsets[i] - base_offset
            if not 0 <= delta <= INT32_MAX or delta <= prev_delta:
                raise ValueError(
                    f"offset {offsets[i]} must be above the previous one and within "
                    f"int32 of base offset {base_offset}")
        prev_delta = delta
        hcount, hbytes = _encode_headers(headers)
        items.append((key, value, ts, delta, hcount, hbytes))
        timestamps.append(ts)
    if n:
        base_ts = timestamps[0] if delete_horizon_ms is None else delete_horizon_ms
        max_ts = max(timestamps) if max_timestamp is None else max_timestamp
        last_delta = prev_delta
    else:
        # Kafka's writeEmptyHeader: no first timestamp, the max timestamp kept
        max_ts = -1 if max_timestamp is None else max_timestamp
        base_ts = -1 if delete_horizon_ms is None else delete_horizon_ms
        last_delta = 0
    if last_offset_delta is not None:
        if not last_delta <= last_offset_delta <= INT32_MAX:
            raise ValueError(
                f"last offset delta {last_offset_delta} is below the last record's "
                f"delta {last_delta} or above int32")
        last_delta = last_offset_delta
    body = bytearray()
    for key, value, ts, delta, hcount, hbytes in items:
        ts_delta = ts - base_ts
        if not -(1 << 63) <= ts_delta < (1 << 63):
            raise ValueError(f"timestamp {ts} is too far from the base timestamp {base_ts}")
        rec = bytearray(b"\x00")
        rec += _uvarint(_zz64(ts_delta))
        rec += _uvarint(_zz32(delta))
        if key is None:
            rec += b"\x01"
        else:
            rec += _uvarint(_zz32(len(key)))
            rec += key
        if value is None:
            rec += b"\x01"
        else:
            rec += _uvarint(_zz32(len(value)))
            rec += value
        rec += _uvarint(_zz32(hcount))
        rec += hbytes
        if len(rec) > INT32_MAX:
            raise RecordTooLargeError("record does not fit Kafka's int32 size field",
                                      limit=INT32_MAX)
        body += _uvarint(_zz32(len(rec)))
        body += rec
    if attributes & CODEC_MASK:
        if compress is None:
            raise ValueError("a compressed batch needs a compress function")
        body = compress(memoryview(body))
    total = RECORD_BATCH_OVERHEAD + len(body)
    if total - LOG_OVERHEAD > INT32_MAX:
        raise RecordTooLargeError(f"batch of {total} bytes does not fit Kafka's int32 size",
                                  limit=INT32_MAX + LOG_OVERHEAD)
    out = bytearray(total)
    HEADER.pack_into(out, 0, base_offset, total - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
                     attributes, last_delta, base_ts, max_ts, producer_id, producer_epoch,
                     base_sequence, n)
    out[RECORD_BATCH_OVERHEAD:] = body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
