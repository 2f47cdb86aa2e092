"""Compatibility with independent Kafka record implementations.

Oracles (see /work/shared/reference/performance.md §2, "Peer APIs"):

* kafka-python (pure Python): ``kafka.record.MemoryRecords``, ``DefaultRecordBatchBuilder``,
  ``LegacyRecordBatchBuilder``.
* aiokafka: its Cython classes (``aiokafka.record._crecords``, selected by default) and its
  pure-Python twins (``_DefaultRecordBatchPy``, ``_DefaultRecordBatchBuilderPy``,
  ``_LegacyRecordBatchPy``, ``_LegacyRecordBatchBuilderPy``).

Both directions are checked: the peers decode what kafkastore writes (compared with the
test's own input, not with kafkastore's reading of it), kafkastore decodes what the peers
write, and uncompressed output is byte-identical where the formats leave no freedom.
"""

from __future__ import annotations

import importlib
import struct
import types
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkastore import records as R
from kafkastore.types import CompressionType, TimestampType

from strategies import (
    I16_MAX,
    I16_MIN,
    I32_MAX,
    TIMESTAMP_TYPES,
    RecSpec,
    base_offsets,
    base_sequences,
    compressible,
    headers,
    payloads,
    producer_epochs,
    producer_ids,
    record_specs,
    resolved_timestamps,
    scaled,
    timestamp_lists,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = (CompressionType.NONE, CompressionType.GZIP,
                                 CompressionType.SNAPPY, CompressionType.LZ4,
                                 CompressionType.ZSTD)
ORACLE_SETTINGS = scaled(0.25)


# -- the oracles, each skipped with a reason when it is not installed ---------------------


def _oracle(package: str, reason: str, **modules: str) -> types.SimpleNamespace:
    """The oracle's modules by attribute (one must be ``codec``), and ``has[codec]``: whether
    its library for that codec is installed. Skips with ``reason`` without ``package``."""
    pytest.importorskip(package, reason=reason)
    ns = types.SimpleNamespace(**{name: importlib.import_module(module)
                                  for name, module in modules.items()})
    ns.has = {NONE: True, GZIP: ns.codec.has_gzip(), SNAPPY: ns.codec.has_snappy(),
              LZ4: ns.codec.has_lz4(), ZSTD: ns.codec.has_zstd()}
    return ns


@pytest.fixture(scope="module")
def kafka_python():
    return _oracle("kafka", "kafka-python is not installed",
                   records="kafka.record",
                   default="kafka.record.default_records",
                   legacy="kafka.record.legacy_records",
                   codec="kafka.codec")


@pytest.fixture(scope="module")
def aiokafka_records():
    return _oracle("aiokafka", "aiokafka is not installed",
                   default="aiokafka.record.default_records",
                   legacy="aiokafka.record.legacy_records",
                   memory="aiokafka.record.memory_records",
                   codec="aiokafka.codec")


def _need(oracle, codec):
    if not oracle.has[codec]:
        pytest.skip(f"the oracle's {codec.name.lower()} library is not installed")


def _aiokafka_impls(aio):
    """``(name, DefaultRecordBatch, LegacyRecordBatch, DefaultBuilder, LegacyBuilder)``
    for aiokafka's Cython classes (when compiled) and its pure ones."""
    impls = []
    d, leg = aio.default, aio.legacy
    if d.DefaultRecordBatch is not d._DefaultRecordBatchPy:
        impls.append(("cython", d.DefaultRecordBatch, leg.LegacyRecordBatch,
                      d.DefaultRecordBatchBuilder, leg.LegacyRecordBatchBuilder))
    impls.append(("pure", d._DefaultRecordBatchPy, leg._LegacyRecordBatchPy,
                  d._DefaultRecordBatchBuilderPy, leg._LegacyRecordBatchBuilderPy))
    return impls


def _entries(buf: bytes):
    """Split a buffer into entries with nothing but the framing (offset, size)."""
    pos = 0
    while pos < len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        yield bytes(buf[pos:pos + 12 + size]), buf[pos + 16]
        pos += 12 + size
    assert pos == len(buf)


# -- expected values, from the test's own input --------------------------------------------


def expected_v2(specs, *, base, default_ts, ts_type, max_ts):
    stamps = resolved_timestamps(specs, default_ts)
    if ts_type == TimestampType.LOG_APPEND_TIME:
        batch_max = default_ts if max_ts is None else max_ts
        rec_ts = [batch_max] * len(specs)
    else:
        batch_max = max(stamps)
        rec_ts = stamps
    recs = [(base + i, ts, int(ts_type), s.key, s.value, [tuple(h) for h in s.headers])
            for i, (s, ts) in enumerate(zip(specs, rec_ts))]
    return stamps[0], batch_max, recs


def expected_legacy(specs, *, magic, base, default_ts, ts_type, max_ts, none_ts=-1,
                    none_type=-1):
    """Records a reader should report; ``none_ts``/``none_type`` is how the reader
    spells "no timestamp" for magic 0."""
    stamps = resolved_timestamps(specs, default_ts)
    out = []
    for i, (s, ts) in enumerate(zip(specs, stamps)):
        if magic == 0:
            ts, tt = none_ts, none_type
        elif ts_type == TimestampType.LOG_APPEND_TIME:
            ts, tt = (default_ts if max_ts is None else max_ts), 1
        else:
            tt = 0
        out.append((base + i, ts, tt, s.key, s.value, []))
    return out


def peer_records(batch):
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
             [tuple(h) for h in r.headers]) for r in batch]


