"""The log directory as a Spark read plans it: one listing, read-only views.

:func:`scan` opens the directory a read names (a path or a URI, with the reader's
``storage.*`` options) as a :class:`~kafkastore.log_view.ReadOnlyLogDir`: one listing
of the whole tree, then :class:`~kafkastore.log_view.ReadOnlyLog` views of the
subscribable partitions, whose index lookups and timestamp searches are
:mod:`kafkastore.index`'s and :mod:`kafkastore.log_view`'s (this module parses no file
itself). Nothing here changes a file, takes the log directory's lock or maps a file: a
Spark job may read a directory that a broker or a kafkastore ``Log`` is writing.
Positions taken from index files are hints, checked when a task reads (see
:func:`kafkastore.spark.reader.read_split`).
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkastore.errors import KafkaStoreError, StorageFileNotFoundError
from kafkastore.log_dir import live_partition_dirs
from kafkastore.log_view import ReadOnlyLog, ReadOnlyLogDir
from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME, TopicPartition

__all__ = ["scan", "list_partitions", "STAGING_DIR"]

#: The subdirectory of a partition directory where Spark write tasks stage batches.
#: Kafka and kafkastore load only files from a partition directory, so it is ignored.
STAGING_DIR = ".kafkastore-staging"


def list_partitions(root: str) -> Iterator[tuple[TopicPartition, str]]:
    """``(TopicPartition, path)`` of each live partition directory under ``root``, sorted.

    Directories being deleted (``-delete``), future and stray ones, the KRaft metadata
    log and anything that is not a partition directory are skipped, as Kafka's
    ``LogManager`` skips them.
    """
    try:
        for tp, path in live_partition_dirs(root):
            if tp.topic != CLUSTER_METADATA_TOPIC_NAME:
                yield tp, path
    except FileNotFoundError:
        raise KafkaStoreError(f"Log directory {root} does not exist", path=root) from None


def scan(path: str, storage_options=None) -> dict[TopicPartition, ReadOnlyLog]:
    """Views of every partition under the log directory ``path`` (a path or URI), from
    one listing, with the log start offsets of its ``log-start-offset-checkpoint``.
    A missing directory raises :class:`~kafkastore.errors.KafkaStoreError` naming it."""
    try:
        logdir = ReadOnlyLogDir.open(path, storage_options=storage_options)
    except StorageFileNotFoundError:
        raise StorageFileNotFoundError(f"Log directory {path} does not exist",
                                       path=path) from None
    return logdir.logs()
