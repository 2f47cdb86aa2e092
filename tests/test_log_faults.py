"""Fault injection under kafkastore.log.Log through the kafkastore._fileio seam.

reliability.md F1-F4, F8 and C2-C4, C11: a FileSystem subclass (``_logtools.FaultFS``)
fails the n-th write with ENOSPC (before or after writing part of the data), writes
short, fails an fsync, or "crashes" (raises :class:`_logtools.Crash`) before a rename.
For each the log must raise a clear error, its end offset must never cover bytes that
were not written, and a crash image of the directory - every ``.log`` cut at a random
point of what was written after its last fsync - must reopen (unclean) to exactly a
prefix of what was appended that holds every record below the recovery point the log
claimed, with no corrupt or partial batch left on disk.

The oracle is a list of the records each successful append was given (with the offsets
it returned); expected values never come from reading the log under test back.
"""

from __future__ import annotations

import errno
import os
import random
import shutil

import pytest

from _logtools import (
    T0,
    Crash,
    FaultFS,
    Rec,
    abandon,
    crash_image,
    disk_records,
    installed,
    log_config,
    open_log,
    read_all,
    process_died,
)
from kafkastore.errors import KafkaStorageError, KafkaStoreError, LogClosedError
from kafkastore.records import encode_batch, scan_batches
from kafkastore.segment import LogSegment

CFG = dict(segment_bytes=700, index_interval_bytes=100, segment_index_bytes=4096)
CODECS = ("none", "gzip", "lz4", "zstd")


class Workload:
    """A deterministic sequence of appends, two-batch appends, flushes and rolls, with the
    model of what the log must hold. Errors injected by the file system are caught, checked
    and recorded; everything else propagates."""

    def __init__(self, log, seed: int) -> None:
        self.log = log
        self.rng = random.Random(seed)
        self.model: list[Rec] = []
        self.errors: list[BaseException] = []
        self.inflight: list = []
        self.ts = T0

    @property
    def end(self) -> int:
        return self.model[-1].offset + 1 if self.model else 0

    def _records(self):
        out = []
        for _ in range(self.rng.randint(1, 3)):
            self.ts += 1
            out.append((b"k%d" % self.ts, os.urandom(self.rng.randint(0, 40)), self.ts))
        return out

    def step(self) -> None:
        rng, log = self.rng, self.log
        kind = rng.choices(["append", "batches", "flush", "roll"], [14, 3, 2, 1])[0]
        codec = rng.choice(CODECS)
        before = log.log_end_offset
        assert before == self.end
        self.inflight = []  # records of the append under way (a crash may keep them)
        try:
            if kind == "append":
                recs = self.inflight = self._records()
                info = log.append(recs, compression=codec)
                assert info.first_offset == before
                self._add(before, recs)
            elif kind == "batches":
                first, second = self._records(), self._records()
                self.inflight = first + second
                # two produces, each batch as a producer sends it (base offset 0)
                data = (encode_batch(first, compression=codec) + encode_batch(second))
                log.append_batches(data)
                self._add(before, first + second)
            elif kind == "flush":
                log.flush()
                assert log.recovery_point == before
            else:
                log.roll()
                assert log.active_segment.base_offset == before
        except OSError as exc:
            # a typed error naming the log, and still an OSError with the call's errno
            assert isinstance(exc, KafkaStorageError) and exc.path, repr(exc)
            inflight, self.inflight = self.inflight, []
            self.errors.append(exc)
            assert exc.errno in (errno.ENOSPC, errno.EIO, errno.ENOMEM) \
                or "progress" in str(exc), exc
            after = log.log_end_offset
            if exc.errno == errno.ENOMEM and after == before + len(inflight) > before:
                # an index map failed after the data was written: the append is whole
                self._add(before, inflight)
            elif kind == "batches" and after != before:
                # the first of two batches reached the file before the failure
                assert after == before + len(first), (before, after)
                self._add(before, first)
            else:
                assert after == before, "LEO moved past a failed write"
        self.inflight = []
        assert log.log_end_offset == self.end

    def _add(self, first_offset, recs):
        self.model += [Rec(first_offset + i, k, v, ts) for i, (k, v, ts) in enumerate(recs)]

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()


