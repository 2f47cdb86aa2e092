"""Configuration with Kafka's names, defaults and checks: one mechanism for every class.

:class:`ConfigBase` is the mechanism: a configuration class is a frozen dataclass whose
fields are the rows of a table of :class:`ConfigKey` (Kafka's name, the Python
attribute, the parser of Kafka's type, the default, the range check, the meaning), and
construction, ``from_dict``/``to_dict``, ``replace``, the checks, the repr and the
documentation's defaults tables are all built from that table. :class:`LogConfig`, the
log cleaner's ``CleanerConfig`` and the log manager's ``ManagerConfig`` use it.

:class:`LogConfig` holds the settings Kafka keeps per topic that matter to the
local log: segment size and age, index density, flushing, retention,
compaction and the append-time checks. Names, defaults, allowed ranges and
error messages are Kafka's (``LogConfig.java``, ``ConfigDef.java``), so a
topic's config overrides can be passed as they are, as strings from a
``.properties`` file or as Python values. :func:`parse_properties` reads Java
``.properties`` text, the format of ``server.properties`` and of topic
override files.

This module is in the lowest layer: it imports only :mod:`kafkastore.errors`,
:mod:`kafkastore.types` and the standard library.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import math
import numbers
import operator
import random
import re
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Literal, NamedTuple, Protocol, TypeVar

from kafkastore.errors import ConfigError
from kafkastore.types import CompressionType, TimestampType

__all__ = [
    "LONG_MAX",
    "Check",
    "ConfigBase",
    "ConfigKey",
    "LogConfig",
    "at_least",
    "between",
    "parse_bool",
    "parse_double",
    "parse_int",
    "parse_long",
    "parse_properties",
]

#: Java's ``Long.MAX_VALUE``; Kafka's default for the settings that are off
#: unless set (``flush.messages``, ``flush.ms``, ``max.compaction.lag.ms``...).
LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1

_INT_RANGE = (-(2**31), _INT_MAX)
_LONG_RANGE = (-(2**63), LONG_MAX)


# -- value parsing, as Kafka's ConfigDef.parseType does it ------------------------------------


def _java_str(value: object) -> str:
    """``value`` as Java would print it in a ``ConfigException`` message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_java_str(v) for v in value) + "]"
    return str(value)


def _invalid(key: str, value: object, why: str) -> ConfigError:
    return ConfigError(
        f"Invalid value {_java_str(value)} for configuration {key}: {why}", key=key, value=value
    )


def _java_trim(s: str) -> str:
    # String.trim() drops every char <= U+0020 at both ends, control chars included.
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
# Double.parseDouble's decimal forms (no hex floats), with Java's optional d/f suffix.
_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[dDfF]?")


def _type_name(value: object) -> str:
    return type(value).__name__


def _parse_integer(key: str, value: object, long: bool) -> int:
    kind, (lo, hi) = ("LONG", _LONG_RANGE) if long else ("INT", _INT_RANGE)
    if isinstance(value, str):
        s = _java_trim(value)
        # Integer.parseInt / Long.parseLong: sign and decimal digits only, in range.
        if not _INTEGER_RE.fullmatch(s) or not lo <= int(s) <= hi:
            raise _invalid(key, value, f"Not a number of type {kind}")
        return int(s)
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # int, and numpy integers
        except TypeError:
            pass
    if long:
        expected = f"Expected value to be a 64-bit integer (long), but it was a {_type_name(value)}"
    else:
        expected = f"Expected value to be a 32-bit integer, but it was a {_type_name(value)}"
    raise _invalid(key, value, expected)


def parse_int(key: str, value: object) -> int:
    """Kafka's INT: a Python integer or a decimal string that fits 32 bits."""
    return _parse_integer(key, value, long=False)


def parse_long(key: str, value: object) -> int:
    """Kafka's LONG: a Python integer or a decimal string that fits 64 bits."""
    return _parse_integer(key, value, long=True)


def parse_double(key: str, value: object) -> float:
    """Kafka's DOUBLE: a real number or a string ``Double.parseDouble`` takes."""
    if isinstance(value, str):
        s = _java_trim(value)
        if not _DOUBLE_RE.fullmatch(s):
            raise _invalid(key, value, "Not a number of type DOUBLE")
        return float(s.rstrip("dDfF"))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise _invalid(key, value, f"Expected value to be a double, but it was a {_type_name(value)}")


