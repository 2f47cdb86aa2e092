"""The read-only storage seam: log directories on any file system, chosen by URI.

Every read of a log directory that may live somewhere other than a local disk goes
through a :class:`ReadOnlyStorage`: the read-only library API
(:mod:`kafkastore.log_view`), the Spark source and the CLI's read-only commands. Local
writes keep their own seam (:mod:`kafkastore._fileio`); nothing here writes.

URIs and what serves them (:func:`open_storage`):

======================================  ================================================
``/data/kafka`` or ``file:///data/..``  :class:`LocalStorage`: ``os.pread`` on a file
                                        opened read-only, never a mapping (a file that
                                        another process truncates cannot kill the reader)
``s3://bucket/prefix``                  ``pyarrow.fs.S3FileSystem``
``gs://`` (``gcs://``)                  ``pyarrow.fs.GcsFileSystem``
``abfs://`` (``abfss://``, ``az://``)   ``pyarrow.fs.AzureFileSystem``
``hdfs://`` (``viewfs://``)             ``pyarrow.fs.HadoopFileSystem`` (needs libhdfs)
any other scheme                        an fsspec file system (``fsspec.filesystem``),
                                        through ``pyarrow.fs.PyFileSystem(FSSpecHandler)``
======================================  ================================================

The remote ones are :class:`ArrowStorage`. Endpoints, regions and credentials come the
standard ways (the AWS, Google and Azure environment variables and config files that
pyarrow's file systems read) or as ``options`` (in Spark, reader options
``storage.<name>``; in the CLI, ``--storage-option name=value``); :data:`OPTIONS` lists
the accepted names per scheme.

Reads are ranged: :meth:`RangeReader.read` is one ``pread`` locally and one ranged GET
on an object store, of exactly the bytes asked for; callers bound what they ask for.
Listing a directory is one request (the prefix's objects). Transient failures of a
remote store (HTTP 5xx, throttling, a dropped or cut connection, a short body) are
retried with exponential backoff and jitter, :attr:`RetryPolicy.attempts` times at the
most, then raise :class:`~kafkastore.errors.StorageError`. A file or object that is
missing (deleted by retention or the cleaner after it was listed) raises
:class:`~kafkastore.errors.StorageFileNotFoundError` at once, local or remote.

Every storage counts what it did (:attr:`ReadOnlyStorage.stats`): requests, bytes read,
retries; the Spark source's measurements and the fault tests read them.

Thread-safety: a storage may be shared by threads (the pyarrow file systems are
thread-safe; the counters are updated under the GIL, one ``+=`` at a time, so a count
may be off by one under contention but is never corrupt). A :class:`RangeReader` is
for one thread at a time.
"""

from __future__ import annotations

import os
import random
import re
import stat as _stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from kafkastore.errors import (
    ConfigError,
    StorageAccessDeniedError,
    StorageError,
    StorageFileNotFoundError,
    missing_extra,
)

__all__ = [
    "ReadOnlyStorage",
    "LocalStorage",
    "ArrowStorage",
    "RangeReader",
    "FileInfo",
    "StorageStats",
    "RetryPolicy",
    "OPTIONS",
    "open_storage",
    "split_uri",
    "is_local",
    "require_local_path",
    "check_options",
]

#: URI schemes served by the local file system.
_LOCAL_SCHEMES = ("", "file", "local")
#: Schemes pyarrow serves natively, mapped to the name of their options table.
_ARROW_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "abfs",
                  "abfss": "abfs", "az": "abfs", "hdfs": "hdfs", "viewfs": "hdfs"}

