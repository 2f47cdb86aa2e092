"""The offset_map kernel: Kafka's SkimpyOffsetMap keyed by SipHash-2-4-128, and the
log cleaner's record walks over a batch's records section.

Every test that takes ``impl`` runs against both implementations (``impl.offset_map``);
tests that compare the two import both and skip in pure mode when the compiled kernel
is not built. References:

* SipHash-2-4-128 vectors: the reference implementation's table (veorq/SipHash,
  ``vectors.h``, ``vectors_sip128``): key 00 01 .. 0f, message 00 01 .. (n-1).
* Kafka's ``OffsetMapTest`` (kafka-storage.md 10.4) for put/get/clear/full/utilization.
* Kafka's probe formula (kafka-storage.md 7.4), re-implemented below as a tiny model.
* The records walks against oracles built from ``kafkastore.records`` (encode_batch to
  build batches, iter_batches to decode them).
"""

from __future__ import annotations

import importlib
import random
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import strategies as st

from _helpers import PURE_MODE, framed, len_bytes, rec, varint, varlong
from kafkastore.errors import CorruptRecordError, OffsetMapFullError
from kafkastore.records import encode_batch, iter_batches
from strategies import I64_MAX, int64s, record_specs, scaled

KEY = bytes(range(16))
# the impl and both fixtures only select modules: nothing to reset between examples
FIXTURE_OK = [HealthCheck.function_scoped_fixture]

# SipHash-2-4 with 128-bit output, key 00..0f, message 00..(n-1): vectors_sip128[n].
SIPHASH128_VECTORS = {
    0: "a3817f04ba25a8e66df67214c7550293",
    1: "da87c1d86b99af44347659119b22fc45",
    2: "8177228da4a45dc7fca38bdef60affe4",
    7: "a1f1ebbed8dbc153c0b84aa61ff08239",
    8: "3b62a9ba6258f5610f83e264f31497b4",
    9: "264499060ad9baabc47f8b02bb6d71ed",
    15: "5493e99933b0a8117e08ec0f97cfc3d9",
    16: "6ee2a4ca67b054bbfd3315bf85230577",
    17: "473d06e8738db89854c066c47ae47740",
    31: "2939b0183223fafc1723de4f52c43d35",
    32: "7c3956ca5eeafc3e363e9d556546eb68",
    62: "5853542321f567a005d547a4f04759bd",
    63: "5150d1772f50834a503e069a973fbd7c",
}


@pytest.fixture
def both():
    """``(pure, compiled)`` offset_map modules; skipped in pure mode if not built."""
    pure = importlib.import_module("kafkastore._pure.offset_map")
    try:
        ext = importlib.import_module("kafkastore._ext.offset_map")
    except ImportError as exc:
        if PURE_MODE:
            pytest.skip(f"compiled offset_map not built ({exc}): nothing to compare with")
        raise
    return pure, ext


def _section(batch: bytes) -> tuple[bytes, int]:
    """The records section and record count of an uncompressed v2 batch."""
    return batch[61:], struct.unpack_from(">i", batch, 57)[0]


def _outcome(fn):
    """What a call did, comparable across backends: its result, or the corrupt error."""
    try:
        return ("ok", fn())
    except CorruptRecordError as exc:
        return ("corrupt", exc.position, exc.message)


# == SipHash-2-4-128 ========================================================================


@pytest.mark.parametrize("n", sorted(SIPHASH128_VECTORS))
def test_siphash128_reference_vectors(impl, n):
    m = impl.offset_map.SkimpyOffsetMap(24, hash_key=KEY)
    assert m.digest(bytes(range(n))).hex() == SIPHASH128_VECTORS[n]


def test_digest_takes_any_bytes_like_key(impl):
    m = impl.offset_map.SkimpyOffsetMap(24, hash_key=bytearray(KEY))
    want = bytes.fromhex(SIPHASH128_VECTORS[15])
    data = bytes(range(15))
    assert m.digest(data) == want
    assert m.digest(bytearray(data)) == want
    assert m.digest(memoryview(data)) == want
    assert m.digest(memoryview(b"xx" + data)[2:]) == want
    with pytest.raises(TypeError):
        m.digest("not bytes")
    with pytest.raises(TypeError):
        m.digest(None)


@given(hash_key=st.binary(min_size=16, max_size=16), keys=st.lists(st.binary(max_size=80),
                                                                    max_size=8))
@scaled(0.5, suppress_health_check=FIXTURE_OK)
def test_backends_give_the_same_digest(both, hash_key, keys):
    pure, ext = both
    a, b = pure.SkimpyOffsetMap(240, hash_key), ext.SkimpyOffsetMap(240, hash_key)
    for key in keys:
        assert a.digest(key) == b.digest(key)


