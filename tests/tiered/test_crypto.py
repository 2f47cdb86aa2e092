"""Encryption of remote segments (kafkastore.tiered.crypto and .transform): AES-GCM chunks,
RSA-OAEP (SHA3-512, MGF1 over SHA3-512, as BouncyCastle reads the plugin's cipher name)
data keys, the key ring, and the typed errors of wrong keys and damaged chunks. The OAEP
parameters are checked against an independent oracle in test_tiered_oaep.py."""

from __future__ import annotations

import pickle

import pytest

from kafkastore.errors import ConfigError, CorruptChunkError, CorruptManifestError, MissingKeyError
from kafkastore.tiered.chunk_index import FixedSizeChunkIndex, VariableSizeChunkIndex
from kafkastore.tiered.crypto import (
    IV_SIZE,
    TAG_SIZE,
    KeyRing,
    decrypt_chunk,
    encrypt_chunk,
    new_data_key_and_aad,
)
from kafkastore.tiered.manifest import EncryptionMetadata, SegmentManifest
from kafkastore.tiered.transform import ChunkTransform, segment_transform

PATH = "mem://t/0/00000000000000000000-x.log"


@pytest.fixture(scope="module")
def ring_and_pem():
    return KeyRing.generate("key-a", bits=2048)


def test_unwrap_errors(ring_and_pem, tmp_path):
    ring, pem = ring_and_pem
    key_id, blob = ring.wrap(b"d" * 32)
    with pytest.raises(MissingKeyError) as info:
        ring.unwrap("key-b", blob, path=PATH)
    assert info.value.key_id == "key-b" and "key-b" in str(info.value)
    other, _ = KeyRing.generate("key-a")
    with pytest.raises(CorruptManifestError, match="does not decrypt with RSA key 'key-a'"):
        other.unwrap("key-a", blob, path=PATH)
    flipped = bytearray(blob)
    flipped[100] ^= 1
    with pytest.raises(CorruptManifestError):
        ring.unwrap("key-a", bytes(flipped), path=PATH)
    with pytest.raises(CorruptManifestError):
        ring.unwrap("key-a", blob[:-1], path=PATH)


