"""A new partition gets ``partition.metadata`` (issue 28, item 8): Kafka (2.8+) writes it
in every partition directory it creates, with the topic's id, one id per topic. Checked
against Kafka's format (``PartitionMetadata.encode``: ``version: 0\\ntopic_id: <Uuid>``,
no trailing newline; ``Uuid.randomUuid``: a version-4 UUID, never 0, 1 or one whose string
starts with ``-``), not against the code under test."""

from __future__ import annotations

import base64
import json
import os
import re
import uuid

import pytest
from _logtools import FaultFS, installed

from kafkastore import partition_metadata
from kafkastore.cli import EXIT_OK, EXIT_USAGE, main
from kafkastore.errors import InconsistentTopicIdError, KafkaStorageError, TieredStorageError
from kafkastore.log import Log
from kafkastore.log_view import ReadOnlyLog
from kafkastore.manager import LogManager
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME, write_topic_id
from kafkastore.tiered.upload import upload_partition

T0 = 1_700_000_000_000
OTHER_ID = "M1cAgmzaT5ifImzjHDxp2A"
# Kafka's file, byte for byte: PartitionMetadata.encode has no newline after the id
KAFKA_FILE = re.compile(rb"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})")


def file_id(partition_dir) -> str | None:
    """The topic id in a partition directory's file, read by Kafka's format (above)."""
    path = os.path.join(partition_dir, PARTITION_METADATA_FILENAME)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        m = KAFKA_FILE.fullmatch(f.read())
    assert m, "not Kafka's partition.metadata format"
    return m.group(1).decode()


def assert_kafka_random_uuid(text: str) -> None:
    """What Kafka's Uuid.randomUuid gives: java.util.UUID.randomUUID's bytes (version 4,
    IETF variant), not a reserved id, not starting with '-'."""
    raw = base64.urlsafe_b64decode(text + "==")
    assert len(raw) == 16 and not text.startswith("-")
    u = uuid.UUID(bytes=raw)
    assert u.version == 4 and u.variant == uuid.RFC_4122


def append_one(log: Log) -> None:
    log.append([(b"k", b"v", T0)])


# -- Log.open ---------------------------------------------------------------------------


def test_a_new_partition_gets_a_topic_id_in_kafkas_format_kept_on_reopen(tmp_path):
    path = tmp_path / "orders-0"
    log = Log.open(str(path))
    append_one(log)
    topic_id = log.topic_id
    log.close()
    assert file_id(path) == topic_id
    assert_kafka_random_uuid(topic_id)
    again = Log.open(str(path))
    assert again.topic_id == topic_id and again.log_end_offset == 1
    again.close()
    assert file_id(path) == topic_id


def test_a_new_partition_takes_its_topics_id_from_the_sibling_partitions(tmp_path):
    first = Log.open(str(tmp_path / "orders-0"))
    first.close()
    second = Log.open(str(tmp_path / "orders-7"))
    second.close()
    other_topic = Log.open(str(tmp_path / "orders.eu-0"))   # another topic: its own id
    other_topic.close()
    assert second.topic_id == first.topic_id == file_id(tmp_path / "orders-7")
    assert other_topic.topic_id not in (None, first.topic_id)


def test_sibling_ids_that_disagree_are_refused_before_anything_is_written(tmp_path):
    for p, topic_id in ((0, OTHER_ID), (1, "AQIDBAUGBwgJCgsMDQ4PEA")):
        os.makedirs(tmp_path / f"orders-{p}")
        write_topic_id(str(tmp_path / f"orders-{p}"), topic_id)
    with pytest.raises(InconsistentTopicIdError, match="different topic IDs"):
        Log.open(str(tmp_path / "orders-2"))
    assert file_id(tmp_path / "orders-2") is None
    # given explicitly, the id is the caller's choice
    log = Log.open(str(tmp_path / "orders-2"), topic_id=OTHER_ID)
    log.close()
    assert file_id(tmp_path / "orders-2") == OTHER_ID


