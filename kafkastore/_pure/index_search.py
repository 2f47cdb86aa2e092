"""Binary search over Kafka's offset and time index files.

Pure-Python twin of ``kafkastore/_ext/index_search.pyx``: same names, same
signatures, same results and errors. It is the readable reference and the test
oracle for the compiled kernel.

Entry layouts (``AbstractIndex`` / ``OffsetIndex`` / ``TimeIndex`` in Kafka;
big-endian, entries back to back, no header, no checksum)::

    offset index (.index), 8 bytes          time index (.timeindex), 12 bytes
    +0  relativeOffset  int32   KEY         +0  timestamp       int64   KEY
    +4  position        int32   VALUE       +8  relativeOffset  int32   VALUE

``relativeOffset`` is the entry's offset minus the segment's base offset.
``position`` is the byte position in the ``.log`` of the batch whose last
offset is that offset. A time index entry says the largest timestamp in the
segment up to that offset. In a valid offset index both columns strictly
increase; in a valid time index both are non-decreasing, and the timestamps
strictly increase in files Kafka writes.

Every function takes the whole mapped file as ``buffer`` (any C-contiguous byte
buffer: an ``mmap``, ``bytes``, a ``memoryview``) and ``entries``, the number of
valid entries at its start, which must fit in the buffer: slots past
``entries`` (preallocated zeros in an active segment's index) are never read.
Targets and keys are compared as Python ints (``int64`` in the compiled
kernel), in whatever unit the searched column holds: a relative offset, a
position or a timestamp. Nothing is copied; each probe decodes one field.

The search (``AbstractIndex.indexSlotRangeFor``) looks at the *warm section*
first: the last ``WARM_SECTION_BYTES // entry_size`` entries (1024 for the
offset index, 682 for the time index) plus the one before them. Almost every
lookup in a live log is for the tail (tailing consumers, followers); keeping
those lookups inside the last 8 KiB keeps at most three pages of the mapping
hot, instead of a probe sequence that moves to cold pages each time the index
grows by a page (Kafka measured page faults of about a second from that).

One deliberate difference from Kafka: its binary search never probes the first
slot of its range, so when the target equals the first entry's key Kafka's
smallest-upper-bound returns slot 1 (or -1); here it returns slot 0, the true
smallest upper bound. Both are valid upper bounds for
``OffsetIndex.fetchUpperBoundOffset``, the only caller.
"""

from __future__ import annotations

import mmap
import struct

from kafkastore._pure.consts import (
    INDEX_WARM_SECTION_BYTES,
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
)
from kafkastore._pure.reader import INT32, INT64

__all__ = [
    "OFFSET_INDEX",
    "TIME_INDEX",
    "KEY",
    "VALUE",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY_SIZE",
    "WARM_SECTION_BYTES",
    "entry_size",
    "largest_lower_bound_slot",
    "smallest_upper_bound_slot",
    "largest_lower_bound_entry",
    "lower_entry_and_next",
    "read_entry",
    "first_out_of_order",
    "REBUILD_STATE_SLOTS",
    "rebuild_entries",
]

#: Index kinds.
OFFSET_INDEX = 0
TIME_INDEX = 1
#: Which column a search compares (Kafka's ``IndexSearchType``).
KEY = 0
VALUE = 1

OFFSET_ENTRY_SIZE = OFFSET_INDEX_ENTRY_SIZE  # relativeOffset int32 + position int32
TIME_ENTRY_SIZE = TIME_INDEX_ENTRY_SIZE  # timestamp int64 + relativeOffset int32
WARM_SECTION_BYTES = INDEX_WARM_SECTION_BYTES  # at most 3 pages of 4 KiB, whatever the alignment

_I32 = INT32.unpack_from
_I64 = INT64.unpack_from
_ENTRY = {
    OFFSET_INDEX: struct.Struct(">ii").unpack_from,
    TIME_INDEX: struct.Struct(">qi").unpack_from,
}
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_ENTRY_SIZE = {OFFSET_INDEX: OFFSET_ENTRY_SIZE, TIME_INDEX: TIME_ENTRY_SIZE}
# (kind, search) -> (field offset in the entry, decoder of that field)
_FIELD = {
    (OFFSET_INDEX, KEY): (0, _I32),
    (OFFSET_INDEX, VALUE): (4, _I32),
    (TIME_INDEX, KEY): (0, _I64),
    (TIME_INDEX, VALUE): (8, _I32),
}


