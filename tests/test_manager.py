"""kafkastore.manager.LogManager: log directories, checkpoints, the clean-shutdown marker,
deletion, per-topic configuration, the scheduler, and readers racing retention.

Most tests run with ``background=False`` and drive the scheduler by hand with
``run_scheduled_tasks(now)`` on a fake clock (kafka-storage.md §1 for the directory
layout and the checkpoint text of §1.6, §5.10 for loading, §6 for retention). Crashes are
modelled by abandoning a manager without closing it (``_abandon`` releases its descriptors
and locks and writes nothing) or by copying its directories as a crash would leave them
(``crash_image``).
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import traceback

import pytest
from _logtools import T0, Clock, FaultFS, NoSyncFS, crash_image, installed, read_all

import kafkastore
from kafkastore import manager as manager_mod
from kafkastore.checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE
from kafkastore.config import ConfigError
from kafkastore.errors import (
    InvalidPartitionDirError,
    InvalidTopicError,
    KafkaStoreError,
    LogDirectoryLockedError,
    OffsetOutOfRangeError,
    UnsafePathError,
)
from kafkastore.log import Log
from kafkastore.log_dir import CLEAN_SHUTDOWN_FILE, MetaProperties
from kafkastore.manager import LogManager, ManagerConfig
from kafkastore.records import iter_batches
from kafkastore.topic import TopicPartition

# Where the kafkastore under test comes from (the installed wheel in CI, the source tree
# in development): child processes must import the same one.
RP = RECOVERY_POINT_CHECKPOINT_FILE
LSO = LOG_START_OFFSET_CHECKPOINT_FILE
TASKS = ("kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint",
         "kafka-log-start-offset-checkpoint", "kafka-delete-logs", "kafka-log-cleaner-thread-0")


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def clock():
    return Clock()


def manager(dirs, clock, config=None, **kw) -> LogManager:
    kw.setdefault("background", False)
    return LogManager(dirs, config, time_ms=clock, **kw)


def fill(log: Log, clock: Clock, n: int, tag: str = "v", per_batch: int = 1) -> list:
    """Append ``n`` records (``per_batch`` to a batch); returns ``[(offset, key, value)]``."""
    out = []
    for i in range(0, n, per_batch):
        recs = [(f"k{log.log_end_offset + j}".encode(), f"{tag}{i + j}".encode())
                for j in range(min(per_batch, n - i))]
        info = log.append(recs, timestamp=clock.now)
        out.extend((info.first_offset + j, k, v) for j, (k, v) in enumerate(recs))
    return out


def contents(log: Log) -> list:
    return [(r.offset, r.key, r.value) for r in read_all(log)]


def checkpoint_text(entries) -> bytes:
    """Kafka's CheckpointFile text (§1.6): version 0, the count, one line an entry."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for t, p, o in entries]
    return "".join(line + "\n" for line in lines).encode()


def read_checkpoint(path) -> tuple[list[str], set[str]]:
    """(the two header lines, the set of entry lines): Kafka writes map order."""
    with open(path, "rb") as f:
        text = f.read().decode()
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    return lines[:2], set(lines[2:])


class OpenSpy:
    """Record the keyword arguments of every ``Log.open`` the manager makes."""

    def __init__(self, monkeypatch):
        self.calls = []
        real = Log.open.__func__

        def spy(cls, path, *args, **kw):
            self.calls.append((os.path.basename(path), kw))
            return real(cls, path, *args, **kw)

        monkeypatch.setattr(Log, "open", classmethod(spy))

    def by_name(self):
        return {name: kw for name, kw in self.calls}


def copy_as_crash(src, dst, fs, mode="all"):
    """Copy log directory ``src`` to ``dst`` as a power cut would leave it: every partition
    directory through ``crash_image`` (unsynced bytes lost), the other files as they are."""
    os.makedirs(dst)
    rng = random.Random(0)
    for entry in os.scandir(src):
        if entry.is_dir():
            crash_image(entry.path, os.path.join(dst, entry.name), fs, rng, mode)
        elif entry.name != ".lock":
            shutil.copy2(entry.path, os.path.join(dst, entry.name))


# -- create, get, reopen ---------------------------------------------------------------------


def test_create_get_logs_and_reopen_with_records_intact(tmp_path, clock):
    d = tmp_path / "d"
    m = manager(d, clock)
    a0 = m.get_or_create("a", 0)
    assert m.get_or_create("a", 0) is a0
    assert m.get("a", 1) is None
    written = {("a", 0): fill(a0, clock, 7), ("a", 1): fill(m.get_or_create("a", 1), clock, 3),
               ("b.c_d", 2): fill(m.get_or_create("b.c_d", 2), clock, 5, per_batch=2)}
    assert set(m.logs()) == {TopicPartition(*k) for k in written}
    assert sorted(os.listdir(d)) == [".lock", "a-0", "a-1", "b.c_d-2"]
    m.close()
    assert m.closed

    m = manager(d, clock)
    assert set(m.logs()) == {TopicPartition(*k) for k in written}
    for (topic, p), recs in written.items():
        log = m.get(topic, p)
        assert contents(log) == recs
        assert log.log_end_offset == len(recs)
    # appends continue where the log ended
    assert fill(m.get("a", 0), clock, 1)[0][0] == 7
    m.close()


