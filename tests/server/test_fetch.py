"""Fetch handler: zero-copy regions, KIP-74, long polls, read_committed, sessions."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from _datapath import broker_fixture  # noqa: F401  (the fixture `broker`)
from _datapath import Header, batch, delete_records, do_fetch, do_produce, fetch_request, \
    make_broker, partitions_of, produce_request, region_bytes

from kafkastore.records import ControlRecordType, iter_batches
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.handlers import fetch, produce
from kafkastore.server.handlers.offsets import topic_id_bytes


def decode_kafka_python(data: bytes) -> list[tuple[int, bytes]]:
    kafka_record = pytest.importorskip("kafka.record", reason="kafka-python is the oracle")
    records = kafka_record.MemoryRecords(data)
    out = []
    while (b := records.next_batch()) is not None:
        out.extend((r.offset, r.value) for r in b)
    return out


def test_fetch_returns_segment_bytes_as_a_region(broker):
    for n in (2, 3):
        do_produce(broker, "t", 0, batch(n))
    response = do_fetch(broker, fetch_request([("t", 0, 0)]))
    assert response["error_code"] == 0 and response["session_id"] == 0
    (p,) = partitions_of(response)
    assert p["error_code"] == 0 and p["partition_index"] == 0
    assert (p["high_watermark"], p["last_stable_offset"], p["log_start_offset"]) == (5, 5, 0)
    assert p["aborted_transactions"] is None and p["preferred_read_replica"] == -1
    region = p["records"]
    assert isinstance(region, fetch.FileRegion)
    assert os.path.samefile(f"/proc/self/fd/{region.file.fileno()}",
                            broker.log("t", 0).active_segment.log.path)
    got = decode_kafka_python(region_bytes(region))
    assert [o for o, _ in got] == [0, 1, 2, 3, 4]
    assert [v[:3] for _, v in got] == [b"v0-", b"v1-", b"v0-", b"v1-", b"v2-"]


def test_region_survives_the_segment_going_away(tmp_path):
    b = make_broker(tmp_path, log_config={"segment.bytes": 1024, "file.delete.delay.ms": 0})
    b.create_topic("t", 1)
    log = b.log("t", 0)
    for _ in range(6):
        do_produce(b, "t", 0, batch(5, value_size=100))
    assert len(log.segments) > 1
    (p,) = partitions_of(do_fetch(b, fetch_request([("t", 0, 0, 200)])))
    expected = log.read(0, 200).to_bytes()
    # the first segment is deleted and its file closed before the connection sends
    assert delete_records(b, "t", 0, log.segments[1].base_offset)["error_code"] == 0
    log.delete_segments([log.segments[0]])
    log.delete_pending_segments(force=True)
    assert region_bytes(p["records"]) == expected
    b.manager.close()


def test_first_batch_larger_than_max_bytes_comes_whole(broker):
    do_produce(broker, "t", 0, batch(10, value_size=500))   # one batch of ~5 KB
    do_produce(broker, "t", 0, batch(1))
    do_produce(broker, "t", 1, batch(1))
    response = do_fetch(broker, fetch_request([("t", 0, 0, 100), ("t", 1, 0, 100)],
                                              max_bytes=100))
    p0, p1 = partitions_of(response)
    data = region_bytes(p0["records"])
    batches = list(iter_batches(data))
    assert len(batches) == 1 and batches[0].last_offset == 9   # KIP-74: whole, only it
    # the response's max_bytes is spent: the next partition gets nothing (no error)
    assert p1["error_code"] == 0 and region_bytes(p1["records"]) == b""
    assert p1["high_watermark"] == 1


def test_unknown_partition_and_out_of_range(broker):
    do_produce(broker, "t", 0, batch(2))
    response = do_fetch(broker, fetch_request([("t", 0, 3), ("nope", 0, 0), ("t", 0, 2)]))
    codes = [p["error_code"] for p in partitions_of(response)]   # (grouped by topic)
    assert codes == [ErrorCode.OFFSET_OUT_OF_RANGE, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    # ReplicaManager.readFromLocalLog's failure: offsets unknown
    assert partitions_of(response)[0]["high_watermark"] == -1


def test_delete_records_then_fetch_below_log_start(broker):
    for _ in range(3):
        do_produce(broker, "t", 0, batch(2))
    assert delete_records(broker, "t", 0, 4) == {"error_code": 0, "low_watermark": 4,
                                                   "partition_index": 0}
    (p,) = partitions_of(do_fetch(broker, fetch_request([("t", 0, 1)])))
    assert p["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    (p,) = partitions_of(do_fetch(broker, fetch_request([("t", 0, 4)])))
    assert p["error_code"] == 0 and p["log_start_offset"] == 4
    assert [o for o, _ in decode_kafka_python(region_bytes(p["records"]))] == [4, 5]


def test_current_leader_epoch_checked(broker):
    do_produce(broker, "t", 0, batch(1))   # epoch 0 from the first append
    request = fetch_request([("t", 0, 0)])
    for epoch, code in ((1, ErrorCode.UNKNOWN_LEADER_EPOCH), (0, 0)):
        request["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
        (p,) = partitions_of(do_fetch(broker, request))
        assert p["error_code"] == code
        region_bytes(p["records"])


def test_topic_ids_from_v13(broker):
    do_produce(broker, "t", 1, batch(2))
    request = fetch_request([("t", 1, 0)])
    topic_id = topic_id_bytes(broker.log("t", 1).topic_id)
    assert len(topic_id) == 16 and topic_id != b"\0" * 16
    request["topics"][0]["topic_id"] = topic_id
    response = do_fetch(broker, request, version=13)
    assert response["responses"][0]["topic_id"] == topic_id
    (p,) = partitions_of(response)
    assert p["error_code"] == 0 and len(decode_kafka_python(region_bytes(p["records"]))) == 2
    request["topics"][0]["topic_id"] = b"\x01" * 16
    (p,) = partitions_of(do_fetch(broker, request, version=13))
    assert p["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


# -- long polling -------------------------------------------------------------------------

def test_long_poll_returns_on_an_append(broker):
    async def scenario(broker):
        started = time.monotonic()
        waiting = asyncio.ensure_future(fetch.fetch(
            broker, Header(1, 12), fetch_request([("t", 0, 0)], max_wait_ms=10_000)))
        await asyncio.sleep(0.2)
        assert not waiting.done()   # nothing yet: it waits
        answer = await produce.produce(broker, Header(0, 9),
                                       produce_request("t", 0, batch(2)))
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        response = await asyncio.wait_for(waiting, 5)
        return response, time.monotonic() - started

    response, elapsed = asyncio.run(scenario(broker))
    assert elapsed < 3, elapsed   # (max_wait_ms is 10 s)
    (p,) = partitions_of(response)
    assert len(decode_kafka_python(region_bytes(p["records"]))) == 2


def test_long_poll_answers_after_max_wait(broker):
    started = time.monotonic()
    response = do_fetch(broker, fetch_request([("t", 0, 0)], max_wait_ms=300))
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 3, elapsed
    (p,) = partitions_of(response)
    assert p["error_code"] == 0 and region_bytes(p["records"]) == b""


def test_min_bytes_waits_for_enough(broker):
    async def scenario():
        waiting = asyncio.ensure_future(fetch.fetch(
            broker, Header(1, 12), fetch_request([("t", 0, 0)], min_bytes=1000,
                                                 max_wait_ms=10_000)))
        await produce.produce(broker, Header(0, 9), produce_request("t", 0, batch(1)))
        await asyncio.sleep(0.2)
        assert not waiting.done()   # an append, but fewer bytes than min_bytes
        await produce.produce(broker, Header(0, 9),
                              produce_request("t", 0, batch(5, value_size=300)))
        return await asyncio.wait_for(waiting, 5)

    (p,) = partitions_of(asyncio.run(scenario()))
    assert len(decode_kafka_python(region_bytes(p["records"]))) == 6


# -- read_committed ---------------------------------------------------------------------

def test_read_committed_lso_and_aborted_transactions(broker):
    log = broker.log("t", 0)
    do_produce(broker, "t", 0, batch(2))                                     # 0-1
    log.append_batches(batch(2, producer_id=9, producer_epoch=0, base_sequence=0,
                             is_transactional=True))                        # 2-3
    log.append_end_txn_marker(9, 0, ControlRecordType.ABORT)                # 4
    log.append_batches(batch(1, producer_id=10, producer_epoch=0, base_sequence=0,
                             is_transactional=True))                        # 5 (open)
    committed = fetch_request([("t", 0, 0)], isolation_level=1)
    (p,) = partitions_of(do_fetch(broker, committed))
    assert (p["high_watermark"], p["last_stable_offset"]) == (6, 5)
    assert p["aborted_transactions"] == [{"producer_id": 9, "first_offset": 2}]
    data = region_bytes(p["records"])
    assert max(b.last_offset for b in iter_batches(data)) == 4   # stops before the LSO
    (p,) = partitions_of(do_fetch(broker, fetch_request([("t", 0, 0)])))
    assert p["aborted_transactions"] is None
    assert max(b.last_offset for b in iter_batches(region_bytes(p["records"]))) == 5
    aiokafka = pytest.importorskip("aiokafka.record.default_records",
                                   reason="aiokafka is the second oracle")
    first = aiokafka.DefaultRecordBatch(data[:len(next(iter_batches(data)).to_bytes())])
    assert [r.offset for r in first] == [0, 1]


# -- sessions (KIP-227) ---------------------------------------------------------------------

def test_fetch_session_full_then_incremental(broker):
    do_produce(broker, "t", 0, batch(2))
    do_produce(broker, "t", 1, batch(1))
    full = do_fetch(broker, fetch_request([("t", 0, 0), ("t", 1, 0)], session_epoch=0))
    session = full["session_id"]
    assert session > 0 and len(partitions_of(full)) == 2
    for p in partitions_of(full):
        region_bytes(p["records"])
    # incremental, nothing changed, the client moved its offsets: only partitions with
    # records, errors or new offsets are answered
    inc = do_fetch(broker, fetch_request([("t", 0, 2), ("t", 1, 1)], session_id=session,
                                         session_epoch=1))
    assert inc["error_code"] == 0 and inc["session_id"] == session
    assert partitions_of(inc) == []
    do_produce(broker, "t", 1, batch(3))
    inc = do_fetch(broker, fetch_request([], session_id=session, session_epoch=2))
    (p,) = partitions_of(inc)
    assert p["partition_index"] == 1 and p["high_watermark"] == 4
    assert [o for o, _ in decode_kafka_python(region_bytes(p["records"]))] == [1, 2, 3]
    # a forgotten partition leaves the session
    inc = do_fetch(broker, fetch_request([], session_id=session, session_epoch=3,
                                         forgotten=[("t", [1])]))
    assert partitions_of(inc) == []
    do_produce(broker, "t", 1, batch(1))
    inc = do_fetch(broker, fetch_request([], session_id=session, session_epoch=4))
    assert partitions_of(inc) == []


def test_fetch_session_errors_and_close(broker):
    full = do_fetch(broker, fetch_request([("t", 0, 0)], session_epoch=0))
    session = full["session_id"]
    wrong = do_fetch(broker, fetch_request([], session_id=session, session_epoch=5))
    assert wrong["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert wrong["responses"] == []
    missing = do_fetch(broker, fetch_request([], session_id=session + 1, session_epoch=1))
    assert missing["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # epoch -1 closes the session and is a sessionless full fetch
    closing = do_fetch(broker, fetch_request([("t", 0, 0)], session_id=session,
                                             session_epoch=-1))
    assert closing["error_code"] == 0 and closing["session_id"] == 0
    assert len(partitions_of(closing)) == 1
    gone = do_fetch(broker, fetch_request([], session_id=session, session_epoch=1))
    assert gone["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_session_cache_is_bounded(tmp_path):
    b = make_broker(tmp_path, config={"max.incremental.fetch.session.cache.slots": 2})
    b.create_topic("t", 1)
    ids = [do_fetch(b, fetch_request([("t", 0, 0)], session_epoch=0))["session_id"]
           for _ in range(3)]
    assert ids[0] > 0 and ids[1] > 0 and ids[2] == 0   # full: no session, still answered
    b.manager.close()


def test_sessions_before_v7_are_ignored(broker):
    response = do_fetch(broker, fetch_request([("t", 0, 0)], session_epoch=0), version=6)
    assert response["session_id"] == 0
