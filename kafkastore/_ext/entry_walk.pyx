"""Walk the entry headers of a ``.log`` file held in a buffer (compiled kernel).

Twin of ``kafkastore/_pure/entry_walk.py``, which documents the walk and is
the oracle these functions are tested against: same names, same results.

The buffer is a ``const uint8_t[::1]`` view (bytes, an mmap, a memoryview)
held only for the call. Each header field is decoded with ``ks_load_be32`` /
``ks_load_be64``; before any field is read the walk checks that the bytes it
needs lie inside the buffer, so a hostile file gives a wrong answer or
``CORRUPT``, never an out-of-bounds read. Positions are ``int64`` so that a
size field near ``INT32_MAX`` cannot overflow the arithmetic.

``read_at`` and ``read_segment`` are a read's common case in one call (the segment
choice, ``locate_read`` and the slice); they read the segment's, index's and file's
hot-path fields as the pure twin documents, as Python attributes.
"""


from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, int32_t, int64_t, uint8_t

from kafkastore._ext.consts cimport (HEADER_SIZE_UP_TO_MAGIC, LAST_OFFSET_DELTA_OFFSET,
                                     LEGACY_TIMESTAMP_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET,
                                     MAX_TIMESTAMP_OFFSET, MIN_ENTRY_SIZE,
                                     OFFSET_INDEX_ENTRY_SIZE)
from kafkastore._ext.index_search cimport idx_column, idx_slot_range
from kafkastore._ext.reader cimport add64, be_i32, be_i64, view_ptr

__all__ = ["FOUND", "NEED_MORE", "END", "CORRUPT", "find_entry", "locate_read", "read_at",
           "read_segment"]

FOUND = 0
NEED_MORE = 1
END = 2
CORRUPT = 3

cdef enum:
    V2_HEADER = 43     # up to and including maxTimestamp
    V1_HEADER = 26     # up to and including the v1 timestamp


cdef struct Entry:
    int64_t pos          # relative to the buffer
    int64_t size         # FOUND: the entry's size with its prefix; CORRUPT: the size field
    int magic
    int64_t offset
    int64_t last
    int64_t max_ts


cdef int _walk(const uint8_t* data, int64_t have, int64_t pos, int64_t limit,
               int64_t target_offset, Entry* out) noexcept nogil:
    """find_entry's walk, its status returned and the entry's fields in ``out``."""
    cdef int64_t offset, last, max_ts, entry
    cdef int32_t size
    cdef int magic
    out.size = out.magic = out.offset = out.last = out.max_ts = 0
    while True:
        out.pos = pos
        if pos >= limit - HEADER_SIZE_UP_TO_MAGIC:
            return 2
        if pos + HEADER_SIZE_UP_TO_MAGIC > have:
            return 1
        offset = be_i64(data + pos)
        size = be_i32(data + pos + 8)
        if size < MIN_ENTRY_SIZE:
            out.size = size
            out.offset = offset
            return 3
        if pos > limit - LOG_OVERHEAD - size:
            return 2
        entry = <int64_t>size + LOG_OVERHEAD
        magic = data[pos + MAGIC_OFFSET]
        if magic >= 2:
            if entry >= V2_HEADER:
                if pos + V2_HEADER > have:
                    return 1
                # int64 wrap as Java's (and the pure twin's)
                last = add64(offset, be_i32(data + pos + LAST_OFFSET_DELTA_OFFSET))
                max_ts = be_i64(data + pos + MAX_TIMESTAMP_OFFSET)
            else:
                last = offset
                max_ts = -1
        else:
            last = offset
            if magic == 1 and entry >= V1_HEADER:
                if pos + V1_HEADER > have:
                    return 1
                max_ts = be_i64(data + pos + LEGACY_TIMESTAMP_OFFSET)
            else:
                max_ts = -1
        if last >= target_offset:
            out.size = entry
            out.magic = magic
            out.offset = offset
            out.last = last
            out.max_ts = max_ts
            return 0
        pos += entry