@pytest.mark.parametrize("topic, partition, error", [
    ("bad/topic", 0, KafkaStoreError), ("..", 0, KafkaStoreError), ("a" * 250, 0, KafkaStoreError),
    ("ok", -1, ValueError), ("ok", True, ValueError), ("ok", "0", ValueError),
    ("__cluster_metadata", 0, InvalidTopicError)])
def test_get_or_create_refuses_bad_names(tmp_path, clock, topic, partition, error):
    with manager(tmp_path, clock) as m:
        with pytest.raises(error):
            m.get_or_create(topic, partition)
        assert m.logs() == {}
    assert sorted(os.listdir(tmp_path)) == [".kafka_cleanshutdown", ".lock", LSO, RP]


# -- checkpoints and the clean-shutdown marker -------------------------------------------------


def test_checkpoints_are_kafka_text_and_round_trip(tmp_path, monkeypatch, clock):
    d = tmp_path / "d"
    m = manager(d, clock, {"segment.bytes": 200})
    only = m.get_or_create("only", 0)
    fill(only, clock, 4)
    m.close()
    # one entry: the whole file is predictable byte for byte
    assert (d / RP).read_bytes() == checkpoint_text([("only", 0, 4)])
    assert (d / LSO).read_bytes() == checkpoint_text([])

    m = manager(d, clock, {"segment.bytes": 200})
    t0, t1 = m.get("only", 0), m.get_or_create("t", 1)
    fill(t0, clock, 20)
    fill(t1, clock, 3)
    assert len(t0.segments) > 2
    first_base = t0.segments[1].base_offset
    t0.delete_records(first_base + 1)   # above the first segment's base: checkpointed
    t1.delete_records(0)                # not moved: not checkpointed
    m.close()
    header, lines = read_checkpoint(d / RP)
    assert header == ["0", "2"]
    assert lines == {"only 0 24", "t 1 3"}
    assert (d / LSO).read_bytes() == checkpoint_text([("only", 0, first_base + 1)])

    spy = OpenSpy(monkeypatch)
    m = manager(d, clock, {"segment.bytes": 200})
    kw = spy.by_name()
    assert kw["only-0"]["recovery_point"] == 24 and kw["t-1"]["recovery_point"] == 3
    assert kw["only-0"]["log_start_offset"] == first_base + 1
    assert kw["t-1"]["log_start_offset"] == 0
    assert kw["only-0"]["had_clean_shutdown"] is True
    assert m.get("only", 0).log_start_offset == first_base + 1
    with pytest.raises(OffsetOutOfRangeError):
        m.get("only", 0).read(first_base, 100)
    m.close()


def test_periodic_checkpoint_feeds_recovery_after_a_crash(tmp_path, monkeypatch, clock):
    """The recovery point written by the scheduler is the one the next (unclean) open uses."""
    d = tmp_path / "d"
    m = manager(d, clock, manager_config={"log.flush.offset.checkpoint.interval.ms": 1000})
    log = m.get_or_create("t", 0)
    fill(log, clock, 5)
    log.flush()
    assert m.run_scheduled_tasks(T0 + 1000) == ["kafka-recovery-point-checkpoint",
                                                "kafka-delete-logs"]
    assert (d / RP).read_bytes() == checkpoint_text([("t", 0, 5)])
    fill(log, clock, 3)
    m._abandon()   # crash: no close, no marker, the checkpoint says 5
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    spy = OpenSpy(monkeypatch)
    m = manager(d, clock)
    assert spy.by_name()["t-0"] == dict(recovery_point=5, log_start_offset=0,
                                        had_clean_shutdown=False, time_ms=clock,
                                        producer_id_expiration_ms=86_400_000)
    assert m.get("t", 0).log_end_offset == 8   # nothing was lost by the page cache here
    m.close()


