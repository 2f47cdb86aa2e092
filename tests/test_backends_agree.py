"""The compiled and the pure-Python record_batch kernels agree through the whole pipeline.

Both modules are imported directly (``kafkastore._ext.record_batch`` and
``kafkastore._pure.record_batch``), whatever backend the public API selected, and fed the
same input: encode_batch_v2 must return the same bytes (or raise the same error); walking
the result, intact or damaged, must give the same batches, records, columns, scan and
errors (type, message, position, offset).
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from kafkastore import compression
from kafkastore import records as R

from _fuzz_targets import BATCH_FIELDS as HEADER_FIELDS
from _helpers import outcome, record_batch_pair, walk_outcomes
from strategies import (
    CODECS,
    I16_MAX,
    I16_MIN,
    I32_MAX,
    I64_MAX,
    I64_MIN,
    LEGACY_CODECS,
    TIMESTAMP_TYPES,
    as_input,
    base_offsets,
    base_sequences,
    input_shapes,
    int64s,
    leader_epochs,
    producer_epochs,
    producer_ids,
    record_specs,
    scaled,
)


def _compress(codec):
    def compress(view, _codec=int(codec)):
        return compression.compress(_codec, view, None, magic=2)
    return compress


@pytest.fixture(scope="module")
def kernels():
    """``(ext, pure)``: the two record_batch kernels, each with the decompressor installed."""
    pure, ext = record_batch_pair()
    assert ext is not pure
    return ext, pure


# -- transcripts: everything observable, errors included -----------------------------------


def _error(exc) -> tuple:
    return ("error", type(exc), str(exc), getattr(exc, "position", None),
            getattr(exc, "offset", None), getattr(exc, "stored", None),
            getattr(exc, "computed", None), getattr(exc, "limit", None))


def _call(fn, *args, **kw):
    return outcome(lambda: fn(*args, **kw), _error)


def _value(v):
    if isinstance(v, memoryview):
        return ("memoryview", v.tobytes())
    if isinstance(v, (bool, int)) and type(v).__name__ not in ("bool", "int"):
        return (type(v).__name__, int(v))  # enums: name and value
    return v


# every header property, plus the decompression cap the batch was read with
BATCH_FIELDS = HEADER_FIELDS + ("max_decompressed_bytes",)
LEGACY_FIELDS = BATCH_FIELDS + ("timestamp", "key", "value")


def _attr(obj, name):
    return outcome(lambda: _value(getattr(obj, name)), _error)


def batch_transcript(batch) -> list:
    fields = LEGACY_FIELDS if batch.magic < 2 else BATCH_FIELDS
    out = [type(batch).__name__, repr(batch)]
    out += [(name, _attr(batch, name)) for name in fields]
    out.append(("is_valid", _call(batch.is_valid)))
    out.append(("compute_crc", _call(batch.compute_crc)))
    out.append(("validate", _call(batch.validate)))
    out.append(("to_bytes", _call(batch.to_bytes)))
    out.append(("payload", _call(lambda: _value(batch.payload()))))
    out.append(("records", _call(lambda: [record_transcript(r) for r in batch])))
    return out


def record_transcript(rec) -> tuple:
    return (type(rec).__name__, rec.offset, rec.timestamp, _value(rec.timestamp_type),
            type(rec.key).__name__, rec.key, type(rec.value).__name__, rec.value,
            type(rec.headers).__name__, rec.headers, repr(rec))


def iter_transcript(mod, buf, **kw) -> list:
    return walk_outcomes(mod, buf, batch_transcript, _error, **kw)


def columns_transcript(mod, buf, **kw):
    result = _call(mod.decode_columns, buf, **kw)
    if result[0] != "ok":
        return result
    cols = result[1]
    return ("ok", sorted((name, arr.dtype.str, arr.shape, arr.tobytes())
                         for name, arr in cols.items()))


SCAN_COLUMNS = ("position", "size", "magic", "base_offset", "last_offset", "max_timestamp",
                "record_count")


def scan_transcript(mod, buf, **kw):
    result = _call(mod.scan_batches, buf, **kw)
    if result[0] != "ok":
        return result
    scan = result[1]
    cols = []
    for name in SCAN_COLUMNS:
        arr = getattr(scan, name)
        cols.append((name, arr.dtype.str, arr.shape, arr.tolist()))
    err = None if scan.error is None else _error(scan.error)
    return ("ok", type(scan).__name__, len(scan), cols, scan.valid_bytes, scan.start,
            scan.end, scan.truncated, err, repr(scan))


def assert_agree(ext_result, pure_result):
    if ext_result != pure_result:
        # show the first difference rather than two huge transcripts
        if isinstance(ext_result, list) and isinstance(pure_result, list):
            for i, (a, b) in enumerate(zip(ext_result, pure_result)):
                assert a == b, f"entry {i} differs"
            assert len(ext_result) == len(pure_result)
        assert ext_result == pure_result


# -- encoding -------------------------------------------------------------------------------


@st.composite
def encode_args(draw):
    """Arguments for encode_batch_v2, mostly valid, sometimes out of range."""
    specs, default_ts = draw(record_specs(min_size=0, max_size=6))
    shape = draw(input_shapes)
    codec = draw(st.sampled_from(CODECS))
    attributes = int(codec)
    for bits in ([0, 0x08], [0, 0x10], [0, 0x20], [0, 0x40, 0x80, 0x100]):
        attributes |= draw(st.sampled_from(bits))  # ts type, txn, control, then stray bits
    n = len(specs)
    base = draw(base_offsets)
    offsets = None
    if n and draw(st.booleans()):
        deltas = sorted(draw(st.sets(st.integers(0, I32_MAX), min_size=n, max_size=n)))
        offsets = [base + d for d in deltas]
    last_delta = None
    if draw(st.booleans()):
        last_delta = draw(st.integers(-2, I32_MAX + 1))
    wild = draw(st.integers(0, 9)) == 0  # now and then, values outside the fields' ranges

    def field(valid, wild_range):
        return draw(st.integers(*wild_range)) if wild else draw(valid)

    return dict(
        records=[as_input(s, shape) for s in specs],
        base_offset=field(st.just(base), (I64_MIN - 2, I64_MAX + 2)),
        partition_leader_epoch=field(leader_epochs, (-(1 << 32), 1 << 32)),
        attributes=attributes,
        producer_id=field(producer_ids, (I64_MIN - 2, I64_MAX + 2)),
        producer_epoch=field(producer_epochs, (I16_MIN - 2, I16_MAX + 2)),
        base_sequence=field(base_sequences, (-(1 << 32), 1 << 32)),
        default_timestamp=default_ts,
        max_timestamp=draw(st.one_of(st.none(), int64s)),
        last_offset_delta=last_delta,
        offsets=offsets,
        delete_horizon_ms=draw(st.one_of(st.none(), st.none(), int64s,
                                         st.integers(0, 1 << 45))),
        compress=_compress(codec) if codec else None,
    )


@scaled(1.5, suppress_health_check=[HealthCheck.too_slow])
@given(args=encode_args())
def test_encode_batch_v2_identical(kernels, args):
    ext, pure = kernels
    a = _call(ext.encode_batch_v2, **args)
    b = _call(pure.encode_batch_v2, **args)
    assert_agree(a, b)
    if a[0] == "ok":
        assert type(a[1]) is bytes and type(b[1]) is bytes
        # and both read their output back the same way
        assert_agree(iter_transcript(ext, a[1]), iter_transcript(pure, b[1]))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_encode_identical_positional_and_uncompressed_fallback(kernels, codec):
    ext, pure = kernels
    records = [(b"k%d" % i, b"value-%d" % (i % 3) * 40, 1000 + i, [("h", b"%d" % i)])
               for i in range(50)]
    args = (records, 7, 3, int(codec) | 0x10, 42, 1, 0, 999, None, None, None, None,
            _compress(codec) if codec else None)
    assert ext.encode_batch_v2(*args) == pure.encode_batch_v2(*args)
    # a codec without a compress function is an error in both
    if codec:
        a = _call(ext.encode_batch_v2, records, attributes=int(codec))
        b = _call(pure.encode_batch_v2, records, attributes=int(codec))
        assert a[0] == "error" and a[:3] == b[:3]


BAD_RECORDS = [
    [("k", b"v")], [(b"k", "v")], [(1, b"v")], [(b"k", b"v", 1, [], 5)], [(b"k",)],
    [object()], [b"kv"], [None], [(b"k", b"v", "5")], [(b"k", b"v", 1.5)],
    [(b"k", b"v", 1, [("h",)])], [(b"k", b"v", 1, [(None, b"v")])],
    [(b"k", b"v", 1, [("h", "v")])], [(b"k", b"v", 1, ["hv"])],
    [(b"k", b"v", 1 << 63)], [(b"k", b"v", I64_MIN), (b"k", b"v", I64_MAX)],
    [(bytearray(b"k"), memoryview(b"v"), 1, [(b"bytes-key", bytearray(b"x"))])],
]


@pytest.mark.parametrize("records", BAD_RECORDS, ids=range(len(BAD_RECORDS)))
def test_encode_errors_identical(kernels, records):
    ext, pure = kernels
    a = _call(ext.encode_batch_v2, records, default_timestamp=5)
    b = _call(pure.encode_batch_v2, records, default_timestamp=5)
    assert a[:3] == b[:3]
    if a[0] == "ok":
        assert a == b


# -- decoding: intact and damaged logs ---------------------------------------------------------


@st.composite
def logs(draw):
    """A few entries of every kind back to back, built through the public writer."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        magic = draw(st.sampled_from([0, 1, 2, 2, 2]))
        codec = draw(st.sampled_from(CODECS if magic == 2 else LEGACY_CODECS))
        specs, default_ts = draw(record_specs(min_size=0 if magic == 2 else 1, max_size=5,
                                              with_headers=magic == 2))
        kw = dict(magic=magic, compression=codec, base_offset=draw(base_offsets),
                  timestamp_type=draw(st.sampled_from(TIMESTAMP_TYPES)),
                  timestamp=default_ts)
        if magic == 2:
            kw.update(is_control=draw(st.booleans()), is_transactional=draw(st.booleans()),
                      producer_id=draw(producer_ids), producer_epoch=draw(producer_epochs),
                      base_sequence=draw(base_sequences),
                      partition_leader_epoch=draw(leader_epochs),
                      # the default timestamp is within int64 deltas of every record's
                      delete_horizon_ms=draw(st.sampled_from([None, default_ts])))
        parts.append(R.encode_batch([as_input(s, "tuple4") for s in specs], **kw))
    return b"".join(parts)


