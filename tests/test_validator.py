"""Kafka's leader append path (``LogValidator``) and follower path, as ``Log`` runs them.

Each test names the defect of issue 18 it covers; each failed before ``validator.py``.
Scenarios follow Kafka's ``LogValidatorTest`` and ``UnifiedLogTest`` where they apply.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from _logtools import T0, Clock, open_log, read_all

from kafkastore.errors import InvalidCrcError, InvalidRecordError, RecordTooLargeError
from kafkastore.log import MAX_TIMESTAMP
from kafkastore.records import CompressionType, TimestampType, encode_batch, iter_batches
from kafkastore.segment import TimestampAndOffset


@pytest.fixture
def clock():
    return Clock()


def stored_batches(log):
    """Every stored entry, as decoded batches (magic, codec, header fields)."""
    out = []
    for seg in log.segments:
        data = seg.log.read(0, seg.size)
        out += list(iter_batches(data, validate=True))
    return out


def with_header_max_timestamp(batch: bytes, max_ts: int) -> bytes:
    """A v2 batch whose header claims ``max_ts`` (CRC recomputed: a well-formed lie)."""
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 35, max_ts)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


# -- 2. compacted topics refuse keyless records -------------------------------------------


@pytest.mark.parametrize("how", ["append", "v2", "v2-gzip", "legacy", "legacy-wrapper"])
def test_compacted_topic_refuses_records_without_key(tmp_path, clock, how):
    """testCompactedTopicWithoutKey / "Compacted topic cannot accept message without key":
    nothing is written (the cleaner would have dropped them silently)."""
    log = open_log(tmp_path, clock, cleanup_policy="compact")
    recs = [(b"k", b"v", T0), (None, b"v", T0)]
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message "
                                                 "without key"):
        if how == "append":
            log.append(recs)
        elif how.startswith("v2"):
            codec = "gzip" if how.endswith("gzip") else "none"
            log.append_batches(encode_batch(recs, compression=codec))
        else:
            codec = "gzip" if how.endswith("wrapper") else "none"
            log.append_batches(encode_batch(recs, magic=1, compression=codec))
    assert log.log_end_offset == 0 and log.size == 0
    log.append([(b"k", b"v", T0)])   # keyed records are fine
    assert log.log_end_offset == 1
    log.close()


# -- 3. the leader recomputes the max timestamp -----------------------------------------------


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_leader_recomputes_the_max_timestamp_from_the_records(tmp_path, clock, codec):
    """A producer header claiming a max timestamp far in the future: the stored batch,
    the time index, the append info and the lookups follow the records, not the header."""
    log = open_log(tmp_path, clock, index_interval_bytes=1, compression_type="producer")
    lie = T0 + 10 ** 9
    for i in range(3):
        batch = encode_batch([(b"k", b"a", T0 + 10 * i), (b"k", b"b", T0 + 10 * i + 5)],
                             compression=codec)
        info = log.append_batches(with_header_max_timestamp(batch, lie))
        assert info.max_timestamp == T0 + 10 * i + 5
    stored = stored_batches(log)
    assert [b.max_timestamp for b in stored] == [T0 + 5, T0 + 15, T0 + 25]
    assert [b.compression for b in stored] == [CompressionType.parse(codec)] * 3
    assert log.active_segment.max_timestamp_so_far() == T0 + 25
    assert tuple(log.offset_for_timestamp(T0 + 11)) == (T0 + 15, 3, None)
    assert log.offset_for_timestamp(T0 + 26) is None
    assert tuple(log.offset_for_timestamp(MAX_TIMESTAMP)) == (T0 + 25, 5, None)
    log.close()


def test_follower_keeps_the_header_max_timestamp(tmp_path, clock):
    """A follower copies the leader's bytes: nothing recomputed (appendAsFollower)."""
    log = open_log(tmp_path, clock)
    batch = with_header_max_timestamp(encode_batch([(b"k", b"a", T0)]), T0 + 7)
    info = log.append_batches(batch, assign_offsets=False)
    assert info.max_timestamp == T0 + 7
    assert stored_batches(log)[0].max_timestamp == T0 + 7
    log.close()


