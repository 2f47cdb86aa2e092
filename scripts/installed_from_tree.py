"""Whether the kafkastore installed in this Python was built from a given source tree.

    python scripts/installed_from_tree.py REPO [--compiled] [--extras a,b] [--requirements FILE]

Exit 0 when it was, 1 (the reason on stderr) when it was not or cannot be told. With
``--requirements FILE``, also writes the requirements of ``--extras`` (from the installed
metadata, markers kept) to FILE, one a line, for ``pip install -r``: what the extras need
without rebuilding kafkastore. scripts/test.sh uses it to reuse the build that the
README's first command (``pip install .`` into ``.venv``) made; stdlib only, so it runs
in any venv.

"Built from this tree" is decided cheaply and errs towards "no" (a rebuild, which is
what test.sh always did before):

* installed from this directory, not editable (pip's ``direct_url.json``), with the
  version pyproject.toml names;
* every Python file the wheel carries (``.py``, ``.pyi``, ``.pxd``, ``py.typed`` of the
  packages pyproject.toml lists) has the hash the wheel's ``RECORD`` gives, and the tree
  has no such file the wheel lacks, nor the wheel one the tree lacks;
* the compiled kernels (``--compiled``: the compiled backend is asked for) are installed,
  one per ``.pyx``, and no kernel source (``.pyx``, ``.pxi``, ``.pxd``, ``csrc/``) nor
  ``setup.py`` or ``pyproject.toml`` changed after the install (file times against the
  time pip wrote ``RECORD``: a kernel's source is not in the wheel to hash, and a
  checkout or an edit sets the time).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

SHIPPED_SUFFIXES = (".py", ".pyi", ".pxd")
KERNEL_SUFFIXES = (".pyx", ".pxi", ".pxd")


def _project(repo: Path) -> tuple[str, list[str]]:
    """pyproject.toml's version and setuptools package list."""
    try:
        import tomllib
    except ImportError:     # Python 3.10
        import tomli as tomllib   # noqa: F401 (raises ImportError: then "cannot tell")
    with open(repo / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    return data["project"]["version"], list(data["tool"]["setuptools"]["packages"])


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _shipped(repo: Path, packages: list[str]) -> dict[str, Path]:
    """The tree's files that a wheel of it carries as they are, by wheel path."""
    out = {}
    for pkg in packages:
        d = repo.joinpath(*pkg.split("."))
        if not d.is_dir():
            continue
        for f in d.iterdir():
            if f.is_file() and (f.suffix in SHIPPED_SUFFIXES or f.name == "py.typed"):
                out[f"{pkg.replace('.', '/')}/{f.name}"] = f
    return out


def check(repo: Path, dist: metadata.Distribution, compiled: bool) -> str | None:
    """None when ``dist`` was built from ``repo``; otherwise why not."""
    repo = repo.resolve()
    try:
        version, packages = _project(repo)
    except (ImportError, OSError, KeyError, ValueError) as exc:
        return f"cannot read pyproject.toml's version and packages ({exc})"
    if dist.version != version:
        return f"installed version {dist.version}, the tree's is {version}"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        direct = None
    if not direct or "dir_info" not in direct:
        return "not installed from a directory (no direct_url.json dir_info)"
    if direct["dir_info"].get("editable"):
        return "an editable install (imports the source tree, not an installed build)"
    url = urlsplit(direct.get("url", ""))
    if url.scheme != "file" or Path(unquote(url.path)).resolve() != repo:
        return f"installed from {direct.get('url')}, not from {repo.as_uri()}"
    record_text = dist.read_text("RECORD")
    if not record_text:
        return "the install has no RECORD"
    record = {}
    for line in record_text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3:
            record[parts[0]] = parts[1]
    tops = {p.split(".")[0] for p in packages}
    installed = {name for name in record
                 if name.split("/")[0] in tops and "__pycache__" not in name
                 and (name.endswith(SHIPPED_SUFFIXES) or name.endswith("/py.typed"))}
    tree = _shipped(repo, packages)
    if set(tree) != installed:
        diff = sorted(set(tree) ^ installed)
        return f"the tree's and the install's files differ: {', '.join(diff[:5])}"
    for name, path in tree.items():
        if record[name] != _record_hash(path):
            return f"{name} changed since the install"
    if compiled:
        record_file = next((Path(dist.locate_file(f)) for f in dist.files or ()
                            if f.name == "RECORD" and f.parent.name.endswith(".dist-info")),
                           None)
        if record_file is None or not record_file.exists():
            return "cannot find the install's RECORD file"
        installed_at = record_file.stat().st_mtime
        kernels = [p for p in repo.joinpath("kafkastore").rglob("*.pyx")]
        for pyx in kernels:
            stem = pyx.relative_to(repo).with_suffix("").as_posix()
            if not any(n.startswith(stem + ".") and n.endswith((".so", ".pyd"))
                       for n in record):
                return f"no compiled {stem} installed (a pure build?)"
        sources = [p for p in repo.joinpath("kafkastore").rglob("*")
                   if p.suffix in KERNEL_SUFFIXES]
        csrc = repo / "csrc"
        sources += [p for p in csrc.rglob("*") if p.is_file()] if csrc.is_dir() else []
        sources += [repo / "setup.py", repo / "pyproject.toml"]
        for src in sources:
            if src.exists() and src.stat().st_mtime > installed_at:
                return f"{src.relative_to(repo)} changed since the install"
    return None


_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def extra_requirements(dist: metadata.Distribution, extras: list[str]) -> list[str]:
    """The installed metadata's requirements of ``extras``, their ``extra`` clause
    dropped and any other marker kept."""
    out = []
    for req in dist.requires or ():
        spec, _, marker = req.partition(";")
        names = _EXTRA.findall(marker)
        if not names or not set(names) & set(extras):
            continue
        rest = _EXTRA.sub("", marker)
        rest = re.sub(r"^\s*and\s+|\s+and\s*$|\(\s*\)", "", rest.strip()).strip()
        out.append(f"{spec.strip()}; {rest}" if rest else spec.strip())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path)
    ap.add_argument("--compiled", action="store_true",
                    help="the compiled kernels must be installed and current")
    ap.add_argument("--extras", default="")
    ap.add_argument("--requirements", type=Path)
    args = ap.parse_args(argv)
    try:
        dist = metadata.distribution("kafkastore")
    except metadata.PackageNotFoundError:
        print("kafkastore is not installed", file=sys.stderr)
        return 1
    why = check(args.repo, dist, args.compiled)
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    if args.requirements is not None:
        extras = [e.strip() for e in args.extras.split(",") if e.strip()]
        args.requirements.write_text("".join(r + "\n" for r in
                                             extra_requirements(dist, extras)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
