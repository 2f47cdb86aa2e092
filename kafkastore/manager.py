"""LogManager: a store of topic-partition logs in one or more log directories.

Kafka's ``LogManager``, for a process that embeds a durable log (kafka-storage.md §1,
§5.7, §5.10, §6.1). A log directory holds::

    <log dir>/
        .lock                               held while a manager has the directory open
        meta.properties                     checked if present (written only when asked)
        .kafka_cleanshutdown                present only between a clean close and an open
        recovery-point-offset-checkpoint    Kafka's text checkpoint, topic partition offset
        log-start-offset-checkpoint         the same, for logs whose start moved
        <topic>-<partition>/                one Log each
        <topic>-<partition>.<id>-delete/    a deleted log, removed after file.delete.delay.ms

Opening: each directory is locked (:class:`~kafkastore.log_dir.LogDirLock`, which
Kafka's broker honours too); the clean-shutdown marker and both checkpoints are read
(a malformed checkpoint is logged and ignored: every log of that directory is then fully
recovered rather than trusted); every partition directory is validated (topic rules,
no path escaping the log directory) and opened with its recovery point and start
offset; the marker is removed, so a crash from then on counts as unclean; leftover
``-delete`` directories are scheduled for removal.

Background work: the manager is the only part of kafkastore that owns a thread. One
scheduler runs, on the injectable clock, Kafka's periodic tasks: flush by ``flush.ms``
(every ``log.flush.scheduler.interval.ms``), retention (every
``log.retention.check.interval.ms``, :func:`kafkastore.retention.delete_old_segments`),
deletion of ``.deleted`` segments and ``-delete`` directories whose
``file.delete.delay.ms`` has passed, and both checkpoints (every
``log.flush.offset.checkpoint.interval.ms`` and
``log.flush.start.offset.checkpoint.interval.ms``). With ``background=False`` no thread
starts and :meth:`LogManager.run_scheduled_tasks` runs what is due, for tests and for
callers with their own loop.

Closing (:meth:`LogManager.close`, or leaving the ``with`` block): the scheduler stops,
every log is flushed and closed, both checkpoints are written, the clean-shutdown marker
is written and fsynced, and the locks are released.

Thread-safety: every public method may be called from any thread. The manager's lock
guards the map of logs; each :class:`~kafkastore.log.Log` guards itself, and reads need
no lock.
"""

from __future__ import annotations

import heapq
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkastore import _fileio
from kafkastore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kafkastore.cleaner import CleanerConfig, CleanerStats, LogCleaner
from kafkastore.config import (
    LONG_MAX,
    ConfigBase,
    ConfigError,
    ConfigKey,
    LogConfig,
    at_least,
    parse_int,
    parse_long,
)
from kafkastore.errors import (
    CorruptCheckpointError,
    InvalidPartitionDirError,
    InvalidTopicError,
    KafkaStoreError,
)
from kafkastore.log import Log
from kafkastore.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    REMOTE_INDEX_CACHE_DIR,
    LogDirLock,
    MetaProperties,
    check_partition_dir,
    log_delete_dir_name,
    log_dir_name,
    parse_partition_dir_name,
    read_meta_properties,
    write_meta_properties,
)
from kafkastore.retention import delete_old_segments
from kafkastore.storage import require_local_path
from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME, TopicPartition, validate_topic

__all__ = ["LogManager", "ManagerConfig"]

_log = logging.getLogger(__name__)

#: How often the scheduler looks for deletions that became due (Kafka schedules one task
#: per deletion; polling at this rate is the same to within a second).
_DELETE_POLL_MS = 1000


