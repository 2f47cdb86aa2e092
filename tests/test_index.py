"""OffsetIndex and TimeIndex (kafkastore.index), on both kernels.

The ``backend`` fixture runs every test twice in one session: kafkastore.index searching
with the compiled ``index_search`` kernel and with its pure-Python twin. Scenarios are
ported from Kafka's OffsetIndexTest and TimeIndexTest (kafka-storage.md §10.1 and §10.2;
the Java test names are in the comments). Expected bytes are built with ``struct`` from
the layouts in §3.1, expected lookups with ``bisect``; the reference vectors' sidecars
give the expected lookups of index files Kafka's rules produced.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import os
import random
import struct
import sys
import threading

import numpy as np
import pytest
from _vectors import VECTORS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkastore
import kafkastore._kernels as K
from kafkastore import abstract_index, index_view, offset_index, time_index
from kafkastore.errors import (
    CorruptIndexError,
    IndexClosedError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidTimestampError,
    KafkaStoreError,
)
from kafkastore.index import (
    DEFAULT_MAX_INDEX_SIZE,
    NO_TIMESTAMP,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
ON_LINUX = sys.platform.startswith("linux")


def examples(n: int) -> int:
    """``n`` under the default profile; more under the ci/expensive profiles."""
    return max(n, settings.default.max_examples)


# The modules behind kafkastore.index that bind the index_search kernel at import.
INDEX_MODULES = (abstract_index, offset_index, time_index, index_view)


@pytest.fixture
def backend(impl, monkeypatch):
    """kafkastore.index bound to ``impl``'s index_search kernel ("cython" or "python").

    The index modules bind the kernel's functions to module globals at import; in each,
    every global that is a function of the live kernel is re-bound to ``impl``'s."""
    live, chosen = abstract_index._search, impl.index_search
    by_identity = {id(getattr(live, name)): name for name in live.__all__
                   if callable(getattr(live, name))}
    for module in INDEX_MODULES:
        assert module._search is live
        monkeypatch.setattr(module, "_search", chosen)
        for name, value in list(vars(module).items()):
            if id(value) in by_identity:
                monkeypatch.setattr(module, name, getattr(chosen, by_identity[id(value)]))
        for value in vars(module).values():  # nothing of the other kernel is left
            if impl.name == "python" and K.BACKEND == "cython":
                assert getattr(value, "__module__", None) != "kafkastore._ext.index_search"
    return impl.name


def offset_bytes(entries, base=0) -> bytes:
    """An offset index file as Kafka writes it: absolute (offset, position) pairs."""
    return b"".join(struct.pack(">ii", offset - base, position) for offset, position in entries)


def time_bytes(entries, base=0) -> bytes:
    """A time index file as Kafka writes it: absolute (timestamp, offset) pairs."""
    return b"".join(struct.pack(">qi", ts, offset - base) for ts, offset in entries)


def open_fds(path) -> list[str]:
    """Descriptors of this process open on ``path`` (Linux /proc)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.removesuffix(" (deleted)") == str(path):
            found.append(fd)
    return found


def mapped(path) -> bool:
    """Whether ``path`` is mapped into this process (Linux /proc)."""
    with open("/proc/self/maps") as maps:
        return any(line.rstrip("\n").removesuffix(" (deleted)").endswith(" " + str(path))
                   for line in maps)


# == OffsetIndexTest (§10.1): maxIndexSize 30 * 8, base offset 45 ==========================

BASE = 45


@pytest.fixture
def oidx(backend, tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, 30 * 8)
    yield index
    index.close()


def test_offset_lookup_on_empty_index(oidx):
    # OffsetIndexTest.randomLookupTest (first assertion)
    assert oidx.lookup(92) == OffsetPosition(BASE, 0)
    assert oidx.lookup(BASE) == (BASE, 0)
    assert oidx.entries == 0 and oidx.max_entries == 30 and oidx.last_offset == BASE


def monotonic_seq(rng, base, n):
    """Kafka's monotonicSeq: n values, each 1 to 5 above the previous, from base."""
    out, last = [], base
    for _ in range(n):
        last += rng.randrange(1, 6)
        out.append(last)
    return out


def test_offset_random_lookup(oidx):
    # OffsetIndexTest.randomLookupTest
    rng = random.Random(45)
    offsets = monotonic_seq(rng, BASE + 1, oidx.max_entries)
    positions = monotonic_seq(rng, 0, oidx.max_entries)
    for offset, position in zip(offsets, positions, strict=True):
        oidx.append(offset, position)
    # every exact lookup hits
    for offset, position in zip(offsets, positions, strict=True):
        assert oidx.lookup(offset) == OffsetPosition(offset, position)
    # others give the floor entry, or (base, 0) below the first
    for _ in range(1000):
        target = rng.randrange(offsets[-1] + 2)
        i = bisect.bisect_right(offsets, target) - 1
        expected = (BASE, 0) if i < 0 else (offsets[i], positions[i])
        assert oidx.lookup(target) == expected, target


def test_offset_lookup_extreme_cases(oidx):
    # OffsetIndexTest.lookupExtremeCases
    assert oidx.lookup(BASE) == (BASE, 0), "Lookup on empty file"
    for i in range(oidx.max_entries):
        oidx.append(BASE + i + 1, i)
    assert oidx.lookup(BASE) == (BASE, 0)
    assert oidx.lookup(BASE + oidx.max_entries) == (BASE + oidx.max_entries,
                                                    oidx.max_entries - 1)


