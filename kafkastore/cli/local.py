"""The commands on a local log directory: ``dump-log``, ``describe``, ``produce``,
``consume``, ``verify`` (``--repair``), ``compact`` and ``retention``.

``dump-log`` prints files as Kafka's ``kafka-dump-log.sh`` does (:mod:`kafkastore.dump`;
its files may be URIs, which :mod:`kafkastore.dump` reads itself). The read-only commands
(``describe``, ``consume``, ``dump-log``, ``verify`` without ``--repair``) first ask the
other families' readers (:meth:`~kafkastore.cli.shared.CommandLine.read`): a URI is read
by :mod:`kafkastore.cli.uri`, a tiered copy (``--tiered``) by :mod:`kafkastore.cli.tiered`;
a plain path is read here. ``kafkastore COMMAND --help`` shows each one's options and an
example; ``docs/cli.rst`` describes them all.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

from kafkastore import _fileio
from kafkastore.cli.shared import (
    EXIT_OK,
    CommandLine,
    Progress,
    UsageError,
    cleanup_policies,
    config_option,
    consume_log,
    describe_row,
    log_dir,
    open_storage,
    parse_settings,
    parse_storage_options,
    partition_dirs,
    print_describe,
    print_verified,
    scan_log,
    scan_problem,
    segment_paths,
    storage_option,
)
from kafkastore.errors import KafkaStoreError
from kafkastore.partition_metadata import read_topic_id

__all__ = ["register"]


def register(cli: CommandLine) -> None:
    """The log directory's commands, in the order ``kafkastore --help`` lists them."""

    def reading(func):
        # a read command: func(args, read), read asking the other families' readers first
        return functools.partial(func, read=cli.read)

    uri_help = ("a log directory (holds <topic>-<partition> directories): a path or a "
                "URI (s3://bucket/prefix, gs://, abfs://, hdfs://, file://, any fsspec "
                "scheme)")

    p = cli.command("dump-log", "print segment, offset index and time index files as "
                    "Kafka's kafka-dump-log.sh does (same lines, same problem reports)",
                    "kafkastore dump-log --files 00000000000000000000.log --deep-iteration "
                    "--print-data-log", reading(_cmd_dump_log))
    p.add_argument("--files", required=True, help="comma-separated .log/.index/.timeindex "
                   "files, dumped in order: paths or URIs (s3://bucket/t-0/...log)")
    p.add_argument("--print-data-log", "--print-data-logs", dest="print_data_log",
                   action="store_true", help="print keys and values (implies "
                   "--deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the index's sanity check")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                   help="bytes read at each offset index entry (default 5242880)")
    p.add_argument("--max-bytes", type=int, help="read only this many bytes of each .log")
    p.add_argument("--skip-record-metadata", action="store_true")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", dest="decoder", action="store_const",
                          const="offsets", help="print __consumer_offsets records as "
                          "Kafka's parser does (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", dest="decoder",
                          action="store_const", const="transaction-log",
                          help="print __transaction_state records as Kafka's parser does "
                          "(implies --print-data-log)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per batch, record, index entry and problem")
    storage_option(p, tiered=True)

    p = cli.command("describe", "list the partitions of a log directory: segments, "
                    "offsets, sizes, newest timestamp, cleanup policy",
                    "kafkastore describe /var/lib/kafka/data --topic orders",
                    reading(_cmd_describe))
    p.add_argument("directory", help=uri_help)
    p.add_argument("--topic", help="only this topic")
    p.add_argument("--scan-all", action="store_true",
                   help="read every segment, not only the last (slower)")
    p.add_argument("--json", action="store_true", help="one JSON object per partition")
    p.add_argument("--metadata-dir", help="where the KRaft metadata log is, if not in the "
                   "directory: a log directory holding __cluster_metadata-0, or that "
                   "directory; topic configs (cleanup.policy) are read from it")
    config_option(p)
    storage_option(p, tiered=True)

    p = cli.command("produce", "append lines (or JSON lines) from stdin or a file to a topic",
                    "printf 'k1:v1\\nk2:v2\\n' | kafkastore produce ./logs orders "
                    "--key-separator :", _cmd_produce)
    p.add_argument("directory")
    p.add_argument("topic")
    p.add_argument("--input", help="a file to read (default: stdin)")
    p.add_argument("--format", choices=("lines", "json"), default="lines",
                   help="lines: each line a value; json: {\"key\", \"value\", \"headers\", "
                   "\"partition\"} per line")
    p.add_argument("--key-separator", help="lines: split each line into key and value here")
    p.add_argument("--partitions", type=int, help="partition count for a new topic "
                   "(default: the existing count, or 1); keyed records go to Kafka's "
                   "murmur2 partition")
    p.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"))
    p.add_argument("--batch-size", type=int, default=500, help="records per batch")
    config_option(p)

    p = cli.command("consume", "print the records of a topic",
                    "kafkastore consume ./logs orders --from-beginning --max-records 10 "
                    "--print-key", reading(_cmd_consume))
    p.add_argument("directory", help=uri_help)
    p.add_argument("topic")
    p.add_argument("--partition", type=int)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--offset", type=int, help="start at this offset")
    where.add_argument("--timestamp", type=int, help="start at the first record at or after "
                       "this time (epoch ms)")
    where.add_argument("--from-beginning", action="store_true", help="(the default)")
    where.add_argument("--last", type=int, metavar="N",
                       help="only the last N records of each partition")
    p.add_argument("--max-records", type=int)
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed: stop at the last stable offset and leave out "
                   "the records of aborted transactions, as a Kafka consumer does")
    p.add_argument("--format", choices=("text", "json"), default="text")
    for flag in ("key", "headers", "timestamp", "offset"):
        p.add_argument(f"--print-{flag}", action="store_true")
    config_option(p)
    storage_option(p, tiered=True)

    p = cli.command("verify", "check every segment and index of a log directory without "
                    "changing anything (--repair: recover what is broken)",
                    "kafkastore verify ./logs --repair", reading(_cmd_verify))
    p.add_argument("directory", help=uri_help)
    p.add_argument("--topic")
    p.add_argument("--repair", action="store_true",
                   help="run crash recovery on the partitions (truncates a bad tail, "
                   "rebuilds indexes) and report what went; a local directory only")
    config_option(p)
    storage_option(p, tiered=True)

    p = cli.command("compact", "compact the logs of a directory now (Kafka's log cleaner)",
                    "kafkastore compact ./logs --topic users", _cmd_compact)
    p.add_argument("directory")
    p.add_argument("--topic")
    p.add_argument("--roll", action="store_true",
                   help="roll the active segment first, so its records are compacted too")
    p.add_argument("--dedupe-buffer-size", type=int, default=128 << 20)
    config_option(p)

    p = cli.command("retention", "apply retention (retention.ms, retention.bytes, the log "
                    "start offset) once and delete what it removes",
                    "kafkastore retention ./logs --config retention.bytes=1073741824",
                    _cmd_retention)
    p.add_argument("directory")
    p.add_argument("--topic")
    config_option(p)