def _reseal(buf: bytearray) -> None:
    """Recompute the CRC of every entry whose framing still holds, so damage reaches the
    record parser even when CRCs are checked."""
    pos = 0
    while len(buf) - pos > 17:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 14 or size > len(buf) - pos - 12:
            return
        magic = buf[pos + 16]
        end = pos + 12 + size
        if magic == 2 and size >= 49:
            struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21:end])))
        elif magic in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16:end])))
        pos += 12 + size


# interesting places in a v2 header: size, magic, attributes, last offset delta, count
HEADER_SPOTS = (8, 9, 10, 11, 16, 21, 22, 23, 26, 57, 58, 59, 60, 61, 62, 63)


@st.composite
def damaged_logs(draw):
    buf = bytearray(draw(logs()))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["byte", "byte", "header", "truncate", "append"]))
        if kind == "byte" and buf:
            buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
        elif kind == "header" and len(buf) > 64:
            buf[draw(st.sampled_from(HEADER_SPOTS))] = draw(st.sampled_from([0, 1, 2, 3, 0x7F,
                                                                             0x80, 0xFF]))
        elif kind == "truncate" and buf:
            del buf[draw(st.integers(0, len(buf) - 1)):]
        elif kind == "append":
            buf += draw(st.binary(max_size=30))
    if draw(st.booleans()):
        _reseal(buf)
    return bytes(buf)


