"""The admin APIs through a real socket (ApiVersions, Metadata, CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs,
DescribeCluster), and the server's configuration: server.properties, the ``log.*``
defaults as Kafka maps them to topic configs, meta.properties."""

from __future__ import annotations

import base64
import logging

import pytest

pytest.importorskip("kafkastore.server.protocol",
                    reason="the codec (kafkastore.server.protocol) is not on this branch yet")

from _wire import connect, request  # noqa: E402

from kafkastore.config import ConfigError  # noqa: E402
from kafkastore.errors import InvalidMetaPropertiesError  # noqa: E402
from kafkastore.log_dir import read_meta_properties  # noqa: E402
from kafkastore.server import KafkaServer, ServerConfig  # noqa: E402
from kafkastore.server.config import parse_listener  # noqa: E402

ZERO = b"\0" * 16
METADATA, CREATE, DELETE, PARTITIONS = 3, 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_CLUSTER, API_VERSIONS = 32, 44, 60, 18
TOPIC, BROKER = 2, 4


@pytest.fixture
def server(tmp_path):
    with KafkaServer(tmp_path / "logs", {"num.partitions": 3, "log.retention.hours": 2},
                     port=0) as s:
        yield s


@pytest.fixture
def sock(server):
    with connect(server) as s:
        yield s


def _create(sock, name, partitions=-1, rf=-1, configs=(), validate_only=False, version=7):
    body = request(sock, CREATE, version, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                    "assignments": [], "configs": [{"name": k, "value": v}
                                                   for k, v in configs]}],
        "timeout_ms": 1000, "validate_only": validate_only})
    return body["topics"][0]


def _metadata(sock, names, auto=False, version=12):
    topics = None if names is None else [{"name": n, "topic_id": ZERO} for n in names]
    return request(sock, METADATA, version, {"topics": topics,
                                             "allow_auto_topic_creation": auto})


def _configs(sock, topic, keys=None):
    body = request(sock, DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": keys}]})
    return body["results"][0]


# -- ApiVersions / DescribeCluster / Metadata -----------------------------------------------

def test_api_versions_v3_finalizes_metadata_version(sock):
    body = request(sock, API_VERSIONS, 3, {"client_software_name": "t",
                                           "client_software_version": "1"})
    assert body["error_code"] == 0
    assert [f["name"] for f in body["finalized_features"]] == ["metadata.version"]
    for v in (0, 1, 2):
        assert request(sock, API_VERSIONS, v, {})["error_code"] == 0


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(server, sock, version):
    body = request(sock, DESCRIBE_CLUSTER, version, {})
    meta = read_meta_properties(server.log_dir)
    assert body["error_code"] == 0 and body["cluster_id"] == meta.cluster_id
    assert body["controller_id"] == 1
    assert body["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": server.port,
                                "rack": None}]


def test_describe_cluster_refuses_controller_endpoints(sock):
    assert request(sock, DESCRIBE_CLUSTER, 1, {"endpoint_type": 2})["error_code"] == 115


