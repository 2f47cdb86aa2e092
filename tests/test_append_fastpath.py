"""``Log.append``'s hot path (issue 31, the ``append`` row): the roll check, the write and
the index entries of every append read their fields in place instead of through a dozen
small calls. These tests pin what that path must still do, against a model of Kafka's
rules computed here from the segment files, not by the code under test:

- ``LogSegment.shouldRoll``: a new segment when the batch would pass ``segment.bytes``,
  when the segment has waited ``segment.ms`` (from its first batch's max timestamp), when
  the offset index is full or the time index has only its last slot left;
- ``LogSegment.append``: an offset-index entry (the batch's last offset, its start
  position) when more than ``index.interval.bytes`` were appended since the last one, with
  a time-index entry for the segment's max timestamp so far when it grew; on roll and
  close the time index gets the segment's max timestamp (``onBecomeInactiveSegment``);
- ``Log.append`` and ``Log.append_batches`` (the leader's validated path) of the same
  records give the same bytes in every file and the same ``LogAppendInfo``;
- every check that raised before still raises, before anything is written.

Random workloads: sizes, timestamps (rising, falling, equal), null keys and values,
compression, producer ids.
"""

from __future__ import annotations

import os
import random
import struct

import pytest
from _helpers import dir_files
from _logtools import Clock, open_log

from kafkastore.errors import (
    InvalidRecordError,
    InvalidTxnStateError,
    LogClosedError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from kafkastore.log_append import LogAppendInfo
from kafkastore.records import encode_batch, scan_batches

CODECS = ("none", "gzip", "lz4", "zstd", "snappy")


def _workload(seed: int):
    """``(records, timestamp, codec, producer)`` per append; producer None or
    ``(pid, epoch, base_sequence)``; plus the log config."""
    rng = random.Random(seed)
    config = dict(segment_bytes=rng.choice([2500, 4000, 9000, 1 << 20]),
                  index_interval_bytes=rng.choice([0, 1, 100, 700, 4096]),
                  segment_index_bytes=rng.choice([24, 40, 96, 10 << 20]),
                  segment_ms=rng.choice([50, 500, 7 * 86_400_000]),
                  flush_messages=rng.choice([1, 7, 1 << 62]))
    pid = rng.choice([None, 5])
    seq = 0
    ts = 1_700_000_000_000
    appends = []
    for _ in range(rng.randrange(1, 60)):
        records = []
        for _ in range(rng.randrange(1, 12)):
            key = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 20))
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 120))
            records.append((key, value))
        ts += rng.choice([-30, 0, 1, 17, 300])
        codec = rng.choice(CODECS) if rng.random() < 0.3 else "none"
        producer = None if pid is None else (pid, 0, seq)
        seq += len(records)
        appends.append((records, ts, codec, producer))
    return config, appends


def _append_each(log, appends, *, batches: bool):
    infos = []
    for records, ts, codec, producer in appends:
        pid, epoch, seq = producer or (-1, -1, -1)
        if batches:   # as a producer sends them, validated by the leader's path
            data = encode_batch(records, timestamp=ts, compression=codec, producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq)
            infos.append(log.append_batches(data))
        else:
            infos.append(log.append(records, timestamp=ts, compression=codec,
                                    producer_id=pid, producer_epoch=epoch,
                                    base_sequence=seq))
    return infos


def _files(directory) -> dict[str, bytes]:
    return dir_files(directory, (".log", ".index", ".timeindex", ".snapshot"))


def _model(files: dict[str, bytes], config: dict) -> tuple[list[int], dict[str, bytes]]:
    """Kafka's roll and index rules replayed over the batches the logs hold: the base
    offsets the segments must have, and the .index and .timeindex bytes of each."""
    batches = []
    for name in sorted(n for n in files if n.endswith(".log")):
        scan = scan_batches(files[name])
        assert scan.error is None
        batches += list(zip(scan.size.tolist(), scan.last_offset.tolist(),
                            scan.max_timestamp.tolist(), scan.base_offset.tolist()))
    max_offsets = config["segment_index_bytes"] // 8
    max_times = config["segment_index_bytes"] // 12
    bases, expected = [], {}
    seg = None

    def close(seg):
        if seg["max_ts"] > seg["last_ts"]:   # the entry written on roll and close
            seg["times"].append((seg["max_ts"], seg["offset_of_max"] - seg["base"]))
        stem = f"{seg['base']:020d}"
        expected[stem + ".index"] = b"".join(struct.pack(">ii", *e) for e in seg["offsets"])
        expected[stem + ".timeindex"] = b"".join(struct.pack(">qi", *e)
                                                 for e in seg["times"])

    for size, last, max_ts, base in batches:
        roll = seg is None or (
            seg["size"] > config["segment_bytes"] - size
            or (seg["size"] > 0 and max_ts - seg["first_ts"] > config["segment_ms"])
            or len(seg["offsets"]) >= max_offsets
            or len(seg["times"]) >= max_times - 1)
        if roll:
            if seg is not None:
                close(seg)
            seg = dict(base=base, size=0, since=0, offsets=[], times=[], first_ts=max_ts,
                       max_ts=-1, offset_of_max=base, last_ts=-1)
            bases.append(base)
        if max_ts > seg["max_ts"]:
            seg["max_ts"], seg["offset_of_max"] = max_ts, last
        if seg["since"] > config["index_interval_bytes"]:
            seg["offsets"].append((last - seg["base"], seg["size"]))
            if seg["max_ts"] > seg["last_ts"]:
                seg["times"].append((seg["max_ts"], seg["offset_of_max"] - seg["base"]))
                seg["last_ts"] = seg["max_ts"]
            seg["since"] = size
        else:
            seg["since"] += size
        seg["size"] += size
    close(seg)
    return bases, expected


