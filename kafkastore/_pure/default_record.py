"""One v2 record (Kafka's ``DefaultRecord``): the parser, the ``Record`` type, headers.

:func:`parse_record` is the only v2 record parser of the pure kernels: the
batch reader, ``record_summary``, the columnar decoder (through the reader)
and the cleaner's kernel (``offset_map``) all call it, so they accept and
reject exactly the same records. The record layout is documented in
``kafkastore/_pure/record_batch.py``.

Length rules (``DefaultRecord.readFrom``): the record's own length must be
non-negative and fit the bytes that remain; a negative key, value or header
value length means null; a negative header key length and a negative header
count are errors; every length must fit inside the record, and the fields
must fill the record exactly. Errors are :class:`CorruptRecordError` with the
caller's ``where`` as position and the same messages as the compiled parser.

Thread safety: stateless; :class:`Record` is immutable.
"""

from __future__ import annotations

from kafkastore._pure.reader import EMPTY, read_varint
from kafkastore.errors import CorruptRecordError

__all__ = ["Record", "parse_record", "decode_headers"]


class Record:
    """One record read from a batch. Immutable.

    ``timestamp`` is what a Kafka consumer reports: the batch's maxTimestamp
    for a LogAppendTime batch (the wrapper's timestamp for a legacy
    wrapper), -1 for magic 0. ``headers`` is a tuple of ``(str, bytes | None)``
    pairs; header keys are decoded as UTF-8 with ``surrogateescape`` so that
    invalid bytes survive a round trip.
    """

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=EMPTY):
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "timestamp_type", timestamp_type)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "headers", headers)

    def __setattr__(self, name, value):
        raise AttributeError("Record is immutable")

    def _fields(self):
        return (self.offset, self.timestamp, int(self.timestamp_type), self.key,
                self.value, self.headers)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"key={self.key!r}, value={_short(self.value)}, headers={self.headers!r})"
        )


def _short(value):
    if value is not None and len(value) > 40:
        return repr(bytes(value[:40])) + "..."
    return repr(value)


def parse_record(data, pos: int, end: int, where: int):
    """Parse and validate the v2 record at ``pos`` of ``data[:end]``.

    Returns the flat tuple ``(start, body, ts_end, rend, ts_delta,
    offset_delta, key_pos, key_len, value_pos, value_len, header_count,
    headers_start)``: ``start`` is ``pos`` (the length varint), ``body`` the
    attributes byte, ``ts_end`` the first byte after timestampDelta, ``rend``
    the first byte after the record; ``key_len``/``value_len`` are -1 for
    null; the headers (already checked) start at ``headers_start``. Every
    length is checked against the record's declared size before anything
    is read. Errors carry ``position=where``.
    """
    length, body = read_varint(data, pos, end, 32, where)
    if length < 0 or length > end - body:
        raise CorruptRecordError(
            f"Invalid record size: expected {length} bytes in record payload, but the "
            f"buffer has only {end - body} remaining bytes", position=where)
    rend = body + length
    if body >= rend:
        raise CorruptRecordError("Found invalid record structure: empty record",
                                 position=where)
    # attributes (one byte): unused by Kafka, copied as they are by the cleaner
    ts_delta, p = read_varint(data, body + 1, rend, 64, where)
    ts_end = p
    offset_delta, p = read_varint(data, p, rend, 32, where)
    key_len, key_pos = read_varint(data, p, rend, 32, where)
    p = key_pos
    if key_len >= 0:
        if key_len > rend - p:
            raise CorruptRecordError("Found invalid record structure: key past record end",
                                     position=where)
        p += key_len
    else:
        key_len = -1
    value_len, value_pos = read_varint(data, p, rend, 32, where)
    p = value_pos
    if value_len >= 0:
        if value_len > rend - p:
            raise CorruptRecordError(
                "Found invalid record structure: value past record end", position=where)
        p += value_len
    else:
        value_len = -1
    count, p = read_varint(data, p, rend, 32, where)
    if count < 0:
        raise CorruptRecordError(f"Found invalid number of record headers {count}",
                                 position=where)
    if count > (rend - p) // 2:  # each header takes at least 2 bytes
        raise CorruptRecordError(
            f"Found invalid number of record headers {count}: more than the record holds",
            position=where)
    headers_start = p
    for _ in range(count):
        hkey_len, p = read_varint(data, p, rend, 32, where)
        if hkey_len < 0:
            raise CorruptRecordError("Invalid negative header key size", position=where)
        if hkey_len > rend - p:
            raise CorruptRecordError(
                "Found invalid record structure: header key past record end",
                position=where)
        p += hkey_len
        hval_len, p = read_varint(data, p, rend, 32, where)
        if hval_len >= 0:
            if hval_len > rend - p:
                raise CorruptRecordError(
                    "Found invalid record structure: header value past record end",
                    position=where)
            p += hval_len
    if p != rend:
        raise CorruptRecordError(
            f"Invalid record size: expected to read {length} bytes in record payload, "
            f"but instead read {p - body}", position=where)
    return (pos, body, ts_end, rend, ts_delta, offset_delta, key_pos, key_len, value_pos,
            value_len, count, headers_start)


def decode_headers(data, pos: int, count: int) -> tuple:
    """The ``count`` headers at ``pos`` of a record :func:`parse_record` accepted.

    ``((key, value), ...)``: keys decoded as UTF-8 with ``surrogateescape``,
    values bytes or None.
    """
    out = []
    end = len(data)
    for _ in range(count):
        klen, pos = read_varint(data, pos, end, 32, 0)
        hkey = bytes(data[pos:pos + klen]).decode("utf-8", "surrogateescape")
        pos += klen
        vlen, pos = read_varint(data, pos, end, 32, 0)
        if vlen >= 0:
            hval = bytes(data[pos:pos + vlen])
            pos += vlen
        else:
            hval = None
        out.append((hkey, hval))
    return tuple(out)
