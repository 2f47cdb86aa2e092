"""Exceptions raised by kafkastore.

Every exception derives from :class:`KafkaStoreError`. Where the meaning fits,
an exception also derives from a builtin (``ValueError``), so code that already
catches the builtin keeps working. This module is a leaf: it imports nothing
from the package, so every layer, including the compiled kernels, may raise
from it.

Errors about bytes carry where the bad bytes are: ``position`` (byte position
of the entry in the buffer or file that was being read), ``offset`` (the Kafka
offset, when known) and ``path`` (the file, when the reader knows it). Upper
layers fill ``path`` in with :meth:`KafkaStoreError.with_context` as the error
passes through them.
"""

from __future__ import annotations

__all__ = [
    "KafkaStoreError",
    "CorruptRecordError",
    "InvalidCrcError",
    "UnsupportedCompressionError",
    "RecordTooLargeError",
    "CorruptIndexError",
    "InvalidOffsetError",
    "InvalidTimestampError",
    "IndexOffsetOverflowError",
    "IndexFullError",
    "IndexClosedError",
    "OffsetOutOfRangeError",
    "InvalidRecordError",
    "InvalidRecordTimestampError",
    "UnexpectedAppendOffsetError",
    "OffsetsOutOfOrderError",
    "InconsistentTopicIdError",
    "LogClosedError",
    "KafkaStorageError",
    "ConfigError",
    "CorruptCheckpointError",
    "InvalidTopicError",
    "InvalidPartitionDirError",
    "UnsafePathError",
    "LogDirectoryLockedError",
    "InvalidMetaPropertiesError",
    "OffsetMapFullError",
    "LogCleaningAbortedError",
    "StorageError",
    "StorageFileNotFoundError",
    "StorageAccessDeniedError",
    "CorruptSnapshotError",
    "ProducerStateError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "TieredStorageError",
    "CorruptManifestError",
    "CorruptChunkError",
    "MissingKeyError",
    "InvalidRequestError",
    "UnsupportedVersionError",
]


class KafkaStoreError(Exception):
    """Root of every kafkastore exception.

    Parameters
    ----------
    message : str
        What went wrong, in words.
    position : int, optional
        Byte position of the offending entry in the buffer or file, if known.
    offset : int, optional
        Kafka offset of the offending entry, if known.
    path : str, optional
        File being read, if known.
    """

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        offset: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.offset = offset
        self.path = path

    def with_context(
        self,
        *,
        path: str | None = None,
        position_base: int = 0,
    ) -> KafkaStoreError:
        """Add the file path and shift ``position`` by ``position_base``.

        Used by layers that read a window of a file into a buffer: the kernel
        reports positions relative to the buffer, the caller knows where the
        buffer started. Returns ``self`` so it can be used in ``raise``.
        """
        if path is not None and self.path is None:
            self.path = path
        if position_base and self.position is not None:
            self.position += position_base
        return self

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"path={self.path}")
        if self.position is not None:
            where.append(f"position={self.position}")
        if self.offset is not None:
            where.append(f"offset={self.offset}")
        if not where:
            return self.message
        return f"{self.message} ({', '.join(where)})"

    def __reduce__(self):  # keep the context across pickling (Spark workers)
        return (
            _rebuild,
            (type(self), self.message, self.position, self.offset, self.path,
             self.__dict__),
        )


def _rebuild(cls, message, position, offset, path, state):
    err = cls.__new__(cls)
    KafkaStoreError.__init__(err, message, position=position, offset=offset, path=path)
    err.__dict__.update(state)
    return err


class CorruptRecordError(KafkaStoreError, ValueError):
    """Bytes that should hold records do not parse.

    Raised for a size field smaller than the minimum entry, a batch that
    claims more bytes than the buffer holds where a whole batch is required,
    a malformed or overlong varint, a record whose declared length disagrees
    with its content, a negative record or header count, an unknown magic
    byte, a compressed stream that does not decompress, and a legacy wrapper
    whose inner messages break the format's rules. Kafka's
    ``CorruptRecordException`` and ``InvalidRecordException`` both map here.
    """


class InvalidCrcError(CorruptRecordError):
    """A stored checksum does not match the bytes it covers.

    CRC-32C over bytes ``[21, end)`` for magic 2 batches, CRC-32 over
    ``[magic, end)`` for magic 0/1 messages. ``stored`` and ``computed`` hold
    both values as unsigned 32-bit integers.
    """

    def __init__(self, message: str, *, stored: int = 0, computed: int = 0, **kw) -> None:
        super().__init__(message, **kw)
        self.stored = stored
        self.computed = computed