def test_metadata_describes_this_node_as_every_partitions_leader(server, sock):
    _create(sock, "orders", 2)
    log = server.broker.log("orders", 1)
    log.append([(b"k", b"v")], partition_leader_epoch=4)   # the leader epoch cache: 4
    body = _metadata(sock, None)
    assert body["cluster_id"] == read_meta_properties(server.log_dir).cluster_id
    assert body["controller_id"] == 1
    [topic] = body["topics"]
    assert topic["name"] == "orders" and topic["error_code"] == 0
    assert topic["topic_id"] == base64.urlsafe_b64decode(log.topic_id + "==")
    parts = sorted(topic["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in parts] == [0, 1]
    for p in parts:
        assert p["leader_id"] == 1 and p["replica_nodes"] == [1] and p["isr_nodes"] == [1]
    assert [p["leader_epoch"] for p in parts] == [0, 4]   # 0: an empty cache


def test_metadata_errors_and_auto_creation(server, sock):
    body = _metadata(sock, ["missing", "bad/name"], auto=False)
    assert [t["error_code"] for t in body["topics"]] == [3, 17]
    assert server.broker.partitions("missing") is None
    body = _metadata(sock, ["fresh"], auto=True)
    assert body["topics"][0]["error_code"] == 0
    assert len(body["topics"][0]["partitions"]) == 3          # num.partitions
    # v0 and v1 (no allow_auto_topic_creation field: Kafka creates)
    assert _metadata(sock, ["v0topic"], version=1)["topics"][0]["error_code"] == 0


def test_metadata_by_topic_id(server, sock):
    _create(sock, "ids", 1)
    tid = _metadata(sock, ["ids"])["topics"][0]["topic_id"]
    body = request(sock, METADATA, 12, {"topics": [{"name": None, "topic_id": tid},
                                                   {"name": None, "topic_id": b"\1" * 16}]})
    assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("ids", 0), (None, 100)]


def test_no_auto_creation_when_disabled(tmp_path):
    with KafkaServer(tmp_path, {"auto.create.topics.enable": "false"}, port=0) as s, \
            connect(s) as sock:
        assert _metadata(sock, ["x"], auto=True)["topics"][0]["error_code"] == 3
        assert s.broker.partitions("x") is None


# -- CreateTopics / DeleteTopics / CreatePartitions ---------------------------------------

def test_create_topics_and_its_refusals(server, sock):
    ok = _create(sock, "a", 2, configs=[("retention.ms", "1000")])
    assert ok["error_code"] == 0 and ok["num_partitions"] == 2 and ok["replication_factor"] == 1
    assert ok["topic_id"] != ZERO
    assert server.broker.log("a", 1).config.retention_ms == 1000
    assert {c["name"]: c["value"] for c in ok["configs"]}["retention.ms"] == "1000"
    assert _create(sock, "a", 2)["error_code"] == 36                  # TOPIC_ALREADY_EXISTS
    assert _create(sock, "b", 0)["error_code"] == 37                  # INVALID_PARTITIONS
    assert _create(sock, "b", 1, rf=3)["error_code"] == 38            # INVALID_REPLICATION_FACTOR
    bad = _create(sock, "b", 1, configs=[("segment.bytes", "5")])
    assert bad["error_code"] == 40 and "segment.bytes" in bad["error_message"]
    bad = _create(sock, "b", 1, configs=[("no.such.config", "1")])
    assert bad["error_code"] == 40 and "no.such.config" in bad["error_message"]
    assert _create(sock, "b/c", 1)["error_code"] == 17                 # INVALID_TOPIC
    assert server.broker.partitions("b") is None
    default = _create(sock, "d")                                       # -1: num.partitions
    assert default["num_partitions"] == 3 and len(server.broker.partitions("d")) == 3
    assert _create(sock, "e", 1, rf=1, version=2)["error_code"] == 0


def test_create_topics_validate_only_creates_nothing(server, sock):
    res = _create(sock, "v", 4, validate_only=True)
    assert res["error_code"] == 0 and res["num_partitions"] == 4
    assert server.broker.partitions("v") is None


def test_delete_topics_by_name_and_by_id(server, sock):
    _create(sock, "x", 2)
    _create(sock, "y", 1)
    tid = _metadata(sock, ["y"])["topics"][0]["topic_id"]
    body = request(sock, DELETE, 5, {"topic_names": ["x", "nope"], "timeout_ms": 1000})
    assert [(r["name"], r["error_code"]) for r in body["responses"]] == [("x", 0), ("nope", 3)]
    body = request(sock, DELETE, 6, {"topics": [{"name": None, "topic_id": tid},
                                                {"name": None, "topic_id": b"\7" * 16}],
                                     "timeout_ms": 1000})
    assert [(r["name"], r["error_code"]) for r in body["responses"]] == [("y", 0), (None, 100)]
    assert server.broker.topics() == {}


def test_delete_topics_disabled(tmp_path):
    with KafkaServer(tmp_path, {"delete.topic.enable": False}, port=0) as s, \
            connect(s) as sock:
        _create(sock, "x", 1)
        body = request(sock, DELETE, 6, {"topics": [{"name": "x", "topic_id": ZERO}],
                                         "timeout_ms": 1000})
        assert body["responses"][0]["error_code"] == 73
        assert s.broker.partitions("x") == [0]


def test_create_partitions_increase_only(server, sock):
    _create(sock, "p", 2)

    def grow(count, validate_only=False):
        body = request(sock, PARTITIONS, 3, {"topics": [{"name": "p", "count": count,
                                                         "assignments": None}],
                                             "timeout_ms": 1000,
                                             "validate_only": validate_only})
        return body["results"][0]["error_code"]

    assert grow(5, validate_only=True) == 0 and server.broker.partitions("p") == [0, 1]
    assert grow(5) == 0 and server.broker.partitions("p") == [0, 1, 2, 3, 4]
    assert grow(5) == 37 and grow(1) == 37
    body = request(sock, PARTITIONS, 0, {"topics": [{"name": "zz", "count": 3,
                                                     "assignments": None}],
                                         "timeout_ms": 1, "validate_only": False})
    assert body["results"][0]["error_code"] == 3


# -- DescribeConfigs / IncrementalAlterConfigs ----------------------------------------------

def test_describe_configs_sources(server, sock):
    _create(sock, "c", 1, configs=[("cleanup.policy", "compact")])
    res = _configs(sock, "c")
    assert res["error_code"] == 0
    by_name = {c["name"]: c for c in res["configs"]}
    assert by_name["cleanup.policy"]["value"] == "compact"
    assert by_name["cleanup.policy"]["config_source"] == 1          # DYNAMIC_TOPIC_CONFIG
    assert by_name["retention.ms"]["value"] == str(2 * 3600000)     # log.retention.hours=2
    assert by_name["retention.ms"]["config_source"] == 4            # STATIC_BROKER_CONFIG
    assert by_name["segment.bytes"]["config_source"] == 5           # DEFAULT_CONFIG
    assert all(not c["is_sensitive"] and not c["read_only"] for c in res["configs"])
    assert _configs(sock, "c", ["segment.bytes"])["configs"][0]["name"] == "segment.bytes"
    assert _configs(sock, "missing")["error_code"] == 3


def test_describe_configs_of_the_broker(sock):
    body = request(sock, DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": BROKER, "resource_name": "1", "configuration_keys": None},
        {"resource_type": BROKER, "resource_name": "7", "configuration_keys": None}]})
    first, second = body["results"]
    values = {c["name"]: c["value"] for c in first["configs"]}
    assert first["error_code"] == 0 and values["num.partitions"] == "3"
    assert values["log.retention.hours"] == "2"
    assert second["error_code"] == 42


