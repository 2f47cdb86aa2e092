"""Kafka's request and response messages, described field by field (see :mod:`.schema`).

Read off apache/kafka ``clients/src/main/resources/common/message/<Name>.json`` at commit
1eb7644 (the project's reference commit): each message lists Kafka's fields in Kafka's order
with their version ranges, nullable and tagged versions and defaults, names in snake_case.
The whole range Kafka defines is described (``valid``); what the server answers is
``SUPPORTED_APIS`` in :mod:`kafkastore.server.protocol`. A struct's ``[]TypeName`` or
``TypeName`` is Kafka's name for it, kept for reading the two side by side; the JSON's
``mapKey`` structs and ``commonStructs`` are plain lists of dicts / inlined here.
"""

from __future__ import annotations

from kafkastore.server.protocol.schema import F, Message

__all__ = ["REQUESTS", "RESPONSES"]


API_VERSIONS_REQUEST = Message(18, "ApiVersionsRequest", "0-4", flexible="3+", fields=(
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
))

API_VERSIONS_RESPONSE = Message(18, "ApiVersionsResponse", "0-4", flexible="3+", fields=(
    F("error_code", "int16", "0+"),
    F("api_keys", "[]ApiVersion", "0+", fields=(
        F("api_key", "int16", "0+"),
        F("min_version", "int16", "0+"),
        F("max_version", "int16", "0+"),
    )),
    F("throttle_time_ms", "int32", "1+"),
    F("supported_features", "[]SupportedFeatureKey", "3+", tag=0, tagged="3+", fields=(
        F("name", "string", "3+"),
        F("min_version", "int16", "3+"),
        F("max_version", "int16", "3+"),
    )),
    F("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1),
    F("finalized_features", "[]FinalizedFeatureKey", "3+", tag=2, tagged="3+", fields=(
        F("name", "string", "3+"),
        F("max_version_level", "int16", "3+"),
        F("min_version_level", "int16", "3+"),
    )),
    F("zk_migration_ready", "bool", "3+", tag=3, tagged="3+", default=False),
))


METADATA_REQUEST = Message(3, "MetadataRequest", "0-12", flexible="9+", fields=(
    F("topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=(
        F("topic_id", "uuid", "10+"),
        F("name", "string", "0+", nullable="10+"),
    )),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
))

METADATA_RESPONSE = Message(3, "MetadataResponse", "0-12", flexible="9+", fields=(
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", "[]MetadataResponseBroker", "0+", fields=(
        F("node_id", "int32", "0+"),
        F("host", "string", "0+"),
        F("port", "int32", "0+"),
        F("rack", "string", "1+", nullable="1+", default=None),
    )),
    F("cluster_id", "string", "2+", nullable="2+", default=None),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", "[]MetadataResponseTopic", "0+", fields=(
        F("error_code", "int16", "0+"),
        F("name", "string", "0+", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+", default=False),
        F("partitions", "[]MetadataResponsePartition", "0+", fields=(
            F("error_code", "int16", "0+"),
            F("partition_index", "int32", "0+"),
            F("leader_id", "int32", "0+"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32", "0+"),
            F("isr_nodes", "[]int32", "0+"),
            F("offline_replicas", "[]int32", "5+"),
        )),
        F("topic_authorized_operations", "int32", "8+", default=-2147483648),
    )),
    F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
))


PRODUCE_REQUEST = Message(0, "ProduceRequest", "0-11", flexible="9+", fields=(
    F("transactional_id", "string", "3+", nullable="3+", default=None),
    F("acks", "int16", "0+"),
    F("timeout_ms", "int32", "0+"),
    F("topic_data", "[]TopicProduceData", "0+", fields=(
        F("name", "string", "0+"),
        F("partition_data", "[]PartitionProduceData", "0+", fields=(
            F("index", "int32", "0+"),
            F("records", "records", "0+", nullable="0+"),
        )),
    )),
))

PRODUCE_RESPONSE = Message(0, "ProduceResponse", "0-11", flexible="9+", fields=(
    F("responses", "[]TopicProduceResponse", "0+", fields=(
        F("name", "string", "0+"),
        F("partition_responses", "[]PartitionProduceResponse", "0+", fields=(
            F("index", "int32", "0+"),
            F("error_code", "int16", "0+"),
            F("base_offset", "int64", "0+"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=(
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            )),
            F("error_message", "string", "8+", nullable="8+", default=None),
            F("current_leader", "LeaderIdAndEpoch", "10+", tag=0, tagged="10+", fields=(
                F("leader_id", "int32", "10+", default=-1),
                F("leader_epoch", "int32", "10+", default=-1),
            )),
        )),
    )),
    F("throttle_time_ms", "int32", "1+", default=0),
    F("node_endpoints", "[]NodeEndpoint", "10+", tag=0, tagged="10+", fields=(
        F("node_id", "int32", "10+"),
        F("host", "string", "10+"),
        F("port", "int32", "10+"),
        F("rack", "string", "10+", nullable="10+", default=None),
    )),
))


