"""``kafkastore demo``: a tour of the commands on a local log directory.

It runs them one after the other as a user would type them (produce, describe, consume,
dump-log, verify, a simulated torn write and its repair, compact), through the command
line's own ``main`` (:attr:`~kafkastore.cli.shared.CommandLine.main`), and prints each
with its output; then the same files from Python.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile

from kafkastore import __version__, _fileio, records
from kafkastore._kernels import BACKEND
from kafkastore.cli.shared import (
    EXIT_OK,
    EXIT_PROBLEM,
    CommandLine,
    UsageError,
    partition_dirs,
    segment_paths,
)

__all__ = ["register"]


def register(cli: CommandLine) -> None:
    """``kafkastore demo``."""
    demo = cli.sub.add_parser(
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
    demo.set_defaults(func=functools.partial(_cmd_demo, main=cli.main))


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


def _demo_step(main, argv: list[str], expect: int = EXIT_OK, lines: int = 12) -> bool:
    """Run ``kafkastore ARGV`` in this process (``main(argv)``) as a user would type it:
    echo the command, then (at most ``lines`` of) what it printed. False if it exited
    other than ``expect``."""
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


def _cmd_demo(args: argparse.Namespace, main) -> int:
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
        if not _demo_step(main, ["produce", root, "orders", "--input", source, "--format",
                                 "json", "--partitions", "3", "--compression", "zstd",
                                 "--config", "segment.bytes=32768"]):
            return EXIT_PROBLEM
    finally:
        os.unlink(source)
    # the steps below look at the partition holding the most (with few records, some
    # partitions may hold none)
    tp, path = max(partition_dirs(root, "orders"), key=lambda item: sum(
        os.path.getsize(seg) for _, seg in segment_paths(item[1])))
    part = str(tp.partition)
    segments = [seg for _, seg in segment_paths(path)]
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
        if not _demo_step(main, argv, expect, lines):
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
        if not _demo_step(main, argv, expect, lines):
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

