"""The Spark source reading a log directory from S3 (moto's server on loopback).

The same directory is read from the local disk and from ``s3://`` in the same session;
the rows must be equal, row for row, for every kind of read: whole topics, offset
ranges, a timestamp start, headers, pushed-down filters and a stream. Faults injected
between the executors and the store (tests/_faultproxy.py) change nothing in the
result; a segment deleted between planning and reading fails the query with the
typed error, never with fewer rows.
"""

from __future__ import annotations

import os

import pytest
from test_spark_source import T0, make_logs, read


def _rows(df):
    return sorted((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                   r.timestampType, tuple(r.headers or ()) if "headers" in df.columns else None)
                  for r in df.collect())


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3-logs") / "logs"
    make_logs(root, partitions=3, batches=12, headers=True)
    make_logs(root, topic="payments", partitions=1, batches=5)
    return str(root)


@pytest.fixture
def s3_logs(s3_server, logs):
    bucket = s3_server.new_bucket("spark")
    return s3_server.upload_dir(logs, bucket, "kafka-logs"), s3_server.spark_options(), bucket


@pytest.mark.parametrize("options", [
    {"subscribe": "orders,payments"},
    {"subscribe": "orders", "includeHeaders": "true", "maxBytesPerPartition": "2048"},
    {"subscribePattern": "ord.*", "startingOffsets": {"orders": {"0": 17, "1": -2, "2": 40}},
     "endingOffsets": {"orders": {"0": 200, "1": 120, "2": -1}}},
    {"assign": {"orders": [1]}, "startingTimestamp": str(T0 + 1500)},
    {"subscribe": "orders", "minPartitions": "7"},
])
def test_the_read_from_s3_equals_the_local_read(spark, logs, s3_logs, options):
    uri, storage, _ = s3_logs
    local = _rows(read(spark, logs, **options))
    remote = _rows(read(spark, uri, **options, **storage))
    assert remote == local and len(local) > 0


def test_pushed_filters_work_remotely(spark, logs, s3_logs):
    uri, storage, _ = s3_logs

    def q(root, **extra):
        df = read(spark, root, subscribe="orders", pushdown="true", **extra)
        return _rows(df.where((df["partition"] == 2) & (df["offset"] >= 30)
                              & (df["offset"] < 250)
                              & (df["timestamp"] >= "2023-11-14 22:13:22")))
    local = q(logs)
    assert local and q(uri, **storage) == local


def test_a_stream_from_s3_delivers_every_record_once(spark, logs, s3_logs, tmp_path):
    uri, storage, _ = s3_logs
    reader = spark.readStream.format("kafkastore").option("subscribe", "orders") \
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "250")
    for k, v in storage.items():
        reader = reader.option(k, v)
    q = (reader.load(uri).selectExpr("partition", "offset").writeStream
         .format("memory").queryName("s3_stream")
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    got = sorted(tuple(r) for r in spark.sql("select * from s3_stream").collect())
    q.stop()
    want = sorted((r.partition, r.offset) for r in read(spark, logs, subscribe="orders")
                  .select("partition", "offset").collect())
    assert got == want


def test_faults_between_executors_and_the_store_change_nothing(spark, logs, s3_server,
                                                               fault_proxy):
    bucket = s3_server.new_bucket("spark-faults")
    s3_server.upload_dir(logs, bucket, "kafka-logs")
    options = {**s3_server.spark_options(), "storage.endpoint_override": fault_proxy.endpoint,
               "storage.retry_base_delay_ms": "1", "storage.retry_max_delay_ms": "20"}
    uri = f"s3://{bucket}/kafka-logs"
    want = _rows(read(spark, logs, subscribe="orders"))
    # the segments' ranged GETs fail, each kind several times past the client's own
    # retries: the seam's retries must absorb them
    for kind in ("503", "cut", "500"):
        fault_proxy.inject(kind, contains=".log", ranged=True, times=4)
    got = _rows(read(spark, uri, subscribe="orders", maxBytesPerPartition="4096", **options))
    assert got == want
    assert sum(r.fired for r in fault_proxy.rules) == 12


def test_a_segment_deleted_between_plan_and_read_fails_the_query(spark, logs, s3_server):
    bucket = s3_server.new_bucket("spark-gone")
    uri = s3_server.upload_dir(logs, bucket, "kafka-logs")
    df = read(spark, uri, assign={"orders": [0]}, **s3_server.spark_options())
    df.rdd.getNumPartitions()                       # planned: the listing is done
    victim = next(k for k in s3_server.keys(bucket, "kafka-logs/orders-0/")
                  if k.endswith(".log"))
    s3_server.delete(bucket, victim)
    with pytest.raises(Exception) as err:
        df.collect()
    text = str(err.value)
    assert "StorageFileNotFoundError" in text and os.path.basename(victim) in text
    assert "deleted (by retention or the log cleaner) after the query was planned" in text


def test_an_unknown_storage_option_is_refused_when_planning(spark, s3_logs):
    uri, storage, _ = s3_logs
    with pytest.raises(Exception) as err:
        read(spark, uri, subscribe="orders", **storage, **{"storage.endpoint": "x"}).collect()
    assert "Unknown storage option(s) endpoint" in str(err.value)
    assert "endpoint_override" in str(err.value)
