"""What the CLI's families of commands share.

The families (:mod:`~kafkastore.cli.local`, :mod:`~kafkastore.cli.uri`,
:mod:`~kafkastore.cli.tiered`, :mod:`~kafkastore.cli.demo`, :mod:`~kafkastore.cli.bench`)
import only this module of the CLI, never each other; :mod:`kafkastore.cli.app` assembles
them. Here:

* the exit codes and :class:`UsageError`;
* :class:`CommandLine`, what a family adds its subcommands to, and through which a read
  command (``describe``, ``consume``, ``verify``, ``dump-log``) hands a source that is
  not a local directory (a URI, a tiered copy) to the family that reads it;
* the argument helpers (``--config``, ``--storage-option``, a tiered copy's options) and
  their parsing;
* the progress bar;
* what the read commands do the same way whatever the source: the scan of a ``.log``,
  a ``describe`` row and its table, a partition's ``consume``.

Thread-safety: the commands run in one thread; nothing here is shared between threads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable

from kafkastore.errors import KafkaStoreError, StorageError

__all__ = [
    "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "UsageError",
    "CommandLine", "config_option", "storage_option", "tiered_options",
    "parse_settings", "parse_storage_options", "open_storage", "is_uri", "one_line",
    "log_dir", "partition_dirs", "segment_paths", "Progress", "scan_log", "scan_problem",
    "print_verified",
    "cleanup_policies", "describe_row", "print_describe", "consume_log",
]


# -- exit codes and usage errors -----------------------------------------------------------


class UsageError(Exception):
    """A user mistake: printed as one line on stderr, exit code 2, never a traceback."""


#: Exit codes: 0 success; 1 a problem found in the data (verify) or a file dump-log could
#: not dump (it goes on with the others, as its report says); 2 a usage error or an input
#: that cannot be opened (a missing directory, a bad topic name, an unreadable file).
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


# -- the command line the families fill ----------------------------------------------------


class CommandLine:
    """The subcommands being built (:func:`kafkastore.cli.app.build_parser`): each
    family's ``register(cli)`` adds its own with :meth:`command` (or through :attr:`sub`
    for a nested one) and, if it reads sources other than a local directory, a reader
    with :meth:`add_reader`. :attr:`main` runs a whole command line (the demo's tour)."""

    def __init__(self, sub, main: Callable[[list[str]], int]) -> None:
        self.sub = sub
        self.main = main
        self._readers: list[Callable] = []

    def command(self, name: str, help_text: str, example: str,
                func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        """A subcommand: ``help_text`` is its help and description, ``example`` its
        epilog (kept as written), ``func(args)`` runs it."""
        p = self.sub.add_parser(name, help=help_text, description=help_text,
                                epilog=f"example:\n  {example}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        return p

    def add_reader(self, reader: Callable[[argparse.Namespace, str], object]) -> None:
        """``reader(args, command)`` runs the read command ``command`` when ``args`` name
        its kind of source and returns the exit code (for ``dump-log``, the resolver of
        its files); None when the source is not its kind. Readers are asked in the order
        they were added."""
        self._readers.append(reader)

    def read(self, args: argparse.Namespace, command: str):
        """The first reader's answer for ``command`` on ``args``' source; None when no
        reader takes it (a local directory: the calling command reads it)."""
        for reader in self._readers:
            answer = reader(args, command)
            if answer is not None:
                return answer
        return None


def config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a topic setting for the logs, Kafka's name (repeatable)")


def storage_option(p: argparse.ArgumentParser, *, tiered: bool = False) -> None:
    """``--storage-option``; with ``tiered``, a tiered copy's options too (the read
    commands)."""
    p.add_argument("--storage-option", action="append", metavar="NAME=VALUE",
                   help="a setting of the object store a URI names, pyarrow's name "
                   "(endpoint_override, region, access_key, ...; repeatable); "
                   "credentials otherwise come from the environment")
    if tiered:   # --tiered, --layout, --key-prefix, --key-ring
        tiered_options(p)


def tiered_options(p: argparse.ArgumentParser, *, flag: bool = True,
                   writing: bool = False) -> None:
    """The options of a tiered copy (``--tiered`` itself when ``flag``; ``writing``: the
    copy is written, its layout chosen)."""
    g = p.add_argument_group("tiered-storage copies (KIP-405)")
    if flag:
        g.add_argument("--tiered", action="store_true",
                       help="the directory (dump-log: each file) is a tiered-storage copy: "
                       "the objects Aiven's plugin or Kafka's LocalTieredStorage uploaded")
    g.add_argument("--layout", choices=("aiven", "local"),
                   help="the copy's layout (default: aiven)" if writing else
                   "the copy's layout (default: detected from the object names)")
    g.add_argument("--key-prefix", default="",
                   help="Aiven's storage.key.prefix, when it ends inside an object name")
    g.add_argument("--key-ring", metavar="ID=KEY.pem[,ID2=KEY2.pem]",
                   help="RSA private keys (PEM files) by key id: of encrypted segments, or "
                   "(upload) the key that encrypts" if writing else
                   "RSA private keys (PEM files) of encrypted segments, by key id")


# -- options parsed, stores opened ---------------------------------------------------------


def parse_settings(pairs) -> dict:
    """``--config NAME=VALUE`` pairs as a dict (the config class checks the names)."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--config expects name=value, not {pair!r}")
        out[key.strip()] = value.strip()
    return out


def parse_storage_options(args: argparse.Namespace) -> dict[str, str]:
    """``--storage-option NAME=VALUE`` pairs as a dict (the store checks the names)."""
    out: dict[str, str] = {}
    for pair in getattr(args, "storage_option", None) or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option expects NAME=VALUE, not {pair!r}")
        out[key.strip()] = value
    return out


def open_storage(uri: str, options: dict[str, str]):
    """:func:`kafkastore.storage.open_storage`, its refusals (an unknown option, a bad
    value, a scheme nothing serves) as usage errors."""
    from kafkastore.errors import ConfigError
    from kafkastore.storage import open_storage as _open

    try:
        return _open(uri, options)
    except ConfigError as exc:
        raise UsageError(f"--storage-option: {exc.message}" if exc.key != "path"
                         else exc.message) from None


def is_uri(path: str) -> bool:
    """Whether a command's directory (or file) is a URI (``s3://...``, ``file://...``):
    the read-only commands then read it through :mod:`kafkastore.storage`; a plain path
    keeps the local code, unchanged."""
    from kafkastore.storage import split_uri

    return bool(split_uri(path)[0])


def one_line(fn):
    """The store's failures (after its retries) as one line: pyarrow's messages may
    span several."""
    def run(args: argparse.Namespace):
        try:
            return fn(args)
        except StorageError as exc:
            text = " ".join(str(exc).split())
            raise UsageError(f"{type(exc).__name__}: {text}") from None
    run.__doc__ = fn.__doc__
    run.__name__ = fn.__name__
    return run


# -- local log directories -----------------------------------------------------------------


def log_dir(path: str) -> str:
    if not os.path.isdir(path):
        raise UsageError(f"{path}: no such log directory")
    return path


def partition_dirs(directory: str, topic: str | None = None):
    """``(TopicPartition, path)`` of the live partition directories of a log directory."""
    from kafkastore.log_dir import live_partition_dirs

    out = [(tp, path) for tp, path in live_partition_dirs(log_dir(directory), strict=False)
           if topic is None or tp.topic == topic]
    return sorted(out)


def segment_paths(partition_dir: str) -> list[tuple[int, str]]:
    from kafkastore.segment import log_file_offset

    bases = ((log_file_offset(name), name) for name in os.listdir(partition_dir))
    return sorted((base, os.path.join(partition_dir, name)) for base, name in bases
                  if base is not None)


# -- progress ------------------------------------------------------------------------------


class Progress:
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


# -- what the read commands share ----------------------------------------------------------


def scan_log(read, size: int, *, validate: bool = True, progress: Progress | None = None):
    """Read a ``.log`` file read-only through a bounded buffer: ``(entries, valid_bytes,
    size, error)``, entries as ``(position, size, magic, base_offset, last_offset,
    max_timestamp)``. ``read(position, n)`` gives its bytes (a local ``pread``, a
    :class:`~kafkastore.storage.RangeReader`'s ranged read, a tiered copy's)."""
    from kafkastore.file_records import read_chunks

    entries, valid, error = [], 0, None
    for start, _data, chunk in read_chunks(read, 0, size, 1 << 20, validate=validate):
        rows = zip(chunk.position.tolist(), chunk.size.tolist(), chunk.magic.tolist(),
                   chunk.base_offset.tolist(), chunk.last_offset.tolist(),
                   chunk.max_timestamp.tolist())
        entries.extend((start + p, *rest) for p, *rest in rows)
        valid = start + chunk.valid_bytes
        if progress:
            progress.advance(chunk.valid_bytes)
        if chunk.error is not None:
            error = chunk.error
    return entries, valid, size, error


def scan_problem(shown: str, valid: int, size: int, error, at: str | None = None) -> str | None:
    """``verify``'s line for a ``.log`` (named ``shown``) whose :func:`scan_log` stopped
    before its end: a corrupt entry, or a partial one at the end; None when it did not.
    ``at`` says where (default ``position <valid>``)."""
    at = f"position {valid}" if at is None else at
    if error is not None:
        return f"{shown}: corrupt entry at {at}: {error}"
    if valid < size:
        return f"{shown}: {size - valid} bytes of a partial entry at the end ({at})"
    return None


def print_verified(partitions: int, problems: int, what: str = "") -> int:
    """``verify``'s last line, and its exit code."""
    print(f"verified {partitions} partitions{what}: "
          + ("no problems" if not problems else f"{problems} problem(s)"))
    return EXIT_PROBLEM if problems else EXIT_OK


def cleanup_policies(args: argparse.Namespace, topics) -> tuple[dict, str | None]:
    """``{topic: (cleanup.policy, where it came from)}`` and a line about the KRaft
    metadata log read (None if none was). From ``--config``, else the metadata log's topic
    config or cluster default, else Kafka's default."""
    from kafkastore.cluster_metadata import find_metadata_log, read_cluster_metadata
    from kafkastore.config import LogConfig

    settings = parse_settings(args.config)
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


def describe_row(args: argparse.Namespace, tp, segments, on_disk: int, policies,
                 scan, topic_id: str | None) -> dict:
    """One partition's row of ``describe``: ``segments`` are ``(base offset, size,
    file)`` in offset order, ``scan(file)`` is :func:`scan_log` of one (local or not),
    ``topic_id`` its ``partition.metadata``'s (None without the file)."""
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
    return {"topic": tp.topic, "partition": tp.partition, "topic_id": topic_id,
            "segments": len(segments),
            "log_start_offset": start, "log_end_offset": end,
            "log_bytes": log_bytes, "bytes_on_disk": on_disk,
            "max_timestamp": last_ts, "invalid_tail_bytes": invalid,
            "cleanup_policy": policy, "cleanup_policy_source": source}


def print_describe(args: argparse.Namespace, rows: list[dict], note: str | None) -> int:
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_OK
    if not rows:
        print(f"{args.directory}: no partitions")
    else:
        print(f"{'partition':28} {'topic id':22} {'segments':>8} {'start':>12} {'end':>12} "
              f"{'log bytes':>14} {'on disk':>14}  {'max timestamp':>13}  cleanup policy")
        for r in rows:
            ts = "-" if r["max_timestamp"] is None else str(r["max_timestamp"])
            print(f"{r['topic'] + '-' + str(r['partition']):28} {r['topic_id'] or '-':22} "
                  f"{r['segments']:>8} "
                  f"{r['log_start_offset']:>12} {r['log_end_offset']:>12} "
                  f"{r['log_bytes']:>14} {r['bytes_on_disk']:>14}  {ts:>13}  "
                  f"{r['cleanup_policy']} ({r['cleanup_policy_source']})")
    if note:
        print(note)
    return EXIT_OK


def consume_log(args: argparse.Namespace, tp, log, remaining: int | None) -> int | None:
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
                    print_record(tp, r, args)
                    if remaining is not None:
                        remaining -= 1
            offset = max(offset, batch.last_offset + 1)
    return remaining


def _text(b) -> str | None:
    return None if b is None else bytes(b).decode("utf-8", "replace")


def print_record(tp, r, args) -> None:
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

