"""A log directory: partition directory names, path safety, the ``.lock`` and ``meta.properties``.

Layout of one log directory (one entry of Kafka's ``log.dirs``)::

    <log dir>/
      .lock                                  held by the owner (LogDirLock)
      meta.properties                        identity, Java properties text
      recovery-point-offset-checkpoint       see kafkastore.checkpoint
      <topic>-<partition>/                   a live partition
      <topic>-<partition>.<uuid>-delete/     renamed for asynchronous deletion
      <topic>-<partition>.<uuid>-future/     a replica moving between log dirs
      <topic>-<partition>.<uuid>-stray/      a KRaft stray replica

Names are built and parsed as Kafka's ``LocalLog`` does; topic names follow
:mod:`kafkastore.topic`. Every partition directory is checked to resolve inside
its log directory before it is used (:func:`check_partition_dir`).
"""

from __future__ import annotations

import base64
import os
import re
import threading
import time
import uuid
import weakref
from typing import NamedTuple

from kafkastore import _fileio
from kafkastore.checkpoint import write_atomically
from kafkastore.config import parse_properties
from kafkastore.errors import (
    InvalidMetaPropertiesError,
    InvalidPartitionDirError,
    InvalidTopicError,
    LogDirectoryLockedError,
    UnsafePathError,
)
from kafkastore.topic import MAX_PARTITION, TopicPartition, validate_topic

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "LOCK_FILE_NAME",
    "META_PROPERTIES_FILE",
    "REMOTE_INDEX_CACHE_DIR",
    "STRAY_DIR_SUFFIX",
    "LogDirLock",
    "MetaProperties",
    "PartitionDirName",
    "check_partition_dir",
    "live_partition_dirs",
    "log_delete_dir_name",
    "log_dir_name",
    "log_future_dir_name",
    "log_stray_dir_name",
    "parse_partition_dir_name",
    "parse_topic_partition_name",
    "read_meta_properties",
    "write_meta_properties",
]

