"""Planning a Spark read of a tiered copy under a log directory, without Spark.

:class:`kafkastore.spark.tiered.UnionLog` is given two ordinary partition directories
made from one log: a "remote" one holding its first segments and a "local" one holding
the last ones (overlapping or not), as a tiered copy and the broker's log directory hold
them. The oracle is the whole log, read with ``iter_records``. The chunk cuts are
checked by counting which chunks each task's ranged reads touch.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import uuid

import pytest

from kafkastore.errors import OffsetOutOfRangeError
from kafkastore.log import Log
from kafkastore.log_view import ReadOnlyLog
from kafkastore.records import iter_records
from kafkastore.spark.options import parse_read_options
from kafkastore.spark.planner import Pushdown, plan_splits, resolve_ranges
from kafkastore.spark.tiered import UnionLog
from kafkastore.storage import LocalStorage
from kafkastore.topic import TopicPartition

pytest.importorskip("pyarrow", reason="pyarrow is not installed")
from kafkastore.spark.reader import read_split  # noqa: E402

T0 = 1_700_000_000_000
TP = TopicPartition("orders", 0)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """One partition of 8 segments, 40 batches of 1..9 records each."""
    d = tmp_path_factory.mktemp("full") / "orders-0"
    log = Log.open(str(d), {"index.interval.bytes": 64})
    n = 0
    for b in range(40):
        log.append([(f"k{n + i}".encode(), os.urandom(20 + (n + i) % 50), T0 + (n + i) * 10)
                    for i in range(1 + b % 9)], compression=["none", "zstd"][b % 2])
        n += 1 + b % 9
        if b % 5 == 4:
            log.roll()
    log.close()
    return str(d)


def _bases(d):
    return sorted(int(f[:-4]) for f in os.listdir(d) if f.endswith(".log"))


def _copy(full, dest, bases):
    os.makedirs(dest)
    for f in os.listdir(full):
        stem, _, ext = f.partition(".")
        if stem.isdigit() and int(stem) in bases and ext in ("log", "index", "timeindex"):
            shutil.copy(os.path.join(full, f), os.path.join(dest, f))
    return dest


def _records(d, lo=0, hi=1 << 62):
    out = []
    for base in _bases(d):
        with open(os.path.join(d, f"{base:020d}.log"), "rb") as f:
            out.extend((r.offset, r.value) for r in iter_records(f.read()) if lo <= r.offset < hi)
    return out


def union(full, tmp_path, remote_segs, local_segs, *, gaps=(), chunk=None, checkpoint=None):
    bases = _bases(full)
    remote = _copy(full, str(tmp_path / "remote" / "orders-0"), [bases[i] for i in remote_segs])
    local = _copy(full, str(tmp_path / "local" / "orders-0"), [bases[i] for i in local_segs]) \
        if local_segs else None

    def starts(seg):
        return list(range(0, seg.size, chunk))
    return UnionLog(TP, remote=lambda: ReadOnlyLog.open(remote),
                    local=ReadOnlyLog.open(local) if local else None,
                    gaps=lambda: list(gaps), chunk_starts=starts if chunk else None,
                    checkpoint=checkpoint, uri="mem://copy")


def opts(**kw):
    base = {"tieredStorage": "/copy", "subscribe": "orders"}
    base.update({k: json.dumps(v) if isinstance(v, dict) else str(v) for k, v in kw.items()})
    return parse_read_options(base, streaming=False)


class Counting(LocalStorage):
    """LocalStorage that records the byte ranges each open file is read at."""

    def __init__(self):
        super().__init__()
        self.ranges = []

    def _open(self, path, size=None):
        reader = super()._open(path, size)
        outer = self

        class R(type(reader)):
            pass
        reader.__class__ = R
        read = reader.read

        def counted(position, n):
            data = read(position, n)
            outer.ranges.append((path, position, position + len(data)))
            return data
        reader.read = counted
        reader.readinto = lambda buf, pos: _into(counted, buf, pos)
        return reader


def _into(read, buf, pos):
    data = read(pos, memoryview(buf).nbytes)
    memoryview(buf)[:len(data)] = data
    return len(data)


def read_rows(splits, **kw):
    rows = []
    for s in splits:
        for batch in read_split(s, ["offset", "value"], storage=LocalStorage(),
                                tiered_storage=LocalStorage(), **kw):
            d = batch.to_pydict()
            rows.extend(zip(d["offset"], d["value"]))
    return sorted(rows)


def plan(layout, **kw):
    o = opts(**kw)
    layouts = {TP: layout}
    return plan_splits(o, layouts, resolve_ranges(o, layouts)), o


@pytest.mark.parametrize("kw", [{}, {"maxBytesPerPartition": 700},
                                {"minPartitions": 13}, {"maxRecordsPerPartition": 17},
                                {"splitBy": "topicpartition"}])
@pytest.mark.parametrize("remote_segs, local_segs", [
    ((0, 1, 2, 3, 4, 5), (4, 5, 6, 7)),     # overlap: the local part wins
    ((0, 1, 2, 3), (4, 5, 6, 7)),           # adjacent
    ((0, 1, 2, 3, 4, 5, 6, 7), ()),         # the copy alone
])
def test_the_union_is_the_whole_log_once(full, tmp_path, remote_segs, local_segs, kw):
    layout = union(full, tmp_path, remote_segs, local_segs, chunk=256)
    splits, _ = plan(layout, **kw)
    assert read_rows(splits) == _records(full)
    assert layout.log_start_offset == 0
    tiered = [sl for s in splits for sl in s.slices if sl.tiered]
    assert tiered and all(sl.expect_last == -1 for sl in tiered)
    if local_segs:
        L = _bases(full)[local_segs[0]]
        assert all(sl.lo < L for sl in tiered)
        assert all(sl.lo >= L for s in splits for sl in s.slices if not sl.tiered)


def test_offsets_and_timestamps_through_the_union(full, tmp_path):
    layout = union(full, tmp_path, (0, 1, 2, 3, 4, 5), (4, 5, 6, 7), chunk=256)
    whole = ReadOnlyLog.open(full)
    for ts in (T0, T0 + 155, T0 + 1_234, T0 + 1_870, T0 + 10**6):
        assert layout.offset_for_timestamp(ts) == whole.offset_for_timestamp(ts), ts
    assert layout.fetch_end_offset() == whole.log_end_offset
    splits, _ = plan(layout, startingOffsets={"orders": {"0": 33}},
                     endingTimestamp=T0 + 1_500)
    end = whole.offset_for_timestamp(T0 + 1_500).offset
    assert read_rows(splits) == _records(full, 33, end)
    pd = Pushdown()
    pd.offsets_at_least(12)
    pd.ts_min = T0 + 700
    o = opts()
    r = resolve_ranges(o, {TP: layout}, pd)
    assert r[TP][0] == whole.offset_for_timestamp(T0 + 700).offset


@pytest.mark.parametrize("where", ["tail", "inside"])
def test_a_gap_fails_the_read_or_is_skipped(full, tmp_path, where):
    bases = _bases(full)
    if where == "tail":    # the copy ends before the local log starts
        layout = union(full, tmp_path, (0, 1, 2), (4, 5, 6, 7))
        lo, hi = bases[3], bases[4]
        why = f"ends at offset {lo} and the log directory starts at {hi}"
    else:                  # the resolution found a gap between remote segments
        lo, hi = bases[1] + 2, bases[2]
        layout = union(full, tmp_path, (0, 1, 2, 3, 4, 5), (4, 5, 6, 7), gaps=[(lo, hi)])
        why = "the tiered copy mem://copy has no segment holding them"
    with pytest.raises(OffsetOutOfRangeError) as err:
        plan(layout)
    text = str(err.value)
    assert f"Cannot fetch offsets {lo} to {hi - 1} of orders-0" in text and why in text
    assert "failOnDataLoss" in text
    # a range that does not cross the gap reads
    splits, _ = plan(layout, startingOffsets={"orders": {"0": hi}})
    assert read_rows(splits) == _records(full, hi)
    splits, _ = plan(layout, failOnDataLoss="false")
    want = [r for r in _records(full) if not lo <= r[0] < hi]
    assert read_rows(splits) == want or where == "inside"
    if where == "tail":
        assert read_rows(splits) == want


def _chunks_read(storage, chunk):
    per_file = {}
    for path, a, b in storage.ranges:
        if b > a:
            per_file.setdefault(path, set()).update(range(a // chunk, (b - 1) // chunk + 1))
    return per_file


def test_remote_splits_are_cut_at_chunk_starts(full, tmp_path):
    chunk = 512
    layout = union(full, tmp_path, range(8), (), chunk=chunk)
    splits, _ = plan(layout, maxBytesPerPartition=1000)
    tiered = [sl for s in splits for sl in s.slices]
    assert len(tiered) > len(_bases(full))       # segments were cut
    fetched, needed = 0, {}
    for s in splits:
        st = Counting()
        read_split(s, ["offset"], storage=st, tiered_storage=st)
        for path, ids in _chunks_read(st, chunk).items():
            fetched += len(ids)
            needed.setdefault(path, set()).update(ids)
    cuts = sum(1 for sl in tiered if sl.ceiling >= 0)
    # a cut shares at most the one chunk it falls in
    assert fetched <= sum(map(len, needed.values())) + cuts
    for sl in tiered:
        if sl.ceiling >= 0:
            assert sl.ceiling % chunk < 400   # the first index entry after a chunk start
    assert read_rows(splits) == _records(full)


def test_cuts_where_index_entries_start_chunks_share_no_chunk(full, tmp_path):
    """Chunk starts placed at index entries: neighbouring tasks fetch disjoint chunks."""
    layout = union(full, tmp_path, range(8), ())
    views = {}

    def starts(seg):
        pos = views.setdefault(seg.path, layout.offset_index(seg).arrays()[1].tolist())
        return [0] + pos[3::4]
    layout._chunk_starts = starts
    splits, _ = plan(layout, maxBytesPerPartition=600)
    owners = {}
    for k, s in enumerate(splits):
        st = Counting()
        read_split(s, ["offset"], storage=st, tiered_storage=st)
        for path, a, b in st.ranges:
            bounds = starts(next(sg for sg in layout.segments if sg.path == path)) + [1 << 40]
            for i, c in enumerate(bounds[:-1]):
                if a < bounds[i + 1] and b > c:
                    owners.setdefault((path, c), set()).add(k)
    assert sum(1 for sl in (x for s in splits for x in s.slices) if sl.ceiling >= 0) > 3
    assert all(len(tasks) == 1 for tasks in owners.values())
    assert read_rows(splits) == _records(full)


def local_tiered_copy(full, root, segs):
    """The segments ``segs`` of ``full`` as Kafka's LocalTieredStorage lays them out."""
    bases = _bases(full)
    d = root / f"orders-0-{_uid(99)}"
    d.mkdir(parents=True, exist_ok=True)
    for i in segs:
        stem = f"{bases[i]:020d}-{_uid(i + 1)}"
        for ext in (".log", ".index", ".timeindex"):
            shutil.copy(os.path.join(full, f"{bases[i]:020d}{ext}"), d / f"{stem}{ext}")
        (d / f"{stem}.snapshot").write_bytes(b"")
        (d / f"{stem}.leader_epoch_checkpoint").write_text("0\n1\n0 0\n")
    return str(root)


