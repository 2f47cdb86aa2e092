"""One local Spark session for the whole test run (quiet, loopback only, UI off).

Skipped, with the reason, when pyspark, pyarrow or Java is missing. The settings are
the ones in docs/spark.rst ("Running Spark tests"): every connection stays on
loopback, executors run this interpreter, filter pushdown is on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _java_missing() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return None
    if shutil.which("java"):
        return None
    return "no Java runtime (java on PATH or JAVA_HOME); Spark needs Java 17 or 21"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if os.path.dirname(str(item.fspath)) == HERE:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra)")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (the spark extra)")
    why = _java_missing()
    if why:
        pytest.skip(why)
    os.environ.pop("SPARK_HOME", None)   # never launch some other Spark install
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # executors import kafkastore from wherever this process does (a checkout or a wheel)
    import kafkastore
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(kafkastore.__file__)))
    # and the test modules, whose functions the tasks unpickle by reference
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [pkg_root, HERE, os.path.dirname(HERE), *inherited])
    from pyspark.sql import SparkSession

    log4j = os.path.join(HERE, "log4j2-quiet.properties")
    warehouse = tempfile.mkdtemp(prefix="kafkastore-spark-warehouse-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkastore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .config("spark.driver.extraJavaOptions",
                f"-Dlog4j2.configurationFile=file:{log4j} -XX:+UseSerialGC")
        .config("spark.executor.extraJavaOptions",
                f"-Dlog4j2.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import kafkastore.spark
    kafkastore.spark.register(session)
    yield session
    session.stop()
    shutil.rmtree(warehouse, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(spark):
    """A Spark standalone cluster (tests/spark/_cluster.py): a master and two workers,
    separate JVMs from the installed pyspark, loopback only; stopped and removed at the
    end. Needs what ``spark`` needs (it skips the same way)."""
    from _cluster import start_cluster

    c = start_cluster(workers=2)
    try:
        yield c
    finally:
        c.stop()
