"""Produce and InitProducerId handlers, called with dicts (no socket, no codec)."""

from __future__ import annotations

import time

import pytest
from _datapath import broker_fixture  # noqa: F401  (the fixture `broker`)
from _datapath import Header, batch, do_produce, make_broker, run

from kafkastore.records import encode_batch, iter_batches
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.handlers import produce


def test_produce_assigns_offsets_stamps_epoch_and_notifies(broker, monkeypatch):
    notified = []
    monkeypatch.setattr(broker, "notify_append", lambda t, p: notified.append((t, p)))
    first = do_produce(broker, "t", 1, batch(3))
    second = do_produce(broker, "t", 1, batch(2))
    assert first["error_code"] == 0 and first["base_offset"] == 0
    assert second["error_code"] == 0 and second["base_offset"] == 3
    assert first["log_append_time_ms"] == -1 and first["log_start_offset"] == 0
    log = broker.log("t", 1)
    assert log.log_end_offset == 5
    # a leader stamps its epoch (0 on a new log) and so records it in the epoch cache
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0)]
    assert [b.partition_leader_epoch for b in log.read(0, 1 << 20).batches()] == [0, 0]
    assert notified == [("t", 1), ("t", 1)]


def test_log_append_time_topic_answers_the_append_time(tmp_path):
    b = make_broker(tmp_path)
    b.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    answer = do_produce(b, "lat", 0, batch(1))
    assert answer["error_code"] == 0 and answer["log_append_time_ms"] >= before
    b.manager.close()


def test_acks_zero_answers_nothing_but_appends(broker):
    assert do_produce(broker, "t", 0, batch(2), acks=0) is None
    assert broker.log("t", 0).log_end_offset == 2


