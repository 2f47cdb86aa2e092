"""Planning a Spark read: which partitions, which offsets, cut into which tasks.

Runs on the driver (in ``partitions()``), after ``pushFilters``; needs neither
pyspark nor pyarrow. The result is a list of :class:`Split`: small, picklable
descriptions of byte ranges of segment files, shipped to the executors.

Order of work, as in Spark-Kafka:

1. the subscribed topic-partitions (``subscribe``/``subscribePattern``/``assign``),
   narrowed by pushed ``topic`` and ``partition`` filters;
2. per partition a range ``[start, end)`` from the starting/ending options
   (timestamps first, then offsets), checked against the log start and end
   offsets (``failOnDataLoss``) and intersected with pushed ``offset`` bounds and a
   pushed ``timestamp >= T`` (the first offset whose record reaches T, Kafka's
   ``offsetsForTimes``);
3. cut along segments and offset-index entries into tasks of about
   ``maxBytesPerPartition`` bytes (default 128 MiB), or one task per
   topic-partition with ``splitBy=topicpartition`` (Spark-Kafka's plan); then
   ``maxRecordsPerPartition`` and ``minPartitions`` cut further by offsets, with
   Spark-Kafka's proportional rule.

With ``tieredStorage`` the views are :class:`~kafkastore.spark.tiered.UnionLog`s: a
range that crosses offsets in neither the tiered copy nor the log directory fails under
``failOnDataLoss``, and a tiered segment fetched in chunks is cut at byte positions
next to chunk starts (:func:`_cut_at_chunks`; the slices' ``floor`` and ``ceiling``).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as _dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkastore.errors import ConfigError, OffsetOutOfRangeError
from kafkastore.log_view import ReadOnlyLog, SegmentRef
from kafkastore.spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions
from kafkastore.topic import TopicPartition

__all__ = ["SegmentSlice", "Split", "Pushdown", "resolve_ranges", "plan_splits",
           "start_offsets", "rate_limit", "selected_partitions", "data_loss_message",
           "gap_message", "NEVER_NULL"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_INF = 1 << 63

#: Columns that are never null: ``IsNotNull`` on them is always true.
NEVER_NULL = frozenset({"topic", "partition", "offset", "timestamp", "timestampType"})


@dataclass(frozen=True)
class SegmentSlice:
    """Offsets ``[lo, hi)`` of the segment file ``path`` (base offset ``base``), read
    from byte ``position``. ``expect_last`` is the last offset of the batch an index
    entry placed at ``position`` (-1 when ``position`` is 0 by default): the reader
    checks it, so a segment the cleaner replaced since planning is read from 0.
    ``path`` is the storage's path (a URI's, see :mod:`kafkastore.storage`)."""

    path: str
    base: int
    position: int
    expect_last: int
    lo: int
    hi: int
    #: the segment's size when planned (a remote open then needs no request for it)
    size: int = -1
    #: a byte position past the batch holding ``hi - 1`` (from the offset index; the
    #: segment's size without one): a task's ranged reads stop there
    end: int = -1
    #: a segment of the tiered copy (read through its storage, see
    #: :mod:`kafkastore.spark.tiered`), not of the log directory
    tiered: bool = False
    #: a batch boundary before which every byte belongs to another task: the read starts
    #: there at the earliest, whatever the index said (0: none)
    floor: int = 0
    #: a batch boundary from which every byte belongs to another task: the read never
    #: goes past it (-1: none). Set by cuts at byte positions (chunk starts of a tiered
    #: segment), where ``lo``/``hi`` are then bounds, not the exact offsets held
    ceiling: int = -1


@dataclass(frozen=True)
class Split:
    """One Spark task's work: slices of one topic-partition's segments, in order."""

    topic: str
    partition: int
    slices: tuple[SegmentSlice, ...]
    #: read_committed: the ``(producer id, first offset, marker offset)`` of each aborted
    #: transaction the slices may hold records of (None: read_uncommitted)
    aborted: tuple[tuple[int, int, int], ...] | None = None

    @property
    def records(self) -> int:
        """Offsets covered (records, plus any gaps compaction left)."""
        return sum(s.hi - s.lo for s in self.slices)


@dataclass
class Pushdown:
    """What the pushed filters allow. Everything but ``ts_min`` is exact."""

    topics: set | None = None
    partitions: set | None = None
    offset_lo: int = 0
    offset_hi: int = _INF
    offset_in: frozenset | None = None
    ts_min: int | None = None        # epoch ms: records below can be skipped (residual)

    def allow_in(self, kind: str, values: Iterable) -> None:
        values = set(values)
        current = getattr(self, kind)
        setattr(self, kind, values if current is None else current & values)

    def offsets_at_least(self, value: int) -> None:
        self.offset_lo = max(self.offset_lo, value)

    def offsets_below(self, value: int) -> None:
        self.offset_hi = min(self.offset_hi, value)

    def timestamp_at_least(self, value) -> None:
        ms = _to_ms(value)
        if ms is not None:
            self.ts_min = ms if self.ts_min is None else max(self.ts_min, ms)


def _to_ms(value) -> int | None:
    """A filter's timestamp (a tz-aware datetime, as Spark sends it) in epoch ms,
    rounded down: safe for pruning, since the filter itself stays with Spark."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return (value - _EPOCH) // _dt.timedelta(milliseconds=1)
    return None


