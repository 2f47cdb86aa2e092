"""kafkastore.log.Log: Kafka's UnifiedLogTest, LogLoaderTest and LocalLogTest scenarios.

Each test names the Kafka test it ports (kafka-storage.md 10.9-10.11; trunk 1eb7644349cb).
Expected values come from those tests or from the rules in kafka-storage.md section 5,
never from a previous run of kafkastore. Kafka builds its records with
``TestUtils.singletonRecords``: one v2 batch of one record; ``single()`` below is the same.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

from _logtools import (
    T0,
    Clock,
    Rec,
    disk_records,
    log_config,
    open_log,
    read_all,
    rec_of,
    segment_files,
)
from kafkastore.errors import (
    CorruptRecordError,
    KafkaStoreError,
    LogClosedError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkastore.log import (
    CLEAN_SHUTDOWN_FILE,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
)
from kafkastore.records import TimestampType, encode_batch, iter_batches, scan_batches
from kafkastore.segment import LogSegment

#: Kafka's default segment.index.bytes (log.index.size.max.bytes).
MAX_INDEX_SIZE = 10 * 1024 * 1024


@pytest.fixture
def clock():
    return Clock()


def single(value=b"test", timestamp=-1, key=None) -> bytes:
    """Kafka's ``TestUtils.singletonRecords``: one v2 batch of one record, offset 0."""
    return encode_batch([(key, value, timestamp)], timestamp=timestamp)


def set_size(value=b"test", timestamp=T0, key=None) -> int:
    """``createRecords.sizeInBytes`` of Kafka's tests."""
    return len(single(value, timestamp, key))


def append1(log: Log, value=b"test", timestamp=-1, key=None, **kw):
    return log.append([(key, value, timestamp)], **kw)


def follower(log: Log, base_offset: int, *records, **kw):
    """``appendAsFollower(MemoryRecords.withRecords(base_offset, ...))``."""
    data = encode_batch(list(records), base_offset=base_offset, **kw)
    return log.append_batches(data, assign_offsets=False)


def first_batch(log: Log, offset: int, max_bytes: int = 1, **kw):
    return next(iter(log.read(offset, max_bytes, **kw).batches()))


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


# == 10.9 UnifiedLogTest: roll ===============================================================


def test_time_based_roll_during_append(tmp_path, clock):
    """testTimeBasedLogRollDuringAppend: rolls on segment.ms using the first batch's
    timestamp when there is one, the wall clock (injected) otherwise; never on an empty
    append."""
    segment_ms = 60 * 60
    log = open_log(tmp_path, clock, segment_ms=segment_ms)
    assert len(log.segments) == 1, "Log begins with a single empty segment."
    # records without a timestamp: the roll follows the clock
    clock.sleep(segment_ms + 1)
    append1(log)
    assert len(log.segments) == 1, "Log doesn't roll if doing so creates an empty segment."
    append1(log)
    assert len(log.segments) == 2, "Log rolls on this append since time has expired."
    for n in range(3, 5):
        clock.sleep(segment_ms + 1)
        append1(log)
        assert len(log.segments) == n, "Changing time beyond rollMs should create a segment."
    # a record with a timestamp, into a segment whose first batch had none: still the clock
    timestamp = clock() + segment_ms + 1
    append1(log, timestamp=timestamp)
    assert len(log.segments) == 4, "the roll is based on the wall clock for this segment"
    clock.sleep(segment_ms + 1)
    append1(log, timestamp=timestamp)
    assert len(log.segments) == 5, "A new segment should have been rolled out"
    # the new segment's first batch has a timestamp: the clock no longer matters
    clock.sleep(segment_ms + 1)
    append1(log, timestamp=timestamp)
    assert len(log.segments) == 5, "the roll depends on the timestamp of the first message"
    append1(log, timestamp=clock())
    assert len(log.segments) == 6, "the message's timestamp makes the segment expire"
    clock.sleep(segment_ms + 1)
    info = log.append([])
    assert info.valid_bytes == 0
    assert len(log.segments) == 6, "an empty append never rolls"
    assert log.log_end_offset == 8
    log.close()


def test_time_based_roll_jitter(tmp_path, clock):
    """testTimeBasedLogRollJitter: a segment rolls once it is segment.ms - jitter old, with
    0 <= jitter < segment.jitter.ms drawn per segment."""
    segment_ms, max_jitter = 60 * 60, 20 * 60
    log = open_log(tmp_path, clock, segment_ms=segment_ms, segment_jitter_ms=max_jitter)
    assert len(log.segments) == 1
    append1(log, timestamp=clock())
    clock.sleep(segment_ms - max_jitter)
    append1(log, timestamp=clock())
    assert len(log.segments) == 1, "no roll earlier than segment.ms - max jitter"
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < max_jitter
    clock.sleep(max_jitter - jitter + 1)
    append1(log, timestamp=clock())
    assert len(log.segments) == 2, "Log should roll after segmentMs adjusted by random jitter"
    log.close()


def test_size_based_roll(tmp_path, clock):
    """testSizeBasedLogRoll: segment.bytes = 10 * (setSize - 1). A segment rolls when
    ``size > segment.bytes - incoming size`` (kafka-storage.md 4.5), so 9 batches fit."""
    size = set_size(timestamp=clock())
    msg_per_seg = 10
    log = open_log(tmp_path, clock, segment_bytes=msg_per_seg * (size - 1))
    assert len(log.segments) == 1
    for _ in range(msg_per_seg + 1):
        append1(log, timestamp=clock())
    assert len(log.segments) == 2, "There should be exactly 2 segments."
    assert bases(log) == [0, 9]
    assert log.segments[0].size == 9 * size
    log.close()


def test_roll_segment_that_already_exists(tmp_path, clock):
    """testRollSegmentThatAlreadyExists (KAFKA-6388): rolling onto an empty active segment
    with the same base offset recreates it; an index resized to 0 forces such a roll."""
    log = open_log(tmp_path, clock, segment_ms=60 * 60)
    assert len(log.segments) == 1
    log.roll(0)
    assert len(log.segments) == 1, "roll() of an empty segment at the same base offset"
    follower(log, 0, (b"k1", b"v1", clock()), partition_leader_epoch=0)
    assert len(log.segments) == 1
    assert log.active_segment.base_offset == 0
    follower(log, 1, (b"k2", b"v2", clock() + 10), partition_leader_epoch=0)
    assert log.log_end_offset == 2
    assert first_batch(log, 0).last_offset == 0
    assert first_batch(log, 1).last_offset == 1
    log.roll()
    assert log.active_segment.base_offset == 2, "base offset of the active segment is LEO"
    assert len(log.segments) == 2
    # an index with no room makes the next append roll the (empty) active segment
    log.active_segment.offset_index.resize(0)
    follower(log, 2, (b"k3", b"v3", clock() + 12), partition_leader_epoch=0)
    assert log.active_segment.offset_index.max_entries > 1
    assert first_batch(log, 2).last_offset == 2
    assert len(log.segments) == 2
    assert read_all(log) == [Rec(0, b"k1", b"v1", clock()), Rec(1, b"k2", b"v2", clock() + 10),
                             Rec(2, b"k3", b"v3", clock() + 12)]
    log.close()


def test_roll_with_illegal_next_offset(tmp_path, clock):
    """LocalLogTest.testRollSegmentErrorWhenNextOffsetIsIllegal: a roll to an offset below
    the active segment's base offset fails and changes nothing (kafka-storage.md 5.4)."""
    log = open_log(tmp_path, clock)
    for i in range(3):
        append1(log, b"v%d" % i, clock())
    log.roll(10)  # a follower rolls to the next batch's first offset
    assert bases(log) == [0, 10]
    assert log.log_end_offset == 3
    with pytest.raises(KafkaStoreError):
        log.roll(5)
    assert bases(log) == [0, 10]
    # the follower's batch at 10 goes to that segment
    follower(log, 10, (None, b"v10", clock()))
    assert log.log_end_offset == 11
    assert [r.offset for r in read_all(log)] == [0, 1, 2, 10]
    log.close()


