"""RecordBatch v2 encoding straight from Arrow-style columns.

Pure-Python twin of ``kafkastore/_ext/column_encode.pyx``: the same name, signature,
output bytes and errors (type and message). It is the readable reference and the oracle
the compiled kernel is tested against. The v2 layout itself is documented in
``kafkastore/_pure/record_batch.py``; the bytes are those ``encode_batch_v2`` writes for
the same records, split into the same batches.

Input
-----
``n`` rows are given as columns, the way ``pyarrow`` holds a ``RecordBatch`` (the caller
turns Arrow buffers into numpy arrays; nothing here imports pyarrow):

``values``, ``keys``
    ``(offsets, data, valid)``: ``offsets`` a 1-D numpy int32 or int64 array of ``n + 1``
    positions into ``data`` (any C-contiguous bytes-like object; None counts as empty),
    ``valid`` None (no nulls) or a 1-D numpy bool array of ``n``. Row ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``, or null (written with length -1) where
    ``valid[i]`` is False; a null row's offsets are not looked at. ``keys`` may be None:
    every key is null. Arrow's ``binary`` (int32 offsets) and ``large_binary`` (int64)
    both fit, sliced arrays included (``offsets[0]`` need not be 0).
``timestamps``
    None (every record gets ``default_timestamp``) or a 1-D numpy int64 array of ``n``
    epoch-millisecond values. Values are written as given: -1 and other negative values
    are not special here (Kafka reads -1 as "no timestamp").
``headers``
    None (no record has headers) or ``(header_offsets, key_offsets, key_data,
    value_offsets, value_data, value_valid)``, Arrow's ``list<struct<key: string, value:
    binary>>``: row ``i`` has header entries ``header_offsets[i]`` up to
    ``header_offsets[i + 1]`` (``n + 1`` offsets into ``H`` entries); entry ``j``'s key is
    ``key_data[key_offsets[j]:key_offsets[j + 1]]`` (never null, written as given: UTF-8
    is not checked) and its value likewise, null where ``value_valid[j]`` is False.
    ``key_offsets`` and ``value_offsets`` hold ``H + 1`` entries each.
``rows``
    None (rows ``0 .. n-1`` in order) or a 1-D numpy int32 or int64 array of row indices,
    encoded in that order (repeats allowed): one target partition's rows.

Output
------
Complete v2 batches back to back, ``b""`` for no records. A batch is closed before a
record when it already holds ``max_batch_records`` records, or when its uncompressed
records section (length prefixes included) would grow past ``max_batch_bytes``; a record
larger than that alone gets a batch of its own. The first batch's baseOffset is
``first_offset`` and each next one's is the previous baseOffset plus its record count, so
the records' offsets run ``first_offset, first_offset + 1, ...``; offset deltas restart at
0 in each batch and lastOffsetDelta is ``count - 1``. baseTimestamp is the batch's first
record's timestamp, maxTimestamp the largest of its records' (also with the
LogAppendTime bit: the broker rewrites it then). ``attributes`` (codec in bits 0-2,
timestamp type, transactional, control; bits 6-15 must be 0) go into every batch as
given; with a codec, each batch's records section is replaced by ``compress(view)``,
``view`` a memoryview of exactly that section. ``producer_id``, ``producer_epoch`` and
``partition_leader_epoch`` are written as given; ``base_sequence`` -1 stays -1 in every
batch, otherwise each batch's baseSequence advances by the records before it, wrapping
past 2**31 - 1 to 0 as Kafka's ``incrementSequence`` does.

Errors, in the order they are checked
-------------------------------------
1. The keyword integers, in signature order (TypeError for a non-integer, ValueError out
   of range), then ``compress`` (TypeError if given but not callable; ValueError if the
   codec is not 0 and none is given).
2. The columns, in the order ``values``, ``keys``, ``timestamps``, ``headers``, ``rows``:
   TypeError for a wrong container, array type or dtype, ValueError for a wrong length,
   BufferError for a data buffer that is not C-contiguous. Then ValueError if the last
   offset would pass the int64 range.
3. Each record in encoding order: IndexError for a row index outside ``0 .. n-1``;
   ValueError for offsets that decrease, a span outside its data, a length above the
   int32 range (the key, then the value, then the header range, then each header's key
   and value); RecordTooLargeError once the record can no longer fit Kafka's int32 size
   (checked after the value and after each header); ValueError for a timestamp whose
   delta from its batch's base timestamp does not fit int64 (a batch closed by
   ``max_batch_records`` is closed before this check).
4. Writing: TypeError if ``compress`` returns something that is not bytes-like,
   RecordTooLargeError for a batch that does not fit Kafka's int32 size field.

Nothing is compressed or written before steps 1 to 3 have passed for every record.
"""

