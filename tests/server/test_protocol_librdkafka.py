"""librdkafka (confluent-kafka) as the codec's oracle: the first client the issue names.

A stub broker on 127.0.0.1 (port 0) speaks only through the codec: it reads each request
with read_request_header + decode_request and answers ApiVersions, Metadata and Produce
with encode_response; nothing of the server's handlers is involved. librdkafka negotiates
its versions from our ApiVersions answer, so what it sends is its encoding of the highest
versions both sides speak, and what it reads back is ours. A frame our codec refuses, or
an answer librdkafka cannot read, fails the test.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from kafkastore import records
from kafkastore.server import protocol

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")

TOPIC_ID = bytes(range(1, 17))


class StubBroker:
    """One node (id 1) with topic ``t`` of two partitions; Produce appends nowhere but
    counts offsets per partition. Records every (api_key, api_version) it decoded and the
    record batches produced."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.seen: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []
        self.batches: list[bytes] = []
        self.offsets = {0: 0, 1: 0}
        #: per partition, one single-record batch per offset (what Fetch serves)
        self.stored = {0: [records.encode_batch([(b"k", b"value-%d" % i)], base_offset=i)
                           for i in range(3)], 1: []}
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(conn, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            try:
                chunk = conn.recv(n - len(data))
            except ConnectionError:
                # librdkafka resets its connections when the client is destroyed (its
                # coordinator connection too, since the stub answers FindCoordinator):
                # for the stub, the connection's end, as a close is
                return None
            if not chunk:
                return None
            data += chunk
        return data

    def _serve(self, conn) -> None:
        with conn:
            while True:
                size = self._read(conn, 4)
                frame = size and self._read(conn, struct.unpack(">i", size)[0])
                if not frame:
                    return
                try:
                    header, pos = protocol.read_request_header(memoryview(frame))
                    body = protocol.decode_request(header, memoryview(frame), pos)
                    with self.lock:
                        self.seen.append((header.api_key, header.api_version))
                        answer = self._answer(header, body)
                except Exception as exc:  # recorded and failed in the test's thread
                    self.errors.append(exc)
                    return
                if answer is not None:
                    try:
                        conn.sendall(b"".join(protocol.encode_response(header, answer)))
                    except ConnectionError:
                        return   # (the client went away: see _read)

    def _answer(self, header, body):
        if header.api_key == 18:
            return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items())]}
        if header.api_key == 3:
            return {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                    "cluster_id": "stub-cluster", "controller_id": 1, "topics": [
                        {"name": "t", "topic_id": TOPIC_ID, "partitions": [
                            {"partition_index": p, "leader_id": 1, "leader_epoch": 0,
                             "replica_nodes": [1], "isr_nodes": [1]} for p in (0, 1)]}]}
        if header.api_key == 0:
            responses = []
            for topic in body["topic_data"]:
                parts = []
                for part in topic["partition_data"]:
                    data = bytes(part["records"])
                    self.batches.append(data)
                    count = sum(b.record_count for b in records.iter_batches(data))
                    base = self.offsets[part["index"]]
                    self.offsets[part["index"]] += count
                    parts.append({"index": part["index"], "base_offset": base,
                                  "log_start_offset": 0})
                responses.append({"name": topic["name"], "partition_responses": parts})
            return None if body["acks"] == 0 else {"responses": responses}
        if header.api_key == 2:   # ListOffsets: earliest 0, latest the count
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "timestamp": -1, "leader_epoch": 0,
                 "offset": 0 if p["timestamp"] == -2 else len(self.stored[p["partition_index"]])}
                for p in t["partitions"]]} for t in body["topics"]]}
        if header.api_key == 1:   # Fetch: the stored batches from the fetch offset
            responses = []
            for topic in body["topics"]:
                parts = []
                for p in topic["partitions"]:
                    stored = self.stored.get(p["partition"], [])
                    data = b"".join(stored[p["fetch_offset"]:])
                    parts.append({"partition_index": p["partition"],
                                  "high_watermark": len(stored),
                                  "last_stable_offset": len(stored), "log_start_offset": 0,
                                  "aborted_transactions": None, "records": data})
                responses.append({"topic": topic.get("topic", ""),
                                  "topic_id": topic.get("topic_id", b"\0" * 16),
                                  "partitions": parts})
            return {"responses": responses}
        if header.api_key == 10:
            # FindCoordinator (advertised since issue 30): a consumer with a group.id looks
            # its coordinator up even when it only assign()s; this node, for every key
            me = {"node_id": 1, "host": "127.0.0.1", "port": self.port, "error_code": 0}
            if header.api_version >= 4:
                return {"coordinators": [dict(me, key=k) for k in body["coordinator_keys"]]}
            return me
        admin = self._admin(header.api_key, body)
        if admin is not None:
            return admin
        raise AssertionError(f"the stub does not answer API key {header.api_key}")

    def _admin(self, key: int, body: dict):
        """The admin APIs: each request's entities echoed back with error 0."""
        if key == 22:   # InitProducerId
            return {"producer_id": 1000, "producer_epoch": 0}
        if key == 19:   # CreateTopics
            return {"topics": [{"name": t["name"], "topic_id": TOPIC_ID,
                                "num_partitions": t["num_partitions"],
                                "replication_factor": t["replication_factor"],
                                "configs": []} for t in body["topics"]]}
        if key == 20:   # DeleteTopics: by name (v0-v5) or by DeleteTopicState (v6)
            names = body.get("topic_names") or [t["name"] for t in body.get("topics", [])]
            return {"responses": [{"name": n} for n in names]}
        if key == 37:   # CreatePartitions
            return {"results": [{"name": t["name"]} for t in body["topics"]]}
        if key == 32:   # DescribeConfigs
            return {"results": [{"resource_type": r["resource_type"],
                                 "resource_name": r["resource_name"], "configs": [
                                     {"name": "retention.ms", "value": "604800000",
                                      "config_source": 5, "synonyms": []}]}
                                for r in body["resources"]]}
        if key == 44:   # IncrementalAlterConfigs
            self.altered = [(c["name"], c["config_operation"], c["value"])
                            for r in body["resources"] for c in r["configs"]]
            return {"responses": [{"resource_type": r["resource_type"],
                                   "resource_name": r["resource_name"]}
                                  for r in body["resources"]]}
        if key == 21:   # DeleteRecords: the new low watermark is the offset asked
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "low_watermark": p["offset"]}
                for p in t["partitions"]]} for t in body["topics"]]}
        return None


