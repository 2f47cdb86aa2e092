"""Byte compatibility of kafkastore.log.Log with Kafka's on-disk files.

(a) Appending the entries of each reference segment (tests/_vectors.py, README "Segments")
    one at a time to an empty log, as a follower (offsets kept) and, for the all-v2 vector,
    as a leader (offsets assigned), then closing it, writes a .log, .index and .timeindex
    byte-identical to the vector's (closed-segment form).
(b) Every offsetLookups / timestampLookups entry of expected.json holds for the offset
    index, translate_offset, find_offset_by_timestamp and Log.offset_for_timestamp.
(c) A directory holding only the vector's .log (no clean-shutdown marker), or the .log with
    missing, truncated, random or zero-padded index files, or a partial batch at its end, is
    recovered on open into exactly the vector's files.
(d) A multi-segment log written by kafkastore (every codec, v0/v1/v2, headers, nulls) is read
    back record for record by kafka-python (the test-only oracle), and its index files are
    the ones Kafka's index rule gives for each .log, recomputed here with struct.
(e) The log-level rules that decide which offsets land in which segment file: the roll
    offset of legacy follower appends, the log end offset after truncation, and time-based
    rolls on the log's clock.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
from pathlib import Path

import pytest

from kafkastore.errors import OutOfOrderSequenceError
from kafkastore.log import Log
from kafkastore.records import encode_batch, scan_batches

from _vectors import VECTORS

_COLLECT = VECTORS if VECTORS is not None else Path("/nonexistent")


def _segment_names() -> list[str]:
    try:
        manifest = json.loads((_COLLECT / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return []
    return [Path(s["path"]).name for s in manifest["segments"]]


SEGMENTS = _segment_names()
FILE_KINDS = ("log", "index", "timeindex")


class Vector:
    """One reference segment: its directory, expected.json and file bytes (checked against
    the sha256 sums of expected.json before use)."""

    def __init__(self, name: str) -> None:
        if VECTORS is None:
            pytest.skip("segment vectors not available (see tests/_vectors.py)")
        self.dir = VECTORS / "segments" / name
        self.expected = json.loads((self.dir / "expected.json").read_text())
        self.base = self.expected["baseOffset"]
        self.interval = self.expected["indexIntervalBytes"]
        self.files = {}
        for kind in FILE_KINDS:
            meta = self.expected["files"][kind]
            data = (self.dir / meta["name"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == meta["sha256"], f"{name}: {kind} changed"
            self.files[kind] = (meta["name"], data)
        self.batches = self.expected["batches"]
        self.all_v2 = all(b["magic"] == 2 for b in self.batches)

    def entries(self) -> list[bytes]:
        """The .log cut into its entries, at the positions of the expected batch table."""
        data = self.files["log"][1]
        out = [data[b["position"]:b["position"] + b["sizeInBytes"]] for b in self.batches]
        assert b"".join(out) == data
        return out

    def config(self) -> dict:
        # segment.index.bytes stays at Kafka's default (10 MiB)
        return {"index.interval.bytes": self.interval}

    def epoch_of(self, offset: int):
        for b in self.batches:
            if b["magic"] == 2 and b["baseOffset"] <= offset <= b["lastOffset"]:
                return b["partitionLeaderEpoch"] if b["partitionLeaderEpoch"] >= 0 else None
        return None


def assert_files_identical(directory: Path, vector: Vector) -> None:
    for kind in FILE_KINDS:
        name, want = vector.files[kind]
        got = (directory / name).read_bytes()
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(want).hexdigest(), \
            f"{name} differs from the reference ({len(got)} vs {len(want)} bytes)"
        assert got == want


def check_lookups(log: Log, vector: Vector) -> None:
    """(b): every sampled lookup of expected.json."""
    assert len(log.segments) == 1
    seg = log.segments[0]
    assert seg.base_offset == vector.base
    for case in vector.expected["offsetLookups"]:
        target = case["targetOffset"]
        entry = seg.offset_index.lookup(target)
        assert (entry.offset, entry.position) == (case["indexEntry"]["offset"],
                                                  case["indexEntry"]["position"]), target
        found = seg.translate_offset(target)
        want = case["firstBatchWithNextOffsetAbove"]
        assert (found.position, found.base_offset, found.last_offset) == (
            want["position"], want["baseOffset"], want["lastOffset"]), target
        read = log.read(target, 1)  # min_one_message: the whole batch that holds it
        assert read.position == want["position"]
    for case in vector.expected["timestampLookups"]:
        target = case["targetTimestamp"]
        entry = seg.time_index.lookup(target)
        assert (entry.timestamp, entry.offset) == (case["timeIndexEntry"]["timestamp"],
                                                   case["timeIndexEntry"]["offset"]), target
        want = case["result"]
        for found in (seg.find_offset_by_timestamp(target, vector.base),
                      seg.find_offset_by_timestamp(target),
                      log.offset_for_timestamp(target)):
            if want is None:
                assert found is None, target
                continue
            assert (found.timestamp, found.offset) == (want["timestamp"], want["offset"]), target
            assert found.leader_epoch == vector.epoch_of(found.offset)
        if want is not None:
            start = seg.offset_index.lookup(max(entry.offset, vector.base)).position
            assert start == want["searchStartPosition"]


# -- (a) + (b): appending the reference entries ------------------------------------------------


def as_produced(entry: bytes) -> bytes:
    """A stored v2 batch as its producer sent it: base offset 0 (outside the CRC), the
    only form a leader takes (LogValidator)."""
    return bytes(8) + bytes(entry[8:])


def _first_sequence_break(batches) -> int | None:
    """The index of the first batch whose producer sequence does not follow the same
    producer's previous batch of the same epoch (a leader refuses it), or None."""
    last: dict[int, tuple[int, int]] = {}
    for i, b in enumerate(batches):
        pid = b.get("producerId", -1)
        if pid < 0 or b.get("isControl"):
            continue
        epoch, seq = b["producerEpoch"], b["baseSequence"]
        if pid in last and last[pid][0] == epoch and seq != last[pid][1] + 1:
            return i
        last[pid] = (epoch, seq + b["lastOffset"] - b["baseOffset"])
    return None


