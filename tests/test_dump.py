"""kafkastore.dump: Kafka's kafka-dump-log.sh output, byte for byte (kafka-storage.md section 9).

Expected output comes from two independent places, never from running kafkastore.dump:

* the reference segments' dumps in ``tests/data/dump/`` (plain, ``--deep-iteration
  --print-data-log``, ``.index``, ``.timeindex``), written by
  ``tests/data/dump/make_expected.py`` from the vectors' own decodes (``expected.json``,
  ``*.records.jsonl``) and the line formats of section 9, without kafkastore;
* lines written out in the tests below from the bytes the test itself built (a CRC is read
  from the batch's own CRC field; offsets, sizes and timestamps are the ones written).

The run covers one backend; the suite runs twice (plain and KAFKASTORE_NO_EXTENSIONS=1).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from kafkastore.dump import DumpOptions, batch_line, dump_files, dumper, java_utf8, raw_batch
from kafkastore.records import encode_batch, encode_control_batch, read_batch
from kafkastore.types import CompressionType, ControlRecordType, TimestampType

DATA = Path(__file__).resolve().parent / "data" / "dump"
SEGMENTS = {"s1_v2_mixed_codecs": "00000000000000114514",
            "s2_mixed_magic": "00000000000001000000"}
S2 = "00000000000001000000"


def run(files, **options):
    """``(exit code, stdout, stderr)`` of one dump."""
    out, err = io.StringIO(), io.StringIO()
    rc = dump_files([str(f) for f in files], DumpOptions(**options), out, err)
    return rc, out.getvalue(), err.getvalue()


def expected(name: str, directory: Path) -> str:
    path = DATA / f"{name}.txt"
    text = (path.read_text(encoding="utf-8") if path.exists()
            else gzip.decompress(path.with_suffix(".txt.gz").read_bytes()).decode("utf-8"))
    return text.replace("@DIR@", str(directory))


def offset_index(*entries) -> bytes:
    """An .index file by hand: (relativeOffset int32, position int32) big-endian."""
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def time_index(*entries) -> bytes:
    """A .timeindex file by hand: (timestamp int64, relativeOffset int32) big-endian."""
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


def stored_crc(entry: bytes) -> int:
    """The CRC field of an entry: at byte 17 for v2, at byte 12 for v0/v1."""
    return struct.unpack_from(">I", entry, 17 if entry[16] >= 2 else 12)[0]


@pytest.fixture
def s2_copy(vectors_dir, tmp_path) -> Path:
    """A writable copy of the s2 segment (log, index, time index) in tmp_path."""
    src = vectors_dir / "segments" / "s2_mixed_magic"
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copyfile(src / f"{S2}{suffix}", tmp_path / f"{S2}{suffix}")
    return tmp_path


# -- the reference segments ------------------------------------------------------------------


@pytest.mark.parametrize("segment", sorted(SEGMENTS))
@pytest.mark.parametrize("kind, suffix, options", [
    ("log", ".log", {}),
    ("log.deep-print", ".log", {"deep_iteration": True, "print_data_log": True}),
    ("log.deep-print", ".log", {"print_data_log": True}),   # implies deep iteration
    ("index", ".index", {}),
    ("timeindex", ".timeindex", {}),
])
def test_reference_segments_dump_as_kafka_prints_them(vectors_dir, segment, kind, suffix,
                                                      options):
    directory = vectors_dir / "segments" / segment
    rc, out, err = run([directory / f"{SEGMENTS[segment]}{suffix}"], **options)
    assert (rc, err) == (0, "")
    assert out == expected(f"{segment}.{kind}", directory)


@pytest.mark.parametrize("segment", sorted(SEGMENTS))
def test_deep_iteration_without_data_is_the_record_metadata(vectors_dir, segment):
    directory = vectors_dir / "segments" / segment
    rc, out, err = run([directory / f"{SEGMENTS[segment]}.log"], deep_iteration=True)
    want = [line.split(" key: ")[0].split(" payload: ")[0]
            for line in expected(f"{segment}.log.deep-print", directory).splitlines()]
    assert (rc, err) == (0, "")
    assert out.splitlines() == want


@pytest.mark.parametrize("segment", sorted(SEGMENTS))
def test_several_files_in_one_run(vectors_dir, segment):
    directory = vectors_dir / "segments" / segment
    base = SEGMENTS[segment]
    rc, out, err = run([directory / f"{base}.index", directory / f"{base}.log",
                        directory / f"{base}.timeindex"])
    assert (rc, err) == (0, "")
    assert out == "".join(expected(f"{segment}.{k}", directory)
                          for k in ("index", "log", "timeindex"))


def test_large_entries_are_crc_checked_in_windows(vectors_dir, monkeypatch):
    # every entry takes the streaming path (header read from the file, CRC in windows):
    # the lines must not change
    monkeypatch.setattr(dumper, "_STREAM_THRESHOLD", 0)
    monkeypatch.setattr(raw_batch, "_STREAM_WINDOW", 100)
    for segment, base in SEGMENTS.items():
        directory = vectors_dir / "segments" / segment
        rc, out, err = run([directory / f"{base}.log"])
        assert (rc, err) == (0, "")
        assert out == expected(f"{segment}.log", directory)


def test_batch_line_of_the_kernels_batches(vectors_dir):
    """dump's batch line formatter, for kernel batch objects too."""
    directory = vectors_dir / "segments" / "s2_mixed_magic"
    data = (directory / f"{S2}.log").read_bytes()
    lines = expected("s2_mixed_magic.log", directory).splitlines()[2:]
    pos = 0
    for line in lines:
        batch = read_batch(data, pos)
        assert batch_line(batch) == line
        pos += batch.size_in_bytes


