"""Log.read with ``isolation_level="read_committed"``: its fast path against the general one.

Issue 31: a read_committed read of a log with no aborted transaction cost 6x an
uncommitted one, because every read opened (and failed to open) the ``.txnindex`` of each
segment from the read's on. Now an index's entries are loaded once
(``TransactionIndex.loaded``), the log knows which segments hold entries
(``LocalLog._with_txn_entries``), a read with no entry from its segment on needs no upper
bound at all, one whose bound is the log end (no transaction open) is the uncommitted
read's kernel call, and an index is searched from the first entry whose last offset
reaches the fetch offset.

The oracle is the general path as it was: ``_read_at`` never applies, every segment's
index is asked, and each index is read from its file and searched entry by entry
(Kafka's ``TransactionIndex.collectAbortedTxns``, ``collect_aborted_txns`` here). Every
read is compared whole: position, size, the first offset, the incomplete-entry flag, the
bytes, the aborted transactions (entries, order) and the error of a read outside the log.
"""

from __future__ import annotations

import random

import pytest
from _helpers import compare_paths, random_reads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkastore import _fileio, local_log
from kafkastore.config import LogConfig
from kafkastore.errors import OffsetOutOfRangeError
from kafkastore.log import Log
from kafkastore.retention import delete_log_start_offset_breached_segments
from kafkastore.txn_index import (
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    collect_aborted_txns,
)

COMMITTED = "read_committed"


def build(path, seed: int, steps: int = 120, close_all: bool = True) -> Log:
    """A log of plain batches and transactions of 1-3 producers, committed or aborted,
    spanning segments (2,500-byte segments)."""
    config = LogConfig.from_dict({"segment.bytes": 2500, "file.delete.delay.ms": 0})
    log = Log.open(str(path), config)
    rng = random.Random(seed)
    seqs: dict[int, int] = {}
    open_: set[int] = set()
    for _ in range(steps):
        append_step(log, rng, seqs, open_)
    if close_all:
        for pid in sorted(open_):
            log.append_end_txn_marker(pid, 0, rng.choice(["ABORT", "COMMIT"]))
    return log


def append_step(log: Log, rng: random.Random, seqs: dict, open_: set) -> None:
    n = rng.randint(1, 6)
    records = [(b"k%d" % i, b"v" * rng.randint(1, 60)) for i in range(n)]
    roll = rng.random()
    if roll < 0.4:
        pid = rng.randint(1, 3)
        seq = seqs.get(pid, 0)
        log.append(records, timestamp=1000, producer_id=pid, producer_epoch=0,
                   base_sequence=seq, is_transactional=True)
        seqs[pid] = seq + n
        open_.add(pid)
    elif roll < 0.6 and open_:
        pid = rng.choice(sorted(open_))
        log.append_end_txn_marker(pid, 0, rng.choice(["ABORT", "ABORT", "COMMIT"]))
        open_.discard(pid)
    else:
        log.append(records, timestamp=1000)


def outcome(log: Log, offset: int, max_bytes: int, min_one: bool):
    """Everything a read_committed read answers, or the error it raises."""
    try:
        s = log.read(offset, max_bytes, min_one, COMMITTED)
    except OffsetOutOfRangeError as exc:
        return ("out of range", str(exc), exc.offset)
    return (s.position, s.size, s.first_offset, s.first_entry_incomplete, s.to_bytes(),
            s.aborted_transactions, s.file.path)


def general(monkeypatch):
    """The general path, as before the fast path: no kernel read, every segment's index
    asked, each index read from its file. Returns the undo."""
    monkeypatch.setattr(local_log, "_read_at", lambda *a: None)
    monkeypatch.setattr(local_log.LocalLog, "_with_txn_entries",
                        lambda self, segments, start: tuple(range(len(segments))))
    monkeypatch.setattr(TransactionIndex, "collect_aborted_txns",
                        lambda self, f, u: collect_aborted_txns(self.all_aborted_txns(), f, u))
    return monkeypatch.undo


def reads(log: Log, rng: random.Random, n: int):
    return random_reads(log, rng, n, 3000)


def compare(log: Log, monkeypatch, cases):
    compare_paths(cases, lambda *c: outcome(log, *c), general, monkeypatch)
    # and the public collection, over random ranges
    lo, hi = log.log_start_offset, log.log_end_offset
    rng = random.Random(len(cases))
    ranges = [(rng.randint(lo, hi), rng.randint(lo, hi + 3)) for _ in range(30)]
    compare_paths(ranges, log.collect_aborted_transactions, general, monkeypatch)


@pytest.fixture
def log(tmp_path):
    log = build(tmp_path / "p-0", seed=31)
    yield log
    log.close()


def test_the_log_has_what_the_tests_need(log):
    """(the fixture spans segments and holds aborted transactions in several of them)"""
    with_entries = [s for s in log.segments if s.txn_index.all_aborted_txns()]
    assert len(log.segments) >= 5 and len(with_entries) >= 2


def test_every_offset_reads_alike(log, monkeypatch):
    cases = [(o, m, f) for o in range(log.log_start_offset - 1, log.log_end_offset + 2)
             for m in (0, 1, 700) for f in (False, True)]
    compare(log, monkeypatch, cases)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000), st.booleans())
