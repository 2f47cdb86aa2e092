"""kafkastore dump-log of ``.txnindex`` and producer ``.snapshot`` files.

Kafka's ``DumpLogSegments.dumpTxnIndex`` prints one line per aborted transaction;
``dumpProducerIdSnapshot`` prints one line per producer of ``ProducerStateManager
.readSnapshot`` and, for a ``CorruptSnapshotException``, its message on stderr (the tool goes
on, exit code 0). The files are built here with struct and crc32c, independently of
kafkastore, and the expected lines are written out by hand from the values written; the
files a :class:`~kafkastore.log.Log` writes are checked against the offsets, producer ids,
epochs and sequences the test appended.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys

import crc32c
import pytest

from kafkastore.dump import DumpOptions, dump_files
from kafkastore.log import Log

TXN_ENTRY = struct.Struct(">hqqqq")
# producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
# currentTxnFirstOffset
SNAP_ENTRY = struct.Struct(">qhiqiqiq")
INT32_MAX = 2**31 - 1


def run(files, **options):
    """``(exit code, stdout, stderr)`` of one dump."""
    out, err = io.StringIO(), io.StringIO()
    rc = dump_files([str(f) for f in files], DumpOptions(**options), out, err)
    return rc, out.getvalue(), err.getvalue()


def run_json(files, **options):
    rc, out, err = run(files, json=True, **options)
    return rc, [json.loads(line) for line in out.splitlines()], err


def txn_entry(pid, first, last, lso, version=0) -> bytes:
    return TXN_ENTRY.pack(version, pid, first, last, lso)


def snapshot(entries, *, version=1, crc=None, count=None, extra=b"") -> bytes:
    """A producer snapshot by hand: version int16, CRC-32C (uint32) of everything after the
    CRC field, entry count int32, 46-byte entries."""
    body = struct.pack(">i", len(entries) if count is None else count)
    body += b"".join(SNAP_ENTRY.pack(*e) for e in entries) + extra
    return struct.pack(">hI", version, crc32c.crc32c(body) if crc is None else crc) + body


def first_sequence(last_seq: int, delta: int) -> int:
    """DefaultRecordBatch.decrementSequence."""
    return INT32_MAX - (delta - last_seq) + 1 if last_seq < delta else last_seq - delta


# (pid, epoch, lastSeq, lastOffset, offsetDelta, timestamp, coordinatorEpoch, txnFirst)
WITH_TXN = (42, 3, 9, 120, 4, 1_700_000_000_123, 7, 115)
NO_BATCH = (3, 0, -1, -1, 0, 555, -1, -1)
WRAPPED = (1000, 32767, 2, 77, 5, 999, 0, -1)
ZEROS = (5, 1, 0, 0, 0, -1, 2, 0)
HAND_ENTRIES = [WITH_TXN, NO_BATCH, WRAPPED, ZEROS]
HAND_LINES = [
    ("producerId: 42 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: "
     "OptionalLong[115] lastTimestamp: 1700000000123 firstSequence: 5 lastSequence: 9 "
     "lastOffset: 120 offsetDelta: 4 timestamp: 1700000000123"),
    ("producerId: 3 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
     "OptionalLong.empty lastTimestamp: 555 "),
    ("producerId: 1000 producerEpoch: 32767 coordinatorEpoch: 0 currentTxnFirstOffset: "
     "OptionalLong.empty lastTimestamp: 999 firstSequence: 2147483645 lastSequence: 2 "
     "lastOffset: 77 offsetDelta: 5 timestamp: 999"),
    ("producerId: 5 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: "
     "OptionalLong[0] lastTimestamp: -1 firstSequence: 0 lastSequence: 0 lastOffset: 0 "
     "offsetDelta: 0 timestamp: -1"),
]


def producer_json(file, e) -> dict:
    pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = e
    batch = None
    if last_offset >= 0:
        batch = {"firstSequence": first_sequence(last_seq, delta), "lastSequence": last_seq,
                 "lastOffset": last_offset, "offsetDelta": delta, "timestamp": ts}
    return {"type": "producer", "file": str(file), "producerId": pid, "producerEpoch": epoch,
            "coordinatorEpoch": coord,
            "currentTxnFirstOffset": txn_first if txn_first >= 0 else None,
            "lastTimestamp": ts, "batch": batch}


# -- .txnindex -------------------------------------------------------------------------------


def test_txn_index_lines(tmp_path):
    """dumpTxnIndex: ``version: 0 producerId: p firstOffset: f lastOffset: l
    lastStableOffset: lso`` per entry, in file order; a partial entry at the end is not one
    (Kafka's iterator needs 34 bytes)."""
    f = tmp_path / "00000000000000000100.txnindex"
    f.write_bytes(txn_entry(9, 95, 100, 101) + txn_entry(2**62, 98, 150, 120)
                  + txn_entry(-1, -1, 2**63 - 1, 0) + b"\x5a" * 10)
    rc, out, err = run([f])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {f}",
        "version: 0 producerId: 9 firstOffset: 95 lastOffset: 100 lastStableOffset: 101",
        ("version: 0 producerId: 4611686018427387904 firstOffset: 98 lastOffset: 150 "
         "lastStableOffset: 120"),
        ("version: 0 producerId: -1 firstOffset: -1 lastOffset: 9223372036854775807 "
         "lastStableOffset: 0"),
    ]
    assert out.endswith("\n")


