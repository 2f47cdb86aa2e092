"""The Spark source's options, planning and split reader, without a Spark session.

The oracle for offsets and timestamps is kafkastore's own ``Log`` (tested against
Kafka's rules elsewhere); the oracle for records is ``iter_records`` over the
segment files. Needs pyarrow for the reader (the ``test`` extra installs it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random

import numpy as np
import pytest

from kafkastore.errors import ConfigError, KafkaStoreError, OffsetOutOfRangeError
from kafkastore.manager import LogManager
from kafkastore.records import encode_control_batch, iter_records
from kafkastore.spark.layout import scan as scan_layouts
from kafkastore.spark.options import (
    offsets_json,
    parse_offsets_json,
    parse_read_options,
    parse_write_options,
)
from kafkastore.spark.planner import Pushdown, plan_splits, rate_limit, resolve_ranges
from kafkastore.topic import TopicPartition
from kafkastore.types import ControlRecordType

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
from kafkastore.spark.reader import arrow_schema, read_split  # noqa: E402

T0 = 1_700_000_000_000


def opts(streaming=False, **kw):
    base = {"path": "/nowhere"}
    if "assign" not in kw and "subscribePattern" not in kw:
        base["subscribe"] = "t"
    base.update({k: (json.dumps(v) if isinstance(v, dict) else str(v)) for k, v in kw.items()})
    return parse_read_options(base, streaming=streaming)


# -- options ----------------------------------------------------------------------------


@pytest.mark.parametrize("kw, message", [
    ({"subscribe": None}, "One of the following options must be specified"),
    ({"assign": {"t": [0]}}, "Only one of the following options"),
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch"),
    ({"startingOffsets": {"t": {"0": -1}}}, "startingOffsets for t-0 can't be latest"),
    ({"endingOffsets": {"t": {"0": -2}}}, "endingOffsets for t-0 can't be earliest"),
    ({"kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
    ({"kafka.value.deserializer": "x"}, "'value.deserializer' is not supported"),
    ({"minPartitions": 0}, "Invalid value '0' for option 'minPartitions'"),
    ({"maxRecordsPerPartition": -3}, "option 'maxRecordsPerPartition'"),
    ({"kafka.isolation.level": "read_commited"},
     "Invalid value 'read_commited' for kafka.isolation.level"),
    ({"startingOffsets": "[1]"}, "Expected e.g."),
    ({"failOnDataLoss": "maybe"}, "must be true or false"),
])
def test_batch_options_rejected_as_spark_kafka_does(kw, message):
    raw = {"path": "/x", "subscribe": "t"}
    for k, v in kw.items():
        if v is None:
            raw.pop(k, None)
        else:
            raw[k] = json.dumps(v) if isinstance(v, dict) else str(v)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_read_options(raw, streaming=False)


@pytest.mark.parametrize("name", ["endingOffsets", "endingOffsetsByTimestamp",
                                  "endingTimestamp"])
def test_streaming_rejects_ending_options(name):
    with pytest.raises(ConfigError, match="Ending offset not valid in streaming"):
        parse_read_options({"path": "/x", "subscribe": "t", name: "latest"}, streaming=True)


def test_trigger_limits():
    with pytest.raises(ConfigError, match="higher than the maxOffsetsPerTrigger"):
        opts(True, maxOffsetsPerTrigger=10, minOffsetsPerTrigger=20)
    assert opts(True, maxOffsetsPerTrigger=10).max_offsets_per_trigger == 10


def test_defaults_and_precedence():
    assert opts().starting.kind == "earliest" and opts().ending.kind == "latest"
    assert opts(True).starting.kind == "latest"
    o = opts(startingTimestamp=5, startingOffsetsByTimestamp={"t": {"0": 7}},
             startingOffsets={"t": {"0": 3}})
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 5)
    o = opts(startingOffsetsByTimestamp={"t": {"0": 7}}, startingOffsets={"t": {"0": 3}})
    assert o.starting.timestamps == {("t", 0): 7}
    # case-insensitive names, as Spark's option map
    o = parse_read_options({"PATH": "/x", "SUBSCRIBE": "a,b", "INCLUDEHEADERS": "TRUE"},
                           streaming=False)
    assert o.topics == ("a", "b") and o.include_headers


def test_offsets_json_round_trip_is_sparks_form():
    offsets = {TopicPartition("b", 10): 5, TopicPartition("b", 2): 1, TopicPartition("a", 0): 0}
    obj = offsets_json(offsets)
    assert json.dumps(obj) == '{"a": {"0": 0}, "b": {"2": 1, "10": 5}}'
    assert parse_offsets_json(obj) == {tuple(k): v for k, v in offsets.items()}


def test_write_options():
    w = parse_write_options({"path": "/x", "topic": "t", "partitions": "3",
                             "kafka.compression.type": "lz4", "topic.segment.bytes": "1048576"},
                            streaming=False)
    assert (w.topic, w.partitions, w.compression) == ("t", 3, "lz4")
    assert w.topic_config == {"segment.bytes": "1048576"}
    with pytest.raises(Exception, match="Topic name is invalid"):
        parse_write_options({"path": "/x", "topic": "bad/name"}, streaming=False)
    with pytest.raises(Exception):
        parse_write_options({"path": "/x", "compression": "brotli"}, streaming=False)


# -- a log directory to plan over -----------------------------------------------------------


def _records(p, b, n, rng):
    return [(None if rng.random() < 0.1 else f"k{rng.randrange(50)}".encode(),
             None if rng.random() < 0.05 else os.urandom(rng.randrange(0, 40)),
             T0 + b * 1000 + rng.randrange(-500, 500)) for _ in range(n)]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Two topics; ``orders`` has 3 partitions of several segments with mixed codecs,
    a control batch, and timestamps that go backwards inside batches."""
    root = str(tmp_path_factory.mktemp("logs"))
    rng = random.Random(7)
    with LogManager(root, {"index.interval.bytes": 256}, background=False) as m:
        for p in range(3):
            log = m.get_or_create("orders", p)
            for b in range(40):
                log.append(_records(p, b, rng.randrange(1, 60), rng),
                           compression=["none", "lz4", "zstd", "gzip"][b % 4])
                if b == 20:
                    log.append_batches(encode_control_batch(
                        ControlRecordType.COMMIT, base_offset=log.log_end_offset,
                        producer_id=7, producer_epoch=0, coordinator_epoch=1,
                        timestamp=T0 + 20_500), assign_offsets=False)
                if b % 9 == 8:
                    log.roll()
        other = m.get_or_create("payments", 0)
        other.append([(b"a", b"b", T0)])
    return root


