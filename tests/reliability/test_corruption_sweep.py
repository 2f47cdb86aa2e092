"""Corruption sweeps over a small multi-segment log (issue 8 "Hostile input"; reliability.md
§5.2 rows P1-P3, P12, C3, I2-I4).

One log of three segments (v2 batches of every codec, a batch with headers, offset and
time indexes with entries; about 2 KB in all) is built once. Then, for every byte position
of every ``.log``, ``.index`` and ``.timeindex`` file, the byte is changed (short tier: xor
0x01, xor 0x80, 0x00, 0xFF; long tier: all 255 other values) and, separately, every file
is cut to every length below its size. Each damaged copy is opened and read back, one
batch per read (so every read goes through an offset index lookup), plus one
``offset_for_timestamp`` lookup per original batch, in up to three ways a real reopen
trusts the files:

``recover-all``
    an unclean open with no recovery point: every segment is recovered (CRC-checked,
    indexes rebuilt);
``recovery-point``
    an unclean open whose recovery point claims everything was flushed: only the active
    (last) segment is recovered, the others are trusted as a ``LogManager`` trusts them;
``clean``
    an open after a clean shutdown: nothing is recovered, every file is trusted, and the
    index content checks run at first use.

The oracle, for every case:

1. The open and every read finish within :data:`DEADLINE` seconds of CPU time, and fail, if they
   fail, only with a :class:`~kafkastore.errors.KafkaStoreError`; never another exception
   (nor a crash or hang, which would end the run). A read error ends the reading: what was
   returned before it is checked like a complete result.
2. Exactness: every record returned equals the record appended at that offset (offset,
   key, value, timestamp, headers), and offsets strictly increase. One exception: bytes
   0-7 of a batch (its base offset) lie outside every checksum of Kafka's v2 format (a
   broker assigns offsets without recomputing the CRC). A change there is caught only
   where it breaks the order of offsets, so for those positions the records returned
   must be original records in their original order (key, value, timestamp, headers),
   and their offsets may differ.
3. No hole, with two precisely allowed exceptions. (a) A segment whose ``.log`` lost
   entries without a trace in the bytes (cut at an entry boundary, or a trusted segment
   whose tail no longer parses) ends early, and the next segment still starts at its base
   offset: the hole must run up to a segment base offset. Kafka's log behaves the same
   way; gaps between segments are legal (compaction makes them). (b) In a trusted
   segment the read path finds a batch by the index and by the batch headers' offsets
   (its ``lastOffsetDelta``), which it checks against the CRC only in the batch it
   returns, as Kafka's does: an index entry changed to a smaller offset that still
   passes the index checks, or a ``lastOffsetDelta`` made negative, makes a read step
   over batches. The hole must then lie inside the damaged segment.
4. Exact results where the damage is in a recovered segment: a changed ``.log`` byte in a
   CRC-covered field or the length or magic byte of batch ``b`` gives exactly the records
   below ``b`` and no error (recovery cuts the segment there and deletes the later
   segments); a changed partition leader epoch (bytes 12-15, not covered by the CRC)
   gives everything. A ``.log`` cut at byte ``c`` gives exactly the batches wholly below
   ``c``, plus the later segments when ``c`` is an entry boundary (nothing to truncate)
   or the segment is trusted; nothing later otherwise. Every change or cut of an index
   file of a recovered segment, and every cut of any index file, gives everything with
   the right timestamp lookups (the index is rebuilt or its short form still serves).
   A change in a trusted segment's CRC-covered bytes is detected on read as a typed
   :class:`~kafkastore.errors.CorruptRecordError` (or, for its length field, ends that
   segment early, rule 3a).

Timestamp lookups: when everything was read back and no index of a trusted segment was
changed, ``offset_for_timestamp(ts)`` gives the first original offset whose timestamp is
>= ``ts``; otherwise it gives None or an original offset, or a typed error.

Cases are run in one loop per test, not parametrized: each is a few milliseconds. Sync
calls go to a file system that skips them (nothing here is about durability), so the
sweep costs CPU, not disk flushes.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import NamedTuple

import pytest
from _logtools import Clock, NoSyncFS, conf, installed, read_all
from _reliability import tiered

from kafkastore.config import LogConfig
from kafkastore.errors import CorruptRecordError, KafkaStoreError
from kafkastore.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME
from kafkastore.log import Log
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME
from kafkastore.records import scan_batches

#: CPU seconds one case (open, every read and lookup, close) may take. CPU time of this
#: thread, not wall-clock time: a second CPU-bound process on a 2-CPU machine (or a shared
#: CI runner) must not fail a case; a case that loops on hostile bytes still does, and a
#: hang ends in the test's timeout.
DEADLINE = 5.0
SHORT_VALUES = (lambda b: b ^ 0x01, lambda b: b ^ 0x80, lambda b: 0x00, lambda b: 0xFF)
MODES = ("recover-all", "recovery-point", "clean")
#: Byte changes: which modes each value is run in (the short tier spends its time where
#: the outcomes differ most: full recovery and full trust; the long tier runs all three).
BYTE_MODES = tiered(("recover-all", "clean"), MODES)
CUT_MODES = MODES
CONFIG = conf(segment_bytes=760, index_interval_bytes=40, segment_index_bytes=4096)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple

    @property
    def content(self):
        return self[1:]


def rec_of(r) -> Rec:
    def b(x):
        return None if x is None else bytes(x)

    return Rec(r.offset, b(r.key), b(r.value), r.timestamp,
               tuple((k, b(v)) for k, v in r.headers))


class Batch(NamedTuple):
    position: int
    end: int
    base: int
    last: int


class Segment(NamedTuple):
    base: int
    names: dict          # suffix -> file name
    batches: list[Batch]


class Original:
    """The undamaged log: its files' bytes, its records and where each batch lies."""

    def __init__(self, directory: str) -> None:
        clock = Clock()
        log = Log.open(directory, CONFIG, had_clean_shutdown=True, time_ms=clock)
        for i in range(18):
            records = []
            for j in range(1 + i % 3):
                n = i * 3 + j
                key = None if j == 1 else b"k%d" % n
                headers = [("h", b"x%d" % n), ("n", None)] if i % 4 == 3 else []
                records.append((key, b"v%d-" % n * (1 + j), clock.now + i, headers))
            log.append(records, compression=CODECS[i % len(CODECS)])
            clock.sleep(5)
        log.close()
        self.files = {}
        for name in sorted(os.listdir(directory)):
            with open(os.path.join(directory, name), "rb") as f:
                self.files[name] = f.read()
        self.segments: list[Segment] = []
        for name in sorted(n for n in self.files if n.endswith(".log")):
            stem = name[:-4]
            data = self.files[name]
            scan = scan_batches(data)
            assert scan.error is None and scan.valid_bytes == len(data)
            batches = [Batch(p, p + s, b, last) for p, s, b, last in zip(
                scan.position.tolist(), scan.size.tolist(), scan.base_offset.tolist(),
                scan.last_offset.tolist())]
            self.segments.append(Segment(int(stem), {s: stem + s for s in
                                                     (".log", ".index", ".timeindex")},
                                         batches))
        log = Log.open(directory, CONFIG, had_clean_shutdown=True, time_ms=clock)
        try:
            self.records = read_back(log)[0]
            self.log_end = log.log_end_offset
            self.index_entries = sum(s.offset_index.entries for s in log.segments)
            self.time_entries = sum(s.time_index.entries for s in log.segments)
        finally:
            log.close_handlers()
        self.by_offset = {r.offset: r for r in self.records}
        self.bases = {s.base for s in self.segments}
        self.clock = clock
        # one timestamp lookup per batch: its first record's timestamp
        self.lookups = [self.by_offset[b.base].timestamp
                        for s in self.segments for b in s.batches]
        self.config = LogConfig.from_dict(CONFIG)

    def expected_lookup(self, records: list[Rec], ts: int) -> int | None:
        return next((r.offset for r in records if r.timestamp >= ts), None)


