"""The chunk index of a remote segment (kafkastore.tiered.chunk_index): lookups, the sizes'
binary codec and its zstd/base64 text, and refusals of hostile manifests."""

from __future__ import annotations

import base64
import struct

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from kafkastore.errors import CorruptManifestError
from kafkastore.tiered.chunk_index import (
    MAX_DECOMPRESSED_SIZE,
    Chunk,
    FixedSizeChunkIndex,
    VariableSizeChunkIndex,
    chunk_index_from_json,
    decode_chunk_sizes,
    deserialize_transformed_chunks,
    encode_chunk_sizes,
    serialize_transformed_chunks,
)

PATH = "mem://seg.rsm-manifest"


def test_fixed_index_lookups_match_aiven_arithmetic():
    index = FixedSizeChunkIndex(100, 250, 110, 80)
    assert len(index) == 3
    assert index.chunks() == [Chunk(0, 0, 100, 0, 110), Chunk(1, 100, 100, 110, 110),
                              Chunk(2, 200, 50, 220, 80)]
    assert index.transformed_file_size == 300
    assert not index.is_identity
    assert index.find(0).id == 0 and index.find(99).id == 0 and index.find(100).id == 1
    assert index.find(249).id == 2 and index.find(250) is None
    assert [c.id for c in index.chunks_for_range(99, 2)] == [0, 1]
    assert [c.id for c in index.chunks_for_range(150, 1000)] == [1, 2]
    assert index.chunks_for_range(250, 10) == [] and index.chunks_for_range(5, 0) == []
    with pytest.raises(ValueError):
        index.find(-1)


def test_identity_and_empty_fixed_index():
    plain = FixedSizeChunkIndex(4096, 204879, 4096, 79)
    assert plain.is_identity and len(plain) == 51 and plain.transformed_file_size == 204879
    small = FixedSizeChunkIndex(4096, 100, 4096, 100)
    assert small.is_identity and small.chunks() == [Chunk(0, 0, 100, 0, 100)]
    empty = FixedSizeChunkIndex(4096, 0, 4096, 0)
    assert len(empty) == 0 and empty.find(0) is None and empty.transformed_file_size == 0


def test_variable_index_positions():
    index = VariableSizeChunkIndex(100, 250, [30, 20, 10])
    assert index.chunks() == [Chunk(0, 0, 100, 0, 30), Chunk(1, 100, 100, 30, 20),
                              Chunk(2, 200, 50, 50, 10)]
    assert index.transformed_file_size == 60
    assert index.chunk_at_transformed(29) == 0 and index.chunk_at_transformed(30) == 1


@pytest.mark.parametrize("sizes", [[], [7], [0, 5], [1000000, 1000010, 1000020, 3],
                                   [5, 300, 70000, 2**24 + 5, 9], [2**31 - 1, 0, 2**31 - 1]])
def test_codec_round_trips(sizes):
    raw = encode_chunk_sizes(sizes)
    assert decode_chunk_sizes(raw, path=PATH) == sizes
    assert deserialize_transformed_chunks(serialize_transformed_chunks(sizes),
                                          path=PATH) == sizes


def test_codec_layout_is_aivens():
    raw = encode_chunk_sizes([1000000, 1000010, 1000020, 3])
    assert raw == struct.pack(">iib", 4, 1000000, 1) + bytes([0, 10, 20]) + struct.pack(">i", 3)
    assert encode_chunk_sizes([]) == struct.pack(">i", 0)
    assert encode_chunk_sizes([9]) == struct.pack(">ii", 1, 9)
    with pytest.raises(ValueError):
        encode_chunk_sizes([-1, 2])


@pytest.mark.parametrize("raw, why", [
    (b"\x00\x00", "too short for the count"),
    (struct.pack(">i", -5), "negative count"),
    (struct.pack(">i", 1), "need 8 bytes"),
    (struct.pack(">iib", 2**31 - 1, 0, 1) + b"\x00" * 20, "present"),      # huge count
    (struct.pack(">iib", 3, 10, 1) + b"\x01", "present"),
    (struct.pack(">iib", 3, 10, 5) + b"\x01" * 14, "bytes per value"),
    (struct.pack(">iib", 2, 10, 1) + b"\x01" + struct.pack(">i", 4) + b"x", "present"),
    (struct.pack(">iib", 2, 2**31 - 2, 1) + b"\x09" + struct.pack(">i", 4), "not a non-neg"),
    (struct.pack(">ii", 1, -4), "not a non-neg"),
])
def test_codec_refuses_hostile_bytes(raw, why):
    with pytest.raises(CorruptManifestError, match=why) as info:
        decode_chunk_sizes(raw, path=PATH)
    assert info.value.path == PATH and PATH in str(info.value)


