"""The admin APIs: ApiVersions, Metadata, CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, IncrementalAlterConfigs, DescribeCluster.

Every refusal is an error code in the response, per topic or resource, as Kafka's
``KafkaApis`` and ``ControllerApis`` answer (codes from
:mod:`kafkastore.server.error_codes`). One node: the leader, the replicas and the ISR of
every partition are this node; a replication factor other than 1 (or -1: the default)
is ``INVALID_REPLICATION_FACTOR``.

Topic config overrides (CreateTopics ``configs``, IncrementalAlterConfigs) go to
the broker (:meth:`~kafkastore.server.broker.Broker.set_topic_overrides`): the log manager
applies them, ``kafkastore-topic-configs.json`` in the log directory keeps them across
restarts (:class:`~kafkastore.server.config.TopicConfigFile`; Kafka keeps them in the
metadata log). A deleted topic's overrides go with it.
"""

from __future__ import annotations

import base64
import re

from kafkastore.config import ConfigError, LogConfig
from kafkastore.errors import InvalidTopicError, KafkaStoreError
from kafkastore.internal_topics import INTERNAL_TOPICS
import kafkastore.server.protocol as protocol
from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode, error_code_for
from kafkastore.topic import validate_topic

__all__ = ["HANDLERS", "unsupported_api_versions_body"]

ZERO_UUID = b"\0" * 16
_TOPIC, _BROKER = 2, 4                      # ConfigResource.Type
# DescribeConfigsResponse.ConfigSource
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3   # AlterConfigOp.OpType
# metadata.version a KRaft broker finalizes; 3.7-IV4 (19) is the level Fetch v16 needs
# (Kafka's MetadataVersion); the oldest a KRaft cluster bootstraps at is 3.3-IV0 (7)
_METADATA_VERSION_MIN, _METADATA_VERSION = 7, 19
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
# Kafka's ConfigDef.Type ids in DescribeConfigs v3+ (DescribeConfigsResponse.ConfigType)
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                 "list": 7}


def _api_keys() -> list[dict]:
    return [{"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items())]


def unsupported_api_versions_body() -> dict:
    """The v0 ApiVersions answer to a version the server does not speak (Kafka's
    ``ApiVersionsRequest.getErrorResponse``: UNSUPPORTED_VERSION and the ranges)."""
    return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "api_keys": _api_keys()}


async def api_versions(broker: Broker, header, request: dict) -> dict:
    # ApiVersionsRequest.isValid (v3+): the client's software name and version
    if header.api_version >= 3 and not all(
            _SOFTWARE.fullmatch(request.get(k) or "")
            for k in ("client_software_name", "client_software_version")):
        return {"error_code": int(ErrorCode.INVALID_REQUEST), "api_keys": []}
    return {
        "error_code": 0,
        "api_keys": _api_keys(),
        "throttle_time_ms": 0,
        "supported_features": [{"name": "metadata.version",
                                "min_version": _METADATA_VERSION_MIN,
                                "max_version": _METADATA_VERSION}],
        "finalized_features_epoch": 0,
        "finalized_features": [{"name": "metadata.version",
                                "max_version_level": _METADATA_VERSION,
                                "min_version_level": _METADATA_VERSION}],
    }


# -- Metadata ------------------------------------------------------------------------------

def topic_id_bytes(broker: Broker, topic: str) -> bytes:
    """The topic's id as 16 bytes (ZERO_UUID when its logs carry none)."""
    text = broker.topic_id(topic)
    if not text:
        return ZERO_UUID
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _partition_metadata(broker: Broker, topic: str, partition: int) -> dict:
    log = broker.log(topic, partition)
    epoch = log.leader_epoch_cache.latest_epoch() if log is not None else None
    node = broker.node_id
    return {"error_code": 0, "partition_index": partition, "leader_id": node,
            "leader_epoch": epoch if epoch is not None else 0,
            "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []}


def _topic_metadata(broker: Broker, topic: str) -> dict:
    partitions = broker.partitions(topic) or []
    return {"error_code": 0, "name": topic, "topic_id": topic_id_bytes(broker, topic),
            # Kafka's Topic.isInternal: the coordinators' topics
            "is_internal": topic in INTERNAL_TOPICS,
            "partitions": [_partition_metadata(broker, topic, p) for p in partitions]}


def _brokers(broker: Broker) -> list[dict]:
    host, port = broker.advertised()
    return [{"node_id": broker.node_id, "host": host, "port": port, "rack": None}]


async def metadata(broker: Broker, header, request: dict) -> dict:
    requested = request.get("topics")
    topics: list[dict] = []
    if requested is None or (header.api_version == 0 and not requested):
        # null (v1+), or an empty list at v0: every topic
        topics = [_topic_metadata(broker, t) for t in broker.topics()]
    else:
        by_id = {topic_id_bytes(broker, t): t for t in broker.topics()}
        auto = bool(request.get("allow_auto_topic_creation", True))
        for entry in requested:
            name = entry.get("name")
            if name is None:   # v10+: by id
                tid = entry.get("topic_id", ZERO_UUID)
                name = by_id.get(tid) if tid != ZERO_UUID else None
                if name is None:
                    topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "name": None,
                                   "topic_id": tid, "partitions": []})
                    continue
            topics.append(_lookup(broker, name, auto))
    return {"throttle_time_ms": 0, "brokers": _brokers(broker),
            "cluster_id": broker.cluster_id, "controller_id": broker.node_id,
            "topics": topics}


