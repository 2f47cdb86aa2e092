"""Reading tiered-storage copies: the vectors (Aiven layout, made by an independent
encoder), LocalTieredStorage copies, resolution of retried/unfinished/overlapping
uploads and gaps, damaged chunks, and the S3 emulator."""

from __future__ import annotations

import shutil

import pytest
from _copies import (
    LOCAL_TOPIC_ID,
    TIERED,
    TOPIC_ID,
    damaged_zstd_copy,
    local_upload,
    needs_vectors,
    rows,
    segment_bases,
    source_log,
    write_partition,
)

from kafkastore.errors import CorruptChunkError, TieredStorageError
from kafkastore.log_view import ReadOnlyLog
from kafkastore.tiered import open_tiered
from kafkastore.tiered.listing import AIVEN, LOCAL
from kafkastore.tiered.resolve import (
    DUPLICATE,
    EMPTY,
    SHADOWED,
    UNFINISHED,
    RemoteSegment,
    resolve,
)
from kafkastore.topic import TopicPartition

ORDERS0 = TopicPartition("orders", 0)
ORDERS1 = TopicPartition("orders", 1)


# -- the vectors: Aiven copies made by an independent encoder ------------------------------

@needs_vectors
@pytest.mark.parametrize("copy_name, tp, source", [
    ("aiven-plain", ORDERS0, "s1_v2_mixed_codecs"),
    ("aiven-plain", ORDERS1, "s2_mixed_magic"),
    ("aiven-zstd", ORDERS0, "s1_v2_mixed_codecs"),
])
def test_vector_copies_read_as_their_source_segments(copy_name, tp, source):
    with open_tiered(str(TIERED / copy_name)) as copy:
        assert copy.layout == AIVEN
        assert copy.topic_id("orders") == TOPIC_ID
        log = copy.log(tp)
        want = source_log(source)
        assert (log.log_start_offset, log.log_end_offset) == \
            (want.log_start_offset, want.log_end_offset)
        assert rows(log.records()) == rows(want.records())
        # the virtual .log is the source segment byte for byte
        seg = log.segments[0]
        with copy.tiered_storage.open(seg.path) as reader:
            data = reader.read(0, reader.size)
        src = next((TIERED.parent / "segments" / source).glob("*.log")).read_bytes()
        assert data == src
        # and the index files are the source's
        for suffix in (".index", ".timeindex"):
            name = seg.path[:-len(".log")] + suffix
            assert copy.tiered_storage.read_file(name) == \
                next((TIERED.parent / "segments" / source).glob("*" + suffix)).read_bytes()


@needs_vectors
def test_vector_columns_offsets_and_timestamps_match_the_source():
    with open_tiered(str(TIERED / "aiven-zstd")) as copy:
        log = copy.log(ORDERS0)
        want = source_log("s1_v2_mixed_codecs")
        mid = (log.log_start_offset + log.log_end_offset) // 2
        got = log.columns(mid, mid + 300)
        exp = want.columns(mid, mid + 300)
        assert list(got.offset) == list(exp.offset) and len(got.offset) > 0
        for ts in (0, 1700000050000, 1700000119862, 1800000000000):
            assert log.offset_for_timestamp(ts) == want.offset_for_timestamp(ts)
        assert bytes(log.read(mid, 5000).to_bytes()) == bytes(want.read(mid, 5000).to_bytes())


@needs_vectors
def test_zstd_copy_fetches_only_the_chunks_a_query_needs():
    with open_tiered(str(TIERED / "aiven-zstd")) as copy:
        log = copy.log(ORDERS0)
        seg = copy.resolution(ORDERS0).segments[0]
        index = seg.manifest.chunk_index
        mid = (log.log_start_offset + log.log_end_offset) // 2   # the LEO read, first
        ref = log.segments[0]
        for lo, n in ((mid, 10), (log.log_start_offset, 1), (mid + 500, 300)):
            copy.tiered_storage.chunk_cache.clear()   # nothing kept from the query before
            copy.storage.stats.reset()
            got = [r.offset for r in log.records(lo, lo + n)]
            assert got == list(range(lo, lo + n))
            # what the query reads: from the index floor of lo to the index's bound
            # past lo + n; the chunks holding those bytes are what it needs
            start, _ = log.floor_position(ref, lo)
            stop = log.end_position(ref, lo + n)
            need = sum(c.transformed_size for c in index.chunks_for_range(start, stop - start))
            assert 0 < copy.storage.stats.bytes_read <= need
            assert need < index.transformed_file_size   # not the whole object


