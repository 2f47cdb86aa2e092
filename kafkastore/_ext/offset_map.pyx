"""The log cleaner's offset map (Kafka's ``SkimpyOffsetMap``) and its record walks (compiled).

Twin of ``kafkastore/_pure/offset_map.py``, which documents the records-section
format, the validation rules and the map's semantics, and is the oracle these
kernels are tested against: same names, same results, same digests for the
same hash key, same exceptions and messages.

Speed. The default table is 128 MiB, so nearly every probe is a cache (and TLB)
miss. The bulk walks therefore work in two phases: first parse the whole
records section and SipHash every key that needs the map into a C array
(together with its first probe slot), then put or get in record order while
prefetching the first slot of the digest ``_PREFETCH`` entries ahead, so that
those misses overlap. No Python object is created per record, and the GIL is
released around both phases (the records buffer stays pinned by a typed
memoryview meanwhile).

Safety. Every byte of ``records`` is bounds-checked before it is read (the
nogil parser reports an error code; the exception is raised once the GIL is
held again). Allocations are sized from ``count`` only after checking it
against the bytes present (a record takes at least 7 bytes), and the output of
:func:`select_records` is sized from the validated records.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport (PyMem_Free, PyMem_Malloc, PyMem_RawCalloc, PyMem_RawFree,
                          PyMem_RawMalloc)
from cpython.number cimport PyNumber_Index
from libc.stdint cimport INT32_MIN, INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from kafkastore._ext.consts cimport MIN_RECORD_SIZE
from kafkastore._ext.default_record cimport (RECORD_ERROR_END, RecordError, RecordSpan,
                                             read_record, record_error_message, record_fail)
from kafkastore._ext.endian cimport ks_load_be32
from kafkastore._ext.reader cimport add64, as_view, view_ptr
from kafkastore._ext.varint cimport uvarint_size, uvarint_write, zigzag32, zigzag64

# numpy only for a random default hash key: SeedSequence() draws 128 bits of entropy
# from the OS CSPRNG (secrets.randbits). Kernels may not import os (tests/test_backend.py).
import numpy as np

from kafkastore.errors import CorruptRecordError, OffsetMapFullError, RecordTooLargeError

__all__ = ["RetainResult", "Selection", "SkimpyOffsetMap", "select_records"]


cdef extern from "ks_siphash.h" nogil:
    void ks_siphash128(const uint8_t* key, const uint8_t* data, size_t len, uint8_t* out)

cdef extern from "ks_prefetch.h" nogil:
    void ks_prefetch(const void* p)


cdef enum:
    HASH_SIZE = 16
    BYTES_PER_ENTRY = 24
    MAX_WINDOW = 12          # hashSize - 4: the last 4-byte window of the digest
    # How many entries ahead of the put or get at hand the first slot is prefetched:
    # enough to cover a DRAM miss (~100 ns) at ~15 ns of table work per entry.
    _PREFETCH = 8

    # the batch-level error codes of the nogil loops, after the record parser's
    # (default_record.pxd); _raise_error turns either into an exception
    E_EOF = RECORD_ERROR_END
    E_TRAILING
    E_TOO_LARGE
    E_MAP_FULL
    E_NO_MEMORY
    # clear(expected_entries): the smallest probed prefix
    MIN_TABLE_SLOTS = 1024

cdef int64_t INT32_MAX_ = 2147483647


# -- results ------------------------------------------------------------------------------


def _result_type(name, fields, doc):
    """A named-tuple class (``_fields``, a property per field, pickling by name): what
    ``typing.NamedTuple`` makes in the pure twin, without importing it into a kernel."""

    def __new__(cls, *values):
        if len(values) != len(fields):
            raise TypeError(f"{name} takes {len(fields)} values, not {len(values)}")
        return tuple.__new__(cls, values)

    def __repr__(self):
        return f"{name}({', '.join(f'{f}={v!r}' for f, v in zip(fields, self))})"

    namespace = {"__slots__": (), "_fields": fields, "__doc__": doc, "__new__": __new__,
                 "__getnewargs__": lambda self: tuple(self), "__repr__": __repr__,
                 "__module__": __name__}
    for i, field in enumerate(fields):
        namespace[field] = property(lambda self, i=i: tuple.__getitem__(self, i))
    return type(name, (tuple,), namespace)


RetainResult = _result_type(
    "RetainResult", ("mask", "kept", "tombstones_kept", "keyless_dropped"),
    """What :meth:`SkimpyOffsetMap.retained_mask` decided for one records section:
    ``(mask, kept, tombstones_kept, keyless_dropped)``, a named tuple like the pure
    twin's.

    ``mask`` has one byte per record (1 keep, 0 drop); ``kept`` counts the records
    kept; ``tombstones_kept`` the kept records with a null value (Kafka's
    containsTombstones); ``keyless_dropped`` the records dropped for having no key.
    """)

Selection = _result_type(
    "Selection", ("records", "first_timestamp", "max_timestamp"),
    """What :func:`select_records` built: ``(records, first_timestamp, max_timestamp)``,
    a named tuple like the pure twin's (the timestamps are -1 when nothing was kept).""")


