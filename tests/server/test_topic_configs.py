"""Topic config overrides set by clients survive a restart of the server
(``kafkastore-topic-configs.json``, :class:`kafkastore.server.config.TopicConfigFile`),
written crash-safely, and go with a deleted topic."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("kafkastore.server.protocol",
                    reason="the codec (kafkastore.server.protocol) is not on this branch yet")

from _logtools import Crash, FaultFS  # noqa: E402
from _wire import connect, request  # noqa: E402

from kafkastore import _fileio  # noqa: E402
from kafkastore.config import ConfigError  # noqa: E402
from kafkastore.errors import KafkaStorageError  # noqa: E402
from kafkastore.manager import LogManager  # noqa: E402
from kafkastore.server import KafkaServer  # noqa: E402
from kafkastore.server.config import TOPIC_CONFIGS_FILE, TopicConfigFile  # noqa: E402

CREATE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 19, 20, 32, 44
TOPIC = 2
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


def _create(sock, name, configs):
    body = request(sock, CREATE, 7, {
        "topics": [{"name": name, "num_partitions": 2, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout_ms": 1000, "validate_only": False})
    assert body["topics"][0]["error_code"] == 0, body


def _described(sock, topic):
    body = request(sock, DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}]})
    result = body["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def _alter(sock, topic, ops):
    body = request(sock, ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": TOPIC, "resource_name": topic,
        "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": False})
    return body["responses"][0]


def test_created_and_altered_overrides_survive_a_restart(tmp_path):
    logs = tmp_path / "logs"
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        _create(sock, "compacted", {"cleanup.policy": "compact", "retention.ms": "60000"})
        _create(sock, "plain", {})
        assert _alter(sock, "plain", [("segment.bytes", 0, "1048576")])["error_code"] == 0
    # a new server (new process state) on the same directory
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        described = _described(sock, "compacted")
        assert described["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
        assert described["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
        assert described["segment.bytes"][1] == DEFAULT_CONFIG
        for p in (0, 1):
            config = server.broker.log("compacted", p).config
            assert config.cleanup_policy == ("compact",)
            assert config.retention_ms == 60000
        assert _described(sock, "plain")["segment.bytes"] == ("1048576",
                                                              DYNAMIC_TOPIC_CONFIG)
        assert server.broker.log("plain", 0).config.segment_bytes == 1048576
        # a DELETE operation is persisted too
        assert _alter(sock, "plain", [("segment.bytes", 1, None)])["error_code"] == 0
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        assert _described(sock, "plain")["segment.bytes"][1] == DEFAULT_CONFIG
        assert server.broker.log("compacted", 0).config.cleanup_policy == ("compact",)


def test_the_file_is_a_regular_file_at_the_top_and_the_directory_still_opens(tmp_path):
    logs = tmp_path / "logs"
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        _create(sock, "c", {"cleanup.policy": "compact"})
    path = logs / TOPIC_CONFIGS_FILE
    assert path.is_file()
    assert json.loads(path.read_text()) == {"version": 1,
                                            "topics": {"c": {"cleanup.policy": "compact"}}}
    # the library's own manager opens the directory (the file is no partition directory)
    with LogManager(logs, background=False) as manager:
        assert sorted(tp.partition for tp in manager.logs()) == [0, 1]


def test_a_deleted_topics_overrides_are_removed(tmp_path):
    logs = tmp_path / "logs"
    with KafkaServer(logs, {"file.delete.delay.ms": 0}, port=0) as server, \
            connect(server) as sock:
        _create(sock, "gone", {"cleanup.policy": "compact"})
        _create(sock, "kept", {"retention.ms": "1000"})
        body = request(sock, DELETE, 4, {"topic_names": ["gone"], "timeout_ms": 1000})
        assert body["responses"][0]["error_code"] == 0
        assert TopicConfigFile(logs).read() == {"kept": {"retention.ms": "1000"}}
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        _create(sock, "gone", {})   # the same name again: no inherited overrides
        assert _described(sock, "gone")["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
        assert server.broker.log("gone", 0).config.cleanup_policy == ("delete",)


def test_stale_overrides_of_a_topic_without_partitions_are_dropped_at_start(tmp_path):
    # what a crash between writing a new topic's overrides and creating its first
    # partition leaves behind
    logs = tmp_path / "logs"
    logs.mkdir()
    TopicConfigFile(logs).write({"ghost": {"cleanup.policy": "compact"}})
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        assert TopicConfigFile(logs).read() == {}
        _create(sock, "ghost", {})
        assert server.broker.log("ghost", 0).config.cleanup_policy == ("delete",)


@pytest.mark.parametrize("op", ["write", "fsync", "rename"])
def test_a_torn_write_leaves_the_old_contents(tmp_path, op):
    store = TopicConfigFile(tmp_path)
    old = {"t": {"cleanup.policy": "compact"}}
    store.write(old)
    fs = FaultFS({op: {1: "crash"}})
    previous = _fileio.install(fs)
    try:
        with pytest.raises(Crash):
            store.write({"t": {"cleanup.policy": "delete"}, "u": {"retention.ms": "5"}})
    finally:
        _fileio.install(previous)
    assert fs.fired, "the fault never fired"
    assert store.read() == old
    # and a server started on the directory after the "crash" uses the old overrides
    with LogManager(tmp_path, background=False) as manager:
        manager.get_or_create("t", 0)
    with KafkaServer(tmp_path, port=0) as server:
        assert server.broker.log("t", 0).config.cleanup_policy == ("compact",)
        assert server.broker.topic_overrides("t") == old["t"]


def test_a_failed_write_is_answered_and_changes_nothing(tmp_path):
    logs = tmp_path / "logs"
    with KafkaServer(logs, port=0) as server, connect(server) as sock:
        _create(sock, "t", {"retention.ms": "60000"})
        previous = _fileio.install(FaultFS({"fsync": {1: "eio"}}))
        try:
            answer = _alter(sock, "t", [("retention.ms", 0, "1000")])
        finally:
            _fileio.install(previous)
        assert answer["error_code"] == 56, answer   # KAFKA_STORAGE_ERROR
        assert server.broker.log("t", 0).config.retention_ms == 60000
        assert _described(sock, "t")["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
    assert TopicConfigFile(logs).read() == {"t": {"retention.ms": "60000"}}


@pytest.mark.parametrize("content", [b"{not json", b"[]", b'{"version": 2, "topics": {}}',
                                     b'{"version": 1, "topics": {"t": 5}}', b"\xff\xfe"])
def test_a_damaged_file_refuses_the_start(tmp_path, content):
    # starting without the overrides would open a compacted topic with the delete policy
    (tmp_path / TOPIC_CONFIGS_FILE).write_bytes(content)
    with pytest.raises(ConfigError) as info:
        KafkaServer(tmp_path, port=0).start()
    assert info.value.path == str(tmp_path / TOPIC_CONFIGS_FILE)


def test_write_errors_are_kafka_storage_errors(tmp_path):
    store = TopicConfigFile(tmp_path / "missing-dir")
    with pytest.raises(KafkaStorageError):
        store.write({"t": {"retention.ms": "1"}})
    assert not os.path.exists(store.path)
