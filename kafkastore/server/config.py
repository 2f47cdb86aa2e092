"""The broker's configuration (Kafka's ``server.properties`` keys and defaults) and its
identity in ``meta.properties``.

:class:`ServerConfig` holds the broker keys a single node uses, under Kafka's names and
with Kafka's defaults (``KafkaConfig``, ``ServerConfigs``, ``ServerLogConfigs``,
``SocketServerConfigs``). It is read from a ``server.properties``-style file (Java
properties syntax, :func:`kafkastore.config.parse_properties`: ``#`` and ``!`` comments,
``key=value``, ``key: value``, ``key value``, backslash line continuations) with
overrides on top. Keys it does not know are kept (Kafka ignores them too) and logged once
per process.

The ``log.*`` keys are the broker's defaults for every topic. They map to topic configs as
Kafka's ``ServerTopicConfigSynonyms`` maps them (``log.segment.bytes`` ->
``segment.bytes``, ``log.retention.ms`` / ``.minutes`` / ``.hours`` -> ``retention.ms``,
the first one set winning, ``log.flush.interval.messages`` -> ``flush.messages``,
``message.max.bytes`` -> ``max.message.bytes`` ...): :meth:`ServerConfig.log_defaults` is
the :class:`~kafkastore.config.LogConfig` the :class:`~kafkastore.manager.LogManager` is
opened with. The log manager's own broker keys (``log.retention.check.interval.ms``,
``log.flush.offset.checkpoint.interval.ms``, ...) and the cleaner's (``log.cleaner.*``)
go to :class:`~kafkastore.manager.ManagerConfig` and
:class:`~kafkastore.cleaner.CleanerConfig`.

``meta.properties``
-------------------
:func:`ensure_meta_properties` gives the log directory the identity a KRaft broker
writes (``kafka-storage format``), :class:`kafkastore.log_dir.MetaProperties`::

    #
    #<date>
    version=1
    cluster.id=<22 characters: a Uuid in URL-safe base64>
    node.id=<node.id>
    directory.id=<22 characters>   (Kafka 3.7+)

created on the first start (a random cluster id and directory id), read on later ones:
the cluster id persists; a ``node.id`` that differs from the file's is refused
(:class:`~kafkastore.errors.InvalidMetaPropertiesError`, with Kafka's wording).

Topic config overrides
----------------------
The overrides clients set (CreateTopics ``configs``, IncrementalAlterConfigs) are kept in
``kafkastore-topic-configs.json`` at the top of the log directory
(:class:`TopicConfigFile`) and given back to the log manager at the next start. Kafka keeps
them in its metadata log; a regular file at the log directory's top is what Kafka's
``LogManager.loadLogs`` ignores (it opens sub-directories only), so the directory stays one
Kafka loads.

Thread-safety: a ServerConfig is not changed after construction; share it freely. A
TopicConfigFile is written from the server's event loop only.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping

from kafkastore import _fileio
from kafkastore.checkpoint import write_atomically
from kafkastore.cleaner import CleanerConfig
from kafkastore.config import ConfigError, LogConfig, parse_properties
from kafkastore.errors import InvalidMetaPropertiesError, KafkaStorageError
from kafkastore.log_dir import MetaProperties, read_meta_properties
from kafkastore.manager import ManagerConfig
# Kafka's Uuid.randomUuid (never a reserved id, never a leading '-'), for the cluster and
# directory ids of meta.properties
from kafkastore.partition_metadata import random_uuid

__all__ = ["DEFAULTS", "TOPIC_CONFIGS_FILE", "ServerConfig", "TopicConfigFile",
           "ensure_meta_properties", "parse_listener", "random_uuid"]

_log = logging.getLogger("kafkastore.server")

#: Kafka's broker defaults for the keys the server reads (``KafkaConfig`` /
#: ``ServerLogConfigs`` / ``SocketServerConfigs``), under Kafka's names. None: not set.
DEFAULTS: dict[str, object] = {
    "node.id": 1,
    "listeners": None,              # Kafka: PLAINTEXT://:9092; here the bind arguments
    "advertised.listeners": None,   # Kafka: the listeners
    "auto.create.topics.enable": True,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "message.max.bytes": 1048588,
    "socket.request.max.bytes": 104857600,
    "connections.max.idle.ms": 600000,
    "delete.topic.enable": True,
    "log.dirs": None,
    "log.dir": None,
    # the group coordinator's (GroupCoordinatorConfig, issue 30)
    "offsets.topic.num.partitions": 50,
    "offsets.topic.segment.bytes": 104857600,
    "offsets.topic.compression.codec": 0,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offsets.commit.timeout.ms": 5000,
    "offsets.load.buffer.size": 5242880,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2147483647,
    # the transaction coordinator's (TransactionStateManagerConfig /
    # TransactionLogConfig, issue 30)
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104857600,
    "transaction.max.timeout.ms": 900000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
}

#: Topic config -> the broker keys that give its default, first set wins, and the factor
#: to milliseconds (Kafka's ``ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS``;
#: only the topic configs kafkastore's LogConfig has).
_HOUR, _MINUTE = 3_600_000, 60_000
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTE),
                     ("log.retention.hours", _HOUR)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
}

_SYNONYM_KEYS = {name for synonyms in TOPIC_CONFIG_SYNONYMS.values() for name, _ in synonyms}
_MANAGER_KEYS = {k.name for k in ManagerConfig.CONFIG_KEYS}
_CLEANER_KEYS = {k.name for k in CleanerConfig.CONFIG_KEYS}
#: Broker keys a single node accepts and has no use for (KRaft roles, the controller
#: quorum, listener maps): kept without a log line.
_IGNORED_KEYS = {
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "listener.security.protocol.map",
    "inter.broker.listener.name", "num.network.threads", "num.io.threads",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "broker.id",
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "min.insync.replicas",
    "unclean.leader.election.enable", "log.message.format.version",
}
_KNOWN = set(DEFAULTS) | _SYNONYM_KEYS | _MANAGER_KEYS | _CLEANER_KEYS | _IGNORED_KEYS
_logged_unknown: set[str] = set()


def _convert(key: str, value: object, default: object) -> object:
    """``value`` as the type of Kafka's default for ``key`` (strings from a file)."""
    if value is None or default is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "Expected value to be either true or false",
                              key=key, value=value)
        return text == "true"
    if isinstance(default, int):
        try:
            if isinstance(value, bool):
                raise ValueError
            return int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "Not a number of type INT", key=key, value=value) from None
    return str(value)