# -- 4. the follower runs no leader validation -------------------------------------------------


def test_follower_append_skips_the_timestamp_window(tmp_path, clock):
    """message.timestamp.before/after.max.ms apply to producers; a follower's copy of
    old data is accepted as it is (the leader checked it when it was produced)."""
    log = open_log(tmp_path, clock, message_timestamp_before_max_ms=1000,
                   message_timestamp_after_max_ms=1000)
    old = encode_batch([(b"k", b"v", T0 - 10 ** 6)])
    with pytest.raises(InvalidRecordError, match="out of range"):
        log.append_batches(old)
    info = log.append_batches(old, assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (0, 0)
    assert [r.timestamp for r in read_all(log)] == [T0 - 10 ** 6]
    log.close()


# -- 5. recompression to the topic's compression.type -----------------------------------------


@pytest.mark.parametrize("topic, source, stored", [
    ("producer", "none", "none"), ("producer", "lz4", "lz4"), ("gzip", "none", "gzip"),
    ("zstd", "gzip", "zstd"), ("uncompressed", "snappy", "none"), ("lz4", "lz4", "lz4"),
])
def test_leader_stores_the_topic_compression_type(tmp_path, clock, topic, source, stored):
    """testRecompression / testCompressedV2 family: the stored codec is the topic's target
    (the producer's for ``producer``); records, producer fields and offsets are kept."""
    log = open_log(tmp_path, clock, compression_type=topic)
    log.append([(b"a", b"0", T0)], compression="none")
    recs = [(b"k%d" % i, b"v%d" % i, T0 + i, [("h", b"x")]) for i in range(5)]
    batch = encode_batch(recs, compression=source, producer_id=42, producer_epoch=3,
                         base_sequence=10)
    info = log.append_batches(batch)
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (1, 5, T0 + 4)
    b = stored_batches(log)[-1]
    assert b.compression == CompressionType.parse(stored)
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence) == (1, 42, 3, 10)
    got = [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in b]
    assert got == [(1 + i, k, v, t, list(h)) for i, (k, v, t, h) in enumerate(recs)]
    log.close()


# -- 6. legacy input is up-converted to magic 2 ------------------------------------------------


@pytest.mark.parametrize("magic, codec", [(0, "none"), (1, "none"), (0, "gzip"), (1, "snappy"),
                                          (1, "lz4")])
def test_leader_up_converts_legacy_input_to_one_v2_batch(tmp_path, clock, magic, codec):
    """Kafka 3.0+ writes magic 2 only: a run of uncompressed legacy messages or a wrapper
    becomes one v2 batch (the producer's codec kept under ``producer``); v0 records have
    no timestamp (-1), v1 keep theirs."""
    log = open_log(tmp_path, clock)
    recs = [(b"k%d" % i, b"v%d" % i, T0 + i) for i in range(4)]
    info = log.append_batches(encode_batch(recs, magic=magic, compression=codec))
    assert (info.first_offset, info.last_offset, info.num_batches) == \
        (0, 3, 1 if codec != "none" else 4)
    stored = stored_batches(log)
    assert len(stored) == 1 and stored[0].magic == 2
    assert stored[0].compression == CompressionType.parse(codec)
    want_ts = [T0 + i if magic == 1 else -1 for i in range(4)]
    assert [(r.offset, r.key, r.timestamp) for r in stored[0]] == \
        [(i, b"k%d" % i, want_ts[i]) for i in range(4)]
    log.close()


