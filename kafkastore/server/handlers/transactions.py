"""The transactions APIs (issue 30): their handlers, over
:class:`~kafkastore.server.transaction_coordinator.TransactionCoordinator`.

InitProducerId with a transactional id (delegated here by :mod:`.produce`),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions:
each answers Kafka's error codes as ``KafkaApis`` does around the coordinator (an
older request version gets INVALID_PRODUCER_EPOCH where the newer ones get
PRODUCER_FENCED, which those clients do not know).
"""

from __future__ import annotations

from kafkastore.internal_topics import INTERNAL_TOPICS
from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.protocol.messages_txn import ADD_OFFSETS_TO_TXN, \
    ADD_PARTITIONS_TO_TXN, DESCRIBE_TRANSACTIONS, END_TXN, LIST_TRANSACTIONS
from kafkastore.server.transaction_coordinator import TransactionCoordinator, TxnError
from kafkastore.internal_topics.txn_records import TransactionState

__all__ = ["HANDLERS", "init_producer_id_transactional"]

#: The first version of each API that knows PRODUCER_FENCED (KIP-588); older ones are
#: told INVALID_PRODUCER_EPOCH (InitProducerIdResponse, AddPartitionsToTxnResponse,
#: AddOffsetsToTxnResponse, EndTxnResponse in Kafka's KafkaApis).
_FENCED_SINCE = {22: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


def _code(header, code: ErrorCode) -> int:
    if code == ErrorCode.PRODUCER_FENCED and \
            header.api_version < _FENCED_SINCE.get(header.api_key, 0):
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return int(code)


def _coordinator(broker: Broker) -> TransactionCoordinator:
    coordinator = broker.txn_coordinator
    if coordinator is None:
        raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return coordinator


async def init_producer_id_transactional(broker: Broker, header, request: dict) -> dict:
    """InitProducerId with a transactional id (Kafka's
    ``TransactionCoordinator.handleInitProducerId``)."""
    try:
        pid, epoch = _coordinator(broker).init_producer_id(
            request["transactional_id"], request.get("transaction_timeout_ms", 0),
            request.get("producer_id", -1), request.get("producer_epoch", -1))
    except TxnError as exc:
        return {"throttle_time_ms": 0, "error_code": _code(header, exc.code),
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid,
            "producer_epoch": epoch}


def _results(topics: dict[str, list[int]], codes: dict[tuple[str, int], int]) -> list:
    return [{"name": t, "results_by_partition": [
        {"partition_index": p, "partition_error_code": codes[(t, p)]} for p in ps]}
        for t, ps in topics.items()]


def _add_partitions(broker: Broker, header, txn_id: str, pid: int, epoch: int, topics: list,
                    verify_only: bool = False) -> list:
    """One transaction's AddPartitionsToTxn: its per-partition results."""
    wanted: dict[str, list[int]] = {}
    for t in topics:
        wanted.setdefault(t["name"], []).extend(t["partitions"])
    parts = {(t, p) for t, ps in wanted.items() for p in ps}
    # KafkaApis.handleAddPartitionsToTxnRequest: unknown partitions (and the internal
    # topics, which a producer may not write) fail, the others are not attempted
    bad = {(t, p) for t, p in parts if t in INTERNAL_TOPICS
           or p not in (broker.partitions(t) or ())}
    if bad:
        codes = {tp: int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in bad
                         else ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in parts}
        return _results(wanted, codes)
    try:
        coordinator = _coordinator(broker)
        if verify_only:
            missing = coordinator.verify_partitions(txn_id, pid, epoch, parts)
            codes = {tp: int(ErrorCode.INVALID_TXN_STATE if tp in missing else ErrorCode.NONE)
                     for tp in parts}
            return _results(wanted, codes)
        coordinator.add_partitions(txn_id, pid, epoch, parts)
        code = 0
    except TxnError as exc:
        code = _code(header, exc.code)
    return _results(wanted, {tp: code for tp in parts})


async def add_partitions_to_txn(broker: Broker, header, request: dict) -> dict:
    """AddPartitionsToTxn: v0-v3 one transaction (the clients'), v4+ a batch of them
    (brokers verifying, ``verify_only``)."""
    if header.api_version < 4:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _add_partitions(
            broker, header, request["v3_and_below_transactional_id"],
            request["v3_and_below_producer_id"], request["v3_and_below_producer_epoch"],
            request["v3_and_below_topics"])}
    results = [{"transactional_id": txn["transactional_id"], "topic_results": _add_partitions(
        broker, header, txn["transactional_id"], txn["producer_id"], txn["producer_epoch"],
        txn["topics"], txn.get("verify_only", False))} for txn in request["transactions"]]
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}


