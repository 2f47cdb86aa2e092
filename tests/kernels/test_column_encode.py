"""The column_encode kernel (kafkastore._pure.column_encode and kafkastore._ext.column_encode).

The main oracle is :func:`kafkastore.records.encode_batch`: the test builds Arrow-style
columns from plain records, splits the records into batches by the documented rule using
only encode_batch's own output sizes, and expects exactly the bytes encode_batch writes for
each batch with the same compress callback ``records.encode_v2`` builds. The output is also
read back through ``records.iter_records`` / ``decode_columns`` (compared with the test's
own records) and through kafka-python's and aiokafka's decoders when installed. Every test
runs on both implementations (the ``enc`` fixture); the tests at the end compare the two
directly, errors included (type and message).
"""

from __future__ import annotations

import importlib
import inspect
import mmap
import struct
import types
import warnings

import crc32c
import numpy as np
import pytest
from _helpers import compiled_kernel
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from strategies import (
    CODECS,
    I32_MAX,
    I64_MAX,
    I64_MIN,
    RecSpec,
    base_sequences,
    leader_epochs,
    producer_epochs,
    producer_ids,
    record_specs,
    scaled,
)

from kafkastore import compression
from kafkastore import records as R
from kafkastore.errors import RecordTooLargeError
from kafkastore.types import CompressionType

NONE, GZIP, SNAPPY, LZ4, ZSTD = (CompressionType.NONE, CompressionType.GZIP,
                                 CompressionType.SNAPPY, CompressionType.LZ4,
                                 CompressionType.ZSTD)
V2_HEADER = struct.Struct(">qiibIhiqqqhii")   # read independently of kafkastore


@pytest.fixture(params=("cython", "python"))
def enc(request) -> types.ModuleType:
    """The column_encode kernel of one implementation."""
    if request.param == "cython":
        return compiled_kernel("column_encode")
    return importlib.import_module("kafkastore._pure.column_encode")


def both():
    """``(ext, pure)``."""
    return compiled_kernel("column_encode"), importlib.import_module(
        "kafkastore._pure.column_encode")


def compress_fn(codec):
    """The callback kafkastore.records.encode_v2 hands encode_batch_v2 for ``codec``."""
    if not codec:
        return None

    def compress(view, _codec=int(codec)):
        return compression.compress(_codec, view, None, magic=2)
    return compress


# == columns from plain records ===========================================================


def binary(items, dtype=np.int64, *, lead=0, junk_nulls=False, as_type=bytes,
           always_valid=False):
    """``(offsets, data, valid)`` for ``items`` (bytes or None), Arrow style.

    ``lead`` bytes of junk come first (a sliced array: offsets[0] != 0); ``junk_nulls``
    gives null entries a non-empty span nobody may read; ``as_type`` converts the data.
    """
    data = bytearray(b"\xee" * lead)
    offsets = [lead]
    valid = []
    for item in items:
        if item is None:
            valid.append(False)
            if junk_nulls:
                data += b"\xab\xcd\xef"
        else:
            valid.append(True)
            data += item
        offsets.append(len(data))
    mask = np.array(valid, dtype=bool) if (always_valid or not all(valid)) else None
    if as_type is np.ndarray:
        buf = np.frombuffer(bytes(data), dtype=np.uint8)
    elif as_type is memoryview:
        buf = memoryview(bytes(data))
    else:
        buf = as_type(data)
    return np.array(offsets, dtype=dtype), buf, mask


def header_columns(header_lists, dtypes=(np.int64, np.int64, np.int64), junk_nulls=False):
    """Arrow's list<struct<key: string, value: binary>> for one header list per row."""
    hoffs = [0]
    keys, values = [], []
    for hs in header_lists:
        for k, v in hs:
            keys.append(k.encode("utf-8", "surrogateescape") if isinstance(k, str) else k)
            values.append(v)
        hoffs.append(len(keys))
    k_offs, k_data, _ = binary(keys, dtypes[1])
    v_offs, v_data, v_valid = binary(values, dtypes[2], junk_nulls=junk_nulls)
    return np.array(hoffs, dtype=dtypes[0]), k_offs, k_data, v_offs, v_data, v_valid


class Table:
    """Plain records (RecSpec) and the columns that hold them."""

    def __init__(self, specs, default_ts, *, key_dtype=np.int64, value_dtype=np.int32,
                 ts_column=None, with_headers=None, header_dtypes=(np.int64,) * 3,
                 **binary_kw):
        self.specs = list(specs)
        self.default_ts = default_ts
        if ts_column is None:   # a column when some record has its own timestamp
            ts_column = any(s.timestamp is not None for s in self.specs)
        self.ts_column = ts_column
        if with_headers is None:
            with_headers = any(s.headers for s in self.specs)
        self.keys = (None if all(s.key is None for s in self.specs)   # no keys at all
                     else binary([s.key for s in self.specs], key_dtype, **binary_kw))
        self.values = binary([s.value for s in self.specs], value_dtype, **binary_kw)
        self.timestamps = (np.array(self.resolved(), dtype=np.int64) if ts_column else None)
        self.headers = (header_columns([s.headers for s in self.specs], header_dtypes,
                                       binary_kw.get("junk_nulls", False))
                        if with_headers else None)

    def resolved(self):
        return [self.default_ts if s.timestamp is None else s.timestamp for s in self.specs]

    def encode(self, mod, rows=None, **kw):
        return mod.encode_columns(rows, self.keys, self.values, timestamps=self.timestamps,
                                  default_timestamp=self.default_ts, headers=self.headers, **kw)

    def records(self, rows=None):
        """What encode_batch is given: (key, value, timestamp, headers) per record."""
        order = range(len(self.specs)) if rows is None else list(rows)
        stamps = self.resolved()
        return [(self.specs[i].key, self.specs[i].value, stamps[i],
                 [(k.encode("utf-8", "surrogateescape") if isinstance(k, str) else k, v)
                  for k, v in self.specs[i].headers]) for i in order]


