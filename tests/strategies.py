"""Hypothesis strategies shared by the record-format tests.

Records are drawn as :class:`RecSpec` (what the caller meant) and turned into the
input shapes :func:`kafkastore.records.encode_batch` accepts with :func:`as_input`, so a
test can compare what it reads back with the spec rather than with another run of
kafkastore.
"""

from __future__ import annotations

import types
from typing import NamedTuple

from hypothesis import settings
from hypothesis import strategies as st

from kafkastore.types import CompressionType, TimestampType

I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
HALF64 = 1 << 62

CODECS = tuple(CompressionType)
LEGACY_CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                 CompressionType.LZ4)
TIMESTAMP_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)


def scaled(factor: float, **kw) -> settings:
    """Settings with ``factor`` times the active profile's max_examples (at least 5), so
    the ``ci`` and ``expensive`` profiles still scale tests that need a smaller budget."""
    return settings(max_examples=max(5, int(settings.default.max_examples * factor)), **kw)


class RecSpec(NamedTuple):
    """One record as the test means it: ``timestamp`` None = "use the batch default"."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: tuple = ()


# -- building blocks ------------------------------------------------------------------

#: Keys and values: null, empty, or a few bytes (sometimes long enough to need a
#: multi-byte varint length).
payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=40),
    st.binary(min_size=120, max_size=300),
)

#: Header keys: any text without surrogates (so every peer can encode it as UTF-8), and
#: the awkward ones named explicitly (empty, astral-plane emoji, NUL, U+10FFFF).
header_keys = st.one_of(
    st.sampled_from(["", "\U0001F600", "\U0001F984\U0001F525", "ключ", "キー", "a\x00b",
                     "\U0010FFFF", "trace-id"]),
    st.text(max_size=12),
)
header_values = st.one_of(st.none(), st.just(b""), st.binary(max_size=24))
headers = st.lists(st.tuples(header_keys, header_values), max_size=4).map(tuple)

int16s = st.integers(I16_MIN, I16_MAX)
int32s = st.integers(I32_MIN, I32_MAX)
int64s = st.integers(I64_MIN, I64_MAX)

#: Base offsets leaving room for a full int32 offset delta above them.
base_offsets = st.one_of(
    st.integers(0, 1 << 40),
    st.integers(0, I64_MAX - I32_MAX),
    st.sampled_from([0, 1, I64_MAX - I32_MAX]),
)
producer_ids = st.one_of(st.just(-1), st.integers(0, 1 << 40), int64s)
producer_epochs = st.one_of(st.just(-1), int16s)
base_sequences = st.one_of(st.just(-1), st.integers(0, I32_MAX), int32s)
leader_epochs = st.one_of(st.just(-1), st.integers(0, 1000), int32s)


@st.composite
def timestamp_lists(draw, n: int, *, allow_none: bool = True) -> list:
    """``n`` timestamps over the whole int64 range whose pairwise differences fit int64.

    All of them lie within 2**62 - 1 of an anchor in [-2**62, 2**62), so any delta between
    two of them (and between one and the batch's base timestamp) is representable. A
    single timestamp may be anything in int64. ``None`` means "the batch default".
    """
    if n == 1 and draw(st.booleans()):
        stamps = [draw(st.one_of(int64s, st.sampled_from([I64_MIN, I64_MAX, -1, 0])))]
    else:
        anchor = draw(st.one_of(
            st.integers(1_500_000_000_000, 1_800_000_000_000),  # "now"-ish epoch millis
            st.integers(-HALF64, HALF64 - 1),
            st.sampled_from([-1, 0, -HALF64, HALF64 - 1]),
        ))
        spread = draw(st.sampled_from([0, 1000, I32_MAX, HALF64 - 1]))
        stamps = [anchor + draw(st.integers(-spread, spread)) for _ in range(n)]
    if allow_none:
        stamps = [None if draw(st.integers(0, 5)) == 0 else ts for ts in stamps]
    return stamps


@st.composite
def record_specs(draw, *, min_size: int = 1, max_size: int = 8, with_headers: bool = True,
                 allow_none_ts: bool = True) -> tuple:
    """``(specs, default_timestamp)``: a list of :class:`RecSpec` and a batch default
    timestamp, all within int64-representable deltas of each other."""
    n = draw(st.integers(min_size, max_size))
    if n == 1 and draw(st.integers(0, 3)) == 0:
        # a lone record may sit anywhere in int64, extremes included
        ts = draw(st.one_of(int64s, st.sampled_from([I64_MIN, I64_MAX])))
        hdrs = draw(headers) if with_headers else ()
        return [RecSpec(draw(payloads), draw(payloads), ts, hdrs)], ts
    stamps = draw(timestamp_lists(n + 1, allow_none=False))
    default = stamps.pop()
    if allow_none_ts:
        stamps = [None if draw(st.integers(0, 5)) == 0 else ts for ts in stamps]
    out = []
    for ts in stamps:
        hdrs = draw(headers) if with_headers else ()
        out.append(RecSpec(draw(payloads), draw(payloads), ts, hdrs))
    return out, default


def as_input(spec: RecSpec, shape: str):
    """``spec`` in one of the shapes ``encode_batch`` accepts.

    ``tuple4``/``list4``: every field; ``short``: the shortest tuple that carries the
    record (2- or 3-tuple when the later fields are defaults); ``object``: a plain object
    with attributes; ``object2``: an object with only ``key`` and ``value`` (used when the
    record has no timestamp and no headers).
    """
    if shape == "tuple4":
        return (spec.key, spec.value, spec.timestamp, list(spec.headers))
    if shape == "list4":
        return [spec.key, spec.value, spec.timestamp, list(spec.headers)]
    if shape == "short":
        if not spec.headers:
            if spec.timestamp is None:
                return (spec.key, spec.value)
            return (spec.key, spec.value, spec.timestamp)
        return (spec.key, spec.value, spec.timestamp, spec.headers)
    if shape == "object":
        return types.SimpleNamespace(key=spec.key, value=spec.value, timestamp=spec.timestamp,
                                     headers=list(spec.headers))
    if shape == "object2":
        if spec.timestamp is None and not spec.headers:
            return types.SimpleNamespace(key=spec.key, value=spec.value)
        return types.SimpleNamespace(key=spec.key, value=spec.value, timestamp=spec.timestamp,
                                     headers=list(spec.headers))
    if shape == "bytearray":
        # bytes-like but not bytes: must be accepted and read back as bytes
        return (None if spec.key is None else bytearray(spec.key),
                None if spec.value is None else memoryview(spec.value),
                spec.timestamp, list(spec.headers))
    raise ValueError(shape)


input_shapes = st.sampled_from(["tuple4", "list4", "short", "object", "object2", "bytearray"])


def resolved_timestamps(specs, default: int) -> list:
    """The timestamp each record will carry: its own, or the batch default."""
    return [default if s.timestamp is None else s.timestamp for s in specs]


def compressible(n: int, seed: int = 0) -> bytes:
    """``n`` bytes every codec shrinks (so a peer never falls back to no compression)."""
    unit = b"kafkastore-%d-" % seed + b"abcdefgh" * 4
    return (unit * (n // len(unit) + 1))[:n]
