"""The server's message codec (kafkastore.server.protocol), on every request's path.

``ProduceRequest``: a Produce v9 request with one 16 KiB batch read (header + body) and its
response written. ``FetchResponse``: a Fetch v12 response with 10 partitions of 1 KiB
records written, and read back (what a client does). Per-call times; pure Python.
"""

from __future__ import annotations

import os

from kafkastore.server import protocol
from kafkastore.server.protocol import RequestHeader

_BATCH = os.urandom(16384)
_PRODUCE_RESPONSE = {"responses": [{"name": "bench", "partition_responses": [
    {"index": 0, "error_code": 0, "base_offset": 5, "log_start_offset": 0}]}]}
_FETCH_RESPONSE = {"session_id": 0, "responses": [{"topic": "bench", "partitions": [
    {"partition_index": i, "high_watermark": 1000 + i, "last_stable_offset": 1000 + i,
     "log_start_offset": 0, "aborted_transactions": None, "records": _BATCH[:1024]}
    for i in range(10)]}]}


class ProduceRequest:
    def setup(self):
        self.frame = memoryview(protocol.encode_request(0, 9, 1, "producer", {
            "transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "bench", "partition_data": [
                {"index": 0, "records": _BATCH}]}]}))[4:]

    def time_decode_request_encode_response(self):
        header, pos = protocol.read_request_header(self.frame)
        protocol.decode_request(header, self.frame, pos)
        protocol.encode_response(header, _PRODUCE_RESPONSE)


class FetchResponse:
    def setup(self):
        self.header = RequestHeader(1, 12, 5, "consumer")
        self.frame = b"".join(protocol.encode_response(self.header, _FETCH_RESPONSE))[4:]

    def time_encode_response(self):
        protocol.encode_response(self.header, _FETCH_RESPONSE)

    def time_encode_and_decode_response(self):
        protocol.encode_response(self.header, _FETCH_RESPONSE)
        protocol.decode_response(1, 12, self.frame)