def test_log_append_time_topic_stamps_up_converted_legacy_input(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_batches(encode_batch([(b"k", b"v", T0 - 5)] * 3, magic=1))
    assert info.log_append_time == T0
    b = stored_batches(log)[0]
    assert (b.magic, b.timestamp_type, b.max_timestamp) == (2, TimestampType.LOG_APPEND_TIME, T0)
    assert [r.timestamp for r in b] == [T0] * 3
    log.close()


# -- 7. the leader's batch checks, and one produce per batch ----------------------------------


def test_leader_refuses_a_v2_batch_whose_base_offset_is_not_zero(tmp_path, clock):
    """analyzeAndValidateRecords: "The baseOffset of the record batch in the append to ...
    should be 0"; the follower path takes the offsets as given."""
    log = open_log(tmp_path, clock)
    batch = encode_batch([(b"k", b"v", T0)], base_offset=5)
    with pytest.raises(InvalidRecordError, match="should be 0, but it is 5"):
        log.append_batches(batch)
    assert log.log_end_offset == 0
    assert log.append_batches(batch, assign_offsets=False).first_offset == 5
    log.close()


def test_leader_refuses_a_producer_id_with_a_negative_sequence(tmp_path, clock):
    """testInvalidSequence: a producer id needs a base sequence >= 0."""
    log = open_log(tmp_path, clock)
    batch = encode_batch([(b"k", b"v", T0)], producer_id=7, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="Invalid sequence number -1 in record batch "
                                                 "with producerId 7"):
        log.append_batches(batch)
    log.append_batches(encode_batch([(b"k", b"v", T0)], producer_id=7, producer_epoch=0,
                                    base_sequence=0))
    assert log.log_end_offset == 1
    log.close()


@pytest.mark.parametrize("magics", [(2, 1), (1, 2), (0, 1)])
def test_leader_refuses_mixed_magic_in_one_append(tmp_path, clock, magics):
    """validateBatch: every batch has the first batch's magic."""
    log = open_log(tmp_path, clock)
    data = b"".join(encode_batch([(b"k", b"v", T0)], magic=m) for m in magics)
    with pytest.raises(InvalidRecordError, match="is not the same as the first batch's magic"):
        log.append_batches(data)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_leader_refuses_producer_log_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    batch = encode_batch([(b"k", b"v", T0)], timestamp_type=TimestampType.LOG_APPEND_TIME,
                         timestamp=T0)
    with pytest.raises(InvalidRecordError, match="Producer should not set timestamp type"):
        log.append_batches(batch)
    log.close()


def test_multi_batch_leader_append_is_one_produce_per_batch_validated_first(tmp_path, clock):
    """A multi-batch append_batches on the leader path: each v2 batch is one produce
    (its own offsets, codec decision and index step), and one refused batch refuses the
    call before anything is written."""
    log = open_log(tmp_path, clock, compression_type="gzip", index_interval_bytes=1)
    good = [encode_batch([(b"k%d" % i, b"v", T0 + i)] * 2) for i in range(3)]
    bad = encode_batch([(b"k", b"v", T0)], base_offset=9)
    with pytest.raises(InvalidRecordError):
        log.append_batches(b"".join(good) + bad)
    assert log.log_end_offset == 0 and log.size == 0
    info = log.append_batches(b"".join(good))
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 5, 3)
    stored = stored_batches(log)
    assert [(b.base_offset, b.compression) for b in stored] == \
        [(0, CompressionType.GZIP), (2, CompressionType.GZIP), (4, CompressionType.GZIP)]
    # Kafka's index rule per produce: the first append is never indexed, later ones are
    idx = log.active_segment.offset_index
    assert [tuple(idx.entry(i)) for i in range(idx.entries)] == \
        [(3, stored[1].position), (5, stored[2].position)]
    log.close()


def test_rebuilt_batch_over_max_message_bytes_is_refused(tmp_path, clock):
    """messageSizeMaybeChanged: a batch that grows when recompressed (random bytes, gzip)
    is checked again against max.message.bytes."""
    import os
    value = os.urandom(400)
    batch = encode_batch([(b"k", value, T0)])
    log = open_log(tmp_path, clock, compression_type="gzip", max_message_bytes=len(batch) + 1)
    with pytest.raises(RecordTooLargeError, match="exceeds the maximum configured size"):
        log.append_batches(batch)
    assert log.log_end_offset == 0
    log.close()