def ks_records(buf, **kw):
    return [(r.offset, r.timestamp, int(r.timestamp_type), r.key, r.value,
             [tuple(h) for h in r.headers]) for r in R.iter_records(buf, **kw)]


@st.composite
def control_specs(draw):
    """Records for a control batch: keys a control-record reader can parse."""
    specs, default_ts = draw(record_specs(min_size=1, max_size=3))
    out = []
    for s in specs:
        key = struct.pack(">hh", draw(st.integers(0, 3)), draw(st.integers(0, 6)))
        out.append(s._replace(key=key))
    return out, default_ts


@st.composite
def v2_cases(draw, *, control_keys=False):
    control = draw(st.booleans())
    if control and control_keys:
        specs, default_ts = draw(control_specs())
    else:
        specs, default_ts = draw(record_specs(min_size=1, max_size=6))
    ts_type = draw(st.sampled_from(TIMESTAMP_TYPES))
    return dict(
        specs=specs, default_ts=default_ts, ts_type=ts_type, control=control,
        max_ts=draw(st.one_of(st.none(), st.integers(0, 1 << 50))) if ts_type else None,
        base=draw(base_offsets),
        transactional=draw(st.booleans()),
        producer_id=draw(producer_ids),
        producer_epoch=draw(producer_epochs),
        base_sequence=draw(base_sequences),
        leader_epoch=draw(st.integers(-1, I32_MAX)),
    )


def encode_v2(case, codec):
    return R.encode_batch(
        [(s.key, s.value, s.timestamp, list(s.headers)) for s in case["specs"]],
        base_offset=case["base"], compression=codec, timestamp_type=case["ts_type"],
        timestamp=case["default_ts"], max_timestamp=case["max_ts"],
        is_transactional=case["transactional"], is_control=case["control"],
        producer_id=case["producer_id"], producer_epoch=case["producer_epoch"],
        base_sequence=case["base_sequence"], partition_leader_epoch=case["leader_epoch"])