@needs_vectors
def test_a_damaged_zstd_chunk_is_a_typed_error_naming_segment_and_chunk(tmp_path):
    copy_dir, log_obj, _chunk = damaged_zstd_copy(tmp_path)
    with open_tiered(str(copy_dir)) as copy:
        log = copy.log(ORDERS0)
        with pytest.raises(CorruptChunkError) as info:
            list(log.records())
    assert info.value.chunk == 3
    assert info.value.path.endswith(log_obj.name)
    assert "chunk 3" in str(info.value)


@needs_vectors
def test_a_missing_manifest_is_an_unfinished_upload_left_out(tmp_path):
    copy_dir = tmp_path / "copy"
    shutil.copytree(TIERED / "aiven-plain", copy_dir)
    for manifest in copy_dir.rglob("*.rsm-manifest"):
        if "/1/" in str(manifest):
            manifest.unlink()
    with open_tiered(str(copy_dir)) as copy:
        res = copy.resolution(ORDERS1)
        assert res.segments == []
        [(seg, reason, detail)] = res.dropped
        assert reason == UNFINISHED and "rsm-manifest" in detail
        assert copy.log(ORDERS1).segments == []
        assert copy.log(ORDERS0).log_end_offset == source_log(
            "s1_v2_mixed_codecs").log_end_offset


@needs_vectors
def test_the_copy_reads_from_the_s3_emulator(s3_server):
    bucket = s3_server.new_bucket("tiered")
    uri = s3_server.upload_dir(TIERED / "aiven-zstd", bucket, "cluster-a")
    with open_tiered(uri, storage_options=s3_server.options()) as copy:
        assert copy.partitions() == [ORDERS0]
        log = copy.log(ORDERS0)
        assert rows(log.records()) == rows(source_log("s1_v2_mixed_codecs").records())
        assert copy.log_dir().partitions() == [ORDERS0]


# -- LocalTieredStorage copies ---------------------------------------------------------------

def test_local_tiered_copy_reads_as_the_partition(tmp_path):
    src = write_partition(tmp_path / "orders-0", 400)
    uploaded = local_upload(src, tmp_path / "remote")
    assert len(uploaded) >= 3
    with open_tiered(str(tmp_path / "remote")) as copy:
        assert copy.layout == LOCAL
        log = copy.log(ORDERS0)
        want = ReadOnlyLog.open(str(src))
        assert rows(log.records()) == rows(want.records())
        assert [s.base_offset for s in log.segments] == uploaded
        assert log.offset_for_timestamp(1_700_000_000_123) == \
            want.offset_for_timestamp(1_700_000_000_123)
        # the partition directory a Kafka reader expects is there
        names = {f.name for f in copy.tiered_storage.list_dir("orders-0")}
        assert {"partition.metadata", "leader-epoch-checkpoint"} <= names
        # Kafka's exact bytes (PartitionMetadata.encode: no newline at the end)
        assert copy.tiered_storage.read_file("orders-0/partition.metadata") == \
            f"version: 0\ntopic_id: {LOCAL_TOPIC_ID}".encode()


def test_retried_and_unfinished_uploads_are_resolved(tmp_path):
    src = write_partition(tmp_path / "orders-0", 300)
    remote = tmp_path / "remote"
    first = local_upload(src, remote)
    again = local_upload(src, remote, bases=first[1:2])          # a retried upload
    local_upload(src, remote, bases=first[2:3], skip=(".snapshot",))  # unfinished
    with open_tiered(str(remote)) as copy:
        res = copy.resolution(ORDERS0)
        reasons = sorted(r for _s, r, _d in res.dropped)
        assert reasons == [DUPLICATE, UNFINISHED]
        assert [s.start_offset for s in res.segments] == first
        assert again == first[1:2]
        assert res.gaps == []
        want = ReadOnlyLog.open(str(src))
        assert rows(copy.log(ORDERS0).records()) == rows(want.records())