def find_entry(const uint8_t[::1] buffer, Py_ssize_t position, int64_t limit,
               int64_t target_offset):
    """See ``kafkastore/_pure/entry_walk.py``."""
    cdef Entry e
    if position < 0:
        raise ValueError(f"negative position {position}")
    cdef int status = _walk(view_ptr(buffer), buffer.shape[0], position, limit,
                            target_offset, &e)
    return status, e.pos, e.size, e.magic, e.offset, e.last, e.max_ts


cdef bint _index_bounds(index, Py_ssize_t entries, int64_t rel, int64_t* position,
                       int64_t* next_position) except -1:
    """OffsetIndex.lookup_with_next over ``index``: the position of the largest entry
    <= ``rel`` (0 if none) into ``position``, the next entry's (-1 if none) into
    ``next_position``; True when the entry maps ``rel`` itself. The buffer is released
    on return, so no export of the index's map outlives the lookup. (A plain
    ``Py_buffer``, not a typed memoryview: this runs once per read, and acquiring a
    typed view costs more than the search.)"""
    cdef Py_buffer buf
    cdef const uint8_t* data
    cdef Py_ssize_t capacity
    cdef Py_ssize_t lower = -1, upper = -1
    cdef bint at_start = False
    PyObject_GetBuffer(index, &buf, PyBUF_SIMPLE)
    try:
        data = <const uint8_t*>buf.buf
        capacity = buf.len // OFFSET_INDEX_ENTRY_SIZE
        if entries > capacity:   # a count read beside a replaced view (abstract_index._valid)
            entries = capacity
        idx_slot_range(data, entries, idx_column(0, 0), rel, &lower, &upper)
        position[0] = 0
        next_position[0] = -1
        if lower >= 0:
            at_start = be_i32(data + lower * OFFSET_INDEX_ENTRY_SIZE) == rel
            position[0] = be_i32(data + lower * OFFSET_INDEX_ENTRY_SIZE + 4)
        if lower + 1 < entries:
            next_position[0] = be_i32(data + (lower + 1) * OFFSET_INDEX_ENTRY_SIZE + 4)
    finally:
        PyBuffer_Release(&buf)
    return at_start


cdef object _walk_window(pread, fd, int64_t at, int64_t stop, Py_ssize_t window,
                        int64_t target_offset, Entry* e):
    """The window of ``min(window, stop - at)`` bytes read at ``at`` when the walk from
    its start finds the target's entry in it (its fields in ``e``), else None."""
    if at < 0 or at >= stop:   # an index position is not trusted before this check
        return None
    cdef int64_t left = stop - at
    win = pread(fd, window if window < left else left, at)
    if type(win) is not bytes:
        return None
    if _walk(<const uint8_t*><const char*>win, len(<bytes>win), 0, left, target_offset,
             e) != 0:
        return None
    return win


def locate_read(index, Py_ssize_t entries, int64_t base_offset, int64_t target_offset,
                pread, fd, int64_t stop, Py_ssize_t window):
    """See ``kafkastore/_pure/entry_walk.py``."""
    cdef int64_t position, size
    win = _locate(index, entries, base_offset, target_offset, pread, fd, stop, window,
                  &position, &size)
    return None if win is None else (position, size, win)


cdef object _locate(index, Py_ssize_t entries, int64_t base_offset, int64_t target_offset,
                    pread, fd, int64_t stop, Py_ssize_t window, int64_t* found_position,
                    int64_t* found_size):
    """locate_read's body: the window (None when the common case does not apply), the
    batch's position and size into ``found_position`` and ``found_size``."""
    cdef int64_t rel = target_offset - base_offset
    cdef int64_t position, next_position
    cdef Entry e
    if rel < INT32_MIN or rel > INT32_MAX:
        return None
    cdef bint at_start = _index_bounds(index, entries, rel, &position, &next_position)
    if not at_start and position < next_position < stop:
        win = _walk_window(pread, fd, next_position, stop, window, target_offset, &e)
        # from the next entry's position only a v2 batch says by its base offset that
        # it holds the target (a legacy wrapper's offset is its last inner offset)
        if win is not None and e.pos == 0 and e.magic >= 2 and e.offset <= target_offset:
            found_position[0] = next_position
            found_size[0] = e.size
            return win
    win = _walk_window(pread, fd, position, stop, window, target_offset, &e)
    if win is None:
        return None
    found_position[0] = position + e.pos
    found_size[0] = e.size
    if e.pos != 0:
        return (<bytes>win)[e.pos:]
    return win

