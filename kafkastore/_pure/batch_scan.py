"""Walking a buffer of entries: ``read_batch``, ``iter_batches``, ``scan_batches``.

A log is entries back to back (``kafkastore/_pure/record_batch.py`` documents
the entry prefix); these functions dispatch each entry on its magic byte to
:class:`~kafkastore._pure.default_record_batch.RecordBatch` or
:class:`~kafkastore._pure.legacy_record.LegacyRecordBatch`, as Kafka's
``FileLogInputStream`` does. :func:`scan_batches` reads headers only, into
numpy columns (:class:`BatchScan`), for recovery and index building.

Thread safety: stateless; a :class:`BatchScan` is not changed after it is
returned.
"""

from __future__ import annotations

import zlib

import crc32c
import numpy as np

from kafkastore._pure.default_record_batch import RecordBatch
from kafkastore._pure.legacy_record import LegacyRecordBatch
from kafkastore._pure.reader import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    ENTRY_PREFIX,
    HEADER,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32,
    LEGACY_OVERHEAD_V1,
    LEGACY_V0,
    LEGACY_V1,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_ENTRY_SIZE,
    RECORD_BATCH_OVERHEAD,
    as_view,
    check_position,
    wrap64,
)
from kafkastore.errors import CorruptRecordError, InvalidCrcError

__all__ = ["BatchScan", "read_batch", "iter_batches", "scan_batches"]


def _bounds(view, start, end):
    n = len(view)
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise TypeError("start and end must be ints")
    if end is None or end > n:
        end = n
    if start < 0 or start > end:
        raise ValueError(f"start {start} is outside [0, {end}]")
    return start, end