from __future__ import annotations

import operator
import struct

import crc32c
import numpy as np

from kafkastore._pure.reader import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CRC_OFFSET,
    HEADER,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
)
from kafkastore._pure.varint import uvarint_size, write_uvarint, zz32, zz64
from kafkastore.errors import RecordTooLargeError

__all__ = ["encode_columns"]

ATTRIBUTE_BITS = 0x3F          # codec, timestamp type, transactional, control

_HEADERS_FORM = ("headers must be None or a 6-tuple (header_offsets, key_offsets, key_data, "
                 "value_offsets, value_data, value_valid)")


# -- arguments -----------------------------------------------------------------------------


def _int(value, lo: int, hi: int, what: str) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{what} must be between {lo} and {hi}, not {v}")
    return v


def _describe(obj) -> str:
    if isinstance(obj, np.ndarray):
        return f"a {obj.ndim}-D {obj.dtype} array"
    return type(obj).__name__


def _int_array(obj, what: str, *, wide_only: bool = False) -> np.ndarray:
    """A 1-D native-order numpy int32/int64 (int64 only if ``wide_only``) array."""
    sizes = (8,) if wide_only else (4, 8)
    if not (isinstance(obj, np.ndarray) and obj.ndim == 1 and obj.dtype.kind == "i"
            and obj.dtype.itemsize in sizes):
        kinds = "int64" if wide_only else "int32 or int64"
        raise TypeError(f"{what} must be a 1-D numpy {kinds} array, not {_describe(obj)}")
    return np.ascontiguousarray(obj, dtype=obj.dtype.newbyteorder("="))


def _bool_array(obj, count: int, what: str):
    if obj is None:
        return None
    if not (isinstance(obj, np.ndarray) and obj.ndim == 1 and obj.dtype.kind == "b"):
        raise TypeError(f"{what} must be None or a 1-D numpy bool array, not {_describe(obj)}")
    if obj.shape[0] != count:
        raise ValueError(f"{what} holds {obj.shape[0]} entries, not {count}")
    return obj