def test_overlapping_uploads_are_cut_at_offsets_never_duplicated(tmp_path):
    a = write_partition(tmp_path / "a" / "orders-0", 300, segment_bytes=1200)
    # the same records rolled at other offsets: segments that overlap a's
    b = write_partition(tmp_path / "b" / "orders-0", 300, segment_bytes=1800)
    remote = tmp_path / "remote"
    a_bases = local_upload(a, remote)
    b_bases = local_upload(b, remote, bases=segment_bases(b)[1:2])
    with open_tiered(str(remote)) as copy:
        res = copy.resolution(ORDERS0)
        assert res.overlaps, (a_bases, b_bases)
        log = copy.log(ORDERS0)
        got = [r.offset for r in log.records()]
        assert got == list(range(log.log_start_offset, log.log_end_offset))
        cols = log.columns()
        assert list(cols.offset) == got


def test_a_gap_is_reported(tmp_path):
    src = write_partition(tmp_path / "orders-0", 300)
    bases = segment_bases(src)
    remote = tmp_path / "remote"
    local_upload(src, remote, bases=[bases[0], bases[2]])
    with open_tiered(str(remote)) as copy:
        res = copy.resolution(ORDERS0)
        assert res.gaps == [(bases[1], bases[2])]
        offsets = [r.offset for r in copy.log(ORDERS0).records()]
        assert offsets == list(range(bases[0], bases[1])) + \
            list(range(bases[2], res.end_offset))


