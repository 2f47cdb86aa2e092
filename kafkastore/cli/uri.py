"""The CLI's read-only commands on a log directory named by a URI.

``kafkastore describe``, ``consume`` and ``verify`` (without ``--repair``) take a URI
(``s3://bucket/prefix``, ``gs://``, ``abfs://``, ``hdfs://``, ``file://``, any fsspec
scheme) as well as a path. :mod:`kafkastore.cli.local` keeps the local code for plain
paths, unchanged; a URI comes here, through the reader :func:`register` adds, and is read
through :mod:`kafkastore.storage` (ranged reads, never a download) and
:mod:`kafkastore.log_view` (the read-only log API), and printed through the same
functions as the local code (:mod:`kafkastore.cli.shared`): the output is the local
directory's but for the names of files (a URI's, built from the URI as given).

What differs from a local directory, and why:

* ``verify --repair`` is refused (it rewrites files).
* ``describe`` does not read a KRaft metadata log on the store (``--metadata-dir``
  names a local copy); it says so on stderr when there is one, and shows Kafka's
  default cleanup policy.

Errors: a directory that is not there is the usage error a missing local directory is
(``<uri>: no such log directory``, exit code 2); the store's own failures (after its
retries) are one line each, never a traceback.

Thread-safety: the commands run in one thread; nothing here is shared.
"""

from __future__ import annotations

import argparse
import sys

from kafkastore.cli.shared import (
    EXIT_OK,
    CommandLine,
    Progress,
    UsageError,
    cleanup_policies,
    consume_log,
    describe_row,
    is_uri,
    one_line,
    open_storage,
    parse_settings,
    parse_storage_options,
    print_describe,
    print_verified,
    scan_log,
    scan_problem,
)
from kafkastore.errors import KafkaStoreError, StorageFileNotFoundError
from kafkastore.partition_metadata import PARTITION_METADATA_FILENAME, parse_topic_id

__all__ = ["register", "describe_uri", "consume_uri", "verify_uri"]

_METADATA_DIR = "__cluster_metadata-0"


def register(cli: CommandLine) -> None:
    """No subcommand of its own: the reader of ``describe``, ``consume`` and ``verify``
    on a URI."""
    cli.add_reader(_read)


def _read(args: argparse.Namespace, command: str):
    """The read command's exit code when its directory is a URI; None otherwise
    (``dump-log``'s files are read by :mod:`kafkastore.dump` itself)."""
    if command not in ("describe", "consume", "verify") or not is_uri(args.directory):
        return None
    if command == "describe":
        rows, note = describe_uri(args)
        return print_describe(args, rows, note)
    if command == "verify" and args.repair:
        raise UsageError(f"--repair needs a local directory: it rewrites the files "
                         f"(truncates, rebuilds indexes), which {args.directory} is "
                         "not; verify it without --repair, or repair a local copy")
    return {"consume": consume_uri, "verify": verify_uri}[command](args)


class _Dir:
    """A log directory on a store: the :class:`~kafkastore.log_view.ReadOnlyLogDir`,
    its storage and root path, its live partitions (one listing), and the URI as the
    user gave it (for the names printed)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.uri = args.directory
        options = parse_storage_options(args)
        # checks the options first (an unknown name is a usage error, not a listing's)
        self.storage, self.root = open_storage(self.uri, options)
        from kafkastore.log_view import ReadOnlyLogDir

        try:
            self.log_dir = ReadOnlyLogDir.open(self.uri, storage_options=options)
        except StorageFileNotFoundError:
            raise UsageError(f"{self.uri}: no such log directory") from None
        try:
            self.partitions = self.log_dir.partitions()
        except StorageFileNotFoundError:
            self.log_dir.close()
            raise UsageError(f"{self.uri}: no such log directory") from None
        except BaseException:
            self.log_dir.close()
            raise

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc_info) -> None:
        self.log_dir.close()

    @staticmethod
    def dir_name(tp) -> str:
        return f"{tp.topic}-{tp.partition}"

    def path(self, tp) -> str:
        """The partition directory's path in the store."""
        return self.storage.join(self.root, self.dir_name(tp))

    def shown(self, tp, name: str) -> str:
        """A file of a partition as printed: the URI given, then the names below it."""
        return f"{self.uri.rstrip('/')}/{self.dir_name(tp)}/{name}"

    def files(self, tp):
        """``(files, segments)`` of a partition directory, one listing: every file's
        :class:`~kafkastore.storage.FileInfo`, and ``(base offset, size, path)`` of its
        ``.log`` files in offset order (the names the local commands take)."""
        from kafkastore.segment import log_file_offset

        files = [i for i in self.storage.list_dir(self.path(tp)) if not i.is_dir]
        bases = ((log_file_offset(i.name), i) for i in files)
        segments = sorted((base, i.size, i.path) for base, i in bases if base is not None)
        return files, segments

    def scan(self, path: str, *, validate: bool = True, progress: Progress | None = None):
        """:func:`~kafkastore.cli.shared.scan_log` of one ``.log`` through ranged reads."""
        with self.storage.open(path) as reader:
            return scan_log(reader.read, reader.size, validate=validate, progress=progress)


