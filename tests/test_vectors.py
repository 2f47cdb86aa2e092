"""The shared Kafka reference vectors decode exactly as their sidecars say, on both kernels.

Vectors: ``$KAFKASTORE_VECTORS`` or ``../shared/vectors`` (README.md there documents the
sidecar formats). Every file's sha256 is checked against MANIFEST.json and its sidecar
before it is used, so a modified vector fails loudly instead of silently redefining the
expected decode. The expected values are the sidecars', produced and cross-checked by
independent decoders (kafka-python, aiokafka C and Python, a from-spec reader).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import crc32c
import numpy as np
import pytest

from kafkastore import compression
from kafkastore.errors import CorruptRecordError, InvalidCrcError
from kafkastore.records import parse_control_record

from _helpers import column_rows
from _vectors import VECTORS  # noqa: E402

# Only used to name the parametrised cases at collection time; every test reads the files
# through the ``vectors_dir`` fixture, which skips when the vectors are absent.
_COLLECT_DIR = VECTORS if VECTORS is not None else Path("/nonexistent")


def _manifest_paths(section: str) -> list[str]:
    try:
        manifest = json.loads((_COLLECT_DIR / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return []
    return [entry["path"] if isinstance(entry, dict) else entry for entry in manifest[section]]


VECTOR_PATHS = _manifest_paths("vectors")
SEGMENT_PATHS = _manifest_paths("segments")
TS_TYPES = {"CreateTime": 0, "LogAppendTime": 1, None: -1}
NEGATIVE = ("v2_bad_crc_payload_bitflip.bin", "v2_batch_length_too_small.bin",
            "v2_truncated_tail.bin", "v2_unknown_magic_3.bin")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(value):
    return None if value is None else base64.b64decode(value)


@pytest.fixture(scope="session")
def manifest(vectors_dir):
    return json.loads((vectors_dir / "MANIFEST.json").read_text())


def load_vector(vectors_dir: Path, manifest: dict, path: str):
    """The vector's bytes and sidecar, after checking both against the manifest."""
    entry = next(v for v in manifest["vectors"] if v["path"] == path)
    data = (vectors_dir / path).read_bytes()
    sidecar = json.loads((vectors_dir / path).with_suffix(".json").read_text())
    assert sha256(data) == entry["sha256"], f"{path} was modified (sha256 != MANIFEST)"
    assert sidecar["sha256"] == entry["sha256"], f"{path}: sidecar and MANIFEST disagree"
    assert sidecar["size"] == len(data)
    assert sidecar["file"] == Path(path).name
    assert len(sidecar["batches"]) == entry["entries"]
    assert sum(len(b["records"]) for b in sidecar["batches"]) == entry["records"]
    return data, sidecar


# == integrity =====================================================================================


def test_manifest_lists_every_vector_and_every_hash_matches(vectors_dir, manifest):
    listed = {v["path"] for v in manifest["vectors"]}
    on_disk = {str(p.relative_to(vectors_dir)) for p in vectors_dir.glob("batches/*/*.bin")}
    assert listed == on_disk
    assert listed == set(VECTOR_PATHS)
    for entry in manifest["vectors"]:
        data = (vectors_dir / entry["path"]).read_bytes()
        assert sha256(data) == entry["sha256"], f"{entry['path']} was modified"
    assert sorted(manifest["negative"]) == sorted(NEGATIVE)
    assert {p.name for p in (vectors_dir / "negative").iterdir()} == set(NEGATIVE)
    for seg in manifest["segments"]:
        expected = json.loads((vectors_dir / seg["path"] / "expected.json").read_text())
        for kind, info in expected["files"].items():
            data = (vectors_dir / seg["path"] / info["name"]).read_bytes()
            assert len(data) == info["size"], (seg["path"], kind)
            assert sha256(data) == info["sha256"], f"{seg['path']}/{info['name']} was modified"
        assert expected["files"]["log"]["sha256"] == seg["logSha256"]
    assert len(VECTOR_PATHS) >= 40 and len(SEGMENT_PATHS) == 2


# == batch vectors =================================================================================


