"""Producer state, leader epochs and LSO exactly as Kafka leaves them (issue 27, items 4,
9 and 11).

Each test pins one place where kafkastore did something other than Kafka:

* a follower's legacy (magic 0/1) append clears a non-empty leader-epoch cache and
  flushes the empty checkpoint (``UnifiedLog.append``: ``clearAndFlush``);
* ``truncate_fully_and_start_at(N)`` leaves no ``N.snapshot`` behind, not even at close
  (``UnifiedLog.truncateFullyAndStartAt`` -> ``rebuildProducerState``);
* ``leader-epoch-checkpoint`` exists (empty) from a log's first open, as Kafka's
  ``CheckpointFile`` constructor creates it.
"""

from __future__ import annotations

import os

import pytest
from _logtools import T0, Clock, open_log

from kafkastore.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME, EpochEntry
from kafkastore.log_view import ReadOnlyLog
from kafkastore.records import ControlRecordType, encode_batch, encode_control_batch


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