# -- argument checks (the compiled kernel makes the same ones, in the same order) ------------


def _nbytes(buffer) -> int:
    """Length in bytes of a C-contiguous buffer of single bytes; holds no view afterwards."""
    if isinstance(buffer, (bytes, bytearray, mmap.mmap)):
        return len(buffer)
    if type(buffer) is memoryview and buffer.itemsize == 1 and buffer.c_contiguous:
        return buffer.nbytes  # the index's own view: no new export
    with memoryview(buffer) as view:  # TypeError for a non-buffer, as the compiled kernel
        if view.ndim != 1 or view.itemsize != 1 or not view.c_contiguous:
            raise ValueError(
                "buffer must be a C-contiguous buffer of single bytes, not "
                f"format {view.format!r} with {view.ndim} dimension(s)"
            )
        return view.nbytes


def _check_int(value, what: str) -> None:
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")


def _check_kind(kind) -> int:
    _check_int(kind, "index kind")
    if kind != OFFSET_INDEX and kind != TIME_INDEX:
        raise ValueError(f"index kind must be OFFSET_INDEX (0) or TIME_INDEX (1), not {kind!r}")
    return _ENTRY_SIZE[kind]


def _check_search(search) -> None:
    _check_int(search, "search")
    if search != KEY and search != VALUE:
        raise ValueError(f"search must be KEY (0) or VALUE (1), not {search!r}")


def _check_entries(entries, nbytes: int, size: int) -> None:
    _check_int(entries, "entries")
    capacity = nbytes // size
    if entries < 0 or entries > capacity:
        raise ValueError(
            f"entries {entries} is outside [0, {capacity}]: a buffer of {nbytes} bytes holds "
            f"{capacity} whole {size}-byte entries"
        )


def entry_size(kind: int) -> int:
    """Bytes per entry of index ``kind``: 8 (``OFFSET_INDEX``) or 12 (``TIME_INDEX``)."""
    return _check_kind(kind)


# -- the search ------------------------------------------------------------------------------


