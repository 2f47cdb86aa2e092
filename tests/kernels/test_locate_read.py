"""A read's index lookup and header check in one kernel call (``entry_walk.locate_read``).

Every test runs on both implementations (conftest's ``impl`` fixture). Files are built with
the byte builders of tests/_helpers.py and their offset indexes by hand here (kafka-storage.md
layouts: big-endian ``relativeOffset int32, position int32``, one entry per batch under its
*last* offset, as Kafka's LogSegment.append writes them). The expected answer is the model
below, written from Kafka's rules (LogSegment.read: the batch holding the target is the
first whose last offset is >= it); hostile bytes are checked by comparing the two
implementations and by bounds.
"""

from __future__ import annotations

import random
import struct

from _helpers import legacy, rec, v2_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

WINDOW = 8192


def segment(base: int, sizes: list[int], *, legacy_at: int = -1):
    """``(log bytes, index bytes, [(position, size, base offset, last offset)])``: v2 batches
    of ``sizes[i]`` records each from ``base`` (a v1 message instead at ``legacy_at``),
    every batch indexed."""
    out, index, facts, offset, pos = [], [], [], base, 0
    for i, n in enumerate(sizes):
        if i == legacy_at:
            data = legacy(1, offset, b"k", b"v" * 40, timestamp=5)
            n = 1
        else:
            data = v2_batch(b"".join(rec(d, value=b"v" * 40) for d in range(n)), count=n,
                            base_offset=offset, last_offset_delta=n - 1)
        facts.append((pos, len(data), offset, offset + n - 1))
        index.append(struct.pack(">ii", offset + n - 1 - base, pos))
        out.append(data)
        offset += n
        pos += len(data)
    return b"".join(out), b"".join(index), facts


def pread_of(data: bytes, calls: list | None = None):
    def pread(fd, size, position):
        if calls is not None:
            calls.append((fd, size, position))
        return data[position:position + size]
    return pread


def model(facts, target):
    for pos, size, _, last in facts:
        if last >= target:
            return pos, size
    return None


def check(got, data, facts, target):
    """``got`` is the model's batch with the bytes the file holds from it on."""
    pos, size, window = got
    assert (pos, size) == model(facts, target)
    assert window == data[pos:pos + len(window)] and len(window) >= min(43, len(data) - pos)


def test_every_offset_of_an_indexed_segment_in_one_pread(impl):
    data, index, facts = segment(100, [3, 1, 5, 2, 4])
    for window in (43, 200, 8192):
        for target in range(100, facts[-1][3] + 1):
            calls = []
            got = impl.entry_walk.locate_read(index, len(facts), 100, target,
                                              pread_of(data, calls), 7, len(data), window)
            # every batch is indexed: the common case always applies
            assert got is not None, (target, window)
            check(got, data, facts, target)
            assert calls == [(7, min(window, len(data) - got[0]), got[0])]


def test_a_window_shorter_than_the_header_is_left_to_the_walk(impl):
    data, index, facts = segment(0, [30, 30, 30])
    target = facts[1][2] + 3
    locate = impl.entry_walk.locate_read
    assert locate(index, len(facts), 0, target, pread_of(data), 0, len(data), 42) is None
    assert locate(index, len(facts), 0, target, pread_of(data), 0, len(data), 64) \
        == (facts[1][0], facts[1][1], data[facts[1][0]:facts[1][0] + 64])


def test_the_uncommon_cases_go_back_to_the_general_path(impl):
    locate = impl.entry_walk.locate_read
    data, index, facts = segment(0, [3, 1, 5, 2])
    stop = len(data)
    # no entry <= the target, or none after it: the walk from the entry (or the start)
    # within one window, as Kafka's
    for idx, n, target in ((b"", 0, 5), (index, 2, facts[2][3]), (index, 4, facts[3][3] - 1)):
        got = locate(idx, n, 0, target, pread_of(data), 0, stop, WINDOW)
        check(got, data, facts, target)
    # an index whose count says more than its bytes hold is capped
    got = locate(index, 10**6, 0, 4, pread_of(data), 0, stop, WINDOW)
    check(got, data, facts, 4)
    # ... but not when the window ends before the batch's header
    assert locate(b"", 0, 0, facts[3][2], pread_of(data), 0, stop, 100) is None
    # a sparse index (entries 0 and 2 only): entry 2's batch starts after the target
    # (a second read then walks from entry 0, as Kafka's walk would)
    sparse = index[:8] + index[16:24]
    calls = []
    got = locate(sparse, 2, 0, facts[1][2], pread_of(data, calls), 0, stop, WINDOW)
    check(got, data, facts, facts[1][2])
    assert [c[2] for c in calls] == [facts[2][0], 0]
    # a target outside the segment's int32 range of relative offsets
    assert locate(index, 4, 0, 1 << 31, pread_of(data), 0, stop, WINDOW) is None
    assert locate(index, 4, 1 << 40, 0, pread_of(data), 0, stop, WINDOW) is None
    # a pread that gives something other than bytes (a test's file system)
    got = locate(index, 4, 0, 4, lambda *a: bytearray(8192), 0, stop, WINDOW)
    assert got is None