def section_size(recs, default_ts) -> int:
    """Bytes of the uncompressed records section encode_batch writes for ``recs``."""
    return len(R.encode_batch(recs, timestamp=default_ts)) - 61


def split(recs, default_ts, max_records, max_bytes):
    """The documented rule, decided with encode_batch's sizes only."""
    batches, cur = [], []
    for rec in recs:
        if cur and (len(cur) == max_records
                    or section_size(cur + [rec], default_ts) > max_bytes):
            batches.append(cur)
            cur = []
        cur.append(rec)
    if cur:
        batches.append(cur)
    return batches


def attributes_of(codec=NONE, ts_type=0, transactional=False, control=False):
    return int(codec) | (ts_type << 3) | (0x10 if transactional else 0) | \
        (0x20 if control else 0)


def expected(recs, default_ts, *, codec=NONE, max_records=I32_MAX, max_bytes=1 << 20,
             first_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
             epoch=-1, ts_type=0, transactional=False, control=False):
    out = b""
    start = 0
    for batch in split(recs, default_ts, max_records, max_bytes):
        out += R.encode_batch(
            batch, base_offset=first_offset + start, compression=codec, timestamp=default_ts,
            timestamp_type=ts_type,
            max_timestamp=max(r[2] for r in batch) if ts_type else None,
            is_transactional=transactional, is_control=control, producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1 if base_sequence == -1 else (base_sequence + start) % (1 << 31),
            partition_leader_epoch=epoch)
        start += len(batch)
    return out


def entries(buf):
    """Split into batches with nothing but the framing; each one's header fields."""
    pos, out = 0, []
    while pos < len(buf):
        fields = V2_HEADER.unpack_from(buf, pos)
        size = fields[1] + 12
        assert fields[4] == crc32c.crc32c(buf[pos + 21:pos + size])
        out.append(fields)
        pos += size
    assert pos == len(buf)
    return out


def read_back(buf):
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for r in R.iter_records(buf)]


def meant(table, rows=None, first_offset=0):
    order = range(len(table.specs)) if rows is None else list(rows)
    stamps = table.resolved()
    return [(first_offset + p, stamps[i], table.specs[i].key, table.specs[i].value,
             [(k if isinstance(k, str) else k.decode(), v) for k, v in table.specs[i].headers])
            for p, i in enumerate(order)]


# == shapes ================================================================================

S = RecSpec
MIXED = [
    S(b"k1", b"v1", 10, (("a", b"1"), ("b", None))),
    S(None, b"", 11),
    S(b"", None, 9),
    S(b"key-3", b"v" * 300, 12, (("trace-id", b""),)),
    S(None, None, 10),
    S(b"k5", b"x" * 5, -1, (("", None), ("\U0001F600", b"emoji"))),
]


def check(enc, table, rows=None, **kw):
    """Encode with the kernel, compare with encode_batch, read it back."""
    codec = kw.pop("codec", NONE)
    flags = {k: kw.pop(k) for k in ("ts_type", "transactional", "control") if k in kw}
    got = table.encode(enc, rows, attributes=attributes_of(codec, **flags),
                       compress=compress_fn(codec), **kw)
    want = expected(table.records(rows), table.default_ts, codec=codec,
                    max_records=kw.get("max_batch_records", I32_MAX),
                    max_bytes=kw.get("max_batch_bytes", 1 << 20),
                    first_offset=kw.get("first_offset", 0),
                    producer_id=kw.get("producer_id", -1),
                    producer_epoch=kw.get("producer_epoch", -1),
                    base_sequence=kw.get("base_sequence", -1),
                    epoch=kw.get("partition_leader_epoch", -1), **flags)
    assert got == want
    if not flags.get("control") and not flags.get("ts_type"):
        assert read_back(got) == meant(table, rows, kw.get("first_offset", 0))
    return got


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_mixed_records_every_codec(enc, codec):
    buf = check(enc, Table(MIXED, 1000), codec=codec)
    (fields,) = entries(buf)
    assert fields[5] & 7 == int(codec) and fields[12] == len(MIXED)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_splitting_by_records_and_bytes_every_codec(enc, codec):
    specs = [S(b"k%d" % i, b"value-%d" % i * (i % 7), 100 + i % 5, (("h", b"%d" % i),) * (i % 3))
             for i in range(40)]
    table = Table(specs, 0)
    for kw in ({"max_batch_records": 7}, {"max_batch_bytes": 150},
               {"max_batch_records": 5, "max_batch_bytes": 120}, {"max_batch_records": 1}):
        buf = check(enc, table, codec=codec, **kw)
        counts = [f[12] for f in entries(buf)]
        assert sum(counts) == 40 and len(counts) > 1
        if "max_batch_records" in kw:
            assert max(counts) <= kw["max_batch_records"]


