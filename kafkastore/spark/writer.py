"""The Spark sink: tasks stage encoded batches, the driver's commit appends them.

File layout (all inside the log directory, all ignored by Kafka, which loads only
the *files* of a partition directory and only the *directories* of a log
directory):

* ``<topic>-<p>/.kafkastore-staging/<job>/<task>.log``: a task's batches for one
  partition, v2 batches with offsets relative to the file (a broker's producer
  request, in effect); not fsynced: the commit checks its size and every CRC;
* ``.kafkastore-commit-<job>.json``: the commit journal, present only while a
  commit runs: the log end offset of every partition before the commit, and the
  streaming batch id;
* ``.kafkastore-sinks.json``: the last committed batch id of each streaming sink.

Protocol. Tasks never touch a log. The driver's commit takes the log directory's
lock (a :class:`~kafkastore.manager.LogManager`), rolls back any journal a crashed
commit left, writes its own journal, appends each partition's staged files in task
order (offsets assigned there by patching each batch's base offset, which lies
outside its CRC, as a broker does), flushes, records the batch id, then deletes the
journal: that deletion is the commit point. An abort, a failed task or a killed
one leaves only staging files, which are never visible to readers and are removed
by the abort or, if a task outlived it, by the next write's sweep.

So a batch write is all or nothing, and a streaming sink is exactly once: a
micro-batch whose id is already recorded is skipped after a restart.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kafkastore import _fileio
from kafkastore.checkpoint import write_atomically
from kafkastore.errors import ConfigError, KafkaStoreError, LogDirectoryLockedError
from kafkastore.file_records import read_chunks
from kafkastore.log_dir import log_dir_name
from kafkastore.spark.layout import STAGING_DIR, list_partitions
from kafkastore.spark.options import NO_SINK_ID, WriteOptions
from kafkastore.spark.reader import headers_type
from kafkastore.topic import TopicPartition, validate_topic

__all__ = ["StagedCommit", "TaskStager", "commit_job", "abort_job", "sweep_staging",
           "new_job_id", "SINKS_FILE", "JOURNAL_PREFIX"]

JOURNAL_PREFIX = ".kafkastore-commit-"
ABORTED_PREFIX = ".kafkastore-aborted-"
SINKS_FILE = ".kafkastore-sinks.json"


def _aborted(root: str, job: str) -> bool:
    return os.path.exists(os.path.join(root, ABORTED_PREFIX + job))


def new_job_id() -> str:
    return uuid.uuid4().hex


@dataclass
class StagedCommit:
    """What a task reports: per partition its staged file and what is in it."""

    task: int
    attempt: int
    files: dict = field(default_factory=dict)        # (topic, p) -> (path, records, bytes)
    partitions: dict = field(default_factory=dict)   # topic -> partition count used


def _staging_dir(root: str, topic: str, partition: int, job: str) -> str:
    return os.path.join(root, log_dir_name(TopicPartition(topic, partition)), STAGING_DIR, job)


def partition_count(root: str, topic: str, wanted: int | None) -> int:
    """The partitions ``topic`` has (or gets): the ``partitions`` option, else the
    existing topic's count, else 1. A topic is never shrunk."""
    existing = 0
    if os.path.isdir(root):
        existing = max((tp.partition + 1 for tp, _ in list_partitions(root)
                        if tp.topic == topic), default=0)
    if wanted is not None:
        if wanted < existing:
            raise ConfigError(f"Topic {topic} has {existing} partitions; the partitions "
                              f"option asks for {wanted}, and Kafka never removes "
                              f"partitions")
        return wanted
    return existing or 1


# -- task side -------------------------------------------------------------------------


def _binary_parts(pa, arr, what: str):
    """``(offsets, data, valid)`` numpy views of an Arrow binary/string array."""
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        dtype = np.int64
    elif pa.types.is_binary(arr.type) or pa.types.is_string(arr.type):
        dtype = np.int32
    else:
        raise ConfigError(f"{what} attribute type must be a string or binary, not "
                          f"{arr.type}")
    bufs = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(bufs[1], dtype=dtype, count=n + 1, offset=arr.offset * dtype().itemsize)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and n else \
        np.empty(0, np.uint8)
    valid = None if arr.null_count == 0 else np.asarray(arr.is_valid())
    return offsets, data, valid


