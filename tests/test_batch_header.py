"""kafkastore.batch_header: the header constants and the one header accessor.

Entries are built byte by byte with tests/_helpers.py (kafka-storage.md §2.1/§2.2 layouts,
independent of kafkastore); the expected field values are the builders' own inputs, and for
real batches the kernel batch objects' fields (a second, independent parser).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from _helpers import legacy, rec, v2_batch

from kafkastore import batch_header as bh
from kafkastore.errors import CorruptRecordError
from kafkastore.file_records import FileRecords
from kafkastore.records import encode_batch, encode_control_batch, iter_batches
from kafkastore.types import CompressionType, ControlRecordType, TimestampType

LONG_MAX = (1 << 63) - 1

# kafka-storage.md §2.2: the v2 header fields in order, with their struct codes
V2_FIELDS = [("BASE_OFFSET", "q"), ("LENGTH", "i"), ("PARTITION_LEADER_EPOCH", "i"),
             ("MAGIC", "b"), ("CRC", "I"), ("ATTRIBUTES", "h"), ("LAST_OFFSET_DELTA", "i"),
             ("BASE_TIMESTAMP", "q"), ("MAX_TIMESTAMP", "q"), ("PRODUCER_ID", "q"),
             ("PRODUCER_EPOCH", "h"), ("BASE_SEQUENCE", "i"), ("RECORDS_COUNT", "i")]


def test_offsets_follow_the_field_layout():
    codes = ">"
    for name, code in V2_FIELDS:
        constant = "MAGIC_OFFSET" if name == "MAGIC" else f"{name}_OFFSET"
        assert getattr(bh, constant) == struct.calcsize(codes), name
        codes += code
    assert struct.calcsize(codes) == bh.RECORD_BATCH_OVERHEAD == 61
    assert bh.V2_HEADER.format == codes
    assert (bh.LOG_OVERHEAD, bh.HEADER_SIZE_UP_TO_MAGIC, bh.MIN_ENTRY_SIZE) == (12, 17, 14)
    assert (bh.LEGACY_CRC_OFFSET, bh.LEGACY_ATTRIBUTES_OFFSET, bh.LEGACY_TIMESTAMP_OFFSET) \
        == (12, 17, 18)
    assert (bh.LEGACY_HEADER_SIZE_V0, bh.LEGACY_HEADER_SIZE_V1) == (18, 26)


def test_attribute_masks():
    assert (bh.CODEC_MASK, bh.TIMESTAMP_TYPE_MASK, bh.TRANSACTIONAL_MASK, bh.CONTROL_MASK,
            bh.DELETE_HORIZON_MASK) == (0x07, 0x08, 0x10, 0x20, 0x40)


def test_hand_built_v2_header():
    data = b"\x00" * 5 + v2_batch(rec() + rec(1), count=2, base_offset=100,
                                   last_offset_delta=4, epoch=7, attributes=0x1B,
                                   first_ts=1000, max_ts=2000, pid=42, pepoch=3, bseq=9)
    h = bh.read_batch_header(data, 5)
    assert isinstance(h, bh.BatchHeader)
    assert h.position == 5 and h.size == len(data) - 5 and h.magic == 2
    assert (h.base_offset, h.last_offset, h.last_offset_delta) == (100, 104, 4)
    assert (h.partition_leader_epoch, h.attributes, h.base_timestamp, h.max_timestamp) == \
        (7, 0x1B, 1000, 2000)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (42, 3, 9, 2)
    assert h.crc == struct.unpack_from(">I", data, 5 + 17)[0]
    assert h.is_transactional and not h.is_control and not h.has_delete_horizon
    assert h.delete_horizon_ms is None
    assert h.codec == 3 and h.compression == CompressionType.LZ4
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert h.last_sequence == 13 and h.size_in_bytes == h.size


def test_control_and_delete_horizon_flags():
    h = bh.read_batch_header(v2_batch(attributes=0x60, first_ts=555, bseq=-1))
    assert h.is_control and h.has_delete_horizon and h.delete_horizon_ms == 555
    assert not h.is_transactional and h.last_sequence == -1
    assert h.timestamp_type == TimestampType.CREATE_TIME


def test_last_sequence_wraps_and_last_offset_wraps_to_int64():
    h = bh.read_batch_header(v2_batch(bseq=(1 << 31) - 2, last_offset_delta=5))
    assert h.last_sequence == 3   # Kafka's incrementSequence
    h = bh.read_batch_header(v2_batch(base_offset=LONG_MAX, last_offset_delta=2))
    assert h.last_offset == -(1 << 63) + 1   # baseOffset + lastOffsetDelta in Java's long


def test_magic_above_two_reads_as_v2():
    h = bh.read_batch_header(v2_batch(magic=3, pid=8))
    assert h.magic == 3 and h.producer_id == 8


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_agrees_with_the_kernel_batch_objects(codec):
    data = b"".join([
        encode_batch([(b"k%d" % i, b"v" * i) for i in range(5)], base_offset=10,
                     compression=codec, producer_id=5, producer_epoch=1, base_sequence=0,
                     partition_leader_epoch=3, timestamp=1_700_000_000_000),
        encode_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=1,
                             base_offset=15, timestamp=1_700_000_000_001),
    ])
    for batch in iter_batches(data):
        h = bh.read_batch_header(data, batch.position)
        for name in ("position", "magic", "base_offset", "last_offset", "max_timestamp",
                     "partition_leader_epoch", "crc", "attributes", "last_offset_delta",
                     "producer_id", "producer_epoch", "base_sequence", "record_count",
                     "is_transactional", "is_control", "has_delete_horizon",
                     "delete_horizon_ms", "timestamp_type", "last_sequence", "compression",
                     "size_in_bytes"):
            assert getattr(h, name) == getattr(batch, name), name
        assert h.base_timestamp == batch.first_timestamp


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_legacy_entries_agree_with_the_kernel(magic, codec):
    data = encode_batch([(b"a", b"1", 111), (b"b", b"2", 222)], magic=magic,
                        compression=codec, base_offset=50)
    batches = list(iter_batches(data))
    for batch in batches:
        h = bh.read_batch_header(data, batch.position)
        assert (h.position, h.size, h.magic, h.crc, h.attributes) == \
            (batch.position, batch.size_in_bytes, magic, batch.crc, batch.attributes)
        # the offset field: a wrapper's is its last inner offset
        assert h.base_offset == h.last_offset == batch.last_offset
        assert h.max_timestamp == h.base_timestamp == (batch.timestamp if magic else -1)
        assert h.timestamp_type == batch.timestamp_type
        assert (h.partition_leader_epoch, h.producer_id, h.producer_epoch, h.base_sequence,
                h.last_offset_delta, h.record_count) == (-1, -1, -1, -1, 0, None)
        assert not (h.is_transactional or h.is_control or h.has_delete_horizon)
        assert h.last_sequence == -1


def test_hand_built_legacy_header():
    data = legacy(1, 77, b"k", b"v", attributes=0x08 | 0x30, timestamp=12345)
    h = bh.read_batch_header(data)
    assert (h.base_offset, h.last_offset, h.magic, h.max_timestamp, h.attributes) == \
        (77, 77, 1, 12345, 0x38)
    # legacy messages have no transactional or control bits, whatever the attributes say
    assert not h.is_transactional and not h.is_control
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME
    h0 = bh.read_batch_header(legacy(0, 78, None, b"v", attributes=0x08))
    assert h0.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE and h0.max_timestamp == -1


def test_negative_magic_reads_with_the_v0_layout():
    data = bytearray(v2_batch(pid=8))
    data[16] = 0xFF
    h = bh.read_batch_header(bytes(data))
    assert h.magic == -1 and h.producer_id == -1 and h.record_count is None


@pytest.mark.parametrize("entry,need", [
    (v2_batch(rec(), count=1), 61),
    (legacy(1, 0, b"k", b"v"), 26),
    (legacy(0, 0, b"k", b"v"), 18),
])
def test_short_buffer_raises_with_the_position(entry, need):
    prefix = b"\x00" * 3
    for cut in range(need):
        with pytest.raises(CorruptRecordError) as info:
            bh.read_batch_header(prefix + entry[:cut], 3)
        assert info.value.position == 3
    assert bh.read_batch_header(prefix + entry[:need], 3).size == len(entry)


def test_negative_position_is_refused():
    with pytest.raises(ValueError):
        bh.read_batch_header(v2_batch(), -1)


def test_reads_from_memoryview_and_bytearray():
    data = v2_batch(rec(), count=1, base_offset=9)
    for buf in (bytearray(data), memoryview(data), memoryview(bytearray(data))):
        assert bh.read_batch_header(buf) == bh.read_batch_header(data)


def test_header_field_gathers_what_the_accessor_reads():
    entries = [v2_batch(pid=p, base_offset=o, last_offset_delta=d, attributes=a)
               for p, o, d, a in [(1, 0, 0, 0x10), (-1, 5, 3, 0), (7, 9, 1, 0x30)]]
    data = b"".join(entries)
    positions = np.cumsum([0] + [len(e) for e in entries[:-1]])
    headers = [bh.read_batch_header(data, int(p)) for p in positions]
    assert bh.header_field(data, positions, bh.PRODUCER_ID_OFFSET, ">i8").tolist() == \
        [h.producer_id for h in headers]
    assert bh.header_field(data, positions, bh.ATTRIBUTES_OFFSET, ">i2").tolist() == \
        [h.attributes for h in headers]
    assert bh.header_field(data, positions, bh.LAST_OFFSET_DELTA_OFFSET, ">i4").tolist() == \
        [h.last_offset_delta for h in headers]


def test_a_file_walk_yields_the_light_form(tmp_path):
    data = b"".join([
        encode_batch([(b"k", b"v")] * 3, base_offset=0, timestamp=5),
        encode_batch([(b"k", b"v")], magic=1, base_offset=3, timestamp=6),
        encode_batch([(b"k", b"v")], magic=0, base_offset=4),
        encode_batch([(b"k", b"v")] * 2, base_offset=5, timestamp=7),
    ])
    path = str(tmp_path / "00000000000000000000.log")
    fr = FileRecords.open(path)
    try:
        fr.append(data)
        walked = list(fr.walk())
    finally:
        fr.close()
    assert len(walked) == 4
    for entry in walked:
        assert type(entry) is bh.EntryHeader
        full = bh.read_batch_header(data, entry.position)
        # the full header starts with the light form's six fields, in the same order
        assert tuple(full[:6]) == tuple(entry)
    assert bh.EntryHeader._fields == bh.BatchHeader._fields[:6]
