"""The ``kafkastore`` command line.

``kafkastore demo [DIR]`` is a tour of the commands on a local log directory: it runs
them one after the other as a user would type them (produce, describe, consume,
dump-log, verify, a simulated torn write and its repair, compact) and prints each with
its output. ``dump-log`` prints files as Kafka's ``kafka-dump-log.sh`` does
(:mod:`kafkastore.dump`); ``describe``, ``produce``, ``consume``, ``verify``
(``--repair``), ``compact`` and ``retention`` work on a log directory; ``bench`` runs the
benchmark suite's workloads beside the peers. ``kafkastore COMMAND --help`` shows each
one's options and an example; ``docs/cli.rst`` describes them all.

The read-only commands (``describe``, ``consume``, ``dump-log``, ``verify`` without
``--repair``) also take URIs (``s3://bucket/prefix``, ``gs://``, ``abfs://``,
``hdfs://``, ``file://``, fsspec schemes), with ``--storage-option NAME=VALUE`` for the
store: :mod:`kafkastore._cli_uri` reads them through :mod:`kafkastore.storage` and
prints through the same functions as the local code here, which plain paths keep. With
``--tiered`` they read a tiered-storage (KIP-405) copy instead, and ``kafkastore tiered
export|upload`` restore and write one (:mod:`kafkastore._cli_tiered`).

``main(argv=None) -> int`` is the entry point, so the CLI can be driven from
tests and from Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from kafkastore import __version__, _fileio, records
from kafkastore._kernels import BACKEND
from kafkastore.errors import KafkaStoreError

__all__ = ["main"]


# -- the log directory commands -------------------------------------------------------------


class UsageError(Exception):
    """A user mistake: printed as one line on stderr, exit code 2, never a traceback."""


#: Exit codes: 0 success; 1 a problem found in the data (verify) or a file dump-log could
#: not dump (it goes on with the others, as its report says); 2 a usage error or an input
#: that cannot be opened (a missing directory, a bad topic name, an unreadable file).
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, total: int, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = total > 0 and getattr(self.stream, "isatty", lambda: False)()
        self.label, self.total, self.done = label, total, 0
        self._last = 0.0

    def advance(self, amount: int) -> None:
        self.done += amount
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}%")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (len(self.label) + 41) + "\r")
            self.stream.flush()


def _log_dir(path: str) -> str:
    if not os.path.isdir(path):
        raise UsageError(f"{path}: no such log directory")
    return path


def _is_uri(path: str) -> bool:
    """Whether a command's directory (or file) is a URI (``s3://...``, ``file://...``):
    the read-only commands then read it through :mod:`kafkastore.storage`; a plain path
    keeps the local code, unchanged."""
    from kafkastore.storage import split_uri

    return bool(split_uri(path)[0])


def _tiered(args: argparse.Namespace, command: str):
    """``--tiered``: the command run on a tiered-storage copy (:mod:`kafkastore._cli_tiered`);
    None without it."""
    from kafkastore.cli import tiered as _cli_tiered

    return _cli_tiered.run(args, command) if _cli_tiered.check_flags(args) else None


def _storage_options(args: argparse.Namespace) -> dict[str, str]:
    """``--storage-option NAME=VALUE`` pairs as a dict (the store checks the names)."""
    out: dict[str, str] = {}
    for pair in getattr(args, "storage_option", None) or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option expects NAME=VALUE, not {pair!r}")
        out[key.strip()] = value
    return out


def _open_storage(uri: str, options: dict[str, str]):
    """:func:`kafkastore.storage.open_storage`, its refusals (an unknown option, a bad
    value, a scheme nothing serves) as usage errors."""
    from kafkastore.errors import ConfigError
    from kafkastore.storage import open_storage

    try:
        return open_storage(uri, options)
    except ConfigError as exc:
        raise UsageError(f"--storage-option: {exc.message}" if exc.key != "path"
                         else exc.message) from None


def _check_local_storage_options(args: argparse.Namespace) -> None:
    """A local directory takes only the seam's own options (the retry settings, which
    it does not need): anything else is the same usage error as for a URI."""
    options = _storage_options(args)
    if options:
        _open_storage(args.directory, options)


def _partition_dirs(directory: str, topic: str | None = None):
    """``(TopicPartition, path)`` of the live partition directories of a log directory."""
    from kafkastore.log_dir import live_partition_dirs

    out = [(tp, path) for tp, path in live_partition_dirs(_log_dir(directory), strict=False)
           if topic is None or tp.topic == topic]
    return sorted(out)


def _segment_paths(partition_dir: str) -> list[tuple[int, str]]:
    from kafkastore.segment import log_file_offset

    bases = ((log_file_offset(name), name) for name in os.listdir(partition_dir))
    return sorted((base, os.path.join(partition_dir, name)) for base, name in bases
                  if base is not None)


def _scan_file(path: str, *, validate: bool = True, progress: _Progress | None = None):
    """Read a ``.log`` file read-only through a bounded buffer: ``(entries, valid_bytes,
    size, error)``, entries as ``(position, size, magic, base_offset, last_offset,
    max_timestamp)``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return _scan(lambda pos, n: os.pread(fd, n, pos), os.fstat(fd).st_size,
                     validate=validate, progress=progress)
    finally:
        os.close(fd)


