"""``__transaction_state`` records: Kafka's transaction coordinator's key and value
schemas (``TransactionLogKey`` / ``TransactionLogValue``, in apache/kafka's
transaction-coordinator module, and ``TransactionLog`` which writes and reads them).

The key is ``[int16 record type 0][string transactionalId]``; the value is
``[int16 version][TransactionLogValue at that version]``: version 0 (not flexible) is
what Kafka writes with ``transaction.version`` 0, version 1 (flexible: compact strings
and arrays, tagged fields ``PreviousProducerId`` (tag 0), ``NextProducerId`` (tag 1),
``ClientTransactionVersion`` (tag 2)) what Kafka 3.9 / 4.x write with
``transaction.version`` 1 or 2 (``TransactionVersion.transactionLogValueVersion``);
both are read, version 1 is written. A null value (tombstone) deletes the transactional
id (an expired one).

Bytes that do not decode raise :class:`~kafkastore.errors.CorruptRecordError` with the
position in the key's or the value's bytes; the message says what Kafka's generated
reader says for the same bytes, which :func:`parse_for_dump` prints as Kafka's
``DumpLogSegments.TransactionLogMessageParser`` does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from kafkastore.errors import CorruptRecordError
from kafkastore.internal_topics._encode import UnknownRecordTypeError
from kafkastore.internal_topics._encode import dump_json as _json
from kafkastore.internal_topics._encode import string as _string
from kafkastore.internal_topics._encode import uvarint as _uvarint

__all__ = ["TRANSACTION_LOG_RECORD_TYPE", "TransactionState", "TransactionLogKey",
           "TransactionLogValue", "UnknownRecordTypeError", "parse_for_dump"]

#: Kafka's ``CoordinatorRecordType.TRANSACTION_LOG``: the key's version prefix.
TRANSACTION_LOG_RECORD_TYPE = 0
#: The value versions Kafka reads (``TransactionLogValue`` validVersions 0-1).
VALUE_VERSIONS = (0, 1)
#: The value version written (Kafka 3.9 / 4.x with transaction.version >= 1).
WRITE_VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TransactionState(IntEnum):
    """Kafka's ``TransactionState`` with its ids (the ``TransactionStatus`` byte)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's ``stateName`` (what DescribeTransactions / ListTransactions say)."""
        return _STATE_NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_STATE_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort", TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _STATE_NAMES.items()}


class _Reader:
    """Kafka's ``ByteBufferAccessor`` over one buffer, with its error texts."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, pos: int, what: str) -> None:
        self.data, self.pos, self.what = data, pos, what

    def _take(self, n: int) -> int:
        start = self.pos
        if len(self.data) - start < n:
            # Java's BufferUnderflowException has no message: Kafka prints "null"
            raise CorruptRecordError("null", position=start)
        self.pos = start + n
        return start

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int8(self) -> int:
        p = self._take(1)
        v = self.data[p]
        return v - 256 if v > 127 else v

    def int16(self) -> int:
        return _I16.unpack_from(self.data, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.data, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.data, self._take(8))[0]

    def uvarint(self) -> int:
        # ByteUtils.readUnsignedVarint: at most 5 bytes
        start, value, shift = self.pos, 0, 0
        while True:
            b = self.data[self._take(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value & 0xFFFFFFFF
            shift += 7
            if shift > 28:
                raise CorruptRecordError("Varint is too long, the most significant bit in "
                                         "the 5th byte is set", position=start)

    def raw(self, n: int) -> bytes:
        if n > self.remaining():
            raise CorruptRecordError(f"Error reading byte array of {n} byte(s): only "
                                     f"{self.remaining()} byte(s) available",
                                     position=self.pos)
        p = self._take(n)
        return bytes(self.data[p:p + n])

    def string(self, name: str, flexible: bool) -> str:
        start = self.pos
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            raise CorruptRecordError(f"non-nullable field {name} was serialized as null",
                                     position=start)
        if n > 0x7FFF:
            raise CorruptRecordError(f"string field {name} had invalid length {n}",
                                     position=start)
        return self.raw(n).decode("utf-8", "replace")

    def array_length(self, name: str, flexible: bool, nullable: bool) -> int:
        start = self.pos
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            if nullable:
                return -1
            raise CorruptRecordError(f"non-nullable field {name} was serialized as null",
                                     position=start)
        if n > self.remaining():
            raise CorruptRecordError(f"Tried to allocate a collection of size {n}, but "
                                     f"there are only {self.remaining()} bytes remaining.",
                                     position=start)
        return n


@dataclass(frozen=True)
class TransactionLogKey:
    """``TransactionLogKey`` (version 0, the record type's only one)."""

    transactional_id: str

    def to_bytes(self) -> bytes:
        """Kafka's ``TransactionLog.keyToBytes``: the record type, then the id."""
        return _I16.pack(TRANSACTION_LOG_RECORD_TYPE) + _string(self.transactional_id, False)

    @classmethod
    def from_bytes(cls, data: bytes) -> TransactionLogKey:
        """Decode a key; :class:`UnknownRecordTypeError` for another record type,
        :class:`CorruptRecordError` (position in ``data``) for bytes that do not
        decode."""
        r = _Reader(data, 0, "key")
        if len(data) < 2:
            raise CorruptRecordError("Could not read version from key's buffer.", position=0)
        record_type = r.int16()
        if record_type != TRANSACTION_LOG_RECORD_TYPE:
            raise UnknownRecordTypeError(record_type)
        try:
            return cls(r.string("transactionalId", False))
        except CorruptRecordError as exc:
            raise _wrapped(exc, record_type, "key") from None


def _wrapped(exc: CorruptRecordError, version: int, what: str) -> CorruptRecordError:
    # CoordinatorRecordSerde.readMessage's text around the reader's
    return CorruptRecordError(f"Could not read record with version {version} from "
                              f"{what}'s buffer due to: {exc.message}.",
                              position=exc.position)


@dataclass
class TransactionLogValue:
    """``TransactionLogValue``: a transactional id's state.

    ``transaction_partitions`` is ``[(topic, [partition, ...]), ...]`` or None (Kafka
    writes null for the Empty state)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: list[tuple[str, list[int]]] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    #: the version it was read at (or is to be written at)
    version: int = field(default=WRITE_VERSION, compare=False)

    def to_bytes(self, version: int | None = None) -> bytes:
        """``[int16 version][fields]``, at ``version`` (default: :attr:`version`)."""
        v = self.version if version is None else version
        if v not in VALUE_VERSIONS:
            raise ValueError(f"TransactionLogValue has no version {v}")
        flex = v >= 1
        out = [_I16.pack(v), _I64.pack(self.producer_id), _I16.pack(self.producer_epoch),
               _I32.pack(self.transaction_timeout_ms),
               struct.pack(">b", self.transaction_status)]
        parts = self.transaction_partitions
        if parts is None:
            out.append(_uvarint(0) if flex else _I32.pack(-1))
        else:
            out.append(_uvarint(len(parts) + 1) if flex else _I32.pack(len(parts)))
            for topic, ids in parts:
                out.append(_string(topic, flex))
                out.append(_uvarint(len(ids) + 1) if flex else _I32.pack(len(ids)))
                out.extend(_I32.pack(p) for p in ids)
                if flex:
                    out.append(b"\0")   # the struct's tagged fields: none
        out.append(_I64.pack(self.transaction_last_update_timestamp_ms))
        out.append(_I64.pack(self.transaction_start_timestamp_ms))
        if flex:
            # tagged fields, in tag order, each only when not its default (Kafka's
            # generated write)
            tagged = []
            if self.previous_producer_id != -1:
                tagged.append(_uvarint(0) + _uvarint(8) + _I64.pack(self.previous_producer_id))
            if self.next_producer_id != -1:
                tagged.append(_uvarint(1) + _uvarint(8) + _I64.pack(self.next_producer_id))
            if self.client_transaction_version != 0:
                tagged.append(_uvarint(2) + _uvarint(2)
                              + _I16.pack(self.client_transaction_version))
            out.append(_uvarint(len(tagged)))
            out.extend(tagged)
        return b"".join(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> TransactionLogValue:
        """Decode a value (version 0 or 1); :class:`CorruptRecordError` with the
        position in ``data`` for bytes that do not decode (trailing bytes are ignored,
        as Kafka's reader ignores them)."""
        if len(data) < 2:
            raise CorruptRecordError("Could not read version from value's buffer.",
                                     position=0)
        version = _I16.unpack_from(data, 0)[0]
        if version not in VALUE_VERSIONS:
            raise CorruptRecordError(
                f"Could not read record with version {version} from value's buffer due "
                f"to: Can't read version {version} of TransactionLogValue.", position=0)
        try:
            return cls._read(_Reader(data, 2, "value"), version)
        except CorruptRecordError as exc:
            raise _wrapped(exc, version, "value") from None

    @classmethod
    def _read(cls, r: _Reader, version: int) -> TransactionLogValue:
        flex = version >= 1
        producer_id = r.int64()
        epoch = r.int16()
        timeout = r.int32()
        status = r.int8()
        n = r.array_length("transactionPartitions", flex, True)
        parts: list[tuple[str, list[int]]] | None = None
        if n >= 0:
            parts = []
            for _ in range(n):
                topic = r.string("topic", flex)
                m = r.array_length("partitionIds", flex, False)
                ids = [r.int32() for _ in range(m)]
                if flex:
                    _skip_tagged(r)
                parts.append((topic, ids))
        value = cls(producer_id, epoch, timeout, status, parts, r.int64(), r.int64(),
                    version=version)
        if flex:
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                if tag == 0:
                    value.previous_producer_id = r.int64()
                elif tag == 1:
                    value.next_producer_id = r.int64()
                elif tag == 2:
                    value.client_transaction_version = r.int16()
                else:
                    r.raw(size)   # an unknown tagged field: kept by Kafka, skipped here
        return value

    @property
    def state(self) -> TransactionState:
        """The status as a :class:`TransactionState`; :class:`CorruptRecordError` for
        an id Kafka does not know (``TransactionState.fromId``)."""
        try:
            return TransactionState(self.transaction_status)
        except ValueError:
            raise CorruptRecordError(f"Unknown transaction state id "
                                     f"{self.transaction_status} from the transaction "
                                     f"status message") from None

    def to_json(self) -> dict:
        """Kafka's generated ``TransactionLogValueJsonConverter.write`` (tagged fields
        only when not their default)."""
        out: dict = {"producerId": self.producer_id}
        if self.version >= 1 and self.previous_producer_id != -1:
            out["previousProducerId"] = self.previous_producer_id
        if self.version >= 1 and self.next_producer_id != -1:
            out["nextProducerId"] = self.next_producer_id
        out["producerEpoch"] = self.producer_epoch
        out["transactionTimeoutMs"] = self.transaction_timeout_ms
        out["transactionStatus"] = self.transaction_status
        out["transactionPartitions"] = None if self.transaction_partitions is None else [
            {"topic": t, "partitionIds": list(ids)} for t, ids in self.transaction_partitions]
        out["transactionLastUpdateTimestampMs"] = self.transaction_last_update_timestamp_ms
        out["transactionStartTimestampMs"] = self.transaction_start_timestamp_ms
        if self.version >= 1 and self.client_transaction_version != 0:
            out["clientTransactionVersion"] = self.client_transaction_version
        return out


def _skip_tagged(r: _Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.raw(r.uvarint())


def parse_for_dump(key: bytes | None, value: bytes | None,
                   offset: int = 0) -> tuple[str | None, str | None]:
    """What ``kafka-dump-log.sh --transaction-log-decoder`` prints for a record: (the
    key's text, the payload's text), None for what it leaves out
    (``DumpLogSegments.CoordinatorRecordMessageParser.parse``).

    A record without a key raises :class:`CorruptRecordError` (Kafka's parser throws,
    ending the dump); an unknown record type and bytes that do not decode are reported
    in the key's text, as Kafka's."""
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using the "
                                 "specified decoder (message had a missing key)",
                                 offset=offset)
    try:
        k = TransactionLogKey.from_bytes(bytes(key))
        v = None if value is None else TransactionLogValue.from_bytes(bytes(value))
    except UnknownRecordTypeError as exc:
        return (f"Unknown record type {exc.record_type} at offset {offset}, skipping.", None)
    except CorruptRecordError as exc:
        return (f"Error at offset {offset}, skipping. {exc.message}", None)
    key_text = _json({"type": str(TRANSACTION_LOG_RECORD_TYPE),
                      "data": {"transactionalId": k.transactional_id}})
    if v is None:
        return key_text, "<DELETE>"
    return key_text, _json({"version": str(v.version), "data": v.to_json()})
