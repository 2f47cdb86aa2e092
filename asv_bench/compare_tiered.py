#!/usr/bin/env python
"""Reading tiered-storage copies, in one process, as a ratio table against the issue's bars.

The workload and the copies are :mod:`kafkastore.bench.tiered` (its docstring says what
each row does): ``--records`` records (16-byte keys, 100-byte values, 100 a batch) in a
partition of ``--segments`` segments written with ``Log``, uploaded by
``upload_partition`` into an Aiven plain copy, a LocalTieredStorage copy, zstd copies with
4 MiB (the plugin's default) and 64 KiB chunks and an AES-GCM copy.

Timed rows (best of ``--reps`` rounds, the two sides alternating in each round so drift
in the machine's load hits both; ratio = peer time / tiered time):

* plain copies vs the same segments as a local log directory (``ReadOnlyLog``): whole
  ``records()``, whole ``columns()``, random-offset ``read()`` of one batch. Bar: ratio
  >= 0.90.
* zstd copies: ``columns()`` and a raw read of the segments' original bytes vs
  ``zstandard`` alone decompressing the same chunks (held in memory), GB/s of original
  bytes. The issue asks for the read to be decompression-bound: the ratio is the share of
  the time that is decompression (information).
* AES-GCM copy: the same vs ``cryptography``'s AESGCM alone (information).

Fetch rows: ``--queries`` random queries of each kind (``records(a, a+n)`` with ``n`` =
``--records-per-query``, ``offset_for_timestamp``, ``read`` of one batch) on each zstd
copy, each query cold (its segment readers new, the copy's chunk cache empty).
``fetched`` is the object bytes read (the store's own counters) by the queries;
``needed`` the transformed bytes of the chunks holding the batches of the answers (by
the chunk index); bar: fetched / needed <= 1.05.
``asked`` is the same for the byte ranges the log view asks its segment readers for
(the index-guided windows: a batch or two of slack around the answer): fetched / asked
is the chunk reader's own overhead. ``one-time`` is what opening the copy read once
(manifests, every segment's ``.indexes``, the last segment's tail), outside the queries.
With ``--s3`` (the default when moto's server is installed) the same queries run on the
same objects in moto's S3 server on 127.0.0.1 (information).

Usage: ``python asv_bench/compare_tiered.py [--records N] [--reps R] [--queries Q]
[--no-s3] [--markdown out.md]``. The defaults run in about 40 s on 2 CPUs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from kafkastore.bench import tiered
from kafkastore.bench.suite import _timed, compare, environment
from kafkastore.bench.workload import make_workload


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _rate(count: int, unit: str, seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if unit == "bytes":
        return f"{count / seconds / 1e9:.2f} GB/s"
    if unit == "records":
        return f"{count / seconds / 1e6:.2f} M rec/s"
    return f"{seconds / count * 1e6:.1f} us/{unit[:-1]}"


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def time_rows(fx, reps: int, progress=print) -> list:
    out = []
    for case in tiered.timed_cases(fx, _timed):
        progress(f"  {case.variant}")
        out.extend(compare("tiered", case.variant, case.ours(), case.peers, case.count,
                           case.unit, reps))
    return out


def time_table(rows) -> list[str]:
    lines = ["| case | tiered | rate | peer | peer time | peer rate | ratio | bar |",
             "|---|---|---|---|---|---|---|---|"]
    for c in rows:
        if c.skipped is not None:
            lines.append(f"| {c.variant} | {_seconds(c.kafkastore_s)} | "
                         f"{_rate(c.count, c.unit, c.kafkastore_s)} | {c.peer} | - | - | "
                         f"skipped: {c.skipped} | |")
            continue
        if c.peer == tiered.LOCAL_PEER:
            bar = "≥ 0.90: " + ("pass" if c.ratio >= 0.9 else "**FAIL**")
        elif c.peer.startswith("local columns()"):
            bar = "information: 1.00x would be exactly decoding + the transform"
        else:
            bar = f"information: {c.peer.split()[0]} alone is {c.ratio:.0%} of the time"
        lines.append(f"| {c.variant} | {_seconds(c.kafkastore_s)} | "
                     f"{_rate(c.count, c.unit, c.kafkastore_s)} | {c.peer} | "
                     f"{_seconds(c.peer_s)} | {_rate(c.count, c.unit, c.peer_s)} | "
                     f"{c.ratio:.2f}x | {bar} |")
    return lines


def fetch_table(rows) -> list[str]:
    lines = ["| copy | store | query | queries | fetched | GETs | needed | fetched / needed "
             "| asked | fetched / asked | one-time | bar |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.where == "local":
            bar = "≤ 1.05: " + ("pass" if r.ratio <= 1.05 else "**FAIL**")
        else:
            bar = "information"
        lines.append(f"| {r.copy} | {r.where} | {r.query} | {r.queries} | {_mib(r.fetched)} "
                     f"| {r.gets} | {_mib(r.needed)} | {r.ratio:.3f}x | {_mib(r.asked)} | "
                     f"{r.ratio_asked:.3f}x | {_mib(r.one_time)} | {bar} |")
    return lines


class _S3:
    """moto's S3 server on 127.0.0.1 (as tests/_s3.py starts it), a bucket per copy."""

    def __init__(self) -> None:
        import logging

        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)   # one line per request

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                   aws_access_key_id="testing",
                                   aws_secret_access_key="testing")
        self.options = {"endpoint_override": self.endpoint, "access_key": "testing",
                        "secret_key": "testing", "region": "us-east-1", "scheme": "http"}

    def upload_dir(self, local_dir: str, bucket: str) -> str:
        self.client.create_bucket(Bucket=bucket)
        for root, _dirs, files in os.walk(local_dir):
            for name in files:
                path = os.path.join(root, name)
                key = os.path.relpath(path, local_dir).replace(os.sep, "/")
                with open(path, "rb") as f:
                    self.client.put_object(Bucket=bucket, Key=key, Body=f.read())
        return f"s3://{bucket}"

    def stop(self) -> None:
        self.server.stop()


