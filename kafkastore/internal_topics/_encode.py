"""What the internal topics' record formats share: the writing primitives (Kafka's
unsigned varint and its strings: int16 length, or the compact ``length + 1`` varint of
flexible versions, as Kafka's generated ``write`` methods emit them), the error for a key
of another record type, and the JSON text ``kafka-dump-log.sh`` prints."""

from __future__ import annotations

import json
import struct

from kafkastore.errors import CorruptRecordError

__all__ = ["UnknownRecordTypeError", "dump_json", "uvarint", "string"]

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


class UnknownRecordTypeError(CorruptRecordError):
    """A key of a record type the module reading it does not read (Kafka's
    ``Deserializer.UnknownRecordTypeException``)."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"Unknown record type {record_type}", position=0)
        self.record_type = record_type


def dump_json(obj) -> str:
    """``obj`` as Jackson's ``ObjectNode.toString()`` writes it (what
    ``kafka-dump-log.sh``'s decoders print): no spaces, non-ASCII as is."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
