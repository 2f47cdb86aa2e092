"""What Kafka's offset and time indexes share (Kafka's ``AbstractIndex``): a sparse,
memory-mapped array of fixed-size big-endian entries, its sizing, truncation and life
cycle. The entry layouts are in :mod:`kafkastore.offset_index` (``.index``, 8 bytes an
entry) and :mod:`kafkastore.time_index` (``.timeindex``, 12 bytes an entry); both are
written exactly as Kafka writes them (kafka-storage.md section 3).

Both layouts store ``relativeOffset = offset - base_offset`` of the segment (so it must
fit an int32). There is no header and no checksum; indexes are rebuilt from the log when
in doubt.

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
no copy. Each index module binds the kernel functions it calls to module globals (the
lookups are hot); this one also holds the helpers they share (argument checks, the entry
count a lock-free lookup may search).

Invariants, the mapping's life cycle, durability and thread safety are on
:class:`AbstractIndex`.
"""

from __future__ import annotations

import io
import mmap
import operator
import os
import threading
from pathlib import Path
from typing import ClassVar

from kafkastore import _fileio
from kafkastore._kernels import index_search as _search
from kafkastore.errors import (
    CorruptIndexError,
    IndexClosedError,
    IndexOffsetOverflowError,
)

__all__ = ["AbstractIndex", "DEFAULT_MAX_INDEX_SIZE"]

#: Default of ``segment.index.bytes`` (broker: ``log.index.size.max.bytes``): 10 MiB.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024

_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_EMPTY = memoryview(b"")  # the "mapping" of an empty file: mmap cannot map 0 bytes

_OFFSET_INDEX = _search.OFFSET_INDEX
_KEY = _search.KEY
_VALUE = _search.VALUE
_lower_slot = _search.largest_lower_bound_slot
_read_entry = _search.read_entry

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

    def append_view(self) -> memoryview:
        """The writable map, for a kernel that writes entries past the counted ones in bulk
        (recovery's rebuild: ``index_search.rebuild_entries``); :meth:`commit_appended`
        then counts them. Lookups never read past the count, so they see none of the
        bytes before the commit. Raises as an append does on a closed or read-only index."""
        view = self._view
        if view is None or not self._writable:
            self._check_writable()
        return view

    def _commit(self, entries: int) -> bool:
        """Count the entries a kernel wrote through :meth:`append_view` (the caller holds
        the lock and sets its own last entry); whether any were added."""
        if not self._entries <= entries <= self._max_entries:
            raise ValueError(f"entries {entries} outside [{self._entries}, {self._max_entries}]")
        if entries == self._entries:
            return False
        self._dirty = True
        self._entries = entries
        return True

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