def _slot_range(buffer, entries: int, kind: int, target, search: int) -> tuple[int, int]:
    """``(largest lower bound, smallest upper bound)`` slots of ``target``; -1 for none."""
    size = _ENTRY_SIZE[kind]
    field, read = _FIELD[kind, search]
    _check_int(target, "target")
    if entries == 0:
        return -1, -1
    # The warm section: the last WARM_SECTION_BYTES of entries (Kafka's warmEntries()).
    first_hot = max(0, entries - 1 - WARM_SECTION_BYTES // size)
    if read(buffer, first_hot * size + field)[0] < target:
        return _bsearch(buffer, size, field, read, target, first_hot, entries - 1, entries)
    first = read(buffer, field)[0]
    if first > target:
        return -1, 0
    lower, upper = _bsearch(buffer, size, field, read, target, 0, first_hot, entries)
    if first == target:
        # Kafka's loop never probes the first slot of its range, so it would answer 1
        # here (module docstring); slot 0 is the smallest entry >= target.
        upper = 0
    return lower, upper


def _bsearch(buffer, size, field, read, target, lo, hi, entries) -> tuple[int, int]:
    # Kafka's AbstractIndex.binarySearch: the upper median, so `lo = mid` always progresses.
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        key = read(buffer, mid * size + field)[0]
        if key > target:
            hi = mid - 1
        elif key < target:
            lo = mid
        else:
            return mid, mid
    return lo, (-1 if lo == entries - 1 else lo + 1)


def largest_lower_bound_slot(buffer, entries: int, kind: int, target: int,
                             search: int = KEY) -> int:
    """Slot of the largest entry whose ``search`` column is <= ``target``; -1 if none.

    Parameters
    ----------
    buffer
        The index file's bytes (usually its ``mmap``); only read.
    entries : int
        Valid entries at the start of ``buffer``; at most ``len(buffer) // entry_size``.
    kind : int
        ``OFFSET_INDEX`` or ``TIME_INDEX``.
    target : int
        Compared with the column's signed value: a relative offset, a position or a
        timestamp.
    search : int
        ``KEY`` (relative offset / timestamp) or ``VALUE`` (position / relative offset).

    Raises
    ------
    TypeError, ValueError
        For arguments of the wrong type or out of range (never for the bytes: any
        content gives a slot in ``[-1, entries)``).
    """
    nbytes = _nbytes(buffer)
    size = _check_kind(kind)
    _check_entries(entries, nbytes, size)
    _check_search(search)
    return _slot_range(buffer, entries, kind, target, search)[0]


def smallest_upper_bound_slot(buffer, entries: int, kind: int, target: int,
                              search: int = KEY) -> int:
    """Slot of the smallest entry whose ``search`` column is >= ``target``; -1 if none.

    Kafka's ``smallestUpperBoundSlotFor``, used by ``fetchUpperBoundOffset``. The
    arguments are those of :func:`largest_lower_bound_slot`.
    """
    nbytes = _nbytes(buffer)
    size = _check_kind(kind)
    _check_entries(entries, nbytes, size)
    _check_search(search)
    return _slot_range(buffer, entries, kind, target, search)[1]


def largest_lower_bound_entry(buffer, entries: int, kind: int, target: int,
                              search: int = KEY) -> tuple[int, int] | None:
    """The entry at :func:`largest_lower_bound_slot`, as :func:`read_entry` returns it,
    or None when no entry is <= ``target``. One call for the common lookup."""
    nbytes = _nbytes(buffer)
    size = _check_kind(kind)
    _check_entries(entries, nbytes, size)
    _check_search(search)
    slot = _slot_range(buffer, entries, kind, target, search)[0]
    if slot < 0:
        return None
    return _ENTRY[kind](buffer, slot * size)


def lower_entry_and_next(buffer, entries: int, kind: int, target: int,
                         search: int = KEY) -> tuple[int, int, int, int, int]:
    """``(slot, key, value, next_key, next_value)``: :func:`largest_lower_bound_slot` and
    the entries at it and after it, in one call (a read's bounds). The fields of a
    missing entry (``slot == -1``, or ``slot + 1 == entries``) are 0."""
    nbytes = _nbytes(buffer)
    size = _check_kind(kind)
    _check_entries(entries, nbytes, size)
    _check_search(search)
    slot = _slot_range(buffer, entries, kind, target, search)[0]
    here = _ENTRY[kind](buffer, slot * size) if slot >= 0 else (0, 0)
    after = _ENTRY[kind](buffer, (slot + 1) * size) if slot + 1 < entries else (0, 0)
    return (slot, here[0], here[1], after[0], after[1])


def read_entry(buffer, entries: int, kind: int, slot: int) -> tuple[int, int]:
    """Entry ``slot`` as stored: ``(relative_offset, position)`` for the offset index,
    ``(timestamp, relative_offset)`` for the time index.

    Raises :class:`IndexError` unless ``0 <= slot < entries``.
    """
    nbytes = _nbytes(buffer)
    size = _check_kind(kind)
    _check_entries(entries, nbytes, size)
    _check_int(slot, "slot")
    if slot < 0 or slot >= entries:
        raise IndexError(f"slot {slot} is outside the {entries} entries of the index")
    return _ENTRY[kind](buffer, slot * size)


def first_out_of_order(buffer, entries: int, kind: int) -> int:
    """The first slot that breaks the index's order, or -1 when all ``entries`` are valid.

    Offset index: relative offsets strictly increase and start at >= 0; positions are
    >= 0 and never decrease. Time index: timestamps never decrease; relative offsets
    start at >= 0 and never decrease. An untrimmed index (a crash left preallocated zero
    slots counted as entries) fails at its first zero slot.
    """
    nbytes = _nbytes(buffer)
    size = _check_kind(kind)
    _check_entries(entries, nbytes, size)
    if entries == 0:
        return -1
    unpack = _ENTRY[kind]
    if kind == OFFSET_INDEX:
        prev_rel, prev_pos = unpack(buffer, 0)
        if prev_rel < 0 or prev_pos < 0:
            return 0
        for slot in range(1, entries):
            rel, pos = unpack(buffer, slot * size)
            if rel <= prev_rel or pos < prev_pos:
                return slot
            prev_rel, prev_pos = rel, pos
    else:
        prev_ts, prev_rel = unpack(buffer, 0)
        if prev_rel < 0:
            return 0
        for slot in range(1, entries):
            ts, rel = unpack(buffer, slot * size)
            if ts < prev_ts or rel < prev_rel:
                return slot
            prev_ts, prev_rel = ts, rel
    return -1


# -- recovery: the index entries of a run of scanned batches, written in place ---------------

#: Length of the ``state`` array :func:`rebuild_entries` reads and updates; its slots:
#: 0 valid bytes (the position of the next batch), 1 valid bytes at the last index entry,
#: 2 the largest timestamp so far, 3 its offset, 4 offset index entries, 5 the offset
#: index's entry limit (``max_entries``), 6 its last offset, 7 time index entries, 8 the
#: time index's entry limit (``max_entries - 1``: the last slot is kept), 9 its last
#: timestamp, 10 its last offset.
REBUILD_STATE_SLOTS = 11
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1


def rebuild_entries(last_offset, size, max_timestamp, start: int, base_offset: int,
                    interval: int, state, offset_index, time_index) -> int:
    """Kafka's ``LogSegment.recover`` index rebuild over scanned batches ``start:``.

    ``last_offset``, ``size`` and ``max_timestamp`` are the int64 columns of a
    :class:`~kafkastore.records.BatchScan`; ``state`` the int64 array described at
    :data:`REBUILD_STATE_SLOTS`; ``offset_index`` and ``time_index`` the writable maps the
    entries are written into, after the counted ones. For each batch: the largest
    timestamp so far moves on; when more than ``interval`` bytes passed since the last
    entry, an offset entry ``(last offset, position)`` is written unless the offset index
    is at its limit, and a time entry ``(largest timestamp, its offset)`` unless the time
    index is at its limit or the timestamp is not above its last one.

    Returns the row it stopped at: ``len(last_offset)``, or the first batch the caller
    must handle one at a time with the indexes' own checks (an offset outside the
    segment's int32 range, an offset or timestamp that goes backwards, a position past
    int32, no room in a map); ``state`` then describes the rows before it.
    """
    n = len(last_offset)
    if len(size) < n or len(max_timestamp) < n or len(state) < REBUILD_STATE_SLOTS:
        raise ValueError("rebuild_entries: columns shorter than last_offset, or state "
                         f"shorter than {REBUILD_STATE_SLOTS}")
    if not 0 <= start <= n:
        raise ValueError(f"start {start} is outside [0, {n}]")
    (valid, last_entry, max_ts, max_off, o_entries, o_limit, o_last, t_entries, t_limit,
     t_last_ts, t_last_off) = (int(v) for v in state[:REBUILD_STATE_SLOTS])
    if o_entries < 0 or t_entries < 0 or not 0 <= last_entry <= valid:
        raise ValueError("rebuild_entries: negative entry count in state, or bytes at the "
                         "last entry outside [0, valid bytes]")
    o_room = _nbytes(offset_index) // OFFSET_ENTRY_SIZE
    t_room = _nbytes(time_index) // TIME_ENTRY_SIZE
    i = start
    while i < n:
        last = int(last_offset[i])
        if not 0 <= last - base_offset <= _INT32_MAX:
            break
        ts = int(max_timestamp[i])
        step = int(size[i])
        if step < 0 or valid > _INT64_MAX - step:
            break  # the compiled twin's int64 would overflow
        new_ts, new_off = (ts, last) if ts > max_ts else (max_ts, max_off)
        if valid - last_entry > interval:
            add_offset = o_entries < o_limit
            if add_offset and ((o_entries != 0 and last <= o_last) or valid > _INT32_MAX
                               or o_entries >= o_room):
                break
            add_time = False
            if t_entries < t_limit:
                if t_entries != 0 and (new_off < t_last_off or new_ts < t_last_ts):
                    break
                add_time = new_ts > t_last_ts
                if add_time and (not 0 <= new_off - base_offset <= _INT32_MAX
                                 or t_entries >= t_room):
                    break
            if add_offset:
                _OFFSET_ENTRY.pack_into(offset_index, o_entries * OFFSET_ENTRY_SIZE,
                                        last - base_offset, valid)
                o_entries += 1
                o_last = last
            if add_time:
                _TIME_ENTRY.pack_into(time_index, t_entries * TIME_ENTRY_SIZE,
                                      new_ts, new_off - base_offset)
                t_entries += 1
                t_last_ts, t_last_off = new_ts, new_off
            last_entry = valid
        max_ts, max_off = new_ts, new_off
        valid += step
        i += 1
    state[:REBUILD_STATE_SLOTS] = (valid, last_entry, max_ts, max_off, o_entries, o_limit,
                                   o_last, t_entries, t_limit, t_last_ts, t_last_off)
    return i
