"""Kafka's offset index: the ``.index`` file of a segment (Kafka's ``OffsetIndex``).

A sparse, memory-mapped array of 8-byte big-endian entries, written exactly as Kafka
writes it (kafka-storage.md section 3; the file's sizing, life cycle and thread safety
are :class:`~kafkastore.abstract_index.AbstractIndex`'s)::

    offset index (.index), 8 bytes an entry
    +0  relativeOffset  int32    offset - base_offset of the segment
    +4  position        int32    byte position of the batch in the .log

An entry says: the batch starting at byte ``position`` of the ``.log`` has last offset
``offset``. Both columns strictly increase. There is no header and no checksum.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkastore._kernels import index_search as _search
from kafkastore.abstract_index import (
    _INT32_MAX,
    AbstractIndex,
    _check_int,
    _tuple_new,
    _valid,
)
from kafkastore.errors import CorruptIndexError, IndexFullError, InvalidOffsetError

__all__ = ["OffsetIndex", "OffsetPosition"]

_OFFSET_INDEX = _search.OFFSET_INDEX
_KEY = _search.KEY
_VALUE = _search.VALUE
_lower_entry = _search.largest_lower_bound_entry
_upper_slot = _search.smallest_upper_bound_slot
_read_entry = _search.read_entry
_lower_and_next = _search.lower_entry_and_next

# One fragment per field, big-endian as Java's ByteBuffer writes them.
_OFFSET_ENTRY = struct.Struct(
    ">"
    "i"  # relativeOffset: offset - base_offset
    "i"  # position: byte position of the batch in the .log
)


class OffsetPosition(NamedTuple):
    """An offset index entry: the batch at byte ``position`` ends at ``offset``."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """A segment's ``.index``: maps offsets to byte positions in its ``.log``.

    Entries are ``(relativeOffset int32, position int32)``, 8 bytes, big-endian; both
    columns strictly increase. An entry is appended (by the segment) for a batch when more
    than ``index.interval.bytes`` (4096 by default) were written since the last entry; it
    records the batch's *last* offset and its *start* position, so :meth:`lookup` gives a
    position from which a scan of the log finds any offset at or above the entry's.

    See :class:`AbstractIndex` for the parameters, the file life cycle and thread safety.
    """

    ENTRY_SIZE = _search.OFFSET_ENTRY_SIZE
    _KIND = _OFFSET_INDEX
    _LABEL = "index"

    _last_offset: int

    def _load_last_entry(self) -> None:
        self._last_offset = self.last_entry.offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when the index is empty."""
        return self._last_offset

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when the index is empty."""
        view = self._view
        if view is None:
            raise self._closed()
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        if entries == 0:
            return OffsetPosition(self._base_offset, 0)
        relative, position = _read_entry(view, entries, _OFFSET_INDEX, entries - 1)
        return OffsetPosition(self._base_offset + relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``, or ``(base_offset, 0)``
        when there is none (empty index, or a target below the first entry)."""
        entries = self._entries   # before the view: see the note above _valid
        view = self._view
        if view is None:
            raise self._closed()
        if type(target_offset) is not int:
            target_offset = _check_int(target_offset, "target_offset")
        base = self._base_offset
        found = _lower_entry(view, entries, _OFFSET_INDEX, target_offset - base, _KEY)
        if found is None:
            return _tuple_new(OffsetPosition, (base, 0))
        return _tuple_new(OffsetPosition, (base + found[0], found[1]))

    def lookup_with_next(self, target_offset: int) -> tuple[int, int, int]:
        """:meth:`lookup` as ``(offset, position)`` plus the position of the entry after
        it (-1 when there is none): a read's search bounds in one call.

        The batch holding ``target_offset`` starts after ``position`` (at it when
        ``offset == target_offset``) and at or before the next entry's position.
        """
        entries = self._entries  # once, and before the view: see the note above _valid
        view = self._view
        if view is None:
            raise self._closed()
        if type(target_offset) is not int:
            target_offset = _check_int(target_offset, "target_offset")
        base = self._base_offset
        slot, relative, position, _, after = _lower_and_next(
            view, entries, _OFFSET_INDEX, target_offset - base, _KEY)
        if slot + 1 >= entries:
            after = -1
        return base + relative, position, after

    def entry(self, n: int) -> OffsetPosition:
        """Entry ``n`` (0-based). Raises :class:`IndexError` unless ``0 <= n < entries``."""
        relative, position = self._raw_entry(n)
        return OffsetPosition(self._base_offset + relative, position)

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition | int,
                                 fetch_size: int) -> OffsetPosition | None:
        """The first entry at or after byte ``fetch_offset.position + fetch_size``: an offset
        certainly past a fetch of ``fetch_size`` bytes from ``fetch_offset``, or None when
        no entry is that far (Kafka's ``fetchUpperBoundOffset``).

        ``fetch_offset`` is an :class:`OffsetPosition` (as in Kafka) or just its position.
        """
        view = self._view
        if view is None:
            raise self._closed()
        start = fetch_offset if isinstance(fetch_offset, int) else fetch_offset[1]
        target = _check_int(start, "fetch_offset") + _check_int(fetch_size, "fetch_size")
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        slot = _upper_slot(view, entries, _OFFSET_INDEX, target, _VALUE)
        if slot < 0:
            return None
        relative, position = _read_entry(view, entries, _OFFSET_INDEX, slot)
        return OffsetPosition(self._base_offset + relative, position)

    def append(self, offset: int, position: int) -> None:
        """Append the entry ``(offset, position)``.

        Raises
        ------
        IndexFullError
            ``entries >= max_entries``.
        InvalidOffsetError
            The index is not empty and ``offset`` is not larger than :attr:`last_offset`.
        IndexOffsetOverflowError
            ``offset - base_offset`` does not fit an int32.
        ValueError
            ``position`` is outside ``[0, 2**31 - 1]``.
        io.UnsupportedOperation
            The index is read-only.
        """
        if type(offset) is not int:
            offset = _check_int(offset, "offset")
        if type(position) is not int:
            position = _check_int(position, "position")
        with self._lock:
            if self._view is None or not self._writable:
                self._check_writable()
            entries = self._entries
            if entries >= self._max_entries:
                raise IndexFullError(f"Attempt to append to a full index (size = {entries}).",
                                     offset=offset, path=str(self._path))
            if entries != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset {offset} to position {entries} no larger "
                    f"than the last offset appended ({self._last_offset}) to {self._path}",
                    offset=offset, path=str(self._path))
            relative = offset - self._base_offset   # (relative_offset, inline: every append)
            if not 0 <= relative <= _INT32_MAX:
                relative = self.relative_offset(offset)   # raises
            if not 0 <= position <= _INT32_MAX:
                raise ValueError(f"position {position} is outside [0, {_INT32_MAX}]")
            _OFFSET_ENTRY.pack_into(self._view, entries * 8, relative, position)
            self._dirty = True
            self._entries = entries + 1  # after the bytes: lookups read a count, then entries
            self._last_offset = offset

    def commit_appended(self, entries: int, last_offset: int) -> None:
        """Count the entries written through :meth:`append_view`: now ``entries``, the
        last one holding ``last_offset``."""
        with self._lock:
            if self._commit(int(entries)):
                self._last_offset = int(last_offset)

    def sanity_check(self, full: bool = False) -> None:
        """Raise :class:`~kafkastore.errors.CorruptIndexError` if the file is corrupt.

        Kafka's checks: the last entry's offset is not below the base offset, and the file
        length is a whole number of entries. ``full=True`` also checks every entry: offsets
        strictly increasing from >= the base offset, positions >= 0 and non-decreasing
        (this catches zero padding left by a crash, which Kafka's checks do not).
        """
        if self._view is None:
            raise self._closed()
        last = self._last_offset
        if self._entries != 0 and last < self._base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._path}) has non-zero size but the "
                f"last offset is {last} which is less than the base offset "
                f"{self._base_offset}.",
                position=(self._entries - 1) * self.ENTRY_SIZE, offset=last,
                path=str(self._path))
        self._check_length("Index")
        if full:
            self._check_order()
