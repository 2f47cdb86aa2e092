"""``kafkastore tiered export`` and :mod:`kafkastore.tiered.export`: a tiered copy restored
to partition directories that :class:`kafkastore.Log` (and so Kafka) opens with no
recovery, byte-identical segments and indexes, the same records and offsets; refusals of
a non-empty destination, of gaps and of overlaps, and what ``--allow-gaps`` /
``--allow-overlap`` write."""

from __future__ import annotations

import pytest
from _copies import (
    LOCAL_TOPIC_ID,
    SEGMENTS,
    TIERED,
    TOPIC_ID,
    VECTOR_SOURCES,
    files_of,
    local_copy,
    local_upload,
    needs_vectors,
    overlap_copy,
    rows,
    run,
    segment_bases,
    write_partition,
)

from kafkastore.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kafkastore.cli import EXIT_OK, EXIT_USAGE
from kafkastore.errors import TieredStorageError
from kafkastore.leader_epoch import LeaderEpochCheckpointFile
from kafkastore.log import Log
from kafkastore.log_view import ReadOnlyLog
from kafkastore.manager import LogManager
from kafkastore.partition_metadata import read_topic_id
from kafkastore.tiered import open_tiered
from kafkastore.tiered.export import export
from kafkastore.topic import TopicPartition

ORDERS0 = TopicPartition("orders", 0)


