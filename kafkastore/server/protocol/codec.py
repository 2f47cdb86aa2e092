"""The generic encoder and decoder: a description (:mod:`.schema`) compiled, once per
(message, version), into a plan of closures that walk bytes and dicts.

Decoding: a reader is ``read(buf, pos, end) -> (value, pos)`` over a memoryview of the
frame; a struct's plan is a tuple of steps ``step(buf, pos, end, out_dict) -> pos``, runs of
fixed-width fields read with one :class:`struct.Struct`. Every declared length or count is
checked against ``end - pos`` before anything is sliced or allocated, so a hostile frame
costs at most its own size; a bad frame raises :class:`~kafkastore.errors.InvalidRequestError`
with the position of the field. Nesting is bounded by the description, so the recursion
over the description is bounded too.

Encoding: a writer is ``write(buf: bytearray, parts: list, value)``; a records value that is
a :class:`FileRegion` (or a list of them) closes the current bytes piece into ``parts`` and
appends the region, so the frame is bytes pieces and file regions in order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from kafkastore.errors import InvalidRequestError
from kafkastore.server.protocol.schema import UNSET, F, Message, in_range

__all__ = ["FileRegion", "compile_reader", "compile_writer", "read_uvarint", "write_uvarint",
           "FIXED", "bad"]

ZERO_UUID = b"\0" * 16


class FileRegion:
    """``size`` bytes of ``file`` from ``position``, sent with ``sendfile`` (zero copy).

    ``file`` has ``fileno()`` and maybe ``close()``; the connection calls :meth:`close`
    once the region is on the socket (or the connection is gone)."""

    __slots__ = ("file", "position", "size")

    def __init__(self, file, position: int, size: int) -> None:
        if position < 0 or size < 0:
            raise ValueError(f"FileRegion: position {position} and size {size} must be >= 0")
        self.file = file
        self.position = position
        self.size = size

    def close(self) -> None:
        close = getattr(self.file, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"FileRegion({self.file!r}, position={self.position}, size={self.size})"


def close_regions(value: object) -> None:
    """Close every FileRegion in ``value`` (a region, or a response body's dicts and lists
    holding regions): what is done with the regions of a response that will not be sent."""
    if isinstance(value, FileRegion):
        value.close()
    elif isinstance(value, dict):
        for v in value.values():
            close_regions(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            close_regions(v)


def bad(message: str, pos: int) -> InvalidRequestError:
    return InvalidRequestError(f"{message} at byte {pos}", position=pos)


# == primitives ==============================================================================

#: Fixed-width types: struct format and default value.
FIXED = {
    "bool": ("?", False), "int8": ("b", 0), "int16": ("h", 0), "uint16": ("H", 0),
    "int32": ("i", 0), "uint32": ("I", 0), "int64": ("q", 0), "float64": ("d", 0.0),
    "uuid": ("16s", ZERO_UUID),
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def read_uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    """Kafka's unsigned varint (``ByteUtils.readUnsignedVarint``): at most 5 bytes, and
    the value must fit in 32 bits."""
    if pos < end and buf[pos] < 0x80:
        return buf[pos], pos + 1  # one byte: the common case
    start = pos
    value = shift = 0
    while True:
        if pos >= end:
            raise bad("varint runs past the end of the frame", start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                raise bad("unsigned varint larger than 32 bits", start)
            return value, pos
        shift += 7
        if shift > 28:
            raise bad("varint longer than 5 bytes", start)


def _read_zigzag(max_bytes: int):
    def read(buf, pos: int, end: int) -> tuple[int, int]:
        start = pos
        value = shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise bad("varint runs past the end of the frame", start)
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return (value >> 1) ^ -(value & 1), pos
            shift += 7
        raise bad(f"varint longer than {max_bytes} bytes", start)
    return read


def write_uvarint(buf: bytearray, value: int) -> None:
    while value > 0x7F:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


def _write_zigzag(bits: int):
    def write(buf: bytearray, parts: list, value: int) -> None:
        write_uvarint(buf, ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1))
    return write


def _compact_len(buf, pos: int, end: int) -> tuple[int, int]:
    if pos < end and buf[pos] < 0x80:
        return buf[pos] - 1, pos + 1  # one byte: the common case
    n, pos = read_uvarint(buf, pos, end)
    return n - 1, pos


def _length_reader(compact: bool, wide: bool):
    """Reads a length or count: a compact unsigned varint (n + 1) in flexible versions,
    else an int32 (``wide``: bytes, arrays) or int16 (strings); -1 is null."""
    if compact:
        return _compact_len
    st = _I32 if wide else _I16
    size, unpack = st.size, st.unpack_from

    def fixed_len(buf, pos, end):
        if end - pos < size:
            raise bad("length runs past the end of the frame", pos)
        return unpack(buf, pos)[0], pos + size
    return fixed_len


def _read_span(read_len, buf, pos: int, end: int, nullable: bool, what: str, limit: int):
    """Where a length-prefixed value lies: (start, stop), or (None, position after the
    length) for a null. The length is checked against ``limit`` and the bytes left before
    anything is sliced."""
    n, after = read_len(buf, pos, end)
    if n < 0:
        if n == -1 and nullable:
            return None, after
        raise bad(f"{what} length {n}", pos)
    if n > limit:
        # as Kafka's generated readers (MessageDataGenerator: "string field ... had
        # invalid length"): a compact length can say more than an int16 one
        raise bad(f"{what} of {n} bytes (at most {limit})", pos)
    if n > end - after:
        raise bad(f"{what} of {n} bytes past the end of the frame", pos)
    return after, after + n


def _string_reader(compact: bool, nullable: bool, name: str):
    read_len = _length_reader(compact, False)
    what = f"{name}: string"

    def read(buf, pos, end):
        start, stop = _read_span(read_len, buf, pos, end, nullable, what, 0x7FFF)
        if start is None:
            return None, stop
        try:
            return str(buf[start:stop], "utf-8"), stop
        except UnicodeDecodeError:
            raise bad(f"{name}: string is not UTF-8", start) from None
    return read


def _bytes_reader(compact: bool, nullable: bool, name: str, records: bool):
    read_len = _length_reader(compact, True)
    what = f"{name}: bytes"

    def read(buf, pos, end):
        start, stop = _read_span(read_len, buf, pos, end, nullable, what, 0x7FFFFFFF)
        if start is None:
            return None, stop
        # records: a slice of the frame (zero copy); bytes: a value of its own
        return (buf[start:stop] if records else bytes(buf[start:stop])), stop
    return read


def _array_reader(compact: bool, nullable: bool, name: str, elem, min_size: int, fixed_fmt):
    read_len = _length_reader(compact, True)
    min_size = max(min_size, 1)

    def read(buf, pos, end):
        start = pos
        n, pos = read_len(buf, pos, end)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise bad(f"{name}: array count {n}", start)
        # Kafka checks the count against the bytes left before allocating
        # (MessageDataGenerator's "Tried to allocate a collection of size ..."); every
        # element takes at least min_size bytes, so this check is the tighter one.
        if n * min_size > end - pos:
            raise bad(f"{name}: array of {n} elements past the end of the frame", start)
        if fixed_fmt is not None:
            st = struct.Struct(f">{n}{fixed_fmt}")
            return list(st.unpack_from(buf, pos)), pos + st.size
        out = []
        append = out.append
        for _ in range(n):
            value, pos = elem(buf, pos, end)
            append(value)
        return out, pos
    return read


# == compiling a struct ======================================================================

def _is_flexible(field: F, version: int, flexible: bool) -> bool:
    if field.flexible is not None:
        return in_range(version, field.flexible)
    return flexible


def _present(fields, version: int) -> list[F]:
    return [f for f in fields if in_range(version, f.versions)]


def _is_tagged(field: F, version: int) -> bool:
    return field.tag is not None and in_range(version, field.tagged)


def _default(field: F):
    """Kafka's default for a field: its JSON "default", else 0 / "" / [] / False /
    the zero UUID / null (records, single structs)."""
    if field.default is not UNSET:
        return field.default
    t = field.type
    if t.startswith("[]"):
        return []
    if t in FIXED:
        return FIXED[t][1]
    if t == "string":
        return ""
    if t == "bytes":
        return b""
    return None


def _fixed_size(field: F) -> int | None:
    """Bytes a field always takes, or None when it is variable."""
    if field.type in FIXED:
        return struct.calcsize(">" + FIXED[field.type][0])
    return None


def _min_size(fields, version: int, flexible: bool) -> int:
    """The fewest bytes a struct can take (for the count checks of arrays of it)."""
    total = 1 if flexible else 0  # the tagged-fields count
    for f in _present(fields, version):
        if _is_tagged(f, version):
            continue
        fx = _fixed_size(f)
        if fx is not None:
            total += fx
        elif f.type.startswith("[]") or f.type in ("string", "bytes", "records"):
            total += 1 if _is_flexible(f, version, flexible) else (
                2 if f.type == "string" else 4)
        elif f.fields is not None:
            total += _min_size(f.fields, version, flexible)
        else:
            total += 1  # varints
    return total


def _fixed_reader(t: str, name: str):
    st = struct.Struct(">" + FIXED[t][0])
    size, unpack = st.size, st.unpack_from

    def read_fixed(buf, pos, end):
        if end - pos < size:
            raise bad(f"{name}: {t} past the end of the frame", pos)
        return unpack(buf, pos)[0], pos + size
    return read_fixed


class _Kit(NamedTuple):
    """One direction's factories, for :func:`_field_codec`."""

    fixed: Callable    # (type, name)
    zigzag: Callable   # (type): varint / varlong
    string: Callable   # (compact, nullable, name)
    bytes: Callable    # (compact, nullable, name, records)
    array: Callable    # (compact, nullable, name, elem, min_size, fixed_fmt)
    struct: Callable   # (fields, version, flexible)