# -- 8. a follower's multi-batch append is indexed once ----------------------------------------


def test_follower_multi_batch_append_adds_at_most_one_index_entry(tmp_path, clock):
    """LogSegment.append (kafka-storage.md 4.2): one entry per append at most, the set's
    last offset at the set's start position."""
    log = open_log(tmp_path, clock, index_interval_bytes=1)
    first = b"".join(encode_batch([(b"k", b"v", T0)], base_offset=i) for i in range(3))
    second = b"".join(encode_batch([(b"k", b"v", T0)], base_offset=i) for i in range(3, 6))
    log.append_batches(first, assign_offsets=False)
    log.append_batches(second, assign_offsets=False)
    idx = log.active_segment.offset_index
    assert [tuple(idx.entry(i)) for i in range(idx.entries)] == [(5, len(first))]
    tidx = log.active_segment.time_index
    assert [tuple(tidx.entry(i)) for i in range(tidx.entries)] == [(T0, 0)]
    log.close()


# -- 10. MAX_TIMESTAMP on data without timestamps ----------------------------------------------


def test_max_timestamp_lookup_without_timestamps_gives_the_first_offset(tmp_path, clock):
    """fetchOffsetByTimestamp(-3) on v2 data whose records have no timestamp (-1): Kafka
    answers timestamp -1 at the first offset (offsetOfMaxTimestamp finds -1 there)."""
    log = open_log(tmp_path, clock, segment_bytes=200)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None   # no data
    for _ in range(6):
        log.append([(b"k", b"v", -1)], timestamp=-1)
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(-1, 0, None)
    log.delete_records(2)   # Kafka answers from the segments as they are
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(-1, 0, None)
    log.close()


def test_max_timestamp_lookup_on_v0_data_has_no_answer(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_batches(encode_batch([(b"k", b"v")] * 2, magic=0), assign_offsets=False)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None
    log.close()


@pytest.mark.parametrize("magic", [0, 1])
def test_leader_checks_the_inner_crcs_of_a_legacy_wrapper(tmp_path, clock, magic):
    """LogValidator.validateRecord: for a v0/v1 compressed wrapper, whose own CRC covers
    only the compressed bytes, every inner message's CRC is checked (the gap the first
    cut of this validator left). A follower appends the bytes as they are."""
    import gzip
    import zlib

    wrapper = bytearray(encode_batch([(b"k%d" % i, b"v%d" % i, T0 + i) for i in range(3)],
                                     magic=magic, compression="gzip"))
    value_at = 12 + 4 + 2 + (8 if magic == 1 else 0) + 4   # offset, size, crc.. key (null)
    value_len = struct.unpack_from(">i", wrapper, value_at)[0]
    inner = bytearray(gzip.decompress(bytes(wrapper[value_at + 4:value_at + 4 + value_len])))
    inner[-1] ^= 0xFF            # the last inner message's value: its CRC no longer matches
    packed = gzip.compress(bytes(inner))
    bad = wrapper[:value_at] + struct.pack(">i", len(packed)) + packed
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    struct.pack_into(">I", bad, 12, zlib.crc32(bytes(bad[16:])))   # the wrapper's CRC: fine
    assert list(iter_batches(bytes(bad)))   # the wrapper itself is valid
    log = open_log(tmp_path, clock)
    with pytest.raises(InvalidCrcError, match="inner message") as err:
        log.append_batches(bytes(bad))
    assert err.value.position == 0 and log.log_end_offset == 0
    follower = open_log(tmp_path / "f", clock)
    follower.append_batches(bytes(bad), assign_offsets=False)
    assert follower.log_end_offset == 3
    log.close()
    follower.close()