FETCH_REQUEST = Message(1, "FetchRequest", "0-17", flexible="12+", fields=(
    F("cluster_id", "string", "12+", nullable="12+", tag=0, tagged="12+", default=None),
    F("replica_id", "int32", "0-14", default=-1),
    F("replica_state", "ReplicaState", "15+", tag=1, tagged="15+", fields=(
        F("replica_id", "int32", "15+", default=-1),
        F("replica_epoch", "int64", "15+", default=-1),
    )),
    F("max_wait_ms", "int32", "0+"),
    F("min_bytes", "int32", "0+"),
    F("max_bytes", "int32", "3+", default=2147483647),
    F("isolation_level", "int8", "4+", default=0),
    F("session_id", "int32", "7+", default=0),
    F("session_epoch", "int32", "7+", default=-1),
    F("topics", "[]FetchTopic", "0+", fields=(
        F("topic", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", "[]FetchPartition", "0+", fields=(
            F("partition", "int32", "0+"),
            F("current_leader_epoch", "int32", "9+", default=-1),
            F("fetch_offset", "int64", "0+"),
            F("last_fetched_epoch", "int32", "12+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("partition_max_bytes", "int32", "0+"),
            F("replica_directory_id", "uuid", "17+", tag=0, tagged="17+"),
        )),
    )),
    F("forgotten_topics_data", "[]ForgottenTopic", "7+", fields=(
        F("topic", "string", "7-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", "[]int32", "7+"),
    )),
    F("rack_id", "string", "11+", default=""),
))

FETCH_RESPONSE = Message(1, "FetchResponse", "0-17", flexible="12+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "7+"),
    F("session_id", "int32", "7+", default=0),
    F("responses", "[]FetchableTopicResponse", "0+", fields=(
        F("topic", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", "[]PartitionData", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("error_code", "int16", "0+"),
            F("high_watermark", "int64", "0+"),
            F("last_stable_offset", "int64", "4+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("diverging_epoch", "EpochEndOffset", "12+", tag=0, tagged="12+", fields=(
                F("epoch", "int32", "12+", default=-1),
                F("end_offset", "int64", "12+", default=-1),
            )),
            F("current_leader", "LeaderIdAndEpoch", "12+", tag=1, tagged="12+", fields=(
                F("leader_id", "int32", "12+", default=-1),
                F("leader_epoch", "int32", "12+", default=-1),
            )),
            F("snapshot_id", "SnapshotId", "12+", tag=2, tagged="12+", fields=(
                F("end_offset", "int64", "0+", default=-1),
                F("epoch", "int32", "0+", default=-1),
            )),
            F("aborted_transactions", "[]AbortedTransaction", "4+", nullable="4+", fields=(
                F("producer_id", "int64", "4+"),
                F("first_offset", "int64", "4+"),
            )),
            F("preferred_read_replica", "int32", "11+", default=-1),
            F("records", "records", "0+", nullable="0+"),
        )),
    )),
    F("node_endpoints", "[]NodeEndpoint", "16+", tag=0, tagged="16+", fields=(
        F("node_id", "int32", "16+"),
        F("host", "string", "16+"),
        F("port", "int32", "16+"),
        F("rack", "string", "16+", nullable="16+", default=None),
    )),
))


LIST_OFFSETS_REQUEST = Message(2, "ListOffsetsRequest", "0-10", flexible="6+", fields=(
    F("replica_id", "int32", "0+"),
    F("isolation_level", "int8", "2+"),
    F("topics", "[]ListOffsetsTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]ListOffsetsPartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64", "0+"),
            F("max_num_offsets", "int32", "0", default=1),
        )),
    )),
    F("timeout_ms", "int32", "10+"),
))

LIST_OFFSETS_RESPONSE = Message(2, "ListOffsetsResponse", "0-10", flexible="6+", fields=(
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]ListOffsetsTopicResponse", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]ListOffsetsPartitionResponse", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("error_code", "int16", "0+"),
            F("old_style_offsets", "[]int64", "0"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        )),
    )),
))


CREATE_TOPICS_REQUEST = Message(19, "CreateTopicsRequest", "0-7", flexible="5+", fields=(
    F("topics", "[]CreatableTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("num_partitions", "int32", "0+"),
        F("replication_factor", "int16", "0+"),
        F("assignments", "[]CreatableReplicaAssignment", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("broker_ids", "[]int32", "0+"),
        )),
        F("configs", "[]CreatableTopicConfig", "0+", fields=(
            F("name", "string", "0+"),
            F("value", "string", "0+", nullable="0+"),
        )),
    )),
    F("timeout_ms", "int32", "0+", default=60000),
    F("validate_only", "bool", "1+", default=False),
))

