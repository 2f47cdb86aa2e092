"""The Spark source over a tiered-storage copy (option ``tieredStorage``), alone and under a
log directory, in the session's local Spark.

Copies are made from ordinary partition directories written by kafkastore's ``Log``:
the rolled segments' files as Kafka's ``LocalTieredStorage`` lays them out, and an Aiven
copy on moto's S3 by kafkastore's own uploader. The oracle is the log directory the copy
was made from, read through the same source (whose local reads are tested elsewhere) or
with ``iter_records``. Everything is small: two partitions of four segments.
"""

from __future__ import annotations

import base64
import os
import shutil
import uuid

import pytest
from test_spark_source import read

from kafkastore.log import Log

T0 = 1_700_000_000_000
TOPIC_ID = base64.urlsafe_b64encode(uuid.UUID(int=0x5EED).bytes).decode().rstrip("=")


def make_partition(d, batches=30, per_batch=10):
    """Segments of 100 offsets (0, 100, 200) in batches of 10, about 1 KiB each (the
    values do not compress), and an empty active segment at 300."""
    log = Log.open(str(d), {"index.interval.bytes": 128})
    for b in range(batches):
        log.append([(f"k{n}".encode(), os.urandom(90), T0 + n * 10)
                    for n in range(b * per_batch, (b + 1) * per_batch)],
                   compression=["none", "zstd", "lz4"][b % 3])
        if b % 10 == 9:
            log.roll()
    log.close()


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiered-logs") / "logs"
    for p in range(2):
        make_partition(root / f"orders-{p}")
    return root


def _segment_id(base: int, partition: int) -> str:
    return base64.urlsafe_b64encode(uuid.UUID(int=(partition << 32) + base + 1).bytes
                                    ).decode().rstrip("=")


def local_tiered_copy(logs, dest, bases):
    """Kafka's LocalTieredStorage layout by hand: ``<topic>-<p>-<topicId>/`` holding
    ``<20-digit start>-<segment id>`` plus each file's suffix, plain copies."""
    for p in range(2):
        src = logs / f"orders-{p}"
        d = dest / f"orders-{p}-{TOPIC_ID}"
        d.mkdir(parents=True)
        all_bases = sorted(int(f.name[:-4]) for f in src.iterdir() if f.suffix == ".log")
        for base in bases:
            stem = f"{base:020d}-{_segment_id(base, p)}"
            for ext in (".log", ".index", ".timeindex"):
                shutil.copy(src / f"{base:020d}{ext}", d / f"{stem}{ext}")
            nxt = all_bases[all_bases.index(base) + 1]
            snap = src / f"{nxt:020d}.snapshot"
            (d / f"{stem}.snapshot").write_bytes(snap.read_bytes() if snap.exists() else b"")
            (d / f"{stem}.leader_epoch_checkpoint").write_text("0\n1\n0 0\n")
    return str(dest)


def without_segments(logs, dest, bases):
    """A copy of the log directory whose segments at ``bases`` local retention deleted."""
    shutil.copytree(logs, dest)
    for p in range(2):
        for f in (dest / f"orders-{p}").iterdir():
            stem = f.name.split(".")[0]
            if stem.isdigit() and int(stem) in bases and f.suffix != ".snapshot":
                f.unlink()
    return str(dest)


def rows(df):
    return sorted((r.partition, r.offset, r.key, r.value, r.timestamp)
                  for r in df.select("partition", "offset", "key", "value",
                                     "timestamp").collect())


def test_the_copy_alone_reads_as_the_log_directory(spark, logs, tmp_path):
    uri = local_tiered_copy(logs, tmp_path / "copy", [0, 100, 200])
    alone = read(spark, None, subscribe="orders", tieredStorage=uri,
                 maxBytesPerPartition=1500)
    want = rows(read(spark, str(logs), subscribe="orders"))
    assert rows(alone) == want and len(want) == 600
    # the offsets options and a timestamp start through the copy's indexes
    some = read(spark, None, assign={"orders": [1]}, tieredStorage=uri,
                **{"tieredStorage.layout": "local"}, startingTimestamp=T0 + 1_234,
                endingOffsets={"orders": {"1": 260}})
    assert [r[1] for r in rows(some)] == list(range(124, 260))


