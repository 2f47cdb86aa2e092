"""Fixtures for the server's tests: a :class:`~kafkastore.server.KafkaServer` over a
temporary log directory on 127.0.0.1 (port 0: the server binds a free port itself), the
same as a process (``python -m kafkastore serve``, for ``kill -9`` and SIGTERM), and
helpers the client tests share.

The client tests of issue 29 use ``assign()``; consumer groups have their own tests
(``test_groups_*.py``, issue 30).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkastore.server import KafkaServer

import kafkastore  # noqa: E402

#: Where the kafkastore under test comes from (the installed wheel in CI, the source
#: tree in development): a child process imports that one, never the other.
PKG_ROOT = str(Path(kafkastore.__file__).resolve().parents[1])
LISTENING = re.compile(r"listening on (?P<host>[0-9.]+):(?P<port>\d+)")


@pytest.fixture
def make_server(tmp_path):
    """A factory: ``make_server(config=None, log_dir=None)`` starts a KafkaServer on
    127.0.0.1 port 0 over ``log_dir`` (default: a new directory under ``tmp_path``);
    every server it started is stopped at the end of the test."""
    started = []

    def make(config=None, log_dir=None):
        if log_dir is None:
            log_dir = tmp_path / f"logs{len(started)}"
        server = KafkaServer(str(log_dir), config=dict(config or {}), host="127.0.0.1", port=0)
        server.start()
        server.log_dir = str(log_dir)   # for the tests' own checks of the directory
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        server.stop()


@pytest.fixture
def kafka_server(make_server):
    """One KafkaServer over a fresh directory, per test (starting one costs a few ms)."""
    return make_server()


class ServerProcess:
    """``python -m kafkastore serve`` in a child process, with the port it bound."""

    def __init__(self, log_dir, config=(), timeout=60.0):
        self.log_dir = str(log_dir)
        args = [sys.executable, "-m", "kafkastore", "serve", self.log_dir,
                "--listen", "127.0.0.1:0"]
        for key, value in dict(config).items():
            args += ["--config", f"{key}={value}"]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [PKG_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=os.path.dirname(self.log_dir))
        self.stderr_lines: list[str] = []
        self._stderr = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr.start()
        line = self._first_line(timeout)
        m = LISTENING.search(line)
        if not m:
            self.close()
            raise AssertionError(f"kafkastore serve printed {line!r}, not 'listening on "
                                 f"HOST:PORT'; stderr: {''.join(self.stderr_lines)[-2000:]}")
        self.port = int(m["port"])
        self.bootstrap_servers = f"127.0.0.1:{self.port}"

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _first_line(self, timeout):
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            self.close()
            raise AssertionError(f"kafkastore serve did not say it was listening within "
                                 f"{timeout} s; stderr: {''.join(self.stderr_lines)[-2000:]}")
        return box[0]

    def kill(self):
        """``kill -9``: nothing of the process runs after it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(30)

    def close(self):
        """Kill if still running, and close the pipes."""
        self.kill()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def terminate(self, timeout=60.0):
        """SIGTERM; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


@pytest.fixture
def serve_process(tmp_path):
    """A factory: ``serve_process(config=None, log_dir=None)`` runs ``python -m kafkastore
    serve`` on 127.0.0.1 port 0; killed at the end of the test if still running."""
    procs = []

    def make(config=None, log_dir=None):
        p = ServerProcess(log_dir or tmp_path / f"plogs{len(procs)}", config or {})
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.close()


# -- helpers the client tests share ------------------------------------------------------

def wait_until(predicate, timeout=30.0, interval=0.05, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def workload(n, prefix="r", size=None):
    """``n`` (key, value) byte pairs, distinct, ``size`` bytes of value each if given."""
    out = []
    for i in range(n):
        v = f"{prefix}-value-{i}".encode()
        if size is not None:
            v = (v + b"." * size)[:size]
        out.append((f"{prefix}-key-{i}".encode(), v))
    return out


def write_transactions(log_dir, topic="txn"):
    """Write ``topic``-0 through the library (kafkastore's Log, before any server runs):
    a committed transaction, an aborted one, then another committed one, interleaved.
    Returns (committed records, aborted records) as lists of (key, value), in offset
    order."""
    from kafkastore.log import Log
    from kafkastore.records import encode_batch

    committed, aborted = [], []
    path = os.path.join(str(log_dir), f"{topic}-0")
    os.makedirs(str(log_dir), exist_ok=True)
    log = Log.open(path)
    try:
        now = int(time.time() * 1000)
        a_recs = [(b"a%d" % i, b"aborted-%d" % i) for i in range(3)]
        c1_recs = [(b"c%d" % i, b"committed-%d" % i) for i in range(3)]
        c2_recs = [(b"d%d" % i, b"committed-late-%d" % i) for i in range(2)]
        # producer 1000 commits, producer 2000 aborts; their batches interleave
        log.append_batches(encode_batch(c1_recs[:2], timestamp=now, is_transactional=True,
                                        producer_id=1000, producer_epoch=0, base_sequence=0))
        log.append_batches(encode_batch(a_recs, timestamp=now, is_transactional=True,
                                        producer_id=2000, producer_epoch=0, base_sequence=0))
        log.append_batches(encode_batch(c1_recs[2:], timestamp=now, is_transactional=True,
                                        producer_id=1000, producer_epoch=0, base_sequence=2))
        log.append_end_txn_marker(2000, 0, "ABORT", timestamp=now)
        log.append_end_txn_marker(1000, 0, "COMMIT", timestamp=now)
        log.append_batches(encode_batch(c2_recs, timestamp=now, is_transactional=True,
                                        producer_id=3000, producer_epoch=0, base_sequence=0))
        log.append_end_txn_marker(3000, 0, "COMMIT", timestamp=now)
        committed = c1_recs + c2_recs
        aborted = a_recs
    finally:
        log.close()
    return committed, aborted


def read_log_records(partition_dir):
    """Every (key, value) of a partition directory, opened with Log.open."""
    from kafkastore.log import Log

    log = Log.open(str(partition_dir))
    try:
        out = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            batches = list(log.read(offset, 1 << 20).batches())
            if not batches:
                break
            for batch in batches:
                if not batch.is_control:
                    out.extend((r.offset, r.key, r.value) for r in batch
                               if r.offset >= offset)
            offset = batches[-1].last_offset + 1
        return out
    finally:
        log.close()


def roundtrip(bootstrap, topic="alive", timeout=60.0):
    """Produce one fresh record (acks=all) with confluent-kafka and fetch it back from the
    offset its delivery report gave: the server answers Produce and Fetch."""
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    value = f"alive-{time.monotonic_ns()}".encode()
    reports = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, value=value, partition=0, on_delivery=lambda e, m: reports.append((e, m)))
    assert p.flush(timeout) == 0
    [(err, msg)] = reports
    assert err is None, err
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "alive",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0, msg.offset())])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = c.poll(0.5)
            if got is not None and not got.error():
                assert (got.offset(), got.value()) == (msg.offset(), value)
                return
        raise AssertionError(f"the record produced at offset {msg.offset()} did not come "
                             f"back within {timeout} s")
    finally:
        c.close()
