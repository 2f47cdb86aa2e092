"""Resource limits on the whole read paths (issue 8 "Hostile input"; reliability.md §4.5,
rows P2, P5-P10).

tests/test_hostile_input.py checks the decoder kernels on buffers (declared sizes never
allocate, bombs stop at ``max_decompressed_bytes``, measured with tracemalloc). This
module puts the same kinds of bytes where a user meets them: inside a segment file of a
partition directory, behind a valid batch, with a valid CRC (so recovery accepts the
batch and the damage is met when records are decoded). Each file is then

* opened as a log with full recovery and read back with :meth:`Log.read` (records
  decoded, CRC-checked),
* read with :func:`kafkastore.records.decode_columns` and
  :func:`~kafkastore.records.iter_batches` over the file's bytes, and
* walked with :meth:`FileRecords.scan_chunks` (the recovery scan).

Oracle: the first (valid) batch reads back exactly; the hostile batch gives a
:class:`~kafkastore.errors.KafkaStoreError` (a :class:`CorruptRecordError` or, for a
bomb, :class:`RecordTooLargeError`) from every decoding path, never another exception;
each path takes under :data:`DEADLINE` seconds of CPU time (CPU, not wall-clock time, so a
busy machine does not fail it; a bomb that loops still does).

Memory. Declared sizes (batch, record, key, value, header lengths, header counts, record
counts) must not drive allocations: the Python heap peak (tracemalloc) of each case stays
under 16 MiB. Compression bombs (gzip, xerial snappy, lz4 frame, zstd, and gzip inside a
legacy magic-1 wrapper) that would inflate to 1 GiB (snappy: 256 MiB, its ratio is ~21x,
plus a block whose length preamble claims 4 GiB - 1) run in a child process that reports
``ru_maxrss`` before and after the read: the growth must stay below the library's
``DEFAULT_MAX_DECOMPRESSED_BYTES`` (128 MiB, what a read without an explicit limit allows
one batch) plus :data:`SLACK`, far below the 1 GiB the bytes ask for.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from _helpers import framed, legacy, rec, uvarint, v2_batch, varint, varlong, zz
from _reliability import tiered

from kafkastore import compression
from kafkastore.errors import CorruptRecordError, KafkaStoreError, RecordTooLargeError
from kafkastore.file_records import FileRecords
from kafkastore.log import Log
from kafkastore.records import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    decode_columns,
    iter_batches,
)

MIB = 1 << 20
GIB = 1 << 30
INT32_MAX = (1 << 31) - 1
DEADLINE = 10.0
#: What a bomb may add to the peak RSS on top of one batch's decompression limit.
SLACK = 64 * MIB
HEAP_CAP = 16 * MIB


def _set_base(entry: bytes, offset: int) -> bytes:
    """Bytes 0-7 (base offset / legacy offset) are outside every CRC: set them freely."""
    return struct.pack(">q", offset) + entry[8:]


def _hdr_record(*fields: bytes) -> bytes:
    return framed(b"".join(fields))


# Each: one batch, CRC valid, whose records break a limit. Kernel-level checks of the
# same shapes are in tests/test_hostile_input.py; here they travel through the log.
HOSTILE = {
    "batchLength 2**31-1": v2_batch(rec(), count=1, batch_length=INT32_MAX),
    "record length 2**31-1": v2_batch(varint(INT32_MAX) + b"\x00" * 9, count=1),
    "record length negative": v2_batch(varint(-5) + b"\x00" * 9, count=1),
    "key length 2**31-1": v2_batch(_hdr_record(b"\x00\x00\x00", varint(INT32_MAX), b"key"),
                                   count=1),
    "key length -2": v2_batch(_hdr_record(b"\x00\x00\x00", varint(-2), b"key"), count=1),
    "value length 2**31-1": v2_batch(_hdr_record(b"\x00\x00\x00\x01", varint(INT32_MAX),
                                                 b"val"), count=1),
    "header count 2**31-1": v2_batch(_hdr_record(b"\x00\x00\x00", varint(1), b"k", varint(1),
                                                 b"v", varint(INT32_MAX), b"\x00" * 6),
                                     count=1),
    "header count -1": v2_batch(_hdr_record(b"\x00\x00\x00", varint(1), b"k", varint(1), b"v",
                                            varint(-1)), count=1),
    "header key length 2**31-1": v2_batch(_hdr_record(b"\x00\x00\x00\x01\x01", varint(1),
                                                      varint(INT32_MAX), b"abc"), count=1),
    "header value length 2**31-1": v2_batch(_hdr_record(
        b"\x00\x00\x00\x01\x01", varint(1), varint(1), b"h", varint(INT32_MAX), b"ab"),
        count=1),
    "6-byte varint (record length)": v2_batch(b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 9,
                                              count=1),
    "6-byte varint (key length)": v2_batch(_hdr_record(b"\x00\x00\x00",
                                                       b"\xff\xff\xff\xff\xff\x01", b"k"),
                                           count=1),
    "11-byte varlong (timestamp delta)": v2_batch(_hdr_record(
        b"\x00", b"\x80" * 10 + b"\x01", b"\x00", varint(1), b"k", varint(1), b"v", b"\x00"),
        count=1),
    "varint cut at the end of the batch": v2_batch(rec() + b"\x80\x80", count=2),
    "record count too many": v2_batch(rec(), count=2),
    "record count too few": v2_batch(rec() + rec(1), count=1, last_offset_delta=1),
    "record count -1": v2_batch(rec(), count=-1),
    "record count 2**31-1": v2_batch(rec(), count=INT32_MAX),
    "record count 2**31-1, gzip": v2_batch(compression.compress(1, rec() + rec(1)),
                                           count=INT32_MAX, attributes=1),
    "compressed record count too many": v2_batch(compression.compress(4, rec()), count=3,
                                                 attributes=4),
    "legacy size 2**31-1": legacy(1, 0, b"k", b"v", size=INT32_MAX),
    "legacy key length 2**31-1": legacy(1, 0, b"k", b"v", key_len=INT32_MAX),
    "legacy value length 2**31-1": legacy(0, 0, b"k", b"v", value_len=INT32_MAX),
    "legacy wrapper, inner size 2**31-1": legacy(
        1, 0, None, compression.compress(1, legacy(1, 0, b"k", b"v", size=INT32_MAX)),
        attributes=1),
    "legacy wrapper inside a legacy wrapper": legacy(
        1, 0, None, compression.compress(1, legacy(1, 0, None, compression.compress(
            1, legacy(1, 0, b"k", b"v")), attributes=1)), attributes=1),
}
#: Cases whose batch header itself is what lies: recovery cuts them (nothing to decode).
HEADER_LIES = {"batchLength 2**31-1", "legacy size 2**31-1"}

FIRST = v2_batch(rec(key=b"first", value=b"ok"), count=1)


def _segment(directory: Path, hostile: bytes) -> Path:
    directory.mkdir(parents=True)
    path = directory / "00000000000000000000.log"
    path.write_bytes(FIRST + _set_base(hostile, 1))
    return path


def _paths(directory: Path, data: bytes):
    """Every read path, as (name, callable); each returns the values it read."""
    def log_read():
        log = Log.open(str(directory), recovery_point=0, had_clean_shutdown=False)
        try:
            out = []
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                batches = list(log.read(offset, 1 << 20).batches(validate=True))
                if not batches:
                    break
                for batch in batches:
                    out.extend(bytes(r.value) for r in batch if r.offset >= offset)
                    offset = max(offset, batch.last_offset + 1)
            return out
        finally:
            log.close_handlers()

    def columns():
        cols = decode_columns(data)
        return [bytes(v) for v in cols.to_pydict()["value"]] if hasattr(cols, "to_pydict") \
            else cols

    def batches():
        return [bytes(r.value) for b in iter_batches(data, validate=True) for r in b]

    def scan():
        records = FileRecords.open(str(directory / "00000000000000000000.log"),
                                   file_already_exists=True, mutable=False)
        try:
            return [scan.valid_bytes for _, _, scan in records.scan_chunks(0)]
        finally:
            records.close()

    return [("Log.read", log_read), ("decode_columns", columns), ("iter_batches", batches),
            ("scan_chunks", scan)]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_declared_sizes_through_the_read_paths(tmp_path, case, figures):
    data = FIRST + _set_base(HOSTILE[case], 1)
    _segment(tmp_path / "t-0", HOSTILE[case])
    tracemalloc.start()
    try:
        for name, call in _paths(tmp_path / "t-0", data):
            t0 = time.thread_time()
            try:
                got = call()
                ok = True
            except KafkaStoreError as exc:
                assert isinstance(exc, CorruptRecordError), f"{name}: {exc!r}"
                ok = False
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"{case}, {name}: untyped {type(exc).__name__}: {exc}")
            elapsed = time.thread_time() - t0
            assert elapsed < DEADLINE, f"{case}, {name}: {elapsed:.1f} s of CPU"
            if name == "scan_chunks":
                assert got and got[0] >= len(FIRST)    # the scan never raises
            elif name == "Log.read":
                if case in HEADER_LIES:
                    assert ok and got == [b"ok"], got   # recovery cut the lying header
                else:
                    assert not ok, f"{case}: Log.read accepted {got!r}"
            elif case not in HEADER_LIES:
                assert not ok, f"{case}, {name}: accepted {got!r}"
            figures.add("resource-limit cases (declared sizes, per read path)", 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < HEAP_CAP, f"{case}: heap peak {peak / MIB:.1f} MiB"


def test_the_first_batch_survives_in_front_of_a_hostile_one(tmp_path):
    """The oracle's other half: the valid batch in front reads back exactly (the
    recovery cut keeps it, and a read of offset 0 alone does not touch what follows)."""
    _segment(tmp_path / "t-0", HOSTILE["record length 2**31-1"])
    log = Log.open(str(tmp_path / "t-0"), recovery_point=0, had_clean_shutdown=False)
    try:
        (batch,) = list(log.read(0, 1).batches())
        assert [(r.offset, bytes(r.key), bytes(r.value)) for r in batch] == [(0, b"first",
                                                                              b"ok")]
    finally:
        log.close_handlers()


# == compression bombs, measured in a child process ===============================================

BOMB = tiered(GIB, 2 * GIB)


def _record_prefix(value_size: int) -> bytes:
    """Everything of a one-record v2 batch's records area before the value bytes."""
    body_len = len(b"\x00" + varlong(0) + varint(0) + varint(1) + b"k"
                   + uvarint(zz(value_size, 32))) + value_size + 1
    return (varint(body_len) + b"\x00" + varlong(0) + varint(0) + varint(1) + b"k"
            + uvarint(zz(value_size, 32)))


