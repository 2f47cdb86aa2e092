"""The read path's three leftovers (m36-read), each pinned by a count that failed before.

1. A read the kernel (``entry_walk.read_at``) declines is not read again by the same
   kernel (``LogSegment.read``'s ``read_segment``) before the general path: the segment
   it declined gets ``LogSegment._read_general``.
2. A read_committed fetch touches only the ``.txnindex`` files Kafka's
   ``LocalLog.collectAbortedTransactions`` walk touches: from the segment of the fetch
   offset upward, until an index says the search is complete; a missing or empty file is
   never opened on the read path.
3. The cache of which segments hold aborted transactions is per log: another log's
   ``.txnindex`` changes never make a log look at its indexes again.
"""

from __future__ import annotations

import os
import random

import pytest
from _helpers import rec, v2_batch

from kafkastore import _fileio, local_log, segment
from kafkastore._kernels import entry_walk
from kafkastore.config import LogConfig
from kafkastore.errors import CorruptIndexError, CorruptRecordError
from kafkastore.cleaner import CleanerConfig, clean
from kafkastore.log import Log
from kafkastore.retention import delete_log_start_offset_breached_segments
from kafkastore.segment import READ_PLAN
from kafkastore.txn_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    collect_aborted_txns,
)


def config(interval: int = 1, segment_bytes: int = 2500) -> LogConfig:
    return LogConfig.from_dict({"segment.bytes": segment_bytes,
                                "index.interval.bytes": interval, "file.delete.delay.ms": 0})


def build(path, seed: int = 36, segments: int = 5, interval: int = 1,
          segment_bytes: int = 2500) -> Log:
    """A log of v2 batches of 1-9 records, values of 1-90 bytes, ``segments`` segments."""
    log = Log.open(str(path), config(interval, segment_bytes))
    rng = random.Random(seed)
    while len(log.segments) < segments:
        log.append([(b"k%d" % i, b"v" * rng.randint(1, 90)) for i in range(rng.randint(1, 9))],
                   timestamp=1000)
    return log


class CountingFs(_fileio.FileSystem):
    """The plain file system, counting preads (by descriptor) and opens (by path)."""

    def __init__(self) -> None:
        self.preads: list[int] = []
        self.opened: list[str] = []

    def pread(self, fd, size, position):
        self.preads.append(fd)
        return super().pread(fd, size, position)

    def open(self, path, flags, mode=0o644):
        self.opened.append(path)
        return super().open(path, flags, mode)


def counted(action):
    """``(result or raised error, the CountingFs)`` of ``action()`` through a
    CountingFs."""
    fs = CountingFs()
    old = _fileio.install(fs)
    try:
        try:
            result = action()
        except CorruptRecordError as exc:
            result = ("raised", type(exc), str(exc))
        else:
            result = None if result is None else (result.position, result.size,
                                                  result.first_offset,
                                                  result.first_entry_incomplete,
                                                  result.to_bytes())
    finally:
        _fileio.install(old)
    return result, fs


# -- 1. a declined read ------------------------------------------------------------------


def _declined_cases(log: Log, max_sizes=(1, 100, 300)):
    """The ``(offset, max_size)`` reads below the log end that ``read_at`` declines."""
    ll = log.local_log
    out = []
    for offset in range(log.log_start_offset, log.log_end_offset):
        for max_size in max_sizes:
            if entry_walk.read_at(ll.segments, ll.bases, offset, max_size, True, _fileio.fs,
                                  READ_PLAN) is None:
                out.append((offset, max_size))
    return out


def _floor(ll, offset: int) -> int:
    """The position of the segment holding ``offset`` (the last based at or below it)."""
    return max(k for k, base in enumerate(ll.bases) if base <= offset)


def _kernel_entries(monkeypatch):
    """The segments ``LogSegment.read``'s kernel call is asked for, as a list that grows."""
    asked = []
    real = segment._read_segment

    def counting(seg, *args):
        asked.append(seg)
        return real(seg, *args)

    monkeypatch.setattr(segment, "_read_segment", counting)
    return asked


def _sparse(tmp_path):
    # (an index entry every ~30,000 bytes: a read far from an entry needs a longer walk
    # than the kernel's window of a small read, 8 KiB)
    return build(tmp_path / "sparse-0", seed=7, segments=2, interval=30000,
                 segment_bytes=60000)


def _gap(tmp_path):
    # a roll to an offset past the log end leaves offsets no segment holds: a read of
    # one is past its floor segment's data and goes on to the next segment
    # (a follower's append, which takes the offsets it is given)
    log = build(tmp_path / "gap-0", segments=2)
    gap = log.log_end_offset + 50
    log.roll(gap)
    log.append_batches(v2_batch(rec(value=b"after the gap"), count=1, base_offset=gap),
                       assign_offsets=False)
    assert log.log_end_offset == gap + 1
    return log