def _groups(parts: np.ndarray, rows: np.ndarray | None, count: int):
    """``(partition, row indices in order)`` for each partition the rows go to."""
    selected = parts if rows is None else parts[rows]
    base = None if rows is None else rows
    if count <= 64:
        # a pass per partition beats a sort at Spark's 10,000-row batches
        hist = np.bincount(selected, minlength=count)
        for p in np.flatnonzero(hist).tolist():
            idx = np.flatnonzero(selected == p)
            yield p, (idx if base is None else base[idx]).astype(np.int64, copy=False)
        return
    order = np.argsort(selected, kind="stable")
    sorted_parts = selected[order]
    cuts = np.flatnonzero(np.diff(sorted_parts)) + 1
    for chunk in np.split(order, cuts):
        if len(chunk):
            yield int(selected[chunk[0]]), \
                (chunk if base is None else base[chunk]).astype(np.int64, copy=False)


class TaskStager:
    """One write task's staging: rows in, one staged file per partition out.

    Columns, as Spark's Kafka sink takes them: ``value`` (string or binary,
    required), ``key`` (string or binary), ``topic`` (string; the ``topic`` option
    overrides it), ``partition`` (int; null or absent: Kafka's default partitioner,
    murmur2 of the key, round-robin for null keys), ``headers``
    (``array<struct<key:string,value:binary>>``) and, beyond Spark's sink,
    ``timestamp`` (timestamp or epoch-ms long; absent or null: now).
    """

    def __init__(self, opts: WriteOptions, job: str, task: int, attempt: int,
                 tag: str) -> None:
        self.opts = opts
        self.job = job
        self.task = task
        self.attempt = attempt
        self.tag = tag
        self._files: dict[tuple[str, int], list] = {}   # tp -> [path, fd, records, bytes]
        self._counts: dict[str, int] = {}
        self._robin = task
        self._codec = None if opts.compression == "producer" else opts.compression

    def _count(self, topic: str) -> int:
        n = self._counts.get(topic)
        if n is None:
            validate_topic(topic)
            n = self._counts[topic] = partition_count(self.opts.path, topic,
                                                      self.opts.partitions)
        return n

    def add(self, batch) -> None:
        """Stage one ``pyarrow.RecordBatch``."""
        import pyarrow as pa

        from kafkastore._kernels import murmur2
        from kafkastore.records import encode_columns

        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names
        if "value" not in names:
            raise ConfigError("Required attribute 'value' not found")
        values = _binary_parts(pa, batch.column("value"), "value")
        keys = _binary_parts(pa, batch.column("key"), "key") if "key" in names else None
        headers = None
        if "headers" in names:
            headers = self._headers(pa, batch.column("headers"))
        timestamps = None
        now = time.time_ns() // 1_000_000
        if "timestamp" in names:
            timestamps = self._timestamps(pa, batch.column("timestamp"), now)
        # topics
        if self.opts.topic is not None:
            groups = [(self.opts.topic, None)]
        elif "topic" not in names:
            raise ConfigError("topic option required when no 'topic' attribute is present. "
                              "Use the topic option for setting a topic.")
        else:
            col = batch.column("topic")
            if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                raise ConfigError(f"Topic type must be a string, not {col.type}")
            if col.null_count:
                raise ConfigError("Null topic present in the data. Use the topic option "
                                  "for setting a topic.")
            enc = col.dictionary_encode()
            idx = np.asarray(enc.indices)
            groups = [(t, np.flatnonzero(idx == i)) for i, t in
                      enumerate(enc.dictionary.to_pylist())]
        part_col = None
        if "partition" in names:
            col = batch.column("partition")
            if not pa.types.is_integer(col.type):
                raise ConfigError(f"Partition type must be an int, not {col.type}")
            part_col = np.asarray(col.fill_null(-1).cast(pa.int64()))
        hashed_by_count: dict[int, np.ndarray] = {}   # topics of one count share the hash
        for topic, rows in groups:
            count = self._count(topic)
            parts = np.full(n, -1, dtype=np.int64)
            if part_col is not None:
                parts[:] = part_col
                given = parts >= 0
                bad = given & (parts >= count)
                if bad.any():
                    raise ConfigError(f"Partition {int(parts[np.flatnonzero(bad)[0]])} of "
                                      f"topic {topic} does not exist: it has {count} "
                                      f"partitions (set the partitions option to add some)")
            need = parts < 0
            if rows is not None:
                mask = np.zeros(n, dtype=bool)
                mask[rows] = True
                need &= mask
            if need.any():
                if keys is not None:
                    hashed = hashed_by_count.get(count)
                    if hashed is None:
                        hashed = hashed_by_count[count] = murmur2.partitions(
                            (keys[0], keys[1]), count).astype(np.int64)
                    keyed = need if keys[2] is None else need & keys[2]
                    parts[keyed] = hashed[keyed]
                    need &= ~keyed
                k = int(np.count_nonzero(need))
                if k:   # null keys spread evenly, starting where this task's turn is
                    parts[need] = (np.arange(self._robin, self._robin + k) % count)
                    self._robin += k
            for p, chunk in _groups(parts, rows, count):
                data = encode_columns(
                    keys, values, rows=chunk, timestamps=timestamps,
                    headers=headers, default_timestamp=now, compression=self._codec,
                    max_batch_records=self.opts.batch_records,
                    max_batch_bytes=self.opts.batch_bytes, first_offset=None)
                self._write(topic, p, data, len(chunk))

    @staticmethod
    def _headers(pa, col):
        want = headers_type()
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)) \
                or not pa.types.is_struct(col.type.value_type):
            raise ConfigError(f"Headers type must be {want}, not {col.type}")
        if col.null_count:
            col = col.fill_null(pa.scalar([], type=col.type))
        struct = col.flatten()
        if struct.null_count:
            raise ConfigError("A header (a key and value pair) is null")
        names = [struct.type.field(i).name for i in range(struct.type.num_fields)]
        if names != ["key", "value"]:
            raise ConfigError(f"Headers type must be {want}, not {col.type}")
        hkeys = struct.field(0)
        if hkeys.null_count:
            raise ConfigError("A header key is null")
        hk = _binary_parts(pa, hkeys, "header key")
        hv = _binary_parts(pa, struct.field(1), "header value")
        list_offsets = np.asarray(col.offsets)
        list_offsets = list_offsets - list_offsets[0]
        return (list_offsets, hk[0], hk[1], hv[0], hv[1], hv[2])

    @staticmethod
    def _timestamps(pa, col, now: int):
        if pa.types.is_timestamp(col.type):
            us = col.cast(pa.timestamp("us", tz=col.type.tz)).cast(pa.int64())
            ms = np.asarray(us.fill_null(now * 1000)) // 1000
        elif pa.types.is_integer(col.type):
            ms = np.asarray(col.cast(pa.int64()).fill_null(now))
        else:
            raise ConfigError(f"Timestamp type must be a timestamp or a long (epoch "
                              f"milliseconds), not {col.type}")
        return np.ascontiguousarray(ms, dtype=np.int64)

    def _write(self, topic: str, partition: int, data: bytes, records: int) -> None:
        entry = self._files.get((topic, partition))
        if entry is None:
            directory = _staging_dir(self.opts.path, topic, partition, self.job)
            _fileio.makedirs(directory)
            path = os.path.join(directory, f"{self.tag}.log")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            entry = self._files[(topic, partition)] = [path, fd, 0, 0]
        view = memoryview(data)
        while view:
            view = view[os.write(entry[1], view):]
        entry[2] += records
        entry[3] += len(data)

    def finish(self) -> StagedCommit:
        """Close every staged file; what the task reports to the driver.

        No fsync: the driver's commit checks each staged file's size and every
        batch's CRC before appending, and fsyncs the logs; a staged file lost to a
        crash fails the commit (and so the job) instead of losing data."""
        files = {}
        try:
            for tp, (path, _fd, records, size) in self._files.items():
                files[tp] = (path, records, size)
        finally:
            self.close()
        if _aborted(self.opts.path, self.job):
            # the job failed while this task ran: what it staged would outlive the abort
            self.discard()
            raise KafkaStoreError(f"Write job {self.job} was aborted while this task ran; "
                                  f"its staged batches were removed")
        return StagedCommit(self.task, self.attempt, files, dict(self._counts))

    def close(self) -> None:
        for entry in self._files.values():
            if entry[1] >= 0:
                os.close(entry[1])
                entry[1] = -1

    def discard(self) -> None:
        """Close and delete what this task staged (it failed, or its job was aborted)."""
        self.close()
        for entry in self._files.values():
            try:
                os.unlink(entry[0])
            except FileNotFoundError:
                pass
            job_dir = os.path.dirname(entry[0])
            staging = os.path.dirname(job_dir)
            try:
                os.rmdir(job_dir)
            except OSError:
                continue   # other tasks' files are still there
            _prune(staging, os.path.dirname(staging))