def test_tasks_get_their_partition_of_the_copy_and_only_read_segments(full, tmp_path):
    """The driver lists the copy; a task's storage (pickled, as Spark ships it) holds the
    split's partition and reads the segment objects, nothing else: no listing."""
    from kafkastore.spark.tiered import scan_union, task_storage
    from kafkastore.tiered import open_tiered

    root = local_tiered_copy(full, tmp_path / "copy", range(6))
    _copy(full, str(tmp_path / "local" / "orders-0"), _bases(full)[4:])
    o = parse_read_options({"tieredStorage": root, "subscribe": "orders",
                            "path": str(tmp_path / "local"), "maxBytesPerPartition": "900"},
                           streaming=False)
    layouts = scan_union(o, open_tiered(root))
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    rows, opened = [], []
    for s in splits:
        shipped = task_storage(layouts, s)
        if shipped is None:
            assert not any(sl.tiered for sl in s.slices)
            st = None
        else:
            blob = pickle.dumps(shipped)
            st = pickle.loads(blob)
            assert st.partitions == [TP]
            # the split's segments, not the partition's six
            assert len(blob) < len(pickle.dumps(layouts.copy.tiered_storage)) / 2
            inner = st.storage

            def no_listing(*a):
                raise AssertionError("a task listed the copy")
            inner._list = inner._walk = no_listing
            real_open = inner._open
            inner._open = lambda path, size=None: opened.append(path) or real_open(path, size)
        for batch in read_split(s, ["offset", "value"], storage=LocalStorage(),
                                tiered_storage=st):
            d = batch.to_pydict()
            rows.extend(zip(d["offset"], d["value"]))
    assert sorted(rows) == _records(full)
    assert opened and all(p.endswith(".log") for p in opened)


