"""Tests for kafkastore.config: Kafka's topic config names, defaults, parsing and checks,
the segment jitter, and the Java .properties reader.

The tables below are written from Kafka's sources (LogConfig.java, ConfigDef.java,
CompressionType.java; /work/shared/reference/kafka-storage.md section 8), not from the
module, so a default or a message that drifts from Kafka's fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import pickle
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkastore.config import LONG_MAX, ConfigBase, ConfigKey, LogConfig, parse_properties
from kafkastore.errors import ConfigError, KafkaStoreError
from kafkastore.types import CompressionType, TimestampType

JAVA_LONG_MAX = 9223372036854775807  # Long.MAX_VALUE, spelled out

# (Kafka name, attribute, default as a Python value, default as Kafka writes it)
KAFKA_DEFAULTS = [
    ("segment.bytes", "segment_bytes", 1073741824, "1073741824"),
    ("segment.ms", "segment_ms", 604800000, "604800000"),
    ("segment.jitter.ms", "segment_jitter_ms", 0, "0"),
    ("segment.index.bytes", "segment_index_bytes", 10485760, "10485760"),
    ("index.interval.bytes", "index_interval_bytes", 4096, "4096"),
    ("flush.messages", "flush_messages", JAVA_LONG_MAX, "9223372036854775807"),
    ("flush.ms", "flush_ms", JAVA_LONG_MAX, "9223372036854775807"),
    ("retention.ms", "retention_ms", 604800000, "604800000"),
    ("retention.bytes", "retention_bytes", -1, "-1"),
    ("file.delete.delay.ms", "file_delete_delay_ms", 60000, "60000"),
    ("cleanup.policy", "cleanup_policy", ("delete",), "delete"),
    ("max.message.bytes", "max_message_bytes", 1048588, "1048588"),
    ("message.timestamp.type", "message_timestamp_type", TimestampType.CREATE_TIME, "CreateTime"),
    ("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", JAVA_LONG_MAX,
     "9223372036854775807"),
    ("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", JAVA_LONG_MAX,
     "9223372036854775807"),
    ("compression.type", "compression_type", "producer", "producer"),
    ("compression.gzip.level", "compression_gzip_level", -1, "-1"),
    ("compression.lz4.level", "compression_lz4_level", 9, "9"),
    ("compression.zstd.level", "compression_zstd_level", 3, "3"),
    ("preallocate", "preallocate", False, "false"),
    ("delete.retention.ms", "delete_retention_ms", 86400000, "86400000"),
    ("min.compaction.lag.ms", "min_compaction_lag_ms", 0, "0"),
    ("max.compaction.lag.ms", "max_compaction_lag_ms", JAVA_LONG_MAX, "9223372036854775807"),
    ("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", 0.5, "0.5"),
]
NAMES = [row[0] for row in KAFKA_DEFAULTS]
ATTR = {row[0]: row[1] for row in KAFKA_DEFAULTS}

# (Kafka name, a valid non-default value as a properties string, the same as a Python value)
NON_DEFAULTS = [
    ("segment.bytes", "1048576", 1048576),
    ("segment.ms", "3600000", 3600000),
    ("segment.jitter.ms", "600000", 600000),
    ("segment.index.bytes", "4096", 4096),
    ("index.interval.bytes", "0", 0),
    ("flush.messages", "1", 1),
    ("flush.ms", "1000", 1000),
    ("retention.ms", "-1", -1),
    ("retention.bytes", "1073741824", 1073741824),
    ("file.delete.delay.ms", "0", 0),
    ("cleanup.policy", "compact,delete", ("compact", "delete")),
    ("max.message.bytes", "0", 0),
    ("message.timestamp.type", "LogAppendTime", TimestampType.LOG_APPEND_TIME),
    ("message.timestamp.before.max.ms", "3600000", 3600000),
    ("message.timestamp.after.max.ms", "0", 0),
    ("compression.type", "zstd", CompressionType.ZSTD),
    ("compression.gzip.level", "9", 9),
    ("compression.lz4.level", "17", 17),
    ("compression.zstd.level", "-131072", -131072),
    ("preallocate", "true", True),
    ("delete.retention.ms", "0", 0),
    ("min.compaction.lag.ms", "60000", 60000),
    ("max.compaction.lag.ms", "1", 1),
    ("min.cleanable.dirty.ratio", "0.1", 0.1),
]


# -- defaults and names ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "attr", "default", "text"), KAFKA_DEFAULTS)
def test_default_is_kafkas(name, attr, default, text):
    config = LogConfig()
    value = getattr(config, attr)
    assert value == default
    assert type(value) is type(default)
    assert config.to_dict()[name] == text


def test_every_topic_config_is_there_in_kafka_order():
    assert list(LogConfig().to_dict()) == NAMES
    assert [f.name for f in dataclasses.fields(LogConfig)] == [ATTR[n] for n in NAMES]
    assert LONG_MAX == JAVA_LONG_MAX == 2**63 - 1


def test_the_non_default_table_covers_every_key():
    assert {row[0] for row in NON_DEFAULTS} == set(NAMES)


@pytest.mark.parametrize(("name", "text", "value"), NON_DEFAULTS)
def test_each_name_takes_strings_and_python_values(name, text, value):
    attr = ATTR[name]
    for config in (
        LogConfig(**{name: text}),
        LogConfig(**{name: value}),
        LogConfig(**{attr: value}),
        LogConfig.from_dict({name: text}),
        LogConfig().replace(**{name: text}),
    ):
        assert getattr(config, attr) == value
        assert type(getattr(config, attr)) is type(value)
        assert config.to_dict()[name] == text
        assert LogConfig.from_dict(config.to_dict()) == config


def test_a_log_append_time_compact_topic():
    config = LogConfig(**{
        "segment.bytes": 1024,
        "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime",
    })
    assert config.segment_bytes == 1024
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compact and config.delete
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME


# -- parsing strings as Kafka's ConfigDef does -----------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("segment.bytes", " 1024 ", 1024),  # trimmed
        ("segment.bytes", "\t1024\n", 1024),
        ("segment.bytes", "+1024", 1024),  # Integer.parseInt takes a sign
        ("segment.bytes", "2147483647", 2**31 - 1),
        ("flush.ms", "9223372036854775807", 2**63 - 1),
        ("retention.ms", "-9223372036854775808", -(2**63)),
        ("retention.bytes", "-5", -5),
        ("preallocate", "TRUE", True),  # equalsIgnoreCase
        ("preallocate", " False ", False),
        ("preallocate", True, True),
        ("cleanup.policy", "compact", ("compact",)),
        ("cleanup.policy", " compact , delete ", ("compact", "delete")),
        ("cleanup.policy", "delete,compact", ("compact", "delete")),  # one canonical order
        ("cleanup.policy", "delete,delete", ("delete",)),
        ("cleanup.policy", "", ()),  # neither: keep everything forever
        ("cleanup.policy", ["delete", "compact"], ("compact", "delete")),
        ("cleanup.policy", ("compact",), ("compact",)),
        ("cleanup.policy", {"delete", "compact"}, ("compact", "delete")),
        ("cleanup.policy", [], ()),
        ("message.timestamp.type", " CreateTime ", TimestampType.CREATE_TIME),
        ("message.timestamp.type", TimestampType.LOG_APPEND_TIME, TimestampType.LOG_APPEND_TIME),
        ("compression.type", "uncompressed", CompressionType.NONE),
        ("compression.type", "gzip", CompressionType.GZIP),
        ("compression.type", "snappy", CompressionType.SNAPPY),
        ("compression.type", "lz4", CompressionType.LZ4),
        ("compression.type", " producer ", "producer"),
        ("compression.type", CompressionType.SNAPPY, CompressionType.SNAPPY),
        ("compression.gzip.level", "-1", -1),
        ("compression.gzip.level", "1", 1),
        ("compression.lz4.level", "1", 1),
        ("compression.zstd.level", "22", 22),
        ("min.cleanable.dirty.ratio", "0", 0.0),
        ("min.cleanable.dirty.ratio", "1", 1.0),
        ("min.cleanable.dirty.ratio", 1, 1.0),
        ("min.cleanable.dirty.ratio", ".25", 0.25),
        ("min.cleanable.dirty.ratio", "2.5e-1", 0.25),
        ("min.cleanable.dirty.ratio", "0.75d", 0.75),  # Double.parseDouble's suffix
        ("min.cleanable.dirty.ratio", "1e-05", 1e-05),
    ],
)
def test_value_parsing(name, raw, expected):
    value = getattr(LogConfig(**{name: raw}), ATTR[name])
    assert value == expected
    assert type(value) is type(expected)


def test_numpy_integers_are_integers():
    np = pytest.importorskip("numpy")
    assert LogConfig(segment_bytes=np.int64(4096)).segment_bytes == 4096
    assert type(LogConfig(segment_bytes=np.int32(4096)).segment_bytes) is int


def test_compression_type_is_written_with_kafkas_names():
    for codec, written in [
        (CompressionType.NONE, "uncompressed"),
        (CompressionType.GZIP, "gzip"),
        (CompressionType.SNAPPY, "snappy"),
        (CompressionType.LZ4, "lz4"),
        (CompressionType.ZSTD, "zstd"),
        ("producer", "producer"),
    ]:
        assert LogConfig(compression_type=codec).to_dict()["compression.type"] == written


def test_empty_cleanup_policy_round_trips():
    config = LogConfig(cleanup_policy="")
    assert not config.compact and not config.delete
    assert config.to_dict()["cleanup.policy"] == ""
    assert LogConfig.from_dict(config.to_dict()) == config


# -- invalid values: ConfigError naming the key, with Kafka's wording ------------------------

_ALL_POLICIES = "String must be one of: compact, delete"
_ALL_TS = "String must be one of: CreateTime, LogAppendTime"
_ALL_CODECS = "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
_GZIP = "Value must be between 1 and 9 or equal to -1"

# (Kafka name, value given, value as the message shows it, Kafka's complaint)
INVALID = [
    # ranges (ConfigDef.Range.atLeast / between)
    ("segment.bytes", 13, "13", "Value must be at least 14"),
    ("segment.bytes", 5, "5", "Value must be at least 14"),
    ("segment.bytes", "5", "5", "Value must be at least 14"),
    ("segment.bytes", -1, "-1", "Value must be at least 14"),
    ("segment.ms", 0, "0", "Value must be at least 1"),
    ("segment.jitter.ms", -1, "-1", "Value must be at least 0"),
    ("segment.index.bytes", 3, "3", "Value must be at least 4"),
    ("index.interval.bytes", -1, "-1", "Value must be at least 0"),
    ("flush.messages", 0, "0", "Value must be at least 1"),
    ("flush.ms", -1, "-1", "Value must be at least 0"),
    ("file.delete.delay.ms", -1, "-1", "Value must be at least 0"),
    ("max.message.bytes", -1, "-1", "Value must be at least 0"),
    ("message.timestamp.before.max.ms", -1, "-1", "Value must be at least 0"),
    ("message.timestamp.after.max.ms", "-1", "-1", "Value must be at least 0"),
    ("delete.retention.ms", -1, "-1", "Value must be at least 0"),
    ("min.compaction.lag.ms", -1, "-1", "Value must be at least 0"),
    ("max.compaction.lag.ms", 0, "0", "Value must be at least 1"),
    ("min.cleanable.dirty.ratio", -0.1, "-0.1", "Value must be at least 0"),
    ("min.cleanable.dirty.ratio", "1.5", "1.5", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", 2, "2.0", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "NaN", "nan", "Value must be a number"),
    ("min.cleanable.dirty.ratio", "Infinity", "inf", "Value must be no more than 1"),
    # compression levels, per codec
    ("compression.gzip.level", 0, "0", _GZIP),
    ("compression.gzip.level", 10, "10", _GZIP),
    ("compression.gzip.level", -2, "-2", _GZIP),
    ("compression.lz4.level", 0, "0", "Value must be at least 1"),
    ("compression.lz4.level", 18, "18", "Value must be no more than 17"),
    ("compression.lz4.level", -1, "-1", "Value must be at least 1"),
    ("compression.zstd.level", -131073, "-131073", "Value must be at least -131072"),
    ("compression.zstd.level", 23, "23", "Value must be no more than 22"),
    # enumerations (ValidString / ValidList: exact and case-sensitive)
    ("cleanup.policy", "compact,foo", "foo", _ALL_POLICIES),
    ("cleanup.policy", "Compact", "Compact", _ALL_POLICIES),
    ("cleanup.policy", "compact,", "", _ALL_POLICIES),
    ("cleanup.policy", ["delete", 1], "1", _ALL_POLICIES),
    ("message.timestamp.type", "createtime", "createtime", _ALL_TS),
    ("message.timestamp.type", "NoTimestampType", "NoTimestampType", _ALL_TS),
    ("message.timestamp.type", TimestampType.NO_TIMESTAMP_TYPE,
     "TimestampType.NO_TIMESTAMP_TYPE", _ALL_TS),
    ("compression.type", "none", "none", _ALL_CODECS),
    ("compression.type", "GZIP", "GZIP", _ALL_CODECS),
    # types (ConfigDef.parseType)
    ("segment.bytes", "abc", "abc", "Not a number of type INT"),
    ("segment.bytes", "1.5", "1.5", "Not a number of type INT"),
    ("segment.bytes", "1_000", "1_000", "Not a number of type INT"),
    ("segment.bytes", "2147483648", "2147483648", "Not a number of type INT"),
    ("segment.bytes", "", "", "Not a number of type INT"),
    ("segment.bytes", 1024.0, "1024.0",
     "Expected value to be a 32-bit integer, but it was a float"),
    ("segment.bytes", True, "true", "Expected value to be a 32-bit integer, but it was a bool"),
    ("segment.bytes", 2**31, "2147483648", "Value must be no more than 2147483647"),
    ("compression.zstd.level", -(2**40), str(-(2**40)), "Value must be at least -131072"),
    ("flush.ms", "9223372036854775808", "9223372036854775808", "Not a number of type LONG"),
    ("flush.ms", 2**63, "9223372036854775808", "Value must be no more than 9223372036854775807"),
    ("retention.ms", -(2**63) - 1, "-9223372036854775809",
     "Value must be at least -9223372036854775808"),
    ("retention.ms", 1.0, "1.0",
     "Expected value to be a 64-bit integer (long), but it was a float"),
    ("preallocate", "yes", "yes", "Expected value to be either true or false"),
    ("preallocate", 1, "1", "Expected value to be either true or false"),
    ("min.cleanable.dirty.ratio", "abc", "abc", "Not a number of type DOUBLE"),
    ("min.cleanable.dirty.ratio", "0x1p-1", "0x1p-1", "Not a number of type DOUBLE"),
    ("min.cleanable.dirty.ratio", True, "true", "Expected value to be a double, but it was a bool"),
    ("cleanup.policy", 5, "5", "Expected a comma separated list."),
    ("compression.type", 4, "4", "Expected value to be a string, but it was a int"),
    ("message.timestamp.type", 1, "1", "Expected value to be a string, but it was a int"),
    ("segment.ms", None, "null", "Value must be non-null"),
]


@pytest.mark.parametrize(("name", "value", "shown", "why"), INVALID)
def test_invalid_value_raises_config_error_naming_the_key(name, value, shown, why):
    expected = f"Invalid value {shown} for configuration {name}: {why}"
    builders = (
        lambda settings: LogConfig(**settings),
        LogConfig.from_dict,
        lambda settings: LogConfig().replace(**settings),
    )
    # the key is always reported under its Kafka name, whichever name was used
    for settings in ({name: value}, {ATTR[name]: value}):
        for build in builders:
            with pytest.raises(ConfigError) as info:
                build(settings)
            err = info.value
            assert str(err) == expected
            assert err.key == name
            assert isinstance(err, ValueError) and isinstance(err, KafkaStoreError)


def test_every_range_checked_key_has_an_invalid_case():
    ranged = {
        "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes",
        "index.interval.bytes", "flush.messages", "flush.ms", "file.delete.delay.ms",
        "max.message.bytes", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
        "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level", "cleanup.policy", "message.timestamp.type", "compression.type",
        "preallocate",
    }
    assert ranged <= {row[0] for row in INVALID}


def test_long_settings_take_any_64_bit_value():
    for value in (-(2**63), -(2**31) - 1, 2**31, 2**63 - 1):
        assert LogConfig(retention_bytes=value, retention_ms=value).retention_bytes == value


@pytest.mark.parametrize(
    ("name", "lowest"),
    [
        ("segment.bytes", 14), ("segment.ms", 1), ("segment.jitter.ms", 0),
        ("segment.index.bytes", 4), ("index.interval.bytes", 0), ("flush.messages", 1),
        ("flush.ms", 0), ("max.message.bytes", 0), ("max.compaction.lag.ms", 1),
        ("compression.gzip.level", -1), ("compression.lz4.level", 1),
        ("compression.zstd.level", -131072), ("min.cleanable.dirty.ratio", 0),
    ],
)
def test_the_minimum_itself_is_accepted(name, lowest):
    assert getattr(LogConfig(**{name: lowest}), ATTR[name]) == lowest
    assert getattr(LogConfig(**{name: str(lowest)}), ATTR[name]) == lowest


def test_min_compaction_lag_may_not_exceed_max():
    with pytest.raises(ConfigError) as info:
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
    assert str(info.value) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )
    assert info.value.key == "min.compaction.lag.ms"
    LogConfig(min_compaction_lag_ms=5, max_compaction_lag_ms=5)
    with pytest.raises(ConfigError):
        LogConfig(max_compaction_lag_ms=5).replace(min_compaction_lag_ms=6)


# -- unknown names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "first_suggestion"),
    [
        ("segment.byte", "segment.bytes"),
        ("segmentbytes", "segment.bytes"),
        ("log.segment.bytes", "segment.bytes"),  # the broker's name for it
        ("retention.hours", "retention.ms"),
        ("segmnt_bytes", "segment_bytes"),  # snake_case: suggest attribute names
        ("cleanup_polcy", "cleanup_policy"),
        ("min.cleanable.ratio", "min.cleanable.dirty.ratio"),
    ],
)
def test_unknown_name_suggests_close_matches(name, first_suggestion):
    with pytest.raises(ConfigError) as info:
        LogConfig(**{name: 1})
    err = info.value
    assert err.key == name
    assert err.suggestions[0] == first_suggestion
    assert str(err).startswith(f"Unknown topic config name: {name}; did you mean ")
    assert first_suggestion in str(err)


def test_unknown_name_without_close_match():
    with pytest.raises(ConfigError) as info:
        LogConfig.from_dict({"xyzzy": "1"})
    assert str(info.value) == "Unknown topic config name: xyzzy"
    assert info.value.suggestions == ()


@pytest.mark.parametrize(
    "name", ["min.insync.replicas", "unclean.leader.election.enable", "local.retention.ms",
             "remote.storage.enable", "message.format.version"],
)
def test_kafka_topic_configs_kafkastore_does_not_implement_are_named_as_such(name):
    with pytest.raises(ConfigError, match="does not implement") as info:
        LogConfig.from_dict({name: "1"})
    assert info.value.key == name


def test_non_string_name():
    with pytest.raises(ConfigError, match="must be strings"):
        LogConfig.from_dict({1: 2})


def test_a_name_given_twice():
    with pytest.raises(ConfigError, match="segment.bytes is given twice") as info:
        LogConfig.from_dict({"segment.bytes": 1024, "segment_bytes": 2048})
    assert info.value.key == "segment.bytes"
    with pytest.raises(ConfigError, match="given twice"):
        LogConfig().replace(**{"segment.ms": 1, "segment_ms": 2})


# -- round trips, replace, immutability -------------------------------------------------------

_LONG = st.integers(-(2**63), 2**63 - 1)
_VALID = {
    "segment_bytes": st.integers(14, 2**31 - 1),
    "segment_ms": st.integers(1, 2**63 - 1),
    "segment_jitter_ms": st.integers(0, 2**63 - 1),
    "segment_index_bytes": st.integers(4, 2**31 - 1),
    "index_interval_bytes": st.integers(0, 2**31 - 1),
    "flush_messages": st.integers(1, 2**63 - 1),
    "flush_ms": st.integers(0, 2**63 - 1),
    "retention_ms": _LONG,
    "retention_bytes": _LONG,
    "file_delete_delay_ms": st.integers(0, 2**63 - 1),
    "cleanup_policy": st.lists(st.sampled_from(["compact", "delete"]), max_size=3),
    "max_message_bytes": st.integers(0, 2**31 - 1),
    "message_timestamp_type": st.sampled_from(
        [TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME, "CreateTime", "LogAppendTime"]
    ),
    "message_timestamp_before_max_ms": st.integers(0, 2**63 - 1),
    "message_timestamp_after_max_ms": st.integers(0, 2**63 - 1),
    "compression_type": st.sampled_from(
        [*CompressionType, "uncompressed", "gzip", "snappy", "lz4", "zstd", "producer"]
    ),
    "compression_gzip_level": st.sampled_from([-1, *range(1, 10)]),
    "compression_lz4_level": st.integers(1, 17),
    "compression_zstd_level": st.integers(-131072, 22),
    "preallocate": st.booleans(),
    "delete_retention_ms": st.integers(0, 2**63 - 1),
    "min_compaction_lag_ms": st.integers(0, 2**63 - 1),
    "max_compaction_lag_ms": st.integers(1, 2**63 - 1),
    "min_cleanable_dirty_ratio": st.floats(0, 1),
}


@st.composite
def configs(draw):
    chosen = draw(st.sets(st.sampled_from(sorted(_VALID))))
    settings = {attr: draw(_VALID[attr]) for attr in sorted(chosen)}
    lo = settings.get("min_compaction_lag_ms", 0)
    hi = settings.get("max_compaction_lag_ms", 2**63 - 1)
    if lo > hi:
        settings["min_compaction_lag_ms"], settings["max_compaction_lag_ms"] = hi, lo
    return LogConfig(**settings)


@given(configs())
def test_round_trip_through_dict_and_properties_text(config):
    as_dict = config.to_dict()
    assert list(as_dict) == NAMES
    assert all(isinstance(v, str) for v in as_dict.values())
    assert LogConfig.from_dict(as_dict) == config
    assert LogConfig(**as_dict) == config
    text = "".join(f"{k}={v}\n" for k, v in as_dict.items())
    assert parse_properties(text) == as_dict
    assert LogConfig.from_dict(parse_properties(text)) == config
    python = dataclasses.asdict(config)
    assert LogConfig(**python) == config
    assert pickle.loads(pickle.dumps(config)) == config
    assert eval(repr(config), {  # the repr rebuilds the config
        "LogConfig": LogConfig, "TimestampType": TimestampType, "CompressionType": CompressionType,
    }) == config


def test_replace_returns_a_new_config():
    base = LogConfig(segment_bytes=1024)
    changed = base.replace(**{"segment.ms": "60000"}, retention_bytes=10)
    assert (changed.segment_bytes, changed.segment_ms, changed.retention_bytes) == (1024, 60000, 10)
    assert (base.segment_ms, base.retention_bytes) == (604800000, -1)
    assert base.replace() == base
    assert type(changed) is LogConfig
    assert dataclasses.replace(base, segment_ms=5).segment_ms == 5
    with pytest.raises(ConfigError):
        dataclasses.replace(base, segment_ms=0)


def test_immutable_hashable_picklable():
    config = LogConfig(cleanup_policy="compact")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.segment_bytes = 5  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        config.new_attribute = 1  # type: ignore[attr-defined]
    assert not hasattr(config, "__dict__")
    assert config == LogConfig(cleanup_policy=["compact"])
    assert hash(config) == hash(LogConfig(cleanup_policy=("compact",)))
    assert config != LogConfig()
    assert len({config, LogConfig(), LogConfig(cleanup_policy="compact")}) == 2
    assert pickle.loads(pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)) == config


def test_repr_shows_what_differs_from_kafkas_defaults():
    assert repr(LogConfig()) == "LogConfig()"
    config = LogConfig(**{"segment.bytes": "1024", "message.timestamp.type": "LogAppendTime"})
    assert repr(config) == (
        "LogConfig(segment_bytes=1024, message_timestamp_type=TimestampType.LOG_APPEND_TIME)"
    )


@pytest.mark.parametrize(
    ("policy", "compact", "delete"),
    [("delete", False, True), ("compact", True, False), ("compact,delete", True, True),
     ("", False, False)],
)
def test_compact_and_delete(policy, compact, delete):
    config = LogConfig(cleanup_policy=policy)
    assert (config.compact, config.delete) == (compact, delete)


# -- segment jitter ---------------------------------------------------------------------------


class _FixedRng:
    """Returns a fixed ``randint`` result and records the bounds it was asked for."""

    def __init__(self, value):
        self.value = value
        self.calls = []

    def randint(self, a, b):
        self.calls.append((a, b))
        return self.value


def test_no_jitter_draws_nothing():
    rng = _FixedRng(12345)
    assert LogConfig().random_segment_jitter(rng) == 0
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter() == 0
    assert rng.calls == []


@pytest.mark.parametrize(
    ("drawn", "jitter_ms", "segment_ms", "expected"),
    [
        (12345, 1000, 10**9, 345),
        (-12345, 1000, 10**9, 345),  # abs() first
        (-(2**31), 1000, 10**9, 0),  # Utils.abs(Integer.MIN_VALUE) == 0
        (2**31 - 1, 10**12, 10**12, 2**31 - 1),  # an int draw bounds the jitter too
        (12345, 10**9, 1000, 345),  # the bound is min(jitter, segment.ms)
    ],
)
def test_jitter_is_kafkas_formula(drawn, jitter_ms, segment_ms, expected):
    rng = _FixedRng(drawn)
    config = LogConfig(segment_jitter_ms=jitter_ms, segment_ms=segment_ms)
    assert config.random_segment_jitter(rng) == expected
    assert rng.calls == [(-(2**31), 2**31 - 1)]  # a Java int: nextInt()


@given(
    jitter_ms=st.integers(1, 2**63 - 1),
    segment_ms=st.integers(1, 2**63 - 1),
    seed=st.integers(0, 2**32),
)
def test_jitter_range(jitter_ms, segment_ms, seed):
    config = LogConfig(segment_jitter_ms=jitter_ms, segment_ms=segment_ms)
    jitter = config.random_segment_jitter(random.Random(seed))
    assert 0 <= jitter < min(jitter_ms, segment_ms)
    assert isinstance(jitter, int)


def test_jitter_spreads_and_uses_the_module_rng_by_default():
    config = LogConfig(segment_jitter_ms=1000)
    draws = {config.random_segment_jitter() for _ in range(200)}
    assert len(draws) > 50
    assert all(0 <= j < 1000 for j in draws)
    assert 0 <= config.random_segment_jitter(random) < 1000  # the module itself is an rng


# -- Java .properties -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a = b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a : b", {"a": "b"}),
        ("a b", {"a": "b"}),  # a blank separates too
        ("a \t b", {"a": "b"}),
        ("a = = b", {"a": "= b"}),  # only one separator is eaten
        ("a==b", {"a": "=b"}),
        ("a:=b", {"a": "=b"}),
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("=b", {"": "b"}),
        ("   indented = value", {"indented": "value"}),
        ("a=b   ", {"a": "b"}),  # trailing blanks dropped (Kafka trims values anyway)
        ("a=b\\ ", {"a": "b "}),  # unless escaped
        ("a=b c  d", {"a": "b c  d"}),
        # comments
        ("# comment\na=b", {"a": "b"}),
        ("! comment\na=b", {"a": "b"}),
        ("   # indented comment\na=b", {"a": "b"}),
        ("a=b # not a comment", {"a": "b # not a comment"}),
        ("#a=b", {}),
        ("# a comment cannot be continued \\\na=b", {"a": "b"}),
        ("\n\n  \n\t\n", {}),
        ("", {}),
        # continuations
        ("a=one \\\n    two", {"a": "one two"}),
        ("a=one\\\n\\\n  two\\\n three", {"a": "onetwothree"}),
        ("a=one \\\n  # not a comment", {"a": "one # not a comment"}),
        ("a\\\n  b=c", {"ab": "c"}),  # the key continues too
        ("a=b\\\\\nc=d", {"a": "b\\", "c": "d"}),  # an even number of backslashes
        ("a=b\\\\\\\nc", {"a": "b\\c"}),  # an odd number
        ("a=b\\", {"a": "b"}),  # a backslash at the very end is dropped
        ("a=b\\\n", {"a": "b"}),
        ("a=b\\\n\nc=d", {"a": "b", "c": "d"}),  # a blank line ends the continuation
        ("a=b\\\n   \nc=d", {"a": "b", "c": "d"}),
        # line endings
        ("a=1\r\nb=2\rc=3\nd=4", {"a": "1", "b": "2", "c": "3", "d": "4"}),
        ("a=one \\\r\n  two", {"a": "one two"}),
        # escapes
        ("a=\\t\\n\\r\\f", {"a": "\t\n\r\f"}),
        ("a=\\u0041\\u00e9", {"a": "A\u00e9"}),
        ("a=\\uD83D\\uDE00", {"a": "\U0001F600"}),  # a UTF-16 surrogate pair
        ("a=\\z\\=\\:\\#\\\\", {"a": "z=:#\\"}),
        ("key\\=with\\:seps\\ and\\ blanks = v", {"key=with:seps and blanks": "v"}),
        ("\\#not-a-comment=1", {"#not-a-comment": "1"}),
        ("caf\u00e9=cr\u00e8me", {"caf\u00e9": "cr\u00e8me"}),
        # a key given twice keeps its last value
        ("a=1\nb=2\na=3", {"a": "3", "b": "2"}),
    ],
)
def test_parse_properties(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text", ["a=\\u00", "a=\\u00zz", "x=1\n\nb=\\uXYZW"])
def test_malformed_unicode_escape(text):
    with pytest.raises(ConfigError, match=r"Malformed \\uxxxx encoding on line"):
        parse_properties(text)


def test_malformed_escape_reports_its_line():
    with pytest.raises(ConfigError, match="on line 3"):
        parse_properties("a=1\n# c\nb=\\u12")


def test_topic_override_file():
    text = """\