def test_the_union_with_an_overlap_is_the_whole_log_once(spark, logs, tmp_path):
    uri = local_tiered_copy(logs, tmp_path / "copy", [0, 100])
    local = without_segments(logs, tmp_path / "local", {0})   # local starts at 100
    got = read(spark, local, subscribe="orders", tieredStorage=uri, minPartitions=5)
    want = rows(read(spark, str(logs), subscribe="orders"))
    assert rows(got) == want and len(want) == 600
    # a stream from the earliest offset sees the copy's part too
    reader = (spark.readStream.format("kafkastore").option("subscribe", "orders")
              .option("startingOffsets", "earliest").option("tieredStorage", uri)
              .option("maxOffsetsPerTrigger", "250"))
    q = (reader.load(local).selectExpr("partition", "offset").writeStream.format("memory")
         .queryName("tiered_stream").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    streamed = sorted(tuple(r) for r in spark.sql("select * from tiered_stream").collect())
    q.stop()
    assert streamed == sorted((r[0], r[1]) for r in want)


def test_a_gap_fails_the_query_or_is_skipped(spark, logs, tmp_path):
    uri = local_tiered_copy(logs, tmp_path / "copy", [0])
    local = without_segments(logs, tmp_path / "local", {0, 100})   # 100-199 nowhere
    with pytest.raises(Exception) as err:
        read(spark, local, assign={"orders": [1]}, tieredStorage=uri).collect()
    text = str(err.value)
    assert "Cannot fetch offsets 100 to 199 of orders-1" in text
    assert "failOnDataLoss" in text
    got = read(spark, local, subscribe="orders", tieredStorage=uri, failOnDataLoss="false")
    assert [r[1] for r in rows(got) if r[0] == 0] == list(range(100)) + list(range(200, 300))


def test_an_aiven_copy_on_s3_with_pushdown_fetching_only_its_chunks(spark, logs, s3_server,
                                                                    fault_proxy):
    """A compressed Aiven copy on S3 read through the fault proxy, which counts the bytes
    the executors and the driver fetch (they are other processes: the storage's own
    counters are theirs); pushed offsets fetch only the chunks holding the batches the
    offset index points at, and a timestamp start no chunk before its time index entry."""
    upload = pytest.importorskip("kafkastore.tiered.upload",
                                 reason="the tiered writer is not in this tree yet")
    from kafkastore.log_view import ReadOnlyLog
    from kafkastore.tiered import open_tiered

    UploadOptions, upload_partition = upload.UploadOptions, upload.upload_partition

    bucket = s3_server.new_bucket("tiered")
    uri = f"s3://{bucket}/tiered/"
    for p in range(2):
        upload_partition(str(logs / f"orders-{p}"), uri, topic_id=TOPIC_ID,
                         options=UploadOptions(layout="aiven", key_prefix="ks/",
                                               chunk_size=512, compression=True),
                         storage_options=s3_server.options())
    options = {"tieredStorage": uri, "tieredStorage.keyPrefix": "ks/",
               **{f"tieredStorage.storage.{k}": v for k, v in s3_server.options(
                   endpoint_override=fault_proxy.endpoint).items()}}
    want = rows(read(spark, str(logs), subscribe="orders"))
    assert rows(read(spark, None, subscribe="orders", **options)) == want

    # the chunks of segment 100 of partition 0 that offsets 150-169 need, by the index
    local = ReadOnlyLog.open(str(logs / "orders-0"))
    seg = next(s for s in local.segments if s.base_offset == 100)
    floor, _ = local.floor_position(seg, 150)
    end = local.end_position(seg, 170)
    copy = open_tiered(uri, storage_options=s3_server.options(), key_prefix="ks/")
    index = next(rs.manifest.chunk_index for rs in copy.resolution(_tp(0)).segments
                 if rs.start_offset == 100)
    needed = sum(c.transformed_size for c in index.chunks_for_range(floor, end - floor))
    assert needed < index.transformed_file_size / 2

    first = index.chunks_for_range(floor, 1)[0].transformed_position

    def fetched(base=100):
        return [s for s in fault_proxy.gets(".log") if f"/0/{base:020d}-" in s.path]

    fault_proxy.clear()
    df = read(spark, None, subscribe="orders", pushdown="true", **options)
    got = df.where("partition = 0 AND offset >= 150 AND offset < 170").select("offset")
    assert sorted(r.offset for r in got.collect()) == list(range(150, 170))
    assert 0 < sum(s.sent for s in fetched()) <= needed and not fetched(0)
    # a timestamp start: no chunk before the time index's entry is fetched (the task
    # reads the chunks above; the driver's search walks the batch headers from the entry)
    fault_proxy.clear()
    df = read(spark, None, assign={"orders": [0]}, startingTimestamp=T0 + 1_500,
              endingOffsets={"orders": {"0": 170}}, **options)
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(150, 170))
    assert fetched() and not fetched(0)
    assert all(int(s.range.split("=")[1].split("-")[0]) >= first for s in fetched())


def _tp(p):
    from kafkastore.topic import TopicPartition
    return TopicPartition("orders", p)
