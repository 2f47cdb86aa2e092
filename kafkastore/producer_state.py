"""Producer state of a partition: Kafka's ``ProducerStateManager`` and its ``.snapshot`` files.

Per producer id the log keeps what idempotence and transactions need (Kafka's
``ProducerStateEntry``): the producer epoch, the metadata of its last five data batches
(last sequence, last offset, offset delta, max timestamp) to recognise a retried batch,
the first offset of its open transaction, the coordinator epoch of its last marker and
its last timestamp. Open transactions (first offset -> producer) give the log's first
unstable offset, and with it the last stable offset (LSO) that bounds read_committed
fetches. A completed transaction's :class:`CompletedTxn` tells the log what to write to
the ``.txnindex`` when it was aborted.

Snapshot file ``<20-digit offset>.snapshot`` (Kafka's ``ProducerSnapshot`` schema, version
1), all big-endian::

    version:int16 (1) | crc:uint32 | count:int32 | count x entry
    entry (46 bytes): producerId:int64, epoch:int16, lastSequence:int32, lastOffset:int64,
                      offsetDelta:int32, timestamp:int64, coordinatorEpoch:int32,
                      currentTxnFirstOffset:int64 (-1: none)

``crc`` is the CRC-32C of every byte after it. The offset in the name is the map end
offset when the snapshot was taken: the state is that of the log below it. Only the
latest batch of each producer is kept in a snapshot (so a reloaded producer can recognise
a retry of its last batch only, as in Kafka). Entries are written in the order Java's
``HashMap`` iterates Kafka's map (bucket order, then insertion order within a bucket),
so a set of producers gives Kafka's bytes. That order depends on the map's table size,
which in Java only grows: a manager keeps the largest table its map ever had (expired
producers and a cleared map do not shrink it), as Kafka's one ``HashMap`` per
``ProducerStateManager`` does. (Not modelled: a bucket of 8 or more colliding ids, which
Java turns into a tree with another order; coordinator-assigned ids do not collide so.)

Invariants: snapshot offsets are unique and a snapshot is never rewritten (one is taken
only when the map end offset moved past the last one). A snapshot that cannot be read
(:class:`~kafkastore.errors.CorruptSnapshotError`) is deleted and the state rebuilt from
an older one plus the log, as Kafka does; losing snapshots costs a longer replay, never
correctness.

Thread-safety: none of its own. The owning :class:`~kafkastore.log.Log` calls every
method under its lock; lock-free readers use only
:meth:`ProducerStateManager.first_unstable_offset`, which reads an immutable value.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import crc32c

from kafkastore import _fileio
from kafkastore.batch_header import (
    CONTROL_MASK,
    INT64,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
    V2_HEADER,
    increment_sequence,
)
from kafkastore.errors import (
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkastore.records import ControlRecordType, control_marker

__all__ = [
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerAppendInfo",
    "ProducerBatch",
    "ProducerStateEntry",
    "ProducerStateManager",
    "parse_snapshot",
    "producer_batch",
    "read_snapshot",
    "skips_producer_state_load",
    "snapshot_bytes",
    "stray_snapshot_offsets",
    "write_snapshot",
]

logger = logging.getLogger(__name__)

PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT_MAX = (1 << 31) - 1
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")          # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")    # 46 bytes
_CRC_FROM = 6                                   # the CRC covers everything after itself


class AppendOrigin:
    """Who appends (Kafka's ``AppendOrigin``): sequences are checked for clients only,
    epochs for clients and coordinators; replication (a follower, recovery) checks
    nothing and only records."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``."""
    if sequence < decrement:
        return _INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata(NamedTuple):
    """One appended data batch of a producer (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset`` (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerBatch(NamedTuple):
    """What producer state needs of a v2 batch that carries a producer id."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    # a control batch's marker: (type, coordinator epoch, record timestamp); None for a
    # data batch, or a control batch whose record the cleaner removed
    marker: tuple[ControlRecordType, int | None, int] | None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset - self.base_offset)


