"""Decoding to record objects (issue 31's ``decode`` row): what the faster path must keep.

The compiled reader recycles its records (default_record.pxi): a record going back on
its freelist keeps its key and value bytes objects when nothing else references them,
and the next record decoded into it rewrites a kept object of the same length in place.
These tests hold both backends (conftest's ``rb`` fixture) to what a reader of plain,
freshly allocated objects gives:

- random batches (nulls, empty and long payloads, headers, any timestamps, legacy v0/v1,
  every codec) decode to the records that were encoded, and the two backends agree;
- a record, or a key or value taken out of one, keeps its value while later records are
  decoded, and outlives its batch and its buffer;
- a bytes object rewritten in place hashes as a fresh one with its new content (a stale
  cached hash would break every dict keyed by values);
- a corrupt record raises at the same ``next()`` as before, with the same error, after the
  same records.
"""

from __future__ import annotations

import gc

import pytest
from _helpers import framed, rec, record_batch_pair, v2_batch, varint
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from strategies import CODECS, LEGACY_CODECS, record_specs, resolved_timestamps, scaled

from kafkastore.errors import CorruptRecordError
from kafkastore.records import encode_batch

FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
              HealthCheck.data_too_large]


def fields(r):
    return (r.offset, r.timestamp, int(r.timestamp_type), r.key, r.value, r.headers)


def decode(rb, blob):
    return [fields(r) for batch in rb.iter_batches(blob) for r in batch]


def fixed_blob(n_batches=3, per_batch=700, key_size=16, value_size=100, seed=0):
    """Batches of fixed-size keys and values (the recycled case), all values distinct."""
    out = []
    for b in range(n_batches):
        recs = [(b"k%05d-%s" % (b * per_batch + i, b"x" * (key_size - 7)),
                 (b"v%07d|" % (b * per_batch + i + seed)).ljust(value_size, b"."))
                for i in range(per_batch)]
        out.append(encode_batch(recs, base_offset=b * per_batch, timestamp=1_700_000_000_000 + b))
    return b"".join(out)


# -- random batches ----------------------------------------------------------------------


@scaled(0.5, suppress_health_check=FIXTURE_OK, deadline=None)
@given(batches=st.lists(st.tuples(record_specs(max_size=12), st.sampled_from(CODECS)),
                        min_size=1, max_size=4))
def test_v2_random_batches_decode_to_what_was_encoded(rb, batches):
    blob, expected, base = b"", [], 0
    for (specs, default), codec in batches:
        blob += encode_batch([(s.key, s.value, s.timestamp, list(s.headers)) for s in specs],
                             base_offset=base, compression=codec, timestamp=default)
        stamps = resolved_timestamps(specs, default)
        expected += [(base + i, stamps[i], 0, s.key, s.value, tuple(s.headers))
                     for i, s in enumerate(specs)]
        base += len(specs)
    # twice: the second pass decodes into records (and kept bytes) the first pass freed
    assert decode(rb, blob) == expected
    assert decode(rb, blob) == expected


@scaled(0.5, suppress_health_check=FIXTURE_OK, deadline=None)
@given(magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS),
       data=st.data())
def test_legacy_random_batches_agree_across_backends(magic, codec, data):
    specs, default = data.draw(record_specs(max_size=10, with_headers=False))
    if magic == 1:
        stamps = [max(0, t) for t in resolved_timestamps(specs, max(0, default))]
    else:
        stamps = [None] * len(specs)
    blob = encode_batch([(s.key, s.value, t) for s, t in zip(specs, stamps)], magic=magic,
                        base_offset=5, compression=codec)
    pure, ext = record_batch_pair()
    got = decode(ext, blob)
    assert got == decode(pure, blob)
    assert [(o, k, v) for o, _, _, k, v, _ in got] == [
        (5 + i, s.key, s.value) for i, s in enumerate(specs)]
    assert decode(ext, blob) == got


def test_fixed_size_records_decode_exactly(rb):
    # the shape the recycling serves: every key and value the same length
    blob = fixed_blob()
    got = decode(rb, blob)
    assert [k for _, _, _, k, _, _ in got] == [
        b"k%05d-%s" % (i, b"x" * 9) for i in range(2100)]
    assert [v for _, _, _, _, v, _ in got] == [
        (b"v%07d|" % i).ljust(100, b".") for i in range(2100)]
    assert {t for _, t, _, _, _, _ in got} == {1_700_000_000_000 + b for b in range(3)}


# -- lifetimes -----------------------------------------------------------------------------


