"""The one switch between the compiled kernels and their pure-Python twins.

Every module of kafkastore that needs a kernel imports it from here; no other
module names ``kafkastore._ext`` or ``kafkastore._pure``. ``BACKEND`` says
which set is live: ``"cython"`` or ``"python"``.

Policy (python-zstandard's, not a silent fallback): on CPython the compiled
kernels are required. If they are missing (a pure wheel, a failed build),
importing kafkastore fails with an explanation instead of running ten times
slower without telling anyone. Set ``KAFKASTORE_NO_EXTENSIONS=1`` to choose
the pure-Python kernels on purpose; other interpreters always use them.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

# The format's layout constants are plain data, the same for both backends: the compiled
# kernels read them from _ext/consts.pxd at C level, and this Python mirror (checked
# against the .pxd by tests/kernels/test_consts.py) serves everything else.
from kafkastore._pure import consts

__all__ = ["BACKEND", "NO_EXTENSIONS", "varint", "record_batch", "index_search",
           "entry_walk", "offset_map", "murmur2", "column_encode", "consts"]


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


NO_EXTENSIONS: bool = _flag("KAFKASTORE_NO_EXTENSIONS") or sys.implementation.name != "cpython"

if TYPE_CHECKING or NO_EXTENSIONS:
    from kafkastore._pure import (
        column_encode,
        entry_walk,
        index_search,
        murmur2,
        offset_map,
        record_batch,
        varint,
    )

    BACKEND = "python"
else:
    try:
        from kafkastore._ext import (
            column_encode,
            entry_walk,
            index_search,
            murmur2,
            offset_map,
            record_batch,
            varint,
        )
    except ImportError as exc:  # pragma: no cover - depends on the build
        raise ImportError(
            "kafkastore's compiled kernels are not available "
            f"({exc}). Reinstall kafkastore from a wheel or build it with a C "
            "compiler, or set KAFKASTORE_NO_EXTENSIONS=1 to use the (much "
            "slower) pure-Python kernels."
        ) from exc

    BACKEND = "cython"