@dataclass(frozen=True, init=False, repr=False, slots=True)
class ManagerConfig(ConfigBase):
    """The broker-level settings a :class:`LogManager` uses, under Kafka's names and with
    Kafka's defaults; the Python spellings (``log_retention_check_interval_ms``,
    ``retention_check_interval_ms``) work too, as for every
    :class:`~kafkastore.config.ConfigBase`.

    ``log.flush.scheduler.interval.ms`` defaults to Long.MAX_VALUE: flushes happen only
    by roll, close and each log's ``flush.ms`` / ``flush.messages``. Every interval must
    be at least 1 ms (the scheduler runs each task at its interval). Immutable.
    """

    CONFIG_KEYS = (
        ConfigKey("log.retention.check.interval.ms", "retention_check_interval_ms",
                  parse_long, 300000, at_least(1),
                  "How often the scheduler deletes segments past retention (5 minutes)."),
        ConfigKey("log.flush.scheduler.interval.ms", "flush_scheduler_interval_ms",
                  parse_long, LONG_MAX, at_least(1),
                  "How often the scheduler flushes the logs whose ``flush.ms`` is due."),
        ConfigKey("log.flush.offset.checkpoint.interval.ms",
                  "recovery_point_checkpoint_interval_ms", parse_long, 60000, at_least(1),
                  "How often the recovery points are written to ``recovery-point-offset-"
                  "checkpoint`` (1 minute)."),
        ConfigKey("log.flush.start.offset.checkpoint.interval.ms",
                  "log_start_offset_checkpoint_interval_ms", parse_long, 60000, at_least(1),
                  "How often the log start offsets are written to ``log-start-offset-"
                  "checkpoint`` (1 minute)."),
        ConfigKey("producer.id.expiration.check.interval.ms",
                  "producer_id_expiration_check_interval_ms", parse_long, 600000,
                  at_least(1), "How often producers idle for ``producer.id.expiration.ms`` "
                  "are forgotten (10 minutes)."),
        # Kafka: TransactionLogConfigs (a broker setting of the producer state)
        ConfigKey("producer.id.expiration.ms", "producer_id_expiration_ms", parse_int,
                  86400000, at_least(1), "How long a log keeps the state of a producer "
                  "idle with no open transaction (1 day); the cleaner keeps the last "
                  "batch of every producer a log still holds."),
    )
    _WHAT = "log manager"

    retention_check_interval_ms: int
    flush_scheduler_interval_ms: int
    recovery_point_checkpoint_interval_ms: int
    log_start_offset_checkpoint_interval_ms: int
    producer_id_expiration_check_interval_ms: int
    producer_id_expiration_ms: int