@pytest.mark.parametrize("seed", range(40))
def test_append_follows_kafkas_roll_and_index_rules(tmp_path, seed):
    config, appends = _workload(seed)
    log = open_log(tmp_path / "a", Clock(), **config)
    infos = _append_each(log, appends, batches=False)
    log.close()
    files = _files(tmp_path / "a")
    bases, expected = _model(files, config)
    assert sorted(int(n[:20]) for n in files if n.endswith(".log")) == bases
    for name, data in expected.items():
        assert files[name] == data, name
    # offsets follow one another; what each append returned matches its batch
    assert [i.first_offset for i in infos] == \
        [0] + [i.last_offset + 1 for i in infos[:-1]]
    assert all(i.max_timestamp == ts for i, (_, ts, _, _) in zip(infos, appends))


@pytest.mark.parametrize("seed", range(40))
def test_append_and_append_batches_write_the_same_bytes(tmp_path, seed):
    config, appends = _workload(seed)
    clock = Clock()
    logs = [open_log(tmp_path / d, clock, **config) for d in ("a", "b")]
    info_a = _append_each(logs[0], appends, batches=False)
    info_b = _append_each(logs[1], appends, batches=True)
    for log in logs:
        log.close()
    assert info_a == info_b
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_a_reopened_log_rolls_on_segment_ms_from_its_first_batch(tmp_path):
    # the first batch's timestamp is read back from the file after a reopen
    log = open_log(tmp_path, Clock(), segment_ms=1000)
    log.append([(b"k", b"v")], timestamp=10_000)
    log.append([(b"k", b"v")], timestamp=10_500)
    log.close()
    log = open_log(tmp_path, Clock(), segment_ms=1000)
    log.append([(b"k", b"v")], timestamp=11_000)      # waited 1000: not more than it
    assert len(log.segments) == 1
    log.append([(b"k", b"v")], timestamp=11_001)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()


def test_a_deferred_index_check_runs_before_the_first_append(tmp_path):
    log = open_log(tmp_path, Clock(), index_interval_bytes=0)
    for i in range(5):
        log.append([(b"k", b"v" * 50)], timestamp=1000 + i)
    log.close()
    index = tmp_path / f"{0:020d}.index"
    good = index.read_bytes()
    assert len(good) == 4 * 8
    with open(index, "r+b") as f:
        f.write(b"\xff" * 8)    # a corrupt first entry: rebuilt before the append uses it
    log = open_log(tmp_path, Clock(), index_interval_bytes=0)
    log.append([(b"k", b"v" * 50)], timestamp=2000)
    log.append([(b"k", b"v" * 50)], timestamp=2001)
    log.close()
    # the rebuilt entries, then the second append's (a reopened segment counts its bytes
    # since the last entry from 0, as Kafka's LogSegment does)
    batch = os.path.getsize(tmp_path / f"{0:020d}.log") // 7   # seven batches alike
    assert index.read_bytes() == good + struct.pack(">ii", 6, 6 * batch)


def _end(log):
    return log.log_end_offset, [s.size for s in log.segments]


@pytest.mark.parametrize("case", ["max_message_bytes", "segment_bytes", "no_sequence",
                                  "sequence_gap", "closed"])
