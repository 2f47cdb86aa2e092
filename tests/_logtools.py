"""Helpers for the log-layer tests: a clock, config by Kafka name, readers that do not trust
the log's own bookkeeping, and a file system that records what was fsynced (and, for the
memory-mapped index files, msynced) so a test can build the image a crash would leave.

Imported as ``from _logtools import ...`` (tests/ is on ``sys.path`` while pytest runs).
"""

from __future__ import annotations

import errno
import os
import random
import re
import shutil
import weakref
from collections import Counter
from typing import NamedTuple

from _reliability import FIGURES

from kafkastore import _fileio
from kafkastore.config import LogConfig
from kafkastore.log import Log
from kafkastore.records import iter_batches, iter_records, scan_batches

#: A fixed "now" for the injected clocks (Kafka's MockTime starts at a real-looking time too).
T0 = 1_700_000_000_000


class Clock:
    """An injectable ``time_ms``: advances only when told (Kafka's ``MockTime``)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def sleep(self, ms: int) -> None:
        self.now += ms


def conf(**kw) -> dict:
    """Topic config by Kafka name: ``segment_bytes=100`` -> ``{"segment.bytes": 100}``."""
    return {k.replace("_", "."): v for k, v in kw.items()}


def log_config(**kw) -> LogConfig:
    return LogConfig.from_dict(conf(**kw))


def open_log(path, clock=None, *, recovery_point=None, log_start_offset=0,
             had_clean_shutdown=None, **kw) -> Log:
    return Log.open(str(path), conf(**kw), recovery_point=recovery_point,
                    log_start_offset=log_start_offset, had_clean_shutdown=had_clean_shutdown,
                    time_ms=clock or Clock())


class Rec(NamedTuple):
    """One record as a test compares it."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def _b(x):
    return None if x is None else bytes(x)


def rec_of(record) -> Rec:
    return Rec(record.offset, _b(record.key), _b(record.value), record.timestamp)


def read_all(log: Log, start: int | None = None, *, max_bytes: int = 1 << 20,
             convert=rec_of, into: list | None = None) -> list[Rec]:
    """Every record from ``start`` (default: the log start offset) to the log end, through
    :meth:`Log.read` (``max_bytes`` a read; 1 reads one batch at a time, each through the
    offset index), CRC-checked, as ``convert`` makes them. ``into``: the list to fill, so
    a caller that catches an error keeps what was read before it."""
    out: list = [] if into is None else into
    offset = log.log_start_offset if start is None else start
    end = log.log_end_offset
    while offset < end:
        batches = list(log.read(offset, max_bytes).batches(validate=True))
        if not batches:
            break
        for batch in batches:
            if not batch.is_control:
                out.extend(convert(r) for r in batch if r.offset >= offset)
            offset = max(offset, batch.last_offset + 1)
    return out


def segment_files(directory, suffix: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(suffix))


def disk_records(directory) -> list[Rec]:
    """Every record of every ``.log`` file in ``directory``, read from the bytes on disk
    (not through :class:`Log`); each file must parse to its end with valid CRCs."""
    out: list[Rec] = []
    for name in segment_files(directory):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        scan = scan_batches(data, validate=True)
        assert scan.error is None and scan.valid_bytes == len(data), (
            f"{name}: {len(data) - scan.valid_bytes} bad bytes at {scan.valid_bytes}"
            f" ({scan.error!r})")
        for batch in iter_batches(data, validate=True):
            if not batch.is_control:
                out.extend(rec_of(r) for r in batch)
    return out


def topic_records(root, topic: str) -> dict[int, list]:
    """``{partition: [Record]}`` of ``topic`` under the log directory ``root``: the full
    records (headers included) of each partition's ``.log`` files, read from the bytes on
    disk, control batches left out."""
    out: dict[int, list] = {}
    prefix = topic + "-"
    for name in sorted(os.listdir(root)):
        if not (name.startswith(prefix) and name[len(prefix):].isdigit()):
            continue
        directory = os.path.join(root, name)
        records = []
        for seg in segment_files(directory):
            with open(os.path.join(directory, seg), "rb") as f:
                records.extend(iter_records(f.read()))
        out[int(name[len(prefix):])] = records
    return out


# -- fault injection ------------------------------------------------------------------------

#: The files :class:`FaultFS` models as memory-mapped indexes (by name, as the log names them).
INDEX_FILE = re.compile(r"\.(index|timeindex)(\.(deleted|cleaned|swap))?$")
#: The unit in which a crash keeps or loses unsynced index bytes: a disk sector (a page
#: written back in part by a power cut keeps some sectors and loses others).
SECTOR = 512


