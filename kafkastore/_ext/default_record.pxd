# THE v2 record parser of the compiled kernels: Kafka's DefaultRecord.readFrom rules.
#
# Every compiled walk over v2 records parses a record with read_record() and only
# with it: the reader (RecordBatch iteration, record_summary), the columnar decoder's
# checked path (record_columns.pxi), and the log cleaner's kernel (offset_map.pyx).
# So they accept and reject exactly the same records, with the same messages
# (tests/test_parser_agreement.py holds them to it). The pure twins' parser is
# kafkastore/_pure/default_record.py.
#
# csrc/ks_v2fast.h (the columnar decoder's fast path) and record_columns.pxi's header
# walk are accelerators, not second parsers: they take only records they are sure of
# under these rules (a negative key or value length is null there too), never decide
# that bytes are corrupt, and stop in front of anything else, which read_record then
# handles or rejects.
#
# Record format (kafkastore/_pure/record_batch.py documents each field):
#
#     length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
#     keyLength varint | key | valueLength varint | value |
#     headerCount varint | [headerKeyLength varint | headerKey |
#                           headerValueLength varint | headerValue] * headerCount
#
# The one rule for lengths (Kafka's): any negative key, value or header value length
# means null; a negative header key length is an error ("Invalid negative header key
# size"); a negative record length or header count is an error; every length must fit
# in what is left of the record, and the fields must end exactly at the record's
# declared end.
#
# Errors: read_record never raises and never needs the GIL. It reports an error code
# with the position of the bad record and up to two numbers in a RecordError, and
# record_error_message() words it (the reader's messages, which the pure twin shares).
# The caller raises CorruptRecordError with the position it reports (the batch's for
# the reader, the record's for the cleaner).

from libc.stdint cimport int32_t, int64_t, uint8_t

from kafkastore._ext.reader cimport read_varint, read_varlong


cdef struct RecordSpan:
    # one validated record; positions are within the bytes parsed
    Py_ssize_t start           # the length varint
    Py_ssize_t body            # the attributes byte
    Py_ssize_t ts_end          # first byte after timestampDelta
    int64_t ts_delta
    int32_t offset_delta
    Py_ssize_t key_pos
    int32_t key_len            # -1: null (any negative length on the wire)
    Py_ssize_t value_pos
    int32_t value_len          # -1: null
    int32_t header_count
    Py_ssize_t headers_pos     # first header (or the end, with none)
    Py_ssize_t next_pos        # first byte after the record


cdef struct RecordError:
    # what read_record reports (kernels with more error cases of their own, such as
    # offset_map's batch-level ones, use codes from RECORD_ERROR_END on)
    int code
    Py_ssize_t position        # start of the bad record
    int64_t a                  # numbers for the message
    int64_t b


cdef enum:
    REC_TRUNC_VARINT = 1
    REC_LONG_VARINT
    REC_LONG_VARLONG
    REC_RECORD_SIZE            # a: declared length, b: bytes remaining
    REC_EMPTY
    REC_KEY_PAST
    REC_VALUE_PAST
    REC_HCOUNT_NEG             # a: count
    REC_HCOUNT_BIG             # a: count
    REC_HKEY_NEG
    REC_HKEY_PAST
    REC_HVAL_PAST
    REC_SIZE_MISMATCH          # a: declared length, b: bytes read
    RECORD_ERROR_END


cdef inline int record_fail(RecordError* e, int code, Py_ssize_t where, int64_t a,
                            int64_t b) noexcept nogil:
    # fill ``e`` and return -1 (kernels report their own codes through it too)
    e.code = code
    e.position = where
    e.a = a
    e.b = b
    return -1


cdef inline int _rec_varint_fail(RecordError* e, Py_ssize_t code, bint wide,
                                 Py_ssize_t where) noexcept nogil:
    if code == -1:
        return record_fail(e, REC_TRUNC_VARINT, where, 0, 0)
    return record_fail(e, REC_LONG_VARLONG if wide else REC_LONG_VARINT, where, 0, 0)


