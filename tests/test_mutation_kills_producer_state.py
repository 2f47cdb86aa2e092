"""Tests that kill the surviving mutants of ``kafkastore/producer_state.py``'s deciding
functions (``make mutate MODULE=producer_state``), each pinning the behaviour of Kafka's
``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``."""

from __future__ import annotations

import logging

import pytest

from kafkastore.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kafkastore.producer_state import (
    AppendOrigin,
    ProducerBatch,
    ProducerStateManager,
)
from kafkastore.records import ControlRecordType

PID = 7
EPOCH = 2
EXPIRATION = 60_000
NOW = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def psm(tmp_path, clock):
    return ProducerStateManager(str(tmp_path), EXPIRATION, clock)


def data_batch(first_seq: int, last_seq: int, offset: int, *, epoch: int = EPOCH,
               transactional: bool = False, timestamp: int = NOW) -> ProducerBatch:
    """A data batch of ``last_seq - first_seq + 1`` records from ``offset``."""
    return ProducerBatch(PID, epoch, first_seq, offset, offset + last_seq - first_seq,
                         timestamp, transactional, False, None)


def apply(psm, batch: ProducerBatch, origin: str = AppendOrigin.CLIENT):
    info = psm.prepare_update(batch.producer_id, origin)
    completed = info.append(batch)
    psm.update(info)
    if completed is not None:
        psm.complete_txn(completed)
    psm.update_map_end_offset(batch.last_offset + 1)
    return completed


def test_a_retry_must_match_both_ends_of_the_sequence_range(psm):
    """Kafka: ``ProducerStateEntry.findDuplicateBatch`` → ``batchWithSequenceRange``, which
    asks for ``firstSeq == batch.firstSeq() && lastSeq == batch.lastSeq()``: a batch that
    shares only its first (or only its last) sequence with a cached batch is no retry."""
    apply(psm, data_batch(0, 4, 0))
    assert psm.duplicate_of(data_batch(0, 4, 5)) is not None   # the retry itself
    assert psm.duplicate_of(data_batch(0, 2, 5)) is None       # same first sequence only
    assert psm.duplicate_of(data_batch(2, 4, 5)) is None       # same last sequence only


def test_a_fenced_marker_names_its_own_offset(psm):
    """Kafka: ``ProducerAppendInfo.appendEndTxnMarker`` → ``checkProducerEpoch(producerEpoch,
    offset, ...)``: the InvalidProducerEpochException names the marker's offset."""
    apply(psm, data_batch(0, 0, 99, transactional=True))
    info = psm.prepare_update(PID, AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidProducerEpochError) as err:
        info.append_end_txn_marker(ControlRecordType.COMMIT, 0, EPOCH - 1, 100, NOW)
    assert err.value.offset == 100
    assert f"Epoch of producer {PID} at offset 100 " in str(err.value)


def test_a_replicated_zombie_marker_is_logged_with_both_coordinator_epochs(psm, caplog):
    """Kafka: ``ProducerAppendInfo.checkCoordinatorEpoch``: a REPLICATION append of a marker
    whose coordinator epoch is older than the known one is accepted and logged at INFO
    ("Detected invalid coordinator epoch for producerId {} at offset {} in partition {}: {}
    is older than previously known coordinator epoch {}")."""
    apply(psm, data_batch(0, 0, 0, transactional=True))
    marker = ProducerBatch(PID, EPOCH, -1, 1, 1, NOW, True, True,
                           (ControlRecordType.COMMIT, 5, NOW))
    apply(psm, marker, AppendOrigin.COORDINATOR)
    apply(psm, data_batch(1, 1, 2, transactional=True))
    zombie = ProducerBatch(PID, EPOCH, -1, 3, 3, NOW, True, True,
                           (ControlRecordType.ABORT, 4, NOW))
    with caplog.at_level(logging.INFO, logger="kafkastore.producer_state"):
        completed = apply(psm, zombie, AppendOrigin.REPLICATION)
    assert completed is not None and completed.is_aborted   # recorded all the same
    records = [r for r in caplog.records if r.name == "kafkastore.producer_state"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO,
         f"Detected invalid coordinator epoch for producerId {PID} at offset 3 in partition "
         f"{psm.dir}: 4 is older than previously known coordinator epoch 5")]


def test_remove_expired_producers_defaults_to_the_managers_clock(psm, clock):
    """Kafka: ``ProducerStateManager.removeExpiredProducers(currentTimeMs)`` with the log's
    time (``UnifiedLog``'s producer-expiration task passes ``time.milliseconds()``); here
    the manager's clock stands in when no time is given. A producer idle for exactly
    ``producer.id.expiration.ms`` is gone (``isProducerExpired``: ``>=``)."""
    apply(psm, data_batch(0, 0, 0, timestamp=NOW))
    clock.now = NOW + EXPIRATION - 1
    assert psm.remove_expired_producers() == 0 and psm.last_entry(PID) is not None
    clock.now = NOW + EXPIRATION
    assert psm.remove_expired_producers() == 1 and psm.last_entry(PID) is None


def test_a_new_epoch_not_at_sequence_zero_names_producer_offset_and_partition(psm):
    """Kafka: ``ProducerAppendInfo.checkSequence``: a new epoch must start at sequence 0;
    the OutOfOrderSequenceException names the producer, the batch's offset and the
    partition (here: the error's ``producer_id``, ``offset`` and ``path``)."""
    apply(psm, data_batch(0, 0, 0))
    with pytest.raises(OutOfOrderSequenceError) as err:
        apply(psm, data_batch(3, 3, 1, epoch=EPOCH + 1))
    assert (err.value.producer_id, err.value.offset, err.value.path) == (PID, 1, psm.dir)


def test_batches_of_one_append_info_follow_each_other(psm):
    """Kafka: ``ProducerAppendInfo.checkSequence`` checks a batch against the batches this
    append already added (``updatedEntry.lastSeq()`` once ``updatedEntry`` is not empty),
    then against the producer's entry before it."""
    apply(psm, data_batch(0, 0, 0))
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    info.append(data_batch(1, 2, 1))
    info.append(data_batch(3, 3, 3))
    with pytest.raises(OutOfOrderSequenceError):
        info.append(data_batch(5, 5, 4))   # 4 is missing
    with pytest.raises(OutOfOrderSequenceError):
        info.append(data_batch(1, 1, 4))   # follows the entry, not this append


def test_the_produces_of_one_request_see_the_ones_before_them(psm):
    """Kafka: ``UnifiedLog.analyzeAndValidateProducerState`` keeps one
    ``ProducerAppendInfo`` per producer for the whole request (``updatedProducers``), so a
    batch is checked against the request's earlier batches of its producer: sequences 1
    then 2 are in order, and sequence 1 twice is out of order."""
    apply(psm, data_batch(0, 0, 0))
    shadow: dict = {}
    psm.analyze([data_batch(1, 1, 1)], AppendOrigin.CLIENT, shadow)
    psm.analyze([data_batch(2, 2, 2)], AppendOrigin.CLIENT, shadow)
    with pytest.raises(OutOfOrderSequenceError):
        psm.analyze([data_batch(1, 1, 3)], AppendOrigin.CLIENT, shadow)
    assert len(psm.analyze([data_batch(1, 1, 1), data_batch(2, 2, 2)],
                           AppendOrigin.CLIENT)) == 2
    with pytest.raises(OutOfOrderSequenceError):
        psm.analyze([data_batch(1, 1, 1), data_batch(1, 1, 2)], AppendOrigin.CLIENT)