def _lookup(broker: Broker, name: str, auto: bool) -> dict:
    try:
        validate_topic(name)
    except InvalidTopicError:
        return {"error_code": int(ErrorCode.INVALID_TOPIC_EXCEPTION), "name": name,
                "partitions": []}
    if broker.partitions(name) is None:
        try:
            created = auto and broker.auto_create_topic(name)
        except KafkaStoreError as exc:
            return {"error_code": int(error_code_for(exc)), "name": name, "partitions": []}
        if not created:
            return {"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "name": name,
                    "partitions": []}
        # Kafka answers LEADER_NOT_AVAILABLE while the new topic's leaders are elected;
        # one node has its logs at once, so the topic is described as it is
    return _topic_metadata(broker, name)


# -- CreateTopics / DeleteTopics / CreatePartitions --------------------------------------

def _config_overrides(configs: list[dict]) -> dict[str, object]:
    out: dict[str, object] = {}
    for c in configs or []:
        if c.get("value") is None:
            raise ConfigError(f"Null value not supported for topic configs: {c.get('name')}",
                              key=c.get("name"))
        out[c["name"]] = c["value"]
    LogConfig.from_dict(out)  # unknown names and bad values: ConfigError
    return out


def _creatable_configs(broker: Broker, topic: str, overrides: dict) -> list[dict]:
    config = broker.log_defaults().replace(**overrides) if overrides else broker.log_defaults()
    return [{"name": k, "value": v, "read_only": False, "is_sensitive": False,
             "config_source": _DYNAMIC_TOPIC_CONFIG if k in overrides else _DEFAULT_CONFIG}
            for k, v in config.to_dict().items()]


