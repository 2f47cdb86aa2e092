"""kafkastore.records, the public record-format API: round trips, Kafka's header and
timestamp semantics, control records, columns, argument checking, bounds and error context.

Expected values come from the test's own inputs, from Kafka's rules (kafka-storage.md §2)
or from independent decoders (struct, zlib, crc32c), never from another kafkastore call.
The public API runs on whichever backend kafkastore._kernels selected; CI runs this file
once per backend.
"""

from __future__ import annotations

import pickle
import struct
import time
import types
import zlib

import crc32c
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkastore import records as R
from kafkastore.errors import (
    CorruptRecordError,
    InvalidCrcError,
    KafkaStoreError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from kafkastore.types import CompressionType, ControlRecordType, TimestampType

from strategies import (
    CODECS,
    I32_MAX,
    I64_MAX,
    I64_MIN,
    LEGACY_CODECS,
    TIMESTAMP_TYPES,
    as_input,
    base_offsets,
    base_sequences,
    compressible,
    input_shapes,
    int64s,
    leader_epochs,
    producer_epochs,
    producer_ids,
    record_specs,
    resolved_timestamps,
    scaled,
)

# An independent reading of the 61-byte v2 header (kafka-storage.md §2.2).
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes

ATTR_TS = 0x08
ATTR_TXN = 0x10
ATTR_CTRL = 0x20
ATTR_HORIZON = 0x40


def v2_header(data: bytes, pos: int = 0) -> dict:
    names = ("base_offset", "batch_length", "leader_epoch", "magic", "crc", "attributes",
             "last_offset_delta", "base_ts", "max_ts", "producer_id", "producer_epoch",
             "base_sequence", "count")
    return dict(zip(names, V2_HEADER.unpack_from(data, pos)))


def rec_tuple(rec) -> tuple:
    return (rec.offset, rec.timestamp, int(rec.timestamp_type), rec.key, rec.value,
            tuple(rec.headers))


# -- v2 round trips ------------------------------------------------------------------------


@st.composite
def v2_batches(draw, codec, ts_type):
    specs, default_ts = draw(record_specs(min_size=1, max_size=8))
    shape = draw(input_shapes)
    return dict(
        specs=specs,
        shape=shape,
        default_ts=default_ts,
        max_ts=draw(st.one_of(st.none(), int64s)) if ts_type else None,
        base_offset=draw(base_offsets),
        leader_epoch=draw(leader_epochs),
        producer_id=draw(producer_ids),
        producer_epoch=draw(producer_epochs),
        base_sequence=draw(base_sequences),
        transactional=draw(st.booleans()),
        control=draw(st.booleans()),
        prefix=draw(st.binary(max_size=20)),
    )


@pytest.mark.parametrize("ts_type", TIMESTAMP_TYPES, ids=lambda t: t.label)
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@scaled(0.4)
@given(data=st.data())
def test_v2_round_trip_every_field(codec, ts_type, data):
    case = data.draw(v2_batches(codec, ts_type))
    specs = case["specs"]
    encoded = R.encode_batch(
        [as_input(s, case["shape"]) for s in specs],
        base_offset=case["base_offset"], compression=codec, timestamp_type=ts_type,
        timestamp=case["default_ts"], max_timestamp=case["max_ts"],
        partition_leader_epoch=case["leader_epoch"], is_transactional=case["transactional"],
        is_control=case["control"], producer_id=case["producer_id"],
        producer_epoch=case["producer_epoch"], base_sequence=case["base_sequence"],
    )
    assert isinstance(encoded, bytes)
    n = len(specs)
    stamps = resolved_timestamps(specs, case["default_ts"])
    if ts_type == TimestampType.LOG_APPEND_TIME:
        max_ts = case["default_ts"] if case["max_ts"] is None else case["max_ts"]
    else:
        max_ts = max(stamps)

    # the bytes, read independently
    h = v2_header(encoded)
    assert h["base_offset"] == case["base_offset"]
    assert h["batch_length"] == len(encoded) - 12
    assert h["leader_epoch"] == case["leader_epoch"]
    assert h["magic"] == 2
    assert h["crc"] == crc32c.crc32c(encoded[21:])
    expected_attrs = (int(codec) | (ATTR_TS if ts_type else 0)
                      | (ATTR_TXN if case["transactional"] else 0)
                      | (ATTR_CTRL if case["control"] else 0))
    assert h["attributes"] == expected_attrs
    assert h["last_offset_delta"] == n - 1
    assert h["base_ts"] == stamps[0]
    assert h["max_ts"] == max_ts
    assert (h["producer_id"], h["producer_epoch"], h["base_sequence"]) == (
        case["producer_id"], case["producer_epoch"], case["base_sequence"])
    assert h["count"] == n

    # the API, from a non-zero start inside a larger buffer
    prefix = case["prefix"]
    buf = prefix + encoded
    batches = list(R.iter_batches(buf, start=len(prefix)))
    assert len(batches) == 1
    for batch in (batches[0], R.read_batch(buf, len(prefix))):
        assert isinstance(batch, R.RecordBatch)
        assert batch.position == len(prefix)
        assert batch.magic == 2
        assert batch.base_offset == case["base_offset"]
        assert batch.last_offset == case["base_offset"] + n - 1
        assert batch.next_offset == case["base_offset"] + n
        assert batch.last_offset_delta == n - 1
        assert batch.size_in_bytes == len(encoded)
        assert batch.batch_length == len(encoded) - 12
        assert batch.partition_leader_epoch == case["leader_epoch"]
        assert batch.compression == codec
        assert batch.timestamp_type == ts_type
        assert batch.is_transactional is case["transactional"]
        assert batch.is_control is case["control"]
        assert batch.has_delete_horizon is False
        assert batch.delete_horizon_ms is None
        assert batch.producer_id == case["producer_id"]
        assert batch.producer_epoch == case["producer_epoch"]
        assert batch.base_sequence == case["base_sequence"]
        assert batch.record_count == n
        assert batch.first_timestamp == stamps[0]
        assert batch.max_timestamp == max_ts
        assert batch.crc == h["crc"]
        assert batch.compute_crc() == h["crc"]
        assert batch.is_valid()
        batch.validate()
        assert batch.to_bytes() == encoded

    got = [rec_tuple(r) for r in batches[0]]
    expected = [
        (case["base_offset"] + i,
         max_ts if ts_type == TimestampType.LOG_APPEND_TIME else ts,
         int(ts_type), s.key, s.value, tuple(s.headers))
        for i, (s, ts) in enumerate(zip(specs, stamps))
    ]
    assert got == expected
    for rec in batches[0]:
        assert rec.timestamp_type == ts_type
        assert isinstance(rec.headers, tuple)
        assert rec.key is None or type(rec.key) is bytes
        assert rec.value is None or type(rec.value) is bytes


@pytest.mark.parametrize("control", [False, True])
@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("ts_type", TIMESTAMP_TYPES, ids=lambda t: t.label)
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_v2_fixed_batch_every_flag_combination(codec, ts_type, transactional, control):
    records = [
        (b"key", b"value", 1_700_000_000_000, [("h", b"1"), ("\U0001F600", None), ("", b"")]),
        (None, b"", 1_700_000_000_500),
        (b"", None, 1_699_999_999_000, [("k", b"x" * 300)]),
        (compressible(2000), compressible(5000, seed=1), 1_700_000_000_200),
    ]
    encoded = R.encode_batch(records, base_offset=1000, compression=codec,
                             timestamp_type=ts_type, max_timestamp=None, timestamp=42,
                             is_transactional=transactional, is_control=control,
                             producer_id=77, producer_epoch=3, base_sequence=10,
                             partition_leader_epoch=9)
    (batch,) = R.iter_batches(encoded)
    assert batch.compression == codec
    assert batch.timestamp_type == ts_type
    assert batch.is_transactional is transactional
    assert batch.is_control is control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 10)
    assert batch.last_sequence == 13
    assert batch.partition_leader_epoch == 9
    if codec != CompressionType.NONE:
        assert batch.size_in_bytes < 61 + 7000  # really compressed
    log_append = ts_type == TimestampType.LOG_APPEND_TIME
    expected_max = 42 if log_append else 1_700_000_000_500
    assert batch.max_timestamp == expected_max
    assert batch.first_timestamp == 1_700_000_000_000
    got = [rec_tuple(r) for r in batch]
    assert got == [
        (1000 + i, expected_max if log_append else rec[2], int(ts_type), rec[0], rec[1],
         tuple(rec[3]) if len(rec) > 3 else ())
        for i, rec in enumerate(records)
    ]


