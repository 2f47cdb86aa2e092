"""scripts/installed_from_tree.py: when scripts/test.sh may keep the kafkastore a venv
already holds (the README's first command built it) instead of compiling it again.

Each test lays out a small source tree and an install of it as pip leaves one (a
``.dist-info`` with ``RECORD``, ``direct_url.json`` and ``METADATA``), then changes one
thing a rebuild must follow; the hashes in ``RECORD`` are computed here, with hashlib, as
pip writes them.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
from importlib import metadata
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "installed_from_tree.py"
_spec = importlib.util.spec_from_file_location("installed_from_tree", SCRIPT)
itree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(itree)

PYPROJECT = """\
[project]
name = "kafkastore"
version = "0.1.0"

[tool.setuptools]
packages = ["kafkastore", "kafkastore._ext", "pyspark_kafkastore"]
"""
METADATA = """\
Metadata-Version: 2.4
Name: kafkastore
Version: {version}
Requires-Dist: numpy>=1.24
Requires-Dist: pytest>=8; extra == "test"
Requires-Dist: tomli; python_version < "3.11" and extra == "test"
Requires-Dist: pyspark[connect]>=4.2; extra == "connect"
Requires-Dist: pyarrow>=18; extra == "spark"

"""
TREE = {
    "kafkastore/__init__.py": "VERSION = 1\n",
    "kafkastore/py.typed": "",
    "kafkastore/log.py": "def append(): pass\n",
    "kafkastore/_ext/__init__.py": "",
    "kafkastore/_ext/varint.pyx": "cdef int x = 1\n",
    "kafkastore/_ext/varint.pxd": "cdef int x\n",
    "kafkastore/_ext/varint.pyi": "x: int\n",
    "kafkastore/_ext/varint.c": "/* generated */\n",        # never shipped
    "pyspark_kafkastore/__init__.py": "",
    "csrc/ks.h": "#define KS 1\n",
    "setup.py": "from setuptools import setup; setup()\n",
}


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def _install(repo: Path, site: Path, *, version="0.1.0", editable=False, url=None,
             compiled=True) -> metadata.Distribution:
    """What `pip install <repo>` leaves in ``site``: the shipped files, a compiled kernel,
    the dist-info."""
    rows = []
    for name in TREE:
        src = repo / name
        if not name.startswith(("kafkastore/", "pyspark_kafkastore/")) or name.endswith(
                (".pyx", ".c")):
            continue
        dst = site / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(src.read_bytes())
        rows.append(f"{name},{_hash(src.read_bytes())},{src.stat().st_size}")
    if compiled:
        elf = b"\x7fELF"
        so = site / "kafkastore/_ext/varint.cpython-311-x86_64-linux-gnu.so"
        so.write_bytes(elf)
        rows.append(f"kafkastore/_ext/varint.cpython-311-x86_64-linux-gnu.so,{_hash(elf)},4")
    info = site / "kafkastore-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(METADATA.format(version=version))
    (info / "direct_url.json").write_text(json.dumps(
        {"url": url or repo.resolve().as_uri(), "dir_info": {"editable": editable}}))
    rows += ["kafkastore-0.1.0.dist-info/METADATA,,", "kafkastore-0.1.0.dist-info/RECORD,,",
             "kafkastore-0.1.0.dist-info/direct_url.json,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return metadata.PathDistribution(info)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    for name, text in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "pyproject.toml").write_text(PYPROJECT)
    # the sources are older than the install (a clone, then `pip install .`)
    old = os.stat(root / "setup.py").st_mtime - 60
    for p in root.rglob("*"):
        os.utime(p, (old, old))
    return root


@pytest.fixture
def site(tmp_path):
    return tmp_path / "site"


def test_the_build_of_this_tree_is_reused(repo, site):
    dist = _install(repo, site)
    assert itree.check(repo, dist, compiled=True) is None


def test_a_changed_module_is_rebuilt(repo, site):
    dist = _install(repo, site)
    (repo / "kafkastore/log.py").write_text("def append(): return 1\n")
    assert "kafkastore/log.py changed" in itree.check(repo, dist, compiled=False)


@pytest.mark.parametrize("change", ["add", "remove"])
def test_a_module_added_or_removed_is_rebuilt(repo, site, change):
    dist = _install(repo, site)
    if change == "add":
        (repo / "kafkastore/retention.py").write_text("\n")
    else:
        (repo / "kafkastore/log.py").unlink()
    assert "files differ" in itree.check(repo, dist, compiled=False)


@pytest.mark.parametrize("source", ["kafkastore/_ext/varint.pyx", "csrc/ks.h", "setup.py",
                                    "pyproject.toml"])
def test_a_kernel_source_changed_after_the_install_is_rebuilt(repo, site, source):
    dist = _install(repo, site)
    later = (site / "kafkastore-0.1.0.dist-info/RECORD").stat().st_mtime + 5
    os.utime(repo / source, (later, later))
    assert f"{source} changed since the install" in itree.check(repo, dist, compiled=True)
    # the pure backend alone does not need the kernels current
    assert itree.check(repo, dist, compiled=False) is None


def test_a_pure_build_serves_only_the_pure_backend(repo, site):
    dist = _install(repo, site, compiled=False)
    assert "no compiled kafkastore/_ext/varint" in itree.check(repo, dist, compiled=True)
    assert itree.check(repo, dist, compiled=False) is None


@pytest.mark.parametrize("kind, words", [
    ({"editable": True}, "editable"),
    ({"url": "file:///elsewhere/kafkastore"}, "installed from file:///elsewhere"),
    ({"version": "0.0.9"}, "installed version 0.0.9"),
])
def test_another_install_is_rebuilt(repo, site, kind, words):
    dist = _install(repo, site, **kind)
    assert words in itree.check(repo, dist, compiled=False)


def test_only_the_extras_requirements_are_installed(repo, site):
    dist = _install(repo, site)
    assert itree.extra_requirements(dist, ["test", "connect"]) == [
        "pytest>=8", 'tomli; python_version < "3.11"', "pyspark[connect]>=4.2"]
    assert itree.extra_requirements(dist, []) == []
