"""Kafka's messages of the group coordinator's APIs (issue 30): FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups,
DeleteGroups, OffsetDelete and TxnOffsetCommit (a group API in Kafka: the group coordinator
keeps the transactional offsets); described as :mod:`.messages` describes the others, from
Kafka's ``clients/src/main/resources/common/message/<Name>.json`` (the Kafka 4.x copy:
OffsetCommit v0-v1 and OffsetFetch v0 are gone from it, KIP-896).

The versions answered (``SUPPORTED``) stop below the ones that need KIP-848's consumer
groups or topic ids (OffsetCommit / OffsetFetch v10 name topics by id) or KIP-890's
implicit partition adding (TxnOffsetCommit v5): a client negotiates the version below.
"""

from __future__ import annotations

from kafkastore.server.protocol.schema import F, Message

__all__ = ["MESSAGES", "SUPPORTED"]


FIND_COORDINATOR_REQUEST = Message(10, "FindCoordinatorRequest", "0-6", flexible="3+", fields=(
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+", default=0),
    F("coordinator_keys", "[]string", "4+"),
))

FIND_COORDINATOR_RESPONSE = Message(10, "FindCoordinatorResponse", "0-6", flexible="3+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
    F("coordinators", "[]Coordinator", "4+", fields=(
        F("key", "string", "4+"),
        F("node_id", "int32", "4+"),
        F("host", "string", "4+"),
        F("port", "int32", "4+"),
        F("error_code", "int16", "4+"),
        F("error_message", "string", "4+", nullable="4+"),
    )),
))

JOIN_GROUP_REQUEST = Message(11, "JoinGroupRequest", "0-9", flexible="6+", fields=(
    F("group_id", "string", "0+"),
    F("session_timeout_ms", "int32", "0+"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string", "0+"),
    F("group_instance_id", "string", "5+", nullable="5+", default=None),
    F("protocol_type", "string", "0+"),
    F("protocols", "[]JoinGroupRequestProtocol", "0+", fields=(
        F("name", "string", "0+"),
        F("metadata", "bytes", "0+"),
    )),
    F("reason", "string", "8+", nullable="8+", default=None),
))

JOIN_GROUP_RESPONSE = Message(11, "JoinGroupResponse", "0-9", flexible="6+", fields=(
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16", "0+"),
    F("generation_id", "int32", "0+", default=-1),
    F("protocol_type", "string", "7+", nullable="7+", default=None),
    F("protocol_name", "string", "0+", nullable="7+"),
    F("leader", "string", "0+"),
    F("skip_assignment", "bool", "9+", default=False),
    F("member_id", "string", "0+"),
    F("members", "[]JoinGroupResponseMember", "0+", fields=(
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("metadata", "bytes", "0+"),
    )),
))

SYNC_GROUP_REQUEST = Message(14, "SyncGroupRequest", "0-5", flexible="4+", fields=(
    F("group_id", "string", "0+"),
    F("generation_id", "int32", "0+"),
    F("member_id", "string", "0+"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignments", "[]SyncGroupRequestAssignment", "0+", fields=(
        F("member_id", "string", "0+"),
        F("assignment", "bytes", "0+"),
    )),
))

SYNC_GROUP_RESPONSE = Message(14, "SyncGroupResponse", "0-5", flexible="4+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0+"),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignment", "bytes", "0+"),
))

HEARTBEAT_REQUEST = Message(12, "HeartbeatRequest", "0-4", flexible="4+", fields=(
    F("group_id", "string", "0+"),
    F("generation_id", "int32", "0+"),
    F("member_id", "string", "0+"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
))

HEARTBEAT_RESPONSE = Message(12, "HeartbeatResponse", "0-4", flexible="4+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0+"),
))

LEAVE_GROUP_REQUEST = Message(13, "LeaveGroupRequest", "0-5", flexible="4+", fields=(
    F("group_id", "string", "0+"),
    F("member_id", "string", "0-2"),
    F("members", "[]MemberIdentity", "3+", fields=(
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("reason", "string", "5+", nullable="5+", default=None),
    )),
))

LEAVE_GROUP_RESPONSE = Message(13, "LeaveGroupResponse", "0-5", flexible="4+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0+"),
    F("members", "[]MemberResponse", "3+", fields=(
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+"),
        F("error_code", "int16", "3+"),
    )),
))

