"""Ports of the producer-state and transaction cases of Kafka's UnifiedLogTest (the names
in the docstrings), with Kafka's own offsets and expected values."""

from __future__ import annotations

import os

import pytest
from _logtools import Clock, open_log

from kafkastore.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from kafkastore.log import Log
from kafkastore.records import encode_batch
from kafkastore.retention import delete_old_segments
from kafkastore.txn_index import AbortedTxn


class Producer:
    """Kafka's ``LogTestUtils.appendTransactionalAsLeader``: each call appends one batch of
    ``n`` records of ``pid``, sequences following on."""

    def __init__(self, log: Log, pid: int, epoch: int = 0, transactional: bool = True):
        self.log, self.pid, self.epoch, self.txn = log, pid, epoch, transactional
        self.seq = 0

    def __call__(self, n: int):
        info = self.log.append([(None, b"v%d" % i) for i in range(n)], producer_id=self.pid,
                               producer_epoch=self.epoch, base_sequence=self.seq,
                               is_transactional=self.txn)
        self.seq += n
        return info


def plain(log: Log, n: int):
    """``appendNonTransactionalAsLeader``."""
    return log.append([(None, b"p%d" % i) for i in range(n)])


def all_aborted(log: Log) -> list[AbortedTxn]:
    """``LogTestUtils.allAbortedTransactions``: every segment's index, in order."""
    return [t for seg in log.segments for t in seg.txn_index.all_aborted_txns()]


def snapshot_offsets(path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".snapshot"))


def test_transaction_index_updated(tmp_path):
    """testTransactionIndexUpdated: Kafka's sequence, Kafka's expected entries."""
    log = open_log(tmp_path, segment_bytes=5 << 20)
    p1, p2, p3, p4 = (Producer(log, pid) for pid in (1, 2, 3, 4))
    p1(5)                           # 5
    plain(log, 3)                   # 8
    p2(2)                           # 10
    p1(4)                           # 14
    p3(3)                           # 17
    plain(log, 2)                   # 19
    p1(10)                          # 29
    log.append_end_txn_marker(1, 0, "ABORT")     # 30
    p2(6)                           # 36
    p4(3)                           # 39
    plain(log, 10)                  # 49
    p3(9)                           # 58
    log.append_end_txn_marker(3, 0, "COMMIT")    # 59
    p4(8)                           # 67
    p2(7)                           # 74
    log.append_end_txn_marker(2, 0, "ABORT")     # 75
    plain(log, 10)                  # 85
    p4(4)                           # 89
    log.append_end_txn_marker(4, 0, "COMMIT")    # 90
    assert log.log_end_offset == 90
    assert all_aborted(log) == [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]
    assert log.first_unstable_offset is None
    log.close()


def test_transaction_index_updated_through_replication(tmp_path):
    """testTransactionIndexUpdatedThroughReplication: the same entries on a follower."""
    leader = open_log(tmp_path / "leader", segment_bytes=5 << 20)
    p1, p2 = Producer(leader, 1), Producer(leader, 2)
    p1(5)
    plain(leader, 3)
    p2(2)
    leader.append_end_txn_marker(1, 0, "ABORT")
    p2(3)
    leader.append_end_txn_marker(2, 0, "ABORT")
    follower = open_log(tmp_path / "follower", segment_bytes=5 << 20)
    offset = 0
    while offset < leader.log_end_offset:   # batch by batch, as fetches would bring them
        sl = leader.read(offset, 1)
        follower.append_batches(sl.to_bytes(), assign_offsets=False)
        offset = follower.log_end_offset
    assert all_aborted(follower) == all_aborted(leader) == [
        AbortedTxn(1, 0, 10, 8), AbortedTxn(2, 8, 14, 15)]
    leader.close()
    follower.close()