#: The options each kind of store accepts, with their types (values arrive as strings
#: from Spark and the CLI and are converted). Names are pyarrow's keyword arguments.
OPTIONS: dict[str, dict[str, type]] = {
    "s3": {"endpoint_override": str, "region": str, "scheme": str, "access_key": str,
           "secret_key": str, "session_token": str, "anonymous": bool,
           "force_virtual_addressing": bool, "connect_timeout": float,
           "request_timeout": float, "role_arn": str, "session_name": str,
           "external_id": str, "load_frequency": int, "proxy_options": str,
           "background_writes": bool, "check_directory_existence_before_creation": bool},
    "gcs": {"endpoint_override": str, "scheme": str, "anonymous": bool,
            "access_token": str, "credential_token_expiration": str,
            "default_bucket_location": str, "project_id": str, "retry_time_limit": float},
    "abfs": {"account_name": str, "account_key": str, "blob_storage_authority": str,
             "dfs_storage_authority": str, "blob_storage_scheme": str,
             "dfs_storage_scheme": str, "sas_token": str, "client_id": str,
             "client_secret": str, "tenant_id": str},
    "hdfs": {"host": str, "port": int, "user": str, "replication": int,
             "buffer_size": int, "default_block_size": int, "kerb_ticket": str},
}
#: Options of the seam itself, valid for every scheme (not passed to pyarrow).
SEAM_OPTIONS = {"retry_attempts": int, "retry_base_delay_ms": int, "retry_max_delay_ms": int}

# What a transient failure of an object store looks like in the messages pyarrow and
# the AWS/GCS/Azure SDKs give (their error types are all OSError): server errors,
# throttling, timeouts and connections that dropped or delivered part of a body.
_TRANSIENT = re.compile(
    r"\b5\d\d\b|slow[ _]?down|throttl|too many requests|\b429\b|"
    r"service[ _]?unavailable|internal[ _]?(error|failure)|try again|timed? ?out|timeout|"
    r"connection|reset by peer|broken pipe|partial file|transferred a partial|"
    r"curl|network|unexpected (eof|end)|premature|incomplete|socket|temporar",
    re.IGNORECASE)
# A refusal of the request's credentials (S3's AccessDenied / InvalidAccessKeyId /
# SignatureDoesNotMatch / ExpiredToken, pyarrow's ACCESS_DENIED and "No response body"
# 403s, GCS's and Azure's 401/403): not transient, and worth naming as such.
_ACCESS_DENIED = re.compile(
    r"access[ _]?denied|(?:http|status|code)\W{0,3}(?:code\W{0,3})?40[13]\b|forbidden|"
    r"unauthori[sz]ed|invalid[ _]?access[ _]?key|signature[ _]?does[ _]?not[ _]?match|"
    r"expired[ _]?token|invalid[ _]?token|"
    r"no (aws )?credentials|unable to (locate|find) credentials|AuthorizationFailure|"
    r"AuthenticationFailed|permission denied",
    re.IGNORECASE)
_NOT_FOUND = re.compile(r"not ?found|no such (file|key)|does not exist|\b404\b|NoSuchKey",
                        re.IGNORECASE)
# A TLS handshake answered in plain text: OpenSSL's "wrong version number" (what curl,
# under pyarrow's AWS SDK, reports for an https request to a plain-HTTP port), and the
# words other TLS stacks use for it. Never transient: the endpoint's scheme is wrong.
_PLAINTEXT_PEER = re.compile(
    r"wrong version number|packet length too long|record layer failure|"
    r"http request.{0,20}https|unknown protocol", re.IGNORECASE)
# A port nothing listens on (curl's code 7 under the AWS SDK; Python's ECONNREFUSED).
_REFUSED = re.compile(r"connection refused|could not connect to server|failed to connect to|"
                      r"curlCode: 7\b", re.IGNORECASE)


class FileInfo(NamedTuple):
    """One entry of a listing: its name in the directory, full path, size, kind."""

    name: str
    path: str
    size: int
    is_dir: bool


@dataclass
class StorageStats:
    """What a storage did since it was made (or :meth:`reset`)."""

    requests: int = 0        # listings, stats, opens and ranged reads
    reads: int = 0           # ranged reads (GETs)
    bytes_read: int = 0
    retries: int = 0

    def reset(self) -> None:
        self.requests = self.reads = self.bytes_read = self.retries = 0

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "reads": self.reads,
                "bytes_read": self.bytes_read, "retries": self.retries}


@dataclass(frozen=True)
class RetryPolicy:
    """Retry a transient failure ``attempts - 1`` times, sleeping
    ``min(max_delay, base_delay * 2**n)`` times a random factor in [0.5, 1] before
    retry ``n`` (full jitter would allow 0, which a throttling store punishes)."""

    attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 5.0

    def delay(self, n: int) -> float:
        return min(self.max_delay, self.base_delay * (2 ** n)) * random.uniform(0.5, 1.0)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed storage call is worth trying again."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError,
                        NotADirectoryError, StorageFileNotFoundError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if is_access_denied(exc):   # the same credentials get the same answer
        return False
    return isinstance(exc, OSError) and bool(_TRANSIENT.search(str(exc)))