def _field_codec(field: F, version: int, flexible: bool, kit: _Kit):
    """The reader or writer (``kit`` says which) of one field at ``version``."""
    t = field.type
    compact = _is_flexible(field, version, flexible)
    nullable = in_range(version, field.nullable)
    name = field.name
    if t in FIXED:
        return kit.fixed(t, name)
    if t in ("varint", "varlong"):
        return kit.zigzag(t)
    if t == "string":
        return kit.string(compact, nullable, name)
    if t in ("bytes", "records"):
        return kit.bytes(compact, nullable, name, t == "records")
    if t.startswith("[]"):
        inner = t[2:]
        if field.fields is not None:
            return kit.array(compact, nullable, name,
                             kit.struct(field.fields, version, flexible),
                             _min_size(field.fields, version, flexible), None)
        if inner in FIXED and inner != "uuid":
            fmt = FIXED[inner][0]
            return kit.array(compact, nullable, name, None, struct.calcsize(">" + fmt), fmt)
        elem = _field_codec(F(name, inner, field.versions, flexible=field.flexible),
                            version, flexible, kit)
        return kit.array(compact, nullable, name, elem, 1, None)
    if field.fields is not None:
        return kit.struct(field.fields, version, flexible)
    raise TypeError(f"field {name}: unknown type {t}")


