"""``__transaction_state`` records: Kafka's transaction coordinator's key and value
schemas.

(Issue 30: being written.)
"""

from __future__ import annotations

__all__ = ["parse_for_dump"]


def parse_for_dump(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """What ``kafka-dump-log.sh --transaction-log-decoder`` prints for a record: (the
    key's text, the payload's text), None for what it leaves out."""
    raise NotImplementedError("--transaction-log-decoder is not written yet")
