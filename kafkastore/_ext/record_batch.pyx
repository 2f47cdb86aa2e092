"""Kafka record batches: read, scan, decode to columns, and write (compiled).

Twin of ``kafkastore/_pure/record_batch.py``, which documents the formats
field by field and is the oracle these kernels are tested against: same
names, same results, same exceptions and messages.

Safety: every read of untrusted bytes is preceded by a length check against
the end of the entry (or record) being parsed; no allocation is sized from a
declared length before that length is checked against the bytes actually
present. Compressed payloads are inflated by the installed decompressor,
which enforces ``max_decompressed_bytes``.
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
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from kafkastore._ext.consts cimport *
from kafkastore._ext.endian cimport (ks_load_be16, ks_load_be32, ks_load_be64, ks_store_be16,
                                     ks_store_be32, ks_store_be64)
from kafkastore._ext.varint cimport (check_position, uvarint_size, uvarint_write, varint_read,
                                     varlong_read, zigzag32, zigzag64)


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


cdef inline int64_t _add64(int64_t a, int64_t b) noexcept nogil:
    # Java long arithmetic wraps; signed overflow is undefined in C, so add unsigned
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline int64_t _sub64(int64_t a, int64_t b) noexcept nogil:
    # wraps like Java's long subtraction (the pure twin wraps the sum with _wrap64)
    return <int64_t>(<uint64_t>a - <uint64_t>b)


cdef inline int32_t _sub32(int32_t a, int32_t b) noexcept nogil:
    # Java int arithmetic wraps; do it unsigned, signed overflow is undefined in C
    return <int32_t>(<uint32_t>a - <uint32_t>b)


cdef inline int32_t _last_sequence(int32_t base_sequence, int32_t delta) noexcept nogil:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` in Java int arithmetic.

    A sequence wraps past INT32_MAX back to 0; a corrupt negative delta is
    computed exactly as Java computes it.
    """
    if base_sequence == -1:
        return -1
    if base_sequence > _sub32(2147483647, delta):
        return _sub32(_sub32(delta, _sub32(2147483647, base_sequence)), 1)
    return <int32_t>(<uint32_t>base_sequence + <uint32_t>delta)


cdef inline int32_t _i32(const uint8_t* p) noexcept nogil:
    return <int32_t>ks_load_be32(p)


cdef inline int64_t _i64(const uint8_t* p) noexcept nogil:
    return <int64_t>ks_load_be64(p)


cdef inline int16_t _i16(const uint8_t* p) noexcept nogil:
    return <int16_t>ks_load_be16(p)


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


cdef inline const uint8_t[::1] _as_view(object buffer):
    cdef const uint8_t[::1] view
    if isinstance(buffer, memoryview) and (buffer.ndim != 1 or buffer.itemsize != 1
                                           or buffer.format not in ("B", "b", "c")):
        buffer = buffer.cast("B")
    view = buffer
    return view


cdef inline const uint8_t* _ptr(const uint8_t[::1] view) noexcept:
    # &view[0] of an empty view would index past the end; nothing is read then
    return &view[0] if view.shape[0] else NULL


# -- records --------------------------------------------------------------------


# no_gc: a Record holds bytes, ints, an enum member and a tuple of
# (str, bytes) pairs, none of which can lead back to it, so it cannot be part
# of a reference cycle. Leaving it out of the cyclic GC saves the gen-0
# collections that allocating millions of records would otherwise trigger.
@cython.no_gc
@cython.freelist(512)
cdef class Record:
    """One record read from a batch. Immutable.

    ``timestamp`` is what a Kafka consumer reports: the batch's maxTimestamp
    for a LogAppendTime batch (the wrapper's timestamp for a legacy
    wrapper), -1 for magic 0. ``headers`` is a tuple of ``(str, bytes | None)``
    pairs; header keys are decoded as UTF-8 with ``surrogateescape`` so that
    invalid bytes survive a round trip.
    """

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    cdef tuple _fields(self):
        return (self.offset, self.timestamp, int(self.timestamp_type), self.key,
                self.value, self.headers)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == (<Record>other)._fields()

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.timestamp_type, self.key,
                         self.value, self.headers))

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"key={self.key!r}, value={_short(self.value)}, headers={self.headers!r})"
        )


# Cython exposes ``cdef readonly object`` fields through getset descriptors,
# which CPython's attribute cache does not specialise (about 18 ns a read).
# Record is read four or more times per decoded record, so its fields are
# re-exposed as read-only T_OBJECT_EX member descriptors, which the
# interpreter reads through a slot directly (LOAD_ATTR_SLOT, about 4 ns).
# Offsets are found by planting distinct sentinels in a probe instance, so
# nothing depends on the name of Cython's generated struct.
cdef PyMemberDef _record_members[6]
cdef tuple _RECORD_FIELDS = (b"offset", b"timestamp", b"timestamp_type", b"key", b"value",
                             b"headers")


cdef Py_ssize_t _slot_offset(object probe, object sentinel) except -1:
    cdef PyObject** words = <PyObject**><PyObject*>probe
    cdef object tp = type(probe)
    cdef Py_ssize_t i
    for i in range(1, (<PyTypeObject*>tp).tp_basicsize // <Py_ssize_t>sizeof(PyObject*)):
        if words[i] == <PyObject*>sentinel:
            return i * <Py_ssize_t>sizeof(PyObject*)
    raise RuntimeError("Record slot not found")


cdef int _install_record_members() except -1:
    cdef Record probe = Record.__new__(Record)
    cdef list sentinels = [object() for _ in range(6)]
    cdef Py_ssize_t i
    cdef dict tp_dict = <dict>(<PyTypeObject*>Record).tp_dict
    probe.offset, probe.timestamp, probe.timestamp_type = sentinels[0], sentinels[1], sentinels[2]
    probe.key, probe.value, probe.headers = sentinels[3], sentinels[4], sentinels[5]
    for i in range(6):
        _record_members[i].name = <const char*>(<bytes>_RECORD_FIELDS[i])
        _record_members[i].type = T_OBJECT_EX
        _record_members[i].offset = _slot_offset(probe, sentinels[i])
        _record_members[i].flags = READONLY
        _record_members[i].doc = NULL
        tp_dict[(<bytes>_RECORD_FIELDS[i]).decode()] = PyDescr_NewMember(
            <PyTypeObject*>Record, &_record_members[i])
    # Cython installs its own tp_getattro; the interpreter specialises slot
    # reads only for the generic one, which behaves the same here (no __dict__,
    # no __getattr__).
    ks_use_generic_getattr(<PyTypeObject*>Record)
    PyType_Modified(<PyTypeObject*>Record)
    return 0


_install_record_members()


def _short(value):
    if value is not None and len(value) > 40:
        return repr(bytes(value[:40])) + "..."
    return repr(value)


cdef inline Record _new_record(object offset, object timestamp, object ts_type, object key,
                               object value, object headers):
    cdef Record rec = Record.__new__(Record)
    rec.offset = offset
    rec.timestamp = timestamp
    rec.timestamp_type = ts_type
    rec.key = key
    rec.value = value
    rec.headers = headers
    return rec


cdef inline Py_ssize_t _rv32(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                             int32_t* out) noexcept nogil:
    """Varint at ``pos``: the next position, or -1 (truncated) / -2 (overlong).

    One- and two-byte varints (lengths below 64 and 8192: nearly every
    field of a record) are decoded inline; longer ones take the loop.
    """
    cdef uint32_t b0, b1, v
    cdef Py_ssize_t n
    if end - pos >= 2:
        b0 = p[pos]
        if b0 < 0x80:
            out[0] = <int32_t>((b0 >> 1) ^ (<uint32_t>0 - (b0 & 1)))
            return pos + 1
        b1 = p[pos + 1]
        if b1 < 0x80:
            v = (b0 & 0x7F) | (b1 << 7)
            out[0] = <int32_t>((v >> 1) ^ (<uint32_t>0 - (v & 1)))
            return pos + 2
    n = varint_read(p + pos, end - pos, out)
    return pos + n if n > 0 else n - 1


cdef inline Py_ssize_t _rv64(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                             int64_t* out) noexcept nogil:
    """Varlong at ``pos``, as :func:`_rv32`."""
    cdef uint64_t b0, b1, v
    cdef Py_ssize_t n
    if end - pos >= 2:
        b0 = p[pos]
        if b0 < 0x80:
            out[0] = <int64_t>((b0 >> 1) ^ (<uint64_t>0 - (b0 & 1)))
            return pos + 1
        b1 = p[pos + 1]
        if b1 < 0x80:
            v = (b0 & 0x7F) | (b1 << 7)
            out[0] = <int64_t>((v >> 1) ^ (<uint64_t>0 - (v & 1)))
            return pos + 2
    n = varlong_read(p + pos, end - pos, out)
    return pos + n if n > 0 else n - 1


cdef int _varint_error(Py_ssize_t code, bint wide, Py_ssize_t where) except -1:
    if code == -1:
        _corrupt("Found invalid record structure: truncated varint", where)
    if wide:
        _corrupt("Varlong is too long, most significant bit in the 10th byte is set", where)
    _corrupt("Varint is too long, the most significant bit in the 5th byte is set", where)


cdef int parse_record(const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                      RecordSpan* out, Py_ssize_t where) except -1:
    """Parse and fully validate one v2 record at ``pos``; fill ``out``.

    Every length is checked against the record's declared end (itself
    checked against ``end``) before the bytes it covers are touched. Errors
    are raised out of line, so the common path is branches and loads only.
    """
    cdef int32_t length = 0, count = 0, hkey_len = 0, hval_len = 0, i
    cdef Py_ssize_t start, rend, p
    p = _rv32(data, pos, end, &length)
    if p < 0:
        return _varint_error(p, False, where)
    if length < 0 or length > end - p:
        _corrupt(f"Invalid record size: expected {length} bytes in record payload, but the "
                 f"buffer has only {end - p} remaining bytes", where)
    start = p
    rend = p + length
    if p >= rend:
        _corrupt("Found invalid record structure: empty record", where)
    p += 1  # attributes: unused
    p = _rv64(data, p, rend, &out.ts_delta)
    if p < 0:
        return _varint_error(p, True, where)
    p = _rv32(data, p, rend, &out.offset_delta)
    if p < 0:
        return _varint_error(p, False, where)
    p = _rv32(data, p, rend, &out.key_len)
    if p < 0:
        return _varint_error(p, False, where)
    out.key_pos = p
    if out.key_len >= 0:
        if out.key_len > rend - p:
            _corrupt("Found invalid record structure: key past record end", where)
        p += out.key_len
    else:
        out.key_len = -1
    p = _rv32(data, p, rend, &out.value_len)
    if p < 0:
        return _varint_error(p, False, where)
    out.value_pos = p
    if out.value_len >= 0:
        if out.value_len > rend - p:
            _corrupt("Found invalid record structure: value past record end", where)
        p += out.value_len
    else:
        out.value_len = -1
    p = _rv32(data, p, rend, &count)
    if p < 0:
        return _varint_error(p, False, where)
    if count < 0:
        _corrupt(f"Found invalid number of record headers {count}", where)
    if count > (rend - p) // 2:  # each header takes at least 2 bytes
        _corrupt(f"Found invalid number of record headers {count}: more than the record "
                 f"holds", where)
    out.header_count = count
    out.headers_pos = p
    for i in range(count):
        p = _rv32(data, p, rend, &hkey_len)
        if p < 0:
            return _varint_error(p, False, where)
        if hkey_len < 0:
            _corrupt("Invalid negative header key size", where)
        if hkey_len > rend - p:
            _corrupt("Found invalid record structure: header key past record end", where)
        p += hkey_len
        p = _rv32(data, p, rend, &hval_len)
        if p < 0:
            return _varint_error(p, False, where)
        if hval_len >= 0:
            if hval_len > rend - p:
                _corrupt("Found invalid record structure: header value past record end",
                         where)
            p += hval_len
    if p != rend:
        _corrupt(f"Invalid record size: expected to read {length} bytes in record payload, "
                 f"but instead read {p - start}", where)
    out.next_pos = p
    return 0


cdef tuple _decode_headers(const uint8_t* data, Py_ssize_t pos, int32_t count):
    """Headers of a record that parse_record already validated."""
    cdef list out = []
    cdef int32_t klen = 0, vlen = 0, i
    cdef Py_ssize_t n
    for i in range(count):
        n = varint_read(data + pos, 5, &klen)
        pos += n
        hkey = PyUnicode_DecodeUTF8(<const char*>data + pos, klen, "surrogateescape")
        pos += klen
        n = varint_read(data + pos, 5, &vlen)
        pos += n
        if vlen >= 0:
            hval = PyBytes_FromStringAndSize(<const char*>data + pos, vlen)
            pos += vlen
        else:
            hval = None
        out.append((hkey, hval))
    return tuple(out)


cdef inline object _bytes_or_none(const uint8_t* data, Py_ssize_t pos, int32_t length):
    if length < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>data + pos, length)


