"""Faults in the ``.index`` and ``.timeindex`` files of a log, through the kafkastore._fileio
seam (issue 3; reliability.md F1, F6, C2, C11, I1-I6).

The indexes are memory-mapped: appends write into the map and become durable only when the
map is msynced (or the file fsynced). ``_logtools.FaultFS`` models that: it keeps, per index
file, the image a crash keeps for sure, and ``crash_image`` gives each index file its
durable bytes and length, its current ones, or a mix sector by sector. The tests here fail
an msync, fail an ftruncate while an index is trimmed on roll, crash before an index
rename, and reopen crash images that lost unsynced index bytes. Whatever survives, a
reopened log must hold a prefix of what was appended (everything below the recovery
point it claimed), every index it kept must agree with its ``.log`` (an index is never
trusted beyond what was made durable), and every offset and timestamp lookup must be
right.

The oracle is the list of records each successful append was given; expected index
contents are derived from the ``.log`` bytes on disk, never from the index under test.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import struct

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
    is_index_file,
    open_log,
    read_all,
)

from kafkastore import _fileio
from kafkastore.errors import KafkaStoreError
from kafkastore.index import OffsetIndex, TimeIndex
from kafkastore.records import scan_batches

# An index entry for every batch after a segment's first, indexes of a few sectors, and a
# segment size that rolls every 25-40 batches.
CFG = {"segment_bytes": 3000, "index_interval_bytes": 0, "segment_index_bytes": 2048}
# Indexes so small that they fill up and force rolls (time index: 7 entries + the slot
# kept for the final entry), so a final entry often lands in the last slot.
SMALL = {"segment_bytes": 3000, "index_interval_bytes": 0, "segment_index_bytes": 96}
CODECS = ("none", "gzip", "lz4", "zstd")


class Workload:
    """Seeded appends (1-3 records of random bytes, strictly increasing timestamps),
    flushes and rolls, with the list of records the log was given. An OSError from the
    file system is recorded; the step must then have changed nothing, except an append
    whose batch reached the ``.log`` before the failure (the log then holds it whole and
    so does the model). Anything else raises."""

    def __init__(self, log, seed: int) -> None:
        self.log = log
        self.rng = random.Random(seed)
        self.model: list[Rec] = []
        self.errors: list[OSError] = []
        self.ts = T0

    def step(self) -> None:
        rng, log = self.rng, self.log
        kind = rng.choices(["append", "flush", "roll"], [16, 2, 1])[0]
        before = log.log_end_offset
        recs = []
        try:
            if kind == "append":
                for _ in range(rng.randint(1, 3)):
                    self.ts += 1
                    recs.append((b"k%d" % self.ts, os.urandom(rng.randint(0, 30)), self.ts))
                info = log.append(recs, compression=rng.choice(CODECS))
                assert info.first_offset == before
                self._add(before, recs)
            elif kind == "flush":
                log.flush()
                assert log.recovery_point == before
            else:
                log.roll()
        except OSError as exc:
            self.errors.append(exc)
            after = log.log_end_offset
            if recs and after != before:
                # the batch reached the .log before an index of a new segment failed to
                # open: the log keeps it and its end offset follows (Log._append_entries)
                assert after == before + len(recs), (before, after)
                self._add(before, recs)
            else:
                assert after == before, "the end offset moved on a failed step"

    def _add(self, first_offset, recs) -> None:
        self.model += [Rec(first_offset + i, k, v, ts) for i, (k, v, ts) in enumerate(recs)]

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()


# -- what a log must look like ----------------------------------------------------------------


def check_indexes(log) -> None:
    """Every entry of every segment's indexes agrees with the ``.log`` bytes on disk.

    Offset index entry ``(o, p)``: a batch starts at byte ``p`` and ends at offset ``o``
    (one entry per append, as the log writes and recovery rebuilds them). Time index entry
    ``(t, o)``: ``t`` is the largest timestamp of the batches up to the one ending at
    ``o``, and that batch holds it. A segment's largest timestamp (what retention and
    timestamp lookups use) is the largest timestamp of its data."""
    for seg in log.segments:
        with open(seg.log.path, "rb") as f:
            data = f.read(seg.size)
        scan = scan_batches(data, validate=True)
        assert scan.error is None and scan.valid_bytes == len(data), seg
        positions = [int(p) for p in scan.position]
        lasts = [int(x) for x in scan.last_offset]
        max_tss = [int(x) for x in scan.max_timestamp]
        ends_at = dict(zip(positions, lasts))
        running, best = {}, -1
        for last, ts in zip(lasts, max_tss):
            best = max(best, ts)
            running[last] = (best, ts)
        oidx, tidx = seg.offset_index, seg.time_index
        oidx.sanity_check(full=True)
        tidx.sanity_check(full=True)
        for n in range(oidx.entries):
            offset, position = oidx.entry(n)
            assert ends_at.get(position) == offset, (seg, n, (offset, position))
        for n in range(tidx.entries):
            timestamp, offset = tidx.entry(n)
            assert offset in running, (seg, n, (timestamp, offset))
            assert running[offset] == (timestamp, timestamp), (seg, n, (timestamp, offset))
        assert seg.max_timestamp_so_far() == (max(max_tss) if max_tss else -1), seg


def check_lookups(log, records: list[Rec]) -> None:
    """Every record is found by offset (through the offset index) and by its timestamp
    (through the time index, timestamps strictly increase); nothing past the last."""
    for r in records:
        batches = list(log.read(r.offset, 1).batches(validate=True))
        assert batches and batches[0].base_offset <= r.offset <= batches[0].last_offset, r
        found = log.offset_for_timestamp(r.timestamp)
        assert found is not None and (found.timestamp, found.offset) == (r.timestamp, r.offset)
    top = records[-1].timestamp if records else T0
    assert log.offset_for_timestamp(top + 1) is None


def reopen_and_check(path, model: list[Rec], claim: int, **kw) -> list[Rec]:
    """Open ``path`` with a fresh file system; the records must be a prefix of ``model``
    holding every record below ``claim``; indexes and lookups are checked. Returns them."""
    with installed(FaultFS()):
        log = open_log(path, **kw)
        try:
            got = read_all(log)
            assert got == model[:len(got)]
            assert len(got) >= sum(1 for r in model if r.offset < claim), (
                f"lost records below the recovery point {claim}: kept {len(got)}")
            check_indexes(log)
            check_lookups(log, got)
        finally:
            log.close()
    assert disk_records(path) == got
    return got


def index_files(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if is_index_file(n))


def lost_index_bytes(src, dst) -> int:
    """How many index files of the crash image ``dst`` differ from the live ones in ``src``."""
    differ = 0
    for name in index_files(dst):
        with open(os.path.join(src, name), "rb") as a, open(os.path.join(dst, name), "rb") as b:
            differ += a.read() != b.read()
    return differ


def check_crash_images(tmp_path, log, fs, model, rng, label, cfg, modes=("all", "random")):
    """Crash images of the running ``log``, each reopened unclean with recovery point 0
    and with the one the log claims. Returns how many images lost index bytes."""
    claim = log.recovery_point
    lost = 0
    for mode in modes:
        for rp in sorted({0, claim}):
            dst = tmp_path / f"crash-{label}-{mode}-{rp}"
            crash_image(log.dir, dst, fs, rng, mode)
            lost += lost_index_bytes(log.dir, dst) > 0
            reopen_and_check(dst, model, claim, recovery_point=rp, had_clean_shutdown=False,
                             **cfg)
            shutil.rmtree(dst)
    return lost


# -- the seam -----------------------------------------------------------------------------------


class Recording(_fileio.FileSystem):
    """Records the name of every seam operation."""

    def __init__(self) -> None:
        self.ops: list[str] = []

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if callable(attr) and name in _SEAM_OPS:
            ops = super().__getattribute__("ops")

            def call(*args, **kw):
                ops.append(name)
                return attr(*args, **kw)
            return call
        return attr


_SEAM_OPS = {name for name in vars(_fileio.FileSystem) if not name.startswith("_")}


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_index_file_io_goes_through_the_seam(tmp_path, cls):
    """Every file operation of an index uses the file system installed at the time of the
    call (not the one at import or construction), and lookups and appends use none."""
    first, second = Recording(), Recording()
    name = "00000000000000000000" + (".index" if cls is OffsetIndex else ".timeindex")
    with installed(first):
        idx = cls(tmp_path / name, 0, 4096)
    assert first.ops == ["open", "ftruncate", "fstat_size", "mmap", "close"]
    with installed(second):
        for i in range(50):
            if cls is OffsetIndex:
                idx.append(i, i * 10)
                assert idx.lookup(i) == (i, i * 10)
            else:
                idx.maybe_append(T0 + i, i)
                assert idx.lookup(T0 + i) == (T0 + i, i)
        assert second.ops == [], "the hot path went through the seam"
        idx.flush()
        assert second.ops == ["msync"]
        del second.ops[:]
        idx.trim_to_valid_size()
        assert second.ops == ["open", "ftruncate", "fsync", "mmap", "close"]
        del second.ops[:]
        idx.flush()  # the map covers the new length
        idx.change_file_suffix("", ".deleted")
        assert second.ops == ["msync", "rename"]
        del second.ops[:]
        idx.reset_size_to_max()
        idx.close()  # trimmed again: made durable
        assert second.ops == ["open", "ftruncate", "mmap", "close",
                              "open", "ftruncate", "fsync", "close"]
        del second.ops[:]
        again = cls(idx.path, 0, 4096, writable=False)
        again.close()  # read-only: nothing to write
        assert second.ops == ["open", "fstat_size", "mmap", "close"]
        del second.ops[:]
        assert again.delete_if_exists() is True
        assert second.ops == ["unlink"]
    assert first.ops == ["open", "ftruncate", "fstat_size", "mmap", "close"]


def test_close_syncs_a_final_entry_that_fills_the_index(tmp_path):
    """The final time index entry written on close may take the last slot, so close()
    does not trim; it must still make that entry durable (a crash after a clean shutdown
    would otherwise lose it, and the next clean open would trust the index without it)."""
    fs = FaultFS()
    path = tmp_path / "00000000000000000000.timeindex"
    with installed(fs):
        idx = TimeIndex(path, 0, 36)  # 3 slots, full at 2
        idx.maybe_append(T0, 0)
        idx.maybe_append(T0 + 1, 1)
        idx.flush()
        assert idx.is_full()
        idx.maybe_append(T0 + 5, 7, skip_full_check=True)
        assert idx.length == idx.size_in_bytes  # nothing to trim
        assert fs.durable_index(path) != path.read_bytes()
        idx.close()
    assert fs.durable_index(path) == path.read_bytes()
    with TimeIndex(path, 0, 36, writable=False) as reopened:
        assert reopened.last_entry == (T0 + 5, 7)


def test_a_trim_to_zero_bytes_is_durable(tmp_path):
    """An offset index with no entries is trimmed to 0 bytes on roll; with nothing to map
    no msync can cover that, so the trim itself must be fsynced. Otherwise a crash keeps
    the last length that was made durable - all zeros, which the weak sanity check of a
    segment below the recovery point accepts as hundreds of entries."""
    cfg = {**CFG, "index_interval_bytes": 4096}  # no offset index entry in small segments
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **cfg)
        log.append([(b"a", b"0", T0)])
        log.flush()  # the active index, 2048 bytes of zeros, is durable now
        log.append([(b"b", b"1", T0 + 1)])
        log.roll()
        log.append([(b"c", b"2", T0 + 2)])
        model = [Rec(0, b"a", b"0", T0), Rec(1, b"b", b"1", T0 + 1), Rec(2, b"c", b"2", T0 + 2)]
        first = log.segments[0]
        assert first.offset_index.length == 0
        assert fs.durable_index(first.offset_index_path) == b""
        claim = log.recovery_point
        assert claim == 2
        crash_image(log.dir, tmp_path / "crash", fs, random.Random(0), "all")
        abandon(log)
    got = reopen_and_check(tmp_path / "crash", model, claim, recovery_point=claim,
                           had_clean_shutdown=False, **cfg)
    assert got[:2] == model[:2]


# -- msync ----------------------------------------------------------------------------------


def test_failed_msync_fails_the_log(tmp_path):
    """reliability.md F1/F6, as a failed ``.log`` fsync: after an index msync failed the
    kernel may have dropped its dirty pages, so the log takes no more writes or flushes
    and the recovery point stays where it was."""
    fs = FaultFS({"msync": {1: "eio"}})
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        for i in range(5):
            log.append([(b"k%d" % i, b"v", T0 + i)])
        with pytest.raises(OSError) as info:
            log.flush()
        assert info.value.errno == errno.EIO
        assert fs.fired == [("msync", 1, "eio")]
        assert log.recovery_point == 0
        with pytest.raises((OSError, KafkaStoreError)):
            log.flush()
        with pytest.raises((OSError, KafkaStoreError)):
            log.append([(b"late", b"v", T0 + 9)])
        with pytest.raises((OSError, KafkaStoreError)):
            log.roll()
        assert log.recovery_point == 0 and log.log_end_offset == 5
        assert [r.offset for r in read_all(log)] == list(range(5))
        abandon(log)


def count_calls(tmp_path, op, steps, seed, cfg) -> int:
    """How many ``op`` calls the workload makes (opening and closing the log excluded)."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / f"count-{op}", **cfg)
        before = fs.calls[op]
        Workload(log, seed).run(steps)
        n = fs.calls[op] - before
        log.close()
    return n