def check_v2_batch(batch, exp):
    assert type(batch).__name__ == "RecordBatch"
    assert batch.magic == exp["magic"] == 2
    assert batch.position == exp["position"]
    assert batch.base_offset == exp["baseOffset"]
    assert batch.batch_length == exp["batchLength"]
    assert batch.size_in_bytes == exp["sizeInBytes"]
    assert batch.partition_leader_epoch == exp["partitionLeaderEpoch"]
    assert batch.crc == exp["crc"]
    assert batch.is_valid() is exp["crcValid"]
    assert batch.attributes == exp["attributes"]
    assert batch.compression.name.lower() == exp["compression"]
    assert int(batch.timestamp_type) == TS_TYPES[exp["timestampType"]]
    assert batch.timestamp_type.label == exp["timestampType"]
    assert batch.is_transactional is exp["isTransactional"]
    assert batch.is_control is exp["isControl"]
    assert batch.last_offset_delta == exp["lastOffsetDelta"]
    assert batch.first_timestamp == exp["firstTimestamp"]
    assert batch.max_timestamp == exp["maxTimestamp"]
    assert batch.producer_id == exp["producerId"]
    assert batch.producer_epoch == exp["producerEpoch"]
    assert batch.base_sequence == exp["baseSequence"]
    assert batch.record_count == exp["recordsCount"] == len(exp["records"])
    assert batch.last_offset == exp["lastOffset"]
    assert batch.next_offset == exp["nextOffset"]


def check_v2_record(record, exp, batch_exp):
    assert record.offset == exp["offset"] == batch_exp["baseOffset"] + exp["offsetDelta"]
    assert record.timestamp == exp["timestamp"]
    assert int(record.timestamp_type) == TS_TYPES[exp["timestampType"]]
    assert record.key == b64(exp["key"])
    assert record.value == b64(exp["value"])
    assert (-1 if record.key is None else len(record.key)) == exp["keyLength"]
    assert (-1 if record.value is None else len(record.value)) == exp["valueLength"]
    assert record.headers == tuple((h["key"], b64(h["value"])) for h in exp["headers"])
    if "control" in exp:
        control = parse_control_record(record)
        assert control.type.name == exp["control"]["type"]
        assert control.version == exp["control"]["keyVersion"]
        assert control.coordinator_epoch == exp["control"]["coordinatorEpoch"]


def check_legacy_batch(batch, exp):
    assert type(batch).__name__ == "LegacyRecordBatch"
    assert batch.magic == exp["magic"]
    assert batch.position == exp["position"]
    assert batch.last_offset == exp["offset"] == exp["lastOffset"]
    assert batch.next_offset == exp["nextOffset"]
    assert batch.batch_length == exp["messageSize"]
    assert batch.size_in_bytes == exp["sizeInBytes"]
    assert batch.crc == exp["crc"]
    assert batch.is_valid() is exp["crcValid"]
    assert batch.attributes == exp["attributes"]
    assert batch.compression.name.lower() == exp["compression"]
    assert int(batch.timestamp_type) == TS_TYPES[exp["timestampType"]]
    ts = -1 if exp["timestamp"] is None else exp["timestamp"]
    assert batch.timestamp == batch.first_timestamp == ts
    assert batch.max_timestamp == exp["maxTimestamp"]
    assert batch.base_offset == exp["records"][0]["offset"]
    # legacy batches carry none of the v2 producer state
    assert (batch.partition_leader_epoch, batch.producer_id, batch.producer_epoch,
            batch.base_sequence) == (-1, -1, -1, -1)
    assert batch.record_count is None and batch.last_offset_delta is None
    assert batch.is_transactional is False and batch.is_control is False
    assert batch.key == b64(exp["key"])
    assert (-1 if batch.key is None else len(batch.key)) == exp["keyLength"]
    payload = batch.payload()
    assert (-1 if payload is None else len(payload)) == exp["valueLength"]
    if "innerCompressedBytes" in exp:  # a wrapper: the sidecar leaves the value out
        assert len(payload) == exp["innerCompressedBytes"]
        inflated = compression.decompress(batch.attributes & 7, payload, magic=batch.magic)
        assert len(inflated) == exp["innerUncompressedBytes"]
    else:
        assert batch.value == b64(exp["value"])


