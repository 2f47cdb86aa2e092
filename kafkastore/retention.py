"""Retention: removing the oldest segments of a log by Kafka's rules (kafka-storage.md §6).

One pass, :func:`delete_old_segments`, is Kafka's ``UnifiedLog.deleteOldSegments``:

1. **log start offset**: segments wholly below the log start offset (moved by
   :meth:`~kafkastore.log.Log.delete_records`) go, whatever the cleanup policy;
2. **size** (``retention.bytes``, negative for unlimited): the oldest segments go while
   the log stays at or above the limit without them, so it may end above the limit by
   less than one segment;
3. **time** (``retention.ms``, negative for unlimited): segments whose largest record
   timestamp (or, with no timestamps, the ``.log`` file's modification time) is more
   than ``retention.ms`` old go.

Passes 2 and 3 run only when ``cleanup.policy`` contains ``delete``. Each pass walks
the segments from the oldest and stops at the first one it keeps, so only a prefix of
the log is ever removed. The active segment can be selected when it is not empty; the
log then rolls first, so that an empty active segment at the log end offset remains.
Removed segments are renamed ``.deleted`` and deleted ``file.delete.delay.ms`` later by
:meth:`~kafkastore.log.Log.delete_pending_segments` (the manager's scheduler calls it).

A reader already holding a slice of a removed segment finishes its read: the segment's
files are only deleted after the delay. A read that starts after the log start offset
moved past its offset gets :class:`~kafkastore.errors.OffsetOutOfRangeError`.

Thread-safety: each pass holds the log's lock from choosing the segments to removing
them, so appends, rolls and truncations see the log before or after the pass, never in
between. Nothing here starts a thread; :mod:`kafkastore.manager` schedules the passes.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkastore.log import Log
from kafkastore.segment import LogSegment

__all__ = [
    "delete_old_segments",
    "delete_log_start_offset_breached_segments",
    "delete_retention_size_breached_segments",
    "delete_retention_ms_breached_segments",
    "deletable_segments",
]

#: ``predicate(segment, next_segment_or_None) -> bool``: Kafka's ``shouldDelete``.
Predicate = Callable[[LogSegment, "LogSegment | None"], bool]


def deletable_segments(log: Log, predicate: Predicate,
                       high_watermark: int | None = None) -> list[LogSegment]:
    """The longest prefix of ``log``'s segments that ``predicate`` accepts.

    Kafka's ``deletableSegments``: a segment qualifies only if every offset in it is
    below ``high_watermark`` (default: the log end offset, as a standalone store has no
    replicas to wait for), and the active segment only if it is not empty.
    """
    hw = log.log_end_offset if high_watermark is None else high_watermark
    segments = log.segments
    out = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        if hw < upper or not predicate(segment, nxt):
            break
        if nxt is None and segment.size == 0:
            break
        out.append(segment)
    return out


def _delete(log: Log, predicate: Predicate) -> int:
    with log.lock:
        if log.closed:
            return 0
        doomed = deletable_segments(log, predicate)
        if not doomed:
            return 0
        if doomed[-1] is log.active_segment:
            # Kafka's deleteSegments: every segment is expired, so roll first; the new
            # empty active segment at the log end offset stays
            log.roll()
        return log.delete_segments(doomed)


def delete_log_start_offset_breached_segments(log: Log) -> int:
    """Remove the segments that lie wholly below the log start offset."""
    start = log.log_start_offset
    return _delete(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= start)


def delete_retention_size_breached_segments(log: Log) -> int:
    """Remove the oldest segments while the log stays at or above ``retention.bytes``."""
    limit = log.config.retention_bytes
    if limit < 0:
        return 0
    with log.lock:
        excess = log.size - limit
        # Kafka skips the pass only when size < retention.bytes: at equality its excess of
        # 0 still takes leading empty segments (UnifiedLog.deleteRetentionSizeBreachedSegments)
        if excess < 0:
            return 0

        def over(seg: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal excess
            if excess - seg.size >= 0:
                excess -= seg.size
                return True
            return False

        return _delete(log, over)


def delete_retention_ms_breached_segments(log: Log, now_ms: int) -> int:
    """Remove the oldest segments whose largest timestamp is over ``retention.ms`` old."""
    retention = log.config.retention_ms
    if retention < 0:
        return 0
    return _delete(log, lambda seg, nxt: now_ms - seg.largest_timestamp() > retention)


def delete_old_segments(log: Log, now_ms: int | None = None) -> int:
    """One retention pass over ``log`` (Kafka's ``deleteOldSegments``); segments removed.

    ``now_ms`` defaults to the log's clock.
    """
    removed = delete_log_start_offset_breached_segments(log)
    if log.config.delete:
        removed += delete_retention_size_breached_segments(log)
        now = log.time_ms() if now_ms is None else now_ms
        removed += delete_retention_ms_breached_segments(log, now)
    return removed