@pytest.mark.parametrize("cfg", [CFG, SMALL], ids=["cfg", "small-indexes"])
def test_msync_failure_at_every_msync(tmp_path, cfg):
    """Fail the n-th index msync, for every n a workload reaches: the flush or roll
    raises EIO, the recovery point does not move, the log fails, the data is all
    readable, and crash images that lose the unsynced index bytes reopen correctly."""
    seed, steps = 5, 60
    total = count_calls(tmp_path, "msync", steps, seed, cfg)
    assert total >= 6
    rng = random.Random(total)
    for n in range(1, total + 1):
        fs = FaultFS()
        with installed(fs):
            log = open_log(tmp_path / f"msync-{n}", **cfg)
            fs.faults["msync"] = {fs.calls["msync"] + n: "eio"}
            work = Workload(log, seed)
            while not fs.fired:
                rp_before = log.recovery_point
                work.step()
            assert [e.errno for e in work.errors] == [errno.EIO]
            assert log.recovery_point == rp_before, "recovery point moved on a failed msync"
            with pytest.raises(KafkaStoreError):
                log.append([(b"x", b"y", T0)])
            assert read_all(log) == work.model
            check_crash_images(tmp_path, log, fs, work.model, rng, f"m{n}", cfg)
            abandon(log)


# -- crash images -------------------------------------------------------------------------


