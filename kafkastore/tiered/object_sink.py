"""Where a tiered upload writes its objects: a local directory or an object store.

:func:`open_sink` takes the URIs and options the read seam takes
(:func:`kafkastore.storage.open_storage`: the same schemes, option names, shared clients
and retry policy) and gives an :class:`ObjectSink`:

* a local directory (a path or ``file://``): each object is a file, written whole to a
  temporary file, fsynced and renamed into place (Kafka's checkpoint protocol,
  :func:`kafkastore.checkpoint.write_atomically`), so a crash leaves either no file or
  the whole one, never a torn object a reader would take for a finished upload;
* any store the seam serves with pyarrow (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``,
  fsspec schemes): each object is one PUT (``open_output_stream``, written whole and
  closed), retried on transient failures as the seam retries reads (a PUT of the same
  bytes is idempotent).

Object paths are the store's own (``/tmp/copy/...`` or ``bucket/prefix/...``), as the
read seam's; :meth:`ObjectSink.join` builds them.

Thread-safety: a sink holds no per-call state; puts from several threads are safe (the
pyarrow file systems are thread-safe; local files are distinct temp files per object).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kafkastore import _fileio
from kafkastore.checkpoint import write_atomically
from kafkastore.storage import ArrowStorage, ReadOnlyStorage, open_storage

__all__ = ["ObjectSink", "LocalSink", "ArrowSink", "open_sink"]


class ObjectSink:
    """Whole-object writes (abstract; :class:`LocalSink`, :class:`ArrowSink`)."""

    join = staticmethod(ReadOnlyStorage.join)

    def put(self, path: str, data: bytes) -> None:
        """Write the object ``path`` with ``data``, replacing any object there."""
        raise NotImplementedError

    def delete(self, path: str) -> None:
        """Remove the object ``path``; nothing if there is none."""
        raise NotImplementedError

    def uri(self, path: str) -> str:
        """``path`` as a URI, for messages."""
        return path


class LocalSink(ObjectSink):
    """Objects as files under a local directory (temp + fsync + rename each)."""

    def put(self, path: str, data: bytes) -> None:
        _fileio.makedirs(os.path.dirname(os.path.abspath(path)))
        write_atomically(path, bytes(data))

    def delete(self, path: str) -> None:
        _fileio.fs.unlink(path)

    def __repr__(self) -> str:
        return "LocalSink()"


class ArrowSink(ObjectSink):
    """Objects on a pyarrow file system, one PUT each, with the read seam's retries."""

    def __init__(self, storage: ArrowStorage) -> None:
        self.storage = storage

    def uri(self, path: str) -> str:
        return self.storage.uri(path)

    def _put(self, path: str, data: bytes) -> None:
        with self.storage.fs.open_output_stream(path) as out:
            out.write(data)

    def put(self, path: str, data: bytes) -> None:
        self.storage._call("write", path, self._put, path, bytes(data))

    def _delete(self, path: str) -> None:
        try:
            self.storage.fs.delete_file(path)
        except FileNotFoundError:
            pass

    def delete(self, path: str) -> None:
        self.storage._call("delete", path, self._delete, path)

    def __repr__(self) -> str:
        return f"ArrowSink({self.storage.uri('')!r})"


def open_sink(uri: str, options: Mapping[str, Any] | None = None) -> tuple[ObjectSink, str]:
    """The sink writing under ``uri`` and the path of ``uri`` in it (see the module);
    ``options`` as :func:`kafkastore.storage.open_storage` takes them."""
    storage, path = open_storage(uri, options)
    if isinstance(storage, ArrowStorage):
        return ArrowSink(storage), path
    return LocalSink(), path
