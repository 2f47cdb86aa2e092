"""The per-chunk transforms of a remote segment: zstd compression, then AES-GCM
encryption, each chunk on its own (Aiven's ``transform`` package).

Writing (``CompressionChunkEnumeration`` then ``EncryptionChunkEnumeration``): a chunk is
compressed to one zstd frame at level 3 with its content size (``ZstdCompressCtx`` with
``setContentSize(true)`` and the chunk's length pledged), then encrypted
(:func:`kafkastore.tiered.crypto.encrypt_chunk`). Reading reverses it: decrypt, then
decompress to exactly the chunk's original size; a frame without a content size, one
that says another size, or one that does not decode is a corrupt chunk. The plugin writes
no zstd checksum, so a flipped byte inside an unencrypted compressed chunk can decode to
wrong bytes of the right length: the record batches' CRCs catch it (GCM's tag catches any
change to an encrypted chunk).

Indexes are never compressed: each non-empty index is encrypted alone as one chunk when
the segment is encrypted, stored as it is otherwise; an empty index is no bytes at all.

Every failure raises :class:`~kafkastore.errors.CorruptChunkError` with the chunk's number,
its position in the transformed object and the object's path (for an index, the index's
name in the message and ``chunk`` None).

Thread-safety: a :class:`ChunkTransform` holds no mutable state once built; the
``zstandard`` contexts (not thread-safe, and ten times the cost of a small chunk's
decompression to make) are one per thread, so one transform serves many threads.
"""

from __future__ import annotations

import threading

import zstandard

from kafkastore.errors import CorruptChunkError, MissingKeyError
from kafkastore.tiered.chunk_index import ZSTD_LEVEL, Chunk
from kafkastore.tiered.crypto import KeyRing, decrypt_chunk, encrypt_chunk, new_aead
from kafkastore.tiered.manifest import SegmentManifest

__all__ = ["ChunkTransform", "segment_transform", "compress_chunk"]


_local = threading.local()


def _cctx() -> zstandard.ZstdCompressor:
    cctx = getattr(_local, "cctx", None)
    if cctx is None:
        cctx = _local.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL,
                                                      write_content_size=True)
    return cctx


def _dctx() -> zstandard.ZstdDecompressor:
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    return dctx


def compress_chunk(plain: bytes) -> bytes:
    """One zstd frame of ``plain`` with its content size, level 3 (the plugin's)."""
    return _cctx().compress(plain)


class ChunkTransform:
    """One segment's transforms: ``compression`` and, with ``data_key`` and ``aad``,
    encryption. ``identity`` when neither (the object's bytes are the original's)."""

    def __init__(self, compression: bool, data_key: bytes | None = None,
                 aad: bytes | None = None) -> None:
        if (data_key is None) != (aad is None):
            raise ValueError("encryption needs both the data key and the AAD")
        self.compression = bool(compression)
        self.data_key = None if data_key is None else bytes(data_key)
        self.aad = None if aad is None else bytes(aad)
        self._aead = None if data_key is None else new_aead(self.data_key)
        self.identity = not self.compression and data_key is None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_aead"] = None      # a cipher context does not pickle: made again
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        if self.data_key is not None:
            self._aead = new_aead(self.data_key)

    @property
    def encrypted(self) -> bool:
        return self._aead is not None

    def __repr__(self) -> str:
        return f"ChunkTransform(compression={self.compression}, encrypted={self.encrypted})"

    def transform(self, plain: bytes) -> bytes:
        """A chunk as uploaded: compressed, then encrypted."""
        data = compress_chunk(plain) if self.compression else bytes(plain)
        return encrypt_chunk(self._aead, self.aad, data) if self._aead else data

    def detransform(self, blob: bytes, chunk: Chunk, *, path: str) -> bytes:
        """The original bytes of ``chunk`` from its transformed bytes ``blob``."""
        def corrupt(why: str) -> CorruptChunkError:
            return CorruptChunkError(
                f"{path}: chunk {chunk.id} at byte {chunk.transformed_position} {why}",
                chunk=chunk.id, position=chunk.transformed_position, path=path)

        if len(blob) != chunk.transformed_size:
            raise corrupt(f"is {len(blob)} bytes, the chunk index says "
                          f"{chunk.transformed_size} (a truncated object?)")
        data = blob
        if self._aead is not None:
            data = decrypt_chunk(self._aead, self.aad, blob, chunk=chunk.id,
                                 position=chunk.transformed_position, path=path)
        if self.compression:
            data = self._decompress(data, chunk.original_size, corrupt)
        if len(data) != chunk.original_size:
            raise corrupt(f"gives {len(data)} bytes, the chunk index says "
                          f"{chunk.original_size}")
        return data

    @staticmethod
    def _decompress(frame: bytes, size: int, corrupt) -> bytes:
        try:
            declared = zstandard.get_frame_parameters(frame).content_size
        except zstandard.ZstdError as exc:
            raise corrupt(f"is not a zstd frame ({exc})") from None
        if declared != size:
            shown = "no content size" if declared == zstandard.CONTENTSIZE_UNKNOWN \
                else f"content size {declared}"
            raise corrupt(f"is a zstd frame with {shown}; the chunk is {size} bytes")
        try:
            out = _dctx().decompress(frame, max_output_size=size)
        except zstandard.ZstdError as exc:
            raise corrupt(f"does not decompress ({exc})") from None
        return out

    def transform_index(self, plain: bytes) -> bytes:
        """An index as stored in ``.indexes``: encrypted alone if the segment is, never
        compressed; nothing for an empty index."""
        if not plain:
            return b""
        return encrypt_chunk(self._aead, self.aad, plain) if self._aead else bytes(plain)

    def detransform_index(self, blob: bytes, *, name: str, path: str,
                          position: int | None = None) -> bytes:
        """The index ``name``'s bytes from its slice ``blob`` of the ``.indexes`` object
        (``position``: the slice's, for the error)."""
        if not blob or self._aead is None:
            return bytes(blob)
        return decrypt_chunk(self._aead, self.aad, blob, chunk=None, position=position,
                             path=path, what=f"the {name} index")


def segment_transform(manifest: SegmentManifest, key_ring: KeyRing | None, *,
                      path: str) -> ChunkTransform:
    """The transforms of the segment ``manifest`` describes (``path``: the manifest's);
    an encrypted segment's data key is unwrapped with ``key_ring``:
    :class:`~kafkastore.errors.MissingKeyError` naming the key id when the ring (or no
    ring) lacks it."""
    enc = manifest.encryption
    if enc is None:
        return ChunkTransform(manifest.compression)
    if key_ring is None:
        raise MissingKeyError(f"{path}: the segment is encrypted with RSA key "
                              f"{enc.key_id!r} and no key ring was given",
                              key_id=enc.key_id, path=path)
    data_key = key_ring.unwrap(enc.key_id, enc.encrypted_data_key, path=path)
    return ChunkTransform(manifest.compression, data_key, enc.aad)
