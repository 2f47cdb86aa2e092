"""Leader epochs: Kafka's ``LeaderEpochFileCache`` and ``leader-epoch-checkpoint``.

Scenarios of Kafka's ``LeaderEpochFileCacheTest`` and the epoch cases of
``UnifiedLogTest`` (issue 18, "Leader epochs").
"""

from __future__ import annotations

import os

import pytest
from _logtools import T0, Clock, open_log, process_died

from kafkastore.errors import CorruptCheckpointError
from kafkastore.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    EpochEntry,
    LeaderEpochFileCache,
)
from kafkastore.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log
from kafkastore.records import encode_batch


def cache_of(tmp_path, *entries) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_assign_and_persist_in_kafkas_format(tmp_path):
    cache = cache_of(tmp_path, (2, 6), (3, 11))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b"0\n2\n2 6\n3 11\n"
    assert LeaderEpochFileCache(str(tmp_path)).entries == (EpochEntry(2, 6), EpochEntry(3, 11))
    assert not cache.assign(3, 12)          # the same epoch later: nothing new
    assert cache.assign(3, 9)               # the latest epoch starting earlier: moved
    assert cache.entries == (EpochEntry(2, 6), EpochEntry(3, 9))


def test_a_new_entry_removes_the_entries_it_contradicts(tmp_path):
    """shouldNotResetEpochHistoryTailIfUndefinedPassed / shouldTruncateNonMonotonic..."""
    cache = cache_of(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.assign(3, 9)      # epoch 3 again, later than 4's start is not: 4 and 3 go
    assert cache.entries == (EpochEntry(2, 6), EpochEntry(3, 9))
    cache.assign(5, 7)      # a start before 3's: 3 goes
    assert cache.entries == (EpochEntry(2, 6), EpochEntry(5, 7))
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_end_offset_for(tmp_path):
    """shouldReturnLogEndOffsetIfLatestEpochRequested and the endOffsetFor family."""
    cache = cache_of(tmp_path, (2, 6), (3, 8), (5, 11))
    assert cache.end_offset_for(5, 20) == (5, 20)     # the latest: the log end
    assert cache.end_offset_for(3, 20) == (3, 11)
    assert cache.end_offset_for(4, 20) == (3, 11)     # between: the floor's epoch
    assert cache.end_offset_for(1, 20) == (1, 6)      # below: the first start
    assert cache.end_offset_for(7, 20) == (-1, -1)
    assert cache.end_offset_for(-1, 20) == (-1, -1)
    assert cache.epoch_for_offset(7) == 2 and cache.epoch_for_offset(11) == 5
    assert cache.epoch_for_offset(5) is None


def test_truncate_from_end_and_start(tmp_path):
    cache = cache_of(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(9)
    assert cache.entries == (EpochEntry(2, 6), EpochEntry(3, 8))
    cache.truncate_from_end(8)   # a start at the end goes
    assert cache.entries == (EpochEntry(2, 6),)
    (tmp_path / "b").mkdir()
    cache = cache_of(tmp_path / "b", (2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(9)   # exclusive: the last entry at or before 9 moves to 9
    assert cache.entries == (EpochEntry(3, 9), EpochEntry(4, 11))
    cache.truncate_from_start(11)
    assert cache.entries == (EpochEntry(4, 11),)
    assert LeaderEpochFileCache(str(tmp_path / "b")).entries == (EpochEntry(4, 11),)


def test_a_damaged_checkpoint_is_a_typed_error(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME).write_bytes(b"0\n2\n1 5\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochFileCache(str(tmp_path))


def test_the_log_keeps_its_epochs_on_append_truncation_and_deletion(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=300)
    log.append([(b"k", b"a", T0)] * 2)                          # no epoch: nothing kept
    # (the file exists from the open on, empty, as Kafka's CheckpointFile creates it)
    assert (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b""
    log.append([(b"k", b"b", T0)] * 2, partition_leader_epoch=0)   # offsets 2-3
    log.append([(b"k", b"c", T0)] * 2, partition_leader_epoch=0)
    log.append_batches(encode_batch([(b"k", b"d", T0)] * 2), leader_epoch=2)   # 6-7
    follower = encode_batch([(b"k", b"e", T0)] * 2, base_offset=8, partition_leader_epoch=5)
    log.append_batches(follower, assign_offsets=False)           # 8-9, epoch 5
    assert log.leader_epoch_cache.entries == ((0, 2), (2, 6), (5, 8))
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 10, 5)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, None)   # 0 < epoch 0's
    log.truncate_to(7)
    assert log.leader_epoch_cache.entries == ((0, 2), (2, 6))
    log.delete_records(3)
    assert log.leader_epoch_cache.entries == ((0, 3), (2, 6))
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, 3, 0)
    log.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT_FILENAME
    assert path.read_bytes() == b"0\n2\n0 3\n2 6\n"
    log = open_log(tmp_path / "t-0", clock, log_start_offset=3)
    assert log.leader_epoch_cache.entries == ((0, 3), (2, 6))
    log.truncate_fully_and_start_at(20)
    assert log.leader_epoch_cache.entries == ()
    assert path.read_bytes() == b"0\n0\n"
    log.close()


def test_reopen_cuts_a_checkpoint_that_ran_past_the_log_and_recovery_rebuilds_it(tmp_path):
    """A checkpoint written for data a crash lost is cut to the recovered end; a lost
    checkpoint is rebuilt from the batches an unclean open recovers."""
    clock = Clock()
    path = tmp_path / "t-0"
    log = open_log(path, clock)
    for epoch in range(4):
        log.append([(b"k", b"v", T0)] * 3, partition_leader_epoch=epoch)
    log.flush()
    process_died(log)   # a crash: no clean shutdown
    checkpoint = path / LEADER_EPOCH_CHECKPOINT_FILENAME
    checkpoint.write_bytes(b"0\n5\n0 0\n1 3\n2 6\n3 9\n7 40\n")   # 7 was never written
    again = open_log(path, clock)
    assert again.leader_epoch_cache.entries == ((0, 0), (1, 3), (2, 6), (3, 9))
    again.close()
    os.unlink(checkpoint)
    third = open_log(path, clock, recovery_point=0, had_clean_shutdown=False)
    assert third.leader_epoch_cache.entries == ((0, 0), (1, 3), (2, 6), (3, 9))
    third.close()


def test_open_removes_checkpoint_temp_files_a_crash_left(tmp_path):
    """Found by the kill -9 loop: a kill between creating ``leader-epoch-checkpoint.tmp``
    and renaming it left the file for good (a checkpoint is rewritten only when an epoch
    changes). The log owns the directory once open, so its open deletes them."""
    d = tmp_path / "t-0"
    d.mkdir()
    for name in ("leader-epoch-checkpoint.tmp", "partition.metadata.tmp"):
        (d / name).write_bytes(b"0\n1\n")
    (d / "other.tmp").write_bytes(b"x")   # not the log's: left alone
    log = Log.open(str(d))
    assert sorted(n for n in os.listdir(d) if n.endswith(".tmp")) == ["other.tmp"]
    log.close()
