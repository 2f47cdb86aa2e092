"""Idempotent and transactional appends on a Log: producer state, ``.snapshot`` files, the
last stable offset, ``.txnindex`` and read_committed reads (the transactional cases of
Kafka's UnifiedLogTest and LogLoaderTest, and the consumer's read_committed rules)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from _logtools import Clock, abandon, open_log, process_died

from kafkastore.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkastore.log import CLEAN_SHUTDOWN_FILE, Log
from kafkastore.log_view import ReadOnlyLog
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch
from kafkastore.retention import delete_old_segments

PID, OTHER = 7, 9


def values(records):
    return [r.value for r in records]


def committed(log: Log, start: int = 0) -> list:
    """What a read_committed consumer gets: Log.read fetches until the LSO."""
    out, offset = [], start
    while offset < log.last_stable_offset:
        sl = log.read(offset, 1 << 20, isolation_level="read_committed")
        batches = list(sl.batches())
        if not batches:
            break
        out.extend(r for r in sl.records() if r.offset >= offset)
        offset = batches[-1].last_offset + 1
    return out


def produced(records, *, pid=PID, epoch=0, seq=0, txn=False) -> bytes:
    """A producer's batch as it sends it (base offset 0)."""
    return encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=txn, timestamp=Clock()())


def txn(log: Log, key: bytes, value: bytes, pid: int = PID, seq: int = 0):
    """One transactional record of ``pid`` at sequence ``seq``."""
    return log.append([(key, value)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                      is_transactional=True)


def txn_files(path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".txnindex"))


def snapshot_offsets(path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".snapshot"))


# -- idempotence -------------------------------------------------------------------------


def test_a_retried_batch_returns_its_original_offsets_and_writes_nothing(tmp_path):
    log = open_log(tmp_path)
    for seq in range(3):
        log.append_batches(produced([(b"k", b"v%d" % seq)], seq=seq))
    size = log.size
    info = log.append_batches(produced([(b"k", b"v1")], seq=1))   # a retry of the 2nd
    assert info.duplicate and (info.first_offset, info.last_offset) == (1, 1)
    assert log.size == size and log.log_end_offset == 3
    info = log.append([(b"k", b"v2")], producer_id=PID, producer_epoch=0, base_sequence=2)
    assert info.duplicate and info.first_offset == 2
    log.close()


def test_only_the_last_five_batches_are_remembered(tmp_path):
    log = open_log(tmp_path)
    for seq in range(7):
        log.append_batches(produced([(b"k", b"v")], seq=seq))
    assert log.append_batches(produced([(b"k", b"v")], seq=2)).duplicate   # 5th back
    with pytest.raises(OutOfOrderSequenceError):   # 6th back: no longer known
        log.append_batches(produced([(b"k", b"v")], seq=1))
    log.close()


