"""Kafka's ``LogValidator``: what a leader checks and rewrites before a produce is appended.

A produce request carries, for one partition, one v2 batch (a producer never sends
more), or legacy v0/v1 messages: either one compressed wrapper or a run of
uncompressed messages. :meth:`Log.append_batches` on the leader path
(``assign_offsets=True``) maps its input onto such produces (see
:func:`split_produces`) and hands each to :meth:`LogValidator.validate`, which
returns the bytes to write, as Kafka's ``validateMessagesAndAssignOffsets`` does:

* every batch has the first batch's magic; a v2 batch has base offset 0, a count
  equal to its offset range, is no control batch, and a producer id comes with a
  sequence >= 0;
* every record: a key on a compacted topic; a CreateTime timestamp (other than -1)
  within ``message.timestamp.before/after.max.ms`` of now; no LogAppendTime set by
  the producer; no compressed record inside a legacy wrapper;
* offsets are assigned from the log end offset; the batch's max timestamp is
  recomputed from its records (or set to now for LogAppendTime topics) and the
  partition leader epoch stamped when one is known;
* in place (only the header patched, the CRC recomputed when the timestamp
  changed) when the batch is v2 and its codec is the topic's target codec
  (``compression.type``; ``producer`` keeps the producer's); otherwise (legacy input,
  a different codec, non-consecutive offset deltas in a compressed batch) the
  records are rebuilt into one v2 batch with the target codec, keeping the
  producer id, epoch, base sequence and transactional flag (Kafka 3.0+ writes magic
  2 only: legacy input is up-converted).

The follower path (``assign_offsets=False``) runs none of this, as Kafka's
``appendAsFollower`` does not.

Thread-safety: a :class:`LogValidator` holds only its configuration; ``validate`` is a
pure function of its arguments and may run in any thread.
"""

from __future__ import annotations

from typing import NamedTuple

import crc32c

from kafkastore.batch_header import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    INT16,
    INT32,
    INT64,
    LEGACY_ATTRIBUTES_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    UINT32,
)
from kafkastore.config import LogConfig
from kafkastore.errors import InvalidRecordError, InvalidRecordTimestampError, RecordTooLargeError
from kafkastore.records import (
    CompressionType,
    TimestampType,
    encode_v2,
    iter_batches,
    read_batch,
)

__all__ = ["LogValidator", "ValidatedProduce", "check_timestamp_window", "codec_level",
           "split_produces", "target_codec"]

_tuple_new = tuple.__new__   # a NamedTuple without its Python __new__ (the append path)


def target_codec(config: LogConfig, source: int) -> CompressionType:
    """Kafka's ``BrokerCompressionType.targetCompression``: the topic's
    ``compression.type``, or the producer's codec (``source``) for ``producer``."""
    if config.compression_type == "producer":
        return CompressionType(source)
    return CompressionType.parse(config.compression_type)


def codec_level(config: LogConfig, codec) -> int | None:
    """``compression.<codec>.level`` for ``codec`` (None: the codec's default)."""
    if codec == CompressionType.GZIP:
        level = config.compression_gzip_level
        return None if level == -1 else level
    if codec == CompressionType.LZ4:
        return config.compression_lz4_level
    if codec == CompressionType.ZSTD:
        return config.compression_zstd_level
    return None


def split_produces(magics, attributes, path: str) -> list[range]:
    """Map the entries of one ``append_batches`` call onto Kafka produce requests.

    Kafka takes one v2 batch per produce, or legacy messages as one compressed wrapper
    or one run of uncompressed messages, all of one magic. Here each v2 batch is its
    own produce, each legacy wrapper too, and a run of uncompressed legacy messages is
    one; mixed magic is refused as Kafka refuses it within one request. Returns the
    index ranges of the produces.
    """
    first = magics[0]
    out: list[range] = []
    start = 0
    n = len(magics)
    for i in range(n):
        if magics[i] != first:
            raise InvalidRecordError(
                f"Batch magic {magics[i]} is not the same as the first batch's magic byte "
                f"{first} in the append to {path}", path=path)
    if first >= 2:
        return [range(i, i + 1) for i in range(n)]
    i = 0
    while i < n:
        if attributes[i] & CODEC_MASK:
            if start < i:
                out.append(range(start, i))
            out.append(range(i, i + 1))
            start = i + 1
        i += 1
    if start < n:
        out.append(range(start, n))
    return out


class ValidatedProduce(NamedTuple):
    """One produce after validation: what to append and what the append reports."""

    data: object                    # bytes-like: the whole v2 batch (or legacy entries)
    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    size_maybe_changed: bool


