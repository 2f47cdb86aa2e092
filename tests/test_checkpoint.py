"""Checkpoint files: Kafka's text format byte for byte, every malformed case, crash safety.

Expected file contents are spelled out from the format in kafka-storage.md §1.6 (version
line, count line, ``<topic> <partition> <offset>`` lines, ``\\n`` endings), not produced
by the code under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _logtools import Crash, FaultFS, installed
from hypothesis import given
from hypothesis import strategies as st

from kafkastore.checkpoint import (
    RECOVERY_POINT_CHECKPOINT_FILE,
    CheckpointFile,
    OffsetCheckpointFile,
    write_atomically,
)
from kafkastore.errors import CorruptCheckpointError, InvalidTopicError, KafkaStoreError
from kafkastore.topic import TopicPartition

TP = TopicPartition


def offsets_file(tmp_path, content: bytes | None = None) -> OffsetCheckpointFile:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT_FILE
    if content is not None:
        path.write_bytes(content)
    return OffsetCheckpointFile(str(path))


# -- what Kafka writes -----------------------------------------------------------------------


def test_write_is_byte_exact(tmp_path):
    cp = offsets_file(tmp_path)
    cp.write({TP("foo", 0): 5, TP("bar.baz_q-x", 12): 100, TP("__consumer_offsets", 49): 0})
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes() == (
        b"0\n3\nfoo 0 5\nbar.baz_q-x 12 100\n__consumer_offsets 49 0\n")


def test_empty_write_is_version_and_zero(tmp_path):
    cp = offsets_file(tmp_path)
    cp.write({})
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes() == b"0\n0\n"
    assert cp.read() == {}


def test_extreme_values_round_trip_as_decimal(tmp_path):
    cp = offsets_file(tmp_path)
    cp.write({TP("t" * 249, 2**31 - 1): 2**63 - 1})
    data = (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes()
    assert data == b"0\n1\n" + b"t" * 249 + b" 2147483647 9223372036854775807\n"
    assert cp.read() == {TP("t" * 249, 2**31 - 1): 2**63 - 1}


def test_write_leaves_no_temp_file(tmp_path):
    cp = offsets_file(tmp_path)
    cp.write({TP("a", 0): 1})
    assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_generic_checkpoint_file_with_other_version(tmp_path):
    """A leader-epoch style checkpoint: version 0, ``<epoch> <offset>`` lines."""

    class Epochs:
        def to_string(self, entry):
            return f"{entry[0]} {entry[1]}"

        def from_string(self, line):
            parts = line.split(" ")
            return (int(parts[0]), int(parts[1])) if len(parts) == 2 else None

    cp = CheckpointFile(str(tmp_path / "leader-epoch-checkpoint"), 0, Epochs())
    cp.write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n3 120\n"
    assert cp.read() == [(0, 0), (3, 120)]
    other = CheckpointFile(str(tmp_path / "leader-epoch-checkpoint"), 7, Epochs())
    with pytest.raises(CorruptCheckpointError, match="Unrecognised version:0, expected version: 7"):
        other.read()


def test_entry_with_line_terminator_is_refused(tmp_path):
    class Raw:
        def to_string(self, entry):
            return entry

        def from_string(self, line):
            return line

    cp = CheckpointFile(str(tmp_path / "cp"), 0, Raw())
    for bad in ("a\nb", "a\rb"):
        with pytest.raises(ValueError, match="line terminator"):
            cp.write([bad])
    assert not (tmp_path / "cp").exists()


@pytest.mark.parametrize("offsets, error", [
    ({TP("a/b", 0): 1}, InvalidTopicError),
    ({TP("..", 0): 1}, InvalidTopicError),
    ({TP("a b", 0): 1}, InvalidTopicError),
    ({TP("a", -1): 1}, ValueError),
    ({TP("a", 2**31): 1}, ValueError),
    ({TP("a", 0): -1}, ValueError),
    ({TP("a", 0): 2**63}, ValueError),
    ({TP("a", 0): 1.0}, ValueError),
    ({TP("a", 0): True}, ValueError),
    ({TP("a", "0"): 1}, ValueError),
])
def test_write_refuses_what_kafka_could_not_read_back(tmp_path, offsets, error):
    cp = offsets_file(tmp_path, b"0\n1\nold 0 7\n")
    with pytest.raises(error):
        cp.write(offsets)
    assert cp.read() == {TP("old", 0): 7}
    assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT_FILE]


# -- what Kafka reads ------------------------------------------------------------------------


@pytest.mark.parametrize("content, expected", [
    (b"", {}),                                   # empty file
    (b"0", {}),                                  # version only, no newline
    (b"0\n", {}),                                # version only: missing count line is empty
    (b"0\n0\n", {}),
    (b"0\n0", {}),
    (b"0\n1\nfoo 0 5", {TP("foo", 0): 5}),       # no final newline
    (b"0\r\n1\r\nfoo 0 5\r\n", {TP("foo", 0): 5}),  # readLine ends lines at \r\n
    (b"0\r1\rfoo 0 5\r", {TP("foo", 0): 5}),     # and at a lone \r
    (b"0\n1\nfoo\t0\t5\n", {TP("foo", 0): 5}),   # split on \s+
    (b"0\n1\nfoo  0 \x0b\f 5\n", {TP("foo", 0): 5}),
    (b"0\n1\nfoo 0 5 \n", {TP("foo", 0): 5}),    # Java's split drops trailing empty fields
    (b"+0\n+1\nfoo +0 +5\n", {TP("foo", 0): 5}),  # parseInt takes a leading +
    (b"00\n01\nfoo 00 05\n", {TP("foo", 0): 5}),
    (b"0\n2\nfoo 0 5\nfoo 0 9\n", {TP("foo", 0): 9}),  # a repeated partition: the last wins
    (b"0\n2\nb 1 2\na 0 1\n", {TP("b", 1): 2, TP("a", 0): 1}),
])
def test_read_accepts_what_kafka_accepts(tmp_path, content, expected):
    assert offsets_file(tmp_path, content).read() == expected


@pytest.mark.parametrize("content, line, message", [
    (b"1\n0\n", 1, "Unrecognised version:1, expected version: 0"),
    (b"-1\n0\n", 1, "Unrecognised version:-1"),
    (b"x\n0\n", 1, "Malformed line"),
    (b"\n", 1, "Malformed line"),                       # an empty version line
    (b" 0\n0\n", 1, "Malformed line"),                   # parseInt takes no blanks
    (b"\xef\xbb\xbf0\n0\n", 1, "Malformed line"),       # nor a byte order mark
    (b"2147483648\n0\n", 1, "Malformed line"),          # version overflows an int
    (b"0\nx\n", 2, "Malformed line"),
    (b"0\n\n", 2, "Malformed line"),
    (b"0\n1.0\n", 2, "Malformed line"),
    (b"0\n-1\n", 2, "Negative entry count"),
    (b"0\n2\nfoo 0 5\n", 4, "Expected [2] entries in checkpoint file, but found only [1]"),
    (b"0\n3\n", 3, "Expected [3] entries in checkpoint file, but found only [0]"),
    (b"0\n1\nfoo 0 5\nbar 0 6\n", 4, "Expected [1] entries in checkpoint file, but found only [2]"),
    (b"0\n0\nfoo 0 5\n", 3, "Expected [0] entries"),
    (b"0\n1\nfoo 0\n", 3, "Malformed line"),            # two fields
    (b"0\n1\nfoo 0 5 6\n", 3, "Malformed line"),        # four fields
    (b"0\n1\n foo 0 5\n", 3, "Malformed line"),         # a leading blank makes an empty field
    (b"0\n1\nfoo 0 5\n\n", 4, "Malformed line"),        # an empty line after the entries
    (b"0\n1\n\nfoo 0 5\n", 3, "Malformed line"),
    (b"0\n1\nfoo x 5\n", 3, "partition 'x'"),
    (b"0\n1\nfoo 0 x\n", 3, "offset 'x'"),
    (b"0\n1\nfoo 0 5x\n", 3, "offset '5x'"),
    (b"0\n1\nfoo 0 1_000\n", 3, "offset '1_000'"),      # Python's int() would take it
    (b"0\n1\nfoo 0 \xd9\xa1\n", 3, "offset"),           # an Arabic-Indic digit one
    (b"0\n1\nfoo 0 9223372036854775808\n", 3, "offset"),  # overflows a long
    (b"0\n1\nfoo 2147483648 5\n", 3, "partition"),      # overflows an int
    (b"0\n1\nfoo -1 5\n", 3, "partition '-1'"),
    (b"0\n1\nfoo 0 -1\n", 3, "offset '-1'"),
    (b"0\n1\na/b 0 5\n", 3, "illegal topic name 'a/b'"),
    (b"0\n1\n.. 0 5\n", 3, "illegal topic name '..'"),
    (b"0\n1\nfo\x00o 0 5\n", 3, "illegal topic name"),
    (b"0\n1\n" + b"t" * 250 + b" 0 5\n", 3, "illegal topic name"),
    (b"0\n1\nfoo\xc2\xa00 5\n", 3, "Malformed line"),   # NBSP is no blank for Java's \s
    (b"0\n1\nfoo 0 5\x1c\n", 3, "offset"),              # nor is \x1c a line end for readLine
    (b"0\n1\n\xff 0 5\n", 3, "not UTF-8"),
    (b"0\n2\nfoo 0 5\n\xc3\n", 4, "not UTF-8"),
])
def test_read_refuses_malformed_files_naming_file_and_line(tmp_path, content, line, message):
    cp = offsets_file(tmp_path, content)
    with pytest.raises(CorruptCheckpointError) as info:
        cp.read()
    err = info.value
    assert err.path == str(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE)
    assert err.line == line
    assert message in err.message
    assert f"path={err.path}" in str(err) and f"line={line}" in str(err)
    assert isinstance(err, KafkaStoreError) and isinstance(err, ValueError)


def test_missing_file_reads_as_empty_and_is_not_created(tmp_path):
    cp = offsets_file(tmp_path)
    assert cp.read() == {}
    assert os.listdir(tmp_path) == []


def test_corrupt_checkpoint_error_survives_pickling(tmp_path):
    import pickle

    with pytest.raises(CorruptCheckpointError) as info:
        offsets_file(tmp_path, b"0\n1\nfoo 0 x\n").read()
    again = pickle.loads(pickle.dumps(info.value))
    assert (type(again), again.path, again.line, str(again)) == (
        CorruptCheckpointError, info.value.path, 3, str(info.value))


TOPICS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                 min_size=1, max_size=249).filter(lambda t: t not in (".", ".."))


@given(st.dictionaries(st.builds(TP, TOPICS, st.integers(0, 2**31 - 1)),
                       st.integers(0, 2**63 - 1), max_size=30))
def test_round_trip(tmp_path_factory, offsets):
    cp = offsets_file(tmp_path_factory.mktemp("cp"))
    cp.write(offsets)
    assert cp.read() == offsets
    lines = Path(cp.path).read_bytes().split(b"\n")
    assert lines[:2] == [b"0", str(len(offsets)).encode()] and lines[-1] == b""
    assert lines[2:-1] == [f"{tp.topic} {tp.partition} {o}".encode() for tp, o in offsets.items()]


# -- crashes and I/O errors ------------------------------------------------------------------

OLD = {TP("old", 0): 10, TP("old", 1): 11}
NEW = {TP("new", 0): 20, TP("new", 1): 21, TP("new", 2): 22}


class RenameTrackingFS(FaultFS):
    """FaultFS, plus the one piece of directory durability a checkpoint depends on: a
    rename is durable only once its directory has been fsynced. (FaultFS models file
    contents, not directory entries.)"""

    def __init__(self, faults=None):
        super().__init__(faults)
        self.renames: list[list] = []   # [src, dst, durable]

    def rename(self, src, dst):
        super().rename(src, dst)
        self.renames.append([os.path.abspath(src), os.path.abspath(dst), False])

    def fsync_dir(self, path):
        super().fsync_dir(path)
        for r in self.renames:
            if os.path.dirname(r[1]) == os.path.abspath(path):
                r[2] = True


def possible_contents(fs: RenameTrackingFS, path: str, old: bytes) -> set[bytes]:
    """Every content a crash now could leave at ``path``: the old file if the rename into
    place did not happen or may be lost; the renamed file cut anywhere between what was
    fsynced and what was written (we take both ends) if the rename happened."""
    path = os.path.abspath(path)
    into = [r for r in fs.renames if r[1] == path]
    if not into:
        return {old}
    current = Path(path).read_bytes()
    synced = fs.synced.get(path, len(current))
    outcomes = {current[:synced], current}
    if not into[-1][2]:
        outcomes.add(old)
    return outcomes


def read_image(where, content: bytes) -> dict:
    """Read ``content`` as a checkpoint, in a scratch directory ``where``."""
    where.mkdir(exist_ok=True)
    return offsets_file(where, content).read()


def count_steps(tmp_path) -> int:
    """How many file-system changes one checkpoint write makes (with a leftover .tmp)."""
    d = tmp_path / "count"
    d.mkdir()
    cp = offsets_file(d, b"0\n0\n")
    (d / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")).write_bytes(b"junk")
    with installed(FaultFS()) as fs:
        cp.write(NEW)
    return fs.calls["any"]


def test_a_completed_write_is_durable(tmp_path):
    cp = offsets_file(tmp_path)
    cp.write(OLD)
    old = Path(cp.path).read_bytes()
    with installed(RenameTrackingFS()) as fs:
        cp.write(NEW)
    # Only the new bytes, whole: the file was fsynced before the rename and the rename
    # was made durable by the directory fsync before write() returned.
    assert possible_contents(fs, cp.path, old) == {Path(cp.path).read_bytes()}
    assert cp.read() == NEW


@pytest.mark.parametrize("leftover", [False, True])
def test_crash_at_every_step_leaves_old_or_new_whole(tmp_path, leftover):
    steps = count_steps(tmp_path)
    assert steps >= 5  # unlink tmp, create tmp, write, fsync, rename, fsync dir
    for n in range(1, steps + 1):
        d = tmp_path / f"crash-{n}"
        d.mkdir()
        cp = offsets_file(d)
        cp.write(OLD)
        old = Path(cp.path).read_bytes()
        if leftover:
            (d / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")).write_bytes(b"0\n9\ntorn 0")
        with installed(RenameTrackingFS({"any": {n: "crash"}})) as fs, pytest.raises(Crash):
            cp.write(NEW)
        outcomes = possible_contents(fs, cp.path, old)
        for content in outcomes:
            assert read_image(tmp_path / f"image-{n}", content) in (OLD, NEW), (
                n, fs.fired, content)
        # The live directory (as if every write reached the disk) is also whole.
        assert cp.read() in (OLD, NEW)
        # The restarted process rewrites the checkpoint over whatever .tmp was left.
        again = offsets_file(d)
        again.write(NEW)
        assert again.read() == NEW
        assert os.listdir(d) == [RECOVERY_POINT_CHECKPOINT_FILE]


@pytest.mark.parametrize("op, action", [
    ("write", "enospc"), ("write", "partial-enospc"), ("fsync", "eio"), ("rename", "crash"),
])
def test_io_error_keeps_the_old_checkpoint(tmp_path, op, action):
    cp = offsets_file(tmp_path)
    cp.write(OLD)
    with installed(FaultFS({op: {1: action}})), pytest.raises((OSError, Crash)):
        cp.write(NEW)
    assert cp.read() == OLD
    if action != "crash":  # an ordinary error cleans its temp file up
        assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_short_writes_still_write_everything(tmp_path):
    cp = offsets_file(tmp_path)
    with installed(FaultFS({"write": {1: "short", 2: "short", 3: "short"}})) as fs:
        cp.write(NEW)
    assert fs.calls["write"] > 1
    assert cp.read() == NEW


def test_leftover_temp_symlink_is_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    d = tmp_path / "dir"
    d.mkdir()
    cp = offsets_file(d)
    os.symlink(outside, d / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp"))
    cp.write(NEW)
    assert outside.read_bytes() == b"precious"
    assert cp.read() == NEW
    assert sorted(os.listdir(d)) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_write_atomically_replaces_the_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"old")
    write_atomically(str(path), b"new bytes")
    assert path.read_bytes() == b"new bytes"
    assert os.listdir(tmp_path) == ["f"]
