#!/usr/bin/env bash
# Build kafkastore's Cython kernels for coverage-guided fuzzing, OUTSIDE the source tree.
#
#   bash fuzz/build.sh <python> <build-dir> [--worktree]
#
# <build-dir> receives a copy of the repository (`git archive HEAD`, or with --worktree the
# working-tree version of every tracked file) and the kernels are compiled there, in place,
# with clang-14 and -fsanitize=address,undefined,fuzzer-no-link: libFuzzer's coverage
# counters (atheris sees them) plus ASan and UBSan checks in every kernel. The in-place .so
# files of the source tree are never touched: other work uses them.
#
# The Cython directives are the release ones (boundscheck/wraparound off, as shipped), so
# the fuzzer exercises the code users run; only the C flags differ. No setup.py switch is
# needed: setuptools appends $CFLAGS / $LDFLAGS to every compile and link.
#
# At run time the sanitizer runtime comes from atheris's asan_with_fuzzer.so (LD_PRELOAD),
# which also carries the UBSan handlers; fuzz/run.py sets that up.
set -euo pipefail

PY="${1:?usage: build.sh <python> <build-dir> [--worktree]}"
OUT="${2:?usage: build.sh <python> <build-dir> [--worktree]}"
MODE="${3:-head}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CC_BIN="${FUZZ_CC:-clang-14}"

command -v "$CC_BIN" >/dev/null || { echo "build.sh: $CC_BIN not found" >&2; exit 2; }
case "$OUT" in
    "$REPO"|"$REPO"/kafkastore*) echo "build.sh: refusing to build inside the source tree" >&2; exit 2 ;;
esac

rm -rf "$OUT"
mkdir -p "$OUT"
if [ "$MODE" = "--worktree" ]; then
    # tracked files as they are on disk now (uncommitted fixes included)
    (cd "$REPO" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$OUT"
else
    git -C "$REPO" archive HEAD | tar -xf - -C "$OUT"
fi

SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined"
SAN="$SAN -fno-omit-frame-pointer"
start=$SECONDS
(
    cd "$OUT"
    # -g for symbolised ASan reports; -O1 keeps the build quick and the reports readable.
    # LDSHARED replaces Python's "gcc -shared ..." so the link uses clang's sanitizer flags.
    CC="$CC_BIN" LDSHARED="$CC_BIN -shared" \
    CFLAGS="$SAN -g -O1 -Wno-unused-command-line-argument" LDFLAGS="$SAN" \
        "$PY" setup.py -q build_ext --inplace -j 2
) > "$OUT/fuzz-build.log" 2>&1 || { cat "$OUT/fuzz-build.log" >&2; exit 1; }

# Proof that the kernels are instrumented: each must reference the coverage and ASan hooks.
status=0
for so in "$OUT"/kafkastore/_ext/*.so; do
    cov=$(nm -D "$so" | grep -c '__sanitizer_cov' || true)
    asan=$(nm -D "$so" | grep -c '__asan_' || true)
    if [ "$cov" -eq 0 ] || [ "$asan" -eq 0 ]; then
        echo "build.sh: $so is NOT instrumented (sancov $cov, asan $asan)" >&2
        status=1
    else
        echo "build.sh: $(basename "$so"): $cov sancov and $asan asan symbols"
    fi
done
echo "build.sh: built in $((SECONDS - start))s into $OUT"
exit "$status"
