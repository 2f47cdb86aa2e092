"""The codec and the data path's handlers together: a request encoded, read as the
connection reads it (header, then body), answered by the handler in HANDLERS, the
response encoded (file regions as sendfile would send them) and decoded as a client
would. Checks that handlers and codec agree on every field name and type, at the
lowest and highest version each handler answers."""

from __future__ import annotations

import os

import pytest
from _datapath import batch, broker_fixture, fetch_request, produce_request, run  # noqa: F401

from kafkastore.server import protocol
from kafkastore.server.handlers import HANDLERS
from kafkastore.server.handlers.offsets import topic_id_bytes
from kafkastore.server.protocol import FileRegion


def _round_trip(broker, key: int, version: int, body: dict) -> dict:
    frame = memoryview(protocol.encode_request(key, version, 42, "codec-test", body))[4:]
    header, pos = protocol.read_request_header(frame)
    request = protocol.decode_request(header, frame, pos)
    response = run(HANDLERS[key](broker, header, request))
    parts = protocol.encode_response(header, response)
    wire = bytearray()
    for part in parts:
        if isinstance(part, FileRegion):
            wire += os.pread(part.file.fileno(), part.size, part.position)
            part.close()
        else:
            wire += part
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4
    correlation_id, decoded = protocol.decode_response(key, version, bytes(wire[4:]))
    assert correlation_id == 42
    return decoded


@pytest.mark.parametrize("version", [3, 7, 9, 11])
def test_produce_then_fetch_through_the_codec(broker, version):
    data = batch(3)
    produced = _round_trip(broker, 0, version, produce_request("t", 0, data))
    answer = produced["responses"][0]["partition_responses"][0]
    assert (answer["index"], answer["error_code"], answer["base_offset"]) == (0, 0, 0)
    for fetch_version in (4, 12, 16):
        request = fetch_request([("t", 0, 0)])
        if fetch_version >= 13:   # topic ids instead of names
            request["topics"][0]["topic_id"] = topic_id_bytes(broker.log("t", 0).topic_id)
        fetched = _round_trip(broker, 1, fetch_version, request)
        part = fetched["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["high_watermark"] == 3
        # the batch as produced, but for the partition leader epoch the log stamps (12-16)
        records = bytes(part["records"])
        assert records[:12] + records[16:] == data[:12] + data[16:]


@pytest.mark.parametrize("version", [1, 8])
def test_list_offsets_through_the_codec(broker, version):
    _round_trip(broker, 0, 9, produce_request("t", 1, batch(5)))
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 1, "timestamp": -1}]}]}
    answer = _round_trip(broker, 2, version, body)["topics"][0]["partitions"][0]
    assert (answer["error_code"], answer["offset"]) == (0, 5)


def test_init_producer_id_and_delete_records_through_the_codec(broker):
    for version in (0, 5):
        answer = _round_trip(broker, 22, version, {"transactional_id": None,
                                                   "transaction_timeout_ms": 60000})
        assert answer["error_code"] == 0 and answer["producer_id"] >= 0
    _round_trip(broker, 0, 9, produce_request("t", 0, batch(4)))
    for version in (0, 2):
        answer = _round_trip(broker, 21, version, {"topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "offset": 2}]}], "timeout_ms": 1000})
        part = answer["topics"][0]["partitions"][0]
        assert (part["error_code"], part["low_watermark"]) == (0, 2)
