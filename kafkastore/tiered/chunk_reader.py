"""Ranged reads of an original segment through its transformed, chunked object.

Aiven's plugin cuts a segment into ``chunk.size`` pieces, transforms each (zstd, then
AES-GCM) and concatenates them; the manifest's chunk index says where each transformed
chunk is. :class:`ChunkedReader` is a :class:`~kafkastore.storage.RangeReader` over the
*original* bytes: a read of ``[position, position + size)`` maps to the chunks holding
it, fetches the transformed bytes of the chunks it does not hold already in ONE ranged
read per run of adjacent chunks, detransforms each and returns the bytes asked for.

What is fetched is the chunks a read needs and nothing more (a chunk is the unit of
decompression and of the GCM tag). Decoded chunks are kept in a :class:`ChunkCache`
shared by the readers of one copy (most recently used kept, :data:`CACHE_BYTES` in all,
never fewer than the chunks of the last read), so the window reads of
:class:`~kafkastore.log_view.ReadOnlyLog` (a walk of batch headers in windows, then the
batch found; a search window, then the data from there) do not fetch a chunk twice
whatever the chunk size. A copy without transforms and with a fixed chunk index maps
positions one to one and is read directly (no reader of this module).

Thread-safety: a reader, as every ``RangeReader``, is for one thread at a time; the
cache is shared under a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from kafkastore.errors import CorruptChunkError
from kafkastore.storage import RangeReader, ReadOnlyStorage

__all__ = ["ChunkedReader", "ChunkCache", "CACHE_BYTES"]

#: Decoded chunk bytes one copy keeps (above the largest window a log view reads, 8 MiB).
CACHE_BYTES = 32 << 20


class ChunkCache:
    """Decoded chunks by ``(object path, chunk id)``, least recently used dropped first
    once they hold more than ``budget`` bytes. Thread-safe."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget = budget
        self.bytes = 0
        self._chunks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            data = self._chunks.get(key)
            if data is not None:
                self._chunks.move_to_end(key)
            return data

    def put(self, key: tuple[str, int], data: bytes, keep: int = 1) -> None:
        """Keep ``data``; drop the oldest until within the budget, but never the
        ``keep`` most recent (the chunks of the read in progress)."""
        with self._lock:
            old = self._chunks.pop(key, None)
            if old is not None:
                self.bytes -= len(old)
            self._chunks[key] = data
            self.bytes += len(data)
            while self.bytes > self.budget and len(self._chunks) > keep:
                _, dropped = self._chunks.popitem(last=False)
                self.bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._chunks.clear()
            self.bytes = 0


class ChunkedReader(RangeReader):
    """The original bytes of one remote segment (see the module).

    ``inner`` reads the transformed object; ``chunk_index`` maps original to transformed
    positions; ``transform`` detransforms one chunk. ``size`` is the original file size.
    """

    __slots__ = ("_inner", "_index", "_transform", "_cache", "uri", "chunks_fetched",
                 "bytes_fetched")

    def __init__(self, storage: ReadOnlyStorage, path: str, inner: RangeReader,
                 chunk_index, transform, uri: str, cache: ChunkCache | None = None) -> None:
        super().__init__(storage, path, chunk_index.original_file_size)
        self._inner = inner
        self._index = chunk_index
        self._transform = transform
        self._cache = cache if cache is not None else ChunkCache()
        self.uri = uri
        self.chunks_fetched = 0
        self.bytes_fetched = 0
        expected = chunk_index.transformed_file_size
        if inner.size != expected:
            raise CorruptChunkError(
                f"the object has {inner.size} bytes; its chunk index says "
                f"{expected} ({len(chunk_index)} chunks)", path=uri)

    def close(self) -> None:
        self._inner.close()

    def chunk_bounds(self, position: int) -> tuple[int, int] | None:
        chunk = self._index.find(position) if 0 <= position < self.size else None
        if chunk is None:
            return None
        return chunk.original_position, chunk.original_position + chunk.original_size

    def read(self, position: int, size: int) -> bytes:
        want = self._want(position, size)
        if want == 0:
            return b""
        chunks = self._index.chunks_for_range(position, want)
        decoded = {}
        missing = []
        for c in chunks:
            data = self._cache.get((self.uri, c.id))
            if data is None:
                missing.append(c)
            else:
                decoded[c.id] = data
        # one ranged read per run of adjacent missing chunks
        run: list = []
        for c in missing + [None]:
            if run and (c is None or c.id != run[-1].id + 1):
                decoded.update(self._fetch(run))
                run = []
            if c is not None:
                run.append(c)
        for c in chunks:
            self._cache.put((self.uri, c.id), decoded[c.id], keep=len(chunks))
        if len(chunks) == 1:
            c = chunks[0]
            start = position - c.original_position
            return decoded[c.id][start:start + want]
        # one copy into the result: a bytearray grown chunk by chunk and then copied
        # into bytes wrote every byte twice into fresh memory (a tenth to a third of a
        # raw read of a zstd or AES-GCM copy, asv_bench/compare_tiered.py)
        parts = []
        for c in chunks:
            a = max(0, position - c.original_position)
            b = min(c.original_size, position + want - c.original_position)
            parts.append(memoryview(decoded[c.id])[a:b])
        return b"".join(parts)

    def _fetch(self, run: list) -> dict[int, bytes]:
        first, last = run[0], run[-1]
        start = first.transformed_position
        end = last.transformed_position + last.transformed_size
        blob = self._inner.read(start, end - start)
        if len(blob) != end - start:
            raise CorruptChunkError(
                f"chunk {first.id}: the object ends at {start + len(blob)}, before the "
                f"{end - start} bytes of chunks {first.id}..{last.id} its chunk index "
                f"places at {start}", chunk=first.id, position=start, path=self.uri)
        self.chunks_fetched += len(run)
        self.bytes_fetched += len(blob)
        out = {}
        view = memoryview(blob)
        # a transformed chunk goes to the transform as a view of the run's bytes (zstd
        # and AES-GCM read buffers; their output is new bytes); an identity transform
        # returns what it is given, which must be bytes
        keep = self._transform.identity
        for c in run:
            a = c.transformed_position - start
            part = view[a:a + c.transformed_size] if len(run) > 1 else blob
            out[c.id] = self._transform.detransform(bytes(part) if keep else part, c,
                                                    path=self.uri)
        return out