OFFSET_COMMIT_REQUEST = Message(8, "OffsetCommitRequest", "2-10", flexible="8+", fields=(
    F("group_id", "string", "0+"),
    F("generation_id_or_member_epoch", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+", default=None),
    F("retention_time_ms", "int64", "2-4", default=-1),
    F("topics", "[]OffsetCommitRequestTopic", "0+", fields=(
        F("name", "string", "0-9"),
        F("topic_id", "uuid", "10+"),
        F("partitions", "[]OffsetCommitRequestPartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("committed_offset", "int64", "0+"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("commit_timestamp", "int64", "1", default=-1),
            F("committed_metadata", "string", "0+", nullable="0+"),
        )),
    )),
))

OFFSET_COMMIT_RESPONSE = Message(8, "OffsetCommitResponse", "2-10", flexible="8+", fields=(
    F("throttle_time_ms", "int32", "3+"),
    F("topics", "[]OffsetCommitResponseTopic", "0+", fields=(
        F("name", "string", "0-9"),
        F("topic_id", "uuid", "10+"),
        F("partitions", "[]OffsetCommitResponsePartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("error_code", "int16", "0+"),
        )),
    )),
))

OFFSET_FETCH_REQUEST = Message(9, "OffsetFetchRequest", "1-10", flexible="6+", fields=(
    F("group_id", "string", "0-7"),
    F("topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=(
        F("name", "string", "0-7"),
        F("partition_indexes", "[]int32", "0-7"),
    )),
    F("groups", "[]OffsetFetchRequestGroup", "8+", fields=(
        F("group_id", "string", "8+"),
        F("member_id", "string", "9+", nullable="9+", default=None),
        F("member_epoch", "int32", "9+", default=-1),
        F("topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=(
            F("name", "string", "8-9"),
            F("topic_id", "uuid", "10+"),
            F("partition_indexes", "[]int32", "8+"),
        )),
    )),
    F("require_stable", "bool", "7+", default=False),
))

OFFSET_FETCH_RESPONSE = Message(9, "OffsetFetchResponse", "1-10", flexible="6+", fields=(
    F("throttle_time_ms", "int32", "3+"),
    F("topics", "[]OffsetFetchResponseTopic", "0-7", fields=(
        F("name", "string", "0-7"),
        F("partitions", "[]OffsetFetchResponsePartition", "0-7", fields=(
            F("partition_index", "int32", "0-7"),
            F("committed_offset", "int64", "0-7"),
            F("committed_leader_epoch", "int32", "5-7", default=-1),
            F("metadata", "string", "0-7", nullable="0-7"),
            F("error_code", "int16", "0-7"),
        )),
    )),
    F("error_code", "int16", "2-7", default=0),
    F("groups", "[]OffsetFetchResponseGroup", "8+", fields=(
        F("group_id", "string", "8+"),
        F("topics", "[]OffsetFetchResponseTopics", "8+", fields=(
            F("name", "string", "8-9"),
            F("topic_id", "uuid", "10+"),
            F("partitions", "[]OffsetFetchResponsePartitions", "8+", fields=(
                F("partition_index", "int32", "8+"),
                F("committed_offset", "int64", "8+"),
                F("committed_leader_epoch", "int32", "8+", default=-1),
                F("metadata", "string", "8+", nullable="8+"),
                F("error_code", "int16", "8+"),
            )),
        )),
        F("error_code", "int16", "8+", default=0),
    )),
))

LIST_GROUPS_REQUEST = Message(16, "ListGroupsRequest", "0-5", flexible="3+", fields=(
    F("states_filter", "[]string", "4+"),
    F("types_filter", "[]string", "5+"),
))

LIST_GROUPS_RESPONSE = Message(16, "ListGroupsResponse", "0-5", flexible="3+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0+"),
    F("groups", "[]ListedGroup", "0+", fields=(
        F("group_id", "string", "0+"),
        F("protocol_type", "string", "0+"),
        F("group_state", "string", "4+"),
        F("group_type", "string", "5+"),
    )),
))

DESCRIBE_GROUPS_REQUEST = Message(15, "DescribeGroupsRequest", "0-6", flexible="5+", fields=(
    F("groups", "[]string", "0+"),
    F("include_authorized_operations", "bool", "3+"),
))