def _variants(leader_refused: bool = False):
    """Follower appends for every vector; leader appends (offsets assigned) for the all-v2
    ones only: a leader may rebuild legacy wrappers, whose bytes then differ. With
    ``leader_refused``: the all-v2 vectors whose producer sequences a leader refuses
    (their encoders did not chain them), for the leader-only test of the refusal."""
    out = []
    for name in SEGMENTS:
        if not leader_refused:
            out.append(pytest.param(name, False, id=f"{name}-follower"))
        try:
            expected = json.loads((_COLLECT / "segments" / name / "expected.json").read_text())
            all_v2 = all(b["magic"] == 2 for b in expected["batches"])
            broken = _first_sequence_break(expected["batches"]) is not None
        except (OSError, ValueError, KeyError):
            all_v2, broken = True, False  # let the test find out (and skip with the reason)
        if all_v2 and broken == leader_refused:
            out.append(pytest.param(name, True, id=f"{name}-leader"))
    return out


@pytest.mark.parametrize("name, assign_offsets", _variants(leader_refused=True))
def test_a_leader_refuses_the_reference_entries_at_their_sequence_break(tmp_path, name,
                                                                        assign_offsets):
    """Kafka's leader checks each idempotent producer's sequences: the first batch of a
    vector whose sequence skips is refused with OutOfOrderSequenceError, nothing of it
    written; every batch before it lands at its reference offsets."""
    vector = Vector(name)
    at = _first_sequence_break(vector.batches)
    path = tmp_path / "topic-0"
    with Log.open(str(path), vector.config(), log_start_offset=vector.base) as log:
        for i, (entry, b) in enumerate(zip(vector.entries(), vector.batches)):
            if i == at:
                end = log.log_end_offset
                with pytest.raises(OutOfOrderSequenceError) as err:
                    log.append_batches(as_produced(entry))
                assert err.value.producer_id == b["producerId"]
                assert log.log_end_offset == end
                break
            info = log.append_batches(as_produced(entry))
            assert (info.first_offset, info.last_offset) == (b["baseOffset"], b["lastOffset"])
        else:
            pytest.fail("no sequence break found")