def _check_local_storage_options(args: argparse.Namespace) -> None:
    """A local directory takes only the seam's own options (the retry settings, which
    it does not need): anything else is the same usage error as for a URI."""
    options = parse_storage_options(args)
    if options:
        open_storage(args.directory, options)


def _scan_file(path: str, *, validate: bool = True, progress: Progress | None = None):
    """:func:`~kafkastore.cli.shared.scan_log` of a local ``.log`` file (``pread``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return scan_log(lambda pos, n: os.pread(fd, n, pos), os.fstat(fd).st_size,
                        validate=validate, progress=progress)
    finally:
        os.close(fd)


def _cmd_dump_log(args: argparse.Namespace, read) -> int:
    from kafkastore.dump import DumpOptions, dump_files

    files = [f for f in args.files.split(",") if f]
    if not files:
        raise UsageError("--files needs at least one file")
    storage_options = parse_storage_options(args)
    if storage_options:
        # refuse an unknown or bad option before anything is dumped (once per scheme)
        from kafkastore.storage import split_uri

        firsts = {split_uri(f)[0]: f for f in reversed(files)}
        for f in firsts.values():
            open_storage(f if split_uri(f)[0] else ".", storage_options)
    options = DumpOptions(
        print_data_log=args.print_data_log, deep_iteration=args.deep_iteration,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        max_message_size=args.max_message_size, max_bytes=args.max_bytes,
        skip_record_metadata=args.skip_record_metadata, json=args.json,
        decoder=args.decoder)
    # --tiered: every file is in a tiered copy's virtual log directory, which the
    # reader resolves (None: plain paths and URIs, which kafkastore.dump reads itself)
    resolve = read(args, "dump-log")
    bar: Progress | None = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress("dump-log", total)
        bar.advance(done - bar.done)

    try:
        return dump_files(files, options, sys.stdout, sys.stderr, progress=progress,
                          storage_options=storage_options, resolve=resolve)
    finally:
        if bar is not None:
            bar.close()


def _cmd_describe(args: argparse.Namespace, read) -> int:
    from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME

    if (code := read(args, "describe")) is not None:
        return code
    _check_local_storage_options(args)
    rows = []
    # the metadata log is not a topic's partition: it is described by the note below
    partitions = [(tp, path) for tp, path in partition_dirs(args.directory, args.topic)
                  if tp.topic != CLUSTER_METADATA_TOPIC_NAME]
    policies, note = cleanup_policies(args, sorted({tp.topic for tp, _ in partitions}))
    for tp, path in partitions:
        segments = [(base, os.path.getsize(seg), seg) for base, seg in segment_paths(path)]
        on_disk = sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
                      if os.path.isfile(os.path.join(path, n)))
        rows.append(describe_row(args, tp, segments, on_disk, policies,
                                 lambda seg: _scan_file(seg, validate=False),
                                 read_topic_id(path)))
    return print_describe(args, rows, note)


def _manager(args: argparse.Namespace, *, must_exist: bool = True):
    """A LogManager on the command's directory, its --config settings, no thread."""
    from kafkastore.manager import LogManager

    directory = log_dir(args.directory) if must_exist else args.directory
    return LogManager(directory, parse_settings(getattr(args, "config", None)),
                      background=False)


