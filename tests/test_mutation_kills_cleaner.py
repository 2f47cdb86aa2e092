"""Tests that kill the surviving mutants of the cleaner's deciding functions
(``make mutate MODULE=cleaner``: ``Cleaner._filter_batch``, ``_rebuild``, ``clean`` and the
transaction tracker), each pinning what Kafka's ``Cleaner`` (``cleanInto``'s
``RecordFilter``, ``MemoryRecords.filterTo`` / ``buildRetainedRecordsInto``) and
``CleanedTransactionMetadata`` do. Expected values come from Kafka's rules and the
batches the test wrote, never from an earlier run."""

from __future__ import annotations

import struct

import crc32c
import pytest
from _logtools import T0, Clock, open_log

from kafkastore.cleaner import Cleaner, CleanerConfig, LogToClean, clean
from kafkastore.errors import CorruptRecordError, KafkaStoreError
from kafkastore.records import (
    ControlRecordType,
    TimestampType,
    encode_batch,
    encode_control_batch,
    iter_batches,
)

DAY = 86_400_000
SMALL = {"log.cleaner.dedupe.buffer.size": 1 << 20}


@pytest.fixture
def clock():
    return Clock()


def _log(tmp_path, clock, **config):
    config.setdefault("cleanup_policy", "compact")
    config.setdefault("segment_bytes", 1024)
    return open_log(tmp_path, clock, **config)


def _append(log, records, **kw):
    """A follower append of one batch at the log end (the bytes stored as given)."""
    base = log.log_end_offset
    log.append_batches(encode_batch(records, base_offset=base, **kw), assign_offsets=False)
    return base


def _marker(log, producer_id, *, commit, clock, epoch=0):
    base = log.log_end_offset
    log.append_batches(encode_control_batch(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
        producer_id=producer_id, producer_epoch=epoch, base_offset=base,
        timestamp=clock()), assign_offsets=False)
    return base


def _clean(log):
    clean(log, config=CleanerConfig(SMALL))


def _batches(log):
    out = []
    for seg in log.segments:
        with open(seg.log.path, "rb") as f:
            out.extend(iter_batches(f.read()))
    return out


def _batch_at(log, base_offset):
    found = [b for b in _batches(log) if b.base_offset == base_offset]
    assert len(found) == 1, f"no single batch at {base_offset}: {found}"
    return found[0]


def _timestamps(batch):
    return [(bytes(r.key), r.timestamp) for r in batch]


# -- _rebuild: Kafka's MemoryRecords.buildRetainedRecordsInto ---------------------------------


def test_a_rebuilt_create_time_batch_keeps_each_records_timestamp(tmp_path, clock):
    """buildRetainedRecordsInto appends every kept record with its own timestamp; the
    builder's max timestamp is the largest kept one and its base the first kept one
    (no delete horizon), not the original batch's."""
    log = _log(tmp_path, clock)
    t1, t2, t3 = T0 - 300, T0 - 200, T0 - 100
    _append(log, [(b"a", b"1", t1), (b"b", b"1", t2), (b"c", b"1", t3)], timestamp=t1)
    _append(log, [(b"c", b"2", T0)], timestamp=T0)     # supersedes c: a and b stay
    log.roll()
    _clean(log)
    rebuilt = _batch_at(log, 0)
    assert _timestamps(rebuilt) == [(b"a", t1), (b"b", t2)]
    assert (rebuilt.first_timestamp, rebuilt.max_timestamp) == (t1, t2)
    assert rebuilt.timestamp_type == TimestampType.CREATE_TIME
    log.close()


def test_a_rebuilt_log_append_time_batch_stamps_the_append_time(tmp_path, clock):
    """A LogAppendTime batch is rebuilt with the original batch's max timestamp as the
    builder's logAppendTime (buildRetainedRecordsInto): every kept record, the base and
    the max timestamp are that time, whatever the producer's CreateTimes were."""
    log = _log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    appended = T0 - 50
    _append(log, [(b"a", b"1", T0 - 900), (b"b", b"1", T0 - 800), (b"c", b"1", T0 - 700)],
            timestamp=T0 - 900, timestamp_type=TimestampType.LOG_APPEND_TIME,
            max_timestamp=appended)
    _append(log, [(b"c", b"2", T0)], timestamp=T0)
    log.roll()
    _clean(log)
    rebuilt = _batch_at(log, 0)
    assert rebuilt.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [bytes(r.key) for r in rebuilt] == [b"a", b"b"]
    assert (rebuilt.first_timestamp, rebuilt.max_timestamp) == (appended, appended)
    log.close()


