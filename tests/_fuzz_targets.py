"""Fuzz targets for every decoder of untrusted bytes (reliability.md §5.3/§5.4, issue 8).

One function per decoder surface, ``target(data: bytes) -> None``. A target feeds the
bytes to kafkastore and checks what comes back; it returns normally when kafkastore
either decoded the bytes or refused them with a :class:`~kafkastore.errors.KafkaStoreError`,
and lets anything else escape: any other exception (IndexError, struct.error,
OverflowError, MemoryError, an ``AssertionError`` from a check below...) is a finding.
There is no documented API-misuse exception here: every call is made with valid
arguments, so a ValueError or TypeError that is not a KafkaStoreError is a finding too.

The same functions serve two callers:

* ``fuzz/atheris_main.py`` runs them under atheris/libFuzzer, with the compiled kernels
  built with ASan/UBSan and coverage (``fuzz/build.sh``) or with the pure twins
  (``KAFKASTORE_NO_EXTENSIONS=1``);
* ``tests/test_fuzz_regressions.py`` replays saved crash inputs and corpus seeds through
  them in the ordinary suite, on both backends.

This module therefore needs nothing beyond kafkastore and the standard library (not
atheris): the structure-aware target takes its choices from the input through
:class:`Provider`, a small deterministic stand-in for libFuzzer's FuzzedDataProvider, so a
saved input replays identically without atheris installed.

``TARGETS`` maps each name to its function; :func:`seeds` gives the seed inputs for a
target, built with kafkastore's own encoders plus the shared reference vectors when
present.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path

import crc32c
from _protocol_examples import normalize

from kafkastore import compression, records
from kafkastore.checkpoint import CheckpointFile, OffsetCheckpointFile
from kafkastore.errors import CorruptRecordError, InvalidRequestError, KafkaStoreError
from kafkastore.index import OffsetIndex, TimeIndex
from kafkastore.log import Log
from kafkastore.server import protocol

__all__ = ["TARGETS", "BATCH_FIELDS", "Provider", "seeds", "fix_crcs"]

#: Bound on what one compressed payload may inflate to inside a target: keeps every
#: input far below libFuzzer's -rss_limit_mb while still reaching the limit checks.
LIMIT = 1 << 20
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
HERE = Path(__file__).resolve().parent

#: Every header property of a batch (v2 and legacy), for code that reads them all.
BATCH_FIELDS = (
    "position", "magic", "base_offset", "last_offset", "next_offset", "batch_length",
    "size_in_bytes", "partition_leader_epoch", "crc", "attributes", "last_offset_delta",
    "first_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
    "record_count", "is_transactional", "is_control", "has_delete_horizon",
    "delete_horizon_ms", "compression", "timestamp_type", "last_sequence",
)


def _ok(fn, *args, **kwargs):
    """``fn(...)``, or None when kafkastore refused the input with a KafkaStoreError."""
    try:
        return fn(*args, **kwargs)
    except KafkaStoreError:
        return None


# == helpers ===============================================================================


def fix_crcs(data: bytes) -> bytes:
    """Recompute the CRC of every complete top-level entry that looks like one.

    CRC-32C over ``[21, end)`` for magic 2, CRC-32 over ``[16, end)`` for magic 0/1, so a
    mutated input gets past the CRC check and reaches the parsers behind it.
    """
    out = bytearray(data)
    pos = 0
    while len(out) - pos >= 17:
        size = struct.unpack_from(">i", out, pos + 8)[0]
        if size < 14 or size > len(out) - pos - 12:
            break
        end = pos + 12 + size
        magic = out[pos + 16]
        if magic == 2 and size >= 49:
            struct.pack_into(">I", out, pos + 17, crc32c.crc32c(bytes(out[pos + 21:end])))
        elif magic < 2:
            struct.pack_into(">I", out, pos + 12, zlib.crc32(bytes(out[pos + 16:end])))
        pos = end
    return bytes(out)


class Provider:
    """Takes typed choices from the front of a byte string (a FuzzedDataProvider stand-in).

    Deterministic and exhaustion-safe: once the bytes run out every choice is 0, so any
    input, however short, builds something.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos:self.pos + n]
        self.pos += len(chunk)
        return chunk

    def uint(self, nbytes: int) -> int:
        return int.from_bytes(self.take(nbytes).ljust(nbytes, b"\0"), "big")

    def int(self, nbytes: int) -> int:
        value = self.uint(nbytes)
        return value - (1 << (8 * nbytes)) if value >> (8 * nbytes - 1) else value

    def range(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]``."""
        span = hi - lo + 1
        nbytes = max(1, (span - 1).bit_length() + 7 >> 3)
        return lo + self.uint(nbytes) % span

    def bool(self) -> bool:
        return bool(self.uint(1) & 1)

    def bytes(self, max_len: int) -> bytes:
        return self.take(self.range(0, max_len))

    def remaining(self) -> bytes:
        return self.take(len(self.data) - self.pos)


# == the v2 / legacy readers ================================================================


def _touch_batch(batch) -> None:
    for name in BATCH_FIELDS:
        _ok(getattr, batch, name)
    _ok(batch.is_valid)
    _ok(batch.to_bytes)
    try:
        for record in batch:
            (record.offset, record.timestamp, int(record.timestamp_type), record.key,
             record.value, record.headers)
            if batch.is_control and batch.magic == 2:
                _ok(records.parse_control_record, record)
    except KafkaStoreError:
        pass


def _decode_all(data, *, validate: bool) -> None:
    """Walk every entry as a consumer does and decode every record of each."""
    try:
        for batch in records.iter_batches(data, validate=validate, max_decompressed_bytes=LIMIT):
            _touch_batch(batch)
    except KafkaStoreError:
        pass


def _read_at(data, positions) -> None:
    for pos in positions:
        batch = _ok(records.read_batch, data, pos, max_decompressed_bytes=LIMIT)
        if batch is not None:
            _ok(batch.validate)
            _touch_batch(batch)


def batch_v2(data: bytes) -> None:
    """v2 batch reader: iter_batches with and without CRC checks, every header field,
    every record (varints, keys, values, headers, decompression), read_batch."""
    _decode_all(data, validate=True)
    _decode_all(data, validate=False)
    _read_at(data, sorted({0, len(data) // 2, max(len(data) - 61, 0)}))


def legacy(data: bytes) -> None:
    """Legacy v0/v1 reader incl. compressed wrappers: the input with its top-level CRC-32s
    fixed, so the walk reaches the wrapper's inner message set, then unchanged."""
    fixed = fix_crcs(data)
    _decode_all(fixed, validate=True)
    _decode_all(data, validate=False)
    _read_at(fixed, (0,))


