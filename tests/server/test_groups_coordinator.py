"""The group coordinator through the wire (issue 30): the classic protocol's steps and
refusals with Kafka's error codes, nothing written for a refused commit, the state in
``__consumer_offsets`` loaded back after a restart and after kafkastore's cleaner compacted
it, transactional offsets, offset expiry, and ``dump-log --offsets-decoder`` over a
segment the server wrote."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from kafkastore.internal_topics import GROUP_METADATA_TOPIC, partition_for
from kafkastore.server.error_codes import ErrorCode

import _wire  # noqa: E402  (tests/server is on sys.path, as for the other server tests)
from conftest import PKG_ROOT  # noqa: E402

CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3}
JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE, TXN_COMMIT = 8, 9, 15, 16, 42, 47, 28


@pytest.fixture
def server(make_server):
    return make_server(config=CONFIG)


def _join(sock, group, member_id="", instance=None, version=7, cid=1):
    return _wire.request(sock, JOIN, version, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta"}]}, cid)


def _one_member_group(sock, group):
    """A group of one member through KIP-394's two joins and the leader's sync:
    (member id, generation)."""
    first = _join(sock, group)
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"]
    joined = _join(sock, group, first["member_id"], cid=2)
    assert joined["error_code"] == 0
    assert joined["leader"] == joined["member_id"] == first["member_id"]
    assert [m["member_id"] for m in joined["members"]] == [first["member_id"]]
    synced = _wire.request(sock, SYNC, 5, {
        "group_id": group, "generation_id": joined["generation_id"],
        "member_id": joined["member_id"], "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": joined["member_id"], "assignment": b"mine"}]}, 3)
    assert synced["error_code"] == 0 and synced["assignment"] == b"mine"
    return joined["member_id"], joined["generation_id"]


def _commit(sock, group, offset, member="", generation=-1, version=8, cid=9, topic="t"):
    answer = _wire.request(sock, COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset,
             "committed_metadata": "m"}]}]}, cid)
    return answer["topics"][0]["partitions"][0]["error_code"]


def _fetch(sock, group, version=7, require_stable=False, cid=10, topic="t"):
    answer = _wire.request(sock, FETCH, version, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
        "require_stable": require_stable}, cid)
    part = answer["topics"][0]["partitions"][0]
    return part["committed_offset"], part["error_code"]


def _offsets_end(server, group):
    log = server.broker.log(GROUP_METADATA_TOPIC, partition_for(group, 3))
    return -1 if log is None else log.log_end_offset


def test_join_sync_heartbeat_commit_fetch(server):
    with _wire.connect(server) as sock:
        member, generation = _one_member_group(sock, "g1")
        beat = _wire.request(sock, HEARTBEAT, 4, {"group_id": "g1", "generation_id": generation,
                                                  "member_id": member}, 4)
        assert beat["error_code"] == 0
        assert _commit(sock, "g1", 42, member, generation) == 0
        assert _fetch(sock, "g1") == (42, 0)
        described = _wire.request(sock, DESCRIBE, 5, {"groups": ["g1"]}, 11)["groups"][0]
        assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
        assert described["members"][0]["member_assignment"] == b"mine"
        assert described["members"][0]["client_id"] == "tests"
        listed = _wire.request(sock, LIST, 4, {"states_filter": ["stable"]}, 12)["groups"]
        assert [g["group_id"] for g in listed] == ["g1"]


@pytest.mark.parametrize("version, expected", [(8, ErrorCode.ILLEGAL_GENERATION),
                                               (9, ErrorCode.GROUP_ID_NOT_FOUND)])
def test_commit_to_an_unknown_group_with_a_generation(server, version, expected):
    with _wire.connect(server) as sock:
        _join(sock, "other")   # creates __consumer_offsets, writes nothing
        before = _offsets_end(server, "nope")
        assert _commit(sock, "nope", 5, "someone", 3, version=version) == expected
        assert _offsets_end(server, "nope") == before
        assert _fetch(sock, "nope") == (-1, 0)


def test_commit_errors_of_a_live_group_write_nothing(server):
    with _wire.connect(server) as sock:
        member, generation = _one_member_group(sock, "g2")
        before = _offsets_end(server, "g2")
        assert _commit(sock, "g2", 5, "stranger", generation) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _commit(sock, "g2", 5, member, generation + 1) == ErrorCode.ILLEGAL_GENERATION
        # no member id and no generation while the group has members
        assert _commit(sock, "g2", 5) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _offsets_end(server, "g2") == before
        assert _fetch(sock, "g2") == (-1, 0)
        sync = _wire.request(sock, SYNC, 3, {"group_id": "g2", "generation_id": generation + 7,
                                             "member_id": member}, 20)
        assert sync["error_code"] == ErrorCode.ILLEGAL_GENERATION
        beat = _wire.request(sock, HEARTBEAT, 3, {"group_id": "g2", "generation_id": generation,
                                                  "member_id": "stranger"}, 21)
        assert beat["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_delete_groups_refuses_a_non_empty_group(server):
    with _wire.connect(server) as sock:
        member, generation = _one_member_group(sock, "busy")
        assert _commit(sock, "simple", 3) == 0          # a simple group (no members)
        answer = _wire.request(sock, DELETE, 2, {"groups_names": ["busy", "simple", "ghost"]},
                               30)
        codes = {r["group_id"]: r["error_code"] for r in answer["results"]}
        assert codes == {"busy": ErrorCode.NON_EMPTY_GROUP, "simple": 0,
                         "ghost": ErrorCode.GROUP_ID_NOT_FOUND}
        assert _fetch(sock, "simple") == (-1, 0)
        assert _fetch(sock, "busy", cid=31) == (-1, 0)
        # the member leaves (v3+ batched): the group is empty and can go
        left = _wire.request(sock, LEAVE, 4, {"group_id": "busy", "members": [
            {"member_id": member, "group_instance_id": None}]}, 32)
        assert left["members"][0]["error_code"] == 0
        answer = _wire.request(sock, DELETE, 2, {"groups_names": ["busy"]}, 33)
        assert answer["results"][0]["error_code"] == 0


def test_static_member_rejoin_keeps_the_generation_and_fences_the_old_id(server):
    with _wire.connect(server) as sock:
        first = _join(sock, "st", instance="inst-1", version=9)
        assert first["error_code"] == 0   # a static member needs no second join
        generation = first["generation_id"]
        _wire.request(sock, SYNC, 5, {"group_id": "st", "generation_id": generation,
                                      "member_id": first["member_id"],
                                      "group_instance_id": "inst-1",
                                      "assignments": [{"member_id": first["member_id"],
                                                       "assignment": b"a"}]}, 2)
        again = _join(sock, "st", instance="inst-1", version=9, cid=3)
        assert again["error_code"] == 0
        assert again["generation_id"] == generation          # no rebalance
        assert again["member_id"] != first["member_id"]
        assert again["skip_assignment"] is True              # the leader keeps its plan
        beat = _wire.request(sock, HEARTBEAT, 4, {
            "group_id": "st", "generation_id": generation, "member_id": first["member_id"],
            "group_instance_id": "inst-1"}, 4)
        assert beat["error_code"] == ErrorCode.FENCED_INSTANCE_ID
        sync = _wire.request(sock, SYNC, 5, {"group_id": "st", "generation_id": generation,
                                             "member_id": again["member_id"],
                                             "group_instance_id": "inst-1"}, 5)
        assert (sync["error_code"], sync["assignment"]) == (0, b"a")


def test_txn_offsets_pending_until_the_marker(server):
    gc = server.broker.group_coordinator
    with _wire.connect(server) as sock:
        assert _commit(sock, "tg", 7) == 0
        answer = _wire.request(sock, TXN_COMMIT, 3, {
            "transactional_id": "tx", "group_id": "tg", "producer_id": 1000,
            "producer_epoch": 0, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 99,
                 "committed_metadata": None}]}]}, 2)
        assert answer["topics"][0]["partitions"][0]["error_code"] == 0
        assert _fetch(sock, "tg", require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert _fetch(sock, "tg", cid=11) == (7, 0)
        # the transaction coordinator writes the marker, then tells the group coordinator
        p = partition_for("tg", 3)
        log = server.broker.log(GROUP_METADATA_TOPIC, p)
        log.append_end_txn_marker(1000, 0, "COMMIT")
        gc.on_txn_marker(GROUP_METADATA_TOPIC, p, 1000, 0, True)
        assert _fetch(sock, "tg", require_stable=True, cid=12) == (99, 0)


def test_offsets_survive_a_restart_and_compaction(make_server, tmp_path):
    config = dict(CONFIG, **{"offsets.topic.segment.bytes": 1024})
    log_dir = tmp_path / "logs"
    first = make_server(config=config, log_dir=log_dir)
    with _wire.connect(first) as sock:
        member, generation = _one_member_group(sock, "keep")
        for i in range(60):
            assert _commit(sock, "keep", i, member, generation, cid=100 + i,
                           topic=f"t{i % 3}") == 0
        assert _commit(sock, "gone", 1) == 0
        assert _wire.request(sock, DELETE, 2, {"groups_names": ["gone"]}, 200)[
            "results"][0]["error_code"] == 0
    p = partition_for("keep", 3)
    log = first.broker.log(GROUP_METADATA_TOPIC, p)
    assert len(log.segments) > 2
    size_before = sum(seg.size for seg in log.segments)
    assert first.manager.clean(GROUP_METADATA_TOPIC, p) is not None
    size_after = sum(seg.size for seg in log.segments)
    assert size_after < size_before / 2   # compaction dropped the superseded commits
    first.stop()
    second = make_server(config=config, log_dir=log_dir)
    group = second.broker.group_coordinator.groups["keep"]
    assert {tp: o.offset for tp, o in group.offsets.items()} == {
        ("t0", 0): 57, ("t1", 0): 58, ("t2", 0): 59}
    # the group metadata came back: the member, its generation and assignment
    assert (group.state, group.generation_id, list(group.members)) == (
        "Stable", generation, [member])
    assert "gone" not in second.broker.group_coordinator.groups
    with _wire.connect(second) as sock:
        assert _fetch(sock, "keep", topic="t2") == (59, 0)
        beat = _wire.request(sock, HEARTBEAT, 4, {"group_id": "keep", "generation_id": generation,
                                                  "member_id": member}, 4)
        assert beat["error_code"] == 0


def test_offsets_expire_as_kafkas(server):
    gc = server.broker.group_coordinator
    with _wire.connect(server) as sock:
        assert _commit(sock, "simple", 5) == 0
        member, generation = _one_member_group(sock, "live")
        assert _commit(sock, "live", 6, member, generation) == 0
        week = 10080 * 60_000
        now = gc.groups["simple"].offsets[("t", 0)].commit_ts
        assert gc.expire_offsets(now + week - 1) == 0
        # a simple group's offset: retention after its commit; a group with members keeps
        assert gc.expire_offsets(now + week) == 1
        assert "simple" not in gc.groups and _fetch(sock, "simple") == (-1, 0)
        assert _fetch(sock, "live", cid=11) == (6, 0)
        _wire.request(sock, LEAVE, 2, {"group_id": "live", "member_id": member}, 12)
        empty_since = gc.groups["live"].current_state_ts
        assert gc.groups["live"].state == "Empty"
        # an empty group: retention counts from when it became empty
        assert gc.expire_offsets(empty_since + week - 1) == 0
        assert gc.expire_offsets(empty_since + week) == 1
        assert "live" not in gc.groups


def test_dump_log_offsets_decoder_on_the_servers_segment(server):
    with _wire.connect(server) as sock:
        _one_member_group(sock, "dumped")
        assert _commit(sock, "dumped", 11) == ErrorCode.UNKNOWN_MEMBER_ID
    with _wire.connect(server) as sock:
        assert _commit(sock, "simple-dump", 11) == 0
    p = partition_for("simple-dump", 3)
    path = os.path.join(server.log_dir, f"{GROUP_METADATA_TOPIC}-{p}")
    segment = sorted(glob.glob(os.path.join(path, "*.log")))[0]
    env = dict(os.environ, PYTHONPATH=PKG_ROOT)
    out = subprocess.run([sys.executable, "-m", "kafkastore", "dump-log", "--files", segment,
                          "--offsets-decoder"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert (' key: {"type":"1","data":{"group":"simple-dump","topic":"t","partition":0}}'
            ' payload: {"version":"3","data":{"offset":11,"leaderEpoch":-1,"metadata":"m",'
            '"commitTimestamp":') in out.stdout
    if partition_for("dumped", 3) == p:
        assert '{"type":"2","data":{"group":"dumped"}}' in out.stdout


def test_a_members_client_host_is_its_connections_address(server):
    """DescribeGroups gives each member's client host as Kafka does: the address its
    JoinGroup came from (``RequestContext.clientAddress``), here a second loopback address,
    not the broker's."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=30,
                                  source_address=("127.0.0.2", 0)) as sock:
        member, _ = _one_member_group(sock, "hosted")
        described = _wire.request(sock, DESCRIBE, 5, {
            "groups": ["hosted"], "include_authorized_operations": False}, 40)
    [group] = described["groups"]
    assert [(m["member_id"], m["client_host"]) for m in group["members"]] == \
        [(member, "/127.0.0.2")]
