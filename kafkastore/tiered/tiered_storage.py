"""A tiered copy served as a log directory: :class:`TieredStorage` and :func:`open_tiered`.

:class:`TieredStorage` is a read-only storage (:mod:`kafkastore.storage`) whose files are
virtual: one partition directory ``<topic>-<partition>`` per partition of the copy,
holding, for each segment the resolution (:mod:`kafkastore.tiered.resolve`) chose,

=================================  ====================================================
``<start, 20 digits>.log``         the original segment: Aiven's chunked object read
                                   through :class:`~kafkastore.tiered.chunk_reader.
                                   ChunkedReader` (a copy without transforms: the
                                   object itself), LocalTieredStorage's ``.log``
``.index``, ``.timeindex``,        Aiven: slices of the one ``.indexes`` object
``.txnindex``                      (fetched whole, once, and decrypted if need be);
                                   LocalTieredStorage: its files
``<end + 1, 20 digits>.snapshot``  the producer snapshot Kafka uploaded with the segment
                                   (taken at the next segment's base offset)
=================================  ====================================================

plus the partition's ``leader-epoch-checkpoint`` (the last segment's leader-epoch
entries, which Kafka uploads up to that segment's end) and ``partition.metadata`` (the
topic id). :class:`~kafkastore.log_view.ReadOnlyLog` and
:class:`~kafkastore.log_view.ReadOnlyLogDir` read it as they read a broker's directory:
read, records, columns, offset-for-timestamp, read_committed. Every segment upload that
is complete, served or not, is also reachable as ``.segments/<topic>-<partition>/
<segment id>/`` (not listed; for ``verify`` and ``dump-log`` of one upload).

What a read costs: the listing (one recursive listing of the URI) and the manifests (one
small GET per Aiven segment, made when a partition is first used) when the copy is
opened; then only ranged reads: the chunks a query needs, and each segment's
``.indexes`` once. :attr:`TieredStorage.stats` counts the virtual reads,
``copy.storage.stats`` the real requests and bytes.

Thread-safety: a :class:`TieredStorage` may be shared by threads (its caches fill under
a lock, idempotently); a reader it opens is for one thread at a time. It pickles with
its resolved partitions (manifests included, so Spark workers do not fetch them again)
and its key ring, without caches.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkastore.errors import (
    CorruptChunkError,
    CorruptManifestError,
    StorageFileNotFoundError,
    TieredStorageError,
)
from kafkastore.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME
from kafkastore.log_view import ReadOnlyLog, ReadOnlyLogDir
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME, encode_topic_id
from kafkastore.segment import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
)
from kafkastore.storage import FileInfo, RangeReader, ReadOnlyStorage, open_storage
from kafkastore.tiered.chunk_reader import ChunkCache, ChunkedReader
from kafkastore.tiered.crypto import IV_SIZE, TAG_SIZE
from kafkastore.tiered.listing import AIVEN, LOCAL, SegmentObjects, list_copy
from kafkastore.tiered.manifest import parse_manifest
from kafkastore.tiered.resolve import RemoteSegment, ResolvedPartition, resolve
from kafkastore.tiered.transform import segment_transform
from kafkastore.topic import TopicPartition

__all__ = ["TieredStorage", "TieredCopy", "open_tiered", "SEGMENTS_DIR", "MANIFEST_LIMIT"]

#: The hidden directory every complete upload is reachable under.
SEGMENTS_DIR = ".segments"
#: The largest manifest read (a manifest is a few hundred bytes plus the encoded chunk
#: sizes; a 2 GiB segment in 4 KiB chunks encodes its sizes in a few MiB).
MANIFEST_LIMIT = 64 << 20
_SNAPSHOT_SUFFIX = ".snapshot"
#: Aiven's index names in the manifest, and the suffix each has in a log directory.
_AIVEN_INDEXES = (("offset", INDEX_FILE_SUFFIX), ("timestamp", TIME_INDEX_FILE_SUFFIX),
                  ("transaction", TXN_INDEX_FILE_SUFFIX),
                  ("producerSnapshot", _SNAPSHOT_SUFFIX))
_LOCAL_FILES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
                _SNAPSHOT_SUFFIX)


@dataclass(frozen=True)
class _VFile:
    """A virtual file: ``kind`` is ``log`` (a segment's original bytes), ``slice`` (an
    Aiven index inside ``.indexes``: ``arg`` is its manifest name), ``object`` (an
    object served as it is: ``arg`` its path), ``bytes`` (``arg`` the content)."""

    kind: str
    size: int
    segment: RemoteSegment | None = None
    arg: Any = None


class _Partition:
    """One partition of the copy: its uploads, their resolution, its virtual files."""

    def __init__(self, tp: TopicPartition, topic_id: str, objects: list[SegmentObjects]):
        self.tp = tp
        self.topic_id = topic_id
        self.objects = objects
        self.segments: list[RemoteSegment] | None = None
        self.resolved: ResolvedPartition | None = None
        self.errors: list[tuple[SegmentObjects, Exception]] = []

    @property
    def dir_name(self) -> str:
        return f"{self.tp.topic}-{self.tp.partition}"


class TieredStorage(ReadOnlyStorage):
    """A tiered copy as a read-only log directory (see the module)."""

    def __init__(self, storage: ReadOnlyStorage, root: str, layout: str,
                 partitions: dict[TopicPartition, _Partition], *, key_ring=None,
                 strict: bool = True) -> None:
        super().__init__(storage.retry)
        self.storage = storage
        self.root = root
        self.layout = layout
        self.key_ring = key_ring
        self.strict = strict
        self.copy_uri = storage.uri(root)
        self._partitions = partitions
        self._lock = threading.RLock()
        self._files: dict[str, _VFile] = {}
        self._dirs: dict[str, list[FileInfo]] = {"": []}
        self._indexes: dict[str, bytes] = {}
        self._transforms: dict[str, Any] = {}
        self._built: set[TopicPartition] = set()
        self.chunk_cache = ChunkCache()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_indexes"] = {}
        if state["key_ring"] is not None:
            state["_transforms"] = {}   # made again from the ring
        state["chunk_cache"] = None
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self.chunk_cache = ChunkCache()

    # -- the copy --------------------------------------------------------------------

    @property
    def partitions(self) -> list[TopicPartition]:
        return list(self._partitions)

    def partition(self, tp: TopicPartition) -> _Partition:
        part = self._partitions.get(tp)
        if part is None:
            raise TieredStorageError(f"{tp} is not in the tiered copy", path=self.copy_uri)
        self._build(part)
        return part

    def for_files(self, tp: TopicPartition, paths: list[str]) -> TieredStorage:
        """A copy of this storage that serves only the virtual files ``paths`` of the
        resolved partition ``tp`` (what one Spark task reads): it lists, resolves and
        fetches nothing to open them, and pickles small (only those segments'
        manifests). It holds no key ring: the data keys of those segments are unwrapped
        here and travel instead, so a task's payload never carries an RSA private key,
        only the keys of the segments it reads (a missing key is raised here)."""
        part = self.partition(tp)
        with self._lock:
            files = {p: self._files[p] for p in paths}
            dirs = {"": [i for i in self._dirs.get("", ()) if i.path == part.dir_name],
                    part.dir_name: [i for i in self._dirs.get(part.dir_name, ())
                                    if i.path in files]}
        segments = list({id(vf.segment): vf.segment for vf in files.values()
                         if vf.segment is not None}.values())
        stub = _Partition(tp, part.topic_id, [seg.objects for seg in segments])
        stub.segments = segments
        out = TieredStorage(self.storage, self.root, self.layout, {tp: stub},
                            key_ring=None, strict=self.strict)
        for seg in segments:
            if seg.manifest is not None and seg.manifest.encryption is not None:
                out._transforms[seg.segment_id] = self.transform(seg)
        out._files = files
        out._dirs = dirs
        out._built = {tp}
        return out

    def object_uri(self, info: FileInfo) -> str:
        return self.storage.uri(info.path)

    def _manifest(self, objs: SegmentObjects):
        info = objs.files["rsm-manifest"]
        uri = self.storage.uri(info.path)
        data = self.storage.read_file(info.path, limit=MANIFEST_LIMIT)
        if data is None:
            raise StorageFileNotFoundError(f"{uri}: no such object", path=uri)
        return parse_manifest(data, path=uri)

    def _segments_of(self, part: _Partition) -> list[RemoteSegment]:
        out = []
        for objs in part.objects:
            seg = RemoteSegment(objs)
            if objs.complete:
                try:
                    if self.layout == AIVEN:
                        seg.manifest = m = self._manifest(objs)
                        seg.size = m.chunk_index.original_file_size
                        seg.end_offset = m.end_offset_hint()
                        epochs = m.leader_epochs_hint()
                        if epochs:
                            seg.leader_epoch = max(epochs)
                    else:
                        seg.size = objs.files[LOG_FILE_SUFFIX].size
                except TieredStorageError as exc:   # a manifest that does not parse, too
                    if self.strict:
                        raise
                    part.errors.append((objs, exc))
                    continue
            out.append(seg)
        return out

    def listed(self, part: _Partition) -> list[RemoteSegment]:
        """The partition's uploads with their manifests, not resolved: what is known
        without reading a segment (so without a key ring). Fetched once."""
        if part.segments is None:
            with self._lock:
                if part.segments is None:
                    part.segments = self._segments_of(part)
        return part.segments

    def _build(self, part: _Partition) -> None:
        if part.tp in self._built:
            return
        with self._lock:
            if part.tp in self._built:
                return
            self.listed(part)
            for seg in part.segments:
                if seg.complete:
                    self._add_segment_files(self._hidden_dir(part, seg), seg, None)
            part.resolved = resolve(part.segments, lambda s: self._end_offset(part, s))
            self._add_partition_files(part)
            self._built.add(part.tp)

    def _build_all(self) -> None:
        for part in self._partitions.values():
            self._build(part)

    @staticmethod
    def _hidden_dir(part: _Partition, seg: RemoteSegment) -> str:
        return f"{SEGMENTS_DIR}/{part.dir_name}/{seg.segment_id}"

    def segment_dir(self, tp: TopicPartition, segment_id: str) -> str:
        """The hidden directory of one complete upload (served or not)."""
        return f"{SEGMENTS_DIR}/{tp.topic}-{tp.partition}/{segment_id}"

    def _end_offset(self, part: _Partition, seg: RemoteSegment) -> int | None:
        d = self._hidden_dir(part, seg)
        log = ReadOnlyLog(self, d, self._dirs[d])
        try:
            leo = log.log_end_offset
        finally:
            log.close()
        return leo - 1 if leo > seg.start_offset else None

    def _add(self, directory: str, name: str, vfile: _VFile) -> None:
        path = f"{directory}/{name}"
        self._files[path] = vfile
        self._dirs.setdefault(directory, []).append(FileInfo(name, path, vfile.size, False))

    def _add_dir(self, parent: str, name: str) -> str:
        path = f"{parent}/{name}" if parent else name
        if path not in self._dirs:
            self._dirs[path] = []
            self._dirs.setdefault(parent, []).append(FileInfo(name, path, 0, True))
        return path

    def _add_segment_files(self, directory: str, seg: RemoteSegment,
                           snapshot_offset: int | None) -> None:
        if directory.startswith(SEGMENTS_DIR):
            self._dirs.setdefault(directory, [])
        base = f"{seg.start_offset:020d}"
        objs = seg.objects
        self._add(directory, base + LOG_FILE_SUFFIX, _VFile("log", seg.size, seg))
        if objs.layout == AIVEN:
            indexes = seg.manifest.segment_indexes
            for name, suffix in _AIVEN_INDEXES:
                ix = indexes.get(name)
                fname = _file_name(base, suffix, snapshot_offset)
                if ix is not None and fname is not None:
                    size = max(0, ix.size - _encryption_overhead(seg.manifest, ix.size))
                    self._add(directory, fname, _VFile("slice", size, seg, name))
        else:
            for suffix in _LOCAL_FILES:
                info = objs.files.get(suffix)
                fname = _file_name(base, suffix, snapshot_offset)
                if info is not None and fname is not None:
                    self._add(directory, fname, _VFile("object", info.size, seg, info.path))

    def _add_partition_files(self, part: _Partition) -> None:
        d = self._add_dir("", part.dir_name)
        segs = part.resolved.segments
        for seg in segs:
            self._add_segment_files(d, seg, seg.end_offset + 1)
        if part.topic_id:
            meta = encode_topic_id(part.topic_id)
            self._add(d, PARTITION_METADATA_FILENAME, _VFile("bytes", len(meta), None, meta))
        if segs:
            last = segs[-1]
            if last.objects.layout == AIVEN:
                ix = last.manifest.segment_indexes.get("leaderEpoch")
                if ix is not None:
                    size = ix.size - _encryption_overhead(last.manifest, ix.size)
                    self._add(d, LEADER_EPOCH_CHECKPOINT_FILENAME,
                              _VFile("slice", max(0, size), last, "leaderEpoch"))
            else:
                info = last.objects.files.get(".leader_epoch_checkpoint")
                if info is not None:
                    self._add(d, LEADER_EPOCH_CHECKPOINT_FILENAME,
                              _VFile("object", info.size, last, info.path))

    # -- the seam's primitives --------------------------------------------------------

    def uri(self, path: str) -> str:
        vf = self._files.get(path)
        if vf is not None and vf.segment is not None:
            objs = vf.segment.objects
            if vf.kind == "log":
                return self.storage.uri(objs.files["log" if objs.layout == AIVEN
                                                   else LOG_FILE_SUFFIX].path)
            if vf.kind == "object":
                return self.storage.uri(vf.arg)
            if vf.kind == "slice":
                return f"{self.storage.uri(objs.files['indexes'].path)}#{vf.arg}"
        return f"{self.copy_uri}#{path}" if path else self.copy_uri

    def _dir_key(self, path: str) -> str:
        return path.strip("/")

    def _list(self, path: str) -> list[FileInfo]:
        key = self._dir_key(path)
        if key == "":
            self._build_all()
        elif key not in self._dirs:
            self._build_for(key)
        entries = self._dirs.get(key)
        if entries is None:
            raise StorageFileNotFoundError(f"{self.uri(path)}: no such directory",
                                           path=self.uri(path))
        return list(entries)

    def _walk(self, path: str) -> list[FileInfo]:
        key = self._dir_key(path)
        if key == "":
            self._build_all()
            out = []
            for info in self._dirs[""]:
                if info.name == SEGMENTS_DIR:
                    continue
                out.append(info)
                if info.is_dir:
                    out.extend(self._dirs.get(info.path, []))
            return out
        return super()._walk(path)

    def _build_for(self, key: str) -> None:
        name = key.split("/")[1] if key.startswith(SEGMENTS_DIR + "/") else key.split("/")[0]
        for part in self._partitions.values():
            if part.dir_name == name:
                self._build(part)

    def _lookup(self, path: str) -> _VFile | None:
        key = self._dir_key(path)
        vf = self._files.get(key)
        if vf is None and key not in self._dirs:
            self._build_for(key.rsplit("/", 1)[0] if "/" in key else key)
            vf = self._files.get(key)
        return vf

    def _size(self, path: str) -> int | None:
        vf = self._lookup(path)
        return None if vf is None else vf.size

    def _is_dir(self, path: str) -> bool:
        key = self._dir_key(path)
        if key not in self._dirs:
            self._build_for(key)
        return key in self._dirs

    def _open(self, path: str, size: int | None = None) -> RangeReader:
        vf = self._lookup(path)
        if vf is None:
            raise StorageFileNotFoundError(f"{self.uri(path)}: no such file",
                                           path=self.uri(path))
        key = self._dir_key(path)
        if vf.kind == "log":
            return self._open_log(key, vf.segment)
        if vf.kind == "object":
            return self.storage.open(vf.arg, vf.size)
        if vf.kind == "slice":
            return _BytesReader(self, key, self.index_bytes(vf.segment, vf.arg))
        return _BytesReader(self, key, vf.arg)

    # -- segment bytes ----------------------------------------------------------------

    def transform(self, seg: RemoteSegment):
        """The segment's :class:`~kafkastore.tiered.transform.ChunkTransform` (its data
        key unwrapped with the key ring once; a missing key is
        :class:`~kafkastore.errors.MissingKeyError` naming the key id)."""
        sid = seg.segment_id
        t = self._transforms.get(sid)
        if t is None:
            uri = self.storage.uri(seg.objects.files["rsm-manifest"].path)
            t = segment_transform(seg.manifest, self.key_ring, path=uri)
            with self._lock:
                self._transforms[sid] = t
        return t

    def _open_log(self, path: str, seg: RemoteSegment) -> RangeReader:
        objs = seg.objects
        if objs.layout == LOCAL:
            info = objs.files[LOG_FILE_SUFFIX]
            return self.storage.open(info.path, info.size)
        info = objs.files["log"]
        uri = self.storage.uri(info.path)
        index = seg.manifest.chunk_index
        if not seg.manifest.compression and seg.manifest.encryption is None \
                and index.is_identity:
            # no transform: the object is the segment, positions map one to one
            if info.size != index.original_file_size:
                raise CorruptChunkError(
                    f"the object has {info.size} bytes; its manifest says the segment "
                    f"has {index.original_file_size} and no transforms", path=uri)
            return self.storage.open(info.path, info.size)
        return ChunkedReader(self, path, self.storage.open(info.path, info.size), index,
                             self.transform(seg), uri, self.chunk_cache)

    def index_bytes(self, seg: RemoteSegment, name: str) -> bytes:
        """One index of an Aiven segment by its manifest name (``offset``,
        ``timestamp``, ``producerSnapshot``, ``leaderEpoch``, ``transaction``),
        detransformed; ``b""`` for an empty one. The ``.indexes`` object is fetched
        whole once: it is every index of the segment, each small."""
        info = seg.objects.files["indexes"]
        blob = self._indexes.get(info.path)
        if blob is None:
            blob = self.storage.read_file(info.path, limit=MANIFEST_LIMIT * 4)
            if blob is None:
                raise StorageFileNotFoundError(f"{self.storage.uri(info.path)}: no such "
                                               "object", path=self.storage.uri(info.path))
            with self._lock:
                self._indexes[info.path] = blob
        ix = seg.manifest.segment_indexes[name]
        uri = self.storage.uri(info.path)
        if ix.position + ix.size > len(blob):
            raise CorruptManifestError(
                f"the manifest places the {name} index at {ix.position}+{ix.size}, past "
                f"the end of the {len(blob)}-byte indexes object", path=uri)
        part = blob[ix.position:ix.position + ix.size]
        if not part:
            return b""
        return self.transform(seg).detransform_index(part, name=name, path=uri)


def _file_name(base: str, suffix: str, snapshot_offset: int | None) -> str | None:
    """A segment file's name in the virtual directory: the producer snapshot is named by
    the offset it was taken at (none in a directory of one upload alone)."""
    if suffix != _SNAPSHOT_SUFFIX:
        return base + suffix
    return None if snapshot_offset is None else f"{snapshot_offset:020d}{_SNAPSHOT_SUFFIX}"


def _encryption_overhead(manifest, transformed_size: int) -> int:
    """Bytes an encrypted index carries beyond its plain content (IV and GCM tag)."""
    if manifest.encryption is None or transformed_size == 0:
        return 0
    return IV_SIZE + TAG_SIZE


class _BytesReader(RangeReader):
    """Bytes held in memory, read as a file."""

    __slots__ = ("_data",)

    def __init__(self, storage: ReadOnlyStorage, path: str, data: bytes) -> None:
        super().__init__(storage, path, len(data))
        self._data = data

    def read(self, position: int, size: int) -> bytes:
        want = self._want(position, size)
        return self._data[position:position + want]


class TieredCopy:
    """A tiered-storage copy of some topics' partitions, opened by :func:`open_tiered`.

    ``storage`` is the store the objects are in (its ``stats`` count the real requests),
    ``tiered_storage`` the copy as a virtual log directory. Partitions are resolved the
    first time they are used (their manifests fetched then).
    """

    def __init__(self, tiered_storage: TieredStorage) -> None:
        self.tiered_storage = tiered_storage
        self.storage = tiered_storage.storage
        self.uri = tiered_storage.copy_uri
        self.layout = tiered_storage.layout
        self._log_dir: ReadOnlyLogDir | None = None

    def __repr__(self) -> str:
        return f"TieredCopy({self.uri!r}, layout={self.layout!r}, " \
               f"partitions={len(self.partitions())})"

    def __enter__(self) -> TieredCopy:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def partitions(self) -> list[TopicPartition]:
        return self.tiered_storage.partitions

    def topic_id(self, topic: str) -> str | None:
        for tp, part in self.tiered_storage._partitions.items():
            if tp.topic == topic:
                return part.topic_id
        return None

    def resolution(self, tp: TopicPartition) -> ResolvedPartition:
        return self.tiered_storage.partition(tp).resolved

    def errors(self, tp: TopicPartition) -> list[tuple[SegmentObjects, Exception]]:
        """Uploads left out because their manifest did not read (``strict=False``)."""
        return list(self.tiered_storage.partition(tp).errors)

    def uploads(self, tp: TopicPartition) -> list[RemoteSegment]:
        """Every upload of the partition, served, dropped or not finished."""
        return list(self.tiered_storage.partition(tp).segments)

    def listed_uploads(self, tp: TopicPartition) -> list[RemoteSegment]:
        """Every upload of the partition with its manifest, unresolved (their end
        offsets the manifests' hints): all that can be listed when resolving fails, as
        it does for an encrypted copy without its key (resolution reads batches)."""
        ts = self.tiered_storage
        part = ts._partitions.get(tp)
        if part is None:
            raise TieredStorageError(f"{tp} is not in the tiered copy", path=self.uri)
        return list(ts.listed(part))

    def log(self, tp: TopicPartition) -> ReadOnlyLog:
        """The partition's served segments as a :class:`~kafkastore.log_view.ReadOnlyLog`
        (log start offset: the first served segment's start)."""
        part = self.tiered_storage.partition(tp)
        return ReadOnlyLog.open(part.dir_name, storage=self.tiered_storage)

    def segment_log(self, tp: TopicPartition, segment_id: str) -> ReadOnlyLog:
        """One complete upload alone (served or not) as a one-segment log."""
        self.tiered_storage.partition(tp)
        return ReadOnlyLog.open(self.tiered_storage.segment_dir(tp, segment_id),
                                storage=self.tiered_storage)

    def log_dir(self) -> ReadOnlyLogDir:
        """Every partition of the copy as a :class:`~kafkastore.log_view.ReadOnlyLogDir`."""
        if self._log_dir is None:
            self._log_dir = ReadOnlyLogDir.open("", storage=self.tiered_storage)
        return self._log_dir

    def close(self) -> None:
        if self._log_dir is not None:
            self._log_dir.close()


def open_tiered(uri: str, *, layout: str | None = None,
                storage_options: Mapping[str, Any] | None = None, key_ring=None,
                key_prefix: str = "", strict: bool = True) -> TieredCopy:
    """Open the tiered-storage copy under ``uri`` (a local directory or any URI the
    storage seam serves). ``layout`` is ``"aiven"`` or ``"local"`` (Kafka's
    LocalTieredStorage), detected from the object names when not given; ``key_prefix``
    is Aiven's ``storage.key.prefix`` where it ends inside an object name;
    ``key_ring`` (:class:`~kafkastore.tiered.crypto.KeyRing`) decrypts encrypted
    segments. One listing now; each partition's manifests when it is first used. With
    ``strict`` (the default) a manifest that does not parse raises
    :class:`~kafkastore.errors.CorruptManifestError`; without, the upload is left out and
    reported by :meth:`TieredCopy.errors`."""
    storage, root = open_storage(uri, storage_options)
    layout, groups = list_copy(storage, root, layout=layout, key_prefix=key_prefix)
    partitions = {}
    for (topic, partition), objs in groups.items():
        tp = TopicPartition(topic, partition)
        ids = {o.key.topic_id for o in objs}
        if len(ids) > 1:
            raise TieredStorageError(
                f"{tp} has uploads under {len(ids)} topic ids ({', '.join(sorted(ids))}): a "
                "topic deleted and created again under the same name; give the URI of one",
                path=storage.uri(root))
        partitions[tp] = _Partition(tp, ids.pop(), objs)
    return TieredCopy(TieredStorage(storage, root, layout, partitions, key_ring=key_ring,
                                    strict=strict))
