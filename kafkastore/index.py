"""Kafka's offset and time indexes: the ``.index`` and ``.timeindex`` files of a segment.

Both are sparse, memory-mapped arrays of fixed-size big-endian entries, written exactly
as Kafka's ``AbstractIndex``, ``OffsetIndex`` and ``TimeIndex`` write them
(kafka-storage.md section 3)::

    offset index (.index), 8 bytes an entry       time index (.timeindex), 12 bytes an entry
    +0  relativeOffset  int32                     +0  timestamp       int64
    +4  position        int32                     +8  relativeOffset  int32

``relativeOffset`` is ``offset - base_offset`` of the segment (so it must fit an int32).
An offset index entry says: the batch starting at byte ``position`` of the ``.log`` has
last offset ``offset``. A time index entry says: the largest timestamp in the segment up
to and including the batch that ends at ``offset`` is ``timestamp``. There is no header
and no checksum; indexes are rebuilt from the log when in doubt.

Files and sizes. A new index file is preallocated (sparse) to ``max_index_size`` rounded
down to a whole number of entries (``segment.index.bytes``, 10 MiB by default: 1,310,720
offset entries or 873,813 time entries) and starts with no entries. An *existing* file is
assumed to be entirely valid: its entry count is its length divided by the entry size.
That is why an index is trimmed to exactly its entries when it is closed or its segment is
rolled, and why an index left untrimmed by a crash counts its zero padding as entries
(:meth:`AbstractIndex.sanity_check` with ``full=True`` finds them; Kafka rebuilds such
indexes from the log during recovery). The active segment's indexes are grown back to
``max_index_size`` with :meth:`AbstractIndex.reset_size_to_max` when it is reopened.

The searches are the ``index_search`` kernel (compiled, or its pure-Python twin): Kafka's
binary search that looks at the last 8 KiB of entries first, over the mapped bytes, with
no copy.
"""

from __future__ import annotations

import io
import mmap
import operator
import os
import struct
import threading
from pathlib import Path
from typing import ClassVar, NamedTuple

from kafkastore import _fileio
from kafkastore._kernels import index_search as _search
from kafkastore.errors import (
    CorruptIndexError,
    IndexClosedError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidTimestampError,
)

__all__ = [
    "AbstractIndex",
    "OffsetIndex",
    "TimeIndex",
    "OffsetPosition",
    "TimestampOffset",
    "OffsetIndexView",
    "TimeIndexView",
    "DEFAULT_MAX_INDEX_SIZE",
    "NO_TIMESTAMP",
]

#: Default of ``segment.index.bytes`` (broker: ``log.index.size.max.bytes``): 10 MiB.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
#: Kafka's ``RecordBatch.NO_TIMESTAMP``: what :meth:`TimeIndex.lookup` reports when no
#: entry is at or below the target.
NO_TIMESTAMP = -1

_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_EMPTY = memoryview(b"")  # the "mapping" of an empty file: mmap cannot map 0 bytes

_OFFSET_INDEX = _search.OFFSET_INDEX
_TIME_INDEX = _search.TIME_INDEX
_KEY = _search.KEY
_VALUE = _search.VALUE
_lower_entry = _search.largest_lower_bound_entry
_lower_slot = _search.largest_lower_bound_slot
_upper_slot = _search.smallest_upper_bound_slot
_read_entry = _search.read_entry
_lower_and_next = _search.lower_entry_and_next

# One fragment per field, big-endian as Java's ByteBuffer writes them.
_OFFSET_ENTRY = struct.Struct(
    ">"
    "i"  # relativeOffset: offset - base_offset
    "i"  # position: byte position of the batch in the .log
)
_TIME_ENTRY = struct.Struct(
    ">"
    "q"  # timestamp: largest timestamp so far, in ms
    "i"  # relativeOffset: offset - base_offset of the batch holding it
)


class OffsetPosition(NamedTuple):
    """An offset index entry: the batch at byte ``position`` ends at ``offset``."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: ``timestamp`` is the largest timestamp up to ``offset``."""

    timestamp: int
    offset: int


# Build the named tuples without the Python-level __new__ NamedTuple generates: the
# lookups are hot, and tuple.__new__ on a ready tuple is one C call.
_tuple_new = tuple.__new__


# The hot lookups (``OffsetIndex.lookup``, ``lookup_with_next``, ``TimeIndex.lookup``)
# read the entry count *before* the view instead of capping it (40 ns a lookup): a view
# taken later is the same map or a newer one, and every map since then holds at least
# that many entries, except after a truncation followed by a trim (a follower's
# ``truncate_to``, then a roll); there the kernel's bounds check raises ``ValueError``,
# which ``Log.read`` and ``Log.offset_for_timestamp`` answer by looking up again under
# the log's lock. Colder lookups cap the count with :func:`_valid`.


