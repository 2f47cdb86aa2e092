"""Read-only index views over bytes already in memory (no Kafka counterpart): a remote
``.index`` or ``.timeindex`` file fetched with one ranged read, or a copy.

:class:`OffsetIndexView` and :class:`TimeIndexView` are :class:`OffsetIndex` and
:class:`TimeIndex` whose lookups, entries and checks run over those bytes (the same
kernel searches over the same layouts, see :mod:`kafkastore.offset_index` and
:mod:`kafkastore.time_index`); nothing maps or writes a file. Immutable once built.
"""

from __future__ import annotations

import threading

from kafkastore._kernels import index_search as _search
from kafkastore.abstract_index import _EMPTY, _check_int
from kafkastore.offset_index import OffsetIndex
from kafkastore.time_index import TimeIndex

__all__ = ["OffsetIndexView", "TimeIndexView"]

_OFFSET_INDEX = _search.OFFSET_INDEX
_VALUE = _search.VALUE
_upper_slot = _search.smallest_upper_bound_slot
_read_entry = _search.read_entry


class _IndexView:
    """An index over bytes already in memory: a remote index file fetched with one
    ranged read, or a copy. The lookups, entries and checks are the index class's own
    (the same kernel searches over the same layout); nothing maps or writes a file.

    ``trusted=False`` (the default) treats the bytes as hints from a file another
    process may be writing or a crash may have left untrimmed: the view keeps the
    leading entries that are in order (:func:`first_out_of_order`'s rule), and, given
    ``segment_size``, whose positions lie inside the segment; the rest (a
    preallocated file's zero tail, damage) is ignored. ``trusted=True`` keeps every
    whole entry, as an index opened on a file does, for :meth:`sanity_check` to judge.

    Thread-safety: immutable once built; share freely.
    """

    def __init__(self, data, base_offset: int, path: str = "", *,
                 segment_size: int | None = None, trusted: bool = False) -> None:
        base_offset = _check_int(base_offset, "base_offset")
        view = memoryview(data).cast("B") if len(data) else _EMPTY
        size = self.ENTRY_SIZE
        self._path = str(path) or f"<{self._LABEL} of segment {base_offset}>"
        self._base_offset = base_offset
        self._max_index_size = len(view)
        self._writable = False
        self._lock = threading.RLock()
        self._mmap = None
        self._view = view
        self._length = len(view)
        self._max_entries = len(view) // size
        self._entries = self._max_entries
        self._dirty = False
        if not trusted:
            self._entries = self._valid_prefix(segment_size)
        self._load_last_entry()

    def _valid_prefix(self, segment_size: int | None) -> int:
        view, n, kind = self._view, self._entries, self._KIND
        bad = _search.first_out_of_order(view, n, kind)
        if bad >= 0:
            n = bad
        if kind == _OFFSET_INDEX:
            if segment_size is not None and n:
                # positions never decrease in the prefix: the first at or past the
                # segment's end, and everything after it, point nowhere
                past = _upper_slot(view, n, kind, max(segment_size, 1), _VALUE)
                if past >= 0:
                    n = past
        else:
            # an all-zero entry after the first is a preallocated file's tail (timestamps
            # do not decrease, so only leading entries can be zero)
            for slot in range(1, n):
                ts, rel = _read_entry(view, n, kind, slot)
                if ts > 0:
                    break
                if ts == 0 and rel == 0:
                    n = 0 if _read_entry(view, n, kind, 0) == (0, 0) else slot
                    break
        return n

    def __len__(self) -> int:
        return self._entries

    def close(self) -> None:
        """Drop the bytes (lookups then raise :class:`IndexClosedError`)."""
        self._view = None

    close_handler = close

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._path!r}, base_offset={self._base_offset}, "
                f"entries={self._entries})")


class OffsetIndexView(_IndexView, OffsetIndex):
    """A read-only :class:`OffsetIndex` over the bytes of a ``.index`` file (see
    :class:`_IndexView`): ``lookup``, ``lookup_with_next``, ``entry``,
    ``fetch_upper_bound_offset``, ``sanity_check`` as on the file."""

    def arrays(self):
        """The entries as numpy arrays: ``(offsets, positions)``, absolute offsets, int64."""
        import numpy as np

        n = self._entries
        raw = np.frombuffer(self._view, dtype=">i4", count=2 * n).reshape(n, 2)
        return raw[:, 0].astype(np.int64) + self._base_offset, raw[:, 1].astype(np.int64)


class TimeIndexView(_IndexView, TimeIndex):
    """A read-only :class:`TimeIndex` over the bytes of a ``.timeindex`` file (see
    :class:`_IndexView`): ``lookup``, ``entry``, ``last_entry``, ``sanity_check``."""
