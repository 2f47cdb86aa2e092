"""What the request handlers share: the log manager, the config, the topics, and the
append notifications that long-polling fetches wait on."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping

from kafkastore.log import Log
from kafkastore.manager import LogManager
from kafkastore.server.config import ServerConfig

__all__ = ["Broker"]


class Broker:
    """A single-node broker's shared state, used from the server's event loop only.

    Not thread-safe: every handler runs on the one event loop (the logs underneath are
    thread-safe, so the manager's background tasks may run beside it).

    ``extras`` is per-broker state a handler module owns (fetch sessions, say), under the
    module's name.
    """

    def __init__(self, manager: LogManager, config: ServerConfig | None = None, *,
                 host: str = "127.0.0.1", port: int = 9092,
                 cluster_id: str | None = None) -> None:
        self.manager = manager
        self.config = config if config is not None else ServerConfig()
        self.node_id = int(self.config["node.id"])
        self.cluster_id = cluster_id or _random_cluster_id()
        self.host = host
        self.port = port
        self.extras: dict[str, object] = {}
        self._appended: asyncio.Event | None = None

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
            self.manager.set_topic_config(topic, dict(configs))
        for p in range(num_partitions):
            self.manager.get_or_create(topic, p)

    # -- appends and the fetches waiting for them -----------------------------------
    def notify_append(self, topic: str, partition: int) -> None:
        """Wake every fetch waiting in :meth:`wait_for_append` (they re-read and decide)."""
        event, self._appended = self._appended, None
        if event is not None:
            event.set()

    async def wait_for_append(self, timeout_s: float) -> bool:
        """Wait until the next append anywhere, or ``timeout_s``; True if woken by one."""
        if timeout_s <= 0:
            return False
        if self._appended is None:
            self._appended = asyncio.Event()
        event = self._appended
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
            return True
        except (asyncio.TimeoutError, TimeoutError):
            return False


def _random_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: URL-safe base64 of 16 bytes, unpadded."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
