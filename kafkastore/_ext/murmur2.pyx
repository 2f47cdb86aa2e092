"""Kafka's murmur2 hash and its default partitioner for keyed records (compiled kernel).

Twin of ``kafkastore/_pure/murmur2.py``, which describes the algorithm and is the
oracle these functions are tested against: same names, same results, same
exceptions and messages. The hash itself is ``murmur2_hash`` in ``murmur2.pxd``.

Speed. A ``bytes`` key is hashed straight from its object; any other key goes
through the buffer protocol (``PyBUF_SIMPLE``: any C-contiguous buffer). The
``(offsets, data)`` form of :func:`partitions` validates and hashes every span
in one C loop without the GIL and without a Python object per key; the data
buffer stays pinned by its ``Py_buffer`` meanwhile.
"""

from cpython.buffer cimport (PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer,
                             PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

import numpy as np

__all__ = ["murmur2", "to_positive", "partition", "partitions"]

cdef enum:
    _DATA = -2          # _acquire's index for the data buffer of an (offsets, data) pair
    _INT32_MAX = 0x7fffffff

cdef str _NOT_KEYS = "keys must be an iterable of bytes-like keys or an (offsets, data) pair"


cdef str _what(Py_ssize_t index):
    return "key" if index == -1 else "data" if index == _DATA else f"key {index}"


cdef int _acquire(object obj, Py_buffer* view, Py_ssize_t index) except -1:
    """Get a C-contiguous byte buffer of ``obj`` into ``view``; the caller releases it.
    ``index`` names ``obj`` in errors: -1 the key, ``_DATA`` the data, else its position."""
    if obj is None and index != _DATA:
        raise TypeError(f"{_what(index)} is None: a null key has no murmur2 placement")
    if not PyObject_CheckBuffer(obj):
        raise TypeError(f"{_what(index)} must be a bytes-like object, not {type(obj).__name__!r}")
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except (BufferError, ValueError) as exc:
        # exporters differ (memoryview: BufferError, older numpy: ValueError)
        raise BufferError(f"{_what(index)} must be a C-contiguous buffer") from exc
    return 0


cdef inline int _hash_key(object key, Py_ssize_t index, uint32_t* out) except -1:
    """murmur2 of ``key`` into ``out``: bytes directly, anything else by its buffer."""
    cdef Py_buffer view
    if type(key) is bytes:
        out[0] = murmur2_hash(<const uint8_t*>PyBytes_AS_STRING(key),
                              <size_t>PyBytes_GET_SIZE(key))
        return 0
    _acquire(key, &view, index)
    out[0] = murmur2_hash(<const uint8_t*>view.buf, <size_t>view.len)
    PyBuffer_Release(&view)
    return 0


cdef uint32_t _check_num_partitions(object num_partitions) except 0:
    n = PyNumber_Index(num_partitions)
    if not 1 <= n <= _INT32_MAX:
        raise ValueError(f"num_partitions must be between 1 and {_INT32_MAX}, not {n}")
    return <uint32_t>n


cdef object _offsets_pair(object keys):
    """``(offsets, data)`` if ``keys`` is an Arrow-style pair, else None (see the twin)."""
    if isinstance(keys, tuple) and len(keys) == 2:
        offsets = keys[0]
        if (isinstance(offsets, np.ndarray) and offsets.ndim == 1
                and offsets.dtype.kind == "i" and offsets.dtype.itemsize in (4, 8)):
            return keys
    return None


def murmur2(data):
    """Kafka's ``Utils.murmur2`` of the bytes of ``data``, as a signed Java int.

    Raises TypeError for None or an object that is not bytes-like, BufferError
    for a buffer that is not C-contiguous.
    """
    cdef uint32_t h
    if type(data) is bytes:   # the common case, without the call below
        return <int32_t>murmur2_hash(<const uint8_t*>PyBytes_AS_STRING(data),
                                     <size_t>PyBytes_GET_SIZE(data))
    _hash_key(data, -1, &h)
    return <int32_t>h


def to_positive(h):
    """Kafka's ``Utils.toPositive``: ``h & 0x7fffffff`` (drops the sign bit)."""
    return h & 0x7fffffff


def partition(key, num_partitions):
    """The partition Kafka's default partitioner gives a record with ``key``:
    ``to_positive(murmur2(key)) % num_partitions``. See the twin for the errors."""
    cdef uint32_t h
    cdef uint32_t n = _check_num_partitions(num_partitions)
    _hash_key(key, -1, &h)
    return murmur2_partition(h, n)


def partitions(keys, num_partitions):
    """:func:`partition` of many keys at once, as a numpy int32 array: ``keys`` is an
    iterable of bytes-like keys or an Arrow-style ``(offsets, data)`` pair (see the twin)."""
    cdef uint32_t h
    cdef uint32_t n = _check_num_partitions(num_partitions)
    cdef Py_ssize_t i, count
    cdef int32_t[::1] out_view
    pair = _offsets_pair(keys)
    if pair is not None:
        return _partitions_pair(pair[0], pair[1], n)
    if not isinstance(keys, (list, tuple)):
        try:
            keys = iter(keys)
        except TypeError:
            raise TypeError(_NOT_KEYS) from None
        keys = list(keys)
    count = len(keys)
    out = np.empty(count, dtype=np.int32)
    out_view = out
    for i in range(count):
        _hash_key(keys[i], i, &h)
        out_view[i] = murmur2_partition(h, n)
    return out


cdef Py_ssize_t _place_spans(const int64_t* offsets, Py_ssize_t count, const uint8_t* data,
                             int64_t size, uint32_t n, int32_t* out) noexcept nogil:
    """Place key ``i = data[offsets[i]:offsets[i + 1]]`` for ``i < count``, checking each
    offset before the bytes it bounds are read. Returns -1 when all are valid, else the
    position of the first bad offset (0: offsets[0] is outside data)."""
    cdef Py_ssize_t i
    cdef int64_t start = offsets[0], end
    if start < 0 or start > size:
        return 0
    for i in range(count):
        end = offsets[i + 1]
        if end < start or end > size:
            return i + 1
        out[i] = murmur2_partition(murmur2_hash(data + start, <size_t>(end - start)), n)
        start = end
    return -1


cdef object _partitions_pair(object offsets, object data, uint32_t n):
    cdef const int64_t[::1] offs = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef Py_ssize_t count = offs.shape[0] - 1
    cdef Py_ssize_t bad
    cdef int64_t size
    cdef int32_t[::1] out_view
    cdef Py_buffer view
    if count < 0:
        raise ValueError("offsets must hold n + 1 entries for n keys, not 0")
    out = np.empty(count, dtype=np.int32)
    out_view = out
    _acquire(data, &view, _DATA)
    size = view.len
    with nogil:
        bad = _place_spans(&offs[0], count, <const uint8_t*>view.buf, size, n,
                           &out_view[0] if count else NULL)
    PyBuffer_Release(&view)
    if bad == 0:
        raise ValueError(f"offsets[0] = {offs[0]} is outside data of {size} bytes")
    if bad > 0:
        if offs[bad] < offs[bad - 1]:
            raise ValueError(
                f"offsets[{bad}] = {offs[bad]} is less than offsets[{bad - 1}] = {offs[bad - 1]}"
            )
        raise ValueError(f"offsets[{bad}] = {offs[bad]} is past the end of data ({size} bytes)")
    return out
