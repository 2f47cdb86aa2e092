"""One round of log compaction: Kafka's ``Cleaner`` (``Cleaner.doClean``, in Kafka's
``LogCleaner.scala`` with ``CleanerStats`` and ``CleanedTransactionMetadata``), and the
``Throttler`` that paces its I/O (kafka-storage.md section 7).

A log with ``compact`` in its ``cleanup.policy`` keeps, for every key, at least its
latest value. The cleaner gets there in rounds; one round (:class:`Cleaner`) does what
Kafka's ``Cleaner.doClean`` does:

1. **The cleanable range.** ``[first dirty offset, first uncleanable offset)``, chosen by
   :func:`~kafkastore.cleaner_manager.cleanable_offsets` and
   :class:`~kafkastore.cleaner_manager.LogToClean` (:mod:`kafkastore.cleaner_manager`).
2. **Pass 1: the offset map.** Every keyed record of the dirty range goes into a
   :class:`SkimpyOffsetMap` (key digest -> its latest offset), until the map holds
   ``slots * log.cleaner.io.buffer.load.factor`` keys; the round then covers only what
   was mapped. Records of aborted transactions are left out.
3. **Pass 2: recopy.** All segments below the end of the map (the clean part too: its
   tombstones and markers may have expired) are rewritten in groups no larger than
   ``segment.bytes`` and ``segment.index.bytes`` (:func:`group_segments_by_size`), each
   into one new segment named after its first base offset with the ``.cleaned`` suffix.
   A record stays if it is the latest of its key (or past the map); records without a
   key go; tombstones stay until ``delete.retention.ms`` after the first round that saw
   them (the delete horizon stamped into their batch, as Kafka does); records of aborted
   transactions go, and transaction markers go once nothing of their transaction is left
   and their horizon passed. Offsets never change (gaps are fine); batch fields
   (producer id, epoch, base sequence, transactional and control flags, the codec, the
   timestamp type, the last offset) survive; a batch left empty is kept as a bare header
   where Kafka keeps one (the last batch of an active producer, the last batch of the
   round).
4. **The swap.** Each new segment replaces its group through
   :meth:`~kafkastore.log.Log.replace_segments` (``.cleaned`` -> ``.swap`` -> final
   names, the old files renamed ``.deleted``), so a crash at any point leaves, after
   reopening, the old segments or the new ones, whole.

Transactions: as in Kafka, a round takes the aborted transactions of its range from
the ``.txnindex`` files through the cleaner's lookup
(``Log.collect_aborted_transactions_for_cleaning``, Kafka's
``UnifiedLog.collectAbortedTransactions``: entries from the log start offset on, not from
the first dirty offset as a fetch filters them), the first offset of a transaction still
undecided from the log's producer state (nothing from there on is cleaned), and, as each
group is cleaned, the last batch of every producer that state holds (Kafka's
``lastRecordsOfActiveProducers``: kept, possibly empty, until the log's own expiration
forgets the producer; the cleaner applies no expiry of its own).

Thread-safety: a :class:`Cleaner` and its offset map serve one cleaning at a time. A
round reads segments without the log's lock (like any reader) and takes it only to swap,
after checking that its segments are still those of the log and unchanged; appends,
reads, rolls and retention go on meanwhile. A round that finds its segments changed
(truncated, deleted, log closed) stops with :class:`~kafkastore.errors.LogCleaningAbortedError`
and leaves nothing behind. A :class:`Throttler` may be shared by any number of threads.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kafkastore import compression as _compression
from kafkastore._kernels import offset_map as _offset_map
from kafkastore.batch_header import (
    CODEC_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    read_batch_header,
)
from kafkastore.cleaner_config import CleanerConfig, _check_map_size
from kafkastore.cleaner_manager import LogToClean, _LastRecord, last_records_of_active_producers
from kafkastore.errors import (
    CorruptRecordError,
    KafkaStoreError,
    LogCleaningAbortedError,
)
from kafkastore.file_records import read_chunks
from kafkastore.log import Log
from kafkastore.records import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    ControlRecordType,
    assemble_batch_v2,
    control_marker,
    encode_batch,
    iter_batches,
)
from kafkastore.segment import CLEANED_FILE_SUFFIX, LogSegment
from kafkastore.txn_index import AbortedTxn

__all__ = [
    "Cleaner",
    "CleanerStats",
    "SkimpyOffsetMap",
    "Throttler",
    "group_segments_by_size",
]

# The cleaner's one logger, whichever of its modules logs.
_log = logging.getLogger("kafkastore.cleaner")

SkimpyOffsetMap = _offset_map.SkimpyOffsetMap

_INT_MAX = (1 << 31) - 1

# Kafka's BatchRetention
_DELETE, _DELETE_EMPTY, _RETAIN_EMPTY = 0, 1, 2


# -- statistics and throttling ---------------------------------------------------------------


@dataclass
class CleanerStats:
    """What one cleaning (or :func:`clean`'s rounds together) did (Kafka's ``CleanerStats``)."""

    bytes_read: int = 0            # pass 2: source bytes recopied from
    bytes_written: int = 0         # pass 2: bytes of the cleaned segments
    map_bytes_read: int = 0        # pass 1: bytes scanned to build the map
    map_messages_read: int = 0
    messages_read: int = 0         # pass 2: records looked at
    messages_written: int = 0      # pass 2: records kept
    invalid_messages_read: int = 0  # records without a key (dropped)
    buffer_utilization: float = 0.0
    rounds: int = 0
    start_time: float = field(default_factory=time.monotonic)
    map_complete_time: float = 0.0
    end_time: float = 0.0

    @property
    def records_removed(self) -> int:
        return self.messages_read - self.messages_written

    @property
    def elapsed_s(self) -> float:
        return (self.end_time or time.monotonic()) - self.start_time

    @property
    def elapsed_indexing_s(self) -> float:
        return (self.map_complete_time or time.monotonic()) - self.start_time

    def add(self, other: CleanerStats) -> None:
        """Fold ``other`` (a later round) into these totals."""
        for name in ("bytes_read", "bytes_written", "map_bytes_read", "map_messages_read",
                     "messages_read", "messages_written", "invalid_messages_read", "rounds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.buffer_utilization = max(self.buffer_utilization, other.buffer_utilization)
        self.end_time = other.end_time


class Throttler:
    """Kafka's ``Throttler``: sleep so that what was observed stays under
    ``desired_rate_per_sec`` (bytes per second here), checked every
    ``check_interval_ms``. One instance is shared by everything it limits.
    ``clock`` (seconds) and ``sleep`` can be replaced in tests."""

    def __init__(self, desired_rate_per_sec: float, check_interval_ms: int = 300, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self.check_interval_s = check_interval_ms / 1000.0
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: float) -> None:
        if self.desired_rate_per_sec == math.inf:
            return
        with self._lock:
            self._observed += observed
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed > self.check_interval_s and self._observed > 0:
                if self._observed / elapsed > self.desired_rate_per_sec:
                    pause = self._observed / self.desired_rate_per_sec - elapsed
                    if pause > 0:
                        self._sleep(pause)
                        self.slept_s += pause
                self._period_start = self._clock()
                self._observed = 0.0


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose ``.log`` sizes, offset
    index sizes and time index sizes each add up to at most ``max_size`` /
    ``max_index_size``, and whose offsets fit one segment (within ``2**31 - 1`` of the
    group's base; an empty segment always joins)."""
    limits = (max_size, max_index_size, max_index_size)
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        group, totals = [segments[i]], _sizes(segments[i])
        i += 1
        while i < n:
            nxt = segments[i]
            sizes = _sizes(nxt)
            last_estimate = (segments[i + 1].base_offset - 1 if i + 1 < n
                             else first_uncleanable_offset - 1)
            if (any(t + s > limit for t, s, limit in zip(totals, sizes, limits))
                    or (nxt.size and last_estimate - group[0].base_offset > _INT_MAX)):
                break
            group.append(nxt)
            totals = tuple(t + s for t, s in zip(totals, sizes))
            i += 1
        groups.append(group)
    return groups


