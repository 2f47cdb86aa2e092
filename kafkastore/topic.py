"""Topic names and topic-partitions, with Kafka's rules for both.

Kafka's ``Topic.validate`` (``clients/.../common/internals/Topic.java``) decides
which topic names exist: only ASCII letters, digits, ``.``, ``_`` and ``-``, at
most :data:`MAX_NAME_LENGTH` characters, and neither ``.`` nor ``..``. A topic
name becomes a directory name (``<topic>-<partition>``), so these rules are
also what keeps a name from walking out of its log directory: ``/``, ``\\``,
NUL and every non-ASCII look-alike are outside the legal alphabet, and ``.``
and ``..`` are refused by name.

This module is a leaf above :mod:`kafkastore.errors`: the checkpoint files and
the log-directory helpers build on it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kafkastore.errors import InvalidTopicError

__all__ = [
    "CLUSTER_METADATA_TOPIC_NAME",
    "GROUP_METADATA_TOPIC_NAME",
    "LEGAL_CHARS",
    "MAX_NAME_LENGTH",
    "MAX_PARTITION",
    "SHARE_GROUP_STATE_TOPIC_NAME",
    "TRANSACTION_STATE_TOPIC_NAME",
    "TopicPartition",
    "has_collision",
    "is_internal_topic",
    "is_valid_topic",
    "validate_topic",
]

#: Longest legal topic name (``Topic.MAX_NAME_LENGTH``). 249 leaves room for
#: ``-<partition>`` within the 255-byte file name limit of most file systems.
MAX_NAME_LENGTH = 249
#: The legal characters, as Kafka spells them (``Topic.LEGAL_CHARS``).
LEGAL_CHARS = "[a-zA-Z0-9._-]"

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
#: The KRaft metadata log; ``LogManager.loadLogs`` skips its directory.
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"
_INTERNAL_TOPICS = frozenset(
    {GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME})

#: Largest partition number: partitions are Java ints and never negative.
MAX_PARTITION = 2**31 - 1

# re.ASCII is not needed: the class lists ASCII characters only. fullmatch, not
# match with "$", because "$" also matches before a final "\n".
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class TopicPartition(NamedTuple):
    """A topic name and a partition number (Kafka's ``TopicPartition``).

    A plain value: constructing one checks nothing, so a checkpoint reader or a
    directory parser can build one and then say precisely what is wrong with it.
    ``str()`` gives Kafka's ``toString``, ``<topic>-<partition>``, which is also
    the live partition directory name.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def _reason_invalid(name: object) -> str | None:
    """Why ``name`` is not a legal topic name, in Kafka's words; None if it is legal."""
    if not isinstance(name, str):
        return f"a topic name must be a str, not {type(name).__name__}"
    if not name:
        return "the empty string is not allowed"
    if name == ".":
        return "'.' is not allowed"
    if name == "..":
        return "'..' is not allowed"
    # Java measures String.length() in UTF-16 code units; only names that are
    # illegal anyway can differ, but the message then matches Kafka's.
    if len(name.encode("utf-16-le", "surrogatepass")) // 2 > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if _LEGAL_NAME.fullmatch(name) is None:
        return (f"'{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def validate_topic(name: str) -> str:
    """Check ``name`` by Kafka's ``Topic.validate``; return it unchanged.

    Raises
    ------
    InvalidTopicError
        With Kafka's message, e.g. ``Topic name is invalid: '..' is not
        allowed``; ``topic`` holds the name.
    """
    reason = _reason_invalid(name)
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}", topic=name)
    return name


def is_valid_topic(name: object) -> bool:
    """True if ``name`` is a legal topic name (``Topic.isValid``)."""
    return _reason_invalid(name) is None


def is_internal_topic(name: str) -> bool:
    """True for Kafka's internal topics (``Topic.isInternal``)."""
    return name in _INTERNAL_TOPICS


def has_collision(topic_a: str, topic_b: str) -> bool:
    """True if the names differ only by ``.`` against ``_`` (``Topic.hasCollision``).

    Kafka refuses to create a topic that collides with an existing one because
    their metric names would be equal; both names are legal on their own.
    """
    return topic_a.replace(".", "_") == topic_b.replace(".", "_")