def _scan(read, size: int, *, validate: bool = True, progress: _Progress | None = None):
    """:func:`_scan_file` of any file: ``read(position, n)`` gives its bytes (a local
    ``pread``, or a :class:`~kafkastore.storage.RangeReader`'s ranged read)."""
    from kafkastore.file_records import read_chunks

    entries, valid, error = [], 0, None
    for start, _data, scan in read_chunks(read, 0, size, 1 << 20, validate=validate):
        rows = zip(scan.position.tolist(), scan.size.tolist(), scan.magic.tolist(),
                   scan.base_offset.tolist(), scan.last_offset.tolist(),
                   scan.max_timestamp.tolist())
        entries.extend((start + p, *rest) for p, *rest in rows)
        valid = start + scan.valid_bytes
        if progress:
            progress.advance(scan.valid_bytes)
        if scan.error is not None:
            error = scan.error
    return entries, valid, size, error


def _cmd_dump_log(args: argparse.Namespace) -> int:
    from kafkastore.dump import DumpOptions, dump_files

    files = [f for f in args.files.split(",") if f]
    if not files:
        raise UsageError("--files needs at least one file")
    storage_options = _storage_options(args)
    if storage_options:
        # refuse an unknown or bad option before anything is dumped (once per scheme)
        from kafkastore.storage import split_uri

        firsts = {split_uri(f)[0]: f for f in reversed(files)}
        for f in firsts.values():
            _open_storage(f if split_uri(f)[0] else ".", storage_options)
    options = DumpOptions(
        print_data_log=args.print_data_log, deep_iteration=args.deep_iteration,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        max_message_size=args.max_message_size, max_bytes=args.max_bytes,
        skip_record_metadata=args.skip_record_metadata, json=args.json)
    # --tiered: every file is in a tiered copy's virtual log directory
    resolve = _tiered(args, "dump-log")
    bar: _Progress | None = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = _Progress("dump-log", total)
        bar.advance(done - bar.done)

    try:
        return dump_files(files, options, sys.stdout, sys.stderr, progress=progress,
                          storage_options=storage_options, resolve=resolve)
    finally:
        if bar is not None:
            bar.close()