async def create_topics(broker: Broker, header, request: dict) -> dict:
    validate_only = bool(request.get("validate_only", False))
    results = []
    names = [t.get("name") for t in request.get("topics", [])]
    for topic in request.get("topics", []):
        name = topic["name"]
        result = {"name": name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        results.append(result)

        def refuse(code: ErrorCode, message: str) -> None:
            result.update(error_code=int(code), error_message=message)

        if names.count(name) > 1:
            # Kafka: a name given twice in one request is refused for every copy
            refuse(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {name} in the request.")
            continue
        try:
            validate_topic(name)
        except InvalidTopicError as exc:
            refuse(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc))
            continue
        if broker.partitions(name) is not None:
            refuse(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            continue
        if topic.get("assignments"):
            refuse(ErrorCode.INVALID_REQUEST, "Manual replica assignments are not supported "
                   "by a single-node kafkastore server.")
            continue
        count = topic.get("num_partitions", -1)
        if count == -1:
            count = int(broker.config["num.partitions"])
        if count <= 0:
            refuse(ErrorCode.INVALID_PARTITIONS,
                   "Number of partitions was set to an invalid non-positive value.")
            continue
        rf = topic.get("replication_factor", -1)
        if rf not in (-1, 1):
            refuse(ErrorCode.INVALID_REPLICATION_FACTOR,
                   f"Unable to replicate the partition {rf} time(s): The target replication "
                   "factor of " f"{rf} cannot be reached because only 1 broker(s) are "
                   "registered.")
            continue
        try:
            overrides = _config_overrides(topic.get("configs", []))
        except ConfigError as exc:
            refuse(ErrorCode.INVALID_CONFIG, str(exc))
            continue
        if not validate_only:
            try:
                broker.create_topic(name, count, overrides)
            except KafkaStoreError as exc:
                refuse(error_code_for(exc), str(exc))
                continue
            result["topic_id"] = topic_id_bytes(broker, name)
        result.update(num_partitions=count, replication_factor=1,
                      configs=_creatable_configs(broker, name, overrides))
    return {"throttle_time_ms": 0, "topics": results}


async def delete_topics(broker: Broker, header, request: dict) -> dict:
    if header.api_version >= 6:
        wanted = [(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in request["topics"]]
    else:
        wanted = [(n, ZERO_UUID) for n in request.get("topic_names", [])]
    by_id = {topic_id_bytes(broker, t): t for t in broker.topics()}
    responses = []
    for name, tid in wanted:
        out = {"name": name, "topic_id": tid, "error_code": 0, "error_message": None}
        responses.append(out)
        if name is None:
            name = by_id.get(tid) if tid != ZERO_UUID else None
            if name is None:
                out.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_ID),
                           error_message="This server does not host this topic ID.")
                continue
            out["name"] = name
        if not broker.config["delete.topic.enable"]:
            out.update(error_code=int(ErrorCode.TOPIC_DELETION_DISABLED),
                       error_message="Topic deletion is disabled.")
            continue
        if broker.partitions(name) is None:
            out.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                       error_message="This server does not host this topic-partition.")
            continue
        out["topic_id"] = topic_id_bytes(broker, name)
        broker.delete_topic(name)
    return {"throttle_time_ms": 0, "responses": responses}


async def create_partitions(broker: Broker, header, request: dict) -> dict:
    results = []
    for topic in request.get("topics", []):
        name, count = topic["name"], topic["count"]
        out = {"name": name, "error_code": 0, "error_message": None}
        results.append(out)
        current = broker.partitions(name)
        if current is None:
            out.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                       error_message=f"The topic '{name}' does not exist.")
        elif count < len(current):
            out.update(error_code=int(ErrorCode.INVALID_PARTITIONS),
                       error_message=f"The topic {name} currently has {len(current)} "
                       f"partition(s); {count} would not be an increase.")
        elif count == len(current):
            out.update(error_code=int(ErrorCode.INVALID_PARTITIONS),
                       error_message=f"Topic already has {count} partition(s).")
        elif topic.get("assignments"):
            out.update(error_code=int(ErrorCode.INVALID_REQUEST),
                       error_message="Manual replica assignments are not supported by a "
                       "single-node kafkastore server.")
        elif not request.get("validate_only"):
            broker.create_topic(name, count)
    return {"throttle_time_ms": 0, "results": results}


# -- DescribeConfigs / IncrementalAlterConfigs --------------------------------------------

def _topic_config_entries(broker: Broker, topic: str, keys, version: int) -> list[dict]:
    overrides = broker.topic_overrides(topic)
    static = broker.config.topic_defaults()
    config = broker.log_defaults().replace(**overrides) if overrides else broker.log_defaults()
    entries = []
    for key in LogConfig.CONFIG_KEYS:
        if keys is not None and key.name not in keys:
            continue
        value = config.to_dict()[key.name]
        source = (_DYNAMIC_TOPIC_CONFIG if key.name in overrides else
                  _STATIC_BROKER_CONFIG if key.name in static else _DEFAULT_CONFIG)
        entries.append({"name": key.name, "value": value, "read_only": False,
                        "is_default": source == _DEFAULT_CONFIG, "config_source": source,
                        "is_sensitive": False, "synonyms": [],
                        "config_type": _CONFIG_TYPES.get(key.kafka_type, 0),
                        "documentation": key.doc or None})
    return entries


def _broker_config_entries(broker: Broker, keys) -> list[dict]:
    entries = []
    for name, value in sorted(broker.config.items()):
        if value is None or (keys is not None and name not in keys):
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        entries.append({"name": name, "value": text, "read_only": True, "is_default": False,
                        "config_source": _STATIC_BROKER_CONFIG, "is_sensitive": False,
                        "synonyms": []})
    return entries


