"""The offset-index lookup workload and its numpy peer.

The index is the issue's: a full 10 MiB offset index (``segment.index.bytes`` default,
1,310,720 entries of 8 big-endian bytes) written by :func:`write_offset_index`, opened
read-only (mmap). A timed call does ``N_TARGETS`` lookups (:func:`lookup_all`).
Implementations (:func:`open_impl`): ``kafkastore`` (``OffsetIndex.lookup``),
``numpy_view`` (``searchsorted`` on a big-endian view of the map, the issue's peer) and
``numpy_copy`` (``searchsorted`` on a native copy of the keys, numpy's best case). Targets
(:func:`make_targets`): ``random`` over the whole index, or ``tail``, the warm section.
``asv_bench/benchmarks/index.py`` explains each in full.
"""

from __future__ import annotations

import mmap
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