class LogValidator:
    """Kafka's ``LogValidator`` for one log's configuration (the leader path).

    ``path`` names the log in errors; ``now`` is taken per call. Stateless between
    calls (see the module docstring for the rules)."""

    def __init__(self, config: LogConfig, path: str) -> None:
        self.config = config
        self.path = path
        self._log_append = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        self._compacted = config.compact
        self._before = config.message_timestamp_before_max_ms
        self._after = config.message_timestamp_after_max_ms
        # the codec every produce ends in; None: the producer's (``producer``)
        self._target = None if config.compression_type == "producer" \
            else CompressionType.parse(config.compression_type)

    @property
    def compacted(self) -> bool:
        """Whether the topic is compacted (every record needs a key)."""
        return self._compacted

    def check_keys(self, records) -> None:
        """Refuse records without a key, for :meth:`Log.append` on a compacted topic:
        ``(key, value, ...)`` tuples or record objects."""
        for i, record in enumerate(records):
            key = record[0] if isinstance(record, tuple) else record.key
            if key is None:
                raise InvalidRecordError(
                    f"Compacted topic cannot accept message without key in topic partition "
                    f"{self.path} (record {i} of the append)", path=self.path)

    @property
    def log_append_time(self) -> bool:
        """Whether the topic stamps batches with the append time."""
        return self._log_append

    # -- the whole produce ------------------------------------------------------------

    def validate(self, buf: bytearray, positions, sizes, magic: int, counter: int, now: int,
                 leader_epoch: int | None, origin: str = "client") -> ValidatedProduce:
        """Validate the entries at ``positions``/``sizes`` of ``buf`` (one produce, all of
        ``magic``) and assign offsets from ``counter``. A v2 batch kept in place is
        patched in ``buf``. Control batches are refused unless ``origin`` is
        ``coordinator``."""
        if magic >= 2:
            return self._validate_v2(buf, positions[0], sizes[0], counter, now, leader_epoch,
                                     origin)
        return self._validate_legacy(buf, positions, sizes, counter, now, leader_epoch)

    def _validate_v2(self, buf, pos, size, counter, now, leader_epoch,
                     origin) -> ValidatedProduce:
        view = memoryview(buf)[pos:pos + size]
        batch = read_batch(view)   # structure and CRC were checked by the caller's scan
        path = self.path
        if batch.base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append to {path} should be 0, "
                f"but it is {batch.base_offset}", position=pos, path=path)
        attrs = batch.attributes
        if origin == "client":   # Kafka checks these for clients only
            count = batch.record_count
            if batch.last_offset_delta < 0:
                raise InvalidRecordError(
                    f"Batch has an invalid offset range: [0, {batch.last_offset_delta}] in the "
                    f"append to {path}", position=pos, path=path)
            if count <= 0:
                raise InvalidRecordError(f"Invalid reported count for record batch: {count} in "
                                         f"the append to {path}", position=pos, path=path)
            if batch.last_offset_delta + 1 != count:
                raise InvalidRecordError(
                    f"Inconsistent batch offset range [0, {batch.last_offset_delta}] and count of "
                    f"records {count} in the append to {path}", position=pos, path=path)
            if attrs & CONTROL_MASK:
                raise InvalidRecordError(f"Clients are not allowed to write control records in "
                                         f"the append to {path}", position=pos, path=path)
            if batch.producer_id >= 0 and batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {batch.base_sequence} in record batch with "
                    f"producerId {batch.producer_id} in the append to {path}",
                    position=pos, path=path)
        n, max_ts, _max_index, min_ts, nulls, sequential = batch.record_summary()
        if nulls and self._compacted:
            self._no_key(pos)
        producer_lat = bool(attrs & TIMESTAMP_TYPE_MASK)
        if producer_lat:
            # a LogAppendTime batch: every record's timestamp is the header's
            ts = batch.max_timestamp
            max_ts, min_ts = ts, (None if ts == -1 else ts)
            if self._log_append or ts == -1:
                self._producer_log_append_time(pos)
        if not self._log_append and min_ts is not None:
            self._check_window(min_ts, max_ts, now, batch, pos)
        source = attrs & CODEC_MASK
        target = source if self._target is None else self._target
        if attrs & CONTROL_MASK and source == 0:
            target = 0   # Kafka: control records are not compressed unless written so
        last = counter + n - 1
        if source == target and (source == 0 or sequential):
            # in place: offsets, leader epoch and max timestamp in the header
            INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, counter)
            if leader_epoch is not None:
                INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
            new_attrs = (attrs | TIMESTAMP_TYPE_MASK) if self._log_append \
                else (attrs & ~TIMESTAMP_TYPE_MASK)
            new_max = now if self._log_append else max_ts
            if new_attrs != attrs or new_max != batch.max_timestamp:
                INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, new_attrs)
                INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, new_max)
                UINT32.pack_into(buf, pos + CRC_OFFSET,
                                 crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + size]))
            return _tuple_new(ValidatedProduce, (view, counter, last, new_max, last, False))
        records = list(batch)
        return self._rebuild(records, target, counter, now, batch.producer_id,
                             batch.producer_epoch, batch.base_sequence,
                             bool(attrs & TRANSACTIONAL_MASK),
                             batch.partition_leader_epoch if leader_epoch is None
                             else leader_epoch)

    def _validate_legacy(self, buf, positions, sizes, counter, now,
                         leader_epoch) -> ValidatedProduce:
        records = []
        source = 0
        for pos, size in zip(positions, sizes):
            entry = next(iter_batches(memoryview(buf)[pos:pos + size], validate=False))
            codec = buf[pos + LEGACY_ATTRIBUTES_OFFSET] & CODEC_MASK
            if codec:
                source = codec
                entry.validate_inner()   # the wrapper's CRC covers the compressed bytes only
                inner = list(entry)
                for record in inner:
                    self._check_legacy_record(record, entry, pos, now)
                records.extend(inner)
            else:
                record = next(iter(entry))
                self._check_legacy_record(record, entry, pos, now)
                records.append(record)
        target = target_codec(self.config, source)
        return self._rebuild(records, target, counter, now, -1, -1, -1, False,
                             -1 if leader_epoch is None else leader_epoch)

    def _check_legacy_record(self, record, entry, pos, now) -> None:
        if self._compacted and record.key is None:
            self._no_key(pos)
        if not self._log_append and record.timestamp != -1:
            check_timestamp_window((record,), now, self._before, self._after, self.path, pos)
        elif entry.magic == 1 and entry.attributes & TIMESTAMP_TYPE_MASK:
            self._producer_log_append_time(pos)

    def _rebuild(self, records, codec, counter, now, producer_id, producer_epoch,
                 base_sequence, transactional, leader_epoch) -> ValidatedProduce:
        """Kafka's ``buildRecordsAndAssignOffsets``: one v2 batch of ``records`` with the
        target codec, offsets from ``counter``."""
        attributes = int(codec) | (TIMESTAMP_TYPE_MASK if self._log_append else 0) \
            | (TRANSACTIONAL_MASK if transactional else 0)
        if self._log_append:
            rows = [(r.key, r.value, now, r.headers) for r in records]
        else:
            rows = [(r.key, r.value, r.timestamp, r.headers) for r in records]
        data = encode_v2(rows, counter, attributes, codec_level(self.config, codec),
                         now, now if self._log_append else None, producer_id, producer_epoch,
                         base_sequence, leader_epoch)
        max_ts = INT64.unpack_from(data, MAX_TIMESTAMP_OFFSET)[0]
        last = counter + len(records) - 1
        return ValidatedProduce(data, counter, last, max_ts, last, True)

    # -- errors -----------------------------------------------------------------------

    def _no_key(self, pos: int):
        raise InvalidRecordError(
            f"Compacted topic cannot accept message without key in topic partition "
            f"{self.path}", position=pos, path=self.path)

    def _producer_log_append_time(self, pos: int):
        raise InvalidRecordTimestampError(
            "Invalid timestamp type in message. Producer should not set timestamp type to "
            "LogAppendTime.", position=pos, path=self.path)

    def _check_window(self, min_ts, max_ts, now, batch, pos) -> None:
        if min_ts >= now - self._before and max_ts <= now + self._after:
            return   # the batch's extremes are inside: no record is outside
        check_timestamp_window(batch, now, self._before, self._after, self.path, pos)


def check_timestamp_window(records, now: int, before: int, after: int, path: str,
                           position: int | None = None) -> None:
    """Kafka's CreateTime window (``message.timestamp.before.max.ms`` /
    ``after.max.ms``) over ``records``: :class:`~kafkastore.errors.InvalidRecordError`
    naming the first record outside ``[now - before, now + after]`` (a record without a
    timestamp, -1, is never outside)."""
    lo, hi = now - before, now + after
    for record in records:
        ts = record.timestamp
        if ts != -1 and (ts < lo or ts > hi):
            raise InvalidRecordTimestampError(
                f"Timestamp {ts} of message with offset {record.offset} is out of range. The "
                f"timestamp should be within [{lo}, {hi}]", offset=record.offset,
                position=position, path=path)


def check_produce_size(config: LogConfig, size: int, path: str) -> None:
    """Kafka's check of a rebuilt batch (``messageSizeMaybeChanged``) against
    ``max.message.bytes``."""
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"Message batch size is {size} bytes in append to partition {path} which "
            f"exceeds the maximum configured size of {config.max_message_bytes}.",
            limit=config.max_message_bytes, path=path)
