"""Log compaction: Kafka's log cleaner (kafka-storage.md section 7).

A log with ``compact`` in its ``cleanup.policy`` keeps, for every key, at least its
latest value. The cleaner gets there in rounds; one round (:class:`Cleaner`) does what
Kafka's ``Cleaner.doClean`` does:

1. **The cleanable range.** ``[first dirty offset, first uncleanable offset)``: from the
   cleaner checkpoint (or the log start offset) up to the lowest of the active segment's
   base offset, the first offset of a transaction still undecided (Kafka's last stable
   offset), and the first segment younger than ``min.compaction.lag.ms``
   (:func:`cleanable_offsets`).
2. **Pass 1: the offset map.** Every keyed record of the dirty range goes into a
   :class:`SkimpyOffsetMap` (key digest -> its latest offset), until the map holds
   ``slots * log.cleaner.io.buffer.load.factor`` keys; the round then covers only what
   was mapped. Records of aborted transactions are left out.
3. **Pass 2: recopy.** All segments below the end of the map (the clean part too: its
   tombstones and markers may have expired) are rewritten in groups no larger than
   ``segment.bytes`` and ``segment.index.bytes``, each into one new segment named after
   its first base offset with the ``.cleaned`` suffix. A record stays if it is the
   latest of its key (or past the map); records without a key go; tombstones stay
   until ``delete.retention.ms`` after the first round that saw them (the delete
   horizon stamped into their batch, as Kafka does); records of aborted transactions
   go, and transaction markers go once nothing of their transaction is left and their
   horizon passed. Offsets never change (gaps are fine); batch fields (producer id,
   epoch, base sequence, transactional and control flags, the codec, the timestamp
   type, the last offset) survive; a batch left empty is kept as a bare header where
   Kafka keeps one (the last batch of an active producer, the last batch of the round).
4. **The swap.** Each new segment replaces its group through
   :meth:`~kafkastore.log.Log.replace_segments` (``.cleaned`` -> ``.swap`` -> final
   names, the old files renamed ``.deleted``), so a crash at any point leaves, after
   reopening, the old segments or the new ones, whole.

Transactions: as in Kafka, a round takes the aborted transactions of its range from
the ``.txnindex`` files (``Log.collect_aborted_transactions``), the first offset of a
transaction still undecided from the log's producer state (nothing from there on is
cleaned), and each active producer's last batch from it too (kept, possibly empty, while
the producer is active: within ``producer.id.expiration.ms`` of its last write).

:class:`LogCleaner` is Kafka's ``LogCleaner`` and ``LogCleanerManager`` for the logs of a
:class:`~kafkastore.manager.LogManager`: it picks the dirtiest log, keeps the
``cleaner-offset-checkpoint`` file of each log directory, throttles I/O, marks a log it
cannot clean as uncleanable (with the reason) instead of failing, and names the compacted
logs whose retention runs after its rounds (:meth:`LogCleaner.deletable_logs`; the
retention layer is a sibling, so the manager applies it). It owns no thread: the
manager's scheduler calls :meth:`LogCleaner.clean_filthiest_log`.
:func:`clean` cleans one log now, on its own.

Thread-safety: a :class:`Cleaner` and its offset map serve one cleaning at a time. A
round reads segments without the log's lock (like any reader) and takes it only to swap,
after checking that its segments are still those of the log and unchanged; appends,
reads, rolls and retention go on meanwhile. A round that finds its segments changed
(truncated, deleted, log closed) stops with :class:`~kafkastore.errors.LogCleaningAbortedError`
and leaves nothing behind.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

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
from kafkastore.checkpoint import OffsetCheckpointFile
from kafkastore.config import (
    Check,
    ConfigBase,
    ConfigError,
    ConfigKey,
    at_least,
    parse_bool,
    parse_double,
    parse_long,
)
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
from kafkastore.topic import TopicPartition
from kafkastore.txn_index import AbortedTxn

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "Cleaner",
    "CleanerConfig",
    "CleanerStats",
    "LogCleaner",
    "LogToClean",
    "SkimpyOffsetMap",
    "Throttler",
    "clean",
    "cleanable_offsets",
    "group_segments_by_size",
]

_log = logging.getLogger(__name__)

#: Per log directory: ``topic partition offset`` lines, the first dirty offset of each
#: compacted partition (Kafka's ``LogCleanerManager.offsetCheckpointFile``).
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

SkimpyOffsetMap = _offset_map.SkimpyOffsetMap

_INT_MAX = (1 << 31) - 1
_LONG_MAX = (1 << 63) - 1

# Kafka's BatchRetention
_DELETE, _DELETE_EMPTY, _RETAIN_EMPTY = 0, 1, 2


# -- configuration ------------------------------------------------------------------------


def _positive(v: float) -> str | None:
    return "must be positive" if v <= 0 else None


def _load_factor(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


_POSITIVE = Check(_positive, "(0,...]")


@dataclass(frozen=True, init=False, repr=False, slots=True)
class CleanerConfig(ConfigBase):
    """The broker's ``log.cleaner.*`` settings (Kafka's ``CleanerConfig``), Kafka's names
    and defaults; the Python spellings (``log_cleaner_dedupe_buffer_size``,
    ``dedupe_buffer_size``) work too, as for every :class:`~kafkastore.config.ConfigBase`.

    ``log.cleaner.dedupe.buffer.size`` (128 MiB) is shared by the cleaner threads, each
    map taking ``min(size / threads, 2**31 - 1)`` bytes; kafkastore cleans one log at a
    time on the manager's scheduler, so ``log.cleaner.threads`` only sets that share.
    ``log.cleaner.io.buffer.size`` (512 KiB) is likewise split, half for reading and
    half for writing, per thread. ``producer.id.expiration.ms`` (1 day) is how long a
    producer's last batch is kept after its last write. The map must hold more than
    one entry at the load factor (Kafka's ``Cleaner`` checks the same). Immutable.
    """

    CONFIG_KEYS = (
        ConfigKey("log.cleaner.enable", "enable_cleaner", parse_bool, True, None,
                  "Run the log cleaner on the logs whose ``cleanup.policy`` has "
                  "``compact``."),
        ConfigKey("log.cleaner.threads", "num_threads", parse_long, 1, at_least(1),
                  "Cleaner threads the dedupe and I/O buffers are divided between."),
        ConfigKey("log.cleaner.dedupe.buffer.size", "dedupe_buffer_size", parse_long,
                  134217728, _POSITIVE, "Bytes of the offset maps of all cleaner threads "
                  "(128 MiB; 24 bytes an entry)."),
        ConfigKey("log.cleaner.io.buffer.load.factor", "dedupe_buffer_load_factor",
                  parse_double, 0.9, Check(_load_factor, "(0,...,1]"),
                  "How full an offset map may get."),
        ConfigKey("log.cleaner.io.buffer.size", "io_buffer_size", parse_long, 524288,
                  _POSITIVE, "Bytes of the read and write buffers of all cleaner threads "
                  "(512 KiB)."),
        ConfigKey("log.cleaner.io.max.bytes.per.second", "max_io_bytes_per_second",
                  parse_double, math.inf, _POSITIVE,
                  "Throttle: the most bytes a second the cleaner reads and writes."),
        ConfigKey("log.cleaner.backoff.ms", "backoff_ms", parse_long, 15000, _POSITIVE,
                  "How often the log manager's scheduler runs the cleaner (Kafka: how "
                  "long a cleaner thread sleeps when no log needs cleaning)."),
        ConfigKey("producer.id.expiration.ms", "producer_id_expiration_ms", parse_long,
                  86400000, _POSITIVE, "How long a producer's last batch is kept after its "
                  "last write (1 day)."),
    )
    _WHAT = "log cleaner"

    enable_cleaner: bool
    num_threads: int
    dedupe_buffer_size: int
    dedupe_buffer_load_factor: float
    io_buffer_size: int
    max_io_bytes_per_second: float
    backoff_ms: int
    producer_id_expiration_ms: int

    @classmethod
    def _validate_values(cls, values: dict[str, object]) -> None:
        memory = _map_memory(values["dedupe_buffer_size"], values["num_threads"])  # type: ignore[arg-type]
        _check_map_size(memory // _BYTES_PER_SLOT, values["dedupe_buffer_load_factor"])  # type: ignore[arg-type]

    @property
    def map_memory(self) -> int:
        """Bytes of one cleaner's offset map."""
        return _map_memory(self.dedupe_buffer_size, self.num_threads)

    @property
    def read_buffer_size(self) -> int:
        """Bytes a cleaner reads at a time (grown for a larger batch)."""
        return max(self.io_buffer_size // self.num_threads // 2, 1)


def _map_memory(dedupe_buffer_size: int, num_threads: int) -> int:
    return min(dedupe_buffer_size // num_threads, _INT_MAX)


_BYTES_PER_SLOT = 24   # SkimpyOffsetMap: a 16-byte digest and an 8-byte offset


def _check_map_size(slots: int, load_factor: float) -> None:
    # Kafka's Cleaner constructor asserts the same
    if slots * load_factor <= 1:
        raise ConfigError(
            "offset map is too small to fit in even a single message, so log cleaning "
            "will never make progress. You can increase log.cleaner.dedupe.buffer.size "
            "or decrease log.cleaner.threads", key="log.cleaner.dedupe.buffer.size")


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


# -- what to clean ----------------------------------------------------------------------------


class _LastRecord(NamedTuple):
    last_data_offset: int | None
    producer_epoch: int


@dataclass
class _ProducerState:
    """What a round needs of the log's producer state: its aborted transactions (from
    the ``.txnindex`` files), the first offset of an undecided transaction, and the last
    batch of each active producer."""

    log: Log
    first_unstable_offset: int | None
    last_records: dict[int, _LastRecord]   # active producers only

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Kafka's ``collectAbortedTransactions(start, end)``."""
        return self.log.collect_aborted_transactions(start, end)


def _control_type(view, position: int, size: int) -> ControlRecordType | None:
    """The type of the marker in the control batch at ``position`` (None if it holds no
    record: a marker already cleaned away)."""
    found = control_marker(view[position:position + size])
    return None if found is None else found[0].type


def _scan_producers(log: Log, now_ms: int, expiration_ms: int) -> _ProducerState:
    """The log's producer state as a round sees it (Kafka's ``activeProducers`` and
    ``firstUnstableOffset``); a producer idle for ``producer.id.expiration.ms`` with no
    open transaction counts as gone, as if the periodic expiration had run."""
    with log.lock:
        producers = log.producer_state_manager.producers
        active = {pid: _LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None,
                                   e.producer_epoch)
                  for pid, e in producers.items()
                  if e.current_txn_first_offset is not None
                  or now_ms - e.last_timestamp < expiration_ms}
        return _ProducerState(log, log.first_unstable_offset, active)


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

    def clean(self, to_clean: LogToClean, now_ms: int | None = None, *,
              producers: _ProducerState | None = None) -> tuple[int, CleanerStats]:
        """One round over ``to_clean``; returns ``(end offset, stats)`` where the end
        offset is the first offset the round did not cover (the next first dirty offset).
        ``producers`` is the walk of the log's headers made to choose the range, if any.
        """
        log = to_clean.log
        now = now_ms if now_ms is not None else (self._time_ms or log.time_ms)()
        stats = CleanerStats(rounds=1)
        truncated = log.truncated_to   # a truncation during the round aborts it
        if producers is None:
            producers = _scan_producers(log, now, self.config.producer_id_expiration_ms)
        clean_part = log.segments_between(0, to_clean.first_dirty_offset)
        legacy_delete_horizon = (clean_part[-1].last_modified()
                                 - log.config.delete_retention_ms) if clean_part else 0
        upper_bound = to_clean.first_uncleanable_offset
        self._build_offset_map(log, to_clean.first_dirty_offset, upper_bound, producers, stats)
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
            self._clean_segments(log, group, now, stats, tracker, producers,
                                 legacy_delete_horizon, upper_bound, truncated)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_time = time.monotonic()
        return end_offset, stats

    # -- pass 1 --------------------------------------------------------------------------

    def _build_offset_map(self, log: Log, start: int, end: int, producers: _ProducerState,
                          stats: CleanerStats) -> None:
        omap = self.offset_map
        omap.clear()
        dirty = log.segments_between(start, end)
        tracker = _TxnTracker()
        tracker.add_aborted(producers.aborted_between(start, end))
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
                        tracker: _TxnTracker, producers: _ProducerState,
                        legacy_delete_horizon: int, upper_bound: int,
                        truncated: int | None) -> None:
        sizes = [seg.size for seg in group]
        cleaned = _new_cleaned_segment(log, group[0].base_offset)
        tracker.cleaned_index = cleaned.txn_index
        try:
            for i, segment in enumerate(group):
                seg_end = group[i + 1].base_offset if i + 1 < len(group) \
                    else segment.read_next_offset()
                tracker.add_aborted(producers.aborted_between(segment.base_offset, seg_end))
                retain_legacy_deletes = segment.last_modified() > legacy_delete_horizon
                self._clean_into(log, segment, cleaned, now, stats, tracker, producers,
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
                    stats: CleanerStats, tracker: _TxnTracker, producers: _ProducerState,
                    retain_legacy_deletes: bool, upper_bound: int) -> None:
        delete_retention = log.config.delete_retention_ms
        for view, scan, batches in self._chunks(log, source, 0):
            self.throttler.maybe_throttle(scan.valid_bytes)
            stats.bytes_read += scan.valid_bytes
            out: list[bytes] = []
            max_ts, shallow, max_offset = -1, -1, -1
            for b in batches:
                kept = self._filter_batch(view, b, log, now, delete_retention, stats, tracker,
                                          producers, retain_legacy_deletes, upper_bound)
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
                      stats: CleanerStats, tracker: _TxnTracker, producers: _ProducerState,
                      retain_legacy_deletes: bool, upper_bound: int):
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
        last = producers.last_records.get(b.producer_id) if b.producer_id >= 0 else None
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
            stats.messages_read += max(b.record_count, 0)
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


