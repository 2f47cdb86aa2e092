# cdef API of the varint kernel. The cores are inline so that record_batch,
# which cimports them, decodes varints without a function call.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef inline uint32_t zigzag32(int32_t v) noexcept nogil:
    # (v << 1) ^ (v >> 31), done on unsigned values so no shift is undefined
    return (<uint32_t>v << 1) ^ (<uint32_t>0 - (<uint32_t>v >> 31))


cdef inline uint64_t zigzag64(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ (<uint64_t>0 - (<uint64_t>v >> 63))


cdef inline int uvarint_size(uint64_t zz) noexcept nogil:
    cdef int size = 1
    while zz >= 0x80:
        zz >>= 7
        size += 1
    return size


cdef inline Py_ssize_t uvarint_write(uint8_t* out, uint64_t zz) noexcept nogil:
    """Write unsigned LEB128; the caller guarantees 10 bytes of room."""
    cdef Py_ssize_t i = 0
    while zz >= 0x80:
        out[i] = <uint8_t>(zz | 0x80)
        zz >>= 7
        i += 1
    out[i] = <uint8_t>zz
    return i + 1


cdef inline Py_ssize_t varint_read(const uint8_t* p, Py_ssize_t avail,
                                   int32_t* out) noexcept nogil:
    """Decode a zig-zag varint from at most ``avail`` bytes.

    Returns the bytes consumed (1..5), 0 when ``avail`` ends inside the
    varint, -1 when it is longer than 5 bytes (Kafka's limit).
    """
    cdef uint32_t value = 0
    cdef uint32_t b
    cdef int shift = 0
    cdef Py_ssize_t i = 0
    while True:
        if i >= avail:
            return 0
        b = p[i]
        i += 1
        if not (b & 0x80):
            value |= b << shift  # bits past 32 are dropped, as in Java
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > 28:
            return -1
    out[0] = <int32_t>((value >> 1) ^ (<uint32_t>0 - (value & 1)))
    return i


cdef inline Py_ssize_t varlong_read(const uint8_t* p, Py_ssize_t avail,
                                    int64_t* out) noexcept nogil:
    """Like varint_read for a 64-bit varlong (at most 10 bytes)."""
    cdef uint64_t value = 0
    cdef uint64_t b
    cdef int shift = 0
    cdef Py_ssize_t i = 0
    while True:
        if i >= avail:
            return 0
        b = p[i]
        i += 1
        if not (b & 0x80):
            value |= b << shift
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > 63:
            return -1
    out[0] = <int64_t>((value >> 1) ^ (<uint64_t>0 - (value & 1)))
    return i


# Validate a caller's position into a buffer of ``size`` bytes (TypeError for a
# non-int, ValueError outside [0, size]); shared by every kernel that takes one.
cdef Py_ssize_t check_position(object pos, Py_ssize_t size) except -1
