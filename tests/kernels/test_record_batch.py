"""Record-batch kernels (kafkastore._pure.record_batch and kafkastore._ext.record_batch).

Every input is built with struct, crc32c, zlib and gzip (the builders here and in
tests/_helpers.py), following the spec (kafka-storage.md §2), independently of the
library's encoder; expected values are the values the test put into the bytes. Most tests
run on both implementations through the ``impl`` fixture (via conftest's ``rb``); the
tests at the end compare the two implementations with each other on the same inputs
(results, batch attributes, numpy columns, and exception type + message + position).
"""

from __future__ import annotations

import gzip
import importlib
import random
import re
import struct
import types
import zlib

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkastore.errors import (
    CorruptRecordError,
    InvalidCrcError,
    KafkaStoreError,
    UnsupportedCompressionError,
)
from kafkastore.types import CompressionType, TimestampType

from _helpers import (
    column_rows,
    compiled_kernel,
    framed,
    legacy,
    len_bytes,
    outcome,
    rec,
    record_batch_pair,
    record_body,
    v2_batch,
    varint,
    varlong,
    walk_outcomes,
)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
CREATE, LOG_APPEND, NO_TS = 0, 1, -1
FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def examples(n: int) -> int:
    """``n`` under the default profile; more under the ci/expensive profiles."""
    return max(n, settings.default.max_examples)


@pytest.fixture
def pair():
    """(pure, ext) record_batch kernels, both with the codecs installed."""
    pure, ext = record_batch_pair()
    return types.SimpleNamespace(pure=pure, ext=ext)


# == byte builders (from the spec, independent of kafkastore) =============================


def fix_crc(batch: bytes, at: int = 0) -> bytes:
    out = bytearray(batch)
    size = struct.unpack_from(">i", out, at + 8)[0]
    struct.pack_into(">I", out, at + 17, crc32c.crc32c(bytes(out[at + 21:at + 12 + size])))
    return bytes(out)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def wrapper(magic: int, offset: int, inner: bytes, *, timestamp: int | None = None,
            log_append: bool = False, codec: int = 1) -> bytes:
    """A compressed legacy wrapper (gzip unless told) around ``inner`` entries."""
    attributes = codec | (0x08 if log_append else 0)
    return legacy(magic, offset, None, gz(inner), attributes=attributes, timestamp=timestamp)


# == observation helpers ==================================================================


def rec_tuple(r):
    return (r.offset, r.timestamp, int(r.timestamp_type), r.key, r.value, r.headers)


def err_tuple(exc):
    extra = (getattr(exc, "stored", None), getattr(exc, "computed", None),
             getattr(exc, "limit", None))
    return ("raise", type(exc), str(exc), getattr(exc, "position", None),
            getattr(exc, "offset", None), extra)


def capture(fn):
    return outcome(fn, err_tuple)


BATCH_ATTRS = (
    "position", "base_offset", "last_offset", "next_offset", "batch_length", "size_in_bytes",
    "partition_leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
    "first_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
    "last_sequence", "record_count", "is_transactional", "is_control", "has_delete_horizon",
    "delete_horizon_ms", "max_decompressed_bytes",
)


def batch_view(b):
    out = {name: capture(lambda n=name: getattr(b, n)) for name in BATCH_ATTRS}
    out["type"] = type(b).__name__
    out["compression"] = capture(lambda: int(b.compression))
    out["timestamp_type"] = capture(lambda: int(b.timestamp_type))
    out["compute_crc"] = capture(b.compute_crc)
    out["is_valid"] = capture(b.is_valid)
    out["validate"] = capture(b.validate)
    out["to_bytes"] = capture(b.to_bytes)
    out["payload"] = capture(lambda: None if b.payload() is None else bytes(b.payload()))
    out["records"] = capture(lambda: [rec_tuple(r) for r in b])
    if b.magic < 2:
        out["key"] = capture(lambda: b.key)
        out["value"] = capture(lambda: b.value)
        out["timestamp"] = capture(lambda: b.timestamp)
    return out


def walk(mod, data, **kw):
    """iter_batches with every batch observed; stops at the first error."""
    return walk_outcomes(mod, data, batch_view, err_tuple, **kw)


def scan_view(s):
    cols = {name: (getattr(s, name).dtype.str, getattr(s, name).tolist())
            for name in ("position", "size", "magic", "base_offset", "last_offset",
                         "max_timestamp", "record_count")}
    err = None if s.error is None else err_tuple(s.error)
    return cols, s.valid_bytes, err, s.truncated, len(s), s.start, s.end


def columns_view(cols):
    return {name: (arr.dtype.str, arr.tolist()) for name, arr in sorted(cols.items())}


def observe(mod, data):
    """Everything the public functions say about ``data``."""
    return {
        "iter": walk(mod, data),
        "iter_novalidate": walk(mod, data, validate=False),
        "scan": capture(lambda: scan_view(mod.scan_batches(data))),
        "scan_novalidate": capture(lambda: scan_view(mod.scan_batches(data, validate=False))),
        "columns": capture(lambda: columns_view(mod.decode_columns(data))),
        "columns_control": capture(lambda: columns_view(
            mod.decode_columns(data, validate=False, include_control=True))),
        "read_batch": capture(lambda: batch_view(mod.read_batch(data))),
    }


def iter_all_records(mod, data, include_control=False, **kw):
    out = []
    for b in mod.iter_batches(data, **kw):
        if b.is_control and not include_control:
            continue
        out.extend(rec_tuple(r) for r in b)
    return out


# == a reference batch with a distinct value in every header field ===========================

REF = dict(base_offset=(1 << 40) + 7, last_offset_delta=2, epoch=12345, attributes=0x10,
           first_ts=1700000000000, max_ts=1700000000009, pid=123456789012, pepoch=7, bseq=99,
           count=3)
REF_RECORDS = (
    rec(0, 0, b"key-0", b"value-0", headers=((b"h", b"x"),))
    + rec(1, 9, None, b"")
    + rec(2, -5, b"", None, headers=((b"a", None), (b"\xe2\x82\xac", b"")))
)


def ref_batch(**over):
    kw = dict(REF)
    kw.update(over)
    records = kw.pop("records", REF_RECORDS)
    return v2_batch(records, **kw)


REF_EXPECTED_RECORDS = [
    ((1 << 40) + 7, 1700000000000, CREATE, b"key-0", b"value-0", (("h", b"x"),)),
    ((1 << 40) + 8, 1700000000009, CREATE, None, b"", ()),
    ((1 << 40) + 9, 1699999999995, CREATE, b"", None, (("a", None), ("\u20ac", b""))),
]


# == RecordBatch header =====================================================================


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, dtype=np.uint8)])
def test_header_fields_of_hand_built_batch(rb, wrap):
    raw = ref_batch()
    b = rb.RecordBatch(wrap(raw))
    assert isinstance(b, rb.RecordBatch)
    assert b.position == 0
    assert b.base_offset == (1 << 40) + 7
    assert b.batch_length == len(raw) - 12 == 49 + len(REF_RECORDS)
    assert b.size_in_bytes == len(raw)
    assert b.partition_leader_epoch == 12345
    assert b.magic == 2
    assert b.crc == crc32c.crc32c(raw[21:]) == struct.unpack_from(">I", raw, 17)[0]
    assert b.attributes == 0x10
    assert b.last_offset_delta == 2
    assert b.last_offset == (1 << 40) + 9
    assert b.next_offset == (1 << 40) + 10
    assert b.first_timestamp == 1700000000000
    assert b.max_timestamp == 1700000000009
    assert b.producer_id == 123456789012
    assert b.producer_epoch == 7
    assert b.base_sequence == 99
    assert b.last_sequence == 101
    assert b.record_count == 3
    assert b.compression == CompressionType.NONE
    assert b.timestamp_type == TimestampType.CREATE_TIME
    assert b.is_transactional is True
    assert b.is_control is False
    assert b.has_delete_horizon is False
    assert b.delete_horizon_ms is None
    assert b.to_bytes() == raw
    assert bytes(b.payload()) == REF_RECORDS
    assert b.max_decompressed_bytes == rb.DEFAULT_MAX_DECOMPRESSED_BYTES == 128 * 1024 * 1024
    assert [rec_tuple(r) for r in b] == REF_EXPECTED_RECORDS


def test_header_sign_and_width(rb):
    """Signed fields read as signed, the CRC as uint32, high attribute bits ignored."""
    raw = v2_batch(rec(), count=1, base_offset=-5, epoch=-2, attributes=0xFF18,
                   last_offset_delta=0, first_ts=-1, max_ts=INT64_MIN, pid=INT64_MAX,
                   pepoch=-32768, bseq=INT32_MIN)
    b = rb.RecordBatch(raw)
    assert b.base_offset == -5
    assert b.partition_leader_epoch == -2
    assert b.first_timestamp == -1
    assert b.max_timestamp == INT64_MIN
    assert b.producer_id == INT64_MAX
    assert b.producer_epoch == -32768
    assert b.base_sequence == INT32_MIN
    assert b.crc == crc32c.crc32c(raw[21:])
    assert b.crc >= 0
    # bits 8-15 are unused: low bits still decide codec / type / flags
    assert b.compression == CompressionType.NONE
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert b.is_transactional is True
    assert b.is_control is False
    assert b.has_delete_horizon is False


def test_crc_with_high_bit_is_unsigned(rb):
    for n in range(200):  # find a batch whose CRC-32C has bit 31 set
        raw = v2_batch(rec(key=b"%d" % n), count=1)
        if raw[17] & 0x80:
            break
    else:  # pragma: no cover - 200 tries, probability 2**-200
        pytest.fail("no CRC with bit 31 set")
    b = rb.RecordBatch(raw)
    assert b.crc == struct.unpack_from(">I", raw, 17)[0] > INT32_MAX
    assert b.is_valid()


