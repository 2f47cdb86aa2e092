"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: a partition's offsets.

Also the helpers the data path shares: the leader epoch a single node leads a partition
in, Kafka's check of a client's ``current_leader_epoch`` and a topic id's wire form.
"""

from __future__ import annotations

import base64

from kafkastore.errors import KafkaStoreError
from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode, error_code_for
from kafkastore.txn_index import READ_COMMITTED, READ_UNCOMMITTED

__all__ = ["HANDLERS", "check_current_leader_epoch", "leader_epoch_of", "topic_id_bytes",
           "list_offsets", "offset_for_leader_epoch", "delete_records"]

LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
DELETE_RECORDS = 21

ZERO_UUID = b"\0" * 16
LATEST_TIMESTAMP = -1
ISOLATION_LEVELS = {0: READ_UNCOMMITTED, 1: READ_COMMITTED}


def leader_epoch_of(log) -> int:
    """The epoch a single node leads the partition in: the latest of its leader epoch
    cache, 0 for a partition that has none yet (a new log; its first append as a leader
    stamps 0 and so records it)."""
    epoch = log.leader_epoch_cache.latest_epoch()
    return 0 if epoch is None else epoch


def check_current_leader_epoch(log, current: int) -> ErrorCode:
    """Kafka's ``Partition.checkCurrentLeaderEpoch``: a client's ``current_leader_epoch``
    (-1: no check) below the leader's is fenced, above it unknown (the client knows of a
    newer leader than this node)."""
    if current is None or current == -1:
        return ErrorCode.NONE
    epoch = leader_epoch_of(log)
    if current < epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current > epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def topic_id_bytes(topic_id: str | None) -> bytes:
    """A ``partition.metadata`` topic id (Kafka's ``Uuid.toString``: 22 URL-safe base64
    characters) as the 16 bytes of the wire; Kafka's ZERO_UUID for none."""
    if not topic_id:
        return ZERO_UUID
    return base64.urlsafe_b64decode(topic_id + "==")


def _each_partition(broker: Broker, request: dict, topic_key: str, partition_key: str,
                    answer) -> list[dict]:
    """The response's topics: ``answer(log or None, partition request)`` per partition,
    the dict it returns under the same topic name and partition index."""
    out = []
    for topic in request.get("topics") or ():
        name = topic[topic_key]
        partitions = []
        for part in topic.get("partitions") or ():
            index = part[partition_key]
            result = answer(broker.log(name, index), part)
            result[partition_key] = index
            partitions.append(result)
        out.append({topic_key: name, "partitions": partitions})
    return out


# -- ListOffsets ---------------------------------------------------------------------------

def _list_offset(log, part: dict, isolation: str) -> dict:
    def answer(code, timestamp=-1, offset=-1, epoch=-1) -> dict:
        return {"error_code": int(code), "timestamp": timestamp, "offset": offset,
                "leader_epoch": epoch}

    if log is None:
        return answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    code = check_current_leader_epoch(log, part.get("current_leader_epoch", -1))
    if code:
        return answer(code)
    timestamp = part["timestamp"]
    # Partition.fetchOffsetForTimestamp: a client reads up to the high watermark (the log
    # end on one node) or, read_committed, up to the last stable offset
    last_fetchable = log.last_stable_offset if isolation == READ_COMMITTED \
        else log.log_end_offset
    if timestamp == LATEST_TIMESTAMP:
        return answer(ErrorCode.NONE, -1, last_fetchable, leader_epoch_of(log))
    try:
        found = log.offset_for_timestamp(timestamp)
    except ValueError:
        # a negative timestamp Kafka has no meaning for
        return answer(ErrorCode.INVALID_REQUEST)
    except KafkaStoreError as exc:
        return answer(error_code_for(exc))
    if found is None or found.offset < 0:
        return answer(ErrorCode.NONE)
    if timestamp >= 0 or timestamp == -3:
        # ReplicaManager.fetchOffset: a record at or past the last fetchable offset is
        # not visible to the client yet: "no offset"
        if found.offset >= last_fetchable:
            return answer(ErrorCode.NONE)
    epoch = -1 if found.leader_epoch is None else found.leader_epoch
    return answer(ErrorCode.NONE, found.timestamp, found.offset, epoch)


async def list_offsets(broker: Broker, header, request: dict) -> dict:
    """ListOffsets (v1-v8): -1 latest, -2 earliest, -3 max timestamp (KIP-734), -4
    earliest local, -5 latest tiered (none here: -1), or the first offset at or after a
    timestamp."""
    isolation = ISOLATION_LEVELS.get(request.get("isolation_level", 0), READ_UNCOMMITTED)
    topics = _each_partition(broker, request, "name", "partition_index",
                             lambda log, part: _list_offset(log, part, isolation))
    return {"throttle_time_ms": 0, "topics": topics}


# -- OffsetForLeaderEpoch ------------------------------------------------------------------

def _epoch_end_offset(log, part: dict) -> dict:
    if log is None:
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    else:
        code = check_current_leader_epoch(log, part.get("current_leader_epoch", -1))
    if code:
        return {"error_code": int(code), "leader_epoch": -1, "end_offset": -1}
    # Partition.lastOffsetForLeaderEpoch -> UnifiedLog.endOffsetForEpoch ->
    # LeaderEpochFileCache.endOffsetFor; undefined is (-1, -1) with no error
    epoch, end = log.leader_epoch_cache.end_offset_for(part["leader_epoch"],
                                                       log.log_end_offset)
    return {"error_code": 0, "leader_epoch": epoch, "end_offset": end}


async def offset_for_leader_epoch(broker: Broker, header, request: dict) -> dict:
    """OffsetForLeaderEpoch (v2-v4): the end offset of a leader epoch, from the leader
    epoch cache (a consumer's truncation detection, KIP-320)."""
    topics = _each_partition(broker, request, "topic", "partition", _epoch_end_offset)
    return {"throttle_time_ms": 0, "topics": topics}


# -- DeleteRecords ---------------------------------------------------------------------------

def _delete_records(log, part: dict) -> dict:
    def answer(code, low_watermark=-1) -> dict:
        return {"error_code": int(code), "low_watermark": low_watermark}

    if log is None:
        return answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    # Partition.deleteRecordsOnLeader: only a topic whose policy deletes; -1 is the high
    # watermark (the log end here); below 0 or past the high watermark is out of range
    if not log.config.delete:
        return answer(ErrorCode.POLICY_VIOLATION)
    offset = part["offset"]
    end = log.log_end_offset
    if offset == -1:
        offset = end
    if offset < 0 or offset > end:
        return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
    try:
        return answer(ErrorCode.NONE, log.delete_records(offset))
    except KafkaStoreError as exc:
        return answer(error_code_for(exc))


async def delete_records(broker: Broker, header, request: dict) -> dict:
    """DeleteRecords (v0-v2): advance the log start offset; the new one is the answer's
    ``low_watermark``."""
    topics = _each_partition(broker, request, "name", "partition_index", _delete_records)
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS = {LIST_OFFSETS: list_offsets, OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
            DELETE_RECORDS: delete_records}
