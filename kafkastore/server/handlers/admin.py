"""admin handlers (to be written)."""

HANDLERS: dict = {}