@pytest.fixture(name="stub")
def stub_fixture():
    broker = StubBroker()
    yield broker
    broker.close()
    assert not broker.errors, broker.errors


def test_librdkafka_reads_our_metadata(stub):
    admin = admin_module.AdminClient({"bootstrap.servers": f"127.0.0.1:{stub.port}"})
    metadata = admin.list_topics(timeout=20)
    assert metadata.cluster_id == "stub-cluster"
    assert metadata.controller_id == 1
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        1: ("127.0.0.1", stub.port)}
    topic = metadata.topics["t"]
    assert topic.error is None and sorted(topic.partitions) == [0, 1]
    assert topic.partitions[1].leader == 1 and topic.partitions[1].isrs == [1]
    # librdkafka asked ApiVersions (v3, flexible, with its software name) and Metadata
    assert (18, 3) in stub.seen
    assert any(key == 3 for key, _ in stub.seen)


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_librdkafka_produces_through_our_codec(stub, codec):
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{stub.port}", "compression.type": codec,
        "linger.ms": 5, "acks": "all"})
    delivered = []

    def on_delivery(err, msg):
        delivered.append((err, msg.partition(), msg.offset()))
    for i in range(5):
        producer.produce("t", value=b"v%d" % i, key=b"k", partition=i % 2,
                         on_delivery=on_delivery)
    assert producer.flush(20) == 0
    assert all(err is None for err, _, _ in delivered), delivered
    assert sorted((p, o) for _, p, o in delivered) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    # the record batches came through the request decoder intact (CRC and all)
    values = sorted(r.value for data in stub.batches for r in records.iter_records(data))
    assert values == [b"v%d" % i for i in range(5)]
    produce_versions = {v for key, v in stub.seen if key == 0}
    assert produce_versions and max(produce_versions) >= 7


def test_librdkafka_fetches_through_our_codec(stub):
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{stub.port}", "group.id": "g",
        "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("t", 0),
                                                   timeout=20)
        assert (low, high) == (0, 3)
        consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
        got = []
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
            if len(got) == 3:
                break
    finally:
        consumer.close()
    assert got == [(i, b"value-%d" % i) for i in range(3)]
    fetch_versions = {v for key, v in stub.seen if key == 1}
    assert fetch_versions and max(fetch_versions) >= 13, stub.seen   # topic ids (v13+)


def test_librdkafka_admin_requests_through_our_codec(stub):
    from confluent_kafka.admin import (
        AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
        ResourceType)

    admin = admin_module.AdminClient({"bootstrap.servers": f"127.0.0.1:{stub.port}"})
    for future in admin.create_topics([NewTopic("new", 3, 1)]).values():
        assert future.result(20) is None
    for future in admin.create_partitions([NewPartitions("t", 4)]).values():
        assert future.result(20) is None
    resource = ConfigResource(ResourceType.TOPIC, "t")
    (configs,) = admin.describe_configs([resource]).values()
    assert configs.result(20)["retention.ms"].value == "604800000"
    alter = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([alter]).values():
        assert future.result(20) is None
    assert stub.altered == [("retention.ms", 0, "5000")]
    cluster = admin.describe_cluster().result(20)   # librdkafka asks Metadata for it
    assert cluster.cluster_id == "stub-cluster" and [n.id for n in cluster.nodes] == [1]
    deleted = admin.delete_records([confluent_kafka.TopicPartition("t", 0, 2)])
    assert [f.result(20).low_watermark for f in deleted.values()] == [2]
    for future in admin.delete_topics(["new"]).values():
        assert future.result(20) is None
    keys = {key for key, _ in stub.seen}
    assert {19, 20, 21, 32, 37, 44} <= keys, stub.seen


def test_librdkafka_idempotent_producer_through_our_codec(stub):
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{stub.port}", "enable.idempotence": True})
    delivered = []
    producer.produce("t", value=b"once", partition=1,
                     on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert delivered == [(None, 0)]
    assert any(key == 22 for key, _ in stub.seen), stub.seen
    (batch,) = [b for data in stub.batches for b in records.iter_batches(data)]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 0, 0)
