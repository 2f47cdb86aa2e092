"""Kafka's checkpoint files: small text files replaced whole, atomically.

A log directory keeps its per-partition bookkeeping in checkpoint files
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``, ``replication-offset-checkpoint``), all in the
text format of Kafka's ``CheckpointFile`` (``server-common/.../CheckpointFile.java``)::

    <version>\\n
    <entry count>\\n
    <entry>\\n        (count lines)

A checkpoint is never edited in place. :func:`write_atomically` writes the new
text to ``<file>.tmp`` in the same directory, fsyncs it, renames it over the
file and fsyncs the directory, so after a crash the file holds either the old
text or the new one, never a mix (KAFKA-16541 is what a missing fsync costs).

All file I/O goes through :mod:`kafkastore._fileio`, the fault-injection seam.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from kafkastore import _fileio
from kafkastore.errors import CorruptCheckpointError
from kafkastore.topic import MAX_PARTITION, TopicPartition, is_valid_topic, validate_topic

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "TEMP_SUFFIX",
    "CheckpointFile",
    "EntryFormatter",
    "OffsetCheckpointFile",
    "write_atomically",
]

#: ``LogManager.RecoveryPointCheckpointFile``
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
#: ``LogManager.LogStartOffsetCheckpointFile``
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
#: ``LogCleanerManager.offsetCheckpointFile``
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
#: ``ReplicaManager.HighWatermarkFilename`` (kafkastore has no replicas; named for completeness)
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
#: Appended to a checkpoint's name for the file the next version is written to.
TEMP_SUFFIX = ".tmp"

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# Java's Integer.parseInt / Long.parseLong grammar, ASCII digits only (Java also
# takes other Unicode decimal digits, which no Kafka writer ever produces).
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# BufferedReader.readLine ends a line at "\n", "\r" or "\r\n", nothing else
# (str.splitlines would also split at \v, \f, \x1c-\x1e, \x85, \u2028, \u2029).
_LINE_END = re.compile(r"\r\n|\r|\n")
# Java's "\\s" without UNICODE_CHARACTER_CLASS: the six ASCII blanks.
_JAVA_BLANKS = re.compile(r"[ \t\n\x0b\f\r]+")

T = TypeVar("T")


def _parse_java_int(text: str, lo: int, hi: int) -> int | None:
    """``text`` as Java's ``parseInt``/``parseLong`` reads it, if within ``[lo, hi]``."""
    if _JAVA_INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if lo <= value <= hi else None


class EntryFormatter(Protocol[T]):
    """Turns one entry into one line and back (Kafka's ``CheckpointFile.EntryFormatter``)."""

    def to_string(self, entry: T) -> str:
        """The line for ``entry``, without a line terminator."""
        ...

    def from_string(self, line: str) -> T | None:
        """The entry on ``line``; None if the line is malformed. May instead raise
        :class:`ValueError`, whose text then says why."""
        ...


def write_atomically(path: str, data: bytes) -> None:
    """Replace the file ``path`` by ``data`` so that a crash leaves the old bytes or the new.

    Kafka's ``CheckpointFile.write`` protocol: write ``<path>.tmp`` in the same
    directory, fsync it, rename it over ``path`` (``Utils.atomicMoveWithFallback``),
    fsync the directory. A ``.tmp`` left over by a crash is deleted first and the
    new one is created with ``O_EXCL``, so a planted file or symlink is never
    written through. If a step fails with an :class:`OSError` the temp file is
    removed (best effort), ``path`` is left as it was unless the rename already
    happened, and the error propagates: after a failed fsync nothing is retried
    (on Linux a second fsync can succeed without the data being on disk).

    Raises
    ------
    OSError
        From any step; when it comes from the final directory fsync the new
        bytes are in place but not known to be durable.
    """
    fs = _fileio.fs
    path = os.path.abspath(path)
    tmp = path + TEMP_SUFFIX
    fs.unlink(tmp)
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            _fileio.write_fully(fd, data)
            fs.fsync(fd)
        finally:
            fs.close(fd)
    except Exception:
        # A Crash from the fault-injection file system is a BaseException and must
        # leave the temp file behind, as a real crash would; an ordinary error cleans up.
        try:
            fs.unlink(tmp)
        except OSError:
            pass
        raise
    fs.rename(tmp, path)
    fs.fsync_dir(os.path.dirname(path))


