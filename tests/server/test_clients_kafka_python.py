"""kafka-python against ``kafkastore serve``.

(kafka-python's own protocol code is independent of the server's codec; consumers use
``assign()`` with ``group_id=None``: no coordinator.) Expected values come from what the
test produced.
"""

from __future__ import annotations

import time

import pytest

from conftest import workload, write_transactions

kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(180)
CODECS = (None, "gzip", "snappy", "lz4", "zstd")


def admin(bs):
    return KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)


def create_topic(bs, topic, partitions=1):
    a = admin(bs)
    try:
        a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        a.close()


def produce(bs, topic, records, partition=0, timestamps=None, **conf):
    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=5, **conf)
    try:
        futures = [p.send(topic, key=k, value=v, partition=partition,
                          timestamp_ms=None if timestamps is None else timestamps[i])
                   for i, (k, v) in enumerate(records)]
        p.flush(60)
        return [f.get(timeout=60).offset for f in futures]
    finally:
        p.close(10)


def consumer(bs, **conf):
    return KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", **conf)


def poll_n(c, n, timeout=60.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=500).values():
            out.extend(recs)
    assert len(out) >= n, f"{len(out)} of {n} records within {timeout} s"
    return sorted(out, key=lambda r: (r.partition, r.offset))


def consume(bs, topic, partition, offset, n, **conf):
    c = consumer(bs, **conf)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, offset)
        return poll_n(c, n)
    finally:
        c.close()


def kv(recs):
    return [(r.key, r.value) for r in recs]


def test_metadata_lists_created_topics(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "kp", 4)
    c = consumer(bs)
    try:
        assert c.partitions_for_topic("kp") == {0, 1, 2, 3}
        assert "kp" in c.topics()
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_each_codec_consume_from_beginning(kafka_server, codec):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "t")
    records = workload(300, prefix=str(codec))
    assert produce(bs, "t", records, compression_type=codec) == list(range(300))
    assert kv(consume(bs, "t", 0, 0, 300)) == records


def test_idempotent_producer(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "idem")
    records = workload(500, prefix="idem")
    assert produce(bs, "idem", records, enable_idempotence=True) == list(range(500))
    assert kv(consume(bs, "idem", 0, 0, 500)) == records


def test_offsets_for_times_beginning_end(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "ts")
    base = int(time.time() * 1000) - 50_000
    stamps = [base + 100 * i for i in range(50)]
    records = workload(50, prefix="ts")
    produce(bs, "ts", records, timestamps=stamps)
    c = consumer(bs)
    try:
        tp = TopicPartition("ts", 0)
        found = c.offsets_for_times({tp: stamps[20] - 1})[tp]
        assert (found.offset, found.timestamp) == (20, stamps[20])
        assert c.offsets_for_times({tp: stamps[-1] + 1})[tp] is None
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 50}
        c.assign([tp])
        c.seek(tp, found.offset)
        assert kv(poll_n(c, 30)) == records[20:]
    finally:
        c.close()


def test_large_record_over_max_partition_fetch_bytes(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "big")
    records = [(b"k", b"v" * 300_000)]
    produce(bs, "big", records, max_request_size=2_000_000)
    assert kv(consume(bs, "big", 0, 0, 1, max_partition_fetch_bytes=1024)) == records


def test_delete_records_then_fetch_below_log_start(kafka_server):
    bs = kafka_server.bootstrap_servers
    create_topic(bs, "dr")
    records = workload(10, prefix="dr")
    produce(bs, "dr", records)
    tp = TopicPartition("dr", 0)
    a = admin(bs)
    try:
        a.delete_records({tp: 4})
    finally:
        a.close()
    c = consumer(bs)
    try:
        assert c.beginning_offsets([tp]) == {tp: 4}
        c.assign([tp])
        c.seek(tp, 1)     # below the log start: OFFSET_OUT_OF_RANGE, reset to earliest
        recs = poll_n(c, 6)
        assert [r.offset for r in recs] == list(range(4, 10))
        assert kv(recs) == records[4:]
    finally:
        c.close()


def test_read_committed(make_server, tmp_path):
    committed, aborted = write_transactions(tmp_path / "txnlogs")
    server = make_server(log_dir=tmp_path / "txnlogs")
    recs = consume(server.bootstrap_servers, "txn", 0, 0, len(committed),
                   isolation_level="read_committed")
    assert kv(recs) == committed