def test_zombie_coordinator_fenced(tmp_path):
    """testZombieCoordinatorFenced / ...EmptyTransaction."""
    log = open_log(tmp_path)
    p = Producer(log, 1)
    p(10)
    log.append_end_txn_marker(1, 0, "ABORT", coordinator_epoch=1)
    p(5)
    log.append_end_txn_marker(1, 0, "COMMIT", coordinator_epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_end_txn_marker(1, 0, "ABORT", coordinator_epoch=1)
    with pytest.raises(TransactionCoordinatorFencedError):   # (no data: still fenced)
        log.append_end_txn_marker(1, 0, "COMMIT", coordinator_epoch=1)
    log.close()


def test_end_txn_with_fenced_producer_epoch(tmp_path):
    """testEndTxnWithFencedProducerEpoch."""
    log = open_log(tmp_path)
    log.append_end_txn_marker(1, 1, "ABORT", coordinator_epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(1, 0, "ABORT", coordinator_epoch=1)
    log.close()


@pytest.mark.parametrize("by_retention", [False, True])
def test_last_stable_offset_does_not_go_below_the_log_start_offset(tmp_path, by_retention):
    """testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment / ...AfterSegmentDeletion:
    the first unstable offset is lower-bounded by the log start offset."""
    log = open_log(tmp_path, segment_bytes=5 << 20)
    p = Producer(log, 1)
    p(5)
    plain(log, 3)
    assert log.log_end_offset == 8
    log.roll()
    p(5)
    assert log.first_unstable_offset == 0
    if by_retention:
        log.delete_records(8)
        delete_old_segments(log, log.time_ms())
        assert len(log.segments) == 1
        assert log.first_unstable_offset == log.last_stable_offset == 8
    else:
        log.delete_records(5)
        assert log.first_unstable_offset == log.last_stable_offset == 5
    log.close()


def test_duplicate_append_to_follower(tmp_path):
    """testDuplicateAppendToFollower: a follower validates no sequence, duplicates
    included."""
    log = open_log(tmp_path)
    for base in (0, 2):
        log.append_batches(encode_batch([(None, b"a"), (None, b"b")], base_offset=base,
                                        producer_id=1, producer_epoch=0, base_sequence=0,
                                        partition_leader_epoch=0), assign_offsets=False)
    assert log.log_end_offset == 4
    log.close()


def test_producer_id_map_offset_updated_for_non_idempotent_data(tmp_path):
    """testProducerIdMapOffsetUpdatedForNonIdempotentData: the map's end follows plain
    appends, and a roll writes the (empty) snapshot at the new base."""
    log = open_log(tmp_path)
    plain(log, 1)
    assert log.producer_state_manager.map_end_offset == 1
    log.roll()
    assert snapshot_offsets(tmp_path) == [1]
    log.close()


def test_retention_and_log_start_movement_delete_snapshots(tmp_path):
    """testRetentionDeletesProducerStateSnapshots / testLogStartOffsetMovementDeletesSnapshots:
    a removed segment's snapshot goes with it (renamed .deleted, then deleted)."""
    clock = Clock()
    log = open_log(tmp_path, clock, file_delete_delay_ms=0)
    p = Producer(log, 1, transactional=False)
    for _ in range(3):
        p(1)
        log.roll()
    assert snapshot_offsets(tmp_path) == [1, 2, 3]
    log.delete_records(2)
    delete_old_segments(log, clock())
    log.delete_pending_segments(force=True)
    assert [s.base_offset for s in log.segments] == [2, 3]
    assert snapshot_offsets(tmp_path) == [2, 3]
    log.close()


def test_loading_log_deletes_producer_state_snapshots_past_log_end_offset(tmp_path):
    """testLoadingLogDeletesProducerStateSnapshotsPastLogEndOffset."""
    log = open_log(tmp_path)
    Producer(log, 1)(3)
    log.close()
    (tmp_path / f"{42:020d}.snapshot").write_bytes(
        (tmp_path / f"{3:020d}.snapshot").read_bytes())
    log = open_log(tmp_path)
    assert 42 not in snapshot_offsets(tmp_path)
    assert log.first_unstable_offset == 0
    log.close()


def test_producer_id_map_truncate_to_with_no_snapshots(tmp_path):
    """testProducerIdMapTruncateToWithNoSnapshots: a truncation with every snapshot gone
    rebuilds the state from the log."""
    log = open_log(tmp_path, segment_bytes=300)
    p = Producer(log, 1, transactional=False)
    for _ in range(6):
        p(2)
    for offset in snapshot_offsets(tmp_path):
        os.unlink(tmp_path / f"{offset:020d}.snapshot")
    log.truncate_to(4)
    assert log.producer_state_manager.last_entry(1).last_seq == 3
    log.close()


def test_rebuild_transactional_state(tmp_path):
    """testRebuildTransactionalState: an open transaction survives a reopen."""
    log = open_log(tmp_path)
    Producer(log, 1)(3)
    plain(log, 2)
    log.close()
    log = open_log(tmp_path)
    assert log.first_unstable_offset == 0
    log.append_end_txn_marker(1, 0, "COMMIT")
    assert log.first_unstable_offset is None
    log.close()


def test_periodic_producer_id_expiration(tmp_path):
    """testPeriodicProducerIdExpiration."""
    clock = Clock()
    log = Log.open(str(tmp_path), time_ms=clock, producer_id_expiration_ms=200)
    log.append([(None, b"x")], producer_id=1, producer_epoch=0, base_sequence=0,
               timestamp=clock())
    assert log.remove_expired_producers(clock() + 100) == 0
    assert log.remove_expired_producers(clock() + 200) == 1
    assert log.producer_state_manager.last_entry(1) is None
    log.close()