# -- parsing -------------------------------------------------------------------------------


cdef inline int _next_record(const uint8_t* d, Py_ssize_t pos, Py_ssize_t n, RecordSpan* r,
                             RecordError* e) noexcept nogil:
    # a record must start inside the section: fewer bytes than `count` records
    if pos >= n:
        return record_fail(e, E_EOF, pos, 0, 0)
    # the one v2 record parser, the reader's (default_record.pxd): the cleaner accepts
    # exactly the records the reader accepts (any negative key length is a null key)
    return read_record(d, pos, n, r, e)


cdef inline int _check_end(Py_ssize_t pos, Py_ssize_t n, Py_ssize_t count,
                           RecordError* e) noexcept nogil:
    # bytes after `count` records: Kafka's "records still remaining"
    if pos != n:
        return record_fail(e, E_TRAILING, pos, n - pos, count)
    return 0


# The message of each batch-level code ({a} and {b}: the error's values), as the pure
# twin words them; the record-level ones are the record parser's (record_error_message).
_CORRUPT_MESSAGES = {
    E_EOF: "Incorrect declared batch size, premature EOF reached",
    E_TRAILING: ("Incorrect declared batch size, records still remaining in file "
                 "({a} bytes after {b} records)"),
}


cdef int _raise_error(const RecordError* e) except -1:
    """Raise the exception for a code the nogil loops reported (messages as the pure twin's)."""
    cdef int code = e.code
    cdef Py_ssize_t where = e.position
    if code == E_NO_MEMORY:
        raise MemoryError("cannot grow the offset map's probed table")
    if code == E_MAP_FULL:
        raise OffsetMapFullError("Attempted to add a new entry to a full offset map.")
    if code == E_TOO_LARGE:
        raise RecordTooLargeError(f"a record of {e.a} bytes does not fit an int32 length",
                                  position=where, limit=INT32_MAX_)
    if code < RECORD_ERROR_END:
        message = record_error_message(e)
    else:
        message = _CORRUPT_MESSAGES.get(code, "corrupt records (error {code})").format(
            a=e.a, b=e.b, code=code)
    raise CorruptRecordError(message, position=where)


cdef Py_ssize_t _check_count(object count, Py_ssize_t n) except -1:
    count = PyNumber_Index(count)
    if count < 0 or count > n // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"Found invalid record count {count} for {n} bytes of records",
                                 position=0)
    return <Py_ssize_t>count


# -- the table -----------------------------------------------------------------------------


cdef inline int64_t _slot(const uint8_t* digest, int64_t attempt, int64_t slots) noexcept nogil:
    """Kafka's ``positionOf`` as a slot number.

    ``probe = readIntBE(digest, min(attempt, 12)) + max(0, attempt - 12)`` is Java int
    arithmetic: the sum wraps at 32 bits (done in uint32, where wrapping is defined),
    and ``Utils.abs(Integer.MIN_VALUE)`` is 0.
    """
    cdef uint32_t probe
    cdef int32_t signed_probe
    if attempt < MAX_WINDOW:
        probe = ks_load_be32(digest + attempt)
    else:
        probe = ks_load_be32(digest + MAX_WINDOW) + <uint32_t>(attempt - MAX_WINDOW)
    signed_probe = <int32_t>probe
    if signed_probe == INT32_MIN:
        return 0
    if signed_probe < 0:
        return (-<int64_t>signed_probe) % slots
    return (<int64_t>signed_probe) % slots


