"""One client connection: Kafka's framing, one request at a time, responses in order.

Why a ``BufferedProtocol`` (:class:`FrameStream`), not asyncio's streams: a produce
request's bytes are received straight into the buffer the request is read from
(``recv_into``), and that buffer is reused for the connection's next large request.
``StreamReader.readexactly`` copied each request twice into freshly allocated memory
(its buffer, then a ``bytes``), and the page faults of that fresh memory were a third of
the server's CPU in a produce of a million records (measured with ``perf``: 19,000 page
faults, 669 with the buffers reused; the server's CPU for the produce fell from 0.32 to
0.19 s). What streams gave is kept: a declared size is never allocated up front (the
buffer grows with what arrives), a client that sends requests without reading its
answers is stopped by the socket's buffers (reading pauses while a request waits), and
``drain`` is the transport's flow control.

The loop, per connection (Kafka's ``SocketServer.Processor`` and ``NetworkReceive``):

* read the 4-byte size; a negative size or one above ``socket.request.max.bytes`` is
  logged and the connection closed (Kafka's ``InvalidReceiveException``); a client that
  sends nothing for ``connections.max.idle.ms`` is closed too, as is one whose response
  makes no progress for that long;
* read the frame, the request header (:func:`protocol.read_request_header`); a frame that
  does not decode is logged and the connection closed, as Kafka's
  ``processCompletedReceives`` closes the channel on a request it cannot parse;
* an ApiVersions request of a version the server does not speak is answered with the v0
  response, ``UNSUPPORTED_VERSION`` and the server's ranges (Kafka's
  ``RequestContext.parseRequest`` / ``ApiVersionsRequest.getErrorResponse``), so a newer
  client learns what to speak; any other unknown API key or version closes the
  connection with a log line (Kafka does);
* the handler (:data:`kafkastore.server.handlers.HANDLERS`) runs; the next request is not
  read until its response is written (Kafka mutes a channel while a request is in flight,
  which is what keeps a connection's responses in the order of its requests); a handler
  that returns :class:`~kafkastore.server.broker.CloseConnection` (a Produce with
  ``acks=0`` that failed) has the connection closed with a log line, no response;
* an exception escaping a handler is logged with its traceback and answered, as Kafka's
  ``RequestHandlerHelper.handleError``, with ``UNKNOWN_SERVER_ERROR`` where the response
  has a top-level ``error_code`` at that version (ApiVersions, InitProducerId,
  DescribeCluster, Fetch v7+); for the other APIs (whose codes are per topic or
  partition) the connection is closed with the log line, so the client retries on a new
  connection instead of reading a made-up answer;
* the response pieces are written in order: bytes with ``transport.write``, a
  :class:`protocol.FileRegion` with ``loop.sendfile`` (a ``pread`` loop where the event
  loop has no ``sendfile``, as uvloop), each region closed once sent or abandoned.

A connection's failure never touches another's: each runs in its own task and every
exception ends in that task.

Thread-safety: a Connection lives on the server's event loop; only :meth:`request_stop`
and the attributes are used from elsewhere, on that loop too.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os

from kafkastore.errors import InvalidRequestError, UnsupportedVersionError
import kafkastore.server.protocol as protocol
from kafkastore.server.broker import CLIENT_ADDRESS, Broker
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.handlers import HANDLERS, CloseConnection, admin

__all__ = ["Connection", "FrameStream"]

_log = logging.getLogger("kafkastore.server")

_API_VERSIONS = 18
#: API key -> the first version whose response has a top-level error_code (the answer to
#: a handler's unexpected exception; see the module docstring).
_TOP_LEVEL_ERROR_SINCE = {18: 0, 22: 0, 60: 0, 1: 7}
_PREAD_CHUNK = 1 << 20
#: The scratch buffer of a connection's reads between requests (sizes, small requests).
_SCRATCH = 1 << 16
#: What is allocated first for a request larger than what has arrived of it.
_FIRST_ALLOCATION = 1 << 20
#: A connection keeps up to this many request buffers for its next requests (one being
#: answered, one received meanwhile), each up to _POOL_MAX_BYTES: a buffer the kernel has
#: written once costs no page faults the next time, where a fresh one costs one a page.
_POOL = 2
_POOL_MAX_BYTES = 8 << 20


class _BadSize(Exception):
    """A request's 4-byte size is negative or above ``socket.request.max.bytes``."""


