"""Tests that kill the surviving mutants of ``make mutate``'s log_append target
(kafkastore/log_append.py and the append path of kafkastore/log.py): each pins a behaviour
of Kafka's UnifiedLog.append (cited per test) that no other test pinned."""

from __future__ import annotations

import pytest
from _logtools import T0, Clock, open_log

from kafkastore.errors import CorruptRecordError, KafkaStorageError, RecordTooLargeError
from kafkastore.producer_state import AppendOrigin, ProducerStateManager
from kafkastore.records import encode_batch


def _follower_roll(tmp_path, first: bytes, second: bytes) -> tuple[list[int], int]:
    """The segment bases and log end after a follower appends ``first`` then ``second``
    to a log whose segments hold both but one byte (so the second rolls)."""
    log = open_log(tmp_path, Clock(T0), segment_bytes=len(first) + len(second) - 1)
    log.append_batches(first, assign_offsets=False)
    log.append_batches(second, assign_offsets=False)
    out = [s.base_offset for s in log.segments], log.log_end_offset
    log.close()
    return out


def test_a_follower_append_past_a_gap_rolls_at_its_first_offset(tmp_path):
    """Kafka's UnifiedLog.maybeRoll rolls at the append's first offset (``rollOffset =
    appendInfo.firstOffset``), and LocalLog.roll takes max(that, log end offset) as the
    new segment's base: a follower's batch at offset 10 after a log ending at 1 (the
    leader's compacted gap) that does not fit the active segment starts a segment at 10,
    not at 1. (Kills _maybe_roll mutant 18: a roll at the log end.)"""
    first = encode_batch([(b"k", b"v" * 50, T0)], base_offset=0, timestamp=T0)
    second = encode_batch([(b"k", b"w" * 50, T0)], base_offset=10, timestamp=T0)
    assert _follower_roll(tmp_path, first, second) == ([0, 10], 11)


def test_a_coordinators_corrupt_marker_is_refused_naming_the_log(tmp_path):
    """A control batch from the coordinator whose control record key is shorter than 4
    bytes: Kafka's ControlRecordType.parse refuses it while UnifiedLog.append analyzes
    the producer state (ProducerAppendInfo.append reads the marker), before anything is
    written; kafkastore's typed error names the log's directory, as every error of an
    append does. (Kills _analyze_producers mutants 22 and 25: no path given.)"""
    log = open_log(tmp_path, Clock(T0))
    bad = encode_batch([(b"k", None, T0)], is_control=True, is_transactional=True,
                       producer_id=7, producer_epoch=0, base_sequence=-1, timestamp=T0)
    with pytest.raises(CorruptRecordError) as info:
        log.append_batches(bad, origin=AppendOrigin.COORDINATOR)
    assert info.value.path == log.dir
    assert log.log_end_offset == 0
    log.close()


def test_a_follower_legacy_wrapper_rolls_at_the_log_end(tmp_path):
    """A follower's compressed magic-1 wrapper has no known first offset without
    inflating it: Kafka's UnifiedLog.maybeRoll rolls at ``maxOffsetInMessages -
    Integer.MAX_VALUE`` and LocalLog.roll at max(that, log end offset), so a wrapper of
    offsets 5..7 after a log ending at 1 that does not fit the active segment starts a
    segment at the log end, 1, not at 5. (Kills _append_set mutant 17: the roll at the
    first offset whatever the magic.)"""
    first = encode_batch([(b"k", b"v" * 50, T0)], magic=1, base_offset=0, timestamp=T0)
    wrapper = encode_batch([(b"k", b"w" * 50, T0)] * 3, magic=1, base_offset=5,
                           compression="gzip", timestamp=T0)
    assert _follower_roll(tmp_path, first, wrapper) == ([0, 1], 8)


def test_a_failure_after_the_write_leaves_the_end_after_the_written_batch(tmp_path,
                                                                          monkeypatch):
    """A file-system failure after the batch reached the segment (here while the
    producer state records it): the append fails with the typed storage error, as Kafka's
    UnifiedLog.append fails under maybeHandleIOException, and the log end offset follows
    what the file holds, as LogLoader's recovery would find it, so no offset written is
    handed out again. (Kills _append_set mutants 32, 33, 34: the end set to None or a
    TypeError in place of the storage error.)"""
    log = open_log(tmp_path, Clock(T0))

    def fail(self, updates):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(ProducerStateManager, "record_updates", fail)
    batch = encode_batch([(b"k", b"v", T0)] * 2, producer_id=7, producer_epoch=0,
                         base_sequence=0, timestamp=T0)
    with pytest.raises(KafkaStorageError):
        log.append_batches(batch)
    assert log.log_end_offset == 2
    assert log.active_segment.read_next_offset() == 2
    log.close()


@pytest.mark.parametrize("elapsed, flushed", [(999, False), (1000, True), (1001, True)])
def test_an_append_flushes_once_flush_ms_has_passed(tmp_path, elapsed, flushed):
    """An append flushes the log when flush.ms has passed since the last flush, at exactly
    the limit too: Kafka's LogManager.flushDirtyLogs flushes when ``timeSinceLastFlush >=
    log.config.flushMs`` (UnifiedLog.append's own check, ``unflushedMessages >=
    flushInterval``, is >= as well). One millisecond before, after and at the limit.
    (Kills _append_set mutant 51: > in place of >=.)"""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, flush_ms=1000)
    log.append_batches(encode_batch([(b"k", b"v", T0)], timestamp=T0))
    assert log.recovery_point == 0
    clock.sleep(elapsed)
    log.append_batches(encode_batch([(b"k", b"w", T0)], timestamp=T0))
    assert log.recovery_point == (2 if flushed else 0)
    log.close()


@pytest.mark.parametrize("spare", [0, 1])
def test_a_batch_as_large_as_the_segment_is_appended(tmp_path, spare):
    """Kafka's UnifiedLog.append refuses a record set only when it is larger than
    segment.bytes (``validRecords.sizeInBytes > config.segmentSize``): one exactly as large,
    or one byte smaller, is appended. (Kills _check_segment_size mutant 2: >=.)"""
    batch = encode_batch([(b"k", b"v" * 50, T0)], base_offset=0, timestamp=T0)
    log = open_log(tmp_path, Clock(T0), segment_bytes=len(batch) + spare)
    log.append_batches(batch, assign_offsets=False)
    assert log.log_end_offset == 1
    log.close()


def test_a_batch_larger_than_the_segment_is_refused_with_kafkas_message(tmp_path):
    """One byte over segment.bytes: Kafka's UnifiedLog.append throws
    RecordBatchTooLargeException "Message batch size is N bytes in append to partition P
    which exceeds the maximum configured segment size of S."; kafkastore's typed error
    carries the same message, the limit and the log's directory, and nothing is written.
    (Kills _check_segment_size mutants 3, 4, 5.)"""
    batch = encode_batch([(b"k", b"v" * 50, T0)], base_offset=0, timestamp=T0)
    log = open_log(tmp_path, Clock(T0), segment_bytes=len(batch) - 1)
    with pytest.raises(RecordTooLargeError) as info:
        log.append_batches(batch, assign_offsets=False)
    assert str(info.value).startswith(
        f"Message batch size is {len(batch)} bytes in append to partition {log.dir} which "
        f"exceeds the maximum configured segment size of {len(batch) - 1}.")
    assert (info.value.limit, info.value.path) == (len(batch) - 1, log.dir)
    assert log.log_end_offset == 0
    log.close()
