"""``decode_columns(..., headers=True)``: the record headers as columns, on both kernels.

The header columns are checked against three independent things: the headers the test
put into the bytes (as raw bytes), ``Record.headers`` of the record iterator of the same
kernel (``iter_batches``), and the other kernel. Corrupt headers must raise exactly what
the record iterator raises for the same bytes. Most tests run on both implementations
through conftest's ``rb`` fixture; ``pair`` compares the two directly.
"""

from __future__ import annotations

import gzip
import struct
import types

import crc32c
import numpy as np
import pytest
from _helpers import framed, len_bytes, rec, record_batch_pair, uvarint, v2_batch, varint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import CODECS, LEGACY_CODECS, TIMESTAMP_TYPES, as_input, record_specs, scaled

from kafkastore import records as R
from kafkastore.errors import CorruptRecordError, InvalidCrcError
from kafkastore.types import CompressionType, ControlRecordType

BASE_COLUMNS = {"offset", "timestamp", "timestamp_type", "key_offsets", "key_data", "key_null",
                "value_offsets", "value_data", "value_null", "header_count"}
HEADER_COLUMNS = {"header_offsets", "header_key_offsets", "header_key_data",
                  "header_value_offsets", "header_value_data", "header_value_null"}
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
              HealthCheck.data_too_large]


@pytest.fixture
def pair():
    """(pure, ext) record_batch kernels, both with the codecs installed."""
    pure, ext = record_batch_pair()
    return types.SimpleNamespace(pure=pure, ext=ext)


# == observation helpers ====================================================================


def iter_recs(rb, data, include_control=False, **kw):
    """Every record ``rb``'s iterator yields, as decode_columns should list them."""
    out = []
    for b in rb.iter_batches(data, **kw):
        if b.is_control and not include_control:
            continue
        out.extend(b)
    return out


def raw_header_rows(cols):
    """Each record's headers rebuilt from the raw arrays: ((key bytes, value bytes|None),)."""
    hoff = cols["header_offsets"]
    koff, kdata = cols["header_key_offsets"], cols["header_key_data"]
    voff, vdata = cols["header_value_offsets"], cols["header_value_data"]
    vnull = cols["header_value_null"]
    rows = []
    for i in range(len(hoff) - 1):
        row = []
        for j in range(hoff[i], hoff[i + 1]):
            key = kdata[koff[j]:koff[j + 1]].tobytes()
            value = None if vnull[j] else vdata[voff[j]:voff[j + 1]].tobytes()
            row.append((key, value))
        rows.append(tuple(row))
    return rows


def check_layout(cols):
    """Shapes, dtypes and offset invariants of the header columns."""
    assert set(cols) == BASE_COLUMNS | HEADER_COLUMNS
    n = len(cols["offset"])
    hoff = cols["header_offsets"]
    assert hoff.dtype == np.int64 and hoff.shape == (n + 1,) and hoff[0] == 0
    assert (np.diff(hoff) >= 0).all()
    assert np.diff(hoff).tolist() == cols["header_count"].tolist()
    h = int(hoff[-1])
    for name in ("header_key", "header_value"):
        offs, data = cols[name + "_offsets"], cols[name + "_data"]
        assert offs.dtype == np.int64 and offs.shape == (h + 1,) and offs[0] == 0
        assert (np.diff(offs) >= 0).all()
        assert data.dtype == np.uint8 and data.shape == (offs[-1],)
    null = cols["header_value_null"]
    assert null.dtype == np.bool_ and null.shape == (h,)
    assert not np.diff(cols["header_value_offsets"])[null].any()  # a null value's span is empty


def expected_rows(recs):
    """What the raw header columns must hold for these records: Record.headers with the keys
    back in bytes (Record decodes them with surrogateescape, which gives the bytes back)."""
    return [tuple((k.encode("utf-8", "surrogateescape"), v) for k, v in r.headers)
            for r in recs]


