"""Writing tiered copies (kafkastore.tiered.upload): the objects of both layouts, read back
with the format modules alone (manifest, chunk index, transforms), and the vectors' copies
reproduced from their source segments."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from _vectors import VECTORS

from kafkastore.errors import ConfigError, TieredStorageError
from kafkastore.leader_epoch import LeaderEpochCheckpointFile
from kafkastore.log import Log
from kafkastore.producer_state import snapshot_bytes
from kafkastore.tiered import object_sink
from kafkastore.tiered.chunk_index import FixedSizeChunkIndex, VariableSizeChunkIndex
from kafkastore.tiered.crypto import KeyRing
from kafkastore.tiered.manifest import INDEX_TYPES, parse_manifest
from kafkastore.tiered.object_keys import (
    RemoteSegmentKey,
    aiven_object_key,
    local_tiered_file,
    new_segment_id,
    parse_aiven_object_key,
    parse_local_tiered_file,
)
from kafkastore.tiered.transform import segment_transform
from kafkastore.tiered.upload import UploadOptions, upload_partition

TID = "8lzmN6RjQ3mA0ZzZ9u6Zbw"
T0 = 1_700_000_000_000
PID = 4242


def _write_partition(path: Path, *, first_compressed: bool) -> None:
    log = Log.open(str(path), {"segment.bytes": 3000, "index.interval.bytes": 256},
                   topic_id=TID)
    try:
        for i in range(40):
            codec = "zstd" if (i == 0 and first_compressed) or i % 5 == 3 else None
            log.append([(b"k%d" % j, b"value-%d-%d-" % (i, j) + b"x" * (20 + 7 * j), T0 + i)
                        for j in range(1 + i % 4)], compression=codec,
                       partition_leader_epoch=0 if i < 15 else 2)
            if i == 20:   # an aborted transaction: a .txnindex in one segment
                log.append([(b"t", b"aborted", T0 + i)], producer_id=PID, producer_epoch=0,
                           base_sequence=0, is_transactional=True, partition_leader_epoch=2)
                log.append_end_txn_marker(PID, 0, "ABORT", coordinator_epoch=1)
    finally:
        log.close()


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiered-src")
    _write_partition(root / "orders-0", first_compressed=False)
    _write_partition(root / "orders-1", first_compressed=True)
    return root


@pytest.fixture(scope="module")
def ring():
    return KeyRing.generate("k1")[0]


def _bases(part: Path) -> list[int]:
    return sorted(int(p.stem) for p in part.glob("*.log"))


def _ids(base: int) -> str:
    return f"seg{base:019d}"[:22].replace("0", "A")


def _restore_log(dest: Path, manifest_key: str, ring) -> tuple[bytes, object, dict]:
    path = str(dest / manifest_key)
    manifest = parse_manifest((dest / manifest_key).read_bytes(), path=path)
    transform = segment_transform(manifest, ring, path=path)
    log_obj = (dest / manifest_key.replace(".rsm-manifest", ".log")).read_bytes()
    index = manifest.chunk_index
    assert len(log_obj) == index.transformed_file_size
    original = b"".join(
        transform.detransform(log_obj[c.transformed_position:
                                      c.transformed_position + c.transformed_size],
                              c, path=path)
        for c in index.chunks())
    indexes_obj = (dest / manifest_key.replace(".rsm-manifest", ".indexes")).read_bytes()
    slices = {}
    for name in INDEX_TYPES:
        si = manifest.segment_indexes[name]
        if si is not None:
            blob = indexes_obj[si.position:si.position + si.size]
            slices[name] = transform.detransform_index(blob, name=name, path=path)
    return original, manifest, slices


@pytest.mark.parametrize("compression, encrypted", [(False, False), (True, False),
                                                    (False, True), (True, True)])
def test_aiven_upload_reads_back_byte_for_byte(partitions, tmp_path, ring, compression,
                                               encrypted):
    src = partitions / "orders-0"
    options = UploadOptions(chunk_size=700, compression=compression,
                            key_ring=ring if encrypted else None, key_prefix="pre/",
                            broker_id=3)
    dest = tmp_path / "copy"
    uploaded = upload_partition(str(src), str(dest), options=options, segment_id=_ids)
    bases = _bases(src)
    assert len(bases) >= 3 and [u.key.start_offset for u in uploaded] == bases[:-1]
    epochs = LeaderEpochCheckpointFile(str(src)).read()
    for u, nxt in zip(uploaded, bases[1:]):
        key = RemoteSegmentKey("orders", TID, 0, u.key.start_offset, _ids(u.key.start_offset))
        assert u.key == key and u.end_offset == nxt - 1
        assert u.objects == [aiven_object_key("pre/", key, s)
                             for s in ("log", "indexes", "rsm-manifest")]
        assert u.bytes == sum((dest / o).stat().st_size for o in u.objects)
        assert parse_aiven_object_key(u.objects[0][len("pre/"):]) == (key, "log")
        original, manifest, slices = _restore_log(dest, u.objects[2], ring)
        name = f"{u.key.start_offset:020d}"
        assert original == (src / f"{name}.log").read_bytes()
        assert slices["offset"] == (src / f"{name}.index").read_bytes()
        assert slices["timestamp"] == (src / f"{name}.timeindex").read_bytes()
        assert slices["producerSnapshot"] == (src / f"{nxt:020d}.snapshot").read_bytes()
        txn = src / f"{name}.txnindex"
        assert slices.get("transaction") == (txn.read_bytes() if txn.exists() else None)
        assert slices["leaderEpoch"] == LeaderEpochCheckpointFile("").encode(
            [e for e in epochs if e.start_offset < nxt])
        index = manifest.chunk_index
        assert index.original_chunk_size == 700
        assert type(index) is (VariableSizeChunkIndex if compression else FixedSizeChunkIndex)
        if not compression:
            assert index.transformed_chunk_size == 700 + (28 if encrypted else 0)
            assert index.is_identity == (not encrypted)
        assert manifest.compression == compression
        assert (manifest.encryption is not None) == encrypted
        meta = manifest.remote_log_segment_metadata
        assert (meta["startOffset"], meta["endOffset"], meta["brokerId"]) == \
            (u.key.start_offset, nxt - 1, 3)
        assert meta["remoteLogSegmentId"]["topicIdPartition"]["topicPartition"] == \
            {"topic": "orders", "partition": 0}
        assert min(manifest.leader_epochs_hint().values()) == u.key.start_offset
    assert any((src / f"{b:020d}.txnindex").exists() for b in bases[:-1])


def test_compression_heuristic(partitions, tmp_path):
    options = UploadOptions(chunk_size=1 << 20, compression=True, compression_heuristic=True)
    for partition, expected in (("orders-0", True), ("orders-1", False)):
        dest = tmp_path / partition
        uploaded = upload_partition(str(partitions / partition), str(dest), options=options,
                                    base_offsets=[0])
        manifest = parse_manifest((dest / uploaded[0].objects[2]).read_bytes(), path="m")
        assert manifest.compression is expected
    with pytest.raises(ConfigError):
        UploadOptions(compression_heuristic=True)
    with pytest.raises(ConfigError):
        UploadOptions(chunk_size=0)
    with pytest.raises(ConfigError):
        UploadOptions(layout="local", compression=True)


def test_local_tiered_layout(partitions, tmp_path):
    src = partitions / "orders-0"
    dest = tmp_path / "kafka-tiered-storage"
    uploaded = upload_partition(str(src), str(dest), options=UploadOptions(layout="local"))
    bases = _bases(src)
    epochs = LeaderEpochCheckpointFile(str(src)).read()
    for u, nxt in zip(uploaded, bases[1:]):
        name = f"{u.key.start_offset:020d}"
        suffixes = [".log", ".index", ".timeindex"] + \
            ([".txnindex"] if (src / f"{name}.txnindex").exists() else []) + \
            [".leader_epoch_checkpoint", ".snapshot"]
        assert u.objects == [local_tiered_file(u.key, s) for s in suffixes]
        for relative, suffix in zip(u.objects, suffixes):
            directory, file_name = relative.split("/")
            assert directory == f"orders-0-{TID}"
            assert parse_local_tiered_file(directory, file_name) == (u.key, suffix)
            data = (dest / relative).read_bytes()
            if suffix == ".leader_epoch_checkpoint":
                assert data == LeaderEpochCheckpointFile("").encode(
                    [e for e in epochs if e.start_offset < nxt])
            elif suffix == ".snapshot":
                assert data == (src / f"{nxt:020d}.snapshot").read_bytes()
            else:
                assert data == (src / f"{name}{suffix}").read_bytes()


def test_unfinished_upload_and_cleanup_on_failure(partitions, tmp_path, monkeypatch):
    src = str(partitions / "orders-0")
    dest = tmp_path / "copy"
    up = upload_partition(src, str(dest), base_offsets=[0], write_manifest=False)
    assert [o.rsplit(".", 1)[1] for o in up[0].objects] == ["log", "indexes"]
    assert not list(dest.rglob("*.rsm-manifest"))
    local = upload_partition(src, str(tmp_path / "lts"), base_offsets=[0],
                             options=UploadOptions(layout="local"), write_manifest=False)
    assert not local[0].objects[-1].endswith(".snapshot")

    real_put = object_sink.LocalSink.put

    def failing_put(self, path, data):
        if path.endswith(".indexes"):
            raise OSError("disk full")
        real_put(self, path, data)

    monkeypatch.setattr(object_sink.LocalSink, "put", failing_put)
    failed = tmp_path / "failed"
    with pytest.raises(OSError, match="disk full"):
        upload_partition(src, str(failed), base_offsets=[0])
    assert not [p for p in failed.rglob("*") if p.is_file()]


def test_refusals_and_ids(partitions, tmp_path):
    src = str(partitions / "orders-0")
    with pytest.raises(TieredStorageError, match="no segment with base offset 7"):
        upload_partition(src, str(tmp_path / "x"), base_offsets=[7])
    plain = tmp_path / "notapartition"
    plain.mkdir()
    with pytest.raises(TieredStorageError, match="not a partition directory"):
        upload_partition(str(plain), str(tmp_path / "y"))
    bare = tmp_path / "bare-0"
    shutil.copytree(src, bare)
    os.remove(bare / "partition.metadata")
    with pytest.raises(TieredStorageError, match="no topic id"):
        upload_partition(str(bare), str(tmp_path / "z"))
    ids = {new_segment_id() for _ in range(200)}
    assert len(ids) == 200 and all(len(i) == 22 and not i.startswith("-") for i in ids)


# -- the vectors' copies, reproduced from their source segments -----------------------------

_CASES = [("aiven-plain", "aiven-plain.summary.json", "s1_v2_mixed_codecs", 4096, False, ""),
          ("aiven-plain", "aiven-plain.summary-p1.json", "s2_mixed_magic", 4096, False, ""),
          ("aiven-zstd", "aiven-zstd.summary.json", "s1_v2_mixed_codecs", 8192, True,
           "tiered/")]


@pytest.mark.parametrize("copy, summary, source, chunk, compression, prefix", _CASES)
def test_upload_reproduces_the_vectors(tmp_path, copy, summary, source, chunk, compression,
                                       prefix):
    tiered = VECTORS / "tiered" if VECTORS is not None else None
    if tiered is None or not (tiered / summary).is_file():
        pytest.skip("no tiered-storage vectors (../shared/vectors/tiered)")
    info = json.loads((tiered / summary).read_text())
    seg = info["segments"][0]
    src = tmp_path / f"{info['topic']}-{info['partition']}"
    src.mkdir()
    for f in (VECTORS / "segments" / source).glob("*"):
        if f.suffix in (".log", ".index", ".timeindex"):
            shutil.copy(f, src / f.name)
    vector_id = seg["key"][-22:]
    options = UploadOptions(chunk_size=chunk, compression=compression, key_prefix=prefix,
                            broker_id=1)
    dest = tmp_path / "copy"
    [u] = upload_partition(str(src), str(dest), options=options, topic_id=info["topicId"],
                           base_offsets=[seg["start"]], segment_id=lambda _: vector_id)
    assert u.end_offset == seg["end"]
    assert u.objects[0] == seg["key"] + ".log"
    for suffix in ("log", "indexes"):
        assert (dest / f"{seg['key']}.{suffix}").read_bytes() == \
            (tiered / copy / f"{seg['key']}.{suffix}").read_bytes(), suffix
    ours = json.loads((dest / f"{seg['key']}.rsm-manifest").read_bytes())
    theirs = json.loads((tiered / copy / f"{seg['key']}.rsm-manifest").read_bytes())
    assert ours["chunkIndex"] == theirs["chunkIndex"]
    ours["remoteLogSegmentMetadata"]["eventTimestampMs"] = \
        theirs["remoteLogSegmentMetadata"]["eventTimestampMs"]
    assert ours == theirs
    # the indexes' producer snapshot: the directory has none, so an empty one
    manifest = parse_manifest((dest / f"{seg['key']}.rsm-manifest").read_bytes(), path="m")
    assert manifest.segment_indexes["producerSnapshot"].size == len(snapshot_bytes([]))


def test_upload_to_s3(partitions, tmp_path, s3_server, ring):
    """The same objects land on an object store (read back with boto3, not the seam)."""
    src = str(partitions / "orders-0")
    bucket = s3_server.new_bucket("tiered")
    options = UploadOptions(chunk_size=700, compression=True, key_ring=ring)
    uploaded = upload_partition(src, f"s3://{bucket}/copy", options=options,
                                storage_options=s3_server.options(), base_offsets=[0],
                                segment_id=_ids)
    local = tmp_path / "copy"
    for key in uploaded[0].objects:
        body = s3_server.client.get_object(Bucket=bucket, Key=f"copy/{key}")["Body"].read()
        (local / key).parent.mkdir(parents=True, exist_ok=True)
        (local / key).write_bytes(body)
    original, _, _ = _restore_log(local, uploaded[0].objects[2], ring)
    assert original == (partitions / "orders-0" / f"{0:020d}.log").read_bytes()
