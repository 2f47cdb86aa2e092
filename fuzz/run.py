"""Run kafkastore's atheris fuzz targets for a chosen time and report what they did.

    python fuzz/run.py --seconds 30 [--targets batch_v2,index] [--backends cython,python]
                       [--jobs 2] [--build DIR] [--corpus DIR] [--out DIR]
                       [--figures out.json]

For every (backend, target) pair it starts ``fuzz/atheris_main.py`` under libFuzzer with
``PYTHONMALLOC=malloc`` (pymalloc would hide small overruns from ASan),
``LD_PRELOAD`` of atheris's ``asan_with_fuzzer.so`` (ASan + UBSan runtime with libFuzzer
hooks), ``ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1`` (plus a 32 MiB
quarantine, which keeps the RSS of Python + ASan under the limit), ``-rss_limit_mb=512``,
``-max_len=65536`` and ``-timeout`` (default 10 s), ``--jobs`` pairs at a time.

* ``cython`` runs the kernels of the instrumented build (``--build``, made by
  ``fuzz/build.sh``; built into a temporary directory when not given);
* ``python`` runs the same targets with ``KAFKASTORE_NO_EXTENSIONS=1`` (the pure twins read
  untrusted bytes too).

The corpus of each pair starts from the seeds of ``tests/_fuzz_targets.py`` (kafkastore's
encoders and the shared reference vectors) plus every file under
``tests/data/fuzz/<target>/`` (past crashes and committed seeds) and ``fuzz/corpus/<target>.zip``
(the committed, minimized corpus of the long runs); with ``--corpus`` it is kept there
between runs (the long tier), otherwise in a temporary directory.
``--merge-into fuzz/corpus`` fuzzes nothing: it minimizes what ``--corpus`` gathered,
together with the committed corpus, back into ``fuzz/corpus/<target>.zip``. Crash,
timeout and out-of-memory inputs are saved under ``--out`` (default ``fuzz/out/``)
as ``<backend>/<target>/crash-<sha1>`` with the log beside them.

Prints a table of executions per pair and exits 1 if any pair found something (or failed
to run), 0 otherwise. For each finding it also prints the error (sanitizer report or
Python traceback, trimmed) and the input in base64, so a CI log alone is enough to
reproduce it. ``--figures`` writes the same numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
REPO = FUZZ.parent
TESTS = REPO / "tests"
SAVED_CORPUS = FUZZ / "corpus"   # <target>.zip: committed, minimized (--merge-into writes it)
sys.path.insert(0, str(TESTS))

ARTIFACT = re.compile(r"Test unit written to (\S+)")
STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)
STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", re.M)
# where a finding's report starts in a libFuzzer log: atheris's Python traceback, an ASan
# or UBSan report, or libFuzzer's own verdict (timeout, out-of-memory, deadly signal)
FINDING = re.compile(r"=== Uncaught Python exception|ERROR: AddressSanitizer|runtime error:|"
                     r"ERROR: libFuzzer|==\d+== ERROR:")
NATIVE_FRAME = re.compile(r"^\s+#(\d+) 0x")


def target_names() -> list[str]:
    # Names only: importing _fuzz_targets would import kafkastore, whose instrumented
    # kernels cannot load in this (not ASan-preloaded) process.
    text = (TESTS / "_fuzz_targets.py").read_text()
    block = text[text.index("TARGETS = {"):]
    block = block[:block.index("}")]
    return re.findall(r'"(\w+)":', block)


def atheris_dir(python: str) -> Path:
    out = subprocess.run([python, "-c", "import atheris; print(atheris.path())"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return Path(out)


def unpack_corpus(archive: Path, into: Path) -> int:
    """Extract a committed corpus zip (flat, one input per member) into ``into``."""
    if not archive.is_file():
        return 0
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as z:
        names = [n for n in z.namelist() if "/" not in n and not n.startswith(".")]
        for name in names:
            (into / name).write_bytes(z.read(name))
    return len(names)


def pack_corpus(folder: Path, archive: Path) -> None:
    """Write ``folder``'s files to ``archive``, sorted, with fixed dates, so the same
    inputs always give the same bytes (a clean diff in git)."""
    tmp = archive.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(folder.iterdir()):
            if f.is_file():
                info = zipfile.ZipInfo(f.name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                z.writestr(info, f.read_bytes())
    os.replace(tmp, archive)


def write_seeds(python: str, build: Path, targets: list[str], corpus: Path) -> None:
    """Seed each target's corpus dir (pure backend: seeds are bytes, not backend output)."""
    script = (
        "import hashlib, sys\n"
        "from pathlib import Path\n"
        "from _fuzz_targets import seeds\n"
        "root = Path(sys.argv[1])\n"
        "for name in sys.argv[2:]:\n"
        "    for data in seeds(name):\n"
        "        if len(data) <= 65536:\n"
        "            (root / name / ('seed-' + hashlib.sha1(data).hexdigest())).write_bytes(data)\n"
    )
    for name in targets:
        (corpus / name).mkdir(parents=True, exist_ok=True)
        saved = TESTS / "data" / "fuzz" / name
        if saved.is_dir():
            for f in saved.iterdir():
                if f.is_file():
                    shutil.copy(f, corpus / name / f.name)
        unpack_corpus(SAVED_CORPUS / f"{name}.zip", corpus / name)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(build), str(TESTS)]),
               KAFKASTORE_NO_EXTENSIONS="1")
    env.pop("LD_PRELOAD", None)
    subprocess.run([python, "-c", script, str(corpus), *targets], check=True, env=env,
                   cwd=tempfile.gettempdir())