def parse_bool(key: str, value: object) -> bool:
    """Kafka's BOOLEAN: a bool or ``"true"``/``"false"`` in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        s = _java_trim(value).lower()
        if s == "true":
            return True
        if s == "false":
            return False
    raise _invalid(key, value, "Expected value to be either true or false")


def _parse_string(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _invalid(key, value,
                       f"Expected value to be a string, but it was a {_type_name(value)}")
    return _java_trim(value)


_POLICIES = ("compact", "delete")


def _parse_cleanup_policy(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        s = _java_trim(value)
        items: list[object] = re.split(r"\s*,\s*", s) if s else []
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, (set, frozenset)):
        items = sorted(value, key=str)
    else:
        raise _invalid(key, value, "Expected a comma separated list.")
    for item in items:
        if item not in _POLICIES:  # ValidList.in: exact, case-sensitive
            raise _invalid(key, item, "String must be one of: " + ", ".join(_POLICIES))
    # Only membership matters to Kafka; one canonical order keeps equality meaningful.
    return tuple(p for p in _POLICIES if p in items)


_TIMESTAMP_TYPES = {"CreateTime": TimestampType.CREATE_TIME,
                    "LogAppendTime": TimestampType.LOG_APPEND_TIME}


def _parse_timestamp_type(key: str, value: object) -> TimestampType:
    if isinstance(value, TimestampType):
        if value in _TIMESTAMP_TYPES.values():
            return value
    else:
        ts = _TIMESTAMP_TYPES.get(_parse_string(key, value))
        if ts is not None:
            return ts
    raise _invalid(key, value, "String must be one of: " + ", ".join(_TIMESTAMP_TYPES))


# BrokerCompressionType, in Kafka's order (its error message lists them so).
_COMPRESSION_TYPES: dict[str, CompressionType | str] = {
    "uncompressed": CompressionType.NONE,
    "zstd": CompressionType.ZSTD,
    "lz4": CompressionType.LZ4,
    "snappy": CompressionType.SNAPPY,
    "gzip": CompressionType.GZIP,
    "producer": "producer",
}


def _parse_compression_type(key: str, value: object) -> CompressionType | str:
    if isinstance(value, CompressionType):
        return value
    parsed = _COMPRESSION_TYPES.get(_parse_string(key, value))
    if parsed is None:
        raise _invalid(key, value, "String must be one of: " + ", ".join(_COMPRESSION_TYPES))
    return parsed


# -- validators (ConfigDef.Range and friends) -------------------------------------------------


class Check(NamedTuple):
    """A range check: ``test(value)`` returns the complaint or None; ``valid`` says what
    passes, as Kafka's documentation does (``[14,...]``)."""

    test: Callable[[Any], str | None]
    valid: str


def at_least(lo: int) -> Check:
    """Kafka's ``Range.atLeast``."""
    def test(v: float) -> str | None:
        return None if v >= lo else f"Value must be at least {lo}"

    return Check(test, f"[{lo},...]")


def between(lo: int, hi: int) -> Check:
    """Kafka's ``Range.between`` (NaN fails too)."""
    def test(v: float) -> str | None:
        if math.isnan(v):  # Kafka's Range lets NaN through; it compares false with everything
            return "Value must be a number"
        if v < lo:
            return f"Value must be at least {lo}"
        if v > hi:
            return f"Value must be no more than {hi}"
        return None

    return Check(test, f"[{lo},...,{hi}]")


def _gzip_level(v: float) -> str | None:
    # Deflater.BEST_SPEED..BEST_COMPRESSION, or DEFAULT_COMPRESSION (-1).
    if v > 9 or (v < 1 and v != -1):
        return "Value must be between 1 and 9 or equal to -1"
    return None


# -- the keys ---------------------------------------------------------------------------------

# Kafka's ConfigDef.Type of each parser, and the values the parser itself limits to.
_TYPES: dict[Callable[[str, object], object], tuple[str, str]] = {
    parse_int: ("int", ""),
    parse_long: ("long", ""),
    parse_double: ("double", ""),
    parse_bool: ("boolean", "true, false"),
    _parse_string: ("string", ""),
    _parse_cleanup_policy: ("list", "[" + ", ".join(_POLICIES) + "]"),
    _parse_timestamp_type: ("string", "[" + ", ".join(_TIMESTAMP_TYPES) + "]"),
    _parse_compression_type: ("string", "[" + ", ".join(_COMPRESSION_TYPES) + "]"),
}


