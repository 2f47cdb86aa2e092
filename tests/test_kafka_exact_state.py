"""Producer state, leader epochs and LSO exactly as Kafka leaves them (issue 27, items 4,
8, 9, 10 and 11).

Each test pins one place where kafkastore did something other than Kafka:

* a follower's legacy (magic 0/1) append clears a non-empty leader-epoch cache and
  flushes the empty checkpoint (``UnifiedLog.append``: ``clearAndFlush``);
* ``ReadOnlyLog`` of a cleanly shut down log with no producer snapshot takes Kafka's
  (and ``Log.open``'s) "no snapshot + clean shutdown" path: no replay, LSO = LEO
  (``UnifiedLog.rebuildProducerState``);
* ``truncate_fully_and_start_at(N)`` leaves no ``N.snapshot`` behind, not even at close
  (``UnifiedLog.truncateFullyAndStartAt`` -> ``rebuildProducerState``);
* a snapshot's entry order is that of Java's ``HashMap`` whose table never shrinks: the
  expected order is computed here by a model of ``java.util.HashMap`` written for this
  test (a table of buckets, Java's hash spreading, resize by splitting buckets), not by
  kafkastore's code;
* ``leader-epoch-checkpoint`` exists (empty) from a log's first open, as Kafka's
  ``CheckpointFile`` constructor creates it.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import crc32c
import pytest
from _logtools import T0, Clock, open_log

from kafkastore.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME, EpochEntry
from kafkastore.log_dir import CLEAN_SHUTDOWN_FILE
from kafkastore.log_view import ReadOnlyLog, ReadOnlyLogDir
from kafkastore.producer_state import ProducerStateEntry, ProducerStateManager
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch
from kafkastore.topic import TopicPartition

DAY_MS = 86_400_000


def snapshots_in(path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".snapshot"))


# -- item 4: a follower's legacy append clears the epoch cache --------------------------


def test_a_follower_legacy_append_clears_the_epoch_cache_and_flushes_it(tmp_path):
    """Kafka's ``UnifiedLog.append``: a batch of magic < 2 (a message-format regression
    in a partial upgrade) clears a non-empty leader-epoch cache and writes the empty
    checkpoint at once (``clearAndFlush``), so the next leader election truncates by
    the high watermark."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock())
    log.append_batches(encode_batch([(b"k", b"a", T0)] * 2, partition_leader_epoch=3),
                       assign_offsets=False)                                # 0-1, epoch 3
    assert log.leader_epoch_cache.entries == (EpochEntry(3, 0),)
    log.append_batches(encode_batch([(b"k", b"b", T0)], magic=1, base_offset=2),
                       assign_offsets=False)                                # 2, magic 1
    assert log.leader_epoch_cache.entries == ()
    assert (path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b"0\n0\n"
    log.append_batches(encode_batch([(b"k", b"c", T0)], base_offset=3,
                                    partition_leader_epoch=4), assign_offsets=False)
    assert log.leader_epoch_cache.entries == (EpochEntry(4, 3),)   # v2 again: recorded
    log.close()
    again = open_log(path, Clock())
    assert again.leader_epoch_cache.entries == (EpochEntry(4, 3),)
    again.close()


def test_the_batches_of_one_follower_append_count_in_their_order(tmp_path):
    """Kafka walks the appended batches in order: an epoch assigned by a v2 batch is
    cleared by a legacy batch after it in the same append; a legacy batch before a v2
    one leaves the v2 batch's epoch."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock())
    v2 = encode_batch([(b"k", b"a", T0)], partition_leader_epoch=1)              # 0
    v0 = encode_batch([(b"k", b"b", T0)], magic=0, base_offset=1)               # 1
    log.append_batches(v2 + v0, assign_offsets=False)
    assert log.leader_epoch_cache.entries == ()
    assert (path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b"0\n0\n"
    v1 = encode_batch([(b"k", b"c", T0)], magic=1, base_offset=2)               # 2
    v2 = encode_batch([(b"k", b"d", T0)], base_offset=3, partition_leader_epoch=2)
    log.append_batches(v1 + v2, assign_offsets=False)
    assert log.leader_epoch_cache.entries == (EpochEntry(2, 3),)
    log.close()


def test_a_legacy_append_leaves_an_empty_cache_and_its_file_alone(tmp_path):
    """Kafka clears only a non-empty cache: with nothing to clear, nothing is written."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock())
    checkpoint = path / LEADER_EPOCH_CHECKPOINT_FILENAME
    before = os.stat(checkpoint).st_mtime_ns, checkpoint.read_bytes()
    log.append_batches(encode_batch([(b"k", b"a", T0)], magic=1), assign_offsets=False)
    assert (os.stat(checkpoint).st_mtime_ns, checkpoint.read_bytes()) == before == \
        (before[0], b"")
    log.close()


# -- item 8: ReadOnlyLog after a clean shutdown without snapshots ------------------------


def _log_with_an_open_transaction(path) -> int:
    """A plain batch at 0, a transaction of producer 7 opened at 1 and never ended, a
    clean close; then every producer snapshot removed (a directory from before producer
    state was kept). Returns the log end offset."""
    log = open_log(path, Clock())
    log.append([(b"k", b"plain", T0)])
    log.append([(b"k", b"txn", T0)] * 2, producer_id=7, producer_epoch=0, base_sequence=0,
               is_transactional=True)
    end = log.log_end_offset
    assert log.last_stable_offset == 1
    log.close()
    assert (path / CLEAN_SHUTDOWN_FILE).exists()
    for name in snapshots_in(path):
        os.unlink(path / name)
    return end


def test_read_only_log_takes_the_clean_shutdown_path_without_snapshots(tmp_path):
    """Kafka's ``rebuildProducerState``: with no snapshot after a clean shutdown nothing
    is replayed and the state is empty, so the LSO is the log end offset; ``Log.open``
    says so, and the read-only view of the same files must agree."""
    path = tmp_path / "t-0"
    end = _log_with_an_open_transaction(path)
    with ReadOnlyLog.open(str(path)) as view:
        assert (view.log_end_offset, view.last_stable_offset) == (end, end)
    log = open_log(path, Clock())   # (takes the marker)
    assert (log.log_end_offset, log.last_stable_offset) == (end, end)
    log.close()


def test_read_only_log_dir_takes_the_clean_shutdown_marker_of_the_log_dir(tmp_path):
    """A LogManager marks its log directory, not the partition directories."""
    end = _log_with_an_open_transaction(tmp_path / "t-0")
    os.rename(tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE, tmp_path / CLEAN_SHUTDOWN_FILE)
    with ReadOnlyLogDir.open(str(tmp_path)) as view:
        assert view.log(TopicPartition("t", 0)).last_stable_offset == end
    with ReadOnlyLog.open(str(tmp_path / "t-0"), had_clean_shutdown=True) as view:
        assert view.last_stable_offset == end


def test_without_a_clean_shutdown_both_replay_the_open_transaction(tmp_path):
    """The fast path needs the clean shutdown: after a crash both replay the batches and
    find the transaction open at 1."""
    path = tmp_path / "t-0"
    _log_with_an_open_transaction(path)
    os.unlink(path / CLEAN_SHUTDOWN_FILE)
    with ReadOnlyLog.open(str(path)) as view:
        assert view.last_stable_offset == 1
    with ReadOnlyLogDir.open(str(tmp_path)) as view:
        assert view.log(TopicPartition("t", 0)).last_stable_offset == 1
    log = open_log(path, Clock())
    assert log.last_stable_offset == 1
    log.close()


def test_a_stray_snapshot_counts_as_none_for_both(tmp_path):
    """``Log.open`` deletes a stray snapshot (at no segment base, below the last base)
    before it looks for one (``removeStraySnapshots``); the view ignores it alike, so
    after a clean shutdown both take the no-snapshot path."""
    path = tmp_path / "t-0"
    end = _log_with_an_open_transaction(path)
    log = open_log(path, Clock())
    log.roll()   # a segment at `end`: a stray below it is one Kafka deletes
    log.close()
    for name in snapshots_in(path):
        os.unlink(path / name)
    stray = path / f"{1:020d}.snapshot"
    shutil.copyfile(_snapshot_with_open_txn(tmp_path), stray)
    with ReadOnlyLog.open(str(path)) as view:
        assert view.last_stable_offset == end
    log = open_log(path, Clock())
    assert not stray.exists()
    assert log.last_stable_offset == end
    log.close()


def _snapshot_with_open_txn(tmp_path) -> str:
    """A snapshot file holding producer 7 with a transaction open at 0."""
    where = tmp_path / "snap"
    where.mkdir()
    producers = ProducerStateManager(str(where))
    producers.load_producer_entry(ProducerStateEntry(7, 0, -1, T0, 0, []))
    producers.update_map_end_offset(1)
    return producers.take_snapshot()


# -- item 9: no snapshot at the new start after a full truncation ------------------------


@pytest.mark.parametrize("new_offset", [0, 5, 40])
def test_truncate_fully_and_start_at_leaves_no_snapshot_at_the_new_start(tmp_path,
                                                                         new_offset):
    """Kafka: ``truncateFullyAndStartAt(N)`` deletes every snapshot and rebuilds the
    producer state at N, whose reload sets the last snapshot offset to N (the new log
    start offset); ``close`` takes a snapshot only at a map end offset past it, so no
    ``N.snapshot`` is written."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock(), segment_bytes=200)
    for seq in range(6):
        log.append([(b"k", b"v" * 40, T0)], producer_id=3, producer_epoch=0,
                   base_sequence=seq)
    assert snapshots_in(path)   # (rolls wrote some)
    log.truncate_fully_and_start_at(new_offset)
    assert snapshots_in(path) == []
    log.close()
    assert snapshots_in(path) == []
    again = open_log(path, Clock())
    assert (again.log_start_offset, again.log_end_offset) == (new_offset, new_offset)
    assert again.producer_state_manager.producers == {}
    again.close()
    # (the reopen found no snapshot after a clean shutdown: Kafka's upgrade path wrote
    # an empty one at the segment base and log end, N, unless N is 0)
    assert snapshots_in(path) == ([f"{new_offset:020d}.snapshot"] if new_offset else [])


# -- item 10: snapshot entry order of a map that shrank ----------------------------------


class JavaHashMapModel:
    """``java.util.HashMap<Long, V>`` as far as its iteration order goes: a table of
    buckets (lists in insertion order), 16 buckets on the first put, doubled when the size
    passes 3/4 of the table (each bucket's nodes split in order into the new table),
    never shrunk; ``clear`` empties the buckets and keeps the table."""

    def __init__(self) -> None:
        self.table: list[list[int]] = []
        self.size = 0

    @staticmethod
    def hash(key: int) -> int:
        bits = key & 0xFFFF_FFFF_FFFF_FFFF           # the long's two's complement
        h = (bits ^ (bits >> 32)) & 0xFFFF_FFFF      # Long.hashCode: (int)(v ^ (v >>> 32))
        return h ^ (h >> 16)                         # HashMap.hash: h ^ (h >>> 16)

    def put(self, key: int) -> None:
        if not self.table:
            self.table = [[] for _ in range(16)]
        bucket = self.table[self.hash(key) & (len(self.table) - 1)]
        if key in bucket:
            return                                   # a new value, same node
        bucket.append(key)
        self.size += 1
        if self.size > len(self.table) * 3 // 4:
            bigger: list[list[int]] = [[] for _ in range(len(self.table) * 2)]
            for old in self.table:
                for k in old:
                    bigger[self.hash(k) & (len(bigger) - 1)].append(k)
            self.table = bigger

    def remove(self, key: int) -> None:
        bucket = self.table[self.hash(key) & (len(self.table) - 1)]
        if key in bucket:
            bucket.remove(key)
            self.size -= 1

    def clear(self) -> None:
        for bucket in self.table:
            bucket.clear()
        self.size = 0

    def keys(self) -> list[int]:
        return [k for bucket in self.table for k in bucket]


_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


def expected_snapshot(entries: dict[int, tuple], order: list[int]) -> bytes:
    """Kafka's ProducerSnapshot v1 bytes, entries in ``order`` (written for the test)."""
    body = b"".join(_ENTRY.pack(pid, *entries[pid]) for pid in order)
    head = struct.pack(">hIi", 1, 0, len(order))
    crc = crc32c.crc32c(head[6:] + body)
    return struct.pack(">hIi", 1, crc, len(order)) + body


def snapshot_fields(data: bytes) -> dict[int, tuple]:
    _, _, count = _HEAD.unpack_from(data)
    out = {}
    for i in range(count):
        pid, *rest = _ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)
        out[pid] = tuple(rest)
    return out


def test_the_snapshot_order_keeps_the_largest_table_the_map_had(tmp_path):
    """13 producers grow Kafka's map to 32 buckets; after 11 expire, producers 16 and 1
    are in buckets 16 and 1 of that table, so Kafka writes 1 before 16, where a table
    sized for two (16 buckets: 16 in bucket 0) would put 16 first."""
    path = tmp_path / "t-0"
    clock = Clock()
    log = open_log(path, clock)
    model = JavaHashMapModel()
    kept, idle = [16, 1], list(range(100, 111))
    for pid in kept + idle:
        ts = T0 + 10 if pid in kept else T0
        log.append([(b"k", b"v", ts)], producer_id=pid, producer_epoch=0, base_sequence=0)
        model.put(pid)
    assert len(model.table) == 32
    clock.now = T0 + DAY_MS
    assert log.remove_expired_producers() == len(idle)
    for pid in idle:
        model.remove(pid)
    assert model.keys() == [1, 16]
    end = log.log_end_offset
    log.close()
    data = (path / f"{end:020d}.snapshot").read_bytes()
    assert data == expected_snapshot(snapshot_fields(data), model.keys())

    # a reopened log has a new map, sized for what it loads: 16 buckets again
    log = open_log(path, clock)
    reloaded = JavaHashMapModel()
    for pid in model.keys():          # loaded in the snapshot's order
        reloaded.put(pid)
    log.append([(b"k", b"v", T0 + 20)], producer_id=33, producer_epoch=0, base_sequence=0)
    reloaded.put(33)
    end = log.log_end_offset
    log.close()
    data = (path / f"{end:020d}.snapshot").read_bytes()
    assert reloaded.keys() == [16, 1, 33]
    assert data == expected_snapshot(snapshot_fields(data), reloaded.keys())


def test_a_cleared_map_keeps_its_table(tmp_path):
    """Kafka's map is one ``final HashMap`` emptied by ``clear()``: after a truncation
    reloads the state from an older snapshot, the table is still the largest one."""
    path = tmp_path / "t-0"
    clock = Clock()
    log = open_log(path, clock)
    model = JavaHashMapModel()
    log.append([(b"k", b"v", T0)], producer_id=16, producer_epoch=0, base_sequence=0)
    log.append([(b"k", b"v", T0)], producer_id=1, producer_epoch=0, base_sequence=0)
    model.put(16)
    model.put(1)
    log.roll()                                     # snapshot at 2: [16, 1]
    for pid in range(200, 212):
        log.append([(b"k", b"v", T0)], producer_id=pid, producer_epoch=0, base_sequence=0)
        model.put(pid)
    assert len(model.table) == 32
    log.truncate_to(2)                             # clear(), then the snapshot at 2
    model.clear()
    for pid in (16, 1):
        model.put(pid)
    assert model.keys() == [1, 16]
    log.append([(b"k", b"v", T0)], producer_id=1, producer_epoch=0, base_sequence=1)
    end = log.log_end_offset
    log.close()
    data = (path / f"{end:020d}.snapshot").read_bytes()
    assert data == expected_snapshot(snapshot_fields(data), model.keys())


def test_snapshot_order_follows_java_over_many_puts_and_expirations(tmp_path):
    """Seeded rounds of new producers (ids across the whole long range, negative ones
    too) and expirations: every snapshot's order is the model's."""
    rng = random.Random(27)
    producers = ProducerStateManager(str(tmp_path), producer_id_expiration_ms=10)
    model = JavaHashMapModel()
    now = 0
    offset = 0
    for _ in range(12):
        for _ in range(rng.randrange(1, 60)):
            pid = rng.choice([rng.randrange(0, 5000), rng.randrange(-2**63, 2**63)])
            entry = ProducerStateEntry(pid, 0, -1, now + rng.randrange(0, 40), None, [])
            producers.load_producer_entry(entry)
            model.put(pid)
        now += 30
        for pid, entry in list(producers.producers.items()):
            if now - entry.last_timestamp >= 10:
                model.remove(pid)
        producers.remove_expired_producers(now)
        offset += 1
        producers.update_map_end_offset(offset)
        data = Path(producers.take_snapshot()).read_bytes()
        assert data == expected_snapshot(snapshot_fields(data), model.keys())


# -- item 11: leader-epoch-checkpoint from the first open --------------------------------


def test_a_new_partition_directory_has_an_empty_epoch_checkpoint(tmp_path):
    """Kafka's ``UnifiedLog.create`` makes the ``LeaderEpochCheckpointFile``, whose
    ``CheckpointFile`` constructor creates the file (0 bytes) if absent."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock())
    assert (path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b""
    log.close()
    assert (path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b""


def test_an_existing_directory_without_one_gets_it_and_keeps_its_own(tmp_path):
    """A directory opened without the file gets it, empty (its epochs are unknown, as in
    Kafka); a directory with one keeps its bytes; a read-only view never creates it."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock())
    log.append([(b"k", b"v", T0)], partition_leader_epoch=2)
    log.close()
    checkpoint = path / LEADER_EPOCH_CHECKPOINT_FILENAME
    assert checkpoint.read_bytes() == b"0\n1\n2 0\n"
    log = open_log(path, Clock())
    log.close()
    assert checkpoint.read_bytes() == b"0\n1\n2 0\n"
    os.unlink(checkpoint)
    with ReadOnlyLog.open(str(path)) as view:
        assert view.log_end_offset == 1
    assert not checkpoint.exists()
    log = open_log(path, Clock())
    assert checkpoint.read_bytes() == b""
    assert log.leader_epoch_cache.entries == ()
    log.close()


def test_a_marker_after_a_full_truncation_starts_from_an_empty_checkpoint(tmp_path):
    """``truncateFullyAndStartAt`` flushes the cleared cache (``0\\n0\\n``) even when it
    held nothing; the next epoch is written after it."""
    path = tmp_path / "t-0"
    log = open_log(path, Clock())
    log.truncate_fully_and_start_at(4)
    assert (path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b"0\n0\n"
    log.append_batches(encode_control_batch(ControlRecordType.ABORT, producer_id=9,
                                            producer_epoch=0, timestamp=T0),
                       leader_epoch=1, origin="coordinator")
    assert (path / LEADER_EPOCH_CHECKPOINT_FILENAME).read_bytes() == b"0\n1\n1 4\n"
    log.close()
