"""The chunk index of a remote segment: where each chunk of the original ``.log`` is in the
uploaded (transformed) object. Aiven's ``manifest/index`` package, read and written.

A segment's ``.log`` is cut into chunks of ``originalChunkSize`` bytes (the last one
shorter); each chunk is transformed on its own (zstd, then AES-GCM) and the transformed
chunks are concatenated into the ``.log`` object. Two kinds of index, as the manifest's
``chunkIndex`` JSON object (``type`` first, the fields in Jackson's order)::

    {"type":"fixed","originalChunkSize":4096,"originalFileSize":204879,
     "transformedChunkSize":4096,"finalTransformedChunkSize":79}
    {"type":"variable","originalChunkSize":8192,"originalFileSize":204879,
     "transformedChunks":"<base64 of a zstd frame of the chunk sizes' binary codec>"}

*fixed* (every transformed chunk but the last has the same size: no transform, or
encryption alone) and *variable* (compression: each transformed size is listed).

The sizes' binary codec (``ChunkSizesBinaryCodec``, big-endian): int32 count; nothing more
when the count is 0; one int32 value when it is 1; else int32 base (the minimum of all but
the last value), int8 bytes per value (1..4), ``count - 1`` values less the base in that
many bytes each (the low bytes of the int), then the last value as a full int32. The
codec's bytes are one zstd frame with its content size (level 3, the zstd default the
plugin's ``ZstdCompressCtx`` uses), base64 (standard alphabet, padded) in the JSON. A
reader refuses a frame without a content size or one over :data:`MAX_DECOMPRESSED_SIZE`
(the plugin's 10 MiB), as the plugin does, before decompressing anything.

Invariants checked on every index built or parsed (a manifest is untrusted input): sizes are
Java ints; ``originalChunkSize > 0``; the chunk count is ``ceil(originalFileSize /
originalChunkSize)``; every transformed chunk of a non-empty segment has a positive size.
An empty segment has no chunk (the plugin materializes one empty chunk; nothing reads it).

Thread-safety: indexes are immutable after construction; share them freely.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import struct
from dataclasses import dataclass
from itertools import accumulate

import zstandard

from kafkastore.errors import CorruptManifestError

__all__ = [
    "MAX_DECOMPRESSED_SIZE",
    "ZSTD_LEVEL",
    "Chunk",
    "ChunkIndex",
    "FixedSizeChunkIndex",
    "VariableSizeChunkIndex",
    "chunk_index_from_json",
    "encode_chunk_sizes",
    "decode_chunk_sizes",
    "serialize_transformed_chunks",
    "deserialize_transformed_chunks",
]

#: The plugin's bound on the decompressed chunk-sizes codec (TransformedChunksDeserializer).
MAX_DECOMPRESSED_SIZE = 10 * 1024 * 1024
#: zstd level of the plugin's ZstdCompressCtx (zstd's default), for chunks and the sizes.
ZSTD_LEVEL = 3
_INT_MAX = 2**31 - 1
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: its number and its byte ranges in the original file and the object."""

    id: int
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int


def _corrupt(path: str, message: str) -> CorruptManifestError:
    return CorruptManifestError(f"{path}: {message}", path=path)


def _java_int(value: object, name: str, path: str, *, minimum: int = 0) -> int:
    if type(value) is not int or not minimum <= value <= _INT_MAX:
        raise _corrupt(path, f"chunk index field {name} must be an integer in "
                             f"[{minimum}, {_INT_MAX}], not {value!r}")
    return value