def check_peer_v2_batch(batch, case, codec, *, leader_epoch_attr=None):
    """Compare a peer's view of one v2 batch with the case that produced it."""
    first_ts, max_ts, recs = expected_v2(case["specs"], base=case["base"],
                                         default_ts=case["default_ts"],
                                         ts_type=case["ts_type"], max_ts=case["max_ts"])
    assert batch.validate_crc() is True  # before iteration, as the peers require
    assert batch.magic == 2
    assert batch.base_offset == case["base"]
    assert batch.last_offset_delta == len(case["specs"]) - 1
    assert batch.next_offset == case["base"] + len(case["specs"])
    assert batch.compression_type == int(codec)
    assert batch.timestamp_type == int(case["ts_type"])
    assert batch.is_transactional is case["transactional"]
    assert batch.is_control_batch is case["control"]
    assert batch.producer_id == case["producer_id"]
    assert batch.producer_epoch == case["producer_epoch"]
    assert batch.base_sequence == case["base_sequence"]
    assert batch.first_timestamp == first_ts
    assert batch.max_timestamp == max_ts
    if leader_epoch_attr:
        assert getattr(batch, leader_epoch_attr) == case["leader_epoch"]
    assert peer_records(batch) == recs


# -- kafka-python decodes what kafkastore writes ----------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
@ORACLE_SETTINGS
@given(case=v2_cases(control_keys=True))
def test_kafka_python_reads_our_v2(kafka_python, codec, case):
    _need(kafka_python, codec)
    buf = encode_v2(case, codec)
    mem = kafka_python.records.MemoryRecords(buf)
    batch = mem.next_batch()
    assert mem.next_batch() is None
    assert batch.records_count == len(case["specs"])
    assert batch.size_in_bytes == len(buf)
    check_peer_v2_batch(batch, case, codec, leader_epoch_attr="leader_epoch")


def _draw_our_legacy(data, magic, codec):
    """``(specs, buf, expected)``: a magic 0/1 batch kafkastore encodes from drawn records,
    and the records a peer should read back (no timestamp spelled None, as the peers do)."""
    specs, default_ts = data.draw(record_specs(min_size=1, max_size=6, with_headers=False))
    ts_type = data.draw(st.sampled_from(TIMESTAMP_TYPES))
    max_ts = data.draw(st.one_of(st.none(), st.integers(0, 1 << 50))) if ts_type else None
    base = data.draw(base_offsets)
    buf = R.encode_batch([(s.key, s.value, s.timestamp) for s in specs], magic=magic,
                         compression=codec, base_offset=base, timestamp_type=ts_type,
                         timestamp=default_ts, max_timestamp=max_ts)
    expected = expected_legacy(specs, magic=magic, base=base, default_ts=default_ts,
                               ts_type=ts_type, max_ts=max_ts, none_ts=None, none_type=None)
    return specs, buf, expected


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4], ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
@ORACLE_SETTINGS
@given(data=st.data())
def test_kafka_python_reads_our_legacy(kafka_python, magic, codec, data):
    _need(kafka_python, codec)
    specs, buf, expected = _draw_our_legacy(data, magic, codec)
    mem = kafka_python.records.MemoryRecords(buf)
    got = []
    n_batches = 0
    while mem.has_next():
        batch = mem.next_batch()
        n_batches += 1
        assert batch.validate_crc()
        assert batch.magic == magic
        assert batch.compression_type == int(codec)
        for rec in batch:
            assert rec.validate_crc()  # inner messages of a wrapper too
            got.append((rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value,
                        list(rec.headers)))
    assert n_batches == (len(specs) if codec == NONE else 1)
    # kafka-python spells "no timestamp" (magic 0) as None
    assert got == expected


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4], ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
def test_our_legacy_wrapper_inner_framing(kafka_python, magic, codec):
    """Inflate our wrapper with kafka-python's codecs and read the inner entries by hand:
    v0 inner offsets are absolute, v1 inner offsets are relative 0..n-1 (Kafka's
    MemoryRecordsBuilder.toInnerOffset; the broker's in-place path requires exactly
    that), inner messages are uncompressed, of the wrapper's magic, with valid CRCs."""
    _need(kafka_python, codec)
    c = kafka_python.codec
    base = 1000
    specs = [(b"k%d" % i, compressible(100 + i, seed=i), 50 + i) for i in range(4)]
    buf = R.encode_batch(specs, magic=magic, compression=codec, base_offset=base)
    offset, size, _crc, m, attrs = struct.unpack_from(">qiIbb", buf, 0)
    assert (offset, m, attrs & 0x07) == (base + 3, magic, int(codec))
    pos = 18 if magic == 0 else 26
    assert struct.unpack_from(">i", buf, pos)[0] == -1  # null wrapper key
    vlen = struct.unpack_from(">i", buf, pos + 4)[0]
    payload = buf[pos + 8:pos + 8 + vlen]
    assert pos + 8 + vlen == len(buf)
    if codec == GZIP:
        inner = c.gzip_decode(payload)
    elif codec == SNAPPY:
        inner = c.snappy_decode(payload)
    else:
        inner = c.lz4_decode_old_kafka(payload) if magic == 0 else c.lz4_decode(payload)
    inner_offsets = []
    ipos = 0
    while ipos < len(inner):
        ioff, isize, icrc, imagic, iattrs = struct.unpack_from(">qiIbb", inner, ipos)
        assert imagic == magic and iattrs == 0
        assert icrc == zlib.crc32(inner[ipos + 16:ipos + 12 + isize])
        inner_offsets.append(ioff)
        ipos += 12 + isize
    assert ipos == len(inner)
    assert inner_offsets == ([base + i for i in range(4)] if magic == 0 else [0, 1, 2, 3])


