"""The connection loop and the server's lifecycle over real sockets: framing, the size
limit, half-written requests, unknown APIs, pipelining, slow readers, idle connections,
handler failures, a graceful stop, the loopback rule."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
import time

import pytest

pytest.importorskip("kafkastore.server.protocol",
                    reason="the codec (kafkastore.server.protocol) is not on this branch yet")

from _wire import API_VERSIONS_V3 as V3, closed_by_peer, connect, read_frame, request, \
    still_serves  # noqa: E402

from kafkastore.config import ConfigError  # noqa: E402
from kafkastore.server import KafkaServer, protocol  # noqa: E402
from kafkastore.server.handlers import HANDLERS  # noqa: E402

API_VERSIONS, DESCRIBE_CLUSTER, CREATE_TOPICS = 18, 60, 19


@pytest.fixture
def server(tmp_path):
    with KafkaServer(tmp_path / "logs", port=0) as s:
        yield s


def test_api_versions_round_trip_frames_the_response(server):
    with connect(server) as sock:
        body = request(sock, API_VERSIONS, 3, V3, correlation_id=42)
    assert body["error_code"] == 0
    assert {(k["api_key"], k["min_version"], k["max_version"]) for k in body["api_keys"]} \
        == {(k, lo, hi) for k, (lo, hi) in protocol.SUPPORTED_APIS.items()}


@pytest.mark.parametrize("size", [-1, -2**31, 104857601, 2**31 - 1])
def test_a_bad_size_closes_at_once_with_a_log_line(server, size, caplog):
    caplog.set_level(logging.WARNING, "kafkastore.server")
    with connect(server) as sock:
        sock.sendall(struct.pack(">i", size))      # and nothing after it
        assert closed_by_peer(sock, timeout=5)     # not waiting for 2 GiB to arrive
    assert f"invalid request size {size}" in caplog.text
    still_serves(server)


def test_socket_request_max_bytes_is_the_limit(tmp_path):
    with KafkaServer(tmp_path, {"socket.request.max.bytes": 100}, port=0) as s:
        frame = protocol.encode_request(API_VERSIONS, 3, 1, "x" * 200, V3)
        with connect(s) as sock:
            sock.sendall(frame)
            assert closed_by_peer(sock)
        still_serves(s)


def test_a_half_written_request_then_close(server, caplog):
    caplog.set_level(logging.WARNING, "kafkastore.server")
    frame = protocol.encode_request(API_VERSIONS, 3, 1, "tests", V3)
    with connect(server) as sock:
        sock.sendall(frame[:len(frame) // 2])
    deadline = time.monotonic() + 5
    while "in the middle of" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "in the middle of" in caplog.text
    still_serves(server)


def test_an_unknown_api_key_closes_the_connection(server, caplog):
    caplog.set_level(logging.WARNING, "kafkastore.server")
    with connect(server) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 9999, 0, 5, -1))
        assert closed_by_peer(sock)
    assert "unsupported API key or version" in caplog.text
    still_serves(server)


def test_an_unsupported_version_of_another_api_closes(server):
    with connect(server) as sock:
        # CreateTopics v0 is below the advertised 2-7
        sock.sendall(struct.pack(">ihhih", 10, CREATE_TOPICS, 0, 5, -1))
        assert closed_by_peer(sock)


def test_api_versions_of_an_unknown_version_gets_v0_with_unsupported_version(server):
    # Kafka: RequestContext.parseRequest / ApiVersionsRequest.getErrorResponse
    with connect(server) as sock:
        # as a newer client sends it: header v2 (an empty tag buffer), a body this
        # server cannot know (here: two compact strings and a tag buffer)
        tail = b"\x00" + b"\x03ab" + b"\x021" + b"\x00"
        sock.sendall(struct.pack(">ihhih", 10 + len(tail), API_VERSIONS, 99, 77, -1) + tail)
        cid, body = protocol.decode_response(API_VERSIONS, 0, read_frame(sock))
        assert cid == 77 and body["error_code"] == 35
        assert {k["api_key"] for k in body["api_keys"]} == set(protocol.SUPPORTED_APIS)
        # the connection goes on
        assert request(sock, API_VERSIONS, 3, V3)["error_code"] == 0


def test_api_versions_v3_with_an_invalid_software_name_is_invalid_request(server):
    with connect(server) as sock:
        body = request(sock, API_VERSIONS, 3, {"client_software_name": "-bad name",
                                               "client_software_version": "1"})
    assert body["error_code"] == 42


def test_a_body_that_does_not_decode_closes(server, caplog):
    caplog.set_level(logging.WARNING, "kafkastore.server")
    frame = protocol.encode_request(DESCRIBE_CLUSTER, 0, 1, "t", {})
    with connect(server) as sock:
        # the body's tagged-fields count left out: a varint past the end of the frame
        # (bytes after a body are no refusal: Kafka ignores them, and librdkafka sends some)
        bad = frame[4:-1]
        sock.sendall(struct.pack(">i", len(bad)) + bad)
        assert closed_by_peer(sock)
    assert "does not decode" in caplog.text
    still_serves(server)


def test_a_pipelined_burst_is_answered_in_order(server):
    frames = b"".join(protocol.encode_request(
        API_VERSIONS if i % 2 else DESCRIBE_CLUSTER, 3 if i % 2 else 1, 1000 + i, "t",
        V3 if i % 2 else {}) for i in range(200))
    with connect(server) as sock:
        sock.sendall(frames)
        got = [int.from_bytes(read_frame(sock)[:4], "big") for _ in range(200)]
    assert got == [1000 + i for i in range(200)]


def test_a_slow_reader_does_not_grow_the_servers_memory(server):
    """A client pipelining requests and never reading: once the socket buffers are full
    the server stops reading its requests (it awaits the transport's drain) instead of
    buffering responses without bound, and other connections carry on."""
    one = protocol.encode_request(API_VERSIONS, 3, 1, "t", V3)
    chunk = one * 20000                       # ~0.8 MB of requests, ~6 MB of responses
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.setblocking(False)
    sent, stuck_since = 0, None
    deadline = time.monotonic() + 30
    try:
        while sent < 400 * len(chunk) and time.monotonic() < deadline:
            try:
                sent += sock.send(chunk[sent % len(chunk):])
                stuck_since = None
            except BlockingIOError:
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > 1.5:
                    break
                time.sleep(0.01)
        assert stuck_since is not None, "the server kept reading requests it could not answer"
        conns = list(server.connections)
        buffered = max(c.stream.transport.get_write_buffer_size() for c in conns)
        answered = max(c.requests for c in conns)
        assert buffered <= 256 * 1024, buffered
        # what was answered fits in the kernel's buffers, not in the server's memory
        assert answered < sent // len(one)
        still_serves(server)
    finally:
        sock.close()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(tmp_path, caplog):
    caplog.set_level(logging.INFO, "kafkastore.server")
    with KafkaServer(tmp_path, {"connections.max.idle.ms": 300}, port=0) as s:
        with connect(s) as sock:
            assert request(sock, API_VERSIONS, 3, V3)["error_code"] == 0
            start = time.monotonic()
            assert closed_by_peer(sock, timeout=5)
            assert 0.2 < time.monotonic() - start < 4
        assert "connections.max.idle.ms" in caplog.text


def test_a_handler_exception_answers_unknown_server_error_or_closes(server, monkeypatch,
                                                                    caplog):
    caplog.set_level(logging.ERROR, "kafkastore.server")

    async def broken(broker, header, request):
        raise RuntimeError("boom")

    monkeypatch.setitem(HANDLERS, DESCRIBE_CLUSTER, broken)
    monkeypatch.setitem(HANDLERS, CREATE_TOPICS, broken)
    with connect(server) as sock:
        # DescribeCluster has a top-level error_code: answered, connection kept
        assert request(sock, DESCRIBE_CLUSTER, 1, {})["error_code"] == -1
        assert request(sock, API_VERSIONS, 3, V3)["error_code"] == 0
        # CreateTopics has codes per topic only: closed
        sock.sendall(protocol.encode_request(CREATE_TOPICS, 7, 9, "t", {"topics": []}))
        assert closed_by_peer(sock)
    assert "boom" in caplog.text and "Traceback" in caplog.text
    still_serves(server)


def test_stop_answers_the_request_in_flight(tmp_path, monkeypatch):
    real = HANDLERS[DESCRIBE_CLUSTER]
    entered = threading.Event()

    async def slow(broker, header, request):
        entered.set()
        await asyncio.sleep(0.5)
        return await real(broker, header, request)

    monkeypatch.setitem(HANDLERS, DESCRIBE_CLUSTER, slow)
    s = KafkaServer(tmp_path, port=0).start()
    idle = connect(s)
    with connect(s) as sock:
        sock.sendall(protocol.encode_request(DESCRIBE_CLUSTER, 1, 5, "t", {}))
        assert entered.wait(5)
        stopper = threading.Thread(target=s.stop)
        stopper.start()
        cid, body = protocol.decode_response(DESCRIBE_CLUSTER, 1, read_frame(sock))
        assert cid == 5 and body["error_code"] == 0
        assert closed_by_peer(sock)
    stopper.join(10)
    assert closed_by_peer(idle)
    idle.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    s.stop()   # idempotent


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_a_non_loopback_address_is_refused(tmp_path, host):
    with pytest.raises(ConfigError, match=f"Refusing to listen on {host}: it is not a "
                       "loopback address"):
        KafkaServer(tmp_path, host=host, port=0)
    assert not (tmp_path / "meta.properties").exists()   # refused before opening anything


def _loops():
    yield "asyncio-sendfile"
    yield "asyncio-pread"
    try:
        import uvloop  # noqa: F401
        yield "uvloop"
    except ImportError:
        yield pytest.param("uvloop", marks=pytest.mark.skip(reason="uvloop is not installed"))


@pytest.mark.parametrize("mode", list(_loops()))
def test_fetched_file_regions_reach_the_socket_byte_for_byte(tmp_path, monkeypatch, mode):
    """A fetch's records go out as FileRegions: with the stdlib's sendfile, with the pread
    loop used where the loop has none (forced here), and on uvloop."""
    from _datapath import fetch_request, produce_request

    from kafkastore.records import encode_batch

    refused = []
    if mode == "asyncio-pread":
        async def no_sendfile(self, transport, file, offset, count, **kwargs):
            refused.append(count)
            raise asyncio.SendfileNotAvailableError("forced by the test")

        monkeypatch.setattr(asyncio.BaseEventLoop, "sendfile", no_sendfile)
    batches = [encode_batch([(b"k%d" % i, b"v" * 3000) for i in range(50)]) for _ in range(8)]
    with KafkaServer(tmp_path, port=0,
                     event_loop="uvloop" if mode == "uvloop" else "asyncio") as s, \
            connect(s) as sock:
        s.broker.create_topic("t", 1)
        for b in batches:
            answer = request(sock, 0, 9, produce_request("t", 0, b))
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        body = request(sock, 1, 12, fetch_request([("t", 0, 0, 50 << 20)]))
        records = bytes(body["responses"][0]["partitions"][0]["records"])
        with open(tmp_path / "t-0" / "00000000000000000000.log", "rb") as f:
            assert records == f.read()
        assert len(records) > 8 * 50 * 3000
        # the refused sendfile was asked for every byte; the pread loop then sent them
        assert (sum(refused) == len(records)) if mode == "asyncio-pread" else not refused
        # the connection is still in step: the next answer is the next request's
        assert request(sock, API_VERSIONS, 3, V3, correlation_id=9)["error_code"] == 0