def test_v2_timestamps_at_the_int64_extremes():
    for ts in (I64_MIN, I64_MAX, -1, 0):
        (rec,) = R.iter_records(R.encode_batch([(b"k", b"v", ts)]))
        assert rec.timestamp == ts
    # deltas of almost 2**63 in both directions
    lo, hi = -(1 << 62), (1 << 62) - 1
    encoded = R.encode_batch([(b"a", b"", lo), (b"b", b"", hi), (b"c", b"", lo)])
    assert [r.timestamp for r in R.iter_records(encoded)] == [lo, hi, lo]
    assert v2_header(encoded)["max_ts"] == hi


def test_v2_default_timestamp_and_record_objects():
    before = time.time_ns() // 1_000_000
    (rec,) = R.iter_records(R.encode_batch([(b"k", b"v")]))
    after = time.time_ns() // 1_000_000
    assert before <= rec.timestamp <= after
    # a decoded Record is accepted as input and survives unchanged (offset apart)
    src = R.encode_batch([(b"k", b"v", 5, [("a", b"b")]), (None, None, 6)], base_offset=3)
    recs = list(R.iter_records(src))
    again = list(R.iter_records(R.encode_batch(recs, base_offset=3)))
    assert again == recs
    assert [rec_tuple(r) for r in again] == [(3, 5, 0, b"k", b"v", (("a", b"b"),)),
                                             (4, 6, 0, None, None, ())]


def test_record_is_immutable_and_hashable():
    (rec,) = R.iter_records(R.encode_batch([(b"k", b"v", 1)]))
    with pytest.raises(AttributeError):
        rec.key = b"x"
    (same,) = R.iter_records(R.encode_batch([(b"k", b"v", 1)]))
    assert rec == same and hash(rec) == hash(same)
    (other,) = R.iter_records(R.encode_batch([(b"k", b"w", 1)]))
    assert rec != other


# -- legacy (magic 0 and 1) --------------------------------------------------------------


@pytest.mark.parametrize("ts_type", TIMESTAMP_TYPES, ids=lambda t: t.label)
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
@scaled(0.3)
@given(data=st.data())
def test_legacy_round_trip(magic, codec, ts_type, data):
    specs, default_ts = data.draw(record_specs(min_size=1, max_size=6, with_headers=False))
    base = data.draw(base_offsets)
    max_ts = data.draw(st.one_of(st.none(), int64s)) if ts_type else None
    shape = data.draw(st.sampled_from(["tuple4", "short", "object", "object2", "bytearray"]))
    encoded = R.encode_batch([as_input(s, shape) for s in specs], magic=magic,
                             base_offset=base, compression=codec, timestamp_type=ts_type,
                             timestamp=default_ts, max_timestamp=max_ts)
    n = len(specs)
    stamps = resolved_timestamps(specs, default_ts)
    log_append = magic == 1 and ts_type == TimestampType.LOG_APPEND_TIME
    if log_append:
        append_time = default_ts if max_ts is None else max_ts

    # the bytes, read independently: every message's CRC-32 and magic
    pos = 0
    entries = []
    while pos < len(encoded):
        offset, size, crc, m, attrs = LEGACY_PREFIX.unpack_from(encoded, pos)
        assert m == magic
        assert crc == zlib.crc32(encoded[pos + 16:pos + 12 + size])
        assert attrs & 0x07 == int(codec)
        assert bool(attrs & ATTR_TS) == log_append
        entries.append((pos, offset, size))
        pos += 12 + size
    assert pos == len(encoded)

    batches = list(R.iter_batches(encoded))
    if codec == CompressionType.NONE:
        assert [e[1] for e in entries] == [base + i for i in range(n)]
        assert len(batches) == n
    else:
        assert len(entries) == 1 and entries[0][1] == base + n - 1  # wrapper: last offset
        assert len(batches) == 1
        wrapper = batches[0]
        assert wrapper.last_offset == base + n - 1
        assert wrapper.base_offset == base
        if magic == 1:
            assert wrapper.timestamp == (append_time if log_append else
                                         (max(stamps) if max_ts is None else max_ts))
    for batch, (pos, _, size) in zip(batches, entries):
        assert isinstance(batch, R.LegacyRecordBatch)
        assert batch.magic == magic
        assert batch.position == pos
        assert batch.size_in_bytes == size + 12
        assert batch.compression == codec
        assert batch.timestamp_type == (TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else ts_type)
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
        assert batch.partition_leader_epoch == -1
        assert batch.is_transactional is False and batch.is_control is False
        assert batch.is_valid()

    got = [rec_tuple(r) for r in R.iter_records(encoded)]
    if magic == 0:
        expected_ts = [-1] * n
        expected_type = TimestampType.NO_TIMESTAMP_TYPE
    elif log_append:
        expected_ts = [append_time] * n
        expected_type = TimestampType.LOG_APPEND_TIME
    else:
        expected_ts = stamps
        expected_type = TimestampType.CREATE_TIME
    assert got == [(base + i, ts, int(expected_type), s.key, s.value, ())
                   for i, (s, ts) in enumerate(zip(specs, expected_ts))]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_rejects_zstd_headers_and_v2_only_fields(magic):
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v")], magic=magic, compression=CompressionType.ZSTD)
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v")], magic=magic, compression="zstd")
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v", 1, [("h", b"v")])], magic=magic)
    for kwargs in (dict(is_transactional=True), dict(is_control=True), dict(producer_id=5),
                   dict(delete_horizon_ms=10)):
        with pytest.raises(ValueError):
            R.encode_batch([(b"k", b"v")], magic=magic, **kwargs)
    with pytest.raises(ValueError):
        R.encode_batch([], magic=magic)


