"""Kafka's wire protocol: requests decoded to dicts, responses encoded from dicts.

How it reads
------------
:mod:`.messages` describes each request and response Kafka defines in
``clients/src/main/resources/common/message/*.json`` (apache/kafka, read off those files,
not copied), one :class:`~.schema.F` per field with the versions that have it::

    F("partitions", "[]FetchPartition", "0+", fields=(
        F("partition", "int32", "0+"),
        F("current_leader_epoch", "int32", "9+", default=-1),
        ...
        F("replica_directory_id", "uuid", "17+", tag=0, tagged="17+"),
    ))

One generic reader and writer (:mod:`.codec`) walk the descriptions: a message at a
version compiles once into a plan of closures (cached), nothing is written per version.
Flexible versions (KIP-482) use compact strings, bytes and arrays and end every struct
with its tagged fields; unknown tags are skipped on decode, tagged fields at their
default are not written. Bodies are dicts keyed by Kafka's field names in snake_case,
arrays of structs lists of dicts, UUIDs 16-byte ``bytes``, ``records`` a memoryview
slice of the frame on decode (zero copy) and bytes, a :class:`FileRegion` or a list of
them on encode (sent with ``sendfile``).

A frame is the bytes after the 4-byte size. :func:`read_request_header` reads the request
header (v1, or v2 with tagged fields when the API's version is flexible: Kafka's
``ApiKeys.requestHeaderVersion``); :func:`decode_request` the body. Every declared
length and count is checked against the bytes left before anything is allocated; a
frame that does not decode raises :class:`~kafkastore.errors.InvalidRequestError` with
the byte position, and an API key or version outside :data:`SUPPORTED_APIS` raises
:class:`~kafkastore.errors.UnsupportedVersionError`. :func:`encode_response` writes the
whole response frame: size, header (v0, or v1 for flexible versions; ApiVersions
always v0, as Kafka's ``ApiKeys.responseHeaderVersion``), body.

Bytes left after the last field of a request body are ignored, as Kafka's generated
readers ignore them (``RequestContext.parseRequest`` reads the fields and stops): librdkafka
relies on it. Its Metadata request for all topics in flexible versions (v9+) keeps the
4-byte placeholder of the topic count (``rd_kafka_MetadataRequest0``), so Kafka reads a
null array, three more fields from the zeros, and leaves three bytes unread.

An ApiVersions request at a version above ours is not parsed by Kafka but answered with a
v0 response (error UNSUPPORTED_VERSION and the versions supported): the caller does that
with ``encode_response(header._replace(api_version=0), ...)`` on the
UnsupportedVersionError, as clients read an ApiVersions error response as v0.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkastore.errors import InvalidRequestError, UnsupportedVersionError
from kafkastore.server.protocol.codec import (
    FileRegion, bad, close_regions, message_plan, read_tagged, write_uvarint,
)
from kafkastore.server.protocol.messages import REQUESTS, RESPONSES
from kafkastore.server.protocol import messages_group, messages_txn
from kafkastore.server.protocol.schema import in_range

__all__ = [
    "API_NAMES", "SUPPORTED_APIS", "FileRegion", "RequestHeader", "close_regions",
    "decode_request", "decode_response", "encode_request", "encode_response",
    "read_request_header",
]

#: The versions the server answers, per API key (advertised in ApiVersions).
SUPPORTED_APIS: dict[int, tuple[int, int]] = {
    0: (0, 11),    # Produce
    1: (4, 16),    # Fetch
    2: (1, 8),     # ListOffsets
    3: (0, 12),    # Metadata
    18: (0, 3),    # ApiVersions
    19: (2, 7),    # CreateTopics
    20: (1, 6),    # DeleteTopics
    21: (0, 2),    # DeleteRecords
    22: (0, 5),    # InitProducerId
    23: (2, 4),    # OffsetForLeaderEpoch
    32: (1, 4),    # DescribeConfigs
    37: (0, 3),    # CreatePartitions
    44: (0, 1),    # IncrementalAlterConfigs
    60: (0, 1),    # DescribeCluster
    **messages_group.SUPPORTED,   # the group coordinator's (issue 30)
    **messages_txn.SUPPORTED,     # the transaction coordinator's (issue 30)
}

#: Kafka's name of each API key the codec knows.
API_NAMES: dict[int, str] = {key: m.name[:-len("Request")] for key, m in REQUESTS.items()}

API_VERSIONS = 18
_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _request_flexible(api_key: int, api_version: int) -> bool:
    message = REQUESTS.get(api_key)
    return message is not None and in_range(api_version, message.flexible)


def _response_flexible(api_key: int, api_version: int) -> bool:
    # ApiVersions answers with header v0 at every version, so that a client that does not
    # know the broker's versions can read it (Kafka's ApiKeys.responseHeaderVersion).
    return api_key != API_VERSIONS and _request_flexible(api_key, api_version)


_PLANS: dict[tuple[int, int, bool], tuple] = {}


def _plan(api_key: int, api_version: int, request: bool) -> tuple:
    key = (api_key, api_version, request)
    plan = _PLANS.get(key)
    if plan is None:
        message = (REQUESTS if request else RESPONSES).get(api_key)
        if message is None or not in_range(api_version, message.valid):
            raise UnsupportedVersionError(
                f"{API_NAMES.get(api_key, f'API key {api_key}')} v{api_version} is not "
                "described", api_key=api_key, api_version=api_version)
        plan = _PLANS[key] = message_plan(message, api_version)
    return plan


def read_request_header(frame) -> tuple[RequestHeader, int]:
    """The request header of ``frame`` (the bytes after the 4-byte size) and the body's
    position. An unknown API key or version is not refused here (the caller answers
    it); bytes missing from the header are (InvalidRequestError)."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    end = len(buf)
    if end < 10:
        raise InvalidRequestError(f"request header needs 10 bytes, the frame has {end}",
                                  position=0)
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    n = _I16.unpack_from(buf, 8)[0]
    pos = 10
    try:
        # ClientId: a nullable int16 string in every header version (its
        # "flexibleVersions": "none" in RequestHeader.json)
        if n == -1:
            client_id = None
        elif n < 0 or n > end - pos:
            raise bad(f"client_id of {n} bytes past the end of the frame", 8)
        else:
            try:
                client_id = str(buf[pos:pos + n], "utf-8")
            except UnicodeDecodeError:
                raise bad("client_id is not UTF-8", pos) from None
            pos += n
        if _request_flexible(api_key, api_version):
            pos = read_tagged(buf, pos, end, {}, {})
    except InvalidRequestError as err:
        err.api_key, err.api_version = api_key, api_version
        raise
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(header: RequestHeader, frame, position: int) -> dict:
    """The body of a request from ``frame[position:]`` (bytes after its last field are
    ignored, as Kafka ignores them)."""
    api_key, api_version = header.api_key, header.api_version
    supported = SUPPORTED_APIS.get(api_key)
    if supported is None or not supported[0] <= api_version <= supported[1]:
        raise UnsupportedVersionError(
            f"{API_NAMES.get(api_key, f'API key {api_key}')} v{api_version} is not supported"
            + (f" (versions {supported[0]}-{supported[1]})" if supported else ""),
            position=0, api_key=api_key, api_version=api_version)
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        # What follows the last field is left unread, as Kafka does (librdkafka's
        # Metadata request sends such bytes: see the module docstring).
        body, _ = _plan(api_key, api_version, True)[0](buf, position, len(buf))
    except InvalidRequestError as err:
        err.api_key, err.api_version = api_key, api_version
        raise
    return body