@pytest.mark.parametrize("cfg", [CFG, SMALL], ids=["cfg", "small-indexes"])
def test_crash_images_that_lose_unsynced_index_bytes(tmp_path, cfg):
    """reliability.md C2-C4 for the indexes: crash images taken through a workload lose
    index bytes and lengths that were never msynced (the active segment's entries, a trim
    on roll) or keep a torn mix of them. Each reopens (unclean, recovery point 0 or the
    one claimed) to a prefix that keeps everything below the recovery point, with indexes
    that agree with the data and exact lookups."""
    fs = FaultFS()
    rng = random.Random(7)
    lost = 0
    with installed(fs):
        log = open_log(tmp_path / "log", **cfg)
        work = Workload(log, 17)
        for i in range(8):
            work.run(25)
            lost += check_crash_images(tmp_path, log, fs, work.model, rng, str(i), cfg)
        assert work.errors == []
        assert lost >= 8, "the crash images never lost an index byte"
        log.close()
    reopen_and_check(tmp_path / "log", work.model, log.log_end_offset, **cfg)


@pytest.mark.parametrize("cfg", [CFG, SMALL], ids=["cfg", "small-indexes"])
def test_crash_after_a_clean_close_keeps_trusted_indexes_right(tmp_path, cfg):
    """A clean close trims the active segment's indexes and writes a final time index
    entry after the last flush, then the clean-shutdown marker. The next open trusts
    every index (no recovery), so a crash right after close must not lose those changes:
    close() makes them durable. The image that keeps only durable bytes reopens with the
    indexes as the log left them."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **cfg)
        work = Workload(log, 23)
        work.run(70)
        log.flush()
        log.append([(b"tail", b"v", work.ts + 1)])  # an unflushed batch, indexed
        work.model.append(Rec(log.log_end_offset - 1, b"tail", b"v", work.ts + 1))
        log.close()
        crash_image(log.dir, tmp_path / "crash", fs, random.Random(1), "all")
    assert os.path.exists(tmp_path / "crash" / ".kafka_cleanshutdown")
    for name in index_files(tmp_path / "log"):
        assert (tmp_path / "log" / name).read_bytes() == (tmp_path / "crash" / name).read_bytes(), name
    got = reopen_and_check(tmp_path / "crash", work.model, log.log_end_offset, **cfg)
    assert got == work.model


# -- ftruncate ------------------------------------------------------------------------------


@pytest.mark.parametrize("which", [1, 2], ids=["offset-index", "time-index"])
def test_failed_trim_on_roll_keeps_the_log_readable(tmp_path, which):
    """The n-th ftruncate of a roll (1: the offset index trim, 2: the time index trim)
    fails with EIO: roll() raises it, the index stays open at its old length, reads and
    lookups keep working, the log takes more appends and rolls, and both a crash image
    and a clean reopen give back every record."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        work = Workload(log, 3)
        while len(log.segments) < 2 or log.active_segment.offset_index.entries < 5:
            work.step()
        active = log.active_segment
        fs.faults["ftruncate"] = {fs.calls["ftruncate"] + which: "eio"}
        with pytest.raises(OSError) as info:
            log.roll()
        assert info.value.errno == errno.EIO
        assert fs.fired == [("ftruncate", fs.calls["ftruncate"], "eio")]
        assert log.active_segment is active
        failed = active.offset_index if which == 1 else active.time_index
        assert not failed.closed and failed.length == CFG["segment_index_bytes"] - \
            CFG["segment_index_bytes"] % failed.entry_size
        assert read_all(log) == work.model
        check_lookups(log, work.model)
        check_indexes(log)
        work.run(60)
        assert work.errors == []
        log.roll()
        assert read_all(log) == work.model
        check_lookups(log, work.model)
        check_indexes(log)
        check_crash_images(tmp_path, log, fs, work.model, random.Random(which), "trim", CFG)
        log.close()
    reopen_and_check(tmp_path / "log", work.model, log.log_end_offset, **CFG)