def test_txn_index_json(tmp_path):
    """--json: one ``aborted_txn`` object per entry after the ``file`` object."""
    f = tmp_path / "00000000000000000000.txnindex"
    f.write_bytes(txn_entry(9, 1, 10, 8) + txn_entry(11, 8, 20, 21))
    rc, objs, err = run_json([f])
    assert (rc, err) == (0, "")
    assert objs == [
        {"type": "file", "file": str(f), "kind": "txn_index"},
        {"type": "aborted_txn", "file": str(f), "version": 0, "producerId": 9,
         "firstOffset": 1, "lastOffset": 10, "lastStableOffset": 8},
        {"type": "aborted_txn", "file": str(f), "version": 0, "producerId": 11,
         "firstOffset": 8, "lastOffset": 20, "lastStableOffset": 21},
    ]


def test_txn_index_torn_tail_only(tmp_path):
    """A .txnindex shorter than one entry has nothing to print."""
    f = tmp_path / "00000000000000000000.txnindex"
    f.write_bytes(b"\x00" * 33)
    assert run([f]) == (0, f"Dumping {f}\n", "")


def test_txn_index_bad_version_prints_no_entry(tmp_path):
    """Kafka's dumpTxnIndex loops over ``allAbortedTxns()``, a list read whole first: an
    entry whose version byte is above 0 throws before any line is printed, even for the
    good entries before it. kafkastore stops the file's dump with one error line and exit
    code 1 (its rule where Kafka stops with an exception)."""
    f = tmp_path / "00000000000000000000.txnindex"
    # int16 256: Kafka reads the version as the high byte, 1
    f.write_bytes(txn_entry(9, 1, 10, 11) + txn_entry(11, 12, 20, 21, version=256))
    rc, out, err = run([f])
    assert rc == 1
    assert out == f"Dumping {f}\n"
    assert err.startswith(f"kafkastore: {f}: ")
    assert "Unexpected aborted transaction version" in err
    assert len(err.splitlines()) == 1


# -- .snapshot written by hand -------------------------------------------------------------------


def test_snapshot_lines(tmp_path):
    """dumpProducerIdSnapshot: per producer, in file order, the ProducerStateEntry fields,
    currentTxnFirstOffset as Java's OptionalLong.toString and a trailing space; the batch
    part only when lastOffset >= 0, firstSequence wrapping as decrementSequence does."""
    f = tmp_path / "00000000000000000121.snapshot"
    f.write_bytes(snapshot(HAND_ENTRIES))
    rc, out, err = run([f])
    assert (rc, err) == (0, "")
    assert out == "".join(line + "\n" for line in [f"Dumping {f}"] + HAND_LINES)


def test_snapshot_json(tmp_path):
    """--json: one ``producer`` object per entry; ``currentTxnFirstOffset`` null for none,
    ``batch`` null when lastOffset is negative."""
    f = tmp_path / "00000000000000000121.snapshot"
    f.write_bytes(snapshot(HAND_ENTRIES))
    rc, objs, err = run_json([f])
    assert (rc, err) == (0, "")
    assert objs[0] == {"type": "file", "file": str(f), "kind": "producer_snapshot"}
    assert objs[1:] == [producer_json(f, e) for e in HAND_ENTRIES]
    assert objs[3]["batch"]["firstSequence"] == 2147483645
    assert objs[2]["batch"] is None and objs[2]["currentTxnFirstOffset"] is None