cdef object _read_segment(segment, int64_t target_offset, int64_t max_size,
                          int64_t max_position, bint bounded, bint min_one_message, fs,
                          tuple plan):
    """read_segment's body; ``max_position`` counts when ``bounded``, else the file's
    size bounds the slice."""
    cdef int64_t min_window = plan[3], max_window = plan[4]
    cdef int64_t stop, window, position, header_size, adjusted, fetch
    cdef Py_ssize_t have
    records_type, plain_fs, new_slice, os_pread = plan[0], plan[1], plan[2], plan[5]
    log = segment.log
    if type(log) is not records_type or log._closed:
        return None
    index = None if segment._index_check_pending else segment._offset_index._index
    if index is None:   # a segment's first read: its index is mapped and checked now
        index = segment.offset_index
    entries = index._entries   # before the view: see abstract_index._valid
    view = index._view
    if view is None:
        return None
    stop = log._size
    if not bounded:
        max_position = stop
    window = max_size if min_window <= max_size <= max_window else min_window
    data = _locate(view, entries, index._base_offset, target_offset,
                   os_pread if type(fs) is plain_fs else fs.pread, log._fd, stop, window,
                   &position, &header_size)
    # (closed during the read: its bytes may come from a reused descriptor)
    if data is None or log._closed:
        return None
    adjusted = max_size
    if min_one_message and header_size > max_size:
        adjusted = header_size
    if adjusted == 0:
        return new_slice(log, position, 0, target_offset, False, None)
    fetch = max_position - position
    if adjusted < fetch:
        fetch = adjusted
    if fetch < 0:
        fetch = 0
    have = len(<bytes>data)
    if have != fetch:
        data = (<bytes>data)[:fetch] if have > fetch else None
    return new_slice(log, position, fetch, target_offset, adjusted < header_size, data)


cdef inline int64_t _size_bound(max_size) except -2:
    """A read's ``max_size`` as an int64, -1 when negative: any int is a size (a size past
    INT64_MAX reads as much as INT64_MAX does: the file bounds the slice first)."""
    if max_size < 0:
        return -1
    return INT64_MAX if max_size > INT64_MAX else <int64_t>max_size


def read_segment(segment, int64_t target_offset, max_size, max_position,
                 bint min_one_message, fs, tuple plan):
    """See ``kafkastore/_pure/entry_walk.py``."""
    cdef int64_t size = _size_bound(max_size)
    if size < 0:
        return None
    if max_position is None:
        return _read_segment(segment, target_offset, size, 0, False, min_one_message, fs,
                             plan)
    return _read_segment(segment, target_offset, size, max_position, True,
                         min_one_message, fs, plan)


def read_at(tuple segments, tuple bases, int64_t target_offset, max_size,
            bint min_one_message, fs, tuple plan):
    """See ``kafkastore/_pure/entry_walk.py``."""
    cdef Py_ssize_t lo = 0, hi = len(bases), mid
    cdef int64_t size = _size_bound(max_size)
    if size < 0:
        return None
    while lo < hi:   # bisect_right: the last segment whose base is <= the target
        mid = (lo + hi) >> 1
        if target_offset < <int64_t>bases[mid]:
            hi = mid
        else:
            lo = mid + 1
    if lo == 0 or lo > len(segments):
        return None
    return _read_segment(segments[lo - 1], target_offset, size, 0, False, min_one_message, fs,
                         plan)
