"""asv benchmarks for kafkastore, with helpers shared by every benchmark module.

Conventions (docs/development.rst, style rule 14): one class per scenario with
``params`` / ``param_names``; all data built in ``setup`` from a fixed seed (files
once, in ``setup_cache``); ``time_*`` methods contain only the measured call;
``track_*`` for sizes and ratios; ``raise NotImplementedError`` in ``setup`` skips a
combination. The peers aiokafka and kafka-python are measured side by side where they
implement the same operation.
"""

from __future__ import annotations

import os
import random

__all__ = ["make_records", "skip_slow"]


def make_records(
    n: int, key_size: int = 16, value_size: int = 100, seed: int = 0
) -> list[tuple[bytes, bytes]]:
    """Return ``n`` ``(key, value)`` pairs of random bytes, the same for the same arguments.

    Parameters
    ----------
    n
        Number of records.
    key_size, value_size
        Length in bytes of every key and every value.
    seed
        Seed of the private random generator; the global one is left alone.
    """
    rng = random.Random(seed)
    return [(rng.randbytes(key_size), rng.randbytes(value_size)) for _ in range(n)]


def skip_slow() -> None:
    """Skip the calling benchmark (from ``setup``) when ``ASV_SKIP_SLOW`` is set.

    Use it for heavy parameter combinations, so ``ASV_SKIP_SLOW=1 asv run`` stays quick.
    """
    if os.environ.get("ASV_SKIP_SLOW", "") not in ("", "0"):
        raise NotImplementedError("skipped: ASV_SKIP_SLOW is set")
