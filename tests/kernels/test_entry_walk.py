"""Entry header walk kernels (kafkastore._pure.entry_walk and kafkastore._ext.entry_walk).

Every test runs on both implementations (conftest's ``impl`` fixture). Files are built with the byte builders of
tests/_helpers.py (kafka-storage.md §2.1/§2.2 layouts, independent of kafkastore). The
expected answers come from a model walk written here from FileLogInputStream's rules
(§4.2), or, for hostile bytes, from comparing the two implementations.
"""

from __future__ import annotations

import importlib
import random
import struct

import pytest
from _helpers import compiled_kernel, legacy, rec, v2_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FOUND, NEED_MORE, END, CORRUPT = 0, 1, 2, 3
INT64_MIN = -(1 << 63)


def both():
    """Both implementations of the kernel (the compiled one when built)."""
    out = [importlib.import_module("kafkastore._pure.entry_walk")]
    try:
        out.append(compiled_kernel("entry_walk"))
    except pytest.skip.Exception:
        pass
    return out


@pytest.fixture
def walk(impl):
    """The kernel of conftest's ``impl`` (cython, then python)."""
    return impl.entry_walk


def sample_file():
    """A v2 batch, a v0 message, a v1 message, a v2 batch: ``(bytes, [entry facts])``."""
    entries = [
        v2_batch(rec(0) + rec(1) + rec(2), count=3, base_offset=10, last_offset_delta=2,
                 first_ts=1000, max_ts=1002),
        legacy(0, 13, b"k", b"v"),
        legacy(1, 14, b"k", b"v", timestamp=2000),
        v2_batch(rec(0), count=1, base_offset=15, first_ts=3000, max_ts=3000),
    ]
    facts = [  # (magic, offset field, last offset, max timestamp)
        (2, 10, 12, 1002), (0, 13, 13, -1), (1, 14, 14, 2000), (2, 15, 15, 3000)]
    out, pos = [], 0
    for data, (magic, offset, last, ts) in zip(entries, facts, strict=True):
        out.append((pos, len(data), magic, offset, last, ts))
        pos += len(data)
    return b"".join(entries), out


def model(entries, position, target):
    for pos, size, magic, offset, last, ts in entries:
        if pos >= position and last >= target:
            return (FOUND, pos, size, magic, offset, last, ts)
    return None


def test_finds_the_first_entry_ending_at_or_after_each_target(walk):
    data, entries = sample_file()
    for target in range(5, 18):
        for start in (0, entries[1][0], entries[2][0]):
            got = walk.find_entry(data, start, len(data), target)
            want = model(entries, start, target)
            if want is None:
                assert got[:2] == (END, len(data))
            else:
                assert got == want, (target, start)


def test_walking_every_entry_from_the_smallest_target(walk):
    data, entries = sample_file()
    pos, seen = 0, []
    while True:
        status, pos_found, size, *rest = walk.find_entry(data, pos, len(data), INT64_MIN)
        if status != FOUND:
            assert status == END
            break
        seen.append((pos_found, size, *rest))
        pos = pos_found + size
    assert seen == entries


def test_a_window_shorter_than_the_file_asks_for_more_at_the_right_place(walk):
    data, entries = sample_file()
    second = entries[1][0]
    # the window ends inside the second entry's 17-byte prefix
    status, pos, *_ = walk.find_entry(data[:second + 10], 0, len(data), 13)
    assert (status, pos) == (NEED_MORE, second)
    # the window holds the first 17 bytes of a v2 batch but not its 43-byte header
    last = entries[3][0]
    status, pos, *_ = walk.find_entry(data[:last + 20], last, len(data), 15)
    assert (status, pos) == (NEED_MORE, last)
    # a position past the window's end (the previous entry did not fit)
    status, pos, *_ = walk.find_entry(data[:second], second, len(data), 0)
    assert (status, pos) == (NEED_MORE, second)


def test_the_logical_end_stops_the_walk(walk):
    data, entries = sample_file()
    last = entries[3][0]
    # fewer than 17 bytes left before the limit: end (FileLogInputStream.nextBatch)
    assert walk.find_entry(data, last, last + 16, 0)[:2] == (END, last)
    # an entry running past the limit: end, even though the buffer holds it
    assert walk.find_entry(data, last, len(data) - 1, 0)[:2] == (END, last)
    assert walk.find_entry(data, last, len(data), 0)[0] == FOUND


def test_a_size_below_the_minimum_is_corrupt(walk):
    data, entries = sample_file()
    bad = bytearray(data)
    second = entries[1][0]
    struct.pack_into(">i", bad, second + 8, 13)
    got = walk.find_entry(bytes(bad), 0, len(bad), 13)
    assert got[:3] == (CORRUPT, second, 13) and got[4] == 13


def test_entries_too_short_for_their_header_report_what_is_there(walk):
    # a "v2" entry of 30 bytes has no lastOffsetDelta or maxTimestamp; the smallest legal
    # v1 entry (size 14, 26 bytes) holds its timestamp exactly
    short_v2 = struct.pack(">qiiB", 7, 18, 0, 2) + bytes(13)
    small_v1 = struct.pack(">qiiBBq", 8, 14, 0, 1, 0, 4242) + bytes(1)
    data = short_v2 + small_v1
    assert walk.find_entry(data, 0, len(data), 0) == (FOUND, 0, 30, 2, 7, 7, -1)
    assert walk.find_entry(data, 30, len(data), 0) == (FOUND, 30, 26, 1, 8, 8, 4242)


def test_last_offset_wraps_as_a_java_long(walk):
    data = v2_batch(rec(0), count=1, base_offset=(1 << 63) - 1, last_offset_delta=2)
    assert walk.find_entry(data, 0, len(data), INT64_MIN)[5] == -(1 << 63) + 1


def test_negative_position_is_rejected(walk):
    with pytest.raises(ValueError):
        walk.find_entry(b"", -1, 0, 0)


def test_accepts_any_byte_buffer(walk):
    data, entries = sample_file()
    want = walk.find_entry(data, 0, len(data), 14)
    assert walk.find_entry(bytearray(data), 0, len(data), 14) == want
    assert walk.find_entry(memoryview(data), 0, len(data), 14) == want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=st.binary(max_size=300), position=st.integers(0, 320),
       limit=st.integers(-10, 1 << 40), target=st.integers(INT64_MIN, (1 << 63) - 1))
def test_hostile_bytes_give_the_same_answer_on_both_backends(blob, position, limit, target):
    answers = {mod.find_entry(blob, position, limit, target) for mod in both()}
    assert len(answers) == 1, answers
    status, pos = next(iter(answers))[:2]
    assert status in (FOUND, NEED_MORE, END, CORRUPT)
    if status == FOUND:
        assert pos + 17 <= len(blob)


def test_mutations_of_a_valid_file_agree_on_both_backends():
    data, _ = sample_file()
    rng = random.Random(7)
    for _ in range(2000):
        bad = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        cut = bytes(bad[:rng.randrange(len(bad) + 1)])
        args = (cut, rng.randrange(len(cut) + 1), rng.choice([len(cut), len(data)]),
                rng.randrange(-2, 20))
        answers = {mod.find_entry(*args) for mod in both()}
        assert len(answers) == 1, (args, answers)
