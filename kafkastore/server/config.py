"""The broker's configuration: Kafka's ``server.properties`` keys, with Kafka's defaults.

(The first cut: the keys the handlers read. ``kafkastore serve`` reads a
``server.properties``-style file and ``--config key=value`` over it.)
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ServerConfig"]

#: Kafka's broker defaults for the keys the server reads (``KafkaConfig`` /
#: ``ServerLogConfigs``), under Kafka's names.
DEFAULTS: dict[str, object] = {
    "node.id": 1,
    "auto.create.topics.enable": True,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "message.max.bytes": 1048588,
    "socket.request.max.bytes": 104857600,
    "delete.topic.enable": True,
}


class ServerConfig:
    """The broker's settings: ``config["num.partitions"]``; unknown keys are kept (Kafka
    accepts and ignores them too), known ones converted to their default's type."""

    def __init__(self, overrides: Mapping[str, object] | None = None) -> None:
        self._values = dict(DEFAULTS)
        for key, value in (overrides or {}).items():
            default = DEFAULTS.get(key)
            if isinstance(default, bool) and isinstance(value, str):
                value = value.strip().lower() == "true"
            elif isinstance(default, int) and not isinstance(default, bool):
                value = int(value)
            self._values[key] = value

    def __getitem__(self, key: str) -> object:
        return self._values[key]

    def get(self, key: str, default: object = None) -> object:
        return self._values.get(key, default)

    def items(self):
        return self._values.items()