def test_flushing_empty_active_segment_then_close_leaves_index_files(tmp_path, clock):
    """testFlushingEmptyActiveSegments: a rolled, empty active segment has no index files
    until it is flushed; a clean shutdown (Kafka: flush(forceFlushActiveSegment=true))
    leaves .index and .timeindex for every .log."""
    log = open_log(tmp_path, clock)
    append1(log, b"Test", clock())
    log.roll()
    assert len(segment_files(tmp_path, ".log")) == 2
    assert len(segment_files(tmp_path, ".index")) == 1
    assert log.active_segment.size == 0
    log.close()
    logs = [n[:-4] for n in segment_files(tmp_path, ".log")]
    assert [n[:-6] for n in segment_files(tmp_path, ".index")] == logs
    assert [n[:-10] for n in segment_files(tmp_path, ".timeindex")] == logs


# == 10.9 UnifiedLogTest: append and read ===================================================


def test_append_and_read_with_sequential_offsets(tmp_path, clock):
    """testAppendAndReadWithSequentialOffsets (segment.bytes 71: one batch a segment)."""
    log = open_log(tmp_path, clock, segment_bytes=71)
    values = [str(i).encode() for i in range(0, 100, 2)]
    for v in values:
        append1(log, v)
    assert len(log.segments) == len(values)
    for i, v in enumerate(values):
        batch = first_batch(log, i)
        assert batch.last_offset == i, "Offset read should match order appended."
        record = next(iter(batch))
        assert record.key is None
        assert bytes(record.value) == v
    assert list(log.read(len(values), 100).batches()) == [], "Reading beyond the end"
    log.close()


def _non_sequential(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=72)
    ids = list(range(50)) + list(range(50, 200, 7))
    for i in ids:
        follower(log, i, (None, str(i).encode(), -1), partition_leader_epoch=0)
    return log, ids


def test_append_and_read_with_non_sequential_offsets(tmp_path, clock):
    """testAppendAndReadWithNonSequentialOffsets: follower offsets with gaps; a read inside
    a gap returns the next record."""
    log, ids = _non_sequential(tmp_path, clock)
    assert log.log_end_offset == ids[-1] + 1
    for i in range(50, max(ids)):
        want = next(m for m in ids if m >= i)
        record = next(log.read(i, 100).records())
        assert record.offset == want, "Offset read should match message id."
        assert bytes(record.value) == str(want).encode()
    log.close()


def test_read_with_min_one_message(tmp_path, clock):
    """testReadWithMinMessage: max_bytes 1, 100000 and 100 all return the first batch."""
    log, ids = _non_sequential(tmp_path, clock)
    for i in range(50, max(ids)):
        want = next(m for m in ids if m >= i)
        for max_bytes in (1, 100000, 100):
            record = next(log.read(i, max_bytes, min_one_message=True).records())
            assert record.offset == want
            assert bytes(record.value) == str(want).encode()
    log.close()


def test_read_with_too_small_max_length(tmp_path, clock):
    """testReadWithTooSmallMaxLength: max_bytes 0 -> empty; max_bytes 1 without
    min_one_message -> a 1-byte slice flagged firstEntryIncomplete."""
    log, ids = _non_sequential(tmp_path, clock)
    for i in range(50, max(ids)):
        empty = log.read(i, 0, min_one_message=False)
        assert len(empty) == 0 and empty.to_bytes() == b""
        one = log.read(i, 1, min_one_message=False)
        assert one.first_entry_incomplete
        assert len(one) == 1 and len(one.to_bytes()) == 1
        assert list(one.batches()) == []
    log.close()


def test_read_at_log_gap(tmp_path, clock):
    """testReadAtLogGap: a read in a gap at the end of a segment moves to the next one."""
    log = open_log(tmp_path, clock, segment_bytes=300)
    while len(log.segments) == 1:
        append1(log, b"42")
    log.segments[0].truncate_to(1)  # leave one record in the first segment: a gap
    assert first_batch(log, 1, 200).last_offset == log.log_end_offset - 1
    log.close()


def test_read_out_of_range(tmp_path, clock):
    """testReadOutOfRange: a log starting at 1024 (empty files made by hand); reading at
    LEO gives 0 bytes, below the start or above LEO raises OffsetOutOfRangeError."""
    for suffix in (".log", ".index"):
        open(tmp_path / f"{1024:020d}{suffix}", "wb").close()
    log = open_log(tmp_path, clock, segment_bytes=1024)
    assert log.log_start_offset == 1024 and log.log_end_offset == 1024
    append1(log, b"42")
    assert log.log_end_offset == 1025
    assert len(log.read(1025, 1000)) == 0, "Reading at the log end offset: 0 bytes"
    assert list(log.read(1025, 1000).records()) == []
    for bad in (0, 1023, 1026):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(bad, 1000)
    assert [r.offset for r in read_all(log)] == [1024]
    log.close()


def test_read_at_end_of_empty_log(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert len(log.read(0, 1000)) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1000)
    log.close()


def test_compressed_messages(tmp_path, clock):
    """testCompressedMessages: a read of any offset of a compressed batch starts at the
    batch (the first record of the set)."""
    log = open_log(tmp_path, clock, segment_bytes=110)
    log.append([(None, b"hello"), (None, b"there")], compression="gzip")
    log.append([(None, b"alpha"), (None, b"beta")], compression="gzip")

    def first(offset):
        return next(iter(next(iter(log.read(offset, 4096).batches())))).offset

    assert [first(o) for o in range(4)] == [0, 0, 2, 2]
    assert [(r.offset, bytes(r.value)) for r in log.read(1, 4096).records()] == [(1, b"there")]
    log.close()


def test_append_message_with_null_payload(tmp_path, clock):
    """testAppendMessageWithNullPayload."""
    log = open_log(tmp_path, clock)
    append1(log, None)
    head = next(log.read(0, 4096).records())
    assert head.offset == 0
    assert head.value is None, "Message payload should be null."
    log.close()


def test_append_with_no_timestamp(tmp_path, clock):
    """testAppendWithNoTimestamp: a record with timestamp -1 is accepted and reads back -1."""
    log = open_log(tmp_path, clock)
    log.append([(b"key", b"value", -1)])
    assert read_all(log) == [Rec(0, b"key", b"value", -1)]
    log.close()


def _appended_batches(log):
    return list(log.read(log.log_start_offset, 1 << 20).batches())