def test_a_batch_stamped_with_the_delete_horizon_keeps_its_records_timestamps(tmp_path, clock):
    """With a delete horizon the builder's base timestamp is the horizon
    (MemoryRecordsBuilder with deleteHorizonMs): each record's delta is taken from it, so
    the records read back with their own timestamps."""
    log = _log(tmp_path, clock, delete_retention_ms=1000)
    t1, t2 = T0 - 300, T0 - 200
    _append(log, [(b"a", b"1", t1), (b"b", None, t2)], timestamp=t1)
    _append(log, [(b"z", b"1", T0)], timestamp=T0)
    log.roll()
    _clean(log)
    stamped = _batch_at(log, 0)
    assert stamped.delete_horizon_ms == clock() + 1000
    assert _timestamps(stamped) == [(b"a", t1), (b"b", t2)]
    assert stamped.max_timestamp == t2
    log.close()


def test_a_rebuilt_batch_keeps_its_producer_fields(tmp_path, clock):
    """The builder of a retained batch takes the original's producer id, epoch, base
    sequence and partition leader epoch (buildRetainedRecordsInto), so the producer's
    sequence state survives the clean."""
    log = _log(tmp_path, clock)
    _append(log, [(b"a", b"1"), (b"b", b"1")], timestamp=T0, producer_id=7,
            producer_epoch=3, base_sequence=0, partition_leader_epoch=5)
    _append(log, [(b"a", b"2")], timestamp=T0, partition_leader_epoch=5)
    log.roll()
    _clean(log)
    rebuilt = _batch_at(log, 0)
    assert [bytes(r.key) for r in rebuilt] == [b"b"]
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence,
            rebuilt.last_offset, rebuilt.partition_leader_epoch) == (7, 3, 0, 1, 5)
    log.close()


# -- the transaction tracker: Kafka's CleanedTransactionMetadata -------------------------------


def test_a_commit_marker_of_a_transaction_gone_is_stamped_after_one_that_stays(tmp_path, clock):
    """onControlBatchRead(COMMIT) removes the producer from the ongoing committed
    transactions: a later COMMIT of the same producer whose transaction left no batch is
    eligible for deletion (it gets the delete horizon) while the first stays as it is."""
    log = _log(tmp_path, clock, delete_retention_ms=100)
    _append(log, [(b"x", b"1")], timestamp=T0, producer_id=1, producer_epoch=0,
            base_sequence=0, is_transactional=True)
    first = _marker(log, 1, commit=True, clock=clock)
    _append(log, [(b"y", b"1")], timestamp=T0, producer_id=1, producer_epoch=0,
            base_sequence=1, is_transactional=True)
    second = _marker(log, 1, commit=True, clock=clock)
    _append(log, [(b"y", b"2")], timestamp=T0)   # supersedes the second transaction's y
    log.roll()
    clock.sleep(DAY)
    assert log.remove_expired_producers() == 1
    _clean(log)   # round 1: y's transactional batch goes
    assert [bytes(r.key) for b in _batches(log) if not b.is_control for r in b] == [b"x", b"y"]
    _clean(log)   # round 2: the second marker's transaction is gone, the first's is not
    assert not _batch_at(log, first).has_delete_horizon
    assert _batch_at(log, second).delete_horizon_ms == clock() + 100
    log.close()


