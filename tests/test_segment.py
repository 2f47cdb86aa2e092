"""kafkastore.segment.LogSegment: Kafka's LogSegmentTest (kafka-storage.md §10.5) and the
rules of §4 (append and its index rule, read, recover, needs_roll, truncate_to,
find_offset_by_timestamp, file suffixes). The roll rules are asked as the log's append asks
them: ``needs_roll(messages_size, max_timestamp, max_offset, now, max_segment_bytes,
max_segment_ms)``.

As in Kafka's test, segments are built from v1 uncompressed messages (one entry per
message, timestamp = offset * 10) with index.interval.bytes 10 unless noted. Expected values
are Kafka's (the test's literal numbers) or follow from the §4 rules applied to the test's
own inputs; index files are read back with struct, not through the index classes.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from kafkastore.config import LogConfig
from kafkastore.errors import KafkaStoreError
from kafkastore.records import encode_batch, iter_batches
from kafkastore.segment import (
    LogSegment,
    LogSegmentOffsetOverflowError,
    TimestampAndOffset,
)

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
NO_TIMESTAMP = -1


class MockTime:
    """Kafka's MockTime: milliseconds that move only when told to."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def sleep(self, ms: int) -> None:
        self.now += ms


def config(index_interval_bytes: int = 10, **kw) -> LogConfig:
    """LogTestUtils.createSegment: index interval 10, indexes of 1000 bytes, no jitter."""
    kw.setdefault("segment_index_bytes", 1000)
    return LogConfig(index_interval_bytes=index_interval_bytes, segment_jitter_ms=0, **kw)


def records(offset: int, *values: str) -> bytes:
    """LogSegmentTest.records: v1, CreateTime, timestamp offset * 10, one entry per value."""
    return encode_batch([(None, v.encode(), offset * 10) for v in values], magic=1,
                        base_offset=offset)


def v2_records(offset: int, value: bytes, timestamp: int | None = None, **kw) -> bytes:
    return encode_batch([(None, value, offset * 1000 if timestamp is None else timestamp)],
                        base_offset=offset, **kw)


def record_tuples(data) -> list[tuple]:
    """(offset, timestamp, key, value) of every record of every complete entry."""
    if hasattr(data, "to_bytes"):
        data = data.to_bytes()
    return [(r.offset, r.timestamp, r.key, r.value) for b in iter_batches(data) for r in b]


def index_entries(path) -> list[tuple[int, int]]:
    data = Path(path).read_bytes()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]


def time_index_entries(path) -> list[tuple[int, int]]:
    data = Path(path).read_bytes()
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]


@pytest.fixture
def segments(tmp_path):
    """Creates segments in tmp_path and closes them after the test (LogSegmentTest.teardown)."""
    made = []

    def create(offset: int, index_interval_bytes: int = 10, *, time_ms=None, directory=None,
               cfg=None, **kw) -> LogSegment:
        seg = LogSegment.open(str(directory or tmp_path), offset,
                              cfg or config(index_interval_bytes), time_ms=time_ms, **kw)
        made.append(seg)
        return seg

    yield create
    for seg in made:
        if not seg.log.closed:
            seg.close()


# -- append --------------------------------------------------------------------------------


@pytest.mark.parametrize("base_offset, largest_offset", [
    (0, -2147483648), (0, 2147483648), (1, 0), (100, 10), (2147483648, 0), (-2147483648, 0),
    (2147483648, 4294967296)])
def test_append_offset_overflow(segments, base_offset, largest_offset):
    """testAppendForLogSegmentOffsetOverflowException: checked before anything is written."""
    seg = segments(base_offset)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(largest_offset, 1_000, largest_offset, records(0, "hello"))
    assert seg.size == 0
    assert os.path.getsize(seg.log.path) == 0


def test_append_at_the_edges_of_the_relative_range(segments):
    seg = segments(100)
    seg.append(100, 1, 100, records(100, "a"))
    seg.append(100 + INT_MAX, 2, 100 + INT_MAX, records(101, "b"))
    assert seg.size == 2 * len(records(100, "a"))