def check_against_records(rb, data, **kw):
    """decode_columns(headers=True) against the record iterator of the same kernel; returns
    the columns."""
    recs = iter_recs(rb, data, include_control=kw.get("include_control", False))
    cols = rb.decode_columns(data, headers=True, **kw)
    check_layout(cols)
    assert len(cols["offset"]) == len(recs)
    assert raw_header_rows(cols) == expected_rows(recs)
    rc = R.RecordColumns(cols)
    assert [rc.headers(i) for i in range(len(recs))] == [r.headers for r in recs]
    # the other columns are those of the default call
    plain = rb.decode_columns(data, **kw)
    assert set(plain) == BASE_COLUMNS
    for name in BASE_COLUMNS:
        assert cols[name].dtype == plain[name].dtype, name
        assert cols[name].tolist() == plain[name].tolist(), name
    return cols


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - the error is the outcome
        return ("raise", type(exc), str(exc), getattr(exc, "position", None),
                getattr(exc, "offset", None))


def columns_outcome(rb, data, **kw):
    return outcome(lambda: {k: (a.dtype.str, a.tolist())
                            for k, a in sorted(rb.decode_columns(data, **kw).items())})


def records_outcome(rb, data, **kw):
    return outcome(lambda: [(r.offset, r.key, r.value, r.headers)
                            for r in iter_recs(rb, data, **kw)])


def error_of(outcome_):
    assert outcome_[0] == "raise", outcome_
    return outcome_[1:]


# == inputs =================================================================================

HEADER_CASES = {
    "none": [(b"k", b"v", 1, None), (b"k2", b"v2", 2, [])],
    "one": [(b"k", b"v", 1, [("trace-id", b"abc")])],
    "many": [(b"k", b"v", 1, [("h%d" % j, b"x" * j) for j in range(40)])],
    "300 headers (2-byte count)": [(None, None, 1, [("", None)] * 150 + [("k", b"")] * 150)],
    "null values": [(b"k", b"v", 1, [("a", None), ("b", None)])],
    "empty key and value": [(b"", b"", 1, [("", b""), ("", None)])],
    "non-ascii keys": [(b"k", b"v", 1, [("\u20ac", b"e"), ("\U0001F600", b"\x00\xff"),
                                         ("a\x00b", b"")])],
    "invalid utf-8 keys": [(b"k", b"v", 1, [(b"\xff\xfe", b"1"), (b"\xed\xa0\x80", None),
                                             (b"ok\x80", b"2")])],
    "long key and value (2- and 3-byte lengths)": [
        (b"k", b"v", 1, [("K" * 100, b"V" * 9000), ("x" * 70_000, b"y")])],
    "mixed records": [
        (b"a", b"1", 1, [("x", b"1")]),
        (None, b"2", 2, None),
        (b"c", None, 3, [("y", None), ("z", b"")]),
        (b"d", b"4", 4, []),
        (b"e", b"5" * 200, 5, [("w" * 64, b"q" * 64)] * 3),
    ],
}


def raw_expected(records):
    """The raw header rows the test put in."""
    out = []
    for rec_ in records:
        hdrs = rec_[3] or ()
        out.append(tuple((k.encode("utf-8") if isinstance(k, str) else k, v) for k, v in hdrs))
    return out


# == the API ================================================================================


def test_headers_false_returns_exactly_the_old_columns(rb):
    data = R.encode_batch(HEADER_CASES["mixed records"], timestamp=0)
    assert set(rb.decode_columns(data)) == BASE_COLUMNS
    assert set(rb.decode_columns(data, headers=False)) == BASE_COLUMNS
    assert set(rb.decode_columns(data, headers=True)) == BASE_COLUMNS | HEADER_COLUMNS


def test_headers_is_keyword_only(rb):
    data = R.encode_batch([(b"k", b"v", 1, [("a", b"b")])])
    with pytest.raises(TypeError):
        rb.decode_columns(data, 0, None, True)


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_header_columns_hold_what_was_written(rb, case, codec):
    records = HEADER_CASES[case]
    data = R.encode_batch(records, compression=codec, base_offset=10, timestamp=0)
    cols = check_against_records(rb, data)
    assert raw_header_rows(cols) == raw_expected(records)
    assert cols["header_count"].tolist() == [len(r[3] or ()) for r in records]


