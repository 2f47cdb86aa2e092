"""A partition directory's topic id: Kafka's ``PartitionMetadataFile``.

File ``<partition dir>/partition.metadata``, UTF-8, exactly (no trailing newline)::

    version: 0
    topic_id: <Uuid>

where the Uuid is the 16-byte topic id in URL-safe base64 without padding (22
characters). Reading splits each of the first two lines on ``":\\s+"`` and requires two
tokens, the version 0 and a Uuid other than all zeros (Kafka's ``ZERO_UUID``), as
``PartitionMetadataReadBuffer`` does. Written with :func:`~kafkastore.checkpoint.
write_atomically` (``.tmp``, fsync, rename, directory fsync).

A new partition gets one (Kafka since 2.8 writes the file in every partition directory
it creates): :func:`random_uuid` draws a topic id as Kafka's ``Uuid.randomUuid`` does,
:func:`sibling_topic_id` finds the one the topic's other partitions already carry, so a
topic keeps one id across its partitions.

Thread-safety: stateless functions; the owning log writes it under its lock.
"""

from __future__ import annotations

import base64
import os
import re
import uuid

from kafkastore import _fileio
from kafkastore.checkpoint import write_atomically
from kafkastore.errors import (
    CorruptCheckpointError,
    InconsistentTopicIdError,
    InvalidPartitionDirError,
)
from kafkastore.log_dir import live_partition_dirs, parse_partition_dir_name
from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME, TopicPartition

__all__ = [
    "PARTITION_METADATA_FILENAME",
    "check_topic_id",
    "parse_topic_id",
    "read_topic_id",
    "write_topic_id",
    "encode_topic_id",
    "random_uuid",
    "sibling_topic_id",
    "topic_partition_of",
    "TOPIC_ID_FORMAT",
]

PARTITION_METADATA_FILENAME = "partition.metadata"
_VERSION = 0
_SPLIT = re.compile(r":\s+")
_ZERO = "AAAAAAAAAAAAAAAAAAAAAA"
# Kafka's Uuid.RESERVED: ZERO_UUID and ONE_UUID (METADATA_TOPIC_ID), never drawn
_RESERVED = frozenset({_ZERO, "AAAAAAAAAAAAAAAAAAAAAQ"})

#: What a topic id looks like, for messages and help texts.
TOPIC_ID_FORMAT = ("a Kafka Uuid: 22 characters of URL-safe base64 without padding, as "
                   "kafka-topics --describe or kafkastore describe show it")


def check_topic_id(topic_id: str) -> str:
    """``topic_id`` if it is a Uuid string Kafka writes (22 URL-safe base64 characters
    of 16 bytes, not all zeros); ValueError otherwise."""
    if not isinstance(topic_id, str) or not re.fullmatch(r"[A-Za-z0-9_-]{22}", topic_id):
        raise ValueError(f"topic id {topic_id!r} is not a Uuid (22 characters of URL-safe "
                         f"base64 without padding)")
    if len(base64.urlsafe_b64decode(topic_id + "==")) != 16 or topic_id == _ZERO:
        raise ValueError(f"topic id {topic_id!r} is not a valid topic id")
    return topic_id


def read_topic_id(directory: str) -> str | None:
    """The topic id in ``directory``'s ``partition.metadata``; None without the file.

    Raises :class:`~kafkastore.errors.CorruptCheckpointError` (path and line) for a file
    Kafka would not read."""
    path = os.path.join(directory, PARTITION_METADATA_FILENAME)
    data = _fileio.read_file(path)
    if data is None:
        return None
    return parse_topic_id(data, path)


def parse_topic_id(data: bytes, path: str) -> str:
    """The topic id in the bytes of a ``partition.metadata`` file (a copy read through
    the storage seam, a tiered upload's source); errors as :func:`read_topic_id`."""
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise CorruptCheckpointError("partition.metadata is not UTF-8", path=path,
                                     line=1) from None
    fields = []
    for number, name in ((1, "version"), (2, "topic_id")):
        parts = _SPLIT.split(lines[number - 1]) if len(lines) >= number else []
        if len(parts) != 2 or parts[0] != name:
            raise CorruptCheckpointError(
                f"Malformed line in partition.metadata: expected '{name}: <value>'",
                path=path, line=number)
        fields.append(parts[1])
    if fields[0] != str(_VERSION):
        raise CorruptCheckpointError(
            f"Unrecognized version of partition metadata file: {fields[0]}", path=path, line=1)
    try:
        return check_topic_id(fields[1].strip())
    except ValueError as exc:
        raise CorruptCheckpointError(str(exc), path=path, line=2) from None


def encode_topic_id(topic_id: str) -> bytes:
    """The bytes of a ``partition.metadata`` holding ``topic_id``, as Kafka's
    ``PartitionMetadata.encode`` writes them (no newline after the last line)."""
    check_topic_id(topic_id)
    return f"version: {_VERSION}\ntopic_id: {topic_id}".encode()


def random_uuid() -> str:
    """A new random Kafka Uuid (a topic id, a segment id), as Kafka's ``Uuid.randomUuid``
    (the controller's topic creation draws topic ids with it): a version-4 UUID's 16
    bytes, drawn again while they are reserved (all zeros, or 1: the metadata topic's
    id) or their string starts with ``-`` (it would read as an option on a command
    line)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if text not in _RESERVED and not text.startswith("-"):
            return text


def topic_partition_of(directory: str) -> TopicPartition | None:
    """The topic-partition a live partition directory's name gives (``orders-0``), None
    for any other name (a ``-delete``/``-future``/``-stray`` one, a name that is not
    ``<topic>-<partition>``, or the KRaft metadata log, which has no topic id)."""
    try:
        parsed = parse_partition_dir_name(os.path.basename(os.path.normpath(directory)))
    except InvalidPartitionDirError:
        return None
    tp = parsed.topic_partition
    if parsed.suffix or tp.topic == CLUSTER_METADATA_TOPIC_NAME:
        return None
    return tp


def sibling_topic_id(directory: str) -> str | None:
    """The topic id of the other partitions of ``directory``'s topic in the same log
    directory (their ``partition.metadata``), None if none has one or ``directory`` is not
    a partition directory (:func:`topic_partition_of`).

    Raises :class:`~kafkastore.errors.InconsistentTopicIdError` if they disagree (no id
    can be chosen for the topic) and :class:`~kafkastore.errors.CorruptCheckpointError`
    for a file Kafka would not read."""
    tp = topic_partition_of(directory)
    parent = os.path.dirname(os.path.normpath(directory))
    if tp is None or not os.path.isdir(parent):
        return None
    found: dict[str, str] = {}
    for other, path in live_partition_dirs(parent):
        if other.topic == tp.topic and other != tp:
            topic_id = read_topic_id(path)
            if topic_id is not None:
                found.setdefault(topic_id, path)
    if len(found) > 1:
        raise InconsistentTopicIdError(
            f"The partitions of topic {tp.topic} in {parent} carry different topic IDs "
            f"({', '.join(f'{i} in {p}' for i, p in sorted(found.items()))}): no topic ID "
            f"can be chosen for partition {tp.partition}", path=directory)
    return next(iter(found), None)


def write_topic_id(directory: str, topic_id: str) -> None:
    """Write ``partition.metadata`` with ``topic_id`` (Kafka's exact bytes)."""
    write_atomically(os.path.join(directory, PARTITION_METADATA_FILENAME),
                     encode_topic_id(topic_id))
