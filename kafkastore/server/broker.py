"""What the request handlers share: the log manager, the config, the topics, and the
append notifications that long-polling fetches wait on."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping

from kafkastore.config import LogConfig
from kafkastore.errors import KafkaStorageError
from kafkastore.log import Log
from kafkastore.manager import LogManager
from kafkastore.server.config import ServerConfig, TopicConfigFile, random_uuid

__all__ = ["CLIENT_ADDRESS", "Broker", "CloseConnection"]

_log = logging.getLogger("kafkastore.server")

#: The address of the client whose request is being handled, as Kafka prints it
#: (``RequestContext.clientAddress.toString()``: ``"/127.0.0.1"``); each connection's
#: task sets it, so a handler sees its own client's ("" outside a connection).
CLIENT_ADDRESS: contextvars.ContextVar[str] = contextvars.ContextVar(
    "kafkastore_client_address", default="")


class CloseConnection:
    """What a handler returns instead of a response body to have the connection closed
    (after a log line saying ``reason``), as Kafka's ``RequestChannel.closeConnection``:
    a Produce with ``acks=0`` that failed for a partition gets no response, so closing
    the connection is how the client learns of it (``KafkaApis.handleProduceRequest``)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"CloseConnection({self.reason!r})"


class Broker:
    """A single-node broker's shared state, used from the server's event loop only.

    Not thread-safe: every handler runs on the one event loop (the logs underneath are
    thread-safe, so the manager's background tasks may run beside it).

    ``extras`` is per-broker state a handler module owns (fetch sessions, say), under the
    module's name.
    """

    def __init__(self, manager: LogManager, config: ServerConfig | None = None, *,
                 host: str = "127.0.0.1", port: int = 9092,
                 cluster_id: str | None = None,
                 topic_config_file: TopicConfigFile | None = None,
                 topic_overrides: Mapping[str, Mapping[str, object]] | None = None) -> None:
        self.manager = manager
        self.config = config if config is not None else ServerConfig()
        self.node_id = int(self.config["node.id"])
        self.cluster_id = cluster_id or random_uuid()
        self.host = host
        self.port = port
        self.extras: dict[str, object] = {}
        self._appended: asyncio.Event | None = None
        self._stopping = False
        #: host and port clients are told to connect to (``advertised.listeners``, else
        #: the bound address); KafkaServer sets them once bound
        self.advertised_host: str | None = None
        self.advertised_port: int | None = None
        # the topic config overrides given through the API (the manager holds the same
        # and applies them; kept here to tell DYNAMIC_TOPIC_CONFIG from the defaults),
        # persisted in topic_config_file when there is one
        self._overrides: dict[str, dict[str, object]] = {
            t: dict(o) for t, o in (topic_overrides or {}).items() if o}
        self._config_file = topic_config_file
        self._log_defaults: LogConfig | None = None
        self._forget_stale_overrides()
        #: the coordinators (issue 30), set by KafkaServer: a GroupCoordinator and a
        #: TransactionCoordinator (None in a Broker made without a server)
        self.group_coordinator = None
        self.txn_coordinator = None

    # -- topics ---------------------------------------------------------------------
    def log(self, topic: str, partition: int) -> Log | None:
        return self.manager.get(topic, partition)

    def topics(self) -> dict[str, list[int]]:
        """Every topic with its partitions, sorted."""
        out: dict[str, list[int]] = {}
        for tp in self.manager.logs():
            out.setdefault(tp.topic, []).append(tp.partition)
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def partitions(self, topic: str) -> list[int] | None:
        return self.topics().get(topic)

    def create_topic(self, topic: str, num_partitions: int,
                     configs: Mapping[str, object] | None = None) -> None:
        """Create ``topic`` with partitions ``0 .. num_partitions - 1`` (those missing)."""
        if configs:
            self.set_topic_overrides(topic, dict(configs))
        for p in range(num_partitions):
            self.manager.get_or_create(topic, p)

    def auto_create_topic(self, topic: str) -> bool:
        """Create ``topic`` with ``num.partitions`` partitions if
        ``auto.create.topics.enable`` (Kafka's ``AutoTopicCreationManager``, for a
        Metadata request with ``allow_auto_topic_creation`` and a Produce); True if
        the topic exists afterwards."""
        if self.partitions(topic) is not None:
            return True
        if not self.config["auto.create.topics.enable"]:
            return False
        self.create_topic(topic, int(self.config["num.partitions"]))  # type: ignore[arg-type]
        return True

    def delete_topic(self, topic: str) -> None:
        """Delete every partition of ``topic`` (renamed ``-delete``, removed after
        ``file.delete.delay.ms``, as Kafka) and forget its overrides."""
        for p in self.partitions(topic) or []:
            self.manager.delete(topic, p)
        if topic in self._overrides:
            try:
                self.set_topic_overrides(topic, {})
            except KafkaStorageError as exc:
                # the topic is gone: forget its overrides here all the same; the file's
                # stale entry is dropped by the next write or the next start
                _log.warning("kafkastore serve: %s; the overrides of the deleted topic %s "
                             "stay in the file until the next start", exc, topic)
                self.manager.set_topic_config(topic, None)
                self._overrides.pop(topic, None)

    def topic_id(self, topic: str) -> str | None:
        """The topic's id (Kafka's Uuid string, from ``partition.metadata``), or None."""
        for p in self.partitions(topic) or []:
            log = self.log(topic, p)
            if log is not None and log.topic_id:
                return log.topic_id
        return None

    # -- topic configs ----------------------------------------------------------------
    def log_defaults(self) -> LogConfig:
        """The broker's topic defaults (the ``log.*`` keys over Kafka's defaults)."""
        if self._log_defaults is None:
            self._log_defaults = self.config.log_defaults()
        return self._log_defaults

    def topic_overrides(self, topic: str) -> dict[str, object]:
        return dict(self._overrides.get(topic, {}))

    def set_topic_overrides(self, topic: str, overrides: Mapping[str, object]) -> None:
        """Replace ``topic``'s overrides ({} removes them): the manager applies them to
        the topic's logs, and the topic config file (if any) records them before this
        returns.

        Raises
        ------
        ConfigError
            A bad override (nothing changed).
        KafkaStorageError
            The file could not be written; the overrides in force are the old ones.
        """
        old = self._overrides.get(topic)
        self.manager.set_topic_config(topic, dict(overrides) or None)
        new = dict(self._overrides)
        if overrides:
            new[topic] = dict(overrides)
        else:
            new.pop(topic, None)
        if self._config_file is not None:
            try:
                self._config_file.write(new)
            except BaseException:
                self.manager.set_topic_config(topic, old)
                raise
        self._overrides = new

    def _forget_stale_overrides(self) -> None:
        """Drop the overrides of topics without partitions: a crash between creating a
        topic's overrides and its first partition, or between deleting its partitions
        and its overrides, leaves them; a topic created later under that name must not
        inherit them (Kafka removes a topic's configs with the topic)."""
        topics = self.topics()
        for topic in [t for t in self._overrides if t not in topics]:
            _log.info("kafkastore serve: dropping the config overrides of %s, a topic "
                      "with no partitions", topic)
            self.set_topic_overrides(topic, {})

    def advertised(self) -> tuple[str, int]:
        return (self.advertised_host or self.host, self.advertised_port or self.port)

    # -- appends and the fetches waiting for them -----------------------------------
    def notify_append(self, topic: str, partition: int) -> None:
        """Wake every fetch waiting in :meth:`wait_for_append` (they re-read and decide)."""
        event, self._appended = self._appended, None
        if event is not None:
            event.set()

    async def wait_for_append(self, timeout_s: float) -> bool:
        """Wait until the next append anywhere, or ``timeout_s``; True if woken by one.
        False at once, and for every fetch already waiting, once :meth:`stop_waits` was
        called: the fetch is then answered with what the log holds, as on its deadline."""
        if timeout_s <= 0 or self._stopping:
            return False
        if self._appended is None:
            self._appended = asyncio.Event()
        event = self._appended
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            return False
        return not self._stopping

    def stop_waits(self) -> None:
        """The server is stopping: end every fetch's wait for appends now, and refuse new
        waits. Kafka's broker drops its parked fetches when it closes the connections;
        answering them with what the log holds (an expired ``DelayedFetch``) lets each
        connection close after its answer, at once, instead of after the fetch's
        ``max_wait_ms`` or the server's ``shutdown_timeout_s``."""
        self._stopping = True
        event, self._appended = self._appended, None
        if event is not None:
            event.set()