def fuzz_env(build: Path, asan: Path, backend: str) -> dict:
    """The environment of an atheris_main.py process for ``backend``."""
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(build), str(TESTS)]),
        PYTHONMALLOC="malloc",
        LD_PRELOAD=str(asan),
        ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=32"
                     ":malloc_context_size=20",
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
        FUZZ_EXPECT_BACKEND=backend,
        FUZZ_BUILD_DIR=str(build),
    )
    if backend == "python":
        env["KAFKASTORE_NO_EXTENSIONS"] = "1"
    else:
        env.pop("KAFKASTORE_NO_EXTENSIONS", None)
    return env


def run_one(python: str, build: Path, asan: Path, backend: str, target: str, seconds: int,
            corpus: Path, out: Path, args) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "fuzz.log"
    env = fuzz_env(build, asan, backend)
    cmd = [python, str(FUZZ / "atheris_main.py"), target, str(corpus),
           f"-max_total_time={seconds}", f"-rss_limit_mb={args.rss_limit_mb}",
           f"-max_len={args.max_len}", f"-timeout={args.timeout}",
           "-print_final_stats=1", f"-artifact_prefix={out}/"]
    if args.runs:
        cmd.append(f"-runs={args.runs}")
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                              cwd=tempfile.gettempdir(),
                              timeout=seconds + 120 + args.timeout)
    wall = time.monotonic() - start
    text = log_path.read_text(errors="replace")
    stats = {k: int(v) for k, v in STAT.findall(text)}
    statuses = STATUS.findall(text)
    executions = stats.get("number_of_executed_units")
    if executions is None and statuses:
        executions = int(statuses[-1][0])
    artifacts = ARTIFACT.findall(text)
    corpus_files = sum(1 for _ in corpus.iterdir())
    failed = proc.returncode != 0 or bool(artifacts)
    return {
        "backend": backend, "target": target, "seconds": seconds, "wall_s": round(wall, 1),
        "executions": executions or 0,
        "exec_per_s": stats.get("average_exec_per_sec", 0),
        "coverage": int(statuses[-1][1]) if statuses else 0,
        "features": int(statuses[-1][2]) if statuses else 0,
        "corpus": corpus_files,
        "peak_rss_mb": stats.get("peak_rss_mb", 0),
        "returncode": proc.returncode,
        "crashes": artifacts,
        "ok": not failed,
        "log": str(log_path),
    }


def finding_report(log_text: str, max_lines: int = 40) -> list[str]:
    """The lines of a libFuzzer log that say what went wrong and with which input.

    From the first report marker: the message, the Python traceback or the top native
    frames (deeper ones are the interpreter and atheris), the SUMMARY line and the
    crashing input in base64.
    """
    lines = log_text.splitlines()
    start = next((i for i, line in enumerate(lines) if FINDING.search(line)), None)
    if start is None:
        return lines[-max_lines:]
    out = []
    for line in lines[start:]:
        frame = NATIVE_FRAME.match(line)
        if frame and int(frame.group(1)) >= 8:
            continue
        if line.startswith(("MS:", "artifact_prefix=", "stat::")):
            break
        out.append(line)
        if len(out) >= max_lines:
            out.append("...")
            break
    out += [line for line in lines if line.startswith(("SUMMARY:", "Base64:"))
            and line not in out]
    return out


