"""The one seam through which segments, indexes and logs touch the file system.

Every open, write, fsync, truncate, rename and delete of a log or index file goes
through the :data:`fs` object of this module, and so do the mapping of an index file
(``mmap``) and its flush (``msync``), so tests can swap in a :class:`FileSystem`
subclass that fails a write, writes short, fails an fsync or an msync, fails an
ftruncate or "crashes" before a rename, without any cost on the hot path: one attribute
load and a bound-method call per operation, the same as calling :mod:`os` directly.
Reads of ``.log`` files go through it too (``pread``), so a test can also serve
corrupted bytes. Index lookups and appends do not: they read and write the mapped
memory directly, and a test sees what they wrote only when it is flushed.

Only the storage layers (file records, segments, indexes, the log) use it;
they fetch ``_fileio.fs`` at call time, never at import, so :func:`install`
takes effect everywhere at once.
"""

from __future__ import annotations

import ctypes
import errno
import mmap as _mmap
import os
import sys
import weakref

__all__ = ["FileSystem", "Mapping", "fs", "install", "write_fully", "pwrite_fully", "read_file",
           "makedirs", "open_to_rewrite", "DIR_MODE"]

#: Mode of the directories kafkastore creates (before the umask): never group- or
#: world-writable, whatever the umask (``os.makedirs`` would use 0o777).
DIR_MODE = 0o755


def _load_libc():
    """libc's mmap, munmap and msync through ctypes, where they are known (Linux, macOS)."""
    if sys.platform.startswith("linux"):
        ms_sync = 4
    elif sys.platform == "darwin":
        ms_sync = 0x10
    else:  # pragma: no cover - Windows and the rest: the mmap module
        return None, 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_int64]
        libc.munmap.restype = ctypes.c_int
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.msync.restype = ctypes.c_int
        libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):  # pragma: no cover
        return None, 0
    return libc, ms_sync


_LIBC, _MS_SYNC = _load_libc()
_PAGE = _mmap.PAGESIZE
_MAP_FAILED = ctypes.c_void_p(-1).value


def _munmap(address: int, length: int) -> None:
    _LIBC.munmap(address, length)