def read_back(log: Log):
    """Every record, one batch per read from the log start on; (records, error)."""
    out: list[Rec] = []
    try:
        read_all(log, max_bytes=1, convert=rec_of, into=out)
    except KafkaStoreError as exc:
        return out, exc
    return out, None


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return Original(str(tmp_path_factory.mktemp("original") / "t-0"))


@pytest.fixture
def quiet():
    """Recovery warns about every cut; hundreds of thousands of warnings cost time."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


class Sweep:
    """Runs damaged copies of :class:`Original` in one working directory."""

    def __init__(self, original: Original, work: str) -> None:
        self.o = original
        self.work = work
        os.makedirs(work)
        self.cases = 0
        self.slowest = 0.0
        self.failures: list[str] = []

    def check(self, *args, **kw) -> None:
        """:func:`check`, collecting violations (the test reports them all at its end)."""
        try:
            check(self.o, *args, **kw)
        except AssertionError as exc:
            self.failures.append(str(exc).split("\n")[0])

    def report(self) -> None:
        assert not self.failures, f"{len(self.failures)} of {self.cases} cases broke the " \
            "oracle:\n" + "\n".join(self.failures[:int(os.environ.get("SWEEP_SHOW", 30))])

    def restore(self) -> None:
        # in place (no O_TRUNC: ext4 flushes a file truncated to zero at close)
        for name in os.listdir(self.work):
            if name not in self.o.files:
                os.unlink(os.path.join(self.work, name))
        for name, data in self.o.files.items():
            fd = os.open(os.path.join(self.work, name), os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)

    def open(self, mode: str) -> Log:
        o = self.o
        if mode == "recover-all":
            return Log.open(self.work, o.config, recovery_point=0, had_clean_shutdown=False,
                            time_ms=o.clock)
        if mode == "recovery-point":
            return Log.open(self.work, o.config, recovery_point=o.log_end,
                            had_clean_shutdown=False, time_ms=o.clock)
        return Log.open(self.work, o.config, recovery_point=o.log_end, had_clean_shutdown=True,
                        time_ms=o.clock)

    def run(self, what: tuple, mode: str):
        """Open and read the damaged copy; (records, error, lookups) or (None, open error,
        None). Anything but a KafkaStoreError fails the test with the case named."""
        t0 = time.thread_time()
        try:
            try:
                log = self.open(mode)
            except KafkaStoreError as exc:
                return None, exc, None
            try:
                records, error = read_back(log)
                lookups = []
                for ts in self.o.lookups:
                    try:
                        found = log.offset_for_timestamp(ts)
                        lookups.append(None if found is None else found.offset)
                    except KafkaStoreError as exc:
                        lookups.append(exc)
            finally:
                log.close_handlers()
        except Exception as exc:  # noqa: BLE001 - the oracle: only typed errors
            pytest.fail(f"{what} in mode {mode}: untyped {type(exc).__name__}: {exc}")
        finally:
            elapsed = time.thread_time() - t0
            self.slowest = max(self.slowest, elapsed)
            self.cases += 1
        assert elapsed < DEADLINE, f"{what} in mode {mode}: {elapsed:.1f} s of CPU"
        return records, error, lookups


def trusted(o: Original, seg_index: int, mode: str) -> bool:
    return mode == "clean" or (mode == "recovery-point" and seg_index < len(o.segments) - 1)


def check(o: Original, what: tuple, mode: str, result, *, seg_index: int, kind: str,
          exact: list[Rec] | None = None, base_field: bool = False) -> None:
    """The oracle of the module docstring. ``exact``: the records rule 4 demands (with no
    error) or None; ``base_field``: the damage is in a batch's base offset field."""
    records, error, lookups = result
    name = f"{what} in mode {mode}"
    if records is None:
        assert exact is None, f"{name}: open failed ({error!r}) where {len(exact)} records " \
                              "were expected"
        return
    if exact is not None:
        assert error is None, f"{name}: {error!r}"
        got = [r.offset for r in records]
        want = [r.offset for r in exact]
        assert records == exact, f"{name}: read {got}, expected {want}"
    if base_field:
        contents = [r.content for r in o.records]
        pos = 0
        for r in records:
            while pos < len(contents) and contents[pos] != r.content:
                pos += 1
            assert pos < len(contents), f"{name}: record {r} is not an original in order"
            pos += 1
    else:
        seg = o.segments[seg_index]
        seg_end = o.segments[seg_index + 1].base if seg_index + 1 < len(o.segments) \
            else o.log_end
        expected_next = o.records[0].offset
        prev = -1
        for r in records:
            assert r.offset > prev, f"{name}: offset {r.offset} after {prev}"
            assert o.by_offset.get(r.offset) == r, f"{name}: {r} is not what was appended"
            if r.offset != expected_next:
                # a hole [expected_next, r.offset): rule 3
                at_boundary = r.offset in o.bases and seg.base <= expected_next
                in_segment = (kind in (".index", ".log") and trusted(o, seg_index, mode)
                              and seg.base <= expected_next and r.offset < seg_end)
                assert at_boundary or in_segment, \
                    f"{name}: offsets {expected_next}..{r.offset - 1} missing"
            prev = r.offset
            expected_next = next((x.offset for x in o.records if x.offset > r.offset),
                                 o.log_end)
    if error is not None and exact is None and kind == ".log" and not base_field \
            and trusted(o, seg_index, mode):
        assert isinstance(error, CorruptRecordError), f"{name}: {error!r}"
    # timestamp lookups
    index_damage = kind in (".index", ".timeindex") and trusted(o, seg_index, mode)
    if records == o.records and error is None and not index_damage and not base_field:
        want = [o.expected_lookup(o.records, ts) for ts in o.lookups]
        assert lookups == want, f"{name}: timestamp lookups {lookups}, expected {want}"
    else:
        for found in lookups:
            assert found is None or isinstance(found, KafkaStoreError) or found in o.by_offset \
                or base_field, f"{name}: timestamp lookup gave {found!r}"


