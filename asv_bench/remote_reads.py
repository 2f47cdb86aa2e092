#!/usr/bin/env python
"""What a Spark read of a log directory on S3 fetches, as the store sees it.

A log directory (``--records`` records of 100-byte values, ``--partitions`` partitions,
``--segment-mb`` MiB segments, 1 MiB batches' worth of ``--batch`` records) is uploaded
to moto's S3 server on 127.0.0.1; Spark (``local[2]``, this interpreter) reads it through
the counting proxy of ``tests/_faultproxy.py`` (no faults), which records every request
and the body bytes it served. For each query the table gives:

* segment bytes fetched (ranged GETs of ``.log`` objects) beside the bytes of the
  batches the query needs (every batch holding an offset of its range, from the local
  files), and their ratio (the goal: at most 1.05);
* index bytes fetched (``.index`` / ``.timeindex``), listings, HEADs, GETs, tasks and
  requests per task;
* how many segments hold the range, and how many others were touched: the planner
  reads the tail of each partition's last segment (from its last index entry) to find
  the log end offset, whatever the range.

Queries: the whole topic; an offset range in the middle of one partition's largest
segment; ``startingTimestamp`` in the middle (a timestamp-filtered read).

Usage: ``python asv_bench/remote_reads.py [--records N] [--markdown out.md]``; needs the
``spark`` extra, Java, and ``moto[server]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

T0 = 1_700_000_000_000


def make_logs(root: str, n: int, partitions: int, segment_bytes: int, batch: int) -> None:
    from kafkastore.manager import LogManager

    with LogManager(root, {"segment.bytes": segment_bytes}, background=False) as m:
        for p in range(partitions):
            log = m.get_or_create("bench", p)
            for start in range(0, n // partitions, batch):
                log.append([(b"key-%08d" % (start + i), b"%-100d" % (start + i),
                             T0 + start + i) for i in range(batch)])


def needed(root: str, tp_ranges: dict) -> tuple[int, set]:
    """Bytes of the batches holding the ranges, and the segment files they are in."""
    from kafkastore.log_view import ReadOnlyLog

    total, segs = 0, set()
    for (topic, p), (lo, hi) in tp_ranges.items():
        with ReadOnlyLog.open(os.path.join(root, f"{topic}-{p}")) as view:
            for seg in view.segments:
                for h in view.segment_records(seg).walk(0, seg.size):
                    if h.last_offset >= lo and h.base_offset < hi:
                        total += h.size
                        segs.add(f"{topic}-{p}/{os.path.basename(seg.path)}")
    return total, segs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-mb", type=int, default=16)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)

    from _faultproxy import start_fault_proxy

    sys.path.insert(0, HERE)
    from compare_spark import emit, session, start_s3

    root = tempfile.mkdtemp(prefix="kafkastore-remote-reads-")
    s3 = None
    stop_proxy = None
    try:
        logs = os.path.join(root, "logs")
        make_logs(logs, args.records, args.partitions, args.segment_mb << 20, args.batch)
        s3 = start_s3(logs)
        if s3 is None:
            raise SystemExit("moto's server mode is not installed (pip install 'moto[server]')")
        uri, options, _ = s3
        proxy, stop_proxy = start_fault_proxy(options["storage.endpoint_override"])
        options = {**options, "storage.endpoint_override": proxy.endpoint}
        spark = session()
        per = args.records // args.partitions
        from kafkastore.log_view import ReadOnlyLog

        with ReadOnlyLog.open(os.path.join(logs, "bench-0")) as v0:
            big = max(v0.segments, key=lambda s: s.size)
            nxt = [s.base_offset for s in v0.segments if s.base_offset > big.base_offset]
            seg_end = nxt[0] if nxt else v0.log_end_offset
        mid_lo = big.base_offset + (seg_end - big.base_offset) // 3
        mid_hi = mid_lo + 5000
        ts = T0 + per // 2
        queries = [
            ("whole topic", {"subscribe": "bench"},
             {("bench", p): (0, per) for p in range(args.partitions)}),
            (f"offsets {mid_lo}-{mid_hi} of partition 0 (inside one segment)",
             {"assign": '{"bench":[0]}', "startingOffsets": f'{{"bench":{{"0":{mid_lo}}}}}',
              "endingOffsets": f'{{"bench":{{"0":{mid_hi}}}}}'},
             {("bench", 0): (mid_lo, mid_hi)}),
            ("startingTimestamp at the middle", {"subscribe": "bench",
                                                 "startingTimestamp": str(ts)},
             {("bench", p): (ts - T0, per) for p in range(args.partitions)}),
        ]
        rows = []
        for name, opts, ranges in queries:
            df = spark.read.format("kafkastore").options(**opts, **options).load(uri)
            proxy.clear()             # the query: its plan (listing, indexes) and its tasks
            count = df.count()
            seen = list(proxy.seen)
            tasks = df.rdd.getNumPartitions()
            assert count == sum(hi - lo for lo, hi in ranges.values()), (name, count)
            log_gets = [s for s in seen if s.method == "GET" and s.path.endswith(".log")]
            idx_gets = [s for s in seen if s.method == "GET" and s.path.endswith(
                (".index", ".timeindex"))]
            lists = [s for s in seen if s.method == "GET" and "list-type" in s.path]
            heads = [s for s in seen if s.method == "HEAD"]
            fetched = sum(s.sent for s in log_gets)
            need, need_segs = needed(logs, ranges)
            got_segs = {"/".join(s.path.split("/")[-2:]) for s in log_gets}
            kinds = Counter(s.method for s in seen)
            rows.append((name, tasks, need, fetched, fetched / need if need else 0,
                         sum(s.sent for s in idx_gets), len(lists), len(heads),
                         kinds["GET"], len(seen) / max(tasks, 1), len(need_segs),
                         len(got_segs - need_segs)))
            print(name, rows[-1], flush=True)
        spark.stop()
    finally:
        if stop_proxy is not None:
            stop_proxy()
        if s3 is not None:
            s3[2]()
        shutil.rmtree(root, ignore_errors=True)
    lines = [f"{args.records:,} records (100-byte values), {args.partitions} partitions, "
             f"{args.segment_mb} MiB segments; Spark local[2] reading s3:// (moto) "
             "through a counting proxy", "",
             "| query | tasks | segment bytes needed | fetched | fetched / needed | index "
             "bytes | listings | HEADs | GETs | requests per task | segments holding the "
             "range | other segments touched |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]:,} | **{r[4]:.3f}x** | {r[5]:,} | "
                     f"{r[6]} | {r[7]} | {r[8]} | {r[9]:.1f} | {r[10]} | {r[11]} |")
    emit(lines, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