#: ``LogManager.LockFileName``
LOCK_FILE_NAME = ".lock"
#: ``MetaPropertiesEnsemble.META_PROPERTIES_NAME``
META_PROPERTIES_FILE = "meta.properties"
#: ``CleanShutdownFileHandler.CLEAN_SHUTDOWN_FILE_NAME``
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
#: The tiered-storage index cache a broker keeps in a log directory (Kafka's
#: ``RemoteIndexCache.DIR_NAME``): not a partition, skipped when logs are loaded.
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"
_DIR_SUFFIXES = (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
# LocalLog.{Delete,Future,Stray}DirPattern, matched whole. Java's "\S" is any
# character but the six ASCII blanks, hence the explicit class.
_NON_BLANK = r"[^ \t\n\x0b\f\r]"
_SUFFIX_PATTERNS = {
    suffix: re.compile(rf"({_NON_BLANK}+)-({_NON_BLANK}+)\.({_NON_BLANK}+){suffix}")
    for suffix in _DIR_SUFFIXES
}
# What a partition number looks like when kafkastore (or Kafka) writes it.
_CANONICAL_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# Longest directory name Kafka builds for -delete and -stray (logDirNameWithSuffixCappedLength).
_MAX_DIR_NAME = 255


# -- partition directory names ------------------------------------------------------------


class PartitionDirName(NamedTuple):
    """A parsed partition directory name.

    ``suffix`` is ``""`` for a live partition, else :data:`DELETE_DIR_SUFFIX`,
    :data:`FUTURE_DIR_SUFFIX` or :data:`STRAY_DIR_SUFFIX`; ``unique_id`` is the
    part between the last ``.`` and the suffix (None for a live partition).
    For ``-delete`` and ``-stray`` names the topic may be a prefix of the real
    one: Kafka cuts it so the whole name fits in 255 characters.
    """

    topic_partition: TopicPartition
    suffix: str = ""
    unique_id: str | None = None


def _check_topic_partition(tp: TopicPartition) -> None:
    validate_topic(tp.topic)
    if type(tp.partition) is not int or not 0 <= tp.partition <= MAX_PARTITION:
        raise ValueError(f"partition must be an int in [0, {MAX_PARTITION}]: {tp.partition!r}")


def log_dir_name(tp: TopicPartition) -> str:
    """The live directory name ``<topic>-<partition>`` (``LocalLog.logDirName``).

    Raises
    ------
    InvalidTopicError
        For an illegal topic name.
    ValueError
        For a partition outside ``[0, 2**31 - 1]``.
    """
    _check_topic_partition(tp)
    return f"{tp.topic}-{tp.partition}"


def _unique_id(unique_id: str | None) -> str:
    if unique_id is None:
        return uuid.uuid4().hex  # Kafka: UUID.randomUUID without the dashes
    if not re.fullmatch(r"[0-9a-zA-Z]+", unique_id):
        raise ValueError(f"unique id must be ASCII letters and digits: {unique_id!r}")
    return unique_id


def _capped(tp: TopicPartition, suffix: str, unique_id: str | None) -> str:
    """``LocalLog.logDirNameWithSuffixCappedLength``: cut the topic so the name fits 255."""
    _check_topic_partition(tp)
    full_suffix = f"-{tp.partition}.{_unique_id(unique_id)}{suffix}"
    return tp.topic[:max(0, _MAX_DIR_NAME - len(full_suffix))] + full_suffix


def log_delete_dir_name(tp: TopicPartition, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-delete``, the topic cut to keep the name <= 255 characters.

    ``unique_id`` defaults to a random UUID's 32 hex digits, as Kafka's.
    """
    return _capped(tp, DELETE_DIR_SUFFIX, unique_id)


def log_stray_dir_name(tp: TopicPartition, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-stray``, cut like :func:`log_delete_dir_name`."""
    return _capped(tp, STRAY_DIR_SUFFIX, unique_id)


def log_future_dir_name(tp: TopicPartition, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-future`` (not cut, as in Kafka)."""
    return f"{log_dir_name(tp)}.{_unique_id(unique_id)}{FUTURE_DIR_SUFFIX}"


def parse_partition_dir_name(name: str, *, strict: bool = True,
                             path: str | None = None) -> PartitionDirName:
    """Parse a partition directory name as ``LocalLog.parseTopicPartitionName`` does.

    Kafka's rules: the name must contain ``-``; a name ending in ``-delete``,
    ``-future`` or ``-stray`` must match ``^(\\S+)-(\\S+)\\.(\\S+)<suffix>`` and
    loses everything from its last ``.``; what is left is split at its last
    ``-`` into a non-empty topic and a partition that Java's ``parseInt`` accepts.

    With ``strict`` (the default) kafkastore also requires what Kafka only
    assumes: a legal topic name (:func:`kafkastore.topic.validate_topic`), a
    partition written as a plain non-negative int (no sign, no leading zero,
    at most ``2**31 - 1``), and a unique id without path separators. With
    ``strict=False`` exactly Kafka's names parse (``foo-+1`` and ``foo-01`` are
    partition 1 of ``foo``, ``a b-0`` is topic ``a b``).

    ``path`` is only used in the error (default: ``name``).

    Raises
    ------
    InvalidPartitionDirError
        With Kafka's message ("... is not in the form of topic-partition or
        topic-partition.uniqueId-delete (if marked for deletion) ..."), plus
        the reason in strict mode.
    """
    def refuse(why: str | None = None) -> InvalidPartitionDirError:
        message = (f"Found directory {path or name}, '{name}' is not in the form of "
                   "topic-partition or topic-partition.uniqueId-delete (if marked for deletion). "
                   "Kafka's log directories (and children) should only contain Kafka topic data.")
        if why:
            message += f" ({why})"
        return InvalidPartitionDirError(message, name=name, path=path)

    if not isinstance(name, str) or not name or "-" not in name:
        raise refuse()
    suffix = next((s for s in _DIR_SUFFIXES if name.endswith(s)), "")
    unique_id = None
    base = name
    if suffix:
        if _SUFFIX_PATTERNS[suffix].fullmatch(name) is None:
            raise refuse()
        dot = name.rindex(".")
        base, unique_id = name[:dot], name[dot + 1:-len(suffix)]
    dash = base.rindex("-")
    topic, partition_text = base[:dash], base[dash + 1:]
    if not topic or not partition_text:
        raise refuse()
    if strict:
        try:
            validate_topic(topic)
        except InvalidTopicError as e:
            raise refuse(e.message) from None
        if _CANONICAL_PARTITION.fullmatch(partition_text) is None \
                or int(partition_text) > MAX_PARTITION:
            raise refuse(f"partition {partition_text!r} is not an int in [0, {MAX_PARTITION}]")
        if unique_id is not None and re.search(r"[/\\\x00]", unique_id):
            raise refuse(f"unique id {unique_id!r} contains a path separator")
        partition = int(partition_text)
    else:
        if _JAVA_INT.fullmatch(partition_text) is None \
                or not -2**31 <= int(partition_text) <= MAX_PARTITION:
            raise refuse()
        partition = int(partition_text)
    return PartitionDirName(TopicPartition(topic, partition), suffix, unique_id)


def parse_topic_partition_name(name: str, *, strict: bool = True,
                               path: str | None = None) -> TopicPartition:
    """The topic-partition of a partition directory name (``LocalLog.parseTopicPartitionName``).

    See :func:`parse_partition_dir_name`, which also returns the suffix.
    """
    return parse_partition_dir_name(name, strict=strict, path=path).topic_partition


def live_partition_dirs(root: str, *, strict: bool = True):
    """``(TopicPartition, path)`` of each live partition directory of the log directory
    ``root``, in name order: entries that are not directories, whose names do not parse
    (``remote-log-index-cache``, strays of other tools) or that carry a suffix
    (``-delete``, ``-future``, ``-stray``) are left out. ``strict`` as for
    :func:`parse_partition_dir_name`. Raises :class:`FileNotFoundError` if ``root`` does
    not exist."""
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        try:
            parsed = parse_partition_dir_name(entry.name, strict=strict)
        except InvalidPartitionDirError:
            continue
        if not parsed.suffix:
            yield parsed.topic_partition, entry.path


def check_partition_dir(log_dir: str, name: str) -> str:
    """Return ``<log_dir>/<name>`` once it is sure to resolve inside ``log_dir``.

    ``name`` must be one path component (no ``/``, no ``\\``, no NUL, not ``.``
    or ``..``), and the path with every symlink resolved must lie strictly
    inside ``log_dir`` with its symlinks resolved: a partition directory that is
    a symlink to elsewhere (or to the log directory itself) is refused, a
    symlink to another directory inside the log directory is allowed. The
    returned path is the unresolved one, so names stay as listed.

    This is a check at one moment: whoever can rename entries of the log
    directory afterwards can still swap the symlink. It keeps out mistakes and
    planted links, not an attacker with write access to the log directory.

    Raises
    ------
    UnsafePathError
        If ``name`` is not a single safe component or the path leads outside.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or re.search(r"[/\\\x00]", name) \
            or (os.altsep and os.altsep in name):
        raise UnsafePathError(f"Not a single directory name inside the log directory: {name!r}",
                              path=os.path.join(log_dir, str(name)), log_dir=log_dir)
    path = os.path.join(log_dir, name)
    root = os.path.realpath(log_dir)
    resolved = os.path.realpath(path)
    if resolved == root or os.path.commonpath([root, resolved]) != root:
        raise UnsafePathError(f"Partition directory {path} resolves to {resolved}, outside the "
                              f"log directory {root}", path=path, log_dir=log_dir)
    return path


# -- the .lock file -----------------------------------------------------------------------

# Log directories locked by this process, by (st_dev, st_ino), so a second lock
# through another spelling of the path (a symlink, a relative path) is caught too.
_held: dict[tuple[int, int], str] = {}
_held_guard = threading.Lock()
_instances: weakref.WeakSet[LogDirLock] = weakref.WeakSet()


def _forget_held_locks() -> None:
    """In a forked child: hold nothing, and believe it.

    POSIX record locks are not inherited, but the descriptors are; closing them
    now (it does not touch the parent's locks) means a later ``release()`` in
    the child cannot close a descriptor of a ``.lock`` the child has locked
    itself in the meantime, which would silently drop that lock.
    """
    global _held_guard
    _held_guard = threading.Lock()  # another thread may have held it at fork
    for lock in list(_instances):
        fd, lock._fd = lock._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_held_locks)


def _os_lock(fd: int) -> None:
    """Take the OS lock on ``fd`` without waiting; BlockingIOError/PermissionError if held."""
    if fcntl is not None:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:  # pragma: no cover - Windows
        import msvcrt
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)


