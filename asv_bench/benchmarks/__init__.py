"""asv benchmarks for kafkastore, with helpers shared by every benchmark module.

Conventions (docs/development.rst, style rule 14): one class per scenario with
``params`` / ``param_names``; all data built in ``setup`` from a fixed seed (files
once, in ``setup_cache``); ``time_*`` methods contain only the measured call;
``track_*`` for sizes and ratios; ``raise NotImplementedError`` in ``setup`` skips a
combination. The peers aiokafka and kafka-python are measured side by side where they
implement the same operation.

The workloads and the code that drives each implementation live in the package,
:mod:`kafkastore.bench` (``workload``, ``log``, ``index``, ``cleaner``), so that this
suite, ``../compare_peers.py``, ``../compare_log.py``, the pytest-benchmark tests and
``kafkastore bench`` all measure exactly the same thing. They are re-exported here under
their old names. This suite therefore needs a kafkastore that has ``kafkastore.bench``:
``asv continuous`` against a commit older than it fails to import the benchmarks.
"""

from __future__ import annotations

import os

from kafkastore.bench import workload as _workload
from kafkastore.bench.workload import *  # noqa: F403  (the re-exported helpers)

__all__ = [*_workload.__all__, "skip_slow"]


def skip_slow() -> None:
    """Skip the calling benchmark (from ``setup``) when ``ASV_SKIP_SLOW`` is set.

    Use it for heavy parameter combinations, so ``ASV_SKIP_SLOW=1 asv run`` stays quick.
    """
    if os.environ.get("ASV_SKIP_SLOW", "") not in ("", "0"):
        raise NotImplementedError("skipped: ASV_SKIP_SLOW is set")