def test_empty_producer_table(tmp_path):
    """A valid snapshot with no producer prints nothing after the Dumping line."""
    f = tmp_path / "00000000000000000000.snapshot"
    f.write_bytes(snapshot([]))
    assert run([f]) == (0, f"Dumping {f}\n", "")


def test_bytes_after_the_entries_are_covered_by_the_crc(tmp_path):
    """Kafka's reader reads the declared entries and checks the CRC over the whole rest of
    the file: trailing bytes under a matching CRC are accepted, under a stale one not."""
    f = tmp_path / "00000000000000000000.snapshot"
    f.write_bytes(snapshot([WRAPPED], extra=b"\x01\x02\x03"))
    assert run([f]) == (0, f"Dumping {f}\n{HAND_LINES[2]}\n", "")
    good = snapshot([WRAPPED])
    f.write_bytes(good + b"\x01\x02\x03")
    stored = struct.unpack_from(">I", good, 2)[0]
    computed = crc32c.crc32c(good[6:] + b"\x01\x02\x03")
    assert run([f]) == (0, f"Dumping {f}\n",
                        (f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
                         f"Computed crc: {computed}\n"))


# -- corrupt snapshots ---------------------------------------------------------------------------


def corrupt_cases():
    """(name, file bytes, Kafka's CorruptSnapshotException message)."""
    good = snapshot([WITH_TXN, NO_BATCH])
    body = good[6:]
    flipped = bytearray(good)
    flipped[20] ^= 0x40
    one_of_two = snapshot([WITH_TXN], count=2)
    cases = [
        ("stored crc", snapshot([WITH_TXN], crc=0xDEADBEEF),
         ("Snapshot is corrupt (CRC is no longer valid). Stored crc: 3735928559. Computed "
          f"crc: {crc32c.crc32c(snapshot([WITH_TXN])[6:])}")),
        ("flipped bit", bytes(flipped),
         (f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc32c.crc32c(body)}. "
          f"Computed crc: {crc32c.crc32c(bytes(flipped[6:]))}")),
        ("empty", b"", "Snapshot failed schema validation: null"),
        ("one byte", b"\x00", "Snapshot failed schema validation: null"),
        ("version only", b"\x00\x01", "Snapshot failed schema validation: null"),
        ("no count", good[:6], "Snapshot failed schema validation: null"),
        # schema first: a torn entry is a schema failure, whatever its CRC says
        ("torn entry", good[:-10], "Snapshot failed schema validation: null"),
        ("missing entry", one_of_two, "Snapshot failed schema validation: null"),
        ("count above the bytes", snapshot([WITH_TXN], count=100),
         ("Snapshot failed schema validation: Tried to allocate a collection of size 100, "
          "but there are only 46 bytes remaining.")),
        ("negative count", snapshot([], count=-1),
         ("Snapshot failed schema validation: non-nullable field producerEntries was "
          "serialized as null")),
    ]
    for version in (0, 2, -1, 32767):
        cases.append((f"version {version}", snapshot([WITH_TXN], version=version),
                      ("Snapshot failed schema validation: Snapshot contained an unknown file "
                       f"version {version}")))
    return cases


CORRUPT = corrupt_cases()