class ConfigKey(NamedTuple):
    """One setting of a configuration class, one row of its table (Kafka's ``ConfigKey``).

    ``name`` is Kafka's name (``segment.bytes``), ``attr`` the Python attribute
    (``segment_bytes``), ``parse(name, value)`` turns a string or a Python value into
    the attribute's value as Kafka's ``ConfigDef.parseType`` does, ``default`` is
    Kafka's default as that value, ``check`` its range check (or None) and ``doc`` what
    it means, the text of the documentation's table.
    """

    name: str
    attr: str
    parse: Callable[[str, object], object]
    default: object
    check: Check | None = None
    doc: str = ""

    @property
    def kafka_type(self) -> str:
        """Kafka's type name: int, long, double, boolean, string or list."""
        return _TYPES[self.parse][0]

    @property
    def valid(self) -> str:
        """The values accepted, as Kafka documents them (``[14,...]``), or ``""``."""
        return self.check.valid if self.check is not None else _TYPES[self.parse][1]


def _parse_value(key: ConfigKey, value: object) -> object:
    if value is None:
        raise _invalid(key.name, value, "Value must be non-null")
    parsed = key.parse(key.name, value)
    if key.check is not None:
        why = key.check.test(parsed)
        if why is not None:
            raise _invalid(key.name, parsed, why)
    if key.parse is parse_int or key.parse is parse_long:
        # A Python int (a string was range-checked as Java parses it) must fit the Java type.
        lo, hi = _INT_RANGE if key.parse is parse_int else _LONG_RANGE
        if parsed < lo:  # type: ignore[operator]
            raise _invalid(key.name, parsed, f"Value must be at least {lo}")
        if parsed > hi:  # type: ignore[operator]
            raise _invalid(key.name, parsed, f"Value must be no more than {hi}")
    return parsed


