"""The cleaner where it used to differ from Kafka (issue 27, differences 6 and 7).

6. The aborted transactions of a round come from Kafka's *cleaner* lookup,
   ``UnifiedLog.collectAbortedTransactions(start, upper)``: ``start`` only picks the
   first segment (``floorSegment``) and the ``.txnindex`` entries are filtered by the
   log start offset, not by ``start`` as a fetch (``LocalLog.read`` ->
   ``addAbortedTransactions``) filters them.
7. The producers whose last batch a round keeps are those the log's producer state
   holds when the group is cleaned (Kafka's ``Cleaner.cleanSegments`` reads
   ``UnifiedLog.lastRecordsOfActiveProducers``), whatever their idle time; only the log's
   own expiration (``producer.id.expiration.ms``, applied by ``removeExpiredProducers``)
   forgets a producer.

The expected results are derived by hand from Kafka's ``Cleaner`` (``buildOffsetMap``,
``cleanSegments``, ``cleanInto``), ``CleanedTransactionMetadata`` and
``MemoryRecords.filterTo`` in the comments; nothing expected is computed by the code
under test.
"""

from __future__ import annotations

import pytest
from _logtools import Clock, open_log

from kafkastore.cleaner import Cleaner, CleanerConfig, LogToClean, clean
from kafkastore.config import ConfigError
from kafkastore.log import Log
from kafkastore.manager import LogManager, ManagerConfig
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch, iter_batches

SMALL = {"log.cleaner.dedupe.buffer.size": 1 << 20}
HOUR = 3_600_000
DAY = 24 * HOUR


def write(log: Log, clock: Clock, key: bytes, value: bytes | None, *, producer_id: int = -1,
          seq: int = 0, txn: bool = False) -> int:
    """One single-record batch at the log end (a follower's append: offsets as given)."""
    base = log.log_end_offset
    batch = encode_batch([(key, value, clock())], base_offset=base, timestamp=clock(),
                         producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                         base_sequence=seq if producer_id >= 0 else -1, is_transactional=txn)
    log.append_batches(batch, assign_offsets=False)
    return base


def marker(log: Log, clock: Clock, producer_id: int, *, commit: bool) -> int:
    base = log.log_end_offset
    ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    log.append_batches(encode_control_batch(ctype, producer_id=producer_id, producer_epoch=0,
                                            base_offset=base, timestamp=clock()),
                       assign_offsets=False)
    return base


def entries(log: Log) -> list[tuple]:
    """Every batch of every segment, straight from the files: ``(base offset, last
    offset, producer id, is control, [(offset, key, value), ...])``."""
    out = []
    for seg in log.segments:
        with open(seg.log.path, "rb") as f:
            data = f.read()
        for b in iter_batches(data):
            recs = [(r.offset, None if r.key is None else bytes(r.key),
                     None if r.value is None else bytes(r.value)) for r in b]
            out.append((b.base_offset, b.last_offset, b.producer_id, b.is_control, recs))
    return out


def data_records(log: Log) -> list[tuple]:
    return [r for _, _, _, control, recs in entries(log) if not control for r in recs]


# -- 6. the cleaner's aborted-transaction lookup --------------------------------------------


def test_an_abort_ending_before_the_first_dirty_offset_is_seen_as_kafka_sees_it(tmp_path):
    """The first dirty offset lies inside a segment whose ``.txnindex`` holds an abort
    that began and ended before it; the offset index lets pass 1 start past the abort's
    marker. The round keeps exactly the records Kafka's keeps."""
    clock = Clock()
    # every batch gets an offset index entry, so pass 1 starts right at offset 3
    log = open_log(tmp_path, clock, cleanup_policy="compact", index_interval_bytes=0)
    P = 7
    assert write(log, clock, b"a", b"a0") == 0
    assert write(log, clock, b"x", b"x-aborted", producer_id=P, seq=0, txn=True) == 1
    assert marker(log, clock, P, commit=False) == 2      # .txnindex: (P, first 1, last 2)
    assert write(log, clock, b"b", b"b0") == 3           # the first dirty offset
    assert write(log, clock, b"a", b"a1", producer_id=P, seq=1, txn=True) == 4
    assert marker(log, clock, P, commit=True) == 5
    assert write(log, clock, b"c", b"c0") == 6
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 7]

    # Kafka's round for LogToClean(firstDirtyOffset=3, firstUncleanableOffset=7):
    #
    # buildOffsetMap(start=3, end=7): collectAbortedTransactions(3, 7) takes segment 0
    # (floorSegment(3)) and keeps its entries with lastOffset >= logStartOffset (0) and
    # firstOffset < 7: (P, 1, 2). The walk starts at offsetIndex.lookup(3), the batch at
    # offset 3, so the ABORT marker at 2 is never read:
    #   3 b0  -> consumeAbortedTxnsUpTo(3) moves (P, 1, 2) to ongoingAbortedTxns; b -> 3
    #   4 a1  -> transactional, P is in ongoingAbortedTxns: "aborted", not mapped
    #   5 COMMIT of P -> nothing (P was never in ongoingCommittedTxns)
    #   6 c0  -> c -> 6
    # The map is {b: 3, c: 6} and its latest offset 6: key a is not in it.
    #
    # cleanSegments([segment 0]) with a fresh CleanedTransactionMetadata:
    # collectAbortedTransactions(0, 7) gives (P, 1, 2) again; the walk reads everything:
    #   0 a0  -> a is not in the map: retained
    #   1 x   -> (P, 1, 2) is consumed: aborted, DELETE (P's last data offset is 4)
    #   2 ABORT -> P had a batch in this pass: the marker stays, its .txnindex entry too
    #   3 b0  -> the latest of b: retained
    #   4 a1  -> committed (P not aborted now); a is not in the map: retained
    #   5 COMMIT -> P's batch was traversed: retained
    #   6 c0  -> retained
    # A fetch-style lookup (entries with lastOffset >= 3) would miss (P, 1, 2) in pass 1,
    # map a -> 4 and drop a0: a different set of superseded records.
    cleaner = Cleaner(CleanerConfig(SMALL))
    end, _ = cleaner.clean(LogToClean(None, log, 3, 7), clock())
    assert end == 7
    assert data_records(log) == [(0, b"a", b"a0"), (3, b"b", b"b0"), (4, b"a", b"a1"),
                                 (6, b"c", b"c0")]
    assert [(base, control) for base, _, _, control, _ in entries(log) if control] == [
        (2, True), (5, True)]
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(P, 1, 2)]
    log.close()