def read_batch(buffer, position: int = 0, *,
               max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
    """The entry at ``position`` as a :class:`RecordBatch` or :class:`LegacyRecordBatch`.

    Raises :class:`CorruptRecordError` when fewer than 17 bytes remain, the
    size field is below 14, the entry is incomplete, or the magic is not 0-2.
    """
    view = as_view(buffer)
    check_position(position, len(view))
    avail = len(view) - position
    if avail < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError("entry header truncated", position=position)
    offset, size = ENTRY_PREFIX.unpack_from(view, position)
    if size < MIN_ENTRY_SIZE:
        raise CorruptRecordError(
            f"Record size {size} is smaller than the minimum record overhead "
            f"({MIN_ENTRY_SIZE})", position=position, offset=offset)
    magic = view[position + MAGIC_OFFSET]
    if magic == 2:
        return RecordBatch(view, position, max_decompressed_bytes=max_decompressed_bytes)
    if magic < 2:
        return LegacyRecordBatch(view, position,
                                 max_decompressed_bytes=max_decompressed_bytes)
    raise CorruptRecordError(f"Unsupported magic byte {magic}", position=position,
                             offset=offset)


def iter_batches(buffer, start: int = 0, end: int | None = None, *, validate: bool = True,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
    """Yield every entry of ``buffer[start:end]`` as a batch object.

    Follows Kafka's ``FileLogInputStream``: fewer than 18 bytes left, or an
    entry that extends past ``end``, ends the iteration silently (a partial
    tail is what a crash leaves); a size field below 14 or an unknown magic
    raises :class:`CorruptRecordError`. With ``validate`` each batch's CRC is
    checked before it is yielded (:class:`InvalidCrcError`).
    """
    view = as_view(buffer)
    pos, end = _bounds(view, start, end)
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        size = INT32.unpack_from(view, pos + 8)[0]
        if size < MIN_ENTRY_SIZE:
            raise CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({MIN_ENTRY_SIZE})", position=pos)
        if size > end - pos - LOG_OVERHEAD:
            return
        batch = read_batch(view[:end], pos, max_decompressed_bytes=max_decompressed_bytes)
        if validate:
            batch.validate()
        yield batch
        pos += LOG_OVERHEAD + size


class BatchScan:
    """Result of :func:`scan_batches`: one row per entry, in numpy columns.

    Columns: ``position`` (int64), ``size`` (int64, 12-byte prefix
    included), ``magic`` (int8), ``base_offset`` (int64; -1 for a compressed
    legacy wrapper, whose first offset needs decompression), ``last_offset``
    (int64), ``max_timestamp`` (int64; -1 for magic 0), ``record_count``
    (int32; -1 for a compressed legacy wrapper).

    ``valid_bytes`` counts the bytes from ``start`` up to the end of the last
    good entry. ``error`` is None when the scan reached ``end`` or stopped at
    a partial tail, otherwise the :class:`CorruptRecordError` that stopped it.
    """

    __slots__ = ("position", "size", "magic", "base_offset", "last_offset",
                 "max_timestamp", "record_count", "valid_bytes", "error", "start", "end")

    def __len__(self):
        return len(self.position)

    @property
    def truncated(self) -> bool:
        """True when bytes follow the last good entry (partial or corrupt)."""
        return self.start + self.valid_bytes < self.end

    def __repr__(self):
        return (f"BatchScan(entries={len(self)}, valid_bytes={self.valid_bytes}, "
                f"error={self.error!r})")


_SCAN_COLUMNS = (
    ("position", np.int64), ("size", np.int64), ("magic", np.int8),
    ("base_offset", np.int64), ("last_offset", np.int64), ("max_timestamp", np.int64),
    ("record_count", np.int32),
)


def scan_batches(buffer, start: int = 0, end: int | None = None, *,
                 validate: bool = True) -> BatchScan:
    """Walk the entries of ``buffer[start:end]`` reading only their headers.

    Never raises for bad bytes: it stops at the first entry that is
    incomplete (``error`` None) or corrupt (``error`` set) and reports how
    many bytes were good. This is what recovery and index building use.
    With ``validate`` each entry's CRC is checked (CRC-32C for v2, CRC-32
    for v0/v1), as Kafka's ``LogSegment.recover`` does.
    """
    view = as_view(buffer)
    pos, end = _bounds(view, start, end)
    scan = BatchScan()
    scan.start, scan.end = pos, end
    rows = []
    error = None
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        offset, size = ENTRY_PREFIX.unpack_from(view, pos)
        if size < MIN_ENTRY_SIZE:
            error = CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({MIN_ENTRY_SIZE})", position=pos, offset=offset)
            break
        if size > end - pos - LOG_OVERHEAD:
            break
        magic = view[pos + MAGIC_OFFSET]
        try:
            if magic == 2:
                if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                    raise CorruptRecordError(
                        f"Record batch size {LOG_OVERHEAD + size} is smaller than the "
                        f"minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                        position=pos, offset=offset)
                h = HEADER.unpack_from(view, pos)
                if validate:
                    computed = crc32c.crc32c(
                        view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + size])
                    if computed != h[4]:
                        raise InvalidCrcError(
                            f"Record batch is corrupt (stored crc = {h[4]}, computed crc "
                            f"= {computed})", stored=h[4], computed=computed,
                            position=pos, offset=offset)
                rows.append((pos, LOG_OVERHEAD + size, 2, offset,
                             wrap64(offset + h[6]), h[8], h[12]))
            elif magic < 2:
                if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
                    raise CorruptRecordError(
                        f"Record size {size} is smaller than the minimum record overhead "
                        f"for magic {magic}", position=pos, offset=offset)
                crc, _, attributes = LEGACY_V0.unpack_from(view, pos + LOG_OVERHEAD)
                if validate:
                    computed = zlib.crc32(view[pos + LOG_OVERHEAD + 4:pos + LOG_OVERHEAD + size])
                    if computed != crc:
                        raise InvalidCrcError(
                            f"Record is corrupt (stored crc = {crc}, computed crc = "
                            f"{computed})", stored=crc, computed=computed,
                            position=pos, offset=offset)
                ts = -1 if magic == 0 else LEGACY_V1.unpack_from(view, pos + LOG_OVERHEAD)[3]
                compressed = attributes & CODEC_MASK
                rows.append((pos, LOG_OVERHEAD + size, magic,
                             -1 if compressed else offset, offset, ts,
                             -1 if compressed else 1))
            else:
                raise CorruptRecordError(f"Unsupported magic byte {magic}", position=pos,
                                         offset=offset)
        except CorruptRecordError as err:
            error = err
            break
        pos += LOG_OVERHEAD + size
    for i, (name, dtype) in enumerate(_SCAN_COLUMNS):
        setattr(scan, name, np.array([r[i] for r in rows], dtype=dtype))
    scan.valid_bytes = (int(scan.position[-1]) + int(scan.size[-1]) - scan.start) if rows else 0
    scan.error = error
    return scan
