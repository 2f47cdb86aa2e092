"""``kafkastore bench``: the asv suite's standard workloads, kafkastore beside its peers.

:func:`run_suite` runs each workload at a chosen size in this process, kafkastore and each
peer (or baseline) of that workload alternating rep by rep, and returns one
:class:`Comparison` per pair: best time of each side and the ratio
``peer time / kafkastore time`` (above 1: kafkastore is faster). A peer that is not
installed gives a comparison with ``skipped`` set to the reason, never a number.

The workloads are the asv suite's (``asv_bench/benchmarks``), from the same code
(:mod:`kafkastore.bench.workload`, ``.log``, ``.index``, ``.cleaner``):

======== ============================================= ====================================
name     kafkastore                                    measured against
======== ============================================= ====================================
encode   ``encode_batch``, 1000 records a batch         aiokafka_c, kafka_python builders
decode   ``iter_batches`` to record objects, CRC        aiokafka_c, kafka_python, each also
         checked                                        checking every batch's CRC
columns  ``decode_columns(copy=False)`` (numpy views   aiokafka_c decoding to objects, CRC
         into the blob), CRC checked
scan     ``scan_batches(validate=True)``                aiokafka_c / kafka_python
                                                        ``validate_crc()`` walk; raw crc32c
index    1000 ``OffsetIndex.lookup`` in a full 10 MiB   numpy ``searchsorted`` on a view of
         index                                          the same map
append   ``Log.append``, 100 records a call             aiokafka_c builder + ``file.write``
read     one random-offset ``Log.read``, 10 segments    ``os.pread`` of the same size
recovery ``LogSegment.recover`` of one segment          crc32c over its bytes
clean    ``cleaner.clean`` (n records, n/10 keys)       naive aiokafka_c compactor
tiered   a tiered copy's ``records()``, ``columns()``,  the same segments as a local log
         random ``read()``; zstd and AES-GCM copies'    directory; ``zstandard`` /
         ``columns()`` and raw segment read             ``AESGCM`` alone on the same chunks
server   ``kafkastore serve`` with confluent-kafka:     ``Log.append_batches`` of the same
         produce (acks=all), fetch from offset 0        batches; ``read`` + ``sendfile``
                                                        to a socket (ratio: the server's
                                                        speed as a fraction of the
                                                        library's); the server's CPU s/GB
                                                        and the 1-record produce p50/p99
                                                        in the variant
         a 5-member consumer group's forming and a      (groups: none, the times are the
         6th member's rebalance, one consumer's         row); transactions: the same
         synchronous commits; transactions of 100       records produced without
         records by one producer                        transactions
======== ============================================= ====================================

Beside each ratio stands the same work's physical limit on this machine, where one exists
(:data:`LIMITS`), measured in the same run on the same bytes, alternating with kafkastore
and the peers rep by rep: ``of limit`` is ``limit time / kafkastore time``, how close
kafkastore comes to the machine (1: at the limit; a row that did less than the limit's
work could exceed it). Which limit goes with which row:

========================== ==================== =============================================
row                        limit                the limit's work
========================== ==================== =============================================
scan                       crc32c               CRC-32C over the batch bytes
columns (uncompressed)     crc32c               CRC-32C over the batch bytes (the view
                                                layout copies no key or value: CRC and one
                                                varint walk)
decode (uncompressed)      crc32c+memcpy        CRC-32C over the batch bytes and one copy of
                                                as many bytes as the keys and values hold
                                                (record objects copy them) into memory
                                                mapped beforehand
append                     write(2)             one ``os.write`` per append call of that
                                                call's encoded batch (Kafka's one write a
                                                call), to a fresh file in the same directory
read                       pread                one ``os.pread`` of the same size per read
                                                (the ``os.pread`` peer's work)
recovery                   crc32c               CRC-32C over the segment's bytes
clean                      crc32c+write(2)      CRC-32C over the bytes the cleaner retained
                                                and one ``os.write`` of them
========================== ==================== =============================================

The other rows show ``-``: encode, index, tiered and server have no single physical
operation bounding them, and decode/columns of compressed batches are bounded by the
codec's decompressor, not by the machine.

This is the quick side-by-side look at a size of the user's choosing, in one process.
For numbers against the issue's bars use ``asv_bench/compare_peers.py`` (a fresh
interpreter per cell), ``asv_bench/compare_log.py`` and ``asv_bench/compare_tiered.py``
(which adds the bytes fetched per query); for history, asv. Only ratios
from one run mean anything: absolute times drift between runs on a shared machine.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = ["WORKLOADS", "CODECS", "PER_CODEC", "LIMITS", "Comparison", "compare",
           "count_steps", "run_suite", "environment", "format_table", "crc_limit",
           "memcpy_limit", "write_limit", "pread_limit", "chained", "format_limits"]

#: The workloads, in the order they run.
WORKLOADS = ("encode", "decode", "columns", "scan", "index", "append", "read", "recovery",
             "clean", "tiered", "server")
#: Codecs the record workloads run with (any of none, gzip, snappy, lz4, zstd).
CODECS = ("none", "lz4", "zstd")
#: The workloads that run once per codec.
PER_CODEC = ("encode", "decode", "columns")
#: A rep of a sub-millisecond operation repeats it until it lasts this long.
MIN_REP_S = 0.05
#: The physical limits a row is set beside (the table's ``limit`` column): what each is.
LIMITS = {
    "crc32c": "raw CRC-32C (crc32c.crc32c, the library's call) over the same bytes",
    "crc32c+memcpy": "raw CRC-32C over the batch bytes, then one copy of as many bytes as "
                     "the keys and values hold (into memory mapped beforehand)",
    "write(2)": "one os.write per append call of the same encoded batch, to a fresh file",
    "pread": "one os.pread of the same size per read",
    "crc32c+write(2)": "raw CRC-32C over the bytes the cleaner retained, then one os.write "
                       "of them to a fresh file",
}


@dataclass(frozen=True)
class Comparison:
    """kafkastore against one peer on one workload, best of the reps.

    ``ratio`` is ``peer_s / kafkastore_s``: above 1 kafkastore is faster. ``unit`` and
    ``count`` describe one timed call (``count`` records, lookups or bytes), so a rate
    can be derived. ``skipped`` is why the peer did not run (it is not installed).
    ``limit`` names the work's physical limit (a key of :data:`LIMITS`) and ``limit_s``
    is its best time, measured beside kafkastore's; ``of_limit`` is
    ``limit_s / kafkastore_s`` (1: kafkastore is at the limit). Both are ``None`` where
    the row has no limit.
    """

    workload: str
    variant: str
    peer: str
    kafkastore_s: float
    peer_s: float | None
    count: int
    unit: str
    skipped: str | None = None
    limit: str | None = None
    limit_s: float | None = None

    @property
    def ratio(self) -> float | None:
        return _over(self.peer_s, self.kafkastore_s)

    @property
    def of_limit(self) -> float | None:
        return _over(self.limit_s, self.kafkastore_s)

    def as_dict(self) -> dict:
        return {"workload": self.workload, "variant": self.variant, "peer": self.peer,
                "kafkastore_s": self.kafkastore_s, "peer_s": self.peer_s,
                "ratio": self.ratio, "count": self.count, "unit": self.unit,
                "skipped": self.skipped, "limit": self.limit, "limit_s": self.limit_s,
                "of_limit": self.of_limit}


def _over(other_s: float | None, kafkastore_s: float) -> float | None:
    """``other_s / kafkastore_s``, or ``None`` when either is missing (or not a time)."""
    if other_s is None or not kafkastore_s > 0:
        return None
    return other_s / kafkastore_s


# A timer is a zero-argument callable returning the seconds of one measured run: most
# wrap a plain call (_timed); stateful workloads (append, clean) set up a fresh log
# themselves, untimed, and return the time of the part that is measured.
Timer = Callable[[], float]


def _timed(fn: Callable[[], object], loops: int = 1) -> Timer:
    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        return (time.perf_counter() - t0) / loops
    return run


def _calibrated(fn: Callable[[], object]) -> Timer:
    """``fn`` repeated enough times a rep to last :data:`MIN_REP_S` (one untimed warm-up
    call measures it)."""
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    return _timed(fn, max(1, int(MIN_REP_S / once)))


def _best(timers: dict[str, Timer], reps: int) -> dict[str, float]:
    """Best seconds of each timer over ``reps`` rounds, the timers alternating within a
    round so that drift in the machine's load hits them alike."""
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(reps):
        for name, timer in timers.items():
            gc.collect()
            best[name] = min(best[name], timer())
    return best


