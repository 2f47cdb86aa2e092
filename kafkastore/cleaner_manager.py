"""Which logs, and which part of each, the cleaner may clean: the calculations of Kafka's
``LogCleanerManager`` (``cleanableOffsets``, ``maxCompactionDelay``, the name of the
``cleaner-offset-checkpoint`` file) and Kafka's ``LogToClean``.

A log's cleanable range is ``[first dirty offset, first uncleanable offset)``: from the
cleaner checkpoint (or the log start offset) up to the lowest of the active segment's
base offset, the first offset of a transaction still undecided (Kafka's last stable
offset), and the first segment younger than ``min.compaction.lag.ms``
(:func:`cleanable_offsets`); :class:`LogToClean` then rounds the end down to a segment
boundary and sizes the clean and dirty parts, which rank the logs by dirty ratio.
A round also needs the log's producer state: the first offset of an undecided
transaction (``Log.first_unstable_offset``, when the range is chosen) and, as each group
of segments is cleaned, the last batch of every producer the state holds
(:func:`last_records_of_active_producers`: kept, possibly empty, until the log's own
expiration forgets the producer).

The state of cleaning (checkpoints, logs in progress, aborted and uncleanable ones) is
kept by :class:`~kafkastore.cleaner.LogCleaner`. Everything here reads the log as any
reader does; the producer state is read under the log's lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kafkastore.log import Log
from kafkastore.topic import TopicPartition

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "LogToClean",
    "cleanable_offsets",
    "max_compaction_delay",
]

#: Per log directory: ``topic partition offset`` lines, the first dirty offset of each
#: compacted partition (Kafka's ``LogCleanerManager.offsetCheckpointFile``).
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

_LONG_MAX = (1 << 63) - 1


class _LastRecord(NamedTuple):
    """Kafka's ``LastRecord``: a producer's last data offset (None if it has none, e.g.
    only a marker bumped its epoch) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


def last_records_of_active_producers(log: Log) -> dict[int, _LastRecord]:
    """Kafka's ``UnifiedLog.lastRecordsOfActiveProducers``: every producer the log's
    producer state holds now, whatever its idle time (only the log's own expiration,
    ``Log.remove_expired_producers`` with its ``producer.id.expiration.ms``, forgets
    one), with its last data offset; the cleaner keeps each one's last batch."""
    with log.lock:
        return {pid: _LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None,
                                 e.producer_epoch)
                for pid, e in log.producer_state_manager.producers.items()}


def cleanable_offsets(log: Log, last_clean_offset: int | None, now_ms: int,
                      first_unstable_offset: int | None = None) -> tuple[int, int, bool]:
    """Kafka's ``LogCleanerManager.cleanableOffsets``: ``(first dirty offset, first
    uncleanable offset, whether the checkpoint must be rewritten)``.

    A checkpoint below the log start offset or past the log end offset is replaced by the
    log start offset. The uncleanable part begins at the lowest of: the first offset of
    an undecided transaction (else the log end offset), the active segment's base offset,
    and the base offset of the first dirty segment holding a record younger than
    ``min.compaction.lag.ms``.
    """
    start, end = log.log_start_offset, log.log_end_offset
    if last_clean_offset is None:
        first_dirty, reset = start, False
    elif last_clean_offset < start or last_clean_offset > end:
        first_dirty, reset = start, True
    else:
        first_dirty, reset = last_clean_offset, False
    bounds = [end if first_unstable_offset is None else first_unstable_offset,
              log.active_segment.base_offset]
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in log.non_active_segments_from(first_dirty):
            if seg.largest_timestamp() > now_ms - lag:
                bounds.append(seg.base_offset)
                break
    return first_dirty, max(first_dirty, min(bounds)), reset


@dataclass
class LogToClean:
    """A compacted log and its sections (Kafka's ``LogToClean``)."""

    tp: TopicPartition | None
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    needs_compaction_now: bool = False
    clean_bytes: int = 0
    cleanable_bytes: int = 0

    def __post_init__(self) -> None:
        log = self.log
        # Kafka's calculateCleanableBytes: the round stops at a segment boundary
        non_active = log.non_active_segments_from(self.first_uncleanable_offset)
        boundary = (non_active[0] if non_active else log.active_segment).base_offset
        self.first_uncleanable_offset = boundary
        self.cleanable_bytes = sum(seg.size for seg in log.segments_between(
            min(self.first_dirty_offset, boundary), boundary))
        self.clean_bytes = sum(seg.size for seg in log.segments_between(
            -1, self.first_dirty_offset))   # Kafka's logSegments(-1, firstDirtyOffset)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty record is (0 if not)."""
    stamps = [ts for ts in (seg.get_first_batch_timestamp()
                            for seg in log.non_active_segments_from(first_dirty_offset))
              if ts > 0]
    earliest = min(stamps) if stamps else _LONG_MAX
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0
