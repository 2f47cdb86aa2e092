"""Control records as ``kafka-dump-log.sh`` prints them (``DumpLogSegments.printBatchLevel``'s
record lines).

A transaction marker prints ``endTxnMarker: COMMIT coordinatorEpoch: N``; a KRaft control
record (SnapshotHeader, SnapshotFooter, KRaftVersion, KRaftVoters) prints its label and the
record as Kafka's ``*JsonConverter.write`` renders it with Jackson; any other type prints
``controlType: NAME(id)``. :func:`control_info` gives the text and the same facts as a
JSON field.

A KRaft control record's value is an int16 version, then the message (Kafka's
``ControlRecordUtils``), read with the shared KRaft message reader
(:class:`kafkastore.kraft_message.MessageReader`); a value that does not parse raises
:class:`~kafkastore.errors.CorruptRecordError` with the record's offset. Strings are
decoded as Java decodes them. Stateless: safe from any thread.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkastore.dump.java_format import jackson, java_utf8
from kafkastore.errors import CorruptRecordError
from kafkastore.kraft_message import MessageReader, kafka_uuid_string
from kafkastore.records import parse_control_record
from kafkastore.types import ControlRecordType

__all__ = ["control_info"]

_CONTROL_KEY = struct.Struct(">hh")  # version, type

_KRAFT_LABELS = {
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}


class _ControlValue(MessageReader):
    """A KRaft control record's value; its errors carry the record's offset, worded as
    the dump has always worded them."""

    __slots__ = ("offset",)

    def __init__(self, data: bytes, offset: int) -> None:
        super().__init__(bytes(data))
        self.offset = offset

    def error(self, message: str) -> CorruptRecordError:
        return CorruptRecordError(message, offset=self.offset)

    def truncated(self, what: str, n: int) -> CorruptRecordError:
        return self.error("control record value ends before its message does")

    def bad_varint(self, what: str, at: int, truncated: bool) -> CorruptRecordError:
        if truncated:
            return self.truncated(what, 1)
        return self.error("Varint is too long")

    def decode(self, raw: bytes) -> str:
        return java_utf8(raw)


def _kraft_record(ctype: ControlRecordType, value: bytes | None, offset: int) -> dict:
    """The control record's value as the field map Kafka's ``*JsonConverter.write`` gives."""
    if value is None:
        raise CorruptRecordError(f"{ctype.name} control record has a null value",
                                 offset=offset)
    r = _ControlValue(value, offset)
    out: dict[str, Any] = {"version": r.int16("version")}
    if ctype == ControlRecordType.SNAPSHOT_HEADER:
        out["lastContainedLogTimestamp"] = r.int64("lastContainedLogTimestamp")
    elif ctype == ControlRecordType.KRAFT_VERSION:
        out["kRaftVersion"] = r.int16("kRaftVersion")
    elif ctype == ControlRecordType.KRAFT_VOTERS:
        voters = []
        for _ in range(r.array_length("voters")):
            voter: dict[str, Any] = {"voterId": r.int32("voterId"),
                                     "voterUuid": kafka_uuid_string(r.uuid("voterUuid"))}
            endpoints = []
            for _ in range(r.array_length("endpoints")):
                endpoint = {"name": r.string("name"), "host": r.string("host"),
                            "port": r.uint16("port")}
                r.tagged_fields("Endpoint")
                endpoints.append(endpoint)
            voter["endpoints"] = endpoints
            feature = {"minSupportedVersion": r.int16("minSupportedVersion"),
                       "maxSupportedVersion": r.int16("maxSupportedVersion")}
            r.tagged_fields("KRaftVersionFeature")
            voter["kRaftVersionFeature"] = feature
            r.tagged_fields("Voter")
            voters.append(voter)
        out["voters"] = voters
    r.tagged_fields(_KRAFT_LABELS[ctype])
    return out


def control_info(record) -> tuple[str, dict]:
    """A control record as Kafka prints it (text) and as a JSON field."""
    parsed = parse_control_record(record)   # validates the key (and a marker's value)
    type_id = _CONTROL_KEY.unpack_from(record.key)[1]
    ctype = parsed.type
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return (f" endTxnMarker: {ctype.name} coordinatorEpoch: {parsed.coordinator_epoch}",
                {"type": ctype.name, "id": type_id,
                 "coordinatorEpoch": parsed.coordinator_epoch})
    label = _KRAFT_LABELS.get(ctype)
    if label is not None:
        data = _kraft_record(ctype, record.value, record.offset)
        return f" {label} {jackson(data)}", {"type": ctype.name, "id": type_id, "data": data}
    return f" controlType: {ctype.name}({type_id})", {"type": ctype.name, "id": type_id}