def _cleanup_policies(args: argparse.Namespace, topics) -> tuple[dict, str | None]:
    """``{topic: (cleanup.policy, where it came from)}`` and a line about the KRaft
    metadata log read (None if none was). From ``--config``, else the metadata log's topic
    config or cluster default, else Kafka's default."""
    from kafkastore.cluster_metadata import find_metadata_log, read_cluster_metadata
    from kafkastore.config import LogConfig

    settings = _parse_settings(args.config)
    if settings:
        LogConfig.from_dict(settings)   # a bad name or value is a usage error here too
    if "cleanup.policy" in settings:
        return {t: (settings["cleanup.policy"], "--config") for t in topics}, None
    where = args.metadata_dir or args.directory
    meta_dir = find_metadata_log(where)
    if meta_dir is None and args.metadata_dir is not None:
        raise UsageError(f"{args.metadata_dir}: no KRaft metadata log (__cluster_metadata-0)")
    default = LogConfig().cleanup_policy
    out = {t: (",".join(default), "default") for t in topics}
    if meta_dir is None:
        return out, None
    try:
        md = read_cluster_metadata(meta_dir)
    except KafkaStoreError as exc:
        print(f"kafkastore describe: {meta_dir}: cannot read the metadata log ({exc}); "
              "cleanup policies are Kafka's default", file=sys.stderr)
        return out, None
    for t in topics:
        own = md.topic_config(t).get("cleanup.policy")
        if own is not None:
            out[t] = (own, "metadata")
        elif "log.cleanup.policy" in md.cluster_defaults:
            out[t] = (md.cluster_defaults["log.cleanup.policy"], "metadata: cluster default")
    src = md.source
    note = (f"KRaft metadata log {meta_dir}: {len(md.topics)} topics, read to offset "
            f"{src.end_offset}" + (f" (snapshot {os.path.basename(src.snapshot)})"
                                   if src.snapshot else ""))
    return out, note


def _cmd_describe(args: argparse.Namespace) -> int:
    from kafkastore.topic import CLUSTER_METADATA_TOPIC_NAME

    if (code := _tiered(args, "describe")) is not None:
        return code
    if _is_uri(args.directory):
        from kafkastore.cli.uri import describe_uri

        rows, note = describe_uri(args)
        return _print_describe(args, rows, note)
    _check_local_storage_options(args)
    rows = []
    # the metadata log is not a topic's partition: it is described by the note below
    partitions = [(tp, path) for tp, path in _partition_dirs(args.directory, args.topic)
                  if tp.topic != CLUSTER_METADATA_TOPIC_NAME]
    policies, note = _cleanup_policies(args, sorted({tp.topic for tp, _ in partitions}))
    for tp, path in partitions:
        segments = [(base, os.path.getsize(seg), seg) for base, seg in _segment_paths(path)]
        on_disk = sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
                      if os.path.isfile(os.path.join(path, n)))
        rows.append(_describe_row(args, tp, segments, on_disk, policies,
                                  lambda seg: _scan_file(seg, validate=False)))
    return _print_describe(args, rows, note)


def _describe_row(args: argparse.Namespace, tp, segments, on_disk: int, policies,
                  scan) -> dict:
    """One partition's row of ``describe``: ``segments`` are ``(base offset, size,
    file)`` in offset order, ``scan(file)`` is :func:`_scan` of one (local or not)."""
    log_bytes = sum(size for _, size, _ in segments)
    end, last_ts, invalid = None, None, 0
    # the newest segments hold the end offset and the latest timestamp: read back
    # from the last until one has data (every one with --scan-all)
    for _base, _size, seg in reversed(segments):
        entries, valid, size, _err = scan(seg)
        invalid += size - valid
        if entries:
            if end is None:
                end = entries[-1][4] + 1
            stamps = [e[5] for e in entries if e[5] >= 0]
            if stamps:
                last_ts = max(stamps) if last_ts is None else max(last_ts, max(stamps))
        if end is not None and not args.scan_all:
            break
    start = segments[0][0] if segments else 0
    # an empty active segment is named after the log end offset
    end = max(end or 0, segments[-1][0]) if segments else 0
    policy, source = policies[tp.topic]
    return {"topic": tp.topic, "partition": tp.partition, "segments": len(segments),
            "log_start_offset": start, "log_end_offset": end,
            "log_bytes": log_bytes, "bytes_on_disk": on_disk,
            "max_timestamp": last_ts, "invalid_tail_bytes": invalid,
            "cleanup_policy": policy, "cleanup_policy_source": source}


