"""Recovery's index rebuild in bulk (``index_search.rebuild_entries``, issue 31).

``LogSegment.recover`` writes the ``.index`` / ``.timeindex`` entries of runs of batches
with one kernel call per scanned chunk, straight into the index maps; a batch the kernel
stops at goes through the indexes' own checked appends (the general path). These tests pin
that the files it leaves are byte for byte what

* a model written here from Kafka's ``LogSegment.recover`` rules makes (an entry when more
  than ``index.interval.bytes`` passed since the last one: the offset index gets
  ``(last offset, position)``, the time index ``(largest timestamp so far, its offset)``
  when that timestamp is above its last entry's; a full index takes no more; the final
  time entry on the kept slot; the log truncated at the first bad entry);
* the general path alone makes (the kernel replaced by one that stops at every batch);
* appending the same batches one at a time made (Kafka's ``LogSegment.append`` indexes by
  the same rule),

for random segments with corrupt, partial or garbage tails at random places, and that the
kernel's two implementations agree (the ``impl`` fixture runs both).
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from _helpers import legacy, rec, v2_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkastore import segment as segment_module
from kafkastore.config import LogConfig
from kafkastore.errors import InvalidOffsetError
from kafkastore.records import scan_batches
from kafkastore.segment import LogSegment, LogSegmentOffsetOverflowError

INT32_MAX = (1 << 31) - 1
SLOTS = 11


def config(interval: int, index_bytes: int) -> LogConfig:
    return LogConfig(index_interval_bytes=interval, segment_index_bytes=index_bytes,
                     segment_jitter_ms=0)


def random_batches(rng: random.Random, base: int, n: int) -> list[tuple[bytes, int, int]]:
    """``(bytes, last offset, max timestamp)`` of ``n`` entries from ``base``: v2 batches of
    1-5 records with timestamps that go up and down (and tie, within a few ms), and now and
    then a v1 or v0 message."""
    out, offset = [], base
    spread = rng.choice([4, 1_000_000])
    for _ in range(n):
        kind = rng.random()
        if kind < 0.1:
            data = legacy(0, offset, b"k", rng.randbytes(rng.randrange(40)))
            out.append((data, offset, -1))
            offset += 1
            continue
        ts = rng.randrange(1_000, 1_000 + spread)
        if kind < 0.2:
            out.append((legacy(1, offset, b"k", rng.randbytes(rng.randrange(40)),
                               timestamp=ts), offset, ts))
            offset += 1
            continue
        count = rng.randrange(1, 6)
        body = b"".join(rec(d, value=rng.randbytes(rng.randrange(60))) for d in range(count))
        out.append((v2_batch(body, count=count, base_offset=offset, last_offset_delta=count - 1,
                             first_ts=ts, max_ts=ts), offset + count - 1, ts))
        offset += count + rng.randrange(2)  # gaps, as compaction leaves them
    return out


def damage(rng: random.Random, data: bytes) -> bytes:
    """``data`` with a random tail: cut anywhere, one byte flipped anywhere (a CRC, size or
    magic error there), garbage appended, or left whole."""
    kind = rng.randrange(4)
    if kind == 0 or not data:
        return data + rng.randbytes(rng.randrange(1, 80)) if data else data
    at = rng.randrange(len(data))
    if kind == 1:
        return data[:at]
    if kind == 2:
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    return data


def model(data: bytes, base: int, interval: int, index_bytes: int):
    """Kafka's ``LogSegment.recover`` over ``data``, written out plainly: the expected
    ``(.index bytes, .timeindex bytes, valid bytes)``; the indexes sized as the segment's
    are (``segment.index.bytes`` rounded down to whole entries)."""
    scan = scan_batches(data)
    offset_limit, time_limit = index_bytes // 8, index_bytes // 12 - 1
    offsets, times = [], []
    valid = last_entry = 0
    max_ts, max_off = -1, base
    last_ts = -1
    for pos, size, last, ts in zip(scan.position.tolist(), scan.size.tolist(),
                                   scan.last_offset.tolist(), scan.max_timestamp.tolist()):
        assert pos == valid
        if ts > max_ts:
            max_ts, max_off = ts, last
        if valid - last_entry > interval:
            if len(offsets) < offset_limit:
                offsets.append(struct.pack(">ii", last - base, valid))
            if len(times) < time_limit and max_ts > last_ts:
                times.append(struct.pack(">qi", max_ts, max_off - base))
                last_ts = max_ts
            last_entry = valid
        valid += size
    if max_ts > last_ts:  # the final entry, on the kept slot
        times.append(struct.pack(">qi", max_ts, max_off - base))
    return b"".join(offsets), b"".join(times), valid


def open_segment(directory: Path, base: int, data: bytes, cfg: LogConfig) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{base:020d}.log").write_bytes(data)
    return LogSegment.open(str(directory), base, cfg, file_already_exists=True)


def recovered(directory: Path, base: int, data: bytes, cfg: LogConfig):
    """Recover a segment holding ``data``: ``(truncated, .index, .timeindex, log size,
    max timestamp and offset)`` as the files hold them after close."""
    seg = open_segment(directory, base, data, cfg)
    try:
        truncated = seg.recover()
        max_ts = seg._max_ts_and_offset
        size = seg.size
    finally:
        seg.close()
    return (truncated, (directory / f"{base:020d}.index").read_bytes(),
            (directory / f"{base:020d}.timeindex").read_bytes(), size, max_ts)


@pytest.fixture
def general_path(monkeypatch):
    """Recovery with the kernel replaced by one that stops at every batch: everything goes
    through the indexes' own appends, the rebuild as it was before the kernel."""
    def use():
        monkeypatch.setattr(segment_module, "_rebuild_entries",
                            lambda lasts, sizes, tss, start, *rest: start)
    return use


