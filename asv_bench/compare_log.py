#!/usr/bin/env python
"""The Log beside its baselines, in one process, as a ratio table against the issue's bars.

Rows (best of ``--reps`` runs each, the two sides alternating so drift hits both):

* append: ``Log.append`` of the workload vs a naive aiokafka-builder + ``file.write`` log
  (bar: kafkastore >= 2x the naive log's records/s, over the append calls); the same from
  opening a fresh log to closing it, the final fsync of each included, for information;
* append_batches: ``Log.append_batches`` of ready batches vs ``file.write`` of the same
  bytes (bar: >= 60% of its throughput);
* read: a random single-offset ``Log.read(...).to_bytes()`` in a 10-segment log vs one
  ``os.pread`` of the same size at a random place in a random segment of that log
  (bar: <= 3x its cost);
* recovery: ``LogSegment.recover`` of a ``--recovery-mib`` log vs ``crc32c`` over the same
  bytes (bar: >= 40% of its throughput);
* memory: resident-set growth while appending ``--memory-gib`` (bar: < 100 MiB for 4 GiB);
* manager: opening a cleanly closed store of 100 partitions, 1,000 segments, with
  ``LogManager`` vs ``os.scandir`` of the same directories (bar: <= 20x), the same open
  followed by a clean close (for information), and a ``cleanup_logs`` retention pass with
  nothing to delete (bar: < 1 ms per partition).
* cleaner: ``kafkastore.cleaner.clean`` of a compacted log of ``--cleaner-records``
  records (16-byte keys drawn from a tenth as many distinct keys, 100-byte values, 1,000
  a batch), uncompressed and lz4, vs the naive aiokafka compactor of
  ``benchmarks/cleaner.py`` (decode all, keep the latest in a dict, re-encode), each rep
  on a fresh copy of the log (bar: >= 5x faster; the naive side pauses the cyclic GC);
  the resident-set growth of a fresh process during the clean (bar: <= the 128 MiB
  dedupe buffer + 8 MiB); and, for information, the phases of both sides, the naive side
  with an fsync like the cleaner's, with the GC on, and its memory.

Usage: ``python asv_bench/compare_log.py [--records N] [--reps R] [--skip append,...]
[--cleaner-records N] [--markdown out.md]``; ``--skip`` takes the row names append,
append_batches, read, recovery, memory, manager and cleaner.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks import make_workload  # noqa: E402
from benchmarks.log import (  # noqa: E402
    append_batches_kafkastore,
    append_file_write,
    append_kafkastore,
    append_naive_aiokafka,
    build_segmented_log,
    chunks,
    log_config,
    ready_batches,
)
from benchmarks.manager import (  # noqa: E402
    PARTITIONS,
    SEGMENTS_PER_PARTITION,
    build_store,
    open_close,
    open_manager,
    retention_pass,
    scandir_store,
)


def best_of(reps, fn):
    return best_of_parts(reps, fn)[0]


def best_of_parts(reps, fn):
    """Best whole time of ``fn()`` and, when it returns seconds (the part it timed
    itself, such as an append loop without the open and close around it), the best of
    those too (else None)."""
    best = part = float("inf")
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        inner = fn()
        best = min(best, time.perf_counter() - t0)
        part = min(part, inner if isinstance(inner, float) else float("inf"))
    return best, (None if part == float("inf") else part)


def in_tmp(fn, *args):
    def run():
        d = tempfile.mkdtemp(prefix="ks-cmp-")
        try:
            return fn(d, *args)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return run


def pair(reps, a, b):
    """Best times of ``a`` and ``b``, alternating one rep each."""
    (ta, _), (tb, _) = pair_parts(reps, a, b)
    return ta, tb


def pair_parts(reps, a, b):
    """:func:`best_of_parts` of ``a`` and ``b``, alternating one rep each."""
    inf = float("inf")
    ta = tb = pa = pb = inf
    for _ in range(reps):
        whole, part = best_of_parts(1, a)
        ta, pa = min(ta, whole), min(pa, inf if part is None else part)
        whole, part = best_of_parts(1, b)
        tb, pb = min(tb, whole), min(pb, inf if part is None else part)
    return (ta, None if pa == inf else pa), (tb, None if pb == inf else pb)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--recovery-mib", type=int, default=1024)
    p.add_argument("--memory-gib", type=float, default=4.0)
    p.add_argument("--cleaner-records", type=int, default=2_000_000)
    p.add_argument("--skip", default="", help="comma-separated rows to skip")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    from kafkastore._kernels import BACKEND

    keys, values = make_workload(args.records)
    rows = []
    n = args.records

    def row(op, detail, ours, base, ratio, bar, ok):
        verdict = "-" if ok is None else "PASS" if ok else "**FAIL**"   # None: information
        rows.append((op, detail, ours, base, ratio, bar, verdict))
        print(rows[-1], flush=True)

    if "append" not in skip:
        for per in (100, 1000):
            batches = chunks(keys, values, per)
            (ours, ours_loop), (base, base_loop) = pair_parts(
                args.reps, in_tmp(append_kafkastore, batches),
                in_tmp(append_naive_aiokafka, batches))
            r = base_loop / ours_loop
            row("append", f"{per} records/append", f"{n / ours_loop / 1e6:.2f} M rec/s",
                f"{n / base_loop / 1e6:.2f} M rec/s", f"{r:.2f}x", ">= 2x", r >= 2)
            r = base / ours
            row("append, open to close", f"{per} records/append, final fsync included",
                f"{n / ours / 1e6:.2f} M rec/s", f"{n / base / 1e6:.2f} M rec/s",
                f"{r:.2f}x", "-", None)
    if "append_batches" not in skip:
        for per in (100, 1000):
            ready = ready_batches(keys, values, per)
            total = sum(map(len, ready))
            ours, base = pair(args.reps, in_tmp(append_batches_kafkastore, ready),
                              in_tmp(append_file_write, ready))
            r = base / ours
            row("append_batches", f"{per} records/batch", f"{total / ours / 1e6:.0f} MB/s",
                f"{total / base / 1e6:.0f} MB/s", f"{r:.2f}", ">= 0.60", r >= 0.6)
    if "read" not in skip:
        from kafkastore.log import Log

        d = tempfile.mkdtemp(prefix="ks-cmp-")
        try:
            config = build_segmented_log(d, keys, values)
            log = Log.open(d, config)
            size = log.read(0, 1).size
            end = log.log_end_offset
            rng = random.Random(1)
            k = 20000
            offs = [rng.randrange(end) for _ in range(k)]
            # the baseline reads the same amount from a random place in a random segment
            # of the same log, so both sides touch the same spread of the page cache
            files = [(s.log.fileno(), s.size - size) for s in log.segments if s.size > size]
            where = [(fd, rng.randrange(limit)) for fd, limit in
                     (rng.choice(files) for _ in range(k))]

            def ours():
                for o in offs:
                    log.read(o, size, False).to_bytes()

            def base():
                for fd, q in where:
                    os.pread(fd, size, q)

            t_ours, t_base = pair(args.reps, ours, base)
            r = t_ours / t_base
            row("read", f"random offset, {len(log.segments)} segments, {size} B",
                f"{t_ours / k * 1e6:.2f} us", f"{t_base / k * 1e6:.2f} us", f"{r:.2f}x cost",
                "<= 3x", r <= 3)
            log.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    if "recovery" not in skip:
        import crc32c

        from kafkastore.log import Log

        d = tempfile.mkdtemp(prefix="ks-cmp-")
        try:
            ready = ready_batches(keys, values, 1000)
            blob = b"".join(ready)
            target = args.recovery_mib << 20
            config = log_config(**{"segment.bytes": (1 << 31) - 1})
            log = Log.open(d, config)
            written = 0
            while written < target:
                for data in ready:
                    log.append_batches(data)
                written += len(blob)
            log.close()
            log = Log.open(d, config)
            seg = log.segments[0]
            data = seg.log.read(0, seg.size)
            t_ours, t_base = pair(max(2, args.reps // 2), seg.recover,
                                  lambda: crc32c.crc32c(data))
            r = t_base / t_ours
            row("recovery", f"{seg.size / 2**20:.0f} MiB segment",
                f"{seg.size / t_ours / 1e9:.2f} GB/s", f"{seg.size / t_base / 1e9:.2f} GB/s",
                f"{r:.2f}", ">= 0.40", r >= 0.4)
            del data
            log.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    if "memory" not in skip:
        from kafkastore.log import Log

        d = tempfile.mkdtemp(prefix="ks-cmp-")
        try:
            ready = ready_batches(keys[:10000], values[:10000], 1000)
            chunk = sum(map(len, ready))
            target = int(args.memory_gib * (1 << 30))
            log = Log.open(d, log_config())
            gc.collect()
            before = rss_bytes()
            peak = before
            written = 0
            t0 = time.perf_counter()
            while written < target:
                for data in ready:
                    log.append_batches(data)
                written += chunk
                peak = max(peak, rss_bytes())
            elapsed = time.perf_counter() - t0
            log.close()
            grown = (peak - before) / 2**20
            row("memory", f"append {written / 2**30:.1f} GiB ({written / elapsed / 1e9:.2f} GB/s)",
                f"+{grown:.1f} MiB RSS", "-", "-", "< 100 MiB", grown < 100)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    if "manager" not in skip:
        d = tempfile.mkdtemp(prefix="ks-cmp-")
        try:
            build_store(d)
            opened = []

            def ours():
                opened.append(open_manager(d))

            def base():
                scandir_store(d)

            t_open = t_scan = float("inf")
            for _ in range(args.reps):
                t_open = min(t_open, best_of(1, ours))
                opened.pop().close()
                t_scan = min(t_scan, best_of(1, base))
            r = t_open / t_scan
            segs = PARTITIONS * SEGMENTS_PER_PARTITION
            row("manager", f"open, {PARTITIONS} partitions, {segs} segments",
                f"{t_open * 1e3:.1f} ms", f"{t_scan * 1e3:.2f} ms scandir", f"{r:.1f}x cost",
                "open <= 20x scandir", r <= 20)
            t_both = best_of(args.reps, lambda: open_close(d))
            row("manager", "open + clean close (checkpoints, marker, fsyncs)",
                f"{t_both * 1e3:.1f} ms", f"{t_scan * 1e3:.2f} ms scandir",
                f"{t_both / t_scan:.1f}x cost", "-", None)
            manager = open_manager(d)
            try:
                if os.path.isdir("/proc/self/fd"):
                    # descriptors held per segment once every index is in use (Kafka: one,
                    # the .log; the indexes stay mapped with their files closed)
                    manager.close()
                    closed = len(os.listdir("/proc/self/fd"))
                    manager = open_manager(d)
                    for log in manager.logs().values():
                        for seg in log.segments:
                            seg.offset_index.lookup(seg.base_offset)
                            seg.time_index.lookup(0)
                    held = len(os.listdir("/proc/self/fd")) - closed
                    per_seg = held / segs
                    row("manager", f"descriptors, {segs} segments, indexes mapped",
                        f"{per_seg:.2f} / segment", "1 / segment (Kafka)",
                        f"{held} held", "<= 1 + 1 per partition",
                        held <= segs + PARTITIONS + 4)
                retention_pass(manager)   # loads the time indexes the pass reads
                passes = 50
                t_pass = best_of(args.reps, lambda: [retention_pass(manager)
                                                     for _ in range(passes)]) / passes
                per = t_pass / PARTITIONS
                row("manager", "retention pass, nothing to delete", f"{per * 1e6:.1f} us "
                    "/ partition", "-", "-", "retention pass < 1 ms per partition", per < 1e-3)
            finally:
                manager.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)

    if "cleaner" not in skip:
        from benchmarks.cleaner import (
            CODECS as CLEANER_CODECS,
            DEDUPE_BUFFER_SIZE,
            NAIVE_OUTPUT,
            build_logs,
            clean_kafkastore,
            copy_log,
            log_files,
            measure_memory,
            naive_compact,
            read_latest,
        )

        import itertools

        cn = args.cleaner_records
        ckeys = max(cn // 10, 1)
        d = tempfile.mkdtemp(prefix="ks-cmp-")
        try:
            t0 = time.perf_counter()
            sources = build_logs(os.path.join(d, "src"), cn, ckeys)
            print(f"cleaner: built {cn:,}-record logs in {time.perf_counter() - t0:.1f} s",
                  flush=True)
            copies = itertools.count()

            def fresh(codec):
                # untimed: a fresh copy of the source log, fsynced
                return copy_log(sources[codec], os.path.join(d, f"copy-{next(copies)}"))

            for codec in CLEANER_CODECS:
                load = os.getloadavg()
                inf = float("inf")
                t_ks = t_ks_all = t_nv = t_nv_sync = inf
                ks_best = nv_best = None
                checked = False
                for rep in range(args.reps):
                    # the two sides alternate rep by rep, as pair() does; the naive side
                    # with an fsync (information) is a third step of each rep
                    a = fresh(codec)
                    gc.collect()
                    t0 = time.perf_counter()
                    inner, _, stats = clean_kafkastore(a, codec)
                    t_ks_all = min(t_ks_all, time.perf_counter() - t0)
                    if inner < t_ks:
                        t_ks, ks_best = inner, stats
                    b = fresh(codec)
                    gc.collect()
                    t0 = time.perf_counter()
                    result = naive_compact(b, os.path.join(b, NAIVE_OUTPUT), codec)
                    t = time.perf_counter() - t0
                    if t < t_nv:
                        t_nv, nv_best = t, result
                    if not checked:   # untimed: both left the same latest value per key
                        ours_latest = read_latest(log_files(a))
                        base_latest = read_latest([os.path.join(b, NAIVE_OUTPUT)])
                        if ours_latest != base_latest:
                            raise AssertionError(f"cleaner, {codec}: kafkastore and the naive "
                                                 "compactor disagree on the latest values")
                        survivors = len(ours_latest)
                        del ours_latest, base_latest
                        checked = True
                    shutil.rmtree(a, ignore_errors=True)
                    shutil.rmtree(b, ignore_errors=True)
                    c = fresh(codec)
                    gc.collect()
                    t0 = time.perf_counter()
                    naive_compact(c, os.path.join(c, NAIVE_OUTPUT), codec, fsync=True)
                    t_nv_sync = min(t_nv_sync, time.perf_counter() - t0)
                    shutil.rmtree(c, ignore_errors=True)
                    if rep == 0:   # information, one run: the naive side with the GC on
                        c = fresh(codec)
                        gc.collect()
                        t0 = time.perf_counter()
                        naive_compact(c, os.path.join(c, NAIVE_OUTPUT), codec, pause_gc=False)
                        t_nv_gc = time.perf_counter() - t0
                        shutil.rmtree(c, ignore_errors=True)
                what = (f"{codec}, {cn:,} records, {ckeys:,} keys, {survivors:,} kept; "
                        f"load {load[0]:.2f}")
                r = t_nv / t_ks
                row("cleaner", what, f"{t_ks:.3f} s ({cn / t_ks / 1e6:.2f} M rec/s)",
                    f"{t_nv:.3f} s naive ({cn / t_nv / 1e6:.2f} M rec/s)", f"{r:.2f}x",
                    ">= 5x", r >= 5)
                row("cleaner", f"{codec}, Log.open + clean + close vs naive + fsync",
                    f"{t_ks_all:.3f} s", f"{t_nv_sync:.3f} s naive + fsync",
                    f"{t_nv_sync / t_ks_all:.2f}x", "-", None)
                row("cleaner", f"{codec}, naive with the cyclic GC on (one run)",
                    f"{t_ks:.3f} s", f"{t_nv_gc:.3f} s naive, GC on",
                    f"{t_nv_gc / t_ks:.2f}x", "-", None)
                st = ks_best
                map_s = st.map_complete_time - st.start_time
                row("cleaner", f"{codec}, phases (best rep; {st.rounds} round(s))",
                    f"map {map_s:.3f} s + recopy {st.end_time - st.map_complete_time:.3f} s; "
                    f"read {st.bytes_read / 2**20:.0f} MiB, wrote "
                    f"{st.bytes_written / 2**20:.1f} MiB",
                    f"decode+dict {nv_best.decode_s:.3f} s + sort {nv_best.sort_s:.3f} s + "
                    f"encode+write {nv_best.encode_s:.3f} s; wrote "
                    f"{nv_best.bytes_written / 2**20:.1f} MiB", "-", "-", None)
            budget = DEDUPE_BUFFER_SIZE + (8 << 20)
            for codec in CLEANER_CODECS:
                c = fresh(codec)
                m = measure_memory(c, codec, "kafkastore")
                shutil.rmtree(c, ignore_errors=True)
                grown = m["grown_kib"] / 1024
                row("cleaner memory", f"{codec}, peak RSS of a fresh process during the clean"
                    f" (anon +{m['grown_anon_kib'] / 1024:.1f} MiB, file-backed "
                    f"+{m['grown_file_kib'] / 1024:.1f} MiB, sampled)",
                    f"+{grown:.1f} MiB", "-", "-",
                    f"<= {DEDUPE_BUFFER_SIZE >> 20} MiB dedupe buffer + 8 MiB",
                    grown * (1 << 20) <= budget)
                c = fresh(codec)
                m = measure_memory(c, codec, "naive_aiokafka")
                shutil.rmtree(c, ignore_errors=True)
                row("cleaner memory", f"{codec}, the naive compactor (information)", "-",
                    f"+{m['grown_kib'] / 1024:.1f} MiB", "-", "-", None)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    out = [
        "# kafkastore Log beside its baselines",
        "",
        f"* {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; backend {BACKEND}; CPython "
        f"{platform.python_version()}; {platform.platform()}; load {os.getloadavg()}",
        f"* workload: {n:,} records, 16 B keys, 100 B JSON-like values; best of {args.reps}",
        "",
        "| op | detail | kafkastore | baseline | ratio | bar | |",
        "|---|---|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(out) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
