"""The transactions APIs (issue 30): their handlers, over :class:`~kafkastore.server.transaction_coordinator.TransactionCoordinator`."""

from __future__ import annotations

__all__ = ["HANDLERS"]

HANDLERS: dict = {}
