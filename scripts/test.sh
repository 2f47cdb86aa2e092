#!/usr/bin/env bash
# Run the test suite against an INSTALLED kafkastore, once per backend.
#
#   bash scripts/test.sh [pytest args...]
#
# 1. Creates a venv at ${KAFKASTORE_VENV:-.venv} unless it exists.
# 2. Installs kafkastore with the test extra: the wheel file $KAFKASTORE_WHEEL if set,
#    otherwise a wheel built from this source tree (pip install ".[test]"). Without
#    KAFKASTORE_WHEEL, a venv that already holds kafkastore built from this tree (the
#    README's first command: pip install . into .venv; scripts/installed_from_tree.py
#    decides) keeps that build and gets only the extras' requirements;
#    KAFKASTORE_REBUILD=1 rebuilds anyway.
# 3. Runs pytest from an empty temporary directory, so `import kafkastore` finds the
#    installed package and never ./kafkastore (conftest.py double-checks this):
#      - compiled backend:  KAFKASTORE_EXPECT_BACKEND=cython, every test
#      - pure backend:      KAFKASTORE_NO_EXTENSIONS=1 KAFKASTORE_EXPECT_BACKEND=python,
#                           with --kernel-tests-only: the tests whose outcome the kernels
#                           can decide. The same_python families (Spark, object storage,
#                           the CLI end to end, bench, modules without a kernel; listed in
#                           tests/_selection.py SAME_PYTHON, reasons in docs/development.rst)
#                           run the same Python on either backend and run once, compiled.
#                           pytest counts them as deselected and names the families.
#    KAFKASTORE_BACKENDS="python" runs only the second (e.g. for a pure wheel): then the
#    pure run takes every test, since nothing else runs the same_python ones.
#    KAFKASTORE_PURE_SELECTION=all runs every test on the pure backend too.
#    The backends run one after the other, each spread over the machine's CPUs by
#    pytest-xdist (-n <CPUs>; tests/conftest.py's scheduler gives one worker the Spark
#    directory whole, first, and deals out the other modules); KAFKASTORE_WORKERS=N
#    sets the number of workers, 1 runs each backend in one process.
#
# Arguments go to pytest. Paths among them are taken relative to the caller's directory;
# without any, the whole tests/ directory runs. Exits non-zero if any run failed or
# collected no tests.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${KAFKASTORE_VENV:-.venv}"
BACKENDS="${KAFKASTORE_BACKENDS:-cython python}"
PURE_SELECTION="${KAFKASTORE_PURE_SELECTION:-kernels}"
case "$PURE_SELECTION" in
    kernels|all) ;;
    *) echo "test.sh: KAFKASTORE_PURE_SELECTION=$PURE_SELECTION: expected kernels or all" >&2
       exit 2 ;;
esac
# The same_python tests run once: on the compiled backend when it runs.
case " $BACKENDS " in *" cython "*) ;; *) PURE_SELECTION=all ;; esac