def test_append_follows_the_configured_codec_and_timestamp_type(tmp_path, clock):
    """``compression.type`` and ``message.timestamp.type`` shape the batches ``append``
    writes (Kafka's broker-side recompression and LogAppendTime stamping); the call's
    ``compression`` overrides the config; producer fields are written as given."""
    log = open_log(tmp_path, clock, **{"compression.type": "lz4"})
    log.append([(b"k", b"v", T0 - 5)])
    log.append([(b"k", b"v", T0 - 5)], compression="none")
    log.append([(b"k", b"v", T0 - 5)], compression="gzip", compression_level=9)
    log.append([(b"k", b"v", T0 - 5)], is_transactional=True, producer_id=7,
               producer_epoch=3, base_sequence=11, partition_leader_epoch=2)
    batches = _appended_batches(log)
    assert [b.compression for b in batches] == [3, 0, 1, 3]
    assert [b.timestamp_type for b in batches] == [TimestampType.CREATE_TIME] * 4
    assert [b.max_timestamp for b in batches] == [T0 - 5] * 4
    last = batches[-1]
    assert (last.is_transactional, last.producer_id, last.producer_epoch, last.base_sequence,
            last.partition_leader_epoch) == (True, 7, 3, 11, 2)
    assert not any(b.is_transactional for b in batches[:3])
    with pytest.raises(ValueError, match="gzip doesn't support given compression level: 10"):
        log.append([(b"k", b"v")], compression="gzip", compression_level=10)
    assert log.log_end_offset == 4, "a refused append writes nothing"
    log.close()

    log = open_log(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    info = log.append([(b"k", b"v", T0 - 5)])
    assert info.log_append_time == clock() and info.max_timestamp == clock()
    stamped = _appended_batches(log)[-1]
    assert stamped.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stamped.max_timestamp == clock() and stamped.compression == 0
    log.close()


def test_a_new_config_applies_from_the_next_append(tmp_path, clock):
    """``log.config = ...`` (a topic config change, as the LogManager makes it) changes
    what the next ``append`` writes."""
    log = open_log(tmp_path, clock)
    log.append([(b"k", b"v", T0 - 5)])
    log.config = log.config.replace(**{"compression.type": "zstd",
                                       "message.timestamp.type": "LogAppendTime"})
    info = log.append([(b"k", b"v", T0 - 5)])
    log.config = log.config.replace(**{"compression.type": "producer"})
    log.append([(b"k", b"v", T0 - 5)])
    batches = _appended_batches(log)
    assert [b.compression for b in batches] == [0, 4, 0]
    assert [b.timestamp_type for b in batches] == [TimestampType.CREATE_TIME,
                                                   TimestampType.LOG_APPEND_TIME,
                                                   TimestampType.LOG_APPEND_TIME]
    assert info.log_append_time == clock()
    log.close()


# == 10.9 UnifiedLogTest: validation ========================================================


def test_message_set_size_check(tmp_path, clock):
    """testMessageSetSizeCheck: a set larger than segment.bytes is refused
    (RecordBatchTooLargeException), on the leader and the follower path alike
    (kafka-storage.md 5.3 step 6)."""
    records = [(None, b"You", -1), (None, b"bethe", -1)]
    data = encode_batch(records)
    log = open_log(tmp_path, clock, segment_bytes=len(data) - 1)
    with pytest.raises(RecordTooLargeError):
        log.append(records)
    with pytest.raises(RecordTooLargeError):
        log.append_batches(data)
    with pytest.raises(RecordTooLargeError):
        log.append_batches(data, assign_offsets=False)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


SMALL = [(None, b"You", -1), (None, b"bethe", -1)]
LARGE = [(None, b"change (I need more bytes)... blah blah blah.", -1),
         (None, b"More padding boo hoo", -1)]


def test_message_size_check(tmp_path, clock):
    """testMessageSizeCheck: a batch above max.message.bytes -> RecordTooLargeError on the
    leader path (append and append_batches with offsets assigned); nothing is written."""
    second = encode_batch(LARGE)
    log = open_log(tmp_path, clock, max_message_bytes=len(second) - 1)
    log.append(SMALL)
    with pytest.raises(RecordTooLargeError):
        log.append(LARGE)
    with pytest.raises(RecordTooLargeError):
        log.append_batches(second)
    assert log.log_end_offset == 2
    assert [r.offset for r in read_all(log)] == [0, 1]
    log.close()


def test_message_size_check_in_append_as_follower(tmp_path, clock):
    """testMessageSizeCheckInAppendAsFollower: the follower path does not check
    max.message.bytes."""
    first = encode_batch(SMALL, base_offset=0)
    second = encode_batch(LARGE, base_offset=5)
    log = open_log(tmp_path, clock, max_message_bytes=len(second) - 1)
    log.append_batches(first, assign_offsets=False)
    info = log.append_batches(second, assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (5, 6)
    assert [r.offset for r in read_all(log)] == [0, 1, 5, 6]
    log.close()


def test_append_with_out_of_order_offsets_throws(tmp_path, clock):
    """testAppendWithOutOfOrderOffsetsThrowsException: follower batches at offsets
    0, 1, 3, 2, 4 (LogAppendTime) -> OffsetsOutOfOrderError; nothing is appended."""
    data = b"".join(
        encode_batch([(b"key", b"value")], base_offset=o, timestamp=clock(),
                     timestamp_type=TimestampType.LOG_APPEND_TIME, producer_id=1,
                     producer_epoch=0, base_sequence=0, partition_leader_epoch=0)
        for o in (0, 1, 3, 2, 4))
    log = open_log(tmp_path, clock)
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_batches(data, assign_offsets=False)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_append_below_expected_offset_throws(tmp_path, clock, magic, codec):
    """testAppendBelowExpectedOffsetThrowsException: a follower append whose first offset
    (0) is below LEO (2) -> UnexpectedAppendOffsetError, for magic 0/1/2 x none/lz4."""
    log = open_log(tmp_path, clock)
    for i in range(2):
        log.append([(None, str(i).encode())])
    data = encode_batch([(None, b"1")], magic=magic, compression=codec, base_offset=0)
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        log.append_batches(data, assign_offsets=False)
    assert info.value.offset == 0
    assert log.log_end_offset == 2
    log.close()


def test_follower_legacy_batches_keep_their_offsets(tmp_path, clock):
    """appendAsFollower with v0/v1 data: the offsets in the bytes are kept."""
    log = open_log(tmp_path, clock)
    v0 = encode_batch([(None, b"a"), (None, b"b")], magic=0, base_offset=3)
    v1 = encode_batch([(b"k", b"c", T0)], magic=1, compression="gzip", base_offset=7)
    log.append_batches(v0, assign_offsets=False)
    log.append_batches(v1, assign_offsets=False)
    assert log.log_end_offset == 8
    assert [(r.offset, r.value) for r in read_all(log)] == [(3, b"a"), (4, b"b"), (7, b"c")]
    log.close()


def test_leader_assigns_offsets_to_pre_encoded_batches(tmp_path, clock):
    """append_batches(assign_offsets=True): each batch as a producer sends it (base offset
    0) gets offsets from LEO, batch after batch (kafka-storage.md 5.3 step 4)."""
    log = open_log(tmp_path, clock)
    log.append([(b"a", b"0", T0)])
    data = (encode_batch([(b"b", b"1", T0), (b"c", b"2", T0)], compression="zstd")
            + encode_batch([(b"d", b"3", T0)]))
    info = log.append_batches(data)
    assert (info.first_offset, info.last_offset, info.num_batches) == (1, 3, 2)
    assert [(r.offset, r.key) for r in read_all(log)] == [(0, b"a"), (1, b"b"), (2, b"c"),
                                                         (3, b"d")]
    log.close()


# == 10.9 UnifiedLogTest: offsets by timestamp ==============================================


def test_fetch_offset_by_timestamp_includes_leader_epoch(tmp_path, clock):
    """testFetchOffsetByTimestampIncludesLeaderEpoch (without a leader-epoch cache: -1/-2
    report the offsets only)."""
    log = open_log(tmp_path, clock, segment_bytes=200, index_interval_bytes=1)
    assert log.offset_for_timestamp(0) is None
    first_ts, second_ts = clock(), clock() + 1
    log.append([(None, os.urandom(10), first_ts)], partition_leader_epoch=0)
    log.append([(None, os.urandom(10), second_ts)], partition_leader_epoch=1)
    assert tuple(log.offset_for_timestamp(first_ts)) == (first_ts, 0, 0)
    assert tuple(log.offset_for_timestamp(second_ts)) == (second_ts, 1, 1)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP)[:2] == (-1, 0)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP)[:2] == (-1, 2)
    assert log.offset_for_timestamp(second_ts + 1) is None
    log.close()


def test_fetch_offset_by_max_timestamp(tmp_path, clock):
    """testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp, plus a batch whose max
    timestamp sits on its middle record: the answer is record-level (kafka-storage.md 5.6)."""
    log = open_log(tmp_path, clock, segment_bytes=200, index_interval_bytes=1)
    ts1, ts2 = clock(), clock() + 1
    for ts in (ts1, ts2, ts1):
        log.append([(None, os.urandom(10), ts)], partition_leader_epoch=0)
    assert tuple(log.offset_for_timestamp(MAX_TIMESTAMP)) == (ts2, 1, 0)
    log.append([(None, b"a", ts1), (None, b"b", ts2 + 5), (None, b"c", ts2)])
    assert log.offset_for_timestamp(MAX_TIMESTAMP)[:2] == (ts2 + 5, 4)
    log.close()


