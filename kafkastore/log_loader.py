"""Opening a partition directory: Kafka's ``LogLoader`` for :class:`~kafkastore.log.Log`.

:func:`load` is ``LogLoader.load`` (kafka-storage.md 5.10): on a :class:`Log` that has no
segments yet it runs Kafka's steps, in Kafka's order and under Kafka's names, filling in
the segments, end offset, recovery point, log start offset, leader epochs and producer
state:

* ``removeTempFilesAndCollectSwapFiles``: ``.deleted`` files go, ``.cleaned`` files go,
  ``.swap`` files of an unfinished split go, and a checkpoint's ``.tmp`` a crash left;
* the interrupted swaps are completed (the second and third passes of ``load``: the
  segments the ``.swap`` files replace go, the ``.swap`` files lose their suffix);
* ``loadSegmentFiles``: every ``.log`` is opened as a segment (orphaned indexes
  deleted, a segment whose offset index is missing recovered at once, the index
  contents checked on first use);
* ``recoverLog``: after an unclean shutdown every segment from the recovery point on is
  recovered (:func:`recover_segment`); the first one with a bad tail is cut and every
  later segment deleted; a log whose end falls below the log start offset is emptied
  (``deleteSegmentsIfLogStartGreaterThanLogEnd``); an empty log gets its segment;
* the active segment's indexes get their full size back, the leader epochs are cut to
  the log, the log start offset is the checkpoint's or the first base;
* stray producer snapshots go and the producer state is rebuilt at the log end offset
  (:func:`rebuild_producer_state`, ``UnifiedLog.rebuildProducerState``: the latest good
  snapshot, then the batches after it).

A ``-delete`` directory is opened without recovery, as in Kafka.

The functions fill in the log's :class:`~kafkastore.local_log.LocalLog` (its
:attr:`~kafkastore.log.Log.local_log`: segments, offsets) and the log's own leader
epochs and producer state: this module is the loading half of the log layer, split from
:mod:`kafkastore.log` to keep one concern per file. They run before the
log is shared (under nothing) or, for :func:`rebuild_producer_state` from a truncation,
under the log's lock.
"""

from __future__ import annotations

import bisect
import logging
import os
from typing import TYPE_CHECKING

from kafkastore import _fileio
from kafkastore.batch_header import INT32, PARTITION_LEADER_EPOCH_OFFSET
from kafkastore.checkpoint import TEMP_SUFFIX
from kafkastore.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    UnsafePathError,
)
from kafkastore.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME, LeaderEpochFileCache
from kafkastore.log_dir import DELETE_DIR_SUFFIX
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME
from kafkastore.producer_state import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    ProducerStateManager,
    iter_producer_batches,
    skips_producer_state_load,
)
from kafkastore.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
    offset_from_file_name,
)

if TYPE_CHECKING:
    from kafkastore.log import Log

__all__ = ["load", "rebuild_producer_state", "recover_segment"]

logger = logging.getLogger("kafkastore.log")

_STALE_TEMP_FILES = frozenset(name + TEMP_SUFFIX for name in (
    LEADER_EPOCH_CHECKPOINT_FILENAME, PARTITION_METADATA_FILENAME))


def load(log: Log, clean: bool, recovery_point: int, log_start_offset: int) -> None:
    """Kafka's ``LogLoader.load``: its steps, in its order, on a log with no segments yet.

    ``clean`` says whether the last shutdown was clean (no recovery then);
    ``recovery_point`` and ``log_start_offset`` are the checkpointed values.
    """
    local = log.local_log
    log._epochs = LeaderEpochFileCache(log.dir)
    swap_files = _remove_temp_files_and_collect_swap_files(log)
    _complete_swap_operations(log, swap_files)
    snapshots = _load_segment_files(log, log_start_offset)
    log._producers = log._new_producer_state(snapshots)
    if log.dir.rstrip(os.sep).endswith(DELETE_DIR_SUFFIX):
        _load_dir_marked_for_deletion(log)
        return
    local.next_offset, local.recovery_point = _recover_log(log, clean, recovery_point,
                                                           log_start_offset)
    # the active segment's indexes get their full size back (a clean shutdown trimmed
    # them), or it would look full and roll at once
    active = local.segments[-1]
    active.offset_index.resize(log.config.segment_index_bytes)
    active.time_index.resize(log.config.segment_index_bytes)
    local.log_start_offset = max(log_start_offset, local.segments[0].base_offset)
    # the epochs of what the log holds (a checkpoint written before a crash may run
    # past the recovered end, or below a start offset that moved since)
    log._epochs.truncate_from_end(local.next_offset)
    log._epochs.truncate_from_start(local.log_start_offset)
    # the state at the log end offset, built afresh: the recovery's scratch managers
    # wrote and deleted snapshots, so the stray ones are found by listing again
    log._producers.remove_stray_snapshots(local.bases, reload=log._recovered_segments)
    rebuild_producer_state(log, log._producers, local.next_offset, clean)