cdef inline bint _empty(const uint8_t* p) noexcept nogil:
    cdef uint64_t a, b, c
    memcpy(&a, p, 8)
    memcpy(&b, p + 8, 8)
    memcpy(&c, p + 16, 8)
    return (a | b | c) == 0


cdef inline bint _same(const uint8_t* p, const uint8_t* digest) noexcept nogil:
    cdef uint64_t a0, a1, b0, b1
    memcpy(&a0, p, 8)
    memcpy(&a1, p + 8, 8)
    memcpy(&b0, digest, 8)
    memcpy(&b1, digest + 8, 8)
    return a0 == b0 and a1 == b1


cdef inline void _prefetch_slot(const OMap* m, int64_t slot) noexcept nogil:
    cdef const uint8_t* p = m.table + slot * BYTES_PER_ENTRY
    ks_prefetch(p)
    ks_prefetch(p + BYTES_PER_ENTRY - 1)  # a 24-byte slot may straddle two cache lines


cdef void _om_put(OMap* m, const uint8_t* digest, int64_t slot, int64_t offset) noexcept nogil:
    """Kafka's ``put`` for a digest whose first slot is ``slot``; the caller checked room.

    Terminates: with an empty slot somewhere, the linear phase (attempt >= 12) walks
    consecutive int32 probes, whose absolute values cover every residue mod ``slots``.
    """
    cdef int64_t attempt = 0
    cdef uint8_t* p
    m.lookups += 1
    m.probes += 1
    while True:
        p = m.table + slot * BYTES_PER_ENTRY
        if _empty(p):
            memcpy(p, digest, HASH_SIZE)
            # host byte order: the table is private to this process and never serialized
            memcpy(p + HASH_SIZE, &offset, 8)
            m.size += 1
            break
        if _same(p, digest):
            memcpy(p + HASH_SIZE, &offset, 8)
            break
        attempt += 1
        slot = _slot(digest, attempt, m.table_slots)
        m.probes += 1
    m.latest_offset = offset


cdef void _set_table_slots(OMap* m, int64_t table_slots) noexcept nogil:
    m.table_slots = table_slots
    m.grow_at = INT64_MAX if table_slots == m.slots else table_slots * 9 // 10


cdef int _om_grow(OMap* m) noexcept nogil:
    """Double the probed prefix (at most every slot) and re-put its entries there (the
    pure twin's ``_grow``): results stay those of the whole table; counters untouched.
    0, or -1 if the scratch copy cannot be allocated."""
    cdef size_t old_bytes = <size_t>m.table_slots * BYTES_PER_ENTRY
    cdef uint8_t* old = <uint8_t*>PyMem_RawMalloc(old_bytes if old_bytes else 1)
    cdef const uint8_t* e
    cdef uint8_t* p
    cdef int64_t i, attempt, slot, n
    if old == NULL:
        return -1
    memcpy(old, m.table, old_bytes)
    memset(m.table, 0, old_bytes)
    n = m.table_slots
    _set_table_slots(m, min(m.slots, m.table_slots * 2))
    for i in range(n):
        e = old + i * BYTES_PER_ENTRY
        if _empty(e):
            continue
        attempt = 0
        slot = _slot(e, 0, m.table_slots)
        while True:
            p = m.table + slot * BYTES_PER_ENTRY
            if _empty(p):
                memcpy(p, e, BYTES_PER_ENTRY)
                break
            attempt += 1
            slot = _slot(e, attempt, m.table_slots)
    PyMem_RawFree(old)
    return 0


cdef int64_t _om_get(OMap* m, const uint8_t* digest, int64_t slot) noexcept nogil:
    """Kafka's ``get``: the offset, or -1 at an empty slot or after ``slots + 12`` attempts."""
    cdef int64_t attempt = 0
    cdef int64_t max_attempts = m.table_slots + MAX_WINDOW
    cdef int64_t offset
    cdef const uint8_t* p
    m.lookups += 1
    while True:
        if attempt >= max_attempts:
            return -1
        if attempt > 0:
            slot = _slot(digest, attempt, m.table_slots)
        m.probes += 1
        p = m.table + slot * BYTES_PER_ENTRY
        if _empty(p):
            return -1
        attempt += 1
        if _same(p, digest):
            memcpy(&offset, p + HASH_SIZE, 8)
            return offset