def test_offsets_by_timestamp_of_an_empty_log(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert log.offset_for_timestamp(0) is None
    assert log.offset_for_timestamp(T0) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP)[:2] == (-1, 0)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP)[:2] == (-1, 0)
    log.close()


def _expected_offset_for_timestamp(segments, records, target, start):
    """kafka-storage.md 5.6 / 4.8 from the records alone: the first segment whose largest
    timestamp reaches ``target``, then its first record at or after ``target`` (and at or
    after the log start offset)."""
    for lo, hi in segments:
        inside = [r for r in records if lo <= r.offset < hi]
        if inside and max(r.timestamp for r in inside) >= target:
            for r in inside:
                if r.timestamp >= target and r.offset >= start:
                    return (r.timestamp, r.offset)
            return None
    return None


def test_offset_for_timestamp_against_a_model(tmp_path, clock):
    """Random, non-monotonic timestamps over many segments; every target from below the
    first to above the last timestamp, and the max timestamp, against the rule."""
    rng = random.Random(20241025)
    log = open_log(tmp_path, clock, segment_bytes=600, index_interval_bytes=150)
    model = []
    for i in range(120):
        recs = [(b"k%d" % i, b"v" * rng.randint(0, 30), T0 + rng.randint(-40, 400))
                for _ in range(rng.randint(1, 3))]
        info = log.append(recs, compression=rng.choice(["none", "lz4"]))
        model += [Rec(info.first_offset + j, k, v, ts) for j, (k, v, ts) in enumerate(recs)]
    assert len(log.segments) > 5
    assert read_all(log) == model

    def check():
        b = bases(log) + [log.log_end_offset]
        spans = list(zip(b, b[1:]))
        for target in range(T0 - 45, T0 + 405, 3):
            got = log.offset_for_timestamp(target)
            want = _expected_offset_for_timestamp(spans, model, target, log.log_start_offset)
            assert (None if got is None else tuple(got[:2])) == want, target
        top = max(r.timestamp for r in model)
        first_top = next(r for r in model if r.timestamp == top)
        assert tuple(log.offset_for_timestamp(MAX_TIMESTAMP)[:2]) == (top, first_top.offset)

    check()
    log.close()
    log = open_log(tmp_path, clock, segment_bytes=600, index_interval_bytes=150)
    check()  # from the indexes written on close
    log.close()


# == 10.9 UnifiedLogTest: truncation ========================================================


def test_truncate_to(tmp_path, clock):
    """testTruncateTo, with truncateFullyAndStartAt."""
    size = set_size(timestamp=clock())
    msg_per_seg = 10
    log = open_log(tmp_path, clock, segment_bytes=msg_per_seg * size)

    def fill():
        for _ in range(msg_per_seg):
            append1(log, timestamp=clock())

    fill()
    assert len(log.segments) == 1
    assert log.log_end_offset == msg_per_seg
    last, full = log.log_end_offset, log.size
    assert log.truncate_to(log.log_end_offset) is False  # keep the entire log
    assert (log.log_end_offset, log.size) == (last, full)
    log.truncate_to(log.log_end_offset + 1)  # beyond the end
    assert (log.log_end_offset, log.size) == (last, full)
    log.truncate_to(msg_per_seg // 2)
    assert log.log_end_offset == msg_per_seg // 2
    assert log.size == (msg_per_seg // 2) * size
    log.truncate_to(0)
    assert (log.log_end_offset, log.size) == (0, 0)
    fill()
    assert (log.log_end_offset, log.size) == (last, full), "back to the original offset"
    log.truncate_fully_and_start_at(log.log_end_offset - (msg_per_seg - 1))
    assert log.log_end_offset == last - (msg_per_seg - 1)
    assert log.log_start_offset == last - (msg_per_seg - 1)
    assert log.size == 0
    assert bases(log) == [1]
    fill()
    assert log.log_end_offset > msg_per_seg
    assert log.size == full
    assert [r.offset for r in read_all(log)] == list(range(1, 11))
    log.truncate_to(0)  # below the first segment: truncate fully, start at 0
    assert (log.log_end_offset, log.size, log.log_start_offset) == (0, 0, 0)
    assert bases(log) == [0]
    log.close()


def test_truncate_to_across_segments_renames_dropped_segments(tmp_path, clock):
    """truncateTo below the active segment: later segments go to .deleted (async),
    the segment holding the target is cut at the batch holding it."""
    log = open_log(tmp_path, clock, segment_bytes=5 * set_size(), file_delete_delay_ms=1000)
    for i in range(23):
        append1(log, b"%d" % i)
    assert bases(log) == [0, 5, 10, 15, 20]
    log.truncate_to(7)
    assert bases(log) == [0, 5]
    assert log.log_end_offset == 7
    assert [r.offset for r in read_all(log)] == list(range(7))
    deleted = sorted(n for n in os.listdir(tmp_path) if n.endswith(".deleted"))
    assert {n.split(".")[0] for n in deleted} == {f"{b:020d}" for b in (10, 15, 20)}
    clock.sleep(1000)
    assert log.delete_pending_segments() == 3
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".deleted")]
    append1(log, b"new")
    assert [r.offset for r in read_all(log)][-2:] == [6, 7]
    log.close()


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path, clock):
    """kafka-storage.md 4.7: truncation granularity is a batch."""
    log = open_log(tmp_path, clock)
    log.append([(None, b"a"), (None, b"b"), (None, b"c")])
    log.append([(None, b"d"), (None, b"e")])
    log.truncate_to(4)
    assert [bytes(r.value) for r in read_all(log)] == [b"a", b"b", b"c"]
    assert log.log_start_offset <= log.log_end_offset
    log.close()


def test_truncate_below_log_start_offset_keeps_start_at_or_below_end(tmp_path, clock):
    """Invariant log_start_offset <= log_end_offset (Log docstring; Kafka 5.8 sets
    ``LEO = target`` and ``logStartOffset = min(target, logStartOffset)``) when the target
    falls inside a batch that lies partly below the log start offset."""
    log = open_log(tmp_path, clock)
    log.append([(None, b"%d" % i) for i in range(5)])  # one batch, offsets 0..4
    log.delete_records(3)
    log.truncate_to(2)
    assert log.log_start_offset <= log.log_end_offset
    assert log.log_start_offset <= 2
    append1(log, b"next")
    assert log.log_start_offset <= log.log_end_offset
    log.close()


def test_truncate_inside_a_batch_then_reopen_keeps_the_end_offset(tmp_path, clock):
    """A clean close and reopen gives back the log as it was: after a truncation whose
    target falls inside a (dropped) batch, the end offset is the same before and after
    (Log invariant: offsets never go backwards except through truncate_to)."""
    log = open_log(tmp_path, clock)
    log.append([(None, b"a"), (None, b"b"), (None, b"c")])  # offsets 0..2
    log.append([(None, b"d"), (None, b"e")])  # offsets 3..4
    log.truncate_to(4)
    end = log.log_end_offset
    assert [bytes(r.value) for r in read_all(log)] == [b"a", b"b", b"c"]
    log.close()
    log = open_log(tmp_path, clock)
    assert log.log_end_offset == end
    assert log.recovery_point == end
    info = log.append([(None, b"f")])
    assert info.first_offset == end
    log.close()


def test_largest_timestamp_after_reopen_and_truncation(tmp_path, clock):
    """kafka-storage.md 4.7 step 6: after truncateTo the segment's max timestamp is
    recomputed from the (truncated) time index plus a scan of the batches after its last
    entry, also when it had not been loaded since the segment was opened."""
    log = open_log(tmp_path, clock, index_interval_bytes=10_000)  # no sparse entries
    log.append([(None, b"a", T0)])
    log.append([(None, b"b", T0 + 50)])
    log.append([(None, b"c", T0 + 10)])
    log.append([(None, b"d", T0 + 90)])
    log.close()
    log = open_log(tmp_path, clock, index_interval_bytes=10_000)
    log.truncate_to(3)  # drops the record at T0 + 90, the time index's only entry
    assert log.active_segment.largest_timestamp() == T0 + 50
    assert log.offset_for_timestamp(MAX_TIMESTAMP)[:2] == (T0 + 50, 1)
    assert log.offset_for_timestamp(T0 + 20)[:2] == (T0 + 50, 1)
    assert log.offset_for_timestamp(T0 + 51) is None
    log.close()