def test_index_rule_maps_last_offset_to_chunk_start(segments):
    """§4.2: the first append is never indexed; an entry is written when more than
    index.interval.bytes were appended since the last one, mapping the append's *last*
    offset to its *start* position; the time index gets the max timestamp so far."""
    size = len(records(0, "hello"))  # 39
    seg = segments(40, index_interval_bytes=2 * size)  # an entry on every third append
    positions = {}
    for i, offset in enumerate(range(40, 50)):
        positions[offset] = seg.size
        seg.append(offset, offset * 10, offset, records(offset, "hello"))
    # counter after each append: 39, 78, 117 -> entry at the 4th append (43), reset, ...
    assert [(seg.offset_index.entry(i).offset, seg.offset_index.entry(i).position)
            for i in range(seg.offset_index.entries)] == [(43, positions[43]),
                                                          (46, positions[46]),
                                                          (49, positions[49])]
    assert [tuple(seg.time_index.entry(i)) for i in range(seg.time_index.entries)] == [
        (430, 43), (460, 46), (490, 49)]


def test_next_offset_calculation(segments):
    """testNextOffsetCalculation."""
    seg = segments(40)
    assert seg.read_next_offset() == 40
    seg.append(52, NO_TIMESTAMP, -1, records(50, "hello", "there", "you"))
    assert seg.read_next_offset() == 53


def test_get_first_batch_timestamp(segments):
    """testGetFirstBatchTimestamp."""
    seg = segments(1)
    assert seg.get_first_batch_timestamp() == LONG_MAX
    seg.append(1, 1000, 1, encode_batch([(None, b"one", 1000)], base_offset=1))
    assert seg.get_first_batch_timestamp() == 1000


def test_first_batch_timestamp_is_loaded_from_the_file(tmp_path, segments):
    seg = segments(0)
    seg.append(0, 777, 0, v2_records(0, b"x", timestamp=777))
    seg.append(1, 900, 1, v2_records(1, b"y", timestamp=900))
    seg.close()
    reopened = segments(0, file_already_exists=True)
    assert reopened.get_first_batch_timestamp() == 777


# -- read ----------------------------------------------------------------------------------


def test_read_on_empty_segment(segments):
    """testReadOnEmptySegment."""
    assert segments(40).read(40, 300) is None


def test_read_before_first_offset(segments):
    """testReadBeforeFirstOffset: the read starts with the segment's first message."""
    seg = segments(40)
    ms = records(50, "hello", "there", "little", "bee")
    seg.append(53, NO_TIMESTAMP, -1, ms)
    read = seg.read(41, 300)
    assert record_tuples(read) == record_tuples(ms)


def test_read_after_last(segments):
    """testReadAfterLast."""
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    assert seg.read(52, 200) is None


def test_read_from_gap(segments):
    """testReadFromGap: a missing offset reads from the next batch."""
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    ms2 = records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert record_tuples(seg.read(55, 200)) == record_tuples(ms2)


def test_read_metadata_and_null_at_the_end(segments):
    """testReadWhenNoMaxPosition (minOneMessage = false): base 40, v1 messages 50 and 51 of
    39 bytes each, maxSize 1: metadata (48, 40, 0), (50, 40, 0), (51, 40, 39) with no
    complete record, then null at and after the log end offset.

    Kafka's empty maxPosition (which returns no bytes at all) has no counterpart here: a
    read without max_position reads up to the segment's size, as Kafka's two-argument
    read does, so only the minOneMessage = false half of that test applies."""
    seg = segments(40)
    ms = records(50, "hello", "there")
    assert len(ms) == 2 * 39
    seg.append(51, NO_TIMESTAMP, -1, ms)
    for start, position in ((48, 0), (50, 0), (51, 39)):
        read = seg.read(start, 1)
        assert (read.first_offset, seg.base_offset, read.position) == (start, 40, position)
        assert read.size == 1
        assert read.first_entry_incomplete
        assert list(read.batches()) == []
    assert seg.read(52, 1) is None
    assert seg.read(53, 1) is None


