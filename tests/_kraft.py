"""KRaft metadata records built byte by byte from Kafka's JSON schemas, for the tests.

(metadata/src/main/resources/common/metadata/{TopicRecord,ConfigRecord,RemoveTopicRecord}.json,
all ``"flexibleVersions": "0+"``, and the frame of ``AbstractApiMessageSerde``: unsigned
varint frame version 1, apiKey, version.) The encoder shares nothing with
``kafkastore.cluster_metadata``'s reader; kafkastore's ``encode_batch`` wraps the records
into v2 batches, written as ``.log`` segments and ``<offset>-<epoch>.checkpoint``
snapshots of a ``__cluster_metadata-0`` directory.
"""

from __future__ import annotations

import struct
import uuid

from kafkastore.records import encode_batch

TOPIC, BROKER = 2, 4


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def compact_string(s: str | None) -> bytes:
    """A flexible-version (nullable) string: unsigned varint length + 1, 0 for null."""
    if s is None:
        return b"\x00"
    data = s.encode("utf-8")
    return uvarint(len(data) + 1) + data


NO_TAGS = b"\x00"   # an empty tagged-fields section


def frame(api_key: int, version: int, body: bytes, *, frame_version: int = 1) -> bytes:
    return uvarint(frame_version) + uvarint(api_key) + uvarint(version) + body


def topic_record(name: str, topic_id: uuid.UUID, **kw) -> bytes:
    # TopicRecord (apiKey 2) v0: Name string, TopicId uuid
    return frame(2, 0, compact_string(name) + topic_id.bytes + NO_TAGS, **kw)


def remove_topic_record(topic_id: uuid.UUID) -> bytes:
    # RemoveTopicRecord (apiKey 9) v0: TopicId uuid
    return frame(9, 0, topic_id.bytes + NO_TAGS)


def config_record(rtype: int, rname: str, name: str, value: str | None,
                  tags: bytes = NO_TAGS) -> bytes:
    # ConfigRecord (apiKey 4) v0: ResourceType int8, ResourceName, Name, Value (nullable)
    body = struct.pack(">b", rtype) + compact_string(rname) + compact_string(name)
    return frame(4, 0, body + compact_string(value) + tags)


def txn_record(api_key: int) -> bytes:
    # Begin/End/AbortTransactionRecord (23/24/25) v0; Begin's Name is a nullable string
    return frame(api_key, 0, (b"\x00" if api_key == 23 else b"") + NO_TAGS)


def control_batch(ctype: int, base_offset: int) -> bytes:
    """SnapshotHeader (3) / SnapshotFooter (4) control batch as Kafka writes snapshots."""
    key = struct.pack(">hh", 0, ctype)
    value = struct.pack(">hq", 0, 0) + NO_TAGS if ctype == 3 else struct.pack(">h", 0) + NO_TAGS
    return encode_batch([(key, value)], base_offset=base_offset, timestamp=0, is_control=True)


def batches(values: list[bytes], base_offset: int, per_batch: int = 2, **kw) -> bytes:
    out = b""
    for i in range(0, len(values), per_batch):
        out += encode_batch([(None, v) for v in values[i:i + per_batch]],
                            base_offset=base_offset + i, timestamp=0, **kw)
    return out


def write_segment(d, base_offset: int, values: list[bytes], **kw):
    path = d / f"{base_offset:020d}.log"
    path.write_bytes(batches(values, base_offset, **kw))
    return path


def write_snapshot(d, end_offset: int, values: list[bytes], epoch: int = 1):
    path = d / f"{end_offset:020d}-{epoch:010d}.checkpoint"
    path.write_bytes(control_batch(3, 0) + batches(values, 0)
                     + control_batch(4, max(len(values), 1)))
    return path
