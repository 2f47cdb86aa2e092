"""offsets handlers (to be written)."""

HANDLERS: dict = {}