def _field_reader(field: F, version: int, flexible: bool):
    return _field_codec(field, version, flexible, _READ)


def compile_reader(fields, version: int, flexible: bool) -> Callable:
    """``read(buf, pos, end) -> (dict, pos)`` for a struct of ``fields`` at ``version``."""
    steps = []
    run: list[F] = []

    def close_run():
        if not run:
            return
        names = tuple(f.name for f in run)
        fmt = "".join(FIXED[f.type][0] for f in run)
        st = struct.Struct(">" + fmt)
        ends = []
        at = 0
        for f in run:
            at += struct.calcsize(">" + FIXED[f.type][0])
            ends.append(at)
        size, unpack = st.size, st.unpack_from

        def step_run(buf, pos, end, out):
            if end - pos < size:
                # error path only: name the first field of the run that does not fit
                first = next(i for i, stop in enumerate(ends) if pos + stop > end)
                start = pos + (ends[first - 1] if first else 0)
                raise bad(f"{names[first]}: past the end of the frame", start)
            out.update(zip(names, unpack(buf, pos)))
            return pos + size
        steps.append(step_run)
        run.clear()

    tagged = {}
    for f in _present(fields, version):
        if _is_tagged(f, version):
            tagged[f.tag] = (f, _field_reader(f, version, flexible))
            continue
        if f.type in FIXED:
            run.append(f)
            continue
        close_run()
        reader = _field_reader(f, version, flexible)

        def step_one(buf, pos, end, out, name=f.name, reader=reader):
            out[name], pos = reader(buf, pos, end)
            return pos
        steps.append(step_one)
    close_run()
    steps = tuple(steps)

    if not flexible:
        def read(buf, pos, end):
            out = {}
            for step in steps:
                pos = step(buf, pos, end, out)
            return out, pos
        return read

    def read_flexible(buf, pos, end):
        out = {}
        for step in steps:
            pos = step(buf, pos, end, out)
        if pos < end and buf[pos] == 0:
            return out, pos + 1  # no tagged fields: the common case
        return out, read_tagged(buf, pos, end, out, tagged)
    return read_flexible