def _remove_temp_files_and_collect_swap_files(log: Log) -> list[str]:
    """Kafka's ``removeTempFilesAndCollectSwapFiles``: ``.deleted`` files go (not a KRaft
    snapshot's ``.checkpoint.deleted``), ``.cleaned`` files go, and so do the ``.swap``
    files at or past the lowest ``.cleaned`` base (an unfinished split); the names of the
    ``.swap`` files left are returned. A checkpoint's ``.tmp`` that a crash left goes too
    (the next write replaces it anyway; without this it would stay until then).

    The directory is refused (:class:`~kafkastore.errors.UnsafePathError`) when a
    segment, index, snapshot or swap file in it is a symlink.
    """
    fs = _fileio.fs
    with os.scandir(log.dir) as listing:
        names = []
        for entry in listing:
            # a segment, index, snapshot or swap file that is a symlink would be read,
            # truncated and appended to through the link: refuse the directory
            if entry.is_symlink() and _offset_or_none(entry.name) is not None:
                path = os.path.join(log.dir, entry.name)
                raise UnsafePathError(
                    f"Segment file {path} is a symlink (to {os.readlink(path)}); "
                    "kafkastore never reads or writes log files through a link",
                    path=path, log_dir=log.dir)
            names.append(entry.name)
    names.sort()
    cleaned_min = None
    swaps = []
    for name in names:
        if name in _STALE_TEMP_FILES:
            fs.unlink(os.path.join(log.dir, name))
            continue
        if not name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)):
            continue   # (no stat for the ordinary files: a clean open lists 1000s)
        full = os.path.join(log.dir, name)
        if not os.path.isfile(full):
            continue
        if name.endswith(DELETED_FILE_SUFFIX) and not name.endswith(".checkpoint.deleted"):
            fs.unlink(full)
        elif name.endswith(CLEANED_FILE_SUFFIX):
            base = _offset_or_none(name)
            if base is not None:
                cleaned_min = base if cleaned_min is None else min(cleaned_min, base)
            fs.unlink(full)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps.append(name)
    valid_swaps = []
    for name in swaps:
        base = _offset_or_none(name)
        if cleaned_min is not None and base is not None and base >= cleaned_min:
            fs.unlink(os.path.join(log.dir, name))  # part of an unfinished split
        else:
            valid_swaps.append(name)
    return valid_swaps


def _complete_swap_operations(log: Log, swap_files: list[str]) -> None:
    """The swaps a crash interrupted are finished (the second and third passes of Kafka's
    ``load``): the segment files in the offset range the ``.swap`` segments cover go
    (they were compacted or split into the swaps), then every ``.swap`` file loses its
    suffix."""
    fs = _fileio.fs
    swap_logs = [n for n in swap_files
                 if n[:-len(SWAP_FILE_SUFFIX)].endswith(LOG_FILE_SUFFIX)
                 and _offset_or_none(n) is not None]
    if swap_logs:
        min_base = None
        max_next = None
        for name in swap_logs:
            base = offset_from_file_name(name)
            seg = LogSegment.open(log.dir, base, log.config, file_already_exists=True,
                                  suffix=SWAP_FILE_SUFFIX)
            try:
                nxt = _next_offset_by_walk(seg)  # the swap's index may be stale
            finally:
                seg.close_handlers()
            min_base = base if min_base is None else min(min_base, base)
            max_next = nxt if max_next is None else max(max_next, nxt)
        for name in sorted(os.listdir(log.dir)):
            if name.endswith(SWAP_FILE_SUFFIX):
                continue
            off = _offset_or_none(name)
            if off is not None and min_base <= off < max_next and _is_segment_file(name):
                fs.unlink(os.path.join(log.dir, name))
    for name in swap_files:
        fs.rename(os.path.join(log.dir, name),
                  os.path.join(log.dir, name[:-len(SWAP_FILE_SUFFIX)]))