def test_every_check_still_raises_before_writing(tmp_path, case):
    log = open_log(tmp_path, Clock(), max_message_bytes=500, segment_bytes=800)
    log.append([(b"k", b"v")], producer_id=3, producer_epoch=0,
               base_sequence=0)
    before = _end(log)
    big = [(b"k", b"v" * 600)]
    if case == "max_message_bytes":
        with pytest.raises(RecordTooLargeError):
            log.append(big)
    elif case == "segment_bytes":
        log2 = open_log(tmp_path / "s", Clock(), max_message_bytes=5000, segment_bytes=600)
        with pytest.raises(RecordTooLargeError, match="segment size"):
            log2.append([(b"k", b"v" * 700)])
        assert log2.log_end_offset == 0
        log2.close()
    elif case == "no_sequence":
        with pytest.raises(InvalidRecordError):
            log.append([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=-1)
    elif case == "sequence_gap":
        with pytest.raises(OutOfOrderSequenceError):
            log.append([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=5)
    else:
        log.close()
        with pytest.raises(LogClosedError):
            log.append([(b"k", b"v")])
        return
    assert _end(log) == before
    log.close()


def test_compacted_topic_refuses_a_null_key_before_writing(tmp_path):
    log = open_log(tmp_path, Clock(), cleanup_policy="compact")
    with pytest.raises(InvalidRecordError):
        log.append([(None, b"v")])
    assert log.log_end_offset == 0
    log.close()


# -- an idempotent producer's batches (ProducerStateManager.in_sequence) -------------------

INT_MAX = (1 << 31) - 1


def _one_step(log, step, i, *, batches: bool):
    """Run one scripted step; its LogAppendInfo, or the type and text of its error."""
    try:
        if step[0] == "marker":
            _, pid, epoch, kind = step
            return log.append_end_txn_marker(pid, epoch, kind, timestamp=5000 + i)
        _, pid, epoch, seq, n, txn = step
        records = [(b"k%d" % j, b"v" * (i % 7)) for j in range(n)]
        if batches:
            return log.append_batches(encode_batch(
                records, timestamp=5000 + i, producer_id=pid, producer_epoch=epoch,
                base_sequence=seq, is_transactional=txn))
        return log.append(records, timestamp=5000 + i, producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    except Exception as exc:   # the same typed error from both paths
        return (type(exc), str(exc).replace(str(log.dir), "<dir>"))


def _drive_producers(log, seed: int):
    """A random script of producer batches run on ``log`` (``Log.append``), each step
    chosen from what the earlier ones did: mostly the next batch in sequence, with
    retries of recent batches, gaps, new and fenced epochs, transactions and their
    markers, and sequences that wrap past Integer.MAX_VALUE. The steps and results."""
    rng = random.Random(seed)
    state = {pid: dict(epoch=0, seq=rng.choice([0, INT_MAX - 7]), sent=[], txn=False)
             for pid in (11, 12)}
    steps, out = [], []
    for i in range(rng.randrange(20, 80)):
        pid = rng.choice((11, 12))
        st = state[pid]
        n = rng.randrange(1, 5)
        roll = rng.random()
        ok = None
        if roll < 0.1 and st["sent"]:
            step = ("data", pid, *rng.choice(st["sent"][-7:]))   # a retry
        elif roll < 0.14:
            step = ("data", pid, st["epoch"], st["seq"] + rng.choice([1, 5]), n, st["txn"])
        elif roll < 0.17:
            step = ("data", pid, st["epoch"] - 1, st["seq"], n, st["txn"])   # fenced
        elif roll < 0.2 and not st["txn"]:
            step = ("data", pid, st["epoch"] + 1, 0, n, False)   # a new epoch
            ok = dict(epoch=st["epoch"] + 1, seq=n)
        elif roll > 0.9 and st["txn"]:
            step = ("marker", pid, st["epoch"], rng.choice(["COMMIT", "ABORT"]))
            ok = dict(txn=False)
        else:
            txn = st["txn"] or roll > 0.85
            step = ("data", pid, st["epoch"], st["seq"], n, txn)
            ok = dict(seq=(st["seq"] + n) % (INT_MAX + 1), txn=txn)
        steps.append(step)
        out.append(_one_step(log, step, i, batches=False))
        if ok is not None and isinstance(out[-1], LogAppendInfo):
            if step[0] == "data":
                st["sent"].append(step[2:])
            st.update(ok)
    return steps, out


@pytest.mark.parametrize("seed", range(30))
def test_idempotent_appends_match_the_validated_path(tmp_path, seed):
    clock = Clock()
    logs = [open_log(tmp_path / d, clock, segment_bytes=1500) for d in ("a", "b")]
    steps, got_a = _drive_producers(logs[0], seed)
    got_b = [_one_step(logs[1], step, i, batches=True) for i, step in enumerate(steps)]
    assert got_a == got_b
    state_a, state_b = (log._producers.producers for log in logs)
    assert state_a == state_b
    assert logs[0].last_stable_offset == logs[1].last_stable_offset
    for log in logs:
        log.close()
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_the_next_batch_of_a_producer_takes_the_short_path(tmp_path):
    # what in_sequence must answer for, and what it must leave to analyze
    log = open_log(tmp_path, Clock())
    producers = log._producers
    assert producers.in_sequence(3, 0, 0, 0, 0, 1, False) is None      # unknown producer
    log.append([(b"k", b"v")] * 2, producer_id=3, producer_epoch=0, base_sequence=0)
    assert producers.in_sequence(3, 0, 2, 2, 3, 1, False) is not None  # next: short path
    assert producers.in_sequence(3, 0, 3, 2, 3, 1, False) is None      # a gap
    assert producers.in_sequence(3, 1, 2, 2, 3, 1, False) is None      # a new epoch
    assert producers.in_sequence(3, 0, 2, 2, 3, 1, True) is None       # transactional
    assert producers.in_sequence(3, 0, 0, 2, 3, 1, False) is None      # a retry
    log.append([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=2,
               is_transactional=True)
    assert producers.in_sequence(3, 0, 3, 3, 3, 1, False) is None      # inside a txn
    with pytest.raises(InvalidTxnStateError):
        log.append([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=3)
    log.close()