def test_an_existing_partition_without_the_file_is_not_rewritten(tmp_path):
    """An old directory (written before kafkastore created the file) keeps working as it
    is: Kafka writes the file only when it is given the topic id (initializeTopicId)."""
    path = tmp_path / "orders-0"
    log = Log.open(str(path))
    append_one(log)
    log.close()
    os.unlink(path / PARTITION_METADATA_FILENAME)
    log = Log.open(str(path))
    assert log.topic_id is None and log.log_end_offset == 1
    append_one(log)
    log.close()
    assert file_id(path) is None


def test_directories_that_are_not_a_topics_partition_get_no_id(tmp_path):
    for name in ("log", "__cluster_metadata-0", "orders-0.0123456789abcdef0123456789abcdef-future"):
        log = Log.open(str(tmp_path / name))
        log.close()
        assert log.topic_id is None and file_id(tmp_path / name) is None, name


def test_the_read_only_seam_never_writes(tmp_path):
    path = tmp_path / "orders-0"
    log = Log.open(str(path))
    append_one(log)
    log.close()
    os.unlink(path / PARTITION_METADATA_FILENAME)
    before = sorted(os.listdir(path))
    view = ReadOnlyLog.open(str(path))
    assert view.log_end_offset == 1
    view.close()
    assert sorted(os.listdir(path)) == before


def test_random_uuid_draws_again_for_kafkas_reserved_ids(monkeypatch):
    """Kafka's Uuid.randomUuid: ZERO_UUID, ONE_UUID and a string starting with '-' (first
    byte 0xf8..0xfb: base64 digit 62) are drawn again."""
    good = uuid.UUID("12345678-1234-4234-9234-123456789abc")
    draws = iter([uuid.UUID(int=0), uuid.UUID(int=1),
                  uuid.UUID(bytes=b"\xf8" + bytes(15)), good])
    monkeypatch.setattr(partition_metadata.uuid, "uuid4", lambda: next(draws))
    assert partition_metadata.random_uuid() == \
        base64.urlsafe_b64encode(good.bytes).rstrip(b"=").decode()


# -- LogManager -------------------------------------------------------------------------