def test_kafka_python_reads_our_control_batch(kafka_python):
    buf = R.encode_control_batch(1, producer_id=99, producer_epoch=3, coordinator_epoch=12,
                                 base_offset=40, timestamp=1234)
    batch = kafka_python.records.MemoryRecords(buf).next_batch()
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 3, -1)
    (rec,) = list(batch)
    assert isinstance(rec, kafka_python.default.ControlRecord)
    assert (rec.offset, rec.timestamp, rec.version, rec.type, rec.commit) == (40, 1234, 0, 1, True)
    assert rec.value == struct.pack(">hi", 0, 12)


def test_kafka_python_reads_a_mixed_log(kafka_python):
    parts = [
        R.encode_batch([(b"a", b"1", 10)], magic=0, base_offset=0),
        R.encode_batch([(b"b", b"2", 11), (b"c", b"3", 12)], magic=1, base_offset=1,
                       compression="gzip"),
        R.encode_batch([(b"d", b"4", 13, [("h", b"x")])], base_offset=3, compression="zstd"),
        R.encode_batch([(b"e", None, 14)], magic=1, base_offset=4, compression="lz4",
                       timestamp_type=1, max_timestamp=500),
    ]
    mem = kafka_python.records.MemoryRecords(b"".join(parts))
    got = []
    while mem.has_next():
        got += [(r.offset, r.timestamp, r.key, r.value) for r in mem.next_batch()]
    assert got == [(0, None, b"a", b"1"), (1, 11, b"b", b"2"), (2, 12, b"c", b"3"),
                   (3, 13, b"d", b"4"), (4, 500, b"e", None)]


# -- aiokafka decodes what kafkastore writes ----------------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
@ORACLE_SETTINGS
@given(case=v2_cases())
def test_aiokafka_reads_our_v2(aiokafka_records, codec, case):
    _need(aiokafka_records, codec)
    buf = encode_v2(case, codec)
    for _name, batch_cls, _, _, _ in _aiokafka_impls(aiokafka_records):
        check_peer_v2_batch(batch_cls(buf), case, codec)
    mem = aiokafka_records.memory.MemoryRecords(buf)
    assert peer_records(mem.next_batch()) == expected_v2(
        case["specs"], base=case["base"], default_ts=case["default_ts"],
        ts_type=case["ts_type"], max_ts=case["max_ts"])[2]
    assert not mem.has_next()


# aiokafka neither reads nor writes magic 0 lz4 (Kafka's broken pre-0.10 framing);
# kafka-python covers that combination.
AIOKAFKA_LEGACY = [(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4)
                   if (m, c) != (0, LZ4)]
LEGACY_IDS = [f"v{m}-{c.name.lower()}" for m, c in AIOKAFKA_LEGACY]