def _split_lines(text: str) -> list[str]:
    """Lines as ``BufferedReader.readLine`` returns them: a final terminator ends
    the last line rather than starting an empty one."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


class CheckpointFile(Generic[T]):
    """One checkpoint file of a given version and entry type (Kafka's ``CheckpointFile``).

    File format (UTF-8 text, lines ended by ``\\n``)::

        <version>           decimal int, must equal ``version``
        <count>             decimal int, the number of entry lines
        <entry>             count lines, each formatter.to_string(entry)

    Reading follows ``CheckpointFile.read``: an empty file, or one with only a
    version line, holds no entries; a line ends at ``\\n``, ``\\r`` or
    ``\\r\\n``; after the count line every line, an empty one included, must
    parse as an entry; the number of entries must equal the count, so missing
    and extra lines both fail. Any violation raises
    :class:`~kafkastore.errors.CorruptCheckpointError` naming the file and the
    line. Two deliberate differences from Kafka: a missing file reads as no
    entries instead of being created by the constructor (a reader should not
    write), and a negative count is a :class:`CorruptCheckpointError` (in Java
    it is an ``IllegalArgumentException`` from ``new ArrayList(-1)``).

    Writing replaces the file with :func:`write_atomically`, so a crash at any
    point leaves the previous checkpoint or the new one, whole.

    Thread-safety: :meth:`read` and :meth:`write` of one instance serialise on
    an internal lock (Kafka's ``synchronized (lock)``). Two instances for the
    same file, in one process or two, are not coordinated: keep one instance
    per file, under the log directory's lock.
    """

    def __init__(self, path: str, version: int, formatter: EntryFormatter[T]) -> None:
        if not (0 <= version <= _INT32_MAX):
            raise ValueError(f"checkpoint version must be an int in [0, {_INT32_MAX}]: {version!r}")
        self.path = os.path.abspath(path)
        self.version = version
        self.formatter = formatter
        self._lock = threading.Lock()

    @property
    def temp_path(self) -> str:
        """Where the next version is written before it is renamed into place."""
        return self.path + TEMP_SUFFIX

    def write(self, entries: Iterable[T]) -> None:
        """Replace the file with ``entries``, in their iteration order.

        Raises
        ------
        ValueError
            If the formatter produces a line with a line terminator in it (it
            would be read back as two lines); nothing is written.
        OSError
            From the file system (see :func:`write_atomically`).
        """
        data = self.encode(entries)
        with self._lock:
            write_atomically(self.path, data)

    def encode(self, entries: Iterable[T]) -> bytes:
        """The file's bytes for ``entries`` (what :meth:`write` writes; Kafka's
        ``CheckpointWriteBuffer``, also used for the leader-epoch bytes a tiered upload
        carries). ValueError for a line with a line terminator in it."""
        lines = [self.formatter.to_string(entry) for entry in entries]
        for line in lines:
            if _LINE_END.search(line):
                raise ValueError(f"checkpoint entry {line!r} contains a line terminator")
        text = "".join(f"{line}\n" for line in [str(self.version), str(len(lines)), *lines])
        return text.encode("utf-8")

    def read(self) -> list[T]:
        """The entries in file order; ``[]`` if the file is missing or empty.

        Raises
        ------
        CorruptCheckpointError
            If the file breaks the format (see the class documentation).
        OSError
            If the file cannot be read.
        """
        with self._lock:
            data = _fileio.read_file(self.path)
        if data is None:
            return []
        return self.parse(data)

    def parse(self, data: bytes) -> list[T]:
        """The entries of a checkpoint file's bytes, read elsewhere (a copy on an
        object store); errors as :meth:`read`, naming :attr:`path`."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise self._corrupt(f"Checkpoint file is not UTF-8 ({e.reason})", line) from None
        lines = _split_lines(text)
        if not lines:
            return []
        read_version = _parse_java_int(lines[0], -2**31, _INT32_MAX)
        if read_version is None:
            raise self._malformed(lines[0], 1)
        if read_version != self.version:
            raise self._corrupt(
                f"Unrecognised version:{read_version}, expected version: {self.version}", 1)
        if len(lines) == 1:
            return []
        expected = _parse_java_int(lines[1], -2**31, _INT32_MAX)
        if expected is None:
            raise self._malformed(lines[1], 2)
        if expected < 0:
            raise self._corrupt(f"Negative entry count in checkpoint file: {expected}", 2)
        entries = []
        for number, line in enumerate(lines[2:], start=3):
            try:
                entry = self.formatter.from_string(line)
            except ValueError as e:
                raise self._malformed(line, number, str(e)) from None
            if entry is None:
                raise self._malformed(line, number)
            entries.append(entry)
        if len(entries) != expected:
            # Point at the first line past what the count allows, or where the
            # first missing entry should be: either way line 3 + min(count, found).
            raise self._corrupt(
                f"Expected [{expected}] entries in checkpoint file, but found only [{len(entries)}]",
                3 + min(expected, len(entries)))
        return entries

    def _corrupt(self, message: str, line: int) -> CorruptCheckpointError:
        return CorruptCheckpointError(message, path=self.path, line=line)

    def _malformed(self, line: str, number: int, why: str | None = None) -> CorruptCheckpointError:
        message = f"Malformed line in checkpoint file: {line!r}"
        return self._corrupt(f"{message} ({why})" if why else message, number)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, version={self.version})"


