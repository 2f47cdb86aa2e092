"""``partition.metadata``: a partition directory's topic id (Kafka's
``PartitionMetadataFile``), read, validated and written by ``Log.open(topic_id=)``."""

from __future__ import annotations

import pytest
from _logtools import T0, open_log

from kafkastore.errors import CorruptCheckpointError, InconsistentTopicIdError
from kafkastore.log import Log
from kafkastore.partition_metadata import (
    PARTITION_METADATA_FILENAME,
    read_topic_id,
    write_topic_id,
)

TOPIC_ID = "M1cAgmzaT5ifImzjHDxp2A"   # a Uuid as Kafka prints it


def test_written_in_kafkas_exact_bytes_and_checked_on_open(tmp_path):
    path = tmp_path / "t-0"
    log = Log.open(str(path), topic_id=TOPIC_ID)
    log.append([(b"k", b"v", T0)])
    assert log.topic_id == TOPIC_ID
    log.close()
    assert (path / PARTITION_METADATA_FILENAME).read_bytes() == \
        b"version: 0\ntopic_id: M1cAgmzaT5ifImzjHDxp2A"
    again = Log.open(str(path))              # no id given: the file's
    assert again.topic_id == TOPIC_ID
    again.close()
    again = Log.open(str(path), topic_id=TOPIC_ID)
    again.close()
    with pytest.raises(InconsistentTopicIdError, match="already contained topic ID "
                                                       "M1cAgmzaT5ifImzjHDxp2A"):
        Log.open(str(path), topic_id="AQIDBAUGBwgJCgsMDQ4PEA")
    log = open_log(path)   # the refused open released the directory
    assert log.log_end_offset == 1
    log.close()


@pytest.mark.parametrize("data, line", [
    (b"version: 1\ntopic_id: M1cAgmzaT5ifImzjHDxp2A", 1),
    (b"version 0\ntopic_id: M1cAgmzaT5ifImzjHDxp2A", 1),
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),   # the zero Uuid
    (b"version: 0\ntopic_id: not-a-uuid", 2),
    (b"version: 0\n", 2),
    (b"\xff\xfe", 1),
])
def test_a_damaged_file_is_a_typed_error_with_the_line(tmp_path, data, line):
    (tmp_path / PARTITION_METADATA_FILENAME).write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as info:
        read_topic_id(str(tmp_path))
    assert info.value.line == line and info.value.path.endswith(PARTITION_METADATA_FILENAME)


def test_invalid_ids_are_refused_before_writing(tmp_path):
    for bad in ("", "AAAAAAAAAAAAAAAAAAAAAA", "M1cAgmzaT5ifImzjHDxp2A==", 42):
        with pytest.raises(ValueError):
            write_topic_id(str(tmp_path), bad)
    assert read_topic_id(str(tmp_path)) is None
