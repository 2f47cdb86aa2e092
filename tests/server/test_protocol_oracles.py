"""The codec against independent implementations of Kafka's protocol (test-only oracles).

* kafka-python 3.x's hand-written per-version classes (``kafka.protocol.old``) and
  aiokafka's (``aiokafka.protocol``, forked from them): our bytes decode with theirs,
  field by field in wire order, and theirs re-encode to the same bytes;
* kafka-python 3.x's schema-driven classes (``kafka.protocol.metadata`` ...), built from
  Kafka's JSON by their own generator: their encoding of a body is byte for byte ours, and
  their decoding of our bytes is our body, field by field by name.

A body is :func:`_protocol_examples.example_body` (every field set to a distinct
non-default value, or every nullable null and every array empty).
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
import warnings

import pytest
from _protocol_examples import example_body

from kafkastore.server import protocol
from kafkastore.server.protocol.codec import _default, compile_writer
from kafkastore.server.protocol.messages import REQUESTS, RESPONSES
from kafkastore.server.protocol.schema import in_range

VARIANTS = ("full", "sparse")


def _import(name: str):
    """Import an oracle's module; kafka-python 3.0 reads its JSON with the deprecated
    importlib.resources.read_text (a DeprecationWarning, an error under this suite's
    filterwarnings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def _ours(key: int, version: int, request: bool, body: dict) -> bytes:
    message = (REQUESTS if request else RESPONSES)[key]
    buf = bytearray()
    compile_writer(message.fields, version, in_range(version, message.flexible))(buf, [], body)
    return bytes(buf)


def _body(key: int, version: int, request: bool, variant: str) -> dict:
    body = example_body((REQUESTS if request else RESPONSES)[key], version, variant)
    if key == 18 and not request:
        # Clients read an ApiVersions response with an error as v0 (Kafka's broker answers
        # UNSUPPORTED_VERSION in v0): kafka-python does, so the oracle needs error 0.
        body["error_code"] = 0
    return body


def _supported(key: int, version: int) -> bool:
    rng = protocol.SUPPORTED_APIS.get(key)
    return rng is not None and rng[0] <= version <= rng[1]


# == the hand-written classes: kafka-python's old ones, aiokafka's =========================

#: Where an oracle departs from Kafka's message JSON (ours follows Kafka): the test of
#: those classes must fail, so that a fixed oracle shows up here.
KNOWN_DIFFERENCES = {
    ("aiokafka.protocol", name): "aiokafka 0.14 declares ListOffsets v4/v5 "
    "current_leader_epoch as Int64; Kafka's ListOffsetsRequest.json says int32"
    for name in ("OffsetRequest_v4", "OffsetRequest_v5")
}


def _hand_written() -> list:
    out = []
    for package, bases in (("kafka.protocol.old", ("api.Request", "api.Response")),
                           ("aiokafka.protocol", ("api.RequestStruct", "api.Response"))):
        try:
            pkg = _import(package)
            base_classes = tuple(getattr(_import(f"{package}.{b.split('.')[0]}"),
                                         b.split(".")[1]) for b in bases)
        except ImportError:
            continue
        seen = set()
        for mod in pkgutil.iter_modules(pkg.__path__):
            module = _import(f"{package}.{mod.name}")
            for name in dir(module):
                cls = getattr(module, name)
                if (isinstance(cls, type) and issubclass(cls, base_classes)
                        and cls not in base_classes and cls not in seen
                        and isinstance(getattr(cls, "API_KEY", None), int)
                        and isinstance(getattr(cls, "API_VERSION", None), int)
                        and _supported(cls.API_KEY, cls.API_VERSION)):
                    seen.add(cls)
                    request = issubclass(cls, base_classes[0])
                    for variant in VARIANTS:
                        marks = ()
                        # the sparse bodies have no partitions: only the full ones differ
                        if (package, name) in KNOWN_DIFFERENCES and variant == "full":
                            marks = pytest.mark.xfail(
                                strict=True, reason=KNOWN_DIFFERENCES[(package, name)])
                        out.append(pytest.param(cls, request, variant, marks=marks,
                                                id=f"{package.split('.')[0]}-{name}-{variant}"))
    return out


HAND_WRITTEN = _hand_written()


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _leaves_theirs(obj, out: list) -> list:
    """Their decoded value as its leaves in wire order (tagged-field dicts left out)."""
    schema = getattr(obj, "SCHEMA", None)
    if schema is not None and hasattr(schema, "names"):
        for name in schema.names:
            _leaves_theirs(getattr(obj, name), out)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _leaves_theirs(item, out)
    elif isinstance(obj, dict):
        pass
    elif isinstance(obj, set):  # kafka-python's "authorized operations" bit sets
        out.append(_signed32(sum(1 << bit for bit in obj)))
    elif isinstance(obj, uuid.UUID):
        out.append(obj.bytes)
    elif isinstance(obj, memoryview):
        out.append(bytes(obj))
    else:
        out.append(obj)
    return out


def _leaves_ours(fields, body: dict, version: int, out: list) -> list:
    for f in fields:
        if not in_range(version, f.versions) or (f.tag is not None
                                                 and in_range(version, f.tagged)):
            continue
        value = body.get(f.name)
        if f.type.startswith("[]"):
            if value is None:
                out.append(None)
            elif f.fields is not None:
                for item in value:
                    _leaves_ours(f.fields, item, version, out)
            else:
                out.extend(value)
        elif f.fields is not None:
            _leaves_ours(f.fields, value, version, out)
        else:
            out.append(value)
    return out


@pytest.mark.skipif(not HAND_WRITTEN, reason="neither kafka-python 3.x nor aiokafka installed")
@pytest.mark.parametrize(("cls", "is_request", "variant"),
                         HAND_WRITTEN or [pytest.param(None, None, None, id="none")])
def test_hand_written_classes_read_our_bytes(cls, is_request, variant):
    key, version = cls.API_KEY, cls.API_VERSION
    body = _body(key, version, is_request, variant)
    ours = _ours(key, version, is_request, body)
    theirs = cls.decode(ours)
    message = (REQUESTS if is_request else RESPONSES)[key]
    assert _leaves_theirs(theirs, []) == _leaves_ours(message.fields, body, version, [])
    assert bytes(theirs.encode()) == ours


# == kafka-python's schema-driven classes ===================================================

def _schema_classes() -> dict:
    try:
        ApiMessage = _import("kafka.protocol.api_message").ApiMessage
    except ImportError:
        return {}
    out = {}
    for sub in ("metadata", "producer", "consumer", "admin"):
        module = _import(f"kafka.protocol.{sub}")
        for name in dir(module):
            cls = getattr(module, name)
            if (isinstance(cls, type) and issubclass(cls, ApiMessage)
                    and getattr(cls, "_json", None)):
                out[(cls.API_KEY, cls.type == "is_request")] = cls
    return out


SCHEMA_CLASSES = _schema_classes()
SCHEMA_CASES = [pytest.param(key, v, req, id=f"{protocol.API_NAMES[key]}"
                             f"{'Request' if req else 'Response'}-v{v}")
                for key, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items())
                for v in range(lo, hi + 1) for req in (True, False)
                if (key, req) in SCHEMA_CLASSES
                and SCHEMA_CLASSES[(key, req)].valid_versions[0] <= v]
