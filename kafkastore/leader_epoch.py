"""Leader epochs of a partition: Kafka's ``LeaderEpochFileCache`` and its checkpoint.

File ``<partition dir>/leader-epoch-checkpoint`` (``LeaderEpochCheckpointFile``,
version 0): the checkpoint format of :class:`~kafkastore.checkpoint.CheckpointFile`
with one ``"<epoch> <start offset>"`` line per epoch, in epoch order::

    0
    2
    0 0
    3 1042

Each entry says that from ``start offset`` on the partition's leader was in ``epoch``
(the epoch stamped into a v2 batch's ``partitionLeaderEpoch``). Invariants (Kafka's):
epochs and start offsets both strictly increase; an entry is never reassigned; a new
entry removes the entries it contradicts (an equal or later epoch, an equal or later
start offset).

Thread-safety: the owning :class:`~kafkastore.log.Log` calls the mutating methods under
its lock; the lookups read an immutable snapshot (a tuple replaced on every change) and
take no lock.
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

from kafkastore import _fileio
from kafkastore.checkpoint import CheckpointFile, _parse_java_int

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILENAME",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "LeaderEpochFileCache",
]

LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class _EpochFormatter:
    """``LeaderEpochCheckpointFile.Formatter``: ``"<epoch> <startOffset>"``."""

    def to_string(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_string(self, line: str) -> EpochEntry | None:
        parts = line.split(" ")
        if len(parts) != 2:
            return None
        epoch = _parse_java_int(parts[0], 0, _INT32_MAX)
        offset = _parse_java_int(parts[1], 0, _INT64_MAX)
        if epoch is None or offset is None:
            raise ValueError("an epoch is an int >= 0 and a start offset a long >= 0")
        return EpochEntry(epoch, offset)


class LeaderEpochCheckpointFile(CheckpointFile[EpochEntry]):
    """The ``leader-epoch-checkpoint`` file of a partition directory (version 0)."""

    def __init__(self, directory: str) -> None:
        super().__init__(os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILENAME), 0,
                         _EpochFormatter())


class LeaderEpochFileCache:
    """Kafka's ``LeaderEpochFileCache``: epoch -> start offset, kept in a checkpoint.

    Every change is written to the checkpoint at once (atomically; Kafka writes the
    truncations in the background, which a reopen repairs with the same truncations,
    as :meth:`Log.open <kafkastore.log.Log.open>` does).

    Making the cache creates an empty (0-byte) checkpoint file when the directory has
    none, as Kafka's ``CheckpointFile`` constructor does (``Files.createFile``, no
    fsync): a new partition directory, or an old one opened without the file, holds
    ``leader-epoch-checkpoint`` from its first open on; an empty file reads as no
    entries. (The file is created here, by the log's own cache, not by
    :class:`~kafkastore.checkpoint.CheckpointFile`, whose readers never write.)
    """

    def __init__(self, directory: str) -> None:
        self.checkpoint = LeaderEpochCheckpointFile(directory)
        self._create_if_absent()
        self._entries: tuple[EpochEntry, ...] = ()
        for entry in self.checkpoint.read():
            self._assign(entry)

    def _create_if_absent(self) -> None:
        """Kafka: ``CheckpointFile.<init>`` -> ``Files.createFile`` (ignoring
        ``FileAlreadyExistsException``). O_EXCL: a planted symlink is never followed."""
        fs = _fileio.fs
        try:
            fd = fs.open(self.checkpoint.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        fs.close(fd)

    # -- reading --------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    def latest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    def latest_epoch(self) -> int | None:
        entries = self._entries
        return entries[-1].epoch if entries else None

    def earliest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0] if entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (None below the first entry)."""
        entries = self._entries
        i = bisect.bisect_right([e.start_offset for e in entries], offset)
        return entries[i - 1].epoch if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: ``(epoch, end offset)`` for a follower's
        OffsetsForLeaderEpoch, ``(-1, -1)`` when undefined."""
        entries = self._entries
        if requested_epoch == -1 or not entries:
            return -1, -1
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(entries):
            return -1, -1
        if higher == 0:
            return requested_epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    # -- changing -------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if that is news (a new epoch,
        or the latest one starting earlier); whether the cache changed."""
        if self._assign(EpochEntry(epoch, start_offset)):
            self._write()
            return True
        return False

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        entries = self._entries
        if entries and entries[-1].epoch == entry.epoch \
                and entry.start_offset >= entries[-1].start_offset:
            return False
        kept = list(entries)
        # maybeTruncateNonMonotonicEntries: drop from the end what the new entry contradicts
        while kept and (kept[-1].epoch >= entry.epoch
                        or kept[-1].start_offset >= entry.start_offset):
            kept.pop()
        kept.append(entry)
        self._entries = tuple(kept)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry starting at or after ``end_offset`` (a truncated log)."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return
        self._entries = tuple(e for e in entries if e.start_offset < end_offset)
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Remove the entries wholly below ``start_offset``: the last entry starting at
        or before it is kept, moved to start there (a new log start offset)."""
        entries = self._entries
        removed = [e for e in entries if e.start_offset <= start_offset]
        if not removed:
            return
        first = EpochEntry(removed[-1].epoch, start_offset)
        self._entries = (first,) + tuple(e for e in entries if e.start_offset > start_offset)
        if first != removed[-1] or len(removed) > 1:
            self._write()

    def clear_and_flush(self) -> None:
        """Kafka's ``clearAndFlush``: remove every entry and write the checkpoint, an empty
        one (``0\\n0\\n``) included (``truncateFullyAndStartAt``, a log emptied on open,
        a follower's legacy append)."""
        self._entries = ()
        self._write()

    def _write(self) -> None:
        self.checkpoint.write(self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({list(self._entries)})"
