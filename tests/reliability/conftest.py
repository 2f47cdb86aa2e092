"""The reliability harness of issue 8: crash images, kill loops, injected faults,
corruption sweeps, resource limits and security checks.

Sizes come from :func:`_reliability.tiered` (``KAFKASTORE_RELIABILITY_TIER``); what each
test checked is counted with the ``figures`` fixture and printed after the run (by
tests/conftest.py, which a pytest-xdist controller loads too).
"""

from __future__ import annotations

import pytest
from _reliability import FIGURES


@pytest.fixture
def figures():
    """The run's :class:`_reliability.Figures`: ``figures.add("kill cycles", 1)``."""
    return FIGURES