def test_batch_at_a_position_inside_a_larger_buffer(rb):
    first = v2_batch(rec(), count=1, base_offset=1)
    second = ref_batch()
    buf = first + second + b"\x00" * 20
    b = rb.RecordBatch(buf, len(first))
    assert b.position == len(first)
    assert b.base_offset == REF["base_offset"]
    assert b.to_bytes() == second
    assert b.is_valid()
    assert [rec_tuple(r) for r in b] == REF_EXPECTED_RECORDS
    b = rb.read_batch(buf, len(first))
    assert b.position == len(first) and b.to_bytes() == second


def test_compression_codec_bits(rb):
    for codec in range(8):
        b = rb.RecordBatch(v2_batch(attributes=codec))
        if codec <= 4:
            assert b.compression == CompressionType(codec)
        else:
            with pytest.raises(UnsupportedCompressionError, match=f"type id {codec}"):
                b.compression
            with pytest.raises(UnsupportedCompressionError) as info:
                list(b)
            assert info.value.position == 0


# == lazy iteration ==========================================================================


def test_construction_does_not_parse_records(rb):
    garbage = b"\xff" * 30  # not a single valid record
    raw = v2_batch(garbage, count=5, base_offset=42, max_ts=7)
    b = rb.RecordBatch(raw)  # header only: no error yet
    assert (b.base_offset, b.record_count, b.max_timestamp) == (42, 5, 7)
    assert b.is_valid()
    with pytest.raises(CorruptRecordError) as info:
        list(b)
    assert info.value.position == 0


def test_compressed_garbage_fails_only_when_iterated(rb):
    raw = v2_batch(b"not gzip at all", count=1, attributes=1)
    b = rb.RecordBatch(raw)
    assert b.compression == CompressionType.GZIP
    assert bytes(b.payload()) == b"not gzip at all"
    with pytest.raises(CorruptRecordError) as info:
        iter(b).__next__()
    assert info.value.position == 0


def test_records_are_yielded_one_by_one(rb):
    # record 0 is fine, record 1 has a negative header count
    bad = framed(b"\x00" + varlong(0) + varint(1) + len_bytes(b"k") + len_bytes(b"v") + varint(-1))
    b = rb.RecordBatch(v2_batch(rec() + bad, count=2, base_offset=10))
    it = iter(b)
    first = next(it)
    assert rec_tuple(first) == (10, 0, CREATE, b"k", b"v", ())
    with pytest.raises(CorruptRecordError, match="headers -1"):
        next(it)


def test_iterating_twice_gives_the_same_records(rb):
    b = rb.RecordBatch(ref_batch())
    assert [rec_tuple(r) for r in b] == [rec_tuple(r) for r in b] == REF_EXPECTED_RECORDS


def test_record_is_immutable_and_comparable(rb):
    r1, r2 = list(rb.RecordBatch(ref_batch()))[:2]
    with pytest.raises(AttributeError):
        r1.offset = 5
    again = next(iter(rb.RecordBatch(ref_batch())))
    assert r1 == again and hash(r1) == hash(again)
    assert r1 != r2
    assert r1.timestamp_type is TimestampType.CREATE_TIME
    made = rb.Record(1, 2, TimestampType.CREATE_TIME, b"k", None, ())
    assert rec_tuple(made) == (1, 2, CREATE, b"k", None, ())


def test_compressed_v2_batch(rb):
    records = REF_RECORDS
    raw = ref_batch(records=gz(records), attributes=0x10 | 1)
    b = rb.RecordBatch(raw)
    assert b.compression == CompressionType.GZIP
    assert b.is_valid()
    assert [rec_tuple(r) for r in b] == REF_EXPECTED_RECORDS
    # inflating past max_decompressed_bytes is refused
    small = rb.RecordBatch(raw, max_decompressed_bytes=len(records) - 1)
    assert small.max_decompressed_bytes == len(records) - 1
    with pytest.raises(KafkaStoreError) as info:
        list(small)
    assert type(info.value).__name__ == "RecordTooLargeError"
    assert info.value.position == 0


# == CRC ======================================================================================


def test_validate_is_valid_compute_crc(rb):
    raw = ref_batch()
    b = rb.RecordBatch(raw)
    assert b.compute_crc() == crc32c.crc32c(raw[21:])
    assert b.is_valid() is True
    assert b.validate() is None


@pytest.mark.parametrize("flip_at", [21, 22, 23, 30, 40, 50, 56, 60, 61, -1])
def test_flip_in_crc_covered_bytes(rb, flip_at):
    raw = bytearray(ref_batch())
    raw[flip_at] ^= 0x04
    raw = bytes(raw)
    b = rb.RecordBatch(raw)
    computed = crc32c.crc32c(raw[21:])
    assert b.compute_crc() == computed != b.crc
    assert b.is_valid() is False
    with pytest.raises(InvalidCrcError) as info:
        b.validate()
    err = info.value
    assert isinstance(err, CorruptRecordError) and isinstance(err, ValueError)
    assert err.stored == struct.unpack_from(">I", raw, 17)[0] == b.crc
    assert err.computed == computed
    assert err.position == 0
    assert err.offset == b.base_offset


@pytest.mark.parametrize("flip_at", [0, 5, 7, 12, 13, 15])
def test_base_offset_and_epoch_are_not_covered(rb, flip_at):
    raw = bytearray(ref_batch())
    raw[flip_at] ^= 0x10
    b = rb.RecordBatch(bytes(raw))
    assert b.is_valid()
    b.validate()


def test_flip_in_stored_crc(rb):
    raw = bytearray(ref_batch())
    raw[19] ^= 0xFF
    b = rb.RecordBatch(bytes(raw))
    assert not b.is_valid()
    with pytest.raises(InvalidCrcError) as info:
        b.validate()
    assert info.value.stored == struct.unpack_from(">I", raw, 17)[0]
    assert info.value.computed == crc32c.crc32c(bytes(raw[21:]))


def test_invalid_crc_error_position_and_offset_in_a_stream(rb):
    first = v2_batch(rec(), count=1, base_offset=3)
    bad = bytearray(v2_batch(rec(), count=1, base_offset=4))
    bad[-1] ^= 1
    buf = first + bytes(bad)
    it = rb.iter_batches(buf)
    assert next(it).base_offset == 3
    with pytest.raises(InvalidCrcError) as info:
        next(it)
    assert info.value.position == len(first)
    assert info.value.offset == 4
    assert info.value.computed == crc32c.crc32c(bytes(bad[21:]))
    assert "stored crc" in str(info.value)
    # validate=False hands the corrupt batch out
    batches = list(rb.iter_batches(buf, validate=False))
    assert [b.base_offset for b in batches] == [3, 4]
    assert [b.is_valid() for b in batches] == [True, False]


# == construction errors ==========================================================================

CONSTRUCTION_ERRORS = {
    # name: (bytes of the entry, message fragment)
    "header truncated (60 bytes)": (ref_batch()[:60], "header needs 61 bytes"),
    "header truncated (17 bytes)": (ref_batch()[:17], "header needs 61 bytes"),
    "batchLength 48": (v2_batch(batch_length=48) + b"\x00" * 12, "smaller than the minimum batch"),
    "batchLength 10": (v2_batch(batch_length=10), "smaller than the minimum batch"),
    "batchLength -1": (v2_batch(batch_length=-1), "smaller than the minimum batch"),
    "batchLength min int": (v2_batch(batch_length=INT32_MIN), "smaller than the minimum batch"),
    "past the end by 1": (v2_batch(rec(), count=1, batch_length=49 + len(rec()) + 1),
                          "extends past the end"),
    "past the end, int32 max": (v2_batch(batch_length=INT32_MAX), "extends past the end"),
    "magic 0": (ref_batch(magic=0), "Unsupported magic byte 0"),
    "magic 1": (ref_batch(magic=1), "Unsupported magic byte 1"),
    "magic 3": (ref_batch(magic=3), "Unsupported magic byte 3"),
    "magic 127": (ref_batch(magic=127), "Unsupported magic byte 127"),
}


@pytest.mark.parametrize("case", list(CONSTRUCTION_ERRORS))
@pytest.mark.parametrize("at", [0, 37])
def test_record_batch_construction_errors(rb, case, at):
    entry, fragment = CONSTRUCTION_ERRORS[case]
    buf = b"\xab" * at + entry
    with pytest.raises(CorruptRecordError, match=fragment) as info:
        rb.RecordBatch(buf, at)
    assert info.value.position == at
    if "truncated" not in case:
        assert info.value.offset == struct.unpack_from(">q", buf, at)[0]


def test_magic_255_reads_as_signed(rb):
    with pytest.raises(CorruptRecordError, match="Unsupported magic byte -1"):
        rb.RecordBatch(ref_batch(magic=255))
    # read_batch dispatches on the unsigned byte
    with pytest.raises(CorruptRecordError, match="Unsupported magic byte 255"):
        rb.read_batch(ref_batch(magic=255))


@pytest.mark.parametrize("cls", ["RecordBatch", "LegacyRecordBatch", "read_batch"])
def test_position_outside_the_buffer_is_a_value_error(rb, cls):
    raw = ref_batch()
    fn = getattr(rb, cls)
    for pos in (-1, -len(raw), len(raw) + 1, len(raw) + 1000):
        with pytest.raises(ValueError, match="outside the buffer") as info:
            fn(raw, pos)
        assert not isinstance(info.value, KafkaStoreError), pos


# == record-level structure errors (valid CRC) ==========================================

