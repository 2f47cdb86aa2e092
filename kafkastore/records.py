"""Kafka's record formats: read, scan, decode to columns, and write.

This is kafkastore's format layer, the counterpart of Kafka's
``org.apache.kafka.common.record``. It knows bytes, not files: every function
takes a bytes-like buffer holding entries back to back, exactly as they sit
in a ``.log`` segment or a fetch response.

Reading
    :func:`iter_batches` yields one batch object per entry, of any magic
    (:class:`RecordBatch` for magic 2, :class:`LegacyRecordBatch` for magic
    0 and 1); iterating a batch yields :class:`Record` objects.
    :func:`iter_records` flattens that. :func:`scan_batches` reads only the
    headers, for recovery and index building. :func:`decode_columns` decodes
    records straight into numpy arrays, the fast path for analytics.

Writing
    :func:`encode_batch` builds one batch (any magic, any codec) from
    ``(key, value[, timestamp[, headers]])`` tuples or record-like objects;
    :func:`encode_control_batch` builds a transaction marker.

Untrusted input raises :class:`~kafkastore.errors.CorruptRecordError` (or a
subclass) with the entry's byte position; a compressed payload can never
inflate past ``max_decompressed_bytes``
(:class:`~kafkastore.errors.RecordTooLargeError`).

The heavy lifting is done by the ``record_batch`` kernel, compiled or pure
Python as :data:`kafkastore._kernels.BACKEND` says; this module adds the
user-facing defaults, the codecs and the legacy writer.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Union

import crc32c
import numpy as np

from kafkastore import compression as _compression
from kafkastore._kernels import column_encode as _ce
from kafkastore._kernels import record_batch as _rb
from kafkastore._kernels import varint as _varint
from kafkastore.batch_header import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    ENTRY_PREFIX,
    INT32,
    INT64,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    UINT32,
    V2_HEADER,
)
from kafkastore.errors import CorruptRecordError
from kafkastore.types import CompressionType, ControlRecordType, TimestampType

# What users need; the varint codecs, the v2 header struct and the batch assembly the
# cleaner uses stay importable by name for kafkastore's own layers but are not the API.
__all__ = [
    "Record",
    "RecordBatch",
    "LegacyRecordBatch",
    "Batch",
    "BatchScan",
    "RecordColumns",
    "ControlRecord",
    "CompressionType",
    "TimestampType",
    "ControlRecordType",
    "iter_batches",
    "iter_records",
    "read_batch",
    "scan_batches",
    "decode_columns",
    "set_column_pool_limit",
    "encode_batch",
    "encode_columns",
    "encode_control_batch",
    "parse_control_record",
    "LOG_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "NO_TIMESTAMP",
]

# LOG_OVERHEAD (the 12 bytes before every entry), RECORD_BATCH_OVERHEAD (the v2 header's
# size: the records start there) and V2_HEADER (its struct) are kafkastore.batch_header's,
# importable from here as before.
#: Kafka's "no timestamp" value.
NO_TIMESTAMP = -1
#: Default bound on what one compressed payload may inflate to (128 MiB),
#: far above Kafka's default ``max.message.bytes`` of 1 MiB.
DEFAULT_MAX_DECOMPRESSED_BYTES = _compression.DEFAULT_MAX_DECOMPRESSED_BYTES

Record = _rb.Record
RecordBatch = _rb.RecordBatch
LegacyRecordBatch = _rb.LegacyRecordBatch
BatchScan = _rb.BatchScan
#: Either kind of batch object.
Batch = Union[RecordBatch, LegacyRecordBatch]

encode_varint = _varint.encode_varint
encode_varlong = _varint.encode_varlong
decode_varint = _varint.decode_varint
decode_varlong = _varint.decode_varlong
size_of_varint = _varint.size_of_varint
size_of_varlong = _varint.size_of_varlong


def _decompress(codec: int, data, max_size: int, magic: int) -> bytes:
    return _compression.decompress(codec, data, max_size=max_size, magic=magic)


_rb.set_decompressor(_decompress)


# -- reading --------------------------------------------------------------------


def iter_batches(
    buffer,
    start: int = 0,
    end: int | None = None,
    *,
    validate: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Iterator[Batch]:
    """Yield each entry of ``buffer[start:end]`` as a batch object.

    Parameters
    ----------
    buffer : bytes-like
        Any bytes-like object (bytes, bytearray, memoryview, mmap, numpy
        uint8 array). Batches keep zero-copy views into it.
    start, end : int
        Byte range to walk; ``end`` defaults to the end of the buffer.
    validate : bool
        Check each batch's CRC before yielding it (CRC-32C for magic 2,
        CRC-32 for magic 0/1) and raise :class:`~kafkastore.errors.InvalidCrcError`
        on a mismatch. Tools that must show corrupt batches pass False.
    max_decompressed_bytes : int
        Bound on what one compressed payload may inflate to.

    Notes
    -----
    As Kafka's ``FileLogInputStream`` does, a partial entry at the end (what
    a crash mid-write leaves) ends the iteration silently; use
    :func:`scan_batches` to learn whether one was there. An entry whose size
    field is below 14 bytes or whose magic is not 0-2 raises
    :class:`~kafkastore.errors.CorruptRecordError`.
    """
    return _rb.iter_batches(buffer, start, end, validate=validate,
                            max_decompressed_bytes=max_decompressed_bytes)


def read_batch(buffer, position: int = 0, *,
               max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Batch:
    """The single entry at ``position`` (no CRC check; call ``validate()``)."""
    return _rb.read_batch(buffer, position, max_decompressed_bytes=max_decompressed_bytes)


def iter_records(
    buffer,
    start: int = 0,
    end: int | None = None,
    *,
    validate: bool = True,
    include_control: bool = False,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Iterator[Record]:
    """Yield every record of every batch, as a consumer would see them.

    Control batches (transaction markers) are skipped unless
    ``include_control``, as Kafka consumers skip them.
    """
    for batch in iter_batches(buffer, start, end, validate=validate,
                              max_decompressed_bytes=max_decompressed_bytes):
        if batch.is_control and not include_control:
            continue
        yield from batch


def scan_batches(buffer, start: int = 0, end: int | None = None, *,
                 validate: bool = True) -> BatchScan:
    """Read only the entry headers of ``buffer[start:end]``; see :class:`BatchScan`.

    Never raises for bad bytes: the scan stops at the first incomplete entry
    (``error`` None) or corrupt one (``error`` holds the exception), and
    ``valid_bytes`` says how far the good entries reach. This is the walk
    that recovery truncates by and that index building uses.
    """
    return _rb.scan_batches(buffer, start, end, validate=validate)


class RecordColumns:
    """Records decoded into numpy arrays, one row per record.

    Columns (numpy arrays):

    * ``offset``, ``timestamp``: int64.
    * ``timestamp_type``: int8, :class:`TimestampType` values.
    * ``key_null``, ``value_null``: bool, True where the key (value) is null;
      its span is then empty.
    * ``header_count``: int32.

    Keys and values come in one of two layouts (:attr:`is_view` says which).

    The copy layout (``decode_columns(..., copy=True)``, the default), Arrow's
    binary layout:

    * ``key_offsets``, ``value_offsets``: int64, ``n + 1`` Arrow-style offsets:
      record ``i``'s key is ``key_data[key_offsets[i]:key_offsets[i + 1]]``.
    * ``key_data``, ``value_data``: uint8, all keys (values) back to back,
      copied out of the records.

    The view layout (``copy=False``): nothing is copied, each key and value
    stays where the record holds it.

    * ``key_starts``, ``value_starts``: ``n`` positions, int32 when ``key_data``
      is below 2 GiB (half the bytes to write), else int64; ``key_lengths``,
      ``value_lengths``: int32, ``n``: record ``i``'s key is
      ``key_data[key_starts[i]:key_starts[i] + key_lengths[i]]`` (length 0
      for a null). ``key_offsets`` and ``value_offsets`` are None.
    * ``key_data``, ``value_data``: the same uint8 array. When every entry is
      an uncompressed v2 batch it is a view of the decoded buffer itself
      (``numpy.frombuffer``: its ``base`` keeps the buffer alive, and a
      start is a position in the whole buffer, not from ``start``);
      otherwise one buffer holding every records section (compressed ones
      as inflated) and the legacy keys and values, made by the decoder.

    Why start/length pairs rather than Arrow's ``binary`` offsets: a
    record's value does not start where the previous one ended (the next
    record's header lies between), and Arrow's ``binary`` needs its values
    back to back, so ``n + 1`` offsets into the source cannot describe them.
    Arrow's ``binary_view`` can (a 16-byte view per value: length, a 4-byte
    prefix, buffer index, offset; values up to 12 bytes inline):
    :meth:`to_arrow` builds those views from these arrays over the very
    same buffer, so pyarrow reads the source without a copy. Spark's Arrow
    path (the Python data source compares the batch's schema with
    ``binary``) takes only the back-to-back layout, so the Spark reader
    decodes with the copy layout: one copy either way, made once, straight
    into the buffers Spark gets. The views keep their source referenced:
    a ``bytearray`` the caller changes afterwards changes the columns (and
    cannot be resized while they live), an ``mmap`` cannot be closed while
    they live (``BufferError``); copy with :meth:`contiguous` to let go.

    With ``decode_columns(..., headers=True)`` the headers themselves (``h``
    of them in all), else None:

    * ``header_offsets``: int64, ``n + 1``: record ``i``'s headers are header
      entries ``header_offsets[i]:header_offsets[i + 1]``.
    * ``header_key_offsets``, ``header_value_offsets``: int64, ``h + 1``,
      offsets into ``header_key_data`` / ``header_value_data`` (uint8). Keys
      are the stored bytes (UTF-8 in Kafka, not decoded here); they are
      never null.
    * ``header_value_null``: bool, ``h``, True where the value is null.

    :meth:`headers` gives one record's headers as :attr:`Record.headers` does.
    """

    _COLUMNS = (
        "offset", "timestamp", "timestamp_type", "key_data", "key_null",
        "value_data", "value_null", "header_count",
    )
    # one of the two layouts: the other's names are None
    _LAYOUT_COLUMNS = (
        "key_offsets", "value_offsets",
        "key_starts", "key_lengths", "value_starts", "value_lengths",
    )
    _HEADER_COLUMNS = (
        "header_offsets", "header_key_offsets", "header_key_data", "header_value_offsets",
        "header_value_data", "header_value_null",
    )
    __slots__ = _COLUMNS + _LAYOUT_COLUMNS + _HEADER_COLUMNS

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        for name in self._COLUMNS:
            setattr(self, name, columns[name])
        for name in self._LAYOUT_COLUMNS + self._HEADER_COLUMNS:
            setattr(self, name, columns.get(name))

    def __len__(self) -> int:
        return len(self.offset)

    @property
    def is_view(self) -> bool:
        """True in the view layout (``copy=False``): keys and values left in place."""
        return self.key_offsets is None

    def key(self, i: int) -> bytes | None:
        """Record ``i``'s key as bytes (None when null); a negative ``i`` counts from
        the end. Raises IndexError out of range."""
        return self._item(self._row(i), self.key_data, self.key_null, self.key_offsets,
                          self.key_starts, self.key_lengths)

    def value(self, i: int) -> bytes | None:
        """Record ``i``'s value as bytes (None when null); ``i`` as :meth:`key` takes it."""
        return self._item(self._row(i), self.value_data, self.value_null, self.value_offsets,
                          self.value_starts, self.value_lengths)

    def contiguous(self) -> RecordColumns:
        """These columns in the copy layout (self if already in it).

        Gathers the keys and values back to back, as ``decode_columns(...,
        copy=True)`` gives them; the result no longer references the source.
        """
        if not self.is_view:
            return self
        columns = {name: getattr(self, name) for name in self.__slots__
                   if name not in self._LAYOUT_COLUMNS}
        for name in ("key", "value"):
            starts = getattr(self, name + "_starts")
            lengths = getattr(self, name + "_lengths").astype(np.int64)
            offsets = np.zeros(len(starts) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            # byte j of the gathered data comes from starts[i] + (j - offsets[i])
            index = np.arange(offsets[-1], dtype=np.int64) + np.repeat(
                starts - offsets[:-1], lengths)
            columns[name + "_offsets"] = offsets
            columns[name + "_data"] = getattr(self, name + "_data")[index]
        return RecordColumns(columns)

    def headers(self, i: int) -> tuple[tuple[str, bytes | None], ...]:
        """Record ``i``'s headers, as :attr:`Record.headers` gives them.

        ``(key, value)`` pairs: the key decoded from UTF-8 with
        ``surrogateescape`` (invalid bytes survive, as in :class:`Record`),
        the value bytes or None. Raises ValueError unless the columns were
        decoded with ``headers=True``.
        """
        if self.header_offsets is None:
            raise ValueError("headers were not decoded: pass headers=True to decode_columns")
        i = self._row(i)
        key_offsets, key_data = self.header_key_offsets, self.header_key_data
        value_offsets, value_data = self.header_value_offsets, self.header_value_data
        value_null = self.header_value_null
        out = []
        for j in range(int(self.header_offsets[i]), int(self.header_offsets[i + 1])):
            key = key_data[key_offsets[j]:key_offsets[j + 1]].tobytes().decode(
                "utf-8", "surrogateescape")
            value = (None if value_null[j]
                     else value_data[value_offsets[j]:value_offsets[j + 1]].tobytes())
            out.append((key, value))
        return tuple(out)

    def _row(self, i: int) -> int:
        """Record number ``i`` checked, counted from the end when negative (as a list's)."""
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record {i} out of range for {n} records")
        return i

    @staticmethod
    def _item(i, data, null, offsets, starts, lengths):
        """Record ``i``'s bytes in ``data``, None when ``null``: its span from the copy
        layout's ``offsets`` or, in the view layout (``offsets`` None), from ``starts`` and
        ``lengths`` (the one difference between the layouts)."""
        if null[i]:
            return None
        if offsets is None:
            start = int(starts[i])
            return data[start:start + int(lengths[i])].tobytes()
        return data[offsets[i]:offsets[i + 1]].tobytes()

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table``, the keys' and values' bytes not copied.

        The copy layout gives ``large_binary`` key and value columns over
        ``key_data``/``value_data``. The view layout gives ``binary_view``
        columns whose one data buffer is ``key_data`` (the source itself for
        uncompressed batches; only the 16-byte views are built, with Arrow's
        inline copy of values up to 12 bytes); a data buffer of 2 GiB or more
        (past a view's int32 offset) is gathered into ``large_binary``
        instead. Needs the ``spark`` extra (pyarrow).
        """
        import pyarrow as pa

        n = len(self)
        if self.is_view and len(self.key_data) >= 1 << 31:
            return self.contiguous().to_arrow()

        def validity(null):
            return pa.py_buffer(np.packbits(~null, bitorder="little")) if null.any() else None

        def binary(data, offsets, null):
            return pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), n, [validity(null), pa.py_buffer(offsets), pa.py_buffer(data)],
                null_count=int(null.sum()))

        def binary_view(data, starts, lengths, null):
            return pa.Array.from_buffers(
                pa.binary_view(), n, [validity(null), pa.py_buffer(_arrow_views(
                    data, starts, lengths)), pa.py_buffer(data)],
                null_count=int(null.sum()))

        if self.is_view:
            key = binary_view(self.key_data, self.key_starts, self.key_lengths, self.key_null)
            value = binary_view(self.value_data, self.value_starts, self.value_lengths,
                                self.value_null)
        else:
            key = binary(self.key_data, self.key_offsets, self.key_null)
            value = binary(self.value_data, self.value_offsets, self.value_null)
        return pa.table({
            "offset": self.offset,
            "timestamp": self.timestamp,
            "timestamp_type": self.timestamp_type,
            "key": key,
            "value": value,
            "header_count": self.header_count,
        })

    def __repr__(self) -> str:
        return f"RecordColumns(records={len(self)})"


def _arrow_views(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Arrow's 16-byte ``binary_view`` structs for the values ``data[starts:+lengths]``
    (``data`` below 2 GiB, buffer 0): length, then the value inline if at most 12
    bytes, else its first 4 bytes, buffer index 0 and its offset (Arrow's columnar
    format, "Variable-size Binary View Layout")."""
    n = len(starts)
    views = np.zeros((n, 4), dtype=np.int32)
    views[:, 0] = lengths
    inline = np.zeros((n, 12), dtype=np.uint8)
    if n and len(data):
        # the first min(length, 12) bytes of each value (those past its end are 0)
        k = np.arange(12, dtype=np.int64)
        index = np.minimum(starts[:, None] + k, len(data) - 1)
        inline[:] = np.where(k < lengths[:, None], data[index], 0)
    raw = views.view(np.uint8).reshape(n, 16)
    raw[:, 4:16] = inline
    long = lengths > 12
    views[long, 2] = 0                       # buffer index (bytes 8..11: were inline)
    views[long, 3] = starts[long]            # offset into that buffer
    return views


def decode_columns(
    buffer,
    start: int = 0,
    end: int | None = None,
    *,
    validate: bool = True,
    include_control: bool = False,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    headers: bool = False,
    copy: bool = True,
) -> RecordColumns:
    """Decode every record of ``buffer[start:end]`` into :class:`RecordColumns`.

    No Python object is made per record on the compiled backend. Walking,
    CRC checks and errors are those of :func:`iter_batches`; control batches
    are skipped unless ``include_control``. ``headers`` also decodes the
    header keys and values into columns (``header_offsets`` and the other
    ``header_*`` attributes, Arrow ``list<struct<key, value>>`` layout);
    without it only ``header_count`` says anything about them.

    ``copy`` picks the layout of keys and values (see :class:`RecordColumns`):
    True (the default) copies them back to back (``key_offsets``/
    ``key_data``, Arrow's ``binary``); False leaves them where they are and
    gives their positions (``key_starts``/``key_lengths`` into ``key_data``,
    a view of ``buffer`` when it holds only uncompressed v2 batches), which
    skips the copy: about a quarter less time for a segment of small
    records. Headers, when decoded, are copied in either layout.
    """
    return RecordColumns(_rb.decode_columns(
        buffer, start, end, validate=validate, include_control=include_control,
        max_decompressed_bytes=max_decompressed_bytes, headers=headers, copy=copy))


def set_column_pool_limit(limit: int) -> int:
    """Bound the memory :func:`decode_columns` keeps for reuse; return the old bound.

    Large column buffers of results that have been freed keep their pages
    and serve the next call, so decoding segment after segment does not
    fault in and zero fresh memory each time. ``limit`` counts written bytes
    (default 256 MiB); 0 turns the pool off and releases what it holds. A
    result that is still referenced never shares memory with a new one.
    """
    return _rb.set_column_pool_limit(limit)


# -- control records --------------------------------------------------------------


class ControlRecord(NamedTuple):
    """A decoded control record (Kafka's ``ControlRecordType`` + ``EndTransactionMarker``).

    ``coordinator_epoch`` is set for ABORT and COMMIT markers only.
    """

    type: ControlRecordType
    version: int
    coordinator_epoch: int | None


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_TXN_MARKER = struct.Struct(">hi")  # version, coordinatorEpoch


def parse_control_record(record: Record) -> ControlRecord:
    """Decode the key (and, for transaction markers, the value) of a control record.

    Raises :class:`~kafkastore.errors.CorruptRecordError` for a key shorter
    than 4 bytes, a negative key version, or a marker value shorter than
    6 bytes or with a negative version, as Kafka does. Unknown types map to
    :attr:`ControlRecordType.UNKNOWN`.
    """
    key = record.key
    if key is None or len(key) < 4:
        raise CorruptRecordError("Invalid control record key: fewer than 4 bytes",
                                 offset=record.offset)
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for control record: {version}",
                                 offset=record.offset)
    try:
        ctype = ControlRecordType(type_id)
    except ValueError:
        ctype = ControlRecordType.UNKNOWN
    epoch = None
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        value = record.value
        if value is None or len(value) < 6:
            raise CorruptRecordError("Invalid transaction marker value: fewer than 6 bytes",
                                     offset=record.offset)
        marker_version, epoch = _TXN_MARKER.unpack_from(value)
        if marker_version < 0:
            raise CorruptRecordError(
                f"Invalid version found for end transaction marker: {marker_version}",
                offset=record.offset)
    return ControlRecord(ctype, version, epoch)


def control_marker(batch) -> tuple[ControlRecord, int] | None:
    """The control record of a control batch and its timestamp: ``(ControlRecord,
    timestamp)`` of its first record, or None when it holds none (the cleaner emptied
    it). ``batch`` is a batch object or the bytes of one batch."""
    if not hasattr(batch, "magic"):
        batch = next(iter(iter_batches(batch, validate=False)), None)
        if batch is None:
            raise CorruptRecordError("A control batch shorter than its size")
    for record in batch:
        return parse_control_record(record), record.timestamp
    return None


# -- writing ----------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def encode_batch(
    records: Iterable[Any],
    *,
    magic: int = 2,
    base_offset: int = 0,
    compression: CompressionType | int | str | None = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    timestamp: int | None = None,
    max_timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    offsets: Iterable[int] | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode records into one batch (magic 2) or message set (magic 0/1).

    Parameters
    ----------
    records : iterable
        ``(key, value)``, ``(key, value, timestamp)`` or
        ``(key, value, timestamp, headers)`` tuples, or objects with ``key``
        and ``value`` (and optionally ``timestamp`` and ``headers``)
        attributes, such as decoded :class:`Record` objects. Keys and values
        are bytes-like or None; headers are ``(str | bytes, bytes | None)``
        pairs; a timestamp is epoch milliseconds or None.
    magic : int
        2 (RecordBatch v2, the default) or 0/1 (legacy messages; no
        headers, no producer state; zstd not allowed).
    base_offset : int
        Offset of the first record. The offsets a broker assigns on append
        overwrite it.
    compression, compression_level : CompressionType or int or str, int
        Codec (enum, id or name such as ``"lz4"``) and Kafka level; see
        :mod:`kafkastore.compression`.
    timestamp_type : TimestampType
        CreateTime (default) or LogAppendTime. For LogAppendTime the batch's
        maxTimestamp is ``max_timestamp`` (default: now) and every reader
        reports it as each record's timestamp.
    timestamp : int, optional
        Timestamp for records that carry none (default: now).
    max_timestamp : int, optional
        Override the computed maxTimestamp.
    partition_leader_epoch, is_transactional, is_control, producer_id, producer_epoch, base_sequence : int or bool
        Header fields, written as given.
    offsets, last_offset_delta : iterable of int, int, optional
        Absolute offset per record and an explicit lastOffsetDelta, to
        write batches with gaps as the log cleaner leaves them.
    delete_horizon_ms : int, optional
        Set attribute bit 6 and store the horizon as baseTimestamp (what the
        cleaner does to batches holding tombstones).

    Returns
    -------
    bytes
        One complete entry (magic 2) or a message set (magic 0/1).
    """
    codec = CompressionType.parse(compression)
    if compression_level is not None:
        _compression.validate_level(codec, compression_level)
    # (the enum call costs more than the rest of a small batch's header)
    ts_type = timestamp_type if type(timestamp_type) is TimestampType \
        else TimestampType(timestamp_type)
    if ts_type == TimestampType.NO_TIMESTAMP_TYPE:
        raise ValueError("a batch's timestamp type is CreateTime or LogAppendTime")
    if timestamp is None:
        timestamp = _now_ms()
    if ts_type == TimestampType.LOG_APPEND_TIME and max_timestamp is None:
        max_timestamp = timestamp
    if magic in (0, 1):
        return _encode_legacy(records, magic, base_offset, codec, compression_level, ts_type,
                              timestamp, max_timestamp, offsets, is_transactional, is_control,
                              producer_id, delete_horizon_ms)
    if magic != 2:
        raise ValueError(f"magic must be 0, 1 or 2, not {magic}")
    attributes = int(codec) | (int(ts_type) << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    return encode_v2(records, base_offset, attributes, compression_level, timestamp,
                     max_timestamp, producer_id, producer_epoch, base_sequence,
                     partition_leader_epoch, last_offset_delta, offsets, delete_horizon_ms)


def _v2_compressor(codec: int, level: int | None):
    """The ``compress(view) -> bytes`` callback the v2 encoders take (None: no codec)."""
    if not codec:
        return None

    def compress(view, _codec=codec, _level=level):
        return _compression.compress(_codec, view, _level, magic=2)
    return compress


def encode_v2(records, base_offset: int, attributes: int, compression_level: int | None,
              timestamp: int, max_timestamp: int | None = None, producer_id: int = -1,
              producer_epoch: int = -1, base_sequence: int = -1,
              partition_leader_epoch: int = -1, last_offset_delta: int | None = None,
              offsets=None, delete_horizon_ms: int | None = None) -> bytes:
    """:func:`encode_batch` for magic 2 with the batch attributes already composed.

    ``attributes`` holds the codec (bits 0-2), timestamp type (bit 3), and
    the transactional and control bits; ``compression_level`` must be valid
    for the codec. Positional and without enum conversions: this is the
    append path of :class:`~kafkastore.log.Log`, where a 100-record batch
    costs about 5 us and keyword handling would add a sixth to it.
    """
    codec = attributes & CODEC_MASK
    # (no call for an uncompressed batch: this is Log.append's path)
    compress = _v2_compressor(codec, compression_level) if codec else None
    return _rb.encode_batch_v2(
        records, base_offset, partition_leader_epoch, attributes, producer_id,
        producer_epoch, base_sequence, timestamp, max_timestamp, last_offset_delta,
        offsets, delete_horizon_ms, compress)


def encode_columns(
    keys,
    values,
    *,
    rows=None,
    timestamps=None,
    headers=None,
    default_timestamp: int | None = None,
    compression: CompressionType | int | str | None = CompressionType.NONE,
    compression_level: int | None = None,
    max_batch_records: int = 16384,
    max_batch_bytes: int = 1 << 20,
    first_offset: int | None = 0,
) -> bytes:
    """Encode Arrow-style columns as v2 batches back to back, no Python object per record.

    ``keys`` and ``values`` are ``(offsets, data, valid)`` triples (``offsets`` n+1
    int32/int64 positions into ``data``; ``valid`` None or a bool array, False for a
    null); ``keys`` may be None (no keys). ``rows`` selects and orders the rows
    (default: all), ``timestamps`` is an int64 epoch-ms array (default:
    ``default_timestamp``, itself defaulting to now), ``headers`` the six arrays of an
    Arrow ``list<struct<key: string, value: binary>>`` column (see
    :mod:`kafkastore._pure.column_encode`). A batch ends at ``max_batch_records``
    records or ``max_batch_bytes`` bytes of records; offsets run from ``first_offset``
    across the batches, CreateTime, no producer; ``first_offset=None`` bases every
    batch at offset 0, as a producer sends them (what :meth:`Log.append_batches` takes on
    the leader path). The bytes are those :func:`encode_batch` gives for the same
    records cut the same way.
    """
    codec = CompressionType.parse(compression)
    if compression_level is not None:
        _compression.validate_level(codec, compression_level)
    compress = _v2_compressor(int(codec), compression_level)
    data = _ce.encode_columns(
        rows, keys, values, timestamps=timestamps, headers=headers,
        default_timestamp=_now_ms() if default_timestamp is None else default_timestamp,
        max_batch_records=max_batch_records, max_batch_bytes=max_batch_bytes,
        attributes=int(codec), compress=compress,
        first_offset=0 if first_offset is None else first_offset)
    if first_offset is None and data:
        # the base offset lies outside the CRC: patch each batch's to 0
        buf = bytearray(data)
        for pos in scan_batches(buf, validate=False).position.tolist():
            buf[pos:pos + 8] = bytes(8)
        data = bytes(buf)
    return data


_V2_CRC_FROM = ATTRIBUTES_OFFSET   # the CRC covers attributes .. the end of the batch


def assemble_batch_v2(records_section, count: int, *, base_offset: int, last_offset_delta: int,
                      attributes: int, base_timestamp: int, max_timestamp: int,
                      producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                      partition_leader_epoch: int = -1,
                      compression_level: int | None = None) -> bytes:
    """One magic 2 batch around records already encoded (an uncompressed records section).

    What the log cleaner writes when it keeps some records of a batch: the section is
    compressed here with the codec in ``attributes`` (bits 0-2) at ``compression_level``,
    and the header is written as given, so ``last_offset_delta`` may reach past the
    last record kept (Kafka's ``overrideLastOffset``) and the producer fields and
    flags survive. ``count`` 0 with an empty section gives Kafka's empty batch header
    (``writeEmptyHeader``; give ``base_timestamp`` -1 and an uncompressed codec).
    """
    codec = attributes & CODEC_MASK
    body = records_section if not codec or count == 0 else _compression.compress(
        codec, records_section, compression_level, magic=2)
    if count == 0:
        attributes &= ~CODEC_MASK   # an empty batch is never compressed
    size = RECORD_BATCH_OVERHEAD + len(body)
    out = bytearray(size)
    V2_HEADER.pack_into(out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
                         attributes, last_offset_delta, base_timestamp, max_timestamp,
                         producer_id, producer_epoch, base_sequence, count)
    out[RECORD_BATCH_OVERHEAD:] = body
    UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[_V2_CRC_FROM:]))
    return bytes(out)


def encode_control_batch(
    control_type: ControlRecordType | int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a transaction marker batch (COMMIT or ABORT), as a coordinator writes it.

    The batch is transactional and control, uncompressed, CreateTime, with
    base sequence -1 and one record: key ``(version 0, type)``, value
    ``(version 0, coordinator_epoch)``.
    """
    ctype = ControlRecordType(control_type)
    if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError("only ABORT and COMMIT markers are written by encode_control_batch")
    key = _CONTROL_KEY.pack(0, int(ctype))
    value = _TXN_MARKER.pack(0, coordinator_epoch)
    return encode_batch([(key, value)], base_offset=base_offset, timestamp=timestamp,
                        partition_leader_epoch=partition_leader_epoch, is_transactional=True,
                        is_control=True, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=-1)


# -- legacy writer (magic 0 and 1) ---------------------------------------------------

_ENTRY = ENTRY_PREFIX


def _legacy_message(magic: int, attributes: int, timestamp: int, key, value) -> bytes:
    """One message body (after offset and size), CRC-32 included."""
    body = bytearray()
    body += bytes((magic, attributes))
    if magic == 1:
        body += INT64.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += b"\xff\xff\xff\xff"
        else:
            body += INT32.pack(len(part))
            body += part
    return UINT32.pack(zlib.crc32(body)) + bytes(body)


def _legacy_parts(rec) -> tuple[Any, Any, int | None]:
    # the same record shapes, and the same errors, as the v2 kernel accepts
    if isinstance(rec, (tuple, list)):
        if not 2 <= len(rec) <= 4:
            raise TypeError("a record tuple is (key, value[, timestamp[, headers]])")
        key, value = rec[0], rec[1]
        ts = rec[2] if len(rec) > 2 else None
        headers = rec[3] if len(rec) > 3 else None
    else:
        try:
            key, value = rec.key, rec.value
        except AttributeError:
            raise TypeError(
                "a record is a (key, value[, timestamp[, headers]]) tuple or an object "
                f"with key and value attributes, not {type(rec).__name__}") from None
        ts = getattr(rec, "timestamp", None)
        headers = getattr(rec, "headers", None)
    if ts is not None and not isinstance(ts, int):
        raise TypeError(f"record timestamp must be an int or None, not {type(ts).__name__}")
    if headers:
        raise ValueError("magic 0 and 1 messages cannot carry headers")
    parts = []
    for what, part in (("key", key), ("value", value)):
        if part is None or isinstance(part, bytes):
            parts.append(part)
        elif isinstance(part, str):
            raise TypeError(f"record {what} must be bytes-like or None, not str")
        else:
            try:
                parts.append(bytes(memoryview(part)))
            except TypeError:
                raise TypeError(f"record {what} must be bytes-like or None, not "
                                f"{type(part).__name__}") from None
    return parts[0], parts[1], ts


def _encode_legacy(records, magic, base_offset, codec, level, ts_type, timestamp,
                   max_timestamp, offsets, is_transactional, is_control, producer_id,
                   delete_horizon_ms) -> bytes:
    if is_transactional or is_control or producer_id != -1 or delete_horizon_ms is not None:
        raise ValueError("magic 0 and 1 messages have no transactions, control records, "
                         "producer state or delete horizon")
    if codec == CompressionType.ZSTD:
        raise ValueError("zstd needs magic 2")
    items = [_legacy_parts(r) for r in records]
    if not items:
        raise ValueError("a legacy message set needs at least one record")
    offs = list(offsets) if offsets is not None else [base_offset + i for i in range(len(items))]
    if len(offs) != len(items) or any(b <= a for a, b in zip(offs, offs[1:])):
        raise ValueError("offsets must be strictly increasing, one per record")
    log_append = magic == 1 and ts_type == TimestampType.LOG_APPEND_TIME
    ts_bit = TIMESTAMP_TYPE_MASK if log_append else 0
    stamps = [timestamp if ts is None else ts for _, _, ts in items]
    if codec == CompressionType.NONE:
        out = bytearray()
        for (key, value, _), off, ts in zip(items, offs, stamps):
            ts = max_timestamp if log_append else ts
            msg = _legacy_message(magic, ts_bit, ts, key, value)
            out += _ENTRY.pack(off, len(msg)) + msg
        return bytes(out)
    inner = bytearray()
    for i, ((key, value, _), off, ts) in enumerate(zip(items, offs, stamps)):
        msg = _legacy_message(magic, 0, ts, key, value)
        # v0 inner offsets are absolute; v1 inner offsets are relative (0..n-1)
        inner += _ENTRY.pack(off if magic == 0 else off - offs[0], len(msg)) + msg
    wrapper_ts = max_timestamp if max_timestamp is not None else max(stamps)
    payload = _compression.compress(int(codec), memoryview(inner), level, magic=magic)
    msg = _legacy_message(magic, int(codec) | ts_bit, wrapper_ts, None, payload)
    return _ENTRY.pack(offs[-1], len(msg)) + msg
