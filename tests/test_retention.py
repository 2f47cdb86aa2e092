"""kafkastore.retention: Kafka's deleteOldSegments (kafka-storage.md §6), with a fake clock.

Ports the retention scenarios of UnifiedLogTest (§10.9: size-based deletes and not under
the limit, time-based deletes and not when none expired, a policy without ``delete``
still applying the log-start-offset pass, ``compact,delete`` deleting, garbage
collecting every segment keeping the log end offset and one empty segment, nothing at
or above the high watermark) and adds the rules the issue states: only a prefix goes,
segments without timestamps fall back to the file time, the active segment is rolled
before it is removed. Expected segment counts follow from the test's own sizes.
"""

from __future__ import annotations

import os

import pytest
from _logtools import T0, Clock, open_log, read_all
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkastore.errors import OffsetOutOfRangeError
from kafkastore.records import encode_batch
from kafkastore.retention import (
    deletable_segments,
    delete_log_start_offset_breached_segments,
    delete_old_segments,
    delete_retention_ms_breached_segments,
    delete_retention_size_breached_segments,
)


def set_size(value=b"test", timestamp=T0, key=None) -> int:
    """Bytes of one single-record batch (Kafka's ``createRecords.sizeInBytes``)."""
    return len(encode_batch([(key, value, timestamp)], timestamp=timestamp))


def fifteen(tmp_path, clock, timestamp, key=None, **config):
    """UnifiedLogTest's setup: 15 single-record appends, 5 to a segment: 3 segments (with
    a key on a compacted topic, which refuses keyless records, as Kafka's test does)."""
    log = open_log(tmp_path, clock,
                   segment_bytes=set_size(timestamp=timestamp, key=key) * 5, **config)
    for _ in range(15):
        log.append([(key, b"test", timestamp)])
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    return log


@pytest.fixture
def clock():
    return Clock()


def test_size_based_deletes(tmp_path, clock):
    """shouldDeleteSizeBasedSegments: retention.bytes of 10 batches leaves 2 segments."""
    log = fifteen(tmp_path, clock, T0, retention_bytes=set_size() * 10)
    assert delete_old_segments(log) == 1
    assert len(log.segments) == 2
    assert log.log_start_offset == 5
    log.close()


def test_size_based_does_not_delete_under_the_limit(tmp_path, clock):
    """shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize."""
    log = fifteen(tmp_path, clock, T0, retention_bytes=set_size() * 15)
    assert delete_old_segments(log) == 0
    assert len(log.segments) == 3
    log.close()


def test_size_pass_may_leave_less_than_one_segment_over_the_limit(tmp_path, clock):
    """§6.3: a segment goes only if the log stays >= retention.bytes without it."""
    log = fifteen(tmp_path, clock, T0, retention_bytes=set_size() * 10 - 1)
    assert delete_retention_size_breached_segments(log) == 1
    assert log.size == set_size() * 10
    log.close()


def test_time_based_deletes(tmp_path, clock):
    """shouldDeleteTimeBasedSegmentsReadyToBeDeleted: records stamped 10, retention 10 s:
    every segment has expired, the log rolls and keeps one empty segment at the end."""
    log = fifteen(tmp_path, clock, 10, retention_ms=10_000)
    assert delete_old_segments(log) == 3
    assert [s.base_offset for s in log.segments] == [15]
    assert (log.log_start_offset, log.log_end_offset) == (15, 15)
    log.close()


def test_time_based_does_not_delete_when_none_expired(tmp_path, clock):
    """shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted."""
    log = fifteen(tmp_path, clock, clock(), retention_ms=10_000_000)
    assert delete_old_segments(log) == 0
    assert len(log.segments) == 3
    log.close()


