"""kafkastore.cluster_metadata: topic configs replayed from a KRaft ``__cluster_metadata-0`` log.

The metadata records are built here byte by byte from Kafka's JSON schemas
(metadata/src/main/resources/common/metadata/{TopicRecord,ConfigRecord,RemoveTopicRecord}.json,
all ``"flexibleVersions": "0+"``) and the frame of ``AbstractApiMessageSerde`` (unsigned
varint frame version 1, apiKey, version), with an encoder of their own that shares nothing
with the module's reader. kafkastore's ``encode_batch`` wraps them into v2 batches, written
as ``.log`` segments and ``<offset>-<epoch>.checkpoint`` snapshots in a temporary directory.
"""

from __future__ import annotations

import os
import re
import uuid

import pytest
from _helpers import v2_batch
from _kraft import (
    BROKER,
    NO_TAGS,
    TOPIC,
    config_record,
    control_batch,
    frame,
    remove_topic_record,
    topic_record,
    txn_record,
    uvarint,
    write_segment,
    write_snapshot,
)

from kafkastore import _fileio
from kafkastore import cluster_metadata as cm
from kafkastore.cluster_metadata import (
    METADATA_TOPIC_PARTITION_DIR,
    find_metadata_log,
    read_cluster_metadata,
)
from kafkastore.errors import CorruptRecordError
from kafkastore.records import encode_batch

ID_A = uuid.UUID("11111111-2222-3333-4444-555555555555")
ID_B = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
ID_A2 = uuid.UUID("99999999-8888-7777-6666-555555555555")


@pytest.fixture
def mdir(tmp_path):
    d = tmp_path / METADATA_TOPIC_PARTITION_DIR
    d.mkdir()
    return d


# -- what is found -------------------------------------------------------------------------


def test_topics_configs_and_cluster_default(mdir):
    long_value = "x" * 300     # a length that needs a two-byte varint
    write_segment(mdir, 0, [
        frame(12, 0, b"garbage: FeatureLevelRecord is never parsed"),
        topic_record("orders", ID_A),
        topic_record("events", ID_B),
        config_record(TOPIC, "orders", "cleanup.policy", "compact"),
        config_record(TOPIC, "orders", "retention.ms", "1000"),
        config_record(TOPIC, "events", "segment.bytes", long_value),
        config_record(BROKER, "", "log.cleanup.policy", "compact,delete"),
        config_record(BROKER, "1", "log.cleanup.policy", "delete"),   # one broker: not a default
    ])
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["events", "orders"]
    orders = md.topics["orders"]
    assert orders.topic_id == ID_A and isinstance(orders.topic_id, uuid.UUID)
    assert orders.kafka_topic_id == "ERERESIiMzNERFVVVVVVVQ"
    assert orders.configs == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert md.topic_config("orders") == orders.configs
    assert md.topic_config("events") == {"segment.bytes": long_value}
    assert md.cluster_defaults == {"log.cleanup.policy": "compact,delete"}
    assert md.cleanup_policy("orders") == "compact"
    assert md.cleanup_policy("events") == "compact,delete"       # the cluster default
    assert md.cleanup_policy("nope") is None and md.topic_config("nope") == {}
    assert md.source.snapshot is None and md.source.log_records == 8
    assert md.source.end_offset == 8 and md.source.torn_tail_bytes == 0


def test_no_policy_anywhere_is_none(mdir):
    write_segment(mdir, 0, [topic_record("t", ID_A),
                            config_record(TOPIC, "t", "retention.ms", "5")])
    md = read_cluster_metadata(mdir)
    assert md.cluster_defaults == {}
    assert md.cleanup_policy("t") is None


def test_configs_may_come_before_the_topic_record(mdir):
    write_segment(mdir, 0, [config_record(TOPIC, "t", "cleanup.policy", "compact"),
                            topic_record("t", ID_A)])
    assert read_cluster_metadata(mdir).cleanup_policy("t") == "compact"


