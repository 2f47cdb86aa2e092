"""Tests that kill mutants the module's own tests let survive (scripts/mutate.py,
docs/mutation.rst): each one pins a behaviour of Kafka's that no other test checked.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from _helpers import rec, v2_batch
from _logtools import T0, Clock, installed, open_log

from kafkastore import _fileio
from kafkastore.batch_header import CONTROL_MASK, TRANSACTIONAL_MASK
from kafkastore.errors import CorruptIndexError, InvalidRecordError, RecordTooLargeError
from kafkastore.log import Log
from kafkastore.records import (
    CompressionType,
    ControlRecordType,
    TimestampType,
    assemble_batch_v2,
    encode_batch,
    encode_control_batch,
    iter_batches,
    scan_batches,
)
from kafkastore.retention import (
    delete_log_start_offset_breached_segments,
    delete_old_segments,
    delete_retention_ms_breached_segments,
    delete_retention_size_breached_segments,
)
from kafkastore.txn_index import (
    ABORTED_TXN_SIZE,
    AbortedTransactionFilter,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    collect_aborted_txns,
)
from kafkastore.validator import split_produces


def _bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


# -- retention ---------------------------------------------------------------------------------


def _empty_first_segment(tmp_path, clock, **config) -> Log:
    """Segments [0, 5) empty (a roll to offset 5, as a follower's does), [5, 6) and the active
    [6, 7): an empty segment that is not the last one."""
    log = open_log(tmp_path, clock, **config)
    log.roll(5)
    log.append_batches(encode_batch([(None, b"x", T0)], base_offset=5, timestamp=T0),
                       assign_offsets=False)
    log.roll()
    log.append([(None, b"y", T0)], timestamp=T0)
    assert [(s.base_offset, s.size > 0) for s in log.segments] == [(0, False), (5, True),
                                                                   (6, True)]
    return log


def test_an_empty_segment_that_is_not_the_last_is_deletable(tmp_path):
    """Kafka: UnifiedLog.deletableSegments skips only ``isLastSegmentAndEmpty`` (no next
    segment and size 0); an empty segment with a successor goes like any other."""
    log = _empty_first_segment(tmp_path, Clock(T0))
    log.delete_records(6)
    delete_log_start_offset_breached_segments(log)
    assert _bases(log) == [6]
    log.close()


def test_size_pass_at_one_byte_over_removes_the_empty_segment(tmp_path):
    """Kafka's size predicate ``diff - segment.size >= 0``: one byte over the limit still
    lets an empty segment go (and nothing else)."""
    log = _empty_first_segment(tmp_path, Clock(T0))
    size = log.size
    log.close()
    log = open_log(tmp_path, Clock(T0), retention_bytes=size - 1)
    assert delete_retention_size_breached_segments(log) == 1
    assert _bases(log) == [5, 6]
    log.close()


def test_size_pass_at_the_limit_removes_the_empty_segment(tmp_path):
    log = _empty_first_segment(tmp_path, Clock(T0))
    size = log.size
    log.close()
    log = open_log(tmp_path, Clock(T0), retention_bytes=size)
    try:
        assert delete_retention_size_breached_segments(log) == 1
        assert _bases(log) == [5, 6]
    finally:
        log.close()


def test_time_pass_never_takes_the_empty_active_segment(tmp_path):
    """Every closed segment expired and the active one empty: the closed ones go and the
    empty active segment stays as it is (Kafka's isLastSegmentAndEmpty), even when its
    file time is itself past retention.ms."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, retention_ms=1000)
    log.append([(None, b"a", T0)], timestamp=T0)
    log.roll()
    active = log.active_segment
    # an empty segment's age is its file time: make it old too
    now = int(time.time() * 1000) + 10 * 86_400_000
    assert delete_retention_ms_breached_segments(log, now) == 1
    assert _bases(log) == [1] and log.active_segment is active
    log.close()


def test_retention_ms_zero_deletes_everything_older_than_now(tmp_path):
    """Kafka disables the time pass only for ``retentionMs < 0``: 0 is a limit."""
    log = open_log(tmp_path, Clock(T0), retention_ms=0)
    log.append([(None, b"a", T0 - 1)], timestamp=T0 - 1)
    log.roll()
    log.append([(None, b"b", T0 + 5)], timestamp=T0 + 5)
    assert delete_retention_ms_breached_segments(log, T0) == 1
    assert _bases(log) == [1]
    log.close()


def test_retention_bytes_zero_deletes_every_segment(tmp_path):
    """Kafka disables the size pass only for ``retentionSize < 0``: 0 removes every
    non-empty segment (the active one after a roll)."""
    log = open_log(tmp_path, Clock(T0), retention_bytes=0)
    for v in (b"a", b"b"):
        log.append([(None, v, T0)], timestamp=T0)
        log.roll()
    log.append([(None, b"c", T0)], timestamp=T0)
    assert delete_retention_size_breached_segments(log) == 3
    assert _bases(log) == [3] and log.log_start_offset == 3
    log.close()


def test_delete_old_segments_adds_up_its_passes(tmp_path):
    """The count returned is the sum of the log-start, size and time passes
    (Kafka's deleteOldSegments)."""
    log = open_log(tmp_path, Clock(T0), retention_bytes=0)
    for v in (b"a", b"b", b"c"):
        log.append([(None, v, T0)], timestamp=T0)
        log.roll()
    log.delete_records(1)
    # the log-start pass takes [0, 1); the size pass the other two and the empty active
    # segment stays
    assert delete_old_segments(log) == 3
    assert _bases(log) == [3]
    log.close()


def test_delete_old_segments_uses_the_time_it_is_given(tmp_path):
    """``now_ms`` wins over the log's clock."""
    log = open_log(tmp_path, Clock(T0), retention_ms=1000)
    log.append([(None, b"a", T0)], timestamp=T0)
    log.roll()
    log.append([(None, b"b", T0 + 10_000)], timestamp=T0 + 10_000)
    assert delete_old_segments(log, now_ms=T0 + 5000) == 1
    assert _bases(log) == [1]
    log.close()


# -- txn_index ---------------------------------------------------------------------------------


class _SyncRecorder(_fileio.FileSystem):
    """The real file system, remembering which paths were fsynced."""

    def __init__(self) -> None:
        self.synced: list[str] = []
        self._paths: dict[int, str] = {}

    def open(self, path, flags, mode=0o644):
        fd = super().open(path, flags, mode)
        self._paths[fd] = path
        return fd

    def fsync(self, fd):
        self.synced.append(self._paths.get(fd))
        super().fsync(fd)


def _txn_index(tmp_path, *entries) -> TransactionIndex:
    idx = TransactionIndex(0, str(tmp_path / "00000000000000000000.txnindex"))
    for e in entries:
        idx.append(e)
    return idx


def test_txn_index_truncation_is_flushed(tmp_path):
    """A truncated index is dirty: the next flush fsyncs it (Kafka: TransactionIndex.flush
    after truncateTo, as the log's flush does)."""
    idx = _txn_index(tmp_path, AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 9, 10))
    idx.flush()
    with installed(_SyncRecorder()) as fs:
        idx.truncate_to(9)
        idx.flush()
    assert fs.synced == [idx.path]
    assert [t.last_offset for t in idx.all_aborted_txns()] == [5]


def test_txn_index_truncation_does_not_follow_a_symlink(tmp_path):
    """Every index write opens with O_NOFOLLOW: a ``.txnindex`` that is a symlink is
    refused, and the file it points to is left alone."""
    if not hasattr(os, "O_NOFOLLOW"):
        pytest.skip("no O_NOFOLLOW on this platform")
    target = tmp_path / "elsewhere"
    target.write_bytes(AbortedTxn(1, 0, 5, 6).to_bytes() * 2)
    idx = TransactionIndex(0, str(tmp_path / "00000000000000000000.txnindex"))
    os.symlink(target, idx.path)
    with pytest.raises(OSError):
        idx.truncate_to(0)
    assert target.stat().st_size == 2 * ABORTED_TXN_SIZE


def test_txn_index_errors_name_the_file(tmp_path):
    """CorruptIndexError from a sanity check or a truncation names the index file."""
    idx = _txn_index(tmp_path, AbortedTxn(1, 0, 5, 6))
    late = TransactionIndex(10, idx.path)
    with pytest.raises(CorruptIndexError) as exc:
        late.sanity_check()
    assert exc.value.path == idx.path
    with open(idx.path, "r+b") as f:
        f.write(b"\x01")            # version 1: not one Kafka writes
    with pytest.raises(CorruptIndexError) as exc:
        idx.truncate_to(0)
    assert exc.value.path == idx.path


def test_filter_keeps_legacy_batches():
    """Magic 0/1 entries carry no producer: a read_committed consumer keeps them."""
    data = encode_batch([(b"k", b"v", T0)], magic=1, timestamp=T0)
    batch = next(iter_batches(data))
    assert AbortedTransactionFilter([(1, 0)]).keep(batch)


def test_filter_passes_an_emptied_marker():
    """The cleaner leaves an empty header of a marker it cleaned (Kafka keeps the last
    batch of a producer); it is a control batch without a record: not an ABORT marker, so
    the producer's aborted transaction stays aborted, and it is never returned."""
    empty_marker = assemble_batch_v2(
        b"", 0, base_offset=1, last_offset_delta=0,
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK, base_timestamp=-1, max_timestamp=T0,
        producer_id=7, producer_epoch=0, base_sequence=-1)
    data = encode_batch([(b"k", b"v", T0)], base_offset=2, timestamp=T0, producer_id=7,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    f = AbortedTransactionFilter([(7, 0)])
    assert [f.keep(b) for b in iter_batches(empty_marker + data)] == [False, False]


def _int64(a: np.ndarray) -> bool:
    """Offsets stay 64-bit integers (either byte order): never float."""
    return a.dtype.kind == "i" and a.dtype.itemsize == 8


def test_aborted_ranges_producer_zero_multi_record_batches(tmp_path):
    """Producer id 0 is a producer (Kafka: ``hasProducerId`` is ``producerId >= 0``), an
    aborted batch's range ends at its last offset, and a transaction that begins at the
    last data batch of the buffer counts; the same int64 ranges whether the filter gets
    index entries, (producer, first, last) triples or the fetch response's pairs."""
    log = open_log(tmp_path, Clock(T0))
    log.append([(b"a", b"1", T0), (b"b", b"1", T0)], timestamp=T0, producer_id=0,
               producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(0, 0, "ABORT")
    log.append([(b"c", b"1", T0)], timestamp=T0)
    # 200: the low byte of the id has its top bit set (a float reading of the big-endian
    # field would be negative)
    log.append([(b"d", b"1", T0), (b"e", b"1", T0)], timestamp=T0, producer_id=200,
               producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(200, 0, "ABORT")
    entries = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in entries] == \
        [(0, 0, 2), (200, 4, 6)]
    data = log.read(0, 1 << 20).to_bytes()
    log.close()
    scan = scan_batches(data)
    for aborted in (entries, [(t.producer_id, t.first_offset, t.last_offset) for t in entries],
                    [(t.producer_id, t.first_offset) for t in entries]):
        firsts, lasts = AbortedTransactionFilter(aborted).aborted_ranges(
            data, scan.position, scan.size, scan.magic)
        assert _int64(firsts) and _int64(lasts)
        assert list(zip(firsts.tolist(), lasts.tolist())) == [(0, 1), (4, 5)]


def test_aborted_ranges_of_nothing_are_int64(tmp_path):
    """No aborted batch: empty int64 arrays (numpy's default for an empty list is float)."""
    data = encode_batch([(b"k", b"v", T0)], timestamp=T0)
    scan = scan_batches(data)
    for aborted in ([AbortedTxn(3, 10, 12, 13)], [(3, 10)]):
        firsts, lasts = AbortedTransactionFilter(aborted).aborted_ranges(
            data, scan.position, scan.size, scan.magic)
        assert _int64(firsts) and _int64(lasts) and firsts.size == 0


def test_txn_index_append_is_flushed_and_refuses_a_symlink(tmp_path):
    """An append makes the index dirty (the next flush fsyncs it), and opens with
    O_NOFOLLOW like every index write."""
    idx = _txn_index(tmp_path)
    with installed(_SyncRecorder()) as fs:
        idx.append(AbortedTxn(1, 0, 5, 6))
        idx.flush()
        idx.flush()     # clean again: nothing more
        TransactionIndex(0, idx.path).flush()   # opened, not written: nothing to sync
    assert fs.synced == [idx.path]
    if hasattr(os, "O_NOFOLLOW"):
        target = tmp_path / "elsewhere"
        target.write_bytes(b"")
        linked = TransactionIndex(0, str(tmp_path / "00000000000000000007.txnindex"))
        os.symlink(target, linked.path)
        with pytest.raises(OSError):
            linked.append(AbortedTxn(1, 0, 5, 6))
        assert target.stat().st_size == 0


def test_txn_index_corrupt_version_names_file_and_position(tmp_path):
    """Kafka's AbortedTxn iterator throws on a version above 0; here the error says where:
    the file, and the entry's byte position, also when an append finds it."""
    idx = _txn_index(tmp_path, AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 9, 10))
    with open(idx.path, "r+b") as f:
        f.seek(ABORTED_TXN_SIZE)
        f.write(b"\x01")
    fresh = TransactionIndex(0, idx.path)
    with pytest.raises(CorruptIndexError) as exc:
        fresh.append(AbortedTxn(3, 10, 12, 13))
    assert (exc.value.path, exc.value.position) == (idx.path, ABORTED_TXN_SIZE)


def test_collect_is_complete_at_the_upper_bound():
    """Kafka's collectAbortedTxns stops when ``lastStableOffset >= upperBoundOffset``: an
    entry whose last stable offset is exactly the bound ends the search."""
    entries = [AbortedTxn(1, 0, 5, 8), AbortedTxn(2, 6, 9, 10)]
    assert collect_aborted_txns(entries, 0, 8) == TxnIndexSearchResult([entries[0]], True)
    assert collect_aborted_txns(entries, 0, 9) == TxnIndexSearchResult(entries, True)
    assert collect_aborted_txns(entries, 0, 11) == TxnIndexSearchResult(entries, False)


# -- validator ---------------------------------------------------------------------------------


@pytest.mark.parametrize("magics,attributes,produces", [
    ([2], [0], [(0, 1)]),
    # each v2 batch is its own produce, whatever its attributes say
    ([2, 2, 2], [0, 0, 0], [(0, 1), (1, 2), (2, 3)]),
    # legacy: a compressed wrapper alone, a run of plain messages together
    ([1, 1, 1, 1], [0, 1, 0, 0], [(0, 1), (1, 2), (2, 4)]),
    ([0, 0, 0], [2, 0, 0], [(0, 1), (1, 3)]),
    ([1, 1, 1], [0, 0, 3], [(0, 2), (2, 3)]),
    ([1, 1, 1, 1], [1, 0, 0, 1], [(0, 1), (1, 3), (3, 4)]),
    ([0, 0], [0, 0], [(0, 2)]),
])
def test_split_produces(magics, attributes, produces):
    """How one append_batches call maps onto Kafka produce requests (one v2 batch, or one
    legacy wrapper, or one run of uncompressed legacy messages, per produce)."""
    got = split_produces(magics, attributes, "/p")
    assert [(r.start, r.stop) for r in got] == produces


def test_split_produces_refuses_mixed_magic_naming_the_log():
    with pytest.raises(InvalidRecordError) as exc:
        split_produces([1, 2], [0, 0], "/the/log")
    assert exc.value.path == "/the/log"


def test_refusals_name_the_log_and_the_batch_position(tmp_path):
    """A refused produce's error carries the log and the byte position of the entry in the
    append (Kafka's RecordError names the batch index)."""
    clock = Clock(T0)
    log = open_log(tmp_path, clock, cleanup_policy="compact")
    first = encode_batch([(b"k", b"v", T0)], timestamp=T0)
    keyless = encode_batch([(None, b"v", T0)], timestamp=T0)
    with pytest.raises(InvalidRecordError) as exc:
        log.append_batches(first + keyless)
    assert (exc.value.path, exc.value.position) == (log.dir, len(first))
    legacy_first = encode_batch([(b"k", b"v", T0)], magic=1, timestamp=T0)
    legacy_keyless = encode_batch([(None, b"v", T0)], magic=1, timestamp=T0)
    with pytest.raises(InvalidRecordError) as exc:
        log.append_batches(legacy_first + legacy_keyless)
    assert (exc.value.path, exc.value.position) == (log.dir, len(legacy_first))
    assert log.log_end_offset == 0
    log.close()


def test_producer_log_append_time_refusal(tmp_path):
    """A LogAppendTime topic refuses batches whose producer set LogAppendTime (Kafka's
    LogValidator.validateRecord): Kafka's message, the log and the position, for v2 and
    for magic 1."""
    log = open_log(tmp_path, Clock(T0), message_timestamp_type="LogAppendTime")
    message = ("Invalid timestamp type in message. Producer should not set timestamp type to "
               "LogAppendTime.")
    ok = encode_batch([(b"k", b"v", T0)], timestamp=T0)
    for magic in (2, 1):
        lat = encode_batch([(b"k", b"v", T0)], magic=magic, timestamp=T0,
                           timestamp_type=TimestampType.LOG_APPEND_TIME)
        first = encode_batch([(b"k", b"v", T0)], magic=magic, timestamp=T0)
        with pytest.raises(InvalidRecordError) as exc:
            log.append_batches(first + lat)
        assert str(exc.value).startswith(message)
        assert (exc.value.path, exc.value.position) == (log.dir, len(first))
    assert log.append_batches(ok).first_offset == 0
    log.close()


def test_legacy_records_keyless_only_refused_on_compacted_topics(tmp_path):
    """The key rule applies to legacy records on a compacted topic only, and the
    CreateTime window to legacy records with a timestamp (Kafka's LogValidator)."""
    plain = open_log(tmp_path / "plain", Clock(T0), message_timestamp_before_max_ms=10)
    keyless = encode_batch([(None, b"v", T0)], magic=1, timestamp=T0)
    assert plain.append_batches(keyless).first_offset == 0
    old = encode_batch([(b"k", b"v", T0 - 11)], magic=1, timestamp=T0 - 11)
    with pytest.raises(InvalidRecordError):
        plain.append_batches(old)
    plain.close()
    lat_log = open_log(tmp_path / "lat", Clock(T0), message_timestamp_type="LogAppendTime",
                       message_timestamp_before_max_ms=10)
    assert lat_log.append_batches(old).first_offset == 0    # LogAppendTime: no window
    lat_log.close()


def _refusals():
    """(name, the produce's bytes, the start of Kafka's message) for each leader check."""
    body = rec()
    return [
        ("base offset", encode_batch([(b"k", b"v", T0)], base_offset=9, timestamp=T0),
         "The baseOffset of the record batch in the append to "),
        ("offset range", v2_batch(body, count=1, last_offset_delta=-1, first_ts=T0, max_ts=T0),
         "Batch has an invalid offset range: [0, -1] in the append to "),
        ("count zero", v2_batch(b"", count=0, last_offset_delta=0, first_ts=T0, max_ts=T0),
         "Invalid reported count for record batch: 0 in the append to "),
        ("count mismatch", v2_batch(body, count=1, last_offset_delta=1, first_ts=T0, max_ts=T0),
         "Inconsistent batch offset range [0, 1] and count of records 1 in the append to "),
        ("control", encode_control_batch(ControlRecordType.COMMIT, producer_id=1,
                                         producer_epoch=0, timestamp=T0),
         "Clients are not allowed to write control records in the append to "),
        ("producer 0 without sequence",
         encode_batch([(b"k", b"v", T0)], timestamp=T0, producer_id=0, producer_epoch=0,
                      base_sequence=-1),
         "Invalid sequence number -1 in record batch with producerId 0 in the append to "),
        ("window", encode_batch([(b"k", b"v", T0 - 10_000)], timestamp=T0 - 10_000),
         "Timestamp 1699999990000 of message with offset 0 is out of range. The timestamp "
         "should be within [1699999995000, 1700000005000]"),
    ]


@pytest.mark.parametrize("name", [r[0] for r in _refusals()])
def test_each_leader_refusal_names_the_log_and_the_entry(tmp_path, name):
    """Every check of Kafka's LogValidator (analyzeAndValidateRecords,
    validateMessagesAndAssignOffsets, validateTimestamp) refuses with Kafka's message, the
    log's directory and the byte position of the refused entry (the second one here), and
    writes nothing."""
    _, bad, message = next(r for r in _refusals() if r[0] == name)
    log = open_log(tmp_path, Clock(T0), message_timestamp_before_max_ms=5000,
                   message_timestamp_after_max_ms=5000)
    good = encode_batch([(b"k", b"v", T0)], timestamp=T0)
    with pytest.raises(InvalidRecordError) as exc:
        log.append_batches(good + bad)
    assert str(exc.value).startswith(message)
    assert (exc.value.path, exc.value.position) == (log.dir, len(good))
    assert log.log_end_offset == 0
    log.close()


def test_a_record_without_timestamp_is_never_outside_the_window(tmp_path):
    """Kafka's validateTimestamp skips ``RecordBatch.NO_TIMESTAMP`` (-1) records."""
    log = open_log(tmp_path, Clock(T0), message_timestamp_before_max_ms=5000)
    assert log.append([(b"a", b"v", -1), (b"b", b"v", T0)], timestamp=T0).last_offset == 1
    log.close()


def test_legacy_up_conversion_has_no_producer(tmp_path):
    """Legacy messages are rebuilt as a v2 batch without producer id, epoch or sequence,
    not transactional, with no leader epoch when none is known (Kafka's
    buildRecordsAndAssignOffsets with RecordBatch.NO_PRODUCER_ID and friends)."""
    log = open_log(tmp_path, Clock(T0))
    log.append_batches(encode_batch([(b"k", b"v", T0), (b"j", b"w", T0)], magic=1,
                                    timestamp=T0, compression="gzip"))
    (b,) = [b for seg in log.segments for b in _segment_batches(seg)]
    assert (b.magic, b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional,
            b.partition_leader_epoch) == (2, -1, -1, -1, False, -1)
    log.close()


def _segment_batches(seg):
    with open(seg.log.path, "rb") as f:
        return list(iter_batches(f.read()))


@pytest.mark.parametrize("delta,accepted", [(-1, False), (0, True), (1, True)])
def test_rebuilt_batch_at_max_message_bytes(tmp_path, delta, accepted):
    """Kafka checks the rebuilt batch (``validatedRecords.sizeInBytes > maxMessageSize``):
    a legacy message up-converted to exactly max.message.bytes is accepted, one byte over
    is refused with the limit and the log."""
    legacy = encode_batch([(b"k", b"v" * 20, T0)], magic=1, timestamp=T0)
    probe = open_log(tmp_path / "probe", Clock(T0))
    probe.append_batches(legacy)
    size = probe.size    # the v2 batch it became
    probe.close()
    assert size > len(legacy)
    log = open_log(tmp_path / "log", Clock(T0), max_message_bytes=size + delta)
    if accepted:
        assert log.append_batches(legacy).first_offset == 0
    else:
        with pytest.raises(RecordTooLargeError) as exc:
            log.append_batches(legacy)
        assert (exc.value.limit, exc.value.path) == (size - 1, log.dir)
    log.close()


def test_leader_epoch_is_stamped_in_place_and_in_rebuilt_batches(tmp_path):
    """The leader's epoch goes into every batch it appends: a v2 batch kept in place, a
    transactional v2 batch rebuilt for the topic's codec (which stays transactional), and
    legacy messages up-converted (Kafka's LogValidator ``partitionLeaderEpoch``)."""
    log = open_log(tmp_path, Clock(T0), compression_type="gzip")
    gz = encode_batch([(b"k", b"v", T0)], timestamp=T0, compression="gzip")
    plain_txn = encode_batch([(b"k", b"v", T0)], timestamp=T0, producer_id=3,
                             producer_epoch=0, base_sequence=0, is_transactional=True)
    plain = encode_batch([(b"k", b"v", T0)], timestamp=T0)
    legacy = encode_batch([(b"k", b"v", T0)], magic=1, timestamp=T0)
    for data in (gz, plain_txn, plain, legacy):
        log.append_batches(data, leader_epoch=5)
    stored = [b for seg in log.segments for b in _segment_batches(seg)]
    assert [(b.partition_leader_epoch, b.is_transactional, b.compression) for b in stored] == \
        [(5, False, CompressionType.GZIP), (5, True, CompressionType.GZIP),
         (5, False, CompressionType.GZIP), (5, False, CompressionType.GZIP)]
    log.close()


def test_rebuilt_batch_takes_the_topic_gzip_level(tmp_path):
    """``compression.gzip.level`` is used when the leader recompresses (Kafka 3.8's
    per-codec levels): level 1 and level 9 give different bytes for the same records."""
    rows = [(b"k%d" % i, (b"value %d " % (i % 7)) * 40, T0) for i in range(60)]
    sizes = {}
    for level in (1, 9):
        log = open_log(tmp_path / str(level), Clock(T0), compression_type="gzip",
                       compression_gzip_level=level)
        log.append_batches(encode_batch(rows, timestamp=T0))
        sizes[level] = log.size
        log.close()
    assert sizes[1] > sizes[9]


def test_log_append_time_rebuild_stamps_now(tmp_path):
    """On a LogAppendTime topic the rebuilt batch's timestamps are the append time."""
    log = open_log(tmp_path, Clock(T0 + 77), message_timestamp_type="LogAppendTime")
    log.append_batches(encode_batch([(b"k", b"v", T0)], magic=1, timestamp=T0))
    (b,) = [b for seg in log.segments for b in _segment_batches(seg)]
    assert (b.timestamp_type, b.max_timestamp) == (TimestampType.LOG_APPEND_TIME, T0 + 77)
    log.close()


def test_keyless_append_to_a_compacted_topic_names_the_log(tmp_path):
    """Log.append's key check (Kafka: "Compacted topic cannot accept message without
    key") names the log and the record."""
    log = open_log(tmp_path, Clock(T0), cleanup_policy="compact")
    with pytest.raises(InvalidRecordError) as exc:
        log.append([(b"k", b"v", T0), (None, b"v", T0)], timestamp=T0)
    assert exc.value.path == log.dir and "(record 1 of the append)" in str(exc.value)
    log.close()


def test_producer_log_append_time_batch_on_a_create_time_topic(tmp_path):
    """Kafka's validateTimestamp on a CreateTime topic checks the window against the
    record timestamps, which in a LogAppendTime batch are its max timestamp: inside, the
    batch is kept as CreateTime with that timestamp; outside, refused; without one (-1),
    refused as a producer-set LogAppendTime."""
    log = open_log(tmp_path, Clock(T0), message_timestamp_before_max_ms=5000)
    lat = TimestampType.LOG_APPEND_TIME
    log.append_batches(encode_batch([(b"k", b"v", T0 - 10)], timestamp=T0 - 10,
                                    timestamp_type=lat))
    (b,) = [b for seg in log.segments for b in _segment_batches(seg)]
    assert (b.timestamp_type, b.max_timestamp) == (TimestampType.CREATE_TIME, T0 - 10)
    with pytest.raises(InvalidRecordError, match="out of range"):
        log.append_batches(encode_batch([(b"k", b"v", T0 - 6000)], timestamp=T0 - 6000,
                                        timestamp_type=lat))
    with pytest.raises(InvalidRecordError, match="Producer should not set timestamp type"):
        log.append_batches(encode_batch([(b"k", b"v", -1)], timestamp=-1,
                                        max_timestamp=-1, timestamp_type=lat))
    assert log.log_end_offset == 1
    log.close()


def test_legacy_window_refusal_names_the_log_and_the_entry(tmp_path):
    """The CreateTime window applies to each legacy record with a timestamp (plain or
    inside a wrapper), naming the log and the entry; a record without one (-1) passes."""
    log = open_log(tmp_path, Clock(T0), message_timestamp_before_max_ms=5000)
    first = encode_batch([(b"k", b"v", T0)], magic=1, timestamp=T0)
    for codec in (None, "gzip"):
        old = encode_batch([(b"k", b"v", T0 - 6000)], magic=1, timestamp=T0 - 6000,
                           compression=codec)
        with pytest.raises(InvalidRecordError) as exc:
            log.append_batches(first + old)
        assert (exc.value.path, exc.value.position) == (log.dir, len(first))
    with pytest.raises(InvalidRecordError):    # 1 is a timestamp, far outside
        log.append_batches(encode_batch([(b"k", b"v", 1)], magic=1, timestamp=1))
    assert log.append_batches(encode_batch([(b"k", b"v", -1)], magic=1,
                                           timestamp=-1)).first_offset == 0
    log.close()
