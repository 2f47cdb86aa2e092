"""ProducerStateManager and its ``.snapshot`` files: a port of Kafka's
ProducerStateManagerTest (the scenarios that apply without the KIP-890 verification
guard and without a high watermark other than the log end offset), plus the snapshot
bytes checked against the schema written out here independently."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest

from kafkastore.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkastore.producer_state import (
    AppendOrigin,
    ProducerBatch,
    ProducerStateEntry,
    ProducerStateManager,
    parse_snapshot,
    read_snapshot,
    snapshot_bytes,
)
from kafkastore.records import ControlRecordType

PID = 1
EPOCH = 0
INT_MAX = 2**31 - 1
EXPIRATION = 86_400_000


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def psm(tmp_path, clock):
    return ProducerStateManager(str(tmp_path), EXPIRATION, clock)


def append(psm, pid, epoch, seq, offset, timestamp=0, transactional=False,
           origin=AppendOrigin.CLIENT, last_seq=None):
    """Kafka's test helper ``append``: one data batch of one record (or of the
    sequence range ``seq..last_seq``), applied, the map end moved past it."""
    info = psm.prepare_update(pid, origin)
    info.append_data_batch(epoch, seq, seq if last_seq is None else last_seq, timestamp,
                           offset, offset, transactional)
    psm.update(info)
    psm.update_map_end_offset(offset + 1)


def append_marker(psm, pid, epoch, ctype, offset, coordinator_epoch=0, timestamp=0,
                  origin=AppendOrigin.COORDINATOR):
    info = psm.prepare_update(pid, origin)
    completed = info.append_end_txn_marker(ctype, coordinator_epoch, epoch, offset, timestamp)
    psm.update(info)
    if completed is not None:
        psm.complete_txn(completed)
    psm.update_map_end_offset(offset + 1)
    return completed


# -- sequences and epochs --------------------------------------------------------------


def test_basic_id_mapping(psm):
    append(psm, PID, EPOCH, 0, 0)
    append(psm, PID, EPOCH, 1, 1)
    with pytest.raises(OutOfOrderSequenceError):   # a duplicate is checked elsewhere
        append(psm, PID, EPOCH, 1, 1)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, PID, EPOCH, 5, 2)
    append(psm, PID, EPOCH + 1, 0, 3)
    with pytest.raises(InvalidProducerEpochError) as err:
        append(psm, PID, EPOCH, 0, 4)
    assert err.value.producer_id == PID and err.value.offset == 4


def test_append_txn_marker_with_no_producer_state(psm):
    append_marker(psm, PID, 2, ControlRecordType.COMMIT, 27)
    entry = psm.last_entry(PID)
    assert (entry.producer_epoch, entry.producer_id, entry.last_seq) == (2, PID, -1)
    with pytest.raises(InvalidProducerEpochError):
        append(psm, PID, 0, 0, 4)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, PID, 2, 17, 4)
    append(psm, PID, 2, 0, 4, timestamp=39)
    assert psm.last_entry(PID).last_seq == 0


def test_sequence_wrap_around(psm):
    append(psm, PID, 15, INT_MAX, 735, origin=AppendOrigin.REPLICATION)
    append(psm, PID, 15, 0, 1235)
    entry = psm.last_entry(PID)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (15, INT_MAX, 0)


def test_sequence_with_wrap_around_batch():
    batch = ProducerBatch(PID, 15, INT_MAX - 10, 2000, 2020, 0, False, False, None)
    assert batch.last_sequence == 9


def test_wrap_around_batch_record(psm):
    info = psm.prepare_update(PID, AppendOrigin.REPLICATION)
    info.append_data_batch(15, INT_MAX - 10, 9, 0, 2000, 2020, False)
    assert psm.last_entry(PID) is None   # prepared, not applied
    psm.update(info)
    entry = psm.last_entry(PID)
    assert (entry.first_seq, entry.last_seq) == (INT_MAX - 10, 9)
    assert (entry.batch_metadata[0].first_offset, entry.last_data_offset) == (2000, 2020)


def test_sequence_invalid_wrap_around(psm):
    append(psm, PID, 15, INT_MAX, 735, origin=AppendOrigin.REPLICATION)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, PID, 15, 1, 1235)


def test_no_validation_on_first_entry_when_loading_log(psm):
    append(psm, PID, 5, 16, 735, origin=AppendOrigin.REPLICATION)
    entry = psm.last_entry(PID)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (5, 16, 16)
    assert entry.last_data_offset == 735


def test_control_record_bumps_producer_epoch(psm):
    append(psm, PID, EPOCH, 0, 0)
    append_marker(psm, PID, 1, ControlRecordType.ABORT, 1)
    entry = psm.last_entry(PID)
    assert entry.producer_epoch == 1 and entry.current_txn_first_offset is None
    assert (entry.first_seq, entry.last_seq) == (-1, -1)
    append(psm, PID, 1, 0, 2)
    assert psm.last_entry(PID).first_seq == 0


def test_prepare_update_does_not_mutate(psm):
    append(psm, PID, EPOCH, 0, 0)
    before = repr(psm.last_entry(PID))
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(EPOCH, 1, 1, 0, 1, 1, True)
    assert repr(psm.last_entry(PID)) == before
    assert psm.first_unstable_offset() is None
    psm.update(info)
    assert psm.first_unstable_offset() == 1


def test_out_of_sequence_after_control_record_epoch_bump(psm):
    append(psm, PID, EPOCH, 0, 99, transactional=True)
    append(psm, PID, EPOCH, 1, 100, transactional=True)
    append_marker(psm, PID, 1, ControlRecordType.ABORT, 101)
    with pytest.raises(OutOfOrderSequenceError):   # a new epoch starts at 0
        append(psm, PID, 1, 2, 102, transactional=True)
    append(psm, PID, 1, 0, 102, transactional=True)


def test_non_transactional_append_with_ongoing_transaction(psm):
    append(psm, PID, EPOCH, 0, 0, transactional=True)
    with pytest.raises(InvalidTxnStateError):
        append(psm, PID, EPOCH, 1, 1, transactional=False)


def test_accept_append_without_producer_state_on_replica(psm):
    append(psm, PID, EPOCH, 0, 0, origin=AppendOrigin.REPLICATION)
    append(psm, PID, EPOCH, 1, 1, origin=AppendOrigin.REPLICATION)
    psm.truncate_fully_and_start_at(0)
    append(psm, PID, EPOCH, 1, 1, origin=AppendOrigin.REPLICATION)   # no check
    assert psm.last_entry(PID).last_seq == 1


def test_accept_append_with_sequence_gaps_on_replica(psm):
    append(psm, PID, EPOCH, 0, 0, origin=AppendOrigin.REPLICATION)
    append(psm, PID, EPOCH, 5, 1, origin=AppendOrigin.REPLICATION)
    assert psm.last_entry(PID).last_seq == 5


def test_old_epoch_for_control_record(psm):
    append(psm, PID, 3, 0, 99, transactional=True)
    with pytest.raises(InvalidProducerEpochError):
        append_marker(psm, PID, 1, ControlRecordType.COMMIT, 100)


def test_coordinator_fencing(psm):
    append(psm, PID, EPOCH, 0, 99, transactional=True)
    append_marker(psm, PID, EPOCH, ControlRecordType.COMMIT, 100, coordinator_epoch=1)
    append(psm, PID, EPOCH, 1, 101, transactional=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        append_marker(psm, PID, EPOCH, ControlRecordType.COMMIT, 102, coordinator_epoch=0)
    # replication only logs it
    append_marker(psm, PID, EPOCH, ControlRecordType.COMMIT, 102, coordinator_epoch=0,
                  origin=AppendOrigin.REPLICATION)


def test_coordinator_fenced_after_reload(psm, tmp_path, clock):
    append(psm, PID, EPOCH, 0, 0, transactional=True, timestamp=clock.now)
    append_marker(psm, PID, EPOCH, ControlRecordType.COMMIT, 1, coordinator_epoch=2,
                  timestamp=clock.now)
    psm.take_snapshot()
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 2)
    append(fresh, PID, EPOCH, 1, 2, transactional=True, timestamp=clock.now)
    with pytest.raises(TransactionCoordinatorFencedError):
        append_marker(fresh, PID, EPOCH, ControlRecordType.COMMIT, 3, coordinator_epoch=1)


def test_producer_state_after_fencing_abort_marker(psm):
    append(psm, PID, EPOCH, 0, 0, transactional=True)
    append_marker(psm, PID, EPOCH + 1, ControlRecordType.ABORT, 1)
    entry = psm.last_entry(PID)
    assert entry.current_txn_first_offset is None and entry.producer_epoch == EPOCH + 1


def test_append_empty_control_batch(psm):
    """A control batch with no record left (the cleaner removed it) ends nothing."""
    info = psm.prepare_update(PID, AppendOrigin.REPLICATION)
    empty = ProducerBatch(PID, EPOCH, -1, 5, 5, 0, True, True, None)
    assert info.append(empty) is None
    psm.update(info)
    assert psm.first_unstable_offset() is None


# -- transactions, the LSO ---------------------------------------------------------------


def test_first_unstable_offset(psm):
    append(psm, PID, EPOCH, 0, 99, transactional=True)
    assert psm.first_unstable_offset() == 99
    other = 2
    append(psm, other, EPOCH, 0, 105, transactional=True)
    assert psm.first_unstable_offset() == 99
    completed = append_marker(psm, PID, EPOCH, ControlRecordType.COMMIT, 109)
    assert completed.first_offset == 99 and not completed.is_aborted
    assert psm.first_unstable_offset() == 105
    append_marker(psm, other, EPOCH, ControlRecordType.ABORT, 112)
    assert psm.first_unstable_offset() is None


def test_last_stable_offset_completed_txn(psm):
    """Kafka's testLastStableOffsetCompletedTxn: the LSO after a marker is the first offset
    of the oldest open transaction of another producer, else the marker's offset + 1."""
    p1, p2, p3 = 39, 57, 91
    append(psm, p1, EPOCH, 0, 100, transactional=True)
    append(psm, p2, EPOCH, 0, 101, transactional=True)
    append(psm, p3, EPOCH, 0, 102, transactional=True)
    c1 = append_marker(psm, p1, EPOCH, ControlRecordType.COMMIT, 103)
    # (computed before complete_txn, as the log does: append_marker completes it)
    assert c1.last_offset == 103
    info = psm.prepare_update(p2, AppendOrigin.COORDINATOR)
    c2 = info.append_end_txn_marker(ControlRecordType.COMMIT, 0, EPOCH, 104, 0)
    psm.update(info)
    assert psm.last_stable_offset(c2) == 102
    psm.complete_txn(c2)
    info = psm.prepare_update(p3, AppendOrigin.COORDINATOR)
    c3 = info.append_end_txn_marker(ControlRecordType.COMMIT, 0, EPOCH, 105, 0)
    psm.update(info)
    assert psm.last_stable_offset(c3) == 106