def test_snapshot_then_log_records_past_its_end(mdir):
    # the snapshot ends at offset 4: it holds offsets 0..3
    snap = write_snapshot(mdir, 4, [topic_record("a", ID_A),
                                    config_record(TOPIC, "a", "cleanup.policy", "compact")])
    # an older snapshot and files Kafka ignores, with contents that would show if read
    write_snapshot(mdir, 2, [topic_record("old", ID_B)])
    (mdir / f"{6:020d}-{1:010d}.checkpoint.part").write_bytes(b"partial")
    (mdir / f"{8:020d}-{1:010d}.checkpoint.deleted").write_bytes(b"deleted")
    seg = write_segment(mdir, 0, [
        topic_record("ghost", ID_B),                                 # 0..3: in the snapshot
        config_record(TOPIC, "a", "cleanup.policy", "delete"),
        frame(3, 0, b"x"),
        frame(3, 0, b"y"),
        config_record(TOPIC, "a", "retention.ms", "7"),              # 4, 5: applied
        topic_record("b", ID_B),
    ])
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["a", "b"]
    assert md.topic_config("a") == {"cleanup.policy": "compact", "retention.ms": "7"}
    assert md.source.snapshot == str(snap) and md.source.snapshot_end_offset == 4
    assert md.source.snapshot_records == 2
    assert md.source.segments == (str(seg),) and md.source.log_records == 2
    assert md.source.end_offset == 6


def test_records_below_the_snapshot_in_a_later_segment_are_ignored(mdir):
    write_snapshot(mdir, 3, [topic_record("a", ID_A)])
    old = write_segment(mdir, 0, [frame(3, 0, b"")])             # wholly below: not read
    old.write_bytes(b"\xff" * 40)                                  # so its bytes never matter
    seg = write_segment(mdir, 1, [topic_record("stale", ID_B),     # offsets 1, 2: below
                                  remove_topic_record(ID_A),
                                  config_record(TOPIC, "a", "cleanup.policy", "compact")])
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["a"]
    assert md.cleanup_policy("a") == "compact"
    assert md.source.segments == (str(seg),) and md.source.log_records == 1


def test_log_deleted_below_the_snapshot(mdir):
    write_snapshot(mdir, 10, [topic_record("a", ID_A)])
    write_segment(mdir, 10, [config_record(TOPIC, "a", "cleanup.policy", "compact")])
    md = read_cluster_metadata(mdir)
    assert md.cleanup_policy("a") == "compact"
    assert md.source.end_offset == 11


def test_missing_records_between_snapshot_and_log_raise(mdir):
    write_snapshot(mdir, 10, [topic_record("a", ID_A)])
    seg = write_segment(mdir, 12, [topic_record("b", ID_B)])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "missing" in info.value.message
    assert info.value.path == str(seg) and info.value.offset == 12


def test_log_without_its_start_and_without_snapshot_raises(mdir):
    write_segment(mdir, 5, [topic_record("b", ID_B)])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "no snapshot" in info.value.message


def test_empty_partition_dir(mdir):
    md = read_cluster_metadata(mdir)
    assert md.topics == {} and md.cluster_defaults == {}
    assert md.source.segments == () and md.source.snapshot is None


def test_config_deletion_by_null_value(mdir):
    write_segment(mdir, 0, [
        topic_record("t", ID_A),
        config_record(TOPIC, "t", "cleanup.policy", "compact"),
        config_record(TOPIC, "t", "retention.ms", "1"),
        config_record(BROKER, "", "log.cleanup.policy", "compact"),
        config_record(TOPIC, "t", "cleanup.policy", None),
        config_record(TOPIC, "t", "never.set", None),
    ])
    md = read_cluster_metadata(mdir)
    assert md.topic_config("t") == {"retention.ms": "1"}
    assert md.cleanup_policy("t") == "compact"           # now from the cluster default
    write_segment(mdir, 0, [config_record(BROKER, "", "log.cleanup.policy", "delete"),
                            config_record(BROKER, "", "log.cleanup.policy", None)])
    assert read_cluster_metadata(mdir).cluster_defaults == {}


