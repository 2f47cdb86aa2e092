"""Segment manifests (kafkastore.tiered.manifest): the vectors' manifests parse and
re-serialize to identical bytes; malformed manifests are refused naming the path."""

from __future__ import annotations

import json

import pytest
from _vectors import VECTORS

from kafkastore.errors import CorruptManifestError
from kafkastore.tiered.chunk_index import FixedSizeChunkIndex, VariableSizeChunkIndex
from kafkastore.tiered.manifest import (
    INDEX_TYPES,
    EncryptionMetadata,
    SegmentIndex,
    SegmentManifest,
    parse_manifest,
    remote_log_segment_metadata,
)

PATH = "mem://t-x/0/00000000000000000000-x.rsm-manifest"
TIERED = VECTORS / "tiered" if VECTORS is not None else None


def _vector_manifests():
    if TIERED is None or not TIERED.is_dir():
        return []
    return sorted(TIERED.rglob("*.rsm-manifest"))


@pytest.fixture
def vector_manifests():
    found = _vector_manifests()
    if not found:
        pytest.skip("no tiered-storage vectors (../shared/vectors/tiered)")
    return found


def test_vector_manifests_parse_and_reserialize_identically(vector_manifests):
    kinds = set()
    for path in vector_manifests:
        data = path.read_bytes()
        manifest = parse_manifest(data, path=str(path))
        assert manifest.to_json() == data, path
        kinds.add(type(manifest.chunk_index))
        assert manifest.encryption is None
        assert manifest.segment_indexes["transaction"] is None
        meta = manifest.remote_log_segment_metadata
        assert manifest.start_offset_hint() == meta["startOffset"]
        assert manifest.end_offset_hint() == meta["endOffset"] > meta["startOffset"]
        epochs = manifest.leader_epochs_hint()
        assert epochs and all(type(k) is int for k in epochs)
        # the writer side builds the same metadata object
        rid = meta["remoteLogSegmentId"]
        rebuilt = remote_log_segment_metadata(
            topic=rid["topicIdPartition"]["topicPartition"]["topic"],
            topic_id=rid["topicIdPartition"]["topicId"],
            partition=rid["topicIdPartition"]["topicPartition"]["partition"],
            segment_id=rid["id"], start_offset=meta["startOffset"],
            end_offset=meta["endOffset"], max_timestamp_ms=meta["maxTimestampMs"],
            broker_id=meta["brokerId"], event_timestamp_ms=meta["eventTimestampMs"],
            segment_leader_epochs=epochs)
        assert json.dumps(rebuilt) == json.dumps(meta)
        # indexes are consecutive from 0, in the plugin's order
        position = 0
        for name in INDEX_TYPES:
            index = manifest.segment_indexes[name]
            if index is not None:
                assert index.position == position
                position += index.size
    assert kinds == {FixedSizeChunkIndex, VariableSizeChunkIndex}


def _manifest(**over) -> dict:
    obj = {"version": "1",
           "chunkIndex": {"type": "fixed", "originalChunkSize": 10, "originalFileSize": 25,
                          "transformedChunkSize": 10, "finalTransformedChunkSize": 5},
           "segmentIndexes": {"offset": {"position": 0, "size": 8},
                              "timestamp": {"position": 8, "size": 12},
                              "producerSnapshot": {"position": 20, "size": 10},
                              "leaderEpoch": {"position": 30, "size": 8},
                              "transaction": {"position": 38, "size": 0}},
           "compression": False,
           "encryption": {"dataKey": "k1:AAECAw==", "aad": "BAUG"},
           "remoteLogSegmentMetadata": {"startOffset": 5, "endOffset": 9}}
    obj.update(over)
    return obj


def _bytes(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def test_encrypted_manifest_round_trip():
    data = _bytes(_manifest())
    manifest = parse_manifest(data, path=PATH)
    assert manifest.encryption == EncryptionMetadata("k1", b"\0\1\2\3", b"\4\5\6")
    assert manifest.segment_indexes["transaction"] == SegmentIndex(38, 0)
    assert manifest.to_json() == data
    built = SegmentManifest(manifest.chunk_index, manifest.segment_indexes, False,
                            manifest.encryption, manifest.remote_log_segment_metadata)
    assert built.to_json() == data


@pytest.mark.parametrize("data, why", [
    (b"{not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1]", "not a JSON object"),
    (_bytes(_manifest(version="2")), "unknown manifest version"),
    (_bytes(_manifest(version=1)), "unknown manifest version"),
    (_bytes({k: v for k, v in _manifest().items() if k != "chunkIndex"}), "no chunkIndex"),
    (_bytes(_manifest(compression="yes")), "compression is not a boolean"),
    (_bytes(_manifest(segmentIndexes={"offset": None})), "segmentIndexes has no"),
    (_bytes(_manifest(segmentIndexes={**_manifest()["segmentIndexes"], "offset": None})),
     "offset is null"),
    (_bytes(_manifest(segmentIndexes={**_manifest()["segmentIndexes"],
                                      "timestamp": {"position": -1, "size": 3}})),
     "timestamp.position"),
    (_bytes(_manifest(encryption={"dataKey": "nocolon", "aad": ""})), "dataKey is not"),
    (_bytes(_manifest(encryption={"dataKey": "a:b:c", "aad": ""})), "dataKey is not"),
    (_bytes(_manifest(encryption={"dataKey": " :AAAA", "aad": ""})), "blank key id"),
    (_bytes(_manifest(encryption={"dataKey": "k:", "aad": ""})), "is empty"),
    (_bytes(_manifest(encryption={"dataKey": "k:@@@@", "aad": ""})), "not base64"),
    (_bytes(_manifest(encryption={"dataKey": "k:AAAA", "aad": 5})), "aad is not"),
    (_bytes(_manifest(remoteLogSegmentMetadata=[1])), "remoteLogSegmentMetadata"),
    (_bytes(_manifest(chunkIndex={"type": "fixed"})), "without"),
])
def test_malformed_manifests_are_refused_naming_the_path(data, why):
    with pytest.raises(CorruptManifestError, match=why) as info:
        parse_manifest(data, path=PATH)
    assert info.value.path == PATH


def test_hints_tolerate_garbage():
    manifest = parse_manifest(_bytes(_manifest(remoteLogSegmentMetadata={
        "startOffset": "5", "segmentLeaderEpochs": {"x": 1}})), path=PATH)
    assert manifest.start_offset_hint() is None and manifest.leader_epochs_hint() is None
