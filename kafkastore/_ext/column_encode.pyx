"""RecordBatch v2 encoding straight from Arrow-style columns (compiled kernel).

Twin of ``kafkastore/_pure/column_encode.py``, which documents the input layout, the
batching rule and the order of the checks, and is the oracle this kernel is tested
against: same name, same signature, same bytes, same exceptions and messages.

How. The arguments are checked in Python (a handful of objects per call), then every
buffer is pinned with ``PyObject_GetBuffer`` and two C loops run without the GIL and
without a Python object per record: ``plan_column_batches`` checks every record's spans
(in the order the twin reports them) and splits the records into batches, then
``write_column_records`` copies keys, values and headers into the output, which is one
``bytes`` object of the exact final size when uncompressed (one ``bytes`` per batch is
handed to ``compress`` otherwise). CRC-32C is ``crc32c.crc32c`` over each batch, as in
``record_batch.encode_batch_v2``.

Safety. The caller's arrays are only pinned, not copied, so another thread (or the
``compress`` callback) could rewrite them between the two loops. The writer therefore
checks every offset again before it reads and every length against the space the plan
gave the record before it writes; if the columns no longer match the plan it stops and
RuntimeError is raised. (The twin reads the arrays once, so it cannot notice: the one
place where the two may differ, and only for callers that mutate their input mid-call.)
"""