def _format(value: object) -> str:
    """``value`` as Kafka writes it in a properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, TimestampType):
        return value.label
    if isinstance(value, CompressionType):
        return "uncompressed" if value is CompressionType.NONE else value.name.lower()
    if isinstance(value, float):
        if math.isinf(value):  # as Java's Double.toString, which parsing takes back
            return "Infinity" if value > 0 else "-Infinity"
        return "NaN" if math.isnan(value) else repr(value)
    return str(value)


_C = TypeVar("_C", bound="ConfigBase")


def _rebuild(cls: type[_C], values: tuple) -> _C:
    return cls(**dict(zip((k.attr for k in cls.CONFIG_KEYS), values)))


class ConfigBase:
    """What :class:`LogConfig`, :class:`~kafkastore.cleaner.CleanerConfig` and
    :class:`~kafkastore.manager.ManagerConfig` share: each is a frozen, slotted
    dataclass whose fields are the rows of its ``CONFIG_KEYS`` table, in order.

    A setting may be given by its Kafka name (``log.cleaner.threads``), that name
    with underscores (``log_cleaner_threads``) or its attribute (``num_threads``),
    in a mapping (the first argument) and as keywords, which override the mapping.
    Values are parsed and range-checked by the key's ``parse`` and ``check`` with
    Kafka's wording; a name given twice in one mapping (or twice as keywords, in two
    spellings) and an unknown name raise :class:`~kafkastore.errors.ConfigError`.
    Every setting not given takes Kafka's default. Then the class's
    ``_validate_values`` checks the rules that span settings.

    Thread safety: instances are immutable (assigning raises
    :class:`dataclasses.FrozenInstanceError`), hashable, comparable by value and
    picklable (unpickling checks the values again), so one can be shared freely.
    """

    __slots__ = ()
    #: The settings, in Kafka's order: the dataclass fields and the documentation's table.
    CONFIG_KEYS: ClassVar[tuple[ConfigKey, ...]] = ()
    _BY_NAME: ClassVar[dict[str, ConfigKey]] = {}
    #: What the settings are, in the unknown-name message ("log cleaner").
    _WHAT: ClassVar[str] = "config"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)  # type: ignore[arg-type]
        keys = cls.CONFIG_KEYS
        cls._BY_NAME = {
            **{k.name.replace(".", "_"): k for k in keys},
            **{k.attr: k for k in keys},
            **{k.name: k for k in keys},
        }

    def __init__(self, settings: Mapping[str, object] | None = None, /,
                 **kw: object) -> None:
        for attr, value in self._resolve((settings or {}, kw), None).items():
            object.__setattr__(self, attr, value)

    @classmethod
    def from_dict(cls: type[_C], mapping: Mapping[str, object]) -> _C:
        """Build a config from a mapping of Kafka or Python names to values.

        The mapping may come straight from :func:`parse_properties` (string
        values) or hold Python values; names not in it take Kafka's defaults.

        Raises
        ------
        ConfigError
            For an unknown name, a name given twice (as ``segment.bytes`` and
            ``segment_bytes``) or an invalid value.
        """
        return cls(mapping)

    def to_dict(self) -> dict[str, str]:
        """Every setting under its Kafka name, as Kafka writes it in a properties file.

        ``type(config).from_dict(config.to_dict()) == config`` always holds.
        """
        return {k.name: _format(getattr(self, k.attr)) for k in self.CONFIG_KEYS}

    def replace(self: _C, **changes: object) -> _C:
        """Return a copy with ``changes`` (Kafka or Python names) applied.

        Only the changed values are parsed and checked again (plus the rules that
        span settings).
        """
        base = {k.attr: getattr(self, k.attr) for k in self.CONFIG_KEYS}
        new = object.__new__(type(self))
        for attr, value in self._resolve((changes,), base).items():
            object.__setattr__(new, attr, value)
        return new

    @classmethod
    def _resolve(cls, sources: tuple[Mapping[Any, object], ...],
                 base: Mapping[str, object] | None) -> dict[str, object]:
        """Parse ``sources`` (later ones win) over ``base`` (attr -> value) or the defaults."""
        given: dict[str, object] = {}  # attr -> raw value
        for source in sources:
            seen: dict[str, str] = {}  # attr -> the name it was given under, in this source
            for name, raw in source.items():
                key = cls._BY_NAME.get(name) if isinstance(name, str) else None
                if key is None:
                    raise cls._unknown(name)
                if key.attr in seen:
                    raise ConfigError(
                        f"Configuration {key.name} is given twice, as {seen[key.attr]} "
                        f"and {name}", key=key.name, value=raw)
                seen[key.attr] = name
                given[key.attr] = raw
        values = dict(base) if base is not None else {k.attr: k.default for k in cls.CONFIG_KEYS}
        for attr, raw in given.items():
            values[attr] = _parse_value(cls._BY_NAME[attr], raw)
        cls._validate_values(values)
        return values

    @classmethod
    def _validate_values(cls, values: dict[str, object]) -> None:
        """Check the rules that span settings (Kafka's ``validateValues``); none here."""

    @classmethod
    def _unknown(cls, name: object) -> ConfigError:
        return ConfigError(f"Unknown {cls._WHAT} setting {name!r}; known: "
                           f"{sorted(k.name for k in cls.CONFIG_KEYS)}", key=str(name))

    def __repr__(self) -> str:
        changed = []
        for k in self.CONFIG_KEYS:
            value = getattr(self, k.attr)
            if value != k.default:
                shown = _java_str(value) if isinstance(value, enum.Enum) else repr(value)
                changed.append(f"{k.attr}={shown}")
        return f"{type(self).__name__}({', '.join(changed)})"

    def __reduce__(self) -> tuple:
        return (_rebuild, (type(self), tuple(getattr(self, k.attr) for k in self.CONFIG_KEYS)))


# -- the topic configs ------------------------------------------------------------------------

_DAY_MS = 86400000

_LOG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("segment.bytes", "segment_bytes", parse_int, 1073741824, at_least(14),
              "Roll a new segment before its log file would exceed this many bytes (1 GiB; "
              "Kafka 4.0 raised the minimum to 1 MiB)."),
    ConfigKey("segment.ms", "segment_ms", parse_long, 7 * _DAY_MS, at_least(1),
              "Roll a segment this long after its first batch's timestamp (7 days)."),
    ConfigKey("segment.jitter.ms", "segment_jitter_ms", parse_long, 0, at_least(0),
              "Most a segment's time-based roll is brought forward; each segment draws its "
              "jitter with ``LogConfig.random_segment_jitter``."),
    ConfigKey("segment.index.bytes", "segment_index_bytes", parse_int, 10485760, at_least(4),
              "Size the offset and time index files are created with (10 MiB); a segment "
              "rolls when either is full (an offset index below 8 bytes holds no entry, and "
              "Kafka fails to create it)."),
    ConfigKey("index.interval.bytes", "index_interval_bytes", parse_int, 4096, at_least(0),
              "Bytes of batches between two index entries (0 indexes every batch)."),
    ConfigKey("flush.messages", "flush_messages", parse_long, LONG_MAX, at_least(1),
              "Fsync after this many messages; the default leaves flushing to the OS."),
    ConfigKey("flush.ms", "flush_ms", parse_long, LONG_MAX, at_least(0),
              "Fsync when the last flush is this old."),
    ConfigKey("retention.ms", "retention_ms", parse_long, 7 * _DAY_MS, None,
              "Delete segments whose newest timestamp is older than this (7 days); negative "
              "(-1) means no time limit."),
    ConfigKey("retention.bytes", "retention_bytes", parse_long, -1, None,
              "Delete the oldest segments while the log is larger than this; negative means "
              "no size limit."),
    ConfigKey("file.delete.delay.ms", "file_delete_delay_ms", parse_long, 60000, at_least(0),
              "Delay between renaming a segment's files to ``.deleted`` and removing them "
              "(1 minute)."),
    ConfigKey("cleanup.policy", "cleanup_policy", _parse_cleanup_policy, ("delete",), None,
              "Any of ``compact`` and ``delete`` (a comma separated string in Kafka's files; "
              "in Python a tuple kept in the order ``(\"compact\", \"delete\")``)."),
    ConfigKey("max.message.bytes", "max_message_bytes", parse_int, 1048588, at_least(0),
              "Largest batch accepted on append, counting its 12-byte offset and size "
              "prefix."),
    ConfigKey("message.timestamp.type", "message_timestamp_type", _parse_timestamp_type,
              TimestampType.CREATE_TIME, None,
              "A ``TimestampType``: whether batches keep the producer's timestamps or get "
              "the log's clock on append."),
    ConfigKey("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", parse_long,
              LONG_MAX, at_least(0),
              "How far before the broker's clock a batch's timestamp may lie."),
    ConfigKey("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", parse_long,
              LONG_MAX, at_least(0),
              "How far after the broker's clock a batch's timestamp may lie."),
    ConfigKey("compression.type", "compression_type", _parse_compression_type, "producer", None,
              "``producer`` (keep each batch's codec) or a codec the log recompresses to; in "
              "Python ``\"producer\"`` or a ``CompressionType``."),
    ConfigKey("compression.gzip.level", "compression_gzip_level", parse_int, -1,
              Check(_gzip_level, "[1,...,9] or -1"),
              "gzip level for batches the log compresses (-1: zlib's default)."),
    ConfigKey("compression.lz4.level", "compression_lz4_level", parse_int, 9, between(1, 17),
              "lz4 level for batches the log compresses."),
    ConfigKey("compression.zstd.level", "compression_zstd_level", parse_int, 3,
              between(-131072, 22), "zstd level for batches the log compresses."),
    ConfigKey("preallocate", "preallocate", parse_bool, False, None,
              "Create each segment's log file at ``segment.bytes`` and trim it when the "
              "segment is rolled."),
    ConfigKey("delete.retention.ms", "delete_retention_ms", parse_long, _DAY_MS, at_least(0),
              "How long compaction keeps tombstones and transaction markers (1 day)."),
    ConfigKey("min.compaction.lag.ms", "min_compaction_lag_ms", parse_long, 0, at_least(0),
              "A record stays uncompacted at least this long (at most "
              "``max.compaction.lag.ms``)."),
    ConfigKey("max.compaction.lag.ms", "max_compaction_lag_ms", parse_long, LONG_MAX,
              at_least(1), "A record stays uncompacted at most this long."),
    ConfigKey("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", parse_double, 0.5,
              between(0, 1), "Dirty fraction of the log above which it is compacted."),
)