# -- on demand ---------------------------------------------------------------------------------


def clean(log: Log, *, first_dirty_offset: int | None = None,
          config: CleanerConfig | None = None, now_ms: int | None = None,
          cleaner: Cleaner | None = None) -> tuple[int, CleanerStats]:
    """Compact ``log`` now, whatever its dirty ratio, as far as it is cleanable.

    Cleans from ``first_dirty_offset`` (default: the log start offset: everything) in as
    many rounds as the offset map needs. Returns ``(the next first dirty offset, the
    stats of all rounds)``; a caller that keeps the first returned value (as the
    ``cleaner-offset-checkpoint`` does) makes the next call cheaper.
    """
    cleaner = cleaner or Cleaner(config)
    now = log.time_ms() if now_ms is None else now_ms
    total = CleanerStats(rounds=0)
    dirty = first_dirty_offset
    while True:
        producers = _scan_producers(log, now, cleaner.config.producer_id_expiration_ms)
        first, uncleanable, _ = cleanable_offsets(log, dirty, now,
                                                  producers.first_unstable_offset)
        to_clean = LogToClean(None, log, first, uncleanable)
        if to_clean.cleanable_bytes == 0:
            dirty = first
            break
        end, stats = cleaner.clean(to_clean, now, producers=producers)
        total.add(stats)
        total.map_complete_time = stats.map_complete_time
        dirty = end
        if end >= to_clean.first_uncleanable_offset:
            break
    total.end_time = time.monotonic()
    return dirty, total


