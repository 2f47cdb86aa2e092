"""The request handlers, one module per family of APIs.

Each module has a ``HANDLERS`` dict ``{api_key: handler}``; a handler is
``async def handle(broker, header, request) -> dict | None``: ``request`` is the decoded
body (a dict keyed by Kafka's field names in snake_case), the result the response body
(None: no response is sent, as for a Produce with ``acks=0``; a :class:`CloseConnection`:
no response, and the connection is closed with a log line giving its reason, as Kafka
does for a Produce with ``acks=0`` that failed). A handler answers every refusal Kafka
answers with an error code with that code; an exception that escapes it is logged and
answered as Kafka answers an unexpected error.
"""

from __future__ import annotations

from kafkastore.server.broker import CloseConnection
from kafkastore.server.handlers import admin, fetch, groups, offsets, produce, transactions

__all__ = ["HANDLERS", "CloseConnection"]

HANDLERS = {**admin.HANDLERS, **produce.HANDLERS, **fetch.HANDLERS, **offsets.HANDLERS,
            **groups.HANDLERS, **transactions.HANDLERS}