def test_a_fixed_example_array_by_array(rb):
    data = R.encode_batch([(b"k", b"v", 1, [("ab", b"xyz"), ("c", None)]),
                           (b"k", b"v", 2, None),
                           (b"k", b"v", 3, [("", b"")])])
    cols = rb.decode_columns(data, headers=True)
    assert cols["header_offsets"].tolist() == [0, 2, 2, 3]
    assert cols["header_key_offsets"].tolist() == [0, 2, 3, 3]
    assert cols["header_key_data"].tobytes() == b"abc"
    assert cols["header_value_offsets"].tolist() == [0, 3, 3, 3]
    assert cols["header_value_data"].tobytes() == b"xyz"
    assert cols["header_value_null"].tolist() == [False, True, False]


def test_empty_input(rb):
    cols = rb.decode_columns(b"", headers=True)
    check_layout(cols)
    assert cols["header_offsets"].tolist() == [0]
    assert cols["header_key_offsets"].tolist() == [0]
    assert len(cols["header_value_null"]) == 0
    empty_batch = R.encode_batch([])
    assert check_against_records(rb, empty_batch)["header_offsets"].tolist() == [0]


def test_legacy_messages_have_no_headers(rb):
    data = b"".join([
        R.encode_batch([(b"a", b"1", 1, [("h", b"1")])], base_offset=0),
        R.encode_batch([(b"b", b"2", 2), (None, b"3", 3)], magic=0, base_offset=1),
        R.encode_batch([(b"c", b"4", 4, [("h2", None), ("h3", b"")])], base_offset=3,
                       compression="lz4"),
        R.encode_batch([(b"d", b"5", 5), (b"e", None, 6)], magic=1, base_offset=4,
                       compression="gzip"),  # a compressed wrapper
        R.encode_batch([(b"f", b"6", 7)], magic=1, base_offset=6),
        R.encode_batch([(b"g", b"7", 8, [("last", b"!")])], base_offset=7),
    ])
    cols = check_against_records(rb, data)
    assert cols["offset"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert cols["header_offsets"].tolist() == [0, 1, 1, 1, 3, 3, 3, 3, 4]
    assert raw_header_rows(cols) == [((b"h", b"1"),), (), (), ((b"h2", None), (b"h3", b"")),
                                     (), (), (), ((b"last", b"!"),)]


@pytest.mark.parametrize("include_control", [False, True])
def test_control_batches_only_with_include_control(rb, include_control):
    data = b"".join([
        R.encode_batch([(b"a", b"1", 1, [("x", b"1")]), (b"b", b"2", 2, [("y", None)])],
                       base_offset=0, is_transactional=True, producer_id=5, producer_epoch=0),
        R.encode_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=0,
                               base_offset=2, timestamp=3),
        R.encode_batch([(b"c", b"3", 4, [("z", b"3")])], base_offset=3, compression="zstd"),
    ])
    cols = check_against_records(rb, data, include_control=include_control)
    if include_control:
        assert cols["offset"].tolist() == [0, 1, 2, 3]
        assert cols["header_offsets"].tolist() == [0, 1, 2, 2, 3]
    else:
        assert cols["offset"].tolist() == [0, 1, 3]
        assert cols["header_offsets"].tolist() == [0, 1, 2, 3]
    # a control batch that carries headers (Kafka never writes one, but the bytes allow it)
    marker = R.encode_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", 9,
                              [("odd", b"!")])], is_control=True, is_transactional=True,
                            producer_id=5, producer_epoch=0, base_offset=9)
    cols = check_against_records(rb, marker, include_control=include_control)
    assert raw_header_rows(cols) == ([((b"odd", b"!"),)] if include_control else [])


def test_a_byte_range(rb):
    first = R.encode_batch([(b"a", b"1", 1, [("x", b"1")])], base_offset=0)
    second = R.encode_batch([(b"b", b"2", 2, [("y", b"22"), ("z", None)])], base_offset=1)
    data = first + second + first
    cols = rb.decode_columns(data, len(first), len(first) + len(second), headers=True)
    assert raw_header_rows(cols) == [((b"y", b"22"), (b"z", None))]


