"""A Spark application on the test cluster (tests/spark/_cluster.py): one scenario per run.

``python _driver.py '<json spec>'``: ``master``, ``out`` (where the JSON results go)
and ``steps``, each a ``scenario`` and its arguments, run in order in one application.
Run as a subprocess by the cluster tests, so that its SparkContext (on
``spark://127.0.0.1:<port>``) is the process's only one.

Scenarios:

* ``read``: a batch read of ``root`` with ``options``; the rows.
* ``stream``: a Structured Streaming read of ``root`` (``Trigger.AvailableNow``,
  ``options``) into a Parquet sink at ``sink`` with the checkpoint ``checkpoint``; a
  second run with the same checkpoint continues where the first stopped. Returns every
  row the sink holds.
* ``write``: ``n`` rows (keys ``k<i % 17>``, values ``v<i>``) written to topic ``topic``
  of ``root`` with ``mode("append")``.
* ``append``: ``records`` (``[key, value, timestamp]``, strings) appended by this process,
  through ``LogManager``, to each of ``partitions`` of ``topic`` in ``root`` (``{p}`` in a
  value is the partition): more data arriving between two steps (a stream's restart
  sees it).

``kill`` (any step): the Python tasks slow down (a sleep per row in a UDF) and write a marker file
when they start; once one has, an executor JVM of this application is killed with
SIGKILL, mid-job. Spark retries its tasks on the executors left (and on the one the
worker starts again); the result says which pid was killed.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import threading
import time


def session(spec):
    from pyspark.sql import SparkSession

    here = os.path.dirname(os.path.abspath(__file__))
    log4j = os.path.join(here, "log4j2-quiet.properties")
    spark = (SparkSession.builder.master(spec["master"]).appName("kafkastore-cluster-test")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1")
             .config("spark.cores.max", "2")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.task.maxFailures", "8")
             .config("spark.driver.extraJavaOptions",
                     f"-Dlog4j2.configurationFile=file:{log4j} -XX:+UseSerialGC")
             .config("spark.executor.extraJavaOptions",
                     f"-Dlog4j2.configurationFile=file:{log4j} -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import kafkastore.spark

    kafkastore.spark.register(spark)
    return spark


def _b64(b):
    return None if b is None else base64.b64encode(bytes(b)).decode()


def rows_of(df):
    return sorted([r["topic"], r["partition"], r["offset"], _b64(r["key"]), _b64(r["value"]),
                   int(r["timestamp"].timestamp() * 1000)] for r in df.collect())


def executor_pids(app_id: str) -> list[int]:
    """The executor JVMs running for ``app_id`` on this machine (from /proc)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if "CoarseGrainedExecutorBackend" in cmd and app_id in cmd:
            out.append(int(pid))
    return sorted(out)


class Killer(threading.Thread):
    """Kill -9 one executor of ``app_id`` once a task has written a marker."""

    def __init__(self, markers: str, app_id: str) -> None:
        super().__init__(daemon=True)
        self.markers, self.app_id = markers, app_id
        self.killed = None

    def run(self) -> None:
        deadline = time.monotonic() + 300
        while not os.listdir(self.markers) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)   # mid-task, not at its first row
        for pid in executor_pids(self.app_id)[:1]:
            os.kill(pid, signal.SIGKILL)
            self.killed = pid


def slow_udf(markers: str, delay: float):
    from pyspark.sql.functions import udf

    state = {}

    @udf("long", useArrow=False)
    def slow(x):
        if "marked" not in state:
            state["marked"] = True
            open(os.path.join(markers, f"task-{os.getpid()}-{time.monotonic_ns()}"),
                 "w").close()
        time.sleep(delay)
        return x

    return slow


def run_step(spark, step: dict, workdir: str) -> dict:
    result = {}
    killer = None
    if step.get("kill"):
        markers = os.path.join(workdir, f"markers-{time.monotonic_ns()}")
        os.makedirs(markers)
        killer = Killer(markers, spark.sparkContext.applicationId)
        killer.start()
    scenario = step["scenario"]
    if scenario == "read":
        reader = spark.read.format("kafkastore")
        for k, v in step.get("options", {}).items():
            reader = reader.option(k, v)
        df = reader.load(step["root"])
        if killer is not None:
            df = df.withColumn("offset", slow_udf(markers, step.get("delay", 0.002))(
                df["offset"]))
        result["rows"] = rows_of(df)
    elif scenario == "stream":
        reader = spark.readStream.format("kafkastore")
        for k, v in step.get("options", {}).items():
            reader = reader.option(k, v)
        q = (reader.load(step["root"]).select("topic", "partition", "offset", "key",
                                              "value", "timestamp")
             .writeStream.format("parquet").option("path", step["sink"])
             .option("checkpointLocation", step["checkpoint"])
             .trigger(availableNow=True).start())
        q.awaitTermination(300)
        result["batches"] = len(q.recentProgress)
        q.stop()
        result["rows"] = rows_of(spark.read.parquet(step["sink"]))
    elif scenario == "write":
        from pyspark.sql import functions as F

        df = spark.range(step["n"], numPartitions=step.get("tasks", 6))
        if killer is not None:
            df = df.withColumn("id", slow_udf(markers, step.get("delay", 0.002))(df["id"]))
        df = df.select(F.concat(F.lit("k"), (F.col("id") % 17).cast("string"))
                       .cast("binary").alias("key"),
                       F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary")
                       .alias("value"))
        df.write.format("kafkastore").option("topic", step["topic"]) \
            .option("partitions", str(step.get("partitions", 3))) \
            .mode("append").save(step["root"])
    elif scenario == "append":
        from kafkastore.manager import LogManager

        with LogManager(step["root"], background=False) as m:
            for p in step["partitions"]:
                m.get(step["topic"], p).append(
                    [(k.encode(), v.format(p=p).encode(), ts) for k, v, ts in step["records"]])
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    if killer is not None:
        killer.join(5)
        result["killed"] = killer.killed
    return result


def main() -> None:
    spec = json.loads(sys.argv[1])
    spark = session(spec)
    workdir = os.path.dirname(spec["out"])
    try:
        # one application runs several steps: a driver and its executors start once
        results = [run_step(spark, step, workdir) for step in spec["steps"]]
    finally:
        spark.stop()
    with open(spec["out"], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
