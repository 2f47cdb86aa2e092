"""Writing a tiered copy: the rolled segments of a partition directory uploaded as a
RemoteStorageManager would, in Aiven's layout or Kafka's ``LocalTieredStorage`` layout.

What one segment's upload holds is what Kafka's ``RemoteLogManager.copyLogSegment`` hands
the plugin (``LogSegmentData``) for a segment whose successor starts at ``next``:

* the ``.log``, ``.index`` and ``.timeindex`` files as they are (empty bytes for an
  index file that does not exist), the ``.txnindex`` if the file exists;
* the producer snapshot ``<next>.snapshot``; when the directory has none (Kafka takes one
  at every roll, so only a directory not written by a broker lacks it) an empty
  snapshot is uploaded in its place: the producer state is not rebuilt from the batches;
* the leader epochs as ``leader-epoch-checkpoint`` bytes (version 0): every entry that
  starts below ``next`` (``epochEntriesInRange(-1, next)``); the directory's
  ``leader-epoch-checkpoint`` when it has a non-empty one, otherwise derived from the v2
  batches' partition leader epochs (each new epoch at the first batch stamped with it);
* Aiven's manifest also carries ``remoteLogSegmentMetadata``: start offset, end offset
  ``next - 1``, the largest batch timestamp, the broker id of :class:`UploadOptions`, the
  time of the upload, and the epochs of ``epochEntriesInRange(start, next)`` (the first
  one moved up to the segment's start).

Aiven (``KafkaRemoteStorageManager.copyLogSegmentData``), objects in this order: the
``.log`` (cut into ``chunk_size`` chunks, each zstd-compressed when compression applies,
then encrypted when a key ring is given), the ``.indexes`` (offset, timestamp, producer
snapshot, leader epoch, transaction: each non-empty one encrypted alone when encrypting,
never compressed, concatenated), the ``.rsm-manifest`` last, so a copy without its
manifest is an unfinished upload. Compression applies with ``compression``; with
``compression_heuristic`` too, only when the segment's first batch is valid and
uncompressed (``SegmentCompressionChecker``). The chunk index is *fixed* without
compression (``transformedChunkSize`` = chunk size, + 28 with encryption: IV and tag) and
*variable* with it. A failed upload removes the objects it wrote, as the plugin does.
The plugin cannot upload an empty ``.log`` with a transform (it builds no chunk index);
here an empty segment gets an empty fixed index.

LocalTieredStorage (``RemoteLogSegmentFileset.copy``): ``<root>/<topic>-<partition>-<topic
id>/<20-digit start>-<segment id>`` with ``.log``, ``.index``, ``.timeindex``,
``.txnindex`` (if any), ``.leader_epoch_checkpoint``, ``.snapshot``, in that order; the
destination URI is the storage root (LocalTieredStorage's ``kafka-tiered-storage``
directory). ``write_manifest=False`` (a test's unfinished upload) leaves out Aiven's
manifest, or LocalTieredStorage's last file (the snapshot).

Each object is built in memory, then written whole (:mod:`kafkastore.tiered.object_sink`):
an upload needs about twice the segment's size in memory.

Thread-safety: one call uploads one partition sequentially; concurrent calls for
different partitions are independent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kafkastore.batch_header import PARTITION_LEADER_EPOCH_OFFSET, read_batch_header
from kafkastore.errors import (
    ConfigError,
    KafkaStoreError,
    StorageFileNotFoundError,
    TieredStorageError,
)
from kafkastore.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    EpochEntry,
    LeaderEpochCheckpointFile,
)
from kafkastore.log_view import ReadOnlyLog, SegmentRef
from kafkastore.partition_metadata import (
    PARTITION_METADATA_FILENAME,
    TOPIC_ID_FORMAT,
    check_topic_id,
    parse_topic_id,
)
from kafkastore.producer_state import snapshot_bytes
from kafkastore.records import read_batch, scan_batches
from kafkastore.storage import open_storage
from kafkastore.tiered.chunk_index import (
    ChunkIndex,
    FixedSizeChunkIndex,
    VariableSizeChunkIndex,
)
from kafkastore.tiered.crypto import IV_SIZE, TAG_SIZE, KeyRing, new_data_key_and_aad
from kafkastore.tiered.listing import SegmentObjects, list_copy, relative_path
from kafkastore.tiered.manifest import (
    INDEX_TYPES,
    EncryptionMetadata,
    SegmentIndex,
    SegmentManifest,
    parse_manifest,
    remote_log_segment_metadata,
)
from kafkastore.tiered.object_keys import (
    RemoteSegmentKey,
    aiven_object_key,
    local_tiered_file,
    new_segment_id,
)
from kafkastore.tiered.object_sink import ObjectSink, open_sink
from kafkastore.tiered.tiered_storage import MANIFEST_LIMIT
from kafkastore.tiered.transform import ChunkTransform

__all__ = ["UploadOptions", "UploadedSegment", "upload_partition", "MAX_CHUNK_SIZE",
           "requires_compression"]

#: The plugin's ``chunk.size`` range is 1 .. Integer.MAX_VALUE / 2 (it has no default).
MAX_CHUNK_SIZE = (2**31 - 1) // 2
_LAYOUTS = ("aiven", "local")


@dataclass(frozen=True)
class UploadOptions:
    """How to upload (the plugin's settings; see the module)."""

    layout: str = "aiven"               # or "local" (Kafka's LocalTieredStorage)
    key_prefix: str = ""                # key.prefix (Aiven)
    chunk_size: int = 4 << 20           # chunk.size (required by the plugin; 4 MiB here)
    compression: bool = False           # compression.enabled
    compression_heuristic: bool = False  # compression.heuristic.enabled
    key_ring: KeyRing | None = None     # encryption when given: its active key wraps
    broker_id: int = -1                 # remoteLogSegmentMetadata.brokerId (Aiven)

    def __post_init__(self) -> None:
        if self.layout not in _LAYOUTS:
            raise ConfigError(f"Unknown tiered layout {self.layout!r} (aiven or local)",
                              key="layout", value=self.layout)
        if type(self.chunk_size) is not int or not 1 <= self.chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigError(f"Invalid value {self.chunk_size!r} for configuration "
                              f"chunk.size: Value must be in [1, {MAX_CHUNK_SIZE}]",
                              key="chunk.size", value=self.chunk_size)
        if self.compression_heuristic and not self.compression:
            raise ConfigError("compression.enabled must be enabled if "
                              "compression.heuristic.enabled is",
                              key="compression.heuristic.enabled", value=True)
        if self.key_ring is not None and self.key_ring.active_key_id is None:
            raise ConfigError("The key ring has no active key to encrypt with",
                              key="key_ring")
        if self.layout == "local" and (self.compression or self.key_ring is not None
                                       or self.key_prefix):
            raise ConfigError("LocalTieredStorage copies files as they are: no "
                              "compression, encryption or key prefix", key="layout",
                              value=self.layout)


@dataclass(frozen=True)
class UploadedSegment:
    """One uploaded segment: its key, end offset, object paths (relative to the
    destination, in upload order) and the bytes written. ``skipped``: the copy already
    held it complete (:func:`upload_partition`), so nothing was written; ``key`` and
    ``objects`` are then the upload already there."""

    key: RemoteSegmentKey
    end_offset: int
    objects: list[str] = field(default_factory=list)
    bytes: int = 0
    skipped: bool = False


def requires_compression(log_bytes: bytes, options: UploadOptions) -> bool:
    """Whether the segment's chunks are compressed (``KafkaRemoteStorageManager``'s
    ``requiresCompression``): ``compression``, and with the heuristic only when the first
    batch is valid and uncompressed (an invalid or missing one: no compression)."""
    if not options.compression:
        return False
    if not options.compression_heuristic:
        return True
    try:
        read_batch(log_bytes, 0).validate()       # Kafka's ensureValid: the CRC
        return read_batch_header(log_bytes, 0).codec == 0
    except (KafkaStoreError, ValueError, IndexError):
        return False


def _chunks(data: bytes, size: int):
    view = memoryview(data)
    for position in range(0, len(data), size):
        yield view[position:position + size]


def _transform_log(data: bytes, options: UploadOptions, transform: ChunkTransform
                   ) -> tuple[bytes, ChunkIndex]:
    size = options.chunk_size
    n = len(data)
    count = -(-n // size)
    overhead = IV_SIZE + TAG_SIZE if transform.encrypted else 0
    if transform.identity or not n:
        final = n - (count - 1) * size if count else 0
        return bytes(data) if transform.identity else b"", FixedSizeChunkIndex(
            size, n, size + overhead, final + overhead if count else 0)
    blobs = [transform.transform(chunk) for chunk in _chunks(data, size)]
    sizes = [len(b) for b in blobs]
    if transform.compression:
        index: ChunkIndex = VariableSizeChunkIndex(size, n, sizes)
    else:
        index = FixedSizeChunkIndex(size, n, size + overhead, sizes[-1])
    return b"".join(blobs), index


# -- what LogSegmentData holds -------------------------------------------------------------


class _Partition:
    """The source partition directory, read through the storage seam."""

    def __init__(self, partition_dir: str, storage_options, topic_id: str | None) -> None:
        self.log = ReadOnlyLog.open(partition_dir, storage_options=storage_options)
        self.storage = self.log.storage
        tp = self.log.topic_partition
        if tp is None:
            raise TieredStorageError(f"{self.log.uri}: not a partition directory "
                                     f"(<topic>-<partition>)", path=self.log.uri)
        self.topic, self.partition = tp.topic, tp.partition
        if topic_id is None:
            topic_id = self._topic_id()
        try:
            self.topic_id = check_topic_id(topic_id)
        except ValueError as exc:
            raise ConfigError(str(exc), key="topic_id", value=topic_id) from None
        self._epochs: list[EpochEntry] | None = None

    def _file(self, name: str) -> bytes | None:
        return self.storage.read_file(self.storage.join(self.log.path, name))

    def _topic_id(self) -> str:
        name = PARTITION_METADATA_FILENAME
        data = self._file(name)
        if data is None:
            # the command line's flag first: that is where a user meets this
            raise TieredStorageError(
                f"{self.log.uri}: no topic id (no {name}: a directory written before "
                f"kafkastore wrote one, or copied without it); give it with --topic-id "
                f"(topic_id= in Python), {TOPIC_ID_FORMAT}", path=self.log.uri)
        return parse_topic_id(data, self.storage.uri(self.storage.join(self.log.path, name)))

    def read(self, seg: SegmentRef) -> bytes:
        with self.storage.open(seg.path) as reader:
            return reader.read(0, reader.size)

    def sibling(self, seg: SegmentRef, suffix: str) -> bytes | None:
        return self._file(f"{seg.base_offset:020d}{suffix}")

    def snapshot(self, offset: int) -> bytes:
        data = self._file(f"{offset:020d}.snapshot")
        return snapshot_bytes([]) if data is None else data

    def epochs(self) -> list[EpochEntry]:
        """The partition's leader epochs: its checkpoint, else derived from the batches."""
        if self._epochs is None:
            data = self._file(LEADER_EPOCH_CHECKPOINT_FILENAME)
            checkpoint = LeaderEpochCheckpointFile(self.log.path)
            if data:   # (an empty file, which Log.open creates as Kafka does, says nothing)
                self._epochs = checkpoint.parse(data)
            else:
                self._epochs = self._derived_epochs()
        return self._epochs

    def _derived_epochs(self) -> list[EpochEntry]:
        out: list[EpochEntry] = []
        for seg in self.log.segments:
            records = self.log.segment_records(seg)
            for header, head in records.walk_headers(0, end=seg.size):
                if header.magic < 2 or len(head) < PARTITION_LEADER_EPOCH_OFFSET + 4:
                    continue
                epoch = int.from_bytes(head[PARTITION_LEADER_EPOCH_OFFSET:
                                            PARTITION_LEADER_EPOCH_OFFSET + 4], "big",
                                       signed=True)
                if epoch >= 0 and (not out or epoch > out[-1].epoch):
                    out.append(EpochEntry(epoch, header.base_offset))
        return out


def _epochs_in_range(entries: list[EpochEntry], start: int, end: int) -> list[EpochEntry]:
    """Kafka's ``LeaderEpochFileCache.epochEntriesInRange(start, end)``."""
    out = list(entries)
    if start >= 0:
        below = [e for e in out if e.start_offset <= start]
        if below:
            out = [EpochEntry(below[-1].epoch, start)] + [e for e in out
                                                          if e.start_offset > start]
    return [e for e in out if e.start_offset < end]


def _epoch_bytes(entries: list[EpochEntry]) -> bytes:
    """Leader-epoch checkpoint bytes (RemoteLogManager's ``epochEntriesAsByteBuffer``)."""
    return LeaderEpochCheckpointFile("").encode(entries)


def _max_timestamp(data: bytes) -> int:
    scan = scan_batches(data, validate=False)
    return int(np.max(scan.max_timestamp)) if len(scan) else -1


# -- the upload ------------------------------------------------------------------------------


def _segments_to_upload(part: _Partition, base_offsets: Sequence[int] | None
                        ) -> list[tuple[SegmentRef, int]]:
    """``(segment, next segment's base offset)`` of each segment to upload."""
    segments = part.log.segments
    nexts = [s.base_offset for s in segments[1:]]
    if base_offsets is None:
        return list(zip(segments[:-1], nexts))
    by_base = {s.base_offset: i for i, s in enumerate(segments)}
    out = []
    for base in base_offsets:
        i = by_base.get(base)
        if i is None:
            raise TieredStorageError(f"{part.log.uri}: no segment with base offset {base}",
                                     path=part.log.uri)
        # the active segment ends at the log end offset (a broker waits for the roll)
        nxt = nexts[i] if i < len(nexts) else part.log.log_end_offset
        if nxt <= base:
            raise TieredStorageError(f"{part.log.uri}: segment {base} is empty",
                                     path=part.log.uri)
        out.append((segments[i], nxt))
    return out


# -- what the destination already holds ---------------------------------------------------


def _existing_uploads(dest_uri: str, storage_options, options: UploadOptions,
                      part: _Partition) -> list[SegmentObjects]:
    """The complete uploads of the partition (same topic id) already at the destination
    (none when the destination does not exist yet)."""
    storage, root = open_storage(dest_uri, storage_options)
    try:
        _layout, groups = list_copy(storage, root, layout=options.layout,
                                    key_prefix=options.key_prefix)
    except StorageFileNotFoundError:
        return []
    return [objs for objs in groups.get((part.topic, part.partition), [])
            if objs.key.topic_id == part.topic_id and objs.complete]


def _holds_segment(storage, objs: SegmentObjects, seg: SegmentRef, nxt: int) -> bool:
    """Whether ``objs`` is a complete upload of ``seg`` (the segment ending before
    ``nxt``): every object present and, by the manifest (Aiven), the same start and end
    offsets and ``.log`` size, the ``.log`` object as long as its chunk index says and
    the ``.indexes`` object as long as the manifest places the indexes in it;
    LocalTieredStorage: the ``.log`` file the same size. The manifest holds no checksum
    (the plugin writes none), so offsets and sizes are what can be compared without
    fetching the segment back; a rolled segment's batches do not change, so the same
    offsets in the same number of bytes are the same segment. Its indexes are not
    compared: they are derived from the batches, and recovery rebuilds them at the
    configured ``index.interval.bytes``, so the same segment's can differ in size."""
    files = objs.files
    if objs.layout != "aiven":
        return files[".log"].size == seg.size
    try:
        data = storage.read_file(files["rsm-manifest"].path, limit=MANIFEST_LIMIT)
        manifest = parse_manifest(data, path=storage.uri(files["rsm-manifest"].path))
    except KafkaStoreError:   # unreadable: not a finished upload to trust
        return False
    index = manifest.chunk_index
    reach = max((ix.position + ix.size for ix in manifest.segment_indexes.values()
                 if ix is not None), default=0)
    return (manifest.start_offset_hint(), manifest.end_offset_hint()) == \
        (seg.base_offset, nxt - 1) and index.original_file_size == seg.size \
        and files["log"].size == index.transformed_file_size \
        and files["indexes"].size == reach


class _Writer:
    """Writes one segment's objects, remembering them to remove them on failure."""

    def __init__(self, sink: ObjectSink, root: str) -> None:
        self.sink, self.root = sink, root
        self.written: list[str] = []
        self.bytes = 0

    def put(self, relative: str, data: bytes) -> None:
        self.sink.put(self.sink.join(self.root, relative), data)
        self.written.append(relative)
        self.bytes += len(data)

    def remove_all(self) -> None:
        for relative in self.written:
            try:
                self.sink.delete(self.sink.join(self.root, relative))
            except Exception:   # best effort, as the plugin's orphan removal
                pass


def _upload_aiven(writer: _Writer, part: _Partition, key: RemoteSegmentKey, seg: SegmentRef,
                  nxt: int, options: UploadOptions, write_manifest: bool) -> None:
    data = part.read(seg)
    compression = requires_compression(data, options)
    encryption = None
    if options.key_ring is not None:
        data_key, aad = new_data_key_and_aad()
        key_id, wrapped = options.key_ring.wrap(data_key)
        encryption = EncryptionMetadata(key_id, wrapped, aad)
        transform = ChunkTransform(compression, data_key, aad)
    else:
        transform = ChunkTransform(compression)
    log_object, chunk_index = _transform_log(data, options, transform)
    writer.put(aiven_object_key(options.key_prefix, key, "log"), log_object)

    txn = part.sibling(seg, ".txnindex")
    plain = {"offset": part.sibling(seg, ".index") or b"",
             "timestamp": part.sibling(seg, ".timeindex") or b"",
             "producerSnapshot": part.snapshot(nxt),
             "leaderEpoch": _epoch_bytes(_epochs_in_range(part.epochs(), -1, nxt)),
             "transaction": txn}
    pieces, indexes, position = [], {}, 0
    for name in INDEX_TYPES:
        if plain[name] is None:
            indexes[name] = None
            continue
        blob = transform.transform_index(plain[name])
        indexes[name] = SegmentIndex(position, len(blob))
        pieces.append(blob)
        position += len(blob)
    writer.put(aiven_object_key(options.key_prefix, key, "indexes"), b"".join(pieces))

    if write_manifest:
        epochs = _epochs_in_range(part.epochs(), seg.base_offset, nxt)
        meta = remote_log_segment_metadata(
            topic=key.topic, topic_id=key.topic_id, partition=key.partition,
            segment_id=key.segment_id, start_offset=seg.base_offset, end_offset=nxt - 1,
            max_timestamp_ms=_max_timestamp(data), broker_id=options.broker_id,
            event_timestamp_ms=int(time.time() * 1000),
            segment_leader_epochs={e.epoch: e.start_offset for e in epochs})
        manifest = SegmentManifest(chunk_index, indexes, compression, encryption, meta)
        writer.put(aiven_object_key(options.key_prefix, key, "rsm-manifest"),
                   manifest.to_json())


def _upload_local(writer: _Writer, part: _Partition, key: RemoteSegmentKey, seg: SegmentRef,
                  nxt: int, write_manifest: bool) -> None:
    writer.put(local_tiered_file(key, ".log"), part.read(seg))
    writer.put(local_tiered_file(key, ".index"), part.sibling(seg, ".index") or b"")
    writer.put(local_tiered_file(key, ".timeindex"), part.sibling(seg, ".timeindex") or b"")
    txn = part.sibling(seg, ".txnindex")
    if txn is not None:
        writer.put(local_tiered_file(key, ".txnindex"), txn)
    writer.put(local_tiered_file(key, ".leader_epoch_checkpoint"),
               _epoch_bytes(_epochs_in_range(part.epochs(), -1, nxt)))
    if write_manifest:
        writer.put(local_tiered_file(key, ".snapshot"), part.snapshot(nxt))


def upload_partition(partition_dir: str, dest_uri: str, *,
                     options: UploadOptions = UploadOptions(),
                     storage_options=None,
                     base_offsets: Sequence[int] | None = None,
                     topic_id: str | None = None,
                     segment_id: Callable[[int], str] | None = None,
                     write_manifest: bool = True,
                     source_storage_options=None,
                     force: bool = False) -> list[UploadedSegment]:
    """Upload segments of ``partition_dir`` (a ``<topic>-<partition>`` directory, any
    URI the read seam serves) to ``dest_uri`` (a local directory or an object store
    prefix; the Aiven key prefix goes after it).

    ``base_offsets``: the segments to upload (default every rolled segment: all but the
    active one; naming the active one uploads it up to the log end offset).
    ``topic_id``: default the directory's ``partition.metadata``. ``segment_id(base)``
    gives each segment's id (default a new random Uuid; tests pass fixed ids to make
    retried uploads). ``storage_options`` are the destination's (as
    :func:`kafkastore.storage.open_storage` takes them), ``source_storage_options`` the
    source directory's.

    A segment the destination already holds complete (:func:`_holds_segment`: same
    offsets, same sizes by its manifest) is not uploaded again, so a run that failed
    part way is finished by running it again; ``force`` uploads every segment anew
    (under a new segment id: readers keep one of the duplicates). Kafka itself never
    re-copies a segment whose COPY_SEGMENT_FINISHED it recorded
    (``RemoteLogManager.copyLogSegmentsToRemote`` starts after the highest offset
    copied); without ``__remote_log_metadata`` the objects are what tells.
    Returns the segments in order, uploaded or ``skipped``.
    """
    part = _Partition(partition_dir, source_storage_options, topic_id)
    sink, root = open_sink(dest_uri, storage_options)
    out = []
    try:
        todo = _segments_to_upload(part, base_offsets)
        existing = [] if force or not todo else \
            _existing_uploads(dest_uri, storage_options, options, part)
        if existing:
            storage = open_storage(dest_uri, storage_options)[0]
        for seg, nxt in todo:
            held = next((objs for objs in existing if objs.key.start_offset ==
                         seg.base_offset and _holds_segment(storage, objs, seg, nxt)),
                        None)
            if held is not None:
                paths = sorted(relative_path(root, i.path) for i in held.files.values())
                out.append(UploadedSegment(held.key, nxt - 1, paths, 0, skipped=True))
                continue
            sid = segment_id(seg.base_offset) if segment_id else new_segment_id()
            key = RemoteSegmentKey(part.topic, part.topic_id, part.partition,
                                   seg.base_offset, sid)
            writer = _Writer(sink, root)
            try:
                if options.layout == "aiven":
                    _upload_aiven(writer, part, key, seg, nxt, options, write_manifest)
                else:
                    _upload_local(writer, part, key, seg, nxt, write_manifest)
            except BaseException:
                writer.remove_all()
                raise
            out.append(UploadedSegment(key, nxt - 1, list(writer.written), writer.bytes))
    finally:
        part.log.close()
    return out