K = len_bytes(b"k")
V = len_bytes(b"v")
STRUCTURE_ERRORS = {
    # name: (records section, recordsCount, message fragment, is batch-level)
    "negative count": (rec(), -1, "Found invalid record count -1", True),
    "count int32 min": (rec(), INT32_MIN, "Found invalid record count", True),
    "record length past end": (varint(50) + record_body(), 1, "Invalid record size: expected 50",
                               False),
    "negative record length": (varint(-3) + record_body(), 1, "Invalid record size", False),
    "empty record": (varint(0) + rec(), 2, "empty record", False),
    "length longer than content": (
        varint(len(record_body()) + 1) + record_body() + b"\x00", 1,
        "expected to read", False),
    "negative header count": (framed(b"\x00\x00\x00" + K + V + varint(-1)), 1,
                              "invalid number of record headers -1", False),
    "header count past record": (framed(b"\x00\x00\x00" + K + V + varint(1000) + b"\x00\x00"),
                                 1, "more than the record holds", False),
    "negative header key length": (
        framed(b"\x00\x00\x00" + K + V + varint(1) + varint(-2) + varint(-1)), 1,
        "Invalid negative header key size", False),
    "header key past record end": (
        framed(b"\x00\x00\x00" + K + V + varint(1) + varint(9) + b"ab"), 1,
        "header key past record end", False),
    "header value past record end": (
        framed(b"\x00\x00\x00" + K + V + varint(1) + varint(1) + b"h" + varint(7) + b"x"), 1,
        "header value past record end", False),
    "key past record end": (framed(b"\x00\x00\x00" + varint(10) + b"ab"), 1,
                            "key past record end", False),
    "value past record end": (framed(b"\x00\x00\x00" + K + varint(10) + b"ab"), 1,
                              "value past record end", False),
    "truncated varint in record": (framed(b"\x00\x80"), 1, "truncated varint", False),
    "truncated record length": (b"\x80", 1, "truncated varint", False),
    "overlong varlong timestamp": (framed(b"\x00" + b"\x80" * 10 + b"\x00\x00" + K + V + b"\x00"),
                                   1, "Varlong is too long", False),
    "overlong varint offset": (framed(b"\x00\x00" + b"\x80" * 5 + b"\x00" + K + V + b"\x00"), 1,
                               "Varint is too long", False),
    "overlong record length": (b"\xff" * 5 + b"\x01" + record_body(), 1, "Varint is too long",
                               False),
    "trailing bytes after count records": (rec() + b"\x00", 1, "records still remaining", True),
    "trailing record after count records": (rec(0) + rec(1), 1, "records still remaining", True),
    "zero count with records": (rec(), 0, "records still remaining", True),
    "premature EOF": (rec(0), 2, "premature EOF", True),
    "premature EOF, count 5": (rec(0) + rec(1), 5, "premature EOF", True),
}


def structure_batch(case, base_offset=77):
    records, count, _, _ = STRUCTURE_ERRORS[case]
    return v2_batch(records, count=count, base_offset=base_offset, last_offset_delta=1)


@pytest.mark.parametrize("case", list(STRUCTURE_ERRORS))
@pytest.mark.parametrize("at", [0, 90])
def test_record_structure_errors_when_iterating(rb, case, at):
    _, _, fragment, batch_level = STRUCTURE_ERRORS[case]
    prefix = (v2_batch(rec(), count=1, base_offset=1) + b"\x00" * 200)[:at]
    buf = prefix + structure_batch(case)
    b = rb.RecordBatch(buf, at)
    assert b.is_valid(), "the CRC must not be what fails"
    with pytest.raises(CorruptRecordError, match=fragment) as info:
        for _ in b:
            pass
    assert not isinstance(info.value, InvalidCrcError)
    assert info.value.position == at
    if batch_level:
        assert info.value.offset == 77


@pytest.mark.parametrize("case", list(STRUCTURE_ERRORS))
def test_record_structure_errors_in_decode_columns(rb, case):
    good = v2_batch(rec(), count=1, base_offset=1)
    buf = good + structure_batch(case)
    with pytest.raises(CorruptRecordError) as info:
        rb.decode_columns(buf)
    assert not isinstance(info.value, InvalidCrcError)
    assert info.value.position == len(good)
    # the same error as iterating the records (first batch fine, second not)
    with pytest.raises(CorruptRecordError) as again:
        iter_all_records(rb, buf)
    assert again.value.position == len(good)


# == timestamps, delete horizon, sequences, control ===================================


def test_log_append_time_reports_max_timestamp(rb):
    records = rec(0, 0) + rec(1, 5) + rec(2, -3)
    raw = v2_batch(records, count=3, last_offset_delta=2, attributes=0x08, first_ts=1000,
                   max_ts=99999)
    b = rb.RecordBatch(raw)
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert b.first_timestamp == 1000  # untouched in the header
    got = [rec_tuple(r) for r in b]
    assert [(o, t, tt) for o, t, tt, *_ in got] == [(0, 99999, 1), (1, 99999, 1), (2, 99999, 1)]
    cols = rb.decode_columns(raw)
    assert cols["timestamp"].tolist() == [99999] * 3
    assert cols["timestamp_type"].tolist() == [1] * 3


def test_create_time_timestamps_are_base_plus_delta(rb):
    records = rec(0, 0) + rec(1, 5) + rec(2, -3) + rec(3, 1 << 40)
    b = rb.RecordBatch(v2_batch(records, count=4, first_ts=1000, max_ts=1))
    assert [r.timestamp for r in b] == [1000, 1005, 997, 1000 + (1 << 40)]
    assert {r.timestamp_type for r in b} == {TimestampType.CREATE_TIME}


def test_timestamp_and_offset_arithmetic_wraps_like_java(rb):
    b = rb.RecordBatch(v2_batch(rec(5, 10), count=1, base_offset=INT64_MAX - 1,
                                first_ts=INT64_MAX, last_offset_delta=5))
    (r,) = list(b)
    assert r.offset == INT64_MAX - 1 + 5 - (1 << 64)
    assert r.timestamp == INT64_MAX + 10 - (1 << 64)
    assert b.last_offset == INT64_MAX + 4 - (1 << 64)
    assert b.next_offset == INT64_MAX + 5 - (1 << 64)


def test_delete_horizon_bit(rb):
    records = rec(0, 3) + rec(1, 7)
    raw = v2_batch(records, count=2, last_offset_delta=1, attributes=0x40, first_ts=5000,
                   max_ts=5007)
    b = rb.RecordBatch(raw)
    assert b.has_delete_horizon is True
    assert b.delete_horizon_ms == 5000
    assert [r.timestamp for r in b] == [5003, 5007]  # deltas are relative to the horizon
    plain = rb.RecordBatch(v2_batch(records, count=2, first_ts=5000))
    assert plain.has_delete_horizon is False
    assert plain.delete_horizon_ms is None


def java_int(x):
    return ((x + (1 << 31)) % (1 << 32)) - (1 << 31)


def java_last_sequence(base_sequence, last_offset_delta):
    """DefaultRecordBatch.lastSequence / incrementSequence in Java int arithmetic."""
    if base_sequence == -1:
        return -1
    if base_sequence > java_int(INT32_MAX - last_offset_delta):
        return java_int(java_int(last_offset_delta - java_int(INT32_MAX - base_sequence)) - 1)
    return java_int(base_sequence + last_offset_delta)


@pytest.mark.parametrize(("bseq", "lod", "expected"), [
    (-1, 0, -1),
    (-1, 5, -1),
    (0, 0, 0),
    (10, 4, 14),
    (2147483000, 2, 2147483002),   # the v2_producer_state vector
    (2147483000, 647, INT32_MAX),
    (2147483000, 648, 0),          # wraps to 0, not to INT32_MIN
    (2147483000, 1000, 352),
    (INT32_MAX, 0, INT32_MAX),
    (INT32_MAX, 1, 0),
    (INT32_MAX, INT32_MAX, INT32_MAX - 1),
])
def test_last_sequence_wraps_at_int32_max(rb, bseq, lod, expected):
    assert java_last_sequence(bseq, lod) == expected
    b = rb.RecordBatch(v2_batch(bseq=bseq, last_offset_delta=lod))
    assert b.last_sequence == expected


@pytest.mark.parametrize(("bseq", "lod"), [(5, -1), (100, -200), (INT32_MIN, -1), (-2, -5)])
def test_last_sequence_of_hostile_negative_delta_follows_java(rb, bseq, lod):
    """A corrupt header (negative lastOffsetDelta) still gives Java's int32 answer."""
    expected = java_last_sequence(bseq, lod)
    assert INT32_MIN <= expected <= INT32_MAX
    assert rb.RecordBatch(v2_batch(bseq=bseq, last_offset_delta=lod)).last_sequence == expected


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(INT32_MIN, INT32_MAX), st.integers(INT32_MIN, INT32_MAX))
def test_last_sequence_matches_java_for_any_header(rb, bseq, lod):
    b = rb.RecordBatch(v2_batch(bseq=bseq, last_offset_delta=lod))
    assert b.last_sequence == java_last_sequence(bseq, lod)


def control_batch(kind=1, epoch=3, base_offset=103):
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, epoch)
    return v2_batch(rec(0, 0, key, value), count=1, base_offset=base_offset, attributes=0x30,
                    first_ts=1700000000500, max_ts=1700000000500, pid=4242, pepoch=0, bseq=-1)


def test_control_batch_fields(rb):
    b = rb.RecordBatch(control_batch())
    assert b.is_control is True
    assert b.is_transactional is True
    assert b.producer_id == 4242 and b.producer_epoch == 0
    assert b.base_sequence == -1 and b.last_sequence == -1
    assert b.size_in_bytes == 78  # kafka-storage.md §2.4: a marker batch is 78 bytes
    (r,) = list(b)
    assert r.offset == 103
    assert struct.unpack(">hh", r.key) == (0, 1)
    assert struct.unpack(">hi", r.value) == (0, 3)


def test_control_batches_in_walks(rb):
    data = v2_batch(rec(), count=1, base_offset=102) + control_batch(base_offset=103)
    assert [b.is_control for b in rb.iter_batches(data)] == [False, True]
    assert rb.decode_columns(data)["offset"].tolist() == [102]
    assert rb.decode_columns(data, include_control=True)["offset"].tolist() == [102, 103]
    scan = rb.scan_batches(data)
    assert scan.last_offset.tolist() == [102, 103]


def test_empty_batch(rb):
    raw = v2_batch(count=0, base_offset=400, last_offset_delta=4, first_ts=-1, max_ts=42,
                   pid=9001, pepoch=3, bseq=17)
    b = rb.RecordBatch(raw)
    assert b.size_in_bytes == 61 and b.record_count == 0
    assert (b.last_offset, b.next_offset, b.last_sequence) == (404, 405, 21)
    assert list(b) == []
    cols = rb.decode_columns(raw)
    assert all(len(cols[n]) == 0 for n in ("offset", "key_data", "value_null"))
    assert cols["key_offsets"].tolist() == [0]