DESCRIBE_GROUPS_RESPONSE = Message(15, "DescribeGroupsResponse", "0-6", flexible="5+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("groups", "[]DescribedGroup", "0+", fields=(
        F("error_code", "int16", "0+"),
        F("error_message", "string", "6+", nullable="6+", default=None),
        F("group_id", "string", "0+"),
        F("group_state", "string", "0+"),
        F("protocol_type", "string", "0+"),
        F("protocol_data", "string", "0+"),
        F("members", "[]DescribedGroupMember", "0+", fields=(
            F("member_id", "string", "0+"),
            F("group_instance_id", "string", "4+", nullable="4+", default=None),
            F("client_id", "string", "0+"),
            F("client_host", "string", "0+"),
            F("member_metadata", "bytes", "0+"),
            F("member_assignment", "bytes", "0+"),
        )),
        F("authorized_operations", "int32", "3+", default=-2147483648),
    )),
))

DELETE_GROUPS_REQUEST = Message(42, "DeleteGroupsRequest", "0-2", flexible="2+", fields=(
    F("groups_names", "[]string", "0+"),
))

DELETE_GROUPS_RESPONSE = Message(42, "DeleteGroupsResponse", "0-2", flexible="2+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("results", "[]DeletableGroupResult", "0+", fields=(
        F("group_id", "string", "0+"),
        F("error_code", "int16", "0+"),
    )),
))

OFFSET_DELETE_REQUEST = Message(47, "OffsetDeleteRequest", "0", flexible="none", fields=(
    F("group_id", "string", "0+"),
    F("topics", "[]OffsetDeleteRequestTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]OffsetDeleteRequestPartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
        )),
    )),
))

OFFSET_DELETE_RESPONSE = Message(47, "OffsetDeleteResponse", "0", flexible="none", fields=(
    F("error_code", "int16", "0+"),
    F("throttle_time_ms", "int32", "0+"),
    F("topics", "[]OffsetDeleteResponseTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]OffsetDeleteResponsePartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("error_code", "int16", "0+"),
        )),
    )),
))

TXN_OFFSET_COMMIT_REQUEST = Message(28, "TxnOffsetCommitRequest", "0-5", flexible="3+", fields=(
    F("transactional_id", "string", "0+"),
    F("group_id", "string", "0+"),
    F("producer_id", "int64", "0+"),
    F("producer_epoch", "int16", "0+"),
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+", default=""),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("topics", "[]TxnOffsetCommitRequestTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]TxnOffsetCommitRequestPartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("committed_offset", "int64", "0+"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", "0+", nullable="0+"),
        )),
    )),
))

TXN_OFFSET_COMMIT_RESPONSE = Message(28, "TxnOffsetCommitResponse", "0-5", flexible="3+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("topics", "[]TxnOffsetCommitResponseTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]TxnOffsetCommitResponsePartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("error_code", "int16", "0+"),
        )),
    )),
))


#: The requests and responses described here (merged into messages.REQUESTS / RESPONSES).
MESSAGES: tuple[Message, ...] = (
    FIND_COORDINATOR_REQUEST,
    FIND_COORDINATOR_RESPONSE,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    SYNC_GROUP_REQUEST,
    SYNC_GROUP_RESPONSE,
    HEARTBEAT_REQUEST,
    HEARTBEAT_RESPONSE,
    LEAVE_GROUP_REQUEST,
    LEAVE_GROUP_RESPONSE,
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_FETCH_REQUEST,
    OFFSET_FETCH_RESPONSE,
    LIST_GROUPS_REQUEST,
    LIST_GROUPS_RESPONSE,
    DESCRIBE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_RESPONSE,
    DELETE_GROUPS_REQUEST,
    DELETE_GROUPS_RESPONSE,
    OFFSET_DELETE_REQUEST,
    OFFSET_DELETE_RESPONSE,
    TXN_OFFSET_COMMIT_REQUEST,
    TXN_OFFSET_COMMIT_RESPONSE,
)
#: {api_key: (min_version, max_version)} the server answers (merged into SUPPORTED_APIS).
SUPPORTED: dict[int, tuple[int, int]] = {
    10: (0, 6),    # FindCoordinator (v6: share groups' key type 2 is refused per key)
    11: (0, 9),    # JoinGroup
    14: (0, 5),    # SyncGroup
    12: (0, 4),    # Heartbeat
    13: (0, 5),    # LeaveGroup
    8: (2, 9),     # OffsetCommit (v10: topic ids)
    9: (1, 9),     # OffsetFetch (v10: topic ids)
    16: (0, 5),    # ListGroups
    15: (0, 6),    # DescribeGroups
    42: (0, 2),    # DeleteGroups
    47: (0, 0),    # OffsetDelete
    28: (0, 4),    # TxnOffsetCommit (v5: KIP-890 part 2)
}