def _frame(raw: bytes, **kw) -> str:
    return base64.b64encode(zstandard.ZstdCompressor(**kw).compress(raw)).decode()


def test_text_refusals():
    with pytest.raises(CorruptManifestError, match="not base64"):
        deserialize_transformed_chunks("KLUv/S*@", path=PATH)
    with pytest.raises(CorruptManifestError, match="not a zstd frame"):
        deserialize_transformed_chunks(base64.b64encode(b"hello world!").decode(), path=PATH)
    with pytest.raises(CorruptManifestError, match="not a string"):
        deserialize_transformed_chunks(12, path=PATH)
    no_size = _frame(encode_chunk_sizes([1, 2]), write_content_size=False)
    with pytest.raises(CorruptManifestError, match="invalid decompressed size unknown"):
        deserialize_transformed_chunks(no_size, path=PATH)
    # a bomb: beyond the plugin's maximum, refused from the frame header alone
    bomb = _frame(b"\x00" * (MAX_DECOMPRESSED_SIZE + 1), level=1)
    with pytest.raises(CorruptManifestError, match="invalid decompressed size"):
        deserialize_transformed_chunks(bomb, path=PATH)
    # a frame whose declared content size is a lie
    frame = bytearray(zstandard.ZstdCompressor().compress(encode_chunk_sizes([5, 6, 7])))
    liar = base64.b64encode(bytes(frame[:-4])).decode()
    with pytest.raises(CorruptManifestError):
        deserialize_transformed_chunks(liar, path=PATH)
    # padding is optional, as for Java's decoder
    text = serialize_transformed_chunks([4, 5, 6])
    assert deserialize_transformed_chunks(text.rstrip("="), path=PATH) == [4, 5, 6]


def test_json_round_trip_and_refusals():
    fixed = {"type": "fixed", "originalChunkSize": 4096, "originalFileSize": 29190,
             "transformedChunkSize": 4096, "finalTransformedChunkSize": 518}
    assert chunk_index_from_json(fixed, path=PATH).to_json() == fixed
    text = serialize_transformed_chunks([30, 20, 10])
    var = {"type": "variable", "originalChunkSize": 100, "originalFileSize": 250,
           "transformedChunks": text}
    parsed = chunk_index_from_json(var, path=PATH)
    assert parsed.to_json() == var and parsed == VariableSizeChunkIndex(100, 250, [30, 20, 10])
    bad = [
        ({**fixed, "type": "other"}, "unknown chunk index type"),
        ({k: v for k, v in fixed.items() if k != "originalFileSize"}, "without"),
        ({**fixed, "originalChunkSize": 0}, "originalChunkSize"),
        ({**fixed, "originalFileSize": -1}, "originalFileSize"),
        ({**fixed, "originalFileSize": 2**31}, "originalFileSize"),
        ({**fixed, "transformedChunkSize": True}, "transformedChunkSize"),
        ({**fixed, "finalTransformedChunkSize": 0}, "transformed size 0"),
        ({**var, "originalFileSize": 350}, "lists 3 transformed chunks"),
        ({**var, "transformedChunks": serialize_transformed_chunks([30, 0, 10])},
         r"transformedChunks\[1\]"),
        ("nope", "not an object"),
    ]
    for obj, why in bad:
        with pytest.raises(CorruptManifestError, match=why):
            chunk_index_from_json(obj, path=PATH)


@given(st.lists(st.integers(0, 2**31 - 1), max_size=40))
def test_codec_round_trips_any_sizes(sizes):
    assert decode_chunk_sizes(encode_chunk_sizes(sizes), path=PATH) == sizes


@given(st.integers(1, 5000), st.lists(st.integers(1, 9000), min_size=1, max_size=30),
       st.data())
def test_lookups_agree_with_the_chunk_list(chunk_size, sizes, data):
    file_size = (len(sizes) - 1) * chunk_size + data.draw(st.integers(1, chunk_size))
    for index in (VariableSizeChunkIndex(chunk_size, file_size, sizes),
                  FixedSizeChunkIndex(chunk_size, file_size, sizes[0], sizes[-1])):
        chunks = index.chunks()
        assert sum(c.original_size for c in chunks) == file_size
        assert chunks[-1].transformed_position + chunks[-1].transformed_size == \
            index.transformed_file_size
        position = data.draw(st.integers(0, file_size + 3))
        found = index.find(position)
        if position >= file_size:
            assert found is None
        else:
            assert found.original_position <= position < \
                found.original_position + found.original_size
        size = data.draw(st.integers(0, file_size))
        covered = index.chunks_for_range(position, size)
        assert covered == [c for c in chunks if size and c.original_position < position + size
                           and position < c.original_position + c.original_size]