def test_index_resizing_at_truncation(tmp_path, clock):
    """testIndexResizingAtTruncation: a rolled segment's indexes are trimmed to their
    entries; truncating back into it makes it active and resizes both to the max."""
    size = set_size(timestamp=clock())
    msg_per_seg = 10
    log = open_log(tmp_path, clock, segment_bytes=msg_per_seg * size,
                   index_interval_bytes=size - 1)
    for i in range(1, msg_per_seg + 1):
        append1(log, timestamp=clock() + i)
    assert len(log.segments) == 1
    clock.sleep(msg_per_seg)
    for i in range(1, msg_per_seg + 1):
        append1(log, timestamp=clock() + i)
    assert len(log.segments) == 2
    head = log.segments[0]
    # the first append of a segment is never indexed, every later one is: 9 entries
    assert head.offset_index.max_entries == msg_per_seg - 1
    assert head.time_index.max_entries == msg_per_seg - 1
    log.truncate_to(0)
    assert len(log.segments) == 1
    assert log.active_segment.offset_index.max_entries == MAX_INDEX_SIZE // 8
    assert log.active_segment.time_index.max_entries == MAX_INDEX_SIZE // 12
    clock.sleep(msg_per_seg)
    for i in range(1, msg_per_seg + 1):
        append1(log, timestamp=clock() + i)
    assert len(log.segments) == 1
    log.close()


# == 10.9 UnifiedLogTest: deletion ==========================================================


def test_async_delete(tmp_path, clock):
    """testAsyncDelete: removed segments are renamed .deleted at once and their files
    deleted only after file.delete.delay.ms (here by delete_pending_segments on the
    injected clock)."""
    delay = 1000
    log = open_log(tmp_path, clock, segment_bytes=set_size() * 5, segment_index_bytes=1000,
                   file_delete_delay_ms=delay)
    for _ in range(100):
        append1(log, timestamp=clock() - 1000)
    segments = list(log.segments[:-1])
    old = [s.log.path for s in segments] + [s.offset_index_path for s in segments]
    assert all(os.path.exists(p) for p in old)
    assert log.delete_segments(segments) == len(segments)
    assert len(log.segments) == 1, "Only one segment should remain."
    assert log.log_start_offset == log.active_segment.base_offset
    assert all(s.log.path.endswith(".deleted") for s in segments)
    assert all(s.offset_index_path.endswith(".deleted") for s in segments)
    deleted = [s.log.path for s in segments] + [s.offset_index_path for s in segments]
    assert all(os.path.exists(p) for p in deleted), "The .deleted files should still be there."
    assert not any(os.path.exists(p) for p in old), "The original file should be gone."
    clock.sleep(delay - 1)
    assert log.delete_pending_segments() == 0
    assert all(os.path.exists(p) for p in deleted)
    clock.sleep(1)
    assert log.delete_pending_segments() == len(segments)
    assert not any(os.path.exists(p) for p in deleted), "Files should all be gone."
    log.close()


def _log_start_offset_pass(log: Log) -> list[LogSegment]:
    """kafka-storage.md 6.3, first pass: segments whose *next* segment starts at or below
    the log start offset (never the active one)."""
    segs = log.segments
    return [s for s, nxt in zip(segs, segs[1:]) if nxt.base_offset <= log.log_start_offset]


def test_delete_records_then_segments_below_start(tmp_path, clock):
    """testLogDeletionAfterDeleteRecords: DeleteRecords moves the log start offset; whole
    segments below it are then deleted; reads below it raise."""
    log = open_log(tmp_path, clock, segment_bytes=set_size() * 5)
    for i in range(15):
        append1(log, b"%d" % i)
    assert len(log.segments) == 3
    assert log.log_start_offset == 0
    for start, n_segments in ((1, 3), (6, 2), (15, 1)):
        assert log.delete_records(start) == start
        log.delete_segments(_log_start_offset_pass(log))
        assert len(log.segments) == n_segments
        assert log.log_start_offset == start
        with pytest.raises(OffsetOutOfRangeError):
            log.read(start - 1, 100)
        assert [r.offset for r in read_all(log)] == list(range(start, 15))
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP)[1] == start
    log.close()


def test_delete_records_rules(tmp_path, clock):
    """kafka-storage.md 5.8: only forward, never past LEO; a read at the start offset
    inside a batch returns records from it on."""
    log = open_log(tmp_path, clock)
    log.append([(None, b"%d" % i, T0 + i) for i in range(5)])
    assert log.delete_records(3) == 3
    assert log.delete_records(1) == 3  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(6)
    assert log.log_start_offset == 3
    assert [r.offset for r in log.read(3, 1000).records()] == [3, 4]
    # timestamp search starts at the log start offset
    assert log.offset_for_timestamp(T0)[:2] == (T0 + 3, 3)
    assert log.delete_records(5) == 5
    assert log.read(5, 100).to_bytes() == b""
    log.close()


# == 10.9 flush triggers (kafka-storage.md 5.3 step 10, 5.7) ================================


def test_flush_messages_moves_recovery_point(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_messages=3)
    for i in range(1, 8):
        append1(log)
        assert log.recovery_point == (i // 3) * 3
        assert log.unflushed_messages == i % 3
    log.close()


def test_flush_if_due(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_ms=1000)
    append1(log)
    assert log.recovery_point == 0
    clock.sleep(999)
    assert log.flush_if_due() is False
    clock.sleep(1)
    assert log.flush_if_due() is True
    assert log.recovery_point == 1
    assert log.flush_if_due() is False  # nothing unflushed
    log.flush()
    log.close()


# == 10.10 LogLoaderTest =====================================================================


def _fill(log: Log, n: int, clock: Clock, size: int = 10, rng=None, **kw) -> list[Rec]:
    rng = rng or random.Random(n)
    out = []
    for i in range(n):
        value = bytes(rng.getrandbits(8) for _ in range(size))
        info = log.append([(None, value, clock() + i * 10)], **kw)
        out.append(Rec(info.first_offset, None, value, clock() + i * 10))
    return out


def _unclean(path):
    os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))


def test_recovery_only_after_unclean_shutdown(tmp_path, clock, monkeypatch):
    """testLogRecoveryIsCalledUponBrokerCrash / kafka-storage.md 5.10 step 7: segments are
    re-validated only without the clean-shutdown marker, from the segment holding the
    recovery point on; the marker is removed on open."""
    log = open_log(tmp_path, clock, segment_bytes=300)
    model = _fill(log, 20, clock)
    n_segments = len(log.segments)
    assert n_segments > 3
    leo = log.log_end_offset
    log.close()
    calls = []
    real = LogSegment.recover

    def counting(self, producer_state=None):
        calls.append(self.base_offset)
        return real(self, producer_state)

    monkeypatch.setattr(LogSegment, "recover", counting)
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    log = open_log(tmp_path, clock, segment_bytes=300)
    assert not marker.exists(), "the marker is removed on open"
    assert calls == []
    assert log.recovery_point == leo
    log.close()
    _unclean(tmp_path)
    log = open_log(tmp_path, clock, segment_bytes=300)
    assert sorted(calls) == [s.base_offset for s in log.segments]
    assert read_all(log) == model
    calls.clear()
    log.close()
    _unclean(tmp_path)
    log = open_log(tmp_path, clock, segment_bytes=300, recovery_point=leo)
    assert calls == [log.active_segment.base_offset]
    log.close()