def producer_batch(header: bytes, read_batch_bytes: Callable[[], bytes],
                   path: str | None = None) -> ProducerBatch | None:
    """The :class:`ProducerBatch` of the v2 batch whose first 61 bytes are ``header``
    (None when it has no producer id). ``read_batch_bytes()`` gives the whole batch; it
    is called for control batches only (their marker is in the record)."""
    # (the fields unpacked straight into locals, not read through a BatchHeader: this runs
    # twice per idempotent append, and the accessor object would nearly double its cost)
    (base, _length, _ple, magic, _crc, attrs, lod, _bts, max_ts, pid, epoch, seq,
     _count) = V2_HEADER.unpack_from(header)
    if magic < 2 or pid < 0:
        return None
    marker = None
    control = bool(attrs & CONTROL_MASK)
    if control:
        try:
            found = control_marker(read_batch_bytes())
        except CorruptRecordError as exc:
            if exc.offset is None:
                exc.offset = base
            raise exc.with_context(path=path) from None
        if found is not None:
            marker = (found[0].type, found[0].coordinator_epoch, found[1])
    return ProducerBatch(pid, epoch, seq, base, base + lod, max_ts,
                         bool(attrs & TRANSACTIONAL_MASK), control, marker)


class ProducerStateEntry:
    """The state of one producer id (Kafka's ``ProducerStateEntry``)."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = -1,
                 current_txn_first_offset: int | None = None,
                 batch_metadata: Iterable[BatchMetadata] = ()) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batch_metadata)

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch="
                f"{self.producer_epoch}, current_txn_first_offset="
                f"{self.current_txn_first_offset}, coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, batch_metadata="
                f"{list(self.batch_metadata)})")

    def __eq__(self, other) -> bool:
        return isinstance(other, ProducerStateEntry) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
            if name != "batch_metadata") and list(self.batch_metadata) == list(
            other.batch_metadata)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return NO_SEQUENCE if not self.batch_metadata else self.batch_metadata[0].first_seq

    @property
    def last_seq(self) -> int:
        return NO_SEQUENCE if not self.batch_metadata else self.batch_metadata[-1].last_seq

    @property
    def last_data_offset(self) -> int:
        return -1 if not self.batch_metadata else self.batch_metadata[-1].last_offset

    @property
    def last_offset_delta(self) -> int:
        return 0 if not self.batch_metadata else self.batch_metadata[-1].offset_delta

    def copy_without_batches(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, epoch: int, coordinator_epoch: int, last_timestamp: int,
               batches: Iterable[BatchMetadata] = (),
               current_txn_first_offset: int | None = None) -> None:
        self.maybe_update_producer_epoch(epoch)
        for batch in batches:
            self._add_batch_metadata(batch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset
        self.last_timestamp = last_timestamp

    def update_from(self, entry: ProducerStateEntry) -> None:
        self.update(entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp,
                    entry.batch_metadata, entry.current_txn_first_offset)

    def find_duplicate_batch(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The cached batch with ``batch``'s epoch and exact sequence range (a retry)."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        for meta in self.batch_metadata:
            # (the last sequence first: it differs for all but a retry, and is a field)
            if meta.last_seq == last and meta.first_seq == first:
                return meta
        return None


class _InSequence(NamedTuple):
    """What :class:`ProducerAppendInfo` makes of a data batch that simply follows its
    producer's last one (see :meth:`ProducerStateManager.in_sequence`): the metadata
    ``entry`` gains, and its new last timestamp, ``metadata.timestamp``."""

    producer_id: int
    entry: ProducerStateEntry
    metadata: BatchMetadata
    started_transactions: tuple = ()


class ProducerAppendInfo:
    """The changes one append makes to one producer, checked before anything is written
    (Kafka's ``ProducerAppendInfo``). :meth:`ProducerStateManager.update` applies them."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: str,
                 path: str | None = None) -> None:
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.path = path
        self.updated = current.copy_without_batches()
        self.started_transactions: list[int] = []   # first offsets

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (f"Epoch of producer {self.producer_id} at offset {offset} in "
                       f"{self.path} is {epoch}, which is smaller than the last seen epoch "
                       f"{self.updated.producer_epoch}")
            if self.origin == AppendOrigin.REPLICATION:
                logger.warning(message)
            else:
                raise InvalidProducerEpochError(message, offset=offset, path=self.path,
                                                producer_id=self.producer_id)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated, self.current
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.path}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {updated.producer_epoch} (current producer "
                    f"epoch)", offset=offset, path=self.path, producer_id=self.producer_id)
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # no epoch known (all of the producer's records went to retention or
        # DeleteRecords): any sequence is accepted
        if not (current.producer_epoch == NO_PRODUCER_EPOCH
                or first_seq == last_seq + 1 or (first_seq == 0 and last_seq == _INT_MAX)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.path}: {first_seq} (incoming seq. number), "
                f"{last_seq} (current end sequence number)", offset=offset, path=self.path,
                producer_id=self.producer_id)

    def append(self, batch: ProducerBatch) -> CompletedTxn | None:
        """Check and record one batch of this producer; a marker that ends a transaction
        with data returns it."""
        if batch.is_control:
            if batch.marker is None:
                return None   # the cleaner removed the marker's record: nothing to end
            ctype, coordinator_epoch, timestamp = batch.marker
            return self.append_end_txn_marker(ctype, coordinator_epoch or 0,
                                              batch.producer_epoch, batch.base_offset,
                                              timestamp)
        self.append_data_batch(batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                               batch.max_timestamp, batch.base_offset, batch.last_offset,
                               batch.is_transactional)
        return None

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, transactional: bool) -> None:
        self._check_producer_epoch(epoch, first_offset)   # (replication: a warning only)
        if self.origin == AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if updated.current_txn_first_offset is not None and not transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.path}", offset=first_offset,
                path=self.path, producer_id=self.producer_id)
        if updated.current_txn_first_offset is None and transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(self, control_type, coordinator_epoch: int, epoch: int,
                              offset: int, timestamp: int) -> CompletedTxn | None:
        self._check_producer_epoch(epoch, offset)
        updated = self.updated
        if updated.coordinator_epoch > coordinator_epoch:
            if self.origin == AppendOrigin.REPLICATION:
                logger.info("Detected invalid coordinator epoch for producerId %d at offset "
                            "%d in partition %s: %d is older than previously known "
                            "coordinator epoch %d", self.producer_id, offset, self.path,
                            coordinator_epoch, updated.coordinator_epoch)
            else:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producerId {self.producer_id} at offset "
                    f"{offset} in partition {self.path}: {coordinator_epoch} (zombie), "
                    f"{updated.coordinator_epoch} (current)", offset=offset, path=self.path,
                    producer_id=self.producer_id)
        # only a transaction with data changes the LSO and the .txnindex
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, updated.current_txn_first_offset,
                                     offset, control_type == ControlRecordType.ABORT)
        updated.update(epoch, coordinator_epoch, timestamp)
        return completed