def _segment_of(o: Original, name: str) -> tuple[int, str]:
    if name.endswith(".snapshot"):
        # a producer snapshot: of the segment it opens (or, past the last base, the
        # last segment: the one a clean shutdown writes at the log end offset)
        offset = int(name.split(".")[0])
        return max(i for i, seg in enumerate(o.segments) if seg.base <= offset), ".snapshot"
    for i, seg in enumerate(o.segments):
        for suffix, n in seg.names.items():
            if n == name:
                return i, suffix
    raise AssertionError(name)


def _segment_files(o: Original):
    """``(name, original bytes, segment index, suffix)`` of each file a sweep damages:
    the segments' files, not the hidden ones (the clean-shutdown marker) nor the empty
    ``leader-epoch-checkpoint`` every open creates, as Kafka's does (no segment's, no
    bytes to change; damaged checkpoints are tests/test_checkpoint.py's), nor the
    ``partition.metadata`` a new partition gets (no segment's either; damaged ones are
    tests/test_partition_metadata.py's)."""
    for name, data in o.files.items():
        if not name.startswith(".") and name not in (LEADER_EPOCH_CHECKPOINT_FILENAME,
                                                     PARTITION_METADATA_FILENAME):
            yield (name, data, *_segment_of(o, name))


def _records_below(o: Original, offset: int) -> list[Rec]:
    return [r for r in o.records if r.offset < offset]


