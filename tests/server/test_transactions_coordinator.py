"""The transaction coordinator over the wire (raw requests): InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions, fencing, timeouts, expiration and recovery, checked against what
Kafka's TransactionCoordinator answers and writes."""

from __future__ import annotations

import time

import pytest
from _wire import connect, request

from kafkastore.internal_topics import TRANSACTION_STATE_TOPIC, partition_for
from kafkastore.internal_topics.txn_records import TransactionLogKey, TransactionLogValue, \
    TransactionState
from kafkastore.log import Log
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.transaction_coordinator import TxnError

INIT, ADD_PARTS, ADD_OFFSETS, END, DESCRIBE, LIST = 22, 24, 25, 26, 65, 66
FENCED, INVALID_EPOCH, INVALID_TXN_STATE, CONCURRENT = 90, 47, 48, 51
INVALID_MAPPING, NOT_FOUND, UNKNOWN_TP, NOT_ATTEMPTED = 49, 105, 3, 55
SMALL = {"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
         "num.partitions": 2}


def init(sock, txn_id, timeout_ms=60000, pid=-1, epoch=-1, version=4):
    return request(sock, INIT, version, {"transactional_id": txn_id,
                                         "transaction_timeout_ms": timeout_ms,
                                         "producer_id": pid, "producer_epoch": epoch})


def add(sock, txn_id, pid, epoch, topic="t", partitions=(0,), version=3):
    r = request(sock, ADD_PARTS, version, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}]})
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


def end(sock, txn_id, pid, epoch, committed, version=3):
    return request(sock, END, version, {"transactional_id": txn_id, "producer_id": pid,
                                        "producer_epoch": epoch, "committed": committed})


def state_records(log_dir, txn_id, n=3):
    """(state, epoch) of every record of ``txn_id`` in __transaction_state, in order."""
    p = partition_for(txn_id, n)
    out = []
    with Log.open(str(log_dir / f"{TRANSACTION_STATE_TOPIC}-{p}")) as log:
        for rec in log.read(0, 1 << 24).records():
            if TransactionLogKey.from_bytes(rec.key).transactional_id != txn_id:
                continue
            if rec.value is None:
                out.append(("tombstone", None))
            else:
                v = TransactionLogValue.from_bytes(rec.value)
                out.append((v.state, v.producer_epoch))
    return out


def control_markers(log_dir, topic, partition):
    with Log.open(str(log_dir / f"{topic}-{partition}")) as log:
        return [(b.producer_id, b.producer_epoch)
                for b in log.read(0, 1 << 24).batches() if b.is_control]


@pytest.fixture
def server(make_server):
    s = make_server(SMALL)
    with connect(s) as sock:
        request(sock, 19, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                          "replication_factor": 1}], "timeout_ms": 1000})
    return s


def test_init_commit_writes_prepare_before_markers_then_complete(server, tmp_path):
    with connect(server) as sock:
        r = init(sock, "tx")
        assert r["error_code"] == 0 and r["producer_epoch"] == 0
        pid = r["producer_id"]
        assert add(sock, "tx", pid, 0, partitions=(0, 1)) == {("t", 0): 0, ("t", 1): 0}
        d = request(sock, DESCRIBE, 0, {"transactional_ids": ["tx", "nope"]})
        tx, nope = d["transaction_states"]
        assert (tx["transaction_state"], tx["topics"]) == (
            "Ongoing", [{"topic": "t", "partitions": [0, 1]}])
        assert nope["error_code"] == NOT_FOUND
        assert end(sock, "tx", pid, 0, True)["error_code"] == 0
        # a retried EndTxn of the same outcome succeeds, the other is INVALID_TXN_STATE
        assert end(sock, "tx", pid, 0, True)["error_code"] == 0
        assert end(sock, "tx", pid, 0, False)["error_code"] == INVALID_TXN_STATE
        lst = request(sock, LIST, 1, {"state_filters": ["CompleteCommit", "Bogus"],
                                      "producer_id_filters": []})
        assert lst["unknown_state_filters"] == ["Bogus"]
        assert [t["transactional_id"] for t in lst["transaction_states"]] == ["tx"]
    server.stop()
    log_dir = tmp_path / "logs0"
    assert state_records(log_dir, "tx") == [
        (TransactionState.EMPTY, 0), (TransactionState.ONGOING, 0),
        (TransactionState.PREPARE_COMMIT, 0), (TransactionState.COMPLETE_COMMIT, 0)]
    assert control_markers(log_dir, "t", 0) == [(pid, 0)]
    assert control_markers(log_dir, "t", 1) == [(pid, 0)]


