"""The log cleaner's offset map (Kafka's ``SkimpyOffsetMap``) and its record walks.

Pure-Python twin of ``kafkastore/_ext/offset_map.pyx``: same names, same
results, same digests for the same hash key, same exceptions and messages. It
is the reference and the test oracle for the compiled kernel.

Pass 1 of a cleaning round (kafka-storage.md 7.5) maps every key of the dirty
section to the offset of its latest record: :meth:`SkimpyOffsetMap.put_keys`
walks one batch's records section and puts each keyed record. Pass 2 recopies
the log: :meth:`SkimpyOffsetMap.retained_mask` decides record by record what
to keep (Kafka's ``shouldRetainRecord``) and :func:`select_records` builds the
records section of the rewritten batch from the kept records.

Records sections
----------------
``records`` is exactly the records section of one magic 2 batch: the bytes
after its 61-byte header, already decompressed if the batch was compressed,
and ``count`` is the header's record count. One record (kafka-storage.md 2.3)::

    length          varint   bytes after this field
    attributes      int8
    timestampDelta  varlong  record timestamp - batch baseTimestamp
    offsetDelta     varint   record offset - batch baseOffset
    keyLength       varint   negative = null key
    key             bytes
    valueLength     varint   negative = null value (a tombstone)
    value           bytes
    headerCount     varint
      headerKeyLength varint (>= 0) + key, headerValueLength varint (negative = null) + value

Varints are zig-zag LEB128, at most 5 bytes (varlong: 10).

The bytes come from files and are not trusted. Before anything else, each
function checks the whole section: ``count`` must be between 0 and
``len(records) // 7`` (a record takes at least 7 bytes), each record must
pass :func:`kafkastore._pure.default_record.parse_record`, the record parser
the batch reader uses (so the cleaner accepts exactly the records a reader
accepts: any negative key, value or header value length is null, as in
Kafka's ``DefaultRecord.readFrom``, with the reader's error messages), and
exactly ``count`` records must fill the section (no missing records, no
trailing bytes; as Kafka's batch iteration). Anything else raises
:class:`~kafkastore.errors.CorruptRecordError` whose ``position`` is the byte
position within ``records`` of the bad record (0 for a bad count). Because
the whole section is checked first, corrupt input changes nothing: no key is
put and no lookup is counted.
"""

from __future__ import annotations

import operator
import os
import struct
from typing import NamedTuple

from kafkastore._pure.default_record import parse_record
from kafkastore._pure.reader import (
    INT32_MAX,
    INT64,
    INT64_MAX,
    INT64_MIN,
    MASK64,
    MIN_RECORD_SIZE,
    as_view,
    wrap64,
)
from kafkastore._pure.varint import write_uvarint, zz32, zz64
from kafkastore.errors import CorruptRecordError, OffsetMapFullError, RecordTooLargeError

__all__ = ["RetainResult", "Selection", "SkimpyOffsetMap", "select_records"]

_HASH_SIZE = 16                 # SipHash-2-4-128 digest
_BYTES_PER_ENTRY = 24           # digest + 8-byte offset
_MAX_WINDOW = _HASH_SIZE - 4    # last 4-byte window of the digest used by the probe
_ZERO_ENTRY = bytes(_BYTES_PER_ENTRY)
# clear(expected_entries): the smallest probed prefix, and "never grow"
_MIN_TABLE_SLOTS = 1024
_INT64_MAX = (1 << 63) - 1
_ENTRY = struct.Struct(">16sq")
_KEY_WORDS = struct.Struct("<QQ")


# -- SipHash-2-4-128 ------------------------------------------------------------------


