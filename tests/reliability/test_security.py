"""Security of names, paths, links, modes and locks (issue 8 "Hostile input"; reliability.md
§4.1-§4.4, rows S1-S6).

* Names and paths that would leave the log directory (``..``, ``a/b``, absolute paths,
  NUL, backslash, look-alike Unicode, over-long names, bad partitions) are refused with a
  typed error by every public entry point that builds a path from a topic and partition:
  :class:`~kafkastore.manager.LogManager` (``get_or_create``, ``topic_configs``,
  ``set_topic_config``), the name builders of :mod:`kafkastore.log_dir`, the Spark
  writer's staging path and the CLI's ``produce``. Nothing outside the log directory is
  created or changed (the whole temporary tree is compared before and after).
* Symlinks planted in a partition directory (a segment file, an index file, the
  clean-shutdown marker, a checkpoint temp file, the partition directory itself) are
  never written through: the target keeps its bytes, and the open is refused with
  :class:`~kafkastore.errors.UnsafePathError` where the link would be used as data.
* With umask 000, no file or directory kafkastore creates is group- or world-writable.
* A second process, and a second manager in this process, on a locked log directory get
  :class:`~kafkastore.errors.LogDirectoryLockedError` and change nothing in it.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kafkastore.errors import (
    InvalidTopicError,
    KafkaStoreError,
    LogDirectoryLockedError,
    UnsafePathError,
)
from kafkastore.log import Log
from kafkastore.log_dir import (
    check_partition_dir,
    log_delete_dir_name,
    log_dir_name,
    log_future_dir_name,
    log_stray_dir_name,
)
from kafkastore.manager import LogManager
from kafkastore.topic import TopicPartition


BAD_TOPICS = [
    "..", ".", "", "../x", "a/../../b", "a/b", "/etc", "/tmp/x", "x\0y", "a\\b", "..\\x",
    "é", "t\u2024x", "t\u2215x", "\uff0e\uff0e", "a b", "a\nb", "t" * 250, "x" * 1000,
    "t/", "~", "$HOME", "t\x7f",
]
BAD_PARTITIONS = [-1, -2**31, 2**31, 2**63, True, "0", "01", "../0", 1.0, None]


def tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind, mode, size and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            digest = None
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            out[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777,
                                                st.st_size, digest)
    return out


def manager(root, **kw) -> LogManager:
    return LogManager(str(root), {"segment.bytes": 300}, background=False, **kw)


def fill(log, n: int = 8) -> None:
    for i in range(n):
        log.append([(b"k%d" % i, b"v" * 40)])


# -- names and paths ------------------------------------------------------------------------


def test_bad_topics_and_partitions_are_refused_by_every_entry_point(tmp_path, figures):
    root = tmp_path / "logs"
    with manager(root) as m:
        fill(m.get_or_create("good", 0), 2)
        before = tree(tmp_path)
        checked = 0
        for topic in BAD_TOPICS:
            for call in (
                lambda: m.get_or_create(topic, 0),
                lambda: m.set_topic_config(topic, {"retention.ms": 1}),
                lambda: manager(tmp_path / "other", topic_configs={topic: {}}),
                lambda: log_dir_name(TopicPartition(topic, 0)),
                lambda: log_delete_dir_name(TopicPartition(topic, 0)),
                lambda: log_future_dir_name(TopicPartition(topic, 0)),
                lambda: log_stray_dir_name(TopicPartition(topic, 0)),
            ):
                with pytest.raises(InvalidTopicError):
                    call()
                checked += 1
        for partition in BAD_PARTITIONS:
            for call in (
                lambda: m.get_or_create("t", partition),
                lambda: log_dir_name(TopicPartition("t", partition)),
            ):
                with pytest.raises((KafkaStoreError, ValueError, TypeError)):
                    call()
                checked += 1
        for name in ("..", ".", "", "a/b", "/etc", "x\0y", "a\\b", "../logs2"):
            with pytest.raises(UnsafePathError):
                check_partition_dir(str(root), name)
            checked += 1
        # the calls above that failed left nothing behind, anywhere under tmp_path
        assert tree(tmp_path) == before
        # a legal name longest possible still works, and -delete names of it fit in 255
        longest = "t" * 249
        fill(m.get_or_create(longest, 0), 1)
        assert len(log_delete_dir_name(TopicPartition(longest, 2**31 - 1))) <= 255
        assert m.delete(longest, 0)
    figures.add("security: hostile names refused", checked)


def test_the_spark_writer_staging_path_refuses_bad_topics(tmp_path):
    pytest.importorskip("pyarrow")
    from kafkastore.spark import writer
    for topic in BAD_TOPICS:
        with pytest.raises(InvalidTopicError):
            writer._staging_dir(str(tmp_path), topic, 0, "job")
    with pytest.raises(ValueError):
        writer._staging_dir(str(tmp_path), "t", -1, "job")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("topic", ["../escaped", "a/b", "/abs", ".."])
def test_the_cli_produce_refuses_bad_topics(tmp_path, topic):
    root = tmp_path / "logs"
    root.mkdir()
    before = tree(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))  # the parent's kafkastore
    done = subprocess.run([sys.executable, "-m", "kafkastore", "produce", str(root), topic],
                          input="k\tv\n", capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert tree(tmp_path) == before


# -- permissions -------------------------------------------------------------------------------


def test_nothing_created_is_group_or_world_writable_under_umask_000(tmp_path, figures):
    """Every directory and file a manager and a standalone log create, through append,
    roll, index entries, checkpoints, deletion, the marker and the lock, with umask 000."""
    old = os.umask(0)
    try:
        root = tmp_path / "a" / "b" / "logs"      # parents made by the manager too
        with manager(root) as m:
            fill(m.get_or_create("t", 0), 20)
            fill(m.get_or_create("u", 3), 3)
            m.checkpoint_recovery_points()
            m.checkpoint_log_start_offsets()
            m.get_or_create("gone", 0)
            m.delete("gone", 0)
        with manager(root) as m:
            fill(m.get("t", 0), 2)
        log = Log.open(str(tmp_path / "c" / "standalone" / "s-0"), {"segment.bytes": 300})
        fill(log, 10)
        log.close()
    finally:
        os.umask(old)
    entries = tree(tmp_path)
    assert len(entries) > 40
    writable = {path: oct(mode) for path, (_, mode, _, _) in entries.items() if mode & 0o022}
    assert not writable, writable
    figures.add("security: created files and dirs checked for o+w/g+w", len(entries))


# -- locks --------------------------------------------------------------------------------------


def test_a_locked_directory_refuses_a_second_process_and_a_second_manager(tmp_path, figures):
    """The holder is a child process this time (a manager with an open log); the parent's
    manager and a second child are refused and change nothing; once the holder is killed
    (SIGKILL: no cleanup) the kernel drops its lock and a manager opens the directory."""
    root = tmp_path / "logs"
    with manager(root) as m:
        fill(m.get_or_create("t", 0), 5)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))  # the parent's kafkastore
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from kafkastore.manager import LogManager
        m = LogManager(sys.argv[1], background=False)
        m.get("t", 0).append([(b"held", b"by child")])
        print("holding", flush=True)
        time.sleep(600)
        """), str(root)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        before = tree(root)
        with pytest.raises(LogDirectoryLockedError) as info:
            manager(root)
        assert info.value.log_dir == str(root)
        with pytest.raises(LogDirectoryLockedError):
            manager(str(root) + "/.")            # another spelling of the same directory
        other = subprocess.run([sys.executable, "-c", textwrap.dedent("""
            import sys
            from kafkastore.errors import LogDirectoryLockedError
            from kafkastore.manager import LogManager
            try:
                LogManager(sys.argv[1], background=False)
            except LogDirectoryLockedError:
                sys.exit(3)
            """), str(root)], env=env, capture_output=True, text=True, timeout=120)
        assert other.returncode == 3, other.stderr
        assert tree(root) == before              # the refused ones changed nothing
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
        holder.stdout.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            m = manager(root)
            break
        except LogDirectoryLockedError:
            assert time.monotonic() < deadline, "the lock outlived its holder"
            time.sleep(0.05)
    with m:
        assert m.get("t", 0).log_end_offset == 6   # the child's append is there
        with pytest.raises(LogDirectoryLockedError):
            manager(root)                          # a second manager in this process
    figures.add("security: lock refusals checked", 4)


