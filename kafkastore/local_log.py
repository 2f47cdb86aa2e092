"""The segments of one partition on local disk: Kafka's ``LocalLog``.

:class:`LocalLog` is the lower half of the log layer: the segment list and the
directory, roll, flush up to an offset (the recovery point), ``truncateTo``'s and
``truncateFullyAndStartAt``'s segment work, deleting and replacing segments (with the
delayed deletion of ``.deleted`` files), the raw read across segments and the aborted
transactions of a fetch. :class:`~kafkastore.log.Log` (Kafka's ``UnifiedLog``) owns one
and adds validation and offset assignment, producer state, transactions and the last
stable offset, leader epochs and the public read/append API; the loader
(:mod:`kafkastore.log_loader`) fills one in when a log opens.

Unlike Kafka's ``LocalLog`` it also holds the log start offset (Kafka keeps it in
``UnifiedLog``): the lock-free read must see it after the segment list it reads, and the
segment work of a truncation sets it together with that list.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterable

from kafkastore import _fileio
from kafkastore._kernels import entry_walk
from kafkastore.config import LogConfig
from kafkastore.errors import KafkaStoreError, OffsetOutOfRangeError
from kafkastore.file_records import LogSlice
from kafkastore.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    READ_PLAN,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    LogSegment,
    TimestampAndOffset,
    max_timestamp_record,
    segment_file,
)
from kafkastore.txn_index import AbortedTxn, IndexChanges

__all__ = ["CLEAN_SHUTDOWN_FILE", "RACE_ERRORS", "LocalLog", "SegmentGone"]

logger = logging.getLogger("kafkastore.log")

_read_at = entry_walk.read_at

#: Kafka's clean-shutdown marker name. Kafka keeps it per log *directory*;
#: a :class:`~kafkastore.log.Log` opened on its own keeps it in the partition directory,
#: where Kafka's loader ignores it.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class SegmentGone(Exception):
    """A lock-free read found its segment closed under it (see :meth:`LocalLog.read`)."""


#: What a lock-free read can meet when a roll trims, or a delayed deletion closes, the
#: segment it is reading: a closed index or file (KafkaStoreError, IndexClosedError), a
#: released view or map (ValueError, BufferError), a closed or deleted file (OSError).
RACE_ERRORS = (SegmentGone, KafkaStoreError, OSError, ValueError, BufferError)


class LocalLog:
    """The segments of a partition directory, oldest first, and the offsets they bound.

    Fields (plain attributes, read by the owning :class:`~kafkastore.log.Log` on its hot
    paths without a call): ``segments`` (a tuple, replaced whole: copy-on-write) and
    ``bases`` (their base offsets, for bisection), ``next_offset`` (the log end offset),
    ``log_start_offset``, ``recovery_point`` (every offset below it is fsynced),
    ``last_flush_ms``, ``pending_deletes`` (``(due ms, segment)`` renamed ``.deleted``,
    deleted once due) and ``failed`` (the first failed write to the files, else None: an
    fsync is never retried, so the log takes no more writes).

    Invariants: segments are ordered by base offset, ``bases`` matches them, the last
    one is the active segment and, once loaded, there is always at least one;
    ``log_start_offset <= next_offset``; ``recovery_point <= next_offset``.

    Thread-safety: none of its own. Every mutation runs under the owning log's lock
    (:attr:`~kafkastore.log.Log.lock`). :meth:`read` and the lookups take no lock: they
    read ``segments`` before ``bases``, the end offset and the start offset, and the
    mutations write them so that a reader that sees a new segment list sees the offsets
    that go with it (the start offset moves before the list drops a prefix).
    """

    __slots__ = ("dir", "config", "time_ms", "segments", "bases", "next_offset",
                 "log_start_offset", "recovery_point", "last_flush_ms", "pending_deletes",
                 "failed", "_txn_segments", "_txn_changes")

    def __init__(self, directory: str, config: LogConfig, time_ms: Callable[[], int]) -> None:
        self.dir = directory
        self.config = config
        self.time_ms = time_ms
        self.segments: tuple[LogSegment, ...] = ()
        self.bases: tuple[int, ...] = ()
        self.next_offset = 0
        self.log_start_offset = 0
        self.recovery_point = 0
        self.last_flush_ms = time_ms()
        self.pending_deletes: list[tuple[int, LogSegment]] = []
        self.failed: BaseException | None = None
        # (segments, the count of _txn_changes, the lowest position looked at, the
        # positions from it of the segments whose .txnindex holds an entry): see
        # _with_txn_entries
        self._txn_segments: tuple | None = None
        # the changes of this log's .txnindex files (set_segments gives it to each):
        # another log's never invalidate the cache above
        self._txn_changes = IndexChanges()

    # -- the segment list ----------------------------------------------------------------

    def new_segment(self, base_offset: int) -> LogSegment:
        """A new empty segment at ``base_offset`` (leftover files of that name go first)."""
        for kind in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
            path = segment_file(self.dir, base_offset, kind)
            if os.path.exists(path):
                logger.warning("Newly rolled segment file %s already exists; deleting it first",
                               path)
        LogSegment.delete_files_if_exist(self.dir, base_offset)
        segment = LogSegment.open(self.dir, base_offset, self.config,
                                  init_file_size=self.config.segment_bytes
                                  if self.config.preallocate else 0,
                                  preallocate=self.config.preallocate, time_ms=self.time_ms)
        # (deleted above; the new index object is nobody else's yet)
        segment.txn_index.known_size(0, segment.txn_index.change_mark())
        return segment

    def set_segments(self, segments: Iterable[LogSegment]) -> None:
        """Replace the segment list (sorted here) in one step."""
        ordered = tuple(sorted(segments, key=lambda s: s.base_offset))
        changes = self._txn_changes
        for seg in ordered:   # (before the list is seen: see _with_txn_entries)
            seg.txn_index.changes = changes
        self.bases = tuple(s.base_offset for s in ordered)
        self.segments = ordered

    def segments_between(self, start: int, end: int) -> list[LogSegment]:
        """Kafka's ``logSegments(from, to)``: the segments holding offsets of
        ``[start, end)``, from the one holding ``start`` to the last based below ``end``
        (empty when ``end <= start``)."""
        if end <= start:
            return []
        segments, bases = self.segments, self.bases
        i = max(0, bisect.bisect_right(bases, start) - 1)
        j = bisect.bisect_left(bases, end)
        return list(segments[i:j])

    def non_active_segments_from(self, offset: int) -> list[LogSegment]:
        """Kafka's ``nonActiveLogSegmentsFrom``: from the segment holding ``offset`` up to,
        not including, the active segment."""
        segments, bases = self.segments, self.bases
        i = max(0, bisect.bisect_right(bases, offset) - 1)
        return list(segments[i:-1])

    # -- roll, flush -----------------------------------------------------------------------

    def roll(self, expected_next_offset: int | None) -> LogSegment:
        """Kafka's ``LocalLog.roll``: a new active segment at ``max(expected_next_offset,
        next_offset)``; an empty active segment at that offset is replaced."""
        new_offset = max(expected_next_offset or 0, self.next_offset)
        active = self.segments[-1]
        segments = list(self.segments)
        if new_offset == active.base_offset:
            if active.size != 0:
                raise KafkaStoreError(
                    f"Trying to roll a new log segment for {self.dir} with start offset "
                    f"{new_offset} = max(provided offset = {expected_next_offset}, LEO = "
                    f"{self.next_offset}) while it already exists and is active with size "
                    f"{active.size}.", path=self.dir)
            # an empty active segment is replaced (KAFKA-6388: its index may look full)
            segments.pop()
            self.schedule_delete([active])
        elif new_offset < active.base_offset:
            raise KafkaStoreError(
                f"Trying to roll a new log segment for {self.dir} with start offset "
                f"{new_offset} lower than start offset of the active segment {active!r}",
                path=self.dir)
        else:
            active.on_become_inactive_segment()
        segment = self.new_segment(new_offset)
        segments.append(segment)
        self.set_segments(segments)
        return segment

    def flush(self, offset: int, now_ms: int | None = None) -> None:
        """fsync the segments holding offsets from the recovery point up to ``offset``
        (and the directory, if one of them is new since), then move the recovery point."""
        if offset <= self.recovery_point:
            return
        old = self.recovery_point
        new_dir_entries = False
        try:
            for seg in self.segments_between(old, offset):
                seg.flush()
                if seg.base_offset >= old:
                    new_dir_entries = True
            if new_dir_entries:
                _fileio.fs.fsync_dir(self.dir)
        except OSError as exc:
            # After a failed fsync the page cache may have dropped the dirty pages
            # and a retry would report success ("fsyncgate"): fail the log instead.
            self.failed = exc
            raise
        self.recovery_point = offset
        self.last_flush_ms = self.time_ms() if now_ms is None else now_ms

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, min_one_message: bool, locked: bool,
             max_offset: int | None = None) -> LogSlice:
        """Kafka's ``LocalLog.read``: the slice from the batch holding ``offset``, at most
        ``max_bytes`` (the whole first batch if ``min_one_message``).

        ``max_offset`` (a read_committed read, under the lock) bounds the slice at that
        offset and fills its ``aborted_transactions``. Without ``locked`` a segment found
        closed raises :class:`SegmentGone` (the caller reads again under the lock).

        Below the end offset without ``max_offset`` (the common case) the whole read is
        one kernel call (``entry_walk.read_at``); where it does not apply (a closed
        segment, a sparse or stale index, an offset past its segment's data) it answers
        None and the loop over the segments below decides, as it always did."""
        segments = self.segments
        bases = self.bases
        end = self.next_offset
        start = self.log_start_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.dir}, but we only "
                f"have log segments in the range {start} to {end}.", offset=offset,
                path=self.dir)
        committed = max_offset is not None
        declined = -1   # the position of the segment whose kernel read declined
        if offset < end and (not committed or max_offset == end):
            # the common case in one kernel call: the segment choice (the floor of the
            # offset in ``bases``, Kafka's segments.floorSegment), the index lookup, the
            # header check and the slice (LogSegment.read); None sends it down the
            # general path below. A read_committed read whose bound is the log end (no
            # transaction open: the last stable offset is the end) bounds nothing the
            # end does not: the same slice, and its aborted transactions
            found = _read_at(segments, bases, offset, max_bytes, min_one_message,
                             _fileio.fs, READ_PLAN)
            if found is not None:
                if committed:
                    found.aborted_transactions = self._aborted_for_fetch(
                        offset, bisect.bisect_right(bases, offset) - 1, found)
                return found
            declined = bisect.bisect_right(bases, offset) - 1
        if not committed:
            max_offset = end
        if offset >= max_offset:
            return self._empty_slice(segments[-1], offset, committed)
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.dir}, but we only "
                f"have log segments upto {end}.", offset=offset, path=self.dir)
        bound_segment = bisect.bisect_right(bases, max_offset) - 1 if committed else None
        while i < len(segments):
            segment = segments[i]
            # (the attribute, not the property: this is the read path)
            if not locked and segment.log._closed:
                raise SegmentGone()   # do not reopen a deleted segment's index
            max_position = None
            if committed:
                if i > bound_segment:
                    break
                if i == bound_segment:
                    at = segment.translate_offset(max_offset)
                    max_position = None if at is None else at.position
            if i == declined:
                # the kernel already declined this segment (a sparse or stale index, an
                # offset past its data, a corrupt header): whatever made it decline
                # holds for any max_position, so LogSegment.read would only read the
                # same window again before its general path
                found = segment._read_general(offset, max_bytes, max_position,
                                              min_one_message)
            else:
                found = segment.read(offset, max_bytes, max_position, min_one_message)
            if found is not None and committed:
                found.aborted_transactions = self._aborted_for_fetch(offset, i, found)
            if not locked and segment.log._closed:
                # closed (deleted) during the read: its bytes may come from a reused
                # descriptor; the caller reads again under the lock
                raise SegmentGone()
            if found is not None:
                return found
            i += 1
        return self._empty_slice(segments[-1], offset, committed)

    @staticmethod
    def _empty_slice(active: LogSegment, offset: int, committed: bool) -> LogSlice:
        """A read at or past its end: nothing, at the end of the active segment (with no
        aborted transaction for a read_committed one)."""
        empty = LogSlice(active.log, active.size, 0, offset)
        if committed:
            empty.aborted_transactions = []
        return empty

    def _aborted_for_fetch(self, offset: int, i: int, found: LogSlice) -> list[AbortedTxn]:
        """Kafka's ``addAbortedTransactions``: the upper bound of a fetch is the first index
        entry past its bytes, else the next segment's base, else the log end offset.
        No ``.txnindex`` entry from the segment of ``offset`` on (where
        :meth:`collect_aborted_transactions` starts): none, and no bound to look up."""
        segments = self.segments
        start = max(0, bisect.bisect_right(self.bases, offset) - 1)
        with_entries = self._with_txn_entries(segments, start)
        first = bisect.bisect_left(with_entries, start)
        if first == len(with_entries):
            return []
        upper = segments[i].fetch_upper_bound_offset(found.position, found.size)
        if upper is not None:
            upper = upper[0]
        elif i + 1 < len(segments):
            upper = segments[i + 1].base_offset
        else:
            upper = self.next_offset
        return self._collect(segments, with_entries, first, offset, upper)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int, *,
                                     fetch_offset: int | None = None) -> list[AbortedTxn]:
        """Kafka's ``LocalLog.collectAbortedTransactions``: from the ``.txnindex`` of the
        segment holding ``start_offset`` on, the entries ending at or past
        ``fetch_offset`` (default ``start_offset``, as a fetch wants) and beginning below
        ``upper_bound_offset``, until one index says no later one can matter."""
        if fetch_offset is None:
            fetch_offset = start_offset
        segments = self.segments
        i = max(0, bisect.bisect_right(self.bases, start_offset) - 1)
        with_entries = self._with_txn_entries(segments, i)
        return self._collect(segments, with_entries, bisect.bisect_left(with_entries, i),
                             fetch_offset, upper_bound_offset)

    @staticmethod
    def _collect(segments, with_entries: tuple[int, ...], first: int, fetch_offset: int,
                 upper_bound_offset: int) -> list[AbortedTxn]:
        """The search of :meth:`collect_aborted_transactions` over the segments at
        ``with_entries[first:]``: a segment without an entry adds none and never ends the
        search, so only the segments with entries are asked, in order."""
        out: list[AbortedTxn] = []
        for k in with_entries[first:]:
            found = segments[k].txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
            out.extend(found.aborted)
            if found.complete:
                break
        return out

    def _with_txn_entries(self, segments, start: int) -> tuple[int, ...]:
        """The positions in ``segments``, from ``start`` at least, of the segments whose
        ``.txnindex`` holds an entry, ascending (lower ones may come too: the caller
        bisects); cached for this segment list until one of its indexes changes (the
        count of :attr:`_txn_changes`, which :meth:`set_segments` gives to each index of
        the list, read before the indexes: a change during the look moves it, and the
        next call looks again; other logs' indexes count elsewhere).

        Only the segments from ``start`` up are looked at, as Kafka's
        ``LocalLog.collectAbortedTransactions`` walks from the segment of the fetch
        offset up (``segments.higherSegments``) and never reads a lower one; a look
        asks what each index knows of its size
        (:meth:`~kafkastore.txn_index.TransactionIndex.has_entries`),
        which opens no file."""
        generation = self._txn_changes.count
        cached = self._txn_segments
        stop, above = len(segments), ()
        if cached is not None and cached[0] is segments and cached[1] == generation:
            if start >= cached[2]:
                return cached[3]
            stop, above = cached[2], cached[3]
        found = tuple(k for k in range(start, stop)
                      if segments[k].txn_index.has_entries()) + above
        self._txn_segments = (segments, generation, start, found)
        return found

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record at or after ``timestamp`` (>= 0) in the first segment whose
        largest timestamp reaches it, not below the log start offset; or None."""
        for seg in self.segments:
            if seg.largest_timestamp() >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """Kafka's MAX_TIMESTAMP lookup: the first segment with the largest max timestamp
        so far, the first batch there whose max timestamp is it, and in that batch the
        first record holding it (``RecordBatch.offsetOfMaxTimestamp``: none for magic 0).
        Data without timestamps has -1 everywhere, so the answer is ``(-1, the first
        offset)`` for v1/v2 data, as Kafka gives, and None for v0 data or no data."""
        best = None
        for seg in self.segments:
            ts = seg.max_timestamp_so_far()
            if best is None or ts > best[0]:
                best = (ts, seg)
        if best is None:
            return None
        ts, seg = best
        position = seg.offset_index.lookup(seg.shallow_offset_of_max_timestamp_so_far())[1]
        return max_timestamp_record(seg.log.walk(position), seg.log.read, ts)

    # -- truncation ------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """``truncateTo``'s segment work: the segments based above ``target_offset`` go
        (newest first), the active one is cut, the end offset becomes ``target_offset``.
        Returns True when the data now ends below it: the caller then rolls an empty
        segment at the target, which records the end offset in a file name."""
        keep = [s for s in self.segments if s.base_offset <= target_offset]
        drop = [s for s in self.segments if s.base_offset > target_offset]
        self.set_segments(keep)
        # newest first: a crash part-way leaves a shorter log, never one with a hole
        self.schedule_delete(reversed(drop))
        active = keep[-1]
        active.truncate_to(target_offset)
        self.next_offset = target_offset  # Kafka: updateLogEndOffset(targetOffset)
        self.log_start_offset = min(target_offset, self.log_start_offset)
        data_end = active.read_next_offset()
        self.recovery_point = min(self.recovery_point, data_end)
        if data_end >= target_offset:
            return False
        # The batch holding the target went whole, so the data ends below the end
        # offset Kafka sets. Kafka's next open would read the end offset back from the
        # data and hand out lower offsets again; an empty segment at the target records
        # it in a file name, which Kafka loads the same way.
        if active.size == 0 and len(keep) > 1:
            # nothing left in it: replace it rather than keep an empty segment
            self.set_segments(keep[:-1])
            self.schedule_delete([active])
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Kafka's ``LocalLog.truncateFullyAndStartAt``: every segment goes and one empty
        segment at ``new_offset`` is the log; the offsets all become ``new_offset``."""
        old = list(self.segments)
        last = old.pop()
        # Kafka's order: every segment but the last goes oldest first, so a crash
        # part-way leaves a log that lost a prefix, never one with a hole; the new
        # segment exists before the last old one goes, so the end offset never falls
        # back below both the old end and ``new_offset``.
        self.schedule_delete(old)
        if last.base_offset == new_offset:
            # same file names: the old one must be out of the way first
            self.schedule_delete([last])
        fresh = self.new_segment(new_offset)
        _fileio.fs.fsync_dir(self.dir)
        self.set_segments([fresh])
        if not last.has_suffix(DELETED_FILE_SUFFIX):
            self.schedule_delete([last])
        self.next_offset = new_offset
        self.log_start_offset = new_offset
        self.recovery_point = new_offset

    # -- deleting and replacing segments ---------------------------------------------------

    def delete_oldest(self, segments: Iterable[LogSegment],
                      on_scheduled: Callable[[int, int], None]) -> int:
        """Remove a prefix of the segments (retention), never the active one; the log
        start offset moves to the first remaining segment if it was below it. Each
        removed segment's base and deletion time go to ``on_scheduled``. Returns how
        many were removed."""
        current = self.segments
        wanted = {id(s) for s in segments if s is not current[-1]}
        drop = [s for s in current if id(s) in wanted]
        if not drop:
            return 0
        if drop != list(current[:len(drop)]):
            raise ValueError(
                f"Only the oldest segments of {self.dir} can be deleted, not "
                f"{[s.base_offset for s in drop]} of {[s.base_offset for s in current]}")
        keep = list(current[len(drop):])
        # the start offset moves first: a lock-free reader that sees the new
        # segments (it reads them before the start offset) sees the new start too
        self.log_start_offset = max(self.log_start_offset, keep[0].base_offset)
        self.set_segments(keep)
        self.schedule_delete(drop, on_scheduled)
        return len(drop)

    def replace_segments(self, new_segments: Iterable[LogSegment],
                         old_segments: Iterable[LogSegment],
                         on_removed: Callable[[int], None]) -> list[LogSegment]:
        """Swap ``new_segments`` in for ``old_segments`` (the log cleaner's last step).

        Kafka's ``LocalLog.replaceSegments`` (kafka-storage.md 7.8). The new segments
        are complete, flushed, and named with the ``.cleaned`` suffix; the old ones
        are segments of this log (any that already left it are skipped). In order:

        1. every new segment is renamed ``.cleaned`` -> ``.swap``, highest base offset
           first;
        2. the segment list changes in one step: the old segments leave it and the new
           ones enter (a lock-free reader sees the old list or the new one; one holding
           an old segment keeps reading it until its delayed deletion);
        3. every old segment is renamed ``.deleted`` (deleted ``file.delete.delay.ms``
           later), and ``on_removed`` gets the base of each one not replaced by a new
           segment of the same base;
        4. every new segment loses its ``.swap`` suffix, then the directory is fsynced.

        A crash between any two renames leaves files that the next open completes or
        rolls back (``.cleaned`` files are deleted; a complete set of ``.swap`` files
        replaces what it overlaps), so a reopened log holds either the old segments or
        the new ones, never a mix. Returns the old segments that were removed and not
        replaced by a new segment of the same base offset.
        """
        new = sorted(new_segments, key=lambda seg: seg.base_offset)
        if not new:
            raise ValueError("replace_segments needs at least one new segment")
        current = self.segments
        present = {id(seg) for seg in current}
        old = sorted((seg for seg in old_segments if id(seg) in present),
                     key=lambda seg: seg.base_offset)
        if any(seg is current[-1] for seg in old):
            raise ValueError(f"The active segment of {self.dir} cannot be replaced")
        started = False
        try:
            for seg in reversed(new):
                seg.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
                started = True
            gone = {id(seg) for seg in old}
            self.set_segments([seg for seg in current if id(seg) not in gone] + new)
            new_bases = {seg.base_offset for seg in new}
            self.schedule_delete(old)
            for seg in old:
                if seg.base_offset not in new_bases:
                    on_removed(seg.base_offset)
            for seg in new:
                seg.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            _fileio.fs.fsync_dir(self.dir)
        except BaseException as exc:
            if started:
                # Half renamed: what the files say is what the next open() makes of
                # them (it completes or rolls back the swap); until then the log
                # takes no writes, as after a failed fsync.
                self.failed = exc
            raise
        return [seg for seg in old if seg.base_offset not in new_bases]

    def schedule_delete(self, segments: Iterable[LogSegment],
                        on_scheduled: Callable[[int, int], None] | None = None) -> None:
        """Rename each segment ``.deleted`` and queue it for deletion once
        ``file.delete.delay.ms`` has passed; ``on_scheduled(base, due)`` after each."""
        due = self.time_ms() + self.config.file_delete_delay_ms
        for seg in segments:
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
            self.pending_deletes.append((due, seg))
            if on_scheduled is not None:
                on_scheduled(seg.base_offset, due)

    def delete_pending(self, now: int, force: bool) -> int:
        """Delete the queued ``.deleted`` segments that are due (all with ``force``)."""
        keep, done = [], 0
        for due, seg in self.pending_deletes:
            if force or now >= due:
                seg.close_handlers()
                seg.delete_if_exists()
                done += 1
            else:
                keep.append((due, seg))
        self.pending_deletes = keep
        return done

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment, which trims and fsyncs its files (the final flush), and
        fsync the directory if a segment was created since the last flush; the recovery
        point becomes the end offset. Every segment is closed even when one fails (its
        files are then released without writing): the first error is kept in ``failed``
        and raised at the end, with the recovery point left where it was."""
        active = self.segments[-1]
        active.offset_index  # noqa: B018 - an empty active segment gets its files too
        active.time_index  # noqa: B018
        # Closing a segment trims and then fsyncs each of its files (only those with
        # unsynced changes), so it is also the final flush: one sync per file instead
        # of a flush followed by a trim that needs syncing again.
        old = self.recovery_point
        first: OSError | None = None
        for seg in self.segments:
            try:
                seg.close()
            except OSError as exc:
                first = first or exc
                seg.close_handlers()
        try:
            if first is None and old < self.next_offset and \
                    any(seg.base_offset >= old for seg in self.segments):
                _fileio.fs.fsync_dir(self.dir)  # segments created since the last flush
        except OSError as exc:
            first = exc
        if first is not None:
            self.failed = first
            for _, seg in self.pending_deletes:
                seg.close_handlers()
            raise first
        self.recovery_point = self.next_offset

    @staticmethod
    def take_clean_shutdown_marker(directory: str) -> bool:
        """Whether ``directory`` holds :data:`CLEAN_SHUTDOWN_FILE`, which goes (the
        removal fsynced): a crash from now on counts as unclean."""
        marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
        found = os.path.exists(marker)
        if found:
            _fileio.fs.unlink(marker)
            _fileio.fs.fsync_dir(directory)
        return found

    def write_clean_shutdown_marker(self) -> None:
        """Write :data:`CLEAN_SHUTDOWN_FILE` (Kafka's content), fsynced with its entry."""
        marker = os.path.join(self.dir, CLEAN_SHUTDOWN_FILE)
        fd = _fileio.open_to_rewrite(marker)
        try:
            _fileio.write_fully(fd, b'{"version":0,"brokerEpoch":0}')
            _fileio.fs.fsync(fd)
        finally:
            _fileio.fs.close(fd)
        _fileio.fs.fsync_dir(self.dir)

    def close_handlers(self) -> None:
        """Close every segment's files without writing (errors ignored)."""
        for seg in self.segments:
            try:
                seg.close_handlers()
            except OSError:
                pass
