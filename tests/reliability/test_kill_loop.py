"""``kill -9`` loops (issue 8; docs reference: reliability.md §3 "kill -9 crash loops",
§5.2 C1/C11, §5.4 "Ack protocol for crash loops").

Each cycle starts ``_kill_child.py`` (same interpreter and environment, so the same
backend), which opens a log directory, appends deterministic records with every codec and
acknowledges an offset on its stdout only after ``flush()`` returned. The parent SIGKILLs
it at a varied moment (during ``Log.open`` and its recovery, after the k-th ack, after a
random delay, between the start and the end of an explicit roll), reads every ack and then,
most cycles, reopens the directory in this process (unclean: the child never closed it)
and checks:

* ``Log.open`` succeeds and the log starts at offset 0 (nothing is ever deleted here);
* the log end offset is at least every offset acknowledged so far in this directory and
  at least the end offset the last verified reopen saw (it never goes backwards);
* the records are exactly offsets ``0 .. LEO-1``: no gap, no duplicate, each equal byte for
  byte (key, value, timestamp, headers) to :func:`_kill_child.expected_record`, read both
  through :meth:`Log.read` (the indexes; whole scans and point lookups) and straight from
  the ``.log`` files after the close (CRC-checked, every file parsed to its end);
* the producer state knows the child's producer at the last batch's sequence (its
  snapshots and their replay survived the kill), and every batch's leader epoch is the
  one ``leader-epoch-checkpoint`` gives for its offset;
* after the close, only segment files, producer snapshots, the leader-epoch checkpoint
  (and the clean-shutdown marker) are left, every snapshot readable.

Some cycles skip the check, or close the reopened log without the clean-shutdown marker,
so that the next child starts with a recovery, which the parent may then kill: recovery of
a killed recovery. A directory is used for a few cycles, then a fresh one starts.

Sizes: the short tier runs up to 150 cycles within about 40 s (at least 40 cycles), the
long tier 20,000. Figures: ``kill -9 cycles``, kills that landed in ``Log.open`` (and in
its recovery) or inside an explicit roll, acknowledgements received, reopens verified,
records (and acknowledged records) verified, batches read back from disk.

``KAFKASTORE_KILL_SEED`` fixes the parent's choices (the kill moments stay real-time). A
failing cycle names its seed, cycle, kill plan, the child's output and stderr, and the
directory listing; the crash image it failed on (the directory as the kill left it,
before the parent's reopen recovered it) is kept under the test's ``tmp_path``.
"""

from __future__ import annotations

import math
import os
import random
import re
import select
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from _kill_child import CODECS, NEVER_EXPIRE, PRODUCER_ID, expected_record, leader_epoch
from _reliability import tiered

import kafkastore
from kafkastore.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME
from kafkastore.log import CLEAN_SHUTDOWN_FILE, Log
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME
from kafkastore.producer_state import read_snapshot
from kafkastore.records import CompressionType, iter_batches, scan_batches

CHILD = Path(__file__).with_name("_kill_child.py")
#: SIGKILL cycles in all; each directory lives for CYCLES_PER_DIR of them (or until its
#: log passes MAX_RECORDS_PER_DIR), so every cycle re-reads a small log.
CYCLES = tiered(150, 20000)
#: The short tier stops at the first directory boundary after TIME_BUDGET seconds (once it
#: ran MIN_CYCLES): on a loaded 2-CPU machine a child's start alone can take 0.4 s. The
#: figures count the cycles that ran.
TIME_BUDGET = tiered(40.0, None)
MIN_CYCLES = 40
CYCLES_PER_DIR = (3, 10)
MAX_RECORDS_PER_DIR = 3000
#: How long to wait for a line the child must print (its start-up, an open) before failing:
#: a readiness wait, so it costs nothing on an idle machine and must cover a busy one (a
#: child's start-up, numpy and all, took several seconds beside a CPU-bound process).
PATIENCE = 120.0
#: A child running longer than this after its open is killed whatever its plan was.
MAX_RUN = 0.6
SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")


def _differs(offset: int, got, want) -> str:
    names = ("key", "value", "timestamp", "headers")
    fields = [f"{n} {g!r:.80} != {w!r:.80}" for n, g, w in zip(names, got, want) if g != w]
    return f"record {offset} differs from the expected one: " + "; ".join(fields)


