"""Log compaction: Kafka's log cleaner (kafka-storage.md section 7).

A log with ``compact`` in its ``cleanup.policy`` keeps, for every key, at least its
latest value. The cleaner gets there in rounds: each picks a log's cleanable range
(from the cleaner checkpoint up to the active segment, an undecided transaction or
``min.compaction.lag.ms``), maps the latest offset of every key in it, recopies the
segments keeping only what Kafka keeps (latest values, live tombstones and markers,
producers' last batches), and swaps the copies in crash-safely. The parts, one per
Kafka class:

* :mod:`kafkastore.cleaner_config`: :class:`CleanerConfig` (Kafka's ``CleanerConfig``).
* :mod:`kafkastore.cleaner_manager`: :func:`cleanable_offsets`,
  ``max_compaction_delay``, :class:`LogToClean` and the
  :data:`CLEANER_OFFSET_CHECKPOINT_FILE` name (Kafka's ``LogCleanerManager``
  calculations and ``LogToClean``).
* :mod:`kafkastore.cleaner_round`: :class:`Cleaner`, one round with its passes, the
  rules of what stays and the swap (Kafka's ``Cleaner``, ``CleanerStats``,
  ``CleanedTransactionMetadata``), :class:`Throttler` and
  :func:`group_segments_by_size`.
* this module: :class:`LogCleaner` and :func:`clean`; it re-exports the names above, so
  ``from kafkastore.cleaner import Cleaner, CleanerConfig, clean`` keeps working.

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

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from kafkastore.checkpoint import OffsetCheckpointFile
from kafkastore.cleaner_config import CleanerConfig
from kafkastore.cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LogToClean,
    cleanable_offsets,
    max_compaction_delay,
)
from kafkastore.cleaner_round import (
    Cleaner,
    CleanerStats,
    SkimpyOffsetMap,
    Throttler,
    group_segments_by_size,
)
from kafkastore.errors import KafkaStoreError, LogCleaningAbortedError
from kafkastore.log import Log
from kafkastore.topic import TopicPartition
from kafkastore.txn_index import AbortedTxn  # noqa: F401  (documented here: docs/api.rst)

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
        first, uncleanable, _ = cleanable_offsets(log, dirty, now, log.first_unstable_offset)
        to_clean = LogToClean(None, log, first, uncleanable)
        if to_clean.cleanable_bytes == 0:
            dirty = first
            break
        end, stats = cleaner.clean(to_clean, now)
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
                  now: int, *, exact: bool = True) -> LogToClean:
        """The sections of ``log``. With ``exact`` False an undecided transaction is not
        looked for: an estimate, good for ranking logs, that can only overstate what is
        cleanable."""
        truncated = log.truncated_to
        if checkpoint is not None and truncated is not None and checkpoint > truncated:
            checkpoint = truncated
            self.update_checkpoint(log_dir, tp, truncated)
        first, uncleanable, reset = cleanable_offsets(
            log, checkpoint, now, log.first_unstable_offset if exact else None)
        if reset:
            self.update_checkpoint(log_dir, tp, first)
        delay = max_compaction_delay(log, first, now)
        return LogToClean(tp, log, first, uncleanable, needs_compaction_now=delay > 0)

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
        return self._grab(self._time_ms() if now_ms is None else now_ms)

    def _grab(self, now: int) -> tuple[str, LogToClean] | None:
        # Logs are ranked on an estimate that ignores undecided transactions; only the
        # one about to be cleaned is checked for one, and if an undecided transaction
        # then leaves it not worth cleaning, the next.
        with self._lock:
            ranked = []
            for log_dir, tp, log, checkpoint in self._candidates(now):
                try:
                    estimate = self._to_clean(log_dir, tp, log, checkpoint, now, exact=False)
                except KafkaStoreError as exc:
                    self._mark_uncleanable(tp, exc)
                    continue
                if self._ready(estimate):
                    ranked.append((estimate.cleanable_ratio, log_dir, tp, log, checkpoint))
            ranked.sort(key=lambda item: item[0], reverse=True)
            for _, log_dir, tp, log, checkpoint in ranked:
                try:
                    to_clean = self._to_clean(log_dir, tp, log, checkpoint, now)
                except KafkaStoreError as exc:
                    self._mark_uncleanable(tp, exc)
                    continue
                if self._ready(to_clean):
                    self._in_progress.add(tp)
                    return log_dir, to_clean
            return None

    def done_cleaning(self, tp: TopicPartition) -> None:
        with self._lock:
            self._in_progress.discard(tp)

    def _mark_uncleanable(self, tp: TopicPartition, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        _log.error("Log cleaning of %s failed; marking it uncleanable: %s", tp, reason)
        with self._lock:
            self.uncleanable[tp] = reason

    def _run_round(self, log_dir: str, to_clean: LogToClean, now: int) -> CleanerStats | None:
        tp = to_clean.tp
        assert tp is not None
        try:
            with self._round_lock:
                end, stats = self._get_cleaner().clean(to_clean, now)
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
        return self._run_round(*chosen, now)

    def clean_log(self, tp: TopicPartition, now_ms: int | None = None) -> CleanerStats | None:
        """Clean ``tp`` now, whatever its dirty ratio (one round; None if it is not a
        compacted log, is being cleaned, was aborted, or failed: see :attr:`uncleanable`)."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            for log_dir, cand_tp, log, checkpoint in self._candidates(now):
                if cand_tp == tp:
                    try:
                        to_clean = self._to_clean(log_dir, tp, log, checkpoint, now)
                    except KafkaStoreError as exc:
                        self._mark_uncleanable(tp, exc)
                        return None
                    if to_clean.cleanable_bytes <= 0:
                        return None
                    self._in_progress.add(tp)
                    break
            else:
                return None
        return self._run_round(log_dir, to_clean, now)

    def deletable_logs(self) -> list[tuple[TopicPartition, Log]]:
        """Kafka's ``deletableLogs``: compacted logs not being cleaned and not uncleanable,
        whose retention the cleaner runs."""
        with self._lock:
            return [(tp, log) for logs in self._logs().values() for tp, log in logs.items()
                    if log.config.compact and tp not in self._in_progress
                    and tp not in self.uncleanable and not log.closed]
