"""The column pool API of :func:`~kafkastore._pure.record_columns.decode_columns`.

The compiled kernel keeps the pages of large freed column buffers for reuse,
up to a bound; the pure twin allocates with numpy every time and only keeps
the bound, so that both expose the same API and argument checks.

Thread safety: the bound is one module global, set by whole-value assignment.
"""

from __future__ import annotations

__all__ = ["set_column_pool_limit"]

_pool_limit = 256 * 1024 * 1024


def set_column_pool_limit(limit):
    """Bound the memory :func:`decode_columns` keeps for reuse; return the old bound.

    The compiled kernel reuses the pages of large freed column buffers; the
    pure twin allocates with numpy every time and only records the bound.
    """
    global _pool_limit
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"pool limit must be a non-negative int, not {limit!r}")
    old, _pool_limit = _pool_limit, limit
    return old


def _column_pool_retained():
    """Bytes of written pages the pool holds (for tests): none in the pure twin."""
    return 0