def test_remove_topic(mdir):
    write_segment(mdir, 0, [
        topic_record("a", ID_A), topic_record("b", ID_B),
        config_record(TOPIC, "a", "cleanup.policy", "compact"),
        remove_topic_record(ID_A),
        remove_topic_record(uuid.UUID(int=7)),               # unknown id: nothing happens
    ])
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["b"]
    assert md.cleanup_policy("a") is None and md.topic_config("a") == {}


def test_recreated_topic_has_only_its_new_configs(mdir):
    write_segment(mdir, 0, [
        topic_record("a", ID_A),
        config_record(TOPIC, "a", "cleanup.policy", "compact"),
        config_record(TOPIC, "a", "retention.ms", "1"),
        remove_topic_record(ID_A),
        topic_record("a", ID_A2),
        config_record(TOPIC, "a", "segment.ms", "9"),
        remove_topic_record(ID_A),                            # the old id again: no effect
    ])
    md = read_cluster_metadata(mdir)
    assert md.topics["a"].topic_id == ID_A2
    assert md.topic_config("a") == {"segment.ms": "9"}
    assert md.cleanup_policy("a") is None


def test_unknown_api_keys_and_versions_are_skipped_unparsed(mdir):
    write_segment(mdir, 0, [
        frame(3, 2, b"\xff\xff\xff"),             # PartitionRecord v2, bytes that do not parse
        frame(200, 0, b""),                       # an apiKey that needs a two-byte varint
        frame(300, 9, b"\x00" * 5),
        frame(27, 0, b""),
        topic_record("t", ID_A),
        config_record(TOPIC, "t", "cleanup.policy", "compact",
                      tags=uvarint(2) + uvarint(0) + uvarint(3) + b"abc"
                      + uvarint(200) + uvarint(0)),    # unknown tagged fields: skipped
    ], per_batch=4)
    md = read_cluster_metadata(mdir)
    assert md.cleanup_policy("t") == "compact"
    assert md.source.log_records == 6


def test_metadata_transactions(mdir):
    write_segment(mdir, 0, [
        txn_record(23), topic_record("aborted", ID_A), txn_record(25),
        txn_record(23), topic_record("committed", ID_B),
        config_record(TOPIC, "committed", "cleanup.policy", "compact"), txn_record(24),
        topic_record("plain", ID_A2),
        txn_record(23), config_record(TOPIC, "plain", "cleanup.policy", "compact"),  # open
    ])
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["committed", "plain"]
    assert md.cleanup_policy("committed") == "compact"
    assert md.cleanup_policy("plain") is None


def test_transaction_records_in_a_snapshot_are_ignored(mdir):
    write_snapshot(mdir, 3, [txn_record(23), topic_record("a", ID_A), txn_record(25)])
    write_segment(mdir, 3, [config_record(TOPIC, "a", "cleanup.policy", "compact"),
                            txn_record(23), topic_record("b", ID_B)])
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["a"] and md.cleanup_policy("a") == "compact"


def test_a_name_created_again_without_a_removal_keeps_the_newest_id(mdir):
    write_segment(mdir, 0, [topic_record("a", ID_A), topic_record("a", ID_A2),
                            remove_topic_record(ID_A),
                            config_record(TOPIC, "a", "cleanup.policy", "compact")])
    md = read_cluster_metadata(mdir)
    assert md.topics["a"].topic_id == ID_A2 and md.cleanup_policy("a") == "compact"


