"""Hostile input: what a broken or malicious client sends. The server answers with an
error code or closes that connection with a log line, and goes on: a connection made
afterwards still works (ApiVersions, Produce, Fetch).

The frames here are built by hand (struct), not with the server's codec, so a bug in the
codec cannot hide in both the request and its check.
"""

from __future__ import annotations

import logging
import resource
import select
import socket
import struct
import time

import pytest

from conftest import roundtrip, wait_until

pytestmark = pytest.mark.timeout(120)
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


def frame(api_key, version, correlation_id, body=b"", client_id=b"hostile"):
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(head) + len(body)) + head + body


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def read_frame(sock):
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def parse_api_versions_v0(payload):
    """ApiVersionsResponse v0 (what a broker answers an ApiVersions it cannot parse):
    correlation id, error code, [api_key, min, max]."""
    corr, err, n = struct.unpack_from(">ihi", payload)
    apis = {}
    for i in range(n):
        k, lo, hi = struct.unpack_from(">hhh", payload, 10 + 6 * i)
        apis[k] = (lo, hi)
    return corr, err, apis


def connect(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.settimeout(10)
    return s


def closed_or_answered(sock, correlation_id, timeout=10.0):
    """'closed' if the server closed the connection, else the frame answering
    ``correlation_id``; fails if neither happens within ``timeout``."""
    sock.settimeout(timeout)
    try:
        payload = read_frame(sock)
    except (ConnectionError, OSError):
        return "closed"
    (corr,) = struct.unpack_from(">i", payload)
    assert corr == correlation_id, (corr, correlation_id)
    return payload


def alive(server):
    """A fresh connection answers ApiVersions (by hand), then Produce and Fetch."""
    with connect(server) as s:
        s.sendall(frame(API_VERSIONS, 0, 4242))
        corr, err, apis = parse_api_versions_v0(read_frame(s))
        assert (corr, err) == (4242, 0)
        assert apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] >= 3
        assert {0, 1, 3} <= set(apis)    # Produce, Fetch, Metadata
    roundtrip(server.bootstrap_servers)


def server_log_lines(caplog):
    return [r for r in caplog.records if r.name.startswith("kafkastore")]


def test_api_versions_v0_by_hand(kafka_server):
    alive(kafka_server)


def test_api_versions_unknown_version_answers_v0_with_error_35(kafka_server):
    # KIP-511: a broker answers an ApiVersions request of a version it does not know with
    # a v0 response, UNSUPPORTED_VERSION, and its versions (Kafka's
    # ApiVersionsRequest.getErrorResponse / SocketServer's handling of the unknown version)
    with connect(kafka_server) as s:
        s.sendall(frame(API_VERSIONS, 99, 7, body=b"\x00" * 8))
        corr, err, apis = parse_api_versions_v0(read_frame(s))
    assert (corr, err) == (7, UNSUPPORTED_VERSION)
    assert API_VERSIONS in apis
    alive(kafka_server)


@pytest.mark.parametrize("api_key, version", [(9999, 0), (3, 99), (0, -1)],
                         ids=["unknown-key", "metadata-v99", "produce-v-1"])
def test_unknown_key_or_version(kafka_server, caplog, api_key, version):
    caplog.set_level(logging.INFO)
    with connect(kafka_server) as s:
        s.sendall(frame(api_key, version, 11, body=b"\x00" * 16))
        result = closed_or_answered(s, 11)
    if result == "closed":
        wait_until(lambda: server_log_lines(caplog), 10, what="a log line for the close")
    alive(kafka_server)


MALFORMED = {
    "empty-frame": struct.pack(">i", 0),
    "header-cut-short": struct.pack(">i", 3) + b"\x00\x12\x00",
    "negative-size": struct.pack(">i", -1) + b"\x00" * 16,
    "client-id-longer-than-frame": struct.pack(">i", 12) + struct.pack(">hhih", 3, 1, 5, 3000)
    + b"ab",
    # a Produce v3 whose body is garbage: the transactional id's length runs past the end
    "produce-garbage-body": frame(0, 3, 12, body=b"\x7f\xff" + b"\xee" * 30),
    # a Fetch v4 claiming 2**31-1 topics in 20 bytes: must not allocate for them
    "fetch-huge-array-count": frame(1, 4, 13, body=struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0)
                                    + struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 8),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_frames(kafka_server, caplog, name):
    caplog.set_level(logging.INFO)
    with connect(kafka_server) as s:
        s.sendall(MALFORMED[name])
        try:
            payload = read_frame(s)
        except (ConnectionError, OSError):
            payload = None
    if payload is None:
        wait_until(lambda: server_log_lines(caplog), 10, what="a log line for the close")
    alive(kafka_server)


