"""What a tiered copy holds, from one listing: its segments' objects, grouped and named.

Two layouts, told apart by their object names (:func:`detect_layout`):

``aiven`` (Aiven's tiered-storage-for-apache-kafka, ``ObjectKeyFactory``)
    ``<prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segmentId>.<suffix>``
    with the suffixes ``log`` (the segment, chunk-transformed), ``indexes`` (every index
    of the segment, concatenated) and ``rsm-manifest`` (JSON, written last). The prefix
    (``storage.key.prefix``) may hold ``/``: the listing is recursive, so a copy is found
    under any number of directories below the URI; a prefix that ends inside a name
    (``tiered-orders-...``) must be given (``key_prefix``), the topic name alone cannot
    tell where it starts.

``local`` (Apache Kafka's ``LocalTieredStorage``, its integration tests' RSM)
    ``<topic>-<partition>-<topicId>/<20-digit start offset>-<segmentId><suffix>`` with the
    suffixes ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` (optional),
    ``.leader_epoch_checkpoint`` and ``.snapshot``, each the file as the broker had it.

Topic ids and segment ids are Kafka ``Uuid`` strings (22 URL-safe base64 characters).
Objects that match neither form are ignored (other topics' data, a bucket's other
content); the listing never reads an object.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkastore.errors import TieredStorageError
from kafkastore.storage import FileInfo, ReadOnlyStorage
from kafkastore.tiered.object_keys import (
    AIVEN_SUFFIXES,
    LOCAL_OPTIONAL_SUFFIXES,
    LOCAL_SUFFIXES,
    RemoteSegmentKey,
    parse_aiven_object_key,
    parse_local_tiered_file,
)

__all__ = [
    "relative_path",
    "AIVEN",
    "LOCAL",
    "LAYOUTS",
    "AIVEN_SUFFIXES",
    "LOCAL_SUFFIXES",
    "LOCAL_REQUIRED",
    "SegmentObjects",
    "list_copy",
    "detect_layout",
]

AIVEN = "aiven"
LOCAL = "local"
LAYOUTS = (AIVEN, LOCAL)

#: The files LocalTieredStorage always writes (RemoteLogSegmentFileset: only the
#: transaction index is optional); a fileset without one of them is unfinished.
LOCAL_REQUIRED = tuple(s for s in LOCAL_SUFFIXES if s not in LOCAL_OPTIONAL_SUFFIXES)


@dataclass
class SegmentObjects:
    """The objects of one uploaded segment: ``files`` maps a suffix (``log``,
    ``indexes``, ``rsm-manifest``; or ``.log``, ``.index``, ...) to its listing entry.
    ``prefix`` is the object name up to the suffix (Aiven: the key without its
    extension), ``layout`` the layout it was found in."""

    key: RemoteSegmentKey
    layout: str
    prefix: str
    files: dict[str, FileInfo] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        """The files the layout always writes that are not there (an unfinished upload,
        or one being deleted): for Aiven, the manifest is written last, so its absence
        alone says so; a manifest without its ``.log`` is a half-deleted segment."""
        need = AIVEN_SUFFIXES if self.layout == AIVEN else LOCAL_REQUIRED
        return [s for s in need if s not in self.files]

    @property
    def complete(self) -> bool:
        return not self.missing


def relative_path(root: str, path: str) -> str:
    """``path`` relative to the listing ``root`` (the key a store's listing gives, without
    the root's prefix); upload.py names its objects the same way."""
    root = root.rstrip("/")
    if root and path.startswith(root + "/"):
        return path[len(root) + 1:]
    return path.lstrip("/") if not root else path


def _parse_aiven(rel: str, key_prefix: str) -> tuple[RemoteSegmentKey, str, str] | None:
    """``(key, suffix, the object name without its suffix)``; without a key prefix, any
    directories above ``<topic>-<topicId>/`` are the prefix."""
    if key_prefix:
        if not rel.startswith(key_prefix):
            return None
        parsed = parse_aiven_object_key(rel[len(key_prefix):])
    else:
        parsed = parse_aiven_object_key("/".join(rel.split("/")[-3:]))
    if parsed is None:
        return None
    key, suffix = parsed
    return key, suffix, rel[:-len(suffix) - 1]


def _parse_local(rel: str) -> tuple[RemoteSegmentKey, str, str] | None:
    parts = rel.split("/")
    parsed = parse_local_tiered_file(parts[-2], parts[-1]) if len(parts) >= 2 else None
    if parsed is None:
        return None
    key, suffix = parsed
    return key, suffix, rel[:-len(suffix)]


def detect_layout(root: str, files: list[FileInfo], key_prefix: str = "") -> str:
    """The layout the objects under ``root`` are in: the one more of them match.
    Raises :class:`~kafkastore.errors.TieredStorageError` when none match."""
    aiven = local = 0
    for info in files:
        if info.is_dir:
            continue
        rel = relative_path(root, info.path)
        if _parse_aiven(rel, key_prefix) is not None:
            aiven += 1
        elif _parse_local(rel) is not None:
            local += 1
    if not aiven and not local:
        hint = f" with key prefix {key_prefix!r}" if key_prefix else ""
        raise TieredStorageError(
            f"no tiered-storage segment objects{hint} under this URI: neither Aiven's "
            "'<prefix><topic>-<topicId>/<partition>/<offset>-<segmentId>.log|indexes|"
            "rsm-manifest' nor LocalTieredStorage's '<topic>-<partition>-<topicId>/"
            "<offset>-<segmentId>.log|...' names", path=root)
    return AIVEN if aiven >= local else LOCAL


def list_copy(storage: ReadOnlyStorage, root: str, *, layout: str | None = None,
              key_prefix: str = "") -> tuple[str, dict[tuple[str, int], list[SegmentObjects]]]:
    """One recursive listing of ``root``: ``(layout, {(topic, partition): [segment
    objects sorted by start offset, then segment id]})``."""
    files = storage.walk(root)
    if layout is None:
        try:
            layout = detect_layout(root, files, key_prefix)
        except TieredStorageError as exc:
            exc.path = storage.uri(root)
            raise
    elif layout not in LAYOUTS:
        raise TieredStorageError(f"unknown tiered-storage layout {layout!r}: one of "
                                 f"{', '.join(LAYOUTS)}", path=storage.uri(root))
    if layout == LOCAL and key_prefix:
        raise TieredStorageError("a key prefix is an Aiven layout setting; the local "
                                 "layout has none", path=storage.uri(root))
    segments: dict[tuple[str, int, str, int], SegmentObjects] = {}
    for info in files:
        if info.is_dir:
            continue
        rel = relative_path(root, info.path)
        parsed = _parse_aiven(rel, key_prefix) if layout == AIVEN else _parse_local(rel)
        if parsed is None:
            continue
        key, suffix, prefix = parsed
        ident = (key.topic, key.partition, key.segment_id, key.start_offset)
        seg = segments.get(ident)
        if seg is None:
            seg = segments[ident] = SegmentObjects(key, layout, prefix)
        seg.files[suffix] = info
    out: dict[tuple[str, int], list[SegmentObjects]] = {}
    for seg in segments.values():
        out.setdefault((seg.key.topic, seg.key.partition), []).append(seg)
    for segs in out.values():
        segs.sort(key=lambda s: (s.key.start_offset, s.key.segment_id))
    return layout, dict(sorted(out.items()))