# == construction and state ==================================================================


def test_construction(impl):
    om = impl.offset_map
    m = om.SkimpyOffsetMap(1000, hash_key=KEY)
    assert (m.memory, m.slots, m.size, len(m), m.latest_offset) == (1000, 41, 0, 0, -1)
    assert (m.lookups, m.probes, m.utilization, m.collision_rate) == (0, 0, 0.0, 0.0)
    assert m.hash_key == KEY
    with pytest.raises(AttributeError):
        m.hash_key = bytes(16)
    assert "SkimpyOffsetMap(" in repr(m) and KEY.hex() not in repr(m)
    for memory in (0, 23, -24):
        with pytest.raises(ValueError):
            om.SkimpyOffsetMap(memory)
    with pytest.raises(ValueError):
        om.SkimpyOffsetMap(1 << 31)
    for bad in (b"", bytes(15), bytes(17)):
        with pytest.raises(ValueError):
            om.SkimpyOffsetMap(24, hash_key=bad)
    with pytest.raises(TypeError):
        om.SkimpyOffsetMap(24.0)


def test_default_hash_key_is_random(impl):
    om = impl.offset_map
    keys = {om.SkimpyOffsetMap(24).hash_key for _ in range(8)}
    assert len(keys) == 8 and all(len(k) == 16 for k in keys)
    a, b = om.SkimpyOffsetMap(24), om.SkimpyOffsetMap(24)
    assert a.digest(b"key") != b.digest(b"key")


# == Kafka's OffsetMapTest ==================================================================


@pytest.mark.parametrize("items", [10, 100, 1000, 5000])
def test_basic_put_get(impl, items):
    """OffsetMapTest.testBasicValidation: memory = items * 48 (load <= 50%)."""
    m = impl.offset_map.SkimpyOffsetMap(items * 48, hash_key=KEY)
    for i in range(items):
        m.put(str(i).encode(), i)
        assert m.size == i + 1
        assert m.utilization == (i + 1) / m.slots
    for i in range(items):
        assert m.get(str(i).encode()) == i
    assert m.latest_offset == items - 1


def test_clear(impl):
    """OffsetMapTest.testClear: nothing is findable after clear()."""
    m = impl.offset_map.SkimpyOffsetMap(4000, hash_key=KEY)
    for i in range(10):
        m.put(f"{i}".encode(), i)
    for i in range(10):
        assert m.get(f"{i}".encode()) == i
    m.clear()
    assert (m.size, m.latest_offset, m.lookups, m.probes, m.utilization) == (0, -1, 0, 0, 0.0)
    for i in range(10):
        assert m.get(f"{i}".encode()) == -1
    m.put(b"again", 7)
    assert m.get(b"again") == 7 and m.size == 1


def test_get_on_a_full_map_terminates(impl):
    """OffsetMapTest.testGetWhenFull: bounded probing on a full map returns -1."""
    slots = 7
    m = impl.offset_map.SkimpyOffsetMap(slots * 24, hash_key=KEY)
    for i in range(slots):
        m.put(f"k{i}".encode(), i)
    assert m.size == slots and m.utilization == 1.0
    before = m.probes
    assert m.get(b"missing") == -1
    assert m.probes - before <= slots + 12
    for i in range(slots):
        assert m.get(f"k{i}".encode()) == i
    # Kafka checks for room first, even for a key that is already there
    with pytest.raises(OffsetMapFullError):
        m.put(b"new", 100)
    with pytest.raises(OffsetMapFullError):
        m.put(b"k0", 100)
    assert m.get(b"k0") == 0


def test_missing_keys_and_overwrite(impl):
    m = impl.offset_map.SkimpyOffsetMap(48 * 100, hash_key=KEY)
    assert m.get(b"absent") == -1
    m.put(b"a", 5)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.size, m.latest_offset) == (9, 1, 9)
    m.put(bytearray(b"b"), 3)
    assert m.get(memoryview(b"b")) == 3 and m.latest_offset == 3
    assert m.get(b"") == -1
    m.put(b"", -5)
    assert m.get(b"") == -5


def test_update_latest_offset(impl):
    """latestOffset is the last put, or what updateLatestOffset set; lookups unaffected."""
    m = impl.offset_map.SkimpyOffsetMap(48 * 10, hash_key=KEY)
    m.put(b"x", 10)
    assert m.latest_offset == 10
    m.update_latest_offset(50)
    assert m.latest_offset == 50 and m.get(b"x") == 10
    m.put(b"y", 20)
    assert m.latest_offset == 20
    with pytest.raises(OverflowError):
        m.update_latest_offset(1 << 63)


