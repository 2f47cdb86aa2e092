"""Representative message bodies for the protocol codec's tests and fuzz seeds.

:func:`example_body` builds, for a message description at a version, a body dict with
every field that version has: ``"full"`` gives each field a value that is not its
default (strings with non-ASCII text, arrays of two, tagged fields set, records bytes),
``"sparse"`` nulls what may be null, empties arrays and leaves tagged fields out. The
values are made from the field's name and position so that two fields never share one
(a codec that swapped two fields would be caught).
"""

from __future__ import annotations

import zlib

from kafkastore.server.protocol.schema import in_range

__all__ = ["example_body", "normalize"]

_RANGES = {"bool": None, "int8": 0x7F, "int16": 0x7FFF, "uint16": 0xFFFF,
           "int32": 0x7FFFFFFF, "uint32": 0xFFFFFFFF, "int64": 0x7FFFFFFFFFFFFFFF}


def _seed(name: str, salt: int) -> int:
    return zlib.crc32(f"{name}/{salt}".encode())


def _scalar(field, salt: int, sparse: bool):
    t = field.type
    n = _seed(field.name, salt)
    if t == "bool":
        return not field.default if field.default in (True, False) else True
    if t in _RANGES:
        value = n % _RANGES[t] + 1
        if t.startswith("int") and n & 1 and not sparse:
            value = -value  # negative values too (big-endian signed)
        return value
    if t == "float64":
        return n / 7.0
    if t == "uuid":
        return n.to_bytes(4, "big") * 4
    if t == "string":
        return f"{field.name}-{n % 1000}-é" if not sparse else ""
    if t in ("bytes", "records"):
        return bytes(range(n % 50, n % 50 + 40))
    raise TypeError(t)


def example_body(message, version: int, variant: str = "full", salt: int = 0) -> dict:
    """A body of ``message`` at ``version`` (see the module docstring)."""
    flexible = in_range(version, message.flexible)
    return _struct(message.fields, version, flexible, variant == "sparse", salt)


def _struct(fields, version, flexible, sparse, salt) -> dict:
    out = {}
    for i, f in enumerate(fields):
        if not in_range(version, f.versions):
            continue
        tagged = f.tag is not None and in_range(version, f.tagged)
        if tagged and (sparse or not flexible):
            continue
        nullable = in_range(version, f.nullable)
        if sparse and nullable:
            out[f.name] = None
            continue
        out[f.name] = _value(f, version, flexible, sparse, salt * 31 + i)
    return out


def _value(f, version, flexible, sparse, salt):
    t = f.type
    if t.startswith("[]"):
        if sparse:
            return []
        if f.fields is not None:
            return [_struct(f.fields, version, flexible, sparse, salt * 7 + k) for k in (1, 2)]
        inner = type(f)(f.name, t[2:], f.versions)
        return [_scalar(inner, salt * 7 + k, sparse) for k in (1, 2)]
    if f.fields is not None:
        return _struct(f.fields, version, flexible, False, salt)
    return _scalar(f, salt, sparse)


def normalize(value):
    """Records come back as memoryviews of the frame: compare them as bytes."""
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value