# -- driver side -----------------------------------------------------------------------


def _manager(opts: WriteOptions):
    """A LogManager on the log directory (its lock held), waiting for another writer's
    commit up to ``lockTimeoutMs``."""
    from kafkastore.manager import LogManager

    deadline = time.monotonic() + opts.lock_timeout_ms / 1000
    delay = 0.01
    while True:
        try:
            return LogManager(opts.path, background=False)
        except LogDirectoryLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _read_json(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read() or b"{}")
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise KafkaStoreError(f"{path} is not valid JSON: {exc}", path=path) from None
    if not isinstance(obj, dict):
        raise KafkaStoreError(f"{path} does not hold a JSON object", path=path)
    return obj


def committed_batch(root: str, sink_id: str) -> int | None:
    """The last micro-batch id the streaming sink ``sink_id`` committed, or None."""
    value = _read_json(os.path.join(root, SINKS_FILE)).get(sink_id)
    return None if value is None else int(value)


def _recover_journals(root: str, manager, keep: str | None = None) -> None:
    """Roll back the commits a crashed driver left half done."""
    for name in sorted(os.listdir(root)):
        if not (name.startswith(JOURNAL_PREFIX) and name.endswith(".json")):
            continue
        path = os.path.join(root, name)
        journal = _read_json(path)
        job = journal.get("job", "")
        if job == keep:
            continue
        sink, batch_id = journal.get("sink"), journal.get("batch")
        finished = sink is not None and batch_id is not None and \
            (committed_batch(root, sink) or -1) >= batch_id
        if not finished:
            for topic, parts in journal.get("leo", {}).items():
                for part, leo in parts.items():
                    log = manager.get(topic, int(part))
                    if log is not None and log.log_end_offset > leo:
                        log.truncate_to(int(leo))
                        log.flush()
        _remove_job_staging(root, job)
        os.unlink(path)


