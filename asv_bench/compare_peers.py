#!/usr/bin/env python
"""kafkastore against aiokafka's Cython codec and kafka-python, side by side, as ratios.

    python asv_bench/compare_peers.py [--records N] [--reps 5] [--codecs none,lz4,zstd]
                                      [--ops encode,decode,columns,scan] [--rounds 1]
                                      [--markdown out.md] [--json out.json]

Run it against the kafkastore you want to measure: installed, or the in-place build with
``PYTHONPATH=<repo>``. It prints a markdown table (and writes it to ``--markdown``).

How it measures (``/work/shared/reference/performance.md``, "How to use these numbers"):

* Every (operation, codec, implementation) cell runs in its own fresh interpreter, and
  the implementations of one (operation, codec) run one after another, so drift in the
  machine's load hits them alike; ``--rounds R`` alternates them ``R`` times and pools
  the reps (for a busy machine). Children get ``OPENBLAS_NUM_THREADS=1`` and friends:
  idle OpenBLAS threads spin on a 2-core VM.
* Each child builds the same workload from the same seed (``benchmarks.make_workload``:
  ``keys`` and ``values`` lists, outside the timing), runs the operation once untimed
  (warm-up, which also calibrates), then ``--reps`` timed reps with ``gc.collect()``
  before each. A rep times ``k`` back-to-back calls, with ``k`` chosen so a rep lasts at
  least ``--min-time`` (only sub-millisecond operations such as scan get ``k > 1``); the
  time reported is per call. Best and median over the reps.
* Ratios are aiokafka_c time / implementation time in the same run: above 1 means faster
  than aiokafka's Cython codec. Absolute numbers are only for orientation.

Operations:

encode
    1000-record batches from ``keys``/``values``; the result is the list of batches (no
    join). ``kafkastore`` gets its natural input, one list of ``(key, value)`` tuples per
    batch, built outside the timing; ``kafkastore_zip`` builds those tuples inside the
    timing (``list(zip(keys[i:j], values[i:j]))`` per batch), so both costs are visible.
    The peers ``append`` record by record into ``DefaultRecordBatchBuilder`` and
    ``build()``. Each at its default codec level (see the codec-levels section).
decode
    Every record to an object, touching offset, timestamp, key and value. All read the
    same blob, encoded once by kafkastore per codec (each child reports the blob's
    CRC-32C; the script checks they agree). kafkastore checks batch CRCs while decoding
    (its default); ``kafkastore_nocrc`` does not. The peers' ``MemoryRecords`` loops run
    both ways too: ``aiokafka_c`` bare, ``aiokafka_c_crc`` calling ``validate_crc()`` on
    each batch first, as aiokafka's consumer does with ``check_crcs=True`` (its default).
    Bars compare like with like: CRC-checking rows with ``aiokafka_c_crc``, the others
    with ``aiokafka_c``.
columns
    ``kafkastore.decode_columns`` (numpy arrays, CRCs checked, or not for ``_nocrc``)
    against aiokafka_c's decode to objects (with and without CRC checks), measured again
    in this cell as the references.
scan
    ``kafkastore.scan_batches(validate=True)`` (headers + CRC of every batch) and, in the
    same child, ``crc32c.crc32c`` over the whole blob: the physical reference. The peers
    walk ``MemoryRecords`` and call ``validate_crc()`` per batch.
"""

from __future__ import annotations

import os

# Before anything can import numpy, here and (through the environment) in every child.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")
for _var in THREAD_VARS:
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the shared workload: asv_bench/benchmarks/__init__.py

import benchmarks as W  # noqa: E402

KEY_SIZE, VALUE_SIZE = 16, 100