cdef inline int read_record(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end,
                            RecordSpan* r, RecordError* e) noexcept nogil:
    """Parse and fully validate the v2 record at ``d[pos:end]``: 0 with ``r`` filled,
    or -1 with ``e`` filled.

    Every varint byte is checked against the record's end (itself checked against
    ``end``) and every length against the bytes left in the record before anything
    it covers is touched.
    """
    cdef int32_t length = 0, count = 0, hkey = 0, hval = 0, i
    cdef Py_ssize_t p, rend
    p = read_varint(d, pos, end, &length)
    if p < 0:
        return _rec_varint_fail(e, p, False, pos)
    if length < 0 or length > end - p:
        return record_fail(e, REC_RECORD_SIZE, pos, length, end - p)
    r.start = pos
    r.body = p
    rend = p + length
    if p >= rend:
        return record_fail(e, REC_EMPTY, pos, 0, 0)
    p += 1  # attributes: unused by Kafka
    p = read_varlong(d, p, rend, &r.ts_delta)
    if p < 0:
        return _rec_varint_fail(e, p, True, pos)
    r.ts_end = p
    p = read_varint(d, p, rend, &r.offset_delta)
    if p < 0:
        return _rec_varint_fail(e, p, False, pos)
    p = read_varint(d, p, rend, &r.key_len)
    if p < 0:
        return _rec_varint_fail(e, p, False, pos)
    r.key_pos = p
    if r.key_len >= 0:
        if r.key_len > rend - p:
            return record_fail(e, REC_KEY_PAST, pos, 0, 0)
        p += r.key_len
    else:
        r.key_len = -1  # any negative length is a null key (Kafka: keySize < 0)
    p = read_varint(d, p, rend, &r.value_len)
    if p < 0:
        return _rec_varint_fail(e, p, False, pos)
    r.value_pos = p
    if r.value_len >= 0:
        if r.value_len > rend - p:
            return record_fail(e, REC_VALUE_PAST, pos, 0, 0)
        p += r.value_len
    else:
        r.value_len = -1
    p = read_varint(d, p, rend, &count)
    if p < 0:
        return _rec_varint_fail(e, p, False, pos)
    if count < 0:
        return record_fail(e, REC_HCOUNT_NEG, pos, count, 0)
    if count > (rend - p) // 2:  # a header takes at least 2 bytes
        return record_fail(e, REC_HCOUNT_BIG, pos, count, 0)
    r.header_count = count
    r.headers_pos = p
    for i in range(count):
        p = read_varint(d, p, rend, &hkey)
        if p < 0:
            return _rec_varint_fail(e, p, False, pos)
        if hkey < 0:
            return record_fail(e, REC_HKEY_NEG, pos, 0, 0)
        if hkey > rend - p:
            return record_fail(e, REC_HKEY_PAST, pos, 0, 0)
        p += hkey
        p = read_varint(d, p, rend, &hval)
        if p < 0:
            return _rec_varint_fail(e, p, False, pos)
        if hval >= 0:  # negative: a null header value
            if hval > rend - p:
                return record_fail(e, REC_HVAL_PAST, pos, 0, 0)
            p += hval
    if p != rend:
        return record_fail(e, REC_SIZE_MISMATCH, pos, length, p - r.body)
    r.next_pos = rend
    return 0


cdef inline str record_error_message(const RecordError* e):
    """The message of a code read_record reports (None for a code it does not)."""
    cdef int code = e.code
    if code == REC_TRUNC_VARINT:
        return "Found invalid record structure: truncated varint"
    if code == REC_LONG_VARINT:
        return "Varint is too long, the most significant bit in the 5th byte is set"
    if code == REC_LONG_VARLONG:
        return "Varlong is too long, most significant bit in the 10th byte is set"
    if code == REC_RECORD_SIZE:
        return (f"Invalid record size: expected {e.a} bytes in record payload, but the "
                f"buffer has only {e.b} remaining bytes")
    if code == REC_EMPTY:
        return "Found invalid record structure: empty record"
    if code == REC_KEY_PAST:
        return "Found invalid record structure: key past record end"
    if code == REC_VALUE_PAST:
        return "Found invalid record structure: value past record end"
    if code == REC_HCOUNT_NEG:
        return f"Found invalid number of record headers {e.a}"
    if code == REC_HCOUNT_BIG:
        return f"Found invalid number of record headers {e.a}: more than the record holds"
    if code == REC_HKEY_NEG:
        return "Invalid negative header key size"
    if code == REC_HKEY_PAST:
        return "Found invalid record structure: header key past record end"
    if code == REC_HVAL_PAST:
        return "Found invalid record structure: header value past record end"
    if code == REC_SIZE_MISMATCH:
        return (f"Invalid record size: expected to read {e.a} bytes in record payload, "
                f"but instead read {e.b}")
    return None
