"""Index search kernels (kafkastore._pure.index_search and kafkastore._ext.index_search).

Every test runs on both implementations through the ``impl`` fixture. Index bytes are
built here with ``struct`` from the layouts in kafka-storage.md §3.1, never by kafkastore.
Expected slots come from hand-worked tables, from a ``bisect`` model of "largest entry
<= target" / "smallest entry >= target", or (for hostile bytes, where no order holds) from
comparing the two implementations with each other.
"""

from __future__ import annotations

import bisect
import importlib
import mmap
import random
import struct

import pytest
from _helpers import compiled_kernel
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
OFFSET, TIME = 0, 1
KEY, VALUE = 0, 1
SIZE = {OFFSET: 8, TIME: 12}
# Kafka's warmEntries() = 8192 / entrySize; the warm section holds these plus one.
WARM = {OFFSET: 1024, TIME: 682}

# The impl fixture is function scoped but never mutated: reusing it across examples is safe.
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def examples(n: int) -> int:
    """``n`` under the default profile; more under the ci/expensive profiles."""
    return max(n, settings.default.max_examples)


def offset_index(entries) -> bytes:
    """``(relative_offset, position)`` pairs as Kafka's OffsetIndex writes them."""
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def time_index(entries) -> bytes:
    """``(timestamp, relative_offset)`` pairs as Kafka's TimeIndex writes them."""
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


def build(kind, entries) -> bytes:
    return offset_index(entries) if kind == OFFSET else time_index(entries)


def column(kind, entries, search):
    return [e[search] for e in entries]


def model_lower(keys, target) -> int:
    """Largest slot with key <= target (keys strictly increasing), else -1."""
    return bisect.bisect_right(keys, target) - 1


def model_upper(keys, target) -> int:
    """Smallest slot with key >= target, else -1."""
    i = bisect.bisect_left(keys, target)
    return i if i < len(keys) else -1


def both():
    """[(name, module)] for every implementation available (pure always)."""
    out = [("python", importlib.import_module("kafkastore._pure.index_search"))]
    try:
        out.append(("cython", compiled_kernel("index_search")))
    except pytest.skip.Exception:
        pass
    return out


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the error is part of the outcome
        return (type(exc).__name__, str(exc))


# -- constants and the module surface ------------------------------------------------------


def test_constants(impl):
    k = impl.index_search
    assert (k.OFFSET_INDEX, k.TIME_INDEX, k.KEY, k.VALUE) == (0, 1, 0, 1)
    assert (k.OFFSET_ENTRY_SIZE, k.TIME_ENTRY_SIZE, k.WARM_SECTION_BYTES) == (8, 12, 8192)
    assert k.entry_size(OFFSET) == 8 and k.entry_size(TIME) == 12


# -- golden tables -------------------------------------------------------------------------
# Offset index of kafka-storage.md §3.3's fetchUpperBoundOffset example, base b:
# (b,0),(b+1,10),(b+2,23),(b+3,37) -> relative entries (0,0),(1,10),(2,23),(3,37).
FETCH_EXAMPLE = [(0, 0), (1, 10), (2, 23), (3, 37)]