def _valid(entries: int, view, size: int) -> int:
    """The entry count a lock-free lookup may search in ``view``: a count read next to a
    view the writer has since replaced (a resize, a truncation then a trim) is capped to
    what that view holds, so the lookup answers from one consistent state."""
    capacity = len(view) // size
    return entries if entries <= capacity else capacity


def _check_int(value, what: str) -> int:
    """``value`` as an int: any integer, numpy's included (``__index__``); else TypeError."""
    if isinstance(value, int):
        return int(value)  # a bool becomes 0 or 1
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None


class AbstractIndex:
    """What :class:`OffsetIndex` and :class:`TimeIndex` share: the mapped file of fixed-size
    entries, its sizing, truncation and life cycle (Kafka's ``AbstractIndex``).

    Parameters
    ----------
    path : str or os.PathLike
        The index file. Created (and preallocated) if missing and ``writable``.
    base_offset : int
        The segment's base offset; entries store offsets relative to it.
    max_index_size : int
        Bytes to preallocate for a new file (``segment.index.bytes``), rounded down to a
        whole number of entries; also the size :meth:`reset_size_to_max` grows back to.
        Ignored when opening an existing file, which is mapped at its current length.
    writable : bool
        Map the file read-write (the default) or read-only. A read-only index never
        changes the file: appends and resizes raise :class:`io.UnsupportedOperation`, and
        :meth:`close` does not trim it.

    Raises
    ------
    ValueError
        ``max_index_size`` is smaller than one entry and the file has to be created
        (Kafka: "Invalid max index size"); nothing is created then.
    FileNotFoundError
        A read-only index whose file does not exist.

    Notes
    -----
    Invariants: ``0 <= entries <= max_entries = length // entry_size``; the first
    ``entries`` entries are valid and sorted; the file stays mapped (a
    :class:`~kafkastore._fileio.Mapping` and its ``memoryview``) from construction to
    :meth:`close`, :meth:`close_handler` or :meth:`delete_if_exists`. On Linux and macOS
    the map holds no file descriptor (as Java's ``MappedByteBuffer``): an open index costs
    none; elsewhere the map keeps one.

    Lifecycle of the mapping: searches pass the index's view to the kernel. On Linux and
    macOS :meth:`resize` maps the new length first and then drops the old map, and
    :meth:`close` only drops it: the memory is unmapped when the last lookup holding it
    returns, so a lookup racing a resize, a roll's trim or a segment's deletion reads the
    old, valid entries (Kafka leaves the old buffer to the garbage collector on Linux for
    the same reason). On Windows the view is released and the map closed before the
    file's length changes (``BufferError`` while a lookup holds it). Any operation after
    close raises :class:`~kafkastore.errors.IndexClosedError`; ``close()`` itself may be
    repeated.

    File I/O and durability: opening, resizing, mapping, flushing, closing, renaming and
    deleting the file go through :data:`kafkastore._fileio.fs` (looked up at each call),
    so tests can fail or "crash" any of them; lookups and appends only touch the mapped
    memory. Appended entries are durable once :meth:`flush` has run (``msync``); a trim
    (:meth:`trim_to_valid_size`, any shrinking :meth:`resize`) is fsynced at once, and
    :meth:`close` fsyncs the file when it trims it or when entries were written since the
    last flush. A resize whose length change or fsync fails leaves the index open (and
    raises); one whose file cannot be reopened or mapped leaves it closed.

    Thread safety (as in Kafka): one writer appends, truncates and resizes, serialised by
    the log's lock and by this index's own lock. Lookups take no lock: each takes the view
    and the entry count once, caps the count to what that view holds, and searches that
    snapshot, so it may run concurrently with an append (entries are written before the
    count grows) and, on Linux and macOS, with a resize or close (see above).
    """

    #: Bytes per entry.
    ENTRY_SIZE: ClassVar[int]
    _KIND: ClassVar[int]

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        base_offset = _check_int(base_offset, "base_offset")
        max_index_size = _check_int(max_index_size, "max_index_size")
        if not _INT64_MIN <= base_offset <= _INT64_MAX:
            raise ValueError(f"base_offset {base_offset} is outside the int64 range")
        self._path = Path(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = bool(writable)
        self._lock = threading.RLock()
        self._mmap: _fileio.Mapping | None = None
        self._view: memoryview | None = None
        self._length = 0
        self._max_entries = 0
        self._entries = 0
        # Whether the file may hold bytes or a length no flush has made durable yet:
        # set by appends and resizes, cleared by flush() (close() syncs when it is set).
        self._dirty = False
        self._open()
        self._load_last_entry()

    # -- the file and its mapping --------------------------------------------------------

    def _open(self) -> None:
        fs = _fileio.fs
        size = self.ENTRY_SIZE
        created = False
        if not self._writable:
            fd = fs.open(str(self._path), os.O_RDONLY | _O_BINARY)
        elif self._max_index_size < size:
            # Checked before creating anything (Kafka leaves an empty file behind).
            try:
                fd = fs.open(str(self._path), os.O_RDWR | _O_BINARY)
            except FileNotFoundError:
                raise ValueError(f"Invalid max index size: {self._max_index_size}") from None
        else:
            try:
                fd = fs.open(str(self._path), os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_BINARY,
                             0o644)
                created = True
            except FileExistsError:
                fd = fs.open(str(self._path), os.O_RDWR | _O_BINARY)
        try:
            if created:
                # sparse preallocation, as RandomAccessFile.setLength
                fs.ftruncate(fd, self._max_index_size - self._max_index_size % size)
                self._dirty = True  # the new length is not durable yet
            self._map(fd, fs.fstat_size(fd))
        except BaseException:
            if created:
                fs.close(fd)
                fd = -1
                fs.unlink(str(self._path))
            raise
        finally:
            if fd >= 0:
                fs.close(fd)  # the mmap holds its own descriptor
        # A new file has no entries; an existing one is assumed valid to its end.
        self._entries = 0 if created else self._max_entries

    def _map(self, fd: int, length: int) -> None:
        if length == 0:
            mapping, view = None, _EMPTY
        else:
            access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
            mapping = _fileio.fs.mmap(fd, length, access)
            view = mapping.view
        # the new map is complete before a lookup can see it; the count of entries
        # never exceeds what either view holds (see _valid)
        self._mmap, self._view = mapping, view
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE

    def _unmap(self) -> None:
        """Drop the map (Kafka's ``forceUnmap`` where a platform needs it).

        With a descriptor-free :class:`~kafkastore._fileio.Mapping` (Linux, macOS) the
        memory goes when the last lookup holding it lets go, so this never fails and a
        lookup in flight keeps reading valid memory. With :class:`mmap.mmap` (Windows)
        it raises :class:`BufferError`, leaving the index mapped and usable, while a
        buffer of the map is exported."""
        mapping = self._mmap
        if mapping is not None:
            mapping.close()
        self._mmap = None
        self._view = None

    def _remap_in_place(self) -> bool:
        """Whether a resize may map the new length before dropping the old map (a
        descriptor-free map: lookups never see the index closed during a resize)."""
        return self._mmap is None or not self._mmap.holds_fd

    def _closed(self) -> IndexClosedError:
        return IndexClosedError(f"index {self._path} is closed", path=str(self._path))

    def _check_writable(self) -> None:
        if self._view is None:
            raise self._closed()
        if not self._writable:
            raise io.UnsupportedOperation(f"index {self._path} was opened read-only")

    # -- sizes and state -----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The index file (changes with :meth:`rename_to` and :meth:`update_parent_dir`)."""
        return self._path

    @property
    def base_offset(self) -> int:
        """Base offset of the segment; entries store offsets relative to it."""
        return self._base_offset

    @property
    def entry_size(self) -> int:
        """Bytes per entry: 8 for an offset index, 12 for a time index."""
        return self.ENTRY_SIZE

    @property
    def max_index_size(self) -> int:
        """The size a new file is preallocated to and :meth:`reset_size_to_max` restores."""
        return self._max_index_size

    @property
    def entries(self) -> int:
        """Number of valid entries."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """Entries the current file length holds: ``length // entry_size``."""
        return self._max_entries

    @property
    def length(self) -> int:
        """Length of the file (and of the mapping), in bytes."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes of valid entries: ``entries * entry_size``."""
        return self._entries * self.ENTRY_SIZE

    @property
    def writable(self) -> bool:
        """Whether the file is mapped read-write."""
        return self._writable

    @property
    def closed(self) -> bool:
        """True after :meth:`close`, :meth:`close_handler` or :meth:`delete_if_exists`."""
        return self._view is None

    def is_full(self) -> bool:
        """No room for another :meth:`OffsetIndex.append` (``entries >= max_entries``)."""
        return self._entries >= self._max_entries

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, checked to fit an int32 as an entry stores it.

        Raises :class:`~kafkastore.errors.IndexOffsetOverflowError` otherwise.
        """
        if type(offset) is not int:
            offset = _check_int(offset, "offset")
        relative = offset - self._base_offset
        if relative < 0 or relative > _INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} ({self._path})",
                offset=offset, path=str(self._path))
        return relative

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits this index's relative offsets (Kafka's
        ``canAppendOffset``)."""
        offset = _check_int(offset, "offset")
        return 0 <= offset - self._base_offset <= _INT32_MAX

    # -- truncation and resizing ---------------------------------------------------------

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length)."""
        with self._lock:
            if self._view is None:
                raise self._closed()
            self._truncate_to_entries(0)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for an offset >= ``offset`` (the file keeps its length).

        As Kafka: with no entry at or below ``offset`` the index becomes empty; an entry for
        exactly ``offset`` goes with everything after it; otherwise the entries after the
        largest one below ``offset`` go.
        """
        offset = _check_int(offset, "offset")
        with self._lock:
            view = self._view
            if view is None:
                raise self._closed()
            column = _KEY if self._KIND == _OFFSET_INDEX else _VALUE
            target = offset - self._base_offset
            slot = _lower_slot(view, self._entries, self._KIND, target, column)
            if slot < 0:
                entries = 0
            elif _read_entry(view, self._entries, self._KIND, slot)[column] == target:
                entries = slot
            else:
                entries = slot + 1
            self._truncate_to_entries(entries)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        self._load_last_entry()

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries and remap it.

        Entries are kept; ``max_entries`` follows the new length. Returns False (and does
        nothing) when the length would not change. The view is released and the map closed
        before the length changes. A shrink (a trim) is fsynced before the file is mapped
        again, so it is durable when this returns; a growth is not (the next
        :meth:`flush` covers it).

        Raises
        ------
        ValueError
            ``new_size`` would cut into the valid entries.
        io.UnsupportedOperation
            The index is read-only.
        OSError
            The file could not be reopened, resized, fsynced or mapped again (deleted
            behind the index's back, disk full, an I/O error). When the file was reopened
            but the length change or the fsync failed, it is mapped again at the length
            it has then and the index stays open and usable; otherwise it is left closed.
        """
        new_size = _check_int(new_size, "new_size")
        if new_size < 0:
            raise ValueError(f"new_size {new_size} is negative")
        with self._lock:
            self._check_writable()
            size = self.ENTRY_SIZE
            rounded = new_size - new_size % size
            if rounded == self._length:
                return False
            if rounded < self._entries * size:
                raise ValueError(
                    f"cannot resize index {self._path} to {new_size} bytes: it holds "
                    f"{self._entries} entries ({self._entries * size} bytes)")
            shrink = rounded < self._length
            # Kafka on Linux maps the new length and leaves the old buffer to lookups
            # still using it; Windows cannot change the length of a mapped file
            in_place = self._remap_in_place()
            old = self._mmap
            if not in_place:
                self._unmap()
            fs = _fileio.fs
            fd = fs.open(str(self._path), os.O_RDWR | _O_BINARY)
            try:
                try:
                    fs.ftruncate(fd, rounded)
                    if shrink:
                        # A trim (roll, recovery) must be durable before anything can
                        # trust the index: a lost trim brings the zero padding back as
                        # entries, and the flush that follows a roll is skipped when the
                        # recovery point is already at the new segment.
                        fs.fsync(fd)
                except OSError:
                    # Map the file again at the length it has now, so the index stays
                    # usable (lookups, a later retry), then report the error.
                    self._dirty = True
                    length = fs.fstat_size(fd)
                    if length >= self._entries * size and (not in_place
                                                           or length != self._length):
                        self._map(fd, length)
                        if in_place and old is not None:
                            old.close()
                    raise
                self._dirty = not shrink
                self._map(fd, rounded)
                if in_place and old is not None:
                    old.close()   # freed when the last lookup using it returns
            finally:
                fs.close(fd)
            self._load_last_entry()
            return True

    def trim_to_valid_size(self) -> bool:
        """Shrink the file to exactly its entries (on roll and close): ``resize(size_in_bytes)``."""
        with self._lock:
            return self.resize(self._entries * self.ENTRY_SIZE)

    def reset_size_to_max(self) -> bool:
        """Grow the file back to :attr:`max_index_size`, as Kafka does for the active
        segment's indexes when a log is loaded; entries are kept."""
        return self.resize(self._max_index_size)

    def reset(self) -> None:
        """Remove every entry and resize the file to :attr:`max_index_size` (before a
        segment's indexes are rebuilt by recovery)."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    # -- durability, renames and closing -------------------------------------------------

    def flush(self) -> None:
        """Make the entries and the length of the file durable: ``msync`` of the map (on
        Linux that is an ``fdatasync`` of its range, which covers a changed length too),
        or, for a file of 0 bytes (nothing to map), an ``fsync`` of the file if it has
        changed since it was last made durable. Nothing to do if read-only."""
        with self._lock:
            if self._view is None:
                raise self._closed()
            if not self._writable:
                return
            fs = _fileio.fs
            if self._mmap is not None:
                fs.msync(self._mmap)
            elif self._dirty:  # a trim to 0 bytes whose fsync failed: try again
                self._fsync_file(None)
            self._dirty = False

    def _fsync_file(self, length: int | None) -> None:
        """Open the file, set its length to ``length`` (unless None), fsync it, close it."""
        fs = _fileio.fs
        fd = fs.open(str(self._path), os.O_RDWR | _O_BINARY)
        try:
            if length is not None:
                fs.ftruncate(fd, length)
            fs.fsync(fd)
        finally:
            fs.close(fd)

    def close(self) -> None:
        """Unmap the file, release every view and, if writable, trim the file to its
        entries; then fsync it if it was trimmed or written since the last :meth:`flush`.

        The fsync makes what a clean shutdown leaves behind durable: the trimmed length
        and a final time index entry written on close would otherwise be lost by a crash
        after the clean-shutdown marker, and the next open would trust an index with
        zero padding. Afterwards the index holds no buffer of the file and no descriptor
        (a lookup still running keeps its map until it returns); repeated calls do
        nothing. Raises :class:`OSError` if the trim or the fsync fails (the index is
        closed all the same), and on Windows :class:`BufferError` if a lookup is still
        using the view.
        """
        with self._lock:
            if self._view is None:
                return
            self._unmap()
            valid = self._entries * self.ENTRY_SIZE
            if not self._writable:
                return
            trim = self._length != valid
            dirty, self._dirty = self._dirty, False
            if trim:
                self._length = valid
                self._max_entries = self._entries
            if trim or dirty:
                try:
                    self._fsync_file(valid if trim else None)
                except FileNotFoundError:  # already gone: nothing to trim
                    pass

    def close_handler(self) -> None:
        """Unmap without trimming (Kafka's ``closeHandler``, used when a segment is being
        deleted or failed to open)."""
        with self._lock:
            if self._view is not None:
                self._unmap()

    def delete_if_exists(self) -> bool:
        """Unmap the index and delete its file; whether a file was deleted."""
        with self._lock:
            if self._view is not None:
                self._unmap()
            return _fileio.fs.unlink(str(self._path))

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Atomically rename the file to ``path`` (the mapping stays valid).

        As Kafka, the index takes the new path even if the rename fails.
        """
        with self._lock:
            target = Path(path)
            try:
                _fileio.fs.rename(str(self._path), str(target))
            finally:
                self._path = target

    def change_file_suffix(self, old_suffix: str, new_suffix: str) -> None:
        """Rename ``<name><old_suffix>`` to ``<name><new_suffix>``: ``.index`` to
        ``.index.deleted``, ``.timeindex.cleaned`` to ``.timeindex.swap`` and so on.

        Raises :class:`ValueError` if the file name does not end with ``old_suffix``.
        """
        name = str(self._path)
        if not name.endswith(old_suffix):
            raise ValueError(
                f"Expected string to end with '{old_suffix}' but string is '{name}'")
        self.rename_to(name[: len(name) - len(old_suffix)] + new_suffix)

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        """Point at the same file name in ``parent_dir`` (after its directory was renamed)."""
        with self._lock:
            self._path = Path(parent_dir) / self._path.name

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._view is None else f"entries={self._entries}"
        return (f"{type(self).__name__}({str(self._path)!r}, base_offset={self._base_offset},"
                f" {state}, max_entries={self._max_entries}, writable={self._writable})")

    # -- checks --------------------------------------------------------------------------

    def _check_order(self) -> None:
        view = self._view
        if view is None:
            raise self._closed()
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        slot = _search.first_out_of_order(view, entries, self._KIND)
        if slot >= 0:
            entry = self.entry(slot)
            offset = entry[0] if self._KIND == _OFFSET_INDEX else entry[1]
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._path}) has entry {slot} {entry} "
                f"out of order (base offset {self._base_offset})",
                position=slot * self.ENTRY_SIZE, offset=offset, path=str(self._path))

    def _check_length(self, what: str) -> None:
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{what} file {self._path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}",
                position=self._length - self._length % self.ENTRY_SIZE, path=str(self._path))

    # subclass hooks
    def _load_last_entry(self) -> None:
        raise NotImplementedError

    def entry(self, n: int):  # pragma: no cover - overridden
        raise NotImplementedError

    #: How an index names itself in errors ("index", "time index").
    _LABEL: ClassVar[str]

    def _raw_entry(self, n: int) -> tuple[int, int]:
        """Entry ``n`` as stored (relative offsets), bounds-checked for :meth:`entry`."""
        view = self._view
        if view is None:
            raise self._closed()
        n = _check_int(n, "n")
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        if n < 0 or n >= entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from {self._LABEL} "
                             f"{self._path}, which has size {entries}.")
        return _read_entry(view, entries, self._KIND, n)


