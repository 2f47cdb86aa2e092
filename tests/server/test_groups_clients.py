"""Consumer groups with real clients (issue 30): confluent-kafka (librdkafka) groups of 1,
2 and 5 members splitting a topic's partitions, a member leaving and a member crashing
(its session times out) -> a rebalance, cooperative-sticky rebalancing, a static member
rejoining without a rebalance, committed offsets across a restart and a ``kill -9`` of the
server; kafka-python and aiokafka groups. Expected values come from what the test
produced, never from the server's own reports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import PKG_ROOT

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(120)
#: fast groups: no initial delay, short sessions (the broker's minimum lowered to allow it)
SERVER = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
          "offsets.topic.num.partitions": 5}
FAST = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 200}


def create_topic(bs, topic, partitions):
    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                    operation_timeout=30)[topic].result(30)


def produce(bs, topic, partitions, per_partition):
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    sent = set()
    for part in range(partitions):
        for i in range(per_partition):
            value = f"{part}-{i}".encode()
            p.produce(topic, value=value, partition=part)
            sent.add(value)
    assert p.flush(30) == 0
    return sent


def member(bs, group, **conf):
    return Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", **FAST, **conf})


def settle(consumers, partitions, seen=None, timeout=60.0):
    """Poll every consumer until their assignments split ``partitions`` exactly (each
    partition to one member, every member something when there are enough); the
    assignments. Records polled meanwhile go into ``seen`` (value -> count)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error() and seen is not None:
                seen[m.value()] = seen.get(m.value(), 0) + 1
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        flat = [p for s in owned for p in s]
        if sorted(flat) == sorted(partitions) and all(
                s for s in owned[:len(partitions)]):
            return owned
    raise AssertionError(f"assignments never settled: {[c.assignment() for c in consumers]}")


def drain(consumers, seen, expected, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and set(seen) != expected:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen[m.value()] = seen.get(m.value(), 0) + 1
    return seen


@pytest.mark.parametrize("size", [1, 2, 5])
def test_group_splits_the_partitions(make_server, size):
    server = make_server(config=SERVER)
    bs = server.bootstrap_servers
    create_topic(bs, "t", 10)
    consumers = [member(bs, f"split-{size}") for _ in range(size)]
    try:
        for c in consumers:
            c.subscribe(["t"])
        owned = settle(consumers, list(range(10)))
        assert all(len(s) >= 10 // size for s in owned)
        # produced once the group is stable: no rebalance moves a partition mid-read, so
        # each record reaches exactly one member once (records read before a rebalance
        # without a commit are read again after it: at-least-once, as in Kafka)
        sent = produce(bs, "t", 10, 5)
        seen: dict = {}
        drain(consumers, seen, sent)
        assert set(seen) == sent and set(seen.values()) == {1}   # each record once
    finally:
        for c in consumers:
            c.close()


def test_leave_then_crash_rebalance(make_server, tmp_path):
    server = make_server(config=SERVER)
    bs = server.bootstrap_servers
    create_topic(bs, "t", 4)
    a, b = member(bs, "lc"), member(bs, "lc")
    crashing = None
    try:
        a.subscribe(["t"])
        b.subscribe(["t"])
        settle([a, b], [0, 1, 2, 3])
        b.close()   # LeaveGroup: a rebalance gives `a` everything
        b = None
        settle([a], [0, 1, 2, 3])
        # a member in another process joins, then is killed: no LeaveGroup; its session
        # times out and `a` gets its partitions back
        script = textwrap.dedent(f"""
            import sys, time
            from confluent_kafka import Consumer
            c = Consumer({{"bootstrap.servers": "{bs}", "group.id": "lc",
                          "session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
                          "auto.offset.reset": "earliest"}})
            c.subscribe(["t"])
            while True:
                c.poll(0.1)
                if c.assignment():
                    print("assigned", flush=True)
        """)
        crashing = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                                    env=dict(os.environ, PYTHONPATH=PKG_ROOT))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            a.poll(0.05)
            if len(a.assignment()) < 4:
                break
        assert len(a.assignment()) < 4, "the second member never got partitions"
        crashing.kill()
        crashing.wait(10)
        started = time.monotonic()
        settle([a], [0, 1, 2, 3])
        # within the session timeout (2 s) and the rejoin
        assert time.monotonic() - started < 20
    finally:
        if crashing is not None and crashing.poll() is None:
            crashing.kill()
        for c in (a, b):
            if c is not None:
                c.close()


def test_cooperative_sticky_moves_only_what_it_must(make_server):
    server = make_server(config=SERVER)
    bs = server.bootstrap_servers
    create_topic(bs, "t", 6)
    revoked: list = []

    def on_revoke(consumer, partitions):
        revoked.extend(tp.partition for tp in partitions)
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    a = member(bs, "coop", **coop)
    b = member(bs, "coop", **coop)
    try:
        a.subscribe(["t"], on_revoke=on_revoke)
        settle([a], list(range(6)))
        b.subscribe(["t"])
        owned = settle([a, b], list(range(6)))
        assert len(owned[0]) == len(owned[1]) == 3
        # incremental: `a` gave up exactly the three that moved, kept the rest throughout
        assert sorted(revoked) == sorted(owned[1])
    finally:
        a.close()
        b.close()


def test_static_member_rejoins_without_a_rebalance(make_server):
    server = make_server(config=SERVER)
    bs = server.bootstrap_servers
    create_topic(bs, "t", 4)
    gc = server.broker.group_coordinator
    static = {"group.instance.id": "worker-1", "session.timeout.ms": 30000}
    a, b = member(bs, "static", **static), member(bs, "static")
    try:
        # the dynamic member first, so that it leads: a leader rejoining with JoinGroup
        # below v9 (librdkafka's) cannot skip the assignment and Kafka rebalances then
        b.subscribe(["t"])
        settle([b], [0, 1, 2, 3])
        a.subscribe(["t"])
        before = settle([a, b], [0, 1, 2, 3])
        assert gc.groups["static"].leader_id != gc.groups["static"].static_members["worker-1"]
        generation = gc.groups["static"].generation_id
        a.close()   # a static member leaves no LeaveGroup behind
        a = member(bs, "static", **static)
        a.subscribe(["t"])
        after = settle([a, b], [0, 1, 2, 3])
        assert after == before
        assert gc.groups["static"].generation_id == generation
        assert gc.groups["static"].state == "Stable"
    finally:
        for c in (a, b):
            c.close()


def _commit_some(bs, group, n):
    c = member(bs, group)
    try:
        c.subscribe(["t"])
        settle([c], [0, 1])
        committed = {}
        for part in (0, 1):
            got = c.commit(offsets=[TopicPartition("t", part, n + part)], asynchronous=False)
            assert got[0].error is None
            committed[part] = n + part
        return committed
    finally:
        c.close()


def _committed(bs, group):
    c = member(bs, group)
    try:
        return {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition("t", 0), TopicPartition("t", 1)], timeout=30)}
    finally:
        c.close()