@pytest.mark.parametrize("seed", range(40))
def test_recovered_indexes_match_the_model_and_the_general_path(tmp_path, seed, general_path):
    rng = random.Random(seed)
    base = rng.choice([0, 5, 1 << 33])
    interval = rng.choice([0, 1, 50, 200, 4096])
    # small indexes now and then, so that they fill before the end
    index_bytes = rng.choice([10 * 1024 * 1024, 96, 120, 1000])
    entries = random_batches(rng, base, rng.randrange(0, 120))
    data = damage(rng, b"".join(e[0] for e in entries))
    cfg = config(interval, index_bytes)

    offsets, times, valid = model(data, base, interval, index_bytes)
    fast = recovered(tmp_path / "fast", base, data, cfg)
    assert fast[:4] == (len(data) - valid, offsets, times, valid)
    general_path()
    assert recovered(tmp_path / "general", base, data, cfg) == fast


@pytest.mark.parametrize("seed", range(10))
def test_recovered_indexes_match_appending(tmp_path, seed):
    """Batches appended one at a time, closed: the files Kafka's append rule wrote. The
    same log recovered from byte 0 writes the same bytes."""
    rng = random.Random(seed)
    base = rng.choice([0, 1000])
    interval = rng.choice([0, 100, 1000])
    cfg = config(interval, 10 * 1024 * 1024)
    entries = [e for e in random_batches(rng, base, rng.randrange(1, 150))]
    seg = LogSegment.open(str(tmp_path), base, cfg)
    max_ts, max_off = -1, base
    for data, last, ts in entries:
        if ts > max_ts:
            max_ts, max_off = ts, last
        seg.append(last, max_ts, max_off, data)
    seg.close()
    names = [tmp_path / f"{base:020d}{s}" for s in (".index", ".timeindex")]
    appended = [p.read_bytes() for p in names]
    for p in names:
        p.unlink()
    seg = LogSegment.open(str(tmp_path), base, cfg, file_already_exists=True)
    try:
        assert seg.recover() == 0
    finally:
        seg.close()
    assert [p.read_bytes() for p in names] == appended


def test_offsets_going_backwards_raise_as_the_general_path(tmp_path, general_path):
    """A valid batch whose offsets go back: the offset index's own append raises
    InvalidOffsetError (the loader answers it by emptying the segment, as Kafka's
    LogLoader.recoverLog does), after the entries before it were written."""
    body = rec(0, value=b"x" * 30)
    data = b"".join(v2_batch(body, count=1, base_offset=o, first_ts=t, max_ts=t)
                    for o, t in [(0, 10), (1, 20), (2, 30), (1, 40), (3, 50)])
    files = []
    for name in ("fast", "general"):
        if name == "general":
            general_path()
        seg = open_segment(tmp_path / name, 0, data, config(0, 1000))
        with pytest.raises(InvalidOffsetError):
            seg.recover()
        files.append((seg.offset_index.entries, seg.time_index.entries,
                      seg._max_ts_and_offset))
        seg.close()
    assert files[0] == files[1] == (2, 2, (40, 1))


def test_offset_overflow_raises_with_the_position(tmp_path, general_path):
    body = rec(0, value=b"x")
    first = v2_batch(body, count=1, base_offset=10, first_ts=1, max_ts=1)
    data = first + v2_batch(body, count=1, base_offset=10 + (1 << 31), first_ts=2, max_ts=2)
    seg = open_segment(tmp_path, 10, data, config(0, 1000))
    try:
        with pytest.raises(LogSegmentOffsetOverflowError) as info:
            seg.recover()
        assert info.value.position == len(first)
        assert info.value.offset == 10 + (1 << 31)
    finally:
        seg.close()


# -- the kernel, both implementations --------------------------------------------------