def test_byte_limit_is_on_the_uncompressed_section(enc):
    specs = [S(b"k", b"v" * 40, 5)] * 10
    table = Table(specs, 5)
    one = section_size(table.records()[:1], 5)
    two = section_size(table.records()[:2], 5)
    # exactly two records fit
    buf = check(enc, table, max_batch_bytes=two)
    assert [f[12] for f in entries(buf)] == [2] * 5
    buf = check(enc, table, max_batch_bytes=two - 1)
    assert [f[12] for f in entries(buf)] == [1] * 10
    assert one < two - 1
    # compressed batches are split by the same (uncompressed) sizes
    buf = check(enc, table, max_batch_bytes=two, codec=GZIP)
    assert [f[12] for f in entries(buf)] == [2] * 5


def test_a_record_above_the_byte_limit_gets_a_batch_of_its_own(enc):
    specs = [S(b"a", b"1", 1), S(b"big", b"B" * 500, 2), S(b"c", b"3", 3), S(b"d", b"4", 4)]
    buf = check(enc, Table(specs, 0), max_batch_bytes=100)
    assert [f[12] for f in entries(buf)] == [1, 1, 2]


def test_headers_offsets_timestamps_per_batch(enc):
    specs = [S(b"k", b"v", ts) for ts in (50, 10, 70, 70, 20, 5, 90)]
    buf = check(enc, Table(specs, 0), max_batch_records=3, first_offset=1000)
    fields = entries(buf)
    assert [f[0] for f in fields] == [1000, 1003, 1006]              # baseOffset
    assert [f[6] for f in fields] == [2, 2, 0]                       # lastOffsetDelta
    assert [(f[7], f[8]) for f in fields] == [(50, 70), (70, 70), (90, 90)]
    assert [f[12] for f in fields] == [3, 3, 1]


@pytest.mark.parametrize("dtypes", [(np.int32, np.int32), (np.int64, np.int64),
                                    (np.int32, np.int64), (np.int64, np.int32)])
@pytest.mark.parametrize("header_dtype", [np.int32, np.int64])
def test_int32_and_int64_offsets(enc, dtypes, header_dtype):
    table = Table(MIXED, 7, key_dtype=dtypes[0], value_dtype=dtypes[1],
                  header_dtypes=(header_dtype, dtypes[0], dtypes[1]))
    check(enc, table)


@pytest.mark.parametrize("as_type", [bytes, bytearray, memoryview, np.ndarray])
def test_data_buffers_of_any_bytes_like_type(enc, as_type):
    check(enc, Table(MIXED, 7, as_type=as_type))


def test_sliced_arrays_and_junk_under_nulls(enc):
    # offsets[0] != 0 (a slice of a larger Arrow array), and null entries whose spans
    # cover bytes that must not appear anywhere
    table = Table(MIXED, 7, lead=13, junk_nulls=True)
    assert table.headers[3].tolist() == [0, 1, 4, 4, 7, 12]   # null values span 3 bytes
    buf = check(enc, table)
    assert b"\xab\xcd\xef" not in buf and b"\xee" not in buf
    # a null header value's offsets may even decrease and point outside the data
    headers = (np.array([0, 1]), np.array([0, 1]), b"h", np.array([50, 10]), b"", np.zeros(1, bool))
    got = enc.encode_columns(None, None, (np.array([0, 1]), b"v", None), default_timestamp=0,
                             headers=headers)
    assert got == R.encode_batch([(None, b"v", 0, [("h", None)])], timestamp=0)


def test_keys_none_means_every_key_null(enc):
    specs = [S(None, b"v%d" % i, i) for i in range(5)]
    table = Table(specs, 0)
    assert table.keys is None
    check(enc, table)
    # the same with an explicit all-false valid array
    table.keys = binary([None] * 5, always_valid=True)
    check(enc, table)


def test_all_valid_arrays_and_empty_data(enc):
    specs = [S(b"", b"", 3), S(b"", b"", 4)]
    table = Table(specs, 0, always_valid=True)
    check(enc, table)
    table.values = (np.zeros(3, dtype=np.int64), None, None)   # data None: no bytes
    table.keys = (np.zeros(3, dtype=np.int32), None, None)
    check(enc, table)


def test_timestamps_column_or_default(enc):
    specs = [S(b"k", b"v", None)] * 3
    table = Table(specs, 1_700_000_000_000)
    assert table.timestamps is None
    buf = check(enc, table)
    assert {r.timestamp for r in R.iter_records(buf)} == {1_700_000_000_000}
    # a column wins over the default, -1 and other negatives are written as given
    specs = [S(b"k", b"v", ts) for ts in (-1, -5, 0, I64_MAX)]
    table = Table(specs[:3], 99)
    buf = check(enc, table)
    assert [r.timestamp for r in R.iter_records(buf)] == [-1, -5, 0]
    check(enc, Table([S(b"k", b"v", I64_MIN)], 0))
    check(enc, Table([S(b"k", b"v", I64_MAX)], 0))