def test_live_records_and_taken_values_keep_their_bytes(rb):
    blob = fixed_blob(n_batches=4)
    kept, taken_keys, taken_values = [], [], []
    for batch in rb.iter_batches(blob):
        for r in batch:
            if r.offset % 7 == 0:
                kept.append(r)
            elif r.offset % 7 == 1:
                taken_keys.append((r.offset, r.key))
                taken_values.append((r.offset, r.value))
    # decode everything again: any wrongly recycled object would now hold other bytes
    assert len(decode(rb, blob)) == 2800
    for r in kept:
        assert r.key == b"k%05d-%s" % (r.offset, b"x" * 9)
        assert r.value == (b"v%07d|" % r.offset).ljust(100, b".")
    for offset, key in taken_keys:
        assert key == b"k%05d-%s" % (offset, b"x" * 9)
    for offset, value in taken_values:
        assert value == (b"v%07d|" % offset).ljust(100, b".")


def test_record_outlives_its_batch_and_buffer(rb):
    buf = bytearray(fixed_blob(n_batches=1, per_batch=50))
    batch = rb.read_batch(buf)
    records = list(batch)
    del batch
    gc.collect()
    buf[:] = b"\xff" * len(buf)  # the buffer's bytes gone: the records must not see them
    del buf
    assert decode(rb, fixed_blob(n_batches=2, per_batch=50, seed=500)) != []
    assert [r.value for r in records] == [(b"v%07d|" % i).ljust(100, b".") for i in range(50)]
    assert [r.offset for r in records] == list(range(50))


def test_hash_of_rewritten_values_is_fresh(rb):
    # hash every value and drop it: a bytes object rewritten in place must not keep the
    # hash of what it held before
    blob = fixed_blob(n_batches=2)
    hashes = [hash(r.value) for batch in rb.iter_batches(blob) for r in batch]
    assert hashes == [hash((b"v%07d|" % i).ljust(100, b".")) for i in range(1400)]
    by_value = {}
    for batch in rb.iter_batches(blob):
        for r in batch:
            hash(r.key)
            by_value[r.value] = r.offset
    for batch in rb.iter_batches(blob):
        for r in batch:
            assert by_value[r.value] == r.offset


def test_mixed_lengths_replace_kept_objects(rb):
    # lengths change from record to record: a kept object of the wrong length is replaced
    recs = [(None if i % 5 == 0 else b"k" * (i % 3), b"v%d" % i * (1 + i % 4)) for i in range(600)]
    blob = encode_batch(recs, timestamp=7)
    for _ in range(3):
        assert [(r.key, r.value) for batch in rb.iter_batches(blob) for r in batch] == recs


def test_records_made_in_a_destructor_while_records_are_freed(rb):
    # a Record built from Python may hold any object; freeing it may run code that decodes
    # (and frees) more records while the first one is being freed
    blob = fixed_blob(n_batches=1, per_batch=20)
    seen = []

    class Reentrant:
        def __del__(self):
            seen.append(decode(rb, blob))

    record_cls = type(next(iter(rb.read_batch(blob))))
    r = record_cls(1, 2, 0, Reentrant(), b"v")
    del r
    gc.collect()
    assert len(seen) == 1 and len(seen[0]) == 20
    assert decode(rb, blob) == seen[0]


# -- corrupt records raise where they did --------------------------------------------------


def _corrupt_batch(bad_at):
    good = [rec(i, 0, b"key%d" % i, b"value%d" % i) for i in range(5)]
    # a key declared longer than the record: "key past record end"
    bad = framed(b"\x00" + varint(0) + varint(bad_at) + varint(50) + b"ab")
    body = b"".join(good[:bad_at]) + bad + b"".join(good[bad_at:])
    return v2_batch(body, count=6, last_offset_delta=5, first_ts=10, max_ts=10)


@pytest.mark.parametrize("bad_at", [0, 2, 5])
def test_corrupt_record_raises_at_the_same_next(rb, bad_at):
    blob = _corrupt_batch(bad_at)
    it = iter(rb.read_batch(blob))
    got = [next(it) for _ in range(bad_at)]
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"key%d" % i, b"value%d" % i) for i in range(bad_at)]
    with pytest.raises(CorruptRecordError, match="key past record end") as err:
        next(it)
    assert err.value.position == 0
    with pytest.raises(StopIteration):
        next(it)
    # the records already handed out stay as they were
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"key%d" % i, b"value%d" % i) for i in range(bad_at)]


def test_corrupt_record_error_is_the_same_on_both_backends():
    pure, ext = record_batch_pair()
    blob = _corrupt_batch(3)
    errors = []
    for mod in (pure, ext):
        seen = []
        with pytest.raises(CorruptRecordError) as err:
            for r in mod.read_batch(blob):
                seen.append(fields(r))
        errors.append((seen, str(err.value), err.value.position, err.value.offset))
    assert errors[0] == errors[1]