def expected_records(root, tp, lo=0, hi=1 << 62):
    out = []
    d = os.path.join(root, f"{tp.topic}-{tp.partition}")
    for name in sorted(os.listdir(d)):
        if name.endswith(".log"):
            with open(os.path.join(d, name), "rb") as f:
                for r in iter_records(f.read()):
                    if lo <= r.offset < hi:
                        out.append((r.offset, r.timestamp, r.key, r.value))
    return out


def read_all(splits, names=("offset", "timestamp", "key", "value"), **kw):
    rows = {}
    for s in splits:
        for batch in read_split(s, list(names), **kw):
            assert batch.schema == arrow_schema(list(names))
            d = batch.to_pydict()
            for i in range(batch.num_rows):
                ts = d["timestamp"][i]
                ms = (ts - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) \
                    // dt.timedelta(milliseconds=1)
                rows.setdefault(TopicPartition(s.topic, s.partition), []).append(
                    (d["offset"][i], ms, d["key"][i], d["value"][i]))
    return rows


def test_layout_matches_the_log(logdir):
    layouts = scan_layouts(logdir)
    assert sorted(layouts) == [TopicPartition("orders", p) for p in range(3)] + [
        TopicPartition("payments", 0)]
    with LogManager(logdir, background=False) as m:
        for tp, layout in layouts.items():
            log = m.get(tp.topic, tp.partition)
            assert layout.log_end_offset == log.log_end_offset
            assert layout.log_start_offset == log.log_start_offset
            for ts in [T0 - 10**6, T0, T0 + 7_250, T0 + 20_400, T0 + 39_400, T0 + 10**7]:
                assert layout.offset_for_timestamp(ts) == log.offset_for_timestamp(ts), \
                    (tp, ts)


