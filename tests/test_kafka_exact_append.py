"""The leader append in Kafka's order (issue 27, differences 1, 2, 3 and 5).

Kafka's ``UnifiedLog.append``: validate every batch (``LogValidator.
validateMessagesAndAssignOffsets``), assign the leader epoch, roll the segment if it is
full (``maybeRoll``, with its producer snapshot), then check the producer state
(``analyzeAndValidateProducerState``: every batch against the state before the request;
the first retry found ends the append with nothing written), then write, update the
producer state, and only then let readers past the new batch (the high watermark). A
reader of the last stable offset never sees it above the first offset of a transaction
open at that moment.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from _logtools import Clock, open_log

from kafkastore.config import LogConfig
from kafkastore.errors import InvalidRecordError, OutOfOrderSequenceError
from kafkastore.local_log import LocalLog
from kafkastore.records import ControlRecordType, encode_batch

PID, OTHER = 7, 9


def produced(records, *, pid=PID, epoch=0, seq=0, txn=False, base_offset=0,
             timestamp=None) -> bytes:
    """A producer's batch as it sends it (base offset 0 unless told)."""
    return encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=txn, base_offset=base_offset,
                        timestamp=Clock()() if timestamp is None else timestamp)


def snapshot_offsets(path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".snapshot"))


def end_txn(log, pid: int, kind=ControlRecordType.COMMIT):
    return log.append_end_txn_marker(pid, 0, kind)


# -- 1. the last stable offset a lock-free reader sees --------------------------------


class _WatchedLocalLog(LocalLog):
    """A LocalLog that calls ``on_end_moved`` each time its log end offset is set: the
    moment a lock-free reader can first see the new end."""

    __slots__ = ()
    _slot = LocalLog.next_offset   # (the slot's descriptor)
    on_end_moved = None

    @property
    def next_offset(self):
        return _WatchedLocalLog._slot.__get__(self)

    @next_offset.setter
    def next_offset(self, value):
        _WatchedLocalLog._slot.__set__(self, value)
        if _WatchedLocalLog.on_end_moved is not None:
            _WatchedLocalLog.on_end_moved()


def test_the_lso_is_below_a_new_transaction_when_the_end_moves_past_it(tmp_path,
                                                                      monkeypatch):
    """The writer's side: at the instant the log end moves past a transaction's first
    batch (what a lock-free reader sees from then on), the producer state already holds
    the transaction, so the LSO stays at its first offset."""
    log = open_log(tmp_path)
    log.append([(b"k", b"plain")])
    monkeypatch.setattr(log._local, "__class__", _WatchedLocalLog)
    seen = []
    monkeypatch.setattr(_WatchedLocalLog, "on_end_moved",
                        lambda: seen.append((log.log_end_offset, log.last_stable_offset)))
    first = log.log_end_offset
    log.append([(b"k", b"open")], producer_id=PID, producer_epoch=0, base_sequence=0,
               is_transactional=True)
    log.append_batches(produced([(b"k", b"open too")], pid=OTHER, txn=True))
    assert seen and all(lso <= first for _end, lso in seen), seen
    monkeypatch.setattr(_WatchedLocalLog, "on_end_moved", None)
    end_txn(log, PID)
    end_txn(log, OTHER, ControlRecordType.ABORT)
    assert log.last_stable_offset == log.log_end_offset
    log.close()