def _cmd_produce(args: argparse.Namespace) -> int:
    from kafkastore._kernels import murmur2
    from kafkastore.topic import validate_topic

    validate_topic(args.topic)
    if args.partitions is not None and args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, not {args.partitions}")
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, not {args.batch_size}")
    from kafkastore.storage import require_local_path
    try:
        args.directory = require_local_path(args.directory, "kafkastore produce")
    except KafkaStoreError as exc:
        raise UsageError(exc.message) from None
    _fileio.makedirs(args.directory)
    source = sys.stdin if args.input in (None, "-") else open(args.input, encoding="utf-8")
    size = os.path.getsize(args.input) if source is not sys.stdin else 0
    progress = Progress(f"produce {args.topic}", size)
    sent: dict[int, int] = {}
    try:
        with _manager(args, must_exist=False) as manager:
            existing = [tp.partition for tp in manager.logs() if tp.topic == args.topic]
            partitions = args.partitions or (max(existing) + 1 if existing else 1)
            pending: dict[int, list] = {}
            robin = 0
            for lineno, line in enumerate(source, 1):
                progress.advance(len(line.encode()))
                line = line.rstrip("\n")
                if not line:
                    continue
                key, value, headers, part = _parse_input(line, args, lineno)
                if part is None:
                    if key is not None:
                        part = murmur2.partition(key, partitions)
                    else:
                        part, robin = robin % partitions, robin + 1
                elif not 0 <= part < partitions:
                    raise UsageError(f"line {lineno}: partition {part} is not in "
                                     f"[0, {partitions})")
                pending.setdefault(part, []).append((key, value, None, headers))
                if len(pending[part]) >= args.batch_size:
                    _flush_produce(manager, args, part, pending.pop(part), sent)
            for part, recs in pending.items():
                _flush_produce(manager, args, part, recs, sent)
            for part in range(partitions):
                manager.get_or_create(args.topic, part)
    finally:
        progress.close()
        if source is not sys.stdin:
            source.close()
    total = sum(sent.values())
    print(f"produced {total} records to {args.topic} "
          + ", ".join(f"p{p}: {n}" for p, n in sorted(sent.items())))
    return EXIT_OK


def _parse_input(line: str, args, lineno: int):
    if args.format == "json":
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"line {lineno}: not a JSON object: {exc}") from None
        if not isinstance(obj, dict):
            raise UsageError(f"line {lineno}: not a JSON object")

        def blob(v):
            return None if v is None else (v if isinstance(v, str) else json.dumps(v)).encode()

        headers = tuple((str(k), blob(v)) for k, v in (obj.get("headers") or {}).items())
        part = obj.get("partition")
        if part is not None and (not isinstance(part, int) or isinstance(part, bool)):
            raise UsageError(f"line {lineno}: partition must be an integer")
        return blob(obj.get("key")), blob(obj.get("value")), headers, part
    if args.key_separator is not None:
        key, sep, value = line.partition(args.key_separator)
        if not sep:
            raise UsageError(f"line {lineno}: no key separator {args.key_separator!r}")
        return key.encode(), value.encode(), (), None
    return None, line.encode(), (), None


def _flush_produce(manager, args, part: int, recs, sent) -> None:
    log = manager.get_or_create(args.topic, part)
    log.append(recs, compression=args.compression)
    sent[part] = sent.get(part, 0) + len(recs)


