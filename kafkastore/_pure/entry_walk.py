"""Walk the entry headers of a ``.log`` file held in a buffer.

Pure-Python twin of ``kafkastore/_ext/entry_walk.pyx``: same names, same
results. It is the reference and the test oracle for the compiled kernel.

A ``.log`` file is a sequence of entries, each an 8-byte offset and a 4-byte
size followed by ``size`` bytes (Kafka's ``FileLogInputStream``). The walk
reads only headers: the 17 bytes up to the magic byte, plus for a v2 batch its
``lastOffsetDelta`` and ``maxTimestamp`` (43 bytes in all) and for a v1
message its timestamp (26 bytes). It never reads records and checks no CRC.

:func:`find_entry` is the step every file walk is built from: the header
search of a read (``FileRecords.searchForOffsetWithSize``), the walks of
recovery-free scans, and the largest-timestamp rescan. The caller holds a
window of the file (``buffer``, starting at some file position) and says
where the file's logical end is relative to that window (``limit``, which
may lie past the window's end). The result says whether an entry was found,
whether the window ran out first (the caller reads the next window from the
returned position), whether the file ended, or whether a size field is
corrupt. Nothing past ``len(buffer)`` is read, whatever the bytes hold.
"""

from __future__ import annotations

from bisect import bisect_right

from kafkastore._pure.reader import (
    ENTRY_PREFIX,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32,
    INT64,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_ENTRY_SIZE,
    wrap64,
)
from kafkastore._pure.index_search import KEY, OFFSET_ENTRY_SIZE, OFFSET_INDEX, \
    lower_entry_and_next

__all__ = ["FOUND", "NEED_MORE", "END", "CORRUPT", "find_entry", "locate_read", "read_at",
           "read_segment"]

#: ``find_entry`` statuses.
FOUND = 0       # an entry whose last offset >= target: its header fields follow
NEED_MORE = 1   # the next header is not wholly in the window: read from ``position``
END = 2         # the file ends (fewer than 17 bytes, or an entry running past it)
CORRUPT = 3     # a size field below 14 at ``position`` (``size`` holds it)

_V2_HEADER = MAX_TIMESTAMP_OFFSET + 8      # a v2 header up to the end of maxTimestamp
_V1_HEADER = LEGACY_TIMESTAMP_OFFSET + 8   # a v1 message header up to its key length


def find_entry(buffer, position: int, limit: int, target_offset: int):
    """Walk ``buffer`` from ``position`` to the first entry whose last offset is
    ``>= target_offset``.

    ``position`` may lie past the buffer's end (the entry before it did not
    fit): the answer is then ``NEED_MORE`` or ``END``. ``limit`` is the file's
    logical end relative to the buffer's start (it may exceed ``len(buffer)``).
    Returns a 7-tuple ``(status, position, size, magic, offset, last_offset,
    max_timestamp)``; ``position`` is relative to the buffer. For ``FOUND`` the
    others describe the entry (``size`` includes the 12-byte prefix;
    ``offset`` is the offset field, a legacy wrapper's last inner offset; a v2
    batch's ``last_offset`` is ``offset + lastOffsetDelta`` wrapped to int64 as
    Java computes it; ``max_timestamp`` is -1 for magic 0 and for entries too
    short to hold it). For ``NEED_MORE`` and ``END`` only ``position`` means anything;
    for ``CORRUPT``, ``size`` is the raw size field and ``offset`` the offset.
    """
    view = memoryview(buffer).cast("B") if not isinstance(buffer, (bytes, bytearray)) else buffer
    have = len(view)
    if position < 0:
        raise ValueError(f"negative position {position}")
    pos = position
    while True:
        if pos >= limit - HEADER_SIZE_UP_TO_MAGIC:
            return END, pos, 0, 0, 0, 0, 0
        if pos + HEADER_SIZE_UP_TO_MAGIC > have:
            return NEED_MORE, pos, 0, 0, 0, 0, 0
        offset, size = ENTRY_PREFIX.unpack_from(view, pos)
        if size < MIN_ENTRY_SIZE:
            return CORRUPT, pos, size, 0, offset, 0, 0
        if pos > limit - LOG_OVERHEAD - size:
            return END, pos, 0, 0, 0, 0, 0
        entry = size + LOG_OVERHEAD
        magic = view[pos + MAGIC_OFFSET]
        if magic >= 2:
            if entry >= _V2_HEADER:
                if pos + _V2_HEADER > have:
                    return NEED_MORE, pos, 0, 0, 0, 0, 0
                last = wrap64(offset + INT32.unpack_from(view, pos + LAST_OFFSET_DELTA_OFFSET)[0])
                max_ts = INT64.unpack_from(view, pos + MAX_TIMESTAMP_OFFSET)[0]
            else:  # an entry too short for a v2 header: report what is there
                last, max_ts = offset, -1
        else:
            last = offset
            if magic == 1 and entry >= _V1_HEADER:
                if pos + _V1_HEADER > have:
                    return NEED_MORE, pos, 0, 0, 0, 0, 0
                max_ts = INT64.unpack_from(view, pos + LEGACY_TIMESTAMP_OFFSET)[0]
            else:
                max_ts = -1
        if last >= target_offset:
            return FOUND, pos, entry, magic, offset, last, max_ts
        pos += entry


