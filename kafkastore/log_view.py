"""Read-only logs on any file system: a partition directory or a log directory by URI.

:class:`ReadOnlyLog` reads one partition directory (``orders-0``) and
:class:`ReadOnlyLogDir` a log directory of them, wherever they are: a local disk, S3,
GCS, Azure, HDFS or any fsspec file system (:mod:`kafkastore.storage`). Reading has
:class:`~kafkastore.log.Log`'s semantics (``read``, ``offset_for_timestamp`` with the
special timestamps, the log start and end offsets), plus ``records`` and ``columns``
over an offset range; nothing is ever written, locked, mapped or recovered.

What is read, and how much:

* listing: one listing when the view is made (:meth:`ReadOnlyLogDir.open` lists the
  whole tree at once: one paginated request on an object store). Segments and their
  sizes are those of that moment; bytes appended later are not seen, a segment
  deleted later raises :class:`~kafkastore.errors.StorageFileNotFoundError` when read.
* indexes: a segment's ``.index`` / ``.timeindex`` are fetched whole (they are small:
  at most ``segment.index.bytes``) the first time a lookup needs them, and kept. They
  are hints from a file that may be untrimmed or being written: only their valid
  prefix counts (:class:`~kafkastore.index.OffsetIndexView`), and every position
  taken from them is checked against the batch found there.
* segments: ranged reads only, of the bytes a query needs (an index lookup, then a
  bounded window or the range itself); never a whole-segment download unless the
  query wants the whole segment.

The end offset is the offset after the last *complete* entry, never a file size, so a
batch being appended while the view looks is not read. A torn or zero-filled tail is
left out as recovery would cut it; corrupt bytes inside the data raise
:class:`~kafkastore.errors.CorruptRecordError` with the file's URI and the position.

Thread-safety: a view may be read from several threads for lookups (its caches are
filled idempotently); the readers it keeps open are one per segment and a
:class:`~kafkastore.storage.RangeReader` is for one thread at a time, so concurrent
reads of the same segment need a view each. Views pickle (Spark ships them), without
their open readers.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kafkastore.batch_header import RECORD_BATCH_OVERHEAD, read_batch_header
from kafkastore.checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkastore.errors import (
    CorruptRecordError,
    CorruptSnapshotError,
    KafkaStoreError,
    OffsetOutOfRangeError,
    StorageFileNotFoundError,
)
from kafkastore.file_records import LogSlice, StorageRecords
from kafkastore.index_view import OffsetIndexView, TimeIndexView
from kafkastore.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    InvalidPartitionDirError,
    parse_partition_dir_name,
)
from kafkastore.producer_state import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    parse_snapshot,
    skips_producer_state_load,
    stray_snapshot_offsets,
)
from kafkastore.records import (
    RecordColumns,
    decode_columns,
    iter_batches,
    read_batch,
    scan_batches,
)
from kafkastore.segment import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    TimestampAndOffset,
    log_file_offset,
    max_timestamp_record,
)
from kafkastore.storage import FileInfo, ReadOnlyStorage, open_storage
from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME, TopicPartition
from kafkastore.txn_index import (
    READ_UNCOMMITTED,
    AbortedTransactionFilter,
    AbortedTxn,
    check_isolation_level,
    collect_aborted_txns,
    keep_mask,
    parse_aborted_txns,
)

__all__ = ["SegmentRef", "ReadOnlyLog", "ReadOnlyLogDir"]

# Kafka's special timestamps (ListOffsetsRequest), as kafkastore.log names them.
_LATEST, _EARLIEST, _MAX, _EARLIEST_LOCAL, _LATEST_TIERED = -1, -2, -3, -4, -5
_CHUNK = 8 << 20
_READ = 1 << 20


@dataclass(frozen=True)
class SegmentRef:
    """One ``.log`` file as the listing saw it: base offset, path (the store's) and size."""

    base_offset: int
    path: str
    size: int


def _name_of(path: str) -> str:
    return path.rstrip("/").replace("\\", "/").rsplit("/", 1)[-1]


class ReadOnlyLog:
    """A partition directory, read-only, on any file system (see the module).

    Files: ``<base offset, 20 digits>.log`` segments with optional ``.index`` (8-byte
    entries: relative offset int32, position int32) and ``.timeindex`` (12-byte entries:
    timestamp int64, relative offset int32), big-endian, as Kafka writes them; for
    read_committed reads, the ``.txnindex`` files (aborted transactions) and the latest
    producer ``.snapshot`` (open transactions). ``.deleted``/``.cleaned``/``.swap``
    leftovers are not read.

    Invariants: ``segments`` are sorted by base offset and fixed for the view's life;
    ``log_start_offset <= log_end_offset``; reads never return a record below the log
    start offset nor at or past the log end offset.
    """

    def __init__(self, storage: ReadOnlyStorage, path: str, files: list[FileInfo], *,
                 log_start_offset: int | None = None,
                 had_clean_shutdown: bool | None = None) -> None:
        self.storage = storage
        self.path = path
        self.uri = storage.uri(path)
        try:
            self.topic_partition: TopicPartition | None = \
                parse_partition_dir_name(_name_of(path)).topic_partition
        except InvalidPartitionDirError:
            self.topic_partition = None
        self._files = {_name_of(f.path): f for f in files if not f.is_dir}
        # a standalone Log's clean close leaves the marker in the partition directory
        self._had_clean_shutdown = CLEAN_SHUTDOWN_FILE in self._files \
            if had_clean_shutdown is None else had_clean_shutdown
        segments = []
        for name, info in self._files.items():
            if name.endswith(LOG_FILE_SUFFIX):
                base = log_file_offset(name)
                if base is not None:
                    segments.append(SegmentRef(base, info.path, info.size))
        segments.sort(key=lambda s: s.base_offset)
        self.segments: list[SegmentRef] = segments
        self._bases = [s.base_offset for s in segments]
        first = segments[0].base_offset if segments else 0
        self.log_start_offset = max(first, log_start_offset or 0)
        self._lock = threading.Lock()
        self._offset_indexes: dict[int, OffsetIndexView] = {}
        self._time_indexes: dict[int, TimeIndexView] = {}
        self._records: dict[int, StorageRecords] = {}
        self._leo: int | None = None
        self._lso: int | None = None

    @classmethod
    def open(cls, uri: str, *, storage_options: Mapping[str, Any] | None = None,
             storage: ReadOnlyStorage | None = None,
             log_start_offset: int | None = None,
             had_clean_shutdown: bool | None = None) -> ReadOnlyLog:
        """The partition directory ``uri`` (a path or URI; with ``storage``, a path of
        that storage). One listing. ``log_start_offset`` is the log start offset when the
        caller knows it (a ``log-start-offset-checkpoint``); else the first segment's
        base offset. ``had_clean_shutdown`` says whether the writer shut down cleanly
        (the ``.kafka_cleanshutdown`` marker of its log directory); None: whether the
        partition directory holds that marker (a standalone :class:`~kafkastore.log.Log`
        leaves it there). A missing directory raises
        :class:`~kafkastore.errors.StorageFileNotFoundError`."""
        if storage is None:
            storage, path = open_storage(uri, storage_options)
        else:
            path = uri
        return cls(storage, path, storage.list_dir(path), log_start_offset=log_start_offset,
                   had_clean_shutdown=had_clean_shutdown)

    def __repr__(self) -> str:
        return f"ReadOnlyLog({self.uri!r}, segments={len(self.segments)})"

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_records"] = {}
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __enter__(self) -> ReadOnlyLog:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close the segment readers this view opened (the view stays usable: a later
        read opens them again)."""
        with self._lock:
            records, self._records = self._records, {}
        for r in records.values():
            r.close()

    # -- files -----------------------------------------------------------------------

    def _sibling(self, seg: SegmentRef, suffix: str) -> FileInfo | None:
        return self._files.get(_name_of(seg.path)[:-len(LOG_FILE_SUFFIX)] + suffix)

    def segment_records(self, seg: SegmentRef) -> StorageRecords:
        """The open reader of ``seg`` (opened once, with the listed size: no request)."""
        rec = self._records.get(seg.base_offset)
        if rec is None:
            reader = self.storage.open(seg.path, seg.size)
            rec = StorageRecords(reader, self.storage.uri(seg.path))
            with self._lock:
                old = self._records.setdefault(seg.base_offset, rec)
            if old is not rec:
                rec.close()
                rec = old
        return rec

    def _index_bytes(self, seg: SegmentRef, suffix: str) -> tuple[bytes, str]:
        info = self._sibling(seg, suffix)
        if info is None or info.size == 0:
            return b"", ""
        data = self.storage.read_file(info.path)
        return data or b"", self.storage.uri(info.path)

    def offset_index(self, seg: SegmentRef) -> OffsetIndexView:
        """The valid entries of ``seg``'s ``.index`` (none when it is missing)."""
        view = self._offset_indexes.get(seg.base_offset)
        if view is None:
            data, uri = self._index_bytes(seg, INDEX_FILE_SUFFIX)
            view = OffsetIndexView(data, seg.base_offset, uri, segment_size=seg.size)
            self._offset_indexes[seg.base_offset] = view
        return view

    def time_index(self, seg: SegmentRef) -> TimeIndexView:
        """The valid entries of ``seg``'s ``.timeindex`` (none when it is missing)."""
        view = self._time_indexes.get(seg.base_offset)
        if view is None:
            data, uri = self._index_bytes(seg, TIME_INDEX_FILE_SUFFIX)
            view = TimeIndexView(data, seg.base_offset, uri)
            self._time_indexes[seg.base_offset] = view
        return view

    def floor_position(self, seg: SegmentRef, offset: int) -> tuple[int, int]:
        """``(position, indexed_offset)``: the index entry with the largest offset <=
        ``offset``, or ``(0, -1)`` when there is none. ``indexed_offset`` is the last
        offset of the batch found at ``position`` (what a Kafka index entry holds)."""
        index = self.offset_index(seg)
        if index.entries == 0 or index.entry(0).offset > offset:
            return 0, -1
        found, position = index.lookup(offset)
        return position, found

    def read_start(self, seg: SegmentRef, offset: int) -> int:
        """Where a read of ``offset`` starts: :meth:`floor_position`'s batch (the last
        one the offset index maps at or below ``offset``), or the next entry's batch
        where :meth:`_past_floor` finds it holds ``offset`` in a later chunk."""
        index = self.offset_index(seg)
        if index.entries == 0 or index.entry(0).offset > offset:
            return 0
        found, position, nxt = index.lookup_with_next(offset)
        return position if found == offset else self._past_floor(seg, offset, position, nxt)

    def _past_floor(self, seg: SegmentRef, offset: int, position: int, nxt: int) -> int:
        """``nxt`` (the index entry after the floor ``position``) when the segment is
        read in chunks (a tiered copy's transformed segment), ``nxt`` lies in a later
        chunk than ``position`` and its batch holds ``offset``, so the floor's chunk is
        not fetched for one batch header; else ``position``. Costs one header read at
        ``nxt``, in the chunk the read needs anyway."""
        if nxt <= position or nxt >= seg.size:
            return position
        records = self.segment_records(seg)
        bounds = records.chunk_bounds(position)
        if bounds is None or nxt < bounds[1]:
            return position
        try:
            header = read_batch_header(records.read(nxt, RECORD_BATCH_OVERHEAD))
        except CorruptRecordError:
            return position     # the walk from the floor meets (and reports) it
        if header.magic >= 2 and header.base_offset <= offset <= header.last_offset:
            return nxt
        return position

    def end_position(self, seg: SegmentRef, offset: int) -> int:
        """A byte position of ``seg`` at or past the end of the batch holding
        ``offset - 1``, where a read of the offsets below ``offset`` may stop: the
        position of the index entry after the first one whose batch ends at or past
        ``offset - 1`` (the batches between are at most ``index.interval.bytes``), or
        the segment's size."""
        index = self.offset_index(seg)
        n = index.entries
        lo, hi = 0, n
        while lo < hi:   # the first entry whose offset is >= offset - 1
            mid = (lo + hi) // 2
            if index.entry(mid).offset < offset - 1:
                lo = mid + 1
            else:
                hi = mid
        if lo + 1 < n:
            return index.entry(lo + 1).position
        return seg.size

    # -- offsets ---------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """One past the last offset of the last complete entry (Kafka's LEO)."""
        if self._leo is None:
            self._leo = self._compute_leo()
        return self._leo

    def _compute_leo(self) -> int:
        for seg in reversed(self.segments):
            index = self.offset_index(seg)
            start = index.last_entry.position if index.entries else 0
            last = self._last_offset_from(seg, start)
            if last is None and start:
                last = self._last_offset_from(seg, 0)   # a stale index: walk it all
            if last is not None:
                return max(last + 1, self.log_start_offset)
            if seg.size == 0 or seg is self.segments[-1]:
                # an empty active segment: Kafka rolls it at the log end offset
                return max(seg.base_offset, self.log_start_offset)
        return self.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO as the files say it: the first offset of the oldest transaction
        with no marker yet (open in the latest readable producer snapshot at or below the
        log end offset, or begun by a batch after it), else the log end offset. Found by
        a walk of the batch headers after that snapshot (from the log start without
        one). The snapshots are those :meth:`Log.open <kafkastore.log.Log.open>` keeps
        (stray ones are not); with none of them after a clean shutdown, the log end
        offset, as ``Log.open`` finds it
        (:func:`~kafkastore.producer_state.skips_producer_state_load`)."""
        if self._lso is None:
            self._lso = self._compute_lso()
        return self._lso

    def fetch_end_offset(self, isolation_level: str = READ_UNCOMMITTED) -> int:
        """Where a fetch of ``isolation_level`` ends: the LSO for read_committed, else the
        log end offset."""
        if check_isolation_level(isolation_level):
            return self.last_stable_offset
        return self.log_end_offset

    def _compute_lso(self) -> int:
        end = self.log_end_offset
        open_txns: dict[int, int] = {}
        start = None
        suffix = PRODUCER_SNAPSHOT_FILE_SUFFIX
        snapshots = sorted((int(name[:-len(suffix)]), info) for name, info in self._files.items()
                           if name.endswith(suffix) and name[:-len(suffix)].isdigit())
        strays = set(stray_snapshot_offsets([offset for offset, _ in snapshots], self._bases))
        snapshots = [(offset, info) for offset, info in snapshots if offset not in strays]
        if skips_producer_state_load(snapshots[-1][0] if snapshots else None,
                                     self._had_clean_shutdown):
            return end
        for offset, info in reversed(snapshots):
            if offset > end:
                continue
            uri = self.storage.uri(info.path)
            try:
                entries = parse_snapshot(self.storage.read_file(info.path) or b"", uri)
            except CorruptSnapshotError:
                continue   # an older one, as Kafka's loader falls back
            open_txns = {e.producer_id: e.current_txn_first_offset for e in entries
                         if e.current_txn_first_offset is not None}
            start = offset
            break
        if start is None:
            start = self.log_start_offset
        for seg, lo, hi in self.segments_for(start, end):
            position, _ = self.floor_position(seg, lo)
            try:
                for header, raw in self.segment_records(seg).walk_headers(position,
                                                                          end=seg.size):
                    if header.last_offset < lo or header.magic < 2 or \
                            len(raw) < RECORD_BATCH_OVERHEAD:
                        continue
                    if header.base_offset >= hi:
                        break
                    h = read_batch_header(raw)
                    pid = h.producer_id
                    if pid < 0 or not h.is_transactional:
                        continue
                    if h.is_control:
                        if h.record_count > 0:
                            open_txns.pop(pid, None)   # a marker ends the transaction
                    elif pid not in open_txns:
                        open_txns[pid] = header.base_offset
            except CorruptRecordError:
                break   # a torn tail: the log end offset stops before it anyway
        # (lower-bounded by the log start offset, as Kafka's first unstable offset is)
        return min(max(min(open_txns.values(), default=end), self.log_start_offset), end)

    def collect_aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions a read of ``[start, end)`` needs (Kafka's
        ``collectAbortedTransactions``), from the ``.txnindex`` files."""
        out: list[AbortedTxn] = []
        segs = self.segments
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in segs[i:]:
            info = self._sibling(seg, TXN_INDEX_FILE_SUFFIX)
            if info is None or info.size == 0:
                continue
            uri = self.storage.uri(info.path)
            entries = parse_aborted_txns(self.storage.read_file(info.path) or b"", uri)
            found = collect_aborted_txns(entries, start, end)
            out.extend(found.aborted)
            if found.complete:
                break
        return out

    def _last_offset_from(self, seg: SegmentRef, start: int) -> int | None:
        last = None
        try:
            for header in self.segment_records(seg).walk(start, seg.size):
                last = header.last_offset
        except CorruptRecordError:
            pass   # a torn or zero-filled tail: the complete entries before it count
        return last

    def segments_for(self, start: int, end: int) -> list[tuple[SegmentRef, int, int]]:
        """``(segment, lo, hi)`` for each segment holding part of ``[start, end)``."""
        out = []
        segs = self.segments
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for k in range(i, len(segs)):
            seg = segs[k]
            nxt = segs[k + 1].base_offset if k + 1 < len(segs) else None
            lo = max(start, seg.base_offset)
            hi = end if nxt is None else min(end, nxt)
            if lo < hi:
                out.append((seg, lo, hi))
            if nxt is not None and nxt >= end:
                break
        return out

    # -- reading ---------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, min_one_message: bool = True) -> LogSlice:
        """:meth:`Log.read <kafkastore.log.Log.read>`: a slice starting at the batch
        holding ``offset``, at most ``max_bytes`` (the whole first batch if
        ``min_one_message``), empty at the log end; read lazily through the store.
        Raises :class:`~kafkastore.errors.OffsetOutOfRangeError` outside
        ``[log_start_offset, log_end_offset]``."""
        end = self.log_end_offset
        start = self.log_start_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.uri}, but we only "
                f"have log segments in the range {start} to {end}.", offset=offset,
                path=self.uri)
        if not self.segments:
            raise OffsetOutOfRangeError(f"{self.uri} has no segments", offset=offset,
                                        path=self.uri)
        if offset < end:
            i = max(0, bisect.bisect_right(self._bases, offset) - 1)
            for seg in self.segments[i:]:
                found = self._read_segment(seg, offset, max_bytes, min_one_message)
                if found is not None:
                    return found
        last = self.segments[-1]
        return LogSlice(self.segment_records(last), last.size, 0, offset)

    def _read_segment(self, seg: SegmentRef, offset: int, max_bytes: int,
                      min_one_message: bool) -> LogSlice | None:
        # Kafka's LogSegment.read over the store: the index bounds the search, one
        # windowed ranged read usually serves both the search and the data
        records = self.segment_records(seg)
        index = self.offset_index(seg)
        index_offset, index_position, next_position = index.lookup_with_next(offset)
        at_start = index_offset == offset
        if not at_start:
            index_position = self._past_floor(seg, offset, index_position, next_position)
            at_start = index_position == next_position
        try:
            header, data = records.search_with_data(
                offset, index_position, max_bytes, next_position=next_position,
                at_start=at_start)
        except CorruptRecordError as exc:
            raise exc.with_context(path=records.path) from None
        if header is None:
            return None
        adjusted = max(max_bytes, header.size) if min_one_message else max_bytes
        if adjusted == 0:
            return LogSlice(records, header.position, 0, offset, first_entry_incomplete=False)
        fetch_size = max(0, min(seg.size - header.position, adjusted))
        if data is not None and len(data) != fetch_size:
            data = data[:fetch_size] if len(data) > fetch_size else None
        return LogSlice(records, header.position, fetch_size, offset,
                        first_entry_incomplete=adjusted < header.size, data=data)

    def _bounds(self, start: int | None, end: int | None) -> tuple[int, int]:
        lo = self.log_start_offset if start is None else start
        hi = self.log_end_offset if end is None else min(end, self.log_end_offset)
        if lo < self.log_start_offset or lo > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Offset {lo} is outside {self.uri}'s range {self.log_start_offset} to "
                f"{self.log_end_offset}", offset=lo, path=self.uri)
        return lo, hi

    def _range(self, start: int | None, end: int | None, isolation_level: str):
        """``(lo, hi, filter)`` of a read: read_committed ends at the last stable offset
        and filters with the aborted transactions of the range (else the filter is
        None)."""
        lo, hi = self._bounds(start, end)
        if not check_isolation_level(isolation_level):
            return lo, hi, None
        hi = min(hi, self.last_stable_offset)
        return lo, hi, AbortedTransactionFilter(self.collect_aborted_transactions(lo, hi))

    def _chunks(self, lo: int, hi: int) -> Iterator[tuple[bytes, int, str, int, int]]:
        """The bytes of the complete entries that hold ``[lo, hi)``: ``(data, position,
        uri, a, b)`` in bounded ranged reads, from each segment's index floor of ``lo`` to
        the index's bound past ``hi``; ``[a, b)`` is the part of ``[lo, hi)`` the
        segment serves (up to the next segment's base offset: where segments overlap, as
        a tiered copy's may, the later one serves the overlap, so callers keep only the
        rows of ``[a, b)``)."""
        from kafkastore.file_records import read_chunks

        for seg, a, b in self.segments_for(lo, hi):
            records = self.segment_records(seg)
            position = self.read_start(seg, a)
            stop = self.end_position(seg, b)
            for pos, data, scan in read_chunks(records.read, position, stop, _CHUNK):
                if scan.valid_bytes:
                    yield data[:scan.valid_bytes], pos, records.path, a, b
                if scan.error is not None:
                    raise scan.error.with_context(path=records.path, position_base=pos)
                if len(scan) and int(scan.last_offset[len(scan) - 1]) >= b - 1:
                    break

    def records(self, start: int | None = None, end: int | None = None, *,
                include_control: bool = False,
                isolation_level: str = READ_UNCOMMITTED) -> Iterator:
        """Every record with ``start <= offset < end`` (default: the whole log), as
        :class:`~kafkastore.records.Record` objects, CRCs checked; control batches'
        records only with ``include_control``. ``isolation_level="read_committed"``
        stops at the last stable offset and leaves out the records of aborted
        transactions (and the control batches), as Kafka's consumer does."""
        lo, hi, txn_filter = self._range(start, end, isolation_level)
        for data, pos, uri, a, b in self._chunks(lo, hi):
            try:
                for batch in iter_batches(data, validate=True):
                    if batch.last_offset < a:
                        continue
                    if txn_filter is not None and not txn_filter.keep(batch):
                        continue
                    if batch.is_control and not include_control:
                        continue
                    past = False
                    for rec in batch:
                        if rec.offset >= b:
                            past = True
                            break
                        if rec.offset >= a:
                            yield rec
                    if past:
                        break
            except CorruptRecordError as exc:
                raise exc.with_context(path=uri) from None

    def columns(self, start: int | None = None, end: int | None = None, *,
                headers: bool = False,
                isolation_level: str = READ_UNCOMMITTED) -> RecordColumns:
        """The records of ``[start, end)`` decoded into numpy columns
        (:func:`~kafkastore.records.decode_columns`; control batches left out); with
        ``isolation_level="read_committed"`` as :meth:`records` filters them."""
        lo, hi, txn_filter = self._range(start, end, isolation_level)
        parts = []
        for data, pos, uri, lo_seg, hi_seg in self._chunks(lo, hi):
            try:
                cols = decode_columns(data, headers=headers)
            except CorruptRecordError as exc:
                raise exc.with_context(path=uri) from None
            off = cols.offset
            a = int(np.searchsorted(off, lo_seg, side="left"))
            b = int(np.searchsorted(off, hi_seg, side="left"))
            if b <= a:
                continue
            if txn_filter is not None:
                scan = scan_batches(data, validate=False)
                firsts, lasts = txn_filter.aborted_ranges(data, scan.position, scan.size,
                                                          scan.magic)
                keep = keep_mask(np.asarray(off[a:b]), firsts, lasts)
                if keep is not None:
                    rows = np.flatnonzero(keep)
                    for r0, r1 in _row_runs(rows):
                        parts.append(_slice_columns(cols, a + r0, a + r1))
                    continue
            parts.append(_slice_columns(cols, a, b))
        return _concat_columns(parts, headers)

    # -- timestamps ------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """:meth:`Log.offset_for_timestamp <kafkastore.log.Log.offset_for_timestamp>`:
        ``-2`` (earliest) and ``-4`` the log start offset, ``-1`` (latest) the log end
        offset, ``-3`` the record with the largest timestamp, ``-5`` (latest tiered)
        -1; a timestamp >= 0 the first record at or after it, or None."""
        if timestamp in (_EARLIEST, _EARLIEST_LOCAL):
            return TimestampAndOffset(-1, self.log_start_offset, None)
        if timestamp == _LATEST:
            return TimestampAndOffset(-1, self.log_end_offset, None)
        if timestamp == _LATEST_TIERED:
            return TimestampAndOffset(-1, -1, None)
        if timestamp == _MAX:
            return self._max_timestamp_offset()
        if timestamp < 0:
            raise ValueError(f"Unknown special timestamp {timestamp}")
        segs = self.segments
        for k, seg in enumerate(segs):
            tindex = self.time_index(seg)
            last_ts = tindex.last_entry.timestamp if tindex.entries else -1
            if last_ts >= timestamp:
                found = self._find_in_segment(seg, timestamp)
                if found is not None:
                    return found
            elif k == len(segs) - 1 or not tindex.entries:
                # the active segment's newest batches (or an unindexed segment) may
                # reach past the last time-index entry
                found = self._find_in_segment(seg, timestamp)
                if found is not None:
                    return found
        return None

    def _find_in_segment(self, seg: SegmentRef, timestamp: int) -> TimestampAndOffset | None:
        # Kafka's LogSegment.findOffsetByTimestamp: from the offset index position of the
        # time index's hint, the first batch whose max timestamp reaches the target, and
        # in it the first record at or past both the target and the log start offset
        _, hint = self.time_index(seg).lookup(timestamp)
        start = self.log_start_offset
        position = self.read_start(seg, max(hint, start))
        records = self.segment_records(seg)
        try:
            for header in records.walk(position, seg.size):
                if header.max_timestamp < timestamp:
                    continue
                batch = read_batch(records.read(header.position, header.size))
                epoch = getattr(batch, "partition_leader_epoch", -1)
                for rec in batch:
                    if rec.timestamp >= timestamp and rec.offset >= start:
                        return TimestampAndOffset(rec.timestamp, rec.offset,
                                                  epoch if epoch >= 0 else None)
        except CorruptRecordError as exc:
            raise exc.with_context(path=records.path) from None
        return None

    def _segment_max_timestamp(self, seg: SegmentRef) -> tuple[int, int]:
        """``(max timestamp, position of the first batch reaching it)``, -1 if none:
        the time index's last entry, then a walk of the batches after it."""
        tindex = self.time_index(seg)
        start = 0
        if tindex.entries:
            ts, offset = tindex.last_entry
            start, _ = self.floor_position(seg, offset)
        best, where = -1, start   # no timestamps: the walk for -1 starts at the floor
        for header in self.segment_records(seg).walk(start, seg.size):
            if header.max_timestamp > best:
                best, where = header.max_timestamp, header.position
        return best, where

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        best = None
        for seg in self.segments:
            ts, where = self._segment_max_timestamp(seg)
            if best is None or ts > best[0]:
                best = (ts, seg, where)
        if best is None:
            return None
        ts, seg, where = best
        records = self.segment_records(seg)
        return max_timestamp_record(records.walk(where, seg.size), records.read, ts)