class LogDirLock:
    """The ``.lock`` of a log directory, held from construction to :meth:`release`.

    File: ``<log dir>/.lock``, created empty if missing and left in place when
    released (so there is no window in which a deleted lock file could be
    locked by one owner while a new one is locked by another).

    Invariant: while an instance is :attr:`locked`, no other process (a Kafka
    broker included) and no other instance in this process holds the lock on
    the same directory. Two mechanisms give this:

    * the OS lock is a POSIX record lock (``fcntl.lockf``, ``F_SETLK``), the
      lock Java's ``FileChannel.tryLock`` takes on Linux, so kafkastore and a
      broker exclude each other (``flock`` locks do not conflict with it). The
      kernel drops it when the process dies, however it dies;
    * POSIX locks belong to a process, so a second lock from the same process
      would succeed, and closing any descriptor of the file would drop the
      first: a process-wide registry keyed by the directory's device and inode
      refuses the second lock before the file is even opened.

    A forked child holds no POSIX lock; at fork its copies of the lock
    descriptors are closed and its registry cleared, so it neither holds nor
    believes it holds the directory (:attr:`locked` is False there and
    :meth:`release` does nothing). The descriptor is ``O_CLOEXEC``. Without ``fcntl`` (Windows) ``msvcrt.locking``
    locks the first byte instead, which is what Java does there; elsewhere
    without either, construction fails with ImportError.

    Thread-safety: acquisition and release are safe from any thread; one
    instance is meant to be released once, by its owner.

    Parameters
    ----------
    log_dir : str
        The log directory; it must exist.

    Raises
    ------
    LogDirectoryLockedError
        If the directory is locked, by another process or by this one.
    OSError
        If the directory does not exist or ``.lock`` cannot be created
        (``.lock`` being a symlink is refused with ``ELOOP``).
    """

    def __init__(self, log_dir: str) -> None:
        self.log_dir = os.path.abspath(log_dir)
        self.path = os.path.join(self.log_dir, LOCK_FILE_NAME)
        self._fd: int | None = None
        st = os.stat(self.log_dir)
        self._key = (st.st_dev, st.st_ino)
        with _held_guard:
            if self._key in _held:
                raise self._locked_error(f"held in this process through {_held[self._key]}")
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) \
                | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.path, flags, 0o644)
            try:
                _os_lock(fd)
            except OSError as e:
                os.close(fd)  # we hold no lock on it, so closing drops nothing of ours
                if isinstance(e, (BlockingIOError, PermissionError)):
                    raise self._locked_error("held by another process") from e
                raise
            self._fd = fd
            _held[self._key] = self.log_dir
            _instances.add(self)

    def _locked_error(self, detail: str) -> LogDirectoryLockedError:
        return LogDirectoryLockedError(
            f"Failed to acquire lock on file .lock in {self.log_dir}. A Kafka instance in "
            f"another process or thread is using this directory ({detail}).",
            path=self.path, log_dir=self.log_dir)

    @property
    def locked(self) -> bool:
        """True while this instance holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up; a no-op if already released."""
        with _held_guard:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            _held.pop(self._key, None)
            os.close(fd)  # drops the POSIX lock

    def __enter__(self) -> LogDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        # An unreleased lock would otherwise stay in the registry for the life of
        # the process, refusing every later lock of the directory.
        if getattr(self, "_fd", None) is not None:
            self.release()

    def __repr__(self) -> str:
        return f"LogDirLock({self.log_dir!r}, locked={self.locked})"


