"""Log.read's fast path (``entry_walk.read_at``) against its general path.

Issue 31's read row: a read at an offset below the log end is one kernel call, which
chooses the segment (the floor of the offset over ``LocalLog.bases``, Kafka's
``LocalLog.read`` / ``segments.floorSegment``), looks the offset up in its index, checks
the header of the batch it points at and builds the slice (``LogSegment.read``). The
general path (``LocalLog.read``'s loop over ``LogSegment.read`` with its header walk) is
the oracle: it is forced by kernel entry points that never apply. Every read is compared
whole: position, size, the first offset and the incomplete-entry flag, the bytes, and the
error of a read outside the log. Logs are compared fresh, after a roll, after a truncation
and after a retention delete, and the twin kernels (``impl``) are compared with each other.
"""

from __future__ import annotations

import random

import pytest
from _helpers import compare_paths, random_reads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkastore import _fileio, local_log, segment
from kafkastore.config import LogConfig
from kafkastore.errors import OffsetOutOfRangeError
from kafkastore.file_records import LogSlice
from kafkastore.log import Log
from kafkastore.retention import delete_log_start_offset_breached_segments


def build(path, seed: int = 31, segments: int = 5, interval: int = 1) -> Log:
    """A log of v2 batches of 1-9 records, values of 1-90 bytes, ``segments`` segments."""
    config = LogConfig.from_dict({"segment.bytes": 2500, "index.interval.bytes": interval,
                                  "file.delete.delay.ms": 0})
    log = Log.open(str(path), config)
    rng = random.Random(seed)
    while len(log.segments) < segments:
        log.append([(b"k%d" % i, b"v" * rng.randint(1, 90)) for i in range(rng.randint(1, 9))],
                   timestamp=1000)
    return log


def outcome(log: Log, offset: int, max_bytes: int, min_one: bool):
    """Everything a read answers, or the error it raises."""
    try:
        s = log.read(offset, max_bytes, min_one)
    except OffsetOutOfRangeError as exc:
        return ("out of range", str(exc), exc.offset)
    return (s.position, s.size, s.first_offset, s.first_entry_incomplete, s.to_bytes(),
            s.aborted_transactions, s.file.path)


def general(monkeypatch):
    """Force the general path (no kernel entry applies) until the returned undo runs."""
    monkeypatch.setattr(local_log, "_read_at", lambda *a: None)
    monkeypatch.setattr(segment, "_read_segment", lambda *a: None)
    return monkeypatch.undo


def reads(log: Log, rng: random.Random, n: int):
    return random_reads(log, rng, n, 6000)


def compare(log: Log, monkeypatch, cases):
    compare_paths(cases, lambda *c: outcome(log, *c), general, monkeypatch)


@pytest.fixture
def log(tmp_path):
    log = build(tmp_path / "p-0")
    yield log
    log.close()


def test_every_offset_size_and_flag_reads_alike(log, monkeypatch):
    cases = [(o, m, f) for o in range(log.log_start_offset - 1, log.log_end_offset + 2)
             for m in (0, 1, 61, 300, 4000) for f in (False, True)]
    compare(log, monkeypatch, cases)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_random_reads_alike(log, monkeypatch, rng):
    compare(log, monkeypatch, reads(log, rng, 40))


def test_sparse_index_reads_alike(tmp_path, monkeypatch):
    # (an entry every ~1000 bytes: most reads walk headers from an entry)
    log = build(tmp_path / "p-0", seed=7, interval=1000)
    try:
        compare(log, monkeypatch, reads(log, random.Random(7), 400))
    finally:
        log.close()


def test_reads_alike_after_roll_truncate_and_retention(log, monkeypatch):
    rng = random.Random(5)
    compare(log, monkeypatch, reads(log, rng, 200))
    log.roll()
    log.append([(b"k", b"after roll")], timestamp=2000)
    compare(log, monkeypatch, reads(log, rng, 200))
    # a follower's cut inside an older segment: the segments above go, the list shrinks
    cut = log.segments[2].base_offset + 1
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    compare(log, monkeypatch, reads(log, rng, 200))
    log.append([(b"k%d" % i, b"x" * 50) for i in range(30)], timestamp=3000)
    compare(log, monkeypatch, reads(log, rng, 200))
    # retention: the log start offset passes the first segment, which is deleted
    log.delete_records(log.segments[1].base_offset + 2)
    assert delete_log_start_offset_breached_segments(log) >= 1
    log.delete_pending_segments(force=True)
    compare(log, monkeypatch, reads(log, rng, 200))


