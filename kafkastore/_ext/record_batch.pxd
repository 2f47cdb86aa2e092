# cdef API of the record_batch kernel, for other kernels to cimport (the
# segment index builder and the log cleaner walk records without Python calls).
# The Python API is in record_batch.pyi; the formats are documented in
# kafkastore/_pure/record_batch.py.
cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t


cdef struct RecordSpan:
    int64_t ts_delta
    int32_t offset_delta
    Py_ssize_t key_pos         # positions are relative to the records section
    int32_t key_len            # -1: null
    Py_ssize_t value_pos
    int32_t value_len          # -1: null
    int32_t header_count
    Py_ssize_t headers_pos
    Py_ssize_t next_pos


# Parse and fully validate one v2 record at ``pos`` of ``data[:end]``; raises
# CorruptRecordError (with ``where`` as its position) on any malformed field.
cdef int parse_record(const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                      RecordSpan* out, Py_ssize_t where) except -1


@cython.final
cdef class Record:
    cdef readonly object offset
    cdef readonly object timestamp
    cdef readonly object timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers

    cdef tuple _fields(self)


cdef class RecordBatch:
    cdef const uint8_t[::1] _view          # the whole entry, zero-copy
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t first_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count
    cdef readonly Py_ssize_t max_decompressed_bytes

    cdef int _init(self, const uint8_t[::1] view, Py_ssize_t position,
                   Py_ssize_t limit) except -1


cdef class LegacyRecordBatch:
    cdef const uint8_t[::1] _view          # the whole message, zero-copy
    cdef readonly Py_ssize_t position
    cdef readonly int64_t last_offset
    cdef readonly int32_t batch_length
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int64_t timestamp
    cdef readonly Py_ssize_t max_decompressed_bytes
    cdef Py_ssize_t _key_pos
    cdef int32_t _key_len                 # -1: null
    cdef Py_ssize_t _value_pos
    cdef int32_t _value_len               # -1: null
    cdef list _inner                      # decoded inner records of a wrapper
    cdef list _inner_messages             # and the inner messages they came from

    cdef int _init(self, const uint8_t[::1] view, Py_ssize_t position,
                   Py_ssize_t limit) except -1
    cdef list _inner_records(self)
    cdef list _decode_wrapper(self)