def _load_segment_files(log: Log, log_start_offset: int) -> list[int]:
    """Kafka's ``loadSegmentFiles``: every ``.log`` opened as a segment, in offset order;
    an index without its ``.log`` deleted; a segment whose offset index is missing
    recovered at once (:func:`recover_segment`); the other index checks deferred to each
    index's first use, so that opening maps no index file. Returns the offsets of the
    producer snapshots found in the same pass over the names."""
    fs = _fileio.fs
    with os.scandir(log.dir) as listing:
        is_file = {e.name: e.is_file() for e in listing}   # d_type: no stat per file
    names = sorted(is_file)
    present = set(names)
    segments = []
    snapshots = []
    for name in names:
        base = _offset_or_none(name)
        if base is None or not is_file[name]:
            continue
        if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
            if name[:-len(PRODUCER_SNAPSHOT_FILE_SUFFIX)].isdigit():
                snapshots.append(base)
            continue
        if name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)):
            stem = name[:name.rindex(".")]
            if stem + LOG_FILE_SUFFIX not in present:
                full = os.path.join(log.dir, name)
                logger.warning("Found an orphaned index file %s, with no corresponding log "
                               "file.", full)
                fs.unlink(full)
            continue
        if not name.endswith(LOG_FILE_SUFFIX):
            continue
        stem = name[:-len(LOG_FILE_SUFFIX)]
        time_index_newly_created = stem + TIME_INDEX_FILE_SUFFIX not in present
        seg = LogSegment.open(log.dir, base, log.config, file_already_exists=True,
                              time_ms=log.local_log.time_ms)
        try:
            # Kafka's check (the offset index exists); the content checks run when an
            # index is first used, so opening maps no index file
            seg.defer_sanity_check(time_index_newly_created,
                                   offset_index_exists=stem + INDEX_FILE_SUFFIX in present,
                                   txn_index_exists=stem + TXN_INDEX_FILE_SUFFIX in present)
        except CorruptIndexError as exc:
            logger.warning("Could not find a valid index for segment %s (%s); rebuilding it",
                           seg.log.path, exc)
            log.local_log.set_segments(segments)   # (the producer state below it is rebuilt)
            recover_segment(log, seg, log_start_offset)
        segments.append(seg)
    log.local_log.set_segments(segments)
    return snapshots


def _load_dir_marked_for_deletion(log: Log) -> None:
    """A ``-delete`` directory is opened only to be deleted: no recovery, as in Kafka's
    ``load``; an empty one gets a segment at 0, and the offsets start at 0."""
    if not log.local_log.segments:
        log.local_log.set_segments([log.local_log.new_segment(0)])
    log.local_log.next_offset = log.local_log.segments[-1].read_next_offset()
    log.local_log.recovery_point = 0
    log.local_log.log_start_offset = 0


def _recover_log(log: Log, clean: bool, recovery_point: int,
                 log_start_offset: int) -> tuple[int, int]:
    """Kafka's ``recoverLog``: after an unclean shutdown the segments from the recovery
    point on are recovered (:func:`_recover_from`); a log that ends below the log start
    offset is emptied (``deleteSegmentsIfLogStartGreaterThanLogEnd``); an empty log gets
    its active segment at the log start offset. Returns ``(next offset, recovery
    point)``: the log end, and the checkpoint's recovery point capped by it (the end
    after a clean shutdown that kept its segments)."""
    if not clean:
        _recover_from(log, recovery_point, log_start_offset)
    elif log.local_log.segments:
        _recover_active_segment_if_not_clean(log, log_start_offset)
    kept_end = _delete_segments_if_log_start_greater_than_log_end(log, log_start_offset)
    if not log.local_log.segments:
        log.local_log.set_segments([log.local_log.new_segment(log_start_offset)])
    if clean and kept_end is not None:
        return kept_end, kept_end
    # Kafka's recoverLog: the checkpoint capped by the end, also after a clean shutdown
    # whose segments were all deleted (the recovery point is only advanced by a flush)
    next_offset = log.local_log.segments[-1].read_next_offset() if kept_end is None \
        else kept_end
    return next_offset, min(recovery_point, next_offset)