# == legacy messages ==============================================================================


def test_v0_uncompressed_message(rb):
    raw = legacy(0, 500, b"key-0", b"value-0")
    assert len(raw) == 12 + 14 + 5 + 7
    b = rb.read_batch(raw)
    assert isinstance(b, rb.LegacyRecordBatch)
    b = rb.LegacyRecordBatch(raw)
    assert b.magic == 0
    assert (b.base_offset, b.last_offset, b.next_offset) == (500, 500, 501)
    assert b.batch_length == len(raw) - 12 and b.size_in_bytes == len(raw)
    assert b.crc == zlib.crc32(raw[16:]) == struct.unpack_from(">I", raw, 12)[0]
    assert b.compute_crc() == b.crc and b.is_valid() and b.validate() is None
    assert b.attributes == 0
    assert b.timestamp == b.max_timestamp == b.first_timestamp == -1
    assert b.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE
    assert b.compression == CompressionType.NONE
    assert (b.partition_leader_epoch, b.producer_id, b.producer_epoch) == (-1, -1, -1)
    assert (b.base_sequence, b.last_sequence) == (-1, -1)
    assert b.last_offset_delta is None and b.record_count is None
    assert b.is_transactional is False and b.is_control is False
    assert b.has_delete_horizon is False and b.delete_horizon_ms is None
    assert (b.key, b.value) == (b"key-0", b"value-0")
    assert bytes(b.payload()) == b"value-0"
    assert b.to_bytes() == raw
    assert [rec_tuple(r) for r in b] == [(500, -1, NO_TS, b"key-0", b"value-0", ())]


def test_v1_uncompressed_messages(rb):
    data = (legacy(1, 7, b"a", None, timestamp=1700000000001)
            + legacy(1, 8, None, b"", timestamp=1700000000002, attributes=0x08)
            + legacy(1, 10, b"", b"x" * 300, timestamp=-1))
    batches = list(rb.iter_batches(data))
    assert [b.magic for b in batches] == [1, 1, 1]
    assert [b.position for b in batches] == [0, 12 + 22 + 1, 2 * 12 + 2 * 22 + 1]
    assert [int(b.timestamp_type) for b in batches] == [CREATE, LOG_APPEND, CREATE]
    assert [b.max_timestamp for b in batches] == [1700000000001, 1700000000002, -1]
    assert iter_all_records(rb, data) == [
        (7, 1700000000001, CREATE, b"a", None, ()),
        (8, 1700000000002, LOG_APPEND, None, b"", ()),
        (10, -1, CREATE, b"", b"x" * 300, ()),
    ]
    assert batches[0].payload() is None  # null value


INNER_V1 = b"".join(legacy(1, i, b"k%d" % i, b"v%d" % i, timestamp=100 + (i * 7) % 5)
                    for i in range(4))
INNER_V0 = b"".join(legacy(0, 50 + i, b"k%d" % i, b"v%d" % i) for i in range(3))


def test_v1_wrapper_relative_offsets(rb):
    raw = wrapper(1, 2005, INNER_V1, timestamp=999)
    b = rb.read_batch(raw)
    assert b.compression == CompressionType.GZIP
    assert b.key is None and bytes(b.payload()) == gz(INNER_V1)
    assert (b.last_offset, b.next_offset, b.base_offset) == (2005, 2006, 2002)
    assert b.max_timestamp == 999
    assert [rec_tuple(r) for r in b] == [
        (2002 + i, 100 + (i * 7) % 5, CREATE, b"k%d" % i, b"v%d" % i, ()) for i in range(4)]


def test_v1_wrapper_offset_zero_special_case(rb):
    b = rb.read_batch(wrapper(1, 0, INNER_V1, timestamp=999))
    assert [r.offset for r in b] == [0, 1, 2, 3]
    assert b.base_offset == 0


def test_v1_wrapper_below_last_inner_offset(rb):
    b = rb.read_batch(wrapper(1, 2, INNER_V1, timestamp=999))
    with pytest.raises(CorruptRecordError, match="below its last inner offset 3") as info:
        list(b)
    assert info.value.position == 0
    with pytest.raises(CorruptRecordError):
        b.base_offset


def test_v1_wrapper_relative_offsets_wrap_like_java(rb):
    # Hostile inner offsets near INT64_MIN: ``wrapper - last_inner`` overflows int64.
    # Kafka's long arithmetic wraps, and so must both backends (the compiled one used to
    # overflow a signed C subtraction, which UBSan caught under fuzzing).
    inner = b"".join(legacy(1, INT64_MIN + i, b"k", b"v", timestamp=1) for i in range(2))
    b = rb.read_batch(wrapper(1, 100, inner, timestamp=999))
    assert [r.offset for r in b] == [99, 100]
    assert b.base_offset == 99


def test_v1_wrapper_log_append_time(rb):
    b = rb.read_batch(wrapper(1, 2005, INNER_V1, timestamp=999, log_append=True))
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [(r.timestamp, int(r.timestamp_type)) for r in b] == [(999, LOG_APPEND)] * 4


def test_v0_wrapper_absolute_offsets(rb):
    b = rb.read_batch(wrapper(0, 52, INNER_V0))
    assert b.base_offset == 50 and b.last_offset == 52
    assert [rec_tuple(r) for r in b] == [
        (50 + i, -1, NO_TS, b"k%d" % i, b"v%d" % i, ()) for i in range(3)]


LEGACY_WRAPPER_ERRORS = {
    "inner magic 1 in v0 wrapper": (wrapper(0, 52, INNER_V1), "inner message magic 1"),
    "inner magic 0 in v1 wrapper": (wrapper(1, 52, INNER_V0, timestamp=1),
                                    "inner message magic 0"),
    "nested compression": (wrapper(1, 9, wrapper(1, 3, INNER_V1, timestamp=1), timestamp=1),
                           "compressed inner message"),
    "null wrapper value": (legacy(1, 5, None, None, attributes=1, timestamp=1), "null value"),
    "empty wrapper": (wrapper(1, 5, b"", timestamp=1), "no inner messages"),
    "truncated inner message": (wrapper(1, 5, INNER_V1[:-3], timestamp=1), "extends past"),
    "junk after inner messages": (wrapper(1, 5, INNER_V1 + b"\x00" * 5, timestamp=1),
                                  "truncated inner message"),
    "not gzip": (legacy(1, 5, None, b"garbage", attributes=1, timestamp=1), "decompress"),
}


@pytest.mark.parametrize("case", list(LEGACY_WRAPPER_ERRORS))
def test_legacy_wrapper_errors(rb, case):
    raw, fragment = LEGACY_WRAPPER_ERRORS[case]
    buf = legacy(1, 0, b"first", b"ok", timestamp=1) + raw
    batches = list(rb.iter_batches(buf))  # the headers are fine
    assert len(batches) == 2
    with pytest.raises(CorruptRecordError, match=fragment) as info:
        list(batches[1])
    assert info.value.position == len(buf) - len(raw)
    with pytest.raises(CorruptRecordError):
        rb.decode_columns(buf)


def test_legacy_codec_rules(rb):
    zstd_v1 = legacy(1, 5, None, b"xx", attributes=4, timestamp=3)
    codec6 = legacy(0, 5, None, b"xx", attributes=6)
    for raw, fragment in ((zstd_v1, "type id 4 for magic 1"), (codec6, "type id 6 for magic 0")):
        b = rb.read_batch(raw)
        with pytest.raises(UnsupportedCompressionError, match=fragment):
            b.compression
        with pytest.raises(UnsupportedCompressionError):
            list(b)


LEGACY_CONSTRUCTION_ERRORS = {
    "fewer than 26 bytes": (legacy(0, 1, None, None)[:25], "truncated"),
    "v0 size 13": (legacy(0, 1, None, None, size=13) + b"\x00" * 10, "smaller than the minimum"),
    "v1 size 21": (legacy(1, 1, None, None, timestamp=0, size=21), "smaller than the minimum"),
    "size past the end": (legacy(0, 1, b"k", b"v", size=100), "extends past the end"),
    "key past the end": (legacy(0, 1, b"k" * 9, b"v")[:18] + struct.pack(">i", 50)
                         + legacy(0, 1, b"k" * 9, b"v")[22:], "key extends past"),
    "value past the end": (legacy(0, 1, b"k", b"v")[:-5] + struct.pack(">i", 2) + b"v",
                           "value extends past"),
    "magic 2": (ref_batch(), "Unsupported magic byte 2"),
}


@pytest.mark.parametrize("case", list(LEGACY_CONSTRUCTION_ERRORS))
def test_legacy_construction_errors(rb, case):
    raw, fragment = LEGACY_CONSTRUCTION_ERRORS[case]
    with pytest.raises(CorruptRecordError, match=fragment) as info:
        rb.LegacyRecordBatch(b"\x00" * 5 + raw, 5)
    assert info.value.position == 5


def test_legacy_invalid_crc(rb):
    raw = bytearray(legacy(1, 5, b"a", b"b", timestamp=7))
    raw[-1] ^= 1
    b = rb.read_batch(bytes(raw))
    assert not b.is_valid()
    with pytest.raises(InvalidCrcError) as info:
        b.validate()
    assert info.value.stored == struct.unpack_from(">I", raw, 12)[0]
    assert info.value.computed == zlib.crc32(bytes(raw[16:]))
    assert (info.value.position, info.value.offset) == (0, 5)
    with pytest.raises(InvalidCrcError):
        list(rb.iter_batches(bytes(raw)))
    assert len(list(rb.iter_batches(bytes(raw), validate=False))) == 1


# == iter_batches / read_batch =========================================================