# -- v2 batches ---------------------------------------------------------------------


cdef class RecordBatch:
    """A magic 2 record batch over a buffer, parsed lazily.

    The 61-byte header is decoded on construction; records are decoded only
    when the batch is iterated, and a compressed payload is inflated then
    (bounded by ``max_decompressed_bytes``). The batch keeps a zero-copy view
    of the caller's buffer, so a ``bytearray`` or ``mmap`` under it must not
    shrink while the batch is alive.

    Construction checks only what is needed to read the header safely: the
    magic, that ``batchLength`` covers the header, and that the buffer holds
    the whole batch. :meth:`validate` checks the CRC; iteration checks each
    record's structure. Not thread-safe to iterate concurrently with the
    buffer's owner mutating it; otherwise immutable.
    """

    def __init__(self, buffer, position=0, *,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
        cdef const uint8_t[::1] view = _as_view(buffer)
        self._init(view, check_position(position, view.shape[0]),
                   _limit(max_decompressed_bytes))

    cdef int _init(self, const uint8_t[::1] view, Py_ssize_t position,
                   Py_ssize_t limit) except -1:
        cdef Py_ssize_t avail = view.shape[0] - position
        cdef const uint8_t* p
        if avail < RECORD_BATCH_OVERHEAD:
            _corrupt(f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, only "
                     f"{avail} remain", position)
        p = &view[position]
        self.base_offset = _i64(p)
        self.batch_length = _i32(p + LENGTH_OFFSET)
        self.partition_leader_epoch = _i32(p + PARTITION_LEADER_EPOCH_OFFSET)
        self.magic = <int8_t>p[MAGIC_OFFSET]
        self.crc = ks_load_be32(p + CRC_OFFSET)
        self.attributes = _i16(p + ATTRIBUTES_OFFSET)
        self.last_offset_delta = _i32(p + LAST_OFFSET_DELTA_OFFSET)
        self.first_timestamp = _i64(p + BASE_TIMESTAMP_OFFSET)
        self.max_timestamp = _i64(p + MAX_TIMESTAMP_OFFSET)
        self.producer_id = _i64(p + PRODUCER_ID_OFFSET)
        self.producer_epoch = _i16(p + PRODUCER_EPOCH_OFFSET)
        self.base_sequence = _i32(p + BASE_SEQUENCE_OFFSET)
        self.record_count = _i32(p + RECORDS_COUNT_OFFSET)
        if self.magic != 2:
            _corrupt(f"Unsupported magic byte {self.magic}", position, self.base_offset)
        if self.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            _corrupt(f"Record batch size {LOG_OVERHEAD + <int64_t>self.batch_length} is "
                     f"smaller than the minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                     position, self.base_offset)
        if self.batch_length > avail - LOG_OVERHEAD:
            _corrupt(f"Record batch of {LOG_OVERHEAD + <int64_t>self.batch_length} bytes "
                     f"extends past the end of the buffer ({avail} bytes remain)",
                     position, self.base_offset)
        self._view = view[position:position + LOG_OVERHEAD + self.batch_length]
        self.position = position
        self.max_decompressed_bytes = limit
        return 0

    @property
    def size_in_bytes(self):
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def last_offset(self):
        return _add64(self.base_offset, self.last_offset_delta)

    @property
    def next_offset(self):
        return _add64(self.base_offset, <int64_t>self.last_offset_delta + 1)

    @property
    def compression(self):
        return _codec(self.attributes, 2, self.position)

    @property
    def timestamp_type(self):
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def is_transactional(self):
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self):
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self):
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self):
        return self.first_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self):
        return _last_sequence(self.base_sequence, self.last_offset_delta)

    def compute_crc(self):
        """CRC-32C of bytes [21, end), as stored in a valid batch."""
        return _crc32c(self._view[ATTRIBUTES_OFFSET:])

    def is_valid(self):
        """Kafka's ``isValid``: size >= 61 and the stored CRC matches."""
        return self.compute_crc() == self.crc

    def validate(self):
        """Kafka's ``ensureValid``; raises :class:`InvalidCrcError`."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise InvalidCrcError(
                f"Record batch is corrupt (stored crc = {self.crc}, computed crc = "
                f"{computed})", stored=self.crc, computed=computed,
                position=self.position, offset=self.base_offset)

    def to_bytes(self):
        """The whole entry, 12-byte prefix included."""
        return bytes(self._view)

    def payload(self):
        """The records section as stored (compressed or not), zero-copy."""
        return memoryview(self._view[RECORD_BATCH_OVERHEAD:])

    def _records_data(self):
        cdef int codec = self.attributes & CODEC_MASK
        if codec == 0:
            return self.payload()
        _codec(self.attributes, 2, self.position)
        return _inflate(codec, self.payload(), self.max_decompressed_bytes, 2, self.position)

    def __iter__(self):
        if self.record_count < 0:
            raise CorruptRecordError(f"Found invalid record count {self.record_count}",
                                     position=self.position, offset=self.base_offset)
        return self._records(self._records_data())

    def _records(self, data):
        return _RecordIterator._new(self, data)

    def record_summary(self):
        """What LogValidator needs of the records, decoding no key, value or header.

        Returns ``(count, max_timestamp, index_of_max, min_timestamp, null_keys,
        sequential)``: the records parsed (they must be ``record_count``, with every
        length checked as when iterating); the largest record timestamp
        (``firstTimestamp + delta``) above -1 and the index of the first record holding
        it (-1, -1 if none); the smallest timestamp other than -1 (None if none); how
        many records have a null key; whether the offset deltas are 0, 1, 2, ...
        """
        cdef const uint8_t[::1] view
        cdef const uint8_t* p
        cdef Py_ssize_t pos = 0, end
        cdef int32_t i, n = self.record_count
        cdef RecordSpan span
        cdef int64_t ts, max_ts = -1, min_ts = 0
        cdef int32_t max_index = -1, nulls = 0
        cdef bint have_min = False, sequential = True
        if n < 0:
            raise CorruptRecordError(f"Found invalid record count {self.record_count}",
                                     position=self.position, offset=self.base_offset)
        view = _as_view(self._records_data())
        p = _ptr(view)
        end = view.shape[0]
        for i in range(n):
            if pos >= end:
                raise CorruptRecordError("Incorrect declared batch size, premature EOF reached",
                                         position=self.position, offset=self.base_offset)
            parse_record(p, pos, end, &span, self.position)
            pos = span.next_pos
            ts = _add64(self.first_timestamp, span.ts_delta)
            if ts > max_ts:
                max_ts = ts
                max_index = i
            if ts != -1 and (not have_min or ts < min_ts):
                min_ts = ts
                have_min = True
            if span.key_len < 0:
                nulls += 1
            if span.offset_delta != i:
                sequential = False
        if pos != end:
            raise CorruptRecordError(
                "Incorrect declared batch size, records still remaining in file",
                position=self.position, offset=self.base_offset)
        return n, max_ts, max_index, (min_ts if have_min else None), nulls, sequential

    def __repr__(self):
        return (
            f"RecordBatch(magic=2, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, count={self.record_count}, "
            f"size={self.size_in_bytes}, position={self.position})"
        )


@cython.final
cdef class _RecordIterator:
    """Decodes the records of one v2 batch, one per ``__next__``."""

    cdef const uint8_t[::1] _data
    cdef const uint8_t* _ptr
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _end
    cdef int32_t _remaining
    cdef int64_t _base_offset
    cdef int64_t _base_ts
    cdef int64_t _max_ts
    cdef bint _log_append
    cdef object _ts_type
    cdef Py_ssize_t _where

    @staticmethod
    cdef _RecordIterator _new(RecordBatch batch, object data):
        cdef _RecordIterator it = _RecordIterator.__new__(_RecordIterator)
        it._data = _as_view(data)
        it._ptr = _ptr(it._data)
        it._pos = 0
        it._end = it._data.shape[0]
        it._remaining = batch.record_count
        it._base_offset = batch.base_offset
        it._base_ts = batch.first_timestamp
        it._max_ts = batch.max_timestamp
        it._log_append = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
        it._ts_type = _TS_TYPES[it._log_append]
        it._where = batch.position
        return it

    def __iter__(self):
        return self

    def __next__(self):
        # _remaining is -1 once the iteration has ended, by exhaustion or by an
        # error: like a generator, it then only raises StopIteration
        cdef RecordSpan span
        cdef int64_t ts
        cdef int32_t remaining = self._remaining
        if remaining <= 0:
            self._remaining = -1
            if remaining == 0 and self._pos != self._end:
                raise CorruptRecordError(
                    "Incorrect declared batch size, records still remaining in file",
                    position=self._where, offset=self._base_offset)
            raise StopIteration
        self._remaining = -1
        if self._pos >= self._end:
            raise CorruptRecordError("Incorrect declared batch size, premature EOF reached",
                                     position=self._where, offset=self._base_offset)
        parse_record(self._ptr, self._pos, self._end, &span, self._where)
        self._pos = span.next_pos
        self._remaining = remaining - 1
        ts = self._max_ts if self._log_append else _add64(self._base_ts, span.ts_delta)
        return _new_record(
            _add64(self._base_offset, span.offset_delta), ts, self._ts_type,
            _bytes_or_none(self._ptr, span.key_pos, span.key_len),
            _bytes_or_none(self._ptr, span.value_pos, span.value_len),
            _decode_headers(self._ptr, span.headers_pos, span.header_count)
            if span.header_count else _EMPTY)


# -- legacy messages ------------------------------------------------------------------


cdef class LegacyRecordBatch:
    """A magic 0 or 1 message (a "batch" of one, or a compressed wrapper).

    Exposes the same attributes as :class:`RecordBatch`, with Kafka's values
    for legacy formats: no producer state (-1), leader epoch -1, never
    transactional or control, ``record_count`` None. ``last_offset`` is the
    stored offset; ``base_offset`` of a wrapper is the first inner offset,
    which needs decompression, so it is computed on first use (like Kafka).
    Iterating a wrapper inflates its value and yields the inner messages
    with absolute offsets.
    """

    def __init__(self, buffer, position=0, *,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
        cdef const uint8_t[::1] view = _as_view(buffer)
        self._init(view, check_position(position, view.shape[0]),
                   _limit(max_decompressed_bytes))

    cdef int _init(self, const uint8_t[::1] view, Py_ssize_t position,
                   Py_ssize_t limit) except -1:
        cdef Py_ssize_t avail = view.shape[0] - position
        cdef const uint8_t* p
        cdef int64_t offset
        cdef int32_t size, key_len, value_len
        cdef int magic
        cdef Py_ssize_t pos, end
        if avail < LOG_OVERHEAD + MIN_ENTRY_SIZE:
            _corrupt("legacy message truncated", position)
        p = &view[position]
        offset = _i64(p)
        size = _i32(p + LENGTH_OFFSET)
        magic = p[MAGIC_OFFSET]
        if magic > 1:
            _corrupt(f"Unsupported magic byte {magic}", position, offset)
        if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
            _corrupt(f"Record size {size} is smaller than the minimum record overhead for "
                     f"magic {magic}", position, offset)
        if size > avail - LOG_OVERHEAD:
            _corrupt(f"Message of {LOG_OVERHEAD + <int64_t>size} bytes extends past the end "
                     f"of the buffer", position, offset)
        self.crc = ks_load_be32(p + LEGACY_CRC_OFFSET)
        self.attributes = p[LEGACY_ATTRIBUTES_OFFSET]
        if magic == 0:
            self.timestamp = -1
            pos = LOG_OVERHEAD + LEGACY_HEADER_V0
        else:
            self.timestamp = _i64(p + LEGACY_TIMESTAMP_OFFSET)
            pos = LOG_OVERHEAD + LEGACY_HEADER_V1
        end = LOG_OVERHEAD + size
        # the minimum sizes above guarantee the two 4-byte length fields fit
        key_len = _i32(p + pos)
        pos += 4
        if key_len >= 0:
            if key_len > end - pos - 4:
                _corrupt("message key extends past the message end", position, offset)
            self._key_pos = pos
            self._key_len = key_len
            pos += key_len
        else:
            self._key_pos = pos
            self._key_len = -1
        value_len = _i32(p + pos)
        pos += 4
        if value_len >= 0:
            if value_len > end - pos:
                _corrupt("message value extends past the message end", position, offset)
            self._value_len = value_len
        else:
            self._value_len = -1
        self._value_pos = pos
        self._view = view[position:position + end]
        self.position = position
        self.last_offset = offset
        self.batch_length = size
        self.magic = <int8_t>magic
        self.max_decompressed_bytes = limit
        self._inner = None
        return 0

    @property
    def partition_leader_epoch(self):
        return -1

    @property
    def producer_id(self):
        return -1

    @property
    def producer_epoch(self):
        return -1

    @property
    def base_sequence(self):
        return -1

    @property
    def last_sequence(self):
        return -1

    @property
    def last_offset_delta(self):
        return None

    @property
    def record_count(self):
        return None

    @property
    def is_transactional(self):
        return False

    @property
    def is_control(self):
        return False

    @property
    def has_delete_horizon(self):
        return False

    @property
    def delete_horizon_ms(self):
        return None

    @property
    def size_in_bytes(self):
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def next_offset(self):
        return _add64(self.last_offset, 1)

    @property
    def max_timestamp(self):
        return self.timestamp

    @property
    def first_timestamp(self):
        return self.timestamp

    @property
    def compression(self):
        return _codec(self.attributes, self.magic, self.position)

    @property
    def timestamp_type(self):
        if self.magic == 0:
            return _NO_TIMESTAMP_TYPE
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def key(self):
        return _bytes_or_none(&self._view[0], self._key_pos, self._key_len)

    @property
    def value(self):
        return _bytes_or_none(&self._view[0], self._value_pos, self._value_len)

    @property
    def base_offset(self):
        if self.attributes & CODEC_MASK == 0:
            return self.last_offset
        return self._inner_records()[0].offset

    def compute_crc(self):
        """CRC-32 of bytes [magic, end), as stored in a valid message."""
        return _crc32(self._view[LOG_OVERHEAD + 4:])

    def is_valid(self):
        return self.compute_crc() == self.crc

    def validate(self):
        computed = self.compute_crc()
        if computed != self.crc:
            raise InvalidCrcError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                stored=self.crc, computed=computed, position=self.position,
                offset=self.last_offset)

    def validate_inner(self):
        """Check the CRC of every inner message of a compressed wrapper (Kafka's
        ``LogValidator`` does for legacy compressed input: the wrapper's CRC covers the
        compressed bytes only); an uncompressed message has none. Raises
        :class:`~kafkastore.errors.InvalidCrcError` at the wrapper's position with the
        inner message's offset."""
        cdef LegacyRecordBatch msg
        if self.attributes & CODEC_MASK == 0:
            return
        self._inner_records()
        for msg in self._inner_messages:
            computed = msg.compute_crc()
            if computed != msg.crc:
                raise InvalidCrcError(
                    f"Record is corrupt (stored crc = {msg.crc}, computed crc = {computed}) "
                    f"in an inner message of the compressed message", stored=msg.crc,
                    computed=computed, position=self.position, offset=msg.last_offset)

    def to_bytes(self):
        return bytes(self._view)

    def payload(self):
        """The message value as stored (the compressed stream of a wrapper)."""
        if self._value_len < 0:
            return None
        return memoryview(self._view[self._value_pos:self._value_pos + self._value_len])

    def __iter__(self):
        if self.attributes & CODEC_MASK == 0:
            return iter((_new_record(self.last_offset, self.timestamp, self.timestamp_type,
                                     self.key, self.value, _EMPTY),))
        return iter(self._inner_records())

    cdef list _inner_records(self):
        if self._inner is None:
            self._inner = self._decode_wrapper()
        return self._inner

    cdef list _decode_wrapper(self):
        cdef Py_ssize_t where = self.position
        cdef const uint8_t[::1] data
        cdef Py_ssize_t pos = 0, end
        cdef LegacyRecordBatch msg
        cdef list inner = []
        cdef list out = []
        cdef int64_t base = 0, last_inner
        cdef bint log_append
        codec = self.compression
        payload = self.payload()
        if payload is None:
            _corrupt("compressed message has a null value", where, self.last_offset)
        data = _as_view(_inflate(int(codec), payload, self.max_decompressed_bytes, self.magic,
                                 where))
        end = data.shape[0]
        while pos < end:
            if end - pos < LOG_OVERHEAD + MIN_ENTRY_SIZE:
                _corrupt("truncated inner message in compressed message", where,
                         self.last_offset)
            msg = LegacyRecordBatch.__new__(LegacyRecordBatch)
            try:
                msg._init(data, pos, self.max_decompressed_bytes)
            except CorruptRecordError as err:
                err.position = where
                raise
            if msg.magic != self.magic:
                _corrupt(f"inner message magic {msg.magic} does not match wrapper magic "
                         f"{self.magic}", where, self.last_offset)
            if msg.attributes & CODEC_MASK:
                _corrupt("compressed message contains a compressed inner message", where,
                         self.last_offset)
            inner.append(msg)
            pos += LOG_OVERHEAD + msg.batch_length
        if not inner:
            _corrupt("compressed message has no inner messages", where, self.last_offset)
        self._inner_messages = inner
        if self.magic == 0:
            base = 0  # v0 inner offsets are absolute
        else:
            last_inner = (<LegacyRecordBatch>inner[len(inner) - 1]).last_offset
            if self.last_offset == 0:
                base = 0  # some librdkafka versions leave the wrapper offset at 0
            elif self.last_offset < last_inner:
                _corrupt(f"wrapper offset {self.last_offset} is below its last inner offset "
                         f"{last_inner}", where, self.last_offset)
            else:
                # a hostile inner offset near INT64_MIN overflows the difference
                base = _sub64(self.last_offset, last_inner)
        log_append = self.magic == 1 and (self.attributes & TIMESTAMP_TYPE_MASK)
        for msg in inner:
            if log_append:
                ts, ts_type = self.timestamp, _LOG_APPEND_TIME
            else:
                ts, ts_type = msg.timestamp, msg.timestamp_type
            out.append(_new_record(_add64(base, msg.last_offset), ts, ts_type, msg.key,
                                   msg.value, _EMPTY))
        return out

    def __repr__(self):
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.last_offset}, "
            f"codec={self.attributes & CODEC_MASK}, size={self.size_in_bytes}, "
            f"position={self.position})"
        )