def test_end_txn_without_transaction_is_invalid_txn_state_nothing_written(server, tmp_path):
    with connect(server) as sock:
        r = init(sock, "tx")
        pid = r["producer_id"]
        assert end(sock, "tx", pid, 0, True)["error_code"] == INVALID_TXN_STATE
        assert end(sock, "tx", pid + 1, 0, True)["error_code"] == INVALID_MAPPING
        assert end(sock, "unknown", pid, 0, False)["error_code"] == INVALID_MAPPING
    server.stop()
    assert state_records(tmp_path / "logs0", "tx") == [(TransactionState.EMPTY, 0)]
    assert control_markers(tmp_path / "logs0", "t", 0) == []


def test_reinit_bumps_epoch_and_fences_the_old_producer(server):
    with connect(server) as sock:
        pid = init(sock, "tx")["producer_id"]
        assert add(sock, "tx", pid, 0) == {("t", 0): 0}
        # a second producer with the same id while a transaction is ongoing: Kafka aborts
        # it (fencing epoch bump) and answers CONCURRENT_TRANSACTIONS until done
        assert init(sock, "tx")["error_code"] == CONCURRENT
        r = init(sock, "tx")
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, pid, 2)
        # the zombie at epoch 0: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for old versions
        assert end(sock, "tx", pid, 0, True)["error_code"] == FENCED
        assert end(sock, "tx", pid, 0, True, version=1)["error_code"] == INVALID_EPOCH
        assert add(sock, "tx", pid, 0, version=1) == {("t", 0): INVALID_EPOCH}
        # KIP-360: a producer with a stale id/epoch asking to re-init is fenced
        assert init(sock, "tx", pid=pid, epoch=0)["error_code"] == FENCED
        # ... with the current ones it gets a bump
        assert init(sock, "tx", pid=pid, epoch=2)["producer_epoch"] == 3


def test_epoch_exhaustion_rotates_the_producer_id(server):
    with connect(server) as sock:
        pid = init(sock, "tx")["producer_id"]
    meta = server.broker.txn_coordinator.transactions["tx"]
    meta.producer_epoch = 32766   # Short.MaxValue - 1: exhausted
    with connect(server) as sock:
        r = init(sock, "tx")
        assert r["error_code"] == 0 and r["producer_id"] != pid and r["producer_epoch"] == 0


def test_unknown_partition_fails_and_the_others_are_not_attempted(server):
    with connect(server) as sock:
        pid = init(sock, "tx")["producer_id"]
        r = add(sock, "tx", pid, 0, partitions=(0, 7))
        assert r == {("t", 0): NOT_ATTEMPTED, ("t", 7): UNKNOWN_TP}
        d = request(sock, DESCRIBE, 0, {"transactional_ids": ["tx"]})
        assert d["transaction_states"][0]["transaction_state"] == "Empty"


def test_add_offsets_adds_the_groups_offsets_partition(server):
    with connect(server) as sock:
        pid = init(sock, "tx")["producer_id"]
        r = request(sock, ADD_OFFSETS, 3, {"transactional_id": "tx", "producer_id": pid,
                                           "producer_epoch": 0, "group_id": "g"})
        assert r["error_code"] == 0
        d = request(sock, DESCRIBE, 0, {"transactional_ids": ["tx"]})
        assert d["transaction_states"][0]["topics"] == [
            {"topic": "__consumer_offsets", "partitions": [partition_for("g", 3)]}]


def test_batched_add_partitions_v4_and_verify_only(server):
    with connect(server) as sock:
        pid = init(sock, "tx")["producer_id"]
        body = {"transactions": [{"transactional_id": "tx", "producer_id": pid,
                                  "producer_epoch": 0, "verify_only": True,
                                  "topics": [{"name": "t", "partitions": [1]}]}]}
        r = request(sock, ADD_PARTS, 4, body)
        res = r["results_by_transaction"][0]["topic_results"][0]["results_by_partition"]
        assert res == [{"partition_index": 1, "partition_error_code": INVALID_TXN_STATE}]
        body["transactions"][0]["verify_only"] = False
        r = request(sock, ADD_PARTS, 4, body)
        res = r["results_by_transaction"][0]["topic_results"][0]["results_by_partition"]
        assert res == [{"partition_index": 1, "partition_error_code": 0}]


def test_timed_out_transaction_is_aborted_with_an_epoch_bump(make_server, tmp_path):
    s = make_server({**SMALL, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 50})
    with connect(s) as sock:
        request(sock, 19, 4, {"topics": [{"name": "t", "num_partitions": 1,
                                          "replication_factor": 1}], "timeout_ms": 1000})
        pid = init(sock, "tx", timeout_ms=100)["producer_id"]
        assert add(sock, "tx", pid, 0) == {("t", 0): 0}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            d = request(sock, DESCRIBE, 0, {"transactional_ids": ["tx"]})["transaction_states"][0]
            if d["transaction_state"] == "CompleteAbort":
                break
            time.sleep(0.05)
        assert (d["transaction_state"], d["producer_epoch"]) == ("CompleteAbort", 1)
        assert end(sock, "tx", pid, 0, True)["error_code"] == FENCED
    s.stop()
    assert control_markers(tmp_path / "logs0", "t", 0) == [(pid, 1)]