def byte_expectation(o: Original, seg_index: int, kind: str, pos: int, mode: str):
    """(exact, base_field) for a changed byte at ``pos`` of a file of segment ``seg_index``."""
    if kind == ".snapshot":
        # a damaged snapshot fails its CRC and is rebuilt from the log: nothing changes
        return o.records, False
    if kind != ".log":
        return (o.records if not trusted(o, seg_index, mode) else None), False
    seg = o.segments[seg_index]
    batch = next(b for b in seg.batches if b.position <= pos < b.end)
    field = pos - batch.position
    if field < 8:
        return None, True
    if trusted(o, seg_index, mode):
        return (o.records if 12 <= field < 16 else None), False
    if 12 <= field < 16:   # partition leader epoch: outside the CRC, changes no record
        return o.records, False
    return _records_below(o, batch.base), False


def cut_expectation(o: Original, seg_index: int, kind: str, cut: int, mode: str):
    if kind != ".log":
        return o.records
    seg = o.segments[seg_index]
    kept = [b for b in seg.batches if b.end <= cut]
    boundary = cut == 0 or any(b.end == cut for b in seg.batches)
    keep_later = boundary or trusted(o, seg_index, mode)
    out = [r for r in o.records if r.offset < seg.base]
    out += [r for r in o.records if kept and seg.base <= r.offset <= kept[-1].last]
    if keep_later and seg_index + 1 < len(o.segments):
        out += [r for r in o.records if r.offset >= o.segments[seg_index + 1].base]
    return out


def test_the_original_log_is_what_the_sweep_needs(original):
    o = original
    assert len(o.segments) == 3
    assert o.records and [r.offset for r in o.records] == list(range(o.log_end))
    assert o.index_entries >= 6 and o.time_entries >= 6
    assert any(r.headers for r in o.records)
    assert 1000 < sum(len(b) for b in o.files.values()) < 4000


@pytest.mark.timeout(tiered(600, 24 * 3600))
def test_every_single_byte_change(original, tmp_path, quiet, figures):
    o = original
    sweep = Sweep(o, str(tmp_path / "t-0"))
    values = SHORT_VALUES if tiered(True, False) else \
        tuple((lambda b, d=d: b ^ d) for d in range(1, 256))
    with installed(NoSyncFS()):
        for name, data, seg_index, kind in _segment_files(o):
            for pos in range(len(data)):
                for change in values:
                    new = change(data[pos])
                    if new == data[pos]:
                        continue
                    for mode in BYTE_MODES:
                        sweep.restore()
                        with open(os.path.join(sweep.work, name), "r+b") as f:
                            f.seek(pos)
                            f.write(bytes([new]))
                        what = (name, pos, f"{data[pos]:#04x}->{new:#04x}")
                        exact, base_field = byte_expectation(o, seg_index, kind, pos, mode)
                        sweep.check(what, mode, sweep.run(what, mode), seg_index=seg_index,
                                    kind=kind, exact=exact, base_field=base_field)
    sweep.report()
    figures.add("corruption cases (byte changes)", sweep.cases)
    print(f"{sweep.cases} byte-change cases, slowest {sweep.slowest * 1000:.1f} ms of CPU")


