"""Two loose ends of issue 27's append path: the last stable offset a lock-free reader
sees while a truncation rebuilds the producer state, and the answer to a retried batch.

Kafka's ``UnifiedLog.truncateTo`` cuts the local log and calls ``rebuildProducerState``
under the log's lock; its readers' LSO (``lastStableOffset``) comes from the published
``firstUnstableOffsetMetadata`` and the high watermark, which only
``updateHighWatermarkMetadata`` -> ``maybeIncrementFirstUnstableOffset`` changes, after
the rebuild. So a reader never sees the emptied state in between. For a retry,
``UnifiedLog.append`` answers with the duplicate's first and last offsets, its timestamp
as the log append time and the current log start offset; the max timestamp and its
shallow offset stay as the validation of the retried batch set them.
"""

from __future__ import annotations

import threading

from _logtools import Clock, open_log

from kafkastore.local_log import LocalLog
from kafkastore.records import ControlRecordType, encode_batch

PID, OTHER = 7, 9


def _lso_read_from_another_thread(log) -> list:
    """Start a reader thread that reads ``log.last_stable_offset`` once, as a lock-free
    reader would at this moment; give it the time to answer (it may instead wait for the
    log's lock, which the calling writer holds: then it answers once the writer is done).
    Returns the list the answer lands in, and the thread as its second element."""
    out: list = []
    started = threading.Event()

    def read():
        started.set()
        out.append(log.last_stable_offset)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    started.wait(5)
    thread.join(0.5)   # (a lock-free reader answers at once; one waiting for the lock, later)
    return [out, thread]


def _open_txn_then(log, *, commit: bool) -> int:
    """A plain batch, then PID's transaction begun (and committed if told), then a plain
    batch; returns the transaction's first offset."""
    log.append([(b"k", b"plain")])
    first = log.log_end_offset
    log.append([(b"k", b"open")], producer_id=PID, producer_epoch=0, base_sequence=0,
               is_transactional=True)
    if commit:
        log.append_end_txn_marker(PID, 0, ControlRecordType.COMMIT)
    log.append([(b"k", b"after")])
    return first


class _WatchedLocalLog(LocalLog):
    """A LocalLog (slotted: its methods cannot be patched on the instance) that calls
    ``after_cut`` once its truncation is done: its end is at the target from then on."""

    __slots__ = ()
    after_cut = None

    def truncate_to(self, target_offset):
        result = super().truncate_to(target_offset)
        _WatchedLocalLog.after_cut()
        return result


def _check_truncation_window(tmp_path, monkeypatch, *, commit: bool, hook: str) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 20)
    first = _open_txn_then(log, commit=commit)
    target = log.log_end_offset - 1 if not commit else first + 1   # (commit: cut the marker)
    producers = log.producer_state_manager
    seen: list = []
    if hook == "reload":   # the state emptied (reloaded from no snapshot), not replayed yet
        original = producers.truncate_and_reload

        def reload_then_read(*args, **kw):
            original(*args, **kw)
            seen.append(_lso_read_from_another_thread(log))

        monkeypatch.setattr(producers, "truncate_and_reload", reload_then_read)
    else:                  # the local log cut (its end at the target), the state untouched
        monkeypatch.setattr(log.local_log, "__class__", _WatchedLocalLog)
        monkeypatch.setattr(_WatchedLocalLog, "after_cut",
                            lambda: seen.append(_lso_read_from_another_thread(log)))
    assert log.truncate_to(target)
    monkeypatch.undo()
    assert seen
    out, thread = seen[0]
    thread.join(10)
    assert out, "the reader never answered"
    # the transaction is open from the cut on (a commit marker at or above the target
    # goes with it), and open after it: no reader may see the LSO past its first offset
    assert out[0] <= first, (out[0], first, target)
    assert log.last_stable_offset == first   # (after the truncation: the rebuilt state)
    log.close()


def test_a_reader_during_the_rebuild_never_sees_the_lso_past_a_transaction_reloaded(
        tmp_path, monkeypatch):
    """truncate_to below the end: while the producer state is emptied and before the
    replay reloads the open transaction, a lock-free reader's LSO stays at or below its
    first offset (before: the new log end, read with an empty state)."""
    _check_truncation_window(tmp_path, monkeypatch, commit=False, hook="reload")