def test_skip_empty_transactions(psm):
    """A marker of a producer with no open transaction completes nothing."""
    assert append_marker(psm, PID, EPOCH, ControlRecordType.COMMIT, 10) is None
    append(psm, PID, EPOCH, 0, 11, transactional=True)
    assert append_marker(psm, PID, EPOCH, ControlRecordType.ABORT, 12).is_aborted
    assert append_marker(psm, PID, EPOCH, ControlRecordType.ABORT, 13) is None


def test_complete_unknown_transaction_is_refused(psm):
    from kafkastore.producer_state import CompletedTxn
    with pytest.raises(ValueError, match="which was not started"):
        psm.complete_txn(CompletedTxn(PID, 5, 6, True))


# -- expiration ---------------------------------------------------------------------------


def test_pid_expiration_timeout(psm, clock):
    append(psm, PID, EPOCH, 0, 0, timestamp=clock.now)
    clock.now += EXPIRATION + 1
    assert psm.remove_expired_producers(clock.now) == 1
    append(psm, PID, EPOCH, 5, 1)   # no state left: any sequence is accepted
    assert psm.last_entry(PID).last_seq == 5


def test_producers_with_ongoing_transactions_dont_expire(psm, clock):
    append(psm, PID, EPOCH, 0, 99, transactional=True, timestamp=clock.now)
    clock.now += EXPIRATION + 1
    assert psm.remove_expired_producers(clock.now) == 0
    assert psm.last_entry(PID) is not None