def test_a_control_batch_that_is_no_transaction_marker_is_never_removed(tmp_path, clock):
    """onControlBatchRead answers false for a control record that is neither ABORT nor
    COMMIT (a KRaft LEADER_CHANGE): the batch is never stamped nor deleted."""
    log = _log(tmp_path, clock, delete_retention_ms=100)
    _append(log, [(b"k", b"1")], timestamp=T0)
    key = struct.pack(">hh", 0, int(ControlRecordType.LEADER_CHANGE))
    leader_change = _append(log, [(key, b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00")],
                            timestamp=T0, is_control=True)
    _append(log, [(b"k", b"2")], timestamp=T0)
    log.roll()
    original = _batch_at(log, leader_change).to_bytes()
    for _ in range(3):
        _clean(log)
        clock.sleep(DAY)
    assert _batch_at(log, leader_change).to_bytes() == original
    log.close()


# -- magic 0/1 entries: Kafka's shouldRetainRecord for legacy records --------------------------


def _legacy_log(tmp_path, clock, entries):
    log = _log(tmp_path, clock)
    for key, value in entries:
        _append(log, [(key, value, T0)], magic=1, timestamp=T0)
    log.roll()
    return log


def test_legacy_entries_keep_the_latest_value_and_a_tombstone_inside_the_horizon(tmp_path, clock):
    """A legacy record stays if it is its key's latest and has a value or deletes are
    retained; with no clean part yet the legacy delete horizon is 0 - delete.retention.ms
    (doClean's cleanableHorizonMs of no segment), so the segment's tombstone stays."""
    log = _legacy_log(tmp_path, clock, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None),
                                        (b"c", b"1")])
    _clean(log)
    kept = [(r.offset, bytes(r.key), r.value and bytes(r.value))
            for b in _batches(log) for r in b]
    assert kept == [(2, b"a", b"2"), (3, b"b", None), (4, b"c", b"1")]
    assert all(b.magic == 1 for b in _batches(log))
    log.close()


def test_a_legacy_last_entry_of_the_round_left_empty_stops_the_round(tmp_path, clock):
    """The last entry of a round is RETAIN_EMPTY, and filterTo cannot write an empty legacy
    entry: Kafka throws IllegalStateException ("Empty batches are only supported for magic
    v2 and above") and the log goes uncleanable, with nothing swapped."""
    log = _legacy_log(tmp_path, clock, [(b"a", b"1"), (b"a", b"2"), (None, b"keyless")])
    before = [b.to_bytes() for b in _batches(log)]
    with pytest.raises(KafkaStoreError, match="magic v2"):
        _clean(log)
    assert [b.to_bytes() for b in _batches(log)] == before
    log.close()


# -- checkBatchRetention: which batches stay, possibly empty -----------------------------------


def test_producer_id_zero_keeps_its_last_batch(tmp_path, clock):
    """batch.hasProducerId() is producerId > -1 (RecordBatch.NO_PRODUCER_ID): producer 0
    is a producer like any other, and the log's state holds it, so its last batch stays,
    emptied of its superseded record (RETAIN_EMPTY). The empty header is Kafka's
    writeEmptyHeader: the batch's producer fields, partition leader epoch, timestamp type
    and flags, no compression, base timestamp -1 and the batch's max timestamp."""
    log = _log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    _append(log, [(b"k", b"1", T0 - 10)], timestamp=T0 - 10, producer_id=0, producer_epoch=4,
            base_sequence=0, partition_leader_epoch=5, compression="gzip",
            timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T0)
    _append(log, [(b"k", b"2")], timestamp=T0, partition_leader_epoch=5)
    _append(log, [(b"z", b"1")], timestamp=T0, partition_leader_epoch=5)
    log.roll()
    _clean(log)
    kept = _batch_at(log, 0)
    assert (kept.producer_id, kept.producer_epoch, kept.base_sequence, kept.record_count,
            kept.partition_leader_epoch) == (0, 4, 0, 0, 5)
    assert (kept.timestamp_type, kept.is_transactional, kept.is_control, kept.compression,
            kept.first_timestamp, kept.max_timestamp) == (
        TimestampType.LOG_APPEND_TIME, False, False, 0, -1, T0)
    log.close()


def test_a_producer_whose_last_entries_are_markers_keeps_only_its_last_marker(tmp_path, clock):
    """A producer the state holds with no last data offset keeps the control batch of its
    current epoch (cleanInto: "the last entry in the log is a transaction marker ... it has
    the last producer epoch"); its marker of the older epoch is removed after the delete
    horizon like any other, the current one only emptied."""
    log = _log(tmp_path, clock, delete_retention_ms=100)
    old = _marker(log, 9, commit=False, clock=clock, epoch=0)
    current = _marker(log, 9, commit=False, clock=clock, epoch=1)
    _append(log, [(b"z", b"1")], timestamp=T0)
    log.roll()
    for _ in range(3):
        _clean(log)
        clock.sleep(DAY)
    controls = [b for b in _batches(log) if b.is_control]
    assert [b.base_offset for b in controls] == [current] != [old]
    assert (controls[0].producer_id, controls[0].producer_epoch) == (9, 1)
    log.close()


