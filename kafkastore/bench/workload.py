"""The benchmark workloads: the record-batch workload and the code that drives each
implementation (kafkastore, aiokafka's Cython codec, kafka-python) through it.

It lives in the package so that ``kafkastore bench`` (installed from a wheel), the asv
suite (``asv_bench/benchmarks``), ``asv_bench/compare_peers.py`` and the pytest-benchmark
tests all measure exactly the same thing. Nothing here imports kafkastore's modules or the
peers at import time; they are imported when first used, so a missing peer costs nothing
until it is asked for (and then raises ``NotImplementedError``, asv's skip).

The workload (``performance.md`` section 3): ``n`` records, 16-byte random keys,
100-byte JSON-like values, 1000 records a batch, CreateTime, no headers. Every
implementation starts from the same two lists ``keys`` and ``values`` (built once,
outside any timing). The timestamp is one value per batch (``batch_timestamp``), which
kafkastore takes as the batch default and the peers pass to every ``append``, so all
three write the same bytes (kafkastore's uncompressed output is byte-identical to
aiokafka's apart from baseOffset).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "make_records",
    "BATCH_SIZE",
    "BASE_TIMESTAMP",
    "CODECS",
    "CODEC_IDS",
    "CODEC_LEVELS",
    "N_RECORDS",
    "N_RECORDS_SLOW",
    "make_workload",
    "batch_timestamp",
    "batch_tuples",
    "encode_blob",
    "load_impl",
    "Impl",
]

#: Records per batch, as in the issue's workload.
BATCH_SIZE = 1000
#: Timestamp (ms) of batch 0; batch ``i`` carries ``BASE_TIMESTAMP + i``.
BASE_TIMESTAMP = 1_700_000_000_000
#: Default workload size: small enough for ``asv run --quick`` and pytest-benchmark.
N_RECORDS = 100_000
#: The issue's workload size; skipped when ``ASV_SKIP_SLOW`` is set.
N_RECORDS_SLOW = 1_000_000
#: Codecs measured, by kafkastore name.
CODECS = ("none", "lz4", "zstd")
#: Kafka codec ids (attributes bits 0-2), what the peers' builders take.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: What each implementation's *default* level is, per codec (they differ: see README).
CODEC_LEVELS = {
    "kafkastore": {
        "lz4": "Kafka level 9 = LZ4 fast compressor (LZ4_compress_default), as Kafka's Java client",
        "zstd": "zstd level 3 (zstandard)",
    },
    "aiokafka_c": {
        "lz4": "cramjam lz4 frame level 9 = LZ4 HC (slower, smaller)",
        "zstd": "cramjam zstd level 3",
    },
    "kafka_python": {
        "lz4": "lz4.frame level 0 = LZ4 fast",
        "zstd": "zstandard level 3",
    },
}

_EVENTS = (b"click", b"view", b"purchase", b"signup", b"logout", b"search", b"add_to_cart",
           b"share")
_COUNTRIES = (b"US", b"DE", b"FR", b"JP", b"BR", b"IN", b"GB", b"CA", b"NL", b"SE")
_ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789"


def make_records(
    n: int, key_size: int = 16, value_size: int = 100, seed: int = 0
) -> list[tuple[bytes, bytes]]:
    """Return ``n`` ``(key, value)`` pairs of random bytes, the same for the same arguments.

    Parameters
    ----------
    n
        Number of records.
    key_size, value_size
        Length in bytes of every key and every value.
    seed
        Seed of the private random generator; the global one is left alone.
    """
    rng = random.Random(seed)
    return [(rng.randbytes(key_size), rng.randbytes(value_size)) for _ in range(n)]


# -- the record-batch workload -------------------------------------------------------------


def make_workload(
    n: int, key_size: int = 16, value_size: int = 100, seed: int = 0
) -> tuple[list[bytes], list[bytes]]:
    """Return ``(keys, values)``: ``n`` random keys and ``n`` JSON-like values.

    Every value is exactly ``value_size`` bytes, for example (one line)::

        {"id":0,"user":"u2410532","event":"add_to_cart","country":"IN",
         "amount":82540.02,"note":"hugj8vy8s"}

    The note is random text that pads the value to size. Same arguments, same bytes.
    About 2 s per million records.
    """
    rng = random.Random(seed)
    keys = [rng.randbytes(key_size) for _ in range(n)]
    # Random text for the "note" field is sliced out of one pool: far cheaper than drawing
    # characters per record, and still not compressible beyond what lz4/zstd find in it.
    pool = bytes(rng.choices(_ALPHABET, k=1 << 16))
    limit = len(pool) - value_size
    values: list[bytes] = []
    append = values.append
    getrandbits = rng.getrandbits
    for i in range(n):
        r = getrandbits(64)
        head = (b'{"id":%d,"user":"u%07d","event":"%s","country":"%s","amount":%d.%02d,"note":"'
                % (i, r % 10_000_000, _EVENTS[(r >> 24) & 7],
                   _COUNTRIES[((r >> 27) & 0xFFFF) % len(_COUNTRIES)], (r >> 43) % 100_000,
                   (r >> 20) % 100))
        pad = value_size - len(head) - 2
        if pad >= 0:
            off = (r >> 8) % limit
            append(head + pool[off:off + pad] + b'"}')
        else:
            append((head + b'"}')[:value_size])
    return keys, values


def batch_timestamp(batch_index: int) -> int:
    """The CreateTime (ms) of every record of batch ``batch_index``."""
    return BASE_TIMESTAMP + batch_index


def batch_tuples(keys: Sequence[bytes], values: Sequence[bytes],
                 batch_size: int = BATCH_SIZE) -> list[list[tuple[bytes, bytes]]]:
    """kafkastore's natural input: one list of ``(key, value)`` tuples per batch."""
    return [list(zip(keys[i:i + batch_size], values[i:i + batch_size]))
            for i in range(0, len(keys), batch_size)]