MIXED = [
    legacy(0, 0, b"k0", b"v0"),
    wrapper(0, 3, b"".join(legacy(0, i, b"w%d" % i, b"x") for i in (1, 2, 3))),
    legacy(1, 4, None, b"v4", timestamp=1004),
    wrapper(1, 7, b"".join(legacy(1, i, b"y%d" % i, None, timestamp=1005 + i) for i in range(3)),
            timestamp=1010),
    v2_batch(rec(0, 0, b"z8", b"a") + rec(1, 1, b"z9", None, headers=((b"h", b"1"),)), count=2,
             base_offset=8, last_offset_delta=1, first_ts=2000, max_ts=2001),
    v2_batch(gz(rec(0, 0, b"c10", b"b") + rec(2, 5, None, b"d")), count=2, base_offset=10,
             last_offset_delta=3, attributes=1, first_ts=3000, max_ts=3005, pid=5, pepoch=1,
             bseq=0),
    control_batch(base_offset=14),
]
MIXED_BUF = b"".join(MIXED)
MIXED_POSITIONS = [sum(len(e) for e in MIXED[:i]) for i in range(len(MIXED))]
MIXED_RECORDS = [
    (0, -1, NO_TS, b"k0", b"v0", ()),
    (1, -1, NO_TS, b"w1", b"x", ()), (2, -1, NO_TS, b"w2", b"x", ()),
    (3, -1, NO_TS, b"w3", b"x", ()),
    (4, 1004, CREATE, None, b"v4", ()),
    (5, 1005, CREATE, b"y0", None, ()), (6, 1006, CREATE, b"y1", None, ()),
    (7, 1007, CREATE, b"y2", None, ()),
    (8, 2000, CREATE, b"z8", b"a", ()), (9, 2001, CREATE, b"z9", None, (("h", b"1"),)),
    (10, 3000, CREATE, b"c10", b"b", ()), (12, 3005, CREATE, None, b"d", ()),
]
MIXED_CONTROL = (14, 1700000000500, CREATE, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3),
                 ())


def test_iter_batches_mixed_magic(rb):
    batches = list(rb.iter_batches(MIXED_BUF))
    assert [b.position for b in batches] == MIXED_POSITIONS
    assert [b.magic for b in batches] == [0, 0, 1, 1, 2, 2, 2]
    assert [type(b).__name__ for b in batches] == ["LegacyRecordBatch"] * 4 + ["RecordBatch"] * 3
    assert [b.last_offset for b in batches] == [0, 3, 4, 7, 9, 13, 14]
    assert [b.size_in_bytes for b in batches] == [len(e) for e in MIXED]
    assert iter_all_records(rb, MIXED_BUF) == MIXED_RECORDS
    assert iter_all_records(rb, MIXED_BUF, include_control=True) == MIXED_RECORDS + [
        MIXED_CONTROL]


@pytest.mark.parametrize("tail", [1, 5, 12, 16, 17])
def test_iter_batches_ignores_fewer_than_18_bytes(rb, tail):
    data = MIXED[4] + MIXED[5][:tail]
    assert [b.position for b in rb.iter_batches(data)] == [0]


@pytest.mark.parametrize("cut", [18, 30, 60, 61, 70, -1])
def test_iter_batches_stops_silently_at_an_incomplete_entry(rb, cut):
    data = MIXED[4] + MIXED[5][:cut]
    assert [b.position for b in rb.iter_batches(data)] == [0]
    legacy_tail = MIXED[4] + MIXED[3][:cut]
    assert [b.position for b in rb.iter_batches(legacy_tail)] == [0]


@pytest.mark.parametrize("size", [13, 0, -1, INT32_MIN])
def test_iter_batches_raises_on_size_below_14(rb, size):
    bad = struct.pack(">qi", 99, size) + b"\x02" * 20
    data = MIXED[4] + bad
    it = rb.iter_batches(data)
    assert next(it).position == 0
    with pytest.raises(CorruptRecordError, match=f"Record size {size} is smaller") as info:
        next(it)
    assert info.value.position == len(MIXED[4])
    assert list(it) == []  # the walk is over


@pytest.mark.parametrize("magic", [3, 4, 127, 255])
def test_iter_batches_raises_on_unknown_magic(rb, magic):
    bad = bytearray(MIXED[4])
    bad[16] = magic
    data = MIXED[4] + bytes(bad)
    it = rb.iter_batches(data, validate=False)
    assert next(it).position == 0
    with pytest.raises(CorruptRecordError, match=f"Unsupported magic byte {magic}") as info:
        next(it)
    assert info.value.position == len(MIXED[4])
    assert info.value.offset == 8


def test_iter_batches_start_end(rb):
    p = MIXED_POSITIONS
    assert [b.position for b in rb.iter_batches(MIXED_BUF, p[2])] == p[2:]
    assert [b.position for b in rb.iter_batches(MIXED_BUF, p[2], p[4])] == p[2:4]
    assert [b.position for b in rb.iter_batches(MIXED_BUF, p[2], p[4] + 30)] == p[2:4]
    assert [b.position for b in rb.iter_batches(MIXED_BUF, 0, p[1] - 1)] == []
    assert [b.position for b in rb.iter_batches(MIXED_BUF, len(MIXED_BUF))] == []
    assert [b.position for b in rb.iter_batches(MIXED_BUF, p[5], len(MIXED_BUF) + 10 ** 6)] \
        == p[5:]
    # a batch cut by ``end`` is not read past ``end`` even though the buffer holds it
    assert [b.position for b in rb.iter_batches(MIXED_BUF, p[4], len(MIXED_BUF) - 1)] == p[4:6]
    for start, end in ((-1, None), (len(MIXED_BUF) + 1, None), (10, 5), (0, -1)):
        with pytest.raises(ValueError, match="outside"):
            list(rb.iter_batches(MIXED_BUF, start, end))


@pytest.mark.parametrize("end", [1 << 63, 1 << 64])
def test_end_beyond_ssize_t_is_clamped_like_any_large_end(rb, end):
    """``end`` past the buffer is clamped to it, however large."""
    assert [b.position for b in rb.iter_batches(MIXED_BUF, 0, end)] == MIXED_POSITIONS
    assert len(rb.scan_batches(MIXED_BUF, 0, end)) == len(MIXED)
    assert len(rb.decode_columns(MIXED_BUF, 0, end)["offset"]) == len(MIXED_RECORDS)


def test_read_batch_errors(rb):
    with pytest.raises(CorruptRecordError, match="entry header truncated") as info:
        rb.read_batch(MIXED_BUF[:16])
    assert info.value.position == 0
    with pytest.raises(CorruptRecordError, match="Record size 13") as info:
        rb.read_batch(b"\x00" * 4 + struct.pack(">qi", 1, 13) + b"\x00" * 30, 4)
    assert info.value.position == 4
    bad = bytearray(MIXED[4])
    bad[16] = 3
    with pytest.raises(CorruptRecordError, match="Unsupported magic byte 3"):
        rb.read_batch(bytes(bad))
    # read_batch needs the whole entry (unlike iter_batches, which stops silently)
    with pytest.raises(CorruptRecordError, match="extends past"):
        rb.read_batch(MIXED[4][:-1])
    with pytest.raises(CorruptRecordError, match="extends past"):
        rb.read_batch(MIXED[2][:-1])


# == scan_batches =================================================================================


def test_scan_batches_columns(rb):
    s = rb.scan_batches(MIXED_BUF)
    assert len(s) == len(MIXED)
    expected = {
        "position": (np.int64, MIXED_POSITIONS),
        "size": (np.int64, [len(e) for e in MIXED]),
        "magic": (np.int8, [0, 0, 1, 1, 2, 2, 2]),
        "base_offset": (np.int64, [0, -1, 4, -1, 8, 10, 14]),
        "last_offset": (np.int64, [0, 3, 4, 7, 9, 13, 14]),
        "max_timestamp": (np.int64, [-1, -1, 1004, 1010, 2001, 3005, 1700000000500]),
        "record_count": (np.int32, [1, -1, 1, -1, 2, 2, 1]),
    }
    for name, (dtype, values) in expected.items():
        col = getattr(s, name)
        assert isinstance(col, np.ndarray) and col.dtype == dtype, name
        np.testing.assert_array_equal(col, np.array(values, dtype=dtype), err_msg=name)
    assert s.valid_bytes == len(MIXED_BUF)
    assert s.error is None
    assert s.truncated is False
    assert (s.start, s.end) == (0, len(MIXED_BUF))


def test_scan_batches_partial_tail(rb):
    data = MIXED_BUF + MIXED[4][:40]
    s = rb.scan_batches(data)
    assert len(s) == len(MIXED)
    assert s.valid_bytes == len(MIXED_BUF)
    assert s.error is None
    assert s.truncated is True
    short = rb.scan_batches(MIXED_BUF + b"\x00" * 17)  # fewer than 18 bytes: a tail
    assert short.error is None and short.truncated and short.valid_bytes == len(MIXED_BUF)


def _flip(b, i):
    out = bytearray(b)
    out[i] ^= 1
    return bytes(out)


SCAN_ERRORS = {
    # name: (bad entry, error class, message fragment, error when validate=False?)
    "size 13": (struct.pack(">qi", 5, 13) + b"\x02" * 20, CorruptRecordError, "Record size 13",
                True),
    "v2 batchLength 48": (v2_batch(batch_length=48)[:60], CorruptRecordError,
                          "minimum batch overhead", True),
    "v2 batchLength 14": (v2_batch(batch_length=14)[:26], CorruptRecordError,
                          "minimum batch overhead", True),
    "v1 size 21": (legacy(1, 1, None, None, timestamp=0, size=21), CorruptRecordError,
                   "for magic 1", True),
    "magic 3": (ref_batch(magic=3), CorruptRecordError, "Unsupported magic byte 3", True),
    "v2 bad crc": (_flip(ref_batch(), 70), InvalidCrcError, "stored crc", False),
    "v0 bad crc": (_flip(legacy(0, 1, b"k", b"v"), -1), InvalidCrcError, "stored crc", False),
    "v1 bad crc": (_flip(legacy(1, 1, b"k", b"v", timestamp=5), -1), InvalidCrcError,
                   "stored crc", False),
}