def test_read_sizes_max_position_and_min_one_message(segments):
    """§4.3: fetchSize = min(maxPosition - startPosition, adjustedMaxSize); minOneMessage
    widens maxSize to the first batch; maxSize 0 gives an empty read with metadata."""
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    read = seg.read(50, 10, min_one_message=True)
    assert (read.position, read.size, read.first_entry_incomplete) == (0, 39, False)
    assert [r[0] for r in record_tuples(read)] == [50]
    read = seg.read(50, 1000, max_position=39)
    assert (read.position, read.size) == (0, 39)
    read = seg.read(51, 1000, max_position=60)
    assert (read.position, read.size) == (39, 21)
    read = seg.read(50, 1000)
    assert (read.position, read.size, read.first_entry_incomplete) == (0, 78, False)
    read = seg.read(51, 0)  # Kafka: FetchDataInfo(metadata, MemoryRecords.EMPTY)
    assert (read.first_offset, read.position, read.size) == (51, 39, 0)
    assert not read.first_entry_incomplete
    assert read.to_bytes() == b""
    with pytest.raises(ValueError):
        seg.read(50, -1)


def test_translate_offset(segments):
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    seg.append(61, NO_TIMESTAMP, -1, records(60, "alpha", "beta"))
    found = seg.translate_offset(55)
    assert (found.last_offset, found.position, found.size) == (60, 78, 39)
    assert seg.translate_offset(40).position == 0
    assert seg.translate_offset(51, starting_file_position=39).position == 39
    assert seg.translate_offset(62) is None


# -- truncate ------------------------------------------------------------------------------


def test_truncate(segments):
    """testTruncate: append two, truncate the second, the first still reads back (30 times)."""
    seg = segments(40)
    offset = 40
    for _ in range(30):
        ms1 = records(offset, "hello")
        seg.append(offset, NO_TIMESTAMP, -1, ms1)
        ms2 = records(offset + 1, "hello")
        seg.append(offset + 1, NO_TIMESTAMP, -1, ms2)
        read = seg.read(offset, 10000)
        assert record_tuples(read) == record_tuples(ms1) + record_tuples(ms2)
        seg.truncate_to(offset + 1)
        assert record_tuples(seg.read(offset, 10000)) == record_tuples(ms1)
        offset += 1


def test_truncate_empty_segment(tmp_path, segments):
    """testTruncateEmptySegment: a reopened empty segment (indexes trimmed to 0 bytes, so
    "full") is resized by truncateTo and does not roll on time, only on offset range."""
    max_segment_ms = 300000
    time = MockTime()
    seg = segments(0, time_ms=time)
    seg.time_index  # force both indexes into existence before closing
    seg.offset_index
    seg.close()
    assert os.path.getsize(seg.offset_index_path) == 0
    assert os.path.getsize(seg.time_index_path) == 0

    reopened = segments(0, time_ms=time, file_already_exists=True)
    assert reopened.offset_index.is_full() and reopened.time_index.is_full()
    time.sleep(500)
    reopened.truncate_to(57)
    assert reopened.time_waited_for_roll(time(), NO_TIMESTAMP) == 0
    assert not reopened.time_index.is_full()
    assert not reopened.offset_index.is_full()
    assert not reopened.needs_roll(1024, NO_TIMESTAMP, 100, time(), INT_MAX, max_segment_ms)
    time.sleep(max_segment_ms + 1)
    assert reopened.time_waited_for_roll(time(), NO_TIMESTAMP) == max_segment_ms + 1
    assert not reopened.needs_roll(1024, NO_TIMESTAMP, 100, time(), INT_MAX, max_segment_ms)
    assert reopened.needs_roll(1024, NO_TIMESTAMP, INT_MAX + 200, time(), INT_MAX, max_segment_ms)


def test_reload_largest_timestamp_and_next_offset_after_truncation(segments):
    """testReloadLargestTimestampAndNextOffsetAfterTruncation."""
    num_messages = 30
    seg = segments(40, index_interval_bytes=2 * len(records(0, "hello")) - 1)
    offset = 40
    for _ in range(num_messages):
        seg.append(offset, offset, offset, records(offset, "hello"))
        offset += 1
    assert seg.read_next_offset() == offset
    assert seg.time_index.entries == num_messages // 2 - 1
    seg.truncate_to(41)
    assert seg.time_index.entries == 0
    assert seg.largest_timestamp() == 400  # the record's own timestamp, read from the file
    assert seg.read_next_offset() == 41