def test_ftruncate_failure_at_every_ftruncate(tmp_path):
    """Every ftruncate a workload makes (creating an index, trimming indexes on roll)
    fails once with EIO in turn: the step raises, the log stays readable and right, and
    it reopens to every record."""
    seed, steps = 9, 100
    total = count_calls(tmp_path, "ftruncate", steps, seed, CFG)
    assert total >= 6
    for n in range(1, total + 1):
        fs = FaultFS()
        with installed(fs):
            log = open_log(tmp_path / f"ftruncate-{n}", **CFG)
            fs.faults["ftruncate"] = {fs.calls["ftruncate"] + n: "eio"}
            work = Workload(log, seed)
            work.run(steps)
            assert fs.fired, n
            assert [e.errno for e in work.errors] == [errno.EIO], n
            assert read_all(log) == work.model
            check_lookups(log, work.model)
            check_indexes(log)
            log.close()
        reopen_and_check(tmp_path / f"ftruncate-{n}", work.model, 0, **CFG)


# -- crash before an index rename -------------------------------------------------------------


def _prepared(path, n_segments=4, per_segment=8):
    """A flushed log of ``n_segments`` segments of ``per_segment`` one-record batches,
    every segment's indexes open (mapped)."""
    log = open_log(path, **CFG)
    model = []
    for i in range(n_segments * per_segment):
        if i and i % per_segment == 0:
            log.roll()
        log.append([(b"k%d" % i, b"v%d" % i, T0 + i)])
        model.append(Rec(i, b"k%d" % i, b"v%d" % i, T0 + i))
    log.flush()
    assert all(s.offset_index.entries > 0 for s in log.segments)
    return log, model