# -- the cleaner of a log manager ------------------------------------------------------------


class LogCleaner:
    """Kafka's ``LogCleaner`` and ``LogCleanerManager`` for a set of log directories.

    ``logs()`` returns ``{log directory: {TopicPartition: Log}}`` (what the
    :class:`~kafkastore.manager.LogManager` holds). Each log directory keeps a
    ``cleaner-offset-checkpoint`` with the first dirty offset of its compacted
    partitions. :meth:`clean_filthiest_log` is the scheduled task: one round on the
    dirtiest log whose dirty ratio passes ``min.cleanable.dirty.ratio`` (or that is past
    ``max.compaction.lag.ms``); the manager then runs retention over
    :meth:`deletable_logs`.

    A log that fails to clean (a corrupt segment, say) is marked uncleanable with the
    reason (:attr:`uncleanable`) and skipped from then on; the others go on.

    Thread-safety: :meth:`clean_filthiest_log`, :meth:`clean_log` and the checkpoint
    methods may be
    called from any thread; rounds run one at a time; :meth:`abort_cleaning` stops a
    running round of that partition from another thread.
    """

    def __init__(self, config: CleanerConfig, logs: Callable[[], Mapping[str, Mapping[
                 TopicPartition, Log]]], *, time_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self._logs = logs
        self._time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.RLock()       # state below
        self._round_lock = threading.Lock()  # one round at a time
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self.uncleanable: dict[TopicPartition, str] = {}
        self.last_stats: CleanerStats | None = None
        self.throttler = Throttler(config.max_io_bytes_per_second)
        self._cleaner: Cleaner | None = None

    def _get_cleaner(self) -> Cleaner:
        if self._cleaner is None:   # the 128 MiB map only once something is compacted
            self._cleaner = Cleaner(self.config, throttler=self.throttler,
                                    time_ms=self._time_ms, check_done=self._check_done)
        return self._cleaner

    # -- checkpoints ---------------------------------------------------------------------

    @staticmethod
    def checkpoint_file(log_dir: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT_FILE))

    def checkpoints(self, log_dir: str) -> dict[TopicPartition, int]:
        """The first dirty offsets recorded in ``log_dir`` (empty if there is no file)."""
        path = os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT_FILE)
        if not os.path.exists(path):
            return {}
        try:
            return self.checkpoint_file(log_dir).read()
        except KafkaStoreError as exc:
            _log.warning("Ignoring the unreadable cleaner checkpoint %s: %s", path, exc)
            return {}

    def update_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int | None) -> None:
        """Set (or, with None, remove) ``tp``'s entry; entries of partitions no longer in
        ``log_dir`` are dropped, as Kafka does on each update."""
        with self._lock:
            present = self._logs().get(log_dir, {})
            offsets = {k: v for k, v in self.checkpoints(log_dir).items() if k in present}
            if offset is None:
                offsets.pop(tp, None)
            else:
                offsets[tp] = offset
            self.checkpoint_file(log_dir).write(offsets)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        """Lower ``tp``'s entry to ``offset`` if it is above (the log was truncated)."""
        with self._lock:
            current = self.checkpoints(log_dir).get(tp)
            if current is not None and current > offset:
                self.update_checkpoint(log_dir, tp, offset)

    # -- aborting --------------------------------------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop a round of ``tp`` that is running (it raises at its next check) and keep
        ``tp`` out of rounds until :meth:`resume_cleaning`."""
        with self._lock:
            self._aborted.add(tp)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        with self._lock:
            self._aborted.discard(tp)

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` was deleted: drop its uncleanable mark and abort its cleaning."""
        with self._lock:
            self.uncleanable.pop(tp, None)
            self._aborted.add(tp)

    def _check_done(self, log: Log) -> None:
        if log.closed:
            raise LogCleaningAbortedError(f"Log {log.dir} was closed", path=log.dir)
        if not self._aborted:
            return
        with self._lock:
            aborted = any(self._logs_by_tp().get(tp) is log for tp in self._aborted)
        if aborted:
            raise LogCleaningAbortedError(f"Cleaning of {log.dir} was aborted", path=log.dir)

    def _logs_by_tp(self) -> dict[TopicPartition, Log]:
        return {tp: log for logs in self._logs().values() for tp, log in logs.items()}

    # -- choosing and cleaning -------------------------------------------------------------

    def _candidates(self, now: int):
        for log_dir, logs in self._logs().items():
            checkpoints = None
            for tp, log in logs.items():
                if (not log.config.compact or tp in self.uncleanable or tp in self._aborted
                        or tp in self._in_progress or log.closed):
                    continue
                if checkpoints is None:
                    checkpoints = self.checkpoints(log_dir)
                yield log_dir, tp, log, checkpoints.get(tp)

    def _to_clean(self, log_dir: str, tp: TopicPartition, log: Log, checkpoint: int | None,
                  now: int, *, exact: bool = True) -> tuple[LogToClean, _ProducerState | None]:
        """The sections of ``log``. With ``exact`` False the walk of its batch headers
        (which finds an undecided transaction) is skipped: an estimate, good for ranking
        logs, that can only overstate what is cleanable."""
        truncated = log.truncated_to
        if checkpoint is not None and truncated is not None and checkpoint > truncated:
            checkpoint = truncated
            self.update_checkpoint(log_dir, tp, truncated)
        producers = _scan_producers(log, now, self.config.producer_id_expiration_ms) \
            if exact else None
        first, uncleanable, reset = cleanable_offsets(
            log, checkpoint, now, producers.first_unstable_offset if producers else None)
        if reset:
            self.update_checkpoint(log_dir, tp, first)
        delay = max_compaction_delay(log, first, now)
        return LogToClean(tp, log, first, uncleanable, needs_compaction_now=delay > 0), producers

    @staticmethod
    def _ready(to_clean: LogToClean) -> bool:
        if to_clean.total_bytes <= 0 or to_clean.cleanable_bytes <= 0:
            return False
        return (to_clean.needs_compaction_now
                or to_clean.cleanable_ratio > to_clean.log.config.min_cleanable_dirty_ratio)

    def grab_filthiest_compacted_log(self, now_ms: int | None = None
                                     ) -> tuple[str, LogToClean] | None:
        """Kafka's ``grabFilthiestCompactedLog``: the log to clean next, marked in
        progress (release it with :meth:`done_cleaning`), or None."""
        chosen = self._grab(self._time_ms() if now_ms is None else now_ms)
        return None if chosen is None else chosen[:2]

    def _grab(self, now: int) -> tuple[str, LogToClean, _ProducerState] | None:
        # Logs are ranked on an estimate that skips the walk of their batch headers (a
        # read of every header of the log); only the one about to be cleaned is walked,
        # and if an undecided transaction then leaves it not worth cleaning, the next.
        with self._lock:
            ranked = []
            for log_dir, tp, log, checkpoint in self._candidates(now):
                try:
                    estimate, _ = self._to_clean(log_dir, tp, log, checkpoint, now, exact=False)
                except KafkaStoreError as exc:
                    self._mark_uncleanable(tp, exc)
                    continue
                if self._ready(estimate):
                    ranked.append((estimate.cleanable_ratio, log_dir, tp, log, checkpoint))
            ranked.sort(key=lambda item: item[0], reverse=True)
            for _, log_dir, tp, log, checkpoint in ranked:
                try:
                    to_clean, producers = self._to_clean(log_dir, tp, log, checkpoint, now)
                except KafkaStoreError as exc:
                    self._mark_uncleanable(tp, exc)
                    continue
                if self._ready(to_clean):
                    self._in_progress.add(tp)
                    return log_dir, to_clean, producers
            return None

    def done_cleaning(self, tp: TopicPartition) -> None:
        with self._lock:
            self._in_progress.discard(tp)

    def _mark_uncleanable(self, tp: TopicPartition, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        _log.error("Log cleaning of %s failed; marking it uncleanable: %s", tp, reason)
        with self._lock:
            self.uncleanable[tp] = reason

    def _run_round(self, log_dir: str, to_clean: LogToClean, now: int,
                   producers: _ProducerState | None) -> CleanerStats | None:
        tp = to_clean.tp
        assert tp is not None
        try:
            with self._round_lock:
                end, stats = self._get_cleaner().clean(to_clean, now, producers=producers)
            self.update_checkpoint(log_dir, tp, end)
            self.last_stats = stats
            return stats
        except LogCleaningAbortedError as exc:
            _log.info("Cleaning of %s aborted: %s", tp, exc)
            return None
        except (KafkaStoreError, OSError, ValueError) as exc:
            self._mark_uncleanable(tp, exc)
            return None
        finally:
            self.done_cleaning(tp)

    def clean_filthiest_log(self, now_ms: int | None = None) -> CleanerStats | None:
        """One round on the dirtiest log that is due; its stats, or None."""
        now = self._time_ms() if now_ms is None else now_ms
        chosen = self._grab(now)
        if chosen is None:
            return None
        return self._run_round(*chosen[:2], now, chosen[2])

    def clean_log(self, tp: TopicPartition, now_ms: int | None = None) -> CleanerStats | None:
        """Clean ``tp`` now, whatever its dirty ratio (one round; None if it is not a
        compacted log, is being cleaned, was aborted, or failed: see :attr:`uncleanable`)."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            for log_dir, cand_tp, log, checkpoint in self._candidates(now):
                if cand_tp == tp:
                    try:
                        to_clean, producers = self._to_clean(log_dir, tp, log, checkpoint, now)
                    except KafkaStoreError as exc:
                        self._mark_uncleanable(tp, exc)
                        return None
                    if to_clean.cleanable_bytes <= 0:
                        return None
                    self._in_progress.add(tp)
                    break
            else:
                return None
        return self._run_round(log_dir, to_clean, now, producers)

    def deletable_logs(self) -> list[tuple[TopicPartition, Log]]:
        """Kafka's ``deletableLogs``: compacted logs not being cleaned and not uncleanable,
        whose retention the cleaner runs."""
        with self._lock:
            return [(tp, log) for logs in self._logs().values() for tp, log in logs.items()
                    if log.config.compact and tp not in self._in_progress
                    and tp not in self.uncleanable and not log.closed]

