"""Where the Kafka reference vectors are: one rule for every test module.

1. ``$KAFKASTORE_VECTORS`` when set (it must then hold ``MANIFEST.json``);
2. ``../shared/vectors`` beside the repository, the project's shared copy;
3. ``tests/data/vectors``, the copy committed with the tests, so a clone on its own
   still runs every compatibility test. ``tests/test_vectors.py`` checks each file's
   sha256 against the manifest, so a stale or edited copy fails loudly.
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIGURED = os.environ.get("KAFKASTORE_VECTORS")


def find_vectors() -> Path | None:
    """The vectors directory, or None when an explicit setting points nowhere."""
    if CONFIGURED:
        path = Path(CONFIGURED)
        return path if (path / "MANIFEST.json").is_file() else None
    for path in (HERE.parent.parent / "shared" / "vectors", HERE / "data" / "vectors"):
        if (path / "MANIFEST.json").is_file():
            return path
    return None


VECTORS = find_vectors()