@pytest.mark.parametrize("name, assign_offsets", _variants())
def test_appending_the_reference_entries_writes_the_reference_files(tmp_path, name,
                                                                    assign_offsets):
    vector = Vector(name)
    assert vector.all_v2 or not assign_offsets
    path = tmp_path / "topic-0"
    log = Log.open(str(path), vector.config(), log_start_offset=vector.base)
    assert (log.log_start_offset, log.log_end_offset) == (vector.base, vector.base)
    for entry, b in zip(vector.entries(), vector.batches):
        if assign_offsets:
            entry = as_produced(entry)
        info = log.append_batches(entry, assign_offsets=assign_offsets)
        assert info.last_offset == b["lastOffset"]
        if b["magic"] == 2:
            assert info.first_offset == b["baseOffset"]
        assert log.log_end_offset == b["nextOffset"]
    assert len(log.segments) == 1
    # the active segment's index has the active form until it is closed
    active = [(e["timestamp"], e["offset"]) for e in vector.expected["timeIndexActive"]]
    ti = log.segments[0].time_index
    assert [tuple(ti.entry(i)) for i in range(ti.entries)] == active
    log.close()
    assert_files_identical(path, vector)

    reopened = Log.open(str(path), vector.config())
    try:
        assert reopened.log_start_offset == vector.base
        assert reopened.log_end_offset == vector.batches[-1]["nextOffset"]
        check_lookups(reopened, vector)
    finally:
        reopened.close()
    assert_files_identical(path, vector)


# -- (c): recovery -----------------------------------------------------------------------------


def _damage_indexes(path: Path, vector: Vector, how: str) -> None:
    rng = random.Random(how)
    for kind in ("index", "timeindex"):
        name, good = vector.files[kind]
        target = path / name
        if how == "missing":
            continue
        if how == "two bytes":
            target.write_bytes(b"\x07\x01")
        elif how == "random":
            target.write_bytes(rng.randbytes(len(good)))
        elif how == "zero padded":  # an active segment's preallocated index after a crash
            target.write_bytes(good + b"\0" * 4096 * (12 if kind == "timeindex" else 8))
        elif how == "intact":
            target.write_bytes(good)


@pytest.mark.parametrize("how", ["missing", "two bytes", "random", "zero padded", "intact",
                                 "partial tail"])
@pytest.mark.parametrize("name", SEGMENTS)
def test_recovery_rebuilds_the_reference_indexes(tmp_path, name, how):
    vector = Vector(name)
    path = tmp_path / "topic-0"
    path.mkdir()
    log_name, log_bytes = vector.files["log"]
    if how == "partial tail":  # a crash in the middle of an append
        log_bytes += vector.entries()[-1][:100]
    (path / log_name).write_bytes(log_bytes)
    _damage_indexes(path, vector, how)
    log = Log.open(str(path), vector.config())  # no clean-shutdown marker: recovery
    try:
        assert log.log_start_offset == vector.base
        assert log.log_end_offset == vector.batches[-1]["nextOffset"]
        assert log.segments[0].size == len(vector.files["log"][1])
        check_lookups(log, vector)
    finally:
        log.close()
    assert_files_identical(path, vector)


# -- (d): kafka-python reads what kafkastore wrote ---------------------------------------------

V2_HEADER = struct.Struct(">qiibIhiqqqhii")
LEGACY_TS = struct.Struct(">q")


def kafka_index_files(log_bytes: bytes, base: int, interval: int) -> tuple[bytes, bytes]:
    """The closed-segment .index and .timeindex Kafka writes for a .log whose entries were
    appended one at a time (vectors README, "How the expected .index / .timeindex were
    computed"), from a struct walk of the file."""
    index, timeindex = bytearray(), bytearray()
    since, max_ts, max_off = 0, -1, base
    last_time = (-1, base)
    pos = 0
    while pos < len(log_bytes):
        offset, length = struct.unpack_from(">qi", log_bytes, pos)
        magic = log_bytes[pos + 16]
        if magic == 2:
            fields = V2_HEADER.unpack_from(log_bytes, pos)
            last, ts = offset + fields[6], fields[8]
        else:
            last = offset
            ts = LEGACY_TS.unpack_from(log_bytes, pos + 18)[0] if magic == 1 else -1
        if ts > max_ts:
            max_ts, max_off = ts, last
        if since > interval:
            index += struct.pack(">ii", last - base, pos)
            if max_ts > last_time[0]:
                timeindex += struct.pack(">qi", max_ts, max_off - base)
                last_time = (max_ts, max_off)
            since = 0
        since += 12 + length
        pos += 12 + length
    if max_ts > last_time[0]:
        timeindex += struct.pack(">qi", max_ts, max_off - base)
    return bytes(index), bytes(timeindex)