def test_truncation_of_a_reopened_segment_recomputes_the_max_timestamp(segments):
    """§4.7 step 6 with the max timestamp not yet loaded (a reopened segment): Kafka's
    maxTimestampSoFar() loads it from the truncated time index and, if >= 0, rescans the
    batches after that entry, so a larger timestamp there is found and written as the final
    time index entry on close."""
    size = len(records(0, "hello"))
    seg = segments(0, index_interval_bytes=2 * size - 1)
    for offset in range(10):
        seg.append(offset, offset * 10, offset, records(offset, "hello"))
    seg.close()
    assert time_index_entries(seg.time_index_path) == [(20, 2), (40, 4), (60, 6), (80, 8),
                                                       (90, 9)]
    reopened = segments(0, index_interval_bytes=2 * size - 1, file_already_exists=True)
    reopened.truncate_to(8)
    assert reopened.read_next_offset() == 8
    assert reopened.largest_timestamp() == 70
    reopened.close()
    assert time_index_entries(reopened.time_index_path) == [(20, 2), (40, 4), (60, 6), (70, 7)]


def test_truncate_full(segments):
    """testTruncateFull: created time reset, indexes not full, empty, can re-append."""
    time = MockTime()
    seg = segments(40, time_ms=time)
    seg.append(41, NO_TIMESTAMP, -1, records(40, "hello", "there"))
    time.sleep(500)
    assert seg.time_waited_for_roll(time(), NO_TIMESTAMP) == 500
    seg.truncate_to(0)
    assert seg.time_waited_for_roll(time(), NO_TIMESTAMP) == 0
    assert not seg.time_index.is_full()
    assert not seg.offset_index.is_full()
    assert seg.read(0, 1024) is None
    seg.append(41, NO_TIMESTAMP, -1, records(40, "hello", "there"))
    assert seg.read_next_offset() == 42


def test_truncate_to_offset_in_a_gap(segments):
    """shouldTruncateEvenIfOffsetPointsToAGapInTheLog."""
    seg = segments(40)
    seg.append(40, NO_TIMESTAMP, -1, v2_records(40, b"first message"))
    seg.append(43, NO_TIMESTAMP, -1, v2_records(43, b"message after gap"))
    seg.truncate_to(41)
    read = seg.read(40, 10000)
    assert [b.base_offset for b in read.batches()] == [40]


def test_truncate_to_rules(segments):
    """§4.7: indexes truncated by offset and resized to segment.index.bytes, the file cut at
    the start of the batch holding (or after) the offset; bytes cut returned."""
    seg = segments(0)
    sizes = []
    for offset in range(6):
        data = records(offset, "m%d" % offset)
        sizes.append(len(data))
        seg.append(offset, offset * 10, offset, data)
    assert [seg.offset_index.entry(i).offset for i in range(seg.offset_index.entries)] == [
        1, 2, 3, 4, 5]
    assert seg.truncate_to(3) == sum(sizes[3:])
    assert seg.size == sum(sizes[:3])
    assert [seg.offset_index.entry(i).offset for i in range(seg.offset_index.entries)] == [1, 2]
    assert [seg.time_index.entry(i).offset for i in range(seg.time_index.entries)] == [1, 2]
    assert seg.offset_index.length == 1000 and seg.time_index.length == 996
    assert seg.truncate_to(10) == 0  # past the end: nothing to cut
    assert seg.read_next_offset() == 3


# -- find by timestamp ---------------------------------------------------------------------