def check_legacy_record(record, exp):
    assert record.offset == exp["offset"]
    assert record.timestamp == (-1 if exp["timestamp"] is None else exp["timestamp"])
    assert int(record.timestamp_type) == TS_TYPES[exp["timestampType"]]
    assert record.key == b64(exp["key"])
    assert record.value == b64(exp["value"])
    assert (-1 if record.key is None else len(record.key)) == exp["keyLength"]
    assert (-1 if record.value is None else len(record.value)) == exp["valueLength"]
    assert record.headers == () and exp["headers"] == []


@pytest.mark.parametrize("path", VECTOR_PATHS)
def test_vector_decodes_as_its_sidecar_says(rb, vectors_dir, manifest, path):
    data, sidecar = load_vector(vectors_dir, manifest, path)
    batches = list(rb.iter_batches(data))
    assert len(batches) == len(sidecar["batches"])
    for batch, exp in zip(batches, sidecar["batches"]):
        records = list(batch)
        assert len(records) == len(exp["records"])
        if exp["magic"] == 2:
            check_v2_batch(batch, exp)
            for record, rexp in zip(records, exp["records"]):
                check_v2_record(record, rexp, exp)
        else:
            check_legacy_batch(batch, exp)
            for record, rexp in zip(records, exp["records"]):
                check_legacy_record(record, rexp)
    # read_batch at each position gives the same batch
    for exp in sidecar["batches"]:
        batch = rb.read_batch(data, exp["position"])
        assert batch.size_in_bytes == exp["sizeInBytes"]
        assert batch.to_bytes() == data[exp["position"]:exp["position"] + exp["sizeInBytes"]]


def expected_row(r):
    """A sidecar / jsonl record as a :func:`_helpers.column_rows` row."""
    return (r["offset"], -1 if r["timestamp"] is None else r["timestamp"],
            TS_TYPES[r["timestampType"]], b64(r["key"]), b64(r["value"]), len(r["headers"]))


def expected_rows(sidecar, include_control=True):
    rows = []
    for exp in sidecar["batches"]:
        if exp.get("isControl") and not include_control:
            continue
        for r in exp["records"]:
            rows.append(expected_row(r))
    return rows


def check_scan_columns(scan, table, record_count):
    """The scan's columns against the sidecar's batch table; ``record_count(b)`` is the
    expected count of an uncompressed batch (a compressed legacy wrapper's is -1)."""
    assert scan.position.tolist() == [b["position"] for b in table]
    assert scan.size.tolist() == [b["sizeInBytes"] for b in table]
    assert scan.magic.tolist() == [b["magic"] for b in table]
    assert scan.last_offset.tolist() == [b["lastOffset"] for b in table]
    assert scan.max_timestamp.tolist() == [b["maxTimestamp"] for b in table]
    compressed_legacy = [b["magic"] < 2 and b["compression"] != "none" for b in table]
    assert scan.base_offset.tolist() == [
        -1 if c else b.get("baseOffset", b.get("offset")) for b, c in zip(table, compressed_legacy)]
    assert scan.record_count.tolist() == [
        -1 if c else record_count(b) for b, c in zip(table, compressed_legacy)]


@pytest.mark.parametrize("path", VECTOR_PATHS)
def test_vector_decode_columns(rb, vectors_dir, manifest, path):
    data, sidecar = load_vector(vectors_dir, manifest, path)
    cols = rb.decode_columns(data, include_control=True)
    assert column_rows(cols) == expected_rows(sidecar)
    assert cols["offset"].dtype == np.int64 and cols["key_data"].dtype == np.uint8
    plain = rb.decode_columns(data)
    assert column_rows(plain) == expected_rows(sidecar, include_control=False)


@pytest.mark.parametrize("path", VECTOR_PATHS)
def test_vector_scan(rb, vectors_dir, manifest, path):
    data, sidecar = load_vector(vectors_dir, manifest, path)
    scan = rb.scan_batches(data)
    exp = sidecar["batches"]
    assert scan.error is None and scan.valid_bytes == len(data) and not scan.truncated
    check_scan_columns(scan, exp, lambda b: b.get("recordsCount", 1))


# == segments ======================================================================================