@pytest.mark.parametrize("magic, codec", AIOKAFKA_LEGACY, ids=LEGACY_IDS)
@ORACLE_SETTINGS
@given(data=st.data())
def test_aiokafka_reads_our_legacy(aiokafka_records, magic, codec, data):
    _need(aiokafka_records, codec)
    _, buf, expected = _draw_our_legacy(data, magic, codec)
    for name, _, legacy_cls, _, _ in _aiokafka_impls(aiokafka_records):
        got = []
        for entry, entry_magic in _entries(buf):
            assert entry_magic == magic
            batch = legacy_cls(entry, magic)
            assert batch.validate_crc(), name
            got += peer_records(batch)
        if name == "cython":
            # aiokafka's Cython LegacyRecord reports timestamp -1 as (None, None)
            got, want = _no_ts_as_none(got), _no_ts_as_none(expected)
        else:
            want = expected
        assert got == want, name


def _no_ts_as_none(recs):
    return [r[:1] + (None, None) + r[3:] if r[1] in (-1, None) else r for r in recs]


# -- kafkastore decodes what the peers write ---------------------------------------------------


@st.composite
def peer_inputs(draw, *, with_headers=True, compressible_values=False):
    """Records as a producer hands them to a peer builder: every timestamp given."""
    n = draw(st.integers(1, 6))
    stamps = draw(timestamp_lists(n, allow_none=False))
    out = []
    for i, ts in enumerate(stamps):
        value = draw(payloads)
        if compressible_values:
            value = compressible(draw(st.integers(200, 3000)), seed=i)
        out.append(RecSpec(draw(payloads), value, ts, draw(headers) if with_headers else ()))
    return out


def build_peer_v2(builder_cls, specs, codec=NONE, *, transactional=False, producer_id=-1,
                  producer_epoch=-1, base_sequence=-1):
    builder = builder_cls(2, int(codec), transactional, producer_id, producer_epoch,
                          base_sequence, 1 << 30)
    for i, s in enumerate(specs):
        assert builder.append(i, s.timestamp, s.key, s.value, list(s.headers)) is not None
    return bytes(builder.build())


def build_peer_legacy(builder_cls, magic, specs, codec=NONE, offsets=None):
    builder = builder_cls(magic, int(codec), 1 << 30)
    offsets = range(len(specs)) if offsets is None else offsets
    for off, s in zip(offsets, specs):
        assert builder.append(off, s.timestamp, s.key, s.value) is not None
    return bytes(builder.build())


def check_we_read_peer_v2(buf, specs, codec, *, transactional, producer_id, producer_epoch,
                          base_sequence, leader_epoch):
    assert buf[21 + 1] & 0x07 == int(codec)  # the peer really compressed (or did not)
    (batch,) = R.iter_batches(buf)
    batch.validate()
    assert batch.compression == codec
    assert batch.base_offset == 0
    assert batch.partition_leader_epoch == leader_epoch
    assert batch.record_count == len(specs)
    assert batch.last_offset_delta == len(specs) - 1
    assert batch.is_transactional is transactional
    assert batch.is_control is False
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        producer_id, producer_epoch, base_sequence)
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.first_timestamp == specs[0].timestamp
    assert batch.max_timestamp == max(s.timestamp for s in specs)
    expected = [(i, s.timestamp, 0, s.key, s.value, [tuple(h) for h in s.headers])
                for i, s in enumerate(specs)]
    assert ks_records(buf) == expected
    cols = R.decode_columns(buf)
    assert cols.offset.tolist() == list(range(len(specs)))
    assert [cols.key(i) for i in range(len(specs))] == [s.key for s in specs]
    assert [cols.value(i) for i in range(len(specs))] == [s.value for s in specs]
    assert cols.header_count.tolist() == [len(s.headers) for s in specs]


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
@ORACLE_SETTINGS
@given(specs=peer_inputs(compressible_values=True), transactional=st.booleans(),
       producer_id=st.integers(0, 1 << 40), producer_epoch=st.integers(0, I16_MAX),
       base_sequence=st.integers(0, I32_MAX))