def test_collision_rate_with_a_tiny_map(impl):
    m = impl.offset_map.SkimpyOffsetMap(7 * 24, hash_key=KEY)
    assert m.collision_rate == 0.0
    for i in range(7):
        m.put(f"key-{i}".encode(), i)
    assert m.lookups == 7
    assert m.collision_rate == (m.probes - m.lookups) / m.lookups
    assert m.collision_rate > 0  # seven keys into seven slots must collide
    for i in range(7):
        assert m.get(f"key-{i}".encode()) == i
    assert m.lookups == 14
    assert m.collision_rate == (m.probes - 14) / 14


# == the probe sequence ======================================================================


class KafkaModel:
    """An independent model of SkimpyOffsetMap over digests (kafka-storage.md 7.4)."""

    def __init__(self, slots):
        self.slots = slots
        self.table = [None] * slots  # (digest, offset) or None
        self.size = self.lookups = self.probes = 0
        self.positions = []          # slots visited by the last operation

    def position(self, digest, attempt):
        window = min(attempt, 12)
        probe = struct.unpack(">i", digest[window:window + 4])[0] + max(0, attempt - 12)
        probe = (probe + 2**31) % 2**32 - 2**31            # Java int wrap
        self.probes += 1
        self.positions.append(0 if probe == -2**31 else abs(probe) % self.slots)
        return self.positions[-1]

    @staticmethod
    def _empty(entry):
        return entry is None or entry == (bytes(16), 0)

    def put(self, digest, offset):
        assert self.size < self.slots
        self.lookups += 1
        self.positions = []
        attempt = 0
        slot = self.position(digest, attempt)
        while not self._empty(self.table[slot]):
            if self.table[slot][0] == digest:
                self.table[slot] = (digest, offset)
                return
            attempt += 1
            slot = self.position(digest, attempt)
        self.table[slot] = (digest, offset)
        self.size += 1

    def get(self, digest):
        self.lookups += 1
        self.positions = []
        for attempt in range(self.slots + 12):
            slot = self.position(digest, attempt)
            entry = self.table[slot]
            if self._empty(entry):
                return -1
            if entry[0] == digest:
                return entry[1]
        return -1


def test_model_position_formula():
    """The model's formula on crafted digests: windows, linear phase, int wrap, abs(MIN)."""
    model = KafkaModel(1000)
    digest = bytes(range(1, 17))
    assert model.position(digest, 0) == 0x01020304 % 1000
    assert model.position(digest, 5) == 0x06070809 % 1000
    assert model.position(digest, 12) == 0x0D0E0F10 % 1000
    assert model.position(digest, 15) == (0x0D0E0F10 + 3) % 1000
    wrap = bytes(12) + b"\x7f\xff\xff\xff"
    assert model.position(wrap, 12) == 0x7FFFFFFF % 1000
    assert model.position(wrap, 13) == 0                  # INT32_MIN: Utils.abs -> 0
    assert model.position(wrap, 14) == 0x7FFFFFFF % 1000  # -(2**31 - 1)
    negative = b"\xff\xff\xff\xfe" + bytes(12)
    assert model.position(negative, 0) == 2


def test_pure_slot_function_matches_the_model():
    """The pure twin's probe helper on digests that random keys would never produce."""
    pure = importlib.import_module("kafkastore._pure.offset_map")
    rng = random.Random(7)
    digests = [bytes(12) + b"\x7f\xff\xff\xf0", bytes(12) + b"\x80\x00\x00\x00",
               b"\x80\x00\x00\x00" + bytes(12), b"\xff" * 16, bytes(16)]
    digests += [rng.randbytes(16) for _ in range(20)]
    for slots in (1, 2, 7, 1000, 5_592_405):
        model = KafkaModel(slots)
        for digest in digests:
            for attempt in (0, 1, 11, 12, 13, 20, 40, 5000):
                assert pure._slot(digest, attempt, slots) == model.position(digest, attempt)


@given(slots=st.integers(1, 9), keys=st.lists(st.binary(max_size=6), max_size=12),
       misses=st.lists(st.binary(min_size=7, max_size=7), max_size=4))