def _corrupt(tmp_path):
    # a batch's size field made too large: the kernel declines, the general path raises
    log = build(tmp_path / "corrupt-0", segments=3)
    seg = log.segments[1]
    position = seg.read(seg.base_offset + 3, 1, None, True).position
    with open(seg.log.path, "r+b") as f:
        f.seek(position + 8)
        f.write((1 << 30).to_bytes(4, "big"))
    return log


@pytest.mark.parametrize("make", [_sparse, _gap, _corrupt])
def test_a_declined_segment_is_not_asked_of_the_kernel_again(tmp_path, monkeypatch, make):
    """Fails where LocalLog.read's loop called LogSegment.read (kernel first) on the
    segment ``read_at`` had just declined."""
    log = make(tmp_path)
    try:
        cases = _declined_cases(log)
        assert cases, "the log must have reads the kernel declines"
        asked = _kernel_entries(monkeypatch)
        ll = log.local_log
        for offset, max_size in cases:
            del asked[:]
            floor = ll.segments[_floor(ll, offset)]
            counted(lambda o=offset, m=max_size: log.read(o, m, True))
            assert floor not in asked, (offset, max_size)
    finally:
        log.close()


@pytest.mark.parametrize("make", [_sparse, _gap, _corrupt])
def test_a_declined_read_costs_the_kernel_once_and_the_general_path(tmp_path, monkeypatch,
                                                                    make):
    """The preads a declined read makes of the segment the kernel declined are those of
    ``read_at`` alone plus those of the general path alone (both kernels forced off),
    and it answers as the general path does; fails where the loop's LogSegment.read read
    the window again. (A read that goes on to the next segment reads that one with the
    kernel, as before.)"""
    log = make(tmp_path)
    try:
        ll = log.local_log
        cases = _declined_cases(log)
        assert cases
        for offset, max_size in cases:
            fd = ll.segments[_floor(ll, offset)].log._fd
            fast, fast_fs = counted(lambda o=offset, m=max_size: log.read(o, m, True))
            _, kernel_fs = counted(lambda o=offset, m=max_size: entry_walk.read_at(
                ll.segments, ll.bases, o, m, True, _fileio.fs, READ_PLAN))
            with monkeypatch.context() as m:
                m.setattr(local_log, "_read_at", lambda *a: None)
                m.setattr(segment, "_read_segment", lambda *a: None)
                slow, general_fs = counted(lambda o=offset, s=max_size: log.read(o, s, True))
            assert fast == slow, (offset, max_size)
            assert fast_fs.preads.count(fd) == \
                kernel_fs.preads.count(fd) + general_fs.preads.count(fd), (offset, max_size)
    finally:
        log.close()


def test_log_segment_read_still_tries_the_kernel_first(tmp_path, monkeypatch):
    """Other callers of LogSegment.read keep the kernel's common case."""
    log = build(tmp_path / "p-0", segments=2)
    try:
        asked = _kernel_entries(monkeypatch)
        seg = log.segments[0]
        assert seg.read(seg.base_offset + 1, 300, None, True).to_bytes()
        assert asked == [seg]
    finally:
        log.close()


# -- 2. the first read_committed fetch -----------------------------------------------------


COMMITTED = "read_committed"


def build_txn(path, segments: int = 10) -> Log:
    """A log of ``segments`` segments where the even ones hold aborted transactions
    (a ``.txnindex`` with entries) and the odd ones none (no file)."""
    log = Log.open(str(path), config())
    seqs = {}
    while len(log.segments) < segments:
        n = len(log.segments)
        log.append([(b"k", b"v" * 40)] * 3, timestamp=1000)
        if n % 2 == 0:
            pid = 1 + n % 3
            seq = seqs.get(pid, 0)
            log.append([(b"t", b"x" * 30)] * 2, timestamp=1000, producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=True)
            seqs[pid] = seq + 2
            log.append_end_txn_marker(pid, 0, "ABORT")
    log.append([(b"k", b"last")], timestamp=1000)
    return log


def kafka_walk(log: Log, start: int, upper: int):
    """Kafka's ``LocalLog.collectAbortedTransactions``, from the files: the segments it
    reads (from the one holding ``start`` up, until an index says complete) and what it
    collects."""
    segments = log.segments
    k = max(i for i, s in enumerate(segments) if s.base_offset <= start)
    touched, found = [], []
    for seg in segments[k:]:
        touched.append(seg)
        result = collect_aborted_txns(seg.txn_index.all_aborted_txns(), start, upper)
        found.extend(result.aborted)
        if result.complete:
            break
    return touched, found


def check_against_walk(log: Log) -> None:
    """Every fetch offset's aborted transactions up to the log end are Kafka's walk's."""
    upper = log.log_end_offset
    for offset in range(log.log_start_offset, upper):
        assert log.collect_aborted_transactions(offset, upper) == \
            kafka_walk(log, offset, upper)[1], offset


