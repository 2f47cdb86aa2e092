"""Restore a tiered copy to ordinary partition directories: ``kafkastore tiered export``.

:func:`export` writes, for each partition of a :class:`~kafkastore.tiered.TieredCopy`,
``<dest log dir>/<topic>-<partition>/`` as a broker would have had it before the segments
were deleted locally, so Kafka (moved into one of a broker's ``log.dirs``) and
:class:`kafkastore.Log` open it without recovering anything:

======================================  ================================================
``<start, 20 digits>.log``              each served segment, byte for byte (the original
                                        ``.log``: chunks detransformed)
``.index``, ``.timeindex``,             the segment's indexes as uploaded, byte for byte
``.txnindex``
``<end + 1, 20 digits>.snapshot``       the producer snapshot uploaded with the segment
``leader-epoch-checkpoint``             the segments' leader-epoch entries merged (each
                                        segment carries the entries up to its end), cut
                                        to the restored offsets as Kafka's loader cuts
                                        them
``partition.metadata``                  the topic id
``.kafka_cleanshutdown``                kafkastore's marker for a :class:`~kafkastore.
                                        log.Log` opened on its own (Kafka ignores it in a
                                        partition directory)
======================================  ================================================

and in the log directory: the partition's entries in ``log-start-offset-checkpoint`` (the
first segment's start offset) and ``recovery-point-offset-checkpoint`` (the log end
offset: everything restored is on disk), merged with the entries already there; and
Kafka's clean-shutdown marker ``.kafka_cleanshutdown`` when the log directory held no
other partition (a new restore target; with other partitions there, their own state
decides, and Kafka re-reads the restored log's last segment on load, which finds it
intact).

What is refused (:class:`~kafkastore.errors.TieredStorageError`, before anything is
written, for every partition asked):

* a destination partition directory that exists and is not empty;
* a partition whose resolution has **gaps** (offsets no served segment holds), unless
  ``allow_gaps``: the segments are then written as they are, the gap left between them.
  Kafka loads such a log: ``LogLoader`` takes the segments in base-offset order and never
  requires one to start where the previous one ended (compaction makes the same holes
  inside segments); a fetch in the gap gets the next segment's first batch, as for
  compacted offsets;
* a partition whose served segments **overlap** (the resolution cuts the earlier one at
  the later one's start): a cut segment cannot be byte-identical, so it is refused unless
  ``allow_overlap``. The earlier segment is then written whole and truncated at the later
  one's start with Kafka's own segment truncation (:meth:`LogSegment.truncate_to
  <kafkastore.segment.LogSegment.truncate_to>`: whole batches, indexes and transaction
  index cut to match), and its producer snapshot (taken at its old end) is left out. A
  batch that straddles the cut goes with the truncation, which leaves a gap: that also
  needs ``allow_gaps``.

Durability: a partition is written into ``<topic>-<partition>.<uuid>-delete`` in the log
directory (a name Kafka and kafkastore delete on load, so a crash leaves nothing that
loads as data), every file fsynced; then the checkpoints are written (atomically), the
directory is renamed to ``<topic>-<partition>`` and the log directory fsynced. All file
I/O goes through :mod:`kafkastore._fileio`.

Thread-safety: one export per destination at a time; the copy may be shared.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kafkastore import _fileio
from kafkastore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kafkastore.errors import CorruptCheckpointError, TieredStorageError
from kafkastore.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
)
from kafkastore.local_log import CLEAN_SHUTDOWN_FILE
from kafkastore.log_dir import live_partition_dirs, log_delete_dir_name, log_dir_name
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME, write_topic_id
from kafkastore.segment import LOG_FILE_SUFFIX, log_file_offset
from kafkastore.storage import require_local_path
from kafkastore.topic import TopicPartition

__all__ = ["ExportedPartition", "export", "export_partition", "plan_export"]

_COPY_BLOCK = 8 << 20
_MARKER = b'{"version":0,"brokerEpoch":0}'
_SNAPSHOT_SUFFIX = ".snapshot"


@dataclass
class ExportedPartition:
    """What :func:`export` wrote (or, from :func:`plan_export`, will write) for one
    partition: its directory, the segments' base offsets, the restored log start and end
    offsets, the original bytes written, the gaps left, and the segments cut
    (``(base offset, cut at)``) by ``allow_overlap``."""

    topic_partition: TopicPartition
    path: str
    segments: list[int] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    bytes: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    cut: list[tuple[int, int]] = field(default_factory=list)


def _is_empty_dir(path: str) -> bool:
    return not os.path.lexists(path) or (os.path.isdir(path) and not os.listdir(path))


def plan_export(copy, tp: TopicPartition, dest_log_dir: str, *, allow_gaps: bool = False,
                allow_overlap: bool = False) -> ExportedPartition:
    """Check that partition ``tp`` of ``copy`` can be restored into ``dest_log_dir`` (see
    the module for what is refused) and say what would be written; writes nothing."""
    dest_log_dir = require_local_path(os.fspath(dest_log_dir), "tiered export")
    path = os.path.join(dest_log_dir, log_dir_name(tp))
    where = f"{copy.uri} {tp.topic}-{tp.partition}"
    if not _is_empty_dir(path):
        raise TieredStorageError(f"{path} exists and is not empty: export restores into a "
                                 "new (or empty) partition directory only", path=path)
    res = copy.resolution(tp)
    if not res.segments:
        raise TieredStorageError(f"{where}: no complete segment to restore", path=copy.uri)
    plan = ExportedPartition(tp, path, [s.start_offset for s in res.segments],
                             res.start_offset, res.end_offset, sum(s.size for s in res.segments),
                             list(res.gaps))
    overlaps = res.overlaps
    if overlaps and not allow_overlap:
        first = overlaps[0]
        raise TieredStorageError(
            f"{where}: {len(overlaps)} served segment(s) overlap the next one (the first: "
            f"{first[0].segment_id} holds offsets {first[2]}..{first[3]}, which "
            f"{first[1].segment_id} serves); a cut segment cannot be restored byte for "
            "byte: --allow-overlap truncates it at the next one's start", path=copy.uri)
    for earlier, later, _first, _last in overlaps:
        cut_end = _cut_end(copy, tp, earlier, later.start_offset)
        plan.cut.append((earlier.start_offset, later.start_offset))
        if cut_end < later.start_offset:
            plan.gaps.append((cut_end, later.start_offset))
    plan.gaps.sort()
    if plan.gaps and not allow_gaps:
        shown = ", ".join(f"{lo}..{hi - 1}" for lo, hi in plan.gaps[:5])
        why = "are in no served segment" if not plan.cut else \
            "are in no served segment, or in a batch an overlap's cut removes"
        raise TieredStorageError(
            f"{where}: the copy has gaps (offsets {shown}"
            f"{', ...' if len(plan.gaps) > 5 else ''} {why}); --allow-gaps restores the "
            "segments with the gaps between them (Kafka loads non-contiguous segments)",
            path=copy.uri)
    return plan


def _cut_end(copy, tp: TopicPartition, seg, cut: int) -> int:
    """The log end offset of ``seg`` truncated at ``cut`` as Kafka truncates (whole
    batches: a batch holding ``cut`` goes, and the offsets before ``cut`` with it)."""
    from kafkastore.file_records import read_chunks

    ts = copy.tiered_storage
    path = f"{ts.segment_dir(tp, seg.segment_id)}/{seg.start_offset:020d}{LOG_FILE_SUFFIX}"
    end = seg.start_offset
    with ts.open(path) as reader:
        for _start, _data, scan in read_chunks(reader.read, 0, reader.size, 1 << 20,
                                               validate=False):
            for last in scan.last_offset.tolist():
                if last >= cut:
                    return end
                end = last + 1
    return end


def _fsync_path(path: str) -> None:
    fd = _fileio.fs.open(path, os.O_RDONLY)
    try:
        _fileio.fs.fsync(fd)
    finally:
        _fileio.fs.close(fd)


def _write_new(path: str, chunks) -> int:
    """Create ``path`` (never through an existing file) from ``chunks``, fsynced."""
    fd = _fileio.fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    written = 0
    try:
        for data in chunks:
            written += _fileio.write_fully(fd, data)
        _fileio.fs.fsync(fd)
    finally:
        _fileio.fs.close(fd)
    return written


def _copy_file(storage, path: str, dest: str) -> int:
    """The virtual file ``path`` of ``storage`` to ``dest``, in ranged reads."""
    with storage.open(path) as reader:
        size = reader.size

        def chunks():
            for position in range(0, size, _COPY_BLOCK):
                data = reader.read(position, min(_COPY_BLOCK, size - position))
                if len(data) != min(_COPY_BLOCK, size - position):
                    raise TieredStorageError(f"{storage.uri(path)}: short read at {position}",
                                             path=storage.uri(path))
                yield data

        return _write_new(dest, chunks())


def _segment_epoch_bytes(copy, seg) -> bytes | None:
    """The leader-epoch checkpoint uploaded with one segment (None if it has none)."""
    objs = seg.objects
    ts = copy.tiered_storage
    if objs.layout == "aiven":
        if seg.manifest.segment_indexes.get("leaderEpoch") is None:
            return None
        return ts.index_bytes(seg, "leaderEpoch")
    info = objs.files.get(".leader_epoch_checkpoint")
    return None if info is None else copy.storage.read_file(info.path)


def _merge_epochs(copy, res_tp: TopicPartition, res, directory: str, start: int,
                  end: int) -> None:
    """Write ``leader-epoch-checkpoint``: every served segment's entries assigned in
    offset order (Kafka's cache keeps epochs and start offsets increasing), then cut to
    ``[start, end)`` as ``LogLoader`` cuts them."""
    ts = copy.tiered_storage
    cache = LeaderEpochFileCache(directory)   # writes the checkpoint at each change
    for seg in res.segments:
        data = _segment_epoch_bytes(copy, seg)
        if not data:
            continue
        where = ts.uri(ts.segment_dir(res_tp, seg.segment_id))
        for entry in LeaderEpochCheckpointFile(where).parse(data):
            cache.assign(entry.epoch, entry.start_offset)
    cache.truncate_from_end(end)
    cache.truncate_from_start(start)


def _update_checkpoint(path: str, tp: TopicPartition, offset: int) -> None:
    checkpoint = OffsetCheckpointFile(path)
    try:
        entries = dict(checkpoint.read()) if os.path.exists(path) else {}
    except CorruptCheckpointError as exc:
        raise TieredStorageError(f"{path} is malformed ({exc}); not rewriting it",
                                 path=path) from None
    entries[tp] = offset
    checkpoint.write(entries)


def _cut_segment(directory: str, base: int, cut: int) -> None:
    """Kafka's truncation of the segment at ``base`` to below ``cut``, made durable."""
    from kafkastore.config import LogConfig
    from kafkastore.segment import LogSegment

    seg = LogSegment.open(directory, base, LogConfig(), file_already_exists=True)
    try:
        seg.truncate_to(cut)
        seg.flush()
    finally:
        seg.close()
    for name in os.listdir(directory):
        if log_file_offset(name) == base or name.startswith(f"{base:020d}."):
            _fsync_path(os.path.join(directory, name))


def export_partition(copy, tp: TopicPartition, dest_log_dir: str, *,
                     allow_gaps: bool = False, allow_overlap: bool = False,
                     plan: ExportedPartition | None = None) -> ExportedPartition:
    """Restore partition ``tp`` of ``copy`` to ``<dest_log_dir>/<topic>-<partition>``
    (see the module). Returns what was written."""
    dest_log_dir = require_local_path(os.fspath(dest_log_dir), "tiered export")
    if plan is None:
        plan = plan_export(copy, tp, dest_log_dir, allow_gaps=allow_gaps,
                           allow_overlap=allow_overlap)
    _fileio.makedirs(dest_log_dir)
    fresh = not any(other != tp for other, _ in live_partition_dirs(dest_log_dir,
                                                                   strict=False))
    ts = copy.tiered_storage
    res = copy.resolution(tp)
    cut = dict(plan.cut)
    dropped_snapshots = {f"{s.end_offset + 1:020d}{_SNAPSHOT_SUFFIX}" for s in res.segments
                         if s.start_offset in cut}
    staging = os.path.join(dest_log_dir, log_delete_dir_name(tp))
    _fileio.makedirs(staging)
    source_dir = log_dir_name(tp)
    for info in ts.list_dir(source_dir):
        if info.is_dir or info.name in dropped_snapshots or info.name in (
                LEADER_EPOCH_CHECKPOINT_FILENAME, PARTITION_METADATA_FILENAME):
            continue
        _copy_file(ts, info.path, os.path.join(staging, info.name))
    topic_id = copy.topic_id(tp.topic)
    if topic_id:
        write_topic_id(staging, topic_id)   # Kafka's bytes
    for base, at in cut.items():
        _cut_segment(staging, base, at)
    _merge_epochs(copy, tp, res, staging, plan.log_start_offset, plan.log_end_offset)
    _write_new(os.path.join(staging, CLEAN_SHUTDOWN_FILE), [_MARKER])
    _fileio.fs.fsync_dir(staging)
    _update_checkpoint(os.path.join(dest_log_dir, LOG_START_OFFSET_CHECKPOINT_FILE), tp,
                       plan.log_start_offset)
    _update_checkpoint(os.path.join(dest_log_dir, RECOVERY_POINT_CHECKPOINT_FILE), tp,
                       plan.log_end_offset)
    if os.path.isdir(plan.path):
        os.rmdir(plan.path)   # empty (checked): the rename needs the name free
    _fileio.fs.rename(staging, plan.path)
    _fileio.fs.fsync_dir(dest_log_dir)
    marker = os.path.join(dest_log_dir, CLEAN_SHUTDOWN_FILE)
    if fresh and not os.path.exists(marker):
        _write_new(marker, [_MARKER])
        _fileio.fs.fsync_dir(dest_log_dir)
    return plan


def export(copy, dest_log_dir: str, *, topic: str | None = None,
           partition: int | None = None, allow_gaps: bool = False,
           allow_overlap: bool = False) -> list[ExportedPartition]:
    """Restore the partitions of ``copy`` (those of ``topic``, ``partition`` when given)
    into ``dest_log_dir``. Every partition is checked (:func:`plan_export`) before any
    is written, so a refusal leaves the destination as it was."""
    parts = [tp for tp in copy.partitions()
             if (topic is None or tp.topic == topic)
             and (partition is None or tp.partition == partition)]
    if not parts:
        raise TieredStorageError(
            f"{copy.uri}: no partition" + (f" of topic {topic!r}" if topic else "")
            + (f" numbered {partition}" if partition is not None else "")
            + " in the tiered copy", path=copy.uri)
    plans = [plan_export(copy, tp, dest_log_dir, allow_gaps=allow_gaps,
                         allow_overlap=allow_overlap) for tp in parts]
    return [export_partition(copy, p.topic_partition, dest_log_dir, plan=p) for p in plans]