@scaled(0.5, suppress_health_check=FIXTURE_OK)
def test_probes_match_the_kafka_model(impl, slots, keys, misses):
    m = impl.offset_map.SkimpyOffsetMap(slots * 24, hash_key=KEY)
    model = KafkaModel(slots)
    for offset, key in enumerate(keys):
        if m.size >= slots:
            with pytest.raises(OffsetMapFullError):
                m.put(key, offset)
            continue
        m.put(key, offset)
        model.put(m.digest(key), offset)
        assert (m.size, m.lookups, m.probes) == (model.size, model.lookups, model.probes)
    for key in keys + misses:
        assert m.get(key) == model.get(m.digest(key))
        assert (m.lookups, m.probes) == (model.lookups, model.probes)


@pytest.mark.parametrize("n", range(1, 10))
def test_backends_agree_on_probes(both, n):
    pure, ext = both
    a, b = pure.SkimpyOffsetMap(7 * 24, KEY), ext.SkimpyOffsetMap(7 * 24, KEY)
    for i in range(n):
        key = f"key:{i}".encode()
        if i < 7:
            a.put(key, i * 3)
            b.put(key, i * 3)
        else:
            for m in (a, b):
                with pytest.raises(OffsetMapFullError):
                    m.put(key, i)
        state = lambda m: (m.size, m.lookups, m.probes, m.latest_offset)  # noqa: E731
        assert state(a) == state(b)
    for i in range(n + 3):
        key = f"key:{i}".encode()
        assert a.get(key) == b.get(key)
    assert (a.lookups, a.probes, a.collision_rate) == (b.lookups, b.probes, b.collision_rate)


# == records sections ========================================================================

KEYS = [f"user-{i}".encode() for i in range(6)]


def _spec_records(rng: random.Random, n: int, base_ts: int) -> list:
    """(key, value, timestamp, headers) records: repeated keys, null keys, tombstones."""
    out = []
    for _ in range(n):
        roll = rng.random()
        key = None if roll < 0.15 else rng.choice(KEYS)
        value = None if 0.15 <= roll < 0.35 else rng.randbytes(rng.randint(0, 30))
        ts = base_ts + rng.randint(-5000, 5000)
        headers = tuple((f"h{j}", None if rng.random() < 0.3 else rng.randbytes(3))
                        for j in range(rng.randint(0, 2)))
        out.append((key, value, ts, headers))
    return out


def _batch(rng, n, base_offset=1000, base_ts=1_700_000_000_000, offsets=None):
    records = _spec_records(rng, n, base_ts)
    batch = encode_batch(records, base_offset=base_offset, offsets=offsets)
    return batch, [r for b in iter_batches(batch) for r in b]