# -- options ------------------------------------------------------------------------------


def test_tiered_options():
    o = parse_read_options({"tieredStorage": "s3://b/t", "subscribe": "x",
                            "tieredStorage.layout": "Aiven", "tieredStorage.keyPrefix": "p/",
                            "tieredStorage.keyRing": "k1=/a.pem",
                            "tieredStorage.storage.region": "eu-west-1"}, streaming=False)
    assert o.path == "" and o.source == "s3://b/t"
    t = o.tiered
    assert (t.uri, t.layout, t.key_prefix, t.key_ring) == ("s3://b/t", "aiven", "p/", "k1=/a.pem")
    assert t.storage == {"region": "eu-west-1"}
    # the log directory's store settings serve a copy in the same kind of store
    o = parse_read_options({"path": "s3://logs/d", "tieredStorage": "s3://b/t",
                            "subscribe": "x", "storage.region": "us-east-2"}, streaming=False)
    assert o.tiered.storage == {"region": "us-east-2"} and o.storage == {"region": "us-east-2"}
    assert o.tiered.layout is None
    o = parse_read_options({"path": "/local/d", "tieredStorage": "s3://b/t",
                            "subscribe": "x", "storage.retry_attempts": "2"}, streaming=False)
    assert o.tiered.storage == {}