# Overrides of one topic, as kafka-configs.sh --describe would list them
cleanup.policy = compact,delete
segment.bytes=104857600
segment.ms : 3600000
min.cleanable.dirty.ratio=0.01
message.timestamp.type=LogAppendTime
compression.type=zstd
compression.zstd.level=\\
    9
preallocate=true
"""
    config = LogConfig.from_dict(parse_properties(text))
    assert config.cleanup_policy == ("compact", "delete")
    assert (config.segment_bytes, config.segment_ms) == (104857600, 3600000)
    assert config.min_cleanable_dirty_ratio == 0.01
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (config.compression_type, config.compression_zstd_level) == (CompressionType.ZSTD, 9)
    assert config.preallocate is True
    assert config.retention_ms == 604800000  # not overridden: Kafka's default


def _store_escape(s: str, escape_unicode: bool) -> str:
    """Escape like java.util.Properties.store (saveConvert), blanks escaped everywhere."""
    out = []
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in " =:#!":
            out.append("\\" + c)
        elif escape_unicode and not " " <= c <= "~":
            units = c.encode("utf-16-be")
            for i in range(0, len(units), 2):
                out.append(f"\\u{units[i] << 8 | units[i + 1]:04X}")
        else:
            out.append(c)
    return "".join(out)


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@given(
    props=st.dictionaries(_TEXT, _TEXT, max_size=6),
    escape_unicode=st.booleans(),
    separator=st.sampled_from(["=", ":", " = ", " : ", " ", "\t"]),
    line_end=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_parse_properties_reads_what_java_writes(props, escape_unicode, separator, line_end):
    lines = ["#written by the test"]
    for key, value in props.items():
        # "key value" needs a key: a line that starts with blanks loses them, as in Java
        sep = separator if key or separator.strip() else "="
        lines.append(_store_escape(key, escape_unicode) + sep
                     + _store_escape(value, escape_unicode))
    text = line_end.join(lines) + line_end
    assert parse_properties(text) == props


# -- one mechanism for the three configuration classes ----------------------------------------


def _config_classes():
    from kafkastore.cleaner import CleanerConfig
    from kafkastore.manager import ManagerConfig

    return [LogConfig, CleanerConfig, ManagerConfig]


@pytest.mark.parametrize("cls", _config_classes(), ids=lambda c: c.__name__)
def test_each_config_class_is_its_key_table(cls):
    keys = cls.CONFIG_KEYS
    assert isinstance(cls(), ConfigBase)
    assert [f.name for f in dataclasses.fields(cls)] == [k.attr for k in keys]
    assert len({k.name for k in keys}) == len(keys)
    default = cls()
    assert all(isinstance(k, ConfigKey) and k.kafka_type and k.doc for k in keys)
    assert [getattr(default, k.attr) for k in keys] == [k.default for k in keys]
    assert repr(default) == f"{cls.__name__}()"
    assert cls.from_dict(default.to_dict()) == default
    assert pickle.loads(pickle.dumps(default)) == default
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(default, keys[0].attr, keys[0].default)


@pytest.mark.parametrize("cls", _config_classes(), ids=lambda c: c.__name__)
def test_every_spelling_of_a_name(cls):
    key = next(k for k in cls.CONFIG_KEYS if k.kafka_type == "long" and k.default != 5)
    for spelling in (key.name, key.name.replace(".", "_"), key.attr):
        config = cls({spelling: "5"})
        assert getattr(config, key.attr) == 5
        assert config == cls(**{spelling: 5}) == cls().replace(**{spelling: 5})
        assert repr(config) == f"{cls.__name__}({key.attr}=5)"
        assert hash(config) == hash(cls({key.attr: 5}))
    # keywords override the mapping; one mapping may not give a setting twice
    assert getattr(cls({key.name: 6}, **{key.attr: 5}), key.attr) == 5
    with pytest.raises(ConfigError, match="given twice"):
        cls({key.name: 5, key.attr: 6})
    with pytest.raises(ConfigError, match=f"Invalid value null for configuration {key.name}"):
        cls({key.name: None})


def test_broker_settings_keep_their_checks_and_messages():
    from kafkastore.cleaner import CleanerConfig
    from kafkastore.manager import ManagerConfig

    cases = [
        (CleanerConfig, {"log.cleaner.threads": 0},
         "Invalid value 0 for configuration log.cleaner.threads: Value must be at least 1"),
        (CleanerConfig, {"log.cleaner.io.buffer.load.factor": "1.5"},
         "Invalid value 1.5 for configuration log.cleaner.io.buffer.load.factor: "
         "must be in (0, 1]"),
        (CleanerConfig, {"log.cleaner.backoff.ms": -1},
         "Invalid value -1 for configuration log.cleaner.backoff.ms: must be positive"),
        (CleanerConfig, {"log.cleaner.io.max.bytes.per.second": 0.0},
         "Invalid value 0.0 for configuration log.cleaner.io.max.bytes.per.second: "
         "must be positive"),
        (CleanerConfig, {"log.cleaner.dedupe.buffer.size": 24},
         "offset map is too small to fit in even a single message"),
        (CleanerConfig, {"log.cleaner.nope": 1},
         "Unknown log cleaner setting 'log.cleaner.nope'; known: ['log.cleaner.backoff.ms'"),
        (ManagerConfig, {"log.flush.scheduler.interval.ms": "x"},
         "Invalid value x for configuration log.flush.scheduler.interval.ms: "
         "Not a number of type LONG"),
        (ManagerConfig, {"producer.id.expiration.check.interval.ms": 0},
         "Invalid value 0 for configuration producer.id.expiration.check.interval.ms: "
         "Value must be at least 1"),
    ]
    for cls, settings, message in cases:
        with pytest.raises(ConfigError) as info:
            cls(settings)
        assert str(info.value).startswith(message)
    # the map-size rule spans two settings and is checked again by replace
    config = CleanerConfig({"log.cleaner.dedupe.buffer.size": 24 * 64})
    with pytest.raises(ConfigError, match="too small"):
        config.replace(num_threads=64)
    unbounded = CleanerConfig()
    assert unbounded.to_dict()["log.cleaner.io.max.bytes.per.second"] == "Infinity"
    assert CleanerConfig.from_dict(unbounded.to_dict()) == unbounded


# -- layering ---------------------------------------------------------------------------------


def test_config_imports_only_errors_types_and_the_stdlib():
    source = Path(__file__).resolve().parents[1] / "kafkastore" / "config.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            imported.add(node.module)
    package = {m for m in imported if m.split(".")[0] == "kafkastore"}
    assert package <= {"kafkastore.errors", "kafkastore.types"}
    assert {m.split(".")[0] for m in imported - package} <= set(sys.stdlib_module_names)
