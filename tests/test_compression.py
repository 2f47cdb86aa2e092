"""Tests for kafkastore.compression: Kafka's codec framings, level rules,
decompression bounds, robustness against garbage, cross-implementation
oracles, and the shared reference vectors."""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

cramjam = pytest.importorskip("cramjam")
lz4_block = pytest.importorskip("lz4.block")
lz4_frame = pytest.importorskip("lz4.frame")
xxhash = pytest.importorskip("xxhash")
zstandard = pytest.importorskip("zstandard")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkastore import compression as C  # noqa: E402
from kafkastore.errors import (  # noqa: E402
    CorruptRecordError,
    KafkaStoreError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from kafkastore.types import CompressionType  # noqa: E402

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
MIB = 1024 * 1024
XERIAL_HEADER = bytes.fromhex("82534e415050590000000001" "00000001")


def magics_for(codec):
    return [2] if codec == ZSTD else [0, 1, 2]


def realistic_payload(n_records: int = 1000) -> bytes:
    """Records shaped like a real batch: 16-byte keys, ~100-byte JSON values."""
    out = bytearray()
    for i in range(n_records):
        key = b"key-%010d-ab" % i
        value = json.dumps(
            {
                "id": i,
                "user": "u%07d" % ((i * 7919) % 1000003),
                "event": ("click", "view", "buy")[i % 3],
                "ts": 1700000000000 + i * 13,
                "score": (i * 37) % 1000,
                "tag": "%08x" % ((i * 2654435761) & 0xFFFFFFFF),
            },
            separators=(",", ":"),
        ).encode()[:100]
        out += bytes((0, len(key))) + key + bytes((len(value),)) + value
    return bytes(out)


def payload_of_size(n: int) -> bytes:
    base = realistic_payload(200)
    mixed = base + os.urandom(4096)  # some incompressible stretches too
    reps = n // len(mixed) + 1
    return (mixed * reps)[:n]


SIZES = [0, 1, 100, 65535, 65536, 65537, MIB]
LEVELS = {
    NONE: [None],
    GZIP: [None, 1, 9, -1],
    SNAPPY: [None],
    LZ4: [None, 1, 9, 12, 17],
    ZSTD: [None, 1, -5, 19],
}


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_sizes_levels_magics(codec, size):
    data = payload_of_size(size)
    for level in LEVELS[codec]:
        if level is not None and size == MIB and (codec, level) in ((ZSTD, 19), (LZ4, 17)):
            continue  # slow levels: covered at smaller sizes
        for magic in magics_for(codec):
            comp = C.compress(codec, data, level, magic=magic)
            assert type(comp) is bytes
            out = C.decompress(codec, comp, magic=magic)
            assert type(out) is bytes
            assert out == data, (codec, level, magic, size)


@pytest.mark.parametrize("codec", CODECS)
def test_random_data_round_trip(codec):
    data = os.urandom(200_000)  # incompressible: lz4 stores blocks raw
    comp = C.compress(codec, data)
    assert C.decompress(codec, comp) == data


@pytest.mark.parametrize("codec", CODECS)
def test_bytes_like_inputs(codec):
    data = payload_of_size(70_000)
    comp = C.compress(codec, data)
    big = b"\xAA" * 13 + comp + b"\x55" * 7
    views = [
        comp,
        bytearray(comp),
        memoryview(comp),
        memoryview(big)[13 : 13 + len(comp)],  # slice of a larger buffer
        memoryview(bytearray(big))[13 : 13 + len(comp)],
    ]
    for v in views:
        assert C.decompress(codec, v) == data
    # compress accepts the same kinds
    for v in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        assert C.decompress(codec, C.compress(codec, v)) == data
    # a strided (non-contiguous) view is accepted too (copied internally)
    strided = memoryview(bytes(x for x in data[:5000] for _ in (0, 1)))[::2]
    assert C.decompress(codec, C.compress(codec, strided)) == data[:5000]


def test_numpy_buffer_input():
    np = pytest.importorskip("numpy")
    data = payload_of_size(100_000)
    arr = np.frombuffer(C.compress(ZSTD, data), dtype=np.uint8)
    assert C.decompress(ZSTD, arr) == data
    arr32 = np.frombuffer(data[: len(data) // 4 * 4], dtype=np.uint32)
    assert C.decompress(LZ4, C.compress(LZ4, arr32)) == data[: len(data) // 4 * 4]


def test_enum_codec_ids_accepted():
    data = payload_of_size(5000)
    for ct in CompressionType:
        assert C.decompress(ct, C.compress(ct, data)) == data


def test_none_codec_identity_and_bound():
    data = b"abc" * 10
    assert C.compress(NONE, data) is data
    assert C.decompress(NONE, data) is data
    assert C.decompress(NONE, bytearray(data)) == data
    assert C.decompress(NONE, data, max_size=30) == data
    with pytest.raises(RecordTooLargeError) as ei:
        C.decompress(NONE, data, max_size=29)
    assert ei.value.limit == 29


@pytest.mark.parametrize("codec", COMPRESSED)
def test_max_size_boundary_exact(codec):
    data = payload_of_size(200_000)
    comp = C.compress(codec, data)
    assert C.decompress(codec, comp, max_size=len(data)) == data
    with pytest.raises(RecordTooLargeError) as ei:
        C.decompress(codec, comp, max_size=len(data) - 1)
    assert ei.value.limit == len(data) - 1
    assert isinstance(ei.value, KafkaStoreError)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_max_size_zero(codec):
    assert C.decompress(codec, C.compress(codec, b""), max_size=0) == b""
    with pytest.raises(RecordTooLargeError):
        C.decompress(codec, C.compress(codec, b"x"), max_size=0)


def test_negative_max_size_rejected():
    with pytest.raises(ValueError):
        C.decompress(GZIP, C.compress(GZIP, b"x"), max_size=-1)


def test_public_api_names():
    assert set(C.__all__) == {
        "DEFAULT_MAX_DECOMPRESSED_BYTES",
        "compress",
        "decompress",
        "validate_level",
    }
    assert C.DEFAULT_MAX_DECOMPRESSED_BYTES == 128 * MIB


# ------------------------------------------------------------- codec / magic ids


@pytest.mark.parametrize("bad", [5, 6, 7, -1, 8, 255, "gzip", 1.0, None, True])
def test_unknown_codec_rejected(bad):
    with pytest.raises(UnsupportedCompressionError):
        C.compress(bad, b"abc")
    with pytest.raises(UnsupportedCompressionError):
        C.decompress(bad, b"abc")
    with pytest.raises(UnsupportedCompressionError):
        C.validate_level(bad, None)


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_requires_magic_2(magic):
    with pytest.raises(UnsupportedCompressionError):
        C.compress(ZSTD, b"abc", magic=magic)
    with pytest.raises(UnsupportedCompressionError):
        C.decompress(ZSTD, C.compress(ZSTD, b"abc"), magic=magic)


def test_bad_magic_argument():
    with pytest.raises(ValueError):
        C.compress(GZIP, b"abc", magic=3)
    with pytest.raises(CorruptRecordError):
        C.decompress(GZIP, C.compress(GZIP, b"abc"), magic=3)


# ------------------------------------------------------------------ levels


@pytest.mark.parametrize(
    "codec,good,bad",
    [
        (GZIP, [-1, 1, 5, 9], [0, 10, -2, 100]),
        (LZ4, [1, 9, 17], [0, 18, -1]),
        (ZSTD, [-131072, -1, 0, 3, 22], [23, -131073, 100]),
        (SNAPPY, [], [0, 1, -1]),
        (NONE, [], [0, 1]),
    ],
)
def test_level_validation(codec, good, bad):
    C.validate_level(codec, None)
    for lv in good:
        C.validate_level(codec, lv)
        assert C.decompress(codec, C.compress(codec, b"hello hello", lv)) == b"hello hello"
    for lv in bad:
        with pytest.raises(ValueError):
            C.validate_level(codec, lv)
        with pytest.raises(ValueError):
            C.compress(codec, b"x", lv)


def test_level_type_errors():
    with pytest.raises(TypeError):
        C.validate_level(GZIP, "6")
    with pytest.raises(TypeError):
        C.validate_level(GZIP, 6.0)
    with pytest.raises(TypeError):
        C.validate_level(GZIP, True)


def test_lz4_level_mapping_matches_kafka():
    """Kafka's Lz4BlockOutputStream uses lz4-java's fast compressor for the
    default level 9 and LZ4 HC at `level` for every other level."""
    data = payload_of_size(65536)
    blk = lambda comp: comp[11:-4]  # 7-byte header + 4-byte block size; end mark
    fast = lz4_block.compress(data, store_size=False)
    assert blk(C.compress(LZ4, data)) == fast
    assert blk(C.compress(LZ4, data, 9)) == fast
    for level in (1, 4, 12):
        hc = lz4_block.compress(data, mode="high_compression", compression=level, store_size=False)
        assert blk(C.compress(LZ4, data, level)) == hc


def test_gzip_level_default_is_6():
    data = payload_of_size(100_000)
    assert C.compress(GZIP, data) == C.compress(GZIP, data, 6) == C.compress(GZIP, data, -1)
    assert C.compress(GZIP, data, 1) != C.compress(GZIP, data, 9)


def test_zstd_level_default_is_3():
    data = payload_of_size(100_000)
    assert C.compress(ZSTD, data) == zstandard.ZstdCompressor(level=3).compress(data)
    assert C.compress(ZSTD, data, 19) == zstandard.ZstdCompressor(level=19).compress(data)


# ------------------------------------------------------------- byte-level format


def test_gzip_bytes_reproducible_standard_member():
    data = payload_of_size(50_000)
    a = C.compress(GZIP, data)
    assert a == C.compress(GZIP, data)  # mtime 0: reproducible
    assert a[:4] == b"\x1f\x8b\x08\x00"  # magic, deflate, no flags
    assert a[4:8] == b"\0\0\0\0"  # mtime 0
    assert struct.unpack("<I", a[-4:])[0] == len(data)  # ISIZE
    assert struct.unpack("<I", a[-8:-4])[0] == zlib.crc32(data)
    assert gzip.decompress(a) == data


def _parse_xerial(comp):
    assert comp[:16] == XERIAL_HEADER
    pos, blocks = 16, []
    while pos < len(comp):
        (n,) = struct.unpack_from(">i", comp, pos)
        blocks.append(comp[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(comp)
    return blocks


def test_snappy_xerial_framing_bytes():
    assert C.compress(SNAPPY, b"") == XERIAL_HEADER
    data = payload_of_size(100_000)
    comp = C.compress(SNAPPY, data)
    blocks = _parse_xerial(comp)
    assert len(blocks) == 4  # 32 KiB per block: 32768 * 3 + 1696
    sizes = [len(bytes(cramjam.snappy.decompress_raw(b))) for b in blocks]
    assert sizes == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks) == data


def _lz4_hc(desc: bytes) -> int:
    return (xxhash.xxh32_intdigest(desc) >> 8) & 0xFF


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_lz4_frame_header_bytes(magic):
    data = payload_of_size(150_000)
    comp = C.compress(LZ4, data, magic=magic)
    assert comp[:4] == b"\x04\x22\x4d\x18"
    assert comp[4] == 0x60  # FLG: version 01, independent blocks, nothing else
    assert comp[5] == 0x40  # BD: 64 KiB blocks
    if magic == 0:
        # KAFKA-3160: checksum over magic number + FLG + BD
        assert comp[6] == _lz4_hc(comp[0:6])
        assert comp[6] != _lz4_hc(comp[4:6])
    else:
        assert comp[6] == _lz4_hc(comp[4:6]) == 0x82
    assert comp[-4:] == b"\0\0\0\0"
    # blocks: 64 KiB each, none larger, sizes consistent
    pos, total = 7, 0
    while True:
        (w,) = struct.unpack_from("<I", comp, pos)
        pos += 4
        if w == 0:
            break
        size = w & 0x7FFFFFFF
        body = comp[pos : pos + size]
        raw = body if w >> 31 else lz4_block.decompress(body, uncompressed_size=65536)
        assert len(raw) <= 65536
        total += len(raw)
        pos += size
    assert pos == len(comp) and total == len(data)


def test_lz4_incompressible_block_stored():
    data = os.urandom(65536 + 100)
    comp = C.compress(LZ4, data)
    (w,) = struct.unpack_from("<I", comp, 7)
    assert w == 0x80000000 | 65536
    assert comp[11 : 11 + 65536] == data[:65536]
    assert C.decompress(LZ4, comp) == data


def test_lz4_magic0_header_checksum_handling():
    data = payload_of_size(10_000)
    v0 = C.compress(LZ4, data, magic=0)
    v2 = C.compress(LZ4, data, magic=2)
    assert v0[:6] == v2[:6] and v0[7:] == v2[7:] and v0[6] != v2[6]
    # magic 0 readers ignore HC entirely: both checksums (and garbage) decode
    for hc in (v0[6], v2[6], 0x00, 0xFF):
        patched = v0[:6] + bytes((hc,)) + v0[7:]
        assert C.decompress(LZ4, patched, magic=0) == data
    # magic 1/2 readers verify HC
    for magic in (1, 2):
        assert C.decompress(LZ4, v2, magic=magic) == data
        with pytest.raises(CorruptRecordError, match="descriptor"):
            C.decompress(LZ4, v0, magic=magic)


def test_lz4_linked_blocks_rejected():
    data = payload_of_size(200_000)
    linked = lz4_frame.compress(
        data, block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=True, content_checksum=False
    )
    assert not linked[4] & 0x20
    for magic in (0, 1, 2):
        with pytest.raises(CorruptRecordError, match="Dependent block"):
            C.decompress(LZ4, linked, magic=magic)


@pytest.mark.parametrize(
    "block_size",
    ["BLOCKSIZE_MAX64KB", "BLOCKSIZE_MAX256KB", "BLOCKSIZE_MAX1MB", "BLOCKSIZE_MAX4MB"],
)
@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize("checksums", [False, True])
def test_lz4_frames_from_python_lz4(block_size, store_size, checksums):
    data = payload_of_size(300_000)
    comp = lz4_frame.compress(
        data,
        block_size=getattr(lz4_frame, block_size),
        block_linked=False,
        content_checksum=checksums,
        block_checksum=checksums,
        store_size=store_size,
    )
    for magic in (0, 1, 2):
        assert C.decompress(LZ4, comp, magic=magic) == data


def test_lz4_checksums_verified():
    data = payload_of_size(100_000)
    comp = bytearray(
        lz4_frame.compress(data, block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,
                           block_checksum=True, content_checksum=False)
    )
    (w,) = struct.unpack_from("<I", comp, 7)
    comp[7 + 4 + (w & 0x7FFFFFFF)] ^= 1  # first block's checksum
    with pytest.raises(CorruptRecordError, match="Block checksum"):
        C.decompress(LZ4, bytes(comp))
    comp2 = bytearray(
        lz4_frame.compress(data, block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,
                           content_checksum=True)
    )
    comp2[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="Content checksum"):
        C.decompress(LZ4, bytes(comp2))


def test_lz4_reader_rules():
    good = C.compress(LZ4, b"hello world" * 10)

    def with_desc(flg, bd, magic=2):
        desc = bytes((flg, bd))
        return b"\x04\x22\x4d\x18" + desc + bytes((_lz4_hc(desc),)) + good[7:]

    with pytest.raises(CorruptRecordError, match="invalid magic"):
        C.decompress(LZ4, b"\x04\x22\x4d\x19" + good[4:])
    with pytest.raises(CorruptRecordError, match="Reserved bits"):
        C.decompress(LZ4, with_desc(0x61, 0x40))
    with pytest.raises(CorruptRecordError, match="Version"):
        C.decompress(LZ4, with_desc(0xA0, 0x40))
    with pytest.raises(CorruptRecordError, match="Block size value"):
        C.decompress(LZ4, with_desc(0x60, 0x30))
    with pytest.raises(CorruptRecordError, match="Reserved"):
        C.decompress(LZ4, with_desc(0x60, 0x41))
    with pytest.raises(CorruptRecordError, match="Reserved3"):
        C.decompress(LZ4, with_desc(0x60, 0xC0))
    assert C.decompress(LZ4, with_desc(0x60, 0x70)) == b"hello world" * 10  # 4 MiB blocks ok
    # block larger than the frame's maximum
    big = (
        b"\x04\x22\x4d\x18\x60\x40\x82"
        + struct.pack("<I", 0x80000000 | 65537)
        + b"\0" * 65537
        + b"\0" * 4
    )
    with pytest.raises(CorruptRecordError, match="exceeded max"):
        C.decompress(LZ4, big)
    # missing end mark / truncated block
    with pytest.raises(CorruptRecordError):
        C.decompress(LZ4, good[:-4])
    with pytest.raises(CorruptRecordError):
        C.decompress(LZ4, good[:-6])
    for cut in range(0, 7):
        with pytest.raises(CorruptRecordError):
            C.decompress(LZ4, good[:cut])
    # bytes after the end mark are ignored, as Kafka does
    assert C.decompress(LZ4, good + b"trailing junk") == b"hello world" * 10
    # a stored block with the 'uncompressed' bit and size 0 is an end mark (Kafka masks the bit)
    assert C.decompress(LZ4, good[:7] + struct.pack("<I", 0x80000000)) == b""


# ----------------------------------------------------------------- gzip rules


def test_gzip_concatenated_members():
    a, b = payload_of_size(30_000), os.urandom(5000)
    comp = C.compress(GZIP, a) + gzip.compress(b, mtime=0) + C.compress(GZIP, b"")
    assert C.decompress(GZIP, comp) == a + b
    # with optional header fields (FNAME, FCOMMENT, FEXTRA, FHCRC) in the 2nd member
    hdr = bytearray(b"\x1f\x8b\x08\x1e\0\0\0\0\0\xff")
    hdr += b"\x02\x00XY" + b"name\0" + b"comment\0"
    hdr += struct.pack("<H", zlib.crc32(bytes(hdr)) & 0xFFFF)
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = co.compress(b) + co.flush()
    member = bytes(hdr) + body + struct.pack("<II", zlib.crc32(b), len(b))
    assert C.decompress(GZIP, C.compress(GZIP, a) + member) == a + b


def test_gzip_trailing_garbage_ignored_like_java():
    """java.util.zip.GZIPInputStream (used by Kafka's GzipCompression) ignores
    bytes after a member that do not form a valid gzip header."""
    a = payload_of_size(20_000)
    comp = C.compress(GZIP, a)
    junks = (b"\0", b"garbage", b"\x1f", b"\x1f\x8b", b"\x1f\x8b\x07" + b"\0" * 20, b"\0" * 100)
    for junk in junks:
        assert C.decompress(GZIP, comp + junk) == a
    # FHCRC mismatch: header invalid for Java -> ignored
    hdr = b"\x1f\x8b\x08\x02\0\0\0\0\0\xff" + b"\x00\x00"
    assert C.decompress(GZIP, comp + hdr + b"more") == a


def test_gzip_corrupt_second_member_rejected():
    a = payload_of_size(20_000)
    second = C.compress(GZIP, b"second member data" * 100)
    with pytest.raises(CorruptRecordError):
        C.decompress(GZIP, C.compress(GZIP, a) + second[:-5])  # truncated
    bad = bytearray(second)
    bad[-6] ^= 0xFF  # CRC trailer
    with pytest.raises(CorruptRecordError):
        C.decompress(GZIP, C.compress(GZIP, a) + bytes(bad))


def test_gzip_truncated_and_corrupt():
    data = payload_of_size(50_000)
    comp = C.compress(GZIP, data)
    for cut in (0, 1, 5, 10, 20, len(comp) // 2, len(comp) - 1, len(comp) - 8):
        with pytest.raises(CorruptRecordError):
            C.decompress(GZIP, comp[:cut])
    bad = bytearray(comp)
    bad[-5] ^= 1  # ISIZE
    with pytest.raises(CorruptRecordError):
        C.decompress(GZIP, bytes(bad))
    with pytest.raises(CorruptRecordError):
        C.decompress(GZIP, zlib.compress(data))  # zlib wrapper, not gzip


# --------------------------------------------------------------- snappy rules


def test_snappy_unframed_raw_block():
    data = payload_of_size(100_000)
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert C.decompress(SNAPPY, raw) == data
    assert C.decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(b"x"))) == b"x"
    assert C.decompress(SNAPPY, b"\x00") == b""  # raw block of length 0


def test_snappy_unframed_python_snappy():
    snappy = pytest.importorskip("snappy", reason="python-snappy not installed")
    data = payload_of_size(80_000)
    assert C.decompress(SNAPPY, snappy.compress(data)) == data


def test_snappy_short_payload_starting_with_magic_is_raw():
    # fewer than 16 bytes: snappy-java treats the payload as a raw block
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, XERIAL_HEADER[:10])


def test_snappy_framing_rules():
    data = payload_of_size(70_000)
    comp = C.compress(SNAPPY, data)
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, b"")
    assert C.decompress(SNAPPY, XERIAL_HEADER) == b""
    # 1-3 trailing bytes where a length would start: ignored (snappy-java)
    for tail in (b"\0", b"\0\0", b"\xff\xff\xff"):
        assert C.decompress(SNAPPY, comp + tail) == data
    # negative length
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, comp + b"\xff\xff\xff\xfe")
    # length beyond the payload
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, comp[:-1])
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, XERIAL_HEADER + struct.pack(">i", 100) + b"\0" * 10)
    # zero-length chunk is not a valid raw block
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, XERIAL_HEADER + struct.pack(">i", 0))
    # concatenated xerial streams
    assert C.decompress(SNAPPY, comp + comp) == data + data
    assert C.decompress(SNAPPY, comp + C.compress(SNAPPY, b"")) == data
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, comp + XERIAL_HEADER[:10])  # header cut short
    # a chunk whose preamble disagrees with its content
    blk = bytearray(cramjam.snappy.compress_raw(b"abcdefgh" * 100))
    blk[0] += 1
    with pytest.raises(CorruptRecordError):
        C.decompress(SNAPPY, XERIAL_HEADER + struct.pack(">i", len(blk)) + bytes(blk))