def _sizes(segment: LogSegment) -> tuple[int, int, int]:
    """The ``.log``, offset index and time index bytes of ``segment``."""
    oi, ti = segment.offset_index, segment.time_index
    return segment.size, oi.entries * oi.ENTRY_SIZE, ti.entries * ti.ENTRY_SIZE


# -- one round ----------------------------------------------------------------------------------


def _control_type(view, position: int, size: int) -> ControlRecordType | None:
    """The type of the marker in the control batch at ``position`` (None if it holds no
    record: a marker already cleaned away)."""
    found = control_marker(view[position:position + size])
    return None if found is None else found[0].type


class _TxnTracker:
    """Kafka's ``CleanedTransactionMetadata``: which batches of the walk belong to aborted
    transactions, and which markers can go."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []   # heap by first offset
        self._ongoing_aborted: dict[int, list] = {}   # producer -> [txn, last batch seen]
        self._ongoing_committed: set[int] = set()
        self._seq = 0
        #: pass 2: the ``.txnindex`` of the segment being written, where an ABORT marker
        #: that stays (its transaction had batches in this pass) keeps its entry
        self.cleaned_index = None

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            self._seq += 1
            heapq.heappush(self._pending, (txn.first_offset, self._seq, txn))

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch(self, producer_id: int, last_offset: int,
                         control_type: ControlRecordType | None) -> bool:
        """Whether the marker may be removed."""
        self._consume_up_to(last_offset)
        if control_type is None:
            return True   # an empty control batch: already cleaned
        if control_type == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(producer_id, None)
            # kept until every batch of its transaction is gone
            if state is not None and state[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state[0])
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """Whether the data batch belongs to an aborted transaction."""
        self._consume_up_to(last_offset)
        if not transactional:
            return False
        state = self._ongoing_aborted.get(producer_id)
        if state is not None:
            state[1] = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False


class Cleaner:
    """One cleaner: an offset map and the rounds it runs (Kafka's ``Cleaner``).

    ``check_done(log)`` is called between chunks and may raise
    :class:`~kafkastore.errors.LogCleaningAbortedError` to stop the round. Not
    thread-safe: one round at a time.
    """

    def __init__(self, config: CleanerConfig | None = None, *,
                 offset_map: SkimpyOffsetMap | None = None, throttler: Throttler | None = None,
                 time_ms: Callable[[], int] | None = None,
                 check_done: Callable[[Log], None] | None = None) -> None:
        self.config = config or CleanerConfig()
        self.offset_map = offset_map if offset_map is not None \
            else SkimpyOffsetMap(self.config.map_memory)
        _check_map_size(self.offset_map.slots, self.config.dedupe_buffer_load_factor)
        self.throttler = throttler or Throttler(self.config.max_io_bytes_per_second)
        self._time_ms = time_ms
        self._check_done = check_done or (lambda log: None)

    # -- the round -----------------------------------------------------------------------

    def clean(self, to_clean: LogToClean, now_ms: int | None = None
              ) -> tuple[int, CleanerStats]:
        """One round over ``to_clean``; returns ``(end offset, stats)`` where the end
        offset is the first offset the round did not cover (the next first dirty offset).
        """
        log = to_clean.log
        now = now_ms if now_ms is not None else (self._time_ms or log.time_ms)()
        stats = CleanerStats(rounds=1)
        truncated = log.truncated_to   # a truncation during the round aborts it
        clean_part = log.segments_between(0, to_clean.first_dirty_offset)
        legacy_delete_horizon = (clean_part[-1].last_modified()
                                 - log.config.delete_retention_ms) if clean_part else 0
        upper_bound = to_clean.first_uncleanable_offset
        self._build_offset_map(log, to_clean.first_dirty_offset, upper_bound, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_complete_time = time.monotonic()
        tracker = _TxnTracker()
        self._check_unchanged(log, truncated)
        # (Kafka's logSegments(0, endOffset) never reaches the active segment)
        end = min(end_offset, log.active_segment.base_offset)
        groups = group_segments_by_size(log.segments_between(0, end),
                                        log.config.segment_bytes,
                                        log.config.segment_index_bytes, upper_bound)
        for group in groups:
            self._clean_segments(log, group, now, stats, tracker, legacy_delete_horizon,
                                 upper_bound, truncated)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_time = time.monotonic()
        return end_offset, stats

    # -- pass 1 --------------------------------------------------------------------------

    def _build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        omap = self.offset_map
        dirty = log.segments_between(start, end)
        # The keys this pass can put are at most the offsets of its segments, all below
        # the active segment's base: the map probes a table sized for them (grown if
        # ever short), so a round touches the memory its keys need rather than all of
        # log.cleaner.dedupe.buffer.size. What is kept, and when the map is "full"
        # (Kafka's maxDesiredMapSize of the configured slots), do not change.
        active_base = log.active_segment.base_offset
        omap.clear(expected_entries=max(0, active_base - start)
                   if all(seg.base_offset < active_base for seg in dirty) else None)
        tracker = _TxnTracker()
        # Kafka's buildOffsetMap: the cleaner's lookup, so an abort that ended before
        # `start` in its segment is tracked too (the walk may begin past its marker)
        tracker.add_aborted(log.collect_aborted_transactions_for_cleaning(start, end))
        max_entries = int(omap.slots * self.config.dedupe_buffer_load_factor)
        for i, segment in enumerate(dirty):
            self._check_done(log)
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(log, segment, start, next_start, max_entries, tracker, stats):
                return   # full: the round covers what was mapped

    def _map_segment(self, log: Log, segment: LogSegment, start: int, next_start: int,
                     max_entries: int, tracker: _TxnTracker, stats: CleanerStats) -> bool:
        omap = self.offset_map
        position = segment.offset_index.lookup(start).position
        for view, scan, batches in self._chunks(log, segment, position):
            self.throttler.maybe_throttle(scan.valid_bytes)
            stats.map_bytes_read += scan.valid_bytes
            for b in batches:
                if b.magic >= 2:
                    if b.is_control:
                        ctype = _control_type(view, b.position, b.size) if b.record_count else None
                        tracker.on_control_batch(b.producer_id, b.last_offset, ctype)
                        stats.map_messages_read += 1
                    elif tracker.on_batch(b.producer_id, b.last_offset, b.is_transactional):
                        stats.map_messages_read += b.record_count
                    else:
                        section = self._records_section(view, b, log)
                        walked, full = omap.put_keys(section, b.record_count, b.base_offset, start,
                                                     max_entries)
                        stats.map_messages_read += walked
                        if full:
                            return True
                elif self._map_legacy(view, b, start, max_entries, stats):
                    return True
                if b.last_offset >= start:
                    omap.update_latest_offset(b.last_offset)
        omap.update_latest_offset(next_start - 1)   # past any gap at the segment's end
        return False

    def _map_legacy(self, view, b: BatchHeader, start: int, max_entries: int,
                    stats: CleanerStats) -> bool:
        omap = self.offset_map
        for batch in iter_batches(view[b.position:b.position + b.size], validate=False):
            for record in batch:
                if record.key is not None and record.offset >= start:
                    if omap.size >= max_entries:
                        return True
                    omap.put(record.key, record.offset)
                stats.map_messages_read += 1
        return False

    # -- pass 2 --------------------------------------------------------------------------

    def _check_unchanged(self, log: Log, truncated: int | None) -> None:
        self._check_done(log)
        if log.closed or log.truncated_to != truncated:
            raise LogCleaningAbortedError(f"{log.dir} was truncated or closed during the "
                                          "cleaning round", path=log.dir)

    def _clean_segments(self, log: Log, group: list[LogSegment], now: int, stats: CleanerStats,
                        tracker: _TxnTracker, legacy_delete_horizon: int, upper_bound: int,
                        truncated: int | None) -> None:
        sizes = [seg.size for seg in group]
        cleaned = _new_cleaned_segment(log, group[0].base_offset)
        tracker.cleaned_index = cleaned.txn_index
        # Kafka's cleanSegments reads the producers once a group, from the log's state
        last_records = last_records_of_active_producers(log)
        try:
            for i, segment in enumerate(group):
                seg_end = group[i + 1].base_offset if i + 1 < len(group) \
                    else segment.read_next_offset()
                tracker.add_aborted(log.collect_aborted_transactions_for_cleaning(
                    segment.base_offset, seg_end))
                retain_legacy_deletes = segment.last_modified() > legacy_delete_horizon
                self._clean_into(log, segment, cleaned, now, stats, tracker, last_records,
                                 retain_legacy_deletes, upper_bound)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified())
            with log.lock:
                self._check_unchanged(log, truncated)
                current = {id(seg) for seg in log.segments[:-1]}
                if any(id(seg) not in current for seg in group) \
                        or [seg.size for seg in group] != sizes:
                    raise LogCleaningAbortedError(
                        f"The segments of {log.dir} from offset {group[0].base_offset} changed "
                        "while they were cleaned", path=log.dir)
                log.replace_segments([cleaned], group)
            tracker.cleaned_index = None
        except BaseException:
            tracker.cleaned_index = None
            # Before the swap began the new files are ours to drop. Once a rename of it
            # happened they belong to the crash-safe protocol: the next open finishes or
            # rolls back the swap, and deleting them now could lose data.
            if cleaned.has_suffix(CLEANED_FILE_SUFFIX):
                try:
                    cleaned.close_handlers()
                    cleaned.delete_if_exists()
                except OSError as exc:   # the round's own error matters more
                    _log.warning("Could not delete %s: %s", cleaned.log.path, exc)
            raise

    def _clean_into(self, log: Log, source: LogSegment, dest: LogSegment, now: int,
                    stats: CleanerStats, tracker: _TxnTracker,
                    last_records: dict[int, _LastRecord], retain_legacy_deletes: bool,
                    upper_bound: int) -> None:
        delete_retention = log.config.delete_retention_ms
        for view, scan, batches in self._chunks(log, source, 0):
            self.throttler.maybe_throttle(scan.valid_bytes)
            stats.bytes_read += scan.valid_bytes
            out: list[bytes] = []
            max_ts, shallow, max_offset = -1, -1, -1
            for b in batches:
                kept = self._filter_batch(view, b, log, now, delete_retention, stats, tracker,
                                          last_records, retain_legacy_deletes, upper_bound)
                if kept is None:
                    continue
                data, batch_max_ts = kept
                out.append(data)
                max_offset = b.last_offset
                if batch_max_ts > max_ts:
                    max_ts, shallow = batch_max_ts, b.last_offset
            if out:
                chunk = b"".join(out)
                if shallow < 0:
                    shallow = max_offset
                dest.append(max_offset, max_ts, shallow, chunk)
                stats.bytes_written += len(chunk)
                self.throttler.maybe_throttle(len(chunk))

    def _filter_batch(self, view, b: BatchHeader, log: Log, now: int, delete_retention: int,
                      stats: CleanerStats, tracker: _TxnTracker,
                      last_records: dict[int, _LastRecord], retain_legacy_deletes: bool,
                      upper_bound: int):
        """Kafka's ``filterTo`` for one entry: ``(bytes, max timestamp)`` or None."""
        if b.magic < 2:
            return self._filter_legacy(view, b, stats, retain_legacy_deletes, upper_bound)
        # checkBatchRetention
        if b.is_control:
            control_type = _control_type(view, b.position, b.size) if b.record_count else None
            can_discard = tracker.on_control_batch(b.producer_id, b.last_offset, control_type)
            horizon = b.delete_horizon_ms
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = tracker.on_batch(b.producer_id, b.last_offset, b.is_transactional)
            discard_records = can_discard
        # Kafka's cleanInto: the last batch of a producer the log's state holds stays,
        # possibly empty (BatchRetention.RETAIN_EMPTY), whatever the producer's idle time
        last = last_records.get(b.producer_id) if b.producer_id >= 0 else None
        if last is not None and (b.last_offset == last.last_data_offset
                                 if last.last_data_offset is not None
                                 else b.is_control and b.producer_epoch == last.producer_epoch):
            retention = _RETAIN_EMPTY
        elif b.last_offset + 1 == upper_bound:
            retention = _RETAIN_EMPTY   # keeps the round's last offset
        elif discard_records:
            retention = _DELETE
        else:
            retention = _DELETE_EMPTY
        marker_for_empty_txn = can_discard and b.is_control
        if retention == _DELETE:
            # Kafka's MemoryRecords.filterTo skips a DELETE batch before it counts its
            # records: messages read are those of the batches kept, emptied or not
            return None
        # the records
        if discard_records:
            kept, tombstones, mask, section = 0, 0, None, None
        elif b.is_control:
            kept, tombstones, mask, section = b.record_count, 0, None, None
        else:
            section = self._records_section(view, b, log)
            horizon = b.delete_horizon_ms
            retain_deletes = horizon is None or now < horizon
            result = self.offset_map.retained_mask(section, b.record_count, b.base_offset,
                                                   self.offset_map.latest_offset,
                                                   retain_deletes)
            kept, tombstones, mask = result.kept, result.tombstones_kept, result.mask
            stats.invalid_messages_read += result.keyless_dropped
        stats.messages_read += b.record_count
        stats.messages_written += kept
        needs_horizon = (tombstones > 0 or marker_for_empty_txn) and b.delete_horizon_ms is None
        if kept == b.record_count and kept > 0 and not needs_horizon:
            return bytes(view[b.position:b.position + b.size]), b.max_timestamp
        if kept > 0:
            if section is None:   # a control batch that gets its horizon
                section = self._records_section(view, b, log)
                mask = b"\x01" * b.record_count
            horizon = now + delete_retention if needs_horizon else b.delete_horizon_ms
            return self._rebuild(b, section, mask, kept, horizon)
        if retention == _RETAIN_EMPTY:
            return assemble_batch_v2(
                b"", 0, base_offset=b.base_offset, last_offset_delta=b.last_offset - b.base_offset,
                attributes=b.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK),
                base_timestamp=-1, max_timestamp=b.max_timestamp, producer_id=b.producer_id,
                producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                partition_leader_epoch=b.partition_leader_epoch), b.max_timestamp
        return None

    def _rebuild(self, b: BatchHeader, section, mask, kept: int, horizon: int | None):
        """The batch with only the ``mask`` records (Kafka's ``buildRetainedRecordsInto``)."""
        log_append = b.attributes & TIMESTAMP_TYPE_MASK
        # without a horizon the first kept record's timestamp is the base, as in Kafka
        records, first_ts, max_ts = _offset_map.select_records(
            section, b.record_count, mask, b.base_timestamp, horizon,
            b.max_timestamp if log_append else -1)
        base_ts = first_ts if horizon is None else horizon
        if log_append:
            max_ts = b.max_timestamp
        attributes = b.attributes & ~DELETE_HORIZON_MASK
        if horizon is not None:
            attributes |= DELETE_HORIZON_MASK
        data = assemble_batch_v2(
            records, kept, base_offset=b.base_offset,
            last_offset_delta=b.last_offset - b.base_offset, attributes=attributes,
            base_timestamp=base_ts, max_timestamp=max_ts, producer_id=b.producer_id,
            producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
            partition_leader_epoch=b.partition_leader_epoch)
        return data, max_ts

    def _filter_legacy(self, view, b: BatchHeader, stats: CleanerStats, retain_deletes: bool,
                       upper_bound: int):
        """Magic 0/1 entries: the records decoded in Python (legacy data is rare)."""
        omap = self.offset_map
        raw = view[b.position:b.position + b.size]
        kept, total, original = [], 0, True
        batch = None
        for batch in iter_batches(raw, validate=False):
            for record in batch:
                total += 1
                if record.offset > omap.latest_offset:
                    keep = True
                elif record.key is None:
                    stats.invalid_messages_read += 1
                    keep = False
                else:
                    keep = record.offset >= omap.get(record.key) and (
                        record.value is not None or retain_deletes)
                if keep:
                    kept.append(record)
                else:
                    original = False
        stats.messages_read += total
        stats.messages_written += len(kept)
        if kept:
            max_ts = max(r.timestamp for r in kept)
            if original:
                return bytes(raw), max_ts
            return encode_batch(
                [(r.key, r.value, r.timestamp) for r in kept], magic=batch.magic,
                base_offset=kept[0].offset, compression=batch.compression,
                timestamp_type=batch.timestamp_type, offsets=[r.offset for r in kept]), max_ts
        if batch is None:
            return None
        if b.last_offset + 1 == upper_bound:
            raise KafkaStoreError(   # Kafka: IllegalStateException, the log goes uncleanable
                f"Empty batches are only supported for magic v2 and above (entry at offset "
                f"{b.last_offset})", offset=b.last_offset)
        return None

    # -- reading -------------------------------------------------------------------------

    def _chunks(self, log: Log, segment: LogSegment, position: int):
        """Yield ``(view, scan, batches)`` for the entries of ``segment`` from
        ``position``, read ``log.cleaner.io.buffer.size / threads / 2`` bytes at a time
        with ``pread`` (Kafka's read buffer: memory stays bounded whatever the segment
        size), each entry CRC-checked. An entry larger than the buffer grows it for that
        entry (Kafka's ``growBuffersOrFail``); one claiming more bytes than the segment
        has left, or a corrupt one, raises :class:`CorruptRecordError` (the log then goes
        uncleanable). Positions in ``batches`` are relative to ``view``.
        """
        end = segment.size
        path = segment.log.path
        for chunk_start, data, scan in read_chunks(segment.log.read, position, end,
                                                   self.config.read_buffer_size):
            self._check_done(log)
            if scan.error is not None:
                err = scan.error
                raise CorruptRecordError(
                    f"Corrupt entry in {path} at position {chunk_start + scan.valid_bytes} "
                    f"while cleaning: {err}", position=chunk_start + scan.valid_bytes,
                    offset=err.offset, path=path)
            view = memoryview(data)
            try:
                batches = [read_batch_header(view, pos) for pos in scan.position.tolist()]
                yield view, scan, batches
            finally:
                view.release()
            position = chunk_start + scan.valid_bytes
        if position < end:
            raise CorruptRecordError(
                f"Log segment may be corrupt: an entry at position {position} of {path} runs "
                f"past the {end - position} bytes left in the segment", position=position,
                path=path)

    def _records_section(self, view, b: BatchHeader, log: Log):
        """The (decompressed) records section of the v2 batch ``b``."""
        section = view[b.position + RECORD_BATCH_OVERHEAD:b.position + b.size]
        codec = b.attributes & CODEC_MASK
        if not codec:
            return section
        try:
            return _compression.decompress(codec, section,
                                           max_size=DEFAULT_MAX_DECOMPRESSED_BYTES, magic=2)
        except KafkaStoreError as exc:
            raise CorruptRecordError(f"Cannot decompress the batch at offset {b.base_offset} "
                                     f"of {log.dir}: {exc}", offset=b.base_offset,
                                     position=b.position, path=log.dir) from exc


def _new_cleaned_segment(log: Log, base_offset: int) -> LogSegment:
    """Kafka's ``createNewCleanedSegment``: stale ``.cleaned`` files at this base go first."""
    LogSegment.delete_files_if_exist(log.dir, base_offset, CLEANED_FILE_SUFFIX)
    config = log.config
    return LogSegment.open(log.dir, base_offset, config,
                           init_file_size=config.segment_bytes if config.preallocate else 0,
                           preallocate=config.preallocate, suffix=CLEANED_FILE_SUFFIX,
                           time_ms=log.time_ms)