def _frame(parts: list, buf: bytearray) -> list:
    """Close the last bytes piece and put the frame's size in front of the first."""
    if not parts:
        struct.pack_into(">i", buf, 0, len(buf) - 4)
        return [bytes(buf)]
    if buf:
        parts.append(bytes(buf))
    size = sum(p.size if isinstance(p, FileRegion) else len(p) for p in parts) - 4
    parts[0] = _I32.pack(size) + parts[0][4:]
    return [p for p in parts if isinstance(p, FileRegion) or p]


def _write(api_key: int, api_version: int, request: bool, buf: bytearray, body: dict) -> list:
    """``body`` written after ``buf`` (size placeholder and header): the frame's pieces.
    A body that does not fit the description (a handler's bug: a None where the version
    has no null, a str for an int, an int out of range) raises InvalidRequestError
    naming the API and version, with no position."""
    writer = _plan(api_key, api_version, request)[1]
    parts: list = []
    try:
        writer(buf, parts, body)
    except (TypeError, AttributeError, ValueError, OverflowError, struct.error) as exc:
        # (InvalidRequestError is a ValueError: the codec's own refusals come here too)
        raise InvalidRequestError(
            f"cannot encode {API_NAMES[api_key]}{'Request' if request else 'Response'} "
            f"v{api_version}: {exc}", api_key=api_key, api_version=api_version) from exc
    return _frame(parts, buf)


def encode_response(header: RequestHeader, body: dict) -> list:
    """The whole response frame for ``header``'s request: the 4-byte size, the response
    header and ``body``, as bytes pieces and file regions (see :class:`FileRegion`)."""
    api_key, api_version = header.api_key, header.api_version
    _plan(api_key, api_version, False)  # UnsupportedVersionError before anything else
    buf = bytearray(4)
    buf += _I32.pack(header.correlation_id)
    if _response_flexible(api_key, api_version):
        buf.append(0)  # no tagged fields in the response header
    return _write(api_key, api_version, False, buf, body)


def encode_request(api_key: int, api_version: int, correlation_id: int,
                   client_id: str | None, body: dict) -> bytes:
    """A whole request frame, size included (for tests and fuzz seeds)."""
    _plan(api_key, api_version, True)  # UnsupportedVersionError before anything else
    buf = bytearray(4)
    buf += _HEAD.pack(api_key, api_version, correlation_id)
    if client_id is None:
        buf += _I16.pack(-1)
    else:
        data = client_id.encode("utf-8")
        buf += _I16.pack(len(data)) + data
    if _request_flexible(api_key, api_version):
        write_uvarint(buf, 0)
    frame = _write(api_key, api_version, True, buf, body)
    if len(frame) != 1:
        raise InvalidRequestError("cannot encode: a file region in a request",
                                  api_key=api_key, api_version=api_version)
    return frame[0]


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, dict]:
    """(correlation_id, body) of a response frame (the bytes after the 4-byte size)."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    end = len(buf)
    if end < 4:
        raise InvalidRequestError("response header needs 4 bytes", position=0)
    correlation_id = _I32.unpack_from(buf, 0)[0]
    pos = 4
    try:
        if _response_flexible(api_key, api_version):
            pos = read_tagged(buf, pos, end, {}, {})
        body, pos = _plan(api_key, api_version, False)[0](buf, pos, end)
        if pos != end:
            raise bad(f"{end - pos} bytes after the response body", pos)
    except InvalidRequestError as err:
        err.api_key, err.api_version = api_key, api_version
        raise
    return correlation_id, body

