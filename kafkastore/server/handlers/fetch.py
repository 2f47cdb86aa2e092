"""Fetch: the read path of ``kafkastore serve``, with zero copy, long polls and sessions.

Each partition is read with :meth:`Log.read <kafkastore.log.Log.read>` (Kafka's
``ReplicaManager.readFromLog``: the response's ``max_bytes`` shared across partitions in
request order, the first batch returned whole even if larger, KIP-74) and its bytes
answered as a :class:`~kafkastore.server.protocol.FileRegion` over a descriptor of its own,
opened on the segment's path under the log's lock: the connection ``sendfile``s it, a
segment deleted or closed meanwhile does not matter (the descriptor keeps the file), and
the segment's own descriptor is never moved (the stdlib's ``loop.sendfile`` seeks the
file it sends, and a ``dup`` would share that offset with the segment). A fetch with fewer than
``min_bytes`` waits for appends up to ``max_wait_ms`` (Kafka's ``DelayedFetch``). Fetch
sessions (KIP-227) are Kafka's ``FetchSession.scala``: full and incremental fetches, in a
cache of ``max.incremental.fetch.session.cache.slots`` sessions in ``broker.extras``.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict

from kafkastore.errors import KafkaStoreError
from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode, error_code_for
from kafkastore.server.handlers.offsets import ISOLATION_LEVELS, ZERO_UUID, \
    check_current_leader_epoch, topic_id_bytes
from kafkastore.txn_index import READ_COMMITTED, READ_UNCOMMITTED

from kafkastore.server.protocol import FileRegion, close_regions

__all__ = ["HANDLERS", "FetchSessionCache", "fetch"]

FETCH = 1
#: Kafka's FetchSessionCache keeps a session at least this long before another may evict it.
SESSION_EVICTION_MS = 120_000
INT32_MAX = (1 << 31) - 1


# -- sessions (KIP-227) ------------------------------------------------------------------

class FetchSession:
    __slots__ = ("id", "epoch", "partitions", "last_used")

    def __init__(self, session_id: int) -> None:
        self.id = session_id
        self.epoch = 1   # the next request's epoch (FetchMetadata.nextEpoch(INITIAL_EPOCH))
        # (topic, partition) -> the partition's request fields and the last values answered
        self.partitions: OrderedDict[tuple[str, int], dict] = OrderedDict()
        self.last_used = time.monotonic()


class FetchSessionCache:
    """Kafka's ``FetchSessionCache``, bounded by ``max.incremental.fetch.session.cache.slots``
    sessions: when full, the least recently used session is evicted if idle for 120 s,
    else no session is created (the fetch is answered sessionless, session id 0)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def get(self, session_id: int) -> FetchSession | None:
        session = self.sessions.get(session_id)
        if session is not None:
            self.sessions.move_to_end(session_id)
            session.last_used = time.monotonic()
        return session

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def create(self) -> FetchSession | None:
        if self.slots <= 0:
            return None
        if len(self.sessions) >= self.slots:
            oldest = next(iter(self.sessions.values()))
            if (time.monotonic() - oldest.last_used) * 1000 < SESSION_EVICTION_MS:
                return None
            self.remove(oldest.id)
        while True:
            session_id = random.randint(1, INT32_MAX)
            if session_id not in self.sessions:
                break
        session = self.sessions[session_id] = FetchSession(session_id)
        return session


def _session_cache(broker: Broker) -> FetchSessionCache:
    cache = broker.extras.get("fetch_sessions")
    if cache is None:
        slots = int(broker.config.get("max.incremental.fetch.session.cache.slots", 1000))
        cache = broker.extras["fetch_sessions"] = FetchSessionCache(slots)
    return cache


# -- the request's partitions -------------------------------------------------------------

def _requested(broker: Broker, request: dict, version: int) -> list[dict]:
    """The request's partitions in order: topic (name; None for an unknown topic id),
    topic_id, partition, fetch_offset, partition_max_bytes, current_leader_epoch."""
    names = _names_by_id(broker) if version >= 13 else None
    out = []
    for topic in request.get("topics") or ():
        if names is None:
            name, topic_id = topic["topic"], ZERO_UUID
        else:
            topic_id = topic["topic_id"]
            name = names.get(topic_id)
        for part in topic.get("partitions") or ():
            out.append({"topic": name, "topic_id": topic_id, "partition": part["partition"],
                        "fetch_offset": part["fetch_offset"],
                        "partition_max_bytes": part["partition_max_bytes"],
                        "current_leader_epoch": part.get("current_leader_epoch", -1)})
    return out