def _siphash128(k0: int, k1: int, data: bytes) -> bytes:
    """SipHash-2-4 with 128-bit output of ``data`` under the key words ``k0``, ``k1``.

    Written from Aumasson and Bernstein's description; see csrc/ks_siphash.h for the
    algorithm in words. The rounds are spelled out (no helper calls): this is the
    whole cost of a pure-Python put or get.
    """
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D ^ 0xEE
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    whole = n - (n & 7)
    words = [int.from_bytes(data[i:i + 8], "little") for i in range(0, whole, 8)]
    # last word: the remaining bytes and the length mod 256 in the top byte
    words.append(int.from_bytes(data[whole:], "little") | ((n & 0xFF) << 56))
    # one schedule: each message word (xor in, 2 rounds, xor out), then the two
    # finalizations (v2 ^= 0xee, 4 rounds, a half of the digest; v1 ^= 0xdd, the same)
    steps = [(m, 2) for m in words] + [(None, 4), (None, 4)]
    out = []
    for m, rounds in steps:
        if m is not None:
            v3 ^= m
        elif not out:
            v2 ^= 0xEE
        else:
            v1 ^= 0xDD
        for _ in range(rounds):
            v0 = (v0 + v1) & MASK64
            v1 = ((v1 << 13) | (v1 >> 51)) & MASK64
            v1 ^= v0
            v0 = ((v0 << 32) | (v0 >> 32)) & MASK64
            v2 = (v2 + v3) & MASK64
            v3 = ((v3 << 16) | (v3 >> 48)) & MASK64
            v3 ^= v2
            v0 = (v0 + v3) & MASK64
            v3 = ((v3 << 21) | (v3 >> 43)) & MASK64
            v3 ^= v0
            v2 = (v2 + v1) & MASK64
            v1 = ((v1 << 17) | (v1 >> 47)) & MASK64
            v1 ^= v2
            v2 = ((v2 << 32) | (v2 >> 32)) & MASK64
        if m is not None:
            v0 ^= m
        else:
            out.append((v0 ^ v1 ^ v2 ^ v3).to_bytes(8, "little"))
    return out[0] + out[1]


# -- small helpers ----------------------------------------------------------------------


