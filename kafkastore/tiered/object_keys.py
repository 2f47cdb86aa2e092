"""Where a remote segment's objects are: the names of both layouts.

Aiven's plugin (``ObjectKeyFactory``), one object per suffix under the key prefix
(``key.prefix``, prepended as it is: give the trailing ``/`` yourself)::

    <prefix><topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>.log
                                                                       .indexes
                                                                       .rsm-manifest

Kafka's ``LocalTieredStorage`` (``RemoteTopicPartitionDirectory``,
``RemoteLogSegmentFileset``), one directory per partition under the storage root (the
``kafka-tiered-storage`` directory)::

    <topic>-<partition>-<topic id>/<20-digit start offset>-<segment id>.log
        .index .timeindex .txnindex (optional) .leader_epoch_checkpoint .snapshot

A segment id is a Kafka ``Uuid`` as ``toString`` writes it: 16 bytes in URL-safe base64
without padding (22 characters); ``Uuid.randomUuid`` never gives the reserved ids (all
zeros, 1) nor one starting with ``-``.

Plain functions and values: thread-safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkastore.partition_metadata import random_uuid

__all__ = [
    "AIVEN_SUFFIXES",
    "LOCAL_SUFFIXES",
    "LOCAL_OPTIONAL_SUFFIXES",
    "RemoteSegmentKey",
    "aiven_object_key",
    "local_tiered_file",
    "new_segment_id",
    "parse_aiven_object_key",
    "parse_local_tiered_file",
]

#: Aiven's object suffixes, in upload order (the manifest last).
AIVEN_SUFFIXES = ("log", "indexes", "rsm-manifest")
#: LocalTieredStorage's file suffixes, in the order it copies them.
LOCAL_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".leader_epoch_checkpoint",
                  ".snapshot")
LOCAL_OPTIONAL_SUFFIXES = (".txnindex",)

_UUID = r"[A-Za-z0-9_-]{22}"
_AIVEN = re.compile(r"(?P<topic>[A-Za-z0-9._-]+)-(?P<topic_id>" + _UUID + r")/"
                    r"(?P<partition>\d+)/(?P<offset>\d{20})-(?P<id>" + _UUID + r")\."
                    r"(?P<suffix>log|indexes|rsm-manifest)")
_LOCAL_DIR = re.compile(r"(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)-(?P<topic_id>"
                        + _UUID + r")")
_LOCAL_FILE = re.compile(r"(?P<offset>\d+)-(?P<id>" + _UUID + r")(?P<suffix>\.[a-z_]+)")


@dataclass(frozen=True)
class RemoteSegmentKey:
    """What names one uploaded segment (``RemoteLogSegmentId`` plus its start offset)."""

    topic: str
    topic_id: str
    partition: int
    start_offset: int
    segment_id: str


def aiven_object_key(prefix: str, key: RemoteSegmentKey, suffix: str) -> str:
    """The object key of ``key``'s ``suffix`` object (``log``, ``indexes`` or
    ``rsm-manifest``)."""
    if suffix not in AIVEN_SUFFIXES:
        raise ValueError(f"unknown object suffix {suffix!r} ({', '.join(AIVEN_SUFFIXES)})")
    return (f"{prefix or ''}{key.topic}-{key.topic_id}/{key.partition}/"
            f"{key.start_offset:020d}-{key.segment_id}.{suffix}")


def local_tiered_file(key: RemoteSegmentKey, suffix: str) -> str:
    """The path, under the storage root, of ``key``'s ``suffix`` file (``.log`` ...)."""
    if suffix not in LOCAL_SUFFIXES:
        raise ValueError(f"unknown file suffix {suffix!r} ({', '.join(LOCAL_SUFFIXES)})")
    return (f"{key.topic}-{key.partition}-{key.topic_id}/"
            f"{key.start_offset:020d}-{key.segment_id}{suffix}")


def parse_aiven_object_key(relative: str) -> tuple[RemoteSegmentKey, str] | None:
    """``(key, suffix)`` of an object key with the prefix removed; None if it is not one
    of the plugin's."""
    m = _AIVEN.fullmatch(relative)
    if m is None:
        return None
    return (RemoteSegmentKey(m["topic"], m["topic_id"], int(m["partition"]),
                             int(m["offset"]), m["id"]), m["suffix"])


def parse_local_tiered_file(dir_name: str, file_name: str
                            ) -> tuple[RemoteSegmentKey, str] | None:
    """``(key, suffix)`` of a LocalTieredStorage file in its partition directory; None if
    either name is not one LocalTieredStorage writes."""
    d = _LOCAL_DIR.fullmatch(dir_name)
    f = _LOCAL_FILE.fullmatch(file_name)
    if d is None or f is None or f["suffix"] not in LOCAL_SUFFIXES:
        return None
    return (RemoteSegmentKey(d["topic"], d["topic_id"], int(d["partition"]), int(f["offset"]),
                             f["id"]), f["suffix"])


def new_segment_id() -> str:
    """A new segment id as Kafka's ``Uuid.randomUuid().toString()``."""
    return random_uuid()