# -- the offset index ------------------------------------------------------------------------


def test_index_entries_pointing_at_other_batches_are_mismatches(s2_copy):
    index = s2_copy / f"{S2}.index"
    # offsets 1000020 and 1000037 point at the batches of 1000018 (7170) and 1000033 (15361)
    index.write_bytes(offset_index((6, 4380), (20, 7170), (29, 13074), (37, 15361)))
    rc, out, err = run([index])
    assert rc == 0
    assert out == (f"Dumping {index}\n"
                   "offset: 1000006 position: 4380\n"
                   "offset: 1000020 position: 7170\n"
                   "offset: 1000029 position: 13074\n"
                   "offset: 1000037 position: 15361\n")
    assert err == (f"Mismatches in :{index}\n"
                   "  Index offset: 1000037, log offset: 1000033\n"
                   "  Index offset: 1000020, log offset: 1000018\n")
    # --verify-index-only: the same checks, no entries printed
    rc, out, err2 = run([index], verify_index_only=True)
    assert (rc, out, err2) == (0, f"Dumping {index}\n", err)


def test_mismatch_paths_are_javas_absolute_paths(s2_copy, monkeypatch):
    (s2_copy / "sub").mkdir()
    for suffix in (".log", ".index"):
        (s2_copy / f"{S2}{suffix}").rename(s2_copy / "sub" / f"{S2}{suffix}")
    (s2_copy / "sub" / f"{S2}.index").write_bytes(offset_index((20, 7170)))
    monkeypatch.chdir(s2_copy)
    rc, out, err = run([f"sub//{S2}.index/"])   # File normalises "//" and a trailing "/"
    assert rc == 0
    assert out.splitlines()[0] == f"Dumping sub/{S2}.index"
    assert err == (f"Mismatches in :{os.getcwd()}/sub/{S2}.index\n"
                   "  Index offset: 1000020, log offset: 1000018\n")


def test_zero_padding_of_an_untrimmed_index_ends_the_dump(s2_copy, vectors_dir):
    index, tindex = s2_copy / f"{S2}.index", s2_copy / f"{S2}.timeindex"
    index.write_bytes(index.read_bytes() + bytes(8 * 10))
    tindex.write_bytes(tindex.read_bytes() + bytes(12 * 10))
    directory = vectors_dir / "segments" / "s2_mixed_magic"
    for path, kind in ((index, "index"), (tindex, "timeindex")):
        rc, out, err = run([path])
        assert (rc, err) == (0, "")
        assert out == expected(f"s2_mixed_magic.{kind}", directory).replace(
            str(directory), str(s2_copy))
    # Kafka's sanity check does not see zero padding (the last entry is the base offset)
    assert run([index], index_sanity_check=True) == (
        0, f"Dumping {index}\n{index} passed sanity check.\n", "")


def test_empty_indexes(s2_copy):
    index, tindex = s2_copy / f"{S2}.index", s2_copy / f"{S2}.timeindex"
    index.write_bytes(b"")
    tindex.write_bytes(b"")
    assert run([index]) == (0, f"Dumping {index}\n{index} is empty.\n", "")
    # "is empty." comes before the sanity check
    assert run([index], index_sanity_check=True) == (
        0, f"Dumping {index}\n{index} is empty.\n", "")
    # a time index has no "is empty." line; its sanity check passes
    assert run([tindex]) == (0, f"Dumping {tindex}\n", "")
    assert run([tindex], index_sanity_check=True) == (
        0, f"Dumping {tindex}\n{tindex} passed sanity check.\n", "")


def test_index_sanity_check(s2_copy):
    index = s2_copy / f"{S2}.index"
    assert run([index], index_sanity_check=True) == (
        0, f"Dumping {index}\n{index} passed sanity check.\n", "")
    index.write_bytes(offset_index((6, 4380), (-1, 8646)))    # last offset below the base
    rc, out, err = run([index], index_sanity_check=True)
    assert (rc, out) == (1, f"Dumping {index}\n")
    assert err.startswith(f"kafkastore: {index}: Corrupt index found, index file (")
    assert "last offset is 999999 which is less than the base offset 1000000" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    index.write_bytes(offset_index((6, 4380)) + b"\0\0\0")    # not a multiple of 8
    rc, out, err = run([index], index_sanity_check=True)
    assert rc == 1 and "neither positive nor a multiple of 8" in err
    tindex = s2_copy / f"{S2}.timeindex"
    tindex.write_bytes(time_index((500, 20), (400, 29)))        # last below the first
    rc, out, err = run([tindex], index_sanity_check=True)
    assert rc == 1 and "last timestamp is 400 which is less than the first timestamp 500" in err


def test_index_entries_past_the_log_or_at_no_batch_are_errors(s2_copy):
    index = s2_copy / f"{S2}.index"
    index.write_bytes(offset_index((6, 4380), (20, 999999)))
    rc, out, err = run([index])
    assert rc == 1
    assert out == f"Dumping {index}\noffset: 1000006 position: 4380\n"
    assert err == (f"kafkastore: {index}: index entry 1 (offset 1000020) points at position "
                   "999999, outside the log (29190 bytes)\n")
    # a batch larger than --max-message-size: Kafka finds no batch there either
    index.write_bytes(offset_index((6, 4380)))
    rc, out, err = run([index], max_message_size=100)
    assert rc == 1 and "no complete batch starts within --max-message-size (100)" in err