# Kafka topic configs that kafkastore does not model, and why; named in the error message so
# that loading a real topic's overrides fails with an explanation rather than a shrug.
_NOT_MODELLED = {
    **dict.fromkeys(
        ("unclean.leader.election.enable", "min.insync.replicas",
         "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"),
        "a replication setting",
    ),
    **dict.fromkeys(
        ("remote.storage.enable", "local.retention.ms", "local.retention.bytes",
         "remote.log.copy.disable", "remote.log.delete.on.disable"),
        "a tiered storage setting",
    ),
    **dict.fromkeys(
        ("message.format.version", "message.timestamp.difference.max.ms",
         "message.downconversion.enable"),
        "deprecated, and removed in Kafka 4.0",
    ),
}


class _RandInt(Protocol):
    def randint(self, a: int, b: int) -> int: ...


@dataclasses.dataclass(frozen=True, init=False, repr=False, slots=True)
class LogConfig(ConfigBase):
    """The configuration of one log (Kafka's topic-level ``LogConfig``).

    Construct with keyword arguments or a mapping, Kafka's dotted names or the Python
    attribute names, and values either as Python values or as the strings of a
    Kafka properties file (:class:`ConfigBase` has the rules)::

        LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",))
        LogConfig({"segment.bytes": "1048576", "cleanup.policy": "compact"})
        LogConfig.from_dict(parse_properties(path.read_text()))

    Every setting not given takes Kafka's default. Strings are parsed as
    Kafka's ``ConfigDef`` parses them (trimmed; ``"true"``/``"false"`` in any
    case; decimal integers that fit the Java type). An unknown name, a value of
    the wrong type or outside Kafka's range raises
    :class:`~kafkastore.errors.ConfigError` with Kafka's wording, such as
    ``Invalid value 5 for configuration segment.bytes: Value must be at least
    14``. One rule spans two settings, as in Kafka's ``validateValues``:
    ``min.compaction.lag.ms`` may not exceed ``max.compaction.lag.ms``.

    The settings, their Kafka names, types, defaults and meanings are the rows of
    :attr:`CONFIG_KEYS` (:class:`ConfigKey`); the documentation's configuration page
    lists them. ``Long.MAX_VALUE`` (:data:`LONG_MAX`, ``2**63-1``) is what Kafka uses
    for "never". Integer settings are Java ``int`` (``segment_bytes``,
    ``segment_index_bytes``, ``index_interval_bytes``, ``max_message_bytes`` and
    the compression levels) or ``long`` (the rest), and must fit.

    Thread safety: a ``LogConfig`` is immutable (assigning an attribute raises
    :class:`dataclasses.FrozenInstanceError`), hashable and picklable, so one
    instance can be shared by every log, thread and process. Change settings
    with :meth:`replace`, which returns a new instance.
    """

    CONFIG_KEYS = _LOG_KEYS

    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    flush_messages: int
    flush_ms: int
    retention_ms: int
    retention_bytes: int
    file_delete_delay_ms: int
    cleanup_policy: tuple[str, ...]
    max_message_bytes: int
    message_timestamp_type: TimestampType
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    compression_type: CompressionType | Literal["producer"]
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    preallocate: bool
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float


    @classmethod
    def _validate_values(cls, values: dict[str, object]) -> None:
        # LogConfig.validateValues: the one rule that ties two settings together.
        lo, hi = values["min_compaction_lag_ms"], values["max_compaction_lag_ms"]
        if lo > hi:  # type: ignore[operator]
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                f"max.compaction.lag.ms ({hi})",
                key="min.compaction.lag.ms",
                value=lo,
            )

    @classmethod
    def _unknown(cls, name: object) -> ConfigError:
        if not isinstance(name, str):
            return ConfigError(f"Config names must be strings, not {_type_name(name)}: {name!r}")
        message = f"Unknown topic config name: {name}"
        if name in _NOT_MODELLED:
            message += (" (a Kafka topic config that kafkastore does not implement: "
                        f"{_NOT_MODELLED[name]})")
            return ConfigError(message, key=name)
        # Suggest in the spelling the caller used: Python names for snake_case, else Kafka's.
        styles = [[k.attr for k in cls.CONFIG_KEYS], [k.name for k in cls.CONFIG_KEYS]]
        if "_" not in name:
            styles.reverse()
        matches: list[str] = []
        for candidates in styles:
            matches = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
            if matches:
                break
        if len(matches) == 1:
            message += f"; did you mean {matches[0]}?"
        elif matches:
            message += f"; did you mean one of {', '.join(matches)}?"
        return ConfigError(message, key=name, suggestions=tuple(matches))


    @property
    def compact(self) -> bool:
        """True when ``cleanup_policy`` includes ``"compact"``."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True when ``cleanup_policy`` includes ``"delete"``."""
        return "delete" in self.cleanup_policy

    def random_segment_jitter(self, rng: _RandInt | None = None) -> int:
        """Draw the roll jitter of a new segment, as Kafka's ``randomSegmentJitter``.

        0 when ``segment_jitter_ms`` is 0; otherwise ``abs(n) % min(segment_jitter_ms,
        segment_ms)`` for a random Java ``int`` ``n`` (with ``abs(-2**31) == 0``,
        as Kafka's ``Utils.abs``), so ``0 <= jitter < min(segment_jitter_ms,
        segment_ms)``. A segment rolls on time once it is ``segment_ms - jitter`` old.

        Parameters
        ----------
        rng : random.Random, optional
            Anything with ``randint(a, b)``, such as a seeded ``random.Random``
            for reproducible jitter. ``None`` (the default) means the
            :mod:`random` module's shared generator.
        """
        if self.segment_jitter_ms == 0:
            return 0
        n = (random if rng is None else rng).randint(-(2**31), _INT_MAX)
        return (0 if n == -(2**31) else abs(n)) % min(self.segment_jitter_ms, self.segment_ms)