def test_time_uses_the_largest_timestamp_of_a_segment(tmp_path, clock):
    """§6.3: max, not first, timestamp: one future-dated record pins its segment, and the
    prefix rule keeps every later segment too."""
    log = open_log(tmp_path, clock, segment_bytes=set_size() * 2, retention_ms=1000)
    old = clock() - 5000
    log.append([(None, b"test", old)])
    log.append([(None, b"test", clock() + 10)])  # pins segment 0
    for _ in range(4):
        log.append([(None, b"test", old)])
    assert len(log.segments) == 3
    assert delete_retention_ms_breached_segments(log, clock()) == 0
    clock.sleep(20)
    assert delete_retention_ms_breached_segments(log, clock()) == 0  # 0 + 1000 not passed
    clock.sleep(1000)
    assert delete_retention_ms_breached_segments(log, clock()) == 3
    log.close()


def test_policy_without_delete_only_applies_the_log_start_offset(tmp_path, clock):
    """shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete and
    shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete."""
    log = fifteen(tmp_path, clock, 10, key=b"test", retention_ms=10_000,
                  cleanup_policy="compact")
    assert delete_old_segments(log) == 0
    assert len(log.segments) == 3
    log.delete_records(7)
    assert delete_old_segments(log) == 1
    assert [s.base_offset for s in log.segments] == [5, 10]
    assert log.log_start_offset == 7
    log.close()


def test_compact_and_delete_deletes(tmp_path, clock):
    """shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete."""
    log = fifteen(tmp_path, clock, 10, key=b"test", retention_ms=10_000,
                  cleanup_policy="compact,delete")
    assert delete_old_segments(log) == 3
    assert len(log.segments) == 1
    log.close()


@pytest.mark.parametrize("messages", [0, 1, 25])
def test_garbage_collecting_every_segment_keeps_the_end_offset(tmp_path, clock, messages):
    """testDeleteOldSegments ★: with every segment expired the log end offset stays, one
    empty segment remains, and appends go on from there."""
    log = open_log(tmp_path / "log", clock, segment_bytes=set_size() * 5, retention_ms=1000)
    for _ in range(messages):
        log.append([(None, b"test", clock() - 10_000)])
    removed = delete_old_segments(log)
    assert removed == (0 if messages == 0 else len(range(0, messages, 5)))
    assert len(log.segments) == 1
    assert log.active_segment.size == 0
    assert (log.log_start_offset, log.log_end_offset) == (messages, messages)
    assert log.append([(None, b"next", clock())]).first_offset == messages
    log.close()
    again = open_log(tmp_path / "log", clock)
    assert (again.log_start_offset, again.log_end_offset) == (messages, messages + 1)
    again.close()


def test_nothing_at_or_above_the_high_watermark(tmp_path, clock):
    """deleteOldSegments only below the HW ★: a segment holding offsets at or above it
    is never deletable."""
    log = fifteen(tmp_path, clock, 10, retention_ms=10_000)
    always = lambda seg, nxt: True  # noqa: E731
    assert [s.base_offset for s in deletable_segments(log, always, high_watermark=9)] == [0]
    assert [s.base_offset for s in deletable_segments(log, always, high_watermark=10)] == [0, 5]
    assert [s.base_offset for s in deletable_segments(log, always, high_watermark=14)] == [0, 5]
    assert [s.base_offset for s in deletable_segments(log, always)] == [0, 5, 10]
    log.close()


def test_only_a_prefix_goes(tmp_path, clock):
    """§6.2: the walk stops at the first segment kept, even if later ones expired."""
    log = open_log(tmp_path, clock, segment_bytes=set_size() * 2, retention_ms=1000)
    for ts in (clock(), clock(), clock() - 5000, clock() - 5000, clock() - 5000):
        log.append([(None, b"test", ts)])
    assert delete_old_segments(log) == 0
    assert len(log.segments) == 3
    log.close()


