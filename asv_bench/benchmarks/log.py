"""The Log: append, append of ready batches, random reads and recovery, beside their baselines.

The workload, the baselines (``naive_aiokafka``, ``file_write``, ``pread``, ``crc32c``)
and the operations are :mod:`kafkastore.bench.log`, whose docstring describes each; the
``impl`` parameter of the classes below names them.

``../compare_log.py`` prints the ratio table against the issue's bars.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile

from kafkastore.bench.log import (
    NaiveAiokafkaLog,
    append_batches_kafkastore,
    append_file_write,
    append_kafkastore,
    append_naive_aiokafka,
    append_records,
    build_segmented_log,
    chunks,
    log_config,
    ready_batches,
)

from . import BASE_TIMESTAMP, make_workload

__all__ = [
    "NaiveAiokafkaLog", "append_batches_kafkastore", "append_file_write", "append_kafkastore",
    "append_naive_aiokafka", "append_records", "build_segmented_log", "chunks", "log_config",
    "ready_batches",
]

N_RECORDS = 100_000


# -- asv -------------------------------------------------------------------------------------


class _LogBenchmark:
    number = 1
    repeat = (3, 10, 60.0)
    timeout = 300

    def _dir(self):
        self.tmp = tempfile.mkdtemp(prefix="ks-bench-")
        return self.tmp

    def teardown(self, *args):
        shutil.rmtree(getattr(self, "tmp", ""), ignore_errors=True)


def _require_peer(impl):
    if impl == "naive_aiokafka":
        try:
            import aiokafka.record._crecords  # noqa: F401
        except ImportError as exc:
            raise NotImplementedError(f"aiokafka's Cython codec is missing: {exc}") from exc


class LogAppend(_LogBenchmark):
    """Append the workload ``per_append`` records at a time (opening, closing and the
    final fsync happen in setup and teardown, untimed: see ``LogAppendWithFsync``)."""

    params = (["kafkastore", "naive_aiokafka"], [100, 1000])
    param_names = ["impl", "per_append"]

    def setup(self, impl, per_append):
        _require_peer(impl)
        keys, values = make_workload(N_RECORDS)
        self.batches = chunks(keys, values, per_append)
        directory = self._dir()
        if impl == "kafkastore":
            from kafkastore.log import Log

            self.log = Log.open(directory, log_config())
        else:
            self.log = NaiveAiokafkaLog(directory)

    def teardown(self, impl, per_append):
        self.log.close()
        super().teardown()

    def time_append(self, impl, per_append):
        if impl == "kafkastore":
            append_records(self.log, self.batches)
        else:
            self.log.append_records(self.batches)


class LogAppendPerCall(_LogBenchmark):
    """10,000 appends of one record each, with and without a producer id: the per-call
    work of ``Log.append`` (roll check, index rule, producer state) outweighs the encode
    and the write here (issue 31's append row moved it out of a dozen small calls)."""

    params = (["none", "idempotent"],)
    param_names = ["producer"]

    def setup(self, producer):
        from kafkastore.log import Log

        keys, values = make_workload(10_000)
        self.records = [[kv] for kv in zip(keys, values)]
        self.log = Log.open(self._dir(), log_config())

    def teardown(self, producer):
        self.log.close()
        super().teardown()

    def time_append(self, producer):
        append, ts = self.log.append, BASE_TIMESTAMP
        if producer == "none":
            for i, recs in enumerate(self.records):
                append(recs, timestamp=ts + i)
        else:
            for i, recs in enumerate(self.records):
                append(recs, timestamp=ts + i, producer_id=1, producer_epoch=0,
                       base_sequence=i)


class LogRollCheck(_LogBenchmark):
    """10,000 ``LogSegment.needs_roll`` calls on an active segment that need no roll: the
    check every append makes (Kafka's ``shouldRoll``; issue 36 gave each of its rules one
    home, called from it)."""

    def setup(self):
        from kafkastore.log import Log

        keys, values = make_workload(1_000)
        self.log = Log.open(self._dir(), log_config())
        for i, recs in enumerate(chunks(keys, values, 100)):
            self.log.append(recs, timestamp=BASE_TIMESTAMP + i)
        self.segment = self.log.segments[-1]
        self.size = sum(len(k) + len(v) for k, v in zip(keys[:100], values[:100]))

    def teardown(self):
        self.log.close()
        super().teardown()

    def time_needs_roll(self):
        needs_roll, size, ts = self.segment.needs_roll, self.size, BASE_TIMESTAMP + 10
        for i in range(10_000):
            needs_roll(size, ts, 1_000 + i, ts, 1 << 30, 7 * 24 * 3600 * 1000)


class LogAppendWithFsync(_LogBenchmark):
    """:class:`LogAppend` from opening a fresh log to closing it, the final fsync included."""

    params = LogAppend.params
    param_names = LogAppend.param_names

    def setup(self, impl, per_append):
        _require_peer(impl)
        keys, values = make_workload(N_RECORDS)
        self.batches = chunks(keys, values, per_append)

    def time_append(self, impl, per_append):
        directory = tempfile.mkdtemp(prefix="ks-bench-", dir=getattr(self, "tmp", None))
        try:
            if impl == "kafkastore":
                append_kafkastore(directory, self.batches)
            else:
                append_naive_aiokafka(directory, self.batches)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


class LogAppendBatches(_LogBenchmark):
    """Append ready batches (offsets assigned by patching) vs plain ``file.write``."""

    params = (["kafkastore", "file_write"], [100, 1000])
    param_names = ["impl", "per_append"]

    def setup(self, impl, per_append):
        keys, values = make_workload(N_RECORDS)
        self.ready = ready_batches(keys, values, per_append)

    def time_append_batches(self, impl, per_append):
        directory = tempfile.mkdtemp(prefix="ks-bench-")
        try:
            if impl == "kafkastore":
                append_batches_kafkastore(directory, self.ready)
            else:
                append_file_write(directory, self.ready)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


class LogRandomRead(_LogBenchmark):
    """One random single-offset read from a 10-segment log vs one ``os.pread``."""

    number = 2000
    repeat = (3, 10, 20.0)
    params = (["kafkastore", "pread"],)
    param_names = ["impl"]

    def setup(self, impl):
        from kafkastore.log import Log

        keys, values = make_workload(N_RECORDS)
        directory = self._dir()
        config = build_segmented_log(directory, keys, values)
        self.log = Log.open(directory, config)
        self.rng = random.Random(0)
        self.end = self.log.log_end_offset
        self.size = self.log.read(0, 1).size   # one batch
        # the same spread of the page cache as the reads: any segment of the log
        self.files = [(s.log.fileno(), s.size - self.size) for s in self.log.segments
                      if s.size > self.size]

    def teardown(self, impl):
        self.log.close()
        super().teardown()

    def time_read(self, impl):
        if impl == "kafkastore":
            self.log.read(self.rng.randrange(self.end), self.size, False).to_bytes()
        else:
            fd, limit = self.files[self.rng.randrange(len(self.files))]
            os.pread(fd, self.size, self.rng.randrange(limit))


class LogReadKernel(LogRandomRead):
    """The layers of a random read (issue 31): ``Log.read`` whole, the one kernel call it
    makes (``entry_walk.read_at``: segment choice, index lookup, header check, slice),
    ``LogSegment.read`` (``entry_walk.read_segment``) and the lookup alone
    (``entry_walk.locate_read``), each with the pread of the batch it finds."""

    params = (["log_read", "read_at", "segment_read", "locate_read"],)

    def setup(self, impl):
        super().setup("kafkastore")
        import bisect

        from kafkastore import _fileio, segment
        from kafkastore._kernels import entry_walk

        local = self.log._local
        self.offsets = [self.rng.randrange(self.end) for _ in range(4096)]
        self.i = 0
        size, fs, plan = self.size, _fileio.fs, segment.READ_PLAN
        segments, bases = local.segments, local.bases

        def seg_of(o):
            return segments[bisect.bisect_right(bases, o) - 1]

        def locate(o):
            seg = seg_of(o)
            index = seg.offset_index
            entry_walk.locate_read(index._view, index.entries, seg.base_offset, o, os.pread,
                                   seg.log.fileno(), seg.size, size)

        self.op = {
            "log_read": lambda o: self.log.read(o, size, False),
            "read_at": lambda o: entry_walk.read_at(segments, bases, o, size, False, fs, plan),
            "segment_read": lambda o: seg_of(o).read(o, size),
            "locate_read": locate,
        }[impl]

    def teardown(self, impl):
        super().teardown("kafkastore")

    def time_read(self, impl):
        self.i = (self.i + 1) & 4095
        self.op(self.offsets[self.i])


class LogReadCommitted(LogRandomRead):
    """A random read with ``isolation_level="read_committed"`` (issue 31), beside the same
    read uncommitted: on the log of :class:`LogRandomRead` (no transaction), and on one
    where every tenth batch is a transaction of one of five producers, aborted
    (``aborted``: each read collects the aborted transactions in its range)."""

    params = (["read_uncommitted", "read_committed", "read_committed_aborted"],)

    def setup(self, impl):
        from kafkastore.log import Log

        if impl != "read_committed_aborted":
            super().setup("kafkastore")
        else:
            keys, values = make_workload(N_RECORDS)
            directory = self._dir()
            config = log_config(**{"segment.bytes": N_RECORDS * 126 // 10})
            log = Log.open(directory, config)
            seqs = [0] * 6
            for i, recs in enumerate(chunks(keys, values, 100)):
                if i % 10 == 5:
                    pid = 1 + i % 5
                    log.append(recs, timestamp=BASE_TIMESTAMP + i, producer_id=pid,
                               producer_epoch=0, base_sequence=seqs[pid],
                               is_transactional=True)
                    seqs[pid] += len(recs)
                    log.append_end_txn_marker(pid, 0, "ABORT")
                else:
                    log.append(recs, timestamp=BASE_TIMESTAMP + i)
            log.close()
            self.log = Log.open(directory, config)
            self.rng = random.Random(0)
            self.end = self.log.log_end_offset
            self.size = self.log.read(0, 1).size
        self.isolation = "read_uncommitted" if impl == "read_uncommitted" else "read_committed"
        self.offsets = [self.rng.randrange(self.end) for _ in range(4096)]
        self.i = 0

    def teardown(self, impl):
        super().teardown("kafkastore")

    def time_read(self, impl):
        self.i = (self.i + 1) & 4095
        self.log.read(self.offsets[self.i], self.size, False, self.isolation).to_bytes()


class LogReadLeftovers(_LogBenchmark):
    """The read path's leftovers (m36-read), each small:

    * ``committed_beside_aborts``: a read_committed read of a 10-segment log right after
      another log's abort (before m36-read every log's cache of which segments hold
      aborted transactions was dropped by any log's change); ``abort_only`` is that
      abort alone, the part to take away;
    * ``declined_read``: a random read with a sparse index (an entry every 64 KiB), which
      the kernel declines and the general path serves;
    * ``first_committed_fetch``: the first read_committed read of a freshly opened log of
      10 segments, half with aborted transactions, from its eighth segment (one sample,
      one fresh open each: ``number`` is 1)."""

    params = (["committed_beside_aborts", "abort_only", "declined_read",
               "first_committed_fetch"],)
    param_names = ["case"]
    number = 1
    repeat = (10, 40, 30.0)

    def setup(self, case):
        from kafkastore.config import LogConfig
        from kafkastore.log import Log

        directory = self._dir()
        rng = random.Random(0)
        self.i = 0
        if case == "declined_read":
            config = LogConfig.from_dict({"segment.bytes": 1 << 20,
                                          "index.interval.bytes": 64 << 10})
            self.log = Log.open(os.path.join(directory, "s-0"), config)
            while len(self.log.segments) < 4:
                self.log.append([(b"k%d" % i, b"v" * 100) for i in range(20)],
                                timestamp=BASE_TIMESTAMP)
            self.offsets = [rng.randrange(self.log.log_end_offset) for _ in range(4096)]
            self.op = lambda o: self.log.read(o, 100, True)
            return
        config = LogConfig.from_dict({"segment.bytes": 20_000})
        path = os.path.join(directory, "a-0")
        log = Log.open(path, config)
        seq = 0
        while len(log.segments) < 10:
            log.append([(b"k", b"v" * 100)] * 10, timestamp=BASE_TIMESTAMP)
            if len(log.segments) % 2 == 0:
                log.append([(b"t", b"x")], timestamp=BASE_TIMESTAMP, producer_id=3,
                           producer_epoch=0, base_sequence=seq, is_transactional=True)
                seq += 1
                log.append_end_txn_marker(3, 0, "ABORT")
        log.close()
        self.log = Log.open(path, config)
        if case == "first_committed_fetch":
            offset = self.log.segments[7].base_offset + 1
            self.op = lambda o: self.log.read(offset, 1000, False, "read_committed")
            self.offsets = [0] * 4096
            return
        other = self.other = Log.open(os.path.join(directory, "b-0"), config)
        self.offsets = [rng.randrange(self.log.log_end_offset) for _ in range(4096)]
        sequence = [0]

        def abort():
            other.append([(b"t", b"x")], timestamp=BASE_TIMESTAMP, producer_id=9,
                         producer_epoch=0, base_sequence=sequence[0], is_transactional=True)
            sequence[0] += 1
            other.append_end_txn_marker(9, 0, "ABORT")

        if case == "abort_only":
            self.op = lambda o: abort()
        else:
            self.op = lambda o: (abort(), self.log.read(o, 1000, False, "read_committed"))

    def teardown(self, case):
        for log in (getattr(self, "log", None), getattr(self, "other", None)):
            if log is not None:
                log.close()
        super().teardown(case)

    def time_read(self, case):
        self.i = (self.i + 1) & 4095
        self.op(self.offsets[self.i])


class LogRecovery(_LogBenchmark):
    """Rebuild the indexes of a segment from its ``.log`` (CRC scan) vs ``crc32c`` of its bytes."""

    params = (["kafkastore", "crc32c"],)
    param_names = ["impl"]

    def setup(self, impl):
        from kafkastore.log import Log

        keys, values = make_workload(N_RECORDS)
        directory = self._dir()
        log = Log.open(directory, log_config())
        self._fill(log, keys, values)
        log.close()
        self.log = Log.open(directory)
        self.segment = self.log.segments[0]
        self.data = self.segment.log.read(0, self.segment.size)

    def _fill(self, log, keys, values):
        for i, recs in enumerate(chunks(keys, values, 100)):
            log.append(recs, timestamp=BASE_TIMESTAMP + i)

    def teardown(self, impl):
        self.log.close()
        super().teardown()

    def time_recover(self, impl):
        if impl == "kafkastore":
            self.segment.recover()
        else:
            import crc32c

            crc32c.crc32c(self.data)


class LogRecoverySmallBatches(LogRecovery):
    """Recovery of a segment of one-record batches (100,000 of them: an index entry every
    few batches), where the index rebuild is most of the work beside the CRCs; vs
    ``crc32c`` of its bytes."""

    def _fill(self, log, keys, values):
        batches = ready_batches(keys, values, 1)
        for i in range(0, len(batches), 1000):
            log.append_batches(b"".join(batches[i:i + 1000]))


class LogCleanOpen(_LogBenchmark):
    """``Log.open`` + ``close`` of a cleanly closed log (one active segment of 100,000
    records) vs an ``os.scandir`` of its directory: the clean open's cost beside the
    listing it cannot avoid (the loader's check of the active segment's tail, the walk
    of ``read_next_offset`` and the producer state at the end)."""

    params = (["kafkastore", "scandir"],)
    param_names = ["impl"]

    def setup(self, impl):
        from kafkastore.log import Log

        keys, values = make_workload(N_RECORDS)
        self.directory = self._dir()
        log = Log.open(self.directory, log_config())
        for i, recs in enumerate(chunks(keys, values, 100)):
            log.append(recs, timestamp=BASE_TIMESTAMP + i)
        log.close()

    def time_open(self, impl):
        if impl == "kafkastore":
            from kafkastore.log import Log

            Log.open(self.directory, log_config()).close()
        else:
            with os.scandir(self.directory) as listing:
                for _entry in listing:
                    pass