def test_we_read_aiokafka_v2(aiokafka_records, codec, specs, transactional, producer_id,
                             producer_epoch, base_sequence):
    _need(aiokafka_records, codec)
    for name, _, _, builder_cls, _ in _aiokafka_impls(aiokafka_records):
        if name == "cython" and specs[0].timestamp == -1 and len(specs) > 1:
            # aiokafka's Cython builder keeps -1 as its "no first timestamp yet" sentinel:
            # a first record stamped -1 takes the next record's timestamp as the batch's
            # firstTimestamp and its own delta is computed against it, so the bytes it
            # writes do not hold the timestamps it was given (its pure builder does)
            continue
        buf = build_peer_v2(builder_cls, specs, codec, transactional=transactional,
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=base_sequence)
        check_we_read_peer_v2(buf, specs, codec, transactional=transactional,
                              producer_id=producer_id, producer_epoch=producer_epoch,
                              base_sequence=base_sequence, leader_epoch=-1)


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
@ORACLE_SETTINGS
@given(specs=peer_inputs(compressible_values=True), transactional=st.booleans())
def test_we_read_kafka_python_v2(kafka_python, codec, specs, transactional):
    _need(kafka_python, codec)
    buf = build_peer_v2(kafka_python.default.DefaultRecordBatchBuilder, specs, codec,
                        transactional=transactional, producer_id=5, producer_epoch=1,
                        base_sequence=0)
    check_we_read_peer_v2(buf, specs, codec, transactional=transactional, producer_id=5,
                          producer_epoch=1, base_sequence=0, leader_epoch=0)


def _peer_offsets(magic, codec, n):
    """Offsets to hand a legacy builder: v0 inner offsets are absolute, so any increasing
    run works; v1 inner offsets are relative to a wrapper the producer leaves at 0, so
    they must be 0..n-1; uncompressed messages carry any offsets."""
    if magic == 1 and codec != NONE:
        return list(range(n))
    return [100 + 3 * i for i in range(n)]


def check_we_read_peer_legacy(buf, magic, specs, codec, offsets):
    batches = list(R.iter_batches(buf))
    if codec == NONE:
        assert len(batches) == len(specs)
    else:
        (wrapper,) = batches
        assert wrapper.compression == codec
        assert wrapper.last_offset == 0  # the producers leave the wrapper offset at 0
    expected = [(off, -1 if magic == 0 else s.timestamp, -1 if magic == 0 else 0,
                 s.key, s.value, []) for off, s in zip(offsets, specs)]
    assert ks_records(buf) == expected
    cols = R.decode_columns(buf)
    assert cols.offset.tolist() == list(offsets)
    assert [cols.value(i) for i in range(len(specs))] == [s.value for s in specs]


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4], ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", [0, 1])
@ORACLE_SETTINGS
@given(specs=peer_inputs(with_headers=False, compressible_values=True))
def test_we_read_kafka_python_legacy(kafka_python, magic, codec, specs):
    _need(kafka_python, codec)
    offsets = _peer_offsets(magic, codec, len(specs))
    buf = build_peer_legacy(kafka_python.legacy.LegacyRecordBatchBuilder, magic, specs, codec,
                            offsets)
    check_we_read_peer_legacy(buf, magic, specs, codec, offsets)


@pytest.mark.parametrize("magic, codec", AIOKAFKA_LEGACY, ids=LEGACY_IDS)
@ORACLE_SETTINGS
@given(specs=peer_inputs(with_headers=False, compressible_values=True))
def test_we_read_aiokafka_legacy(aiokafka_records, magic, codec, specs):
    _need(aiokafka_records, codec)
    offsets = _peer_offsets(magic, codec, len(specs))
    for _name, _, _, _, builder_cls in _aiokafka_impls(aiokafka_records):
        buf = build_peer_legacy(builder_cls, magic, specs, codec, offsets)
        check_we_read_peer_legacy(buf, magic, specs, codec, offsets)


# -- byte identity ------------------------------------------------------------------------------