def test_log_recovers_to_correct_offset(tmp_path, clock):
    """testLogRecoversToCorrectOffset: reopening without recovery (recovery point = LEO)
    and with it (recovery point 10) gives the same indexes; the recovery point moves only
    on flush."""
    n, size = 100, 100
    cfg = dict(segment_bytes=7 * size, index_interval_bytes=3 * size, segment_index_bytes=4096)
    log = open_log(tmp_path, clock, **cfg)
    _fill(log, n, clock, size=size)
    assert log.log_end_offset == n
    active = log.active_segment
    last_index_offset = active.offset_index.last_offset
    n_index_entries = active.offset_index.entries
    last_offset = log.log_end_offset
    last_ti_offset = log.log_end_offset - 1
    last_ti_timestamp = active.largest_timestamp()
    n_ti_entries = active.time_index.entries + (
        0 if active.time_index.last_entry.offset == log.log_end_offset - 1 else 1)
    log.close()

    def verify(log, expected_recovery_point):
        assert log.recovery_point == expected_recovery_point
        assert log.log_end_offset == n
        active = log.active_segment
        assert active.offset_index.last_offset == last_index_offset
        assert active.offset_index.entries == n_index_entries
        assert active.time_index.last_entry.timestamp == last_ti_timestamp
        assert active.time_index.last_entry.offset == last_ti_offset
        assert active.time_index.entries == n_ti_entries

    log = open_log(tmp_path, clock, recovery_point=last_offset, had_clean_shutdown=False, **cfg)
    verify(log, last_offset)
    log.close()
    log = open_log(tmp_path, clock, recovery_point=10, had_clean_shutdown=False, **cfg)
    verify(log, 10)  # not advanced until the log is flushed
    log.flush()
    verify(log, last_offset)
    log.close()


def _check_every_offset_and_timestamp(log, n, clock):
    for i in range(n):
        assert first_batch(log, i, 100).last_offset == i
        found = log.offset_for_timestamp(clock() + i * 10)
        assert found.offset == i
        assert found.timestamp == clock() + i * 10


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_index_rebuild(tmp_path, clock, clean):
    """testIndexRebuild: every .index and .timeindex deleted -> rebuilt on open (a missing
    offset index is rebuilt even after a clean shutdown, kafka-storage.md 5.10 step 5)."""
    n = 200
    cfg = dict(segment_bytes=200, index_interval_bytes=1)
    log = open_log(tmp_path, clock, **cfg)
    _fill(log, n, clock)
    index_files = [s.offset_index_path for s in log.segments]
    time_files = [s.time_index_path for s in log.segments]
    log.close()
    for f in index_files + time_files:
        os.unlink(f)
    if not clean:
        _unclean(tmp_path)
    log = open_log(tmp_path, clock, **cfg)
    assert log.log_end_offset == n
    assert log.segments[0].offset_index.entries > 0, "The index should have been rebuilt"
    assert log.segments[0].time_index.entries > 0, "The time index should have been rebuilt"
    _check_every_offset_and_timestamp(log, n, clock)
    log.close()
    assert all(os.path.exists(f) for f in index_files + time_files)


def test_corrupt_index_rebuild(tmp_path, clock):
    """testCorruptIndexRebuild: index files overwritten with 2 bytes -> rebuilt on an
    unclean open with recovery point 0."""
    n = 200
    cfg = dict(segment_bytes=200, index_interval_bytes=1)
    log = open_log(tmp_path, clock, **cfg)
    _fill(log, n, clock)
    files = [s.offset_index_path for s in log.segments] + [s.time_index_path for s in log.segments]
    log.close()
    for f in files:
        with open(f, "wb") as fh:
            fh.write(b"  ")
    log = open_log(tmp_path, clock, had_clean_shutdown=False, **cfg)
    assert log.log_end_offset == n
    _check_every_offset_and_timestamp(log, n, clock)
    log.close()


@pytest.mark.parametrize("damage", [b"  ", bytes(64), b"\xff" * 64])
def test_bad_index_after_a_clean_shutdown_is_rebuilt_on_first_use(tmp_path, clock, damage):
    """A clean open maps no index file of an inactive segment (Kafka only checks that the
    offset index exists); the content checks run on first use, under a lock, and a bad
    index is rebuilt before any lookup uses it: concurrent readers all get right answers."""
    import threading

    n = 200
    cfg = dict(segment_bytes=200, index_interval_bytes=1)
    log = open_log(tmp_path, clock, **cfg)
    _fill(log, n, clock)
    files = [s.offset_index_path for s in log.segments[:-1]] + \
        [s.time_index_path for s in log.segments[:-1]]
    log.close()
    for f in files:
        with open(f, "wb") as fh:
            fh.write(damage)
    log = open_log(tmp_path, clock, **cfg)
    inactive = log.segments[:-1]
    assert not any(s._offset_index.loaded or s._time_index.loaded for s in inactive)
    errors = []

    def reader():
        try:
            for i in range(0, n, 7):
                assert first_batch(log, i, 100).last_offset == i
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _check_every_offset_and_timestamp(log, n, clock)
    for seg in inactive:
        seg.offset_index.sanity_check(full=True)
        seg.time_index.sanity_check(full=True)
    log.close()


def test_bogus_index_segments_are_removed(tmp_path, clock):
    """testBogusIndexSegmentsAreRemoved: index files without a .log are deleted on open;
    the log still appends."""
    for suffix in (".index", ".timeindex", ".txnindex"):
        open(tmp_path / f"{5:020d}{suffix}", "wb").close()
    size = set_size(timestamp=clock())
    log = open_log(tmp_path, clock, segment_bytes=size * 5, segment_index_bytes=1000,
                   index_interval_bytes=1)
    log.segments[0].offset_index
    log.segments[0].time_index
    assert os.path.getsize(tmp_path / f"{0:020d}.index") > 0
    assert os.path.getsize(tmp_path / f"{0:020d}.timeindex") > 0
    for suffix in (".index", ".timeindex", ".txnindex"):
        assert not (tmp_path / f"{5:020d}{suffix}").exists()
    for _ in range(10):
        append1(log, timestamp=clock())
    assert log.log_end_offset == 10
    log.close()


def test_open_deletes_obsolete_files(tmp_path, clock):
    """testOpenDeletesObsoleteFiles: .deleted files left by a crash are removed on open
    (except Raft's .checkpoint.deleted); other unknown files are left alone."""
    log = open_log(tmp_path, clock, segment_bytes=set_size() * 5, segment_index_bytes=1000)
    for i in range(100):
        append1(log, b"%d" % i)
    log.delete_segments(log.segments[:-1])
    log.flush()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".deleted")]
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path, crashed, ignore=shutil.ignore_patterns("crashed"))
    (crashed / f"{7:020d}.snapshot.deleted").write_bytes(b"x")
    (crashed / "00000000000000000001.checkpoint.deleted").write_bytes(b"x")
    (crashed / "notes.txt").write_bytes(b"keep me")
    log.close()
    log = open_log(crashed, clock, segment_bytes=set_size() * 5, segment_index_bytes=1000)
    assert len(log.segments) == 1, "The deleted segments should be gone."
    left = sorted(os.listdir(crashed))
    assert [n for n in left if n.endswith(".deleted")] == ["00000000000000000001.checkpoint.deleted"]
    assert "notes.txt" in left
    assert [bytes(r.value) for r in read_all(log)] == [b"%d" % i for i in range(95, 100)]
    log.close()


def test_reopen_then_truncate(tmp_path, clock):
    """testReopenThenTruncate."""
    cfg = dict(segment_bytes=set_size() * 5, segment_index_bytes=1000,
               index_interval_bytes=10000)
    log = open_log(tmp_path, clock, **cfg)
    for _ in range(100):
        append1(log, timestamp=clock())
    log.close()
    log = open_log(tmp_path, clock, had_clean_shutdown=False, **cfg)
    log.truncate_to(3)
    assert len(log.segments) == 1, "All but one segment should be deleted."
    assert log.log_end_offset == 3
    log.close()


