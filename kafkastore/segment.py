"""One log segment: a ``.log`` file and its ``.index``, ``.timeindex`` and ``.txnindex``.

:class:`LogSegment` is Kafka's ``LogSegment`` (``storage/.../log/LogSegment.java``)
in Python spelling: the same indexing rule, read semantics, recovery, roll
rules and file-suffix protocol, so the files it writes are the files Kafka
writes, byte for byte.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from kafkastore import _fileio
from kafkastore._fileio import FileSystem as _FileSystem
from kafkastore._kernels import entry_walk, index_search
from kafkastore.batch_header import PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD, header_field
from kafkastore.errors import CorruptIndexError, IndexClosedError, KafkaStoreError
from kafkastore.file_records import _PREFETCH_MAX, _WINDOW, FileRecords, LogSlice
from kafkastore.offset_index import OffsetIndex
from kafkastore.producer_state import ProducerStateManager, producer_batch
from kafkastore.records import read_batch
from kafkastore.time_index import TimeIndex
from kafkastore.txn_index import AbortedTxn, TransactionIndex

__all__ = [
    "LogSegment",
    "LogSegmentOffsetOverflowError",
    "TimestampAndOffset",
    "filename_prefix_from_offset",
    "segment_file",
    "offset_from_file_name",
    "LOG_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "CLEANED_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
]

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

_INT_MAX = (1 << 31) - 1
_read_segment = entry_walk.read_segment
_rebuild_entries = index_search.rebuild_entries
# slots of the rebuild's state array (index_search.REBUILD_STATE_SLOTS)
(_S_VALID, _S_LAST_ENTRY, _S_MAX_TS, _S_MAX_OFF, _S_O_ENTRIES, _S_O_LIMIT, _S_O_LAST,
 _S_T_ENTRIES, _S_T_LIMIT, _S_T_LAST_TS, _S_T_LAST_OFF) = range(index_search.REBUILD_STATE_SLOTS)
_LONG_MAX = (1 << 63) - 1
NO_TIMESTAMP = -1


#: What the read kernel (``entry_walk.read_segment`` / ``read_at``) needs besides the
#: segment: the file type it serves (local files; a StorageRecords takes the general
#: path), the plain file system, the slice type, the bounds of its window (a read of
#: ``_WINDOW`` to ``_PREFETCH_MAX`` bytes is fetched with the header, smaller ones with
#: ``_WINDOW`` bytes), and ``os.pread``, which the plain file system's ``pread`` is (the
#: kernels import nothing of the operating system themselves).
READ_PLAN = (FileRecords, _FileSystem, LogSlice, _WINDOW, _PREFETCH_MAX, os.pread)


class LogSegmentOffsetOverflowError(KafkaStoreError):
    """An offset does not fit the segment's 31-bit relative range, or lies below its base
    offset (Kafka's ``LogSegmentOffsetOverflowException``). Kafka's loader splits a
    segment whose offsets overflow (``splitOverflowedSegment``); kafkastore's does not:
    the error reaches the caller of the open, naming the segment and the offset, and
    nothing in the directory is changed."""


class TimestampAndOffset(NamedTuple):
    """A record found by timestamp: its timestamp, offset and leader epoch (None if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def max_timestamp_record(headers, read, timestamp: int) -> TimestampAndOffset | None:
    """The record a MAX_TIMESTAMP lookup answers with, from the headers of a segment's
    entries walked from its index floor (``read(position, size)`` gives an entry's
    bytes): the first entry whose max timestamp is ``timestamp``, and in it the first
    record with that timestamp (Kafka's ``RecordBatch.offsetOfMaxTimestamp``: none for
    magic 0). None when no entry has it."""
    for header in headers:
        if header.max_timestamp != timestamp:
            continue
        if header.magic == 0:
            return None
        batch = read_batch(read(header.position, header.size))
        batch.validate()
        epoch = getattr(batch, "partition_leader_epoch", -1)
        for record in batch:
            if record.timestamp == timestamp:
                return TimestampAndOffset(timestamp, record.offset,
                                          epoch if epoch >= 0 else None)
        return None
    return None


def filename_prefix_from_offset(offset: int) -> str:
    """Kafka's 20-digit, zero-padded file name prefix."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    """The base offset of a segment file name: the digits before the first dot."""
    base = os.path.basename(name)
    return int(base[:base.index(".")] if "." in base else base)


_LOG_FILE_NAME = re.compile(r"(\d{20})\.log")
_SNAPSHOT_FILE_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


def log_file_offset(name: str) -> int | None:
    """The base offset of a segment's ``.log`` file name (``<20 digits>.log``), or None
    for any other name."""
    m = _LOG_FILE_NAME.fullmatch(name)
    return int(m.group(1)) if m is not None else None


def snapshot_id_from_file_name(name: str) -> tuple[int, int] | None:
    """``(end offset, epoch)`` of a KRaft snapshot file name
    (``<20-digit end offset>-<10-digit epoch>.checkpoint``, Kafka's
    ``Snapshots.filenameFromSnapshotId``), or None for any other name. The digits are
    not range-checked."""
    m = _SNAPSHOT_FILE_NAME.fullmatch(name)
    return (int(m.group(1)), int(m.group(2))) if m is not None else None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def segment_file(directory: str, base_offset: int, suffix: str, extra: str = "") -> str:
    # os.path.join's generality costs more than the rest of opening a clean segment
    sep = "" if directory.endswith(os.sep) else os.sep
    return f"{directory}{sep}{base_offset:020d}{suffix}{extra}"


#: Serialises the first open of every :class:`_LazyIndex` against the others and against
#: closing (opens are rare: once per index file).
_LAZY_LOAD_LOCK = threading.Lock()
# Serialises the deferred index checks (LogSegment.defer_sanity_check): re-entrant, as a
# check loads the indexes it checks.
_INDEX_CHECK_LOCK = threading.RLock()
_logger = logging.getLogger(__name__)


class _LazyIndex:
    """Kafka's ``LazyIndex``: the index file is opened (and mmapped) on first use.

    Renames and deletes work on the bare path without creating the file, so
    a log with thousands of segments opens only the indexes it touches.

    Lock-free readers may call :meth:`get` concurrently (with each other and with
    the writer): the first use opens the file once, under a lock, so no second
    mapping of the same file can outlive a trim of it (a SIGBUS). After
    :meth:`close`, :meth:`close_handler` or :meth:`delete_if_exists` the index is
    never opened again: :meth:`get` raises :class:`IndexClosedError`.
    """

    __slots__ = ("path", "_cls", "_base_offset", "_max_index_size", "_index", "_closed")

    def __init__(self, cls, path: str, base_offset: int, max_index_size: int) -> None:
        self._cls = cls
        self.path = path
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._index = None
        self._closed = False

    @property
    def loaded(self) -> bool:
        return self._index is not None

    def get(self):
        index = self._index
        if index is None:
            with _LAZY_LOAD_LOCK:
                index = self._index
                if index is None:
                    if self._closed:
                        raise IndexClosedError(f"index {self.path} is closed", path=self.path)
                    index = self._index = self._cls(self.path, self._base_offset,
                                                    self._max_index_size)
        return index

    def rename_to(self, path: str) -> None:
        if self._index is not None:
            self._index.rename_to(path)
        elif os.path.exists(self.path):
            _fileio.fs.rename(self.path, path)
        self.path = path

    def _retire(self):
        """Mark closed (no later open) and hand back the open index, if any."""
        with _LAZY_LOAD_LOCK:
            self._closed = True
            index, self._index = self._index, None
        return index

    def delete_if_exists(self) -> bool:
        index = self._retire()
        if index is not None:
            return index.delete_if_exists()
        return _fileio.fs.unlink(self.path)

    def close(self) -> None:
        index = self._retire()
        if index is not None:
            index.close()

    def close_handler(self) -> None:
        index = self._retire()
        if index is not None:
            index.close_handler()


class LogSegment:
    """A segment of a log: ``<base>.log`` plus its sparse offset and time indexes and its
    aborted-transaction index.

    Files: ``<20-digit base offset>.log`` holds entries back to back;
    ``.index`` holds 8-byte big-endian ``(relative offset, position)`` entries
    and ``.timeindex`` 12-byte ``(timestamp, relative offset)`` entries, both
    sparse: one entry per ``index.interval.bytes`` of appended data, mapping
    the *last* offset of an appended chunk to the chunk's start position;
    ``.txnindex`` (:class:`~kafkastore.txn_index.TransactionIndex`) holds one 34-byte
    entry per transaction an ABORT marker of this segment ended, and exists only once
    one did.

    Invariants: every offset in the segment lies in
    ``[base_offset, base_offset + 2**31 - 1]``; index positions are entry
    starts; index keys strictly increase (offsets) or never decrease
    (timestamps); the time index of a closed or rolled segment ends with
    the segment's max timestamp.

    Thread-safety: mutations (append, truncate, recover, roll, close,
    rename, delete) are made by one thread at a time under the owning
    :class:`~kafkastore.log.Log`'s lock. Reads (``read``,
    ``translate_offset``, ``find_offset_by_timestamp``) may run
    concurrently with an append: they use ``pread`` and see a consistent
    prefix of the file.
    """

    def __init__(self, log: FileRecords, offset_index: _LazyIndex, time_index: _LazyIndex,
                 base_offset: int, index_interval_bytes: int, roll_jitter_ms: int,
                 now_ms: int | None = None, *,
                 time_ms: Callable[[], int] | None = None,
                 txn_index: TransactionIndex) -> None:
        self.log = log
        self._offset_index = offset_index
        self._time_index = time_index
        self.base_offset = base_offset
        self.txn_index = txn_index
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        # the clock for ``created`` (Kafka's LogSegment takes a Time): the owning log's
        self._time_ms = time_ms or _now_ms
        self.created = self._time_ms() if now_ms is None else now_ms
        self._rolling_based_timestamp: int | None = None
        self._max_ts_and_offset: tuple[int, int] | None = None  # (max ts, its batch's last offset)
        self._bytes_since_last_index_entry = 0
        # set by defer_sanity_check(): the indexes are checked (and rebuilt if bad) on
        # their first use instead of at open
        self._index_check_pending = False

    # -- opening -----------------------------------------------------------

    @classmethod
    def open(cls, directory: str, base_offset: int, config, *, file_already_exists: bool = False,
             init_file_size: int = 0, preallocate: bool = False, suffix: str = "",
             now_ms: int | None = None,
             time_ms: Callable[[], int] | None = None) -> LogSegment:
        """Open (or create) the segment at ``base_offset`` in ``directory``.

        ``config`` is a :class:`~kafkastore.config.LogConfig`; ``suffix`` is
        appended to every file name (``.cleaned``, ``.swap``).
        """
        max_index_size = config.segment_index_bytes
        log = FileRecords.open(segment_file(directory, base_offset, LOG_FILE_SUFFIX, suffix),
                               file_already_exists=file_already_exists,
                               init_file_size=init_file_size, preallocate=preallocate)
        offset_index = _LazyIndex(OffsetIndex,
                                  segment_file(directory, base_offset, INDEX_FILE_SUFFIX, suffix),
                                  base_offset, max_index_size)
        time_index = _LazyIndex(TimeIndex,
                                segment_file(directory, base_offset, TIME_INDEX_FILE_SUFFIX, suffix),
                                base_offset, max_index_size)
        txn_index = TransactionIndex(
            base_offset, segment_file(directory, base_offset, TXN_INDEX_FILE_SUFFIX, suffix))
        return cls(log, offset_index, time_index, base_offset, config.index_interval_bytes,
                   config.random_segment_jitter(), now_ms, time_ms=time_ms,
                   txn_index=txn_index)

    def _active_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """The offset and the time index, as the properties give them (checked first if a
        check is pending, loaded on first use), in one call: the append path's way to them
        (:meth:`append`, :meth:`needs_roll`), which asks on every append."""
        if self._index_check_pending:
            self._check_indexes_once()
        offset_index = self._offset_index._index
        time_index = self._time_index._index
        if offset_index is None or time_index is None:
            # not loaded yet: _LazyIndex.get() opens them (the loaded ones are read in
            # place above, no call)
            return self._offset_index.get(), self._time_index.get()
        return offset_index, time_index

    @property
    def offset_index(self) -> OffsetIndex:
        if self._index_check_pending:
            self._check_indexes_once()
        return self._offset_index.get()

    @property
    def time_index(self) -> TimeIndex:
        if self._index_check_pending:
            self._check_indexes_once()
        return self._time_index.get()

    @property
    def offset_index_path(self) -> str:
        return self._offset_index.path

    @property
    def time_index_path(self) -> str:
        return self._time_index.path

    @property
    def size(self) -> int:
        """Bytes of the ``.log`` file (logical)."""
        return self.log.size

    def __repr__(self) -> str:
        return (f"LogSegment(base_offset={self.base_offset}, size={self.size}, "
                f"path={self.log.path!r})")

    def defer_sanity_check(self, time_index_newly_created: bool,
                           offset_index_exists: bool | None = None,
                           txn_index_exists: bool = False) -> None:
        """Kafka's check at open (the offset index file exists), with the content checks
        of :meth:`sanity_check` deferred to the first use of an index.

        Opening a log with thousands of clean segments then maps no index file. On
        first use the indexes are checked under a lock; a bad one is rebuilt from the
        ``.log`` (without cutting it: the data was accepted when the log was opened)
        before any lookup sees it, so a bad index is still never used.
        """
        if offset_index_exists is None:  # the caller did not list the directory
            offset_index_exists = os.path.exists(self._offset_index.path)
        if not offset_index_exists:
            raise CorruptIndexError(f"Offset index file {self._offset_index.path} does not exist",
                                    path=self._offset_index.path)
        if time_index_newly_created:
            self._time_index.get().resize(0)
        if txn_index_exists:
            self.txn_index.sanity_check()   # small, and read by Kafka at open too
        else:
            # no file in the listing: a read_committed fetch need not look for one
            self.txn_index.known_size(0, self.txn_index.change_mark())
        self._index_check_pending = True

    def _check_indexes_once(self) -> None:
        with _INDEX_CHECK_LOCK:
            if not self._index_check_pending:
                return
            try:
                self._check_index_contents()
            except CorruptIndexError as exc:
                _logger.warning("Found a bad index for segment %s (%s); rebuilding it",
                                self.log.path, exc)
                self._rebuild_indexes(truncate=False)
            self._index_check_pending = False

    def sanity_check(self, time_index_newly_created: bool) -> None:
        """Check the index files before trusting them; raise :class:`CorruptIndexError`.

        Stricter than Kafka at this version, which only checks that the
        offset index exists: both indexes' contents are checked too
        (sizes, ordering, range), so a bad index is rebuilt, never used.
        """
        if not os.path.exists(self._offset_index.path):
            raise CorruptIndexError(f"Offset index file {self._offset_index.path} does not exist",
                                    path=self._offset_index.path)
        if time_index_newly_created:
            self.time_index.resize(0)
        self.txn_index.sanity_check()
        self._check_index_contents()

    def _check_index_contents(self) -> None:
        # Every entry, not only Kafka's last-entry checks: an index file whose length was
        # extended by a crash but whose bytes never reached the disk (zeros, or garbage
        # on a file system that exposes stale blocks) can pass those, and a lookup in it
        # would skip records silently (KAFKA-10207's class). With ordered entries and the
        # last position inside the data, every position is inside it.
        self._offset_index.get().sanity_check(full=True)
        self._time_index.get().sanity_check(full=True)
        # the indexes must point inside the data that is there
        index = self._offset_index.get()
        if index.entries:
            _, position = index.entry(index.entries - 1)
            if position >= max(self.size, 1):
                raise CorruptIndexError(
                    f"Corrupt index found, index file ({index.path}) has an entry at position "
                    f"{position} past the end of the log ({self.size} bytes)", path=index.path)

    # -- appending ---------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {offset} in segment {self!r}",
                offset=offset, path=self.log.path)

    def append(self, largest_offset: int, largest_timestamp: int,
               shallow_offset_of_max_timestamp: int, records) -> None:
        """Append whole entries whose last offset is ``largest_offset``.

        Kafka's indexing rule: when more than ``index.interval.bytes`` were
        appended since the last index entry, this append's start position is
        indexed under ``largest_offset`` and the time index gets the
        segment's max timestamp so far.
        """
        log = self.log
        position = log._size
        if not 0 <= largest_offset - self.base_offset <= _INT_MAX:
            self._ensure_offset_in_range(largest_offset)
        size = log.append(records)
        if not size:
            return
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        # what the batch changes in the segment (every append: inline, no call)
        known = self._max_ts_and_offset or self._max_ts_and_offset_so_far()
        if largest_timestamp > known[0]:
            self._max_ts_and_offset = known = (largest_timestamp,
                                               shallow_offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            offset_index, time_index = self._active_indexes()
            offset_index.append(largest_offset, position)
            time_index.maybe_append(known[0], known[1])
            self._bytes_since_last_index_entry = size
        else:
            self._bytes_since_last_index_entry += size

    def _max_ts_and_offset_so_far(self) -> tuple[int, int]:
        if self._max_ts_and_offset is None:
            ts, off = self.time_index.last_entry
            self._max_ts_and_offset = (ts, off)
        return self._max_ts_and_offset

    def max_timestamp_so_far(self) -> int:
        return self._max_ts_and_offset_so_far()[0]

    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self._max_ts_and_offset_so_far()[1]

    # -- reading -----------------------------------------------------------

    def translate_offset(self, offset: int, starting_file_position: int = 0):
        """The first entry whose last offset >= ``offset``, as a :class:`BatchHeader`, or None."""
        position = max(self.offset_index.lookup(offset)[1], starting_file_position)
        return self.log.search_for_offset_with_size(offset, position)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> LogSlice | None:
        """Kafka's ``LogSegment.read``: a slice starting at the batch holding ``start_offset``.

        None when ``start_offset`` is past this segment's data. The slice
        holds at most ``max_size`` bytes (at least the first batch if
        ``min_one_message``) and ends before ``max_position`` (default: the
        segment's size).
        """
        # the common case in one kernel call: the index lookup and the header check of
        # the batch it points at, on one pread that usually also holds the data (Kafka's
        # LogSegment.read: offsetIndex.lookup, then FileRecords.searchForOffsetWithSize
        # from the entry's position); the kernel declines a negative max_size, which
        # the general path refuses
        found = _read_segment(self, start_offset, max_size, max_position, min_one_message,
                              _fileio.fs, READ_PLAN)
        if found is not None:
            return found
        return self._read_general(start_offset, max_size, max_position, min_one_message)

    def _read_general(self, start_offset: int, max_size: int, max_position: int | None,
                      min_one_message: bool) -> LogSlice | None:
        """:meth:`read` without the kernel: a walk of the headers from the index entry
        (and the errors of a closed index or file, a sparse index, a corrupt size
        field). :class:`~kafkastore.local_log.LocalLog`'s read calls it for the segment
        whose kernel read (``read_at``) already declined, so that the window is not
        read a second time by the same kernel."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log.path}")
        log = self.log
        if max_position is None:
            max_position = log._size
        index = self.offset_index
        index_offset, index_position, next_position = index.lookup_with_next(start_offset)
        header, data = log.search_with_data(
            start_offset, index_position, max_size, next_position=next_position,
            at_start=index_offset == start_offset)
        if header is None:
            return None
        start_position, header_size = header.position, header.size
        adjusted = max(max_size, header_size) if min_one_message else max_size
        if adjusted == 0:
            # Kafka: FetchDataInfo(offsetMetadata, MemoryRecords.EMPTY), not flagged incomplete
            return LogSlice(self.log, start_position, 0, start_offset,
                            first_entry_incomplete=False)
        fetch_size = max(0, min(max_position - start_position, adjusted))
        if data is not None and len(data) != fetch_size:
            data = data[:fetch_size] if len(data) > fetch_size else None
        return LogSlice(self.log, start_position, fetch_size, start_offset,
                        first_entry_incomplete=adjusted < header_size, data=data)

    def read_next_offset(self) -> int:
        """The offset after the last entry (``base_offset`` if empty): scans past the last index entry."""
        start = self.offset_index.lookup(self.offset_index.last_offset)[1]
        next_offset = self.base_offset
        for header in self.log.walk(start):
            next_offset = header.last_offset + 1
        if next_offset == self.base_offset and start > 0:
            # the last index entry points at no complete entry (the file was cut inside
            # the batch it indexes): the entries before it still count, so walk from the
            # start rather than calling the segment empty. Kafka's readNextOffset answers
            # baseOffset here; the walk keeps the offsets of the whole entries, which a
            # later append must not reuse
            for header in self.log.walk(0):
                next_offset = header.last_offset + 1
        return next_offset

    def has_overflow(self) -> bool:
        next_offset = self.read_next_offset()
        return next_offset > self.base_offset and not self.can_convert_to_relative_offset(
            next_offset - 1)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int):
        return self.offset_index.fetch_upper_bound_offset(start_position, fetch_size)

    def find_offset_by_timestamp(self, timestamp: int,
                                 starting_offset: int | None = None) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        if starting_offset is None:
            starting_offset = self.base_offset
        _, index_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(index_offset, starting_offset))[1]
        for header in self.log.walk(position):
            if header.max_timestamp < timestamp:
                continue
            batch = read_batch(self.log.read(header.position, header.size))
            epoch = getattr(batch, "partition_leader_epoch", -1)
            for record in batch:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampAndOffset(record.timestamp, record.offset,
                                              epoch if epoch >= 0 else None)
        return None

    # -- timestamps --------------------------------------------------------

    def largest_record_timestamp(self) -> int | None:
        ts = self.max_timestamp_so_far()
        return ts if ts >= 0 else None

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the ``.log`` file's mtime (ms) when there is none."""
        ts = self.max_timestamp_so_far()
        return ts if ts >= 0 else self.last_modified()

    def last_modified(self) -> int:
        return int(self.log.last_modified() * 1000)

    def set_last_modified(self, ms: int) -> None:
        seconds = ms / 1000.0
        for path in (self.log.path, self._offset_index.path, self._time_index.path):
            if os.path.exists(path):
                os.utime(path, (seconds, seconds))

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for header in self.log.walk(0):
                self._rolling_based_timestamp = header.max_timestamp
                break

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Kafka's ``LogSegment.timeWaitedForRoll``: ``message_timestamp`` minus the first
        batch's max timestamp, or ``now`` minus the segment's creation time when that batch
        has none."""
        ts = self._rolling_based_timestamp
        if ts is None:   # (loaded once: every append's roll check asks)
            self._load_first_batch_timestamp()
            ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created

    def get_first_batch_timestamp(self) -> int:
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else _LONG_MAX

    def needs_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now: int,
                   max_segment_bytes: int, max_segment_ms: int) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: whether an append of ``messages_size`` bytes
        (its largest timestamp ``max_timestamp``, its last offset ``max_offset``) at time
        ``now`` must go to a new segment. Kafka's five conditions, in its order: the
        segment would pass ``max_segment_bytes``; it is not empty and has waited longer
        than ``max_segment_ms`` minus its jitter (:meth:`time_waited_for_roll`); its
        offset index or its time index is full; ``max_offset`` is not an int32 offset
        relative to the base. (Kafka passes these in a ``RollParams``; the append path
        has them at hand.)"""
        # (Kafka's LogSegment.shouldRoll, its conditions in its order; each rule has one
        # home, called here: time_waited_for_roll, the indexes' is_full,
        # can_convert_to_relative_offset)
        size = self.log._size
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0 and (self.time_waited_for_roll(now, max_timestamp)
                         > max_segment_ms - self.roll_jitter_ms):
            return True
        offset_index, time_index = self._active_indexes()
        return (offset_index.is_full() or time_index.is_full()
                or not self.can_convert_to_relative_offset(max_offset))

    # -- recovery and truncation -------------------------------------------

    def recover(self, producer_state: ProducerStateManager | None = None) -> int:
        """Rebuild the indexes from the ``.log``; cut an invalid tail; return bytes cut.

        Every entry's CRC is checked, as Kafka's ``LogSegment.recover``;
        the scan stops at the first entry that is corrupt, partial or out of
        the segment's offset range (the last raises
        :class:`LogSegmentOffsetOverflowError` so the loader can split).
        With ``producer_state`` (the state at this segment's base offset) every batch
        with a producer id updates it, and every aborted transaction the segment ends is
        written again to the emptied ``.txnindex``.
        """
        self._index_check_pending = False  # rebuilt here: nothing left to check
        return self._rebuild_indexes(truncate=True, producer_state=producer_state)

    def _rebuild_indexes(self, truncate: bool,
                         producer_state: ProducerStateManager | None = None) -> int:
        """:meth:`recover`; with ``truncate`` False an invalid tail is left in the file
        (and returned as the byte count past the indexed entries)."""
        offset_index = self._offset_index.get()
        time_index = self._time_index.get()
        offset_index.reset()
        time_index.reset()
        if producer_state is not None:
            self.txn_index.reset()
        self._max_ts_and_offset = (NO_TIMESTAMP, self.base_offset)
        # the rebuild's running state (index_search.REBUILD_STATE_SLOTS): bytes so far,
        # bytes at the last index entry, the largest timestamp and its offset, then each
        # index's count, limit and last entry (is_full: max_entries for the offset index,
        # max_entries - 1 for the time index, whose last slot is kept); the counts and
        # last entries from the indexes themselves (_load_index_slots)
        state = np.array([0, 0, NO_TIMESTAMP, self.base_offset,
                          0, offset_index.max_entries, 0,
                          0, time_index.max_entries - 1, 0, 0], dtype=np.int64)
        self._load_index_slots(state, offset_index, time_index)
        try:
            for _buf, chunk_pos, scan in self.log.scan_chunks(0):
                self._index_chunk(scan, chunk_pos, state, offset_index, time_index)
                if producer_state is not None:
                    self._update_producer_state(producer_state, _buf, chunk_pos, scan)
                    if len(scan):
                        # every batch moves the map's end, with a producer id or not
                        # (Kafka's updateMapEndOffset per batch): the snapshot taken
                        # after a recovery then sits at the segment's end
                        producer_state.update_map_end_offset(
                            int(scan.last_offset[len(scan) - 1]) + 1)
                if scan.error is not None:
                    break
        finally:
            self._max_ts_and_offset = (int(state[_S_MAX_TS]), int(state[_S_MAX_OFF]))
        valid_bytes = int(state[_S_VALID])
        max_ts, max_off = self._max_ts_and_offset
        truncated = self.log.size - valid_bytes
        if truncate:
            self.log.truncate_to(valid_bytes)
        offset_index.trim_to_valid_size()
        time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        time_index.trim_to_valid_size()
        # bytes_since_last_index_entry is left alone, as Kafka's recover() does: the
        # next appends index exactly as Kafka's would
        return truncated

    def _index_chunk(self, scan, chunk_pos: int, state, offset_index: OffsetIndex,
                     time_index: TimeIndex) -> None:
        """The index entries of one scanned chunk, as Kafka's ``LogSegment.recover`` makes
        them (an entry when more than ``index.interval.bytes`` passed since the last one;
        a full index takes no more: see below). The ``rebuild_entries`` kernel writes runs
        of entries straight into the two maps; a batch it stops at (an offset outside the
        segment, an offset or timestamp going backwards, a position past int32) goes
        through the indexes' own appends, which raise exactly what they always raised."""
        lasts, sizes, max_tss = scan.last_offset, scan.size, scan.max_timestamp
        base, interval = self.base_offset, self.index_interval_bytes
        n, i = len(scan), 0
        while True:
            i = _rebuild_entries(lasts, sizes, max_tss, i, base, interval, state,
                                 offset_index.append_view(), time_index.append_view())
            offset_index.commit_appended(state[_S_O_ENTRIES], state[_S_O_LAST])
            time_index.commit_appended(state[_S_T_ENTRIES], state[_S_T_LAST_TS],
                                       state[_S_T_LAST_OFF])
            if i >= n:
                return
            self._index_one(int(lasts[i]), int(sizes[i]), int(max_tss[i]),
                            chunk_pos + int(scan.position[i]), state, offset_index,
                            time_index)
            i += 1

    def _index_one(self, last: int, size: int, max_timestamp: int, position: int, state,
                   offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        """One batch of the rebuild through the indexes' checked appends (see
        :meth:`_index_chunk`); ``state`` moves on past it."""
        base = self.base_offset
        if not 0 <= last - base <= _INT_MAX:
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {last} in segment {self!r}",
                offset=last, path=self.log.path, position=position)
        valid, last_index_entry = int(state[_S_VALID]), int(state[_S_LAST_ENTRY])
        if max_timestamp > state[_S_MAX_TS]:
            state[_S_MAX_TS], state[_S_MAX_OFF] = max_timestamp, last
        if valid - last_index_entry > self.index_interval_bytes:
            # A rebuild from byte 0 can need more entries than the appends made (a
            # reopen restarts their byte count, and the segment rolled when an index
            # filled) or than a smaller segment.index.bytes holds: an index is a sparse
            # hint, so a full one takes no more rather than failing the open (the final
            # time entry after the rebuild has its kept slot).
            if not offset_index.is_full():
                offset_index.append(last, valid)
            if not time_index.is_full():
                time_index.maybe_append(int(state[_S_MAX_TS]), int(state[_S_MAX_OFF]))
            state[_S_LAST_ENTRY] = valid
            # the kernel's next run starts from what these appends left (without an
            # entry the indexes hold what the last commit_appended gave them: no copy)
            self._load_index_slots(state, offset_index, time_index)
        state[_S_VALID] = valid + size

    @staticmethod
    def _load_index_slots(state, offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        """The rebuild ``state``'s count and last entry of each index, from the index."""
        last_time = time_index.last_entry
        state[_S_O_ENTRIES], state[_S_O_LAST] = offset_index.entries, offset_index.last_offset
        state[_S_T_ENTRIES] = time_index.entries
        state[_S_T_LAST_TS], state[_S_T_LAST_OFF] = last_time.timestamp, last_time.offset

    def _update_producer_state(self, producer_state: ProducerStateManager, buf,
                               chunk_pos: int, scan) -> None:
        """Kafka's ``LogSegment.updateProducerState`` for the good entries of one chunk:
        only v2 batches with a producer id are decoded (found by a vectorised read of
        the producer id field), so a log without idempotent producers costs one gather."""
        magic2 = scan.magic == 2
        if not magic2.any():
            return
        positions = scan.position[magic2] + chunk_pos
        pids = header_field(buf, positions, PRODUCER_ID_OFFSET, ">i8")
        sizes = scan.size[magic2]
        with_pid = np.flatnonzero(pids >= 0)
        if with_pid.size == 0:
            return
        path = self.log.path

        def batches():
            for i in with_pid.tolist():
                pos, size = int(positions[i]), int(sizes[i])
                batch = producer_batch(bytes(buf[pos:pos + RECORD_BATCH_OVERHEAD]),
                                       lambda p=pos, n=size: bytes(buf[p:p + n]), path)
                if batch is not None:
                    yield batch

        producer_state.apply_batches(batches(), self.update_txn_index)

    def update_txn_index(self, completed, last_stable_offset: int) -> None:
        """Kafka's ``updateTxnIndex``: an aborted transaction's entry."""
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                             completed.last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> int:
        """Drop every entry holding an offset >= ``offset`` (whole batches); return bytes cut."""
        mapping = self.translate_offset(offset)
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        offset_index.resize(offset_index.max_index_size)
        time_index.resize(time_index.max_index_size)
        truncated = 0
        if mapping is not None:
            truncated = self.log.truncate_to(mapping.position)
        if self.log.size == 0:
            self.created = self._time_ms()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        # Kafka rescans only if maxTimestampSoFar() >= 0, which for a reopened segment is
        # the truncated time index's last entry alone: with no entry left it would miss
        # the batches still in the file. Always rescan past the last entry instead.
        self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> None:
        ts, off = self.time_index.last_entry
        position = self.offset_index.lookup(off)[1]
        for header in self.log.walk(position):
            if header.max_timestamp > ts:
                ts, off = header.max_timestamp, header.last_offset
        self._max_ts_and_offset = (ts, off)

    # -- lifecycle ---------------------------------------------------------

    def on_become_inactive_segment(self) -> None:
        """On roll: final time index entry, trim both indexes and the file."""
        ts, off = self._max_ts_and_offset_so_far()
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def flush(self) -> None:
        """fsync the ``.log`` and the ``.txnindex``, msync both indexes."""
        self.log.flush()
        if self._offset_index.loaded:
            self.offset_index.flush()
        if self._time_index.loaded:
            self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Final time index entry (if loaded), close the indexes (trimmed) and the file."""
        try:
            if self._max_ts_and_offset is not None:
                try:
                    ts, off = self._max_ts_and_offset
                    self.time_index.maybe_append(ts, off, skip_full_check=True)
                except KafkaStoreError:
                    pass  # Kafka swallows this too: the index is rebuilt if needed
        finally:
            # each file is closed whatever happened to the others (a full disk or a
            # descriptor limit fails one trim, not the release of every file)
            first = None
            for close in (self._offset_index.close, self._time_index.close,
                          self.txn_index.flush, self.log.close):
                try:
                    close()
                except BaseException as exc:
                    first = first or exc
                    if close is self.log.close:
                        self.log.close_handlers()
            if first is not None:
                raise first

    def close_handlers(self) -> None:
        """Release files without writing (after a disk failure)."""
        self._offset_index.close_handler()
        self._time_index.close_handler()
        self.log.close_handlers()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all files by replacing ``old_suffix`` (which each name must end with)."""
        def swap(path: str) -> str:
            if not path.endswith(old_suffix):
                raise KafkaStoreError(f"Expected {path} to end with {old_suffix}", path=path)
            return path[:len(path) - len(old_suffix)] + new_suffix if old_suffix else \
                path + new_suffix

        self.log.rename_to(swap(self.log.path))
        self._offset_index.rename_to(swap(self._offset_index.path))
        self._time_index.rename_to(swap(self._time_index.path))
        self.txn_index.rename_to(swap(self.txn_index.path))

    def has_suffix(self, suffix: str) -> bool:
        return (self.log.path.endswith(suffix) and self._offset_index.path.endswith(suffix)
                and self._time_index.path.endswith(suffix))

    def delete_if_exists(self) -> None:
        """Delete all files; missing files are not an error."""
        errors = []
        for action in (self.log.delete_if_exists, self._offset_index.delete_if_exists,
                       self._time_index.delete_if_exists, self.txn_index.delete_if_exists):
            try:
                action()
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    @staticmethod
    def delete_files_if_exist(directory: str, base_offset: int, suffix: str = "") -> None:
        """Delete the segment files of ``base_offset`` + ``suffix`` by name."""
        for kind in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
                     TXN_INDEX_FILE_SUFFIX):
            _fileio.fs.unlink(segment_file(directory, base_offset, kind, suffix))