def test_the_last_batch_of_the_round_stays_empty(tmp_path, clock):
    """checkBatchRetention keeps the batch whose next offset is the round's upper bound,
    emptied if nothing in it stays (RETAIN_EMPTY), "so that last offset information is
    not lost after cleaning"."""
    log = _log(tmp_path, clock)
    _append(log, [(b"a", b"1")], timestamp=T0)
    _append(log, [(b"a", b"2")], timestamp=T0)
    last = _append(log, [(None, b"keyless")], timestamp=T0)
    log.roll()
    _clean(log)
    kept = _batch_at(log, last)
    assert (kept.record_count, kept.last_offset) == (0, last)
    assert [b.base_offset for b in _batches(log)] == [1, last]
    log.close()


def test_a_batch_kept_whole_is_copied_byte_for_byte(tmp_path, clock):
    """filterTo writes the original batch when every record stays and no delete horizon
    is to be set (writeOriginalBatch): a one-record batch keeps its own header, here a
    max timestamp above its record's."""
    log = _log(tmp_path, clock)
    _append(log, [(b"a", b"1", T0)], timestamp=T0, max_timestamp=T0 + 5)
    _append(log, [(b"z", b"1", T0)], timestamp=T0)
    log.roll()
    original = _batch_at(log, 0).to_bytes()
    _clean(log)
    assert _batch_at(log, 0).to_bytes() == original
    log.close()


def test_a_compressed_batch_that_does_not_decompress_stops_the_round(tmp_path, clock):
    """A batch whose compressed records are corrupt (its CRC matching) cannot be
    filtered: Kafka's filterTo throws from the decompression and the round stops (the log
    goes uncleanable); here a typed CorruptRecordError naming the offset and the log."""
    log = _log(tmp_path, clock)
    _append(log, [(b"a", b"1")], timestamp=T0)
    batch = bytearray(encode_batch([(b"k%d" % i, b"v" * 20) for i in range(5)], base_offset=1,
                                   timestamp=T0, compression="gzip"))
    batch[-8:] = b"\xff" * 8    # the gzip trailer: CRC and length of the data no longer match
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    log.append_batches(bytes(batch), assign_offsets=False)
    log.roll()
    dirty = _append(log, [(b"a", b"2")], timestamp=T0)
    log.roll()
    # the batch lies in a segment of the clean part: only the cleaning pass reads it
    with pytest.raises(CorruptRecordError) as err:
        clean(log, first_dirty_offset=dirty, config=CleanerConfig(SMALL))
    assert err.value.offset == 1 and log.dir in str(err.value)
    log.close()


def test_a_deleted_batch_is_not_counted_as_read(tmp_path, clock):
    """filterTo skips a DELETE batch before it counts its records (``if (batchRetention ==
    BatchRetention.DELETE) continue;`` comes first), so the round's messages read are
    those of the batches it keeps, emptied or not: here the plain record, the marker and
    the last record (3), not the aborted transaction's two records."""
    log = _log(tmp_path, clock)
    _append(log, [(b"a", b"1")], timestamp=T0)
    _append(log, [(b"b", b"1"), (b"c", b"1")], timestamp=T0, producer_id=1,
            producer_epoch=0, base_sequence=0, is_transactional=True)
    _marker(log, 1, commit=False, clock=clock)
    _append(log, [(b"d", b"1")], timestamp=T0)
    log.roll()
    clock.sleep(DAY)
    assert log.remove_expired_producers() == 1
    _, stats = clean(log, config=CleanerConfig(SMALL))
    assert [bytes(r.key) for b in _batches(log) if not b.is_control for r in b] == [b"a", b"d"]
    assert stats.messages_read == 3
    log.close()


# -- the round: Kafka's Cleaner.doClean ---------------------------------------------------------


def _tombstone_log(path, clock):
    log = _log(path, clock, delete_retention_ms=1000)
    _append(log, [(b"a", b"1")], timestamp=T0)
    tomb = _append(log, [(b"a", None)], timestamp=T0)
    _append(log, [(b"z", b"1")], timestamp=T0)
    log.roll()
    return log, tomb