class PartitionDirLock:
    """The writer's lock on one partition directory, held by an open :class:`Log`.

    An exclusive ``flock`` on the directory itself (an ``O_RDONLY`` descriptor of the
    directory, ``O_CLOEXEC``): it creates no file, so nothing is left that Kafka's
    loader could object to, and it is dropped by the kernel however the process ends.
    ``flock`` locks belong to an open file description, so a second :class:`Log` on the
    same directory is refused in this process as in another one; ``lockf`` locks (a
    broker's ``.lock``) do not conflict with it. A child forked while the lock is held
    shares it until it exits or execs. Where ``flock`` does not exist (Windows) no lock
    is taken.

    Thread-safety: acquisition and release are safe from any thread; one instance is
    released once, by its owner (the log's ``close``).

    Raises
    ------
    LogDirectoryLockedError
        If another open log (here or in another process) holds the directory.
    """

    def __init__(self, directory: str) -> None:
        self.path = os.path.abspath(directory)
        self._fd: int | None = None
        if fcntl is None or not hasattr(fcntl, "flock"):  # pragma: no cover - Windows
            return
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if isinstance(e, (BlockingIOError, PermissionError)):
                raise LogDirectoryLockedError(
                    f"Log directory {self.path} is already open for writing by another Log "
                    f"(in this process or another one); two writers would hand out the "
                    f"same offsets. Close the other one first, or read with ReadOnlyLog.",
                    path=self.path, log_dir=self.path) from e
            raise
        self._fd = fd

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (closing the descriptor); a no-op if already released."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        # a log dropped without close() must not keep its directory locked for the life
        # of the process
        if getattr(self, "_fd", None) is not None:
            self.release()

    def __repr__(self) -> str:
        return f"PartitionDirLock({self.path!r}, locked={self.locked})"