def commit_job(opts: WriteOptions, job: str, messages: Sequence[StagedCommit | None],
               batch_id: int | None = None) -> dict[TopicPartition, tuple[int, int]]:
    """Append every staged file of ``messages`` to its log; return ``{tp: (first, last)}``.

    Files are appended partition by partition, in task order then the order each
    task wrote. With ``batch_id`` (a streaming sink) a micro-batch the sink already
    committed is skipped. See the module docstring for the protocol.
    """
    root = opts.path
    staged = sorted((m for m in messages if m is not None), key=lambda m: m.task)
    per_tp: dict[tuple[str, int], list] = {}
    counts: dict[str, int] = {}
    for m in staged:
        for tp, info in m.files.items():
            per_tp.setdefault(tuple(tp), []).append(info)
        for topic, c in m.partitions.items():
            counts[topic] = max(counts.get(topic, 0), c)
    sink = opts.sink_id if batch_id is not None else None
    if batch_id is not None and sink is None:
        raise ConfigError(NO_SINK_ID)
    _fileio.makedirs(root)
    result = {}
    manager = _manager(opts)
    try:
        _recover_journals(root, manager, keep=job)
        if sink is not None:
            last = committed_batch(root, sink)
            if last is not None and batch_id <= last:
                return {}   # a replay after a restart: already in the logs
        for topic, c in sorted(counts.items()):
            for p in range(c):
                manager.get_or_create(topic, p, opts.topic_config or None)
        logs = {tp: manager.get_or_create(tp[0], tp[1], opts.topic_config or None)
                for tp in sorted(per_tp)}
        journal = {"job": job, "sink": sink, "batch": batch_id, "leo": {}}
        for (topic, p), log in logs.items():
            journal["leo"].setdefault(topic, {})[str(p)] = log.log_end_offset
        journal_path = os.path.join(root, f"{JOURNAL_PREFIX}{job}.json")
        write_atomically(journal_path, json.dumps(journal).encode())
        for tp, log in logs.items():
            first = log.log_end_offset
            for path, records, size in per_tp[tp]:
                _append_file(log, path, records, size)
            log.flush()
            result[TopicPartition(*tp)] = (first, log.log_end_offset - 1)
        if sink is not None:
            sinks = _read_json(os.path.join(root, SINKS_FILE))
            sinks[sink] = batch_id
            write_atomically(os.path.join(root, SINKS_FILE),
                             json.dumps(sinks, sort_keys=True).encode())
        os.unlink(journal_path)   # the commit point
        _fileio.fs.fsync_dir(root)
    finally:
        manager.close()
    _remove_job_staging(root, job)
    return result