# the key of the limit's timer among the peers' (a peer's name never starts with a NUL)
_LIMIT = "\0limit"


def compare(workload: str, variant: str, ours: Timer, peers: dict[str, Callable[[], Timer]],
            count: int, unit: str, reps: int,
            limit: tuple[str, Callable[[], Timer] | str] | None = None) -> list[Comparison]:
    """``ours`` against each of ``peers``, best of ``reps`` alternating rounds: one
    :class:`Comparison` per peer. A peer is a maker of its timer, called once; one that
    raises ``NotImplementedError`` (the peer is missing) gives a skipped comparison.
    ``limit`` is ``(name, maker)`` of the work's physical limit (a key of
    :data:`LIMITS`), timed in the same rounds as ``ours`` and the peers; a peer's name
    in place of the maker when the limit is that peer's own work (timed once, not twice)."""
    if limit is not None and limit[0] not in LIMITS:
        raise ValueError(f"unknown limit {limit[0]!r}; choose from {', '.join(LIMITS)}")
    timers: dict[str, Timer] = {"kafkastore": ours}
    skipped: dict[str, str] = {}
    for name, make in peers.items():
        try:
            timers[name] = make()
        except NotImplementedError as exc:
            skipped[name] = str(exc)
    limit_key = _LIMIT
    if limit is not None:
        if isinstance(limit[1], str):
            limit_key = limit[1]
        else:
            timers[_LIMIT] = limit[1]()
    best = _best(timers, reps)
    return [Comparison(workload, variant, name, best["kafkastore"], best.get(name), count,
                       unit, skipped.get(name), limit[0] if limit else None, best.get(limit_key))
            for name in peers]


