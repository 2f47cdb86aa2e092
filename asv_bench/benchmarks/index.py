"""Offset index lookups: kafkastore's warm-section search beside ``numpy.searchsorted``.

The index is the issue's: a full 10 MiB offset index (``segment.index.bytes`` default,
1,310,720 entries of 8 big-endian bytes), written once in ``setup_cache`` by
:func:`write_offset_index` and opened read-only (mmap) in ``setup``. Each timed call does
``N_TARGETS`` lookups; per-lookup cost is time / ``N_TARGETS``.

Implementations, the ``impl`` parameter:

``kafkastore``
    ``OffsetIndex.lookup`` with the live backend (``kafkastore._kernels.BACKEND``): the
    ``index_search`` kernel on a ``const uint8_t[::1]`` view of the map, plus building the
    ``OffsetPosition`` result.
``numpy_view``
    the issue's peer: ``numpy.frombuffer(map, dtype=">i4")`` viewed as ``(n, 2)``, then
    ``searchsorted`` on the keys column (a strided, big-endian view of the same map, no
    copy made up front), and the same fallback and result as ``lookup``. numpy has to
    convert that column to a contiguous native array inside every ``searchsorted``
    call, so each lookup costs a pass over the whole column.
``numpy_copy``
    numpy's best case, for reference: the keys column copied once (outside the timing)
    into a contiguous native ``int64`` array, then ``searchsorted`` on it. Not a view of
    the file: the copy is stale after the next append, and costs 10 MiB per index.

Targets, the ``targets`` parameter: ``random`` draws offsets uniformly over the whole
index (mostly the cold part); ``tail`` draws them from the last 8 KiB of entries, the warm
section that tailing consumers and followers hit.

``IndexSearchKernel`` times the kernel alone, compiled against its pure-Python twin.
"""

from __future__ import annotations

import importlib
import os

from kafkastore.bench.index import (
    BASE_OFFSET,
    ENTRY_SIZE,
    IMPLS,
    INDEX_BYTES,
    INDEX_FILE,
    N_ENTRIES,
    N_TARGETS,
    TARGETS,
    NumpyLookup,
    lookup_all,
    make_targets,
    open_impl,
    write_offset_index,
)

__all__ = [
    "BASE_OFFSET", "ENTRY_SIZE", "INDEX_BYTES", "INDEX_FILE", "IMPLS", "N_ENTRIES", "N_TARGETS",
    "TARGETS", "NumpyLookup", "lookup_all", "make_targets", "open_impl", "write_offset_index",
]


class OffsetIndexLookup:
    """``N_TARGETS`` lookups in a full 10 MiB offset index, opened read-only (mmap)."""

    params = [list(IMPLS), list(TARGETS)]
    param_names = ["impl", "targets"]
    # numpy_view converts the 1.3M-entry column on every call (about a millisecond):
    # a few large samples for it, asv's choice for the others.
    timeout = 300

    def setup_cache(self):
        path = os.path.abspath(INDEX_FILE)
        write_offset_index(path)
        return path

    def setup(self, path, impl, targets):
        self.lookup, self._close = open_impl(impl, path)
        self.targets = make_targets(targets)

    def teardown(self, path, impl, targets):
        self._close()

    def time_lookup(self, path, impl, targets):
        lookup_all(self.lookup, self.targets)


class IndexSearchKernel:
    """The ``largest_lower_bound_slot`` kernel alone, compiled vs pure twin, on the same
    full index (``compiled`` is skipped when the extensions are not built)."""

    params = [["compiled", "pure"], list(TARGETS)]
    param_names = ["impl", "targets"]
    _MODULES = {"compiled": "kafkastore._ext.index_search",
                "pure": "kafkastore._pure.index_search"}

    def setup_cache(self):
        path = os.path.abspath(INDEX_FILE)
        write_offset_index(path)
        return path

    def setup(self, path, impl, targets):
        try:
            self.kernel = importlib.import_module(self._MODULES[impl])
        except ImportError as exc:
            importlib.import_module("kafkastore")  # raises if kafkastore itself is missing
            raise NotImplementedError(f"{self._MODULES[impl]} is not built ({exc})") from exc
        with open(path, "rb") as f:
            self.data = f.read()
        self.relative = [t - BASE_OFFSET for t in make_targets(targets)]

    def time_largest_lower_bound_slot(self, path, impl, targets):
        search = self.kernel.largest_lower_bound_slot
        data = self.data
        for target in self.relative:
            search(data, N_ENTRIES, 0, target, 0)