def load_segment(vectors_dir, manifest, path):
    seg = next(s for s in manifest["segments"] if s["path"] == path)
    directory = vectors_dir / path
    expected = json.loads((directory / "expected.json").read_text())
    log = (directory / expected["files"]["log"]["name"]).read_bytes()
    assert sha256(log) == seg["logSha256"] == expected["files"]["log"]["sha256"], \
        f"{path}: the .log was modified"
    jsonl = directory / expected["files"]["log"]["name"].replace(".log", ".records.jsonl")
    records = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    assert len(records) == seg["records"] == expected["recordCount"]
    assert len(expected["batches"]) == seg["batches"] == expected["batchCount"]
    return log, expected, records


@pytest.mark.parametrize("path", SEGMENT_PATHS)
def test_segment_walk(rb, vectors_dir, manifest, path):
    log, expected, records = load_segment(vectors_dir, manifest, path)
    batches = list(rb.iter_batches(log))
    table = expected["batches"]
    assert len(batches) == len(table)
    got_records = []
    for batch, exp in zip(batches, table):
        assert batch.position == exp["position"]
        assert batch.size_in_bytes == exp["sizeInBytes"]
        assert batch.magic == exp["magic"]
        assert batch.last_offset == exp["lastOffset"]
        assert batch.next_offset == exp["nextOffset"]
        assert batch.max_timestamp == exp["maxTimestamp"]
        assert batch.compression.name.lower() == exp["compression"]
        assert int(batch.timestamp_type) == TS_TYPES[exp["timestampType"]]
        assert batch.crc == exp["crc"] and batch.is_valid()
        if exp["magic"] == 2:
            assert batch.base_offset == exp["baseOffset"]
            assert batch.is_transactional is exp["isTransactional"]
            assert batch.is_control is exp["isControl"]
            assert batch.producer_id == exp["producerId"]
            assert batch.producer_epoch == exp["producerEpoch"]
            assert batch.base_sequence == exp["baseSequence"]
            assert batch.partition_leader_epoch == exp["partitionLeaderEpoch"]
            assert batch.record_count == exp["records"]
        else:
            assert batch.last_offset == exp["offset"]
        n = 0
        for record in batch:  # control batches included
            got_records.append((record, batch.position))
            n += 1
        assert n == exp["records"]
    assert len(got_records) == len(records)
    for (record, position), exp in zip(got_records, records):
        assert position == exp["batchPosition"]
        assert record.offset == exp["offset"]
        assert record.timestamp == (-1 if exp["timestamp"] is None else exp["timestamp"])
        assert int(record.timestamp_type) == TS_TYPES[exp["timestampType"]]
        assert record.key == b64(exp["key"])
        assert record.value == b64(exp["value"])
        assert record.headers == tuple((h["key"], b64(h["value"])) for h in exp["headers"])


@pytest.mark.parametrize("path", SEGMENT_PATHS)
def test_segment_scan_and_columns(rb, vectors_dir, manifest, path):
    log, expected, records = load_segment(vectors_dir, manifest, path)
    table = expected["batches"]
    scan = rb.scan_batches(log)
    assert scan.error is None
    assert scan.valid_bytes == len(log) and not scan.truncated
    check_scan_columns(scan, table, lambda b: b["records"])
    cols = rb.decode_columns(log, include_control=True)
    assert column_rows(cols) == [expected_row(r) for r in records]
    # a window of the file: from the 3rd batch to the end of the 10th
    start, stop = table[2]["position"], table[9]["position"] + table[9]["sizeInBytes"]
    window = rb.scan_batches(log, start, stop)
    assert window.position.tolist() == [b["position"] for b in table[2:10]]
    assert window.valid_bytes == stop - start
    wanted = [r for r in records if start <= r["batchPosition"] < stop]
    assert [int(o) for o in rb.decode_columns(log, start, stop)["offset"]] == \
        [r["offset"] for r in wanted]


# == negative vectors ==============================================================================


@pytest.fixture
def basic_keys(vectors_dir, manifest):
    return load_vector(vectors_dir, manifest, "batches/v2/v2_basic_keys.bin")


def negative(vectors_dir, name):
    return (vectors_dir / "negative" / name).read_bytes()


