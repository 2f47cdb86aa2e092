"""Small tiered copies for the tiered tests: a partition written with kafkastore and
uploaded in Kafka's LocalTieredStorage layout by hand (plain copies of its files, as that
RSM stores them), the Aiven vectors, and a vector copy with a damaged chunk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from _logtools import open_log
from _vectors import VECTORS

from kafkastore import cli
from kafkastore.log_view import ReadOnlyLog

TIERED = VECTORS / "tiered" if VECTORS is not None else None
SEGMENTS = VECTORS / "segments" if VECTORS is not None else None
needs_vectors = pytest.mark.skipif(TIERED is None or not TIERED.is_dir(),
                                   reason="the tiered-storage vectors are absent")
TOPIC_ID = "8lzmN6RjQ3mA0ZzZ9u6Zbw"
LOCAL_TOPIC_ID = "LJ1Qp0TXQ9u0ZjFYcqg0Kw"
#: the vectors: copy name -> {partition: source segment directory}
VECTOR_SOURCES = {"aiven-plain": {0: "s1_v2_mixed_codecs", 1: "s2_mixed_magic"},
                  "aiven-zstd": {0: "s1_v2_mixed_codecs"}}


def run(capsys, *argv):
    """``kafkastore ARGV`` in this process: ``(exit code, stdout, stderr)``."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def rows(records):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


def write_partition(path: Path, n: int = 120, *, per_batch: int = 6,
                    segment_bytes: int = 1200, index_interval_bytes: int = 150) -> Path:
    """``orders-0`` with ``n`` keyed records in small segments, leader epoch 0 then 1,
    every segment rolled (so each has its producer snapshot at the next base)."""
    log = open_log(path, segment_bytes=segment_bytes,
                   index_interval_bytes=index_interval_bytes)
    try:
        for i in range(0, n, per_batch):
            epoch = 0 if i < n // 2 else 1
            log.append([(f"k{j % 5}".encode(), f"v{j}".encode(), 1_700_000_000_000 + j)
                        for j in range(i, min(n, i + per_batch))],
                       partition_leader_epoch=epoch)
        log.roll()
        log.flush()
    finally:
        log.close()
    return path


def segment_bases(partition_dir: Path) -> list[int]:
    return [int(p.stem) for p in sorted(partition_dir.glob("*.log"))]


def local_upload(src: Path, dest: Path, bases=None, *, segment_id=None,
                 skip=(), topic_id: str = LOCAL_TOPIC_ID) -> list[int]:
    """Kafka's LocalTieredStorage layout by hand: ``<topic>-<p>-<topicId>/<20-digit
    start>-<segment id><suffix>``, each the partition's file as it is (the producer
    snapshot at the next segment's base, the leader-epoch checkpoint). The rolled
    segments (all but the last, empty one) whose base is in ``bases`` (default all);
    ``segment_id(base)`` names each upload (default: a new random id)."""
    from kafkastore.tiered.object_keys import new_segment_id

    tp_dir = dest / f"orders-0-{topic_id}"
    tp_dir.mkdir(parents=True, exist_ok=True)
    all_bases = segment_bases(src)
    done = []
    for base, nxt in zip(all_bases, all_bases[1:]):
        if bases is not None and base not in bases:
            continue
        stem = f"{base:020d}-{segment_id(base) if segment_id else new_segment_id()}"
        for suffix in (".log", ".index", ".timeindex"):
            if suffix not in skip:
                shutil.copyfile(src / f"{base:020d}{suffix}", tp_dir / (stem + suffix))
        if ".snapshot" not in skip:
            shutil.copyfile(src / f"{nxt:020d}.snapshot", tp_dir / (stem + ".snapshot"))
        if ".leader_epoch_checkpoint" not in skip:
            shutil.copyfile(src / "leader-epoch-checkpoint",
                            tp_dir / (stem + ".leader_epoch_checkpoint"))
        done.append(base)
    return done


def local_copy(tmp_path: Path, **kw) -> tuple[Path, Path]:
    """``(source partition directory, LocalTieredStorage copy of its rolled segments)``."""
    src = write_partition(tmp_path / "src" / "orders-0", **kw)
    remote = tmp_path / "remote"
    local_upload(src, remote)
    return src, remote


def overlap_copy(tmp_path):
    """The same records rolled at other offsets in a second upload: ``b``'s segment
    starts inside one of ``a``'s and ends past it."""
    a = write_partition(tmp_path / "a" / "orders-0", 200, segment_bytes=1000)
    b = write_partition(tmp_path / "b" / "orders-0", 200, segment_bytes=1700)
    remote = tmp_path / "remote"
    a_bases, b_bases = segment_bases(a), segment_bases(b)
    local_upload(a, remote, bases=a_bases[:2])
    cut = next(x for x in b_bases if a_bases[0] < x < a_bases[2] and x not in a_bases)
    local_upload(b, remote, bases=[cut])
    return a, remote, cut


def source_log(name: str) -> ReadOnlyLog:
    return ReadOnlyLog.open(str(SEGMENTS / name))


def files_of(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))
            if (directory / name).is_file()}


def damaged_zstd_copy(tmp_path: Path, chunk_id: int = 3):
    """The aiven-zstd vector copied to ``tmp_path`` with bytes of chunk ``chunk_id``
    flipped: ``(copy directory, the .log object, the chunk)``."""
    from kafkastore.tiered import open_tiered
    from kafkastore.topic import TopicPartition

    copy_dir = tmp_path / "copy"
    shutil.copytree(TIERED / "aiven-zstd", copy_dir)
    log_obj = next(copy_dir.rglob("*.log"))
    with open_tiered(str(copy_dir)) as copy:
        index = copy.resolution(TopicPartition("orders", 0)).segments[0].manifest.chunk_index
        chunk = index.chunk(chunk_id)
    data = bytearray(log_obj.read_bytes())
    for i in range(chunk.transformed_position + 4, chunk.transformed_position + 12):
        data[i] ^= 0x5A
    log_obj.write_bytes(bytes(data))
    return copy_dir, log_obj, chunk