# -- walking a buffer of entries ---------------------------------------------------------


cdef Py_ssize_t _end_of(const uint8_t[::1] view, object start, object end) except -1:
    # compared as Python ints first, so a huge value is a ValueError (or is
    # clamped, for ``end``), never an OverflowError, exactly as in the pure twin
    cdef Py_ssize_t n = view.shape[0]
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise TypeError("start and end must be ints")
    e = n if end is None or end > n else end
    if start < 0 or start > e:
        raise ValueError(f"start {start} is outside [0, {e}]")
    return e


cdef Py_ssize_t _limit(object limit) except? -1:
    # a bound above what an address space holds is no bound at all
    if not isinstance(limit, int):
        raise TypeError(f"max_decompressed_bytes must be an int, not {type(limit).__name__}")
    return min(limit, PY_SSIZE_T_MAX)


cdef object _read_batch(const uint8_t[::1] view, Py_ssize_t position, Py_ssize_t limit):
    cdef Py_ssize_t avail = view.shape[0] - position
    cdef const uint8_t* p
    cdef int32_t size
    cdef int magic
    cdef RecordBatch batch
    cdef LegacyRecordBatch legacy
    if avail < HEADER_SIZE_UP_TO_MAGIC:
        _corrupt("entry header truncated", position)
    p = &view[position]
    size = _i32(p + LENGTH_OFFSET)
    if size < MIN_ENTRY_SIZE:
        _corrupt(f"Record size {size} is smaller than the minimum record overhead "
                 f"({MIN_ENTRY_SIZE})", position, _i64(p))
    magic = p[MAGIC_OFFSET]
    if magic == 2:
        batch = RecordBatch.__new__(RecordBatch)
        batch._init(view, position, limit)
        return batch
    if magic < 2:
        legacy = LegacyRecordBatch.__new__(LegacyRecordBatch)
        legacy._init(view, position, limit)
        return legacy
    _corrupt(f"Unsupported magic byte {magic}", position, _i64(p))