def test_offset_entry(oidx):
    # OffsetIndexTest.testEntry
    for i in range(oidx.max_entries):
        oidx.append(BASE + i + 1, i)
    for i in range(oidx.max_entries):
        assert oidx.entry(i) == OffsetPosition(BASE + i + 1, i)


def test_offset_entry_overflow(oidx):
    # OffsetIndexTest.testEntryOverflow
    with pytest.raises(IndexError, match="Attempt to fetch the 0th entry"):
        oidx.entry(0)
    oidx.append(BASE + 1, 0)
    with pytest.raises(IndexError):
        oidx.entry(1)
    with pytest.raises(IndexError):
        oidx.entry(-1)


def test_offset_append_too_many(oidx):
    # OffsetIndexTest.appendTooMany
    for i in range(oidx.max_entries):
        oidx.append(BASE + i + 1, i)
    assert oidx.is_full()
    with pytest.raises(IndexFullError, match="full index") as info:
        oidx.append(BASE + oidx.max_entries + 1, 0)
    assert isinstance(info.value, (KafkaStoreError, ValueError))


def test_offset_append_out_of_order(oidx):
    # OffsetIndexTest.appendOutOfOrder
    oidx.append(51, 0)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset") as info:
        oidx.append(50, 1)
    assert info.value.offset == 50 and info.value.path == str(oidx.path)
    with pytest.raises(InvalidOffsetError):
        oidx.append(51, 1)  # equal is not larger
    assert oidx.entries == 1


def test_offset_fetch_upper_bound_offset(oidx):
    # OffsetIndexTest.testFetchUpperBoundOffset (the table of kafka-storage.md §3.3)
    first = OffsetPosition(BASE + 0, 0)
    second = OffsetPosition(BASE + 1, 10)
    third = OffsetPosition(BASE + 2, 23)
    fourth = OffsetPosition(BASE + 3, 37)
    assert oidx.fetch_upper_bound_offset(first, 5) is None
    for entry in (first, second, third, fourth):
        oidx.append(*entry)
    assert oidx.fetch_upper_bound_offset(first, 5) == second
    assert oidx.fetch_upper_bound_offset(first, 10) == second
    assert oidx.fetch_upper_bound_offset(first, 23) == third
    assert oidx.fetch_upper_bound_offset(first, 22) == third
    assert oidx.fetch_upper_bound_offset(second, 24) == fourth
    assert oidx.fetch_upper_bound_offset(fourth, 1) is None
    assert oidx.fetch_upper_bound_offset(first, 200) is None
    assert oidx.fetch_upper_bound_offset(second, 200) is None
    # a bare position works too
    assert oidx.fetch_upper_bound_offset(10, 24) == fourth


def test_offset_reopen(oidx):
    # OffsetIndexTest.testReopen
    first = OffsetPosition(51, 0)
    second = OffsetPosition(52, 1)
    oidx.append(*first)
    oidx.append(*second)
    oidx.close()
    reopened = OffsetIndex(oidx.path, oidx.base_offset)
    try:
        assert reopened.lookup(first.offset) == first
        assert reopened.lookup(second.offset) == second
        assert reopened.last_offset == second.offset
        assert reopened.entries == 2
        # trimmed on close, so the reopened index is full
        with pytest.raises(IndexFullError):
            reopened.append(53, 2)
    finally:
        reopened.close()


def test_offset_truncate(backend, tmp_path):
    # OffsetIndexTest.truncate (base 0, 10 * 8 bytes)
    idx = OffsetIndex(tmp_path / "t.index", 0, 10 * 8)
    for i in range(1, 10):
        idx.append(i, i)
    idx.truncate_to(12)
    assert idx.lookup(10) == (9, 9), "Index should be unchanged by truncate past the end"
    assert idx.last_offset == 9
    idx.append(10, 10)
    idx.truncate_to(10)
    assert idx.lookup(10) == (9, 9), "Index should be unchanged by truncate at the end"
    assert idx.last_offset == 9
    idx.append(10, 10)
    idx.truncate_to(9)
    assert idx.lookup(10) == (8, 8), "Index should truncate off last entry"
    assert idx.last_offset == 8
    idx.append(9, 9)
    idx.truncate_to(5)
    assert idx.lookup(10) == (4, 4), "4 should be the last entry in the index"
    assert idx.last_offset == 4
    idx.append(5, 5)
    idx.truncate()
    assert idx.entries == 0, "Full truncation should leave no entries"
    assert idx.last_offset == 0
    idx.append(0, 0)
    assert idx.length == 80  # truncation never changes the file length
    idx.truncate_to(0)  # an exact match on the first entry goes too
    assert idx.entries == 0
    idx.close()


def test_offset_use_after_unmap_fails_loudly(oidx):
    # OffsetIndexTest.forceUnmapTest: a use after unmap must fail, not read freed memory
    oidx.append(BASE + 1, 0)
    oidx.close_handler()
    for call in (lambda: oidx.lookup(1), lambda: oidx.entry(0), lambda: oidx.append(50, 1),
                 lambda: oidx.truncate_to(1), lambda: oidx.truncate(), lambda: oidx.resize(80),
                 lambda: oidx.flush(), lambda: oidx.sanity_check(), lambda: oidx.last_entry,
                 lambda: oidx.fetch_upper_bound_offset(0, 1)):
        with pytest.raises(IndexClosedError):
            call()
    assert oidx.closed
    oidx.close()  # unlike Kafka's NPE, closing twice is allowed (Python's file convention)


