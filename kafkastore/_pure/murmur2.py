"""Kafka's murmur2 hash and its default partitioner for keyed records.

Pure-Python twin of ``kafkastore/_ext/murmur2.pyx``: same names, same
signatures, same results and errors. It is the readable reference and the test
oracle for the compiled kernel.

The hash is MurmurHash2 (32-bit) as Kafka's ``Utils.murmur2`` computes it:

* constants: seed ``0x9747b28c``, multiplier ``m = 0x5bd1e995``, shift ``r = 24``;
* ``h = seed ^ len(data)``;
* each whole 4-byte word ``k`` of ``data``, read little-endian:
  ``k *= m; k ^= k >>> r; k *= m; h *= m; h ^= k``;
* the 1 to 3 bytes left over are XORed into ``h`` as a little-endian value
  (byte 2 << 16, byte 1 << 8, byte 0: Java's falling-through ``switch``), then
  ``h *= m``; no tail, no multiplication;
* final mix: ``h ^= h >>> 13; h *= m; h ^= h >>> 15``.

All arithmetic wraps at 32 bits, and the result is read as a Java ``int``
(signed). Kafka's default partitioner places a keyed record in partition
``toPositive(murmur2(key)) % numPartitions`` with ``toPositive(h) = h &
0x7fffffff``. A null key has no murmur2 placement (Kafka spreads null keys
with its sticky partitioner), so these functions refuse ``None``.

Keys are any C-contiguous bytes-like object (bytes, bytearray, memoryview,
a numpy array: its raw bytes are hashed). Strings are not keys: encode them as
the producer's serializer would.
"""

from __future__ import annotations

import operator
import struct

import numpy as np

__all__ = ["murmur2", "to_positive", "partition", "partitions"]

SEED = 0x9747B28C
M = 0x5BD1E995
R = 24
_MASK32 = 0xFFFFFFFF
_INT32_MAX = 0x7FFFFFFF
_DATA = -2          # _view's index for the data buffer of an (offsets, data) pair
_NOT_KEYS = "keys must be an iterable of bytes-like keys or an (offsets, data) pair"


def _hash(data) -> int:
    """murmur2 of the bytes of ``data`` (bytes or a 1-D memoryview of bytes), unsigned."""
    n = len(data)
    words = n >> 2
    h = (SEED ^ n) & _MASK32
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * M) & _MASK32
        k ^= k >> R
        k = (k * M) & _MASK32
        h = ((h * M) & _MASK32) ^ k
    if n & 3:
        h ^= int.from_bytes(data[words * 4 :], "little")
        h = (h * M) & _MASK32
    h ^= h >> 13
    h = (h * M) & _MASK32
    return h ^ (h >> 15)


def _what(index: int) -> str:
    return "key" if index == -1 else "data" if index == _DATA else f"key {index}"


def _view(obj, index: int = -1):
    """The bytes of ``obj``: ``obj`` itself for bytes, else a 1-D byte memoryview.

    ``index`` names ``obj`` in errors: -1 the key, ``_DATA`` the data buffer, else
    the key's position in a bulk call.
    """
    if type(obj) is bytes:
        return obj
    if obj is None and index != _DATA:
        raise TypeError(f"{_what(index)} is None: a null key has no murmur2 placement")
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"{_what(index)} must be a bytes-like object, not {type(obj).__name__!r}"
        ) from None
    if not view.c_contiguous:
        raise BufferError(f"{_what(index)} must be a C-contiguous buffer")
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view


def _check_num_partitions(num_partitions) -> int:
    n = operator.index(num_partitions)
    if not 1 <= n <= _INT32_MAX:
        raise ValueError(f"num_partitions must be between 1 and {_INT32_MAX}, not {n}")
    return n


def _offsets_pair(keys):
    """``(offsets, data)`` if ``keys`` is an Arrow-style pair, else None.

    The pair is a tuple of two whose first item is a 1-D numpy array of int32 or
    int64: a list (or a tuple of another shape) is always a sequence of keys.
    """
    if isinstance(keys, tuple) and len(keys) == 2:
        offsets = keys[0]
        if (isinstance(offsets, np.ndarray) and offsets.ndim == 1
                and offsets.dtype.kind == "i" and offsets.dtype.itemsize in (4, 8)):
            return keys
    return None


