"""A Spark standalone cluster for tests: a master and workers as separate JVMs.

Started from the INSTALLED pyspark (its ``bin/spark-class``), the way an operator
starts ``org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` on a cluster:
everything on 127.0.0.1 (``SPARK_LOCAL_IP``, ``--host``, the web UIs too, which Spark
binds to ``SPARK_LOCAL_IP``), one core and 1 GiB each, work and log directories under a
temporary directory. The workers inherit this process's environment, so the executors
they launch (and their Python workers) do too: ``KAFKASTORE_NO_EXTENSIONS`` reaches
them, as does ``PYTHONPATH``.

Applications (the drivers) run as subprocesses of the tests (tests/spark/_driver.py):
one process holds one SparkContext, and the test process already holds the local one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, os.path.dirname(HERE))   # tests/: the shared helpers
from _ports import free_port  # noqa: E402  (re-exported: the Spark tests import it from here)


def spark_class() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


def cluster_env(extra_pythonpath=()) -> dict[str, str]:
    """The environment of the cluster's JVMs and of the drivers."""
    import kafkastore
    import pyspark

    env = dict(os.environ)
    env["SPARK_HOME"] = os.path.dirname(pyspark.__file__)   # the installed pyspark, only
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOCAL_HOSTNAME"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_NO_DAEMONIZE"] = "1"
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(kafkastore.__file__)))
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(
        [pkg_root, HERE, os.path.dirname(HERE), *extra_pythonpath, *inherited])
    env.pop("SPARK_CONF_DIR", None)
    return env


@dataclass
class Cluster:
    master_url: str
    ui_port: int
    root: str
    env: dict
    procs: list = field(default_factory=list)

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                    timeout=5) as r:
            return json.load(r)

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", ()) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            # not up yet: no answer, or (while the master's UI starts) a body that is not
            # its JSON yet, which failed a CI run with a JSONDecodeError
            return 0

    def driver(self, steps: list[dict], timeout: float = 900) -> list[dict]:
        """Run ``steps`` (tests/spark/_driver.py) in one application on this cluster;
        their results."""
        out = os.path.join(self.root, f"result-{time.monotonic_ns()}.json")
        spec = {"master": self.master_url, "steps": steps, "out": out}
        proc = subprocess.run([sys.executable, os.path.join(HERE, "_driver.py"),
                               json.dumps(spec)], env=self.env, capture_output=True,
                              text=True, timeout=timeout, cwd=self.root)
        if proc.returncode != 0 or not os.path.exists(out):
            raise AssertionError(f"driver failed ({proc.returncode}):\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
        with open(out) as f:
            return json.load(f)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        for p in self.procs:
            for stream in (p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
        # executors a worker launched die with it; make sure of it
        from _driver import executor_pids

        for pid in executor_pids(""):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    mine = f"SPARK_WORKER_DIR={self.root}".encode() in f.read()
            except OSError:
                mine = False
            if mine:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(self.root, ignore_errors=True)


#: Seconds the JVMs of a cluster (or a Connect server) may take to become ready. A wait for
#: readiness, polled, so an idle machine does not pay it: beside another CPU-bound process
#: a JVM start took several times its idle time, and failing a run there says nothing
#: about the data source. A JVM that exits ends the wait at once.
START_TIMEOUT = 600.0


def start_cluster(workers: int = 2, cores: int = 1, memory: str = "1g",
                  timeout: float = START_TIMEOUT) -> Cluster:
    """Start a master and ``workers`` workers; wait until every worker is ALIVE."""
    root = tempfile.mkdtemp(prefix="kafkastore-cluster-")
    env = cluster_env()
    env["SPARK_LOG_DIR"] = os.path.join(root, "logs")
    env["SPARK_WORKER_DIR"] = root
    env["SPARK_DAEMON_MEMORY"] = "512m"
    env["SPARK_DAEMON_JAVA_OPTS"] = "-XX:+UseSerialGC -Dspark.master.rest.enabled=false"
    port, ui_port = free_port(), free_port()
    cls = spark_class()
    cluster = Cluster(f"spark://127.0.0.1:{port}", ui_port, root, env)

    def launch(name, *argv):
        log = open(os.path.join(root, f"{name}.log"), "wb")
        p = subprocess.Popen([cls, *argv], env=env, stdout=log, stderr=subprocess.STDOUT,
                             cwd=root, start_new_session=True)
        log.close()
        cluster.procs.append(p)
        return p

    try:
        launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
               "--port", str(port), "--webui-port", str(ui_port))
        for i in range(workers):
            wdir = os.path.join(root, f"worker-{i}")
            os.makedirs(wdir)
            launch(f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                   cluster.master_url, "--host", "127.0.0.1", "--cores", str(cores),
                   "--memory", memory, "--webui-port", str(free_port()), "--work-dir", wdir)
        deadline = time.monotonic() + timeout
        while cluster.alive_workers() < workers:
            if any(p.poll() is not None for p in cluster.procs):
                raise RuntimeError("a cluster JVM exited: " + _logs(root))
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} workers did not register in {timeout}s: "
                                   + _logs(root))
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _logs(root: str) -> str:
    out = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".log"):
            with open(os.path.join(root, name), errors="replace") as f:
                out.append(f"--- {name}\n{f.read()[-3000:]}")
    return "\n".join(out)
