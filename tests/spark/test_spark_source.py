"""The ``kafkastore`` format in a real local Spark session: read, pushdown, stream, write.

Data is made by kafkastore's own ``Log``/``LogManager`` in ``tmp_path`` (and, for
compatibility, the shared vector segments made by other Kafka implementations).
Expected values come from the files, read with ``iter_records``, never from the code
under test.
"""

from __future__ import annotations

import base64
import json
import re
import shutil

import pytest
from _logtools import topic_records

from kafkastore.manager import LogManager

T0 = 1_700_000_000_000
KAFKA_SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                "timestamp:timestamp,timestampType:int>")


def make_logs(root, topic="orders", partitions=3, batches=12, per_batch=25, headers=False):
    with LogManager(str(root), background=False) as m:
        for p in range(partitions):
            log = m.get_or_create(topic, p)
            for b in range(batches):
                recs = []
                for i in range(per_batch):
                    n = b * per_batch + i
                    h = ((f"h{n % 3}", None if n % 5 == 0 else f"v{n}".encode()),) \
                        if headers and n % 4 else ()
                    recs.append((None if n % 7 == 0 else f"key-{n % 11}".encode(),
                                 None if n % 13 == 0 else f"value-{p}-{n}".encode(),
                                 T0 + n * 10, h))
                log.append(recs, compression=["none", "lz4", "zstd", "gzip", "snappy"][b % 5])
                if b % 4 == 3:
                    log.roll()
    return str(root)


def read(spark, root, **options):
    r = spark.read.format("kafkastore")
    for k, v in options.items():
        r = r.option(k, json.dumps(v) if isinstance(v, (dict, list)) else str(v))
    return r.load(root)


def test_schema_is_spark_kafkas(spark, tmp_path):
    root = make_logs(tmp_path / "logs", partitions=1, batches=1)
    assert read(spark, root, subscribe="orders").schema.simpleString() == KAFKA_SCHEMA
    with_headers = read(spark, root, subscribe="orders", includeHeaders="true").schema
    assert with_headers.simpleString() == KAFKA_SCHEMA[:-1] + \
        ",headers:array<struct<key:string,value:binary>>>"
    assert all(f.nullable for f in with_headers.fields)


def test_batch_read_gives_every_record(spark, tmp_path):
    root = make_logs(tmp_path / "logs", headers=True)
    rows = read(spark, root, subscribe="orders", includeHeaders="true",
                maxBytesPerPartition=2048).collect()
    got = {(r.partition, r.offset): r for r in rows}
    n = 0
    for p in range(3):
        for rec in topic_records(root, "orders")[p]:
            r = got[(p, rec.offset)]
            n += 1
            assert (r.key, r.value, r.topic) == (rec.key, rec.value, "orders")
            assert int(r.timestamp.timestamp() * 1000) == rec.timestamp
            assert r.timestampType == 0
            want = [(k, v) for k, v in rec.headers] or None
            assert (None if r.headers is None else
                    [(h.key, None if h.value is None else bytes(h.value))
                     for h in r.headers]) == want
    assert n == len(rows) == 3 * 12 * 25


def test_offsets_options_and_minpartitions(spark, tmp_path):
    root = make_logs(tmp_path / "logs")
    df = read(spark, root, subscribe="orders",
              startingOffsets={"orders": {"0": 10, "1": -2, "2": 100}},
              endingOffsets={"orders": {"0": 20, "1": 5, "2": -1}})
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + \
        [(2, o) for o in range(100, 300)]
    assert got == want
    df = read(spark, root, assign={"orders": [1]}, minPartitions=9)
    assert df.rdd.getNumPartitions() >= 8
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(300))
    df = read(spark, root, subscribe="orders", startingTimestamp=T0 + 1000,
              endingTimestamp=T0 + 1500)
    assert sorted(r.offset for r in df.where("partition = 0").select("offset").collect()) \
        == list(range(100, 150))


def _filters_above_scan(df) -> str:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return "\n".join(line for line in plan.splitlines()
                     if re.search(r"(^|[\s*)+-])Filter \(", line))


def test_pushdown_is_exact_and_prunes(spark, tmp_path):
    root = make_logs(tmp_path / "logs")
    cond = "offset >= 40 AND offset < 130 AND partition IN (0, 2) AND topic = 'orders'"
    pushed = read(spark, root, subscribe="orders", pushdown="true").where(cond)
    assert _filters_above_scan(pushed) == ""   # Spark kept no residual filter
    unpushed = read(spark, root, subscribe="orders").where(cond)
    assert "offset" in _filters_above_scan(unpushed)
    a = sorted(tuple(r) for r in pushed.select("partition", "offset", "value").collect())
    b = sorted(tuple(r) for r in unpushed.select("partition", "offset", "value").collect())
    assert a == b and len(a) == 2 * 90
    # whole partitions and segments are never planned
    full = read(spark, root, subscribe="orders", maxBytesPerPartition=1024)
    planned = full.rdd.getNumPartitions()
    narrow = read(spark, root, subscribe="orders", maxBytesPerPartition=1024,
                  pushdown="true").where("partition = 1 AND offset < 50")
    assert narrow.rdd.getNumPartitions() < planned / 3
    assert sorted(r.offset for r in narrow.select("offset").collect()) == list(range(50))
    ts = read(spark, root, subscribe="orders", pushdown="true").where(
        f"timestamp >= timestamp_millis({T0 + 2000})")
    assert "timestamp" in _filters_above_scan(ts)   # re-checked by Spark
    assert ts.count() == 3 * (300 - 200)