@pytest.mark.parametrize("magic", [-1, 3, 99])
def test_unknown_magic_rejected(magic):
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v")], magic=magic)


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_offsets_with_gaps(magic, codec):
    offsets = [7, 8, 20, 1000]
    records = [(b"k%d" % i, b"v" * i, 100 + i) for i in range(4)]
    encoded = R.encode_batch(records, magic=magic, compression=codec, offsets=offsets)
    assert [r.offset for r in R.iter_records(encoded)] == offsets
    assert [r.key for r in R.iter_records(encoded)] == [b"k0", b"k1", b"k2", b"k3"]
    last = list(R.iter_batches(encoded))[-1]
    assert last.last_offset == 1000 and last.next_offset == 1001
    with pytest.raises(ValueError):
        R.encode_batch(records, magic=magic, compression=codec, offsets=[1, 2, 2, 3])
    with pytest.raises(ValueError):
        R.encode_batch(records, magic=magic, compression=codec, offsets=[1, 2, 3])


def test_v1_log_append_time_reports_wrapper_time():
    records = [(b"a", b"1", 10), (b"b", b"2", 30), (b"c", b"3", 20)]
    for codec in (CompressionType.NONE, CompressionType.GZIP):
        encoded = R.encode_batch(records, magic=1, compression=codec,
                                 timestamp_type=TimestampType.LOG_APPEND_TIME,
                                 max_timestamp=5000)
        recs = list(R.iter_records(encoded))
        assert [r.timestamp for r in recs] == [5000] * 3
        assert {r.timestamp_type for r in recs} == {TimestampType.LOG_APPEND_TIME}
        # the stored timestamps: the wrapper (or each message) holds the append time
        first = LEGACY_PREFIX.unpack_from(encoded, 0)
        assert first[4] & ATTR_TS
        assert struct.unpack_from(">q", encoded, 18)[0] == 5000
    # CreateTime: each record's own time, the wrapper holds the max
    encoded = R.encode_batch(records, magic=1, compression="gzip")
    assert [r.timestamp for r in R.iter_records(encoded)] == [10, 30, 20]
    assert struct.unpack_from(">q", encoded, 18)[0] == 30


def test_v0_has_no_timestamps():
    encoded = R.encode_batch([(b"a", b"1", 10), (b"b", b"2", 30)], magic=0)
    assert len(encoded) == 2 * (12 + 14 + 2)  # no timestamp field in v0 messages
    for rec in R.iter_records(encoded):
        assert rec.timestamp == -1
        assert rec.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE
    (batch, _) = R.iter_batches(encoded)
    assert batch.max_timestamp == -1
    assert batch.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE


# -- LogAppendTime, offsets, delete horizon, empty batches ----------------------------------


def test_log_append_time_v2():
    records = [(b"a", b"1", 10), (b"b", b"2", 30), (b"c", b"3", 20)]
    encoded = R.encode_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME,
                             max_timestamp=1_000_000)
    h = v2_header(encoded)
    assert h["attributes"] & ATTR_TS
    assert h["max_ts"] == 1_000_000
    assert h["base_ts"] == 10  # still the first record's time; deltas relative to it
    (batch,) = R.iter_batches(encoded)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch] == [1_000_000] * 3
    # the default append time is the `timestamp` argument
    encoded = R.encode_batch(records, timestamp_type=1, timestamp=777)
    assert [r.timestamp for r in R.iter_records(encoded)] == [777] * 3
    # CreateTime with an explicit max timestamp: the header holds it, records keep theirs
    encoded = R.encode_batch(records, max_timestamp=99)
    assert v2_header(encoded)["max_ts"] == 99
    assert [r.timestamp for r in R.iter_records(encoded)] == [10, 30, 20]


def test_no_timestamp_type_rejected():
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v")], timestamp_type=TimestampType.NO_TIMESTAMP_TYPE)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_offsets_with_gaps_and_last_offset_delta(codec):
    records = [(b"a", b"1", 1), (b"b", b"2", 2), (b"c", b"3", 3)]
    encoded = R.encode_batch(records, base_offset=100, offsets=[100, 105, 110],
                             last_offset_delta=20, compression=codec)
    h = v2_header(encoded)
    assert h["base_offset"] == 100 and h["last_offset_delta"] == 20 and h["count"] == 3
    (batch,) = R.iter_batches(encoded)
    assert batch.last_offset == 120
    assert batch.next_offset == 121
    assert [r.offset for r in batch] == [100, 105, 110]
    # the first record need not sit at the base offset (the cleaner removed it)
    encoded = R.encode_batch(records, base_offset=100, offsets=[103, 104, 190])
    assert [r.offset for r in R.iter_records(encoded)] == [103, 104, 190]
    assert v2_header(encoded)["last_offset_delta"] == 90


@pytest.mark.parametrize("offsets, last_delta", [
    ([100, 100, 101], None),     # not increasing
    ([100, 99, 101], None),      # decreasing
    ([99, 100, 101], None),      # below the base offset
    ([100, 101], None),          # one short
    ([100, 101, 102, 103], None),
    ([100, 101, 100 + (1 << 31)], None),  # delta beyond int32
    ([100, 101, 102], 1),        # last delta below the last record's
    ([100, 101, 102], 1 << 31),  # last delta beyond int32
])
def test_bad_offsets_rejected(offsets, last_delta):
    records = [(b"a", b"1", 1), (b"b", b"2", 2), (b"c", b"3", 3)]
    with pytest.raises(ValueError):
        R.encode_batch(records, base_offset=100, offsets=offsets, last_offset_delta=last_delta)


