"""Power-loss simulation (issue 8, reliability.md C2-C12, K1-K4): every crash image of a
recorded workload reopens to a prefix of what was appended that keeps everything flushed.

A workload (appends in every codec, small and multi-sector batches, flushes, rolls,
retention, compaction, clean and unclean reopens) runs once against a real directory
through :class:`_powerloss.Recorder`. The history is then replayed: before every
recorded operation, :meth:`_powerloss.DiskState.images` builds the directories a power
cut there may leave (unsynced data dropped, kept, partly kept; the write under way torn
at 512 B and 4 KiB; pending length extensions filled with zeros or garbage; pending
directory changes kept as a prefix). Each distinct image is opened by a new
:class:`Log`, unclean, with recovery point 0 and with the acknowledged flush point as a
checkpoint would give it, and must:

* open without error, and parse to the end of every ``.log`` file (nothing corrupt left);
* return only records that were appended, each at its offset, byte for byte, with
  offsets increasing and no hole (compaction: holes only where a later record of the
  same key is kept);
* keep every record below the acknowledged flush point, at or above the highest log
  start offset retention had asked for (compaction: every key's latest such record);
* have its end offset at or above the acknowledged one, and take the next append there.

The transactional workload adds two transactional producers (commits and aborts, left
open across reopens and crashes) and an idempotent one; each image must also give, with
read_committed, no record of a transaction that was aborted or whose marker the image
lacks, every record of a transaction whose COMMIT marker is below the acknowledged
point, and the last stable offset the image's own markers imply (so the ``.snapshot``
files and the ``.txnindex`` a recovery rebuilds agree with the log).

The expected records come from the workload's own record of what each append returned,
never from reading the log under test.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest
from _logtools import Clock, NoSyncFS, Rec, disk_records, installed, open_log, read_all
from _powerloss import (
    Recorder,
    crash_states,
    digest,
    live_image,
    read_directory,
    write_directory,
)
from _reliability import tiered

from kafkastore.cleaner import CleanerConfig, clean

CFG = dict(segment_bytes=16384, index_interval_bytes=150, segment_index_bytes=480)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KEYS = 6   # the compacting workload's key space


class Workload:
    """A seeded sequence of log operations through a :class:`Recorder`; ``history`` maps
    every offset an append returned to its record."""

    def __init__(self, directory, recorder: Recorder, seed: int, *, compact: bool,
                 preallocate: bool, transactional: bool = False) -> None:
        self.dir = str(directory)
        self.rec = recorder
        self.rng = random.Random(seed)
        self.compact = compact
        self.transactional = transactional
        #: every transaction: [producer id, first offset, marker offset or None, aborted]
        self.txns: list[list] = []
        self._open: dict[int, list] = {}
        self._seq: dict[int, int] = {}
        self.cfg = dict(CFG, preallocate=preallocate,
                        cleanup_policy="compact" if compact else "delete")
        self.clock = Clock()
        self.history: dict[int, Rec] = {}
        self.txn_of: dict[int, list] = {}   # offset -> its transaction
        self.log = open_log(self.dir, self.clock, **self.cfg)

    def _records(self):
        rng, out = self.rng, []
        for _ in range(rng.randint(1, 4)):
            self.clock.sleep(1)
            key = b"k%d" % (rng.randrange(KEYS) if self.compact else self.clock.now)
            size = rng.choice((0, 7, 40, 90)) if rng.random() < 0.85 else rng.randint(600, 5000)
            out.append((key, rng.randbytes(size), self.clock.now))
        return out

    def step(self) -> None:
        rng, log = self.rng, self.log
        kinds = ["append", "flush", "roll", "retention", "reopen", "crash-reopen"]
        weights = [12, 4, 1, 1, 1, 1]
        if self.compact:
            kinds.append("compact")
            weights.append(2)
        if self.transactional:
            kinds += ["txn-append", "marker", "idempotent"]
            weights += [6, 3, 2]
        kind = rng.choices(kinds, weights)[0]
        if kind in ("txn-append", "idempotent"):
            pid = rng.choice((1, 2)) if kind == "txn-append" else 3
            recs = self._records()
            seq = self._seq.get(pid, 0)
            info = log.append(recs, compression=rng.choice(CODECS), producer_id=pid,
                              producer_epoch=0, base_sequence=seq,
                              is_transactional=kind == "txn-append")
            self._seq[pid] = seq + len(recs)
            for i, (k, v, ts) in enumerate(recs):
                self.history[info.first_offset + i] = Rec(info.first_offset + i, k, v, ts)
            if kind == "txn-append":
                txn = self._open.get(pid)
                if txn is None:
                    txn = self._open[pid] = [pid, info.first_offset, None, False]
                    self.txns.append(txn)
                self.txn_of.update({info.first_offset + i: txn for i in range(len(recs))})
        elif kind == "marker":
            if self._open:
                pid = rng.choice(sorted(self._open))
                abort = rng.random() < 0.5
                info = log.append_end_txn_marker(pid, 0, "ABORT" if abort else "COMMIT")
                txn = self._open.pop(pid)
                txn[2], txn[3] = info.first_offset, abort
        elif kind == "append":
            recs = self._records()
            info = log.append(recs, compression=rng.choice(CODECS))
            for i, (k, v, ts) in enumerate(recs):
                self.history[info.first_offset + i] = Rec(info.first_offset + i, k, v, ts)
        elif kind == "flush":
            end = log.log_end_offset
            log.flush()
            self.rec.mark("ack", end)
        elif kind == "roll":
            log.roll()
        elif kind == "retention":
            segments = log.segments
            if len(segments) > 2:
                drop = segments[:rng.randint(1, len(segments) - 2)]
                self.rec.mark("start", segments[len(drop)].base_offset)
                log.delete_segments(drop)
                log.delete_pending_segments(force=True)
        elif kind == "compact":
            clean(log, config=CleanerConfig({"log.cleaner.dedupe.buffer.size": 1 << 20}))
        elif kind == "reopen":
            log.close()
            self.rec.mark("ack", log.log_end_offset)   # close flushes everything
            self.log = open_log(self.dir, self.clock, **self.cfg)
        else:  # the process dies: the page cache keeps every write
            log.close_handlers()
            self.log = open_log(self.dir, self.clock, **self.cfg)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.log.close()
        self.rec.mark("ack", self.log.log_end_offset)


def check_committed(log, got: list[Rec], txns: list[list], txn_of: dict, acked: int,
                    where: str) -> None:
    """The read_committed oracle of the transactional workload (see the module). What
    the image holds decides: a transaction is decided when its marker is in the image
    (a crash may have cut the marker of an unacknowledged one)."""
    end, start = log.log_end_offset, log.log_start_offset
    markers, data = set(), {r.offset for r in got}
    offset = start
    while offset < end:
        batches = list(log.read(offset, 1 << 20).batches())
        if not batches:
            break
        markers.update(b.base_offset for b in batches if b.is_control)
        offset = batches[-1].last_offset + 1
    open_firsts = [t[1] for t in txns if t[1] in data and t[2] not in markers]
    # a transaction begun below the log start offset with its marker missing: whether the
    # state still knows it depends on which snapshots survived (as in Kafka)
    unknowable = any(t[1] < start and t[2] not in markers for t in txns)
    want_lso = min(open_firsts, default=end)
    lso = log.last_stable_offset
    assert lso == want_lso or (unknowable and lso <= want_lso), \
        f"last stable offset {lso}, the markers say {want_lso} ({where})"
    seen = set()
    offset = start
    while offset < lso:
        sl = log.read(offset, 1 << 20, isolation_level="read_committed")
        batches = list(sl.batches())
        if not batches:
            break
        seen.update(r.offset for r in sl.records() if r.offset >= offset)
        offset = batches[-1].last_offset + 1
    for o in seen:
        txn = txn_of.get(o)
        assert txn is None or (txn[2] in markers and not txn[3]), \
            f"record {o} of an aborted or undecided transaction {txn} is visible ({where})"
    for o, txn in txn_of.items():
        # (a committed record past an older undecided transaction waits behind the LSO)
        if txn[2] is not None and txn[2] < acked and not txn[3] and o in data and o < lso:
            assert o in seen, f"committed record {o} not visible to read_committed ({where})"


def check_image(path, history: dict[int, Rec], acked: int, start: int, rp: int,
                compact: bool, cfg: dict, label: str, txns=None, txn_of=None) -> int:
    """Open the image at ``path`` and check the oracle; returns the acknowledged records
    it verified."""
    log = open_log(path, Clock(), recovery_point=rp, **cfg)
    try:
        got = read_all(log)
        end = log.log_end_offset
        where = f"{label}, recovery point {rp}, acked {acked}, start {start}, end {end}"
        if txns is not None:
            check_committed(log, got, txns, txn_of, acked, where)
        offsets = [r.offset for r in got]
        assert offsets == sorted(set(offsets)), f"offsets out of order ({where})"
        for r in got:
            assert history.get(r.offset) == r, f"record {r.offset} is not as appended ({where})"
        assert end >= acked, f"the end offset went back below the flushed {acked} ({where})"
        present = set(offsets)
        wanted = [o for o in history if start <= o < acked]
        if compact:
            latest = {}
            for o in sorted(wanted):
                latest[history[o].key] = o
            missing = [o for o in latest.values() if o not in present and
                       not any(history[p].key == history[o].key for p in present if p > o)]
        else:
            missing = [o for o in wanted if o not in present]
            if got:   # (a transaction marker's offset holds no data record)
                markers = {t[2] for t in txns or () if t[2] is not None}
                assert offsets == [o for o in range(offsets[0], offsets[-1] + 1)
                                   if o not in markers], f"a hole ({where})"
        assert not missing, f"flushed records lost: {missing[:10]} ({where})"
        verified = sum(1 for o in wanted if o in present)
        # the next append lands at the end offset: offsets never go backwards
        info = log.append([(b"after", b"crash", 0)])
        assert info.first_offset == end, where
    finally:
        log.close()
    assert disk_records(path)[:len(got)] == got
    return verified


WORKLOADS = [  # (seed, compact, preallocate, steps, transactional)
    (1, False, False, 70, False),
    (2, False, True, 50, False),
    (3, True, False, 60, False),
    (4, False, False, 70, True),
]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed,compact,preallocate,steps,transactional",
                         tiered(WORKLOADS, [(s, c, p, 200, t) for s in range(10, 110)
                                            for c, p, t in ((False, False, False),
                                                            (False, True, False),
                                                            (True, False, False),
                                                            (False, False, True))][:100]),
                         ids=lambda v: str(v))
def test_every_crash_image_of_a_workload(tmp_path, figures, seed, compact, preallocate,
                                         steps, transactional):
    live = tmp_path / "live"
    recorder = Recorder(live)
    os.makedirs(live)
    with installed(recorder):
        work = Workload(live, recorder, seed, compact=compact, preallocate=preallocate,
                        transactional=transactional)
        work.run(steps)
        recorder.catch_up()
    ops = recorder.ops
    assert sum(op.kind == "ack" for op in ops) > 3
    if transactional:   # the workload did what the oracle needs
        assert {t[3] for t in work.txns if t[2] is not None} == {True, False}
    rng = random.Random(seed)
    with installed(NoSyncFS()):
        images, points, verified = _check_all_images(tmp_path, ops, work, rng, live, compact)
    figures.add("power-loss crash points", points)
    figures.add("power-loss crash images checked", images)
    figures.add("flushed records verified in crash images", verified)


def _check_all_images(tmp_path, ops, work, rng, live, compact):
    seen: set = set()
    images = points = verified = 0
    for state in crash_states(ops):
        points += 1
        if state.step == len(ops):
            # the replay's view of the end equals the real directory: the recorder saw
            # every change (a harness that missed one would test nothing)
            assert live_image(state) == read_directory(live)
        for label, files in state.images(rng):
            for rp in sorted({0, state.acked}):
                key = (digest(files), rp, state.acked, state.start)
                if key in seen:
                    continue
                seen.add(key)
                path = tmp_path / f"img{len(seen)}"
                write_directory(path, files)
                verified += check_image(path, work.history, state.acked, state.start, rp,
                                        compact, work.cfg, f"step {state.step} {label}",
                                        work.txns if work.transactional else None,
                                        work.txn_of)
                images += 1
                shutil.rmtree(path)
    return images, points, verified


def test_the_oracle_catches_a_lost_flushed_record(tmp_path):
    """The harness is not vacuous: an image that lost a flushed batch (one truncated
    ``.log``) fails the oracle."""
    live = tmp_path / "live"
    recorder = Recorder(live)
    os.makedirs(live)
    with installed(recorder):
        work = Workload(live, recorder, 5, compact=False, preallocate=False)
        for _ in range(30):
            work.step()
        work.log.flush()
        recorder.mark("ack", work.log.log_end_offset)
        work.log.close()
    files = read_directory(live)
    last = max(n for n in files if n.endswith(".log") and files[n])
    files[last] = files[last][:len(files[last]) // 2]
    write_directory(tmp_path / "lossy", files)
    with pytest.raises(AssertionError, match="flushed records lost|went back"):
        check_image(tmp_path / "lossy", work.history, work.log.log_end_offset, 0, 0, False,
                    work.cfg, "lossy")


def test_the_replay_matches_the_directory_at_every_flush(tmp_path):
    """The recorder's history, replayed, gives the directory's real bytes at every
    acknowledged flush (index files written through maps included)."""
    live = tmp_path / "live"
    recorder = Recorder(live)
    os.makedirs(live)
    snapshots = {}
    with installed(recorder):
        work = Workload(live, recorder, 7, compact=True, preallocate=False)
        for _ in range(40):
            work.step()
            if recorder.ops and recorder.ops[-1].kind == "ack":
                recorder.catch_up()
                snapshots[len(recorder.ops)] = read_directory(live)
        work.log.close()
    assert len(snapshots) > 3
    for state in crash_states(recorder.ops):
        if state.step in snapshots:
            assert live_image(state) == snapshots[state.step], state.step