DECODE_SETTINGS = scaled(1.5, suppress_health_check=[HealthCheck.too_slow])


@DECODE_SETTINGS
@given(buf=logs(), validate=st.booleans())
def test_intact_logs_identical(kernels, buf, validate):
    ext, pure = kernels
    a = iter_transcript(ext, buf, validate=validate)
    assert a and a[-1][0] != "error"  # sanity: an intact log decodes
    assert_agree(a, iter_transcript(pure, buf, validate=validate))
    assert_agree(columns_transcript(ext, buf, include_control=True),
                 columns_transcript(pure, buf, include_control=True))
    assert_agree(scan_transcript(ext, buf), scan_transcript(pure, buf))


@DECODE_SETTINGS
@given(buf=damaged_logs(), validate=st.booleans(), include_control=st.booleans())
def test_damaged_logs_identical(kernels, buf, validate, include_control):
    ext, pure = kernels
    assert_agree(iter_transcript(ext, buf, validate=validate),
                 iter_transcript(pure, buf, validate=validate))
    assert_agree(columns_transcript(ext, buf, validate=validate,
                                    include_control=include_control),
                 columns_transcript(pure, buf, validate=validate,
                                    include_control=include_control))
    assert_agree(scan_transcript(ext, buf, validate=validate),
                 scan_transcript(pure, buf, validate=validate))