CREATE_TOPICS_RESPONSE = Message(19, "CreateTopicsResponse", "0-7", flexible="5+", fields=(
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]CreatableTopicResult", "0+", fields=(
        F("name", "string", "0+"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "1+", nullable="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0, tagged="5+"),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F("configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=(
            F("name", "string", "5+"),
            F("value", "string", "5+", nullable="5+"),
            F("read_only", "bool", "5+"),
            F("config_source", "int8", "5+", default=-1),
            F("is_sensitive", "bool", "5+"),
        )),
    )),
))


DELETE_TOPICS_REQUEST = Message(20, "DeleteTopicsRequest", "0-6", flexible="4+", fields=(
    F("topics", "[]DeleteTopicState", "6+", fields=(
        F("name", "string", "6+", nullable="6+", default=None),
        F("topic_id", "uuid", "6+"),
    )),
    F("topic_names", "[]string", "0-5"),
    F("timeout_ms", "int32", "0+"),
))

DELETE_TOPICS_RESPONSE = Message(20, "DeleteTopicsResponse", "0-6", flexible="4+", fields=(
    F("throttle_time_ms", "int32", "1+"),
    F("responses", "[]DeletableTopicResult", "0+", fields=(
        F("name", "string", "0+", nullable="6+"),
        F("topic_id", "uuid", "6+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "5+", nullable="5+", default=None),
    )),
))


CREATE_PARTITIONS_REQUEST = Message(37, "CreatePartitionsRequest", "0-3", flexible="2+", fields=(
    F("topics", "[]CreatePartitionsTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("count", "int32", "0+"),
        F("assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=(
            F("broker_ids", "[]int32", "0+"),
        )),
    )),
    F("timeout_ms", "int32", "0+"),
    F("validate_only", "bool", "0+"),
))

CREATE_PARTITIONS_RESPONSE = Message(37, "CreatePartitionsResponse", "0-3", flexible="2+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("results", "[]CreatePartitionsTopicResult", "0+", fields=(
        F("name", "string", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
    )),
))


DESCRIBE_CONFIGS_REQUEST = Message(32, "DescribeConfigsRequest", "0-4", flexible="4+", fields=(
    F("resources", "[]DescribeConfigsResource", "0+", fields=(
        F("resource_type", "int8", "0+"),
        F("resource_name", "string", "0+"),
        F("configuration_keys", "[]string", "0+", nullable="0+"),
    )),
    F("include_synonyms", "bool", "1+", default=False),
    F("include_documentation", "bool", "3+", default=False),
))

DESCRIBE_CONFIGS_RESPONSE = Message(32, "DescribeConfigsResponse", "0-4", flexible="4+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("results", "[]DescribeConfigsResult", "0+", fields=(
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resource_type", "int8", "0+"),
        F("resource_name", "string", "0+"),
        F("configs", "[]DescribeConfigsResourceResult", "0+", fields=(
            F("name", "string", "0+"),
            F("value", "string", "0+", nullable="0+"),
            F("read_only", "bool", "0+"),
            F("is_default", "bool", "0"),
            F("config_source", "int8", "1+", default=-1),
            F("is_sensitive", "bool", "0+"),
            F("synonyms", "[]DescribeConfigsSynonym", "1+", fields=(
                F("name", "string", "1+"),
                F("value", "string", "1+", nullable="0+"),
                F("source", "int8", "1+"),
            )),
            F("config_type", "int8", "3+", default=0),
            F("documentation", "string", "3+", nullable="0+"),
        )),
    )),
))


INCREMENTAL_ALTER_CONFIGS_REQUEST = Message(
    44, "IncrementalAlterConfigsRequest", "0-1", flexible="1+", fields=(
    F("resources", "[]AlterConfigsResource", "0+", fields=(
        F("resource_type", "int8", "0+"),
        F("resource_name", "string", "0+"),
        F("configs", "[]AlterableConfig", "0+", fields=(
            F("name", "string", "0+"),
            F("config_operation", "int8", "0+"),
            F("value", "string", "0+", nullable="0+"),
        )),
    )),
    F("validate_only", "bool", "0+"),
))

INCREMENTAL_ALTER_CONFIGS_RESPONSE = Message(
    44, "IncrementalAlterConfigsResponse", "0-1", flexible="1+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("responses", "[]AlterConfigsResourceResponse", "0+", fields=(
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resource_type", "int8", "0+"),
        F("resource_name", "string", "0+"),
    )),
))


INIT_PRODUCER_ID_REQUEST = Message(22, "InitProducerIdRequest", "0-5", flexible="2+", fields=(
    F("transactional_id", "string", "0+", nullable="0+"),
    F("transaction_timeout_ms", "int32", "0+"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
))

INIT_PRODUCER_ID_RESPONSE = Message(22, "InitProducerIdResponse", "0-5", flexible="2+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("producer_id", "int64", "0+", default=-1),
    F("producer_epoch", "int16", "0+"),
))


