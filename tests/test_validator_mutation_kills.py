"""Tests that kill the validator's surviving mutants (``make mutate MODULE=validator``,
docs/mutation.rst): each pins a behaviour of Kafka's ``LogValidator`` that no other test
checked. Kept apart from tests/test_mutation_kills.py so the per-module kills merge
without conflicts.
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import pytest
from _helpers import rec, v2_batch
from _logtools import T0, Clock, open_log

from kafkastore.config import LogConfig
from kafkastore.errors import InvalidRecordError
from kafkastore.producer_state import AppendOrigin
from kafkastore.records import (
    CompressionType,
    ControlRecordType,
    TimestampType,
    encode_batch,
    encode_control_batch,
    iter_batches,
)
from kafkastore.validator import LogValidator

# a v2 batch's records section starts after its 61-byte header (kafka-storage.md §2.2)
RECORDS_OFFSET = 61


def _stored(log):
    """Every stored batch with its bytes, CRCs checked."""
    out = []
    for seg in log.segments:
        with open(seg.log.path, "rb") as f:
            data = f.read()
        pos = 0
        for b in iter_batches(data, validate=True):
            size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
            out.append((b, data[pos:pos + size]))
            pos += size
    return out


# -- a producer's LogAppendTime batch on a CreateTime topic ------------------------------


@pytest.mark.parametrize("header_ts", [1, -2])
def test_producer_log_append_time_batch_header_timestamp_is_checked(tmp_path, header_ts):
    """In a LogAppendTime batch every record's timestamp is the header's max timestamp
    (Kafka's DefaultRecordBatch hands it to each record), and Kafka's validateTimestamp
    skips only ``NO_TIMESTAMP`` (-1): a header timestamp of 1 or -2 on a CreateTime topic
    is a timestamp far outside the window, refused. (Kills _validate_v2 mutants 74, 75:
    ``ts == -1`` turned into ``ts == 1`` / ``ts == -2``.)"""
    log = open_log(tmp_path, Clock(T0), message_timestamp_before_max_ms=5000)
    lat = encode_batch([(b"k", b"v", T0)], timestamp=T0, max_timestamp=header_ts,
                       timestamp_type=TimestampType.LOG_APPEND_TIME)
    with pytest.raises(InvalidRecordError, match=f"Timestamp {header_ts} of message .* is out "
                                                 "of range"):
        log.append_batches(lat)
    assert log.log_end_offset == 0
    log.close()


# -- the CreateTime window is a CreateTime topic's only ---------------------------------


def test_log_append_time_topic_takes_a_v2_batch_outside_the_window(tmp_path):
    """Kafka's validateTimestamp checks the window only when the topic's timestamp type is
    CreateTime: a LogAppendTime topic takes a v2 CreateTime batch whose records are far
    outside ``message.timestamp.before.max.ms`` and stamps it with the append time. (Kills
    _validate_v2 mutant 81, ``not log_append and ...`` into ``or``.)"""
    log = open_log(tmp_path, Clock(T0), message_timestamp_type="LogAppendTime",
                   message_timestamp_before_max_ms=10)
    info = log.append_batches(encode_batch([(b"k", b"v", T0 - 11), (b"j", b"w", 5)],
                                           timestamp=T0 - 11))
    assert (info.first_offset, info.last_offset) == (0, 1)
    ((b, _),) = _stored(log)
    assert (b.timestamp_type, b.max_timestamp) == (TimestampType.LOG_APPEND_TIME, T0)
    log.close()


def test_create_time_batch_without_any_timestamp_is_accepted(tmp_path):
    """A v2 batch whose records all lack a timestamp (-1) passes the window (Kafka's
    validateTimestamp skips ``NO_TIMESTAMP``) and keeps -1 as its max timestamp."""
    log = open_log(tmp_path, Clock(T0), message_timestamp_before_max_ms=10,
                   message_timestamp_after_max_ms=10)
    info = log.append_batches(encode_batch([(b"a", b"v", -1), (b"b", b"v", -1)],
                                           timestamp=-1))
    assert info.last_offset == 1
    ((b, _),) = _stored(log)
    assert (b.timestamp_type, b.max_timestamp) == (TimestampType.CREATE_TIME, -1)
    log.close()


# -- control batches are not compressed unless written so --------------------------------


def test_coordinator_marker_stays_uncompressed_on_a_compressed_topic(tmp_path):
    """Kafka's validateMessagesAndAssignOffsetsCompressed: "Do not compress control records
    unless they are written compressed": an uncompressed COMMIT marker from the
    coordinator on a gzip topic is written in place, uncompressed, where the data batch
    before it is recompressed. (Kills _validate_v2 mutants 102, 103.)"""
    log = open_log(tmp_path, Clock(T0), compression_type="gzip")
    log.append_batches(encode_batch([(b"k", b"v", T0)], timestamp=T0, producer_id=7,
                                    producer_epoch=0, base_sequence=0, is_transactional=True))
    marker = encode_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                  timestamp=T0)
    log.append_batches(marker, origin=AppendOrigin.COORDINATOR)
    (data, _), (ctrl, ctrl_bytes) = _stored(log)
    assert (data.compression, data.is_control) == (CompressionType.GZIP, False)
    assert (ctrl.compression, ctrl.is_control, ctrl.base_offset) == \
        (CompressionType.NONE, True, 1)
    assert ctrl_bytes[RECORDS_OFFSET:] == marker[RECORDS_OFFSET:]   # in place
    log.close()


# -- in place or rebuilt -----------------------------------------------------------------


def _repeated_delta_batch(codec: int) -> bytes:
    """Two records that both claim offset delta 0 (an old client's inner offsets), count 2
    and last offset delta 1: well formed, but not consecutive inside."""
    records = rec(0, 0, b"a", b"1") + rec(0, 0, b"b", b"2")
    if codec == CompressionType.GZIP:
        c = zlib.compressobj(-1, zlib.DEFLATED, 31)
        records = c.compress(records) + c.flush()
    return v2_batch(records, count=2, last_offset_delta=1, attributes=codec,
                    first_ts=T0, max_ts=T0)


@pytest.mark.parametrize("topic", ["producer", "uncompressed"])
def test_uncompressed_batch_with_repeated_offset_deltas_is_kept_in_place(tmp_path, topic):
    """Kafka's assignOffsetsNonCompressed (uncompressed in, uncompressed out) patches the
    header only: the records keep the offset deltas the producer wrote (both read at the
    base offset here), the records section is the producer's bytes. Only the compressed
    path rewrites non-consecutive inner offsets. (Kills _validate_v2 mutants 94, 95, 112,
    113, 114.)"""
    log = open_log(tmp_path, Clock(T0), compression_type=topic)
    log.append_batches(encode_batch([(b"x", b"x", T0)], timestamp=T0))
    batch = _repeated_delta_batch(CompressionType.NONE)
    info = log.append_batches(batch)
    assert (info.first_offset, info.last_offset) == (1, 2)
    _, (b, stored) = _stored(log)
    assert stored[RECORDS_OFFSET:] == batch[RECORDS_OFFSET:]
    assert [r.offset for r in b] == [1, 1]
    assert (b.base_offset, b.last_offset, b.compression) == (1, 2, CompressionType.NONE)
    log.close()


def test_compressed_batch_with_repeated_offset_deltas_is_rebuilt(tmp_path):
    """The compressed counterpart: Kafka's validateMessagesAndAssignOffsetsCompressed
    turns in-place assignment off when an inner offset is not the expected one and
    rebuilds the batch with consecutive offsets."""
    log = open_log(tmp_path, Clock(T0), compression_type="producer")
    info = log.append_batches(_repeated_delta_batch(CompressionType.GZIP))
    assert (info.first_offset, info.last_offset) == (0, 1)
    ((b, _),) = _stored(log)
    assert b.compression == CompressionType.GZIP
    assert [(r.offset, r.key) for r in b] == [(0, b"a"), (1, b"b")]
    log.close()


def test_in_place_on_a_log_append_time_topic_stamps_the_header(tmp_path):
    """Kafka's assignOffsetsNonCompressed on a LogAppendTime topic calls
    ``setMaxTimestamp(LOG_APPEND_TIME, now)``: the header's timestamp type becomes
    LogAppendTime and its max timestamp the append time, every other attribute bit
    (transactional here) kept, the CRC recomputed, the records untouched; every record
    then reads with the append time, and the append reports it. (Kills _validate_v2
    mutants 131, 133, 137.)"""
    now = T0 + 77
    log = open_log(tmp_path, Clock(now), message_timestamp_type="LogAppendTime")
    batch = encode_batch([(b"k", b"v", T0), (b"j", b"w", T0 + 1)], timestamp=T0,
                         producer_id=3, producer_epoch=0, base_sequence=0,
                         is_transactional=True)
    info = log.append_batches(batch)
    assert info.max_timestamp == now
    ((b, stored),) = _stored(log)   # _stored checks the CRC
    assert (b.timestamp_type, b.max_timestamp, b.is_transactional, b.compression) == \
        (TimestampType.LOG_APPEND_TIME, now, True, CompressionType.NONE)
    assert [r.timestamp for r in b] == [now, now]
    assert stored[RECORDS_OFFSET:] == batch[RECORDS_OFFSET:]
    attributes = struct.unpack_from(">h", stored, 21)[0]
    assert attributes == struct.unpack_from(">h", batch, 21)[0] | 0x08
    log.close()


def _validate(config: LogConfig, batch: bytes):
    buf = bytearray(batch)
    return LogValidator(config, "/p").validate(buf, [0], [len(buf)], 2, 0, T0, None)


def test_validation_result_says_whether_the_size_may_have_changed():
    """Kafka's ValidationResult.messageSizeMaybeChanged: false when the batch was patched
    in place (assignOffsetsNonCompressed, the compressed in-place path), true when it was
    rebuilt (buildRecordsAndAssignOffsets), which is when the leader checks the size
    again. (Kills _validate_v2 mutant 171.)"""
    plain = encode_batch([(b"k", b"v", T0)], timestamp=T0)
    gz = encode_batch([(b"k", b"v", T0)], timestamp=T0, compression="gzip")
    producer, gzip_topic = LogConfig(), LogConfig(compression_type="gzip")
    assert _validate(producer, plain).size_maybe_changed is False
    assert _validate(gzip_topic, gz).size_maybe_changed is False
    assert _validate(gzip_topic, plain).size_maybe_changed is True


# -- compression.gzip.level ----------------------------------------------------------------


def test_rebuilt_batch_takes_gzip_level_1(tmp_path):
    """``compression.gzip.level=1`` (Kafka 3.8, KIP-390) compresses at level 1, not at the
    default: the stored payload is the records section deflated at level 1 (zlib is what
    Java's Deflater is). (Kills codec_level mutant 6, level 1 read as the default.)"""
    words = [b"%x" % ((i * 2654435761) % 4093) for i in range(400)]
    rows = [(b"k%d" % i, b" ".join(words[i:i + 60]), T0) for i in range(40)]
    log = open_log(tmp_path, Clock(T0), compression_type="gzip", compression_gzip_level=1)
    log.append_batches(encode_batch(rows, timestamp=T0))
    ((b, stored),) = _stored(log)
    assert b.compression == CompressionType.GZIP
    payload = stored[RECORDS_OFFSET:]
    section = zlib.decompress(payload, 31)

    def gzip(level):
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        return c.compress(section) + c.flush()

    assert gzip(1) != gzip(-1)   # the data tells level 1 from the default
    assert payload == gzip(1)
    assert crc32c.crc32c(stored[21:]) == struct.unpack_from(">I", stored, 17)[0]
    log.close()


# -- compacted topics: record objects too ----------------------------------------------------


def test_compacted_topic_checks_the_key_of_record_objects(tmp_path):
    """Log.append takes record objects (as read from a log) as well as tuples, and Kafka's
    validateKey applies to both: a keyed record object is appended, a keyless one refused.
    (Kills check_keys mutant 4, every record read as a tuple.)"""
    source = list(next(iter_batches(encode_batch([(b"k", b"v", T0), (None, b"w", T0)],
                                                  timestamp=T0))))
    log = open_log(tmp_path, Clock(T0), cleanup_policy="compact")
    assert log.append(source[:1], timestamp=T0).last_offset == 0
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message "
                                                 "without key"):
        log.append(source, timestamp=T0)
    assert log.log_end_offset == 1
    log.close()
