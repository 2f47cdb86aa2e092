"""Ranged reads of an original segment through its transformed, chunked object.

Aiven's plugin cuts a segment into ``chunk.size`` pieces, transforms each (zstd, then
AES-GCM) and concatenates them; the manifest's chunk index says where each transformed
chunk is. :class:`ChunkedReader` is a :class:`~kafkastore.storage.RangeReader` over the
*original* bytes: a read of ``[position, position + size)`` maps to the chunks holding
it, fetches the transformed bytes of the chunks it does not hold already in ONE ranged
read per run of adjacent chunks, detransforms each and returns the bytes asked for.

What is fetched is the chunks a read needs and nothing more (a chunk is the unit of
decompression and of the GCM tag); the few most recently used decoded chunks are kept
(:data:`CACHED_CHUNKS`), so the index-guided window reads of
:class:`~kafkastore.log_view.ReadOnlyLog` (a search window, then the data from there)
do not fetch a chunk twice. A copy without transforms and with a fixed chunk index maps
positions one to one: :func:`open_segment_reader` then reads the object directly.

Thread-safety: as every ``RangeReader``, one thread at a time.
"""

from __future__ import annotations

from collections import OrderedDict

from kafkastore.errors import CorruptChunkError, StorageError
from kafkastore.storage import RangeReader, ReadOnlyStorage

__all__ = ["ChunkedReader", "CACHED_CHUNKS"]

#: Decoded chunks a reader keeps (most recently used first out last).
CACHED_CHUNKS = 4


class ChunkedReader(RangeReader):
    """The original bytes of one remote segment (see the module).

    ``inner`` reads the transformed object; ``chunk_index`` maps original to transformed
    positions; ``transform`` detransforms one chunk. ``size`` is the original file size.
    """

    __slots__ = ("_inner", "_index", "_transform", "_cache", "uri", "chunks_fetched",
                 "bytes_fetched")

    def __init__(self, storage: ReadOnlyStorage, path: str, inner: RangeReader,
                 chunk_index, transform, uri: str) -> None:
        super().__init__(storage, path, chunk_index.original_file_size)
        self._inner = inner
        self._index = chunk_index
        self._transform = transform
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self.uri = uri
        self.chunks_fetched = 0
        self.bytes_fetched = 0
        expected = chunk_index.transformed_file_size
        if inner.size != expected:
            raise CorruptChunkError(
                f"the object has {inner.size} bytes; its chunk index says "
                f"{expected} ({len(chunk_index)} chunks)", path=uri)

    def close(self) -> None:
        self._cache.clear()
        self._inner.close()

    def read(self, position: int, size: int) -> bytes:
        want = self._want(position, size)
        if want == 0:
            return b""
        chunks = self._index.chunks_for_range(position, want)
        missing = [c for c in chunks if c.id not in self._cache]
        decoded = {c.id: self._cache[c.id] for c in chunks if c.id in self._cache}
        # one ranged read per run of adjacent missing chunks
        run: list = []
        for c in missing + [None]:
            if run and (c is None or c.id != run[-1].id + 1):
                decoded.update(self._fetch(run))
                run = []
            if c is not None:
                run.append(c)
        for c in chunks:
            self._remember(c.id, decoded[c.id])
        if len(chunks) == 1:
            c = chunks[0]
            start = position - c.original_position
            return decoded[c.id][start:start + want]
        out = bytearray()
        for c in chunks:
            data = decoded[c.id]
            a = max(0, position - c.original_position)
            b = min(c.original_size, position + want - c.original_position)
            out += memoryview(data)[a:b]
        return bytes(out)

    def _remember(self, chunk_id: int, data: bytes) -> None:
        cache = self._cache
        cache[chunk_id] = data
        cache.move_to_end(chunk_id)
        while len(cache) > CACHED_CHUNKS:
            cache.popitem(last=False)

    def _fetch(self, run: list) -> dict[int, bytes]:
        first, last = run[0], run[-1]
        start = first.transformed_position
        end = last.transformed_position + last.transformed_size
        try:
            blob = self._inner.read(start, end - start)
        except StorageError:
            raise
        if len(blob) != end - start:
            raise CorruptChunkError(
                f"chunk {first.id}: the object ends at {start + len(blob)}, before the "
                f"{end - start} bytes of chunks {first.id}..{last.id} its chunk index "
                f"places at {start}", chunk=first.id, position=start, path=self.uri)
        self.chunks_fetched += len(run)
        self.bytes_fetched += len(blob)
        out = {}
        view = memoryview(blob)
        for c in run:
            a = c.transformed_position - start
            out[c.id] = self._transform.detransform(
                bytes(view[a:a + c.transformed_size]) if len(run) > 1 else blob, c,
                path=self.uri)
        return out