# -- Java .properties -------------------------------------------------------------------------

_PROPERTY_WS = " \t\f"
_NATURAL_LINE_RE = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Read Java ``.properties`` text (``server.properties``, topic overrides) into a dict.

    Follows ``java.util.Properties.load``: lines end at ``\\n``, ``\\r`` or
    ``\\r\\n``; blank lines and lines whose first non-blank character is ``#``
    or ``!`` are skipped; a line ending in an odd number of backslashes
    continues on the next line, whose leading blanks are dropped; the key
    ends at the first unescaped ``=``, ``:`` or blank, and one ``=`` or ``:``
    with blanks around it separates it from the value (``key=value``,
    ``key: value`` and ``key value`` are all the same); ``\\t``, ``\\n``,
    ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes and a backslash before any
    other character stands for that character. A key given twice keeps its
    last value.

    One difference from Java: unescaped trailing blanks of a value are dropped
    (Kafka trims every value it parses anyway); escape the last one with a
    backslash to keep them.

    Raises
    ------
    ConfigError
        For a malformed ``\\uXXXX`` escape (the message gives the line).
    """
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        key, value = _split_property(line, lineno)
        props[key] = value
    return props


def _odd_trailing_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(first line number, logical line)``, continuations joined as by Java's LineReader."""
    natural = _NATURAL_LINE_RE.split(text)
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_PROPERTY_WS)
        i += 1
        if not line or line[0] in "#!":  # a comment cannot be continued
            continue
        parts = []
        while _odd_trailing_backslashes(line):
            parts.append(line[:-1])
            if i == len(natural):  # a backslash at the very end is dropped
                line = ""
                break
            # A blank continuation line ends the logical line: it has no backslash to go on.
            line = natural[i].lstrip(_PROPERTY_WS)
            i += 1
        parts.append(line)
        yield lineno, "".join(parts)