# -- the physical limits: each helper returns the work as a zero-argument callable -------------

def crc_limit(data) -> Callable[[], int]:
    """Raw CRC-32C over ``data``: the call the library's CRC checks make
    (``crc32c.crc32c`` over a memoryview, as ``kafkastore.validator`` does)."""
    import crc32c

    view = memoryview(data)
    return lambda: crc32c.crc32c(view)


def memcpy_limit(data, nbytes: int) -> Callable[[], object]:
    """One copy of the first ``nbytes`` of ``data`` into a buffer allocated and faulted in
    beforehand (numpy's copy, a memcpy); the callable returns that buffer. The copy
    alone is the bound: a fresh allocation of a large buffer each time would add page
    faults (and their spread on a shared machine) that the decoders avoid with pooled,
    already-mapped memory."""
    import numpy as np

    if not 0 <= nbytes <= len(data):
        raise ValueError(f"nbytes must be in [0, {len(data)}], not {nbytes}")
    source = np.frombuffer(data, dtype=np.uint8, count=nbytes)
    target = np.zeros_like(source)   # zeros: written once, so every page is mapped

    def run() -> object:
        np.copyto(target, source)
        return target
    return run


def chained(*works: Callable[[], object]) -> Callable[[], None]:
    """One callable doing ``works`` in turn (a limit made of several operations)."""
    def run() -> None:
        for work in works:
            work()
    return run


def write_limit(path: str, chunks: Sequence[bytes], before: Callable[[], object] | None = None
                ) -> Timer:
    """A timer of one ``os.write`` per chunk of ``chunks`` to ``path``, truncated first
    (opening and closing are not timed; no fsync, as the timed part of the log workloads
    has none). ``before`` is timed work done first (a CRC over the bytes)."""
    views = [memoryview(c) for c in chunks]

    def run() -> float:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            t0 = time.perf_counter()
            if before is not None:
                before()
            for view in views:
                while view:   # a regular file takes it whole; a short write continues
                    view = view[os.write(fd, view):]
            return time.perf_counter() - t0
        finally:
            os.close(fd)
    return run


def pread_limit(where: Sequence[tuple[int, int]], size: int) -> Callable[[], None]:
    """One ``os.pread`` of ``size`` bytes at each ``(fd, position)`` of ``where``."""
    def run() -> None:
        for fd, position in where:
            os.pread(fd, size, position)
    return run


def _impl(name: str, op: str, *args, timer=_timed) -> Callable[[], Timer]:
    """A maker of a timer of implementation ``name``'s ``op(*args)``
    (:func:`kafkastore.bench.workload.load_impl`: ``NotImplementedError`` when the
    implementation is not installed, raised when the maker is called)."""
    def make() -> Timer:
        from kafkastore.bench.workload import load_impl

        fn = getattr(load_impl(name), op)
        return timer(lambda: fn(*args))
    return make