def test_compressed_batches_and_many_chunks(mdir, monkeypatch):
    values = [topic_record(f"t{i}", uuid.UUID(int=i + 1)) for i in range(50)]
    values += [config_record(TOPIC, f"t{i}", "cleanup.policy", "compact") for i in range(0, 50, 7)]
    write_segment(mdir, 0, values, per_batch=3, compression="lz4")
    monkeypatch.setattr(cm, "_CHUNK", 100)       # smaller than one batch: reads of their own
    md = read_cluster_metadata(mdir)
    assert len(md.topics) == 50 and md.topics["t49"].topic_id == uuid.UUID(int=50)
    assert [t for t in md.topics if md.cleanup_policy(t)] == sorted(
        f"t{i}" for i in range(0, 50, 7))


def test_files_are_only_read(mdir):
    write_snapshot(mdir, 1, [topic_record("a", ID_A)])
    write_segment(mdir, 0, [frame(3, 0, b""), topic_record("b", ID_B)])
    before = {p.name: p.read_bytes() for p in mdir.iterdir()}
    opened = []

    class ReadOnly(_fileio.FileSystem):
        def open(self, path, flags, mode=0o644):
            opened.append((os.path.basename(path), flags & (os.O_RDONLY | os.O_WRONLY
                                                           | os.O_RDWR | os.O_CREAT)))
            return super().open(path, flags, mode)

        def _refuse(self, *args, **kw):
            raise AssertionError("a write")

        write = pwrite = ftruncate = fsync = rename = unlink = mmap = _refuse

    old = _fileio.install(ReadOnly())
    try:
        md = read_cluster_metadata(mdir)
    finally:
        _fileio.install(old)
    assert sorted(md.topics) == ["a", "b"]
    assert sorted(opened) == sorted((n, os.O_RDONLY) for n in before)
    assert {p.name: p.read_bytes() for p in mdir.iterdir()} == before


# -- bad bytes --------------------------------------------------------------------------


def _segment_with_bad_record(mdir, bad: bytes):
    """Offsets 0-2 good, the bad record at offset 3, the first of the second batch."""
    path = write_segment(mdir, 0, [topic_record("a", ID_A), frame(3, 0, b""),
                                   topic_record("b", ID_B), bad, topic_record("c", ID_A2)],
                         per_batch=3)
    second = len(encode_batch([(None, v) for v in (topic_record("a", ID_A), frame(3, 0, b""),
                                                   topic_record("b", ID_B))], timestamp=0))
    return path, second


@pytest.mark.parametrize("frame_version", [0, 2, 300])
def test_frame_version_other_than_1_raises(mdir, frame_version):
    path, position = _segment_with_bad_record(
        mdir, topic_record("x", ID_B, frame_version=frame_version))
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "frame version" in info.value.message
    err = info.value
    assert (err.path, err.offset, err.position) == (str(path), 3, position)
    assert str(path) in str(err) and "offset=3" in str(err)


def test_frame_version_checked_for_skipped_api_keys_too(mdir):
    write_segment(mdir, 0, [frame(3, 0, b"", frame_version=0)])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "frame version 0" in info.value.message


def test_bad_records_below_the_snapshot_are_not_read(mdir):
    write_snapshot(mdir, 1, [topic_record("a", ID_A)])
    write_segment(mdir, 0, [topic_record("x", ID_B, frame_version=0), topic_record("b", ID_B)])
    assert sorted(read_cluster_metadata(mdir).topics) == ["a", "b"]


def _prefixes(value: bytes):
    return [(value[:n], "needs|truncated") for n in range(len(value))]