def read_batch(buffer, position=0, *, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
    """The entry at ``position`` as a :class:`RecordBatch` or :class:`LegacyRecordBatch`.

    Raises :class:`CorruptRecordError` when fewer than 17 bytes remain, the
    size field is below 14, the entry is incomplete, or the magic is not 0-2.
    """
    cdef const uint8_t[::1] view = _as_view(buffer)
    return _read_batch(view, check_position(position, view.shape[0]),
                       _limit(max_decompressed_bytes))


def iter_batches(buffer, start=0, end=None, *, bint validate=True,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
    """Yield every entry of ``buffer[start:end]`` as a batch object.

    Follows Kafka's ``FileLogInputStream``: fewer than 18 bytes left, or an
    entry that extends past ``end``, ends the iteration silently (a partial
    tail is what a crash leaves); a size field below 14 or an unknown magic
    raises :class:`CorruptRecordError`. With ``validate`` each batch's CRC is
    checked before it is yielded (:class:`InvalidCrcError`).
    """
    cdef const uint8_t[::1] view = _as_view(buffer)
    cdef Py_ssize_t stop = _end_of(view, start, end)
    return _BatchIterator._new(view[:stop], start, validate, _limit(max_decompressed_bytes))


@cython.final
cdef class _BatchIterator:
    cdef const uint8_t[::1] _view
    cdef Py_ssize_t _pos
    cdef bint _validate
    cdef Py_ssize_t _limit

    @staticmethod
    cdef _BatchIterator _new(const uint8_t[::1] view, Py_ssize_t start, bint validate,
                             Py_ssize_t limit):
        cdef _BatchIterator it = _BatchIterator.__new__(_BatchIterator)
        it._view = view
        it._pos = start
        it._validate = validate
        it._limit = limit
        return it

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t pos = self._pos
        cdef Py_ssize_t end = self._view.shape[0]
        cdef int32_t size
        if end - pos <= HEADER_SIZE_UP_TO_MAGIC:
            raise StopIteration
        size = _i32(&self._view[pos] + LENGTH_OFFSET)
        if size < MIN_ENTRY_SIZE:
            self._pos = end  # a corrupt entry ends the walk
            _corrupt(f"Record size {size} is smaller than the minimum record overhead "
                     f"({MIN_ENTRY_SIZE})", pos)
        if size > end - pos - LOG_OVERHEAD:
            self._pos = end
            raise StopIteration
        self._pos = end  # until the entry proves good
        batch = _read_batch(self._view, pos, self._limit)
        if self._validate:
            batch.validate()
        self._pos = pos + LOG_OVERHEAD + size
        return batch


cdef struct ScanRow:
    int64_t position
    int64_t size
    int8_t magic
    int64_t base_offset
    int64_t last_offset
    int64_t max_timestamp
    int32_t record_count


class BatchScan:
    """Result of :func:`scan_batches`: one row per entry, in numpy columns.

    Columns: ``position`` (int64), ``size`` (int64, 12-byte prefix
    included), ``magic`` (int8), ``base_offset`` (int64; -1 for a compressed
    legacy wrapper, whose first offset needs decompression), ``last_offset``
    (int64), ``max_timestamp`` (int64; -1 for magic 0), ``record_count``
    (int32; -1 for a compressed legacy wrapper).

    ``valid_bytes`` counts the bytes from ``start`` up to the end of the last
    good entry. ``error`` is None when the scan reached ``end`` or stopped at
    a partial tail, otherwise the :class:`CorruptRecordError` that stopped it.
    """

    __slots__ = ("position", "size", "magic", "base_offset", "last_offset",
                 "max_timestamp", "record_count", "valid_bytes", "error", "start", "end")

    def __len__(self):
        return len(self.position)

    @property
    def truncated(self):
        """True when bytes follow the last good entry (partial or corrupt)."""
        return self.start + self.valid_bytes < self.end

    def __repr__(self):
        return (f"BatchScan(entries={len(self)}, valid_bytes={self.valid_bytes}, "
                f"error={self.error!r})")


cdef object _scan_entry(const uint8_t* p, Py_ssize_t pos, int32_t size, bint validate,
                        const uint8_t[::1] view, ScanRow* row):
    """Fill ``row`` for the complete entry at ``p``; return an error or None."""
    cdef int magic = p[MAGIC_OFFSET]
    cdef int64_t offset = _i64(p)
    cdef uint32_t stored
    cdef int attributes
    row.position = pos
    row.size = LOG_OVERHEAD + size
    row.magic = <int8_t>magic
    if magic == 2:
        if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            return CorruptRecordError(
                f"Record batch size {LOG_OVERHEAD + <int64_t>size} is smaller than the "
                f"minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                position=pos, offset=offset)
        stored = ks_load_be32(p + CRC_OFFSET)
        if validate:
            computed = _crc32c(view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + size])
            if computed != stored:
                return InvalidCrcError(
                    f"Record batch is corrupt (stored crc = {stored}, computed crc = "
                    f"{computed})", stored=stored, computed=computed, position=pos,
                    offset=offset)
        row.base_offset = offset
        row.last_offset = _add64(offset, _i32(p + LAST_OFFSET_DELTA_OFFSET))
        row.max_timestamp = _i64(p + MAX_TIMESTAMP_OFFSET)
        row.record_count = _i32(p + RECORDS_COUNT_OFFSET)
        return None
    if magic < 2:
        if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
            return CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead for magic "
                f"{magic}", position=pos, offset=offset)
        stored = ks_load_be32(p + LEGACY_CRC_OFFSET)
        if validate:
            computed = _crc32(view[pos + LOG_OVERHEAD + 4:pos + LOG_OVERHEAD + size])
            if computed != stored:
                return InvalidCrcError(
                    f"Record is corrupt (stored crc = {stored}, computed crc = "
                    f"{computed})", stored=stored, computed=computed, position=pos,
                    offset=offset)
        attributes = p[LEGACY_ATTRIBUTES_OFFSET]
        row.max_timestamp = -1 if magic == 0 else _i64(p + LEGACY_TIMESTAMP_OFFSET)
        row.last_offset = offset
        if attributes & CODEC_MASK:
            row.base_offset = -1
            row.record_count = -1
        else:
            row.base_offset = offset
            row.record_count = 1
        return None
    return CorruptRecordError(f"Unsupported magic byte {magic}", position=pos, offset=offset)


def scan_batches(buffer, start=0, end=None, *, bint validate=True):
    """Walk the entries of ``buffer[start:end]`` reading only their headers.

    Never raises for bad bytes: it stops at the first entry that is
    incomplete (``error`` None) or corrupt (``error`` set) and reports how
    many bytes were good. This is what recovery and index building use.
    With ``validate`` each entry's CRC is checked (CRC-32C for v2, CRC-32
    for v0/v1), as Kafka's ``LogSegment.recover`` does.
    """
    cdef const uint8_t[::1] view = _as_view(buffer)
    cdef Py_ssize_t stop = _end_of(view, start, end)
    cdef Py_ssize_t first = start
    cdef Py_ssize_t pos = first
    cdef Py_ssize_t n = 0, cap = 64, i
    cdef ScanRow* rows = <ScanRow*>PyMem_Malloc(cap * sizeof(ScanRow))
    cdef ScanRow* grown
    cdef const uint8_t* p
    cdef int32_t size
    cdef object error = None
    if rows == NULL:
        raise MemoryError()
    try:
        while stop - pos > HEADER_SIZE_UP_TO_MAGIC:
            p = &view[pos]
            size = _i32(p + LENGTH_OFFSET)
            if size < MIN_ENTRY_SIZE:
                error = CorruptRecordError(
                    f"Record size {size} is smaller than the minimum record overhead "
                    f"({MIN_ENTRY_SIZE})", position=pos, offset=_i64(p))
                break
            if size > stop - pos - LOG_OVERHEAD:
                break
            if n == cap:
                cap *= 2
                grown = <ScanRow*>PyMem_Realloc(rows, cap * sizeof(ScanRow))
                if grown == NULL:
                    raise MemoryError()
                rows = grown
            error = _scan_entry(p, pos, size, validate, view, &rows[n])
            if error is not None:
                break
            n += 1
            pos += LOG_OVERHEAD + size
        scan = BatchScan()
        scan.start = start
        scan.end = stop
        scan.error = error
        position = np.empty(n, dtype=np.int64)
        sizes = np.empty(n, dtype=np.int64)
        magic = np.empty(n, dtype=np.int8)
        base = np.empty(n, dtype=np.int64)
        last = np.empty(n, dtype=np.int64)
        maxts = np.empty(n, dtype=np.int64)
        count = np.empty(n, dtype=np.int32)
        _fill_scan(rows, n, position, sizes, magic, base, last, maxts, count)
        scan.position, scan.size, scan.magic = position, sizes, magic
        scan.base_offset, scan.last_offset = base, last
        scan.max_timestamp, scan.record_count = maxts, count
        scan.valid_bytes = (rows[n - 1].position + rows[n - 1].size - first) if n else 0
        return scan
    finally:
        PyMem_Free(rows)


cdef void _fill_scan(ScanRow* rows, Py_ssize_t n, int64_t[::1] position, int64_t[::1] sizes,
                     int8_t[::1] magic, int64_t[::1] base, int64_t[::1] last,
                     int64_t[::1] maxts, int32_t[::1] count) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        position[i] = rows[i].position
        sizes[i] = rows[i].size
        magic[i] = rows[i].magic
        base[i] = rows[i].base_offset
        last[i] = rows[i].last_offset
        maxts[i] = rows[i].max_timestamp
        count[i] = rows[i].record_count


# -- columnar decode ---------------------------------------------------------------------


def decode_columns(buffer, start=0, end=None, *, bint validate=True,
                   bint include_control=False,
                   max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                   bint headers=False):
    """Decode every record of ``buffer[start:end]`` into numpy columns.

    Returns a dict: ``offset``, ``timestamp`` (int64), ``timestamp_type``
    (int8), ``key_offsets``/``value_offsets`` (int64, n+1 Arrow-style
    offsets into ``key_data``/``value_data``, uint8), ``key_null``/
    ``value_null`` (bool, True where null) and ``header_count`` (int32).
    With ``headers`` it also holds the headers themselves (h of them in
    all): ``header_offsets`` (int64, n+1: record i's headers are entries
    ``header_offsets[i]:header_offsets[i + 1]``), ``header_key_offsets``/
    ``header_value_offsets`` (int64, h+1, into ``header_key_data``/
    ``header_value_data``, uint8: the raw bytes, keys not decoded) and
    ``header_value_null`` (bool, h). Legacy messages have no headers.
    Control batches are skipped unless ``include_control``. Entries are
    walked, checked and rejected as :func:`iter_batches` does, in two
    passes: headers, CRCs of compressed batches, inflation and legacy
    messages first, then each uncompressed batch's CRC and records. When a
    buffer holds several bad entries, the error raised is therefore the
    first one in that order, not necessarily the first in the buffer.
    """
    # Pass 1 walks the headers, checks and inflates compressed payloads and
    # reads legacy messages, so that pass 2 writes into arrays allocated once.
    # An uncompressed batch's CRC is checked in pass 2, right before it is
    # parsed, so its bytes are read from memory once and parsed from cache.
    # The pure twin follows the same order, so both raise the same error first.
    cdef list parts = []
    cdef Py_ssize_t n = 0, data_cap = 0, records_len, k, nparts
    cdef RecordBatch batch, ahead
    for b in iter_batches(buffer, start, end, validate=False,
                          max_decompressed_bytes=max_decompressed_bytes):
        if type(b) is not RecordBatch:
            if validate:
                b.validate()
            recs = list(b)
            parts.append((None, recs))
            n += len(recs)
            for rec in recs:
                data_cap += len(rec.key or b"") + len(rec.value or b"")
            continue
        batch = <RecordBatch>b
        if batch.attributes & CONTROL_MASK and not include_control:
            if validate:
                batch.validate()
            continue
        if batch.record_count < 0:
            raise CorruptRecordError(
                f"Found invalid record count {batch.record_count}",
                position=batch.position, offset=batch.base_offset)
        if batch.attributes & CODEC_MASK:
            if validate:
                batch.validate()
            data = batch._records_data()
            records_len = len(data)
        else:
            data = None
            records_len = batch.batch_length - (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
        # bound the allocation by the bytes present, not the declared count
        if batch.record_count > records_len // MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record count {batch.record_count} exceeds what {records_len} bytes "
                f"can hold", position=batch.position, offset=batch.base_offset)
        parts.append((batch, data))
        n += batch.record_count
        data_cap += records_len
    cols = _Columns(n, data_cap, headers)
    nparts = len(parts)
    for k in range(nparts):
        owner, data = parts[k]
        if owner is None:
            for rec in data:
                cols.add_record(rec)
        else:
            batch = <RecordBatch>owner
            if data is None:
                if validate:
                    batch.validate()
                data = batch.payload()
            # while this batch is parsed from cache, the memory bus would sit
            # idle: pull the next uncompressed batch in, so that its CRC pass
            # reads from cache too instead of waiting on memory
            ahead = None
            if k + 1 < nparts:
                nxt = parts[k + 1]
                if nxt[0] is not None and nxt[1] is None:
                    ahead = <RecordBatch>nxt[0]
            if ahead is not None and ahead._view.shape[0] > 0:
                cols.add_v2(batch, data, &ahead._view[0], ahead._view.shape[0])
            else:
                cols.add_v2(batch, data, NULL, 0)
    return cols.finish()


# -- column memory pool ----------------------------------------------------------------
#
# A fresh multi-megabyte array costs a page fault and a zeroed page per 4 KiB
# the first time it is written: for a million records, about 15 ms of the
# kernel's time, as much as the decoding itself. Decoding segment after
# segment (analytics, the Spark reader) allocates and frees the same sizes
# again and again, so the large column buffers come from a small pool: a
# block whose last array died goes back to the pool with its pages still
# mapped, and the next decode writes into warm memory. Blocks remember the
# column they served, so keys get back key memory and values value memory.
# The pool keeps at most ``_pool_limit`` bytes of *written* pages (256 MiB by
# default; ``set_column_pool_limit`` changes it, 0 disables it) and frees
# everything beyond. All of it runs under the GIL.

cdef Py_ssize_t _POOL_MIN_BLOCK = 1 << 20   # smaller arrays come from numpy as usual
cdef Py_ssize_t _pool_limit = 256 * 1024 * 1024
cdef Py_ssize_t _pool_retained = 0            # written bytes held by pooled blocks
cdef list _pool = []                          # (capacity, touched, role, address)
cdef char* _FORMAT_B = "B"


def set_column_pool_limit(limit):
    """Bound the memory :func:`decode_columns` keeps for reuse; return the old bound.

    ``limit`` counts bytes of pages already written. 0 turns the pool off and
    frees what it holds.
    """
    global _pool_limit
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"pool limit must be a non-negative int, not {limit!r}")
    old = _pool_limit
    _pool_limit = min(limit, PY_SSIZE_T_MAX)
    _pool_trim()
    return old


