"""The kafkastore command line: main(argv) -> exit code."""

from __future__ import annotations

import json
import re

import pytest

import kafkastore as ks
from kafkastore import cli


def test_demo_tours_the_commands_on_a_log_directory(tmp_path, capsys):
    assert cli.main(["demo", str(tmp_path), "--records", "3000"]) == 0
    out = capsys.readouterr().out
    commands = [line.split()[2] for line in out.splitlines() if line.startswith("$ kafkastore")]
    assert commands == ["produce", "describe", "consume", "dump-log", "verify", "verify",
                        "verify", "compact", "consume", "describe"]
    assert "produced 3000 records to orders" in out
    assert "40 bytes of a partial entry at the end" in out and "(exit code 1)" in out
    repaired = re.findall(r"orders-(\d): recovered; (\d+) bytes truncated", out)
    assert sorted(n for _, n in repaired) == ["0", "0", "40"]
    # what it leaves: topic orders, 3 partitions, every record's key the customer in its
    # value, compacted (one record per customer in the cleaned segments), nothing torn
    parts = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert parts == ["orders-0", "orders-1", "orders-2"]
    seen = {}
    for part in parts:
        segments = sorted((tmp_path / part).glob("*.log"))
        data = b"".join(seg.read_bytes() for seg in segments)
        scan = ks.scan_batches(data)
        assert scan.error is None and scan.valid_bytes == len(data)
        keys = [r.key for r in ks.iter_records(data)]
        assert len(keys) == len(set(keys)), part         # compacted, the active one empty
        for r in ks.iter_records(data):
            assert json.loads(r.value)["customer"].encode() == r.key
            seen.setdefault(r.key, set()).add(part)
    assert all(len(where) == 1 for where in seen.values())   # a key, one partition
    assert cli.main(["verify", str(tmp_path)]) == 0


@pytest.mark.parametrize("records", [1, 2, 7])
def test_demo_with_so_few_records_that_partitions_are_empty(tmp_path, capsys, records):
    assert cli.main(["demo", str(tmp_path), "--records", str(records)]) == 0
    out = capsys.readouterr().out
    assert f"produced {records} records to orders" in out and "40 bytes truncated" in out


def test_demo_rejects_a_bad_size(tmp_path, capsys):
    assert cli.main(["demo", str(tmp_path), "--records", "0"]) == 2
    assert "--records must be at least 1" in capsys.readouterr().err


def test_dump_log_batch_line_follows_kafka_dump_log(tmp_path, capsys):
    data = ks.encode_batch([(b"k", b"v", 1700000000000)], base_offset=7, producer_id=9,
                           producer_epoch=2, base_sequence=5, partition_leader_epoch=3)
    batch = ks.read_batch(data)
    segment = tmp_path / "00000000000000000007.log"
    segment.write_bytes(data)
    assert cli.main(["dump-log", "--files", str(segment)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"Dumping {segment}",
        "Log starting offset: 7",
        "baseOffset: 7 lastOffset: 7 count: 1 baseSequence: 5 lastSequence: 5 producerId: 9 "
        "producerEpoch: 2 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 "
        f"size: {len(data)} magic: 2 compresscodec: none crc: {batch.crc} isvalid: true",
    ]


def test_errors_become_exit_codes(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert cli.main(["demo", str(blocker / "sub")]) == 2
    assert "kafkastore demo:" in capsys.readouterr().err
