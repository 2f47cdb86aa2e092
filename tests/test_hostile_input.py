"""Bad input never crashes the decoders (reliability.md §4.5/§4.6, rows P1-P12).

For any bytes, every read function of both kernels either returns a clean result or raises
a :class:`~kafkastore.errors.KafkaStoreError` subclass: never IndexError, struct.error,
SystemError, MemoryError, OverflowError, UnicodeError, and never a segfault (which would
kill the test run). ``scan_batches`` never raises at all for bad bytes. The two kernels
give the same outcome on the same input. Declared sizes never drive allocations, and a
compression bomb stops at ``max_decompressed_bytes``.
"""

from __future__ import annotations

import importlib
import json
import struct
import time
import tracemalloc
from pathlib import Path

import pytest
from _fuzz_targets import fix_crcs
from _helpers import (
    PURE_MODE,
    decompress,
    framed,
    legacy,
    rec,
    uvarint,
    v2_batch,
    varint,
    varlong,
    zz,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkastore import compression
from kafkastore.errors import CorruptRecordError, KafkaStoreError, RecordTooLargeError

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
INT32_MAX = (1 << 31) - 1
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
              HealthCheck.data_too_large]


def examples(n: int) -> int:
    """``n`` under the default profile; more under the ci/expensive profiles."""
    return max(n, settings.default.max_examples)


def _kernels():
    """[(name, record_batch, varint)] for every implementation available."""
    out = []
    for name, package in (("python", "kafkastore._pure"), ("cython", "kafkastore._ext")):
        try:
            rb = importlib.import_module(f"{package}.record_batch")
            vi = importlib.import_module(f"{package}.varint")
        except ImportError:
            if name == "cython" and PURE_MODE:
                continue
            raise
        rb.set_decompressor(decompress)
        out.append((name, rb, vi))
    return out


@pytest.fixture(scope="module")
def kernels():
    return _kernels()


# == builders =============================================================================


# == observing every read function ==========================================================

FORBIDDEN = (IndexError, struct.error, SystemError, MemoryError, OverflowError, UnicodeError,
             KeyError, AttributeError, AssertionError, RecursionError)


class Crash(Exception):
    """An exception that is not a KafkaStoreError escaped a decoder."""


def guarded(fn):
    """('ok', value) or ('err', class, position); anything else is a Crash."""
    try:
        return ("ok", fn())
    except KafkaStoreError as exc:
        return ("err", type(exc).__name__, exc.position)
    except Exception as exc:  # noqa: BLE001
        raise Crash(f"{type(exc).__name__}: {exc}") from exc


def summarize_batch(b):
    # last_sequence is left out: tests/kernels/test_record_batch.py pins it down
    # (test_last_sequence_matches_java_for_any_header) for every header value.
    fields = {}
    for name in ("position", "magic", "base_offset", "last_offset", "next_offset",
                 "batch_length", "size_in_bytes", "partition_leader_epoch", "crc",
                 "attributes", "last_offset_delta", "first_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "record_count",
                 "is_transactional", "is_control", "has_delete_horizon", "delete_horizon_ms"):
        fields[name] = guarded(lambda n=name: getattr(b, n))
    fields["compression"] = guarded(lambda: int(b.compression))
    fields["timestamp_type"] = guarded(lambda: int(b.timestamp_type))
    fields["is_valid"] = guarded(b.is_valid)
    fields["records"] = guarded(lambda: [
        (r.offset, r.timestamp, int(r.timestamp_type), r.key, r.value, r.headers) for r in b])
    return fields


def walk(mod, data, **kw):
    out = []

    def run():
        for b in mod.iter_batches(data, **kw):
            out.append(summarize_batch(b))

    out.append(guarded(run))
    return out