def encode_blob(keys: Sequence[bytes], values: Sequence[bytes], codec: str = "none",
                batch_size: int = BATCH_SIZE) -> bytes:
    """The workload as one log's bytes, encoded by kafkastore (default codec level).

    Every decode and scan benchmark reads this blob, whatever the implementation.
    Offsets run from 0; batch ``i`` has baseOffset ``i * batch_size``.
    """
    from kafkastore.records import encode_batch

    return b"".join(
        encode_batch(batch, base_offset=i * batch_size, compression=codec,
                     timestamp=batch_timestamp(i))
        for i, batch in enumerate(batch_tuples(keys, values, batch_size)))


# -- implementations -----------------------------------------------------------------------


class Impl:
    """One implementation's encode / decode / scan entry points, for the workload above.

    ``encode(keys, values, codec, batches)`` returns the list of encoded batches (no
    join); ``batches`` is the prebuilt :func:`batch_tuples` list, used only by
    ``kafkastore``. ``decode(blob)`` touches offset, timestamp, key and value of every
    record and returns the record count. ``scan(blob)`` walks the batch headers and checks
    each CRC, returning the batch count. ``columns(blob, copy=False)`` exists for
    kafkastore only (``decode_columns`` in the view layout unless ``copy``).
    Missing operations are None.
    """

    def __init__(self, name: str, version: str, *, encode=None, decode=None, scan=None,
                 columns=None) -> None:
        self.name = name
        self.version = version
        self.encode: Callable[..., list[Any]] | None = encode
        self.decode: Callable[[bytes], int] | None = decode
        self.scan: Callable[[bytes], int] | None = scan
        self.columns: Callable[[bytes], Any] | None = columns


def _touch_records(batches) -> int:
    """Touch offset, timestamp, key and value of every record of ``batches``; the count."""
    n = 0
    for batch in batches:
        for r in batch:
            r.offset
            r.timestamp
            r.key
            r.value
            n += 1
    return n


def _kafkastore(zip_inside: bool, validate: bool = True) -> Impl:
    from kafkastore import _kernels
    from kafkastore.records import decode_columns, encode_batch, iter_batches, scan_batches

    def encode(keys, values, codec, batches, batch_size=BATCH_SIZE):
        return [encode_batch(batch, base_offset=i * batch_size, compression=codec,
                             timestamp=BASE_TIMESTAMP + i)
                for i, batch in enumerate(batches)]

    def encode_zip(keys, values, codec, batches, batch_size=BATCH_SIZE):
        # The tuples are built inside the timing: what a caller holding two lists pays.
        return [encode_batch(list(zip(keys[j:j + batch_size], values[j:j + batch_size])),
                             base_offset=j, compression=codec,
                             timestamp=BASE_TIMESTAMP + i)
                for i, j in enumerate(range(0, len(keys), batch_size))]

    def decode(blob):
        # validate=True (the default) checks every CRC, which the peers' decoders skip;
        # the "_nocrc" variant does the same work as they do
        return _touch_records(iter_batches(blob, validate=validate))

    def scan(blob):
        return len(scan_batches(blob, validate=True))

    def columns(blob, copy=False):
        # the view layout by default: keys and values stay in the blob (copy=True: the
        # copying layout, what decode_columns returns by default)
        return decode_columns(blob, validate=validate, copy=copy)

    try:
        from importlib.metadata import version
        ver = version("kafkastore")
    except Exception:  # not installed: the in-place build
        ver = "source tree"
    name = "kafkastore_zip" if zip_inside else "kafkastore"
    return Impl(name if validate else name + "_nocrc",
                f"{ver} ({_kernels.BACKEND} backend)",
                encode=encode_zip if zip_inside else encode, decode=decode, scan=scan,
                columns=columns)