def is_access_denied(exc: BaseException) -> bool:
    """Whether a failed storage call was the store refusing the caller's credentials."""
    if isinstance(exc, (StorageAccessDeniedError, PermissionError)):
        return True
    return isinstance(exc, OSError) and bool(_ACCESS_DENIED.search(str(exc)))


class RangeReader:
    """An open file or object: ranged reads of its bytes.

    ``size`` is the size when it was opened. :meth:`read` returns exactly the bytes of
    ``[position, position + size)`` clipped to the end of the file; a remote read that
    returns fewer bytes than that is retried, and raises
    :class:`~kafkastore.errors.StorageError` if it stays short.
    """

    __slots__ = ("path", "size", "_storage")

    def __init__(self, storage: ReadOnlyStorage, path: str, size: int) -> None:
        self._storage = storage
        self.path = path
        self.size = size

    def read(self, position: int, size: int) -> bytes:
        raise NotImplementedError

    def readinto(self, buffer, position: int) -> int:
        """Read into the writable ``buffer`` at ``position``; the bytes read."""
        data = self.read(position, memoryview(buffer).nbytes)
        memoryview(buffer)[:len(data)] = data
        return len(data)

    def close(self) -> None:
        """Release the file; further reads are an error."""

    def chunk_bounds(self, position: int) -> tuple[int, int] | None:
        """``(start, end)`` of the unit a read of ``position`` fetches whole (a tiered
        copy's transformed chunk), or None where any byte range is read as asked."""
        return None

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _want(self, position: int, size: int) -> int:
        if position < 0 or size < 0:
            raise ValueError(f"read of {size} bytes at {position} of {self.path}")
        return max(0, min(size, self.size - position))


