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

from _logtools import Clock, open_log

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
        for i in range(200_000):   # (bounded by the deadline first)
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
