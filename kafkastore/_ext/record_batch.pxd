# cdef API of the record_batch kernel: its extension types' layouts, for other
# kernels to cimport. The v2 record parser other kernels share is in
# default_record.pxd (the cleaner's kernel walks records with it), the byte
# readers in reader.pxd. The Python API is in record_batch.pyi; the formats are
# documented in kafkastore/_pure/record_batch.py.
cimport cython
from cpython.object cimport PyObject
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t


@cython.final
cdef class Record:
    # owned references, NULL until set; Python reads them as offset, timestamp,
    # timestamp_type, key, value, headers (default_record.pxi says why raw slots)
    cdef PyObject* _offset
    cdef PyObject* _timestamp
    cdef PyObject* _timestamp_type
    cdef PyObject* _key
    cdef PyObject* _value
    cdef PyObject* _headers

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