@pytest.mark.parametrize("max_bytes", [1 << 30, 2000, 300])
def test_splits_cover_each_range_exactly_once(logdir, max_bytes):
    o = opts(subscribe="orders", maxBytesPerPartition=max_bytes)
    layouts = scan_layouts(logdir)
    ranges = resolve_ranges(o, layouts)
    splits = plan_splits(o, layouts, ranges)
    if max_bytes == 300:
        assert len(splits) > 3 * 10
    got = read_all(splits)
    for tp in ranges:
        assert got[tp] == expected_records(logdir, tp)
    # adjacent, disjoint offset ranges
    for tp in ranges:
        bounds = [(sl.lo, sl.hi) for s in splits if (s.topic, s.partition) == tp
                  for sl in s.slices]
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))


def test_min_partitions_and_max_records(logdir):
    layouts = scan_layouts(logdir)
    o = opts(subscribe="orders", minPartitions=20)
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    assert len(splits) >= 18   # Spark-Kafka's proportional rule is approximate
    assert read_all(splits) == {tp: expected_records(logdir, tp) for tp in
                                resolve_ranges(o, layouts)}
    o = opts(subscribe="orders", maxRecordsPerPartition=97, splitBy="topicpartition")
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    assert all(s.records <= 97 for s in splits)
    assert read_all(splits) == {tp: expected_records(logdir, tp) for tp in
                                resolve_ranges(o, layouts)}
    o = opts(subscribe="orders", splitBy="topicpartition")
    assert len(plan_splits(o, layouts, resolve_ranges(o, layouts))) == 3


def test_offsets_and_timestamps_options(logdir):
    layouts = scan_layouts(logdir)
    leo = {tp: layouts[tp].log_end_offset for tp in layouts}
    o = opts(subscribe="orders", startingOffsets={"orders": {"0": 10, "1": -2, "2": 5}},
             endingOffsets={"orders": {"0": 50, "1": 7, "2": -1}})
    r = resolve_ranges(o, layouts)
    assert r == {TopicPartition("orders", 0): (10, 50), TopicPartition("orders", 1): (0, 7),
                 TopicPartition("orders", 2): (5, leo[TopicPartition("orders", 2)])}
    with pytest.raises(ConfigError, match="you must specify all TopicPartitions"):
        resolve_ranges(opts(subscribe="orders", startingOffsets={"orders": {"0": 1}}), layouts)
    with pytest.raises(ConfigError, match="is after the ending offset"):
        resolve_ranges(opts(assign={"orders": [0]}, startingOffsets={"orders": {"0": 30}},
                            endingOffsets={"orders": {"0": 20}}), layouts)
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss"):
        resolve_ranges(opts(assign={"orders": [0]},
                            endingOffsets={"orders": {"0": 10**9}}), layouts)
    r = resolve_ranges(opts(assign={"orders": [0]}, failOnDataLoss="false",
                            endingOffsets={"orders": {"0": 10**9}}), layouts)
    assert r[TopicPartition("orders", 0)][1] == leo[TopicPartition("orders", 0)]
    with LogManager(logdir, background=False) as m:
        for ts in (T0 + 3_000, T0 + 25_100):
            r = resolve_ranges(opts(subscribe="orders", startingTimestamp=ts,
                                    endingTimestamp=ts + 5_000), layouts)
            for tp, (a, b) in r.items():
                log = m.get(tp.topic, tp.partition)
                assert a == log.offset_for_timestamp(ts).offset
                assert b == log.offset_for_timestamp(ts + 5_000).offset
    with pytest.raises(ConfigError, match="No offset matched"):
        resolve_ranges(opts(subscribe="orders", startingTimestamp=T0 + 10**8), layouts)
    r = resolve_ranges(opts(subscribe="orders", startingTimestamp=T0 + 10**8,
                            startingOffsetsByTimestampStrategy="latest"), layouts)
    assert all(a == b == leo[tp] for tp, (a, b) in r.items())