def test_clean_shutdown_marker_written_on_close_and_removed_on_open(tmp_path, monkeypatch,
                                                                      clock):
    d = tmp_path / "d"
    m = manager(d, clock)
    fill(m.get_or_create("t", 0), clock, 2)
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    m.close()
    assert (d / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":0}'
    spy = OpenSpy(monkeypatch)
    m = manager(d, clock)
    assert spy.by_name()["t-0"]["had_clean_shutdown"] is True
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()   # a crash from now on is unclean
    m._abandon()
    spy.calls.clear()
    m = manager(d, clock)
    assert spy.by_name()["t-0"]["had_clean_shutdown"] is False
    m.close()


def test_crash_loses_nothing_flushed(tmp_path, monkeypatch, clock):
    """A power cut after flushes: the next open recovers (unclean) and keeps every
    flushed record; of the rest it may keep a prefix (rolls flush), never a hole."""
    d = tmp_path / "d"
    with installed(FaultFS()) as fs:
        m = manager(d, clock, {"segment.bytes": 300})
        a, b = m.get_or_create("a", 0), m.get_or_create("b", 0)
        kept_a = fill(a, clock, 12)
        a.flush()
        kept_b = fill(b, clock, 4)
        b.flush()
        all_a = kept_a + fill(a, clock, 5, tag="lost")   # never flushed (but rolls do)
        all_b = kept_b + fill(b, clock, 2, tag="lost")
        m.run_scheduled_tasks(T0 + 60_000)   # both checkpoints
        copy_as_crash(d, tmp_path / "crashed", fs, mode="all")
        m._abandon()
    spy = OpenSpy(monkeypatch)
    m = manager(tmp_path / "crashed", clock, {"segment.bytes": 300})
    assert {kw["had_clean_shutdown"] for _, kw in spy.calls} == {False}
    got_a, got_b = contents(m.get("a", 0)), contents(m.get("b", 0))
    assert got_b == kept_b   # no roll in b: exactly what was flushed
    assert len(got_a) >= len(kept_a) and got_a == all_a[:len(got_a)]
    assert len(got_a) < len(all_a)   # the active segment's unflushed tail was lost
    m.close()


def test_crash_keeping_unflushed_bytes_keeps_them(tmp_path, clock):
    d = tmp_path / "d"
    with installed(FaultFS()) as fs:
        m = manager(d, clock, {"segment.bytes": 300})
        a = m.get_or_create("a", 0)
        recs = fill(a, clock, 15)
        copy_as_crash(d, tmp_path / "crashed", fs, mode="none")
        m._abandon()
    with manager(tmp_path / "crashed", clock) as m:
        assert contents(m.get("a", 0)) == recs


def test_malformed_recovery_point_checkpoint_means_full_recovery(tmp_path, monkeypatch, clock,
                                                                  caplog):
    d = tmp_path / "d"
    m = manager(d, clock)
    recs = fill(m.get_or_create("t", 0), clock, 6)
    m.close()
    seg = d / "t-0" / "00000000000000000000.log"
    good = seg.stat().st_size
    with open(seg, "ab") as f:   # junk a clean shutdown would never leave: recovery cuts it
        f.write(b"\x00" * 40)
    (d / RP).write_bytes(b"0\n2\nt 0 6\n")   # says 2 entries, has 1
    spy = OpenSpy(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="kafkastore.manager"):
        m = manager(d, clock)
    assert spy.by_name()["t-0"]["had_clean_shutdown"] is False
    assert spy.by_name()["t-0"]["recovery_point"] == 0
    assert any(str(d / RP) in r.getMessage() for r in caplog.records)
    assert seg.stat().st_size == good
    assert contents(m.get("t", 0)) == recs
    m.close()
    assert (d / RP).read_bytes() == checkpoint_text([("t", 0, 6)])   # rewritten whole


def test_malformed_log_start_checkpoint_is_ignored(tmp_path, monkeypatch, clock, caplog):
    d = tmp_path / "d"
    m = manager(d, clock)
    log = m.get_or_create("t", 0)
    fill(log, clock, 6)
    log.delete_records(4)
    m.close()
    assert (d / LSO).read_bytes() == checkpoint_text([("t", 0, 4)])
    (d / LSO).write_bytes(b"0\n1\nt zero 4\n")
    spy = OpenSpy(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="kafkastore.manager"):
        m = manager(d, clock)
    kw = spy.by_name()["t-0"]
    assert kw["log_start_offset"] == 0 and kw["had_clean_shutdown"] is True
    assert m.get("t", 0).log_start_offset == 0
    assert any(str(d / LSO) in r.getMessage() for r in caplog.records)
    m.close()


# -- unsafe or invalid directory entries -------------------------------------------------------


@pytest.mark.parametrize("name", ["nodash", "bad!topic-0", "t-x", "t-01", "t-0.abc-future2"])
def test_invalid_partition_dir_is_refused_and_nothing_stays_locked(tmp_path, clock, name):
    d = tmp_path / "d"
    with manager(d, clock) as m:
        recs = fill(m.get_or_create("good", 0), clock, 3)
    (d / name).mkdir()
    with pytest.raises(InvalidPartitionDirError) as info:
        manager(d, clock)
    assert str(d / name) in str(info.value)
    (d / name).rmdir()
    with manager(d, clock) as m:   # the failed open released its lock and its logs
        assert contents(m.get("good", 0)) == recs


def test_kraft_metadata_log_and_remote_index_cache_are_left_alone(tmp_path, clock):
    """Kafka's LogManager.loadLogs skips ``__cluster_metadata-0`` (the Raft layer owns it)
    and ``remote-log-index-cache`` (tiered storage); so does the manager: not loaded, not
    refused, never touched by retention, whatever its age."""
    d = tmp_path / "d"
    with manager(d, clock) as m:
        recs = fill(m.get_or_create("good", 0), clock, 3)
    meta = d / "__cluster_metadata-0"
    meta.mkdir()
    segment = meta / "00000000000000000000.log"
    segment.write_bytes(kafkastore.encode_batch([(None, b"x", 1)]))   # stamped in 1970
    (d / "remote-log-index-cache").mkdir()
    (d / "remote-log-index-cache" / "1_abc.index").write_bytes(b"\0" * 8)
    before = sorted(p.name for p in meta.iterdir())
    with manager(d, clock, {"retention.ms": 1}) as m:
        assert set(m.logs()) == {TopicPartition("good", 0)}
        assert contents(m.get("good", 0)) == recs
        m.cleanup_logs()
    assert sorted(p.name for p in meta.iterdir()) == before
    assert segment.read_bytes() == kafkastore.encode_batch([(None, b"x", 1)])


def test_symlinked_partition_dir_outside_is_refused(tmp_path, clock):
    d, outside = tmp_path / "d", tmp_path / "outside"
    with manager(d, clock) as m:
        recs = fill(m.get_or_create("good", 0), clock, 3)
    with manager(outside, clock) as m:
        fill(m.get_or_create("t", 0), clock, 2)
    os.symlink(outside / "t-0", d / "t-0")
    with pytest.raises(UnsafePathError) as info:
        manager(d, clock)
    assert str(d / "t-0") in str(info.value)
    os.unlink(d / "t-0")
    with manager(d, clock) as m:
        assert contents(m.get("good", 0)) == recs
        assert m.get("t", 0) is None


def test_symlink_inside_the_log_dir_is_not_a_second_writer(tmp_path, clock):
    """A link inside the log dir to another partition's directory would make two logs
    write one directory (both appending at the same offsets): the second open is refused
    by the directory lock, and nothing stays locked after the failed load."""
    d = tmp_path / "d"
    with manager(d, clock) as m:
        recs = fill(m.get_or_create("t", 0), clock, 3)
    os.rename(d / "t-0", d / "t-9")   # a valid name, so the loader takes it as t-9
    os.symlink(d / "t-9", d / "t-0")
    with pytest.raises(LogDirectoryLockedError, match="already open for writing"):
        manager(d, clock)
    os.unlink(d / "t-0")
    with manager(d, clock) as m:
        assert contents(m.get("t", 9)) == recs


# -- the lock -----------------------------------------------------------------------------------


def test_second_manager_in_the_same_process_gets_the_lock_error(tmp_path, clock):
    d = tmp_path / "d"
    m = manager(d, clock)
    log = m.get_or_create("t", 0)
    with pytest.raises(LogDirectoryLockedError):
        manager(d, clock)
    with pytest.raises(LogDirectoryLockedError):   # through another spelling of the path
        manager(str(d) + "/./", clock)
    fill(log, clock, 2)   # the first one is unharmed
    m.close()
    with manager(d, clock) as m2:
        assert m2.get("t", 0).log_end_offset == 2


def test_second_process_gets_the_lock_error(tmp_path, clock):
    d = tmp_path / "d"
    script = ("import sys\n"
              "from kafkastore.errors import LogDirectoryLockedError\n"
              "from kafkastore.manager import LogManager\n"
              "try:\n"
              "    LogManager(sys.argv[1], background=False).close()\n"
              "except LogDirectoryLockedError as e:\n"
              "    print('locked', e)\n"
              "    sys.exit(3)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))  # the parent's kafkastore

    def other():
        return subprocess.run([sys.executable, "-c", script, str(d)], env=env,
                              capture_output=True, text=True, timeout=60)

    with manager(d, clock):
        done = other()
        assert done.returncode == 3, done.stderr
        assert done.stdout.startswith("locked")
    done = other()
    assert done.returncode == 0, done.stderr


# -- deleting logs ------------------------------------------------------------------------------


def delete_dirs(d) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith("-delete"))


def test_delete_renames_at_once_and_removes_after_the_delay(tmp_path, clock):
    d = tmp_path / "d"
    m = manager(d, clock, {"file.delete.delay.ms": 5000})
    log = m.get_or_create("t", 0)
    recs = fill(log, clock, 5)
    other = fill(m.get_or_create("u", 0), clock, 2)
    m.get("u", 0).flush()
    held = log.read(0, 1 << 20)
    assert m.delete("t", 0) is True
    assert m.delete("t", 0) is False
    assert m.get("t", 0) is None and TopicPartition("t", 0) not in m.logs()
    assert not (d / "t-0").exists()
    (doomed,) = delete_dirs(d)
    assert doomed.startswith("t-0.") and len(doomed) == len("t-0.") + 32 + len("-delete")
    # the checkpoint no longer names it
    assert (d / RP).read_bytes() == checkpoint_text([("u", 0, 2)])
    # a reader holding a slice still reads it
    assert [(r.offset, r.key, r.value) for r in held.records()] == recs
    m.run_scheduled_tasks(T0 + 4999)
    assert delete_dirs(d) == [doomed]
    assert [(r.offset, r.key, r.value) for r in held.records()] == recs
    m.run_scheduled_tasks(T0 + 5000)
    assert delete_dirs(d) == []
    # a new log of the same partition starts empty
    assert m.get_or_create("t", 0).log_end_offset == 0
    assert contents(m.get("u", 0)) == other
    m.close()


def test_leftover_delete_dir_at_startup_is_removed_after_the_delay(tmp_path, clock):
    d = tmp_path / "d"
    with manager(d, clock) as m:
        fill(m.get_or_create("t", 0), clock, 3)
        keep = fill(m.get_or_create("t", 1), clock, 3)
    os.rename(d / "t-0", d / ("t-0." + "ab" * 16 + "-delete"))
    m = manager(d, clock, {"file.delete.delay.ms": 2000})
    assert set(m.logs()) == {TopicPartition("t", 1)}
    m.run_scheduled_tasks(T0 + 1999)
    assert len(delete_dirs(d)) == 1
    m.run_scheduled_tasks(T0 + 2000)
    assert delete_dirs(d) == []
    assert contents(m.get("t", 1)) == keep
    m.close()


def test_close_keeps_a_pending_delete_dir_for_the_next_start(tmp_path, clock):
    d = tmp_path / "d"
    m = manager(d, clock, {"file.delete.delay.ms": 5000})
    fill(m.get_or_create("t", 0), clock, 3)
    m.delete("t", 0)
    m.close()
    assert len(delete_dirs(d)) == 1
    m = manager(d, clock, {"file.delete.delay.ms": 5000})
    assert m.logs() == {}
    m.run_scheduled_tasks(T0 + 5000)
    assert delete_dirs(d) == []
    m.close()


def test_crash_between_rename_and_removal_finishes_on_the_next_start(tmp_path, clock):
    d = tmp_path / "d"
    with installed(FaultFS()) as fs:
        m = manager(d, clock, {"file.delete.delay.ms": 1000})
        fill(m.get_or_create("t", 0), clock, 3)
        keep = fill(m.get_or_create("u", 0), clock, 4)
        for log in m.logs().values():
            log.flush()
        m.run_scheduled_tasks(T0 + 60_000)   # checkpoints naming t-0
        assert "t 0 3" in read_checkpoint(d / RP)[1]
        # crash right after the rename, before the directory fsync and the checkpoints
        fs.faults["fsync_dir"] = {fs.calls["fsync_dir"] + 1: "crash"}
        with pytest.raises(BaseException, match="crash"):
            m.delete("t", 0)
        assert fs.fired
        m._abandon()
    assert len(delete_dirs(d)) == 1 and not (d / "t-0").exists()
    m = manager(d, clock, {"file.delete.delay.ms": 1000})
    assert set(m.logs()) == {TopicPartition("u", 0)}   # the stale checkpoint entry is ignored
    assert contents(m.get("u", 0)) == keep
    m.run_scheduled_tasks(T0 + 1000)
    assert delete_dirs(d) == []
    m.close()
    assert (d / RP).read_bytes() == checkpoint_text([("u", 0, 4)])


@pytest.mark.parametrize("op", ["rename", "fsync"])
def test_crash_during_checkpoint_write_keeps_the_old_checkpoint(tmp_path, monkeypatch, clock,
                                                                op):
    d = tmp_path / "d"
    with installed(FaultFS()) as fs:
        m = manager(d, clock)
        log = m.get_or_create("t", 0)
        keep = fill(log, clock, 3)
        log.flush()
        m.checkpoint_recovery_points()
        old = (d / RP).read_bytes()
        assert old == checkpoint_text([("t", 0, 3)])
        keep += fill(log, clock, 2)
        log.flush()
        fs.faults[op] = {fs.calls[op] + 1: "crash"}
        with pytest.raises(BaseException, match="crash"):
            m.checkpoint_recovery_points()
        m._abandon()
    assert (d / RP).read_bytes() == old     # never half written
    spy = OpenSpy(monkeypatch)
    with manager(d, clock) as m:
        assert spy.by_name()["t-0"]["recovery_point"] == 3
        assert contents(m.get("t", 0)) == keep
    assert (d / RP).read_bytes() == checkpoint_text([("t", 0, 5)])


# -- per-topic configuration --------------------------------------------------------------------


def test_topic_overrides_with_kafka_names(tmp_path, clock):
    m = manager(tmp_path, clock, {"retention.ms": 7000},
                topic_configs={"hot": {"retention.ms": 1000, "segment.bytes": 4096}})
    hot, cold = m.get_or_create("hot", 0), m.get_or_create("cold", 0)
    assert (hot.config.retention_ms, hot.config.segment_bytes) == (1000, 4096)
    assert cold.config.retention_ms == 7000
    special = m.get_or_create("hot", 1, {"cleanup.policy": "compact"})
    assert special.config.compact and special.config.retention_ms == 1000

    m.set_topic_config("cold", {"retention.bytes": 123})
    assert cold.config.retention_bytes == 123 and cold.config.retention_ms == 7000
    assert m.get_or_create("cold", 1).config.retention_bytes == 123

    before = hot.config
    for bad in ({"retention.ms": "soon"}, {"no.such.key": 1}, {"segment.bytes": -5}):
        with pytest.raises(ConfigError):
            m.set_topic_config("hot", bad)
        assert hot.config is before
        assert m.get_or_create("hot", 7).config.segment_bytes == 4096
        m.delete("hot", 7)
    with pytest.raises(ConfigError):
        m.set_topic_config("fresh", {"retention.ms": "x"})
    assert m.get_or_create("fresh", 0).config.retention_ms == 7000

    m.set_topic_config("hot", None)
    assert (hot.config.retention_ms, hot.config.segment_bytes) == (7000, 1 << 30)
    m.close()


def test_bad_topic_config_at_construction_locks_nothing(tmp_path, clock):
    with pytest.raises(ConfigError):
        manager(tmp_path, clock, topic_configs={"t": {"retention.ms": "x"}})
    with pytest.raises(KafkaStoreError):
        manager(tmp_path, clock, topic_configs={"bad/name": {}})
    manager(tmp_path, clock).close()


def test_topic_override_is_applied_on_reopen(tmp_path, clock):
    with manager(tmp_path, clock, topic_configs={"t": {"segment.bytes": 150}}) as m:
        fill(m.get_or_create("t", 0), clock, 10)
        assert len(m.get("t", 0).segments) > 1
    with manager(tmp_path, clock, topic_configs={"t": {"segment.bytes": 999}}) as m:
        assert m.get("t", 0).config.segment_bytes == 999


@pytest.mark.parametrize("settings", [{"log.retention.check.interval.ms": 0},
                                      {"log.flush.scheduler.interval.ms": "x"},
                                      {"log.unknown.ms": 5}])
def test_manager_config_is_checked(settings):
    with pytest.raises(ConfigError):
        ManagerConfig(settings)


def test_manager_config_names():
    mc = ManagerConfig({"log.retention.check.interval.ms": 5}, log_flush_scheduler_interval_ms=7)
    assert (mc.retention_check_interval_ms, mc.flush_scheduler_interval_ms) == (5, 7)
    assert ManagerConfig().retention_check_interval_ms == 300000
    with pytest.raises(AttributeError):
        mc.retention_check_interval_ms = 1


# -- the scheduler ------------------------------------------------------------------------------


MC = {"log.retention.check.interval.ms": 3000, "log.flush.scheduler.interval.ms": 500,
      "log.flush.offset.checkpoint.interval.ms": 2000,
      "log.flush.start.offset.checkpoint.interval.ms": 4000}


def test_which_tasks_run_when(tmp_path, clock):
    m = manager(tmp_path, clock, manager_config=MC)
    seen = {}
    for t in range(0, 6001, 250):
        ran = m.run_scheduled_tasks(T0 + t)
        if ran:
            seen[t] = sorted(ran)
    flusher, delete = "kafka-log-flusher", "kafka-delete-logs"
    rp, lso, ret = ("kafka-recovery-point-checkpoint", "kafka-log-start-offset-checkpoint",
                    "kafka-log-retention")
    assert seen == {
        500: [flusher], 1000: sorted([flusher, delete]), 1500: [flusher],
        2000: sorted([flusher, rp, delete]), 2500: [flusher],
        3000: sorted([flusher, ret, delete]), 3500: [flusher],
        4000: sorted([flusher, rp, lso, delete]), 4500: [flusher],
        5000: sorted([flusher, delete]), 5500: [flusher],
        6000: sorted([flusher, rp, ret, delete])}
    m.close()


def test_a_long_pause_runs_each_task_once(tmp_path, clock):
    m = manager(tmp_path, clock, manager_config=MC)
    assert sorted(m.run_scheduled_tasks(T0 + 60_000)) == sorted(TASKS)
    assert m.run_scheduled_tasks(T0 + 60_000) == []
    m.close()


def test_default_flusher_never_runs(tmp_path, clock):
    m = manager(tmp_path, clock)
    ran = m.run_scheduled_tasks(T0 + 10**9)
    assert "kafka-log-flusher" not in ran and "kafka-log-retention" in ran
    m.close()


def test_retention_runs_at_its_interval(tmp_path, clock):
    m = manager(tmp_path, clock, {"segment.bytes": 200, "retention.bytes": 400},
                manager_config=MC)
    log = m.get_or_create("t", 0)
    fill(log, clock, 30)
    n = len(log.segments)
    assert n > 4
    m.run_scheduled_tasks(T0 + 2999)
    assert len(log.segments) == n and log.log_start_offset == 0
    m.run_scheduled_tasks(T0 + 3000)
    assert len(log.segments) < n and log.log_start_offset > 0
    assert log.size >= 400
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    m.close()


def test_retention_respects_cleanup_policy(tmp_path, clock):
    m = manager(tmp_path, clock, {"segment.bytes": 200, "retention.bytes": 400},
                topic_configs={"c": {"cleanup.policy": "compact"},
                               "cd": {"cleanup.policy": "compact,delete"}})
    logs = {t: m.get_or_create(t, 0) for t in ("d", "c", "cd")}
    for log in logs.values():
        fill(log, clock, 30)
    counts = {t: len(log.segments) for t, log in logs.items()}
    assert m.cleanup_logs(T0) > 0
    # Kafka's split: the manager's pass takes the logs without "compact" ...
    assert len(logs["d"].segments) < counts["d"]
    assert len(logs["c"].segments) == counts["c"]
    assert len(logs["cd"].segments) == counts["cd"]
    # ... and the cleaner's retention pass the compacted ones, deleting only for "cd"
    assert m.cleanup_compacted_logs(T0) > 0
    assert len(logs["c"].segments) == counts["c"]
    assert len(logs["cd"].segments) < counts["cd"]
    m.close()


def test_retention_by_time_with_the_fake_clock(tmp_path, clock):
    m = manager(tmp_path, clock, {"segment.bytes": 200, "retention.ms": 10_000},
                manager_config=MC)
    log = m.get_or_create("t", 0)
    old = fill(log, clock, 10)
    clock.sleep(20_000)
    new = fill(log, clock, 2, tag="new")
    m.run_scheduled_tasks(T0 + 20_000)
    assert contents(log)[-2:] == new
    assert all(o >= log.log_start_offset for o, _, _ in new)
    assert log.log_start_offset > old[0][0]
    m.close()


def test_flush_by_flush_ms_at_the_flusher_interval(tmp_path, clock):
    m = manager(tmp_path, clock, {"flush.ms": 1000}, manager_config=MC)
    log = m.get_or_create("t", 0)

    def at(t):
        clock.now = T0 + t
        return m.run_scheduled_tasks()

    fill(log, clock, 3)
    assert log.recovery_point == 0
    at(999)
    assert log.recovery_point == 0
    assert "kafka-log-flusher" in at(1000)
    assert log.recovery_point == 3
    fill(log, clock, 2)
    at(1500)                    # the flusher runs, but 500 ms since the last flush
    assert log.recovery_point == 3
    at(2000)
    assert log.recovery_point == 5
    at(4000)
    assert (tmp_path / RP).read_bytes() == checkpoint_text([("t", 0, 5)])
    m.close()


def test_checkpoints_follow_their_intervals(tmp_path, clock):
    m = manager(tmp_path, clock, {"segment.bytes": 200}, manager_config=MC)
    log = m.get_or_create("t", 0)
    fill(log, clock, 20)
    log.flush()
    assert not (tmp_path / RP).exists()
    m.run_scheduled_tasks(T0 + 1999)
    assert not (tmp_path / RP).exists()
    m.run_scheduled_tasks(T0 + 2000)
    assert (tmp_path / RP).read_bytes() == checkpoint_text([("t", 0, 20)])
    log.delete_records(log.segments[1].base_offset + 1)
    m.run_scheduled_tasks(T0 + 3999)
    assert not (tmp_path / LSO).exists()
    m.run_scheduled_tasks(T0 + 4000)
    assert (tmp_path / LSO).read_bytes() == checkpoint_text([("t", 0, log.log_start_offset)])
    m.close()


def test_a_failing_task_does_not_stop_the_others(tmp_path, monkeypatch, clock, caplog):
    m = manager(tmp_path, clock, {"segment.bytes": 200, "retention.bytes": 400},
                manager_config=MC)
    log = m.get_or_create("t", 0)
    fill(log, clock, 30)
    log.flush()
    calls = []

    def boom(log, now):
        calls.append(now)
        raise RuntimeError("retention broke")

    monkeypatch.setattr(manager_mod, "delete_old_segments", boom)
    with caplog.at_level(logging.ERROR, logger="kafkastore.manager"):
        ran = m.run_scheduled_tasks(T0 + 4000)
    # everything due ran, retention included (the cleaner is due only at 15 s)
    assert sorted(ran) == sorted(t for t in TASKS if t != "kafka-log-cleaner-thread-0")
    assert calls == [T0 + 4000]
    assert any("kafka-log-retention" in r.getMessage() for r in caplog.records)
    assert (tmp_path / RP).exists() and (tmp_path / LSO).exists()
    m.run_scheduled_tasks(T0 + 6000)   # and retention is still scheduled
    assert calls == [T0 + 4000, T0 + 6000]
    monkeypatch.undo()
    m.run_scheduled_tasks(T0 + 9000)
    assert log.log_start_offset > 0
    m.close()


def test_background_scheduler_is_one_named_thread_and_close_stops_it(tmp_path):
    def schedulers():
        return [t for t in threading.enumerate() if t.name == "kafkastore-scheduler"]

    before = len(schedulers())
    m = LogManager(tmp_path, {"flush.ms": 0},
                   manager_config={"log.flush.scheduler.interval.ms": 10})
    try:
        assert len(schedulers()) == before + 1
        thread = m._scheduler._thread
        assert thread in schedulers() and thread.daemon and thread.is_alive()
        log = m.get_or_create("t", 0)
        fill(log, Clock(time.time_ns() // 1_000_000), 3)
        deadline = time.monotonic() + 10
        while log.recovery_point < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.recovery_point == 3   # the thread flushed it
    finally:
        m.close()
    thread.join(5)
    assert not thread.is_alive()
    assert len(schedulers()) == before


def test_background_false_starts_no_thread(tmp_path, clock):
    before = threading.active_count()
    with manager(tmp_path, clock):
        assert threading.active_count() == before


# -- several log directories --------------------------------------------------------------------


def test_new_logs_go_to_the_directory_with_fewest_logs(tmp_path, clock):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with manager(d1, clock) as m:
        fill(m.get_or_create("old", 0), clock, 1)
        fill(m.get_or_create("old", 1), clock, 1)
    with manager([d1, d2], clock) as m:
        assert m.log_dirs == [str(d1), str(d2)]
        for p in range(4):
            m.get_or_create("new", p)
        # d2 has none, then both have two (a tie goes to the first), then d1 has more
        assert sorted(os.listdir(d2)) == [".lock", "new-0", "new-1", "new-3"]
        assert "new-2" in os.listdir(d1)
    # each directory has its own checkpoint, naming only its logs
    assert read_checkpoint(d2 / RP)[1] == {"new 0 0", "new 1 0", "new 3 0"}
    assert read_checkpoint(d1 / RP)[1] == {"old 0 1", "old 1 1", "new 2 0"}
    with manager([d2, d1], clock) as m:
        assert len(m.logs()) == 6


def test_duplicate_partition_across_directories_is_an_error(tmp_path, clock):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    for d in (d1, d2):
        with manager(d, clock) as m:
            m.get_or_create("t", 0)
    with pytest.raises(InvalidPartitionDirError) as info:
        manager([d1, d2], clock)
    assert str(d1) in str(info.value) and str(d2) in str(info.value)
    manager(d1, clock).close()   # both locks were released
    manager(d2, clock).close()
    with pytest.raises(ValueError):
        manager([d1, d1], clock)


def test_meta_properties(tmp_path, clock):
    meta = MetaProperties(cluster_id="c" * 22, node_id=1)
    with manager(tmp_path, clock, meta=meta):
        pass
    assert "node.id=1" in (tmp_path / "meta.properties").read_text()
    with manager(tmp_path, clock):   # validated, not required to match anything
        pass
    with pytest.raises(KafkaStoreError):
        manager(tmp_path, clock, meta=MetaProperties(cluster_id="c" * 22, node_id=2))
    manager(tmp_path, clock, meta=meta).close()


# -- closing ------------------------------------------------------------------------------------


def test_close_is_idempotent_and_the_context_manager_closes(tmp_path, clock):
    with manager(tmp_path, clock) as m:
        log = m.get_or_create("t", 0)
        fill(log, clock, 2)
    assert m.closed and log.closed
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    m.close()
    m.close()
    with pytest.raises(KafkaStoreError):
        m.get_or_create("t", 1)
    with pytest.raises(KafkaStoreError):
        m.run_scheduled_tasks(T0)
    with pytest.raises(KafkaStoreError):
        m.delete("t", 0)
    with manager(tmp_path, clock) as m2:
        assert m2.get("t", 0).log_end_offset == 2


def test_context_manager_closes_on_an_exception(tmp_path, clock):
    with pytest.raises(RuntimeError):
        with manager(tmp_path, clock) as m:
            fill(m.get_or_create("t", 0), clock, 2)
            raise RuntimeError("boom")
    assert m.closed and (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


# -- readers racing appends, rolls and retention ------------------------------------------------


def test_readers_race_appends_rolls_and_retention(tmp_path):
    """Reader threads scan while a writer appends (rolling every few batches) and a
    scheduler thread runs retention and deletes ``.deleted`` files after 1 ms: no error but
    OffsetOutOfRangeError below the start; every record read is the one written at its
    offset; each reader's offsets strictly increase; no reader gets an offset below a log
    start offset it saw before the read. Runs about two seconds."""
    with installed(NoSyncFS()):
        race(tmp_path, seconds=2.0)


def race(tmp_path, seconds):
    m = LogManager(tmp_path, {"segment.bytes": 1500, "retention.bytes": 6000,
                              "file.delete.delay.ms": 1},
                   manager_config={"log.retention.check.interval.ms": 1},
                   background=False)
    log = m.get_or_create("t", 0)
    written: dict[int, tuple[bytes, bytes]] = {}
    stop = threading.Event()
    errors: list[BaseException] = []
    stats = {"read": 0, "out_of_range": 0, "expired": 0}

    def writer():
        try:
            i = 0
            deadline = time.monotonic() + seconds
            while not stop.is_set() and time.monotonic() < deadline:
                recs = [(f"k{i}-{j}".encode(), os.urandom(20) + f"v{i}-{j}".encode())
                        for j in range(3)]
                # recorded before the append: a reader may see the records before
                # append returns (one writer, so the offsets are known in advance)
                first = log.log_end_offset
                for j, (k, v) in enumerate(recs):
                    written[first + j] = (k, v)
                assert log.append(recs).first_offset == first
                i += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            stop.set()

    def scheduler():
        try:
            while not stop.is_set():
                m.run_scheduled_tasks()
                time.sleep(0.001)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader(rid):
        try:
            rng = random.Random(rid)
            offset = 0
            last = -1
            while not stop.is_set() or offset < log.log_end_offset:
                start_seen = log.log_start_offset
                try:
                    sl = log.read(offset, 600)
                except OffsetOutOfRangeError:
                    stats["out_of_range"] += 1
                    new_start = log.log_start_offset
                    assert new_start > offset, (offset, new_start)
                    offset = new_start
                    continue
                try:
                    data = sl.to_bytes()
                except (KafkaStoreError, OSError):
                    if not sl.file.closed:
                        raise
                    data = None
                if data is None or sl.file.closed:
                    # the slice outlived file.delete.delay.ms (1 ms here): its file was
                    # deleted, as a slice held past the delay may be; read again
                    stats["expired"] += 1
                    continue
                got = False
                for batch in iter_batches(data, validate=True):
                    for r in batch:
                        if r.offset < offset:
                            continue
                        assert r.offset >= start_seen, (r.offset, start_seen)
                        assert r.offset > last, (r.offset, last)
                        assert written[r.offset] == (bytes(r.key), bytes(r.value)), r.offset
                        last = r.offset
                        stats["read"] += 1
                        got = True
                    offset = max(offset, batch.last_offset + 1)
                if not got:
                    if stop.is_set() and offset >= log.log_end_offset:
                        break
                    time.sleep(0.0005)   # at the end: let the writer in
                elif rng.random() < 0.05:
                    # fall behind, so retention overtakes this reader (reader 0 by far)
                    time.sleep(0.2 if rid == 0 else 0.05)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=writer), threading.Thread(target=scheduler)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    m.close()
    for exc in errors[:1]:
        traceback.print_exception(exc)
    assert not errors, errors[0]
    assert stats["read"] > 100
    assert stats["out_of_range"] > 0   # readers really fell behind retention
    assert log.log_start_offset > 0