def gap_message(tp: TopicPartition, lo: int, hi: int, why: str) -> str:
    """Offsets ``[lo, hi)`` of ``tp`` are in no segment the read has (``why`` says where
    they are missing), as Spark-Kafka words data loss."""
    return (f"Cannot fetch offsets {lo} to {hi - 1} of {tp}: {why}. Some data may have "
            "been lost (a segment that was never uploaded to tiered storage, or deleted "
            "from it, before the log directory stopped holding it). If you want your query "
            "to continue on such cases, set the source option \"failOnDataLoss\" to "
            "\"false\".")


def data_loss_message(tp: TopicPartition, wanted: int, available: int) -> str:
    return (f"Cannot fetch offset {wanted} of {tp} (earliest available: {available}). "
            "Some data may have been lost because they are not available in the log "
            "directory any more; either the data was aged out by retention or compaction "
            "or the topic may have been deleted before all the data in the topic was "
            "processed. If you want your query to continue on such cases, set the source "
            "option \"failOnDataLoss\" to \"false\".")


def selected_partitions(opts: ReadOptions, layouts: Mapping[TopicPartition, ReadOnlyLog],
                        pushdown: Pushdown | None = None) -> list[TopicPartition]:
    """The topic-partitions the options subscribe to and the pushed filters allow."""
    if opts.strategy == "assign":
        missing = [tp for tp in map(TopicPartition._make, opts.assign) if tp not in layouts]
        if missing:
            raise ConfigError(f"assign names partitions that are not in {opts.source}: "
                              + ", ".join(map(str, missing)))
        tps = [TopicPartition(t, p) for t, p in opts.assign]
    else:
        tps = [tp for tp in layouts if opts.matches(tp.topic)]
    if pushdown is not None:
        if pushdown.topics is not None:
            tps = [tp for tp in tps if tp.topic in pushdown.topics]
        if pushdown.partitions is not None:
            tps = [tp for tp in tps if tp.partition in pushdown.partitions]
    return sorted(tps)


def _offset_for(layout: ReadOnlyLog, spec: OffsetSpec, tp: TopicPartition,
                which: str, strategy: str, tps: list[TopicPartition],
                isolation: str = "read_uncommitted") -> int:
    if spec.kind == "earliest":
        return layout.log_start_offset
    if spec.kind == "latest":
        return layout.fetch_end_offset(isolation)
    if spec.kind == "offsets":
        _check_all(spec.offsets, tps, f"{which}Offsets")
        off = spec.offsets[(tp.topic, tp.partition)]
        if off == EARLIEST:
            return layout.log_start_offset
        if off == LATEST:
            return layout.fetch_end_offset(isolation)
        return off
    if spec.kind == "timestamp":
        ts = spec.timestamp
    else:
        _check_all(spec.timestamps, tps, f"{which}OffsetsByTimestamp")
        ts = spec.timestamps[(tp.topic, tp.partition)]
    if ts < 0:
        raise ConfigError(f"Invalid timestamp {ts} for {tp} in {which}Timestamp options: "
                          "epoch milliseconds, 0 or more")
    found = layout.offset_for_timestamp(ts)
    if found is not None:
        return found.offset
    if which == "starting" and strategy == "error":
        raise ConfigError(f"No offset matched from request of topic-partition {tp} and "
                          f"timestamp {ts}. (set startingOffsetsByTimestampStrategy to "
                          f"'latest' to start at the latest offset instead)")
    return layout.fetch_end_offset(isolation)