async def add_offsets_to_txn(broker: Broker, header, request: dict) -> dict:
    """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
    transaction (its TxnOffsetCommit follows, to the group coordinator)."""
    try:
        coordinator = _coordinator(broker)
        if broker.group_coordinator is not None:
            await broker.group_coordinator.ensure_offsets_topic()
        coordinator.add_partitions(request["transactional_id"], request["producer_id"],
                                   request["producer_epoch"],
                                   {coordinator.offsets_partition(request["group_id"])})
        code = 0
    except TxnError as exc:
        code = _code(header, exc.code)
    return {"throttle_time_ms": 0, "error_code": code}


async def end_txn(broker: Broker, header, request: dict) -> dict:
    """EndTxn: answered once the markers and the Complete state are written."""
    try:
        _coordinator(broker).end_transaction(request["transactional_id"],
                                             request["producer_id"], request["producer_epoch"],
                                             bool(request["committed"]))
        code = 0
    except TxnError as exc:
        code = _code(header, exc.code)
    return {"throttle_time_ms": 0, "error_code": code}


async def describe_transactions(broker: Broker, header, request: dict) -> dict:
    """DescribeTransactions (Kafka's ``TransactionCoordinator.handleDescribeTransactions``)."""
    coordinator = broker.txn_coordinator
    out = []
    for txn_id in request["transactional_ids"]:
        meta = coordinator.describe(txn_id) if coordinator is not None else None
        if meta is None or meta.state == TransactionState.DEAD:
            out.append({"error_code": int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if coordinator
                                          else ErrorCode.COORDINATOR_NOT_AVAILABLE),
                        "transactional_id": txn_id, "transaction_state": "",
                        "transaction_start_time_ms": -1, "producer_id": -1,
                        "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(meta.partitions):
            by_topic.setdefault(t, []).append(p)
        out.append({"error_code": 0, "transactional_id": txn_id,
                    "transaction_state": meta.state.state_name,
                    "transaction_timeout_ms": meta.txn_timeout_ms,
                    "transaction_start_time_ms": meta.txn_start_timestamp,
                    "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"throttle_time_ms": 0, "transaction_states": out}


async def list_transactions(broker: Broker, header, request: dict) -> dict:
    """ListTransactions with its state, producer id and (v1) duration filters
    (``TransactionStateManager.listTransactionStates``)."""
    coordinator = broker.txn_coordinator
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                "unknown_state_filters": [], "transaction_states": []}
    states, unknown = set(), []
    for name in request.get("state_filters", []):
        state = TransactionState.from_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    pids = set(request.get("producer_id_filters", []))
    duration = request.get("duration_filter", -1)
    now = coordinator.time_ms()
    out = []
    for txn_id, meta in sorted(coordinator.transactions.items()):
        if request.get("state_filters") and meta.state not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if duration >= 0 and (meta.state != TransactionState.ONGOING
                              or now - meta.txn_start_timestamp < duration):
            continue
        out.append({"transactional_id": txn_id, "producer_id": meta.producer_id,
                    "transaction_state": meta.state.state_name})
    return {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": unknown,
            "transaction_states": out}


HANDLERS: dict = {ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
                  ADD_OFFSETS_TO_TXN: add_offsets_to_txn, END_TXN: end_txn,
                  DESCRIBE_TRANSACTIONS: describe_transactions,
                  LIST_TRANSACTIONS: list_transactions}
