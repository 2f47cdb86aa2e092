"""confluent-kafka (librdkafka) against ``kafkastore serve``: the first oracle, a client
no one here wrote.

Every expected value comes from what the test itself produced (records, timestamps,
delivery offsets), never from what the server reports elsewhere. Consumers use
``assign()``: librdkafka wants a ``group.id`` but does not use the coordinator for
assigned partitions when nothing is committed (``enable.auto.commit`` false).
"""

from __future__ import annotations

import threading
import time

import pytest

from conftest import workload, write_transactions

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(180)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, partitions=1, **configs):
    a = admin(bootstrap)   # (kept referenced: a collected client fails its futures)
    futures = a.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1,
                  config={k: str(v) for k, v in configs.items()})], operation_timeout=30)
    futures[topic].result(30)


def produce(bootstrap, topic, records, partition=0, timestamps=None, **conf):
    """Produce ``records`` to one partition; the delivery reports' offsets, in order.
    Fails on any delivery error."""
    reports = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    for i, (k, v) in enumerate(records):
        kwargs = {} if timestamps is None else {"timestamp": timestamps[i]}
        p.produce(topic, value=v, key=k, partition=partition,
                  on_delivery=lambda err, msg: reports.append((err, msg)), **kwargs)
        p.poll(0)
    assert p.flush(60) == 0, "messages still in the producer's queue after 60 s"
    errors = [err for err, _ in reports if err is not None]
    assert not errors, errors[:3]
    assert len(reports) == len(records)
    return [msg.offset() for _, msg in reports]


def consumer(bootstrap, **conf):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkastore-tests",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "auto.offset.reset": "earliest", **conf})


def consume(bootstrap, topic, partition, offset, n, timeout=60.0, **conf):
    """Assign (topic, partition) at ``offset`` and poll until ``n`` records came; the
    messages."""
    c = consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        return poll_n(c, n, timeout)
    finally:
        c.close()


def poll_n(c, n, timeout):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"consumer error: {msg.error()}")
        out.append(msg)
    assert len(out) >= n, f"{len(out)} of {n} records within {timeout} s"
    return out


def kv(msgs):
    return [(m.key(), m.value()) for m in msgs]


def test_create_topics_and_metadata(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "alpha", 3)
    create_topic(bs, "beta", 1)
    md = admin(bs).list_topics(timeout=30)
    assert {"alpha", "beta"} <= set(md.topics)
    assert sorted(md.topics["alpha"].partitions) == [0, 1, 2]
    assert sorted(md.topics["beta"].partitions) == [0]
    assert len(md.brokers) == 1
    broker = next(iter(md.brokers.values()))
    assert (broker.host, broker.port) == ("127.0.0.1", kafka_server.port)
    for p in md.topics["alpha"].partitions.values():
        assert p.leader == broker.id and p.error is None
    # the directory the server wrote holds exactly these partitions
    import os
    names = {n for n in os.listdir(kafka_server.log_dir) if "-" in n and
             os.path.isdir(os.path.join(kafka_server.log_dir, n))}
    assert {"alpha-0", "alpha-1", "alpha-2", "beta-0"} <= names


@pytest.mark.parametrize("codec", CODECS)
def test_produce_each_codec_consume_from_beginning(kafka_server, codec):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "t")
    records = workload(500, prefix=codec)
    offsets = produce(bs, "t", records, **{"compression.type": codec})
    assert offsets == list(range(500))
    msgs = consume(bs, "t", 0, 0, 500)
    assert kv(msgs) == records
    assert [m.offset() for m in msgs] == offsets


def test_idempotent_producer(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "idem")
    records = workload(2000, prefix="idem")
    offsets = produce(bs, "idem", records, **{"enable.idempotence": True,
                                              "max.in.flight.requests.per.connection": 5,
                                              "linger.ms": 1, "batch.num.messages": 50})
    assert offsets == list(range(2000))
    msgs = consume(bs, "idem", 0, 0, 2000)
    assert kv(msgs) == records   # once each, in order