cdef inline void _hash_into(const OMap* m, const uint8_t* key, Py_ssize_t length,
                            KeyEntry* entry) noexcept nogil:
    ks_siphash128(m.key, key, <size_t>length, entry.digest)
    entry.slot = _slot(entry.digest, 0, m.table_slots)


cdef int _put_walk(OMap* m, const uint8_t* d, Py_ssize_t n, Py_ssize_t count,
                   int64_t base_offset, int64_t start_offset, int64_t max_entries,
                   KeyEntry* entries, Py_ssize_t* walked, RecordError* e) noexcept nogil:
    """put_keys: validate and hash the section, then put in order (0 done, 1 stopped, -1 error)."""
    cdef RecordSpan r
    cdef Py_ssize_t pos = 0, i, j, k, have = 0
    cdef int64_t offset
    for i in range(count):
        if _next_record(d, pos, n, &r, e):
            return -1
        if r.key_len >= 0:
            offset = add64(base_offset, r.offset_delta)
            if offset >= start_offset:
                _hash_into(m, d + r.key_pos, r.key_len, &entries[have])
                entries[have].offset = offset
                entries[have].index = i
                have += 1
        pos = r.next_pos
    if _check_end(pos, n, count, e):
        return -1
    for j in range(min(<Py_ssize_t>_PREFETCH, have)):
        _prefetch_slot(m, entries[j].slot)
    for j in range(have):
        if j + _PREFETCH < have:
            _prefetch_slot(m, entries[j + _PREFETCH].slot)
        if m.size >= max_entries:
            walked[0] = entries[j].index
            return 1
        if m.size >= m.slots:
            walked[0] = entries[j].index
            return record_fail(e, E_MAP_FULL, 0, 0, 0)
        if m.size >= m.grow_at:
            if _om_grow(m) < 0:
                return record_fail(e, E_NO_MEMORY, 0, 0, 0)
            for k in range(j, have):   # their first slots moved with the table
                entries[k].slot = _slot(entries[k].digest, 0, m.table_slots)
        _om_put(m, entries[j].digest, entries[j].slot, entries[j].offset)
    walked[0] = count
    return 0


cdef int _retain_walk(OMap* m, const uint8_t* d, Py_ssize_t n, Py_ssize_t count,
                      int64_t base_offset, int64_t latest_offset, bint retain_deletes,
                      uint8_t* mask, KeyEntry* entries, Py_ssize_t* kept,
                      Py_ssize_t* tombstones, Py_ssize_t* keyless, RecordError* e) noexcept nogil:
    """retained_mask: validate, decide what needs no lookup and hash the rest, then look up."""
    cdef RecordSpan r
    cdef Py_ssize_t pos = 0, i, j, have = 0
    cdef int64_t offset
    cdef bint keep
    for i in range(count):
        if _next_record(d, pos, n, &r, e):
            return -1
        offset = add64(base_offset, r.offset_delta)
        if offset > latest_offset:
            # beyond this round's map: kept without a lookup
            mask[i] = 1
            kept[0] += 1
            if r.value_len < 0:
                tombstones[0] += 1
        elif r.key_len < 0:
            mask[i] = 0  # a keyless record cannot be deduplicated: Kafka drops it
            keyless[0] += 1
        else:
            mask[i] = 0
            _hash_into(m, d + r.key_pos, r.key_len, &entries[have])
            entries[have].offset = offset
            entries[have].index = i
            entries[have].tombstone = r.value_len < 0
            have += 1
        pos = r.next_pos
    if _check_end(pos, n, count, e):
        return -1
    for j in range(min(<Py_ssize_t>_PREFETCH, have)):
        _prefetch_slot(m, entries[j].slot)
    for j in range(have):
        if j + _PREFETCH < have:
            _prefetch_slot(m, entries[j + _PREFETCH].slot)
        keep = (entries[j].offset >= _om_get(m, entries[j].digest, entries[j].slot)
                and (not entries[j].tombstone or retain_deletes))
        if keep:
            mask[entries[j].index] = 1
            kept[0] += 1
            tombstones[0] += entries[j].tombstone
    return 0