def test_commits_survive_a_restart(make_server, tmp_path):
    log_dir = tmp_path / "logs"
    server = make_server(config=SERVER, log_dir=log_dir)
    create_topic(server.bootstrap_servers, "t", 2)
    committed = _commit_some(server.bootstrap_servers, "keep", 7)
    server.stop()
    again = make_server(config=SERVER, log_dir=log_dir)
    assert _committed(again.bootstrap_servers, "keep") == committed


def test_acknowledged_commits_survive_kill_9(serve_process, tmp_path):
    proc = serve_process(config=SERVER, log_dir=tmp_path / "plogs")
    bs = f"127.0.0.1:{proc.port}"
    create_topic(bs, "t", 2)
    committed = _commit_some(bs, "killed", 11)
    assert proc.kill() == -9
    again = serve_process(config=SERVER, log_dir=tmp_path / "plogs")
    assert _committed(f"127.0.0.1:{again.port}", "killed") == committed


def test_kafka_python_group(make_server):
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    server = make_server(config=SERVER)
    bs = server.bootstrap_servers
    create_topic(bs, "t", 2)
    sent = produce(bs, "t", 2, 3)
    c = kafka.KafkaConsumer(bootstrap_servers=bs, group_id="kp",
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=3000, heartbeat_interval_ms=300)
    try:
        # The topic's metadata first, then the subscription. Subscribed at construction,
        # kafka-python 3.0 may join before its first metadata of "t" arrives: it assigns
        # nothing, rejoins when the metadata comes, and on a loaded machine can drop the
        # second SyncGroup's answer (its poll loop and response handling race: seen with
        # the server answering both rounds in under 20 ms), then never heartbeats again.
        # Known partitions at the first join make one round, as a running application has.
        assert "t" in c.topics()
        c.subscribe(["t"])
        seen = set()
        deadline = time.monotonic() + 60
        while seen != sent and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                seen |= {r.value for r in records}
        assert seen == sent
        c.commit()
        assert {c.committed(kafka.TopicPartition("t", p)) for p in (0, 1)} == {3}
    finally:
        c.close()
    assert _committed(bs, "kp") == {0: 3, 1: 3}


def test_aiokafka_group(make_server):
    aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra")
    import asyncio
    server = make_server(config=SERVER)
    bs = server.bootstrap_servers
    create_topic(bs, "t", 2)
    sent = produce(bs, "t", 2, 3)

    async def go():
        c = aiokafka.AIOKafkaConsumer("t", bootstrap_servers=bs, group_id="aio",
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      session_timeout_ms=3000, heartbeat_interval_ms=300)
        await c.start()
        try:
            seen = set()
            deadline = time.monotonic() + 60
            while seen != sent and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=200)).values():
                    seen |= {r.value for r in records}
            await c.commit()
            return seen
        finally:
            await c.stop()
    assert asyncio.run(go()) == sent
    assert _committed(bs, "aio") == {0: 3, 1: 3}