def _check_scan(data, scan) -> None:
    n = len(scan.position)
    assert scan.error is None or isinstance(scan.error, CorruptRecordError), scan.error
    assert 0 <= scan.valid_bytes <= len(data), (scan.valid_bytes, len(data))
    for column in ("size", "magic", "base_offset", "last_offset", "max_timestamp",
                   "record_count"):
        assert len(getattr(scan, column)) == n, column
    end = 0
    for pos, size in zip(scan.position.tolist(), scan.size.tolist()):
        assert pos == end and size >= 14, (pos, size, end)
        end = pos + size
    assert end == scan.valid_bytes, (end, scan.valid_bytes)


def scan(data: bytes) -> None:
    """The shallow scanner (recovery and index building): scan_batches never raises for
    bad bytes and describes exactly the entries it accepted."""
    for validate in (True, False):
        _check_scan(data, records.scan_batches(data, validate=validate))
    fixed = fix_crcs(data)
    if fixed != data:
        _check_scan(fixed, records.scan_batches(fixed, validate=True))
    if len(data) > 8:   # a walk that starts inside the buffer
        part = records.scan_batches(data, data[0] % len(data), validate=False)
        assert part.error is None or isinstance(part.error, CorruptRecordError), part.error


def _records_of(data, validate: bool):
    out = []
    for batch in records.iter_batches(data, validate=validate, max_decompressed_bytes=LIMIT):
        for r in batch:
            out.append((r.offset, r.timestamp, int(r.timestamp_type), r.key, r.value,
                        tuple(r.headers)))
    return out