def every_read(rb, data):
    """Each read entry point on ``data``, as a call: all must reject a bad header."""
    return (lambda: rb.RecordBatch(data), lambda: rb.read_batch(data),
            lambda: list(rb.iter_batches(data)), lambda: rb.decode_columns(data),
            lambda: list(rb.iter_batches(data, validate=False)))


def test_negative_vectors_are_the_documented_edits(vectors_dir, basic_keys):
    good, _ = basic_keys
    assert len(good) == 156
    bitflip = bytearray(good)
    bitflip[-1] ^= 0x01
    assert negative(vectors_dir, "v2_bad_crc_payload_bitflip.bin") == bytes(bitflip)
    assert negative(vectors_dir, "v2_truncated_tail.bin") == good + good[:40]
    small = bytearray(good)
    small[8:12] = (10).to_bytes(4, "big")
    assert negative(vectors_dir, "v2_batch_length_too_small.bin") == bytes(small)
    magic3 = bytearray(good)
    magic3[16] = 3
    assert negative(vectors_dir, "v2_unknown_magic_3.bin") == bytes(magic3)


def test_negative_bad_crc_payload_bitflip(rb, vectors_dir, basic_keys):
    good, sidecar = basic_keys
    data = negative(vectors_dir, "v2_bad_crc_payload_bitflip.bin")
    with pytest.raises(InvalidCrcError) as info:
        list(rb.iter_batches(data))
    assert info.value.stored == sidecar["batches"][0]["crc"]
    assert info.value.computed == crc32c.crc32c(data[21:])
    assert info.value.position == 0
    batch = rb.read_batch(data)
    assert batch.is_valid() is False
    with pytest.raises(InvalidCrcError):
        batch.validate()
    with pytest.raises(InvalidCrcError):
        rb.decode_columns(data)
    # skipping the CRC, the structure still fails (the flip makes a header count -1)
    (batch,) = list(rb.iter_batches(data, validate=False))
    it = iter(batch)
    for rexp in sidecar["batches"][0]["records"][:-1]:
        assert next(it).offset == rexp["offset"]
    with pytest.raises(CorruptRecordError) as info:
        next(it)
    assert not isinstance(info.value, InvalidCrcError)
    with pytest.raises(CorruptRecordError) as info:
        rb.decode_columns(data, validate=False)
    assert not isinstance(info.value, InvalidCrcError)
    scan = rb.scan_batches(data)
    assert isinstance(scan.error, InvalidCrcError) and scan.valid_bytes == 0
    lax = rb.scan_batches(data, validate=False)
    assert lax.error is None and lax.valid_bytes == 156


def test_negative_truncated_tail(rb, vectors_dir, basic_keys):
    _, sidecar = basic_keys
    data = negative(vectors_dir, "v2_truncated_tail.bin")
    batches = list(rb.iter_batches(data))
    assert len(batches) == 1
    assert [r.offset for r in batches[0]] == [r["offset"] for r in sidecar["batches"][0]["records"]]
    scan = rb.scan_batches(data)
    assert scan.valid_bytes == 156
    assert scan.truncated is True and scan.error is None and len(scan) == 1
    assert len(rb.decode_columns(data)["offset"]) == 5
    with pytest.raises(CorruptRecordError):
        rb.read_batch(data, 156)  # the tail alone is not a batch


def test_negative_batch_length_too_small(rb, vectors_dir):
    data = negative(vectors_dir, "v2_batch_length_too_small.bin")
    for call in every_read(rb, data):
        with pytest.raises(CorruptRecordError) as info:
            call()
        assert info.value.position == 0
    scan = rb.scan_batches(data)
    assert isinstance(scan.error, CorruptRecordError) and scan.valid_bytes == 0


def test_negative_unknown_magic_3(rb, vectors_dir):
    data = negative(vectors_dir, "v2_unknown_magic_3.bin")
    for call in every_read(rb, data):
        with pytest.raises(CorruptRecordError, match="magic") as info:
            call()
        assert info.value.position == 0
    scan = rb.scan_batches(data, validate=False)
    assert isinstance(scan.error, CorruptRecordError) and scan.valid_bytes == 0