def _row_runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` runs of consecutive indices in sorted ``rows``."""
    if rows.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [rows.size]))
    return [(int(rows[s]), int(rows[e - 1]) + 1) for s, e in zip(starts, ends)]


def _slice_columns(cols: RecordColumns, a: int, b: int) -> dict:
    """Rows ``[a, b)`` of ``cols`` as a column dict (offsets rebased to 0)."""
    out = {}
    for name in ("offset", "timestamp", "timestamp_type", "key_null", "value_null",
                 "header_count"):
        out[name] = getattr(cols, name)[a:b]
    for kind in ("key", "value"):
        offs = getattr(cols, f"{kind}_offsets")
        out[f"{kind}_offsets"] = offs[a:b + 1] - offs[a]
        out[f"{kind}_data"] = getattr(cols, f"{kind}_data")[offs[a]:offs[b]]
    ho = cols.header_offsets
    if ho is not None:
        h0, h1 = int(ho[a]), int(ho[b])
        out["header_offsets"] = ho[a:b + 1] - h0
        for kind in ("key", "value"):
            offs = getattr(cols, f"header_{kind}_offsets")
            out[f"header_{kind}_offsets"] = offs[h0:h1 + 1] - offs[h0]
            out[f"header_{kind}_data"] = getattr(cols, f"header_{kind}_data")[offs[h0]:offs[h1]]
        out["header_value_null"] = cols.header_value_null[h0:h1]
    return out


def _concat_columns(parts: list[dict], headers: bool) -> RecordColumns:
    """One :class:`RecordColumns` of the row slices ``parts``, in order."""
    if not parts:
        return decode_columns(b"", headers=headers)
    if len(parts) == 1:
        return RecordColumns(parts[0])

    def offsets(name: str) -> np.ndarray:
        pieces, base = [np.zeros(1, np.int64)], 0
        for p in parts:
            o = p[name]
            pieces.append(o[1:] + base)
            base += int(o[-1])
        return np.concatenate(pieces)

    out = {name: np.concatenate([p[name] for p in parts])
           for name in parts[0] if not name.endswith("_offsets")}
    for name in parts[0]:
        if name.endswith("_offsets"):
            out[name] = offsets(name)
    return RecordColumns(out)


class ReadOnlyLogDir:
    """A log directory of partition directories, read-only, on any file system.

    One listing of the whole tree when opened (:meth:`ReadOnlyStorage.walk
    <kafkastore.storage.ReadOnlyStorage.walk>`): the live partition directories
    (``<topic>-<partition>``, not ``-delete``/``-future``/``-stray`` ones, not the KRaft
    ``__cluster_metadata-0`` log), each with its files, and the log start offsets of the
    ``log-start-offset-checkpoint`` when it is there and readable (a checkpoint that is
    not is ignored: the first segment's base offset is then the start, which is never
    later than Kafka's).

    Thread-safety: as :class:`ReadOnlyLog`; the views it hands out are its own.
    """

    def __init__(self, storage: ReadOnlyStorage, path: str, files: list[FileInfo]) -> None:
        self.storage = storage
        self.path = path
        self.uri = storage.uri(path)
        root = path.rstrip("/")
        by_dir: dict[str, list[FileInfo]] = {}
        dirs: dict[str, str] = {}
        checkpoint = None
        clean = False
        for info in files:
            rel = info.path[len(root):].lstrip("/") if info.path.startswith(root) else \
                info.path
            parts = rel.replace("\\", "/").split("/")
            if len(parts) == 1:
                if info.is_dir:
                    dirs[parts[0]] = info.path
                elif parts[0] == LOG_START_OFFSET_CHECKPOINT_FILE:
                    checkpoint = info
                elif parts[0] == CLEAN_SHUTDOWN_FILE:
                    clean = True   # (a LogManager's clean shutdown marks its log dir)
            elif len(parts) == 2 and not info.is_dir:
                by_dir.setdefault(parts[0], []).append(info)
        self._partitions: dict[TopicPartition, tuple[str, list[FileInfo]]] = {}
        for name in sorted(set(dirs) | set(by_dir)):
            try:
                parsed = parse_partition_dir_name(name)
            except InvalidPartitionDirError:
                continue
            if parsed.suffix or parsed.topic_partition.topic == CLUSTER_METADATA_TOPIC_NAME:
                continue
            self._partitions[parsed.topic_partition] = (
                dirs.get(name, storage.join(path, name)), by_dir.get(name, []))
        self._starts = self._read_checkpoint(checkpoint)
        self._clean = clean
        self._logs: dict[TopicPartition, ReadOnlyLog] = {}

    @classmethod
    def open(cls, uri: str, *, storage_options: Mapping[str, Any] | None = None,
             storage: ReadOnlyStorage | None = None) -> ReadOnlyLogDir:
        """The log directory ``uri`` (a path or URI; with ``storage``, a path of that
        storage). A missing directory raises
        :class:`~kafkastore.errors.StorageFileNotFoundError`."""
        if storage is None:
            storage, path = open_storage(uri, storage_options)
        else:
            path = uri
        return cls(storage, path, storage.walk(path))

    def _read_checkpoint(self, info: FileInfo | None) -> dict[TopicPartition, int]:
        if info is None:
            return {}
        try:
            data = self.storage.read_file(info.path, limit=16 << 20)
            if data is None:
                return {}
            return OffsetCheckpointFile(self.storage.uri(info.path)).parse(data)
        except (KafkaStoreError, OSError, ValueError):
            return {}

    def __repr__(self) -> str:
        return f"ReadOnlyLogDir({self.uri!r}, partitions={len(self._partitions)})"

    def __enter__(self) -> ReadOnlyLogDir:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def partitions(self) -> list[TopicPartition]:
        """The live partitions, sorted by topic and partition."""
        return sorted(self._partitions, key=lambda tp: (tp.topic, tp.partition))

    def partition_path(self, tp: TopicPartition) -> str:
        return self._partitions[tp][0]

    def log_start_offsets(self) -> dict[TopicPartition, int]:
        """What the ``log-start-offset-checkpoint`` says (empty if absent or unreadable)."""
        return dict(self._starts)

    def log(self, tp: TopicPartition) -> ReadOnlyLog:
        """The view of partition ``tp`` (made from the directory's one listing)."""
        view = self._logs.get(tp)
        if view is None:
            try:
                path, files = self._partitions[tp]
            except KeyError:
                raise StorageFileNotFoundError(
                    f"{self.uri} has no partition directory {tp.topic}-{tp.partition}",
                    path=self.uri) from None
            view = self._logs[tp] = ReadOnlyLog(self.storage, path, files,
                                                log_start_offset=self._starts.get(tp),
                                                had_clean_shutdown=self._clean or None)
        return view

    def logs(self) -> dict[TopicPartition, ReadOnlyLog]:
        return {tp: self.log(tp) for tp in self.partitions()}

    def close(self) -> None:
        for view in self._logs.values():
            view.close()