class _Run:
    """The state of one :func:`run_suite` call: workload data built once, results."""

    def __init__(self, n: int, reps: int, codecs: Sequence[str], tmp: str,
                 progress: Callable[[str], None] | None) -> None:
        from kafkastore.bench.workload import make_workload

        self.n, self.reps, self.codecs, self.tmp = n, reps, tuple(codecs), tmp
        self.progress = progress or (lambda label: None)
        self.keys, self.values = make_workload(n)
        self.results: list[Comparison] = []
        self._blobs: dict[str, bytes] = {}

    # -- plumbing ---------------------------------------------------------------------------

    def compare(self, workload: str, variant: str, ours: Timer,
                peers: dict[str, Callable[[], Timer]], count: int, unit: str,
                limit: tuple[str, Callable[[], Timer]] | None = None) -> None:
        """:func:`compare`, the comparisons recorded."""
        self.results.extend(compare(workload, variant, ours, peers, count, unit, self.reps,
                                    limit))

    def scratch(self, name: str) -> str:
        path = os.path.join(self.tmp, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    # -- the record workloads ---------------------------------------------------------------

    def blob(self, codec: str) -> bytes:
        """The workload encoded with ``codec`` (once per run: decode, columns and scan
        read the same bytes)."""
        from kafkastore.bench.workload import encode_blob

        if codec not in self._blobs:
            self._blobs[codec] = encode_blob(self.keys, self.values, codec)
        return self._blobs[codec]

    def encode(self) -> None:
        from kafkastore.bench.workload import batch_tuples

        batches = batch_tuples(self.keys, self.values)
        for codec in self.codecs:
            self.progress(f"encode {codec}")
            args = (self.keys, self.values, codec, batches)
            self.compare("encode", codec, _impl("kafkastore", "encode", *args)(),
                         {name: _impl(name, "encode", *args)
                          for name in ("aiokafka_c", "kafka_python")},
                         self.n, "records")

    def decode(self) -> None:
        self._decoders("decode", ("aiokafka_c_crc", "kafka_python_crc"))

    def columns(self) -> None:
        self._decoders("columns", ("aiokafka_c_crc",))

    def _decoders(self, op: str, peers: Sequence[str]) -> None:
        # kafkastore's ``op`` against the peers' decode to record objects (they have no
        # columnar decoder); uncompressed, beside the CRC over the blob, and for decode a
        # copy of the keys and values (record objects copy them; the columns' view layout
        # does not). Compressed rows have no limit: the codec's decompressor bounds them,
        # not the machine.
        for codec in self.codecs:
            self.progress(f"{op} {codec}")
            blob = self.blob(codec)
            limit = None
            if codec == "none" and op == "columns":
                limit = ("crc32c", lambda: _calibrated(crc_limit(blob)))
            elif codec == "none":
                payload = sum(len(k or b"") + len(v or b"")
                              for k, v in zip(self.keys, self.values))
                limit = ("crc32c+memcpy", lambda: _calibrated(
                    chained(crc_limit(blob), memcpy_limit(blob, payload))))
            self.compare(op, codec, _impl("kafkastore", op, blob)(),
                         {name: _impl(name, "decode", blob) for name in peers},
                         self.n, "records", limit)

    def scan(self) -> None:
        self.progress("scan")
        blob = self.blob("none")
        self.compare("scan", "none", _impl("kafkastore", "scan", blob, timer=_calibrated)(),
                     {"aiokafka_c": _impl("aiokafka_c", "scan", blob, timer=_calibrated),
                      "kafka_python": _impl("kafka_python", "scan", blob, timer=_calibrated),
                      "crc32c (raw)": lambda: _calibrated(crc_limit(blob))},
                     len(blob), "bytes", ("crc32c", "crc32c (raw)"))

    # -- the index, log and cleaner workloads -----------------------------------------------

    def index(self) -> None:
        from kafkastore.bench.index import (
            INDEX_FILE,
            N_TARGETS,
            lookup_all,
            make_targets,
            open_impl,
            write_offset_index,
        )

        self.progress("index")
        path = os.path.join(self.scratch("index"), INDEX_FILE)
        write_offset_index(path)
        targets = make_targets("random")
        ours, close_ours = open_impl("kafkastore", path)
        peer, close_peer = open_impl("numpy_view", path)
        try:
            self.compare("index", "1000 random lookups, 10 MiB index",
                         _calibrated(lambda: lookup_all(ours, targets)),
                         {"numpy searchsorted": lambda: _calibrated(
                             lambda: lookup_all(peer, targets))},
                         N_TARGETS, "lookups")
        finally:
            close_ours()
            close_peer()

    def append(self) -> None:
        from kafkastore.bench.log import (
            NaiveAiokafkaLog,
            append_records,
            chunks,
            log_config,
            ready_batches,
        )
        from kafkastore.log import Log

        self.progress("append")
        batches = chunks(self.keys, self.values, 100)
        # the limit: the write(2) each append call makes (Kafka's one write a call), of a
        # batch of the same records encoded alike (ready_batches: the same sizes; only the
        # base offset and so the CRC differ from what the log writes)
        limit_file = os.path.join(self.scratch("append-limit"), "limit.log")
        encoded = ready_batches(self.keys, self.values, 100)

        def ours() -> float:
            log = Log.open(self.scratch("append"), log_config())
            try:
                return append_records(log, batches)
            finally:
                log.close()

        def naive() -> Timer:
            try:
                import aiokafka.record._crecords  # noqa: F401  (never the fallback)
            except ImportError as exc:
                raise NotImplementedError(f"aiokafka's Cython codec is missing: {exc}") \
                    from exc

            def run() -> float:
                log = NaiveAiokafkaLog(self.scratch("append-naive"))
                try:
                    return log.append_records(batches)
                finally:
                    log.close()
            return run

        self.compare("append", "100 records a call", ours, {"naive aiokafka_c log": naive},
                     self.n, "records",
                     ("write(2)", lambda: write_limit(limit_file, encoded)))

    def read(self) -> None:
        from kafkastore.bench.log import build_segmented_log
        from kafkastore.log import Log

        self.progress("read")
        directory = self.scratch("read")
        config = build_segmented_log(directory, self.keys, self.values)
        log = Log.open(directory, config)
        try:
            size = log.read(0, 1).size
            rng = random.Random(1)
            k = 2000
            offsets = [rng.randrange(log.log_end_offset) for _ in range(k)]
            # the baseline reads as much from a random place of a random segment of the
            # same log, so both touch the same spread of the page cache
            # (``>=``, a place in ``[0, s.size - size]``: at 1000 records each segment
            # holds one batch, as large as the read)
            files = [(s.log.fileno(), s.size - size + 1) for s in log.segments
                     if s.size >= size]
            where = [(fd, rng.randrange(limit))
                     for fd, limit in (rng.choice(files) for _ in range(k))]

            def ours() -> None:
                for o in offsets:
                    log.read(o, size, False).to_bytes()

            pread = pread_limit(where, size)
            # the limit is the peer's own work: its time (timed once)
            self.compare("read", f"random offset, {len(log.segments)} segments, {size} B",
                         _timed(ours), {"os.pread": lambda: _timed(pread)}, k, "reads",
                         ("pread", "os.pread"))
        finally:
            log.close()

    def recovery(self) -> None:
        from kafkastore.bench.log import log_config, ready_batches
        from kafkastore.log import Log

        self.progress("recovery")
        directory = self.scratch("recovery")
        config = log_config(**{"segment.bytes": (1 << 31) - 1})
        log = Log.open(directory, config)
        for data in ready_batches(self.keys, self.values, 1000):
            log.append_batches(data)
        log.close()
        log = Log.open(directory, config)
        try:
            segment = log.segments[0]
            data = segment.log.read(0, segment.size)
            self.compare("recovery", f"{segment.size / 2**20:.1f} MiB segment",
                         _timed(segment.recover),
                         {"crc32c (raw)": lambda: _timed(crc_limit(data))},
                         segment.size, "bytes", ("crc32c", "crc32c (raw)"))
        finally:
            log.close()

    def clean(self) -> None:
        from kafkastore.bench.cleaner import (
            build_log,
            clean_kafkastore,
            copy_log,
            log_files,
            make_cleaner_workload,
            naive_compact,
            require,
        )

        self.progress("clean")
        keys, values = make_cleaner_workload(self.n, max(self.n // 10, 1))
        source = os.path.join(self.scratch("clean"), "source")
        build_log(source, "uncompressed", keys, values)

        def fresh(name: str) -> str:
            target = os.path.join(self.tmp, "clean", name)
            shutil.rmtree(target, ignore_errors=True)
            return copy_log(source, target)

        def ours() -> float:
            return clean_kafkastore(fresh("ks"), "uncompressed")[0]

        def naive() -> Timer:
            require("naive_aiokafka")

            def run() -> float:
                directory = fresh("naive")
                t0 = time.perf_counter()
                naive_compact(directory, os.path.join(directory, "out"), "uncompressed")
                return time.perf_counter() - t0
            return run

        def limit() -> Timer:
            # the bytes a clean retains (one untimed clean of another copy), then the CRC
            # a rewritten batch needs and one write(2) of them all
            directory = fresh("limit")
            clean_kafkastore(directory, "uncompressed")
            retained = b"".join(_read_file(path) for path in log_files(directory))
            return write_limit(os.path.join(directory, "limit.out"), [retained],
                               before=crc_limit(retained))

        self.compare("clean", f"uncompressed, {max(self.n // 10, 1)} keys", ours,
                     {"naive aiokafka_c compactor": naive}, self.n, "records",
                     ("crc32c+write(2)", limit))


    def tiered(self) -> None:
        from kafkastore.bench.tiered import build_fixture, timed_cases

        self.progress("tiered")
        fx = build_fixture(self.scratch("tiered"), self.keys, self.values)
        try:
            for case in timed_cases(fx, _timed):
                self.compare("tiered", case.variant, case.ours(), case.peers, case.count,
                             case.unit)
        finally:
            fx.close()


    def server(self) -> None:
        # one run, not the best of reps: a million records through a broker take long
        # enough to be stable, and rerunning them would multiply the suite's time
        from kafkastore.bench.server import run_server_workload

        self.progress("server")
        try:
            r = run_server_workload(self.n, latency_samples=min(1000, max(self.n // 100, 50)),
                                    directory=self.tmp)
        except NotImplementedError as exc:
            for variant, peer in (("produce", "Log.append_batches"),
                                  ("fetch", "read + sendfile")):
                self.results.append(Comparison("server", variant, peer, float("nan"), None,
                                               self.n, "records", skipped=str(exc)))
            return

        ratios = r.capacity_ratios()

        def cpu(v, ratio):
            # the server's capacity (1 / its CPU per byte) against the library's rate:
            # end to end the client sets the pace, this is the server's own
            per_gb = r.cpu_per_gb(v)
            return "" if per_gb is None else \
                f", server CPU {per_gb:.2f} s/GB, capacity {ratio:.2f}x the library's"

        self.results.append(Comparison(
            "server", f"produce acks=all{cpu(r.produce_cpu_s, ratios[0])}; 1-record p50 "
            f"{r.latency_p50_ms:.2f} ms, p99 {r.latency_p99_ms:.2f} ms",
            "Log.append_batches", r.produce_s, r.append_batches_s, self.n, "records"))
        self.results.append(Comparison(
            "server", f"fetch from 0{cpu(r.fetch_cpu_s, ratios[1])}", "read + sendfile", r.fetch_s,
            r.read_sendfile_s, self.n, "records"))
        self._coordinators()

    def _coordinators(self) -> None:
        """The coordinators' rows (issue 30): a 5-member group's forming and rebalance
        and one consumer's synchronous commits (no peer: the times are the row), and
        transactions of 100 records beside the same records without transactions. Their
        sizes do not follow ``--records``: what they measure is per operation."""
        from kafkastore.bench.groups import run_group_workload
        from kafkastore.bench.transactions import run_transaction_workload

        g = run_group_workload(members=5, partitions=10, commits=1000)
        self.results.append(Comparison(
            "server", f"group of {g.members} consumers (classic protocol): formed in "
            f"{g.form_s * 1e3:.0f} ms, a 6th member's rebalance {g.rebalance_s * 1e3:.0f} ms; "
            "synchronous commits of one consumer", "-", g.commit_s, None, g.commits,
            "commits"))
        t = run_transaction_workload(200, 100, directory=self.tmp)
        self.results.append(Comparison(
            "server", f"transactions of {t.records_per_transaction} records, one producer: "
            f"{t.transactions_per_s:,.0f} transactions/s", "same records, no transactions",
            t.transactional_s, t.plain_s, t.records, "records"))

def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def count_steps(workloads: Iterable[str], codecs: Sequence[str]) -> int:
    """How many times :func:`run_suite` calls ``progress`` for these arguments."""
    return sum(len(codecs) if w in PER_CODEC else 1 for w in workloads)


def run_suite(records: int = 100_000, *, workloads: Iterable[str] = WORKLOADS,
              codecs: Sequence[str] = CODECS, reps: int = 3,
              progress: Callable[[str], None] | None = None,
              directory: str | None = None) -> list[Comparison]:
    """Run ``workloads`` on ``records`` records, ``reps`` rounds each; the comparisons.

    ``progress(label)`` is called as each workload (and codec) starts. Files go to a
    temporary directory under ``directory`` (default: the system's), removed at the end.
    Raises ``ValueError`` for an unknown workload or codec, or a size below 1000 records.
    """
    from kafkastore.types import CompressionType

    workloads = list(workloads)
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(WORKLOADS)}")
    for codec in codecs:
        try:
            CompressionType[codec.upper()]
        except KeyError:
            raise ValueError(f"unknown codec {codec!r}; choose from none, gzip, snappy, lz4, "
                             "zstd") from None
    if records < 1000:
        raise ValueError(f"records must be at least 1000 (one batch), not {records}")
    if reps < 1:
        raise ValueError(f"reps must be at least 1, not {reps}")
    tmp = tempfile.mkdtemp(prefix="kafkastore-bench-", dir=directory)
    try:
        run = _Run(records, reps, codecs, tmp, progress)
        for name in WORKLOADS:
            if name in workloads:
                getattr(run, name)()
        return run.results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def environment() -> dict[str, str]:
    """What the numbers were measured on: versions of kafkastore (and its kernels), Python,
    the peers (or why they are absent), and the machine's CPUs and load."""
    import platform

    from kafkastore import __version__
    from kafkastore._kernels import BACKEND
    from kafkastore.bench.workload import load_impl

    out = {"kafkastore": f"{__version__} ({BACKEND} kernels)",
           "python": platform.python_version(), "cpus": str(os.cpu_count())}
    for name in ("aiokafka_c", "kafka_python"):
        try:
            out[name] = load_impl(name).version
        except NotImplementedError as exc:
            out[name] = f"absent: {exc}"
    try:
        out["load average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        pass
    return out


def _rate(c: Comparison) -> str:
    seconds = c.kafkastore_s
    if c.unit == "records":
        return f"{c.count / seconds / 1e6:.2f} M rec/s"
    if c.unit == "bytes":
        return f"{c.count / seconds / 1e9:.2f} GB/s"
    return f"{seconds / c.count * 1e6:.2f} us/{c.unit[:-1]}"


def _seconds(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def format_table(results: Sequence[Comparison], markdown: bool = False) -> str:
    """The comparisons as an aligned text table (or a markdown one): workload, variant,
    kafkastore's best time and rate, the peer, its best time, and the ratio. When any row
    has a physical limit, three columns stand before the ratio: the limit (a key of
    :data:`LIMITS`), its best time and ``of limit`` (``limit time / kafkastore time``),
    ``-`` in the rows without one."""
    with_limits = any(c.limit_s is not None for c in results)
    header = ("workload", "variant", "kafkastore", "rate", "peer", "peer time",
              *(("limit", "limit time", "of limit") if with_limits else ()), "ratio")
    rows = []
    for c in results:
        if c.skipped is not None:
            peer_time, ratio = "-", f"skipped: {c.skipped}"
        elif c.peer_s is None:   # a row of its own numbers, no peer (the coordinators')
            peer_time, ratio = "-", "-"
        else:
            peer_time, ratio = _seconds(c.peer_s), f"{c.ratio:.2f}x"
        limit = ()
        if with_limits:
            limit = ("-", "-", "-") if c.limit_s is None else \
                (c.limit, _seconds(c.limit_s), f"{c.of_limit:.2f}")
        rows.append((c.workload, c.variant, _seconds(c.kafkastore_s), _rate(c), c.peer,
                     peer_time, *limit, ratio))
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    return "\n".join(line.rstrip() for line in lines)


def format_limits(results: Sequence[Comparison]) -> list[str]:
    """One legend line per physical limit the rows of ``results`` stand beside."""
    names = dict.fromkeys(c.limit for c in results if c.limit_s is not None)
    return [f"{name}: {LIMITS[name]}" for name in names]