def _crash_at_each_rename(tmp_path, name, operation, prepare=None):
    """For every n, run ``operation(log)`` on a fresh prepared log (``prepare(log)`` may
    return another log first) and crash before its n-th rename. Then reopen, with the
    recovery point the log claimed, the directory as the process left it and a power-loss
    image of it that keeps only durable bytes. Yields ``(file the crash stopped before,
    model, records read back, reopened log)`` for each."""
    for n in range(1, 100):
        fs = FaultFS()
        d = tmp_path / f"{name}-{n}"
        with installed(fs):
            log, model = _prepared(d)
            if prepare is not None:
                log = prepare(log)
            fs.faults["rename"] = {fs.calls["rename"] + n: "crash"}
            try:
                operation(log)
            except Crash as exc:
                stopped = str(exc).rsplit(" ", 1)[-1]
            else:
                log.close()
                return
            claim = log.recovery_point
            image = tmp_path / f"{name}-{n}-power"
            crash_image(d, image, fs, random.Random(n), "all")
        abandon(log)
        for path in (d, image):
            with installed(FaultFS()):
                again = open_log(path, recovery_point=claim, had_clean_shutdown=False, **CFG)
                try:
                    got = read_all(again)
                    check_indexes(again)
                    check_lookups(again, got)
                    yield stopped, model, got, again
                finally:
                    again.close()
            assert disk_records(path) == got
            assert not [x for x in os.listdir(path) if x.endswith(".deleted")]


