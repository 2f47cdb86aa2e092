# cdef API of the offset_map kernel: the map's C state and the structs of its record
# walks (a record is parsed by the one v2 record parser, default_record.pxd, into a
# RecordSpan; errors come back in its RecordError). The Python API is in
# offset_map.pyi; kafkastore/_pure/offset_map.py documents the semantics.
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef struct OMap:
    uint8_t* table             # slots * 24 bytes: digest[16] + offset int64 (host order)
    int64_t slots              # Kafka's slots: memory // 24, what "full" means
    int64_t table_slots        # the slots probed: all, or a prefix (clear(expected_entries))
    int64_t grow_at            # size at which the prefix doubles (INT64_MAX: never)
    int64_t size               # filled slots
    int64_t latest_offset      # Kafka's lastOffset: last put or update_latest_offset
    int64_t lookups            # puts + gets
    int64_t probes             # slots looked at
    uint8_t key[16]            # the SipHash-2-4 key


cdef struct KeyEntry:
    # a key hashed ahead of its put or get
    uint8_t digest[16]
    int64_t slot               # first probe slot, also the prefetch target
    int64_t offset
    Py_ssize_t index           # record number within the section
    bint tombstone             # null value (retained_mask only)


cdef struct Piece:
    # one kept record of select_records
    Py_ssize_t start
    Py_ssize_t body
    Py_ssize_t ts_end
    Py_ssize_t end
    int64_t ts_delta           # the new delta (re-encoded records only)
    int32_t length             # the new length (re-encoded records only)
    bint verbatim              # delta unchanged: copy start..end as it is


@cython.final
cdef class SkimpyOffsetMap:
    cdef OMap _m
    cdef object _memory
    cdef bytes _hash_key
    cdef bint _busy            # a bulk walk runs without the GIL

    cdef void _reset(self) noexcept
    cdef int _enter(self) except -1
    cdef int _digest(self, object key, uint8_t* out) except -1
