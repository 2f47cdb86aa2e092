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

The workload is the one ``asv_bench/benchmarks/__init__.py`` defines (16-byte random keys,
100-byte JSON-like values, 1000 records a batch, one CreateTime per batch, no headers),
rebuilt here so the test suite does not import the asv tree; 100,000 records keep a run
short. kafkastore's input is one list of ``(key, value)`` tuples per batch, built in the
fixture (its natural input); ``kafkastore_zip`` builds those tuples inside the timing.
Decode, columns and scan read one blob per codec, encoded once by kafkastore.
"""

from __future__ import annotations

import random
import warnings

import pytest

from kafkastore._kernels import BACKEND
from kafkastore.records import decode_columns, encode_batch, iter_batches, scan_batches

N_RECORDS = 100_000
BATCH_SIZE = 1000
BASE_TIMESTAMP = 1_700_000_000_000
CODECS = ("none", "lz4", "zstd")
CODEC_IDS = {"none": 0, "lz4": 3, "zstd": 4}
PEERS = ("aiokafka_c", "kafka_python")

_EVENTS = (b"click", b"view", b"purchase", b"signup", b"logout", b"search", b"add_to_cart",
           b"share")
_COUNTRIES = (b"US", b"DE", b"FR", b"JP", b"BR", b"IN", b"GB", b"CA", b"NL", b"SE")
_ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789"


def _make_workload(n: int, seed: int = 0) -> tuple[list[bytes], list[bytes]]:
    """Same bytes as ``asv_bench/benchmarks.make_workload(n, 16, 100, seed)``."""
    rng = random.Random(seed)
    keys = [rng.randbytes(16) for _ in range(n)]
    pool = bytes(rng.choices(_ALPHABET, k=1 << 16))
    limit = len(pool) - 100
    values = []
    for i in range(n):
        r = rng.getrandbits(64)
        head = (b'{"id":%d,"user":"u%07d","event":"%s","country":"%s","amount":%d.%02d,"note":"'
                % (i, r % 10_000_000, _EVENTS[(r >> 24) & 7],
                   _COUNTRIES[((r >> 27) & 0xFFFF) % len(_COUNTRIES)], (r >> 43) % 100_000,
                   (r >> 20) % 100))
        pad = 100 - len(head) - 2
        off = (r >> 8) % limit
        values.append(head + pool[off:off + pad] + b'"}' if pad >= 0 else (head + b'"}')[:100])
    return keys, values


# -- implementations ---------------------------------------------------------------------------


def _ks_encode(batches, codec):
    return [encode_batch(batch, base_offset=i * BATCH_SIZE, compression=codec,
                         timestamp=BASE_TIMESTAMP + i)
            for i, batch in enumerate(batches)]


def _ks_encode_zip(keys, values, codec):
    return [encode_batch(list(zip(keys[j:j + BATCH_SIZE], values[j:j + BATCH_SIZE])),
                         base_offset=j, compression=codec, timestamp=BASE_TIMESTAMP + i)
            for i, j in enumerate(range(0, len(keys), BATCH_SIZE))]


def _ks_decode(blob):
    n = 0
    for batch in iter_batches(blob):
        for r in batch:
            r.offset
            r.timestamp
            r.key
            r.value
            n += 1
    return n


def _peer_encode(builder_cls, keys, values, codec):
    codec_id = CODEC_IDS[codec]
    out = []
    for i, start in enumerate(range(0, len(keys), BATCH_SIZE)):
        builder = builder_cls(magic=2, compression_type=codec_id, is_transactional=0,
                              producer_id=-1, producer_epoch=-1, base_sequence=-1,
                              batch_size=1 << 30)
        ts = BASE_TIMESTAMP + i
        for j in range(start, min(start + BATCH_SIZE, len(keys))):
            builder.append(j - start, timestamp=ts, key=keys[j], value=values[j], headers=[])
        out.append(builder.build())
    return out


def _peer_decode(memory_records_cls, blob):
    n = 0
    records = memory_records_cls(blob)
    while records.has_next():
        for r in records.next_batch():
            r.offset
            r.timestamp
            r.key
            r.value
            n += 1
    return n


def _peer_scan(memory_records_cls, blob):
    n = 0
    records = memory_records_cls(blob)
    while records.has_next():
        assert records.next_batch().validate_crc()
        n += 1
    return n


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workload():
    keys, values = _make_workload(N_RECORDS)
    batches = [list(zip(keys[i:i + BATCH_SIZE], values[i:i + BATCH_SIZE]))
               for i in range(0, N_RECORDS, BATCH_SIZE)]
    return keys, values, batches


@pytest.fixture(scope="module")
def blobs(workload):
    """One kafkastore-encoded blob per codec: the input of every decode and scan."""
    _, _, batches = workload
    return {codec: b"".join(_ks_encode(batches, codec)) for codec in CODECS}


@pytest.fixture(scope="module")
def aiokafka_c():
    """aiokafka's Cython classes, never its pure-Python fallback."""
    crecords = pytest.importorskip(
        "aiokafka.record._crecords", reason="aiokafka (with its Cython codec) not installed")
    return crecords.DefaultRecordBatchBuilder, crecords.MemoryRecords


