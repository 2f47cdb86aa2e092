"""Decoding a buffer of entries into numpy columns: :func:`decode_columns`.

The columnar decoder walks the entries with
:func:`~kafkastore._pure.batch_scan.iter_batches` and reads every record
through the batch readers (so through the one record parser), then builds
Arrow-style columns. The compiled twin writes straight into pooled buffers
(``kafkastore._pure.column_pool`` holds the pure side of that API); here
numpy allocates every column.

Thread safety: stateless.
"""

from __future__ import annotations

import numpy as np

from kafkastore._pure.batch_scan import iter_batches
from kafkastore._pure.default_record import parse_record
from kafkastore._pure.reader import (
    CODEC_MASK,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    RECORD_BATCH_OVERHEAD,
)
from kafkastore.errors import CorruptRecordError

__all__ = ["decode_columns"]


def decode_columns(buffer, start: int = 0, end: int | None = None, *,
                   validate: bool = True, include_control: bool = False,
                   max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                   headers: bool = False, copy: bool = True) -> dict:
    """Decode every record of ``buffer[start:end]`` into numpy columns.

    Returns a dict: ``offset``, ``timestamp`` (int64), ``timestamp_type``
    (int8), ``key_offsets``/``value_offsets`` (int64, n+1 Arrow-style
    offsets into ``key_data``/``value_data``, uint8), ``key_null``/
    ``value_null`` (bool, True where null) and ``header_count`` (int32).
    With ``headers`` it also holds the headers themselves (h of them in
    all): ``header_offsets`` (int64, n+1: record i's headers are entries
    ``header_offsets[i]:header_offsets[i + 1]``), ``header_key_offsets``/
    ``header_value_offsets`` (int64, h+1, into ``header_key_data``/
    ``header_value_data``, uint8: the raw bytes, keys not decoded) and
    ``header_value_null`` (bool, h). Legacy messages have no headers.
    Control batches are skipped unless ``include_control``. Entries are
    walked, checked and rejected as :func:`iter_batches` does, in two
    passes: headers, CRCs of compressed batches, inflation and legacy
    messages first, then each uncompressed batch's CRC and records. When a
    buffer holds several bad entries, the error raised is therefore the
    first one in that order, not necessarily the first in the buffer.

    With ``copy=False`` (the view layout) keys and values are not copied:
    ``key_offsets``/``value_offsets`` are left out and ``key_starts``/
    ``value_starts`` (n; int32 when the data array is below 2 GiB, else
    int64) and ``key_lengths``/``value_lengths``
    (int32, n; 0 for a null) locate each one in ``key_data``/``value_data``,
    which are both the same uint8 array: a view of ``buffer`` itself when
    every entry is an uncompressed v2 batch, else one buffer holding the
    records sections (inflated where compressed) and legacy keys and values.
    """
    # Same two passes, in the same order, as the compiled kernel (so both
    # raise the same error first): pass 1 checks headers, inflates compressed
    # payloads and reads legacy messages; pass 2 checks an uncompressed
    # batch's CRC right before parsing it.
    parts = []
    for batch in iter_batches(buffer, start, end, validate=False,
                              max_decompressed_bytes=max_decompressed_bytes):
        if batch.magic != 2:
            if validate:
                batch.validate()
            parts.append((None, list(batch)))
            continue
        if batch.is_control and not include_control:
            if validate:
                batch.validate()
            continue
        if batch.record_count < 0:
            raise CorruptRecordError(
                f"Found invalid record count {batch.record_count}",
                position=batch.position, offset=batch.base_offset)
        if batch.attributes & CODEC_MASK:
            if validate:
                batch.validate()
            data = batch._records_data()
            records_len = len(data)
        else:
            data = None
            records_len = batch.batch_length - (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
        if batch.record_count > records_len // MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record count {batch.record_count} exceeds what {records_len} bytes "
                f"can hold", position=batch.position, offset=batch.base_offset)
        parts.append((batch, data))
    offsets, timestamps, ts_types, header_counts = [], [], [], []
    keys, values = [], []
    header_offsets, header_keys, header_values = [0], [], []
    from_source = all(batch is not None and data is None for batch, data in parts)
    # (the one buffer that keys and values of compressed or legacy input are viewed in)
    arena = bytearray() if not copy and not from_source else None
    # the view layout: (start, length) of each key and value in the data buffer
    spans = {"key": ([], []), "value": ([], [])}
    for batch, data in parts:
        if batch is None:
            recs = data
            if arena is not None:
                for rec in recs:
                    for name, part in (("key", rec.key), ("value", rec.value)):
                        spans[name][0].append(len(arena))
                        spans[name][1].append(0 if part is None else len(part))
                        if part is not None:
                            arena += part
        else:
            if data is None:
                if validate:
                    batch.validate()
                data = batch.payload()
            recs = batch._records(data)
            if not copy:
                recs = list(recs)   # (counted for the spans)
                if arena is None:   # the records section's place in the source
                    base = batch.position + RECORD_BATCH_OVERHEAD
                else:
                    base = len(arena)
                    arena += data
                _record_spans(data, len(recs), base, batch.position, spans)
        for rec in recs:
            offsets.append(rec.offset)
            timestamps.append(rec.timestamp)
            ts_types.append(int(rec.timestamp_type))
            keys.append(rec.key)
            values.append(rec.value)
            header_counts.append(len(rec.headers))
            if headers:
                for hkey, hval in rec.headers:
                    # Record.headers decoded the key with surrogateescape, which
                    # gives back the stored bytes exactly, valid UTF-8 or not
                    header_keys.append(hkey.encode("utf-8", "surrogateescape"))
                    header_values.append(hval)
                header_offsets.append(len(header_keys))
    out = {
        "offset": np.array(offsets, dtype=np.int64),
        "timestamp": np.array(timestamps, dtype=np.int64),
        "timestamp_type": np.array(ts_types, dtype=np.int8),
        "header_count": np.array(header_counts, dtype=np.int32),
    }
    binary = [("key", keys), ("value", values)]
    if not copy:
        view_data = (np.frombuffer(buffer, dtype=np.uint8) if from_source
                     else np.frombuffer(arena, dtype=np.uint8))
        for name, items in binary:
            starts, lengths = spans[name]
            out[name + "_starts"] = np.array(
                starts, dtype=np.int32 if len(view_data) < 1 << 31 else np.int64)
            out[name + "_lengths"] = np.array(lengths, dtype=np.int32)
            out[name + "_data"] = view_data
            out[name + "_null"] = np.array([b is None for b in items], dtype=bool)
        binary = []
    if headers:
        out["header_offsets"] = np.array(header_offsets, dtype=np.int64)
        binary += [("header_key", header_keys), ("header_value", header_values)]
    for name, items in binary:
        lengths = np.array([0 if b is None else len(b) for b in items], dtype=np.int64)
        offs = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offs[1:])
        out[name + "_offsets"] = offs
        out[name + "_data"] = np.frombuffer(
            b"".join(b for b in items if b is not None), dtype=np.uint8).copy()
        if name != "header_key":  # header keys are never null
            out[name + "_null"] = np.array([b is None for b in items], dtype=bool)
    return out


def _record_spans(data, count: int, base: int, where: int, spans: dict) -> None:
    """Append the (start, length) of the keys and values of the ``count`` records of
    ``data`` (already parsed and checked) to ``spans``; a null has length 0."""
    pos, end = 0, len(data)
    key_starts, key_lengths = spans["key"]
    value_starts, value_lengths = spans["value"]
    for _ in range(count):
        (_start, _body, _ts_end, pos, _ts, _od, key_pos, key_len, value_pos, value_len,
         _count, _hstart) = parse_record(data, pos, end, where)
        key_starts.append(base + key_pos)
        key_lengths.append(max(key_len, 0))
        value_starts.append(base + value_pos)
        value_lengths.append(max(value_len, 0))