def test_pushdown_narrows_exactly(logdir):
    layouts = scan_layouts(logdir)
    o = opts(subscribePattern="ord.*")
    pd = Pushdown()
    pd.allow_in("partitions", [1, 2])
    pd.offsets_at_least(30)
    pd.offsets_below(90)
    r = resolve_ranges(o, layouts, pd)
    assert r == {TopicPartition("orders", 1): (30, 90), TopicPartition("orders", 2): (30, 90)}
    got = read_all(plan_splits(o, layouts, r))
    assert got[TopicPartition("orders", 1)] == expected_records(
        logdir, TopicPartition("orders", 1), 30, 90)
    pd = Pushdown(offset_in=frozenset({3, 77, 10**6}))
    pd.allow_in("topics", ["orders"])
    pd.allow_in("partitions", [0])
    r = resolve_ranges(o, layouts, pd)
    got = read_all(plan_splits(o, layouts, r), offset_in=pd.offset_in)
    assert [row[0] for row in got[TopicPartition("orders", 0)]] == [3, 77]


def test_timestamp_pushdown_only_skips_what_cannot_match(logdir):
    layouts = scan_layouts(logdir)
    o = opts(subscribe="orders")
    ts = T0 + 22_000
    pd = Pushdown()
    pd.timestamp_at_least(dt.datetime.fromtimestamp(ts / 1000, dt.timezone.utc))
    assert pd.ts_min == ts
    r = resolve_ranges(o, layouts, pd)
    got = read_all(plan_splits(o, layouts, r), ts_min=pd.ts_min)
    for tp in r:
        want = [x for x in expected_records(logdir, tp) if x[1] >= ts]
        assert [x for x in got.get(tp, []) if x[1] >= ts] == want
        # and it did skip: fewer rows than a full read
        assert len(got.get(tp, [])) < len(expected_records(logdir, tp))


def test_rate_limit_is_proportional_like_spark_kafka(logdir):
    layouts = scan_layouts(logdir)
    a, b = TopicPartition("orders", 0), TopicPartition("orders", 1)
    out = rate_limit({a: 0, b: 0}, {a: 300, b: 100}, layouts, 40)
    assert out == {a: 30, b: 10}
    out = rate_limit({a: 0, b: 99}, {a: 1000, b: 100}, layouts, 10)
    assert out[b] == 100 and out[a] == 9   # a fraction below 1 rounds up, as Spark does


def test_a_replaced_segment_is_read_from_its_start(logdir, tmp_path):
    import shutil
    root = str(tmp_path / "copy")
    shutil.copytree(logdir, root)
    o = opts(assign={"orders": [0]}, maxBytesPerPartition=300)
    layouts = scan_layouts(root)
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    late = [s for s in splits if s.slices[0].position > 0]
    assert late
    # the cleaner replaces the file: same name, same offsets, other positions (here the
    # first batch is gone, so every later batch sits earlier in the file)
    from kafkastore.records import scan_batches
    sl = late[0].slices[0]
    with open(sl.path, "rb") as f:
        data = f.read()
    first = int(scan_batches(data).size[0])
    with open(sl.path, "wb") as f:
        f.write(data[first:])
    want = [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(data[first:])
            if sl.lo <= r.offset < sl.hi]
    assert want
    assert read_all([late[0]])[TopicPartition("orders", 0)] == want


