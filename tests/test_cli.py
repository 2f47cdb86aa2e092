"""The kafkastore command line: main(argv) -> exit code."""

from __future__ import annotations

import kafkastore as ks
from kafkastore import cli


def test_demo_writes_a_kafka_segment_and_reads_it_back(tmp_path, capsys):
    assert cli.main(["demo", str(tmp_path), "--records", "5000", "--batch-size", "500"]) == 0
    segment = tmp_path / "demo-0" / "00000000000000000000.log"
    data = segment.read_bytes()
    # 2 batches per codec x 5 codecs, plus the COMMIT marker, all valid
    scan = ks.scan_batches(data)
    assert scan.error is None and scan.valid_bytes == len(data)
    assert len(scan) == 11
    batches = list(ks.iter_batches(data))
    assert [b.compression.name for b in batches[:-1:2]] == ["NONE", "GZIP", "SNAPPY", "LZ4",
                                                            "ZSTD"]
    marker = batches[-1]
    assert marker.is_control and marker.is_transactional and marker.size_in_bytes == 78
    assert ks.parse_control_record(next(iter(marker))).type == ks.ControlRecordType.COMMIT
    offsets = [r.offset for r in ks.iter_records(data)]
    assert offsets == list(range(5000))
    out = capsys.readouterr().out
    assert "wrote 5000 records in 10 batches + 1 COMMIT marker" in out
    assert f"header scan with CRC check: 11 batches, {len(data)} valid bytes" in out


def test_batch_line_follows_kafka_dump_log(tmp_path):
    data = ks.encode_batch([(b"k", b"v", 1700000000000)], base_offset=7, producer_id=9,
                           producer_epoch=2, base_sequence=5, partition_leader_epoch=3)
    batch = ks.read_batch(data)
    line = cli.batch_line(batch)
    assert line == (
        "baseOffset: 7 lastOffset: 7 count: 1 baseSequence: 5 lastSequence: 5 producerId: 9 "
        "producerEpoch: 2 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 "
        f"size: {len(data)} magic: 2 compresscodec: none crc: {batch.crc} isvalid: true"
    )


def test_errors_become_exit_codes(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert cli.main(["demo", str(blocker / "sub")]) == 2
    assert "kafkastore demo:" in capsys.readouterr().err