@DECODE_SETTINGS
@given(buf=damaged_logs(), data=st.data())
def test_ranges_and_read_batch_identical(kernels, buf, data):
    ext, pure = kernels
    n = len(buf)
    start = data.draw(st.integers(-2, n + 2))
    end = data.draw(st.one_of(st.none(), st.integers(0, n + 20)))
    bound = data.draw(st.sampled_from([R.DEFAULT_MAX_DECOMPRESSED_BYTES, 0, 1, 64, 1000]))
    kw = dict(start=start, end=end, validate=False)
    assert_agree(iter_transcript(ext, buf, max_decompressed_bytes=bound, **kw),
                 iter_transcript(pure, buf, max_decompressed_bytes=bound, **kw))
    assert_agree(columns_transcript(ext, buf, max_decompressed_bytes=bound, **kw),
                 columns_transcript(pure, buf, max_decompressed_bytes=bound, **kw))
    assert_agree(scan_transcript(ext, buf, **kw), scan_transcript(pure, buf, **kw))
    position = data.draw(st.integers(0, n))  # outside: test_read_batch_outside_the_buffer

    def read(mod):
        result = _call(mod.read_batch, buf, position, max_decompressed_bytes=bound)
        return result if result[0] != "ok" else batch_transcript(result[1])

    assert_agree(read(ext), read(pure))


@pytest.mark.parametrize("field, offset, fmt, value", [
    ("last_offset_delta", 23, ">i", -5),
    ("last_offset_delta", 23, ">i", -(1 << 31)),
    ("last_offset_delta", 23, ">i", I32_MAX),
    ("record_count", 57, ">i", -1),
    ("record_count", 57, ">i", 1 << 20),
    ("attributes", 21, ">h", 0x07),
    ("attributes", 21, ">h", -1),
    ("base_offset", 0, ">q", I64_MAX),
    ("batch_length", 8, ">i", 48),
])
def test_crafted_headers_identical(kernels, field, offset, fmt, value):
    """Hostile header values, CRC re-sealed: every derived property must agree."""
    ext, pure = kernels
    buf = bytearray(R.encode_batch([(b"k", b"v", 1), (b"k2", None, 2)], base_sequence=7,
                                   producer_id=1, producer_epoch=0))
    struct.pack_into(fmt, buf, offset, value)
    _reseal(buf)
    buf = bytes(buf)
    for validate in (True, False):
        assert_agree(iter_transcript(ext, buf, validate=validate),
                     iter_transcript(pure, buf, validate=validate))
    assert_agree(columns_transcript(ext, buf, validate=False),
                 columns_transcript(pure, buf, validate=False))
    assert_agree(scan_transcript(ext, buf), scan_transcript(pure, buf))


@pytest.mark.parametrize("where", ["before", "past-end", "far-past-end"])
def test_read_batch_outside_the_buffer(kernels, where):
    ext, pure = kernels
    buf = R.encode_batch([(b"k", b"v", 1)])
    position = {"before": -1, "past-end": len(buf) + 1, "far-past-end": len(buf) + 100}[where]
    a = _call(ext.read_batch, buf, position)
    b = _call(pure.read_batch, buf, position)
    assert a[0] == "error" and issubclass(a[1], ValueError)
    assert a == b


@pytest.mark.parametrize("make", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, dtype=np.uint8)],
                         ids=["bytes", "bytearray", "memoryview", "numpy"])
def test_buffer_types_identical(kernels, make):
    ext, pure = kernels
    buf = b"".join([
        R.encode_batch([(b"k", b"v", 1, [("h", None)])], base_offset=0),
        R.encode_batch([(b"a", b"b" * 300, 2)], magic=1, base_offset=1, compression="gzip"),
        R.encode_batch([(None, b"c", 3)], base_offset=2, compression="zstd"),
    ])
    for mod in (ext, pure):
        assert [r.offset for b in mod.iter_batches(make(buf)) for r in b] == [0, 1, 2]
    assert_agree(iter_transcript(ext, make(buf)), iter_transcript(pure, make(buf)))
    assert_agree(columns_transcript(ext, make(buf)), columns_transcript(pure, make(buf)))
    assert_agree(scan_transcript(ext, make(buf)), scan_transcript(pure, make(buf)))