class _Idle(Exception):
    """Nothing arrived for ``connections.max.idle.ms``."""


class _Truncated(Exception):
    """The client closed in the middle of a request: (what, bytes got, bytes expected)."""


def _grow(buffer: bytearray, capacity: int) -> None:
    """Make ``buffer`` at least ``capacity`` bytes long, in place."""
    if len(buffer) < capacity:
        buffer.extend(bytes(capacity - len(buffer)))


class FrameStream(asyncio.BufferedProtocol):
    """A connection's transport, read as Kafka's frames, written with flow control.

    Reading (Kafka's ``NetworkReceive``): a request's bytes are received straight into
    the buffer of that request (``recv_into``), so each byte is copied once, from the
    kernel (asyncio's streams copied each request twice more, into fresh memory). The buffer grows with what arrives (1 MiB first, then
    doubling up to the declared size), so a declared size is never allocated up front.
    Once its request is answered, the buffer comes back (:meth:`recycle`) and receives
    the next large request: up to ``_POOL`` buffers of up to ``_POOL_MAX_BYTES`` are kept
    a connection (one answered, one arriving). A buffer that something still views (a
    ``memoryview`` of the request kept past its answer) refuses to change size; that is
    the test, and such a buffer is left to its holder, never written again.
    The 4-byte sizes, small requests and whatever follows a request arrive in a 64 KiB
    scratch buffer and are copied out of it. A request received while the one before is
    being answered is kept, and the transport paused until the connection takes it:
    Kafka mutes a channel while a request is in flight, so a client that sends requests
    without reading the answers is stopped by the socket's buffers, not the server's
    memory.

    Writing: :meth:`write` hands bytes to the transport; :meth:`drain` waits while the
    transport's buffer is above its high-water mark (its ``pause_writing`` /
    ``resume_writing``), as ``StreamWriter.drain``; ``transport`` is what
    ``loop.sendfile`` takes.

    Thread-safety: on the server's event loop only.
    """

    def __init__(self, max_request_bytes: int, on_connected) -> None:
        self.max_request_bytes = max_request_bytes
        self._on_connected = on_connected
        self.transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._scratch = bytearray(_SCRATCH)
        self._pending = bytearray()      # received, not yet part of a request's buffer
        self._frame: bytearray | None = None   # the request being received, ...
        self._filled = 0                 # ... how much of it has arrived ...
        self._size = 0                   # ... and its declared size
        self._frames: collections.deque = collections.deque()   # received, not taken
        self._error: Exception | None = None   # a bad size: nothing more is read
        self._eof = False
        self._lost: Exception | None = None
        self._waiter: asyncio.Future | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_activity = 0.0
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future] = []
        self._free: list[bytearray] = []   # request buffers to reuse (_POOL at most)
        #: done once the connection is lost (its socket closed)
        self.closed: asyncio.Future = self._loop.create_future()

    # -- asyncio's callbacks ----------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self._on_connected(self)

    def get_buffer(self, sizehint: int):
        frame = self._frame
        if frame is None:
            return self._scratch
        if self._filled == len(frame):
            # more of this request has arrived than was allocated: double, up to its
            # size (in place: nothing holds a view of a request still arriving)
            _grow(frame, min(self._size, 2 * len(frame)))
        # (up to the request's end: what follows is the next request's, read apart)
        return memoryview(frame)[self._filled:self._size]

    def buffer_updated(self, nbytes: int) -> None:
        self._last_activity = self._loop.time()
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == self._size:
                frame, self._frame = self._frame, None
                self._deliver((frame, self._size))
            return
        with memoryview(self._scratch) as view:
            self._pending += view[:nbytes]
        self._split()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return True   # keep the transport open: the answers to what was sent still go out

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._eof = True
        self._lost = exc or ConnectionResetError("the connection closed")
        self._wake()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionResetError("the connection closed"))
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- framing ----------------------------------------------------------------------
    def _split(self) -> None:
        """Cut the requests out of what arrived in the scratch buffer."""
        pending = self._pending
        while self._error is None and len(pending) >= 4:
            size = int.from_bytes(pending[:4], "big", signed=True)
            if size < 0 or size > self.max_request_bytes:
                self._error = _BadSize(size)
                self._pause()
                self._wake()
                return
            have = len(pending) - 4
            with memoryview(pending) as view:
                if have >= size:
                    frame = view[4:4 + size].tobytes()
                else:
                    # the rest of this request goes straight into its own buffer
                    frame = self._take_buffer(min(size, max(_FIRST_ALLOCATION, have)))
                    frame[:have] = view[4:]
            if have >= size:
                del pending[:4 + size]
                self._deliver((frame, size))
            else:
                pending.clear()
                self._frame, self._filled, self._size = frame, have, size
                return

    def _take_buffer(self, capacity: int) -> bytearray:
        """A request buffer of at least ``capacity`` bytes: a kept one, or a new one."""
        if not self._free:
            return bytearray(capacity)
        buffer = self._free.pop()
        _grow(buffer, capacity)
        return buffer

    def recycle(self, frame) -> None:
        """Take back a request's buffer once its request is answered. It is kept for the
        next request only when nothing holds a view of it any more: a bytearray with a
        view exported refuses to change size, which is what is tried (a handler that
        kept the request's bytes keeps them intact; the buffer is then left to it)."""
        if type(frame) is not bytearray or len(self._free) >= _POOL \
                or len(frame) > _POOL_MAX_BYTES:
            return
        try:
            frame.append(0)
        except BufferError:
            return
        del frame[-1]
        self._free.append(frame)

    def _deliver(self, frame) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done() and not self._frames:
            waiter.set_result(frame)
        else:
            # the connection is answering a request: keep this one and stop reading
            # (Kafka mutes the channel) until it is taken
            self._frames.append(frame)
            self._pause()

    def _pause(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def mid_request(self) -> bool:
        """Part of a request has arrived (its size, or some of its bytes)."""
        return self._frame is not None or bool(self._pending)

    def _where(self) -> tuple[str, int, int]:
        if self._frame is not None:
            return f"a {self._size}-byte request", self._filled, self._size
        return "the next request", len(self._pending), 4

    async def read_frame(self, idle_s: float):
        """The next request: (its buffer, its size; the request is the buffer's first
        ``size`` bytes, the size prefix left out), or None when the client closed
        between requests. Give a bytearray buffer back with :meth:`recycle` once the
        request is answered. Raises :class:`_BadSize`, :class:`_Idle` (nothing arrived for
        ``idle_s``), :class:`_Truncated`, or the connection's error."""
        while True:
            if self._frames:
                frame = self._frames.popleft()
                if not self._frames and self._error is None and not self._eof:
                    self.transport.resume_reading()
                return frame
            if self._error is not None:
                raise self._error
            if self._eof:
                if self.mid_request:
                    raise _Truncated(*self._where())
                if self._lost is not None and not isinstance(self._lost,
                                                             ConnectionResetError):
                    raise self._lost
                return None
            if not self.transport.is_reading():
                self.transport.resume_reading()
            loop = self._loop
            waiter = self._waiter = loop.create_future()
            self._last_activity = loop.time()
            self._timer = loop.call_later(idle_s, self._check_idle, idle_s)
            try:
                frame = await waiter
            finally:
                self._waiter = None
                self._timer.cancel()
            if frame is not None:
                return frame

    def _check_idle(self, idle_s: float) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        quiet = self._loop.time() - self._last_activity
        if quiet >= idle_s * 0.999:
            waiter.set_exception(_Idle(self._where()[0]))
        else:   # bytes arrived meanwhile: idle only once nothing has for idle_s
            self._timer = self._loop.call_later(idle_s - quiet, self._check_idle, idle_s)

    # -- writing ----------------------------------------------------------------------
    def write(self, data) -> None:
        self.transport.write(data)

    @property
    def write_paused(self) -> bool:
        return self._write_paused

    async def drain(self) -> None:
        if self._lost is not None or self.transport.is_closing():
            raise ConnectionResetError("the connection closed")
        if self._write_paused:
            waiter = self._loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def get_extra_info(self, name: str, default=None):
        return self.transport.get_extra_info(name, default)

    def close(self) -> None:
        """Close the transport (again: nothing; before it is made: nothing)."""
        if self.transport is not None:
            self.transport.close()


class Connection:
    """One accepted client connection (see the module docstring).

    Parameters
    ----------
    broker
        The shared state the handlers use.
    stream
        The connection's :class:`FrameStream` (its ``max_request_bytes`` is
        ``socket.request.max.bytes``, the largest request frame accepted).
    idle_s
        ``connections.max.idle.ms`` in seconds: how long the connection may wait for the
        next request, or for its response to make progress.
    """

    def __init__(self, broker: Broker, stream: FrameStream, *, idle_s: float) -> None:
        self.broker = broker
        self.stream = stream
        self.idle_s = idle_s
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._waiting = True
        self.requests = 0
        self._stopping = False
        self.task: asyncio.Task | None = None

    @property
    def idle(self) -> bool:
        """True while waiting for the next request with none of it arrived (a stop may
        cancel then)."""
        return self._waiting and not self.stream.mid_request

    # -- the loop -------------------------------------------------------------------
    async def run(self) -> None:
        """Serve requests until the client closes, misbehaves or the server stops."""
        # (this task's own context: the handlers of this connection's requests see it)
        CLIENT_ADDRESS.set("/" + self.peer.rsplit(":", 1)[0])
        try:
            while not self._stopping:
                self._waiting = True
                got = await self._read()
                self._waiting = False
                if got is None:
                    return
                buffer, size = got
                # read-only, as the bytes of a request are to the handlers
                view = memoryview(buffer)[:size].toreadonly()
                go_on = await self._process(view)
                del view, got   # (the views gone, the buffer can be reused)
                self.stream.recycle(buffer)
                if not go_on:
                    return
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        except (ConnectionError, OSError) as exc:
            _log.debug("kafkastore serve: connection from %s: %s", self.peer, exc)
        except Exception:  # never let one connection's failure reach the server
            _log.exception("kafkastore serve: closing connection from %s", self.peer)
        finally:
            self.stream.close()

    async def _read(self):
        try:
            return await self.stream.read_frame(self.idle_s)
        except _BadSize as exc:
            # Kafka's NetworkReceive.readFrom -> InvalidReceiveException, channel closed
            _log.warning("kafkastore serve: closing connection from %s: invalid "
                         "request size %d (socket.request.max.bytes is %d)",
                         self.peer, exc.args[0], self.stream.max_request_bytes)
        except _Truncated as exc:
            what, got, need = exc.args
            _log.warning("kafkastore serve: connection from %s closed in the middle "
                         "of %s (%d of %d bytes)", self.peer, what, got, need)
        except _Idle as exc:
            _log.info("kafkastore serve: closing connection from %s: idle for %.0f ms "
                      "waiting for %s (connections.max.idle.ms)", self.peer,
                      self.idle_s * 1000, exc.args[0])
        return None

    def request_stop(self) -> None:
        """Stop after the request in flight (if any) is answered; at once when idle."""
        self._stopping = True
        if self.idle and self.task is not None:
            self.task.cancel()

    # -- one request ----------------------------------------------------------------
    async def _process(self, frame: memoryview) -> bool:
        """Answer one request; False: close the connection."""
        try:
            header, position = protocol.read_request_header(frame)
        except InvalidRequestError as exc:
            self._closing("a request header that does not decode", exc)
            return False
        self.requests += 1
        supported = protocol.SUPPORTED_APIS.get(header.api_key)
        if header.api_key == _API_VERSIONS and (
                supported is None or not supported[0] <= header.api_version <= supported[1]):
            # Kafka answers an ApiVersions it cannot parse at v0 with its own ranges
            return await self._respond(header._replace(api_version=0),
                                       admin.unsupported_api_versions_body())
        try:
            request = protocol.decode_request(header, frame, position)
        except UnsupportedVersionError as exc:
            self._closing("an unsupported API key or version", exc)
            return False
        except InvalidRequestError as exc:
            self._closing("a request that does not decode", exc)
            return False
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            self._closing("a request no handler answers",
                          f"{protocol.API_NAMES.get(header.api_key)} v{header.api_version}")
            return False
        try:
            body = await handler(self.broker, header, request)
        except Exception:
            _log.exception("kafkastore serve: %s v%d (correlation id %d) from %s failed",
                           protocol.API_NAMES.get(header.api_key), header.api_version,
                           header.correlation_id, self.peer)
            body = self._error_body(header)
            if body is None:
                return False
        if body is None:
            return True   # no response (a Produce with acks=0)
        if isinstance(body, CloseConnection):
            # no response, and the client must notice (a failed acks=0 produce): Kafka's
            # RequestChannel.closeConnection
            self._closing(f"{protocol.API_NAMES.get(header.api_key)} v{header.api_version}",
                          body.reason)
            return False
        return await self._respond(header, body)

    def _closing(self, what: str, detail: object) -> None:
        _log.warning("kafkastore serve: closing connection from %s after %s: %s",
                     self.peer, what, detail)

    @staticmethod
    def _error_body(header: protocol.RequestHeader) -> dict | None:
        since = _TOP_LEVEL_ERROR_SINCE.get(header.api_key)
        if since is None or header.api_version < since:
            return None
        return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR)}

    async def _respond(self, header: protocol.RequestHeader, body: dict) -> bool:
        try:
            pieces = protocol.encode_response(header, body)
        except Exception:
            # the codec raises InvalidRequestError for a body it cannot encode: a bug in
            # the handler, not the client's request, so it is answered as a handler's
            # exception (RequestHandlerHelper.handleError), never as a malformed request
            _log.exception("kafkastore serve: server error: the response to %s v%d "
                           "(correlation id %d) from %s does not encode",
                           protocol.API_NAMES.get(header.api_key), header.api_version,
                           header.correlation_id, self.peer)
            protocol.close_regions(body)
            error = self._error_body(header)
            if error is None:
                return False
            pieces = protocol.encode_response(header, error)
        await self._write(pieces)
        return True

    async def _write(self, pieces: list) -> None:
        """Write the pieces in order, waiting (up to the idle time) while the transport's
        buffer is above its high-water mark."""
        stream = self.stream
        try:
            for piece in pieces:
                if isinstance(piece, protocol.FileRegion):
                    if piece.size:
                        await self._send_region(piece)
                else:
                    stream.write(piece)
                    if stream.write_paused:
                        await self._drain()
        finally:
            for piece in pieces:
                if isinstance(piece, protocol.FileRegion):
                    piece.close()

    async def _drain(self) -> None:
        try:
            await asyncio.wait_for(self.stream.drain(), self.idle_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise ConnectionError(f"no progress writing a response for {self.idle_s:.0f} s "
                                  "(connections.max.idle.ms)") from None

    async def _send_region(self, region: protocol.FileRegion) -> None:
        loop = asyncio.get_running_loop()
        sendfile = getattr(loop, "sendfile", None)   # uvloop's loop has none
        if sendfile is not None:
            try:
                # the stdlib's native path waits for the write buffer to empty, then
                # os.sendfile; it moves the file's offset, which the region owns
                await asyncio.wait_for(
                    sendfile(self.stream.transport, region.file, region.position,
                             region.size, fallback=False), self.idle_s)
                return
            except (asyncio.TimeoutError, TimeoutError):
                raise ConnectionError("no progress sending a file region for "
                                      f"{self.idle_s:.0f} s") from None
            except RuntimeError as exc:   # SendfileNotAvailableError is one
                if self.stream.transport.is_closing():
                    raise ConnectionError("the connection closed") from exc
        # no native sendfile: pread (the file's offset is not moved) and write with flow
        # control, one chunk at a time
        fd = region.file.fileno()
        position, left = region.position, region.size
        while left:
            chunk = os.pread(fd, min(left, _PREAD_CHUNK), position)
            if not chunk:
                raise ConnectionError(f"file region ends {left} bytes early")
            self.stream.write(chunk)
            await self._drain()
            position += len(chunk)
            left -= len(chunk)