def test_crash_before_an_index_rename_in_delete_segments(tmp_path):
    """Retention renames each segment's ``.log``, ``.index`` and ``.timeindex`` to
    ``.deleted``: a crash before any of those renames - the index ones included, whose
    files are mapped - reopens to a suffix of the log with no hole, its indexes right."""
    stopped = []
    for name, model, got, log in _crash_at_each_rename(
            tmp_path, "delete", lambda log: log.delete_segments(log.segments[:3])):
        stopped.append(name)
        assert got and got[0].offset in (0, 8, 16, 24), name
        assert got == [r for r in model if r.offset >= got[0].offset], name
        assert log.log_end_offset == 32
    assert any(n.endswith(".index") for n in stopped), stopped
    assert any(n.endswith(".timeindex") for n in stopped), stopped


def _reopened_with_an_empty_active_segment(log):
    log.roll()  # an empty active segment at 32
    path = log.dir
    log.close()
    again = open_log(path, **CFG)  # its indexes are mapped (and grown) by the load
    assert again.active_segment.size == 0 and again.active_segment.base_offset == 32
    return again


def test_crash_before_an_index_rename_in_a_roll(tmp_path):
    """roll() over an empty active segment renames its files to ``.deleted`` (KAFKA-6388),
    and truncate_to renames the segments it drops: a crash before any of those renames,
    the mapped indexes' included, loses nothing it must keep."""
    stopped = []
    for name, model, got, log in _crash_at_each_rename(
            tmp_path, "roll", lambda log: log.roll(), _reopened_with_an_empty_active_segment):
        stopped.append(name)
        assert got == model, name
        assert log.log_end_offset == 32
    assert any(n.endswith(".index") for n in stopped), stopped
    assert any(n.endswith(".timeindex") for n in stopped), stopped

    stopped = []
    for name, model, got, log in _crash_at_each_rename(
            tmp_path, "truncate", lambda log: log.truncate_to(12)):
        stopped.append(name)
        assert got == model[:len(got)] and len(got) >= 12, name
    assert any(n.endswith(".index") for n in stopped), stopped
    assert any(n.endswith(".timeindex") for n in stopped), stopped


