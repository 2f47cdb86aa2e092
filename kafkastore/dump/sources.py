"""Where the dump reads a file's bytes: the local file system, or a store a URI names.

The dumper asks a source for everything it reads, so one code path parses and prints
both (:mod:`kafkastore.dump`, "Files given as URIs"):

* :class:`LocalFiles`, a plain path: the ``.log`` through ``pread``
  (:class:`~kafkastore.file_records.FileRecords`, read-only), the indexes mapped
  read-only, names printed as ``java.io.File`` prints them, problem reports under
  Java's absolute path;
* :class:`StorageFiles`, a URI: the ``.log`` as ranged reads through a 1 MiB read-ahead
  (:class:`~kafkastore.file_records.StorageRecords`), each index read whole into a view,
  names printed as given.

Both give the same methods: ``display``, ``absolute``, ``sibling`` (names), ``size``,
``open_log``, ``file_bytes``, ``offset_index``, ``time_index``, ``entries`` and
``close_index``. A source serves one dump, from one thread.
"""

from __future__ import annotations

import os

from kafkastore.dump.java_format import java_abs, java_join, java_parent, java_path
from kafkastore.errors import KafkaStoreError
from kafkastore.file_records import FileRecords
from kafkastore.index import OffsetIndex, TimeIndex

__all__ = ["LocalFiles", "StorageFiles"]


def _open_log(path: str) -> FileRecords:
    """The ``.log`` opened read-only (Kafka's ``FileRecords.open(file, false)``)."""
    return FileRecords.open(path, file_already_exists=True, mutable=False)


def _stat_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class LocalFiles:
    """Where a plain path's bytes come from: the local file system, as Kafka reads it
    (``pread`` on the ``.log``, the indexes mapped read-only), and how its names print
    (``java.io.File``'s normalisation, absolute paths in the problem reports)."""

    display = staticmethod(java_path)
    absolute = staticmethod(java_abs)
    size = staticmethod(_stat_size)

    @staticmethod
    def open_log(path: str, limit: int | None = None) -> FileRecords:
        return _open_log(path)

    @staticmethod
    def file_bytes(path: str) -> bytes:
        """A small file whole (a ``.txnindex``, a ``.snapshot``)."""
        with open(path, "rb") as f:
            return f.read()

    @staticmethod
    def sibling(file: str, name: str) -> str:
        return java_join(java_parent(file), name)

    @staticmethod
    def offset_index(file: str, base: int) -> OffsetIndex:
        return OffsetIndex(file, base, writable=False)

    @staticmethod
    def time_index(file: str, base: int) -> TimeIndex:
        return TimeIndex(file, base, writable=False)

    @staticmethod
    def entries(index) -> int:
        return index.entries

    @staticmethod
    def close_index(index) -> None:
        index.close_handler()


class _ReadAhead:
    """A :class:`~kafkastore.storage.RangeReader` with a bounded read-ahead, for the
    dump's sequential walk: a read that misses fetches ``block`` bytes from its position
    (never past ``limit``, the part of the file the dump reads), so the walk's 8 KiB
    header windows and each batch's own read come out of one ranged GET per MiB, not one
    request each. Reads of a block or more go straight to the reader. At most one block
    is held. One thread at a time, as the reader."""

    __slots__ = ("_reader", "path", "size", "_limit", "_block", "_start", "_buf")

    def __init__(self, reader, limit: int | None = None, block: int = 1 << 20) -> None:
        self._reader = reader
        self.path = reader.path
        self.size = reader.size
        self._limit = reader.size if limit is None else min(limit, reader.size)
        self._block = block
        self._start = 0
        self._buf = b""

    def chunk_bounds(self, position: int) -> None:
        """None: the read-ahead's blocks already decide what is fetched."""
        return None

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.size)
        if position < 0 or position >= end:
            return b""
        start = self._start
        if start <= position and end <= start + len(self._buf):
            return self._buf[position - start:end - start]
        if end - position >= self._block:
            return self._reader.read(position, end - position)
        ahead = max(end, min(position + self._block, self._limit))
        self._buf = self._reader.read(position, ahead - position)
        self._start = position
        return self._buf[:end - position]

    def close(self) -> None:
        self._buf = b""
        self._reader.close()