def _reopened(tmp_path, empty_files: bool = True) -> Log:
    path = tmp_path / "t-0"
    log = build_txn(path)
    log.close()
    if empty_files:   # zero-length .txnindex files beside some segments without entries
        for name in sorted(os.listdir(path)):
            if name.endswith(".log") and int(name[:20]) % 3 == 0:
                index = path / (name[:20] + ".txnindex")
                if not index.exists():
                    index.touch()
    return Log.open(str(path), config())


def _txnindex_opens(fs: CountingFs) -> list[str]:
    return [p for p in fs.opened if p.endswith(".txnindex")]


def test_the_first_committed_fetch_opens_only_what_kafkas_walk_reads(tmp_path):
    """On a reopened log, the first fetch opens only ``.txnindex`` files of the segments
    Kafka's walk reads (none below the fetch's segment) that hold entries; fails where
    the first fetch loaded every segment's index."""
    log = _reopened(tmp_path)
    try:
        segments = log.segments
        assert len(segments) >= 8
        fetch = segments[6].base_offset + 1
        upper = log.log_end_offset
        touched, want = kafka_walk(log, fetch, upper)
        got, fs = counted_collect(log, fetch, upper)
        assert got == want
        opened = _txnindex_opens(fs)
        reachable = {s.txn_index.path for s in touched if s.txn_index.all_aborted_txns()}
        assert set(opened) <= reachable, opened
        assert len(opened) == len(set(opened))
    finally:
        log.close()


def counted_collect(log: Log, start: int, upper: int):
    fs = CountingFs()
    old = _fileio.install(fs)
    try:
        found = log.collect_aborted_transactions(start, upper)
    finally:
        _fileio.install(old)
    return found, fs


def test_a_committed_read_opens_no_missing_or_empty_index(tmp_path):
    """Reads from every offset of a reopened log never open a missing or zero-length
    ``.txnindex``, nor one below the read's segment; fails where every segment's index
    was loaded (opened, or tried) on the first read."""
    log = _reopened(tmp_path)
    try:
        bases = [s.base_offset for s in log.segments]
        empty = {s.txn_index.path for s in log.segments
                 if not os.path.exists(s.txn_index.path)
                 or os.path.getsize(s.txn_index.path) == 0}
        assert len(empty) >= 3 and any(os.path.exists(p) for p in empty)
        for offset in reversed(range(log.log_start_offset, log.log_end_offset)):
            fs = CountingFs()
            old = _fileio.install(fs)
            try:
                log.read(offset, 700, False, COMMITTED)
            finally:
                _fileio.install(old)
            floor = max(b for b in bases if b <= offset)
            for path in _txnindex_opens(fs):
                assert path not in empty, (offset, path)
                assert int(os.path.basename(path)[:20]) >= floor, (offset, path)
    finally:
        log.close()


@pytest.mark.parametrize("size", [None, 0, ABORTED_TXN_SIZE - 1])
def test_an_index_knows_it_is_empty_without_opening_its_file(tmp_path, size):
    """A missing, zero-length or torn-only file: no entry, and neither has_entries nor a
    search opens it (a stat tells)."""
    path = tmp_path / "00000000000000000000.txnindex"
    if size is not None:
        path.write_bytes(b"\x00" * size)
    index = TransactionIndex(0, str(path))
    fs = CountingFs()
    old = _fileio.install(fs)
    try:
        assert index.has_entries() is False
        assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    finally:
        _fileio.install(old)
    assert fs.opened == []


def test_the_has_entries_fact_follows_every_change(tmp_path):
    """append, truncate, reset, rename and delete keep the fact (and the search) true."""
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(0, str(path))
    assert not index.has_entries()
    index.append(AbortedTxn(1, 0, 5, 6))
    assert index.has_entries()
    index.append(AbortedTxn(2, 3, 9, 10))
    assert index.collect_aborted_txns(6, 100).aborted == [AbortedTxn(2, 3, 9, 10)]
    index.truncate_to(9)
    assert index.has_entries()
    assert index.collect_aborted_txns(6, 100).aborted == []
    index.truncate_to(0)
    assert not index.has_entries() and os.path.getsize(path) == 0
    index.append(AbortedTxn(3, 1, 7, 8))
    index.rename_to(str(path) + ".swap")
    assert index.has_entries()
    assert index.collect_aborted_txns(0, 100).aborted == [AbortedTxn(3, 1, 7, 8)]
    index.reset()
    assert not index.has_entries()
    index.append(AbortedTxn(4, 1, 7, 8))
    # a second object over the same file (a reopen) learns it from the file
    assert TransactionIndex(0, index.path).has_entries()
    index.delete_if_exists()
    assert not index.has_entries()
    assert not TransactionIndex(0, index.path).has_entries()