class ReadOnlyStorage:
    """A file system that kafkastore reads log directories from.

    Paths are the store's own (``/data/kafka/t-0/...`` locally, ``bucket/prefix/t-0/...``
    on an object store); :meth:`uri` turns one back into the URI users see in messages.
    Subclasses implement the ``_``-prefixed primitives; the public methods add retries,
    counting and error mapping.
    """

    #: True for the local file system (callers may then use local-only fast paths).
    is_local: bool = False

    #: The remote endpoint requests go to, as ``scheme://host:port``, where one was
    #: configured (``endpoint_override``); named in the errors about reaching it.
    endpoint: str | None = None

    def __init__(self, retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.stats = StorageStats()

    # -- what subclasses provide ---------------------------------------------------

    def _list(self, path: str) -> list[FileInfo]:
        raise NotImplementedError

    def _size(self, path: str) -> int | None:
        """The size of the file at ``path``; None if there is none (or a directory)."""
        raise NotImplementedError

    def _is_dir(self, path: str) -> bool:
        raise NotImplementedError

    def _open(self, path: str, size: int | None = None) -> RangeReader:
        raise NotImplementedError

    def _walk(self, path: str) -> list[FileInfo]:
        """Every file and directory under ``path``, at any depth (paths relative to
        nothing: the store's own). The generic way lists level by level."""
        out = []
        for info in self._list(path):
            out.append(info)
            if info.is_dir:
                out.extend(self._walk(info.path))
        return out

    def uri(self, path: str) -> str:
        """``path`` as a URI (what error messages and the CLI print)."""
        return path

    # -- the seam ------------------------------------------------------------------

    @staticmethod
    def join(*parts: str) -> str:
        """Join path parts with ``/`` (object stores and POSIX alike)."""
        out = parts[0]
        for p in parts[1:]:
            out = p if not out else out.rstrip("/") + "/" + p.lstrip("/")
        return out

    @staticmethod
    def basename(path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    @staticmethod
    def dirname(path: str) -> str:
        head = path.rstrip("/").rsplit("/", 1)
        return head[0] if len(head) == 2 else ""

    def list_dir(self, path: str) -> list[FileInfo]:
        """The entries directly under ``path``, sorted by name. A missing directory
        raises :class:`~kafkastore.errors.StorageFileNotFoundError`."""
        infos = self._call("list", path, self._list, path)
        return sorted(infos, key=lambda i: i.name)

    def size(self, path: str) -> int:
        """The size of a file; :class:`~kafkastore.errors.StorageFileNotFoundError`
        if there is none."""
        size = self._call("stat", path, self._size, path)
        if size is None:
            raise StorageFileNotFoundError(f"{self.uri(path)}: no such file", path=self.uri(path))
        return size

    def exists(self, path: str) -> bool:
        return self._call("stat", path, self._size, path) is not None

    def is_dir(self, path: str) -> bool:
        return self._call("stat", path, self._is_dir, path)

    def walk(self, path: str) -> list[FileInfo]:
        """Everything under the directory ``path``, at any depth, in one listing where
        the store can (an object store's prefix listing: one paginated request, not one
        per directory). A missing directory raises
        :class:`~kafkastore.errors.StorageFileNotFoundError`."""
        infos = self._call("list", path, self._walk, path)
        return sorted(infos, key=lambda i: i.path)

    def open(self, path: str, size: int | None = None) -> RangeReader:
        """Open a file for ranged reads. ``size`` is what a listing said (a hint for
        stores that can open without asking; the size read is the file's own)."""
        return self._call("open", path, self._open, path, size)

    def read_file(self, path: str, limit: int = 64 << 20) -> bytes | None:
        """The whole of a small file (an index, a checkpoint); None if it is missing.
        Refuses a file over ``limit`` bytes (an index is at most 10 MiB by default)."""
        try:
            reader = self.open(path)
        except StorageFileNotFoundError:
            return None
        with reader:
            if reader.size > limit:
                raise StorageError(f"{self.uri(path)}: {reader.size} bytes, more than the "
                                   f"{limit} this file may have", path=self.uri(path))
            return reader.read(0, reader.size)

    def _call(self, what: str, path: str, fn, *args):
        """``fn(*args)`` with the retry policy; a missing file is never retried."""
        attempt = 0
        while True:
            self.stats.requests += 1
            try:
                return fn(*args)
            except (StorageFileNotFoundError, StorageError):
                raise
            except FileNotFoundError:
                raise StorageFileNotFoundError(f"{self.uri(path)}: no such file or directory",
                                               path=self.uri(path)) from None
            except OSError as exc:
                if not self.is_local and _PLAINTEXT_PEER.search(str(exc)):
                    # https spoken to a plain-HTTP port: a configuration error that no
                    # retry mends (six of them took ~10 s before the SSL error showed)
                    raise self._plaintext_peer_error(what, path, exc) from exc
                if not is_local_error_transient(self, exc):
                    if _NOT_FOUND.search(str(exc)) and not self.is_local:
                        raise StorageFileNotFoundError(
                            f"{self.uri(path)}: no such file or object ({exc})",
                            path=self.uri(path)) from None
                    kind = StorageAccessDeniedError if is_access_denied(exc) else StorageError
                    raise kind(f"{what} {self.uri(path)} failed: {exc}",
                               path=self.uri(path)) from exc
                attempt += 1
                if attempt >= self.retry.attempts:
                    raise StorageError(self._gave_up(what, path, attempt, exc),
                                       path=self.uri(path)) from exc
                self.stats.retries += 1
                time.sleep(self.retry.delay(attempt - 1))


    def _where(self) -> str:
        return self.endpoint or "the store's endpoint"

    def _plaintext_peer_error(self, what: str, path: str, exc: OSError) -> ConfigError:
        endpoint = self.endpoint or ""
        host = endpoint.partition("://")[2] or "host:port"
        return ConfigError(
            f"{what} {self.uri(path)}: {self._where()} does not speak TLS (the TLS "
            f"handshake was answered in plain text: {_first_line(exc)}). An endpoint "
            f"without a scheme means https: write endpoint_override=http://{host}",
            key="endpoint_override", value=endpoint or None, path=self.uri(path))

    def _gave_up(self, what: str, path: str, attempts: int, exc: OSError) -> str:
        """The message once the retries are spent. A port nothing listens on (a server
        not running, a wrong port) is named as such, with the endpoint: the store's own
        words ("curlCode: 7, Could not connect to server") say neither."""
        if isinstance(exc, ConnectionRefusedError) or _REFUSED.search(str(exc)):
            return (f"{what} {self.uri(path)}: nothing accepts connections at "
                    f"{self._where()} (connection refused, {attempts} attempts): is the "
                    f"server running there, and is endpoint_override right? The last "
                    f"error: {_first_line(exc)}")
        return f"{what} {self.uri(path)} failed {attempts} times, the last with: {exc}"


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    detail = text.rpartition("Details: ")[2]
    return detail or text


def is_local_error_transient(storage: ReadOnlyStorage, exc: OSError) -> bool:
    """Local file systems do not fail transiently in ways worth a retry (EINTR is
    retried by Python itself); remote ones often do."""
    return not storage.is_local and is_transient(exc)


# -- local -----------------------------------------------------------------------------


class _LocalReader(RangeReader):
    __slots__ = ("_fd",)

    def __init__(self, storage: LocalStorage, path: str, fd: int, size: int) -> None:
        super().__init__(storage, path, size)
        self._fd = fd

    def read(self, position: int, size: int) -> bytes:
        want = self._want(position, size)
        st = self._storage.stats
        st.reads += 1
        st.requests += 1
        data = os.pread(self._fd, want, position) if want else b""
        st.bytes_read += len(data)
        return data

    def readinto(self, buffer, position: int) -> int:
        view = memoryview(buffer)
        want = self._want(position, view.nbytes)
        st = self._storage.stats
        st.reads += 1
        st.requests += 1
        got = os.preadv(self._fd, [view[:want]], position) if want else 0
        st.bytes_read += got
        return got

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


class LocalStorage(ReadOnlyStorage):
    """The local file system (and anything mounted into it: NFS, EFS, a FUSE mount).

    Files are opened ``O_RDONLY`` and read with ``pread``; nothing is mapped or locked.
    """

    is_local = True

    def _list(self, path: str) -> list[FileInfo]:
        out = []
        with os.scandir(path) as it:
            for entry in it:
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue   # deleted while we listed
                is_dir = _stat.S_ISDIR(st.st_mode)
                out.append(FileInfo(entry.name, entry.path, 0 if is_dir else st.st_size,
                                    is_dir))
        return out

    def _size(self, path: str) -> int | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return None if _stat.S_ISDIR(st.st_mode) else st.st_size

    def _is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def _open(self, path: str, size: int | None = None) -> RangeReader:
        # the size is always taken from the open file: a local stat costs nothing
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return _LocalReader(self, path, fd, size)

    @staticmethod
    def join(*parts: str) -> str:
        return os.path.join(*parts)

    @staticmethod
    def basename(path: str) -> str:
        return os.path.basename(path.rstrip(os.sep))

    @staticmethod
    def dirname(path: str) -> str:
        return os.path.dirname(path.rstrip(os.sep))


# -- pyarrow ---------------------------------------------------------------------------


class _ArrowReader(RangeReader):
    __slots__ = ("_file",)

    def __init__(self, storage: ArrowStorage, path: str, file, size: int) -> None:
        super().__init__(storage, path, size)
        self._file = file

    def read(self, position: int, size: int) -> bytes:
        want = self._want(position, size)
        if not want:
            return b""
        storage = self._storage
        return storage._call("read", self.path, self._read_exact, position, want)

    def _read_exact(self, position: int, want: int) -> bytes:
        st = self._storage.stats
        st.reads += 1
        try:
            data = self._file.read_at(want, position)
        except OSError:
            raise
        except Exception as exc:   # an fsspec handler may raise its own types
            raise OSError(f"read failed: {exc!r}") from exc
        st.bytes_read += len(data)
        if len(data) != want:
            # a connection cut mid-body that the client did not notice: never hand on
            # a short read as if it were the end of the file
            raise ConnectionError(f"short read: {len(data)} of {want} bytes at {position}")
        return data

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


class ArrowStorage(ReadOnlyStorage):
    """A ``pyarrow.fs.FileSystem`` (S3, GCS, Azure, HDFS, or fsspec through
    ``PyFileSystem``), read with ranged reads and retried as the module says.

    ``prefix`` turns a path back into the URI users gave: ``s3://`` before
    ``bucket/key`` (pyarrow's paths on object stores start with the bucket),
    ``hdfs://namenode:8020`` before ``/data/...``.
    """

    def __init__(self, fs, prefix: str, retry: RetryPolicy | None = None,
                 endpoint: str | None = None) -> None:
        super().__init__(retry)
        self.fs = fs
        self.prefix = prefix
        self.endpoint = endpoint

    def __getstate__(self):
        # pyarrow's file systems pickle (with their options and credentials); the
        # counters start afresh in the other process
        return {"fs": self.fs, "prefix": self.prefix, "retry": self.retry,
                "endpoint": self.endpoint}

    def __setstate__(self, state) -> None:
        self.__init__(state["fs"], state["prefix"], state["retry"], state.get("endpoint"))

    def uri(self, path: str) -> str:
        return self.prefix + path

    def _list(self, path: str) -> list[FileInfo]:
        from pyarrow import fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=False,
                                                        allow_not_found=True))
        if not infos and not self._is_dir(path):
            raise FileNotFoundError(path)
        out = []
        for info in infos:
            is_dir = info.type == pafs.FileType.Directory
            out.append(FileInfo(info.base_name, info.path,
                                0 if is_dir else int(info.size or 0), is_dir))
        return out

    def _size(self, path: str) -> int | None:
        from pyarrow import fs as pafs

        info = self.fs.get_file_info(path)
        if info.type != pafs.FileType.File:
            return None
        return int(info.size or 0)

    def _is_dir(self, path: str) -> bool:
        from pyarrow import fs as pafs

        return self.fs.get_file_info(path.rstrip("/")).type == pafs.FileType.Directory

    def _walk(self, path: str) -> list[FileInfo]:
        from pyarrow import fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=True,
                                                        allow_not_found=True))
        if not infos and not self._is_dir(path):
            raise FileNotFoundError(path)
        return [FileInfo(i.base_name, i.path, 0 if i.type == pafs.FileType.Directory
                         else int(i.size or 0), i.type == pafs.FileType.Directory)
                for i in infos]

    def _open(self, path: str, size: int | None = None) -> RangeReader:
        # one request (a HEAD on object stores) that also gives the size; a missing
        # object is a FileNotFoundError from pyarrow. (pyarrow's C++ API can open with
        # a known size and skip it; its Python binding takes only a path.)
        f = self.fs.open_input_file(path)
        try:
            size = f.size()
        except BaseException:
            f.close()
            raise
        return _ArrowReader(self, path, f, int(size))