def test_delete_horizon():
    records = [(b"a", b"1", 1_000), (b"b", None, 5_000)]
    encoded = R.encode_batch(records, delete_horizon_ms=86_400_000, base_offset=4)
    h = v2_header(encoded)
    assert h["attributes"] & ATTR_HORIZON
    assert h["base_ts"] == 86_400_000
    assert h["max_ts"] == 5_000
    (batch,) = R.iter_batches(encoded)
    assert batch.has_delete_horizon is True
    assert batch.delete_horizon_ms == 86_400_000
    assert batch.first_timestamp == 86_400_000
    # record deltas are relative to the horizon, so the record times are unchanged
    assert [(r.offset, r.timestamp, r.value) for r in batch] == [(4, 1_000, b"1"), (5, 5_000, None)]
    # other attribute bits survive next to bit 6
    encoded = R.encode_batch(records, delete_horizon_ms=7, is_transactional=True,
                             compression="lz4", producer_id=1, producer_epoch=0)
    assert v2_header(encoded)["attributes"] == ATTR_HORIZON | ATTR_TXN | 3
    assert [r.timestamp for r in R.iter_records(encoded)] == [1_000, 5_000]


def test_empty_batch_defaults():
    encoded = R.encode_batch([])
    assert len(encoded) == 61
    h = v2_header(encoded)
    assert h["count"] == 0
    assert h["last_offset_delta"] == 0
    assert h["base_ts"] == -1 and h["max_ts"] == -1
    (batch,) = R.iter_batches(encoded)
    assert batch.record_count == 0
    assert list(batch) == []
    assert len(R.decode_columns(encoded)) == 0


def test_empty_batch_keeps_producer_state_and_offsets():
    # what the cleaner writes for a batch whose records were all removed
    # (DefaultRecordBatch.writeEmptyHeader): count 0, baseTimestamp NO_TIMESTAMP (-1),
    # the original maxTimestamp and lastOffsetDelta, producer fields kept
    encoded = R.encode_batch([], base_offset=50, last_offset_delta=4, max_timestamp=1234,
                             producer_id=9, producer_epoch=2, base_sequence=17,
                             is_transactional=True, partition_leader_epoch=3)
    assert len(encoded) == 61
    (batch,) = R.iter_batches(encoded)
    assert batch.record_count == 0
    assert batch.last_offset == 54 and batch.next_offset == 55
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 17)
    assert batch.last_sequence == 21
    assert batch.is_transactional
    assert batch.max_timestamp == 1234
    assert list(batch) == []
    assert batch.first_timestamp == -1


def test_empty_log_append_time_batch_has_no_base_timestamp():
    encoded = R.encode_batch([], timestamp_type=TimestampType.LOG_APPEND_TIME, timestamp=99)
    h = v2_header(encoded)
    assert h["max_ts"] == 99
    assert h["base_ts"] == -1


def _java_increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence, with Java's int32 arithmetic."""
    def i32(x):
        return (x + (1 << 31)) % (1 << 32) - (1 << 31)
    if sequence > i32(I32_MAX - increment):
        return i32(increment - i32(I32_MAX - sequence) - 1)
    return i32(sequence + increment)


@pytest.mark.parametrize("base_sequence, n", [(-1, 3), (0, 1), (10, 5), (I32_MAX - 1, 5),
                                              (I32_MAX, 2), (I32_MAX - 4, 5)])
def test_last_sequence_wraps_like_kafka(base_sequence, n):
    encoded = R.encode_batch([(b"k", b"v", 1)] * n, base_sequence=base_sequence,
                             producer_id=1, producer_epoch=0)
    (batch,) = R.iter_batches(encoded)
    expected = -1 if base_sequence == -1 else _java_increment_sequence(base_sequence, n - 1)
    assert batch.last_sequence == expected
    if base_sequence == I32_MAX - 1:
        assert expected == 2  # MAX-1, MAX, 0, 1, 2


@pytest.mark.parametrize("base_sequence, last_offset_delta", [
    (0, -5), (10, -20), (5, -(1 << 31)), (0, -(1 << 31)), (I32_MAX, -1),
])
def test_last_sequence_of_a_corrupt_negative_delta_follows_java(base_sequence,
                                                                last_offset_delta):
    # a hostile header: lastOffsetDelta < 0; Kafka's int arithmetic wraps, so must ours
    buf = bytearray(R.encode_batch([(b"k", b"v", 1)], base_sequence=base_sequence,
                                   producer_id=1, producer_epoch=0))
    struct.pack_into(">i", buf, 23, last_offset_delta)
    batch = R.read_batch(bytes(buf))
    assert batch.last_sequence == _java_increment_sequence(base_sequence, last_offset_delta)


@pytest.mark.parametrize("where", ["before", "past-end"])
def test_read_batch_outside_the_buffer(where):
    buf = R.encode_batch([(b"k", b"v", 1)])
    position = -1 if where == "before" else len(buf) + 1
    with pytest.raises(ValueError):
        R.read_batch(buf, position)


@pytest.mark.parametrize("kw", [dict(start=-1), dict(start=10_000), dict(start=5, end=2),
                                dict(end=-1)], ids=["negative", "past-end", "inverted",
                                                    "negative-end"])
def test_bad_ranges_rejected(kw):
    buf = R.encode_batch([(b"k", b"v", 1)])
    for call in (lambda: list(R.iter_batches(buf, **kw)), lambda: list(R.iter_records(buf, **kw)),
                 lambda: R.decode_columns(buf, **kw), lambda: R.scan_batches(buf, **kw)):
        with pytest.raises(ValueError):
            call()


# -- control records -------------------------------------------------------------------------


@pytest.mark.parametrize("ctype", [ControlRecordType.COMMIT, ControlRecordType.ABORT, 0, 1])
def test_encode_control_batch_and_parse(ctype):
    encoded = R.encode_control_batch(ctype, producer_id=4242, producer_epoch=7,
                                     coordinator_epoch=31, base_offset=500, timestamp=1234,
                                     partition_leader_epoch=5)
    assert len(encoded) == 78  # kafka-storage.md §2.4: a full end-txn-marker batch
    h = v2_header(encoded)
    assert h["attributes"] == ATTR_TXN | ATTR_CTRL
    assert (h["producer_id"], h["producer_epoch"], h["base_sequence"]) == (4242, 7, -1)
    assert h["leader_epoch"] == 5 and h["base_offset"] == 500 and h["count"] == 1
    (batch,) = R.iter_batches(encoded)
    assert batch.is_control and batch.is_transactional
    assert batch.compression == CompressionType.NONE
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    (rec,) = batch
    assert rec.offset == 500 and rec.timestamp == 1234
    assert rec.key == struct.pack(">hh", 0, int(ctype))
    assert rec.value == struct.pack(">hi", 0, 31)
    parsed = R.parse_control_record(rec)
    assert parsed == (ControlRecordType(ctype), 0, 31)
    assert isinstance(parsed, R.ControlRecord)
    assert parsed.type is ControlRecordType(ctype)
    assert parsed.coordinator_epoch == 31


@pytest.mark.parametrize("ctype", [ControlRecordType.LEADER_CHANGE,
                                   ControlRecordType.UNKNOWN, 7, 99])