@pytest.mark.parametrize("seed", range(6))
def test_put_keys_matches_the_reference(impl, seed):
    rng = random.Random(seed)
    n, base = rng.randint(1, 60), rng.randint(0, 10**6)
    # every third batch has offset gaps, as a cleaned log does
    offsets = sorted(rng.sample(range(base, base + 3 * n), n)) if seed % 3 == 0 else None
    batch, decoded = _batch(rng, n, base_offset=base, offsets=offsets)
    section, count = _section(batch)
    start = decoded[len(decoded) // 3].offset if seed % 2 else 0
    m = impl.offset_map.SkimpyOffsetMap(24 * 200, hash_key=KEY)
    base_offset = struct.unpack_from(">q", batch, 0)[0]
    walked, stopped = m.put_keys(section, count, base_offset, start, 10**9)
    assert (walked, stopped) == (count, False)
    expected = {}
    for r in decoded:
        if r.key is not None and r.offset >= start:
            expected[r.key] = r.offset
    assert m.size == len(expected)
    for key in KEYS:
        assert m.get(key) == expected.get(key, -1)
    puts = [r.offset for r in decoded if r.key is not None and r.offset >= start]
    assert m.latest_offset == (puts[-1] if puts else -1)


def test_put_keys_stops_at_max_entries(impl):
    records = [(f"k{i}".encode(), b"v", 1000 + i) for i in range(10)]
    records.insert(3, (None, b"keyless", 1003))    # walked but never put
    records.insert(5, (b"k1", b"again", 1005))     # an overwrite does not grow the map
    section, count = _section(encode_batch(records, base_offset=50))
    # offsets 50.. : k0 k1 k2 (null) k3 k1 k4 k5 k6 k7 k8 k9
    m = impl.offset_map.SkimpyOffsetMap(24 * 100, hash_key=KEY)
    assert m.put_keys(section, count, 50, 0, 5) == (7, True)  # in front of k5
    assert m.size == 5 and m.latest_offset == 56
    assert [m.get(f"k{i}".encode()) for i in range(6)] == [50, 55, 52, 54, 56, -1]
    # Kafka checks before every put, an overwrite included
    m = impl.offset_map.SkimpyOffsetMap(24 * 100, hash_key=KEY)
    assert m.put_keys(section, count, 50, 0, 4) == (5, True)  # in front of the second k1
    assert m.size == 4 and m.get(b"k1") == 51
    # max_entries already reached: nothing is put at all
    m = impl.offset_map.SkimpyOffsetMap(24 * 100, hash_key=KEY)
    m.put(b"other", 1)
    assert m.put_keys(section, count, 50, 0, 1) == (0, True)
    assert m.size == 1 and m.latest_offset == 1
    # records below start_offset are walked past without counting
    m = impl.offset_map.SkimpyOffsetMap(24 * 100, hash_key=KEY)
    assert m.put_keys(section, count, 50, 58, 2) == (10, True)  # k6, k7 put; stop at k8
    assert m.size == 2 and m.get(b"k5") == -1 and m.get(b"k7") == 59
    assert m.put_keys(section, count, 50, 58, 10) == (count, False)


def test_put_keys_map_full_error(impl):
    section, count = _section(encode_batch([(f"k{i}".encode(), b"v") for i in range(5)]))
    m = impl.offset_map.SkimpyOffsetMap(24 * 3, hash_key=KEY)
    with pytest.raises(OffsetMapFullError):
        m.put_keys(section, count, 0, 0, 100)
    assert m.size == 3  # the puts before the full one stay


def test_put_keys_empty_section(impl):
    m = impl.offset_map.SkimpyOffsetMap(240, hash_key=KEY)
    assert m.put_keys(b"", 0, 0, 0, 10) == (0, False)
    assert m.put_keys(memoryview(b""), 0, 0, 0, 0) == (0, False)


@pytest.mark.parametrize("seed", range(8))
def test_retained_mask_matches_shouldRetainRecord(impl, seed):
    rng = random.Random(100 + seed)
    m = impl.offset_map.SkimpyOffsetMap(24 * 100, hash_key=KEY)
    # pass 1 over two batches; pass 2 over the first one
    b1, d1 = _batch(rng, rng.randint(1, 40), base_offset=0)
    b2, d2 = _batch(rng, rng.randint(1, 40), base_offset=d1[-1].offset + 1)
    for batch, decoded in ((b1, d1), (b2, d2)):
        section, count = _section(batch)
        m.put_keys(section, count, decoded[0].offset, 0, 10**6)
    latest = rng.choice([d2[-1].offset, d1[-1].offset, d1[len(d1) // 2].offset])
    retain_deletes = bool(seed % 2)
    latest_by_key = {r.key: r.offset for r in d1 + d2 if r.key is not None}
    section, count = _section(b1)
    lookups = m.lookups
    result = m.retained_mask(section, count, 0, latest, retain_deletes)
    mask, kept, tombstones, keyless = [], 0, 0, 0
    for r in d1:
        if r.offset > latest:
            keep = True
        elif r.key is None:
            keep = False
            keyless += 1
        else:
            keep = (r.offset >= latest_by_key.get(r.key, -1)
                    and (r.value is not None or retain_deletes))
        mask.append(int(keep))
        kept += keep
        tombstones += keep and r.value is None   # Kafka: any retained record without a value
    assert result == (bytes(mask), kept, tombstones, keyless)
    assert (result.mask, result.kept, result.tombstones_kept, result.keyless_dropped) == (
        bytes(mask), kept, tombstones, keyless)
    assert isinstance(result, impl.offset_map.RetainResult) and isinstance(result, tuple)
    needed = sum(1 for r in d1 if r.offset <= latest and r.key is not None)
    assert m.lookups - lookups == needed


def test_retained_mask_on_an_empty_map(impl):
    records = [(b"a", b"1"), (None, b"2"), (b"b", None), (b"a", b"3")]
    section, count = _section(encode_batch(records, base_offset=10))
    m = impl.offset_map.SkimpyOffsetMap(240, hash_key=KEY)
    # nothing mapped: keyed records are kept (get is -1), keyless ones dropped
    assert m.retained_mask(section, count, 10, 100, True) == (b"\x01\x00\x01\x01", 3, 1, 1)
    assert m.retained_mask(section, count, 10, 100, False) == (b"\x01\x00\x00\x01", 2, 0, 1)
    # everything past the map's latest offset is kept as it is (no key needed)
    assert m.retained_mask(section, count, 10, 9, False) == (b"\x01\x01\x01\x01", 4, 1, 0)
    assert m.retained_mask(b"", 0, 0, 0, False) == (b"", 0, 0, 0)
    # a keyless record without a value past the map counts as a tombstone, as in Kafka
    section, count = _section(encode_batch([(None, None)], base_offset=10))
    assert m.retained_mask(section, count, 10, 9, False) == (b"\x01", 1, 1, 0)


# -- select_records ---------------------------------------------------------------------------


def _rebuild(batch: bytes, section: bytes, count: int, new_base_ts: int) -> bytes:
    """The original batch header around a new records section: count, base timestamp,
    length and CRC updated; CreateTime, so readers see new_base_ts + each delta."""
    header = bytearray(batch[:61])
    struct.pack_into(">i", header, 57, count)
    struct.pack_into(">q", header, 27, new_base_ts)
    struct.pack_into(">h", header, 21, struct.unpack_from(">h", header, 21)[0] & ~0x08)
    struct.pack_into(">i", header, 8, 49 + len(section))
    body = bytes(header[21:]) + section
    struct.pack_into(">I", header, 17, crc32c.crc32c(body))
    return bytes(header) + section


def _view(r):
    return (r.offset, r.timestamp, r.key, r.value, r.headers)


@pytest.mark.parametrize("case", ["same-base", "delete-horizon", "log-append-time",
                                  "far-horizon"])
@pytest.mark.parametrize("seed", range(4))
def test_select_records_rebuilds_the_kept_records(impl, case, seed):
    rng = random.Random(200 + seed)
    base_ts = 1_700_000_000_000
    batch, decoded = _batch(rng, rng.randint(1, 50), base_ts=base_ts)
    section, count = _section(batch)
    first_ts = struct.unpack_from(">q", batch, 27)[0]
    mask = bytes(rng.random() < 0.6 for _ in range(count))
    new_base, lat = {
        "same-base": (first_ts, -1),
        "delete-horizon": (first_ts + 86_400_000, -1),
        "log-append-time": (first_ts + 123, base_ts + 999_999),
        "far-horizon": (-(1 << 62), -1),    # deltas need 9- and 10-byte varlongs
    }[case]
    sel = impl.offset_map.select_records(section, count, mask, first_ts, new_base, lat)
    out = sel.records
    kept = [r for r, k in zip(decoded, mask) if k]
    got = [r for b in iter_batches(_rebuild(batch, out, len(kept), new_base)) for r in b]
    want = [(o, lat if lat >= 0 else ts, k, v, h) for (o, ts, k, v, h) in map(_view, kept)]
    assert [_view(r) for r in got] == want
    stamps = [w[1] for w in want]
    assert (sel.first_timestamp, sel.max_timestamp) == (
        (stamps[0], max(stamps)) if stamps else (-1, -1))
    # None: the first kept record's timestamp is the base (Kafka's builder without a horizon)
    rebased = impl.offset_map.select_records(section, count, mask, first_ts, None, lat)
    assert rebased == impl.offset_map.select_records(
        section, count, mask, first_ts, stamps[0] if stamps else 0, lat)
    assert len(out) <= len(section) + 10 * len(kept)
    if case == "same-base":
        # verbatim: the kept records' own bytes
        assert len(out) == sum(len(_record_bytes(section, count)[i]) for i in range(count)
                               if mask[i])
        assert impl.offset_map.select_records(section, count, b"\x01" * count, first_ts,
                                              first_ts, -1).records == section


small_keys = st.one_of(st.none(), st.sampled_from([b"", b"a", b"b", b"key-c", b"\x00" * 20]))


@given(specs=record_specs(max_size=12), keys=st.data(), new_base=int64s,
       lat=st.one_of(st.just(-1), st.integers(0, I64_MAX)),
       latest_cut=st.integers(0, 12), retain_deletes=st.booleans(),
       mask_bits=st.integers(0, 2**12 - 1))
@scaled(0.5, suppress_health_check=FIXTURE_OK)
def test_walks_against_the_reference(impl, specs, keys, new_base, lat, latest_cut,
                                     retain_deletes, mask_bits):
    """put_keys, retained_mask and select_records on generated batches (extreme
    timestamps, unicode header keys, empty and null keys and values) against
    kafkastore.records' decoding."""
    specs, default_ts = specs
    records = [(keys.draw(small_keys), s.value, s.timestamp, s.headers) for s in specs]
    batch = encode_batch(records, base_offset=500, timestamp=default_ts)
    section, count = _section(batch)
    decoded = [r for b in iter_batches(batch) for r in b]
    m = impl.offset_map.SkimpyOffsetMap(24 * 64, hash_key=KEY)
    assert m.put_keys(section, count, 500, 0, 10**6) == (count, False)
    latest_by_key = {r.key: r.offset for r in decoded if r.key is not None}
    assert m.size == len(latest_by_key)
    latest = 500 + min(latest_cut, count) - 1
    mask = []
    for r in decoded:
        if r.offset > latest:
            mask.append(1)
        elif r.key is None:
            mask.append(0)
        else:
            mask.append(int(r.offset >= latest_by_key[r.key]
                            and (r.value is not None or retain_deletes)))
    result = m.retained_mask(section, count, 500, latest, retain_deletes)
    assert result.mask == bytes(mask)
    keep = bytes((mask_bits >> i) & 1 for i in range(count))
    base_ts = struct.unpack_from(">q", batch, 27)[0]
    out = impl.offset_map.select_records(section, count, keep, base_ts, new_base, lat).records
    kept = [r for r, k in zip(decoded, keep) if k]
    assert len(out) <= len(section) + 10 * len(kept)
    got = [r for b in iter_batches(_rebuild(batch, out, len(kept), new_base)) for r in b]
    want = [(o, lat if lat >= 0 else ts, k, v, h) for (o, ts, k, v, h) in map(_view, kept)]
    assert [_view(r) for r in got] == want


def _record_bytes(section: bytes, count: int) -> list[bytes]:
    """Split a records section at its length varints (test-side, from the spec)."""
    out, pos = [], 0
    for _ in range(count):
        value, shift, start = 0, 0, pos
        while True:
            b = section[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        length = (value >> 1) ^ -(value & 1)
        pos += length
        out.append(section[start:pos])
    assert pos == len(section)
    return out


def test_select_records_edge_cases(impl):
    om = impl.offset_map
    section, count = _section(encode_batch([(b"a", b"1", 5), (b"b", None, 7)]))
    assert om.select_records(section, count, b"\x00\x00", 5, 5, -1) == (b"", -1, -1)
    assert om.select_records(b"", 0, b"", 0, 0, -1) == (b"", -1, -1)
    with pytest.raises(ValueError):
        om.select_records(section, count, b"\x01", 5, 5, -1)
    with pytest.raises(ValueError):
        om.select_records(section, count, b"\x01\x01\x01", 5, 5, -1)
    # the second record alone, moved to a new base: only its delta and length change
    out = om.select_records(section, count, bytearray(b"\x00\x07"), 5, 0, -1)
    assert out == (rec(offset_delta=1, ts_delta=7, key=b"b", value=None), 7, 7)
    # a non-canonical (overlong) varint survives a verbatim copy byte for byte
    body = b"\x00" + b"\x80\x00" + varint(0) + len_bytes(b"k") + len_bytes(b"v") + varint(0)
    odd = framed(body)
    assert om.select_records(odd, 1, b"\x01", 9, 9, -1).records == odd
    assert om.select_records(odd, 1, b"\x01", 9, 8, -1).records == rec(ts_delta=1, key=b"k",
                                                                        value=b"v")


# == hostile input ============================================================================


def _hostile_section() -> tuple[bytes, int]:
    records = [(b"key-a", b"value", 1000, (("h", b"x"), ("n", None))),
               (None, b"no key", 1001),
               (b"key-b", None, 900),
               (b"key-a", b"v" * 70, 5000, (("h2", b""),)),
               (b"", b"", 1002)]
    return _section(encode_batch(records, base_offset=40))


def _run_all(om, section, count, hash_key=KEY):
    """The three walks on one input: comparable outcomes, map state included."""
    m = om.SkimpyOffsetMap(24 * 50, hash_key=hash_key)
    m.put(b"key-a", 43)
    put = _outcome(lambda: (m.put_keys(section, count, 40, 0, 1000), m.size, m.lookups,
                            m.probes, m.get(b"key-a"), m.get(b"key-b"), m.get(b"")))
    retain = _outcome(lambda: tuple(m.retained_mask(section, count, 40, 43, False)))
    if not 0 <= count <= 10_000:  # the mask must have `count` bytes
        return put, retain, ("skipped",)
    mask = bytes(i % 3 != 1 for i in range(count))
    select = _outcome(lambda: om.select_records(section, count, mask, 1000, 500, -1))
    return put, retain, select


def _variants(section: bytes, count: int):
    """Every truncation, and single-byte mutations at every position."""
    for cut in range(len(section)):
        yield section[:cut], count
    rng = random.Random(1)
    for pos in range(len(section)):
        values = {0x00, 0xFF, 0x80, 0x7F, 0x01, section[pos] ^ 0x01, section[pos] ^ 0x80,
                  rng.randrange(256)}
        for value in values - {section[pos]}:
            mutated = bytearray(section)
            mutated[pos] = value
            yield bytes(mutated), count
    for c in (-1, 0, count - 1, count + 1, len(section) // 7, len(section) // 7 + 1, 2**31,
              2**40):
        yield section, c
    yield section + b"\x00", count
    yield section + section, count
    yield section + section, 2 * count


def test_hostile_input_gives_a_result_or_corrupt_record_error(impl):
    section, count = _hostile_section()
    corrupt = 0
    for data, c in _variants(section, count):
        for outcome in _run_all(impl.offset_map, data, c):
            assert outcome[0] in ("ok", "corrupt", "skipped")
            if outcome[0] == "corrupt":
                corrupt += 1
                assert 0 <= outcome[1] <= len(data)
    assert corrupt > 0


def test_hostile_input_backends_agree(both):
    pure, ext = both
    section, count = _hostile_section()
    n = 0
    for data, c in _variants(section, count):
        assert _run_all(pure, data, c) == _run_all(ext, data, c), (data.hex(), c)
        n += 1
    assert n > 1000


@pytest.mark.parametrize("body, message", [
    (b"\x00" + varlong(0) + varint(0) + len_bytes(b"k") + len_bytes(b"v") + varint(1)
     + varint(-1) + varint(-1), "Invalid negative header key size"),
    (b"\x00" + varlong(0) + varint(0) + len_bytes(b"k") + len_bytes(b"v") + varint(-1),
     "Found invalid number of record headers -1"),
    (b"\x00" + varlong(0) + varint(0) + len_bytes(b"k") + len_bytes(b"v") + varint(0) + b"x",
     "Invalid record size: expected to read 9 bytes in record payload, but instead read 8"),
    (b"\x00" + b"\xff" * 10 + b"\x01", "Varlong is too long"),
    (b"\x00" + varlong(0) + b"\xff" * 5 + b"\x01", "Varint is too long"),
    (b"\x00" + varlong(0) + varint(0) + varint(50) + b"k", "key past record end"),
])
def test_malformed_records_are_corrupt(impl, body, message):
    good = rec(key=b"g", value=b"g")
    data = good + framed(body)
    m = impl.offset_map.SkimpyOffsetMap(240, hash_key=KEY)
    calls = [lambda: m.put_keys(data, 2, 0, 0, 100),
             lambda: m.retained_mask(data, 2, 0, 100, True),
             lambda: impl.offset_map.select_records(data, 2, b"\x01\x01", 0, 5, -1)]
    for call in calls:
        with pytest.raises(CorruptRecordError, match=message) as info:
            call()
        assert info.value.position == len(good)
    assert m.size == 0 and m.lookups == 0  # validated before any put or lookup


@pytest.mark.parametrize("data, count, position, message", [
    (rec() + rec(), 3, 0, "Found invalid record count 3"),
    (rec(key=b"x" * 12), 2, len(rec(key=b"x" * 12)), "premature EOF"),
    (rec() + rec(), -1, 0, "Found invalid record count -1"),
    (rec() + rec(), 1, len(rec()), "records still remaining"),
    (rec() + rec(), 0, 0, "records still remaining"),
    (b"\x00" * 7, 1, 0, "empty record"),
    (varint(100) + b"\x00" * 10, 1, 0,
     "Invalid record size: expected 100 bytes in record payload, but the buffer has only 10 "
     "remaining bytes"),
    (varint(-3) + b"\x00" * 10, 1, 0, "Invalid record size: expected -3 bytes in record payload"),
])
def test_section_level_errors(impl, data, count, position, message):
    m = impl.offset_map.SkimpyOffsetMap(240, hash_key=KEY)
    calls = [lambda: m.put_keys(data, count, 0, 0, 100),
             lambda: m.retained_mask(data, count, 0, 100, True)]
    if count >= 0:
        calls.append(lambda: impl.offset_map.select_records(data, count, bytes(count), 0, 0,
                                                            -1))
    for call in calls:
        with pytest.raises(CorruptRecordError, match=message) as info:
            call()
        assert info.value.position == position


@given(data=st.binary(max_size=64), count=st.integers(-2, 12),
       hash_key=st.binary(min_size=16, max_size=16))
@example(data=rec(key=None) * 3, count=3, hash_key=KEY)
@scaled(1.0, suppress_health_check=FIXTURE_OK)
def test_random_bytes_backends_agree(both, data, count, hash_key):
    pure, ext = both
    assert _run_all(pure, data, count, hash_key) == _run_all(ext, data, count, hash_key)
