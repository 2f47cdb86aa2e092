"""The message codec (kafkastore.server.protocol): round trips of every API at every
supported version, golden bytes written by hand from Kafka's protocol spec, the request
header, defaults, file regions."""

from __future__ import annotations

import struct

import pytest
from _protocol_examples import body_strategy, example_body, normalize
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkastore.errors import InvalidRequestError, UnsupportedVersionError
from kafkastore.server import protocol
from kafkastore.server.protocol import FileRegion, RequestHeader
from kafkastore.server.protocol.codec import _default
from kafkastore.server.protocol.messages import REQUESTS, RESPONSES

CASES = [pytest.param(key, v, id=f"{protocol.API_NAMES[key]}-v{v}")
         for key, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items())
         for v in range(lo, hi + 1)]


def _frame(data) -> memoryview:
    """A frame as the connection hands it over: the bytes after the 4-byte size."""
    data = b"".join(p for p in data) if isinstance(data, list) else data
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return memoryview(data)[4:]


def _request(key, version, body, correlation_id=7, client_id="test-client"):
    frame = _frame(protocol.encode_request(key, version, correlation_id, client_id, body))
    header, pos = protocol.read_request_header(frame)
    assert header == RequestHeader(key, version, correlation_id, client_id)
    return protocol.decode_request(header, frame, pos)


# == round trips =============================================================================

@pytest.mark.parametrize("variant", ["full", "sparse"])
@pytest.mark.parametrize(("key", "version"), CASES)
def test_request_round_trips(key, version, variant):
    body = example_body(REQUESTS[key], version, variant)
    assert normalize(_request(key, version, body)) == body


@pytest.mark.parametrize("variant", ["full", "sparse"])
@pytest.mark.parametrize(("key", "version"), CASES)
def test_response_round_trips(key, version, variant):
    body = example_body(RESPONSES[key], version, variant)
    header = RequestHeader(key, version, 12345, "c")
    correlation_id, got = protocol.decode_response(
        key, version, _frame(protocol.encode_response(header, body)))
    assert correlation_id == 12345
    assert normalize(got) == body


def test_every_supported_api_has_a_name_and_both_descriptions():
    for key, (lo, hi) in protocol.SUPPORTED_APIS.items():
        assert protocol.API_NAMES[key] + "Request" == REQUESTS[key].name
        assert protocol.API_NAMES[key] + "Response" == RESPONSES[key].name
        assert 0 <= lo <= hi


def test_supported_apis_are_the_design_docs_ranges():
    # server-design.md, "Versions the server advertises"; the coordinators' APIs (issue 30)
    # come from their own modules' SUPPORTED and are checked by their tests
    from kafkastore.server.protocol import messages_group, messages_txn
    coordinators = set(messages_group.SUPPORTED) | set(messages_txn.SUPPORTED)
    assert {k: v for k, v in protocol.SUPPORTED_APIS.items() if k not in coordinators} == {
        18: (0, 3), 3: (0, 12), 0: (0, 11), 1: (4, 16), 2: (1, 8), 19: (2, 7), 20: (1, 6),
        37: (0, 3), 32: (1, 4), 44: (0, 1), 22: (0, 5), 60: (0, 1), 23: (2, 4), 21: (0, 2)}


# == golden bytes, written from the protocol guide, not by our encoder ========================

def _str16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s.encode())) + s.encode()


