"""Ports for the servers the tests start in other processes (JVMs, scripts).

A port from ``bind(("127.0.0.1", 0))`` lies in the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), which every
outgoing connection and every ``port 0`` listener on the machine draws from too. Handed
to a JVM that binds it seconds later, it can be taken by then: CI once saw the Spark
Connect server's port held by another HTTP server, the client talking to the wrong one.

So these ports come from below the ephemeral range, where nothing is assigned by the
kernel, each pytest-xdist worker from its own slice (no two workers hand out the same
port), and each is checked free by binding it before it is handed out.
"""

from __future__ import annotations

import os
import random
import socket

_LOW, _HIGH = 20000, 32000   # below the default ephemeral range (32768-60999)
_SLICES = 8                  # up to 8 xdist workers (scripts/test.sh caps -n at 8)
_given: set[int] = set()


def _ephemeral() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    n = int(worker[2:]) if worker[2:].isdigit() else 0
    width = (_HIGH - _LOW) // _SLICES
    start = _LOW + (n % _SLICES) * width
    return range(start, start + width)


def free_port() -> int:
    """A free 127.0.0.1 TCP port outside the ephemeral range, not handed out before by
    this process."""
    lo, hi = _ephemeral()
    candidates = [p for p in _slice() if not lo <= p <= hi and p not in _given]
    random.shuffle(candidates)
    for port in candidates[:500]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {_slice()} outside the ephemeral range {lo}-{hi}")
