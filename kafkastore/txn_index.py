"""The aborted-transaction index of a segment: Kafka's ``TransactionIndex`` (``.txnindex``).

File ``<20-digit base offset>.txnindex`` beside the segment's ``.log``: 34-byte entries
back to back, big-endian, no header and no checksum (Kafka's ``AbortedTxn``)::

    version:int16 (0) | producerId:int64 | firstOffset:int64 | lastOffset:int64 |
    lastStableOffset:int64

One entry per transaction that an ABORT marker in this segment ended: the producer, the
offset of the transaction's first batch (possibly in an earlier segment), the marker's
offset, and the log's last stable offset right after the marker (the first offset of
the oldest transaction of another producer still open then, else the marker's offset
+ 1). A read_committed fetch from offset F, bounded by offset U, needs every entry with
``lastOffset >= F`` and ``firstOffset < U``; it walks the segments from F's on and may
stop at the first entry whose ``lastStableOffset >= U`` (nothing later can begin below
U), as Kafka's ``collectAbortedTxns`` does.

Invariants: ``lastOffset`` strictly increases along the file (an append that breaks it
is refused), and every ``lastOffset`` lies in the segment (``>= base offset``, which
:meth:`TransactionIndex.sanity_check` checks). A partial entry at the end (a torn write)
is not an entry: readers ignore it, as Kafka's iterator does, and the next append
overwrites it instead of writing after it.

The file exists only once a transaction was aborted in the segment (Kafka creates it on
first append). :class:`TransactionIndex` keeps no descriptor open between calls (one
descriptor per segment, the ``.log``'s): appends are rare (one per aborted transaction).
Reads come from read_committed fetches and the cleaner, which search the entries as
loaded once (:meth:`TransactionIndex.loaded`), not the file: a fetch opens no file.

Thread-safety: mutations (append, truncate, reset, rename, delete) run under the owning
log's lock; reads take no lock and read whole entries of a consistent prefix.

Reading committed data
----------------------
A read_committed fetch (``Log.read(..., isolation_level="read_committed")``, or a
read-only view's :meth:`~kafkastore.log_view.ReadOnlyLog.aborted_transactions`) stops at
the last stable offset and comes with the aborted transactions that may have records in
it: ``(producer id, first offset)`` pairs from the ``.txnindex`` files. The consumer then
drops records the way Kafka's ``CompletedFetch`` does, batch by batch, in offset order:

* before looking at a batch with a producer id, every aborted transaction whose first
  offset is at or below the batch's last offset marks its producer as aborted;
* an ABORT marker (a control batch whose record is an ABORT) unmarks its producer;
* a *transactional* data batch of a marked producer is dropped, whole;
* control batches are never returned.

:class:`AbortedTransactionFilter` is that state machine. It works on batch objects
(:meth:`AbortedTransactionFilter.keep`) and on the raw batches of a buffer, vectorised,
for the columnar readers (:meth:`AbortedTransactionFilter.aborted_ranges`, then
:func:`keep_mask`).

A filter is the state of one reader going forward through one partition: one per
reader.
"""

from __future__ import annotations

import heapq
import os
import struct
import threading
from bisect import bisect_left
from collections.abc import Iterable
from itertools import islice
from typing import NamedTuple

import numpy as np

from kafkastore import _fileio
from kafkastore.batch_header import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    CONTROL_MASK,
    LAST_OFFSET_DELTA_OFFSET,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_MASK,
    header_field,
    read_batch_header,
)
from kafkastore.errors import CorruptIndexError
from kafkastore.records import ControlRecordType, control_marker

__all__ = [
    "ABORTED_TXN_SIZE",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "check_isolation_level",
    "AbortedTransactionFilter",
    "AbortedTxn",
    "IndexChanges",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "collect_aborted_txns",
    "keep_mask",
    "parse_aborted_txns",
]

ABORTED_TXN_SIZE = 34
_ENTRY = struct.Struct(">hqqqq")
_VERSION_BYTE = struct.Struct(">b")
_CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = _CURRENT_VERSION

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    """What a search of one index found, and whether later segments need no search
    (Kafka's ``TxnIndexSearchResult``)."""

    aborted: list[AbortedTxn]
    complete: bool


