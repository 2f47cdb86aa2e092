"""Kafka's group coordinator over ``__consumer_offsets`` (issue 30: being written)."""

from __future__ import annotations

from kafkastore.internal_topics import GROUP_METADATA_TOPIC
from kafkastore.server.broker import Broker

__all__ = ["GroupCoordinator"]


class GroupCoordinator:
    """The consumer groups of a single-node broker, their state in ``__consumer_offsets``.

    Thread-safety: on the server's event loop only."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def start(self) -> None:
        """Load the groups' state from ``__consumer_offsets`` (called once the server is
        bound, before the first request is read)."""

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if missing (Kafka creates it on the first
        FindCoordinator for a group)."""
        broker = self.broker
        if broker.partitions(GROUP_METADATA_TOPIC) is not None:
            return
        # the topic's configs as Kafka's GroupCoordinator.groupMetadataTopicConfigs:
        # compacted, its segment size, the producer's compression kept
        broker.create_topic(GROUP_METADATA_TOPIC,
                            int(broker.config["offsets.topic.num.partitions"]),
                            configs={"cleanup.policy": "compact",
                                     "segment.bytes": int(
                                         broker.config["offsets.topic.segment.bytes"]),
                                     "compression.type": "producer"})

    def close(self) -> None:
        """Stop the timers (the logs are closed by the server)."""

    def on_txn_marker(self, topic: str, partition: int, producer_id: int,
                      producer_epoch: int, committed: bool) -> None:
        """A transaction marker was written to ``topic``/``partition``: the pending
        transactional offsets of ``producer_id`` there become committed (or are dropped):
        Kafka's ``GroupCoordinator.onTransactionCompleted``."""