def test_offset_sanity_last_offset_equal_to_base(backend, tmp_path):
    # OffsetIndexTest.testSanityLastOffsetEqualToBaseOffset
    idx = OffsetIndex(tmp_path / "s.index", 20, 10 * 8)
    idx.append(20, 0)
    idx.sanity_check()
    idx.sanity_check(full=True)
    idx.close()


# == TimeIndexTest (§10.2): maxEntries 30, base 45, entries (10i, 45 + 10i) ================

MAX_ENTRIES = 30


@pytest.fixture
def tidx(backend, tmp_path):
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, MAX_ENTRIES * 12)
    yield index
    index.close()


def append_entries(index, n):
    for i in range(1, n + 1):
        index.maybe_append(i * 10, i * 10 + BASE)


def test_time_lookup(tidx):
    # TimeIndexTest.testLookUp
    assert tidx.lookup(100) == TimestampOffset(-1, BASE)  # empty
    append_entries(tidx, MAX_ENTRIES - 1)
    assert tidx.lookup(9) == TimestampOffset(NO_TIMESTAMP, BASE)  # below the first
    assert tidx.lookup(25) == TimestampOffset(20, 65)  # between two entries
    assert tidx.lookup(30) == TimestampOffset(30, 75)  # exact


def test_time_entry(tidx):
    # TimeIndexTest.testEntry
    append_entries(tidx, MAX_ENTRIES - 1)
    assert tidx.entry(0) == TimestampOffset(10, 55)
    assert tidx.entry(1) == TimestampOffset(20, 65)
    assert tidx.entry(2) == TimestampOffset(30, 75)
    assert tidx.entry(3) == TimestampOffset(40, 85)


def test_time_entry_overflow(tidx):
    # TimeIndexTest.testEntryOverflow
    with pytest.raises(IndexError, match="Attempt to fetch the 0th entry"):
        tidx.entry(0)


def test_time_truncate(tidx):
    # TimeIndexTest.testTruncate
    append_entries(tidx, MAX_ENTRIES - 1)
    tidx.truncate()
    assert tidx.entries == 0
    assert tidx.last_entry == (NO_TIMESTAMP, BASE)
    append_entries(tidx, MAX_ENTRIES - 1)
    tidx.truncate_to(10 + BASE)  # the first entry's offset: everything goes
    assert tidx.entries == 0
    append_entries(tidx, 5)
    tidx.truncate_to(BASE + 31)  # between entries 3 (75) and 4 (85): keep 3
    assert tidx.entries == 3 and tidx.last_entry == (30, 75)
    tidx.truncate_to(BASE + 30)  # exactly entry 3: it goes
    assert tidx.entries == 2 and tidx.last_entry == (20, 65)


def test_time_append(tidx):
    # TimeIndexTest.testAppend
    append_entries(tidx, MAX_ENTRIES - 1)
    assert tidx.is_full()
    with pytest.raises(IndexFullError):
        tidx.maybe_append(10000, 1000 + BASE)
    with pytest.raises(InvalidOffsetError):
        tidx.maybe_append(10000, (MAX_ENTRIES - 2) * 10, skip_full_check=True)
    tidx.maybe_append(10000, 1000 + BASE, skip_full_check=True)
    assert tidx.entries == MAX_ENTRIES and tidx.last_entry == (10000, 1000 + BASE)
    # no slot at all is left now, even with skip_full_check
    with pytest.raises(IndexFullError):
        tidx.maybe_append(10001, 1001 + BASE, skip_full_check=True)
    # the same final entry again (roll then close) is silently ignored
    tidx.maybe_append(10000, 1000 + BASE, skip_full_check=True)
    assert tidx.entries == MAX_ENTRIES


def test_time_sanity_check(backend, tmp_path):
    # TimeIndexTest.testSanityCheck: Kafka corrupts lastEntry()/length() by overriding
    # them; here the same three corruptions are written into real files.
    path = tmp_path / "00000000000000000045.timeindex"
    idx = TimeIndex(path, BASE, MAX_ENTRIES * 12)
    idx.sanity_check()  # empty
    append_entries(idx, 5)
    first = idx.entry(0)
    idx.sanity_check()
    idx.close()
    good = path.read_bytes()
    assert len(good) == 5 * 12

    def check(data, message):
        path.write_bytes(data)
        reopened = TimeIndex(path, BASE, MAX_ENTRIES * 12)
        try:
            with pytest.raises(CorruptIndexError, match=message) as info:
                reopened.sanity_check()
            assert info.value.path == str(path)
        finally:
            reopened.close_handler()

    entries = [(10 * i, BASE + 10 * i) for i in range(1, 6)]
    # last offset below the base offset
    check(time_bytes(entries[:-1] + [(50, BASE - 1)], BASE), "last offset is 44")
    # last timestamp below the first
    check(time_bytes(entries[:-1] + [(first.timestamp - 1, BASE + 50)], BASE),
          "last timestamp is 9 which is less than the first timestamp 10")
    # a length that is not a multiple of 12
    check(good + b"\x00", "found 61 bytes")
    path.write_bytes(good)
    reopened = TimeIndex(path, BASE, MAX_ENTRIES * 12)
    reopened.sanity_check()
    reopened.sanity_check(full=True)
    reopened.close()