@pytest.mark.parametrize("raw, message", [
    ({"tieredStorage.layout": "aiven"}, "needs the option 'tieredStorage'"),
    ({"tieredStorage": "/c", "tieredStorage.layout": "s3"}, "'aiven' or 'local'"),
    ({"tieredStorage": "/c", "tieredStorage.prefix": "x"}, "Unknown option 'tieredstorage.prefix'"),
    ({"tieredStorage": "s3://b/c", "tieredStorage.storage.endpoint": "x"},
     "Unknown storage option"),
    ({"tieredStorage": "/c", "storage.region": "x"}, "tieredStorage.storage.<name>"),
])
def test_bad_tiered_options(raw, message):
    from kafkastore.errors import ConfigError

    raw = {"subscribe": "x", **raw}
    if "tieredStorage" not in raw:
        raw["path"] = "/logs"
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse_read_options(raw, streaming=False)


def test_an_aiven_copy_is_cut_at_chunks_and_read_by_the_chunks_it_needs(full, tmp_path):
    """A compressed Aiven copy (chunks of 256 bytes): the tasks, each with its shipped
    storage, read every row once and fetch together at most one chunk per cut more than
    the objects (counted by the storage's own stats); an offset range fetches only the
    chunks from its index floor to its index end."""
    from kafkastore.tiered import open_tiered
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    root = str(tmp_path / "copy")
    upload_partition(full, root, topic_id=_uid(99),
                     options=UploadOptions(chunk_size=256, compression=True))
    copy = open_tiered(root)
    segs = {rs.start_offset: rs.manifest.chunk_index for rs in copy.resolution(TP).segments}
    layout = ReadOnlyLog.open(full)

    rows, fetched, splits = _read_copy(root, maxBytesPerPartition=700)
    assert rows == _records(full, hi=max(segs) + 1000)[:len(rows)] and len(rows) > 150
    cuts = [sl for s in splits for sl in s.slices if sl.ceiling >= 0]
    assert len(cuts) > 4 and all(sl.tiered and sl.expect_last == -1 for sl in cuts)
    for sl in cuts:   # at the first index entry at or after a chunk start
        below = max(c.original_position for c in segs[sl.base].chunks()
                    if c.original_position <= sl.ceiling)
        seg = next(g for g in layout.segments if g.base_offset == sl.base)
        entries = layout.offset_index(seg).arrays()[1].tolist()
        assert sl.ceiling in entries and not any(below <= p < sl.ceiling for p in entries)
    biggest = max(c.transformed_size for ix in segs.values() for c in ix.chunks())
    total = sum(ix.transformed_file_size for ix in segs.values())
    assert total <= fetched <= total + len(cuts) * biggest

    lo, hi = 50, 60   # an offset range: its chunks only, by the local index
    seg = [g for g in layout.segments if g.base_offset <= lo][-1]
    floor, _ = layout.floor_position(seg, lo)
    end = layout.end_position(seg, hi)
    index = segs[seg.base_offset]
    needed = sum(c.transformed_size for c in index.chunks_for_range(floor, end - floor))
    rows, fetched, _ = _read_copy(root, startingOffsets={"orders": {"0": lo}},
                                  endingOffsets={"orders": {"0": hi}})
    assert rows == _records(full, lo, hi)
    assert 0 < fetched <= needed < index.transformed_file_size