def test_records_the_fast_path_declines(rb):
    # Records with a varint the compiled fast path does not take (over 3 bytes: a 2**30 ms
    # timestamp delta, a key length written in 5 bytes, a 1 MiB header value) go through
    # the checked parser: their headers must land in the same rows as everyone else's.
    big = b"v" * (1 << 20)
    records = []
    for i in range(40):
        ts = 1 << 30 if i % 7 == 3 else 5
        hdrs = [("i", str(i).encode())] * (i % 4)
        if i == 17:
            hdrs = [("big", big), ("after", None)]
        records.append((b"k%d" % i, b"v", ts, hdrs))
    data = R.encode_batch(records, timestamp=0)
    cols = check_against_records(rb, data)
    assert raw_header_rows(cols) == raw_expected(records)
    # a non-minimal (5-byte) key length varint: valid to Kafka, declined by the fast path
    body = (b"\x00\x00" + varint(1) + b"\x82\x80\x80\x80\x00" + b"k" + len_bytes(b"v") + varint(2)
            + varint(1) + b"a" + len_bytes(b"1") + varint(1) + b"b" + len_bytes(None))
    records_ = rec(0, headers=((b"x", b"y"),)) + framed(body) + rec(2, headers=((b"z", b""),))
    data = v2_batch(records_, count=3, last_offset_delta=2)
    cols = check_against_records(rb, data)
    assert raw_header_rows(cols) == [((b"x", b"y"),), ((b"a", b"1"), (b"b", None)),
                                     ((b"z", b""),)]


def test_header_arrays_grow_as_needed(rb):
    # the header entry arrays are not sized in advance: start with records without headers,
    # then ever more of them per record, over several batches
    parts = []
    expected = []
    for b in range(6):
        records = [(b"k", b"v", 1, [("h%d" % j, b"%d" % i) for j in range((i * b) % 23)])
                   for i in range(400)]
        parts.append(R.encode_batch(records, base_offset=b * 400, timestamp=0,
                                    compression="gzip" if b % 2 else "none"))
        expected += raw_expected(records)
    cols = check_against_records(rb, b"".join(parts))
    assert raw_header_rows(cols) == expected


def test_large_input_through_the_column_pool(rb):
    # every header array above the 1 MiB pool threshold; decode twice, with the first
    # result alive, then again after it died: same arrays, never shared memory
    records = [(b"key", b"value", 1, [("trace-id", b"%08d" % i), ("n", None)])
               for i in range(2000)]
    data = b"".join(R.encode_batch(records, base_offset=k * 2000, timestamp=0)
                    for k in range(70))
    first = rb.decode_columns(data, headers=True)
    check_layout(first)
    snapshot = {k: a.copy() for k, a in first.items()}
    second = rb.decode_columns(data, headers=True)
    for name in HEADER_COLUMNS:
        assert not np.shares_memory(first[name], second[name]), name
        np.testing.assert_array_equal(first[name], snapshot[name], err_msg=name)
        np.testing.assert_array_equal(second[name], snapshot[name], err_msg=name)
    del first, second
    third = rb.decode_columns(data, headers=True)
    for name in snapshot:
        np.testing.assert_array_equal(third[name], snapshot[name], err_msg=name)
    assert len(third["header_value_null"]) == 2 * 140_000
    assert third["header_value_null"][1::2].all() and not third["header_value_null"][::2].any()
    assert third["header_key_data"][:8].tobytes() == b"trace-id"


# == RecordColumns.headers ==================================================================


def test_record_columns_headers(rb):
    records = HEADER_CASES["mixed records"] + HEADER_CASES["invalid utf-8 keys"]
    data = R.encode_batch(records, timestamp=0)
    recs = list(rb.read_batch(data))
    cols = R.RecordColumns(rb.decode_columns(data, headers=True))
    got = [cols.headers(i) for i in range(len(records))]
    assert got == [r.headers for r in recs]
    assert got[0] == (("x", b"1"),)
    assert got[1] == ()
    assert got[-1][0] == ("\udcff\udcfe", b"1")  # surrogateescape, as Record.headers
    assert all(type(h) is tuple and all(type(p) is tuple for p in h) for h in got)
    assert cols.headers(-1) == got[-1]
    with pytest.raises(IndexError):
        cols.headers(len(records))
    with pytest.raises(IndexError):
        cols.headers(-len(records) - 1)
    assert cols.header_offsets is not None and cols.header_value_null is not None


