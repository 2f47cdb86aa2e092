"""Kafka's time index: the ``.timeindex`` file of a segment (Kafka's ``TimeIndex``).

A sparse, memory-mapped array of 12-byte big-endian entries, written exactly as Kafka
writes it (kafka-storage.md section 3; the file's sizing, life cycle and thread safety
are :class:`~kafkastore.abstract_index.AbstractIndex`'s)::

    time index (.timeindex), 12 bytes an entry
    +0  timestamp       int64    largest timestamp so far, in ms
    +8  relativeOffset  int32    offset - base_offset of the segment

An entry says: the largest timestamp in the segment up to and including the batch that
ends at ``offset`` is ``timestamp``. Timestamps strictly increase, offsets never
decrease. There is no header and no checksum.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkastore._kernels import index_search as _search
from kafkastore.abstract_index import (
    _INT32_MAX,
    _INT64_MAX,
    AbstractIndex,
    _check_int,
    _tuple_new,
    _valid,
)
from kafkastore.errors import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    InvalidTimestampError,
)

__all__ = ["TimeIndex", "TimestampOffset", "NO_TIMESTAMP"]

#: Kafka's ``RecordBatch.NO_TIMESTAMP``: what :meth:`TimeIndex.lookup` reports when no
#: entry is at or below the target.
NO_TIMESTAMP = -1

_TIME_INDEX = _search.TIME_INDEX
_KEY = _search.KEY
_lower_entry = _search.largest_lower_bound_entry
_read_entry = _search.read_entry

# One fragment per field, big-endian as Java's ByteBuffer writes them.
_TIME_ENTRY = struct.Struct(
    ">"
    "q"  # timestamp: largest timestamp so far, in ms
    "i"  # relativeOffset: offset - base_offset of the batch holding it
)


class TimestampOffset(NamedTuple):
    """A time index entry: ``timestamp`` is the largest timestamp up to ``offset``."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """A segment's ``.timeindex``: maps timestamps to offsets.

    Entries are ``(timestamp int64, relativeOffset int32)``, 12 bytes, big-endian. Entry
    ``(t, o)`` means: every record with a timestamp above ``t`` is at an offset above
    ``o``. An entry is appended only when the segment's largest timestamp so far grows, so
    timestamps strictly increase and offsets never decrease; a segment of magic 0 data
    (no timestamps) has an empty time index. One slot is always kept free (:meth:`is_full`
    is true at ``max_entries - 1``) for the final entry written, with
    ``skip_full_check=True``, when the segment is rolled or closed.

    See :class:`AbstractIndex` for the parameters, the file life cycle and thread safety.
    """

    ENTRY_SIZE = _search.TIME_ENTRY_SIZE
    _KIND = _TIME_INDEX
    _LABEL = "time index"

    _last_entry: TimestampOffset

    def _load_last_entry(self) -> None:
        view = self._view
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        if view is None or entries == 0:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self._base_offset)
        else:
            timestamp, relative = _read_entry(view, entries, _TIME_INDEX, entries - 1)
            self._last_entry = TimestampOffset(timestamp, self._base_offset + relative)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        return self._last_entry

    def is_full(self) -> bool:
        """True at ``max_entries - 1`` entries: the last slot is kept for the entry written
        on roll or close."""
        return self._entries >= self._max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``, or
        ``(NO_TIMESTAMP, base_offset)`` when there is none."""
        entries = self._entries   # before the view: see the note above _valid
        view = self._view
        if view is None:
            raise self._closed()
        if type(target_timestamp) is not int:
            target_timestamp = _check_int(target_timestamp, "target_timestamp")
        found = _lower_entry(view, entries, _TIME_INDEX, target_timestamp, _KEY)
        if found is None:
            return _tuple_new(TimestampOffset, (NO_TIMESTAMP, self._base_offset))
        return _tuple_new(TimestampOffset, (found[0], self._base_offset + found[1]))

    def entry(self, n: int) -> TimestampOffset:
        """Entry ``n`` (0-based). Raises :class:`IndexError` unless ``0 <= n < entries``."""
        timestamp, relative = self._raw_entry(n)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        A timestamp equal to the last one is ignored silently: that is the final entry
        being written again on roll or close. ``skip_full_check`` (roll, close, the end of
        recovery) lets the entry take the slot kept free.

        Raises
        ------
        IndexFullError
            :meth:`is_full` and not ``skip_full_check``; or no slot at all is left.
        InvalidOffsetError
            The index is not empty and ``offset`` is below the last entry's offset.
        InvalidTimestampError
            The index is not empty and ``timestamp`` is below the last entry's.
        IndexOffsetOverflowError
            ``offset - base_offset`` does not fit an int32.
        ValueError
            ``timestamp`` is outside the int64 range.
        io.UnsupportedOperation
            The index is read-only.
        """
        if type(timestamp) is not int:
            timestamp = _check_int(timestamp, "timestamp")
        if type(offset) is not int:
            offset = _check_int(offset, "offset")
        with self._lock:
            if self._view is None or not self._writable:
                self._check_writable()
            entries = self._entries
            if not skip_full_check and entries >= self._max_entries - 1:
                raise IndexFullError(
                    f"Attempt to append to a full time index (size = {entries}).",
                    offset=offset, path=str(self._path))
            last_timestamp, last_offset = self._last_entry
            # The same offset as the last entry is allowed: the final entry is re-appended
            # when the segment is closed or rolled.
            if entries != 0 and offset < last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {entries} no larger than "
                    f"the last offset appended ({last_offset}) to {self._path}",
                    offset=offset, path=str(self._path))
            if entries != 0 and timestamp < last_timestamp:
                raise InvalidTimestampError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {entries} no larger "
                    f"than the last timestamp appended ({last_timestamp}) to {self._path}",
                    timestamp=timestamp, offset=offset, path=str(self._path))
            # Only a larger timestamp makes an entry; with magic 0 data (timestamp -1)
            # the index stays empty.
            if timestamp > last_timestamp:
                if entries >= self._max_entries:
                    raise IndexFullError(
                        f"Attempt to append to a full time index (size = {entries}): no slot "
                        "left even for the final entry", offset=offset, path=str(self._path))
                relative = offset - self._base_offset   # (relative_offset, inline: every append)
                if not 0 <= relative <= _INT32_MAX:
                    relative = self.relative_offset(offset)   # raises
                if timestamp > _INT64_MAX:
                    raise ValueError(f"timestamp {timestamp} is outside the int64 range")
                _TIME_ENTRY.pack_into(self._view, entries * 12, timestamp, relative)
                self._dirty = True
                self._entries = entries + 1  # after the bytes: lookups read a count first
                self._last_entry = _tuple_new(TimestampOffset, (timestamp, offset))

    def commit_appended(self, entries: int, last_timestamp: int, last_offset: int) -> None:
        """Count the entries written through :meth:`append_view`: now ``entries``, the
        last one ``(last_timestamp, last_offset)``."""
        with self._lock:
            if self._commit(int(entries)):
                self._last_entry = _tuple_new(TimestampOffset,
                                              (int(last_timestamp), int(last_offset)))

    def sanity_check(self, full: bool = False) -> None:
        """Raise :class:`~kafkastore.errors.CorruptIndexError` if the file is corrupt.

        Kafka's checks: the last timestamp is not below the first, the last offset is not
        below the base offset, and the file length is a whole number of entries.
        ``full=True`` also checks every entry: timestamps and offsets non-decreasing,
        offsets >= the base offset (this catches zero padding left by a crash).
        """
        view = self._view
        if view is None:
            raise self._closed()
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        last_timestamp, last_offset = self._last_entry
        if entries != 0:
            first_timestamp = _read_entry(view, entries, _TIME_INDEX, 0)[0]
            if last_timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last timestamp is {last_timestamp} which is less than the "
                    f"first timestamp {first_timestamp}",
                    position=(entries - 1) * self.ENTRY_SIZE, offset=last_offset,
                    path=str(self._path))
            if last_offset < self._base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last offset is {last_offset} which is less than the first "
                    f"offset {self._base_offset}",
                    position=(entries - 1) * self.ENTRY_SIZE, offset=last_offset,
                    path=str(self._path))
        self._check_length("Time index")
        if full:
            self._check_order()