@one_line
def describe_uri(args: argparse.Namespace):
    """``describe`` of a URI: ``(rows, note)`` for
    :func:`~kafkastore.cli.shared.print_describe`."""
    from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME

    with _Dir(args) as d:
        parts = [tp for tp in d.partitions if tp.topic != CLUSTER_METADATA_TOPIC_NAME
                 and (args.topic is None or tp.topic == args.topic)]
        topics = sorted({tp.topic for tp in parts})
        if (args.metadata_dir is None and "cleanup.policy" not in
                parse_settings(args.config) and d.storage.is_dir(
                    d.storage.join(d.root, _METADATA_DIR))):
            print(f"kafkastore describe: {d.uri.rstrip('/')}/{_METADATA_DIR}: the KRaft "
                  "metadata log is read from a local directory only (--metadata-dir); "
                  "cleanup policies are Kafka's default", file=sys.stderr)
        policies, note = cleanup_policies(args, topics)
        rows = []
        for tp in parts:
            files, segments = d.files(tp)
            on_disk = sum(i.size for i in files)
            meta = next((i for i in files if i.name == PARTITION_METADATA_FILENAME), None)
            topic_id = None if meta is None else parse_topic_id(
                d.storage.read_file(meta.path), d.shown(tp, meta.name))
            rows.append(describe_row(args, tp, segments, on_disk, policies,
                                      lambda path: d.scan(path, validate=False), topic_id))
        return rows, note


@one_line
def consume_uri(args: argparse.Namespace) -> int:
    """``consume`` of a URI: the same starts and output as a local directory's."""
    with _Dir(args) as d:
        parts = [tp for tp in d.partitions if tp.topic == args.topic
                 and (args.partition is None or tp.partition == args.partition)]
        if not parts:
            raise UsageError(f"{args.directory}: no partition of topic {args.topic!r}"
                             + ("" if args.partition is None
                                else f" numbered {args.partition}"))
        remaining = args.max_records
        for tp in parts:
            log = d.log_dir.log(tp)
            try:
                remaining = consume_log(args, tp, log, remaining)
            finally:
                log.close()
    return EXIT_OK


@one_line
def verify_uri(args: argparse.Namespace) -> int:
    """``verify`` of a URI, read-only: every entry's CRC (ranged reads through a
    bounded buffer) and every index's sanity check, as for a local directory."""
    from kafkastore.index import OffsetIndexView, TimeIndexView
    from kafkastore.topic import TopicPartition

    with _Dir(args) as d:
        parts = [tp for tp in d.partitions if args.topic is None or tp.topic == args.topic]
        # the local command checks the metadata log too (it is a partition directory)
        meta = TopicPartition("__cluster_metadata", 0)
        if meta not in parts and args.topic in (None, meta.topic) and d.storage.is_dir(
                d.storage.join(d.root, _METADATA_DIR)):
            parts = sorted([*parts, meta])
        listed = [(tp, d.files(tp)[1]) for tp in parts]
        progress = Progress("verify", sum(size for _, segs in listed for _, size, _ in segs))
        problems = 0
        try:
            for tp, segments in listed:
                for base, _size, path in segments:
                    name = d.storage.basename(path)
                    shown = d.shown(tp, name)
                    _entries, valid, size, error = d.scan(path, progress=progress)
                    if (line := scan_problem(shown, valid, size, error)) is not None:
                        problems += 1
                        print(line)
                    for cls, suffix in ((OffsetIndexView, ".index"),
                                        (TimeIndexView, ".timeindex")):
                        index_shown = shown[:-4] + suffix
                        data = d.storage.read_file(path[:-4] + suffix)
                        if data is None:
                            problems += 1
                            print(f"{index_shown}: missing (recovery rebuilds it)")
                            continue
                        try:
                            cls(data, base, index_shown, trusted=True).sanity_check(full=True)
                        except KafkaStoreError as exc:
                            problems += 1
                            print(f"{index_shown}: {exc}")
        finally:
            progress.close()
    return print_verified(len(parts), problems)
