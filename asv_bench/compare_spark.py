#!/usr/bin/env python
"""kafkastore's Spark source and sink beside the reads they are measured against.

The bars (issue 17 replaced the read bar of issue 7): reading N records (16-byte keys,
100-byte values) with an aggregation over ``length(value)`` per ``partition`` at least
0.9x the rows/s of a Python data source that decodes nothing and yields ready-made Arrow
batches of the same schema, in the same session (the most any Python source reaches:
what is left is Spark's intake of the Arrow stream); writing them at least 50% of
Spark's Parquet write rows/s. Spark's Parquet read stays in the table as information
(beating it needs a JVM reader).

Setup: the rows are made once with numpy (random keys and values) and written both as a
kafkastore log directory (``--partitions`` partitions, keys placed by murmur2, 1 MiB
batches, uncompressed) and as Parquet (pyarrow, one file per partition, Spark's default
snappy). With ``--s3`` (the default when moto's server is installed) the log directory
is also uploaded to moto's S3 server on 127.0.0.1 and read from ``s3://`` in the same
session. Each measurement is the best of ``--reps`` runs, the two sides of a row
alternating so that drift hits both.

* read: ``groupBy(partition).agg(count, sum(length(value)))`` over the whole dataset,
  with the whole Kafka schema and (``projected``) with the user schema
  ``partition int, value binary`` (Spark hands a Python source every column unless the
  schema names fewer), each beside the decode-nothing source with the same schema;
* S3: the same read of the same directory from the emulator beside the local disk
  (information: the emulator's speed is not a cloud store's);
* Parquet: the same aggregation over the Parquet copy, beside kafkastore (information);
* write: the Parquet dataset read by Spark and written back out, to kafkastore (a new
  topic each rep, ``mode("append")``) or to Parquet (``mode("overwrite")``): both sides
  pay the same read.

Usage: ``python asv_bench/compare_spark.py [--records N] [--reps R] [--no-s3]
[--markdown out.md]``. Needs the ``spark`` extra and Java 17/21 (and ``moto[server]``,
``boto3`` for the S3 row). Wall times include Spark's planning; the first query of the
session is a warm-up and is not timed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np


def make_data(root: str, n: int, partitions: int, seed: int = 1):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kafkastore._kernels import murmur2
    from kafkastore.manager import LogManager
    from kafkastore.records import encode_columns

    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 256, size=n * 16, dtype=np.uint8)
    values = rng.integers(32, 127, size=n * 100, dtype=np.uint8)
    koffs = np.arange(0, (n + 1) * 16, 16, dtype=np.int64)
    voffs = np.arange(0, (n + 1) * 100, 100, dtype=np.int64)
    parts = murmur2.partitions((koffs, keys), partitions)
    ts = 1_700_000_000_000 + np.arange(n, dtype=np.int64)
    logs = os.path.join(root, "logs")
    pq_dir = os.path.join(root, "parquet")
    os.makedirs(pq_dir)
    with LogManager(logs, {"segment.bytes": 1 << 30}, background=False) as m:
        for p in range(partitions):
            rows = np.flatnonzero(parts == p).astype(np.int64)
            log = m.get_or_create("bench", p)
            for chunk in np.array_split(rows, max(1, len(rows) // 100_000)):
                log.append_batches(encode_columns(
                    (koffs, keys, None), (voffs, values, None), max_batch_bytes=1_000_000,
                    rows=chunk, timestamps=ts, first_offset=None))
            k = pa.Array.from_buffers(pa.binary(), len(rows), [
                None, pa.py_buffer(np.arange(0, (len(rows) + 1) * 16, 16, dtype=np.int32)),
                pa.py_buffer(keys.reshape(-1, 16)[rows].tobytes())])
            v = pa.Array.from_buffers(pa.binary(), len(rows), [
                None, pa.py_buffer(np.arange(0, (len(rows) + 1) * 100, 100, dtype=np.int32)),
                pa.py_buffer(values.reshape(-1, 100)[rows].tobytes())])
            table = pa.table({"key": k, "value": v,
                              "partition": pa.array(np.full(len(rows), p, np.int32)),
                              "offset": pa.array(np.arange(len(rows), dtype=np.int64)),
                              "timestamp": pa.array(ts[rows] * 1000,
                                                    pa.timestamp("us", tz="UTC"))})
            pq.write_table(table, os.path.join(pq_dir, f"part-{p:03d}.parquet"))
    return logs, pq_dir


def synthetic_source(total: int, partitions: int):
    """A Python data source with the Kafka schema that decodes nothing: it yields one
    ready-made 64K-row Arrow batch over and over, with the columns the schema names. What
    it reaches is the ceiling of any Python source on this Spark: the cost left is Spark's
    intake of the Arrow stream."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkastore.spark.reader import schema_ddl

    class SyntheticReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def __init__(self, names):
            self.names = names

        def read(self, partition):
            from kafkastore.spark.reader import arrow_schema, columns_to_arrow
            names = self.names
            m = 65536
            rng = np.random.default_rng(partition.value)
            cols = {"offset": np.arange(m, dtype=np.int64),
                    "timestamp": np.full(m, 1_700_000_000_000, np.int64),
                    "timestamp_type": np.zeros(m, np.int8),
                    "key_offsets": np.arange(0, (m + 1) * 16, 16, dtype=np.int64),
                    "key_data": rng.integers(0, 256, m * 16, dtype=np.uint8),
                    "key_null": np.zeros(m, bool),
                    "value_offsets": np.arange(0, (m + 1) * 100, 100, dtype=np.int64),
                    "value_data": rng.integers(32, 127, m * 100, dtype=np.uint8),
                    "value_null": np.zeros(m, bool)}
            batch = columns_to_arrow(cols, 0, m, names, arrow_schema(names), b"bench",
                                     partition.value)
            left = total // partitions + (partition.value < total % partitions)
            while left > 0:
                yield batch if left >= m else batch.slice(0, left)
                left -= m

    class SyntheticSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkastore_bench_synthetic"

        def schema(self):
            return schema_ddl(False)

        def reader(self, schema):
            # like kafkastore's source: a user schema that names fewer columns projects
            return SyntheticReader([f.name for f in schema.fields])

    return SyntheticSource