def test_segments_without_timestamps_use_the_file_time(tmp_path, clock):
    """§4.9 largestTimestamp: no timestamps (v0 data, as a follower copies it; a leader
    would up-convert it) -> the .log file's mtime."""
    log = open_log(tmp_path, clock, segment_bytes=31, retention_ms=1000)  # 1 message each
    for i in range(4):
        log.append_batches(encode_batch([(None, b"v0-%d" % i)], magic=0, base_offset=i),
                           assign_offsets=False)
    assert len(log.segments) == 4
    for seg in log.segments:
        assert seg.largest_record_timestamp() is None
        seg.set_last_modified(clock() - 500)
    assert delete_old_segments(log) == 0
    head = log.segments[0]
    head.set_last_modified(clock() - 5000)
    assert delete_old_segments(log) == 1
    assert log.segments[0] is not head
    log.close()


def test_log_start_offset_pass_removes_whole_segments_below_it(tmp_path, clock):
    """DeleteRecords then retention removes the segments fully below the start offset;
    reads below it raise."""
    log = fifteen(tmp_path, clock, T0)
    log.delete_records(10)
    assert delete_log_start_offset_breached_segments(log) == 2
    assert [s.base_offset for s in log.segments] == [10]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert [r.offset for r in read_all(log)] == list(range(10, 15))
    log.close()


def test_removed_segments_are_deleted_after_the_delay(tmp_path, clock):
    """§6.4: renamed .deleted at once; a reader's slice still reads; files go after
    file.delete.delay.ms."""
    log = fifteen(tmp_path, clock, 10, retention_ms=10_000, file_delete_delay_ms=1000)
    slice_ = log.read(0, 1 << 20)
    want = slice_.to_bytes()
    head = log.segments[0]
    assert delete_old_segments(log) == 3
    assert head.log.path.endswith(".deleted") and os.path.exists(head.log.path)
    assert slice_.to_bytes() == want  # a reader in the middle of it finishes
    clock.sleep(1000)
    assert log.delete_pending_segments() == 3
    assert not os.path.exists(head.log.path)
    log.close()


def test_a_closed_log_is_left_alone(tmp_path, clock):
    log = fifteen(tmp_path, clock, 10, retention_ms=10_000)
    log.close()
    assert delete_old_segments(log) == 0


@settings(max_examples=40, deadline=None)
@given(stamps=st.lists(st.integers(-3000, 3000), min_size=1, max_size=25),
       retention_ms=st.one_of(st.just(-1), st.integers(0, 4000)),
       retention_sets=st.one_of(st.just(-1), st.integers(0, 30)),
       start=st.integers(0, 30))
def test_retention_properties(tmp_path_factory, stamps, retention_ms, retention_sets, start):
    """Whatever the settings: a prefix goes, what stays reads back unchanged from the
    new start, the end offset never moves, and the size rule holds afterwards."""
    clock = Clock()
    size1 = set_size()
    retention_bytes = -1 if retention_sets < 0 else retention_sets * size1
    log = open_log(tmp_path_factory.mktemp("r"), clock, segment_bytes=size1 * 3,
                   retention_ms=retention_ms, retention_bytes=retention_bytes)
    try:
        for ts in stamps:
            log.append([(None, b"test", clock() + ts)])
        log.delete_records(min(start, log.log_end_offset))
        before = [s.base_offset for s in log.segments]
        records = read_all(log)
        end = log.log_end_offset
        # the passes one by one, in delete_old_segments' order
        delete_log_start_offset_breached_segments(log)
        size_before = log.size
        delete_retention_size_breached_segments(log)
        if retention_bytes >= 0:
            # never below the limit, and above it by less than the oldest segment
            assert log.size >= min(size_before, retention_bytes)
            if size_before > retention_bytes and len(log.segments) > 1:
                assert log.size - log.segments[0].size < retention_bytes
        delete_retention_ms_breached_segments(log, clock())
        after = [s.base_offset for s in log.segments]
        assert log.log_end_offset == end
        kept_old = [b for b in after if b in before]
        assert kept_old == before[len(before) - len(kept_old):]  # a suffix stays
        assert read_all(log) == [r for r in records if r.offset >= log.log_start_offset]
        assert delete_old_segments(log) == 0  # a second pass finds nothing more
    finally:
        log.close()