def test_corrupt_log(tmp_path, clock):
    """testCorruptLog: random garbage appended to the active .log and .index; an unclean
    open with recovery point 50 recovers every good record (key, value, timestamp)."""
    rng = random.Random(1234)
    cfg = dict(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    for it in range(10):
        d = tmp_path / f"run{it}"
        log = open_log(d, clock, **cfg)
        n = 50 + rng.randrange(50)
        for _ in range(n):
            append1(log, timestamp=clock())
        records = disk_records(d)
        active = log.active_segment
        log.close()
        for path in (active.log.path, active.offset_index_path):
            with open(path, "ab") as f:
                f.write(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1024) + 1)))
        log = open_log(d, clock, recovery_point=50, had_clean_shutdown=False, **cfg)
        assert log.log_end_offset == n
        assert disk_records(d) == records
        assert read_all(log) == records
        log.close()


def test_log_end_less_than_start_after_reopen(tmp_path, clock):
    """testLogEndLessThanStartAfterReopen: garbage in a segment below the log start
    offset -> recovery truncates it, deletes the later segments, finds LEO < log start,
    deletes everything and starts one empty segment at the log start offset, with its
    index files."""
    log = open_log(tmp_path, clock)
    for i in range(5):
        log.append([(None, b"%d" % i, clock())])
        log.roll()
    assert len(log.segments) == 6
    start = 4
    log.delete_records(start)
    assert log.log_end_offset > log.log_start_offset
    with open(log.segments[1].log.path, "wb") as f:  # FileWriter: replaces the content
        f.write(b"corruptRecord")
    log.close()
    log = open_log(tmp_path, clock, log_start_offset=start, had_clean_shutdown=False)
    clock.sleep(60_000)
    log.delete_pending_segments()
    assert len(log.segments) == 1
    assert log.log_start_offset == start
    assert log.log_end_offset == start
    only = log.segments[0]
    assert only.base_offset == start
    assert os.path.exists(only.log.path)
    assert os.path.exists(only.offset_index_path)
    assert os.path.exists(only.time_index_path)
    assert segment_files(tmp_path) == [f"{start:020d}.log"]
    log.close()


def test_log_start_offset_is_max_of_checkpoint_and_first_base(tmp_path, clock):
    """kafka-storage.md 5.10 step 10."""
    for suffix in (".log", ".index"):
        open(tmp_path / f"{100:020d}{suffix}", "wb").close()
    log = open_log(tmp_path, clock, log_start_offset=7)
    assert log.log_start_offset == 100
    for i in range(5):
        append1(log, b"%d" % i)
    log.close()
    log = open_log(tmp_path, clock, log_start_offset=102)
    assert log.log_start_offset == 102
    assert [r.offset for r in read_all(log)] == [102, 103, 104]
    log.close()


def test_clean_shutdown_marker_skips_recovery(tmp_path, clock):
    """LogLoaderTest clean-shutdown case: with the marker there is no recovery even with
    recovery point 0 - a byte corrupted in a closed segment is not truncated away. Without
    the marker the same log is cut at the corrupt batch and later segments are deleted
    (kafka-storage.md 5.10 step 7)."""
    log = open_log(tmp_path, clock, index_interval_bytes=1)
    model = []
    for i in range(25):
        if i in (10, 20):
            log.roll()
        log.append([(b"k%d" % i, b"value-%d" % i, T0 + i)])
        model.append(Rec(i, b"k%d" % i, b"value-%d" % i, T0 + i))
    assert bases(log) == [0, 10, 20]
    seg_path = log.segments[1].log.path
    log.close()
    with open(seg_path, "rb") as f:
        data = bytearray(f.read())
    scan = scan_batches(bytes(data))
    i13 = list(scan.last_offset).index(13)
    pos, size = int(scan.position[i13]), int(scan.size[i13])
    data[pos + size - 3] ^= 0xFF  # a byte of record 13's value: covered by the CRC
    with open(seg_path, "wb") as f:
        f.write(data)
    log = open_log(tmp_path, clock, recovery_point=0)
    assert log.log_end_offset == 25
    assert bases(log) == [0, 10, 20]
    assert os.path.getsize(seg_path) == len(data)
    with pytest.raises(CorruptRecordError):
        list(log.read(13, 1000).batches(validate=True))
    log.close()
    _unclean(tmp_path)
    log = open_log(tmp_path, clock, recovery_point=0)
    assert log.log_end_offset == 13
    assert bases(log) == [0, 10]
    assert read_all(log) == model[:13]
    assert disk_records(tmp_path) == model[:13]
    log.close()


def test_recover_with_empty_active_segment(tmp_path, clock):
    """testRecoverWithEmptyActiveSegment (KAFKA-13603): a rolled, never flushed empty
    active segment has no index file; after a crash, an open with recovery point = LEO
    creates it."""
    n, size = 100, 100
    cfg = dict(segment_bytes=7 * size, index_interval_bytes=3 * size, segment_index_bytes=4096)
    log = open_log(tmp_path / "live", clock, **cfg)
    model = _fill(log, n, clock, size=size)
    log.roll()
    log.flush()
    with pytest.raises(KafkaStoreError):
        log.active_segment.sanity_check(True)
    last = log.log_end_offset
    shutil.copytree(tmp_path / "live", tmp_path / "crashed")  # the crash
    log.close()
    d = tmp_path / "crashed"
    log = open_log(d, clock, recovery_point=last, had_clean_shutdown=False, **cfg)
    assert log.recovery_point == last
    assert log.log_end_offset == n
    assert log.active_segment.time_index.entries == 0
    log.active_segment.sanity_check(True)
    assert os.path.exists(log.active_segment.offset_index_path)
    assert os.path.exists(log.active_segment.time_index_path)
    assert read_all(log) == model
    log.close()


@pytest.mark.parametrize("full", ["time_index", "offset_index"])
def test_recovery_of_a_segment_rolled_on_a_full_index(tmp_path, clock, full):
    """A segment that rolled because an index filled, written across a reopen (which
    restarts the index interval count), needs one entry more when recovery rebuilds its
    indexes from byte 0 than it has slots: the unclean open must still succeed (found by
    the kill -9 loop, tests/reliability/test_kill_loop.py; it raised IndexFullError)."""
    # 96 bytes: 12 offset entries, 8 time entries; every batch after the first is indexed
    cfg = dict(segment_index_bytes=96, index_interval_bytes=0)
    step = 1 if full == "time_index" else 0   # constant timestamps: one time entry

    def append(log, i):
        log.append([(b"k%d" % i, b"v%d" % i, T0 + step * i)])
        return Rec(i, b"k%d" % i, b"v%d" % i, T0 + step * i)

    log = open_log(tmp_path, clock, **cfg)
    model = [append(log, i) for i in range(4)]
    log.close()
    log = open_log(tmp_path, clock, **cfg)
    while len(log.segments) == 1:
        model.append(append(log, len(model)))
    first = log.segments[0]
    index = first.time_index if full == "time_index" else first.offset_index
    # it rolled full: 12 offset entries, or 7 time entries (the 8th slot is kept for the
    # final entry on roll, which repeats the last timestamp here)
    assert index.entries == (7 if step else 12)
    log.close_handlers()   # the crash: no clean-shutdown marker

    log = open_log(tmp_path, clock, **cfg)
    assert log.log_end_offset == len(model)
    assert read_all(log) == model
    for seg in log.segments:
        seg.sanity_check(False)
    for r in model:
        assert rec_of(next(iter(log.read(r.offset, 1).records()))) == r
    assert log.offset_for_timestamp(model[-1].timestamp).offset == \
        (model[-1].offset if step else 0)
    model.append(append(log, len(model)))
    log.close()
    log = open_log(tmp_path, clock, **cfg)
    assert read_all(log) == model
    log.close()


# -- .cleaned / .swap leftovers (LogLoaderTest testRecoveryAfterCrashDuringSplitPhase1-5,
#    LogCleanerTest testRecoveryAfterCrash; kafka-storage.md 5.10 steps 1-4 and 7.8) -------

SWAP_CFG = dict(index_interval_bytes=1, segment_index_bytes=4096)


