"""FrameStream: Kafka's framing received straight into reusable request buffers.

A request larger than what one read brings is received into a buffer of its own, which
the connection gives back once the request is answered and which then holds the next
large request. These tests drive a FrameStream over a real socket pair: the frames come
out whole and in order whatever the reads' sizes, a buffer comes back for reuse only
when nothing holds a view of it, and a request kept by someone is never overwritten by
the next one.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import pytest

from kafkastore.server.connection import _FIRST_ALLOCATION, _POOL_MAX_BYTES, FrameStream


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _payloads() -> list[bytes]:
    # small ones (cut out of the scratch buffer), ones past the first allocation (the
    # buffer doubles while they arrive), one past what a connection keeps
    sizes = [7, 3 * _FIRST_ALLOCATION + 11, 5, 2 * _FIRST_ALLOCATION - 3,
             _FIRST_ALLOCATION // 2, _POOL_MAX_BYTES + 1, 3 * _FIRST_ALLOCATION + 11]
    return [os.urandom(n) for n in sizes]


async def _serve(payloads: list[bytes], chunk: int, on_frame) -> list[bytes]:
    """Send ``payloads`` framed, ``chunk`` bytes a write from a thread, to a FrameStream
    on this loop; ``on_frame(stream, buffer, size)`` for each request read; the requests'
    bytes as read."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    wire = b"".join(_frame(p) for p in payloads)

    def send():
        with theirs:
            for i in range(0, len(wire), chunk):
                theirs.sendall(wire[i:i + chunk])
            theirs.shutdown(socket.SHUT_WR)
            while theirs.recv(1 << 16):
                pass

    connected: list[FrameStream] = []
    _, stream = await loop.connect_accepted_socket(
        lambda: FrameStream(len(wire), connected.append), ours)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    got = []
    try:
        while True:
            item = await stream.read_frame(30.0)
            if item is None:
                break
            buffer, size = item
            got.append(bytes(memoryview(buffer)[:size]))
            on_frame(stream, buffer, size)
    finally:
        stream.close()
        await asyncio.sleep(0)
        sender.join(30)
    assert connected == [stream]
    return got


@pytest.mark.parametrize("chunk", [1 << 20, 65536, 4099])
def test_frames_come_out_whole_and_in_order_with_buffers_reused(chunk):
    payloads = _payloads()
    seen_buffers = []

    def answer(stream, buffer, size):
        seen_buffers.append(buffer)
        stream.recycle(buffer)

    got = asyncio.run(_serve(payloads, chunk, answer))
    assert got == payloads
    large = [b for b in seen_buffers if type(b) is bytearray]
    # the first large request's buffer holds the later ones (the one past the pool's
    # limit excepted): one allocation, not one a request
    assert len({id(b) for b in large if len(b) <= _POOL_MAX_BYTES}) == 1


def test_a_request_still_viewed_is_never_overwritten_by_the_next():
    payloads = _payloads()
    kept: list[tuple[memoryview, bytes]] = []

    def keep_a_view(stream, buffer, size):
        view = memoryview(buffer)[:size]
        kept.append((view, bytes(view)))
        stream.recycle(buffer)     # refused: the view is still held

    got = asyncio.run(_serve(payloads, 1 << 16, keep_a_view))
    assert got == payloads
    for view, copy in kept:        # every request as it arrived, whatever came after
        assert view == copy


def test_recycle_keeps_only_unviewed_buffers_up_to_the_pool():
    async def main():
        stream = FrameStream(1 << 30, lambda s: None)
        a, b, c = bytearray(10), bytearray(20), bytearray(30)
        held = memoryview(a)
        stream.recycle(a)
        stream.recycle(b"bytes are never kept")
        stream.recycle(bytearray(_POOL_MAX_BYTES + 1))
        assert stream._take_buffer(1) is not a
        held.release()
        stream.recycle(b)
        stream.recycle(c)
        stream.recycle(a)          # past the pool's size: dropped
        taken = {id(stream._take_buffer(1)), id(stream._take_buffer(25))}
        assert taken == {id(b), id(c)}
        assert len(b) >= 25   # (grown to what was asked)

    asyncio.run(main())