def test_corrupt_bytes_raise_with_the_path(logdir, tmp_path):
    import shutil
    root = str(tmp_path / "copy")
    shutil.copytree(logdir, root)
    path = os.path.join(root, "orders-0", "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 8)
    o = opts(assign={"orders": [0]})
    layouts = scan_layouts(root)
    with pytest.raises(KafkaStoreError) as info:
        read_all(plan_splits(o, layouts, resolve_ranges(o, layouts)))
    assert info.value.path == path


def test_arrow_types_match_sparks(logdir):
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    schema = arrow_schema(names)
    assert [str(f.type) for f in schema] == ["binary", "binary", "string", "int32", "int64",
                                             "timestamp[us, tz=UTC]", "int32"]
    assert all(f.nullable for f in schema)
    o = opts(assign={"payments": [0]})
    layouts = scan_layouts(logdir)
    (split,) = plan_splits(o, layouts, resolve_ranges(o, layouts))
    (batch,) = read_split(split, names)
    assert batch.to_pylist() == [{
        "key": b"a", "value": b"b", "topic": "payments", "partition": 0, "offset": 0,
        "timestamp": dt.datetime.fromtimestamp(T0 / 1000, dt.timezone.utc),
        "timestampType": 0}]
    assert np.asarray(batch.column("offset")).dtype == np.int64


def test_headers_column(tmp_path):
    """``headers``: null for a record without headers, null values kept, and a key that
    is not UTF-8 decoded as Spark-Kafka's ``new String(bytes, UTF_8)`` does."""
    root = str(tmp_path)
    with LogManager(root, background=False) as m:
        m.get_or_create("h", 0).append([
            (b"k", b"v", T0, ()),
            (b"k", b"v", T0, (("a", b"1"), ("b", None))),
            (b"k", b"v", T0, ((b"\xff\xfe-bad", b"x"),)),
        ])
    o = opts(assign={"h": [0]}, includeHeaders="true")
    layouts = scan_layouts(root)
    (split,) = plan_splits(o, layouts, resolve_ranges(o, layouts))
    (batch,) = read_split(split, ["offset", "headers"])
    assert batch.schema == arrow_schema(["offset", "headers"])
    assert batch.column("headers").to_pylist() == [
        None,
        [{"key": "a", "value": b"1"}, {"key": "b", "value": None}],
        [{"key": "\ufffd\ufffd-bad", "value": b"x"}],
    ]


@pytest.mark.parametrize("cut", [1, 3, 7, 50])
def test_cuts_inside_legacy_wrappers_lose_nothing(tmp_path, cut):
    """A compressed magic 0/1 wrapper does not say its first offset; a split boundary
    inside one must still give each side its records (the mixed-magic vector segment)."""
    import shutil

    from _vectors import VECTORS
    if VECTORS is None:
        pytest.skip("the Kafka reference vectors are not available")
    src = VECTORS / "segments" / "s2_mixed_magic"
    dst = tmp_path / "mixed-0"
    dst.mkdir()
    for f in src.iterdir():
        if f.suffix in (".log", ".index", ".timeindex"):
            shutil.copy(f, dst / f.name)
    o = opts(assign={"mixed": [0]}, maxRecordsPerPartition=cut)
    layouts = scan_layouts(str(tmp_path))
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    assert len(splits) > 1
    got = read_all(splits)[TopicPartition("mixed", 0)]
    assert got == expected_records(str(tmp_path), TopicPartition("mixed", 0))


def test_an_arrow_batch_past_2_gib_of_values_is_a_clear_error():
    """Found by the linter while adding read_committed: the guard named an exception it
    never imported, so a batch of more than 2 GiB of keys or values died with NameError."""
    import numpy as np

    from kafkastore.errors import KafkaStoreError
    from kafkastore.spark.reader import _binary

    offsets = np.array([0, 1 << 31], dtype=np.int64)
    with pytest.raises(KafkaStoreError, match="lower the arrowBatchRows option"):
        _binary(None, None, offsets, np.zeros(0, np.uint8), None, 0, 1)



@pytest.mark.parametrize("magic", [2, 1, 0])
def test_a_slice_start_is_trusted_only_where_the_planned_batch_still_is(tmp_path, magic):
    """``_verified_start`` reads the header at a slice's planned position: the batch the
    index promised there (v2, or a legacy wrapper whose offset field is its last offset)
    is skipped when it ends before the slice and read when it does not; any other batch
    there (the cleaner replaced the file) sends the read back to byte 0."""
    from kafkastore.records import encode_batch
    from kafkastore.spark.planner import SegmentSlice
    from kafkastore.spark.reader import _UNKNOWN, _verified_start
    from kafkastore.storage import LocalStorage

    codec = "none" if magic == 2 else "gzip"
    filler = encode_batch([(b"k", b"a")] * 2, base_offset=0, magic=magic, compression=codec)
    promised = encode_batch([(b"k", b"b")] * 3, base_offset=2, magic=magic, compression=codec)
    after = encode_batch([(b"k", b"c")] * 2, base_offset=5, magic=magic, compression=codec)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(filler + promised + after)
    at = len(filler)
    reader = LocalStorage().open(str(path))
    try:
        def start(expect_last, lo):
            return _verified_start(reader, SegmentSlice(str(path), 0, at, expect_last, lo, 7))

        assert start(4, 5) == (at + len(promised), 4)   # ends before the slice: skipped
        assert start(4, 3) == (at, _UNKNOWN)            # holds the slice's first offset
        assert start(9, 5) == (0, _UNKNOWN)             # not the promised batch
    finally:
        reader.close()