# (kind, entries, search, target, lower, upper), worked by hand.
GOLDEN = [
    (OFFSET, [], KEY, 5, -1, -1),
    (OFFSET, [(3, 100)], KEY, 2, -1, 0),
    (OFFSET, [(3, 100)], KEY, 3, 0, 0),
    (OFFSET, [(3, 100)], KEY, 4, 0, -1),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, 0, 0, 0),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, 4, 0, 1),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, 5, 1, 1),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, 8, 1, 2),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, 9, 2, 2),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, 10, 2, -1),
    (OFFSET, [(0, 0), (5, 40), (9, 90)], KEY, -1, -1, 0),
    # the position column (Kafka's IndexSearchType.VALUE), spec §3.3's fetch table:
    # start position + fetch size -> the smallest entry at or after it
    (OFFSET, FETCH_EXAMPLE, VALUE, 0 + 5, 0, 1),
    (OFFSET, FETCH_EXAMPLE, VALUE, 0 + 10, 1, 1),
    (OFFSET, FETCH_EXAMPLE, VALUE, 0 + 22, 1, 2),
    (OFFSET, FETCH_EXAMPLE, VALUE, 0 + 23, 2, 2),
    (OFFSET, FETCH_EXAMPLE, VALUE, 10 + 24, 2, 3),
    (OFFSET, FETCH_EXAMPLE, VALUE, 37 + 1, 3, -1),
    (OFFSET, FETCH_EXAMPLE, VALUE, 37 + 200, 3, -1),
    # negative keys are signed int32 (a corrupt file); compared as such
    (OFFSET, [(-7, 0), (-2, 8)], KEY, -3, 0, 1),
    # time index: KEY = timestamp (int64), VALUE = relative offset
    (TIME, [], KEY, 0, -1, -1),
    (TIME, [(10, 10), (20, 20), (30, 30)], KEY, 9, -1, 0),
    (TIME, [(10, 10), (20, 20), (30, 30)], KEY, 25, 1, 2),
    (TIME, [(10, 10), (20, 20), (30, 30)], KEY, 30, 2, 2),
    (TIME, [(10, 10), (20, 20), (30, 30)], KEY, 31, 2, -1),
    (TIME, [(1 << 40, 0), (1 << 41, 5)], KEY, (1 << 40) + 1, 0, 1),
    (TIME, [(INT64_MIN, 0), (INT64_MAX, 1)], KEY, INT64_MAX, 1, 1),
    (TIME, [(INT64_MIN, 0), (INT64_MAX, 1)], KEY, INT64_MIN, 0, 0),
    (TIME, [(10, 10), (20, 20), (30, 30)], VALUE, 20, 1, 1),
    (TIME, [(10, 10), (20, 20), (30, 30)], VALUE, 21, 1, 2),
]


@pytest.mark.parametrize(("kind", "entries", "search", "target", "lower", "upper"), GOLDEN)
def test_golden_slots(impl, kind, entries, search, target, lower, upper):
    k = impl.index_search
    data = build(kind, entries)
    n = len(entries)
    assert k.largest_lower_bound_slot(data, n, kind, target, search) == lower
    assert k.smallest_upper_bound_slot(data, n, kind, target, search) == upper
    expected = None if lower < 0 else entries[lower]
    assert k.largest_lower_bound_entry(data, n, kind, target, search) == expected


def test_search_defaults_to_key(impl):
    k = impl.index_search
    data = offset_index([(1, 100), (2, 200)])
    assert k.largest_lower_bound_slot(data, 2, OFFSET, 150) == 1  # key, not position
    assert k.smallest_upper_bound_slot(data, 2, OFFSET, 2) == 1


def test_upper_bound_at_the_first_key_is_slot_zero(impl):
    """Kafka's binarySearch never probes the first slot of its range and answers 1 here;
    the kernels return the true smallest upper bound (documented difference)."""
    k = impl.index_search
    data = offset_index([(0, 0), (1, 10), (2, 23)])
    assert k.smallest_upper_bound_slot(data, 3, OFFSET, 0, VALUE) == 0
    big = [(i, 10 * i) for i in range(3000)]  # cold section: target below first_hot
    assert k.smallest_upper_bound_slot(offset_index(big), 3000, OFFSET, 0, KEY) == 0


def test_read_entry_golden(impl):
    k = impl.index_search
    data = offset_index([(0, 0), (INT32_MAX, INT32_MAX), (-1, INT32_MIN)])
    assert k.read_entry(data, 3, OFFSET, 0) == (0, 0)
    assert k.read_entry(data, 3, OFFSET, 1) == (INT32_MAX, INT32_MAX)
    assert k.read_entry(data, 3, OFFSET, 2) == (-1, INT32_MIN)
    tdata = time_index([(INT64_MAX, 7), (INT64_MIN, -1)])
    assert k.read_entry(tdata, 2, TIME, 0) == (INT64_MAX, 7)
    assert k.read_entry(tdata, 2, TIME, 1) == (INT64_MIN, -1)
    # big-endian on disk: 0x01020304 0x05060708
    raw = bytes(range(1, 13))
    assert k.read_entry(raw, 1, OFFSET, 0) == (0x01020304, 0x05060708)
    assert k.read_entry(raw, 1, TIME, 0) == (0x0102030405060708, 0x090A0B0C)