def _columns_rows(cols, with_headers: bool):
    n = len(cols)
    assert len(cols.key_offsets) == n + 1 and len(cols.value_offsets) == n + 1
    assert int(cols.key_offsets[-1]) == len(cols.key_data)
    assert int(cols.value_offsets[-1]) == len(cols.value_data)
    rows = []
    for i in range(n):
        headers = cols.headers(i) if with_headers else None
        rows.append((int(cols.offset[i]), int(cols.timestamp[i]), int(cols.timestamp_type[i]),
                     cols.key(i), cols.value(i), headers))
    return rows


def columns(data: bytes) -> None:
    """The columnar decoder (decode_columns, with and without headers), checked against the
    record-at-a-time reader: when both decode the bytes they give the same records."""
    for validate in (False, True):
        try:
            expected = _records_of(data, validate)
        except KafkaStoreError:
            expected = None
        for with_headers in (False, True):
            cols = _ok(records.decode_columns, data, validate=validate, include_control=True,
                       headers=with_headers, max_decompressed_bytes=LIMIT)
            if cols is None:
                continue
            rows = _columns_rows(cols, with_headers)
            if expected is not None:
                assert len(rows) == len(expected), (len(rows), len(expected))
                for got, want in zip(rows, expected):
                    assert got[:5] == want[:5], (got, want)
                    if with_headers:
                        assert tuple(got[5]) == want[5], (got[5], want[5])
            if with_headers:
                for i, row in enumerate(rows):
                    assert int(cols.header_count[i]) == len(row[5]), (i, row)


# == the structure-aware target ==============================================================

_HEADER_FIELDS = (  # (position, struct format) of the v2 header fields a mutation may set
    (8, ">i"), (12, ">i"), (21, ">h"), (23, ">i"), (27, ">q"), (35, ">q"), (43, ">q"),
    (51, ">h"), (53, ">i"), (57, ">i"),
)
_INTERESTING = (0, 1, -1, 2, 7, 14, 48, 49, 61, 127, 128, 255, 0x7FFF, -0x8000,
                INT32_MAX, INT32_MIN, INT32_MAX - 11, INT64_MAX, INT64_MIN)


def _fit(value: int, fmt: str) -> int:
    bits = struct.calcsize(fmt) * 8
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _records_for(p: Provider, magic: int):
    out = []
    for _ in range(p.range(0 if magic == 2 else 1, 6)):
        key = None if p.bool() else p.bytes(12)
        value = None if p.uint(1) < 16 else p.bytes(40)
        ts = p.range(0, 1 << 20) + 1_600_000_000_000 if p.bool() else None
        headers = []
        if magic == 2:
            for _ in range(p.range(0, 2)):
                hkey = p.bytes(6).decode("latin-1")
                headers.append((hkey, None if p.bool() else p.bytes(8)))
        out.append((key, value, ts, headers) if magic == 2 else (key, value, ts))
    return out