def test_key_ring_sources_spec_and_pickle(ring_and_pem, tmp_path):
    ring, pem = ring_and_pem
    (tmp_path / "a.pem").write_bytes(pem)
    _, pem2 = KeyRing.generate("b")
    (tmp_path / "b.pem").write_bytes(pem2)
    spec = KeyRing.from_spec(f"a={tmp_path / 'a.pem'}, b={tmp_path / 'b.pem'};active=b")
    assert spec.key_ids == ["a", "b"] and spec.active_key_id == "b"
    assert KeyRing({"x": pem.decode()}).active_key_id == "x"
    copy = pickle.loads(pickle.dumps(spec))
    key_id, blob = copy.wrap(b"z" * 32)
    assert key_id == "b" and spec.unwrap("b", blob, path=PATH) == b"z" * 32
    assert b"PUBLIC KEY" in spec.public_key_pem("a")
    with pytest.raises(ConfigError):
        KeyRing({"a": pem, "b": pem2}).wrap(b"x" * 32)      # two keys, none active
    for bad in ("", "a", "a=;active=a", f"a={tmp_path / 'a.pem'};bogus=1",
                f"a={tmp_path / 'missing.pem'}"):
        with pytest.raises(ConfigError):
            KeyRing.from_spec(bad)
    with pytest.raises(ConfigError):
        KeyRing({"a:b": pem})
    with pytest.raises(ConfigError):
        KeyRing({"a": b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"})


def test_chunk_encryption_round_trip_and_damage():
    key, aad = new_data_key_and_aad()
    assert len(key) == 32 and len(aad) == 32 and key != aad
    blob = encrypt_chunk(key, aad, b"hello chunk")
    assert len(blob) == IV_SIZE + len(b"hello chunk") + TAG_SIZE
    assert decrypt_chunk(key, aad, blob, chunk=3, position=40, path=PATH) == b"hello chunk"
    bad = [(new_data_key_and_aad()[0], aad, blob), (key, b"other aad", blob),
           (key, aad, blob[:-1]), (key, aad, blob[:IV_SIZE + TAG_SIZE - 1]),
           (key, aad, bytes([blob[0] ^ 1]) + blob[1:])]
    for k, a, b in bad:
        with pytest.raises(CorruptChunkError) as info:
            decrypt_chunk(k, a, b, chunk=3, position=40, path=PATH)
        assert (info.value.chunk, info.value.position, info.value.path) == (3, 40, PATH)
        assert "chunk 3" in str(info.value)


@pytest.mark.parametrize("compression, encrypted", [(False, False), (True, False),
                                                    (False, True), (True, True)])
def test_chunk_transform_round_trip_and_typed_errors(compression, encrypted):
    key, aad = new_data_key_and_aad() if encrypted else (None, None)
    transform = ChunkTransform(compression, key, aad)
    assert transform.identity == (not compression and not encrypted)
    plain = [bytes([i]) * 100 + b"tail" * i for i in range(3)]
    blobs = [transform.transform(p) for p in plain]
    sizes = [len(b) for b in blobs]
    original = [len(p) for p in plain]
    # chunks of an index over these (sizes chosen by the blobs, not an even split)
    pos = tpos = 0
    from kafkastore.tiered.chunk_index import Chunk
    for i, (blob, p) in enumerate(zip(blobs, plain)):
        chunk = Chunk(i, pos, original[i], tpos, sizes[i])
        assert transform.detransform(blob, chunk, path=PATH) == p
        if not transform.identity:
            # zstd frames carry no checksum (the plugin writes none): without
            # encryption only a broken frame is detectable, here its magic number
            damaged = bytearray(blob)
            damaged[len(damaged) // 2 if encrypted else 0] ^= 0x40
            with pytest.raises(CorruptChunkError) as info:
                transform.detransform(bytes(damaged), chunk, path=PATH)
            assert info.value.chunk == i and info.value.position == tpos
        with pytest.raises(CorruptChunkError, match=f"chunk {i}"):
            transform.detransform(blob[:-1], chunk, path=PATH)
        pos += original[i]
        tpos += sizes[i]
    index_blob = transform.transform_index(b"index bytes")
    assert transform.transform_index(b"") == b""
    assert transform.detransform_index(index_blob, name="offset", path=PATH) == b"index bytes"
    if encrypted:
        with pytest.raises(CorruptChunkError, match="the offset index"):
            transform.detransform_index(index_blob[:-2], name="offset", path=PATH)


def test_segment_transform_unwraps_or_names_the_missing_key(ring_and_pem):
    ring, _ = ring_and_pem
    key, aad = new_data_key_and_aad()
    key_id, wrapped = ring.wrap(key)
    manifest = SegmentManifest(FixedSizeChunkIndex(10, 10, 38, 38), {}, False,
                               EncryptionMetadata(key_id, wrapped, aad), None)
    transform = segment_transform(manifest, ring, path=PATH)
    assert transform.data_key == key and transform.aad == aad
    for missing_ring in (None, KeyRing()):
        with pytest.raises(MissingKeyError) as info:
            segment_transform(manifest, missing_ring, path=PATH)
        assert info.value.key_id == "key-a" and "key-a" in str(info.value)
    plain = SegmentManifest(VariableSizeChunkIndex(10, 10, [20]), {}, True, None, None)
    assert segment_transform(plain, None, path=PATH).compression


def test_zstd_frame_without_content_size_is_corrupt():
    import zstandard

    from kafkastore.tiered.chunk_index import Chunk
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(b"x" * 50)
    chunk = Chunk(0, 0, 50, 0, len(frame))
    with pytest.raises(CorruptChunkError, match="no content size"):
        ChunkTransform(True).detransform(frame, chunk, path=PATH)
    wrong = zstandard.ZstdCompressor().compress(b"x" * 49)
    with pytest.raises(CorruptChunkError, match="content size 49"):
        ChunkTransform(True).detransform(wrong, Chunk(0, 0, 50, 0, len(wrong)), path=PATH)