def _delete_segments_if_log_start_greater_than_log_end(log: Log,
                                                        log_start_offset: int) -> int | None:
    """Kafka's step of the same name: a log whose end is below the checkpointed start
    (its segment files deleted by hand) loses every segment, its epochs and its
    producer state. Returns the log end offset when the segments stay (Kafka's
    ``Optional`` of it: the caller walks the active segment's tail once), else None."""
    if not log.local_log.segments:
        return None
    next_offset = log.local_log.segments[-1].read_next_offset()
    if next_offset >= log_start_offset:
        return next_offset
    logger.warning("Log end offset %d is below the log start offset %d: deleting all "
                   "segments", next_offset, log_start_offset)
    for seg in log.local_log.segments:
        seg.close_handlers()
        seg.delete_if_exists()
    log.local_log.set_segments([])
    log._epochs.clear_and_flush()
    log._producers.truncate_fully_and_start_at(log_start_offset)
    return None


def recover_segment(log: Log, seg: LogSegment, log_start_offset: int = 0) -> int:
    """Kafka's ``LogLoader.recoverSegment``: the producer state at the segment's base
    (a scratch manager: snapshot plus replay), the segment recovered with it (its
    ``.txnindex`` rebuilt), and a snapshot at its end so that the next segment's
    recovery replays no more than itself."""
    log._recovered_segments = True
    producers = log._new_producer_state()
    rebuild_producer_state(log, producers, seg.base_offset, False, log_start_offset,
                                 upto=seg)
    truncated = seg.recover(producers)
    producers.take_snapshot()
    return truncated


def rebuild_producer_state(log: Log, producers: ProducerStateManager, last_offset: int,
                            reload_from_clean_shutdown: bool,
                            log_start_offset: int | None = None, *,
                            upto: LogSegment | None = None) -> None:
    """Kafka's ``UnifiedLog.rebuildProducerState``: load the latest snapshot at or
    below ``last_offset`` and replay the batches from it to ``last_offset``.

    After a clean shutdown with no snapshot at all (a directory from before producer
    state was kept) nothing is replayed: empty snapshots are written at the last two
    segment bases and ``last_offset`` instead, as Kafka does on upgrade."""
    start = log.local_log.log_start_offset if log_start_offset is None else log_start_offset
    segments = [s for s in log.local_log.segments
                if upto is None or s.base_offset < upto.base_offset]
    to_snapshot = [s.base_offset for s in segments[-2:]] + [last_offset]
    if skips_producer_state_load(producers.latest_snapshot_offset(),
                                 reload_from_clean_shutdown):
        for offset in to_snapshot:
            producers.update_map_end_offset(offset)
            producers.take_snapshot()
        return
    empty_before = producers.is_empty and producers.map_end_offset >= last_offset
    producers.truncate_and_reload(start, last_offset, log.local_log.time_ms())
    if last_offset > producers.map_end_offset and not empty_before:
        bases = [s.base_offset for s in segments]
        first = max(0, bisect.bisect_right(bases, producers.map_end_offset) - 1)
        for seg in segments[first:]:
            if seg.base_offset >= last_offset:
                break
            begin = max(seg.base_offset, producers.map_end_offset, start)
            producers.update_map_end_offset(begin)
            if seg.base_offset in to_snapshot:
                producers.take_snapshot()
            try:
                _replay_segment(producers, seg, begin, last_offset,
                                     seg is segments[-1] or
                                     segments[segments.index(seg) + 1].base_offset
                                     > last_offset)
            except CorruptRecordError as exc:
                # a segment not recovered yet (the loader rebuilds a missing index
                # before recovery runs): its bad tail ends the replay; recovery
                # cuts it and, as it then drops every later segment, what was
                # built on it goes too
                logger.warning("Producer state replay of %s stopped at a bad entry: %s",
                               seg.log.path, exc)
    producers.update_map_end_offset(last_offset)
    producers.take_snapshot()


def _replay_segment(producers: ProducerStateManager, seg: LogSegment, begin: int,
                    last_offset: int, holds_last: bool) -> None:
    """Replay ``seg``'s batches from ``begin`` up to, not including, ``last_offset``."""
    found = seg.translate_offset(begin)
    if found is None:
        return
    limit = seg.size
    if holds_last:
        end = seg.translate_offset(last_offset)
        if end is not None:
            limit = end.position
    walk = seg.log.walk_headers(found.position, end=limit)
    producers.apply_batches(iter_producer_batches(walk, seg.log.read, seg.log.path))


def _recover_from(log: Log, recovery_point: int, log_start_offset: int = 0) -> None:
    segments = list(log.local_log.segments)
    if not segments:
        return
    start = max(0, bisect.bisect_right(log.local_log.bases, recovery_point) - 1)
    for i in range(start, len(segments)):
        seg = segments[i]
        truncated = _recover_unflushed_segment(log, seg, log_start_offset)
        if truncated > 0:
            logger.warning("Found invalid messages in log segment %s: %d bytes truncated",
                           seg.log.path, truncated)
            for later in segments[i + 1:]:
                later.close_handlers()
                later.delete_if_exists()
            log.local_log.set_segments(segments[:i + 1])
            return


