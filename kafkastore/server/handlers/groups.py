"""The groups APIs (issue 30): their handlers, over :class:`~kafkastore.server.group_coordinator.GroupCoordinator`."""

from __future__ import annotations

__all__ = ["HANDLERS"]

HANDLERS: dict = {}
