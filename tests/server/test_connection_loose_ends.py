"""The connection's loose ends over real sockets: a failed Produce with acks=0 closes the
connection (Kafka's KafkaApis.handleProduceRequest), a response that fails to encode is a
server error, a fetch's sendfile never moves the segment's own file offset."""

from __future__ import annotations

import logging
import os

import pytest

pytest.importorskip("kafkastore.server.protocol",
                    reason="the codec (kafkastore.server.protocol) is not on this branch yet")

from _datapath import batch, fetch_request, produce_request  # noqa: E402
from _wire import API_VERSIONS_V3 as V3, closed_by_peer, connect, request, \
    still_serves  # noqa: E402

from kafkastore.server import KafkaServer, protocol  # noqa: E402
from kafkastore.server.handlers import HANDLERS  # noqa: E402

PRODUCE, FETCH, METADATA, API_VERSIONS, DESCRIBE_CLUSTER = 0, 1, 3, 18, 60


@pytest.fixture
def server(tmp_path):
    with KafkaServer(tmp_path / "logs", port=0) as s:
        s.broker.create_topic("t", 1)
        yield s


# -- acks=0 -----------------------------------------------------------------------------------

def _send_acks0(sock, topic, records, correlation_id):
    sock.sendall(protocol.encode_request(PRODUCE, 9, correlation_id, "tests",
                                         produce_request(topic, 0, records, acks=0)))


def test_a_good_acks0_produce_gets_no_response_and_keeps_the_connection(server):
    with connect(server) as sock:
        _send_acks0(sock, "t", batch(3), correlation_id=7)
        # the next frame on the socket is the next request's answer, not a produce's
        assert request(sock, API_VERSIONS, 3, V3, correlation_id=8)["error_code"] == 0
    assert server.broker.log("t", 0).log_end_offset == 3


@pytest.mark.parametrize("what", ["unknown topic", "corrupt batch"])
def test_a_failed_acks0_produce_closes_the_connection_with_a_log_line(server, caplog, what):
    caplog.set_level(logging.INFO, "kafkastore.server")
    if what == "unknown topic":
        topic, records, code = "nope", batch(2), "UNKNOWN_TOPIC_OR_PARTITION"
    else:
        good = bytearray(batch(2))
        good[-1] ^= 0xFF          # the CRC no longer matches
        topic, records, code = "t", bytes(good), "CORRUPT_MESSAGE"
    with connect(server) as sock:
        _send_acks0(sock, topic, records, correlation_id=11)
        assert closed_by_peer(sock)
    assert f"{topic}-0={code}" in caplog.text
    assert "correlation id 11" in caplog.text and "ack=0" in caplog.text
    assert server.broker.log("t", 0).log_end_offset == 0
    still_serves(server)


# -- a response that does not encode -----------------------------------------------------------

def _badly_encoded(real):
    async def handler(broker, header, request):
        body = await real(broker, header, request)
        body["throttle_time_ms"] = "not an int32"    # a handler's bug
        return body
    return handler


def test_a_response_that_does_not_encode_is_a_server_error(server, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, "kafkastore.server")
    monkeypatch.setitem(HANDLERS, DESCRIBE_CLUSTER, _badly_encoded(HANDLERS[DESCRIBE_CLUSTER]))
    monkeypatch.setitem(HANDLERS, METADATA, _badly_encoded(HANDLERS[METADATA]))
    with connect(server) as sock:
        # DescribeCluster has a top-level error_code: UNKNOWN_SERVER_ERROR, connection kept
        assert request(sock, DESCRIBE_CLUSTER, 1, {}, correlation_id=3)["error_code"] == -1
        assert request(sock, API_VERSIONS, 3, V3)["error_code"] == 0
        # Metadata has none: closed
        sock.sendall(protocol.encode_request(METADATA, 12, 4, "tests",
                                             {"topics": None,
                                              "allow_auto_topic_creation": False}))
        assert closed_by_peer(sock)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2, [r.getMessage() for r in caplog.records]
    for record in errors:
        assert record.exc_info is not None                # with the traceback
        assert "server error" in record.getMessage()
        assert "throttle_time_ms" in caplog.text
    # not reported as the client's fault
    assert "does not decode" not in caplog.text
    still_serves(server)


# -- the segment's file offset ------------------------------------------------------------

def test_a_fetch_leaves_the_segments_file_offset_alone(server):
    with connect(server) as sock:
        for _ in range(4):
            answer = request(sock, PRODUCE, 9, produce_request("t", 0, batch(20, value_size=500)))
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        fd = server.broker.log("t", 0).active_segment.log.fileno()
        before = os.lseek(fd, 0, os.SEEK_CUR)
        body = request(sock, FETCH, 12, fetch_request([("t", 0, 0)]))
        records = bytes(body["responses"][0]["partitions"][0]["records"])
        assert len(records) > 4 * 20 * 500
        assert os.lseek(fd, 0, os.SEEK_CUR) == before