def test_expired_transactional_id_is_removed_with_a_tombstone(make_server, tmp_path):
    s = make_server(SMALL)
    with connect(s) as sock:
        init(sock, "tx")
    coordinator = s.broker.txn_coordinator
    assert coordinator.remove_expired_transactional_ids(coordinator.time_ms()) == []
    later = coordinator.time_ms() + 604800000 + 1
    assert coordinator.remove_expired_transactional_ids(later) == ["tx"]
    s.stop()
    assert state_records(tmp_path / "logs0", "tx")[-1] == ("tombstone", None)
    s2 = make_server(SMALL, log_dir=tmp_path / "logs0")
    assert "tx" not in s2.broker.txn_coordinator.transactions


def test_restart_completes_a_prepared_commit_and_keeps_an_ongoing_one(make_server, tmp_path):
    s = make_server(SMALL)
    with connect(s) as sock:
        request(sock, 19, 4, {"topics": [{"name": "t", "num_partitions": 1,
                                          "replication_factor": 1}], "timeout_ms": 1000})
        a = init(sock, "a")["producer_id"]
        b = init(sock, "b")["producer_id"]
        assert add(sock, "a", a, 0) == {("t", 0): 0}
        assert add(sock, "b", b, 0) == {("t", 0): 0}
    coordinator = s.broker.txn_coordinator
    # "a" crashed between its PrepareCommit record and its markers
    meta = coordinator.transactions["a"]
    coordinator._transit(meta, state=TransactionState.PREPARE_COMMIT)
    s.stop()
    s2 = make_server(SMALL, log_dir=tmp_path / "logs0")
    txns = s2.broker.txn_coordinator.transactions
    assert txns["a"].state == TransactionState.COMPLETE_COMMIT
    assert txns["b"].state == TransactionState.ONGOING
    s2.stop()
    assert control_markers(tmp_path / "logs0", "t", 0) == [(a, 0)]


def test_state_topic_compacts_and_loads_back_the_same_state(server, make_server, tmp_path):
    s = server
    with connect(s) as sock:
        for txn_id in ("a", "b", "c"):
            pid = init(sock, txn_id)["producer_id"]
            for _ in range(3):   # several transactions: many records per id
                assert add(sock, txn_id, pid, 0) == {("t", 0): 0}
                assert end(sock, txn_id, pid, 0, txn_id != "b")["error_code"] == 0
        init(sock, "c")   # c at epoch 1
    coordinator = s.broker.txn_coordinator
    before = {k: (m.producer_id, m.producer_epoch, m.state, m.txn_timeout_ms)
              for k, m in coordinator.transactions.items()}
    manager = s.broker.manager
    cleaned = 0
    for p in s.broker.partitions(TRANSACTION_STATE_TOPIC):
        log = s.broker.log(TRANSACTION_STATE_TOPIC, p)
        if log.log_end_offset:
            log.roll()
            stats = manager.clean(TRANSACTION_STATE_TOPIC, p)
            cleaned += stats.messages_read - stats.messages_written if stats else 0
    assert cleaned > 0   # the cleaner dropped the superseded records
    s.stop()
    s2 = make_server(SMALL, log_dir=tmp_path / "logs0")
    after = {k: (m.producer_id, m.producer_epoch, m.state, m.txn_timeout_ms)
             for k, m in s2.broker.txn_coordinator.transactions.items()}
    assert after == before
    assert after["b"][2] == TransactionState.COMPLETE_ABORT and after["c"][1] == 1


def test_failed_complete_write_is_completed_by_the_timer(server, monkeypatch):
    coordinator = server.broker.txn_coordinator
    real = coordinator._write

    def refuse_complete(meta, tombstone=False):
        # what _write raises when the log refuses an append
        if meta.state == TransactionState.COMPLETE_COMMIT:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return real(meta, tombstone)

    with connect(server) as sock:
        pid = init(sock, "tx")["producer_id"]
        assert add(sock, "tx", pid, 0) == {("t", 0): 0}
        monkeypatch.setattr(coordinator, "_write", refuse_complete)
        assert end(sock, "tx", pid, 0, True)["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert coordinator.transactions["tx"].state == TransactionState.PREPARE_COMMIT
        # a retry while it is being completed: CONCURRENT_TRANSACTIONS (Kafka's answer)
        assert end(sock, "tx", pid, 0, True)["error_code"] == CONCURRENT
        monkeypatch.setattr(coordinator, "_write", real)
        coordinator.abort_timed_out_transactions()
        assert coordinator.transactions["tx"].state == TransactionState.COMPLETE_COMMIT
        assert end(sock, "tx", pid, 0, True)["error_code"] == 0
