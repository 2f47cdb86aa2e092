"""The server workload: records through ``kafkastore serve`` with confluent-kafka, beside
the library's own ``Log.append_batches`` and ``read`` + ``sendfile`` of the same batches.

Workload (issue 29's): ``n`` records of 100-byte values (no key), produced to one
partition with confluent-kafka (librdkafka: ``acks=all``, ``linger.ms=5``, batches up to
1 MiB, no compression) and consumed back from offset 0. The server runs as a child
process (``python -m kafkastore serve``), so its CPU time is its own: read from
``/proc/<pid>/stat`` before and after each phase (Linux; elsewhere it is left out). The
client's CPU time (this process, librdkafka's threads included) is measured beside it:
where the client's is the larger, the client, not the server, sets the pace.

Measured in the same run:

``produce``
    records/s and MB/s (value bytes) from the first ``produce()`` to ``flush()`` returning:
    every record acknowledged.
``fetch``
    from ``assign()`` at offset 0 to the ``n``-th record consumed.
``append_batches``
    ``Log.append_batches`` of the batches the producer sent (read back from the server's
    log, their base offsets reset to 0 as a producer sends them) into a fresh log: the
    library's own produce path without the network.
``read + sendfile``
    ``Log.read`` of the same log in 1 MiB slices, each sent with ``os.sendfile`` to a
    loopback socket a thread drains: the library's own fetch path without the protocol.
``latency``
    p50 / p99 of a one-record produce with ``acks=all`` (``linger.ms=0``; produce, then
    ``flush``), ``latency_samples`` times.

:func:`run_server_workload` returns a :class:`ServerResult`; ``kafkastore bench
--workloads server`` and the asv suite (``asv_bench/benchmarks/server.py``) call it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

__all__ = ["ServerResult", "run_server_workload", "require_confluent", "format_result",
           "served_topic"]

TOPIC = "bench"
VALUE_SIZE = 100
_LISTENING = re.compile(r"listening on [0-9.]+:(\d+)")


def require_confluent():
    """confluent_kafka, or ``NotImplementedError`` (asv's and the suite's skip)."""
    try:
        import confluent_kafka
    except ImportError as exc:
        raise NotImplementedError(f"confluent-kafka is not installed: {exc}") from exc
    return confluent_kafka


@dataclass
class ServerResult:
    """One run of the workload. Seconds are wall-clock; ``*_cpu_s`` CPU seconds (user +
    system): the server process's in that phase (None where ``/proc`` is missing), the
    client's (this process, librdkafka's threads included), and the library's (the
    thread running ``append_batches``, or sending with ``sendfile``)."""

    records: int
    value_bytes: int          # records x VALUE_SIZE: the MB/s numerator
    log_bytes: int            # the batches' bytes in the log
    produce_s: float
    fetch_s: float
    append_batches_s: float
    read_sendfile_s: float
    produce_cpu_s: float | None
    fetch_cpu_s: float | None
    produce_client_cpu_s: float   # this process (librdkafka's threads included)
    fetch_client_cpu_s: float
    latency_p50_ms: float
    latency_p99_ms: float
    latency_samples: int
    append_batches_cpu_s: float = float("nan")
    read_sendfile_cpu_s: float = float("nan")

    def rate(self, seconds: float) -> tuple[float, float]:
        """(MB/s of value bytes, records/s) for a phase that took ``seconds``."""
        return self.value_bytes / seconds / 1e6, self.records / seconds

    def cpu_per_gb(self, cpu_s: float | None) -> float | None:
        return None if cpu_s is None else cpu_s / (self.log_bytes / 1e9)

    def capacity(self, cpu_s: float | None) -> float | None:
        """MB/s of values the server would sustain if ``cpu_s`` were its only limit (one
        core, the client elsewhere): 1 / (its CPU seconds per byte). The end-to-end MB/s
        is the client's pace; this is the server's."""
        return None if not cpu_s else self.value_bytes / cpu_s / 1e6

    def capacity_ratios(self) -> tuple[float | None, float | None]:
        """(produce capacity / ``append_batches``' MB/s, fetch capacity / ``read`` +
        ``sendfile``'s): the issue's bars (0.5) for the server's own cost."""
        return (None if not self.produce_cpu_s else self.append_batches_s / self.produce_cpu_s,
                None if not self.fetch_cpu_s else self.read_sendfile_s / self.fetch_cpu_s)

    def as_dict(self) -> dict:
        return asdict(self)


def _cpu_meter(pid: int) -> tuple[float | None, frozenset, float | None]:
    """A reading of process ``pid``'s CPU time (user + system): (the sum of its threads'
    seconds on a CPU, their ids, the process's seconds in 10 ms ticks); None for what
    ``/proc`` does not have.

    Each thread's ``/proc/<pid>/task/<tid>/schedstat`` counts its time on a CPU in
    nanoseconds, exact where ``/proc/<pid>/stat`` rounds to ticks (a fetch of a million
    records costs the server a few ticks: the rounding was a third of what was
    measured). A thread that exits takes its schedstat with it, so :func:`_cpu_between`
    uses the ticks when the threads changed in a phase (the process's ticks keep its
    exited threads' time)."""
    task = f"/proc/{pid}/task"
    exact, tids = None, frozenset()
    try:
        tids = frozenset(os.listdir(task))
        total = 0
        for tid in tids:
            with open(f"{task}/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        exact = total / 1e9
    except (OSError, ValueError, IndexError):
        exact, tids = None, frozenset()
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return exact, tids, None
    fields = stat[stat.rindex(")") + 2:].split()   # after the command name
    ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return exact, tids, ticks


def _cpu_between(before: tuple, after: tuple) -> float | None:
    """The CPU seconds between two :func:`_cpu_meter` readings: the exact sum when the
    same threads lived at both, the ticks otherwise."""
    (exact0, tids0, ticks0), (exact1, tids1, ticks1) = before, after
    if exact0 is not None and exact1 is not None and tids0 == tids1 and tids0:
        return exact1 - exact0
    if ticks0 is None or ticks1 is None:
        return None
    return ticks1 - ticks0


def _start_server(log_dir: str, config: dict[str, object]) -> tuple[subprocess.Popen, int]:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    args = [sys.executable, "-m", "kafkastore", "serve", log_dir, "--listen", "127.0.0.1:0"]
    for key, value in config.items():
        args += ["--config", f"{key}={value}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env)
    line = proc.stdout.readline()
    m = _LISTENING.search(line)
    if not m:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"kafkastore serve did not start: {line!r}")
    return proc, int(m.group(1))


def _stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@contextlib.contextmanager
def served_topic(topic: str, partitions: int, config: dict[str, object] | None = None, *,
                 directory: str | None = None, prefix: str = "kafkastore-bench-"):
    """A ``kafkastore serve`` process over a temporary directory (under ``directory``)
    with ``topic`` created: yields its bootstrap address, then stops it and removes the
    directory. The workloads of the coordinators run in it."""
    tmp = tempfile.mkdtemp(prefix=prefix, dir=directory)
    try:
        proc, port = _start_server(os.path.join(tmp, "served"), dict(config or {}))
        try:
            bootstrap = f"127.0.0.1:{port}"
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                          replication_factor=1)])[topic].result(60)
            del admin   # (its connection closed before the server stops)
            yield bootstrap
        finally:
            _stop_server(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _produce(ck, bootstrap: str, n: int) -> float:
    """Produce ``n`` records and wait for every acknowledgement; the seconds it took.

    With ``produce_batch`` (confluent-kafka 2.11+) the records go to librdkafka 10,000 a
    call, without a Python delivery callback per record: the client's Python overhead
    (about a microsecond a call) would otherwise be what is measured, not the server.
    That every record arrived is checked afterwards from the high watermark."""
    value = b"v" * VALUE_SIZE
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "batch.size": 1 << 20, "compression.type": "none",
                     "queue.buffering.max.messages": 1_000_000,
                     "queue.buffering.max.kbytes": 1 << 20})
    chunk = 10_000
    batch = [{"value": value}] * chunk
    t0 = time.perf_counter()
    left = n
    while left:
        k = min(chunk, left)
        try:
            if hasattr(p, "produce_batch"):
                left -= p.produce_batch(TOPIC, batch[:k], partition=0)
            else:
                for _ in range(k):
                    p.produce(TOPIC, value, partition=0)
                left -= k
        except BufferError:
            pass
        p.poll(0)
    if p.flush(600) != 0:
        raise RuntimeError("records left unsent after 600 s")
    elapsed = time.perf_counter() - t0
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkastore-bench"})
    try:
        low, high = c.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=30)
    finally:
        c.close()
    if high - low != n:
        raise RuntimeError(f"{n} records produced, the log holds {high - low}")
    return elapsed