# -- meta.properties ----------------------------------------------------------------------

_VERSION = "version"
_CLUSTER_ID = "cluster.id"
_BROKER_ID = "broker.id"
_NODE_ID = "node.id"
_DIRECTORY_ID = "directory.id"


def _is_uuid(text: str) -> bool:
    """Kafka's ``Uuid.fromString``: URL-safe base64 of exactly 16 bytes."""
    if len(text) > 24 or not re.fullmatch(r"[A-Za-z0-9_-]+={0,2}", text):
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return False
    return len(raw) == 16


class MetaProperties(NamedTuple):
    """The identity in a log directory's ``meta.properties`` (Kafka's ``MetaProperties``).

    File format: Java ``Properties.store`` text in UTF-8, a ``#`` line, a ``#``
    date line, then ``key=value`` lines in any order::

        #
        #Fri Oct 25 12:00:00 UTC 2024
        version=1
        cluster.id=<cluster id>
        node.id=<int>
        directory.id=<Uuid, 22 characters of URL-safe base64>

    Version 0 (ZooKeeper era) keeps the id as ``broker.id`` and may lack it and
    ``cluster.id``; version 1 (KRaft) requires ``node.id`` and ``cluster.id``.
    ``directory.id`` is optional in both. Unknown keys are ignored on read.
    """

    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: str | None = None

    def validate(self, path: str | None = None) -> MetaProperties:
        """Check Kafka's rules (``MetaProperties.Builder.build``); return self."""
        def bad(message: str, key: str | None) -> InvalidMetaPropertiesError:
            return InvalidMetaPropertiesError(message, key=key, path=path)

        if self.version not in (0, 1):
            raise bad(f"Unknown meta.properties version number {self.version}", _VERSION)
        if self.version == 1 and self.cluster_id is None:
            raise bad("cluster.id was not found.", _CLUSTER_ID)
        if self.version == 1 and self.node_id is None:
            raise bad("node.id was not found.", _NODE_ID)
        id_key = _BROKER_ID if self.version == 0 else _NODE_ID
        if self.node_id is not None and (type(self.node_id) is not int
                                         or not -2**31 <= self.node_id <= 2**31 - 1):
            raise bad(f"{id_key} must be an int: {self.node_id!r}", id_key)
        if self.cluster_id is not None and (not isinstance(self.cluster_id, str)
                                            or re.search(r"[\x00-\x1f\x7f]", self.cluster_id)):
            raise bad(f"cluster.id must be a string without control characters: "
                      f"{self.cluster_id!r}", _CLUSTER_ID)
        if self.directory_id is not None and not (isinstance(self.directory_id, str)
                                                  and _is_uuid(self.directory_id)):
            raise bad(f"Unable to read directory.id as a Uuid: {self.directory_id!r}",
                      _DIRECTORY_ID)
        return self

    def to_properties(self) -> dict[str, str]:
        """The properties Kafka's ``toProperties`` writes, in a fixed order."""
        props = {_VERSION: str(self.version)}
        if self.cluster_id is not None:
            props[_CLUSTER_ID] = self.cluster_id
        if self.node_id is not None:
            props[_BROKER_ID if self.version == 0 else _NODE_ID] = str(self.node_id)
        if self.directory_id is not None:
            props[_DIRECTORY_ID] = self.directory_id
        return props

    @classmethod
    def from_properties(cls, props: dict[str, str], path: str | None = None) -> MetaProperties:
        """Read the identity out of parsed properties (``MetaProperties.Builder(Properties)``).

        Raises
        ------
        InvalidMetaPropertiesError
            As :meth:`validate`, and for a version or id that is not an int.
        """
        def as_int(key: str) -> int:
            text = props[key].strip()
            if _JAVA_INT.fullmatch(text) is None:
                raise InvalidMetaPropertiesError(
                    f"Unable to read {key} as a base-10 integer.", key=key, path=path)
            return int(text)

        version = as_int(_VERSION) if _VERSION in props else 0
        if version not in (0, 1):
            raise InvalidMetaPropertiesError(
                f"Unknown meta.properties version number {version}", key=_VERSION, path=path)
        node_id = None
        if version == 0:
            if _BROKER_ID in props:
                node_id = as_int(_BROKER_ID)
        elif _NODE_ID not in props:
            raise InvalidMetaPropertiesError(
                "Failed to find required property node.id.", key=_NODE_ID, path=path)
        else:
            node_id = as_int(_NODE_ID)
        meta = cls(version, props.get(_CLUSTER_ID), node_id, props.get(_DIRECTORY_ID))
        return meta.validate(path)


