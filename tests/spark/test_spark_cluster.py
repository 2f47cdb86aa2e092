"""The data source on a Spark standalone cluster (issue 17).

A master and two workers, separate JVMs started from the installed pyspark on
127.0.0.1 (tests/spark/_cluster.py). The scenarios run as steps of one application, a
driver of its own (tests/spark/_driver.py): a batch read, the same read from S3 (moto),
a write to a directory the workers share, a stream's first run; then, after more data
arrives, the stream restarted from its checkpoint (a new query), and a read and a write
during which an executor is killed with SIGKILL (Spark retries its tasks elsewhere).
The reference is the local session's result on the same data; the written log is read
back: nothing lost, nothing twice.
"""

from __future__ import annotations

import os

import pytest
from test_spark_source import T0, make_logs

from kafkastore.log_view import ReadOnlyLogDir
from kafkastore.spark.writer import JOURNAL_PREFIX
from kafkastore.topic import TopicPartition

READ = {"subscribe": "orders", "maxBytesPerPartition": "4096"}
S3_READ = {"subscribe": "orders", "startingTimestamp": str(T0 + 2000)}
N_WRITE = 3000


def _local_rows(spark, root, **options):
    """The local session's rows, as the other process reports its own (_driver.rows_of)."""
    from _driver import rows_of

    return rows_of(spark.read.format("kafkastore").options(**options).load(root))


@pytest.fixture(scope="module")
def runs(cluster, s3_server, tmp_path_factory):
    """Both applications' results, and where they read and wrote."""
    base = tmp_path_factory.mktemp("cluster")
    logs = str(base / "logs")
    make_logs(logs, partitions=4, batches=16, per_batch=40)
    bucket = s3_server.new_bucket("cluster")
    uri = s3_server.upload_dir(logs, bucket, "kafka-logs")
    stream_logs = base / "stream-logs"
    make_logs(stream_logs, partitions=2, batches=6, per_batch=30)
    stream = dict(scenario="stream", root=str(stream_logs), sink=str(base / "sink"),
                  checkpoint=str(base / "checkpoint"),
                  options={"subscribe": "orders", "startingOffsets": "earliest",
                           "maxOffsetsPerTrigger": "100"})
    # One application (a driver and its executors start once): the stream's second run
    # is a new query on the same checkpoint, after more data arrived, as after a restart.
    late = [["late", f"late-{{p}}-{i}", T0 + 10**6 + i] for i in range(25)]
    results = cluster.driver([
        dict(scenario="read", root=logs, options=READ),
        dict(scenario="read", root=uri, options={**S3_READ, **s3_server.spark_options()}),
        dict(scenario="write", root=str(base / "shared-clean"), topic="sunk", n=N_WRITE),
        stream,
        dict(scenario="append", root=str(stream_logs), topic="orders", partitions=[0, 1],
             records=late),
        stream,
        dict(scenario="read", root=logs, options=READ, kill=True, delay=0.003),
        dict(scenario="write", root=str(base / "shared-killed"), topic="sunk", n=N_WRITE,
             kill=True, delay=0.004),
    ])
    first, second = results[:4], results[5:]
    return {"logs": logs, "base": base, "stream_logs": str(stream_logs),
            "first": first, "second": second}


def test_the_batch_read_equals_the_local_read(spark, runs):
    got = runs["first"][0]["rows"]
    assert got == _local_rows(spark, runs["logs"], **READ) and len(got) == 4 * 16 * 40


def test_the_read_from_s3_on_the_cluster_equals_the_local_read(spark, runs):
    got = runs["first"][1]["rows"]
    want = _local_rows(spark, runs["logs"], **S3_READ)
    assert got == want and 0 < len(got) < 4 * 16 * 40


def test_an_executor_killed_mid_read_changes_nothing(spark, runs):
    out = runs["second"][1]
    assert out["killed"], "no executor was killed: the test proved nothing"
    assert out["rows"] == _local_rows(spark, runs["logs"], **READ)


def test_a_stream_restarted_from_its_checkpoint_delivers_everything_once(spark, runs):
    first, second = runs["first"][3], runs["second"][0]
    assert first["batches"] >= 2 and len(first["rows"]) == 2 * 6 * 30
    got = second["rows"]
    assert got == _local_rows(spark, runs["stream_logs"], subscribe="orders")
    assert len({(r[1], r[2]) for r in got}) == len(got) == 2 * (6 * 30 + 25)


@pytest.mark.parametrize("which", ["clean", "killed"])
def test_the_write_lands_exactly_once(runs, which):
    if which == "killed":
        assert runs["second"][2]["killed"], "no executor was killed: the test proved nothing"
    root = runs["base"] / f"shared-{which}"   # every worker sees it: a shared POSIX dir
    with ReadOnlyLogDir.open(str(root)) as d:
        assert d.partitions() == [TopicPartition("sunk", p) for p in range(3)]
        values = []
        for tp in d.partitions():
            log = d.log(tp)
            records = list(log.records())
            assert [r.offset for r in records] == list(range(log.log_end_offset)), tp
            values += [r.value for r in records]
    assert sorted(values) == sorted(b"v%d" % i for i in range(N_WRITE))
    # no commit journal left behind (a commit that did not finish would leave one)
    assert not any(name.startswith(JOURNAL_PREFIX) for name in os.listdir(root))
