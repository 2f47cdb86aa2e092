"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords handlers, called with dicts."""

from __future__ import annotations

from _datapath import broker_fixture  # noqa: F401  (the fixture `broker`)
from _datapath import Header, batch, delete_records, do_produce, list_offsets, make_broker, \
    run

from kafkastore.records import ControlRecordType, encode_batch
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.handlers import offsets


def test_list_offsets_special_timestamps_and_lookup(broker):
    log = broker.log("t", 0)
    for ts in (1000, 5000, 3000):
        do_produce(broker, "t", 0, encode_batch([(b"k", b"v", ts), (b"k", b"w", ts + 1)]))
    assert list_offsets(broker, "t", 0, -1) == {
        "partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 6,
        "leader_epoch": 0}
    assert list_offsets(broker, "t", 0, -2)["offset"] == 0
    assert list_offsets(broker, "t", 0, -4)["offset"] == 0
    top = list_offsets(broker, "t", 0, -3)   # KIP-734: the record with the max timestamp
    assert (top["timestamp"], top["offset"]) == (5001, 3)
    assert list_offsets(broker, "t", 0, -5)["offset"] == -1   # no tiered storage
    found = list_offsets(broker, "t", 0, 2000)
    assert (found["timestamp"], found["offset"], found["leader_epoch"]) == (5000, 2, 0)
    none = list_offsets(broker, "t", 0, 10_000)
    assert (none["error_code"], none["timestamp"], none["offset"]) == (0, -1, -1)
    assert log.log_end_offset == 6


def test_list_offsets_latest_read_committed_is_the_lso(broker):
    do_produce(broker, "t", 0, batch(2))
    broker.log("t", 0).append_batches(batch(1, producer_id=4, producer_epoch=0,
                                            base_sequence=0, is_transactional=True))
    assert list_offsets(broker, "t", 0, -1, isolation_level=1)["offset"] == 2
    assert list_offsets(broker, "t", 0, -1, isolation_level=0)["offset"] == 3
    broker.log("t", 0).append_end_txn_marker(4, 0, ControlRecordType.COMMIT)
    assert list_offsets(broker, "t", 0, -1, isolation_level=1)["offset"] == 4


def test_list_offsets_errors(broker):
    assert list_offsets(broker, "nope", 0, -1)["error_code"] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    do_produce(broker, "t", 0, batch(1))
    assert list_offsets(broker, "t", 0, -1, current_leader_epoch=3)["error_code"] == \
        ErrorCode.UNKNOWN_LEADER_EPOCH
    broker.log("t", 0).leader_epoch_cache.assign(2, 1)
    assert list_offsets(broker, "t", 0, -1, current_leader_epoch=1)["error_code"] == \
        ErrorCode.FENCED_LEADER_EPOCH
    assert list_offsets(broker, "t", 0, -1, current_leader_epoch=2)["leader_epoch"] == 2


def epoch_end(broker, epoch, current=-1, topic="t"):
    request = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
    response = run(offsets.offset_for_leader_epoch(broker, Header(23, 4), request))
    return response["topics"][0]["partitions"][0]


def test_offset_for_leader_epoch(broker):
    assert epoch_end(broker, 0) == {"partition": 0, "error_code": 0, "leader_epoch": -1,
                                    "end_offset": -1}   # no epochs yet
    do_produce(broker, "t", 0, batch(3))                  # epoch 0 from 0
    broker.log("t", 0).leader_epoch_cache.assign(2, 3)    # a later leader from 3
    do_produce(broker, "t", 0, batch(2))                  # stamped 2: 3-4
    assert (epoch_end(broker, 0)["leader_epoch"], epoch_end(broker, 0)["end_offset"]) == (0, 3)
    assert (epoch_end(broker, 1)["leader_epoch"], epoch_end(broker, 1)["end_offset"]) == (0, 3)
    assert (epoch_end(broker, 2)["leader_epoch"], epoch_end(broker, 2)["end_offset"]) == (2, 5)
    assert epoch_end(broker, 0, current=1)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert epoch_end(broker, 0, current=3)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert epoch_end(broker, 0, topic="x")["error_code"] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_records(broker):
    for _ in range(3):
        do_produce(broker, "t", 0, batch(2))
    assert delete_records(broker, "t", 0, 7)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert delete_records(broker, "t", 0, -2)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert delete_records(broker, "t", 0, 2) == {"partition_index": 0, "error_code": 0,
                                                   "low_watermark": 2}
    assert delete_records(broker, "t", 0, 1)["low_watermark"] == 2   # never backwards
    assert delete_records(broker, "t", 0, -1)["low_watermark"] == 6  # -1: high watermark
    assert broker.log("t", 0).log_start_offset == 6
    assert list_offsets(broker, "t", 0, -2)["offset"] == 6
    assert delete_records(broker, "x", 0, 0)["error_code"] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_records_refused_on_a_compact_only_topic(tmp_path):
    b = make_broker(tmp_path)
    b.create_topic("c", 1, {"cleanup.policy": "compact"})
    do_produce(b, "c", 0, batch(2))
    assert delete_records(b, "c", 0, 1)["error_code"] == ErrorCode.POLICY_VIOLATION
    assert b.log("c", 0).log_start_offset == 0
    b.manager.close()