# -- symlinks -----------------------------------------------------------------------------------

PRECIOUS = b"precious bytes outside the log directory\n" * 20


def _plant(path: Path, target: Path) -> None:
    path.unlink()
    os.symlink(target, path)


def test_a_symlinked_segment_or_index_file_is_refused_and_never_written(tmp_path, figures):
    """A segment's ``.log``, ``.index`` or ``.timeindex`` replaced by a link to a file
    outside (or a dangling link): every way of opening the log (a manager after a clean
    shutdown or after a crash, a standalone open, an unclean open with no recovery
    point) raises UnsafePathError, and neither the target nor anything in the log
    directory changes. Before the refusal, an unclean open truncated the target to the
    segment's valid bytes and an append wrote a batch into it."""
    root = tmp_path / "logs"
    with manager(root) as m:
        fill(m.get_or_create("t", 0), 12)
    part = root / "t-0"
    segments = sorted(n[:-4] for n in os.listdir(part) if n.endswith(".log"))
    assert len(segments) >= 3
    outside = tmp_path / "outside.bin"
    checked = 0
    for stem in (segments[0], segments[len(segments) // 2], segments[-1]):
        for suffix in (".log", ".index", ".timeindex"):
            for dangling in (False, True):
                for how in ("manager-clean", "manager-crash", "log-unclean", "log-clean"):
                    target = tmp_path / "missing.bin" if dangling else outside
                    if not dangling:
                        outside.write_bytes(PRECIOUS)
                    victim = part / (stem + suffix)
                    saved = victim.read_bytes()
                    _plant(victim, target)
                    marker = root / ".kafka_cleanshutdown"
                    if how == "manager-crash":
                        marker.rename(tmp_path / "marker")
                    before = tree(tmp_path)
                    with pytest.raises(UnsafePathError) as info:
                        if how.startswith("manager"):
                            manager(root).close()
                        elif how == "log-unclean":
                            Log.open(str(part), recovery_point=0, had_clean_shutdown=False)
                        else:
                            Log.open(str(part), had_clean_shutdown=True)
                    assert info.value.path == str(victim), (stem, suffix, how)
                    assert tree(tmp_path) == before, (stem, suffix, how)
                    assert not (tmp_path / "missing.bin").exists()
                    if how == "manager-crash":
                        (tmp_path / "marker").rename(marker)
                    victim.unlink()
                    victim.write_bytes(saved)
                    checked += 1
    with manager(root) as m:                 # the log itself is as it was
        assert m.get("t", 0).log_end_offset == 12
    figures.add("security: planted symlinks refused", checked)


def test_a_symlinked_partition_directory_outside_is_refused(tmp_path):
    root, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    with manager(elsewhere) as m:
        fill(m.get_or_create("t", 0), 3)
    with manager(root) as m:
        fill(m.get_or_create("u", 0), 3)
    os.symlink(elsewhere / "t-0", root / "t-0")
    before = tree(tmp_path)
    with pytest.raises(UnsafePathError):
        manager(root)
    assert tree(tmp_path) == before



def test_links_planted_at_the_marker_and_checkpoint_temp_names_are_not_written_through(
        tmp_path, figures):
    """While a manager (or a standalone log) is open, links appear where it will write at
    close: the clean-shutdown marker and the checkpoints' ``.tmp`` files. The close
    replaces the links with its own files; the targets keep their bytes."""
    outside = tmp_path / "outside.bin"
    root = tmp_path / "logs"
    names = [".kafka_cleanshutdown", "recovery-point-offset-checkpoint.tmp",
             "log-start-offset-checkpoint.tmp"]
    for name in names:
        outside.write_bytes(PRECIOUS)
        m = manager(root)
        fill(m.get_or_create("t", 0), 3)
        os.symlink(outside, root / name)
        m.close()
        assert outside.read_bytes() == PRECIOUS, name
        assert not (root / name).is_symlink(), name
    with manager(root) as m:                     # the marker written was a real one
        assert m.get("t", 0).log_end_offset == 9
    part = tmp_path / "standalone" / "s-0"
    outside.write_bytes(PRECIOUS)
    log = Log.open(str(part))
    fill(log, 2)
    os.symlink(outside, part / ".kafka_cleanshutdown")
    log.close()
    assert outside.read_bytes() == PRECIOUS
    assert not (part / ".kafka_cleanshutdown").is_symlink()
    figures.add("security: planted symlinks refused", len(names) + 1)


def test_the_cli_creates_no_world_writable_directories_under_umask_000(tmp_path, capsys):
    """``kafkastore demo DIR`` (produce, compaction, retention, dump...) with umask 000:
    the directories it makes, parents included, are not group- or world-writable."""
    from kafkastore.cli import main
    old = os.umask(0)
    try:
        assert main(["demo", str(tmp_path / "x" / "y" / "logs"), "--records", "50"]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    entries = tree(tmp_path)
    assert len(entries) > 10
    writable = {path: oct(mode) for path, (_, mode, _, _) in entries.items() if mode & 0o022}
    assert not writable, writable