def _streamed(codec: str, size: int) -> bytes:
    """A one-record records area of ``size`` zero value bytes, compressed without ever
    holding it uncompressed."""
    head, tail = _record_prefix(size), b"\x00"       # tail: header count 0
    chunk = bytes(4 * MIB)
    if codec == "gzip":
        comp = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        parts = [comp.compress(head)] + [comp.compress(chunk) for _ in range(size // len(chunk))]
        return b"".join(parts + [comp.compress(tail), comp.flush()])
    if codec == "lz4":
        comp = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                             block_linked=False)  # as Kafka writes it
        parts = [comp.begin(), comp.compress(head)]
        parts += [comp.compress(chunk) for _ in range(size // len(chunk))]
        return b"".join(parts + [comp.compress(tail), comp.flush()])
    if codec == "zstd":
        comp = zstandard.ZstdCompressor().compressobj()
        parts = [comp.compress(head)] + [comp.compress(chunk) for _ in range(size // len(chunk))]
        return b"".join(parts + [comp.compress(tail), comp.flush()])
    if codec == "snappy":
        # xerial framing, one raw snappy block per 32 KiB like snappy-java (~1.5 KiB each)
        import cramjam
        header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
        framed_block = struct.pack(">i", len(block)) + block
        first = bytes(cramjam.snappy.compress_raw(head))
        last = bytes(cramjam.snappy.compress_raw(tail))
        return b"".join([header, struct.pack(">i", len(first)), first,
                         framed_block * (size // (32 * 1024)),
                         struct.pack(">i", len(last)), last])
    raise AssertionError(codec)


def _lying_snappy() -> bytes:
    """A xerial stream whose one raw block's preamble claims 4 GiB - 1 bytes."""
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    block = uvarint((1 << 32) - 1) + b"\x00" * 64
    return header + struct.pack(">i", len(block)) + block


BOMBS = {
    "gzip": lambda: v2_batch(_streamed("gzip", BOMB), count=1, attributes=1),
    "snappy (xerial)": lambda: v2_batch(_streamed("snappy", 256 * MIB), count=1, attributes=2),
    "snappy preamble 4 GiB": lambda: v2_batch(_lying_snappy(), count=1, attributes=2),
    "lz4 frame": lambda: v2_batch(_streamed("lz4", BOMB), count=1, attributes=3),
    "zstd": lambda: v2_batch(_streamed("zstd", BOMB), count=1, attributes=4),
    "gzip in a legacy wrapper": lambda: legacy(
        1, 0, None, _legacy_gzip_bomb(BOMB), attributes=1),
}


def _legacy_gzip_bomb(size: int) -> bytes:
    """A gzip stream of one magic-1 message of ``size`` zero value bytes, streamed."""
    body_head = bytes([1, 0]) + struct.pack(">q", 0) + struct.pack(">i", -1) \
        + struct.pack(">i", size)
    crc = zlib.crc32(body_head)
    chunk = bytes(4 * MIB)
    for _ in range(size // len(chunk)):
        crc = zlib.crc32(chunk, crc)
    msg_head = struct.pack(">qi", 0, 4 + len(body_head) + size) + struct.pack(">I", crc) \
        + body_head
    comp = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [comp.compress(msg_head)] + [comp.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts + [comp.flush()])


CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    import kafkastore
    from kafkastore.errors import KafkaStoreError
    from kafkastore.log import Log
    from kafkastore.records import decode_columns, iter_batches
    directory, how = sys.argv[1], sys.argv[2]
    path = os.path.join(directory, "00000000000000000000.log")
    if how == "Log.read":
        log = Log.open(directory, recovery_point=0, had_clean_shutdown=False)
        target = lambda: [list(b) for b in log.read(1, 1 << 20).batches(validate=True)]
    else:
        with open(path, "rb") as f:
            data = f.read()
        if how == "decode_columns":
            target = lambda: decode_columns(data)
        else:
            target = lambda: [list(b) for b in iter_batches(data, validate=True)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()   # CPU time: a busy machine must not fail the bound
    try:
        target()
        outcome = "ok"
    except KafkaStoreError as exc:
        outcome = type(exc).__name__
    except BaseException as exc:
        outcome = "untyped " + type(exc).__name__ + ": " + str(exc)[:200]
    elapsed = time.process_time() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"outcome": outcome, "growth_kib": after - before,
                      "elapsed": elapsed, "backend": kafkastore.BACKEND}))
""")


@pytest.fixture(scope="module")
def bomb_dirs(tmp_path_factory):
    out = {}
    for name, build in BOMBS.items():
        directory = tmp_path_factory.mktemp("bomb") / "t-0"
        _segment(directory, build())
        out[name] = directory
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["Log.read", "decode_columns", "iter_batches"])
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_compression_bombs_stay_within_the_limit(bomb_dirs, bomb, how, figures):
    directory = bomb_dirs[bomb]
    size = os.path.getsize(directory / "00000000000000000000.log")
    assert size < 64 * MIB   # small in: the bomb is in the ratio
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))  # the parent's kafkastore
    done = subprocess.run([sys.executable, "-c", CHILD, str(directory), how], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = "CorruptRecordError" if bomb == "snappy preamble 4 GiB" else "RecordTooLargeError"
    assert result["outcome"] in (expected, RecordTooLargeError.__name__), result
    growth = result["growth_kib"] * 1024
    cap = DEFAULT_MAX_DECOMPRESSED_BYTES + SLACK
    assert growth < cap, f"{bomb} via {how}: RSS grew {growth / MIB:.0f} MiB (cap " \
                         f"{cap / MIB:.0f} MiB)"
    assert result["elapsed"] < 60, result
    figures.add("resource-limit cases (compression bombs, measured in a child)", 1)
