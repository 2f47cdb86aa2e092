"""Every time boundary of the storage layer pinned at the limit, one millisecond before and
one after (issue 27, "Tests that can fail").

Each test puts the clock (or the record timestamp) at ``limit + delta`` for ``delta`` in
-1, 0, +1 and checks the outcome Kafka's comparison gives there. The expected outcomes
are written out per delta from Kafka's operator, quoted in each docstring, so turning a
``>`` into ``>=`` (or ``<`` into ``<=``) in kafkastore fails exactly one case.

Kafka has no transaction timeout in the storage layer: ``transaction.timeout.ms`` and
``transaction.max.timeout.ms`` belong to the transaction coordinator, which aborts a
transaction by writing an ABORT marker like any other. kafkastore has none either, so
there is nothing to pin; the nearest storage-side limits, the CreateTime window and the
compaction lags, are pinned instead.
"""

from __future__ import annotations

import pytest
from _logtools import T0, Clock, open_log

from kafkastore.cleaner import CleanerConfig, clean, cleanable_offsets, max_compaction_delay
from kafkastore.errors import InvalidRecordError
from kafkastore.log import Log
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch, iter_batches
from kafkastore.retention import delete_old_segments, delete_retention_ms_breached_segments

DELTAS = (-1, 0, 1)
SMALL = {"log.cleaner.dedupe.buffer.size": 1 << 20}


def _cases(before, at, after):
    """``(delta, expected)`` for limit - 1, the limit and limit + 1."""
    return list(zip(DELTAS, (before, at, after)))


def _all_batches(log: Log):
    out = []
    for seg in log.segments:
        with open(seg.log.path, "rb") as f:
            out.extend(iter_batches(f.read()))
    return out


def _records(log: Log):
    """``(key, value)`` of every data record on disk, in offset order."""
    return [(bytes(r.key), None if r.value is None else bytes(r.value))
            for b in _all_batches(log) if not b.is_control for r in b]


# -- retention.ms ------------------------------------------------------------------------------

RETENTION = 1000


def _retention_log(tmp_path, clock) -> Log:
    """A closed segment whose largest timestamp is T0, then an active one far newer."""
    log = open_log(tmp_path, clock, retention_ms=RETENTION)
    log.append([(None, b"old", T0 - 5)], timestamp=T0 - 5)
    log.append([(None, b"old", T0)], timestamp=T0)
    log.roll()
    log.append([(None, b"new", T0 + 100 * RETENTION)], timestamp=T0 + 100 * RETENTION)
    return log


@pytest.mark.parametrize("delta,deleted", _cases(False, False, True))
def test_retention_ms_deletes_only_past_the_limit(tmp_path, delta, deleted):
    """Kafka: UnifiedLog.deleteRetentionMsBreachedSegments deletes a segment when
    ``startMs - segment.largestTimestamp > retentionMs``: exactly retention.ms old stays."""
    clock = Clock(T0 + RETENTION + delta)
    log = _retention_log(tmp_path, clock)
    assert delete_retention_ms_breached_segments(log, clock()) == int(deleted)
    assert log.log_start_offset == (2 if deleted else 0)
    log.close()


@pytest.mark.parametrize("delta,deleted", _cases(False, False, True))
def test_retention_pass_uses_the_same_boundary_with_the_log_clock(tmp_path, delta, deleted):
    """The full pass (Kafka's deleteOldSegments) with ``now`` from the log's clock."""
    clock = Clock(T0 + RETENTION + delta)
    log = _retention_log(tmp_path, clock)
    assert delete_old_segments(log) == int(deleted)
    assert [s.base_offset for s in log.segments] == ([2] if deleted else [0, 2])
    log.close()


# -- delete.retention.ms: the delete horizon of tombstones and markers --------------------------

DELETE_RETENTION = 100


def _compacted(tmp_path, clock, **kw) -> Log:
    return Log.open(str(tmp_path), {"cleanup.policy": "compact", "segment.bytes": 1024,
                                    "delete.retention.ms": DELETE_RETENTION},
                    time_ms=clock, **kw)


def _append_at(log: Log, data: bytes) -> None:
    log.append_batches(data, assign_offsets=False)


def _data(log, records, clock, **kw):
    ts = clock()
    _append_at(log, encode_batch([(k, v, ts) for k, v in records], base_offset=log.log_end_offset,
                                 timestamp=ts, **kw))


@pytest.mark.parametrize("delta,kept", _cases(True, False, False))
def test_tombstone_goes_at_its_delete_horizon(tmp_path, delta, kept):
    """Kafka: Cleaner.shouldRetainRecord keeps a tombstone of a v2 batch while
    ``!batch.deleteHorizonMs().isPresent() || currentTime < batch.deleteHorizonMs()``; the
    first round stamps ``deleteHorizonMs = currentTime + delete.retention.ms``
    (MemoryRecords.filterTo). At the horizon itself the tombstone is gone."""
    clock = Clock()
    log = _compacted(tmp_path, clock)
    _data(log, [(b"a", b"1"), (b"b", b"1")], clock)
    _data(log, [(b"a", None)], clock)
    log.roll()
    stamped_at = clock()
    clean(log, config=CleanerConfig(SMALL))
    horizon = stamped_at + DELETE_RETENTION
    tomb = [b for b in _all_batches(log) if any(r.value is None for r in b)]
    assert [b.delete_horizon_ms for b in tomb] == [horizon]
    clock.now = horizon + delta
    clean(log, config=CleanerConfig(SMALL))
    assert _records(log) == ([(b"b", b"1"), (b"a", None)] if kept else [(b"b", b"1")])
    log.close()