# -- choosing one ----------------------------------------------------------------------


def split_uri(uri: str) -> tuple[str, str]:
    """``(scheme, rest)``, the scheme lower-case and ``""`` for a plain path.

    A Windows drive letter (``C:\\data``) is a path, not a scheme.
    """
    text = os.fspath(uri)
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", text)
    if m is None or len(m.group(1)) == 1:
        return "", text
    return m.group(1).lower(), text


def is_local(uri: str) -> bool:
    """Whether ``uri`` names the local file system (a path or ``file://``)."""
    return split_uri(uri)[0] in _LOCAL_SCHEMES


def _local_path(uri: str) -> str:
    scheme, text = split_uri(uri)
    if scheme == "":
        return text
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise ConfigError(f"{uri}: a file URI names a path on this machine "
                          f"(file:///path), not host {parts.netloc!r}")
    from urllib.parse import unquote
    return unquote(parts.path) or "/"


def require_local_path(uri: str, what: str) -> str:
    """The local path that ``uri`` names, for code that writes (``what`` says which).

    Writing a log needs POSIX files: appends at the end, fsync, rename, a lock. An
    object store has none of them, so a URI with another scheme is refused with a
    :class:`~kafkastore.errors.ConfigError` before anything is created (never a local
    directory named after the URI).
    """
    scheme, _ = split_uri(uri)
    if scheme in _LOCAL_SCHEMES:
        return _local_path(uri)
    raise ConfigError(
        f"{what} cannot write to {uri}: writing a Kafka log needs a POSIX file system "
        f"(appends, fsync, atomic renames and a lock), which {scheme}:// does not give. "
        f"Write to a local disk or a shared POSIX mount (NFS, EFS, a FUSE mount such as "
        f"mountpoint-s3 is not enough: it has no appends) and copy the rolled segments "
        f"to {scheme}:// afterwards; reading {scheme}:// directly is supported.",
        key="path", value=uri)


