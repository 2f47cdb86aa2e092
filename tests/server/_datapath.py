"""Shared by the data-path handler tests (test_produce / test_fetch / test_offsets): a
Broker over a LogManager in a temporary directory, the request header the handlers get,
and producer batches built with the project's own encoder."""

from __future__ import annotations

import asyncio
import os
from typing import NamedTuple

import pytest

from kafkastore.manager import LogManager
from kafkastore.records import encode_batch
from kafkastore.server.broker import Broker
from kafkastore.server.config import ServerConfig
from kafkastore.server.handlers import fetch, offsets, produce


class Header(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int = 1
    client_id: str | None = "test"


def make_broker(path, config=None, log_config=None) -> Broker:
    manager = LogManager(str(path), log_config or {})
    return Broker(manager, ServerConfig(config or {}))


@pytest.fixture(name="broker")
def broker_fixture(tmp_path):
    """A broker over a fresh log directory with topic ``t`` of two partitions."""
    b = make_broker(tmp_path)
    b.create_topic("t", 2)
    yield b
    b.manager.close()


def run(coro):
    return asyncio.run(coro)


def batch(n: int = 3, *, start: int = 0, value_size: int = 10, **kw) -> bytes:
    """A producer's batch of ``n`` records (base offset 0, as a producer sends)."""
    return encode_batch([(b"k%d" % i, (b"v%d-" % i).ljust(value_size, b"x"))
                         for i in range(start, start + n)], **kw)


def produce_request(topic: str, partition: int, records, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic,
                            "partition_data": [{"index": partition, "records": records}]}]}


def do_produce(broker, topic, partition, records, *, acks=-1, version=9) -> dict | None:
    response = run(produce.produce(broker, Header(0, version),
                                   produce_request(topic, partition, records, acks)))
    return None if response is None else response["responses"][0]["partition_responses"][0]


def fetch_request(parts, *, max_bytes=50 << 20, min_bytes=1, max_wait_ms=0,
                  isolation_level=0, session_id=0, session_epoch=-1, forgotten=()):
    """``parts``: (topic, partition, fetch_offset[, partition_max_bytes]) tuples."""
    topics: dict = {}
    for p in parts:
        topic, partition, offset = p[:3]
        pmax = p[3] if len(p) > 3 else 1 << 20
        topics.setdefault(topic, []).append(
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": pmax})
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": isolation_level,
            "session_id": session_id, "session_epoch": session_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": list(ps)}
                                      for t, ps in forgotten],
            "rack_id": ""}


def do_fetch(broker, request, version=12) -> dict:
    return run(fetch.fetch(broker, Header(1, version), request))


def partitions_of(response) -> list[dict]:
    return [p for t in response["responses"] for p in t["partitions"]]


def region_bytes(records) -> bytes:
    """The bytes a FileRegion stands for (what sendfile would send), then closed."""
    if isinstance(records, (bytes, bytearray, memoryview)):
        return bytes(records)
    try:
        return os.pread(records.file.fileno(), records.size, records.position)
    finally:
        records.close()


def list_offsets(broker, topic, partition, timestamp, *, isolation_level=0, version=7,
                 current_leader_epoch=-1) -> dict:
    request = {"replica_id": -1, "isolation_level": isolation_level,
               "topics": [{"name": topic, "partitions": [
                   {"partition_index": partition, "current_leader_epoch": current_leader_epoch,
                    "timestamp": timestamp}]}]}
    response = run(offsets.list_offsets(broker, Header(2, version), request))
    return response["topics"][0]["partitions"][0]


def delete_records(broker, topic, partition, offset) -> dict:
    request = {"topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "offset": offset}]}], "timeout_ms": 1000}
    response = run(offsets.delete_records(broker, Header(21, 2), request))
    return response["topics"][0]["partitions"][0]