def test_index_without_its_log(s2_copy):
    (s2_copy / f"{S2}.log").unlink()
    index = s2_copy / f"{S2}.index"
    rc, out, err = run([index])
    assert (rc, out) == (1, f"Dumping {index}\n")
    assert err == f"kafkastore: {index}: No such file or directory: {s2_copy}/{S2}.log\n"


# -- the time index --------------------------------------------------------------------------


def _three_batches(directory: Path) -> Path:
    """Offsets 0-4 (max ts 1004), 5-9 (max ts 509), 10-14 (max ts 1500); empty .index."""
    log = directory / "00000000000000000000.log"
    log.write_bytes(
        encode_batch([(b"k", b"v", 1000 + i) for i in range(5)], base_offset=0)
        + encode_batch([(b"k", b"v", 505 + i) for i in range(5)], base_offset=5)
        + encode_batch([(b"k", b"v", 1500 - i) for i in range(5)], base_offset=10))
    (directory / "00000000000000000000.index").write_bytes(b"")
    return log


def test_time_index_problems(tmp_path):
    _three_batches(tmp_path)
    tindex = tmp_path / "00000000000000000000.timeindex"
    tindex.write_bytes(time_index(
        (1004, 4),    # right
        (509, 9),     # right for its batch, but not above the entry before it
        (3000, 14),   # the batch ending at 14 has max timestamp 1500
        (3001, 12),   # no batch ends at 12: the first to reach it ends at 14
        (3002, 99),   # beyond the log
    ))
    rc, out, err = run([tindex])
    assert rc == 0
    assert out == (f"Dumping {tindex}\n"
                   "timestamp: 1004 offset: 4\n"
                   "timestamp: 509 offset: 9\n"
                   "timestamp: 3000 offset: 14\n"
                   "timestamp: 3001 offset: 12\n"
                   "timestamp: 3002 offset: 99\n")
    assert err == (f"Found timestamp mismatch in :{tindex}\n"
                   "  Index timestamp: 3000, log timestamp: 1500\n"
                   f"Found out of order timestamp in :{tindex}\n"
                   "  Index timestamp: 509, Previously indexed timestamp: 1004\n"
                   "The following indexed offsets are not found in the log.\n"
                   "Indexed offset: 12, found log offset: 14\n"
                   "Indexed offset: 99, found log offset: -1\n")
    rc, out, err2 = run([tindex], verify_index_only=True)
    assert (rc, out, err2) == (0, f"Dumping {tindex}\n", err)


def test_time_index_uses_the_offset_index_to_find_the_batch(tmp_path):
    log = _three_batches(tmp_path)
    data = log.read_bytes()
    second = read_batch(data).size_in_bytes
    # an offset index entry for offset 9 at the second batch; entries for offsets 9 and 14
    (tmp_path / "00000000000000000000.index").write_bytes(offset_index((9, second)))
    tindex = tmp_path / "00000000000000000000.timeindex"
    tindex.write_bytes(time_index((1004, 4), (1500, 14)))
    assert run([tindex]) == (
        0, f"Dumping {tindex}\ntimestamp: 1004 offset: 4\ntimestamp: 1500 offset: 14\n", "")


# -- the log ---------------------------------------------------------------------------------


def test_partial_trailing_batch(s2_copy):
    log = s2_copy / f"{S2}.log"
    data = log.read_bytes()
    log.write_bytes(data + data[:40])
    rc, out, err = run([log])
    assert (rc, err) == (0, "")
    assert out.endswith(f"Found 40 invalid bytes at the end of {S2}.log\n")
    # only without --max-bytes, or with Kafka's default value, which Kafka cannot tell apart
    assert "invalid bytes" not in run([log], max_bytes=10**9)[1]
    assert run([log], max_bytes=2**31 - 1)[1] == out


def test_max_bytes_limits_the_batches_read(s2_copy, vectors_dir):
    log = s2_copy / f"{S2}.log"
    lines = expected("s2_mixed_magic.log", vectors_dir / "segments" / "s2_mixed_magic")
    lines = lines.replace(str(vectors_dir / "segments" / "s2_mixed_magic"), str(s2_copy))
    lines = lines.splitlines(keepends=True)
    # the 9th entry (the v0 gzip wrapper at 5840) ends at 7170
    assert run([log], max_bytes=7170) == (0, "".join(lines[:2 + 9]), "")
    assert run([log], max_bytes=7169) == (0, "".join(lines[:2 + 8]), "")
    assert run([log], max_bytes=0) == (0, "".join(lines[:2]), "")