# Resolve relative paths against the caller's directory before we cd anywhere.
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
WHEEL="${KAFKASTORE_WHEEL:-}"
if [ -n "$WHEEL" ]; then
    case "$WHEEL" in /*) ;; *) WHEEL="$PWD/$WHEEL" ;; esac
    [ -f "$WHEEL" ] || { echo "test.sh: KAFKASTORE_WHEEL=$WHEEL is not a file" >&2; exit 2; }
fi

# pytest arguments: existing paths (optionally with a ::node id) become absolute.
args=()
have_paths=0
for arg in "$@"; do
    path="${arg%%::*}"
    if [ "${arg#-}" = "$arg" ] && [ -e "$path" ]; then
        arg="$(cd "$(dirname "$path")" && pwd)/$(basename "$path")${arg#"$path"}"
        have_paths=1
    fi
    args+=("$arg")
done
[ "$have_paths" = 1 ] || args+=("$REPO/tests")

if [ ! -x "$VENV/bin/python" ]; then
    echo "test.sh: creating venv $VENV"
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip

# The spark and connect extras too (pyspark, pyarrow; the Connect client), so the Spark
# data source tests run, locally, on a standalone cluster and through Spark Connect; they skip,
# saying why, on a machine without Java. KAFKASTORE_EXTRAS=test leaves pyspark out.
EXTRAS="${KAFKASTORE_EXTRAS:-test,spark,connect}"
# The compiled kernels must be installed when the compiled backend runs.
compiled=()
case " $BACKENDS " in *" cython "*) compiled=(--compiled) ;; esac
REQS="$(mktemp)"
reuse_why=""
if [ -z "$WHEEL" ] && [ "${KAFKASTORE_REBUILD:-0}" != 1 ]; then
    # The README's first command built and installed this tree into .venv already: reuse
    # that build (compiling the kernels is most of an install) when it is this tree's
    # (scripts/installed_from_tree.py says how that is decided), adding only what the
    # extras need.
    reuse_why="$("$PY" "$REPO/scripts/installed_from_tree.py" "$REPO" \
        ${compiled[@]+"${compiled[@]}"} --extras "$EXTRAS" --requirements "$REQS" 2>&1)" \
        && reuse_why="reuse" || true
fi
if [ "$reuse_why" = reuse ]; then
    echo "test.sh: $VENV holds kafkastore built from this tree: not rebuilding it" \
         "(KAFKASTORE_REBUILD=1 does); installing what the extras $EXTRAS need"
    [ ! -s "$REQS" ] || "$PY" -m pip install --quiet -r "$REQS"
else
    # Uninstall first so a reused venv never keeps an older build of the same version.
    "$PY" -m pip uninstall --quiet --yes kafkastore >/dev/null 2>&1 || true
    if [ -n "$WHEEL" ]; then
        echo "test.sh: installing $WHEEL with the extras $EXTRAS"
        "$PY" -m pip install --quiet "${WHEEL}[$EXTRAS]"
    else
        [ -z "$reuse_why" ] || echo "test.sh: not reusing the installed build: $reuse_why"
        echo "test.sh: building and installing $REPO with the extras $EXTRAS"
        "$PY" -m pip install --quiet "${REPO}[$EXTRAS]"
    fi
fi
rm -f "$REQS"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# Where will `import kafkastore` come from? find_spec does not execute the package.
ORIGIN="$("$PY" -c 'import importlib.util as u; print(u.find_spec("kafkastore").origin)')"
echo "test.sh: kafkastore imports from $ORIGIN"
# Only ./kafkastore itself is the source tree: a venv inside the repository (the default
# .venv) holds the installed package under $REPO too.
case "$ORIGIN" in
    "$REPO"/kafkastore/*)
        echo "test.sh: that is the source tree, not the installed package" >&2; exit 2 ;;
esac

# One backend's pytest run: `run_backend <backend>` prints its header and pytest's output,
# and leaves "<rc> <seconds>" in $WORK/result-<backend>.
run_backend() {
    local backend="$1" selection=() env=() rc=0 start=$SECONDS
    case "$backend" in
        cython) env=(KAFKASTORE_EXPECT_BACKEND=cython) ;;
        python) env=(KAFKASTORE_NO_EXTENSIONS=1 KAFKASTORE_EXPECT_BACKEND=python)
                [ "$PURE_SELECTION" = all ] || selection=(--kernel-tests-only) ;;
    esac
    echo
    echo "test.sh: ==== backend=$backend: ${env[*]} pytest ${selection[*]} ${args[*]}"
    if [ "${#selection[@]}" -gt 0 ]; then
        echo "test.sh: the pure backend reruns the tests whose outcome the kernels can decide;"
        echo "test.sh: the same_python ones run on the compiled backend (they are counted as"
        echo "test.sh: deselected below; KAFKASTORE_PURE_SELECTION=all runs them here too)"
    fi
    env "${env[@]}" KAFKASTORE_REQUIRE_INSTALLED=1 \
        "$VENV/bin/pytest" -p no:cacheprovider -c "$REPO/pyproject.toml" --rootdir "$REPO" \
        --basetemp "$WORK/tmp-$backend" ${selection[@]+"${selection[@]}"} "${args[@]}" || rc=$?
    echo "$rc $((SECONDS - start))" > "$WORK/result-$backend"
}

for backend in $BACKENDS; do
    case "$backend" in
        cython|python) ;;
        *) echo "test.sh: unknown backend '$backend' in KAFKASTORE_BACKENDS" >&2; exit 2 ;;
    esac
done
# Workers per backend run: one per CPU (tests/conftest.py: pytest_xdist_make_scheduler).
# Up to 8 by default: past that, a worker's start-up (importing, collecting 5,000 tests)
# costs more than the share of the run it takes.
WORKERS="${KAFKASTORE_WORKERS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}"
[ -n "${KAFKASTORE_WORKERS:-}" ] || [ "$WORKERS" -le 8 ] || WORKERS=8
case "$WORKERS" in
    ''|*[!0-9]*) echo "test.sh: KAFKASTORE_WORKERS=$WORKERS: expected a number" >&2; exit 2 ;;
esac
if [ "$WORKERS" -gt 1 ]; then
    if "$PY" -c 'import xdist' 2>/dev/null; then
        args=(-n "$WORKERS" "${args[@]}")
    else
        echo "test.sh: pytest-xdist is not installed: one process per backend"
    fi
fi
for backend in $BACKENDS; do
    run_backend "$backend"
done

status=0
summary=()
for backend in $BACKENDS; do
    read -r rc seconds < "$WORK/result-$backend" || { rc=1; seconds="?"; }
    if [ "$rc" -eq 5 ]; then
        echo "test.sh: backend=$backend collected no tests (pytest exit 5): counted as a failure" >&2
    fi
    selection=""
    [ "$backend" = python ] && [ "$PURE_SELECTION" != all ] && selection=" (--kernel-tests-only)"
    line="backend=$backend$selection: pytest exit $rc in ${seconds}s"
    if [ "$rc" -eq 0 ]; then
        line="PASS $line"
    else
        line="FAIL $line"
        status=1
    fi
    summary+=("$line")
done

echo
echo "test.sh: summary (kafkastore from $ORIGIN)"
printf 'test.sh:   %s\n' "${summary[@]}"
exit "$status"
