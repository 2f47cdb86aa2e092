"""The packed-environment recipe of docs/cluster.rst, run as written (issue 28, item 1).

Client mode on the standalone test cluster (tests/spark/_cluster.py), one application
started by pyspark's own ``bin/spark-submit``::

    PYSPARK_DRIVER_PYTHON=<the driver's Python> PYSPARK_PYTHON=./environment/bin/python \\
        spark-submit --master spark://... --archives env.tar.gz#environment app.py

Before: the driver's planning worker ran ``./environment/bin/python`` too, which exists
only next to the executors, and ``load()`` failed with ``Cannot run program
"./environment/bin/python"``. Now :func:`kafkastore.spark.register` plans in the driver's
Python and leaves the executors the archive's.

The archive is built here the way the docs say, with only what executors need: a venv
(``--copies``: Spark refuses an archive whose ``bin/python`` is a symlink out of it)
holding kafkastore and its runtime dependencies plus
pyarrow, and NOT pyspark (the Python workers import it from Spark's own
``python/lib/pyspark.zip``). The executors' ``PYTHONPATH`` is cleared
(``spark.executorEnv.PYTHONPATH``), so they can import kafkastore from the archive
only. The rows must equal the local session's; the executors' Python workers must be
the archive's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import venv
from importlib import metadata

import pytest
from test_spark_source import make_logs

import kafkastore

#: What the archive holds besides kafkastore: its runtime dependencies (pyproject.toml)
#: and pyarrow, which the source's Arrow batches need. Not pyspark, not pandas.
EXECUTOR_DISTRIBUTIONS = ("numpy", "crc32c", "lz4", "zstandard", "cramjam", "xxhash",
                          "pyarrow")

APP = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    root, out, cluster_root = sys.argv[1:4]
    spark = SparkSession.builder.appName("packed-env").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import kafkastore.spark
    kafkastore.spark.register(spark)
    from _driver import rows_of
    result = {"rows": rows_of(spark.read.format("kafkastore").option("subscribe", "orders")
                              .load(root))}

    def archive_workers():
        # the Python workers the read left running: which program, started where
        found = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\\0")
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if cwd.startswith(cluster_root) and b"pyspark.daemon" in argv:
                found.append(argv[0].decode())
        return sorted(set(found))

    result["daemons"] = archive_workers()

    @udf("string")
    def where(_):
        import os, sys
        import kafkastore, pyspark
        return json.dumps([sys.executable, os.getcwd(), kafkastore.__file__,
                           pyspark.__file__, os.environ.get("PYTHONPATH", "")])

    result["executors"] = sorted({json.loads(r[0]) and r[0] for r in
                                  spark.range(0, 4, numPartitions=2).select(where("id"))
                                  .collect()})
    spark.stop()
    with open(out, "w") as f:
        json.dump(result, f)
""")


def _copy_distribution(name: str, site: str) -> None:
    dist = metadata.distribution(name)
    for f in dist.files or ():
        src = str(dist.locate_file(f))
        if "__pycache__" in str(f) or str(f).startswith("..") or not os.path.isfile(src):
            continue
        dst = os.path.join(site, str(f))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)


def build_packed_env(where) -> tuple[str, int]:
    """The archive of the docs' recipe: ``(path of env.tar.gz, its size in bytes)``."""
    env_dir = os.path.join(where, "env")
    # copies, not symlinks: Spark (Hadoop's FileUtil.unTar) refuses to unpack a symlink
    # that points outside the archive ("expanding bin/python3.11 would create entry
    # outside of ..."), which a symlinked venv's bin/python is
    venv.create(env_dir, with_pip=False, symlinks=False)
    site = os.path.join(env_dir, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                        "site-packages")
    for name in EXECUTOR_DISTRIBUTIONS:
        _copy_distribution(name, site)
    # kafkastore as this checkout has it (its compiled kernels included)
    pkg = os.path.dirname(os.path.abspath(kafkastore.__file__))
    shutil.copytree(pkg, os.path.join(site, "kafkastore"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    # .tar.gz, not .tar: Spark unpacks a .tar with its own Java code, which drops the
    # executable bits (the executors' "error=13, Permission denied" for bin/python); a
    # .tar.gz goes through Hadoop's FileUtil.unTar, the system's tar. Level 1: quick.
    tar = os.path.join(where, "env.tar.gz")
    with tarfile.open(tar, "w:gz", compresslevel=1) as t:
        for name in sorted(os.listdir(env_dir)):   # bin/, lib/, ... at the top, as
            t.add(os.path.join(env_dir, name), arcname=name)   # venv-pack lays it out
    return tar, os.path.getsize(tar)


@pytest.fixture(scope="module")
def packed_run(spark, cluster, tmp_path_factory):
    base = tmp_path_factory.mktemp("packed")
    logs = make_logs(base / "logs", partitions=2, batches=8, per_batch=30)
    started = time.monotonic()
    tar, size = build_packed_env(str(base))
    build_s = time.monotonic() - started
    app = base / "app.py"
    app.write_text(APP)
    out = base / "result.json"
    env = dict(cluster.env)
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYSPARK_PYTHON"] = "./environment/bin/python"
    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-quiet.properties")
    submit = os.path.join(env["SPARK_HOME"], "bin", "spark-submit")
    started = time.monotonic()
    proc = subprocess.run(
        [submit, "--master", cluster.master_url, "--deploy-mode", "client",
         "--archives", f"{tar}#environment",
         "--conf", "spark.executorEnv.PYTHONPATH=",
         "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
         "--conf", "spark.sql.session.timeZone=UTC",
         "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{log4j}",
         "--conf", f"spark.executor.extraJavaOptions=-Dlog4j2.configurationFile=file:{log4j}",
         str(app), logs, str(out), cluster.root],
        env=env, cwd=str(base), capture_output=True, text=True, timeout=900)
    run_s = time.monotonic() - started
    # the driver's errors (py4j prints them to stdout) without the JVM's frames
    errors = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines()
                       if ("Error" in line or "Exception" in line)
                       and not line.lstrip().startswith("at "))
    assert proc.returncode == 0 and out.exists(), errors[-6000:]
    with open(out) as f:
        result = json.load(f)
    print(f"packed env: {size / 2**20:.0f} MiB tar, built in {build_s:.1f} s; "
          f"application {run_s:.1f} s")
    return logs, result, size


def test_the_packed_environment_recipe_reads_what_a_local_read_does(spark, packed_run):
    from _driver import rows_of

    logs, result, _ = packed_run
    want = rows_of(spark.read.format("kafkastore").option("subscribe", "orders").load(logs))
    assert result["rows"] == want and len(want) == 2 * 8 * 30


def test_the_executors_run_the_archives_python_and_its_kafkastore(packed_run):
    _, result, _ = packed_run
    # the read's Python workers were the archive's, started next to the executors
    assert result["daemons"] == ["./environment/bin/python"], result["daemons"]
    for info in result["executors"]:
        executable, cwd, ks, ps, pythonpath = json.loads(info)
        env = os.path.join(cwd, "environment")
        assert executable.startswith(env) and ks.startswith(env), info
        # pyspark from Spark's python/lib zip, not from the archive
        assert "pyspark.zip" in ps and not ps.startswith(env), info