def test_a_roll_right_after_a_flush_makes_its_trims_durable(tmp_path):
    """A roll when everything was just flushed: the recovery point is already at the new
    segment's base, so the roll's flush does nothing (as in Kafka) and no msync follows
    the trims of the old active segment's indexes. The trims must be durable anyway: a
    crash that loses them brings back the zero padding, and the segment, below the
    recovery point, is not recovered - its offset index would be trusted with zero
    entries, which Kafka's sanity check (last offset >= base offset) lets through."""
    fs = FaultFS()
    with installed(fs):
        log = open_log(tmp_path / "log", **CFG)
        work = Workload(log, 31)
        while log.active_segment.offset_index.entries < 3:
            work.step()
        log.flush()
        claim = log.recovery_point
        log.roll()
        assert log.recovery_point == claim == log.active_segment.base_offset
        for seg in log.segments[:-1]:
            for path in (seg.offset_index_path, seg.time_index_path):
                with open(path, "rb") as f:
                    assert fs.durable_index(path) == f.read(), path
        crash_image(log.dir, tmp_path / "crash", fs, random.Random(0), "all")
        abandon(log)
    got = reopen_and_check(tmp_path / "crash", work.model, claim, recovery_point=claim,
                           had_clean_shutdown=False, **CFG)
    assert got == work.model


@pytest.mark.parametrize("which", ["index", "timeindex"])
def test_a_trusted_index_with_garbage_that_passes_the_last_entry_checks_is_rebuilt(
        tmp_path, which):
    """Found by the power-loss harness (tests/reliability/test_power_loss.py): a crash
    kept the length of a clean segment's index, grown back on reopen, but not its bytes.
    Garbage whose *last* entry looks valid (offset at or above the base, position inside
    the log, or negative) passed the deferred check of a segment below the recovery
    point, and a read of that segment returned nothing: every entry is checked now."""
    d = tmp_path / "log"
    log = open_log(d, **CFG)
    model = []
    for i in range(60):
        log.append([(b"k%d" % i, b"v%d" % i, T0 + i)])
        model.append(Rec(i, b"k%d" % i, b"v%d" % i, T0 + i))
    log.roll()
    log.close()
    first = sorted(n for n in os.listdir(d) if n.endswith("." + which))[0]
    if which == "index":   # (relative offset, position): the last one passes Kafka's checks
        garbage = struct.pack(">ii", 0x40000000, 0x100000) + struct.pack(">ii", 3, -5)
    else:                  # (timestamp, relative offset): last ts >= first, offset >= base
        garbage = b"".join(struct.pack(">qi", ts, rel)
                           for ts, rel in ((T0 + 100, 0), (T0 - 50, 30), (T0 + 200, 2)))
    with open(d / first, "wb") as f:
        f.write(garbage)
    again = open_log(d, recovery_point=60, had_clean_shutdown=False, **CFG)
    try:
        assert read_all(again) == model
        for r in model:
            assert again.offset_for_timestamp(r.timestamp).offset == r.offset
    finally:
        again.close()
