"""Run one fuzz target under atheris (libFuzzer): ``atheris_main.py <target> [libFuzzer flags]``.

Meant to be started by ``fuzz/run.py``, which sets the environment: ``PYTHONPATH`` with the
instrumented build first (``fuzz/build.sh``) and ``tests/`` second, ``PYTHONMALLOC=malloc``,
``LD_PRELOAD`` of atheris's ``asan_with_fuzzer.so`` and the ASan options; for the pure
backend also ``KAFKASTORE_NO_EXTENSIONS=1``.

The target functions live in ``tests/_fuzz_targets.py`` so that the normal test suite can
replay crash inputs through exactly the same code. kafkastore's Python modules (and the
target module) are imported under ``atheris.instrument_imports`` so their bytecode feeds
coverage to libFuzzer too; the compiled kernels carry their own SanitizerCoverage counters.

``FUZZ_EXPECT_BACKEND=cython|python`` stops the run at once if kafkastore loaded the other
set of kernels, or the compiled kernels from somewhere other than ``FUZZ_BUILD_DIR``.
"""

from __future__ import annotations

import logging
import os
import sys

import atheris

if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit("usage: atheris_main.py <target> [libFuzzer flags...]")
TARGET = sys.argv[1]

with atheris.instrument_imports(include=["kafkastore", "_fuzz_targets"]):
    from _fuzz_targets import TARGETS

    import kafkastore
    import kafkastore._kernels as kernels

# Recovery logs every truncation it does: noise at 10,000 inputs a second.
logging.getLogger("kafkastore").addHandler(logging.NullHandler())
logging.getLogger("kafkastore").propagate = False

expected = os.environ.get("FUZZ_EXPECT_BACKEND")
if expected and kernels.BACKEND != expected:
    sys.exit(f"atheris_main: expected backend {expected}, got {kernels.BACKEND}")
build = os.environ.get("FUZZ_BUILD_DIR")
if build and kernels.BACKEND == "cython":
    so = kernels.record_batch.__file__
    if not os.path.realpath(so).startswith(os.path.realpath(build) + os.sep):
        sys.exit(f"atheris_main: compiled kernels from {so}, not from the build {build}")
print(f"atheris_main: target={TARGET} backend={kernels.BACKEND} "
      f"kafkastore={os.path.dirname(kafkastore.__file__)}", file=sys.stderr, flush=True)

try:
    target = TARGETS[TARGET]
except KeyError:
    sys.exit(f"atheris_main: unknown target {TARGET!r}; targets: {', '.join(TARGETS)}")


def test_one_input(data: bytes) -> None:
    target(data)


# libFuzzer's -merge does its work in child processes started as argv[0] plus flags, so
# for a merge argv[0] must be a program that starts this target under this interpreter:
# fuzz/run.py --merge-into writes one and names it in FUZZ_PROGRAM.
PROGRAM = os.environ.get("FUZZ_PROGRAM") or sys.argv[0]
atheris.Setup([PROGRAM, *sys.argv[2:]], test_one_input)
atheris.Fuzz()