def is_index_file(path) -> bool:
    return INDEX_FILE.search(os.fspath(path)) is not None


class FileImage(NamedTuple):
    """A file's length and its non-zero :data:`SECTOR`-sized blocks (zeros are holes)."""

    length: int
    blocks: dict[int, bytes]

    @classmethod
    def read(cls, path) -> FileImage:
        blocks: dict[int, bytes] = {}
        zero = bytes(SECTOR)
        length = 0
        with open(path, "rb") as f:
            while chunk := f.read(SECTOR * 2048):
                for i in range(0, len(chunk), SECTOR):
                    block = chunk[i:i + SECTOR]
                    if block != zero[:len(block)]:
                        blocks[(length + i) // SECTOR] = block
                length += len(chunk)
        return cls(length, blocks)

    def block(self, i: int) -> bytes | None:
        """Block ``i`` as this image holds it (None for zeros or past the end)."""
        return self.blocks.get(i) if i * SECTOR < self.length else None

    def to_bytes(self) -> bytes:
        out = bytearray(self.length)
        for i, block in self.blocks.items():
            out[i * SECTOR:i * SECTOR + len(block)] = block
        return bytes(out[:self.length])

    def write(self, path) -> None:
        with open(path, "r+b") as f:
            f.truncate(0)
            f.truncate(self.length)
            for i, block in sorted(self.blocks.items()):
                start = i * SECTOR
                if start < self.length:
                    f.seek(start)
                    f.write(block[:self.length - start])


class Crash(BaseException):
    """Raised by :class:`FaultFS` to stop the process "here", as a power cut would.

    A BaseException so no ``except Exception`` in the library can swallow it."""


class FaultFS(_fileio.FileSystem):
    """A :class:`kafkastore._fileio.FileSystem` that counts calls, fails chosen ones and
    remembers, per file, how far it was written and how far fsynced.

    ``faults`` maps an operation name (``pwrite``, ``write``, ``fsync``, ``fsync_dir``,
    ``ftruncate``, ``rename``, ``unlink``, ``open``, ``mmap``, ``msync``) to
    ``{n: action}``: the n-th call (1-based, counted per operation) does ``action``:

    ``"enospc"``
        raise ``OSError(ENOSPC)`` and write nothing;
    ``"partial-enospc"``
        write the first half of the data, return that count, and fail the next call to
        the same operation with ENOSPC (a disk filling up mid-write);
    ``"short"``
        write only the first half and return that count (a legal short write);
    ``"zero"``
        write nothing and return 0;
    ``"eio"``
        raise ``OSError(EIO)`` (``fsync``, ``fsync_dir``, ``msync``, ``ftruncate``,
        ``rename``);
        ``"enospc"`` also fails an ``ftruncate``, ``"enomem"`` an ``mmap``;
    ``"crash"``
        raise :class:`Crash` before doing anything.

    The operation ``"any"`` counts every call that changes the file system or what of it
    is durable (writes, fsyncs, msyncs, truncations, renames, deletions, creating opens)
    in one sequence, so ``{"any": {n: "crash"}}`` stops the process before its n-th
    change, whatever it is.

    Durability rules for :func:`crash_image`. A ``.log`` (or any other file written with
    ``write``/``pwrite``): bytes it held when it was opened count as durable (it survived
    whatever came before), written bytes become durable at the next successful fsync of
    that file. An index file (:data:`INDEX_FILE`, written through ``mmap``): the durable
    image is its whole content (length and bytes) when this file system first opened it;
    the bytes written into its maps and every change of its length (``ftruncate``) stay
    volatile until an ``msync`` of one of its maps or an ``fsync`` of the file succeeds,
    which makes the file as it is then durable. (On Linux ``msync(MS_SYNC)`` is an
    ``fdatasync`` of the mapped range, and a file is mapped whole: that covers its bytes
    and its length.) Unmapping, closing, trimming or renaming the file makes nothing
    durable. Directory entries (creations, renames, deletions) are not modelled.
    """

    def __init__(self, faults: dict | None = None) -> None:
        self.faults = {op: dict(calls) for op, calls in (faults or {}).items()}
        self.calls: Counter = Counter()
        self.fds: dict[int, str] = {}
        self.written: dict[str, int] = {}
        self.synced: dict[str, int] = {}
        self.fired: list[tuple[str, int, str]] = []
        #: index files: the image a crash keeps for sure (see the durability rules)
        self.index_durable: dict[str, FileImage] = {}
        self.maps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # map -> path

    def _action(self, op: str, mutating: bool = True) -> str | None:
        self.calls[op] += 1
        n = self.calls[op]
        action = self.faults.get(op, {}).pop(n, None)
        if action is not None:
            self.fired.append((op, n, action))
            FIGURES.add(f"injected faults fired ({op} {action})")
            if action == "partial-enospc":
                self.faults.setdefault(op, {})[n + 1] = "enospc"
        if mutating:
            self.calls["any"] += 1
            other = self.faults.get("any", {}).pop(self.calls["any"], None)
            if other is not None and action is None:
                self.fired.append(("any", self.calls["any"], f"{other} before {op}"))
                FIGURES.add(f"injected faults fired ({other} before any change)")
                action = other
        return action

    # bookkeeping

    def open(self, path, flags, mode=0o644):
        action = self._action("open", mutating=bool(flags & os.O_CREAT))
        if action == "crash":
            raise Crash(f"crash before creating {os.path.basename(path)}")
        fd = super().open(path, flags, mode)
        path = os.path.abspath(path)
        self.fds[fd] = path
        if is_index_file(path):
            if path not in self.index_durable or flags & os.O_EXCL:
                self.index_durable[path] = FileImage.read(path)
            return fd
        size = os.fstat(fd).st_size
        self.written[path] = size
        self.synced[path] = size
        return fd

    def close(self, fd):
        self.fds.pop(fd, None)
        super().close(fd)

    def _wrote(self, fd, end):
        path = self.fds.get(fd)
        if path is not None:
            self.written[path] = max(self.written.get(path, 0), end)

    def pwrite(self, fd, data, position):
        action = self._action("pwrite")
        view = memoryview(data)
        if action == "crash":
            raise Crash(f"crash before pwrite #{self.calls['pwrite']}")
        if action == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if action == "zero":
            return 0
        if action in ("short", "partial-enospc") and view.nbytes > 1:
            view = view[:view.nbytes // 2]
        n = super().pwrite(fd, view, position)
        self._wrote(fd, position + n)
        return n

    def write(self, fd, data):
        action = self._action("write")
        view = memoryview(data)
        if action == "crash":
            raise Crash(f"crash before write #{self.calls['write']}")
        if action == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if action == "zero":
            return 0
        if action in ("short", "partial-enospc") and view.nbytes > 1:
            view = view[:view.nbytes // 2]
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        n = super().write(fd, view)
        self._wrote(fd, pos + n)
        return n

    def fsync(self, fd):
        action = self._action("fsync")
        if action == "crash":
            raise Crash(f"crash before fsync #{self.calls['fsync']}")
        if action == "eio":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync(fd)
        path = self.fds.get(fd)
        if path is not None:
            if path in self.index_durable:
                self.index_durable[path] = FileImage.read(path)
            else:
                self.synced[path] = self.written.get(path, 0)

    def mmap(self, fd, length, access):
        action = self._action("mmap", mutating=False)
        if action == "crash":
            raise Crash(f"crash before mmap #{self.calls['mmap']}")
        if action == "enomem":
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        m = super().mmap(fd, length, access)
        path = self.fds.get(fd)
        if path is not None:
            self.maps[m] = path
        return m

    def msync(self, m):
        action = self._action("msync")
        if action == "crash":
            raise Crash(f"crash before msync #{self.calls['msync']}")
        if action == "eio":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().msync(m)
        path = self.maps.get(m)
        if path is not None and path in self.index_durable:
            self.index_durable[path] = FileImage.read(path)

    def fsync_dir(self, path):
        action = self._action("fsync_dir")
        if action == "crash":
            raise Crash("crash before fsync of a directory")
        if action == "eio":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync_dir(path)

    def ftruncate(self, fd, size):
        action = self._action("ftruncate")
        if action == "crash":
            raise Crash("crash before ftruncate")
        if action in ("eio", "enospc"):
            code = errno.EIO if action == "eio" else errno.ENOSPC
            raise OSError(code, os.strerror(code))
        super().ftruncate(fd, size)
        path = self.fds.get(fd)
        if path is not None and path not in self.index_durable:
            self.written[path] = min(self.written.get(path, 0), size)
            self.synced[path] = min(self.synced.get(path, 0), size)

    def rename(self, src, dst):
        action = self._action("rename")
        if action == "crash":
            raise Crash(f"crash before rename of {os.path.basename(src)}")
        if action == "eio":
            raise OSError(errno.EIO, os.strerror(errno.EIO), src)
        super().rename(src, dst)
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        for table in (self.written, self.synced, self.index_durable):
            table.pop(dst, None)
            if src in table:
                table[dst] = table.pop(src)
        for fd, path in self.fds.items():
            if path == src:
                self.fds[fd] = dst
        for m, path in list(self.maps.items()):
            if path == src:
                self.maps[m] = dst

    def unlink(self, path):
        if self._action("unlink") == "crash":
            raise Crash(f"crash before deleting {os.path.basename(path)}")
        done = super().unlink(path)
        path = os.path.abspath(path)
        self.written.pop(path, None)
        self.synced.pop(path, None)
        self.index_durable.pop(path, None)
        return done

    def unsynced(self, path) -> tuple[int, int]:
        """``(durable bytes, bytes on disk now)`` of a file."""
        path = os.path.abspath(path)
        size = os.path.getsize(path)
        return self.synced.get(path, size), size

    def durable_index(self, path) -> bytes | None:
        """The bytes of index file ``path`` a crash keeps for sure; None if not tracked."""
        image = self.index_durable.get(os.path.abspath(path))
        return None if image is None else image.to_bytes()


class NoSyncFS(_fileio.FileSystem):
    """The real file system without fsync, directory fsync or msync: for tests whose
    files need not survive a crash (reopening crash images, sweeps, stress), where a
    real fsync each time would make the disk the bottleneck."""

    def fsync(self, fd):
        pass

    def fsync_dir(self, path):
        pass

    def msync(self, m):
        pass


class installed:
    """``with installed(FaultFS(...)) as fs:`` - the file system of every storage layer."""

    def __init__(self, fs: _fileio.FileSystem) -> None:
        self.fs = fs

    def __enter__(self):
        self.old = _fileio.install(self.fs)
        return self.fs

    def __exit__(self, *exc):
        _fileio.install(self.old)


def crash_image(src, dst, fs: FaultFS, rng: random.Random, mode: str = "random") -> dict:
    """Copy directory ``src`` (a log, open or closed) to ``dst`` as a crash would leave
    it: every ``.log`` file loses part of what was written after its last fsync, and every
    index file ``fs`` tracks part of what was written into its maps or changed in its
    length after its last msync or fsync (see :class:`FaultFS`).

    ``mode``: ``"random"`` cuts each unsynced ``.log`` tail at a random point (possibly
    mid-batch) and gives each index file either its durable or its current length and,
    sector by sector, either its durable or its current bytes (a torn entry included);
    ``"all"`` drops every unsynced byte and length change; ``"none"`` keeps everything.
    Returns ``{name: (durable, kept, size)}`` for the ``.log`` files and, with lengths,
    for the tracked index files.
    """
    shutil.copytree(src, dst)
    cuts = {}
    for name in segment_files(dst):
        durable, size = fs.unsynced(os.path.join(src, name))
        durable = min(durable, size)
        if mode == "all":
            keep = durable
        elif mode == "none":
            keep = size
        else:
            keep = rng.randint(durable, size)
        if keep < size:
            os.truncate(os.path.join(dst, name), keep)
        cuts[name] = (durable, keep, size)
    src_abs = os.path.abspath(src)
    for path, durable in sorted(fs.index_durable.items()):
        if os.path.dirname(path) != src_abs or not os.path.exists(path):
            continue
        name = os.path.basename(path)
        current = FileImage.read(path)
        if mode == "none":
            image = current
        elif mode == "all":
            image = durable
        else:
            length = rng.choice((durable.length, current.length))
            blocks = {}
            for i in range(-(-length // SECTOR)):
                # past the current length the durable bytes are what a lost trim keeps
                now = current.block(i) if i * SECTOR < current.length else durable.block(i)
                kept = rng.choice((durable.block(i), now))
                if kept is not None:
                    blocks[i] = kept
            image = FileImage(length, blocks)
        image.write(os.path.join(dst, name))
        cuts[name] = (durable.length, image.length, current.length)
    return cuts


def process_died(log: Log) -> None:
    """What the kernel does for a process that dies with ``log`` open: its directory lock
    goes (its maps and descriptors are left to :func:`abandon`)."""
    log._release_dir_lock()


def abandon(log: Log) -> None:
    """Release the descriptors and maps of a log that "crashed", without writing anything."""
    pending = [seg for _, seg in getattr(log, "_pending_deletes", ())]
    for seg in list(log.segments) + pending:
        try:
            seg.close_handlers()
        except Exception:  # noqa: BLE001 - best effort, the log is gone
            pass
    try:
        log._close_handlers()  # the pending .deleted segments too
    except Exception:  # noqa: BLE001
        pass