# ----------------------------------------------------------------- zstd rules


def test_zstd_multiple_frames_without_content_size():
    """kafka-python #2594 / kafka-python-ng #202: frames without content size,
    several frames in one payload."""
    a, b = payload_of_size(300_000), payload_of_size(1000)
    nocs = zstandard.ZstdCompressor(level=3, write_content_size=False)
    for payload, expect in [
        (nocs.compress(a), a),
        (nocs.compress(a) + nocs.compress(b), a + b),
        (C.compress(ZSTD, a) + nocs.compress(b) + C.compress(ZSTD, b""), a + b),
        (zstandard.ZstdCompressor(write_checksum=True).compress(b) * 3, b * 3),
    ]:
        assert C.decompress(ZSTD, payload) == expect
        assert C.decompress(ZSTD, payload, max_size=len(expect)) == expect
        with pytest.raises(RecordTooLargeError):
            C.decompress(ZSTD, payload, max_size=len(expect) - 1)


def test_zstd_streamed_frame():
    data = payload_of_size(500_000)
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(level=3).stream_writer(buf, closefd=False) as w:
        for i in range(0, len(data), 10_000):
            w.write(data[i : i + 10_000])
    comp = buf.getvalue()
    assert zstandard.get_frame_parameters(comp).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert C.decompress(ZSTD, comp) == data
    assert C.decompress(ZSTD, comp, max_size=len(data)) == data