def test_record_columns_without_headers(rb):
    data = R.encode_batch([(b"k", b"v", 1, [("a", b"b")])])
    cols = R.RecordColumns(rb.decode_columns(data))
    for name in HEADER_COLUMNS:
        assert getattr(cols, name) is None, name
    assert cols.header_count.tolist() == [1]
    with pytest.raises(ValueError, match="headers=True"):
        cols.headers(0)


def test_public_decode_columns_passes_headers():
    data = R.encode_batch([(b"k", b"v", 1, [("a", b"b"), ("c", None)])])
    assert R.decode_columns(data, headers=True).headers(0) == (("a", b"b"), ("c", None))
    with pytest.raises(ValueError):
        R.decode_columns(data).headers(0)


# == corrupt headers ========================================================================

K, V = len_bytes(b"k"), len_bytes(b"v")
PREFIX = b"\x00\x00\x00" + K + V  # attributes, ts delta, offset delta, key, value
CORRUPT_HEADERS = {
    # name: (record body after PREFIX, message fragment)
    "header count past the record": (varint(5) + varint(1) + b"a" + len_bytes(b"1"),
                                     "more than the record holds"),
    "header count 2**31-1": (varint((1 << 31) - 1) + b"\x00" * 8, "more than the record holds"),
    "negative header count": (varint(-1), "invalid number of record headers -1"),
    "count claims 2, one present": (varint(2) + varint(1) + b"a" + len_bytes(b"1") + b"\x00",
                                    "truncated varint"),
    "negative header key length": (varint(1) + varint(-1) + len_bytes(b"1"),
                                   "Invalid negative header key size"),
    "header key past the record": (varint(1) + varint(9) + b"ab", "header key past record end"),
    "header key length 2**31-1": (varint(1) + varint((1 << 31) - 1) + b"abc",
                                  "header key past record end"),
    "header value past the record": (varint(1) + varint(1) + b"h" + varint(7) + b"x",
                                     "header value past record end"),
    "truncated header key length": (varint(2) + varint(1) + b"a" + len_bytes(b"1") + b"\x80",
                                    "truncated varint"),
    "truncated header value length": (varint(1) + varint(1) + b"h" + b"\x80",
                                      "truncated varint"),
    "overlong header key length": (varint(1) + b"\x80" * 5 + b"\x00" + len_bytes(b"1"),
                                   "Varint is too long"),
    "bytes after the last header": (varint(1) + varint(1) + b"h" + len_bytes(b"1") + b"\x00",
                                    "expected to read"),
}


def corrupt_batch(case, *, good_before=3, good_after=2, codec=0):
    """A batch of good records with headers, the corrupt one, more good ones; CRC valid."""
    body, _ = CORRUPT_HEADERS[case]
    records = b"".join(rec(i, headers=((b"h", b"%d" % i),)) for i in range(good_before))
    records += framed(PREFIX + body)
    records += b"".join(rec(good_before + 1 + i) for i in range(good_after))
    count = good_before + 1 + good_after
    if codec:
        records = gzip.compress(records, mtime=0)
    return v2_batch(records, count=count, base_offset=500, last_offset_delta=count - 1,
                    attributes=codec)


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("case", list(CORRUPT_HEADERS))
def test_corrupt_headers_raise_what_the_record_iterator_raises(rb, case, codec):
    _, fragment = CORRUPT_HEADERS[case]
    good = R.encode_batch([(b"g", b"g", 1, [("ok", b"1")])], base_offset=0)
    data = good + corrupt_batch(case, codec=codec)
    expected = error_of(records_outcome(rb, data))
    assert expected[0] is CorruptRecordError and expected[0] is not InvalidCrcError
    assert fragment in expected[1]
    assert expected[2] == len(good)  # the corrupt batch's position
    with_headers = error_of(columns_outcome(rb, data, headers=True))
    assert with_headers == expected
    assert error_of(columns_outcome(rb, data)) == expected
    # the same record alone, first in its batch
    alone = corrupt_batch(case, good_before=0, good_after=0, codec=codec)
    assert error_of(columns_outcome(rb, alone, headers=True)) == \
        error_of(records_outcome(rb, alone))


@pytest.mark.parametrize("case", list(CORRUPT_HEADERS))
def test_corrupt_headers_same_error_on_both_kernels(pair, case):
    data = corrupt_batch(case)
    assert columns_outcome(pair.pure, data, headers=True) == \
        columns_outcome(pair.ext, data, headers=True)