def read_tagged(buf, pos: int, end: int, out: dict, tagged: dict) -> int:
    """The tagged fields at the end of a flexible struct (KIP-482): known tags decoded
    into ``out`` (each must fill exactly its declared size), unknown ones skipped, as
    Kafka's generated readers do (``_unknownTaggedFields``). ``tagged`` maps a tag to its
    field and reader.

    A known field sent at its default is left out of ``out``, as if absent: Kafka's
    generated objects cannot tell the two apart either (an absent field reads as its
    default, and the writers leave a default out), so a body decodes the same whichever
    of the two the client sent, and encodes back to the frame Kafka would write."""
    count, pos = read_uvarint(buf, pos, end)
    for _ in range(count):  # each takes >= 2 bytes: the loop ends with the bytes
        start = pos
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise bad(f"tagged field {tag} of {size} bytes past the end of the frame", start)
        known = tagged.get(tag)
        if known is not None:
            field, reader = known
            value, stop = reader(buf, pos, pos + size)
            if stop != pos + size:
                raise bad(f"tagged field {tag} ({field.name}) has {pos + size - stop} "
                          "bytes left over", stop)
            if _is_default(field, value):
                out.pop(field.name, None)  # a repeated tag: the last one wins, as in Kafka
            else:
                out[field.name] = value
        pos += size
    return pos


# == writers =================================================================================

def _encode_error(message: str) -> InvalidRequestError:
    return InvalidRequestError(message)


def _length_writer(compact: bool, wide: bool):
    if compact:
        def write_compact(buf, n):
            if 0 <= n < 0x7F:
                buf.append(n + 1)  # one byte: the common case
            else:
                write_uvarint(buf, n + 1)
        return write_compact
    pack = (_I32 if wide else _I16).pack

    def write_fixed(buf, n):
        buf += pack(n)
    return write_fixed


def _write_null(write_len, buf: bytearray, nullable: bool, name: str) -> None:
    if not nullable:
        raise _encode_error(f"{name} is not nullable in this version")
    write_len(buf, -1)


def _string_writer(compact: bool, nullable: bool, name: str):
    write_len = _length_writer(compact, False)

    def write(buf, parts, value):
        if value is None:
            _write_null(write_len, buf, nullable, name)
            return
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise _encode_error(f"{name}: string of {len(data)} bytes (max 32767)")
        write_len(buf, len(data))
        buf += data
    return write


def _bytes_writer(compact: bool, nullable: bool, name: str, records: bool):
    write_len = _length_writer(compact, True)

    def write(buf, parts, value):
        if value is None:
            _write_null(write_len, buf, nullable, name)
            return
        if records and (isinstance(value, FileRegion) or isinstance(value, list)):
            regions = [value] if isinstance(value, FileRegion) else value
            write_len(buf, sum(r.size if isinstance(r, FileRegion) else len(r)
                               for r in regions))
            for region in regions:
                if isinstance(region, FileRegion):
                    parts.append(bytes(buf))
                    del buf[:]
                    parts.append(region)
                else:
                    buf += region
            return
        write_len(buf, len(value))
        buf += value
    return write