def test_random_logs_read_alike(tmp_path_factory, monkeypatch, seed, close_all):
    """Random logs, with or without a transaction still open (the LSO below the end)."""
    log = build(tmp_path_factory.mktemp("p"), seed, steps=60, close_all=close_all)
    try:
        compare(log, monkeypatch, reads(log, random.Random(seed), 60))
    finally:
        log.close()


def test_reads_alike_after_roll_truncate_append_and_retention(log, monkeypatch):
    rng = random.Random(5)
    compare(log, monkeypatch, reads(log, rng, 150))
    log.roll()
    log.append([(b"k", b"after roll")], timestamp=2000)
    compare(log, monkeypatch, reads(log, rng, 150))
    # a cut inside an older segment: indexes above go, the cut one loses entries
    with_entries = [s for s in log.segments if s.txn_index.all_aborted_txns()]
    cut = with_entries[-1].txn_index.all_aborted_txns()[-1].last_offset
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    compare(log, monkeypatch, reads(log, rng, 150))
    # new transactions of a new producer (the old ones' sequences were cut)
    pid_rng = random.Random(9)
    for k in range(6):
        log.append([(b"t", b"x" * 40)] * 3, timestamp=3000, producer_id=50 + k,
                   producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append([(b"p", b"y" * 40)] * 2, timestamp=3000)
        log.append_end_txn_marker(50 + k, 0, pid_rng.choice(["ABORT", "COMMIT"]))
    compare(log, monkeypatch, reads(log, rng, 150))
    # retention: the log start offset passes the first segments, which are deleted
    log.delete_records(log.segments[2].base_offset + 1)
    assert delete_log_start_offset_breached_segments(log) >= 1
    compare(log, monkeypatch, reads(log, rng, 150))


def test_no_index_file_is_read_per_read(tmp_path, monkeypatch):
    """Reads open each .txnindex with entries once at most (its first search loads it:
    since m36-read a read loads only the indexes its walk reaches) and never one without
    entries."""
    log = build(tmp_path / "p-0", seed=31)
    try:
        log.read(0, 100, False, COMMITTED)
        opened = []
        real = _fileio.read_file
        monkeypatch.setattr(_fileio, "read_file", lambda p, *a, **k: (opened.append(p),
                                                                      real(p, *a, **k))[1])
        for o in range(log.log_start_offset, log.log_end_offset):
            log.read(o, 700, False, COMMITTED)
        opened = [p for p in opened if p.endswith(".txnindex")]
        assert len(opened) == len(set(opened))
        assert all(s.txn_index.all_aborted_txns() for s in log.segments
                   if s.txn_index.path in opened)
    finally:
        log.close()


def test_an_abort_is_seen_by_the_next_read(tmp_path):
    """A cached view of the indexes never hides a new entry: an abort after a read shows
    in the next read's aborted transactions."""
    log = Log.open(str(tmp_path / "p-0"), LogConfig.from_dict({"segment.bytes": 2500}))
    try:
        log.append([(b"k", b"v")], timestamp=1000)
        assert log.read(0, 1000, False, COMMITTED).aborted_transactions == []
        log.append([(b"k", b"t")], timestamp=1000, producer_id=7, producer_epoch=0,
                   base_sequence=0, is_transactional=True)
        log.append_end_txn_marker(7, 0, "ABORT")
        assert log.read(0, 1000, False, COMMITTED).aborted_transactions == \
            [AbortedTxn(7, 1, 2, 3)]
        log.truncate_to(2)
        assert log.read(0, 1000, False, COMMITTED).aborted_transactions == []
    finally:
        log.close()


# -- one index's search from the first entry that can match ---------------------------------


def entries_strategy():
    """Entries as a file could hold them: last offsets usually increasing (always, for
    files kafkastore wrote), LSOs anywhere (a hand-made file need not keep Kafka's
    ``lso <= last + 1``)."""
    entry = st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 60),
                      st.integers(0, 70))
    return st.lists(entry, max_size=12)


@settings(max_examples=300, deadline=None)
@given(entries_strategy(), st.booleans(), st.integers(-2, 70), st.integers(-2, 75))
def test_index_search_equals_the_entry_walk(tmp_path_factory, raw, ordered, fetch, upper):
    """TransactionIndex.collect_aborted_txns (the loaded entries, searched from the first
    entry whose last offset reaches the fetch offset) equals Kafka's walk over the file's
    entries, ordered or not, complete or not."""
    if ordered:
        raw = sorted(raw, key=lambda e: e[2])
    txns = [AbortedTxn(p, f, last, lso) for p, f, last, lso in raw]
    path = tmp_path_factory.mktemp("i") / "00000000000000000000.txnindex"
    path.write_bytes(b"".join(t.to_bytes() for t in txns))
    index = TransactionIndex(0, str(path))
    expected = collect_aborted_txns(txns, fetch, upper)
    assert index.collect_aborted_txns(fetch, upper) == expected
    assert isinstance(index.collect_aborted_txns(fetch, upper), TxnIndexSearchResult)
