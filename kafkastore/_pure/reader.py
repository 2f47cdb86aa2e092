"""The reader primitive of the pure kernels: layout constants, field reads, varints.

Every pure kernel that reads Kafka's bytes takes its building blocks from here,
so each rule is written once (the compiled kernels share theirs the same way,
through their ``reader`` include file under ``kafkastore/_ext/``):

- the layout constants (from :mod:`kafkastore._pure.consts`, the mirror of
  ``_ext/consts.pxd``) and the big-endian ``struct`` layouts of an entry
  prefix, a v2 batch header and a legacy message header (the formats are
  documented field by field in ``kafkastore/_pure/record_batch.py``);
- :func:`read_varint`, the bounds-checked zig-zag varint/varlong reader with
  Kafka's ``ByteUtils`` limits and messages;
- :func:`wrap64` / :func:`wrap32`, Java's long and int arithmetic (what the
  compiled kernels' fixed-width integers do);
- :func:`as_view` and :func:`check_position`, the argument checks every
  buffer-taking kernel makes;
- :func:`check_codec` and :func:`inflate`, the attribute's codec check and the
  decompressor hook (:func:`set_decompressor`), shared by both batch formats.

Thread safety: everything here is stateless except the installed decompressor,
which ``kafkastore.records`` sets once at import.
"""

from __future__ import annotations

import struct

from kafkastore._pure.consts import (  # noqa: F401  (re-exported to the kernels)
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_HEADER_V0,
    LEGACY_HEADER_V1,
    LEGACY_OVERHEAD_V1,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_ENTRY_SIZE,
    MIN_RECORD_SIZE,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from kafkastore.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from kafkastore.types import CompressionType, TimestampType

# -- layout constants: re-exported above from kafkastore._pure.consts, the one pure mirror of
# _ext/consts.pxd

DEFAULT_MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MASK32 = (1 << 32) - 1
MASK64 = (1 << 64) - 1

HEADER = struct.Struct(
    ">"
    "q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # recordsCount
)
ENTRY_PREFIX = struct.Struct(">qi")  # offset, size
LEGACY_V0 = struct.Struct(">Ibb")  # crc, magic, attributes
LEGACY_V1 = struct.Struct(">Ibbq")  # crc, magic, attributes, timestamp
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

TS_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)
CODECS = tuple(CompressionType)
EMPTY = ()


# -- Java arithmetic -----------------------------------------------------------


def wrap64(value: int) -> int:
    """Java long arithmetic (and the compiled kernels' int64_t): wrap to int64."""
    return ((value + (1 << 63)) & MASK64) - (1 << 63)


def wrap32(value: int) -> int:
    """Java int arithmetic: wrap to int32."""
    return ((value + (1 << 31)) & MASK32) - (1 << 31)


# -- arguments -------------------------------------------------------------------


def check_position(pos, size: int) -> int:
    """Validate a caller's position into a buffer of ``size`` bytes.

    TypeError for a non-int, ValueError outside ``[0, size]``; shared by every
    kernel twin that takes a position.
    """
    if not isinstance(pos, int):
        raise TypeError(f"position must be an int, not {type(pos).__name__}")
    if pos < 0 or pos > size:
        raise ValueError(f"position {pos} is outside the buffer of {size} bytes")
    return pos


def as_view(buffer) -> memoryview:
    """A flat unsigned-byte view of any C-contiguous buffer (indexing gives ints 0-255)."""
    view = memoryview(buffer)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view


# -- varints -------------------------------------------------------------------------

#: The message of a varint cut off by the end of its record (Kafka's record reader).
TRUNCATED_VARINT = "Found invalid record structure: truncated varint"
LONG_VARINT = "Varint is too long, the most significant bit in the 5th byte is set"
LONG_VARLONG = "Varlong is too long, most significant bit in the 10th byte is set"


def read_varint(data, pos: int, end: int, bits: int, where: int,
                truncated: str = TRUNCATED_VARINT) -> tuple[int, int]:
    """The zig-zag varint (``bits`` 32) or varlong (64) at ``pos``; ``(value, next_pos)``.

    Every byte read lies below ``end``; running into ``end`` raises
    :class:`CorruptRecordError` with ``truncated`` as its message, and a
    continuation bit in the 5th (varlong: 10th) byte raises Kafka's "too long"
    message, both with ``position=where``. Bits of the last byte past the
    type's width are dropped, as Java's shifts drop them.
    """
    value = 0
    shift = 0
    max_shift = 28 if bits == 32 else 63
    while True:
        if pos >= end:
            raise CorruptRecordError(truncated, position=where)
        b = data[pos]
        pos += 1
        if not b & 0x80:
            value |= b << shift
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > max_shift:
            raise CorruptRecordError(LONG_VARINT if bits == 32 else LONG_VARLONG,
                                     position=where)
    value &= MASK32 if bits == 32 else MASK64
    return (value >> 1) ^ -(value & 1), pos


# -- attributes and compressed payloads ---------------------------------------------

# The codec layer sits above the kernels, so it is handed in rather than
# imported: ``fn(codec, data, max_size, magic) -> bytes``.
_decompress = None


def set_decompressor(fn) -> None:
    """Install the function that inflates compressed payloads.

    ``kafkastore.records`` installs ``kafkastore.compression.decompress`` at
    import; the kernel itself knows no codec.
    """
    global _decompress
    _decompress = fn


def inflate(codec: int, data, limit: int, magic: int, position: int):
    """``data`` decompressed with codec id ``codec``, at most ``limit`` bytes.

    Errors of the decompressor without a position get ``position``.
    """
    if _decompress is None:
        raise UnsupportedCompressionError(
            "no decompressor installed (import kafkastore.records)", position=position
        )
    try:
        return _decompress(codec, data, limit, magic)
    except (CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError) as err:
        if err.position is None:
            err.position = position
        raise


def check_codec(attributes: int, magic: int, position: int) -> CompressionType:
    """The codec of ``attributes``; zstd (4) needs magic 2, ids above 4 are unknown."""
    codec_id = attributes & CODEC_MASK
    if codec_id > 4 or (codec_id == 4 and magic < 2):
        raise UnsupportedCompressionError(
            f"Unknown compression type id {codec_id} for magic {magic}", position=position
        )
    return CODECS[codec_id]
