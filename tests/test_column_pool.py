"""The column buffer pool behind decode_columns (compiled kernel; the pure twin has none).

What must hold: a live result never shares memory with a later one; a result built in
reused memory is byte-identical to one built in fresh memory; the bound is respected
and 0 disables the pool.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import kafkastore as ks
from kafkastore import records

COLUMNS = ("offset", "timestamp", "timestamp_type", "key_offsets", "key_data", "key_null",
           "value_offsets", "value_data", "value_null", "header_count")


@pytest.fixture(scope="module")
def blob() -> bytes:
    # large enough that every column is above the pool's 1 MiB threshold
    parts = []
    for base in range(0, 200_000, 1000):
        recs = [(b"key-%08d" % i, None if i % 97 == 0 else b"v" * (i % 150), 1000 + i)
                for i in range(base, base + 1000)]
        parts.append(records.encode_batch(recs, base_offset=base))
    return b"".join(parts)


@pytest.fixture
def pool_limit():
    old = records.set_column_pool_limit(256 * 1024 * 1024)
    yield
    records.set_column_pool_limit(old)


def _snapshot(cols) -> dict[str, np.ndarray]:
    return {name: getattr(cols, name).copy() for name in COLUMNS}


def _assert_equal(cols, expected) -> None:
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(cols, name), expected[name], err_msg=name)


def test_live_results_never_share_memory(blob, pool_limit):
    first = ks.decode_columns(blob)
    expected = _snapshot(first)
    second = ks.decode_columns(blob)
    for name in COLUMNS:
        assert not np.shares_memory(getattr(first, name), getattr(second, name)), name
    _assert_equal(first, expected)  # writing the second result left the first intact
    _assert_equal(second, expected)


def test_reused_memory_gives_identical_results(blob, pool_limit):
    expected = _snapshot(ks.decode_columns(blob))
    gc.collect()
    for _ in range(3):
        cols = ks.decode_columns(blob)
        _assert_equal(cols, expected)
        del cols
        gc.collect()
    # a different input into reused memory: nothing of the old content leaks through
    half = ks.decode_columns(blob, 0, len(blob) // 2)
    assert len(half) < len(expected["offset"])
    np.testing.assert_array_equal(half.offset, expected["offset"][:len(half)])
    assert half.value_offsets[-1] == half.value_data.size


def test_limit_zero_disables_and_bad_limits_are_rejected(blob, pool_limit):
    expected = _snapshot(ks.decode_columns(blob))
    assert records.set_column_pool_limit(0) == 256 * 1024 * 1024
    _assert_equal(ks.decode_columns(blob), expected)
    for bad in (-1, 1.5, "1"):
        with pytest.raises(ValueError):
            records.set_column_pool_limit(bad)


def test_pool_is_bounded(blob, pool_limit):
    from kafkastore import _kernels

    if _kernels.BACKEND != "cython":
        pytest.skip("only the compiled kernel pools memory")
    rb = _kernels.record_batch
    results = [ks.decode_columns(blob) for _ in range(3)]
    del results
    gc.collect()
    # the pool's own accounting, read through the module's test hook: freed
    # results were kept for reuse...
    assert rb._column_pool_retained() > 2 * 1024 * 1024
    # ...and lowering the bound releases the excess at once
    records.set_column_pool_limit(2 * 1024 * 1024)
    assert rb._column_pool_retained() <= 2 * 1024 * 1024
    results = [ks.decode_columns(blob) for _ in range(3)]
    del results
    gc.collect()
    assert rb._column_pool_retained() <= 2 * 1024 * 1024