class StorageFiles:
    """Where a URI's bytes come from (``s3://``, ``gs://``, ``memory://``, ``file://``
    ...): :mod:`kafkastore.storage`. The ``.log`` is read through
    :class:`~kafkastore.file_records.StorageRecords` (ranged reads of what the dump
    walks, through a 1 MiB read-ahead, never a download of the file); an index, a few
    MiB at most, is read whole and searched through
    :class:`~kafkastore.index.OffsetIndexView` / ``TimeIndexView``, the read-only twins
    of the mapped indexes. Everything the dump parses goes through the same
    :class:`~kafkastore.dump.dumper.Dumper` code as a local file, so the output is the
    same but for the names: a URI prints as it was given, and is its own absolute path.

    One storage is opened per directory (the URI up to its last ``/``), with the
    ``options`` given (:func:`kafkastore.storage.open_storage`); or, with ``resolve``,
    ``resolve(name) -> (storage, path)`` says where each name is (the CLI's files of a
    tiered copy, read through its virtual log directory).
    """

    def __init__(self, options, resolve=None) -> None:
        self.options = dict(options or {})
        self._dirs: dict[str, tuple] = {}
        self._resolver = resolve

    @staticmethod
    def display(uri: str) -> str:
        return uri

    @staticmethod
    def absolute(uri: str) -> str:
        return uri

    @staticmethod
    def sibling(uri: str, name: str) -> str:
        return uri.rsplit("/", 1)[0] + "/" + name

    def _resolve(self, uri: str):
        """``(storage, path)`` of ``uri``."""
        from kafkastore.storage import open_storage

        if self._resolver is not None:
            return self._resolver(uri)
        parent, _, name = uri.rpartition("/")
        hit = self._dirs.get(parent)
        if hit is None:
            storage, path = open_storage(uri, self.options)
            hit = self._dirs[parent] = (storage, storage.dirname(path))
        storage, directory = hit
        return storage, storage.join(directory, name)

    @staticmethod
    def _missing(uri: str) -> FileNotFoundError:
        # worded as a local file's: the dump's lines differ only in the names
        import errno

        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), uri)

    def size(self, uri: str) -> int:
        try:
            storage, path = self._resolve(uri)
            return storage.size(path)
        except (KafkaStoreError, OSError):
            return 0

    def open_log(self, uri: str, limit: int | None = None) -> FileRecords:
        from kafkastore.errors import StorageFileNotFoundError
        from kafkastore.file_records import StorageRecords

        storage, path = self._resolve(uri)
        try:
            reader = storage.open(path)
        except StorageFileNotFoundError:
            raise self._missing(uri) from None
        return StorageRecords(_ReadAhead(reader, limit), uri)

    def _index_bytes(self, uri: str) -> bytes:
        storage, path = self._resolve(uri)
        data = storage.read_file(path)
        if data is None:
            raise self._missing(uri)
        return data

    file_bytes = _index_bytes

    def offset_index(self, uri: str, base: int):
        from kafkastore.index import OffsetIndexView

        # trusted: every whole entry, as the local file's mapped index counts them (the
        # dump shows a crash's zero padding, and its checks report it)
        return OffsetIndexView(self._index_bytes(uri), base, uri, trusted=True)

    def time_index(self, uri: str, base: int):
        from kafkastore.index import TimeIndexView

        return TimeIndexView(self._index_bytes(uri), base, uri, trusted=True)

    @staticmethod
    def entries(index) -> int:
        return index.entries

    @staticmethod
    def close_index(index) -> None:
        """A view holds bytes, nothing to release."""