from cpython.buffer cimport (PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer,
                             PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

from kafkastore._ext.consts cimport (ATTRIBUTES_OFFSET, BASE_SEQUENCE_OFFSET,
                                     BASE_TIMESTAMP_OFFSET, CODEC_MASK, CRC_OFFSET,
                                     LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD,
                                     MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET,
                                     PARTITION_LEADER_EPOCH_OFFSET, PRODUCER_EPOCH_OFFSET,
                                     PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD,
                                     RECORDS_COUNT_OFFSET)
from kafkastore._ext.debug cimport KS_DEBUG
from kafkastore._ext.endian cimport ks_store_be16, ks_store_be32, ks_store_be64
from kafkastore._ext.varint cimport uvarint_size, uvarint_write, zigzag32, zigzag64

import crc32c
import numpy as np

from kafkastore.errors import RecordTooLargeError

__all__ = ["encode_columns"]

cdef enum:
    # error codes of the planning loop (ColumnError.code)
    _E_ROW = 1          # row index outside 0 .. n-1
    _E_DECREASE = 2     # offsets decrease
    _E_OUTSIDE = 3      # span outside the data
    _E_LONG = 4         # length above int32
    _E_HDECREASE = 5    # header offsets decrease
    _E_HOUTSIDE = 6     # header range outside the entries
    _E_HCOUNT = 7       # more headers than int32
    _E_TOO_LARGE = 8    # record above Kafka's int32 size
    _E_TS = 9           # timestamp delta outside int64
    _E_NOMEM = 10
    # columns (ColumnError.what)
    _W_KEY = 0
    _W_VALUE = 1
    _W_HKEY = 2
    _W_HVALUE = 3

cdef int64_t INT32_MAX_ = 2147483647
cdef int64_t _CRC_CHUNK = 512 * 1024   # bytes written between two rounds of CRCs
cdef int64_t INT64_MAX_ = 9223372036854775807
cdef int64_t INT64_MIN_ = -INT64_MAX_ - 1
cdef tuple _COLUMN = ("keys", "values", "header key", "header value")   # as the arguments
cdef tuple _ENTRY = ("key", "value", "header key", "header value")
cdef uint8_t _EMPTY[1]          # the data of a None buffer: never read, never NULL
cdef object _crc32c = crc32c.crc32c
cdef str _HEADERS_FORM = ("headers must be None or a 6-tuple (header_offsets, key_offsets, "
                          "key_data, value_offsets, value_data, value_valid)")
cdef str _CHANGED = ("the columns changed while they were being encoded (another thread or "
                     "the compress callback wrote to them)")


# -- the loops ------------------------------------------------------------------------------


cdef inline int64_t _at(const char* p, bint wide, Py_ssize_t i) noexcept nogil:
    if wide:
        return (<const int64_t*>p)[i]
    return (<const int32_t*>p)[i]


cdef inline int _span(const BinaryColumn* col, int64_t i, int64_t* start,
                      int64_t* end) noexcept nogil:
    """0, or the _E_* code of what is wrong with entry ``i``'s offsets (``i < entries``)."""
    cdef int64_t s = _at(col.offsets, col.wide, i)
    cdef int64_t e = _at(col.offsets, col.wide, i + 1)
    start[0] = s
    end[0] = e
    if e < s:
        return _E_DECREASE
    if s < 0 or e > col.size:
        return _E_OUTSIDE
    if e - s > INT32_MAX_:
        return _E_LONG
    return 0


cdef inline int64_t _field(int64_t length) noexcept nogil:
    # a varint length plus the bytes; the caller guarantees 0 <= length <= INT32_MAX
    return uvarint_size(zigzag32(<int32_t>length)) + length


cdef inline bint _present(const BinaryColumn* col, int64_t i) noexcept nogil:
    return col.valid == NULL or col.valid[i] != 0


cdef int _fail(ColumnInput* c, int code, int what, Py_ssize_t pos, int64_t row, int64_t entry,
               int64_t a, int64_t b, int64_t size) noexcept nogil:
    c.err.code = code
    c.err.what = what
    c.err.pos = pos
    c.err.row = row
    c.err.entry = entry
    c.err.a = a
    c.err.b = b
    c.err.size = size
    return -1


cdef ColumnBatch* _open_batch(ColumnInput* c, Py_ssize_t p, int64_t ts) noexcept nogil:
    """Append an empty batch starting at position ``p``; NULL when out of memory."""
    cdef ColumnBatch* grown
    cdef ColumnBatch* b
    cdef Py_ssize_t cap
    if c.nbatches == c.cap_batches:
        cap = c.cap_batches * 2 if c.cap_batches else 16
        grown = <ColumnBatch*>realloc(c.batches, cap * sizeof(ColumnBatch))
        if grown == NULL:
            return NULL
        c.batches = grown
        c.cap_batches = cap
    b = &c.batches[c.nbatches]
    c.nbatches += 1
    b.start = p
    b.count = 0
    b.body = 0
    b.base_ts = ts
    b.max_ts = ts
    return b


cdef int plan_column_batches(ColumnInput* c) noexcept nogil:
    cdef Py_ssize_t p
    cdef int64_t row, s = 0, e = 0, h0, h1, j, payload, ts, delta, size, whole
    cdef int code
    cdef ColumnBatch* cur = NULL
    for p in range(c.m):
        row = p if c.rows == NULL else _at(c.rows, c.rows_wide, p)
        if row < 0 or row >= c.n:
            return _fail(c, _E_ROW, 0, p, row, 0, 0, 0, c.n)
        # -- the record's spans, each checked before it is used
        if c.has_keys and _present(&c.key, row):
            code = _span(&c.key, row, &s, &e)
            if code:
                return _fail(c, code, _W_KEY, p, row, 0, s, e, c.key.size)
            payload = _field(e - s)
        else:
            payload = 1
        if _present(&c.value, row):
            code = _span(&c.value, row, &s, &e)
            if code:
                return _fail(c, code, _W_VALUE, p, row, 0, s, e, c.value.size)
            payload += _field(e - s)
        else:
            payload += 1
        if payload > INT32_MAX_:
            return _fail(c, _E_TOO_LARGE, 0, p, row, 0, 0, 0, 0)
        if c.has_headers:
            h0 = _at(c.hoffs, c.hoffs_wide, row)
            h1 = _at(c.hoffs, c.hoffs_wide, row + 1)
            if h1 < h0:
                return _fail(c, _E_HDECREASE, 0, p, row, 0, h0, h1, 0)
            if h0 < 0 or h1 > c.hkey.entries:
                return _fail(c, _E_HOUTSIDE, 0, p, row, 0, h0, h1, c.hkey.entries)
            if h1 - h0 > INT32_MAX_:
                return _fail(c, _E_HCOUNT, 0, p, row, 0, h0, h1, 0)
            payload += uvarint_size(zigzag32(<int32_t>(h1 - h0)))
            j = h0
            while j < h1:
                code = _span(&c.hkey, j, &s, &e)
                if code:
                    return _fail(c, code, _W_HKEY, p, row, j, s, e, c.hkey.size)
                payload += _field(e - s)
                if _present(&c.hvalue, j):
                    code = _span(&c.hvalue, j, &s, &e)
                    if code:
                        return _fail(c, code, _W_HVALUE, p, row, j, s, e, c.hvalue.size)
                    payload += _field(e - s)
                else:
                    payload += 1
                if payload > INT32_MAX_:
                    return _fail(c, _E_TOO_LARGE, 0, p, row, 0, 0, 0, 0)
                j += 1
        else:
            payload += 1
        if payload > INT32_MAX_:
            return _fail(c, _E_TOO_LARGE, 0, p, row, 0, 0, 0, 0)
        c.payload[p] = payload
        # -- its batch
        ts = c.default_ts if c.ts == NULL else c.ts[row]
        if cur == NULL or cur.count == c.max_records:
            cur = _open_batch(c, p, ts)
            if cur == NULL:
                return _fail(c, _E_NOMEM, 0, p, row, 0, 0, 0, 0)
        delta = <int64_t>(<uint64_t>ts - <uint64_t>cur.base_ts)
        if ((ts ^ cur.base_ts) & (ts ^ delta)) < 0:  # the subtraction overflowed
            return _fail(c, _E_TS, 0, p, row, 0, ts, cur.base_ts, 0)
        size = (1 + uvarint_size(zigzag64(delta)) + uvarint_size(zigzag32(<int32_t>cur.count))
                + payload)
        whole = uvarint_size(zigzag64(size)) + size
        if cur.count and (size > INT32_MAX_ or cur.body + whole > c.max_bytes):
            # close the batch; the record opens the next one with both deltas 0
            cur = _open_batch(c, p, ts)
            if cur == NULL:
                return _fail(c, _E_NOMEM, 0, p, row, 0, 0, 0, 0)
            size = 3 + payload
            whole = uvarint_size(zigzag64(size)) + size
        if size > INT32_MAX_:
            return _fail(c, _E_TOO_LARGE, 0, p, row, 0, 0, 0, 0)
        cur.count += 1
        cur.body += whole
        if ts > cur.max_ts:
            cur.max_ts = ts
    return 0


cdef inline int64_t _put(const BinaryColumn* col, int64_t i, bint present, uint8_t* out,
                         int64_t w, int64_t limit) noexcept nogil:
    """Write entry ``i`` (its varint length and bytes, or null) at ``out + w`` without
    passing ``out + limit``; the new ``w``, or -1 if the entry is not what was planned."""
    cdef int64_t s, e, length
    if not present or not _present(col, i):
        if w >= limit:
            return -1
        out[w] = 1   # zig-zag of -1
        return w + 1
    s = _at(col.offsets, col.wide, i)
    e = _at(col.offsets, col.wide, i + 1)
    if e < s or s < 0 or e > col.size or e - s > INT32_MAX_:
        return -1
    length = e - s
    if w + _field(length) > limit:
        return -1
    w += uvarint_write(out + w, zigzag32(<int32_t>length))
    if length:
        memcpy(out + w, col.data + s, <size_t>length)
    return w + length


cdef int64_t write_column_records(const ColumnInput* c, const ColumnBatch* b,
                                  uint8_t* out) noexcept nogil:
    cdef Py_ssize_t k, p
    cdef int64_t w = 0, rec_end, row, ts, delta, size, h0, h1, j
    for k in range(b.count):
        p = b.start + k
        row = p if c.rows == NULL else _at(c.rows, c.rows_wide, p)
        if row < 0 or row >= c.n:
            return -1
        ts = c.default_ts if c.ts == NULL else c.ts[row]
        delta = <int64_t>(<uint64_t>ts - <uint64_t>b.base_ts)
        size = (1 + uvarint_size(zigzag64(delta)) + uvarint_size(zigzag32(<int32_t>k))
                + c.payload[p])
        if size > INT32_MAX_:
            return -1
        rec_end = w + uvarint_size(zigzag64(size)) + size
        if rec_end > b.body:
            return -1
        w += uvarint_write(out + w, zigzag32(<int32_t>size))
        out[w] = 0   # attributes
        w += 1
        w += uvarint_write(out + w, zigzag64(delta))
        w += uvarint_write(out + w, zigzag32(<int32_t>k))
        # what follows is c.payload[p] bytes by the plan; every write is bounded by rec_end
        w = _put(&c.key, row, c.has_keys, out, w, rec_end)
        if w < 0:
            return -1
        w = _put(&c.value, row, True, out, w, rec_end)
        if w < 0:
            return -1
        if c.has_headers:
            h0 = _at(c.hoffs, c.hoffs_wide, row)
            h1 = _at(c.hoffs, c.hoffs_wide, row + 1)
            if h1 < h0 or h0 < 0 or h1 > c.hkey.entries or h1 - h0 > INT32_MAX_:
                return -1
            if w + uvarint_size(zigzag32(<int32_t>(h1 - h0))) > rec_end:
                return -1
            w += uvarint_write(out + w, zigzag32(<int32_t>(h1 - h0)))
            j = h0
            while j < h1:
                w = _put(&c.hkey, j, True, out, w, rec_end)
                if w < 0:
                    return -1
                w = _put(&c.hvalue, j, True, out, w, rec_end)
                if w < 0:
                    return -1
                j += 1
        else:
            if w >= rec_end:
                return -1
            out[w] = 0   # no headers
            w += 1
        if w != rec_end:
            return -1
    if w != b.body:
        return -1
    return w


cdef struct _HeaderFields:
    int64_t first_offset
    int32_t epoch
    uint16_t attributes
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence


cdef inline void _write_header(uint8_t* out, const ColumnBatch* b, int64_t length,
                               const _HeaderFields* f) noexcept nogil:
    """The 61-byte v2 header of ``b`` with a zero CRC; ``length`` is its batchLength."""
    cdef int32_t seq = f.base_sequence
    if seq != -1:
        # Kafka's incrementSequence: past 2**31 - 1 the sequence wraps to 0
        seq = <int32_t>((<int64_t>seq + b.start) & 0x7FFFFFFF)
    ks_store_be64(out, <uint64_t>(f.first_offset + b.start))
    ks_store_be32(out + LENGTH_OFFSET, <uint32_t>length)
    ks_store_be32(out + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>f.epoch)
    out[MAGIC_OFFSET] = 2
    ks_store_be32(out + CRC_OFFSET, 0)
    ks_store_be16(out + ATTRIBUTES_OFFSET, f.attributes)
    ks_store_be32(out + LAST_OFFSET_DELTA_OFFSET, <uint32_t>(b.count - 1))
    ks_store_be64(out + BASE_TIMESTAMP_OFFSET, <uint64_t>b.base_ts)
    ks_store_be64(out + MAX_TIMESTAMP_OFFSET, <uint64_t>b.max_ts)
    ks_store_be64(out + PRODUCER_ID_OFFSET, <uint64_t>f.producer_id)
    ks_store_be16(out + PRODUCER_EPOCH_OFFSET, <uint16_t>f.producer_epoch)
    ks_store_be32(out + BASE_SEQUENCE_OFFSET, <uint32_t>seq)
    ks_store_be32(out + RECORDS_COUNT_OFFSET, <uint32_t>b.count)


# -- arguments (the twin's checks, message for message) -------------------------------------


cdef object _int(object value, object lo, object hi, str what):
    try:
        v = PyNumber_Index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{what} must be between {lo} and {hi}, not {v}")
    return v


cdef str _describe(object obj):
    if isinstance(obj, np.ndarray):
        return f"a {obj.ndim}-D {obj.dtype} array"
    return type(obj).__name__


cdef object _int_array(object obj, str what, bint wide_only=False):
    """A 1-D C-contiguous native-order numpy int32/int64 (int64 only if ``wide_only``)."""
    if not (isinstance(obj, np.ndarray) and obj.ndim == 1 and obj.dtype.kind == "i"
            and (obj.dtype.itemsize == 8 or (obj.dtype.itemsize == 4 and not wide_only))):
        kinds = "int64" if wide_only else "int32 or int64"
        raise TypeError(f"{what} must be a 1-D numpy {kinds} array, not {_describe(obj)}")
    return np.ascontiguousarray(obj, dtype=obj.dtype.newbyteorder("="))


cdef object _bool_array(object obj, Py_ssize_t count, str what):
    if obj is None:
        return None
    if not (isinstance(obj, np.ndarray) and obj.ndim == 1 and obj.dtype.kind == "b"):
        raise TypeError(f"{what} must be None or a 1-D numpy bool array, not {_describe(obj)}")
    if obj.shape[0] != count:
        raise ValueError(f"{what} holds {obj.shape[0]} entries, not {count}")
    return np.ascontiguousarray(obj)


cdef object _offsets(object obj, Py_ssize_t count, str what, str rows_of):
    offsets = _int_array(obj, f"{what} offsets")
    if offsets.shape[0] != count + 1:
        raise ValueError(f"{what} offsets hold {offsets.shape[0]} entries, not {count + 1} "
                         f"(n + 1 for the {count} {rows_of})")
    return offsets


cdef enum:
    _MAX_PINS = 16     # encode_columns pins at most 14 buffers


cdef class _Pins:
    """The buffers one call reads, pinned until it returns."""
    cdef Py_buffer views[_MAX_PINS]
    cdef int count

    cdef Py_buffer* _next(self) except NULL:
        if self.count == _MAX_PINS:
            raise RuntimeError("column_encode: too many buffers pinned")
        return &self.views[self.count]

    cdef const char* array(self, object arr) except NULL:
        """The data of a numpy array already checked to be C-contiguous."""
        cdef Py_buffer* view = self._next()
        PyObject_GetBuffer(arr, view, PyBUF_SIMPLE)
        self.count += 1
        return <const char*>view.buf if view.len else <const char*>_EMPTY

    cdef int data(self, object obj, str what, BinaryColumn* col) except -1:
        """Pin the bytes of ``obj`` (None: no bytes) as ``col``'s data."""
        cdef Py_buffer* view = self._next()
        if obj is None:
            col.data = _EMPTY
            col.size = 0
            return 0
        if not PyObject_CheckBuffer(obj):
            raise TypeError(f"{what} must be a bytes-like object, not {type(obj).__name__}")
        try:
            PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
        except (BufferError, ValueError) as exc:
            # exporters differ (memoryview: BufferError, older numpy: ValueError)
            raise BufferError(f"{what} must be a C-contiguous buffer") from exc
        self.count += 1
        col.data = <const uint8_t*>view.buf if view.len else _EMPTY
        col.size = view.len
        return 0

    def __dealloc__(self):
        while self.count:
            self.count -= 1
            PyBuffer_Release(&self.views[self.count])


cdef int _binary(_Pins pins, object col, str what, BinaryColumn* out,
                 Py_ssize_t n) except -1:
    """Check and pin an ``(offsets, data, valid)`` triple; ``n`` -1: this column decides
    the number of rows (``out.entries``)."""
    if not (isinstance(col, (tuple, list)) and len(col) == 3):
        raise TypeError(f"{what} must be an (offsets, data, valid) triple, not {_describe(col)}")
    offsets, data, valid = col
    if n < 0:
        offsets = _int_array(offsets, f"{what} offsets")
        if offsets.shape[0] == 0:
            raise ValueError(f"{what} offsets must hold n + 1 entries for n rows, not 0")
        n = offsets.shape[0] - 1
    else:
        offsets = _offsets(offsets, n, what, "rows of values")
    out.entries = n
    out.wide = offsets.dtype.itemsize == 8
    out.offsets = pins.array(offsets)
    pins.data(data, f"{what} data", out)
    valid = _bool_array(valid, n, f"{what} valid")
    out.valid = NULL
    if valid is not None:
        out.valid = <const uint8_t*>pins.array(valid)
    return 0


cdef object _plan_error(ColumnInput* c):
    cdef ColumnError* e = &c.err
    cdef str col = _COLUMN[e.what]
    cdef str where = (f"header {e.entry} of row {e.row}" if e.what >= _W_HKEY
                      else f"row {e.row}")
    if e.code == _E_ROW:
        return IndexError(f"rows[{e.pos}] = {e.row} is outside the {e.size} rows")
    if e.code == _E_DECREASE:
        return ValueError(f"{col} offsets decrease at {where}: {e.a} then {e.b}")
    if e.code == _E_OUTSIDE:
        return ValueError(f"{col} offsets of {where} span [{e.a}, {e.b}), outside the {e.size} "
                          f"bytes of {col} data")
    if e.code == _E_LONG:
        return ValueError(f"the {_ENTRY[e.what]} of {where} is {e.b - e.a} bytes, more than "
                          "an int32 length allows")
    if e.code == _E_HDECREASE:
        return ValueError(f"header offsets decrease at row {e.row}: {e.a} then {e.b}")
    if e.code == _E_HOUTSIDE:
        return ValueError(f"header offsets of row {e.row} span [{e.a}, {e.b}), outside the "
                          f"{e.size} header entries")
    if e.code == _E_HCOUNT:
        return ValueError(
            f"row {e.row} has {e.b - e.a} headers, more than an int32 count allows")
    if e.code == _E_TOO_LARGE:
        return RecordTooLargeError(
            f"the record of row {e.row} does not fit Kafka's int32 size field",
            limit=INT32_MAX_)
    if e.code == _E_TS:
        return ValueError(f"timestamp {e.a} of row {e.row} is too far from the base timestamp "
                          f"{e.b}")
    return MemoryError()


cdef int _store_crc(object whole, uint8_t* out, int64_t pos, int64_t size) except -1:
    """CRC-32C of the batch at ``out + pos`` (``size`` bytes), attributes .. end, into it."""
    crc = _crc32c(whole[pos + ATTRIBUTES_OFFSET:pos + size])
    ks_store_be32(out + pos + CRC_OFFSET, <uint32_t>crc)
    return 0


cdef int _check_batch_size(int64_t total) except -1:
    if total - LOG_OVERHEAD > INT32_MAX_:
        raise RecordTooLargeError(f"batch of {total} bytes does not fit Kafka's int32 size",
                                  limit=INT32_MAX_ + LOG_OVERHEAD)
    return 0


def encode_columns(rows, keys, values, *, timestamps=None, default_timestamp,
                   headers=None, max_batch_records=2147483647, max_batch_bytes=1 << 20,
                   attributes=0, compress=None, producer_id=-1, producer_epoch=-1,
                   base_sequence=-1, partition_leader_epoch=-1, first_offset=0):
    """Encode rows of Arrow-style columns as magic 2 batches back to back.

    See ``kafkastore/_pure/column_encode.py`` for the layout of ``keys``, ``values``,
    ``timestamps``, ``headers`` and ``rows``, how records are split into batches, and the
    errors.
    """
    cdef ColumnInput c
    cdef _HeaderFields f
    cdef _Pins pins = _Pins()
    cdef Py_ssize_t i, j, nb
    cdef int64_t total, pos, w, clen, chunk
    cdef int rc
    cdef uint8_t* out
    cdef ColumnBatch* b
    cdef Py_buffer view
    cdef bytes result, raw
    cdef list lengths = []
    memset(&c, 0, sizeof(c))
    c.default_ts = _int(default_timestamp, INT64_MIN_, INT64_MAX_, "default_timestamp")
    c.max_records = _int(max_batch_records, 1, INT32_MAX_, "max_batch_records")
    c.max_bytes = _int(max_batch_bytes, 1, INT32_MAX_, "max_batch_bytes")
    attrs = _int(attributes, 0, 0xFFFF, "attributes")
    if attrs & ~0x3F:
        raise ValueError(f"attributes may set only bits 0-5 (codec, timestamp type, "
                         f"transactional, control), not {attrs:#x}")
    codec = attrs & CODEC_MASK
    if codec > 4:
        raise ValueError(f"attributes name the unknown compression codec {codec}")
    f.attributes = <uint16_t>attrs
    f.producer_id = _int(producer_id, INT64_MIN_, INT64_MAX_, "producer_id")
    f.producer_epoch = _int(producer_epoch, -32768, 32767, "producer_epoch")
    f.base_sequence = _int(base_sequence, -1, INT32_MAX_, "base_sequence")
    f.epoch = _int(partition_leader_epoch, -INT32_MAX_ - 1, INT32_MAX_, "partition_leader_epoch")
    first = _int(first_offset, INT64_MIN_, INT64_MAX_, "first_offset")
    f.first_offset = first
    if compress is not None and not callable(compress):
        raise TypeError(f"compress must be callable, not {type(compress).__name__}")
    if codec and compress is None:
        raise ValueError("a compressed batch needs a compress function")

    _binary(pins, values, "values", &c.value, -1)
    c.n = c.value.entries
    c.has_keys = keys is not None
    if c.has_keys:
        _binary(pins, keys, "keys", &c.key, c.n)
    c.ts = NULL
    if timestamps is not None:
        stamps = _int_array(timestamps, "timestamps", True)
        if stamps.shape[0] != c.n:
            raise ValueError(f"timestamps hold {stamps.shape[0]} entries, not {c.n}")
        c.ts = <const int64_t*>pins.array(stamps)
    c.has_headers = headers is not None
    if c.has_headers:
        if not (isinstance(headers, (tuple, list)) and len(headers) == 6):
            raise TypeError(f"{_HEADERS_FORM}, not {_describe(headers)}")
        hoffs, hk_offs, hk_data, hv_offs, hv_data, hv_valid = headers
        hoffs = _offsets(hoffs, c.n, "header", "rows of values")
        c.hoffs_wide = hoffs.dtype.itemsize == 8
        c.hoffs = pins.array(hoffs)
        hk_offs = _int_array(hk_offs, "header key offsets")
        if hk_offs.shape[0] == 0:
            raise ValueError("header key offsets must hold H + 1 entries for H headers, not 0")
        c.hkey.entries = hk_offs.shape[0] - 1
        c.hkey.wide = hk_offs.dtype.itemsize == 8
        c.hkey.offsets = pins.array(hk_offs)
        c.hkey.valid = NULL
        pins.data(hk_data, "header key data", &c.hkey)
        hv_offs = _offsets(hv_offs, c.hkey.entries, "header value", "header keys")
        c.hvalue.entries = c.hkey.entries
        c.hvalue.wide = hv_offs.dtype.itemsize == 8
        c.hvalue.offsets = pins.array(hv_offs)
        pins.data(hv_data, "header value data", &c.hvalue)
        hv_valid = _bool_array(hv_valid, c.hkey.entries, "header value valid")
        c.hvalue.valid = NULL
        if hv_valid is not None:
            c.hvalue.valid = <const uint8_t*>pins.array(hv_valid)
    c.rows = NULL
    c.m = c.n
    if rows is not None:
        rows = _int_array(rows, "rows")
        c.m = rows.shape[0]
        c.rows_wide = rows.dtype.itemsize == 8
        c.rows = pins.array(rows)
    if c.m and first > INT64_MAX_ - (c.m - 1):
        raise ValueError(f"first_offset {first} leaves no room for {c.m} offsets in int64")
    if not c.m:
        return b""

    c.payload = <int64_t*>malloc(c.m * sizeof(int64_t))
    c.batches = NULL
    c.nbatches = c.cap_batches = 0
    c.err.code = 0
    if c.payload == NULL:
        raise MemoryError()
    try:
        with nogil:
            rc = plan_column_batches(&c)
        if rc:
            raise _plan_error(&c)
        nb = c.nbatches
        if codec == 0:
            total = 0
            for i in range(nb):
                _check_batch_size(RECORD_BATCH_OVERHEAD + c.batches[i].body)
                total += RECORD_BATCH_OVERHEAD + c.batches[i].body
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t*>PyBytes_AS_STRING(result)
            whole = memoryview(result)
            pos = 0
            i = 0
            while i < nb:
                # write about _CRC_CHUNK bytes of batches without the GIL, then take their
                # CRCs while those bytes are still in cache
                j = i
                chunk = 0
                rc = 0
                with nogil:
                    while j < nb and chunk < _CRC_CHUNK:
                        b = &c.batches[j]
                        _write_header(out + pos + chunk, b,
                                      RECORD_BATCH_OVERHEAD + b.body - LOG_OVERHEAD, &f)
                        w = write_column_records(&c, b,
                                                 out + pos + chunk + RECORD_BATCH_OVERHEAD)
                        if w != b.body:
                            rc = -1
                            break
                        chunk += RECORD_BATCH_OVERHEAD + b.body
                        j += 1
                if rc:
                    raise RuntimeError(_CHANGED)
                while i < j:
                    w = RECORD_BATCH_OVERHEAD + c.batches[i].body
                    _store_crc(whole, out, pos, w)
                    pos += w
                    i += 1
        else:
            sections = []
            total = 0
            for i in range(nb):
                b = &c.batches[i]
                raw = PyBytes_FromStringAndSize(NULL, b.body)
                out = <uint8_t*>PyBytes_AS_STRING(raw)
                with nogil:
                    w = write_column_records(&c, b, out)
                if w != b.body:
                    raise RuntimeError(_CHANGED)
                section = compress(memoryview(raw))
                del raw
                clen = _length_of(section)
                _check_batch_size(RECORD_BATCH_OVERHEAD + clen)
                sections.append(section)
                lengths.append(clen)
                total += RECORD_BATCH_OVERHEAD + clen
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t*>PyBytes_AS_STRING(result)
            whole = memoryview(result)
            pos = 0
            for i in range(nb):
                b = &c.batches[i]
                clen = lengths[i]
                _write_header(out + pos, b, RECORD_BATCH_OVERHEAD + clen - LOG_OVERHEAD, &f)
                PyObject_GetBuffer(sections[i], &view, PyBUF_SIMPLE)
                try:
                    if view.len != clen:
                        raise RuntimeError("the compress callback's result changed size")
                    if clen:
                        memcpy(out + pos + RECORD_BATCH_OVERHEAD, view.buf, <size_t>clen)
                finally:
                    PyBuffer_Release(&view)
                _store_crc(whole, out, pos, RECORD_BATCH_OVERHEAD + clen)
                pos += RECORD_BATCH_OVERHEAD + clen
        if KS_DEBUG:
            assert pos == total, (pos, total)
    finally:
        free(c.payload)
        free(c.batches)
    return result


cdef int64_t _length_of(object section) except -1:
    """Bytes in ``compress``'s result (the twin's checks and messages)."""
    cdef Py_buffer view
    if not PyObject_CheckBuffer(section):
        raise TypeError(
            f"compress must return a bytes-like object, not {type(section).__name__}")
    try:
        PyObject_GetBuffer(section, &view, PyBUF_SIMPLE)
    except (BufferError, ValueError) as exc:
        raise BufferError("compress's result must be a C-contiguous buffer") from exc
    try:
        return view.len
    finally:
        PyBuffer_Release(&view)
