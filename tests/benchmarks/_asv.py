"""The asv benchmark package (``asv_bench/benchmarks``) for the pytest-benchmark tests.

It is imported as ``_asv_benchmarks``: ``benchmarks`` would collide with this directory.
Only the standard library is needed to import it; its modules import kafkastore and the
peers themselves.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ASV_BENCHMARKS = Path(__file__).resolve().parents[2] / "asv_bench" / "benchmarks"
PACKAGE = "_asv_benchmarks"


def load(submodule: str | None = None) -> ModuleType:
    """The package, or its ``submodule`` (``"index"``, ``"cleaner"``...), imported once."""
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, ASV_BENCHMARKS / "__init__.py",
            submodule_search_locations=[str(ASV_BENCHMARKS)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[PACKAGE]
            raise
    if submodule is None:
        return sys.modules[PACKAGE]
    return importlib.import_module(f"{PACKAGE}.{submodule}")