def parse_aborted_txns(data, path: str | None = None) -> list[AbortedTxn]:
    """The whole entries of a ``.txnindex`` file's bytes (a partial tail is ignored).

    The version is read as Kafka's ``AbortedTxn.version()`` reads it: one signed byte, the
    high byte of the int16 field (so 0x0001 reads as 0 and 0xFFFF as -1). A version above
    0 raises :class:`~kafkastore.errors.CorruptIndexError` naming the file and position,
    where Kafka's iterator throws.
    """
    view = memoryview(data)
    out = []
    for position in range(0, len(view) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        _, pid, first, last, lso = _ENTRY.unpack_from(view, position)
        version = _VERSION_BYTE.unpack_from(view, position)[0]
        if version > _CURRENT_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version} in transaction index "
                f"{path}, current version is {_CURRENT_VERSION}", position=position,
                path=path)
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


def collect_aborted_txns(entries: Iterable[AbortedTxn], fetch_offset: int,
                         upper_bound_offset: int) -> TxnIndexSearchResult:
    """Kafka's ``TransactionIndex.collectAbortedTxns`` over ``entries`` (one index)."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)


class _Entries:
    """A loaded index, immutable: its entries, their last offsets and the running maximum
    of their last stable offsets (``max_lso[k]``: over entries ``0..k``), and whether the
    last offsets are ordered (always, for a file this module wrote)."""

    __slots__ = ("entries", "lasts", "max_lso", "ordered")

    def __init__(self, entries) -> None:
        self.entries = tuple(entries)
        self.lasts = [t.last_offset for t in self.entries]
        running, top = [], None
        for t in self.entries:
            top = t.last_stable_offset if top is None else max(top, t.last_stable_offset)
            running.append(top)
        self.max_lso = running
        self.ordered = all(a <= b for a, b in zip(self.lasts, self.lasts[1:]))

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """:func:`collect_aborted_txns` over the entries, from the first one whose last
        offset reaches ``fetch_offset``: the entries before it match no fetch from there,
        and end the search (empty, complete) iff one's last stable offset reaches the
        bound, which the running maximum tells in one look."""
        entries = self.entries
        start = 0
        if self.ordered:
            start = bisect_left(self.lasts, fetch_offset)
            if start and self.max_lso[start - 1] >= upper_bound_offset:
                return TxnIndexSearchResult([], True)
        return collect_aborted_txns(islice(entries, start, None), fetch_offset,
                                    upper_bound_offset)


_NO_ENTRIES = _Entries(())
# (guards the loads of TransactionIndex._loaded against the mutations' updates)
_LOADED_LOCK = threading.Lock()


class IndexChanges:
    """A count of the changes made to the entries of a set of indexes: one log's
    (:class:`~kafkastore.local_log.LocalLog` gives it to the indexes of its segments),
    else one index's own. It moves under ``_LOADED_LOCK``, after each change; a cache
    of what the indexes hold is good while it has not moved."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class TransactionIndex:
    """The ``.txnindex`` file of the segment based at ``start_offset`` (see the module
    docstring for the format, invariants and thread-safety).

    A read_committed read uses the entries as loaded once (``_loaded``): every change
    made through this object updates them (Kafka keeps the file's channel open for the
    same reason: no open per fetch), and ``changes`` (:class:`IndexChanges`, one per
    log: another log's changes never move it) moves after each change, so that a cache
    of which segments hold entries (:class:`~kafkastore.local_log.LocalLog`) knows when
    to look again. The mutations and :meth:`all_aborted_txns` read the file itself."""

    def __init__(self, start_offset: int, path: str) -> None:
        self.start_offset = start_offset
        self.path = path
        self._last_offset: int | None = None
        self._last_known = False        # _last_offset read from the file yet
        self._dirty = False             # written since the last fsync
        self._loaded: _Entries | None = None   # the entries as loaded, None: not yet
        # whether the file holds a whole entry, None: not known yet (see has_entries);
        # known without opening the file when its size is (known_size)
        self._has_entries: bool | None = None
        #: the count of changes this index moves: its own until a log gives it the
        #: log's (LocalLog.set_segments)
        self.changes = IndexChanges()

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path!r})"

    # -- reading --------------------------------------------------------------------

    def _read(self) -> bytes:
        data = _fileio.read_file(self.path)
        return b"" if data is None else data

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry, in file order."""
        return parse_aborted_txns(self._read(), self.path)

    def loaded(self) -> _Entries:
        """The entries, read from the file on the first call only (a missing or empty
        file has none, and one known to be so is not opened); a bad entry raises
        :class:`~kafkastore.errors.CorruptIndexError` each time, as the file's read
        does, and is never cached."""
        found = self._loaded
        if found is None:
            with _LOADED_LOCK:
                found = self._loaded
                if found is None:
                    if self._has_entries is False:
                        found = _NO_ENTRIES
                    else:
                        entries = parse_aborted_txns(self._read(), self.path)
                        found = _Entries(entries) if entries else _NO_ENTRIES
                        self._has_entries = bool(entries)
                    self._loaded = found
        return found

    def _changed(self, entries) -> None:
        """After a change of the file: its entries now (None: not known, read them
        again when needed), and the count of :attr:`changes` moves."""
        with _LOADED_LOCK:
            self._loaded = None if entries is None else (
                _Entries(entries) if entries else _NO_ENTRIES)
            self._has_entries = None if entries is None else bool(entries)
            self.changes.count += 1

    def has_entries(self) -> bool:
        """Whether the file holds a whole entry, told by its size the first time (a
        ``stat``, never an open: a missing or empty file is not opened) unless it is
        known already (loaded, changed through this object, or :meth:`known_size`).
        A file of whole entries with a bad one has entries: its search raises."""
        known = self._has_entries
        if known is None:
            with _LOADED_LOCK:   # (a change during the look waits: the fact is its own)
                known = self._has_entries
                if known is None:
                    loaded = self._loaded
                    if loaded is not None:
                        known = bool(loaded.entries)
                    else:
                        try:
                            known = _fileio.fs.stat_size(self.path) >= ABORTED_TXN_SIZE
                        except FileNotFoundError:
                            known = False
                    self._has_entries = known
        return known

    def change_mark(self) -> tuple[IndexChanges, int]:
        """What :meth:`known_size` compares: the count of changes now."""
        changes = self.changes
        return changes, changes.count

    def known_size(self, size: int, mark: tuple[IndexChanges, int]) -> None:
        """The file's size as the opener found it (0: no file) when :meth:`change_mark`
        gave ``mark``: :meth:`has_entries` then needs no ``stat``, unless the index may
        have changed since (the fact then stays unknown: a look finds it)."""
        changes, count = mark
        with _LOADED_LOCK:
            if self.changes is changes and changes.count == count \
                    and self._has_entries is None:
                self._has_entries = size >= ABORTED_TXN_SIZE

    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> TxnIndexSearchResult:
        """The entries a fetch of ``[fetch_offset, upper_bound_offset)`` needs: Kafka's
        ``TransactionIndex.collectAbortedTxns``, over the loaded entries."""
        return self.loaded().collect(fetch_offset, upper_bound_offset)

    def sanity_check(self) -> None:
        """Kafka's check: every entry's last offset lies in the segment. The file's
        size read for it tells :meth:`has_entries` too."""
        mark = self.change_mark()
        data = self._read()
        for txn in parse_aborted_txns(data, self.path):
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path} is less "
                    f"than start offset {self.start_offset}", path=self.path)
        self.known_size(len(data), mark)

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    # -- writing --------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Append one entry; its last offset must exceed the previous entry's. The file
        is read once, for its last offset, on the first append; later appends only
        ``fstat`` it for where the whole entries end (reading it each time made every
        abort cost as much as the index was long)."""
        if not self._last_known:
            self._load_last_offset()
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{self._last_offset} of index {self.path}")
        fs = _fileio.fs
        fd = fs.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0))
        try:
            size = fs.fstat_size(fd)
            size -= size % ABORTED_TXN_SIZE
            # at the end of the whole entries: a torn tail is overwritten, never kept
            # between two entries
            _fileio.pwrite_fully(fd, txn.to_bytes(), size)
            if fs.fstat_size(fd) > size + ABORTED_TXN_SIZE:
                fs.ftruncate(fd, size + ABORTED_TXN_SIZE)
        finally:
            fs.close(fd)
        self._last_offset = txn.last_offset
        self._dirty = True
        before = self._loaded
        # (an entry of another version reads back otherwise: see parse_aborted_txns)
        self._changed(None if before is None or txn.version != _CURRENT_VERSION
                      else before.entries + (txn,))

    def _load_last_offset(self) -> None:
        """The last whole entry's last offset (None without one), from the file."""
        data = self._read()
        whole = len(data) - len(data) % ABORTED_TXN_SIZE
        entries = parse_aborted_txns(data[:whole], self.path) if whole else []
        self._last_offset = entries[-1].last_offset if entries else None
        self._last_known = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries from the first one whose last offset is ``>= offset``."""
        data = self._read()
        last = None
        entries = parse_aborted_txns(data, self.path)
        for i, txn in enumerate(entries):
            if txn.last_offset >= offset:
                self._ftruncate(i * ABORTED_TXN_SIZE)
                self._last_offset, self._last_known = last, True
                # (the entries kept are the file's now: a reader need not read it)
                self._changed(entries[:i])
                return
            last = txn.last_offset

    def reset(self) -> None:
        """Empty the file (if it exists): a recovery rebuilds it."""
        if os.path.exists(self.path):
            self._ftruncate(0)
        self._last_offset, self._last_known = None, True
        self._changed(())

    def _ftruncate(self, size: int) -> None:
        fs = _fileio.fs
        fd = fs.open(self.path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        try:
            fs.ftruncate(fd, size)
        finally:
            fs.close(fd)
        self._dirty = True

    def flush(self) -> None:
        """fsync the file if it changed since the last flush."""
        if not self._dirty:
            return
        fs = _fileio.fs
        try:
            fd = fs.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._dirty = False
            return
        try:
            fs.fsync(fd)
        finally:
            fs.close(fd)
        self._dirty = False

    def rename_to(self, path: str) -> None:
        """Rename the file (if it exists); the index follows the new name either way."""
        try:
            if os.path.exists(self.path):
                _fileio.fs.rename(self.path, path)
        finally:
            self.path = path
            self._changed(None)

    def delete_if_exists(self) -> bool:
        self._last_offset, self._last_known, self._dirty = None, True, False
        gone = None
        try:
            existed = _fileio.fs.unlink(self.path)
            gone = ()   # no file now: no entry
            return existed
        finally:
            self._changed(gone)


# -- reading committed data ---------------------------------------------------------

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


def check_isolation_level(isolation_level: str) -> bool:
    """True for read_committed, False for read_uncommitted; a ValueError otherwise."""
    if isolation_level == READ_COMMITTED:
        return True
    if isolation_level != READ_UNCOMMITTED:
        raise ValueError(f"isolation_level must be {READ_UNCOMMITTED!r} or "
                         f"{READ_COMMITTED!r}, not {isolation_level!r}")
    return False

def _is_abort_marker(batch) -> bool:
    """Kafka's ``containsAbortMarker``: the control batch's first record is an ABORT
    (``batch``: a batch object or its bytes)."""
    found = control_marker(batch)
    return found is not None and found[0].type == ControlRecordType.ABORT


class AbortedTransactionFilter:
    """Kafka's read_committed consumer filter over one partition (see the module).

    ``aborted``: the fetch's aborted transactions, as
    :class:`~kafkastore.txn_index.AbortedTxn` objects or ``(producer_id, first_offset)``
    pairs, in any order."""

    def __init__(self, aborted: Iterable) -> None:
        pending = []
        intervals: list | None = []
        for txn in aborted:
            if hasattr(txn, "producer_id"):
                pid, first, last = txn.producer_id, txn.first_offset, txn.last_offset
            else:
                pid, first = int(txn[0]), int(txn[1])
                last = int(txn[2]) if len(txn) > 2 else None
            pending.append((first, pid))
            if last is None:
                intervals = None   # a fetch response's pairs: the consumer's state machine
            elif intervals is not None:
                intervals.append((first, last, pid))
        heapq.heapify(pending)
        self._pending = pending
        self._aborted: set[int] = set()
        # with every transaction's marker offset known (an index entry, not a fetch
        # response's pair), a data batch is aborted iff a transaction of its producer
        # spans its base offset: the columnar path then needs no per-batch state
        self._intervals = None if not intervals else np.asarray(sorted(intervals),
                                                                dtype=np.int64)

    def _advance(self, last_offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= last_offset:
            self._aborted.add(heapq.heappop(pending)[1])

    def _step(self, producer_id: int, last_offset: int, transactional: bool, control: bool,
              abort_marker) -> bool:
        """Feed one batch; True when it is a data batch to drop."""
        if producer_id < 0:
            return False
        self._advance(last_offset)
        if control:
            if abort_marker():
                self._aborted.discard(producer_id)
            return False
        return transactional and producer_id in self._aborted

    def keep(self, batch) -> bool:
        """Whether the records of ``batch`` (a :class:`~kafkastore.records.RecordBatch`,
        legacy entries included) are returned: False for control batches and aborted
        ones. Batches must come in offset order."""
        if batch.magic < 2:
            return True
        control = bool(batch.is_control)
        dropped = self._step(batch.producer_id, batch.last_offset, bool(batch.is_transactional),
                             control, lambda: _is_abort_marker(batch))
        return not (dropped or control)

    def aborted_ranges(self, data, positions, sizes, magics) -> tuple[np.ndarray, np.ndarray]:
        """The ``(first offsets, last offsets)`` of the aborted data batches among the
        entries of ``data`` at ``positions`` (their ``sizes`` and ``magics``: a
        :class:`~kafkastore.records.BatchScan`'s columns), in order; only entries with a
        producer id are looked at in Python."""
        positions = np.asarray(positions, dtype=np.int64)
        v2 = np.flatnonzero(np.asarray(magics) == 2)
        firsts: list[int] = []
        lasts: list[int] = []
        if v2.size and self._intervals is not None:
            return _aborted_by_intervals(data, positions[v2], self._intervals)
        if v2.size:
            pids = header_field(data, positions[v2], PRODUCER_ID_OFFSET, ">i8")
            for k in np.flatnonzero(pids >= 0).tolist():
                i = int(v2[k])
                pos, size = int(positions[i]), int(sizes[i])
                h = read_batch_header(data, pos)

                def marker(p=pos, n=size):
                    return _is_abort_marker(bytes(data[p:p + n]))

                if self._step(h.producer_id, h.last_offset, h.is_transactional, h.is_control,
                              marker):
                    firsts.append(h.base_offset)
                    lasts.append(h.last_offset)
        return np.asarray(firsts, dtype=np.int64), np.asarray(lasts, dtype=np.int64)


def _aborted_by_intervals(data, positions: np.ndarray,
                          intervals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`AbortedTransactionFilter.aborted_ranges` from whole transactions: the
    transactional data batches whose base offset lies in ``[first, marker]`` of one of
    their producer's aborted transactions (``intervals``: rows of first, last, pid)."""
    base = header_field(data, positions, BASE_OFFSET_OFFSET, ">i8")
    lod = header_field(data, positions, LAST_OFFSET_DELTA_OFFSET, ">i4").astype(np.int64)
    attrs = header_field(data, positions, ATTRIBUTES_OFFSET, ">i2")
    pid = header_field(data, positions, PRODUCER_ID_OFFSET, ">i8")
    candidate = (attrs & (TRANSACTIONAL_MASK | CONTROL_MASK)) == TRANSACTIONAL_MASK
    candidate &= pid >= 0
    aborted = np.zeros(len(base), dtype=bool)
    if candidate.any():
        lo, hi = int(base[candidate].min()), int(base[candidate].max())
        near = intervals[(intervals[:, 0] <= hi) & (intervals[:, 1] >= lo)]
        for first, last, producer in near.tolist():
            aborted |= candidate & (pid == producer) & (base >= first) & (base <= last)
    rows = np.flatnonzero(aborted)
    return base[rows], base[rows] + lod[rows]


def keep_mask(offsets: np.ndarray, firsts: np.ndarray, lasts: np.ndarray) -> np.ndarray | None:
    """A boolean mask of the ``offsets`` outside every ``[firsts[i], lasts[i]]`` range
    (sorted, disjoint), or None when no range is given (everything is kept)."""
    if firsts.size == 0:
        return None
    i = np.searchsorted(firsts, offsets, side="right") - 1
    inside = (i >= 0) & (offsets <= lasts[np.maximum(i, 0)])
    return ~inside
