"""Requests over a real socket to a KafkaServer, for the server's tests (the codec's
encode_request / decode_response; needs kafkastore.server.protocol)."""

from __future__ import annotations

import socket

from kafkastore.server import protocol


def connect(server, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    size = int.from_bytes(recv_exactly(sock, 4), "big", signed=True)
    return recv_exactly(sock, size)


def request(sock: socket.socket, api_key: int, version: int, body: dict,
            correlation_id: int = 1) -> dict:
    """Send one request, read its response; checks the correlation id."""
    sock.sendall(protocol.encode_request(api_key, version, correlation_id, "tests", body))
    cid, answer = protocol.decode_response(api_key, version, read_frame(sock))
    assert cid == correlation_id
    return answer


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the server closes the connection (EOF or reset) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


#: An ApiVersions v3 request body (v3 carries the client's software name and version).
API_VERSIONS_V3 = {"client_software_name": "tests", "client_software_version": "1.0"}


def still_serves(server) -> None:
    """A new connection to ``server`` gets its ApiVersions answered (the server goes on
    after whatever a test did to another connection)."""
    with connect(server) as other:
        assert request(other, 18, 3, API_VERSIONS_V3)["error_code"] == 0
