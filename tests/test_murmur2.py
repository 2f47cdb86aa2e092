"""The murmur2 kernel: Kafka's ``Utils.murmur2`` and its default partitioner for keys.

Every test that takes ``impl`` runs against both implementations (``impl.murmur2``);
tests that compare the two import both and skip in pure mode when the compiled kernel
is not built. References:

* Kafka's ``UtilsTest.testMurmur2`` vectors (as signed int32), and the partitions of
  ``"foobar"`` for 10 and 50 partitions, from /work/shared/reference/spark.md section 5.
* kafka-python's ``kafka.partitioner.default.murmur2`` (an independent pure-Python port
  of the Java code; it returns the unsigned hash), a test-only oracle: skipped when
  kafka-python is not installed (it is in the ``test`` extra).
"""

from __future__ import annotations

import array
import importlib
import random
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _helpers import compiled_kernel

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
# the impl and both fixtures only select modules: nothing to reset between examples
FIXTURE_OK = [HealthCheck.function_scoped_fixture]

# Kafka's UtilsTest.testMurmur2: key (UTF-8) -> Utils.murmur2 as a Java int.
KAFKA_VECTORS = [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
    ("", 275646681),
]
PARTITION_COUNTS = [1, 2, 3, 7, 10, 12, 50, 64, 100, 1000, INT32_MAX]

keys_st = st.binary(min_size=0, max_size=64)
counts_st = st.integers(1, INT32_MAX) | st.sampled_from(PARTITION_COUNTS)


def _seeded_keys(count: int, size: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(count)]