def merge_into(python: str, build: Path, asan: Path, scratch: Path, targets: list[str],
               sources: list[Path], dest: Path) -> None:
    """Minimize: for each target, the smallest set of inputs from ``dest/<target>.zip`` and
    every ``<source>/<target>`` that keeps all their coverage (libFuzzer ``-merge=1``, on
    the compiled backend, whose kernels add native edges to Python's), written back to
    ``dest/<target>.zip``."""
    dest.mkdir(parents=True, exist_ok=True)
    for target in targets:
        old = scratch / "committed" / target
        unpack_corpus(dest / f"{target}.zip", old)
        inputs = [d for d in [old, *(src / target for src in sources)] if d.is_dir()]
        if not inputs:
            continue
        fresh = scratch / "merged" / target
        fresh.mkdir(parents=True)
        # libFuzzer starts the merge's child processes as argv[0]: give it a program
        wrapper = scratch / f"merge-{target}.sh"
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(python)} "
                           f"{shlex.quote(str(FUZZ / 'atheris_main.py'))} {target} \"$@\"\n")
        wrapper.chmod(0o700)
        env = dict(fuzz_env(build, asan, "cython"), FUZZ_PROGRAM=str(wrapper))
        log = scratch / f"merge-{target}.log"
        with open(log, "wb") as f:
            proc = subprocess.run([str(wrapper), "-merge=1", "-max_len=65536",
                                   "-rss_limit_mb=512", "-timeout=10", str(fresh),
                                   *map(str, inputs)],
                                  stdout=f, stderr=subprocess.STDOUT, env=env,
                                  cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            sys.exit(f"run.py: merge of {target} failed (exit {proc.returncode}):\n"
                     + "\n".join(log.read_text(errors="replace").splitlines()[-20:]))
        before = sum(1 for d in inputs for f in d.iterdir() if f.is_file())
        pack_corpus(fresh, dest / f"{target}.zip")
        files = [f for f in fresh.iterdir() if f.is_file()]
        print(f"run.py: merged {target}: {before} inputs -> {len(files)} "
              f"({sum(f.stat().st_size for f in files) / 1024:.0f} KiB, "
              f"{(dest / f'{target}.zip').stat().st_size / 1024:.0f} KiB zipped)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=30, help="fuzzing time per target and backend")
    ap.add_argument("--pure-seconds", type=int,
                    help="fuzzing time per target for the python backend (default: --seconds)")
    ap.add_argument("--targets", default="", help="comma-separated (default: all)")
    ap.add_argument("--backends", default="cython,python")
    ap.add_argument("--pure-skip", default="",
                    help="comma-separated targets not run on the python backend: code that "
                         "imports no kernel runs the same Python on both (fuzz/ci.sh: "
                         "checkpoint)")
    ap.add_argument("--jobs", type=int, default=2, help="pairs run at the same time")
    ap.add_argument("--python", default=sys.executable, help="interpreter with atheris")
    ap.add_argument("--build", type=Path, help="instrumented build from fuzz/build.sh")
    ap.add_argument("--corpus", type=Path, help="keep the corpus here (default: temporary)")
    ap.add_argument("--out", type=Path, default=FUZZ / "out", help="crash inputs and logs")
    ap.add_argument("--figures", type=Path, help="write the results as JSON here")
    ap.add_argument("--rss-limit-mb", type=int, default=512)
    ap.add_argument("--max-len", type=int, default=65536)
    ap.add_argument("--timeout", type=int, default=10, help="libFuzzer -timeout per input (s)")
    ap.add_argument("--runs", type=int, default=0, help="stop after this many inputs")
    ap.add_argument("--merge-into", type=Path, metavar="DIR",
                    help="no fuzzing: minimize DIR/<target>.zip plus the --corpus of both "
                         "backends into DIR/<target>.zip (to refresh fuzz/corpus)")
    args = ap.parse_args(argv)

    names = target_names()
    targets = [t for t in args.targets.split(",") if t] or names
    unknown = sorted(set(targets) - set(names))
    if unknown:
        ap.error(f"unknown targets {unknown}; targets: {', '.join(names)}")
    backends = [b for b in args.backends.split(",") if b]
    if set(backends) - {"cython", "python"}:
        ap.error("backends are cython and python")
    pure_skip = {t for t in args.pure_skip.split(",") if t}
    if pure_skip - set(names):
        ap.error(f"unknown --pure-skip targets {sorted(pure_skip - set(names))}")

    scratch = Path(tempfile.mkdtemp(prefix="ks-fuzz-run-"))
    try:
        build = args.build
        if build is None:
            build = scratch / "build"
            subprocess.run(["bash", str(FUZZ / "build.sh"), args.python, str(build)],
                           check=True)
        build = build.resolve()
        asan = atheris_dir(args.python) / "asan_with_fuzzer.so"
        if not asan.is_file():
            sys.exit(f"run.py: {asan} not found (atheris install broken?)")
        corpus_root = (args.corpus or scratch / "corpus").resolve()
        out_root = args.out.resolve()
        if args.merge_into:
            merge_into(args.python, build, asan, scratch, targets,
                       [corpus_root / b for b in backends], args.merge_into.resolve())
            return 0
        jobs = []
        for backend in backends:
            mine = [t for t in targets if not (backend == "python" and t in pure_skip)]
            write_seeds(args.python, build, mine, corpus_root / backend)
            for target in mine:
                jobs.append((backend, target))
        print(f"run.py: {len(jobs)} runs of {args.seconds}s (python backend: "
              f"{args.seconds if args.pure_seconds is None else args.pure_seconds}s), "
              f"{args.jobs} at a time; "
              f"build {build}; corpus {corpus_root}; output {out_root}", flush=True)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            pure = args.pure_seconds if args.pure_seconds is not None else args.seconds
            futures = [pool.submit(run_one, args.python, build, asan, b, t,
                                   pure if b == "python" else args.seconds,
                                   corpus_root / b / t, out_root / b / t, args)
                       for b, t in jobs]
            results = []
            for f in futures:
                r = f.result()
                results.append(r)
                mark = "ok" if r["ok"] else "FOUND"
                print(f"run.py: {r['backend']:6} {r['target']:10} {mark:5} "
                      f"{r['executions']:>9} execs in {r['wall_s']}s", flush=True)
        total = time.monotonic() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print()
    print(f"{'backend':7} {'target':11} {'executions':>10} {'exec/s':>7} {'cov':>5} "
          f"{'corpus':>6} {'rss MB':>6}  result")
    for r in results:
        result = "ok" if r["ok"] else (
            f"FOUND {len(r['crashes'])}: {', '.join(r['crashes'])}" if r["crashes"]
            else f"FAILED (exit {r['returncode']}, see {r['log']})")
        print(f"{r['backend']:7} {r['target']:11} {r['executions']:>10} {r['exec_per_s']:>7} "
              f"{r['coverage']:>5} {r['corpus']:>6} {r['peak_rss_mb']:>6}  {result}")
    bad = [r for r in results if not r["ok"]]
    for r in bad:
        print(f"\n--- {r['backend']} {r['target']}: {r['log']}")
        report = finding_report(Path(r["log"]).read_text(errors="replace"))
        print("\n".join(report))
        b64 = next((line.split()[1] for line in report
                    if line.startswith("Base64:") and len(line.split()) == 2), None)
        if b64:
            print(f"--- replay: PYTHONPATH=.:tests python -c \"import base64, _fuzz_targets as t; "
                  f"t.TARGETS['{r['target']}'](base64.b64decode('{b64}'))\"")
    print(f"\nrun.py: {sum(r['executions'] for r in results)} executions in {total:.0f}s; "
          f"{len(bad)} of {len(results)} runs found something or failed")
    if args.figures:
        args.figures.parent.mkdir(parents=True, exist_ok=True)
        args.figures.write_text(json.dumps({
            "seconds_per_target": {b: next((r["seconds"] for r in results if r["backend"] == b), 0)
                                   for b in backends},
            "wall_s": round(total, 1),
            "runs": results,
            "executions": {f"{r['backend']}/{r['target']}": r["executions"] for r in results},
            "crashes": sum(len(r["crashes"]) for r in results),
            "failed_runs": len(bad),
        }, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