def check_crash_recovery(tmp_path, log, fs, model, rng, label, modes=("all", "random", "none")):
    """Build crash images of ``log`` and reopen each, unclean, with recovery point 0 and
    with the log's claimed recovery point (as a checkpoint would hold it)."""
    claim = log.recovery_point
    claimed = sum(1 for r in model if r.offset < claim)
    for mode in modes:
        for rp in sorted({0, claim}):
            dst = tmp_path / f"crash-{label}-{mode}-{rp}"
            cuts = crash_image(log.dir, dst, fs, rng, mode)
            with installed(FaultFS()):
                recovered = open_log(dst, recovery_point=rp, had_clean_shutdown=False, **CFG)
                try:
                    got = read_all(recovered)
                    assert got == model[:len(got)], (mode, rp, cuts)
                    assert len(got) >= claimed, (
                        f"lost records below the recovery point {claim}: kept {len(got)} of "
                        f"{claimed} ({mode}, cuts {cuts})")
                    if mode == "none":
                        assert got == model
                    # an empty segment file past the cut (a roll whose flush failed) may
                    # keep the end offset above the last record, never above the old end
                    end = got[-1].offset + 1 if got else 0
                    assert end <= recovered.log_end_offset <= log.log_end_offset
                    assert recovered.recovery_point <= recovered.log_end_offset
                finally:
                    recovered.close()
            assert disk_records(dst) == got
            shutil.rmtree(dst)


def check_clean_reopen(log, model):
    log.close()
    with installed(FaultFS()):
        again = open_log(log.dir, **CFG)
        try:
            assert read_all(again) == model
        finally:
            again.close()
    assert disk_records(log.dir) == model


def count_calls(tmp_path, op: str, steps: int, seed: int, *, after_open: bool = False) -> int:
    """How many ``op`` calls the workload makes without faults, the open's included
    unless ``after_open``. The directory is named as the faulted runs' are (a new
    partition's open writes partition.metadata)."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / f"{op}-0", **CFG)
        opened = fs.calls[op] if after_open else 0
        Workload(log, seed).run(steps)
        n = fs.calls[op] - opened
        log.close()
    return n


# -- writes ----------------------------------------------------------------------------------

STEPS = 30


@pytest.mark.parametrize("action", ["enospc", "partial-enospc", "zero"])
def test_write_failure_at_every_write(tmp_path, action):
    """reliability.md F2/F8: fail the n-th pwrite, for every n the workload reaches. The
    append raises (ENOSPC, or "no progress" for a 0-byte write), LEO stays at the end of
    what was fully written, the log keeps working once the disk has room again, and crash
    images and a clean reopen give back the model."""
    seed = 11
    total = count_calls(tmp_path, "pwrite", STEPS, seed)
    assert total > 20
    rng = random.Random(action)
    for n in range(1, total + 1):
        fs = FaultFS({"pwrite": {n: action}})
        with installed(fs):
            log = open_log(tmp_path / f"{action}-{n}", **CFG)
            work = Workload(log, seed)
            work.run(STEPS)
            assert fs.fired, f"fault {n} never fired"
            assert len(work.errors) == 1, work.errors
            assert read_all(log) == work.model
            if n % 3 == 0:
                check_crash_recovery(tmp_path, log, fs, work.model, rng, f"{action}-{n}",
                                     modes=("random",))
            check_clean_reopen(log, work.model)


def test_short_writes_are_completed(tmp_path):
    """reliability.md F3: every write returns half of what it was given; the log loops to
    completion and nothing is lost or torn."""
    fs = FaultFS({"pwrite": {n: "short" for n in range(1, 10_000)}})
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        work = Workload(log, 3)
        work.run(STEPS)
        assert work.errors == []
        assert fs.fired
        assert read_all(log) == work.model
        check_crash_recovery(tmp_path, log, fs, work.model, random.Random(3), "short")
        check_clean_reopen(log, work.model)


def test_enospc_while_writing_the_clean_shutdown_marker(tmp_path):
    """close() writes the marker last, after every segment was flushed and closed: a
    failure there raises, and the data is all there on the next open."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        work = Workload(log, 5)
        work.run(STEPS)
        fs.faults["write"] = {fs.calls["write"] + 1: "enospc"}
        with pytest.raises(OSError) as info:
            log.close()
        assert info.value.errno == errno.ENOSPC
        assert log.closed
    with installed(FaultFS()):
        again = open_log(tmp_path / "log", **CFG)
        assert read_all(again) == work.model
        again.close()