def _three_segments(path, clock):
    """A closed log with segments at 0, 10, 20 (25 records) and the model of its records."""
    log = open_log(path, clock, **SWAP_CFG)
    model = []
    for i in range(25):
        if i in (10, 20):
            log.roll()
        log.append([(b"k%d" % i, b"v%d" % i, T0 + i)])
        model.append(Rec(i, b"k%d" % i, b"v%d" % i, T0 + i))
    assert bases(log) == [0, 10, 20]
    log.close()
    _unclean(path)  # recover as after a crash
    return model


def _entries(path, base):
    with open(os.path.join(path, f"{base:020d}.log"), "rb") as f:
        data = f.read()
    return [b.last_offset for b in iter_batches(data)], data


def _write_replacement(path, base, lo, hi, suffix):
    """Write the batches with offsets in [lo, hi) (taken from the existing segments) into a
    new segment at ``base`` with ``suffix``, as the cleaner/splitter writes it."""
    config = log_config(**SWAP_CFG)
    seg = LogSegment.open(str(path), base, config, suffix=suffix)
    for name in segment_files(path):
        with open(os.path.join(path, name), "rb") as f:
            data = f.read()
        scan = scan_batches(data)
        for pos, size, last, ts in zip(scan.position, scan.size, scan.last_offset,
                                       scan.max_timestamp):
            if lo <= last < hi:
                seg.append(int(last), int(ts), int(last), data[int(pos):int(pos + size)])
    seg.on_become_inactive_segment()
    seg.flush()
    seg.close()


def _rename_suffix(path, base, old, new):
    for kind in (".log", ".index", ".timeindex"):
        src = os.path.join(path, f"{base:020d}{kind}{old}")
        if os.path.exists(src):
            os.rename(src, os.path.join(path, f"{base:020d}{kind}{new}"))


def _delete_segment_files(path, base, suffix=""):
    for kind in (".log", ".index", ".timeindex"):
        p = os.path.join(path, f"{base:020d}{kind}{suffix}")
        if os.path.exists(p):
            os.unlink(p)


def _split(path, phase):
    """Split segment 0 (offsets 0-9) into 0 (0-4) and 5 (5-9), stopped at ``phase``."""
    _write_replacement(path, 0, 0, 5, ".cleaned")
    _write_replacement(path, 5, 5, 10, ".cleaned")
    if phase == 1:  # .cleaned only
        return [0, 10, 20]
    _rename_suffix(path, 5, ".cleaned", ".swap")  # renamed in descending offset order
    if phase == 2:  # one .swap, one .cleaned
        return [0, 10, 20]
    _rename_suffix(path, 0, ".cleaned", ".swap")
    if phase == 3:  # all .swap, the old segment untouched
        return [0, 5, 10, 20]
    if phase == "3b":  # all .swap, the old segment renamed .deleted
        _rename_suffix(path, 0, "", ".deleted")
        return [0, 5, 10, 20]
    _delete_segment_files(path, 0)
    if phase == 4:  # all .swap, the old segment's files gone
        return [0, 5, 10, 20]
    assert phase == 5  # one .swap renamed into place already, one still .swap
    _rename_suffix(path, 0, ".swap", "")
    return [0, 5, 10, 20]


def _merge(path, phase):
    """Replace segments 0 and 10 by one segment 0 holding offsets 0-19."""
    _write_replacement(path, 0, 0, 20, ".cleaned")
    if phase == 1:
        return [0, 10, 20]
    _rename_suffix(path, 0, ".cleaned", ".swap")
    if phase == 3:
        return [0, 20]
    assert phase == 4
    for base in (0, 10):
        _rename_suffix(path, base, "", ".deleted")
    return [0, 20]


@pytest.mark.parametrize("kind,phase", [
    ("split", 1), ("split", 2), ("split", 3), ("split", "3b"), ("split", 4), ("split", 5),
    ("merge", 1), ("merge", 3), ("merge", 4),
])
def test_recovery_after_crash_during_swap(tmp_path, clock, kind, phase):
    model = _three_segments(tmp_path, clock)
    want_bases = (_split if kind == "split" else _merge)(tmp_path, phase)
    log = open_log(tmp_path, clock, **SWAP_CFG)
    assert bases(log) == want_bases
    leftovers = [n for n in os.listdir(tmp_path)
                 if n.endswith((".swap", ".cleaned", ".deleted"))]
    assert leftovers == []
    assert read_all(log) == model
    assert disk_records(tmp_path) == model
    for i in range(25):  # the indexes of the swapped-in segments work
        assert first_batch(log, i).last_offset == i
        assert log.offset_for_timestamp(T0 + i)[:2] == (T0 + i, i)
    log.append([(b"k25", b"v25", T0 + 25)])
    assert log.log_end_offset == 26
    log.close()


# == 10.11 LocalLogTest: close ===============================================================


def test_close_is_idempotent_and_operations_after_close_raise(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append1(log)
    log.close()
    log.close()
    assert log.closed
    data = single()
    for op in (lambda: append1(log), lambda: log.append_batches(data), lambda: log.roll(),
               lambda: log.flush(), lambda: log.truncate_to(0),
               lambda: log.truncate_fully_and_start_at(5), lambda: log.delete_records(1),
               lambda: log.delete_segments([])):
        with pytest.raises(LogClosedError):
            op()
    assert log.flush_if_due(clock() + 10**12) is False
    # Kafka's close also writes a producer snapshot at the log end offset (empty here);
    # its open created the (empty) leader-epoch-checkpoint
    assert sorted(os.listdir(tmp_path)) == [CLEAN_SHUTDOWN_FILE, f"{0:020d}.index",
                                            f"{0:020d}.log", f"{0:020d}.timeindex",
                                            f"{1:020d}.snapshot", "leader-epoch-checkpoint"]


def test_read_after_close_raises(tmp_path, clock):
    """LocalLogTest: a read after the handlers are closed fails (Kafka: KafkaStorageException)
    with LogClosedError, and does not create or map index files again."""
    log = open_log(tmp_path, clock)
    for i in range(3):
        append1(log, b"%d" % i)
    log.roll()
    log.close()
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(LogClosedError):
        log.read(0, 100)
    with pytest.raises(LogClosedError):
        log.offset_for_timestamp(T0)
    assert sorted(os.listdir(tmp_path)) == before


def test_context_manager_closes(tmp_path, clock):
    with open_log(tmp_path, clock) as log:
        append1(log)
    assert log.closed
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_reopen_after_close_keeps_everything(tmp_path, clock):
    """A clean close and reopen: same offsets, records, segments; recovery point = LEO."""
    cfg = dict(segment_bytes=400, index_interval_bytes=64)
    log = open_log(tmp_path, clock, **cfg)
    model = []
    rng = random.Random(5)
    for i in range(60):
        recs = [(b"%d" % i, b"x" * rng.randrange(20), T0 + i) for _ in range(rng.randint(1, 3))]
        info = log.append(recs, compression=rng.choice(["none", "gzip", "lz4", "zstd"]))
        model += [Rec(info.first_offset + j, *r) for j, r in enumerate(recs)]
    segs = bases(log)
    log.close()
    log = open_log(tmp_path, clock, **cfg)
    assert bases(log) == segs
    assert log.recovery_point == log.log_end_offset == model[-1].offset + 1
    assert read_all(log) == model
    assert [rec_of(r) for r in log.read(model[40].offset, 1 << 20).records()][0] == model[40]
    log.close()


def test_flush_if_due_counts_from_the_time_it_was_given(tmp_path, clock):
    """The manager's flusher passes its own ``now``: the next flush is due flush.ms after
    that time, not after the log's clock reading."""
    log = open_log(tmp_path, clock, flush_ms=1000)
    append1(log)
    assert log.flush_if_due(clock() + 1000)
    append1(log)
    assert not log.flush_if_due(clock() + 1999)
    assert log.flush_if_due(clock() + 2000)
    assert log.unflushed_messages == 0
    log.close()
