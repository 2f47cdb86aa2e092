"""Tiers and figures of the reliability harness (tests/reliability/, docs/reliability.rst).

``KAFKASTORE_RELIABILITY_TIER`` picks how much each harness runs: ``short`` (the default,
what ``.ci/run`` runs) or ``long`` (the documented long tier). A harness asks
:func:`tiered` for its sizes and counts what it checked with :data:`FIGURES`; the counts
are printed at the end of the run and, when ``KAFKASTORE_FIGURES`` names a file, merged
into it as JSON (``{backend: {figure: count}}``), which is where the numbers in
docs/reliability.rst come from.

A figure counts checks that passed: a harness that finds a lost record or a crash fails
its test, so a run that ends green with ``crash images checked: 5,000`` had zero
violations in those 5,000.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter

TIERS = ("short", "long")
TIER = os.environ.get("KAFKASTORE_RELIABILITY_TIER", "short")
if TIER not in TIERS:
    raise RuntimeError(f"KAFKASTORE_RELIABILITY_TIER={TIER!r}: expected one of {TIERS}")


def tiered(short, long):
    """``short`` in the short tier, ``long`` in the long one."""
    return short if TIER == "short" else long


class Figures:
    """Counts of what the harness checked, by name (``"crash images checked"``)."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def save(self, path: str, backend: str) -> None:
        """Merge this run's counts into the JSON file ``path`` under ``backend``. Under a
        lock (``path.lock``): scripts/test.sh runs both backends at once, and each merges
        into the same file when it ends."""
        with open(f"{path}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(path) as f:
                    data = json.load(f)
            except (FileNotFoundError, ValueError):
                data = {}
            mine = Counter(data.get(backend, {}))
            mine.update(self.counts)
            data[backend] = dict(sorted(mine.items()))
            data.setdefault("tier", TIER)
            with open(path, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")


FIGURES = Figures()