#: Implementations per operation, in the order they run within a cell.
OP_IMPLS = {
    "encode": ("kafkastore", "kafkastore_zip", "aiokafka_c", "kafka_python"),
    "decode": ("kafkastore", "kafkastore_nocrc", "aiokafka_c", "aiokafka_c_crc",
               "kafka_python"),
    "columns": ("kafkastore", "kafkastore_nocrc", "aiokafka_c", "aiokafka_c_crc"),
    "scan": ("kafkastore", "aiokafka_c", "kafka_python"),
}
#: The issue's bars for kafkastore rows: (reference, minimum of reference time / kafkastore time).
#: Decoders are compared like for like: kafkastore checking CRCs (its default) against
#: aiokafka checking them (its consumer's default, check_crcs=True), and without CRC checks
#: against aiokafka's bare MemoryRecords loop.
BARS = {
    "encode": ("aiokafka_c", 2.0),
    "decode": ("aiokafka_c_crc", 1.5),
    "columns": ("aiokafka_c_crc", 10.0),
    "scan": ("crc32c", 0.5),
}
BARS_NOCRC = {"decode": ("aiokafka_c", 1.5), "columns": ("aiokafka_c", 10.0)}
#: Row labels where the operation differs from the cell's name.
LABELS = {("columns", "aiokafka_c"): "aiokafka_c (objects)",
          ("columns", "aiokafka_c_crc"): "aiokafka_c_crc (objects)",
          ("scan", "crc32c"): "crc32c (raw)"}
REFERENCE = "aiokafka_c"


# -- child side ----------------------------------------------------------------------------


def _time_reps(fns: dict, reps: int, min_time: float) -> dict:
    """Warm up and calibrate each function, then ``reps`` rounds, interleaved in a round."""
    numbers = {}
    results = {}
    for name, fn in fns.items():
        gc.collect()
        t0 = time.perf_counter()
        results[name] = fn()
        elapsed = time.perf_counter() - t0
        numbers[name] = max(1, math.ceil(min_time / elapsed)) if elapsed > 0 else 1000
    times: dict = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            number = numbers[name]
            gc.collect()
            t0 = time.perf_counter()
            for _ in range(number):
                out = fn()
            elapsed = time.perf_counter() - t0
            del out  # freed outside the timing, as for every implementation
            times[name].append(elapsed / number)
    return {"times": times, "numbers": numbers, "results": results}


def run_child(spec: dict) -> dict:
    op, codec, impl_name = spec["op"], spec["codec"], spec["impl"]
    n, reps, min_time = spec["records"], spec["reps"], spec["min_time"]
    try:
        impl = W.load_impl(impl_name)
    except NotImplementedError as exc:
        return {"skip": str(exc)}
    import crc32c

    out: dict = {"version": impl.version}
    keys, values = W.make_workload(n, KEY_SIZE, VALUE_SIZE, seed=spec["seed"])
    if op == "encode":
        batches = W.batch_tuples(keys, values) if impl_name == "kafkastore" else None

        def encode():
            return impl.encode(keys, values, codec, batches)

        fns = {impl_name: encode}
    else:
        blob = W.encode_blob(keys, values, codec)
        del keys, values
        out["blob_bytes"] = len(blob)
        out["blob_crc32c"] = crc32c.crc32c(blob)
        if op == "decode" or (op == "columns" and not impl_name.startswith("kafkastore")):
            fns = {impl_name: lambda: impl.decode(blob)}
        elif op == "columns":
            fns = {impl_name: lambda: impl.columns(blob)}
        elif op == "scan":
            fns = {impl_name: lambda: impl.scan(blob)}
            if impl_name == "kafkastore":
                fns["crc32c"] = lambda: crc32c.crc32c(blob)
        else:
            raise ValueError(f"unknown op {op!r}")
    measured = _time_reps(fns, reps, min_time)
    # Sanity checks on the warm-up results, outside every timing.
    first = measured["results"][impl_name]
    if op == "encode":
        out["wire_bytes"] = sum(len(b) for b in first)
        if len(first) != math.ceil(n / W.BATCH_SIZE):
            raise AssertionError(f"encode made {len(first)} batches")
    elif op == "decode" or (op == "columns" and not impl_name.startswith("kafkastore")):
        if first != n:
            raise AssertionError(f"decoded {first} records, expected {n}")
    elif op == "columns":
        if len(first) != n:
            raise AssertionError(f"decode_columns gave {len(first)} rows, expected {n}")
    elif op == "scan":
        if first != math.ceil(n / W.BATCH_SIZE):
            raise AssertionError(f"scan found {first} batches")
    out["times"] = measured["times"]
    out["numbers"] = measured["numbers"]
    return out


