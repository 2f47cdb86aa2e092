"""One topic-partition log: ordered segments, append, read, roll, flush and recovery.

:class:`Log` is Kafka's ``UnifiedLog`` for one partition directory: validation and
offset assignment (:class:`~kafkastore.validator.LogValidator`), producer state,
transactions and the last stable offset, leader epochs, the log start offset and the
public append/read API. The segments on disk are its
:class:`~kafkastore.local_log.LocalLog` (Kafka's ``LocalLog`` and ``LogSegments``); opening
is :mod:`kafkastore.log_loader` (Kafka's ``LogLoader``). It owns no thread or timer:
time-based work (``flush.ms`` flushing, delayed deletion of ``.deleted`` files,
retention) happens when the caller, or the ``LogManager``, calls in.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import NoReturn

from kafkastore import _fileio, log_loader
from kafkastore.batch_header import (
    CODEC_MASK,
    INT32,
    INT64,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
)
from kafkastore.compression import validate_level
from kafkastore.config import LogConfig
from kafkastore.errors import (
    InconsistentTopicIdError,
    InvalidRecordError,
    KafkaStorageError,
    KafkaStoreError,
    LogClosedError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkastore.file_records import LogSlice
from kafkastore.leader_epoch import LeaderEpochFileCache
from kafkastore.local_log import CLEAN_SHUTDOWN_FILE, RACE_ERRORS, LocalLog
from kafkastore.log_append import (
    AppendPlan,
    LogAppendInfo,
    check_timestamps,
    scan_v2,
    target_codec,
)
from kafkastore.log_dir import PartitionDirLock
from kafkastore.partition_metadata import (
    check_topic_id,
    random_uuid,
    read_topic_id,
    sibling_topic_id,
    topic_partition_of,
    write_topic_id,
)
from kafkastore.producer_state import (
    AppendOrigin,
    BatchMetadata,
    ProducerBatch,
    ProducerStateManager,
    producer_batch,
)
from kafkastore.records import (
    ControlRecordType,
    encode_control_batch,
    encode_v2,
    scan_batches,
)
from kafkastore.segment import LOG_FILE_SUFFIX, LogSegment, TimestampAndOffset
from kafkastore.storage import require_local_path
from kafkastore.txn_index import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AbortedTxn,
    check_isolation_level,
)
from kafkastore.validator import (
    LogValidator,
    check_produce_size,
    codec_level,
    split_produces,
)

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "Log",
    "LogAppendInfo",
]


LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

_INT_MAX = (1 << 31) - 1
logger = logging.getLogger("kafkastore.log")
_tuple_new = tuple.__new__  # NamedTuples of the append path without their Python __new__


def _raise_storage_error(exc: OSError, what: str, path: str) -> NoReturn:
    """Raise :class:`KafkaStorageError` (an OSError too) for an OSError of the file system
    under a log operation, naming the operation and the log's directory."""
    if isinstance(exc, KafkaStoreError):
        raise exc
    raise KafkaStorageError.from_os_error(exc, f"{what} of {path}", path) from exc


