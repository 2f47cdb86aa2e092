"""Legacy messages, magic 0 and 1 (Kafka's ``LegacyRecord`` and its batch wrappers).

:class:`LegacyRecordBatch` reads one message: a plain message is a "batch"
of one record; a compressed message (a wrapper) holds a compressed stream
of inner messages as its value, decoded on first use. The message layout is
documented in ``kafkastore/_pure/record_batch.py``.

Thread safety: a message object caches its decoded inner messages on first
use; do not share one between threads before it has been iterated.
"""

from __future__ import annotations

import zlib

from kafkastore._pure.default_record import Record
from kafkastore._pure.reader import (
    CODEC_MASK,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    EMPTY,
    ENTRY_PREFIX,
    INT32,
    LEGACY_HEADER_V0,
    LEGACY_HEADER_V1,
    LEGACY_OVERHEAD_V1,
    LEGACY_V0,
    LEGACY_V1,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_ENTRY_SIZE,
    TIMESTAMP_TYPE_MASK,
    TS_TYPES,
    as_view,
    check_codec,
    check_position,
    inflate,
    wrap64,
)
from kafkastore.errors import CorruptRecordError, InvalidCrcError
from kafkastore.types import CompressionType, TimestampType

__all__ = ["LegacyRecordBatch"]


def _span_bytes(data, span):
    start, length = span
    return None if length < 0 else bytes(data[start:start + length])


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
        view = as_view(buffer)
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
        key_len = INT32.unpack_from(entry, pos)[0]
        pos += 4
        if key_len >= 0:
            if key_len > end - pos - 4:
                raise CorruptRecordError("message key extends past the message end",
                                         position=position, offset=offset)
            self._key = (pos, key_len)
            pos += key_len
        else:
            self._key = (pos, -1)
        value_len = INT32.unpack_from(entry, pos)[0]
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
        return wrap64(self.last_offset + 1)

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def first_timestamp(self) -> int:
        return self.timestamp

    @property
    def compression(self) -> CompressionType:
        return check_codec(self.attributes, self.magic, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

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
                                self.key, self.value, EMPTY),))
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
        data = memoryview(inflate(int(codec), payload, self.max_decompressed_bytes,
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
            out.append(Record(wrap64(base + msg.last_offset), ts, ts_type, msg.key,
                              msg.value, EMPTY))
        return out

    def __repr__(self):
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.last_offset}, "
            f"codec={self.attributes & CODEC_MASK}, size={self.size_in_bytes}, "
            f"position={self.position})"
        )
