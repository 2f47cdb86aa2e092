"""Transactions of real clients against ``kafkastore serve``: confluent-kafka (librdkafka)
first, then kafka-python and aiokafka: commits visible to a read_committed consumer,
aborts not, a fenced zombie, a hung transaction aborted by its timeout, a server
``kill -9`` mid-transaction, the consume-transform-produce loop, and
``dump-log --transaction-log-decoder`` on what the server wrote.

Expected values come from what each test produced itself.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import time

import pytest
from _wire import connect, request
from conftest import wait_until

from kafkastore import cli
from kafkastore.server.handlers import HANDLERS

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(180)

SMALL = {"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
         "num.partitions": 1, "group.initial.rebalance.delay.ms": 0}


NEEDS_GROUPS = pytest.mark.skipif(
    not {11, 14, 28} <= set(HANDLERS),
    reason="JoinGroup, SyncGroup and TxnOffsetCommit (the group coordinator's, branch "
           "i30-groups) are not answered in this build")


def create_topic(server, topic, partitions=1):
    with connect(server) as sock:
        r = request(sock, 19, 4, {"topics": [{"name": topic, "num_partitions": partitions,
                                              "replication_factor": 1}], "timeout_ms": 5000})
    assert r["topics"][0]["error_code"] in (0, 36), r


def txn_producer(bootstrap, txn_id, **conf):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "linger.ms": 1, **conf})
    p.init_transactions(30)
    return p


def read_values(bootstrap, topic, isolation="read_committed", expect=None, timeout=20.0,
                partition=0):
    """The values a consumer with ``isolation`` reads from the partition's start until
    the end it sees (or ``expect`` values)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-tests",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": isolation, "enable.partition.eof": True})
    out = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    if expect is None or len(out) >= expect:
                        break
                    continue
                raise AssertionError(msg.error())
            out.append(msg.value())
    finally:
        c.close()
    return out


def describe(server, txn_id):
    with connect(server) as sock:
        return request(sock, 65, 0, {"transactional_ids": [txn_id]})["transaction_states"][0]


