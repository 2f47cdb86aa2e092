"""Kafka's transaction coordinator over ``__transaction_state`` (issue 30: being
written)."""

from __future__ import annotations

from kafkastore.server.broker import Broker

__all__ = ["TransactionCoordinator"]


class TransactionCoordinator:
    """The transactional ids of a single-node broker, their state in
    ``__transaction_state``.

    Thread-safety: on the server's event loop only."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def start(self) -> None:
        """Load the transactions' state from ``__transaction_state`` and complete what
        was in flight (called once the server is bound, before the first request)."""

    async def ensure_state_topic(self) -> None:
        """Create ``__transaction_state`` if missing (Kafka creates it on the first
        FindCoordinator for a transactional id)."""

    def close(self) -> None:
        """Stop the timers (the logs are closed by the server)."""