# -- snapshot files ---------------------------------------------------------------------


def snapshot_file(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{PRODUCER_SNAPSHOT_FILE_SUFFIX}")


_JAVA_HASHMAP_INITIAL_CAPACITY = 16


def _java_hashmap_capacity(size: int, capacity: int = _JAVA_HASHMAP_INITIAL_CAPACITY) -> int:
    """The table size of a ``java.util.HashMap`` of table ``capacity`` after it grew to
    hold ``size`` keys: it doubles whenever the size passes 3/4 of it (``putVal``:
    ``++size > threshold`` -> ``resize()``) and never shrinks."""
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def _java_hashmap_order(pids: list[int], capacity: int | None = None) -> list[int]:
    """``pids`` (insertion order) in the order a ``java.util.HashMap<Long, _>`` of table
    size ``capacity`` (default: the least that holds them, a map that never shrank)
    iterates: by bucket, then insertion order within the bucket (a resize keeps it)."""
    capacity = _java_hashmap_capacity(len(pids), capacity or _JAVA_HASHMAP_INITIAL_CAPACITY)

    def bucket(pid: int) -> int:
        v = pid & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(pids, key=bucket)   # (sorted is stable)


def stray_snapshot_offsets(snapshot_offsets: Iterable[int],
                           segment_base_offsets: Iterable[int]) -> list[int]:
    """The snapshots Kafka's ``removeStraySnapshots`` deletes when a log opens, oldest
    first: every one at no segment base, except the largest such one when it lies at or
    above every base (the one a clean shutdown wrote at the log end offset)."""
    bases = set(segment_base_offsets)
    strays = [offset for offset in sorted(snapshot_offsets) if offset not in bases]
    if strays and (not bases or strays[-1] >= max(bases)):
        strays.pop()
    return strays


def skips_producer_state_load(latest_snapshot_offset: int | None,
                              had_clean_shutdown: bool) -> bool:
    """Whether opening a log builds its producer state from nothing at all: no snapshot
    file, and a clean last shutdown (a directory from before producer state was kept,
    Kafka's "upgrade" case). The state is then empty at the log end offset, no batch is
    replayed, and there is no open transaction (the LSO is the log end offset).

    Kafka: ``UnifiedLog.rebuildProducerState`` (``!latestSnapshotOffset().isPresent() &&
    reloadFromCleanShutdown``). One rule for :class:`~kafkastore.log.Log`'s open
    (:func:`kafkastore.log_loader.rebuild_producer_state`) and for
    :class:`~kafkastore.log_view.ReadOnlyLog`'s LSO, so the two never disagree."""
    return latest_snapshot_offset is None and had_clean_shutdown


def snapshot_bytes(entries: Iterable[ProducerStateEntry], capacity: int | None = None) -> bytes:
    """The bytes of a version-1 snapshot of ``entries`` (in the order they were put in
    the map), as Kafka writes a ``HashMap`` of table size ``capacity`` holding them
    (default: the least that holds them)."""
    entries = list(entries)
    by_pid = {e.producer_id: e for e in entries}
    body = bytearray()
    for pid in _java_hashmap_order(list(by_pid), capacity):
        e = by_pid[pid]
        body += _SNAPSHOT_ENTRY.pack(
            pid, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
            e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
    out = bytearray(_SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, 0, len(by_pid))) + body
    struct.pack_into(">I", out, 2, crc32c.crc32c(memoryview(out)[_CRC_FROM:]))
    return bytes(out)


def parse_snapshot(data, path: str | None = None) -> list[ProducerStateEntry]:
    """The entries of a snapshot file's bytes (Kafka's ``readSnapshot``); a bad version,
    a short body or a CRC mismatch raises :class:`CorruptSnapshotError` with Kafka's
    message (Java's ``null`` where its reader runs out of bytes)."""
    data = bytes(data)

    def schema(reason: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"Snapshot failed schema validation: {reason}", path=path)

    if len(data) < 2:
        raise schema("null")
    version = struct.unpack_from(">h", data)[0]
    if version != _SNAPSHOT_VERSION:
        # (Kafka's own check sits inside the try that rewraps it)
        raise schema(f"Snapshot contained an unknown file version {version}")
    if len(data) < _SNAPSHOT_HEAD.size:
        raise schema("null")
    _, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    remaining = len(data) - _SNAPSHOT_HEAD.size
    if count < 0:
        raise schema("non-nullable field producerEntries was serialized as null")
    if count > remaining:
        raise schema(f"Tried to allocate a collection of size {count}, but there are only "
                     f"{remaining} bytes remaining.")
    if count * _SNAPSHOT_ENTRY.size > remaining:
        raise schema("null")
    computed = crc32c.crc32c(data[_CRC_FROM:])
    if crc != computed:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored "
                                   f"crc: {crc}. Computed crc: {computed}", path=path)
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first) = _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size
                                                  + i * _SNAPSHOT_ENTRY.size)
        batches = [BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] \
            if last_offset >= 0 else []
        entries.append(ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp,
                                          txn_first if txn_first >= 0 else None, batches))
    return entries


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    data = _fileio.read_file(path)
    if data is None:
        raise FileNotFoundError(path)
    return parse_snapshot(data, path)


