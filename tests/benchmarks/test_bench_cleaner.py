"""Micro-benchmarks: the log cleaner beside the naive aiokafka compactor, and a check that
both leave the same latest value per key.

Deselected by default (tests/conftest.py marks everything here ``benchmark``, the check
included); run with

    pytest tests/benchmarks/test_bench_cleaner.py -m benchmark --benchmark-group-by=group

Group ``cleaner-<codec>`` puts ``kafkastore.cleaner.clean`` (``kafkastore``) and the naive
compactor (``naive_aiokafka``: aiokafka's Cython ``MemoryRecords`` decode of every
record, a dict keeping the latest of each key, re-encoded 1,000 a batch with aiokafka's
Cython ``DefaultRecordBatchBuilder``) side by side. Each round compacts a fresh copy of
the same log (copied in pedantic's setup, untimed); for kafkastore the log is opened
there too, so the round times the clean call alone. There are no timing assertions: read
the ratio within a group, and use ``asv_bench/compare_log.py`` (``cleaner`` rows) for the
issue's 2,000,000-record workload against the bar.

``test_same_latest_values`` (not a timing) compacts the same log both ways and checks
that each leaves exactly the last record of every key of the input, at its offset, and
nothing else.

The workload, the naive compactor and the helpers are ``asv_bench/benchmarks/cleaner.py``'s,
loaded by file as in ``test_bench_records.py``: 16-byte keys drawn from ``N_KEYS``
distinct keys, 100-byte JSON-like values, 1,000 records a batch, in a compacted log of
64 MiB segments, rolled so that everything is cleanable; uncompressed and lz4. A missing
aiokafka Cython codec is a skip with the reason.
"""

from __future__ import annotations

import itertools
import os
import shutil

import _asv
import pytest

from kafkastore._kernels import BACKEND

N_RECORDS = 50_000
N_KEYS = 5_000
ROUNDS = 5


C = _asv.load("cleaner")


def _require(impl):
    try:
        C.require(impl)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def workload():
    return C.make_cleaner_workload(N_RECORDS, N_KEYS)


@pytest.fixture(scope="module")
def source_logs(tmp_path_factory, workload):
    """One closed, fully cleanable compacted log per codec: ``codec -> directory``."""
    keys, values = workload
    base = tmp_path_factory.mktemp("cleaner-logs")
    out = {}
    for codec in C.CODECS:
        directory = str(base / codec)
        C.build_log(directory, codec, keys, values)
        out[codec] = directory
    return out


@pytest.fixture
def copies(tmp_path):
    """``fresh(codec_dir)``: a new copy of a source log under this test's tmp_path."""
    counter = itertools.count()

    def fresh(source):
        return C.copy_log(source, str(tmp_path / f"copy-{next(counter)}"))

    return fresh


def _compact(impl, codec, directory):
    """Compact the log at ``directory`` with ``impl``; ``(records kept, files to read)``."""
    if impl == "kafkastore":
        _, next_dirty, stats = C.clean_kafkastore(directory, codec)
        assert next_dirty == N_RECORDS   # everything below the empty active segment
        return stats.messages_written, C.log_files(directory)
    out = os.path.join(directory, C.NAIVE_OUTPUT)
    return C.naive_compact(directory, out, codec).records_written, [out]


@pytest.mark.parametrize("codec", C.CODECS)
def test_same_latest_values(source_logs, workload, copies, codec):
    """Not a timing: both compactions keep exactly the last record of each key."""
    _require("kafkastore")
    _require("naive_aiokafka")
    expected = C.expected_latest(*workload)
    results = {}
    for impl in C.IMPLS:
        kept, paths = _compact(impl, codec, copies(source_logs[codec]))
        latest = C.read_latest(paths)
        assert kept == len(expected), impl
        assert sum(1 for _ in _records(paths)) == len(expected), f"{impl}: stale records left"
        results[impl] = latest
    assert results["naive_aiokafka"] == expected
    assert results["kafkastore"] == expected
    assert results["kafkastore"] == results["naive_aiokafka"]


def _records(paths):
    from kafkastore.records import iter_batches

    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        for batch in iter_batches(data):
            yield from batch


@pytest.mark.parametrize("codec", C.CODECS)
@pytest.mark.parametrize("lib", C.IMPLS)
def test_clean(benchmark, workload, source_logs, copies, lib, codec):
    _require(lib)
    benchmark.group = f"cleaner-{codec}"
    benchmark.extra_info.update(lib=lib, codec=codec, records=N_RECORDS, keys=N_KEYS,
                                kafkastore_backend=BACKEND)
    opened = []
    made = []

    if lib == "kafkastore":
        from kafkastore.cleaner import clean
        from kafkastore.log import Log

        config = C.cleaner_config()

        def setup():
            while opened:   # the previous round's log
                opened.pop().close()
            directory = copies(source_logs[codec])
            made.append(directory)
            log = Log.open(directory, C.log_settings(codec))
            opened.append(log)
            return (log,), {}

        def run(log):
            return clean(log, config=config)[1].messages_written
    else:
        def setup():
            directory = copies(source_logs[codec])
            made.append(directory)
            return (directory, os.path.join(directory, C.NAIVE_OUTPUT)), {}

        def run(directory, out):
            return C.naive_compact(directory, out, codec).records_written

    try:
        kept = benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
    finally:
        while opened:
            opened.pop().close()
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)
    assert kept == len(set(workload[0]))
