"""Kafka's transaction coordinator over ``__transaction_state``.

A port of the behaviour of Kafka's ``TransactionCoordinator`` (handleInitProducerId,
handleAddPartitionsToTransaction, handleEndTransaction, abortTimedOutTransactions),
``TransactionStateManager`` (the state as records of ``__transaction_state``, its loading,
removeExpiredTransactionalIds) and ``TransactionMetadata`` (the transitions) for a
single node: the coordinator is this node for every transactional id, and the markers go
straight into the local logs (``Log.append_end_txn_marker``) instead of through
WriteTxnMarkers requests, so an EndTxn is answered once its markers are written.

Every state change is written to ``__transaction_state`` (partition
``partition_for(transactional_id, transaction.state.log.num.partitions)``) before it
takes effect, as Kafka's ``appendTransactionToLog``: PrepareCommit / PrepareAbort before
the markers, CompleteCommit / CompleteAbort after them. On start the topic is read back:
a transaction found in PrepareCommit / PrepareAbort has its markers written again
(idempotent: a partition that has the marker already sees no open transaction of that
producer, as Kafka's brokers) and completes; an Ongoing one keeps running until it
times out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from kafkastore.errors import KafkaStoreError
from kafkastore.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, \
    partition_for
from kafkastore.internal_topics.txn_records import TransactionLogKey, TransactionLogValue, \
    TransactionState
from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.producer_ids import producer_id_manager

__all__ = ["TransactionCoordinator", "TransactionMetadata", "TxnError"]

_log = logging.getLogger("kafkastore.server")

#: Kafka's ``RecordBatch.NO_PRODUCER_EPOCH`` / ``NO_PRODUCER_ID``.
NO_PRODUCER_EPOCH = -1
NO_PRODUCER_ID = -1
#: Kafka's ``Short.MaxValue``: an epoch at ``MAX_EPOCH - 1`` is exhausted
#: (``TransactionMetadata.isEpochExhausted``).
MAX_EPOCH = 32767

S = TransactionState
_COMPLETE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


class TxnError(Exception):
    """A refusal answered with a Kafka error code (nothing was written)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass
class TransactionMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    #: the epoch before the last bump (Kafka's lastProducerEpoch): a retried
    #: InitProducerId with it gets the current one back
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def to_value(self) -> TransactionLogValue:
        """Kafka's ``TransactionLog.valueToBytes`` content: partitions grouped by topic,
        null in the Empty state."""
        parts = None
        if self.state != S.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted(self.partitions):
                by_topic.setdefault(t, []).append(p)
            parts = list(by_topic.items())
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms,
                                   int(self.state), parts, self.txn_last_update_timestamp,
                                   self.txn_start_timestamp)

    def is_epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionCoordinator:
    """The transactional ids of a single-node broker, their state in
    ``__transaction_state``.

    Thread-safety: on the server's event loop only (every method that changes state
    runs to completion without awaiting, so no two transitions of one id interleave)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.transactions: dict[str, TransactionMetadata] = {}
        self._timer: asyncio.Task | None = None
        self.time_ms = _now_ms

    # -- lifecycle ---------------------------------------------------------------------
    def _num_partitions(self) -> int:
        return int(self.broker.config["transaction.state.log.num.partitions"])  # type: ignore[arg-type]

    async def start(self) -> None:
        """Load the transactions' state from ``__transaction_state`` and complete what
        was in flight (called once the server is bound, before the first request)."""
        if self.broker.partitions(TRANSACTION_STATE_TOPIC) is not None:
            self._load()
            for meta in list(self.transactions.values()):
                if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    # TransactionStateManager.loadTransactionsForTxnTopicPartition: a
                    # transaction that had begun committing or aborting is completed
                    _log.info("kafkastore serve: completing the %s transaction of %r "
                              "found in %s", meta.state.state_name, meta.transactional_id,
                              TRANSACTION_STATE_TOPIC)
                    self._complete(meta, meta.state == S.PREPARE_COMMIT)
        self._timer = asyncio.get_running_loop().create_task(self._run_timers())

    def _load(self) -> None:
        """Read every partition of ``__transaction_state``: the last record of each id
        wins, a tombstone removes it (``TransactionStateManager.loadTransactionMetadata``)."""
        for p in self.broker.partitions(TRANSACTION_STATE_TOPIC) or []:
            log = self.broker.log(TRANSACTION_STATE_TOPIC, p)
            if log is None:
                continue
            offset = log.log_start_offset
            end = log.log_end_offset
            while offset < end:
                last = offset - 1
                for rec in log.read(offset, 1 << 20).records():
                    last = rec.offset
                    self._replay(rec.key, rec.value, p, rec.offset)
                if last < offset:
                    break   # nothing more readable (only control batches past here)
                offset = last + 1

    def _replay(self, key, value, partition: int, offset: int) -> None:
        if key is None:
            return
        try:
            txn_id = TransactionLogKey.from_bytes(bytes(key)).transactional_id
            if value is None:
                self.transactions.pop(txn_id, None)
                return
            v = TransactionLogValue.from_bytes(bytes(value))
            state = v.state
        except KafkaStoreError as exc:
            # Kafka skips a record of an unknown key version and fails the load on one
            # that does not decode; a coordinator that cannot start serves nothing, so
            # here the record is skipped, loudly
            _log.error("kafkastore serve: skipping the record at offset %d of %s-%d: %s",
                       offset, TRANSACTION_STATE_TOPIC, partition, exc)
            return
        parts = set()
        if state != S.EMPTY and v.transaction_partitions:
            parts = {(t, i) for t, ids in v.transaction_partitions for i in ids}
        self.transactions[txn_id] = TransactionMetadata(
            txn_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state, parts,
            v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms)

    async def ensure_state_topic(self) -> None:
        """Create ``__transaction_state`` if missing (Kafka creates it on the first
        FindCoordinator for a transactional id)."""
        self._ensure_state_topic()

    def _ensure_state_topic(self) -> None:
        if self.broker.partitions(TRANSACTION_STATE_TOPIC) is None:
            cfg = self.broker.config
            self.broker.create_topic(TRANSACTION_STATE_TOPIC, self._num_partitions(), configs={
                "cleanup.policy": "compact",
                "segment.bytes": cfg["transaction.state.log.segment.bytes"],
                # TransactionLog.ENFORCED_COMPRESSION: none
                "compression.type": "producer"})

    def close(self) -> None:
        """Stop the timers (the logs are closed by the server)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _run_timers(self) -> None:
        """Kafka's two scheduled tasks: abortTimedOutTransactions every
        ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and
        removeExpiredTransactionalIds every
        ``transaction.remove.expired.transaction.cleanup.interval.ms``."""
        cfg = self.broker.config
        abort_every = int(cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"])  # type: ignore[arg-type]
        expire_every = int(cfg["transaction.remove.expired.transaction.cleanup.interval.ms"])  # type: ignore[arg-type]
        next_abort = self.time_ms() + abort_every
        next_expire = self.time_ms() + expire_every
        while True:
            await asyncio.sleep(max(0.0, (min(next_abort, next_expire) - self.time_ms()) / 1000))
            now = self.time_ms()
            try:
                if now >= next_abort:
                    next_abort = now + abort_every
                    self.abort_timed_out_transactions(now)
                if now >= next_expire:
                    next_expire = now + expire_every
                    self.remove_expired_transactional_ids(now)
            except Exception:   # a timer must outlive one failure (logged, retried)
                _log.exception("kafkastore serve: transaction coordinator timer failed")

    # -- the log -----------------------------------------------------------------------
    def _write(self, meta: TransactionMetadata, tombstone: bool = False) -> None:
        """Append ``meta`` (or a tombstone) to its ``__transaction_state`` partition
        (``TransactionStateManager.appendTransactionToLog``); returns once appended.
        Raises TxnError(COORDINATOR_NOT_AVAILABLE) when the log refuses it."""
        p = partition_for(meta.transactional_id, self._num_partitions())
        log = self.broker.log(TRANSACTION_STATE_TOPIC, p)
        if log is None:
            # (the topic is looked for only then: finding it lists every log)
            self._ensure_state_topic()
            log = self.broker.log(TRANSACTION_STATE_TOPIC, p)
        if log is None:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        key = TransactionLogKey(meta.transactional_id).to_bytes()
        value = None if tombstone else meta.to_value().to_bytes()
        try:
            log.append([(key, value)])
        except (OSError, KafkaStoreError) as exc:
            # Kafka maps a failed append to COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR so
            # that the client retries (TransactionStateManager.appendTransactionToLog)
            _log.error("kafkastore serve: cannot write the state of %r: %s",
                       meta.transactional_id, exc)
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None
        self.broker.notify_append(TRANSACTION_STATE_TOPIC, p)

    def _transit(self, meta: TransactionMetadata, **changes) -> TransactionMetadata:
        """Write the next state of ``meta`` first, then take it (Kafka's
        prepareTransitionTo + appendTransactionToLog + completeTransitionTo)."""
        new = TransactionMetadata(**{**meta.__dict__, **changes})
        new.partitions = set(changes.get("partitions", meta.partitions))
        new.txn_last_update_timestamp = self.time_ms()
        self._write(new)
        self.transactions[meta.transactional_id] = new
        return new

    # -- InitProducerId ----------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                         producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int]:
        """Kafka's ``TransactionCoordinator.handleInitProducerId`` for a transactional id:
        (producer id, epoch), or TxnError."""
        if transactional_id == "":
            raise TxnError(ErrorCode.INVALID_REQUEST)
        max_timeout = int(self.broker.config["transaction.max.timeout.ms"])  # type: ignore[arg-type]
        if txn_timeout_ms <= 0 or txn_timeout_ms > max_timeout:
            raise TxnError(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self._new_producer_id(),
                                       NO_PRODUCER_EPOCH, txn_timeout_ms, S.EMPTY)
        elif producer_id != NO_PRODUCER_ID and not (
                producer_id == meta.producer_id
                and producer_epoch in (meta.producer_epoch, meta.last_producer_epoch)):
            # KIP-360: the id and epoch the producer sent must be the current ones (or
            # the ones before the last bump, for a retry)
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == S.ONGOING:
            # an ongoing transaction of the old epoch is fenced (epoch bump) and aborted
            # first; the producer is told CONCURRENT_TRANSACTIONS and retries
            # (TransactionCoordinator.handleInitProducerId, Ongoing case)
            self._abort_fenced(meta)
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == S.DEAD:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if (producer_id != NO_PRODUCER_ID and producer_epoch == meta.last_producer_epoch
                and meta.producer_epoch != NO_PRODUCER_EPOCH
                and meta.last_producer_epoch != NO_PRODUCER_EPOCH):
            # a retry of the InitProducerId that bumped to the current epoch
            return meta.producer_id, meta.producer_epoch
        if meta.is_epoch_exhausted():
            # TransactionMetadata.prepareProducerIdRotation: a new producer id, epoch 0
            new_id, new_epoch, last = self._new_producer_id(), 0, NO_PRODUCER_EPOCH
        else:
            new_id, new_epoch, last = meta.producer_id, meta.producer_epoch + 1, \
                meta.producer_epoch
        new = self._transit(meta, producer_id=new_id, producer_epoch=new_epoch,
                            last_producer_epoch=last, txn_timeout_ms=txn_timeout_ms,
                            state=S.EMPTY, partitions=set(), txn_start_timestamp=-1)
        return new.producer_id, new.producer_epoch

    def _new_producer_id(self) -> int:
        try:
            return producer_id_manager(self.broker).generate()
        except (OSError, KafkaStoreError) as exc:
            _log.error("kafkastore serve: cannot record a producer id block: %s", exc)
            raise TxnError(ErrorCode.KAFKA_STORAGE_ERROR) from None

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> TransactionMetadata:
        if transactional_id == "":
            raise TxnError(ErrorCode.INVALID_REQUEST)
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        return meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[tuple[str, int]]) -> None:
        """Kafka's ``handleAddPartitionsToTransaction``: the transaction is Ongoing with
        ``partitions`` in it once this returns."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta.state == S.ONGOING and partitions <= meta.partitions:
            return
        if meta.state == S.DEAD:
            raise TxnError(ErrorCode.INVALID_TXN_STATE)
        start = meta.txn_start_timestamp if meta.state == S.ONGOING else self.time_ms()
        self._transit(meta, state=S.ONGOING, partitions=meta.partitions | partitions,
                      txn_start_timestamp=start)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """AddPartitionsToTxn v4's verify_only: the partitions not in the transaction."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta.state != S.ONGOING:
            return set(partitions)
        return partitions - meta.partitions

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        """The ``__consumer_offsets`` partition of ``group_id`` (AddOffsetsToTxn adds it)."""
        n = int(self.broker.config["offsets.topic.num.partitions"])  # type: ignore[arg-type]
        return GROUP_METADATA_TOPIC, partition_for(group_id, n)

    # -- EndTxn ------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        committed: bool) -> None:
        """Kafka's ``handleEndTransaction`` from a client: PrepareCommit / PrepareAbort
        written, the markers written to every partition, CompleteCommit / CompleteAbort
        written. A retry of a completed EndTxn with the same result succeeds."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        state = meta.state
        if state == S.ONGOING:
            prepare = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            meta = self._transit(meta, state=prepare)
            self._complete(meta, committed)
        elif state == S.COMPLETE_COMMIT and committed or state == S.COMPLETE_ABORT \
                and not committed:
            return
        else:
            # Empty, Dead, or the other outcome of a completed transaction
            raise TxnError(ErrorCode.INVALID_TXN_STATE)

    def _complete(self, meta: TransactionMetadata, committed: bool) -> TransactionMetadata:
        """Write the markers (``TransactionMarkerChannelManager``'s job) and the
        Complete state."""
        self._write_markers(meta, committed)
        return self._transit(meta, state=S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT,
                             partitions=set())

    def _write_markers(self, meta: TransactionMetadata, committed: bool) -> None:
        control = "COMMIT" if committed else "ABORT"
        group = self.broker.group_coordinator
        for topic, partition in sorted(meta.partitions):
            log = self.broker.log(topic, partition)
            if log is None:
                # a deleted partition: Kafka drops its marker (UNKNOWN_TOPIC_OR_PARTITION
                # from a partition that is gone)
                continue
            try:
                log.append_end_txn_marker(meta.producer_id, meta.producer_epoch, control,
                                          coordinator_epoch=0)
            except KafkaStoreError as exc:
                # INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: Kafka's
                # TransactionMarkerRequestCompletionHandler gives up on that partition
                _log.error("kafkastore serve: the %s marker of producer %d to %s-%d was "
                           "refused: %s", control, meta.producer_id, topic, partition, exc)
                continue
            self.broker.notify_append(topic, partition)
            if topic == GROUP_METADATA_TOPIC and group is not None:
                group.on_txn_marker(topic, partition, meta.producer_id, meta.producer_epoch,
                                    committed)

    def _abort_fenced(self, meta: TransactionMetadata) -> TransactionMetadata:
        """Fence the producer of an Ongoing transaction (epoch bump, unless exhausted)
        and abort it with the new epoch (``prepareFenceProducerEpoch`` then
        ``endTransaction(ABORT, isFromClient = false)``)."""
        epoch = meta.producer_epoch if meta.is_epoch_exhausted() else meta.producer_epoch + 1
        meta = self._transit(meta, producer_epoch=epoch, last_producer_epoch=meta.producer_epoch,
                             state=S.PREPARE_ABORT)
        return self._complete(meta, False)

    # -- timers ------------------------------------------------------------------------
    def abort_timed_out_transactions(self, now: int | None = None) -> list[str]:
        """Kafka's ``abortTimedOutTransactions``: every Ongoing transaction older than
        its timeout is fenced and aborted (and a PrepareCommit / PrepareAbort left by a
        failed write is completed). Returns the ids aborted."""
        now = self.time_ms() if now is None else now
        done = []
        for meta in list(self.transactions.values()):
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                # an EndTxn whose Complete record could not be written (the log refused
                # it; the client was told COORDINATOR_NOT_AVAILABLE): completed again
                # here, as Kafka's TransactionMarkerChannelManager retries until done
                try:
                    self._complete(meta, meta.state == S.PREPARE_COMMIT)
                except TxnError as exc:
                    _log.error("kafkastore serve: could not complete %r: %s",
                               meta.transactional_id, exc)
                continue
            if meta.state == S.ONGOING and meta.txn_start_timestamp + meta.txn_timeout_ms < now:
                _log.info("kafkastore serve: aborting the transaction of %r (producer %d "
                          "epoch %d): it timed out", meta.transactional_id, meta.producer_id,
                          meta.producer_epoch)
                try:
                    self._abort_fenced(meta)
                except TxnError as exc:
                    _log.error("kafkastore serve: could not abort %r: %s",
                               meta.transactional_id, exc)
                    continue
                done.append(meta.transactional_id)
        return done

    def remove_expired_transactional_ids(self, now: int | None = None) -> list[str]:
        """Kafka's ``removeExpiredTransactionalIds``: an id with no transaction in flight
        and no update for ``transactional.id.expiration.ms`` is removed (a tombstone)."""
        now = self.time_ms() if now is None else now
        expiration = int(self.broker.config["transactional.id.expiration.ms"])  # type: ignore[arg-type]
        gone = []
        for meta in list(self.transactions.values()):
            if meta.state in _COMPLETE and meta.txn_last_update_timestamp + expiration <= now:
                try:
                    self._write(meta, tombstone=True)
                except TxnError:
                    continue
                self.transactions.pop(meta.transactional_id, None)
                gone.append(meta.transactional_id)
        return gone

    # -- Describe / List ---------------------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)
