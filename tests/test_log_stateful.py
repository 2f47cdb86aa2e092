"""A hypothesis state machine driving kafkastore.log.Log against an in-memory model.

reliability.md M1. The model is the list of batches the log was given, each a list of
``Rec(offset, key, value, timestamp)`` with the offsets the append returned, plus the log
start offset, the log end offset and ``flushed``: the end offset at the last flush,
roll or clean reopen (every record below it was fsynced). Rules: append (random small
batches, codecs none/gzip/lz4/zstd), append_batches (pre-encoded, leader and follower
path), a follower roll to a later offset, reads at random offsets and sizes, offsets by
timestamp (-1/-2/-3 and real ones), roll, truncate_to, truncate_fully_and_start_at,
delete_records, deletion of the segments below the log start offset (retention's first
pass), delayed deletion on the injected clock, flush, clean close/reopen, and
crash/reopen: the
directory is copied while the log is open, every ``.log`` loses a random part of what was
written after its last fsync (``_logtools.FaultFS`` knows), and the copy is opened without
the clean-shutdown marker. Invariants: nothing flushed is lost, offsets never go
backwards, and what is read back is exactly the model's records up to the log end offset.

Truncation targets are batch boundaries and segment bases (a follower's divergence
point usually is one) and any offset up to the log end, inside a batch included (the
batch then goes whole and the end offset is the target, kafka-storage.md 5.8).

Budget: 30 examples of up to 30 steps in the default profile (a few seconds); the ``ci``
(60 x 50) and ``expensive`` (600 x 50, about 40 s) profiles of tests/conftest.py scale it
through ``strategies.scaled``.
"""

from __future__ import annotations

import random
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from _logtools import (
    T0,
    Clock,
    FaultFS,
    Rec,
    abandon,
    crash_image,
    disk_records,
    open_log,
    read_all,
    rec_of,
)
from kafkastore import _fileio
from kafkastore.errors import OffsetOutOfRangeError, RecordTooLargeError
from kafkastore.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafkastore.records import encode_batch
from strategies import scaled

CFG = dict(segment_bytes=2000, index_interval_bytes=100, segment_index_bytes=4096,
           file_delete_delay_ms=1000)
CODECS = ("none", "gzip", "lz4", "zstd")

keys = st.one_of(st.none(), st.binary(max_size=8))
values = st.one_of(st.none(), st.binary(max_size=60), st.binary(min_size=200, max_size=300))
timestamps = st.integers(T0 - 1000, T0 + 1000)
record_lists = st.lists(st.tuples(keys, values, timestamps), min_size=1, max_size=5)


def _recs(first_offset, recs):
    return [Rec(first_offset + i, k, v, ts) for i, (k, v, ts) in enumerate(recs)]


