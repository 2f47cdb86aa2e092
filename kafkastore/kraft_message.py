"""The one reader of KRaft message values: Kafka's ``Readable`` and its metadata record frame.

KRaft writes two kinds of message values into v2 batches, both in the format of Kafka's
generated message classes (``generator/``, every KRaft message "flexible" at every version):

* metadata records (``__cluster_metadata`` data records: TopicRecord, ConfigRecord ...):
  the frame of Kafka's ``AbstractApiMessageSerde`` (``MetadataRecordSerde``), an unsigned
  varint frame version (1), an unsigned varint apiKey and an unsigned varint message
  version (:func:`read_frame`), then the message;
* KRaft control records (SnapshotHeader, KRaftVersion, KRaftVoters ...): an int16 version
  (Kafka's ``ControlRecordUtils``), then the message.

:class:`MessageReader` reads the fields of either, as ``ByteBufferAccessor`` and the
generated ``read`` methods do: big-endian fixed-width integers, unsigned varints of at
most 5 bytes taken as Java ints (bits past the 32nd dropped), compact strings and arrays
(unsigned varint length + 1, 0 for null; a string longer than 0x7fff is refused, as the
generated readers refuse it), 16-byte uuids, and a tagged-fields section (a count, then
tag, size and data for each; no reader here knows a tag, so all are skipped). Every length
is checked against the bytes left before anything is taken.

Its users are :mod:`kafkastore.cluster_metadata` (metadata records) and
:mod:`kafkastore.dump` (control records as ``kafka-dump-log.sh`` prints them). Each words
its errors in its own terms by overriding :meth:`MessageReader.error`,
:meth:`~MessageReader.truncated` and :meth:`~MessageReader.bad_varint`, and decodes
strings by :meth:`~MessageReader.decode`; the defaults raise
:class:`~kafkastore.errors.CorruptRecordError` saying which field and which byte.

A reader holds one value and a position: one thread at a time.
"""

from __future__ import annotations

import base64
import struct
import uuid

from kafkastore.errors import CorruptRecordError, KafkaStoreError

__all__ = ["FRAME_VERSION", "MessageReader", "kafka_uuid_string", "read_frame"]

#: ``AbstractApiMessageSerde.DEFAULT_FRAME_VERSION``: the only frame Kafka reads.
FRAME_VERSION = 1
#: The longest string the generated readers accept (``Short.MAX_VALUE``).
MAX_STRING = 0x7FFF
_MASK32 = 0xFFFFFFFF

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def _java_int(raw: int) -> int:
    """An unsigned 32-bit value as the Java ``int`` Kafka holds it in."""
    return raw - (1 << 32) if raw >= 0x80000000 else raw


