"""The writing primitives the internal topics' record formats share: Kafka's unsigned
varint and its strings (int16 length, or the compact ``length + 1`` varint of flexible
versions), as Kafka's generated ``write`` methods emit them."""

from __future__ import annotations

import struct

__all__ = ["uvarint", "string"]

_I16 = struct.Struct(">h")


def uvarint(n: int) -> bytes:
    """``ByteUtils.writeUnsignedVarint``: seven bits a byte, low groups first."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s: str, flexible: bool) -> bytes:
    """A non-null string; ValueError past Kafka's limit of 32767 UTF-8 bytes (its
    generated code refuses to serialize a longer one)."""
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError(f"a string of {len(b)} bytes does not fit Kafka's int16 length")
    return (uvarint(len(b) + 1) if flexible else _I16.pack(len(b))) + b