def _expected_offset_for_timestamp(spans, recs, target, start):
    """kafka-storage.md 5.6 / 4.8 from the records: the first segment whose largest
    timestamp reaches ``target``, then its first record at or after ``target`` and at or
    after the log start offset; None if that segment has none. A segment without
    timestamps counts with its file's mtime (4.9), which is later than every timestamp
    drawn here."""
    for lo, hi in spans:
        inside = [r for r in recs if lo <= r.offset < hi]
        if not inside:
            return None
        if max(r.timestamp for r in inside) >= target:
            for r in inside:
                if r.timestamp >= target and r.offset >= start:
                    return (r.timestamp, r.offset)
            return None
    return None


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="kafkastore-stateful-")
        self.fs = FaultFS()
        self.old_fs = _fileio.install(self.fs)
        self.clock = Clock()
        self.n_dirs = 0
        self.log = None
        self.batches: list[list[Rec]] = []
        self.lso = 0
        self.leo = 0
        self.flushed = 0

    def _new_dir(self) -> str:
        self.n_dirs += 1
        return f"{self.root}/p-{self.n_dirs}"

    @initialize()
    def start(self) -> None:
        self.dir = self._new_dir()
        self.log = open_log(self.dir, self.clock, **CFG)

    def teardown(self) -> None:
        try:
            if self.log is not None and not self.log.closed:
                self.log.close()
        finally:
            _fileio.install(self.old_fs)
            shutil.rmtree(self.root, ignore_errors=True)

    # -- model helpers ---------------------------------------------------------------------

    @property
    def records(self) -> list[Rec]:
        return [r for b in self.batches for r in b]

    @property
    def visible(self) -> list[Rec]:
        return [r for r in self.records if r.offset >= self.lso]

    def boundaries(self) -> list[int]:
        """Offsets where a batch starts or ends, segment base offsets, start and end."""
        out = {0, self.lso, self.leo}
        if self.log is not None:
            out.update(s.base_offset for s in self.log.segments)
        for b in self.batches:
            out.add(b[0].offset)
            out.add(b[-1].offset + 1)
        return sorted(out)

    # -- appends ---------------------------------------------------------------------------

    @rule(recs=record_lists, codec=st.sampled_from(CODECS))
    def append(self, recs, codec):
        info = self.log.append(recs, compression=codec)
        assert info.first_offset == self.leo
        assert info.last_offset == self.leo + len(recs) - 1
        self.batches.append(_recs(self.leo, recs))
        self.leo += len(recs)

    @rule(sets=st.lists(record_lists, min_size=1, max_size=3), codec=st.sampled_from(CODECS),
          leader=st.booleans())
    def append_batches(self, sets, codec, leader):
        data = b""
        base = self.leo
        largest = 0
        for recs in sets:
            # a leader takes batches as producers send them (base offset 0) and assigns
            # the offsets; a follower keeps the offsets in the bytes
            batch = encode_batch(recs, base_offset=0 if leader else base, compression=codec)
            largest = max(largest, len(batch))
            data += batch
            base += len(recs)
        if (largest if leader else len(data)) > CFG["segment_bytes"]:
            # kafka-storage.md 5.3 step 6: a set larger than a segment is refused whole (a
            # leader takes each batch as one produce, so the limit is per batch)
            try:
                self.log.append_batches(data, assign_offsets=leader)
            except RecordTooLargeError:
                return
            raise AssertionError("a set larger than segment.bytes was accepted")
        info = self.log.append_batches(data, assign_offsets=leader)
        assert (info.first_offset, info.last_offset) == (self.leo, base - 1)
        for recs in sets:
            self.batches.append(_recs(self.leo, recs))
            self.leo += len(recs)

    @rule(gap=st.integers(1, 40), recs=record_lists)
    def follower_roll_and_append(self, gap, recs):
        """A follower rolls to the first offset of the next batch it fetched (offsets may
        jump, as after compaction on the leader) and appends it there."""
        expected = self.leo + gap
        self.log.roll(expected)
        assert self.log.active_segment.base_offset == expected
        assert self.log.log_end_offset == self.leo
        self.flushed = self.leo
        data = encode_batch(recs, base_offset=expected)
        info = self.log.append_batches(data, assign_offsets=False)
        assert (info.first_offset, info.last_offset) == (expected, expected + len(recs) - 1)
        self.batches.append(_recs(expected, recs))
        self.leo = expected + len(recs)

    # -- reads -----------------------------------------------------------------------------

    @rule(data=st.data(), max_bytes=st.sampled_from([0, 1, 60, 300, 1 << 20]),
          min_one=st.booleans())
    def read(self, data, max_bytes, min_one):
        offset = data.draw(st.integers(self.lso, self.leo), label="offset")
        got = [rec_of(r) for r in self.log.read(offset, max_bytes, min_one).records()]
        want = [r for r in self.visible if r.offset >= offset]
        assert got == want[:len(got)]
        if min_one and want:
            # the whole first batch holding `offset` (or the next one after a gap)
            first = next(b for b in self.batches if b[-1].offset >= offset)
            assert len(got) >= len([r for r in first if r.offset >= offset])

    @rule(below=st.booleans())
    def read_out_of_range(self, below):
        offset = self.lso - 1 if below else self.leo + 1
        if offset < 0:
            return
        try:
            self.log.read(offset, 100)
        except OffsetOutOfRangeError:
            pass
        else:
            raise AssertionError(f"read({offset}) outside [{self.lso}, {self.leo}] did not raise")

    @rule()
    def read_everything(self):
        assert read_all(self.log) == self.visible

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        target = data.draw(st.integers(T0 - 1010, T0 + 1010), label="target")
        bases = [s.base_offset for s in self.log.segments] + [self.leo]
        spans = list(zip(bases, bases[1:]))
        got = self.log.offset_for_timestamp(target)
        want = _expected_offset_for_timestamp(spans, self.records, target, self.lso)
        assert (None if got is None else tuple(got[:2])) == want
        assert self.log.offset_for_timestamp(EARLIEST_TIMESTAMP)[1] == self.lso
        assert self.log.offset_for_timestamp(LATEST_TIMESTAMP)[1] == self.leo
        recs = self.records
        if recs:
            top = max(r.timestamp for r in recs)
            first_top = next(r for r in recs if r.timestamp == top)
            assert tuple(self.log.offset_for_timestamp(MAX_TIMESTAMP)[:2]) == (
                top, first_top.offset)

    # -- roll, flush -----------------------------------------------------------------------

    @rule()
    def roll(self):
        self.log.roll()
        assert self.log.active_segment.base_offset == self.leo
        self.flushed = self.leo  # kafka-storage.md 5.4: everything below the new segment

    @rule()
    def flush(self):
        self.log.flush()
        assert self.log.recovery_point == self.leo
        self.flushed = self.leo

    # -- truncation and deletion -----------------------------------------------------------

    @rule(data=st.data())
    def truncate_to(self, data):
        target = data.draw(st.one_of(st.sampled_from(self.boundaries()),
                                     st.integers(0, self.leo), st.just(self.leo + 1)),
                           label="target")
        bases = [s.base_offset for s in self.log.segments]
        changed = self.log.truncate_to(target)
        if target >= self.leo:
            assert changed is False
            return
        assert changed is True
        if target < bases[0]:
            # kafka-storage.md 5.8: truncateFullyAndStartAt(target)
            self.batches = []
            assert (self.log.log_start_offset, self.log.log_end_offset) == (target, target)
            self.lso = self.leo = target
        else:
            self.batches = [b for b in self.batches if b[-1].offset < target]
            # kafka-storage.md 5.8: LEO = target, also when the batch holding it went whole
            assert self.log.log_end_offset == target
            self.leo = target
            self.lso = min(self.lso, target)
        self.flushed = min(self.flushed, self.leo)

    @rule(data=st.data())
    def truncate_fully_and_start_at(self, data):
        new_offset = data.draw(st.integers(0, self.leo + 50), label="new_offset")
        self.log.truncate_fully_and_start_at(new_offset)
        assert [s.base_offset for s in self.log.segments] == [new_offset]
        self.batches = []
        self.lso = self.leo = self.flushed = new_offset

    @rule(data=st.data())
    def delete_records(self, data):
        start = data.draw(st.integers(self.lso, self.leo), label="start")
        assert self.log.delete_records(start) == max(start, self.lso)
        self.lso = max(self.lso, start)
        try:
            self.log.delete_records(self.leo + 1)
        except OffsetOutOfRangeError:
            pass
        else:
            raise AssertionError("delete_records past the log end offset did not raise")

    @rule()
    def delete_segments_below_start(self):
        """The log-start-offset pass of retention (kafka-storage.md 6.3)."""
        segs = self.log.segments
        doomed = [s for s, nxt in zip(segs, segs[1:]) if nxt.base_offset <= self.lso]
        assert self.log.delete_segments(doomed) == len(doomed)
        first = self.log.segments[0].base_offset
        self.batches = [b for b in self.batches if b[-1].offset >= first]
        assert self.log.log_start_offset == self.lso

    @rule(ms=st.integers(0, 1500))
    def time_passes(self, ms):
        self.clock.sleep(ms)
        self.log.delete_pending_segments()

    # -- reopen ----------------------------------------------------------------------------

    @rule()
    def close_and_reopen(self):
        self.log.close()
        self.log.close()  # idempotent
        self.log = open_log(self.dir, self.clock, log_start_offset=self.lso, **CFG)
        assert self.log.recovery_point == self.log.log_end_offset == self.leo
        # only data below the log start offset may go (LEO < start on open: 5.10 step 7)
        first = self.log.segments[0].base_offset
        assert all(b[-1].offset < self.lso for b in self.batches if b[0].offset < first)
        self.batches = [b for b in self.batches if b[0].offset >= first]
        self.flushed = self.leo

    @rule(seed=st.integers(0, 2**32 - 1), mode=st.sampled_from(["random", "random", "all",
                                                                 "none"]),
          with_recovery_point=st.booleans())
    def crash_and_reopen(self, seed, mode, with_recovery_point):
        old = self.log
        rp = old.recovery_point if with_recovery_point else 0
        # with nothing lost the log reopens at the end of its data (or of an empty active
        # segment); truncate_to may have left the end offset above it (Kafka: LEO = target)
        data_end = max([b[-1].offset + 1 for b in self.batches]
                       + [old.segments[-1].base_offset])
        new_dir = self._new_dir()
        crash_image(self.dir, new_dir, self.fs, random.Random(seed), mode)
        abandon(old)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = new_dir
        # the copy has no clean-shutdown marker: an unclean open of a standalone log
        self.log = log = open_log(new_dir, self.clock, recovery_point=rp,
                                  log_start_offset=self.lso, **CFG)
        leo = log.log_end_offset
        assert leo <= self.leo, "the log end offset went past what was written"
        assert leo in self.boundaries(), (leo, self.boundaries())
        assert log.log_start_offset == self.lso
        got = read_all(log)
        first = log.segments[0].base_offset  # below it everything went (LEO < start: wiped)
        kept = [b for b in self.batches if b[-1].offset < leo and b[0].offset >= first]
        want = [r for b in kept for r in b if r.offset >= self.lso]
        assert got == want
        required = [r for r in self.visible if r.offset < self.flushed]
        assert len(got) >= len(required), (
            f"flushed records lost: kept {len(got)} of {len(required)} below {self.flushed}")
        if mode == "none":
            assert leo == max(data_end, self.lso)
        self.batches = kept
        self.leo = leo
        self.flushed = leo  # what survived is on disk now
        assert log.recovery_point <= leo

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def offsets(self):
        if self.log is None:
            return
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.lso
        assert self.lso <= self.leo
        assert self.log.recovery_point <= self.leo
        assert self.log.active_segment.base_offset <= self.leo


LogMachine.TestCase.settings = scaled(
    0.3, stateful_step_count=30 if settings.default.max_examples <= 100 else 50,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_log_machine = LogMachine.TestCase


def test_disk_records_after_machine_close(tmp_path):
    """The files a closed log leaves parse end to end (a smoke run outside hypothesis)."""
    old = _fileio.install(FaultFS())
    try:
        log = open_log(tmp_path, Clock(), **CFG)
        model = []
        for i in range(40):
            info = log.append([(b"k", b"v" * (i % 7), T0 + i)], compression=CODECS[i % 4])
            model.append(Rec(info.first_offset, b"k", b"v" * (i % 7), T0 + i))
        log.close()
        assert disk_records(tmp_path) == model
    finally:
        _fileio.install(old)