def _coerce(name: str, typ: type, value: Any, scheme: str) -> Any:
    if not isinstance(value, str) or typ is str:
        return value
    text = value.strip()
    try:
        if typ is bool:
            low = text.lower()
            if low not in ("true", "false"):
                raise ValueError
            return low == "true"
        return typ(text)
    except ValueError:
        raise ConfigError(f"Invalid value {value!r} for storage option {name!r} "
                          f"({scheme}): expected {typ.__name__}", key=name,
                          value=value) from None


def _split_options(options: Mapping[str, Any] | None, kind: str,
                   scheme: str) -> tuple[dict, RetryPolicy]:
    given = {str(k).lower(): v for k, v in (options or {}).items() if v is not None}
    table = OPTIONS.get(kind, {})
    known = {**table, **SEAM_OPTIONS}
    unknown = sorted(set(given) - set(known))
    if unknown and kind != "fsspec":
        raise ConfigError(
            f"Unknown storage option(s) {', '.join(unknown)} for {scheme}://; accepted: "
            f"{', '.join(sorted(known))}", key=unknown[0])
    seam = {k: _coerce(k, SEAM_OPTIONS[k], given.pop(k), scheme)
            for k in list(given) if k in SEAM_OPTIONS}
    retry = RetryPolicy(
        attempts=max(1, seam.get("retry_attempts", RetryPolicy.attempts)),
        base_delay=seam.get("retry_base_delay_ms", RetryPolicy.base_delay * 1000) / 1000,
        max_delay=seam.get("retry_max_delay_ms", RetryPolicy.max_delay * 1000) / 1000)
    kwargs = {k: _coerce(k, table.get(k, str), v, scheme) for k, v in given.items()}
    return kwargs, retry