class UnsupportedCompressionError(KafkaStoreError, ValueError):
    """A compression codec id is unknown (5-7), or not allowed for the magic.

    zstd (id 4) exists only for magic 2; magic 0/1 messages that claim it are
    rejected, as Kafka rejects them.
    """


class RecordTooLargeError(KafkaStoreError, ValueError):
    """Data would exceed a configured size limit.

    Raised when a compressed batch would decompress past
    ``max_decompressed_bytes`` (the defence against compression bombs), and
    when a batch to be written would not fit Kafka's int32 size fields.
    ``limit`` holds the limit that was hit.
    """

    def __init__(self, message: str, *, limit: int = 0, **kw) -> None:
        super().__init__(message, **kw)
        self.limit = limit


class CorruptIndexError(KafkaStoreError, ValueError):
    """An offset or time index file breaks the rules of its format.

    Raised by ``sanity_check()`` of :class:`~kafkastore.index.OffsetIndex` and
    :class:`~kafkastore.index.TimeIndex`: a file length that is not a whole
    number of entries, a last entry whose offset is below the segment's base
    offset, a time index whose last timestamp is below its first and, in the
    full check, any entry out of order. Kafka's ``CorruptIndexException``; the
    cure is to rebuild the index from the log. ``path`` is the index file,
    ``position`` the byte position of the offending entry and ``offset`` its
    absolute offset, when known.
    """


class InvalidOffsetError(KafkaStoreError, ValueError):
    """An offset appended to an index is smaller than the last one.

    Offset index entries must strictly increase and time index offsets must
    not decrease (Kafka's ``InvalidOffsetException``). ``offset`` is the
    rejected offset.
    """