def test_time_is_full(tidx):
    # isFull is true at maxEntries - 1: one slot is kept for the final entry
    append_entries(tidx, MAX_ENTRIES - 2)
    assert not tidx.is_full()
    tidx.maybe_append((MAX_ENTRIES - 1) * 10, (MAX_ENTRIES - 1) * 10 + BASE)
    assert tidx.entries == MAX_ENTRIES - 1 and tidx.is_full()


def test_time_last_entry(tidx):
    assert tidx.last_entry == TimestampOffset(-1, BASE)
    tidx.maybe_append(7, BASE + 3)
    assert tidx.last_entry == TimestampOffset(7, BASE + 3)


def test_time_resize(tidx):
    # TimeIndexTest.testResize
    assert tidx.resize(tidx.max_index_size) is False
    assert tidx.resize(tidx.max_index_size // 2) is True
    assert tidx.length == 180 and tidx.max_entries == 15
    assert tidx.resize(tidx.max_index_size) is True
    assert tidx.length == 360 and tidx.max_entries == 30


def test_time_entry_size_and_parse(tidx):
    # TimeIndexTest: entrySize is 12, parseEntry decodes slot 0
    assert tidx.entry_size == TimeIndex.ENTRY_SIZE == 12
    assert OffsetIndex.ENTRY_SIZE == 8
    tidx.maybe_append(1234, BASE + 7)
    assert tidx.entry(0) == TimestampOffset(1234, BASE + 7)


# == append rules beyond Kafka's tests =====================================================


def test_offset_relative_overflow(backend, tmp_path):
    idx = OffsetIndex(tmp_path / "o.index", 1000, 80)
    with pytest.raises(IndexOffsetOverflowError, match="Integer overflow for offset: 999") as e:
        idx.append(999, 0)  # below the base: negative relative offset
    assert e.value.offset == 999
    idx.append(1000 + INT32_MAX, 0)  # the largest relative offset fits
    assert idx.lookup(1000 + INT32_MAX) == (1000 + INT32_MAX, 0)
    idx.truncate()
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(1000 + INT32_MAX + 1, 0)
    assert idx.can_append_offset(1000) and idx.can_append_offset(1000 + INT32_MAX)
    assert not idx.can_append_offset(999) and not idx.can_append_offset(1000 + INT32_MAX + 1)
    assert idx.entries == 0
    with pytest.raises(ValueError, match="position"):
        idx.append(1001, -1)
    with pytest.raises(ValueError, match="position"):
        idx.append(1001, INT32_MAX + 1)
    with pytest.raises(TypeError):
        idx.append(1001.0, 0)
    idx.close()


def test_time_append_rules(backend, tmp_path):
    idx = TimeIndex(tmp_path / "t.timeindex", 100, 10 * 12)
    idx.maybe_append(-1, 100)  # magic 0 data: no timestamp, no entry
    assert idx.entries == 0
    with pytest.raises(IndexOffsetOverflowError):
        idx.maybe_append(5, 99)  # below the base offset
    idx.maybe_append(5, 110)
    idx.maybe_append(5, 120)  # equal timestamp: ignored
    assert idx.entries == 1 and idx.last_entry == (5, 110)
    with pytest.raises(InvalidTimestampError, match="no larger than the last timestamp") as e:
        idx.maybe_append(4, 120)
    assert e.value.timestamp == 4 and e.value.offset == 120
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset") as e:
        idx.maybe_append(6, 105)
    assert e.value.offset == 105
    idx.maybe_append(6, 110)  # same offset, larger timestamp: appended
    assert idx.entries == 2 and idx.last_entry == (6, 110)
    with pytest.raises(ValueError, match="int64"):
        idx.maybe_append(INT64_MAX + 1, 130)
    idx.close()


def test_read_only_index_never_changes_the_file(backend, tmp_path):
    path = tmp_path / "r.index"
    data = offset_bytes([(10, 0), (12, 100), (15, 250)], 10) + b"\x01\x02\x03"  # odd length
    path.write_bytes(data)
    idx = OffsetIndex(path, 10, writable=False)
    assert idx.entries == 3 and idx.length == len(data) and not idx.writable
    assert idx.lookup(13) == (12, 100)
    for call in (lambda: idx.append(16, 300), lambda: idx.resize(1000),
                 lambda: idx.trim_to_valid_size(), lambda: idx.reset_size_to_max()):
        with pytest.raises(io.UnsupportedOperation):
            call()
    with pytest.raises(CorruptIndexError, match="found 27 bytes which is neither"):
        idx.sanity_check()
    idx.flush()
    idx.close()
    assert path.read_bytes() == data  # not trimmed
    with pytest.raises(FileNotFoundError):
        TimeIndex(tmp_path / "missing.timeindex", 0, writable=False)


# == files: preallocation, sizes, bytes ====================================================


def test_new_files_are_preallocated(backend, tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0)
    assert os.path.getsize(idx.path) == DEFAULT_MAX_INDEX_SIZE == 10485760
    assert idx.max_entries == 1310720 and idx.entries == 0
    tidx = TimeIndex(tmp_path / "a.timeindex", 0)
    assert os.path.getsize(tidx.path) == 10485756 and tidx.max_entries == 873813
    odd = TimeIndex(tmp_path / "b.timeindex", 0, 30 * 12 + 11)
    assert odd.length == 360 and odd.max_index_size == 30 * 12 + 11
    for index in (idx, tidx, odd):
        index.close()
        assert os.path.getsize(index.path) == 0  # trimmed to its (no) entries


def test_invalid_max_index_size(backend, tmp_path):
    with pytest.raises(ValueError, match="Invalid max index size: 7"):
        OffsetIndex(tmp_path / "x.index", 0, 7)
    assert not (tmp_path / "x.index").exists()  # nothing left behind
    with pytest.raises(ValueError, match="Invalid max index size: 11"):
        TimeIndex(tmp_path / "x.timeindex", 0, 11)
    # an existing file does not need a valid size: it is mapped as it is
    (tmp_path / "y.index").write_bytes(offset_bytes([(3, 0)]))
    idx = OffsetIndex(tmp_path / "y.index", 0, 0)
    assert idx.entries == 1
    idx.close()


def test_files_are_kafka_bytes(backend, tmp_path):
    """Every byte is what Kafka's ByteBuffer.putInt/putLong write: big-endian, relative."""
    base = 114514
    offsets = [(base, 0), (base + 129, 8360), (base + 131, 12876), (base + 2**31 - 1, 2**31 - 1)]
    times = [(0, base), (1700000003891, base + 129), (1700000004887, base + 131),
             (INT64_MAX, base + 2**31 - 1)]
    idx = OffsetIndex(tmp_path / f"{base:020d}.index", base)
    tidx = TimeIndex(tmp_path / f"{base:020d}.timeindex", base)
    for entry in offsets:
        idx.append(*entry)
    for entry in times:
        tidx.maybe_append(*entry)
    idx.flush()
    tidx.flush()
    # while open: the entries, then the preallocated zeros
    head = idx.path.read_bytes()[:48]
    assert head == offset_bytes(offsets, base) + bytes(16)
    idx.close()
    tidx.close()
    assert idx.path.read_bytes() == offset_bytes(offsets, base)
    assert tidx.path.read_bytes() == time_bytes(times, base)
    assert idx.path.read_bytes()[8:16] == bytes.fromhex("00000081 000020a8")


def test_existing_file_entries_come_from_its_length(backend, tmp_path):
    # Kafka: an existing file is assumed valid; entries = length / entry size
    path = tmp_path / "e.index"
    path.write_bytes(offset_bytes([(5, 0), (6, 10)], 5) + bytes(8 * 3))  # untrimmed
    idx = OffsetIndex(path, 5)
    assert idx.entries == 5 == idx.max_entries and idx.is_full()
    assert idx.last_offset == 5  # the zero padding reads as relative offset 0
    idx.sanity_check()  # Kafka's checks do not see zero padding ...
    with pytest.raises(CorruptIndexError, match="entry 2") as info:
        idx.sanity_check(full=True)  # ... the full check does
    assert info.value.position == 16 and info.value.offset == 5
    idx.close_handler()


def test_resize_trim_and_grow_back(backend, tmp_path):
    path = tmp_path / "g.index"
    idx = OffsetIndex(path, 0, 100 * 8)
    for i in range(10):
        idx.append(i, i * 10)
    assert idx.trim_to_valid_size() is True
    assert os.path.getsize(path) == 80 and idx.is_full()
    assert idx.trim_to_valid_size() is False
    with pytest.raises(ValueError, match="holds 10 entries"):
        idx.resize(79)
    with pytest.raises(ValueError, match="negative"):
        idx.resize(-8)
    assert idx.reset_size_to_max() is True  # the active segment reopened
    assert os.path.getsize(path) == 800 and idx.max_entries == 100 and idx.entries == 10
    assert idx.resize(805) is False  # rounds down to 800
    idx.append(10, 100)
    assert idx.lookup(10) == (10, 100) and idx.lookup(5) == (5, 50)
    idx.reset()
    assert idx.entries == 0 and idx.length == 800
    idx.close()
    assert os.path.getsize(path) == 0


def test_reopened_active_index_grows_back(backend, tmp_path):
    path = tmp_path / "a.timeindex"
    idx = TimeIndex(path, 0, 50 * 12)
    for i in range(1, 8):
        idx.maybe_append(i * 100, i)
    idx.close()
    again = TimeIndex(path, 0, 50 * 12)
    assert again.entries == 7 and again.is_full() and again.last_entry == (700, 7)
    again.reset_size_to_max()
    assert not again.is_full() and again.last_entry == (700, 7)
    again.maybe_append(800, 8)
    assert again.lookup(750) == (700, 7) and again.lookup(10**6) == (800, 8)
    again.close()


def test_numpy_integers_are_accepted(backend, tmp_path):
    idx = OffsetIndex(tmp_path / "n.index", 0, 80)
    idx.append(np.int64(3), np.int32(30))
    assert idx.lookup(np.int64(4)) == (3, 30)
    assert idx.entry(np.int64(0)) == (3, 30)
    tidx = TimeIndex(tmp_path / "n.timeindex", 0, 120)
    tidx.maybe_append(np.int64(100), np.uint32(3))
    assert tidx.lookup(np.int64(150)) == (100, 3)
    with pytest.raises(TypeError):
        idx.lookup(3.5)
    idx.close()
    tidx.close()


# == life cycle: close, rename, delete =====================================================


@pytest.mark.skipif(not ON_LINUX, reason="inspects /proc/self")
def test_close_releases_the_file(backend, tmp_path):
    path = tmp_path / "c.index"
    idx = OffsetIndex(path, 0, 64 * 8)
    for i in range(5):
        idx.append(i, i * 8)
    idx.lookup(3)
    assert open_fds(path) == []  # mapped without a descriptor, as Java's MappedByteBuffer
    assert mapped(path)
    idx.close()
    assert open_fds(path) == [] and not mapped(path)
    assert idx.closed
    # nothing pins the file: it can be truncated and renamed at once
    os.truncate(path, 8)
    os.replace(path, tmp_path / "moved.index")
    tidx = TimeIndex(tmp_path / "c.timeindex", 0, 64 * 12)
    tidx.maybe_append(5, 1)
    tidx.delete_if_exists()
    assert open_fds(tidx.path) == [] and not mapped(tidx.path)


def test_close_trims_and_allows_reopen_many_times(backend, tmp_path):
    """Opening and closing in a loop leaks neither descriptors nor mappings."""
    path = tmp_path / "loop.index"
    before = len(os.listdir("/proc/self/fd")) if ON_LINUX else 0
    for i in range(200):
        with OffsetIndex(path, 0, 256 * 8) as idx:
            idx.reset_size_to_max()
            idx.append(idx.last_offset + 1 if idx.entries else 0, i)
    if ON_LINUX:
        assert len(os.listdir("/proc/self/fd")) == before
    with OffsetIndex(path, 0, writable=False) as idx:
        assert idx.entries == 200


@pytest.mark.skipif(not ON_LINUX, reason="inspects /proc/self")
def test_resize_and_close_never_pull_memory_from_a_reader(backend, tmp_path):
    """Issue 18 defect 1: a resize unmapped the index under a lock-free lookup (which then
    raised). Now a reader holding the old view keeps valid memory until it lets go, the
    index is remapped at once, and the old map goes with the reader's last reference."""
    path = tmp_path / "b.index"
    idx = OffsetIndex(path, 0, 80)
    idx.append(1, 8)
    reader = memoryview(idx._view)  # what a lookup in flight holds
    assert idx.resize(160)          # a growth: a new map, the reader keeps the old one
    assert idx.lookup(5) == (1, 8) and idx.length == 160 and idx.max_entries == 20
    idx.append(2, 16)
    assert idx.trim_to_valid_size()  # a roll's trim
    assert reader[:8] == struct.pack(">ii", 1, 8)  # the reader's view still reads
    held = np.frombuffer(idx._view, dtype=np.uint8)  # a buffer of the current view
    idx.close()
    assert idx.closed and open_fds(path) == []
    assert held[8:16].tobytes() == struct.pack(">ii", 2, 16)
    assert mapped(path)   # still the readers' memory
    reader.release()
    del reader, held
    import gc
    gc.collect()
    assert not mapped(path)


def test_rename_and_suffix_changes(backend, tmp_path):
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 80)
    idx.append(0, 0)
    idx.change_file_suffix("", ".deleted")
    assert idx.path == tmp_path / "00000000000000000000.index.deleted"
    assert idx.path.exists() and not path.exists()
    idx.append(1, 10)  # the mapping survives a rename
    idx.change_file_suffix(".deleted", "")
    assert idx.path == path
    with pytest.raises(ValueError, match="Expected string to end with '.swap'"):
        idx.change_file_suffix(".swap", "")
    other = tmp_path / "sub"
    other.mkdir()
    idx.rename_to(other / path.name)
    assert idx.path == other / path.name
    idx.close()
    assert (other / path.name).read_bytes() == offset_bytes([(0, 0), (1, 10)])
    # update_parent_dir only changes where the index points
    idx2 = OffsetIndex(other / "x.index", 0, 80)
    idx2.close()
    os.replace(other, tmp_path / "renamed")
    idx2.update_parent_dir(tmp_path / "renamed")
    assert idx2.path == tmp_path / "renamed" / "x.index"
    # a failed rename still moves the index's path (as Kafka's renameTo)
    idx3 = OffsetIndex(tmp_path / "y.index", 0, 80)
    idx3.delete_if_exists()
    with pytest.raises(FileNotFoundError):
        idx3.rename_to(tmp_path / "z.index")
    assert idx3.path == tmp_path / "z.index"