def _names_by_id(broker: Broker) -> dict[bytes, str]:
    """FetchRequest v13+ name topics by id: the ids of the logs' ``partition.metadata``."""
    return {topic_id_bytes(log.topic_id): tp.topic for tp, log in broker.manager.logs().items()
            if log.topic_id}


def _forgotten(broker: Broker, request: dict, version: int) -> list[tuple[str, int]]:
    names = _names_by_id(broker) if version >= 13 else None
    out = []
    for topic in request.get("forgotten_topics_data") or ():
        name = topic["topic"] if names is None else names.get(topic["topic_id"])
        out.extend((name, p) for p in topic.get("partitions") or ())
    return out


# -- reading ----------------------------------------------------------------------------

def _error(code: ErrorCode) -> dict:
    # ReplicaManager.readFromLocalLog's failure: no offsets known (-1), no records
    return {"error_code": int(code), "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": None, "records": b""}


def _read_partition(broker: Broker, part: dict, max_bytes: int, min_one: bool,
                    isolation: str):
    """One partition's answer and the bytes it holds. The records are a FileRegion over a
    descriptor opened on the segment's path under the log's lock (a segment's file is
    renamed, deleted or closed only under it, so the path is still that file's)."""
    if part["topic"] is None:
        return _error(ErrorCode.UNKNOWN_TOPIC_ID), 0
    log = broker.log(part["topic"], part["partition"])
    if log is None:
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), 0
    code = check_current_leader_epoch(log, part["current_leader_epoch"])
    if code:
        return _error(code), 0
    try:
        with log.lock:
            data = log.read(part["fetch_offset"], max_bytes, min_one, isolation)
            size = data.size
            records = b""
            if size:
                # an open file description of its own, not os.dup: asyncio's
                # _sock_sendfile_native seeks the file it sent, and a dup shares the
                # segment descriptor's offset (harmless while every segment read and write
                # is positional, but nothing here should move it). Opening by path costs
                # ~2 us more per partition than a dup (3.9 us against 1.8 us, measured)
                records = FileRegion(open(data.file.path, "rb", buffering=0),
                                     data.position, size)
    except KafkaStoreError as exc:
        return _error(error_code_for(exc)), 0
    aborted = None
    if isolation == READ_COMMITTED:
        aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                   for t in data.aborted_transactions or ()]
    return {"error_code": 0, "high_watermark": log.log_end_offset,
            "last_stable_offset": log.last_stable_offset,
            "log_start_offset": log.log_start_offset, "aborted_transactions": aborted,
            "preferred_read_replica": -1, "records": records}, size


def _read_all(broker: Broker, parts: list[dict], max_bytes: int,
              isolation: str) -> tuple[list[dict], int, bool]:
    """Kafka's ``ReplicaManager.readFromLog``: in request order, each partition gets
    ``min(partition_max_bytes, what is left of max_bytes)``; until one returned bytes the
    first batch comes whole (``minOneMessage``). Returns the answers, the bytes and
    whether a partition failed."""
    answers, total, failed = [], 0, False
    limit = max_bytes
    for part in parts:
        answer, size = _read_partition(broker, part, min(part["partition_max_bytes"], limit),
                                       total == 0, isolation)
        total += size
        limit = max(0, limit - size)
        failed = failed or answer["error_code"] != 0
        answers.append(answer)
    return answers, total, failed


def _group(parts: list[dict], answers: list[dict]) -> list[dict]:
    """The response's topics: consecutive partitions of one topic under one entry."""
    out: list[dict] = []
    for part, answer in zip(parts, answers):
        answer["partition_index"] = part["partition"]
        if not out or out[-1]["topic_id"] != part["topic_id"] or \
                out[-1]["topic"] != part["topic"]:
            out.append({"topic": part["topic"] or "", "topic_id": part["topic_id"],
                        "partitions": []})
        out[-1]["partitions"].append(answer)
    return out