def environment() -> dict:
    """What the numbers depend on; run in a child so the parent stays light."""
    from importlib import metadata

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "unknown"
    env = {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
    }
    try:
        import kafkastore
        from kafkastore import _kernels

        where = Path(kafkastore.__file__).parent
        installed = version("kafkastore")
        origin = (f"installed {installed}" if installed != "not installed"
                  else "not installed, source tree")
        env["kafkastore"] = f"{_kernels.BACKEND} backend ({origin}, imported from {where})"
        if _kernels.BACKEND == "cython":
            built = datetime.datetime.fromtimestamp(
                os.path.getmtime(_kernels.record_batch.__file__)).astimezone()
            stamp = built.isoformat(timespec="seconds")
            env["kafkastore"] += f", record_batch kernel built {stamp}"
    except Exception as exc:  # report, do not hide
        env["kafkastore"] = f"import failed: {exc!r}"
    try:
        from aiokafka.record import _crecords  # noqa: F401

        c = "Cython codec importable"
    except ImportError as exc:
        c = f"NO Cython codec ({exc})"
    env["aiokafka"] = f"{version('aiokafka')} ({c})"
    for dist in ("kafka-python", "crc32c", "numpy", "lz4", "zstandard", "cramjam"):
        env[dist] = version(dist)
    try:
        git = subprocess.run(["git", "-C", str(HERE.parent), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
        env["git"] = git.stdout.strip() or f"no commit ({git.stderr.strip().splitlines()[-1]})"
    except (OSError, subprocess.SubprocessError, IndexError):
        env["git"] = "unknown"
    return env


# -- parent side ---------------------------------------------------------------------------


def _child_env() -> dict:
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = "1"
    return env


def _run(args: list[str], timeout: float) -> dict:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args],
                          capture_output=True, text=True, env=_child_env(), timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _fmt_s(t: float) -> str:
    return f"{t:.4f}" if t >= 0.01 else f"{t:.2e}"


def _fmt_ratio(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def _merge(into: dict, res: dict) -> None:
    """Add one round's child result to the cell's accumulated result."""
    if "times" not in into:
        into.update(res)
        return
    if "times" not in res:  # a later round failed: keep what was measured, say so
        into["error"] = res.get("error") or res.get("skip")
        return
    for name, times in res["times"].items():
        into["times"][name] = into["times"][name] + times
        into["numbers"][name] = max(into["numbers"][name], res["numbers"][name])


def measure(opts) -> dict:
    cells = [(op, codec) for op in opts.ops for codec in opts.codecs]
    total = sum(len(OP_IMPLS[op]) for op, _ in cells) * opts.rounds
    rows = []
    done = 0
    for op, codec in cells:
        merged = {impl: {} for impl in OP_IMPLS[op]}
        # The implementations of one cell alternate, round after round, so a change in the
        # machine's load during the cell hits them alike.
        for _ in range(opts.rounds):
            for impl in OP_IMPLS[op]:
                done += 1
                spec = {"op": op, "codec": codec, "impl": impl, "records": opts.records,
                        "reps": opts.reps, "min_time": opts.min_time, "seed": opts.seed}
                t0 = time.monotonic()
                try:
                    res = _run(["--child", json.dumps(spec)], timeout=opts.timeout)
                except subprocess.TimeoutExpired:
                    res = {"error": f"timed out after {opts.timeout} s"}
                _merge(merged[impl], res)
                if "times" in res:
                    status = f"best {_fmt_s(min(res['times'][impl]))} s"
                else:
                    status = res.get("skip") or res.get("error")
                print(f"[{done}/{total}] {op:7} {codec:4} {impl:14} {status}"
                      f"  ({time.monotonic() - t0:.0f} s, load {_loadavg()})",
                      file=sys.stderr, flush=True)
        for impl, res in merged.items():
            rows.append(dict(res, op=op, codec=codec, impl=impl))
    return {"rows": rows}


def _expand(rows: list[dict]) -> list[dict]:
    """One entry per measured function (the scan child also yields the crc32c row)."""
    out = []
    for row in rows:
        if "times" not in row:
            out.append(dict(row, name=row["impl"]))
            continue
        for name, times in row["times"].items():
            out.append(dict(row, name=name, best=min(times), median=statistics.median(times),
                            number=row["numbers"][name]))
    return out


def render(opts, env: dict, load_before: str, load_after: str, started: str,
           elapsed: float, rows: list[dict]) -> str:
    n = opts.records
    payload = n * (KEY_SIZE + VALUE_SIZE)
    entries = _expand(rows)
    by_cell: dict = {}
    for e in entries:
        by_cell.setdefault((e["op"], e["codec"]), {})[e["name"]] = e

    lines = [
        "# kafkastore vs peers: RecordBatch v2, side by side",
        "",
        f"* started {started}, took {elapsed:.0f} s; "
        f"load average (1/5/15 min) before: **{load_before}**, after: **{load_after}**",
        f"* command: `{' '.join([Path(sys.executable).name, *sys.argv])}`",
        f"* CPU: {env.get('cpu')} ({env.get('cpus')} CPUs); {env.get('python')}; "
        f"{env.get('platform')}",
        f"* kafkastore: {env.get('kafkastore')}; git: {env.get('git')}",
        f"* aiokafka {env.get('aiokafka')}; kafka-python {env.get('kafka-python')}; "
        f"crc32c {env.get('crc32c')}",
        f"* numpy {env.get('numpy')}, lz4 {env.get('lz4')}, zstandard {env.get('zstandard')}, "
        f"cramjam {env.get('cramjam')}; children run with "
        f"{', '.join(v + '=1' for v in THREAD_VARS[:2])} (and the other BLAS thread caps)",
        f"* workload: {n:,} records, {KEY_SIZE} B random keys, {VALUE_SIZE} B JSON-like values, "
        f"{W.BATCH_SIZE} records a batch, CreateTime (one timestamp per batch), no headers; "
        f"payload (key+value) {payload / 1e6:.1f} MB",
        f"* {opts.reps} timed reps per cell after one warm-up, gc.collect() before each rep, "
        f"each cell in its own interpreter"
        + (f", {opts.rounds} alternating rounds pooled ({opts.reps * opts.rounds} reps)"
           if opts.rounds > 1 else "")
        + f"; sub-ms operations repeat within a rep to last >= {opts.min_time * 1000:.0f} ms "
        f"(time shown per call)",
        "",
        "MB/s counts key+value bytes for encode/decode/columns and wire bytes (the blob) for "
        "scan. **ratio** = aiokafka_c time / this row's time, best (median in parentheses): "
        "> 1 means faster than aiokafka's Cython codec. The **bar** column checks kafkastore "
        "rows against the issue's bars (encode >= 2x, decode >= 1.5x, columns >= 10x "
        "aiokafka_c decode-to-objects, scan >= 0.5x raw crc32c), like for like: rows that "
        "check CRCs against aiokafka_c_crc (aiokafka checking each batch's CRC, as its "
        "consumer does by default), _nocrc rows against aiokafka_c. The issue states the bars "
        "for the uncompressed workload: rows with a codec show the same check in "
        "parentheses, for information.",
        "",
        "| op | codec | impl | best s | median s | M rec/s (best) | MB/s (best) "
        "| ratio vs aiokafka_c | bar |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    failures = []
    for e in entries:
        op, codec, name = e["op"], e["codec"], e["name"]
        label = LABELS.get((op, name), name)
        if "best" not in e:
            reason = e.get("skip") or e.get("error")
            lines.append(f"| {op} | {codec} | {label} | – | – | – | – | – | {reason} |")
            continue
        cell = by_cell[(op, codec)]
        wire = e.get("blob_bytes") if op == "scan" else None
        mbs = (wire if wire else payload) / e["best"] / 1e6
        mrec = "–" if op == "scan" else f"{n / e['best'] / 1e6:.2f}"
        ref = cell.get(REFERENCE)
        if ref and "best" in ref:
            ratio = (f"{_fmt_ratio(ref['best'] / e['best'])} "
                     f"({_fmt_ratio(ref['median'] / e['median'])})")
        else:
            ratio = "–"
        bar = ""
        if name.startswith("kafkastore"):
            ref_name, minimum = (BARS_NOCRC if name.endswith("_nocrc") else BARS)[op]
            bref = cell.get(ref_name)
            if bref and "best" in bref:
                got = bref["best"] / e["best"]
                verdict = "PASS" if got >= minimum else "FAIL"
                text = f">= {minimum:g}x {ref_name}: {got:.2f}x {verdict}"
                if codec == "none":
                    bar = f"**{verdict}** ({text})" if verdict == "FAIL" else text
                    if verdict == "FAIL":
                        failures.append(f"{op} {codec} {name}: {got:.2f}x < {minimum:g}x")
                else:
                    bar = f"({text})"
            else:
                bar = f"no {ref_name} row"
        elif name == "crc32c":
            bar = "reference for scan"
        lines.append(f"| {op} | {codec} | {label} | {_fmt_s(e['best'])} | "
                     f"{_fmt_s(e['median'])} | {mrec} | {mbs:,.0f} | {ratio} | {bar} |")

    # Sizes and inputs.
    lines += ["", "## Sizes and inputs", "",
              "| codec | blob read by decode/columns/scan (kafkastore-encoded) | blob CRC-32C, "
              "all children | encoded by kafkastore | by aiokafka_c | by kafka_python |",
              "|---|---|---|---|---|---|"]
    for codec in opts.codecs:
        blobs = {(r["blob_bytes"], r["blob_crc32c"]) for r in rows
                 if r["codec"] == codec and "blob_bytes" in r}
        if len(blobs) == 1:
            size, crc = next(iter(blobs))
            blob_text, crc_text = f"{size / 1e6:.1f} MB", f"0x{crc:08x} (identical)"
        elif blobs:
            blob_text, crc_text = "DIFFERENT", ", ".join(f"0x{c:08x}" for _, c in blobs)
        else:
            blob_text = crc_text = "–"
        enc = {r["impl"]: r.get("wire_bytes") for r in rows
               if r["op"] == "encode" and r["codec"] == codec}

        def mb(impl, enc=enc):
            v = enc.get(impl)
            return f"{v / 1e6:.1f} MB" if v else "–"

        lines.append(f"| {codec} | {blob_text} | {crc_text} | {mb('kafkastore')} | "
                     f"{mb('aiokafka_c')} | {mb('kafka_python')} |")
    lines += [
        "",
        "## Codec levels (each library's default)",
        "",
        "* kafkastore: lz4 = Kafka level 9, which Kafka's Java client maps to lz4-java's *fast* "
        "compressor (LZ4_compress_default, 64 KiB independent blocks); zstd = level 3.",
        "* aiokafka_c: lz4 = level 9 via cramjam's lz4 frame encoder, i.e. **LZ4 HC level 9** "
        "(much slower, smaller output), so lz4 encode ratios compare compressors as much as "
        "code; zstd = level 3 via cramjam.",
        "* kafka_python: lz4 = lz4.frame level 0 (fast, `block_linked=False`); zstd = "
        "zstandard level 3.",
        "* Decode rows all read the same kafkastore-encoded blob, so decompression work is "
        "identical across implementations.",
        "",
        "## Notes",
        "",
        "* `kafkastore` encode: per-batch `(key, value)` tuple lists are built before the "
        "timing (kafkastore's natural input; the peers have no bulk API and append record by "
        "record). `kafkastore_zip` builds them inside the timing.",
        "* kafkastore decode and columns validate every batch CRC (default `validate=True`); "
        "the peers' decode loops do not.",
        "* Within a row, `best` and `median` are over the timed reps of one child; run-to-run "
        "drift on a shared 2-core VM is ±10-20%, so read the ratios, and rerun near a bar.",
    ]
    if failures:
        lines += ["", "**Uncompressed bars missed:** " + "; ".join(failures)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Side-by-side RecordBatch benchmarks: kafkastore vs aiokafka (Cython) "
                    "and kafka-python, one subprocess per cell.")
    parser.add_argument("--records", type=int, default=W.N_RECORDS_SLOW,
                        help="records in the workload (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=5,
                        help="timed reps per cell, best and median reported (default: 5)")
    parser.add_argument("--codecs", default=",".join(W.CODECS),
                        help="comma-separated codecs (default: %(default)s)")
    parser.add_argument("--ops", default=",".join(OP_IMPLS),
                        help="comma-separated operations (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run each cell's implementations this many times, alternating, "
                             "and pool the reps (default: 1)")
    parser.add_argument("--min-time", type=float, default=0.02,
                        help="minimum seconds per rep; fast calls repeat (default: 0.02)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds allowed per child (default: 1800)")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table here")
    parser.add_argument("--json", metavar="PATH", help="write the raw measurements here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--env", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)

    if opts.child:
        print(json.dumps(run_child(json.loads(opts.child))))
        return 0
    if opts.env:
        print(json.dumps(environment()))
        return 0

    opts.codecs = [c.strip() for c in opts.codecs.split(",") if c.strip()]
    opts.ops = [o.strip() for o in opts.ops.split(",") if o.strip()]
    for codec in opts.codecs:
        if codec not in W.CODEC_IDS:
            parser.error(f"unknown codec {codec!r}")
    for op in opts.ops:
        if op not in OP_IMPLS:
            parser.error(f"unknown op {op!r}; one of {', '.join(OP_IMPLS)}")
    if opts.reps < 1 or opts.records < 1 or opts.rounds < 1:
        parser.error("--reps, --records and --rounds must be positive")

    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    load_before = _loadavg()
    t0 = time.monotonic()
    env = _run(["--env"], timeout=120)
    if "error" in env:
        print(f"compare_peers: cannot read the environment: {env['error']}", file=sys.stderr)
        return 2
    result = measure(opts)
    elapsed = time.monotonic() - t0
    load_after = _loadavg()
    env_after = _run(["--env"], timeout=120)
    text = render(opts, env, load_before, load_after, started, elapsed, result["rows"])
    if env_after.get("kafkastore") != env.get("kafkastore"):
        # Someone rebuilt the kernels during the run: the rows mix two builds.
        text += (f"\n**WARNING: kafkastore changed during the run.** Before: "
                 f"{env.get('kafkastore')}; after: {env_after.get('kafkastore')}.\n")
    print(text)
    if opts.markdown:
        Path(opts.markdown).write_text(text)
    if opts.json:
        Path(opts.json).write_text(json.dumps(
            {"environment": env, "started": started, "load_before": load_before,
             "load_after": load_after, "options": {k: v for k, v in vars(opts).items()
                                                   if k not in ("child", "env")},
             "rows": result["rows"]}, indent=1))
    errors = [r for r in result["rows"] if "error" in r]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
