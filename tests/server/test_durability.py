"""Durability of ``kafkastore serve`` as a process: what a Produce with ``acks=all``
acknowledged is in the log directory after ``kill -9`` of the server, and the directory
opens with ``Log.open`` and with the CLI; SIGTERM is a clean shutdown (exit 0, the
clean-shutdown marker written, the recovery point at the log end, nothing to recover).

``kill -9`` is not a power loss: the page cache survives a process kill, so without
``flush.messages`` the acknowledged records are there too; only fsync before the ack
(``log.flush.interval.messages=1``) covers a machine that loses power, which no test
here can simulate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import PKG_ROOT, read_log_records, workload

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka.admin import AdminClient  # noqa: E402

pytestmark = pytest.mark.timeout(240)


def produce_acked(bs, topic, records, **conf):
    """Produce with acks=all; the (offset, key, value) of every acknowledged record."""
    acked, errors = [], []

    def report(err, msg):
        if err is None:
            acked.append((msg.offset(), msg.key(), msg.value()))
        else:
            errors.append(err)

    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2, **conf})
    for k, v in records:
        p.produce(topic, key=k, value=v, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return sorted(acked)


def cluster_id(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics("term", timeout=30).cluster_id


def cli(*args):
    env = dict(os.environ, PYTHONPATH=PKG_ROOT)
    done = subprocess.run([sys.executable, "-m", "kafkastore", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=PKG_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def check_directory(log_dir, topic, acked):
    """Every acknowledged record is in the directory: by Log.open (recovering it) and by
    the CLI's describe, consume and dump-log."""
    on_disk = read_log_records(os.path.join(log_dir, f"{topic}-0"))
    by_offset = {o: (k, v) for o, k, v in on_disk}
    missing = [(o, k, v) for o, k, v in acked if by_offset.get(o) != (k, v)]
    assert not missing, f"{len(missing)} acknowledged records are not in the log: " \
        f"{missing[:3]}"
    [described] = [json.loads(line) for line in
                   cli("describe", log_dir, "--topic", topic, "--json").splitlines()]
    assert described["log_end_offset"] >= acked[-1][0] + 1
    consumed = [json.loads(line) for line in
                cli("consume", log_dir, topic, "--format", "json", "--print-offset")
                .splitlines()]
    values = {c["offset"]: c["value"] for c in consumed}
    assert all(values.get(o) == v.decode() for o, _, v in acked)
    # dump-log reads every segment as Kafka's kafka-dump-log.sh would: valid batches
    # holding every acknowledged offset
    part = os.path.join(log_dir, f"{topic}-0")
    segments = sorted(os.path.join(part, n) for n in os.listdir(part) if n.endswith(".log"))
    dumped = [json.loads(line) for line in
              cli("dump-log", "--files", ",".join(segments), "--deep-iteration", "--json")
              .splitlines()]
    assert all(d["isValid"] for d in dumped if d["type"] == "batch")
    offsets = {d["offset"] for d in dumped if d["type"] == "record"}
    assert {o for o, _, _ in acked} <= offsets


@pytest.mark.parametrize("flush", [True, False], ids=["flush-every-message", "page-cache"])
def test_acks_all_survive_kill_9(serve_process, flush):
    config = {"log.flush.interval.messages": 1} if flush else {}
    server = serve_process(config)
    records = workload(3000, prefix="dur")
    acked = produce_acked(server.bootstrap_servers, "dur", records)
    assert len(acked) == 3000
    assert server.kill() == -9
    check_directory(server.log_dir, "dur", acked)


def stop_while_producing(server, topic, stop_server, at_least):
    """Stream produces (acks=all) to ``server`` from a thread; once ``at_least`` are
    acknowledged call ``stop_server()``; (what it returned, the acknowledged
    (offset, key, value), sorted)."""
    acked, stop = [], threading.Event()

    def report(err, msg):
        if err is None:
            acked.append((msg.offset(), msg.key(), msg.value()))

    p = ck.Producer({"bootstrap.servers": server.bootstrap_servers, "acks": "all",
                     "linger.ms": 1, "message.timeout.ms": 5000, "retries": 0})

    def run():
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=0,
                          on_delivery=report)
            except BufferError:
                pass
            p.poll(0.001)
            i += 1

    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < at_least and time.monotonic() < deadline:
            time.sleep(0.05)
        result = stop_server()
    finally:
        stop.set()
        t.join(30)
    p.flush(10)
    assert len(acked) >= at_least, f"{len(acked)} acknowledged in 60 s"
    return result, sorted(acked)


def test_kill_9_while_producing(serve_process):
    """The server is killed in the middle of a stream of produces: the acknowledged ones
    are all there (the ones not acknowledged may or may not be)."""
    server = serve_process()
    _, acked = stop_while_producing(server, "live", server.kill, 2000)
    check_directory(server.log_dir, "live", acked)


def test_sigterm_is_a_clean_shutdown(serve_process, tmp_path):
    server = serve_process()
    acked = produce_acked(server.bootstrap_servers, "term", workload(500, prefix="term"))
    first_cluster = cluster_id(server.bootstrap_servers)
    assert server.terminate() == 0, "".join(server.stderr_lines)[-2000:]
    log_dir = server.log_dir
    # the clean-shutdown marker, and the recovery point at the log end: nothing to recover
    assert os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    with open(os.path.join(log_dir, "recovery-point-offset-checkpoint")) as f:
        points = dict(((line.split()[0], int(line.split()[1])), int(line.split()[2]))
                      for line in f.read().splitlines()[2:] if line.strip())
    assert points[("term", 0)] == 500
    # meta.properties keeps the cluster id: a second server on the directory has it
    with open(os.path.join(log_dir, "meta.properties")) as f:
        meta = dict(line.split("=", 1) for line in f.read().splitlines()
                    if "=" in line and not line.startswith("#"))
    assert meta["cluster.id"] == first_cluster
    again = serve_process(log_dir=log_dir)
    assert cluster_id(again.bootstrap_servers) == first_cluster
    assert again.terminate() == 0
    check_directory(log_dir, "term", acked)


def test_sigterm_answers_in_flight_produces(serve_process):
    """SIGTERM while a producer streams: the server exits 0 and every produce it
    acknowledged is in the log."""
    server = serve_process()
    code, acked = stop_while_producing(server, "inflight", server.terminate, 1000)
    assert code == 0, "".join(server.stderr_lines)[-2000:]
    assert os.path.exists(os.path.join(server.log_dir, ".kafka_cleanshutdown"))
    check_directory(server.log_dir, "inflight", acked)