def test_encode_control_batch_only_markers(ctype):
    with pytest.raises(ValueError):
        R.encode_control_batch(ctype, producer_id=1, producer_epoch=0)


def _control_record(key, value, offset=0):
    (rec,) = R.iter_records(R.encode_batch([(key, value)], is_control=True, base_offset=offset),
                            include_control=True)
    return rec


@pytest.mark.parametrize("key, value, expected", [
    (struct.pack(">hh", 0, 2), b"anything", (ControlRecordType.LEADER_CHANGE, 0, None)),
    (struct.pack(">hh", 0, 3), None, (ControlRecordType.SNAPSHOT_HEADER, 0, None)),
    (struct.pack(">hh", 0, 6), None, (ControlRecordType.KRAFT_VOTERS, 0, None)),
    (struct.pack(">hh", 0, 99), None, (ControlRecordType.UNKNOWN, 0, None)),
    (struct.pack(">hh", 0, -5), None, (ControlRecordType.UNKNOWN, 0, None)),
    # higher versions are read as version 0; extra bytes are ignored
    (struct.pack(">hh", 3, 1) + b"xx", struct.pack(">hi", 1, -2) + b"zz",
     (ControlRecordType.COMMIT, 3, -2)),
    (struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 2**31 - 1),
     (ControlRecordType.ABORT, 0, 2**31 - 1)),
])
def test_parse_control_record_types(key, value, expected):
    assert R.parse_control_record(_control_record(key, value)) == expected


@pytest.mark.parametrize("key, value", [
    (None, struct.pack(">hi", 0, 1)),
    (b"", struct.pack(">hi", 0, 1)),
    (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),     # short key
    (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),  # negative key version
    (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x01"),    # short marker value
    (struct.pack(">hh", 0, 0), None),                      # missing marker value
    (struct.pack(">hh", 0, 1), struct.pack(">hi", -1, 5)),  # negative marker version
])
def test_parse_control_record_errors(key, value):
    rec = _control_record(key, value, offset=321)
    with pytest.raises(CorruptRecordError) as info:
        R.parse_control_record(rec)
    assert info.value.offset == 321


def test_iter_records_skips_control_batches():
    data1 = R.encode_batch([(b"a", b"1", 1), (b"b", b"2", 2)], base_offset=0,
                           is_transactional=True, producer_id=5, producer_epoch=0)
    marker = R.encode_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=0,
                                    base_offset=2, timestamp=3)
    data2 = R.encode_batch([(b"c", b"3", 4)], base_offset=3, compression="gzip")
    buf = data1 + marker + data2
    assert [(r.offset, r.key) for r in R.iter_records(buf)] == [(0, b"a"), (1, b"b"), (3, b"c")]
    all_recs = list(R.iter_records(buf, include_control=True))
    assert [r.offset for r in all_recs] == [0, 1, 2, 3]
    assert R.parse_control_record(all_recs[2]).type == ControlRecordType.COMMIT
    cols = R.decode_columns(buf)
    assert cols.offset.tolist() == [0, 1, 3]
    cols = R.decode_columns(buf, include_control=True)
    assert cols.offset.tolist() == [0, 1, 2, 3]
    assert cols.key(2) == struct.pack(">hh", 0, 1)
    # iter_batches never skips
    assert [b.is_control for b in R.iter_batches(buf)] == [False, True, False]


# -- columns -----------------------------------------------------------------------------------


@st.composite
def mixed_logs(draw):
    """Several batches of any kind back to back, plus the records a reader should see."""
    parts = []
    next_offset = draw(st.integers(0, 1 << 40))
    for _ in range(draw(st.integers(0, 5))):
        magic = draw(st.sampled_from([0, 1, 2, 2]))
        codec = draw(st.sampled_from(CODECS if magic == 2 else LEGACY_CODECS))
        ts_type = draw(st.sampled_from(TIMESTAMP_TYPES))
        control = magic == 2 and draw(st.integers(0, 4)) == 0
        specs, default_ts = draw(record_specs(min_size=1, max_size=5, with_headers=magic == 2))
        parts.append(R.encode_batch(
            [as_input(s, "tuple4") for s in specs], magic=magic, compression=codec,
            base_offset=next_offset, timestamp_type=ts_type, timestamp=default_ts,
            is_control=control))
        next_offset += len(specs)
    return b"".join(parts)


def _check_columns_match(cols, recs):
    n = len(recs)
    assert len(cols) == n
    assert cols.offset.dtype == np.int64 and cols.offset.shape == (n,)
    assert cols.timestamp.dtype == np.int64
    assert cols.timestamp_type.dtype == np.int8
    assert cols.header_count.dtype == np.int32
    for name in ("key", "value"):
        offs = getattr(cols, name + "_offsets")
        data = getattr(cols, name + "_data")
        null = getattr(cols, name + "_null")
        assert offs.dtype == np.int64 and offs.shape == (n + 1,) and offs[0] == 0
        assert data.dtype == np.uint8 and len(data) == offs[-1]
        assert null.dtype == np.bool_ and null.shape == (n,)
        items = [getattr(r, name) for r in recs]
        assert null.tolist() == [b is None for b in items]
        assert np.diff(offs).tolist() == [0 if b is None else len(b) for b in items]
        assert data.tobytes() == b"".join(b for b in items if b is not None)
    assert cols.offset.tolist() == [r.offset for r in recs]
    assert cols.timestamp.tolist() == [r.timestamp for r in recs]
    assert cols.timestamp_type.tolist() == [int(r.timestamp_type) for r in recs]
    assert cols.header_count.tolist() == [len(r.headers) for r in recs]
    assert [cols.key(i) for i in range(n)] == [r.key for r in recs]
    assert [cols.value(i) for i in range(n)] == [r.value for r in recs]


@scaled(0.6)
@given(buf=mixed_logs(), include_control=st.booleans())
def test_decode_columns_equals_iter_records(buf, include_control):
    recs = list(R.iter_records(buf, include_control=include_control))
    cols = R.decode_columns(buf, include_control=include_control)
    _check_columns_match(cols, recs)