def log_rows(log: Log):
    """Every record of an open :class:`Log`, through its read API."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(log.read(offset, 1 << 20).batches())
        if not batches:
            break
        for batch in batches:
            out.extend((r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                       for r in batch if r.offset >= offset)
            offset = batch.last_offset + 1
    return out


def opens_clean(path, want_rows, start: int, end: int) -> None:
    """``Log.open`` of a restored partition: no recovery (the recovery point is the end),
    the offsets and records given, the segment files untouched."""
    before = {n: d for n, d in files_of(path).items() if n.endswith((".log", ".txnindex"))}
    log = Log.open(str(path))
    try:
        assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == \
            (start, end, end)
        assert log_rows(log) == want_rows
    finally:
        log.close()
    after = files_of(path)
    assert {n: after[n] for n in before} == before


@needs_vectors
def test_export_of_the_vectors_restores_the_source_segments(tmp_path, capsys):
    dest = tmp_path / "restored"
    code, out, err = run(capsys, "tiered", "export", TIERED / "aiven-zstd", dest)
    assert code == EXIT_OK, err
    assert out == f"orders-0: 1 segment(s), offsets 114514..116567, 204879 bytes -> " \
                  f"{dest / 'orders-0'}\n"
    code, out, err = run(capsys, "tiered", "export", TIERED / "aiven-plain", tmp_path / "p",
                         "--partition", "1")
    assert code == EXIT_OK, err
    for root, partition in ((dest, 0), (tmp_path / "p", 1)):
        source = SEGMENTS / VECTOR_SOURCES["aiven-plain"][partition]
        part = root / f"orders-{partition}"
        got = files_of(part)
        for name, data in files_of(source).items():
            if name.endswith((".log", ".index", ".timeindex")):
                assert got[name] == data, name          # byte for byte
        want = ReadOnlyLog.open(str(source))
        assert read_topic_id(str(part)) == TOPIC_ID
        assert OffsetCheckpointFile(str(root / LOG_START_OFFSET_CHECKPOINT_FILE)).read() == \
            {TopicPartition("orders", partition): want.log_start_offset}
        assert OffsetCheckpointFile(str(root / RECOVERY_POINT_CHECKPOINT_FILE)).read() == \
            {TopicPartition("orders", partition): want.log_end_offset}
        opens_clean(part, rows(want.records()), want.log_start_offset, want.log_end_offset)
    # the leader epochs the segment was uploaded with (manifest: {3: 114514, 4: 115488})
    assert [tuple(e) for e in LeaderEpochCheckpointFile(str(dest / "orders-0")).read()] == \
        [(3, 114514), (4, 115488)]


def test_export_of_a_local_tiered_copy_is_the_partition_directory(tmp_path):
    src, remote = local_copy(tmp_path)
    dest = tmp_path / "restored"
    with open_tiered(str(remote)) as copy:
        [done] = export(copy, str(dest))
    bases = segment_bases(src)[:-1]   # the rolled segments (the last, empty one stays local)
    assert done.segments == bases and done.gaps == [] and done.cut == []
    want, got = files_of(src), files_of(dest / "orders-0")
    restored = [n for n in got if n.endswith((".log", ".index", ".timeindex", ".snapshot"))]
    assert len(restored) == 4 * len(bases)   # three files and the next base's snapshot each
    for name in restored:
        assert got[name] == want[name], name   # byte for byte
    assert read_topic_id(str(dest / "orders-0")) == LOCAL_TOPIC_ID
    assert got["leader-epoch-checkpoint"] == want["leader-epoch-checkpoint"]
    source = ReadOnlyLog.open(str(src))
    opens_clean(dest / "orders-0", rows(source.records()), 0, source.log_end_offset)
    # Kafka's way in: a LogManager over the log directory, from its checkpoints
    with LogManager(str(dest), background=False) as manager:
        log = manager.get("orders", 0)
        assert (log.log_start_offset, log.log_end_offset) == (0, source.log_end_offset)
        assert log_rows(log) == rows(source.records())


def test_export_refuses_a_non_empty_destination(tmp_path, capsys):
    _src, remote = local_copy(tmp_path)
    part = tmp_path / "dest" / "orders-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"")
    code, out, err = run(capsys, "tiered", "export", remote, tmp_path / "dest")
    assert code == EXIT_USAGE and out == ""
    assert f"{part} exists and is not empty" in err and "Traceback" not in err
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["orders-0"]
    # an empty one is taken
    (part / "00000000000000000000.log").unlink()
    code, _, err = run(capsys, "tiered", "export", remote, tmp_path / "dest")
    assert code == EXIT_OK, err


def gap_copy(tmp_path):
    src = write_partition(tmp_path / "src" / "orders-0", 200)
    bases = segment_bases(src)
    remote = tmp_path / "remote"
    local_upload(src, remote, bases=[bases[0], bases[2], bases[3]])
    return src, remote, bases


def test_export_refuses_gaps_unless_allowed(tmp_path, capsys):
    src, remote, bases = gap_copy(tmp_path)
    dest = tmp_path / "dest"
    code, _, err = run(capsys, "tiered", "export", remote, dest)
    assert code == EXIT_USAGE
    assert f"the copy has gaps (offsets {bases[1]}..{bases[2] - 1} are in no served " \
           "segment); --allow-gaps" in err
    assert not dest.exists() or not any(dest.iterdir())
    code, out, err = run(capsys, "tiered", "export", remote, dest, "--allow-gaps")
    assert code == EXIT_OK, err
    assert f"orders-0: gap: offsets {bases[1]}..{bases[2] - 1} are in no segment" in out
    part = dest / "orders-0"
    assert sorted(int(p.stem) for p in part.glob("*.log")) == [bases[0], bases[2], bases[3]]
    with open_tiered(str(remote)) as copy:
        want = rows(copy.log(ORDERS0).records())
    assert [r[0] for r in want] == list(range(bases[0], bases[1])) + \
        list(range(bases[2], bases[4]))
    opens_clean(part, want, 0, bases[4])


def test_export_refuses_overlaps_unless_allowed_then_cuts_with_kafkas_truncation(tmp_path,
                                                                                 capsys):
    src, remote, cut = overlap_copy(tmp_path)
    with open_tiered(str(remote)) as copy:
        res = copy.resolution(ORDERS0)
        [(earlier, later, first, _last)] = res.overlaps
        want = rows(copy.log(ORDERS0).records())
    dest = tmp_path / "dest"
    code, _, err = run(capsys, "tiered", "export", remote, dest)
    assert code == EXIT_USAGE and "--allow-overlap" in err and "overlap" in err
    code, out, err = run(capsys, "tiered", "export", remote, dest, "--allow-overlap")
    assert code == EXIT_OK, err
    assert f"segment {earlier.start_offset} truncated at {cut}" in out
    part = dest / "orders-0"
    served = res.segments
    assert sorted(int(p.stem) for p in part.glob("*.log")) == [s.start_offset for s in served]
    assert later.start_offset == cut
    # the cut segment's snapshot (taken at its old end) is left out, the others are there
    assert sorted(p.name for p in part.glob("*.snapshot")) == \
        [f"{s.end_offset + 1:020d}.snapshot" for s in served if s is not earlier]
    assert [r[0] for r in want] == list(range(res.start_offset, later.end_offset + 1))
    opens_clean(part, want, res.start_offset, later.end_offset + 1)
    # the segments not cut are byte for byte the source's
    got, source = files_of(part), files_of(src)
    for seg in served:
        if seg is not earlier:
            name = f"{seg.start_offset:020d}.log"
            assert got[name] == files_of(remote / f"orders-0-{LOCAL_TOPIC_ID}")[
                f"{seg.start_offset:020d}-{seg.segment_id}.log"]
    assert got[f"{earlier.start_offset:020d}.log"] != source[f"{earlier.start_offset:020d}.log"]


def test_export_api_refuses_before_writing_anything(tmp_path):
    _src, remote, bases = gap_copy(tmp_path)
    with open_tiered(str(remote)) as copy:
        with pytest.raises(TieredStorageError, match="gaps"):
            export(copy, str(tmp_path / "dest"))
        with pytest.raises(TieredStorageError, match="no partition of topic 'users'"):
            export(copy, str(tmp_path / "dest"), topic="users")
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())


def test_a_cut_through_a_batch_leaves_a_gap_that_needs_allow_gaps(tmp_path, capsys):
    # a's batches hold 6 offsets, b's 4: b's segment at 92 starts inside a's batch 90..95
    a = write_partition(tmp_path / "a" / "orders-0", 200, segment_bytes=1000)
    b = write_partition(tmp_path / "b" / "orders-0", 200, per_batch=4, segment_bytes=1300)
    assert segment_bases(a)[:3] == [0, 42, 84] and 92 in segment_bases(b)
    remote = tmp_path / "remote"
    local_upload(a, remote, bases=[0, 42, 84])
    local_upload(b, remote, bases=[92])
    dest = tmp_path / "dest"
    code, _, err = run(capsys, "tiered", "export", remote, dest, "--allow-overlap")
    assert code == EXIT_USAGE
    assert "offsets 90..91 are in no served segment, or in a batch an overlap's cut " \
           "removes" in err
    code, out, err = run(capsys, "tiered", "export", remote, dest, "--allow-overlap",
                         "--allow-gaps")
    assert code == EXIT_OK, err
    assert "orders-0: segment 84 truncated at 92" in out
    with open_tiered(str(remote)) as copy:
        want = [r for r in rows(copy.log(ORDERS0).records()) if r[0] not in (90, 91)]
        end = copy.resolution(ORDERS0).end_offset
    opens_clean(dest / "orders-0", want, 0, end)


def test_export_of_a_compressed_encrypted_aiven_copy_is_byte_identical(tmp_path):
    from kafkastore.tiered import KeyRing
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    src = write_partition(tmp_path / "src" / "orders-0", 120)
    ring, _pem = KeyRing.generate("k1")
    upload_partition(str(src), str(tmp_path / "remote"), topic_id=TOPIC_ID,
                     options=UploadOptions(chunk_size=256, compression=True, key_ring=ring))
    dest = tmp_path / "dest"
    with open_tiered(str(tmp_path / "remote"), key_ring=ring) as copy:
        [done] = export(copy, str(dest))
    bases = segment_bases(src)[:-1]
    assert done.segments == bases
    want, got = files_of(src), files_of(dest / "orders-0")
    for base, nxt in zip(bases, segment_bases(src)[1:]):
        for name in (f"{base:020d}.log", f"{base:020d}.index", f"{base:020d}.timeindex",
                     f"{nxt:020d}.snapshot"):
            assert got[name] == want[name], name
    assert got["leader-epoch-checkpoint"] == want["leader-epoch-checkpoint"]
    source = ReadOnlyLog.open(str(src))
    opens_clean(dest / "orders-0", rows(source.records()), 0, source.log_end_offset)


def test_an_aborted_transaction_travels_through_upload_and_export(tmp_path, capsys):
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    src = tmp_path / "src" / "orders-0"
    log = Log.open(str(src), {"segment.bytes": 700, "index.interval.bytes": 150})
    try:
        for i in range(40):
            log.append([(b"k", b"plain-%d" % i, 1_700_000_000_000 + i)])
            if i == 15:   # an aborted transaction in the middle
                for seq in range(3):
                    log.append([(b"t", b"aborted-%d" % seq)], producer_id=7,
                               producer_epoch=0, base_sequence=seq, is_transactional=True)
                log.append_end_txn_marker(7, 0, "ABORT")
        log.roll()
    finally:
        log.close()
    txn = sorted(p.name for p in src.glob("*.txnindex") if p.stat().st_size)
    assert txn
    upload_partition(str(src), str(tmp_path / "remote"), topic_id=TOPIC_ID,
                     options=UploadOptions(chunk_size=200, compression=True))
    code, out, err = run(capsys, "verify", tmp_path / "remote", "--tiered")
    assert code == EXIT_OK, out + err
    argv = ["orders", "--isolation-level", "read_committed", "--print-offset"]
    code, want, _ = run(capsys, "consume", src.parent, *argv)
    code, out, err = run(capsys, "consume", tmp_path / "remote", *argv, "--tiered")
    assert code == EXIT_OK and out == want and "aborted" not in out, err
    dest = tmp_path / "dest"
    code, _, err = run(capsys, "tiered", "export", tmp_path / "remote", dest)
    assert code == EXIT_OK, err
    got = files_of(dest / "orders-0")
    for name in txn:
        assert got[name] == (src / name).read_bytes()
    code, out, err = run(capsys, "consume", dest, *argv)
    assert out == want