class _OffsetFormatter:
    """``OffsetCheckpointFile.Formatter``: ``"<topic> <partition> <offset>"``.

    Reading splits on runs of ASCII blanks as Java's ``split("\\\\s+")`` does: a
    leading blank gives an empty first field (so the line is malformed), a
    trailing one is dropped. Beyond Kafka, which takes any three fields whose
    numbers parse, the topic must be a legal topic name and the partition and
    offset must not be negative: a checkpoint names only partitions a broker
    could have created and offsets a log can hold, so anything else is damage.
    """

    def to_string(self, entry: tuple[TopicPartition, int]) -> str:
        tp, offset = entry
        return f"{tp.topic} {tp.partition} {offset}"

    def from_string(self, line: str) -> tuple[TopicPartition, int] | None:
        parts = _JAVA_BLANKS.split(line)
        if parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 3:
            return None
        topic, partition_text, offset_text = parts
        if not is_valid_topic(topic):
            raise ValueError(f"illegal topic name {topic!r}")
        partition = _parse_java_int(partition_text, 0, MAX_PARTITION)
        if partition is None:
            raise ValueError(f"partition {partition_text!r} is not an int in [0, {MAX_PARTITION}]")
        offset = _parse_java_int(offset_text, 0, _INT64_MAX)
        if offset is None:
            raise ValueError(f"offset {offset_text!r} is not a long in [0, {_INT64_MAX}]")
        return TopicPartition(topic, partition), offset


class OffsetCheckpointFile:
    """A ``TopicPartition -> offset`` checkpoint (Kafka's ``OffsetCheckpointFile``, version 0).

    File format::

        0
        <count>
        <topic> <partition> <offset>      count lines, single spaces

    Used for the recovery point, log start offset, cleaner and replication
    checkpoints of a log directory. Entries are written in the mapping's
    iteration order (Kafka writes its hash map's order; readers must not care).
    When a partition appears twice in a file the later line wins, as in Kafka's
    ``read`` into a ``HashMap``.

    Thread-safety: as :class:`CheckpointFile`.
    """

    CURRENT_VERSION = 0

    def __init__(self, path: str) -> None:
        self.checkpoint: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, self.CURRENT_VERSION, _OffsetFormatter())

    @property
    def path(self) -> str:
        return self.checkpoint.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file with ``offsets``.

        Raises
        ------
        InvalidTopicError
            For an illegal topic name (nothing is written).
        ValueError
            For a partition outside ``[0, 2**31 - 1]`` or an offset outside
            ``[0, 2**63 - 1]`` (nothing is written).
        OSError
            From the file system.
        """
        entries = []
        for tp, offset in offsets.items():
            topic, partition = tp
            validate_topic(topic)
            if type(partition) is not int or not 0 <= partition <= MAX_PARTITION:
                raise ValueError(f"partition of {topic!r} must be an int in "
                                 f"[0, {MAX_PARTITION}]: {partition!r}")
            if type(offset) is not int or not 0 <= offset <= _INT64_MAX:
                raise ValueError(f"offset of {topic}-{partition} must be an int in "
                                 f"[0, {_INT64_MAX}]: {offset!r}")
            entries.append((TopicPartition(topic, partition), offset))
        self.checkpoint.write(entries)

    def read(self) -> dict[TopicPartition, int]:
        """The offsets in the file; ``{}`` if it is missing or empty.

        Raises
        ------
        CorruptCheckpointError
            If the file breaks the format; ``line`` says where.
        OSError
            If the file cannot be read.
        """
        return dict(self.checkpoint.read())

    def parse(self, data: bytes) -> dict[TopicPartition, int]:
        """The offsets of the bytes of such a file, read elsewhere (see
        :meth:`CheckpointFile.parse`)."""
        return dict(self.checkpoint.parse(data))

    def __repr__(self) -> str:
        return f"OffsetCheckpointFile({self.path!r})"