def _chunk_count(original_chunk_size: int, original_file_size: int) -> int:
    return -(-original_file_size // original_chunk_size)


class ChunkIndex:
    """A chunk index (abstract): :class:`FixedSizeChunkIndex` or
    :class:`VariableSizeChunkIndex`. Lookups are O(1) (fixed) or O(log n) (variable)."""

    __slots__ = ("original_chunk_size", "original_file_size", "transformed_file_size",
                 "is_identity", "_count")

    original_chunk_size: int
    original_file_size: int
    transformed_file_size: int
    is_identity: bool

    def __len__(self) -> int:
        return self._count

    def _transformed(self, i: int) -> tuple[int, int]:
        """(position, size) of chunk ``i`` in the transformed object."""
        raise NotImplementedError

    def chunk(self, i: int) -> Chunk:
        """Chunk number ``i`` (IndexError outside ``[0, len)``)."""
        if not 0 <= i < self._count:
            raise IndexError(f"chunk {i} of {self._count}")
        position = i * self.original_chunk_size
        size = min(self.original_chunk_size, self.original_file_size - position)
        tpos, tsize = self._transformed(i)
        return Chunk(i, position, size, tpos, tsize)

    def chunks(self) -> list[Chunk]:
        """Every chunk, in order."""
        return [self.chunk(i) for i in range(self._count)]

    def find(self, original_position: int) -> Chunk | None:
        """The chunk holding byte ``original_position`` of the original file; None at or
        past its end (Aiven's ``findChunkForOriginalOffset``)."""
        if original_position < 0:
            raise ValueError(f"negative position {original_position}")
        if original_position >= self.original_file_size:
            return None
        return self.chunk(original_position // self.original_chunk_size)

    def chunks_for_range(self, position: int, size: int) -> list[Chunk]:
        """The chunks covering original bytes ``[position, position + size)`` clipped to
        the file; ``[]`` for an empty range."""
        if position < 0 or size < 0:
            raise ValueError(f"bad range: position {position}, size {size}")
        end = min(position + size, self.original_file_size)
        if position >= end:
            return []
        first = position // self.original_chunk_size
        last = (end - 1) // self.original_chunk_size
        return [self.chunk(i) for i in range(first, last + 1)]

    def to_json(self) -> dict:
        """The manifest's ``chunkIndex`` object, fields in Jackson's order."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        raise NotImplementedError


class FixedSizeChunkIndex(ChunkIndex):
    """Every transformed chunk but the last is ``transformed_chunk_size`` bytes."""

    __slots__ = ("transformed_chunk_size", "final_transformed_chunk_size")

    def __init__(self, original_chunk_size: int, original_file_size: int,
                 transformed_chunk_size: int, final_transformed_chunk_size: int, *,
                 path: str = "<chunk index>") -> None:
        self.original_chunk_size = _java_int(original_chunk_size, "originalChunkSize", path,
                                             minimum=1)
        self.original_file_size = _java_int(original_file_size, "originalFileSize", path)
        self.transformed_chunk_size = _java_int(transformed_chunk_size,
                                                "transformedChunkSize", path)
        self.final_transformed_chunk_size = _java_int(
            final_transformed_chunk_size, "finalTransformedChunkSize", path)
        count = self._count = _chunk_count(self.original_chunk_size, self.original_file_size)
        if count and (self.final_transformed_chunk_size == 0
                      or (count > 1 and self.transformed_chunk_size == 0)):
            raise _corrupt(path, "a chunk of a non-empty segment has transformed size 0")
        self.transformed_file_size = ((count - 1) * self.transformed_chunk_size
                                      + self.final_transformed_chunk_size) if count else 0
        final_original = self.original_file_size - (count - 1) * self.original_chunk_size
        self.is_identity = count == 0 or (
            self.transformed_chunk_size == self.original_chunk_size
            and self.final_transformed_chunk_size == final_original)

    def _transformed(self, i: int) -> tuple[int, int]:
        size = self.final_transformed_chunk_size if i == self._count - 1 \
            else self.transformed_chunk_size
        return i * self.transformed_chunk_size, size

    def to_json(self) -> dict:
        return {"type": "fixed", "originalChunkSize": self.original_chunk_size,
                "originalFileSize": self.original_file_size,
                "transformedChunkSize": self.transformed_chunk_size,
                "finalTransformedChunkSize": self.final_transformed_chunk_size}

    def _key(self) -> tuple:
        return (self.original_chunk_size, self.original_file_size,
                self.transformed_chunk_size, self.final_transformed_chunk_size)

    def __repr__(self) -> str:
        return ("FixedSizeChunkIndex(original_chunk_size={}, original_file_size={}, "
                "transformed_chunk_size={}, final_transformed_chunk_size={})"
                .format(*self._key()))


class VariableSizeChunkIndex(ChunkIndex):
    """Each transformed chunk's size is listed (compressed chunks).

    ``encoded`` is the manifest's ``transformedChunks`` text when the index was parsed:
    :meth:`to_json` writes it back as read, so a manifest re-serializes byte for byte
    whatever zstd build wrote it."""

    __slots__ = ("transformed_sizes", "_ends", "_encoded")

    def __init__(self, original_chunk_size: int, original_file_size: int,
                 transformed_sizes, *, path: str = "<chunk index>",
                 encoded: str | None = None) -> None:
        self.original_chunk_size = _java_int(original_chunk_size, "originalChunkSize", path,
                                             minimum=1)
        self.original_file_size = _java_int(original_file_size, "originalFileSize", path)
        sizes = tuple(transformed_sizes)
        expected = _chunk_count(self.original_chunk_size, self.original_file_size)
        if len(sizes) != expected:
            raise _corrupt(path, f"the chunk index lists {len(sizes)} transformed chunks; "
                                 f"a file of {self.original_file_size} bytes in chunks of "
                                 f"{self.original_chunk_size} has {expected}")
        for i, size in enumerate(sizes):
            _java_int(size, f"transformedChunks[{i}]", path, minimum=1)
        self._count = len(sizes)
        self.transformed_sizes = sizes
        self._ends = list(accumulate(sizes))
        self.transformed_file_size = self._ends[-1] if sizes else 0
        self.is_identity = False
        self._encoded = encoded

    def _transformed(self, i: int) -> tuple[int, int]:
        size = self.transformed_sizes[i]
        return self._ends[i] - size, size

    def chunk_at_transformed(self, transformed_position: int) -> int:
        """The number of the chunk holding byte ``transformed_position`` of the object."""
        return bisect.bisect_right(self._ends, transformed_position)

    def to_json(self) -> dict:
        text = self._encoded if self._encoded is not None \
            else serialize_transformed_chunks(self.transformed_sizes)
        return {"type": "variable", "originalChunkSize": self.original_chunk_size,
                "originalFileSize": self.original_file_size, "transformedChunks": text}

    def _key(self) -> tuple:
        return (self.original_chunk_size, self.original_file_size, self.transformed_sizes)

    def __repr__(self) -> str:
        return (f"VariableSizeChunkIndex(original_chunk_size={self.original_chunk_size}, "
                f"original_file_size={self.original_file_size}, "
                f"chunks={len(self.transformed_sizes)})")


def chunk_index_from_json(obj: object, *, path: str) -> ChunkIndex:
    """The chunk index of a manifest's ``chunkIndex`` value; anything malformed or
    inconsistent raises :class:`~kafkastore.errors.CorruptManifestError` naming ``path``."""
    if not isinstance(obj, dict):
        raise _corrupt(path, f"chunkIndex is not an object: {type(obj).__name__}")
    kind = obj.get("type")
    fields = {"fixed": ("originalChunkSize", "originalFileSize", "transformedChunkSize",
                        "finalTransformedChunkSize"),
              "variable": ("originalChunkSize", "originalFileSize", "transformedChunks")}
    if kind not in fields:
        raise _corrupt(path, f"unknown chunk index type {kind!r} (fixed or variable)")
    missing = [name for name in fields[kind] if name not in obj]
    if missing:
        raise _corrupt(path, f"{kind} chunk index without {', '.join(missing)}")
    if kind == "fixed":
        return FixedSizeChunkIndex(*(obj[name] for name in fields[kind]), path=path)
    text = obj["transformedChunks"]
    sizes = deserialize_transformed_chunks(text, path=path)
    return VariableSizeChunkIndex(obj["originalChunkSize"], obj["originalFileSize"], sizes,
                                  path=path, encoded=text)


# -- the sizes' binary codec -----------------------------------------------------------


def _bytes_needed(value: int) -> int:
    return 1 if value <= 0xFF else 2 if value <= 0xFFFF else 3 if value <= 0xFFFFFF else 4


def encode_chunk_sizes(sizes) -> bytes:
    """The codec's bytes for ``sizes`` (non-negative Java ints; ValueError otherwise)."""
    values = list(sizes)
    for v in values:
        if type(v) is not int or not 0 <= v <= _INT_MAX:
            raise ValueError(f"chunk size {v!r} is not a non-negative Java int")
    count = len(values)
    if count == 0:
        return _I32.pack(0)
    if count == 1:
        return _I32.pack(1) + _I32.pack(values[0])
    base = min(values[:-1])
    width = max(_bytes_needed(v - base) for v in values[:-1])
    out = bytearray(_I32.pack(count) + _I32.pack(base) + bytes([width]))
    for v in values[:-1]:
        out += (v - base).to_bytes(width, "big")
    out += _I32.pack(values[-1])
    return bytes(out)


def decode_chunk_sizes(data: bytes, *, path: str) -> list[int]:
    """The sizes of the codec's bytes ``data``: the count is checked against the bytes
    present before anything is allocated, and the bytes must end where the sizes do."""
    data = bytes(data)
    have = len(data)
    if have < 4:
        raise _corrupt(path, f"chunk sizes: {have} bytes, too short for the count")
    count = _I32.unpack_from(data)[0]
    if count < 0:
        raise _corrupt(path, f"chunk sizes: negative count {count}")
    if count == 0:
        want = 4
    elif count == 1:
        want = 8
    else:
        if have < 9:
            raise _corrupt(path, f"chunk sizes: {have} bytes, too short for {count} sizes")
        width = data[8]
        if not 1 <= width <= 4:
            raise _corrupt(path, f"chunk sizes: {width} bytes per value (1 to 4)")
        want = 9 + (count - 1) * width + 4
    if have != want:
        raise _corrupt(path, f"chunk sizes: {count} sizes need {want} bytes, "
                             f"{have} present")
    if count == 0:
        return []
    if count == 1:
        values = [_I32.unpack_from(data, 4)[0]]
    else:
        base = _I32.unpack_from(data, 4)[0]
        values = [base + int.from_bytes(data[i:i + width], "big")
                  for i in range(9, 9 + (count - 1) * width, width)]
        values.append(_I32.unpack_from(data, have - 4)[0])
    for v in values:
        if not 0 <= v <= _INT_MAX:
            raise _corrupt(path, f"chunk sizes: size {v} is not a non-negative int")
    return values


def serialize_transformed_chunks(sizes) -> str:
    """The manifest's ``transformedChunks`` text: base64 of zstd (with its content size)
    of the codec's bytes (TransformedChunksSerializer)."""
    raw = encode_chunk_sizes(sizes)
    if len(raw) > MAX_DECOMPRESSED_SIZE:
        raise ValueError(f"encoded chunk index is too big ({len(raw)} bytes)")
    frame = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True).compress(raw)
    return base64.b64encode(frame).decode("ascii")


def deserialize_transformed_chunks(text: object, *, path: str) -> list[int]:
    """The sizes in a manifest's ``transformedChunks`` text (TransformedChunksDeserializer:
    base64, one zstd frame whose content size is at most :data:`MAX_DECOMPRESSED_SIZE`)."""
    if not isinstance(text, str):
        raise _corrupt(path, f"transformedChunks is not a string: {type(text).__name__}")
    # Java's basic decoder takes the padding as optional; nothing else outside the alphabet
    padded = text + "=" * (-len(text) % 4)
    try:
        frame = base64.b64decode(padded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _corrupt(path, "transformedChunks is not base64") from None
    try:
        size = zstandard.get_frame_parameters(frame).content_size
    except zstandard.ZstdError as exc:
        raise _corrupt(path, f"transformedChunks is not a zstd frame ({exc})") from None
    if size == zstandard.CONTENTSIZE_UNKNOWN or size == zstandard.CONTENTSIZE_ERROR \
            or not 0 <= size <= MAX_DECOMPRESSED_SIZE:
        shown = "unknown" if size in (zstandard.CONTENTSIZE_UNKNOWN,
                                       zstandard.CONTENTSIZE_ERROR) else size
        raise _corrupt(path, f"transformedChunks: invalid decompressed size {shown} "
                             f"(at most {MAX_DECOMPRESSED_SIZE})")
    try:
        raw = zstandard.ZstdDecompressor().decompress(frame, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise _corrupt(path, f"transformedChunks does not decompress ({exc})") from None
    if len(raw) != size:
        raise _corrupt(path, f"transformedChunks decompresses to {len(raw)} bytes, its "
                             f"frame says {size}")
    return decode_chunk_sizes(raw, path=path)
