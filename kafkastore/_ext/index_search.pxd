# cdef API of the index_search kernel: binary search over Kafka's big-endian offset
# and time index entries, for other kernels to cimport (the segment index builder and
# recovery search without Python calls). The Python API is in index_search.pyi; the
# entry layouts are documented in index_search.pyx and kafkastore/_pure/index_search.py.
from libc.stdint cimport int32_t, int64_t, uint8_t

from kafkastore._ext.reader cimport be_i32, be_i64


# One searchable column of an index: where it sits in each entry and how wide it is.
cdef struct IdxColumn:
    Py_ssize_t entry_size      # 8 (offset index) or 12 (time index)
    Py_ssize_t field_offset    # byte offset of the column inside an entry
    bint wide                  # int64 (the time index's timestamp), else int32


cdef inline int64_t idx_key(const uint8_t* data, Py_ssize_t slot,
                            IdxColumn col) noexcept nogil:
    """The signed value of ``col`` in entry ``slot``; the caller checked ``slot``."""
    cdef const uint8_t* p = data + slot * col.entry_size + col.field_offset
    if col.wide:
        return be_i64(p)
    return be_i32(p)


# The column ``search`` (KEY 0 / VALUE 1) of index ``kind`` (OFFSET_INDEX 0 /
# TIME_INDEX 1); both already validated.
cdef IdxColumn idx_column(int kind, int search) noexcept nogil

# Kafka's AbstractIndex.indexSlotRangeFor over ``entries`` entries at ``data`` (at least
# entries * col.entry_size readable bytes): the largest slot whose column is <= target
# into ``lower`` and the smallest slot whose column is >= target into ``upper``, -1 for
# none. Searches the warm section (the last 8 KiB of entries) first.
cdef void idx_slot_range(const uint8_t* data, Py_ssize_t entries, IdxColumn col,
                         int64_t target, Py_ssize_t* lower, Py_ssize_t* upper) noexcept nogil

# The first slot that breaks index ``kind``'s order (see first_out_of_order), or -1.
cdef Py_ssize_t idx_first_out_of_order(const uint8_t* data, Py_ssize_t entries,
                                       int kind) noexcept nogil
