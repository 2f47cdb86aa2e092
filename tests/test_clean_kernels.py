"""Issue 31, the ``clean`` row: the offset map probes a table sized for the keys a round
can put (``SkimpyOffsetMap.clear(expected_entries=...)``), and nothing else changes.

A fresh 128 MiB map's first touches were the largest cost of a clean (a page fault per
4 KiB of table: ~100 ms of a 1M-record clean). The cleaner now tells the map how many
keys its pass 1 can put at most (the offsets below the active segment), and the map
probes a prefix of its table sized for them, doubled whenever it is 90% full. Kafka's
rules (the probe formula, what "full" means: ``maxDesiredMapSize`` of the configured
slots) and every result stay; these tests pin that:

* the map: gets, size, latest offset, utilization and where a walk stops for "full"
  equal those of the whole table, on random keys, growth included; both backends make
  the same probes;
* the cleaner: the cleaned ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files
  are byte for byte those of a cleaner whose map probes the whole table, for random
  workloads (keys, keyless records, tombstones, transactions, compression, several
  rounds across the delete horizon).

The whole-table side is the previous behaviour (``clear()`` without a bound), kept by
the map's own API, so the oracle is independent of the new sizing code.
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest
from _helpers import dir_files
from _logtools import Clock, open_log
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_cleaner import op  # the property test's operations (its "clean" is skipped here)
from test_offset_map import both  # noqa: F401  (the (pure, compiled) fixture)

from kafkastore.cleaner import Cleaner, CleanerConfig, clean
from kafkastore.errors import OffsetMapFullError
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch

KEY = bytes(range(16))
MEMORY = 24 * 5000          # 5,000 slots: growth from the 1,024-slot minimum is reachable
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def _state(m) -> tuple:
    return m.size, len(m), m.latest_offset, m.utilization, m.lookups, m.slots


def _section(records) -> tuple[bytes, int]:
    """The records section and count of an uncompressed v2 batch of ``records``."""
    batch = encode_batch([(k, v, 0) for k, v in records], base_offset=0, timestamp=0)
    return batch[61:], struct.unpack_from(">i", batch, 57)[0]


keys_st = st.lists(st.integers(0, 3000), min_size=0, max_size=2500)


@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURE_OK)
@given(picks=keys_st, expected=st.sampled_from([0, 10, 900, 2000, 5000, 10**9]))
@example(picks=[i * 7 % 3001 for i in range(2500)], expected=0)   # grows 1024 -> 4096
def test_a_sized_table_maps_like_the_whole_table(impl, picks, expected):
    """put one by one: every get, and the state, equal the whole table's, whatever the
    bound (too small: the prefix grows; past the slots: the whole table)."""
    whole = impl.offset_map.SkimpyOffsetMap(MEMORY, KEY)
    sized = impl.offset_map.SkimpyOffsetMap(MEMORY, KEY)
    whole.clear()
    sized.clear(expected_entries=expected)
    for offset, i in enumerate(picks):
        key = b"key-%d" % i
        whole.put(key, offset)
        sized.put(key, offset)
    assert _state(sized)[:4] == _state(whole)[:4]
    for i in range(3100):   # every key put, and absent ones
        key = b"key-%d" % i
        assert sized.get(key) == whole.get(key)
    assert sized.lookups == whole.lookups
    assert whole.table_slots == whole.slots
    if expected >= sized.slots:
        assert sized.probes == whole.probes, "past the slots the bound changes nothing"


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(picks=st.lists(st.integers(0, 6000), min_size=1, max_size=4600),
       chunk=st.integers(1, 700), start=st.integers(0, 50))
@example(picks=list(range(4600)), chunk=700, start=3)   # grows mid-section, then full
def test_put_keys_stops_where_the_whole_table_stops(impl, picks, chunk, start):
    """The bulk walk over sections (growth mid-section included): the same records
    walked, the same "full" stop (Kafka's maxDesiredMapSize, 90% of the slots), the
    same map."""
    whole = impl.offset_map.SkimpyOffsetMap(MEMORY, KEY)
    sized = impl.offset_map.SkimpyOffsetMap(MEMORY, KEY)
    whole.clear()
    sized.clear(expected_entries=0)
    max_entries = int(whole.slots * 0.9)
    for base in range(0, len(picks), chunk):
        section, count = _section([(b"k%d" % i, b"v") for i in picks[base:base + chunk]])
        got = [m.put_keys(section, count, base, start, max_entries) for m in (whole, sized)]
        assert got[0] == got[1]
        assert _state(sized)[:4] == _state(whole)[:4]
        if got[0][1]:
            break
    for i in range(6001):
        assert sized.get(b"k%d" % i) == whole.get(b"k%d" % i)
    mask = [m.retained_mask(section, count, base, m.latest_offset, True) for m in (whole, sized)]
    assert mask[0] == mask[1]


def test_the_configured_slots_still_make_the_map_full(impl):
    """A bound far below what is put: the prefix grows to every slot, and the put past
    the last slot raises as Kafka's full map does."""
    m = impl.offset_map.SkimpyOffsetMap(24 * 1500, KEY)
    m.clear(expected_entries=1)
    for i in range(1500):
        m.put(b"x%d" % i, i)
    assert (m.size, m.utilization) == (1500, 1.0)
    with pytest.raises(OffsetMapFullError):
        m.put(b"x0", 1500)
    assert all(m.get(b"x%d" % i) == i for i in range(1500))


def test_a_bad_bound_is_refused(impl):
    m = impl.offset_map.SkimpyOffsetMap(MEMORY, KEY)
    with pytest.raises(ValueError, match="expected_entries"):
        m.clear(expected_entries=-1)
    with pytest.raises(TypeError):
        m.clear(expected_entries=1.5)


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(picks=st.lists(st.integers(0, 4000), min_size=1, max_size=3000),
       expected=st.sampled_from([0, 500, 3000]))
def test_both_backends_probe_alike(both, picks, expected):  # noqa: F811
    """The twins grow at the same moments: the same probes, not only the same results."""
    maps = [mod.SkimpyOffsetMap(MEMORY, KEY) for mod in both]
    for m in maps:
        m.put(b"stale", 0)
        m.clear(expected_entries=expected)   # a dirty table is zeroed before it shrinks
    section, count = _section([(b"k%d" % i, None) for i in picks])
    for m in maps:
        m.put_keys(section, count, 0, 0, 10**9)
        m.retained_mask(section, count, 0, m.latest_offset, False)
    pure, compiled = [(_state(m), m.probes, m.table_slots, m.get(b"stale")) for m in maps]
    assert pure == compiled


# -- the cleaner: byte-identical segments ------------------------------------------------------


class _WholeTable:
    """An offset map as the cleaner had it before: ``clear`` ignores the bound."""

    def __init__(self, m) -> None:
        self._m = m

    def clear(self, expected_entries=None) -> None:
        self._m.clear()

    def __getattr__(self, name):
        return getattr(self._m, name)


def _write(log, clock, ops) -> None:
    open_txns: set[int] = set()
    for n, item in enumerate(ops):
        kind = item[0]
        base = log.log_end_offset
        if kind in ("data", "txn"):
            pid, txn = (item[1], True) if kind == "txn" else (-1, False)
            records = item[2] if kind == "txn" else item[1]
            log.append_batches(encode_batch(
                [(k, None if v is None else v + b"%d" % n, clock()) for k, v in records],
                base_offset=base, timestamp=clock(), producer_id=pid, producer_epoch=0,
                base_sequence=0 if txn else -1, is_transactional=txn,
                compression=None if txn else item[2]), assign_offsets=False)
            if txn:
                open_txns.add(pid)
        elif kind == "end" and item[1] in open_txns:
            open_txns.discard(item[1])
            ctype = ControlRecordType.COMMIT if item[2] else ControlRecordType.ABORT
            log.append_batches(encode_control_batch(
                ctype, producer_id=item[1], producer_epoch=0, base_offset=base,
                timestamp=clock()), assign_offsets=False)
        elif kind == "roll" and log.active_segment.size:
            log.roll()
        elif kind == "tick":
            clock.sleep(item[1])
    if log.active_segment.size:
        log.roll()


def _files(directory) -> dict[str, bytes]:
    return dir_files(directory, (".log", ".index", ".timeindex", ".txnindex"))


@settings(max_examples=int(os.environ.get("KS_PROP_EXAMPLES", "40")), deadline=None,
          suppress_health_check=FIXTURE_OK)
@given(ops=st.lists(op, min_size=1, max_size=40), ticks=st.lists(st.integers(0, 3000),
                                                                 min_size=1, max_size=3))
def test_cleaned_segments_are_byte_identical(tmp_path_factory, ops, ticks):
    """The same log cleaned by a cleaner whose map probes the whole table and by the
    cleaner as it is now, round after round: the same files, byte for byte."""
    clock = Clock()
    root = tmp_path_factory.mktemp("clean-eq")
    settings_kw = {"cleanup_policy": "compact", "segment_bytes": 400,
                   "delete_retention_ms": 2000, "index_interval_bytes": 64}
    log = open_log(root / "a", clock, **settings_kw)
    _write(log, clock, ops)
    log.close()
    shutil.copytree(root / "a", root / "b")
    config = CleanerConfig({"log.cleaner.dedupe.buffer.size": 1 << 20})
    cleaners = {"a": Cleaner(config, offset_map=_WholeTable(_new_map(config))),
                "b": Cleaner(config, offset_map=_new_map(config))}
    logs = {name: open_log(root / name, Clock(clock()), **settings_kw) for name in "ab"}
    try:
        for tick in ticks:
            clock.sleep(tick)
            ends = {name: clean(log, cleaner=cleaners[name], now_ms=clock())[0]
                    for name, log in logs.items()}
            assert ends["a"] == ends["b"]
            for log in logs.values():
                log.flush()
            assert _files(root / "a") == _files(root / "b")
    finally:
        for log in logs.values():
            log.close()


def _new_map(config: CleanerConfig):
    from kafkastore.cleaner import SkimpyOffsetMap

    return SkimpyOffsetMap(config.map_memory, KEY)


def test_the_cleaner_probes_a_table_sized_for_its_range(tmp_path):
    """The cleaner passes its bound: a 128 MiB map cleaning a few hundred records probes
    the minimum prefix, and the round's results are the whole table's (pinned above)."""
    clock = Clock()
    log = open_log(tmp_path, clock, cleanup_policy="compact", segment_bytes=2000)
    for i in range(300):
        log.append([(b"k%d" % (i % 40), b"v%d" % i)])
    log.roll()
    cleaner = Cleaner(CleanerConfig({"log.cleaner.dedupe.buffer.size": 128 << 20}))
    clean(log, cleaner=cleaner)
    m = cleaner.offset_map
    assert m.size == 40 and m.slots == (128 << 20) // 24
    assert m.table_slots == 1024, "300 offsets below the active segment: the minimum prefix"
    assert m.utilization == 40 / m.slots, "utilization stays Kafka's: of the configured slots"
    log.close()
