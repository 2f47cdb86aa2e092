"""Read-only views of a log directory's partitions, for planning Spark reads.

Nothing here changes a file, takes the log directory's lock or maps a file:
a Spark job may read a directory that a broker or a kafkastore ``Log`` is
writing, and a mapped file that another process truncates would kill the reader
with SIGBUS. Files are read with ``pread``; index files are read whole (they are
small) and trusted only as hints: every position taken from them is checked
against the batches found there when a task reads (see
:func:`kafkastore.spark.reader.read_split`).

What a view reports is what was complete when it looked: the log end offset
comes from the last complete entry of the last segment, never from the file
size, so a batch being appended at that moment is not read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from kafkastore import _fileio
from kafkastore.checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkastore.errors import CorruptRecordError, KafkaStoreError
from kafkastore.file_records import FileRecords
from kafkastore.log_dir import live_partition_dirs
from kafkastore.records import iter_batches
from kafkastore.segment import (
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    log_file_offset,
    segment_file,
)
from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME, TopicPartition

__all__ = ["SegmentRef", "PartitionLayout", "list_partitions", "STAGING_DIR"]

#: The subdirectory of a partition directory where Spark write tasks stage batches.
#: Kafka and kafkastore load only files from a partition directory, so it is ignored.
STAGING_DIR = ".kafkastore-staging"

_OFFSET_ENTRY = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">i4")])


@dataclass(frozen=True)
class SegmentRef:
    """One ``.log`` file as planning saw it: base offset, path and size then."""

    base_offset: int
    path: str
    size: int


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


class PartitionLayout:
    """A read-only view of one partition directory: its segments, offsets and indexes.

    Thread-safety: none needed on the driver (one planner per query); the view caches
    index arrays and is not shared across processes.
    """

    def __init__(self, topic: str, partition: int, path: str,
                 log_start_checkpoint: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.path = path
        segments = []
        for name in os.listdir(path):
            base = log_file_offset(name)
            if base is None:
                continue
            full = os.path.join(path, name)
            try:
                size = os.stat(full).st_size
            except FileNotFoundError:
                continue   # deleted by retention or the cleaner while we listed
            segments.append(SegmentRef(base, full, size))
        segments.sort(key=lambda s: s.base_offset)
        self.segments: list[SegmentRef] = segments
        self._indexes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._times: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._leo: int | None = None
        first = segments[0].base_offset if segments else 0
        self._checkpoint_start = log_start_checkpoint
        self.log_start_offset = max(first, log_start_checkpoint or 0)

    @classmethod
    def scan(cls, root: str) -> dict[TopicPartition, PartitionLayout]:
        """Views of every partition under ``root``, with the log start offsets of its
        ``log-start-offset-checkpoint`` (an unreadable checkpoint is ignored: the first
        segment's base offset is then the start, which is never later than Kafka's)."""
        starts: dict[TopicPartition, int] = {}
        ckpt = os.path.join(root, LOG_START_OFFSET_CHECKPOINT_FILE)
        if os.path.exists(ckpt):
            try:
                starts = OffsetCheckpointFile(ckpt).read()
            except (KafkaStoreError, OSError, ValueError):
                starts = {}
        return {tp: cls(tp.topic, tp.partition, path, starts.get(tp))
                for tp, path in list_partitions(root)}

    def __repr__(self) -> str:
        return f"PartitionLayout({self.topic}-{self.partition}, segments={len(self.segments)})"

    # -- offsets ---------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """One past the last offset of the last complete entry (Kafka's LEO)."""
        if self._leo is None:
            self._leo = self._compute_leo()
        return self._leo

    def _compute_leo(self) -> int:
        for seg in reversed(self.segments):
            start = 0
            _, pos = self.offset_index(seg)
            if len(pos):
                start = int(pos[-1])
            last = self._last_offset_from(seg, start)
            if last is None and start:
                last = self._last_offset_from(seg, 0)   # a stale index: walk it all
            if last is not None:
                return max(last + 1, self.log_start_offset)
            if seg.size == 0 or seg is self.segments[-1]:
                # an empty active segment: Kafka rolls it at the log end offset
                return max(seg.base_offset, self.log_start_offset)
        return self.log_start_offset

    @staticmethod
    def _last_offset_from(seg: SegmentRef, start: int) -> int | None:
        try:
            fr = FileRecords.open(seg.path, mutable=False)
        except FileNotFoundError:
            return None
        last = None
        try:
            for header in fr.walk(start, seg.size):
                last = header.last_offset
        except CorruptRecordError:
            pass   # a torn or zero-filled tail: the complete entries before it count
        finally:
            fr.close()
        return last

    def segments_for(self, start: int, end: int) -> list[tuple[SegmentRef, int, int]]:
        """``(segment, lo, hi)`` for each segment holding part of ``[start, end)``."""
        out = []
        segs = self.segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
            lo = max(start, seg.base_offset)
            hi = end if nxt is None else min(end, nxt)
            if lo < hi:
                out.append((seg, lo, hi))
        return out

    # -- indexes (hints) ---------------------------------------------------------------

    def offset_index(self, seg: SegmentRef) -> tuple[np.ndarray, np.ndarray]:
        """The valid entries of ``seg``'s ``.index``: absolute offsets and positions.

        The prefix of entries whose offsets and positions both increase and whose
        positions lie inside the segment; a preallocated index's zeros and anything
        after damage end it. A missing or unreadable index gives no entries.
        """
        cached = self._indexes.get(seg.base_offset)
        if cached is None:
            arr = self._entries(seg, INDEX_FILE_SUFFIX, _OFFSET_ENTRY)
            rel = arr["rel"].astype(np.int64)
            pos = arr["pos"].astype(np.int64)
            n = _increasing_prefix(rel, pos, seg.size)
            cached = self._indexes[seg.base_offset] = (rel[:n] + seg.base_offset, pos[:n])
        return cached

    def time_index(self, seg: SegmentRef) -> tuple[np.ndarray, np.ndarray]:
        """The valid entries of ``seg``'s ``.timeindex``: timestamps and absolute offsets.

        The prefix of entries whose timestamps and offsets do not decrease; an all-zero
        entry after the first (a preallocated file's tail) ends it."""
        cached = self._times.get(seg.base_offset)
        if cached is None:
            arr = self._entries(seg, TIME_INDEX_FILE_SUFFIX, _TIME_ENTRY)
            ts = arr["ts"].astype(np.int64)
            rel = arr["rel"].astype(np.int64)
            zero = (ts == 0) & (rel == 0)
            bad = np.zeros(len(ts), dtype=bool)
            bad[1:] = zero[1:] | (np.diff(ts) < 0) | (np.diff(rel) < 0)
            stop = np.flatnonzero(bad)
            n = int(stop[0]) if len(stop) else len(ts)
            if n == 1 and zero[0] and len(ts) > 1 and ts[1] == 0:
                n = 0   # a zero-filled file; a lone first entry of time 0 is kept
            cached = self._times[seg.base_offset] = (ts[:n], rel[:n] + seg.base_offset)
        return cached

    @staticmethod
    def _entries(seg: SegmentRef, suffix: str, dtype: np.dtype) -> np.ndarray:
        """The whole entries of one of ``seg``'s index files (none if it is missing)."""
        path = segment_file(os.path.dirname(seg.path), seg.base_offset, suffix)
        data = _fileio.read_file(path) or b""
        return np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)

    def floor_position(self, seg: SegmentRef, offset: int) -> tuple[int, int]:
        """``(position, indexed_offset)``: the index entry with the largest offset <=
        ``offset``, or ``(0, -1)`` when there is none. ``indexed_offset`` is the last
        offset of the batch found at ``position`` (what a Kafka index entry holds)."""
        offs, pos = self.offset_index(seg)
        i = int(np.searchsorted(offs, offset, side="right")) - 1
        if i < 0:
            return 0, -1
        return int(pos[i]), int(offs[i])

    # -- timestamps ------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Kafka's ``fetchOffsetByTimestamp`` for ``timestamp >= 0``: the offset of the
        first record with a timestamp >= ``timestamp``, searched from the time index's
        hint in the first segment whose largest timestamp reaches it; None when no
        segment does (Spark-Kafka then applies its no-match rule)."""
        for k, seg in enumerate(self.segments):
            ts, offs = self.time_index(seg)
            last_segment = k == len(self.segments) - 1
            if len(ts) and ts[-1] >= timestamp:
                found = self._find_in_segment(seg, timestamp, ts, offs)
                if found is not None:
                    return found
                continue
            if last_segment or not len(ts):
                # the active segment's newest batches (or an unindexed segment) may
                # reach past the last time-index entry
                found = self._find_in_segment(seg, timestamp, ts, offs)
                if found is not None:
                    return found
        return None

    def _find_in_segment(self, seg: SegmentRef, timestamp: int, ts: np.ndarray,
                         offs: np.ndarray) -> int | None:
        # Kafka's LogSegment.findOffsetByTimestamp: start at the offset index position of
        # the time index's hint, take the first batch whose max timestamp reaches the
        # target (control batches too), and in it the first record at or past both the
        # target and the log start offset
        i = int(np.searchsorted(ts, timestamp, side="right")) - 1
        hint = int(offs[i]) if i >= 0 else seg.base_offset
        pos, _ = self.floor_position(seg, max(hint, self.log_start_offset))
        start = self.log_start_offset
        try:
            fr = FileRecords.open(seg.path, mutable=False)
        except FileNotFoundError:
            return None
        try:
            for header in fr.walk(pos, seg.size):
                if header.max_timestamp < timestamp:
                    continue
                data = fr.read(header.position, header.size)
                for batch in iter_batches(data, validate=True):
                    for rec in batch:
                        if rec.timestamp >= timestamp and rec.offset >= start:
                            return rec.offset
        except CorruptRecordError as exc:
            raise exc.with_context(path=seg.path) from None
        finally:
            fr.close()
        return None


def _increasing_prefix(rel: np.ndarray, pos: np.ndarray, size: int) -> int:
    """How many leading index entries are plausible: offsets and positions strictly
    increasing, positions inside the segment."""
    n = len(rel)
    if n == 0:
        return 0
    ok = np.ones(n, dtype=bool)
    ok[1:] = (np.diff(rel) > 0) & (np.diff(pos) > 0)
    ok &= (pos >= 0) & (pos < max(size, 1)) & (rel >= 0)
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if len(bad) else n
