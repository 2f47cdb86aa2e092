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

__all__ = ["FOUND", "NEED_MORE", "END", "CORRUPT", "find_entry"]

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