@pytest.mark.parametrize("delta,kept", _cases(True, False, False))
def test_marker_goes_at_its_delete_horizon(tmp_path, delta, kept):
    """Kafka: the cleaner's checkBatchRetention discards a control batch's records when
    ``canDiscardBatch && batch.deleteHorizonMs().isPresent() &&
    batch.deleteHorizonMs().getAsLong() <= currentTime``: the marker of a transaction
    that left nothing is stamped by one round and goes at (not after) its horizon."""
    clock = Clock()
    log = _compacted(tmp_path, clock, producer_id_expiration_ms=1)
    _data(log, [(b"a", b"1")], clock, producer_id=1, producer_epoch=0, base_sequence=0,
          is_transactional=True)
    _append_at(log, encode_control_batch(ControlRecordType.COMMIT, producer_id=1,
                                         producer_epoch=0, base_offset=log.log_end_offset,
                                         timestamp=clock()))
    _data(log, [(b"a", b"2")], clock)    # supersedes the transaction's only record
    _data(log, [(b"q", b"x")], clock)
    log.roll()
    config = CleanerConfig(SMALL)
    clock.sleep(10)
    log.remove_expired_producers()   # producer 1 is gone: its marker is not kept for it

    def marker_horizons():
        return [b.delete_horizon_ms if b.has_delete_horizon else None
                for b in _all_batches(log) if b.is_control]

    clean(log, config=config)       # the transaction's record goes, the marker stays
    assert marker_horizons() == [None]
    clean(log, config=config)       # nothing of the transaction is left: stamped
    horizon = clock() + DELETE_RETENTION
    assert marker_horizons() == [horizon]
    clock.now = horizon + delta
    clean(log, config=config)
    assert marker_horizons() == ([horizon] if kept else [])
    log.close()


# -- producer.id.expiration.ms -----------------------------------------------------------------

EXPIRATION = 1000


def _producer_log(tmp_path, clock) -> Log:
    log = Log.open(str(tmp_path), {}, time_ms=clock, producer_id_expiration_ms=EXPIRATION)
    log.append([(None, b"v", T0)], timestamp=T0, producer_id=7, producer_epoch=0,
               base_sequence=0)
    return log


@pytest.mark.parametrize("delta,expired", _cases(False, True, True))
def test_producer_expires_at_the_limit(tmp_path, delta, expired):
    """Kafka: ProducerStateManager.isProducerExpired is ``currentTxnFirstOffset.isEmpty()
    && currentTimeMs - lastTimestamp >= producerIdExpirationMs``: idle exactly
    producer.id.expiration.ms is expired."""
    clock = Clock(T0)
    log = _producer_log(tmp_path, clock)
    assert log.remove_expired_producers(T0 + EXPIRATION + delta) == int(expired)
    assert (7 in log.producer_state_manager.producers) is not expired
    log.close()


@pytest.mark.parametrize("delta,expired", _cases(False, True, True))
def test_expired_producer_is_not_loaded_from_the_snapshot(tmp_path, delta, expired):
    """Kafka: ProducerStateManager.loadFromSnapshot skips entries with isProducerExpired, the
    same boundary as the periodic removal."""
    clock = Clock(T0)
    _producer_log(tmp_path, clock).close()
    clock.now = T0 + EXPIRATION + delta
    log = Log.open(str(tmp_path), {}, time_ms=clock, producer_id_expiration_ms=EXPIRATION)
    assert (7 in log.producer_state_manager.producers) is not expired
    log.close()


@pytest.mark.parametrize("delta,active", _cases(True, False, False))
def test_cleaner_counts_a_producer_active_below_the_limit(tmp_path, delta, active):
    """The cleaner keeps the last batch of every producer the state still holds (Kafka:
    Cleaner's isBatchLastRecordOfProducer over UnifiedLog.lastRecordsOfActiveProducers);
    after the periodic expiration at ``now``, a producer idle exactly
    producer.id.expiration.ms is gone, so its last batch is cleaned like any other."""
    clock = Clock()
    log = Log.open(str(tmp_path), {"cleanup.policy": "compact"}, time_ms=clock,
                   producer_id_expiration_ms=EXPIRATION)
    _data(log, [(b"a", b"1")], clock, producer_id=3, producer_epoch=0, base_sequence=0)
    _data(log, [(b"a", b"2")], clock)
    log.roll()
    now = clock() + EXPIRATION + delta
    log.remove_expired_producers(now)   # the log manager's periodic expiration, then a round
    clean(log, config=CleanerConfig(SMALL), now_ms=now)
    kept = [(b.producer_id, b.record_count) for b in _all_batches(log)]
    # an active producer's last batch stays as an empty header; an expired one's goes
    assert kept == ([(3, 0), (-1, 1)] if active else [(-1, 1)])
    log.close()