# -- the handler --------------------------------------------------------------------------

def _changed(cached: dict, answer: dict) -> bool:
    """Kafka's ``CachedPartition.maybeUpdateResponseData``: an incremental response holds
    a partition with records, an error, or a new high watermark, log start or LSO; the
    cached values follow what is answered."""
    must = answer["records"] != b"" or answer["error_code"] != 0
    for key in ("high_watermark", "log_start_offset", "last_stable_offset"):
        if cached.get(key) != answer[key]:
            must = True
            cached[key] = answer[key]
    return must


def _session_context(broker: Broker, request: dict, version: int):
    """Kafka's ``FetchManager.newContext``: (top-level error, session or None, partitions
    to read, incremental)."""
    parts = _requested(broker, request, version)
    session_id = request.get("session_id", 0) if version >= 7 else 0
    epoch = request.get("session_epoch", -1) if version >= 7 else -1
    cache = _session_cache(broker)
    if epoch == -1:   # FINAL_EPOCH: a sessionless full fetch (closing the session named)
        if session_id:
            cache.remove(session_id)
        return ErrorCode.NONE, None, parts, False
    if epoch == 0:    # INITIAL_EPOCH: a full fetch creating a session
        if session_id:
            cache.remove(session_id)
        session = cache.create()
        if session is not None:
            for part in parts:
                session.partitions[(part["topic"], part["partition"])] = dict(part)
        return ErrorCode.NONE, session, parts, False
    session = cache.get(session_id)
    if session is None:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None, [], False
    if session.epoch != epoch:
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH, None, [], False
    for part in parts:   # added or updated partitions keep what the session answered
        key = (part["topic"], part["partition"])
        cached = session.partitions.get(key)
        if cached is None:
            session.partitions[key] = dict(part)
        else:
            cached.update(part)
    for key in _forgotten(broker, request, version):
        session.partitions.pop(key, None)
    if not session.partitions:
        cache.remove(session.id)   # an empty session is closed (sessionless answer)
        return ErrorCode.NONE, None, [], False
    session.epoch = session.epoch + 1 if session.epoch < INT32_MAX else 1
    return ErrorCode.NONE, session, list(session.partitions.values()), True


async def fetch(broker: Broker, header, request: dict) -> dict:
    """Fetch (v4-v16) for consumers."""
    version = header.api_version
    code, session, parts, incremental = _session_context(broker, request, version)
    if code:
        return {"throttle_time_ms": 0, "error_code": int(code), "session_id": 0,
                "responses": []}
    isolation = ISOLATION_LEVELS.get(request.get("isolation_level", 0), READ_UNCOMMITTED)
    max_bytes = request.get("max_bytes", INT32_MAX)
    max_wait_s = max(0, request.get("max_wait_ms", 0)) / 1000
    min_bytes = request.get("min_bytes", 1)
    deadline = time.monotonic() + max_wait_s
    # ReplicaManager.fetchMessages answers at once when there is nothing to wait for, or
    # enough bytes, or an error; else DelayedFetch waits for appends until the deadline
    # and the fetch is read again (here: on every append, until enough or the deadline)
    while True:
        remaining = deadline - time.monotonic()
        answers, total, failed = _read_all(broker, parts, max_bytes, isolation)
        if not parts or total >= min_bytes or failed or remaining <= 0:
            break
        close_regions(answers)
        if not await broker.wait_for_append(remaining):
            answers = _read_all(broker, parts, max_bytes, isolation)[0]
            break
    if session is not None:
        keep_parts, keep = [], []
        for part, answer in zip(parts, answers):
            cached = session.partitions[(part["topic"], part["partition"])]
            if _changed(cached, answer) or not incremental:
                keep_parts.append(part)
                keep.append(answer)
            else:
                close_regions(answer)
        parts, answers = keep_parts, keep
    return {"throttle_time_ms": 0, "error_code": 0,
            "session_id": 0 if session is None else session.id,
            "responses": _group(parts, answers)}


HANDLERS = {FETCH: fetch}
