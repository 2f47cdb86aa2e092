"""Kafka's group coordinator over ``__consumer_offsets``: the classic group protocol.

A port of the behaviour of Kafka's group coordinator for classic groups
(``group-coordinator``'s ``GroupMetadataManager`` / ``ClassicGroup`` /
``OffsetMetadataManager``, core's ``GroupCoordinator.scala`` before it) on one node:

- Groups move through Kafka's states: Empty -> PreparingRebalance -> CompletingRebalance ->
  Stable (and Dead once deleted). A JoinGroup starts a rebalance; the join phase ends when
  every known member has rejoined or the rebalance timeout (the largest of the members')
  passed, members that did not rejoin are removed; the first rebalance of an empty group
  waits ``group.initial.rebalance.delay.ms`` (extended while members keep joining, up to
  the rebalance timeout: Kafka's ``InitialDelayedJoin``). The leader gets every member's
  metadata, runs the assignor (eager or cooperative: client side) and sends the
  assignments in its SyncGroup; the others' SyncGroup waits for it.
- KIP-394: a JoinGroup v4+ without a member id is answered MEMBER_ID_REQUIRED with one;
  the member is pending until it joins with it (or its session timeout passes).
- KIP-345 static members (``group.instance.id``): a known instance joining again takes
  its new member id without a rebalance when the group is stable and its protocols did
  not change (the old id is fenced: FENCED_INSTANCE_ID).
- Heartbeats keep a member's session; one that misses ``session.timeout.ms`` is removed
  and the group rebalances.
- State as ``__consumer_offsets`` records (:mod:`kafkastore.internal_topics.group_records`),
  in the partition ``partition_for(group_id, offsets.topic.num.partitions)``: an
  OffsetCommit record per committed partition, acknowledged once appended; a
  GroupMetadata record when a generation completes (the leader's SyncGroup), when the
  group becomes empty, and when a static member's id changes; tombstones for deleted
  offsets and groups. :meth:`GroupCoordinator.start` loads them back (last record per key
  wins, transactional offsets by their markers).
- Transactional offsets (TxnOffsetCommit) are written as a transactional batch of the
  producer and stay pending (OffsetFetch with ``require_stable``: UNSTABLE_OFFSET_COMMIT)
  until the transaction coordinator's marker: :meth:`GroupCoordinator.on_txn_marker`.
- Offsets expire as in Kafka's ``OffsetMetadataManager.cleanupExpiredOffsets``: an empty
  group's offsets ``offsets.retention.minutes`` after the group became empty, a simple
  group's (no protocol type) that long after their commit, an explicit expiry
  (OffsetCommit v2-v4's retention) at that time; never while a transactional offset for
  the partition is pending. A group left empty with no offsets is deleted.

Thread-safety: on the server's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from dataclasses import dataclass, field

from kafkastore.errors import KafkaStoreError, RecordTooLargeError
from kafkastore.internal_topics import GROUP_METADATA_TOPIC, partition_for
from kafkastore.internal_topics import group_records as gr
from kafkastore.records import encode_batch, iter_batches
from kafkastore.server.broker import CLIENT_ADDRESS, Broker
from kafkastore.server.error_codes import ErrorCode

__all__ = ["GroupCoordinator", "every_partition", "EMPTY", "PREPARING_REBALANCE",
           "COMPLETING_REBALANCE", "STABLE", "DEAD"]

_log = logging.getLogger("kafkastore.server")

#: the classic group states, as Kafka names them in DescribeGroups / ListGroups
EMPTY, PREPARING_REBALANCE = "Empty", "PreparingRebalance"
COMPLETING_REBALANCE, STABLE, DEAD = "CompletingRebalance", "Stable", "Dead"
_STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)
#: Kafka's OffsetConfig.DEFAULT_MAX_METADATA_SIZE (``offset.metadata.max.bytes``)
_METADATA_MAX = 4096
#: Kafka's ``CONSUMER_PROTOCOL_TYPE``
_CONSUMER = "consumer"


def every_partition(request: dict, code: int) -> dict:
    """An OffsetCommit / TxnOffsetCommit response with ``code`` for every partition of
    the request (Kafka answers a refused commit so)."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"],
                                            "error_code": code}
                                           for p in t.get("partitions") or []]}
        for t in request.get("topics") or []]}


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Error(Exception):
    """A refusal with Kafka's error code (raised inside the coordinator, answered by
    the API's response)."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = int(code)


@dataclass
class _Offset:
    """Kafka's ``OffsetAndMetadata`` plus where its record is in the log."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_ts: int
    expire_ts: int   # -1: none
    record_offset: int = -1