def test_a_legacy_entry_is_not_trusted_from_the_next_position(impl):
    # a v1 message's offset field is its (last) offset: from the next entry's position it
    # cannot say it holds the target, so the general walk decides
    data, index, facts = segment(0, [3, 1, 2], legacy_at=1)
    locate = impl.entry_walk.locate_read
    assert locate(index, 3, 0, facts[1][2], pread_of(data), 0, len(data), WINDOW) \
        == (facts[1][0], facts[1][1], data[facts[1][0]:])   # the entry maps it
    assert locate(index, 3, 0, facts[2][2], pread_of(data), 0, len(data), WINDOW) \
        is not None   # the v2 batch after it
    broken = index[:8] + struct.pack(">ii", 99, facts[1][0]) + index[16:]
    # (entry 1 now maps offset 99: a read of offset 3 looks at entry 0's next position,
    # the v1 message, which cannot say it holds 3, then walks from entry 0)
    calls = []
    got = locate(broken, 3, 0, 3, pread_of(data, calls), 0, len(data), WINDOW)
    check(got, data, facts, 3)
    assert [c[2] for c in calls] == [facts[1][0], 0]


def test_index_positions_are_checked_before_they_are_read(impl):
    data, index, facts = segment(0, [3, 1, 5, 2])
    locate = impl.entry_walk.locate_read
    calls = []
    for bad in (-5, len(data), len(data) + 100, (1 << 31) - 1):
        hostile = index[:8] + struct.pack(">ii", facts[1][3], bad) + index[16:]
        for target in (facts[1][2], facts[1][3]):
            assert locate(hostile, 4, 0, target, pread_of(data, calls), 0, len(data),
                          WINDOW) is None
    assert all(0 <= pos < len(data) for _, _, pos in calls)


def test_a_size_field_past_the_file_end_or_below_the_minimum(impl):
    data, index, facts = segment(0, [3, 1, 5])
    locate = impl.entry_walk.locate_read
    target = facts[1][2]
    for size in (0, 13, len(data), (1 << 31) - 1, -1):
        bad = bytearray(data)
        struct.pack_into(">i", bad, facts[1][0] + 8, size)
        assert locate(index, 3, 0, target, pread_of(bytes(bad)), 0, len(bad), WINDOW) is None
    # the file's logical end cuts the batch: not found here either
    assert locate(index, 3, 0, target, pread_of(data), 0, facts[1][0] + facts[1][1] - 1,
                  WINDOW) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), flips=st.integers(0, 6),
       target=st.integers(-5, 60), window=st.sampled_from([17, 43, 64, 500, 8192]))
def test_both_implementations_agree_on_hostile_bytes(seed, flips, target, window):
    import importlib

    rng = random.Random(seed)
    data, index, facts = segment(0, [rng.randint(1, 6) for _ in range(rng.randint(1, 8))],
                                 legacy_at=rng.choice([-1, 0, 2]))
    data, index = bytearray(data), bytearray(index)
    for _ in range(flips):
        buf = rng.choice([data, index]) if index else data
        if buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    data, index = bytes(data), bytes(index)
    entries = rng.choice([len(facts), len(facts) + 3, max(0, len(facts) - 1)])
    stop = rng.choice([len(data), max(0, len(data) - rng.randint(0, 80))])
    answers = []
    for name in ("kafkastore._pure.entry_walk", "kafkastore._ext.entry_walk"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        answers.append(module.locate_read(index, entries, 0, target, pread_of(data), 0,
                                          stop, window))
    assert all(a == answers[0] for a in answers)
    got = answers[0]
    if got is not None:
        pos, size, window_bytes = got
        assert 0 <= pos and pos + size <= stop
        assert window_bytes == data[pos:pos + len(window_bytes)]
        assert size <= len(window_bytes) or len(window_bytes) <= window