def _check_all(given: Mapping, tps: list[TopicPartition], name: str) -> None:
    wanted = {(tp.topic, tp.partition) for tp in tps}
    if not wanted <= set(given):
        raise ConfigError(
            f"If {name} contains specific offsets, you must specify all TopicPartitions.\n"
            f"Use -1 for latest, -2 for earliest.\n"
            f"Specified: {sorted(given)} Assigned: {sorted(wanted)}")


def start_offsets(opts: ReadOptions, layouts: Mapping[TopicPartition, ReadOnlyLog],
                  tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Where a new streaming query starts in each partition (``startingOffsets``,
    default latest, or the timestamp options)."""
    return {tp: _offset_for(layouts[tp], opts.starting, tp, "starting",
                            opts.timestamp_strategy, tps) for tp in tps}


def rate_limit(begin: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int],
               layouts: Mapping[TopicPartition, ReadOnlyLog],
               limit: int) -> dict[TopicPartition, int]:
    """Spark-Kafka's ``maxOffsetsPerTrigger``: ``limit`` offsets shared among the
    partitions in proportion to their backlog (a partition new since ``begin``
    starts at its log start offset)."""
    sizes = {}
    for tp, end in until.items():
        b = begin.get(tp, layouts[tp].log_start_offset if tp in layouts else 0)
        if end - b > 0:
            sizes[tp] = (b, end - b)
    total = sum(size for _, size in sizes.values())
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        b, size = sizes[tp]
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, b + step)
    return out


def resolve_ranges(opts: ReadOptions, layouts: Mapping[TopicPartition, ReadOnlyLog],
                   pushdown: Pushdown | None = None, *,
                   starts: Mapping[TopicPartition, int] | None = None,
                   ends: Mapping[TopicPartition, int] | None = None,
                   ) -> dict[TopicPartition, tuple[int, int]]:
    """``{tp: (start, end)}`` for a batch read (or, with ``starts``/``ends`` given, a
    micro-batch); ranges may be empty. Raises :class:`OffsetOutOfRangeError` for
    offsets retention or compaction removed when ``failOnDataLoss`` (else they are
    skipped), and :class:`ConfigError` for a start after its end."""
    pushdown = pushdown or Pushdown()
    if ends is not None:   # a micro-batch: the partitions its end offsets name
        tps = []
        for tp in sorted(ends):
            if tp in layouts:
                tps.append(tp)
            elif opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"{tp} is gone from {opts.source} (the topic was deleted?). Some data may "
                    "have been lost. If you want your query to continue on such cases, set "
                    "the source option \"failOnDataLoss\" to \"false\".")
    else:
        tps = selected_partitions(opts, layouts, pushdown)
    out = {}
    for tp in tps:
        layout = layouts[tp]
        # (read_committed: the last stable offset is where the log ends for the query,
        # as a read_committed consumer's end offsets are)
        log_start, leo = layout.log_start_offset, layout.fetch_end_offset(opts.isolation_level)
        if starts is not None:
            start = starts.get(tp, log_start)
        else:
            start = _offset_for(layout, opts.starting, tp, "starting",
                                opts.timestamp_strategy, tps, opts.isolation_level)
        if ends is not None:
            end = ends.get(tp, leo)
        else:
            end = _offset_for(layout, opts.ending, tp, "ending", "latest", tps,
                              opts.isolation_level)
        if start < log_start:
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(data_loss_message(tp, start, log_start),
                                            offset=start, path=layout.path)
            start = log_start
        if end > leo:
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"Ending offset {end} of {tp} is past the log end offset {leo}; set "
                    "failOnDataLoss to false to read up to the log end instead",
                    offset=end, path=layout.path)
            end = leo
        if start > end:
            if starts is None and ends is None:
                raise ConfigError(f"Beginning offset {start} is after the ending offset "
                                  f"{end} for topic {tp.topic} partition {tp.partition}. "
                                  "You either provided an invalid fromOffset, or the Kafka "
                                  "topic has been damaged")
            start = end
        start = max(start, pushdown.offset_lo)
        end = min(end, pushdown.offset_hi)
        if pushdown.offset_in is not None:
            inside = [o for o in pushdown.offset_in if start <= o < end]
            start, end = (min(inside), max(inside) + 1) if inside else (start, start)
        if pushdown.ts_min is not None and start < end:
            found = layout.offset_for_timestamp(max(pushdown.ts_min, 0))
            start = end if found is None else max(start, min(found.offset, end))
        missing = getattr(layout, "missing", None)   # a tiered copy's gaps (UnionLog)
        if missing is not None and start < end and opts.fail_on_data_loss:
            for lo, hi, why in missing(start, end):
                raise OffsetOutOfRangeError(gap_message(tp, lo, hi, why), offset=lo,
                                            path=layout.path)
        out[tp] = (start, max(start, end))
    return out


def plan_splits(opts: ReadOptions, layouts: Mapping[TopicPartition, ReadOnlyLog],
                ranges: Mapping[TopicPartition, tuple[int, int]]) -> list[Split]:
    """Cut the ranges into :class:`Split`s (see the module docstring)."""
    splits: list[Split] = []
    for tp, (start, end) in sorted(ranges.items()):
        if start >= end:
            continue
        layout = layouts[tp]
        parts = layout.segments_for(start, end)
        if opts.split_by == "topicpartition":
            splits.append(Split(tp.topic, tp.partition, tuple(
                _slice(layout, seg, lo, hi) for seg, lo, hi in parts)))
            continue
        for seg, lo, hi in parts:
            chunks = _chunk_starts(layout, seg)
            if chunks is not None:
                for a, b, floor, ceiling in _cut_at_chunks(
                        layout, seg, lo, hi, opts.max_bytes_per_partition, chunks):
                    splits.append(Split(tp.topic, tp.partition, (
                        _slice(layout, seg, a, b, floor, ceiling),)))
                continue
            for a, b in _cut_by_bytes(layout, seg, lo, hi, opts.max_bytes_per_partition):
                splits.append(Split(tp.topic, tp.partition, (_slice(layout, seg, a, b),)))
    if opts.max_records_per_partition is not None:
        most = opts.max_records_per_partition
        splits = [q for s in splits
                  for q in _cut_even(layouts, s, math.ceil(_span(s) / most))]
    if opts.min_partitions is not None and len(splits) < opts.min_partitions:
        total = sum(s.records for s in splits)
        if total:
            splits = [q for s in splits for q in _cut_even(
                layouts, s, max(round(s.records / total * opts.min_partitions), 1))]
    splits = [s for s in splits if s.records]
    if opts.isolation_level == "read_committed":
        splits = [dataclasses.replace(s, aborted=tuple(
            (t.producer_id, t.first_offset, t.last_offset) for t in layouts[TopicPartition(
                s.topic, s.partition)].collect_aborted_transactions(s.slices[0].lo,
                                                            s.slices[-1].hi)))
            for s in splits]
    return splits


def _span(split: Split) -> int:
    return split.slices[-1].hi - split.slices[0].lo


def _tiered(layout, seg: SegmentRef) -> bool:
    is_tiered = getattr(layout, "is_tiered", None)   # a UnionLog's remote segments
    return False if is_tiered is None else is_tiered(seg)


def _chunk_starts(layout, seg: SegmentRef) -> Sequence[int] | None:
    """The original byte positions where ``seg``'s chunks start (a tiered segment's
    objects are fetched a chunk at a time), or None for a file of the log directory."""
    starts = getattr(layout, "chunk_starts", None)
    return None if starts is None else starts(seg)


def _slice(layout: ReadOnlyLog, seg: SegmentRef, lo: int, hi: int, floor: int = 0,
           ceiling: int = -1) -> SegmentSlice:
    position, indexed = layout.floor_position(seg, lo)
    end = seg.size if hi >= _INF else max(position, layout.end_position(seg, hi))
    if position < floor:
        position, indexed = floor, -1
    if ceiling >= 0:
        end = min(end, ceiling)
        position = min(position, ceiling)
    return SegmentSlice(seg.path, seg.base_offset, position, indexed, lo, hi, seg.size, end,
                        _tiered(layout, seg), floor, ceiling)


def _cut_by_bytes(layout: ReadOnlyLog, seg: SegmentRef, lo: int, hi: int,
                  target: int) -> list[tuple[int, int]]:
    """Cut ``[lo, hi)`` of one segment at index entries every ``target`` bytes.

    An index entry maps a batch's last offset ``o`` to its position ``p``; a cut there
    is the offset ``o + 1``, and the next task reads from ``p``, skipping that batch by
    its header, so no batch is decoded twice except where ``minPartitions`` or
    ``maxRecordsPerPartition`` cut inside one."""
    offs, pos = layout.offset_index(seg).arrays()
    start_pos, _ = layout.floor_position(seg, lo)
    end_pos = seg.size
    if hi < _INF:
        nxt, _ = layout.floor_position(seg, hi)
        end_pos = seg.size if nxt <= start_pos else max(nxt, start_pos)
    if end_pos - start_pos <= target or not len(offs):
        return [(lo, hi)]
    cuts = []
    mark = start_pos + target
    for o, p in zip(offs.tolist(), pos.tolist()):
        if p >= mark and lo < o + 1 < hi:
            cuts.append(o + 1)
            mark = p + target
    bounds = [lo, *cuts, hi]
    return list(zip(bounds[:-1], bounds[1:]))


def _cut_at_chunks(layout, seg: SegmentRef, lo: int, hi: int, target: int,
                   chunks: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Cut ``[lo, hi)`` of a tiered segment at byte positions about every ``target``
    bytes: ``(lo, hi, floor, ceiling)`` per piece.

    A tiered segment is fetched a whole chunk at a time, so two tasks whose byte ranges
    meet inside a chunk both fetch it. A cut is therefore made at the first offset-index
    entry at or after a chunk start (the entries are the only batch starts known without
    reading): when the entry is the chunk start itself, the two tasks share no chunk;
    otherwise they share the one chunk the cut falls in. The cut is a byte position, the
    ``ceiling`` of the piece before and the ``floor`` of the piece after; an entry
    ``(o, p)`` says only that the batch at ``p`` ends at or before ``o`` and that every
    earlier offset is before it, so the pieces' offset bounds are the entries' offsets
    (``hi = o + 1`` before, ``lo`` = the previous entry's offset + 1 after) and overlap
    where the cut batch's first offset is unknown; the bytes never do."""
    import numpy as np

    offs, pos = layout.offset_index(seg).arrays()
    start_pos, _ = layout.floor_position(seg, lo)
    end_pos = seg.size
    if hi < _INF:
        end_pos = max(start_pos, min(seg.size, layout.end_position(seg, hi)))
    if end_pos - start_pos <= target or not len(offs):
        return [(lo, hi, 0, -1)]
    pieces = []
    a, floor = lo, 0
    i = bisect.bisect_left(chunks, start_pos + target)
    while i < len(chunks):
        k = int(np.searchsorted(pos, chunks[i], side="left"))
        if k >= len(pos) or int(pos[k]) >= end_pos:
            break
        p = int(pos[k])
        if p <= max(floor, start_pos):
            i += 1
            continue
        before = int(offs[k]) + 1
        after = int(offs[k - 1]) + 1 if k else seg.base_offset
        pieces.append((a, min(hi, before), floor, p))
        a, floor = max(lo, after), p
        i = bisect.bisect_left(chunks, p + target, i + 1)
    pieces.append((a, hi, floor, -1))
    return pieces


def _cut_even(layouts, split: Split, parts: int) -> list[Split]:
    """Spark-Kafka's split of an offset range into ``parts`` near-equal ranges."""
    lo = split.slices[0].lo
    size = _span(split)
    parts = min(parts, size)
    if parts <= 1:
        return [split]
    bounds = [lo + size * i // parts for i in range(parts + 1)]
    layout = layouts[TopicPartition(split.topic, split.partition)]
    segments = {(_tiered(layout, seg), seg.path): seg for seg in layout.segments}
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        # (a piece keeps its slice's byte bounds: rows past them are another task's)
        slices = tuple(_slice(layout, segments[s.tiered, s.path], max(a, s.lo), min(b, s.hi),
                              s.floor, s.ceiling)
                       for s in split.slices if max(a, s.lo) < min(b, s.hi))
        if slices:
            out.append(Split(split.topic, split.partition, slices))
    return out
