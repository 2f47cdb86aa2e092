"""FindCoordinator (issue 30): this node for group and transaction keys, the internal
topic created on first need, batched keys (v4+), INVALID_REQUEST for an unknown key type."""

from __future__ import annotations

import pytest

from kafkastore.internal_topics import GROUP_METADATA_TOPIC
from kafkastore.server.error_codes import ErrorCode

import _wire  # noqa: E402  (tests/server is on sys.path, as for the other server tests)


@pytest.fixture
def server(make_server):
    return make_server(config={"offsets.topic.num.partitions": 3,
                               "transaction.state.log.num.partitions": 2})


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_key_names_this_node_and_creates_the_offsets_topic(server, version):
    assert GROUP_METADATA_TOPIC not in server.broker.topics()
    body = {"key": "my-group", "key_type": 0}
    with _wire.connect(server) as sock:
        answer = _wire.request(sock, 10, version, body)
    assert answer["error_code"] == 0
    assert (answer["node_id"], answer["host"], answer["port"]) == (
        server.broker.node_id, "127.0.0.1", server.port)
    assert server.broker.partitions(GROUP_METADATA_TOPIC) == [0, 1, 2]
    assert server.broker.topic_overrides(GROUP_METADATA_TOPIC)["cleanup.policy"] == "compact"


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_keys_each_answered(server, version):
    with _wire.connect(server) as sock:
        answer = _wire.request(sock, 10, version, {"key_type": 0,
                                                   "coordinator_keys": ["a", "b", "c"]})
    assert [c["key"] for c in answer["coordinators"]] == ["a", "b", "c"]
    for c in answer["coordinators"]:
        assert (c["error_code"], c["node_id"], c["port"]) == (0, server.broker.node_id,
                                                               server.port)


def test_unknown_key_type_is_invalid_request(server):
    with _wire.connect(server) as sock:
        old = _wire.request(sock, 10, 3, {"key": "k", "key_type": 7})
        new = _wire.request(sock, 10, 4, {"key_type": 7, "coordinator_keys": ["k"]}, 2)
    assert old["error_code"] == ErrorCode.INVALID_REQUEST
    assert old["node_id"] == -1
    assert new["coordinators"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert GROUP_METADATA_TOPIC not in server.broker.topics()


def test_transaction_key_asks_the_transaction_coordinator(server):
    calls = []
    real = server.broker.txn_coordinator.ensure_state_topic

    async def spy():
        calls.append(1)
        await real()
    server.broker.txn_coordinator.ensure_state_topic = spy
    with _wire.connect(server) as sock:
        answer = _wire.request(sock, 10, 4, {"key_type": 1, "coordinator_keys": ["txn-1"]})
    assert answer["coordinators"][0]["error_code"] == 0
    assert calls == [1]
