"""One client connection: Kafka's framing, one request at a time, responses in order.

Why asyncio streams (not a ``Protocol``): a connection is a sequence (read a size, read
the frame, answer, write, next), which ``StreamReader.readexactly`` and
``StreamWriter.drain`` say directly. ``readexactly(n)`` keeps only the bytes that have
arrived (a declared size is never allocated up front), ``drain()`` is the transport's
flow control (it waits while the write buffer is above its high-water mark, so a client
that never reads its socket stops the server reading its requests instead of growing the
server's memory), and ``writer.transport`` is what ``loop.sendfile`` takes for the file
regions of a fetch. A ``Protocol`` would be a hand-written state machine for the same.

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
import logging
import os

from kafkastore.errors import InvalidRequestError, UnsupportedVersionError
import kafkastore.server.protocol as protocol
from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.handlers import HANDLERS, CloseConnection, admin

__all__ = ["Connection"]

_log = logging.getLogger("kafkastore.server")

_API_VERSIONS = 18
#: API key -> the first version whose response has a top-level error_code (the answer to
#: a handler's unexpected exception; see the module docstring).
_TOP_LEVEL_ERROR_SINCE = {18: 0, 22: 0, 60: 0, 1: 7}
_PREAD_CHUNK = 1 << 20


class Connection:
    """One accepted client connection (see the module docstring).

    Parameters
    ----------
    broker
        The shared state the handlers use.
    reader, writer
        The connection's streams.
    max_request_bytes
        ``socket.request.max.bytes``: the largest request frame accepted.
    idle_s
        ``connections.max.idle.ms`` in seconds: how long the connection may wait for the
        next request, or for its response to make progress.
    """

    def __init__(self, broker: Broker, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, *, max_request_bytes: int,
                 idle_s: float) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.max_request_bytes = max_request_bytes
        self.idle_s = idle_s
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        #: True while waiting for the next request (a stop may cancel then).
        self.idle = True
        self.requests = 0
        self._stopping = False
        self.task: asyncio.Task | None = None

    # -- the loop -------------------------------------------------------------------
    async def run(self) -> None:
        """Serve requests until the client closes, misbehaves or the server stops."""
        try:
            while not self._stopping:
                self.idle = True
                head = await self._read(4, "the next request")
                if head is None:
                    return
                self.idle = False
                size = int.from_bytes(head, "big", signed=True)
                if size < 0 or size > self.max_request_bytes:
                    # Kafka's NetworkReceive.readFrom -> InvalidReceiveException, channel closed
                    _log.warning("kafkastore serve: closing connection from %s: invalid "
                                 "request size %d (socket.request.max.bytes is %d)",
                                 self.peer, size, self.max_request_bytes)
                    return
                frame = await self._read(size, f"a {size}-byte request")
                if frame is None:
                    return
                if not await self._process(memoryview(frame)):
                    return
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        except (ConnectionError, OSError) as exc:
            _log.debug("kafkastore serve: connection from %s: %s", self.peer, exc)
        except Exception:  # never let one connection's failure reach the server
            _log.exception("kafkastore serve: closing connection from %s", self.peer)
        finally:
            self.writer.close()

    async def _read(self, n: int, what: str) -> bytes | None:
        try:
            return await asyncio.wait_for(self.reader.readexactly(n), self.idle_s)
        except asyncio.IncompleteReadError as exc:
            if exc.partial or what != "the next request":
                _log.warning("kafkastore serve: connection from %s closed in the middle "
                             "of %s (%d of %d bytes)", self.peer, what, len(exc.partial), n)
            return None
        except (asyncio.TimeoutError, TimeoutError):
            _log.info("kafkastore serve: closing connection from %s: idle for %.0f ms "
                      "waiting for %s (connections.max.idle.ms)", self.peer,
                      self.idle_s * 1000, what)
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
        writer = self.writer
        try:
            for piece in pieces:
                if isinstance(piece, protocol.FileRegion):
                    if piece.size:
                        await self._send_region(piece)
                else:
                    writer.write(piece)
                    await self._drain()
        finally:
            for piece in pieces:
                if isinstance(piece, protocol.FileRegion):
                    piece.close()

    async def _drain(self) -> None:
        try:
            await asyncio.wait_for(self.writer.drain(), self.idle_s)
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
                    sendfile(self.writer.transport, region.file, region.position,
                             region.size, fallback=False), self.idle_s)
                return
            except (asyncio.TimeoutError, TimeoutError):
                raise ConnectionError("no progress sending a file region for "
                                      f"{self.idle_s:.0f} s") from None
            except RuntimeError as exc:   # SendfileNotAvailableError is one
                if self.writer.transport.is_closing():
                    raise ConnectionError("the connection closed") from exc
        # no native sendfile: pread (the file's offset is not moved) and write with flow
        # control, one chunk at a time
        fd = region.file.fileno()
        position, left = region.position, region.size
        while left:
            chunk = os.pread(fd, min(left, _PREAD_CHUNK), position)
            if not chunk:
                raise ConnectionError(f"file region ends {left} bytes early")
            self.writer.write(chunk)
            await self._drain()
            position += len(chunk)
            left -= len(chunk)