def _uid(n):
    return base64.urlsafe_b64encode(uuid.UUID(int=n).bytes).decode().rstrip("=")


def _read_copy(root, **kw):
    """Rows, bytes the tasks fetched (each through its shipped storage) and the splits of
    a read of the copy ``root``."""
    from kafkastore.spark.tiered import open_copy, scan_union, task_storage

    o = parse_read_options({"tieredStorage": root, "subscribe": "orders",
                            **{k: json.dumps(v) if isinstance(v, dict) else str(v)
                               for k, v in kw.items()}}, streaming=False)
    layouts = scan_union(o, open_copy(o.tiered))
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    rows, fetched = [], 0
    for s in splits:
        st = pickle.loads(pickle.dumps(task_storage(layouts, s)))
        st.storage.stats.reset()   # (a local storage pickles with the driver's counts)
        for batch in read_split(s, ["offset", "value"], tiered_storage=st):
            d = batch.to_pydict()
            rows.extend(zip(d["offset"], d["value"]))
        fetched += st.storage.stats.bytes_read
    return sorted(rows), fetched, splits


def test_an_encrypted_copy_reads_with_the_key_ring_option(full, tmp_path):
    """``tieredStorage.keyRing`` names the PEM files; the keys travel with the tasks'
    storage (pickled); without the key the read fails naming the key id."""
    from kafkastore.errors import MissingKeyError
    from kafkastore.spark.tiered import open_copy
    from kafkastore.tiered import KeyRing
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    ring, pem = KeyRing.generate("k1")
    (tmp_path / "k1.pem").write_bytes(pem)
    root = str(tmp_path / "copy")
    upload_partition(full, root, topic_id=_uid(99), base_offsets=_bases(full)[:3],
                     options=UploadOptions(chunk_size=512, compression=True, key_ring=ring))
    rows, _, splits = _read_copy(root, **{"tieredStorage.keyRing": f"k1={tmp_path}/k1.pem"},
                                 maxBytesPerPartition=900)
    assert rows == _records(full, hi=_bases(full)[3]) and len(splits) > 3
    o = parse_read_options({"tieredStorage": root, "subscribe": "orders"}, streaming=False)
    with pytest.raises(MissingKeyError) as err:
        open_copy(o.tiered).log(TP).log_end_offset
    assert err.value.key_id == "k1"


def test_the_checkpoints_log_start_offset_bounds_the_copy(full, tmp_path):
    """Kafka keeps a tiered topic's log start offset in the log directory's checkpoint:
    records below it (retention, DeleteRecords) are not read back from the copy."""
    layout = union(full, tmp_path, (0, 1, 2, 3, 4, 5), (4, 5, 6, 7), checkpoint=20)
    assert layout.log_start_offset == 20
    splits, _ = plan(layout)
    assert read_rows(splits) == _records(full, 20)
    with pytest.raises(OffsetOutOfRangeError, match="Cannot fetch offset 5 of orders-0"):
        plan(layout, startingOffsets={"orders": {"0": 5}})