cdef class SkimpyOffsetMap:
    """Kafka's SkimpyOffsetMap: fixed memory, open addressing, 128-bit key digest -> offset.

    Parameters
    ----------
    memory : int
        Bytes of table, as Kafka's ``log.cleaner.dedupe.buffer.size`` per cleaner
        thread (default 128 MiB). The map has ``slots = memory // 24`` slots; at least
        one, and ``memory`` at most ``2**31 - 1`` (Kafka's map is a ``ByteBuffer`` of
        int size; slots past 2**31 could never be probed either).
    hash_key : bytes-like of 16 bytes, optional
        The SipHash-2-4 key. ``None`` (the default) draws a fresh random key from the
        operating system. A secret random key makes digests unpredictable, so record
        keys cannot be crafted to collide with another key's digest: a collision makes
        the two keys one entry, and the cleaner would then drop the other key's latest
        value. Pass a fixed key only for tests and reproducible benchmarks, and never
        log it.

    Notes
    -----
    Memory layout: one table of ``slots`` entries of 24 bytes, a key's 16-byte
    SipHash-2-4-128 digest followed by its 8-byte offset (host byte order), allocated
    zeroed once (``PyMem_RawCalloc``) and freed with the map; :meth:`clear` zero-fills
    it again. Keys themselves are never stored.

    Invariants: a slot whose 24 bytes are all zero is empty (so, as in Kafka, a key
    whose digest is all zero put with offset 0 stays invisible); there are no
    deletes; ``size`` counts the slots filled; ``0 <= size <= slots``. Probe attempt
    ``i`` looks at slot ``abs(readIntBE(digest, min(i, 12)) + max(0, i - 12)) % slots``
    in Java int arithmetic, so the first 13 attempts use successive overlapping
    4-byte windows of the digest and later ones probe linearly. ``put`` overwrites
    the offset of a slot with the same digest, else fills the first empty slot;
    ``get`` stops at the digest, an empty slot, or after ``slots + 12`` attempts.
    Every put and get counts one lookup, every slot looked at one probe.

    Thread safety: not thread-safe; one cleaner owns a map. The GIL is released
    during the bulk loops of :meth:`put_keys` and :meth:`retained_mask`, so the
    caller must not use one map from two threads; a call that finds the map busy in
    another thread raises ``RuntimeError`` (the table itself is never reallocated,
    so misuse cannot touch freed memory).
    """

    def __init__(self, memory, hash_key=None):
        memory = PyNumber_Index(memory)
        slots = memory // BYTES_PER_ENTRY if memory > 0 else 0
        if slots < 1:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes of "
                             f"memory (one slot), not {memory}")
        if memory > INT32_MAX_:
            raise ValueError(f"an offset map takes at most {INT32_MAX_} bytes of memory, "
                             f"not {memory}")
        if hash_key is None:
            key = np.random.SeedSequence().entropy.to_bytes(HASH_SIZE, "little")
        else:
            key = bytes(memoryview(hash_key).cast("B"))
            if len(key) != HASH_SIZE:
                raise ValueError(f"hash_key must be {HASH_SIZE} bytes, not {len(key)}")
        if self._busy:
            raise RuntimeError("this SkimpyOffsetMap is in use by another thread")
        cdef uint8_t* table = <uint8_t*>PyMem_RawCalloc(<size_t>slots, BYTES_PER_ENTRY)
        if table == NULL:
            raise MemoryError(f"cannot allocate an offset map of {memory} bytes")
        if self._m.table != NULL:  # __init__ called again: start afresh
            PyMem_RawFree(self._m.table)
        self._m.table = table
        self._m.slots = slots
        _set_table_slots(&self._m, slots)
        memcpy(self._m.key, PyBytes_AS_STRING(key), HASH_SIZE)
        self._memory = memory
        self._hash_key = key
        self._reset()

    def __dealloc__(self):
        PyMem_RawFree(self._m.table)
        self._m.table = NULL

    cdef void _reset(self) noexcept:
        self._m.size = 0
        self._m.latest_offset = -1
        self._m.lookups = 0
        self._m.probes = 0

    cdef int _enter(self) except -1:
        if self._m.table == NULL:
            raise ValueError("SkimpyOffsetMap.__init__ was not called")
        if self._busy:
            raise RuntimeError("this SkimpyOffsetMap is in use by another thread")
        return 0

    # -- read-only state

    @property
    def memory(self):
        """The ``memory`` the map was created with."""
        return self._memory

    @property
    def slots(self):
        """Number of 24-byte slots: ``memory // 24``."""
        return self._m.slots

    @property
    def table_slots(self):
        """The slots probed: ``slots``, or the prefix ``clear(expected_entries)`` chose."""
        return self._m.table_slots

    @property
    def size(self):
        """Number of filled slots (distinct digests put since the last clear)."""
        return self._m.size

    def __len__(self):
        return self._m.size

    @property
    def latest_offset(self):
        """The last offset put or set by :meth:`update_latest_offset`; -1 initially."""
        return self._m.latest_offset

    @property
    def lookups(self):
        """Puts and gets since the last clear (those done by the bulk walks included)."""
        return self._m.lookups

    @property
    def probes(self):
        """Slots looked at since the last clear."""
        return self._m.probes

    @property
    def utilization(self):
        """``size / slots``."""
        return self._m.size / <double>self._m.slots if self._m.slots else 0.0

    @property
    def collision_rate(self):
        """``(probes - lookups) / lookups``: extra slots looked at per lookup (0.0 if none)."""
        if self._m.lookups == 0:
            return 0.0
        return (self._m.probes - self._m.lookups) / <double>self._m.lookups

    @property
    def hash_key(self):
        """The 16-byte SipHash key (a secret: do not log it)."""
        return self._hash_key

    def __repr__(self):
        return (f"SkimpyOffsetMap(memory={self._memory}, slots={self._m.slots}, "
                f"size={self._m.size}, latest_offset={self._m.latest_offset})")

    def __reduce__(self):
        raise TypeError("a SkimpyOffsetMap cannot be pickled")

    # -- single keys

    cdef int _digest(self, object key, uint8_t* out) except -1:
        """SipHash ``key`` (bytes fast, else any C-contiguous buffer) into ``out``."""
        cdef Py_buffer buf
        if type(key) is bytes:
            ks_siphash128(self._m.key, <const uint8_t*>PyBytes_AS_STRING(key),
                          <size_t>PyBytes_GET_SIZE(key), out)
            return 0
        PyObject_GetBuffer(key, &buf, PyBUF_SIMPLE)
        try:
            ks_siphash128(self._m.key, <const uint8_t*>buf.buf, <size_t>buf.len, out)
        finally:
            PyBuffer_Release(&buf)
        return 0

    def digest(self, key):
        """The 16-byte SipHash-2-4-128 digest of ``key`` under this map's hash key."""
        cdef uint8_t out[HASH_SIZE]
        self._digest(key, out)
        return PyBytes_FromStringAndSize(<char*>out, HASH_SIZE)

    def put(self, key, int64_t offset):
        """Map ``key`` to ``offset`` and make ``offset`` the latest offset.

        Raises :class:`~kafkastore.errors.OffsetMapFullError` when every slot is
        taken, checked first as Kafka does, even if ``key`` is already there.
        """
        cdef uint8_t digest[HASH_SIZE]
        self._enter()
        if self._m.size >= self._m.slots:
            raise OffsetMapFullError("Attempted to add a new entry to a full offset map.")
        self._digest(key, digest)
        if self._m.size >= self._m.grow_at and _om_grow(&self._m) < 0:
            raise MemoryError("cannot grow the offset map's probed table")
        _om_put(&self._m, digest, _slot(digest, 0, self._m.table_slots), offset)

    def get(self, key):
        """The offset last put for ``key`` (for its digest), or -1 if absent."""
        cdef uint8_t digest[HASH_SIZE]
        self._enter()
        self._digest(key, digest)
        return _om_get(&self._m, digest, _slot(digest, 0, self._m.table_slots))

    def update_latest_offset(self, int64_t offset):
        """Set :attr:`latest_offset` (pass 1 does, for each batch's last offset)."""
        self._m.latest_offset = offset

    def clear(self, expected_entries=None):
        """Zero the table and reset size, counters and latest offset (-1).

        ``expected_entries``: a likely bound on the distinct keys put until the next
        clear; the map then probes a prefix of its table sized for them, doubled when
        90% full. Results, ``slots``, fullness and utilization are unchanged; see
        ``kafkastore/_pure/offset_map.py``.
        """
        cdef int64_t table_slots = self._m.slots
        self._enter()
        if expected_entries is not None:
            expected = PyNumber_Index(expected_entries)
            if expected < 0:
                raise ValueError(f"expected_entries must be >= 0, not {expected}")
            if expected < self._m.slots:
                table_slots = min(self._m.slots,
                                  max(<int64_t>MIN_TABLE_SLOTS,
                                      <int64_t>expected + <int64_t>expected // 4 + 1))
        if self._m.size:
            # only a put writes the table, and every put into an empty table inserts: a
            # table of size 0 is all zeros already. Skipping the memset keeps a fresh
            # map's pages untouched (128 MiB of them by default: ~70 ms and 128 MiB RSS).
            with nogil:
                memset(self._m.table, 0, <size_t>self._m.table_slots * BYTES_PER_ENTRY)
        _set_table_slots(&self._m, table_slots)
        self._reset()

    # -- records sections

    def put_keys(self, records, count, int64_t base_offset, int64_t start_offset,
                 int64_t max_entries):
        """Put the key of every keyed record at or after ``start_offset`` (pass 1).

        See ``kafkastore/_pure/offset_map.py``. Returns ``(walked, stopped)``:
        ``(count, False)``, or ``(i, True)`` when the map already held ``max_entries``
        entries before the put of record ``i``.
        """
        cdef const uint8_t[::1] view = as_view(records)
        cdef Py_ssize_t n = view.shape[0]
        cdef const uint8_t* d = view_ptr(view)
        cdef Py_ssize_t c, walked = 0
        cdef KeyEntry* entries = NULL
        cdef RecordError err
        cdef int status
        self._enter()
        c = _check_count(count, n)
        # one entry per record at most: bounded by len(records) // 7 (checked above)
        entries = <KeyEntry*>PyMem_Malloc(<size_t>(c if c > 0 else 1) * sizeof(KeyEntry))
        if entries == NULL:
            raise MemoryError()
        self._busy = True
        try:
            with nogil:
                status = _put_walk(&self._m, d, n, c, base_offset, start_offset, max_entries,
                                   entries, &walked, &err)
        finally:
            self._busy = False
            PyMem_Free(entries)
        if status < 0:
            _raise_error(&err)
        return walked, status == 1

    def retained_mask(self, records, count, int64_t base_offset, int64_t latest_offset,
                      bint retain_deletes):
        """Which records of a data batch to keep (pass 2, Kafka's ``shouldRetainRecord``).

        See ``kafkastore/_pure/offset_map.py``. Returns a :class:`RetainResult`.
        """
        cdef const uint8_t[::1] view = as_view(records)
        cdef Py_ssize_t n = view.shape[0]
        cdef const uint8_t* d = view_ptr(view)
        cdef Py_ssize_t c, kept = 0, tombstones = 0, keyless = 0
        cdef KeyEntry* entries = NULL
        cdef RecordError err
        cdef int status
        cdef bytes mask
        self._enter()
        c = _check_count(count, n)
        mask = PyBytes_FromStringAndSize(NULL, c)
        entries = <KeyEntry*>PyMem_Malloc(<size_t>(c if c > 0 else 1) * sizeof(KeyEntry))
        if entries == NULL:
            raise MemoryError()
        cdef uint8_t* out = <uint8_t*>PyBytes_AS_STRING(mask)
        self._busy = True
        try:
            with nogil:
                status = _retain_walk(&self._m, d, n, c, base_offset, latest_offset,
                                      retain_deletes, out, entries, &kept, &tombstones,
                                      &keyless, &err)
        finally:
            self._busy = False
            PyMem_Free(entries)
        if status < 0:
            _raise_error(&err)
        # tuple.__new__ directly: RetainResult.__new__ is a Python-level call per batch
        return tuple.__new__(RetainResult, (mask, kept, tombstones, keyless))


# -- rewriting ------------------------------------------------------------------------------


cdef int _select_plan(const uint8_t* d, Py_ssize_t n, Py_ssize_t count, const uint8_t* keep,
                      int64_t base_timestamp, int64_t new_base_timestamp, bint rebase,
                      int64_t log_append_time, Piece* pieces, Py_ssize_t* npieces,
                      Py_ssize_t* size, int64_t* first_ts, int64_t* max_ts,
                      RecordError* e) noexcept nogil:
    """Validate the section and plan the output: one piece per kept record, and its size.
    With ``rebase`` the first kept record's timestamp is the new base."""
    cdef RecordSpan r
    cdef Py_ssize_t pos = 0, i, k = 0, total = 0
    cdef int64_t ts, delta, length
    first_ts[0] = -1
    max_ts[0] = -1
    for i in range(count):
        if _next_record(d, pos, n, &r, e):
            return -1
        pos = r.next_pos
        if not keep[i]:
            continue
        ts = log_append_time if log_append_time >= 0 else add64(base_timestamp, r.ts_delta)
        if k == 0:
            first_ts[0] = ts
            if rebase:
                new_base_timestamp = ts
        if ts > max_ts[0]:
            max_ts[0] = ts
        delta = <int64_t>(<uint64_t>ts - <uint64_t>new_base_timestamp)  # Java's wrap
        pieces[k].start = r.start
        pieces[k].body = r.body
        pieces[k].ts_end = r.ts_end
        pieces[k].end = r.next_pos
        if delta == r.ts_delta:
            pieces[k].verbatim = True
            total += r.next_pos - r.start
        else:
            pieces[k].verbatim = False
            pieces[k].ts_delta = delta
            # attributes + new varlong + everything after the old varlong
            length = 1 + uvarint_size(zigzag64(delta)) + (r.next_pos - r.ts_end)
            if length > INT32_MAX_:
                return record_fail(e, E_TOO_LARGE, r.start, length, 0)
            pieces[k].length = <int32_t>length
            total += uvarint_size(zigzag32(<int32_t>length)) + length
        k += 1
    if _check_end(pos, n, count, e):
        return -1
    npieces[0] = k
    size[0] = total
    return 0


cdef void _select_write(const uint8_t* d, const Piece* pieces, Py_ssize_t npieces,
                        uint8_t* out) noexcept nogil:
    """Write the planned pieces; consecutive verbatim records go in one memcpy."""
    cdef Py_ssize_t j = 0, run_start, run_end, w = 0
    while j < npieces:
        if pieces[j].verbatim:
            run_start = pieces[j].start
            run_end = pieces[j].end
            j += 1
            while j < npieces and pieces[j].verbatim and pieces[j].start == run_end:
                run_end = pieces[j].end
                j += 1
            memcpy(out + w, d + run_start, <size_t>(run_end - run_start))
            w += run_end - run_start
        else:
            w += uvarint_write(out + w, zigzag32(pieces[j].length))
            out[w] = d[pieces[j].body]  # attributes
            w += 1
            w += uvarint_write(out + w, zigzag64(pieces[j].ts_delta))
            memcpy(out + w, d + pieces[j].ts_end, <size_t>(pieces[j].end - pieces[j].ts_end))
            w += pieces[j].end - pieces[j].ts_end
            j += 1


def select_records(records, count, mask, int64_t base_timestamp, new_base_timestamp,
                   int64_t log_append_time):
    """The records section of the kept records (``mask[i] != 0``), in order, as a
    :class:`Selection` with the first and the largest kept timestamp.

    See ``kafkastore/_pure/offset_map.py``.
    """
    cdef bint rebase = new_base_timestamp is None
    cdef int64_t c_new_base = 0 if rebase else new_base_timestamp
    cdef int64_t first_ts = -1, max_ts = -1
    cdef const uint8_t[::1] view = as_view(records)
    cdef const uint8_t[::1] keep = as_view(mask)
    cdef Py_ssize_t n = view.shape[0]
    cdef const uint8_t* d = view_ptr(view)
    cdef Py_ssize_t c, npieces = 0, size = 0
    cdef const uint8_t* k = view_ptr(keep)
    cdef Piece* pieces = NULL
    cdef RecordError err
    cdef int status
    cdef bytes result
    cdef uint8_t* out
    if keep.shape[0] != PyNumber_Index(count):
        raise ValueError(f"mask has {keep.shape[0]} entries for {count} records")
    c = _check_count(count, n)
    pieces = <Piece*>PyMem_Malloc(<size_t>(c if c > 0 else 1) * sizeof(Piece))
    if pieces == NULL:
        raise MemoryError()
    try:
        with nogil:
            status = _select_plan(d, n, c, k, base_timestamp, c_new_base, rebase,
                                  log_append_time, pieces, &npieces, &size, &first_ts,
                                  &max_ts, &err)
        if status < 0:
            _raise_error(&err)
        # sized from the validated records: at most n + 10 bytes per kept record
        result = PyBytes_FromStringAndSize(NULL, size)
        out = <uint8_t*>PyBytes_AS_STRING(result)
        with nogil:
            _select_write(d, pieces, npieces, out)
    finally:
        PyMem_Free(pieces)
    return tuple.__new__(Selection, (result, first_ts, max_ts))