@st.composite
def identity_cases(draw):
    return dict(
        specs=draw(peer_inputs()),
        transactional=draw(st.booleans()),
        producer_id=draw(producer_ids),
        producer_epoch=draw(st.integers(I16_MIN, I16_MAX)),
        base_sequence=draw(base_sequences),
    )


def ours_v2(case):
    return R.encode_batch(
        [(s.key, s.value, s.timestamp, list(s.headers)) for s in case["specs"]],
        base_offset=0, partition_leader_epoch=-1, is_transactional=case["transactional"],
        producer_id=case["producer_id"], producer_epoch=case["producer_epoch"],
        base_sequence=case["base_sequence"])


@scaled(0.6)
@given(case=identity_cases())
def test_v2_bytes_identical_to_aiokafka(aiokafka_records, case):
    ours = ours_v2(case)
    for name, _, _, builder_cls, _ in _aiokafka_impls(aiokafka_records):
        if name == "cython" and case["specs"][0].timestamp == -1:
            # aiokafka's Cython builder keeps -1 as its "no first record yet" sentinel, so
            # a first timestamp of -1 (NO_TIMESTAMP) makes it take the second record's
            # time as the base; its pure builder and kafka-python do what Kafka does
            continue
        theirs = build_peer_v2(builder_cls, case["specs"], transactional=case["transactional"],
                               producer_id=case["producer_id"],
                               producer_epoch=case["producer_epoch"],
                               base_sequence=case["base_sequence"])
        assert ours == theirs, name


@scaled(0.6)
@given(case=identity_cases())
def test_v2_bytes_identical_to_kafka_python_but_leader_epoch(kafka_python, case):
    ours = ours_v2(case)
    theirs = build_peer_v2(kafka_python.default.DefaultRecordBatchBuilder, case["specs"],
                           transactional=case["transactional"],
                           producer_id=case["producer_id"],
                           producer_epoch=case["producer_epoch"],
                           base_sequence=case["base_sequence"])
    assert theirs[12:16] == b"\x00\x00\x00\x00"  # kafka-python writes leader epoch 0
    assert ours[12:16] == b"\xff\xff\xff\xff"
    assert ours[:12] + ours[16:] == theirs[:12] + theirs[16:]


def test_v2_bytes_identical_fixed_cases(aiokafka_records, kafka_python):
    cases = [
        [RecSpec(b"key", b"value", 1_700_000_000_000, ())],
        [RecSpec(None, None, 0, ()), RecSpec(b"", b"", 0, ())],
        [RecSpec(b"k", b"v" * 200, 5, (("h1", b"a"), ("\U0001F600", None), ("", b""))),
         RecSpec(b"k2", None, 3, ()), RecSpec(None, b"x" * 20000, 9, (("big", b"y" * 300),))],
    ]
    for specs in cases:
        case = dict(specs=specs, transactional=False, producer_id=-1, producer_epoch=-1,
                    base_sequence=-1)
        ours = ours_v2(case)
        aio = build_peer_v2(aiokafka_records.default.DefaultRecordBatchBuilder, specs)
        kp = build_peer_v2(kafka_python.default.DefaultRecordBatchBuilder, specs)
        assert ours == aio
        assert ours[:12] + ours[16:] == kp[:12] + kp[16:]


@pytest.mark.parametrize("magic", [0, 1])
@scaled(0.4)
@given(specs=peer_inputs(with_headers=False), base=st.integers(0, 1 << 50))
def test_legacy_bytes_identical_to_peers(kafka_python, aiokafka_records, magic, specs, base):
    ours = R.encode_batch([(s.key, s.value, s.timestamp) for s in specs], magic=magic,
                          base_offset=base)
    offsets = [base + i for i in range(len(specs))]
    peers = [("kafka-python", kafka_python.legacy.LegacyRecordBatchBuilder)]
    peers += [(f"aiokafka-{name}", cls)
              for name, _, _, _, cls in _aiokafka_impls(aiokafka_records)]
    for name, builder_cls in peers:
        assert ours == build_peer_legacy(builder_cls, magic, specs, NONE, offsets), name