@pytest.mark.parametrize("given", [True, False])
def test_a_round_stamps_the_horizon_from_the_time_it_is_given(tmp_path, clock, given):
    """doClean(cleanable, currentTime): the delete horizon stamped is the round's current
    time (the caller's, else the cleaner's clock) plus delete.retention.ms, and the round
    records its phases' times (CleanerStats indexDone / allDone)."""
    log, tomb = _tombstone_log(tmp_path, clock)
    to_clean = LogToClean(None, log, 0, log.active_segment.base_offset)
    if given:
        _, stats = Cleaner(CleanerConfig(SMALL)).clean(to_clean, now_ms=T0 + 5000)
        now = T0 + 5000
    else:
        cleaner = Cleaner(CleanerConfig(SMALL), time_ms=lambda: T0 + 7000)
        _, stats = cleaner.clean(to_clean)
        now = T0 + 7000
    assert _batch_at(log, tomb).delete_horizon_ms == now + 1000
    assert stats.rounds == 1
    assert stats.start_time <= stats.map_complete_time <= stats.end_time
    log.close()


def test_a_log_truncated_before_the_round_is_cleaned(tmp_path, clock):
    """Only a truncation during the round aborts it (Kafka's checkDone / the log's
    truncation aborting cleaning): one made before leaves the round to run."""
    log = _log(tmp_path, clock)
    for value in (b"1", b"2", b"3"):
        _append(log, [(b"a", value)], timestamp=T0)
    log.truncate_to(2)
    _append(log, [(b"a", b"4")], timestamp=T0)
    _append(log, [(b"z", b"1")], timestamp=T0)
    log.roll()
    _clean(log)
    assert [(r.offset, bytes(r.value)) for b in _batches(log) for r in b] == [
        (2, b"4"), (3, b"1")]
    log.close()


def test_legacy_tombstones_go_from_segments_older_than_the_legacy_horizon(tmp_path, clock):
    """doClean's legacyDeleteHorizonMs is the last clean segment's modification time minus
    delete.retention.ms; cleanSegments retains legacy tombstones only in a segment
    modified after it (retainLegacyDeletesAndTxnMarkers)."""
    log = _log(tmp_path, clock, delete_retention_ms=DAY)
    _append(log, [(b"a", b"1", T0)], magic=1, timestamp=T0)
    _append(log, [(b"b", None, T0)], magic=1, timestamp=T0)
    log.roll()
    _append(log, [(b"e", None, T0)], magic=1, timestamp=T0)
    log.roll()
    dirty = _append(log, [(b"d", b"1", T0)], magic=1, timestamp=T0)
    log.roll()
    old, last_clean = log.segments[0], log.segments[1]
    last_clean.set_last_modified(T0)
    old.set_last_modified(T0 - DAY - 10_000)   # before the horizon T0 - DAY
    Cleaner(CleanerConfig(SMALL)).clean(
        LogToClean(None, log, dirty, log.active_segment.base_offset), now_ms=T0)
    kept = [(r.offset, bytes(r.key), r.value and bytes(r.value))
            for b in _batches(log) for r in b]
    assert kept == [(0, b"a", b"1"), (2, b"e", None), (3, b"d", b"1")]
    log.close()


def test_the_legacy_horizon_comes_from_the_segment_before_the_first_dirty_offset(tmp_path, clock):
    """The clean part is logSegments(0, firstDirtyOffset): with the first dirty offset at a
    segment's base, the segment before it sets the legacy horizon, and a dirty segment
    older than that horizon loses its legacy tombstone."""
    log = _log(tmp_path, clock, delete_retention_ms=DAY)
    _append(log, [(b"a", b"1", T0)], magic=1, timestamp=T0)
    log.roll()
    dirty = _append(log, [(b"b", None, T0)], magic=1, timestamp=T0)
    log.roll()
    _append(log, [(b"d", b"1", T0)], magic=1, timestamp=T0)
    log.roll()
    log.segments[0].set_last_modified(T0)
    log.segments[1].set_last_modified(T0 - DAY - 10_000)
    Cleaner(CleanerConfig(SMALL)).clean(
        LogToClean(None, log, dirty, log.active_segment.base_offset), now_ms=T0)
    assert [(r.offset, bytes(r.key)) for b in _batches(log) for r in b] == [(0, b"a"), (2, b"d")]
    log.close()