@pytest.fixture(scope="module")
def kafka_python():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kafka-python 3 warns at import (importlib.resources)
        builders = pytest.importorskip("kafka.record.default_records",
                                       reason="kafka-python not installed")
        memory = pytest.importorskip("kafka.record.memory_records",
                                     reason="kafka-python not installed")
    return builders.DefaultRecordBatchBuilder, memory.MemoryRecords


def _peer(request, name):
    return request.getfixturevalue(name)


def _info(benchmark, lib, codec):
    benchmark.extra_info.update(lib=lib, codec=codec, records=N_RECORDS,
                                kafkastore_backend=BACKEND)


# -- benchmarks ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", ("kafkastore", "kafkastore_zip", *PEERS))
def test_encode(benchmark, request, workload, lib, codec):
    keys, values, batches = workload
    benchmark.group = f"encode-{codec}"
    _info(benchmark, lib, codec)
    if lib == "kafkastore":
        out = benchmark(_ks_encode, batches, codec)
    elif lib == "kafkastore_zip":
        out = benchmark(_ks_encode_zip, keys, values, codec)
    else:
        builder_cls, _ = _peer(request, lib)
        out = benchmark(_peer_encode, builder_cls, keys, values, codec)
    assert len(out) == N_RECORDS // BATCH_SIZE
    benchmark.extra_info["encoded_bytes"] = sum(len(b) for b in out)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", ("kafkastore", *PEERS))
def test_decode(benchmark, request, blobs, lib, codec):
    blob = blobs[codec]
    benchmark.group = f"decode-{codec}"
    _info(benchmark, lib, codec)
    if lib == "kafkastore":
        n = benchmark(_ks_decode, blob)
    else:
        _, memory_records_cls = _peer(request, lib)
        n = benchmark(_peer_decode, memory_records_cls, blob)
    assert n == N_RECORDS


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", ("kafkastore", "aiokafka_c-objects", "kafka_python-objects"))
def test_columns(benchmark, request, blobs, lib, codec):
    """kafkastore.decode_columns beside the peers' decode to objects (the bar's reference)."""
    blob = blobs[codec]
    benchmark.group = f"columns-{codec}"
    _info(benchmark, lib, codec)
    if lib == "kafkastore":
        n = len(benchmark(decode_columns, blob))
    else:
        _, memory_records_cls = _peer(request, lib.removesuffix("-objects"))
        n = benchmark(_peer_decode, memory_records_cls, blob)
    assert n == N_RECORDS


@pytest.mark.parametrize("lib", ("kafkastore", "crc32c", *PEERS))
def test_scan(benchmark, request, blobs, lib):
    """Batch headers + every CRC, uncompressed blob; crc32c over the blob is the floor."""
    blob = blobs["none"]
    benchmark.group = "scan"
    _info(benchmark, lib, "none")
    if lib == "kafkastore":
        n = len(benchmark(scan_batches, blob, validate=True))
    elif lib == "crc32c":
        crc32c = pytest.importorskip("crc32c")
        benchmark(crc32c.crc32c, blob)
        n = N_RECORDS // BATCH_SIZE
    else:
        _, memory_records_cls = _peer(request, lib)
        n = benchmark(_peer_scan, memory_records_cls, blob)
    assert n == N_RECORDS // BATCH_SIZE


# -- varint: compiled vs pure ----------------------------------------------------------------

VARINT_N = 10_000


@pytest.fixture(scope="module")
def varint_values():
    """Signed int32 values whose encodings cover every length (1-5 bytes) evenly."""
    rng = random.Random(0)
    out = []
    for _ in range(VARINT_N):
        bits = rng.randrange(32)
        value = rng.getrandbits(bits) if bits else 0
        out.append(-value - 1 if rng.getrandbits(1) else value)
    return out


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