def test_confluent_commit_visible_abort_invisible(make_server):
    s = make_server(SMALL)
    create_topic(s, "out")
    p = txn_producer(s.bootstrap_servers, "tx-1")
    p.begin_transaction()
    for i in range(3):
        p.produce("out", value=b"c%d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce("out", value=b"a%d" % i, partition=0)
    p.flush(30)   # (written, then aborted: librdkafka drops what it has not sent yet)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("out", value=b"c3", partition=0)
    p.commit_transaction(30)
    assert read_values(s.bootstrap_servers, "out", expect=4) == [b"c0", b"c1", b"c2", b"c3"]
    assert sorted(read_values(s.bootstrap_servers, "out", "read_uncommitted", expect=6)) == \
        [b"a0", b"a1", b"c0", b"c1", b"c2", b"c3"]
    assert describe(s, "tx-1")["transaction_state"] == "CompleteCommit"


def test_confluent_fenced_zombie(make_server):
    s = make_server(SMALL)
    create_topic(s, "out")
    zombie = txn_producer(s.bootstrap_servers, "tx-z")
    zombie.begin_transaction()
    zombie.produce("out", value=b"zombie", partition=0)
    zombie.flush(30)
    # a new instance with the same transactional.id: the zombie's transaction is
    # aborted and its epoch fenced
    fresh = txn_producer(s.bootstrap_servers, "tx-z")
    fresh.begin_transaction()
    fresh.produce("out", value=b"fresh", partition=0)
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal() or err.code() in (ck.KafkaError._FENCED,
                                         ck.KafkaError.PRODUCER_FENCED,
                                         ck.KafkaError.INVALID_PRODUCER_EPOCH), err
    assert read_values(s.bootstrap_servers, "out", expect=1) == [b"fresh"]


def test_confluent_hung_transaction_aborted_by_timeout(make_server):
    s = make_server({**SMALL,
                     "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
    create_topic(s, "out")
    hung = txn_producer(s.bootstrap_servers, "tx-h", **{"transaction.timeout.ms": 1000})
    hung.begin_transaction()
    hung.produce("out", value=b"hung", partition=0)
    hung.flush(30)
    wait_until(lambda: describe(s, "tx-h")["transaction_state"] == "CompleteAbort",
               timeout=20, what="the hung transaction to be aborted")
    assert describe(s, "tx-h")["producer_epoch"] == 1   # the fencing bump
    # the last stable offset moved past it: a later commit of another producer is read
    other = txn_producer(s.bootstrap_servers, "tx-o")
    other.begin_transaction()
    other.produce("out", value=b"after", partition=0)
    other.commit_transaction(30)
    assert read_values(s.bootstrap_servers, "out", expect=1) == [b"after"]
    with pytest.raises(KafkaException):
        hung.commit_transaction(10)


def test_kafka_python_transactional_producer(make_server):
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    s = make_server(SMALL)
    create_topic(s, "out")
    p = kafka.KafkaProducer(bootstrap_servers=s.bootstrap_servers, transactional_id="tx-kp")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("out", b"kp-commit", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send("out", b"kp-abort", partition=0)
        p.flush()   # (written, then aborted)
        p.abort_transaction()
    finally:
        p.close(5)
    assert read_values(s.bootstrap_servers, "out", expect=1) == [b"kp-commit"]
    assert read_values(s.bootstrap_servers, "out", "read_uncommitted", expect=2) == \
        [b"kp-commit", b"kp-abort"]


def test_aiokafka_transactional_producer(make_server):
    aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra")
    s = make_server(SMALL)
    create_topic(s, "out")

    async def go():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=s.bootstrap_servers,
                                      transactional_id="tx-aio")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("out", b"aio-commit", partition=0)
            await p.begin_transaction()
            await p.send_and_wait("out", b"aio-abort", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(go())
    assert read_values(s.bootstrap_servers, "out", expect=1) == [b"aio-commit"]
    assert read_values(s.bootstrap_servers, "out", "read_uncommitted", expect=2) == \
        [b"aio-commit", b"aio-abort"]


def test_kill_9_mid_transaction_then_restart(serve_process, tmp_path):
    config = {**SMALL, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
    log_dir = tmp_path / "k9"
    proc = serve_process(config, log_dir=log_dir)
    create_topic(proc, "out")
    done = txn_producer(proc.bootstrap_servers, "tx-done")
    done.begin_transaction()
    done.produce("out", value=b"acked", partition=0)
    done.commit_transaction(30)   # acknowledged: must survive
    open_ = txn_producer(proc.bootstrap_servers, "tx-open", **{"transaction.timeout.ms": 2000})
    open_.begin_transaction()
    open_.produce("out", value=b"in-flight", partition=0)
    open_.flush(30)
    proc.kill()
    del done, open_
    proc2 = serve_process(config, log_dir=log_dir)
    # as Kafka's coordinator after a failover: the Ongoing transaction is kept and
    # times out, aborted with a fencing epoch bump; the committed one stays committed
    wait_until(lambda: describe(proc2, "tx-open")["transaction_state"] == "CompleteAbort",
               timeout=30, what="the in-flight transaction to be aborted after the restart")
    assert describe(proc2, "tx-done")["transaction_state"] == "CompleteCommit"
    assert read_values(proc2.bootstrap_servers, "out", expect=1) == [b"acked"]
    assert proc2.terminate() == 0


@NEEDS_GROUPS
def test_consume_transform_produce_exactly_once(make_server):
    s = make_server(SMALL)
    create_topic(s, "in")
    create_topic(s, "out")
    src = Producer({"bootstrap.servers": s.bootstrap_servers})
    for i in range(10):
        src.produce("in", value=b"%d" % i, partition=0)
    assert src.flush(30) == 0

    def run_once(n, commit):
        c = Consumer({"bootstrap.servers": s.bootstrap_servers, "group.id": "ctp",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed"})
        p = txn_producer(s.bootstrap_servers, "tx-ctp")
        try:
            c.subscribe(["in"])
            msgs = []
            deadline = time.monotonic() + 30
            while len(msgs) < n and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    msgs.append(m)
            p.begin_transaction()
            for m in msgs:
                p.produce("out", value=b"x" + m.value(), partition=0)
            p.send_offsets_to_transaction(
                [TopicPartition("in", 0, msgs[-1].offset() + 1)],
                c.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        finally:
            c.close()

    run_once(4, commit=True)
    run_once(3, commit=False)   # aborted: its output and its offsets are dropped
    run_once(6, commit=True)    # resumes after the first 4
    assert read_values(s.bootstrap_servers, "out", expect=10) == \
        [b"x%d" % i for i in range(10)]


@NEEDS_GROUPS
def test_exactly_once_across_a_server_kill_9(serve_process, tmp_path):
    """Consume-transform-produce in transactions of up to 4 records; the server is
    killed (kill -9) once after a commit and once in the middle of a transaction, and
    restarted; the loop resumes from the committed offsets. The read_committed output
    holds every input exactly once."""
    config = SMALL
    log_dir = tmp_path / "eos"
    proc = serve_process(config, log_dir=log_dir)
    create_topic(proc, "in")
    create_topic(proc, "out")
    src = Producer({"bootstrap.servers": proc.bootstrap_servers, "acks": "all"})
    for i in range(12):
        src.produce("in", value=b"%d" % i, partition=0)
    assert src.flush(30) == 0
    del src

    def clients(bootstrap):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "session.timeout.ms": 6000})
        c.subscribe(["in"])
        return c, txn_producer(bootstrap, "tx-eos")

    def step(c, p, commit=True):
        msgs = []
        deadline = time.monotonic() + 20
        while len(msgs) < 4 and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                msgs.append(m)
            elif msgs:
                break
        if not msgs:
            return 0
        p.begin_transaction()
        for m in msgs:
            p.produce("out", value=b"x" + m.value(), partition=0)
        p.send_offsets_to_transaction([TopicPartition("in", 0, msgs[-1].offset() + 1)],
                                      c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)   # written, never committed: the kill comes now
        return len(msgs)

    c, p = clients(proc.bootstrap_servers)
    step(c, p)
    c.close()   # (leaves the group: the restarted server need not wait out its session)
    proc.kill()                                   # kill -9 after a commit
    proc = serve_process(config, log_dir=log_dir)
    c, p = clients(proc.bootstrap_servers)
    step(c, p)
    step(c, p, commit=False)
    c.close()
    proc.kill()                                   # kill -9 in the middle of a transaction
    proc = serve_process(config, log_dir=log_dir)
    c, p = clients(proc.bootstrap_servers)   # init_transactions aborts the open one
    while step(c, p) and c.position([TopicPartition("in", 0)])[0].offset < 12:
        pass
    c.close()
    out = read_values(proc.bootstrap_servers, "out", expect=12)
    assert sorted(out, key=lambda v: int(v[1:])) == [b"x%d" % i for i in range(12)]


def test_dump_log_transaction_log_decoder(make_server, tmp_path, capsys):
    s = make_server(SMALL)
    create_topic(s, "out")
    # (raw requests: what a client sends for one committed transaction)
    with connect(s) as sock:
        pid = request(sock, 22, 4, {"transactional_id": "tx-dump",
                                    "transaction_timeout_ms": 60000})["producer_id"]
        request(sock, 24, 3, {"v3_and_below_transactional_id": "tx-dump",
                              "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": 0,
                              "v3_and_below_topics": [{"name": "out", "partitions": [0]}]})
        assert request(sock, 26, 3, {"transactional_id": "tx-dump", "producer_id": pid,
                                     "producer_epoch": 0, "committed": True})["error_code"] == 0
    s.stop()
    from kafkastore.internal_topics import partition_for
    seg = glob.glob(os.path.join(s.log_dir, f"__transaction_state-{partition_for('tx-dump', 3)}",
                                 "*.log"))[0]
    capsys.readouterr()
    assert cli.main(["dump-log", "--files", seg, "--transaction-log-decoder"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "payload:" in line]
    states = []
    for line in lines:
        key = line.split(" key: ", 1)[1].split(" payload: ")[0]
        assert json.loads(key) == {"type": "0", "data": {"transactionalId": "tx-dump"}}
        payload = json.loads(line.split(" payload: ", 1)[1])
        assert payload["version"] == "1" and payload["data"]["producerId"] == pid
        states.append(payload["data"]["transactionStatus"])
    # Empty (InitProducerId), Ongoing, PrepareCommit, CompleteCommit
    assert states == [0, 1, 2, 4]
