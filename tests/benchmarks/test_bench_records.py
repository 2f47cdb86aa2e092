"""Micro-benchmarks: RecordBatch v2 encode, decode, columnar decode and scan beside the
peers, and the varint kernel compiled vs pure.

Deselected by default (tests/conftest.py marks everything here ``benchmark``); run with

    pytest tests/benchmarks -m benchmark --benchmark-group-by=group

Groups: ``encode-<codec>``, ``decode-<codec>``, ``columns-<codec>`` and ``scan`` put
kafkastore, aiokafka's Cython codec (``aiokafka_c``) and kafka-python side by side on the
same data (parameter ``lib``); ``varint`` compares ``kafkastore._ext.varint`` with
``kafkastore._pure.varint`` (conftest's ``impl`` fixture: ``cython`` / ``python``).
A peer that is not installed is skipped with a reason. There are no timing assertions:
read the ratios within a group (pytest-benchmark's table), and use
``asv_bench/compare_peers.py`` for the full-size, one-process-per-cell comparison against
the issue's bars.

The workload and the code that drives each implementation are ``asv_bench/benchmarks``'s
(``make_workload``, ``batch_tuples``, ``encode_blob``, ``load_impl``; the varint values are
``benchmarks/varint.py``'s), so pytest-benchmark, asv and ``compare_peers.py`` measure the
same thing: 16-byte random keys, 100-byte JSON-like values, 1000 records a batch, one
CreateTime per batch, no headers; 100,000 records keep a run short. The tests always run
next to the repository (scripts/test.sh runs the in-tree tests/ against the installed
wheel), so the asv package is loaded from ``../../asv_bench/benchmarks`` by file, under the
name ``_asv_benchmarks`` (``benchmarks`` would collide with this directory). kafkastore's
input is one list of ``(key, value)`` tuples per batch, built in the fixture (its natural
input); ``kafkastore_zip`` builds those tuples inside the timing. Decode, columns and scan
read one blob per codec, encoded once by kafkastore.
"""

from __future__ import annotations

import _asv
import pytest

from kafkastore._kernels import BACKEND

W = _asv.load()
asv_varint = _asv.load("varint")

N_RECORDS = W.N_RECORDS
BATCH_SIZE = W.BATCH_SIZE
CODECS = W.CODECS
PEERS = ("aiokafka_c", "kafka_python")


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workload():
    keys, values = W.make_workload(N_RECORDS)
    return keys, values, W.batch_tuples(keys, values)


@pytest.fixture(scope="module")
def blobs(workload):
    """One kafkastore-encoded blob per codec: the input of every decode and scan."""
    keys, values, _ = workload
    return {codec: W.encode_blob(keys, values, codec) for codec in CODECS}


def _impl(name):
    """asv's driver of implementation ``name``; a missing peer is a skip with the reason
    (aiokafka's Cython codec is required: its pure-Python fallback is never measured)."""
    try:
        return W.load_impl(name)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


def _info(benchmark, lib, codec):
    benchmark.extra_info.update(lib=lib, codec=codec, records=N_RECORDS,
                                kafkastore_backend=BACKEND)


# -- benchmarks ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", ("kafkastore", "kafkastore_zip", *PEERS))
def test_encode(benchmark, workload, lib, codec):
    keys, values, batches = workload
    benchmark.group = f"encode-{codec}"
    _info(benchmark, lib, codec)
    out = benchmark(_impl(lib).encode, keys, values, codec, batches)
    assert len(out) == N_RECORDS // BATCH_SIZE
    benchmark.extra_info["encoded_bytes"] = sum(len(b) for b in out)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", ("kafkastore", "kafkastore_nocrc", "aiokafka_c_crc", *PEERS))
def test_decode(benchmark, blobs, lib, codec):
    blob = blobs[codec]
    benchmark.group = f"decode-{codec}"
    _info(benchmark, lib, codec)
    n = benchmark(_impl(lib).decode, blob)
    assert n == N_RECORDS


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", ("kafkastore", "kafkastore_nocrc", "aiokafka_c_crc-objects",
                                 "aiokafka_c-objects", "kafka_python-objects"))
def test_columns(benchmark, blobs, lib, codec):
    """kafkastore.decode_columns beside the peers' decode to objects (the bar's reference:
    kafkastore against aiokafka_c_crc, kafkastore_nocrc against aiokafka_c)."""
    blob = blobs[codec]
    benchmark.group = f"columns-{codec}"
    _info(benchmark, lib, codec)
    if lib.startswith("kafkastore"):
        n = len(benchmark(_impl(lib).columns, blob))
    else:
        n = benchmark(_impl(lib.removesuffix("-objects")).decode, blob)
    assert n == N_RECORDS


@pytest.mark.parametrize("lib", ("kafkastore", "crc32c", *PEERS))
def test_scan(benchmark, blobs, lib):
    """Batch headers + every CRC, uncompressed blob; crc32c over the blob is the floor."""
    blob = blobs["none"]
    benchmark.group = "scan"
    _info(benchmark, lib, "none")
    if lib == "crc32c":
        crc32c = pytest.importorskip("crc32c")
        benchmark(crc32c.crc32c, blob)
        n = N_RECORDS // BATCH_SIZE
    else:
        n = benchmark(_impl(lib).scan, blob)
    assert n == N_RECORDS // BATCH_SIZE


# -- varint: compiled vs pure ----------------------------------------------------------------

VARINT_N = asv_varint.N


@pytest.fixture(scope="module")
def varint_values():
    """Signed int32 values whose encodings cover every length (1-5 bytes) evenly."""
    return asv_varint._values("varint", VARINT_N)


def _encode_all(encode, values):
    for v in values:
        encode(v)


def _decode_all(decode, buffer, count):
    pos = 0
    for _ in range(count):
        _, pos = decode(buffer, pos)
    return pos


def test_varint_encode(benchmark, impl, varint_values):
    benchmark.group = "varint"
    benchmark.extra_info.update(impl=impl.name, values=VARINT_N)
    benchmark(_encode_all, impl.varint.encode_varint, varint_values)


def test_varint_decode(benchmark, impl, varint_values):
    benchmark.group = "varint"
    benchmark.extra_info.update(impl=impl.name, values=VARINT_N)
    buffer = b"".join(impl.varint.encode_varint(v) for v in varint_values)
    end = benchmark(_decode_all, impl.varint.decode_varint, buffer, VARINT_N)
    assert end == len(buffer)