def test_no_segment_objects_is_a_clear_error(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("hello")
    with pytest.raises(TieredStorageError, match="no tiered-storage segment objects"):
        open_tiered(str(tmp_path))
    with pytest.raises(TieredStorageError, match="unknown tiered-storage layout"):
        open_tiered(str(tmp_path), layout="s3")


# -- resolution rules, without objects -------------------------------------------------------

class _Objs:
    def __init__(self, start, sid, complete=True):
        from kafkastore.tiered.object_keys import RemoteSegmentKey
        self.key = RemoteSegmentKey("t", TOPIC_ID, 0, start, sid)
        self.complete = complete
        self.missing = [] if complete else ["rsm-manifest"]


def seg(start, end, sid, *, complete=True, epoch=-1, size=100, verified=True):
    return RemoteSegment(_Objs(start, sid, complete), end_offset=end, size=size,
                         leader_epoch=epoch, end_verified=verified)


def test_resolution_rules():
    segs = [
        seg(0, 99, "A" * 22),
        seg(0, 99, "B" * 22, epoch=3),           # a retried upload, newer leader: kept
        seg(50, 80, "C" * 22),                   # inside 0..99: shadowed
        seg(90, 150, "D" * 22),                  # overlaps: serves 90..150
        seg(151, 160, "E" * 22, complete=False),  # unfinished
        seg(170, 169, "F" * 22),                 # no complete batch
        seg(200, 250, "G" * 22),                 # after a gap
    ]
    res = resolve(segs, lambda s: pytest.fail("end offsets are known"))
    assert [s.segment_id[0] for s in res.segments] == ["B", "D", "G"]
    assert {s.segment_id[0]: r for s, r, _ in res.dropped} == {
        "A": DUPLICATE, "C": SHADOWED, "E": UNFINISHED, "F": EMPTY}
    assert res.serves_until == [90, 151, 251]
    assert res.gaps == [(151, 200)]
    assert res.start_offset == 0 and res.end_offset == 251
    # deterministic: any input order gives the same answer
    again = resolve(list(reversed(segs)), lambda s: None)
    assert [s.segment_id for s in again.segments] == [s.segment_id for s in res.segments]


def test_wrong_end_offset_hints_are_read_before_they_decide_anything():
    real = {"A": 99, "B": 200, "C": 300, "D": 400}
    asked = []

    def end_of(s):
        asked.append(s.segment_id[0])
        return real[s.segment_id[0]]

    segs = [
        seg(0, 500, "A" * 22, verified=False),     # inflated: would shadow B, C and D
        seg(100, 200, "B" * 22, verified=False),   # right, and in a clean chain
        seg(201, 250, "C" * 22, verified=False),   # deflated: would open a gap
        seg(301, 400, "D" * 22, verified=False),
    ]
    res = resolve(segs, end_of)
    assert [s.segment_id[0] for s in res.segments] == ["A", "B", "C", "D"]
    assert res.dropped == [] and res.gaps == [] and res.end_offset == 401
    assert sorted(set(asked)) == ["A", "B", "C", "D"]
    # a clean chain of right hints reads nothing but the last segment's end
    asked.clear()
    clean = [seg(0, 99, "A" * 22, verified=False), seg(100, 200, "B" * 22, verified=False)]
    assert [s.end_offset for s in resolve(clean, end_of).segments] == [99, 200]
    assert asked == ["B"]
    # an impossible hint is never believed
    asked.clear()
    res = resolve([seg(0, -5, "A" * 22, verified=False)], end_of)
    assert [s.end_offset for s in res.segments] == [99] and asked == ["A"]


def test_small_chunks_are_fetched_once_per_query(tmp_path, monkeypatch):
    """Window reads (a walk of batch headers, then the batch found) share the decoded
    chunks: with 512-byte chunks a timestamp search or a records read fetches no chunk
    twice."""
    from kafkastore.tiered.chunk_reader import ChunkedReader
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    src = write_partition(tmp_path / "orders-0", 600, segment_bytes=20_000)
    upload_partition(str(src), str(tmp_path / "copy"),
                     options=UploadOptions(chunk_size=512, compression=True),
                     topic_id=TOPIC_ID)
    fetched = []
    real = ChunkedReader._fetch

    def spy(self, run):
        fetched.extend((self.uri, c.id) for c in run)
        return real(self, run)

    monkeypatch.setattr(ChunkedReader, "_fetch", spy)
    with open_tiered(str(tmp_path / "copy")) as copy:
        log = copy.log(ORDERS0)
        want = ReadOnlyLog.open(str(src))
        for query in (lambda lg: lg.offset_for_timestamp(1_700_000_000_333),
                      lambda lg: [r.offset for r in lg.records(100, 400)],
                      lambda lg: lg.offset_for_timestamp(-3)):
            copy.tiered_storage.chunk_cache.clear()
            fetched.clear()
            assert query(log) == query(want)
            assert fetched and len(fetched) == len(set(fetched))


def test_reads_fetch_little_beyond_the_chunks_of_the_batches_they_return(tmp_path):
    """A read of one offset fetches the chunks holding the batch it returns; beyond them
    only the chunk of the offset index's floor entry when the batch lies past it in
    another chunk (the walk must start at an entry boundary the index gives): over
    random offsets, at most 5% more than the batches' chunks (the issue's bar)."""
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    src = write_partition(tmp_path / "orders-0", 20_000, per_batch=25,
                          segment_bytes=2_000_000, index_interval_bytes=4096)
    upload_partition(str(src), str(tmp_path / "copy"),
                     options=UploadOptions(chunk_size=64 << 10, compression=True),
                     topic_id=TOPIC_ID)
    want = ReadOnlyLog.open(str(src))
    with open_tiered(str(tmp_path / "copy")) as copy:
        log = copy.log(ORDERS0)
        log.log_end_offset        # the end's chunk, once, before counting
        index = copy.resolution(ORDERS0).segments[0].manifest.chunk_index
        fetched = needed = 0
        for offset in range(log.log_start_offset + 13, log.log_end_offset - 60, 211):
            sl = want.read(offset, 1)
            need = sum(c.transformed_size
                       for c in index.chunks_for_range(sl.position, sl.size))
            copy.tiered_storage.chunk_cache.clear()
            copy.storage.stats.reset()
            got = bytes(log.read(offset, 1).to_bytes())
            assert got == bytes(sl.to_bytes())
            assert copy.storage.stats.bytes_read >= need
            fetched += copy.storage.stats.bytes_read
            needed += need
        assert fetched <= 1.05 * needed, fetched / needed