def _storage_op(what: str):
    """:func:`_raise_storage_error` around a whole (cold) log operation. The hot ones
    (append, append_batches, read) catch in their bodies instead: a wrapper call costs
    about 0.5 us a call there, a try block nothing."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(first, *args, **kw):
            try:
                return fn(first, *args, **kw)
            except OSError as exc:
                path = first.dir if isinstance(first, Log) else os.fspath(args[0])
                _raise_storage_error(exc, what, path)
        return wrapper
    return decorate


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _is_new_partition(path: str) -> bool:
    """Whether ``path`` is a partition being created: no directory yet, or one without a
    segment file (Kafka's LocalLog always keeps one, so an existing log has a ``.log``)."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return True
    return not any(name.endswith(LOG_FILE_SUFFIX) for name in names)


def _topic_id_for_new_partition(path: str) -> str | None:
    """The topic id a new partition directory gets: its topic's, from the sibling
    partitions in the same log directory, else a new one (a topic id is the topic's,
    kept across its partitions: Kafka's controller draws one with ``Uuid.randomUuid``
    when the topic is created and UnifiedLog.initializeTopicId writes it in each
    partition). None for a directory not named ``<topic>-<partition>``: no topic."""
    if topic_partition_of(path) is None:
        return None
    return sibling_topic_id(path) or random_uuid()


_SPECIAL_TIMESTAMPS = (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP,
                       EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP)


class Log:
    """A partition directory of segments, with Kafka's append, read and recovery rules.

    Files: ``<dir>/<20-digit base offset>.log`` with its ``.index`` and
    ``.timeindex`` per segment (see :class:`~kafkastore.segment.LogSegment`);
    ``.deleted`` files wait for deletion after ``file.delete.delay.ms``;
    ``.cleaned`` and ``.swap`` files are the cleaner's crash-safe swap,
    finished or rolled back on open; ``leader-epoch-checkpoint`` holds the partition's
    leader epochs (:class:`~kafkastore.leader_epoch.LeaderEpochFileCache`: created empty
    on open, as Kafka does, and written whenever the epochs change); ``<offset>.snapshot``
    files hold the producer state
    (:class:`~kafkastore.producer_state.ProducerStateManager`: one per segment base,
    written on roll, and one at the log end offset, written on close) and a segment's
    ``.txnindex`` its aborted transactions (:class:`~kafkastore.txn_index.TransactionIndex`).
    A :class:`Log` opened on its own also
    keeps ``.kafka_cleanshutdown`` in the directory between a clean
    :meth:`close` and the next :meth:`open`. An open log holds an exclusive ``flock`` on
    its directory (:class:`~kafkastore.log_dir.PartitionDirLock`, no file): a second
    :class:`Log` on it, in this process or another, is refused with
    :class:`~kafkastore.errors.LogDirectoryLockedError`.

    Invariants: segments are ordered by base offset, the last one is the
    active segment, and there is always at least one; ``log_start_offset <=
    last_stable_offset <= log_end_offset``; ``recovery_point <=
    log_end_offset``; offsets never go backwards except through
    :meth:`truncate_to`.

    The segment list, the end offset, the log start offset, the recovery point and the
    delayed deletions live in the log's :class:`~kafkastore.local_log.LocalLog`
    (:attr:`local_log`); the producer state, the leader epochs, the topic id, the
    append plan and validator, and the closed state live here.

    Thread-safety: every mutation takes the log's lock (``_lock``, :attr:`lock`, a
    re-entrant lock), which guards this object, its producer state and epochs, and its
    :class:`~kafkastore.local_log.LocalLog`. Readers (:meth:`read`,
    :meth:`offset_for_timestamp`, the properties) take no lock: they work on an
    immutable snapshot of the segment list (copy-on-write) and on ``pread``. A segment
    removed while a reader uses it stays readable until its delayed deletion.
    """

    def __init__(self, directory: str, config: LogConfig, *, time_ms: Callable[[], int],
                 standalone: bool) -> None:
        self.dir = directory
        self._local = LocalLog(directory, config, time_ms)
        self._read_local = self._local.read   # (bound once: the read path's one call)
        self.config = config   # (the setter derives the append plan)
        self._time_ms = time_ms
        self._standalone = standalone
        self._lock = threading.RLock()
        self._closed = False
        self._truncated_to: int | None = None
        self._dir_lock: PartitionDirLock | None = None
        self._epochs: LeaderEpochFileCache | None = None
        self._topic_id: str | None = None
        self._producer_id_expiration_ms = 86_400_000
        self._producers: ProducerStateManager | None = None
        self._pending_snapshot_deletes: list[tuple[int, str]] = []
        self._recovered_segments = False   # (a scratch producer state wrote snapshots)
        # odd while a truncation moves the end and rebuilds the producer state, bumped
        # at its start and end: a lock-free reader of the LSO that sees it odd or moved
        # reads again under the lock (a sequence lock; see _changing_state)
        self._state_changes = 0

    # -- opening -----------------------------------------------------------

    @classmethod
    @_storage_op("open")
    def open(cls, path: str, config: LogConfig | dict | None = None, *,
             recovery_point: int | None = None, log_start_offset: int = 0,
             had_clean_shutdown: bool | None = None,
             time_ms: Callable[[], int] | None = None, topic_id: str | None = None,
             producer_id_expiration_ms: int = 86_400_000) -> Log:
        """Open the log in directory ``path``, creating it if needed, and recover it.

        ``recovery_point``, ``log_start_offset`` and ``had_clean_shutdown``
        are what a ``LogManager`` reads from its checkpoints and marker. On
        its own (``had_clean_shutdown`` None) the log looks for
        :data:`CLEAN_SHUTDOWN_FILE` in ``path`` and removes it, so a crash
        from now on counts as unclean; without a recovery point an unclean
        open re-validates every segment.

        ``topic_id`` (a Uuid string) is checked against the directory's
        ``partition.metadata`` (:class:`~kafkastore.errors.InconsistentTopicIdError` if it
        differs) or written there if the directory has none. A new partition (a
        ``<topic>-<partition>`` directory without a segment yet) gets one without it, as
        Kafka (2.8+) writes ``partition.metadata`` in every partition it creates: the id
        the topic's other partitions in the same log directory carry, else a new random
        one. An existing partition without the file is left as it is (its topic id is
        None).

        ``producer_id_expiration_ms`` is Kafka's ``producer.id.expiration.ms`` (a broker
        setting): how long an idle producer's state is kept (see
        :meth:`remove_expired_producers`).
        """
        # an object store cannot hold a log being written: refuse s3:// and the like
        # before anything is created (file:// is a local path)
        path = require_local_path(os.fspath(path), "Log.open")
        if config is None:
            config = LogConfig()
        elif isinstance(config, dict):
            config = LogConfig.from_dict(config)
        fresh = _is_new_partition(path)
        _fileio.makedirs(path)
        # one writer per directory: a second Log would hand out the same offsets
        lock = PartitionDirLock(path)
        try:
            standalone = had_clean_shutdown is None
            if standalone:
                had_clean_shutdown = LocalLog.take_clean_shutdown_marker(path)
            log = cls(path, config, time_ms=time_ms or _now_ms, standalone=standalone)
            log._producer_id_expiration_ms = producer_id_expiration_ms
        except BaseException:
            lock.release()
            raise
        log._dir_lock = lock
        try:
            log._topic_id = read_topic_id(path)
            if topic_id is None and fresh and log._topic_id is None:
                topic_id = _topic_id_for_new_partition(path)
            if topic_id is not None:
                check_topic_id(topic_id)
                if log._topic_id is None:
                    write_topic_id(path, topic_id)
                    log._topic_id = topic_id
                elif log._topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"Tried to assign topic ID {topic_id} to log for topic partition "
                        f"{os.path.basename(path)}, but log already contained topic ID "
                        f"{log._topic_id}", path=path)
            log_loader.load(log, bool(had_clean_shutdown),
                            0 if recovery_point is None else recovery_point, log_start_offset)
        except BaseException:
            log._close_handlers()
            raise
        return log

    def _new_producer_state(self, snapshot_offsets=None) -> ProducerStateManager:
        return ProducerStateManager(self.dir, self._producer_id_expiration_ms, self._time_ms,
                                    snapshot_offsets=snapshot_offsets)

    @property
    def topic_id(self) -> str | None:
        """The topic id of ``partition.metadata``, or None."""
        return self._topic_id

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """The partition's leader epochs (``leader-epoch-checkpoint``)."""
        return self._epochs

    def _assign_epoch(self, data, first_offset: int) -> None:
        """Kafka's step 5 of an append: the epoch of a v2 batch, if newer, from its base."""
        epoch = INT32.unpack_from(data, PARTITION_LEADER_EPOCH_OFFSET)[0]
        if epoch >= 0:
            latest = self._epochs.latest_entry()
            if latest is None or latest.epoch != epoch:
                self._epochs.assign(epoch, first_offset)

    @property
    def local_log(self) -> LocalLog:
        """The segments on local disk (Kafka's ``LocalLog``); mutate it only under
        :attr:`lock`."""
        return self._local

    # -- state -------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        """The log's :class:`~kafkastore.config.LogConfig`; assigning a new one (a topic
        config change) takes effect from the next call."""
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        # set together, so an append sees either the old ones or the new ones
        self._config, self._plan, self._validator = (config, AppendPlan.of(config),
                                                     LogValidator(config, self.dir))
        self._local.config = config

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first (an immutable snapshot)."""
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._local.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (Kafka's LEO)."""
        return self._local.next_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the oldest transaction not yet decided (by a
        COMMIT or ABORT marker), never below the log start offset, else the log end
        offset. read_committed reads stop here.

        Lock-free, and never above the first offset of a transaction open when it
        returns (Kafka caps the LSO by the high watermark, which passes a batch only once
        its append and producer-state update are done). An append records a transaction
        it begins in the producer state before it moves the log end (:meth:`_append_set`),
        so the end is read first: a transaction begun below the end read is in the first
        unstable offset read after it (or already decided). A truncation changes both out
        of that order (the end first, then the state emptied and rebuilt): a read that
        overlaps one takes the lock (see :meth:`_changing_state`)."""
        changes = self._state_changes
        end = self._local.next_offset
        first = self._first_unstable()
        if changes & 1 or changes != self._state_changes:
            # a truncation moved the end and rebuilds the producer state (emptied, then
            # reloaded): its values in between are no LSO. Kafka's readers see the first
            # unstable offset only as maybeIncrementFirstUnstableOffset publishes it,
            # after UnifiedLog.truncateTo's rebuildProducerState, under the log's lock;
            # here the reader waits for the lock, and so for the truncation to end
            with self._lock:
                end = self._local.next_offset
                first = self._first_unstable()
        return end if first is None or first > end else first

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, lower-bounded by the log start
        offset as Kafka's ``maybeIncrementFirstUnstableOffset`` bounds it (a transaction
        whose first batches went to DeleteRecords or retention), or None. Lock-free; a
        read overlapping a truncation takes the lock (as :attr:`last_stable_offset`)."""
        changes = self._state_changes
        first = self._first_unstable()
        if changes & 1 or changes != self._state_changes:
            with self._lock:
                return self._first_unstable()
        return first

    def _first_unstable(self) -> int | None:
        first = self._producers.first_unstable_offset()
        return None if first is None else max(first, self._local.log_start_offset)

    @property
    def producer_state_manager(self) -> ProducerStateManager:
        """The partition's producer state (Kafka's ``ProducerStateManager``); mutate it
        only under :attr:`lock`."""
        return self._producers

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` with no open transaction
        (Kafka's periodic ``removeExpiredProducers``, run by the ``LogManager``); returns
        how many. A later retry from a forgotten producer is accepted with any sequence."""
        with self._lock:
            if self._closed:
                return 0
            return self._producers.remove_expired_producers(
                self._time_ms() if now_ms is None else now_ms)

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read of ``[start_offset, upper_bound_offset)`` needs
        (the fetch's lookup: Kafka's ``LocalLog.read`` -> ``addAbortedTransactions``):
        from the ``.txnindex`` of the segment holding ``start_offset`` on, the entries
        ending at or past ``start_offset``, until one index says no later one can matter.
        The cleaner uses :meth:`collect_aborted_transactions_for_cleaning`."""
        return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def collect_aborted_transactions_for_cleaning(self, start_offset: int,
                                                  upper_bound_offset: int) -> list[AbortedTxn]:
        """The cleaner's lookup (Kafka's ``UnifiedLog.collectAbortedTransactions``, whose
        only caller is the ``Cleaner``): ``start_offset`` only picks the first segment;
        the entries are those ending at or past the *log start offset* and beginning
        below ``upper_bound_offset``. An abort that ended before ``start_offset`` in
        that segment counts: Kafka's cleaner tracks it from its first offset until the
        producer's next ABORT marker, which matters when the walk starts past its marker."""
        return self._local.collect_aborted_transactions(
            start_offset, upper_bound_offset, fetch_offset=self._local.log_start_offset)

    @property
    def recovery_point(self) -> int:
        """Every offset below it has been fsynced."""
        return self._local.recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._local.next_offset - self._local.recovery_point

    @property
    def size(self) -> int:
        """Bytes of all ``.log`` files."""
        return sum(s.size for s in self._local.segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def truncated_to(self) -> int | None:
        """The lowest offset this log was truncated to since it was opened (by
        :meth:`truncate_to` or :meth:`truncate_fully_and_start_at`), or None.

        What a cleaner checkpoint above it describes is gone: the log cleaner lowers its
        checkpoint to this offset (Kafka's ``maybeTruncateCheckpoint``)."""
        return self._truncated_to

    def _note_truncation(self, offset: int) -> None:
        if self._truncated_to is None or offset < self._truncated_to:
            self._truncated_to = offset

    @property
    def lock(self) -> threading.RLock:
        """The log's (re-entrant) lock: hold it across several calls that must see the
        same segments, as a retention pass does between choosing and removing them.
        Every mutating method takes it; readers never need it."""
        return self._lock

    def time_ms(self) -> int:
        """The log's clock (milliseconds), as given to :meth:`open`."""
        return self._time_ms()

    def __repr__(self) -> str:
        local = self._local
        return (f"Log(dir={self.dir!r}, log_start_offset={local.log_start_offset}, "
                f"log_end_offset={local.next_offset}, segments={len(local.segments)})")

    def _check_not_closed(self) -> None:
        if self._closed:
            raise LogClosedError(f"Log {self.dir} is closed", path=self.dir)

    def _check_open(self) -> None:
        self._check_not_closed()
        failed = self._local.failed
        if failed is not None:
            raise LogClosedError(
                f"Log {self.dir} is offline after a failed write to its files "
                f"({failed!r}): what reached the disk is unknown, and an fsync is never "
                f"retried, so it takes no more writes. Reopen it to recover.", path=self.dir)

    # -- appending ---------------------------------------------------------

    def append(self, records, *, compression=None, compression_level: int | None = None,
               timestamp: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = -1, is_transactional: bool = False,
               partition_leader_epoch: int = -1) -> LogAppendInfo:
        """Append records as one v2 batch at the log end; offsets are assigned here.

        ``records`` are what :func:`~kafkastore.records.encode_batch` takes:
        ``(key, value)``, ``(key, value, timestamp)``, ``(key, value,
        timestamp, headers)`` tuples or record objects. ``compression``
        defaults to the log's ``compression.type`` (uncompressed for
        ``producer``). With ``message.timestamp.type=LogAppendTime`` the
        batch carries the append time.
        """
        if type(records) is not list:
            records = list(records)
        with self._lock:
            local = self._local
            if self._closed or local.failed is not None:
                self._check_open()
            if not records:
                return self._empty_info()
            if self._validator.compacted:
                self._validator.check_keys(records)
            now = self._time_ms()
            plan = self._plan
            attributes, level = plan.attributes, plan.level
            if compression is not None:
                codec = target_codec(self._config, compression)
                attributes = (attributes & ~CODEC_MASK) | int(codec)
                level = codec_level(self._config, codec)
            if compression_level is not None:
                validate_level(attributes & CODEC_MASK, compression_level)
                level = compression_level
            if is_transactional:
                attributes |= TRANSACTIONAL_MASK
            if producer_id >= 0 and base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {base_sequence} in record batch with producerId "
                    f"{producer_id} in the append to {self.dir}", path=self.dir)
            log_append = plan.log_append_time
            first = local.next_offset
            data = encode_v2(records, first, attributes, level,
                             now if timestamp is None else timestamp,
                             now if log_append else None, producer_id, producer_epoch,
                             base_sequence, partition_leader_epoch)
            last = first + INT32.unpack_from(data, LAST_OFFSET_DELTA_OFFSET)[0]
            max_ts = INT64.unpack_from(data, MAX_TIMESTAMP_OFFSET)[0]
            if plan.timestamp_window and not log_append:   # (no call on the hot path)
                check_timestamps(data, now, self._config, self.dir)
            size = len(data)
            self._check_batch_size(size, 0)
            self._check_segment_size(size)
            # the rest in UnifiedLog.append's order (see _append_as_leader)
            try:
                if partition_leader_epoch >= 0:
                    self._assign_epoch(data, first)
                segment = self._maybe_roll(size, max_ts, last, now, first)
                updates = None
                if producer_id >= 0:
                    producers = self._producers
                    # (an idempotent producer's next batch in a few reads; every other
                    # batch through duplicate_of and analyze)
                    updates = producers.in_sequence(producer_id, producer_epoch,
                                                    base_sequence, first, last, max_ts,
                                                    is_transactional)
                    if updates is None:
                        batch = ProducerBatch(producer_id, producer_epoch, base_sequence,
                                              first, last, max_ts, is_transactional, False,
                                              None)
                        duplicate = producers.duplicate_of(batch)
                        if duplicate is not None:
                            return self._duplicate_info(duplicate, max_ts, last, size, 1)
                        updates = producers.analyze([batch], AppendOrigin.CLIENT)[0]
                self._append_set(data, first, last, max_ts, last, size, now, None, updates,
                                 segment)
            except OSError as exc:
                _raise_storage_error(exc, "append", self.dir)
            return _tuple_new(LogAppendInfo, (first, last, max_ts, last,
                                              now if log_append else -1,
                                              local.log_start_offset, size, 1, False))

    def append_batches(self, data, *, assign_offsets: bool = True,
                       leader_epoch: int | None = None,
                       origin: str = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Append batches encoded elsewhere (a producer's or a leader's bytes).

        Every entry's size, structure and CRC are checked; a partial entry at the end
        is dropped, as Kafka trims a request to its valid bytes.

        With ``assign_offsets`` (a leader, Kafka's ``appendAsLeader``) the input is
        taken as produce requests, one per v2 batch (a producer sends one per
        partition), one per legacy compressed wrapper, one per run of uncompressed
        legacy messages; all of one magic. Every produce is validated by
        :class:`~kafkastore.validator.LogValidator` before any is written (base offset
        0, count, no control batch, sequence, keys on a compacted topic, the timestamp
        window, no producer-set LogAppendTime), gets offsets from the log end offset,
        a max timestamp recomputed from its records (or the append time), and the
        ``compression.type`` of the topic (recompressed when it differs from the
        producer's; legacy input is up-converted to magic 2, as Kafka 3.0+ does);
        then each is appended as Kafka appends one produce. ``leader_epoch``, when
        given, is stamped into each batch as the partition leader epoch. An entry
        larger than ``max.message.bytes`` is refused.

        Batches with a producer id go through the producer state as in Kafka, after
        validation (a retry is validated too): a retry of one of the producer's last
        five batches (same epoch and sequence range, against the state before the call)
        ends the call, nothing of it written, answered with the retried batch's original
        offsets (``duplicate`` set); a sequence that does not follow, a fenced producer
        epoch or a non-transactional batch inside an open transaction is refused
        (:class:`~kafkastore.errors.OutOfOrderSequenceError`,
        :class:`~kafkastore.errors.InvalidProducerEpochError`,
        :class:`~kafkastore.errors.InvalidTxnStateError`) before anything of the call is
        written. ``origin="coordinator"`` is a transaction coordinator's append: control
        batches (transaction markers) are allowed and sequences are not checked (see
        :meth:`append_end_txn_marker`).

        With ``assign_offsets=False`` (a follower, ``appendAsFollower``) nothing is
        validated or rewritten: the offsets must increase and start at or above the
        log end offset, and the whole input is appended as one record set (one index
        entry at most), its max timestamp taken from the batch headers. Producer state
        is recorded without checks (Kafka's replication origin).
        """
        if origin not in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR):
            raise ValueError(f"origin must be 'client' or 'coordinator', not {origin!r}")
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        headers = scan_v2(view)
        if headers is None:  # legacy entries, or an error to report: the full scan
            scan = scan_batches(view, validate=True)
            if scan.error is not None:
                raise scan.error
            headers = (scan.position.tolist(), scan.size.tolist(), scan.magic.tolist(),
                       scan.last_offset.tolist(), scan.max_timestamp.tolist(),
                       scan.base_offset.tolist(), scan.valid_bytes)
        positions, sizes, magics, lasts, max_tss, bases, valid_bytes = headers
        n = len(positions)
        if n == 0:
            with self._lock:
                self._check_open()
                return self._empty_info()
        with self._lock:
            self._check_open()
            now = self._time_ms()
            if assign_offsets:
                return self._append_as_leader(view, positions, sizes, magics, valid_bytes,
                                              now, leader_epoch, origin)
            return self._append_as_follower(view, positions, sizes, magics, lasts, max_tss,
                                            bases, valid_bytes, now)

    def _append_as_leader(self, view, positions, sizes, magics, valid_bytes, now,
                          leader_epoch, origin) -> LogAppendInfo:
        """Kafka's leader path, in ``UnifiedLog.append``'s order: every produce validated
        and given offsets (``LogValidator.validateMessagesAndAssignOffsets``, a retry
        too), the leader epoch assigned, the active segment rolled if full
        (``maybeRoll``, its producer snapshot included), then the producer state checked
        (``analyzeAndValidateProducerState``), and only then the writes. A retry of a
        producer's earlier batch anywhere in the call ends it there: nothing is written
        and the answer is the retried batch's offsets (the roll and the epoch stay, as
        in Kafka)."""
        for i in range(len(positions)):
            self._check_batch_size(sizes[i], positions[i])
        buf = bytearray(view[:valid_bytes])
        legacy_attrs = magics if magics[0] >= 2 else \
            [buf[p + LEGACY_ATTRIBUTES_OFFSET] for p in positions]
        validator = self._validator
        counter = self._local.next_offset
        groups = (range(0, 1),) if len(positions) == 1 else \
            split_produces(magics, legacy_attrs, self.dir)   # (one batch: one produce)
        produces = []
        for group in groups:
            produce = validator.validate(buf, [positions[i] for i in group],
                                         [sizes[i] for i in group], magics[0], counter, now,
                                         leader_epoch, origin)
            if produce.size_maybe_changed:
                check_produce_size(self._config, len(produce.data), self.dir)
            self._check_segment_size(len(produce.data))   # before anything is written
            produces.append(produce)
            counter = produce.last_offset + 1
        try:
            for p in produces:
                self._assign_epoch(p.data, p.first_offset)
            # (Kafka rolls once for its one produce; here the first produce rolls now,
            # each later one when it is appended)
            p = produces[0]
            segment = self._maybe_roll(len(p.data), p.max_timestamp, p.last_offset, now,
                                       p.first_offset)
            max_ts, shallow = -1, p.last_offset   # (validation's, over every produce)
            for q in produces:
                if q.max_timestamp > max_ts:
                    max_ts, shallow = q.max_timestamp, q.shallow_offset_of_max_timestamp
            updates = self._analyze_producers(produces, origin)
            if type(updates) is BatchMetadata:
                return self._duplicate_info(updates, max_ts, shallow, valid_bytes,
                                            len(positions))
            for p, update in zip(produces, updates):
                self._append_set(p.data, p.first_offset, p.last_offset, p.max_timestamp,
                                 p.shallow_offset_of_max_timestamp, len(p.data), now, None,
                                 update, segment)
                segment = None
        except OSError as exc:
            _raise_storage_error(exc, "append", self.dir)
        log_append = validator.log_append_time
        return _tuple_new(LogAppendInfo, (produces[0].first_offset, produces[-1].last_offset,
                                          max_ts, shallow, now if log_append else -1,
                                          self._local.log_start_offset, valid_bytes,
                                          len(positions), False))

    def _analyze_producers(self, produces, origin) -> list | BatchMetadata:
        """Kafka's ``analyzeAndValidateProducerState`` over the validated produces, in
        order: per produce its producer-state updates (None without a producer id), or
        the metadata of the first batch a client's produce retries. A retry is looked
        for in the state before the call (a batch given twice in one call is no retry
        but an out-of-order sequence); the checks of each produce see the produces
        before it, as one ``ProducerAppendInfo`` per producer of the request does."""
        producers = self._producers
        shadow: dict | None = {} if len(produces) > 1 else None
        client = origin == AppendOrigin.CLIENT
        out = []
        for p in produces:
            data = p.data
            if INT64.unpack_from(data, PRODUCER_ID_OFFSET)[0] < 0:
                out.append(None)
                continue
            batch = producer_batch(data[:RECORD_BATCH_OVERHEAD], lambda d=data: bytes(d),
                                   self.dir)
            if client:   # (a client's batch is never a control batch: validated)
                duplicate = producers.duplicate_of(batch)
                if duplicate is not None:
                    return duplicate
            out.append(producers.analyze([batch], origin, shadow)[0])
        return out

    # -- producer state of an append ----------------------------------------------------

    def _duplicate_info(self, duplicate, max_ts: int, shallow: int, valid_bytes: int,
                        num_batches: int) -> LogAppendInfo:
        """What Kafka answers a retried batch with (``UnifiedLog.append``, its
        ``maybeDuplicate`` case): the first and last offsets of the batch it retries, that
        batch's timestamp as the log append time (whatever the timestamp type) and the
        log start offset now; the max timestamp and its shallow offset stay as the
        validation of the retry set them (``max_ts``, ``shallow``: offsets counted from
        the log end), and so do the valid bytes and the batch count."""
        return LogAppendInfo(duplicate.first_offset, duplicate.last_offset, max_ts, shallow,
                             duplicate.timestamp, self._local.log_start_offset, valid_bytes,
                             num_batches, True)

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int,
                              control_type: ControlRecordType | int | str, *,
                              coordinator_epoch: int = 0, timestamp: int | None = None,
                              leader_epoch: int | None = None) -> LogAppendInfo:
        """Append a transaction marker (``COMMIT`` or ``ABORT``) for ``producer_id``, as a
        transaction coordinator writes it (Kafka's ``appendAsLeader`` with the
        coordinator origin): a control batch of one record, offset from the log end.

        The marker ends the producer's open transaction: an ABORT writes the
        transaction's entry to the ``.txnindex``, and the last stable offset moves past
        it. A producer epoch below the producer's last one raises
        :class:`~kafkastore.errors.InvalidProducerEpochError`, a coordinator epoch below
        its last one :class:`~kafkastore.errors.TransactionCoordinatorFencedError`."""
        if isinstance(control_type, str):
            control_type = ControlRecordType[control_type.upper()]
        data = encode_control_batch(control_type, producer_id=producer_id,
                                    producer_epoch=producer_epoch,
                                    coordinator_epoch=coordinator_epoch,
                                    timestamp=self._time_ms() if timestamp is None else timestamp)
        return self.append_batches(data, leader_epoch=leader_epoch,
                                   origin=AppendOrigin.COORDINATOR)

    def _append_as_follower(self, view, positions, sizes, magics, lasts, max_tss, bases,
                            valid_bytes, now) -> LogAppendInfo:
        """Kafka's ``appendAsFollower``: the offsets, timestamps and bytes as given (no
        validation beyond structure and CRC), appended as one record set."""
        local = self._local
        first = bases[0] if magics[0] >= 2 else lasts[0]
        if first < local.next_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.dir}. First offset {first} is "
                f"less than the next offset {local.next_offset}. First 10 offsets in "
                f"append: {lasts[:10]}", offset=first, path=self.dir)
        prev = local.next_offset - 1
        max_ts, shallow = -1, lasts[0]
        for i in range(len(positions)):
            if lasts[i] <= prev:
                raise OffsetsOutOfOrderError(
                    f"Out of order offsets found in append to {self.dir}: "
                    f"{lasts[i]} after {prev}", offset=lasts[i], position=positions[i])
            prev = lasts[i]
            if max_tss[i] > max_ts:
                max_ts, shallow = max_tss[i], lasts[i]
        # a legacy wrapper's first offset is unknown without inflating it: Kafka rolls
        # at lastOffset - Integer.MAX_VALUE (then max with the LEO)
        roll_offset = lasts[-1] - _INT_MAX if magics[0] < 2 else None
        if min(magics) >= 2:
            updates = self._producers.replication_updates(view, positions, sizes)
        else:   # (legacy entries carry no producer state: only the v2 batches among them)
            v2 = [i for i in range(len(positions)) if magics[i] >= 2]
            updates = self._producers.replication_updates(
                view, [positions[i] for i in v2], [sizes[i] for i in v2]) if v2 else None
        try:
            self._follower_epochs(view, positions, magics, bases)
            self._append_set(view[:valid_bytes], first, lasts[-1], max_ts, shallow,
                             valid_bytes, now, roll_offset, updates)
        except OSError as exc:
            _raise_storage_error(exc, "append", self.dir)
        return _tuple_new(LogAppendInfo, (first, lasts[-1], max_ts, shallow, -1,
                                          local.log_start_offset, valid_bytes,
                                          len(positions), False))

    def _follower_epochs(self, view, positions, magics, bases) -> None:
        """Kafka's ``UnifiedLog.append`` step "update the epoch cache with the epoch
        stamped onto the message by the leader", batch by batch: a v2 batch's epoch is
        assigned from its base offset; a legacy (magic 0/1) batch, a regression of the
        message format, clears a non-empty cache and flushes it (``clearAndFlush``: the
        checkpoint becomes ``0\\n0\\n``), so truncation falls back to the high watermark
        after the next leader election."""
        epochs = self._epochs
        for i in range(len(positions)):
            if magics[i] >= 2:
                pos = positions[i]
                self._assign_epoch(view[pos:pos + RECORD_BATCH_OVERHEAD], bases[i])
            elif epochs.latest_entry() is not None:
                logger.warning("Clearing leader epoch cache of %s after unexpected append "
                               "with message format v%d", self.dir, magics[i])
                epochs.clear_and_flush()

    def _check_batch_size(self, size: int, position: int) -> None:
        limit = self._config.max_message_bytes
        if size > limit:
            raise RecordTooLargeError(
                f"The record batch size in the append to {self.dir} is {size} bytes which "
                f"exceeds the maximum configured value of {limit}.", limit=limit,
                position=position, path=self.dir)

    def _empty_info(self) -> LogAppendInfo:
        local = self._local
        return LogAppendInfo(local.next_offset, local.next_offset - 1, -1, -1, -1,
                             local.log_start_offset, 0, 0, False)

    def _check_segment_size(self, size: int) -> None:
        limit = self._config.segment_bytes
        if size > limit:
            raise RecordTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.dir} which "
                f"exceeds the maximum configured segment size of {limit}.",
                limit=limit, path=self.dir)

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, now: int,
                    roll_offset: int) -> LogSegment:
        """Kafka's ``maybeRoll``: the active segment, rolled at ``roll_offset`` first
        when an append of ``size`` bytes must go to a new one."""
        config = self._config
        segment = self._local.segments[-1]
        if segment.needs_roll(size, max_ts, last_offset, now, config.segment_bytes,
                              config.segment_ms):
            segment = self._roll(roll_offset)
        return segment

    def _append_set(self, data, first_offset: int, last_offset: int, max_ts: int,
                    shallow_offset_of_max: int, size: int, now: int,
                    roll_offset: int | None = None, producer_updates=None,
                    segment: LogSegment | None = None) -> None:
        """Append one record set as Kafka's ``UnifiedLog.append`` does: roll if due
        (unless the caller did and passes the ``segment``), then one
        ``LogSegment.append`` (at most one index entry), then flush if due."""
        config = self._config
        local = self._local   # (its fields read in place: no call per batch)
        if segment is None:
            self._check_segment_size(size)
            segment = self._maybe_roll(size, max_ts, last_offset, now,
                                       first_offset if roll_offset is None else roll_offset)
        producers = self._producers
        try:
            segment.append(last_offset, max_ts, shallow_offset_of_max, data)
            # the transactions the batches begin become unstable before the end moves
            # past them: a lock-free reader of the LSO never sees the end past a
            # transaction that the first unstable offset does not hold yet (Kafka's
            # readers are bounded by the high watermark, which moves only after
            # producerStateManager.update; see last_stable_offset)
            if producer_updates:
                producers.record_updates(producer_updates)
            local.next_offset = next_offset = last_offset + 1
        except BaseException:
            # what reached the file before a failure stays; the end offset follows it
            local.next_offset = max(local.next_offset, segment.read_next_offset())
            raise
        local.recovery_point = recovery_point = min(local.recovery_point, next_offset)
        # (a failure to write the .txnindex below leaves the end offset moved: the
        # batches are in the log, and a recovery rebuilds the index from them; Kafka
        # completes transactions after the end moved, as here)
        if producer_updates:
            producers.complete_txns(producer_updates, segment.update_txn_index)
        producers.last_map_offset = next_offset
        if (next_offset - recovery_point >= config.flush_messages
                or now - local.last_flush_ms >= config.flush_ms):
            self.flush()

    # -- roll, flush -------------------------------------------------------

    @_storage_op("roll")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log_end_offset)``."""
        with self._lock:
            self._check_open()
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None, *, snapshot: bool = True) -> LogSegment:
        """Kafka's ``UnifiedLog.roll``: the local log rolls, then a producer snapshot at the
        new base, then the flush of everything below it."""
        local = self._local
        segment = local.roll(expected_next_offset)
        new_offset = segment.base_offset
        # a producer snapshot at the new base, so that recovering the new segment
        # replays only itself (Kafka writes it unsynced and syncs it with the flush)
        producers = self._producers
        wrote = False
        if snapshot:
            producers.update_map_end_offset(new_offset)
            wrote = producers.take_snapshot(sync=False) is not None
        # Kafka flushes the snapshot and everything below the new segment
        # asynchronously and moves the recovery point; with no thread of our own it
        # happens here
        if wrote:
            try:
                producers.flush_snapshot(new_offset)
            except OSError as exc:
                local.failed = exc   # never retry an fsync (see LocalLog.flush)
                raise
        local.flush(new_offset)
        self.delete_pending_segments()
        return segment

    @_storage_op("flush")
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the log end).

        Moves the recovery point to ``offset``.
        """
        with self._lock:
            self._check_open()
            local = self._local
            local.flush(local.next_offset if offset is None else offset)

    def segments_between(self, start: int, end: int) -> list[LogSegment]:
        """Kafka's ``logSegments(from, to)``: the segments holding offsets of
        ``[start, end)``, from the one holding ``start`` to the last based below ``end``
        (empty when ``end <= start``)."""
        return self._local.segments_between(start, end)

    def non_active_segments_from(self, offset: int) -> list[LogSegment]:
        """Kafka's ``nonActiveLogSegmentsFrom``: from the segment holding ``offset`` up to,
        not including, the active segment."""
        return self._local.non_active_segments_from(offset)

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush (the manager's flusher)."""
        with self._lock:
            if self._closed:
                return False
            local = self._local
            now = self._time_ms() if now_ms is None else now_ms
            if now - local.last_flush_ms >= self.config.flush_ms and self.unflushed_messages:
                local.flush(local.next_offset, now)
                return True
            return False

    # -- reading -----------------------------------------------------------

    def read(self, offset: int, max_bytes: int, min_one_message: bool = True,
             isolation_level: str = READ_UNCOMMITTED) -> LogSlice:
        """A zero-copy slice of the log starting at the batch that holds ``offset``.

        At most ``max_bytes`` (but the whole first batch if
        ``min_one_message``); empty at the log end. Raises
        :class:`~kafkastore.errors.OffsetOutOfRangeError` outside
        ``[log_start_offset, log_end_offset]``.

        ``isolation_level="read_committed"`` is Kafka's ``TXN_COMMITTED`` fetch: the slice
        ends before the last stable offset (empty at or past it), and its
        ``aborted_transactions`` lists the aborted transactions it may hold records of
        (from the ``.txnindex`` files), which a consumer drops (the slice's
        :meth:`~kafkastore.file_records.LogSlice.records` does). Otherwise
        ``aborted_transactions`` is None.

        Lock-free: a roll (which trims the old active segment's indexes) or the
        delayed deletion of a removed segment may close a file under this read.
        Such a read is done again under the log's lock, where neither can happen,
        so it ends in a result or in ``OffsetOutOfRangeError`` (the offset went
        below the new log start offset), never in a closed-file error.
        """
        if self._closed:
            self._check_not_closed()
        if isolation_level != READ_UNCOMMITTED and check_isolation_level(isolation_level):
            # (the LSO and the indexes change together under the lock)
            with self._lock:
                self._check_not_closed()
                try:
                    # (the LSO has no side effect: taken before the range check, it is
                    # what the read would take after it, under the same lock)
                    return self._read_local(offset, max_bytes, min_one_message, True,
                                            self.last_stable_offset)
                except OSError as exc:
                    _raise_storage_error(exc, "read", self.dir)
        try:
            return self._read_local(offset, max_bytes, min_one_message, False)
        except OffsetOutOfRangeError:
            raise
        except RACE_ERRORS:
            with self._lock:
                self._check_not_closed()
                try:
                    return self._read_local(offset, max_bytes, min_one_message, True)
                except OSError as exc:   # not a race: the file system failed
                    _raise_storage_error(exc, "read", self.dir)

    @_storage_op("offset lookup")
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ``fetchOffsetByTimestamp``.

        ``-2`` (earliest) and ``-4`` give the log start offset, ``-1``
        (latest) the log end offset, ``-3`` the record with the largest
        timestamp; a timestamp >= 0 gives the first record at or after it
        in the first segment whose largest timestamp reaches it, or None.

        Lock-free, as :meth:`read`: a lookup that meets a segment closed under it (a
        delayed deletion, a replaced segment) runs again under the log's lock.
        """
        self._check_not_closed()
        if timestamp < 0 and timestamp not in _SPECIAL_TIMESTAMPS:
            raise ValueError(f"Unknown special timestamp {timestamp}")
        try:
            return self._offset_for_timestamp(timestamp)
        except RACE_ERRORS:
            with self._lock:
                self._check_not_closed()
                return self._offset_for_timestamp(timestamp)

    def _offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        local = self._local
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = local.log_start_offset
            first = self._epochs.earliest_entry()
            return TimestampAndOffset(-1, start, first.epoch if first is not None
                                      and first.start_offset <= start else None)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, local.next_offset, self._epochs.latest_epoch())
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return TimestampAndOffset(-1, -1, None)
        if timestamp == MAX_TIMESTAMP:
            return local.max_timestamp_offset()
        return local.offset_for_timestamp(timestamp)

    # -- truncation and deletion -------------------------------------------

    @_storage_op("truncation")
    def truncate_to(self, target_offset: int) -> bool:
        """Drop every record at or above ``target_offset`` (a follower's divergence cut).

        Granularity is a batch: a batch holding ``target_offset`` goes whole, and
        the log end offset becomes ``target_offset`` as in Kafka; an empty segment
        based at the target then keeps that end offset across a reopen. Returns
        False when there was nothing to cut.
        """
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.dir} to a negative offset "
                             f"({target_offset}).")
        with self._lock:
            self._check_open()
            local = self._local
            if target_offset >= local.next_offset:
                self._epochs.truncate_from_end(local.next_offset)
                return False
            with self._changing_state():
                return self._truncate_to(target_offset)

    def _truncate_to(self, target_offset: int) -> bool:
        """:meth:`truncate_to`'s cut, under the lock, its target below the log end."""
        local = self._local
        self._note_truncation(target_offset)
        self._epochs.truncate_from_end(target_offset)
        if target_offset < local.segments[0].base_offset:
            self._truncate_fully_and_start_at(target_offset)
            return True
        if local.truncate_to(target_offset):
            self._roll(target_offset, snapshot=False)   # (rebuilt below)
        # Kafka's rebuildProducerState(targetOffset): snapshots above the target
        # go, the state is reloaded from the latest one left and replayed
        log_loader.rebuild_producer_state(self, self._producers, target_offset, False)
        return True

    @contextlib.contextmanager
    def _changing_state(self):
        """Mark a truncation (under the lock) for lock-free readers of the LSO: the log end
        moves before the producer state is emptied and rebuilt, so in between the two
        give no LSO (the state may have lost a transaction open below the new end, or
        still call one committed whose marker was cut). :attr:`last_stable_offset` reads
        again under the lock when the count is odd or moved while it read: Kafka's
        UnifiedLog.truncateTo rebuilds under its lock and publishes the first unstable
        offset only after (``updateHighWatermark`` -> ``maybeIncrementFirstUnstableOffset``).
        An append needs no mark: it orders its own writes (see :meth:`_append_set`)."""
        self._state_changes += 1
        try:
            yield
        finally:
            self._state_changes += 1

    @_storage_op("truncation")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        with self._lock:
            self._check_open()
            with self._changing_state():
                self._truncate_fully_and_start_at(new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Kafka's ``UnifiedLog.truncateFullyAndStartAt``: the local log emptied at
        ``new_offset``, the epochs cleared and flushed, the producer state emptied
        (every snapshot deleted), then ``rebuildProducerState(newOffset)``. The rebuild
        finds the map already at ``new_offset`` and, with no snapshot left, sets the last
        snapshot offset to the log start offset (``onLogStartOffsetIncremented``): no
        ``<new_offset>.snapshot`` is written, not then and not at :meth:`close`."""
        local = self._local
        self._note_truncation(min(new_offset, local.next_offset))
        local.truncate_fully_and_start_at(new_offset)   # (log start offset = new_offset)
        self._epochs.clear_and_flush()
        self._producers.truncate_fully_and_start_at(new_offset)
        log_loader.rebuild_producer_state(self, self._producers, new_offset, False)
        _fileio.fs.fsync_dir(self.dir)

    @_storage_op("deletion of records")
    def delete_records(self, new_log_start_offset: int) -> int:
        """Advance the log start offset (Kafka's DeleteRecords); return the new one.

        Records below it become invisible at once; whole segments below it
        are removed by retention. It never moves backwards.
        """
        with self._lock:
            self._check_open()
            local = self._local
            if new_log_start_offset > local.next_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_log_start_offset} of "
                    f"partition {self.dir} since it is larger than the high watermark "
                    f"{local.next_offset}", offset=new_log_start_offset, path=self.dir)
            if new_log_start_offset > local.log_start_offset:
                # Kafka raises the recovery point to the new start without an fsync.
                # Bytes below a recovery point are never rescanned, so a torn batch
                # there would surface only in a later full recovery, which truncates
                # it and drops every later segment: flush first, keep the invariant.
                local.flush(new_log_start_offset)
                local.log_start_offset = new_log_start_offset
                self._epochs.truncate_from_start(new_log_start_offset)
                self._producers.on_log_start_offset_incremented(new_log_start_offset)
            return local.log_start_offset

    @_storage_op("deletion of segments")
    def delete_segments(self, segments: Iterable[LogSegment]) -> int:
        """Remove the oldest segments (retention): rename to ``.deleted``, delete later.

        ``segments`` must be a prefix of :attr:`segments` (the oldest, in any
        order); the active segment is never removed (roll first). The log start
        offset moves to the first remaining segment if it was below it.
        Returns how many were removed.
        """
        with self._lock:
            self._check_open()
            local = self._local
            removed = local.delete_oldest(segments, self._schedule_snapshot_delete)
            if removed:
                self._epochs.truncate_from_start(local.log_start_offset)
                self._producers.on_log_start_offset_incremented(local.log_start_offset)
            return removed

    @_storage_op("segment swap")
    def replace_segments(self, new_segments: Iterable[LogSegment],
                         old_segments: Iterable[LogSegment]) -> list[LogSegment]:
        """Swap ``new_segments`` in for ``old_segments`` (the log cleaner's last step):
        :meth:`LocalLog.replace_segments <kafkastore.local_log.LocalLog.replace_segments>`
        (Kafka's ``replaceSegments``: the renames, their order and what a crash between
        them leaves) under the log's lock; the producer snapshots of the removed segments
        are deleted with them. Returns the old segments that were removed and not
        replaced by a new segment of the same base offset.
        """
        with self._lock:
            self._check_open()
            return self._local.replace_segments(new_segments, old_segments,
                                                self._schedule_snapshot_delete)

    def _schedule_snapshot_delete(self, base_offset: int, due: int | None = None) -> None:
        """Kafka's ``deleteProducerSnapshots``: a removed segment's snapshot is renamed
        ``.deleted`` and deleted with the segment's files."""
        path = self._producers.remove_and_mark_snapshot_for_deletion(base_offset)
        if path is not None:
            due = self._time_ms() + self.config.file_delete_delay_ms if due is None else due
            self._pending_snapshot_deletes.append((due, path))

    @_storage_op("deletion of segments")
    def delete_pending_segments(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Delete the ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        with self._lock:
            now = self._time_ms() if now_ms is None else now_ms
            done = self._local.delete_pending(now, force)
            snapshots = []
            for due, path in self._pending_snapshot_deletes:
                if force or now >= due:
                    _fileio.fs.unlink(path)
                else:
                    snapshots.append((due, path))
            self._pending_snapshot_deletes = snapshots
            return done

    # -- closing -----------------------------------------------------------

    @_storage_op("close")
    def close(self) -> None:
        """Flush everything, close the files and write the clean-shutdown marker."""
        with self._lock:
            if self._closed:
                return
            local = self._local
            if local.failed is not None:
                self._close_handlers()
                return
            try:
                # a snapshot at the log end offset: the next open replays nothing
                self._producers.take_snapshot()
                local.close()   # (the final flush; on a failure the log is failed)
                self.delete_pending_segments(force=True)
                if self._standalone:
                    local.write_clean_shutdown_marker()
            finally:
                self._closed = True
                self._release_dir_lock()

    def _release_dir_lock(self) -> None:
        lock, self._dir_lock = self._dir_lock, None
        if lock is not None:
            lock.release()

    def close_handlers(self) -> None:
        """Close every file without flushing or writing anything (a deleted log, a failed
        disk); pending ``.deleted`` segments too. Idempotent."""
        with self._lock:
            self._close_handlers()
            for _, seg in self._local.pending_deletes:
                seg.close_handlers()

    def _close_handlers(self) -> None:
        self._local.close_handlers()
        self._closed = True
        self._release_dir_lock()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