async def describe_configs(broker: Broker, header, request: dict) -> dict:
    results = []
    for res in request.get("resources", []):
        rtype, name = res["resource_type"], res["resource_name"]
        keys = res.get("configuration_keys")
        out = {"error_code": 0, "error_message": None, "resource_type": rtype,
               "resource_name": name, "configs": []}
        results.append(out)
        if rtype == _TOPIC:
            if broker.partitions(name) is None:
                out.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                           error_message=f"Topic {name} does not exist.")
            else:
                out["configs"] = _topic_config_entries(broker, name, keys, header.api_version)
        elif rtype == _BROKER:
            if name not in ("", str(broker.node_id)):
                out.update(error_code=int(ErrorCode.INVALID_REQUEST),
                           error_message=f"Unexpected broker id, expected {broker.node_id} "
                           f"or empty string, but received {name}")
            else:
                out["configs"] = _broker_config_entries(broker, keys)
        else:
            out.update(error_code=int(ErrorCode.INVALID_REQUEST),
                       error_message=f"Unsupported resource type {rtype}")
    return {"throttle_time_ms": 0, "results": results}


async def incremental_alter_configs(broker: Broker, header, request: dict) -> dict:
    validate_only = bool(request.get("validate_only"))
    responses = []
    for res in request.get("resources", []):
        rtype, name = res["resource_type"], res["resource_name"]
        out = {"error_code": 0, "error_message": None, "resource_type": rtype,
               "resource_name": name}
        responses.append(out)
        if rtype != _TOPIC:
            out.update(error_code=int(ErrorCode.INVALID_REQUEST),
                       error_message="kafkastore serve alters topic configs only; the "
                       "broker's are static (server.properties)")
            continue
        if broker.partitions(name) is None:
            out.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                       error_message=f"Topic {name} does not exist.")
            continue
        overrides = dict(broker.topic_overrides(name))
        try:
            for op in res.get("configs", []):
                key, kind, value = op["name"], op["config_operation"], op.get("value")
                if key not in {k.name for k in LogConfig.CONFIG_KEYS}:
                    LogConfig.from_dict({key: value})   # Kafka's unknown-name message
                if kind == _SET:
                    overrides[key] = value
                elif kind == _DELETE:
                    overrides.pop(key, None)
                else:
                    # APPEND / SUBTRACT apply to list configs (cleanup.policy only here)
                    if key != "cleanup.policy":
                        raise ConfigError(f"Config value append/subtract is not allowed for "
                                          f"config key {key}", key=key)
                    current = list(broker.log_defaults().replace(**overrides).cleanup_policy)
                    items = [v.strip() for v in (value or "").split(",") if v.strip()]
                    if kind == _APPEND:
                        current += [v for v in items if v not in current]
                    elif kind == _SUBTRACT:
                        current = [v for v in current if v not in items]
                    else:
                        raise ConfigError(f"Unknown config operation {kind}", key=key)
                    overrides[key] = ",".join(current)
            broker.log_defaults().replace(**overrides)
            if not validate_only:
                broker.set_topic_overrides(name, overrides)
        except ConfigError as exc:
            out.update(error_code=int(ErrorCode.INVALID_CONFIG), error_message=str(exc))
        except KafkaStoreError as exc:   # the topic config file could not be written
            out.update(error_code=int(error_code_for(exc)), error_message=str(exc))
    return {"throttle_time_ms": 0, "responses": responses}


# -- DescribeCluster -------------------------------------------------------------------------

async def describe_cluster(broker: Broker, header, request: dict) -> dict:
    if request.get("endpoint_type", 1) != 1:
        # only brokers: KIP-919's controller endpoints are not served here
        return {"error_code": int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
                "error_message": "The target server only supports the broker endpoint type",
                "endpoint_type": request.get("endpoint_type"), "cluster_id": broker.cluster_id,
                "controller_id": broker.node_id, "brokers": []}
    host, port = broker.advertised()
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "endpoint_type": 1, "cluster_id": broker.cluster_id,
            "controller_id": broker.node_id,
            "brokers": [{"broker_id": broker.node_id, "host": host, "port": port,
                         "rack": None}]}


HANDLERS: dict = {
    18: api_versions,
    3: metadata,
    19: create_topics,
    20: delete_topics,
    37: create_partitions,
    32: describe_configs,
    44: incremental_alter_configs,
    60: describe_cluster,
}
