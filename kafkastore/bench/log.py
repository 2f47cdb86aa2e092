"""The Log workloads: append, append of ready batches, random reads and recovery, and the
baselines they are measured against.

Workload: the records workload of :mod:`kafkastore.bench.workload` (16-byte keys,
100-byte JSON-like values), appended ``per_append`` records at a time.

Baselines, measured in the same process on the same data:

``naive_aiokafka``
    a "log" made of aiokafka's Cython ``DefaultRecordBatchBuilder`` and one
    ``file.write`` per batch: no index, no offsets kept, no roll (the peer for
    ``Log.append``), :class:`NaiveAiokafkaLog`.
``file_write``
    plain sequential ``file.write`` of the same ready batch bytes (the peer for
    ``Log.append_batches``).
``pread``
    one ``os.pread`` of the same size at a random place in a random segment of the same
    log (the peer for a random single-offset ``Log.read``).
``crc32c``
    ``crc32c.crc32c`` over the same bytes in memory (the peer for recovery).

Used by the asv classes (``asv_bench/benchmarks/log.py``), ``asv_bench/compare_log.py``
and ``kafkastore bench``.
"""

from __future__ import annotations

import os
import time

from kafkastore.bench.workload import BASE_TIMESTAMP


def log_config(**extra):
    from kafkastore.config import LogConfig

    return LogConfig.from_dict(extra)


def chunks(keys, values, per_append):
    return [list(zip(keys[i:i + per_append], values[i:i + per_append]))
            for i in range(0, len(keys), per_append)]


def ready_batches(keys, values, per_append):
    """The workload as ready v2 batches (base offset 0, as a producer sends them)."""
    from kafkastore.records import encode_batch

    return [encode_batch(c, timestamp=BASE_TIMESTAMP + i)
            for i, c in enumerate(chunks(keys, values, per_append))]


def append_kafkastore(directory, batches, config=None):
    """Open a log, append ``batches`` (lists of records), close it (fsync).

    Returns the seconds spent in the append calls alone (the bar's "records/s of
    ``Log.append``"); the caller times the whole, opening and the final fsync included.
    """
    from kafkastore.log import Log

    log = Log.open(directory, config or log_config())
    try:
        return append_records(log, batches)
    finally:
        log.close()


def append_records(log, batches) -> float:
    """``log.append`` of each list in ``batches``; the seconds it took."""
    append = log.append
    t0 = time.perf_counter()
    for i, recs in enumerate(batches):
        append(recs, timestamp=BASE_TIMESTAMP + i)
    return time.perf_counter() - t0


class NaiveAiokafkaLog:
    """The issue's peer for ``Log.append``: aiokafka's Cython ``DefaultRecordBatchBuilder``
    and one ``file.write`` per batch into one file; no index, no offsets kept, no roll.
    ``close`` fsyncs, as ``Log.close`` does."""

    def __init__(self, directory):
        from aiokafka.record._crecords import DefaultRecordBatchBuilder

        self._builder = DefaultRecordBatchBuilder
        self._file = open(os.path.join(directory, "naive.log"), "wb")

    def append_records(self, batches) -> float:
        builder_cls, write = self._builder, self._file.write
        t0 = time.perf_counter()
        for i, recs in enumerate(batches):
            builder = builder_cls(
                magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            ts = BASE_TIMESTAMP + i
            for j, (k, v) in enumerate(recs):
                builder.append(j, timestamp=ts, key=k, value=v, headers=[])
            write(builder.build())
        return time.perf_counter() - t0

    def close(self):
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()


def append_naive_aiokafka(directory, batches):
    """:func:`append_kafkastore` for :class:`NaiveAiokafkaLog`."""
    log = NaiveAiokafkaLog(directory)
    try:
        return log.append_records(batches)
    finally:
        log.close()


def append_batches_kafkastore(directory, ready, config=None):
    from kafkastore.log import Log

    log = Log.open(directory, config or log_config())
    try:
        for data in ready:
            log.append_batches(data)
    finally:
        log.close()


def append_file_write(directory, ready):
    with open(os.path.join(directory, "plain.log"), "wb") as f:
        for data in ready:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def build_segmented_log(directory, keys, values, per_append=100, segments=10):
    """A closed log of ``segments`` segments holding the workload; returns its batch size."""
    from kafkastore.log import Log

    batches = chunks(keys, values, per_append)
    total = sum(len(k) + len(v) + 10 for k, v in zip(keys, values))
    config = log_config(**{"segment.bytes": max(total // segments, 4096)})
    log = Log.open(directory, config)
    for i, recs in enumerate(batches):
        log.append(recs, timestamp=BASE_TIMESTAMP + i)
    log.close()
    return config
