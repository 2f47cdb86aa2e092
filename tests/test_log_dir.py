"""Log directories: topic names, partition directory names, path safety, .lock, meta.properties.

Expected names, messages and file texts come from kafka-storage.md §1.1-1.5 and Kafka's
``Topic.java`` / ``LocalLog.scala``, not from the code under test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import kafkastore
from kafkastore.errors import (
    InvalidMetaPropertiesError,
    InvalidPartitionDirError,
    InvalidTopicError,
    KafkaStoreError,
    LogDirectoryLockedError,
    UnsafePathError,
)
from kafkastore.log_dir import (
    LogDirLock,
    MetaProperties,
    PartitionDirName,
    check_partition_dir,
    log_delete_dir_name,
    log_dir_name,
    log_future_dir_name,
    log_stray_dir_name,
    parse_partition_dir_name,
    parse_topic_partition_name,
    read_meta_properties,
    write_meta_properties,
)
from kafkastore.topic import (
    TopicPartition,
    has_collision,
    is_internal_topic,
    is_valid_topic,
    validate_topic,
)

TP = TopicPartition
UUID = "0123456789abcdef0123456789abcdef"
# Where the kafkastore under test comes from (the installed wheel in CI, the source tree
# in development): child processes must import the same one.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(kafkastore.__file__)))

# -- topic names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "a", "A", "0", "foo", "foo.bar", "foo_bar", "foo-bar", "-", "_", "...", ".a", "a.",
    "__consumer_offsets", "a" * 249, "a-b.c_D-9",
])
def test_legal_topic_names(name):
    assert validate_topic(name) == name
    assert is_valid_topic(name)


@pytest.mark.parametrize("name, reason", [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("a" * 250, f"the length of '{'a' * 250}' is longer than the max allowed length 249"),
    ("a/b", "'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("../x", "contains one or more characters other than"),
    ("a\\b", "contains one or more characters other than"),
    ("/abs", "contains one or more characters other than"),
    ("a b", "contains one or more characters other than"),
    ("a\x00b", "contains one or more characters other than"),
    ("a\n", "contains one or more characters other than"),
    ("caf\u00e9", "contains one or more characters other than"),
    ("\u0430bc", "contains one or more characters other than"),   # Cyrillic a, looks like "abc"
    ("\uff41", "contains one or more characters other than"),     # fullwidth a
    ("a:b", "contains one or more characters other than"),
    ("a*", "contains one or more characters other than"),
    # Java counts UTF-16 units: 125 emoji are 250 units, so the length rule fires first.
    ("\U0001f600" * 125, "is longer than the max allowed length 249"),
])
def test_illegal_topic_names_with_kafkas_message(name, reason):
    with pytest.raises(InvalidTopicError) as info:
        validate_topic(name)
    assert info.value.message.startswith("Topic name is invalid: ")
    assert reason in info.value.message
    assert info.value.topic == name
    assert not is_valid_topic(name)


def test_non_string_topic_is_invalid():
    for name in (None, 1, b"abc"):
        assert not is_valid_topic(name)
        with pytest.raises(InvalidTopicError):
            validate_topic(name)


def test_internal_topics_and_collisions():
    assert is_internal_topic("__consumer_offsets") and is_internal_topic("__transaction_state")
    assert not is_internal_topic("consumer_offsets")
    assert has_collision("a.b", "a_b") and has_collision("a_b", "a_b")
    assert not has_collision("a.b", "a-b")


def test_topic_partition_str_is_the_live_dir_name():
    assert str(TP("foo", 3)) == "foo-3" == log_dir_name(TP("foo", 3))


# -- partition directory names ---------------------------------------------------------------


def test_dir_names_kafka_builds():
    assert log_dir_name(TP("my.topic", 0)) == "my.topic-0"
    assert log_delete_dir_name(TP("t", 5), UUID) == f"t-5.{UUID}-delete"
    assert log_future_dir_name(TP("t", 5), UUID) == f"t-5.{UUID}-future"
    assert log_stray_dir_name(TP("t", 5), UUID) == f"t-5.{UUID}-stray"
    random_name = log_delete_dir_name(TP("t", 5))
    uid = random_name[len("t-5."):-len("-delete")]
    assert len(uid) == 32 and all(c in "0123456789abcdef" for c in uid)


@pytest.mark.parametrize("make, suffix", [
    (log_delete_dir_name, "-delete"), (log_stray_dir_name, "-stray")])
def test_delete_and_stray_names_are_capped_at_255(make, suffix):
    topic = "x" * 249
    name = make(TP(topic, 2147483647), UUID)
    tail = f"-2147483647.{UUID}{suffix}"
    assert name == topic[:255 - len(tail)] + tail and len(name) == 255
    # The cut topic is still parsed (it is a prefix of the real one).
    parsed = parse_partition_dir_name(name)
    assert parsed == PartitionDirName(TP(topic[:255 - len(tail)], 2147483647), suffix, UUID)


def test_future_names_are_not_capped():
    name = log_future_dir_name(TP("x" * 249, 2147483647), UUID)
    assert len(name) == 249 + len(f"-2147483647.{UUID}-future")


@pytest.mark.parametrize("tp, error", [
    (TP("a/b", 0), InvalidTopicError), (TP("..", 0), InvalidTopicError),
    (TP("", 0), InvalidTopicError), (TP("a", -1), ValueError), (TP("a", 2**31), ValueError),
    (TP("a", "1"), ValueError), (TP("a", True), ValueError),
])
def test_dir_names_refuse_invalid_topic_partitions(tp, error):
    for make in (log_dir_name, log_delete_dir_name, log_future_dir_name, log_stray_dir_name):
        with pytest.raises(error):
            make(tp)


def test_dir_names_refuse_unsafe_unique_ids():
    for uid in ("a/b", "", "a.b", "../x"):
        with pytest.raises(ValueError):
            log_delete_dir_name(TP("t", 0), uid)


# Names that Kafka's LocalLog.parseTopicPartitionName accepts, and what it returns.
KAFKA_ACCEPTS = [
    ("foo-0", TP("foo", 0), "", None),
    ("foo-12", TP("foo", 12), "", None),
    ("foo-bar-3", TP("foo-bar", 3), "", None),             # split at the last "-"
    ("my.topic_x-7", TP("my.topic_x", 7), "", None),
    ("foo-2147483647", TP("foo", 2147483647), "", None),
    (f"foo-0.{UUID}-delete", TP("foo", 0), "-delete", UUID),
    (f"foo-bar-3.{UUID}-future", TP("foo-bar", 3), "-future", UUID),
    (f"my.topic-4.{UUID}-stray", TP("my.topic", 4), "-stray", UUID),
    ("foo-5.x-delete", TP("foo", 5), "-delete", "x"),        # any \S+ unique id
    ("foo-delete-0", TP("foo-delete", 0), "", None),         # does not end in -delete
    ("foo--1", TP("foo-", 1), "", None),                     # the last "-" splits: topic "foo-"
    ("__cluster_metadata-0", TP("__cluster_metadata", 0), "", None),
]

# Names Kafka accepts that kafkastore's strict mode refuses.
KAFKA_ONLY = [
    ("foo-01", TP("foo", 1)),          # parseInt takes leading zeros
    ("foo-+1", TP("foo", 1)),          # and a plus sign
    ("foo-00", TP("foo", 0)),
    ("a:b-0", TP("a:b", 0)),           # Kafka never validates the topic while parsing
    ("caf\u00e9-0", TP("caf\u00e9", 0)),
    ("a" * 250 + "-0", TP("a" * 250, 0)),
]

# Names neither accepts.
BOTH_REFUSE = [
    "", "foo", "-", "foo-", "-0", "foo-x", "foo-1.5", "foo-2147483648",
    "foo-0-delete",                     # ends in -delete but has no ".<id>"
    f"foo.{UUID}-delete",               # no "-<partition>" before the id
    "foo-0.-delete",                    # empty id
    f"foo 0.{UUID}-delete",             # a blank inside
    f"-0.{UUID}-delete",                # empty topic
    f"foo-.{UUID}-future",              # empty partition
    f"foo-x.{UUID}-stray",
    ".", "..",
]


@pytest.mark.parametrize("name, tp, suffix, uid", KAFKA_ACCEPTS)
def test_parse_accepts_kafka_dir_names(name, tp, suffix, uid):
    for strict in (True, False):
        assert parse_partition_dir_name(name, strict=strict) == PartitionDirName(tp, suffix, uid)
        assert parse_topic_partition_name(name, strict=strict) == tp


@pytest.mark.parametrize("name, tp", KAFKA_ONLY)
def test_parse_strict_refuses_what_kafka_only_assumes(name, tp):
    with pytest.raises(InvalidPartitionDirError):
        parse_topic_partition_name(name)
    assert parse_topic_partition_name(name, strict=False) == tp


def test_non_ascii_digits_are_refused_even_when_not_strict():
    """A documented difference: Java's parseInt reads "\u0661" (Arabic-Indic one) as 1;
    kafkastore reads ASCII digits only, in both modes. Kafka never writes such a name."""
    for strict in (True, False):
        with pytest.raises(InvalidPartitionDirError):
            parse_topic_partition_name("foo-\u0661", strict=strict)


@pytest.mark.parametrize("name", BOTH_REFUSE)
def test_parse_refuses_with_kafkas_message(name):
    for strict in (True, False):
        with pytest.raises(InvalidPartitionDirError) as info:
            parse_topic_partition_name(name, strict=strict, path=f"/logs/{name}")
        assert f"Found directory /logs/{name}, '{name}' is not in the form of topic-partition " \
               "or topic-partition.uniqueId-delete" in info.value.message
        assert info.value.name == name and info.value.path == f"/logs/{name}"


def test_parse_strict_names_the_reason():
    with pytest.raises(InvalidPartitionDirError, match="Topic name is invalid"):
        parse_topic_partition_name("a:b-0")
    with pytest.raises(InvalidPartitionDirError, match="partition '01'"):
        parse_topic_partition_name("foo-01")


@pytest.mark.parametrize("tp", [TP("a", 0), TP("foo-bar", 17), TP("x.y_z", 2147483647),
                                TP("-", 3), TP("a" * 249, 1)])
def test_names_round_trip(tp):
    assert parse_topic_partition_name(log_dir_name(tp)) == tp
    for make, suffix in ((log_delete_dir_name, "-delete"), (log_future_dir_name, "-future"),
                         (log_stray_dir_name, "-stray")):
        parsed = parse_partition_dir_name(make(tp))
        assert parsed.suffix == suffix and len(parsed.unique_id) == 32
        if make is log_future_dir_name or len(make(tp)) < 255:
            assert parsed.topic_partition == tp


# -- partition directories stay inside the log directory -------------------------------------


@pytest.fixture
def log_root(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    return root


def test_plain_partition_dir_is_accepted(log_root):
    (log_root / "foo-0").mkdir()
    assert check_partition_dir(str(log_root), "foo-0") == os.path.join(str(log_root), "foo-0")


def test_symlink_to_outside_is_refused(log_root):
    os.symlink(log_root.parent / "outside", log_root / "foo-0")
    with pytest.raises(UnsafePathError) as info:
        check_partition_dir(str(log_root), "foo-0")
    assert info.value.path == os.path.join(str(log_root), "foo-0")
    assert info.value.log_dir == str(log_root)
    assert "outside the log directory" in info.value.message


def test_relative_symlink_escaping_is_refused(log_root):
    os.symlink("../outside", log_root / "foo-0")
    with pytest.raises(UnsafePathError):
        check_partition_dir(str(log_root), "foo-0")


def test_symlink_chain_ending_outside_is_refused(log_root):
    os.symlink(log_root.parent / "outside", log_root / "hop")
    os.symlink("hop", log_root / "foo-0")
    with pytest.raises(UnsafePathError):
        check_partition_dir(str(log_root), "foo-0")


def test_symlink_to_the_log_dir_itself_is_refused(log_root):
    os.symlink(".", log_root / "foo-0")
    with pytest.raises(UnsafePathError):
        check_partition_dir(str(log_root), "foo-0")


def test_symlink_inside_the_log_dir_is_accepted(log_root):
    (log_root / "real").mkdir()
    os.symlink("real", log_root / "foo-0")
    assert check_partition_dir(str(log_root), "foo-0").endswith("foo-0")


def test_log_dir_reached_through_a_symlink_is_fine(log_root):
    alias = log_root.parent / "alias"
    os.symlink(log_root, alias)
    (log_root / "foo-0").mkdir()
    assert check_partition_dir(str(alias), "foo-0") == os.path.join(str(alias), "foo-0")


def test_sibling_with_common_prefix_is_outside(log_root):
    """``/x/logs2`` starts with ``/x/logs`` but is not inside it."""
    (log_root.parent / "logs2").mkdir()
    os.symlink(log_root.parent / "logs2", log_root / "foo-0")
    with pytest.raises(UnsafePathError):
        check_partition_dir(str(log_root), "foo-0")


@pytest.mark.parametrize("name", ["..", ".", "", "../x", "a/../../b", "/etc", "a/b", "a\\b",
                                  "foo\x00-0", "../outside"])
def test_traversal_names_are_refused(log_root, name):
    with pytest.raises(UnsafePathError):
        check_partition_dir(str(log_root), name)


# -- the .lock file --------------------------------------------------------------------------


def run_python(code: str, *args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


TRY_LOCK = """
    import sys
    from kafkastore.errors import LogDirectoryLockedError
    from kafkastore.log_dir import LogDirLock
    try:
        LogDirLock(sys.argv[1]).release()
    except LogDirectoryLockedError as e:
        print("locked", e.path)
    else:
        print("acquired")
