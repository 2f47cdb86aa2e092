"""Hostile frames through the request decoder: every failure is an InvalidRequestError
with a position, found before anything is allocated from a declared size."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from _protocol_examples import example_body

from kafkastore.errors import InvalidRequestError, UnsupportedVersionError
from kafkastore.server import protocol
from kafkastore.server.protocol.messages import REQUESTS

EDGE_CASES = [pytest.param(key, v, id=f"{protocol.API_NAMES[key]}-v{v}")
              for key, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items())
              for v in sorted({lo, hi, *(x for x in (3, 9, 12) if lo <= x <= hi)})]


def _decode(frame: bytes) -> dict:
    view = memoryview(frame)
    header, pos = protocol.read_request_header(view)
    return protocol.decode_request(header, view, pos)


def _valid(key: int, version: int) -> bytes:
    return protocol.encode_request(key, version, 1, "client", example_body(REQUESTS[key],
                                                                            version))[4:]


def _refused(frame: bytes) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as err:
        _decode(frame)
    assert err.value.position is not None and 0 <= err.value.position <= len(frame)
    return err.value


@pytest.mark.parametrize(("key", "version"), EDGE_CASES)
def test_truncation_at_every_byte_is_an_invalid_request(key, version):
    frame = _valid(key, version)
    _decode(frame)
    for cut in range(len(frame)):
        err = _refused(frame[:cut])
        assert not isinstance(err, UnsupportedVersionError)


@pytest.mark.parametrize(("key", "version"), EDGE_CASES)
def test_trailing_bytes_are_ignored_as_kafka_ignores_them(key, version):
    # Kafka's generated readers stop after the last field and librdkafka sends leftovers
    # (test_protocol.py: its Metadata request for all topics)
    frame = _valid(key, version)
    assert _decode(frame + b"\x00\x01\x02") == _decode(frame)


def _metadata(version: int, body: bytes, client_id: bytes = b"\x00\x01c") -> bytes:
    return struct.pack(">hhi", 3, version, 1) + client_id + (b"\x00" if version >= 9 else b"") \
        + body


def test_a_huge_array_count_is_refused_without_allocating():
    # Metadata v1: topics = int32 count 2^31 - 1, then 8 bytes: 20 bytes in all
    frame = _metadata(1, struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 8)
    tracemalloc.start()
    try:
        err = _refused(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.position == 11 and "array of 2147483647" in err.message
    assert peak < 64 * 1024
    # the same in a flexible version: compact count 2^32 - 2 (unsigned varint)
    err = _refused(_metadata(9, b"\xfe\xff\xff\xff\x0f" + b"\x00" * 4))
    assert err.position == 12


def test_a_huge_string_or_records_length_is_refused():
    # CreateTopics v2: topics [1], name of 32767 bytes in a short frame (long enough for
    # the smallest topic, so that the string's own check is the one that refuses it)
    frame = (struct.pack(">hhi", 19, 2, 1) + b"\xff\xff" + struct.pack(">i", 1)
             + struct.pack(">h", 0x7FFF) + b"abc" + b"\x00" * 20)
    err = _refused(frame)
    assert "string of 32767 bytes" in err.message and err.position == 14
    # Produce v3: records of 2^31 - 1 bytes
    frame = (struct.pack(">hhi", 0, 3, 1) + b"\xff\xff" + b"\xff\xff" + struct.pack(">hi", 1, 0)
             + struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">ii", 1, 0)
             + struct.pack(">i", 0x7FFFFFFF) + b"x" * 10)
    err = _refused(frame)
    assert "2147483647 bytes" in err.message and err.position == len(frame) - 14


@pytest.mark.parametrize("length", [-2, -100, -0x8000])
def test_negative_lengths_are_refused(length):
    # a string length below -1
    frame = (struct.pack(">hhi", 19, 2, 1) + b"\xff\xff" + struct.pack(">i", 1)
             + struct.pack(">h", length) + b"\x00" * 20)
    assert "string length" in _refused(frame).message
    # an array count below -1
    assert "array count" in _refused(_metadata(1, struct.pack(">i", length) + b"\x00" * 8)
                                     ).message


def test_null_where_the_version_does_not_allow_it_is_refused():
    # Metadata v0: topics is not nullable (-1 only from v1)
    assert "array count -1" in _refused(_metadata(0, struct.pack(">i", -1))).message
    # CreateTopics v2: topic name is not nullable
    frame = (struct.pack(">hhi", 19, 2, 1) + b"\xff\xff" + struct.pack(">i", 1)
             + struct.pack(">h", -1) + b"\x00" * 20)
    assert "string length -1" in _refused(frame).message


def test_varints_longer_than_five_bytes_are_refused():
    err = _refused(_metadata(9, b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 4))
    assert "longer than 5 bytes" in err.message and err.position == 12
    # in the header's tagged fields too
    err = _refused(struct.pack(">hhi", 3, 9, 1) + b"\x00\x01c" + b"\x80\x80\x80\x80\x80\x00")
    assert "longer than 5 bytes" in err.message and err.position == 11
    # a 5-byte varint with more than 32 bits
    assert "32 bits" in _refused(_metadata(9, b"\xff\xff\xff\xff\x7f" + b"\x00" * 4)).message


def test_invalid_utf8_is_refused():
    err = _refused(_metadata(1, struct.pack(">i", 1) + b"\x00\x02\xc3\x28"))
    assert "not UTF-8" in err.message and err.position == 17
    with pytest.raises(InvalidRequestError, match="client_id is not UTF-8"):
        protocol.read_request_header(memoryview(_metadata(1, b"", b"\x00\x02\xff\xfe")))


def test_tagged_fields_past_the_end_or_not_filling_their_size_are_refused():
    head = struct.pack(">hhi", 18, 3, 1) + b"\xff\xff" + b"\x00" + b"\x02a\x02b"
    assert "past the end" in _refused(head + b"\x01\x09\x10zz").message
    # Fetch v12 tagged cluster_id (tag 0): 4 bytes declared, a 2-byte compact string inside
    fetch = protocol.encode_request(1, 12, 1, None, {})[4:]
    bad = fetch[:-1] + b"\x01\x00\x04\x02x\x00\x00"
    assert "left over" in _refused(bad).message


def test_short_headers_are_refused_with_position():
    for cut in range(10):
        with pytest.raises(InvalidRequestError) as err:
            protocol.read_request_header(memoryview(b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05"
                                                    [:cut]))
        assert err.value.position == 0
    with pytest.raises(InvalidRequestError) as err:
        protocol.read_request_header(memoryview(b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05ab"))
    assert (err.value.position, err.value.api_key, err.value.api_version) == (8, 3, 1)


def test_unsupported_versions_are_their_own_error():
    frame = struct.pack(">hhi", 1, 3, 1) + b"\xff\xff" + b"\x00" * 40  # Fetch v3: < 4
    header, pos = protocol.read_request_header(memoryview(frame))
    with pytest.raises(UnsupportedVersionError, match="versions 4-16"):
        protocol.decode_request(header, memoryview(frame), pos)


def test_a_compact_string_longer_than_an_int16_one_is_refused():
    # Metadata v9: a topic name whose compact length says 40000 bytes, and the bytes are
    # there: Kafka's generated readers refuse a string over 32767 bytes in any encoding
    # (and our encoder could not write it back)
    name = b"n" * 40000
    body = b"\x02" + b"\xc1\xb8\x02" + name + b"\x00" + b"\x01\x00\x00\x00"
    err = _refused(_metadata(9, body))
    assert "at most 32767" in err.message and err.position == 13