class MessageReader:
    """The fields of one message value, read in order from ``data`` (``pos`` is the next
    byte). Subclasses say how failures read and how strings decode (module docstring)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    # -- how failures read and strings decode: overridden per user -----------------------

    def error(self, message: str) -> KafkaStoreError:
        """The exception for a value that does not parse."""
        return CorruptRecordError(message)

    def truncated(self, what: str, n: int) -> KafkaStoreError:
        """``what`` needs ``n`` bytes and fewer are left."""
        return self.error(f"{what} needs {n} bytes, but the value has "
                          f"{len(self.data) - self.pos} left (at byte {self.pos})")

    def bad_varint(self, what: str, at: int, truncated: bool) -> KafkaStoreError:
        """The varint of ``what`` at byte ``at`` ends with the value (``truncated``) or
        runs past 5 bytes."""
        reason = ("truncated varint" if truncated else
                  "Varint is too long, the most significant bit in the 5th byte is set")
        return self.error(f"{what}: {reason} (at byte {at})")

    def decode(self, raw: bytes) -> str:
        """A string field's bytes as text."""
        return raw.decode("utf-8", "replace")

    # -- Readable ----------------------------------------------------------------------

    def take(self, n: int, what: str) -> bytes:
        """The next ``n`` bytes (``readArray``)."""
        pos = self.pos
        if n > len(self.data) - pos:
            raise self.truncated(what, n)
        self.pos = pos + n
        return self.data[pos:pos + n]

    def uvarint(self, what: str) -> int:
        """``readUnsignedVarint``: at most 5 bytes, as an unsigned 32-bit value."""
        data, pos = self.data, self.pos
        end = len(data)
        if pos < end and data[pos] < 0x80:                 # nearly every varint here
            self.pos = pos + 1
            return data[pos]
        start = pos
        value = shift = 0
        while True:
            if pos >= end:
                raise self.bad_varint(what, start, True)
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise self.bad_varint(what, start, False)
        self.pos = pos
        return value & _MASK32     # Java drops the bits shifted past the int

    def short(self, what: str) -> int:
        """An unsigned varint that must fit a Java short (the frame's fields)."""
        value = self.uvarint(what)
        if value > 0x7FFF:
            raise self.error(f"value for {what} was too large: {value}")
        return value

    def int8(self, what: str) -> int:
        return _I8.unpack(self.take(1, what))[0]

    def int16(self, what: str) -> int:
        return _I16.unpack(self.take(2, what))[0]

    def uint16(self, what: str) -> int:
        return _U16.unpack(self.take(2, what))[0]

    def int32(self, what: str) -> int:
        return _I32.unpack(self.take(4, what))[0]

    def int64(self, what: str) -> int:
        return _I64.unpack(self.take(8, what))[0]

    def uuid(self, what: str) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16, what))

    def string(self, what: str, *, nullable: bool = False) -> str | None:
        """A compact string: unsigned varint length + 1 (0 for null), then UTF-8."""
        length = _java_int(self.uvarint(what)) - 1
        if length < 0:
            if nullable:
                return None
            raise self.error(f"non-nullable field {what} was serialized as null")
        if length > MAX_STRING:
            raise self.error(f"string field {what} had invalid length {length}")
        return self.decode(self.take(length, what))

    def array_length(self, what: str) -> int:
        """A compact (non-nullable) array's element count, checked against the bytes left
        as the generated readers check it."""
        length = _java_int(self.uvarint(what)) - 1
        if length < 0:
            raise self.error(f"non-nullable field {what} was serialized as null")
        left = len(self.data) - self.pos
        if length > left:
            raise self.error(f"Tried to allocate a collection of size {length}, but there "
                             f"are only {left} bytes remaining.")
        return length

    def tagged_fields(self, name: str) -> None:
        """A tagged-fields section: every field skipped (none is known here)."""
        for _ in range(self.uvarint(f"{name} tagged field count")):
            self.uvarint(f"{name} tag")
            self.take(self.uvarint(f"{name} tagged field size"), f"{name} tagged field")

    def end(self, name: str) -> None:
        """The message's tagged fields, and nothing after them (``AbstractApiMessageSerde``
        refuses bytes left over)."""
        self.tagged_fields(name)
        left = len(self.data) - self.pos
        if left:
            raise self.error(f"found {left} byte(s) of garbage after {name}")


def read_frame(reader: MessageReader) -> tuple[int, int]:
    """``(apiKey, version)`` of a metadata record: ``AbstractApiMessageSerde.read``'s frame.

    Raises the reader's error for a frame version other than 1 (0 is the format of the
    KRaft preview in Kafka 2.8, which Kafka does not read either) and for a field above
    a Java short.
    """
    frame = reader.short("frame version")
    if frame != FRAME_VERSION:
        if frame == 0:
            raise reader.error("frame version 0 (the KRaft preview format of Kafka 2.8) "
                               "is not supported, as in Kafka")
        raise reader.error(f"unknown frame version {frame} (only frame version "
                           f"{FRAME_VERSION} is supported)")
    return reader.short("type"), reader.short("version")