def _array_writer(compact: bool, nullable: bool, name: str, elem, min_size, fixed_fmt):
    write_len = _length_writer(compact, True)

    def write(buf, parts, value):
        if value is None:
            _write_null(write_len, buf, nullable, name)
            return
        write_len(buf, len(value))
        if fixed_fmt is not None:
            buf += struct.pack(f">{len(value)}{fixed_fmt}", *value)
            return
        for item in value:
            elem(buf, parts, item)
    return write


def _fixed_writer(t: str, name: str):
    pack = struct.Struct(">" + FIXED[t][0]).pack

    def write_fixed(buf, parts, value):
        try:
            buf += pack(value)
        except struct.error as err:
            raise _encode_error(f"{name}: {err}") from None
    return write_fixed


def _field_writer(field: F, version: int, flexible: bool):
    return _field_codec(field, version, flexible, _WRITE)


def _is_default(field: F, value) -> bool:
    """Kafka writes a tagged field only when it differs from its default."""
    if field.fields is not None and not field.type.startswith("[]"):
        return value is None or all(value.get(f.name, _default(f)) == _default(f)
                                    for f in field.fields)
    return value == _default(field)


def compile_writer(fields, version: int, flexible: bool) -> Callable:
    """``write(buf, parts, dict)`` for a struct of ``fields`` at ``version``; a field
    missing from the dict is written as its default."""
    steps = []
    run: list[F] = []

    def close_run():
        if not run:
            return
        names = tuple((f.name, _default(f)) for f in run)
        pack = struct.Struct(">" + "".join(FIXED[f.type][0] for f in run)).pack

        def step_run(buf, parts, value):
            get = value.get
            try:
                buf += pack(*[get(n, d) for n, d in names])
            except struct.error as err:
                raise _encode_error(f"{', '.join(n for n, _ in names)}: {err}") from None
        steps.append(step_run)
        run.clear()

    tagged = []
    for f in _present(fields, version):
        if _is_tagged(f, version):
            tagged.append((f.tag, f, _field_writer(f, version, flexible)))
            continue
        if f.type in FIXED:
            run.append(f)
            continue
        close_run()
        writer = _field_writer(f, version, flexible)
        default = _default(f)
        struct_default = f.fields is not None and not f.type.startswith("[]")

        def step_one(buf, parts, value, name=f.name, writer=writer, default=default,
                     struct_default=struct_default):
            item = value.get(name, default)
            if struct_default and item is None:
                item = {}
            writer(buf, parts, item)
        steps.append(step_one)
    close_run()
    steps = tuple(steps)
    tagged.sort(key=lambda t: t[0])

    tagged_names = tuple(f.name for _, f, _ in tagged)

    def write(buf, parts, value):
        for step in steps:
            step(buf, parts, value)
        if not flexible:
            return
        for name in tagged_names:
            if name in value:
                break
        else:
            buf.append(0)  # the common case: no tagged field given
            return
        present = []
        for tag, f, writer in tagged:
            item = value.get(f.name, UNSET)
            if item is UNSET or _is_default(f, item):
                continue
            sub = bytearray()
            sub_parts: list = []
            writer(sub, sub_parts, item)
            if sub_parts:
                raise _encode_error(f"{f.name}: a file region in a tagged field")
            present.append((tag, sub))
        write_uvarint(buf, len(present))
        for tag, sub in present:
            write_uvarint(buf, tag)
            write_uvarint(buf, len(sub))
            buf += sub
    return write


_READ = _Kit(_fixed_reader, lambda t: _read_zigzag(5 if t == "varint" else 10),
             _string_reader, _bytes_reader, _array_reader, compile_reader)
_WRITE = _Kit(_fixed_writer, lambda t: _write_zigzag(32 if t == "varint" else 64),
              _string_writer, _bytes_writer, _array_writer, compile_writer)


def message_plan(message: Message, version: int) -> tuple[Callable, Callable]:
    """(reader, writer) of a whole message body at ``version``."""
    flexible = in_range(version, message.flexible)
    return (compile_reader(message.fields, version, flexible),
            compile_writer(message.fields, version, flexible))