class _Scheduler:
    """Periodic tasks on an injectable clock, run by one daemon thread or by hand.

    A task that raises is logged and runs again at its next period (Kafka's
    ``KafkaScheduler`` does the same); it never stops the others.
    """

    def __init__(self, time_ms: Callable[[], int]) -> None:
        self._time_ms = time_ms
        self._heap: list[tuple[int, int, str, int, Callable[[int], object]]] = []
        self._seq = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def schedule(self, name: str, period_ms: int, fn: Callable[[int], object],
                 first_delay_ms: int | None = None) -> None:
        if period_ms >= LONG_MAX:
            return  # Long.MAX_VALUE: never (Kafka's disabled flusher)
        now = self._time_ms()
        with self._lock:
            self._seq += 1
            delay = period_ms if first_delay_ms is None else first_delay_ms
            heapq.heappush(self._heap, (now + delay, self._seq, name, period_ms, fn))
        self._wake.set()

    def run_due(self, now: int | None = None) -> list[str]:
        """Run every task due at ``now`` (default: the clock); the names of those run."""
        ran = []
        while True:
            now_ = self._time_ms() if now is None else now
            with self._lock:
                if not self._heap or self._heap[0][0] > now_ or self._stop:
                    return ran
                due, seq, name, period, fn = heapq.heappop(self._heap)
                heapq.heappush(self._heap, (max(due + period, now_ + 1), seq, name, period, fn))
            try:
                fn(now_)
            except Exception:
                _log.exception("kafkastore: scheduled task %r failed", name)
            ran.append(name)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="kafkastore-scheduler",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            self.run_due()
            with self._lock:
                wait = (self._heap[0][0] - self._time_ms()) / 1000 if self._heap else 1.0
            self._wake.wait(timeout=min(max(wait, 0.001), 1.0))
            self._wake.clear()

    def stop(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class _LogDir:
    """One open log directory: its path, lock and checkpoint files."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = LogDirLock(path)
        self.recovery_points = OffsetCheckpointFile(os.path.join(path,
                                                                 RECOVERY_POINT_CHECKPOINT_FILE))
        self.log_start_offsets = OffsetCheckpointFile(
            os.path.join(path, LOG_START_OFFSET_CHECKPOINT_FILE))


class LogManager:
    """Kafka's ``LogManager``: open, create, delete and look after the logs of one or more
    log directories (see the module documentation for the directory layout, the opening
    and closing sequence and the background tasks).

    Parameters
    ----------
    log_dirs
        One path or several. Created if missing.
    config
        The default :class:`~kafkastore.config.LogConfig` (or a dict of Kafka topic
        settings) of every log.
    topic_configs
        Per-topic overrides: ``{topic: {"retention.ms": 1000, ...}}`` with Kafka's
        topic-level names, applied over ``config``.
    manager_config
        :class:`ManagerConfig` or a dict of its Kafka broker settings.
    cleaner_config
        :class:`~kafkastore.cleaner.CleanerConfig` or a dict of the broker's
        ``log.cleaner.*`` settings. With ``log.cleaner.enable`` (the default) the
        scheduler runs a cleaning round every ``log.cleaner.backoff.ms`` on the dirtiest
        compacted log, then retention of the compacted logs; :meth:`clean` cleans one
        log on demand either way.
    meta
        A :class:`~kafkastore.log_dir.MetaProperties` to write to directories that have
        none, and to check against those that have one. Without it an existing
        ``meta.properties`` is validated and none is created (a Kafka broker in KRaft
        mode expects its own, made by ``kafka-storage format``).
    time_ms
        The clock (milliseconds); tests inject a fake one.
    background
        Start the scheduler thread (default). With False, call
        :meth:`run_scheduled_tasks` to run what is due.

    Raises
    ------
    LogDirectoryLockedError
        A directory is open in another manager or process (or a Kafka broker).
    InvalidPartitionDirError, UnsafePathError
        A directory entry is not a valid partition directory or escapes the log
        directory; nothing is opened.
    """

    def __init__(self, log_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                 config: LogConfig | Mapping[str, object] | None = None, *,
                 topic_configs: Mapping[str, Mapping[str, object]] | None = None,
                 manager_config: ManagerConfig | Mapping[str, object] | None = None,
                 cleaner_config: CleanerConfig | Mapping[str, object] | None = None,
                 meta: MetaProperties | None = None,
                 time_ms: Callable[[], int] | None = None,
                 background: bool = True) -> None:
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        # writing needs POSIX files: refuse s3:// and the like before creating anything
        paths = [os.path.abspath(require_local_path(os.fspath(p), "LogManager"))
                 for p in log_dirs]
        if not paths:
            raise ValueError("LogManager needs at least one log directory")
        if len(set(paths)) != len(paths):
            raise ValueError(f"Duplicate log directories in {paths}")
        self._default = config if isinstance(config, LogConfig) else \
            LogConfig.from_dict(config or {})
        self._overrides: dict[str, dict[str, object]] = {}
        for topic, overrides in (topic_configs or {}).items():
            validate_topic(topic)
            self._overrides[topic] = dict(overrides)
            self._topic_config(topic)  # fail early on a bad override
        self.manager_config = manager_config if isinstance(manager_config, ManagerConfig) \
            else ManagerConfig(manager_config)
        self._time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        cleaner_config = cleaner_config if isinstance(cleaner_config, CleanerConfig) \
            else CleanerConfig(cleaner_config)
        #: The log cleaner (Kafka's LogCleaner); scheduled only with log.cleaner.enable.
        self.cleaner = LogCleaner(cleaner_config, self._logs_by_dir, time_ms=self._time_ms)
        # one producer.id.expiration.ms for every log (a broker setting)
        self._producer_expiration_ms = self.manager_config.producer_id_expiration_ms
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, _LogDir] = {}
        self._dirs: list[_LogDir] = []
        self._doomed_dirs: list[tuple[int, str, Log | None]] = []
        self._closed = False
        self._scheduler = _Scheduler(self._time_ms)
        try:
            for path in paths:
                _fileio.makedirs(path)
                log_dir = _LogDir(path)
                self._dirs.append(log_dir)
                self._check_meta(log_dir, meta)
            for log_dir in self._dirs:
                self._load_dir(log_dir)
        except BaseException:
            self._abandon()
            raise
        self._schedule_tasks()
        if background:
            self._scheduler.start()

    # -- opening -----------------------------------------------------------

    @staticmethod
    def _check_meta(log_dir: _LogDir, meta: MetaProperties | None) -> None:
        found = read_meta_properties(log_dir.path)
        if found is None:
            if meta is not None:
                write_meta_properties(log_dir.path, meta)
            return
        if meta is not None and (found.cluster_id, found.node_id) != (meta.cluster_id,
                                                                      meta.node_id):
            raise KafkaStoreError(
                f"meta.properties in {log_dir.path} belongs to cluster {found.cluster_id} "
                f"node {found.node_id}, not cluster {meta.cluster_id} node {meta.node_id}",
                path=log_dir.path)

    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpointError as exc:
            _log.warning("kafkastore: ignoring %s (%s); its logs are fully recovered",
                         checkpoint.path, exc)
            return {}

    def _load_dir(self, log_dir: _LogDir) -> None:
        fs = _fileio.fs
        marker = os.path.join(log_dir.path, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        try:
            recovery_points = log_dir.recovery_points.read()
        except CorruptCheckpointError as exc:
            # never trust a damaged checkpoint: recover every log of the directory fully
            _log.warning("kafkastore: %s is malformed (%s); recovering %s fully",
                         log_dir.recovery_points.path, exc, log_dir.path)
            recovery_points, clean = {}, False
        start_offsets = self._read_checkpoint(log_dir.log_start_offsets)
        entries = sorted(os.scandir(log_dir.path), key=lambda e: e.name)
        plan = []
        for entry in entries:
            if not entry.is_dir(follow_symlinks=True):
                continue
            # Kafka's LogManager.loadLogs skips these two: the tiered-storage index cache,
            # and the KRaft metadata log, which the Raft layer owns (retention or the
            # cleaner running over it here would destroy the cluster's metadata)
            if entry.name == REMOTE_INDEX_CACHE_DIR or \
                    entry.name.startswith(CLUSTER_METADATA_TOPIC_NAME + "-"):
                continue
            # a listed name is one component; only a symlink can lead elsewhere, so only
            # a symlink needs the (realpath, one lstat per component) check
            full = check_partition_dir(log_dir.path, entry.name) if entry.is_symlink() \
                else os.path.join(log_dir.path, entry.name)
            parsed = parse_partition_dir_name(entry.name, path=full)
            if parsed.suffix == DELETE_DIR_SUFFIX:
                self._doomed_dirs.append((self._time_ms() + self._default.file_delete_delay_ms,
                                          full, None))
                continue
            if parsed.suffix:
                _log.warning("kafkastore: leaving %s alone (%s directories are not used "
                             "here)", full, parsed.suffix)
                continue
            tp = parsed.topic_partition
            if tp in self._logs:
                raise InvalidPartitionDirError(
                    f"Duplicate log directories for {tp}: {self._log_dir_of[tp].path} and "
                    f"{log_dir.path}", name=entry.name, path=full)
            plan.append((tp, full))
        for tp, full in plan:
            log = Log.open(full, self._topic_config(tp.topic),
                           recovery_point=recovery_points.get(tp, 0),
                           log_start_offset=start_offsets.get(tp, 0),
                           had_clean_shutdown=clean, time_ms=self._time_ms,
                           producer_id_expiration_ms=self._producer_expiration_ms)
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
        if os.path.exists(marker):
            # from here on a crash counts as unclean (Kafka deletes it after loading)
            fs.unlink(marker)
            fs.fsync_dir(log_dir.path)

    def _topic_config(self, topic: str) -> LogConfig:
        overrides = self._overrides.get(topic)
        return self._default.replace(**overrides) if overrides else self._default

    def _abandon(self) -> None:
        """Undo a failed open: close what was opened, release the locks."""
        for log in self._logs.values():
            log.close_handlers()
        for log_dir in self._dirs:
            log_dir.lock.release()
        self._closed = True

    # -- the map of logs ---------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStoreError("The log manager is closed")

    def get(self, topic: str, partition: int) -> Log | None:
        """The open log of ``topic``-``partition``, or None."""
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create(self, topic: str, partition: int,
                      config: LogConfig | Mapping[str, object] | None = None) -> Log:
        """The log of ``topic``-``partition``, created (empty) in the log directory with
        the fewest logs if it does not exist.

        ``config`` (a LogConfig, or Kafka topic settings applied over the topic's
        configuration) is used only when the log is created.
        """
        validate_topic(topic)
        if topic == CLUSTER_METADATA_TOPIC_NAME:
            # its directory is skipped when the logs are loaded (as Kafka's is), so a log
            # made here would vanish at the next open
            raise InvalidTopicError(f"{topic} is the KRaft metadata log, owned by the Raft "
                                    "layer; a log manager does not manage it", topic=topic)
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ValueError(f"Invalid partition {partition!r}: a non-negative int is expected")
        tp = TopicPartition(topic, partition)
        with self._lock:
            self._check_open()
            log = self._logs.get(tp)
            if log is not None:
                return log
            counts = {id(d): 0 for d in self._dirs}
            for d in self._log_dir_of.values():
                counts[id(d)] += 1
            log_dir = min(self._dirs, key=lambda d: counts[id(d)])
            name = log_dir_name(tp)
            full = check_partition_dir(log_dir.path, name)
            if isinstance(config, LogConfig):
                log_config = config
            elif config:
                log_config = self._topic_config(topic).replace(**config)
            else:
                log_config = self._topic_config(topic)
            fresh = not os.path.exists(full)
            # one topic id per topic: a new partition takes the one its topic's other
            # partitions carry, in whichever log directory (Kafka's LogManager.getOrCreateLog
            # is given the topic's id); without one Log.open draws a new id
            topic_id = next((other.topic_id for other_tp, other in self._logs.items()
                             if other_tp.topic == topic and other.topic_id), None)
            log = Log.open(full, log_config, had_clean_shutdown=True, time_ms=self._time_ms,
                           producer_id_expiration_ms=self._producer_expiration_ms,
                           topic_id=topic_id)
            if fresh:
                _fileio.fs.fsync_dir(log_dir.path)
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
            return log

    def logs(self) -> dict[TopicPartition, Log]:
        """A snapshot of every open log."""
        with self._lock:
            return dict(self._logs)

    def _logs_by_dir(self) -> dict[str, dict[TopicPartition, Log]]:
        with self._lock:
            return {d.path: self._dir_logs(d) for d in self._dirs}

    def clean(self, topic: str, partition: int) -> CleanerStats | None:
        """Run one cleaning round on a compacted log now, whatever its dirty ratio, and
        move its ``cleaner-offset-checkpoint`` entry. None when there was nothing to
        clean, the log is not compacted or being cleaned, or the round failed (the
        reason is then in ``self.cleaner.uncleanable``)."""
        self._check_open()
        return self.cleaner.clean_log(TopicPartition(topic, partition))

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """``Log.truncate_to`` that also lowers the partition's cleaner checkpoint (Kafka's
        ``LogManager.truncateTo`` with ``maybeTruncateCheckpoint``)."""
        tp = TopicPartition(topic, partition)
        with self._lock:
            self._check_open()
            log = self._logs.get(tp)
            if log is None:
                raise KafkaStoreError(f"No log for {tp}")
            log_dir = self._log_dir_of[tp]
        self.cleaner.abort_cleaning(tp)
        try:
            with log.lock:
                truncated = log.truncate_to(offset)
            if truncated:
                self.cleaner.maybe_truncate_checkpoint(log_dir.path, tp, offset)
            return truncated
        finally:
            self.cleaner.resume_cleaning(tp)

    def delete(self, topic: str, partition: int) -> bool:
        """Delete a log: its directory is renamed ``<topic>-<partition>.<id>-delete`` at
        once and removed ``file.delete.delay.ms`` later. Returns False if there was none.

        A reader in the middle of the log finishes (its files stay open until then);
        :meth:`get` no longer returns it.
        """
        tp = TopicPartition(topic, partition)
        with self._lock:
            self._check_open()
            log = self._logs.get(tp)
            if log is None:
                return False
            self.cleaner.forget(tp)   # stops a round of it at its next check
            del self._logs[tp]
            log_dir = self._log_dir_of.pop(tp)
            target = os.path.join(log_dir.path, log_delete_dir_name(tp, uuid.uuid4().hex))
            with log.lock:
                _fileio.fs.rename(log.dir, target)
                _fileio.fs.fsync_dir(log_dir.path)
            due = self._time_ms() + log.config.file_delete_delay_ms
            self._doomed_dirs.append((due, target, log))
            self._write_checkpoints_for(log_dir)
            self.cleaner.update_checkpoint(log_dir.path, tp, None)
            return True

    def set_topic_config(self, topic: str, overrides: Mapping[str, object] | None) -> None:
        """Replace the overrides of ``topic`` (Kafka topic-level names); its open logs take
        the new configuration at once. None removes them."""
        validate_topic(topic)
        with self._lock:
            self._check_open()
            old = self._overrides.get(topic)
            if overrides:
                self._overrides[topic] = dict(overrides)
            else:
                self._overrides.pop(topic, None)
            try:
                new = self._topic_config(topic)
            except ConfigError:
                if old is None:
                    self._overrides.pop(topic, None)
                else:
                    self._overrides[topic] = old
                raise
            for tp, log in self._logs.items():
                if tp.topic == topic:
                    log.config = new

    @property
    def log_dirs(self) -> list[str]:
        return [d.path for d in self._dirs]

    @property
    def closed(self) -> bool:
        return self._closed

    # -- background work ---------------------------------------------------

    def _schedule_tasks(self) -> None:
        mc = self.manager_config
        s = self._scheduler
        s.schedule("kafka-log-retention", mc.retention_check_interval_ms, self.cleanup_logs)
        s.schedule("kafka-log-flusher", mc.flush_scheduler_interval_ms, self.flush_dirty_logs)
        s.schedule("kafka-recovery-point-checkpoint", mc.recovery_point_checkpoint_interval_ms,
                   lambda now: self.checkpoint_recovery_points())
        s.schedule("kafka-log-start-offset-checkpoint",
                   mc.log_start_offset_checkpoint_interval_ms,
                   lambda now: self.checkpoint_log_start_offsets())
        s.schedule("kafka-delete-logs", _DELETE_POLL_MS, self.delete_due_files)
        s.schedule("PeriodicProducerExpirationCheck",
                   mc.producer_id_expiration_check_interval_ms, self.remove_expired_producers)
        if self.cleaner.config.enable_cleaner:
            s.schedule("kafka-log-cleaner-thread-0", self.cleaner.config.backoff_ms,
                       self._cleaner_task)

    def run_scheduled_tasks(self, now_ms: int | None = None) -> list[str]:
        """Run the background tasks that are due (on the manager's clock by default);
        returns their names. For ``background=False`` managers and tests."""
        self._check_open()
        return self._scheduler.run_due(now_ms)

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """One retention pass over every log without ``compact`` in its cleanup policy
        (Kafka's ``cleanupLogs``); segments removed. Compacted logs (``compact`` and
        ``compact,delete``) get theirs from the cleaner after each of its rounds, as in
        Kafka, so none when the cleaner is disabled."""
        return self._retention_pass(
            [(tp, log) for tp, log in self.logs().items() if not log.config.compact], now_ms)

    def _retention_pass(self, logs: Iterable[tuple[TopicPartition, Log]],
                        now_ms: int | None) -> int:
        now = self._time_ms() if now_ms is None else now_ms
        removed = 0
        for tp, log in logs:
            try:
                removed += delete_old_segments(log, now)
            except KafkaStoreError as exc:   # one log's failure must not stop the others
                if not log.closed:
                    _log.error("kafkastore: retention of %s failed: %s", tp, exc)
        return removed

    def _cleaner_task(self, now: int) -> None:
        # Kafka's cleaner thread: one round on the dirtiest log, then retention of the
        # compacted logs
        self.cleaner.clean_filthiest_log(now)
        self.cleanup_compacted_logs(now)

    def cleanup_compacted_logs(self, now_ms: int | None = None) -> int:
        """One retention pass over the compacted logs the cleaner is not working on
        (``compact,delete`` ones get every pass, ``compact`` ones the log start offset
        pass); segments removed. The cleaner's scheduled task runs it after each round."""
        return self._retention_pass(self.cleaner.deletable_logs(), now_ms)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget, in every log, the producers idle for ``producer.id.expiration.ms`` with
        no open transaction (Kafka's ``PeriodicProducerExpirationCheck``); how many."""
        now = self._time_ms() if now_ms is None else now_ms
        return sum(log.remove_expired_producers(now) for log in self.logs().values())

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Flush every log whose ``flush.ms`` has passed; how many were flushed."""
        now = self._time_ms() if now_ms is None else now_ms
        return sum(1 for log in self.logs().values() if log.flush_if_due(now))

    def delete_due_files(self, now_ms: int | None = None) -> int:
        """Delete the ``.deleted`` segments and ``-delete`` directories that are due."""
        now = self._time_ms() if now_ms is None else now_ms
        done = 0
        for log in self.logs().values():
            done += log.delete_pending_segments(now)
        with self._lock:
            due = [d for d in self._doomed_dirs if d[0] <= now]
            self._doomed_dirs = [d for d in self._doomed_dirs if d[0] > now]
        for _, path, log in due:
            if log is not None:
                log.close_handlers()
            shutil.rmtree(path, ignore_errors=True)
            done += 1
        return done

    def _dir_logs(self, log_dir: _LogDir) -> dict[TopicPartition, Log]:
        return {tp: log for tp, log in self.logs().items() if self._log_dir_of.get(tp) is log_dir}

    @staticmethod
    def _write_recovery_points(log_dir: _LogDir, logs: Mapping[TopicPartition, Log]) -> None:
        log_dir.recovery_points.write({tp: log.recovery_point for tp, log in logs.items()})

    @staticmethod
    def _write_log_start_offsets(log_dir: _LogDir, logs: Mapping[TopicPartition, Log]) -> None:
        # Kafka checkpoints a start offset only where it is above the first segment's base
        log_dir.log_start_offsets.write({
            tp: log.log_start_offset for tp, log in logs.items()
            if log.log_start_offset > log.segments[0].base_offset})

    def _write_checkpoints_for(self, log_dir: _LogDir) -> None:
        logs = self._dir_logs(log_dir)
        self._write_recovery_points(log_dir, logs)
        self._write_log_start_offsets(log_dir, logs)

    def checkpoint_recovery_points(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` in every log directory."""
        for log_dir in self._dirs:
            self._write_recovery_points(log_dir, self._dir_logs(log_dir))

    def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint`` in every log directory."""
        for log_dir in self._dirs:
            self._write_log_start_offsets(log_dir, self._dir_logs(log_dir))

    # -- closing -----------------------------------------------------------

    def close(self) -> None:
        """Stop the scheduler, flush and close every log, write the checkpoints and the
        clean-shutdown marker, release the locks. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for tp in self._logs:
                self.cleaner.abort_cleaning(tp)   # a running round stops at its next check
        self._scheduler.stop()
        errors: list[BaseException] = []
        try:
            for log_dir in self._dirs:
                logs = self._dir_logs(log_dir)
                clean = True
                for tp, log in logs.items():
                    try:
                        log.close()
                    except Exception as exc:  # one bad log must not stop the others
                        _log.error("kafkastore: closing %s failed: %s", tp, exc)
                        errors.append(exc)
                        clean = False
                try:
                    self._write_recovery_points(log_dir, logs)
                    self._write_log_start_offsets(log_dir, logs)
                    if clean:
                        self._write_marker(log_dir.path)
                except Exception as exc:
                    errors.append(exc)
            for _, path, log in self._doomed_dirs:
                if log is not None:
                    log.close_handlers()
        finally:
            for log_dir in self._dirs:
                log_dir.lock.release()
        if errors:
            raise errors[0]

    @staticmethod
    def _write_marker(path: str) -> None:
        fs = _fileio.fs
        marker = os.path.join(path, CLEAN_SHUTDOWN_FILE)
        fd = _fileio.open_to_rewrite(marker)
        try:
            _fileio.write_fully(fd, b'{"version":0,"brokerEpoch":0}')
            fs.fsync(fd)
        finally:
            fs.close(fd)
        fs.fsync_dir(path)

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LogManager(log_dirs={self.log_dirs}, logs={len(self._logs)})"
