"""``__consumer_offsets`` records: Kafka's group coordinator's key and value schemas.

Ported from Kafka's ``group-coordinator/src/main/resources/common/message/`` schemas
(``OffsetCommitKey`` / ``LegacyOffsetCommitKey``, ``OffsetCommitValue``,
``GroupMetadataKey``, ``GroupMetadataValue``) and their reader/writer
(``GroupCoordinatorRecordSerde``, ``GroupCoordinatorRecordHelpers``):

- A key starts with an int16, the record type: 0 (a legacy offset commit key, Kafka
  before 2.x's group metadata key existed), 1 (an offset commit: group, topic,
  partition) or 2 (group metadata: group). Kafka writes 1 and 2.
- A value starts with an int16, its schema version. ``OffsetCommitValue`` has versions
  0-4 (Kafka writes 3, or 1 when the commit carries an explicit expiry: OffsetCommit
  v2-v4's ``retention_time_ms``); ``GroupMetadataValue`` 0-4 (Kafka writes 3). Version 4
  of both is flexible (compact strings and arrays, tagged fields): read, not written.
- A null value is a tombstone: the key is deleted.

Bytes that do not decode raise :class:`~kafkastore.errors.CorruptRecordError` with the
position of the field that failed (:class:`UnknownRecordTypeError` for a key of another
type, such as KIP-848's consumer-group records, which this module does not read).
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field

from kafkastore.errors import CorruptRecordError
from kafkastore.internal_topics._encode import UnknownRecordTypeError
from kafkastore.internal_topics._encode import dump_json as _json
from kafkastore.internal_topics._encode import string as _string
from kafkastore.internal_topics._encode import uvarint as _uvarint

__all__ = [
    "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
    "MemberMetadata", "UnknownRecordTypeError", "decode_key", "decode_offset_value",
    "decode_group_value", "parse_for_dump", "LEGACY_OFFSET_COMMIT", "OFFSET_COMMIT",
    "GROUP_METADATA", "OFFSET_COMMIT_VALUE_VERSION", "GROUP_METADATA_VALUE_VERSION",
]

#: the record types (the key's first int16; Kafka's ``CoordinatorRecordType``)
LEGACY_OFFSET_COMMIT, OFFSET_COMMIT, GROUP_METADATA = 0, 1, 2
#: the value versions Kafka writes (``GroupCoordinatorRecordHelpers``: "the highest
#: supported non-flexible version")
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_EXPIRING_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
_MAX_VALUE_VERSION = 4
_FLEXIBLE = 4


# -- the records ------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    #: 1 (Kafka writes it); 0 for a legacy key read back
    record_type: int = OFFSET_COMMIT

    def to_bytes(self) -> bytes:
        return (struct.pack(">h", self.record_type) + _string(self.group, False)
                + _string(self.topic, False) + struct.pack(">i", self.partition))


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    record_type: int = GROUP_METADATA

    def to_bytes(self) -> bytes:
        return struct.pack(">h", GROUP_METADATA) + _string(self.group, False)


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    #: -1: none (the offset expires by offsets.retention.minutes); else written at v1
    expire_timestamp: int = -1
    #: the version it was read at (None: made here)
    version: int | None = None

    def to_bytes(self, version: int | None = None) -> bytes:
        if version is None:
            version = (OFFSET_COMMIT_VALUE_EXPIRING_VERSION if self.expire_timestamp != -1
                       else OFFSET_COMMIT_VALUE_VERSION)
        if not 0 <= version <= _MAX_VALUE_VERSION:
            raise ValueError(f"OffsetCommitValue has no version {version}")
        flexible = version >= _FLEXIBLE
        out = [struct.pack(">hq", version, self.offset)]
        if version >= 3:
            out.append(struct.pack(">i", self.leader_epoch))
        out.append(_string(self.metadata, flexible))
        out.append(struct.pack(">q", self.commit_timestamp))
        if version == 1:
            out.append(struct.pack(">q", self.expire_timestamp))
        if flexible:
            out.append(b"\0")   # no tagged fields
        return b"".join(out)


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)
    version: int | None = None

    def to_bytes(self, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
        if not 0 <= version <= _MAX_VALUE_VERSION:
            raise ValueError(f"GroupMetadataValue has no version {version}")
        flex = version >= _FLEXIBLE
        out = [struct.pack(">h", version), _string(self.protocol_type, flex),
               struct.pack(">i", self.generation), _nstring(self.protocol, flex),
               _nstring(self.leader, flex)]
        if version >= 2:
            out.append(struct.pack(">q", self.current_state_timestamp))
        out.append(_array_len(len(self.members), flex))
        for m in self.members:
            out.append(_string(m.member_id, flex))
            if version >= 3:
                out.append(_nstring(m.group_instance_id, flex))
            out += [_string(m.client_id, flex), _string(m.client_host, flex)]
            if version >= 1:
                out.append(struct.pack(">i", m.rebalance_timeout))
            out += [struct.pack(">i", m.session_timeout), _bytes(m.subscription, flex),
                    _bytes(m.assignment, flex)]
            if flex:
                out.append(b"\0")
        if flex:
            out.append(b"\0")
        return b"".join(out)


# -- writing ----------------------------------------------------------------------------

def _nstring(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\0" if flexible else b"\xff\xff"
    return _string(s, flexible)


def _bytes(b: bytes, flexible: bool) -> bytes:
    return (_uvarint(len(b) + 1) if flexible else struct.pack(">i", len(b))) + bytes(b)


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else struct.pack(">i", n)


# -- reading ----------------------------------------------------------------------------

class _Reader:
    """A bounds-checked cursor over one key or value (Kafka's ``ByteBufferAccessor``)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = bytes(data), 0

    def _take(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or len(self.data) - start < n:
            raise CorruptRecordError(f"{what}: needs {n} byte(s), {len(self.data) - start} "
                                     f"left", position=start)
        self.pos = start + n
        return start

    def int16(self, what: str) -> int:
        return struct.unpack_from(">h", self.data, self._take(2, what))[0]

    def int32(self, what: str) -> int:
        return struct.unpack_from(">i", self.data, self._take(4, what))[0]

    def int64(self, what: str) -> int:
        return struct.unpack_from(">q", self.data, self._take(8, what))[0]

    def uvarint(self, what: str) -> int:
        start, value, shift = self.pos, 0, 0
        while True:
            b = self.data[self._take(1, what)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptRecordError(f"{what}: varint is too long", position=start)

    def length(self, what: str, flexible: bool, wide: bool = False) -> int:
        """A length prefix: -1 for null."""
        if flexible:
            return self.uvarint(what) - 1
        return self.int32(what) if wide else self.int16(what)

    def string(self, what: str, flexible: bool, nullable: bool = False) -> str | None:
        start = self.pos
        n = self.length(what, flexible)
        if n < 0:
            if nullable and n == -1:
                return None
            raise CorruptRecordError(f"non-nullable field {what} was serialized as null"
                                     if n == -1 else f"{what}: invalid length {n}",
                                     position=start)
        raw = self.data[self._take(n, what):self.pos]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"{what}: not UTF-8", position=start) from None

    def bytes_(self, what: str, flexible: bool) -> bytes:
        start = self.pos
        n = self.length(what, flexible, wide=True)
        if n < 0:
            raise CorruptRecordError(f"non-nullable field {what} was serialized as null",
                                     position=start)
        return self.data[self._take(n, what):self.pos]

    def array(self, what: str, flexible: bool, min_item: int) -> int:
        start = self.pos
        n = self.length(what, flexible, wide=True)
        if n < 0:
            raise CorruptRecordError(f"non-nullable field {what} was serialized as null",
                                     position=start)
        if n * min_item > len(self.data) - self.pos:
            raise CorruptRecordError(f"{what}: {n} entries cannot fit in the "
                                     f"{len(self.data) - self.pos} bytes left", position=start)
        return n

    def tagged_fields(self) -> None:
        """Skip a flexible struct's tagged fields (none are known in these versions)."""
        for _ in range(self.uvarint("tagged fields")):
            self.uvarint("tag")
            self._take(self.uvarint("tag size"), "tagged field")

    def end(self, what: str) -> None:
        if self.pos != len(self.data):
            raise CorruptRecordError(f"{what}: {len(self.data) - self.pos} byte(s) after the "
                                     f"last field", position=self.pos)

    def version(self, what: str) -> int:
        v = self.int16(f"{what} version")
        if not 0 <= v <= _MAX_VALUE_VERSION:
            raise CorruptRecordError(f"Unknown version {v} of {what}", position=0)
        return v


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """The key of a ``__consumer_offsets`` record."""
    r = _Reader(data)
    record_type = r.int16("record type")
    if record_type in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(
            r.string("group", False), r.string("topic", False), r.int32("partition"),
            record_type)
    elif record_type == GROUP_METADATA:
        key = GroupMetadataKey(r.string("group", False))
    else:
        raise UnknownRecordTypeError(record_type)
    r.end("the key")
    return key


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    v = r.version("OffsetCommitValue")
    flex = v >= _FLEXIBLE
    offset = r.int64("offset")
    leader_epoch = r.int32("leaderEpoch") if v >= 3 else -1
    metadata = r.string("metadata", flex)
    commit_ts = r.int64("commitTimestamp")
    expire_ts = r.int64("expireTimestamp") if v == 1 else -1
    if flex:
        r.tagged_fields()
    r.end("OffsetCommitValue")
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts, v)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    v = r.version("GroupMetadataValue")
    flex = v >= _FLEXIBLE
    protocol_type = r.string("protocolType", flex)
    generation = r.int32("generation")
    protocol = r.string("protocol", flex, nullable=True)
    leader = r.string("leader", flex, nullable=True)
    ts = r.int64("currentStateTimestamp") if v >= 2 else -1
    members = []
    # the smallest member (v0): three empty strings, a timeout, two empty byte arrays
    for _ in range(r.array("members", flex, 4 if flex else 18)):
        member_id = r.string("memberId", flex)
        instance = r.string("groupInstanceId", flex, nullable=True) if v >= 3 else None
        client_id = r.string("clientId", flex)
        client_host = r.string("clientHost", flex)
        # v0 had no rebalance timeout: Kafka reads it as the session timeout
        rebalance = r.int32("rebalanceTimeout") if v >= 1 else None
        session = r.int32("sessionTimeout")
        subscription = r.bytes_("subscription", flex)
        assignment = r.bytes_("assignment", flex)
        if flex:
            r.tagged_fields()
        members.append(MemberMetadata(member_id, client_id, client_host, session,
                                      session if rebalance is None else rebalance,
                                      subscription, assignment, instance))
    if flex:
        r.tagged_fields()
    r.end("GroupMetadataValue")
    return GroupMetadataValue(protocol_type, generation, protocol, leader, ts,
                              tuple(members), v)


# -- kafka-dump-log.sh --offsets-decoder ----------------------------------------------------

def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _topic_partitions(r: _Reader, what: str) -> list[dict]:
    out = []
    for _ in range(r.array(what, False, 6)):
        topic = r.string("topic", False)
        parts = [r.int32("partitions") for _ in range(r.array("partitions", False, 4))]
        out.append({"topic": topic, "partitions": parts})
    return out


def _nullable_bytes(r: _Reader, what: str) -> bytes | None:
    n = r.int32(what)
    if n == -1:
        return None
    return r.data[r._take(n, what):r.pos]


def _subscription_json(data: bytes) -> dict:
    """``ConsumerProtocolSubscriptionJsonConverter.write`` (versions 0-3)."""
    r = _Reader(data)
    v = r.int16("version")
    if v < 0:
        raise CorruptRecordError(f"Unknown version {v}", position=0)
    out: dict = {"topics": [r.string("topics", False)
                            for _ in range(r.array("topics", False, 2))],
                 "userData": _b64(_nullable_bytes(r, "userData"))}
    if v >= 1:
        out["ownedPartitions"] = _topic_partitions(r, "ownedPartitions")
    if v >= 2:
        out["generationId"] = r.int32("generationId")
    if v >= 3:
        out["rackId"] = r.string("rackId", False, nullable=True)
    return out


def _assignment_json(data: bytes) -> dict:
    """``ConsumerProtocolAssignmentJsonConverter.write``."""
    r = _Reader(data)
    v = r.int16("version")
    if v < 0:
        raise CorruptRecordError(f"Unknown version {v}", position=0)
    return {"assignedPartitions": _topic_partitions(r, "assignedPartitions"),
            "userData": _b64(_nullable_bytes(r, "userData"))}


def _value_json(key, value: bytes) -> str:
    if isinstance(key, GroupMetadataKey):
        g = decode_group_value(value)
        v = g.version
        data: dict = {"protocolType": g.protocol_type, "generation": g.generation,
                      "protocol": g.protocol, "leader": g.leader}
        if v is not None and v >= 2:
            data["currentStateTimestamp"] = g.current_state_timestamp
        members = []
        for m in g.members:
            md: dict = {"memberId": m.member_id}
            if v is not None and v >= 3:
                md["groupInstanceId"] = m.group_instance_id
            md.update(clientId=m.client_id, clientHost=m.client_host)
            if v is not None and v >= 1:
                md["rebalanceTimeout"] = m.rebalance_timeout
            md.update(sessionTimeout=m.session_timeout)
            # DumpLogSegments.OffsetsMessageParser.prepareGroupMetadataValue: for the
            # "consumer" protocol, the subscription and assignment decoded, else (or when
            # they do not decode) their bytes as base64
            for name, raw, conv in (("subscription", m.subscription, _subscription_json),
                                    ("assignment", m.assignment, _assignment_json)):
                md[name] = _b64(raw)
                if g.protocol_type == "consumer":
                    try:
                        md[name] = conv(raw)
                    except CorruptRecordError:
                        pass
            members.append(md)
        data["members"] = members
    else:
        o = decode_offset_value(value)
        v = o.version
        data = {"offset": o.offset}
        if v is not None and v >= 3:
            data["leaderEpoch"] = o.leader_epoch
        data.update(metadata=o.metadata, commitTimestamp=o.commit_timestamp)
        if v == 1:
            data["expireTimestamp"] = o.expire_timestamp
    return _json({"version": str(v), "data": data})


def parse_for_dump(key: bytes | None, value: bytes | None,
                   offset: int = 0) -> tuple[str | None, str | None]:
    """What ``kafka-dump-log.sh --offsets-decoder`` prints for the record at ``offset``:
    (the key's text, the payload's text), None for what it leaves out.

    Kafka's ``DumpLogSegments.CoordinatorRecordMessageParser``: the key as
    ``{"type":"<record type>","data":{...}}``, the value as
    ``{"version":"<v>","data":{...}}`` (``<DELETE>`` for a tombstone); a record of an
    unknown type or that does not decode is a line of its own and no payload."""
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using the "
                                 "specified decoder (message had a missing key)")
    try:
        k = decode_key(key)
        if isinstance(k, GroupMetadataKey):
            key_text = _json({"type": str(GROUP_METADATA), "data": {"group": k.group}})
        else:
            key_text = _json({"type": str(k.record_type), "data": {
                "group": k.group, "topic": k.topic, "partition": k.partition}})
        payload = "<DELETE>" if value is None else _value_json(k, value)
    except UnknownRecordTypeError as exc:
        return f"Unknown record type {exc.record_type} at offset {offset}, skipping.", None
    except CorruptRecordError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    return key_text, payload