def test_an_out_of_order_sequence_writes_nothing_of_the_call(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(produced([(b"a", b"1")], seq=0))
    call = produced([(b"b", b"2")], seq=1) + produced([(b"c", b"3")], seq=5)
    with pytest.raises(OutOfOrderSequenceError) as err:
        log.append_batches(call)
    assert err.value.producer_id == PID and err.value.offset == 2
    assert log.log_end_offset == 1
    log.append_batches(produced([(b"b", b"2")], seq=1))   # the state did not move
    assert log.log_end_offset == 2
    log.close()


def test_a_fenced_epoch_and_a_new_epoch_not_at_zero_are_refused(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(produced([(b"a", b"1")], epoch=3, seq=0))
    with pytest.raises(InvalidProducerEpochError):
        log.append_batches(produced([(b"a", b"1")], epoch=2, seq=1))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        log.append_batches(produced([(b"a", b"1")], epoch=4, seq=3))
    log.append_batches(produced([(b"a", b"1")], epoch=4, seq=0))
    log.close()


def test_sequences_survive_a_clean_and_an_unclean_reopen(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for seq in range(10):
        log.append_batches(produced([(b"k", b"v" * 30)], seq=seq))
    assert len(log.segments) > 2
    log.close()
    log = open_log(tmp_path, segment_bytes=300)
    assert log.append_batches(produced([(b"k", b"v" * 30)], seq=9)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batches(produced([(b"k", b"v" * 30)], seq=12))
    process_died(log)
    abandon(log)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()   # (removed by the open)
    for offset in snapshot_offsets(tmp_path):   # every snapshot lost: a full replay
        os.unlink(tmp_path / f"{offset:020d}.snapshot")
    log = open_log(tmp_path, segment_bytes=300)
    assert log.append_batches(produced([(b"k", b"v" * 30)], seq=9)).duplicate
    log.append_batches(produced([(b"k", b"v" * 30)], seq=10))
    log.close()


# -- transactions ------------------------------------------------------------------------


def test_markers_end_transactions_and_move_the_last_stable_offset(tmp_path):
    log = open_log(tmp_path)
    log.append([(b"a", b"plain")])
    txn(log, b"t", b"x1", PID, 0)
    txn(log, b"u", b"y1", OTHER, 0)
    assert log.last_stable_offset == 1 and log.first_unstable_offset == 1
    info = log.append_end_txn_marker(PID, 0, "ABORT", coordinator_epoch=4)
    assert info.first_offset == 3
    assert log.last_stable_offset == 2   # the other producer's transaction is open
    log.append_end_txn_marker(OTHER, 0, "COMMIT")
    assert log.last_stable_offset == log.log_end_offset == 5
    assert log.first_unstable_offset is None
    # the abort's entry: the marker's offset and the LSO right after it
    raw = (tmp_path / f"{0:020d}.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, PID, 1, 3, 2)
    assert values(committed(log)) == [b"plain", b"y1"]
    log.close()


def test_a_client_cannot_write_a_marker_and_a_stale_coordinator_is_fenced(tmp_path):
    log = open_log(tmp_path)
    marker = encode_control_batch(ControlRecordType.COMMIT, producer_id=PID, producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_batches(marker)
    log.append([(b"t", b"1")], producer_id=PID, producer_epoch=2, base_sequence=0,
               is_transactional=True)
    log.append_end_txn_marker(PID, 2, "COMMIT", coordinator_epoch=5)
    log.append([(b"t", b"2")], producer_id=PID, producer_epoch=2, base_sequence=1,
               is_transactional=True)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_end_txn_marker(PID, 2, "ABORT", coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(PID, 1, "ABORT", coordinator_epoch=5)
    assert log.log_end_offset == end and log.first_unstable_offset == 2
    log.close()


def test_a_non_transactional_batch_inside_a_transaction_is_refused(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(produced([(b"a", b"1")], txn=True))
    with pytest.raises(InvalidTxnStateError):
        log.append_batches(produced([(b"a", b"2")], seq=1))
    assert log.log_end_offset == 1
    log.close()


def test_read_committed_drops_aborted_batches_across_segments(tmp_path):
    """Interleaved producers, transactions spanning rolls: the consumer's rules."""
    log = open_log(tmp_path, segment_bytes=400)
    aborted = set()
    seqs = {PID: 0, OTHER: 0}

    def data(pid, value, txn=True):
        log.append([(b"k", value)], producer_id=pid, producer_epoch=0,
                   base_sequence=seqs[pid], is_transactional=txn)
        seqs[pid] += 1

    for round_ in range(6):
        data(PID, b"p%d-a" % round_)
        data(OTHER, b"o%d-a" % round_)
        data(PID, b"p%d-b" % round_)
        log.append([(b"plain", b"n%d" % round_)])
        abort_pid = PID if round_ % 2 else OTHER
        for pid in (PID, OTHER):
            log.append_end_txn_marker(pid, 0, "ABORT" if pid == abort_pid else "COMMIT")
        aborted |= {b"p%d-a" % round_, b"p%d-b" % round_} if abort_pid == PID \
            else {b"o%d-a" % round_}
    assert len(log.segments) > 3 and txn_files(tmp_path)
    got = values(committed(log))
    everything = list(ReadOnlyLog.open(str(tmp_path)).records())
    assert got == [r.value for r in everything if r.value not in aborted]
    assert not aborted & set(got) and len(got) == len(everything) - len(aborted)
    view = ReadOnlyLog.open(str(tmp_path))
    assert values(view.records(isolation_level="read_committed")) == got
    assert view.columns(isolation_level="read_committed").offset.tolist() == \
        [r.offset for r in committed(log)]
    log.close()


def test_read_committed_stops_at_the_last_stable_offset(tmp_path):
    log = open_log(tmp_path)
    log.append([(b"a", b"before")])
    txn(log, b"t", b"open", PID, 0)
    log.append([(b"a", b"after")])
    assert log.last_stable_offset == 1
    sl = log.read(0, 1 << 20, isolation_level="read_committed")
    assert values(sl.records()) == [b"before"] and sl.aborted_transactions == []
    assert log.read(1, 100, isolation_level="read_committed").size == 0
    view = ReadOnlyLog.open(str(tmp_path))
    assert view.last_stable_offset == 1
    assert values(view.records(isolation_level="read_committed")) == [b"before"]
    assert values(view.records()) == [b"before", b"open", b"after"]
    with pytest.raises(ValueError, match="isolation_level"):
        log.read(0, 10, isolation_level="committed")
    log.close()
    view = ReadOnlyLog.open(str(tmp_path))   # from the snapshot the close wrote
    assert view.last_stable_offset == 1


def test_the_follower_path_records_producer_state_and_aborts(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append([(b"t", b"1")], producer_id=PID, producer_epoch=0, base_sequence=0,
                  is_transactional=True)
    leader.append([(b"a", b"2")])
    leader.append_end_txn_marker(PID, 0, "ABORT")
    data = leader.read(0, 1 << 20).to_bytes()
    follower = open_log(tmp_path / "follower")
    follower.append_batches(data, assign_offsets=False)
    assert (tmp_path / "follower" / f"{0:020d}.txnindex").read_bytes() == \
        (tmp_path / "leader" / f"{0:020d}.txnindex").read_bytes()
    assert values(committed(follower)) == [b"2"]
    leader.close()
    follower.close()


# -- snapshots and .txnindex over the log's life -------------------------------------------


def test_snapshots_are_taken_on_roll_and_close_and_deleted_with_segments(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, clock, segment_bytes=300, retention_bytes=700,
                   file_delete_delay_ms=1000)
    for seq in range(12):
        log.append_batches(produced([(b"k", b"v" * 40)], seq=seq))
    bases = [s.base_offset for s in log.segments]
    assert snapshot_offsets(tmp_path) == bases[1:]
    removed = delete_old_segments(log, clock())
    assert removed > 0
    assert snapshot_offsets(tmp_path) == [b for b in bases[1:] if b >= log.log_start_offset
                                          and b in [s.base_offset for s in log.segments]]
    assert any(n.endswith(".snapshot.deleted") for n in os.listdir(tmp_path))
    clock.sleep(1000)
    log.delete_pending_segments()
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path))
    log.close()
    assert snapshot_offsets(tmp_path)[-1] == log.log_end_offset


def test_truncation_rewinds_producer_state_and_the_txn_index(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for seq in range(3):
        txn(log, b"t", b"x" * 60, PID, seq)
    log.append_end_txn_marker(PID, 0, "ABORT")          # offset 3
    for seq in range(3, 6):
        txn(log, b"t", b"y" * 60, PID, seq)
    log.append_end_txn_marker(PID, 0, "ABORT")          # offset 7
    assert len(log.collect_aborted_transactions(0, 100)) == 2
    log.truncate_to(5)
    assert [t.last_offset for t in log.collect_aborted_transactions(0, 100)] == [3]
    assert all(o <= 5 for o in snapshot_offsets(tmp_path))
    assert log.first_unstable_offset == 4   # the second transaction is open again
    # the producer's sequence is back to the truncated point
    txn(log, b"t", b"z", PID, 4)
    log.close()


def test_recovery_rebuilds_a_lost_txn_index_and_snapshots(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for i in range(4):
        txn(log, b"t", b"x" * 80, PID, i)
        log.append_end_txn_marker(PID, 0, "ABORT" if i % 2 == 0 else "COMMIT")
    txn(log, b"t", b"open", PID, 4)
    want = values(committed(log))
    aborted = log.collect_aborted_transactions(0, 100)
    index_bytes = {n: (tmp_path / n).read_bytes() for n in txn_files(tmp_path)}
    lso = log.last_stable_offset
    process_died(log)
    abandon(log)
    for name in os.listdir(tmp_path):
        if name.endswith((".txnindex", ".snapshot")):
            os.unlink(tmp_path / name)
    log = open_log(tmp_path, segment_bytes=300)   # unclean: recover every segment
    assert {n: (tmp_path / n).read_bytes() for n in txn_files(tmp_path)} == index_bytes
    assert log.collect_aborted_transactions(0, 100) == aborted
    assert log.last_stable_offset == lso
    assert values(committed(log)) == want
    log.close()


def test_a_corrupt_snapshot_is_ignored_and_rebuilt(tmp_path):
    log = open_log(tmp_path)
    txn(log, b"t", b"open", PID, 0)
    log.close()
    (snap,) = [n for n in os.listdir(tmp_path) if n.endswith(".snapshot")]
    data = bytearray((tmp_path / snap).read_bytes())
    data[-1] ^= 1
    (tmp_path / snap).write_bytes(bytes(data))
    log = open_log(tmp_path)
    assert log.first_unstable_offset == 0   # rebuilt from the log
    assert snap in os.listdir(tmp_path)     # and written again at the end
    log.close()


def test_producers_expire_through_the_manager(tmp_path):
    from kafkastore.manager import LogManager
    clock = Clock()
    m = LogManager(str(tmp_path), background=False, time_ms=clock,
                   manager_config={"producer.id.expiration.ms": 1000,
                                   "producer.id.expiration.check.interval.ms": 500})
    log = m.get_or_create("t", 0)
    log.append([(b"k", b"v")], producer_id=PID, producer_epoch=0, base_sequence=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append([(b"k", b"v")], producer_id=PID, producer_epoch=0, base_sequence=5)
    clock.sleep(1500)
    assert "PeriodicProducerExpirationCheck" in m.run_scheduled_tasks()
    log.append([(b"k", b"v")], producer_id=PID, producer_epoch=0, base_sequence=5)
    m.close()


def test_consume_isolation_level_on_the_command_line(tmp_path):
    root = tmp_path / "logs"
    log = Log.open(str(root / "orders-0"))
    log.append([(b"k", b"kept")])
    txn(log, b"k", b"gone", PID, 0)
    log.append_end_txn_marker(PID, 0, "ABORT")
    txn(log, b"k", b"open", OTHER, 0)
    log.close()

    def consume(*extra):
        done = subprocess.run([sys.executable, "-m", "kafkastore", "consume", str(root),
                               "orders", *extra], capture_output=True, text=True, cwd="/tmp")
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert consume() == ["kept", "gone", "open"]
    assert consume("--isolation-level", "read_committed") == ["kept"]
    # --last counts offsets below the last stable offset (3): a marker and an aborted
    # record there leave the one committed record
    assert consume("--isolation-level", "read_committed", "--last", "3") == ["kept"]


def test_the_cleaner_takes_aborted_transactions_from_the_txn_index_and_keeps_it(tmp_path):
    """LogCleanerTest's transactional cleaning with Kafka's CleanedTransactionMetadata: the
    aborted transaction (known from ``.txnindex``) is removed, its ABORT marker stays for
    this round and so does its entry, written again into the cleaned segment's index;
    read_committed reads the same before and after."""
    from kafkastore.cleaner import CleanerConfig, clean

    clock = Clock()
    log = open_log(tmp_path, clock, cleanup_policy="compact")
    txn(log, b"a", b"aborted", PID, 0)
    log.append([(b"a", b"plain")])
    log.append_end_txn_marker(PID, 0, "ABORT")
    txn(log, b"b", b"committed", OTHER, 0)
    log.append_end_txn_marker(OTHER, 0, "COMMIT")
    log.roll()
    name = f"{0:020d}.txnindex"
    entry = (tmp_path / name).read_bytes()
    assert entry == struct.pack(">hqqqq", 0, PID, 0, 2, 3)
    before = values(committed(log))
    clean(log, config=CleanerConfig({"log.cleaner.dedupe.buffer.size": 1 << 20}))
    assert values(ReadOnlyLog.open(str(tmp_path)).records()) == [b"plain", b"committed"]
    assert values(committed(log)) == before == [b"plain", b"committed"]
    assert (tmp_path / name).read_bytes() == entry   # the kept marker's entry
    log.close()


def test_a_marker_is_not_recompressed_and_a_coordinator_checks_no_sequence(tmp_path):
    """LogValidator: control records are not compressed unless written so (the topic's
    gzip leaves the marker plain); the coordinator origin skips the client-only checks
    (a marker's base sequence is -1)."""
    log = open_log(tmp_path, compression_type="gzip")
    txn(log, b"k", b"v")
    log.append_end_txn_marker(PID, 0, "COMMIT")
    batches = list(log.read(0, 1 << 20).batches())
    assert [(b.is_control, b.attributes & 0x07) for b in batches] == [(False, 1), (True, 0)]
    assert batches[1].base_sequence == -1 and batches[1].is_transactional
    log.close()


def test_recovery_replays_no_segment_twice(tmp_path, monkeypatch):
    """Each recovered segment leaves a snapshot at its end (every batch moves the map's end,
    as Kafka's updateProducerState does), so recovering the next segment starts from it
    and replays nothing. (The first cut left the end where the last batch with a producer
    id was: a log without producers replayed every earlier segment per segment recovered,
    a 40% slower unclean open.)"""
    from kafkastore import log_loader

    log = open_log(tmp_path, segment_bytes=2000)
    for i in range(60):
        log.append([(b"k", b"v" * 40)])
    assert len(log.segments) >= 3
    log.close()
    os.unlink(tmp_path / CLEAN_SHUTDOWN_FILE)
    replays = []
    real = log_loader._replay_segment
    monkeypatch.setattr(log_loader, "_replay_segment",
                        lambda *a: replays.append(a[1].base_offset) or real(*a))
    log = open_log(tmp_path, segment_bytes=2000)   # unclean: every segment recovered
    assert replays == []
    assert snapshot_offsets(tmp_path) == [s.base_offset for s in log.segments[1:]] + \
        [log.log_end_offset]
    log.close()


@pytest.mark.parametrize("seed", range(5))
def test_both_aborted_batch_scans_agree(tmp_path, seed):
    """The columnar read_committed path has two ways to find aborted batches: the
    consumer's state machine over (producer, first offset) pairs, and, with index entries
    (marker offsets known), a vectorised interval test. On random interleavings of three
    transactional producers, plain data, commits and aborts, they give the same ranges,
    and the ranges are exactly the aborted transactions' batches."""
    import random

    from kafkastore.records import scan_batches
    from kafkastore.txn_index import AbortedTransactionFilter

    rng = random.Random(seed)
    log = open_log(tmp_path)
    seqs, open_txns, aborted_batches = {}, {}, []
    for _ in range(300):
        pid = rng.choice((1, 2, 3))
        r = rng.random()
        if r < 0.15 and pid in open_txns:
            abort = rng.random() < 0.5
            log.append_end_txn_marker(pid, 0, "ABORT" if abort else "COMMIT")
            batches = open_txns.pop(pid)
            if abort:
                aborted_batches.extend(batches)
        elif r < 0.25:
            log.append([(b"k", b"plain")])
        else:
            info = txn(log, b"k", b"t" * rng.randint(0, 30), pid, seqs.get(pid, 0))
            seqs[pid] = seqs.get(pid, 0) + 1
            open_txns.setdefault(pid, []).append((info.first_offset, info.last_offset))
    entries = log.collect_aborted_transactions(0, log.log_end_offset)
    data = log.read(0, 1 << 30).to_bytes()
    scan = scan_batches(data)
    by_index = AbortedTransactionFilter(entries).aborted_ranges(
        data, scan.position, scan.size, scan.magic)
    by_state = AbortedTransactionFilter([(t.producer_id, t.first_offset) for t in entries]) \
        .aborted_ranges(data, scan.position, scan.size, scan.magic)
    assert by_index[0].tolist() == by_state[0].tolist() and \
        by_index[1].tolist() == by_state[1].tolist()
    assert list(zip(by_index[0].tolist(), by_index[1].tolist())) == sorted(aborted_batches)
    log.close()