def session():
    os.environ.pop("SPARK_HOME", None)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("kafkastore-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "2g")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import kafkastore.spark
    kafkastore.spark.register(spark)
    return spark


def _mib(path: str) -> float:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
               for f in fs) / 2**20


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def start_s3(logs: str):
    """moto's S3 server on 127.0.0.1 with ``logs`` uploaded; ``(uri, options, stop)``
    (options: Spark's ``storage.*``), or None when moto's server mode is not installed."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        return None
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket="bench")
    for d, _, files in os.walk(logs):
        for f in files:
            path = os.path.join(d, f)
            with open(path, "rb") as fh:
                client.put_object(Bucket="bench", Key="logs/" + os.path.relpath(path, logs),
                                  Body=fh.read())
    options = {"storage.endpoint_override": endpoint, "storage.access_key": "testing",
               "storage.secret_key": "testing", "storage.region": "us-east-1"}
    return "s3://bench/logs", options, server.stop


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-s3", dest="s3", action="store_false",
                    help="skip the read from moto's S3 server")
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    from pyspark.sql import functions as F

    import kafkastore
    root = tempfile.mkdtemp(prefix="kafkastore-spark-bench-")
    s3 = None
    try:
        t = time.perf_counter()
        logs, pq_dir = make_data(root, args.records, args.partitions)
        print(f"data: {args.records:,} records in {time.perf_counter() - t:.1f}s; "
              f"log {_mib(logs):.0f} MiB, parquet {_mib(pq_dir):.0f} MiB", flush=True)
        if args.s3:
            s3 = start_s3(logs)
            if s3 is None:
                print("S3 row skipped: moto's server mode is not installed", flush=True)
        spark = session()

        def agg(df):
            return df.groupBy("partition").agg(F.count("*"), F.sum(F.length("value"))).collect()

        def check(out):
            assert sum(r[1] for r in out) == args.records, out

        def ks(path, schema=None, options=None):
            reader = spark.read.format("kafkastore").option("subscribe", "bench")
            if schema:
                # a Python source gets no column pruning from Spark: a user schema is the way
                reader = reader.schema(schema)
            return lambda: check(agg(reader.options(**(options or {})).load(path)))

        spark.dataSource.register(synthetic_source(args.records, args.partitions))

        def synthetic(schema=None):
            reader = spark.read.format("kafkastore_bench_synthetic")
            if schema:
                reader = reader.schema(schema)
            return lambda: check(agg(reader.load()))

        def read_pq():
            check(agg(spark.read.parquet(pq_dir)))

        rep = [0]

        def write_ks():
            rep[0] += 1
            spark.read.parquet(pq_dir).select("key", "value").write.format("kafkastore") \
                .option("topic", f"copy{rep[0]}").option("partitions", str(args.partitions)) \
                .mode("append").save(logs)

        def write_pq():
            spark.read.parquet(pq_dir).select("key", "value").write.mode("overwrite") \
                .parquet(os.path.join(root, "pq-out"))

        projected = "partition int, value binary"
        # (row, kafkastore side, reference side, reference's name, bar or None)
        plan = [("read + aggregate", ks(logs), synthetic(), "decode-nothing source", 0.9),
                ("read + aggregate, projected", ks(logs, projected), synthetic(projected),
                 "decode-nothing source", 0.9),
                ("read + aggregate", ks(logs), read_pq, "Parquet", None),
                ("read + aggregate, projected", ks(logs, projected), read_pq, "Parquet",
                 None)]
        if s3 is not None:
            plan.append(("read + aggregate from S3 (moto)", ks(s3[0], options=s3[1]),
                         ks(logs), "the same directory on local disk", None))
        plan.append(("write", write_ks, write_pq, "Parquet write", 0.5))
        ks(logs)()
        read_pq()   # warm-up: JIT, Python workers
        if s3 is not None:
            ks(s3[0], options=s3[1])()
        rows = []
        for name, a, b, ref, bar in plan:
            ta, tb = [], []
            for _ in range(args.reps):
                ta.append(timed(a))
                tb.append(timed(b))
            rows.append((name, min(ta), min(tb), ref, bar))
            print(f"{name}: kafkastore {min(ta):.2f}s, {ref} {min(tb):.2f}s", flush=True)
        spark.stop()
    finally:
        if s3 is not None:
            s3[2]()
        shutil.rmtree(root, ignore_errors=True)
    n = args.records
    lines = [f"Spark local[2], {n:,} records (16-byte keys, 100-byte values), "
             f"{args.partitions} partitions, best of {args.reps}; kafkastore "
             f"{kafkastore.__version__} ({kafkastore.BACKEND}), Python "
             f"{platform.python_version()}, {os.cpu_count()} CPUs",
             "",
             "| row | kafkastore | beside | its rows/s | kafkastore / beside (rows/s) | bar |",
             "|---|---|---|---|---|---|"]
    for name, ta, tb, ref, bar in rows:
        ratio = tb / ta
        verdict = "information" if bar is None else \
            f">= {bar:.2f}x {'PASS' if ratio >= bar else 'FAIL'}"
        lines.append(f"| {name} | {ta:.2f} s ({n / ta / 1e6:.2f} M rows/s) | {ref} | "
                     f"{tb:.2f} s ({n / tb / 1e6:.2f} M rows/s) | **{ratio:.2f}x** | "
                     f"{verdict} |")
    emit(lines, args.markdown)
    return 0


def emit(lines: list[str], markdown: str | None) -> None:
    """Print the table; write it to ``markdown`` too when given."""
    text = "\n".join(lines)
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