def _peer(name: str, builder_cls, memory_records_cls, version: str,
          validate: bool = False) -> Impl:
    def encode(keys, values, codec, batches, batch_size=BATCH_SIZE):
        codec_id = CODEC_IDS[codec]
        out = []
        for i, start in enumerate(range(0, len(keys), batch_size)):
            builder = builder_cls(magic=2, compression_type=codec_id, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
            ts = BASE_TIMESTAMP + i
            for j in range(start, min(start + batch_size, len(keys))):
                builder.append(j - start, timestamp=ts, key=keys[j], value=values[j],
                               headers=[])
            out.append(builder.build())
        return out

    def batches(blob):
        records = memory_records_cls(blob)
        while records.has_next():
            yield records.next_batch()

    def checked(blob):
        # what aiokafka's consumer does with check_crcs=True (its default, and Kafka's)
        for batch in batches(blob):
            if not batch.validate_crc():
                raise ValueError("CRC mismatch")
            yield batch

    def decode(blob):
        return _touch_records(checked(blob) if validate else batches(blob))

    def scan(blob):
        n = 0
        for batch in batches(blob):
            if not batch.validate_crc():
                raise ValueError("CRC mismatch")
            n += 1
        return n

    return Impl(name, version, encode=encode, decode=decode, scan=scan)


def _aiokafka_c(validate: bool = False) -> Impl:
    # The Cython classes by name: if the extension is missing this must skip, not quietly
    # measure aiokafka's pure-Python fallback under the aiokafka_c label.
    try:
        import aiokafka
        from aiokafka.record._crecords import DefaultRecordBatchBuilder, MemoryRecords
    except ImportError as exc:
        raise NotImplementedError(f"aiokafka's Cython codec is not available ({exc})") from exc
    return _peer("aiokafka_c_crc" if validate else "aiokafka_c", DefaultRecordBatchBuilder,
                 MemoryRecords, aiokafka.__version__, validate=validate)


def _kafka_python(validate: bool = False) -> Impl:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # kafka-python 3 warns at import (importlib.resources)
            import kafka
            from kafka.record.default_records import DefaultRecordBatchBuilder
            from kafka.record.memory_records import MemoryRecords
    except ImportError as exc:
        raise NotImplementedError(f"kafka-python is not installed ({exc})") from exc
    return _peer("kafka_python_crc" if validate else "kafka_python", DefaultRecordBatchBuilder,
                 MemoryRecords, kafka.__version__, validate=validate)


_LOADERS: dict[str, Callable[[], Impl]] = {
    "kafkastore": lambda: _kafkastore(zip_inside=False),
    "kafkastore_zip": lambda: _kafkastore(zip_inside=True),
    "kafkastore_nocrc": lambda: _kafkastore(zip_inside=False, validate=False),
    "aiokafka_c": _aiokafka_c,
    "aiokafka_c_crc": lambda: _aiokafka_c(validate=True),
    "kafka_python": _kafka_python,
    "kafka_python_crc": lambda: _kafka_python(validate=True),
}


def load_impl(name: str) -> Impl:
    """The :class:`Impl` called ``name``; ``NotImplementedError`` (asv's skip) if absent.

    Names: ``kafkastore`` (tuples prebuilt outside the timing), ``kafkastore_zip``
    (tuples built inside it), ``kafkastore_nocrc`` (decoders without CRC checks),
    ``aiokafka_c`` (aiokafka's Cython codec, never its pure-Python fallback),
    ``aiokafka_c_crc`` (the same, decoders checking each batch's CRC first as its
    consumer does by default), ``kafka_python`` and ``kafka_python_crc`` (likewise
    checking each batch's CRC).
    """
    try:
        loader = _LOADERS[name]
    except KeyError:
        raise ValueError(f"unknown implementation {name!r}; one of {sorted(_LOADERS)}") from None
    return loader()
