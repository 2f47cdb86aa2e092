"""Topic configurations from a KRaft cluster's metadata log (``__cluster_metadata-0``).

A KRaft broker or controller keeps the cluster metadata as a Kafka log of its own,
``<metadata.log.dir>/__cluster_metadata-0/``: ordinary segments (``<20 digits>.log``,
RecordBatch v2) and snapshots, ``<20-digit end offset>-<10-digit epoch>.checkpoint`` (the
name is Kafka's ``Snapshots.filenameFromSnapshotId``; a snapshot is a sequence of v2
batches too, opened and closed by SnapshotHeader/SnapshotFooter control records).
:func:`read_cluster_metadata` replays it read-only to learn each topic's name, id and
configuration overrides, and the cluster-wide defaults, so that ``cleanup.policy`` can be
shown next to a topic's partitions.

What is read
    The newest snapshot (largest end offset, then largest epoch; ``.checkpoint.part`` and
    ``.checkpoint.deleted`` files are ignored, as Kafka ignores them), then the records of
    the log segments at offsets at or past the snapshot's end offset: the snapshot holds
    every record below its end offset, and segments below it may already be deleted. A
    segment that holds nothing at or past that offset is not read at all. Without a
    snapshot the log is replayed from offset 0. Control batches are skipped.

The record frame (Kafka's ``AbstractApiMessageSerde``)
    Each record value is an unsigned varint frame version (1; Kafka refuses 0, the format
    of the 2.8 preview, and anything else), an unsigned varint apiKey, an unsigned varint
    message version, then the message (read by :mod:`kafkastore.kraft_message`, the KRaft
    message reader :mod:`kafkastore.dump` uses too). Only three messages are parsed;
    every other apiKey is skipped without reading its body:

    * TopicRecord (apiKey 2, v0): ``Name`` string, ``TopicId`` uuid;
    * RemoveTopicRecord (apiKey 9, v0): ``TopicId`` uuid. The topic and its configs go
      (Kafka's ``MetadataDelta.replay(RemoveTopicRecord)`` deletes the configs too); a
      topic created again later has only the configs written after that;
    * ConfigRecord (apiKey 4, v0): ``ResourceType`` int8 (2 = TOPIC, 4 = BROKER; a BROKER
      resource with an empty name is the cluster-wide default), ``ResourceName``,
      ``Name``, ``Value`` (nullable: null deletes the key).

    Metadata transactions (BeginTransactionRecord 23, EndTransactionRecord 24,
    AbortTransactionRecord 25) in the log are honoured as Kafka's ``MetadataBatchLoader``
    does: the records between a begin and an abort are dropped, and those of a
    transaction the log ends inside are not applied. In a snapshot they are ignored and
    every record applies, as in Kafka's ``MetadataLoader.loadSnapshot``.

Flexible versions: every metadata message is "flexible" in the versions Kafka writes
    Read in the git history of Kafka's ``ConfigRecord.json``, ``TopicRecord.json`` and
    ``RemoveTopicRecord.json`` (in ``metadata/src/main/resources/common/metadata/``), of
    ``generator/src/main/java/org/apache/kafka/message/MessageSpec.java`` and of
    ``AbstractApiMessageSerde`` (``DEFAULT_FRAME_VERSION``), and at the release tags
    2.8.0 to 3.9.0-rc2. The first definitions (KAFKA-12183, January 2021; Kafka 2.8.0,
    KRaft's early-access release, frame version 0) had no ``flexibleVersions``, which the
    generator then read as "none". KAFKA-12877 made the property mandatory
    (``MessageSpec`` now refuses a spec without it), KIP-746 moved these records to
    ``"validVersions": "0-1", "flexibleVersions": "1+"``, and KAFKA-13053 (July 2021,
    in 3.0.0) reset every metadata record to version 0 with ``"flexibleVersions": "0+"``
    and bumped the frame version from 0 to 1. Every metadata record JSON file in Kafka's
    trunk says ``"flexibleVersions": "0+"``. So with frame version 1 every metadata
    message is flexible at every version: strings are compact (unsigned varint length + 1,
    0 meaning null; longer than 0x7fff is an error, as in Kafka's generated readers),
    uuids are 16 bytes, and every message ends in a tagged-fields section (unsigned varint
    count, then tag, size and data for each; none of these three messages has a known
    tag, so all are skipped). The frame-0 format of 2.8 is not read, as Kafka does not
    read it. A version of the three messages above 0 is refused: no release up to 3.9
    has one (a TopicRecord v1 was on trunk in mid-2024 and was reverted), and its fields
    cannot be known here.

Errors
    A metadata record that does not parse raises
    :class:`~kafkastore.errors.CorruptRecordError` with ``path`` (the file), ``offset``
    (the record's offset) and ``position`` (the byte position of its batch in the file):
    a frame version other than 1, a value that ends before its message does, a string
    longer than the bytes left, an unknown message version, bytes left over after the
    message. Lengths are checked against the bytes that are there before anything is
    taken. A batch that does not scan (a bad CRC, a size field below 14) raises too,
    except in the last segment: there, as Kafka's crash recovery truncates it, the
    first bad or incomplete entry and everything after it end the log
    (:attr:`MetadataSource.torn_tail_bytes` says how many bytes were left out). A
    snapshot that ends inside a batch, a segment other than the last that does, and a
    log that starts past the snapshot's end (records missing between them) raise
    :class:`~kafkastore.errors.CorruptRecordError` as well.

Limits
    The files are what one node has: records past the quorum's high watermark (not yet
    committed) are applied too, and a node that is behind shows an older state. Static
    broker settings (``server.properties``) are not in the metadata log, so
    :meth:`ClusterMetadata.cleanup_policy` is None where neither the topic nor the
    cluster-wide dynamic default sets one (the broker's ``log.cleanup.policy``, by
    default ``delete``, applies then).

Files are opened read-only and read in bounded chunks
(:func:`kafkastore.file_records.read_chunks`): nothing is written, and no read is larger
than the file or than the largest batch in it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kafkastore import _fileio
from kafkastore.errors import CorruptRecordError, KafkaStoreError
from kafkastore.file_records import read_chunks
from kafkastore.kraft_message import FRAME_VERSION, MessageReader, kafka_uuid_string, read_frame
from kafkastore.records import decode_columns
from kafkastore.segment import log_file_offset, snapshot_id_from_file_name

__all__ = [
    "METADATA_TOPIC_PARTITION_DIR",
    "ClusterMetadata",
    "TopicInfo",
    "MetadataSource",
    "find_metadata_log",
    "read_cluster_metadata",
]

#: The metadata log's partition directory: topic ``__cluster_metadata``, partition 0.
METADATA_TOPIC_PARTITION_DIR = "__cluster_metadata-0"

#: Kafka's ``ConfigResource.Type`` ids.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# apiKeys (metadata/src/main/resources/common/metadata/*.json)
_TOPIC_RECORD = 2
_CONFIG_RECORD = 4
_REMOVE_TOPIC_RECORD = 9
_BEGIN_TRANSACTION = 23
_END_TRANSACTION = 24
_ABORT_TRANSACTION = 25
_PARSED = (_TOPIC_RECORD, _CONFIG_RECORD, _REMOVE_TOPIC_RECORD,
           _BEGIN_TRANSACTION, _END_TRANSACTION, _ABORT_TRANSACTION)
_NAMES = {_TOPIC_RECORD: "TopicRecord", _CONFIG_RECORD: "ConfigRecord",
          _REMOVE_TOPIC_RECORD: "RemoveTopicRecord"}

_CHUNK = 4 << 20     # a read; a larger batch gets a read of its own size


# -- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicInfo:
    """A topic as the metadata log has it: name, id and its own config overrides."""

    name: str
    topic_id: uuid.UUID
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def kafka_topic_id(self) -> str:
        """The id as Kafka prints it (``Uuid.toString``: URL-safe base64, no padding)."""
        return kafka_uuid_string(self.topic_id)


@dataclass(frozen=True)
class MetadataSource:
    """Where a :class:`ClusterMetadata` came from.

    ``snapshot`` is the snapshot file replayed (None when there was none) and
    ``snapshot_end_offset`` its end offset (0 without one), ``snapshot_records`` the
    metadata records it held; ``segments`` are the ``.log`` files read and
    ``log_records`` the metadata records of theirs that were replayed (those at or past
    the snapshot's end offset, whatever their type). ``end_offset`` is the end of what
    was read: one past the last offset of the last batch (the snapshot's end offset when
    no segment goes further). ``torn_tail_bytes`` counts the bytes at the end of the last segment
    that were left out because they hold no complete, valid batch, and ``tail_error``
    says why when a batch there was corrupt rather than incomplete.
    """

    partition_dir: str
    snapshot: str | None = None
    snapshot_end_offset: int = 0
    snapshot_records: int = 0
    segments: tuple[str, ...] = ()
    log_records: int = 0
    end_offset: int = 0
    torn_tail_bytes: int = 0
    tail_error: str | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    """Topics and configs replayed from a metadata log; see :func:`read_cluster_metadata`.

    ``topics`` maps each live topic's name to its :class:`TopicInfo`;
    ``cluster_defaults`` holds the cluster-wide dynamic broker configs (a BROKER
    ConfigRecord with an empty resource name, such as ``log.cleanup.policy``).
    """

    topics: dict[str, TopicInfo]
    cluster_defaults: dict[str, str]
    source: MetadataSource

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's own config overrides (a copy); empty for a topic not in the metadata."""
        info = self.topics.get(topic)
        return dict(info.configs) if info is not None else {}

    def cleanup_policy(self, topic: str) -> str | None:
        """The topic's ``cleanup.policy`` as stored (``"delete"``, ``"compact"``,
        ``"compact,delete"``...), else the cluster-wide ``log.cleanup.policy``, else None.

        None also for a topic that is not in the metadata (check ``topic in topics``).
        None otherwise means the metadata does not set it: the broker's static
        ``log.cleanup.policy`` applies (Kafka's default is ``delete``).
        """
        info = self.topics.get(topic)
        if info is None:
            return None
        policy = info.configs.get("cleanup.policy")
        if policy is None:
            policy = self.cluster_defaults.get("log.cleanup.policy")
        return policy


# -- finding the files -----------------------------------------------------------------------


def find_metadata_log(path: str | os.PathLike[str]) -> str | None:
    """The ``__cluster_metadata-0`` directory of log directory ``path``, or None.

    ``path`` may also be that partition directory itself.
    """
    path = os.fspath(path)
    if os.path.basename(os.path.normpath(path)) == METADATA_TOPIC_PARTITION_DIR \
            and os.path.isdir(path):
        return path
    candidate = os.path.join(path, METADATA_TOPIC_PARTITION_DIR)
    return candidate if os.path.isdir(candidate) else None


def _files(partition_dir: str) -> tuple[tuple[int, int, str] | None, list[tuple[int, str]]]:
    """The newest snapshot ``(end_offset, epoch, path)`` and the segments ``(base, path)``."""
    snapshot = None
    segments = []
    for name in os.listdir(partition_dir):
        path = os.path.join(partition_dir, name)
        snapshot_id = snapshot_id_from_file_name(name)
        base = log_file_offset(name)
        if snapshot_id is not None:
            if snapshot is None or snapshot_id > snapshot[:2]:
                snapshot = (*snapshot_id, path)
        elif base is not None:
            segments.append((base, path))
    segments.sort()
    return snapshot, segments


# -- the record reader -----------------------------------------------------------------------


class _Message(MessageReader):
    """One record value of the metadata log: the shared reader
    (:class:`~kafkastore.kraft_message.MessageReader`), its errors saying which file,
    record and batch."""

    __slots__ = ("path", "offset", "position")

    def __init__(self, data: bytes, path: str, offset: int, position: int) -> None:
        super().__init__(data)
        self.path, self.offset, self.position = path, offset, position

    def error(self, message: str) -> CorruptRecordError:
        return CorruptRecordError(f"metadata record: {message}", path=self.path,
                                  offset=self.offset, position=self.position)


# -- replay ----------------------------------------------------------------------------------


class _State:
    """The replayed state, and the pending records of an open metadata transaction."""

    def __init__(self) -> None:
        self.topic_ids: dict[uuid.UUID, str] = {}
        self.topics: dict[str, uuid.UUID] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.pending: list[Callable[[], None]] | None = None
        self.transactions = True   # False while a snapshot is replayed

    def apply(self, op: Callable[[], None]) -> None:
        if self.pending is None:
            op()
        else:
            self.pending.append(op)

    def topic(self, name: str, topic_id: uuid.UUID) -> None:
        old = self.topics.get(name)
        if old is not None:
            self.topic_ids.pop(old, None)
        self.topics[name] = topic_id
        self.topic_ids[topic_id] = name

    def remove_topic(self, topic_id: uuid.UUID) -> None:
        name = self.topic_ids.pop(topic_id, None)
        if name is not None:    # Kafka fails on an unknown id; a reader shows what is there
            del self.topics[name]
            self.configs.pop((RESOURCE_TOPIC, name), None)

    def config(self, rtype: int, rname: str, key: str, value: str | None) -> None:
        if value is None:
            entry = self.configs.get((rtype, rname))
            if entry is not None:
                entry.pop(key, None)
        else:
            self.configs.setdefault((rtype, rname), {})[key] = value

    def replay(self, m: _Message) -> None:
        api_key, version = read_frame(m)
        if api_key not in _PARSED:
            return
        if api_key >= _BEGIN_TRANSACTION and not self.transactions:
            return
        if api_key == _BEGIN_TRANSACTION:
            self.pending = []     # (a second begin: Kafka fails; the new one wins here)
            return
        if api_key in (_END_TRANSACTION, _ABORT_TRANSACTION):
            ops, self.pending = self.pending, None
            if api_key == _END_TRANSACTION and ops:
                for op in ops:
                    op()
            return
        name = _NAMES[api_key]
        if version != 0:
            raise m.error(f"unsupported {name} version {version} (this reader knows "
                          "version 0)")
        if api_key == _TOPIC_RECORD:
            topic = m.string(f"{name}.Name")
            topic_id = m.uuid(f"{name}.TopicId")
            m.end(name)
            self.apply(lambda: self.topic(topic, topic_id))
        elif api_key == _REMOVE_TOPIC_RECORD:
            topic_id = m.uuid(f"{name}.TopicId")
            m.end(name)
            self.apply(lambda: self.remove_topic(topic_id))
        else:
            rtype = m.int8(f"{name}.ResourceType")
            rname = m.string(f"{name}.ResourceName")
            key = m.string(f"{name}.Name")
            value = m.string(f"{name}.Value", nullable=True)
            m.end(name)
            self.apply(lambda: self.config(rtype, rname, key, value))

    def result(self, source: MetadataSource) -> ClusterMetadata:
        topics = {name: TopicInfo(name, topic_id,
                                  dict(self.configs.get((RESOURCE_TOPIC, name), {})))
                  for name, topic_id in sorted(self.topics.items())}
        defaults = dict(self.configs.get((RESOURCE_BROKER, ""), {}))
        return ClusterMetadata(topics, defaults, source)


def _replay_file(state: _State, path: str, min_offset: int, *, tolerate_tail: bool,
                 is_snapshot: bool) -> tuple[int, int, int, str | None]:
    """Replay the records at offsets >= ``min_offset`` of one file.

    Returns ``(records replayed, end offset, torn tail bytes, tail error)``.
    """
    fs = _fileio.fs
    fd = fs.open(path, os.O_RDONLY)
    count = end_offset = 0
    try:
        size = fs.fstat_size(fd)
        good_end = 0
        for chunk_pos, data, scan in read_chunks(lambda pos, n: fs.pread(fd, n, pos),
                                                 0, size, _CHUNK):
            valid = scan.valid_bytes
            bad_magic = np.flatnonzero(scan.magic != 2)
            if len(bad_magic):
                i = int(bad_magic[0])
                raise CorruptRecordError(
                    f"metadata log entry of magic {int(scan.magic[i])}: KRaft writes "
                    "RecordBatch v2 only", path=path, position=chunk_pos + int(scan.position[i]),
                    offset=int(scan.last_offset[i]))
            if valid:
                if len(scan.last_offset):
                    end_offset = max(end_offset, int(scan.last_offset[-1]) + 1)
                try:
                    cols = decode_columns(data, 0, valid, validate=False)
                except KafkaStoreError as exc:
                    raise exc.with_context(path=path, position_base=chunk_pos) from None
                count += _replay_columns(state, cols, scan, path, chunk_pos, min_offset)
            good_end = chunk_pos + valid
            if scan.error is not None:
                if not tolerate_tail:
                    raise scan.error.with_context(path=path, position_base=chunk_pos)
                error = scan.error.with_context(path=path, position_base=chunk_pos)
                return count, end_offset, size - good_end, str(error)
        if good_end < size:
            if not tolerate_tail:
                what = "snapshot" if is_snapshot else "segment (not the last)"
                raise CorruptRecordError(
                    f"metadata log {what} ends inside a batch: {size - good_end} bytes "
                    "after the last complete one", path=path, position=good_end)
            return count, end_offset, size - good_end, None
        return count, end_offset, 0, None
    finally:
        fs.close(fd)


def _replay_columns(state: _State, cols, scan, path: str, chunk_pos: int,
                    min_offset: int) -> int:
    """Replay the records of one chunk: only those that may matter reach Python."""
    n = len(cols)
    if n == 0:
        return 0
    offsets = cols.offset
    wanted = offsets >= min_offset
    if not wanted.any():
        return 0
    vo, vd = cols.value_offsets, cols.value_data
    starts = vo[:-1]
    lengths = vo[1:] - starts
    whole = (lengths >= 3) & ~cols.value_null
    first = np.zeros((3, n), dtype=np.uint8)
    for k in range(3):
        first[k, whole] = vd[starts[whole] + k]
    plain = whole & (first[0] == FRAME_VERSION) & (first[1] < 0x80) & (first[2] < 0x80)
    # anything not plain (a wrong frame, a short or null value, a long varint) and the
    # apiKeys parsed here go through the full reader, which raises for the bad ones
    slow = wanted & (~plain | np.isin(first[1], _PARSED))
    for i in np.flatnonzero(slow).tolist():
        offset = int(offsets[i])
        position = chunk_pos + int(scan.position[min(
            int(np.searchsorted(scan.last_offset, offset)), len(scan.position) - 1)])
        if cols.value_null[i]:
            raise CorruptRecordError("metadata record: the record has a null value",
                                     path=path, offset=offset, position=position)
        value = vd[int(vo[i]):int(vo[i + 1])].tobytes()
        state.replay(_Message(value, path, offset, position))
    return int(np.count_nonzero(wanted))


def read_cluster_metadata(partition_dir: str | os.PathLike[str]) -> ClusterMetadata:
    """Replay the metadata log in ``partition_dir`` (a ``__cluster_metadata-0`` directory).

    The newest snapshot, then the log records at or past its end offset; see the module
    documentation for what is read and what raises. A directory with neither snapshots
    nor segments gives empty metadata.
    """
    partition_dir = os.fspath(partition_dir)
    snapshot, segments = _files(partition_dir)
    state = _State()
    snap_path = None
    snap_end = snap_records = 0
    if snapshot is not None:
        snap_end, _epoch, snap_path = snapshot
        state.transactions = False
        snap_records = _replay_file(state, snap_path, 0, tolerate_tail=False,
                                    is_snapshot=True)[0]
        state.transactions = True
    # a segment whose successor starts at or below the snapshot's end holds nothing newer
    keep = [i for i in range(len(segments))
            if i + 1 == len(segments) or segments[i + 1][0] > snap_end]
    segments = [segments[i] for i in keep]
    if segments and segments[0][0] > snap_end:
        where = (f"the snapshot {os.path.basename(snap_path)} ends at offset {snap_end}"
                 if snap_path else "there is no snapshot")
        raise CorruptRecordError(
            f"metadata log starts at offset {segments[0][0]} but {where}: the records "
            "between are missing", path=segments[0][1], offset=segments[0][0])
    log_records = torn = 0
    end_offset = snap_end
    tail_error = None
    for k, (_base, path) in enumerate(segments):
        last = k + 1 == len(segments)
        count, seg_end, torn, tail_error = _replay_file(state, path, snap_end,
                                                        tolerate_tail=last, is_snapshot=False)
        log_records += count
        end_offset = max(end_offset, seg_end)
    source = MetadataSource(
        partition_dir=partition_dir, snapshot=snap_path, snapshot_end_offset=snap_end,
        snapshot_records=snap_records, segments=tuple(p for _, p in segments),
        log_records=log_records, end_offset=end_offset, torn_tail_bytes=torn,
        tail_error=tail_error)
    return state.result(source)