def murmur2(data) -> int:
    """Kafka's ``Utils.murmur2`` of the bytes of ``data``, as a signed Java int.

    Raises TypeError for None or an object that is not bytes-like, BufferError
    for a buffer that is not C-contiguous.
    """
    h = _hash(_view(data))
    return h - (1 << 32) if h > _INT32_MAX else h


def to_positive(h: int) -> int:
    """Kafka's ``Utils.toPositive``: ``h & 0x7fffffff`` (drops the sign bit)."""
    return h & 0x7FFFFFFF


def partition(key, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives a record with ``key``:
    ``to_positive(murmur2(key)) % num_partitions``.

    Raises ValueError unless ``1 <= num_partitions <= 2**31 - 1`` (checked first),
    TypeError for a null key (``None``: it has no murmur2 placement) and as
    :func:`murmur2` for other keys.
    """
    n = _check_num_partitions(num_partitions)
    return (_hash(_view(key)) & 0x7FFFFFFF) % n


def partitions(keys, num_partitions: int) -> np.ndarray:
    """:func:`partition` of many keys at once, as a numpy int32 array.

    ``keys`` is either

    * an iterable of bytes-like keys (a list, a tuple, a generator); key ``i``
      that is None or not bytes-like raises as :func:`partition` does, naming
      ``i``; or
    * an Arrow-style pair ``(offsets, data)``: ``offsets`` a 1-D numpy int64 (or
      int32, as Arrow's ``binary`` type) array of ``n + 1`` positions into
      ``data``, a bytes-like buffer; key ``i`` is ``data[offsets[i]:offsets[i + 1]]``.
      Arrow has no null key here: a null slot (``offsets[i] == offsets[i + 1]``)
      is placed as the empty key, so callers take null keys out through the
      validity bitmap themselves. ValueError if ``offsets`` is empty, if
      ``offsets[0]`` is outside ``data``, or for the first ``i`` where
      ``offsets[i]`` is less than ``offsets[i - 1]`` or past the end of ``data``.

    A tuple of two is read as the pair only when its first item is such an
    array; pass a list to hash keys that happen to look like one.
    """
    n = _check_num_partitions(num_partitions)
    pair = _offsets_pair(keys)
    if pair is not None:
        return _partitions_pair(pair[0], pair[1], n)
    if not isinstance(keys, (list, tuple)):
        try:
            keys = iter(keys)
        except TypeError:
            raise TypeError(_NOT_KEYS) from None
        keys = list(keys)
    out = np.empty(len(keys), dtype=np.int32)
    for i, key in enumerate(keys):
        out[i] = (_hash(_view(key, i)) & 0x7FFFFFFF) % n
    return out


def _partitions_pair(offsets, data, n: int) -> np.ndarray:
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    count = offsets.shape[0] - 1
    if count < 0:
        raise ValueError("offsets must hold n + 1 entries for n keys, not 0")
    view = _view(data, _DATA)
    size = len(view)
    first = int(offsets[0])
    if not 0 <= first <= size:
        raise ValueError(f"offsets[0] = {first} is outside data of {size} bytes")
    starts, ends = offsets[:-1], offsets[1:]
    bad = np.flatnonzero((ends < starts) | (ends > size))
    if bad.size:
        i = int(bad[0]) + 1
        if offsets[i] < offsets[i - 1]:
            raise ValueError(
                f"offsets[{i}] = {offsets[i]} is less than offsets[{i - 1}] = {offsets[i - 1]}"
            )
        raise ValueError(f"offsets[{i}] = {offsets[i]} is past the end of data ({size} bytes)")
    out = np.empty(count, dtype=np.int32)
    for i, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
        out[i] = (_hash(view[start:end]) & 0x7FFFFFFF) % n
    return out