def _norm(record):
    def b(x):
        return None if x is None else bytes(x)
    return (b(record.key), b(record.value), record.timestamp,
            tuple((k, b(v)) for k, v in record.headers))


class CycleFailure(AssertionError):
    pass


class Child:
    """One run of ``_kill_child.py``: its lines as they arrive (with their arrival time)."""

    def __init__(self, args: list[str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, str(CHILD), *args],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err)
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buf = b""
        self.lines: list[tuple[float, str]] = []
        self.eof = False
        self.killed_at: float | None = None

    def _take(self, chunk: bytes, now: float) -> None:
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        self.lines.extend((now, line.decode()) for line in done)

    def pump(self, timeout: float) -> None:
        """Read what the child wrote, waiting at most ``timeout`` seconds for something."""
        if self.eof:
            time.sleep(max(0.0, timeout))
            return
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self.eof = True
        self._take(chunk, time.monotonic())

    def wait_for(self, pred, timeout: float) -> tuple[float, str] | None:
        """The first line (from the start) matching ``pred``, waiting up to ``timeout``;
        None on timeout. Raises if the child ends first (it must run until killed)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for item in self.lines[seen:]:
                if pred(item[1]):
                    return item
            seen = len(self.lines)
            if self.eof:
                raise CycleFailure("the child ended before it was killed")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.pump(left)

    def kill(self) -> int:
        """SIGKILL, reap, and read the pipe to its end; the return code."""
        self.killed_at = time.monotonic()
        self.proc.kill()
        rc = self.proc.wait()
        os.set_blocking(self.fd, True)
        while chunk := os.read(self.fd, 1 << 16):
            self._take(chunk, self.killed_at)
        self.eof = True
        self.proc.stdout.close()
        return rc

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError as exc:
            return f"(unreadable: {exc})"

    def words(self, kind: str) -> list[list[str]]:
        return [line.split()[1:] for _, line in self.lines if line.split()[:1] == [kind]]


def listing(directory: Path) -> str:
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        return f"({exc})"
    return "\n".join(f"  {n:40} {os.path.getsize(directory / n):>9}" for n in names) or "  (empty)"


def dir_config(rng: random.Random) -> dict:
    """A small-segment config, so the log rolls often (by size and by full index)."""
    return {
        "segment.bytes": rng.choice((4096, 8192, 16384, 65536)),
        "segment.index.bytes": rng.choice((96, 480, 4096, 1 << 20)),
        "index.interval.bytes": rng.choice((0, 256, 4096)),
        "preallocate": rng.random() < 0.4,
        "file.delete.delay.ms": rng.choice((0, 60000)),
        "flush.messages": rng.choice((1 << 62, 1 << 62, 25)),
        # records carry made-up timestamps from 2023: no time-based rolls
        "segment.ms": 1 << 62,
    }


def check_by_reads(log: Log, seed: int, rng: random.Random) -> None:
    """Offsets 0..LEO-1 through :meth:`Log.read`, whole and by point lookups."""
    leo = log.log_end_offset
    offset = 0
    max_bytes = rng.choice((1, 512, 1 << 20))
    while offset < leo:
        batches = list(log.read(offset, max_bytes).batches(validate=True))
        assert batches, f"Log.read({offset}) gave no batch below the LEO {leo}"
        for batch in batches:
            records = list(batch)
            assert batch.base_offset <= offset, (
                f"Log.read({offset}) starts at a batch based at {batch.base_offset}")
            for record in records:
                if record.offset < offset:
                    continue
                assert record.offset == offset, (
                    f"offset {record.offset} where {offset} was expected (gap or duplicate)")
                want = expected_record(seed, offset)
                assert _norm(record) == want, _differs(offset, _norm(record), want)
                offset += 1
            assert batch.last_offset == offset - 1, (
                f"batch {batch.base_offset}..{batch.last_offset} ended at {offset - 1}")
    assert offset == leo
    for _ in range(8 if leo else 0):
        target = rng.randrange(leo)
        records = [r for r in log.read(target, 1).records() if r.offset >= target][:1]
        assert records and records[0].offset == target, (
            f"point read of {target} gave {records[:1]!r}")
        want = expected_record(seed, target)
        assert _norm(records[0]) == want, "point read: " + _differs(
            target, _norm(records[0]), want)


def check_state(log: Log) -> None:
    """The producer state and the leader epochs of a reopened log (see the module)."""
    leo = log.log_end_offset
    entry = log.producer_state_manager.last_entry(PRODUCER_ID)
    if leo:
        assert entry is not None and entry.last_seq == leo - 1, (
            f"producer state {entry!r} after a reopen at LEO {leo}")
    cache = log.leader_epoch_cache
    offset = 0
    while offset < leo:
        batches = list(log.read(offset, 1 << 20).batches(validate=False))
        for batch in batches:
            want = leader_epoch(batch.base_offset)
            assert batch.partition_leader_epoch == want
            got = cache.epoch_for_offset(batch.base_offset)
            assert got == want, (f"leader-epoch-checkpoint gives epoch {got} for offset "
                                 f"{batch.base_offset}, the batch has {want}: {cache.entries}")
        offset = batches[-1].last_offset + 1


def check_files(directory: Path, seed: int, leo: int, codecs: Counter, *,
                zero_tail: bool = False) -> None:
    """The closed directory's ``.log`` files, straight from disk: CRC-valid to their end,
    each batch at or above its file's base, together exactly offsets 0..LEO-1. Counts
    the batches of each codec into ``codecs``.

    ``zero_tail``: the log was closed without a flush (``close_handlers``) and its
    segments are preallocated, so the active segment may end in the zeros of its
    preallocation, as Kafka leaves it (only a clean close trims it; the next open's
    recovery truncates them). Only zeros, and only in the last file."""
    names = sorted(os.listdir(directory))
    stray = [n for n in names if not SEGMENT_FILE.match(n)
             and n not in (CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT_FILENAME,
                           PARTITION_METADATA_FILENAME)]
    assert not stray, f"files left after the close: {stray}"
    for name in names:
        if name.endswith(".snapshot"):
            read_snapshot(str(directory / name))   # CRC-valid, or CorruptSnapshotError
    offset = 0
    logs = [name for name in names if name.endswith(".log")]
    for name in logs:
        base = int(name[:20])
        data = (directory / name).read_bytes()
        scan = scan_batches(data, validate=True)
        if zero_tail and name == logs[-1] and not data[scan.valid_bytes:].strip(b"\0"):
            data = data[:scan.valid_bytes]
            scan = scan_batches(data, validate=True)
        assert scan.error is None and scan.valid_bytes == len(data), (
            f"{name}: {len(data) - scan.valid_bytes} bad bytes at {scan.valid_bytes}"
            f" ({scan.error!r})")
        for batch in iter_batches(data, validate=True):
            assert batch.base_offset >= base, f"{name} holds batch {batch.base_offset}"
            codecs[CompressionType(batch.compression).name.lower()] += 1
            for record in batch:
                assert record.offset == offset, (
                    f"{name}: offset {record.offset} where {offset} was expected")
                want = expected_record(seed, offset)
                assert _norm(record) == want, f"{name}: " + _differs(
                    offset, _norm(record), want)
                offset += 1
    assert offset == leo, f"the files hold offsets 0..{offset - 1}, the log said LEO {leo}"


class Cycle:
    """What one cycle planned and saw, for the failure report."""

    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)

    def __repr__(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()
                         if k != "crash_listing")


@pytest.mark.timeout(tiered(600, 12 * 3600))
def test_kill_loop(tmp_path, figures):
    seed = int(os.environ.get("KAFKASTORE_KILL_SEED") or random.randrange(1 << 32))
    image = tmp_path / "crash-image"
    open_estimate = 0.02   # seconds from "open" to "ready" of an unclean open, learnt
    counts = dict.fromkeys(("cycles", "open kills", "recovery kills", "roll kills",
                            "reopens", "acked", "records", "acks"), 0)
    timing = dict.fromkeys(("start", "run", "verify"), 0.0)
    codecs: Counter = Counter()
    started = time.monotonic()

    directory = None
    cycles_left = 0
    next_mode = None
    child = None
    for cycle in range(CYCLES):
        if (TIME_BUDGET and cycles_left == 0 and cycle >= MIN_CYCLES
                and time.monotonic() - started > TIME_BUDGET):
            break
        # every choice of a cycle comes from (seed, cycle), whatever the earlier kills hit
        rng = random.Random(f"kill-loop:{seed}:{cycle}")
        if cycles_left == 0:
            if directory is not None:
                shutil.rmtree(directory)
            directory = tmp_path / f"log-{cycle:05d}"
            config = dir_config(rng)
            data_seed = rng.randrange(1 << 64)
            floor = 0          # every offset below it must survive
            max_ack = 0        # the highest offset acknowledged in this directory
            cycles_left = rng.randint(*CYCLES_PER_DIR)
        cycles_left -= 1
        if cycle == CYCLES - 1:
            cycles_left = 0    # the last cycle always ends with a verified reopen
        mode = next_mode or rng.choices(("open", "acks", "time", "roll"), (1, 4, 3, 2))[0]
        plan = {
            "child_seed": rng.randrange(1 << 32),
            "flush_p": rng.choice((0.05, 0.2, 0.5, 0.9)),
            "partial_flush_p": rng.choice((0.0, 0.15)),
            "roll_p": 0.15 if mode == "roll" else rng.choice((0.0, 0.0, 0.02)),
        }
        c = Cycle(seed=seed, cycle=cycle, dir=str(directory), config=config,
                  data_seed=data_seed, mode=mode, plan=plan, floor=floor, max_ack=max_ack)
        child = None
        try:
            t0 = time.monotonic()
            child = Child([str(directory), str(data_seed), _json(config), _json(plan)],
                          tmp_path / "child.stderr")
            opened = child.wait_for(lambda s: s.startswith("open "), PATIENCE)
            if opened is None:
                raise CycleFailure("the child never reached Log.open")
            backend, clean = opened[1].split()[1:3]
            assert backend == kafkastore.BACKEND, (
                f"the child runs the {backend} backend, the parent {kafkastore.BACKEND}")
            c.open_clean = clean
            t1 = time.monotonic()
            timing["start"] += t1 - t0
            if mode == "open":
                c.delay = rng.uniform(0, 1.3 * open_estimate)
                child.wait_for(lambda s: s.startswith("ready "), c.delay)
            else:
                ready = child.wait_for(lambda s: s.startswith("ready "), PATIENCE)
                if ready is None:
                    raise CycleFailure(f"Log.open did not return within {PATIENCE} s")
                if clean == "unclean":
                    took = ready[0] - opened[0]
                    open_estimate = 0.7 * open_estimate + 0.3 * took
                if mode == "acks":
                    c.k = rng.choice((1, 2, 3, 5, 8, 13, 30))
                    c.delay = rng.choice((0, rng.uniform(0, 0.003)))
                    child.wait_for(_nth("ack ", c.k), MAX_RUN)
                    time.sleep(c.delay)
                elif mode == "time":
                    c.delay = math.exp(rng.uniform(math.log(0.0005), math.log(0.4)))
                    child.wait_for(lambda s: False, c.delay)
                else:
                    c.j = rng.randint(1, 3)
                    c.delay = rng.choice((0, rng.uniform(0, 0.002)))
                    if child.wait_for(_nth("roll ", c.j), MAX_RUN):
                        time.sleep(c.delay)
            rc = child.kill()
            t2 = time.monotonic()
            timing["run"] += t2 - t1
            if rc != -9:
                raise CycleFailure(f"the child exited with {rc} instead of being killed")
            counts["cycles"] += 1

            # what the kill interrupted
            readies = child.words("ready")
            if not readies:
                counts["open kills"] += 1
                counts["recovery kills"] += clean == "unclean"
            rolls, rolled = child.words("roll"), child.words("rolled")
            counts["roll kills"] += len(rolls) > len(rolled)
            acks = [int(w[0]) for w in child.words("ack")]
            counts["acks"] += len(acks)
            c.acks = acks[-5:]
            c.lines = [line for _, line in child.lines[-12:]]
            if readies:
                start, end = map(int, readies[0])
                c.child_open = (start, end)
                assert start == 0, f"the child's open gave log start offset {start}"
                assert end >= floor, (
                    f"the child's open gave LEO {end}, below {floor} (lost records)")
            if acks:
                max_ack = max(max_ack, max(acks))
                floor = max(floor, max_ack)

            # the reopen, most cycles (always before leaving a directory)
            next_mode = rng.choices(("open", None), (1, 3))[0] if cycles_left else None
            c.reopen_skipped = rng.random() < 0.2 and cycles_left > 0
            unclean_close = next_mode == "open" or rng.random() < 0.2
            if c.reopen_skipped:
                continue   # the next child recovers what this one left
            shutil.rmtree(image, ignore_errors=True)
            if directory.exists():   # (a kill before Log.open made it leaves none)
                shutil.copytree(directory, image)
            c.crash_listing = listing(directory)
            log = Log.open(str(directory), config, producer_id_expiration_ms=NEVER_EXPIRE)
            try:
                leo = log.log_end_offset
                c.reopen = (log.log_start_offset, leo)
                assert log.log_start_offset == 0, f"log start offset {log.log_start_offset}"
                assert leo >= max_ack, (
                    f"acknowledged offsets lost: LEO {leo} < acknowledged {max_ack}")
                assert leo >= floor, f"LEO went backwards: {leo} < {floor}"
                check_by_reads(log, data_seed, random.Random(f"reads:{seed}:{cycle}"))
                check_state(log)
            finally:
                # unclean (no marker) when the next child should find a recovery to do
                if unclean_close:
                    c.closed = "unclean"
                    log.close_handlers()
                else:
                    c.closed = "clean"
                    log.close()
            check_files(directory, data_seed, leo, codecs,
                        zero_tail=unclean_close and config["preallocate"])
            floor = leo
            counts["reopens"] += 1
            timing["verify"] += time.monotonic() - t2
            counts["acked"] += max_ack
            counts["records"] += leo
            if leo > MAX_RECORDS_PER_DIR:
                cycles_left = 0
        except Exception as exc:
            if child is not None and child.proc.poll() is None:
                child.kill()
            raise CycleFailure(
                f"kill -9 loop failed: KAFKASTORE_KILL_SEED={seed} cycle {cycle}\n"
                f"{exc}\ncycle: {c!r}\nchild stderr:\n{child.stderr() if child else ''}\n"
                f"directory {directory} now:\n{listing(directory)}\n"
                f"crash image (as the kill left it, before the reopen) in {image}:\n"
                f"{getattr(c, 'crash_listing', '(not taken this cycle)')}") from exc
        finally:
            if child is not None:
                if child.proc.poll() is None:   # an interrupted run leaves no child behind
                    child.proc.kill()
                    child.proc.wait()
                if not child.proc.stdout.closed:
                    child.proc.stdout.close()
    if directory is not None:
        shutil.rmtree(directory)

    elapsed = time.monotonic() - started
    figures.add("kill -9 cycles", counts["cycles"])
    figures.add("kill -9 kills during Log.open", counts["open kills"])
    figures.add("kill -9 kills during an unclean Log.open (recovery)", counts["recovery kills"])
    figures.add("kill -9 kills during an explicit roll", counts["roll kills"])
    figures.add("kill -9 acknowledgements received", counts["acks"])
    figures.add("reopens verified after kill -9", counts["reopens"])
    figures.add("acknowledged records verified after kill -9", counts["acked"])
    figures.add("records verified after kill -9", counts["records"])
    figures.add("batches read back from disk after kill -9", sum(codecs.values()))
    print(f"kill -9 loop: seed {seed}, {counts} in {elapsed:.1f} s "
          f"({', '.join(f'{k} {v:.1f} s' for k, v in timing.items())}) "
          f"({counts['cycles'] / elapsed:.2f} cycles/s, backend {kafkastore.BACKEND}); "
          f"batches by codec {dict(codecs)}")
    # the loop must have exercised what it claims (a broken plan would pass vacuously)
    assert counts["reopens"] and counts["acked"]
    assert set(codecs) == set(CODECS), f"batches read back by codec: {dict(codecs)}"
    assert counts["open kills"] or CYCLES < 50


def _nth(prefix: str, n: int):
    seen = [0]

    def pred(line: str) -> bool:
        if line.startswith(prefix):
            seen[0] += 1
            return seen[0] >= n
        return False
    return pred


def _json(obj) -> str:
    import json
    return json.dumps(obj, sort_keys=True)
