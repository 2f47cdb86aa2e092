"""Micro-benchmarks: offset index lookups beside ``numpy.searchsorted``, and the
index_search kernel compiled vs pure.

Deselected by default (tests/conftest.py marks everything here ``benchmark``); run with

    pytest tests/benchmarks/test_bench_index.py -m benchmark --benchmark-group-by=group

Groups: ``index-lookup-random`` and ``index-lookup-tail`` put ``OffsetIndex.lookup``
(``kafkastore``, live backend), numpy's ``searchsorted`` on a big-endian view of the
mapped file (``numpy_view``, the issue's peer; the bar is kafkastore >= 4x faster) and on
a native copy of the keys made once (``numpy_copy``, numpy's best case) side by side,
``N_TARGETS`` lookups per round in a full 10 MiB offset index. ``index-search-kernel``
compares ``kafkastore._ext.index_search`` with ``kafkastore._pure.index_search``
(conftest's ``impl`` fixture), and ``entry-walk-kernel`` the two ``entry_walk`` kernels
(the header walk of a read). There are no timing assertions; every implementation's
answers are checked against the others before it is timed.

The index, the targets and the numpy peer are ``asv_bench/benchmarks/index.py``'s, loaded
by file as in ``test_bench_records.py``, so asv and pytest-benchmark measure the same thing.
"""

from __future__ import annotations

import _asv
import pytest

from kafkastore._kernels import BACKEND

B = _asv.load("index")


@pytest.fixture(scope="module")
def index_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("index") / B.INDEX_FILE
    B.write_offset_index(str(path))
    return str(path)


@pytest.mark.parametrize("targets", B.TARGETS)
@pytest.mark.parametrize("lib", B.IMPLS)
def test_lookup(benchmark, index_file, lib, targets):
    benchmark.group = f"index-lookup-{targets}"
    benchmark.extra_info.update(lib=lib, lookups=B.N_TARGETS, entries=B.N_ENTRIES,
                                kafkastore_backend=BACKEND)
    wanted = B.make_targets(targets)
    reference, close_reference = B.open_impl("numpy_copy", index_file)
    lookup, close = B.open_impl(lib, index_file)
    try:
        for target in wanted[:100]:
            assert tuple(lookup(target)) == reference(target)
        if lib == "numpy_view":  # about a millisecond a lookup: a few rounds only
            benchmark.pedantic(B.lookup_all, (lookup, wanted), rounds=3, iterations=1)
        else:
            benchmark(B.lookup_all, lookup, wanted)
    finally:
        close()
        close_reference()


@pytest.mark.parametrize("targets", B.TARGETS)
def test_kernel(benchmark, impl, index_file, targets):
    benchmark.group = "index-search-kernel"
    benchmark.extra_info.update(impl=impl.name, targets=targets, lookups=B.N_TARGETS)
    with open(index_file, "rb") as f:
        data = f.read()
    search = impl.index_search.largest_lower_bound_slot
    relative = [t - B.BASE_OFFSET for t in B.make_targets(targets)]

    def run():
        for target in relative:
            search(data, B.N_ENTRIES, 0, target, 0)

    assert search(data, B.N_ENTRIES, 0, 3 * 1000 + 1, 0) == 1000
    benchmark(run)


def test_entry_walk_kernel(benchmark, impl, tmp_path):
    """``entry_walk.find_entry`` compiled vs pure: the header search of a read, walking
    100 small v2 batches of a window to the last one."""
    from kafkastore.records import encode_batch

    benchmark.group = "entry-walk-kernel"
    benchmark.extra_info.update(impl=impl.name, entries=100)
    data = b"".join(encode_batch([(None, b"v" * 50)] * 2, base_offset=2 * i)
                    for i in range(100))
    find = impl.entry_walk.find_entry
    assert find(data, 0, len(data), 199)[5] == 199
    benchmark(find, data, 0, len(data), 199)