@pytest.mark.parametrize("data,message", [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_corrupt_snapshot_text(tmp_path, data, message):
    """A CorruptSnapshotException is caught by dumpProducerIdSnapshot: its message on
    stderr, nothing more on stdout, and the tool exits 0."""
    f = tmp_path / "00000000000000000007.snapshot"
    f.write_bytes(data)
    assert run([f]) == (0, f"Dumping {f}\n", message + "\n")


@pytest.mark.parametrize("data,message", [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_corrupt_snapshot_json(tmp_path, data, message):
    """--json: a corrupt snapshot is a ``problem`` of kind ``corrupt_snapshot`` carrying
    Kafka's message; no ``producer`` object, exit code 0."""
    f = tmp_path / "00000000000000000007.snapshot"
    f.write_bytes(data)
    rc, objs, _ = run_json([f])
    assert rc == 0
    assert objs == [
        {"type": "file", "file": str(f), "kind": "producer_snapshot"},
        {"type": "problem", "file": str(f), "kind": "corrupt_snapshot", "message": message},
    ]


def test_corrupt_snapshot_does_not_stop_the_other_files(tmp_path):
    """After a corrupt snapshot Kafka dumps the next files; the message goes to stderr
    when it is met, exit code 0."""
    bad = tmp_path / "00000000000000000001.snapshot"
    bad.write_bytes(snapshot([WITH_TXN], version=2))
    good = tmp_path / "00000000000000000002.snapshot"
    good.write_bytes(snapshot([NO_BATCH]))
    txn = tmp_path / "00000000000000000000.txnindex"
    txn.write_bytes(txn_entry(3, 0, 1, 2))
    rc, out, err = run([bad, good, txn])
    assert rc == 0
    assert out.splitlines() == [
        f"Dumping {bad}", f"Dumping {good}", HAND_LINES[1], f"Dumping {txn}",
        "version: 0 producerId: 3 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"]
    assert err == ("Snapshot failed schema validation: Snapshot contained an unknown file "
                   "version 2\n")


# -- files written by a Log ----------------------------------------------------------------------


@pytest.fixture
def txn_log(tmp_path):
    """A log with an idempotent producer (7), a transaction of producer 9 aborted in a later
    segment than its first batch, and a transaction of producer 11 still open when 9's
    ABORT marker is written. Returns (directory, base offset of the marker's segment)."""
    d = tmp_path / "t-0"
    log = Log.open(str(d), {"segment.bytes": 2000}, time_ms=lambda: 1_700_000_000_000)
    assert log.append([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0,
                      timestamp=1000).first_offset == 0
    info = log.append([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], producer_id=9,
                      producer_epoch=3, base_sequence=0, is_transactional=True,
                      timestamp=2000)
    assert (info.first_offset, info.last_offset) == (1, 3)
    for i in range(4):   # 600-byte values: the segment rolls
        assert log.append([(b"k", b"x" * 600)], producer_id=7, producer_epoch=0,
                          base_sequence=1 + i, timestamp=3000 + i).first_offset == 4 + i
    info = log.append([(b"a", b"1"), (b"b", b"2")], producer_id=11, producer_epoch=2,
                      base_sequence=0, is_transactional=True, timestamp=5000)
    assert (info.first_offset, info.last_offset) == (8, 9)
    marker = log.append_end_txn_marker(9, 3, "ABORT", coordinator_epoch=4, timestamp=6000)
    assert marker.first_offset == 10
    assert log.last_stable_offset == 8 and log.log_end_offset == 11
    bases = [s.base_offset for s in log.segments]
    log.close()
    marker_base = max(b for b in bases if b <= 10)
    assert marker_base > 1   # the transaction began in an earlier segment
    return d, marker_base


LOG_SNAPSHOT_LINES = [
    ("producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
     "OptionalLong.empty lastTimestamp: 3003 firstSequence: 4 lastSequence: 4 lastOffset: 7 "
     "offsetDelta: 0 timestamp: 3003"),
    ("producerId: 9 producerEpoch: 3 coordinatorEpoch: 4 currentTxnFirstOffset: "
     "OptionalLong.empty lastTimestamp: 6000 firstSequence: 0 lastSequence: 2 lastOffset: 3 "
     "offsetDelta: 2 timestamp: 6000"),
    ("producerId: 11 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: "
     "OptionalLong[8] lastTimestamp: 5000 firstSequence: 0 lastSequence: 1 lastOffset: 9 "
     "offsetDelta: 1 timestamp: 5000"),
]
LOG_TXN_LINE = "version: 0 producerId: 9 firstOffset: 1 lastOffset: 10 lastStableOffset: 8"


def test_log_files_text(txn_log):
    """The ABORT marker writes the transaction (first offset 1, marker offset 10, LSO 8: the
    first offset of producer 11's open transaction) to the marker's segment's .txnindex
    only; the snapshot written at close (named after the log end offset, 11) holds each
    producer's last batch, epoch and coordinator epoch, and 11's open transaction."""
    d, marker_base = txn_log
    txn_files = sorted(n for n in os.listdir(d) if n.endswith(".txnindex"))
    assert txn_files == [f"{marker_base:020d}.txnindex"]
    txn = d / txn_files[0]
    snap = d / f"{11:020d}.snapshot"
    assert snap.exists()
    rc, out, err = run([txn, snap])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [f"Dumping {txn}", LOG_TXN_LINE, f"Dumping {snap}",
                                *LOG_SNAPSHOT_LINES]
    # the same bytes read by hand
    assert txn.read_bytes() == txn_entry(9, 1, 10, 8)
    data = snap.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 3, 10 + 3 * 46)
    assert crc == crc32c.crc32c(data[6:])
    assert SNAP_ENTRY.unpack_from(data, 10 + 2 * 46) == (11, 2, 1, 9, 1, 5000, -1, 8)


def test_log_files_json(txn_log):
    """--json of the same files: ``aborted_txn`` and ``producer`` objects with the values
    appended."""
    d, marker_base = txn_log
    txn = d / f"{marker_base:020d}.txnindex"
    snap = d / f"{11:020d}.snapshot"
    rc, objs, err = run_json([txn, snap])
    assert (rc, err) == (0, "")
    assert objs == [
        {"type": "file", "file": str(txn), "kind": "txn_index"},
        {"type": "aborted_txn", "file": str(txn), "version": 0, "producerId": 9,
         "firstOffset": 1, "lastOffset": 10, "lastStableOffset": 8},
        {"type": "file", "file": str(snap), "kind": "producer_snapshot"},
        producer_json(snap, (7, 0, 4, 7, 0, 3003, -1, -1)),
        producer_json(snap, (9, 3, 2, 3, 2, 6000, 4, -1)),
        producer_json(snap, (11, 2, 1, 9, 1, 5000, -1, 8)),
    ]
    assert objs[5]["currentTxnFirstOffset"] == 8
    assert objs[5]["batch"] == {"firstSequence": 0, "lastSequence": 1, "lastOffset": 9,
                                "offsetDelta": 1, "timestamp": 5000}


def test_log_without_aborts_has_no_txnindex(tmp_path):
    """A committed transaction writes no .txnindex entry (only ABORT markers do), and Kafka
    creates the file only on first append; the close snapshot shows the commit."""
    d = tmp_path / "t-0"
    log = Log.open(str(d), {"segment.bytes": 2000}, time_ms=lambda: 1_700_000_000_000)
    log.append([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0,
               timestamp=1000)
    log.append([(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0,
               is_transactional=True, timestamp=2000)
    log.append_end_txn_marker(9, 0, "COMMIT", timestamp=2500)
    log.close()
    assert not [n for n in os.listdir(d) if n.endswith(".txnindex")]
    snap = d / f"{3:020d}.snapshot"
    rc, out, err = run([snap])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {snap}",
        ("producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
         "OptionalLong.empty lastTimestamp: 1000 firstSequence: 0 lastSequence: 0 "
         "lastOffset: 0 offsetDelta: 0 timestamp: 1000"),
        ("producerId: 9 producerEpoch: 0 coordinatorEpoch: 0 currentTxnFirstOffset: "
         "OptionalLong.empty lastTimestamp: 2500 firstSequence: 0 lastSequence: 0 "
         "lastOffset: 1 offsetDelta: 0 timestamp: 2500"),
    ]


# -- the command line ----------------------------------------------------------------------------


def test_cli_dump_log(txn_log, tmp_path):
    """``kafkastore dump-log --files a,b,c``: Kafka's lines on stdout, the corrupt
    snapshot's message on stderr, exit code 0."""
    d, marker_base = txn_log
    txn = d / f"{marker_base:020d}.txnindex"
    snap = d / f"{11:020d}.snapshot"
    bad = tmp_path / "00000000000000000099.snapshot"
    bad.write_bytes(b"")
    proc = subprocess.run(
        [sys.executable, "-m", "kafkastore", "dump-log", "--files", f"{txn},{bad},{snap}"],
        check=False, capture_output=True, text=True, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"Dumping {txn}", LOG_TXN_LINE, f"Dumping {bad}",
                                        f"Dumping {snap}", *LOG_SNAPSHOT_LINES]
    assert proc.stderr == "Snapshot failed schema validation: null\n"


def test_cli_dump_log_json(txn_log):
    """``kafkastore dump-log --json``: the same objects as dump_files(json=True)."""
    d, marker_base = txn_log
    txn = d / f"{marker_base:020d}.txnindex"
    snap = d / f"{11:020d}.snapshot"
    proc = subprocess.run(
        [sys.executable, "-m", "kafkastore", "dump-log", "--json", "--files", f"{txn},{snap}"],
        check=False, capture_output=True, text=True, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr
    objs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert objs == run_json([txn, snap])[1]
    assert [o["type"] for o in objs] == ["file", "aborted_txn", "file", "producer",
                                        "producer", "producer"]