def test_remove_expired_pids_on_reload(psm, tmp_path, clock):
    append(psm, PID, EPOCH, 0, 0, timestamp=clock.now)
    append(psm, PID, EPOCH, 1, 1, timestamp=clock.now + 1)
    psm.take_snapshot()
    clock.now += EXPIRATION + 1   # the first batch's time is past, the last one's not
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 1)   # (a snapshot at 2 is above the end: removed)
    assert fresh.last_entry(PID) is None
    psm.take_snapshot()
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 2)
    assert fresh.last_entry(PID) is None   # expired as of its last timestamp too


def test_load_from_snapshot_retains_non_expired_producers(psm, tmp_path, clock):
    append(psm, PID, EPOCH, 0, 0, timestamp=clock.now)
    append(psm, 2, EPOCH, 0, 1, timestamp=clock.now)
    psm.take_snapshot()
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 2)
    assert sorted(fresh.producers) == [PID, 2]


# -- snapshots ----------------------------------------------------------------------------


def snapshots(tmp_path) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(tmp_path) if n.endswith(".snapshot"))


def test_take_snapshot(psm, tmp_path):
    append(psm, PID, EPOCH, 0, 0)
    append(psm, PID, EPOCH, 1, 1)
    assert psm.take_snapshot() is not None
    assert snapshots(tmp_path) == [2]
    assert psm.latest_snapshot_offset() == 2