DESCRIBE_CLUSTER_REQUEST = Message(60, "DescribeClusterRequest", "0-1", flexible="0+", fields=(
    F("include_cluster_authorized_operations", "bool", "0+"),
    F("endpoint_type", "int8", "1+", default=1),
))

DESCRIBE_CLUSTER_RESPONSE = Message(60, "DescribeClusterResponse", "0-1", flexible="0+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("error_message", "string", "0+", nullable="0+", default=None),
    F("endpoint_type", "int8", "1+", default=1),
    F("cluster_id", "string", "0+"),
    F("controller_id", "int32", "0+", default=-1),
    F("brokers", "[]DescribeClusterBroker", "0+", fields=(
        F("broker_id", "int32", "0+"),
        F("host", "string", "0+"),
        F("port", "int32", "0+"),
        F("rack", "string", "0+", nullable="0+", default=None),
    )),
    F("cluster_authorized_operations", "int32", "0+", default=-2147483648),
))


OFFSET_FOR_LEADER_EPOCH_REQUEST = Message(
    23, "OffsetForLeaderEpochRequest", "0-4", flexible="4+", fields=(
    F("replica_id", "int32", "3+", default=-2),
    F("topics", "[]OffsetForLeaderTopic", "0+", fields=(
        F("topic", "string", "0+"),
        F("partitions", "[]OffsetForLeaderPartition", "0+", fields=(
            F("partition", "int32", "0+"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32", "0+"),
        )),
    )),
))

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message(
    23, "OffsetForLeaderEpochResponse", "0-4", flexible="4+", fields=(
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]OffsetForLeaderTopicResult", "0+", fields=(
        F("topic", "string", "0+"),
        F("partitions", "[]EpochEndOffset", "0+", fields=(
            F("error_code", "int16", "0+"),
            F("partition", "int32", "0+"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64", "0+", default=-1),
        )),
    )),
))


DELETE_RECORDS_REQUEST = Message(21, "DeleteRecordsRequest", "0-2", flexible="2+", fields=(
    F("topics", "[]DeleteRecordsTopic", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]DeleteRecordsPartition", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("offset", "int64", "0+"),
        )),
    )),
    F("timeout_ms", "int32", "0+"),
))

DELETE_RECORDS_RESPONSE = Message(21, "DeleteRecordsResponse", "0-2", flexible="2+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("topics", "[]DeleteRecordsTopicResult", "0+", fields=(
        F("name", "string", "0+"),
        F("partitions", "[]DeleteRecordsPartitionResult", "0+", fields=(
            F("partition_index", "int32", "0+"),
            F("low_watermark", "int64", "0+"),
            F("error_code", "int16", "0+"),
        )),
    )),
))


#: {api_key: description} of every request and response the codec knows.
REQUESTS: dict[int, Message] = {m.api_key: m for m in (
    API_VERSIONS_REQUEST, METADATA_REQUEST, PRODUCE_REQUEST, FETCH_REQUEST,
    LIST_OFFSETS_REQUEST, CREATE_TOPICS_REQUEST, DELETE_TOPICS_REQUEST,
    CREATE_PARTITIONS_REQUEST, DESCRIBE_CONFIGS_REQUEST, INCREMENTAL_ALTER_CONFIGS_REQUEST,
    INIT_PRODUCER_ID_REQUEST, DESCRIBE_CLUSTER_REQUEST, OFFSET_FOR_LEADER_EPOCH_REQUEST,
    DELETE_RECORDS_REQUEST)}
RESPONSES: dict[int, Message] = {m.api_key: m for m in (
    API_VERSIONS_RESPONSE, METADATA_RESPONSE, PRODUCE_RESPONSE, FETCH_RESPONSE,
    LIST_OFFSETS_RESPONSE, CREATE_TOPICS_RESPONSE, DELETE_TOPICS_RESPONSE,
    CREATE_PARTITIONS_RESPONSE, DESCRIBE_CONFIGS_RESPONSE, INCREMENTAL_ALTER_CONFIGS_RESPONSE,
    INIT_PRODUCER_ID_RESPONSE, DESCRIBE_CLUSTER_RESPONSE, OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    DELETE_RECORDS_RESPONSE)}


def _more(messages) -> None:
    for m in messages:
        (REQUESTS if m.name.endswith("Request") else RESPONSES)[m.api_key] = m


# the coordinators' messages (issue 30), each family in a module of its own
from kafkastore.server.protocol import messages_group, messages_txn  # noqa: E402

_more(messages_group.MESSAGES)
_more(messages_txn.MESSAGES)
