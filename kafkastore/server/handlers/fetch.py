"""fetch handlers (to be written)."""

HANDLERS: dict = {}