def _random_records(rng: random.Random, n: int, ts0: int, headers: bool):
    out = []
    for j in range(n):
        roll = rng.random()
        key = None if roll < 0.2 else b"" if roll < 0.3 else b"key-%d" % rng.randrange(10**6)
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 400))
        hdrs = [(rng.choice(["h", "trace-id", "Ключ", "键", ""]),
                 None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 12)))
                for _ in range(rng.randrange(0, 4))] if headers else []
        out.append((key, value, ts0 + rng.randrange(-500, 500) + j, hdrs))
    return out


def _kafka_python_rows(data: bytes):
    from kafka.record import MemoryRecords

    rows = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for r in batch:
            rows.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return rows


def test_kafka_python_reads_a_log_written_by_kafkastore(tmp_path):
    pytest.importorskip("kafka.record", reason="kafka-python is the test-only oracle for this "
                        "test (pip install kafka-python)")
    import kafka.codec as kc

    for codec, available in (("snappy", kc.has_snappy()), ("lz4", kc.has_lz4()),
                             ("zstd", kc.has_zstd())):
        if not available:
            pytest.skip(f"kafka-python cannot decode {codec} here (codec library missing)")
    rng = random.Random(20241025)
    path = tmp_path / "topic-0"
    interval = 600
    log = Log.open(str(path), {"segment.bytes": 6000, "index.interval.bytes": interval},
                   time_ms=lambda: 1_700_000_100_000)
    expected = []
    ts = 1_700_000_000_000
    # an upgrade history first: v0 and v1 message sets, as a follower copies them (a
    # leader up-converts legacy input to magic 2)
    for magic, codec in ((0, "none"), (0, "gzip"), (1, "none"), (1, "gzip"), (1, "snappy"),
                         (1, "lz4"), (0, "snappy")):
        recs = [(k, v, t) for k, v, t, _ in _random_records(rng, rng.randrange(1, 6), ts, False)]
        ts += 1000
        first = log.log_end_offset   # (a follower's info holds a wrapper's last offset)
        data = encode_batch(recs, magic=magic, compression=codec, base_offset=first)
        # one entry per append, so that Kafka's index rule (one entry per append at most)
        # gives the files kafka_index_files computes per entry
        for pos, size in zip(scan_batches(data).position, scan_batches(data).size):
            info = log.append_batches(data[pos:pos + size], assign_offsets=False)
        assert info.last_offset == first + len(recs) - 1
        expected += [(first + j, t if magic == 1 else None, k, v, [])
                     for j, (k, v, t) in enumerate(recs)]
    # then v2 batches of every codec
    for i in range(60):
        codec = ("none", "gzip", "snappy", "lz4", "zstd")[i % 5]
        recs = _random_records(rng, rng.randrange(1, 9), ts, True)
        ts += 1000
        info = log.append(recs, compression=codec)
        expected += [(info.first_offset + j, t, k, v, h)
                     for j, (k, v, t, h) in enumerate(recs)]
    assert log.log_end_offset == expected[-1][0] + 1
    assert len(log.segments) > 3
    log.close()

    logs = sorted(p for p in os.listdir(path) if p.endswith(".log"))
    assert len(logs) > 3
    rows = []
    for name in logs:
        data = (path / name).read_bytes()
        got = _kafka_python_rows(data)
        base = int(name[:20])
        assert got[0][0] == base, f"{name} starts at offset {got[0][0]}"
        rows += got
        # the index files are the ones Kafka's rule gives for this .log
        index, timeindex = kafka_index_files(data, base, interval)
        assert (path / (name[:20] + ".index")).read_bytes() == index, name
        assert (path / (name[:20] + ".timeindex")).read_bytes() == timeindex, name
        assert scan_batches(data).valid_bytes == len(data)
    assert rows == expected