def test_extreme_timestamp_deltas(enc):
    # deltas of 2**63 - 1 still fit; the split decides the base
    specs = [S(b"a", b"1", -1), S(b"b", b"2", I64_MAX - 1)]
    check(enc, Table(specs, 0))
    specs = [S(b"a", b"1", I64_MIN), S(b"b", b"2", -1)]
    check(enc, Table(specs, 0))
    # too far apart in one batch is an error; apart, fine
    specs = [S(b"a", b"1", I64_MIN), S(b"b", b"2", 1)]
    with pytest.raises(ValueError, match="timestamp 1 of row 1 is too far from the base"):
        Table(specs, 0).encode(enc)
    check(enc, Table(specs, 0), max_batch_records=1)


@pytest.mark.parametrize("rows", [[5, 4, 3, 2, 1, 0], [3], [0, 0, 2, 2], [1, 3, 5],
                                  list(range(6)), []])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.intp])
def test_rows_select_and_reorder(enc, rows, dtype):
    table = Table(MIXED, 1000)
    arr = np.array(rows, dtype=dtype)
    if not rows:
        assert table.encode(enc, arr) == b""
        return
    check(enc, table, arr)
    check(enc, table, arr, max_batch_records=2, first_offset=50)


def test_rows_from_a_strided_view(enc):
    table = Table(MIXED, 1000)
    rows = np.repeat(np.arange(6, dtype=np.int64), 2)[::-2]   # [5, 4, 3, 2, 1, 0], strided
    assert not rows.flags.c_contiguous and rows.tolist() == [5, 4, 3, 2, 1, 0]
    check(enc, table, rows)


def test_group_by_partition(enc):
    # what the sink does: each partition's rows of one Arrow batch, in order
    specs = [S(b"user-%d" % (i % 7), b"event-%d" % i, 1000 + i) for i in range(60)]
    table = Table(specs, 0)
    part = np.array([i % 4 for i in range(60)])
    for p in range(4):
        rows = np.flatnonzero(part == p)
        buf = check(enc, table, rows, max_batch_records=6)
        assert [r.value for r in R.iter_records(buf)] == [specs[i].value for i in rows]


def test_producer_fields_and_sequences(enc):
    specs = [S(b"k%d" % i, b"v", i) for i in range(10)]
    table = Table(specs, 0)
    buf = check(enc, table, max_batch_records=4, producer_id=77, producer_epoch=3,
                base_sequence=100, partition_leader_epoch=9, transactional=True)
    fields = entries(buf)
    assert [f[11] for f in fields] == [100, 104, 108]
    assert {(f[2], f[9], f[10]) for f in fields} == {(9, 77, 3)}
    assert {f[5] for f in fields} == {0x10}
    # -1 stays -1; near int32 max the sequence wraps to 0 as Kafka's incrementSequence
    buf = check(enc, table, max_batch_records=4, base_sequence=-1)
    assert [f[11] for f in entries(buf)] == [-1, -1, -1]
    buf = check(enc, table, max_batch_records=4, base_sequence=I32_MAX - 5)
    assert [f[11] for f in entries(buf)] == [I32_MAX - 5, I32_MAX - 1, 2]


def test_attribute_flags(enc):
    specs = [S(b"k", b"v", 5), S(b"k", b"v", 9)]
    table = Table(specs, 0)
    buf = check(enc, table, ts_type=1, codec=LZ4)
    assert entries(buf)[0][5] == 0x0B
    assert [r.timestamp for r in R.iter_records(buf)] == [9, 9]   # LogAppendTime: the max
    ctrl = Table([S(struct.pack(">hh", 0, 1), b"", 5)], 0)
    buf = check(enc, ctrl, control=True, transactional=True, producer_id=5)
    assert entries(buf)[0][5] == 0x30


def test_first_offset_extremes(enc):
    table = Table(MIXED, 0)
    check(enc, table, first_offset=I64_MAX - len(MIXED) + 1)
    check(enc, table, first_offset=-7)