def test_find_offset_by_timestamp(segments):
    """testFindOffsetByTimestamp."""
    message_size = len(records(0, "msg00"))
    seg = segments(40, index_interval_bytes=message_size * 2 - 1)
    for i in range(40, 50):
        seg.append(i, i * 10, i, records(i, "msg%d" % i))
    assert seg.largest_timestamp() == 490
    assert seg.find_offset_by_timestamp(420, 0).offset == 42  # indexed
    assert seg.find_offset_by_timestamp(421, 0).offset == 43
    assert seg.find_offset_by_timestamp(430, 0).offset == 43  # not indexed
    assert seg.find_offset_by_timestamp(431, 0).offset == 44
    assert seg.find_offset_by_timestamp(491, 0) is None  # beyond the last
    assert seg.find_offset_by_timestamp(401, 0).offset == 41  # before the first indexed
    assert seg.find_offset_by_timestamp(399, 0).offset == 40  # before the first
    assert seg.find_offset_by_timestamp(399, 45) == TimestampAndOffset(450, 45, None)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_search_for_timestamp_per_format(segments, magic):
    """FileRecordsTest.testSearchForTimestamp: v0 never matches; the leader epoch is known
    only for v2."""
    seg = segments(0, index_interval_bytes=1 << 20)
    for ts, offset, epoch in ((10, 5, 0), (11, 6, 1)):
        data = encode_batch([(b"", b"", ts)], magic=magic, base_offset=offset,
                            **({"partition_leader_epoch": epoch} if magic == 2 else {}))
        seg.append(offset, ts if magic else NO_TIMESTAMP, offset, data)

    def expect(ts, offset, epoch):
        return None if magic == 0 else TimestampAndOffset(ts, offset,
                                                          epoch if magic == 2 else None)

    assert seg.find_offset_by_timestamp(9, 0) == expect(10, 5, 0)
    assert seg.find_offset_by_timestamp(10, 0) == expect(10, 5, 0)
    assert seg.find_offset_by_timestamp(11, 0) == expect(11, 6, 1)
    assert seg.find_offset_by_timestamp(12, 0) is None
    assert seg.find_offset_by_timestamp(9, 6) == expect(11, 6, 1)


# -- file suffixes and deletion ------------------------------------------------------------


def test_change_file_suffixes(segments):
    """testChangeFileSuffixes: index files are created lazily and renamed without being
    created."""
    seg = segments(40)
    log_file, index_file, time_index_file = (seg.log.path, seg.offset_index_path,
                                             seg.time_index_path)
    assert not os.path.exists(index_file) and not os.path.exists(time_index_file)
    assert seg.has_suffix("")
    seg.change_file_suffixes("", ".deleted")
    assert not os.path.exists(seg.offset_index_path)
    assert not os.path.exists(seg.time_index_path)
    assert seg.log.path == log_file + ".deleted"
    assert seg.offset_index_path == index_file + ".deleted"
    assert seg.time_index_path == time_index_file + ".deleted"
    assert os.path.exists(seg.log.path) and not os.path.exists(log_file)
    assert seg.has_suffix(".deleted") and not seg.has_suffix(".swap")
    seg.offset_index
    assert os.path.exists(seg.offset_index_path)
    seg.time_index
    assert os.path.exists(seg.time_index_path)
    seg.change_file_suffixes(".deleted", ".swap")  # existing files are renamed
    assert all(os.path.exists(p) for p in (log_file + ".swap", index_file + ".swap",
                                           time_index_file + ".swap"))
    with pytest.raises(KafkaStoreError):
        seg.change_file_suffixes(".cleaned", "")


def test_delete_if_exists(tmp_path, segments):
    """deleteIfExists removes every file and tolerates missing ones (an index never
    created, or a second call)."""
    seg = segments(0)
    seg.append(0, 1, 0, records(0, "a"))
    seg.offset_index
    seg.delete_if_exists()  # the time index was never created
    assert os.listdir(tmp_path) == []
    seg.delete_if_exists()
    other = segments(7, directory=tmp_path)
    other.append(7, 70, 7, records(7, "b"))
    other.offset_index
    other.time_index
    other.close()
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000007.index",
                                            "00000000000000000007.log",
                                            "00000000000000000007.timeindex"]
    LogSegment.delete_files_if_exist(str(tmp_path), 7)
    assert os.listdir(tmp_path) == []


# -- recovery ------------------------------------------------------------------------------


def nonsense(path, position: int, size: int, rng: random.Random) -> None:
    """writeNonsenseToFile: random bytes in [0, 254] over [position, position + size)."""
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(bytes(rng.randrange(255) for _ in range(size)))


def test_recovery_fixes_corrupt_index(segments):
    """testRecoveryFixesCorruptIndex: after recover every offset reads back, and the
    rebuilt index is the one the appends wrote."""
    seg = segments(0, cfg=config(segment_index_bytes=1500))  # Kafka's time index size
    for i in range(100):
        seg.append(i, NO_TIMESTAMP, -1, records(i, str(i)))
    before = [tuple(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)]
    assert len(before) == 99
    nonsense(seg.offset_index_path, 5, os.path.getsize(seg.offset_index_path), random.Random(1))
    assert seg.recover() == 0
    for i in range(100):
        read = seg.read(i, 1, max_position=seg.size, min_one_message=True)
        assert record_tuples(read)[0][0] == i
    assert [tuple(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)] == before


