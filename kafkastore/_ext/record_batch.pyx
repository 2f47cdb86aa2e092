"""Kafka record batches: read, scan, decode to columns, and write (compiled).

Twin of ``kafkastore/_pure/record_batch.py``, which documents the formats
field by field and is the oracle these kernels are tested against: same
names, same results, same exceptions and messages.

This file is the head of ONE extension module: imports, the module state
every part shares, and then the parts, one per Kafka class, pulled in with
Cython ``include`` (textual inclusion, so calls between them stay inline and
no Python API changes):

    default_record.pxi          Record (DefaultRecord), its header decoding
    default_record_batch.pxi    RecordBatch (DefaultRecordBatch), its iterator
    legacy_record.pxi           LegacyRecordBatch (LegacyRecord, wrappers)
    batch_scan.pxi              read_batch, iter_batches, scan_batches, BatchScan
    column_pool.pxi             the column memory pool
    record_columns.pxi          decode_columns and its _Columns
    memory_records_builder.pxi  encode_batch_v2 (MemoryRecordsBuilder)

The record parser they all use is ``default_record.pxd`` (shared with the
cleaner's kernel, offset_map.pyx); the byte-level reads are ``reader.pxd``.

Safety: every read of untrusted bytes is preceded by a length check against
the end of the entry (or record) being parsed; no allocation is sized from a
declared length before that length is checked against the bytes actually
present. Compressed payloads are inflated by the installed decompressor,
which enforces ``max_decompressed_bytes``.

Thread-safety: batch objects are immutable once built; the column pool's
state is module-global and touched only with the GIL held.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.tuple cimport PyTuple_GET_SIZE
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                          uint64_t)
from cpython.object cimport PyObject, PyTypeObject
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from kafkastore._ext.consts cimport *
from kafkastore._ext.default_record cimport (RecordError, RecordSpan, read_record,
                                             record_error_message)
from kafkastore._ext.endian cimport ks_load_be32, ks_store_be16, ks_store_be32, ks_store_be64
from kafkastore._ext.reader cimport (add64, as_view, be_i16, be_i32, be_i64, read_varint,
                                     read_varlong, sub32, sub64, view_ptr)
from kafkastore._ext.varint cimport (check_position, uvarint_size, uvarint_write, varint_read,
                                     zigzag32, zigzag64)


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    object PyDescr_NewMember(PyTypeObject* type, PyMemberDef* member)
    void PyType_Modified(PyTypeObject* type)
    PyObject* PyList_GET_ITEM(object seq, Py_ssize_t i)  # borrowed
    PyTypeObject PyTuple_Type
    Py_ssize_t Py_SIZE(PyObject* o)
    ctypedef struct PyTupleObject:
        PyObject* ob_item[1]

cdef extern from *:
    """
    static void ks_use_generic_getattr(PyTypeObject *t) {
        t->tp_getattro = PyObject_GenericGetAttr;
    }
    """
    void ks_use_generic_getattr(PyTypeObject* t)

cdef extern from "structmember.h":
    int T_OBJECT_EX
    int READONLY

cdef extern from "ks_prefetch.h" nogil:
    void ks_prefetch(const void* p)

cdef extern from "ks_v2fast.h" nogil:
    ctypedef struct ks_cols:
        int64_t* offset
        int64_t* timestamp
        int32_t* header_count
        uint8_t* key_null
        uint8_t* value_null
        int64_t* key_offsets
        int64_t* value_offsets
        uint8_t* key_data
        uint8_t* value_data
        Py_ssize_t key_cap
        Py_ssize_t value_cap
        Py_ssize_t key_used
        Py_ssize_t value_used
        Py_ssize_t row
        int64_t* key_starts
        int64_t* value_starts
        int32_t* key_starts32
        int32_t* value_starts32
        int32_t* key_lengths
        int32_t* value_lengths
        Py_ssize_t base
    ctypedef struct ks_v2batch:
        int64_t base_offset
        int64_t base_timestamp
        int64_t max_timestamp
        int log_append_time
        const uint8_t* ahead
        Py_ssize_t ahead_len
        Py_ssize_t ahead_pos
        Py_ssize_t ahead_step
    Py_ssize_t ks_v2_fast_records(const uint8_t* data, Py_ssize_t* pos, Py_ssize_t end,
                                  Py_ssize_t max_records, ks_v2batch* b, ks_cols* c)
    Py_ssize_t ks_v2_fast_views(const uint8_t* data, Py_ssize_t* pos, Py_ssize_t end,
                                Py_ssize_t max_records, ks_v2batch* b, ks_cols* c)
    Py_ssize_t ks_v2_fast_views32(const uint8_t* data, Py_ssize_t* pos, Py_ssize_t end,
                                  Py_ssize_t max_records, ks_v2batch* b, ks_cols* c)
    void ks_v2_copy(uint8_t* d, const uint8_t* dlim, const uint8_t* s, const uint8_t* slim,
                    Py_ssize_t n)

import zlib

import crc32c
import numpy as np

from kafkastore.errors import (CorruptRecordError, InvalidCrcError, RecordTooLargeError,
                               UnsupportedCompressionError)
from kafkastore.types import CompressionType, TimestampType

__all__ = [
    "Record",
    "RecordBatch",
    "LegacyRecordBatch",
    "BatchScan",
    "iter_batches",
    "read_batch",
    "scan_batches",
    "decode_columns",
    "encode_batch_v2",
    "set_decompressor",
    "set_column_pool_limit",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
]

DEFAULT_MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024

cdef int32_t INT32_MAX_ = 2147483647
cdef object _CREATE_TIME = TimestampType.CREATE_TIME
cdef object _LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
cdef object _NO_TIMESTAMP_TYPE = TimestampType.NO_TIMESTAMP_TYPE
cdef tuple _TS_TYPES = (_CREATE_TIME, _LOG_APPEND_TIME)
cdef tuple _CODECS = tuple(CompressionType)
cdef tuple _EMPTY = ()
cdef object _crc32c = crc32c.crc32c
cdef object _crc32 = zlib.crc32

# The codec layer sits above the kernels, so it is handed in, not imported:
# fn(codec, data, max_size, magic) -> bytes.
cdef object _decompress = None


def set_decompressor(fn):
    """Install the function that inflates compressed payloads.

    ``kafkastore.records`` installs ``kafkastore.compression.decompress`` at
    import; the kernel itself knows no codec.
    """
    global _decompress
    _decompress = fn


cdef int _corrupt(str message, Py_ssize_t where, object offset=None) except -1:
    raise CorruptRecordError(message, position=where, offset=offset)


cdef object _inflate(int codec, object data, Py_ssize_t limit, int magic, Py_ssize_t where):
    if _decompress is None:
        raise UnsupportedCompressionError(
            "no decompressor installed (import kafkastore.records)", position=where)
    try:
        return _decompress(codec, data, limit, magic)
    except (CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError) as err:
        if err.position is None:
            err.position = where
        raise


cdef object _codec(int attributes, int magic, Py_ssize_t where):
    cdef int codec = attributes & CODEC_MASK
    if codec > 4 or (codec == 4 and magic < 2):
        raise UnsupportedCompressionError(
            f"Unknown compression type id {codec} for magic {magic}", position=where)
    return _CODECS[codec]


cdef Py_ssize_t _limit(object limit) except? -1:
    # a bound above what an address space holds is no bound at all
    if not isinstance(limit, int):
        raise TypeError(f"max_decompressed_bytes must be an int, not {type(limit).__name__}")
    return min(limit, PY_SSIZE_T_MAX)


# -- the parts, one per Kafka class (see the module docstring) ---------------------------

include "default_record.pxi"
include "default_record_batch.pxi"
include "legacy_record.pxi"
include "batch_scan.pxi"
include "column_pool.pxi"
include "record_columns.pxi"
include "memory_records_builder.pxi"