def locate_read(index, entries: int, base_offset: int, target_offset: int, pread, fd,
                stop: int, window: int):
    """A read's index lookup and header search in one call, in the common case.

    ``index`` is an offset index's buffer holding ``entries`` entries (capped to what it
    holds) relative to ``base_offset``; ``pread(fd, size, position)`` reads the
    segment's ``.log`` file, whose logical end is ``stop``. Kafka's
    ``LogSegment.read`` looks up the largest index entry <= ``target_offset`` and walks
    the batch headers from its position (``FileRecords.searchForOffsetWithSize``); in
    the common case one window of at most ``window`` bytes settles it:

    * read at the next entry's position, when the entry found does not map the target
      itself: the batch there is the one wanted when it is a v2 batch whose base
      offset is <= the target (the index records a batch's *last* offset, so the next
      entry's batch ends at or past the target), with no walk;
    * else (the entry maps the target, there is no entry after it, or the batch at the
      next one starts past the target: a second read then) the walk from the entry's
      position (0 without one), as Kafka's, within the window, which is then sliced
      to start at the batch found.

    Returns ``(position, entry_size, window)``: the batch holding the target, its size
    with the 12-byte prefix, and the bytes read from ``position`` on (what the pread
    gave: the caller keeps them when they hold its read). Returns None when the
    common case does not apply (a sparse or stale index, a legacy entry from the next
    position, a header not wholly in the window, any size field out of bounds): the
    caller takes the general path, which reports corruption. Nothing outside ``index`` or the window is read, and no
    index position is trusted before it is checked against ``[0, stop)``.
    """
    rel = target_offset - base_offset
    if not -(1 << 31) <= rel < (1 << 31):
        return None
    entries = min(entries, len(index) // OFFSET_ENTRY_SIZE)
    slot, key, position, _, next_position = lower_entry_and_next(
        index, entries, OFFSET_INDEX, rel, KEY)
    at_start = slot >= 0 and key == rel
    if slot + 1 >= entries:
        next_position = -1
    if not at_start and position < next_position < stop:
        found = _walk_window(pread, fd, next_position, stop, window, target_offset)
        # from the next entry's position only a v2 batch says by its base offset that
        # it holds the target (a legacy wrapper's offset is its last inner offset)
        if found is not None and found[1] == 0 and found[3] >= 2 \
                and found[4] <= target_offset:
            return next_position, found[2], found[0]
    found = _walk_window(pread, fd, position, stop, window, target_offset)
    if found is None:
        return None
    win, pos, size = found[:3]
    return (position + pos, size, win[pos:]) if pos else (position, size, win)


def _walk_window(pread, fd, at: int, stop: int, window: int, target_offset: int):
    """``(window, position, size, magic, offset)``: the ``min(window, stop - at)`` bytes
    read at ``at`` and the target's entry the walk from their start finds in them, or
    None."""
    if at < 0 or at >= stop:   # an index position is not trusted before this check
        return None
    left = stop - at
    win = pread(fd, min(window, left), at)
    if type(win) is not bytes:
        return None
    status, pos, size, magic, offset, _, _ = find_entry(win, 0, left, target_offset)
    return (win, pos, size, magic, offset) if status == FOUND else None


def read_at(segments, bases, target_offset: int, max_size: int, min_one_message: bool, fs,
            plan):
    """A lock-free read's segment choice, index lookup and header check in one call: the
    slice of :func:`read_segment` from the last of ``segments`` whose base offset (in
    ``bases``, ascending, one per segment) is <= ``target_offset``, bounded by the file's
    size; None when there is no such segment, ``max_size`` < 0 or the segment's read
    does not apply (Kafka's ``LocalLog.read``: the floor segment of the offset; the
    caller takes the general path, which goes on to the next segment when the offset is
    past this one's data)."""
    if max_size < 0:
        return None
    i = bisect_right(bases, target_offset)
    if i == 0 or i > len(segments):
        return None
    return read_segment(segments[i - 1], target_offset, max_size, None, min_one_message,
                        fs, plan)


def read_segment(segment, target_offset: int, max_size: int, max_position,
                 min_one_message: bool, fs, plan):
    """Kafka's ``LogSegment.read`` in the common case: the slice (``plan``'s
    ``new_slice(file, position, size, target_offset, first_entry_incomplete, data)``)
    starting at the batch holding ``target_offset``, at most ``max_size`` bytes (at
    least that batch if ``min_one_message``), ending before ``max_position`` (None: the
    file's size), with the bytes :func:`locate_read`'s window already holds.

    ``plan`` is ``(records_type, plain_fs, new_slice, min_window, max_window,
    os_pread)``: the segment's ``log`` must be exactly a ``records_type`` (a local
    file), reads go through ``fs.pread`` (``os_pread`` itself when ``type(fs) is
    plain_fs``), and the
    window is ``max_size`` when it lies in ``[min_window, max_window]``, else
    ``min_window``.

    The read-path fields it reads (the one place outside their classes that does, so
    that the common case is one compiled call): the segment's ``log``,
    ``_index_check_pending`` and ``_offset_index._index`` (the loaded offset index; on
    a segment's first read, ``offset_index`` maps and checks it, as the general path
    would); the index's ``_entries`` (read before ``_view``: see
    ``abstract_index._valid``), ``_view`` and ``_base_offset``; the file's ``_closed``
    (never an index of a closed file is opened again: it may be deleted), ``_size`` and
    ``_fd``.

    None when the common case does not apply: a file of another type, a closed index
    or file (also when the file closed during the read: its bytes may come from a
    reused descriptor), ``max_size`` < 0, or :func:`locate_read` returning None. The
    caller then takes the general path.
    """
    records_type, plain_fs, new_slice, min_window, max_window, os_pread = plan
    if max_size < 0:
        return None
    log = segment.log
    if type(log) is not records_type or log._closed:
        return None
    index = None if segment._index_check_pending else segment._offset_index._index
    if index is None:   # a segment's first read: its index is mapped and checked now
        index = segment.offset_index
    entries = index._entries
    view = index._view
    if view is None:
        return None
    stop = log._size
    if max_position is None:
        max_position = stop
    window = max_size if min_window <= max_size <= max_window else min_window
    found = locate_read(view, entries, index._base_offset, target_offset,
                        os_pread if type(fs) is plain_fs else fs.pread, log._fd, stop,
                        window)
    if found is None or log._closed:
        return None
    position, header_size, data = found
    adjusted = max(max_size, header_size) if min_one_message else max_size
    if adjusted == 0:
        return new_slice(log, position, 0, target_offset, False, None)
    fetch = max(0, min(max_position - position, adjusted))
    if len(data) != fetch:
        data = data[:fetch] if len(data) > fetch else None
    return new_slice(log, position, fetch, target_offset, adjusted < header_size, data)
