"""Zig-zag varint and varlong coding, as Kafka's ``ByteUtils`` does it.

Pure-Python twin of ``kafkastore/_ext/varint.pyx``: same names, same
signatures, same results and errors. It is the readable reference and the
test oracle for the compiled kernel.

Format: a signed value ``n`` is zig-zag mapped to an unsigned one,
``(n << 1) ^ (n >> 31)`` for 32 bits and ``(n << 1) ^ (n >> 63)`` for 64,
then written as unsigned LEB128: seven bits per byte, low groups first, the
high bit of each byte set when more bytes follow.

Limits follow Kafka exactly: a varint (int32) is at most 5 bytes, a varlong
(int64) at most 10. A longer encoding raises :class:`CorruptRecordError`.
Like Kafka, bits of the final byte that do not fit the target width are
dropped (Java's shift overflow), so decoding never fails on them.
"""

from __future__ import annotations

from kafkastore.errors import CorruptRecordError

__all__ = [
    "encode_varint",
    "encode_varlong",
    "decode_varint",
    "decode_varlong",
    "size_of_varint",
    "size_of_varlong",
]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


def _write_unsigned(zz: int) -> bytes:
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def _size_unsigned(zz: int) -> int:
    size = 1
    while zz >= 0x80:
        zz >>= 7
        size += 1
    return size


def _check_type(value, what: str) -> None:
    if not isinstance(value, int):
        raise TypeError(f"{what} value must be an int, not {type(value).__name__}")


def _zigzag32(value: int) -> int:
    _check_type(value, "varint")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    return ((value << 1) ^ (value >> 31)) & _MASK32


def _zigzag64(value: int) -> int:
    _check_type(value, "varlong")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    return ((value << 1) ^ (value >> 63)) & _MASK64


def encode_varint(value: int) -> bytes:
    """Encode an int32 as a zig-zag varint (1 to 5 bytes)."""
    return _write_unsigned(_zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """Encode an int64 as a zig-zag varlong (1 to 10 bytes)."""
    return _write_unsigned(_zigzag64(value))


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value``."""
    return _size_unsigned(_zigzag32(value))


def size_of_varlong(value: int) -> int:
    """Bytes :func:`encode_varlong` writes for ``value``."""
    return _size_unsigned(_zigzag64(value))


def check_position(pos, size: int) -> int:
    """Validate a caller's position into a buffer of ``size`` bytes.

    TypeError for a non-int, ValueError outside ``[0, size]``; shared by every
    kernel twin that takes a position (not part of ``__all__``).
    """
    if not isinstance(pos, int):
        raise TypeError(f"position must be an int, not {type(pos).__name__}")
    if pos < 0 or pos > size:
        raise ValueError(f"position {pos} is outside the buffer of {size} bytes")
    return pos


def _read(buffer, pos: int, max_shift: int, bits: int) -> tuple[int, int]:
    view = memoryview(buffer).cast("B") if not isinstance(buffer, bytes) else buffer
    end = len(view)
    check_position(pos, end)
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptRecordError(
                f"truncated {'varint' if bits == 32 else 'varlong'}", position=start
            )
        b = view[pos]
        pos += 1
        if not b & 0x80:
            value |= b << shift
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > max_shift:
            raise CorruptRecordError(
                "Varint is too long, the most significant bit in the 5th byte is set"
                if bits == 32
                else "Varlong is too long, most significant bit in the 10th byte is set",
                position=start,
            )
    mask = _MASK32 if bits == 32 else _MASK64
    value &= mask  # Java drops the bits shifted past the width
    decoded = (value >> 1) ^ -(value & 1)
    return decoded, pos


def decode_varint(buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a varint at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varint
    or when it is longer than 5 bytes.
    """
    return _read(buffer, pos, 28, 32)


def decode_varlong(buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a varlong at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varlong
    or when it is longer than 10 bytes.
    """
    return _read(buffer, pos, 63, 64)
