"""Zig-zag varint and varlong coding (compiled kernel).

Twin of ``kafkastore/_pure/varint.py``; see it for the format. The inline
cores live in ``varint.pxd`` so other kernels cimport them.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t

from kafkastore.errors import CorruptRecordError

__all__ = [
    "encode_varint",
    "encode_varlong",
    "decode_varint",
    "decode_varlong",
    "size_of_varint",
    "size_of_varlong",
]

cdef object _INT32_MIN = -(1 << 31)
cdef object _INT32_MAX = (1 << 31) - 1
cdef object _INT64_MIN = -(1 << 63)
cdef object _INT64_MAX = (1 << 63) - 1


cdef int32_t _check32(object value) except? -1:
    if not isinstance(value, int):
        raise TypeError(f"varint value must be an int, not {type(value).__name__}")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    return <int32_t>value


cdef int64_t _check64(object value) except? -1:
    if not isinstance(value, int):
        raise TypeError(f"varlong value must be an int, not {type(value).__name__}")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    return <int64_t>value


cdef Py_ssize_t check_position(object pos, Py_ssize_t size) except -1:
    # checked as a Python int first, so a huge value is a ValueError, not OverflowError
    if not isinstance(pos, int):
        raise TypeError(f"position must be an int, not {type(pos).__name__}")
    if pos < 0 or pos > size:
        raise ValueError(f"position {pos} is outside the buffer of {size} bytes")
    return pos


def encode_varint(value):
    """Encode an int32 as a zig-zag varint (1 to 5 bytes)."""
    cdef uint8_t buf[10]
    cdef Py_ssize_t n = uvarint_write(buf, zigzag32(_check32(value)))
    return (<char*>buf)[:n]


def encode_varlong(value):
    """Encode an int64 as a zig-zag varlong (1 to 10 bytes)."""
    cdef uint8_t buf[10]
    cdef Py_ssize_t n = uvarint_write(buf, zigzag64(_check64(value)))
    return (<char*>buf)[:n]


def size_of_varint(value):
    """Bytes :func:`encode_varint` writes for ``value``."""
    return uvarint_size(zigzag32(_check32(value)))


def size_of_varlong(value):
    """Bytes :func:`encode_varlong` writes for ``value``."""
    return uvarint_size(zigzag64(_check64(value)))


def decode_varint(const uint8_t[::1] buffer, object pos=0):
    """Decode a varint at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varint
    or when it is longer than 5 bytes.
    """
    cdef Py_ssize_t end = buffer.shape[0]
    cdef int32_t value = 0
    cdef Py_ssize_t n, at = check_position(pos, end)
    n = varint_read(&buffer[0] + at if end else NULL, end - at, &value)
    if n == 0:
        raise CorruptRecordError("truncated varint", position=at)
    if n < 0:
        raise CorruptRecordError(
            "Varint is too long, the most significant bit in the 5th byte is set",
            position=at)
    return value, at + n


def decode_varlong(const uint8_t[::1] buffer, object pos=0):
    """Decode a varlong at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varlong
    or when it is longer than 10 bytes.
    """
    cdef Py_ssize_t end = buffer.shape[0]
    cdef int64_t value = 0
    cdef Py_ssize_t n, at = check_position(pos, end)
    n = varlong_read(&buffer[0] + at if end else NULL, end - at, &value)
    if n == 0:
        raise CorruptRecordError("truncated varlong", position=at)
    if n < 0:
        raise CorruptRecordError(
            "Varlong is too long, most significant bit in the 10th byte is set",
            position=at)
    return value, at + n