class Mapping:
    """A shared map of the first ``length`` bytes of a file: Java's ``MappedByteBuffer``.

    ``view`` is a flat ``memoryview`` of exactly ``length`` bytes (read-only for
    ``ACCESS_READ``). On Linux and macOS the map is made with libc's ``mmap`` and,
    like Java's, holds **no file descriptor** (Python's :class:`mmap.mmap` keeps a
    duplicate of the descriptor for its whole life: two per segment for the two
    indexes, which exhausted descriptor limits with thousands of segments). Its memory
    is unmapped when the last reference to it goes: :meth:`close` drops this object's
    references, and a reader still holding ``view`` (or a slice of it) keeps the
    memory valid until it lets go, so a remap or close never pulls memory from under a
    lock-free lookup (Kafka, on Linux, leaves an old buffer to the garbage collector for
    the same reason). Elsewhere :class:`mmap.mmap` is used and :meth:`close` raises
    :class:`BufferError` while a view is exported.

    The file may change length while mapped; reading pages past its end would fault,
    so users read only what they wrote or found valid (an index reads its entries).
    """

    __slots__ = ("view", "length", "_mm", "_address", "_mapped", "holds_fd", "__weakref__")

    def __init__(self, fd: int, length: int, access: int) -> None:
        self.length = length
        if _LIBC is None:  # pragma: no cover - Windows
            self._mm = _mmap.mmap(fd, length, access=access)
            self._address = 0
            self._mapped = 0
            self.holds_fd = True
            self.view = memoryview(self._mm)
            return
        self._mm = None
        self.holds_fd = False
        mapped = -(-length // _PAGE) * _PAGE
        prot = _mmap.PROT_READ | (_mmap.PROT_WRITE if access == _mmap.ACCESS_WRITE else 0)
        address = _LIBC.mmap(None, mapped, prot, _mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self._address, self._mapped = address, mapped
        # one array type per page count (ctypes caches array types, so their number is
        # bounded by the largest index, not by the number of maps)
        array = (ctypes.c_ubyte * mapped).from_address(address)
        weakref.finalize(array, _munmap, address, mapped)
        view = memoryview(array).cast("B")[:length]
        self.view = view if access == _mmap.ACCESS_WRITE else view.toreadonly()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` dropped this object's hold (as :attr:`mmap.mmap.closed`)."""
        return self.view is None

    def flush(self) -> None:
        """``msync(MS_SYNC)`` of the whole map."""
        if self._mm is not None:  # pragma: no cover - Windows
            self._mm.flush()
            return
        if self.view is None:
            raise ValueError("mmap closed or invalid")
        if _LIBC.msync(self._address, self._mapped, _MS_SYNC) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    def close(self) -> None:
        """Drop this object's hold on the map (unmapped when no reader holds a view)."""
        view, self.view = self.view, None
        if self._mm is not None:  # pragma: no cover - Windows
            if view is not None:
                try:
                    view.release()
                    self._mm.close()
                except BufferError:
                    self.view = memoryview(self._mm)
                    raise


class FileSystem:
    """Thin wrappers over :mod:`os`, one method per operation the storage layer uses.

    Thread-safety: stateless; safe to call from any thread. Subclasses used
    for fault injection may keep state and document their own rules.
    """

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def write(self, fd: int, data) -> int:
        """Write once; may write fewer bytes than given (callers loop)."""
        return os.write(fd, data)

    def pwrite(self, fd: int, data, position: int) -> int:
        return os.pwrite(fd, data, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def preadv(self, fd: int, buffer, position: int) -> int:
        """Read into ``buffer`` (a writable buffer) at ``position``; bytes read."""
        return os.preadv(fd, [buffer], position)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fstat_size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def stat_size(self, path: str) -> int:
        """The size of the file at ``path`` without opening it (``FileNotFoundError``
        when there is none)."""
        return os.stat(path).st_size

    def mmap(self, fd: int, length: int, access: int) -> Mapping:
        """Map the first ``length`` bytes of ``fd`` (``mmap.ACCESS_READ`` or
        ``ACCESS_WRITE``) shared; ``fd`` may be closed afterwards. See :class:`Mapping`."""
        return Mapping(fd, length, access)

    def msync(self, m: Mapping) -> None:
        """Write the dirty pages of map ``m`` to its file and wait (``msync(MS_SYNC)``,
        Java's ``MappedByteBuffer.force``)."""
        m.flush()

    def rename(self, src: str, dst: str) -> None:
        """Atomic replace, as Kafka's ``Utils.atomicMoveWithFallback``."""
        os.replace(src, dst)

    def unlink(self, path: str) -> bool:
        """Delete ``path``; False if it did not exist."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def fsync_dir(self, path: str) -> None:
        """Make renames and creations in directory ``path`` durable."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sendfile(self, out_fd: int, in_fd: int, position: int, count: int) -> int:
        return os.sendfile(out_fd, in_fd, position, count)


#: The live file system. Replace it with :func:`install`, never by assignment
#: from outside, so the previous one can be restored.
fs: FileSystem = FileSystem()


def install(new: FileSystem) -> FileSystem:
    """Make ``new`` the file system of every storage layer; return the old one."""
    global fs
    old, fs = fs, new
    return old


def write_fully(fd: int, data) -> int:
    """Write all of ``data`` at the file position; return the byte count."""
    return _fully(lambda view, done: fs.write(fd, view), data)


def pwrite_fully(fd: int, data, position: int) -> int:
    """Write all of ``data`` at ``position`` (the file position is untouched).

    One ``pwrite`` when it writes everything, as it nearly always does (this is the
    append path); a loop over the rest only after a short write.
    """
    total = len(data) if type(data) is bytes else memoryview(data).nbytes
    if total == 0:
        return 0
    first = fs.pwrite(fd, data, position)
    if first == total:
        return total
    return _fully(lambda view, done: fs.pwrite(fd, view, position + done), data, first)


def _fully(write, data, first: int | None = None) -> int:
    """Loop ``write(view, done)`` over short writes (``first``: what a write already
    made of the whole); one that makes no progress raises :class:`OSError` (a full disk
    raises by itself)."""
    view = memoryview(data)
    total = view.nbytes
    done = 0
    while done < total:
        n = write(view[done:] if done else view, done) if first is None else first
        first = None
        if n <= 0:
            raise OSError(f"write made no progress ({done} of {total} bytes written)")
        done += n
    return total


def read_file(path: str) -> bytes | None:
    """The whole of a small file (a checkpoint, ``meta.properties``); None if it does not
    exist. Reads until end of file, past the size ``fstat`` gave: the file may have grown
    since, and a short read must not cut it."""
    try:
        fd = fs.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = fs.fstat_size(fd)
        chunks = []
        position = 0
        while chunk := fs.pread(fd, max(size - position, 0) + 4096, position):
            chunks.append(chunk)
            position += len(chunk)
        return b"".join(chunks)
    finally:
        fs.close(fd)


def makedirs(path: str, mode: int = DIR_MODE) -> None:
    """``os.makedirs(path, exist_ok=True)`` that creates every missing directory, the
    parents included, with ``mode`` (``os.makedirs`` gives the parents 0o777 less the
    umask, so a umask of 0 made them world-writable).

    A URI with a scheme (``s3://bucket/logs``) is refused with a
    :class:`~kafkastore.errors.ConfigError`: ``os.makedirs`` would make a local
    directory ``s3:/bucket/logs`` and the data would never reach the store. Writers
    call :func:`kafkastore.storage.require_local_path` first with their own name; this
    is the backstop for every other caller.
    """
    from kafkastore.storage import require_local_path

    path = require_local_path(os.fspath(path), "kafkastore")
    head, tail = os.path.split(path)
    if not tail:
        head, tail = os.path.split(head)
    if head and tail and not os.path.exists(head):
        makedirs(head, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def open_to_rewrite(path: str) -> int:
    """A write descriptor of ``path``, emptied, for a small file rewritten in place (the
    clean-shutdown marker); never one through a symlink: a link planted at ``path`` is
    replaced by a new file (``O_NOFOLLOW``, then unlink and ``O_EXCL``), its target left
    as it was."""
    try:
        return fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    fs.unlink(path)
    return fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
