"""Kafka's tiered storage (KIP-405), read and written directly: the remote copy of a topic.

``open_tiered(uri)`` opens the objects a RemoteStorageManager plugin uploaded (Aiven's
tiered-storage-for-apache-kafka, or Kafka's own LocalTieredStorage) as a
:class:`TieredCopy`: every partition resolved (retried and unfinished uploads, overlaps,
gaps: :mod:`kafkastore.tiered.resolve`) and readable with the API of a log directory
(:class:`~kafkastore.log_view.ReadOnlyLog`). ``docs/tiered.rst`` is the guide.

Modules, lower never imports higher: ``object_keys``, ``chunk_index``, ``crypto`` ->
``manifest`` -> ``transform`` -> ``listing``, ``resolve`` -> ``chunk_reader`` ->
``tiered_storage`` -> ``object_sink`` -> ``upload``, ``export``. This face imports them
when first asked (PEP 562), so ``import kafkastore.tiered`` stays cheap.
"""

from __future__ import annotations

import importlib

__all__ = ["open_tiered", "TieredCopy", "TieredStorage", "KeyRing", "ResolvedPartition",
           "RemoteSegment", "upload_partition", "UploadOptions", "export"]

_WHERE = {
    "open_tiered": "tiered_storage",
    "TieredCopy": "tiered_storage",
    "TieredStorage": "tiered_storage",
    "KeyRing": "crypto",
    "ResolvedPartition": "resolve",
    "RemoteSegment": "resolve",
    "upload_partition": "upload",
    "UploadOptions": "upload",
    "export": "export",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
