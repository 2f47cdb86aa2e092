"""Zig-zag varints: the compiled kernel against its pure-Python twin.

``impl`` names the module measured: ``compiled`` is ``kafkastore._ext.varint`` (skipped
when the extensions are not built), ``pure`` is ``kafkastore._pure.varint``. Both are
imported directly, whatever ``kafkastore._kernels.BACKEND`` says, so one run shows the
ratio the compiled backend buys.

Each call handles ``N`` values whose encoded lengths are spread evenly over every
possible length (1-5 bytes for varint, 1-10 for varlong), positive and negative, so no
length's fast path dominates. Per-call cost is time / ``N``.
"""

from __future__ import annotations

import importlib
import random

N = 10_000
_MODULES = {"compiled": "kafkastore._ext.varint", "pure": "kafkastore._pure.varint"}
_BITS = {"varint": 32, "varlong": 64}


def _values(kind: str, n: int, seed: int = 0) -> list[int]:
    """``n`` signed values of the width ``kind``, magnitudes of uniformly random bit length."""
    rng = random.Random(seed)
    bits = _BITS[kind]
    out = []
    for _ in range(n):
        magnitude_bits = rng.randrange(bits)  # 0 .. bits-1: every zig-zag length occurs
        value = rng.getrandbits(magnitude_bits) if magnitude_bits else 0
        out.append(-value - 1 if rng.getrandbits(1) else value)
    return out


def _module(impl: str):
    # Only a missing compiled kernel is a skip (a pure-only build); failing to import the
    # pure twin means kafkastore itself is not importable, which must fail loudly.
    if impl == "pure":
        return importlib.import_module(_MODULES[impl])
    try:
        return importlib.import_module(_MODULES[impl])
    except ImportError as exc:
        importlib.import_module("kafkastore")  # raises if kafkastore itself is missing
        raise NotImplementedError(f"{_MODULES[impl]} is not built ({exc})") from exc


class EncodeVarint:
    """Encode ``N`` values one call each (``encode_varint`` / ``encode_varlong``)."""

    params = [list(_MODULES), list(_BITS)]
    param_names = ["impl", "kind"]

    def setup(self, impl, kind):
        module = _module(impl)
        self.encode = getattr(module, f"encode_{kind}")
        self.values = _values(kind, N)

    def time_encode(self, impl, kind):
        encode = self.encode
        for v in self.values:
            encode(v)


class SizeOfVarint:
    """``size_of_varint`` / ``size_of_varlong`` of ``N`` values (the encoder's sizing pass)."""

    params = [list(_MODULES), list(_BITS)]
    param_names = ["impl", "kind"]

    def setup(self, impl, kind):
        module = _module(impl)
        self.size_of = getattr(module, f"size_of_{kind}")
        self.values = _values(kind, N)

    def time_size_of(self, impl, kind):
        size_of = self.size_of
        for v in self.values:
            size_of(v)


class DecodeVarint:
    """Decode ``N`` back-to-back values from one bytes buffer, following ``next_pos``."""

    params = [list(_MODULES), list(_BITS)]
    param_names = ["impl", "kind"]

    def setup(self, impl, kind):
        module = _module(impl)
        # The buffer is encoded by the pure twin, the reference, for both impls.
        reference = _module("pure")
        encode = getattr(reference, f"encode_{kind}")
        self.buffer = b"".join(encode(v) for v in _values(kind, N))
        self.decode = getattr(module, f"decode_{kind}")

    def time_decode(self, impl, kind):
        decode = self.decode
        buffer = self.buffer
        pos = 0
        for _ in range(N):
            _, pos = decode(buffer, pos)
