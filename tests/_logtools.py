"""Helpers for the log-layer tests: a clock, config by Kafka name, readers that do not trust
the log's own bookkeeping, and a file system that records what was fsynced so a test can
build the image a crash would leave.

Imported as ``from _logtools import ...`` (tests/ is on ``sys.path`` while pytest runs).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from collections import Counter
from typing import NamedTuple

from kafkastore import _fileio
from kafkastore.config import LogConfig
from kafkastore.log import Log
from kafkastore.records import iter_batches, scan_batches

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


def read_all(log: Log, start: int | None = None) -> list[Rec]:
    """Every record from ``start`` (default: the log start offset) to the log end, through
    :meth:`Log.read`, CRC-checked, one batch after another."""
    out: list[Rec] = []
    offset = log.log_start_offset if start is None else start
    end = log.log_end_offset
    while offset < end:
        batches = list(log.read(offset, 1 << 20).batches(validate=True))
        if not batches:
            break
        for batch in batches:
            if not batch.is_control:
                out.extend(rec_of(r) for r in batch if r.offset >= offset)
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


# -- fault injection ------------------------------------------------------------------------


class Crash(BaseException):
    """Raised by :class:`FaultFS` to stop the process "here", as a power cut would.

    A BaseException so no ``except Exception`` in the library can swallow it."""


class FaultFS(_fileio.FileSystem):
    """A :class:`kafkastore._fileio.FileSystem` that counts calls, fails chosen ones and
    remembers, per file, how far it was written and how far fsynced.

    ``faults`` maps an operation name (``pwrite``, ``write``, ``fsync``, ``fsync_dir``,
    ``ftruncate``, ``rename``, ``unlink``, ``open``) to
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
        raise ``OSError(EIO)`` (``fsync``, ``fsync_dir``);
    ``"crash"``
        raise :class:`Crash` before doing anything.

    The operation ``"any"`` counts every call that changes the file system (writes,
    fsyncs, truncations, renames, deletions, creating opens) in one sequence, so
    ``{"any": {n: "crash"}}`` stops the process before its n-th change, whatever it is.

    Durability rule for :func:`crash_image`: bytes a file held when it was opened count as
    durable (it survived whatever came before), written bytes become durable at the next
    successful fsync of that file.
    """

    def __init__(self, faults: dict | None = None) -> None:
        self.faults = {op: dict(calls) for op, calls in (faults or {}).items()}
        self.calls: Counter = Counter()
        self.fds: dict[int, str] = {}
        self.written: dict[str, int] = {}
        self.synced: dict[str, int] = {}
        self.fired: list[tuple[str, int, str]] = []

    def _action(self, op: str, mutating: bool = True) -> str | None:
        self.calls[op] += 1
        n = self.calls[op]
        action = self.faults.get(op, {}).pop(n, None)
        if action is not None:
            self.fired.append((op, n, action))
            if action == "partial-enospc":
                self.faults.setdefault(op, {})[n + 1] = "enospc"
        if mutating:
            self.calls["any"] += 1
            other = self.faults.get("any", {}).pop(self.calls["any"], None)
            if other is not None and action is None:
                self.fired.append(("any", self.calls["any"], f"{other} before {op}"))
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
            self.synced[path] = self.written.get(path, 0)

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
        super().ftruncate(fd, size)
        path = self.fds.get(fd)
        if path is not None:
            self.written[path] = min(self.written.get(path, 0), size)
            self.synced[path] = min(self.synced.get(path, 0), size)

    def rename(self, src, dst):
        action = self._action("rename")
        if action == "crash":
            raise Crash(f"crash before rename of {os.path.basename(src)}")
        super().rename(src, dst)
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        for table in (self.written, self.synced):
            if src in table:
                table[dst] = table.pop(src)
        for fd, path in self.fds.items():
            if path == src:
                self.fds[fd] = dst

    def unlink(self, path):
        if self._action("unlink") == "crash":
            raise Crash(f"crash before deleting {os.path.basename(path)}")
        done = super().unlink(path)
        path = os.path.abspath(path)
        self.written.pop(path, None)
        self.synced.pop(path, None)
        return done

    def unsynced(self, path) -> tuple[int, int]:
        """``(durable bytes, bytes on disk now)`` of a file."""
        path = os.path.abspath(path)
        size = os.path.getsize(path)
        return self.synced.get(path, size), size


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
    """Copy directory ``src`` (a log that is still open) to ``dst`` as a crash would leave
    it: every ``.log`` file loses part of what was written after its last fsync.

    ``mode``: ``"random"`` cuts each unsynced tail at a random point (possibly mid-batch),
    ``"all"`` drops every unsynced byte, ``"none"`` keeps everything. Index files are
    copied as they are (a crash can leave them stale or untrimmed). Returns
    ``{name: (durable, kept, size)}`` for the ``.log`` files.
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
    return cuts


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
