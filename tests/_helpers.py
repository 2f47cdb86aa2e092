"""Helpers shared by the test modules: kernel loading and hand-built record bytes.

Imported as ``from _helpers import ...`` (tests/ is on ``sys.path`` while pytest runs, as
for ``_vectors.py`` and ``strategies.py``). The byte builders follow the spec
(kafka-storage.md §2) with struct, crc32c and zlib only, independently of kafkastore's
encoder, so tests can put known values into the bytes and compare what the decoders read.
"""

from __future__ import annotations

import importlib
import os
import struct
import zlib

import crc32c
import pytest

from kafkastore import compression

#: KAFKASTORE_NO_EXTENSIONS is set: a missing compiled kernel is a skip, not a failure.
PURE_MODE = os.environ.get("KAFKASTORE_NO_EXTENSIONS", "") not in ("", "0")


# == kernels ==============================================================================


def decompress(codec, data, max_size, magic):
    """The decompressor the kernels' ``set_decompressor`` takes: kafkastore's codecs."""
    return compression.decompress(codec, data, max_size=max_size, magic=magic)


def compiled_kernel(name: str):
    """``kafkastore._ext.<name>``; the test is skipped in pure mode if it is not built."""
    try:
        return importlib.import_module(f"kafkastore._ext.{name}")
    except ImportError as exc:
        if PURE_MODE:
            pytest.skip(f"compiled extensions not built ({exc})")
        raise


def record_batch_pair():
    """``(pure, ext)``: both record_batch kernels, each with the decompressor installed."""
    pure = importlib.import_module("kafkastore._pure.record_batch")
    ext = compiled_kernel("record_batch")
    for mod in (pure, ext):
        mod.set_decompressor(decompress)
    return pure, ext


# == byte builders (from the spec, independent of kafkastore) =============================


def zz(value: int, bits: int) -> int:
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(v: int) -> bytes:
    return uvarint(zz(v, 32))


def varlong(v: int) -> bytes:
    return uvarint(zz(v, 64))


def len_bytes(b):
    return varint(-1) if b is None else varint(len(b)) + b


def record_body(offset_delta=0, ts_delta=0, key=b"k", value=b"v", headers=()) -> bytes:
    """A v2 record without its length prefix; headers are (bytes key, bytes|None value)."""
    body = b"\x00" + varlong(ts_delta) + varint(offset_delta) + len_bytes(key) + len_bytes(value)
    body += varint(len(headers))
    for hk, hv in headers:
        body += varint(len(hk)) + hk + len_bytes(hv)
    return body


def rec(offset_delta=0, ts_delta=0, key=b"k", value=b"v", headers=()) -> bytes:
    body = record_body(offset_delta, ts_delta, key, value, headers)
    return varint(len(body)) + body


def framed(body: bytes) -> bytes:
    """A hand-crafted record body with its (correct) length prefix."""
    return varint(len(body)) + body


def v2_batch(records: bytes = b"", *, count: int = 0, base_offset: int = 0,
             last_offset_delta: int = 0, epoch: int = -1, attributes: int = 0,
             first_ts: int = 0, max_ts: int = 0, pid: int = -1, pepoch: int = -1,
             bseq: int = -1, magic: int = 2, batch_length: int | None = None,
             crc: int | None = None) -> bytes:
    """A magic 2 batch laid out as in kafka-storage.md §2.2; CRC-32C over [21, end)."""
    body = struct.pack(">Hiqqqhii", attributes & 0xFFFF, last_offset_delta, first_ts, max_ts,
                       pid, pepoch, bseq, count) + records
    if crc is None:
        crc = crc32c.crc32c(body)
    length = 4 + 1 + 4 + len(body) if batch_length is None else batch_length
    return struct.pack(">qiiBI", base_offset, length, epoch, magic & 0xFF, crc) + body


def legacy(magic: int, offset: int, key, value, *, attributes: int = 0,
           timestamp: int | None = 0, key_len: int | None = None,
           value_len: int | None = None, size: int | None = None) -> bytes:
    """A magic 0/1 message as in kafka-storage.md §2.1; CRC-32 over [magic, end).

    ``key_len`` / ``value_len`` / ``size`` override the declared lengths (hostile input).
    """
    body = bytes([magic, attributes & 0xFF])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for part, declared in ((key, key_len), (value, value_len)):
        n = (-1 if part is None else len(part)) if declared is None else declared
        body += struct.pack(">i", n) + (part or b"")
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg) if size is None else size) + msg


# == observation ==========================================================================


def outcome(fn, error):
    """``("ok", fn())``, or ``error(exc)`` if it raised: differential tests compare both."""
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - the error is part of the outcome
        return error(exc)


def walk_outcomes(mod, data, view, error, **kw) -> list:
    """``view(batch)`` for every batch ``mod.iter_batches(data, **kw)`` yields, then
    ``error(exc)`` if the walk stopped on an exception."""
    seen = []
    try:
        for batch in mod.iter_batches(data, **kw):
            seen.append(view(batch))
    except Exception as exc:  # noqa: BLE001
        seen.append(error(exc))
    return seen


def column_rows(cols):
    """``decode_columns`` output as ``(offset, timestamp, timestamp_type, key, value,
    header_count)`` rows, keys and values as bytes or None."""
    rows = []
    for i in range(len(cols["offset"])):
        def item(name):
            if cols[name + "_null"][i]:
                return None
            offs = cols[name + "_offsets"]
            return cols[name + "_data"][offs[i]:offs[i + 1]].tobytes()
        rows.append((int(cols["offset"][i]), int(cols["timestamp"][i]),
                     int(cols["timestamp_type"][i]), item("key"), item("value"),
                     int(cols["header_count"][i])))
    return rows


def dir_files(directory, suffixes: tuple[str, ...]) -> dict[str, bytes]:
    """The bytes of each file in ``directory`` whose name ends with one of ``suffixes``,
    by name: a log directory's files, to compare two logs byte for byte."""
    out = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(suffixes):
            with open(os.path.join(directory, name), "rb") as f:
                out[name] = f.read()
    return out


# == a fast path against its general path =================================================


def random_reads(log, rng, n: int, max_size: int):
    """``n`` reads ``(offset, max_bytes, min_one_message)`` around ``log``'s range (two
    offsets either side of it included)."""
    lo, hi = log.log_start_offset, log.log_end_offset
    return [(rng.randint(lo - 2, hi + 2), rng.choice((0, 1, rng.randint(0, max_size))),
             rng.random() < 0.5) for _ in range(n)]


def compare_paths(cases, outcome, force_general, monkeypatch) -> None:
    """``outcome(*case)`` for every case, on the fast path and then with
    ``force_general(monkeypatch)`` (which returns its undo) in force: the same answers."""
    fast = [outcome(*c) for c in cases]
    undo = force_general(monkeypatch)
    try:
        slow = [outcome(*c) for c in cases]
    finally:
        undo()
    for c, f, s in zip(cases, fast, slow):
        assert f == s, c