def test_delete_if_exists(backend, tmp_path):
    idx = TimeIndex(tmp_path / "d.timeindex", 0, 120)
    idx.maybe_append(1, 0)
    assert idx.delete_if_exists() is True
    assert not idx.path.exists() and idx.closed
    assert idx.delete_if_exists() is False
    with pytest.raises(IndexClosedError):
        idx.lookup(1)
    idx.close()


def test_repr_and_exports(backend, tmp_path):
    idx = OffsetIndex(tmp_path / "r.index", 7, 80)
    assert "OffsetIndex(" in repr(idx) and "entries=0" in repr(idx)
    idx.close()
    assert "closed" in repr(idx)
    for name in ("OffsetIndex", "TimeIndex", "CorruptIndexError", "IndexOffsetOverflowError"):
        assert getattr(kafkastore, name) is not None


# == properties against a brute-force model ================================================


@st.composite
def offset_entries(draw):
    n = draw(st.one_of(st.integers(0, 30), st.integers(1000, 2600)))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    gap = draw(st.sampled_from([1, 3, 4096]))
    offsets, positions = [], []
    offset, position = rng.randrange(gap), rng.randrange(100)
    for _ in range(n):
        if offset > INT32_MAX:
            break
        offsets.append(offset)
        positions.append(min(position, INT32_MAX))
        offset += 1 + rng.randrange(gap)
        position += 1 + rng.randrange(8192)
    targets = [rng.choice(offsets) + rng.randrange(-2, 3) if offsets else 0 for _ in range(40)]
    targets += draw(st.lists(st.integers(-(1 << 70), 1 << 70), max_size=4))
    return offsets, positions, targets