def test_decode_columns_fixed_mixed_log():
    buf = b"".join([
        R.encode_batch([(b"k1", b"v1", 10, [("a", b"1"), ("b", None)]), (None, b"", 11)],
                       base_offset=0),
        R.encode_batch([(b"", None, 12)], magic=0, base_offset=2),
        R.encode_batch([(b"k3", b"v3" * 50, 13), (b"k4", None, 14)], magic=1, base_offset=3,
                       compression="snappy"),
        R.encode_batch([(b"k5", b"v5", 15, [("\U0001F600", b"")])], base_offset=5,
                       compression="zstd", timestamp_type=1, max_timestamp=99),
    ])
    cols = R.decode_columns(buf)
    assert cols.offset.tolist() == [0, 1, 2, 3, 4, 5]
    assert cols.timestamp.tolist() == [10, 11, -1, 13, 14, 99]
    assert cols.timestamp_type.tolist() == [0, 0, -1, 0, 0, 1]
    assert cols.header_count.tolist() == [2, 0, 0, 0, 0, 1]
    assert [cols.key(i) for i in range(6)] == [b"k1", None, b"", b"k3", b"k4", b"k5"]
    assert [cols.value(i) for i in range(6)] == [b"v1", b"", None, b"v3" * 50, None, b"v5"]
    assert cols.key_null.tolist() == [False, True, False, False, False, False]
    assert cols.value_offsets.tolist() == [0, 2, 2, 2, 102, 102, 104]
    assert repr(cols) == "RecordColumns(records=6)"
    # a byte range of the buffer
    start = len(R.encode_batch([(b"k1", b"v1", 10, [("a", b"1"), ("b", None)]),
                                (None, b"", 11)], base_offset=0))
    assert R.decode_columns(buf, start).offset.tolist() == [2, 3, 4, 5]


def test_record_columns_to_arrow():
    pa = pytest.importorskip("pyarrow", reason="pyarrow (the spark extra) is not installed")
    buf = R.encode_batch([(b"k", b"v", 10, [("h", b"x")]), (None, b"", 11), (b"", None, 12)],
                         base_offset=7)
    table = R.decode_columns(buf).to_arrow()
    assert isinstance(table, pa.Table)
    assert table.column_names == ["offset", "timestamp", "timestamp_type", "key", "value",
                                  "header_count"]
    assert table.schema.field("key").type == pa.large_binary()
    assert table.schema.field("value").type == pa.large_binary()
    assert table.column("offset").to_pylist() == [7, 8, 9]
    assert table.column("timestamp").to_pylist() == [10, 11, 12]
    assert table.column("key").to_pylist() == [b"k", None, b""]
    assert table.column("value").to_pylist() == [b"v", b"", None]
    assert table.column("header_count").to_pylist() == [1, 0, 0]
    empty = R.decode_columns(b"").to_arrow()
    assert empty.num_rows == 0


# -- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize("compression, expected", [
    (CompressionType.LZ4, CompressionType.LZ4),
    (3, CompressionType.LZ4),
    ("lz4", CompressionType.LZ4),
    ("LZ4", CompressionType.LZ4),
    (" zstd ", CompressionType.ZSTD),
    ("gzip", CompressionType.GZIP),
    ("snappy", CompressionType.SNAPPY),
    ("uncompressed", CompressionType.NONE),
    ("none", CompressionType.NONE),
    (None, CompressionType.NONE),
    (0, CompressionType.NONE),
])
def test_compression_spellings(compression, expected):
    encoded = R.encode_batch([(b"k", b"v" * 100, 1)], compression=compression)
    assert v2_header(encoded)["attributes"] & 0x07 == int(expected)
    (batch,) = R.iter_batches(encoded)
    assert batch.compression == expected
    assert [r.value for r in batch] == [b"v" * 100]


@pytest.mark.parametrize("compression", ["brotli", "", 5, 7, -1])
def test_unknown_compression_rejected(compression):
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v")], compression=compression)


@pytest.mark.parametrize("compression, level", [
    ("gzip", 0), ("gzip", 10), ("gzip", -2),
    ("lz4", 0), ("lz4", 18),
    ("zstd", 23), ("zstd", -131073),
    ("snappy", 1), ("none", 1),
])
def test_invalid_compression_level(compression, level):
    with pytest.raises(ValueError):
        R.encode_batch([(b"k", b"v")], compression=compression, compression_level=level)


@pytest.mark.parametrize("magic, compression, level", [
    (m, c, lv) for m in (1, 2)
    for c, lv in [("gzip", 1), ("gzip", 9), ("gzip", -1), ("lz4", 1), ("lz4", 17),
                  ("zstd", -5), ("zstd", 22), ("zstd", 0)]
    if not (m == 1 and c == "zstd")  # zstd needs magic 2
])
def test_valid_compression_levels(magic, compression, level):
    records = [(b"k", compressible(3000), 5)]
    encoded = R.encode_batch(records, magic=magic, compression=compression,
                             compression_level=level)
    assert len(encoded) < 3000
    assert [r.value for r in R.iter_records(encoded)] == [compressible(3000)]


BAD_RECORDS = [
    pytest.param([("k", b"v")], id="str-key"),
    pytest.param([(b"k", "v")], id="str-value"),
    pytest.param([(1, b"v")], id="int-key"),
    pytest.param([(b"k", b"v", 1, [], 5)], id="5-tuple"),
    pytest.param([(b"k",)], id="1-tuple"),
    pytest.param([()], id="0-tuple"),
    pytest.param([object()], id="object-without-key"),
    pytest.param([types.SimpleNamespace(key=b"k")], id="object-without-value"),
    pytest.param([b"kv"], id="bare-bytes"),
    pytest.param([None], id="none"),
]


@pytest.mark.parametrize("records", BAD_RECORDS)
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_invalid_record_shapes_raise_type_error(magic, records):
    with pytest.raises(TypeError):
        R.encode_batch(records, magic=magic)


@pytest.mark.parametrize("magic", [1, 2])
@pytest.mark.parametrize("ts", ["5", 5.0, b"5"], ids=["str", "float", "bytes"])
def test_non_integer_timestamp_raises_type_error(magic, ts):
    with pytest.raises(TypeError):
        R.encode_batch([(b"k", b"v", ts)], magic=magic)


@pytest.mark.parametrize("headers", [
    [("k",)], [("k", b"v", b"w")], ["kv"], [(None, b"v")], [("k", "v")], [(1, b"v")],
])
def test_invalid_headers_raise_type_error(headers):
    with pytest.raises(TypeError):
        R.encode_batch([(b"k", b"v", 1, headers)])


@pytest.mark.parametrize("kwargs", [
    dict(base_offset=1 << 63), dict(base_offset=-(1 << 63) - 1),
    dict(partition_leader_epoch=1 << 31), dict(producer_id=1 << 63),
    dict(producer_epoch=1 << 15), dict(producer_epoch=-(1 << 15) - 1),
    dict(base_sequence=1 << 31), dict(timestamp=1 << 63),
])
def test_out_of_range_header_fields(kwargs):
    with pytest.raises((ValueError, OverflowError)):
        R.encode_batch([(b"k", b"v", 1)], **kwargs)


def test_record_timestamp_out_of_range():
    with pytest.raises((ValueError, OverflowError)):
        R.encode_batch([(b"k", b"v", 1 << 63)])
    # representable on their own, but their delta is not
    with pytest.raises((ValueError, OverflowError)):
        R.encode_batch([(b"k", b"v", I64_MIN), (b"k", b"v", I64_MAX)])