class InvalidTimestampError(KafkaStoreError, ValueError):
    """A timestamp appended to a time index is smaller than the last one.

    Time index timestamps never decrease (Kafka raises
    ``IllegalStateException`` in ``TimeIndex.maybeAppend``). ``offset`` is the
    offset that came with the rejected timestamp; ``timestamp`` the timestamp.
    """

    def __init__(self, message: str, *, timestamp: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.timestamp = timestamp


class IndexOffsetOverflowError(KafkaStoreError, ValueError):
    """An offset cannot be stored relative to the segment's base offset.

    Index entries hold ``offset - base_offset`` as an int32, so it must lie in
    ``[0, 2**31 - 1]`` (Kafka's ``IndexOffsetOverflowException``). The log
    layer rolls a new segment (or splits the segment) before this can happen.
    """


class IndexFullError(KafkaStoreError, ValueError):
    """An append to an index that has no room for another entry.

    An offset index is full at ``max_entries`` entries, a time index at
    ``max_entries - 1``: one slot stays free for the entry written when the
    segment is rolled or closed (Kafka raises ``IllegalArgumentException``).
    """


class IndexClosedError(KafkaStoreError, ValueError):
    """An operation on an index that was closed or deleted.

    Kafka fails with a ``NullPointerException`` on a use after unmap; here
    every operation that needs the mapping raises this instead.
    """


class OffsetOutOfRangeError(KafkaStoreError, IndexError):
    """A read or lookup asked for an offset the log does not hold.

    Raised by :meth:`~kafkastore.log.Log.read` for an offset below the log
    start offset or above the log end offset (Kafka's
    ``OffsetOutOfRangeException``), and by ``delete_records`` for a new log
    start offset past the end. ``offset`` is the offset asked for.
    """


class InvalidRecordError(CorruptRecordError):
    """Well-formed bytes that the log must still refuse (Kafka's ``InvalidRecordException``).

    For example a batch whose record count disagrees with its offset range,
    a control batch from a client, a timestamp outside the allowed window,
    or a LogAppendTime batch appended to a CreateTime log.
    """


class InvalidRecordTimestampError(InvalidRecordError, InvalidTimestampError):
    """A record refused for its timestamp: outside ``message.timestamp.before.max.ms`` /
    ``after.max.ms`` of the append time, or a producer's batch claiming LogAppendTime.
    Kafka's ``LogValidator`` reports these as ``INVALID_TIMESTAMP``, every other record
    refusal as ``INVALID_RECORD``; it is an :class:`InvalidRecordError` too, so callers
    that catch those see no change. ``offset`` is the record's offset as the producer
    sent it (its index in a producer's batch), when known."""


class UnexpectedAppendOffsetError(KafkaStoreError, ValueError):
    """Batches appended with their own offsets start below the log end offset.

    Kafka's ``UnexpectedAppendOffsetException``: a follower (or
    ``append_batches(..., assign_offsets=False)``) must append strictly
    after what the log holds.
    """


class OffsetsOutOfOrderError(KafkaStoreError, ValueError):
    """Batches appended with their own offsets do not strictly increase."""


class InconsistentTopicIdError(KafkaStoreError, ValueError):
    """A log was opened with a topic id other than the one in its ``partition.metadata``
    (Kafka's ``InconsistentTopicIdException``): the directory belongs to another topic
    of the same name, deleted and created again."""


class LogClosedError(KafkaStoreError):
    """The log (or segment) was closed; no further operation is possible."""


class KafkaStorageError(KafkaStoreError, OSError):
    """A write-side I/O call on a log's files failed (Kafka's ``KafkaStorageException``):
    a write (ENOSPC, EIO, one that made no progress), an fsync or msync, a truncation, a
    rename, a deletion, a mapping or a creation.

    It is an :class:`OSError` too, carrying the failed call's ``errno`` and file name, so
    code that catches ``OSError`` keeps working. The log stays consistent: what it
    reports (end offset, segments) never covers bytes that were not written, and a
    reopen recovers the files. After a failed fsync or msync, or a segment swap that
    stopped half way, the log takes no more writes (what reached the disk is unknown;
    "fsyncgate"): later calls raise :class:`LogClosedError` saying why.
    """

    def __init__(self, message: str, *, errno: int | None = None,
                 position: int | None = None, offset: int | None = None,
                 path: str | None = None) -> None:
        KafkaStoreError.__init__(self, message, position=position, offset=offset, path=path)
        self.errno = errno
        self.strerror = message
        self.filename = path

    @classmethod
    def from_os_error(cls, exc: OSError, what: str, path: str) -> KafkaStorageError:
        return cls(f"{what} failed: {exc}", errno=exc.errno,
                   path=exc.filename if isinstance(exc.filename, str) else path)


class ConfigError(KafkaStoreError, ValueError):
    """A configuration name is unknown, or a value is invalid for its name.

    Raised by :class:`kafkastore.config.LogConfig` for a name that is not a
    topic config (the message lists close matches), for a value of the wrong
    type or outside the range Kafka accepts (the message follows Kafka's
    ``ConfigException``: "Invalid value 5 for configuration segment.bytes:
    Value must be at least 14"), and by
    :func:`kafkastore.config.parse_properties` for a malformed ``\\uxxxx``
    escape. ``key`` holds the offending name as given, ``value`` the offending
    value (``None`` for an unknown name), ``suggestions`` the close matches
    offered for an unknown name.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        value: object = None,
        suggestions: tuple[str, ...] = (),
        **kw,
    ) -> None:
        super().__init__(message, **kw)
        self.key = key
        self.value = value
        self.suggestions = suggestions


class CorruptCheckpointError(KafkaStoreError, ValueError):
    """A checkpoint file does not parse (Kafka's ``IOException`` from ``CheckpointFile.read``).

    Raised by :class:`kafkastore.checkpoint.CheckpointFile` for a version line
    that is not the expected version, a version or count line that is not an
    int, an entry line the file's formatter refuses, an entry count that
    disagrees with the count line, and bytes that are not UTF-8. ``path`` is
    the checkpoint file and ``line`` the 1-based number of the offending line
    (for a count mismatch, the first line past the entries the count allows,
    or the line where a missing entry should be). A checkpoint is a hint: the
    caller recovers without it (Kafka treats an unreadable recovery-point
    checkpoint as empty, so every segment is recovered).
    """

    def __init__(self, message: str, *, line: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.line = line

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"path={self.path}")
        if self.line is not None:
            where.append(f"line={self.line}")
        return f"{self.message} ({', '.join(where)})" if where else self.message


class InvalidTopicError(KafkaStoreError, ValueError):
    """A topic name breaks Kafka's rules (Kafka's ``InvalidTopicException``).

    Legal names are 1 to 249 characters from ``[a-zA-Z0-9._-]`` and neither
    ``.`` nor ``..`` (:func:`kafkastore.topic.validate_topic`). The message is
    Kafka's ("Topic name is invalid: ..."); ``topic`` holds the name as given.
    """

    def __init__(self, message: str, *, topic: object = None, **kw) -> None:
        super().__init__(message, **kw)
        self.topic = topic


class InvalidPartitionDirError(KafkaStoreError, ValueError):
    """A directory name is not ``<topic>-<partition>`` or one of its suffixed forms.

    Raised by :func:`kafkastore.log_dir.parse_topic_partition_name` where
    Kafka's ``LocalLog.parseTopicPartitionName`` throws, and, in its strict
    mode, for an illegal topic name or a partition that is not a plain
    non-negative int. ``name`` is the directory name, ``path`` the directory
    when the caller knows it.
    """

    def __init__(self, message: str, *, name: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.name = name


class UnsafePathError(KafkaStoreError, ValueError):
    """A path that should lie inside a log directory leads out of it.

    Raised for a name with a path separator, ``.`` or ``..``, or a NUL, and
    for a partition directory that is a symlink (or sits under one) resolving
    outside its log directory. ``path`` is the offending path, ``log_dir`` the
    directory it had to stay in.
    """

    def __init__(self, message: str, *, log_dir: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.log_dir = log_dir


class LogDirectoryLockedError(KafkaStoreError):
    """Another owner holds the ``.lock`` of a log directory.

    Raised by :class:`kafkastore.log_dir.LogDirLock` when another process (a
    Kafka broker included) or another lock object in this process holds the
    directory, as Kafka's ``LogManager`` fails with "Failed to acquire lock on
    file .lock in <dir>". ``path`` is the ``.lock`` file, ``log_dir`` the
    directory.
    """

    def __init__(self, message: str, *, log_dir: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.log_dir = log_dir


class InvalidMetaPropertiesError(KafkaStoreError, ValueError):
    """A ``meta.properties`` file does not hold what Kafka requires.

    An unknown ``version``, a missing or non-integer ``node.id`` (version 1)
    or ``broker.id``, a version 1 file without ``cluster.id``, a
    ``directory.id`` that is not a Uuid, or bytes that are not UTF-8.
    ``path`` is the file, ``key`` the offending property (None when the file
    as a whole is bad).
    """

    def __init__(self, message: str, *, key: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.key = key


class OffsetMapFullError(KafkaStoreError, ValueError):
    """A put into a :class:`~kafkastore.cleaner.SkimpyOffsetMap` that has no empty slot left.

    Kafka's ``IllegalArgumentException("Attempted to add a new entry to a full offset
    map.")``. The cleaner never gets here: it stops filling the map at
    ``slots * log.cleaner.io.buffer.load.factor`` entries.
    """


class LogCleaningAbortedError(KafkaStoreError):
    """A cleaning round was stopped before it swapped anything in (Kafka's
    ``LogCleaningAbortedException``): the log was truncated, deleted or closed, or
    cleaning of it was aborted. Its ``.cleaned`` files are gone and the cleaner
    checkpoint is unchanged; a later round starts again."""


class StorageError(KafkaStoreError, OSError):
    """A read through the storage seam (:mod:`kafkastore.storage`) failed: a local read
    error, or a remote store that kept failing after the retries (HTTP 5xx, throttling,
    dropped connections), refused access, or answered with a short body.

    ``path`` is the URI of the file or object. It is an :class:`OSError` too, so code
    that catches ``OSError`` keeps working.
    """

    def __init__(self, message: str, *, position: int | None = None,
                 offset: int | None = None, path: str | None = None) -> None:
        KafkaStoreError.__init__(self, message, position=position, offset=offset, path=path)
        self.strerror = message
        self.filename = path


class StorageFileNotFoundError(StorageError, FileNotFoundError):
    """A file or object is not there (any more): deleted by retention or the log cleaner
    after it was listed, a wrong path, or a prefix with nothing under it. Never retried.
    Also a :class:`FileNotFoundError`."""


class StorageAccessDeniedError(StorageError, PermissionError):
    """The store refused the request: access denied (HTTP 403), credentials missing,
    unknown, expired or not matching the signature. Never retried: the same credentials
    get the same answer. Also a :class:`PermissionError`.

    The credentials are those of the process that made the request; in a Spark task that
    is the executor, whose environment is not the driver's (see ``docs/cluster.rst``).
    """


class CorruptSnapshotError(KafkaStoreError, ValueError):
    """A producer-state snapshot (``<offset>.snapshot``) that cannot be read (Kafka's
    ``CorruptSnapshotException``): an unknown version, a schema that does not parse (a
    short or torn file) or a CRC-32C that does not match. A log that meets one while
    opening deletes it and rebuilds the state from an older snapshot and the log."""


class ProducerStateError(KafkaStoreError, ValueError):
    """Base of the errors an idempotent or transactional append is refused with; ``offset``
    is the offset the refused batch would have had. Nothing of the append is written."""

    def __init__(self, message: str, *, producer_id: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.producer_id = producer_id


class OutOfOrderSequenceError(ProducerStateError):
    """A producer's batch whose first sequence does not follow the last one the log holds
    for that producer and epoch (Kafka's ``OutOfOrderSequenceException``), or a new epoch
    that does not start at sequence 0."""


class InvalidProducerEpochError(ProducerStateError):
    """A batch or marker with a producer epoch below the last one the log holds for that
    producer (Kafka's ``InvalidProducerEpochException``: the producer was fenced)."""


class InvalidTxnStateError(ProducerStateError):
    """A non-transactional batch from a producer whose transaction is still open (Kafka's
    ``InvalidTxnStateException``)."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """A transaction marker whose coordinator epoch is below the last one the log holds for
    the producer (Kafka's ``TransactionCoordinatorFencedException``: a zombie coordinator)."""


class TieredStorageError(KafkaStoreError, ValueError):
    """A tiered-storage copy (KIP-405 remote segments, :mod:`kafkastore.tiered`) that
    cannot be read as asked: an object layout that is not one kafkastore knows, a
    segment the resolution left out that was asked for by name, or an upload refused.
    ``path`` is the URI of the object or prefix."""


class CorruptManifestError(TieredStorageError):
    """A segment manifest (Aiven's ``.rsm-manifest``) or one of its parts (the chunk
    index, its encoded chunk sizes, the index positions, the encryption metadata) that
    does not parse or contradicts itself or the objects beside it. ``path`` is the
    manifest's URI."""


class CorruptChunkError(TieredStorageError):
    """A chunk of a remote segment that does not detransform: a zstd frame that does not
    decompress to the chunk's original size, an AES-GCM tag that does not verify (wrong
    key, tampered or truncated bytes), or an object shorter than its chunk index says.
    ``chunk`` is the chunk's number, ``position`` its byte position in the transformed
    object, ``path`` the object's URI."""

    def __init__(self, message: str, *, chunk: int | None = None,
                 position: int | None = None, offset: int | None = None,
                 path: str | None = None) -> None:
        super().__init__(message, position=position, offset=offset, path=path)
        self.chunk = chunk


class MissingKeyError(TieredStorageError):
    """An encrypted remote segment whose data key is wrapped with an RSA key that is not
    in the key ring given (or no key ring was given). ``key_id`` names the key the
    segment needs; ``path`` is the manifest's URI."""

    def __init__(self, message: str, *, key_id: str | None = None,
                 path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.key_id = key_id


class InvalidRequestError(KafkaStoreError, ValueError):
    """A Kafka protocol frame (:mod:`kafkastore.server`) that does not decode: a length
    past the frame's end, a negative or absurd count, a string that is not UTF-8, bytes
    left over. ``position`` is the byte position in the frame (after the 4-byte size)
    where the bad field starts; ``api_key`` and ``api_version`` say which request it
    was, when the header got that far. A broker answers it as Kafka does
    (``INVALID_REQUEST``, or a closed connection where no answer can be framed)."""

    def __init__(self, message: str, *, position: int | None = None,
                 api_key: int | None = None, api_version: int | None = None) -> None:
        super().__init__(message, position=position)
        self.api_key = api_key
        self.api_version = api_version


class UnsupportedVersionError(InvalidRequestError):
    """A request whose API key or version the server does not speak (Kafka's
    ``UNSUPPORTED_VERSION``)."""


def missing_extra(what: str, library: str, requirement: str, extra: str,
                  extra_name: str | None = None) -> ConfigError:
    """The ConfigError for an optional library that is not installed: ``what`` (with its
    verb: "Reading x needs") names the need for ``library``, and the installs that work today (no package index has kafkastore yet,
    issue 28): the library's own ``requirement``, or the ``extra`` in a clone.
    ``extra_name`` is how the message names the extra (default: ``extra``)."""
    return ConfigError(f"{what} {library}, which the {extra_name or extra} extra "
                       f"brings: pip install '{requirement}', or in a clone of kafkastore "
                       f"pip install '.[{extra}]'")

