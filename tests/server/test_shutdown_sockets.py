"""Stopping the server closes every connection's socket, even one accepted in the last
moments before the stop: nothing is left to the garbage collector (an unclosed socket is a
ResourceWarning and a file descriptor held until then).

asyncio's ``Server.close()`` under an accept in flight leaves that connection half made
(its transport's ``Server._attach`` fails once the server has no sockets, and nothing
closes the accepted socket); the server now stops accepting, lets the accepts in flight
finish, closes what they made, and waits for every socket to close.
"""

from __future__ import annotations

import gc
import socket
import sys

from kafkastore.server import KafkaServer


def test_stop_right_after_clients_connect_leaves_no_socket_open(tmp_path):
    leaked = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: leaked.append(f"{u.exc_value!r} in {u.object!r}")
    try:
        for i in range(20):
            server = KafkaServer(str(tmp_path / f"logs{i}"), host="127.0.0.1", port=0).start()
            clients = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
                       for _ in range(3)]
            server.stop()          # at once: some accepts are still in flight
            for c in clients:
                c.close()
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert leaked == []