def check_options(uri: str, options: Mapping[str, Any] | None) -> None:
    """Raise :class:`~kafkastore.errors.ConfigError` if ``options`` has a name or a
    value the store of ``uri`` does not take (without connecting to anything)."""
    scheme, _ = split_uri(os.fspath(uri))
    kind = "local" if scheme in _LOCAL_SCHEMES else _ARROW_SCHEMES.get(scheme, "fsspec")
    _split_options(options, kind, scheme or "file")


def _need_pyarrow(uri: str):
    try:
        import pyarrow.fs as pafs
    except ImportError:
        raise missing_extra(f"Reading {uri} needs", "pyarrow", "pyarrow>=18", "remote",
                            "remote (or spark)") from None
    return pafs


def _path_in(kind: str, uri: str) -> str:
    """The path pyarrow's file system of ``kind`` gives the object ``uri`` names:
    object stores start with the bucket (or container), HDFS with the root."""
    parts = urlsplit(uri)
    if kind in ("s3", "gcs"):
        return (parts.netloc + parts.path).rstrip("/")
    if kind == "abfs":
        # abfs://container@account.dfs.core.windows.net/path
        return (parts.netloc.split("@", 1)[0] + parts.path).rstrip("/")
    return parts.path.rstrip("/") or "/"


def _prefix(kind: str, uri: str) -> str:
    """What goes before a path of :func:`_path_in` to give the URI back."""
    parts = urlsplit(uri)
    if kind == "hdfs":
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}://"


def _arrow_fs(kind: str, uri: str, kwargs: dict):
    """The pyarrow file system serving ``uri`` with the options ``kwargs``."""
    pafs = _need_pyarrow(uri)
    parts = urlsplit(uri)
    canonical = {"s3": "s3", "gcs": "gs", "abfs": "abfs", "hdfs": "hdfs"}[kind]
    if not kwargs:
        fs, _ = pafs.FileSystem.from_uri(canonical + uri[uri.index(":"):])
        return fs
    if kind == "s3":
        endpoint = str(kwargs.get("endpoint_override", ""))
        if "scheme" not in kwargs and endpoint.startswith(("http://", "https://")):
            scheme, _, rest = endpoint.partition("://")
            kwargs = {**kwargs, "scheme": scheme, "endpoint_override": rest}
        return pafs.S3FileSystem(**kwargs)
    if kind == "gcs":
        return pafs.GcsFileSystem(**kwargs)
    if kind == "abfs":
        if "account_name" not in kwargs and "@" in parts.netloc:
            kwargs = {**kwargs, "account_name": parts.netloc.split("@", 1)[1].split(".")[0]}
        return pafs.AzureFileSystem(**kwargs)
    host = kwargs.pop("host", parts.hostname or "default")
    port = kwargs.pop("port", parts.port or 8020)
    return pafs.HadoopFileSystem(host, port, **kwargs)


