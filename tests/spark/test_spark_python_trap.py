"""The PYSPARK_PYTHON trap (issue 17): a driver whose SparkContext started without
``PYSPARK_PYTHON``, with ``python3`` on the PATH being a Python without kafkastore.

Before: ``spark.pyspark.python`` named a Python with kafkastore, yet the driver's
planning worker ran ``python3`` and the read failed with ``ModuleNotFoundError: No
module named 'kafkastore'``. Now ``register`` honours ``spark.pyspark.python``, and with
nothing configured it refuses, naming the Python that lacks kafkastore and the fix.

Both cases run in one driver of their own (a subprocess: the environment a SparkContext
starts with is the point), loopback only, local[1]: first a SparkContext started with
nothing configured, then, after it stops, one built with ``spark.pyspark.python`` (the
JVM is started once, without that setting, so the second context has it only from its
builder, as a user's session would).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv

import pytest

from kafkastore.manager import LogManager

SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    for mode in sys.argv[2:]:
        builder = (SparkSession.builder.master("local[1]").appName("trap")
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
        if mode == "configured":
            builder = builder.config("spark.pyspark.python", sys.executable)
        spark = builder.getOrCreate()
        import kafkastore.spark
        out = {}
        try:
            kafkastore.spark.register(spark)
            out["rows"] = spark.read.format("kafkastore").option("subscribe", "t") \\
                .load(sys.argv[1]).count()
        except Exception as exc:
            out["error"] = type(exc).__name__ + ": " + str(exc)
        spark.stop()
        print("RESULT " + json.dumps({"mode": mode, **out}), flush=True)
""")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A ``python3`` without kafkastore, first on the PATH."""
    where = tmp_path_factory.mktemp("bare")
    venv.create(where, with_pip=False, symlinks=True)
    return where / "bin"


@pytest.fixture(scope="module")
def outcomes(spark, tmp_path_factory, bare_python):
    """What each mode's SparkContext got: {mode: {"rows": n} or {"error": message}}."""
    # the session fixture proves Java and pyspark are here; this driver is its own
    tmp_path = tmp_path_factory.mktemp("trap")
    root = tmp_path / "logs"
    with LogManager(str(root), background=False) as m:
        m.get_or_create("t", 0).append([(b"k", b"v%d" % i) for i in range(17)])
    script = tmp_path / "driver.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME",
                        "PYTHONPATH")}   # a user's shell: kafkastore only where installed
    env["PATH"] = f"{bare_python}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    # "default" first: the JVM starts without spark.pyspark.python
    proc = subprocess.run([sys.executable, str(script), str(root), "default", "configured"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out = json.loads(line[len("RESULT "):])
            found[out.pop("mode")] = out
    assert set(found) == {"default", "configured"}, proc.stdout[-2000:] + proc.stderr[-4000:]
    return found


def test_spark_pyspark_python_is_honoured(outcomes):
    assert outcomes["configured"] == {"rows": 17}


def test_a_python_without_kafkastore_is_named(outcomes, bare_python):
    out = outcomes["default"]
    err = out.get("error", "")
    assert err.startswith("ConfigError: kafkastore is not installed in the Python that "
                          "Spark would run the kafkastore source in: python3 ("), out
    assert str(bare_python / "python3") in err
    assert f"export PYSPARK_PYTHON={sys.executable}" in err and "spark.pyspark.python" in err
    # the probe's own finding, inside the ConfigError: not a worker's raw traceback
    assert "; import kafkastore.spark: ModuleNotFoundError: No module named 'kafkastore')" \
        in err