def observe(rb, vi, data, *, limit=8 * MIB):
    """Call every read function on ``data``; a non-KafkaStoreError raises Crash."""
    result = {}
    result["iter"] = walk(rb, data, max_decompressed_bytes=limit)
    result["iter_lax"] = walk(rb, data, validate=False, max_decompressed_bytes=limit)
    for validate in (True, False):
        try:
            s = rb.scan_batches(data, validate=validate)
        except Exception as exc:  # noqa: BLE001 - scan never raises for bad bytes
            raise Crash(f"scan_batches raised {type(exc).__name__}: {exc}") from exc
        assert s.error is None or isinstance(s.error, CorruptRecordError)
        assert 0 <= s.valid_bytes <= len(data)
        result[f"scan_{validate}"] = (
            [getattr(s, c).tolist() for c in ("position", "size", "magic", "base_offset",
                                              "last_offset", "max_timestamp", "record_count")],
            s.valid_bytes, None if s.error is None else (type(s.error).__name__, s.error.position))
    for validate in (True, False):
        result[f"columns_{validate}"] = guarded(lambda v=validate: {
            k: a.tolist() for k, a in rb.decode_columns(
                data, validate=v, include_control=True, max_decompressed_bytes=limit).items()})
    for pos in sorted({0, min(1, len(data)), len(data) // 2, max(len(data) - 17, 0), len(data)}):
        result[f"read_{pos}"] = guarded(lambda p=pos: summarize_batch(
            rb.read_batch(data, p, max_decompressed_bytes=limit)))
        result[f"varint_{pos}"] = guarded(lambda p=pos: vi.decode_varint(data, p))
        result[f"varlong_{pos}"] = guarded(lambda p=pos: vi.decode_varlong(data, p))
    return result


def check_all(kernels, data):
    """(a) no crash on any kernel, (c) every kernel gives the same outcome."""
    outcomes = {}
    for name, rb, vi in kernels:
        try:
            outcomes[name] = observe(rb, vi, data)
        except Crash as exc:
            raise AssertionError(
                f"{name} kernel crashed on {data[:64].hex()}... ({len(data)} bytes): {exc}"
            ) from exc
    if len(outcomes) == 2:
        a, b = outcomes["python"], outcomes["cython"]
        for key in a:
            assert a[key] == b[key], (key, data[:64].hex(), len(data))


# == the harness itself ======================================================================


def test_the_harness_reports_a_crash_and_a_disagreement(kernels):
    """check_all fails on a non-KafkaStoreError and on kernels that disagree."""
    import types

    name, rb, vi = kernels[0]

    def broken_iter(*args, **kwargs):
        raise IndexError("index out of range")

    broken = types.SimpleNamespace(**{k: getattr(rb, k) for k in dir(rb) if not k.startswith("__")})
    broken.iter_batches = broken_iter
    data = v2_batch(rec(), count=1)
    with pytest.raises(AssertionError, match="IndexError"):
        check_all([(name, broken, vi)], data)

    def other_scan(data, start=0, end=None, *, validate=True):
        s = rb.scan_batches(data, start, end, validate=validate)
        s.valid_bytes = 0
        return s

    liar = types.SimpleNamespace(**vars(broken))
    liar.iter_batches = rb.iter_batches
    liar.scan_batches = other_scan
    with pytest.raises(AssertionError):
        check_all([("python", rb, vi), ("cython", liar, vi)], data)


# == (a) random bytes ========================================================================


@settings(max_examples=examples(150), suppress_health_check=FIXTURE_OK)
@given(st.binary(max_size=4096))
def test_random_bytes(kernels, data):
    check_all(kernels, data)


@st.composite
def entry_shaped(draw):
    """Bytes that look like entries (right size fields, magic 0-2, often a valid CRC), so
    random content gets past the framing checks to the header and record parsers."""
    out = b""
    for _ in range(draw(st.integers(1, 3))):
        magic = draw(st.sampled_from([0, 1, 2, 2, 2, 2, 2, 3]))
        if magic == 2:
            n = draw(st.integers(0, 6))
            records = b"".join(
                draw(st.one_of(
                    st.builds(rec, st.integers(-3, 5), key=st.none() | st.binary(max_size=8),
                              value=st.none() | st.binary(max_size=8)),
                    st.binary(max_size=24).map(framed),
                    st.binary(max_size=24)))
                for _ in range(n))
            codec = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5]))
            if codec and draw(st.booleans()):
                records = compression.compress(min(codec, 4), records)
            count = draw(st.one_of(st.integers(-2, 8), st.just(INT32_MAX),
                                   st.integers(-(1 << 31), INT32_MAX)))
            attrs = codec | draw(st.sampled_from([0, 0x08, 0x10, 0x20, 0x30, 0x40, 0xFF00]))
            entry = v2_batch(records, count=count, attributes=attrs,
                             last_offset_delta=draw(st.integers(-(1 << 31), INT32_MAX)),
                             base_offset=draw(st.integers(-(1 << 63), (1 << 63) - 1)),
                             first_ts=draw(st.integers(-(1 << 63), (1 << 63) - 1)),
                             bseq=draw(st.integers(-(1 << 31), INT32_MAX)))
        elif magic in (0, 1):
            codec = draw(st.sampled_from([0, 0, 1, 2, 3, 4, 7]))
            value = draw(st.none() | st.binary(max_size=40))
            if codec and value is not None and draw(st.booleans()):
                inner = legacy(magic, draw(st.integers(0, 5)), b"k", value)
                value = compression.compress(min(codec, 3), inner, magic=magic)
            entry = legacy(magic, draw(st.integers(-1, 10)),
                           draw(st.none() | st.binary(max_size=8)), value,
                           attributes=codec | draw(st.sampled_from([0, 0x08])),
                           timestamp=draw(st.integers(-5, 5)),
                           key_len=draw(st.none() | st.integers(-2, 60)),
                           value_len=draw(st.none() | st.integers(-2, 60)))
        else:
            entry = struct.pack(">qi", 0, 60) + bytes([0, 0, 0, 0, magic]) + bytes(55)
        if draw(st.booleans()):  # a wrong size field
            delta = draw(st.integers(-20, 20))
            size = struct.unpack_from(">i", entry, 8)[0] + delta
            entry = entry[:8] + struct.pack(">i", size) + entry[12:]
        out += entry
    out += draw(st.binary(max_size=30))
    return fix_crcs(out) if draw(st.booleans()) else out


