"""ReadOnlyLog / ReadOnlyLogDir: Log's reading semantics on any file system (issue 17).

The oracle is kafkastore's own ``Log`` (tested against Kafka's vectors elsewhere) on the
same directory: reads, records, columns, offsets by timestamp (special ones too) and
the log start/end offsets must be equal whether the directory is read locally, through
an fsspec file system (``memory://``) or from moto's S3 server. The storage's counters
show that reads are ranged: an offset lookup fetches index bytes and a bounded range,
not the segment.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from kafkastore.checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkastore.errors import CorruptRecordError, OffsetOutOfRangeError, StorageFileNotFoundError
from kafkastore.log import Log
from kafkastore.log_view import ReadOnlyLog, ReadOnlyLogDir
from kafkastore.storage import open_storage
from kafkastore.topic import TopicPartition

T0 = 1_700_000_000_000
SPECIAL = (-1, -2, -3, -4, -5)


def _write(path, n_batches=240, start=0, segment_bytes=16 << 10):
    log = Log.open(str(path), {"segment.bytes": segment_bytes, "index.interval.bytes": 1024})
    try:
        for i in range(n_batches):
            recs = [(b"k%d" % (j % 7), b"v%d-" % i + b"x" * (30 + j * 3),
                     [("h", b"%d" % j)] if j % 3 == 0 else [])
                    for j in range(1 + i % 6)]
            # timestamps go up with a few steps back, as producers' clocks do
            ts = T0 + i * 1000 - (500 if i % 9 == 0 else 0)
            log.append([(k, v, ts, h) for k, v, h in recs],
                       compression=(None, "lz4", "zstd", "gzip")[i % 4])
        if start:
            log.delete_records(start)
    finally:
        log.close()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    _write(root / "orders-0")
    _write(root / "orders-1", n_batches=200, start=37)
    _write(root / "payments-0", n_batches=0)
    (root / "orders-2-delete").mkdir()                     # being deleted: not listed
    (root / "__cluster_metadata-0").mkdir()                # KRaft metadata: not listed
    OffsetCheckpointFile(str(root / LOG_START_OFFSET_CHECKPOINT_FILE)).write(
        {TopicPartition("orders", 1): 37})
    return root


def _memory_copy(root):
    fsspec = pytest.importorskip("fsspec", reason="fsspec (the test extra) serves memory://")
    pytest.importorskip("pyarrow", reason="pyarrow serves the fsspec bridge")
    mem = fsspec.filesystem("memory")
    base = f"/views-{os.getpid()}-{id(root)}"
    for d, _, files in os.walk(root):
        for f in files:
            src = os.path.join(d, f)
            with open(src, "rb") as a, mem.open(base + "/" + os.path.relpath(src, root),
                                                "wb") as b:
                b.write(a.read())
    return "memory://" + base


@pytest.fixture(params=["local", "memory", "s3"])
def where(request, logdir):
    """``(uri, storage_options)`` of the same directory in three places."""
    if request.param == "local":
        return str(logdir), None
    if request.param == "memory":
        return _memory_copy(logdir), None
    s3 = request.getfixturevalue("s3_server")
    bucket = s3.new_bucket("views")
    return s3.upload_dir(logdir, bucket, "kafka-logs"), s3.options()


def _rec(r):
    return (r.offset, r.timestamp, r.key, r.value, tuple(r.headers))


def test_the_directory_lists_the_live_partitions_with_the_checkpoint(where):
    uri, options = where
    with ReadOnlyLogDir.open(uri, storage_options=options) as d:
        assert d.partitions() == [TopicPartition("orders", 0), TopicPartition("orders", 1),
                                  TopicPartition("payments", 0)]
        assert d.log_start_offsets() == {TopicPartition("orders", 1): 37}
        assert d.log(TopicPartition("orders", 1)).log_start_offset == 37
        with pytest.raises(StorageFileNotFoundError):
            d.log(TopicPartition("orders", 2))


@pytest.mark.parametrize("partition", [0, 1])
def test_reads_equal_the_log(where, logdir, partition):
    uri, options = where
    tp = TopicPartition("orders", partition)
    # the log start offset is the LogManager's checkpoint's, as the view reads it
    log = Log.open(str(logdir / f"orders-{partition}"), log_start_offset=37 * partition)
    try:
        with ReadOnlyLogDir.open(uri, storage_options=options) as d:
            view = d.log(tp)
            assert len(view.segments) == len(log.segments) >= 2
            assert (view.log_start_offset, view.log_end_offset) == (
                log.log_start_offset, log.log_end_offset)
            start, end = log.log_start_offset, log.log_end_offset
            # read: the same batches from every offset, with and without min_one_message
            for offset in sorted({start, start + 1, (start + end) // 2, end - 1, end}):
                for max_bytes, min_one in ((1, True), (700, False), (5000, True)):
                    got = view.read(offset, max_bytes, min_one)
                    want = log.read(offset, max_bytes, min_one)
                    assert len(got) == len(want), (offset, max_bytes)
                    assert got.to_bytes() == want.to_bytes()
            with pytest.raises(OffsetOutOfRangeError):
                view.read(end + 1, 100)
            if start:
                with pytest.raises(OffsetOutOfRangeError):
                    view.read(start - 1, 100)
            # records and columns over ranges, crossing segments
            everything = [_rec(r) for r in _log_records(log)]
            assert [_rec(r) for r in view.records()] == everything
            lo, hi = start + 3, end - 5
            assert [_rec(r) for r in view.records(lo, hi)] == \
                [r for r in everything if lo <= r[0] < hi]
            cols = view.columns(lo, hi, headers=True)
            want = [r for r in everything if lo <= r[0] < hi]
            assert cols.offset.tolist() == [r[0] for r in want]
            assert cols.timestamp.tolist() == [r[1] for r in want]
            assert [cols.value(i) for i in range(len(cols))] == [r[3] for r in want]
            assert [cols.headers(i) for i in range(len(cols))] == [r[4] for r in want]
            assert len(view.columns(hi, hi)) == 0
            # offsets by timestamp: special ones and every kind of target
            targets = list(SPECIAL) + [0, T0 - 1, T0 + 1, T0 + 7_400, T0 + 8_000,
                                       T0 + 60_500, T0 + 10**9]
            for ts in targets:
                assert view.offset_for_timestamp(ts) == log.offset_for_timestamp(ts), ts
    finally:
        log.close()


def _log_records(log):
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(log.read(offset, 1 << 20).batches(validate=True))
        for b in batches:
            if not b.is_control:
                for r in b:
                    if r.offset >= offset:
                        yield r
            offset = max(offset, b.last_offset + 1)


def test_an_empty_partition(where):
    uri, options = where
    with ReadOnlyLogDir.open(uri, storage_options=options) as d:
        view = d.log(TopicPartition("payments", 0))
        assert (view.log_start_offset, view.log_end_offset) == (0, 0)
        assert len(view.read(0, 100)) == 0
        assert list(view.records()) == [] and len(view.columns()) == 0
        assert view.offset_for_timestamp(T0) is None
        assert view.offset_for_timestamp(-3) is None


def test_a_missing_directory_is_a_typed_error(where):
    uri, options = where
    with pytest.raises(StorageFileNotFoundError) as err:
        ReadOnlyLogDir.open(uri.rstrip("/") + "/nothing-here", storage_options=options)
    assert "nothing-here" in str(err.value)


def test_an_offset_lookup_reads_index_bytes_and_a_bounded_range(tmp_path, s3_server):
    # one big segment: a lookup in its middle must not fetch it
    _write(tmp_path / "big-0", n_batches=3000, segment_bytes=64 << 20)
    seg = tmp_path / "big-0" / "00000000000000000000.log"
    size = seg.stat().st_size
    bucket = s3_server.new_bucket("ranged")
    uri = s3_server.upload_dir(tmp_path / "big-0", bucket, "big-0")
    storage, path = open_storage(uri, s3_server.options())
    view = ReadOnlyLog.open(path, storage=storage)
    log = Log.open(str(tmp_path / "big-0"))
    try:
        leo = view.log_end_offset
        assert leo == log.log_end_offset
        storage.stats.reset()
        target = leo // 2
        got = view.read(target, 4096).to_bytes()
        assert got == log.read(target, 4096).to_bytes()
        index_bytes = (tmp_path / "big-0" / "00000000000000000000.index").stat().st_size
        st = storage.stats
        # the index was fetched when the end offset was found; this read fetched a
        # window around the batch and its bytes: a few KiB of a segment of hundreds
        assert st.bytes_read <= 3 * 8192 + len(got), (st.as_dict(), size)
        assert size > 50 * st.bytes_read
        # records of a small range in the middle: the bytes of their batches, plus at
        # most an index interval either side
        storage.stats.reset()
        recs = list(view.records(target, target + 40))
        assert [r.offset for r in recs] == list(range(target, target + 40))
        assert storage.stats.bytes_read <= 40 * 400 + 2 * 1024 + 8192, st.as_dict()
        assert index_bytes > 0
    finally:
        view.close()
        log.close()


def test_a_timestamp_lookup_reads_only_the_segment_it_needs(tmp_path):
    _write(tmp_path / "t-0", n_batches=400, segment_bytes=4096)
    storage, path = open_storage(str(tmp_path / "t-0"))
    view = ReadOnlyLog.open(path, storage=storage)
    log = Log.open(str(tmp_path / "t-0"))
    try:
        assert len(view.segments) > 8
        total = sum(s.size for s in view.segments)
        storage.stats.reset()
        ts = T0 + 200_000
        assert view.offset_for_timestamp(ts) == log.offset_for_timestamp(ts)
        # time indexes of the segments before it, then a window of one segment
        assert storage.stats.bytes_read < total / 4, storage.stats.as_dict()
    finally:
        view.close()
        log.close()


def test_a_segment_deleted_after_listing_is_a_typed_error(tmp_path, s3_server):
    _write(tmp_path / "gone-0", n_batches=120)
    bucket = s3_server.new_bucket("gone")
    uri = s3_server.upload_dir(tmp_path / "gone-0", bucket, "gone-0")
    view = ReadOnlyLog.open(uri, storage_options=s3_server.options())
    first = view.segments[0]
    s3_server.delete(bucket, "gone-0/" + os.path.basename(first.path))
    with pytest.raises(StorageFileNotFoundError) as err:
        list(view.records(first.base_offset, first.base_offset + 1))
    assert os.path.basename(first.path) in str(err.value)
    view.close()
    # the same locally: the same type
    local = ReadOnlyLog.open(str(tmp_path / "gone-0"))
    os.unlink(tmp_path / "gone-0" / os.path.basename(first.path))
    with pytest.raises(StorageFileNotFoundError):
        list(local.records(first.base_offset, first.base_offset + 1))
    local.close()


def test_corrupt_bytes_raise_with_the_uri_and_position(tmp_path):
    _write(tmp_path / "bad-0", n_batches=30)
    seg = tmp_path / "bad-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF                          # inside the first batches: a CRC mismatch
    seg.write_bytes(bytes(data))
    copy = _memory_copy(tmp_path)
    for uri in (str(tmp_path / "bad-0"), copy + "/bad-0"):
        with ReadOnlyLog.open(uri) as view:
            with pytest.raises(CorruptRecordError) as err:
                list(view.records())
            assert err.value.path and "00000000000000000000.log" in err.value.path
            assert err.value.position is not None and err.value.position <= 200


def test_an_untrimmed_index_is_a_hint_not_the_truth(tmp_path):
    # a crash leaves the active segment's index preallocated: zeros after the entries
    _write(tmp_path / "z-0", n_batches=60, segment_bytes=1 << 20)
    index = tmp_path / "z-0" / "00000000000000000000.index"
    entries = index.read_bytes()
    index.write_bytes(entries + b"\0" * 4096)
    with ReadOnlyLog.open(str(tmp_path / "z-0")) as view, \
            Log.open(str(shutil.copytree(tmp_path / "z-0", tmp_path / "copy" / "z-0"))) as log:
        seg = view.segments[0]
        assert view.offset_index(seg).entries == len(entries) // 8
        assert view.log_end_offset == log.log_end_offset
        offs, pos = view.offset_index(seg).arrays()
        assert np.all(np.diff(offs) > 0) and np.all(np.diff(pos) > 0)
        for off in (0, 50, view.log_end_offset - 1):
            assert view.read(off, 300).to_bytes() == log.read(off, 300).to_bytes()