@settings(max_examples=examples(25), deadline=None, suppress_health_check=FIXTURE_OK)
@given(case=offset_entries(), base=st.sampled_from([0, 45, 1 << 40]))
def test_offset_lookups_agree_with_bisect(backend, tmp_path_factory, case, base):
    offsets, positions, targets = case
    path = tmp_path_factory.mktemp("p") / "i.index"
    idx = OffsetIndex(path, base, max(len(offsets), 1) * 8)
    for o, p in zip(offsets, positions, strict=True):
        idx.append(base + o, p)
    abs_offsets = [base + o for o in offsets]

    def floor(target):
        i = bisect.bisect_right(abs_offsets, target) - 1
        return (base, 0) if i < 0 else (abs_offsets[i], positions[i])

    def floor_and_next(target):
        i = bisect.bisect_right(abs_offsets, target) - 1
        after = positions[i + 1] if i + 1 < len(positions) else -1
        return (base, 0, after) if i < 0 else (abs_offsets[i], positions[i], after)

    try:
        for t in targets:
            assert idx.lookup(base + t) == floor(base + t)
            assert idx.lookup_with_next(base + t) == floor_and_next(base + t)
        start = positions[len(positions) // 2] if positions else 0
        for t in targets[:10]:
            size = abs(t) % 50000
            j = bisect.bisect_left(positions, start + size)
            expected = None if j == len(positions) else (abs_offsets[j], positions[j])
            assert idx.fetch_upper_bound_offset(OffsetPosition(base, start), size) == expected
        idx.sanity_check(full=True)
        idx.close()
        # another instance over the same file gives the same answers
        again = OffsetIndex(path, base, writable=False)
        assert again.entries == len(offsets)
        for t in targets:
            assert again.lookup(base + t) == floor(base + t)
        again.close()
    finally:
        idx.close()


@settings(max_examples=examples(25), deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=st.one_of(st.integers(0, 30), st.integers(600, 2000)),
       seed=st.integers(0, 2**32 - 1), base=st.sampled_from([0, 1000]))
def test_time_lookups_agree_with_bisect(backend, tmp_path_factory, n, seed, base):
    rng = random.Random(seed)
    timestamps, offsets = [], []
    ts, off = rng.randrange(1 << 41), base
    for _ in range(n):
        timestamps.append(ts)
        offsets.append(off)
        ts += 1 + rng.randrange(5000)
        off += rng.randrange(3)  # offsets never decrease, may repeat
    path = tmp_path_factory.mktemp("t") / "i.timeindex"
    idx = TimeIndex(path, base, (n + 1) * 12)
    for t, o in zip(timestamps, offsets, strict=True):
        idx.maybe_append(t, o)
    assert idx.entries == n
    targets = [rng.choice(timestamps) + rng.randrange(-2, 3) if n else 5 for _ in range(40)]
    targets += [-1, 0, INT64_MAX, 1 << 80, -(1 << 80)]
    try:
        for target in targets:
            i = bisect.bisect_right(timestamps, target) - 1
            expected = (NO_TIMESTAMP, base) if i < 0 else (timestamps[i], offsets[i])
            assert idx.lookup(target) == expected
        idx.sanity_check(full=True)
        # truncate_to searches the offset column and drops every entry >= cut. (With a
        # repeated offset Kafka's search may keep one entry equal to cut; Kafka's own
        # time indexes never repeat an offset, so only unrepeated cuts are checked.)
        if n:
            cut = rng.choice(offsets) + rng.randrange(0, 2)
            if offsets.count(cut) <= 1:
                idx.truncate_to(cut)
                assert idx.entries == bisect.bisect_left(offsets, cut)
                assert idx.last_entry == (
                    (timestamps[idx.entries - 1], offsets[idx.entries - 1]) if idx.entries
                    else (NO_TIMESTAMP, base))
    finally:
        idx.close()


# == hostile files =========================================================================


@settings(max_examples=examples(150), deadline=None, suppress_health_check=FIXTURE_OK)
@given(raw=st.binary(max_size=400), kind=st.sampled_from(["offset", "time"]),
       writable=st.booleans(), base=st.sampled_from([0, 7, 1 << 33]),
       targets=st.lists(st.integers(-(1 << 64), 1 << 64), min_size=1, max_size=6))
def test_hostile_files_give_typed_errors(backend, tmp_path_factory, raw, kind, writable, base,
                                         targets):
    """Any bytes: opening works (Kafka trusts existing files), lookups return entries of
    the file or the fallback, and sanity checks raise CorruptIndexError or pass."""
    cls = OffsetIndex if kind == "offset" else TimeIndex
    path = tmp_path_factory.mktemp("h") / f"x.{kind}"
    path.write_bytes(raw)
    idx = cls(path, base, writable=writable)
    try:
        assert idx.entries == len(raw) // cls.ENTRY_SIZE
        stored = {idx.entry(i) for i in range(idx.entries)}
        fallback = (base, 0) if kind == "offset" else (NO_TIMESTAMP, base)
        for t in targets:
            assert idx.lookup(t) in stored | {fallback}
        if kind == "offset":
            got = idx.fetch_upper_bound_offset(OffsetPosition(base, 0), abs(targets[0]) % 1000)
            assert got is None or got in stored
        for full in (False, True):
            try:
                idx.sanity_check(full=full)
            except CorruptIndexError as exc:
                assert exc.path == str(path)
        idx.truncate_to(targets[0])
        assert 0 <= idx.entries <= len(raw) // cls.ENTRY_SIZE
    finally:
        idx.close()
    if writable:
        assert os.path.getsize(path) == idx.entries * cls.ENTRY_SIZE
    else:
        assert path.read_bytes() == raw


HOSTILE_OFFSET = [
    # (entries, extra bytes, message of the full check, kafka check fails)
    ([(10, 0), (10, 8)], b"", "entry 1", False),  # repeated offset
    ([(12, 0), (11, 8)], b"", "entry 1", False),  # decreasing
    ([(10, 8), (11, 0)], b"", "entry 1", False),  # position going back
    ([(10, 0), (11, 8), (9, 16)], b"", "less than the base offset", True),  # last < base
    ([(10, 0)], b"\x00" * 5, "neither positive nor a multiple of 8", True),
]


@pytest.mark.parametrize(("entries", "extra", "message", "kafka_fails"), HOSTILE_OFFSET)
def test_hostile_offset_indexes(backend, tmp_path, entries, extra, message, kafka_fails):
    path = tmp_path / "h.index"
    path.write_bytes(offset_bytes(entries, 10) + extra)
    idx = OffsetIndex(path, 10, writable=False)
    if kafka_fails:
        with pytest.raises(CorruptIndexError, match=message):
            idx.sanity_check()
    else:
        idx.sanity_check()
        with pytest.raises(CorruptIndexError, match=message):
            idx.sanity_check(full=True)
    idx.close()


def test_hostile_time_indexes(backend, tmp_path):
    path = tmp_path / "h.timeindex"
    for entries, message in (
        ([(10, 10), (9, 11), (12, 12)], "entry 1"),  # timestamp going back in the middle
        ([(10, 12), (11, 11), (12, 12)], "entry 1"),  # offset going back
        ([(10, 10), (20, 20), (0, 10)], "less than the first timestamp"),  # untrimmed-like
    ):
        path.write_bytes(time_bytes(entries, 10))
        idx = TimeIndex(path, 10, writable=False)
        with pytest.raises(CorruptIndexError, match=message):
            idx.sanity_check(full=True)
        idx.close()


# == concurrency: one writer, lock-free readers ============================================


def test_lookups_during_appends(backend, tmp_path):
    idx = OffsetIndex(tmp_path / "c.index", 0, 20000 * 8)
    stop = threading.Event()
    errors = []

    def reader():
        rng = random.Random(threading.get_ident())
        while not stop.is_set():
            target = rng.randrange(40000)
            offset, position = idx.lookup(target)
            # entries are (2i, 16i): any answer is an entry at or below the target
            if offset > target or position != offset * 8 or offset % 2:
                errors.append((target, offset, position))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(20000):
            idx.append(2 * i, 16 * i)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert idx.lookup(40000) == (39998, 16 * 19999)
    idx.close()


# == the reference vectors: index files made by Kafka's rules ==============================


def _segments():
    if VECTORS is None or not (VECTORS / "segments").is_dir():
        return []
    return sorted(p for p in (VECTORS / "segments").iterdir() if (p / "expected.json").is_file())


@pytest.mark.parametrize("segment", _segments() or [None], ids=lambda p: p.name if p else "none")
def test_vector_index_files(backend, segment, tmp_path):
    if segment is None:
        pytest.skip("reference vectors with segments are not available (see tests/_vectors.py)")
    expected = json.loads((segment / "expected.json").read_text())
    base = expected["baseOffset"]
    files = expected["files"]
    index_path = segment / files["index"]["name"]
    time_path = segment / files["timeindex"]["name"]
    for key, path in (("index", index_path), ("timeindex", time_path)):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == files[key]["sha256"]
    idx = OffsetIndex(index_path, base, writable=False)
    tidx = TimeIndex(time_path, base, writable=False)
    try:
        idx.sanity_check(full=True)
        tidx.sanity_check(full=True)
        assert [idx.entry(i) for i in range(idx.entries)] == [
            (e["offset"], e["position"]) for e in expected["offsetIndex"]]
        assert [tidx.entry(i) for i in range(tidx.entries)] == [
            (e["timestamp"], e["offset"]) for e in expected["timeIndexClosed"]]
        assert expected["offsetLookups"] and expected["timestampLookups"]
        for case in expected["offsetLookups"]:
            want = case["indexEntry"]
            assert idx.lookup(case["targetOffset"]) == (want["offset"], want["position"])
        for case in expected["timestampLookups"]:
            want = case["timeIndexEntry"]
            assert tidx.lookup(case["targetTimestamp"]) == (want["timestamp"], want["offset"])
    finally:
        idx.close()
        tidx.close()
    # appending the same entries writes the same bytes
    built = OffsetIndex(tmp_path / index_path.name, base)
    for e in expected["offsetIndex"]:
        built.append(e["offset"], e["position"])
    tbuilt = TimeIndex(tmp_path / time_path.name, base)
    for e in expected["timeIndexClosed"]:
        tbuilt.maybe_append(e["timestamp"], e["offset"])
    built.close()
    tbuilt.close()
    assert built.path.read_bytes() == index_path.read_bytes()
    assert tbuilt.path.read_bytes() == time_path.read_bytes()