# -- 3. the cache of segments with entries, per log --------------------------------------


def _abort(log: Log, pid: int, seq: int) -> None:
    log.append([(b"t", b"x" * 30)], timestamp=1000, producer_id=pid, producer_epoch=0,
               base_sequence=seq, is_transactional=True)
    log.append_end_txn_marker(pid, 0, "ABORT")


def _looks(monkeypatch, directory: str) -> list[str]:
    """The ``has_entries`` looks at indexes under ``directory``, as a list that grows."""
    looked = []
    real = TransactionIndex.has_entries

    def counting(self):
        if os.path.dirname(self.path) == directory:
            looked.append(self.path)
        return real(self)

    monkeypatch.setattr(TransactionIndex, "has_entries", counting)
    return looked


def test_another_logs_abort_does_not_make_a_log_look_again(tmp_path, monkeypatch):
    """Fails where the count of changes was one for the process: each abort in log B
    made log A look at every index of its segments again on its next committed read."""
    a = build_txn(tmp_path / "a-0")
    b = build(tmp_path / "b-0", segments=2)
    try:
        offsets = list(range(a.log_start_offset, a.log_end_offset, 7))
        want = [a.read(o, 700, False, COMMITTED).aborted_transactions for o in offsets]
        looked = _looks(monkeypatch, str(tmp_path / "a-0"))
        for seq, offset in enumerate(offsets):
            _abort(b, 77, seq)
            assert a.read(offset, 700, False, COMMITTED).aborted_transactions == \
                want[seq]
        assert looked == []
        # (and B sees its own aborts)
        assert len(b.collect_aborted_transactions(b.log_start_offset, b.log_end_offset)) \
            == len(offsets)
    finally:
        a.close()
        b.close()


def test_a_logs_own_changes_still_make_it_look_again(tmp_path, monkeypatch):
    """An abort, a truncation and a retention delete in the log itself: its next read
    sees them (against Kafka's walk over the files)."""
    log = build_txn(tmp_path / "a-0")
    other = build(tmp_path / "b-0", segments=2)
    try:
        check_against_walk(log)
        looked = _looks(monkeypatch, str(tmp_path / "a-0"))
        _abort(log, 40, 0)
        check_against_walk(log)
        assert looked   # (it looked again)
        _abort(other, 41, 0)
        # a cut at the marker of a segment's last abort: its index loses that entry
        seg = next(s for s in reversed(log.segments[:-1]) if s.txn_index.all_aborted_txns())
        log.truncate_to(seg.txn_index.all_aborted_txns()[-1].last_offset)
        check_against_walk(log)
        log.delete_records(log.segments[2].base_offset + 1)
        assert delete_log_start_offset_breached_segments(log) >= 1
        check_against_walk(log)
    finally:
        log.close()
        other.close()


def test_a_compaction_swap_is_seen(tmp_path):
    """The cleaner's swap replaces segments and their indexes: the next reads answer from
    the new ones (against Kafka's walk over the files)."""
    path = tmp_path / "c-0"
    conf = LogConfig.from_dict({"segment.bytes": 2500, "index.interval.bytes": 1,
                                "file.delete.delay.ms": 0, "cleanup.policy": "compact"})
    log = Log.open(str(path), conf)
    try:
        seq = 0
        for i in range(60):
            log.append([(b"k%d" % (i % 7), b"v" * 50)], timestamp=1000)
            if i % 4 == 1:
                _abort(log, 5, seq)
                seq += 1
        log.roll()
        check_against_walk(log)
        before = [s.txn_index for s in log.segments]
        clean(log, config=CleanerConfig({"log.cleaner.dedupe.buffer.size": 1 << 20}))
        assert [s.txn_index for s in log.segments] != before   # (swapped)
        check_against_walk(log)
    finally:
        log.close()


def test_a_corrupt_entry_raises_on_every_read_and_other_logs_read_on(tmp_path):
    """A bad version in one log's index raises CorruptIndexError on each read that
    reaches it (never cached); another log's reads are untouched."""
    a = build_txn(tmp_path / "a-0")
    b = build_txn(tmp_path / "b-0")
    try:
        want = b.read(b.log_start_offset, 700, False, COMMITTED).aborted_transactions
        seg = next(s for s in a.segments if s.txn_index.all_aborted_txns())
        with open(seg.txn_index.path, "r+b") as f:
            f.write(b"\x7f")
        seg.txn_index.rename_to(seg.txn_index.path)   # (forget what it loaded)
        for _ in range(3):
            with pytest.raises(CorruptIndexError):
                a.collect_aborted_transactions(seg.base_offset, a.log_end_offset)
            assert b.read(b.log_start_offset, 700, False, COMMITTED).aborted_transactions \
                == want
    finally:
        a.close()
        b.close()