@settings(max_examples=examples(300), suppress_health_check=FIXTURE_OK)
@given(entry_shaped())
def test_random_entry_shaped_bytes(kernels, data):
    check_all(kernels, data)


# == (b) mutated reference vectors ============================================================


def _vector_paths():
    from _vectors import VECTORS

    if VECTORS is None:
        return []
    base = VECTORS
    try:
        manifest = json.loads((base / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return []
    return [v["path"] for v in manifest["vectors"]]


VECTOR_PATHS = _vector_paths()


@pytest.fixture(scope="module")
def vector_bytes(vectors_dir):
    return {p: (vectors_dir / p).read_bytes() for p in VECTOR_PATHS}


INTERESTING_INT32 = [0, 1, 13, 14, 21, 22, 48, 49, 60, 61, 0x7F, 0x80, 0xFFFF, INT32_MAX,
                     -1, -(1 << 31)]


@st.composite
def mutations(draw, data: bytes):
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        n = len(out)
        # half the edits land in the first 128 bytes, where the headers are
        hot = min(n, 128)
        pos = draw(st.integers(0, max(hot - 1, 0)) | st.integers(0, max(n - 1, 0)))
        kind = draw(st.sampled_from(["flip", "byte", "truncate", "insert", "int32", "delete"]))
        if kind == "flip" and n:
            out[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and n:
            out[pos] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del out[draw(st.integers(0, n)):]
        elif kind == "insert":
            out[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and n:
            del out[pos:pos + draw(st.integers(1, 8))]
        elif kind == "int32" and n >= 4:
            # a length field: the entry size (8), a v2 count (57), a legacy key length (30),
            # or anywhere
            at = draw(st.sampled_from([8, 23, 57, 18, 26, 30, min(pos, n - 4)]))
            at = min(at, n - 4)
            value = draw(st.sampled_from(INTERESTING_INT32) | st.integers(-(1 << 31), INT32_MAX))
            out[at:at + 4] = struct.pack(">i", value)
    result = bytes(out)
    return fix_crcs(result) if draw(st.booleans()) else result


@settings(max_examples=examples(400), suppress_health_check=FIXTURE_OK)
@given(st.data())
def test_mutated_vectors(kernels, vector_bytes, data):
    assume(vector_bytes)
    path = data.draw(st.sampled_from(sorted(vector_bytes)), label="vector")
    mutated = data.draw(mutations(vector_bytes[path]), label="mutated")
    check_all(kernels, mutated)


def test_every_vector_survives_single_bit_flips_in_its_header(kernels, vector_bytes):
    """Deterministic sweep: every bit of the first entry's header, each vector."""
    if not vector_bytes:
        pytest.skip("no vectors")
    small = {p: d for p, d in vector_bytes.items() if len(d) <= 4096}
    for path, data in sorted(small.items()):
        for i in range(0, min(len(data), 61)):
            bit = (i * 5) % 8
            out = bytearray(data)
            out[i] ^= 1 << bit
            for name, rb, vi in kernels:
                try:
                    observe(rb, vi, bytes(out))
                except Crash as exc:
                    raise AssertionError(f"{name}: {path} byte {i} bit {bit}: {exc}") from exc


# == (d) hostile declared sizes =================================================================

BIG = INT32_MAX
HOSTILE = {
    "recordsCount 2**31-1, 10 bytes of records": v2_batch(rec() + b"\x02", count=BIG),
    "recordsCount 2**31-1, gzip records": v2_batch(compression.compress(1, rec() + rec(1)),
                                                   count=BIG, attributes=1),
    "recordsCount 2**31-1, no records": v2_batch(b"", count=BIG),
    "header count 2**31-1": v2_batch(framed(b"\x00\x00\x00" + varint(1) + b"k" + varint(1) + b"v"
                                            + varint(BIG) + b"\x00" * 6), count=1),
    "header key length 2**31-1": v2_batch(framed(b"\x00\x00\x00\x01\x01" + varint(1)
                                                 + varint(BIG) + b"abc"), count=1),
    "header value length 2**31-1": v2_batch(framed(b"\x00\x00\x00\x01\x01" + varint(1)
                                                   + varint(1) + b"h" + varint(BIG) + b"ab"),
                                            count=1),
    "key length 2**31-1": v2_batch(framed(b"\x00\x00\x00" + varint(BIG) + b"key"), count=1),
    "value length 2**31-1": v2_batch(framed(b"\x00\x00\x00\x01" + varint(BIG) + b"val"), count=1),
    "record length 2**31-1": v2_batch(varint(BIG) + b"\x00" * 9, count=1),
    "batchLength 2**31-1": v2_batch(rec(), count=1, batch_length=BIG),
    "legacy size 2**31-1": legacy(1, 0, b"k", b"v", size=BIG),
    "legacy key length 2**31-1": legacy(1, 0, b"k", b"v", key_len=BIG),
    "legacy value length 2**31-1": legacy(0, 0, b"k", b"v", value_len=BIG),
    "legacy wrapper, inner size 2**31-1": legacy(
        1, 0, None, compression.compress(1, legacy(1, 0, b"k", b"v", size=BIG)), attributes=1),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_declared_sizes_never_allocate(rb, case):
    data = HOSTILE[case] + v2_batch(rec(), count=1)  # something valid after it
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        outcomes = []
        for call in (
            lambda: [list(b) for b in rb.iter_batches(data, validate=False)],
            lambda: [list(b) for b in rb.iter_batches(data)],
            lambda: rb.decode_columns(data, validate=False),
            lambda: rb.decode_columns(data),
            lambda: list(rb.read_batch(data)),
            lambda: rb.scan_batches(data, validate=False),
        ):
            try:
                call()
                outcomes.append("ok")
            except KafkaStoreError as exc:
                assert isinstance(exc, CorruptRecordError), exc
                outcomes.append("corrupt")
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB, f"peak {peak / MIB:.1f} MiB"
    assert elapsed < 5, f"{elapsed:.1f} s"
    # every hostile size is corrupt to the record readers (the batchLength case is a
    # partial tail to iter_batches, which stops silently, but read_batch must refuse it)
    assert outcomes[4] == "corrupt"
    if not case.startswith(("batchLength", "legacy size")):
        assert outcomes[:4] == ["corrupt"] * 4, outcomes


# == (e) compression bombs ========================================================================

BOMB_VALUE = 32 * MIB


@pytest.fixture(scope="module")
def bomb_payloads():
    body = b"\x00" + varlong(0) + varint(0) + varint(1) + b"k" + uvarint(zz(BOMB_VALUE, 32))
    record = framed(body + bytes(BOMB_VALUE) + varint(0))
    return {codec: compression.compress(codec, record) for codec in (1, 2, 3, 4)}


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compression_bomb_in_a_v2_batch(rb, bomb_payloads, codec):
    payload = bomb_payloads[codec]
    assert len(payload) < 4 * MIB  # it is a bomb: small in, 32 MiB out
    first = v2_batch(rec(), count=1)
    data = first + v2_batch(payload, count=1, attributes=codec, base_offset=1)
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError) as info:
            for b in rb.iter_batches(data, max_decompressed_bytes=MIB):
                list(b)
        assert info.value.limit == MIB
        assert info.value.position == len(first)
        with pytest.raises(RecordTooLargeError) as info:
            list(rb.RecordBatch(data, len(first), max_decompressed_bytes=MIB))
        assert info.value.position == len(first)
        with pytest.raises(RecordTooLargeError):
            rb.decode_columns(data, max_decompressed_bytes=MIB)
        with pytest.raises(RecordTooLargeError):
            rb.decode_columns(data, validate=False, max_decompressed_bytes=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MIB + 16 * MIB, f"peak {peak / MIB:.1f} MiB"
    # the header walk does not inflate anything
    assert rb.scan_batches(data).valid_bytes == len(data)


def test_the_bomb_is_real(rb, bomb_payloads):
    """Without the bound the zstd bomb inflates to a 32 MiB value (so the limit is what
    stopped it above)."""
    data = v2_batch(bomb_payloads[4], count=1, attributes=4)
    (record,) = list(rb.RecordBatch(data, max_decompressed_bytes=64 * MIB))
    assert len(record.value) == BOMB_VALUE


@pytest.mark.parametrize("codec", [1, 2, 3], ids=["gzip", "snappy", "lz4"])
def test_compression_bomb_in_a_legacy_wrapper(rb, codec):
    inner = legacy(1, 0, b"k", bytes(8 * MIB))
    wrapper = legacy(1, 0, None, compression.compress(codec, inner, magic=1), attributes=codec)
    with pytest.raises(RecordTooLargeError):
        list(rb.read_batch(wrapper, max_decompressed_bytes=MIB))
    with pytest.raises(RecordTooLargeError):
        rb.decode_columns(wrapper, max_decompressed_bytes=MIB)
    with pytest.raises(RecordTooLargeError):
        rb.read_batch(wrapper, max_decompressed_bytes=MIB).base_offset