"""

HOLD_LOCK = """
    import sys
    from kafkastore.log_dir import LogDirLock
    lock = LogDirLock(sys.argv[1])
    print("holding", flush=True)
    sys.stdin.read()   # hold until the parent closes stdin or kills us
"""

# What a Kafka broker does: FileChannel.tryLock, an fcntl (POSIX record) lock on .lock.
BROKER_LOCK = """
    import fcntl, os, sys
    fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("refused", flush=True)
        sys.exit(0)
    print("holding", flush=True)
    sys.stdin.read()
"""


def try_lock_in_child(path) -> str:
    proc = run_python(TRY_LOCK, str(path))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out.strip()


def test_lock_creates_dot_lock_and_releases(tmp_path):
    lock = LogDirLock(str(tmp_path))
    assert lock.locked and lock.path == os.path.join(str(tmp_path), ".lock")
    assert os.path.isfile(lock.path)
    lock.release()
    assert not lock.locked
    lock.release()  # idempotent
    assert os.path.isfile(lock.path)  # left in place: no delete/relock race


def test_second_lock_in_same_process_fails(tmp_path):
    with LogDirLock(str(tmp_path)) as first:
        with pytest.raises(LogDirectoryLockedError) as info:
            LogDirLock(str(tmp_path))
        err = info.value
        assert err.path == os.path.join(str(tmp_path), ".lock")
        assert err.log_dir == str(tmp_path)
        assert f"Failed to acquire lock on file .lock in {tmp_path}" in err.message
        assert isinstance(err, KafkaStoreError)
        # The failed attempt must not have dropped the first lock (closing any fd of a
        # POSIX-locked file would): another process is still refused.
        assert first.locked
        assert try_lock_in_child(tmp_path).startswith("locked")


def test_second_lock_through_another_path_fails(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(d, tmp_path / "alias")
    with LogDirLock(str(d)):
        with pytest.raises(LogDirectoryLockedError):
            LogDirLock(str(tmp_path / "alias"))
        with pytest.raises(LogDirectoryLockedError):
            LogDirLock(str(d / "." / ".." / "d"))


def test_release_then_reacquire(tmp_path):
    for _ in range(3):
        with LogDirLock(str(tmp_path)) as lock:
            assert lock.locked
        assert not lock.locked
    assert try_lock_in_child(tmp_path) == "acquired"


def test_other_directories_are_independent(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with LogDirLock(str(tmp_path / "a")), LogDirLock(str(tmp_path / "b")):
        pass


def test_second_process_gets_the_lock_error(tmp_path):
    with LogDirLock(str(tmp_path)):
        assert try_lock_in_child(tmp_path) == f"locked {os.path.join(str(tmp_path), '.lock')}"
    assert try_lock_in_child(tmp_path) == "acquired"


def test_lock_held_by_another_process_then_released_when_it_dies(tmp_path):
    holder = run_python(HOLD_LOCK, str(tmp_path))
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(LogDirectoryLockedError):
            LogDirLock(str(tmp_path))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=60)
    assert holder.returncode == -signal.SIGKILL
    # The killed process never released anything; the kernel did. The .lock file stays.
    assert os.path.exists(tmp_path / ".lock")
    with LogDirLock(str(tmp_path)) as lock:
        assert lock.locked


def test_a_broker_holding_the_directory_excludes_us(tmp_path):
    broker = run_python(BROKER_LOCK, str(tmp_path))
    try:
        assert broker.stdout.readline().strip() == "holding"
        with pytest.raises(LogDirectoryLockedError, match="another process"):
            LogDirLock(str(tmp_path))
    finally:
        broker.kill()
        broker.communicate(timeout=60)


def test_we_exclude_a_broker(tmp_path):
    with LogDirLock(str(tmp_path)):
        broker = run_python(BROKER_LOCK, str(tmp_path))
        out, err = broker.communicate(timeout=60)
        assert out.strip() == "refused", err


def test_forked_child_does_not_hold_the_lock(tmp_path):
    with LogDirLock(str(tmp_path)) as lock:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 1
            try:
                os.close(r)
                locked = lock.locked
                refused = False
                try:
                    LogDirLock(str(tmp_path))
                except LogDirectoryLockedError as e:
                    # the parent's OS lock, seen from another process; not the registry
                    refused = "held by another process" in e.message
                # The child may lock the directory itself once the parent is gone; the
                # inherited object must not be able to drop that lock by closing its copy.
                fd_closed_at_fork = lock._fd is None
                lock.release()
                os.write(w, b"%d%d%d" % (locked, refused, fd_closed_at_fork))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            answer = f.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert answer == b"011"  # not locked in the child; refused by the parent's lock
        assert lock.locked      # the child's release did not release the parent
        assert try_lock_in_child(tmp_path).startswith("locked")


def test_lock_on_missing_directory_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        LogDirLock(str(tmp_path / "missing"))


def test_lock_file_symlink_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(target, d / ".lock")
    with pytest.raises(OSError):
        LogDirLock(str(d))
    with LogDirLock(str(tmp_path)):  # the registry was not left holding anything
        pass
    os.unlink(d / ".lock")
    with LogDirLock(str(d)):
        pass


# -- meta.properties -------------------------------------------------------------------------

DIR_ID = "AAECAwQFBgcICQoLDA0ODw"  # Uuid of bytes 0..15, URL-safe base64 without padding


def test_meta_properties_written_as_java_properties_store(tmp_path):
    meta = MetaProperties(version=1, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1,
                          directory_id=DIR_ID)
    write_meta_properties(str(tmp_path), meta, now=1729857600)  # 2024-10-25 12:00:00 UTC
    assert (tmp_path / "meta.properties").read_text() == (
        "#\n"
        "#Fri Oct 25 12:00:00 UTC 2024\n"
        "version=1\n"
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"
        "node.id=1\n"
        f"directory.id={DIR_ID}\n")
    assert os.listdir(tmp_path) == ["meta.properties"]
    assert read_meta_properties(str(tmp_path)) == meta


def test_meta_properties_v0_uses_broker_id(tmp_path):
    write_meta_properties(str(tmp_path), MetaProperties(version=0, node_id=7), now=0)
    lines = (tmp_path / "meta.properties").read_text().splitlines()
    assert lines == ["#", "#Thu Jan 01 00:00:00 UTC 1970", "version=0", "broker.id=7"]
    assert read_meta_properties(str(tmp_path)) == MetaProperties(0, None, 7, None)


def test_reads_a_file_as_a_broker_writes_it(tmp_path):
    # Hash-map order, a comment, an unknown key, blanks around "=".
    (tmp_path / "meta.properties").write_text(
        "#\n#Tue Mar 05 10:21:42 UTC 2024\n"
        f"node.id = 3\ndirectory.id={DIR_ID}\nversion=1\nsome.future.key=x\ncluster.id=abc\n")
    assert read_meta_properties(str(tmp_path)) == MetaProperties(1, "abc", 3, DIR_ID)


def test_missing_meta_properties_is_none(tmp_path):
    assert read_meta_properties(str(tmp_path)) is None


def test_meta_properties_values_are_escaped(tmp_path):
    meta = MetaProperties(version=1, cluster_id=" a=b:c#d!e\\f", node_id=-1)
    write_meta_properties(str(tmp_path), meta, now=0)
    text = (tmp_path / "meta.properties").read_text()
    assert "cluster.id=\\ a\\=b\\:c\\#d\\!e\\\\f\n" in text
    assert read_meta_properties(str(tmp_path)) == meta


@pytest.mark.parametrize("text, key, message", [
    ("version=2\nnode.id=1\ncluster.id=a\n", "version", "Unknown meta.properties version number 2"),
    ("version=x\n", "version", "Unable to read version as a base-10 integer"),
    ("version=1\ncluster.id=a\n", "node.id", "node.id"),
    ("version=1\nnode.id=1\n", "cluster.id", "cluster.id was not found."),
    ("version=1\nnode.id=one\ncluster.id=a\n", "node.id", "Unable to read node.id"),
    ("version=0\nbroker.id=1.5\n", "broker.id", "Unable to read broker.id"),
    ("version=1\nnode.id=1\ncluster.id=a\ndirectory.id=nope\n", "directory.id", "Uuid"),
    ("version=1\nnode.id=1\ncluster.id=a\ndirectory.id=AAECAwQFBgcICQoLDA0ODw8P\n",
     "directory.id", "Uuid"),                                  # 18 bytes
    ("version=1\nnode.id=1\ncluster.id=a\ndirectory.id=AAECAwQFBgcICQoLDA0O/w\n",
     "directory.id", "Uuid"),                                  # "/" is not URL-safe base64
])
def test_invalid_meta_properties(tmp_path, text, key, message):
    (tmp_path / "meta.properties").write_text(text)
    with pytest.raises(InvalidMetaPropertiesError) as info:
        read_meta_properties(str(tmp_path))
    assert info.value.key == key and message in info.value.message
    assert info.value.path == str(tmp_path / "meta.properties")


def test_meta_properties_not_utf8(tmp_path):
    (tmp_path / "meta.properties").write_bytes(b"version=1\ncluster.id=\xff\n")
    with pytest.raises(InvalidMetaPropertiesError, match="not UTF-8"):
        read_meta_properties(str(tmp_path))


def test_version0_without_ids_is_legal(tmp_path):
    (tmp_path / "meta.properties").write_text("version=0\n")
    assert read_meta_properties(str(tmp_path)) == MetaProperties(0, None, None, None)


@pytest.mark.parametrize("meta", [
    MetaProperties(version=1, node_id=1),                      # no cluster.id
    MetaProperties(version=1, cluster_id="a"),                  # no node.id
    MetaProperties(version=3, cluster_id="a", node_id=1),
    MetaProperties(version=1, cluster_id="a\nb", node_id=1),   # would break the file
    MetaProperties(version=1, cluster_id="a", node_id=1, directory_id="x"),
    MetaProperties(version=1, cluster_id="a", node_id=2**31),
])
def test_invalid_meta_properties_are_not_written(tmp_path, meta):
    with pytest.raises(InvalidMetaPropertiesError):
        write_meta_properties(str(tmp_path), meta)
    assert os.listdir(tmp_path) == []
