"""A ``.log`` file of record batches, and zero-copy slices of it.

:class:`FileRecords` is Kafka's ``FileRecords``: the segment data file, an
append-only sequence of entries (v2 batches or v0/v1 messages, each an
8-byte offset and a 4-byte size followed by ``size`` bytes). It knows
nothing of indexes; :class:`~kafkastore.segment.LogSegment` builds on it.
:class:`LogSlice` is what a read returns: a file, a position and a size,
read or sent to a socket only when asked.

All I/O goes through :mod:`kafkastore._fileio`, the fault-injection seam.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

from kafkastore import _fileio
from kafkastore._kernels import entry_walk
from kafkastore.batch_header import (
    ENTRY_PREFIX,
    LOG_OVERHEAD,
    MIN_ENTRY_SIZE,
    RECORD_BATCH_OVERHEAD,
    EntryHeader,
)
from kafkastore.errors import CorruptRecordError, KafkaStoreError
from kafkastore.records import (
    iter_batches,
    scan_batches,
)
from kafkastore.txn_index import AbortedTransactionFilter

__all__ = ["EntryHeader", "FileRecords", "StorageRecords", "LogSlice",
           "MAX_SEGMENT_SIZE", "read_chunks"]

#: A segment file's size is an int32 in Kafka (positions in the offset index are int32).
MAX_SEGMENT_SIZE = (1 << 31) - 1

_PREFIX = ENTRY_PREFIX
_WINDOW = 8192
_FIRST_READ = 64          # one v2 header (61 bytes) and a little: the first step of a search
_PREFETCH_MAX = 64 << 10  # larger reads are not fetched with the search's window
_FIRST_OFFSET = -(1 << 63)
_tuple_new = tuple.__new__  # a NamedTuple without its Python-level __new__
_find_entry = entry_walk.find_entry
_FOUND, _END, _CORRUPT = entry_walk.FOUND, entry_walk.END, entry_walk.CORRUPT

# A walk yields the header's light form, kafkastore.batch_header.EntryHeader: the six
# fields the walk kernel returns, built from its tuple without a second read (the full
# header, batch_header.BatchHeader, starts with the same six fields).


class FileRecords:
    """Kafka's ``FileRecords``: one ``.log`` file.

    File format: entries back to back from byte 0, nothing else; a
    crash may leave a partial entry (or, for a preallocated file, zeros) at
    the end, which readers ignore and recovery truncates.

    Invariants: ``size`` (the logical size) never exceeds the physical
    file length nor :data:`MAX_SEGMENT_SIZE`; bytes below ``size`` are
    never rewritten in place, only cut off by :meth:`truncate_to`.

    Thread-safety: one writer (``append``, ``truncate_to``, ``trim``,
    ``rename_to``, ``close``) at a time, under the owning log's lock.
    Readers may call ``read``/``walk``/``slice`` from any thread without a
    lock: they use ``pread`` on the shared descriptor and read ``size``
    once, so they never see bytes past what was complete at that moment.
    """

    __slots__ = ("_path", "_fd", "_size", "_closed", "_dirty", "_truncations")

    def __init__(self, path: str, fd: int, size: int) -> None:
        self._path = path
        self._fd = fd
        self._size = size
        self._closed = False
        self._dirty = True    # unknown until the first flush: assume unsynced
        # every size this file was truncated to, in order: a slice taken before a
        # truncation keeps only what lay below it (see LogSlice.to_bytes)
        self._truncations: list[int] = []

    @property
    def truncations(self) -> int:
        """How many times this file was truncated (a slice's generation)."""
        return len(self._truncations)

    def stable_size(self, since: int) -> int | None:
        """The smallest size the file was truncated to after its ``since``-th truncation:
        bytes below it are what they were then (None: no truncation since)."""
        cuts = self._truncations[since:]
        return min(cuts) if cuts else None

    @classmethod
    def open(cls, path: str, *, file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False, mutable: bool = True) -> FileRecords:
        """Open (or create) ``path``.

        ``mutable=False`` (Kafka's ``FileRecords.open(file, false)``) opens an existing
        file read-only, for readers such as ``dump-log`` that must never change it.

        A new file is created empty, or ``init_file_size`` long when
        ``preallocate`` (logical size 0). An existing file's logical size is
        its physical length, as Kafka's: after a crash the zeros of an
        untrimmed preallocated file are exposed, and recovery cuts them.
        """
        fs = _fileio.fs
        if not mutable:
            flags = os.O_RDONLY
        else:
            flags = os.O_RDWR if file_already_exists else os.O_RDWR | os.O_CREAT
        fd = fs.open(path, flags)
        try:
            if mutable and not file_already_exists and preallocate and init_file_size > 0:
                fs.ftruncate(fd, init_file_size)
                size = 0
            else:
                # Kafka's open without preallocation takes the file's length, so an
                # existing file is appended to, never overwritten from byte 0
                size = fs.fstat_size(fd)
                if size > MAX_SEGMENT_SIZE:
                    raise KafkaStoreError(
                        f"The size of segment {path} ({size}) is larger than the maximum "
                        f"allowed segment size of {MAX_SEGMENT_SIZE}", path=path)
        except BaseException:
            fs.close(fd)
            raise
        return cls(path, fd, size)

    # -- properties --------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def size(self) -> int:
        """Logical size in bytes: the end of the last appended entry."""
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    def fileno(self) -> int:
        self._check_open()
        return self._fd

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStoreError(f"File {self._path} is closed", path=self._path)

    # -- writing -----------------------------------------------------------

    def append(self, data) -> int:
        """Append the bytes of whole entries at the logical end; return their length.

        Raises ``ValueError`` if the file would pass :data:`MAX_SEGMENT_SIZE`
        (checked before writing). Written at the logical end with ``pwrite``,
        so a preallocated file is filled, not extended. No fsync.
        """
        if self._closed:
            self._check_open()
        n = len(data) if type(data) is bytes else memoryview(data).nbytes
        size = self._size
        if n > MAX_SEGMENT_SIZE - size:
            raise ValueError(
                f"Append of size {n} bytes is too large for segment with current file "
                f"position at {size}")
        _fileio.pwrite_fully(self._fd, data, size)
        self._size = size + n
        self._dirty = True
        return n

    def flush(self) -> None:
        """fsync the data (Kafka's ``FileChannel.force(true)``); a no-op when nothing changed."""
        self._check_open()
        if self._dirty:
            _fileio.fs.fsync(self._fd)
            self._dirty = False

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; return how many went.

        Kafka's rules: a negative target or one above the current size is
        an error; truncating to the current size still cuts a physically
        longer (preallocated) file.
        """
        self._check_open()
        if target_size < 0 or target_size > self._size:
            raise KafkaStoreError(
                f"Attempt to truncate log segment {self._path} to {target_size} bytes "
                f"failed, size of this log segment is {self._size} bytes.", path=self._path)
        fs = _fileio.fs
        old_size = self._size
        if target_size < old_size:
            # In this order, for lock-free readers (read() takes the count of cuts, then
            # the size): the size first, then the record of the cut, then the bytes go.
            # A reader that took the old size took the old count too, so the short read
            # it then meets comes with a new cut it can see.
            self._size = target_size
            self._truncations.append(target_size)
        if target_size < old_size or fs.fstat_size(self._fd) != target_size:
            try:
                fs.ftruncate(self._fd, target_size)
            except BaseException:
                self._size = old_size   # nothing was cut (the record only hides bytes)
                raise
            self._dirty = True
        self._size = target_size
        return old_size - target_size

    def trim(self) -> None:
        """Drop preallocated space past the logical size."""
        self.truncate_to(self._size)

    def close(self) -> None:
        """Trim, fsync and close; idempotent.

        Kafka flushes, then trims; here the trim comes first so that the fsync
        covers it too: a clean-shutdown marker written after this close must not
        outlive a preallocated tail of zeros that a crash could bring back.
        """
        if self._closed:
            return
        try:
            self.trim()
            self.flush()
        finally:
            self._closed = True
            _fileio.fs.close(self._fd)

    def close_handlers(self) -> None:
        """Close without writing anything (after a disk failure)."""
        if not self._closed:
            self._closed = True
            _fileio.fs.close(self._fd)

    def rename_to(self, path: str) -> None:
        """Atomically rename the file; the open descriptor follows it."""
        _fileio.fs.rename(self._path, path)
        self._path = path

    def delete_if_exists(self) -> bool:
        self.close_handlers()
        return _fileio.fs.unlink(self._path)

    def last_modified(self) -> float:
        """Modification time of the file, seconds since the epoch."""
        return os.stat(self._path).st_mtime

    def set_last_modified(self, seconds: float) -> None:
        os.utime(self._path, (seconds, seconds))

    # -- reading -----------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position``, fewer only at the logical end."""
        self._check_open()
        cuts = len(self._truncations)   # before the size: a cut from now on is seen
        end = min(self._size, position + size)
        if position < 0 or position >= end:
            return b""
        fs = _fileio.fs
        want = end - position
        data = fs.pread(self._fd, want, position)
        if self._closed:
            # closed while we read (a segment deleted under a slow reader): the descriptor
            # number may already belong to another file, so these bytes cannot be trusted
            self._check_open()
        if len(data) < want:  # short read: loop (rare; a signal, a network fs)
            parts = [data]
            got = len(data)
            while got < want:
                more = fs.pread(self._fd, want - got, position + got)
                if not more:
                    if position + got >= self._size or len(self._truncations) != cuts:
                        break   # truncated meanwhile (Log.truncate_to): what is left
                    raise KafkaStoreError(
                        f"File {self._path} ended at {position + got}, before its logical "
                        f"size {self._size}", path=self._path, position=position + got)
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def slice(self, position: int, size: int) -> LogSlice:
        """A zero-copy view of ``[position, position + size)``, clamped to the file."""
        if position < 0:
            raise ValueError(f"Invalid position: {position} in read from {self._path}")
        current = self._size
        if position > current:
            raise ValueError(f"Slice from position {position} exceeds end position of "
                             f"{self._path} ({current} bytes)")
        if size < 0:
            raise ValueError(f"Invalid size: {size} in read from {self._path}")
        end = min(current, position + size)
        return LogSlice(self, position, end - position)

    def walk(self, start: int = 0, end: int | None = None, *,
             window: int = _WINDOW) -> Iterator[EntryHeader]:
        """Yield the header of each complete entry in ``[start, end)``.

        Kafka's ``FileLogInputStream``: fewer than 17 bytes left, or an entry
        running past ``end``, ends the walk silently; a size field below 14
        raises :class:`CorruptRecordError`. Only headers are read (in windows
        of ``window`` bytes), never the records; CRCs are not checked.
        """
        for header, _win_pos, _win in self._walk(start, end, window):
            yield header

    def walk_headers(self, start: int = 0, *, end: int | None = None,
                     header_size: int = RECORD_BATCH_OVERHEAD,
                     window: int = 16384) -> Iterator[tuple[EntryHeader, bytes]]:
        """:meth:`walk`, with the first ``header_size`` bytes of each entry (fewer for a
        shorter entry): a v2 batch's attributes and producer fields without a read of
        its records or a map of the file. The bytes come from the walk's window when it
        holds them, otherwise from one ``pread``."""
        for header, win_pos, win in self._walk(start, end, window):
            want = min(header_size, header.size)
            rel = header.position - win_pos
            if rel + want <= len(win):
                yield header, win[rel:rel + want]
            else:
                yield header, self.read(header.position, want)

    def _walk(self, start: int, end: int | None, window: int):
        """:meth:`walk`, yielding with each header the window it was read from."""
        self._check_open()
        stop = self._size if end is None else min(end, self._size)
        pos = start
        win = b""
        win_pos = start
        while True:
            found = self._find(win, win_pos, pos, stop, _FIRST_OFFSET, window)
            if found is None:
                return
            header, win_pos, win = found
            yield header, win_pos, win
            pos = header.position + header.size

    def _find(self, win: bytes, win_pos: int, pos: int, stop: int, target: int,
              window: int):
        """The first entry at or after file position ``pos`` with last offset >= ``target``.

        ``win`` holds the file's bytes from ``win_pos`` on (it may be empty or end
        anywhere); more are read in windows of ``window`` bytes as the walk needs
        them. Returns ``(header, win_pos, win)`` with the window the header was
        found in, or None at the end of the data (``stop``).
        """
        fresh = False
        while True:
            status, rel, size, magic, offset, last, max_ts = _find_entry(
                win, pos - win_pos, stop - win_pos, target)
            if status == _FOUND:
                return (_tuple_new(EntryHeader, (win_pos + rel, size, magic, offset, last,
                                                 max_ts)), win_pos, win)
            if status == _END:
                return None
            if status == _CORRUPT:
                raise CorruptRecordError(
                    f"Found record size {size} smaller than minimum record overhead "
                    f"({MIN_ENTRY_SIZE}) in file {self._path}.",
                    position=win_pos + rel, offset=offset, path=self._path)
            if fresh and rel == 0:
                return None  # a fresh window too short for one header: the file shrank
            pos = win_pos + rel
            win = self._pread(min(window, stop - pos), pos)
            win_pos = pos
            fresh = True

    def _pread(self, size: int, position: int) -> bytes:
        """One read of a walk's window (the subclass reads through the storage seam)."""
        return _fileio.fs.pread(self._fd, size, position)

    def search_for_offset_with_size(self, target_offset: int,
                                    starting_position: int = 0) -> EntryHeader | None:
        """The first entry at or after ``starting_position`` whose last offset >= target."""
        return self.search_with_data(target_offset, starting_position)[0]

    def search_with_data(self, target_offset: int, starting_position: int = 0,
                         read_size: int = 0, *, next_position: int = -1,
                         at_start: bool = False) -> tuple[EntryHeader | None, bytes | None]:
        """:meth:`search_for_offset_with_size`, and the entry's first ``read_size`` bytes.

        A read's header search, in one ``pread`` when the offset index allows:

        * ``at_start``: the entry at ``starting_position`` is known to hold the
          target (its index entry maps exactly ``target_offset``);
        * ``next_position``: the next index entry's position. The entry there
          ends above the target, so when it is a v2 batch whose base offset is
          <= the target it is the wanted one: nothing between need be walked.

        Otherwise the walk reads the header at ``starting_position`` (usually
        the batch before the wanted one), then windows from the next entry on.
        A window is ``read_size`` bytes long when that is at most 64 KiB, so the
        same bytes serve the walk and the read. The bytes are None when the
        window did not hold them (or ``read_size`` is 0); read them then.
        Larger reads are left to the caller, so a slice that is only ever sent
        with ``sendfile`` costs no copy.
        """
        if self._closed:
            self._check_open()
        window = read_size if _WINDOW <= read_size <= _PREFETCH_MAX else _WINDOW
        stop = self._size
        pread = _fileio.fs.pread
        if starting_position < next_position < stop and not at_start:
            left = stop - next_position
            win = pread(self._fd, window if window < left else left, next_position)
            found = _find_entry(win, 0, left, target_offset)
            # (status, position, size, magic, offset, ...): the entry at next_position, a
            # v2 batch whose base offset is at or below the target
            if found[0] == _FOUND and found[1] == 0 and found[3] >= 2 \
                    and found[4] <= target_offset:
                header = _tuple_new(EntryHeader, (next_position, *found[2:]))
                return header, self._data_in(win, 0, read_size, left)
            # a stale or sparse index: walk from the start
        first = window if at_start else _FIRST_READ
        win = pread(self._fd, min(first, stop - starting_position),
                    starting_position) if starting_position < stop else b""
        found = self._find(win, starting_position, starting_position, stop, target_offset,
                           window)
        if found is None:
            return None, None
        header, win_pos, win = found
        rel = header.position - win_pos
        return header, self._data_in(win, rel, read_size, stop - header.position)

    @staticmethod
    def _data_in(win: bytes, rel: int, read_size: int, left: int) -> bytes | None:
        """The first ``min(read_size, left)`` bytes from ``win[rel:]``, if it holds them."""
        size = min(read_size, left)
        if size <= 0 or rel + size > len(win):
            return None
        return win if rel == 0 and size == len(win) else win[rel:rel + size]

    def scan_chunks(self, start: int = 0, *, validate: bool = True,
                    chunk_size: int = 64 << 20):
        """Walk and (optionally) CRC-check every entry from ``start``, without copying.

        Yields ``(buffer, base_position, scan)`` per chunk of about
        ``chunk_size`` bytes, where ``scan`` is the
        :class:`~kafkastore.records.BatchScan` of ``buffer`` and entry
        positions are relative to ``base_position``; stops after the chunk
        whose scan met an error or the end of the good entries. Used by
        recovery: the file is mapped read-only and checked in place, so its
        bytes are read once, at close to ``crc32c`` speed.

        The map assumes, as Kafka does with its ``.lock`` file, that no other
        process truncates the file while the log is open.
        """
        self._check_open()
        size = self._size
        if size <= start:
            return
        mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
        try:
            if hasattr(mm, "madvise"):
                mm.madvise(mmap.MADV_SEQUENTIAL)
            pos = start
            while pos < size:
                end = min(size, pos + chunk_size)
                scan = scan_batches(mm, pos, end, validate=validate)
                if scan.valid_bytes == 0 and scan.error is None and end < size:
                    # one entry larger than the chunk: widen the window to hold it
                    header = mm[pos:pos + LOG_OVERHEAD]
                    need = _PREFIX.unpack(header)[1] + LOG_OVERHEAD if len(header) == \
                        LOG_OVERHEAD else 0
                    if need <= end - pos or pos + need > size:
                        end = size
                    else:
                        end = pos + need
                    scan = scan_batches(mm, pos, end, validate=validate)
                scan.position -= pos      # relative to the chunk, as documented
                if scan.error is not None:
                    # its traceback holds the scanner's frame and so a view of the map,
                    # which would keep close() below from unmapping it
                    scan.error.__traceback__ = None
                yield mm, pos, scan
                if scan.error is not None or scan.valid_bytes == 0:
                    return
                pos += scan.valid_bytes
                if pos < end and end == size:
                    return  # a partial entry at the end of the file
        finally:
            try:
                mm.close()
            except BufferError:
                pass  # a caller still holds a view of the map: it is unmapped with the last one


def read_chunks(read, start: int, end: int, chunk_size: int, *, validate: bool = True):
    """Scan the entries of ``[start, end)`` of a file through a bounded buffer.

    ``read(position, size)`` returns the bytes there (a :meth:`FileRecords.read`, or an
    ``os.pread`` of a file opened read-only). Yields ``(position, data, scan)`` per read
    of about ``chunk_size`` bytes: the :class:`~kafkastore.records.BatchScan` of ``data``,
    which starts at file ``position``. An entry larger than the buffer gets a read of its
    own size (never more than the bytes left before ``end``). Stops after a chunk whose
    scan met an error (``scan.error``), or in front of an entry that runs past ``end``
    (the caller sees the walk end before ``end``): what to make of those is the caller's.
    """
    position = start
    want = chunk_size
    while position < end:
        asked = min(want, end - position)
        data = read(position, asked)
        scan = scan_batches(data, validate=validate)
        if scan.valid_bytes == 0 and scan.error is None:
            need = _PREFIX.unpack_from(data)[1] + LOG_OVERHEAD \
                if len(data) >= LOG_OVERHEAD else 0
            if len(data) < asked or need <= len(data) or need > end - position:
                return   # a partial entry at the end (or the file is shorter than said)
            want = need
            continue
        yield position, data, scan
        if scan.error is not None:
            return
        position += scan.valid_bytes
        want = chunk_size


class StorageRecords(FileRecords):
    """A ``.log`` file read through the storage seam (:mod:`kafkastore.storage`): any
    file system, local or remote, read-only, with ranged reads only.

    The reading half of :class:`FileRecords` (``read``, ``walk``, ``walk_headers``,
    ``search_*``, ``slice``) over a :class:`~kafkastore.storage.RangeReader`; ``path``
    is the file's URI, for messages. Its size is the size when it was opened: bytes
    appended later are not seen. Writing methods raise :class:`KafkaStoreError`.

    Thread-safety: one thread at a time (a remote reader holds one connection).
    """

    __slots__ = ("_reader",)

    def __init__(self, reader, uri: str | None = None) -> None:
        super().__init__(uri or reader.path, -1, reader.size)
        self._reader = reader
        self._dirty = False

    @classmethod
    def open_uri(cls, storage, path: str) -> StorageRecords:
        """Open ``path`` of ``storage`` (raises
        :class:`~kafkastore.errors.StorageFileNotFoundError` if it is not there)."""
        return cls(storage.open(path), storage.uri(path))

    def read(self, position: int, size: int) -> bytes:
        self._check_open()
        end = min(self._size, position + size)
        if position < 0 or position >= end:
            return b""
        return self._reader.read(position, end - position)

    def _pread(self, size: int, position: int) -> bytes:
        # a walk's window on a file read in chunks stops at the end of the chunk it
        # starts in (at the next one's when too little of this one is left for a
        # header): the walk reads on only if the entry it looks for is not there, so it
        # never fetches a chunk the search does not reach
        bounds = self._reader.chunk_bounds(position)
        if bounds is not None:
            end = bounds[1]
            if end - position < _FIRST_READ:
                after = self._reader.chunk_bounds(end)
                end = after[1] if after is not None else position + size
            size = min(size, end - position)
        return self._reader.read(position, size)

    def chunk_bounds(self, position: int) -> tuple[int, int] | None:
        """:meth:`RangeReader.chunk_bounds <kafkastore.storage.RangeReader.chunk_bounds>`
        of the file's reader."""
        return self._reader.chunk_bounds(position)

    def search_with_data(self, target_offset: int, starting_position: int = 0,
                         read_size: int = 0, *, next_position: int = -1,
                         at_start: bool = False) -> tuple[EntryHeader | None, bytes | None]:
        """:meth:`FileRecords.search_with_data` with windowed ranged reads (the index
        hints only bound the walk here: each read is a request, not a syscall)."""
        self._check_open()
        window = read_size if _WINDOW <= read_size <= _PREFETCH_MAX else _WINDOW
        found = self._find(b"", starting_position, starting_position, self._size,
                           target_offset, window)
        if found is None:
            return None, None
        header, win_pos, win = found
        return header, self._data_in(win, header.position - win_pos, read_size,
                                     self._size - header.position)

    def scan_chunks(self, start: int = 0, *, validate: bool = True,
                    chunk_size: int = 8 << 20):
        """:meth:`FileRecords.scan_chunks` through bounded ranged reads (no mapping)."""
        self._check_open()
        for pos, data, scan in read_chunks(self.read, start, self._size, chunk_size,
                                           validate=validate):
            yield data, pos, scan
            if scan.error is not None:
                return

    def fileno(self) -> int:
        raise KafkaStoreError(f"{self._path} is not a local file", path=self._path)

    def _read_only(self, *args, **kw):
        raise KafkaStoreError(f"{self._path} is opened read-only through the storage seam",
                              path=self._path)

    append = truncate_to = trim = rename_to = delete_if_exists = _read_only
    set_last_modified = last_modified = _read_only

    def flush(self) -> None:
        """Nothing to write."""

    def close(self) -> None:
        self.close_handlers()

    def close_handlers(self) -> None:
        if not self._closed:
            self._closed = True
            self._reader.close()


class LogSlice:
    """A range of a ``.log`` file: what :meth:`Log.read` returns, read lazily.

    Holds the :class:`FileRecords`, a ``position`` and a ``size``; nothing
    is read until asked. The range starts at an entry boundary and may end
    inside an entry: readers skip a partial trailing entry, as Kafka's
    consumers do. ``first_offset`` is the offset that was asked for, so
    records below it (the range starts at the batch that holds it) can be
    filtered by :meth:`records`.
    """

    __slots__ = ("file", "position", "size", "first_offset", "first_entry_incomplete", "_data",
                 "_generation", "aborted_transactions")

    def __init__(self, file: FileRecords, position: int, size: int,
                 first_offset: int | None = None, first_entry_incomplete: bool = False,
                 data: bytes | None = None) -> None:
        self.file = file
        self.position = position
        self.size = size
        self._generation = len(file._truncations)   # (file.truncations, on the read path)
        self.first_offset = first_offset
        self.first_entry_incomplete = first_entry_incomplete
        self._data = data if data is not None and len(data) == size else None
        # a read_committed read's aborted transactions (txn_index.AbortedTxn), else None
        self.aborted_transactions = None

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (f"LogSlice(path={self.file.path!r}, position={self.position}, "
                f"size={self.size})")

    def to_bytes(self) -> bytes:
        """The bytes of the range (one ``pread``)."""
        if self.size == 0:
            return b""
        if self._data is not None:
            return self._data
        data = self.file.read(self.position, self.size)
        if self.file.truncations != self._generation:
            # the file was truncated since this slice was taken (a follower's cut,
            # possibly followed by new appends): keep only the bytes below the cut, the
            # slice as it was then (a partial last entry is skipped by every reader)
            cut = self.file.stable_size(self._generation)
            data = data[:max(0, cut - self.position)]
        return data

    def batches(self, *, validate: bool = True):
        """The complete entries of the range as batch objects.

        With ``validate`` (the default, as a Kafka consumer's ``check.crcs``)
        each batch's CRC is checked before it is yielded.
        """
        data = self.to_bytes()
        try:
            yield from iter_batches(data, validate=validate)
        except KafkaStoreError as exc:
            raise exc.with_context(path=self.file.path, position_base=self.position) from None

    def records(self, *, validate: bool = True, include_control: bool = False):
        """Every record of the complete entries, from ``first_offset`` on; for a
        read_committed read (``aborted_transactions`` set) without the records of
        aborted transactions, as Kafka's consumer drops them."""
        start = self.first_offset
        txn_filter = None if self.aborted_transactions is None else \
            AbortedTransactionFilter(self.aborted_transactions)
        for batch in self.batches(validate=validate):
            if txn_filter is not None and not txn_filter.keep(batch):
                continue
            if batch.is_control and not include_control:
                continue
            if start is not None and batch.last_offset < start:
                continue
            try:
                for record in batch:
                    if start is None or record.offset >= start:
                        yield record
            except KafkaStoreError as exc:
                raise exc.with_context(path=self.file.path,
                                       position_base=self.position) from None

    def sendfile(self, sock) -> int:
        """Send the range to a socket with ``os.sendfile`` (zero copy); bytes sent."""
        out = sock.fileno() if hasattr(sock, "fileno") else sock
        fs = _fileio.fs
        fd = self.file.fileno()
        sent = 0
        while sent < self.size:
            n = fs.sendfile(out, fd, self.position + sent, self.size - sent)
            if n == 0:
                break
            sent += n
        return sent