def _print_describe(args: argparse.Namespace, rows: list[dict], note: str | None) -> int:
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_OK
    if not rows:
        print(f"{args.directory}: no partitions")
    else:
        print(f"{'partition':28} {'segments':>8} {'start':>12} {'end':>12} "
              f"{'log bytes':>14} {'on disk':>14}  {'max timestamp':>13}  cleanup policy")
        for r in rows:
            ts = "-" if r["max_timestamp"] is None else str(r["max_timestamp"])
            print(f"{r['topic'] + '-' + str(r['partition']):28} {r['segments']:>8} "
                  f"{r['log_start_offset']:>12} {r['log_end_offset']:>12} "
                  f"{r['log_bytes']:>14} {r['bytes_on_disk']:>14}  {ts:>13}  "
                  f"{r['cleanup_policy']} ({r['cleanup_policy_source']})")
    if note:
        print(note)
    return EXIT_OK


def _parse_settings(pairs) -> dict:
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--config expects name=value, not {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _manager(args: argparse.Namespace, *, must_exist: bool = True):
    """A LogManager on the command's directory, its --config settings, no thread."""
    from kafkastore.manager import LogManager

    directory = _log_dir(args.directory) if must_exist else args.directory
    return LogManager(directory, _parse_settings(getattr(args, "config", None)),
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
    progress = _Progress(f"produce {args.topic}", size)
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


def _cmd_consume(args: argparse.Namespace) -> int:
    from kafkastore.topic import validate_topic

    validate_topic(args.topic)
    if (code := _tiered(args, "consume")) is not None:
        return code
    if _is_uri(args.directory):
        from kafkastore.cli.uri import consume_uri

        return consume_uri(args)
    _check_local_storage_options(args)
    parts = [(tp, path) for tp, path in _partition_dirs(args.directory, args.topic)
             if args.partition is None or tp.partition == args.partition]
    if not parts:
        raise UsageError(f"{args.directory}: no partition of topic {args.topic!r}"
                         + ("" if args.partition is None else f" numbered {args.partition}"))
    remaining = args.max_records
    with _manager(args) as manager:
        for tp, _path in parts:
            remaining = _consume_log(args, tp, manager.get(tp.topic, tp.partition), remaining)
    return EXIT_OK


def _consume_log(args: argparse.Namespace, tp, log, remaining: int | None) -> int | None:
    """Print the records of one partition's log as ``consume`` asks; the records still
    to print (None: no limit). ``log`` is a :class:`~kafkastore.log.Log` or a
    :class:`~kafkastore.log_view.ReadOnlyLog` (the same read and search API)."""
    from kafkastore.log import EARLIEST_TIMESTAMP
    from kafkastore.txn_index import AbortedTransactionFilter

    # read_committed: the log ends at the last stable offset for the consumer
    committed = getattr(args, "isolation_level", "read_uncommitted") == "read_committed"
    end = log.last_stable_offset if committed else log.log_end_offset
    if args.offset is not None:
        start = max(args.offset, log.log_start_offset)
    elif args.timestamp is not None:
        found = log.offset_for_timestamp(args.timestamp)
        start = log.log_end_offset if found is None else found.offset
    elif args.last is not None:
        start = max(end - args.last, log.log_start_offset)
    else:
        found = log.offset_for_timestamp(EARLIEST_TIMESTAMP)
        start = found.offset if found is not None else log.log_start_offset
    offset = start
    txn_filter = AbortedTransactionFilter(log.collect_aborted_transactions(start, end)) \
        if committed and start < end else None
    while offset < end and (remaining is None or remaining > 0):
        batches = list(log.read(offset, 1 << 20).batches(validate=True))
        if not batches:
            break
        for batch in batches:
            if batch.magic >= 2 and batch.base_offset >= end:
                return remaining
            if txn_filter is not None and not txn_filter.keep(batch):
                pass   # an aborted transaction's batch, or a marker
            elif not batch.is_control:
                for r in batch:
                    if r.offset >= end:
                        return remaining
                    if r.offset < offset or (remaining is not None and remaining <= 0):
                        continue
                    _print_record(tp, r, args)
                    if remaining is not None:
                        remaining -= 1
            offset = max(offset, batch.last_offset + 1)
    return remaining


def _text(b) -> str | None:
    return None if b is None else bytes(b).decode("utf-8", "replace")


def _print_record(tp, r, args) -> None:
    if args.format == "json":
        print(json.dumps({"topic": tp.topic, "partition": tp.partition, "offset": r.offset,
                          "timestamp": r.timestamp, "key": _text(r.key),
                          "value": _text(r.value),
                          "headers": {k: _text(v) for k, v in r.headers}}))
        return
    parts = []
    if args.print_offset:
        parts.append(f"{tp.partition}:{r.offset}")
    if args.print_timestamp:
        parts.append(str(r.timestamp))
    if args.print_key:
        parts.append("null" if r.key is None else _text(r.key))
    if args.print_headers:
        parts.append(",".join(f"{k}:{_text(v)}" for k, v in r.headers) or "NO_HEADERS")
    parts.append("null" if r.value is None else _text(r.value))
    print("\t".join(parts))


def _cmd_verify(args: argparse.Namespace) -> int:
    from kafkastore.index import OffsetIndex, TimeIndex

    if (code := _tiered(args, "verify")) is not None:
        return code
    if _is_uri(args.directory):
        if args.repair:
            raise UsageError(f"--repair needs a local directory: it rewrites the files "
                             f"(truncates, rebuilds indexes), which {args.directory} is "
                             "not; verify it without --repair, or repair a local copy")
        from kafkastore.cli.uri import verify_uri

        return verify_uri(args)
    _check_local_storage_options(args)
    partitions = _partition_dirs(args.directory, args.topic)
    total = sum(os.path.getsize(seg) for _, path in partitions
                for _, seg in _segment_paths(path))
    progress = _Progress("verify", total)
    problems = 0
    try:
        for tp, path in partitions:
            for base, seg in _segment_paths(path):
                entries, valid, size, error = _scan_file(seg, progress=progress)
                if error is not None:
                    problems += 1
                    print(f"{seg}: corrupt entry at position {valid}: {error}")
                elif valid < size:
                    problems += 1
                    print(f"{seg}: {size - valid} bytes of a partial entry at the end "
                          f"(position {valid})")
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
    print(f"verified {len(partitions)} partitions: "
          + ("no problems" if not problems else f"{problems} problem(s)"))
    return EXIT_PROBLEM if problems else EXIT_OK


def _repair(args: argparse.Namespace, partitions) -> int:
    from kafkastore.log import Log

    for tp, path in partitions:
        before = {seg: os.path.getsize(seg) for _, seg in _segment_paths(path)}
        log = Log.open(path, _parse_settings(args.config), recovery_point=0,
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
        bar = _Progress("compact", 2 * sum(log.size - log.active_segment.size
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


# -- the demo: a tour of the commands ----------------------------------------------------


def _demo_orders(path: str, count: int, seed: int = 7) -> None:
    """Write ``count`` order events as JSON lines (key: the customer) to ``path``."""
    import random

    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            customer = f"customer-{rng.randrange(500):04d}"
            event = {"key": customer,
                     "value": {"order": i, "customer": customer,
                               "status": ("placed", "paid", "shipped")[i % 3],
                               "amount": round(rng.uniform(5, 500), 2)}}
            if i % 1000 == 0:
                event["headers"] = {"source": "kafkastore-demo"}
            f.write(json.dumps(event, separators=(",", ":")) + "\n")


def _demo_step(argv: list[str], expect: int = EXIT_OK, lines: int = 12) -> bool:
    """Run ``kafkastore ARGV`` in this process as a user would type it: echo the command,
    then (at most ``lines`` of) what it printed. False if it exited other than ``expect``."""
    import contextlib
    import io
    import shlex

    print()
    print("$ kafkastore " + " ".join(shlex.quote(a) for a in argv))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    printed = out.getvalue().splitlines()
    for line in printed[:lines]:
        print(line[:160] + (" ..." if len(line) > 160 else ""))
    if len(printed) > lines:
        print(f"... ({len(printed) - lines} more lines)")
    if code != EXIT_OK:
        print(f"(exit code {code})")
    if code != expect:
        print(f"kafkastore demo: expected exit code {expect}, got {code}", file=sys.stderr)
    return code == expect


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.records < 1:
        raise UsageError(f"--records must be at least 1, not {args.records}")
    root = args.directory or tempfile.mkdtemp(prefix="kafkastore-demo-")
    _fileio.makedirs(root)
    print(f"kafkastore {__version__} ({BACKEND} kernels): the command line, end to end, "
          f"on the log directory {root}")
    fd, source = tempfile.mkstemp(prefix="kafkastore-demo-", suffix=".jsonl")
    os.close(fd)
    try:
        _demo_orders(source, args.records)
        print(f"\n# {args.records} order events as JSON lines, keyed by customer, into "
              "topic 'orders': 3 partitions (Kafka's murmur2 partitioner), zstd")
        if not _demo_step(["produce", root, "orders", "--input", source, "--format", "json",
                           "--partitions", "3", "--compression", "zstd",
                           "--config", "segment.bytes=32768"]):
            return EXIT_PROBLEM
    finally:
        os.unlink(source)
    # the steps below look at the partition holding the most (with few records, some
    # partitions may hold none)
    tp, path = max(_partition_dirs(root, "orders"), key=lambda item: sum(
        os.path.getsize(seg) for _, seg in _segment_paths(item[1])))
    part = str(tp.partition)
    segments = [seg for _, seg in _segment_paths(path)]
    first = next(seg for seg in segments if os.path.getsize(seg))
    last = segments[-1]
    steps = [
        ("what is on disk", ["describe", root], EXIT_OK, 12),
        (f"the first records of partition {part}",
         ["consume", root, "orders", "--partition", part, "--max-records", "3",
          "--print-offset", "--print-key", "--print-headers"], EXIT_OK, 12),
        ("the first segment as Kafka's kafka-dump-log.sh prints it",
         ["dump-log", "--files", first, "--deep-iteration", "--print-data-log"], EXIT_OK, 6),
        ("check every segment and index", ["verify", root], EXIT_OK, 12),
    ]
    for comment, argv, expect, lines in steps:
        print(f"\n# {comment}")
        if not _demo_step(argv, expect, lines):
            return EXIT_PROBLEM
    # a crash in the middle of a write leaves the start of a batch at the end of the log
    with open(first, "rb") as f:
        torn = f.read(40)
    with open(last, "ab") as f:
        f.write(torn)
    print(f"\n# a crash mid-write: the first {len(torn)} bytes of a batch appended to "
          f"{last}")
    steps = [
        ("verify finds it (exit code 1) ...", ["verify", root], EXIT_PROBLEM, 12),
        ("... and --repair runs Kafka's recovery: the torn batch goes, nothing else",
         ["verify", root, "--repair"], EXIT_OK, 12),
        ("compaction keeps the latest order of each customer",
         ["compact", root, "--topic", "orders", "--roll", "--config",
          "cleanup.policy=compact"], EXIT_OK, 12),
        (f"the latest two records of partition {part}, as JSON",
         ["consume", root, "orders", "--partition", part, "--last", "2", "--format", "json"],
         EXIT_OK, 12),
        ("after compaction", ["describe", root], EXIT_OK, 12),
    ]
    for comment, argv, expect, lines in steps:
        print(f"\n# {comment}")
        if not _demo_step(argv, expect, lines):
            return EXIT_PROBLEM
    print("\n# from Python, the same files as numpy columns")
    with open(first, "rb") as f:
        cols = records.decode_columns(f.read())
    print(f">>> kafkastore.decode_columns(open({first!r}, 'rb').read())")
    print(f"{len(cols)} records: offsets {int(cols.offset[0])}..{int(cols.offset[-1])}, "
          f"timestamps {int(cols.timestamp.min())}..{int(cols.timestamp.max())}, "
          f"{int(cols.value_offsets[-1])} value bytes")
    print(f"\nlog directory: {root} (Kafka loads it: its <topic>-<partition> directories "
          "go into a broker's log.dirs)")
    return EXIT_OK


def _cmd_bench(args: argparse.Namespace) -> int:
    from kafkastore.bench.suite import count_steps, environment, format_table, run_suite

    workloads = [w for w in args.workloads.split(",") if w]
    codecs = [c for c in args.codecs.split(",") if c]
    bar = _Progress("bench", count_steps(workloads, codecs))
    try:
        results = run_suite(args.records, workloads=workloads, codecs=codecs, reps=args.reps,
                            progress=lambda label: bar.advance(1), directory=args.tmp_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    finally:
        bar.close()
    env = environment()
    if args.json:
        print(json.dumps({"records": args.records, "reps": args.reps, "environment": env,
                          "results": [r.as_dict() for r in results]}))
        return EXIT_OK
    print(f"kafkastore bench: {args.records:,} records, best of {args.reps} reps, "
          "kafkastore and each peer alternating in one process")
    print("; ".join(f"{k} {v}" for k, v in env.items()))
    print("ratio = peer time / kafkastore time: above 1, kafkastore is faster")
    print()
    print(format_table(results, markdown=args.markdown))
    return EXIT_OK


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkastore",
        description="Kafka-format log storage: write, read and inspect Kafka log segments.")
    parser.add_argument("--version", action="version",
                        version=f"kafkastore {__version__} ({BACKEND} kernels)")
    sub = parser.add_subparsers(dest="command", required=True)
    from kafkastore.cli import tiered as _cli_tiered
    demo = sub.add_parser(
        "demo", help="a tour of the commands on a local log directory: produce, describe, "
        "consume, dump-log, verify, a simulated crash and its repair, compact",
        description="Runs the kafkastore commands one after the other on DIR, as a user "
        "would type them, and prints each with its output. It appends to topic 'orders' "
        "(and simulates a torn write at the end of its partition 0).",
        epilog="example:\n  kafkastore demo ./demo-logs",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("directory", nargs="?",
                      help="log directory to write into (default: a new temporary one)")
    demo.add_argument("--records", type=int, default=20_000,
                      help="order events to produce (default: 20000)")
    demo.set_defaults(func=_cmd_demo)

    def command(name, help_text, example, func):
        p = sub.add_parser(name, help=help_text, description=help_text,
                           epilog=f"example:\n  {example}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        return p

    def config_option(p):
        p.add_argument("--config", action="append", metavar="NAME=VALUE",
                       help="a topic setting for the logs, Kafka's name (repeatable)")

    def storage_option(p, *, tiered: bool = False):
        p.add_argument("--storage-option", action="append", metavar="NAME=VALUE",
                       help="a setting of the object store a URI names, pyarrow's name "
                       "(endpoint_override, region, access_key, ...; repeatable); "
                       "credentials otherwise come from the environment")
        if tiered:   # --tiered, --layout, --key-prefix, --key-ring
            _cli_tiered.add_options(p)

    uri_help = ("a log directory (holds <topic>-<partition> directories): a path or a "
                "URI (s3://bucket/prefix, gs://, abfs://, hdfs://, file://, any fsspec "
                "scheme)")

    p = command("dump-log", "print segment, offset index and time index files as Kafka's "
                "kafka-dump-log.sh does (same lines, same problem reports)",
                "kafkastore dump-log --files 00000000000000000000.log --deep-iteration "
                "--print-data-log", _cmd_dump_log)
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
    p.add_argument("--json", action="store_true",
                   help="one JSON object per batch, record, index entry and problem")
    storage_option(p, tiered=True)

    p = command("describe", "list the partitions of a log directory: segments, offsets, "
                "sizes, newest timestamp, cleanup policy",
                "kafkastore describe /var/lib/kafka/data --topic orders", _cmd_describe)
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

    p = command("produce", "append lines (or JSON lines) from stdin or a file to a topic",
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

    p = command("consume", "print the records of a topic",
                "kafkastore consume ./logs orders --from-beginning --max-records 10 "
                "--print-key", _cmd_consume)
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

    p = command("verify", "check every segment and index of a log directory without "
                "changing anything (--repair: recover what is broken)",
                "kafkastore verify ./logs --repair", _cmd_verify)
    p.add_argument("directory", help=uri_help)
    p.add_argument("--topic")
    p.add_argument("--repair", action="store_true",
                   help="run crash recovery on the partitions (truncates a bad tail, "
                   "rebuilds indexes) and report what went; a local directory only")
    config_option(p)
    storage_option(p, tiered=True)

    p = command("compact", "compact the logs of a directory now (Kafka's log cleaner)",
                "kafkastore compact ./logs --topic users", _cmd_compact)
    p.add_argument("directory")
    p.add_argument("--topic")
    p.add_argument("--roll", action="store_true",
                   help="roll the active segment first, so its records are compacted too")
    p.add_argument("--dedupe-buffer-size", type=int, default=128 << 20)
    config_option(p)

    p = command("retention", "apply retention (retention.ms, retention.bytes, the log start "
                "offset) once and delete what it removes",
                "kafkastore retention ./logs --config retention.bytes=1073741824",
                _cmd_retention)
    p.add_argument("directory")
    p.add_argument("--topic")
    config_option(p)

    _cli_tiered.add_commands(sub, storage_option)
    from kafkastore.bench.suite import CODECS, WORKLOADS

    p = command("bench", "run the benchmark suite's standard workloads at a chosen size, "
                "kafkastore beside aiokafka and kafka-python (when installed), and print "
                "the ratios", "kafkastore bench --records 200000 --workloads encode,decode "
                "--codecs none,zstd", _cmd_bench)
    p.add_argument("--records", type=int, default=100_000,
                   help="records in the workload (default 100000; at least 1000). Below "
                   "about a million, fixed costs (creating a log's files, fsync at close) "
                   "weigh on the append and clean rows more than on their peers")
    p.add_argument("--reps", type=int, default=3, help="timed rounds; the best counts "
                   "(default 3)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated, from {','.join(WORKLOADS)} (default: all)")
    p.add_argument("--codecs", default=",".join(CODECS), help="codecs of the encode, "
                   f"decode and columns workloads (default {','.join(CODECS)})")
    p.add_argument("--tmp-dir", help="where the workload's files go (default: the system's "
                   "temporary directory)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object: environment and "
                     "every comparison")
    out.add_argument("--markdown", action="store_true", help="the table in markdown")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # the reader went away (``| head``): stop quietly, as Unix tools do; stdout goes
        # to /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141   # 128 + SIGPIPE
    except UsageError as err:
        print(f"kafkastore {args.command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaStoreError as err:
        print(f"kafkastore {args.command}: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        print(f"kafkastore {args.command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"kafkastore {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