def test_the_cleaner_lookup_filters_by_the_log_start_offset(tmp_path):
    """Kafka's ``UnifiedLog.collectAbortedTransactions(start, upper)``: ``start`` picks the
    segment, the log start offset filters; the fetch lookup filters by ``start``."""
    clock = Clock()
    log = open_log(tmp_path, clock, cleanup_policy="compact")
    P = 3
    write(log, clock, b"x", b"1", producer_id=P, seq=0, txn=True)     # 0
    marker(log, clock, P, commit=False)                               # 1: (P, 0, 1)
    write(log, clock, b"y", b"1")                                     # 2
    write(log, clock, b"x", b"2", producer_id=P, seq=1, txn=True)     # 3
    marker(log, clock, P, commit=False)                               # 4: (P, 3, 4)
    write(log, clock, b"z", b"1")                                     # 5

    def triples(txns):
        return [(t.producer_id, t.first_offset, t.last_offset) for t in txns]

    # the fetch rule: entries whose last offset is at or past the fetch offset
    assert triples(log.collect_aborted_transactions(2, 6)) == [(P, 3, 4)]
    # the cleaner's rule: every entry of the segment from the log start offset (0) on
    assert triples(log.collect_aborted_transactions_for_cleaning(2, 6)) == [(P, 0, 1),
                                                                             (P, 3, 4)]
    # ... up to the upper bound (firstOffset < upper)
    assert triples(log.collect_aborted_transactions_for_cleaning(2, 3)) == [(P, 0, 1)]
    # with the log start offset past the first abort, the cleaner's rule drops it too
    log.delete_records(2)
    assert triples(log.collect_aborted_transactions_for_cleaning(2, 6)) == [(P, 3, 4)]
    log.close()


def test_an_abort_ending_below_the_log_start_offset_is_not_aborted_for_the_cleaner(tmp_path):
    """The lookup of each segment that pass 2 recopies filters by the log start offset
    too, so an abort whose marker lies below it is unknown to the round, as in Kafka."""
    clock = Clock()
    log = open_log(tmp_path, clock, cleanup_policy="compact", delete_retention_ms=1000)
    P = 4
    assert write(log, clock, b"x", b"aborted", producer_id=P, seq=0, txn=True) == 0
    assert marker(log, clock, P, commit=False) == 1      # .txnindex: (P, first 0, last 1)
    write(log, clock, b"y", b"1")                         # 2
    write(log, clock, b"z", b"1")                         # 3
    log.roll()
    assert log.delete_records(2) == 2                     # the first dirty offset too
    # Kafka's round from 2 to 4: buildOffsetMap's lookup keeps entries with lastOffset >= 2
    # (none); the walk starts at offset 0 (no index entry yet): x at 0 is below the start,
    # not mapped; the map is {y: 2, z: 3}.
    # cleanSegments: collectAbortedTransactions(0, 4) also filters by the log start
    # offset (2): (P, 0, 1) is left out, so
    #   0 x   -> not aborted (P goes to ongoingCommittedTxns); x not in the map: retained
    #   1 ABORT -> P not in ongoingAbortedTxns: a marker for an empty transaction, kept
    #              and stamped with the delete horizon (now + delete.retention.ms)
    #   2 y, 3 z -> retained
    # (a fetch-style lookup from the segment's base would know the abort, drop x and keep
    # the marker without a horizon)
    clean(log, config=CleanerConfig(SMALL))
    assert data_records(log) == [(0, b"x", b"aborted"), (2, b"y", b"1"), (3, b"z", b"1")]
    with open(log.segments[0].log.path, "rb") as f:
        (ctl,) = [b for b in iter_batches(f.read()) if b.is_control]
    assert (ctl.base_offset, ctl.has_delete_horizon, ctl.delete_horizon_ms) == (
        1, True, clock() + 1000)
    log.close()