@pytest.fixture(scope="module")
def kafka_python_murmur2():
    """kafka-python's murmur2 (unsigned); importing ``kafka`` warns about deprecated APIs
    of its own, which are not this suite's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = pytest.importorskip(
            "kafka.partitioner.default",
            reason="kafka-python (the test extra) is the murmur2 oracle: pip install kafka-python",
        )
    return module.murmur2


@pytest.fixture
def both():
    """``(pure, compiled)`` murmur2 modules; skipped in pure mode if not built."""
    return importlib.import_module("kafkastore._pure.murmur2"), compiled_kernel("murmur2")


def _outcome(fn):
    """``("ok", result)`` or ``(exception type, message)``: both backends must agree."""
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - the error is part of the outcome
        return type(exc), str(exc)
    if isinstance(result, np.ndarray):
        return "ok", result.dtype.str, result.tolist()
    return "ok", result


# -- golden vectors ---------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_kafka_utils_test_vectors(impl, key, expected):
    data = key.encode()
    got = impl.murmur2.murmur2(data)
    assert type(got) is int
    assert got == expected
    for form in (bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        assert impl.murmur2.murmur2(form) == expected


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
@pytest.mark.parametrize("num_partitions", PARTITION_COUNTS)
def test_partition_of_vectors(impl, key, expected, num_partitions):
    got = impl.murmur2.partition(key.encode(), num_partitions)
    assert type(got) is int
    assert got == (expected & 0x7FFFFFFF) % num_partitions
    assert 0 <= got < num_partitions


def test_partition_of_foobar(impl):
    assert impl.murmur2.partition(b"foobar", 10) == 6
    assert impl.murmur2.partition(b"foobar", 50) == 16
    assert impl.murmur2.partition(b"foobar", 1) == 0


@pytest.mark.parametrize(("h", "expected"), [
    (0, 0), (1, 1), (INT32_MAX, INT32_MAX), (-1, INT32_MAX), (INT32_MIN, 0),
    (INT32_MIN + 1, 1), (-973932308, -973932308 & 0x7FFFFFFF), (0xFFFFFFFF, INT32_MAX),
])
def test_to_positive(impl, h, expected):
    assert impl.murmur2.to_positive(h) == expected


def test_to_positive_of_vectors(impl):
    for key, expected in KAFKA_VECTORS:
        positive = impl.murmur2.to_positive(impl.murmur2.murmur2(key.encode()))
        assert positive == expected & 0x7FFFFFFF
        assert impl.murmur2.partition(key.encode(), INT32_MAX) == positive % INT32_MAX


# -- oracle: kafka-python ---------------------------------------------------------------


@pytest.mark.parametrize("length", range(65))
def test_every_length_matches_kafka_python(impl, kafka_python_murmur2, length):
    # every tail length (0..3) with every word count up to 16, a few keys each
    for key in _seeded_keys(8, length, seed=length):
        expected = kafka_python_murmur2(key)
        assert impl.murmur2.murmur2(key) & 0xFFFFFFFF == expected
        assert impl.murmur2.partition(key, 37) == (expected & 0x7FFFFFFF) % 37


@settings(suppress_health_check=FIXTURE_OK)
@given(key=keys_st, num_partitions=counts_st)
@example(key=b"", num_partitions=1)
@example(key=b"\xff" * 64, num_partitions=INT32_MAX)
@example(key=b"\x80\x00\x00", num_partitions=3)
def test_matches_kafka_python(impl, kafka_python_murmur2, key, num_partitions):
    expected = kafka_python_murmur2(key)
    got = impl.murmur2.murmur2(key)
    assert INT32_MIN <= got <= INT32_MAX
    assert got & 0xFFFFFFFF == expected
    assert impl.murmur2.partition(key, num_partitions) == (expected & 0x7FFFFFFF) % num_partitions


def test_kafka_python_agrees_on_the_vectors(kafka_python_murmur2):
    # the oracle itself against Kafka's table, so a disagreement above points at us
    for key, expected in KAFKA_VECTORS:
        assert kafka_python_murmur2(key.encode()) == expected & 0xFFFFFFFF


# -- compiled vs pure -------------------------------------------------------------------


@settings(suppress_health_check=FIXTURE_OK)
@given(key=st.binary(max_size=300), num_partitions=counts_st)
def test_compiled_matches_pure(both, key, num_partitions):
    pure, ext = both
    assert ext.murmur2(key) == pure.murmur2(key)
    assert ext.partition(key, num_partitions) == pure.partition(key, num_partitions)


def test_compiled_matches_pure_on_long_keys(both):
    pure, ext = both
    for size in (1000, 4097, 65539):
        for key in _seeded_keys(3, size, seed=size):
            assert ext.murmur2(key) == pure.murmur2(key)


BAD_CALLS = [
    ("murmur2", (None,)),
    ("murmur2", ("text",)),
    ("murmur2", (123,)),
    ("murmur2", (memoryview(b"abcdef")[::2],)),
    ("partition", (None, 10)),
    ("partition", (b"k", 0)),
    ("partition", (b"k", -5)),
    ("partition", (b"k", 1 << 31)),
    ("partition", (b"k", 2.0)),
    ("partition", (b"k", "3")),
    ("partition", (None, 0)),
    ("partition", ("k", 4)),
    ("partitions", ([b"a", b"b", None], 4)),
    ("partitions", ([b"a", "b"], 4)),
    ("partitions", ([b"a"], 0)),
    ("partitions", (5, 4)),
    ("partitions", (None, 4)),
    ("partitions", ([memoryview(b"abcdef")[::2]], 4)),
    ("partitions", ((np.array([], dtype=np.int64), b""), 4)),
    ("partitions", ((np.array([-1, 2], dtype=np.int64), b"abc"), 4)),
    ("partitions", ((np.array([4, 4], dtype=np.int64), b"abc"), 4)),
    ("partitions", ((np.array([0, 2, 1, 3], dtype=np.int64), b"abc"), 4)),
    ("partitions", ((np.array([0, 2, 4, 1], dtype=np.int64), b"abc"), 4)),
    ("partitions", ((np.array([0, 2, 9], dtype=np.int32), b"abc"), 4)),
    ("partitions", ((np.array([0, 1], dtype=np.int64), None), 4)),
    ("partitions", ((np.array([0, 1], dtype=np.int64), "abc"), 4)),
]


def _call_id(v) -> str:
    # no addresses in an id (a memoryview's repr has one): ids must be the same in every
    # process, or pytest-xdist's workers disagree on what they collected
    return re.sub(r" at 0x[0-9a-f]+", "", repr(v))[:40]


@pytest.mark.parametrize(("name", "args"), BAD_CALLS, ids=_call_id)
def test_compiled_and_pure_raise_alike(both, name, args):
    pure, ext = both
    expected = _outcome(lambda: getattr(pure, name)(*args))
    assert expected[0] != "ok"
    assert _outcome(lambda: getattr(ext, name)(*args)) == expected


# -- bytes-like keys --------------------------------------------------------------------


def test_any_contiguous_buffer_hashes_its_bytes(impl):
    mod = impl.murmur2
    raw = bytes(range(1, 24))
    expected = mod.murmur2(raw)
    forms = [
        bytearray(raw),
        memoryview(raw),
        memoryview(b"xx" + raw + b"yy")[2:-2],          # a contiguous slice, not at 0
        np.frombuffer(raw, dtype=np.uint8),
        np.frombuffer(raw, dtype=np.int8),
        memoryview(raw).cast("c"),
    ]
    for form in forms:
        assert mod.murmur2(form) == expected, type(form)
        assert mod.partition(form, 7) == mod.partition(raw, 7)
    words = array.array("i", [1, -2, 3])                  # its raw bytes are the key
    assert mod.murmur2(words) == mod.murmur2(words.tobytes())
    grid = np.arange(12, dtype=np.uint8).reshape(3, 4)    # C-contiguous 2-D
    assert mod.murmur2(grid) == mod.murmur2(grid.tobytes())


def test_non_contiguous_buffer_is_refused(impl):
    with pytest.raises(BufferError, match="C-contiguous"):
        impl.murmur2.murmur2(memoryview(b"abcdef")[::2])
    with pytest.raises(BufferError, match="C-contiguous"):
        impl.murmur2.murmur2(np.arange(10, dtype=np.uint8)[::2])
    with pytest.raises(BufferError, match="key 1 must be a C-contiguous"):
        impl.murmur2.partitions([b"a", np.arange(10, dtype=np.uint8)[::3]], 3)


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("num_partitions", [0, -1, INT32_MIN, 1 << 31, 1 << 80])
def test_num_partitions_out_of_range(impl, num_partitions):
    with pytest.raises(ValueError, match="num_partitions must be between 1 and"):
        impl.murmur2.partition(b"key", num_partitions)
    with pytest.raises(ValueError, match="num_partitions must be between 1 and"):
        impl.murmur2.partitions([b"key"], num_partitions)


def test_num_partitions_takes_any_integer(impl):
    assert impl.murmur2.partition(b"foobar", np.int64(10)) == 6
    assert impl.murmur2.partitions([b"foobar"], np.int32(50)).tolist() == [16]
    for bad in (10.0, "10", None):
        with pytest.raises(TypeError):
            impl.murmur2.partition(b"foobar", bad)


def test_null_key_has_no_placement(impl):
    with pytest.raises(TypeError, match="null key has no murmur2 placement"):
        impl.murmur2.murmur2(None)
    with pytest.raises(TypeError, match="^key is None: a null key"):
        impl.murmur2.partition(None, 3)
    with pytest.raises(TypeError, match="^key 2 is None: a null key"):
        impl.murmur2.partitions([b"a", b"b", None, b"d"], 3)


def test_num_partitions_is_checked_before_the_key(impl):
    with pytest.raises(ValueError):
        impl.murmur2.partition(None, 0)


@pytest.mark.parametrize("key", ["foobar", 7, 1.5, object()])
def test_non_bytes_keys_are_type_errors(impl, key):
    with pytest.raises(TypeError, match="must be a bytes-like object"):
        impl.murmur2.murmur2(key)
    with pytest.raises(TypeError, match="must be a bytes-like object"):
        impl.murmur2.partition(key, 5)
    with pytest.raises(TypeError, match="^key 1 must be a bytes-like object"):
        impl.murmur2.partitions([b"ok", key], 5)


def test_partitions_needs_an_iterable(impl):
    with pytest.raises(TypeError, match="keys must be an iterable"):
        impl.murmur2.partitions(42, 5)


@pytest.mark.parametrize(("offsets", "data", "message"), [
    ([], b"", "offsets must hold n \\+ 1 entries for n keys, not 0"),
    ([-1, 2], b"abc", "offsets\\[0\\] = -1 is outside data of 3 bytes"),
    ([4, 4], b"abc", "offsets\\[0\\] = 4 is outside data of 3 bytes"),
    ([0, 2, 1, 3], b"abc", "offsets\\[2\\] = 1 is less than offsets\\[1\\] = 2"),
    ([0, 2, 4, 1], b"abc", "offsets\\[2\\] = 4 is past the end of data \\(3 bytes\\)"),
    ([0, 1, 2, 3, 4], b"abc", "offsets\\[4\\] = 4 is past the end of data \\(3 bytes\\)"),
    ([0, 1 << 40], b"abc", "offsets\\[1\\] = 1099511627776 is past the end"),
])
def test_bad_offsets(impl, offsets, data, message):
    for dtype in (np.int64, np.int32):
        if any(not INT32_MIN <= o <= INT32_MAX for o in offsets) and dtype is np.int32:
            continue
        with pytest.raises(ValueError, match=message):
            impl.murmur2.partitions((np.array(offsets, dtype=dtype), data), 4)


def test_bad_data_buffer(impl):
    offsets = np.array([0, 1], dtype=np.int64)
    with pytest.raises(TypeError, match="^data must be a bytes-like object, not 'NoneType'"):
        impl.murmur2.partitions((offsets, None), 4)
    with pytest.raises(TypeError, match="^data must be a bytes-like object, not 'str'"):
        impl.murmur2.partitions((offsets, "abc"), 4)
    with pytest.raises(BufferError, match="^data must be a C-contiguous buffer"):
        impl.murmur2.partitions((offsets, memoryview(b"abcdef")[::2]), 4)


# -- partitions: the bulk forms ---------------------------------------------------------


def _arrow_pair(keys, dtype=np.int64, pad=b""):
    """``(offsets, data)`` as an Arrow binary column lays them out (``pad`` before the
    first key, as a sliced Arrow array whose offsets do not start at 0)."""
    offsets = np.zeros(len(keys) + 1, dtype=dtype)
    offsets[0] = len(pad)
    offsets[1:] = len(pad) + np.cumsum([len(k) for k in keys], dtype=np.int64)
    return offsets, pad + b"".join(keys)


@settings(suppress_health_check=FIXTURE_OK)
@given(keys=st.lists(keys_st, max_size=40), num_partitions=counts_st,
       pad=st.binary(max_size=5))
@example(keys=[], num_partitions=1, pad=b"")
@example(keys=[b""] * 3, num_partitions=2, pad=b"")
def test_bulk_forms_equal_per_key_results(impl, keys, num_partitions, pad):
    mod = impl.murmur2
    expected = [mod.partition(k, num_partitions) for k in keys]
    forms = {
        "list": keys,
        "tuple": tuple(keys),
        "generator": (k for k in keys),
        "bytearrays": [bytearray(k) for k in keys],
        "arrow int64": _arrow_pair(keys, np.int64, pad),
        "arrow int32": _arrow_pair(keys, np.int32, pad),
        "arrow numpy data": (_arrow_pair(keys, np.int64, pad)[0],
                             np.frombuffer(pad + b"".join(keys), dtype=np.uint8)),
        "arrow bytearray data": (_arrow_pair(keys, np.int64, pad)[0],
                                 bytearray(pad + b"".join(keys))),
    }
    for name, form in forms.items():
        out = mod.partitions(form, num_partitions)
        assert isinstance(out, np.ndarray), name
        assert out.dtype == np.int32 and out.shape == (len(keys),), name
        assert out.tolist() == expected, name


def test_offsets_may_be_a_slice_or_another_byte_order(impl):
    keys = [b"foobar", b"", b"21", b"abc"]
    offsets, data = _arrow_pair(keys)
    expected = [impl.murmur2.partition(k, 10) for k in keys]
    assert impl.murmur2.partitions((offsets[1:], data), 10).tolist() == expected[1:]
    wide = np.repeat(offsets, 2)[::2]                                # not contiguous
    assert impl.murmur2.partitions((wide, data), 10).tolist() == expected
    swapped = offsets.astype(offsets.dtype.newbyteorder())          # big-endian int64
    assert impl.murmur2.partitions((swapped, data), 10).tolist() == expected
    assert impl.murmur2.partitions((offsets[:1], data), 10).tolist() == []


def test_a_tuple_is_a_pair_only_with_integer_offsets(impl):
    mod = impl.murmur2
    ab = [b"\x00" * 8, b"ab"]
    # two keys in a tuple: neither a numpy int32/int64 array first
    assert mod.partitions(tuple(ab), 9).tolist() == [mod.partition(k, 9) for k in ab]
    small = np.array([0, 1], dtype=np.uint8)                        # a uint8 array is a key
    assert mod.partitions((small, b"xy"), 9).tolist() == [
        mod.partition(small, 9), mod.partition(b"xy", 9)]
    # a list is always keys, even when it looks like a pair
    offsets = np.array([0, 1], dtype=np.int64)
    assert mod.partitions([offsets, b"xy"], 9).tolist() == [
        mod.partition(offsets, 9), mod.partition(b"xy", 9)]
    assert mod.partitions((offsets, b"xy"), 9).tolist() == [mod.partition(b"x", 9)]


def test_bulk_result_is_a_fresh_writable_array(impl):
    first = impl.murmur2.partitions([b"a", b"b"], 5)
    second = impl.murmur2.partitions([b"a", b"b"], 5)
    assert first is not second
    assert first.flags.c_contiguous and first.flags.writeable and first.flags.owndata


def test_bulk_many_keys_against_kafka_python(impl, kafka_python_murmur2):
    keys = _seeded_keys(2000, 16, seed=16) + _seeded_keys(500, 7, seed=7)
    for n in (3, 12, 1000):
        expected = [(kafka_python_murmur2(k) & 0x7FFFFFFF) % n for k in keys]
        assert impl.murmur2.partitions(keys, n).tolist() == expected
        assert impl.murmur2.partitions(_arrow_pair(keys), n).tolist() == expected


def test_partitions_spread_keys_over_every_partition(impl):
    out = impl.murmur2.partitions(_seeded_keys(4000, 16, seed=1), 8)
    counts = np.bincount(out, minlength=8)
    assert counts.min() > 350 and counts.max() < 650      # ~500 each for a fair hash


def test_kernel_is_registered_in_the_switch():
    import kafkastore._kernels as K

    assert "murmur2" in K.__all__
    expected = "kafkastore._ext.murmur2" if K.BACKEND == "cython" else "kafkastore._pure.murmur2"
    assert K.murmur2.__name__ == expected
    assert K.murmur2.partition(b"foobar", 10) == 6