# -- fsync -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["fsync", "fsync_dir"])
def test_fsync_failure_at_every_fsync(tmp_path, op):
    """reliability.md F1/F7: fail the n-th fsync (of a file or of the directory). The
    operation raises EIO, the recovery point does not move past what was durable, and crash
    images that drop every unsynced byte still hold everything below the recovery point
    the log claims."""
    seed = 21
    # the workload's fsyncs, counted from after the open (a failed fsync in the open
    # fails the open: test_partition_metadata_create.py)
    total = count_calls(tmp_path, op, STEPS, seed, after_open=True)
    assert total >= 3
    rng = random.Random(op)
    for n in range(1, total + 1):
        fs = FaultFS()
        with installed(fs):
            log = open_log(tmp_path / f"{op}-{n}", **CFG)
            fs.faults[op] = {fs.calls[op] + n: "eio"}
            work = Workload(log, seed)
            while not fs.fired:
                rp_before = log.recovery_point
                work.step()
            assert len(work.errors) == 1 and work.errors[0].errno == errno.EIO
            assert log.recovery_point == rp_before, "recovery point moved on a failed fsync"
            assert read_all(log) == work.model
            check_crash_recovery(tmp_path, log, fs, work.model, rng, f"{op}-{n}",
                                 modes=("all", "random"))
            abandon(log)