def _compact_str(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    return bytes([len(s.encode()) + 1]) + s.encode()


def test_golden_api_versions_v0_request():
    # header v1: api_key 18, version 0, correlation 1, client_id "kcat"; empty body
    golden = struct.pack(">hhi", 18, 0, 1) + _str16("kcat")
    golden = struct.pack(">i", len(golden)) + golden
    assert protocol.encode_request(18, 0, 1, "kcat", {}) == golden
    frame = memoryview(golden)[4:]
    header, pos = protocol.read_request_header(frame)
    assert (header, pos) == (RequestHeader(18, 0, 1, "kcat"), len(frame))
    assert protocol.decode_request(header, frame, pos) == {}


def test_golden_api_versions_v3_request_and_response():
    # request header v2: + tagged fields (0); body: compact strings, then tagged fields
    body = _compact_str("librdkafka") + _compact_str("2.3.0") + b"\x00"
    golden = struct.pack(">hhi", 18, 3, 9) + _str16("rdkafka") + b"\x00" + body
    golden = struct.pack(">i", len(golden)) + golden
    assert protocol.encode_request(18, 3, 9, "rdkafka", {
        "client_software_name": "librdkafka", "client_software_version": "2.3.0"}) == golden
    # the response: header v0 (no tagged fields: ApiVersions' is always v0), error 0,
    # compact array of 1 + 1 entries (each with its empty tagged fields), throttle 0,
    # then one tagged field: tag 1 (finalized_features_epoch), 8 bytes
    resp = (struct.pack(">i", 9) + struct.pack(">h", 0) + b"\x02"
            + struct.pack(">hhh", 0, 0, 11) + b"\x00" + struct.pack(">i", 0)
            + b"\x01" + b"\x01" + b"\x08" + struct.pack(">q", 42))
    resp = struct.pack(">i", len(resp)) + resp
    encoded = protocol.encode_response(RequestHeader(18, 3, 9, "rdkafka"), {
        "error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11}],
        "throttle_time_ms": 0, "finalized_features_epoch": 42})
    assert encoded == [resp]


def test_golden_metadata_v1_null_topics_and_v9_compact():
    # v1: topics null = all topics (int32 -1)
    golden = struct.pack(">hhi", 3, 1, 5) + _str16(None) + struct.pack(">i", -1)
    frame = memoryview(golden)
    header, pos = protocol.read_request_header(frame)
    assert header.client_id is None
    assert protocol.decode_request(header, frame, pos) == {"topics": None}
    # v9 (flexible): topics compact array of one, name compact string, then
    # allow_auto_topic_creation, include_cluster_authorized_operations (v8-v10),
    # include_topic_authorized_operations, tagged fields
    golden = (struct.pack(">hhi", 3, 9, 6) + _str16("c") + b"\x00"
              + b"\x02" + _compact_str("orders") + b"\x00" + b"\x01" + b"\x01" + b"\x00"
              + b"\x00")
    frame = memoryview(golden)
    header, pos = protocol.read_request_header(frame)
    assert protocol.decode_request(header, frame, pos) == {
        "topics": [{"name": "orders"}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": False}


def test_golden_librdkafka_metadata_all_topics_with_its_leftover_bytes():
    # librdkafka 2.x asks Metadata v12 for all topics with the 4-byte placeholder of the
    # topic count left in place (rd_kafka_MetadataRequest0): Kafka reads a null array
    # (varint 0), allow_auto_topic_creation, include_topic_authorized_operations and the
    # tagged fields from the zeros and ignores the 3 bytes left. The bytes as captured.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, pos = protocol.read_request_header(memoryview(frame))
    assert header == RequestHeader(3, 12, 3, "rdkafka") and pos == 18
    assert protocol.decode_request(header, memoryview(frame), pos) == {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}


def test_golden_produce_v9_request_records_are_a_slice_of_the_frame():
    batch = bytes(range(61)) * 3
    golden = (struct.pack(">hhi", 0, 9, 11) + _str16("p") + b"\x00"
              + _compact_str(None) + struct.pack(">hi", -1, 30000)
              + b"\x02" + _compact_str("t") + b"\x02" + struct.pack(">i", 2)
              + bytes([len(batch) + 1]) + b"\x01" + batch + b"\x00" + b"\x00" + b"\x00")
    frame = memoryview(golden)
    header, pos = protocol.read_request_header(frame)
    body = protocol.decode_request(header, frame, pos)
    records = body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is frame.obj   # zero copy
    assert bytes(records) == batch
    assert body["transactional_id"] is None and body["acks"] == -1
    assert protocol.encode_request(0, 9, 11, "p", normalize(body)) == \
        struct.pack(">i", len(golden)) + golden


def test_golden_fetch_v12_response():
    records = b"R" * 70
    golden = (struct.pack(">i", 3) + b"\x00"                       # header v1
              + struct.pack(">ihi", 0, 0, 77)                     # throttle, error, session
              + b"\x02" + _compact_str("t")
              + b"\x02" + struct.pack(">ihqqq", 1, 0, 100, 90, 5)  # index, error, hw, lso, lss
              + b"\x01"                                           # aborted: empty (compact 0+1)
              + struct.pack(">i", -1)                             # preferred read replica
              + bytes([len(records) + 1]) + records
              + b"\x00" + b"\x00" + b"\x00")                       # tagged: partition, topic, body
    golden = struct.pack(">i", len(golden)) + golden
    assert protocol.encode_response(RequestHeader(1, 12, 3, None), {
        "session_id": 77, "responses": [{"topic": "t", "partitions": [{
            "partition_index": 1, "high_watermark": 100, "last_stable_offset": 90,
            "log_start_offset": 5, "aborted_transactions": [], "records": records}]}],
    }) == [golden]


# == header ==================================================================================

def test_header_v2_skips_unknown_tagged_fields():
    body = _request(3, 9, {"topics": []})
    assert body["topics"] == []
    # the same request with a tagged field (tag 5, 3 bytes) in its header
    golden = (struct.pack(">hhi", 3, 9, 1) + _str16("x") + b"\x01\x05\x03abc"
              + b"\x01" + b"\x01" + b"\x00" + b"\x00" + b"\x00")
    header, pos = protocol.read_request_header(memoryview(golden))
    assert pos == 10 + 1 + 6
    assert protocol.decode_request(header, memoryview(golden), pos)["topics"] == []


def test_unknown_tagged_fields_in_a_body_are_skipped():
    # ApiVersions v3 request with an unknown tag 9 (2 bytes) beside the known fields
    golden = (struct.pack(">hhi", 18, 3, 1) + _str16(None) + b"\x00"
              + _compact_str("a") + _compact_str("b") + b"\x01\x09\x02zz")
    header, pos = protocol.read_request_header(memoryview(golden))
    assert protocol.decode_request(header, memoryview(golden), pos) == {
        "client_software_name": "a", "client_software_version": "b"}


def test_a_tagged_field_sent_at_its_default_decodes_as_absent():
    # Fetch v12: cluster_id is tag 0, a nullable string, default null. A client may send
    # it null explicitly (01 00 01 00: one field, tag 0, 1 byte, null); Kafka's readers
    # cannot tell that from absent, so the body is the same and re-encodes to the frame
    # without it (found by the server_request fuzz target)
    plain = {"max_wait_ms": 5, "min_bytes": 1, "topics": []}
    frame = protocol.encode_request(1, 12, 7, "c", plain)
    assert frame[-1:] == b"\x00"   # no tagged field written
    header, pos = protocol.read_request_header(memoryview(frame)[4:])
    without = protocol.decode_request(header, memoryview(frame)[4:], pos)
    sent_null = bytes(frame[4:-1]) + b"\x01\x00\x01\x00"
    with_null = protocol.decode_request(header, memoryview(sent_null), pos)
    assert "cluster_id" not in with_null
    assert with_null == without
    # a value other than the default is kept
    sent_id = bytes(frame[4:-1]) + b"\x01\x00\x02\x02k"
    assert protocol.decode_request(header, memoryview(sent_id), pos)["cluster_id"] == "k"


def test_unknown_api_key_or_version_header_reads_but_body_is_refused():
    for key, version in ((99, 0), (18, 4), (1, 3), (0, 12), (3, 13)):
        golden = struct.pack(">hhi", key, version, 4) + _str16("c") + b"\x00\x00"
        header, pos = protocol.read_request_header(memoryview(golden))
        assert header == RequestHeader(key, version, 4, "c")
        with pytest.raises(UnsupportedVersionError) as err:
            protocol.decode_request(header, memoryview(golden), pos)
        assert (err.value.api_key, err.value.api_version) == (key, version)


def test_api_versions_v4_header_is_read_as_flexible():
    # a client newer than the server sends ApiVersions v4 with header v2: the header still
    # reads (its tagged fields are skipped) so that the v0 error answer can be framed
    golden = struct.pack(">hhi", 18, 4, 8) + _str16("java") + b"\x00" + b"\x00"
    header, pos = protocol.read_request_header(memoryview(golden))
    assert (header.api_version, header.client_id, pos) == (4, "java", 10 + 4 + 1)


# == encoding: defaults, fields of other versions, file regions ==============================

def test_missing_fields_take_kafkas_defaults_and_other_versions_fields_are_ignored():
    header = RequestHeader(3, 1, 1, None)
    _, body = protocol.decode_response(3, 1, _frame(protocol.encode_response(header, {
        "brokers": [{"node_id": 1, "host": "h", "port": 9}],
        "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}],
        "cluster_id": "ignored in v1", "throttle_time_ms": 5})))
    assert body == {"brokers": [{"node_id": 1, "host": "h", "port": 9, "rack": None}],
                    "controller_id": -1,
                    "topics": [{"error_code": 0, "name": "t", "is_internal": False,
                                "partitions": [{"error_code": 0, "partition_index": 0,
                                                "leader_id": 0, "replica_nodes": [],
                                                "isr_nodes": []}]}]}


def test_tagged_fields_at_their_default_are_not_written():
    header = RequestHeader(18, 3, 1, None)
    plain = b"".join(protocol.encode_response(header, {}))
    assert plain == b"".join(protocol.encode_response(header, {"finalized_features_epoch": -1,
                                                                "zk_migration_ready": False}))
    assert plain[-1:] == b"\x00"   # no tagged fields


def test_file_regions_are_pieces_of_the_frame(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(b"x" * 100 + b"BATCH-ONE" + b"BATCH-TWO" + b"y" * 10)
    with open(path, "rb") as f1, open(path, "rb") as f2:
        regions = [FileRegion(f1, 100, 9), FileRegion(f2, 109, 9)]
        header = RequestHeader(1, 12, 3, None)
        body = {"responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "records": regions},
            {"partition_index": 1, "records": b"inline"}]}]}
        parts = protocol.encode_response(header, body)
        assert [type(p) for p in parts] == [bytes, FileRegion, FileRegion, bytes]
        assert parts[1] is regions[0] and parts[2] is regions[1]
        # the frame as sendfile puts it on the socket reads back as the same response
        wire = b"".join(p if isinstance(p, bytes)
                        else path.read_bytes()[p.position:p.position + p.size] for p in parts)
        _, got = protocol.decode_response(1, 12, _frame(wire))
        expected = dict(body)
        part0 = got["responses"][0]["partitions"]
        assert bytes(part0[0]["records"]) == b"BATCH-ONEBATCH-TWO"
        assert bytes(part0[1]["records"]) == b"inline"
        for region in regions:
            region.close()
        assert f1.closed and f2.closed
        del expected


def test_a_single_file_region_and_null_records(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as f:
        parts = protocol.encode_response(RequestHeader(1, 4, 1, None), {"responses": [
            {"topic": "t", "partitions": [{"partition_index": 0, "records": FileRegion(f, 2, 5)},
                                          {"partition_index": 1, "records": None}]}]})
        wire = b"".join(p if isinstance(p, bytes) else b"23456" for p in parts)
        _, got = protocol.decode_response(1, 4, _frame(wire))
        partitions = got["responses"][0]["partitions"]
        assert bytes(partitions[0]["records"]) == b"23456"
        assert partitions[1]["records"] is None


def test_encoding_a_null_where_kafka_allows_none_is_refused():
    with pytest.raises(InvalidRequestError, match="name is not nullable"):
        protocol.encode_response(RequestHeader(3, 1, 1, None), {"topics": [{"name": None}]})
    with pytest.raises(InvalidRequestError, match="MetadataResponse v1"):
        protocol.encode_response(RequestHeader(3, 1, 1, None), {"controller_id": "x"})
    # a wrong type anywhere (a str in an int32 array, an int for a string, an int16
    # out of range) is the same typed refusal, naming the API and version
    for body in ({"brokers": [], "topics": [{"partitions": [{"replica_nodes": ["1"]}]}]},
                 {"topics": [{"name": 5}]},
                 {"topics": [{"error_code": 1 << 20}]}):
        with pytest.raises(InvalidRequestError, match="MetadataResponse v1") as err:
            protocol.encode_response(RequestHeader(3, 1, 1, None), body)
        assert (err.value.api_key, err.value.api_version) == (3, 1)


def test_plans_are_compiled_once():
    from kafkastore.server.protocol import _plan
    assert _plan(1, 12, True) is _plan(1, 12, True)


# == any body, by hypothesis ================================================================

def _without_default_tags(fields, body, version):
    """What reads back: Kafka writes no tagged field at its default."""
    from kafkastore.server.protocol.schema import in_range

    out = {}
    for f in fields:
        if f.name not in body:
            continue
        value = body[f.name]
        if f.fields is not None and value is not None:
            value = ([_without_default_tags(f.fields, x, version) for x in value]
                     if f.type.startswith("[]")
                     else _without_default_tags(f.fields, value, version))
        if f.tag is not None and in_range(version, f.tagged):
            if f.fields is not None and not f.type.startswith("[]"):
                plain = {g.name: _default(g) for g in f.fields if in_range(version, g.versions)}
                if value == plain:
                    continue
            elif value == _default(f):
                continue
        out[f.name] = value
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_body_round_trips(data):
    key, version = data.draw(st.sampled_from([(k, v) for k, (lo, hi) in
                                              protocol.SUPPORTED_APIS.items()
                                              for v in range(lo, hi + 1)]))
    is_request = data.draw(st.booleans())
    message = (REQUESTS if is_request else RESPONSES)[key]
    body = data.draw(body_strategy(message, version))
    if is_request:
        got = _request(key, version, body)
    else:
        _, got = protocol.decode_response(key, version, _frame(protocol.encode_response(
            RequestHeader(key, version, 1, None), body)))
    assert normalize(got) == _without_default_tags(message.fields, body, version)


def test_the_primitives_no_message_here_uses_round_trip():
    # uint16, uint32, float64, varint, varlong, bytes (compact and not), a uuid array:
    # Kafka's other messages have them, so the codec reads and writes them too
    from kafkastore.server.protocol.codec import compile_reader, compile_writer
    from kafkastore.server.protocol.schema import F

    fields = (F("a", "uint16", "0+"), F("b", "uint32", "0+"), F("c", "float64", "0+"),
              F("d", "varint", "0+"), F("e", "varlong", "0+"), F("f", "bytes", "0+"),
              F("g", "bytes", "0+", nullable="0+"), F("h", "[]uuid", "0+"),
              F("i", "[]string", "0+"))
    body = {"a": 0xFFFF, "b": 0xFFFFFFFF, "c": -2.5, "d": -(1 << 31), "e": (1 << 63) - 1,
            "f": b"\x00\xff", "g": None, "h": [b"\x01" * 16, b"\x02" * 16], "i": ["x", ""]}
    for flexible in (False, True):
        buf = bytearray()
        compile_writer(fields, 0, flexible)(buf, [], body)
        got, pos = compile_reader(fields, 0, flexible)(memoryview(bytes(buf)), 0, len(buf))
        assert (got, pos) == (body, len(buf))
    # the zig-zag varint of -2^31 is 5 bytes ff ff ff ff 0f, of 2^63 - 1 ten bytes
    buf = bytearray()
    compile_writer(fields[3:5], 0, False)(buf, [], body)
    assert bytes(buf) == b"\xff\xff\xff\xff\x0f" + b"\xfe" + b"\xff" * 8 + b"\x01"
