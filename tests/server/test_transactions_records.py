"""``__transaction_state`` records (kafkastore.internal_topics.txn_records) against bytes
built by hand, field by field, from Kafka's TransactionLogKey.json / TransactionLogValue.json,
and ``parse_for_dump`` against the texts of Kafka's DumpLogSegmentsTest
(testTransactionLogMessageParser)."""

from __future__ import annotations

import struct

import pytest

from kafkastore.errors import CorruptRecordError
from kafkastore.internal_topics.txn_records import (
    TransactionLogKey, TransactionLogValue, TransactionState, parse_for_dump)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


KEY = i16(0) + i16(5) + b"txnId"


def value_v0(pid=123, epoch=0, timeout=0, status=0, parts=(), last=0, start=0):
    # TransactionLogValue v0: ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs
    # int32, TransactionStatus int8, TransactionPartitions nullable [] (int32 count, each
    # Topic string (int16 length) + PartitionIds []int32), LastUpdate int64, Start int64
    body = i64(pid) + i16(epoch) + i32(timeout) + bytes([status])
    if parts is None:
        body += i32(-1)
    else:
        body += i32(len(parts))
        for topic, ids in parts:
            body += i16(len(topic)) + topic.encode() + i32(len(ids)) + b"".join(map(i32, ids))
    return i16(0) + body + i64(last) + i64(start)


def value_v1_all_fields():
    # v1 is flexible: compact arrays/strings (uvarint length + 1), a tagged-field
    # section after each struct and at the end: tag 0 PreviousProducerId, tag 1
    # NextProducerId (int64 each), tag 2 ClientTransactionVersion (int16, default 0:
    # not written)
    parts = bytes([3])   # 2 entries + 1
    for topic, ids in (("topic1", (0, 1, 2)), ("topic2", (3, 4, 5))):
        parts += bytes([len(topic) + 1]) + topic.encode() + bytes([len(ids) + 1])
        parts += b"".join(map(i32, ids)) + b"\x00"
    tagged = bytes([2]) + bytes([0, 8]) + i64(11) + bytes([1, 8]) + i64(10)
    return (i16(1) + i64(12) + i16(2) + i32(14) + bytes([0]) + parts + i64(123) + i64(13)
            + tagged)


def test_key_bytes_and_round_trip():
    assert TransactionLogKey("txnId").to_bytes() == KEY
    assert TransactionLogKey.from_bytes(KEY) == TransactionLogKey("txnId")
    # a non-ASCII id: the length counts UTF-8 bytes
    k = TransactionLogKey("tx-é")
    assert k.to_bytes() == i16(0) + i16(5) + "tx-é".encode()
    assert TransactionLogKey.from_bytes(k.to_bytes()) == k


def test_value_v0_read():
    v = TransactionLogValue.from_bytes(value_v0(pid=7, epoch=3, timeout=60000, status=1,
                                                parts=[("t", [2, 0])], last=5, start=4))
    assert (v.version, v.producer_id, v.producer_epoch, v.transaction_timeout_ms) == \
        (0, 7, 3, 60000)
    assert v.state is TransactionState.ONGOING
    assert v.transaction_partitions == [("t", [2, 0])]
    assert (v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms) == (5, 4)
    assert v.to_bytes() == value_v0(pid=7, epoch=3, timeout=60000, status=1,
                                    parts=[("t", [2, 0])], last=5, start=4)


def test_value_v1_bytes_with_tagged_fields():
    data = value_v1_all_fields()
    v = TransactionLogValue.from_bytes(data)
    assert (v.version, v.producer_id, v.previous_producer_id, v.next_producer_id) == \
        (1, 12, 11, 10)
    assert v.transaction_partitions == [("topic1", [0, 1, 2]), ("topic2", [3, 4, 5])]
    assert v.to_bytes() == data


def test_value_v1_null_partitions_and_client_version():
    v = TransactionLogValue(5, 1, 1000, int(TransactionState.EMPTY), None, 9, -1,
                            client_transaction_version=2)
    data = v.to_bytes()
    expected = (i16(1) + i64(5) + i16(1) + i32(1000) + bytes([0]) + bytes([0]) + i64(9)
                + i64(-1) + bytes([1]) + bytes([2, 2]) + i16(2))
    assert data == expected
    back = TransactionLogValue.from_bytes(data)
    assert back.transaction_partitions is None and back.client_transaction_version == 2


