"""``kafkastore bench``: the benchmark suite's workloads (:mod:`kafkastore.bench.suite`)
at a chosen size, kafkastore beside its peers, and the ratios."""

from __future__ import annotations

import argparse
import json

from kafkastore.cli.shared import EXIT_OK, CommandLine, Progress, UsageError

__all__ = ["register"]


def register(cli: CommandLine) -> None:
    """``kafkastore bench``."""
    from kafkastore.bench.suite import CODECS, WORKLOADS

    p = cli.command("bench", "run the benchmark suite's standard workloads at a chosen "
                    "size, kafkastore beside aiokafka and kafka-python (when installed), "
                    "and print the ratios", "kafkastore bench --records 200000 --workloads "
                    "encode,decode --codecs none,zstd", _cmd_bench)
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


def _cmd_bench(args: argparse.Namespace) -> int:
    from kafkastore.bench.suite import (
        LIMITS,
        count_steps,
        environment,
        format_limits,
        format_table,
        run_suite,
    )

    workloads = [w for w in args.workloads.split(",") if w]
    codecs = [c for c in args.codecs.split(",") if c]
    bar = Progress("bench", count_steps(workloads, codecs))
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
                          "limits": LIMITS, "results": [r.as_dict() for r in results]}))
        return EXIT_OK
    print(f"kafkastore bench: {args.records:,} records, best of {args.reps} reps, "
          "kafkastore and each peer alternating in one process")
    print("; ".join(f"{k} {v}" for k, v in env.items()))
    print("ratio = peer time / kafkastore time: above 1, kafkastore is faster")
    legend = format_limits(results)
    if legend:
        print("of limit = limit time / kafkastore time: how close kafkastore comes to the "
              "same work's physical limit on this machine (1: at it); the limits:")
        print("\n".join(f"  {line}" for line in legend))
    print()
    print(format_table(results, markdown=args.markdown))
    return EXIT_OK

