"""A Spark read of a tiered-storage copy, alone or under a log directory: the union by offset.

With the reader option ``tieredStorage`` the source reads the remote copy of a topic
(KIP-405: the segments a RemoteStorageManager uploaded, :mod:`kafkastore.tiered`), served
as a virtual log directory whose per-partition views are ordinary
:class:`~kafkastore.log_view.ReadOnlyLog`s. With a log directory (``path``) as well, each
partition is the union of the two, as Kafka serves a tiered topic:

* the *remote part* is the tiered copy's offsets below the local log start offset ``L``
  (the first local segment's base offset, or the ``log-start-offset-checkpoint`` if that
  is higher: records deleted by DeleteRecords are not read back from the copy); its
  start is the copy's first offset, raised to the checkpoint's log start offset when that
  is higher (Kafka's ``logStartOffset`` of a tiered topic, kept in the checkpoint);
* the *local part* is the log directory's, from ``L`` to its end offset. Where both hold
  an offset the local segment wins; no offset is read twice. A partition in only one of
  them is read from that one.

Offsets that neither holds inside the union's range are a gap: between the copy's chosen
segments (:meth:`kafkastore.tiered.TieredCopy.resolution`'s ``gaps``), or between the
copy's end and ``L`` (local retention deleted segments that were never uploaded). The
planner asks :meth:`UnionLog.missing` for the gaps a range crosses; ``failOnDataLoss``
(default true) fails the query naming the partition and offsets, false skips them.

:class:`UnionLog` has the part of :class:`~kafkastore.log_view.ReadOnlyLog`'s interface
the planner uses (:mod:`kafkastore.spark.planner`), dispatching each segment to the log
that holds it; :meth:`UnionLog.is_tiered` and :meth:`UnionLog.chunk_starts` tell the
planner which segments are remote and where their chunks start. Remote segments never
change once uploaded (a retried upload has a new segment id), so positions from their
indexes are trusted: the planner marks them ``expect_last = -1`` and the reader does not
check the batch there.

The driver lists the copy once (:func:`scan_union`); each task gets, with its split,
:func:`task_storage`: the copy's virtual storage cut down to the split's segments, with
their manifests and the key ring, so a worker lists nothing and fetches no manifest.

Thread-safety: as :class:`~kafkastore.log_view.ReadOnlyLog` (a view for one planner).
Needs no pyspark; :func:`open_copy` imports :mod:`kafkastore.tiered`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kafkastore.log_view import ReadOnlyLog, ReadOnlyLogDir, SegmentRef
from kafkastore.segment import TimestampAndOffset
from kafkastore.topic import TopicPartition

__all__ = ["UnionLog", "UnionLayouts", "open_copy", "scan_union", "task_storage"]

_EARLIEST, _LATEST, _MAX, _EARLIEST_LOCAL, _LATEST_TIERED = -2, -1, -3, -4, -5


def open_copy(tiered) -> Any:
    """The :class:`~kafkastore.tiered.TieredCopy` the options ``tiered``
    (:class:`~kafkastore.spark.options.TieredOptions`) name: one listing of the copy and
    its manifests."""
    from kafkastore.tiered import open_tiered

    key_ring = None
    if tiered.key_ring:
        from kafkastore.tiered.crypto import KeyRing
        key_ring = KeyRing.from_spec(tiered.key_ring)
    return open_tiered(tiered.uri, layout=tiered.layout, storage_options=tiered.storage,
                       key_ring=key_ring, key_prefix=tiered.key_prefix)


class UnionLog:
    """One partition: the remote part of a tiered copy below the local part of a log
    directory (see the module). ``remote`` is a loader of the copy's view (called the
    first time the remote part is needed), ``local`` the log directory's view; either
    may be None. ``gaps`` are the copy's gaps ``[(lo, hi)]`` between its segments (a
    loader too), ``checkpoint`` the log directory's log start offset checkpoint of the
    partition, ``chunk_starts(seg)`` the original positions of a remote segment's chunks.
    """

    def __init__(self, tp: TopicPartition, *,
                 remote: Callable[[], ReadOnlyLog | None] | None = None,
                 local: ReadOnlyLog | None = None,
                 gaps: Callable[[], list[tuple[int, int]]] | None = None,
                 checkpoint: int | None = None,
                 chunk_starts: Callable[[SegmentRef], Sequence[int] | None] | None = None,
                 uri: str = "") -> None:
        self.topic_partition = tp
        self._remote_loader = remote
        self._remote: ReadOnlyLog | None = None
        self._loaded = remote is None
        self.local = local if local is not None and local.segments else None
        self._gaps_loader = gaps
        self._checkpoint = checkpoint
        self._chunk_starts = chunk_starts
        self._remote_ids: set[int] = set()
        self._remote_end: int | None = None
        self.path = uri
        self.uri = uri

    def __repr__(self) -> str:
        return f"UnionLog({self.topic_partition}, {self.uri!r})"

    # -- the two parts -----------------------------------------------------------------

    @property
    def remote(self) -> ReadOnlyLog | None:
        """The tiered copy's view of the partition (None if the copy has none), with its
        log start offset raised to the checkpoint's (no read goes below it)."""
        if not self._loaded:
            self._loaded = True
            view = self._remote_loader()
            if view is not None and view.segments:
                if self._checkpoint is not None and self._checkpoint > view.log_start_offset:
                    view.log_start_offset = self._checkpoint
                self._remote = view
                self._remote_ids = {id(seg) for seg in view.segments}
        return self._remote

    @property
    def boundary(self) -> int | None:
        """``L``: where the local part starts (None without one)."""
        return None if self.local is None else self.local.log_start_offset

    def _remote_range(self) -> tuple[int, int] | None:
        """``[start, stop)`` the remote part may serve (None when it serves nothing):
        up to ``L``, or to the copy's end without a local part."""
        remote = self.remote
        if remote is None:
            return None
        start = remote.log_start_offset
        if self.local is None:
            return start, max(start, remote.log_end_offset)
        stop = self.boundary
        return (start, stop) if start < stop else None

    def is_tiered(self, seg: SegmentRef) -> bool:
        """Whether ``seg`` is a segment of the tiered copy."""
        return id(seg) in self._remote_ids

    def _log_of(self, seg: SegmentRef) -> ReadOnlyLog:
        return self._remote if self.is_tiered(seg) else self.local

    def chunk_starts(self, seg: SegmentRef) -> Sequence[int] | None:
        if not self.is_tiered(seg) or self._chunk_starts is None:
            return None
        return self._chunk_starts(seg)

    @property
    def segments(self) -> list[SegmentRef]:
        """The segments the union reads from: the remote part's, then the local ones."""
        out = []
        r = self._remote_range()
        if r is not None:
            out.extend(seg for seg, _, _ in self.remote.segments_for(*r))
        if self.local is not None:
            out.extend(self.local.segments)
        return out

    # -- offsets -----------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        r = self._remote_range()
        if r is not None:
            return r[0]
        if self.local is not None:
            return self.local.log_start_offset
        return 0 if self.remote is None else self.remote.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.fetch_end_offset()

    @property
    def last_stable_offset(self) -> int:
        return self.fetch_end_offset("read_committed")

    def fetch_end_offset(self, isolation_level: str = "read_uncommitted") -> int:
        # (the tail, and so the open transactions, is the local part's when there is one)
        if self.local is not None:
            return self.local.fetch_end_offset(isolation_level)
        if self.remote is not None:
            return self.remote.fetch_end_offset(isolation_level)
        return 0

    def _copy_end(self) -> int:
        """One past the copy's last offset (read from its last segment's tail once)."""
        if self._remote_end is None:
            self._remote_end = self.remote.log_end_offset
        return self._remote_end

    def missing(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """``(lo, hi, why)`` of each gap in ``[start, end)``: offsets in neither part."""
        r = self._remote_range()
        if r is None or start >= r[1]:
            return []
        out = []
        for lo, hi in (self._gaps_loader() if self._gaps_loader else ()):
            lo, hi = max(lo, start, r[0]), min(hi, end, r[1])
            if lo < hi:
                out.append((lo, hi, f"the tiered copy {self.uri} has no segment holding them"))
        if self.local is not None and self.remote.segments[-1].base_offset < r[1]:
            copy_end = self._copy_end()
            lo, hi = max(copy_end, start), min(r[1], end)
            if lo < hi:
                out.append((lo, hi, f"the tiered copy {self.uri} ends at offset {copy_end} "
                                    f"and the log directory starts at {r[1]}"))
        return sorted(out)

    def segments_for(self, start: int, end: int) -> list[tuple[SegmentRef, int, int]]:
        out = []
        r = self._remote_range()
        if r is not None and start < r[1]:
            out.extend(self.remote.segments_for(max(start, r[0]), min(end, r[1])))
        if self.local is not None and end > self.boundary:
            out.extend(self.local.segments_for(max(start, self.boundary), end))
        return out

    def floor_position(self, seg: SegmentRef, offset: int) -> tuple[int, int]:
        position, indexed = self._log_of(seg).floor_position(seg, offset)
        # a remote segment never changes: its index is trusted, the batch not checked
        return (position, -1) if self.is_tiered(seg) else (position, indexed)

    def end_position(self, seg: SegmentRef, offset: int) -> int:
        return self._log_of(seg).end_position(seg, offset)

    def offset_index(self, seg: SegmentRef):
        return self._log_of(seg).offset_index(seg)

    def collect_aborted_transactions(self, start: int, end: int) -> list:
        out = []
        r = self._remote_range()
        if r is not None and start < r[1]:
            out.extend(self.remote.collect_aborted_transactions(max(start, r[0]),
                                                                min(end, r[1])))
        if self.local is not None and end > self.boundary:
            out.extend(self.local.collect_aborted_transactions(max(start, self.boundary),
                                                               end))
        seen, unique = set(), []
        for txn in out:   # a transaction across the boundary is in both indexes
            key = (txn.producer_id, txn.first_offset, txn.last_offset)
            if key not in seen:
                seen.add(key)
                unique.append(txn)
        return unique

    # -- timestamps --------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """As :meth:`ReadOnlyLog.offset_for_timestamp
        <kafkastore.log_view.ReadOnlyLog.offset_for_timestamp>` over the union: a
        timestamp >= 0 is searched in the remote part's time indexes first, then the
        local part's; ``-4`` (earliest local) is ``L``, ``-5`` (latest tiered) the copy's
        last offset."""
        r = self._remote_range()
        if timestamp == _EARLIEST:
            return TimestampAndOffset(-1, self.log_start_offset, None)
        if timestamp == _LATEST:
            return TimestampAndOffset(-1, self.log_end_offset, None)
        if timestamp == _EARLIEST_LOCAL:
            return TimestampAndOffset(-1, self.boundary if self.local is not None
                                      else self.log_start_offset, None)
        if timestamp == _LATEST_TIERED:
            last = self._copy_end() - 1 if self.remote is not None else -1
            return TimestampAndOffset(-1, last, None)
        if timestamp == _MAX:
            found = [f for f in (
                self.remote.offset_for_timestamp(_MAX) if r is not None else None,
                self.local.offset_for_timestamp(_MAX) if self.local is not None else None)
                if f is not None and (f.offset >= (self.boundary or 0)
                                      or r is not None and f.offset < r[1])]
            return max(found, key=lambda f: (f.timestamp, -f.offset), default=None)
        if r is not None:
            found = self.remote.offset_for_timestamp(timestamp)
            if found is not None and found.offset < r[1]:
                return found
        return None if self.local is None else self.local.offset_for_timestamp(timestamp)

    def close(self) -> None:
        for view in (self._remote, self.local):
            if view is not None:
                view.close()


def scan_union(opts, copy) -> UnionLayouts:
    """The driver's views of a read with ``tieredStorage``: every partition of the copy
    ``copy`` (a :class:`~kafkastore.tiered.TieredCopy`) and of the log directory
    ``opts.path`` (if any, one listing), each a :class:`UnionLog`."""
    from kafkastore.errors import StorageFileNotFoundError

    local: dict[TopicPartition, ReadOnlyLog] = {}
    starts: dict[TopicPartition, int] = {}
    if opts.path:
        try:
            logdir = ReadOnlyLogDir.open(opts.path, storage_options=opts.storage)
        except StorageFileNotFoundError:
            raise StorageFileNotFoundError(f"Log directory {opts.path} does not exist",
                                           path=opts.path) from None
        local, starts = logdir.logs(), logdir.log_start_offsets()
    remote = set(copy.partitions())
    uri = copy.uri
    out = {}
    for tp in sorted(remote | set(local)):
        has = tp in remote
        out[tp] = UnionLog(
            tp, remote=(lambda tp=tp: copy.log(tp)) if has else None, local=local.get(tp),
            gaps=(lambda tp=tp: list(copy.resolution(tp).gaps)) if has else None,
            checkpoint=starts.get(tp),
            chunk_starts=chunk_starts(copy, tp) if has else None,
            uri=uri)
    return UnionLayouts(out, copy)


def chunk_starts(copy, tp: TopicPartition) -> Callable[[SegmentRef], Sequence[int] | None]:
    """``starts(seg)``: where the chunks of the copy's segment ``seg`` (of partition
    ``tp``) start in the original segment, when they are fetched a chunk at a time (an
    Aiven segment with compression or encryption); None when any byte range is one
    ranged read of the object (LocalTieredStorage, or an Aiven segment without
    transforms)."""
    served: dict | None = None

    def starts(seg: SegmentRef) -> Sequence[int] | None:
        nonlocal served
        if served is None:   # (once: a long history has thousands of segments)
            served = {rs.start_offset: rs for rs in copy.resolution(tp).segments}
        rs = served.get(seg.base_offset)
        m = None if rs is None else rs.manifest
        if m is None or (not m.compression and m.encryption is None
                         and m.chunk_index.is_identity):
            return None
        # (every chunk but the last has the original chunk size: Aiven's chunk indexes
        # vary only in their transformed sizes)
        index = m.chunk_index
        return range(0, index.original_file_size, index.original_chunk_size)
    return starts


class UnionLayouts(dict):
    """``{TopicPartition: UnionLog}`` of one listing, with the copy it was made from."""

    def __init__(self, views, copy) -> None:
        super().__init__(views)
        self.copy = copy


def task_storage(layouts, split) -> Any:
    """What a task reading ``split`` needs to read its tiered slices (None if it has
    none): the copy's virtual storage cut down to the split's segments, carrying their
    manifests (and the key ring), which the driver already read: the task lists
    nothing and fetches no manifest, and its work does not carry the manifests of the
    partition's other segments (thousands, for a long history)."""
    paths = sorted({sl.path for sl in split.slices if sl.tiered})
    if not paths:
        return None
    return layouts.copy.tiered_storage.for_files(
        TopicPartition(split.topic, split.partition), paths)