def _fetch(ck, bootstrap: str, n: int) -> float:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkastore-bench",
                     "enable.auto.commit": False, "enable.partition.eof": False,
                     "max.partition.fetch.bytes": 8 << 20, "fetch.max.bytes": 64 << 20,
                     # librdkafka stops prefetching when its queue holds 64 MB or 100,000
                     # messages, then waits fetch.queue.backoff.ms (1 s) before the next
                     # fetch: the wait, not the server, would be measured
                     "queued.max.messages.kbytes": 1 << 20,
                     "queued.min.messages": 10_000_000, "fetch.queue.backoff.ms": 0})
    try:
        got = 0
        t0 = time.perf_counter()
        c.assign([ck.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 600
        while got < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fetched {got} of {n} records in 600 s")
            for msg in c.consume(10_000, 1.0):
                if msg.error() is None:
                    got += 1
        return time.perf_counter() - t0
    finally:
        c.close()


def _latency(ck, bootstrap: str, samples: int) -> list[float]:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    p.produce(TOPIC, b"warm-up", partition=0)
    p.flush(30)
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        p.produce(TOPIC, b"x" * VALUE_SIZE, partition=0)
        p.flush(30)
        out.append(time.perf_counter() - t0)
    return sorted(out)


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _producer_batches(partition_dir: str, n: int) -> list[bytes]:
    """The first ``n`` records' batches as the producer sent them: read from the server's
    log and their base offsets set back to 0 (the 8 bytes the CRC does not cover)."""
    from kafkastore.log import Log

    out, count = [], 0
    log = Log.open(partition_dir)
    try:
        offset = 0
        while count < n:
            data = log.read(offset, 8 << 20).to_bytes()
            if not data:
                break
            pos = 0
            while pos + 12 <= len(data) and count < n:
                size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
                if pos + size > len(data):
                    break
                batch = data[pos:pos + size]
                last_delta = int.from_bytes(batch[23:27], "big")
                out.append(b"\0" * 8 + batch[8:])
                count += last_delta + 1
                offset = int.from_bytes(batch[:8], "big") + last_delta + 1
                pos += size
    finally:
        log.close()
    return out


def _library_append(directory: str, batches: list[bytes]) -> tuple[float, float]:
    """``Log.append_batches`` of each batch: (seconds, this thread's CPU seconds)."""
    from kafkastore.log import Log

    log = Log.open(directory)
    try:
        append = log.append_batches
        t0, c0 = time.perf_counter(), time.thread_time()
        for data in batches:
            append(data)
        return time.perf_counter() - t0, time.thread_time() - c0
    finally:
        log.close()


def _library_read_sendfile(directory: str) -> tuple[float, int]:
    """``Log.read`` in 1 MiB slices, each ``os.sendfile``-d to a drained loopback socket;
    (seconds, the sending thread's CPU seconds, bytes sent): the draining thread's CPU
    is the receiver's, as a client's is not the server's."""
    from kafkastore.log import Log

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()

    def drain():
        buf = bytearray(1 << 20)
        while receiver.recv_into(buf):
            pass

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    log = Log.open(directory)
    sent = 0
    try:
        offset, end = 0, log.log_end_offset
        out = sender.fileno()
        t0, c0 = time.perf_counter(), time.thread_time()
        while offset < end:
            sl = log.read(offset, 1 << 20)
            # only the complete batches (a fetch would also send the cut-off tail, which
            # the next read sends again: counted once here)
            batches = list(sl.batches(validate=False))
            fd, position = sl.file.fileno(), sl.position
            left = size = sum(b.size_in_bytes for b in batches)
            while left:
                k = os.sendfile(out, fd, position, left)
                position += k
                left -= k
            sent += size
            offset = batches[-1].last_offset + 1
        sender.shutdown(socket.SHUT_WR)
        cpu = time.thread_time() - c0
        t.join()
        return time.perf_counter() - t0, cpu, sent
    finally:
        log.close()
        sender.close()
        receiver.close()


def run_server_workload(records: int = 1_000_000, *, latency_samples: int = 1000,
                        directory: str | None = None,
                        config: dict[str, object] | None = None) -> ServerResult:
    """Run the workload once (see the module's docstring); files go to a temporary
    directory under ``directory``, removed at the end. ``config``: the server's
    ``--config`` keys. ``NotImplementedError`` without confluent-kafka."""
    ck = require_confluent()
    if records < 1:
        raise ValueError(f"records must be at least 1, not {records}")
    tmp = tempfile.mkdtemp(prefix="kafkastore-bench-server-", dir=directory)
    try:
        served = os.path.join(tmp, "served")
        proc, port = _start_server(served, dict(config or {}))
        bootstrap = f"127.0.0.1:{port}"
        try:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": bootstrap})   # (referenced while
            futures = admin.create_topics(                          # its futures run)
                [NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
            futures[TOPIC].result(60)
            cpu0, own0 = _cpu_meter(proc.pid), time.process_time()
            produce_s = _produce(ck, bootstrap, records)
            cpu1, own1 = _cpu_meter(proc.pid), time.process_time()
            fetch_s = _fetch(ck, bootstrap, records)
            cpu2, own2 = _cpu_meter(proc.pid), time.process_time()
            lat = _latency(ck, bootstrap, latency_samples)
        finally:
            _stop_server(proc)
        batches = _producer_batches(os.path.join(served, f"{TOPIC}-0"), records)
        log_bytes = sum(len(b) for b in batches)
        library = os.path.join(tmp, "library", f"{TOPIC}-0")
        append_s, append_cpu_s = _library_append(library, batches)
        read_s, read_cpu_s, _ = _library_read_sendfile(library)
        return ServerResult(
            records=records, value_bytes=records * VALUE_SIZE, log_bytes=log_bytes,
            produce_s=produce_s, fetch_s=fetch_s, append_batches_s=append_s,
            read_sendfile_s=read_s, append_batches_cpu_s=append_cpu_s,
            read_sendfile_cpu_s=read_cpu_s,
            produce_cpu_s=_cpu_between(cpu0, cpu1), fetch_cpu_s=_cpu_between(cpu1, cpu2),
            produce_client_cpu_s=own1 - own0, fetch_client_cpu_s=own2 - own1,
            latency_p50_ms=_percentile(lat, 0.50) * 1e3,
            latency_p99_ms=_percentile(lat, 0.99) * 1e3, latency_samples=len(lat))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def format_result(r: ServerResult, markdown: bool = False) -> str:
    """The run as a table: each phase's MB/s and records/s end to end, the server's and
    the client's CPU seconds per GB, the server's capacity (1 / its CPU per byte) and the
    ratios to the library's own path, and the produce latency."""
    def num(v, fmt="{:.2f}"):
        return "-" if v is None or v != v else fmt.format(v)

    rows = []
    for name, seconds, cpu_s, client_s, base_name, base_s, base_cpu_s in (
            ("produce (server)", r.produce_s, r.produce_cpu_s, r.produce_client_cpu_s,
             "Log.append_batches", r.append_batches_s, r.append_batches_cpu_s),
            ("fetch (server)", r.fetch_s, r.fetch_cpu_s, r.fetch_client_cpu_s,
             "read + sendfile", r.read_sendfile_s, r.read_sendfile_cpu_s)):
        mb, rec = r.rate(seconds)
        base_mb = r.rate(base_s)[0]
        capacity = r.capacity(cpu_s)
        rows.append((name, f"{mb:.1f}", f"{rec:,.0f}", num(r.cpu_per_gb(cpu_s)),
                     num(r.cpu_per_gb(client_s)), f"{base_s / seconds:.2f}x",
                     num(capacity, "{:.0f}"),
                     num(None if capacity is None else capacity / base_mb, "{:.2f}x")))
        rows.append((base_name, f"{base_mb:.1f}", f"{r.rate(base_s)[1]:,.0f}",
                     num(r.cpu_per_gb(base_cpu_s)), "-", "1.00x", "-", "1.00x"))
    header = ("phase", "MB/s", "records/s", "server CPU s/GB", "client CPU s/GB",
              "end to end / library", "server capacity MB/s", "capacity / library")
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(str(x[i])) for x in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
                 for row in [header, *rows]]
    lines.append(f"1-record produce, acks=all: p50 {r.latency_p50_ms:.2f} ms, "
                 f"p99 {r.latency_p99_ms:.2f} ms ({r.latency_samples} samples); "
                 f"{r.records:,} records of {VALUE_SIZE} B, {r.log_bytes / 1e6:.1f} MB of "
                 "batches")
    return "\n".join(lines)