def test_two_gib_size_prefix(kafka_server, caplog):
    """A size prefix of 2 GiB - 1 is refused (socket.request.max.bytes) before anything is
    allocated for it: the connection closes at once, with a log line."""
    caplog.set_level(logging.INFO)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB, the peak
    with connect(kafka_server) as s:
        s.sendall(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64)
        t0 = time.monotonic()
        assert closed_or_answered(s, -1, timeout=10) == "closed"
        assert time.monotonic() - t0 < 10
    wait_until(lambda: server_log_lines(caplog), 10, what="a log line for the close")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert grown_kib < 512 * 1024, f"the process's peak memory grew by {grown_kib} KiB"
    alive(kafka_server)


def test_half_written_request_then_closed_socket(kafka_server):
    whole = frame(API_VERSIONS, 0, 5)
    for cut in (2, 6, len(whole) - 1):
        with connect(kafka_server) as s:
            s.sendall(whole[:cut])
    # and a connection holding a half-written request open does not block others
    with connect(kafka_server) as hanging:
        hanging.sendall(struct.pack(">i", 100) + b"\x00\x03")
        alive(kafka_server)
    alive(kafka_server)


def test_slow_reader_that_never_drains(kafka_server):
    """Requests pipelined by a client that never reads its socket: the server stops
    reading them once its writes back up (Kafka mutes the channel), its memory does not
    grow with them, and other connections are served meanwhile."""
    slow = connect(kafka_server)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    slow.setblocking(False)
    one = frame(API_VERSIONS, 0, 1)
    sent, stalled = 0, False
    deadline = time.monotonic() + 60
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        # 2,000,000 requests (34 MB, their answers ~200 MB) are far more than the kernel's
        # socket buffers on both sides hold: the server must stop reading before that
        chunk = one * 1000
        pending = memoryview(b"")
        while sent < 2_000_000 * len(one) and time.monotonic() < deadline:
            if not pending:
                pending = memoryview(chunk)
            try:
                n = slow.send(pending)   # partial sends continue where they stopped
            except BlockingIOError:
                # not writable for 3 s: the server stopped reading (a muted channel)
                if not select.select([], [slow], [], 3.0)[1]:
                    stalled = True
                    break
                continue
            sent += n
            pending = pending[n:]
        assert stalled, f"the server kept reading pipelined requests ({sent // len(one):,}) " \
            "from a client that read none of the answers"
        alive(kafka_server)
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
        assert grown_kib < 256 * 1024, grown_kib
    finally:
        slow.close()
    alive(kafka_server)


def fetch_v4(correlation_id, topic, partition=0, offset=0, max_bytes=64 << 20):
    """A FetchRequest v4 built by hand: replica -1, no wait, one partition."""
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 0, 1, max_bytes, 0)
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, partition, offset, max_bytes)
    return frame(1, 4, correlation_id, body)


def test_slow_reader_of_large_fetches(kafka_server):
    """Fetches whose answers (segment bytes sent with sendfile) the client never reads:
    the server goes on serving everyone else, and the stuck connection does not hold it
    up when the client finally goes away."""
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    bs = kafka_server.bootstrap_servers
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 20})
    for i in range(20_000):
        p.produce("heavy", value=b"%06d" % i + b"x" * 994, partition=0)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    # a client that reads gets the whole 20 MB in one answer to this request
    with connect(kafka_server) as s:
        s.sendall(fetch_v4(99, "heavy"))
        answer = read_frame(s)
    assert struct.unpack_from(">i", answer)[0] == 99 and len(answer) > 20_000_000
    slow = connect(kafka_server)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        for corr in range(5):     # ~100 MB of answers waiting on a 4 KiB receive buffer
            slow.sendall(fetch_v4(100 + corr, "heavy"))
        time.sleep(1)
        t0 = time.monotonic()
        alive(kafka_server)
        assert time.monotonic() - t0 < 30
    finally:
        slow.close()
    alive(kafka_server)
