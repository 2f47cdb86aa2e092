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
import mmap
import os
import random

import numpy as np

#: The issue's index: segment.index.bytes = 10 MiB, i.e. 1,310,720 offset entries.
INDEX_BYTES = 10 * 1024 * 1024
ENTRY_SIZE = 8
N_ENTRIES = INDEX_BYTES // ENTRY_SIZE
#: Lookups per timed call.
N_TARGETS = 1000
#: Base offset of the segment; entries are (base + 3 i, 4096 i + jitter).
BASE_OFFSET = 1_000_000
INDEX_FILE = "00000000000001000000.index"
IMPLS = ("kafkastore", "numpy_view", "numpy_copy")
TARGETS = ("random", "tail")


def write_offset_index(path: str, n: int = N_ENTRIES, seed: int = 0) -> None:
    """Write a full offset index of ``n`` entries: relative offsets 3 i (every third
    offset indexed), positions about 4 KiB apart, as Kafka writes them (big-endian)."""
    rng = np.random.default_rng(seed)
    entries = np.empty((n, 2), dtype=">i4")
    entries[:, 0] = np.arange(n, dtype=np.int64) * 3
    positions = np.arange(n, dtype=np.int64) * 1024 + rng.integers(0, 1000, n)
    entries[:, 1] = positions
    with open(path, "wb") as f:
        f.write(entries.tobytes())


def make_targets(kind: str, n: int = N_TARGETS, entries: int = N_ENTRIES,
                 seed: int = 0) -> list[int]:
    """Absolute target offsets: uniform over the index, or inside its warm section."""
    rng = random.Random(seed)
    last = BASE_OFFSET + 3 * (entries - 1)
    if kind == "random":
        return [rng.randrange(BASE_OFFSET - 10, last + 10) for _ in range(n)]
    first_hot = BASE_OFFSET + 3 * max(0, entries - 1 - 8192 // ENTRY_SIZE)
    return [rng.randrange(first_hot, last + 10) for _ in range(n)]


class NumpyLookup:
    """A correct ``OffsetIndex.lookup`` built on ``numpy.searchsorted``.

    ``copy=False`` searches a view of the mapped file (the peer the issue names);
    ``copy=True`` searches a native copy of the keys made here, once.
    """

    def __init__(self, buffer, base_offset: int, copy: bool) -> None:
        pairs = np.frombuffer(buffer, dtype=">i4").reshape(-1, 2)
        self.base = base_offset
        self.keys = pairs[:, 0].astype(np.int64) if copy else pairs[:, 0]
        self.positions = pairs[:, 1]

    def lookup(self, target: int) -> tuple[int, int]:
        slot = int(self.keys.searchsorted(target - self.base, side="right")) - 1
        if slot < 0:
            return (self.base, 0)
        return (self.base + int(self.keys[slot]), int(self.positions[slot]))

    def release(self) -> None:
        del self.keys, self.positions  # drop the views so the map can close


def open_impl(impl: str, path: str):
    """``(lookup, close)`` for implementation ``impl`` over the index file at ``path``."""
    if impl == "kafkastore":
        from kafkastore.index import OffsetIndex

        index = OffsetIndex(path, BASE_OFFSET, writable=False)
        return index.lookup, index.close
    if impl not in ("numpy_view", "numpy_copy"):
        raise ValueError(f"unknown implementation {impl!r}")
    # the numpy peer gets its own read-only map of the same file
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    peer = NumpyLookup(mm, BASE_OFFSET, copy=impl == "numpy_copy")

    def close():
        peer.release()
        mm.close()

    return peer.lookup, close


def lookup_all(lookup, targets) -> None:
    for target in targets:
        lookup(target)


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