def test_invalid_required_acks(broker):
    answer = do_produce(broker, "t", 0, batch(2), acks=2)
    assert answer["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
    assert broker.log("t", 0).log_end_offset == 0


def test_unknown_topic_is_not_created_by_a_produce(broker):
    # Kafka: produce to a topic the metadata lacks is UNKNOWN_TOPIC_OR_PARTITION; topics
    # are auto-created by Metadata (auto.create.topics.enable is true here)
    assert broker.config["auto.create.topics.enable"] is True
    answer = do_produce(broker, "missing", 0, batch(1))
    assert answer["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert answer["base_offset"] == -1
    assert do_produce(broker, "t", 7, batch(1))["error_code"] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "missing" not in broker.topics()


def test_legacy_magic_refused_from_v3_accepted_before(broker):
    legacy = encode_batch([(b"k", b"v")], magic=1)
    answer = do_produce(broker, "t", 0, legacy, version=3)
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert do_produce(broker, "t", 0, legacy, version=2)["error_code"] == 0
    assert broker.log("t", 0).log_end_offset == 1


def test_two_batches_refused_from_v3(broker):
    answer = do_produce(broker, "t", 0, batch(1) + batch(1))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert broker.log("t", 0).log_end_offset == 0


def test_zstd_refused_before_v7(broker):
    data = batch(2, compression="zstd")
    assert do_produce(broker, "t", 0, data, version=6)["error_code"] == \
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert do_produce(broker, "t", 0, data, version=7)["error_code"] == 0


def test_message_too_large(tmp_path):
    b = make_broker(tmp_path)
    b.create_topic("small", 1, {"max.message.bytes": 200})
    answer = do_produce(b, "small", 0, batch(20, value_size=50))
    assert answer["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
    assert b.log("small", 0).log_end_offset == 0
    b.manager.close()


def test_corrupt_batch_is_the_partition_error(broker):
    data = bytearray(batch(3))
    data[-1] ^= 0xFF   # the CRC no longer matches
    answer = do_produce(broker, "t", 0, bytes(data))
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert do_produce(broker, "t", 1, batch(1))["error_code"] == 0   # others go on


def test_invalid_timestamp_names_the_record(tmp_path):
    b = make_broker(tmp_path)
    b.create_topic("ts", 1, {"message.timestamp.before.max.ms": 60_000})
    now = int(time.time() * 1000)
    records = [(b"a", b"1", now), (b"b", b"2", now), (b"c", b"3", now - 3_600_000)]
    answer = do_produce(b, "ts", 0, encode_batch(records))
    assert answer["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert [e["batch_index"] for e in answer["record_errors"]] == [2]
    assert "out of range" in answer["record_errors"][0]["batch_index_error_message"]
    assert answer["error_message"] == \
        "One or more records have been rejected due to invalid timestamp"
    assert answer["log_start_offset"] == 0
    b.manager.close()


def test_compacted_topic_record_without_key(tmp_path):
    b = make_broker(tmp_path)
    b.create_topic("c", 1, {"cleanup.policy": "compact"})
    answer = do_produce(b, "c", 0, encode_batch([(b"k", b"1"), (None, b"2")]))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert [e["batch_index"] for e in answer["record_errors"]] == [1]
    assert answer["error_message"].startswith("One or more records have been rejected")
    b.manager.close()


def test_idempotent_duplicate_sequence_and_epoch(broker):
    def idem(seq, n=2, epoch=0):
        return batch(n, producer_id=7, producer_epoch=epoch, base_sequence=seq)

    assert do_produce(broker, "t", 0, batch(4))["base_offset"] == 0
    first = do_produce(broker, "t", 0, idem(0))
    assert first["error_code"] == 0 and first["base_offset"] == 4
    # a retry: Kafka answers NONE with the retried batch's offsets, writes nothing
    retry = do_produce(broker, "t", 0, idem(0))
    assert retry["error_code"] == 0 and retry["base_offset"] == 4
    assert broker.log("t", 0).log_end_offset == 6
    assert do_produce(broker, "t", 0, idem(5))["error_code"] == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert do_produce(broker, "t", 0, idem(0, epoch=1))["error_code"] == 0
    assert do_produce(broker, "t", 0, idem(2, epoch=0))["error_code"] == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    offsets = [r.offset for r in broker.log("t", 0).read(0, 1 << 20).records()]
    assert offsets == list(range(8))


def test_every_partition_answered_in_order(broker):
    request = {"acks": 1, "timeout_ms": 100, "transactional_id": None, "topic_data": [
        {"name": "t", "partition_data": [{"index": 1, "records": batch(1)},
                                         {"index": 0, "records": b"\x00" * 5}]},
        {"name": "nope", "partition_data": [{"index": 0, "records": batch(1)}]}]}
    response = run(produce.produce(broker, Header(0, 9), request))
    got = [(t["name"], p["index"], p["error_code"]) for t in response["responses"]
           for p in t["partition_responses"]]
    assert got == [("t", 1, 0), ("t", 0, ErrorCode.INVALID_RECORD),
                   ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


# -- InitProducerId ------------------------------------------------------------------------

def init_pid(broker, **fields):
    request = {"transactional_id": None, "transaction_timeout_ms": 60000,
               "producer_id": -1, "producer_epoch": -1, **fields}
    return run(produce.init_producer_id(broker, Header(22, 4), request))


def test_init_producer_id_never_repeats_across_restarts(tmp_path):
    b = make_broker(tmp_path)
    ids = [init_pid(b)["producer_id"] for _ in range(3)]
    assert ids == sorted(set(ids)) and all(init_pid(b)["producer_epoch"] == 0 for _ in "x")
    recorded = int((tmp_path / produce.PRODUCER_ID_BLOCK_FILE).read_text())
    assert recorded > max(ids)
    b.manager.close()
    b2 = make_broker(tmp_path)   # a restart: a new block, past everything handed out
    assert init_pid(b2)["producer_id"] >= recorded
    b2.manager.close()


def test_init_producer_id_starts_past_the_logs_producers(tmp_path):
    # a directory without the block file (written by Kafka, say): past the logs' ids
    b = make_broker(tmp_path)
    b.create_topic("t", 1)
    b.log("t", 0).append_batches(batch(1, producer_id=5000, producer_epoch=0,
                                       base_sequence=0))
    assert init_pid(b)["producer_id"] == 5001
    b.manager.close()


def test_init_producer_id_bumps_by_a_new_id_and_checks_the_pair(tmp_path):
    b = make_broker(tmp_path)
    first = init_pid(b)
    # Kafka's TransactionCoordinator: a null transactional id always gets a new id at
    # epoch 0, also when the producer sends its current id and epoch
    again = init_pid(b, producer_id=first["producer_id"], producer_epoch=0)
    assert again["error_code"] == 0 and again["producer_id"] != first["producer_id"]
    assert again["producer_epoch"] == 0
    assert init_pid(b, producer_id=3)["error_code"] == ErrorCode.INVALID_REQUEST
    assert init_pid(b, transactional_id="tx")["error_code"] == \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    b.manager.close()


def test_produced_batches_decode_with_an_independent_decoder(broker):
    kafka_record = pytest.importorskip("kafka.record", reason="kafka-python is the oracle")
    do_produce(broker, "t", 0, batch(2))
    do_produce(broker, "t", 0, batch(3, start=2, compression="gzip"))
    data = broker.log("t", 0).read(0, 1 << 20).to_bytes()
    records = kafka_record.MemoryRecords(data)
    got = []
    while (b := records.next_batch()) is not None:
        got.extend((r.offset, r.key) for r in b)
    assert got == [(i, b"k%d" % i) for i in range(5)]
    assert len(list(iter_batches(data))) == 2


def test_batch_level_refusal_has_no_record_errors(tmp_path):
    # LogValidator.validateBatch's refusals are plain InvalidRecordExceptions: no
    # record_errors, no custom error_message (ReplicaManager's hasCustomErrorMessage)
    b = make_broker(tmp_path)
    b.create_topic("c", 1, {"cleanup.policy": "compact"})
    answer = do_produce(b, "c", 0, encode_batch([(b"k", b"v")], base_offset=5))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert answer["record_errors"] == [] and answer["error_message"] is None
    b.manager.close()