def test_a_copied_segment_reopens_in_a_log_with_more_segments(tmp_path):
    """A reference segment placed after another segment in a partition directory: the log
    opens both (no recovery with a clean-shutdown marker), keeps the reference's files as
    they are and reads across the gap between them."""
    if not SEGMENTS:
        pytest.skip("segment vectors not available (see tests/_vectors.py)")
    vector = Vector(SEGMENTS[0])
    path = tmp_path / "topic-0"
    first = vector.base - 10
    log = Log.open(str(path), vector.config(), log_start_offset=first)
    info = log.append([(b"k", b"v", 1_600_000_000_000)] * 3)
    assert (info.first_offset, info.last_offset) == (first, first + 2)
    log.close()
    for kind in FILE_KINDS:
        name, data = vector.files[kind]
        (path / name).write_bytes(data)
    log = Log.open(str(path), vector.config(), recovery_point=vector.batches[-1]["nextOffset"],
                   log_start_offset=first)
    try:
        assert [s.base_offset for s in log.segments] == [first, vector.base]
        assert log.log_end_offset == vector.batches[-1]["nextOffset"]
        read = log.read(first + 3, 100)  # the gap: the next segment's first batch
        assert read.position == 0 and read.file.path.endswith(vector.files["log"][0])
    finally:
        log.close()
    assert_files_identical(path, vector)


# -- (e) log-level rules that decide the segment layout --------------------------------------
# Each of these found a divergence of kafkastore/log.py from Kafka (since fixed).


class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _v0() -> bytes:
    return encode_batch([(None, b"v0 message", None)], magic=0)


def test_time_roll_after_truncation_follows_the_log_clock(tmp_path):
    """UnifiedLog time-based roll for data without timestamps (v0): now - created, where a
    segment emptied by truncation takes created = now from the log's Time (§4.7 step 5)."""
    clock = _Clock(1_000_000)
    log = Log.open(str(tmp_path / "topic-0"), {"segment.ms": 1000}, time_ms=clock)
    try:
        log.append_batches(_v0())
        log.roll()
        log.append_batches(_v0())
        log.truncate_to(1)  # the active segment (base 1) is emptied
        clock.now += 1001
        log.append_batches(_v0())  # into the empty segment: an empty segment never rolls on time
        log.append_batches(_v0())  # 1001 ms after the truncation: rolls
        assert [s.base_offset for s in log.segments] == [0, 1, 2]
    finally:
        log.close()


def test_truncate_inside_a_batch_sets_the_log_end_offset_to_the_target(tmp_path):
    """§5.8: the batch holding the target goes whole, and LEO = target."""
    log = Log.open(str(tmp_path / "topic-0"))
    try:
        log.append([(None, b"a", 1)] * 5)
        log.append([(None, b"b", 1)] * 5)
        assert log.truncate_to(7)
        assert log.log_end_offset == 7
        assert log.append([(None, b"c", 1)]).first_offset == 7
    finally:
        log.close()


def test_follower_roll_for_legacy_wrappers_starts_at_the_log_end(tmp_path):
    """UnifiedLog.maybeRoll: for pre-v2 data the first offset would need decompression, so
    the roll offset is lastOffset - Integer.MAX_VALUE and the new segment starts at LEO;
    otherwise a wrapper's first inner offsets fall below its segment's base offset."""
    log = Log.open(str(tmp_path / "topic-0"), {"segment.bytes": 300})
    try:
        offset = 0
        for i in range(4):
            wrapper = encode_batch([(None, b"x" * 40, 1000 + i)] * 3, magic=1,
                                   compression="gzip", base_offset=offset)
            log.append_batches(wrapper, assign_offsets=False)
            offset += 3
        assert len(log.segments) > 1
        for seg in log.segments[1:]:
            first_inner = seg.translate_offset(seg.base_offset).last_offset - 2
            assert first_inner == seg.base_offset
    finally:
        log.close()