def test_many_records_many_batches(enc):
    n = 3000 if enc.__name__.endswith("_ext.column_encode") else 600
    rng = np.random.default_rng(5)
    specs = []
    for i in range(n):
        key = None if i % 11 == 0 else bytes(rng.integers(0, 256, i % 20, dtype=np.uint8))
        value = None if i % 13 == 0 else bytes(rng.integers(0, 256, i % 150, dtype=np.uint8))
        hdrs = tuple(("h%d" % j, None if j == 1 else b"x" * j) for j in range(i % 4))
        specs.append(S(key, value, 1_700_000_000_000 + int(rng.integers(-10**6, 10**6)), hdrs))
    table = Table(specs, 0)
    check(enc, table, max_batch_bytes=4096)
    rows = rng.permutation(n)[: n // 2]
    check(enc, table, rows, max_batch_records=100, codec=ZSTD)


def test_decode_columns_reads_it(enc):
    table = Table(MIXED, 1000)
    buf = table.encode(enc, max_batch_records=2)
    cols = R.decode_columns(buf)
    assert cols.offset.tolist() == list(range(len(MIXED)))
    assert [cols.key(i) for i in range(len(MIXED))] == [s.key for s in MIXED]
    assert [cols.value(i) for i in range(len(MIXED))] == [s.value for s in MIXED]
    assert cols.header_count.tolist() == [len(s.headers) for s in MIXED]
    assert cols.timestamp.tolist() == table.resolved()


def test_from_pyarrow_buffers(enc):
    pa = pytest.importorskip("pyarrow", reason="pyarrow (the spark extra) is not installed")
    keys = pa.array([b"a", None, b"ccc", b"", b"e"], type=pa.binary())
    values = pa.array([b"1", b"22", None, b"", b"5" * 200], type=pa.large_binary())
    hdr_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    headers = pa.array([[{"key": "h", "value": b"x"}, {"key": "n", "value": None}], [], None,
                        [{"key": "", "value": b""}], []], type=hdr_type)
    batch = pa.RecordBatch.from_arrays([keys, values, headers], ["key", "value", "headers"])
    batch = batch.slice(1, 4)   # offsets no longer start at 0

    def triple(arr, offset_type):
        validity, offsets, data = arr.buffers()
        offs = np.frombuffer(offsets, dtype=offset_type)[arr.offset:arr.offset + len(arr) + 1]
        valid = None if arr.null_count == 0 else ~arr.is_null().to_numpy(zero_copy_only=False)
        return offs, data, valid

    lst = batch.column(2)
    struct_arr = lst.values
    hoffs = np.frombuffer(lst.buffers()[1], dtype=np.int32)[lst.offset:lst.offset + len(lst) + 1]
    hk = triple(struct_arr.field("key"), np.int32)
    hv = triple(struct_arr.field("value"), np.int32)
    got = enc.encode_columns(None, triple(batch.column(0), np.int32),
                             triple(batch.column(1), np.int64), default_timestamp=42,
                             headers=(hoffs, hk[0], hk[1], hv[0], hv[1], hv[2]))
    want = R.encode_batch([(None, b"22", 42), (b"ccc", None, 42), (b"", b"", 42, [("", b"")]),
                           (b"e", b"5" * 200, 42)], timestamp=42)
    assert got == want


# == other decoders =========================================================================


def _peer_module(name: str, reason: str):
    """A peer's MemoryRecords module; importing kafka-python warns about deprecated APIs
    of its own, which are not this suite's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pytest.importorskip(name, reason=reason)


@pytest.mark.parametrize("peer", ["kafka.record.memory_records",
                                  "aiokafka.record.memory_records"])
def test_peers_decode_it(enc, peer):
    module = _peer_module(peer, f"{peer.split('.')[0]} is not installed")
    table = Table(MIXED, 1000)
    buf = table.encode(enc, max_batch_records=4, first_offset=10, producer_id=3,
                       producer_epoch=1, base_sequence=20, attributes=int(GZIP),
                       compress=compress_fn(GZIP))
    mem, got, batches = module.MemoryRecords(buf), [], []
    while mem.has_next():
        batch = mem.next_batch()
        assert batch.validate_crc()
        batches.append((batch.base_offset, batch.base_sequence, batch.compression_type))
        got += [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
                for r in batch]
    assert batches == [(10, 20, 1), (14, 24, 1)]
    assert got == meant(table, first_offset=10)


# == properties ============================================================================


@st.composite
def tables(draw):
    specs, default_ts = draw(record_specs(min_size=1, max_size=12))
    ts_column = draw(st.booleans())
    if not ts_column:
        specs = [s._replace(timestamp=None) for s in specs]
    dtype = st.sampled_from([np.int32, np.int64])
    table = Table(specs, default_ts, ts_column=ts_column, key_dtype=draw(dtype),
                  value_dtype=draw(dtype), with_headers=draw(st.booleans()) or None,
                  header_dtypes=(draw(dtype), draw(dtype), draw(dtype)),
                  lead=draw(st.sampled_from([0, 0, 3])), junk_nulls=draw(st.booleans()))
    n = len(specs)
    rows = draw(st.one_of(st.none(), st.lists(st.integers(0, n - 1), max_size=2 * n)))
    return table, None if rows is None else np.array(rows, dtype=np.int64)


@given(case=tables(), codec=st.sampled_from(CODECS),
       max_records=st.one_of(st.just(I32_MAX), st.integers(1, 5)),
       max_bytes=st.one_of(st.just(1 << 20), st.integers(1, 600)),
       first_offset=st.integers(0, 1 << 40), producer_id=producer_ids,
       producer_epoch=producer_epochs,
       base_sequence=base_sequences.filter(lambda s: s >= -1), epoch=leader_epochs)
@scaled(0.5, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_equals_encode_batch(enc, case, codec, max_records, max_bytes, first_offset,
                                      producer_id, producer_epoch, base_sequence, epoch):
    table, rows = case
    if rows is not None and not len(rows):
        assert table.encode(enc, rows) == b""
        return
    check(enc, table, rows, codec=codec, max_batch_records=max_records,
          max_batch_bytes=max_bytes, first_offset=first_offset, producer_id=producer_id,
          producer_epoch=producer_epoch, base_sequence=base_sequence,
          partition_leader_epoch=epoch)


# == errors ================================================================================


def good():
    """Keyword arguments of a valid call over three rows, to break one at a time."""
    return dict(
        rows=None,
        keys=(np.array([0, 1, 2, 3], dtype=np.int32), b"abc", None),
        values=(np.array([0, 2, 4, 6]), b"xxyyzz", np.array([True, False, True])),
        timestamps=np.array([1, 2, 3], dtype=np.int64),
        default_timestamp=0,
        headers=(np.array([0, 1, 1, 2]), np.array([0, 1, 2]), b"hk",
                 np.array([0, 1, 1]), b"v", np.array([True, False])),
    )


def call(mod, **kw):
    args = good()
    args.update(kw)
    rows, keys, values = args.pop("rows"), args.pop("keys"), args.pop("values")
    return mod.encode_columns(rows, keys, values, **args)


def with_(base, index, item):
    out = list(base)
    out[index] = item
    return tuple(out)


G = good()
ERRORS = [
    # keyword integers, in signature order
    (dict(default_timestamp=1.5), TypeError, "default_timestamp must be an int, not float"),
    (dict(default_timestamp=1 << 63), ValueError, "default_timestamp must be between"),
    (dict(max_batch_records=0), ValueError, "max_batch_records must be between 1 and"),
    (dict(max_batch_records=1 << 31), ValueError, "max_batch_records must be between"),
    (dict(max_batch_bytes=0), ValueError, "max_batch_bytes must be between 1 and"),
    (dict(attributes="1"), TypeError, "attributes must be an int, not str"),
    (dict(attributes=0x40), ValueError, r"attributes may set only bits 0-5 .*not 0x40"),
    (dict(attributes=-1), ValueError, "attributes must be between 0 and 65535"),
    (dict(attributes=5), ValueError, "unknown compression codec 5"),
    (dict(producer_id=1 << 63), ValueError, "producer_id must be between"),
    (dict(producer_epoch=1 << 15), ValueError, "producer_epoch must be between -32768 and"),
    (dict(base_sequence=-2), ValueError, "base_sequence must be between -1 and 2147483647"),
    (dict(partition_leader_epoch=1 << 31), ValueError, "partition_leader_epoch must be"),
    (dict(first_offset=None), TypeError, "first_offset must be an int, not NoneType"),
    (dict(compress=3), TypeError, "compress must be callable, not int"),
    (dict(attributes=1), ValueError, "a compressed batch needs a compress function"),
    # columns
    (dict(values=None), TypeError, r"values must be an \(offsets, data, valid\) triple"),
    (dict(values=(np.array([0]), b"")[:2]), TypeError, "values must be an"),
    (dict(values=([0, 1, 2, 3], b"abc", None)), TypeError,
     "values offsets must be a 1-D numpy int32 or int64 array, not list"),
    (dict(values=(np.array([0, 1, 2, 3], dtype=np.uint32), b"abc", None)), TypeError,
     "not a 1-D uint32 array"),
    (dict(values=(np.zeros((2, 2), dtype=np.int64), b"abc", None)), TypeError,
     "not a 2-D int64 array"),
    (dict(values=(np.array([], dtype=np.int64), b"", None)), ValueError,
     "values offsets must hold n \\+ 1 entries for n rows, not 0"),
    (dict(values=(np.array([0, 1, 2, 3]), "abc", None)), TypeError,
     "values data must be a bytes-like object, not str"),
    (dict(values=(np.array([0, 1, 2, 3]), np.zeros((3, 2), np.uint8)[:, 0], None)), BufferError,
     "values data must be a C-contiguous buffer"),
    (dict(values=(np.array([0, 1, 2, 3]), b"abc", [True] * 3)), TypeError,
     "values valid must be None or a 1-D numpy bool array, not list"),
    (dict(values=(np.array([0, 1, 2, 3]), b"abc", np.ones(3, dtype=np.uint8))), TypeError,
     "values valid must be None or a 1-D numpy bool array, not a 1-D uint8 array"),
    (dict(values=(np.array([0, 1, 2, 3]), b"abc", np.ones(2, dtype=bool))), ValueError,
     "values valid holds 2 entries, not 3"),
    (dict(keys=(np.array([0, 1, 2]), b"abc", None)), ValueError,
     r"keys offsets hold 3 entries, not 4 \(n \+ 1 for the 3 rows of values\)"),
    (dict(keys=b"abc"), TypeError, "keys must be an .*triple, not bytes"),
    (dict(timestamps=np.array([1, 2, 3], dtype=np.int32)), TypeError,
     "timestamps must be a 1-D numpy int64 array, not a 1-D int32 array"),
    (dict(timestamps=[1, 2, 3]), TypeError, "timestamps must be a 1-D numpy int64 array"),
    (dict(timestamps=np.array([1, 2], dtype=np.int64)), ValueError,
     "timestamps hold 2 entries, not 3"),
    (dict(headers=G["headers"][:5]), TypeError, "headers must be None or a 6-tuple"),
    (dict(headers=with_(G["headers"], 0, np.array([0, 1, 2]))), ValueError,
     r"header offsets hold 3 entries, not 4"),
    (dict(headers=with_(G["headers"], 1, np.array([], dtype=np.int32))), ValueError,
     "header key offsets must hold H \\+ 1 entries for H headers, not 0"),
    (dict(headers=with_(G["headers"], 1, np.array([0.0, 1.0, 2.0]))), TypeError,
     "header key offsets must be a 1-D numpy int32 or int64 array, not a 1-D float64"),
    (dict(headers=with_(G["headers"], 2, 7)), TypeError,
     "header key data must be a bytes-like object, not int"),
    (dict(headers=with_(G["headers"], 3, np.array([0, 1]))), ValueError,
     r"header value offsets hold 2 entries, not 3 \(n \+ 1 for the 2 header keys\)"),
    (dict(headers=with_(G["headers"], 5, np.array([True]))), ValueError,
     "header value valid holds 1 entries, not 2"),
    (dict(rows=[0, 1]), TypeError, "rows must be a 1-D numpy int32 or int64 array, not list"),
    (dict(rows=np.array([0, 1], dtype=np.uint64)), TypeError, "rows must be a 1-D numpy"),
    (dict(first_offset=I64_MAX - 1), ValueError,
     f"first_offset {I64_MAX - 1} leaves no room for 3 offsets in int64"),
    # records, in encoding order
    (dict(rows=np.array([0, 3])), IndexError, r"rows\[1\] = 3 is outside the 3 rows"),
    (dict(rows=np.array([2, -1])), IndexError, r"rows\[1\] = -1 is outside the 3 rows"),
    (dict(keys=(np.array([0, 2, 1, 3]), b"abc", None)), ValueError,
     "keys offsets decrease at row 1: 2 then 1"),
    (dict(keys=(np.array([0, 1, 2, 4]), b"abc", None)), ValueError,
     r"keys offsets of row 2 span \[2, 4\), outside the 3 bytes of keys data"),
    (dict(keys=(np.array([-1, 1, 2, 3]), b"abc", None)), ValueError,
     r"keys offsets of row 0 span \[-1, 1\), outside the 3 bytes of keys data"),
    (dict(values=(np.array([0, 2, 4, 7]), b"xxyyzz", None)), ValueError,
     r"values offsets of row 2 span \[4, 7\), outside the 6 bytes of values data"),
    (dict(headers=with_(G["headers"], 0, np.array([0, 2, 1, 2]))), ValueError,
     "header offsets decrease at row 1: 2 then 1"),
    (dict(headers=with_(G["headers"], 0, np.array([0, 1, 1, 3]))), ValueError,
     r"header offsets of row 2 span \[1, 3\), outside the 2 header entries"),
    (dict(headers=with_(G["headers"], 1, np.array([0, 1, 3]))), ValueError,
     r"header key offsets of header 1 of row 2 span \[1, 3\), outside the 2 bytes of header "
     "key data"),
    (dict(headers=with_(with_(G["headers"], 3, np.array([0, 1, 5])), 5, None)), ValueError,
     r"header value offsets of header 1 of row 2 span \[1, 5\), outside the 1 bytes"),
    (dict(headers=with_(G["headers"], 3, np.array([1, 0, 0]))), ValueError,
     "header value offsets decrease at header 0 of row 0: 1 then 0"),
]


@pytest.mark.parametrize("kw, exc, message", ERRORS,
                         ids=[f"{i}-{e[1].__name__}" for i, e in enumerate(ERRORS)])
def test_errors(enc, kw, exc, message):
    with pytest.raises(exc, match=message):
        call(enc, **kw)


@pytest.mark.parametrize("kw", [e[0] for e in ERRORS],
                         ids=[f"{i}" for i in range(len(ERRORS))])
def test_errors_are_identical_in_both(kw):
    ext, pure = both()
    got = []
    for mod in (ext, pure):
        with pytest.raises(Exception) as info:
            call(mod, **kw)
        got.append((type(info.value), str(info.value)))
    assert got[0] == got[1]


def test_the_good_call_is_good(enc):
    # the error table's base case must pass, so each entry tests what it says
    buf = call(enc)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in R.iter_records(buf)] == [
        (b"a", b"xx", 1, (("h", b"v"),)), (b"b", None, 2, ()), (b"c", b"zz", 3, (("k", None),))]


def test_nulls_offsets_are_not_checked(enc):
    # a null entry is never read, so its offsets may be anything
    values = (np.array([0, 2, -50, 6]), b"xxyyzz", np.array([True, False, True]))
    with pytest.raises(ValueError, match="values offsets of row 2 span"):
        call(enc, values=values)   # row 2 (valid) starts at -50
    values = (np.array([0, 2, 99, 99]), b"xxyyzz", np.array([True, False, False]))
    assert [r.value for r in R.iter_records(call(enc, values=values))] == [b"xx", None, None]


def test_first_error_in_encoding_order(enc):
    # row 2's key is bad and row 0's value is bad: with rows [2, 0] the key of row 2 is
    # reported; with [0, 2] the value of row 0
    keys = (np.array([0, 1, 2, 9]), b"abc", None)
    values = (np.array([0, 9, 9, 9]), b"xxyyzz", None)
    with pytest.raises(ValueError, match="keys offsets of row 2"):
        call(enc, keys=keys, values=values, rows=np.array([2, 0]))
    with pytest.raises(ValueError, match="values offsets of row 0"):
        call(enc, keys=keys, values=values, rows=np.array([0, 2]))
    # rows not selected are not looked at
    assert call(enc, keys=keys, values=(np.array([0, 2, 9, 9]), b"xxyyzz", None),
                rows=np.array([0]))


@pytest.fixture(scope="module")
def huge():
    """2**31 + 8 bytes that cost nothing until touched (an anonymous mapping)."""
    return mmap.mmap(-1, (1 << 31) + 8)


def test_lengths_above_int32(enc, huge):
    big = (np.array([0, 1 << 31]), huge, None)
    with pytest.raises(ValueError, match="the value of row 0 is 2147483648 bytes, more than an "
                                         "int32 length allows"):
        enc.encode_columns(None, None, big, default_timestamp=0)
    with pytest.raises(ValueError, match="the key of row 0 is 2147483648 bytes"):
        enc.encode_columns(None, big, (np.array([0, 0]), b"", None), default_timestamp=0)
    hdrs = (np.array([0, 1]), np.array([0, 1]), b"k", np.array([0, 1 << 31]), huge, None)
    with pytest.raises(ValueError, match="the header value of header 0 of row 0 is 2147483648"):
        enc.encode_columns(None, None, (np.array([0, 0]), b"", None), default_timestamp=0,
                           headers=hdrs)
    # a key and a value that each fit, but not together
    half = (np.array([0, (1 << 30) + 10]), huge, None)
    with pytest.raises(RecordTooLargeError, match="the record of row 0 does not fit Kafka's "
                                                  "int32 size field") as info:
        enc.encode_columns(None, half, half, default_timestamp=0)
    assert info.value.limit == I32_MAX
    # the check comes after each header, before the next one is looked at
    hdrs = (np.array([0, 2]), np.array([0, 1, 99]), b"k",
            np.array([0, (1 << 31) - 5, 0]), huge, None)
    with pytest.raises(RecordTooLargeError):
        enc.encode_columns(None, None, (np.array([0, 0]), b"", None), default_timestamp=0,
                           headers=hdrs)


# == the twins ==============================================================================


def test_twins_have_the_same_api():
    ext, pure = both()
    assert ext.__all__ == pure.__all__ == ["encode_columns"]
    sig = inspect.signature(pure.encode_columns)
    assert [(p.name, p.kind, p.default) for p in inspect.signature(
        ext.encode_columns).parameters.values()] == [
        (p.name, p.kind, p.default) for p in sig.parameters.values()]
    assert sig.parameters["default_timestamp"].default is inspect.Parameter.empty


@given(case=tables(), codec=st.sampled_from(CODECS),
       max_records=st.integers(1, 4), max_bytes=st.integers(1, 300),
       mangle=st.lists(st.tuples(st.sampled_from(["keys", "values", "headers"]),
                                 st.integers(0, 20), st.integers(-3, 400)), max_size=2))
@scaled(0.5)
def test_property_twins_agree_even_on_bad_offsets(case, codec, max_records, max_bytes, mangle):
    ext, pure = both()
    table, rows = case
    for column, at, value in mangle:   # write garbage into some offsets
        col = getattr(table, column)
        if col is None:
            continue
        offs = col[0].copy()
        offs[at % len(offs)] = value
        setattr(table, column, (offs,) + tuple(col[1:]))
    got = []
    for mod in (ext, pure):
        try:
            got.append(("ok", table.encode(mod, rows, max_batch_records=max_records,
                                           max_batch_bytes=max_bytes,
                                           attributes=int(codec),
                                           compress=compress_fn(codec))))
        except Exception as exc:  # noqa: BLE001 - the error is the result
            got.append((type(exc), str(exc)))
    assert got[0] == got[1]


def test_compiled_kernel_refuses_columns_changed_under_it():
    ext, pure = both()
    offsets = np.array([0, 2, 4, 6])
    values = (offsets, b"xxyyzz", None)

    def compress(view):   # the callback runs between the plan and the second batch
        offsets[2] = 1 << 40
        return compression.compress(1, view, None, magic=2)

    with pytest.raises(RuntimeError, match="the columns changed while they were being encoded"):
        ext.encode_columns(None, None, values, default_timestamp=0, max_batch_records=1,
                           attributes=1, compress=compress)
    # the twin read the offsets before; it encodes what it read
    offsets[2] = 4
    out = pure.encode_columns(None, None, values, default_timestamp=0, max_batch_records=1,
                              attributes=1, compress=compress)
    assert [r.value for r in R.iter_records(out)] == [b"xx", b"yy", b"zz"]


def test_compress_results(enc):
    values = (np.array([0, 2]), b"xx", None)
    with pytest.raises(TypeError, match="compress must return a bytes-like object, not NoneType"):
        enc.encode_columns(None, None, values, default_timestamp=0, attributes=1,
                           compress=lambda view: None)
    # any bytes-like result is copied in
    gz = compress_fn(GZIP)
    for wrap in (bytearray, memoryview, lambda b: np.frombuffer(b, dtype=np.uint8)):
        out = enc.encode_columns(None, None, values, default_timestamp=0, attributes=1,
                                 compress=lambda view, w=wrap: w(gz(view)))
        assert out == R.encode_batch([(None, b"xx", 0)], compression=GZIP, timestamp=0)
    # the callback sees exactly one batch's records section
    seen = []
    enc.encode_columns(None, None, (np.array([0, 2, 4]), b"xxyy", None), default_timestamp=0,
                       attributes=3, max_batch_records=1,
                       compress=lambda view: seen.append(bytes(view)) or b"")
    assert seen == [bytes(R.encode_batch([(None, v, 0)], timestamp=0)[61:])
                    for v in (b"xx", b"yy")]
