"""Our message descriptions against an independent copy of Kafka's message JSON: the
files kafka-python 3.x ships (``kafka/protocol/schemas/resources``, from a later Kafka
than the reference commit). At every version the server supports, each message must
have the same fields in the same order with the same type, nullability, tag and default.
"""

from __future__ import annotations

import importlib
import re
import warnings

import pytest

from kafkastore.server import protocol
from kafkastore.server.protocol.codec import _default
from kafkastore.server.protocol.messages import REQUESTS, RESPONSES
from kafkastore.server.protocol.schema import UNSET, in_range


def _load_json():
    try:
        with warnings.catch_warnings():
            # kafka-python 3.0 reads its resources with the deprecated read_text
            warnings.simplefilter("ignore", DeprecationWarning)
            load = importlib.import_module("kafka.protocol.schemas.load_json").load_json
            load("ApiVersionsRequest")
    except (ImportError, FileNotFoundError):
        return None

    def quiet(name):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return load(name)
    return quiet


LOAD = _load_json()
CASES = [pytest.param(key, v, req, id=f"{protocol.API_NAMES[key]}"
                      f"{'Request' if req else 'Response'}-v{v}")
         for key, (lo, hi) in sorted(protocol.SUPPORTED_APIS.items())
         for v in range(lo, hi + 1) for req in (True, False)]


def _snake(name: str) -> str:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name).lower()


def _json_default(field: dict):
    """Kafka's default of a JSON field, as our descriptions spell it."""
    text = field.get("default")
    t = field["type"]
    if text is None:
        return None
    if text == "null":
        return None
    if t == "bool":
        # (a JSON boolean "default": false reads as False, a string "false" as "false")
        return {"true": True, "false": False}[str(text).lower()]
    if t.startswith("int") or t.startswith("uint"):
        return int(str(text), 0)
    return text


def _theirs(fields: list, version: int, flexible: bool) -> list:
    out = []
    for f in fields:
        if not in_range(version, f["versions"]):
            continue
        tagged = "tag" in f and in_range(version, f.get("taggedVersions"))
        entry = (_snake(f["name"]), f["type"].split("[]")[-1] if f["type"].startswith("[]")
                 and f["type"][2:3].isupper() else f["type"],
                 in_range(version, f.get("nullableVersions")),
                 f.get("tag") if tagged else None, _json_default(f))
        sub = _theirs(f["fields"], version, flexible) if "fields" in f else None
        out.append((entry, sub))
    return out


def _ours(fields, version: int) -> list:
    out = []
    for f in fields:
        if not in_range(version, f.versions):
            continue
        tagged = f.tag is not None and in_range(version, f.tagged)
        entry = (f.name, f.type.split("[]")[-1] if f.type.startswith("[]")
                 and f.type[2:3].isupper() else f.type,
                 in_range(version, f.nullable), f.tag if tagged else None,
                 f.default if f.default is not UNSET else None)
        sub = _ours(f.fields, version) if f.fields is not None else None
        out.append((entry, sub))
    return out


@pytest.mark.skipif(LOAD is None, reason="kafka-python 3.x's message JSON not installed")
@pytest.mark.parametrize(("key", "version", "is_request"), CASES)
def test_descriptions_match_kafkas_json(key, version, is_request):
    ours = (REQUESTS if is_request else RESPONSES)[key]
    theirs = LOAD(ours.name)
    assert theirs["apiKey"] == key
    if not in_range(version, theirs["validVersions"]):
        # Kafka 4.0 removed Produce v0-v2 (KIP-896) from its JSON; those versions are
        # checked against kafka-python's hand-written classes (test_protocol_oracles)
        pytest.skip(f"{ours.name} v{version} is gone from this copy of Kafka's JSON "
                    f"({theirs['validVersions']})")
    assert in_range(version, theirs["flexibleVersions"]) == in_range(version, ours.flexible)
    assert _ours(ours.fields, version) == _theirs(theirs["fields"], version,
                                                  in_range(version, ours.flexible))


def test_defaults_follow_kafkas_rules():
    # no "default" in the JSON: 0, "", [], False, the zero UUID, null records
    fetch = {f.name: f for f in REQUESTS[1].fields}
    assert _default(fetch["max_bytes"]) == 0x7FFFFFFF
    assert _default(fetch["rack_id"]) == ""
    assert _default(fetch["topics"]) == []
    assert _default(fetch["cluster_id"]) is None
    topics = {f.name: f for f in fetch["topics"].fields}
    assert _default(topics["topic_id"]) == b"\0" * 16