# -- segment.ms: rolling by time ---------------------------------------------------------------

SEGMENT_MS = 1000


@pytest.mark.parametrize("delta,rolled", _cases(False, False, True))
def test_roll_by_record_timestamp(tmp_path, delta, rolled):
    """Kafka: LogSegment.shouldRoll rolls a non-empty segment when
    ``timeWaitedForRoll(now, maxTimestampInMessages) > maxSegmentMs - rollJitterMs``,
    the wait measured from the first batch's timestamp when it has one."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, segment_ms=SEGMENT_MS)
    log.append([(None, b"a", T0)], timestamp=T0)
    ts = T0 + SEGMENT_MS + delta
    log.append([(None, b"b", ts)], timestamp=ts)
    assert [s.base_offset for s in log.segments] == ([0, 1] if rolled else [0])
    log.close()


@pytest.mark.parametrize("delta,rolled", _cases(False, False, True))
def test_roll_by_wall_clock_without_timestamps(tmp_path, delta, rolled):
    """Kafka: LogSegment.timeWaitedForRoll falls back to ``now - created`` when the first
    batch has no timestamp (-1); the same ``>`` applies."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, segment_ms=SEGMENT_MS)
    log.append([(None, b"a", -1)], timestamp=-1)
    clock.now = T0 + SEGMENT_MS + delta
    log.append([(None, b"b", -1)], timestamp=-1)
    assert [s.base_offset for s in log.segments] == ([0, 1] if rolled else [0])
    log.close()


# -- message.timestamp.before.max.ms / after.max.ms --------------------------------------------

BEFORE, AFTER = 5000, 3000


@pytest.mark.parametrize("delta,valid", _cases(False, True, True))
def test_create_time_window_lower_edge(tmp_path, delta, valid):
    """Kafka: LogValidator.recordHasInvalidTimestamp is ``now - timestamp >
    timestampBeforeMaxMs || timestamp - now > timestampAfterMaxMs``: a record exactly
    before.max.ms old is valid. ``delta`` moves the timestamp towards now."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, message_timestamp_before_max_ms=BEFORE,
                   message_timestamp_after_max_ms=AFTER)
    ts = T0 - BEFORE + delta
    _check_window(log, ts, valid)


@pytest.mark.parametrize("delta,valid", _cases(True, True, False))
def test_create_time_window_upper_edge(tmp_path, delta, valid):
    """The same rule at the upper edge: exactly after.max.ms ahead of now is valid."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, message_timestamp_before_max_ms=BEFORE,
                   message_timestamp_after_max_ms=AFTER)
    ts = T0 + AFTER + delta
    _check_window(log, ts, valid)


def _check_window(log: Log, ts: int, valid: bool) -> None:
    # a batch of one in-window record and the probed one: the per-record check must
    # name the probed record's offset, and the batch's extremes are the probe
    records = [(None, b"ok", T0), (None, b"probe", ts)]
    try:
        if valid:
            log.append(records, timestamp=T0)
            assert log.log_end_offset == 2
        else:
            with pytest.raises(InvalidRecordError) as exc:
                log.append(records, timestamp=T0)
            assert exc.value.offset == 1
            assert log.log_end_offset == 0
    finally:
        log.close()


# -- min.compaction.lag.ms and max.compaction.lag.ms -------------------------------------------

LAG = 1000


@pytest.mark.parametrize("delta,cleanable", _cases(False, True, True))
def test_min_compaction_lag(tmp_path, delta, cleanable):
    """Kafka: LogCleanerManager.cleanableOffsets makes a dirty segment uncleanable when
    ``segment.largestTimestamp > now - minCompactionLagMs``: a segment exactly the lag
    old is cleanable."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, cleanup_policy="compact", min_compaction_lag_ms=LAG)
    log.append([(b"k", b"1", T0)], timestamp=T0)
    log.roll()
    log.append([(b"k", b"2", T0)], timestamp=T0)
    first, uncleanable, _ = cleanable_offsets(log, None, T0 + LAG + delta)
    assert (first, uncleanable) == (0, 1 if cleanable else 0)
    log.close()


@pytest.mark.parametrize("delta,delay", _cases(0, 0, 1))
def test_max_compaction_lag(tmp_path, delta, delay):
    """Kafka: LogCleanerManager.maxCompactionDelay is ``cleanUntilTime -
    earliestDirtySegmentTimestamp`` when ``earliestDirtySegmentTimestamp < cleanUntilTime``
    (``cleanUntilTime = now - maxCompactionLagMs``), else 0: compaction is due only past
    the lag."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, cleanup_policy="compact", max_compaction_lag_ms=LAG)
    log.append([(b"k", b"1", T0)], timestamp=T0)
    log.roll()
    log.append([(b"k", b"2", T0)], timestamp=T0)
    assert max_compaction_delay(log, 0, T0 + LAG + delta) == delay
    log.close()