def _cmd_consume(args: argparse.Namespace, read) -> int:
    from kafkastore.topic import validate_topic

    validate_topic(args.topic)
    if (code := read(args, "consume")) is not None:
        return code
    _check_local_storage_options(args)
    parts = [(tp, path) for tp, path in partition_dirs(args.directory, args.topic)
             if args.partition is None or tp.partition == args.partition]
    if not parts:
        raise UsageError(f"{args.directory}: no partition of topic {args.topic!r}"
                         + ("" if args.partition is None else f" numbered {args.partition}"))
    remaining = args.max_records
    with _manager(args) as manager:
        for tp, _path in parts:
            remaining = consume_log(args, tp, manager.get(tp.topic, tp.partition), remaining)
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace, read) -> int:
    from kafkastore.index import OffsetIndex, TimeIndex

    if (code := read(args, "verify")) is not None:
        return code
    _check_local_storage_options(args)
    partitions = partition_dirs(args.directory, args.topic)
    total = sum(os.path.getsize(seg) for _, path in partitions
                for _, seg in segment_paths(path))
    progress = Progress("verify", total)
    problems = 0
    try:
        for tp, path in partitions:
            for base, seg in segment_paths(path):
                _entries, valid, size, error = _scan_file(seg, progress=progress)
                if (line := scan_problem(seg, valid, size, error)) is not None:
                    problems += 1
                    print(line)
                for cls, suffix in ((OffsetIndex, ".index"), (TimeIndex, ".timeindex")):
                    index_path = seg[:-4] + suffix
                    if not os.path.exists(index_path):
                        problems += 1
                        print(f"{index_path}: missing (recovery rebuilds it)")
                        continue
                    try:
                        index = cls(index_path, base, os.path.getsize(index_path) or 8,
                                    writable=False)
                        try:
                            index.sanity_check(full=True)
                        finally:
                            index.close()
                    except KafkaStoreError as exc:
                        problems += 1
                        print(f"{index_path}: {exc}")
    finally:
        progress.close()
    if problems and args.repair:
        return _repair(args, partitions)
    return print_verified(len(partitions), problems)


def _repair(args: argparse.Namespace, partitions) -> int:
    from kafkastore.log import Log

    for tp, path in partitions:
        before = {seg: os.path.getsize(seg) for _, seg in segment_paths(path)}
        log = Log.open(path, parse_settings(args.config), recovery_point=0,
                       had_clean_shutdown=False)
        try:
            after = {s.log.path: s.size for s in log.segments}
            cut = sum(size - after.get(seg, 0) for seg, size in before.items())
            print(f"{tp.topic}-{tp.partition}: recovered; {cut} bytes truncated; log end "
                  f"offset {log.log_end_offset}")
        finally:
            log.close()
    return EXIT_OK


def _cmd_compact(args: argparse.Namespace) -> int:
    from kafkastore.cleaner import Cleaner, CleanerConfig, Throttler, clean

    config = CleanerConfig({"log.cleaner.dedupe.buffer.size": args.dedupe_buffer_size})

    class ProgressThrottler(Throttler):
        # The cleaner reports every byte it reads and writes to its throttler: the bar
        # follows them (two reads of the cleanable segments, the map pass and the recopy,
        # plus what is written, so it may finish a little early).
        def maybe_throttle(self, observed: float) -> None:
            bar.advance(int(observed))
            super().maybe_throttle(observed)

    with _manager(args) as manager:
        logs = [(tp, log) for tp, log in sorted(manager.logs().items())
                if args.topic is None or tp.topic == args.topic]
        if args.roll:
            for _, log in logs:
                if log.active_segment.size:
                    log.roll()
        bar = Progress("compact", 2 * sum(log.size - log.active_segment.size
                                           for _, log in logs))
        cleaner = Cleaner(config, throttler=ProgressThrottler(config.max_io_bytes_per_second))
        for tp, log in logs:
            try:
                _, stats = clean(log, config=config, cleaner=cleaner)
            finally:
                bar.close()   # clears the bar's line; the next advance draws it again
            print(f"{tp.topic}-{tp.partition}: read {stats.messages_read} records, kept "
                  f"{stats.messages_written}, removed {stats.records_removed}; "
                  f"{stats.bytes_read} -> {stats.bytes_written} bytes in "
                  f"{stats.elapsed_s:.2f} s")
    return EXIT_OK


def _cmd_retention(args: argparse.Namespace) -> int:
    from kafkastore.retention import delete_old_segments

    with _manager(args) as manager:
        for tp, log in sorted(manager.logs().items()):
            if args.topic is not None and tp.topic != args.topic:
                continue
            before = (len(log.segments), log.log_start_offset, log.size)
            removed = delete_old_segments(log)
            log.delete_pending_segments(force=True)
            print(f"{tp.topic}-{tp.partition}: removed {removed} segment(s); log start "
                  f"offset {before[1]} -> {log.log_start_offset}; {before[2]} -> {log.size} "
                  "bytes")
    return EXIT_OK
