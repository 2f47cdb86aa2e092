"""RecordBatch v2 (Kafka's ``DefaultRecordBatch``): the 61-byte header and its records.

:class:`RecordBatch` reads one magic 2 batch over a caller's buffer; its
records are parsed by :func:`kafkastore._pure.default_record.parse_record`,
the one record parser. The batch layout is documented field by field in
``kafkastore/_pure/record_batch.py``.

Thread safety: a batch is immutable once built; iterating it while the
buffer's owner mutates the buffer is not safe.
"""

from __future__ import annotations

import crc32c

from kafkastore._pure.default_record import Record, decode_headers, parse_record
from kafkastore._pure.reader import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DELETE_HORIZON_MASK,
    EMPTY,
    HEADER,
    INT32_MAX,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TS_TYPES,
    as_view,
    check_codec,
    check_position,
    inflate,
    wrap32,
    wrap64,
)
from kafkastore.errors import CorruptRecordError, InvalidCrcError
from kafkastore.types import CompressionType, TimestampType

__all__ = ["RecordBatch"]


def _last_sequence(base_sequence: int, delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` in Java int arithmetic.

    A sequence wraps past INT32_MAX back to 0; a corrupt negative delta is
    computed exactly as Java computes it.
    """
    if base_sequence == -1:
        return -1
    if base_sequence > wrap32(INT32_MAX - delta):
        return wrap32(delta - wrap32(INT32_MAX - base_sequence) - 1)
    return wrap32(base_sequence + delta)



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
        view = as_view(buffer)
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
        return wrap64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return wrap64(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> CompressionType:
        return check_codec(self.attributes, 2, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        return TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

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
        return inflate(codec, self.payload(), self.max_decompressed_bytes, 2,
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
            (_start, _body, _ts_end, pos, ts_delta, offset_delta, _key_pos, key_len,
             _value_pos, _value_len, _count, _headers) = parse_record(data, pos, end, where)
            ts = wrap64(self.first_timestamp + ts_delta)
            if ts > max_ts:
                max_ts, max_index = ts, i
            if ts != -1 and (min_ts is None or ts < min_ts):
                min_ts = ts
            if key_len < 0:
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
        base_offset, first_ts, max_ts = self.base_offset, self.first_timestamp, self.max_timestamp
        parse, headers_of, wrap, record = parse_record, decode_headers, wrap64, Record
        for _ in range(self.record_count):
            if pos >= end:
                raise CorruptRecordError(
                    "Incorrect declared batch size, premature EOF reached",
                    position=where, offset=base_offset)
            (_start, _body, _ts_end, pos, ts_delta, offset_delta, key_pos, key_len,
             value_pos, value_len, count, hstart) = parse(data, pos, end, where)
            yield record(wrap(base_offset + offset_delta),
                         max_ts if log_append else wrap(first_ts + ts_delta), ts_type,
                         None if key_len < 0 else bytes(data[key_pos:key_pos + key_len]),
                         None if value_len < 0 else bytes(data[value_pos:value_pos + value_len]),
                         headers_of(data, hstart, count) if count else EMPTY)
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