def write_snapshot(path: str, entries: Iterable[ProducerStateEntry], sync: bool,
                   capacity: int | None = None) -> None:
    """Write a snapshot file (``capacity``: as :func:`snapshot_bytes`). Kafka writes it
    in place, not through a rename: a torn file fails its CRC on load and an older
    snapshot is used instead."""
    fd = _fileio.open_to_rewrite(path)
    try:
        _fileio.write_fully(fd, snapshot_bytes(entries, capacity))
        if sync:
            _fileio.fs.fsync(fd)
    finally:
        _fileio.fs.close(fd)


def list_snapshot_offsets(names: Iterable[str]) -> list[int]:
    """The offsets of the snapshot file names among ``names``, sorted."""
    out = []
    for name in names:
        if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
            stem = name[:-len(PRODUCER_SNAPSHOT_FILE_SUFFIX)]
            if stem.isdigit():
                out.append(int(stem))
    return sorted(out)


# -- the manager ------------------------------------------------------------------------


class ProducerStateManager:
    """Kafka's ``ProducerStateManager`` for one partition directory (see the module
    docstring). The high watermark is the log end offset here (one replica), so a
    completed transaction is never "unreplicated": it leaves the open set at once."""

    def __init__(self, directory: str, producer_id_expiration_ms: int = 86_400_000,
                 time_ms: Callable[[], int] | None = None, *,
                 snapshot_offsets: Iterable[int] | None = None) -> None:
        self.dir = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._time_ms = time_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # the table size of Kafka's producers HashMap: grown with the map, never shrunk
        # (the snapshot's entry order follows it; Kafka's map is one final HashMap that
        # clear() empties in place)
        self._table_capacity = _JAVA_HASHMAP_INITIAL_CAPACITY
        self._ongoing: dict[int, int] = {}          # first offset -> producer id
        self._first_unstable: int | None = None
        self._snapshots: list[int] = []             # sorted offsets
        self.last_map_offset = 0
        self.last_snap_offset = 0
        if snapshot_offsets is None:
            self._load_snapshots()
        else:   # the caller's listing of the directory (a log's open lists it once)
            self._snapshots = sorted(snapshot_offsets)

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.dir!r}, producers={len(self.producers)}, "
                f"ongoing={sorted(self._ongoing)}, map_end={self.last_map_offset})")

    # -- snapshot files ----------------------------------------------------------------

    def _load_snapshots(self) -> None:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            names = []
        self._snapshots = [o for o in list_snapshot_offsets(names)
                           if os.path.isfile(snapshot_file(self.dir, o))]

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        i = bisect.bisect_left(self._snapshots, offset)
        if i < len(self._snapshots) and self._snapshots[i] == offset:
            del self._snapshots[i]
            _fileio.fs.unlink(snapshot_file(self.dir, offset))

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """Rename the snapshot at ``offset`` to ``.deleted`` (its segment was removed);
        the new path, for the caller's delayed deletion, or None."""
        i = bisect.bisect_left(self._snapshots, offset)
        if i < len(self._snapshots) and self._snapshots[i] == offset:
            del self._snapshots[i]
            path = snapshot_file(self.dir, offset)
            try:
                _fileio.fs.rename(path, path + ".deleted")
            except FileNotFoundError:
                return None
            return path + ".deleted"
        return None

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int], *,
                               reload: bool = True) -> None:
        """Kafka's ``removeStraySnapshots``: delete snapshots that match no segment base,
        except the largest stray one if it lies above every base (the one a clean shutdown
        wrote at the log end offset). ``reload``: list the directory first (Kafka does;
        not needed when nothing else wrote snapshots since this manager listed them)."""
        if reload:
            self._load_snapshots()
        for offset in stray_snapshot_offsets(self._snapshots, segment_base_offsets):
            self._remove_and_delete_snapshot(offset)

    def take_snapshot(self, sync: bool = True) -> str | None:
        """Write ``<map end offset>.snapshot`` if the map moved since the last one."""
        if self.last_map_offset <= self.last_snap_offset:
            return None
        path = snapshot_file(self.dir, self.last_map_offset)
        write_snapshot(path, self.producers.values(), sync, self._table_capacity)
        if self.last_map_offset not in self._snapshots:
            bisect.insort(self._snapshots, self.last_map_offset)
        self.last_snap_offset = self.last_map_offset
        return path

    def flush_snapshot(self, offset: int) -> None:
        """fsync the snapshot at ``offset`` (Kafka's ``flushProducerStateSnapshot``)."""
        path = snapshot_file(self.dir, offset)
        try:
            fd = _fileio.fs.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            _fileio.fs.fsync(fd)
        finally:
            _fileio.fs.close(fd)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [s for s in self._snapshots if s < offset]:
            self._remove_and_delete_snapshot(snap)

    # -- loading -----------------------------------------------------------------------

    def _is_expired(self, now: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now - entry.last_timestamp >= self.producer_id_expiration_ms)

    def _now(self) -> int:
        return self._time_ms() if self._time_ms is not None else time.time_ns() // 1_000_000

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._first_unstable = None

    def _put_producer(self, producer_id: int, entry: ProducerStateEntry) -> None:
        """``producers.put``, with Java's table growth (see ``_table_capacity``)."""
        producers = self.producers
        producers[producer_id] = entry
        if len(producers) > self._table_capacity * 3 // 4:
            self._table_capacity = _java_hashmap_capacity(len(producers), self._table_capacity)

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._put_producer(entry.producer_id, entry)
        if entry.current_txn_first_offset is not None:
            self._ongoing[entry.current_txn_first_offset] = entry.producer_id
            self._refresh_first_unstable()

    def _load_from_snapshot(self, log_start_offset: int, now: int) -> None:
        while self._snapshots:
            offset = self._snapshots[-1]
            path = snapshot_file(self.dir, offset)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, FileNotFoundError) as exc:
                logger.warning("Failed to load producer snapshot from '%s': %s", path, exc)
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now, entry):
                    self.load_producer_entry(entry)
            self.last_snap_offset = self.last_map_offset = offset
            return
        self.last_snap_offset = self.last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now: int | None = None) -> None:
        """Drop snapshots outside ``(log_start_offset, log_end_offset]`` and, unless the
        map already ends at ``log_end_offset``, reload from the latest one left."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self.last_map_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, self._now() if now is None else now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        for snap in list(self._snapshots):
            self._remove_and_delete_snapshot(snap)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self.last_map_offset < log_start_offset:
            self.last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self.last_snap_offset = log_start_offset if latest is None else latest

    def remove_expired_producers(self, now: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` with no open
        transaction; returns how many."""
        now = self._now() if now is None else now
        gone = [pid for pid, e in self.producers.items() if self._is_expired(now, e)]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -- appending ---------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.dir)

    def in_sequence(self, producer_id: int, epoch: int, first_seq: int, first_offset: int,
                    last_offset: int, max_timestamp: int, transactional: bool) -> list | None:
        """``analyze([batch], "client")[0]`` for an idempotent producer's usual batch, in
        a few field reads: a non-transactional data batch of a known producer, outside a
        transaction, in its current epoch, whose first sequence follows the last one
        without wrapping, and that retries none of the cached batches. None for every
        other batch, which :meth:`duplicate_of` and :meth:`analyze` then decide (retries,
        gaps, new producers or epochs, fencing, transactions: all their errors).

        For such a batch Kafka's ``ProducerAppendInfo.appendDataBatch`` passes its epoch and
        sequence checks and adds one ``BatchMetadata``, and ``ProducerStateEntry.update``
        then changes nothing else of the entry but its last timestamp; :meth:`update` applies
        exactly that."""
        if transactional:
            return None
        entry = self.producers.get(producer_id)
        if (entry is None or entry.producer_epoch != epoch
                or entry.current_txn_first_offset is not None):
            return None
        cached = entry.batch_metadata
        delta = last_offset - first_offset
        if (not cached or first_seq != cached[-1].last_seq + 1
                or first_seq > _INT_MAX - delta):
            return None
        last_seq = first_seq + delta
        for meta in cached:
            if meta.last_seq == last_seq:   # maybe a retry: find_duplicate_batch decides
                return None
        return [(_InSequence(producer_id, entry,
                             BatchMetadata(last_seq, last_offset, delta, max_timestamp)), None)]

    def update(self, info: ProducerAppendInfo) -> None:
        if type(info) is _InSequence:
            # (the entry's update_from of a copy with this one batch: see in_sequence)
            entry = info.entry
            entry._add_batch_metadata(info.metadata)
            entry.last_timestamp = info.metadata.timestamp
            return
        if info.producer_id == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {info.producer_id} passed to update for "
                             f"partition {self.dir}")
        current = self.producers.get(info.producer_id)
        if current is not None:
            current.update_from(info.updated)
        else:
            self._put_producer(info.producer_id, info.updated)
        for first in info.started_transactions:
            self._ongoing[first] = info.producer_id
        if info.started_transactions:
            self._refresh_first_unstable()

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    @property
    def map_end_offset(self) -> int:
        return self.last_map_offset

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO right after ``completed``'s marker: the first offset of the oldest open
        transaction of another producer, else the marker's offset + 1."""
        for first in sorted(self._ongoing):
            if self._ongoing[first] != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self._ongoing.pop(completed.first_offset, None) is None:
            raise ValueError(f"Attempted to complete transaction {completed} on partition "
                             f"{self.dir} which was not started")
        self._refresh_first_unstable()

    def _refresh_first_unstable(self) -> None:
        self._first_unstable = min(self._ongoing) if self._ongoing else None

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: all decided)."""
        return self._first_unstable

    # -- an append's checks (Kafka's analyzeAndValidateProducerState) ------------------

    def duplicate_of(self, batch: ProducerBatch, shadow: dict | None = None
                     ) -> BatchMetadata | None:
        """The metadata of the batch that data batch ``batch`` retries, or None."""
        entry = self._current(batch.producer_id, shadow)
        return None if entry is None else entry.find_duplicate_batch(batch)

    def _current(self, pid: int, shadow: dict | None) -> ProducerStateEntry | None:
        """The producer's entry as the earlier produces of a call (``shadow``) or the
        state leave it."""
        return (shadow.get(pid) if shadow else None) or self.producers.get(pid)

    def analyze(self, batches: list[ProducerBatch], origin: str,
                shadow: dict | None = None) -> list:
        """Check ``batches`` (one produce each, none a retry: see :meth:`duplicate_of`) in
        order, each seeing the ones before it (``shadow``: producer id -> the entry they
        leave); nothing is applied. Per batch the ``[(append info, completed transaction
        or None)]`` to give :meth:`apply` once it is written. Raises the append's error
        (out-of-order sequence, fenced epoch, ...)."""
        track = shadow is not None or len(batches) > 1
        shadow = {} if shadow is None else shadow
        out: list = []
        for batch in batches:
            pid = batch.producer_id
            current = self._current(pid, shadow) or ProducerStateEntry(pid)
            info = ProducerAppendInfo(pid, current, origin, self.dir)
            completed = info.append(batch)
            out.append([(info, completed)])
            if not track:
                continue   # (one batch, no caller to see the state it leaves)
            after = ProducerStateEntry(pid, current.producer_epoch, current.coordinator_epoch,
                                       current.last_timestamp, current.current_txn_first_offset,
                                       current.batch_metadata)
            after.update_from(info.updated)
            shadow[pid] = after
        return out

    def replication_updates(self, view, positions, sizes) -> list | None:
        """The updates of a follower's v2 batches at ``positions`` of ``view``
        (replication: recorded, not checked), one append info per producer as in Kafka's
        ``updateProducers``; None when no batch has a producer id."""
        infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for pos, size in zip(positions, sizes):
            if INT64.unpack_from(view, pos + PRODUCER_ID_OFFSET)[0] < 0:
                continue
            batch = producer_batch(view[pos:pos + RECORD_BATCH_OVERHEAD],
                                   lambda p=pos, n=size: bytes(view[p:p + n]), self.dir)
            info = infos.get(batch.producer_id)
            if info is None:
                info = infos[batch.producer_id] = self.prepare_update(
                    batch.producer_id, AppendOrigin.REPLICATION)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        if not infos:
            return None
        return [(info, None) for info in infos.values()] + [(None, t) for t in completed]

    def apply(self, updates, on_completed: Callable[[CompletedTxn, int], None]) -> None:
        """Kafka's step after ``LogSegment.append``: :meth:`record_updates`, then
        :meth:`complete_txns`."""
        self.record_updates(updates)
        self.complete_txns(updates, on_completed)

    def record_updates(self, updates) -> None:
        """Apply the append infos of :meth:`analyze` / :meth:`replication_updates`
        (Kafka's ``producerStateManager.update`` per producer of the append): the
        transactions they begin become unstable here."""
        for info, _completed in updates:
            if info is not None:
                self.update(info)

    def complete_txns(self, updates, on_completed: Callable[[CompletedTxn, int], None]
                      ) -> None:
        """Complete each transaction a marker of ``updates`` ended,
        ``on_completed(txn, lso)`` first (the segment writes an aborted one's
        ``.txnindex`` entry)."""
        for _info, completed in updates:
            if completed is not None:
                on_completed(completed, self.last_stable_offset(completed))
                self.complete_txn(completed)

    # -- replay ------------------------------------------------------------------------

    def apply_batches(self, batches: Iterable[ProducerBatch],
                      on_completed: Callable[[CompletedTxn, int], None] | None = None,
                      origin: str = AppendOrigin.REPLICATION) -> None:
        """Replay batches already in the log, one at a time (Kafka's
        ``LogSegment.updateProducerState``); ``on_completed(txn, lso)`` sees every
        completed transaction (the segment writes the aborted ones to its txn index)."""
        on_completed = on_completed or (lambda _txn, _lso: None)
        for batch in batches:
            info = self.prepare_update(batch.producer_id, origin)
            self.apply([(info, info.append(batch))], on_completed)
            self.update_map_end_offset(batch.last_offset + 1)


def iter_producer_batches(walk: Iterator, read: Callable[[int, int], bytes],
                          path: str | None = None) -> Iterator[ProducerBatch]:
    """The :class:`ProducerBatch` of each v2 batch with a producer id of a file walk
    (``FileRecords.walk_headers``: ``(header, first bytes)`` pairs); ``read(position,
    size)`` reads a control batch whole."""
    for header, raw in walk:
        if header.magic < 2 or len(raw) < RECORD_BATCH_OVERHEAD:
            continue
        batch = producer_batch(raw, lambda h=header: read(h.position, h.size), path)
        if batch is not None:
            yield batch