@pytest.mark.parametrize("case", list(SCAN_ERRORS))
def test_scan_batches_stops_at_the_first_corrupt_entry(rb, case):
    bad, cls, fragment, structural = SCAN_ERRORS[case]
    good = MIXED[0] + MIXED[4]
    data = good + bad + MIXED[5]
    s = rb.scan_batches(data)
    assert type(s.error) is cls
    assert fragment in str(s.error)
    assert s.error.position == len(good)
    assert s.position.tolist() == [0, len(MIXED[0])]
    assert s.valid_bytes == len(good)
    assert s.truncated is True
    lax = rb.scan_batches(data, validate=False)
    if structural:
        assert type(lax.error) is cls and lax.valid_bytes == len(good)
    else:
        assert lax.error is None
        assert lax.position.tolist() == [0, len(MIXED[0]), len(good), len(good) + len(bad)]
        assert lax.valid_bytes == len(data) and not lax.truncated


def test_scan_batches_start_end(rb):
    p = MIXED_POSITIONS
    s = rb.scan_batches(MIXED_BUF, p[2], p[5])
    assert s.position.tolist() == p[2:5]
    assert s.valid_bytes == p[5] - p[2]
    assert (s.start, s.end) == (p[2], p[5])
    assert not s.truncated and s.error is None
    s = rb.scan_batches(MIXED_BUF, p[2], p[5] - 1)
    assert s.position.tolist() == p[2:4]
    assert s.truncated and s.error is None
    empty = rb.scan_batches(b"")
    assert len(empty) == 0 and empty.valid_bytes == 0 and not empty.truncated
    assert empty.position.dtype == np.int64
    with pytest.raises(ValueError, match="outside"):
        rb.scan_batches(MIXED_BUF, len(MIXED_BUF) + 1)


def test_scan_batches_garbage_never_raises(rb):
    noise = random.Random(1234).randbytes(300)
    for data in (b"\xff" * 100, b"\x00" * 100, noise, struct.pack(">qi", 0, INT32_MAX)
                 + b"\x02" * 100):
        s = rb.scan_batches(data)
        assert s.valid_bytes == 0
        assert s.error is None or isinstance(s.error, CorruptRecordError)


# == decode_columns ================================================================================


def test_decode_columns_dtypes_and_shapes(rb):
    cols = rb.decode_columns(MIXED_BUF)
    n = len(MIXED_RECORDS)
    expected = {"offset": (np.int64, n), "timestamp": (np.int64, n),
                "timestamp_type": (np.int8, n), "header_count": (np.int32, n),
                "key_offsets": (np.int64, n + 1), "value_offsets": (np.int64, n + 1),
                "key_null": (np.bool_, n), "value_null": (np.bool_, n),
                "key_data": (np.uint8, None), "value_data": (np.uint8, None)}
    assert set(cols) == set(expected)
    for name, (dtype, length) in expected.items():
        assert cols[name].dtype == dtype, name
        assert cols[name].ndim == 1
        if length is not None:
            assert len(cols[name]) == length, name
    assert cols["key_offsets"][0] == 0 and cols["value_offsets"][0] == 0
    assert cols["key_offsets"][-1] == len(cols["key_data"])
    assert cols["value_offsets"][-1] == len(cols["value_data"])
    assert np.all(np.diff(cols["key_offsets"]) >= 0)


def test_decode_columns_matches_records(rb):
    cols = rb.decode_columns(MIXED_BUF)
    expected = [(o, t, tt, k, v, len(h)) for o, t, tt, k, v, h in MIXED_RECORDS]
    assert column_rows(cols) == expected
    # the same as iterating Record objects
    via_records = [(o, t, tt, k, v, len(h))
                   for o, t, tt, k, v, h in iter_all_records(rb, MIXED_BUF)]
    assert column_rows(cols) == via_records
    # nulls have empty spans
    for name in ("key", "value"):
        null = cols[name + "_null"]
        spans = np.diff(cols[name + "_offsets"])
        assert np.all(spans[null] == 0)


def test_decode_columns_include_control(rb):
    cols = rb.decode_columns(MIXED_BUF, include_control=True)
    rows = column_rows(cols)
    assert rows[:-1] == [(o, t, tt, k, v, len(h)) for o, t, tt, k, v, h in MIXED_RECORDS]
    o, t, tt, k, v, h = MIXED_CONTROL
    assert rows[-1] == (o, t, tt, k, v, 0)


def test_decode_columns_start_end_and_empty(rb):
    p = MIXED_POSITIONS
    cols = rb.decode_columns(MIXED_BUF, p[4], p[6])
    assert cols["offset"].tolist() == [8, 9, 10, 12]
    assert cols["header_count"].tolist() == [0, 1, 0, 0]
    empty = rb.decode_columns(b"")
    assert [len(empty[n]) for n in ("offset", "key_data", "value_data")] == [0, 0, 0]
    assert empty["key_offsets"].tolist() == [0] and empty["value_offsets"].tolist() == [0]
    assert empty["offset"].dtype == np.int64


def test_decode_columns_crc_errors(rb):
    data = MIXED[4] + _flip(MIXED[5], -1)  # the gzip trailer (ISIZE)
    with pytest.raises(InvalidCrcError) as info:
        rb.decode_columns(data)
    assert info.value.position == len(MIXED[4])
    # validate=False reaches the records: the flip lands in the gzip stream
    with pytest.raises(CorruptRecordError):
        rb.decode_columns(data, validate=False)


def test_decode_columns_record_count_beyond_the_bytes(rb):
    raw = v2_batch(rec() + rec(1), count=3, base_offset=6)
    with pytest.raises(CorruptRecordError) as info:
        rb.decode_columns(raw)
    assert info.value.position == 0


def test_decode_columns_raises_an_error_that_is_really_there(rb):
    """Batch 1 has a bad record (valid CRC), batch 2 a header-level problem.

    decode_columns checks every header before parsing any record (both twins do it in
    the same order), so it may report either entry; whichever it reports must be one
    of the two real errors, with its own position.
    """
    bad_records = structure_batch("negative header count", base_offset=1)
    followers = {
        "bad crc (uncompressed)": _flip(MIXED[4], 70),
        "bad crc (gzip)": _flip(MIXED[5], 70),
        "size 13": struct.pack(">qi", 5, 13) + b"\x00" * 20,
        "magic 3": ref_batch(magic=3),
        "undecompressable": v2_batch(b"junk", count=1, attributes=1),
    }
    for name, follower in followers.items():
        data = bad_records + follower
        with pytest.raises(CorruptRecordError) as first:
            iter_all_records(rb, data)
        assert first.value.position == 0, name
        follower_error = capture(lambda: iter_all_records(rb, data[len(bad_records):]))
        assert follower_error[0] == "raise", name
        with pytest.raises(CorruptRecordError) as columns:
            rb.decode_columns(data)
        got = (type(columns.value), str(columns.value), columns.value.position)
        shifted = follower_error[2].replace("position=0", f"position={len(bad_records)}")
        real = {(type(first.value), str(first.value), 0),
                (follower_error[1], shifted, len(bad_records))}
        assert got in real, name


# == encode_batch_v2 ===============================================================================