def kernel_model(lasts, sizes, tss, start, base, interval, state, o_cap, t_cap):
    """rebuild_entries' contract, written from its docstring: the stop row, the state
    after it and the entry bytes written."""
    (valid, last_entry, max_ts, max_off, o_n, o_limit, o_last, t_n, t_limit, t_ts,
     t_off) = state
    off, tim = [], []
    i = start
    while i < len(lasts):
        last, ts, size = lasts[i], tss[i], sizes[i]
        if not 0 <= last - base <= INT32_MAX or size < 0 or valid + size >= 1 << 63:
            break
        nts, noff = (ts, last) if ts > max_ts else (max_ts, max_off)
        if valid - last_entry > interval:
            add_o = o_n < o_limit
            if add_o and ((o_n and last <= o_last) or valid > INT32_MAX or o_n >= o_cap):
                break
            add_t = False
            if t_n < t_limit:
                if t_n and (noff < t_off or nts < t_ts):
                    break
                add_t = nts > t_ts
                if add_t and (not 0 <= noff - base <= INT32_MAX or t_n >= t_cap):
                    break
            if add_o:
                off.append(struct.pack(">ii", last - base, valid))
                o_n, o_last = o_n + 1, last
            if add_t:
                tim.append(struct.pack(">qi", nts, noff - base))
                t_n, t_ts, t_off = t_n + 1, nts, noff
            last_entry = valid
        max_ts, max_off = nts, noff
        valid += size
        i += 1
    return i, [valid, last_entry, max_ts, max_off, o_n, o_limit, o_last, t_n, t_limit, t_ts,
               t_off], b"".join(off), b"".join(tim)


I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
i64 = st.integers(I64_MIN, I64_MAX)


def near(value: int, low: int, high: int):
    return st.integers(max(value + low, I64_MIN), min(value + high, I64_MAX))


@st.composite
def kernel_inputs(draw):
    n = draw(st.integers(0, 30))
    base = draw(st.sampled_from([0, 7, (1 << 62), -(1 << 62)]) | i64)
    wild = draw(st.booleans())
    lasts = draw(st.lists(near(base, -2, 100) if not wild else i64,
                          min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(0, 300) if not wild else i64, min_size=n, max_size=n))
    tss = draw(st.lists(st.integers(-1, 50) if not wild else i64, min_size=n, max_size=n))
    o_n, t_n = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    state = [draw(st.integers(0, 1 << 32)), 0, draw(st.integers(-1, 50)), draw(near(base, -3, 3)),
             o_n, draw(st.integers(0, 12)), draw(near(base, -3, 3)), t_n, draw(st.integers(0, 12)),
             draw(st.integers(-1, 50)), draw(near(base, -3, 3))]
    state[1] = max(0, state[0] - draw(st.integers(0, 400)))
    o_cap, t_cap = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    return (lasts, sizes, tss, draw(st.integers(0, n)), base, draw(st.integers(0, 200)), state,
            o_cap, t_cap)


# the impl fixture is function scoped but never mutated: reusing it across examples is safe
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(args=kernel_inputs())
def test_rebuild_entries_kernel(impl, args):
    lasts, sizes, tss, start, base, interval, state, o_cap, t_cap = args
    o_buf = bytearray(b"\xee" * (o_cap * 8 + 3))
    t_buf = bytearray(b"\xee" * (t_cap * 12 + 5))
    o_before, t_before = bytes(o_buf), bytes(t_buf)
    arr = np.array(state, dtype=np.int64)
    stop = impl.index_search.rebuild_entries(
        np.array(lasts, dtype=np.int64), np.array(sizes, dtype=np.int64),
        np.array(tss, dtype=np.int64), start, base, interval, arr, o_buf, t_buf)
    want_stop, want_state, off, tim = kernel_model(lasts, sizes, tss, start, base, interval,
                                                    state, o_cap, t_cap)
    assert stop == want_stop
    assert arr.tolist() == want_state
    o0, t0 = state[4] * 8, state[7] * 12
    assert bytes(o_buf[o0:o0 + len(off)]) == off
    assert bytes(t_buf[t0:t0 + len(tim)]) == tim
    # nothing else written
    assert o_buf[:o0] + o_buf[o0 + len(off):] == o_before[:o0] + o_before[o0 + len(off):]
    assert t_buf[:t0] + t_buf[t0 + len(tim):] == t_before[:t0] + t_before[t0 + len(tim):]


def test_rebuild_entries_arguments(impl):
    rebuild = impl.index_search.rebuild_entries
    cols = np.zeros(3, dtype=np.int64)
    state = np.zeros(SLOTS, dtype=np.int64)
    with pytest.raises(ValueError):
        rebuild(cols, cols, cols, 4, 0, 0, state, bytearray(8), bytearray(12))
    with pytest.raises(ValueError):
        rebuild(cols, cols[:2], cols, 0, 0, 0, state, bytearray(8), bytearray(12))
    with pytest.raises(ValueError):
        rebuild(cols, cols, cols, 0, 0, 0, state[:5], bytearray(8), bytearray(12))
    for slot, value in ((4, -1), (7, -1), (1, -1), (1, 1)):  # last entry past valid (0)
        bad = state.copy()
        bad[slot] = value
        with pytest.raises(ValueError):
            rebuild(cols, cols, cols, 0, 0, 0, bad, bytearray(8), bytearray(12))
    assert impl.index_search.REBUILD_STATE_SLOTS == SLOTS


def test_recovery_of_an_empty_and_an_all_garbage_file(tmp_path):
    cfg = config(0, 1000)
    assert recovered(tmp_path / "empty", 0, b"", cfg)[:4] == (0, b"", b"", 0)
    garbage = os.urandom(7) + b"\x00" * 50
    assert recovered(tmp_path / "garbage", 0, garbage, cfg)[:4] == (len(garbage), b"", b"", 0)
