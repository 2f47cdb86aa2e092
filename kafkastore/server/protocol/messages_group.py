"""Kafka's messages of the group coordinator's APIs (issue 30): FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete; described as :mod:`.messages` describes the others."""

from __future__ import annotations

from kafkastore.server.protocol.schema import F, Message  # noqa: F401

__all__ = ["MESSAGES", "SUPPORTED"]

#: The requests and responses described here (merged into messages.REQUESTS / RESPONSES).
MESSAGES: tuple[Message, ...] = ()
#: {api_key: (min_version, max_version)} the server answers (merged into SUPPORTED_APIS).
SUPPORTED: dict[int, tuple[int, int]] = {}
