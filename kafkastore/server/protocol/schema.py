"""The description language of the codec: :class:`F` (one field) and :class:`Message`.

A field reads as Kafka's JSON message files read, in Python spelling::

    F("partitions", "[]FetchPartition", "0+", nullable="4+", fields=(...))

``name`` is Kafka's field name in snake_case (the key in a body dict); ``type`` is a
primitive (``int8`` ... ``uuid``, ``string``, ``bytes``, ``records``), ``[]<primitive>``
(an array of it), ``[]<StructName>`` with ``fields`` (an array of structs: a list of
dicts) or ``<StructName>`` with ``fields`` (one struct: a dict); ``versions`` the
versions that have the field (``"3+"``, ``"0-12"``, ``"0"``); ``nullable`` the versions
where it may be null; ``tag`` / ``tagged`` make it a tagged field (KIP-482) in those
versions; ``default`` is Kafka's ``"default"`` (otherwise 0, ``""``, ``[]``, False, the
zero UUID, or null for records); ``flexible`` overrides the message's flexible versions
for this one field (``"none"``: never compact, as the request header's ClientId).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["F", "Message", "UNSET", "parse_versions", "in_range"]


class _Unset:
    """The marker of a field without Kafka's ``"default"`` (None is a null default)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()

#: Kafka's version numbers are int16: "N+" reaches to the top.
MAX_VERSION = 0x7FFF


def parse_versions(text: str | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, 32767), ``"0-12"`` -> (0, 12), ``"5"`` -> (5, 5), ``"none"`` or
    None -> None (Kafka's ``Versions.parse``)."""
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def in_range(version: int, text: str | None) -> bool:
    rng = parse_versions(text)
    return rng is not None and rng[0] <= version <= rng[1]


class F(NamedTuple):
    """One field of a message or struct (see the module docstring)."""

    name: str
    type: str
    versions: str
    nullable: str | None = None
    tag: int | None = None
    tagged: str | None = None
    default: object = UNSET
    flexible: str | None = None
    fields: tuple[F, ...] | None = None


class Message(NamedTuple):
    """One request or response: its API key, Kafka's name for it, the versions Kafka
    defines (``valid``), the versions that are flexible (compact strings and arrays,
    tagged fields) and its fields."""

    api_key: int
    name: str
    valid: str
    flexible: str
    fields: tuple[F, ...]