def _data(obj, what: str) -> memoryview:
    """The bytes of ``obj`` as a 1-D byte memoryview."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what} must be a bytes-like object, not {type(obj).__name__}") from None
    if not view.c_contiguous:
        raise BufferError(f"{what} must be a C-contiguous buffer")
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view


def _offsets(obj, count: int, what: str, rows_of: str) -> list:
    offsets = _int_array(obj, f"{what} offsets")
    if offsets.shape[0] != count + 1:
        raise ValueError(f"{what} offsets hold {offsets.shape[0]} entries, not {count + 1} "
                         f"(n + 1 for the {count} {rows_of})")
    return offsets.tolist()


def _binary(col, what: str, n: int | None):
    """``(offsets, data, valid, n)`` of an ``(offsets, data, valid)`` triple; ``n`` None:
    this column decides it."""
    if not (isinstance(col, (tuple, list)) and len(col) == 3):
        raise TypeError(f"{what} must be an (offsets, data, valid) triple, not {_describe(col)}")
    offsets, data, valid = col
    if n is None:
        arr = _int_array(offsets, f"{what} offsets")
        if arr.shape[0] == 0:
            raise ValueError(f"{what} offsets must hold n + 1 entries for n rows, not 0")
        n = arr.shape[0] - 1
        offsets = arr.tolist()
    else:
        offsets = _offsets(offsets, n, what, "rows of values")
    view = _data(b"" if data is None else data, f"{what} data")
    valid = _bool_array(valid, n, f"{what} valid")
    return offsets, view, None if valid is None else valid.tolist(), n


# -- records -------------------------------------------------------------------------------


#: Column names in errors, as the arguments' (``values offsets``), and what one entry is.
_COLUMNS = {"keys": "key", "values": "value", "header key": "header key",
            "header value": "header value"}


def _span(offsets: list, i: int, size: int, col: str, where: str) -> tuple[int, int]:
    """``(start, end)`` of entry ``i`` of column ``col``, checked against ``size`` bytes."""
    start, end = offsets[i], offsets[i + 1]
    if end < start:
        raise ValueError(f"{col} offsets decrease at {where}: {start} then {end}")
    if start < 0 or end > size:
        raise ValueError(
            f"{col} offsets of {where} span [{start}, {end}), outside the {size} bytes of "
            f"{col} data")
    if end - start > INT32_MAX:
        raise ValueError(f"the {_COLUMNS[col]} of {where} is {end - start} bytes, more than "
                         "an int32 length allows")
    return start, end


def _field_size(length: int) -> int:
    """A varint length and the bytes; null (-1) is the single byte 0x01."""
    return 1 if length < 0 else uvarint_size(zz32(length)) + length


def _too_large(row: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"the record of row {row} does not fit Kafka's int32 size field",
                               limit=INT32_MAX)


def _binary_part(col, row: int, what: str):
    """``(start, end)`` of ``row`` in a ``(offsets, view, valid, n)`` column, None if null."""
    if col is None or (col[2] is not None and not col[2][row]):
        return None
    return _span(col[0], row, len(col[1]), what, f"row {row}")


def _measure(row: int, keys, values, headers) -> tuple[int, list]:
    """The record's size after the offset delta (key, value, headers), and its parts:
    ``[key span, value span, [(header key span, header value span), ...]]``."""
    key = _binary_part(keys, row, "keys")
    value = _binary_part(values, row, "values")
    payload = (_field_size(-1 if key is None else key[1] - key[0])
               + _field_size(-1 if value is None else value[1] - value[0]))
    if payload > INT32_MAX:
        raise _too_large(row)
    entries = []
    if headers is not None:
        hoffs, H, hkoffs, hkdata, hvoffs, hvdata, hvalid = headers
        h0, h1 = hoffs[row], hoffs[row + 1]
        if h1 < h0:
            raise ValueError(f"header offsets decrease at row {row}: {h0} then {h1}")
        if h0 < 0 or h1 > H:
            raise ValueError(
                f"header offsets of row {row} span [{h0}, {h1}), outside the {H} header entries")
        if h1 - h0 > INT32_MAX:
            raise ValueError(f"row {row} has {h1 - h0} headers, more than an int32 count allows")
        payload += uvarint_size(zz32(h1 - h0))
        for j in range(h0, h1):
            where = f"header {j} of row {row}"
            hk = _span(hkoffs, j, len(hkdata), "header key", where)
            hv = None
            if hvalid is None or hvalid[j]:
                hv = _span(hvoffs, j, len(hvdata), "header value", where)
            payload += (_field_size(hk[1] - hk[0])
                        + _field_size(-1 if hv is None else hv[1] - hv[0]))
            if payload > INT32_MAX:
                raise _too_large(row)
            entries.append((hk, hv))
    else:
        payload += 1
    if payload > INT32_MAX:
        raise _too_large(row)
    return payload, [key, value, entries]


def _plan(order, stamps, default_ts: int, keys, values, headers, max_records: int,
          max_bytes: int):
    """Validate and size every record, and split them into batches: ``(batches, parts)``,
    a batch ``[start, count, body bytes, base ts, max ts]``, ``parts`` each record's spans."""
    batches: list[list] = []
    parts = []
    cur = None
    for p, row in enumerate(order):
        if not 0 <= row < values[3]:
            raise IndexError(f"rows[{p}] = {row} is outside the {values[3]} rows")
        payload, pieces = _measure(row, keys, values, headers)
        parts.append(pieces)
        ts = default_ts if stamps is None else stamps[row]
        if cur is None or cur[1] == max_records:
            cur = [p, 0, 0, ts, ts]
            batches.append(cur)
        delta = ts - cur[3]
        if not INT64_MIN <= delta <= INT64_MAX:
            raise ValueError(f"timestamp {ts} of row {row} is too far from the base timestamp "
                             f"{cur[3]}")
        size = 1 + uvarint_size(zz64(delta)) + uvarint_size(zz32(cur[1])) + payload
        whole = uvarint_size(zz64(size)) + size
        if cur[1] and (size > INT32_MAX or cur[2] + whole > max_bytes):
            # close the batch; the record opens the next one with both deltas 0
            cur = [p, 0, 0, ts, ts]
            batches.append(cur)
            size = 3 + payload
            whole = uvarint_size(zz64(size)) + size
        if size > INT32_MAX:
            raise _too_large(row)
        cur[1] += 1
        cur[2] += whole
        if ts > cur[4]:
            cur[4] = ts
    return batches, parts