def test_incremental_alter_configs(server, sock):
    _create(sock, "alt", 1)

    def alter(ops, validate_only=False, version=1, name="alt"):
        body = request(sock, ALTER_CONFIGS, version, {"resources": [{
            "resource_type": TOPIC, "resource_name": name,
            "configs": [{"name": n, "config_operation": op, "value": v}
                        for n, op, v in ops]}], "validate_only": validate_only})
        return body["responses"][0]

    assert alter([("retention.ms", 0, "5000")], validate_only=True)["error_code"] == 0
    assert server.broker.log("alt", 0).config.retention_ms == 2 * 3600000
    assert alter([("retention.ms", 0, "5000"), ("segment.bytes", 0, "2000")])["error_code"] == 0
    assert server.broker.log("alt", 0).config.retention_ms == 5000
    assert alter([("cleanup.policy", 2, "compact")], version=0)["error_code"] == 0   # APPEND
    assert server.broker.log("alt", 0).config.cleanup_policy == ("compact", "delete")
    assert alter([("segment.bytes", 1, None)])["error_code"] == 0                   # DELETE
    by_name = {c["name"]: c for c in _configs(sock, "alt")["configs"]}
    assert by_name["segment.bytes"]["config_source"] == 5
    assert by_name["retention.ms"]["value"] == "5000"
    bad = alter([("segment.bytes", 0, "5")])
    assert bad["error_code"] == 40 and "segment.bytes" in bad["error_message"]
    assert server.broker.log("alt", 0).config.segment_bytes == 1073741824   # unchanged
    assert alter([("nope.nope", 0, "1")])["error_code"] == 40
    assert alter([("retention.ms", 0, "1")], name="ghost")["error_code"] == 3