class ServerConfig:
    """The broker's settings: ``config["num.partitions"]``.

    Parameters
    ----------
    overrides
        Kafka broker keys to values (strings, as from a file, or Python values); over
        the defaults.

    Raises
    ------
    ConfigError
        A value of the wrong type, a ``log.*`` default that is not a valid topic config,
        a ``listeners`` entry that is not ``PLAINTEXT://host:port``,
        ``default.replication.factor`` other than 1, ``num.partitions`` below 1.
    """

    def __init__(self, overrides: Mapping[str, object] | None = None) -> None:
        self._values = dict(DEFAULTS)
        for key, value in (overrides or {}).items():
            if not isinstance(key, str):
                raise ConfigError(f"Config names must be strings: {key!r}")
            self._values[key] = _convert(key, value, DEFAULTS.get(key))
            if key not in _KNOWN and key not in _logged_unknown:
                _logged_unknown.add(key)
                _log.info("kafkastore serve: ignoring the broker config %s (not used by a "
                          "single node)", key)
        if self["default.replication.factor"] != 1:
            raise ConfigError("default.replication.factor must be 1: kafkastore serve is "
                              "one node", key="default.replication.factor",
                              value=self["default.replication.factor"])
        if int(self["num.partitions"]) < 1:  # type: ignore[arg-type]
            raise ConfigError(f"Invalid value {self['num.partitions']} for configuration "
                              "num.partitions: Value must be at least 1",
                              key="num.partitions", value=self["num.partitions"])
        for key in ("listeners", "advertised.listeners"):
            if self._values[key]:
                parse_listener(str(self._values[key]), key)
        # fail at start, not at the first topic: the log.* defaults must be valid
        self.log_defaults()
        self.manager_config()
        self.cleaner_config()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str],
                  overrides: Mapping[str, object] | None = None) -> ServerConfig:
        """Read a ``server.properties``-style file, then apply ``overrides``."""
        with open(path, encoding="utf-8") as f:
            values: dict[str, object] = dict(parse_properties(f.read()))
        values.update(overrides or {})
        return cls(values)

    def __getitem__(self, key: str) -> object:
        return self._values[key]

    def get(self, key: str, default: object = None) -> object:
        return self._values.get(key, default)

    def items(self):
        return self._values.items()

    # -- what the parts below take ------------------------------------------------
    def topic_defaults(self) -> dict[str, object]:
        """The topic configs the ``log.*`` broker keys set (Kafka's synonyms; the first
        synonym set wins; hours and minutes converted to milliseconds)."""
        out: dict[str, object] = {}
        for topic_key, synonyms in TOPIC_CONFIG_SYNONYMS.items():
            for name, factor in synonyms:
                value = self._values.get(name)
                if value is None:
                    continue
                if factor != 1:
                    value = _convert(name, value, 0) * factor  # type: ignore[operator]
                out[topic_key] = value
                break
        return out

    def log_defaults(self) -> LogConfig:
        """The LogConfig every topic starts from (``log.*`` keys over Kafka's topic
        defaults)."""
        try:
            return LogConfig.from_dict(self.topic_defaults())
        except ConfigError as exc:
            raise ConfigError(f"Invalid broker log default: {exc}", key=exc.key,
                              value=getattr(exc, "value", None)) from None

    def manager_config(self) -> ManagerConfig:
        return ManagerConfig({k: v for k, v in self._values.items() if k in _MANAGER_KEYS})

    def cleaner_config(self) -> CleanerConfig:
        return CleanerConfig({k: v for k, v in self._values.items() if k in _CLEANER_KEYS})

    def listener(self) -> tuple[str, int] | None:
        """The PLAINTEXT ``listeners`` entry as (host, port), or None if not set."""
        text = self._values.get("listeners")
        return parse_listener(str(text), "listeners") if text else None

    def advertised_listener(self) -> tuple[str, int] | None:
        text = self._values.get("advertised.listeners")
        return parse_listener(str(text), "advertised.listeners") if text else None


