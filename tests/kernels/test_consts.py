"""The Python mirror of the layout constants (kafkastore/_pure/consts.py) against the C
enum the compiled kernels use (kafkastore/_ext/consts.pxd): same names, same values,
same comments, so the two can never drift apart."""

from __future__ import annotations

import ast
import pathlib
import re

from kafkastore import _kernels
from kafkastore._pure import consts

ROOT = pathlib.Path(__file__).resolve().parents[2] / "kafkastore"
_ENTRY = re.compile(r"^\s+([A-Z][A-Z0-9_]*)\s*=\s*([^#]+?)\s*(?:#\s*(.*?))?\s*$")


def _pxd_entries() -> list[tuple[str, int, str]]:
    """``(name, value, comment)`` of every member of consts.pxd's ``cdef enum``."""
    out = []
    in_enum = False
    for line in (ROOT / "_ext" / "consts.pxd").read_text().splitlines():
        if line.startswith("cdef enum"):
            in_enum = True
            continue
        if in_enum and line and not line[0].isspace():
            in_enum = False
        match = _ENTRY.match(line) if in_enum else None
        if match:
            out.append((match[1], int(match[2], 0), match[3] or ""))
    return out


def _py_entries() -> list[tuple[str, int, str]]:
    """``(name, value, comment)`` of every module constant of _pure/consts.py."""
    out = []
    for line in (ROOT / "_pure" / "consts.py").read_text().splitlines():
        match = _ENTRY.match(" " + line)
        if match:
            out.append((match[1], ast.literal_eval(match[2]), match[3] or ""))
    return out


def test_pxd_is_parsed():
    names = [name for name, _value, _comment in _pxd_entries()]
    assert "LOG_OVERHEAD" in names and "RECORD_BATCH_OVERHEAD" in names
    assert len(names) == len(set(names)) > 20


def test_python_mirror_equals_pxd():
    assert _py_entries() == _pxd_entries()


def test_module_values_are_the_parsed_ones():
    public = {name: getattr(consts, name) for name in dir(consts) if name.isupper()}
    assert public == {name: value for name, value, _comment in _pxd_entries()}


def test_kernels_export_the_mirror_on_either_backend():
    assert _kernels.consts is consts