def test_consume_from_timestamp(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "ts")
    base = int(time.time() * 1000) - 100_000
    records = workload(100, prefix="ts")
    stamps = [base + 1000 * i for i in range(100)]
    produce(bs, "ts", records, timestamps=stamps)
    c = consumer(bs)
    try:
        query = stamps[40] - 500   # between records 39 and 40: the first at or after is 40
        [found] = c.offsets_for_times([TopicPartition("ts", 0, query)], timeout=30)
        assert found.error is None and found.offset == 40
        [past] = c.offsets_for_times([TopicPartition("ts", 0, stamps[-1] + 1)], timeout=30)
        assert past.offset in (-1, 100)   # none at or after: librdkafka reports end (-1)
        c.assign([found])
        msgs = poll_n(c, 60, 60)
        assert kv(msgs) == records[40:]
        assert [m.timestamp()[1] for m in msgs] == stamps[40:]
    finally:
        c.close()


def test_consume_from_end_and_long_poll(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "tail")
    produce(bs, "tail", workload(10, prefix="old"))
    # a fetch that waits up to 20 s: it must return when the other producer writes
    c = consumer(bs, **{"fetch.wait.max.ms": 20000, "fetch.min.bytes": 1})
    try:
        c.assign([TopicPartition("tail", 0, ck.OFFSET_END)])
        for _ in range(6):      # let the consumer resolve END and park its long poll
            c.poll(0.5)
        new = workload(3, prefix="new")
        produced_at = []

        def later():
            produced_at.append(time.monotonic())
            produce(bs, "tail", new)

        t = threading.Thread(target=later)
        t.start()
        msgs = poll_n(c, 3, 60)
        got_at = time.monotonic()
        t.join()
        assert kv(msgs) == new             # nothing of the 10 before the assignment
        assert [m.offset() for m in msgs] == [10, 11, 12]
        # woken by the append, not by the 20 s fetch.wait.max.ms running out
        assert got_at - produced_at[0] < 15, got_at - produced_at[0]
    finally:
        c.close()


def test_record_larger_than_max_partition_fetch_bytes(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "big")
    records = [(b"k%d" % i, bytes([65 + i]) * 200_000) for i in range(3)]
    produce(bs, "big", records, **{"compression.type": "none", "linger.ms": 0})
    msgs = consume(bs, "big", 0, 0, 3, **{"max.partition.fetch.bytes": 1024})
    assert kv(msgs) == records


@pytest.mark.parametrize("reset, expect_first", [("earliest", 6), ("latest", None)])
def test_delete_records_then_fetch_below_log_start(kafka_server, reset, expect_first):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "dr")
    records = workload(10, prefix="dr")
    produce(bs, "dr", records)
    a = admin(bs)
    futures = a.delete_records([TopicPartition("dr", 0, 6)], operation_timeout=30)
    [result] = [f.result(30) for f in futures.values()]
    assert result.low_watermark == 6
    c = consumer(bs, **{"auto.offset.reset": reset})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("dr", 0), timeout=30)
        assert (low, high) == (6, 10)
        c.assign([TopicPartition("dr", 0, 2)])   # below the log start: OFFSET_OUT_OF_RANGE
        if expect_first is not None:
            msgs = poll_n(c, 4, 60)
            assert [m.offset() for m in msgs] == [6, 7, 8, 9]
            assert kv(msgs) == records[6:]
        else:
            for _ in range(8):     # reset to the end: nothing old comes
                msg = c.poll(0.5)
                assert msg is None or msg.error() is not None, msg.offset()
            produce(bs, "dr", [(b"late", b"late")])
            [msg] = poll_n(c, 1, 60)
            assert (msg.offset(), msg.value()) == (10, b"late")
    finally:
        c.close()


