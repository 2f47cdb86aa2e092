"""KafkaServer: the lifecycle of ``kafkastore serve``.

::

    server = KafkaServer(log_dir, config={"num.partitions": 3}, host="127.0.0.1", port=0)
    server.start()      # own thread and event loop; returns once bound
    server.bootstrap_servers        # "127.0.0.1:PORT"
    server.stop()       # in-flight requests answered, connections closed, logs closed

    with KafkaServer(log_dir) as server: ...

    KafkaServer(log_dir).serve()    # in this thread until SIGTERM / SIGINT (the CLI)

Starting: the address is checked (loopback only unless ``allow_non_loopback``: there is
no TLS, SASL or ACL here), ``meta.properties`` read or created
(:func:`~kafkastore.server.config.ensure_meta_properties`), the
:class:`~kafkastore.manager.LogManager` opened over the log directory with the broker's
``log.*`` defaults and the topic config overrides clients set before (kept in
``kafkastore-topic-configs.json``: :class:`~kafkastore.server.config.TopicConfigFile`),
its background tasks started, then the listener bound.

Stopping (``stop()``, SIGTERM, SIGINT): the listener closes (no new connections), idle
connections close at once, a request parked in the broker is answered at once (a fetch
waiting for appends with what the log holds, a JoinGroup or SyncGroup waiting for a
rebalance with NOT_COORDINATOR), a connection with a request in flight closes once its
response is written (waiting at most ``shutdown_timeout_s``), then the manager closes
(logs flushed, checkpoints and the clean-shutdown marker written, locks released).

Event loop: ``event_loop="asyncio"`` (the default) or ``"uvloop"`` (needs the uvloop
package; ``kafkastore serve --event-loop uvloop``). Measured with confluent-kafka on the
project's shared 2-core machine (300,000 records of 100 bytes, 3 runs each), uvloop did
not pay enough to be the default or a dependency: produce 262k-322k records/s on asyncio,
233k-338k on uvloop; fetch 540k-965k and 419k-1,000k (the spread is the shared machine);
a 1-record ``acks=all`` produce p50 0.18 ms on both, p99 0.3-4.6 ms on asyncio and
0.26-0.36 ms on uvloop. The handlers' Python, not the loop, is the cost.

Thread-safety: start / stop / close from any one thread; the broker and connections live
on the server's loop only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import socket
import threading
from collections.abc import Mapping

from kafkastore.config import ConfigError
from kafkastore.manager import LogManager
from kafkastore.server.broker import Broker
from kafkastore.server.config import ServerConfig, TopicConfigFile, ensure_meta_properties
from kafkastore.server.connection import Connection, FrameStream
from kafkastore.server.group_coordinator import GroupCoordinator
from kafkastore.server.transaction_coordinator import TransactionCoordinator

__all__ = ["KafkaServer"]

_log = logging.getLogger("kafkastore.server")


def is_loopback(host: str) -> bool:
    """True for a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: Loop iterations an accept in flight takes to make its transport and call
#: ``connection_made`` (asyncio's ``_accept_connection2``: a task, the transport's
#: scheduled callbacks, the protocol's close): waited at shutdown, between no longer
#: accepting and closing the server.
_ACCEPTS_SETTLE_ITERATIONS = 8


