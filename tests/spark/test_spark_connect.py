"""The data source through Spark Connect (issue 17).

A Spark Connect server started from the installed pyspark (``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer``, local[2], gRPC bound to
127.0.0.1, its Python workers this interpreter); a client session in a process of its
own (``SparkSession.builder.remote("sc://127.0.0.1:<port>")``: one process, one kind of
session) registers the format with ``kafkastore.spark.register`` and reads, batch and
from S3; the rows equal the local session's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
from test_spark_source import T0, make_logs

CLIENT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    import kafkastore.spark
    from _driver import rows_of          # tests/spark is on PYTHONPATH (cluster_env)

    spec = json.loads(sys.argv[1])
    spark = SparkSession.builder.remote(spec["remote"]).getOrCreate()
    kafkastore.spark.register(spark)
    out = [rows_of(spark.read.format("kafkastore").options(**read["options"])
                   .load(read["root"])) for read in spec["reads"]]
    spark.stop()
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def connect_server(spark):
    pytest.importorskip("grpc", reason="the Spark Connect client needs grpcio (the "
                        "connect extra)")
    pytest.importorskip("pandas", reason="the Spark Connect client needs pandas (the "
                        "connect extra)")
    import pyspark
    from _cluster import START_TIMEOUT, cluster_env, free_port

    home = os.path.dirname(pyspark.__file__)
    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "log4j2-quiet.properties")
    port = free_port()
    root = tempfile.mkdtemp(prefix="kafkastore-connect-")
    env = cluster_env()
    log = open(os.path.join(root, "server.log"), "wb")
    proc = subprocess.Popen(
        [os.path.join(home, "bin", "spark-submit"),
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--name", "kafkastore-connect-test", "--master", "local[2]",
         "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.host=127.0.0.1",
         "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", f"spark.pyspark.python={sys.executable}",
         "--conf", "spark.sql.session.timeZone=UTC",
         "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{log4j}"
                   " -XX:+UseSerialGC",
         "spark-internal"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
    log.close()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    with open(os.path.join(root, "server.log"), errors="replace") as f:
                        raise RuntimeError("the Connect server did not start:\n"
                                           + f.read()[-4000:]) from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", env
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _local_rows(spark, root, **options):
    """The local session's rows, as the other process reports its own (_driver.rows_of)."""
    from _driver import rows_of

    return rows_of(spark.read.format("kafkastore").options(**options).load(root))


def test_a_connect_client_reads_what_the_local_session_reads(spark, connect_server,
                                                             tmp_path, s3_server):
    remote, env = connect_server
    logs = make_logs(tmp_path / "logs", partitions=3, batches=8)
    bucket = s3_server.new_bucket("connect")
    uri = s3_server.upload_dir(logs, bucket, "kafka-logs")
    reads = [{"root": logs, "options": {"subscribe": "orders", "maxBytesPerPartition": "2048"}},
             {"root": uri, "options": {"subscribe": "orders",
                                       "startingTimestamp": str(T0 + 1000),
                                       **s3_server.spark_options()}}]
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    proc = subprocess.run([sys.executable, str(script),
                           json.dumps({"remote": remote, "reads": reads})],
                          env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-6000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got[0] == _local_rows(spark, logs, **reads[0]["options"]) and len(got[0]) == 600
    want = _local_rows(spark, logs, subscribe="orders", startingTimestamp=str(T0 + 1000))
    assert got[1] == want and 0 < len(want) < 600