def test_a_reader_right_after_the_cut_never_sees_the_lso_past_a_reopened_transaction(
        tmp_path, monkeypatch):
    """A truncation that cuts a COMMIT marker reopens its transaction: right after the
    local log is cut (the end below the marker) and before the state is rebuilt, a
    lock-free reader's LSO stays at or below the transaction's first offset (before: the
    new end, the old state still calling the transaction committed)."""
    _check_truncation_window(tmp_path, monkeypatch, commit=True, hook="cut")


def test_a_reader_during_the_rebuild_never_sees_the_lso_past_a_reopened_transaction(
        tmp_path, monkeypatch):
    _check_truncation_window(tmp_path, monkeypatch, commit=True, hook="reload")


# -- a retried batch's answer -----------------------------------------------------------


def _produced(records, *, pid=PID, seq=0, timestamp) -> bytes:
    return encode_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq,
                        timestamp=timestamp)


def test_a_retry_answers_the_duplicates_offsets_and_its_own_validated_max_timestamp(
        tmp_path):
    """CreateTime: first/last offsets and the log append time from the duplicate's
    metadata (its timestamp: the original batch's max timestamp), the max timestamp and
    its shallow offset from validating the retry at the log end (Kafka: UnifiedLog.append
    sets only firstOffset, lastOffset, logAppendTime and logStartOffset from the
    duplicate; validation set the max timestamp and shallowOffsetOfMaxTimestamp, the
    last offset the retried v2 batch got)."""
    clock = Clock()
    t = clock()
    log = open_log(tmp_path, clock)
    batch = encode_batch([(b"a", b"1", t - 20), (b"b", b"2", t - 10)], producer_id=PID,
                         producer_epoch=0, base_sequence=0, timestamp=t - 20)
    log.append_batches(batch)                                       # offsets 0, 1
    log.append_batches(_produced([(b"c", b"3")], pid=OTHER, timestamp=t))   # offset 2
    log.delete_records(1)
    end = log.log_end_offset
    info = log.append_batches(batch)
    assert info.duplicate
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert info.log_append_time == t - 10          # the duplicate's timestamp
    assert info.log_start_offset == 1
    assert info.max_timestamp == t - 10            # validated: the retry's records
    assert info.shallow_offset_of_max_timestamp == end + 1   # its last offset from the end
    assert (info.valid_bytes, info.num_batches) == (len(batch), 1)
    assert log.log_end_offset == end
    log.close()


def test_a_retry_under_log_append_time_answers_the_validation_time_as_max(tmp_path):
    """LogAppendTime: validation stamps the retry with now, so the max timestamp is the
    retry's time while the log append time is the original batch's (the duplicate's
    timestamp), as Kafka answers."""
    clock = Clock()
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    first_time = clock()
    batch = _produced([(b"a", b"1"), (b"b", b"2")], timestamp=first_time - 50)
    log.append_batches(batch)
    log.append_batches(_produced([(b"c", b"3")], pid=OTHER, timestamp=first_time))
    clock.sleep(1000)
    end = log.log_end_offset
    info = log.append_batches(batch)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 1)
    assert info.log_append_time == first_time
    assert info.max_timestamp == first_time + 1000
    assert info.shallow_offset_of_max_timestamp == end + 1
    log.close()


def test_a_retry_through_log_append_answers_as_append_batches(tmp_path):
    """Log.append with a producer id: the same answer as a produce retry."""
    clock = Clock()
    t = clock()
    log = open_log(tmp_path, clock)
    records = [(b"a", b"1", t - 20), (b"b", b"2", t - 10)]
    log.append(records, producer_id=PID, producer_epoch=0, base_sequence=0)
    log.append([(b"c", b"3")])
    end = log.log_end_offset
    info = log.append(records, producer_id=PID, producer_epoch=0, base_sequence=0)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 1)
    assert info.log_append_time == t - 10
    assert info.max_timestamp == t - 10
    assert info.shallow_offset_of_max_timestamp == end + 1
    log.close()
