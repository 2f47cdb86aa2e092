"""Build the compiled kernels. All metadata lives in pyproject.toml.

Environment switches, on unless unset, empty, "0", "false" or "no" (the rule kafkastore._kernels
uses at run time):

KAFKASTORE_NO_EXTENSIONS=1  build no extensions at all: a pure-Python wheel, no compiler needed
                            (also automatic on interpreters other than CPython).
KAFKASTORE_DEBUG=1          bounds/wraparound/initialized checks, line tracing, -DKS_DEBUG=1
                            (turns on `if KS_DEBUG:` asserts), -O0 -g.
KAFKASTORE_ANNOTATE=1       write Cython's annotated HTML next to each .pyx.
KAFKASTORE_SANITIZE=1       a debug build compiled with AddressSanitizer and UBSan (GCC/Clang), for
                            the hostile-input tests: run them with PYTHONMALLOC=malloc and
                            LD_PRELOAD=$(gcc -print-file-name=libasan.so) (see .ci/run).
"""

import glob
import json
import os
import platform
import sys
from pathlib import Path

from setuptools import Extension, setup


def _flag(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


NO_EXTENSIONS = _flag("KAFKASTORE_NO_EXTENSIONS") or platform.python_implementation() != "CPython"
SANITIZE = _flag("KAFKASTORE_SANITIZE")
DEBUG = _flag("KAFKASTORE_DEBUG") or SANITIZE
ANNOTATE = _flag("KAFKASTORE_ANNOTATE")

# One row per compiled kernel: kafkastore/_ext/<name>.pyx -> kafkastore._ext.<name>.
# Adding a kernel is one line here plus the checklist in docs/development.rst
# (.pyx, .pxd, .pyi, the kafkastore/_pure twin, the _kernels switch, tests over both).
KERNELS = [
    "varint",
    "record_batch",
    "index_search",
    "entry_walk",
    "offset_map",
    "murmur2",
    "column_encode",
]

# Set once here; a per-file "# cython:" header may only override, with a comment saying why.
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "initializedcheck": False,
    "cdivision": True,
    "embedsignature": True,
}
MACROS = []
if sys.platform == "win32":
    COMPILE_ARGS = ["/O2", "/W3"]
else:
    # -g0 drops the debug info Python's own CFLAGS ask for: it is most of a kernel's size.
    COMPILE_ARGS = ["-O2", "-g0", "-Wall"]

if DEBUG:
    DIRECTIVES.update(boundscheck=True, wraparound=True, initializedcheck=True, linetrace=True)
    MACROS += [("KS_DEBUG", "1"), ("CYTHON_TRACE_NOGIL", "1")]
    if sys.platform == "win32":
        COMPILE_ARGS = ["/Od", "/Zi", "/W3"]
    else:
        COMPILE_ARGS = ["-O0", "-g", "-Wall"]

LINK_ARGS = []
if SANITIZE:
    # pymalloc hides overruns of small objects from ASan; the runner sets PYTHONMALLOC=malloc
    # -fno-wrapv undoes the -fwrapv in CPython's CFLAGS: with it, signed overflow is
    # defined and UBSan stays silent, but kernels must not rely on it (MSVC has no -fwrapv)
    SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
           "-fno-wrapv", "-fno-omit-frame-pointer"]
    COMPILE_ARGS = COMPILE_ARGS + SAN
    LINK_ARGS = SAN

# Hand-written headers, cdef declarations and the include files of record_batch.pyx: an
# edit to any of them rebuilds every kernel.
DEPENDS = sorted(glob.glob("csrc/*.h") + glob.glob("kafkastore/_ext/*.pxd")
                 + glob.glob("kafkastore/_ext/*.pxi"))


def _extensions():
    if NO_EXTENSIONS:
        return []

    from Cython.Build import cythonize

    extensions = [
        Extension(
            f"kafkastore._ext.{name}",
            [f"kafkastore/_ext/{name}.pyx"],
            include_dirs=["csrc"],
            depends=DEPENDS,
            define_macros=MACROS,
            extra_compile_args=COMPILE_ARGS,
            extra_link_args=LINK_ARGS,
        )
        for name in KERNELS
    ]

    # cythonize() only compares timestamps, so a switch between release, debug and annotate
    # builds would otherwise reuse C generated with the other mode's directives.
    stamp = Path("build", "cython-options.json")
    options = json.dumps({"directives": DIRECTIVES, "macros": MACROS, "annotate": ANNOTATE,
                          "sanitize": SANITIZE})
    force = not stamp.is_file() or stamp.read_text() != options
    extensions = cythonize(
        extensions,
        compiler_directives=DIRECTIVES,
        annotate=ANNOTATE,
        force=force,
    )
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(options)
    return extensions


setup(ext_modules=_extensions())