def _append_file(log, path: str, records: int, size: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        actual = os.fstat(fd).st_size
        if actual != size:
            raise KafkaStoreError(f"Staged file {path} holds {actual} bytes, the task wrote "
                                  f"{size}", path=path)
        appended = 0
        covered = 0

        def read(position: int, n: int) -> bytes:
            return os.pread(fd, n, position)

        for _pos, data, scan in read_chunks(read, 0, size, 16 << 20, validate=False):
            if scan.error is not None:
                raise scan.error.with_context(path=path, position_base=_pos)
            info = log.append_batches(memoryview(data)[:scan.valid_bytes])
            appended += info.last_offset - info.first_offset + 1
            covered += scan.valid_bytes
        if covered != size or appended != records:
            raise KafkaStoreError(f"Staged file {path} is damaged: {covered} of {size} "
                                  f"bytes and {appended} of {records} records readable",
                                  path=path)
    finally:
        os.close(fd)


def _remove_job_staging(root: str, job: str) -> None:
    for _tp, path in list_partitions(root):
        staging = os.path.join(path, STAGING_DIR)
        target = os.path.join(staging, job)
        if os.path.isdir(target):
            shutil.rmtree(target, ignore_errors=True)
        _prune(staging, path)


def _prune(staging: str, partition_dir: str) -> None:
    """Remove an empty staging directory, and a partition directory that only a write
    task made (nothing but staging in it: no log was ever created there)."""
    try:
        os.rmdir(staging)
    except OSError:
        return
    try:
        os.rmdir(partition_dir)
    except OSError:
        pass


def abort_job(opts: WriteOptions, job: str,
              messages: Iterable[StagedCommit | None] = ()) -> None:
    """Delete everything the job staged (failed and killed tasks included).

    Leaves an ``.kafkastore-aborted-<job>`` marker so that a task still running
    discards its files when it ends; the sweep removes markers and any leftovers
    once they are older than ``stagingTtlMs``."""
    if not os.path.isdir(opts.path):
        return   # nothing was ever staged there
    write_atomically(os.path.join(opts.path, ABORTED_PREFIX + job), b"")
    for m in messages:
        if m is not None:
            for path, _records, _size in m.files.values():
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
    _remove_job_staging(opts.path, job)


def sweep_staging(root: str, ttl_ms: int, *, now: float | None = None) -> list[str]:
    """Remove staging left by jobs idle for longer than ``ttl_ms`` (a task killed after
    its job aborted, a driver that died); return what was removed."""
    now = time.time() if now is None else now
    removed = []
    if not os.path.isdir(root):
        return removed
    for name in os.listdir(root):
        if name.startswith(ABORTED_PREFIX):
            path = os.path.join(root, name)
            try:
                if (now - os.stat(path).st_mtime) * 1000 > ttl_ms:
                    os.unlink(path)
                    removed.append(path)
            except FileNotFoundError:
                pass
    for _tp, path in list_partitions(root):
        staging = os.path.join(path, STAGING_DIR)
        try:
            jobs = list(os.scandir(staging))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in jobs:
            newest = entry.stat().st_mtime
            if entry.is_dir():
                for f in os.scandir(entry.path):
                    newest = max(newest, f.stat().st_mtime)
            if (now - newest) * 1000 > ttl_ms:
                if entry.is_dir():
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
        _prune(staging, path)
    return removed
