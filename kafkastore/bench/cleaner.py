"""The log-cleaner workload: kafkastore's cleaner beside a naive compactor built on
aiokafka's Cython codec.

Workload (issue 5): ``n`` records with 16-byte keys drawn uniformly (fixed seed) from
``n_keys`` distinct keys, 100-byte JSON-like values (``make_workload``'s), 1,000 records
a batch, one CreateTime per batch, no headers, no tombstones, no keyless records, no
transactions; uncompressed or lz4. The records are appended to a kafkastore
:class:`~kafkastore.log.Log` with ``cleanup.policy=compact`` and 64 MiB segments, the log
is rolled so that its active segment is empty (everything is cleanable) and closed. That
log is built once per codec; cleaning rewrites it in place, so every timed repetition
works on a fresh copy of its directory (:func:`copy_log`, untimed, the copy fsynced so
that its write-back does not overlap the measured run).

Sizes: :data:`N_RECORDS_ISSUE` / :data:`N_KEYS_ISSUE` (2,000,000 records, 200,000 keys)
are the issue's workload, what ``asv_bench/compare_log.py`` measures by default
(``--cleaner-records``). The asv classes (``asv_bench/benchmarks/cleaner.py``) use
:data:`N_RECORDS` / :data:`N_KEYS` (200,000 records, 20,000 keys: the same 10 records per
key), because building and copying the
issue's 2,000,000-record logs for every repetition of every parameter combination would
take asv minutes; ``ASV_CLEANER_RECORDS=2000000`` in the environment selects the issue's
size there too (keys: a tenth of the records).

Implementations (parameter ``impl``), both reading the same files in the page cache:

``kafkastore``
    ``kafkastore.cleaner.clean(log, config=CleanerConfig({"log.cleaner.dedupe.buffer.size":
    128 MiB}))`` on the opened log: Kafka's two passes (an offset map of key digests, then
    a recopy of every segment keeping the latest record of each key, batch by batch, the
    batches' layout and codec kept), CRC checks of every batch read, each cleaned segment
    fsynced before it is swapped in (as Kafka does). Opening the log and closing it are
    outside the timing.
``naive_aiokafka``
    :func:`naive_compact`, the issue's peer: aiokafka's Cython ``MemoryRecords`` decodes
    every batch of every ``.log`` file into record objects (no CRC check, as aiokafka's
    reader does by default), a dict ``key -> (offset, timestamp, value, headers)`` keeps
    the latest of each key, and the survivors are re-encoded in offset order, 1,000 a
    batch, with aiokafka's Cython ``DefaultRecordBatchBuilder`` and the same codec, into
    one output file with one ``write`` per batch and **no fsync** (``fsync=True`` adds one
    at the end; ``compare_log.py`` reports that variant for information). Its offsets are
    kept (baseOffset patched into each built batch). The cyclic garbage collector is
    paused while it runs (``pause_gc``; at the issue's size the collections triggered by
    its record objects would more than double its time, which would flatter the ratio).
    It handles only what this workload holds: no tombstone retention, control batches or
    transactions.

Both sides are measured as they are: the cleaner fsyncs its output, the naive compactor
does not; the cleaner keeps the source batch layout (many small batches), the naive one
packs 1,000 survivors a batch. aiokafka's lz4 is cramjam's LZ4 frame at level 9 (LZ4 HC),
kafkastore's is the fast LZ4 compressor (as Kafka's Java client), so with lz4 the naive
side pays HC compression on its re-encode; ``compare_log.py`` shows the naive phases
(decode + dict, sort, encode + write) so that share is visible.

``../compare_log.py`` prints the ratio table against the issue's bars (cleaning >= 5x
faster than the naive compactor; resident-set growth during the clean <= the dedupe
buffer + 8 MiB, measured in a fresh subprocess by :func:`memory_child` from the kernel's
peak resident set, VmHWM).
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import shutil
import sys
import threading
import time
from typing import NamedTuple

from kafkastore.batch_header import BASE_OFFSET_OFFSET, INT64
from kafkastore.bench.workload import BASE_TIMESTAMP, BATCH_SIZE, CODEC_IDS, make_workload

#: The issue's workload: records, and the distinct keys they are drawn from.
N_RECORDS_ISSUE = 2_000_000
N_KEYS_ISSUE = 200_000
#: asv's default size (same 10 records per key); ``ASV_CLEANER_RECORDS`` overrides it.
N_RECORDS = int(os.environ.get("ASV_CLEANER_RECORDS", "200000"))
N_KEYS = max(N_RECORDS // 10, 1)
#: Codecs, by the log's ``compression.type`` name.
CODECS = ("uncompressed", "lz4")
#: aiokafka's codec id for each of :data:`CODECS`.
AIOKAFKA_CODEC = {"uncompressed": CODEC_IDS["none"], "lz4": CODEC_IDS["lz4"]}
#: Kafka's default ``log.cleaner.dedupe.buffer.size`` (128 MiB), the issue's memory budget.
DEDUPE_BUFFER_SIZE = 128 << 20
#: ``segment.bytes`` of the logs built: several segments at the issue's size.
SEGMENT_BYTES = 64 << 20
#: Name of the naive compactor's output file inside the log directory it compacts.
NAIVE_OUTPUT = "naive-compacted.out"
IMPLS = ("kafkastore", "naive_aiokafka")


# -- the workload ------------------------------------------------------------------------------


def make_cleaner_workload(n: int, n_keys: int, seed: int = 5) -> tuple[list[bytes], list[bytes]]:
    """``(keys, values)``: ``n`` keys drawn uniformly from ``n_keys`` random 16-byte keys,
    and ``n`` 100-byte JSON-like values. Same arguments, same bytes."""
    rng = random.Random(seed)
    pool = [rng.randbytes(16) for _ in range(n_keys)]
    keys = [pool[i] for i in rng.choices(range(n_keys), k=n)]
    _, values = make_workload(n, seed=seed)
    return keys, values


def log_settings(codec: str) -> dict:
    """The log configuration the logs are built and cleaned with."""
    return {"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES,
            "compression.type": codec}


def build_log(directory: str, codec: str, keys: list[bytes], values: list[bytes],
              batch_size: int = BATCH_SIZE) -> int:
    """Write the workload to a closed compacted log at ``directory``, its active segment
    empty; returns the number of segments to clean."""
    from kafkastore.log import Log

    log = Log.open(directory, log_settings(codec))
    try:
        append = log.append
        for i, start in enumerate(range(0, len(keys), batch_size)):
            append(list(zip(keys[start:start + batch_size], values[start:start + batch_size])),
                   timestamp=BASE_TIMESTAMP + i)
        log.roll()
        return len(log.segments) - 1
    finally:
        log.close()


def copy_log(source: str, destination: str) -> str:
    """Copy the log directory ``source`` to ``destination`` (which must not exist) and
    fsync the copies, so their write-back does not overlap the run that follows."""
    shutil.copytree(source, destination)
    for name in os.listdir(destination):
        fd = os.open(os.path.join(destination, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return destination


def log_files(directory: str) -> list[str]:
    """The ``.log`` files of a log directory, in base-offset order (the names are the
    20-digit zero-padded base offsets)."""
    return [os.path.join(directory, name) for name in sorted(os.listdir(directory))
            if name.endswith(".log")]


def read_latest(paths) -> dict[bytes, tuple[int, bytes | None]]:
    """``key -> (offset, value)`` of the last record of each key in the files ``paths``
    (in order), decoded by kafkastore with every CRC checked; also asserts that the
    offsets only grow."""
    from kafkastore.records import iter_batches

    latest: dict[bytes, tuple[int, bytes | None]] = {}
    previous = -1
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        for batch in iter_batches(data, validate=True):
            for r in batch:
                if r.offset <= previous:
                    raise AssertionError(f"{path}: offset {r.offset} after {previous}")
                previous = r.offset
                latest[r.key] = (r.offset, r.value)
    return latest


def expected_latest(keys, values) -> dict[bytes, tuple[int, bytes]]:
    """What compaction must leave: ``key -> (offset, value)`` of each key's last record
    (offsets from 0, as :func:`build_log` assigns them)."""
    return {k: (i, v) for i, (k, v) in enumerate(zip(keys, values))}


# -- the implementations ------------------------------------------------------------------------


def require(impl: str) -> None:
    """Raise ``NotImplementedError`` (asv's skip) when ``impl`` cannot run here."""
    if impl == "naive_aiokafka":
        try:
            import aiokafka.record._crecords  # noqa: F401  (never the pure-Python fallback)
        except ImportError as exc:
            raise NotImplementedError(f"aiokafka's Cython codec is missing: {exc}") from exc
    elif impl == "kafkastore":
        try:
            import kafkastore.cleaner  # noqa: F401
        except ImportError as exc:
            raise NotImplementedError(f"kafkastore.cleaner does not import: {exc}") from exc
    else:
        raise ValueError(f"unknown implementation {impl!r}; one of {IMPLS}")


def cleaner_config(dedupe_buffer_size: int = DEDUPE_BUFFER_SIZE):
    from kafkastore.cleaner import CleanerConfig

    return CleanerConfig({"log.cleaner.dedupe.buffer.size": dedupe_buffer_size})


def clean_kafkastore(directory: str, codec: str, config=None):
    """Open the log at ``directory``, clean it, close it.

    Returns ``(seconds of the clean call alone, next dirty offset, CleanerStats)``;
    the caller times the whole, opening and closing included.
    """
    from kafkastore.cleaner import clean
    from kafkastore.log import Log

    config = config or cleaner_config()
    log = Log.open(directory, log_settings(codec))
    try:
        t0 = time.perf_counter()
        next_dirty, stats = clean(log, config=config)
        return time.perf_counter() - t0, next_dirty, stats
    finally:
        log.close()


class NaiveResult(NamedTuple):
    """What :func:`naive_compact` did, with the seconds of each phase."""

    records_read: int
    records_written: int
    bytes_written: int
    decode_s: float     # read the files, decode every record, fill the dict
    sort_s: float       # order the survivors by offset
    encode_s: float     # build the batches and write them (and fsync, if asked)


def naive_compact(directory: str, out_path: str, codec: str, *,
                  batch_size: int = BATCH_SIZE, fsync: bool = False,
                  pause_gc: bool = True) -> NaiveResult:
    """The issue's naive compactor (see the module docstring): decode every record of the
    ``.log`` files of ``directory`` with aiokafka's Cython ``MemoryRecords``, keep the
    latest ``(offset, timestamp, value, headers)`` of each key in a dict, re-encode the
    survivors in offset order, ``batch_size`` a batch, with aiokafka's Cython
    ``DefaultRecordBatchBuilder`` and ``codec``, into ``out_path`` (offsets kept).

    ``pause_gc`` (default) disables the cyclic garbage collector while it runs, as a
    careful implementation would (nothing it builds holds a cycle) and as asv's timer
    does anyway: with it on, the young-generation collections triggered by millions of
    record objects traverse the growing dict, which at the issue's size costs more than
    the decoding itself. ``False`` measures the interpreter's default.
    """
    if pause_gc and gc.isenabled():
        gc.disable()
        try:
            return naive_compact(directory, out_path, codec, batch_size=batch_size,
                                 fsync=fsync, pause_gc=False)
        finally:
            gc.enable()
    from aiokafka.record._crecords import DefaultRecordBatchBuilder, MemoryRecords

    t0 = time.perf_counter()
    latest: dict = {}
    n_read = 0
    for path in log_files(directory):
        with open(path, "rb") as f:
            data = f.read()
        records = MemoryRecords(data)
        while records.has_next():
            batch = records.next_batch()
            if batch.is_control_batch:
                continue
            for r in batch:
                n_read += 1
                key = r.key
                if key is not None:   # the cleaner drops keyless records too
                    latest[key] = (r.offset, r.timestamp, r.value, r.headers)
        del records, data
    t1 = time.perf_counter()
    survivors = sorted([(offset, ts, key, value, headers)
                        for key, (offset, ts, value, headers) in latest.items()])
    del latest
    t2 = time.perf_counter()
    codec_id = AIOKAFKA_CODEC[codec]
    written = 0
    with open(out_path, "wb") as out:
        write = out.write
        for start in range(0, len(survivors), batch_size):
            chunk = survivors[start:start + batch_size]
            base = chunk[0][0]
            builder = DefaultRecordBatchBuilder(
                magic=2, compression_type=codec_id, is_transactional=0, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            append = builder.append
            for offset, ts, key, value, headers in chunk:
                append(offset - base, timestamp=ts, key=key, value=value, headers=headers)
            buf = builder.build()
            INT64.pack_into(buf, BASE_OFFSET_OFFSET, base)   # the builder writes baseOffset 0
            written += len(buf)
            write(buf)
        if fsync:
            out.flush()
            os.fsync(out.fileno())
    t3 = time.perf_counter()
    return NaiveResult(n_read, len(survivors), written, t1 - t0, t2 - t1, t3 - t2)


def build_logs(base: str, n: int, n_keys: int, codecs=CODECS) -> dict[str, str]:
    """One closed compacted log per codec under ``base`` (``<base>/<codec>``), all holding
    the same workload; returns ``codec -> directory``."""
    keys, values = make_cleaner_workload(n, n_keys)
    out = {}
    for codec in codecs:
        directory = os.path.join(base, codec)
        build_log(directory, codec, keys, values)
        out[codec] = directory
    return out


# -- memory, in a fresh process ---------------------------------------------------------------


def _status_kib() -> dict[str, int]:
    """VmHWM, VmRSS, RssAnon and RssFile of this process (KiB), from /proc/self/status."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:", "RssAnon:", "RssFile:")):
                name, value = line.split(":", 1)
                out[name] = int(value.split()[0])
    return out


def _reset_peak_rss() -> bool:
    """Reset this process's VmHWM to its current resident set (Linux >= 4.0); False if
    the kernel refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(directory: str, codec: str, impl: str = "kafkastore",
                 interval_s: float = 0.002) -> dict:
    """Run one compaction of the log at ``directory`` in this (fresh) process and return
    (and print, as one JSON line) how much the resident set grew while it ran.

    ``before`` is the resident set (VmRSS) after the imports, the log opened and
    ``gc.collect()``. The peak is the kernel's high-water mark VmHWM, reset to the
    current resident set just before the run (``/proc/self/clear_refs``), so it is
    exactly the run's peak. (``ru_maxrss`` would do if the high-water mark could be
    reset: on Linux it survives ``exec``, so a child started by a big parent reports at
    least the parent's size; it is recorded for reference.) A thread reading
    /proc/self/status every ``interval_s`` gives the split of the growth into RssAnon
    (heap and anonymous maps: the offset map among them) and RssFile (pages of mapped
    files the run touched: page cache, not allocations); sampling can miss a short peak.
    ``grown_kib`` = peak VmHWM - VmRSS before (the sampled VmRSS peak if the reset was
    refused).
    """
    require(impl)
    log = None
    if impl == "kafkastore":
        from kafkastore.cleaner import clean
        from kafkastore.log import Log

        config = cleaner_config()
        log = Log.open(directory, log_settings(codec))
    else:
        import aiokafka.record._crecords  # noqa: F401  (imported before the baseline)
    gc.collect()
    reset = _reset_peak_rss()
    before = _status_kib()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = dict(before)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for name, value in _status_kib().items():
                if value > peak[name]:
                    peak[name] = value
            done.wait(interval_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    try:
        if impl == "kafkastore":
            _, stats = clean(log, config=config)
            written = stats.messages_written
        else:
            written = naive_compact(directory, os.path.join(directory, NAIVE_OUTPUT),
                                    codec).records_written
    finally:
        elapsed = time.perf_counter() - t0
        done.set()
        sampler.join()
    for name, value in _status_kib().items():   # before closing: close unmaps the indexes
        peak[name] = max(peak[name], value)
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if log is not None:
        log.close()
    if reset:
        grown = peak["VmHWM"] - before["VmRSS"]
    else:
        grown = peak["VmRSS"] - before["VmRSS"]
    result = {
        "impl": impl, "codec": codec, "elapsed_s": elapsed, "records_written": written,
        "hwm_reset": reset, "before_kib": before, "peak_kib": peak,
        "maxrss_before_kib": maxrss_before, "maxrss_after_kib": maxrss_after,
        "grown_kib": grown,
        "grown_anon_kib": peak["RssAnon"] - before["RssAnon"],
        "grown_file_kib": peak["RssFile"] - before["RssFile"],
    }
    print(json.dumps(result), flush=True)
    return result


def measure_memory(directory: str, codec: str, impl: str = "kafkastore") -> dict:
    """:func:`memory_child` in a fresh interpreter (the same kafkastore: the environment,
    ``PYTHONPATH`` included, is inherited)."""
    import subprocess

    code = ("import sys; from kafkastore.bench.cleaner import memory_child; "
            "memory_child(sys.argv[1], sys.argv[2], sys.argv[3])")
    proc = subprocess.run([sys.executable, "-c", code, directory, codec, impl],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