def test_a_log_manager_keeps_one_id_per_topic_across_its_log_directories(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with LogManager(dirs, background=False) as m:
        for p in range(4):
            append_one(m.get_or_create("orders", p))
        m.get_or_create("users", 0)
    found = {d: sorted(os.listdir(d)) for d in dirs}
    assert "orders-0" in found[dirs[0]] + found[dirs[1]]
    assert all(any(n.startswith("orders-") for n in names) for names in found.values())
    ids = {file_id(os.path.join(d, n)) for d in dirs for n in found[d]
           if n.startswith("orders-")}
    users = file_id(os.path.join(next(d for d in dirs if "users-0" in found[d]), "users-0"))
    assert len(ids) == 1 and None not in ids and users not in ids | {None}
    (topic_id,) = ids
    # reopened: the ids stay, and a new partition takes its topic's
    with LogManager(dirs, background=False) as m:
        assert m.get("orders", 3).topic_id == topic_id
        new = m.get_or_create("orders", 4)
        assert new.topic_id == topic_id == file_id(new.dir)


def test_a_log_manager_does_not_rewrite_an_old_partition(tmp_path):
    with LogManager(str(tmp_path), background=False) as m:
        append_one(m.get_or_create("orders", 0))
    os.unlink(tmp_path / "orders-0" / PARTITION_METADATA_FILENAME)
    with LogManager(str(tmp_path), background=False) as m:
        assert m.get("orders", 0).topic_id is None
        append_one(m.get("orders", 0))
    assert file_id(tmp_path / "orders-0") is None


# -- the command line: produce -> tiered upload -----------------------------------------


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def produce(capsys, tmp_path, topic="orders", partitions=2):
    source = tmp_path / "in.txt"
    source.write_text("".join(f"k{i % 5}:value {i}\n" for i in range(200)))
    logs = tmp_path / "logs"
    code, _, err = run(capsys, "produce", logs, topic, "--input", source, "--key-separator",
                       ":", "--partitions", partitions, "--batch-size", 10,
                       "--config", "segment.bytes=1000")
    assert code == EXIT_OK, err
    return logs


def test_produce_writes_one_topic_id_and_describe_shows_it(tmp_path, capsys):
    logs = produce(capsys, tmp_path, partitions=3)
    ids = {file_id(logs / f"orders-{p}") for p in range(3)}
    assert len(ids) == 1 and None not in ids
    (topic_id,) = ids
    assert_kafka_random_uuid(topic_id)
    code, out, _ = run(capsys, "describe", logs, "--json")
    assert code == EXIT_OK
    assert [json.loads(line)["topic_id"] for line in out.splitlines()] == [topic_id] * 3
    code, out, _ = run(capsys, "describe", logs)
    header, *rows = out.splitlines()
    assert "topic id" in header
    assert [row.split()[:2] for row in rows] == [[f"orders-{p}", topic_id] for p in range(3)]


def test_produce_then_tiered_upload_needs_no_topic_id(tmp_path, capsys):
    logs = produce(capsys, tmp_path)
    topic_id = file_id(logs / "orders-0")
    copy = tmp_path / "copy"
    code, out, err = run(capsys, "tiered", "upload", logs / "orders-0", copy)
    assert code == EXIT_OK, err
    uploaded = int(re.search(r"uploaded (\d+) segment", out).group(1))
    assert uploaded >= 1
    # Aiven's layout: <topic>-<topic id>/<partition>/... names the id of partition.metadata
    assert sorted(os.listdir(copy)) == [f"orders-{topic_id}"]
    code, out, _ = run(capsys, "describe", copy, "--tiered", "--json")
    assert code == EXIT_OK and json.loads(out.splitlines()[0])["topic_id"] == topic_id


def test_upload_without_the_file_names_the_flag_and_its_format(tmp_path, capsys):
    logs = produce(capsys, tmp_path)
    os.unlink(logs / "orders-0" / PARTITION_METADATA_FILENAME)
    code, _, err = run(capsys, "tiered", "upload", logs / "orders-0", tmp_path / "copy")
    assert code != EXIT_OK
    assert "--topic-id" in err and "22 characters of URL-safe base64" in err
    assert "give topic_id" not in err
    with pytest.raises(TieredStorageError, match="--topic-id"):
        upload_partition(str(logs / "orders-0"), str(tmp_path / "copy"))
    # given, it is used
    code, _, err = run(capsys, "tiered", "upload", logs / "orders-0", tmp_path / "copy",
                       "--topic-id", OTHER_ID)
    assert code == EXIT_OK, err
    assert sorted(os.listdir(tmp_path / "copy")) == [f"orders-{OTHER_ID}"]


@pytest.mark.parametrize("bad", ["abc", "AAAAAAAAAAAAAAAAAAAAAA", OTHER_ID + "=="])
def test_a_bad_topic_id_flag_is_a_usage_error_naming_the_flag(tmp_path, capsys, bad):
    logs = produce(capsys, tmp_path)
    code, _, err = run(capsys, "tiered", "upload", logs / "orders-0", tmp_path / "copy",
                       "--topic-id", bad)
    assert code == EXIT_USAGE
    assert f"--topic-id {bad!r}" in err and "22 characters of URL-safe base64" in err
    assert not (tmp_path / "copy").exists()


def test_the_upload_help_gives_the_topic_id_format(capsys):
    with pytest.raises(SystemExit):
        main(["tiered", "upload", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--topic-id TOPIC_ID the topic id, a Kafka Uuid: 22 characters of URL-safe " \
           "base64" in out


@pytest.mark.parametrize("op", ["fsync", "rename"])
def test_a_failed_write_of_the_new_file_fails_the_open_and_a_retry_writes_it(tmp_path, op):
    """The file is written (write_atomically: .tmp, fsync, rename) before the open returns:
    a failure there is the open's typed error, with nothing half-written left, and the
    next open writes it."""
    path = tmp_path / "orders-0"
    fs = FaultFS({op: {1: "eio"}})
    with installed(fs):
        with pytest.raises(KafkaStorageError):
            Log.open(str(path))
    assert [f[0] for f in fs.fired] == [op]
    assert file_id(path) is None
    log = Log.open(str(path))
    append_one(log)
    log.close()
    assert log.topic_id == file_id(path) and log.topic_id is not None
    assert not any(name.endswith(".tmp") for name in os.listdir(path))
