"""The "try it on one machine" walkthrough (docs/one-machine.rst) runs as written.

The page shows docs/recipes/*.sh through ``literalinclude``; this test runs the same
files, in order, the way a reader would (``bash docs/recipes/1-s3.sh`` ...): moto's S3
server, a Spark standalone master and worker from the installed pyspark, a Spark Connect
server on that cluster, a log directory produced, copied into a bucket and described
from there, then read by Spark twice (an application on the cluster, a Connect client).
Everything is on 127.0.0.1, on free ports handed to the scripts through the environment
variables the page documents, and stopped at the end by the page's own last step (the
test then makes sure of it).

The expected counts are the walkthrough's input (``RECORDS`` lines produced), never
what the code under test reports elsewhere. Skips, saying why, without Java, pyspark,
moto's server, pyarrow or the Connect client.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _ports import free_port

RECIPES = Path(__file__).resolve().parents[1] / "docs" / "recipes"
STEPS = ["1-s3.sh", "2-spark.sh", "3-connect.sh", "4-data.sh", "5-read.sh"]
RECORDS = 120
#: Seconds one step may take: the JVMs' start, on a busy 2-core machine, is most of it.
STEP_TIMEOUT = 600




def _need(module: str, why: str) -> None:
    pytest.importorskip(module, reason=why)


@pytest.fixture
def walkthrough_env(tmp_path):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (17 or 21): none on PATH or in JAVA_HOME")
    _need("pyspark", "the walkthrough needs pyspark (the spark extra)")
    _need("pyarrow.fs", "the walkthrough needs pyarrow (the remote extra)")
    _need("moto.server", "the walkthrough's S3 emulator is moto's server (moto[server])")
    _need("grpc", "the Spark Connect client needs grpcio (the connect extra)")
    _need("pandas", "the Spark Connect client needs pandas (the connect extra)")
    import kafkastore

    pkg_root = str(Path(kafkastore.__file__).resolve().parents[1])
    env = dict(os.environ)
    for name in ("SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_DRIVER_PYTHON"):
        env.pop(name, None)
    env.update({
        "TRY_DIR": str(tmp_path / "try"),
        "S3_PORT": str(free_port()),
        "SPARK_MASTER_PORT": str(free_port()),
        "SPARK_MASTER_WEBUI_PORT": str(free_port()),
        "SPARK_WORKER_WEBUI_PORT": str(free_port()),
        "CONNECT_PORT": str(free_port()),
        "RECORDS": str(RECORDS),
        # the Python running this test has kafkastore: the page's "the Python that has
        # kafkastore"; the executors import it from where this test does
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(
            [pkg_root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]),
    })
    os.makedirs(env["TRY_DIR"])
    return env


def _run(step: str, env: dict, groups: list[int]) -> str:
    proc = subprocess.Popen(["bash", str(RECIPES / step)], env=env, cwd=env["TRY_DIR"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    groups.append(proc.pid)   # its own process group: what it left running is in it
    try:
        out, _ = proc.communicate(timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{step} did not finish in {STEP_TIMEOUT}s:\n{out[-4000:]}")
    assert proc.returncode == 0, f"{step} exited {proc.returncode}:\n{out[-6000:]}"
    return out


def _stop(env: dict, groups: list[int]) -> list[str]:
    """The page's stop step, then whatever a step's process group still holds; returns
    the steps that left something running after the stop step."""
    subprocess.run(["bash", str(RECIPES / "6-stop.sh")], env=env, capture_output=True,
                   timeout=120)
    left = []
    deadline = time.monotonic() + 30
    for pgid in groups:
        while _alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pgid):
            left.append(pgid)
            os.killpg(pgid, signal.SIGKILL)
    return left


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_one_machine_walkthrough_runs_as_written(walkthrough_env):
    env = walkthrough_env
    groups: list[int] = []
    outputs = {}
    left = None
    try:
        for step in STEPS:
            outputs[step] = _run(step, env, groups)
    finally:
        left = _stop(env, groups)

    assert f"S3 at http://127.0.0.1:{env['S3_PORT']}" in outputs["1-s3.sh"]
    # describe on s3://demo/logs: three partitions (partition, topic id, segments, start,
    # end ...) whose end offsets add up to what the step produced
    ends = [int(m.group(1)) for m in re.finditer(
        r"^orders-\d+\s+[A-Za-z0-9_-]{22}\s+\d+\s+0\s+(\d+)\s", outputs["4-data.sh"],
        re.M)]
    assert len(ends) == 3 and sum(ends) == RECORDS, outputs["4-data.sh"]
    read = outputs["5-read.sh"]
    assert f"spark://127.0.0.1:{env['SPARK_MASTER_PORT']}: {RECORDS} records" in read, read
    assert f"sc://127.0.0.1:{env['CONNECT_PORT']}: {RECORDS} records" in read, read
    # the page's stop step stopped everything the steps started
    assert left == [], "processes still running after 6-stop.sh"


def test_the_page_includes_every_recipe():
    """What the test runs is what the page shows: each script, included whole."""
    page = (RECIPES.parent / "one-machine.rst").read_text()
    shown = set(re.findall(r"^\.\. literalinclude:: recipes/(\S+)\s*$", page, re.M))
    assert shown == {p.name for p in RECIPES.iterdir() if p.suffix in (".sh", ".py")}