def _recover_unflushed_segment(log: Log, seg: LogSegment, log_start_offset: int) -> int:
    """One step of Kafka's ``recoverLog`` loop: the segment recovered, or emptied when
    its recovery meets an invalid offset; its epochs assigned. Returns the bytes cut."""
    try:
        truncated = recover_segment(log, seg, log_start_offset)
    except (InvalidOffsetError, OSError) as exc:
        logger.warning("Found invalid offset during recovery of %s (%s); emptying it",
                       seg.log.path, exc)
        truncated = seg.truncate_to(seg.base_offset)
    _assign_epochs_of(log, seg)   # as LogSegment.recover does
    return truncated


def _recover_active_segment_if_not_clean(log: Log, log_start_offset: int) -> None:
    """A clean open trusts the files, as Kafka's ``recoverLog`` does (no segment is
    recovered), but not an active segment no clean shutdown can leave: its tail (the
    entries from its offset index's last entry on, the ones its ``read_next_offset``
    walks) holds an entry below the segment's base offset, or ends in a partial entry
    (:func:`_unclean_tail`). Such a segment is recovered as after a crash, as Kafka's
    ``loadSegmentFiles`` recovers a segment whose index it cannot trust: a partial
    tail is cut; an entry below the base raises
    :class:`~kafkastore.segment.LogSegmentOffsetOverflowError` (path, offset, position)
    from the recovery, as Kafka's ``LogSegment.recover`` does (``ensureOffsetInRange``),
    and the log is not opened: the same as an unclean open of those files.

    Kafka itself would trust it: its ``LogSegment.readNextOffset`` then gives an end
    below the segment's base (batches 10 then 2 in a segment at 5 end at 3), below the
    log start offset (``max(checkpoint, first base)`` in ``LogLoader.load``), or the
    next append lands after the partial bytes, where no reader gets past them. An end
    below the start, or offsets going backwards, is what kafkastore never presents, and
    an acknowledged append must stay readable: so the safe way here, not Kafka's."""
    seg = log.local_log.segments[-1]
    problem = _unclean_tail(seg)
    if problem is None:
        return
    logger.warning("Log segment %s after a clean shutdown %s: recovering it",
                   seg.log.path, problem)
    if _recover_unflushed_segment(log, seg, log_start_offset) > 0:
        logger.warning("Found invalid messages in log segment %s: cut to %d bytes",
                       seg.log.path, seg.size)


def _unclean_tail(seg: LogSegment) -> str | None:
    """What no clean shutdown leaves in the entries :meth:`LogSegment.read_next_offset`
    walks (from the offset index's last entry to the end), or None: an entry below the
    segment's base offset, or bytes after the last whole entry. (Entries out of order
    inside the segment's range are left to the reads, as Kafka's recovery leaves them.)"""
    index = seg.offset_index
    position = index.lookup(index.last_offset)[1]
    for header in seg.log.walk(position):
        if header.base_offset < seg.base_offset:
            return (f"holds an entry at offset {header.base_offset} (position "
                    f"{header.position}) below its base offset {seg.base_offset}")
        position = header.position + header.size
    if position != seg.size:
        return f"ends in a partial entry at position {position} of {seg.size} bytes"
    return None


def _assign_epochs_of(log: Log, seg: LogSegment) -> None:
    """Assign the leader epochs of a recovered segment's v2 batches to the cache."""
    epochs = log._epochs
    for header in seg.log.walk(0):
        if header.magic >= 2:
            epoch = INT32.unpack(seg.log.read(header.position + PARTITION_LEADER_EPOCH_OFFSET,
                                               INT32.size))[0]
            if epoch >= 0:
                latest = epochs.latest_epoch()
                if latest is None or epoch > latest:
                    epochs.assign(epoch, header.base_offset)


def _offset_or_none(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def _is_segment_file(name: str) -> bool:
    return name.endswith((LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
                          TXN_INDEX_FILE_SUFFIX, ".snapshot"))


def _next_offset_by_walk(seg: LogSegment) -> int:
    nxt = seg.base_offset
    for header in seg.log.walk(0):
        nxt = header.last_offset + 1
    return nxt