def _mutate(p: Provider, buf: bytearray, header: bool) -> None:
    """Apply up to 6 mutations chosen by the input."""
    for _ in range(p.range(0, 6)):
        kind = p.range(0, 5)
        if kind == 0 and header and len(buf) >= 61:
            pos, fmt = _HEADER_FIELDS[p.range(0, len(_HEADER_FIELDS) - 1)]
            choice = p.range(0, len(_INTERESTING))
            value = p.int(8) if choice == len(_INTERESTING) else _INTERESTING[choice]
            struct.pack_into(fmt, buf, pos, _fit(value + p.range(-2, 2), fmt))
        elif not buf:
            buf += p.bytes(8)
        elif kind == 1:
            buf[p.range(0, len(buf) - 1)] = p.uint(1)
        elif kind == 2:
            pos = p.range(0, len(buf))
            buf[pos:pos] = p.bytes(8)
        elif kind == 3:
            pos = p.range(0, len(buf) - 1)
            del buf[pos:pos + p.range(1, 8)]
        elif kind == 4:
            pos = p.range(0, len(buf) - 1)
            buf[pos] ^= 1 << p.range(0, 7)
        else:  # a varint-ish byte in the records area: lengths and counts live there
            pos = p.range(min(61, len(buf) - 1) if header else 0, len(buf) - 1)
            buf[pos] = (0x80 | p.uint(1)) if p.bool() else p.uint(1) & 0x7F


