"""Stopping the server answers the requests parked in it instead of waiting them out.

A consumer at the end of a partition parks a Fetch for ``max_wait_ms`` (Kafka's
``DelayedFetch``), and a group member parks a JoinGroup or SyncGroup until its rebalance
completes. Before, ``stop()`` let such a request run to its own deadline, at most
``shutdown_timeout_s`` (10 s by default), then cancelled it without an answer: a SIGTERM
to ``kafkastore serve`` with one idle consumer attached took 10 s, and the consumer got no
response. Now the stop ends each wait at once: the Fetch is answered with what the log
holds (as an expired ``DelayedFetch``), a parked JoinGroup or SyncGroup with
NOT_COORDINATOR (as Kafka answers them when it unloads a group), and the connection
closes after its answer.
"""

from __future__ import annotations

import threading

from _datapath import fetch_request
from _wire import connect, read_frame, request

from kafkastore.server import KafkaServer, protocol

FETCH, CREATE, JOIN = 1, 19, 11


def _server(tmp_path):
    # a short timeout keeps the failure of the old behaviour short: the parked request
    # was then cancelled unanswered after it
    return KafkaServer(str(tmp_path / "logs"), {"num.partitions": 1}, host="127.0.0.1",
                       port=0, shutdown_timeout_s=2.0).start()


def _stop_in_background(server):
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    return stopper


def test_a_parked_fetch_is_answered_when_the_server_stops(tmp_path):
    server = _server(tmp_path)
    try:
        with connect(server, timeout=30) as sock:
            made = request(sock, CREATE, 5, {"topics": [{
                "name": "t", "num_partitions": 1, "replication_factor": 1,
                "assignments": [], "configs": []}], "timeout_ms": 5000})
            assert made["topics"][0]["error_code"] == 0
            # at the log end, min_bytes 1, a 60 s wait: the fetch parks
            sock.sendall(protocol.encode_request(FETCH, 12, 7, "tests", fetch_request(
                [("t", 0, 0)], max_wait_ms=60_000)))
            assert not _readable(sock, 0.5), "the fetch should park at the log end"
            stopper = _stop_in_background(server)
            cid, answer = protocol.decode_response(FETCH, 12, read_frame(sock))
            assert cid == 7 and answer["error_code"] == 0
            [part] = answer["responses"][0]["partitions"]
            assert part["error_code"] == 0 and part["high_watermark"] == 0
            assert not part["records"]
            assert sock.recv(1) == b""       # then the connection closes
            stopper.join(30)
            assert not stopper.is_alive()
    finally:
        server.stop()


def test_a_parked_join_group_is_answered_when_the_server_stops(tmp_path):
    server = _server(tmp_path)
    try:
        with connect(server, timeout=30) as sock:
            coordinator = request(sock, 10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
            assert coordinator["coordinators"][0]["error_code"] == 0
            # a first JoinGroup with no member id (v4+) is answered MEMBER_ID_REQUIRED;
            # with the id it parks in the group's initial rebalance delay / join phase
            join = {"group_id": "g", "session_timeout_ms": 30_000,
                    "rebalance_timeout_ms": 60_000, "member_id": "",
                    "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}], "reason": None}
            first = request(sock, JOIN, 9, join)
            assert first["error_code"] == 79    # MEMBER_ID_REQUIRED
            sock.sendall(protocol.encode_request(JOIN, 9, 8, "tests", {
                **join, "member_id": first["member_id"]}))
            # group.initial.rebalance.delay.ms (3 s) holds the first rebalance open
            assert not _readable(sock, 0.5), "the join should park in the rebalance"
            stopper = _stop_in_background(server)
            cid, answer = protocol.decode_response(JOIN, 9, read_frame(sock))
            assert cid == 8 and answer["error_code"] == 16   # NOT_COORDINATOR
            assert sock.recv(1) == b""
            stopper.join(30)
            assert not stopper.is_alive()
    finally:
        server.stop()


def _readable(sock, timeout: float) -> bool:
    import select
    return bool(select.select([sock], [], [], timeout)[0])