def test_transcripts_see_differences(kernels):
    """The comparison is not vacuous: different logs give different transcripts."""
    ext, pure = kernels
    one = R.encode_batch([(b"k", b"v", 1)])
    two = R.encode_batch([(b"k", b"w", 1)])
    assert iter_transcript(ext, one) != iter_transcript(pure, two)
    assert columns_transcript(ext, one) != columns_transcript(pure, two)
    bad = bytearray(one)
    bad[-1] ^= 1
    assert scan_transcript(ext, one) != scan_transcript(pure, bytes(bad))


# -- the columnar decoder's fast path -------------------------------------------------------
#
# The compiled decode_columns parses ordinary records in a C fast path and hands anything
# else (varints longer than three bytes, headers it rejects, lengths past the record end...)
# to the checked parser. These records put every field at every varint width, so both paths
# and every hand-over between them run; each single-byte change to the records section,
# with the CRC recomputed, must still give the pure twin's result or error.


def _uvarint(value: int, width: int) -> bytes:
    """Unsigned LEB128 of ``value`` padded with zero groups to ``width`` bytes (valid for
    Kafka's readers, which only count the bytes)."""
    groups = []
    while True:
        groups.append(value & 0x7F)
        value >>= 7
        if not value:
            break
    groups += [0] * (width - len(groups))
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


def _zz(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _record(width, ts_delta, offset_delta, key, value, headers=()) -> bytes:
    def length(blob):
        return _uvarint(_zz(-1 if blob is None else len(blob)), width) + (blob or b"")
    body = (b"\x00" + _uvarint(_zz(ts_delta), width) + _uvarint(_zz(offset_delta), width)
            + length(key) + length(value) + _uvarint(_zz(len(headers)), width))
    for hkey, hval in headers:
        body += length(hkey) + length(hval)
    return _uvarint(_zz(len(body)), width) + body


def _v2(records: list[bytes], base_offset=100, base_ts=1_700_000_000_000, attributes=0):
    payload = b"".join(records)
    head = struct.pack(">qiibIhiqqqhii", base_offset, 49 + len(payload), 0, 2, 0, attributes,
                       len(records) - 1, base_ts, base_ts + 5000, -1, -1, -1, len(records))
    buf = bytearray(head + payload)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


FAST_PATH_RECORDS = [
    _record(1, 0, 0, b"k" * 16, b"v" * 100),
    _record(2, 1, 1, None, b"x" * 40),
    _record(3, -3, 2, b"", None),
    _record(4, 70_000, 3, b"key", b"value"),
    _record(5, -1, 4, b"a" * 70, b"b" * 9000),
    _record(1, 2, 5, b"h", b"v", [(b"k1", b"v1"), (b"k2", None)]),
    _record(3, 3, 6, b"h" * 33, b"v" * 31, [(b"", b"")]),
    _record(1, 2 ** 40, 7, None, None),
    _record(2, 0, 8, b"\xff" * 31, b"\x80" * 32),
    _record(1, 100_000, 9, b"q", b"r" * 5000),
    _record(1, 0, 10, b"z" * 15, b"last"),
]


def test_columns_fast_path_hand_over(kernels):
    ext, pure = kernels
    buf = _v2(FAST_PATH_RECORDS) + _v2(FAST_PATH_RECORDS[::-1], base_offset=200, attributes=8)
    expected = columns_transcript(pure, buf)
    assert expected[0] == "ok"
    assert_agree(columns_transcript(ext, buf), expected)
    # a negative key length other than -1 reads as null, as Kafka reads it
    body = b"\x00\x00\x00" + _uvarint(_zz(-7), 1) + _uvarint(_zz(1), 1) + b"v\x00"
    odd = _v2([_uvarint(_zz(len(body)), 1) + body])
    assert columns_transcript(pure, odd)[0] == "ok"
    assert_agree(columns_transcript(ext, odd), columns_transcript(pure, odd))


def test_columns_fast_path_every_byte_changed(kernels):
    ext, pure = kernels
    good = _v2([r for i, r in enumerate(FAST_PATH_RECORDS) if i not in (4, 9)])  # the short ones
    for pos in range(61, len(good)):
        for new in {0x00, 0x01, 0x7F, 0x80, 0xFF, good[pos] ^ 0x01, good[pos] ^ 0x80}:
            buf = bytearray(good)
            buf[pos] = new
            struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
            for validate in (True, False):
                assert_agree(columns_transcript(ext, bytes(buf), validate=validate),
                             columns_transcript(pure, bytes(buf), validate=validate))