def _s3_available() -> bool:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=1_000_000,
                   help="records in the partition (default 1000000, about 126 MB)")
    p.add_argument("--segments", type=int, default=tiered.SEGMENTS)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--queries", type=int, default=50, help="queries of each kind")
    p.add_argument("--records-per-query", type=int, default=1000)
    s3 = p.add_mutually_exclusive_group()
    s3.add_argument("--s3", dest="s3", action="store_true", default=None)
    s3.add_argument("--no-s3", dest="s3", action="store_false")
    p.add_argument("--tmp-dir")
    p.add_argument("--markdown", help="also write the report to this file")
    args = p.parse_args(argv)
    use_s3 = _s3_available() if args.s3 is None else args.s3

    load_before = os.getloadavg()
    t_start = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="ks-cmp-tiered-", dir=args.tmp_dir)
    server = None
    try:
        print(f"building {args.records:,} records and the copies ...", file=sys.stderr)
        keys, values = make_workload(args.records)
        fx = tiered.build_fixture(tmp, keys, values, segments=args.segments)
        del keys, values
        try:
            print("timing:", file=sys.stderr)
            rows = time_rows(fx, args.reps,
                             progress=lambda s: print(s, file=sys.stderr))
            print("bytes fetched:", file=sys.stderr)
            fetches = []
            zstd = [c.name for c in (tiered.ZSTD, tiered.ZSTD_SMALL) if c.name in fx.copies]
            for name in zstd:
                fetches += tiered.measure_fetches(
                    fx, name, queries=args.queries,
                    records_per_query=args.records_per_query)
            if use_s3:
                server = _S3()
                for i, name in enumerate(zstd):
                    uri = server.upload_dir(fx.copies[name], f"tiered-{os.getpid()}-{i}")
                    fetches += tiered.measure_fetches(
                        fx, name, queries=args.queries,
                        records_per_query=args.records_per_query, uri=uri,
                        storage_options=server.options, where="S3 (moto)")
        finally:
            fx.close()
        env = environment()
        load_after = os.getloadavg()
        out = [
            "# Tiered-storage reads: kafkastore's tiered reader beside its peers",
            "",
            f"{args.records:,} records, {fx.segments} segments, "
            f"{fx.original_bytes / 1e6:.1f} MB of original segment bytes; best of "
            f"{args.reps} alternating rounds; {args.queries} queries of each kind.",
            "",
            "; ".join(f"{k} {v}" for k, v in env.items() if k != "load average"),
            f"load average before {' '.join(f'{x:.2f}' for x in load_before)}, after "
            f"{' '.join(f'{x:.2f}' for x in load_after)}; "
            f"{time.perf_counter() - t_start:.0f} s in all",
        ]
        if fx.missing:
            out += ["", "Copies not made: " + "; ".join(
                f"{k}: {v}" for k, v in fx.missing.items())]
        out += ["", "## Time (ratio = peer time / tiered time)", "", *time_table(rows),
                "", "## Bytes fetched per query", "", *fetch_table(fetches)]
        text = "\n".join(out)
        print(text)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text + "\n")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