def test_read_committed_through_the_union(tmp_path):
    """Aborted transactions in the copy's part and across the boundary are left out (the
    copy's transaction indexes and the log directory's), as a read_committed read of the
    whole log leaves them out."""
    from kafkastore.spark.tiered import open_copy, scan_union, task_storage
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    d = tmp_path / "full" / "orders-0"
    log = Log.open(str(d), {"segment.bytes": 1500})
    seq = {1: 0, 2: 0}
    for r in range(16):
        for pid in (1, 2):
            log.append([(b"k", f"r{r}-pid{pid}-{i}".encode(), T0 + r) for i in range(3)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq[pid],
                       is_transactional=True)
            seq[pid] += 3
        log.append([(b"plain", f"plain-{r}".encode(), T0 + r)])
        for pid in (1, 2):
            log.append_end_txn_marker(pid, 0, "ABORT" if (r + pid) % 3 == 0 else "COMMIT")
    log.close()
    full = str(d)
    bases = _bases(full)
    assert len(bases) > 4
    half = len(bases) // 2
    root = str(tmp_path / "copy")
    upload_partition(full, root, topic_id=_uid(99), base_offsets=bases[:half + 1],
                     options=UploadOptions(chunk_size=300, compression=True))
    local = _copy(full, str(tmp_path / "local" / "orders-0"), bases[half:])
    for f in os.listdir(full):   # the local part's transaction indexes and snapshots
        stem = f.split(".")[0]
        if f.endswith((".txnindex", ".snapshot")) and int(stem) >= bases[half]:
            shutil.copy(os.path.join(full, f), os.path.join(local, f))
    o = parse_read_options({"tieredStorage": root, "subscribe": "orders",
                            "path": str(tmp_path / "local"), "maxBytesPerPartition": "600",
                            "kafka.isolation.level": "read_committed"}, streaming=False)
    layouts = scan_union(o, open_copy(o.tiered))
    splits = plan_splits(o, layouts, resolve_ranges(o, layouts))
    rows = []
    for s in splits:
        for batch in read_split(s, ["offset", "value"], storage=LocalStorage(),
                                tiered_storage=task_storage(layouts, s)):
            rows.extend(batch.to_pydict()["value"])
    whole = ReadOnlyLog.open(full)
    want = [r.value for r in whole.records(isolation_level="read_committed")]
    assert sorted(rows) == sorted(want) and len(want) < len(list(whole.records()))
    assert any(sl.tiered for s in splits for sl in s.slices)


def test_a_stream_lists_the_copy_again_when_its_listing_lacks_offsets(full, tmp_path):
    """The stream reader (driven here as Spark drives it, without Spark) lists the copy
    once; when local retention deletes segments uploaded since, the next micro-batch
    lists it again instead of reporting them lost."""
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from kafkastore.spark.source import KafkaStoreStreamReader

    bases = _bases(full)
    root = local_tiered_copy(full, tmp_path / "copy", range(4))
    local = _copy(full, str(tmp_path / "local" / "orders-0"), bases[2:])
    o = parse_read_options({"tieredStorage": root, "subscribe": "orders",
                            "path": str(tmp_path / "local"), "startingOffsets": "earliest"},
                           streaming=True)
    reader = KafkaStoreStreamReader(o, ["offset", "value"])
    rows = []

    def batch(start, limit):
        end = reader.latestOffset(start, ReadMaxRows(limit))
        for part in reader.partitions(start, end):
            if isinstance(part, InputPartition) and part.value is not None:
                for b in reader.read(part):
                    d = b.to_pydict()
                    rows.extend(zip(d["offset"], d["value"]))
        return end

    end = batch(reader.initialOffset(), 20)
    first_copy = reader._copy
    end = batch(end, 20)
    assert reader._copy is first_copy          # history read from the first listing
    local_tiered_copy(full, tmp_path / "copy", [4])   # segment 4 uploaded, then
    for f in os.listdir(local):                        # local retention: 2-4 deleted
        if f.split(".")[0].isdigit() and int(f.split(".")[0]) < bases[5]:
            os.unlink(os.path.join(local, f))
    while end != (end := batch(end, 1000)):
        pass
    assert reader._copy is not first_copy
    assert sorted(rows) == _records(full)
    reader.stop()