def test_entries_past_the_count_are_never_read(impl):
    """Only the first ``entries`` slots count: the preallocated rest (zeros, or anything)
    never changes an answer."""
    k = impl.index_search
    good = offset_index([(1, 10), (2, 20), (3, 30)])
    for tail in (bytes(800), b"\xff" * 800, b"\x7f" * 800):
        data = good + tail
        assert k.largest_lower_bound_slot(data, 3, OFFSET, 1000) == 2
        assert k.smallest_upper_bound_slot(data, 3, OFFSET, 4) == -1
        assert k.first_out_of_order(data, 3, OFFSET) == -1


# -- the warm section ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", [OFFSET, TIME])
def test_warm_lookups_read_only_the_warm_section(impl, kind):
    """A target at or above the first warm key is answered from the last 8 KiB alone:
    garbage in every cold slot does not change the result (Kafka's page-cache rule)."""
    k = impl.index_search
    n = 5000
    entries = [(3 * i, 10 * i) for i in range(n)]
    first_hot = n - 1 - WARM[kind]
    size = SIZE[kind]
    clean = build(kind, entries)
    # slots [0, first_hot) get bytes that would send any probe the wrong way
    garbage = bytearray(clean)
    garbage[: first_hot * size] = b"\x7f" * (first_hot * size)
    rng = random.Random(7)
    keys = column(kind, entries, KEY)
    for _ in range(300):
        target = rng.randrange(keys[first_hot] + 1, keys[-1] + 10)
        assert k.largest_lower_bound_slot(bytes(garbage), n, kind, target) == \
            model_lower(keys, target)
        assert k.smallest_upper_bound_slot(bytes(garbage), n, kind, target) == \
            model_upper(keys, target)
    # ...while a cold target does read the cold part, and gets it right on clean bytes
    for target in (0, 1, keys[first_hot // 2], keys[first_hot]):
        assert k.largest_lower_bound_slot(clean, n, kind, target) == model_lower(keys, target)


@pytest.mark.parametrize("kind", [OFFSET, TIME])
def test_warm_section_boundaries(impl, kind):
    """Entry counts around warmEntries + 1, targets on and around first_hot."""
    k = impl.index_search
    warm = WARM[kind]
    for n in (1, 2, warm, warm + 1, warm + 2, warm + 3, 2 * warm + 5):
        entries = [(2 * i + 1, 4 * i) for i in range(n)]
        data = build(kind, entries)
        keys = column(kind, entries, KEY)
        first_hot = max(0, n - 1 - warm)
        for slot in {0, first_hot - 1, first_hot, first_hot + 1, n - 1}:
            if not 0 <= slot < n:
                continue
            for target in (keys[slot] - 1, keys[slot], keys[slot] + 1):
                assert k.largest_lower_bound_slot(data, n, kind, target) == \
                    model_lower(keys, target), (n, slot, target)
                assert k.smallest_upper_bound_slot(data, n, kind, target) == \
                    model_upper(keys, target), (n, slot, target)


# -- the bisect model under hypothesis -----------------------------------------------------


@st.composite
def sorted_index(draw, kind):
    """(entries, targets): strictly increasing keys and values, sometimes long enough for
    a cold section (more than warmEntries + 1 entries), and targets on, between, below
    and above the keys, in the warm and the cold section."""
    n = draw(st.one_of(st.integers(0, 40), st.integers(WARM[kind] - 2, 3 * WARM[kind])))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    key_max = INT32_MAX if kind == OFFSET else INT64_MAX
    key_min = 0 if kind == OFFSET else draw(st.sampled_from([0, -(1 << 40), INT64_MIN + 1]))
    max_gap = draw(st.sampled_from([1, 2, 1000, 1 << 20]))
    keys, values = [], []
    key = key_min + rng.randrange(max_gap)
    value = rng.randrange(100)
    for _ in range(n):
        if key > key_max:
            break
        keys.append(key)
        values.append(value)
        key += 1 + rng.randrange(max_gap)
        value += 1 + rng.randrange(4096)
    values = [min(v, INT32_MAX) for v in values]
    entries = list(zip(keys, values, strict=True))
    targets = [rng.randrange(-5, 5) + (keys[rng.randrange(len(keys))] if keys else 0)
               for _ in range(30)]
    targets += draw(st.lists(st.integers(INT64_MIN, INT64_MAX), max_size=5))
    if keys:
        targets += [keys[0] - 1, keys[0], keys[-1], keys[-1] + 1]
    return entries, targets


@pytest.mark.parametrize("kind", [OFFSET, TIME])
@settings(max_examples=examples(60), deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data())
def test_searches_agree_with_bisect(impl, kind, data):
    k = impl.index_search
    entries, targets = data.draw(sorted_index(kind))
    raw = build(kind, entries)
    n = len(entries)
    padded = raw + bytes(data.draw(st.integers(0, 3)) * SIZE[kind])  # preallocated slots
    for search in (KEY, VALUE):
        keys = column(kind, entries, search)
        for target in targets:
            lower = model_lower(keys, target)
            assert k.largest_lower_bound_slot(padded, n, kind, target, search) == lower
            assert k.smallest_upper_bound_slot(padded, n, kind, target, search) == \
                model_upper(keys, target)
            assert k.largest_lower_bound_entry(padded, n, kind, target, search) == \
                (entries[lower] if lower >= 0 else None)
    for slot in range(0, n, max(1, n // 10)):
        assert k.read_entry(padded, n, kind, slot) == entries[slot]
    assert k.first_out_of_order(padded, n, kind) == -1


@given(st.integers(INT64_MIN - (1 << 70), INT64_MAX + (1 << 70)))
@settings(max_examples=examples(100))
def test_targets_beyond_int64(target):
    """Python ints of any size are ordered correctly against the int64 keys."""
    entries = [(INT64_MIN, 0), (-1, 1), (0, 2), (INT64_MAX, 3)]
    keys = column(TIME, entries, KEY)
    data = time_index(entries)
    for _name, k in both():
        assert k.largest_lower_bound_slot(data, 4, TIME, target) == model_lower(keys, target)
        assert k.smallest_upper_bound_slot(data, 4, TIME, target) == model_upper(keys, target)
        assert k.largest_lower_bound_slot(data, 0, TIME, target) == -1
        assert k.smallest_upper_bound_slot(data, 0, TIME, target) == -1


def test_huge_targets_on_both_sides(impl):
    k = impl.index_search
    data = offset_index([(1, 1), (2, 2)])
    for big in (INT64_MAX, INT64_MAX + 1, 1 << 200):
        assert k.largest_lower_bound_slot(data, 2, OFFSET, big) == 1
        assert k.smallest_upper_bound_slot(data, 2, OFFSET, big) == -1
    for small in (INT64_MIN, INT64_MIN - 1, -(1 << 200)):
        assert k.largest_lower_bound_slot(data, 2, OFFSET, small) == -1
        assert k.smallest_upper_bound_slot(data, 2, OFFSET, small) == 0
        assert k.largest_lower_bound_entry(data, 2, OFFSET, small) is None


# -- order check ---------------------------------------------------------------------------

ORDER_CASES = [
    (OFFSET, [], -1),
    (OFFSET, [(0, 0)], -1),
    (OFFSET, [(0, 0), (1, 0)], -1),  # equal positions are tolerated
    (OFFSET, [(0, 0), (1, 8), (2, 16)], -1),
    (OFFSET, [(-1, 0)], 0),  # a negative relative offset
    (OFFSET, [(0, -5)], 0),  # a negative position
    (OFFSET, [(0, 0), (0, 8)], 1),  # offsets must strictly increase
    (OFFSET, [(5, 0), (4, 8)], 1),
    (OFFSET, [(0, 0), (1, 8), (2, 4)], 2),  # positions must not decrease
    (OFFSET, [(1, 8), (2, 16), (0, 0), (0, 0)], 2),  # untrimmed: zero padding counted
    (TIME, [], -1),
    (TIME, [(5, 0), (5, 0)], -1),  # non-decreasing is enough
    (TIME, [(10, 0), (20, 3), (30, 3)], -1),
    (TIME, [(10, -1)], 0),
    (TIME, [(10, 0), (9, 1)], 1),
    (TIME, [(10, 5), (20, 4)], 1),
    (TIME, [(10, 5), (20, 6), (0, 0)], 2),  # untrimmed
]


@pytest.mark.parametrize(("kind", "entries", "expected"), ORDER_CASES)
def test_first_out_of_order(impl, kind, entries, expected):
    k = impl.index_search
    data = build(kind, entries) + bytes(SIZE[kind])
    assert k.first_out_of_order(data, len(entries), kind) == expected


# -- buffers: read-only maps, types, bounds ------------------------------------------------


def test_read_only_mmap_is_searched_in_place(impl, tmp_path):
    k = impl.index_search
    entries = [(i, 8 * i) for i in range(5000)]
    path = tmp_path / "x.index"
    path.write_bytes(offset_index(entries))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert k.largest_lower_bound_slot(mm, 5000, OFFSET, 4321) == 4321
        with memoryview(mm) as view:
            assert k.read_entry(view, 5000, OFFSET, 4999) == (4999, 8 * 4999)
            assert k.first_out_of_order(view, 5000, OFFSET) == -1
        # no buffer is left exported: the map can be closed right away
    assert mm.closed


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_buffer_types(impl, wrap):
    k = impl.index_search
    data = wrap(offset_index([(1, 10), (4, 40)]))
    assert k.largest_lower_bound_entry(data, 2, OFFSET, 3) == (1, 10)


ARG_ERRORS = [
    # (function, args, exception type, message fragment)
    ("largest_lower_bound_slot", (b"\0" * 16, 3, OFFSET, 0), ValueError,
     "entries 3 is outside [0, 2]"),
    ("largest_lower_bound_slot", (b"\0" * 16, -1, OFFSET, 0), ValueError, "entries -1"),
    ("largest_lower_bound_slot", (b"\0" * 16, 1 << 80, OFFSET, 0), ValueError, "is outside"),
    ("largest_lower_bound_slot", (b"\0" * 16, 1.0, OFFSET, 0), TypeError,
     "entries must be an int, not float"),
    ("largest_lower_bound_slot", (b"\0" * 23, 2, TIME, 0), ValueError,
     "entries 2 is outside [0, 1]"),
    ("largest_lower_bound_slot", (b"\0" * 16, 1, 2, 0), ValueError, "index kind must be"),
    ("largest_lower_bound_slot", (b"\0" * 16, 1, -1, 0), ValueError, "index kind must be"),
    ("largest_lower_bound_slot", (b"\0" * 16, 1, None, 0), TypeError, "index kind must be an int"),
    ("largest_lower_bound_slot", (b"\0" * 16, 1, OFFSET, 0, 2), ValueError,
     "search must be KEY (0) or VALUE (1)"),
    ("smallest_upper_bound_slot", (b"\0" * 16, 1, OFFSET, 0, "k"), TypeError,
     "search must be an int"),
    ("smallest_upper_bound_slot", (b"\0" * 16, 1, OFFSET, 1.5), TypeError,
     "target must be an int, not float"),
    ("largest_lower_bound_entry", (b"\0" * 16, 0, OFFSET, None), TypeError,
     "target must be an int, not NoneType"),
    ("read_entry", (b"\0" * 16, 2, OFFSET, 2), IndexError, "slot 2 is outside the 2 entries"),
    ("read_entry", (b"\0" * 16, 2, OFFSET, -1), IndexError, "slot -1 is outside"),
    ("read_entry", (b"\0" * 16, 0, OFFSET, 0), IndexError, "slot 0 is outside the 0 entries"),
    ("read_entry", (b"\0" * 16, 2, OFFSET, 1 << 70), IndexError, "is outside"),
    ("read_entry", (b"\0" * 16, 2, OFFSET, "0"), TypeError, "slot must be an int, not str"),
    ("first_out_of_order", (b"\0" * 7, 1, OFFSET), ValueError, "entries 1 is outside [0, 0]"),
    ("entry_size", (5,), ValueError, "index kind must be"),
]


@pytest.mark.parametrize(("fn", "args", "exc", "fragment"), ARG_ERRORS,
                         ids=[f"{a[0]}-{i}" for i, a in enumerate(ARG_ERRORS)])
def test_argument_errors(impl, fn, args, exc, fragment):
    with pytest.raises(exc) as info:
        getattr(impl.index_search, fn)(*args)
    assert fragment in str(info.value)


def test_argument_errors_are_identical_in_both_twins():
    impls = both()
    if len(impls) < 2:
        pytest.skip("compiled kernels not built")
    for fn, args, _, _ in ARG_ERRORS:
        got = {name: outcome(getattr(k, fn), *args) for name, k in impls}
        assert got["python"] == got["cython"], (fn, args)


def test_non_buffers_are_rejected(impl):
    k = impl.index_search
    for bad in (None, 12, "text"):
        with pytest.raises(TypeError):
            k.largest_lower_bound_slot(bad, 0, OFFSET, 0)


# -- hostile bytes: both twins agree and stay in bounds ------------------------------------


@settings(max_examples=examples(300), deadline=None, suppress_health_check=FIXTURE_OK)
@given(raw=st.binary(max_size=20 * 12),
       kind=st.sampled_from([OFFSET, TIME]),
       search=st.sampled_from([KEY, VALUE]),
       fill=st.floats(0, 1),
       targets=st.lists(st.integers(INT64_MIN - 5, INT64_MAX + 5), min_size=1, max_size=8))
def test_hostile_bytes_twins_agree(raw, kind, search, fill, targets):
    impls = both()
    n = int(len(raw) // SIZE[kind] * fill)
    for target in targets:
        results = {}
        for name, k in impls:
            lower = k.largest_lower_bound_slot(raw, n, kind, target, search)
            upper = k.smallest_upper_bound_slot(raw, n, kind, target, search)
            assert -1 <= lower < max(n, 0) or (n == 0 and lower == -1)
            assert -1 <= upper < max(n, 1)
            entry = k.largest_lower_bound_entry(raw, n, kind, target, search)
            results[name] = (lower, upper, entry)
        assert len(set(results.values())) == 1, results
    orders = {name: k.first_out_of_order(raw, n, kind) for name, k in impls}
    assert len(set(orders.values())) == 1, orders
    assert -1 <= orders["python"] < max(n, 1)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=st.integers(0, 4000), seed=st.integers(0, 2**32 - 1),
       kind=st.sampled_from([OFFSET, TIME]))
def test_long_hostile_indexes_twins_agree(n, seed, kind):
    """Random bytes long enough for a cold section: same slots from both twins."""
    impls = both()
    rng = random.Random(seed)
    raw = rng.randbytes(n * SIZE[kind])
    assume(n == 0 or raw)
    for _ in range(20):
        target = rng.randrange(INT64_MIN, INT64_MAX)
        search = rng.randrange(2)
        got = {name: (k.largest_lower_bound_slot(raw, n, kind, target, search),
                      k.smallest_upper_bound_slot(raw, n, kind, target, search))
               for name, k in impls}
        assert len(set(got.values())) == 1, got