@pytest.mark.parametrize("bad, message", [
    *_prefixes(topic_record("t", ID_A)),
    *_prefixes(remove_topic_record(ID_A)),
    *_prefixes(config_record(TOPIC, "t", "cleanup.policy", "compact")),
    (topic_record("t", ID_A)[:3] + uvarint(0x4000) + b"abc",          # length past the end
     "TopicRecord.Name needs 16383 bytes, but the value has 3 left"),
    (topic_record("t", ID_A)[:3] + uvarint(0x8001) + b"a" * 0x8000 + ID_A.bytes + NO_TAGS,
     "string field TopicRecord.Name had invalid length 32768"),       # over 0x7fff
    (topic_record("t", ID_A)[:3] + b"\xff\xff\xff\xff\x7f",               # 2**32 - 1: Java's -1
     "non-nullable field TopicRecord.Name was serialized as null"),
    (topic_record("t", ID_A)[:3] + b"\x00" + ID_A.bytes + NO_TAGS,
     "non-nullable field TopicRecord.Name was serialized as null"),
    (config_record(TOPIC, "t", None, "v"), "ConfigRecord.Name was serialized as null"),
    (topic_record("t", ID_A) + b"\x00", "found 1 byte\\(s\\) of garbage after TopicRecord"),
    (config_record(TOPIC, "t", "k", "v", tags=uvarint(1) + uvarint(5) + uvarint(9) + b"ab"),
     "ConfigRecord tagged field needs 9 bytes"),
    (frame(4, 1, config_record(TOPIC, "t", "k", "v")[3:]), "unsupported ConfigRecord version 1"),
    (frame(2, 1, topic_record("t", ID_A)[3:]), "unsupported TopicRecord version 1"),
    (frame(9, 1, remove_topic_record(ID_A)[3:]), "unsupported RemoveTopicRecord version 1"),
    (b"\x01\x02\x80\x80\x80\x80\x80\x01", "version: Varint is too long"),
    (b"\x01\xff\xff\x03\x00", "value for type was too large: 65535"),
], ids=lambda v: (v.hex()[:24] or "empty") if isinstance(v, bytes) else None)
def test_bad_record_values_raise_with_where(mdir, bad, message):
    path, position = _segment_with_bad_record(mdir, bad)
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    err = info.value
    assert (err.path, err.offset, err.position) == (str(path), 3, position)
    assert re.search(message, err.message), err.message


def test_legacy_message_raises(mdir):
    path = write_segment(mdir, 0, [topic_record("a", ID_A)])
    first = path.stat().st_size
    path.write_bytes(path.read_bytes() + encode_batch([(None, b"x")], magic=1, base_offset=1,
                                                      timestamp=0))
    write_segment(mdir, 2, [topic_record("b", ID_B)])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "magic 1" in info.value.message
    assert (info.value.path, info.value.offset, info.value.position) == (str(path), 1, first)


def test_batch_with_a_good_crc_but_bad_records_raises(mdir):
    path = write_segment(mdir, 0, [topic_record("a", ID_A)])
    first = path.stat().st_size
    bad = v2_batch(b"\x20not a record at all", count=1, base_offset=1)   # CRC computed
    path.write_bytes(path.read_bytes() + bad)
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert info.value.path == str(path) and info.value.position == first


def test_null_record_value_raises(mdir):
    path = mdir / f"{0:020d}.log"
    path.write_bytes(encode_batch([(None, None)], timestamp=0))
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "null value" in info.value.message
    assert (info.value.path, info.value.offset, info.value.position) == (str(path), 0, 0)


def test_error_position_in_a_later_chunk(mdir, monkeypatch):
    values = [topic_record(f"t{i}", uuid.UUID(int=i + 1)) for i in range(20)]
    values[13] = topic_record("x", ID_A, frame_version=2)
    path = write_segment(mdir, 0, values, per_batch=1)
    position = sum(len(encode_batch([(None, v)], timestamp=0)) for v in values[:13])
    monkeypatch.setattr(cm, "_CHUNK", 300)
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert (info.value.path, info.value.offset, info.value.position) == (str(path), 13, position)


# -- torn and corrupt batches ------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 61, -1])
def test_torn_last_batch_is_the_end(mdir, cut):
    write_segment(mdir, 0, [topic_record("a", ID_A)])
    torn = encode_batch([(None, topic_record("b", ID_B))], base_offset=1, timestamp=0)
    torn = torn[:cut]
    seg = write_segment(mdir, 2, [config_record(TOPIC, "a", "cleanup.policy", "compact")])
    seg.write_bytes(seg.read_bytes() + torn)
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["a"] and md.cleanup_policy("a") == "compact"
    assert md.source.torn_tail_bytes == len(torn) and md.source.tail_error is None
    assert md.source.end_offset == 3


