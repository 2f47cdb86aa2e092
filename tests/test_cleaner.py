"""kafkastore.cleaner: Kafka's log cleaner (kafka-storage.md section 7; LogCleanerTest and
LogCleanerManagerTest scenarios of 10.12-10.13), checked against an oracle.

The oracle is the plain definition of compaction: for every key, the latest record of a
committed (or non-transactional) batch. After a round, every key's latest record is
readable at its original offset; in the cleaned range nothing else of that key is left,
records without a key and records of aborted transactions are gone, and a tombstone stays
until ``delete.retention.ms`` after the round that stamped its batch. Expected values
come from that definition and Kafka's rules, never from an earlier run.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import pytest
from _logtools import T0, Clock, Crash, FaultFS, installed, open_log, segment_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkastore.cleaner import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    Cleaner,
    CleanerConfig,
    LogToClean,
    Throttler,
    clean,
    cleanable_offsets,
    group_segments_by_size,
)
from kafkastore.config import ConfigError
from kafkastore.errors import LogCleaningAbortedError
from kafkastore.log import Log
from kafkastore.manager import LogManager
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch, iter_batches
from kafkastore.topic import TopicPartition

SMALL = {"log.cleaner.dedupe.buffer.size": 1 << 20}   # 43,690 slots: plenty for the tests
DAY = 86_400_000


@pytest.fixture
def clock():
    return Clock()


def cfg(**kw) -> CleanerConfig:
    return CleanerConfig({**SMALL, **kw})


# -- writing logs ------------------------------------------------------------------------------


@dataclass
class Model:
    """What was appended, in offset order: ``(offset, key, value, state)`` with state
    ``"plain"``, ``"committed"``, ``"aborted"`` or ``"open"`` (a transaction without its
    marker yet)."""

    records: list = field(default_factory=list)
    open_txns: dict = field(default_factory=dict)   # producer -> indexes into records

    def latest(self, below: int | None = None) -> dict:
        """key -> (offset, value) of its latest visible record (below ``below``)."""
        out = {}
        for offset, key, value, state in self.records:
            if key is None or state not in ("plain", "committed"):
                continue
            if below is not None and offset >= below:
                continue
            out[key] = (offset, value)
        return out


class Writer:
    """Appends batches with explicit offsets (as a follower does), so tests can write
    transactional data and markers, and keeps the :class:`Model`."""

    def __init__(self, log: Log, clock: Clock) -> None:
        self.log, self.clock, self.model = log, clock, Model()

    def data(self, records, *, producer_id=-1, epoch=0, txn=False, codec=None, ts=None):
        base = self.log.log_end_offset
        ts = self.clock() if ts is None else ts
        seq = 0 if producer_id >= 0 else -1
        batch = encode_batch([(k, v, ts) for k, v in records], base_offset=base, timestamp=ts,
                             producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                             is_transactional=txn, compression=codec)
        self.log.append_batches(batch, assign_offsets=False)
        for i, (k, v) in enumerate(records):
            state = "open" if txn else "plain"
            self.model.records.append((base + i, k, v, state))
            if txn:
                self.model.open_txns.setdefault(producer_id, []).append(
                    len(self.model.records) - 1)
        return base

    def marker(self, producer_id, *, commit: bool, epoch=0):
        base = self.log.log_end_offset
        ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        self.log.append_batches(encode_control_batch(
            ctype, producer_id=producer_id, producer_epoch=epoch, base_offset=base,
            timestamp=self.clock()), assign_offsets=False)
        for i in self.model.open_txns.pop(producer_id, []):
            o, k, v, _ = self.model.records[i]
            self.model.records[i] = (o, k, v, "committed" if commit else "aborted")
        return base


def new_log(tmp_path, clock, **config) -> tuple[Log, Writer]:
    config.setdefault("cleanup_policy", "compact")
    config.setdefault("segment_bytes", 1024)
    log = open_log(tmp_path, clock, **config)
    return log, Writer(log, clock)


def records_of(log: Log, *, with_control=False):
    """``(offset, key, value)`` of every record, through Log.read, CRC-checked."""
    out, offset, end = [], log.log_start_offset, log.log_end_offset
    while offset < end:
        batches = list(log.read(offset, 1 << 20).batches(validate=True))
        if not batches:
            break
        for batch in batches:
            if with_control or not batch.is_control:
                out.extend((r.offset, _b(r.key), _b(r.value)) for r in batch
                           if r.offset >= offset)
            offset = max(offset, batch.last_offset + 1)
    return out


def _b(x):
    return None if x is None else bytes(x)


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def log_files(directory) -> dict:
    return {n: read_bytes(os.path.join(directory, n)) for n in segment_files(directory)}


def check_oracle(log: Log, model: Model, cleaned_below: int, *, tombstones_kept: bool = True):
    """The compaction invariants for a log cleaned up to ``cleaned_below``."""
    got = records_of(log)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    by_offset = {o: (k, v) for o, k, v in got}
    appended = {o: (k, v, state) for o, k, v, state in model.records}
    latest = model.latest()
    # 1. every key's latest visible record is readable at its original offset
    for key, (offset, value) in latest.items():
        if value is None and offset < cleaned_below and not tombstones_kept:
            assert offset not in by_offset, f"expired tombstone of {key!r} at {offset} kept"
            continue
        assert by_offset.get(offset) == (key, value), (
            f"latest record of {key!r} at {offset} lost: {by_offset.get(offset)!r}")
    # 2. nothing but those in the cleaned range; everything above it untouched
    for offset, key, value in got:
        assert offset in appended, f"record at {offset} was never appended"
        k, v, state = appended[offset]
        assert (key, value) == (k, v), f"record at {offset} changed"
        if offset < cleaned_below:
            assert key is not None, f"keyless record at {offset} kept"
            assert state != "aborted", f"aborted record at {offset} kept"
            assert latest.get(key, (None,))[0] == offset, (
                f"superseded record of {key!r} at {offset} kept")
    for offset, (k, v, state) in appended.items():
        if offset >= cleaned_below:
            assert offset in by_offset, f"record at {offset}, above the cleaned range, lost"


# -- the basics --------------------------------------------------------------------------------


def test_clean_keeps_the_latest_value_of_each_key(tmp_path, clock):
    """testCleanSegments: keys deduped, last value wins, offsets kept, gaps allowed."""
    log, w = new_log(tmp_path, clock)
    for i in range(60):
        w.data([(b"k%d" % (i % 7), b"v%d" % i)])
    log.roll()
    before = len(log.segments)
    assert before > 3
    end, stats = clean(log, config=cfg())
    assert end == 60
    check_oracle(log, w.model, 60)
    assert sorted(k for _, k, _ in records_of(log)) == sorted(b"k%d" % i for i in range(7))
    assert stats.messages_read == 60 and stats.messages_written == 7
    assert stats.records_removed == 53 and stats.bytes_written < stats.bytes_read
    # groups are sized by their sources: full segments stay apart, the small cleaned
    # ones are merged by the next round
    clean(log, config=cfg())
    assert len(log.segments) < before
    check_oracle(log, w.model, 60)
    # the cleaned log survives a reopen byte for byte
    snapshot = records_of(log)
    log.close()
    log = open_log(tmp_path, clock, cleanup_policy="compact", segment_bytes=1024)
    assert records_of(log) == snapshot
    log.close()


def test_the_active_segment_is_never_cleaned(tmp_path, clock):
    log, w = new_log(tmp_path, clock, segment_bytes=1 << 20)
    for i in range(20):
        w.data([(b"k", b"v%d" % i)])
    end, stats = clean(log, config=cfg())
    assert stats.rounds == 0 and end == 0
    assert len(records_of(log)) == 20
    log.roll()
    end, _ = clean(log, config=cfg())
    assert end == 20 and records_of(log) == [(19, b"k", b"v19")]
    log.close()


def test_records_without_a_key_are_removed(tmp_path, clock):
    """testCleaningWithUnkeyedMessages: invalid messages are counted and dropped."""
    log, w = new_log(tmp_path, clock)
    for i in range(10):
        w.data([(None, b"x%d" % i), (b"k%d" % (i % 2), b"v%d" % i)])
    log.roll()
    _, stats = clean(log, config=cfg())
    check_oracle(log, w.model, 20)
    assert stats.invalid_messages_read == 10
    assert [k for _, k, _ in records_of(log)] == [b"k0", b"k1"]
    log.close()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_keep_their_codec(tmp_path, clock, codec):
    log, w = new_log(tmp_path, clock)
    for i in range(12):
        w.data([(b"a", b"a%d" % i), (b"b%d" % (i % 3), b"b%d" % i), (None, b"z")], codec=codec)
    log.roll()
    clean(log, config=cfg())
    check_oracle(log, w.model, 36)
    for seg in log.segments[:-1]:
        with open(seg.log.path, "rb") as f:
            for batch in iter_batches(f.read()):
                assert batch.compression.name.lower() == codec
    log.close()


def test_offset_and_time_lookups_work_on_cleaned_segments(tmp_path, clock):
    log, w = new_log(tmp_path, clock, index_interval_bytes=1)
    for i in range(40):
        w.data([(b"k%d" % (i % 4), b"v%d" % i)], ts=T0 + i)
    log.roll()
    clean(log, config=cfg())
    # segments left empty stay (as Kafka's do) until the next round merges them; a
    # timestamp lookup would stop at the first (its largest timestamp is its mtime)
    clean(log, config=cfg())
    assert len(log.segments) == 2
    kept = [o for o, _, _ in records_of(log)]
    assert kept == [36, 37, 38, 39]
    for seg in log.segments:
        seg.offset_index.sanity_check(full=True)
        seg.time_index.sanity_check(full=True)
    # a read of a removed offset starts at the next kept batch
    first = next(iter(next(iter(log.read(10, 4096).batches()))))
    assert first.offset == 36
    assert log.offset_for_timestamp(T0 + 5).offset == 36
    assert log.offset_for_timestamp(T0 + 38).offset == 38
    log.close()


def test_cleaning_twice_gives_the_same_result(tmp_path, clock):
    log, w = new_log(tmp_path, clock)
    for i in range(50):
        w.data([(b"k%d" % (i % 9), None if i % 11 == 0 else b"v%d" % i)])
    log.roll()
    clean(log, config=cfg())
    clean(log, config=cfg())   # merges the small cleaned segments
    once = records_of(log)
    files_once = log_files(tmp_path)
    clean(log, config=cfg())
    assert records_of(log) == once
    assert log_files(tmp_path) == files_once
    log.close()


def test_a_partial_map_cleans_in_rounds(tmp_path, clock):
    """testPartialSegmentClean / build offset map partial: a map that holds only part of
    the dirty keys cleans up to what it mapped; later rounds finish the job."""
    log, w = new_log(tmp_path, clock, segment_bytes=4096)
    for i in range(400):
        w.data([(b"key-%03d" % (i % 200), b"v%d" % i)])
    log.roll()
    tiny = CleanerConfig({"log.cleaner.dedupe.buffer.size": 24 * 64,
                          "log.cleaner.io.buffer.load.factor": 0.75})   # 48 keys a round
    end, stats = clean(log, config=tiny)
    assert end == 400 and stats.rounds > 4
    check_oracle(log, w.model, 400)
    log.close()


# -- tombstones and the delete horizon ---------------------------------------------------------


def test_tombstones_stay_until_the_delete_horizon(tmp_path, clock):
    """Tombstones are kept by the first round, which stamps the delete horizon into their
    batch, and removed by a round after ``delete.retention.ms``."""
    log, w = new_log(tmp_path, clock, delete_retention_ms=1000)
    for i in range(10):
        w.data([(b"k%d" % i, b"v%d" % i)])
    for i in range(5):
        w.data([(b"k%d" % i, None)])
    log.roll()
    clean(log, config=cfg())
    check_oracle(log, w.model, 15)
    stamped = [b for seg in log.segments for b in _batches(seg) if b.record_count]
    tomb = [b for b in stamped if any(r.value is None for r in b)]
    assert tomb and all(b.has_delete_horizon and b.delete_horizon_ms == clock() + 1000
                        for b in tomb)
    assert not any(b.has_delete_horizon for b in stamped if b not in tomb)
    clock.sleep(999)
    clean(log, config=cfg())
    assert len(records_of(log)) == 10, "before the horizon the tombstones stay"
    clock.sleep(2)
    clean(log, config=cfg())
    check_oracle(log, w.model, 15, tombstones_kept=False)
    assert [k for _, k, _ in records_of(log)] == [b"k%d" % i for i in range(5, 10)]
    log.close()


def _batches(seg):
    with open(seg.log.path, "rb") as f:
        return list(iter_batches(f.read()))


# -- transactions ------------------------------------------------------------------------------


def test_aborted_transactions_are_removed(tmp_path, clock):
    """testAbortedTransactionsRemoved / testBasicTransactionAwareCleaning."""
    log, w = new_log(tmp_path, clock)
    w.data([(b"a", b"a1"), (b"b", b"b1")], producer_id=1, txn=True)
    w.data([(b"c", b"c1")])
    w.marker(1, commit=True)
    w.data([(b"a", b"a2"), (b"c", b"c2")], producer_id=2, txn=True)
    w.marker(2, commit=False)
    w.data([(b"z", b"z1")])
    log.roll()
    clean(log, config=cfg())
    check_oracle(log, w.model, log.active_segment.base_offset)
    values = {k: v for _, k, v in records_of(log)}
    assert values == {b"a": b"a1", b"b": b"b1", b"c": b"c1", b"z": b"z1"}
    log.close()


def test_markers_go_in_two_rounds_once_their_transaction_is_gone(tmp_path, clock):
    """testCommitMarkerRemoval / testAbortMarkerRemoval: a marker whose transaction left
    nothing is stamped with the delete horizon, then removed after it."""
    log, w = new_log(tmp_path, clock, delete_retention_ms=100)
    w.data([(b"a", b"1")], producer_id=1, txn=True)
    w.marker(1, commit=True)
    w.data([(b"b", b"1")], producer_id=2, txn=True)
    w.marker(2, commit=False)
    w.data([(b"a", b"2")])       # supersedes the committed record
    w.data([(b"q", b"x")])
    log.roll()

    def markers():
        return {b.base_offset: b.delete_horizon_ms if b.has_delete_horizon else None
                for seg in log.segments for b in _batches(seg) if b.is_control}

    config = cfg()
    clock.sleep(DAY)   # producers long gone: the log's expiration forgets them
    assert log.remove_expired_producers() == 2
    clean(log, config=config)
    # round 1: the transactions' batches were still there, so both markers stay as they are
    assert markers() == {1: None, 3: None}
    assert [(k, v) for _, k, v in records_of(log)] == [(b"a", b"2"), (b"q", b"x")]
    clean(log, config=config)
    # round 2: nothing of either transaction is left: the markers get the delete horizon
    assert markers() == {1: clock() + 100, 3: clock() + 100}
    clock.sleep(99)
    clean(log, config=config)
    assert set(markers()) == {1, 3}, "before the horizon the markers stay"
    clock.sleep(2)
    clean(log, config=config)
    assert markers() == {}, "after the horizon the markers go"
    check_oracle(log, w.model, log.active_segment.base_offset)
    log.close()


def test_an_undecided_transaction_is_not_cleaned(tmp_path, clock):
    """Undecided transactional data (above the last stable offset) is not cleanable."""
    log, w = new_log(tmp_path, clock, segment_bytes=100)   # one batch a segment
    w.data([(b"k", b"1")])
    w.data([(b"k", b"2")])
    w.data([(b"k", b"3")], producer_id=5, txn=True)   # no marker yet
    w.data([(b"k", b"4")])
    log.roll()
    first, uncleanable, _ = cleanable_offsets(log, None, clock(), 2)
    assert (first, uncleanable) == (0, 2)
    end, _ = clean(log, config=cfg())
    assert end <= 2
    assert [o for o, _, _ in records_of(log)] == [1, 2, 3]
    log.close()


def test_the_last_batch_of_an_active_producer_is_kept_empty(tmp_path, clock):
    """testDuplicateCheckAfterCleaning: an active producer's last batch survives (empty),
    so its sequence state does; once the producer expired it may go."""
    log, w = new_log(tmp_path, clock)
    w.data([(b"k", b"1")], producer_id=7, epoch=3)
    w.data([(b"k", b"2")])
    w.data([(b"x", b"1")])
    log.roll()
    clean(log, config=cfg())
    kept = [b for seg in log.segments for b in _batches(seg)]
    mine = [b for b in kept if b.producer_id == 7]
    assert len(mine) == 1 and mine[0].record_count == 0
    assert (mine[0].last_offset, mine[0].producer_epoch, mine[0].base_sequence) == (0, 3, 0)
    check_oracle(log, w.model, 3)
    clock.sleep(DAY)
    clean(log, config=cfg())   # idle, but the log's state still holds the producer
    assert [b.base_offset for seg in log.segments for b in _batches(seg)
            if b.producer_id == 7] == [0]
    assert log.remove_expired_producers() == 1   # the log's producer.id.expiration.ms
    clean(log, config=cfg())
    assert not [b for seg in log.segments for b in _batches(seg) if b.producer_id == 7]
    log.close()


# -- crash safety and concurrency --------------------------------------------------------------


def _crashable_log(tmp_path, clock):
    log, w = new_log(tmp_path, clock, segment_bytes=700)
    for i in range(80):
        w.data([(b"k%d" % (i % 6), b"v%d" % i)])
    log.roll()
    return log, w


def check_crash_state(log: Log, model: Model) -> None:
    """After a crash mid-round each group of segments is old or new: every key's latest
    record is there at its offset, every record is one that was appended, unchanged,
    and no offset appears twice."""
    got = records_of(log)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "an offset appears twice or out of order"
    appended = {o: (k, v) for o, k, v, _ in model.records}
    for offset, key, value in got:
        assert appended.get(offset) == (key, value), f"record at {offset} is not original"
    present = set(offsets)
    for key, (offset, _) in model.latest().items():
        assert offset in present, f"the latest record of {key!r} (offset {offset}) is lost"


def test_a_crash_at_any_step_leaves_the_old_or_the_new_log(tmp_path, clock):
    """LogCleanerTest.testRecoveryAfterCrash: crash before each file system change of a
    round (the .cleaned writes, the renames, the deletions), reopen: the oracle holds."""
    probe = FaultFS()
    with installed(probe):
        log, w = _crashable_log(tmp_path / "probe", clock)
        start = probe.calls["any"]
        clean(log, config=cfg())
        steps = probe.calls["any"] - start
        log.close()
    assert steps > 10
    for n in range(1, steps + 1):
        d = tmp_path / f"crash{n}"
        fs = FaultFS()
        with installed(fs):
            log, w = _crashable_log(d, clock)
            fs.faults = {"any": {fs.calls["any"] + n: "crash"}}
            with pytest.raises(Crash):
                clean(log, config=cfg())
        log.close_handlers()
        reopened = open_log(d, clock, cleanup_policy="compact", segment_bytes=700)
        try:
            check_crash_state(reopened, w.model)
            assert not [f for f in os.listdir(d) if f.endswith((".cleaned", ".swap"))]
            clean(reopened, config=cfg())        # and it cleans fine afterwards
            check_oracle(reopened, w.model, 80)
        finally:
            reopened.close()


def test_reading_while_the_cleaner_swaps_segments(tmp_path, clock):
    log, w = new_log(tmp_path, clock, segment_bytes=2048)
    for i in range(600):
        w.data([(b"k%d" % (i % 50), b"v%d" % i)])
    log.roll()
    latest = w.model.latest()
    errors, reads = [], [0]
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen = {k: (o, v) for o, k, v in records_of(log)}
                assert all(seen[k] == latest[k] for k in latest)
                reads[0] += 1
                # (a pause between reads: a thread that never lets go of the GIL turns
                # every I/O call of the cleaner into a 5 ms switch-interval wait)
                stop.wait(0.002)
            except Exception as exc:   # the test fails on any
                errors.append(exc)
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(3):
            clean(log, config=cfg())
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    assert reads[0] > 0
    check_oracle(log, w.model, 600)
    log.close()


def test_a_truncation_during_the_round_aborts_it(tmp_path, clock):
    log, w = new_log(tmp_path, clock)
    for i in range(40):
        w.data([(b"k%d" % (i % 3), b"v%d" % i)])
    log.roll()
    calls = [0]

    def check_done(checked_log):
        calls[0] += 1
        if calls[0] == 3:
            checked_log.truncate_to(5)

    cleaner = Cleaner(cfg(), check_done=check_done)
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean(LogToClean(None, log, 0, log.active_segment.base_offset))
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".cleaned")]
    assert [o for o, _, _ in records_of(log)] == [0, 1, 2, 3, 4]
    log.close()


# -- choosing logs, checkpoints and the manager -------------------------------------------------


def test_group_segments_by_size(tmp_path, clock):
    """testSegmentGrouping: groups bounded by segment.bytes and index sizes."""
    log, w = new_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=1)
    for i in range(30):
        w.data([(b"k%d" % i, b"v%d" % i)])
    log.roll()
    segs = list(log.segments[:-1])
    assert len(segs) > 4

    def check(groups, limit, measure):
        assert [s for g in groups for s in g] == segs
        for i, g in enumerate(groups):
            assert len(g) == 1 or sum(map(measure, g)) <= limit
            if i + 1 < len(groups):   # greedy: the next segment did not fit
                assert sum(map(measure, g)) + measure(groups[i + 1][0]) > limit

    limit = segs[0].size * 2
    groups = group_segments_by_size(segs, limit, 1 << 20, log.log_end_offset)
    check(groups, limit, lambda seg: seg.size)
    assert len(groups) < len(segs)

    def index_bytes(seg):
        return seg.offset_index.entries * 8

    limit = index_bytes(segs[0]) * 2
    groups = group_segments_by_size(segs, 1 << 30, limit, log.log_end_offset)
    check(groups, limit, index_bytes)
    # offsets of a group must fit one segment (relative offsets are int32)
    assert len(group_segments_by_size(segs, 1 << 30, 1 << 20, (1 << 31) + 10)) == 2
    log.close()


def test_cleaner_config_names_defaults_and_errors():
    c = CleanerConfig()
    assert (c.enable_cleaner, c.num_threads, c.dedupe_buffer_size, c.io_buffer_size,
            c.dedupe_buffer_load_factor, c.backoff_ms) == (True, 1, 134217728, 524288, 0.9,
                                                           15000)
    c = CleanerConfig({"log.cleaner.threads": "2", "log_cleaner_enable": "false"},
                      backoff_ms=5)
    assert (c.num_threads, c.enable_cleaner, c.backoff_ms, c.map_memory) == (
        2, False, 5, 67108864)
    for bad in ({"log.cleaner.threads": 0}, {"log.cleaner.io.buffer.load.factor": 1.5},
                {"log.cleaner.nope": 1}, {"log.cleaner.dedupe.buffer.size": 24},
                {"log.cleaner.enable": "maybe"}):
        with pytest.raises(ConfigError):
            CleanerConfig(bad)


def test_throttler_sleeps_to_the_target_rate():
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    t = Throttler(1000.0, 300, clock=lambda: now[0], sleep=sleep)
    now[0] = 0.5
    t.maybe_throttle(2000)      # 2000 B in 0.5 s at 1000 B/s: sleep 1.5 s
    assert slept == [pytest.approx(1.5)]
    now[0] += 1.0
    t.maybe_throttle(500)       # within the rate: no sleep
    assert len(slept) == 1


def manager(tmp_path, clock, **kw):
    return LogManager(str(tmp_path), {"cleanup.policy": "compact", "segment.bytes": 1024},
                      time_ms=clock, background=False,
                      cleaner_config={**SMALL, "log.cleaner.backoff.ms": 1000}, **kw)


def _fill(log, clock, n, keys):
    w = Writer(log, clock)
    for i in range(n):
        w.data([(b"k%d" % (i % keys), b"v%d" % i)])
    log.roll()
    return w


def test_manager_cleans_the_dirtiest_log_and_checkpoints_it(tmp_path, clock):
    """grabFilthiestCompactedLog picks the highest dirty ratio; the checkpoint moves."""
    m = manager(tmp_path, clock)
    a, b = m.get_or_create("a", 0), m.get_or_create("b", 0)
    wa, wb = _fill(a, clock, 40, 40), _fill(b, clock, 40, 2)
    ranked = m.cleaner.grab_filthiest_compacted_log()
    assert ranked is not None
    m.cleaner.done_cleaning(ranked[1].tp)
    assert ranked[1].cleanable_ratio == 1.0
    m.run_scheduled_tasks(clock() + 1000)          # one round
    m.run_scheduled_tasks(clock() + 2000)          # and the other
    path = os.path.join(str(tmp_path), CLEANER_OFFSET_CHECKPOINT_FILE)
    text = read_bytes(path).decode().split("\n")
    assert sorted(text[2:4]) == ["a 0 40", "b 0 40"]
    check_oracle(a, wa.model, 40)
    check_oracle(b, wb.model, 40)
    # nothing dirty: no round
    assert m.cleaner.clean_filthiest_log() is None
    m.close()


def test_a_log_held_back_by_an_undecided_transaction_yields_to_the_next(tmp_path, clock):
    """Ranking skips the header walk; the chosen log is walked, and a log whose dirty part
    is all behind an undecided transaction (not cleanable) gives way to the next one."""
    m = manager(tmp_path, clock)
    held, ready = m.get_or_create("held", 0), m.get_or_create("ready", 0)
    w = Writer(held, clock)
    w.data([(b"t", b"1")], producer_id=9, txn=True)   # never committed
    for i in range(30):
        w.data([(b"k%d" % (i % 2), b"v%d" % i)])
    held.roll()
    _fill(ready, clock, 20, 2)
    chosen = m.cleaner.grab_filthiest_compacted_log()
    assert chosen is not None and chosen[1].tp == TopicPartition("ready", 0)
    m.cleaner.done_cleaning(chosen[1].tp)
    assert m.clean("held", 0) is None          # nothing below the transaction
    assert len(records_of(held)) == 31
    m.close()


def test_the_cleaner_task_follows_log_cleaner_enable(tmp_path, clock):
    m = manager(tmp_path, clock)
    assert "kafka-log-cleaner-thread-0" in m.run_scheduled_tasks(clock() + 1000)
    m.close()
    off = LogManager(str(tmp_path), time_ms=clock, background=False,
                     cleaner_config={**SMALL, "log.cleaner.enable": False})
    assert "kafka-log-cleaner-thread-0" not in off.run_scheduled_tasks(clock() + 10**9)
    off.close()


def test_min_cleanable_dirty_ratio_and_max_compaction_lag(tmp_path, clock):
    m = manager(tmp_path, clock, topic_configs={
        "t": {"min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}})
    log = m.get_or_create("t", 0)
    _fill(log, clock, 10, 10)
    m.clean("t", 0)                      # on demand: ratio does not matter
    w = Writer(log, clock)
    w.data([(b"k1", b"new")])
    log.roll()
    assert m.cleaner.grab_filthiest_compacted_log() is None   # ratio below 0.99
    clock.sleep(60_001)
    chosen = m.cleaner.grab_filthiest_compacted_log()
    assert chosen is not None and chosen[1].needs_compaction_now
    m.cleaner.done_cleaning(chosen[1].tp)
    m.close()


def test_a_corrupt_segment_marks_the_log_uncleanable(tmp_path, clock):
    m = manager(tmp_path, clock)
    bad, good = m.get_or_create("bad", 0), m.get_or_create("good", 0)
    _fill(bad, clock, 30, 3)
    wg = _fill(good, clock, 30, 3)
    path = bad.segments[0].log.path
    with open(path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert m.clean("bad", 0) is None
    assert list(m.cleaner.uncleanable) == [TopicPartition("bad", 0)]
    reason = m.cleaner.uncleanable[TopicPartition("bad", 0)]
    assert "CRC" in reason or "orrupt" in reason, reason
    assert m.clean("good", 0) is not None
    check_oracle(good, wg.model, 30)
    assert m.cleaner.clean_filthiest_log() is None   # bad is skipped from now on
    m.close()


def test_manager_truncation_lowers_the_cleaner_checkpoint(tmp_path, clock):
    m = manager(tmp_path, clock)
    log = m.get_or_create("t", 0)
    _fill(log, clock, 30, 3)
    m.clean("t", 0)
    tp = TopicPartition("t", 0)
    assert m.cleaner.checkpoints(str(tmp_path))[tp] == 30
    m.truncate_to("t", 0, 10)
    assert m.cleaner.checkpoints(str(tmp_path))[tp] == 10
    m.delete("t", 0)
    assert m.cleaner.checkpoints(str(tmp_path)) == {}
    m.close()


# -- the property test -------------------------------------------------------------------------

KEYS = [b"k%d" % i for i in range(6)]
op = st.one_of(
    st.tuples(st.just("data"), st.lists(st.tuples(st.sampled_from(KEYS + [None]),
                                                    st.sampled_from([b"v", b"w", None])),
                                          min_size=1, max_size=4),
              st.sampled_from([None, "gzip", "lz4", "zstd"])),
    st.tuples(st.just("txn"), st.integers(1, 3),
              st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([b"t", None])),
                       min_size=1, max_size=3)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("tick"), st.integers(0, 3000)),
)


@settings(max_examples=int(os.environ.get("KS_PROP_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=40))
def test_property_against_the_oracle(tmp_path_factory, ops):
    clock = Clock()
    d = tmp_path_factory.mktemp("prop")
    log, w = new_log(d, clock, segment_bytes=400, delete_retention_ms=2000)
    cleaned_below = 0
    counter = 0
    try:
        for item in ops:
            kind = item[0]
            if kind == "data":
                counter += 1
                w.data([(k, None if v is None else v + b"%d" % counter) for k, v in item[1]],
                       codec=item[2])
            elif kind == "txn":
                counter += 1
                w.data([(k, None if v is None else v + b"%d" % counter) for k, v in item[2]],
                       producer_id=item[1], txn=True)
            elif kind == "end" and item[1] in w.model.open_txns:
                w.marker(item[1], commit=item[2])
            elif kind == "roll" and log.active_segment.size:
                log.roll()
            elif kind == "tick":
                clock.sleep(item[1])
            elif kind == "clean":
                end, _ = clean(log, config=cfg())
                cleaned_below = max(cleaned_below, end)
                # the oracle, with tombstones only guaranteed before their horizon
                _check_property(log, w.model, cleaned_below)
        if log.active_segment.size:
            log.roll()
        end, _ = clean(log, config=cfg())
        _check_property(log, w.model, max(cleaned_below, end))
    finally:
        log.close()


def _check_property(log, model, cleaned_below):
    got = records_of(log)
    by_offset = {o: (k, v) for o, k, v in got}
    appended = {o: (k, v, s) for o, k, v, s in model.records}
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
    for key, (offset, value) in model.latest().items():
        if value is not None:
            assert by_offset.get(offset) == (key, value), f"latest of {key!r} lost"
    # a round's map covers up to its end offset: in the cleaned range only what is the
    # latest of its key within that range is left (later rounds see later records)
    latest_in_range = model.latest(below=cleaned_below)
    for offset, key, value in got:
        k, v, state = appended[offset]
        assert (key, value) == (k, v)
        if offset < cleaned_below and state in ("plain", "committed", "aborted"):
            assert key is not None and state != "aborted"
            assert latest_in_range[key][0] == offset
    for offset, (k, v, state) in appended.items():
        if offset >= cleaned_below or state == "open":
            assert offset in by_offset, f"uncleaned record at {offset} lost"
    # offset lookups still find every record through the (rebuilt) indexes
    for offset, key, value in got[::max(1, len(got) // 15)]:
        first = next(iter(log.read(offset, 1 << 20).records()))
        assert (first.offset, _b(first.key), _b(first.value)) == (offset, key, value)