# -- decompression bound -----------------------------------------------------------------------


@pytest.mark.parametrize("magic, codec", [(2, "gzip"), (2, "zstd"), (2, "lz4"),
                                          (2, "snappy"), (1, "gzip"), (0, "lz4")])
def test_max_decompressed_bytes(magic, codec):
    first = R.encode_batch([(b"x", b"y", 1)], magic=magic, base_offset=0)
    big = R.encode_batch([(b"k", compressible(20_000), 2), (b"k2", compressible(20_000), 3)],
                         magic=magic, compression=codec, base_offset=1)
    assert len(big) < 5_000
    buf = first + big
    limit = 10_000

    batches = list(R.iter_batches(buf, max_decompressed_bytes=limit))  # headers are fine
    assert len(batches) == 2
    with pytest.raises(RecordTooLargeError) as info:
        list(batches[1])
    assert info.value.limit == limit
    assert info.value.position == len(first)
    with pytest.raises(RecordTooLargeError) as info:
        list(R.iter_records(buf, max_decompressed_bytes=limit))
    assert info.value.position == len(first)
    with pytest.raises(RecordTooLargeError) as info:
        R.decode_columns(buf, max_decompressed_bytes=limit)
    assert info.value.limit == limit
    assert info.value.position == len(first)
    assert isinstance(info.value, ValueError)
    with pytest.raises(RecordTooLargeError):
        list(R.read_batch(buf, len(first), max_decompressed_bytes=limit))

    # a bound that fits lets everything through
    assert len(R.decode_columns(buf, max_decompressed_bytes=100_000)) == 3
    assert [r.offset for r in R.iter_records(buf, max_decompressed_bytes=100_000)] == [0, 1, 2]

    if magic == 2:
        # the bound is inclusive: exactly the records section's size passes, one byte less
        # does not. Size of each record, from kafka-storage.md §2.3:
        def record_size(ts_delta, offset_delta, key, value):
            body = (1 + _varint_size(ts_delta) + _varint_size(offset_delta)
                    + _varint_size(len(key)) + len(key) + _varint_size(len(value)) + len(value)
                    + 1)
            return _varint_size(body) + body
        exact = (record_size(0, 0, b"k", compressible(20_000))
                 + record_size(1, 1, b"k2", compressible(20_000)))
        assert len(R.decode_columns(buf, max_decompressed_bytes=exact)) == 3
        assert len(list(R.iter_records(buf, max_decompressed_bytes=exact))) == 3
        with pytest.raises(RecordTooLargeError):
            R.decode_columns(buf, max_decompressed_bytes=exact - 1)
        with pytest.raises(RecordTooLargeError):
            list(R.iter_records(buf, max_decompressed_bytes=exact - 1))


def _varint_size(value: int) -> int:
    zz = (value << 1) ^ (value >> 63)
    size = 1
    while zz >= 0x80:
        zz >>= 7
        size += 1
    return size


# -- error context --------------------------------------------------------------------------------


def _three_batches(magic):
    if magic == 2:
        parts = [R.encode_batch([(b"a%d" % i, b"v" * i, i)], base_offset=10 * i,
                                compression="gzip" if i == 1 else None) for i in range(3)]
    else:
        parts = [R.encode_batch([(b"a%d" % i, b"v" * i, i)], magic=magic, base_offset=10 * i)
                 for i in range(3)]
    return parts


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_crc_error_carries_position_offset_and_crcs(magic):
    parts = _three_batches(magic)
    start3 = len(parts[0]) + len(parts[1])
    bad = bytearray(b"".join(parts))
    bad[-1] ^= 0x55  # last value byte of the third entry
    bad = bytes(bad)
    if magic == 2:
        stored = struct.unpack_from(">I", bad, start3 + 17)[0]
        computed = crc32c.crc32c(bad[start3 + 21:])
    else:
        stored = struct.unpack_from(">I", bad, start3 + 12)[0]
        computed = zlib.crc32(bad[start3 + 16:])
    assert stored != computed

    for call in (lambda: list(R.iter_batches(bad)),
                 lambda: list(R.iter_records(bad)),
                 lambda: R.decode_columns(bad)):
        with pytest.raises(InvalidCrcError) as info:
            call()
        err = info.value
        assert err.position == start3
        assert err.offset == 20
        assert (err.stored, err.computed) == (stored, computed)
        assert isinstance(err, CorruptRecordError) and isinstance(err, ValueError)
        assert f"position={start3}" in str(err)

    scan = R.scan_batches(bad)
    assert isinstance(scan.error, InvalidCrcError)
    assert scan.error.position == start3
    assert scan.valid_bytes == start3
    assert len(scan) == 2
    assert scan.truncated
    assert scan.position.tolist() == [0, len(parts[0])]

    # without validation the bad entry is yielded, and says it is not valid
    batches = list(R.iter_batches(bad, validate=False))
    assert len(batches) == 3 and not batches[2].is_valid()
    with pytest.raises(InvalidCrcError) as info:
        batches[2].validate()
    assert info.value.position == start3
    scan = R.scan_batches(bad, validate=False)
    assert scan.error is None and len(scan) == 3


def test_structural_error_in_third_batch_has_its_position():
    parts = _three_batches(2)
    start3 = len(parts[0]) + len(parts[1])
    bad = bytearray(b"".join(parts))
    # claim one record more than the batch holds, and re-seal the CRC
    struct.pack_into(">i", bad, start3 + 57, 2)
    struct.pack_into(">I", bad, start3 + 17, crc32c.crc32c(bytes(bad[start3 + 21:])))
    bad = bytes(bad)
    with pytest.raises(CorruptRecordError) as info:
        list(R.iter_records(bad))
    assert not isinstance(info.value, InvalidCrcError)
    assert info.value.position == start3
    with pytest.raises(CorruptRecordError) as info:
        R.decode_columns(bad)
    assert info.value.position == start3


def test_bad_size_field_has_its_position():
    parts = _three_batches(2)
    start3 = len(parts[0]) + len(parts[1])
    bad = bytearray(b"".join(parts))
    struct.pack_into(">i", bad, start3 + 8, 13)  # below the 14-byte minimum
    with pytest.raises(CorruptRecordError) as info:
        list(R.iter_batches(bytes(bad)))
    assert info.value.position == start3
    scan = R.scan_batches(bytes(bad))
    assert scan.error is not None and scan.error.position == start3
    assert scan.valid_bytes == start3


def test_unknown_magic_has_its_position():
    parts = _three_batches(2)
    start3 = len(parts[0]) + len(parts[1])
    bad = bytearray(b"".join(parts))
    bad[start3 + 16] = 3
    with pytest.raises(CorruptRecordError) as info:
        list(R.iter_batches(bytes(bad)))
    assert info.value.position == start3


