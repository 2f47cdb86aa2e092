"""Sphinx configuration for kafkastore.

The docs document the INSTALLED package: .ci/run builds them with the wheel installed and
from outside the source tree, so autodoc imports what users get. For a local build against
the source tree use `make docs` (python -m sphinx puts the current directory on sys.path).
"""

import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from pathlib import Path

# docs/_ext: the config_tables directive (the settings tables, built from the code's tables)
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "kafkastore"
author = "The kafkastore authors"
copyright = "The kafkastore authors"

try:
    release = _version("kafkastore")
except PackageNotFoundError:  # building from a tree where kafkastore is not installed
    release = "unknown"
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "config_tables",
]

# numpydoc-style docstrings throughout (style guide, "Docstrings").
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}

# No intersphinx: the docs build has no network. Not nitpicky: unresolved references to
# Python's own types are not worth a -W failure without intersphinx.
nitpicky = False

exclude_patterns = ["_build"]
html_theme = "alabaster"
html_title = f"kafkastore {release}"
