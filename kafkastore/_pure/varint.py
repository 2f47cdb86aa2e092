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

from kafkastore._pure.reader import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MASK32,
    MASK64,
    as_view,
    check_position,
    read_varint,
)

__all__ = [
    "encode_varint",
    "encode_varlong",
    "decode_varint",
    "decode_varlong",
    "size_of_varint",
    "size_of_varlong",
]


# -- the writers every pure encoder uses (unchecked: callers pass in-range ints) --------


def zz32(value: int) -> int:
    """Zig-zag map an int32 to the unsigned value a varint carries."""
    return ((value << 1) ^ (value >> 31)) & MASK32


def zz64(value: int) -> int:
    """Zig-zag map an int64 to the unsigned value a varlong carries."""
    return ((value << 1) ^ (value >> 63)) & MASK64


def write_uvarint(zz: int) -> bytes:
    """Unsigned LEB128 of ``zz >= 0``: seven bits a byte, low groups first."""
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def uvarint_size(zz: int) -> int:
    """Bytes :func:`write_uvarint` writes for ``zz >= 0``."""
    return max(1, (zz.bit_length() + 6) // 7)


def _check_type(value, what: str) -> None:
    if not isinstance(value, int):
        raise TypeError(f"{what} value must be an int, not {type(value).__name__}")


def _zigzag32(value: int) -> int:
    _check_type(value, "varint")
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    return zz32(value)


def _zigzag64(value: int) -> int:
    _check_type(value, "varlong")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    return zz64(value)


def encode_varint(value: int) -> bytes:
    """Encode an int32 as a zig-zag varint (1 to 5 bytes)."""
    return write_uvarint(_zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """Encode an int64 as a zig-zag varlong (1 to 10 bytes)."""
    return write_uvarint(_zigzag64(value))


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value``."""
    return uvarint_size(_zigzag32(value))


def size_of_varlong(value: int) -> int:
    """Bytes :func:`encode_varlong` writes for ``value``."""
    return uvarint_size(_zigzag64(value))


def _read(buffer, pos: int, bits: int) -> tuple[int, int]:
    view = as_view(buffer) if not isinstance(buffer, bytes) else buffer
    end = len(view)
    check_position(pos, end)
    return read_varint(view, pos, end, bits, pos,
                       "truncated varint" if bits == 32 else "truncated varlong")


def decode_varint(buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a varint at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varint
    or when it is longer than 5 bytes.
    """
    return _read(buffer, pos, 32)


def decode_varlong(buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a varlong at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varlong
    or when it is longer than 10 bytes.
    """
    return _read(buffer, pos, 64)
