#!/usr/bin/env bash
# The fuzzing step of CI, from the root of a fresh clone:
#
#   bash fuzz/ci.sh <venv-python> <seconds>
#
# 1. installs what is missing: clang-14 and libclang-rt-14-dev (apt), atheris, Cython and
#    setuptools (pip, into the given venv), kafkastore's runtime dependencies if the venv
#    lacks them;
# 2. builds the instrumented kernels in a temporary copy of HEAD (fuzz/build.sh);
# 3. runs every target for <seconds> on the compiled backend and <seconds>/3 on the pure one,
#    two at a time (fuzz/run.py), and prints the executions per target. The checkpoint
#    and server_request targets run on the compiled backend only: kafkastore.checkpoint
#    and kafkastore.server.protocol import no kernel, so their pure runs would fuzz the
#    same Python again.
#
# Exits non-zero if any target found something; the inputs are then in fuzz/out/ (and the
# figures in fuzz/out/figures.json). .ci/run gives <seconds>=30 (a smoke run: the committed
# corpus is where the volume is, and it is replayed in full by the suite); measured on the
# 2-CPU CI machine: see fuzz/README.md.
set -euo pipefail

PY="${1:?usage: fuzz/ci.sh <venv-python> <seconds>}"
SECS="${2:?usage: fuzz/ci.sh <venv-python> <seconds>}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$SECONDS
export PIP_DISABLE_PIP_VERSION_CHECK=1

if ! command -v clang-14 >/dev/null \
        || [ ! -f "$(clang-14 -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.asan-x86_64.a" ]; then
    echo "fuzz/ci.sh: installing clang-14 and libclang-rt-14-dev"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
"$PY" -c "import atheris" 2>/dev/null || "$PY" -m pip install --quiet atheris
"$PY" -c "import Cython, setuptools" 2>/dev/null \
    || "$PY" -m pip install --quiet "setuptools>=77" "Cython>=3.1,<4"
if ! "$PY" -c "import crc32c, numpy, lz4, zstandard, cramjam, xxhash" 2>/dev/null; then
    # kafkastore's own dependencies, as pyproject.toml lists them (no build of kafkastore)
    "$PY" - "$REPO/pyproject.toml" > "$REPO/fuzz/.deps.txt" <<'PY'
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))
PY
    "$PY" -m pip install --quiet -r "$REPO/fuzz/.deps.txt"
    rm -f "$REPO/fuzz/.deps.txt"
fi
echo "fuzz/ci.sh: tools ready after $((SECONDS - START))s"

BUILD="$(mktemp -d)"
trap 'rm -rf "$BUILD"' EXIT
bash "$REPO/fuzz/build.sh" "$PY" "$BUILD/repo"

rc=0
"$PY" "$REPO/fuzz/run.py" --python "$PY" --build "$BUILD/repo" --seconds "$SECS" \
    --pure-seconds "$(( (SECS + 2) / 3 ))" --pure-skip checkpoint,server_request --jobs 2 --out "$REPO/fuzz/out" \
    --figures "$REPO/fuzz/out/figures.json" || rc=$?
echo "fuzz/ci.sh: done in $((SECONDS - START))s (exit $rc)"
exit "$rc"