def test_corrupt_last_batch_ends_the_log(mdir, monkeypatch):
    monkeypatch.setattr(cm, "_CHUNK", 50)     # the bad batch is read at its own position
    seg = write_segment(mdir, 0, [topic_record("a", ID_A)])
    bad = bytearray(encode_batch([(None, topic_record("b", ID_B))], base_offset=1, timestamp=0))
    bad[-1] ^= 0xFF                                          # CRC mismatch
    zeros = b"\x00" * 64                                     # what a preallocated tail holds
    seg.write_bytes(seg.read_bytes() + bytes(bad) + zeros)
    md = read_cluster_metadata(mdir)
    assert sorted(md.topics) == ["a"]
    assert md.source.torn_tail_bytes == len(bad) + 64
    assert "crc" in md.source.tail_error.lower()
    assert f"path={seg}" in md.source.tail_error
    assert f"position={seg.stat().st_size - len(bad) - 64}" in md.source.tail_error


def test_torn_batch_before_the_last_segment_raises(mdir):
    seg = write_segment(mdir, 0, [topic_record("a", ID_A)])
    seg.write_bytes(seg.read_bytes() + encode_batch([(None, b"\x01")], base_offset=1)[:20])
    write_segment(mdir, 1, [topic_record("b", ID_B)])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "ends inside a batch" in info.value.message
    assert info.value.path == str(seg)


def test_corrupt_batch_before_the_last_segment_raises(mdir):
    seg = write_segment(mdir, 0, [topic_record("a", ID_A), topic_record("b", ID_B)], per_batch=1)
    data = bytearray(seg.read_bytes())
    data[-1] ^= 0xFF
    seg.write_bytes(bytes(data))
    write_segment(mdir, 2, [topic_record("c", ID_A2)])
    first = len(encode_batch([(None, topic_record("a", ID_A))], timestamp=0))
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert (info.value.path, info.value.position) == (str(seg), first)


def test_torn_snapshot_raises(mdir):
    snap = write_snapshot(mdir, 2, [topic_record("a", ID_A), topic_record("b", ID_B)])
    snap.write_bytes(snap.read_bytes()[:-5])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "snapshot ends inside a batch" in info.value.message
    assert info.value.path == str(snap)


def test_bad_record_in_snapshot_names_the_snapshot(mdir):
    snap = write_snapshot(mdir, 2, [topic_record("a", ID_A),
                                    topic_record("b", ID_B, frame_version=0)])
    with pytest.raises(CorruptRecordError) as info:
        read_cluster_metadata(mdir)
    assert "frame version 0" in info.value.message
    header = len(control_batch(3, 0))
    assert (info.value.path, info.value.offset, info.value.position) == (str(snap), 1, header)


# -- finding the log -------------------------------------------------------------------------


def test_find_metadata_log(tmp_path):
    log_dir = tmp_path / "kraft-logs"
    (log_dir / "orders-0").mkdir(parents=True)
    assert find_metadata_log(log_dir) is None
    assert find_metadata_log(tmp_path / "does-not-exist") is None
    part = log_dir / METADATA_TOPIC_PARTITION_DIR
    part.mkdir()
    assert find_metadata_log(log_dir) == str(part)
    assert find_metadata_log(str(log_dir)) == str(part)
    assert find_metadata_log(part) == str(part)
    assert find_metadata_log(str(part) + os.sep) == str(part) + os.sep
    (tmp_path / "f" / METADATA_TOPIC_PARTITION_DIR).parent.mkdir()
    (tmp_path / "f" / METADATA_TOPIC_PARTITION_DIR).write_text("not a directory")
    assert find_metadata_log(tmp_path / "f") is None
