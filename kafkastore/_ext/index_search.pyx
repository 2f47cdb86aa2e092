"""Binary search over Kafka's offset and time index files (compiled kernel).

Twin of ``kafkastore/_pure/index_search.py``, which is the oracle these functions
are tested against: same names, same results, same exceptions and messages.

Entry layouts (big-endian, entries back to back, no header, no checksum)::

    offset index (.index), 8 bytes          time index (.timeindex), 12 bytes
    +0  relativeOffset  int32   KEY         +0  timestamp       int64   KEY
    +4  position        int32   VALUE       +8  relativeOffset  int32   VALUE

The buffer is a ``const uint8_t[::1]`` view (so a read-only ``mmap`` works),
held only for the duration of a call; every field is decoded with
``be_i32`` / ``be_i64`` (``reader.pxd``, over ``csrc/ks_endian.h``), so nothing is
copied or byte-swapped in bulk. ``entries`` is checked against the buffer's
length before any read, and a search only ever reads slots in
``[0, entries)``, whatever the bytes hold: a hostile file gives a wrong slot,
never an out-of-bounds read.
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check
from libc.stdint cimport INT32_MAX, INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kafkastore._ext.consts cimport (INDEX_WARM_SECTION_BYTES, OFFSET_INDEX_ENTRY_SIZE,
                                     TIME_INDEX_ENTRY_SIZE)
from kafkastore._ext.debug cimport KS_DEBUG
from kafkastore._ext.endian cimport ks_store_be32, ks_store_be64
from kafkastore._ext.reader cimport be_i32, be_i64, view_ptr

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

OFFSET_INDEX = 0
TIME_INDEX = 1
KEY = 0
VALUE = 1
OFFSET_ENTRY_SIZE = OFFSET_INDEX_ENTRY_SIZE
TIME_ENTRY_SIZE = TIME_INDEX_ENTRY_SIZE
WARM_SECTION_BYTES = INDEX_WARM_SECTION_BYTES


# -- C cores (declared in index_search.pxd) --------------------------------------------------


cdef IdxColumn idx_column(int kind, int search) noexcept nogil:
    cdef IdxColumn col
    if kind == 0:
        col.entry_size = OFFSET_INDEX_ENTRY_SIZE
        col.field_offset = 0 if search == 0 else 4
        col.wide = False
    else:
        col.entry_size = TIME_INDEX_ENTRY_SIZE
        col.field_offset = 0 if search == 0 else 8
        col.wide = search == 0
    return col


cdef inline void _bsearch(const uint8_t* data, Py_ssize_t entries, IdxColumn col,
                          int64_t target, Py_ssize_t lo, Py_ssize_t hi,
                          Py_ssize_t* lower, Py_ssize_t* upper) noexcept nogil:
    # Kafka's AbstractIndex.binarySearch: the upper median, so `lo = mid` always progresses;
    # every probe is in [lo + 1, hi], inside [0, entries).
    cdef Py_ssize_t mid
    cdef int64_t key
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if KS_DEBUG:
            assert 0 <= mid < entries, (mid, entries)
        key = idx_key(data, mid, col)
        if key > target:
            hi = mid - 1
        elif key < target:
            lo = mid
        else:
            lower[0] = mid
            upper[0] = mid
            return
    lower[0] = lo
    upper[0] = -1 if lo == entries - 1 else lo + 1


cdef void idx_slot_range(const uint8_t* data, Py_ssize_t entries, IdxColumn col,
                         int64_t target, Py_ssize_t* lower, Py_ssize_t* upper) noexcept nogil:
    cdef Py_ssize_t first_hot
    cdef int64_t first
    if entries <= 0:
        lower[0] = -1
        upper[0] = -1
        return
    # warm entries = 8192 / entry size (1024 or 682); the warm section is those plus one
    first_hot = entries - 1 - INDEX_WARM_SECTION_BYTES // col.entry_size
    if first_hot < 0:
        first_hot = 0
    if idx_key(data, first_hot, col) < target:
        _bsearch(data, entries, col, target, first_hot, entries - 1, lower, upper)
        return
    first = idx_key(data, 0, col)
    if first > target:
        lower[0] = -1
        upper[0] = 0
        return
    _bsearch(data, entries, col, target, 0, first_hot, lower, upper)
    if first == target:
        # Kafka's loop never probes the first slot of its range, so it would answer 1
        # here (see the _pure twin's docstring); slot 0 is the smallest entry >= target.
        upper[0] = 0


cdef Py_ssize_t idx_first_out_of_order(const uint8_t* data, Py_ssize_t entries,
                                       int kind) noexcept nogil:
    cdef Py_ssize_t slot
    cdef const uint8_t* p
    cdef int32_t rel, prev_rel, pos, prev_pos
    cdef int64_t ts, prev_ts
    if entries <= 0:
        return -1
    if kind == 0:
        prev_rel = be_i32(data)
        prev_pos = be_i32(data + 4)
        if prev_rel < 0 or prev_pos < 0:
            return 0
        for slot in range(1, entries):
            p = data + slot * OFFSET_INDEX_ENTRY_SIZE
            rel = be_i32(p)
            pos = be_i32(p + 4)
            if rel <= prev_rel or pos < prev_pos:
                return slot
            prev_rel = rel
            prev_pos = pos
    else:
        prev_ts = be_i64(data)
        prev_rel = be_i32(data + 8)
        if prev_rel < 0:
            return 0
        for slot in range(1, entries):
            p = data + slot * TIME_INDEX_ENTRY_SIZE
            ts = be_i64(p)
            rel = be_i32(p + 8)
            if ts < prev_ts or rel < prev_rel:
                return slot
            prev_ts = ts
            prev_rel = rel
    return -1


# -- argument checks (the _pure twin makes the same ones, in the same order) ----------------


cdef int _check_kind(object kind) except -1:
    """The entry size of index ``kind``."""
    cdef int overflow = 0
    cdef long long v
    if not PyLong_Check(kind):
        raise TypeError(f"index kind must be an int, not {type(kind).__name__}")
    v = PyLong_AsLongLongAndOverflow(kind, &overflow)
    if overflow or (v != 0 and v != 1):
        raise ValueError(f"index kind must be OFFSET_INDEX (0) or TIME_INDEX (1), not {kind!r}")
    return OFFSET_INDEX_ENTRY_SIZE if v == 0 else TIME_INDEX_ENTRY_SIZE


cdef int _check_search(object search) except -1:
    cdef int overflow = 0
    cdef long long v
    if not PyLong_Check(search):
        raise TypeError(f"search must be an int, not {type(search).__name__}")
    v = PyLong_AsLongLongAndOverflow(search, &overflow)
    if overflow or (v != 0 and v != 1):
        raise ValueError(f"search must be KEY (0) or VALUE (1), not {search!r}")
    return <int>v


cdef Py_ssize_t _check_entries(object entries, Py_ssize_t nbytes, int size) except -1:
    cdef int overflow = 0
    cdef long long v
    cdef Py_ssize_t capacity = nbytes // size
    if not PyLong_Check(entries):
        raise TypeError(f"entries must be an int, not {type(entries).__name__}")
    v = PyLong_AsLongLongAndOverflow(entries, &overflow)
    if overflow or v < 0 or v > capacity:
        raise ValueError(
            f"entries {entries} is outside [0, {capacity}]: a buffer of {nbytes} bytes holds "
            f"{capacity} whole {size}-byte entries")
    return <Py_ssize_t>v


cdef int _check_target(object target, int64_t* out) except -2:
    """0 and the value in ``out`` for an int64 target; 1 above, -1 below the int64 range."""
    cdef int overflow = 0
    if not PyLong_Check(target):
        raise TypeError(f"target must be an int, not {type(target).__name__}")
    out[0] = PyLong_AsLongLongAndOverflow(target, &overflow)
    return overflow


cdef int _slot_range(const uint8_t* data, Py_ssize_t nbytes, object entries, object kind,
                     object target, object search, Py_ssize_t* lower,
                     Py_ssize_t* upper) except -1:
    cdef int size = _check_kind(kind)
    cdef Py_ssize_t n = _check_entries(entries, nbytes, size)
    cdef int column = _check_search(search)
    cdef int64_t value = 0
    cdef int outside = _check_target(target, &value)
    if n == 0:
        lower[0] = -1
        upper[0] = -1
    elif outside > 0:  # above every int64 key
        lower[0] = n - 1
        upper[0] = -1
    elif outside < 0:  # below every int64 key
        lower[0] = -1
        upper[0] = 0
    else:
        idx_slot_range(data, n, idx_column(size != OFFSET_INDEX_ENTRY_SIZE, column), value,
                       lower, upper)
    return 0


cdef tuple _entry(const uint8_t* data, Py_ssize_t slot, int size):
    cdef const uint8_t* p = data + slot * size
    if size == OFFSET_INDEX_ENTRY_SIZE:
        return (be_i32(p), be_i32(p + 4))
    return (be_i64(p), be_i32(p + 8))


# -- Python API ------------------------------------------------------------------------------


def entry_size(kind):
    """Bytes per entry of index ``kind``: 8 (``OFFSET_INDEX``) or 12 (``TIME_INDEX``)."""
    return _check_kind(kind)


def largest_lower_bound_slot(const uint8_t[::1] buffer not None, entries, kind, target,
                             search=KEY):
    """Slot of the largest entry whose ``search`` column is <= ``target``; -1 if none.

    See the ``_pure`` twin for the parameters. Never reads outside ``[0, entries)``.
    """
    cdef Py_ssize_t lower = -1, upper = -1
    _slot_range(view_ptr(buffer), buffer.shape[0], entries, kind, target, search, &lower, &upper)
    return lower


def smallest_upper_bound_slot(const uint8_t[::1] buffer not None, entries, kind, target,
                              search=KEY):
    """Slot of the smallest entry whose ``search`` column is >= ``target``; -1 if none."""
    cdef Py_ssize_t lower = -1, upper = -1
    _slot_range(view_ptr(buffer), buffer.shape[0], entries, kind, target, search, &lower, &upper)
    return upper


def largest_lower_bound_entry(const uint8_t[::1] buffer not None, entries, kind, target,
                              search=KEY):
    """The entry at :func:`largest_lower_bound_slot` as :func:`read_entry` returns it, or
    None when no entry is <= ``target``. One call for the common lookup."""
    cdef Py_ssize_t lower = -1, upper = -1
    _slot_range(view_ptr(buffer), buffer.shape[0], entries, kind, target, search, &lower, &upper)
    if lower < 0:
        return None
    return _entry(view_ptr(buffer), lower, _check_kind(kind))


def lower_entry_and_next(const uint8_t[::1] buffer not None, entries, kind, target,
                         search=KEY):
    """``(slot, key, value, next_key, next_value)``: :func:`largest_lower_bound_slot` and
    the entries at it and after it, in one call (a read's bounds). The fields of a
    missing entry (``slot == -1``, or ``slot + 1 == entries``) are 0."""
    cdef Py_ssize_t lower = -1, upper = -1
    cdef const uint8_t* data = view_ptr(buffer)
    _slot_range(data, buffer.shape[0], entries, kind, target, search, &lower, &upper)
    cdef int size = _check_kind(kind)
    cdef Py_ssize_t n = _check_entries(entries, buffer.shape[0], size)
    cdef tuple here = _entry(data, lower, size) if lower >= 0 else (0, 0)
    cdef tuple after = _entry(data, lower + 1, size) if lower + 1 < n else (0, 0)
    return (lower, here[0], here[1], after[0], after[1])


def read_entry(const uint8_t[::1] buffer not None, entries, kind, slot):
    """Entry ``slot`` as stored: ``(relative_offset, position)`` for the offset index,
    ``(timestamp, relative_offset)`` for the time index.

    Raises :class:`IndexError` unless ``0 <= slot < entries``.
    """
    cdef int size = _check_kind(kind)
    cdef Py_ssize_t n = _check_entries(entries, buffer.shape[0], size)
    cdef int overflow = 0
    cdef long long s
    if not PyLong_Check(slot):
        raise TypeError(f"slot must be an int, not {type(slot).__name__}")
    s = PyLong_AsLongLongAndOverflow(slot, &overflow)
    if overflow or s < 0 or s >= n:
        raise IndexError(f"slot {slot} is outside the {entries} entries of the index")
    return _entry(view_ptr(buffer), <Py_ssize_t>s, size)


def first_out_of_order(const uint8_t[::1] buffer not None, entries, kind):
    """The first slot that breaks the index's order, or -1 when all ``entries`` are valid.

    Offset index: relative offsets strictly increase and start at >= 0; positions are
    >= 0 and never decrease. Time index: timestamps never decrease; relative offsets
    start at >= 0 and never decrease.
    """
    cdef int size = _check_kind(kind)
    cdef Py_ssize_t n = _check_entries(entries, buffer.shape[0], size)
    return idx_first_out_of_order(view_ptr(buffer), n, size != OFFSET_INDEX_ENTRY_SIZE)


# -- recovery: the index entries of a run of scanned batches, written in place ---------------

# The slots of rebuild_entries' state (kafkastore/_pure/index_search.py documents them).
REBUILD_STATE_SLOTS = 11
cdef enum:
    _S_VALID, _S_LAST_ENTRY, _S_MAX_TS, _S_MAX_OFF, _S_O_ENTRIES, _S_O_LIMIT, _S_O_LAST,
    _S_T_ENTRIES, _S_T_LIMIT, _S_T_LAST_TS, _S_T_LAST_OFF, _S_SLOTS


cdef inline bint _rel_ok(int64_t offset, int64_t base) noexcept nogil:
    """0 <= offset - base <= INT32_MAX, without overflowing for any two int64s."""
    return offset >= base and <uint64_t>offset - <uint64_t>base <= <uint64_t>INT32_MAX


def rebuild_entries(const int64_t[::1] last_offset not None, const int64_t[::1] size not None,
                    const int64_t[::1] max_timestamp not None, Py_ssize_t start,
                    int64_t base_offset, int64_t interval, int64_t[::1] state not None,
                    uint8_t[::1] offset_index not None, uint8_t[::1] time_index not None):
    """Kafka's ``LogSegment.recover`` index rebuild over scanned batches ``start:``; the
    pure twin documents it. Returns the row it stopped at."""
    cdef Py_ssize_t n = last_offset.shape[0]
    if size.shape[0] < n or max_timestamp.shape[0] < n or state.shape[0] < _S_SLOTS:
        raise ValueError("rebuild_entries: columns shorter than last_offset, or state "
                         f"shorter than {REBUILD_STATE_SLOTS}")
    if not 0 <= start <= n:
        raise ValueError(f"start {start} is outside [0, {n}]")
    cdef int64_t valid = state[_S_VALID], last_entry = state[_S_LAST_ENTRY]
    cdef int64_t max_ts = state[_S_MAX_TS], max_off = state[_S_MAX_OFF]
    cdef int64_t o_entries = state[_S_O_ENTRIES], o_limit = state[_S_O_LIMIT]
    cdef int64_t o_last = state[_S_O_LAST]
    cdef int64_t t_entries = state[_S_T_ENTRIES], t_limit = state[_S_T_LIMIT]
    cdef int64_t t_last_ts = state[_S_T_LAST_TS], t_last_off = state[_S_T_LAST_OFF]
    if o_entries < 0 or t_entries < 0 or not 0 <= last_entry <= valid:
        # also keeps valid - last_entry below from overflowing
        raise ValueError("rebuild_entries: negative entry count in state, or bytes at the "
                         "last entry outside [0, valid bytes]")
    cdef int64_t o_room = offset_index.shape[0] // OFFSET_INDEX_ENTRY_SIZE
    cdef int64_t t_room = time_index.shape[0] // TIME_INDEX_ENTRY_SIZE
    cdef uint8_t* o_data = &offset_index[0] if offset_index.shape[0] else NULL
    cdef uint8_t* t_data = &time_index[0] if time_index.shape[0] else NULL
    cdef int64_t last, ts, step, new_ts, new_off
    cdef bint add_offset, add_time
    cdef Py_ssize_t i = start
    with nogil:
        while i < n:
            last = last_offset[i]
            if not _rel_ok(last, base_offset):
                break
            ts = max_timestamp[i]
            step = size[i]
            if step < 0 or valid > INT64_MAX - step:
                break
            if ts > max_ts:
                new_ts, new_off = ts, last
            else:
                new_ts, new_off = max_ts, max_off
            if valid - last_entry > interval:
                add_offset = o_entries < o_limit
                if add_offset and ((o_entries != 0 and last <= o_last) or valid > INT32_MAX
                                   or o_entries >= o_room):
                    break
                add_time = False
                if t_entries < t_limit:
                    if t_entries != 0 and (new_off < t_last_off or new_ts < t_last_ts):
                        break
                    add_time = new_ts > t_last_ts
                    if add_time and (not _rel_ok(new_off, base_offset) or t_entries >= t_room):
                        break
                if add_offset:
                    ks_store_be32(o_data + o_entries * OFFSET_INDEX_ENTRY_SIZE,
                                  <uint32_t>(last - base_offset))
                    ks_store_be32(o_data + o_entries * OFFSET_INDEX_ENTRY_SIZE + 4,
                                  <uint32_t>valid)
                    o_entries += 1
                    o_last = last
                if add_time:
                    ks_store_be64(t_data + t_entries * TIME_INDEX_ENTRY_SIZE, <uint64_t>new_ts)
                    ks_store_be32(t_data + t_entries * TIME_INDEX_ENTRY_SIZE + 8,
                                  <uint32_t>(new_off - base_offset))
                    t_entries += 1
                    t_last_ts, t_last_off = new_ts, new_off
                last_entry = valid
            max_ts, max_off = new_ts, new_off
            valid += step
            i += 1
    state[_S_VALID], state[_S_LAST_ENTRY] = valid, last_entry
    state[_S_MAX_TS], state[_S_MAX_OFF] = max_ts, max_off
    state[_S_O_ENTRIES], state[_S_O_LIMIT], state[_S_O_LAST] = o_entries, o_limit, o_last
    state[_S_T_ENTRIES], state[_S_T_LIMIT] = t_entries, t_limit
    state[_S_T_LAST_TS], state[_S_T_LAST_OFF] = t_last_ts, t_last_off
    return i