# -- the configuration ---------------------------------------------------------------------

def test_server_properties_file_and_kafkas_topic_config_synonyms(tmp_path, caplog):
    caplog.set_level(logging.INFO, "kafkastore.server")
    props = tmp_path / "server.properties"
    props.write_text("# comment\n! another\nnode.id : 4\nlog.retention.minutes=3\n"
                     "log.retention.hours=9\nlog.roll.hours 1\nlog.flush.interval.messages=1\n"
                     "log.cleanup.policy=compact,\\\n    delete\nmessage.max.bytes=2000\n"
                     "listeners=PLAINTEXT://127.0.0.1:9093\nmade.up.key=1\n")
    config = ServerConfig.from_file(props, {"log.retention.ms": "7"})
    assert config["node.id"] == 4 and config.listener() == ("127.0.0.1", 9093)
    log = config.log_defaults()
    assert log.retention_ms == 7                  # .ms wins over .minutes and .hours
    assert log.segment_ms == 3600000 and log.flush_messages == 1
    assert log.cleanup_policy == ("compact", "delete") and log.max_message_bytes == 2000
    assert ServerConfig({"log.retention.minutes": 3, "log.retention.hours": 9}) \
        .log_defaults().retention_ms == 180000
    assert "made.up.key" in caplog.text


@pytest.mark.parametrize("overrides, match", [
    ({"log.segment.bytes": "5"}, "segment.bytes"),
    ({"num.partitions": "x"}, "num.partitions"),
    ({"default.replication.factor": 3}, "must be 1"),
    ({"listeners": "SSL://127.0.0.1:9093"}, "PLAINTEXT"),
    ({"auto.create.topics.enable": "yes"}, "true or false"),
])
def test_bad_server_configs_are_config_errors(overrides, match):
    with pytest.raises(ConfigError, match=match):
        ServerConfig(overrides)


def test_parse_listener():
    assert parse_listener("PLAINTEXT://[::1]:9092") == ("::1", 9092)
    assert parse_listener("CONTROLLER://:9093,PLAINTEXT://:9092") == ("0.0.0.0", 9092)


def test_meta_properties_persist_the_cluster_id_and_refuse_another_node_id(tmp_path):
    with KafkaServer(tmp_path, {"node.id": 5}, port=0) as s:
        first = s.broker.cluster_id
    meta = read_meta_properties(str(tmp_path))
    assert (meta.version, meta.cluster_id, meta.node_id) == (1, first, 5)
    assert meta.directory_id is not None
    with KafkaServer(tmp_path, {"node.id": 5}, port=0) as s:
        assert s.broker.cluster_id == first
    with pytest.raises(InvalidMetaPropertiesError, match="Stored node id 5 doesn't match "
                       "previous node id 6"):
        KafkaServer(tmp_path, {"node.id": 6}, port=0).start()
    # the refused start left the directory unlocked and unchanged
    with KafkaServer(tmp_path, {"node.id": 5}, port=0) as s:
        assert s.broker.cluster_id == first
