"""Log.read's common case: one kernel call (``entry_walk.read_at``) and one pread.

Issue 31's read row: the index lookup and the header check of the batch the index points
at are one compiled call, and its window serves the data too. The slices it gives must be
the ones the general path (an index lookup, then a walk of the batch headers, Kafka's
LogSegment.read / FileRecords.searchForOffsetWithSize) gives for every offset, size and
flag; the general path is forced here by kernel entry points (``read_at``,
``read_segment``) that never apply.
"""

from __future__ import annotations

import random

import pytest

from kafkastore import _fileio, local_log, segment
from kafkastore.config import LogConfig
from kafkastore.log import Log


class CountingPreads(_fileio.FileSystem):
    def __init__(self):
        self.preads = 0

    def pread(self, fd, size, position):
        self.preads += 1
        return super().pread(fd, size, position)


@pytest.fixture
def log(tmp_path):
    """Four segments of v2 batches of 1-7 records, every batch indexed, the last one open."""
    config = LogConfig.from_dict({"segment.bytes": 2000, "index.interval.bytes": 1})
    log = Log.open(str(tmp_path / "p-0"), config)
    rng = random.Random(31)
    while len(log.segments) < 4:
        log.append([(b"k%d" % i, b"v" * rng.randint(1, 60)) for i in range(rng.randint(1, 7))],
                   timestamp=1000)
    yield log
    log.close()


def slices(log, reads):
    out = []
    for offset, max_bytes, min_one in reads:
        s = log.read(offset, max_bytes, min_one)
        out.append((s.position, s.size, s.first_entry_incomplete, s.to_bytes()))
    return out


def test_the_kernel_path_gives_the_general_paths_slices(log, monkeypatch):
    reads = [(o, m, f) for o in range(log.log_start_offset, log.log_end_offset + 1)
             for m in (0, 1, 80, 500, 5000) for f in (False, True)]
    fast = slices(log, reads)
    monkeypatch.setattr(local_log, "_read_at", lambda *a: None)
    monkeypatch.setattr(segment, "_read_segment", lambda *a: None)
    assert fast == slices(log, reads)


def test_a_read_is_one_kernel_call_and_one_pread(log, monkeypatch):
    calls = []
    real = local_log._read_at

    def counting(*args):
        calls.append(args[2])
        return real(*args)

    def general(*args):
        calls.append("segment")
        return None

    # a segment's first batch has no index entry (Kafka indexes a batch when more than
    # index.interval.bytes were written before it): reads in it may look at the next
    # entry's batch first, then walk from the start
    unindexed = set()
    for seg in log.segments:
        first = next(iter(seg.log.walk(0)))
        unindexed.update(range(first.base_offset, first.last_offset + 1))
    monkeypatch.setattr(local_log, "_read_at", counting)
    monkeypatch.setattr(segment, "_read_segment", general)
    fs = CountingPreads()
    old = _fileio.install(fs)
    try:
        for offset in range(log.log_start_offset, log.log_end_offset):
            calls.clear()
            fs.preads = 0
            assert log.read(offset, 300, True).to_bytes()
            # (a test's file system is called through, so the seam still sees every read)
            assert calls == [offset], offset
            assert fs.preads == 1 or (offset in unindexed and fs.preads == 2), offset
    finally:
        _fileio.install(old)