def _column_pool_retained():
    """Bytes of written pages the pool holds (for tests)."""
    return _pool_retained


cdef void _pool_trim() noexcept:
    global _pool_retained
    cdef size_t address
    while _pool and _pool_retained > _pool_limit:
        capacity, touched, role, address = _pool.pop(0)
        _pool_retained -= touched
        free(<void*>address)


@cython.final
cdef class _PoolBlock:
    """Memory of one large output column; back to the pool when its last view dies."""

    cdef char* data
    cdef Py_ssize_t capacity
    cdef Py_ssize_t touched      # high-water mark of bytes written: pages committed
    cdef object role
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self.shape[0] = self.capacity
        self.strides[0] = 1
        buf.buf = self.data
        buf.obj = self
        buf.len = self.capacity
        buf.readonly = 0
        buf.itemsize = 1
        buf.format = _FORMAT_B
        buf.ndim = 1
        buf.shape = self.shape
        buf.strides = self.strides
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass

    def __dealloc__(self):
        global _pool_retained
        if self.data == NULL:
            return
        if _pool_retained + self.touched <= _pool_limit:
            _pool.append((self.capacity, self.touched, self.role, <size_t>self.data))
            _pool_retained += self.touched
        else:
            free(self.data)
        self.data = NULL


cdef _PoolBlock _pool_get(Py_ssize_t nbytes, object role):
    """A block of at least ``nbytes``: a pooled one that fits, else a new one."""
    global _pool_retained
    cdef _PoolBlock block = _PoolBlock.__new__(_PoolBlock)
    cdef Py_ssize_t i, best = -1, best_capacity = 0, capacity
    cdef bint best_same_role = False, same
    cdef size_t address
    for i in range(len(_pool)):
        capacity = _pool[i][0]
        # fits, and wastes at most half (plus a block) of its address space
        if capacity < nbytes or capacity > 2 * nbytes + _POOL_MIN_BLOCK:
            continue
        same = _pool[i][2] == role
        if best < 0 or (same and not best_same_role) or \
                (same == best_same_role and capacity < best_capacity):
            best, best_capacity, best_same_role = i, capacity, same
    if best >= 0:
        capacity, touched, _, address = _pool.pop(best)
        _pool_retained -= touched
        block.data = <char*>address
        block.capacity = capacity
        block.touched = touched
    else:
        block.data = <char*>malloc(nbytes)
        if block.data == NULL:
            raise MemoryError(f"cannot allocate {nbytes} bytes for a column")
        block.capacity = nbytes
        block.touched = 0
    block.role = role
    return block


cdef object _column(Py_ssize_t n, object dtype, Py_ssize_t itemsize, object role,
                    list blocks):
    """An uninitialised 1-D array of ``n`` items; large ones from the pool."""
    cdef Py_ssize_t nbytes = n * itemsize
    cdef _PoolBlock block
    if nbytes < _POOL_MIN_BLOCK or _pool_limit == 0:
        return np.empty(n, dtype=dtype)
    block = _pool_get(nbytes, role)
    blocks.append(block)
    return np.frombuffer(block, dtype=dtype, count=n)


cdef inline int64_t* _i64_ptr(object array) except NULL:
    cdef int64_t[::1] view = array
    return &view[0]


cdef inline uint8_t* _u8_ptr(object array) except NULL:
    cdef uint8_t[::1] view = array.view(np.uint8)
    return &view[0]


cdef inline Py_ssize_t _headers_at(const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                                   Py_ssize_t* rend, int32_t* count) noexcept nogil:
    """Skip the v2 record at ``pos`` up to its headers.

    Returns where its first header starts, with the record's end in ``rend``
    and its header count in ``count``; -1 where the bytes are not what
    parse_record accepts (the caller then lets parse_record raise). Every
    varint and length is checked against the record's end first.
    """
    cdef int32_t length = 0, n = 0
    cdef int64_t ts_delta = 0
    cdef Py_ssize_t p = _rv32(data, pos, end, &length)
    cdef Py_ssize_t e
    if p < 0 or length <= 0 or length > end - p:
        return -1
    e = p + length
    p = _rv64(data, p + 1, e, &ts_delta)    # past the attributes byte
    if p < 0:
        return -1
    p = _rv32(data, p, e, &n)               # offset delta
    if p < 0:
        return -1
    p = _rv32(data, p, e, &n)               # key length, negative: null
    if p < 0 or n > e - p:
        return -1
    if n > 0:
        p += n
    p = _rv32(data, p, e, &n)               # value length, negative: null
    if p < 0 or n > e - p:
        return -1
    if n > 0:
        p += n
    p = _rv32(data, p, e, &n)               # header count
    if p < 0 or n < 0 or n > (e - p) // 2:
        return -1
    rend[0] = e
    count[0] = n
    return p


