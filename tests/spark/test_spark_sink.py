"""The ``kafkastore`` sink and the streaming source in a local Spark session."""

from __future__ import annotations

import json
import os
import time
import warnings

import pytest
from _logtools import topic_records

from kafkastore.manager import LogManager
from kafkastore.spark.layout import STAGING_DIR

T0 = 1_700_000_000_000


def staging_left(root):
    """Staged files still on disk (never visible to readers, but they must not pile up).

    A task that was still running when its job aborted removes its own file when it
    ends; give it a moment (local mode does not wait for it)."""
    for _ in range(50):
        left = [os.path.join(dp, f) for dp, _dn, fs in os.walk(root) for f in fs
                if STAGING_DIR in dp]
        if not left:
            return left
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def kp_murmur2():
    """kafka-python's murmur2, the independent oracle for Kafka's default partitioner
    (importing ``kafka`` warns about its own deprecated APIs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = pytest.importorskip("kafka.partitioner.default",
                                     reason="kafka-python (the test extra) is the oracle")
    return module.murmur2


def test_write_then_read_round_trip(spark, tmp_path, kp_murmur2):
    root = str(tmp_path / "logs")
    rows = [(None if i % 9 == 0 else f"user-{i % 37}", f"payload-{i}" if i % 11 else None,
             [("trace", f"t{i}".encode()), ("n", None)] if i % 3 == 0 else None,
             T0 + i) for i in range(3000)]
    df = spark.createDataFrame(
        rows, "key string, value string, headers array<struct<key:string,value:binary>>, "
              "ts long").selectExpr("key", "value", "headers", "timestamp_millis(ts) AS timestamp")
    df.repartition(4).write.format("kafkastore").option("topic", "events") \
        .option("partitions", "5").mode("append").save(root)
    logs = topic_records(root, "events")
    assert sorted(logs) == [0, 1, 2, 3, 4]
    seen = {}
    for p, recs in logs.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        for r in recs:
            i = int(r.timestamp - T0)
            seen[i] = True
            key, value, headers, _ = rows[i]
            assert r.key == (None if key is None else key.encode())
            assert r.value == (None if value is None else value.encode())
            assert list(r.headers) == [tuple(h) for h in headers or []]
            if key is not None:   # Kafka's default partitioner, as kafka-python computes it
                assert p == (kp_murmur2(key.encode()) & 0x7fffffff) % 5
    assert len(seen) == 3000
    null_keyed = [len([r for r in recs if r.key is None]) for recs in logs.values()]
    assert max(null_keyed) - min(null_keyed) <= 4 * 2   # spread evenly, per task
    back = spark.read.format("kafkastore").option("subscribe", "events") \
        .option("includeHeaders", "true").load(root)
    assert back.count() == 3000
    assert staging_left(root) == []


def test_topic_and_partition_columns(spark, tmp_path):
    root = str(tmp_path / "logs")
    df = spark.createDataFrame([(f"t{i % 2}", i % 3, f"k{i}", f"v{i}") for i in range(60)],
                               "topic string, partition int, key string, value string")
    df.write.format("kafkastore").option("partitions", "3").mode("append").save(root)
    for t in ("t0", "t1"):
        logs = topic_records(root, t)
        for p, recs in logs.items():
            assert {int(r.value[1:]) % 3 for r in recs} == {p}
            assert {int(r.value[1:]) % 2 for r in recs} == {int(t[1])}


def test_sink_refuses_what_spark_kafka_refuses(spark, tmp_path):
    root = str(tmp_path / "logs")
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match="append-only"):
        df.write.format("kafkastore").option("topic", "t").save(root)   # errorifexists
    with pytest.raises(Exception, match="append-only"):
        df.write.format("kafkastore").option("topic", "t").mode("overwrite").save(root)
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.select("key").write.format("kafkastore").option("topic", "t") \
            .mode("append").save(root)
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("kafkastore").mode("append").save(root)
    assert not os.path.exists(os.path.join(root, "t-0")) or topic_records(root, "t") == {0: []}
    assert staging_left(root) == []


def _boom(i):
    if i == 777:
        raise ValueError("task failure injected by the test")
    return i


def test_a_failed_or_killed_task_leaves_the_logs_unchanged(spark, tmp_path):
    root = str(tmp_path / "logs")
    with LogManager(root, background=False) as m:
        m.get_or_create("t", 0).append([(b"old", b"record", T0)])
    before = {f: os.path.getsize(os.path.join(root, "t-0", f))
              for f in os.listdir(os.path.join(root, "t-0"))}
    # (an RDD map, not a UDF: a Python UDF would want pandas with Arrow enabled)
    df = spark.range(2000).repartition(4).rdd.map(
        lambda r: (str(r.id), str(_boom(r.id)))).toDF("key string, value string")
    with pytest.raises(Exception, match="task failure injected"):
        df.write.format("kafkastore").option("topic", "t").mode("append").save(root)
    after = {f: os.path.getsize(os.path.join(root, "t-0", f))
             for f in os.listdir(os.path.join(root, "t-0")) if f != STAGING_DIR}
    assert after == before
    assert [r.value for r in topic_records(root, "t")[0]] == [b"record"]
    assert staging_left(root) == []
    # a worker that dies outright (a kill, a segfault) instead of raising
    df = spark.range(2000).repartition(4).rdd.map(
        lambda r: (str(r.id), str(os._exit(7) if r.id == 1500 else r.id))).toDF(
        "key string, value string")
    with pytest.raises(Exception):
        df.write.format("kafkastore").option("topic", "t").mode("append").save(root)
    assert len(topic_records(root, "t")[0]) == 1
    assert staging_left(root) == []


def test_streaming_exactly_once_across_restarts(spark, tmp_path):
    root = str(tmp_path / "logs")
    chk = str(tmp_path / "chk")
    with LogManager(root, background=False) as m:
        for p in range(2):
            m.get_or_create("in", p).append(
                [(f"k{i}".encode(), f"v{p}-{i}".encode(), T0 + i) for i in range(50)])

    def run():
        q = (spark.readStream.format("kafkastore").option("subscribe", "in")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "40")
             .load(root)
             .selectExpr("key", "value", "timestamp")
             .writeStream.format("kafkastore").option("topic", "out")
             .option("checkpointLocation", chk).trigger(availableNow=True).start(root))
        q.awaitTermination()
        return q

    q = run()
    assert json.loads(q.lastProgress["sources"][0]["endOffset"]) == {"in": {"0": 50, "1": 50}}
    with open(os.path.join(chk, "offsets", "0")) as f:
        assert json.loads(f.read().splitlines()[-1]) == {"in": {"0": 20, "1": 20}}
    assert len(os.listdir(os.path.join(chk, "commits"))) >= 3   # 100 rows / 40 a trigger
    out = topic_records(root, "out")
    assert sorted(r.value for recs in out.values() for r in recs) == sorted(
        f"v{p}-{i}".encode() for p in range(2) for i in range(50))
    # the sink's batch id survives a restart: replaying a committed batch writes nothing
    with LogManager(root, background=False) as m:
        m.get("in", 0).append([(b"new", b"late", T0 + 99)])
    q = run()
    out = topic_records(root, "out")
    values = sorted(r.value for recs in out.values() for r in recs)
    assert len(values) == 101 and values.count(b"late") == 1


def test_streaming_fail_on_data_loss(spark, tmp_path):
    root = str(tmp_path / "logs")
    chk = str(tmp_path / "chk")
    with LogManager(root, background=False) as m:
        log = m.get_or_create("in", 0)
        log.append([(b"k", b"a", T0)] * 10)

    def run(fail):
        q = (spark.readStream.format("kafkastore").option("subscribe", "in")
             .option("startingOffsets", "earliest").option("failOnDataLoss", fail).load(root)
             .writeStream.format("noop").option("checkpointLocation", chk)
             .trigger(availableNow=True).start())
        q.awaitTermination()

    run("true")
    with LogManager(root, background=False) as m:
        log = m.get("in", 0)
        log.append([(b"k", b"b", T0)] * 10)
        log.roll()
        log.append([(b"k", b"c", T0)] * 10)
        log.delete_records(25)   # retention moved the log start past offset 10
    with pytest.raises(Exception, match="failOnDataLoss"):
        run("true")
    run("false")