def test_reads_alike_after_reopen(tmp_path, monkeypatch):
    # a reopened log's indexes are mapped (and checked) on their first read
    path = tmp_path / "p-0"
    build(path).close()
    log = Log.open(str(path), LogConfig.from_dict({"segment.bytes": 2500,
                                                   "index.interval.bytes": 1}))
    try:
        cases = reads(log, random.Random(3), 300)
        fast = [outcome(log, *c) for c in cases]
        log.close()
        log = Log.open(str(path), LogConfig.from_dict({"segment.bytes": 2500,
                                                       "index.interval.bytes": 1}))
        undo = general(monkeypatch)
        try:
            assert fast == [outcome(log, *c) for c in cases]
        finally:
            undo()
    finally:
        log.close()


def test_common_case_is_one_kernel_call(log, monkeypatch):
    """A read below the log end does not enter LogSegment.read (the general path's
    Python layer) once the kernel applies; fails where LocalLog.read went through it."""
    entered = []
    real = segment.LogSegment.read

    def counting(self, *args, **kwargs):
        entered.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(segment.LogSegment, "read", counting)
    for offset in range(log.log_start_offset, log.log_end_offset):
        assert log.read(offset, 300, True).to_bytes()
    assert entered == []


def test_a_closed_segment_is_not_read_by_the_kernel(impl, log):
    """A segment closed under a lock-free read (a delayed deletion): the kernel answers
    None, so LocalLog.read's general path raises SegmentGone and Log.read reads again
    under the lock."""
    local = log._local
    target = local.segments[1].base_offset
    plan = segment.READ_PLAN
    assert impl.entry_walk.read_at(local.segments, local.bases, target, 100, True,
                                   _fileio.fs, plan) is not None
    local.segments[1].log.close()
    assert impl.entry_walk.read_at(local.segments, local.bases, target, 100, True,
                                   _fileio.fs, plan) is None
    with pytest.raises(local_log.SegmentGone):
        local.read(target, 100, True, False)


def test_the_twin_kernels_answer_alike(impl, log):
    """``read_at`` of the compiled kernel and of its pure twin: the same slices (or None)
    on the same segments, for offsets inside, below and above them and any size."""
    from kafkastore._pure import entry_walk as oracle

    local = log._local
    rng = random.Random(11)
    plan = segment.READ_PLAN
    for offset, max_bytes, min_one in reads(log, rng, 500) + [(0, -1, True)]:
        got = impl.entry_walk.read_at(local.segments, local.bases, offset, max_bytes, min_one,
                                      _fileio.fs, plan)
        want = oracle.read_at(local.segments, local.bases, offset, max_bytes, min_one,
                              _fileio.fs, plan)
        assert (got is None) == (want is None), (offset, max_bytes, min_one)
        if got is not None:
            assert isinstance(got, LogSlice)
            assert (got.position, got.size, got.first_offset, got.first_entry_incomplete,
                    got.to_bytes()) == (want.position, want.size, want.first_offset,
                                        want.first_entry_incomplete, want.to_bytes())


def test_a_read_through_a_test_file_system_is_served_by_it(log):
    """The kernel reads through ``_fileio.fs`` when it is not the plain one (the fault
    injection seam)."""
    class Counting(_fileio.FileSystem):
        preads = 0

        def pread(self, fd, size, position):
            Counting.preads += 1
            return super().pread(fd, size, position)

    old = _fileio.install(Counting())
    try:
        assert log.read(log.segments[1].base_offset + 1, 200, True).to_bytes()
    finally:
        _fileio.install(old)
    assert Counting.preads >= 1


def test_a_max_size_past_int64_reads_as_the_general_path(log, monkeypatch):
    """Kafka's maxBytes is an int32, but Log.read takes any int: a size past the kernel's
    int64 reads as the general path reads it (the whole rest of the segment), not an
    OverflowError."""
    cases = [(o, m, f) for o in (log.log_start_offset, log.segments[2].base_offset + 1,
                                 log.log_end_offset - 1)
             for m in (1 << 63, 1 << 70) for f in (False, True)]
    compare(log, monkeypatch, cases)