@dataclass
class _Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list   # [(name, metadata bytes)], in the member's preference order
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    heartbeat: asyncio.TimerHandle | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass
class _Group:
    group_id: str
    state: str = EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, _Member] = field(default_factory=dict)
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], _Offset] = field(default_factory=dict)
    #: producer id -> {(topic, partition): offset} of open transactions
    pending_txn: dict[int, dict[tuple[str, int], _Offset]] = field(default_factory=dict)
    current_state_ts: int | None = None
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None
    #: the initial delay's deadline (a new group's first rebalance) and its budget left
    initial_delay: bool = False
    new_member_added: bool = False

    def transition(self, state: str) -> None:
        self.state = state
        self.current_state_ts = _now_ms()

    def pending_txn_for(self, tp: tuple[str, int]) -> bool:
        return any(tp in offs for offs in self.pending_txn.values())

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to (the consumer protocol's v0 prefix), None
        when unknown (Kafka's ``ClassicGroup.computeSubscribedTopics``)."""
        if self.protocol_type != _CONSUMER or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                data = m.metadata(self.protocol_name)
                (n,) = struct.unpack_from(">i", data, 2)
                pos = 6
                for _ in range(n):
                    (ln,) = struct.unpack_from(">h", data, pos)
                    topics.add(data[pos + 2:pos + 2 + ln].decode("utf-8"))
                    pos += 2 + ln
        except (struct.error, UnicodeDecodeError):
            return None
        return topics


class GroupCoordinator:
    """The consumer groups of a single-node broker, their state in ``__consumer_offsets``.

    Thread-safety: on the server's event loop only."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.groups: dict[str, _Group] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._closed = False

    # -- configuration ------------------------------------------------------------------
    def _cfg(self, key: str) -> int:
        return int(self.broker.config[key])  # type: ignore[arg-type]

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self._cfg("offsets.topic.num.partitions"))

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Load the groups' state from ``__consumer_offsets`` (called once the server is
        bound, before the first request is read)."""
        for p in self.broker.partitions(GROUP_METADATA_TOPIC) or []:
            self._load_partition(p)
        loop = asyncio.get_running_loop()
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        interval = self._cfg("offsets.retention.check.interval.ms") / 1000.0
        self._expiry = loop.call_later(interval, self._expiry_tick, interval)

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if missing (Kafka creates it on the first
        FindCoordinator for a group)."""
        self._ensure_topic()

    def _ensure_topic(self) -> None:
        broker = self.broker
        if broker.partitions(GROUP_METADATA_TOPIC) is not None:
            return
        # the topic's configs as Kafka's GroupCoordinator.groupMetadataTopicConfigs:
        # compacted, its segment size, the producer's compression kept
        broker.create_topic(GROUP_METADATA_TOPIC, self._cfg("offsets.topic.num.partitions"),
                            configs={"cleanup.policy": "compact",
                                     "segment.bytes": self._cfg("offsets.topic.segment.bytes"),
                                     "compression.type": "producer"})

    def close(self) -> None:
        """Stop the timers (the logs are closed by the server); requests still waiting
        for a rebalance are answered NOT_COORDINATOR, as Kafka's on unloading a group, and
        so is a JoinGroup or SyncGroup that arrives after. The server calls it as its stop
        begins, so that a parked request does not hold the stop up."""
        self._closed = True
        if self._expiry is not None:
            self._expiry.cancel()
        for group in self.groups.values():
            for timer in (group.join_timer, group.sync_timer,
                          *group.pending_members.values()):
                if timer is not None:
                    timer.cancel()
            for m in group.members.values():
                if m.heartbeat is not None:
                    m.heartbeat.cancel()
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result({"error_code": int(ErrorCode.NOT_COORDINATOR)})

    # -- loading ------------------------------------------------------------------------
    def _load_partition(self, partition: int) -> None:
        log = self.broker.log(GROUP_METADATA_TOPIC, partition)
        if log is None:
            return
        offset, end = log.log_start_offset, log.log_end_offset
        #: producer id -> [(record offset, key, value)] of its open transaction
        open_txns: dict[int, list] = {}
        while offset < end:
            data = log.read(offset, 1 << 20).to_bytes()
            if not data:
                break
            for batch in iter_batches(data):
                offset = batch.next_offset
                if batch.is_control:
                    rec = next(iter(batch))
                    committed = rec.key is not None and len(rec.key) >= 4 and \
                        struct.unpack_from(">h", rec.key, 2)[0] == 1
                    for rec_offset, key, value in open_txns.pop(batch.producer_id, []):
                        if committed:
                            self._replay(key, value, rec_offset, None)
                    continue
                for rec in batch:
                    if rec.key is None:
                        continue
                    if batch.is_transactional:
                        open_txns.setdefault(batch.producer_id, []).append(
                            (rec.offset, bytes(rec.key),
                             None if rec.value is None else bytes(rec.value)))
                    else:
                        self._replay(bytes(rec.key),
                                     None if rec.value is None else bytes(rec.value),
                                     rec.offset, None)
        # transactions still open at the end: their offsets stay pending (Kafka's
        # replay of transactional records keeps them until the marker)
        for producer_id, records in open_txns.items():
            for rec_offset, key, value in records:
                self._replay(key, value, rec_offset, producer_id)

    def _replay(self, key: bytes, value: bytes | None, record_offset: int,
                producer_id: int | None) -> None:
        try:
            k = gr.decode_key(key)
            if isinstance(k, gr.GroupMetadataKey):
                self._replay_group(k.group, None if value is None
                                   else gr.decode_group_value(value))
                return
            v = None if value is None else gr.decode_offset_value(value)
        except gr.UnknownRecordTypeError:
            return   # KIP-848 / share group records: not this coordinator's
        except KafkaStoreError as exc:
            _log.warning("kafkastore serve: skipping a __consumer_offsets record at offset "
                         "%d that does not decode: %s", record_offset, exc)
            return
        tp = (k.topic, k.partition)
        group = self.groups.get(k.group)
        if v is None:
            if group is not None:
                if producer_id is None:
                    group.offsets.pop(tp, None)
                else:
                    group.pending_txn.get(producer_id, {}).pop(tp, None)
            return
        if group is None:
            group = self.groups[k.group] = _Group(k.group)
        off = _Offset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                      v.expire_timestamp, record_offset)
        if producer_id is None:
            group.offsets[tp] = off
        else:
            group.pending_txn.setdefault(producer_id, {})[tp] = off

    def _replay_group(self, group_id: str, value: gr.GroupMetadataValue | None) -> None:
        if value is None:
            self.groups.pop(group_id, None)
            return
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = _Group(group_id)
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.generation_id = value.generation
        group.leader_id = value.leader
        group.current_state_ts = (value.current_state_timestamp
                                  if value.current_state_timestamp >= 0 else None)
        group.members = {}
        group.static_members = {}
        for m in value.members:
            member = _Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.rebalance_timeout, m.session_timeout, group.protocol_type or "",
                             [(value.protocol, m.subscription)], m.assignment)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        # Kafka loads a group with members as Stable, without as Empty
        group.state = STABLE if group.members else EMPTY

    # -- writing ------------------------------------------------------------------------
    def _append(self, group_id: str, records: list, producer: tuple[int, int] | None = None
                ) -> int:
        """Append ``records`` [(key, value)] to the group's partition of
        ``__consumer_offsets``: the base offset. Raises _Error with Kafka's code for a
        failed append (GroupCoordinatorService's mapping: a too large batch is
        INVALID_COMMIT_OFFSET_SIZE, a storage failure COORDINATOR_NOT_AVAILABLE)."""
        p = self.partition_for(group_id)
        log = self.broker.log(GROUP_METADATA_TOPIC, p)
        if log is None:
            # (the topic is looked for only then: finding it lists every log)
            self._ensure_topic()
            log = self.broker.log(GROUP_METADATA_TOPIC, p)
        if log is None:
            raise _Error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            if producer is None:
                info = log.append(records)
            else:
                # a transactional batch of the producer, written as the coordinator
                # writes it (no sequence: Kafka's RecordBatch.NO_SEQUENCE)
                info = log.append_batches(encode_batch(
                    records, producer_id=producer[0], producer_epoch=producer[1],
                    is_transactional=True), origin="coordinator")
        except RecordTooLargeError:
            raise _Error(ErrorCode.INVALID_COMMIT_OFFSET_SIZE) from None
        except KafkaStoreError as exc:
            _log.warning("kafkastore serve: appending to %s-%d failed: %s",
                         GROUP_METADATA_TOPIC, p, exc)
            raise _Error(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None
        self.broker.notify_append(GROUP_METADATA_TOPIC, p)
        return info.first_offset

    def _group_record(self, group: _Group) -> tuple[bytes, bytes]:
        """Kafka's ``newGroupMetadataRecord`` (or the empty one)."""
        members = tuple(gr.MemberMetadata(
            m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
            m.rebalance_timeout_ms, m.metadata(group.protocol_name), m.assignment,
            m.group_instance_id) for m in group.members.values())
        value = gr.GroupMetadataValue(
            group.protocol_type or "", group.generation_id,
            group.protocol_name if members else None, group.leader_id if members else None,
            group.current_state_ts if group.current_state_ts is not None else -1, members)
        return gr.GroupMetadataKey(group.group_id).to_bytes(), value.to_bytes()

    def _store_group(self, group: _Group) -> int:
        try:
            self._append(group.group_id, [self._group_record(group)])
        except _Error as exc:
            return exc.code
        return 0

    # -- timers -------------------------------------------------------------------------
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _schedule_heartbeat(self, group: _Group, member: _Member) -> None:
        if member.heartbeat is not None:
            member.heartbeat.cancel()
        if self._closed:
            return
        member.heartbeat = self._loop().call_later(
            member.session_timeout_ms / 1000.0, self._session_expired, group, member)

    def _session_expired(self, group: _Group, member: _Member) -> None:
        member.heartbeat = None
        if group.members.get(member.member_id) is not member:
            return
        # Kafka's ClassicGroupMember.shouldKeepAlive: a member waiting for its join or
        # sync response is kept alive
        if (member.join_future is not None and not member.join_future.done()) or \
                (member.sync_future is not None and not member.sync_future.done()):
            self._schedule_heartbeat(group, member)
            return
        _log.info("kafkastore serve: member %s of group %s failed its session timeout",
                  member.member_id, group.group_id)
        self._remove_member_and_rebalance(group, member, "session timeout")

    # -- membership ---------------------------------------------------------------------
    def _add_member(self, group: _Group, member: _Member) -> None:
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if group.leader_id is None:
            group.leader_id = member.member_id
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id

    def _remove_member(self, group: _Group, member: _Member) -> None:
        group.members.pop(member.member_id, None)
        if member.heartbeat is not None:
            member.heartbeat.cancel()
            member.heartbeat = None
        if member.group_instance_id is not None and \
                group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_member_and_rebalance(self, group: _Group, member: _Member, reason: str
                                     ) -> None:
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result({"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)})
        self._remove_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _can_rebalance(self, group: _Group) -> bool:
        return group.state in (STABLE, COMPLETING_REBALANCE, EMPTY)

    def _prepare_rebalance(self, group: _Group, reason: str) -> None:
        """Kafka's ``prepareRebalance``: the join phase starts (delayed for a new group)."""
        if group.state == COMPLETING_REBALANCE:
            # the assignments of the generation that did not complete are void
            for m in group.members.values():
                m.assignment = b""
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(
                        {"error_code": int(ErrorCode.REBALANCE_IN_PROGRESS)})
                m.sync_future = None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        loop = self._loop()
        if group.join_timer is not None:
            group.join_timer.cancel()
        rebalance_ms = max((m.rebalance_timeout_ms for m in group.members.values()),
                           default=0)
        delay = self._cfg("group.initial.rebalance.delay.ms")
        if group.state == EMPTY and delay > 0:
            # Kafka's InitialDelayedJoin: wait for more members of a new group
            group.initial_delay = True
            group.new_member_added = False
            group.join_timer = loop.call_later(
                delay / 1000.0, self._initial_delay_done, group, delay,
                max(rebalance_ms - delay, 0))
        else:
            group.initial_delay = False
            group.join_timer = loop.call_later(rebalance_ms / 1000.0,
                                               self._join_timeout, group)
        _log.info("kafkastore serve: preparing to rebalance group %s in state %s with old "
                  "generation %d (reason: %s)", group.group_id, group.state,
                  group.generation_id, reason)
        group.transition(PREPARING_REBALANCE)
        if not group.initial_delay:
            self._try_complete_join(group)

    def _initial_delay_done(self, group: _Group, delay: int, remaining: int) -> None:
        group.join_timer = None
        if group.state != PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.join_timer = self._loop().call_later(
                step / 1000.0, self._initial_delay_done, group, delay, remaining - step)
            return
        group.initial_delay = False
        self._complete_join(group)

    def _join_timeout(self, group: _Group) -> None:
        group.join_timer = None
        if group.state == PREPARING_REBALANCE:
            self._complete_join(group)

    def _try_complete_join(self, group: _Group) -> None:
        if group.state != PREPARING_REBALANCE or group.initial_delay:
            return
        all_joined = all(m.join_future is not None and not m.join_future.done()
                         for m in group.members.values())
        if all_joined and not group.pending_members:
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        """Kafka's ``onCompleteJoin``: members that did not rejoin are removed, the next
        generation starts, each waiting JoinGroup is answered (the leader with the
        members' metadata)."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for m in [m for m in group.members.values()
                  if m.join_future is None or m.join_future.done()]:
            self._remove_member(group, m)
        # the leader must be a member that rejoined (maybeElectNewJoinedLeader)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition(EMPTY)
            self._store_group(group)
            return
        group.protocol_name = self._select_protocol(group)
        group.transition(COMPLETING_REBALANCE)
        for m in group.members.values():
            is_leader = m.member_id == group.leader_id
            members = self._members_for_leader(group) if is_leader else []
            fut, m.join_future = m.join_future, None
            m.is_new = False
            if fut is not None and not fut.done():
                fut.set_result(self._join_response(group, m.member_id, members))
            self._schedule_heartbeat(group, m)
        # Kafka 3.4+: members that do not send their SyncGroup within the rebalance
        # timeout are removed (the pending-sync timeout)
        rebalance_ms = max(m.rebalance_timeout_ms for m in group.members.values())
        group.sync_timer = self._loop().call_later(
            rebalance_ms / 1000.0, self._sync_timeout, group, group.generation_id)

    def _sync_timeout(self, group: _Group, generation: int) -> None:
        group.sync_timer = None
        if group.state != COMPLETING_REBALANCE or group.generation_id != generation:
            return
        for m in [m for m in group.members.values() if m.sync_future is None]:
            self._remove_member(group, m)
        self._prepare_rebalance(group, "members did not sync in time")

    @staticmethod
    def _select_protocol(group: _Group) -> str | None:
        """Kafka's ``selectProtocol``: among the protocols every member supports, the
        one most members name first."""
        members = list(group.members.values())
        candidates = set(members[0].names())
        for m in members[1:]:
            candidates &= set(m.names())
        votes: dict[str, int] = {}
        for m in members:
            vote = next((n for n in m.names() if n in candidates), None)
            if vote is not None:
                votes[vote] = votes.get(vote, 0) + 1
        if not votes:
            return None
        leader = group.members.get(group.leader_id or "")
        order = leader.names() if leader else []
        return max(votes, key=lambda n: (votes[n], -order.index(n) if n in order else -999))

    @staticmethod
    def _members_for_leader(group: _Group) -> list[dict]:
        """What the leader's JoinGroup response lists: every member with its metadata
        for the group's protocol (the input of the client-side assignor)."""
        return [{"member_id": o.member_id, "group_instance_id": o.group_instance_id,
                 "metadata": o.metadata(group.protocol_name)} for o in group.members.values()]

    def _join_response(self, group: _Group, member_id: str, members: list,
                       error: int = 0, skip_assignment: bool = False) -> dict:
        return {"error_code": error, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id or "", "skip_assignment": skip_assignment,
                "member_id": member_id, "members": members}

    @staticmethod
    def _supports(group: _Group, protocol_type: str, names: list[str]) -> bool:
        """Kafka's ``ClassicGroup.supportsProtocols``."""
        if group.state == EMPTY or not group.members:
            return bool(protocol_type) and bool(names)
        if group.protocol_type != protocol_type:
            return False
        counts: dict[str, int] = {}
        for m in group.members.values():
            for n in set(m.names()):
                counts[n] = counts.get(n, 0) + 1
        return any(counts.get(n, 0) == len(group.members) for n in names)

    # -- JoinGroup ----------------------------------------------------------------------
    async def join_group(self, version: int, request: dict, client_id: str = "") -> dict:
        group_id = request.get("group_id") or ""
        member_id = request.get("member_id") or ""
        instance_id = request.get("group_instance_id")
        session_ms = int(request.get("session_timeout_ms", 0))
        rebalance_ms = int(request.get("rebalance_timeout_ms", -1))
        if version == 0 or rebalance_ms < 0:
            rebalance_ms = session_ms   # v0 had no rebalance timeout
        protocol_type = request.get("protocol_type") or ""
        protocols = [(p["name"], bytes(p["metadata"])) for p in request.get("protocols") or []]

        def error(code: ErrorCode, mid: str = member_id) -> dict:
            return {"error_code": int(code), "generation_id": -1, "protocol_type": None,
                    "protocol_name": None if version >= 7 else "", "leader": "",
                    "member_id": mid, "members": []}

        if not group_id:
            return error(ErrorCode.INVALID_GROUP_ID)
        if self._closed:
            # the server is stopping: nothing would complete a rebalance begun now
            return error(ErrorCode.NOT_COORDINATOR)
        if not (self._cfg("group.min.session.timeout.ms") <= session_ms
                <= self._cfg("group.max.session.timeout.ms")):
            return error(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return error(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = _Group(group_id)
            group.current_state_ts = _now_ms()
        if group.state == DEAD:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self._supports(group, protocol_type, [n for n, _ in protocols]):
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if len(group.members) >= self._cfg("group.max.size") and \
                member_id not in group.members and instance_id not in group.static_members:
            return error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        # Kafka's member clientHost: the request's client address (RequestContext)
        client_host = CLIENT_ADDRESS.get() or "/" + self.broker.host
        loop = self._loop()

        if not member_id:
            # Kafka's ClassicGroup.generateMemberId: the instance id or client id, a UUID
            new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
            if instance_id is not None:
                old_id = group.static_members.get(instance_id)
                if old_id is not None and old_id in group.members:
                    return await self._static_rejoin(group, version, old_id, new_id,
                                                     protocols, session_ms, rebalance_ms,
                                                     error)
            elif version >= 4:
                # KIP-394: the member id is handed out first; the member is pending
                # until it joins with it
                group.pending_members[new_id] = loop.call_later(
                    session_ms / 1000.0, self._pending_expired, group, new_id)
                return error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            member = _Member(new_id, instance_id, client_id, client_host, rebalance_ms,
                             session_ms, protocol_type, protocols, is_new=True)
            return await self._add_member_and_rebalance(group, member)

        # a known member id
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return error(ErrorCode.FENCED_INSTANCE_ID)
        if member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            member = _Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                             session_ms, protocol_type, protocols, is_new=True)
            return await self._add_member_and_rebalance(group, member)
        member = group.members.get(member_id)
        if member is None or group.state in (EMPTY, DEAD):
            return error(ErrorCode.UNKNOWN_MEMBER_ID)
        same = member.protocols == protocols
        if group.state == PREPARING_REBALANCE:
            self._update_member(member, protocols, session_ms, rebalance_ms)
            return await self._await_join(group, member)
        if group.state == COMPLETING_REBALANCE and same:
            # a retried JoinGroup of this generation: answered again
            members = (self._members_for_leader(group) if member_id == group.leader_id
                       else [])
            return self._join_response(group, member_id, members)
        if group.state == STABLE and same and member_id != group.leader_id:
            # a follower rejoining with nothing changed: the current generation
            self._schedule_heartbeat(group, member)
            return self._join_response(group, member_id, [])
        # the leader rejoining (it asks for a new assignment) or changed protocols
        self._update_member(member, protocols, session_ms, rebalance_ms)
        self._prepare_rebalance(group, f"member {member_id} rejoined")
        return await self._await_join(group, member)

    def _update_member(self, member: _Member, protocols, session_ms, rebalance_ms) -> None:
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms

    async def _await_join(self, group: _Group, member: _Member) -> dict:
        fut = self._loop().create_future()
        if member.join_future is not None and not member.join_future.done():
            # a second JoinGroup replaces the first (its client gave up on it)
            member.join_future.set_result({"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)})
        member.join_future = fut
        self._try_complete_join(group)
        return await fut

    async def _add_member_and_rebalance(self, group: _Group, member: _Member) -> dict:
        self._add_member(group, member)
        group.new_member_added = True
        self._schedule_heartbeat(group, member)
        fut = self._loop().create_future()
        member.join_future = fut
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"adding new member {member.member_id}")
        return await fut

    def _pending_expired(self, group: _Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, "gone") == "gone":
            return
        self._try_complete_join(group)

    async def _static_rejoin(self, group: _Group, version: int, old_id: str, new_id: str,
                             protocols, session_ms: int, rebalance_ms: int, error) -> dict:
        """Kafka's ``updateStaticMemberThenRebalanceOrCompleteJoin``: the instance's
        member id is replaced (the old one fenced); a stable group does not rebalance
        when the protocols are unchanged."""
        old = group.members[old_id]
        same = old.protocols == protocols
        for fut in (old.join_future, old.sync_future):
            if fut is not None and not fut.done():
                fut.set_result({"error_code": int(ErrorCode.FENCED_INSTANCE_ID)})
        old.join_future = old.sync_future = None
        if old.heartbeat is not None:
            old.heartbeat.cancel()
        del group.members[old_id]
        old.member_id = new_id
        group.members[new_id] = old
        group.static_members[old.group_instance_id] = new_id   # type: ignore[index]
        was_leader = group.leader_id == old_id
        if was_leader:
            group.leader_id = new_id
        self._update_member(old, protocols, session_ms, rebalance_ms)
        self._schedule_heartbeat(group, old)
        if group.state == STABLE and same and not (was_leader and version < 9):
            # persist the new member id (a restart must know it), then answer with the
            # current generation; a leader is told to skip the assignment (v9+)
            code = self._store_group(group)
            if code:
                return error(ErrorCode(code), new_id)
            members = self._members_for_leader(group) if was_leader else []
            return self._join_response(group, new_id, members, skip_assignment=was_leader)
        if group.state == PREPARING_REBALANCE:
            return await self._await_join(group, old)
        self._prepare_rebalance(group, f"static member {old.group_instance_id} rejoined")
        return await self._await_join(group, old)

    # -- SyncGroup ----------------------------------------------------------------------
    def _validate_member(self, group: _Group | None, member_id: str,
                         instance_id: str | None) -> _Member:
        if group is None or group.state == DEAD:
            raise _Error(ErrorCode.UNKNOWN_MEMBER_ID)
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                raise _Error(ErrorCode.UNKNOWN_MEMBER_ID)
            if known != member_id:
                raise _Error(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            raise _Error(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    async def sync_group(self, version: int, request: dict) -> dict:
        group = self.groups.get(request.get("group_id") or "")
        member_id = request.get("member_id") or ""

        def answer(code, assignment=b"") -> dict:
            return {"error_code": int(code),
                    "protocol_type": group.protocol_type if group else None,
                    "protocol_name": group.protocol_name if group else None,
                    "assignment": assignment}
        if self._closed:
            return answer(ErrorCode.NOT_COORDINATOR)   # the server is stopping
        try:
            member = self._validate_member(group, member_id, request.get("group_instance_id"))
        except _Error as exc:
            return answer(exc.code)
        assert group is not None
        if request.get("generation_id") != group.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        ptype, pname = request.get("protocol_type"), request.get("protocol_name")
        if (ptype is not None and ptype != group.protocol_type) or \
                (pname is not None and pname != group.protocol_name):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state == EMPTY:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == PREPARING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            self._schedule_heartbeat(group, member)
            return answer(0, member.assignment)
        # CompletingRebalance: wait for the leader's assignment
        fut = self._loop().create_future()
        member.sync_future = fut
        self._schedule_heartbeat(group, member)
        if member_id == group.leader_id:
            assignments = {a["member_id"]: bytes(a["assignment"])
                           for a in request.get("assignments") or []}
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            generation = group.generation_id
            code = self._store_group(group)
            if group.state == COMPLETING_REBALANCE and group.generation_id == generation:
                if code:
                    # Kafka: the store failed: every member is told, the group rebalances
                    for m in group.members.values():
                        m.assignment = b""
                        if m.sync_future is not None and not m.sync_future.done():
                            m.sync_future.set_result(answer(code))
                        m.sync_future = None
                    self._prepare_rebalance(group, "storing the group failed")
                else:
                    if group.sync_timer is not None:
                        group.sync_timer.cancel()
                        group.sync_timer = None
                    group.transition(STABLE)
                    for m in group.members.values():
                        if m.sync_future is not None and not m.sync_future.done():
                            m.sync_future.set_result(answer(0, m.assignment))
                        m.sync_future = None
        result = await fut
        if "assignment" not in result:
            result = answer(result["error_code"])
        return result

    # -- Heartbeat ----------------------------------------------------------------------
    def heartbeat(self, request: dict) -> int:
        group = self.groups.get(request.get("group_id") or "")
        try:
            member = self._validate_member(group, request.get("member_id") or "",
                                           request.get("group_instance_id"))
        except _Error as exc:
            return exc.code
        assert group is not None
        if group.state == EMPTY:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if request.get("generation_id") != group.generation_id:
            return int(ErrorCode.ILLEGAL_GENERATION)
        self._schedule_heartbeat(group, member)
        if group.state == PREPARING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return 0

    # -- LeaveGroup ---------------------------------------------------------------------
    def leave_group(self, version: int, request: dict) -> dict:
        group = self.groups.get(request.get("group_id") or "")
        if version < 3:
            leaving = [{"member_id": request.get("member_id") or "",
                        "group_instance_id": None}]
        else:
            leaving = request.get("members") or []
        if group is None or group.state == DEAD:
            if version < 3:
                return {"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID), "members": []}
            return {"error_code": 0, "members": [
                dict(m, error_code=int(ErrorCode.UNKNOWN_MEMBER_ID)) for m in leaving]}
        answers = []
        for entry in leaving:
            member_id = entry.get("member_id") or ""
            instance_id = entry.get("group_instance_id")
            code = 0
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    code = int(ErrorCode.UNKNOWN_MEMBER_ID)
                elif member_id and member_id != known:
                    code = int(ErrorCode.FENCED_INSTANCE_ID)
                else:
                    member_id = known
            if code == 0:
                if member_id in group.pending_members:
                    timer = group.pending_members.pop(member_id)
                    if timer is not None:
                        timer.cancel()
                    self._try_complete_join(group)
                elif member_id in group.members:
                    self._remove_member_and_rebalance(group, group.members[member_id],
                                                      "member left the group")
                else:
                    code = int(ErrorCode.UNKNOWN_MEMBER_ID)
            answers.append({"member_id": member_id, "group_instance_id": instance_id,
                            "error_code": code})
        if version < 3:
            return {"error_code": answers[0]["error_code"], "members": []}
        return {"error_code": 0, "members": answers}

    # -- OffsetCommit / TxnOffsetCommit -------------------------------------------------
    def _validate_commit(self, group: _Group, member_id: str, instance_id: str | None,
                         generation: int, transactional: bool) -> None:
        """Kafka's ``ClassicGroup.validateOffsetCommit``."""
        if group.state == DEAD:
            raise _Error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and group.state == EMPTY:
            return   # the admin client or a consumer without group management
        if transactional and generation < 0 and not member_id and instance_id is None:
            return   # TxnOffsetCommit before v3 names no member
        if generation >= 0 or member_id or instance_id is not None:
            self._validate_member(group, member_id, instance_id)
            if generation != group.generation_id:
                raise _Error(ErrorCode.ILLEGAL_GENERATION)
        elif group.state != EMPTY:
            raise _Error(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == COMPLETING_REBALANCE:
            raise _Error(ErrorCode.REBALANCE_IN_PROGRESS)

    def _commit_group(self, version: int, group_id: str, generation: int,
                      transactional: bool) -> _Group:
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # OffsetCommit v9+ says GROUP_ID_NOT_FOUND (OffsetMetadataManager)
                raise _Error(ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 and not transactional
                             else ErrorCode.ILLEGAL_GENERATION)
            group = _Group(group_id)   # a simple group: added once the commit is written
        return group

    def offset_commit(self, version: int, request: dict) -> dict:
        group_id = request.get("group_id") or ""
        generation = int(request.get("generation_id_or_member_epoch", -1))
        retention = int(request.get("retention_time_ms", -1)) if 2 <= version <= 4 else -1
        return self._commit(version, request, group_id, generation, retention, None)

    def txn_offset_commit(self, version: int, request: dict) -> dict:
        return self._commit(version, request, request.get("group_id") or "",
                            int(request.get("generation_id", -1)), -1,
                            (int(request["producer_id"]), int(request["producer_epoch"])))

    def _commit(self, version: int, request: dict, group_id: str, generation: int,
                retention_ms: int, producer: tuple[int, int] | None) -> dict:
        topics = request.get("topics") or []

        def all_partitions(code: int) -> dict:
            return every_partition(request, code)
        if not group_id:
            return all_partitions(int(ErrorCode.INVALID_GROUP_ID))
        member_id = request.get("member_id") or ""
        instance_id = request.get("group_instance_id")
        try:
            group = self._commit_group(version, group_id, generation, producer is not None)
            self._validate_commit(group, member_id, instance_id, generation,
                                  producer is not None)
        except _Error as exc:
            return all_partitions(exc.code)
        now = _now_ms()
        expire = now + retention_ms if retention_ms != -1 else -1
        records, accepted, answer = [], [], []
        for t in topics:
            parts = []
            for p in t.get("partitions") or []:
                metadata = p.get("committed_metadata")
                if metadata is not None and len(metadata) > _METADATA_MAX:
                    parts.append({"partition_index": p["partition_index"],
                                  "error_code": int(ErrorCode.OFFSET_METADATA_TOO_LARGE)})
                    continue
                off = _Offset(int(p["committed_offset"]),
                              int(p.get("committed_leader_epoch", -1)), metadata or "",
                              now, expire)
                tp = (t["name"], int(p["partition_index"]))
                records.append((gr.OffsetCommitKey(group_id, *tp).to_bytes(),
                                gr.OffsetCommitValue(off.offset, off.metadata, off.commit_ts,
                                                     off.leader_epoch, off.expire_ts).to_bytes()))
                accepted.append((tp, off))
                parts.append({"partition_index": p["partition_index"], "error_code": 0})
            answer.append({"name": t["name"], "partitions": parts})
        if records:
            try:
                base = self._append(group_id, records, producer)
            except _Error as exc:
                return all_partitions(exc.code)
            self.groups.setdefault(group_id, group)
            for i, (tp, off) in enumerate(accepted):
                off.record_offset = base + i
                if producer is None:
                    group.offsets[tp] = off
                else:
                    group.pending_txn.setdefault(producer[0], {})[tp] = off
        # an offset commit keeps a member's session (Kafka: Stable or PreparingRebalance)
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self._schedule_heartbeat(group, member)
        return {"throttle_time_ms": 0, "topics": answer}

    def on_txn_marker(self, topic: str, partition: int, producer_id: int,
                      producer_epoch: int, committed: bool) -> None:
        """A transaction marker was written to ``topic``/``partition``: the pending
        transactional offsets of ``producer_id`` there become committed (or are dropped):
        Kafka's ``GroupCoordinator.onTransactionCompleted`` /
        ``OffsetMetadataManager.replayEndTransactionMarker``."""
        if topic != GROUP_METADATA_TOPIC:
            return
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            pending = group.pending_txn.pop(producer_id, None)
            if not pending or not committed:
                continue
            for tp, off in pending.items():
                current = group.offsets.get(tp)
                # a commit written after the transactional one wins (record order)
                if current is None or current.record_offset < off.record_offset:
                    group.offsets[tp] = off

    # -- OffsetFetch --------------------------------------------------------------------
    def _fetch_group(self, group_id: str, topics: list | None, require_stable: bool,
                     names_key: str = "partition_indexes") -> tuple[int, list]:
        group = self.groups.get(group_id)
        if group is not None and group.state == DEAD:
            return int(ErrorCode.GROUP_ID_NOT_FOUND), []

        def entry(tp) -> dict:
            off = group.offsets.get(tp) if group is not None else None
            if require_stable and group is not None and group.pending_txn_for(tp):
                return {"partition_index": tp[1], "committed_offset": -1,
                        "committed_leader_epoch": -1, "metadata": "",
                        "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT)}
            if off is None:
                return {"partition_index": tp[1], "committed_offset": -1,
                        "committed_leader_epoch": -1, "metadata": "", "error_code": 0}
            return {"partition_index": tp[1], "committed_offset": off.offset,
                    "committed_leader_epoch": off.leader_epoch, "metadata": off.metadata,
                    "error_code": 0}
        out: dict[str, list] = {}
        if topics is None:
            tps = set(group.offsets) if group is not None else set()
            if require_stable and group is not None:
                for offs in group.pending_txn.values():
                    tps |= set(offs)
            for tp in sorted(tps):
                out.setdefault(tp[0], []).append(entry(tp))
        else:
            for t in topics:
                out[t["name"]] = [entry((t["name"], int(p))) for p in t.get(names_key) or []]
        return 0, [{"name": name, "partitions": parts} for name, parts in out.items()]

    def offset_fetch(self, version: int, request: dict) -> dict:
        require_stable = bool(request.get("require_stable", False))
        if version >= 8:
            groups = []
            for g in request.get("groups") or []:
                code, topics = self._fetch_group(g.get("group_id") or "", g.get("topics"),
                                                 require_stable)
                groups.append({"group_id": g.get("group_id"), "topics": topics,
                               "error_code": code})
            return {"throttle_time_ms": 0, "groups": groups}
        topics = request.get("topics")
        if version < 2 and not topics:
            topics = []
        code, out = self._fetch_group(request.get("group_id") or "", topics, require_stable)
        if code and version < 2:
            # no top-level error before v2: on every partition
            for t in out:
                for p in t["partitions"]:
                    p["error_code"] = code
        return {"throttle_time_ms": 0, "topics": out, "error_code": code}

    # -- ListGroups / DescribeGroups ----------------------------------------------------
    def list_groups(self, request: dict) -> dict:
        states = {s.lower() for s in request.get("states_filter") or []}
        types = {t.lower() for t in request.get("types_filter") or []}
        out = []
        for group in self.groups.values():
            if group.state == DEAD:
                continue
            if states and group.state.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append({"group_id": group.group_id,
                        "protocol_type": group.protocol_type or "",
                        "group_state": group.state, "group_type": "classic"})
        return {"throttle_time_ms": 0, "error_code": 0, "groups": out}

    def describe_groups(self, version: int, request: dict) -> dict:
        out = []
        for group_id in request.get("groups") or []:
            group = self.groups.get(group_id)
            if group is None or group.state == DEAD:
                if version >= 6:
                    out.append({"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                                "error_message": f"Group {group_id} not found.",
                                "group_id": group_id, "group_state": DEAD,
                                "protocol_type": "", "protocol_data": "", "members": []})
                else:
                    out.append({"error_code": 0, "group_id": group_id, "group_state": DEAD,
                                "protocol_type": "", "protocol_data": "", "members": []})
                continue
            stable = group.state == STABLE
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "client_host": m.client_host,
                        "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                        "member_assignment": m.assignment if stable else b""}
                       for m in group.members.values()]
            out.append({"error_code": 0, "error_message": None, "group_id": group_id,
                        "group_state": group.state,
                        "protocol_type": group.protocol_type or "",
                        "protocol_data": (group.protocol_name or "") if stable else "",
                        "members": members})
        return {"throttle_time_ms": 0, "groups": out}

    # -- DeleteGroups / OffsetDelete ----------------------------------------------------
    def delete_groups(self, request: dict) -> dict:
        out = []
        for group_id in request.get("groups_names") or []:
            group = self.groups.get(group_id)
            code = 0
            if group is None or group.state == DEAD:
                code = int(ErrorCode.GROUP_ID_NOT_FOUND)
            elif group.state != EMPTY:
                code = int(ErrorCode.NON_EMPTY_GROUP)
            else:
                records = [(gr.OffsetCommitKey(group_id, *tp).to_bytes(), None)
                           for tp in group.offsets]
                for offs in group.pending_txn.values():
                    records += [(gr.OffsetCommitKey(group_id, *tp).to_bytes(), None)
                                for tp in offs if tp not in group.offsets]
                records.append((gr.GroupMetadataKey(group_id).to_bytes(), None))
                try:
                    self._append(group_id, records)
                except _Error as exc:
                    code = exc.code
                else:
                    group.transition(DEAD)
                    del self.groups[group_id]
            out.append({"group_id": group_id, "error_code": code})
        return {"throttle_time_ms": 0, "results": out}

    def offset_delete(self, request: dict) -> dict:
        group_id = request.get("group_id") or ""
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND), "topics": []}
        if group.state != EMPTY and group.protocol_type != _CONSUMER:
            return {"error_code": int(ErrorCode.NON_EMPTY_GROUP), "topics": []}
        subscribed = group.subscribed_topics() if group.state != EMPTY else set()
        records, topics, deleted = [], [], []
        for t in request.get("topics") or []:
            name = t["name"]
            on = group.state != EMPTY and (subscribed is None or name in subscribed)
            parts = []
            for p in t.get("partitions") or []:
                idx = int(p["partition_index"])
                if on:
                    parts.append({"partition_index": idx,
                                  "error_code": int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)})
                    continue
                parts.append({"partition_index": idx, "error_code": 0})
                if (name, idx) in group.offsets or group.pending_txn_for((name, idx)):
                    records.append((gr.OffsetCommitKey(group_id, name, idx).to_bytes(), None))
                    deleted.append((name, idx))
            topics.append({"name": name, "partitions": parts})
        if records:
            try:
                self._append(group_id, records)
            except _Error as exc:
                return {"error_code": exc.code, "topics": []}
            for tp in deleted:
                group.offsets.pop(tp, None)
                for offs in group.pending_txn.values():
                    offs.pop(tp, None)
        return {"error_code": 0, "throttle_time_ms": 0, "topics": topics}

    # -- offset expiry ------------------------------------------------------------------
    def _expiry_tick(self, interval: float) -> None:
        if self._closed:
            return
        try:
            self.expire_offsets(_now_ms())
        finally:
            self._expiry = self._loop().call_later(interval, self._expiry_tick, interval)

    def expire_offsets(self, now_ms: int) -> int:
        """Kafka's ``OffsetMetadataManager.cleanupExpiredOffsets`` over every group:
        tombstones for the expired offsets, and for each group left empty without
        offsets; the number of offsets expired."""
        retention = self._cfg("offsets.retention.minutes") * 60_000
        expired_total = 0
        for group in list(self.groups.values()):
            if group.protocol_type is not None and group.state != EMPTY:
                continue   # a classic group with members keeps its offsets
            expired = []
            for tp, off in group.offsets.items():
                if group.pending_txn_for(tp):
                    continue
                if off.expire_ts != -1:
                    gone = now_ms >= off.expire_ts
                else:
                    # an empty group: from when it became empty (the current state
                    # timestamp), else from the commit
                    base = (group.current_state_ts if group.protocol_type is not None
                            and group.current_state_ts is not None else off.commit_ts)
                    gone = now_ms - base >= retention
                if gone:
                    expired.append(tp)
            records = [(gr.OffsetCommitKey(group.group_id, *tp).to_bytes(), None)
                       for tp in expired]
            delete_group = (len(expired) == len(group.offsets) and group.state == EMPTY
                            and not group.pending_txn and not group.members)
            if delete_group:
                records.append((gr.GroupMetadataKey(group.group_id).to_bytes(), None))
            if not records:
                continue
            try:
                self._append(group.group_id, records)
            except _Error:
                continue
            for tp in expired:
                del group.offsets[tp]
            expired_total += len(expired)
            if delete_group:
                group.transition(DEAD)
                del self.groups[group.group_id]
        return expired_total