#: kafka-python's json_patch renames these int32 fields to "authorized_operations" (a bit
#: set): the oracle compares them at their default. (DescribeGroupsResponse's group field
#: is named so already and patched the same way.)
PATCHED = {"topic_authorized_operations", "cluster_authorized_operations",
           "authorized_operations"}


def _kp_object(cls, body: dict, version: int):
    """kafka-python's data object for ``body``."""
    from kafka.protocol.data_container import DataContainer

    def data_class(field):
        if not field.has_data_class():
            field.set_data_class(type(field.type_str, (DataContainer,), {"_struct": field}))
        return field.data_class

    def build(container, value: dict, top: bool):
        kwargs = {}
        for field in container._struct._fields:
            if field.name not in value or field.name == "authorized_operations":
                continue   # (a bit set there: left at kafka-python's default, see PATCHED)
            item = value[field.name]
            if item is not None and field.is_struct_array():
                item = [build(data_class(field), x, False) for x in item]
            elif item is not None and field.is_struct():
                item = build(data_class(field), item, False)
            elif isinstance(item, bytes) and field.type_str == "uuid":
                item = uuid.UUID(bytes=item)
            kwargs[field.name] = item
        return container(version=version, **kwargs) if top else container(**kwargs)
    obj = build(cls, body, True)
    obj._header = None
    return obj


def _with_tagged_defaults(fields, body: dict, version: int) -> dict:
    """``body`` with the tagged fields it leaves out at their defaults: kafka-python's
    decoded objects carry every field of the version (ours only what was sent)."""
    out = dict(body)
    for f in fields:
        if not in_range(version, f.versions):
            continue
        if f.name not in out and f.tag is not None and in_range(version, f.tagged):
            out[f.name] = _default(f) if f.fields is None or f.type.startswith("[]") else \
                _with_tagged_defaults(f.fields, {}, version)
        elif f.fields is not None and out.get(f.name) is not None:
            value = out[f.name]
            out[f.name] = ([_with_tagged_defaults(f.fields, x, version) for x in value]
                           if f.type.startswith("[]")
                           else _with_tagged_defaults(f.fields, value, version))
    return out


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _strip_patched(value):
    if isinstance(value, dict):
        return {k: _strip_patched(v) for k, v in value.items()
                if k not in PATCHED and k != "authorized_operations"}
    if isinstance(value, list):
        return [_strip_patched(v) for v in value]
    return value


def _default_patched(value):
    if isinstance(value, dict):
        return {k: (-(1 << 31) if k in PATCHED else _default_patched(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_default_patched(v) for v in value]
    return value


@pytest.mark.skipif(not SCHEMA_CLASSES, reason="kafka-python 3.x (kafka.protocol.api_message) "
                    "not installed")
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("key", "version", "is_request"), SCHEMA_CASES or
                         [pytest.param(None, None, None, id="none")])
def test_kafka_python_schema_classes_agree(key, version, is_request, variant):
    cls = SCHEMA_CLASSES[(key, is_request)]
    body = _default_patched(_body(key, version, is_request, variant))
    ours = _ours(key, version, is_request, body)
    # kafka-python encodes, we compare bytes (and decode them: test_protocol round trips)
    assert bytes(_kp_object(cls, body, version).encode(version=version)) == ours
    # we encode, kafka-python decodes: the same fields with the same values
    theirs = cls.decode(ours, version=version)
    message = (REQUESTS if is_request else RESPONSES)[key]
    expected = _with_tagged_defaults(message.fields, body, version)
    assert _strip_patched(_plain(theirs.to_dict(json=False))) == _strip_patched(expected)
