"""``kafkastore serve``: Kafka's wire protocol in front of a log directory.

A single-node Kafka broker over a :class:`~kafkastore.manager.LogManager`: every Kafka
client (librdkafka and confluent-kafka, kcat, kafka-python, aiokafka, the Java client)
produces to and fetches from the directory, which stays a directory Kafka itself loads.

Layout (lower never imports higher; ``pyproject.toml``'s import-linter contract):

``server``
    :class:`KafkaServer`: the lifecycle: bind (loopback unless told otherwise), one
    asyncio event loop, start / stop, in a thread of this process or as the process
    (``kafkastore serve``), SIGTERM answered by a clean shutdown.
``connection``
    One client connection: 4-byte size framing, ``socket.request.max.bytes``, requests
    answered one at a time in the order they came (Kafka mutes a channel until its
    response is sent), responses written as bytes and file regions (``sendfile``).
``handlers``
    One module per family of APIs, each a ``HANDLERS`` table ``{api_key: handler}``;
    a handler is ``async def handle(broker, header, request: dict) -> dict | None``
    (None: no response, as for a Produce with ``acks=0``).
``broker``
    :class:`~kafkastore.server.broker.Broker`: what the handlers share: the log manager,
    the server config, the topics, the append notifications long-polling fetches wait on.
``config``
    The broker's configuration (Kafka's ``server.properties`` keys and defaults) and
    ``meta.properties``.
``protocol``
    The message codec: one description of each message's fields and versions, decoded to
    and encoded from dicts keyed by Kafka's field names in snake_case.
``error_codes``
    Kafka's error codes, and the code for each of kafkastore's typed refusals.
"""

__all__ = ["KafkaServer", "ServerConfig"]


def __getattr__(name: str):
    # Imported on first use, so that ``kafkastore.server.broker`` / ``.handlers`` load
    # without the connection and the codec it needs (PEP 562).
    if name == "KafkaServer":
        from kafkastore.server.server import KafkaServer
        return KafkaServer
    if name == "ServerConfig":
        from kafkastore.server.config import ServerConfig
        return ServerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
