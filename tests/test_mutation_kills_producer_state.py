"""Tests that kill the surviving mutants of ``kafkastore/producer_state.py``'s deciding
functions (``make mutate MODULE=producer_state``), each pinning the behaviour of Kafka's
``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``."""

from __future__ import annotations

import logging

import pytest
from _logtools import T0, Clock

from kafkastore.errors import (
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
    read_snapshot,
)
from kafkastore.records import ControlRecordType

PID = 7
EPOCH = 2
EXPIRATION = 60_000
NOW = T0


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


def assert_refusal(err, psm, offset: int, message: str) -> None:
    """A refusal carries Kafka's message and names the producer, the offset the batch
    would have had and the partition (kafkastore's error fields)."""
    assert err.message == message
    assert (err.producer_id, err.offset, err.path) == (PID, offset, psm.dir)


def marker(ctype, offset: int, coordinator_epoch: int, epoch: int = EPOCH) -> ProducerBatch:
    return ProducerBatch(PID, epoch, -1, offset, offset, NOW, True, True,
                         (ctype, coordinator_epoch, NOW))


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
    apply(psm, marker(ControlRecordType.COMMIT, 1, 5), AppendOrigin.COORDINATOR)
    apply(psm, data_batch(1, 1, 2, transactional=True))
    with caplog.at_level(logging.INFO, logger="kafkastore.producer_state"):
        completed = apply(psm, marker(ControlRecordType.ABORT, 3, 4), AppendOrigin.REPLICATION)
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
    assert_refusal(err.value, psm, 1,
                   f"Invalid sequence number for new epoch of producer {PID} at offset 1 in "
                   f"partition {psm.dir}: {EPOCH + 1} (request epoch), 3 (seq. number), "
                   f"{EPOCH} (current producer epoch)")


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


def test_an_out_of_order_sequence_names_both_sequences(psm):
    """Kafka: ``ProducerAppendInfo.checkSequence``: "Out of order sequence number for
    producer {} at offset {} in partition {}: {} (incoming seq. number), {} (current end
    sequence number)"."""
    apply(psm, data_batch(0, 0, 0))
    with pytest.raises(OutOfOrderSequenceError) as err:
        apply(psm, data_batch(5, 5, 1))
    assert_refusal(err.value, psm, 1,
                   f"Out of order sequence number for producer {PID} at offset 1 in partition "
                   f"{psm.dir}: 5 (incoming seq. number), 0 (current end sequence number)")


def test_after_an_epoch_bump_in_the_same_append_the_sequence_restarts_at_zero(psm):
    """Kafka: ``ProducerAppendInfo.checkSequence``: when this append's entry is empty and
    the epoch is not the producer's stored one (a marker of this append bumped it), the
    current end sequence is ``NO_SEQUENCE``: sequence 0 follows, any other is out of
    order."""
    apply(psm, data_batch(0, 3, 0))
    for first_seq, ok in ((0, True), (4, False)):
        info = psm.prepare_update(PID, AppendOrigin.CLIENT)
        info.append_end_txn_marker(ControlRecordType.ABORT, 0, EPOCH + 1, 4, NOW)
        if ok:
            info.append(data_batch(0, 0, 5, epoch=EPOCH + 1))
            assert info.updated.last_seq == 0
        else:
            with pytest.raises(OutOfOrderSequenceError, match=r"4 \(incoming seq. number\), "
                               r"-1 \(current end sequence number\)"):
                info.append(data_batch(first_seq, first_seq, 5, epoch=EPOCH + 1))


def test_a_marker_records_its_coordinator_epoch_zero(psm):
    """Kafka: ``ProducerAppendInfo.appendEndTxnMarker`` stores the marker's coordinator
    epoch (``updatedEntry.setCoordinatorEpoch``), 0 included: a later marker of coordinator
    epoch 0 is not fenced."""
    apply(psm, data_batch(0, 0, 0, transactional=True))
    apply(psm, marker(ControlRecordType.COMMIT, 1, 0), AppendOrigin.COORDINATOR)
    assert psm.last_entry(PID).coordinator_epoch == 0
    apply(psm, data_batch(1, 1, 2, transactional=True))
    completed = apply(psm, marker(ControlRecordType.COMMIT, 3, 0), AppendOrigin.COORDINATOR)
    assert completed is not None and (completed.first_offset, completed.last_offset) == (2, 3)