_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/\[\]]*):(?P<port>\d+)")


def parse_listener(text: str, key: str = "listeners") -> tuple[str, int]:
    """``PLAINTEXT://host:port`` (of a comma-separated list, the PLAINTEXT one) as
    ``(host, port)``; an empty host is every interface (``0.0.0.0``, as Kafka binds),
    ``[::1]`` an IPv6 address. Only PLAINTEXT: no TLS or SASL here."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    for entry in entries:
        m = _LISTENER.fullmatch(entry)
        if m is None:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: expected "
                              "PLAINTEXT://host:port", key=key, value=text)
        if m["name"].upper() != "PLAINTEXT":
            continue
        port = int(m["port"])
        if port > 65535:
            raise ConfigError(f"Invalid port {port} in {key}", key=key, value=text)
        host = m["host"].strip("[]") or "0.0.0.0"
        return host, port
    raise ConfigError(f"{key} has no PLAINTEXT listener ({text!r}): kafkastore serve speaks "
                      "PLAINTEXT only (no TLS or SASL)", key=key, value=text)


def ensure_meta_properties(log_dir: str, node_id: int) -> MetaProperties:
    """The identity ``log_dir``'s ``meta.properties`` holds, or a new one (version 1, a
    random cluster id and directory id) for a directory without one; the caller writes
    a new one (``LogManager(meta=...)`` does, under the directory's lock).

    Raises
    ------
    InvalidMetaPropertiesError
        The file breaks Kafka's rules, is a ZooKeeper-era version 0 file, or names
        another node id (Kafka's ``MetaPropertiesEnsemble.verify`` wording).
    """
    found = read_meta_properties(log_dir) if os.path.isdir(log_dir) else None
    if found is None:
        return MetaProperties(1, random_uuid(), node_id, random_uuid())
    path = os.path.join(os.path.abspath(log_dir), "meta.properties")
    if found.version != 1:
        raise InvalidMetaPropertiesError(
            f"{path} is a version {found.version} (ZooKeeper mode) meta.properties; a KRaft "
            "broker needs version 1", key="version", path=path)
    if found.node_id != node_id:
        raise InvalidMetaPropertiesError(
            f"Stored node id {found.node_id} doesn't match previous node id {node_id} in "
            f"{path}. If you moved your data, make sure your configured node id matches. If "
            "you intend to create a new node, you should remove all data in your data "
            "directories.", key="node.id", path=path)
    return found


#: The file at the top of the log directory holding the topic config overrides.
TOPIC_CONFIGS_FILE = "kafkastore-topic-configs.json"
_TOPIC_CONFIGS_VERSION = 1


class TopicConfigFile:
    """The topic config overrides set through the API, kept across restarts.

    The file is ``<log dir>/kafkastore-topic-configs.json``, UTF-8 JSON::

        {"version": 1,
         "topics": {"orders": {"cleanup.policy": "compact", "retention.ms": "86400000"}}}

    ``topics`` maps a topic to its overrides (Kafka's topic-level names, the values as
    the client sent them); a topic without overrides is absent, and so is a deleted one.
    The file is replaced whole by :func:`kafkastore.checkpoint.write_atomically` (write
    ``.tmp``, fsync, rename, fsync the directory: Kafka's checkpoint protocol), so a crash
    leaves the old overrides or the new ones. A missing file means no overrides. Kafka
    keeps these in its metadata log; here they are a regular file, which Kafka's
    ``LogManager.loadLogs`` skips (it iterates the log directory's sub-directories).
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(os.path.abspath(os.fspath(log_dir)), TOPIC_CONFIGS_FILE)

    def read(self) -> dict[str, dict[str, object]]:
        """The overrides, ``{topic: {name: value}}``; empty without a file.

        Raises
        ------
        ConfigError
            The file is not this format (the server refuses to start rather than open a
            compacted topic with the delete policy); ``path`` names the file.
        """
        data = _fileio.read_file(self.path)
        if data is None:
            return {}
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{self.path} is not JSON: {exc}", path=self.path) from None
        version = doc.get("version") if isinstance(doc, dict) else None
        if version != _TOPIC_CONFIGS_VERSION:
            raise ConfigError(f"{self.path}: expected an object of version "
                              f"{_TOPIC_CONFIGS_VERSION}, found version {version!r}",
                              path=self.path)
        topics = doc.get("topics")
        if not isinstance(topics, dict) or not all(
                isinstance(o, dict) and all(isinstance(k, str) for k in o)
                for o in topics.values()):
            raise ConfigError(f"{self.path}: 'topics' must map each topic to an object of "
                              "config names and values", path=self.path)
        return {topic: dict(overrides) for topic, overrides in topics.items() if overrides}

    def write(self, configs: Mapping[str, Mapping[str, object]]) -> None:
        """Replace the file by ``configs`` (crash-safe; see the class docstring).

        Raises
        ------
        KafkaStorageError
            A write, fsync or rename failed (the old file is left unless the rename
            happened).
        """
        doc = {"version": _TOPIC_CONFIGS_VERSION,
               "topics": {t: dict(o) for t, o in sorted(configs.items()) if o}}
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
        try:
            write_atomically(self.path, data)
        except OSError as exc:
            if isinstance(exc, KafkaStorageError):
                raise
            raise KafkaStorageError.from_os_error(exc, "Writing the topic configs",
                                                  self.path) from exc