class KafkaServer:
    """A single-node Kafka broker over ``log_dir`` (see the module docstring).

    Parameters
    ----------
    log_dir
        The log directory (created if missing).
    config
        A :class:`ServerConfig` or Kafka broker keys (``server.properties`` names).
    host, port
        Where to listen; ``port=0`` picks a free port (:attr:`port` says which). A
        ``listeners`` key in ``config`` is used when these are not given.
    allow_non_loopback
        Bind an address other than loopback (refused otherwise: ConfigError).
    event_loop
        ``"asyncio"`` or ``"uvloop"``.
    shutdown_timeout_s
        How long a stop waits for in-flight requests.
    """

    def __init__(self, log_dir: str | os.PathLike[str],
                 config: ServerConfig | Mapping[str, object] | None = None, *,
                 host: str | None = None, port: int | None = None,
                 allow_non_loopback: bool = False, event_loop: str = "asyncio",
                 shutdown_timeout_s: float = 10.0) -> None:
        self.log_dir = os.path.abspath(os.fspath(log_dir))
        self.config = config if isinstance(config, ServerConfig) else ServerConfig(config)
        listener = self.config.listener()
        self.host = host if host is not None else (listener[0] if listener else "127.0.0.1")
        self.port = port if port is not None else (listener[1] if listener else 9092)
        if not allow_non_loopback and not is_loopback(self.host):
            raise ConfigError(
                f"Refusing to listen on {self.host}: it is not a loopback address, and "
                "kafkastore serve has no TLS, SASL or ACLs (anyone who reaches the port "
                "reads and writes every topic). Pass allow_non_loopback=True "
                "(--allow-non-loopback) to bind it anyway.", key="listeners", value=self.host)
        if event_loop not in ("asyncio", "uvloop"):
            raise ConfigError(f"Unknown event loop {event_loop!r}: asyncio or uvloop",
                              key="event_loop", value=event_loop)
        self.event_loop = event_loop
        self.shutdown_timeout_s = shutdown_timeout_s
        self.manager: LogManager | None = None
        self.broker: Broker | None = None
        self.connections: set[Connection] = set()
        # every accepted connection's stream until its socket is closed, and whether
        # the shutdown has begun (a connection accepted from then on is closed at once)
        self._streams: set[FrameStream] = set()
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def bootstrap_servers(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    # -- opening ----------------------------------------------------------------------
    def _open_manager(self) -> None:
        cfg = self.config
        meta = ensure_meta_properties(self.log_dir, int(cfg["node.id"]))  # type: ignore[arg-type]
        # the overrides clients set survive restarts in a file beside meta.properties
        # (Kafka keeps them in its metadata log)
        config_file = TopicConfigFile(self.log_dir)
        overrides = config_file.read()
        self.manager = LogManager(self.log_dir, cfg.log_defaults(), topic_configs=overrides,
                                  manager_config=cfg.manager_config(),
                                  cleaner_config=cfg.cleaner_config(), meta=meta)
        try:
            self.broker = Broker(self.manager, cfg, host=self.host, port=self.port,
                                 cluster_id=meta.cluster_id, topic_config_file=config_file,
                                 topic_overrides=overrides)
        except BaseException:
            self._close_manager()
            raise

    async def _bind(self) -> None:
        self._stopped = asyncio.Event()
        assert self.broker is not None
        # the coordinators load their state before the first request can arrive
        # (Kafka's coordinators answer COORDINATOR_LOAD_IN_PROGRESS meanwhile; here
        # nothing is listening yet)
        broker = self.broker
        broker.group_coordinator = GroupCoordinator(broker)
        broker.txn_coordinator = TransactionCoordinator(broker)
        await broker.group_coordinator.start()
        await broker.txn_coordinator.start()
        max_bytes = int(self.config["socket.request.max.bytes"])  # type: ignore[arg-type]
        self._idle_s = int(self.config["connections.max.idle.ms"]) / 1000  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: FrameStream(max_bytes, self._accept), self.host, self.port,
            reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        assert self.broker is not None
        self.broker.port = self.port
        advertised = self.config.advertised_listener()
        if advertised is not None:
            self.broker.advertised_host, self.broker.advertised_port = advertised
        elif self.host in ("0.0.0.0", "::"):
            # Kafka advertises the canonical host name for a wildcard listener
            self.broker.advertised_host = socket.getfqdn()

    def _accept(self, stream: FrameStream) -> None:
        """A client connected: its connection runs in a task of its own."""
        assert self.broker is not None
        self._streams.add(stream)
        stream.closed.add_done_callback(lambda _f: self._streams.discard(stream))
        if self._closing:
            # accepted in the last moments before the listening socket closed
            stream.close()
            return
        conn = Connection(self.broker, stream, idle_s=self._idle_s)
        self.connections.add(conn)
        conn.task = asyncio.get_running_loop().create_task(conn.run())
        conn.task.add_done_callback(lambda _task: self._connection_done(conn))

    def _connection_done(self, conn: Connection) -> None:
        self.connections.discard(conn)
        # (a task cancelled before it ran never reached its own close of the stream)
        conn.stream.close()

    # -- closing ----------------------------------------------------------------------
    async def _shutdown(self) -> None:
        self._closing = True
        if self._server is not None:
            # stop accepting first, then let the accepts in flight make their transports
            # (closed by _accept, as _closing is set), and only then close the server:
            # asyncio's Server.close() under an accept in flight leaves that connection's
            # socket and transport half made and never closed (_accept_connection2 fails
            # in the transport's Server._attach, whose server has no sockets any more)
            loop = asyncio.get_running_loop()
            for sock in self._server.sockets:
                try:
                    loop.remove_reader(sock.fileno())
                except (NotImplementedError, RuntimeError, ValueError):
                    pass   # a loop that accepts otherwise (uvloop): closed as it is
            for _ in range(_ACCEPTS_SETTLE_ITERATIONS):
                await asyncio.sleep(0)
            self._server.close()    # no new connections
        for conn in list(self.connections):
            conn.request_stop()
        if self.broker is not None:
            # answer the requests parked in the broker (fetches waiting for appends,
            # joins and syncs waiting for a rebalance) now: otherwise each would hold
            # its connection, and so the stop, until its own deadline
            self.broker.stop_waits()
            self._close_coordinators()
        tasks = [c.task for c in self.connections if c.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.shutdown_timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        if self._server is not None:
            await self._server.wait_closed()
        # a transport closes its socket in a callback of a later loop iteration: wait for
        # every one, or the loop stops first and the socket is left to the garbage
        # collector (an unclosed socket, a ResourceWarning, a file descriptor held)
        for stream in list(self._streams):
            stream.close()
        if self._streams:
            await asyncio.wait([s.closed for s in self._streams], timeout=1.0)

    def _close_coordinators(self) -> None:
        assert self.broker is not None
        for coordinator in (self.broker.txn_coordinator, self.broker.group_coordinator):
            if coordinator is not None:
                coordinator.close()

    def _close_manager(self) -> None:
        if self.manager is not None:
            self.manager.close()

    def _new_loop(self) -> asyncio.AbstractEventLoop:
        if self.event_loop == "uvloop":
            import uvloop   # optional: only with event_loop="uvloop"
            return uvloop.new_event_loop()
        return asyncio.new_event_loop()

    # -- in a thread ------------------------------------------------------------------
    def start(self) -> KafkaServer:
        """Open the logs, bind, and serve in a thread of this process; returns once bound
        (raises what the open or the bind raised)."""
        with self._lock:
            if self._thread is not None or self._closed:
                raise RuntimeError("KafkaServer.start: already started")
            self._open_manager()
            loop = self._loop = self._new_loop()
            try:
                loop.run_until_complete(self._bind())
            except BaseException:
                loop.close()
                self._close_manager()
                raise
            self._thread = threading.Thread(target=self._run_thread, name="kafkastore-serve",
                                            daemon=True)
            self._thread.start()
            _log.info("kafkastore serve: listening on %s (log dir %s)",
                      self.bootstrap_servers, self.log_dir)
        return self

    def _run_thread(self) -> None:
        loop = self._loop
        assert loop is not None and self._stopped is not None
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._stopped.wait())

    def stop(self) -> None:
        """Answer the requests in flight, close the connections and the logs.
        Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
            try:
                if loop is not None and thread is not None:
                    future = asyncio.run_coroutine_threadsafe(self._stop_on_loop(), loop)
                    future.result(self.shutdown_timeout_s + 5)
                    thread.join(self.shutdown_timeout_s + 5)
                    loop.close()
            finally:
                self._close_manager()

    async def _stop_on_loop(self) -> None:
        await self._shutdown()
        assert self._stopped is not None
        self._stopped.set()

    close = stop

    def __enter__(self) -> KafkaServer:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- as the process -----------------------------------------------------------------
    def serve(self, on_listening=None) -> int:
        """Serve in this thread until SIGTERM or SIGINT, then shut down cleanly; returns
        the exit code (0). ``on_listening(server)`` is called once bound."""
        with self._lock:
            if self._thread is not None or self._closed:
                raise RuntimeError("KafkaServer.serve: already started")
            self._closed = True
        self._open_manager()
        loop = self._loop = self._new_loop()
        try:
            loop.run_until_complete(self._bind())
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stopped.set)  # type: ignore[union-attr]
            if on_listening is not None:
                on_listening(self)
            loop.run_until_complete(self._stopped.wait())  # type: ignore[union-attr]
            _log.info("kafkastore serve: shutting down")
            loop.run_until_complete(self._shutdown())
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            loop.close()
            self._close_manager()
        return 0

    def __repr__(self) -> str:
        return f"KafkaServer({self.log_dir!r}, {self.bootstrap_servers})"
