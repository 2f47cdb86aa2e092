"""Writing a v2 batch (Kafka's ``MemoryRecordsBuilder`` and ``DefaultRecord.writeTo``).

:func:`encode_batch_v2` builds one magic 2 batch, CRC-32C included, from
records given as tuples or record-like objects; the layout it writes is
documented in ``kafkastore/_pure/record_batch.py``. The varint writers it uses
live in ``kafkastore/_pure/varint.py`` (shared with the column encoder and
the cleaner's record rewriter).

Thread safety: stateless.
"""

from __future__ import annotations

import struct

import crc32c

from kafkastore._pure.reader import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER,
    INT32_MAX,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
)
from kafkastore._pure.varint import write_uvarint, zz32, zz64
from kafkastore.errors import RecordTooLargeError

__all__ = ["encode_batch_v2"]


def _as_bytes(obj, what: str):
    if obj is None:
        return None
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        raise TypeError(f"record {what} must be bytes-like or None, not str")
    try:
        return bytes(memoryview(obj))
    except TypeError:
        raise TypeError(
            f"record {what} must be bytes-like or None, not {type(obj).__name__}"
        ) from None


def _unpack_record(rec):
    """``(key, value, timestamp, headers)`` from a tuple or a record-like object."""
    if isinstance(rec, (tuple, list)):
        n = len(rec)
        if not 2 <= n <= 4:
            raise TypeError("a record tuple is (key, value[, timestamp[, headers]])")
        key, value = rec[0], rec[1]
        ts = rec[2] if n > 2 else None
        headers = rec[3] if n > 3 else None
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
    return key, value, ts, headers


def _encode_headers(headers) -> tuple[int, bytes]:
    if not headers:
        return 0, b""
    out = bytearray()
    n = 0
    for item in headers:
        try:
            hkey, hval = item
        except (TypeError, ValueError):
            raise TypeError("a header is a (key, value) pair") from None
        if isinstance(hkey, str):
            hkey = hkey.encode("utf-8", "surrogateescape")
        elif hkey is None:
            raise TypeError("header keys cannot be null")
        else:
            hkey = _as_bytes(hkey, "header key")
        hval = _as_bytes(hval, "header value")
        out += write_uvarint(zz32(len(hkey)))
        out += hkey
        if hval is None:
            out += b"\x01"  # zig-zag of -1
        else:
            out += write_uvarint(zz32(len(hval)))
            out += hval
        n += 1
    return n, bytes(out)


def _check_attributes(value: int) -> int:
    """Any 16-bit pattern (the field is an int16; Kafka reads it as a short)."""
    if not isinstance(value, int):
        raise TypeError(f"attributes must be an int, not {type(value).__name__}")
    if not -0x8000 <= value <= 0xFFFF:
        raise ValueError(f"attributes {value} do not fit 16 bits")
    return value & 0xFFFF


def _check_int(value: int, bits: int, what: str) -> int:
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise ValueError(f"{what} {value} is outside the int{bits} range")
    return value


