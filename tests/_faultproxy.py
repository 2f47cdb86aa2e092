"""An HTTP proxy on loopback in front of moto's S3 server that injects faults.

The storage seam is pointed at the proxy (``endpoint_override``) instead of the server.
Each request is forwarded unchanged unless a rule matches it; a rule fires for its next
``times`` matching requests:

* ``"503"``: reply 503 with S3's ``SlowDown`` error body (throttling);
* ``"500"``: reply 500 with S3's ``InternalError`` body;
* ``"403"``: reply 403 with S3's ``AccessDenied`` body (credentials the store refuses);
* ``"cut"``: forward, send the status and the full ``Content-Length``, then half the
  body, and close the connection (a connection dropped mid-range).

Every request is recorded (method, path, Range header, body bytes sent), so tests count
requests and bytes as the store saw them. The proxy is a thread of the test process;
nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import http.client
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_ERRORS = {
    "503": (503, "SlowDown", "Please reduce your request rate."),
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "403": (403, "AccessDenied", "Access Denied"),
}


@dataclass
class Rule:
    kind: str                 # "503" | "500" | "403" | "cut"
    method: str = "GET"
    contains: str = ""        # a substring of the request path (the object key)
    ranged: bool = False      # only requests with a Range header
    times: int = 1
    fired: int = 0


@dataclass
class Seen:
    method: str
    path: str
    range: str | None
    status: int
    sent: int


@dataclass
class FaultProxy:
    target: str
    endpoint: str = ""
    rules: list[Rule] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def inject(self, kind: str, *, method: str = "GET", contains: str = "",
               ranged: bool = False, times: int = 1) -> Rule:
        rule = Rule(kind, method, contains, ranged, times)
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.seen.clear()

    def _match(self, method: str, path: str, ranged: bool) -> Rule | None:
        with self.lock:
            for rule in self.rules:
                if rule.fired < rule.times and rule.method == method and \
                        rule.contains in path and (ranged or not rule.ranged):
                    rule.fired += 1
                    return rule
        return None

    def _record(self, seen: Seen) -> None:
        with self.lock:
            self.seen.append(seen)

    def gets(self, contains: str = "") -> list[Seen]:
        """The GETs whose path contains ``contains`` (a listing is a GET of the bucket)."""
        with self.lock:
            return [s for s in self.seen if s.method == "GET" and contains in s.path]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:   # quiet
        pass

    def do_GET(self) -> None:
        self._proxy()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def _proxy(self) -> None:
        proxy: FaultProxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        ranged = self.headers.get("Range")
        rule = proxy._match(self.command, self.path, ranged is not None)
        if rule is not None and rule.kind in _ERRORS:
            status, code, message = _ERRORS[rule.kind]
            data = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(data)))
            proxy._record(Seen(self.command, self.path, ranged, status, 0))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            return
        target = urlsplit(proxy.target)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("connection", "keep-alive")}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            status, resp_headers = resp.status, resp.getheaders()
        finally:
            conn.close()
        self.send_response(status)
        for k, v in resp_headers:
            if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                 "keep-alive", "server", "date"):
                self.send_header(k, v)
        if self.command == "HEAD":   # the object's length, not the (empty) body's
            self.send_header("Content-Length", dict(
                (k.lower(), v) for k, v in resp_headers).get("content-length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        # recorded before the body goes out: the client may act on it at once
        if self.command == "HEAD":
            proxy._record(Seen(self.command, self.path, ranged, status, 0))
            self.end_headers()
            return
        if rule is not None and rule.kind == "cut" and len(data) > 1:
            half = data[:len(data) // 2]
            proxy._record(Seen(self.command, self.path, ranged, status, len(half)))
            self.end_headers()
            self.wfile.write(half)
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        proxy._record(Seen(self.command, self.path, ranged, status, len(data)))
        self.end_headers()
        self.wfile.write(data)


def start_fault_proxy(target: str):
    """A :class:`FaultProxy` forwarding to ``target`` (``http://127.0.0.1:port``);
    returns ``(proxy, stop)``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    proxy = FaultProxy(target=target,
                       endpoint=f"http://127.0.0.1:{server.server_address[1]}")
    server.proxy = proxy
    thread = threading.Thread(target=server.serve_forever, name="fault-proxy", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(10)

    return proxy, stop