def _endpoint(kwargs: dict) -> str | None:
    """``scheme://host:port`` of an ``endpoint_override`` (S3, GCS): pyarrow's clients
    default the scheme to https, as the AWS SDK does."""
    endpoint = str(kwargs.get("endpoint_override") or "")
    if not endpoint or "://" in endpoint:
        return endpoint or None
    return f"{kwargs.get('scheme') or 'https'}://{endpoint}"


def open_storage(uri: str, options: Mapping[str, Any] | None = None
                 ) -> tuple[ReadOnlyStorage, str]:
    """The storage serving ``uri`` and the path of ``uri`` within it.

    ``options`` are the store's settings (:data:`OPTIONS`, plus ``retry_attempts``,
    ``retry_base_delay_ms`` and ``retry_max_delay_ms`` for every scheme); values may be
    strings. An unknown option, or a bad value, raises
    :class:`~kafkastore.errors.ConfigError`, as does a scheme nothing serves.

    Remote clients are made once per process for each store and set of options and
    shared (an S3 client's connection pool and credentials are worth keeping across a
    Spark worker's tasks); the counters in :attr:`ReadOnlyStorage.stats` are then
    shared too.
    """
    uri = os.fspath(uri)
    scheme, _ = split_uri(uri)
    if scheme in _LOCAL_SCHEMES:
        _, retry = _split_options(options, "local", scheme or "file")
        return LocalStorage(retry), _local_path(uri)
    kind = _ARROW_SCHEMES.get(scheme, "fsspec")
    key = (scheme, urlsplit(uri).netloc if kind != "fsspec" else uri,
           tuple(sorted((str(k).lower(), str(v)) for k, v in (options or {}).items())))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and kind != "fsspec":
        return hit, _path_in(kind, uri)
    kwargs, retry = _split_options(options, kind, scheme)
    if kind == "fsspec":
        storage, path = _fsspec_storage(uri, scheme, kwargs, retry)
    else:
        try:
            fs = _arrow_fs(kind, uri, kwargs)
        except (ValueError, TypeError, OSError) as exc:
            raise ConfigError(f"Cannot open {uri}: {exc}", key="path", value=uri) from exc
        storage = ArrowStorage(fs, _prefix(kind, uri), retry, _endpoint(kwargs))
        path = _path_in(kind, uri)
    with _cache_lock:
        storage = _cache.setdefault(key, storage)
    return storage, path


def _fsspec_storage(uri: str, scheme: str, kwargs: dict,
                    retry: RetryPolicy) -> tuple[ReadOnlyStorage, str]:
    """Any scheme an installed fsspec implementation serves, through pyarrow."""
    pafs = _need_pyarrow(uri)
    try:
        import fsspec
    except ImportError:
        raise ConfigError(f"No file system serves {scheme}:// here: pyarrow serves s3, gs, "
                          f"abfs and hdfs; other schemes need fsspec and its "
                          f"{scheme} implementation installed", key="path",
                          value=uri) from None
    try:
        ffs, path = fsspec.core.url_to_fs(uri, **kwargs)
    except (ValueError, ImportError, TypeError) as exc:
        raise ConfigError(f"Cannot open {uri} through fsspec: {exc}", key="path",
                          value=uri) from exc
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(ffs))
    return ArrowStorage(fs, f"{scheme}://", retry), path.rstrip("/")


_cache_lock = threading.Lock()
_cache: dict[tuple, ReadOnlyStorage] = {}


def clear_cache() -> None:
    """Forget the shared remote clients (tests that restart a server use it)."""
    with _cache_lock:
        _cache.clear()