def test_partial_tail_is_silent():
    parts = _three_batches(2)
    start3 = len(parts[0]) + len(parts[1])
    buf = b"".join(parts)
    for cut in (1, 17, 30, len(parts[2]) - 1):
        short = buf[:start3 + cut]
        assert [b.base_offset for b in R.iter_batches(short)] == [0, 10]
        scan = R.scan_batches(short)
        assert scan.error is None
        assert scan.valid_bytes == start3
        assert scan.truncated
    scan = R.scan_batches(buf)
    assert scan.error is None and not scan.truncated and scan.valid_bytes == len(buf)
    assert scan.base_offset.tolist() == [0, 10, 20]
    assert scan.last_offset.tolist() == [0, 10, 20]
    assert scan.magic.tolist() == [2, 2, 2]
    assert scan.size.tolist() == [len(p) for p in parts]
    assert scan.record_count.tolist() == [1, 1, 1]
    assert scan.max_timestamp.tolist() == [0, 1, 2]


def test_with_context():
    err = CorruptRecordError("bad", position=5, offset=7)
    assert err.with_context(path="/logs/0.log", position_base=1000) is err
    assert (err.position, err.offset, err.path) == (1005, 7, "/logs/0.log")
    assert str(err) == "bad (path=/logs/0.log, position=1005, offset=7)"
    err.with_context(path="/other", position_base=1)  # an existing path is kept
    assert (err.position, err.path) == (1006, "/logs/0.log")
    err = KafkaStoreError("no position")
    err.with_context(position_base=50)
    assert err.position is None
    assert str(err) == "no position"


def _assert_same_error(a, b):
    assert type(a) is type(b)
    assert str(a) == str(b)
    assert a.args == b.args
    for name in ("message", "position", "offset", "path", "stored", "computed", "limit"):
        assert getattr(a, name, "missing") == getattr(b, name, "missing"), name


@pytest.mark.parametrize("err", [
    KafkaStoreError("plain"),
    CorruptRecordError("corrupt", position=12, offset=34, path="/p/00.log"),
    InvalidCrcError("crc", stored=0xFFFFFFFF, computed=1, position=2, offset=3, path="x"),
    RecordTooLargeError("big", limit=1 << 40, position=9),
    UnsupportedCompressionError("codec 6", position=0, offset=-1),
], ids=lambda e: type(e).__name__)
def test_errors_pickle_round_trip(err):
    err.with_context(path="/data/t-0/00000000000000000000.log", position_base=100)
    err.extra = "kept"  # arbitrary instance state survives too
    again = pickle.loads(pickle.dumps(err))
    _assert_same_error(err, again)
    assert again.extra == "kept"


def test_raised_errors_pickle_round_trip():
    parts = _three_batches(2)
    bad = bytearray(b"".join(parts))
    bad[-1] ^= 1
    with pytest.raises(InvalidCrcError) as info:
        list(R.iter_batches(bytes(bad)))
    err = info.value.with_context(path="/seg.log", position_base=4096)
    again = pickle.loads(pickle.dumps(err))
    _assert_same_error(err, again)
    assert again.position == len(parts[0]) + len(parts[1]) + 4096

    big = R.encode_batch([(b"k", compressible(50_000), 1)], compression="gzip")
    with pytest.raises(RecordTooLargeError) as info:
        R.decode_columns(big, max_decompressed_bytes=1000)
    again = pickle.loads(pickle.dumps(info.value))
    _assert_same_error(info.value, again)
    assert again.limit == 1000


# -- varint re-exports -------------------------------------------------------------------------


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**31), b"\xff\xff\xff\xff\x0f"),
])
def test_varint_reexports(value, encoded):
    assert bytes(R.encode_varint(value)) == encoded
    assert R.size_of_varint(value) == len(encoded)
    assert R.decode_varint(encoded, 0) == (value, len(encoded))
    assert R.decode_varlong(encoded, 0) == (value, len(encoded))


def test_varlong_extremes():
    for value in (I64_MIN, I64_MAX):
        enc = bytes(R.encode_varlong(value))
        assert len(enc) == 10 == R.size_of_varlong(value)
        assert R.decode_varlong(enc, 0) == (value, 10)


def test_assemble_batch_v2_wraps_an_encoded_records_section():
    """assemble_batch_v2 around the records section of encode_batch gives the same bytes;
    with another codec it compresses; count 0 gives Kafka's 61-byte empty header."""
    batch = R.encode_batch([(b"k", b"v", 5), (b"k2", None, 7)], base_offset=10, timestamp=5,
                         producer_id=3, producer_epoch=2, base_sequence=4,
                         partition_leader_epoch=6)
    fields = dict(base_offset=10, last_offset_delta=1, base_timestamp=5, max_timestamp=7,
                  producer_id=3, producer_epoch=2, base_sequence=4, partition_leader_epoch=6)
    assert R.assemble_batch_v2(batch[61:], 2, attributes=0, **fields) == batch
    fields["last_offset_delta"] = 9   # the cleaner keeps the original last offset
    for codec in (1, 2, 3, 4):
        (b,) = R.iter_batches(R.assemble_batch_v2(batch[61:], 2, attributes=codec | 0x10, **fields))
        assert b.is_valid() and b.compression == codec and b.is_transactional
        assert (b.last_offset, b.producer_id, b.base_sequence) == (19, 3, 4)
        assert [(r.offset, r.key, r.value, r.timestamp) for r in b] == [
            (10, b"k", b"v", 5), (11, b"k2", None, 7)]
    empty = R.assemble_batch_v2(b"", 0, attributes=0x33, **{**fields, "base_timestamp": -1})
    (b,) = R.iter_batches(empty)
    assert len(empty) == 61 and b.is_valid() and b.record_count == 0 and list(b) == []
    assert (b.compression, b.is_control, b.last_offset, b.max_timestamp) == (0, True, 19, 7)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_encode_columns_is_encode_batch_on_columns(codec):
    """The public wrapper builds the same compress callback encode_batch uses."""
    import numpy as np

    from kafkastore.records import encode_batch, encode_columns
    keys = [None, b"a", b"", b"key-3"]
    vals = [b"x" * 50, None, b"yy", b""]

    def triple(items):
        lens = [len(v or b"") for v in items]
        offs = np.concatenate(([0], np.cumsum(lens))).astype(np.int32)
        data = np.frombuffer(b"".join(v or b"" for v in items), np.uint8)
        return offs, data, np.array([v is not None for v in items])

    ts = np.array([5, 9, 7, 11], np.int64)
    got = encode_columns(triple(keys), triple(vals), timestamps=ts, compression=codec,
                         rows=np.array([3, 0, 1, 2]))
    order = [3, 0, 1, 2]
    want = encode_batch([(keys[i], vals[i], int(ts[i])) for i in order], compression=codec)
    assert got == want