def test_many_partitions(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "wide", 50)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
    errors = []
    for part in range(50):
        for j in range(3):
            p.produce("wide", key=b"%d" % part, value=b"p%d-%d" % (part, j), partition=part,
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(60) == 0 and not errors
    c = consumer(bs)
    try:
        c.assign([TopicPartition("wide", part, 0) for part in range(50)])
        msgs = poll_n(c, 150, 90)
    finally:
        c.close()
    seen = {}
    for m in msgs:
        seen.setdefault(m.partition(), []).append((m.offset(), m.value()))
    assert sorted(seen) == list(range(50))
    for part, got in seen.items():
        assert got == [(j, b"p%d-%d" % (part, j)) for j in range(3)]


def test_two_servers_two_directories(make_server):
    a, b = make_server(), make_server()
    assert a.port != b.port
    for server, tag in ((a, "A"), (b, "B")):
        create_topic(server.bootstrap_servers, "shared")
        produce(server.bootstrap_servers, "shared", workload(20, prefix=tag))
    for server, tag in ((a, "A"), (b, "B")):
        msgs = consume(server.bootstrap_servers, "shared", 0, 0, 20)
        assert kv(msgs) == workload(20, prefix=tag)
    assert a.log_dir != b.log_dir


def test_read_committed_over_library_transactions(make_server, tmp_path):
    log_dir = tmp_path / "txnlogs"
    committed, aborted = write_transactions(log_dir)
    server = make_server(log_dir=log_dir)
    bs = server.bootstrap_servers
    msgs = consume(bs, "txn", 0, 0, len(committed), **{"isolation.level": "read_committed"})
    assert kv(msgs) == committed
    # read_uncommitted sees the aborted records too (they are in the log)
    msgs = consume(bs, "txn", 0, 0, len(committed) + len(aborted),
                   **{"isolation.level": "read_uncommitted"})
    assert sorted(kv(msgs)) == sorted(committed + aborted)


def test_read_committed_waits_for_an_open_transaction(make_server, tmp_path):
    """An open transaction holds read_committed consumers at the last stable offset."""
    from kafkastore.log import Log
    from kafkastore.records import encode_batch

    log_dir = tmp_path / "openlogs"
    log = Log.open(str(log_dir / "open-0"))
    now = int(time.time() * 1000)
    log.append_batches(encode_batch([(b"x", b"before")], timestamp=now))
    log.append_batches(encode_batch([(b"y", b"in-txn")], timestamp=now, is_transactional=True,
                                    producer_id=7, producer_epoch=0, base_sequence=0))
    log.append_batches(encode_batch([(b"z", b"after")], timestamp=now))
    log.close()
    server = make_server(log_dir=log_dir)
    c = consumer(server.bootstrap_servers, **{"isolation.level": "read_committed"})
    try:
        c.assign([TopicPartition("open", 0, 0)])
        [first] = poll_n(c, 1, 60)
        assert first.value() == b"before"
        for _ in range(6):
            msg = c.poll(0.5)
            assert msg is None or msg.error() is not None, msg.value()
    finally:
        c.close()


# librdkafka 2.x's Metadata v12 request for every topic (what list_topics() and a
# consumer's metadata refresh send), as captured on the wire: its body carries the null
# topic array in a 4-byte slot it reserved for the count, so 3 bytes follow the fields.
# Kafka reads the fields and ignores what follows (RequestContext.parseRequest ->
# AbstractRequest.parseRequest never checks the buffer's remaining bytes), so the
# server must too, or librdkafka cannot list topics.
LIBRDKAFKA_METADATA_ALL_TOPICS = bytes.fromhex(
    "0003000c00000003000772646b61666b610000000000010000")


def test_librdkafka_metadata_request_for_all_topics_is_answered(kafka_server):
    import socket
    import struct

    with socket.create_connection(("127.0.0.1", kafka_server.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(LIBRDKAFKA_METADATA_ALL_TOPICS))
                  + LIBRDKAFKA_METADATA_ALL_TOPICS)
        head = b""
        while len(head) < 8:
            chunk = s.recv(8 - len(head))
            if not chunk:
                break
            head += chunk
    assert len(head) == 8, "the server closed the connection instead of answering"
    assert struct.unpack(">i", head[4:])[0] == 3   # the request's correlation id