def _records_section(batch, order, stamps, default_ts, parts, keys, values, headers) -> bytes:
    start, count, body, base_ts, _ = batch
    out = bytearray()
    for k in range(count):
        p = start + k
        row = order[p]
        ts = default_ts if stamps is None else stamps[row]
        key, value, entries = parts[p]
        rec = bytearray(b"\x00")
        rec += write_uvarint(zz64(ts - base_ts))
        rec += write_uvarint(zz32(k))
        for span, col in ((key, keys), (value, values)):
            if span is None:
                rec += b"\x01"
            else:
                rec += write_uvarint(zz32(span[1] - span[0]))
                rec += col[1][span[0]:span[1]]
        rec += write_uvarint(zz32(len(entries)))
        for hk, hv in entries:
            rec += write_uvarint(zz32(hk[1] - hk[0]))
            rec += headers[3][hk[0]:hk[1]]
            if hv is None:
                rec += b"\x01"
            else:
                rec += write_uvarint(zz32(hv[1] - hv[0]))
                rec += headers[5][hv[0]:hv[1]]
        out += write_uvarint(zz32(len(rec)))
        out += rec
    assert len(out) == body, (len(out), body)
    return bytes(out)


def encode_columns(rows, keys, values, *, timestamps=None, default_timestamp,
                   headers=None, max_batch_records=INT32_MAX, max_batch_bytes=1 << 20,
                   attributes=0, compress=None, producer_id=-1, producer_epoch=-1,
                   base_sequence=-1, partition_leader_epoch=-1, first_offset=0) -> bytes:
    """Encode rows of Arrow-style columns as magic 2 batches back to back.

    See the module docstring for the layout of ``keys``, ``values``, ``timestamps``,
    ``headers`` and ``rows``, how records are split into batches, and the errors.
    """
    default_ts = _int(default_timestamp, INT64_MIN, INT64_MAX, "default_timestamp")
    max_records = _int(max_batch_records, 1, INT32_MAX, "max_batch_records")
    max_bytes = _int(max_batch_bytes, 1, INT32_MAX, "max_batch_bytes")
    attrs = _int(attributes, 0, 0xFFFF, "attributes")
    if attrs & ~ATTRIBUTE_BITS:
        raise ValueError(f"attributes may set only bits 0-5 (codec, timestamp type, "
                         f"transactional, control), not {attrs:#x}")
    codec = attrs & CODEC_MASK
    if codec > 4:
        raise ValueError(f"attributes name the unknown compression codec {codec}")
    pid = _int(producer_id, INT64_MIN, INT64_MAX, "producer_id")
    pepoch = _int(producer_epoch, INT16_MIN, INT16_MAX, "producer_epoch")
    seq = _int(base_sequence, -1, INT32_MAX, "base_sequence")
    epoch = _int(partition_leader_epoch, INT32_MIN, INT32_MAX, "partition_leader_epoch")
    first = _int(first_offset, INT64_MIN, INT64_MAX, "first_offset")
    if compress is not None and not callable(compress):
        raise TypeError(f"compress must be callable, not {type(compress).__name__}")
    if codec and compress is None:
        raise ValueError("a compressed batch needs a compress function")

    vals = _binary(values, "values", None)
    n = vals[3]
    ks = None if keys is None else _binary(keys, "keys", n)
    stamps = None
    if timestamps is not None:
        arr = _int_array(timestamps, "timestamps", wide_only=True)
        if arr.shape[0] != n:
            raise ValueError(f"timestamps hold {arr.shape[0]} entries, not {n}")
        stamps = arr.tolist()
    hdrs = None
    if headers is not None:
        if not (isinstance(headers, (tuple, list)) and len(headers) == 6):
            raise TypeError(f"{_HEADERS_FORM}, not {_describe(headers)}")
        hoffs, hk_offs, hk_data, hv_offs, hv_data, hv_valid = headers
        hoffs = _offsets(hoffs, n, "header", "rows of values")
        arr = _int_array(hk_offs, "header key offsets")
        if arr.shape[0] == 0:
            raise ValueError("header key offsets must hold H + 1 entries for H headers, not 0")
        entries = arr.shape[0] - 1
        hk_offs = arr.tolist()
        hk_data = _data(b"" if hk_data is None else hk_data, "header key data")
        hv_offs = _offsets(hv_offs, entries, "header value", "header keys")
        hv_data = _data(b"" if hv_data is None else hv_data, "header value data")
        hv_valid = _bool_array(hv_valid, entries, "header value valid")
        hdrs = (hoffs, entries, hk_offs, hk_data, hv_offs, hv_data,
                None if hv_valid is None else hv_valid.tolist())
    if rows is None:
        order = range(n)
    else:
        order = _int_array(rows, "rows").tolist()
    m = len(order)
    if m and first > INT64_MAX - (m - 1):
        raise ValueError(f"first_offset {first} leaves no room for {m} offsets in int64")
    if not m:
        return b""

    batches, parts = _plan(order, stamps, default_ts, ks, vals, hdrs, max_records, max_bytes)
    out = bytearray()
    for batch in batches:
        start, count, _, base_ts, max_ts = batch
        body = _records_section(batch, order, stamps, default_ts, parts, ks, vals, hdrs)
        if codec:
            result = compress(memoryview(body))
            try:
                body = _data(result, "compress's result")
            except TypeError:
                raise TypeError("compress must return a bytes-like object, not "
                                f"{type(result).__name__}") from None
        total = RECORD_BATCH_OVERHEAD + len(body)
        if total - LOG_OVERHEAD > INT32_MAX:
            raise RecordTooLargeError(f"batch of {total} bytes does not fit Kafka's int32 size",
                                      limit=INT32_MAX + LOG_OVERHEAD)
        bseq = -1 if seq == -1 else (seq + start) % (1 << 31)
        entry = bytearray(HEADER.pack(first + start, total - LOG_OVERHEAD, epoch, 2, 0, attrs,
                                       count - 1, base_ts, max_ts, pid, pepoch, bseq, count))
        entry += body
        with memoryview(entry) as view:
            crc = crc32c.crc32c(view[ATTRIBUTES_OFFSET:])
        struct.pack_into(">I", entry, CRC_OFFSET, crc)
        out += entry
    return bytes(out)
