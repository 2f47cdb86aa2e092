"""Power-loss simulation: record every change a workload makes to a log directory through
the :mod:`kafkastore._fileio` seam, then rebuild the directory as a power cut before any
step could have left it (reliability.md C2-C12, after ALICE and CrashMonkey).

:class:`Recorder` is a :class:`kafkastore._fileio.FileSystem` that does every operation
for real and appends it to :attr:`Recorder.ops`: file creations, writes (with their
bytes), truncations, fsyncs and msyncs, directory fsyncs, renames and deletions. Index
files are written through shared maps, which no system call shows, so before recording
any operation the recorder compares each mapped file with what it last recorded and
records the changed sectors as writes: a map's stores appear in the history at the
latest point they could have reached the page cache.

:func:`crash_states` replays the history once and, before each operation, yields a
:class:`DiskState`: what is durable and what is not. The durability model is POSIX's,
stricter than ext4's:

* a file's bytes and length become durable at an fsync (or msync) of that file; until
  then every write and truncation since the last one is pending;
* a directory entry (a creation, rename or deletion) becomes durable at an fsync of the
  directory; pending entry changes survive a crash as a prefix, in order (the metadata
  journal of ext4 and XFS keeps that order);
* a file's content follows its inode through renames.

:meth:`DiskState.images` makes the directories a crash at that point may leave:
unsynced data dropped, everything kept (a process crash), random subsets of pending
writes and directory changes, the write under way torn at every 512-byte and 4 KiB
boundary, and pending extensions of a file's length present but filled with zeros or
garbage (the length reached the disk, the data did not).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import random
import weakref
from collections.abc import Iterator
from typing import NamedTuple

from kafkastore import _fileio

SECTOR = 512
PAGE = 4096


class Op(NamedTuple):
    """One recorded change. ``kind`` is ``create``, ``write``, ``truncate``, ``sync``,
    ``dirsync``, ``rename``, ``unlink``, or a workload's marker (``ack``: everything
    below ``pos`` was flushed and the flush returned; ``start``: the workload asked for
    the log to start at ``pos``)."""

    kind: str
    name: str = ""
    pos: int = 0
    data: bytes = b""
    dst: str = ""


class Recorder(_fileio.FileSystem):
    """Does every operation for real and records it (see the module docstring).

    Only files directly inside ``root`` may be changed; anything else is a harness error.
    Not thread-safe: the workloads that use it are single-threaded.
    """

    def __init__(self, root) -> None:
        self.root = os.path.abspath(root)
        self.ops: list[Op] = []
        self.fds: dict[int, str | None] = {}   # None: the file lost its name
        # mapped files: name -> (weak list of writable maps, bytes last recorded)
        self.mapped: dict[str, tuple[weakref.WeakSet, bytes]] = {}
        self.map_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _name(self, path) -> str:
        path = os.path.abspath(path)
        if os.path.dirname(path) != self.root:
            raise AssertionError(f"the workload changed {path}, outside {self.root}")
        return os.path.basename(path)

    def _record(self, op: Op) -> None:
        self.ops.append(op)

    def catch_up(self) -> None:
        """Record what the maps wrote since the last operation, as sector writes."""
        for name, (maps, seen) in list(self.mapped.items()):
            path = os.path.join(self.root, name)
            with open(path, "rb") as f:
                now = f.read()
            if now != seen:
                n = min(len(now), len(seen))
                i = 0
                while i < n:
                    if now[i:i + SECTOR] != seen[i:i + SECTOR]:
                        j = i + SECTOR
                        while j < n and now[j:j + SECTOR] != seen[j:j + SECTOR]:
                            j += SECTOR
                        j = min(j, n)
                        self._record(Op("write", name, i, now[i:j]))
                        i = j
                    else:
                        i += SECTOR
                if len(now) != len(seen):
                    # a map cannot change a length; only a truncation we record does
                    raise AssertionError(f"{name} changed length behind the recorder")
            if not any(not m.closed for m in maps):
                del self.mapped[name]
            else:
                self.mapped[name] = (maps, now)

    def mark(self, kind: str, pos: int) -> None:
        """A workload marker (``ack``, ``start``) at this point of the history."""
        self.catch_up()
        self._record(Op(kind, pos=pos))

    # -- the seam -----------------------------------------------------------------------

    def open(self, path, flags, mode=0o644):
        name = self._name(path)
        existed = os.path.exists(path)
        self.catch_up()
        fd = super().open(path, flags, mode)
        self.fds[fd] = name
        if not existed and flags & os.O_CREAT:
            self._record(Op("create", name))
        elif existed and flags & os.O_TRUNC:
            self._record(Op("truncate", name, 0))
        return fd

    def close(self, fd):
        self.fds.pop(fd, None)
        super().close(fd)

    def write(self, fd, data):
        self.catch_up()
        position = os.lseek(fd, 0, os.SEEK_CUR)
        n = super().write(fd, data)
        self._record_write(fd, position, data, n)
        return n

    def pwrite(self, fd, data, position):
        self.catch_up()
        n = super().pwrite(fd, data, position)
        self._record_write(fd, position, data, n)
        return n

    def _record_write(self, fd, position, data, n) -> None:
        name = self.fds[fd]
        if name is not None:
            self._record(Op("write", name, position, bytes(memoryview(data)[:n])))

    def ftruncate(self, fd, size):
        self.catch_up()
        super().ftruncate(fd, size)
        name = self.fds[fd]
        if name is None:
            return
        self._record(Op("truncate", name, size))
        if name in self.mapped:
            maps, seen = self.mapped[name]
            self.mapped[name] = (maps, seen[:size] + bytes(max(0, size - len(seen))))

    def fsync(self, fd):
        self.catch_up()
        super().fsync(fd)
        if self.fds[fd] is not None:
            self._record(Op("sync", self.fds[fd]))

    def mmap(self, fd, length, access):
        m = super().mmap(fd, length, access)
        if access == mmap.ACCESS_WRITE and self.fds[fd] is not None:
            name = self.fds[fd]
            self.catch_up()
            if name in self.mapped:
                self.mapped[name][0].add(m)
            else:
                with open(os.path.join(self.root, name), "rb") as f:
                    seen = f.read()
                maps = weakref.WeakSet()
                maps.add(m)
                self.mapped[name] = (maps, seen)
            self.map_names[m] = name
        return m

    def msync(self, m):
        self.catch_up()
        super().msync(m)
        name = self.map_names.get(m)
        if name is not None:
            self._record(Op("sync", name))

    def fsync_dir(self, path):
        self.catch_up()
        super().fsync_dir(path)
        if os.path.abspath(path) == self.root:
            self._record(Op("dirsync"))

    def rename(self, src, dst):
        src_name, dst_name = self._name(src), self._name(dst)
        self.catch_up()
        super().rename(src, dst)
        self._record(Op("rename", src_name, dst=dst_name))
        # a file the rename replaced has no name any more: what its maps write is lost
        self.mapped.pop(dst_name, None)
        for fd, name in self.fds.items():
            if name == dst_name:
                self.fds[fd] = None   # the replaced file: nameless, nothing to record
            elif name == src_name:
                self.fds[fd] = dst_name
        if src_name in self.mapped:
            self.mapped[dst_name] = self.mapped.pop(src_name)
        for m, name in list(self.map_names.items()):
            if name == dst_name:
                del self.map_names[m]
            elif name == src_name:
                self.map_names[m] = dst_name

    def unlink(self, path):
        name = self._name(path)
        self.catch_up()
        done = super().unlink(path)
        if done:
            self._record(Op("unlink", name))
            self.mapped.pop(name, None)
            self._forget(name)
        return done

    def _forget(self, name: str) -> None:
        for fd, other in self.fds.items():
            if other == name:
                self.fds[fd] = None
        for m, other in list(self.map_names.items()):
            if other == name:
                del self.map_names[m]


# -- replay -------------------------------------------------------------------------------------


def _apply(content: bytearray, op: Op) -> None:
    if op.kind == "write":
        end = op.pos + len(op.data)
        if end > len(content):
            content.extend(bytes(end - len(content)))
        content[op.pos:end] = op.data
    else:  # truncate
        if op.pos < len(content):
            del content[op.pos:]
        else:
            content.extend(bytes(op.pos - len(content)))


class _Inode:
    __slots__ = ("durable", "pending")

    def __init__(self) -> None:
        self.durable = bytearray()
        self.pending: list[Op] = []


class DiskState:
    """The state before operation ``step`` of a history: per inode, its durable bytes and
    pending changes; the durable directory and the pending entry changes; the flushed
    (acknowledged) end offset and the highest log start offset asked for so far.
    ``inflight`` is operation ``step`` itself when it is a write: a crash during it may
    leave any part of it."""

    def __init__(self, step, inodes, durable_names, pending_dir, names, acked, start,
                 inflight) -> None:
        self.step = step
        self.inodes = inodes
        self.durable_names = durable_names
        self.pending_dir = pending_dir
        self.names = names
        self.acked = acked
        self.start = start
        self.inflight = inflight

    def _directory(self, keep: int) -> dict[str, int]:
        names = dict(self.durable_names)
        for change in self.pending_dir[:keep]:
            kind, a, b = change
            if kind == "link":
                names[a] = b
            elif kind == "rename":
                if a in names:
                    names[b] = names.pop(a)
            else:
                names.pop(a, None)
        return names

    def _pending(self, ino: int) -> list[Op]:
        ops = list(self.inodes[ino].pending)
        if self.inflight is not None and self.names.get(self.inflight.name) == ino:
            ops.append(self.inflight)
        return ops

    def image(self, keep_dir: int, keep: dict[int, int], *, fill: str | None = None,
              rng: random.Random | None = None, torn: int | None = None) -> dict[str, bytes]:
        """Files a crash leaves: ``keep_dir`` pending entry changes, the first
        ``keep[ino]`` pending changes of each inode; ``torn``: the in-flight write kept up
        to that file position; ``fill`` (``zeros``/``garbage``): pending bytes past the
        durable length replaced, the length kept."""
        out = {}
        for name, ino in self._directory(keep_dir).items():
            node = self.inodes[ino]
            content = bytearray(node.durable)
            pending = self._pending(ino)
            for op in pending[:keep.get(ino, len(pending))]:
                if torn is not None and op is self.inflight:
                    op = op._replace(data=op.data[:torn - op.pos])
                _apply(content, op)
            if fill is not None and len(content) > len(node.durable):
                start = len(node.durable)
                tail = len(content) - start
                content[start:] = bytes(tail) if fill == "zeros" else rng.randbytes(tail)
            out[name] = bytes(content)
        return out

    def images(self, rng: random.Random, randoms: int = 2,
               max_torn: int = 4) -> Iterator[tuple[str, dict[str, bytes]]]:
        """``(label, files)`` of the crash images of this state (see the module
        docstring); some may be equal."""
        all_dir = len(self.pending_dir)
        everything = {ino: len(self._pending(ino)) for ino in self.inodes}
        nothing = dict.fromkeys(self.inodes, 0)
        yield "synced", self.image(0, nothing)
        yield "kept", self.image(all_dir, everything)
        for _ in range(randoms):
            keep = {ino: rng.randint(0, n) for ino, n in everything.items()}
            yield "random", self.image(rng.randint(0, all_dir), keep)
        if any(self.inodes[ino].pending for ino in self.inodes) or self.inflight:
            yield "zeros", self.image(all_dir, everything, fill="zeros")
            yield "garbage", self.image(all_dir, everything, fill="garbage", rng=rng)
        op = self.inflight
        if op is not None and len(op.data) > 1:
            end = op.pos + len(op.data)
            cuts = sorted({c for g in (SECTOR, PAGE)
                           for c in range((op.pos // g + 1) * g, end, g)})
            if not cuts:
                cuts = [op.pos + len(op.data) // 2]   # a write inside one sector
            if len(cuts) > max_torn:
                cuts = sorted(rng.sample(cuts, max_torn))
            for cut in cuts:
                yield f"torn@{cut - op.pos}", self.image(all_dir, everything, torn=cut)


def crash_states(ops: list[Op]) -> Iterator[DiskState]:
    """Replay ``ops`` and yield the state before each operation (and after the last).

    The states share their objects with the replay: use each before asking for the next.
    """
    inodes: dict[int, _Inode] = {}
    names: dict[str, int] = {}
    durable_names: dict[str, int] = {}
    pending_dir: list[tuple] = []
    acked = start = 0
    for step in range(len(ops) + 1):
        op = ops[step] if step < len(ops) else None
        inflight = op if op is not None and op.kind == "write" else None
        yield DiskState(step, inodes, durable_names, pending_dir, names, acked, start,
                        inflight)
        if op is None:
            break
        kind = op.kind
        if kind == "create":
            ino = len(inodes)
            inodes[ino] = _Inode()
            names[op.name] = ino
            pending_dir.append(("link", op.name, ino))
        elif kind in ("write", "truncate"):
            inodes[names[op.name]].pending.append(op)
        elif kind == "sync":
            node = inodes[names[op.name]]
            for change in node.pending:
                _apply(node.durable, change)
            node.pending = []
        elif kind == "dirsync":
            durable_names = dict(names)
            pending_dir = []
        elif kind == "rename":
            names[op.dst] = names.pop(op.name)
            pending_dir.append(("rename", op.name, op.dst))
        elif kind == "unlink":
            del names[op.name]
            pending_dir.append(("unlink", op.name, None))
        elif kind == "ack":
            acked = max(acked, op.pos)
        elif kind == "start":
            start = max(start, op.pos)
        else:
            raise AssertionError(f"unknown operation {op}")


def live_image(state: DiskState) -> dict[str, bytes]:
    """What the directory holds right now (nothing lost): the replay's own view."""
    out = {}
    for name, ino in state.names.items():
        content = bytearray(state.inodes[ino].durable)
        for op in state.inodes[ino].pending:
            _apply(content, op)
        out[name] = bytes(content)
    return out


def read_directory(path) -> dict[str, bytes]:
    out = {}
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full, "rb") as f:
                out[name] = f.read()
    return out


def write_directory(path, files: dict[str, bytes]) -> None:
    os.makedirs(path)
    for name, data in files.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)


def digest(files: dict[str, bytes]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(files):
        h.update(name.encode() + b"\0" + len(files[name]).to_bytes(8, "big"))
        h.update(files[name])
    return h.digest()