def _split_property(line: str, lineno: int) -> tuple[str, str]:
    n = len(line)
    key_end = 0
    value_start = n
    has_separator = False
    backslash = False
    while key_end < n:
        c = line[key_end]
        if not backslash and c in "=:":
            value_start = key_end + 1
            has_separator = True
            break
        if not backslash and c in _PROPERTY_WS:
            value_start = key_end + 1
            break
        backslash = c == "\\" and not backslash
        key_end += 1
    while value_start < n:
        c = line[value_start]
        if c not in _PROPERTY_WS:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    key, _ = _unescape(line[:key_end], lineno)
    _, value = _unescape(line[value_start:], lineno)
    return key, value


def _unescape(s: str, lineno: int) -> tuple[str, str]:
    """Return ``s`` unescaped, and the same without its unescaped trailing blanks."""
    out: list[str] = []
    keep = 0  # length of ``out`` up to its last escaped or non-blank character
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            if c not in _PROPERTY_WS:
                keep = len(out)
            continue
        if i == n:
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) < 4 or not all(d in string.hexdigits for d in digits):
                raise ConfigError(f"Malformed \\uxxxx encoding on line {lineno}: \\u{digits}")
            c = chr(int(digits, 16))
            i += 4
        else:
            c = _ESCAPES.get(c, c)
        out.append(c)
        keep = len(out)
    return _join_utf16(out), _join_utf16(out[:keep])


def _join_utf16(chars: list[str]) -> str:
    # Java strings are UTF-16: two \\u escapes may form one surrogate pair.
    s = "".join(chars)
    if any("\ud800" <= c <= "\udfff" for c in s):
        s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return s
