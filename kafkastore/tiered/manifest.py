"""A remote segment's manifest: Aiven's ``SegmentManifestV1`` (the ``.rsm-manifest``
object), parsed and written.

The JSON, as the plugin's Jackson mapper writes it (compact, fields in this order)::

    {"version":"1",
     "chunkIndex":{...},                      see kafkastore.tiered.chunk_index
     "segmentIndexes":{"offset":{"position":0,"size":264},"timestamp":{...},
                       "producerSnapshot":{...},"leaderEpoch":{...},"transaction":null},
     "compression":true,
     "encryption":{"dataKey":"<key id>:<base64 RSA-wrapped data key>","aad":"<base64>"},
     "remoteLogSegmentMetadata":{"remoteLogSegmentId":{"topicIdPartition":{"topicId":"..",
         "topicPartition":{"topic":"orders","partition":0}},"id":".."},
         "startOffset":..,"endOffset":..,"maxTimestampMs":..,"brokerId":..,
         "eventTimestampMs":..,"segmentLeaderEpochs":{"3":114514,"4":115488}}}

``encryption`` is absent when the segment is not encrypted. ``segmentIndexes`` place each
index in the one ``.indexes`` object (positions and sizes of the transformed, i.e.
encrypted, bytes; consecutive from 0 in the order above; ``transaction`` null when the
segment had no ``.txnindex``, size 0 for an empty index). ``byte[]`` fields are standard
base64. ``remoteLogSegmentMetadata`` is written by the plugin and ignored when it reads;
here it is kept as parsed and offered as hints (:meth:`SegmentManifest.start_offset_hint`
...), never trusted alone.

Every field read is checked (types, Java int ranges, required fields); a violation raises
:class:`~kafkastore.errors.CorruptManifestError` naming the manifest's path.
:meth:`SegmentManifest.to_json` gives back the plugin's bytes: a parsed manifest
re-serializes byte for byte.

Thread-safety: manifests are immutable values.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from kafkastore.errors import CorruptManifestError
from kafkastore.tiered.chunk_index import ChunkIndex, chunk_index_from_json

__all__ = [
    "INDEX_TYPES",
    "SegmentIndex",
    "EncryptionMetadata",
    "SegmentManifest",
    "parse_manifest",
    "remote_log_segment_metadata",
]

#: The indexes in the ``.indexes`` object, in the order they are concatenated.
INDEX_TYPES = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")
_INT_MAX = 2**31 - 1


def _corrupt(path: str, message: str) -> CorruptManifestError:
    return CorruptManifestError(f"{path}: {message}", path=path)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object, name: str, path: str) -> bytes:
    if not isinstance(text, str):
        raise _corrupt(path, f"{name} is not a base64 string")
    try:
        return base64.b64decode((text + "=" * (-len(text) % 4)).encode("ascii"),
                                validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _corrupt(path, f"{name} is not base64") from None


@dataclass(frozen=True)
class SegmentIndex:
    """One index's bytes in the ``.indexes`` object (transformed sizes)."""

    position: int
    size: int


@dataclass(frozen=True)
class EncryptionMetadata:
    """``encryption``: the RSA key id, the wrapped data key and the AAD."""

    key_id: str
    encrypted_data_key: bytes
    aad: bytes

    def data_key_text(self) -> str:
        """``"<key id>:<base64>"`` (``EncryptedDataKey.serialize``)."""
        return f"{self.key_id}:{_b64(self.encrypted_data_key)}"