def test_skip_snapshot_if_offset_unchanged(psm, tmp_path):
    append(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    assert psm.take_snapshot() is None   # the map end offset did not move
    assert snapshots(tmp_path) == [1]


def test_recover_from_snapshot_unfinished_transaction(psm, tmp_path, clock):
    append(psm, PID, EPOCH, 0, 99, transactional=True, timestamp=clock.now)
    append(psm, PID, EPOCH, 1, 100, transactional=True, timestamp=clock.now)
    psm.take_snapshot()
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 101)
    assert fresh.first_unstable_offset() == 99   # the open transaction survives
    append_marker(fresh, PID, EPOCH, ControlRecordType.COMMIT, 101)
    assert fresh.first_unstable_offset() is None


def test_recover_from_snapshot_finished_transaction(psm, tmp_path, clock):
    append(psm, PID, EPOCH, 0, 99, transactional=True, timestamp=clock.now)
    append(psm, PID, EPOCH, 1, 100, transactional=True, timestamp=clock.now)
    append_marker(psm, PID, EPOCH, ControlRecordType.ABORT, 101, timestamp=clock.now)
    psm.take_snapshot()
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 102)
    assert fresh.first_unstable_offset() is None


def test_truncate_and_reload_removes_out_of_range_snapshots(psm, tmp_path, clock):
    for offset in range(5):
        append(psm, PID, EPOCH, offset, offset, timestamp=clock.now)
        psm.take_snapshot()
    assert snapshots(tmp_path) == [1, 2, 3, 4, 5]
    psm.truncate_and_reload(1, 3)
    assert snapshots(tmp_path) == [2, 3]
    assert psm.map_end_offset == 3 and psm.last_entry(PID).last_seq == 2


def test_delete_snapshots_before(psm, tmp_path):
    for offset in range(3):
        append(psm, PID, EPOCH, offset, offset)
        psm.take_snapshot()
    psm.delete_snapshots_before(2)
    assert snapshots(tmp_path) == [2, 3]
    psm.delete_snapshots_before(4)
    assert snapshots(tmp_path) == []


def test_truncate_fully_and_start_at(psm, tmp_path):
    for offset in range(3):
        append(psm, PID, EPOCH, offset, offset)
        psm.take_snapshot()
    psm.truncate_fully_and_start_at(29)
    assert snapshots(tmp_path) == [] and psm.producers == {}
    assert psm.map_end_offset == 29


def test_first_unstable_offset_after_truncation(psm, tmp_path):
    append(psm, PID, EPOCH, 0, 99, transactional=True)
    psm.take_snapshot()
    append(psm, 2, EPOCH, 0, 105, transactional=True)
    psm.take_snapshot()
    assert psm.first_unstable_offset() == 99
    psm.truncate_and_reload(0, 100)   # back to the first snapshot
    assert psm.first_unstable_offset() == 99 and psm.last_entry(2) is None


@pytest.mark.parametrize("data, message", [
    (b"", "Snapshot failed schema validation: null"),
    (b"\x00\x01\x00\x00", "Snapshot failed schema validation: null"),
    (b"\x00\x02" + bytes(8), "unknown file version 2"),
])
def test_load_from_empty_or_truncated_snapshot_file(psm, tmp_path, clock, data, message):
    """Kafka's testLoadFromEmptySnapshotFile / TruncatedSnapshotFile: the bad snapshot is
    deleted and the state comes from the one before it."""
    append(psm, PID, EPOCH, 0, 0, timestamp=clock.now)
    psm.take_snapshot()
    (tmp_path / f"{5:020d}.snapshot").write_bytes(data)
    with pytest.raises(CorruptSnapshotError, match=message):
        read_snapshot(str(tmp_path / f"{5:020d}.snapshot"))
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 5)
    assert snapshots(tmp_path) == [1]
    assert fresh.map_end_offset == 1 and fresh.last_entry(PID).last_seq == 0


