"""The reliability harness of issue 8: crash images, kill loops, injected faults,
corruption sweeps, resource limits and security checks.

Sizes come from :func:`_reliability.tiered` (``KAFKASTORE_RELIABILITY_TIER``); what each
test checked is counted with the ``figures`` fixture and printed after the run.
"""

from __future__ import annotations

import os

import pytest
from _reliability import FIGURES, TIER

import kafkastore


@pytest.fixture
def figures():
    """The run's :class:`_reliability.Figures`: ``figures.add("kill cycles", 1)``."""
    return FIGURES


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not FIGURES.counts:
        return
    tr = terminalreporter
    tr.section(f"reliability figures (tier {TIER}, backend {kafkastore.BACKEND})")
    width = max(len(k) for k in FIGURES.counts)
    for name, n in sorted(FIGURES.counts.items()):
        tr.write_line(f"{name:<{width}}  {n:>12,}")
    path = os.environ.get("KAFKASTORE_FIGURES")
    if path:
        FIGURES.save(path, kafkastore.BACKEND)
        tr.write_line(f"(merged into {path})")
