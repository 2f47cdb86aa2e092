"""The backend switch and the contract between each compiled kernel and its pure twin."""

from __future__ import annotations

import importlib
import inspect
import os
import platform
import re
import types
from pathlib import Path

import pytest

import kafkastore._kernels as K

REPO = Path(__file__).resolve().parents[1]
EXT_SOURCE_DIR = REPO / "kafkastore" / "_ext"
# Read independently of kafkastore._kernels, with the same rule, so a bug there shows up here.
_OFF = ("", "0", "false", "no")
PURE_MODE = os.environ.get("KAFKASTORE_NO_EXTENSIONS", "").strip().lower() not in _OFF

# What compiled kernels may depend on (docs/development.rst, "Adding a kernel").
ALLOWED_CIMPORT_ROOTS = ("libc", "cpython", "cython")
ALLOWED_IMPORTS = (
    "__future__",
    "cython",
    "kafkastore.errors",
    "kafkastore.types",
    "crc32c",
    "zlib",
    "numpy",
    "time",
)

IMPORT_LINE = re.compile(
    r"^\s*(?:"
    r"from\s+(?P<from>[\w.]+)\s+(?P<kind>c?import)\b"
    r"|(?P<plain>c?import)\s+(?P<names>[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)"
    r")"
)


def _pure(kernel: str) -> types.ModuleType:
    return importlib.import_module(f"kafkastore._pure.{kernel}")


def _ext(kernel: str) -> types.ModuleType:
    try:
        return importlib.import_module(f"kafkastore._ext.{kernel}")
    except ImportError as exc:
        if PURE_MODE:
            pytest.skip(f"compiled extensions not built ({exc})")
        raise


def _public_names(module: types.ModuleType) -> set[str]:
    """``__all__`` if the module has one, else the public names it defines itself."""
    if hasattr(module, "__all__"):
        return set(module.__all__)
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if getattr(value, "__module__", module.__name__) == module.__name__:
            names.add(name)
    return names


def test_backend_is_known_and_compiled_on_cpython():
    assert K.BACKEND in ("cython", "python")
    expected = os.environ.get("KAFKASTORE_EXPECT_BACKEND")
    if expected:
        assert K.BACKEND == expected
    if not PURE_MODE and platform.python_implementation() == "CPython":
        # A wheel or in-place build whose extensions failed to load must not pass as pure.
        assert K.BACKEND == "cython", (
            "KAFKASTORE_NO_EXTENSIONS is not set, yet the pure backend is live"
        )
    if PURE_MODE:
        assert K.BACKEND == "python"


def test_pure_twin_declares_all(kernel_name):
    assert hasattr(_pure(kernel_name), "__all__"), f"kafkastore._pure.{kernel_name} has no __all__"


def test_pure_public_names_exist_in_ext(kernel_name):
    pure, ext = _pure(kernel_name), _ext(kernel_name)
    missing = sorted(name for name in _public_names(pure) if not hasattr(ext, name))
    assert not missing, (
        f"in kafkastore._pure.{kernel_name} but not in kafkastore._ext.{kernel_name}: {missing}"
    )


def test_ext_public_names_exist_in_pure(kernel_name):
    pure, ext = _pure(kernel_name), _ext(kernel_name)
    missing = sorted(name for name in _public_names(ext) if not hasattr(pure, name))
    assert not missing, (
        f"in kafkastore._ext.{kernel_name} but not in kafkastore._pure.{kernel_name}: {missing}"
    )


def _parameters(obj):
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # builtins and cdef classes may not expose one
        return None
    return [(p.name, p.kind) for p in signature.parameters.values()]


def test_function_signatures_match(kernel_name):
    pure, ext = _pure(kernel_name), _ext(kernel_name)
    mismatched = []
    for name in sorted(pure.__all__):
        pure_obj, ext_obj = getattr(pure, name, None), getattr(ext, name, None)
        if not inspect.isfunction(pure_obj) or ext_obj is None:
            continue
        pure_params, ext_params = _parameters(pure_obj), _parameters(ext_obj)
        if ext_params is not None and pure_params != ext_params:
            mismatched.append(f"{name}: pure {pure_params} != compiled {ext_params}")
    assert not mismatched, "\n".join(mismatched)


def _imports(path):
    """Yield (line number, "cimport" | "import", module) for each import statement."""
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        match = IMPORT_LINE.match(line)
        if not match:
            continue
        if match["from"]:
            yield lineno, match["kind"], match["from"]
        else:
            for name in match["names"].split(","):
                yield lineno, match["plain"], name.split()[0]


def _cimport_allowed(module: str) -> bool:
    if module.split(".")[0] in ALLOWED_CIMPORT_ROOTS:
        return True
    # a sibling declaration file: kafkastore._ext.<name>, .<name> or `from . cimport <name>`
    for prefix in ("kafkastore._ext.", "."):
        if module.startswith(prefix):
            sibling = module[len(prefix) :]
            return sibling == "" or (EXT_SOURCE_DIR / f"{sibling}.pxd").is_file()
    return False


def _import_allowed(module: str) -> bool:
    if module in ("..errors", "..types"):  # relative spellings of kafkastore.errors/.types
        return True
    return any(module == ok or module.startswith(ok + ".") for ok in ALLOWED_IMPORTS)


def test_compiled_kernels_import_only_allowed_modules():
    sources = sorted(EXT_SOURCE_DIR.glob("*.pyx")) + sorted(EXT_SOURCE_DIR.glob("*.pxd"))
    sources += sorted(EXT_SOURCE_DIR.glob("*.pxi"))  # record_batch.pyx's parts
    if not sources:
        pytest.skip("kafkastore/_ext sources are not available (not run from a source checkout)")
    bad = []
    for path in sources:
        for lineno, kind, module in _imports(path):
            allowed = _cimport_allowed(module) if kind == "cimport" else _import_allowed(module)
            if not allowed:
                bad.append(f"{path.relative_to(REPO)}:{lineno}: {kind} {module}")
    assert not bad, "compiled kernels may not depend on:\n  " + "\n  ".join(bad)