@dataclass(frozen=True)
class SegmentManifest:
    """A parsed ``SegmentManifestV1`` (see the module)."""

    chunk_index: ChunkIndex
    segment_indexes: dict[str, SegmentIndex | None]
    compression: bool
    encryption: EncryptionMetadata | None
    remote_log_segment_metadata: dict | None

    def _metadata_int(self, name: str) -> int | None:
        meta = self.remote_log_segment_metadata
        value = meta.get(name) if isinstance(meta, dict) else None
        return value if type(value) is int and value >= 0 else None

    def start_offset_hint(self) -> int | None:
        """``remoteLogSegmentMetadata.startOffset`` if present and sane (a hint)."""
        return self._metadata_int("startOffset")

    def end_offset_hint(self) -> int | None:
        """``remoteLogSegmentMetadata.endOffset`` if present and sane (a hint)."""
        return self._metadata_int("endOffset")

    def leader_epochs_hint(self) -> dict[int, int] | None:
        """``segmentLeaderEpochs`` as ``{epoch: start offset}`` if well-formed (a hint)."""
        meta = self.remote_log_segment_metadata
        epochs = meta.get("segmentLeaderEpochs") if isinstance(meta, dict) else None
        if not isinstance(epochs, dict):
            return None
        out = {}
        for epoch, offset in epochs.items():
            if not (isinstance(epoch, str) and epoch.isdigit() and type(offset) is int):
                return None
            out[int(epoch)] = offset
        return dict(sorted(out.items()))

    def to_json(self) -> bytes:
        """The manifest's bytes as the plugin writes them."""
        obj: dict = {"version": "1", "chunkIndex": self.chunk_index.to_json(),
                     "segmentIndexes": {
                         name: None if index is None else
                         {"position": index.position, "size": index.size}
                         for name, index in ((n, self.segment_indexes.get(n))
                                             for n in INDEX_TYPES)},
                     "compression": self.compression}
        if self.encryption is not None:
            obj["encryption"] = {"dataKey": self.encryption.data_key_text(),
                                 "aad": _b64(self.encryption.aad)}
        obj["remoteLogSegmentMetadata"] = self.remote_log_segment_metadata
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _segment_index(value: object, name: str, path: str) -> SegmentIndex | None:
    if value is None:
        if name == "transaction":
            return None
        raise _corrupt(path, f"segmentIndexes.{name} is null (only transaction may be)")
    if not isinstance(value, dict) or "position" not in value or "size" not in value:
        raise _corrupt(path, f"segmentIndexes.{name} is not a {{position, size}} object")
    fields = []
    for field in ("position", "size"):
        v = value[field]
        if type(v) is not int or not 0 <= v <= _INT_MAX:
            raise _corrupt(path, f"segmentIndexes.{name}.{field} is not a non-negative "
                                 f"int: {v!r}")
        fields.append(v)
    return SegmentIndex(*fields)


def _encryption(value: object, path: str) -> EncryptionMetadata | None:
    if value is None:
        return None
    if not isinstance(value, dict) or "dataKey" not in value or "aad" not in value:
        raise _corrupt(path, "encryption is not a {dataKey, aad} object")
    text = value["dataKey"]
    if not isinstance(text, str) or text.count(":") != 1:
        raise _corrupt(path, "encryption.dataKey is not '<key id>:<base64>'")
    key_id, _, wrapped = text.partition(":")
    if not key_id.strip():
        raise _corrupt(path, "encryption.dataKey has a blank key id")
    blob = _unb64(wrapped, "encryption.dataKey", path)
    if not blob:
        raise _corrupt(path, "encryption.dataKey is empty")
    return EncryptionMetadata(key_id, blob, _unb64(value["aad"], "encryption.aad", path))


def parse_manifest(data: bytes, *, path: str) -> SegmentManifest:
    """The manifest in ``data`` (the ``.rsm-manifest`` object's bytes)."""
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _corrupt(path, f"the manifest is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _corrupt(path, "the manifest is not a JSON object")
    if obj.get("version") != "1":
        raise _corrupt(path, f"unknown manifest version {obj.get('version')!r} (1 is known)")
    for name in ("chunkIndex", "segmentIndexes", "compression"):
        if name not in obj:
            raise _corrupt(path, f"the manifest has no {name}")
    chunk_index = chunk_index_from_json(obj["chunkIndex"], path=path)
    indexes = obj["segmentIndexes"]
    if not isinstance(indexes, dict):
        raise _corrupt(path, "segmentIndexes is not an object")
    missing = [name for name in INDEX_TYPES if name not in indexes]
    if missing:
        raise _corrupt(path, f"segmentIndexes has no {', '.join(missing)}")
    segment_indexes = {name: _segment_index(indexes[name], name, path)
                       for name in INDEX_TYPES}
    if type(obj["compression"]) is not bool:
        raise _corrupt(path, f"compression is not a boolean: {obj['compression']!r}")
    meta = obj.get("remoteLogSegmentMetadata")
    if meta is not None and not isinstance(meta, dict):
        raise _corrupt(path, "remoteLogSegmentMetadata is not an object")
    return SegmentManifest(chunk_index, segment_indexes, obj["compression"],
                           _encryption(obj.get("encryption"), path), meta)


def remote_log_segment_metadata(*, topic: str, topic_id: str, partition: int,
                                segment_id: str, start_offset: int, end_offset: int,
                                max_timestamp_ms: int, broker_id: int,
                                event_timestamp_ms: int,
                                segment_leader_epochs: dict[int, int]) -> dict:
    """``remoteLogSegmentMetadata`` as the plugin's ``KafkaTypeSerdeModule`` writes
    Kafka's ``RemoteLogSegmentMetadata`` (epochs in epoch order, as its sorted map)."""
    return {
        "remoteLogSegmentId": {
            "topicIdPartition": {"topicId": topic_id,
                                 "topicPartition": {"topic": topic, "partition": partition}},
            "id": segment_id},
        "startOffset": start_offset,
        "endOffset": end_offset,
        "maxTimestampMs": max_timestamp_ms,
        "brokerId": broker_id,
        "eventTimestampMs": event_timestamp_ms,
        "segmentLeaderEpochs": {str(e): o for e, o in sorted(segment_leader_epochs.items())},
    }