def encode_batch_v2(records, base_offset: int = 0, partition_leader_epoch: int = -1,
                    attributes: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                    base_sequence: int = -1, default_timestamp: int = -1,
                    max_timestamp: int | None = None, last_offset_delta: int | None = None,
                    offsets=None, delete_horizon_ms: int | None = None,
                    compress=None) -> bytes:
    """Build one magic 2 batch; return its bytes, CRC-32C included.

    ``records`` items are ``(key, value[, timestamp[, headers]])`` tuples or
    objects with ``key``/``value`` (and optional ``timestamp``/``headers``)
    attributes, such as a decoded :class:`Record`. A record without a
    timestamp gets ``default_timestamp``. ``attributes`` carries the codec,
    timestamp type, transactional and control bits; bit 6 is set when
    ``delete_horizon_ms`` is given, and then ``baseTimestamp`` is the
    horizon. ``offsets`` optionally gives each record's absolute offset
    (strictly increasing, within int32 of ``base_offset``), as a compacted
    batch keeps; ``last_offset_delta`` may then exceed the last record's.
    ``max_timestamp`` overrides the computed maximum (used for
    LogAppendTime). ``compress(view) -> bytes`` compresses the records
    section when the codec bits are not 0.
    """
    _check_int(base_offset, 64, "base offset")
    _check_int(partition_leader_epoch, 32, "partition leader epoch")
    _check_attributes(attributes)
    _check_int(producer_id, 64, "producer id")
    _check_int(producer_epoch, 16, "producer epoch")
    _check_int(base_sequence, 32, "base sequence")
    _check_int(default_timestamp, 64, "timestamp")
    if max_timestamp is not None:
        _check_int(max_timestamp, 64, "max timestamp")
    if last_offset_delta is not None:
        _check_int(last_offset_delta, 32, "last offset delta")
    if delete_horizon_ms is not None:
        _check_int(delete_horizon_ms, 64, "delete horizon")
    records = records if isinstance(records, (list, tuple)) else list(records)
    n = len(records)
    if offsets is not None:
        offsets = list(offsets)
        if len(offsets) != n:
            raise ValueError(f"{len(offsets)} offsets given for {n} records")
    attributes &= 0x3F  # bit 6 is ours to set; bits 7-15 are unused and written as 0
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    items = []
    timestamps = []
    prev_delta = -1
    for i, rec in enumerate(records):
        key, value, ts, headers = _unpack_record(rec)
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        ts = default_timestamp if ts is None else _check_int(ts, 64, "timestamp")
        if offsets is None:
            delta = i
        else:
            _check_int(offsets[i], 64, "offset")
            delta = offsets[i] - base_offset
            if not 0 <= delta <= INT32_MAX or delta <= prev_delta:
                raise ValueError(
                    f"offset {offsets[i]} must be above the previous one and within "
                    f"int32 of base offset {base_offset}")
        prev_delta = delta
        hcount, hbytes = _encode_headers(headers)
        items.append((key, value, ts, delta, hcount, hbytes))
        timestamps.append(ts)
    if n:
        base_ts = timestamps[0] if delete_horizon_ms is None else delete_horizon_ms
        max_ts = max(timestamps) if max_timestamp is None else max_timestamp
        last_delta = prev_delta
    else:
        # Kafka's writeEmptyHeader: no first timestamp, the max timestamp kept
        max_ts = -1 if max_timestamp is None else max_timestamp
        base_ts = -1 if delete_horizon_ms is None else delete_horizon_ms
        last_delta = 0
    if last_offset_delta is not None:
        if not last_delta <= last_offset_delta <= INT32_MAX:
            raise ValueError(
                f"last offset delta {last_offset_delta} is below the last record's "
                f"delta {last_delta} or above int32")
        last_delta = last_offset_delta
    body = bytearray()
    for key, value, ts, delta, hcount, hbytes in items:
        ts_delta = ts - base_ts
        if not -(1 << 63) <= ts_delta < (1 << 63):
            raise ValueError(f"timestamp {ts} is too far from the base timestamp {base_ts}")
        rec = bytearray(b"\x00")
        rec += write_uvarint(zz64(ts_delta))
        rec += write_uvarint(zz32(delta))
        if key is None:
            rec += b"\x01"
        else:
            rec += write_uvarint(zz32(len(key)))
            rec += key
        if value is None:
            rec += b"\x01"
        else:
            rec += write_uvarint(zz32(len(value)))
            rec += value
        rec += write_uvarint(zz32(hcount))
        rec += hbytes
        if len(rec) > INT32_MAX:
            raise RecordTooLargeError("record does not fit Kafka's int32 size field",
                                      limit=INT32_MAX)
        body += write_uvarint(zz32(len(rec)))
        body += rec
    if attributes & CODEC_MASK:
        if compress is None:
            raise ValueError("a compressed batch needs a compress function")
        body = compress(memoryview(body))
    total = RECORD_BATCH_OVERHEAD + len(body)
    if total - LOG_OVERHEAD > INT32_MAX:
        raise RecordTooLargeError(f"batch of {total} bytes does not fit Kafka's int32 size",
                                  limit=INT32_MAX + LOG_OVERHEAD)
    out = bytearray(total)
    HEADER.pack_into(out, 0, base_offset, total - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
                     attributes, last_delta, base_ts, max_ts, producer_id, producer_epoch,
                     base_sequence, n)
    out[RECORD_BATCH_OVERHEAD:] = body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
