#!/usr/bin/env python
"""kafkastore's Spark source and sink beside Spark's Parquet, same session, same rows.

The issue's bars: reading N records (16-byte keys, 100-byte values) with an aggregation
over ``length(value)`` per ``partition`` at least as many rows/s as Spark reading the same
rows from Parquet; writing them at least 50% of Spark's Parquet write rows/s.

Setup: the rows are made once with numpy (random keys and values) and written both as a
kafkastore log directory (``--partitions`` partitions, keys placed by murmur2, 1 MiB
batches, uncompressed) and as Parquet (pyarrow, one file per partition, Spark's default
snappy). Each measurement is the best of ``--reps`` runs, kafkastore and Parquet
alternating so that drift hits both.

* read: ``groupBy(partition).agg(count, sum(length(value)))`` over the whole dataset,
  with the whole Kafka schema and (``projected``) with the user schema
  ``partition int, value binary``: Spark prunes Parquet's columns itself, but gives a
  Python source every column unless the schema names fewer;
* ceiling (information): a Python source with the same schema (whole, then
  projected) that yields one ready-made Arrow batch over and over, decoding nothing:
  the most any Python source reaches here;
* write: the Parquet dataset read by Spark and written back out, to kafkastore (a new
  topic each rep, ``mode("append")``) or to Parquet (``mode("overwrite")``): both sides
  pay the same read.

Usage: ``python asv_bench/compare_spark.py [--records N] [--reps R] [--markdown out.md]``.
Needs the ``spark`` extra and Java 17/21. Wall times include Spark's planning; the first
query of the session is a warm-up and is not timed.
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
                    rows=chunk, timestamps=ts))
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    from pyspark.sql import functions as F

    import kafkastore
    root = tempfile.mkdtemp(prefix="kafkastore-spark-bench-")
    try:
        t = time.perf_counter()
        logs, pq_dir = make_data(root, args.records, args.partitions)
        print(f"data: {args.records:,} records in {time.perf_counter() - t:.1f}s; "
              f"log {_mib(logs):.0f} MiB, parquet {_mib(pq_dir):.0f} MiB", flush=True)
        spark = session()

        def agg(df):
            return df.groupBy("partition").agg(F.count("*"), F.sum(F.length("value"))).collect()

        def read_ks():
            out = agg(spark.read.format("kafkastore").option("subscribe", "bench").load(logs))
            assert sum(r[1] for r in out) == args.records

        def read_ks_projected():
            # a Python source gets no column pruning from Spark: a user schema is the way
            out = agg(spark.read.format("kafkastore").schema("partition int, value binary")
                      .option("subscribe", "bench").load(logs))
            assert sum(r[1] for r in out) == args.records

        spark.dataSource.register(synthetic_source(args.records, args.partitions))

        def read_synthetic():
            out = agg(spark.read.format("kafkastore_bench_synthetic").load())
            assert sum(r[1] for r in out) == args.records

        def read_synthetic_projected():
            out = agg(spark.read.format("kafkastore_bench_synthetic")
                      .schema("partition int, value binary").load())
            assert sum(r[1] for r in out) == args.records

        def read_pq():
            out = agg(spark.read.parquet(pq_dir))
            assert sum(r[1] for r in out) == args.records

        rep = [0]

        def write_ks():
            rep[0] += 1
            spark.read.parquet(pq_dir).select("key", "value").write.format("kafkastore") \
                .option("topic", f"copy{rep[0]}").option("partitions", str(args.partitions)) \
                .mode("append").save(logs)

        def write_pq():
            spark.read.parquet(pq_dir).select("key", "value").write.mode("overwrite") \
                .parquet(os.path.join(root, "pq-out"))

        read_ks()
        read_pq()   # warm-up: JIT, Python workers
        rows = {}
        for name, a, b in (("read + aggregate", read_ks, read_pq),
                           ("read + aggregate, projected", read_ks_projected, read_pq),
                           ("ceiling: a source that decodes nothing", read_synthetic,
                            read_pq),
                           ("ceiling, projected", read_synthetic_projected, read_pq),
                           ("write", write_ks, write_pq)):
            ta, tb = [], []
            for _ in range(args.reps):
                ta.append(timed(a))
                tb.append(timed(b))
            rows[name] = (min(ta), min(tb))
            print(f"{name}: kafkastore {min(ta):.2f}s, parquet {min(tb):.2f}s", flush=True)
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    n = args.records
    bars = {"read + aggregate": 1.0, "read + aggregate, projected": 1.0, "write": 0.5,
            "ceiling: a source that decodes nothing": None, "ceiling, projected": None}
    lines = [f"Spark local[2], {n:,} records (16-byte keys, 100-byte values), "
             f"{args.partitions} partitions, best of {args.reps}; kafkastore "
             f"{kafkastore.__version__} ({kafkastore.BACKEND}), Python "
             f"{platform.python_version()}, {os.cpu_count()} CPUs",
             "",
             "| row | kafkastore | Parquet | kafkastore / Parquet (rows/s) | bar |",
             "|---|---|---|---|---|"]
    for name, (ta, tb) in rows.items():
        ratio = tb / ta
        bar = bars[name]
        verdict = "information" if bar is None else \
            f">= {bar:.2f}x {'PASS' if ratio >= bar else 'FAIL'}"
        lines.append(f"| {name} | {ta:.2f} s ({n / ta / 1e6:.2f} M rows/s) | {tb:.2f} s "
                     f"({n / tb / 1e6:.2f} M rows/s) | **{ratio:.2f}x** | {verdict} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
