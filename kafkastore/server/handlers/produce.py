"""produce handlers (to be written)."""

HANDLERS: dict = {}