# Java's Properties.saveConvert for keys and values written through a Writer:
# these characters get a backslash, control characters a \uXXXX escape,
# non-ASCII stays as it is (the file is UTF-8).
_PROPERTY_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
                     "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _escape_property(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == " " and (i == 0 or is_key):
            out.append("\\ ")
        elif ch in _PROPERTY_ESCAPES:
            out.append(_PROPERTY_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def read_meta_properties(log_dir: str) -> MetaProperties | None:
    """The ``meta.properties`` of ``log_dir``; None if the file does not exist.

    Raises
    ------
    InvalidMetaPropertiesError
        If the file is not UTF-8 or breaks Kafka's rules (see :class:`MetaProperties`).
    OSError
        If the file cannot be read.
    """
    path = os.path.join(os.path.abspath(log_dir), META_PROPERTIES_FILE)
    data = _fileio.read_file(path)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidMetaPropertiesError(f"meta.properties is not UTF-8 ({e.reason})",
                                         path=path) from None
    try:
        props = parse_properties(text)
    except ValueError as e:
        raise InvalidMetaPropertiesError(f"meta.properties does not parse: {e}",
                                         path=path) from None
    return MetaProperties.from_properties(props, path)


def write_meta_properties(log_dir: str, meta: MetaProperties, *,
                          now: float | None = None) -> None:
    """Write ``meta`` to ``<log_dir>/meta.properties`` as Kafka does, atomically.

    The text is Java's ``Properties.store(writer, "")`` output: a ``#`` line,
    a ``#`` line with the date as ``Date.toString`` prints it (``now``, seconds
    since the epoch, default the current time, in UTC), then one ``key=value``
    line per property. It is written with :func:`kafkastore.checkpoint.write_atomically`
    (``meta.properties.tmp``, fsync, rename, directory fsync), as Kafka's
    ``PropertiesUtils.writePropertiesFile``.

    Raises
    ------
    InvalidMetaPropertiesError
        If ``meta`` breaks Kafka's rules; nothing is written.
    OSError
        From the file system.
    """
    path = os.path.join(os.path.abspath(log_dir), META_PROPERTIES_FILE)
    meta.validate(path)
    t = time.gmtime(time.time() if now is None else now)
    # Date.toString's English names, whatever the process locale says.
    stamp = (f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} "
             f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} UTC {t.tm_year}")
    lines = ["#", f"#{stamp}"]
    lines += [f"{_escape_property(k, True)}={_escape_property(v, False)}"
              for k, v in meta.to_properties().items()]
    write_atomically(path, "".join(f"{line}\n" for line in lines).encode("utf-8"))
