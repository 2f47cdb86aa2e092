"""``__consumer_offsets`` records (issue 30): the bytes Kafka writes, built here field by
field from Kafka's schemas (group-coordinator/src/main/resources/common/message/
OffsetCommitKey.json, OffsetCommitValue.json, GroupMetadataKey.json, GroupMetadataValue.json),
the versions Kafka reads, typed errors for bytes that do not decode, and the text of
``kafka-dump-log.sh --offsets-decoder`` (DumpLogSegments.OffsetsMessageParser)."""

from __future__ import annotations

import base64
import struct

import pytest

from kafkastore.errors import CorruptRecordError
from kafkastore.internal_topics import group_records as gr


def s16(s):           # a non-flexible string: int16 length, UTF-8
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def cs(s):            # a compact string (flexible versions): uvarint length + 1
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


def i16(n):
    return struct.pack(">h", n)


def i32(n):
    return struct.pack(">i", n)


def i64(n):
    return struct.pack(">q", n)


# -- keys ---------------------------------------------------------------------------------

def test_offset_commit_key_is_kafkas_bytes():
    # record type 1 (OffsetCommitKey's apiKey), group, topic, partition
    expected = i16(1) + s16("grp") + s16("orders") + i32(7)
    key = gr.OffsetCommitKey("grp", "orders", 7)
    assert key.to_bytes() == expected
    assert gr.decode_key(expected) == key


def test_legacy_offset_commit_key_is_read():
    legacy = i16(0) + s16("grp") + s16("t") + i32(0)
    key = gr.decode_key(legacy)
    assert (key.group, key.topic, key.partition, key.record_type) == ("grp", "t", 0, 0)


def test_group_metadata_key_is_kafkas_bytes():
    expected = i16(2) + s16("grp")
    assert gr.GroupMetadataKey("grp").to_bytes() == expected
    assert gr.decode_key(expected) == gr.GroupMetadataKey("grp")


# -- offset values ------------------------------------------------------------------------

def test_offset_value_written_at_v3_as_kafka():
    # v3: offset, leaderEpoch, metadata, commitTimestamp
    expected = i16(3) + i64(42) + i32(5) + s16("meta") + i64(1700000000000)
    value = gr.OffsetCommitValue(42, "meta", 1700000000000, leader_epoch=5)
    assert value.to_bytes() == expected
    back = gr.decode_offset_value(expected)
    assert (back.offset, back.metadata, back.commit_timestamp, back.leader_epoch,
            back.version) == (42, "meta", 1700000000000, 5, 3)


def test_offset_value_with_expiry_written_at_v1():
    # v1 (Kafka's choice when the commit names an expiry): offset, metadata, commit, expire
    expected = i16(1) + i64(9) + s16("") + i64(100) + i64(200)
    assert gr.OffsetCommitValue(9, "", 100, expire_timestamp=200).to_bytes() == expected
    assert gr.decode_offset_value(expected).expire_timestamp == 200


@pytest.mark.parametrize("version, raw", [
    (0, i16(0) + i64(1) + s16("m") + i64(2)),
    (2, i16(2) + i64(1) + s16("m") + i64(2)),
    # v4: flexible: compact string, then the tagged-field count (here one unknown tag 9)
    (4, i16(4) + i64(1) + i32(-1) + cs("m") + i64(2) + bytes([1, 9, 2]) + b"xy"),
])
def test_offset_value_versions_kafka_reads(version, raw):
    v = gr.decode_offset_value(raw)
    assert (v.offset, v.metadata, v.commit_timestamp, v.version) == (1, "m", 2, version)
    assert gr.decode_offset_value(v.to_bytes(version)) == v


# -- group metadata values -------------------------------------------------------------------

def _member_v3(member_id, instance, client_id, host, rebalance, session, sub, assign):
    inst = i16(-1) if instance is None else s16(instance)
    return (s16(member_id) + inst + s16(client_id) + s16(host) + i32(rebalance) + i32(session)
            + i32(len(sub)) + sub + i32(len(assign)) + assign)


def test_group_metadata_value_written_at_v3_as_kafka():
    expected = (i16(3) + s16("consumer") + i32(4) + s16("range") + s16("m-1")
                + i64(1234) + i32(1)
                + _member_v3("m-1", "static-1", "cli", "/127.0.0.1", 300000, 10000,
                             b"SUB", b"ASSIGN"))
    value = gr.GroupMetadataValue("consumer", 4, "range", "m-1", 1234, (gr.MemberMetadata(
        "m-1", "cli", "/127.0.0.1", 10000, 300000, b"SUB", b"ASSIGN", "static-1"),))
    assert value.to_bytes() == expected
    assert gr.decode_group_value(expected) == gr.GroupMetadataValue(
        *[getattr(value, f) for f in ("protocol_type", "generation", "protocol", "leader",
                                      "current_state_timestamp", "members")], version=3)


def test_empty_group_metadata_value():
    # Kafka's newEmptyGroupMetadataRecord: protocol and leader null, generation 0
    expected = i16(3) + s16("") + i32(0) + i16(-1) + i16(-1) + i64(77) + i32(0)
    assert gr.GroupMetadataValue("", 0, None, None, 77).to_bytes() == expected