def test_zstd_skippable_frames_and_empty():
    data = payload_of_size(10_000)
    skip = struct.pack("<II", 0x184D2A53, 5) + b"hello"
    assert C.decompress(ZSTD, skip + C.compress(ZSTD, data) + skip) == data
    assert C.decompress(ZSTD, skip) == b""
    assert C.decompress(ZSTD, b"") == b""  # zstd-jni: empty source = empty stream
    assert C.decompress(ZSTD, C.compress(ZSTD, b"")) == b""
    with pytest.raises(CorruptRecordError):
        C.decompress(ZSTD, skip[:-1])


def test_zstd_truncation_and_trailing_garbage_rejected():
    data = payload_of_size(300_000)
    nocs = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True)
    for comp in (C.compress(ZSTD, data), nocs.compress(data)):
        for cut in (1, 3, 4, 5, 6, 10, len(comp) // 2, len(comp) - 1):
            with pytest.raises(CorruptRecordError):
                C.decompress(ZSTD, comp[:cut])
        for junk in (b"\0", b"abc", b"garbage!", b"\x28\xb5\x2f\xfd"):
            with pytest.raises(CorruptRecordError):
                C.decompress(ZSTD, comp + junk)


def test_zstd_frame_header_parse_matches_library():
    """Our frame walk must agree with zstandard's own header parser."""
    data = payload_of_size(70_000)
    variants = [
        zstandard.ZstdCompressor(
            level=lv, write_content_size=cs, write_checksum=ck, write_dict_id=False
        )
        for lv in (1, 3, 19)
        for cs in (True, False)
        for ck in (True, False)
    ]
    for sz in (0, 1, 255, 256, 300, 65791, 70_000):
        for cctx in variants:
            comp = cctx.compress(data[:sz])
            assert C.decompress(ZSTD, comp) == data[:sz]


def test_zstd_declared_content_size_mismatch():
    comp = bytearray(zstandard.ZstdCompressor(level=3).compress(b"abc" * 100))
    # header is 28 b5 2f fd 60 <fcs16 LE - 256>; declare 301 instead of 300
    assert comp[4] == 0x60
    fcs = struct.unpack_from("<H", comp, 5)[0] + 256
    assert fcs == 300
    struct.pack_into("<H", comp, 5, fcs + 1 - 256)
    with pytest.raises(CorruptRecordError):
        C.decompress(ZSTD, bytes(comp))


# ----------------------------------------------------------------- bombs


def _zstd_rle_bomb(total_bytes: int, with_size: bool = False) -> bytes:
    """A valid zstd frame of RLE blocks: 4 bytes of input per 128 KiB out."""
    nblocks = total_bytes // (128 * 1024)
    if with_size:
        head = b"\x28\xb5\x2f\xfd" + bytes((0xC0, 0x58)) + struct.pack("<Q", total_bytes)
    else:
        head = b"\x28\xb5\x2f\xfd" + bytes((0x00, 0x58))  # window 8 MiB, no content size
    out = bytearray(head)
    for i in range(nblocks):
        bh = (128 * 1024) << 3 | 1 << 1 | (1 if i == nblocks - 1 else 0)
        out += bh.to_bytes(3, "little") + b"\0"
    return bytes(out)


def _zstd_real_bomb(total: int) -> bytes:
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(level=1).stream_writer(buf, closefd=False) as w:
        zeros = bytes(MIB)
        for _ in range(total // MIB):
            w.write(zeros)
    return buf.getvalue()


def _zstd_pattern_bomb(total: int) -> bytes:
    # A repeating pattern, so the frame is made of *compressed* blocks (not
    # RLE). The scan can only bound each one by 128 KiB, so the limit must be
    # enforced by the streaming decoder.
    buf = io.BytesIO()
    chunk = (b"0123456789abcdefghij" * 52429)[:MIB]
    with zstandard.ZstdCompressor(level=3).stream_writer(buf, closefd=False) as w:
        for _ in range(total // MIB):
            w.write(chunk)
    return buf.getvalue()


def _gzip_bomb(total: int) -> bytes:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MIB)
    parts = [co.compress(zeros) for _ in range(total // MIB)]
    return b"".join(parts) + co.flush()


def _lz4_bomb(total: int) -> bytes:
    blk = lz4_block.compress(bytes(65536), store_size=False)
    one = struct.pack("<I", len(blk)) + blk
    return C.compress(LZ4, b"")[:7] + one * (total // 65536) + b"\0\0\0\0"


def _lz4_bomb_4mib_blocks(total: int) -> bytes:
    blk = lz4_block.compress(bytes(4 * MIB), store_size=False)
    desc = bytes((0x60, 0x70))
    head = b"\x04\x22\x4d\x18" + desc + bytes((_lz4_hc(desc),))
    return head + (struct.pack("<I", len(blk)) + blk) * (total // (4 * MIB)) + b"\0\0\0\0"


def _snappy_bomb(total: int) -> bytes:
    blk = bytes(cramjam.snappy.compress_raw(bytes(32768)))
    return XERIAL_HEADER + (struct.pack(">i", len(blk)) + blk) * (total // 32768)


def _snappy_declared_bomb() -> bytes:
    # raw block whose preamble claims 4 GiB - 1
    return b"\xff\xff\xff\xff\x0f" + b"\0" * 20


BOMBS = {
    "zstd-rle-1GiB": (ZSTD, lambda: _zstd_rle_bomb(1 << 30)),
    "zstd-rle-1GiB-declared": (ZSTD, lambda: _zstd_rle_bomb(1 << 30, with_size=True)),
    "zstd-real-256MiB": (ZSTD, lambda: _zstd_real_bomb(256 * MIB)),
    "zstd-pattern-256MiB": (ZSTD, lambda: _zstd_pattern_bomb(256 * MIB)),
    "zstd-declared-1TiB": (
        ZSTD,
        lambda: b"\x28\xb5\x2f\xfd\xc0\x58" + struct.pack("<Q", 1 << 40) + b"\x01\x00\x00",
    ),
    "gzip-64MiB": (GZIP, lambda: _gzip_bomb(64 * MIB)),
    "lz4-256MiB": (LZ4, lambda: _lz4_bomb(256 * MIB)),
    "lz4-4MiB-blocks-256MiB": (LZ4, lambda: _lz4_bomb_4mib_blocks(256 * MIB)),
    "snappy-32MiB": (SNAPPY, lambda: _snappy_bomb(32 * MIB)),  # snappy tops out near 21:1
    "snappy-declared-4GiB": (SNAPPY, _snappy_declared_bomb),
}
_BOMB_CACHE: dict = {}


def _bomb(name):
    if name not in _BOMB_CACHE:
        codec, make = BOMBS[name]
        _BOMB_CACHE[name] = (codec, make())
    return _BOMB_CACHE[name]


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bombs_bounded_time_and_memory(name):
    codec, payload = _bomb(name)
    assert len(payload) < 2 * MIB
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        with pytest.raises(RecordTooLargeError) as ei:
            C.decompress(codec, payload, max_size=MIB)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert ei.value.limit == MIB
    assert peak < 16 * MIB, f"{name}: peak {peak / MIB:.1f} MiB"
    assert elapsed < 2.0, f"{name}: {elapsed:.2f}s"


def test_zstd_rle_bomb_is_valid_zstd():
    # guard: the hand-built bomb must be a real, decodable frame
    small = _zstd_rle_bomb(4 * MIB)
    assert C.decompress(ZSTD, small) == bytes(4 * MIB)
    assert C.decompress(ZSTD, _zstd_rle_bomb(4 * MIB, with_size=True)) == bytes(4 * MIB)


def test_bombs_peak_rss_in_subprocess(tmp_path):
    """tracemalloc misses C-level allocations (zstd/lz4/cramjam buffers), so
    measure the resident-set high-water mark in a fresh interpreter."""
    pytest.importorskip("resource")  # the child process measures ru_maxrss
    payloads = {}
    names = ("zstd-rle-1GiB", "zstd-real-256MiB", "zstd-pattern-256MiB", "lz4-256MiB",
             "lz4-4MiB-blocks-256MiB", "snappy-32MiB", "gzip-64MiB")
    for name in names:
        codec, data = _bomb(name)
        p = tmp_path / f"{name}.bin"
        p.write_bytes(data)
        payloads[name] = (codec, str(p))
    script = textwrap.dedent(
        """
        import json, resource, sys
        from kafkastore import compression as C
        from kafkastore.errors import RecordTooLargeError
        jobs = json.loads(sys.argv[1])
        blobs = {k: (c, open(p, "rb").read()) for k, (c, p) in jobs.items()}
        C.decompress(4, C.compress(4, b"warm up" * 1000))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for name, (codec, blob) in blobs.items():
            try:
                C.decompress(codec, blob, max_size=1 << 20)
            except RecordTooLargeError:
                pass
            else:
                raise SystemExit(name + " did not raise")
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert C.__file__.startswith(sys.argv[2]), C.__file__
        print(json.dumps({"grow_kib": after - before}))
        """
    )
    # Import the same kafkastore this process tested (installed wheel or
    # source tree), never whatever sits in the current directory.
    pkg_root = str(Path(C.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_root, *(p for p in sys.path if p)]))
    res = subprocess.run(
        [sys.executable, "-c", script, json.dumps(payloads), pkg_root],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    grow_kib = json.loads(res.stdout.strip().splitlines()[-1])["grow_kib"]
    if sys.platform == "darwin":
        grow_kib //= 1024  # bytes there
    assert grow_kib < 64 * 1024, f"RSS grew by {grow_kib / 1024:.1f} MiB"


# ----------------------------------------------------------- garbage / fuzzing

FUZZ_MAX = 256 * 1024

_VALID_SAMPLES = {}


def _valid_samples():
    if not _VALID_SAMPLES:
        small = payload_of_size(3000)
        big = payload_of_size(140_000)
        for codec in CODECS:
            for magic in magics_for(codec):
                _VALID_SAMPLES[(codec, magic)] = [
                    C.compress(codec, small, magic=magic),
                    C.compress(codec, big, magic=magic),
                ]
        _VALID_SAMPLES[(LZ4, 2)].append(
            lz4_frame.compress(
                small, block_linked=False, block_checksum=True, content_checksum=True,
                store_size=True, block_size=lz4_frame.BLOCKSIZE_MAX256KB,
            )
        )
        _VALID_SAMPLES[(ZSTD, 2)].append(
            zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(small)
            * 2
        )
        _VALID_SAMPLES[(SNAPPY, 2)].append(bytes(cramjam.snappy.compress_raw(small)))
        _VALID_SAMPLES[(GZIP, 2)].append(C.compress(GZIP, small) * 2)
    return _VALID_SAMPLES


def _check_outcome(codec, payload, magic):
    try:
        out = C.decompress(codec, payload, max_size=FUZZ_MAX, magic=magic)
    except KafkaStoreError:
        return
    # anything else propagating fails the test with its own traceback
    assert type(out) is bytes
    assert len(out) <= FUZZ_MAX


codec_magic = st.sampled_from([(c, m) for c in CODECS for m in (0, 1, 2)])

# Scale with the active hypothesis profile (tests/conftest.py: default 100,
# ci 200, expensive 2000): these decoders are cheap, so run several times more.
_N = settings().max_examples


@settings(max_examples=4 * _N, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cm=codec_magic, payload=st.binary(max_size=300))
def test_fuzz_random_bytes(cm, payload):
    codec, magic = cm
    _check_outcome(codec, payload, magic)


@settings(max_examples=2 * _N, deadline=None)
@given(
    cm=codec_magic,
    prefix=st.sampled_from([b"", XERIAL_HEADER, b"\x04\x22\x4d\x18\x60\x40\x82",
                            b"\x04\x22\x4d\x18\x60\x40", b"\x28\xb5\x2f\xfd", b"\x1f\x8b\x08\x00"]),
    payload=st.binary(max_size=200),
)
def test_fuzz_random_bytes_after_valid_headers(cm, prefix, payload):
    codec, magic = cm
    _check_outcome(codec, prefix + payload, magic)


@settings(max_examples=5 * _N, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutations_of_valid_payloads(data):
    samples = _valid_samples()
    key = data.draw(st.sampled_from(sorted(samples)))
    codec, magic = key
    buf = bytearray(data.draw(st.sampled_from(samples[key])))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "append"]))
        n = len(buf)
        if op in ("flip", "set") and n:
            i = data.draw(st.integers(0, n - 1))
            if op == "flip":
                buf[i] ^= 1 << data.draw(st.integers(0, 7))
            else:
                buf[i] = data.draw(st.integers(0, 255))
        elif op == "truncate":
            del buf[data.draw(st.integers(0, n)) :]
        elif op == "insert":
            i = data.draw(st.integers(0, n))
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and n:
            i = data.draw(st.integers(0, n - 1))
            del buf[i : i + data.draw(st.integers(1, 8))]
        elif op == "append":
            buf += data.draw(st.binary(min_size=1, max_size=16))
    # also feed it as a memoryview slice of a larger buffer
    payload = bytes(buf)
    _check_outcome(codec, payload, magic)
    _check_outcome(codec, memoryview(b"\0" + payload + b"\0")[1:-1], magic)


@pytest.mark.parametrize("key", [(c, m) for c in CODECS for m in magics_for(c)])
def test_every_truncation_of_small_payload(key):
    codec, magic = key
    data = payload_of_size(2000)
    comp = C.compress(codec, data, magic=magic)
    for cut in range(len(comp)):
        _check_outcome(codec, comp[:cut], magic)


# ------------------------------------------------------------------ oracles


def _kafka_codec():
    return pytest.importorskip("kafka.codec", reason="kafka-python not installed")


def test_oracle_kafka_python_gzip():
    kc = _kafka_codec()
    data = payload_of_size(120_000)
    assert C.decompress(GZIP, kc.gzip_encode(data)) == data
    assert kc.gzip_decode(C.compress(GZIP, data)) == data


def test_oracle_kafka_python_snappy():
    kc = _kafka_codec()
    if not kc.has_snappy():
        pytest.skip("kafka-python snappy support (python-snappy) not installed")
    data = payload_of_size(120_000)
    for blocksize in (32 * 1024, 4096, 1 << 20):
        theirs = kc.snappy_encode(data, xerial_compatible=True, xerial_blocksize=blocksize)
        assert C.decompress(SNAPPY, theirs) == data
    assert C.decompress(SNAPPY, kc.snappy_encode(data, xerial_compatible=False)) == data
    ours = C.compress(SNAPPY, data)
    assert kc.snappy_decode(ours) == data
    # our xerial framing is byte-identical to kafka-python's with the same block size
    assert ours == kc.snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)


def test_oracle_kafka_python_lz4():
    kc = _kafka_codec()
    if not kc.has_lz4():
        pytest.skip("kafka-python lz4 support not installed")
    data = payload_of_size(200_000)
    for magic in (1, 2):
        assert C.decompress(LZ4, kc.lz4_encode(data), magic=magic) == data
        assert kc.lz4_decode(C.compress(LZ4, data, magic=magic)) == data
    if not hasattr(kc, "lz4_encode_old_kafka") or getattr(kc, "xxhash", 1) is None:
        pytest.skip("kafka-python without magic-0 lz4 helpers")
    old = kc.lz4_encode_old_kafka(data)
    assert C.decompress(LZ4, old, magic=0) == data
    ours_v0 = C.compress(LZ4, data, magic=0)
    assert kc.lz4_decode_old_kafka(ours_v0) == data
    # the broken HC we write is the one kafka-python writes
    assert ours_v0[6] == old[6]


def test_oracle_kafka_python_zstd():
    kc = _kafka_codec()
    if not kc.has_zstd():
        pytest.skip("kafka-python zstd support not installed")
    data = payload_of_size(200_000)
    assert C.decompress(ZSTD, kc.zstd_encode(data)) == data
    assert kc.zstd_decode(C.compress(ZSTD, data)) == data


def test_oracle_aiokafka_codecs():
    ac = pytest.importorskip("aiokafka.codec", reason="aiokafka not installed")
    data = payload_of_size(150_000)
    pairs = [
        (GZIP, "gzip_encode", "gzip_decode"),
        (SNAPPY, "snappy_encode", "snappy_decode"),
        (LZ4, "lz4_encode", "lz4_decode"),
        (ZSTD, "zstd_encode", "zstd_decode"),
    ]
    tried = 0
    for codec, enc, dec in pairs:
        if not (hasattr(ac, enc) and hasattr(ac, dec)):
            continue
        try:
            theirs = getattr(ac, enc)(data)
        except Exception:  # codec not available in this aiokafka build
            continue
        assert C.decompress(codec, theirs) == data
        assert getattr(ac, dec)(C.compress(codec, data)) == data
        tried += 1
    if not tried:
        pytest.skip("aiokafka exposes no usable codec functions")


def test_oracle_raw_libraries():
    data = payload_of_size(300_000)
    # gzip: stdlib both ways
    assert gzip.decompress(C.compress(GZIP, data)) == data
    assert C.decompress(GZIP, gzip.compress(data, mtime=0)) == data
    assert C.decompress(GZIP, gzip.compress(data)) == data
    # lz4: python-lz4 frame decoder reads ours; ours reads theirs
    for level in (None, 1, 9, 16):
        assert lz4_frame.decompress(C.compress(LZ4, data, level)) == data
    for cl in (0, 3, 9, 16):
        theirs = lz4_frame.compress(
            data, block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,
            content_checksum=False, store_size=False, compression_level=cl,
        )
        assert theirs[4:6] == b"\x60\x40"
        assert C.decompress(LZ4, theirs) == data
    # cramjam's lz4 frame writer links blocks (FLG 0x54), which Kafka cannot read
    cj = bytes(cramjam.lz4.compress(data))
    assert not cj[4] & 0x20
    with pytest.raises(CorruptRecordError, match="Dependent block"):
        C.decompress(LZ4, cj)
    # zstd: library decoder reads ours, ours reads library output
    assert zstandard.ZstdDecompressor().decompress(C.compress(ZSTD, data)) == data
    assert C.decompress(ZSTD, bytes(cramjam.zstd.compress(data))) == data
    # snappy: cramjam raw blocks inside our framing
    for blk in _parse_xerial(C.compress(SNAPPY, data)):
        assert len(bytes(cramjam.snappy.decompress_raw(blk))) <= 32768


# -------------------------------------------------------------- thread safety


def test_concurrent_use_from_threads():
    payloads = [payload_of_size(n) for n in (1000, 50_000, 130_000, 300_000)]
    comps = [(codec, p, C.compress(codec, p)) for codec in COMPRESSED for p in payloads]
    errors = []

    def work(seed):
        try:
            for i in range(40):
                codec, p, comp = comps[(seed * 7 + i) % len(comps)]
                assert C.decompress(codec, comp) == p
                if i % 5 == 0:
                    level = None if codec == SNAPPY else 1
                    assert C.decompress(codec, C.compress(codec, p, level)) == p
                if i % 7 == 0:
                    with pytest.raises(RecordTooLargeError):
                        C.decompress(codec, comp, max_size=len(p) // 2)
        except BaseException as e:  # collected for the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# -------------------------------------------------------------- real vectors


from _vectors import CONFIGURED as _VECTORS_ENV  # noqa: E402
from _vectors import VECTORS  # noqa: E402

needs_vectors = pytest.mark.skipif(
    VECTORS is None, reason="reference vectors not found (set KAFKASTORE_VECTORS)"
)


def test_vectors_env_points_at_vectors():
    if _VECTORS_ENV and VECTORS is None:
        pytest.fail(f"KAFKASTORE_VECTORS={_VECTORS_ENV} holds no MANIFEST.json")


def _v2_batches(buf: bytes):
    pos = 0
    while pos + 61 <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + length
        if end > len(buf):
            break
        magic = buf[pos + 16]
        yield pos, magic, buf[pos:end]
        pos = end


def _legacy_entries(buf: bytes):
    """(position, magic, attributes, value) for each top-level v0/v1 message."""
    pos = 0
    while pos + 12 <= len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        body = buf[pos + 12 : pos + 12 + size]
        magic, attrs = body[4], body[5]
        p = 6 if magic == 0 else 14
        (klen,) = struct.unpack_from(">i", body, p)
        p += 4 + max(klen, 0)
        (vlen,) = struct.unpack_from(">i", body, p)
        p += 4
        value = body[p : p + vlen] if vlen >= 0 else None
        yield pos, magic, attrs, value
        pos += 12 + size


def _vector_files(sub):
    if VECTORS is None:
        return []
    return sorted((VECTORS / "batches" / sub).glob("*.bin"))


@needs_vectors
@pytest.mark.parametrize("path", _vector_files("v2"), ids=lambda p: p.name)
def test_vectors_v2(path):
    buf = path.read_bytes()
    side = json.loads(path.with_suffix(".json").read_text())
    batches = list(_v2_batches(buf))
    assert len(batches) == len(side["batches"])
    for (pos, magic, batch), meta in zip(batches, side["batches"]):
        assert magic == 2 and pos == meta["position"]
        (attrs,) = struct.unpack_from(">h", batch, 21)
        codec = attrs & 7
        (count,) = struct.unpack_from(">i", batch, 57)
        payload = memoryview(batch)[61:]
        expected = sum(r["sizeInBytes"] for r in meta["records"])
        if codec == NONE:
            assert len(payload) == expected
            continue
        out = C.decompress(codec, payload, magic=2)
        if count > 0:
            assert out
        assert len(out) == expected, (path.name, pos)
        if codec == ZSTD or codec == LZ4:
            # a bound exactly at the size passes; one byte less trips
            assert C.decompress(codec, payload, max_size=expected) == out
        with pytest.raises(RecordTooLargeError):
            C.decompress(codec, payload, max_size=expected - 1)


@needs_vectors
@pytest.mark.parametrize("path", _vector_files("legacy"), ids=lambda p: p.name)
def test_vectors_legacy(path):
    buf = path.read_bytes()
    side = json.loads(path.with_suffix(".json").read_text())
    entries = list(_legacy_entries(buf))
    assert len(entries) == len(side["batches"])
    for (pos, magic, attrs, value), meta in zip(entries, side["batches"]):
        codec = attrs & 7
        if codec == NONE:
            continue
        out = C.decompress(codec, value, magic=magic)
        assert len(out) == meta["innerUncompressedBytes"], (path.name, pos)
        # inner entries: offset, size, message ... must tile the output exactly
        p = 0
        while p < len(out):
            (sz,) = struct.unpack_from(">i", out, p + 8)
            assert out[p + 16] == magic
            p += 12 + sz
        assert p == len(out)


@needs_vectors
def test_vectors_segments():
    seen = set()
    for log in sorted((VECTORS / "segments").glob("*/*.log")):
        buf = log.read_bytes()
        pos = 0
        while pos + 17 <= len(buf):
            (size,) = struct.unpack_from(">i", buf, pos + 8)
            entry = buf[pos : pos + 12 + size]
            magic = entry[16]
            if magic == 2:
                codec = struct.unpack_from(">h", entry, 21)[0] & 7
                if codec:
                    out = C.decompress(codec, memoryview(entry)[61:], magic=2)
                    assert out
                    seen.add((codec, 2))
            else:
                (_, _, attrs, value), = _legacy_entries(entry)
                codec = attrs & 7
                if codec:
                    assert C.decompress(codec, value, magic=magic)
                    seen.add((codec, magic))
            pos += 12 + size
    assert {(c, 2) for c in COMPRESSED} <= seen


@needs_vectors
def test_vectors_lz4_v0_wrapper_uses_broken_checksum():
    path = VECTORS / "batches" / "legacy" / "v0_lz4_wrapper.bin"
    if not path.exists():
        pytest.skip("v0_lz4_wrapper.bin absent")
    (_, magic, attrs, value), = list(_legacy_entries(path.read_bytes()))
    assert magic == 0 and attrs & 7 == LZ4
    assert value[6] == _lz4_hc(value[0:6])  # KAFKA-3160 checksum on disk
    assert C.decompress(LZ4, value, magic=0)
    with pytest.raises(CorruptRecordError):
        C.decompress(LZ4, value, magic=1)