def test_load_from_corrupt_snapshot_file(psm, tmp_path, clock):
    append(psm, PID, EPOCH, 0, 0, timestamp=clock.now)
    psm.take_snapshot()
    append(psm, PID, EPOCH, 1, 1, timestamp=clock.now)
    path = psm.take_snapshot()
    data = bytearray(Path(path).read_bytes())
    data[-1] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError, match="CRC is no longer valid"):
        read_snapshot(path)
    fresh = ProducerStateManager(str(tmp_path), EXPIRATION, clock)
    fresh.truncate_and_reload(0, 2)
    assert snapshots(tmp_path) == [1] and fresh.last_entry(PID).last_seq == 0


def test_remove_stray_snapshots_keep_clean_shutdown_snapshot(psm, tmp_path):
    for offset in (1, 2, 3, 4, 5):
        (tmp_path / f"{offset:020d}.snapshot").write_bytes(snapshot_bytes([]))
    psm.remove_stray_snapshots([1, 3])
    assert snapshots(tmp_path) == [1, 3, 5]   # 5: above every base (clean shutdown)


def test_remove_all_stray_snapshots(psm, tmp_path):
    for offset in (1, 2, 3, 4, 5):
        (tmp_path / f"{offset:020d}.snapshot").write_bytes(snapshot_bytes([]))
    psm.remove_stray_snapshots([6])
    assert snapshots(tmp_path) == []


def test_remove_and_mark_snapshot_for_deletion(psm, tmp_path):
    append(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    path = psm.remove_and_mark_snapshot_for_deletion(1)
    assert path.endswith(".snapshot.deleted") and os.path.exists(path)
    assert snapshots(tmp_path) == [] and psm.latest_snapshot_offset() is None
    assert psm.remove_and_mark_snapshot_for_deletion(1) is None   # already gone


def _schema_bytes(entries) -> bytes:
    """A version-1 snapshot laid out from the ProducerSnapshot schema, written here
    without kafkastore: version, crc, count, then 46-byte entries."""
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *e) for e in entries)
    crc = crc32c.crc32c(body)
    return struct.pack(">hI", 1, crc) + body


def test_read_write_snapshot_bytes_match_the_schema(tmp_path):
    entries = [ProducerStateEntry(7, 3, 11, 1_000, 42, []),
               ProducerStateEntry(9, 1, -1, 2_000, None,
                                  [_meta(last_seq=4, last_offset=40, delta=2, ts=2_000)])]
    want = _schema_bytes([(7, 3, -1, -1, 0, 1_000, 11, 42),
                          (9, 1, 4, 40, 2, 2_000, -1, -1)])
    assert snapshot_bytes(entries) == want
    back = parse_snapshot(want)
    assert [(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_timestamp,
             e.current_txn_first_offset, [tuple(m) for m in e.batch_metadata]) for e in back] \
        == [(7, 3, 11, 1_000, 42, []), (9, 1, -1, 2_000, None, [(4, 40, 2, 2_000)])]
    assert back[1].first_seq == 2


def _meta(last_seq, last_offset, delta, ts):
    from kafkastore.producer_state import BatchMetadata
    return BatchMetadata(last_seq, last_offset, delta, ts)


def test_snapshot_entries_follow_java_hash_map_order():
    """Kafka writes its HashMap<Long, _> in iteration order: by bucket
    ((h ^ h >>> 16) & (capacity - 1) with h = (int)(v ^ v >>> 32)), so producer ids 17 and 1
    (buckets 1 and 1: 17 & 15 == 1) keep insertion order, and 2 comes after both."""
    entries = [ProducerStateEntry(pid, 0, -1, 0) for pid in (2, 17, 1)]
    order = [struct.unpack_from(">q", snapshot_bytes(entries), 10 + 46 * i)[0]
             for i in range(3)]
    assert order == [17, 1, 2]
    many = [ProducerStateEntry(pid, 0, -1, 0) for pid in range(40, 0, -1)]   # capacity 64
    order = [struct.unpack_from(">q", snapshot_bytes(many), 10 + 46 * i)[0] for i in range(40)]
    assert order == list(range(1, 41))


def test_snapshot_schema_errors_name_kafkas_reasons():
    good = _schema_bytes([(7, 0, 0, 0, 0, 0, 0, -1)])
    with pytest.raises(CorruptSnapshotError, match="non-nullable field producerEntries"):
        parse_snapshot(good[:6] + struct.pack(">i", -1))
    with pytest.raises(CorruptSnapshotError, match="Tried to allocate a collection of size 99"):
        parse_snapshot(good[:6] + struct.pack(">i", 99) + good[10:])
    with pytest.raises(CorruptSnapshotError, match="CRC is no longer valid"):
        parse_snapshot(good + b"\x00")   # trailing bytes are covered by the CRC