# -- 7. the producers whose last batch stays ------------------------------------------------


def _superseded_producer_log(tmp_path, clock: Clock, expiration_ms: int) -> Log:
    """Producer 5 writes k1 (offset 0) and k2 (offset 1), both superseded at 2 and 3;
    offset 4 closes the round."""
    log = Log.open(str(tmp_path), {"cleanup.policy": "compact"}, time_ms=clock,
                   producer_id_expiration_ms=expiration_ms)
    write(log, clock, b"k1", b"old", producer_id=5, seq=0)
    write(log, clock, b"k2", b"old", producer_id=5, seq=1)
    write(log, clock, b"k1", b"new")
    write(log, clock, b"k2", b"new")
    write(log, clock, b"z", b"z")
    log.roll()
    return log


def test_a_producer_the_log_still_holds_keeps_its_last_batch_whatever_its_idle_time(tmp_path):
    """Idle for two days (past the one day the cleaner used to apply on its own) but still
    in the log's producer state (its producer.id.expiration.ms is three days): Kafka's
    cleanInto finds the producer in lastRecordsOfActiveProducers with last data offset 1,
    so the batch at 1 gets BatchRetention.RETAIN_EMPTY and, its record superseded, stays
    as a header without records; the batch at 0 is not the last one: DELETE_EMPTY, gone."""
    clock = Clock()
    log = _superseded_producer_log(tmp_path, clock, expiration_ms=3 * DAY)
    clock.sleep(2 * DAY)
    assert log.remove_expired_producers() == 0          # the log's own expiry: not yet
    clean(log, config=CleanerConfig(SMALL))
    assert entries(log) == [
        (1, 1, 5, False, []),                            # producer 5's last batch, empty
        (2, 2, -1, False, [(2, b"k1", b"new")]),
        (3, 3, -1, False, [(3, b"k2", b"new")]),
        (4, 4, -1, False, [(4, b"z", b"z")]),
    ]
    # the kept header carries the producer's sequence: a retry of it is still a duplicate
    info = log.append([(b"k2", b"old")], producer_id=5, producer_epoch=0, base_sequence=1)
    assert info.duplicate and info.first_offset == 1
    log.close()


def test_a_producer_past_the_logs_expiration_is_kept_until_the_log_forgets_it(tmp_path):
    """Idle past the log's own producer.id.expiration.ms, but the periodic expiration has
    not run: Kafka's state still holds the producer, so its last batch stays. After
    ``removeExpiredProducers`` it is gone from lastRecordsOfActiveProducers and the next
    round deletes the batch (DELETE_EMPTY: no record left)."""
    clock = Clock()
    log = _superseded_producer_log(tmp_path, clock, expiration_ms=HOUR)
    clock.sleep(2 * DAY)
    clean(log, config=CleanerConfig(SMALL))
    assert [(base, pid, recs) for base, _, pid, _, recs in entries(log)][0] == (1, 5, [])
    assert log.remove_expired_producers() == 1
    clean(log, config=CleanerConfig(SMALL))
    assert [base for base, *_ in entries(log)] == [2, 3, 4]
    log.close()


def test_a_producer_expired_from_the_log_loses_its_last_batch(tmp_path):
    """Forgotten by the log (its producer.id.expiration.ms is an hour) before the round:
    not in lastRecordsOfActiveProducers, so both of its batches go."""
    clock = Clock()
    log = _superseded_producer_log(tmp_path, clock, expiration_ms=HOUR)
    clock.sleep(HOUR)
    assert log.remove_expired_producers() == 1
    clean(log, config=CleanerConfig(SMALL))
    assert [(base, pid) for base, _, pid, _, _ in entries(log)] == [(2, -1), (3, -1), (4, -1)]
    log.close()


def test_producer_id_expiration_is_a_log_manager_setting(tmp_path):
    """Kafka's CleanerConfig has no producer.id.expiration.ms (a broker setting of the
    transaction state, TransactionLogConfigs): ManagerConfig holds it and the manager's
    logs expire their producers with it."""
    with pytest.raises(ConfigError, match="ManagerConfig"):
        CleanerConfig({"producer.id.expiration.ms": 1000})
    assert ManagerConfig().producer_id_expiration_ms == DAY
    with pytest.raises(ConfigError):
        ManagerConfig({"producer.id.expiration.ms": 0})          # Kafka: atLeast(1)
    clock = Clock()
    m = LogManager(str(tmp_path), background=False, time_ms=clock,
                   manager_config={"producer.id.expiration.ms": HOUR})
    log = m.get_or_create("t", 0)
    log.append([(b"k", b"v")], producer_id=9, producer_epoch=0, base_sequence=0)
    clock.sleep(HOUR - 1)
    assert m.remove_expired_producers() == 0
    clock.sleep(1)
    assert m.remove_expired_producers() == 1
    m.close()
