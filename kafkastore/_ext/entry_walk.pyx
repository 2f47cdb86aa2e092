"""Walk the entry headers of a ``.log`` file held in a buffer (compiled kernel).

Twin of ``kafkastore/_pure/entry_walk.py``, which documents the walk and is
the oracle these functions are tested against: same names, same results.

The buffer is a ``const uint8_t[::1]`` view (bytes, an mmap, a memoryview)
held only for the call. Each header field is decoded with ``ks_load_be32`` /
``ks_load_be64``; before any field is read the walk checks that the bytes it
needs lie inside the buffer, so a hostile file gives a wrong answer or
``CORRUPT``, never an out-of-bounds read. Positions are ``int64`` so that a
size field near ``INT32_MAX`` cannot overflow the arithmetic.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t

from kafkastore._ext.consts cimport (HEADER_SIZE_UP_TO_MAGIC, LAST_OFFSET_DELTA_OFFSET,
                                     LEGACY_TIMESTAMP_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET,
                                     MAX_TIMESTAMP_OFFSET, MIN_ENTRY_SIZE)
from kafkastore._ext.reader cimport add64, be_i32, be_i64, view_ptr

__all__ = ["FOUND", "NEED_MORE", "END", "CORRUPT", "find_entry"]

FOUND = 0
NEED_MORE = 1
END = 2
CORRUPT = 3

cdef enum:
    V2_HEADER = 43     # up to and including maxTimestamp
    V1_HEADER = 26     # up to and including the v1 timestamp


def find_entry(const uint8_t[::1] buffer, Py_ssize_t position, int64_t limit,
               int64_t target_offset):
    """See ``kafkastore/_pure/entry_walk.py``."""
    cdef const uint8_t* data = view_ptr(buffer)
    cdef int64_t have = buffer.shape[0]
    cdef int64_t pos = position
    cdef int64_t offset, last, max_ts, entry
    cdef int32_t size
    cdef int magic
    if position < 0:
        raise ValueError(f"negative position {position}")
    while True:
        if pos >= limit - HEADER_SIZE_UP_TO_MAGIC:
            return 2, pos, 0, 0, 0, 0, 0
        if pos + HEADER_SIZE_UP_TO_MAGIC > have:
            return 1, pos, 0, 0, 0, 0, 0
        offset = be_i64(data + pos)
        size = be_i32(data + pos + 8)
        if size < MIN_ENTRY_SIZE:
            return 3, pos, size, 0, offset, 0, 0
        if pos > limit - LOG_OVERHEAD - size:
            return 2, pos, 0, 0, 0, 0, 0
        entry = <int64_t>size + LOG_OVERHEAD
        magic = data[pos + MAGIC_OFFSET]
        if magic >= 2:
            if entry >= V2_HEADER:
                if pos + V2_HEADER > have:
                    return 1, pos, 0, 0, 0, 0, 0
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
                    return 1, pos, 0, 0, 0, 0, 0
                max_ts = be_i64(data + pos + LEGACY_TIMESTAMP_OFFSET)
            else:
                max_ts = -1
        if last >= target_offset:
            return 0, pos, entry, magic, offset, last, max_ts
        pos += entry