@pytest.mark.timeout(tiered(600, 3600))
def test_every_truncation(original, tmp_path, quiet, figures):
    o = original
    sweep = Sweep(o, str(tmp_path / "t-0"))
    with installed(NoSyncFS()):
        for name, data, seg_index, kind in _segment_files(o):
            for cut in range(len(data)):
                for mode in CUT_MODES:
                    sweep.restore()
                    os.truncate(os.path.join(sweep.work, name), cut)
                    what = (name, "cut", cut)
                    sweep.check(what, mode, sweep.run(what, mode), seg_index=seg_index,
                                kind=kind, exact=cut_expectation(o, seg_index, kind, cut, mode))
    sweep.report()
    figures.add("corruption cases (truncations)", sweep.cases)
    print(f"{sweep.cases} truncation cases, slowest {sweep.slowest * 1000:.1f} ms of CPU")


def test_a_missing_file(original, tmp_path, quiet, figures):
    """Each file deleted in turn: an index is rebuilt (everything readable), a ``.log``
    takes its segment with it (a hole up to the next segment, rule 3a)."""
    o = original
    sweep = Sweep(o, str(tmp_path / "t-0"))
    with installed(NoSyncFS()):
        for name, _, seg_index, kind in _segment_files(o):
            for mode in MODES:
                sweep.restore()
                os.unlink(os.path.join(sweep.work, name))
                what = (name, "deleted")
                exact = o.records if kind != ".log" else None
                sweep.check(what, mode, sweep.run(what, mode), seg_index=seg_index, kind=kind,
                            exact=exact)
    sweep.report()
    figures.add("corruption cases (missing files)", sweep.cases)


def test_the_oracle_catches_a_wrong_record(original, tmp_path):
    """The oracle is not vacuous: a changed record is reported, and so are a hole in
    mid-segment, a hole outside the damaged trusted segment and a short exact result."""
    o = original
    sweep = Sweep(o, str(tmp_path / "t-0"))
    sweep.restore()
    records, error, lookups = sweep.run(("undamaged",), "clean")
    check(o, ("undamaged",), "clean", (records, error, lookups), seg_index=0, kind=".log",
          exact=o.records)
    forged = list(records)
    forged[3] = forged[3]._replace(value=b"forged")
    with pytest.raises(AssertionError, match="not what was appended"):
        check(o, ("forged",), "clean", (forged, None, lookups), seg_index=0, kind=".log")
    holed = records[:2] + records[4:]
    with pytest.raises(AssertionError, match="missing"):
        check(o, ("holed",), "recover-all", (holed, None, lookups), seg_index=0, kind=".log")
    with pytest.raises(AssertionError, match="missing"):   # trusted: only inside its segment
        check(o, ("holed",), "clean", (holed, None, lookups), seg_index=1, kind=".log")
    with pytest.raises(AssertionError, match="expected"):
        check(o, ("short",), "recover-all", (records[:5], None, lookups), seg_index=0,
              kind=".index", exact=o.records)
    shutil.rmtree(sweep.work)


def test_a_trusted_active_segment_cut_inside_its_last_batch_keeps_the_batches_before(
        original, tmp_path):
    """Regression (found by the truncation sweep): after a clean shutdown, an active
    segment cut inside its last (indexed) batch had a log end offset equal to its base
    offset, because the walk from the last index entry found no complete batch: the
    segment's earlier batches vanished from reads and the next append reused their
    offsets. The walk now starts over from the segment start when that happens."""
    o = original
    sweep = Sweep(o, str(tmp_path / "t-0"))
    sweep.restore()
    last = o.segments[-1]
    cut = last.batches[-1].position + 1
    os.truncate(os.path.join(sweep.work, last.names[".log"]), cut)
    log = sweep.open("clean")
    try:
        assert log.log_end_offset == last.batches[-1].base
        records, error = read_back(log)
        assert error is None
        assert records == _records_below(o, last.batches[-1].base)
    finally:
        log.close_handlers()