def test_unknown_tagged_field_skipped():
    data = bytearray(value_v1_all_fields())
    # replace the tagged section with one unknown tag 9 of 3 bytes
    base = data[:-(1 + 10 + 10)]
    v = TransactionLogValue.from_bytes(bytes(base) + bytes([1, 9, 3]) + b"abc")
    assert v.previous_producer_id == -1


def test_state_ids_and_names():
    assert [s.value for s in TransactionState] == list(range(8))
    assert TransactionState.PREPARE_COMMIT.state_name == "PrepareCommit"
    assert TransactionState.from_name("CompleteAbort") is TransactionState.COMPLETE_ABORT
    with pytest.raises(CorruptRecordError):
        _ = TransactionLogValue.from_bytes(value_v0(status=42)).state


@pytest.mark.parametrize("data, message, position", [
    (b"\x00", "Could not read version from value's buffer.", 0),
    (i16(2) + b"\0" * 40, "Could not read record with version 2 from value's buffer due "
     "to: Can't read version 2 of TransactionLogValue.", 0),
    (i16(0) + i64(1), "Could not read record with version 0 from value's buffer due to: "
     "null.", 10),
    (i16(0) + i64(1) + i16(0) + i32(0) + b"\0" + i32(1000), "Could not read record with "
     "version 0 from value's buffer due to: Tried to allocate a collection of size 1000, "
     "but there are only 0 bytes remaining..", 17),   # (Kafka's two periods)
])
def test_value_errors_have_kafkas_text_and_position(data, message, position):
    with pytest.raises(CorruptRecordError) as info:
        TransactionLogValue.from_bytes(data)
    assert info.value.message == message
    assert info.value.position == position


def test_key_errors():
    with pytest.raises(CorruptRecordError) as info:
        TransactionLogKey.from_bytes(i16(0) + i16(10) + b"abc")
    assert info.value.message == ("Could not read record with version 0 from key's buffer "
                                  "due to: Error reading byte array of 10 byte(s): only 3 "
                                  "byte(s) available.")
    assert info.value.position == 4
    with pytest.raises(CorruptRecordError, match="serialized as null"):
        TransactionLogKey.from_bytes(i16(0) + i16(-1))


# -- parse_for_dump: Kafka's DumpLogSegmentsTest.testTransactionLogMessageParser ---------

def test_dump_valid_v0():
    assert parse_for_dump(KEY, value_v0()) == (
        '{"type":"0","data":{"transactionalId":"txnId"}}',
        '{"version":"0","data":{"producerId":123,"producerEpoch":0,"transactionTimeoutMs":0,'
        '"transactionStatus":0,"transactionPartitions":[],"transactionLastUpdateTimestampMs":0,'
        '"transactionStartTimestampMs":0}}')


def test_dump_tombstone():
    assert parse_for_dump(KEY, None) == ('{"type":"0","data":{"transactionalId":"txnId"}}',
                                         "<DELETE>")


def test_dump_unknown_record_type():
    assert parse_for_dump(i16(32767), b"", 0) == (
        "Unknown record type 32767 at offset 0, skipping.", None)


def test_dump_all_fields_v1():
    assert parse_for_dump(KEY, value_v1_all_fields()) == (
        '{"type":"0","data":{"transactionalId":"txnId"}}',
        '{"version":"1","data":{"producerId":12,"previousProducerId":11,"nextProducerId":10,'
        '"producerEpoch":2,"transactionTimeoutMs":14,"transactionStatus":0,'
        '"transactionPartitions":[{"topic":"topic1","partitionIds":[0,1,2]},'
        '{"topic":"topic2","partitionIds":[3,4,5]}],"transactionLastUpdateTimestampMs":123,'
        '"transactionStartTimestampMs":13}}')


def test_dump_missing_key_and_bad_value():
    with pytest.raises(CorruptRecordError, match="Failed to decode message at offset 7 "
                       r"using the specified decoder \(message had a missing key\)"):
        parse_for_dump(None, None, 7)
    assert parse_for_dump(KEY, b"\x00", 3) == (
        "Error at offset 3, skipping. Could not read version from value's buffer.", None)