def test_corrupt_size_field_stops_the_file(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    first = encode_batch([(b"k", b"v", 1000)], base_offset=0)
    log.write_bytes(first + struct.pack(">qi", 1, 5) + bytes(30))
    other = tmp_path / "00000000000000000007.log"
    other.write_bytes(encode_batch([(b"k", b"v", 1000)], base_offset=7))
    rc, out, err = run([log, other])
    assert rc == 1
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ")
    assert lines[3:5] == [f"Dumping {other}", "Log starting offset: 7"]   # the next file
    assert len(lines) == 6
    assert err == (f"kafkastore: {log}: Found record size 5 smaller than minimum record "
                   f"overhead (14) in file {log}. (position {len(first)}, offset 1)\n")


def test_preallocated_zeros_are_a_corrupt_size_field(tmp_path):
    # Kafka's dump aborts on the zero tail of an untrimmed active segment, too
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(encode_batch([(b"k", b"v", 1000)]) + bytes(4096))
    rc, _out, err = run([log])
    assert rc == 1 and "Found record size 0 smaller than minimum record overhead" in err


@pytest.mark.parametrize("name", ["missing.log", "00000000000000000000.log"])
def test_missing_file(tmp_path, name):
    path = tmp_path / name
    rc, out, err = run([path])
    assert rc == 1 and "Traceback" not in err
    if name == "missing.log":   # Kafka parses the base offset first
        assert out == f"Dumping {path}\n"
        assert err == (f"kafkastore: {path}: file name does not start with an offset: "
                       'For input string: "missing"\n')
    else:
        assert out == f"Dumping {path}\nLog starting offset: 0\n"
        assert err == f"kafkastore: {path}: No such file or directory\n"


def test_unreadable_directory_is_an_error(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.mkdir()
    rc, _out, err = run([path])
    assert rc == 1 and err.startswith(f"kafkastore: {path}: ") and "Traceback" not in err


def test_legacy_segment(tmp_path):
    v0 = encode_batch([(b"a", b"one"), (None, b"two")], magic=0, base_offset=0)
    v1 = encode_batch([(b"b", b"three", 1700000000000)], magic=1, base_offset=2)
    wrapper = encode_batch([(b"c", b"four", 1700000000005), (b"d", None, 1700000000003)],
                           magic=1, base_offset=3, compression="gzip")
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(v0 + v1 + wrapper)
    n0 = 12 + struct.unpack_from(">i", v0, 8)[0]
    e0, e1 = v0[:n0], v0[n0:]                       # key "a" + "one"; null key + "two"

    def inner_crc(magic, ts, key, value):
        body = bytes([magic, 0]) + struct.pack(">q", ts)
        for part in (key, value):
            body += b"\xff\xff\xff\xff" if part is None else struct.pack(">i", len(part)) + part
        return zlib.crc32(body)

    rc, out, err = run([log], print_data_log=True)
    assert (rc, err) == (0, "")
    p1, p2, p3 = len(e0), len(v0), len(v0) + len(v1)
    assert out.splitlines() == [
        f"Dumping {log}",
        "Log starting offset: 0",
        (f"offset: 0 position: 0 NoTimestampType: -1 size: {len(e0)} magic: 0 "
        f"compresscodec: none crc: {stored_crc(e0)} isvalid: true"),
        (f"| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 3 isValid: true "
        f"crc: {stored_crc(e0)}}} key: a payload: one"),
        (f"offset: 1 position: {p1} NoTimestampType: -1 size: {len(e1)} magic: 0 "
        f"compresscodec: none crc: {stored_crc(e1)} isvalid: true"),
        (f"| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 3 isValid: true "
        f"crc: {stored_crc(e1)}}} payload: two"),
        (f"offset: 2 position: {p2} CreateTime: 1700000000000 size: {len(v1)} magic: 1 "
        f"compresscodec: none crc: {stored_crc(v1)} isvalid: true"),
        (f"| offset: 2 CreateTime: 1700000000000 keySize: 1 valueSize: 5 isValid: true "
        f"crc: {stored_crc(v1)}}} key: b payload: three"),
        (f"offset: 4 position: {p3} CreateTime: 1700000000005 size: {len(wrapper)} magic: 1 "
        f"compresscodec: gzip crc: {stored_crc(wrapper)} isvalid: true"),
        (f"| offset: 3 CreateTime: 1700000000005 keySize: 1 valueSize: 4 isValid: true "
        f"crc: {inner_crc(1, 1700000000005, b'c', b'four')}}} key: c payload: four"),
        (f"| offset: 4 CreateTime: 1700000000003 keySize: 1 valueSize: -1 isValid: true "
        f"crc: {inner_crc(1, 1700000000003, b'd', None)}}} key: d"),
    ]
    # a damaged legacy message: isvalid false on both lines, the dump goes on
    bad = bytearray(v0 + v1)
    bad[-1] ^= 1
    log.write_bytes(bytes(bad))
    rc, out, err = run([log], deep_iteration=True)
    assert (rc, err) == (0, "")
    assert out.splitlines()[-2].endswith("isvalid: false")
    assert out.splitlines()[-1].endswith(f"isValid: false crc: {stored_crc(v1)}}}")


def test_transactional_segment_with_a_commit_marker(tmp_path):
    data = encode_batch([(b"k0", b"v0", 1000), (b"k1", b"v1", 1001)], base_offset=0,
                        is_transactional=True, producer_id=42, producer_epoch=3,
                        base_sequence=0, partition_leader_epoch=7)
    marker = encode_control_batch(ControlRecordType.COMMIT, producer_id=42, producer_epoch=3,
                                  coordinator_epoch=5, base_offset=2, timestamp=1002,
                                  partition_leader_epoch=7)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(data + marker)
    rc, out, err = run([log], print_data_log=True)
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {log}",
        "Log starting offset: 0",
        ("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 42 "
        "producerEpoch: 3 partitionLeaderEpoch: 7 isTransactional: true isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1001 "
        f"size: {len(data)} magic: 2 compresscodec: none crc: {stored_crc(data)} isvalid: true"),
        ("| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [] "
        "key: k0 payload: v0"),
        ("| offset: 1 CreateTime: 1001 keySize: 2 valueSize: 2 sequence: 1 headerKeys: [] "
        "key: k1 payload: v1"),
        ("baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: 42 "
        "producerEpoch: 3 partitionLeaderEpoch: 7 isTransactional: true isControl: true "
        f"deleteHorizonMs: OptionalLong.empty position: {len(data)} CreateTime: 1002 "
        f"size: 78 magic: 2 compresscodec: none crc: {stored_crc(marker)} isvalid: true"),
        # a control batch's data is never printed
        ("| offset: 2 CreateTime: 1002 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5"),
    ]


def test_compacted_gaps_are_non_consecutive_offsets(tmp_path):
    first = encode_batch([(b"a", b"1", 10), (b"b", b"2", 11), (b"c", b"3", 12)],
                         base_offset=0, offsets=[0, 3, 7], last_offset_delta=9)
    second = encode_batch([(b"d", b"4", 13)], base_offset=12)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(first + second)
    rc, out, err = run([log], deep_iteration=True)
    assert rc == 0
    assert out.splitlines()[2].startswith("baseOffset: 0 lastOffset: 9 count: 3 ")
    assert [line.split(" CreateTime")[0] for line in out.splitlines() if line[0] == "|"] == [
        "| offset: 0", "| offset: 3", "| offset: 7", "| offset: 12"]
    assert err == (f"Non-consecutive offsets in {log}\n"
                   "  7 is followed by 12\n"
                   "  3 is followed by 7\n"
                   "  0 is followed by 3\n")
    # shallow iteration does not look at records
    assert run([log])[2] == ""


def test_problem_reports_come_after_every_file_in_kafkas_order(s2_copy, tmp_path):
    index = s2_copy / f"{S2}.index"
    index.write_bytes(offset_index((20, 7170)))
    gaps, times = tmp_path / "gaps", tmp_path / "times"
    gaps.mkdir()
    times.mkdir()
    log = gaps / "00000000000000000000.log"
    log.write_bytes(encode_batch([(b"a", b"1", 10), (b"b", b"2", 11)], offsets=[0, 5]))
    _three_batches(times)
    tindex = times / "00000000000000000000.timeindex"
    tindex.write_bytes(time_index((1004, 4), (600, 9)))   # log timestamp 509
    rc, _out, err = run([log, index, tindex], deep_iteration=True)
    assert rc == 0
    assert err == (f"Mismatches in :{index}\n"
                   "  Index offset: 1000020, log offset: 1000018\n"
                   f"Found timestamp mismatch in :{tindex}\n"
                   "  Index timestamp: 600, log timestamp: 509\n"
                   f"Found out of order timestamp in :{tindex}\n"
                   "  Index timestamp: 600, Previously indexed timestamp: 1004\n"
                   f"Non-consecutive offsets in {log}\n"
                   "  0 is followed by 5\n")


def test_skip_record_metadata(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(encode_batch([(b"k", b"v", 1), (None, b"w", 2), (b"x", None, 3)]))
    rc, out, err = run([log], print_data_log=True, skip_record_metadata=True)
    assert (rc, err) == (0, "")
    # the quirk: a keyless record's line starts " payload:", without the "|"
    assert out.splitlines()[3:] == ["| key: k payload: v", " payload: w", "| key: x"]
    rc, out, err = run([log], deep_iteration=True, skip_record_metadata=True)
    assert out.splitlines()[3:] == ["", "", ""]


def test_headers_and_sequences(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    records = [(b"k", b"v", 1, [("trace", b"1"), ("\u0436\u00e9", None)]),
               (b"k", b"v", 2, []),
               (b"k", b"v", 3, [("", b"")])]
    data = encode_batch(records, base_offset=100, producer_id=1, producer_epoch=0,
                        base_sequence=2**31 - 2)
    log.write_bytes(data)
    rc, out, err = run([log], deep_iteration=True)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert " baseSequence: 2147483646 lastSequence: 0 " in lines[2]   # wraps to 0
    assert lines[3:] == [
        ("| offset: 100 CreateTime: 1 keySize: 1 valueSize: 1 sequence: 2147483646 "
        "headerKeys: [trace,\u0436\u00e9]"),
        "| offset: 101 CreateTime: 2 keySize: 1 valueSize: 1 sequence: 2147483647 headerKeys: []",
        "| offset: 102 CreateTime: 3 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []",
    ]


def test_log_append_time_and_delete_horizon(tmp_path):
    data = encode_batch([(b"k", None, 5), (None, b"", 9)], base_offset=3,
                        timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=777,
                        delete_horizon_ms=123456, compression=CompressionType.ZSTD)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(data)
    rc, out, err = run([log], print_data_log=True)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert (" deleteHorizonMs: OptionalLong[123456] position: 0 LogAppendTime: 777 "
            f"size: {len(data)} magic: 2 compresscodec: zstd ") in lines[2]
    assert lines[3:] == [
        ("| offset: 3 LogAppendTime: 777 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] "
        "key: k"),
        ("| offset: 4 LogAppendTime: 777 keySize: -1 valueSize: 0 sequence: -1 headerKeys: [] "
        "payload: "),
    ]


# Java 17's ``new String(bytes, StandardCharsets.UTF_8)`` on these inputs, recorded with a
# small Java program (it agrees with java_utf8 on 35,000 random malformed inputs). Python's
# "replace" gives a different answer for the encoded surrogates.
JAVA_UTF8 = [
    ("eda080", "\ufffd"),                      # Python: three U+FFFD
    ("eda0", "\ufffd"),                        # Python: two
    ("41eda0", "A\ufffd"),
    ("feedbf41", "\ufffd\ufffdA"),
    ("efedbfed", "\ufffd\ufffd\ufffd"),
    ("e28241", "\ufffdA"),
    ("f09f98", "\ufffd"),
    ("f09f9880", "\U0001f600"),
    ("c3", "\ufffd"),
    ("ed", "\ufffd"),
]


@pytest.mark.parametrize("hexbytes, text", JAVA_UTF8)
def test_java_utf8(hexbytes, text):
    assert java_utf8(bytes.fromhex(hexbytes)) == text


def test_invalid_utf8_is_printed_as_java_decodes_it(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(encode_batch([(b"\xed\xa0\x80k", b"ok\xff", 1, [(b"h\xed\xa0\x80", b"")])]))
    _rc, out, _err = run([log], print_data_log=True)
    assert out.splitlines()[3] == (
        "| offset: 0 CreateTime: 1 keySize: 4 valueSize: 3 sequence: -1 "
        "headerKeys: [h\ufffd] key: \ufffdk payload: ok\ufffd")


# -- control records ---------------------------------------------------------------------------


def _control(tmp_path: Path, type_id: int, value: bytes | None, name="00000000000000000000.log"):
    log = tmp_path / name
    log.write_bytes(encode_batch([(struct.pack(">hh", 0, type_id), value, 50)],
                                 is_control=True, base_offset=0))
    return log


def test_control_record_types(tmp_path):
    log = _control(tmp_path, 2, b"\x00\x00")
    assert run([log], deep_iteration=True)[1].splitlines()[3].endswith(
        "headerKeys: [] controlType: LEADER_CHANGE(2)")
    log = _control(tmp_path, 9, None)
    assert run([log], deep_iteration=True)[1].splitlines()[3].endswith(
        "headerKeys: [] controlType: UNKNOWN(9)")
    log = _control(tmp_path, 5, struct.pack(">hh", 0, 1) + b"\x00")
    assert run([log], deep_iteration=True)[1].splitlines()[3].endswith(
        ' KRaftVersion {"version":0,"kRaftVersion":1}')
    uuid = bytes(range(16))
    voters = (struct.pack(">h", 0) + b"\x02"              # version, 1 voter
              + struct.pack(">i", 3) + uuid
              + b"\x02" + b"\x0bCONTROLLER" + b"\x06host\x01" + struct.pack(">H", 9093)
              + b"\x00"                                    # endpoint tagged fields
              + struct.pack(">hh", 0, 1) + b"\x00"         # feature + its tags
              + b"\x00"                                    # voter tags
              + b"\x01\x07\x02ab")                         # one unknown tag, skipped
    log = _control(tmp_path, 6, voters)
    assert run([log], deep_iteration=True)[1].splitlines()[3].endswith(
        ' KRaftVoters {"version":0,"voters":[{"voterId":3,"voterUuid":"AAECAwQFBgcICQoLDA0ODw",'
        '"endpoints":[{"name":"CONTROLLER","host":"host\\u0001","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    # a key shorter than 4 bytes stops the file, as Kafka's InvalidRecordException does
    log.write_bytes(encode_batch([(b"\x00", b"", 50)], is_control=True))
    rc, _out, err = run([log], deep_iteration=True)
    assert rc == 1 and "fewer than 4 bytes" in err


_VOTER = struct.pack(">h", 0) + b"\x02" + struct.pack(">i", 3) + bytes(range(16))  # 1 voter


@pytest.mark.parametrize("type_id, value, reason", [
    (5, struct.pack(">h", 0) + b"\x00", "control record value ends before its message does"),
    (5, None, "KRAFT_VERSION control record has a null value"),
    (3, struct.pack(">h", 0) + b"\x00\x00", "control record value ends before its message does"),
    (6, struct.pack(">h", 0) + b"\x80", "control record value ends before its message does"),
    (6, struct.pack(">h", 0) + b"\x80" * 5 + b"\x01", "Varint is too long"),
    (6, struct.pack(">h", 0) + b"\x65",
     "Tried to allocate a collection of size 100, but there are only 0 bytes remaining."),
    (6, struct.pack(">h", 0) + b"\x00", "non-nullable field voters was serialized as null"),
    # 2**32 - 1 is Java's int -1: the length -2 is a null, as Kafka's generated reader says
    (6, struct.pack(">h", 0) + b"\xff\xff\xff\xff\x0f",
     "non-nullable field voters was serialized as null"),
    (6, _VOTER + b"\x02\x00", "non-nullable field name was serialized as null"),
    (6, _VOTER + b"\x02\x81\x80\x02" + b"a" * 0x8000,
     "string field name had invalid length 32768"),
    (6, _VOTER + b"\x02\x10abc", "control record value ends before its message does"),
    (6, struct.pack(">h", 0) + b"\x01\x01\x00\x09ab",          # a tag's size past the end
     "control record value ends before its message does"),
], ids=lambda v: v.hex()[:16] if isinstance(v, bytes) else None)
def test_bad_kraft_control_record_values_stop_the_file(tmp_path, type_id, value, reason):
    log = _control(tmp_path, type_id, value)
    rc, _out, err = run([log], deep_iteration=True)
    assert (rc, err) == (1, f"kafkastore: {log}: {reason} (offset 0)\n")


def test_kraft_snapshot_files(tmp_path):
    header = encode_batch([(struct.pack(">hh", 0, 3), struct.pack(">hq", 0, 1234) + b"\x00", 7)],
                          is_control=True)
    footer = encode_batch([(struct.pack(">hh", 0, 4), struct.pack(">h", 0) + b"\x00", 8)],
                          is_control=True, base_offset=1)
    snap = tmp_path / "00000000000000000100-0000000002.checkpoint"
    snap.write_bytes(header + footer)
    rc, out, err = run([snap], deep_iteration=True)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {snap}", "Snapshot end offset: 100, epoch: 2"]
    assert lines[3].endswith(' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}')
    assert lines[5].endswith(' SnapshotFooter {"version":0}')
    boot = tmp_path / "bootstrap.checkpoint"
    boot.write_bytes(header)
    assert run([boot])[1].splitlines()[1] == "KRaft bootstrap snapshot"


# -- oddities Kafka prints anyway --------------------------------------------------------------


def test_unknown_magic_is_read_as_v2(vectors_dir, tmp_path):
    data = (vectors_dir / "negative" / "v2_unknown_magic_3.bin").read_bytes()
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(data)
    as_v2 = bytearray(data)
    as_v2[16] = 2
    ref = tmp_path / "ref" / "00000000000000000000.log"
    ref.parent.mkdir()
    ref.write_bytes(bytes(as_v2))
    rc, out, err = run([log], deep_iteration=True)
    rc2, out2, _ = run([ref], deep_iteration=True)
    assert (rc, err, rc2) == (0, "", 0)
    # the magic byte is not covered by the CRC: the same batch, with "magic: 3"
    assert out.splitlines()[2] == out2.splitlines()[2].replace(" magic: 2 ", " magic: 3 ")
    assert out.splitlines()[2].endswith("isvalid: true")
    assert out.splitlines()[3:] == out2.splitlines()[3:]


def test_bad_crc_is_printed_and_bad_records_stop_the_file(vectors_dir, tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes((vectors_dir / "negative" / "v2_bad_crc_payload_bitflip.bin").read_bytes())
    rc, out, err = run([log])
    assert (rc, err) == (0, "") and out.splitlines()[2].endswith("isvalid: false")
    rc, out, err = run([log], deep_iteration=True)
    assert rc == 1 and len(out.splitlines()) == 3 + 4   # the records before the bad one
    assert err == f"kafkastore: {log}: Found invalid number of record headers -1 (position 0)\n"


def test_vector_with_a_size_field_below_14(vectors_dir, tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes((vectors_dir / "negative" / "v2_batch_length_too_small.bin").read_bytes())
    rc, out, err = run([log])
    assert (rc, out) == (1, f"Dumping {log}\nLog starting offset: 0\n")
    assert "Found record size 10 smaller than minimum record overhead (14)" in err


def test_v2_entry_shorter_than_its_header(tmp_path):
    # Kafka reads the 61-byte header from the file, past the 26-byte entry: the next entry's
    # bytes; the CRC check fails (size < 61)
    second = encode_batch([(b"k", b"v", 1)], base_offset=5)
    short = struct.pack(">qi", 0, 14) + struct.pack(">ib", -1, 2) + bytes(9)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(short + second)
    rc, out, err = run([log])
    assert (rc, err) == (0, "")
    line = out.splitlines()[2]
    assert line.startswith("baseOffset: 0 lastOffset: ")
    assert line.endswith(" size: 26 magic: 2 compresscodec: none crc: 0 isvalid: false")
    rc, out, err = run([log], deep_iteration=True)
    assert rc == 1 and "smaller than the minimum batch overhead (61)" in err


def test_unknown_codec_stops_the_file(tmp_path):
    data = bytearray(encode_batch([(b"k", b"v", 1)]))
    data[22] |= 0x07            # codec id 7
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(data))
    rc, _out, err = run([log])
    assert rc == 1 and "Unknown compression type id: 7" in err


# -- files Kafka knows and kafkastore does not, and options --------------------------------------


def test_unknown_files_and_empty_txn_and_snapshot_files(tmp_path):
    """Kafka ignores files it does not dump; an empty ``.txnindex`` has no entry, and an
    empty ``.snapshot`` is corrupt: Kafka prints its exception's message (a
    BufferUnderflowException's, null) on stderr and goes on, exit code 0."""
    files = [tmp_path / n for n in ("leader-epoch-checkpoint", "partition.metadata",
                                    "00000000000000000000.txnindex",
                                    "00000000000000000000.snapshot")]
    for f in files:
        f.write_bytes(b"")
    rc, out, err = run(files)
    assert rc == 0
    assert out == "".join(f"Dumping {f}\n" for f in files)
    assert err == (f"Ignoring unknown file {files[0]}\n"
                   f"Ignoring unknown file {files[1]}\n"
                   "Snapshot failed schema validation: null\n")


@pytest.mark.parametrize("option", [{"max_bytes": -1}, {"max_message_size": -5},
                                    {"max_bytes": 2**31}])
def test_invalid_options(tmp_path, option):
    rc, out, err = run([tmp_path / "x.log"], **option)
    assert (rc, out) == (2, "")
    assert err.startswith("kafkastore: invalid max_")


def test_progress(vectors_dir):
    directory = vectors_dir / "segments" / "s1_v2_mixed_codecs"
    base = SEGMENTS["s1_v2_mixed_codecs"]
    files = [directory / f"{base}{s}" for s in (".log", ".index", ".timeindex")]
    calls = []
    out = io.StringIO()
    rc = dump_files([str(f) for f in files], DumpOptions(), out, io.StringIO(),
                    progress=lambda done, total: calls.append((done, total)))
    total = sum(f.stat().st_size for f in files)
    assert rc == 0
    assert len(calls) >= 3 and all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert calls[-1] == (total, total)


def test_write_errors_are_not_file_errors(vectors_dir):
    class Broken(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    log = vectors_dir / "segments" / "s2_mixed_magic" / f"{S2}.log"
    with pytest.raises(BrokenPipeError):
        dump_files([str(log)], DumpOptions(), Broken(), io.StringIO())


# -- JSON --------------------------------------------------------------------------------------

BATCH_KEYS = {"type", "file", "position", "magic", "lastOffset", "timestampType",
              "maxTimestamp", "size", "compression", "crc", "isValid"}
V2_BATCH_KEYS = BATCH_KEYS | {"baseOffset", "count", "baseSequence", "lastSequence",
                              "producerId", "producerEpoch", "partitionLeaderEpoch",
                              "isTransactional", "isControl", "deleteHorizonMs"}
RECORD_KEYS = {"type", "file", "batchPosition", "offset", "timestampType", "timestamp",
               "keySize", "valueSize"}


def test_json_lines_follow_the_documented_schema(vectors_dir):
    directory = vectors_dir / "segments" / "s2_mixed_magic"
    files = [directory / f"{S2}{s}" for s in (".log", ".index", ".timeindex")]
    rc, out, err = run(files, json=True, print_data_log=True)
    assert (rc, err) == (0, "")
    objs = [json.loads(line) for line in out.splitlines()]
    kinds = [o["type"] for o in objs]
    assert kinds.count("file") == 3 and kinds.count("batch") == 25
    assert kinds.count("record") == 61 and kinds.count("index_entry") == 6 + 5
    text = expected("s2_mixed_magic.log.deep-print", directory).splitlines()
    batch_lines = [line for line in text[2:] if not line.startswith("|")]
    batches = [o for o in objs if o["type"] == "batch"]
    for obj, line in zip(batches, batch_lines, strict=False):
        assert set(obj) == (V2_BATCH_KEYS if obj["magic"] >= 2 else BATCH_KEYS)
        assert f" position: {obj['position']} {obj['timestampType']}: {obj['maxTimestamp']} " \
               f"size: {obj['size']} magic: {obj['magic']} compresscodec: " \
               f"{obj['compression']} crc: {obj['crc']} isvalid: true" in line
    records = [o for o in objs if o["type"] == "record"]
    record_lines = [line for line in text if line.startswith("|")]
    for obj, line in zip(records, record_lines, strict=False):
        extra = ({"sequence", "headerKeys", "headers"} if "sequence" in obj
                 else {"isValid", "crc"})
        assert set(obj) == RECORD_KEYS | extra | {"key", "keyBase64", "value", "valueBase64"}
        assert line.startswith(f"| offset: {obj['offset']} {obj['timestampType']}: "
                               f"{obj['timestamp']} keySize: {obj['keySize']} ")
        assert line.endswith(f" key: {obj['key']} payload: {obj['value']}")
        assert obj["keyBase64"] is obj["valueBase64"] is False
    entries = [o for o in objs if o["type"] == "index_entry"]
    assert entries[0] == {"type": "index_entry", "file": str(files[1]), "kind": "offset_index",
                          "slot": 0, "offset": 1000006, "position": 4380}
    assert entries[6] == {"type": "index_entry", "file": str(files[2]), "kind": "time_index",
                          "slot": 0, "timestamp": 1700000010020, "offset": 1000020}
    assert {"type": "log_end", "file": str(files[0]), "validBytes": 29190,
            "sizeInBytes": 29190, "batches": 25} in objs
    assert {"type": "log_start", "file": str(files[0]), "baseOffset": 1000000} in objs


def test_json_problems_errors_and_base64(s2_copy, tmp_path):
    index = s2_copy / f"{S2}.index"
    index.write_bytes(offset_index((20, 7170)))
    log = tmp_path / "00000000000000000000.log"
    data = encode_batch([(b"\xff", b"ok", 1), (b"k", b"v", 2)], offsets=[0, 2],
                        last_offset_delta=2)
    log.write_bytes(data + data[:20])               # a partial batch at the end
    missing = tmp_path / "00000000000000000042.log"
    rc, out, err = run([index, log, missing], json=True, print_data_log=True)
    assert rc == 1
    assert err == f"kafkastore: {missing}: No such file or directory\n"
    objs = [json.loads(line) for line in out.splitlines()]
    rec = next(o for o in objs if o["type"] == "record")
    assert (rec["key"], rec["keyBase64"], rec["value"], rec["valueBase64"]) == (
        "/w==", True, "ok", False)
    assert {"type": "error", "file": str(missing), "error": "FileNotFoundError",
            "message": "No such file or directory"} in objs
    problems = [o for o in objs if o["type"] == "problem"]
    assert problems == [
        {"type": "problem", "file": log.name, "kind": "invalid_bytes", "bytes": 20},
        {"type": "problem", "file": str(index), "kind": "offset_index_mismatch",
         "indexOffset": 1000020, "logOffset": 1000018},
        {"type": "problem", "file": str(log), "kind": "non_consecutive_offsets",
         "first": 0, "second": 2},
    ]


def test_json_skip_record_metadata_keeps_the_offset(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(encode_batch([(b"k", b"v", 1)]))
    _rc, out, _err = run([log], json=True, deep_iteration=True, skip_record_metadata=True)
    rec = [json.loads(line) for line in out.splitlines()][-2]
    assert rec == {"type": "record", "file": str(log), "batchPosition": 0, "offset": 0}