def test_a_reader_between_its_two_reads_never_passes_a_transaction_begun_there(tmp_path,
                                                                             monkeypatch):
    """The reader's side: the LSO is made of two values read without the lock (the log
    end and the first unstable offset). A transaction begun by a writer between those two
    reads must not be passed: the end is read first."""
    log = open_log(tmp_path)
    log.append([(b"k", b"plain")])
    producers = log.producer_state_manager
    read_first_unstable = producers.first_unstable_offset
    begun = []

    def writer_runs_in_between():
        value = read_first_unstable()
        if not begun:   # (once: the append below reads it too)
            begun.append(log.log_end_offset)
            log.append([(b"k", b"open")], producer_id=PID, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
        return value

    monkeypatch.setattr(producers, "first_unstable_offset", writer_runs_in_between)
    lso = log.last_stable_offset
    assert begun and lso <= begun[0], (lso, begun)
    monkeypatch.undo()
    log.close()


def test_a_reader_thread_never_sees_the_lso_past_an_open_transaction(tmp_path):
    """A real reader thread against a writer of transactions (bounded in count and time):
    while a transaction is open (from the start of its first append to the start of its
    marker's), the LSO the reader gets is never above its first offset."""
    log = open_log(tmp_path, segment_bytes=1 << 20)
    log.append([(b"k", b"plain")])
    state = [None]          # (first offset of the open transaction,) or None
    done = threading.Event()
    bad: list = []
    checked = [0]

    def reader():
        while not done.is_set() and not bad:
            before = state[0]
            lso = log.last_stable_offset
            if before is not None and state[0] is before:
                checked[0] += 1
                if lso > before[0]:
                    bad.append((lso, before[0]))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # (switch threads often: the window is a few bytecodes)
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 8
        seq = 0
        for i in range(60_000):   # (and by the deadline: 8 s)
            if bad or time.monotonic() > deadline:
                break
            state[0] = (log.log_end_offset,)   # open from here (single writer: exact)
            log.append([(b"k", b"t%d" % i)], producer_id=PID, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)
            seq += 1
            state[0] = None                    # no longer checked: its marker comes
            end_txn(log, PID, ControlRecordType.ABORT if i % 2 else ControlRecordType.COMMIT)
    finally:
        done.set()
        thread.join(10)
        sys.setswitchinterval(switch)
    assert not bad, f"LSO past an open transaction's first offset: {bad[:5]}"
    assert checked[0] > 0
    log.close()


# -- 2. a retry is validated before it is recognised -------------------------------------


def test_a_retry_outside_the_timestamp_window_is_refused_not_answered(tmp_path):
    """Kafka validates (``message.timestamp.before.max.ms``) before it looks for a retry:
    a retry whose CreateTime is now too old is refused, as a new batch would be."""
    clock = Clock()
    log = open_log(tmp_path, clock, message_timestamp_before_max_ms=1000)
    batch = produced([(b"k", b"v")], timestamp=clock())
    log.append_batches(batch)
    assert log.append_batches(batch).duplicate   # (inside the window: a retry)
    clock.sleep(2000)
    with pytest.raises(InvalidRecordError, match="out of range"):
        log.append_batches(batch)
    assert log.log_end_offset == 1


def test_a_retry_with_a_base_offset_is_refused_not_answered(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(produced([(b"k", b"v")]))
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        log.append_batches(produced([(b"k", b"v")], base_offset=5))
    assert log.log_end_offset == 1
    log.close()


def test_a_retry_without_keys_on_a_now_compacted_topic_is_refused(tmp_path):
    log = open_log(tmp_path)
    batch = produced([(None, b"v")])
    log.append_batches(batch)
    log.config = LogConfig.from_dict({"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append_batches(batch)
    assert log.log_end_offset == 1
    log.close()


# -- 3. several batches in one call, one of them a retry ---------------------------------


def test_a_new_batch_then_a_retry_writes_nothing_and_answers_the_retry(tmp_path):
    """Kafka checks every batch against the state before the request: the retry ends
    the append, nothing of it is written, the answer is the retried batch's offsets."""
    log = open_log(tmp_path)
    log.append_batches(produced([(b"a", b"0")], seq=0))
    log.append_batches(produced([(b"b", b"1")], seq=1))
    size = log.size
    info = log.append_batches(produced([(b"c", b"2")], seq=2)
                              + produced([(b"a", b"0")], seq=0))
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 0)
    assert (log.log_end_offset, log.size) == (2, size)
    # the new batch was not recorded either: it is still the next sequence
    assert not log.append_batches(produced([(b"c", b"2")], seq=2)).duplicate
    assert log.log_end_offset == 3
    log.close()


def test_a_retry_then_a_new_batch_writes_nothing(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(produced([(b"a", b"0")], seq=0))
    info = log.append_batches(produced([(b"a", b"0")], seq=0)
                              + produced([(b"b", b"1")], pid=OTHER, seq=0))
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 0)
    assert log.log_end_offset == 1
    log.close()


def test_the_same_new_batch_twice_is_out_of_order_and_writes_nothing(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(produced([(b"a", b"0")], seq=0))
    batch = produced([(b"b", b"1")], seq=1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batches(batch + batch)
    assert log.log_end_offset == 1
    assert not log.append_batches(batch).duplicate   # the state did not move
    assert log.log_end_offset == 2
    log.close()


# -- 5. a retry against a full active segment -------------------------------------------


@pytest.mark.parametrize("api", ["append_batches", "append"])
def test_a_retry_against_a_full_segment_rolls_first(tmp_path, api):
    """Kafka rolls (``maybeRoll``, which takes the producer snapshot at the new base)
    before it finds the retry: the roll happens, the retry is answered, nothing is
    written."""
    log = open_log(tmp_path, segment_bytes=300)
    records = [(b"k", b"v" * 60)]
    log.append_batches(produced(records, seq=0))
    log.append_batches(produced(records, seq=1))   # the segment is full now
    assert len(log.segments) == 1 and snapshot_offsets(tmp_path) == []
    if api == "append":
        info = log.append(records, producer_id=PID, producer_epoch=0, base_sequence=1,
                          timestamp=Clock()())
    else:
        info = log.append_batches(produced(records, seq=1))
    assert info.duplicate and info.first_offset == 1
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.segments[-1].size == 0 and log.log_end_offset == 2
    assert snapshot_offsets(tmp_path) == [2]
    log.close()


def test_a_retry_under_a_new_leader_epoch_assigns_the_epoch_as_kafka_does(tmp_path):
    """Kafka assigns the leader epoch of the validated batches before it finds the
    retry (``assignEpochStartOffset`` precedes ``analyzeAndValidateProducerState``)."""
    log = open_log(tmp_path)
    log.append_batches(produced([(b"k", b"v")]), leader_epoch=1)
    info = log.append_batches(produced([(b"k", b"v")]), leader_epoch=2)
    assert info.duplicate and log.log_end_offset == 1
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] \
        == [(1, 0), (2, 1)]
    log.close()