def _legacy_message(magic: int, attributes: int, timestamp: int, key, value) -> bytes:
    body = bytearray((magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for part in (key, value):
        body += b"\xff\xff\xff\xff" if part is None else struct.pack(">i", len(part)) + part
    return struct.pack(">I", zlib.crc32(body)) + bytes(body)


def _build_structured(data: bytes) -> bytes:
    """A syntactically valid batch (v2, or a legacy message set or compressed wrapper)
    built from the input's choices, then mutated, then its CRCs fixed."""
    p = Provider(data)
    magic = (2, 2, 2, 1, 0)[p.range(0, 4)]
    codec = p.range(0, 4 if magic == 2 else 3)
    recs = _records_for(p, magic)
    base_offset = p.int(4) if p.bool() else 0
    if magic == 2:
        plain = records.encode_batch(
            recs, base_offset=base_offset, timestamp=1_600_000_000_000,
            timestamp_type=1 if p.uint(1) < 32 else 0,
            is_transactional=p.uint(1) < 32, producer_id=p.int(2), producer_epoch=p.int(1),
            base_sequence=p.int(2), partition_leader_epoch=p.int(1))
        section = bytearray(plain[61:])
        _mutate(p, section, header=False)   # the records: varints, lengths, headers
        head = records.V2_HEADER.unpack_from(plain)
        batch = bytearray(records.assemble_batch_v2(
            bytes(section), head[12], base_offset=head[0], last_offset_delta=head[6],
            attributes=head[5] | codec, base_timestamp=head[7], max_timestamp=head[8],
            producer_id=head[9], producer_epoch=head[10], base_sequence=head[11],
            partition_leader_epoch=head[2]))
        _mutate(p, batch, header=True)      # header fields, and bytes of the payload
        out = fix_crcs(bytes(batch))
    else:
        inner = bytearray(records.encode_batch(recs, magic=magic, base_offset=0,
                                               timestamp=1_600_000_000_000))
        _mutate(p, inner, header=False)     # the inner message set
        inner = bytearray(fix_crcs(bytes(inner)))
        if codec:
            payload = compression.compress(codec, bytes(inner), magic=magic)
            msg = _legacy_message(magic, codec, 1_600_000_000_000, None, payload)
            last = max(len(recs) - 1, 0) + base_offset
            wrapper = bytearray(struct.pack(">qi", last, len(msg)) + msg)
            _mutate(p, wrapper, header=False)
            out = fix_crcs(bytes(wrapper))
        else:
            out = bytes(inner)
    return out + p.remaining()[:64]


def structured(data: bytes) -> None:
    """Structure-aware: build a valid batch with correct CRCs from the input's choices,
    mutate fields and records, fix the CRCs again, then decode it every way."""
    buf = _build_structured(data)
    _decode_all(buf, validate=True)
    _check_scan(buf, records.scan_batches(buf, validate=True))
    cols = _ok(records.decode_columns, buf, include_control=True, headers=True,
               max_decompressed_bytes=LIMIT)
    if cols is not None:
        _columns_rows(cols, True)


# == files: index, checkpoint, segment directory ============================================

_WORK: Path | None = None


def _workdir() -> Path:
    """One scratch directory per process, removed at exit."""
    global _WORK
    if _WORK is None or not _WORK.is_dir():
        _WORK = Path(tempfile.mkdtemp(prefix="ks-fuzz-"))
        import atexit

        atexit.register(shutil.rmtree, _WORK, True)
    return _WORK


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


_BASES = (0, 1000, INT32_MAX, 1 << 40)


def _int64(value: int) -> int:
    return min(max(value, INT64_MIN), INT64_MAX)


def index(data: bytes) -> None:
    """OffsetIndex / TimeIndex opened over arbitrary bytes: sanity checks, every lookup,
    entries, and (writable) truncation and close. Byte 0 chooses the kind, the base offset
    and the mode; the rest is the file."""
    flags = data[0] if data else 0
    body = data[1:]
    cls = TimeIndex if flags & 1 else OffsetIndex
    base = _BASES[(flags >> 1) & 3]
    writable = bool(flags & 8)
    path = _workdir() / ("00000000000000000000" + (".timeindex" if flags & 1 else ".index"))
    _write(path, body)
    idx = cls(path, base, max_index_size=1 << 16, writable=writable)
    try:
        for full in (False, True):
            _ok(idx.sanity_check, full)
        n = idx.entries
        assert 0 <= n == len(body) // cls.ENTRY_SIZE, (n, len(body))
        keys = {base, base - 1, base + 1, INT64_MAX if cls is TimeIndex else base + INT32_MAX}
        for i in {0, 1, n // 2, n - 2, n - 1}:
            if 0 <= i < n:
                entry = idx.entry(i)
                key = entry[1] if cls is TimeIndex else entry[0]
                keys.update((key, key - 1, key + 1))
                if cls is TimeIndex:
                    keys.update((entry[0], entry[0] - 1, entry[0] + 1))
        idx.last_entry
        for key in sorted(keys):
            if cls is TimeIndex:
                idx.lookup(_int64(key))
            else:
                idx.lookup(_int64(key))
                idx.lookup_with_next(_int64(key))
                idx.fetch_upper_bound_offset(max(0, key % (1 << 31)), 4096)
        if writable:
            _ok(idx.truncate_to, _int64(sorted(keys)[len(keys) // 2]))
            _ok(idx.sanity_check, False)
    finally:
        idx.close()
    path.unlink()


class _LineFormatter:
    """A second entry type for CheckpointFile: ``<int> <int>`` lines (as the leader-epoch
    checkpoint of Kafka), so the generic reader is fuzzed apart from the offset one."""

    def to_string(self, entry) -> str:
        return f"{entry[0]} {entry[1]}"

    def from_string(self, line: str):
        parts = line.split(" ")
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() and p.isascii() for p in parts):
            return None
        return int(parts[0]), int(parts[1])


def checkpoint(data: bytes) -> None:
    """Checkpoint files: OffsetCheckpointFile and a generic CheckpointFile read arbitrary
    bytes; whatever reads back must write and read back to the same entries."""
    work = _workdir()
    path = work / "fuzz.checkpoint"
    _write(path, data)
    offsets = _ok(OffsetCheckpointFile(str(path)).read)
    if offsets is not None:
        again = OffsetCheckpointFile(str(work / "again.checkpoint"))
        again.write(offsets)
        assert again.read() == offsets
    generic = _ok(CheckpointFile(str(path), 0, _LineFormatter()).read)
    if generic is not None:
        other = CheckpointFile(str(work / "again2.checkpoint"), 0, _LineFormatter())
        other.write(generic)
        assert other.read() == generic


_SEGMENT_CONFIG = None


def _segment_config(interval: int):
    from kafkastore.config import LogConfig

    global _SEGMENT_CONFIG
    if _SEGMENT_CONFIG is None:
        _SEGMENT_CONFIG = {i: LogConfig(segment_index_bytes=1 << 16, index_interval_bytes=i)
                           for i in (0, 128, 4096)}
    return _SEGMENT_CONFIG[interval]


def segment(data: bytes) -> None:
    """A whole segment directory: the input split into a .log, .index and .timeindex
    (9-byte header: flags, u32 base offset, u16 index length, u16 time index length),
    Log.open with unclean (or, flag bit 0, clean) recovery, then a read of every record
    and timestamp lookups."""
    p = Provider(data)
    flags = p.uint(1)
    base = p.uint(4)
    index_bytes = p.take(p.uint(2) % 4097)
    time_bytes = p.take(p.uint(2) % 4097)
    log_bytes = p.remaining()
    directory = _workdir() / "topic-0"
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir()
    name = f"{base:020d}"
    _write(directory / f"{name}.log", log_bytes)
    if not flags & 16:
        _write(directory / f"{name}.index", index_bytes)
    if not flags & 32:
        _write(directory / f"{name}.timeindex", time_bytes)
    config = _segment_config((0, 128, 4096)[(flags >> 6) % 3])
    log = _ok(Log.open, str(directory), config, had_clean_shutdown=bool(flags & 1),
              recovery_point=base if flags & 8 else 0, time_ms=lambda: 1_700_000_000_000)
    if log is None:
        return
    try:
        start, end = log.log_start_offset, log.log_end_offset
        # clean opens too: an active segment no clean shutdown leaves (an entry below
        # its base offset, a partial tail) is recovered, not trusted
        # (tests/data/fuzz/segment/corpus-clean-leo-below-lso; log_loader.py)
        assert start <= end, (start, end)
        offset, steps = start, 0
        while offset < end and steps < 10_000:
            steps += 1
            piece = _ok(log.read, offset, 1 << 16)
            if piece is None:
                break
            nxt = offset
            try:
                for batch in piece.batches():
                    _touch_batch(batch)
                    nxt = max(nxt, batch.next_offset)
            except KafkaStoreError:
                break
            if nxt <= offset:
                break
            offset = nxt
        for ts in (-3, -1, -2, 0, 1_600_000_000_000, INT64_MAX):
            _ok(log.offset_for_timestamp, ts)
    finally:
        log.close()


def server_request(data: bytes) -> None:
    """A Kafka request frame (the bytes after the 4-byte size) through the server's
    decoder: ``read_request_header`` + ``decode_request`` decode it or refuse it with
    InvalidRequestError (UnsupportedVersionError included), nothing else, not even another
    KafkaStoreError; what decodes encodes again and decodes to the same body."""
    view = memoryview(data)
    try:
        header, pos = protocol.read_request_header(view)
        body = protocol.decode_request(header, view, pos)
    except InvalidRequestError as err:
        assert err.position is not None and 0 <= err.position <= len(data), err
        return
    body = normalize(body)
    again = memoryview(protocol.encode_request(header.api_key, header.api_version,
                                               header.correlation_id, header.client_id,
                                               body))[4:]
    header2, pos2 = protocol.read_request_header(again)
    assert header2 == header
    assert normalize(protocol.decode_request(header2, again, pos2)) == body


TARGETS = {
    "batch_v2": batch_v2,
    "legacy": legacy,
    "scan": scan,
    "columns": columns,
    "structured": structured,
    "index": index,
    "checkpoint": checkpoint,
    "segment": segment,
    "server_request": server_request,
}


# == seeds ==================================================================================


def _vector_dirs():
    env = os.environ.get("KAFKASTORE_VECTORS")
    candidates = [Path(env)] if env else []
    candidates += [HERE.parent.parent / "shared" / "vectors", HERE / "data" / "vectors",
                   Path("/work/shared/vectors")]
    return [c for c in candidates if (c / "MANIFEST.json").is_file()]


def _vector_files(pattern: str):
    dirs = _vector_dirs()
    return sorted(dirs[0].glob(pattern)) if dirs else []


def _encoded_batches():
    out = []
    recs = [(b"k%d" % i, b"value-%d" % i * (i + 1), 1_600_000_000_000 + i,
             [("h", b"v"), ("n", None)] if i % 2 else []) for i in range(5)]
    for codec in range(5):
        out.append(records.encode_batch(recs, compression=codec, base_offset=10,
                                        timestamp=1_600_000_000_000))
    out.append(records.encode_batch([(None, None)], timestamp=0))
    out.append(records.encode_control_batch(1, producer_id=7, producer_epoch=1,
                                            timestamp=1_600_000_000_000))
    return out


def _encoded_legacy():
    out = []
    recs = [(b"k%d" % i, b"v" * (i + 1), 1_600_000_000_000 + i) for i in range(4)]
    for magic in (0, 1):
        for codec in range(4):
            out.append(records.encode_batch(recs, magic=magic, compression=codec,
                                            base_offset=3, timestamp=1_600_000_000_000))
    return out


def seeds(target: str) -> list[bytes]:
    """Seed inputs for ``target`` (small, valid or nearly valid)."""
    v2 = _encoded_batches()
    old = _encoded_legacy()
    if target in ("batch_v2", "columns", "scan"):
        out = v2 + [b"".join(v2), b"".join(old[:3])]
        out += [f.read_bytes() for f in _vector_files("batches/v2/*.bin")
                if f.stat().st_size <= 65536]
        out += [f.read_bytes() for f in _vector_files("negative/*.bin")]
        return out
    if target == "legacy":
        out = old + [b"".join(old)]
        out += [f.read_bytes() for f in _vector_files("batches/legacy/*.bin")
                if f.stat().st_size <= 65536]
        return out
    if target == "structured":
        return [bytes((i * 37 + j * 11) % 256 for j in range(64)) for i in range(12)] + [b"\0" * 32]
    if target == "index":
        offs = b"".join(struct.pack(">ii", i * 3, i * 100) for i in range(20))
        times = b"".join(struct.pack(">qi", 1_600_000_000_000 + i, i * 3) for i in range(20))
        out = [bytes([f]) + offs for f in (0, 2, 8)] + [bytes([f]) + times for f in (1, 3, 9)]
        for seg in _vector_files("segments/*/*.index"):
            out.append(b"\x02" + seg.read_bytes())
        for seg in _vector_files("segments/*/*.timeindex"):
            out.append(b"\x03" + seg.read_bytes())
        return out
    if target == "checkpoint":
        return [b"0\n2\ntopic 0 5\nother-topic 3 100\n", b"0\n0\n", b"0\n1\n5 17\n", b"",
                b"0\n", b"1\n1\na 1 1\n"]
    if target == "segment":
        out = []
        log = b"".join(records.encode_batch([(b"k", b"v" * i)], base_offset=i,
                                            timestamp=1_600_000_000_000 + i) for i in range(8))
        for flags in (0, 1, 8, 64, 128):
            out.append(struct.pack(">BIHH", flags, 0, 0, 0) + log)
        for seg in _vector_files("segments/*/*.log"):
            base = int(seg.name.split(".")[0])
            if base >= 1 << 32:
                continue
            idx = seg.with_suffix(".index").read_bytes()[:4096]
            tix = seg.with_suffix(".timeindex").read_bytes()[:4096]
            for flags in (0, 1):
                out.append(struct.pack(">BIHH", flags, base, len(idx), len(tix)) + idx + tix
                           + seg.read_bytes()[:56000])
        return out
    if target == "server_request":
        # a valid request of each API at its lowest and highest supported version, full
        # and sparse (tests/_protocol_examples.py)
        from _protocol_examples import example_body
        from kafkastore.server.protocol.messages import REQUESTS

        out = []
        for key, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items()):
            for version in sorted({lo, hi}):
                for variant in ("full", "sparse"):
                    body = example_body(REQUESTS[key], version, variant)
                    out.append(protocol.encode_request(key, version, 1, "fuzz", body)[4:])
        return out
    raise KeyError(target)
