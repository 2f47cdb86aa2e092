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


def body_strategy(message, version: int):
    """A hypothesis strategy of bodies of ``message`` at ``version``: any value of each
    field's type, null where the version allows it, arrays of 0-3, tagged fields present
    or not."""
    from hypothesis import strategies as st

    flexible = in_range(version, message.flexible)
    ints = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}

    def scalar(t: str):
        if t == "bool":
            return st.booleans()
        if t in ints:
            bits = ints[t]
            return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if t == "uint16":
            return st.integers(0, 0xFFFF)
        if t == "uint32":
            return st.integers(0, 0xFFFFFFFF)
        if t == "float64":
            return st.floats(allow_nan=False)
        if t == "uuid":
            return st.binary(min_size=16, max_size=16)
        if t == "string":
            return st.text(max_size=12)
        if t in ("bytes", "records"):
            return st.binary(max_size=40)
        raise TypeError(t)

    def field(f):
        t = f.type
        if t.startswith("[]"):
            inner = (struct(f.fields) if f.fields is not None else scalar(t[2:]))
            value = st.lists(inner, max_size=3)
        elif f.fields is not None:
            value = struct(f.fields)
        else:
            value = scalar(t)
        return st.none() | value if in_range(version, f.nullable) else value

    def struct(fields):
        required, optional = {}, {}
        for f in fields:
            if not in_range(version, f.versions):
                continue
            if f.tag is not None and in_range(version, f.tagged):
                if flexible:
                    optional[f.name] = field(f)
            else:
                required[f.name] = field(f)
        return st.fixed_dictionaries(required, optional=optional)

    return struct(message.fields)