def test_fsync_failure_during_close(tmp_path):
    """An fsync failure in close() raises; without the marker the next open recovers and
    keeps every record below the recovery point claimed before."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        work = Workload(log, 8)
        work.run(STEPS)
        claim = log.recovery_point
        fs.faults["fsync"] = {fs.calls["fsync"] + 1: "eio"}
        with pytest.raises(OSError):
            log.close()
        assert log.closed
    assert not os.path.exists(tmp_path / "log" / ".kafka_cleanshutdown")
    with installed(FaultFS()):
        again = open_log(tmp_path / "log", **CFG)
        got = read_all(again)
        assert got == work.model[:len(got)]
        assert len(got) >= sum(1 for r in work.model if r.offset < claim)
        again.close()
    abandon(log)


def test_failed_fsync_fails_the_log(tmp_path):
    """reliability.md F1 and 1.1 item 8 (Kafka: an IOException takes the log dir offline):
    after an fsync failed, the kernel may have dropped the dirty pages, so a later flush
    must not report them durable; appends and flushes raise from then on and the recovery
    point stays where it was."""
    fs = FaultFS({"fsync": {1: "eio"}})
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        log.append([(b"k", b"v", T0)])
        with pytest.raises(KafkaStorageError) as first:
            log.flush()
        assert first.value.errno == errno.EIO
        assert log.recovery_point == 0
        with pytest.raises(LogClosedError, match="offline after a failed write"):
            log.flush()
        with pytest.raises(LogClosedError, match="never retried"):
            log.append([(b"k2", b"v2", T0)])
        assert log.recovery_point == 0
        abandon(log)


# -- crash images without faults --------------------------------------------------------------


@pytest.mark.parametrize("preallocate", [False, True])
def test_crash_images_of_a_running_log(tmp_path, preallocate):
    """reliability.md C2-C4: crash images taken at many points of a workload (torn
    tails, whole unsynced tails lost, preallocated zeros) reopen to a prefix that keeps
    everything below the claimed recovery point."""
    cfg = dict(CFG, preallocate=preallocate)
    fs = FaultFS()
    rng = random.Random(preallocate)
    with installed(fs):
        log = open_log(tmp_path / "log", **cfg)
        work = Workload(log, 31)
        for i in range(6):
            work.run(8)
            check_crash_recovery(tmp_path, log, fs, work.model, rng, f"{preallocate}-{i}")
        check_clean_reopen(log, work.model)


def test_process_crash_at_every_change(tmp_path):
    """reliability.md F8/C11, the process dies (no power loss: what was written stays):
    for every n, stop before the n-th change the workload makes to the file system (a
    write, fsync, truncation, rename, deletion or file creation, opening included), then
    open the directory with a fresh Log without closing the old one. Every append that
    returned is there; of the one under way, at most whole batches."""
    seed, steps = 41, 20
    total = count_calls(tmp_path, "any", steps, seed)
    assert total > 30
    for n in range(1, total + 2):
        d = tmp_path / f"any-{n}"
        fs = FaultFS({"any": {n: "crash"}})
        log = work = None
        with installed(fs):
            try:
                log = open_log(d, **CFG)
                work = Workload(log, seed)
                work.run(steps)
            except Crash:
                pass
        if log is not None:
            abandon(log)
        if n == total + 1:
            assert not fs.fired, "the workload changed more than counted"
        model = work.model if work is not None else []
        inflight = work.inflight if work is not None else []
        with installed(FaultFS()):
            again = open_log(d, **CFG)
            try:
                got = read_all(again)
                assert got[:len(model)] == model, n
                extra = [(r.key, r.value, r.timestamp) for r in got[len(model):]]
                assert extra == inflight[:len(extra)], n
                assert [r.offset for r in got] == list(range(len(got))), n
            finally:
                again.close()
        assert disk_records(d) == got


# -- crash before a rename (or any other change) ---------------------------------------------------------------------


def _prepared(tmp_path, name, n_segments=4, per_segment=5):
    """A flushed log of ``n_segments`` segments of ``per_segment`` one-record batches."""
    log = open_log(tmp_path / name, **CFG)
    model = []
    for i in range(n_segments * per_segment):
        if i and i % per_segment == 0:
            log.roll()
        log.append([(b"k%d" % i, b"v%d" % i, T0 + i)])
        model.append(Rec(i, b"k%d" % i, b"v%d" % i, T0 + i))
    log.flush()
    assert [s.base_offset for s in log.segments] == list(range(0, n_segments * per_segment,
                                                               per_segment))
    return log, model


def _crash_during(tmp_path, name, operation, n, op="rename"):
    """Run ``operation(log)`` on a fresh prepared log, crashing before its n-th ``op``
    (``"any"``: its n-th change to the file system of any kind); reopen the directory
    with a new Log without closing the old one. None if there are fewer such calls."""
    fs = FaultFS()
    with installed(fs):
        log, model = _prepared(tmp_path, f"{name}-{n}")
        fs.faults[op] = {fs.calls[op] + n: "crash"}
        try:
            operation(log)
        except Crash:
            pass
        else:
            fs.faults.clear()
            log.close()
            return None
    process_died(log)
    try:
        with installed(FaultFS()):
            again = open_log(log.dir, **CFG)
            got = read_all(again)
            end, start = again.log_end_offset, again.log_start_offset
            assert disk_records(log.dir) == got  # every file parses to its end
            again.close()
    finally:
        abandon(log)
    return model, got, start, end


def _each_crash_point(tmp_path, name, operation, op="any"):
    results = []
    for n in range(1, 200):
        out = _crash_during(tmp_path, name, operation, n, op)
        if out is None:
            break
        results.append((n, *out))
    assert results, "the operation changes nothing"
    return results


def test_crash_in_delete_segments(tmp_path):
    """Retention's deletion renames each segment's files to .deleted: a crash before any
    of those renames (or any other change) leaves, after reopening, the records from one of the old segment
    boundaries on - a suffix of the log, no holes, the end unchanged."""
    def op(log):
        log.delete_segments(log.segments[:3])

    for n, model, got, start, end in _each_crash_point(tmp_path, "delete", op):
        assert end == model[-1].offset + 1, n
        assert got and got[0].offset in (0, 5, 10, 15), n
        assert got == [r for r in model if r.offset >= got[0].offset], n
        assert start == got[0].offset


def test_crash_when_rolling_an_empty_active_segment(tmp_path):
    """roll() over an empty active segment renames it .deleted: a crash there loses
    nothing."""
    def op(log):
        log.roll()  # a new, empty active segment at 20
        log.roll()  # replaces it

    for n, model, got, start, end in _each_crash_point(tmp_path, "roll", op):
        assert got == model, n
        assert end == 20, n


def test_crash_in_truncate_to(tmp_path):
    """A crash in the middle of truncate_to must leave a prefix of the log (the records
    below the target, and possibly some of those above it that were still to be
    removed), never a log with a hole."""
    def op(log):
        log.truncate_to(7)

    for n, model, got, start, end in _each_crash_point(tmp_path, "truncate", op):
        assert got == model[:len(got)], (n, [r.offset for r in got])
        assert len(got) >= 7, n
        assert end == (got[-1].offset + 1), n


def test_crash_in_truncate_fully_and_start_at(tmp_path):
    """kafka-storage.md 5.8: the new empty segment is created before the last old one
    is removed, so a crash leaves either old records ending at the old end offset, or
    the new empty log at the new offset - the end offset never goes back below both."""
    def op(log):
        log.truncate_fully_and_start_at(100)

    for n, model, got, start, end in _each_crash_point(tmp_path, "fully", op):
        assert end in (20, 100), (n, end)
        if got:
            assert got == [r for r in model if r.offset >= got[0].offset], n
            assert got[-1].offset == 19


def test_crash_during_recovery_of_a_swap_is_idempotent(tmp_path):
    """reliability.md C11 / kafka-storage.md 5.10 step 4: a crash while open() renames
    .swap files into place; the next open finishes the job with the same result."""
    fs = FaultFS()
    with installed(fs):
        log, model = _prepared(tmp_path, "base", n_segments=3)
        log.close()
    base = tmp_path / "base"
    os.unlink(base / ".kafka_cleanshutdown")
    # a finished cleaner round of segments 0 and 5 into one segment: all .swap, old untouched
    seg = LogSegment.open(str(base), 0, log_config(**CFG), suffix=".swap")
    for name in ("00000000000000000000.log", "00000000000000000005.log"):
        data = (base / name).read_bytes()
        scan = scan_batches(data)
        for pos, size, last, ts in zip(scan.position, scan.size, scan.last_offset,
                                       scan.max_timestamp):
            seg.append(int(last), int(ts), int(last), data[int(pos):int(pos + size)])
    seg.on_become_inactive_segment()
    seg.close()
    n = 0
    while True:
        n += 1
        d = tmp_path / f"open-{n}"
        shutil.copytree(base, d)
        crashing = FaultFS({"rename": {n: "crash"}})
        with installed(crashing):
            try:
                first = open_log(d, **CFG)
            except Crash:
                first = None
        if first is not None:
            first.close()
            break
        with installed(FaultFS()):
            again = open_log(d, **CFG)
            assert [s.base_offset for s in again.segments] == [0, 10]
            assert read_all(again) == model
            again.close()
        assert not [x for x in os.listdir(d) if x.endswith((".swap", ".cleaned"))]
    assert n > 1, "open() renamed nothing"


def test_roll_after_delete_records_makes_the_rolled_segment_durable(tmp_path):
    """kafka-storage.md 5.4: a roll fsyncs every segment below the new one, then moves the
    recovery point. delete_records raises the recovery point without an fsync (5.8); that
    must not let the roll skip the fsync of the segment it closes. Otherwise a crash
    leaves that segment torn below the recovery point, where recovery does not look, and
    a later full recovery truncates it and deletes every later segment: records that
    were flushed are lost."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        log.append([(b"a", b"0", T0), (b"b", b"1", T0)])
        log.delete_records(2)
        log.roll()
        for seg in log.segments[:-1]:
            durable, size = fs.unsynced(seg.log.path)
            assert durable == size, f"{seg!r} not fsynced by the roll"
        flushed = []
        for i in range(2, 6):
            log.append([(b"k%d" % i, b"v%d" % i, T0 + i)])
            flushed.append(Rec(i, b"k%d" % i, b"v%d" % i, T0 + i))
        log.flush()
        claim = log.recovery_point
        cuts = crash_image(log.dir, tmp_path / "crash", fs, random.Random(0), "all")
        abandon(log)
    # a crash state the fsyncs allow: segment 0's unsynced batch torn in its middle
    durable, _, size = cuts[f"{0:020d}.log"]
    if durable < size:
        with open(tmp_path / "crash" / f"{0:020d}.log", "wb") as f:
            f.write(open(os.path.join(log.dir, f"{0:020d}.log"), "rb").read()[:size // 2])
    with installed(FaultFS()):
        # first open with the checkpointed recovery point, then one without it
        again = open_log(tmp_path / "crash", recovery_point=claim, log_start_offset=2, **CFG)
        assert read_all(again) == flushed
        again.close()
        os.unlink(tmp_path / "crash" / ".kafka_cleanshutdown")
        again = open_log(tmp_path / "crash", log_start_offset=2, **CFG)
        assert read_all(again) == flushed
        again.close()


# -- failed renames and maps (issue 8: injected errors) ----------------------------------------


def test_failed_rename_at_every_rename_of_retention(tmp_path):
    """Retention renames each deleted segment's files to .deleted: fail the n-th rename
    with EIO. The call raises KafkaStorageError (an OSError with the errno and path), and
    a reopen gives a suffix of the log: no hole, the end unchanged."""
    n = 1
    while True:
        fs = FaultFS()
        with installed(fs):
            log, model = _prepared(tmp_path, f"rename-{n}")
            fs.faults["rename"] = {fs.calls["rename"] + n: "eio"}
            try:
                log.delete_segments(log.segments[:3])
            except KafkaStorageError as exc:
                assert exc.errno == errno.EIO and exc.path
            else:
                assert not fs.fired
                log.close()
                break
            abandon(log)
        with installed(FaultFS()):
            again = open_log(log.dir, **CFG)
            got = read_all(again)
            assert got == model[len(model) - len(got):], n
            assert again.log_end_offset == model[-1].offset + 1
            again.close()
        n += 1
    assert n > 3


def test_failed_mmap_raises_a_typed_error_and_reopens(tmp_path):
    """reliability.md F6: fail the n-th mmap of an index (ENOMEM) for every n a
    workload reaches: the operation under way raises KafkaStorageError, never a crash,
    and the log reopens to a prefix of what was appended that keeps every record below
    the recovery point it had reached. (Until then an index whose remap failed stays
    closed: lookups in it raise IndexClosedError.)"""
    seed, steps = 13, 25
    total = count_calls(tmp_path, "mmap", steps, seed)
    assert total > 3
    for n in range(1, total + 1):
        fs = FaultFS({"mmap": {n: "enomem"}})
        claim, log, work = 0, None, None
        with installed(fs):
            try:
                log = open_log(tmp_path / f"mmap-{n}", **CFG)
                work = Workload(log, seed)
                for _ in range(steps):
                    claim = log.recovery_point
                    work.step()          # catches and checks the KafkaStorageError
                    if work.errors:
                        assert work.errors[0].errno == errno.ENOMEM
                        break
                    read_all(log)
            except KafkaStorageError as exc:   # open, or a read that mapped an index
                assert exc.errno == errno.ENOMEM, repr(exc)
            model = work.model if work is not None else []
            assert fs.fired, n
            if log is not None:
                abandon(log)
        with installed(FaultFS()):
            again = open_log(tmp_path / f"mmap-{n}", **CFG)
            got = read_all(again)
            assert got[:len(model)] == model[:len(got)], n
            assert len(got) >= sum(1 for r in model if r.offset < claim), n
            again.close()