def _int64(value, name: str) -> int:
    """``value`` as an int64, with the errors Cython's ``int64_t`` argument conversion gives."""
    value = operator.index(value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise OverflowError(f"{name} {value} does not fit in an int64")
    return value


def _key_bytes(key) -> bytes:
    """The bytes of a C-contiguous bytes-like key (as a simple buffer request sees them)."""
    if type(key) is bytes:
        return key
    view = memoryview(key)
    if not view.c_contiguous:
        raise BufferError("key: a C-contiguous buffer is required")
    return view.tobytes()


def _slot(digest: bytes, attempt: int, slots: int) -> int:
    """Kafka's ``positionOf`` (as a slot number) for probe attempt ``attempt``.

    ``probe = readIntBE(digest, min(attempt, 12)) + max(0, attempt - 12)`` in Java int
    arithmetic (wrapping at 32 bits), then ``Utils.abs(probe) % slots`` where
    ``Utils.abs(Integer.MIN_VALUE)`` is 0.
    """
    window = min(attempt, _MAX_WINDOW)
    probe = int.from_bytes(digest[window:window + 4], "big") + max(0, attempt - _MAX_WINDOW)
    probe &= 0xFFFFFFFF
    if probe >= 1 << 31:
        probe -= 1 << 32
    if probe == -(1 << 31):
        return 0
    return abs(probe) % slots


# -- record parsing -----------------------------------------------------------------------


def _corrupt(message: str, position: int) -> CorruptRecordError:
    return CorruptRecordError(message, position=position)


class _Rec(NamedTuple):
    """One parsed record (:func:`parse_record`'s tuple); positions are within the section."""

    start: int          # the length varint
    body: int           # the attributes byte
    ts_end: int         # first byte after timestampDelta
    end: int            # first byte after the record
    ts_delta: int
    offset_delta: int
    key_pos: int
    key_len: int        # -1: null (any negative length read)
    value_pos: int
    value_len: int      # -1: null (a tombstone)
    header_count: int
    headers_start: int


def _check_count(count, n: int) -> int:
    count = operator.index(count)
    if count < 0 or count > n // MIN_RECORD_SIZE:
        raise _corrupt(f"Found invalid record count {count} for {n} bytes of records", 0)
    return count


def _parse_section(view, count: int) -> list[_Rec]:
    """Every record of a records section, validated as the module docstring says."""
    n = len(view)
    count = _check_count(count, n)
    recs = []
    pos = 0
    make = _Rec._make
    for _ in range(count):
        if pos >= n:
            raise _corrupt("Incorrect declared batch size, premature EOF reached", pos)
        rec = make(parse_record(view, pos, n, pos))
        recs.append(rec)
        pos = rec.end
    if pos != n:
        raise _corrupt(f"Incorrect declared batch size, records still remaining in file "
                       f"({n - pos} bytes after {count} records)", pos)
    return recs


# -- results ------------------------------------------------------------------------------


class RetainResult(NamedTuple):
    """What :meth:`SkimpyOffsetMap.retained_mask` decided for one records section."""

    mask: bytes             # one byte per record: 1 keep, 0 drop
    kept: int               # records kept
    tombstones_kept: int    # kept records with a null value (Kafka's containsTombstones)
    keyless_dropped: int    # records dropped for having no key (Kafka's invalid messages)


class Selection(NamedTuple):
    """What :func:`select_records` built."""

    records: bytes          # the new records section
    first_timestamp: int    # the first kept record's timestamp (-1 if none kept)
    max_timestamp: int      # the largest kept timestamp (-1 if none kept)


# -- the map ------------------------------------------------------------------------------


class SkimpyOffsetMap:
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
    SipHash-2-4-128 digest followed by its 8-byte offset, allocated zeroed once and
    kept for the map's lifetime (:meth:`clear` zero-fills it again). Keys themselves
    are never stored.

    Invariants: a slot whose 24 bytes are all zero is empty (so, as in Kafka, a key
    whose digest is all zero put with offset 0 stays invisible); there are no
    deletes; ``size`` counts the slots filled; ``0 <= size <= slots``. Probe attempt
    ``i`` looks at slot ``abs(readIntBE(digest, min(i, 12)) + max(0, i - 12)) % slots``
    in Java int arithmetic, so the first 13 attempts use successive overlapping
    4-byte windows of the digest and later ones probe linearly. ``put`` overwrites
    the offset of a slot with the same digest, else fills the first empty slot;
    ``get`` stops at the digest, an empty slot, or after ``slots + 12`` attempts.
    Every put and get counts one lookup, every slot looked at one probe. After
    ``clear(expected_entries=n)`` the same holds with ``slots`` replaced, for the
    probes only, by the size of the probed prefix (see :meth:`clear`).

    Thread safety: not thread-safe; one cleaner owns a map. The compiled twin
    releases the GIL during the bulk loops of :meth:`put_keys` and
    :meth:`retained_mask`, so the caller must not use one map from two threads; a
    call that finds the map busy in another thread raises ``RuntimeError``.
    """

    __slots__ = ("_memory", "_slots", "_size", "_latest_offset", "_lookups", "_probes",
                 "_hash_key", "_k0", "_k1", "_table", "_busy", "_table_slots", "_grow_at")

    def __init__(self, memory: int, hash_key: bytes | None = None) -> None:
        memory = operator.index(memory)
        slots = memory // _BYTES_PER_ENTRY if memory > 0 else 0
        if slots < 1:
            raise ValueError(f"an offset map needs at least {_BYTES_PER_ENTRY} bytes of "
                             f"memory (one slot), not {memory}")
        if memory > INT32_MAX:
            raise ValueError(f"an offset map takes at most {INT32_MAX} bytes of memory, "
                             f"not {memory}")
        if hash_key is None:
            key = os.urandom(_HASH_SIZE)
        else:
            key = bytes(memoryview(hash_key).cast("B"))
            if len(key) != _HASH_SIZE:
                raise ValueError(f"hash_key must be {_HASH_SIZE} bytes, not {len(key)}")
        self._memory = memory
        self._slots = slots
        self._hash_key = key
        self._k0, self._k1 = _KEY_WORDS.unpack(key)
        self._table = bytearray(slots * _BYTES_PER_ENTRY)
        self._busy = False
        self._set_table_slots(slots)
        self._reset_counters()

    def _set_table_slots(self, table_slots: int) -> None:
        # the slots probed: all of them, or a prefix of the table (see clear)
        self._table_slots = table_slots
        self._grow_at = _INT64_MAX if table_slots == self._slots else table_slots * 9 // 10

    def _grow(self) -> None:
        """Double the probed prefix (at most every slot) and re-put its entries there;
        results stay those of the whole table, the counters are not touched."""
        table = self._table
        old = bytes(table[:self._table_slots * _BYTES_PER_ENTRY])
        table[:len(old)] = bytes(len(old))
        self._set_table_slots(min(self._slots, self._table_slots * 2))
        slots = self._table_slots
        for pos in range(0, len(old), _BYTES_PER_ENTRY):
            entry = old[pos:pos + _BYTES_PER_ENTRY]
            if entry == _ZERO_ENTRY:
                continue
            digest = entry[:_HASH_SIZE]
            attempt = 0
            while True:
                at = _slot(digest, attempt, slots) * _BYTES_PER_ENTRY
                if table[at:at + _BYTES_PER_ENTRY] == _ZERO_ENTRY:
                    table[at:at + _BYTES_PER_ENTRY] = entry
                    break
                attempt += 1

    def _reset_counters(self) -> None:
        self._size = 0
        self._latest_offset = -1
        self._lookups = 0
        self._probes = 0

    # -- read-only state

    @property
    def memory(self) -> int:
        """The ``memory`` the map was created with."""
        return self._memory

    @property
    def slots(self) -> int:
        """Number of 24-byte slots: ``memory // 24``."""
        return self._slots

    @property
    def table_slots(self) -> int:
        """The slots probed: :attr:`slots`, or the prefix ``clear(expected_entries)`` chose
        (grown since)."""
        return self._table_slots

    @property
    def size(self) -> int:
        """Number of filled slots (distinct digests put since the last clear)."""
        return self._size

    def __len__(self) -> int:
        return self._size

    @property
    def latest_offset(self) -> int:
        """The last offset put or set by :meth:`update_latest_offset`; -1 initially."""
        return self._latest_offset

    @property
    def lookups(self) -> int:
        """Puts and gets since the last clear (those done by the bulk walks included)."""
        return self._lookups

    @property
    def probes(self) -> int:
        """Slots looked at since the last clear."""
        return self._probes

    @property
    def utilization(self) -> float:
        """``size / slots``."""
        return self._size / self._slots

    @property
    def collision_rate(self) -> float:
        """``(probes - lookups) / lookups``: extra slots looked at per lookup (0.0 if none)."""
        if self._lookups == 0:
            return 0.0
        return (self._probes - self._lookups) / self._lookups

    @property
    def hash_key(self) -> bytes:
        """The 16-byte SipHash key (a secret: do not log it)."""
        return self._hash_key

    def __repr__(self) -> str:
        return (f"SkimpyOffsetMap(memory={self._memory}, slots={self._slots}, "
                f"size={self._size}, latest_offset={self._latest_offset})")

    def __reduce__(self):
        raise TypeError("a SkimpyOffsetMap cannot be pickled")

    # -- single keys

    def _enter(self) -> None:
        if self._busy:
            raise RuntimeError("this SkimpyOffsetMap is in use by another thread")

    def digest(self, key) -> bytes:
        """The 16-byte SipHash-2-4-128 digest of ``key`` under this map's hash key."""
        return _siphash128(self._k0, self._k1, _key_bytes(key))

    def _put_digest(self, digest: bytes, offset: int) -> None:
        if self._size >= self._grow_at:
            self._grow()
        table = self._table
        slots = self._table_slots
        self._lookups += 1
        attempt = 0
        slot = _slot(digest, 0, slots)
        self._probes += 1
        while True:
            pos = slot * _BYTES_PER_ENTRY
            entry = table[pos:pos + _BYTES_PER_ENTRY]
            if entry == _ZERO_ENTRY:
                _ENTRY.pack_into(table, pos, digest, offset)
                self._size += 1
                break
            if entry[:_HASH_SIZE] == digest:
                INT64.pack_into(table, pos + _HASH_SIZE, offset)
                break
            attempt += 1
            slot = _slot(digest, attempt, slots)
            self._probes += 1
        self._latest_offset = offset

    def _get_digest(self, digest: bytes) -> int:
        table = self._table
        slots = self._table_slots
        self._lookups += 1
        max_attempts = slots + _MAX_WINDOW
        attempt = 0
        while True:
            if attempt >= max_attempts:
                return -1
            pos = _slot(digest, attempt, slots) * _BYTES_PER_ENTRY
            self._probes += 1
            entry = table[pos:pos + _BYTES_PER_ENTRY]
            if entry == _ZERO_ENTRY:
                return -1
            attempt += 1
            if entry[:_HASH_SIZE] == digest:
                return INT64.unpack_from(entry, _HASH_SIZE)[0]

    def _check_room(self) -> None:
        if self._size >= self._slots:
            raise OffsetMapFullError("Attempted to add a new entry to a full offset map.")

    def put(self, key, offset: int) -> None:
        """Map ``key`` to ``offset`` and make ``offset`` the latest offset.

        Raises :class:`~kafkastore.errors.OffsetMapFullError` when every slot is
        taken, checked first as Kafka does, even if ``key`` is already there.
        """
        offset = _int64(offset, "offset")
        self._enter()
        self._check_room()
        self._put_digest(self.digest(key), offset)

    def get(self, key) -> int:
        """The offset last put for ``key`` (for its digest), or -1 if absent."""
        self._enter()
        return self._get_digest(self.digest(key))

    def update_latest_offset(self, offset: int) -> None:
        """Set :attr:`latest_offset` (pass 1 does, for each batch's last offset)."""
        self._latest_offset = _int64(offset, "offset")

    def clear(self, expected_entries: int | None = None) -> None:
        """Zero the table and reset size, counters and latest offset (-1).

        ``expected_entries``: how many distinct keys the puts until the next clear
        will likely make (a bound the caller knows, such as the offsets of the range
        it maps). The map then probes only a prefix of its table, of
        ``expected_entries * 5 // 4 + 1`` slots (at least 1024, at most
        :attr:`slots`), doubled whenever it is 90% full, so a round touches the memory
        its keys need, not all of it. Which offset every key maps to, what is full
        (``slots``), :attr:`utilization` and every result are the same as without it;
        only :attr:`probes` (and so :attr:`collision_rate`) count the prefix's probes.
        """
        self._enter()
        if expected_entries is None:
            table_slots = self._slots
        else:
            expected = operator.index(expected_entries)
            if expected < 0:
                raise ValueError(f"expected_entries must be >= 0, not {expected}")
            table_slots = min(self._slots, max(_MIN_TABLE_SLOTS, expected + expected // 4 + 1))
        if self.size:   # a table of size 0 is all zeros already (only puts write it)
            view = memoryview(self._table)[:self._table_slots * _BYTES_PER_ENTRY]
            zeros = bytes(min(len(view), 1 << 20))
            for start in range(0, len(view), len(zeros)):
                chunk = view[start:start + len(zeros)]
                chunk[:] = zeros[:len(chunk)]
        self._set_table_slots(table_slots)
        self._reset_counters()

    # -- records sections

    def put_keys(self, records, count: int, base_offset: int, start_offset: int,
                 max_entries: int) -> tuple[int, bool]:
        """Put the key of every keyed record at or after ``start_offset`` (pass 1).

        Walks the ``count`` records of ``records`` (a batch's records section, see the
        module docstring) in order; record ``i`` has offset ``base_offset +
        offsetDelta``. Records with a null key or an offset below ``start_offset`` are
        skipped. Before each put, if the map already holds ``max_entries`` entries,
        the walk stops and returns ``(i, True)``: ``i`` records were walked, and record
        ``i`` was not put (Kafka's "map full" check in ``buildOffsetMapForSegment``).
        Otherwise returns ``(count, False)``. Only the puts change
        :attr:`latest_offset`; the caller sets it per batch with
        :meth:`update_latest_offset`.

        Raises :class:`~kafkastore.errors.CorruptRecordError` for a malformed section
        (before any put), and :class:`~kafkastore.errors.OffsetMapFullError` when a put
        finds no free slot (``max_entries`` above ``slots``).
        """
        base_offset = _int64(base_offset, "base_offset")
        start_offset = _int64(start_offset, "start_offset")
        max_entries = _int64(max_entries, "max_entries")
        view = as_view(records)
        self._enter()
        self._busy = True
        try:
            recs = _parse_section(view, count)
            keyed = []
            for index, rec in enumerate(recs):
                if rec.key_len < 0:
                    continue
                offset = wrap64(base_offset + rec.offset_delta)
                if offset >= start_offset:
                    key = bytes(view[rec.key_pos:rec.key_pos + rec.key_len])
                    keyed.append((index, _siphash128(self._k0, self._k1, key), offset))
            for index, digest, offset in keyed:
                if self._size >= max_entries:
                    return index, True
                self._check_room()
                self._put_digest(digest, offset)
            return len(recs), False
        finally:
            self._busy = False

    def retained_mask(self, records, count: int, base_offset: int, latest_offset: int,
                      retain_deletes: bool) -> RetainResult:
        """Which records of a data batch to keep (pass 2, Kafka's ``shouldRetainRecord``).

        For record ``i`` with offset ``o = base_offset + offsetDelta``: keep it if
        ``o > latest_offset`` (beyond what this round mapped); else drop it if its key
        is null; else keep it iff ``o >= get(key)`` (it is the latest occurrence, or
        the key is not in the map) and it has a value or ``retain_deletes`` (the
        batch's delete horizon has not passed). The gets count as :meth:`get` does.

        Returns a :class:`RetainResult` ``(mask, kept, tombstones_kept,
        keyless_dropped)``. Raises
        :class:`~kafkastore.errors.CorruptRecordError` for a malformed section.
        """
        base_offset = _int64(base_offset, "base_offset")
        latest_offset = _int64(latest_offset, "latest_offset")
        retain_deletes = bool(retain_deletes)
        view = as_view(records)
        self._enter()
        self._busy = True
        try:
            recs = _parse_section(view, count)
            mask = bytearray(len(recs))
            kept = tombstones = keyless = 0
            lookups = []
            for index, rec in enumerate(recs):
                offset = wrap64(base_offset + rec.offset_delta)
                if offset > latest_offset:
                    mask[index] = 1
                    kept += 1
                    if rec.value_len < 0:
                        tombstones += 1
                elif rec.key_len < 0:
                    keyless += 1
                else:
                    key = bytes(view[rec.key_pos:rec.key_pos + rec.key_len])
                    lookups.append((index, _siphash128(self._k0, self._k1, key), offset,
                                    rec.value_len < 0))
            for index, digest, offset, tombstone in lookups:
                if offset >= self._get_digest(digest) and (not tombstone or retain_deletes):
                    mask[index] = 1
                    kept += 1
                    tombstones += tombstone
            return RetainResult(bytes(mask), kept, tombstones, keyless)
        finally:
            self._busy = False


# -- rewriting ----------------------------------------------------------------------------


def select_records(records, count: int, mask, base_timestamp: int,
                   new_base_timestamp: int | None, log_append_time: int) -> Selection:
    """The records section of the kept records (``mask[i] != 0``), in order, with the
    first and the largest of their timestamps (a :class:`Selection`).

    ``new_base_timestamp`` None means the first kept record's timestamp (what Kafka's
    batch builder takes as the base when no delete horizon is set). Each kept record
    gets ``timestampDelta = ts - new_base_timestamp``, where ``ts`` is
    ``log_append_time`` if that is ``>= 0`` (a LogAppendTime batch) and otherwise
    ``base_timestamp + `` the record's own delta; everything else of the record
    (attributes, offsetDelta, key, value, headers) is copied byte for byte and the
    length is recomputed. A record whose delta does not change is copied verbatim,
    so with equal bases and no ``log_append_time`` the result is the kept records'
    original bytes (copied one run of consecutive kept records at a time).

    ``mask`` is bytes-like with one byte per record (``RetainResult.mask``);
    ``ValueError`` if its length is not ``count``. Raises
    :class:`~kafkastore.errors.CorruptRecordError` for a malformed section. The
    output is at most ``len(records)`` plus 10 bytes per kept record (a timestamp
    varlong widening to 10 bytes and the length varint by one).
    """
    base_timestamp = _int64(base_timestamp, "base_timestamp")
    rebase = new_base_timestamp is None
    if not rebase:
        new_base_timestamp = _int64(new_base_timestamp, "new_base_timestamp")
    log_append_time = _int64(log_append_time, "log_append_time")
    view = as_view(records)
    keep = as_view(mask)
    if len(keep) != operator.index(count):
        raise ValueError(f"mask has {len(keep)} entries for {count} records")
    recs = _parse_section(view, count)
    out = bytearray()
    first_ts = max_ts = -1
    seen = False
    run_start = run_end = -1  # pending verbatim run [run_start, run_end)
    for index, rec in enumerate(recs):
        if not keep[index]:
            continue
        if log_append_time >= 0:
            ts = log_append_time
        else:
            ts = wrap64(base_timestamp + rec.ts_delta)
        if not seen:
            seen, first_ts = True, ts
            if rebase:
                new_base_timestamp = ts
        if ts > max_ts:
            max_ts = ts
        delta = wrap64(ts - new_base_timestamp)
        if delta == rec.ts_delta:
            if run_end != rec.start:
                if run_start >= 0:
                    out += view[run_start:run_end]
                run_start = rec.start
            run_end = rec.end
            continue
        if run_start >= 0:
            out += view[run_start:run_end]
            run_start = run_end = -1
        ts_bytes = write_uvarint(zz64(delta))
        length = 1 + len(ts_bytes) + (rec.end - rec.ts_end)
        if length > INT32_MAX:
            raise RecordTooLargeError(f"a record of {length} bytes does not fit an int32 "
                                      f"length", position=rec.start, limit=INT32_MAX)
        out += write_uvarint(zz32(length))
        out += view[rec.body:rec.body + 1]
        out += ts_bytes
        out += view[rec.ts_end:rec.end]
    if run_start >= 0:
        out += view[run_start:run_end]
    return Selection(bytes(out), first_ts, max_ts)