@cython.final
cdef class _Columns:
    cdef object offset, timestamp, timestamp_type, header_count
    cdef object key_offsets, value_offsets, key_data, value_data, key_null, value_null
    cdef int64_t[::1] _offset, _timestamp, _key_offsets, _value_offsets
    cdef int8_t[::1] _ts_type
    cdef int32_t[::1] _hcount
    cdef uint8_t[::1] _key_data, _value_data, _key_null, _value_null
    cdef Py_ssize_t n, cap, key_used, value_used
    cdef list _blocks                 # pooled blocks behind the arrays, in creation order
    # the header contents, with headers=True only. Header keys and values are
    # bytes of the records, so their buffers are sized as key_data is. Header
    # entries (h of them) are not counted in pass 1: their arrays start small
    # and grow, never past what the records bytes can hold (hmax); the raw
    # pointers are reloaded whenever an array is replaced.
    cdef bint with_headers
    cdef object header_offsets, header_key_offsets, header_key_data
    cdef object header_value_offsets, header_value_data, header_value_null
    cdef int64_t* _hoff
    cdef int64_t* _hkoff
    cdef int64_t* _hvoff
    cdef uint8_t* _hkdata
    cdef uint8_t* _hvdata
    cdef uint8_t* _hvnull
    cdef Py_ssize_t hcap              # header entries the arrays hold
    cdef Py_ssize_t hmax              # most header entries the records bytes can hold
    cdef Py_ssize_t hdata_cap         # bytes behind header_key_data / header_value_data
    cdef Py_ssize_t hused, hkey_used, hval_used

    def __cinit__(self, Py_ssize_t n, Py_ssize_t data_cap, bint headers=False):
        cdef list blocks = []
        self._blocks = blocks
        self.cap = n
        self.offset = _column(n, np.int64, 8, "offset", blocks)
        self.timestamp = _column(n, np.int64, 8, "timestamp", blocks)
        self.timestamp_type = _column(n, np.int8, 1, "timestamp_type", blocks)
        self.header_count = _column(n, np.int32, 4, "header_count", blocks)
        self.key_offsets = _column(n + 1, np.int64, 8, "key_offsets", blocks)
        self.value_offsets = _column(n + 1, np.int64, 8, "value_offsets", blocks)
        self.key_null = _column(n, np.bool_, 1, "key_null", blocks)
        self.value_null = _column(n, np.bool_, 1, "value_null", blocks)
        # keys and values together never exceed the records bytes they come
        # from; untouched pages of these buffers are never committed
        self.key_data = _column(max(data_cap, 1), np.uint8, 1, "key_data", blocks)
        self.value_data = _column(max(data_cap, 1), np.uint8, 1, "value_data", blocks)
        self._offset = self.offset
        self._timestamp = self.timestamp
        self._ts_type = self.timestamp_type
        self._hcount = self.header_count
        self._key_offsets = self.key_offsets
        self._value_offsets = self.value_offsets
        self._key_null = self.key_null.view(np.uint8)
        self._value_null = self.value_null.view(np.uint8)
        self._key_data = self.key_data
        self._value_data = self.value_data
        self._key_offsets[0] = 0
        self._value_offsets[0] = 0
        self.with_headers = headers
        if headers:
            self.header_offsets = _column(n + 1, np.int64, 8, "header_offsets", blocks)
            self._hoff = _i64_ptr(self.header_offsets)
            self._hoff[0] = 0
            # header keys and values are bytes of the same records too
            self.hdata_cap = max(data_cap, 1)
            self.header_key_data = _column(self.hdata_cap, np.uint8, 1, "header_key_data",
                                           blocks)
            self.header_value_data = _column(self.hdata_cap, np.uint8, 1,
                                             "header_value_data", blocks)
            self._hkdata = _u8_ptr(self.header_key_data)
            self._hvdata = _u8_ptr(self.header_value_data)
            # a header takes at least two bytes (its key and value length varints);
            # start small, then size from what the first records hold
            self.hmax = data_cap // 2
            self._header_entries(min(n, self.hmax, 256))

    cdef int _header_entries(self, Py_ssize_t cap) except -1:
        """(Re)allocate the per-header arrays for ``cap`` entries, keeping those written."""
        cdef Py_ssize_t h = self.hused
        cdef _PoolBlock block
        cdef list blocks = []
        key_offsets = _column(cap + 1, np.int64, 8, "header_key_offsets", blocks)
        value_offsets = _column(cap + 1, np.int64, 8, "header_value_offsets", blocks)
        value_null = _column(max(cap, 1), np.bool_, 1, "header_value_null", blocks)
        if self.header_key_offsets is None:
            _i64_ptr(key_offsets)[0] = 0
            _i64_ptr(value_offsets)[0] = 0
        else:
            memcpy(_i64_ptr(key_offsets), self._hkoff, (h + 1) * 8)
            memcpy(_i64_ptr(value_offsets), self._hvoff, (h + 1) * 8)
            if h:
                memcpy(_u8_ptr(value_null), self._hvnull, h)
            # the old arrays' pooled blocks go back to the pool once they die
            for block in list(self._blocks):
                if block.role in ("header_key_offsets", "header_value_offsets",
                                  "header_value_null"):
                    block.touched = max(block.touched, min(
                        block.capacity, (h + 1) * 8 if block.role != "header_value_null"
                        else h))
                    self._blocks.remove(block)
        self._blocks.extend(blocks)
        self.header_key_offsets = key_offsets
        self.header_value_offsets = value_offsets
        self.header_value_null = value_null
        self._hkoff = _i64_ptr(key_offsets)
        self._hvoff = _i64_ptr(value_offsets)
        self._hvnull = _u8_ptr(value_null)
        self.hcap = cap
        return 0

    cdef int _take_headers(self, const uint8_t* data, Py_ssize_t p, Py_ssize_t rend,
                           int32_t count, Py_ssize_t row, Py_ssize_t end) except -2:
        """Append the ``count`` headers of row ``row`` at ``data[p:rend]``: 0, or -1
        if malformed.

        Every length is checked against ``rend`` before the bytes are
        copied; the record was validated already, so -1 means the caller
        lets the checked parser raise its error. ``data[:end]`` are the
        records (the chunked copies may read that far).
        """
        cdef int32_t k, klen = 0, vlen = 0
        cdef Py_ssize_t j = self.hused, kused = self.hkey_used, vused = self.hval_used
        cdef const uint8_t* lim = data + end
        cdef uint8_t* kdata
        cdef uint8_t* vdata
        cdef uint8_t* vnull
        cdef int64_t* koff
        cdef int64_t* voff
        cdef Py_ssize_t dcap = self.hdata_cap, grow
        cdef double guess
        if count > self.hcap - j:
            # grow to what the records so far say all of them hold, plus an
            # eighth, at least double; bounded by what the bytes can hold
            # (count itself was checked against the bytes left in the record)
            guess = <double>(j + count) * self.cap / (row + 1) * 1.125
            grow = self.hmax if guess >= <double>self.hmax else <Py_ssize_t>guess
            self._header_entries(max(j + count, min(max(2 * self.hcap, grow), self.hmax)))
        # locals: the byte stores below may alias anything, fields would be reloaded
        kdata, vdata, vnull = self._hkdata, self._hvdata, self._hvnull
        koff, voff = self._hkoff, self._hvoff
        for k in range(count):
            p = _rv32(data, p, rend, &klen)
            if p < 0 or klen < 0 or klen > rend - p or klen > dcap - kused:
                return -1
            ks_v2_copy(kdata + kused, kdata + dcap, data + p, lim, klen)
            kused += klen
            p += klen
            p = _rv32(data, p, rend, &vlen)
            if p < 0:
                return -1
            if vlen >= 0:
                if vlen > rend - p or vlen > dcap - vused:
                    return -1
                ks_v2_copy(vdata + vused, vdata + dcap, data + p, lim, vlen)
                vused += vlen
                p += vlen
                vnull[j] = 0
            else:
                vnull[j] = 1
            j += 1
            koff[j] = kused
            voff[j] = vused
        if p != rend:
            return -1
        self.hused = j
        self.hkey_used = kused
        self.hval_used = vused
        return 0

    cdef int _headers_of_run(self, const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                             Py_ssize_t nrec, Py_ssize_t row, Py_ssize_t where) except -1:
        """Headers of the ``nrec`` records at ``data[pos:]``, rows ``row`` on.

        These are records the fast path took (so well formed); each is walked
        again, with every length checked, to copy its headers out.
        """
        cdef Py_ssize_t k, hp, rend = 0
        cdef int32_t count = 0
        cdef RecordSpan span
        for k in range(nrec):
            hp = _headers_at(data, pos, end, &rend, &count)
            if hp < 0 or (hp != rend if count == 0 else
                          self._take_headers(data, hp, rend, count, row, end) < 0):
                parse_record(data, pos, end, &span, where)  # raises the precise error
                raise RuntimeError("decode_columns: the header walk rejected a valid record")
            row += 1
            self._hoff[row] = self.hused
            pos = rend
        return 0

    cdef int add_v2(self, RecordBatch batch, object data, const uint8_t* ahead,
                    Py_ssize_t ahead_len) except -1:
        cdef const uint8_t[::1] view = _as_view(data)
        cdef const uint8_t* ptr = _ptr(view)
        cdef Py_ssize_t pos = 0, end = view.shape[0], i = self.n, run_pos, run_row, taken
        cdef int32_t remaining = batch.record_count
        cdef RecordSpan span
        cdef Py_ssize_t where = batch.position
        cdef ks_cols c
        cdef ks_v2batch b
        if remaining > self.cap - i:  # pass 1 sized the arrays from these same counts
            raise RuntimeError("column arrays smaller than the records counted")
        if remaining <= 0:  # (with no records the arrays may be empty: no [0] to take)
            if pos != end:
                _corrupt("Incorrect declared batch size, records still remaining in file",
                         where, batch.base_offset)
            return 0
        # raw pointers, loaded once: the uint8 stores of the loop may alias
        # anything, so through the memoryviews every store would reload them
        c.offset = &self._offset[0]
        c.timestamp = &self._timestamp[0]
        c.header_count = &self._hcount[0]
        c.key_null = &self._key_null[0]
        c.value_null = &self._value_null[0]
        c.key_offsets = &self._key_offsets[0]
        c.value_offsets = &self._value_offsets[0]
        c.key_data = &self._key_data[0]
        c.value_data = &self._value_data[0]
        c.key_cap = self._key_data.shape[0]
        c.value_cap = self._value_data.shape[0]
        c.key_used = self.key_used
        c.value_used = self.value_used
        c.row = i
        b.base_offset = batch.base_offset
        b.base_timestamp = batch.first_timestamp
        b.max_timestamp = batch.max_timestamp
        b.log_append_time = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
        # prefetch the next batch in equal steps, one per record, so that it
        # has all been requested by the time this batch's last record is read
        b.ahead = ahead
        b.ahead_len = ahead_len if ahead != NULL else 0
        b.ahead_pos = 0
        b.ahead_step = (ahead_len // remaining + 64) & ~(<Py_ssize_t>63)
        # one timestamp type for the whole batch
        memset(&self._ts_type[i], 1 if b.log_append_time else 0, remaining)
        try:
            while True:
                # ordinary records in C; it stops in front of any record it does
                # not take, which the checked parser below handles or rejects
                run_pos = pos
                run_row = c.row
                taken = ks_v2_fast_records(ptr, &pos, end, remaining, &b, &c)
                remaining -= <int32_t>taken
                if self.with_headers and taken:
                    # the fast path only counts headers; copy them out of its run
                    self._headers_of_run(ptr, run_pos, end, taken, run_row, where)
                if remaining == 0:
                    break
                if pos >= end:
                    _corrupt("Incorrect declared batch size, premature EOF reached", where,
                             b.base_offset)
                parse_record(ptr, pos, end, &span, where)
                pos = span.next_pos
                remaining -= 1
                i = c.row
                c.offset[i] = _add64(b.base_offset, span.offset_delta)
                c.timestamp[i] = (b.max_timestamp if b.log_append_time
                                  else _add64(b.base_timestamp, span.ts_delta))
                c.header_count[i] = span.header_count
                # the key and value lie inside this batch's records, which pass 1
                # counted into the data capacity, so the copies stay in bounds
                if span.key_len >= 0:
                    memcpy(c.key_data + c.key_used, ptr + span.key_pos, span.key_len)
                    c.key_used += span.key_len
                    c.key_null[i] = 0
                else:
                    c.key_null[i] = 1
                if span.value_len >= 0:
                    memcpy(c.value_data + c.value_used, ptr + span.value_pos, span.value_len)
                    c.value_used += span.value_len
                    c.value_null[i] = 0
                else:
                    c.value_null[i] = 1
                if self.with_headers:
                    if self._take_headers(ptr, span.headers_pos, span.next_pos,
                                          span.header_count, i, end) < 0:
                        raise RuntimeError(
                            "decode_columns: the header walk rejected a valid record")
                    self._hoff[i + 1] = self.hused
                i += 1
                c.key_offsets[i] = c.key_used
                c.value_offsets[i] = c.value_used
                c.row = i
        finally:
            self.key_used = c.key_used
            self.value_used = c.value_used
            self.n = c.row
        if pos != end:
            _corrupt("Incorrect declared batch size, records still remaining in file",
                     where, b.base_offset)
        return 0

    cdef int add_record(self, Record rec) except -1:
        cdef Py_ssize_t i = self.n
        cdef const uint8_t[::1] b
        self._offset[i] = rec.offset
        self._timestamp[i] = rec.timestamp
        self._ts_type[i] = int(rec.timestamp_type)
        self._hcount[i] = len(rec.headers)
        if rec.key is not None:
            b = rec.key
            if b.shape[0]:
                memcpy(&self._key_data[self.key_used], &b[0], b.shape[0])
            self.key_used += b.shape[0]
            self._key_null[i] = 0
        else:
            self._key_null[i] = 1
        if rec.value is not None:
            b = rec.value
            if b.shape[0]:
                memcpy(&self._value_data[self.value_used], &b[0], b.shape[0])
            self.value_used += b.shape[0]
            self._value_null[i] = 0
        else:
            self._value_null[i] = 1
        if self.with_headers:
            # only legacy messages come this way, and they have no headers
            if rec.headers:
                raise RuntimeError("decode_columns: a legacy record with headers")
            self._hoff[i + 1] = self.hused
        self.n = i + 1
        self._key_offsets[i + 1] = self.key_used
        self._value_offsets[i + 1] = self.value_used
        return 0

    cdef dict finish(self):
        cdef _PoolBlock block
        cdef Py_ssize_t written
        for block in self._blocks:
            # record how much of each block now holds committed pages
            if block.role == "key_data":
                written = self.key_used
            elif block.role == "value_data":
                written = self.value_used
            elif not self.with_headers:
                written = block.capacity
            elif block.role == "header_key_data":
                written = self.hkey_used
            elif block.role == "header_value_data":
                written = self.hval_used
            elif block.role in ("header_key_offsets", "header_value_offsets"):
                written = (self.hused + 1) * 8
            elif block.role == "header_value_null":
                written = self.hused
            else:
                written = block.capacity
            if written > block.touched:
                block.touched = written
        self._blocks = None
        out = {
            "offset": self.offset,
            "timestamp": self.timestamp,
            "timestamp_type": self.timestamp_type,
            "key_offsets": self.key_offsets,
            "key_data": self.key_data[:self.key_used],
            "key_null": self.key_null,
            "value_offsets": self.value_offsets,
            "value_data": self.value_data[:self.value_used],
            "value_null": self.value_null,
            "header_count": self.header_count,
        }
        if self.with_headers:
            out["header_offsets"] = self.header_offsets
            out["header_key_offsets"] = self.header_key_offsets[:self.hused + 1]
            out["header_key_data"] = self.header_key_data[:self.hkey_used]
            out["header_value_offsets"] = self.header_value_offsets[:self.hused + 1]
            out["header_value_data"] = self.header_value_data[:self.hval_used]
            out["header_value_null"] = self.header_value_null[:self.hused]
        return out


# -- writing v2 batches -------------------------------------------------------------------


cdef struct EncItem:
    const char* key
    Py_ssize_t key_len      # -1: null
    const char* value
    Py_ssize_t value_len    # -1: null
    int64_t ts
    int32_t delta
    const char* headers     # pre-encoded header entries
    Py_ssize_t headers_len
    int32_t header_count
    Py_ssize_t size         # record body size, after its length varint


cdef object _INT_BOUNDS = {16: (-(1 << 15), (1 << 15) - 1), 32: (-(1 << 31), (1 << 31) - 1),
                           64: (-(1 << 63), (1 << 63) - 1)}


cdef int _check_attributes(object value) except? -1:
    """Any 16-bit pattern (the field is an int16; Kafka reads it as a short)."""
    if not isinstance(value, int):
        raise TypeError(f"attributes must be an int, not {type(value).__name__}")
    if not -0x8000 <= value <= 0xFFFF:
        raise ValueError(f"attributes {value} do not fit 16 bits")
    return value & 0xFFFF


cdef object _check_int(object value, int bits, str what):
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    lo, hi = _INT_BOUNDS[bits]
    if not lo <= value <= hi:
        raise ValueError(f"{what} {value} is outside the int{bits} range")
    return value


cdef inline int64_t _ts_value(object ts) except? -1:
    cdef int overflow = 0
    cdef long long v
    if not PyLong_Check(ts):
        raise TypeError(f"record timestamp must be an int or None, not {type(ts).__name__}")
    v = PyLong_AsLongLongAndOverflow(ts, &overflow)
    if overflow:
        raise ValueError(f"timestamp {ts} is outside the int64 range")
    return v


cdef object _as_bytes(object obj, str what):
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        raise TypeError(f"record {what} must be bytes-like or None, not str")
    try:
        return bytes(memoryview(obj))
    except TypeError:
        raise TypeError(
            f"record {what} must be bytes-like or None, not {type(obj).__name__}") from None


cdef bytes _encode_headers(object headers, int32_t* count):
    cdef bytearray out = bytearray()
    cdef uint8_t tmp[10]
    cdef Py_ssize_t k
    cdef int32_t n = 0
    for item in headers:
        try:
            hkey, hval = item
        except (TypeError, ValueError):
            raise TypeError("a header is a (key, value) pair") from None
        if isinstance(hkey, str):
            hkey = (<str>hkey).encode("utf-8", "surrogateescape")
        elif hkey is None:
            raise TypeError("header keys cannot be null")
        else:
            hkey = _as_bytes(hkey, "header key")
        hval = _as_bytes(hval, "header value")
        k = uvarint_write(tmp, zigzag32(<int32_t>len(hkey)))
        out += (<char*>tmp)[:k]
        out += hkey
        if hval is None:
            out += b"\x01"  # zig-zag of -1
        else:
            k = uvarint_write(tmp, zigzag32(<int32_t>len(hval)))
            out += (<char*>tmp)[:k]
            out += hval
        n += 1
    count[0] = n
    return bytes(out)


cdef inline Py_ssize_t _len_field(Py_ssize_t length) noexcept nogil:
    # a varint length plus the bytes; null (-1) is the single byte 0x01
    if length < 0:
        return 1
    return uvarint_size(zigzag32(<int32_t>length)) + length


cdef inline Py_ssize_t _write_record(uint8_t* out, EncItem* item, int64_t base_ts) noexcept:
    cdef Py_ssize_t i = uvarint_write(out, zigzag32(<int32_t>item.size))
    out[i] = 0  # attributes
    i += 1
    i += uvarint_write(out + i, zigzag64(<int64_t>(<uint64_t>item.ts - <uint64_t>base_ts)))
    i += uvarint_write(out + i, zigzag32(item.delta))
    if item.key_len < 0:
        out[i] = 1
        i += 1
    else:
        i += uvarint_write(out + i, zigzag32(<int32_t>item.key_len))
        memcpy(out + i, item.key, item.key_len)
        i += item.key_len
    if item.value_len < 0:
        out[i] = 1
        i += 1
    else:
        i += uvarint_write(out + i, zigzag32(<int32_t>item.value_len))
        memcpy(out + i, item.value, item.value_len)
        i += item.value_len
    i += uvarint_write(out + i, zigzag32(item.header_count))
    if item.headers_len:
        memcpy(out + i, item.headers, item.headers_len)
        i += item.headers_len
    return i


cdef inline void _prefetch_record(list seq, Py_ssize_t i, Py_ssize_t n) noexcept:
    # Hide cold-cache latency: the tuple 8 records ahead, and the key and value
    # objects of the tuple 4 ahead (its header is in cache by then).
    cdef PyObject* ahead
    if i + 8 < n:
        ks_prefetch(PyList_GET_ITEM(seq, i + 8))
    if i + 4 < n:
        ahead = PyList_GET_ITEM(seq, i + 4)
        if ahead.ob_type == &PyTuple_Type and Py_SIZE(ahead) >= 2:
            ks_prefetch((<PyTupleObject*>ahead).ob_item[0])
            ks_prefetch((<PyTupleObject*>ahead).ob_item[1])


cdef int _fill_item(EncItem* item, object rec, int64_t default_ts, list keep) except -1:
    """Borrow pointers to one record's parts; ``keep`` holds converted objects."""
    cdef Py_ssize_t n
    cdef object key, value, ts = None, headers = None
    cdef tuple t
    if type(rec) is tuple:
        # typed: the items are read straight from the tuple (no generic getitem, no len())
        t = <tuple>rec
        n = PyTuple_GET_SIZE(t)
        if n < 2 or n > 4:
            raise TypeError("a record tuple is (key, value[, timestamp[, headers]])")
        key = t[0]
        value = t[1]
        if n > 2:
            ts = t[2]
            if n > 3:
                headers = t[3]
    elif type(rec) is list:
        return _fill_item(item, tuple(rec), default_ts, keep)
    elif isinstance(rec, (tuple, list)):
        return _fill_item(item, tuple(rec), default_ts, keep)
    else:
        try:
            key = rec.key
            value = rec.value
        except AttributeError:
            raise TypeError(
                "a record is a (key, value[, timestamp[, headers]]) tuple or an object "
                f"with key and value attributes, not {type(rec).__name__}") from None
        ts = getattr(rec, "timestamp", None)
        headers = getattr(rec, "headers", None)
    if type(key) is not bytes and key is not None:
        key = _as_bytes(key, "key")
        keep.append(key)
    if type(value) is not bytes and value is not None:
        value = _as_bytes(value, "value")
        keep.append(value)
    if key is None:
        item.key = NULL
        item.key_len = -1
    else:
        item.key = PyBytes_AS_STRING(key)
        item.key_len = PyBytes_GET_SIZE(key)
    if value is None:
        item.value = NULL
        item.value_len = -1
    else:
        item.value = PyBytes_AS_STRING(value)
        item.value_len = PyBytes_GET_SIZE(value)
    item.ts = default_ts if ts is None else _ts_value(ts)
    if headers:
        encoded = _encode_headers(headers, &item.header_count)
        keep.append(encoded)
        item.headers = PyBytes_AS_STRING(encoded)
        item.headers_len = PyBytes_GET_SIZE(encoded)
    else:
        item.header_count = 0
        item.headers = NULL
        item.headers_len = 0
    return 0


def encode_batch_v2(records, base_offset=0, partition_leader_epoch=-1, attributes=0,
                    producer_id=-1, producer_epoch=-1, base_sequence=-1, default_timestamp=-1,
                    max_timestamp=None, last_offset_delta=None, offsets=None,
                    delete_horizon_ms=None, compress=None):
    """Build one magic 2 batch; return its bytes, CRC-32C included.

    ``records`` items are ``(key, value[, timestamp[, headers]])`` tuples or
    objects with ``key``/``value`` (and optional ``timestamp``/``headers``)
    attributes, such as a decoded :class:`Record`. A record without a
    timestamp gets ``default_timestamp``. ``attributes`` carries the codec,
    timestamp type, transactional and control bits; bit 6 is set when
    ``delete_horizon_ms`` is given, and then ``baseTimestamp`` is the
    horizon. ``offsets`` optionally gives each record's absolute offset
    (strictly increasing, within int32 of ``base_offset``), as a compacted
    batch keeps; ``last_offset_delta`` may then exceed the last record's.
    ``max_timestamp`` overrides the computed maximum (used for
    LogAppendTime). ``compress(view) -> bytes`` compresses the records
    section when the codec bits are not 0.
    """
    cdef int64_t c_base_offset = _check_int(base_offset, 64, "base offset")
    cdef int32_t c_epoch = _check_int(partition_leader_epoch, 32, "partition leader epoch")
    cdef int c_attributes = _check_attributes(attributes)
    cdef int64_t c_pid = _check_int(producer_id, 64, "producer id")
    cdef int16_t c_pepoch = _check_int(producer_epoch, 16, "producer epoch")
    cdef int32_t c_seq = _check_int(base_sequence, 32, "base sequence")
    cdef int64_t c_default_ts = _check_int(default_timestamp, 64, "timestamp")
    if max_timestamp is not None:
        _check_int(max_timestamp, 64, "max timestamp")
    if last_offset_delta is not None:
        _check_int(last_offset_delta, 32, "last offset delta")
    if delete_horizon_ms is not None:
        _check_int(delete_horizon_ms, 64, "delete horizon")
    cdef list seq = records if type(records) is list else list(records)
    cdef Py_ssize_t n = len(seq), i
    cdef list offs = None
    cdef list keep = []
    cdef EncItem* items
    cdef EncItem* item
    cdef int64_t base_ts, max_ts, ts_delta
    cdef int64_t delta = -1, prev = -1, last_delta
    cdef Py_ssize_t body = 0, total, w
    cdef uint8_t* out
    cdef bytes result
    if offsets is not None:
        offs = list(offsets)
        if len(offs) != n:
            raise ValueError(f"{len(offs)} offsets given for {n} records")
    c_attributes &= 0x3F  # bit 6 is ours to set; bits 7-15 are unused and written as 0
    if delete_horizon_ms is not None:
        c_attributes |= DELETE_HORIZON_MASK
    items = <EncItem*>PyMem_Malloc((n if n else 1) * sizeof(EncItem))
    if items == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            item = &items[i]
            _prefetch_record(seq, i, n)
            _fill_item(item, seq[i], c_default_ts, keep)
            if offs is None:
                delta = i
            else:
                _check_int(offs[i], 64, "offset")
                d = offs[i] - base_offset
                if not 0 <= d <= INT32_MAX_ or d <= prev:
                    raise ValueError(
                        f"offset {offs[i]} must be above the previous one and within "
                        f"int32 of base offset {base_offset}")
                delta = d
            item.delta = <int32_t>delta
            prev = delta
        if n:
            base_ts = items[0].ts if delete_horizon_ms is None else delete_horizon_ms
            if max_timestamp is None:
                max_ts = items[0].ts
                for i in range(1, n):
                    if items[i].ts > max_ts:
                        max_ts = items[i].ts
            else:
                max_ts = max_timestamp
            last_delta = prev
        else:
            # Kafka's writeEmptyHeader: no first timestamp, the max timestamp kept
            max_ts = -1 if max_timestamp is None else max_timestamp
            base_ts = -1 if delete_horizon_ms is None else delete_horizon_ms
            last_delta = 0
        if last_offset_delta is not None:
            if not last_delta <= last_offset_delta <= INT32_MAX_:
                raise ValueError(
                    f"last offset delta {last_offset_delta} is below the last record's "
                    f"delta {last_delta} or above int32")
            last_delta = last_offset_delta
        for i in range(n):
            item = &items[i]
            ts_delta = <int64_t>(<uint64_t>item.ts - <uint64_t>base_ts)
            if ((item.ts ^ base_ts) & (item.ts ^ ts_delta)) < 0:  # the subtraction overflowed
                raise ValueError(
                    f"timestamp {item.ts} is too far from the base timestamp {base_ts}")
            item.size = (1 + uvarint_size(zigzag64(ts_delta))
                         + uvarint_size(zigzag32(item.delta))
                         + _len_field(item.key_len) + _len_field(item.value_len)
                         + uvarint_size(zigzag32(item.header_count)) + item.headers_len)
            if item.size > INT32_MAX_:
                raise RecordTooLargeError("record does not fit Kafka's int32 size field",
                                          limit=INT32_MAX_)
            body += uvarint_size(zigzag32(<int32_t>item.size)) + item.size
        codec = c_attributes & CODEC_MASK
        if codec == 0:
            total = RECORD_BATCH_OVERHEAD + body
            if total - LOG_OVERHEAD > INT32_MAX_:
                raise RecordTooLargeError(
                    f"batch of {total} bytes does not fit Kafka's int32 size",
                    limit=<int64_t>INT32_MAX_ + LOG_OVERHEAD)
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t*>PyBytes_AS_STRING(result)
            w = RECORD_BATCH_OVERHEAD
            for i in range(n):
                w += _write_record(out + w, &items[i], base_ts)
        else:
            if compress is None:
                raise ValueError("a compressed batch needs a compress function")
            raw = PyBytes_FromStringAndSize(NULL, body)
            out = <uint8_t*>PyBytes_AS_STRING(raw)
            w = 0
            for i in range(n):
                w += _write_record(out + w, &items[i], base_ts)
            compressed = compress(memoryview(raw))
            del raw
            clen = len(compressed)
            total = RECORD_BATCH_OVERHEAD + clen
            if total - LOG_OVERHEAD > INT32_MAX_:
                raise RecordTooLargeError(
                    f"batch of {total} bytes does not fit Kafka's int32 size",
                    limit=<int64_t>INT32_MAX_ + LOG_OVERHEAD)
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t*>PyBytes_AS_STRING(result)
            _copy_into(out + RECORD_BATCH_OVERHEAD, compressed, clen)
    finally:
        PyMem_Free(items)
    ks_store_be64(out, <uint64_t>c_base_offset)
    ks_store_be32(out + LENGTH_OFFSET, <uint32_t>(total - LOG_OVERHEAD))
    ks_store_be32(out + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>c_epoch)
    out[MAGIC_OFFSET] = 2
    ks_store_be16(out + ATTRIBUTES_OFFSET, <uint16_t>c_attributes)
    ks_store_be32(out + LAST_OFFSET_DELTA_OFFSET, <uint32_t>last_delta)
    ks_store_be64(out + BASE_TIMESTAMP_OFFSET, <uint64_t>base_ts)
    ks_store_be64(out + MAX_TIMESTAMP_OFFSET, <uint64_t>max_ts)
    ks_store_be64(out + PRODUCER_ID_OFFSET, <uint64_t>c_pid)
    ks_store_be16(out + PRODUCER_EPOCH_OFFSET, <uint16_t>c_pepoch)
    ks_store_be32(out + BASE_SEQUENCE_OFFSET, <uint32_t>c_seq)
    ks_store_be32(out + RECORDS_COUNT_OFFSET, <uint32_t>n)
    crc = _crc32c(memoryview(result)[ATTRIBUTES_OFFSET:])
    ks_store_be32(out + CRC_OFFSET, <uint32_t>crc)
    return result


cdef int _copy_into(uint8_t* dest, object src, Py_ssize_t n) except -1:
    cdef const uint8_t[::1] view = _as_view(src)
    if n:
        memcpy(dest, &view[0], n)
    return 0
