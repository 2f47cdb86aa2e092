"""Every package of the source tree is in the wheel.

pyproject.toml lists the packages explicitly (so tests/ and asv_bench/ never end up in
the wheel); a new package missing from that list builds a wheel without it, and only a
test against the installed wheel notices. This compares the list with the tree.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_under_kafkastore_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    in_tree = {".".join(init.parent.relative_to(ROOT).parts)
               for init in (ROOT / "kafkastore").rglob("__init__.py")
               if "__pycache__" not in init.parts}
    assert in_tree, "no package found under kafkastore/"
    assert in_tree - listed == set(), "packages missing from [tool.setuptools] packages"
