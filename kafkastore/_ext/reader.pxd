# The reader primitive of the compiled kernels: how a kernel reads Kafka bytes.
#
# One place for what every record walk needs (py-pgproto's frb.pxd pattern): the
# big-endian field loads, the bounds-checked varint and varlong readers, Java's
# wrapping integer arithmetic, and the buffer helpers that turn a caller's
# bytes-like object into a typed view and a pointer. Everything is ``cdef inline``,
# so a kernel that cimports it compiles these into its own loops with no call.
#
# Used by record_batch (and its include files) and offset_map; the record parser
# built on it is default_record.pxd. The pure twins have the same helpers in
# kafkastore/_pure/reader.py.
#
# Bounds: the varint readers check every byte they read against ``end``. The
# fixed-width loads (be_i16/be_i32/be_i64) read exactly 2/4/8 bytes at ``p``: the
# caller checks once that a whole header is present (61 bytes of a v2 batch
# header, say) and then loads its fields, rather than paying one check per field.
#
# Thread-safety: pure functions of their arguments; the nogil ones may run
# without the GIL.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kafkastore._ext.endian cimport ks_load_be16, ks_load_be32, ks_load_be64
from kafkastore._ext.varint cimport varint_read, varlong_read


# -- big-endian loads (the caller has checked that the bytes are there) --------------

cdef inline int16_t be_i16(const uint8_t* p) noexcept nogil:
    return <int16_t>ks_load_be16(p)


cdef inline int32_t be_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>ks_load_be32(p)


cdef inline int64_t be_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>ks_load_be64(p)


# -- varints ---------------------------------------------------------------------------

cdef inline Py_ssize_t read_varint(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                                   int32_t* out) noexcept nogil:
    """Zig-zag varint at ``p[pos:end]``: the next position, or -1 (the varint runs past
    ``end``: truncated) / -2 (longer than 5 bytes: overlong, Kafka's limit).

    One- and two-byte varints (values within +-8191: nearly every length and delta of
    a record) are decoded inline; longer ones take varint_read's loop.
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


cdef inline Py_ssize_t read_varlong(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                                    int64_t* out) noexcept nogil:
    """Zig-zag varlong at ``p[pos:end]`` (at most 10 bytes), as :func:`read_varint`."""
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


# -- Java integer arithmetic ------------------------------------------------------------
# Java int and long arithmetic wraps; signed overflow is undefined in C, so these
# compute in unsigned types, where wrapping is defined (the pure twins wrap with
# wrap64 / wrap32 of kafkastore/_pure/reader.py).

cdef inline int64_t add64(int64_t a, int64_t b) noexcept nogil:
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline int64_t sub64(int64_t a, int64_t b) noexcept nogil:
    return <int64_t>(<uint64_t>a - <uint64_t>b)


cdef inline int32_t sub32(int32_t a, int32_t b) noexcept nogil:
    return <int32_t>(<uint32_t>a - <uint32_t>b)


# -- buffers ----------------------------------------------------------------------------

cdef inline const uint8_t[::1] as_view(object buffer):
    """A read-only byte view of any C-contiguous bytes-like object, zero-copy.

    A memoryview of another shape or item type (ints, a 2-D array) is cast to bytes
    first; signed and char byte formats are taken as they are.
    """
    cdef const uint8_t[::1] view
    if isinstance(buffer, memoryview) and (buffer.ndim != 1 or buffer.itemsize != 1
                                           or buffer.format not in ("B", "b", "c")):
        buffer = buffer.cast("B")
    view = buffer
    return view


cdef inline const uint8_t* view_ptr(const uint8_t[::1] view) noexcept:
    # &view[0] of an empty view would index past the end; nothing is read then
    return &view[0] if view.shape[0] else NULL