def test_truncated_batch_with_headers(rb):
    # the declared count says more records than the bytes hold
    records = rec(0, headers=((b"a", b"1"),)) + rec(1, headers=((b"b", None),))
    data = v2_batch(records, count=3, last_offset_delta=2)
    expected = error_of(records_outcome(rb, data))
    assert "premature EOF" in expected[1]
    assert error_of(columns_outcome(rb, data, headers=True)) == expected


# == both kernels, property tests ===========================================================


@st.composite
def mixed_logs(draw):
    """Batches of any magic and codec back to back, headers on the magic 2 ones."""
    parts = []
    next_offset = draw(st.integers(0, 1 << 40))
    for _ in range(draw(st.integers(0, 5))):
        magic = draw(st.sampled_from([0, 1, 2, 2, 2]))
        codec = draw(st.sampled_from(CODECS if magic == 2 else LEGACY_CODECS))
        control = magic == 2 and draw(st.integers(0, 4)) == 0
        specs, default_ts = draw(record_specs(min_size=1, max_size=6, with_headers=magic == 2))
        parts.append(R.encode_batch(
            [as_input(s, "tuple4") for s in specs], magic=magic, compression=codec,
            base_offset=next_offset, timestamp_type=draw(st.sampled_from(TIMESTAMP_TYPES)),
            timestamp=default_ts, is_control=control))
        next_offset += len(specs)
    return b"".join(parts)


@scaled(0.6, suppress_health_check=FIXTURE_OK)
@given(data=mixed_logs(), include_control=st.booleans())
def test_property_equals_the_record_iterator(rb, data, include_control):
    check_against_records(rb, data, include_control=include_control)


@scaled(0.6, suppress_health_check=FIXTURE_OK)
@given(data=mixed_logs(), include_control=st.booleans())
def test_property_both_kernels_give_identical_arrays(pair, data, include_control):
    a = pair.pure.decode_columns(data, headers=True, include_control=include_control)
    b = pair.ext.decode_columns(data, headers=True, include_control=include_control)
    assert set(a) == set(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].shape == b[name].shape, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def fix_crc(data: bytes) -> bytes:
    out = bytearray(data)
    size = struct.unpack_from(">i", out, 8)[0]
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:12 + size])))
    return bytes(out)


@st.composite
def mutated_batches(draw):
    """A valid batch with headers, then bytes of its records section changed, cut or
    inserted (CRC fixed, so the records parser is what decides)."""
    specs, default_ts = draw(record_specs(min_size=1, max_size=5))
    data = bytearray(R.encode_batch([as_input(s, "tuple4") for s in specs], timestamp=default_ts))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(61, max(61, len(data) - 1)))
        kind = draw(st.sampled_from(["set", "cut", "insert", "varint"]))
        if kind == "set" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 4))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=3))
        else:
            data[at:at] = uvarint(draw(st.integers(0, 1 << 32)))
    struct.pack_into(">i", data, 8, len(data) - 12)
    return fix_crc(bytes(data))


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=mutated_batches())
def test_property_hostile_records_same_outcome_everywhere(pair, data):
    for rb in (pair.pure, pair.ext):
        with_headers = columns_outcome(rb, data, headers=True)
        without = columns_outcome(rb, data)
        records = records_outcome(rb, data)
        if records[0] == "raise":
            assert with_headers == without
            # the same error as the record iterator; only decode_columns' up-front check
            # of the declared count against the bytes may word it differently
            if with_headers[2].startswith("Record count"):
                assert (with_headers[1], with_headers[3]) == (records[1], records[3])
            else:
                assert with_headers == records
        else:
            assert with_headers[0] == "ok" and without[0] == "ok"
            cols = {k: np.array(v, dtype=d) for k, (d, v) in with_headers[1].items()}
            check_layout(cols)
            assert raw_header_rows(cols) == [
                tuple((k.encode("utf-8", "surrogateescape"), v) for k, v in r[3])
                for r in records[1]]
    assert columns_outcome(pair.pure, data, headers=True) == \
        columns_outcome(pair.ext, data, headers=True)