def test_spark_pushdown_leak_canary(spark, tmp_path):
    """Why ``pushdown`` is off by default: in this Spark, a filtered DataFrame's pushed
    plan leaks into the DataFrame it was derived from. When this test fails, Spark has
    fixed it (the plan is scoped to the scan upstream): turn the default on."""
    root = make_logs(tmp_path / "logs")
    base = read(spark, root, subscribe="orders", pushdown="true")
    assert base.where("partition = 1 AND offset < 50").count() == 50
    assert base.count() == 50, "Spark no longer leaks pushed plans: make pushdown the default"
    safe = read(spark, root, subscribe="orders")   # the default
    assert safe.where("partition = 1 AND offset < 50").count() == 50
    assert safe.count() == 900


def test_projection_through_a_user_schema(spark, tmp_path):
    root = make_logs(tmp_path / "logs", partitions=1)
    df = (spark.read.format("kafkastore").schema("offset long, value binary")
          .option("subscribe", "orders").load(root))
    assert df.columns == ["offset", "value"]
    assert df.count() == 300
    with pytest.raises(Exception, match="not in the Kafka source schema"):
        spark.read.format("kafkastore").schema("offset long, nope int") \
            .option("subscribe", "orders").load(root).collect()


def test_shared_vector_segments(spark, tmp_path):
    from _vectors import VECTORS
    if VECTORS is None:
        pytest.skip("the Kafka reference vectors are not available")
    for name, topic in (("s1_v2_mixed_codecs", "vec1"), ("s2_mixed_magic", "vec2")):
        src = VECTORS / "segments" / name
        dst = tmp_path / "logs" / f"{topic}-0"
        dst.mkdir(parents=True)
        for f in src.iterdir():
            if f.suffix in (".log", ".index", ".timeindex"):
                shutil.copy(f, dst / f.name)
        want = [json.loads(line) for line in
                next(src.glob("*.records.jsonl")).read_text().splitlines() if line]
        rows = read(spark, str(tmp_path / "logs"), subscribe=topic).orderBy("offset").collect()
        assert [r.offset for r in rows] == [w["offset"] for w in want]
        for r, w in zip(rows, want):
            assert r.key == (None if w["key"] is None else base64.b64decode(w["key"]))
            assert r.value == (None if w["value"] is None else base64.b64decode(w["value"]))
            ts = -1 if w["timestamp"] is None else w["timestamp"]
            assert round(r.timestamp.timestamp() * 1000) == ts
            assert r.timestampType == {"CreateTime": 0, "LogAppendTime": 1, None: -1}[
                w["timestampType"]]


def test_bad_options_fail_the_query(spark, tmp_path):
    root = make_logs(tmp_path / "logs", partitions=1, batches=1)
    with pytest.raises(Exception, match="starting offset can't be latest"):
        read(spark, root, subscribe="orders", startingOffsets="latest").collect()
    with pytest.raises(Exception, match="One of the following options"):
        read(spark, root).collect()


def make_transactional_logs(root, partitions=2):
    """Two producers' transactions interleaved with plain records, some aborted, some
    committed, one left open at the end, over several segments; returns, per partition,
    ``(offset, value)`` of every record and the values a read_committed reader keeps."""
    from kafkastore.log import Log

    expect = {}
    for p in range(partitions):
        log = Log.open(str(root / f"orders-{p}"), {"segment.bytes": 2000})
        seq = {1: 0, 2: 0}
        aborted, open_from = set(), None
        for r in range(12):
            for pid in (1, 2):
                vals = [f"p{p}-r{r}-pid{pid}-{i}".encode() for i in range(3)]
                log.append([(b"k", v, T0 + r) for v in vals], producer_id=pid,
                           producer_epoch=0, base_sequence=seq[pid], is_transactional=True,
                           compression=["none", "zstd"][r % 2])
                seq[pid] += 3
                if (r + pid + p) % 3 == 0:
                    aborted.update(vals)
            log.append([(b"plain", f"p{p}-plain-{r}".encode(), T0 + r)])
            for pid in (1, 2):
                log.append_end_txn_marker(pid, 0, "ABORT" if (r + pid + p) % 3 == 0
                                          else "COMMIT")
        open_from = log.log_end_offset
        log.append([(b"k", f"p{p}-open".encode(), T0)], producer_id=1, producer_epoch=0,
                   base_sequence=seq[1], is_transactional=True)
        log.append([(b"plain", f"p{p}-after-open".encode(), T0)])
        assert log.last_stable_offset == open_from and len(log.segments) > 2
        log.close()
        everything = topic_records(root, "orders")[p]
        expect[p] = [r.value for r in everything if r.offset < open_from
                     and r.value not in aborted]
        assert len(expect[p]) < len([r for r in everything if r.offset < open_from])
    return str(root), expect


@pytest.mark.parametrize("split_options", [{}, {"maxRecordsPerPartition": 7},
                                           {"splitBy": "topicpartition"}])
def test_read_committed_drops_aborted_records_and_stops_at_the_lso(spark, tmp_path,
                                                                  split_options):
    """Spark's Kafka source with kafka.isolation.level=read_committed: the records of
    aborted transactions are left out, and each partition ends at its last stable offset
    (the open transaction and everything after it are not read); read_uncommitted reads
    every data record."""
    root, expect = make_transactional_logs(tmp_path / "logs")
    rows = read(spark, root, subscribe="orders", **{"kafka.isolation.level": "read_committed"},
                **split_options).select("partition", "offset", "value").collect()
    got = {}
    for row in sorted(rows, key=lambda r: (r.partition, r.offset)):
        got.setdefault(row.partition, []).append(bytes(row.value))
    assert got == expect
    every = read(spark, root, subscribe="orders").count()
    assert every == sum(len(v) for v in topic_records(tmp_path / "logs", "orders").values())