def test_a_plain_write_inside_a_transaction_names_producer_and_offset(psm):
    """Kafka: ``ProducerAppendInfo.appendDataBatch``: InvalidTxnStateException "Expected
    transactional write from producer {} at offset {} in partition {}"."""
    apply(psm, data_batch(0, 0, 0, transactional=True))
    with pytest.raises(InvalidTxnStateError) as err:
        apply(psm, data_batch(1, 1, 1))
    assert_refusal(err.value, psm, 1, f"Expected transactional write from producer {PID} at "
                                      f"offset 1 in partition {psm.dir}")


def test_maybe_update_producer_epoch_says_whether_the_epoch_changed():
    """Kafka: ``ProducerStateEntry.maybeUpdateProducerEpoch`` returns true (and drops the
    cached batches) only when the epoch differs."""
    entry = ProducerStateEntry(PID, EPOCH)
    entry.add_batch(EPOCH, 0, 0, 0, NOW)
    assert entry.maybe_update_producer_epoch(EPOCH) is False and not entry.is_empty
    assert entry.maybe_update_producer_epoch(EPOCH + 1) is True and entry.is_empty


def test_a_fenced_producer_epoch_is_refused_or_on_replication_logged(psm, caplog):
    """Kafka: ``ProducerAppendInfo.checkProducerEpoch``: an epoch below the last seen one
    is an InvalidProducerEpochException ("Epoch of producer {} at offset {} in {} is {},
    which is smaller than the last seen epoch {}" in the versions before the TV2 wording),
    and on REPLICATION the same message is a warning and the batch is taken."""
    apply(psm, data_batch(0, 0, 0))
    message = (f"Epoch of producer {PID} at offset 1 in {psm.dir} is {EPOCH - 1}, which is "
               f"smaller than the last seen epoch {EPOCH}")
    with pytest.raises(InvalidProducerEpochError) as err:
        apply(psm, data_batch(0, 0, 1, epoch=EPOCH - 1))
    assert_refusal(err.value, psm, 1, message)
    with caplog.at_level(logging.WARNING, logger="kafkastore.producer_state"):
        apply(psm, data_batch(0, 0, 1, epoch=EPOCH - 1), AppendOrigin.REPLICATION)
    assert [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == "kafkastore.producer_state"] == [(logging.WARNING, message)]


def test_a_zombie_coordinators_marker_is_refused_with_both_epochs(psm):
    """Kafka: ``ProducerAppendInfo.checkCoordinatorEpoch``: TransactionCoordinatorFenced
    "Invalid coordinator epoch for producerId {} at offset {} in partition {}: {} (zombie),
    {} (current)"."""
    apply(psm, data_batch(0, 0, 0, transactional=True))
    apply(psm, marker(ControlRecordType.COMMIT, 1, 5), AppendOrigin.COORDINATOR)
    apply(psm, data_batch(1, 1, 2, transactional=True))
    with pytest.raises(TransactionCoordinatorFencedError) as err:
        apply(psm, marker(ControlRecordType.ABORT, 3, 4), AppendOrigin.COORDINATOR)
    assert_refusal(err.value, psm, 3,
                   f"Invalid coordinator epoch for producerId {PID} at offset 3 in partition "
                   f"{psm.dir}: 4 (zombie), 5 (current)")


@pytest.mark.parametrize("pids, order", [
    # 12 keys fill a 16-bucket table to its threshold (12): no resize, pid 16 in bucket 0
    ([*range(1, 12), 16], [16, *range(1, 12)]),
    # the 13th key passes it: 32 buckets, pid 16 in bucket 16, pid 17 in bucket 17
    ([*range(1, 12), 16, 17], [*range(1, 12), 16, 17]),
])
def test_the_snapshot_order_resizes_only_past_three_quarters(psm, pids, order):
    """Kafka's producers map is a ``java.util.HashMap``: ``putVal`` resizes when ``++size >
    threshold`` (0.75 of the table), so 12 producers still iterate in a 16-bucket table and
    the 13th doubles it; the snapshot (``ProducerStateManager.writeSnapshot``) writes the
    entries in that iteration order. (A small key's bucket is the key itself modulo the
    table size.)"""
    for offset, pid in enumerate(pids):
        info = psm.prepare_update(pid, AppendOrigin.CLIENT)
        info.append(ProducerBatch(pid, 0, 0, offset, offset, NOW, False, False, None))
        psm.update(info)
        psm.update_map_end_offset(offset + 1)
    assert [e.producer_id for e in read_snapshot(psm.take_snapshot())] == order