def test_group_metadata_v0_reads_session_as_rebalance_timeout():
    raw = (i16(0) + s16("consumer") + i32(1) + s16("range") + s16("a") + i32(1)
           + s16("a") + s16("c") + s16("h") + i32(6000) + i32(0) + i32(0))
    m = gr.decode_group_value(raw).members[0]
    assert (m.session_timeout, m.rebalance_timeout, m.group_instance_id) == (6000, 6000, None)


def test_group_metadata_v4_flexible():
    raw = (i16(4) + cs("consumer") + i32(2) + cs("range") + b"\0" + i64(5) + bytes([2])
           + cs("a") + b"\0" + cs("c") + cs("h") + i32(1) + i32(2) + bytes([2]) + b"s"
           + bytes([1]) + b"\0" + b"\0")
    g = gr.decode_group_value(raw)
    assert (g.leader, g.members[0].group_instance_id, g.members[0].subscription,
            g.members[0].assignment) == (None, None, b"s", b"")
    assert gr.decode_group_value(g.to_bytes(4)) == g


# -- bad bytes ------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, position", [
    (b"\x00", 0),                                  # no room for the record type
    (i16(1) + i16(5) + b"ab", 4),                  # group claims 5 bytes, 2 there
    (i16(1) + s16("g") + s16("t"), 8),             # partition missing
    (i16(2) + i16(-1), 2),                         # null group
    (i16(2) + s16("g") + b"extra", 5),             # bytes after the last field
])
def test_bad_keys_raise_with_position(raw, position):
    with pytest.raises(CorruptRecordError) as info:
        gr.decode_key(raw)
    assert info.value.position == position


def test_unknown_record_type_is_typed():
    with pytest.raises(gr.UnknownRecordTypeError) as info:
        gr.decode_key(i16(3) + s16("g"))   # KIP-848's ConsumerGroupMetadataKey
    assert info.value.record_type == 3


@pytest.mark.parametrize("raw", [
    i16(9) + i64(1),                               # unknown version
    i16(3) + i64(1),                               # truncated
    i16(2) + s16("c") + i32(1) + s16("r") + s16("l") + i64(0) + i32(2 ** 30),  # huge count
])
def test_bad_values_raise(raw):
    with pytest.raises(CorruptRecordError):
        (gr.decode_group_value if len(raw) > 12 else gr.decode_offset_value)(raw)


# -- --offsets-decoder text ---------------------------------------------------------------

def test_dump_text_of_an_offset_commit():
    key = i16(1) + s16("grp") + s16("orders") + i32(7)
    value = i16(3) + i64(42) + i32(-1) + s16("") + i64(1700000000000)
    assert gr.parse_for_dump(key, value, 3) == (
        '{"type":"1","data":{"group":"grp","topic":"orders","partition":7}}',
        '{"version":"3","data":{"offset":42,"leaderEpoch":-1,"metadata":"",'
        '"commitTimestamp":1700000000000}}')
    # a tombstone
    assert gr.parse_for_dump(key, None, 3)[1] == "<DELETE>"


def test_dump_text_of_consumer_group_metadata_decodes_the_protocol():
    # ConsumerProtocolSubscription v1: topics, userData (null), ownedPartitions
    sub = i16(1) + i32(1) + s16("orders") + i32(-1) + i32(1) + s16("orders") + i32(1) + i32(0)
    # ConsumerProtocolAssignment v0: assignedPartitions, userData
    assign = i16(0) + i32(1) + s16("orders") + i32(2) + i32(0) + i32(1) + i32(-1)
    value = (i16(3) + s16("consumer") + i32(1) + s16("range") + s16("m") + i64(5) + i32(1)
             + _member_v3("m", None, "c", "/h", 10, 20, sub, assign))
    key_text, payload = gr.parse_for_dump(i16(2) + s16("grp"), value)
    assert key_text == '{"type":"2","data":{"group":"grp"}}'
    assert payload == (
        '{"version":"3","data":{"protocolType":"consumer","generation":1,"protocol":"range",'
        '"leader":"m","currentStateTimestamp":5,"members":[{"memberId":"m",'
        '"groupInstanceId":null,"clientId":"c","clientHost":"/h","rebalanceTimeout":10,'
        '"sessionTimeout":20,"subscription":{"topics":["orders"],"userData":null,'
        '"ownedPartitions":[{"topic":"orders","partitions":[0]}]},"assignment":'
        '{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}],"userData":null}}]}}')


def test_dump_text_keeps_other_protocols_bytes_as_base64():
    value = (i16(3) + s16("connect") + i32(1) + s16("x") + s16("m") + i64(5) + i32(1)
             + _member_v3("m", None, "c", "/h", 10, 20, b"\x01\x02", b""))
    payload = gr.parse_for_dump(i16(2) + s16("grp"), value)[1]
    assert f'"subscription":"{base64.b64encode(bytes([1, 2])).decode()}"' in payload
    assert '"assignment":""' in payload


def test_dump_text_of_records_that_do_not_decode():
    assert gr.parse_for_dump(i16(3) + s16("g"), b"", 11) == (
        "Unknown record type 3 at offset 11, skipping.", None)
    text, payload = gr.parse_for_dump(i16(1) + s16("g"), b"", 12)
    assert text.startswith("Error at offset 12, skipping. ") and payload is None
    with pytest.raises(CorruptRecordError):
        gr.parse_for_dump(None, b"x", 1)
