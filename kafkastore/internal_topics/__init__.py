"""Kafka's internal topics: ``__consumer_offsets`` and ``__transaction_state``.

Kafka's two coordinators keep their state as records of two compacted topics, in record
formats of their own (the key's first two bytes are its schema version, which tells the
kinds of record apart; the value's are its version): :mod:`.group_records` for the group
coordinator's (``OffsetCommitKey`` / ``OffsetCommitValue``, ``GroupMetadataKey`` /
``GroupMetadataValue``), :mod:`.txn_records` for the transaction coordinator's
(``TransactionLogKey`` / ``TransactionLogValue``). A tombstone (null value) deletes a key.

Which partition holds a group's or a transactional id's records is Kafka's
``Utils.abs(id.hashCode()) % partitions`` (:func:`partition_for`): Java's ``String.hashCode``
over the id's UTF-16 code units, ``Utils.abs`` being ``n & 0x7fffffff`` (not
``Math.abs``), so a directory written here and opened by Kafka finds each group and
transaction where Kafka looks for it.

Nothing here touches a log: these are the formats, used by the coordinators
(``kafkastore.server``) and by ``dump-log --offsets-decoder`` /
``--transaction-log-decoder`` (:mod:`kafkastore.dump`).
"""

from __future__ import annotations

__all__ = ["GROUP_METADATA_TOPIC", "TRANSACTION_STATE_TOPIC", "java_string_hash",
           "partition_for"]

#: Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME``.
GROUP_METADATA_TOPIC = "__consumer_offsets"
#: Kafka's ``Topic.TRANSACTION_STATE_TOPIC_NAME``.
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset((GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC))


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s``: ``s[0]*31^(n-1) + ... + s[n-1]`` over its
    UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of an internal topic that holds ``key``'s records (a group id or a
    transactional id): Kafka's ``Utils.abs(key.hashCode()) % partitions``
    (``GroupCoordinatorService.partitionFor``, ``TransactionStateManager.partitionFor``)."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    return (java_string_hash(key) & 0x7FFFFFFF) % partitions