def parse_v2(raw):
    """An independent decoder for what encode_batch_v2 writes (spec §2.2/§2.3)."""
    def rv(pos, bits):
        value = shift = 0
        while True:
            b = raw[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return (value >> 1) ^ -(value & 1), pos

    (base, length, epoch, magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq,
     count) = struct.unpack_from(">qiibIhiqqqhii", raw, 0)
    header = dict(base_offset=base, batch_length=length, epoch=epoch, magic=magic, crc=crc,
                  attributes=attrs, lod=lod, base_ts=base_ts, max_ts=max_ts, pid=pid,
                  pepoch=pepoch, bseq=bseq, count=count)
    assert length == len(raw) - 12
    assert crc == crc32c.crc32c(raw[21:])
    pos = 61
    records = []
    if attrs & 7:
        return header, None
    for _ in range(count):
        size, pos = rv(pos, 32)
        end = pos + size
        pos += 1
        ts_delta, pos = rv(pos, 64)
        off_delta, pos = rv(pos, 32)
        fields = []
        for _ in range(2):
            n, pos = rv(pos, 32)
            fields.append(None if n < 0 else raw[pos:pos + n])
            pos += max(n, 0)
        hcount, pos = rv(pos, 32)
        headers = []
        for _ in range(hcount):
            n, pos = rv(pos, 32)
            hk = raw[pos:pos + n]
            pos += n
            n, pos = rv(pos, 32)
            headers.append((hk, None if n < 0 else raw[pos:pos + n]))
            pos += max(n, 0)
        assert pos == end
        records.append((off_delta, ts_delta, fields[0], fields[1], headers))
    assert pos == len(raw)
    return header, records


def test_encode_basic(rb):
    raw = rb.encode_batch_v2([(b"k0", b"v0", 1000), (None, b"", 1003), (b"", None, 998)],
                             base_offset=50, partition_leader_epoch=4)
    assert type(raw) is bytes
    header, records = parse_v2(raw)
    assert header == dict(base_offset=50, batch_length=len(raw) - 12, epoch=4, magic=2,
                          crc=crc32c.crc32c(raw[21:]), attributes=0, lod=2, base_ts=1000,
                          max_ts=1003, pid=-1, pepoch=-1, bseq=-1, count=3)
    assert records == [(0, 0, b"k0", b"v0", []), (1, 3, None, b"", []),
                       (2, -2, b"", None, [])]
    b = rb.RecordBatch(raw)
    assert [rec_tuple(r) for r in b] == [(50, 1000, CREATE, b"k0", b"v0", ()),
                                         (51, 1003, CREATE, None, b"", ()),
                                         (52, 998, CREATE, b"", None, ())]


def test_encode_is_byte_identical_to_the_hand_built_batch(rb):
    records = [(b"key-0", b"value-0", 1700000000000, [("h", b"x")]),
               (None, b"", 1700000000009),
               (b"", None, 1699999999995, [("a", None), (b"\xe2\x82\xac", b"")])]
    raw = rb.encode_batch_v2(records, base_offset=REF["base_offset"], partition_leader_epoch=12345,
                             attributes=0x10, producer_id=123456789012, producer_epoch=7,
                             base_sequence=99, last_offset_delta=2)
    assert raw == ref_batch(max_ts=1700000000009)


def test_encode_offsets_with_gaps(rb):
    recs = [(b"a", b"1", 5), (b"b", b"2", 6), (b"c", b"3", 7)]
    raw = rb.encode_batch_v2(recs, base_offset=300, offsets=[300, 303, 307])
    header, records = parse_v2(raw)
    assert [r[0] for r in records] == [0, 3, 7]
    assert header["lod"] == 7
    raw = rb.encode_batch_v2(recs, base_offset=300, offsets=[300, 303, 307], last_offset_delta=9)
    b = rb.RecordBatch(raw)
    assert (b.last_offset_delta, b.last_offset, b.next_offset) == (9, 309, 310)
    assert [r.offset for r in b] == [300, 303, 307]
    # offsets need not start at the base offset
    raw = rb.encode_batch_v2(recs[:1], base_offset=300, offsets=[305])
    assert [r.offset for r in rb.RecordBatch(raw)] == [305]
    assert parse_v2(raw)[0]["lod"] == 5


def test_encode_delete_horizon(rb):
    raw = rb.encode_batch_v2([(b"k", None, 1000), (b"j", None, 1010)], delete_horizon_ms=900,
                             attributes=0x40)
    header, records = parse_v2(raw)
    assert header["attributes"] == 0x40 and header["base_ts"] == 900 and header["max_ts"] == 1010
    assert [r[1] for r in records] == [100, 110]
    b = rb.RecordBatch(raw)
    assert b.has_delete_horizon and b.delete_horizon_ms == 900
    assert [r.timestamp for r in b] == [1000, 1010]
    # bit 6 comes only from delete_horizon_ms
    assert parse_v2(rb.encode_batch_v2([(b"k", b"v", 1)], attributes=0x40))[0]["attributes"] == 0


def test_encode_max_timestamp_log_append_time(rb):
    raw = rb.encode_batch_v2([(b"k", b"v", 10), (b"k", b"v", 20)], attributes=0x08,
                             max_timestamp=5555)
    header, _ = parse_v2(raw)
    assert (header["attributes"], header["base_ts"], header["max_ts"]) == (8, 10, 5555)
    assert [(r.timestamp, int(r.timestamp_type)) for r in rb.RecordBatch(raw)] == \
        [(5555, LOG_APPEND)] * 2


def test_encode_empty_batch(rb):
    raw = rb.encode_batch_v2([], base_offset=400, producer_id=9001, producer_epoch=3,
                             base_sequence=17)
    header, records = parse_v2(raw)
    assert len(raw) == 61 and records == []
    assert (header["count"], header["lod"], header["base_ts"], header["max_ts"]) == (0, 0, -1, -1)
    raw = rb.encode_batch_v2([], base_offset=400, last_offset_delta=4)
    b = rb.RecordBatch(raw)
    assert (b.last_offset, b.next_offset, b.record_count) == (404, 405, 0)


def test_encode_empty_batch_keeps_base_timestamp_no_timestamp(rb):
    """Spec §2.2: an empty batch has baseTimestamp -1 and maxTimestamp preserved
    (Kafka's DefaultRecordBatch.writeEmptyHeader)."""
    raw = rb.encode_batch_v2([], base_offset=400, last_offset_delta=4, max_timestamp=1700000000042)
    header, _ = parse_v2(raw)
    assert header["max_ts"] == 1700000000042
    assert header["base_ts"] == -1


def test_encode_producer_fields(rb):
    raw = rb.encode_batch_v2([(b"k", b"v", 1)] * 3, base_offset=77, partition_leader_epoch=12,
                             producer_id=123456789012, producer_epoch=7,
                             base_sequence=2147483000, attributes=0x10)
    b = rb.RecordBatch(raw)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == \
        (123456789012, 7, 2147483000, 2147483002)
    assert b.partition_leader_epoch == 12 and b.is_transactional


def test_encode_headers(rb):
    headers = [("str-key", b"v"), (b"bytes-key", None), ("", b""),
               ("\u043a\u043b\u044e\u0447", bytearray(b"ba")), (b"\xffraw", memoryview(b"mv")),
               ("dup", b"1"), ("dup", b"2")]
    raw = rb.encode_batch_v2([(b"k", b"v", 1, headers)])
    _, records = parse_v2(raw)
    assert records[0][4] == [(b"str-key", b"v"), (b"bytes-key", None), (b"", b""),
                             ("\u043a\u043b\u044e\u0447".encode(), b"ba"), (b"\xffraw", b"mv"),
                             (b"dup", b"1"), (b"dup", b"2")]
    (r,) = list(rb.RecordBatch(raw))
    assert r.headers == (("str-key", b"v"), ("bytes-key", None), ("", b""),
                         ("\u043a\u043b\u044e\u0447", b"ba"), ("\udcffraw", b"mv"), ("dup", b"1"),
                         ("dup", b"2"))
    # a surrogate-escaped key written back gives the original bytes
    again = rb.encode_batch_v2([r])
    assert parse_v2(again)[1][0][4][4] == (b"\xffraw", b"mv")


def test_encode_record_objects(rb):
    original = list(rb.RecordBatch(ref_batch()))
    raw = rb.encode_batch_v2(original, base_offset=REF["base_offset"], partition_leader_epoch=12345,
                             attributes=0x10, producer_id=123456789012, producer_epoch=7,
                             base_sequence=99)
    assert raw == ref_batch(max_ts=1700000000009)

    class Plain:
        key = b"pk"
        value = None

    class WithTs:
        def __init__(self):
            self.key, self.value, self.timestamp, self.headers = None, b"x", 77, [("h", None)]

    raw = rb.encode_batch_v2([Plain(), WithTs()], default_timestamp=50)
    _, records = parse_v2(raw)
    assert records == [(0, 0, b"pk", None, []), (1, 27, None, b"x", [(b"h", None)])]


def test_encode_default_timestamp_and_bytes_like(rb):
    raw = rb.encode_batch_v2([(bytearray(b"k"), memoryview(b"v")), [b"k2", b"v2", None],
                              (b"k3", np.frombuffer(b"np", dtype=np.uint8))], default_timestamp=123)
    header, records = parse_v2(raw)
    assert header["base_ts"] == header["max_ts"] == 123
    assert [(r[2], r[3], r[1]) for r in records] == [(b"k", b"v", 0), (b"k2", b"v2", 0),
                                                     (b"k3", b"np", 0)]
    raw = rb.encode_batch_v2(iter([(b"g", b"h")]))  # any iterable
    assert parse_v2(raw)[1][0][2:4] == (b"g", b"h")


def test_encode_attribute_bits(rb):
    raw = rb.encode_batch_v2([(b"k", b"v", 1)], attributes=0xFF38)
    assert parse_v2(raw)[0]["attributes"] == 0x38
    gzipped = rb.encode_batch_v2([(b"k", b"v", 1), (b"k2", None, 2)], attributes=1,
                                 compress=lambda view: gz(bytes(view)))
    header, _ = parse_v2(gzipped)
    assert header["attributes"] == 1
    assert bytes(gzipped[61:]) == gz(rec(0, 0, b"k", b"v") + rec(1, 1, b"k2", None))
    assert [rec_tuple(r) for r in rb.RecordBatch(gzipped)] == [
        (0, 1, CREATE, b"k", b"v", ()), (1, 2, CREATE, b"k2", None, ())]


ENCODE_ERRORS = {
    # name: (records, kwargs, exception class, message fragment)
    "str key": ([("k", b"v")], {}, TypeError, "record key must be bytes-like"),
    "int value": ([(b"k", 5)], {}, TypeError, "record value must be bytes-like"),
    "1-tuple": ([(b"k",)], {}, TypeError, "a record tuple is"),
    "5-tuple": ([(b"k", b"v", 1, (), 1)], {}, TypeError, "a record tuple is"),
    "not a record": ([5], {}, TypeError, "with key and value attributes"),
    "float timestamp": ([(b"k", b"v", 1.5)], {}, TypeError, "timestamp must be an int"),
    "timestamp past int64": ([(b"k", b"v", 1 << 63)], {}, ValueError, "int64 range"),
    "header not a pair": ([(b"k", b"v", 1, [(b"a",)])], {}, TypeError, "(key, value) pair"),
    "null header key": ([(b"k", b"v", 1, [(None, b"a")])], {}, TypeError, "cannot be null"),
    "int header key": ([(b"k", b"v", 1, [(5, b"a")])], {}, TypeError, "header key"),
    "str header value": ([(b"k", b"v", 1, [("a", "b")])], {}, TypeError, "header value"),
    "base offset past int64": ([], {"base_offset": 1 << 63}, ValueError, "base offset"),
    "epoch past int32": ([], {"partition_leader_epoch": 1 << 31}, ValueError, "leader epoch"),
    "producer id below int64": ([], {"producer_id": INT64_MIN - 1}, ValueError, "producer id"),
    "producer epoch past int16": ([], {"producer_epoch": 1 << 15}, ValueError, "producer epoch"),
    "base sequence past int32": ([], {"base_sequence": 1 << 31}, ValueError, "base sequence"),
    "default timestamp past int64": ([], {"default_timestamp": 1 << 63}, ValueError, "timestamp"),
    "offsets length": ([(b"k", b"v")], {"offsets": [1, 2]}, ValueError, "2 offsets given"),
    "offsets repeated": ([(b"k", b"v")] * 2, {"offsets": [5, 5]}, ValueError, "above the previous"),
    "offset below base": ([(b"k", b"v")], {"base_offset": 10, "offsets": [9]}, ValueError,
                          "within int32"),
    "offset beyond int32": ([(b"k", b"v")], {"offsets": [1 << 31]}, ValueError, "within int32"),
    "last offset delta too small": ([(b"k", b"v")] * 2, {"last_offset_delta": 0}, ValueError,
                                    "last offset delta 0"),
    "last offset delta past int32": ([(b"k", b"v")], {"last_offset_delta": 1 << 31}, ValueError,
                                     "last offset delta"),
    "max timestamp past int64": ([(b"k", b"v")], {"max_timestamp": 1 << 63}, ValueError,
                                 "max timestamp"),
    "max timestamp past int64, empty batch": ([], {"max_timestamp": 1 << 63}, ValueError,
                                              "max timestamp"),
    "delete horizon past int64": ([(b"k", b"v")], {"delete_horizon_ms": 1 << 63}, ValueError,
                                  "delete horizon"),
    "timestamp delta overflow": ([(b"k", b"v", INT64_MAX), (b"k", b"v", INT64_MIN)], {},
                                 ValueError, "too far from the base timestamp"),
    "compressed without compress": ([(b"k", b"v")], {"attributes": 1}, ValueError,
                                    "needs a compress function"),
    "records None": (None, {}, TypeError, "not iterable"),
    "headers not iterable": ([(b"k", b"v", 1, 5)], {}, TypeError, "not iterable"),
    "two bad arguments": ([(b"k", b"v")] * 2, {"last_offset_delta": 0, "max_timestamp": 1 << 63},
                          ValueError, ""),
}


@pytest.mark.parametrize("case", list(ENCODE_ERRORS))
def test_encode_invalid_inputs(rb, case):
    records, kwargs, cls, fragment = ENCODE_ERRORS[case]
    with pytest.raises(cls, match=re.escape(fragment) if fragment else None) as info:
        rb.encode_batch_v2(records, **kwargs)
    assert not isinstance(info.value, KafkaStoreError)


@pytest.mark.parametrize("case", list(ENCODE_ERRORS))
def test_encode_invalid_inputs_same_message_in_both(pair, case):
    records, kwargs, _, _ = ENCODE_ERRORS[case]
    a = capture(lambda: pair.pure.encode_batch_v2(records, **kwargs))
    b = capture(lambda: pair.ext.encode_batch_v2(records, **kwargs))
    assert a[0] == "raise"
    assert a == b


INT_PARAMS = ["base_offset", "partition_leader_epoch", "attributes", "producer_id",
              "producer_epoch", "base_sequence", "default_timestamp", "max_timestamp",
              "last_offset_delta", "delete_horizon_ms", "offsets"]


def test_encode_rejects_float_integers(rb):
    """A float where Kafka wants an integer is a TypeError, never silently truncated
    (1.0 -> 1) nor a struct.error."""
    wrong = {}
    for param in INT_PARAMS:
        value = [0.0] if param == "offsets" else 1.0
        outcome = capture(lambda: rb.encode_batch_v2([(b"k", b"v", 1)], **{param: value}))
        if outcome[0] != "raise" or outcome[1] is not TypeError:
            wrong[param] = "accepted" if outcome[0] == "ok" else outcome[1].__name__
    assert wrong == {}


def test_encode_attributes_outside_int16(pair):
    """Only bits 0-5 of ``attributes`` are used; a wider int is masked the same way."""
    for value in (1 << 16 | 0x08, 1 << 40 | 0x08):
        a = capture(lambda: pair.pure.encode_batch_v2([(b"k", b"v", 1)], attributes=value))
        b = capture(lambda: pair.ext.encode_batch_v2([(b"k", b"v", 1)], attributes=value))
        assert a == b


# == the two implementations agree =================================================================

CORPUS = {
    "mixed": MIXED_BUF,
    "mixed + tail": MIXED_BUF + MIXED[4][:33],
    "ref batch": ref_batch(),
    "ref batch gzip": ref_batch(records=gz(REF_RECORDS), attributes=0x11),
    "log append time": v2_batch(rec(0, 0) + rec(1, 5), count=2, attributes=8, max_ts=9,
                                last_offset_delta=1),
    "delete horizon": v2_batch(rec(0, 3), count=1, attributes=0x40, first_ts=50),
    "empty batch": v2_batch(count=0, last_offset_delta=4, pid=1, bseq=5),
    "negative lod": v2_batch(bseq=5, last_offset_delta=-1),
    "codec 7": v2_batch(rec(), count=1, attributes=7),
    "legacy codec 4": legacy(1, 5, None, b"xx", attributes=4, timestamp=3),
    "legacy bad crc": _flip(legacy(1, 5, b"a", b"b", timestamp=7), 30),
    "v2 bad crc": _flip(ref_batch(), 80),
    "size 13 after batch": MIXED[4] + struct.pack(">qi", 5, 13) + b"\x02" * 20,
    "magic 3 after batch": MIXED[4] + ref_batch(magic=3),
    "structure then crc": structure_batch("negative header count") + _flip(MIXED[4], 70),
    "empty": b"",
    "17 zero bytes": b"\x00" * 17,
    "64 zero bytes": b"\x00" * 64,
}
CORPUS.update({f"structure: {k}": structure_batch(k) for k in STRUCTURE_ERRORS})
CORPUS.update({f"wrapper: {k}": v[0] for k, v in LEGACY_WRAPPER_ERRORS.items()})
CORPUS.update({f"legacy: {k}": v[0] for k, v in LEGACY_CONSTRUCTION_ERRORS.items()})
CORPUS.update({f"scan: {k}": MIXED[0] + v[0] for k, v in SCAN_ERRORS.items()})


@pytest.mark.parametrize("name", list(CORPUS))
def test_both_implementations_agree(pair, name):
    data = CORPUS[name]
    a = observe(pair.pure, data)
    b = observe(pair.ext, data)
    for key in a:
        assert a[key] == b[key], key


@pytest.mark.parametrize("name", ["mixed", "ref batch gzip", "structure then crc"])
def test_both_implementations_give_equal_numpy_columns(pair, name):
    data = CORPUS[name]
    for kw in ({}, {"include_control": True, "validate": False}):
        try:
            a = pair.pure.decode_columns(data, **kw)
        except CorruptRecordError as exc:
            with pytest.raises(type(exc)) as info:
                pair.ext.decode_columns(data, **kw)
            assert (str(info.value), info.value.position) == (str(exc), exc.position)
            continue
        b = pair.ext.decode_columns(data, **kw)
        assert a.keys() == b.keys()
        for col in a:
            assert a[col].dtype == b[col].dtype, col
            np.testing.assert_array_equal(a[col], b[col], err_msg=col)
    sa, sb = pair.pure.scan_batches(data), pair.ext.scan_batches(data)
    for col in ("position", "size", "magic", "base_offset", "last_offset", "max_timestamp",
                "record_count"):
        assert getattr(sa, col).dtype == getattr(sb, col).dtype
        np.testing.assert_array_equal(getattr(sa, col), getattr(sb, col), err_msg=col)


def test_read_batch_position_errors_agree(pair):
    raw = ref_batch()
    for pos in (-1, len(raw) + 1, len(raw), len(raw) - 10):
        assert capture(lambda: pair.pure.read_batch(raw, pos)) == \
            capture(lambda: pair.ext.read_batch(raw, pos)), pos


record_strategy = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300),
    st.none() | st.integers(-(1 << 50), 1 << 50),
    st.lists(st.tuples(st.text(max_size=8) | st.binary(max_size=8),
                       st.none() | st.binary(max_size=20)), max_size=4),
)