def test_recovery_fixes_corrupt_time_index(segments):
    """testRecoveryFixesCorruptTimeIndex."""
    seg = segments(0, cfg=config(segment_index_bytes=1500))  # Kafka's time index size
    for i in range(100):
        seg.append(i, i * 10, i, records(i, str(i)))
    nonsense(seg.time_index_path, 5, os.path.getsize(seg.time_index_path), random.Random(2))
    seg.recover()
    for i in range(100):
        assert seg.find_offset_by_timestamp(i * 10, 0).offset == i
        if i < 99:
            assert seg.find_offset_by_timestamp(i * 10 + 1, 0).offset == i + 1


@pytest.mark.parametrize("trial", range(10))
def test_recovery_with_corrupt_message(tmp_path, segments, trial):
    """testRecoveryWithCorruptMessage: random bytes from somewhere in the first 15 bytes of
    a random message to the end of the file; recover keeps exactly the messages before it,
    and its indexes are the files that appending only those messages writes."""
    rng = random.Random(trial)
    messages_appended = 20
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    seg = segments(0, directory=tmp_path / "a")
    data = [records(i, str(i)) for i in range(messages_appended)]
    for i, d in enumerate(data):
        seg.append(i, i * 10, i, d)
    corrupt_from = rng.randrange(messages_appended)
    position = seg.log.search_for_offset_with_size(corrupt_from).position + rng.randrange(15)
    nonsense(seg.log.path, position, seg.size - position, rng)
    truncated = seg.recover()
    assert [h.last_offset for h in seg.log.walk()] == list(range(corrupt_from))
    assert truncated == sum(map(len, data[corrupt_from:]))
    assert seg.size == os.path.getsize(seg.log.path) == sum(map(len, data[:corrupt_from]))
    seg.close()
    reference = segments(0, directory=tmp_path / "b")
    for i, d in enumerate(data[:corrupt_from]):
        reference.append(i, i * 10, i, d)
    reference.offset_index  # make sure both index files exist, even if empty
    reference.time_index
    reference.close()
    assert sorted(os.listdir(tmp_path / "a")) == sorted(os.listdir(tmp_path / "b"))
    for name in os.listdir(tmp_path / "b"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_recover_truncates_a_partial_tail_and_keeps_indexes_trimmed(segments):
    seg = segments(0)
    for i in range(5):
        seg.append(i, i * 10, i, records(i, "m"))
    good = seg.size
    seg.log.append(records(5, "partial")[:20])
    assert seg.recover() == 20
    assert seg.size == good
    assert os.path.getsize(seg.offset_index_path) == 8 * seg.offset_index.entries
    assert os.path.getsize(seg.time_index_path) == 12 * seg.time_index.entries
    # the final time index entry is the max timestamp (§4.4 step 4)
    assert seg.time_index.entry(seg.time_index.entries - 1) == (40, 4)


def test_recover_raises_offset_overflow(tmp_path, segments):
    """§4.4: an entry whose offset is below the base (or 2**31 past it) raises
    LogSegmentOffsetOverflowException, so the loader can split the segment."""
    with open(tmp_path / "00000000000000000005.log", "wb") as f:
        f.write(records(5, "a") + records(2, "b"))
    seg = segments(5, file_already_exists=True)
    with pytest.raises(LogSegmentOffsetOverflowError) as info:
        seg.recover()
    assert info.value.offset == 2


def test_recover_then_append_indexes_as_kafka(tmp_path, segments):
    """bytesSinceLastIndexEntry lives in memory only and starts at 0 on open; recover()
    does not touch it (§4 state, §4.4). So a segment reopened and recovered indexes later
    appends exactly as one reopened without recovery: the files come out identical."""
    (tmp_path / "orig").mkdir()
    seg = segments(0, directory=tmp_path / "orig")
    for i in range(8):
        seg.append(i, i * 10, i, records(i, "hello"))
    seg.close()
    for copy in ("plain", "recovered"):
        shutil.copytree(tmp_path / "orig", tmp_path / copy)
    plain = segments(0, directory=tmp_path / "plain", file_already_exists=True)
    recovered = segments(0, directory=tmp_path / "recovered", file_already_exists=True)
    assert recovered.recover() == 0
    for s in (plain, recovered):
        # the log makes its active segment's indexes writable again (§5.10 step 8)
        s.offset_index.reset_size_to_max()
        s.time_index.reset_size_to_max()
        for i in range(8, 11):
            s.append(i, i * 10, i, records(i, "more"))
        s.close()
    for name in os.listdir(tmp_path / "plain"):
        assert (tmp_path / "plain" / name).read_bytes() == \
            (tmp_path / "recovered" / name).read_bytes(), name


# -- preallocation, roll -------------------------------------------------------------------


PREALLOCATED = 512 * 1024 * 1024


def test_create_with_init_file_size_append_message(segments):
    """testCreateWithInitFileSizeAppendMessage."""
    seg = segments(40, init_file_size=PREALLOCATED, preallocate=True)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    ms2 = records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert record_tuples(seg.read(55, 200)) == record_tuples(ms2)


def test_create_with_init_file_size_clean_shutdown(segments):
    """testCreateWithInitFileSizeClearShutdown: close trims the file; reopening sees the
    same size and data."""
    seg = segments(40, init_file_size=PREALLOCATED, preallocate=True)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    ms2 = records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert record_tuples(seg.read(55, 200)) == record_tuples(ms2)
    old_size = seg.size
    assert os.path.getsize(seg.log.path) == PREALLOCATED
    seg.close()
    assert os.path.getsize(seg.log.path) == old_size
    reopened = segments(40, file_already_exists=True, init_file_size=PREALLOCATED,
                        preallocate=True)
    assert record_tuples(reopened.read(55, 200)) == record_tuples(ms2)
    assert reopened.size == old_size == os.path.getsize(reopened.log.path)


def test_on_become_inactive_segment_trims_every_file(segments):
    """§4.6: final time index entry, both indexes trimmed to their entries, the preallocated
    .log trimmed to its data."""
    seg = segments(0, init_file_size=1 << 20, preallocate=True)
    for offset, ts in ((0, 50), (1, 30), (2, 90), (3, 60)):
        seg.append(offset, ts, offset, encode_batch([(None, b"v", ts)], magic=1,
                                                    base_offset=offset))
    assert os.path.getsize(seg.offset_index_path) == 1000
    assert os.path.getsize(seg.time_index_path) == 996
    seg.on_become_inactive_segment()
    assert os.path.getsize(seg.log.path) == seg.size
    assert index_entries(seg.offset_index_path) == [(1, 35), (2, 70), (3, 105)]
    # time entries at appends 1, 2, 3 carry the max so far: (50, 0), then (90, 2); the
    # final entry (90, 2) repeats the last one and is not written again
    assert time_index_entries(seg.time_index_path) == [(50, 0), (90, 2)]


def test_needs_roll_on_size(segments):
    """§4.5 rule 1: roll when size > segment.bytes - messagesSize."""
    seg = segments(0)
    seg.append(0, 1, 0, records(0, "hello"))
    size = seg.size
    assert not seg.needs_roll(10, 1, 1, 0, size + 10, LONG_MAX)
    assert seg.needs_roll(10, 1, 1, 0, size + 9, LONG_MAX)


def test_needs_roll_on_time_uses_message_timestamps(segments):
    """§4.5 rule 2: with a first-batch timestamp, the time waited is the incoming batch's
    timestamp minus it (not the clock); without one, now - created."""
    time = MockTime()
    seg = segments(0, time_ms=time)
    first_ts = 5_000
    seg.append(0, first_ts, 0, records(0, "a"))  # largestTimestamp sets the rolling timestamp
    segment_ms = 1000
    assert seg.time_waited_for_roll(time() + 10**9, first_ts + 7) == 7
    assert not seg.needs_roll(1, first_ts + segment_ms, 1, time() + 10**9, INT_MAX, segment_ms)
    assert seg.needs_roll(1, first_ts + segment_ms + 1, 1, 0, INT_MAX, segment_ms)

    untimed = segments(100, time_ms=time)
    untimed.append(100, NO_TIMESTAMP, -1, encode_batch([(None, b"v0", None)], magic=0,
                                                       base_offset=100))
    time.sleep(segment_ms)
    assert untimed.time_waited_for_roll(time(), 123456) == segment_ms
    assert not untimed.needs_roll(1, 123456, 101, time(), INT_MAX, segment_ms)
    time.sleep(1)
    assert untimed.needs_roll(1, 123456, 101, time(), INT_MAX, segment_ms)


def test_empty_segment_never_rolls_on_time(segments):
    time = MockTime()
    seg = segments(0, time_ms=time)
    time.sleep(10**9)
    assert seg.time_waited_for_roll(time(), NO_TIMESTAMP) == 10**9
    assert not seg.needs_roll(1, NO_TIMESTAMP, 0, time(), INT_MAX, 1)


def test_roll_jitter(tmp_path, segments):
    """UnifiedLogTest.testTimeBasedLogRollJitter at segment level: jitter is drawn in
    [0, min(segment.jitter.ms, segment.ms)); a segment does not roll at segment.ms - maxJitter
    and rolls once segment.ms - jitter is exceeded."""
    segment_ms, max_jitter = 60 * 60, 20 * 60
    cfg = LogConfig(index_interval_bytes=10, segment_index_bytes=1000, segment_ms=segment_ms,
                    segment_jitter_ms=max_jitter)
    jitters = set()
    for i in range(20):
        seg = segments(i * 10, cfg=cfg)
        jitters.add(seg.roll_jitter_ms)
        assert 0 <= seg.roll_jitter_ms < max_jitter
        seg.append(i * 10, 1000, i * 10, records(i * 10, "x"))

        def rolls(ts):
            return seg.needs_roll(1, ts, i * 10 + 1, 0, INT_MAX, segment_ms)

        assert not rolls(1000 + segment_ms - max_jitter)
        assert not rolls(1000 + segment_ms - seg.roll_jitter_ms)
        assert rolls(1000 + segment_ms - seg.roll_jitter_ms + 1)
    assert len(jitters) > 1  # drawn per segment
    no_jitter = segments(1000, cfg=cfg.replace(segment_jitter_ms=0))
    assert no_jitter.roll_jitter_ms == 0


def test_needs_roll_when_offset_index_is_full(segments):
    """§4.5 rule 3 (v0 messages: the time index stays empty, so only the offset index
    fills): 24-byte indexes hold 3 offset entries."""
    seg = segments(0, cfg=config(segment_index_bytes=24))
    params = dict(messages_size=1, max_timestamp=NO_TIMESTAMP, max_offset=10, now=0,
                  max_segment_bytes=INT_MAX, max_segment_ms=LONG_MAX)
    for offset in range(3):
        seg.append(offset, NO_TIMESTAMP, -1, encode_batch([(None, b"v0", None)], magic=0,
                                                          base_offset=offset))
    assert seg.offset_index.entries == 2 and seg.time_index.entries == 0
    assert not seg.needs_roll(**params)
    seg.append(3, NO_TIMESTAMP, -1, encode_batch([(None, b"v0", None)], magic=0,
                                                 base_offset=3))
    assert seg.offset_index.is_full() and not seg.time_index.is_full()
    assert seg.needs_roll(**params)


def test_needs_roll_when_time_index_is_full(segments):
    """§4.5 rule 4: the time index is full at maxEntries - 1 (one slot kept for the final
    entry); 36-byte indexes: 3 time entries (full at 2), 4 offset entries."""
    seg = segments(0, cfg=config(segment_index_bytes=36))
    params = dict(messages_size=1, max_timestamp=NO_TIMESTAMP, max_offset=10, now=0,
                  max_segment_bytes=INT_MAX, max_segment_ms=LONG_MAX)
    for offset in range(2):
        seg.append(offset, offset * 10, offset, records(offset, "x"))
    assert not seg.needs_roll(**params)
    seg.append(2, 20, 2, records(2, "x"))
    assert seg.time_index.entries == 2 and seg.time_index.is_full()
    assert not seg.offset_index.is_full()
    assert seg.needs_roll(**params)


@pytest.mark.parametrize("max_offset, expected", [
    (1000, False), (1000 + INT_MAX, False), (1000 + INT_MAX + 1, True), (999, True)])
def test_needs_roll_when_offset_not_relative(segments, max_offset, expected):
    """§4.5 rule 5."""
    seg = segments(1000)
    assert seg.needs_roll(1, NO_TIMESTAMP, max_offset, 0, INT_MAX, LONG_MAX) \
        is expected