class OffsetIndex(AbstractIndex):
    """A segment's ``.index``: maps offsets to byte positions in its ``.log``.

    Entries are ``(relativeOffset int32, position int32)``, 8 bytes, big-endian; both
    columns strictly increase. An entry is appended (by the segment) for a batch when more
    than ``index.interval.bytes`` (4096 by default) were written since the last entry; it
    records the batch's *last* offset and its *start* position, so :meth:`lookup` gives a
    position from which a scan of the log finds any offset at or above the entry's.

    See :class:`AbstractIndex` for the parameters, the file life cycle and thread safety.
    """

    ENTRY_SIZE = _search.OFFSET_ENTRY_SIZE
    _KIND = _OFFSET_INDEX
    _LABEL = "index"

    _last_offset: int

    def _load_last_entry(self) -> None:
        self._last_offset = self.last_entry.offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when the index is empty."""
        return self._last_offset

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when the index is empty."""
        view = self._view
        if view is None:
            raise self._closed()
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        if entries == 0:
            return OffsetPosition(self._base_offset, 0)
        relative, position = _read_entry(view, entries, _OFFSET_INDEX, entries - 1)
        return OffsetPosition(self._base_offset + relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``, or ``(base_offset, 0)``
        when there is none (empty index, or a target below the first entry)."""
        entries = self._entries   # before the view: see the note above _valid
        view = self._view
        if view is None:
            raise self._closed()
        if type(target_offset) is not int:
            target_offset = _check_int(target_offset, "target_offset")
        base = self._base_offset
        found = _lower_entry(view, entries, _OFFSET_INDEX, target_offset - base, _KEY)
        if found is None:
            return _tuple_new(OffsetPosition, (base, 0))
        return _tuple_new(OffsetPosition, (base + found[0], found[1]))

    def lookup_with_next(self, target_offset: int) -> tuple[int, int, int]:
        """:meth:`lookup` as ``(offset, position)`` plus the position of the entry after
        it (-1 when there is none): a read's search bounds in one call.

        The batch holding ``target_offset`` starts after ``position`` (at it when
        ``offset == target_offset``) and at or before the next entry's position.
        """
        entries = self._entries  # once, and before the view: see the note above _valid
        view = self._view
        if view is None:
            raise self._closed()
        if type(target_offset) is not int:
            target_offset = _check_int(target_offset, "target_offset")
        base = self._base_offset
        slot, relative, position, _, after = _lower_and_next(
            view, entries, _OFFSET_INDEX, target_offset - base, _KEY)
        if slot + 1 >= entries:
            after = -1
        return base + relative, position, after

    def entry(self, n: int) -> OffsetPosition:
        """Entry ``n`` (0-based). Raises :class:`IndexError` unless ``0 <= n < entries``."""
        relative, position = self._raw_entry(n)
        return OffsetPosition(self._base_offset + relative, position)

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition | int,
                                 fetch_size: int) -> OffsetPosition | None:
        """The first entry at or after byte ``fetch_offset.position + fetch_size``: an offset
        certainly past a fetch of ``fetch_size`` bytes from ``fetch_offset``, or None when
        no entry is that far (Kafka's ``fetchUpperBoundOffset``).

        ``fetch_offset`` is an :class:`OffsetPosition` (as in Kafka) or just its position.
        """
        view = self._view
        if view is None:
            raise self._closed()
        start = fetch_offset if isinstance(fetch_offset, int) else fetch_offset[1]
        target = _check_int(start, "fetch_offset") + _check_int(fetch_size, "fetch_size")
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        slot = _upper_slot(view, entries, _OFFSET_INDEX, target, _VALUE)
        if slot < 0:
            return None
        relative, position = _read_entry(view, entries, _OFFSET_INDEX, slot)
        return OffsetPosition(self._base_offset + relative, position)

    def append(self, offset: int, position: int) -> None:
        """Append the entry ``(offset, position)``.

        Raises
        ------
        IndexFullError
            ``entries >= max_entries``.
        InvalidOffsetError
            The index is not empty and ``offset`` is not larger than :attr:`last_offset`.
        IndexOffsetOverflowError
            ``offset - base_offset`` does not fit an int32.
        ValueError
            ``position`` is outside ``[0, 2**31 - 1]``.
        io.UnsupportedOperation
            The index is read-only.
        """
        if type(offset) is not int:
            offset = _check_int(offset, "offset")
        if type(position) is not int:
            position = _check_int(position, "position")
        with self._lock:
            if self._view is None or not self._writable:
                self._check_writable()
            entries = self._entries
            if entries >= self._max_entries:
                raise IndexFullError(f"Attempt to append to a full index (size = {entries}).",
                                     offset=offset, path=str(self._path))
            if entries != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset {offset} to position {entries} no larger "
                    f"than the last offset appended ({self._last_offset}) to {self._path}",
                    offset=offset, path=str(self._path))
            relative = self.relative_offset(offset)
            if not 0 <= position <= _INT32_MAX:
                raise ValueError(f"position {position} is outside [0, {_INT32_MAX}]")
            _OFFSET_ENTRY.pack_into(self._view, entries * 8, relative, position)
            self._dirty = True
            self._entries = entries + 1  # after the bytes: lookups read a count, then entries
            self._last_offset = offset

    def sanity_check(self, full: bool = False) -> None:
        """Raise :class:`~kafkastore.errors.CorruptIndexError` if the file is corrupt.

        Kafka's checks: the last entry's offset is not below the base offset, and the file
        length is a whole number of entries. ``full=True`` also checks every entry: offsets
        strictly increasing from >= the base offset, positions >= 0 and non-decreasing
        (this catches zero padding left by a crash, which Kafka's checks do not).
        """
        if self._view is None:
            raise self._closed()
        last = self._last_offset
        if self._entries != 0 and last < self._base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._path}) has non-zero size but the "
                f"last offset is {last} which is less than the base offset "
                f"{self._base_offset}.",
                position=(self._entries - 1) * self.ENTRY_SIZE, offset=last,
                path=str(self._path))
        self._check_length("Index")
        if full:
            self._check_order()


class TimeIndex(AbstractIndex):
    """A segment's ``.timeindex``: maps timestamps to offsets.

    Entries are ``(timestamp int64, relativeOffset int32)``, 12 bytes, big-endian. Entry
    ``(t, o)`` means: every record with a timestamp above ``t`` is at an offset above
    ``o``. An entry is appended only when the segment's largest timestamp so far grows, so
    timestamps strictly increase and offsets never decrease; a segment of magic 0 data
    (no timestamps) has an empty time index. One slot is always kept free (:meth:`is_full`
    is true at ``max_entries - 1``) for the final entry written, with
    ``skip_full_check=True``, when the segment is rolled or closed.

    See :class:`AbstractIndex` for the parameters, the file life cycle and thread safety.
    """

    ENTRY_SIZE = _search.TIME_ENTRY_SIZE
    _KIND = _TIME_INDEX
    _LABEL = "time index"

    _last_entry: TimestampOffset

    def _load_last_entry(self) -> None:
        view = self._view
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        if view is None or entries == 0:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self._base_offset)
        else:
            timestamp, relative = _read_entry(view, entries, _TIME_INDEX, entries - 1)
            self._last_entry = TimestampOffset(timestamp, self._base_offset + relative)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        return self._last_entry

    def is_full(self) -> bool:
        """True at ``max_entries - 1`` entries: the last slot is kept for the entry written
        on roll or close."""
        return self._entries >= self._max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``, or
        ``(NO_TIMESTAMP, base_offset)`` when there is none."""
        entries = self._entries   # before the view: see the note above _valid
        view = self._view
        if view is None:
            raise self._closed()
        if type(target_timestamp) is not int:
            target_timestamp = _check_int(target_timestamp, "target_timestamp")
        found = _lower_entry(view, entries, _TIME_INDEX, target_timestamp, _KEY)
        if found is None:
            return _tuple_new(TimestampOffset, (NO_TIMESTAMP, self._base_offset))
        return _tuple_new(TimestampOffset, (found[0], self._base_offset + found[1]))

    def entry(self, n: int) -> TimestampOffset:
        """Entry ``n`` (0-based). Raises :class:`IndexError` unless ``0 <= n < entries``."""
        timestamp, relative = self._raw_entry(n)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        A timestamp equal to the last one is ignored silently: that is the final entry
        being written again on roll or close. ``skip_full_check`` (roll, close, the end of
        recovery) lets the entry take the slot kept free.

        Raises
        ------
        IndexFullError
            :meth:`is_full` and not ``skip_full_check``; or no slot at all is left.
        InvalidOffsetError
            The index is not empty and ``offset`` is below the last entry's offset.
        InvalidTimestampError
            The index is not empty and ``timestamp`` is below the last entry's.
        IndexOffsetOverflowError
            ``offset - base_offset`` does not fit an int32.
        ValueError
            ``timestamp`` is outside the int64 range.
        io.UnsupportedOperation
            The index is read-only.
        """
        if type(timestamp) is not int:
            timestamp = _check_int(timestamp, "timestamp")
        if type(offset) is not int:
            offset = _check_int(offset, "offset")
        with self._lock:
            if self._view is None or not self._writable:
                self._check_writable()
            entries = self._entries
            if not skip_full_check and entries >= self._max_entries - 1:
                raise IndexFullError(
                    f"Attempt to append to a full time index (size = {entries}).",
                    offset=offset, path=str(self._path))
            last_timestamp, last_offset = self._last_entry
            # The same offset as the last entry is allowed: the final entry is re-appended
            # when the segment is closed or rolled.
            if entries != 0 and offset < last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {entries} no larger than "
                    f"the last offset appended ({last_offset}) to {self._path}",
                    offset=offset, path=str(self._path))
            if entries != 0 and timestamp < last_timestamp:
                raise InvalidTimestampError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {entries} no larger "
                    f"than the last timestamp appended ({last_timestamp}) to {self._path}",
                    timestamp=timestamp, offset=offset, path=str(self._path))
            # Only a larger timestamp makes an entry; with magic 0 data (timestamp -1)
            # the index stays empty.
            if timestamp > last_timestamp:
                if entries >= self._max_entries:
                    raise IndexFullError(
                        f"Attempt to append to a full time index (size = {entries}): no slot "
                        "left even for the final entry", offset=offset, path=str(self._path))
                relative = self.relative_offset(offset)
                if timestamp > _INT64_MAX:
                    raise ValueError(f"timestamp {timestamp} is outside the int64 range")
                _TIME_ENTRY.pack_into(self._view, entries * 12, timestamp, relative)
                self._dirty = True
                self._entries = entries + 1  # after the bytes: lookups read a count first
                self._last_entry = _tuple_new(TimestampOffset, (timestamp, offset))

    def sanity_check(self, full: bool = False) -> None:
        """Raise :class:`~kafkastore.errors.CorruptIndexError` if the file is corrupt.

        Kafka's checks: the last timestamp is not below the first, the last offset is not
        below the base offset, and the file length is a whole number of entries.
        ``full=True`` also checks every entry: timestamps and offsets non-decreasing,
        offsets >= the base offset (this catches zero padding left by a crash).
        """
        view = self._view
        if view is None:
            raise self._closed()
        entries = _valid(self._entries, view, self.ENTRY_SIZE)
        last_timestamp, last_offset = self._last_entry
        if entries != 0:
            first_timestamp = _read_entry(view, entries, _TIME_INDEX, 0)[0]
            if last_timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last timestamp is {last_timestamp} which is less than the "
                    f"first timestamp {first_timestamp}",
                    position=(entries - 1) * self.ENTRY_SIZE, offset=last_offset,
                    path=str(self._path))
            if last_offset < self._base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last offset is {last_offset} which is less than the first "
                    f"offset {self._base_offset}",
                    position=(entries - 1) * self.ENTRY_SIZE, offset=last_offset,
                    path=str(self._path))
        self._check_length("Time index")
        if full:
            self._check_order()


# -- read-only views over bytes ---------------------------------------------------------


class _IndexView:
    """An index over bytes already in memory: a remote index file fetched with one
    ranged read, or a copy. The lookups, entries and checks are the index class's own
    (the same kernel searches over the same layout); nothing maps or writes a file.

    ``trusted=False`` (the default) treats the bytes as hints from a file another
    process may be writing or a crash may have left untrimmed: the view keeps the
    leading entries that are in order (:func:`first_out_of_order`'s rule), and, given
    ``segment_size``, whose positions lie inside the segment; the rest (a
    preallocated file's zero tail, damage) is ignored. ``trusted=True`` keeps every
    whole entry, as an index opened on a file does, for :meth:`sanity_check` to judge.

    Thread-safety: immutable once built; share freely.
    """

    def __init__(self, data, base_offset: int, path: str = "", *,
                 segment_size: int | None = None, trusted: bool = False) -> None:
        base_offset = _check_int(base_offset, "base_offset")
        view = memoryview(data).cast("B") if len(data) else _EMPTY
        size = self.ENTRY_SIZE
        self._path = str(path) or f"<{self._LABEL} of segment {base_offset}>"
        self._base_offset = base_offset
        self._max_index_size = len(view)
        self._writable = False
        self._lock = threading.RLock()
        self._mmap = None
        self._view = view
        self._length = len(view)
        self._max_entries = len(view) // size
        self._entries = self._max_entries
        self._dirty = False
        if not trusted:
            self._entries = self._valid_prefix(segment_size)
        self._load_last_entry()

    def _valid_prefix(self, segment_size: int | None) -> int:
        view, n, kind = self._view, self._entries, self._KIND
        bad = _search.first_out_of_order(view, n, kind)
        if bad >= 0:
            n = bad
        if kind == _OFFSET_INDEX:
            if segment_size is not None and n:
                # positions never decrease in the prefix: the first at or past the
                # segment's end, and everything after it, point nowhere
                past = _upper_slot(view, n, kind, max(segment_size, 1), _VALUE)
                if past >= 0:
                    n = past
        else:
            # an all-zero entry after the first is a preallocated file's tail (timestamps
            # do not decrease, so only leading entries can be zero)
            for slot in range(1, n):
                ts, rel = _read_entry(view, n, kind, slot)
                if ts > 0:
                    break
                if ts == 0 and rel == 0:
                    n = 0 if _read_entry(view, n, kind, 0) == (0, 0) else slot
                    break
        return n

    def __len__(self) -> int:
        return self._entries

    def close(self) -> None:
        """Drop the bytes (lookups then raise :class:`IndexClosedError`)."""
        self._view = None

    close_handler = close

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._path!r}, base_offset={self._base_offset}, "
                f"entries={self._entries})")


class OffsetIndexView(_IndexView, OffsetIndex):
    """A read-only :class:`OffsetIndex` over the bytes of a ``.index`` file (see
    :class:`_IndexView`): ``lookup``, ``lookup_with_next``, ``entry``,
    ``fetch_upper_bound_offset``, ``sanity_check`` as on the file."""

    def arrays(self):
        """The entries as numpy arrays: ``(offsets, positions)``, absolute offsets, int64."""
        import numpy as np

        n = self._entries
        raw = np.frombuffer(self._view, dtype=">i4", count=2 * n).reshape(n, 2)
        return raw[:, 0].astype(np.int64) + self._base_offset, raw[:, 1].astype(np.int64)


class TimeIndexView(_IndexView, TimeIndex):
    """A read-only :class:`TimeIndex` over the bytes of a ``.timeindex`` file (see
    :class:`_IndexView`): ``lookup``, ``entry``, ``last_entry``, ``sanity_check``."""