@settings(max_examples=examples(150))
@given(
    records=st.lists(record_strategy, max_size=12),
    base_offset=st.integers(0, 1 << 62),
    epoch=st.integers(INT32_MIN, INT32_MAX),
    attributes=st.sampled_from([0, 0x08, 0x10, 0x20, 0x30, 0x18]),
    pid=st.integers(INT64_MIN, INT64_MAX),
    pepoch=st.integers(-(1 << 15), (1 << 15) - 1),
    bseq=st.integers(INT32_MIN, INT32_MAX),
    default_ts=st.integers(-(1 << 50), 1 << 50),
    gaps=st.none() | st.lists(st.integers(1, 1000), min_size=12, max_size=12),
    extra_lod=st.none() | st.integers(0, 1000),
    horizon=st.none() | st.integers(-(1 << 50), 1 << 50),
    max_ts=st.none() | st.integers(INT64_MIN, INT64_MAX),
)
def test_encode_and_decode_agree_and_round_trip(records, base_offset, epoch, attributes, pid,
                                                pepoch, bseq, default_ts, gaps, extra_lod,
                                                horizon, max_ts):
    pure = importlib.import_module("kafkastore._pure.record_batch")
    ext = compiled_kernel("record_batch")
    offsets = None
    if gaps is not None:
        offsets, o = [], base_offset
        for g in gaps[:len(records)]:
            o += g
            offsets.append(o)
    lod = None
    if extra_lod is not None:
        last = (offsets[-1] - base_offset) if offsets else max(len(records) - 1, 0)
        lod = last + extra_lod
    kwargs = dict(base_offset=base_offset, partition_leader_epoch=epoch, attributes=attributes,
                  producer_id=pid, producer_epoch=pepoch, base_sequence=bseq,
                  default_timestamp=default_ts, max_timestamp=max_ts, last_offset_delta=lod,
                  offsets=offsets, delete_horizon_ms=horizon)
    a = capture(lambda: pure.encode_batch_v2(records, **kwargs))
    b = capture(lambda: ext.encode_batch_v2(records, **kwargs))
    assert a == b
    assert a[0] == "ok"
    raw = a[1]
    stamps = [default_ts if r[2] is None else r[2] for r in records]
    want_max = max_ts if max_ts is not None else max(stamps, default=-1)
    for mod in (pure, ext):
        batch = mod.RecordBatch(raw)
        assert batch.is_valid()
        got = [rec_tuple(r) for r in batch]
        assert len(got) == len(records)
        for i, ((key, value, ts, headers), r) in enumerate(zip(records, got)):
            expected_offset = offsets[i] if offsets else base_offset + i
            ts = default_ts if ts is None else ts
            expected_ts = want_max if attributes & 0x08 else ts
            want_headers = tuple((k if isinstance(k, str)
                                  else k.decode("utf-8", "surrogateescape"), v)
                                 for k, v in headers)
            assert r == (expected_offset, expected_ts, attributes >> 3 & 1, key, value,
                         want_headers)
        assert batch.base_sequence == bseq and batch.producer_id == pid
        assert batch.max_timestamp == want_max
        assert batch.has_delete_horizon == (horizon is not None)
    assert observe(pure, raw) == observe(ext, raw)
