"""The options of Spark's Kafka source and sink, parsed and checked as Spark does.

This module needs neither pyspark nor pyarrow: the driver-side planning and the
tests use it without a Spark session. Option names are case-insensitive (Spark
hands a data source a case-insensitive map); values are strings.

The names, defaults and error cases mirror ``KafkaSourceProvider`` of
spark-sql-kafka-0-10, so that a job moves from ``format("kafka")`` to
``format("kafkastore")`` by changing that one word (and the bootstrap servers
for a path). Consumer plumbing (``kafka.bootstrap.servers``, ``groupIdPrefix``,
``kafka.group.id``, poll timeouts and retries) is accepted and ignored. kafkastore's own
options: ``storage.<name>`` (the store of a URI path) and ``tieredStorage*`` (a tiered
copy read under, or instead of, the log directory: :class:`TieredOptions`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkastore.errors import ConfigError

__all__ = [
    "EARLIEST",
    "LATEST",
    "ReadOptions",
    "TieredOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
    "offsets_json",
]

#: Spark-Kafka's special offsets in JSON: -2 earliest, -1 latest.
EARLIEST = -2
LATEST = -1

#: Why a write in another mode than append is refused (Spark's Kafka sink refuses
#: Overwrite and Ignore: ``KafkaSourceProvider.createRelation``; its default,
#: ErrorIfExists, Spark refuses for any Python data source before the source is asked).
APPEND_ONLY = ('Kafka logs are append-only: write with mode("append") (Spark\'s Kafka sink '
               'refuses Overwrite too)')

_STRATEGIES = ("subscribe", "subscribepattern", "assign")

# Consumer options Spark-Kafka rejects, with the reason it gives.
_UNSUPPORTED_KAFKA = {
    "kafka.auto.offset.reset":
        "Instead set the source option 'startingOffsets' to 'earliest' or 'latest' to "
        "specify where to start.",
    "kafka.key.deserializer":
        "Keys are always read as byte arrays: use DataFrame operations to deserialize them.",
    "kafka.value.deserializer":
        "Values are always read as byte arrays: use DataFrame operations to deserialize "
        "them.",
    "kafka.enable.auto.commit":
        "Offsets are tracked by the query's checkpoint, never committed to Kafka.",
    "kafka.interceptor.classes":
        "Interceptors would see every record as raw bytes; the source does not run them.",
}
_ACCEPTED_ISOLATION = ("read_uncommitted", "read_committed")

#: Why a streaming sink without an id is refused.
NO_SINK_ID = ("A streaming kafkastore sink needs a stable id for its exactly-once commits: "
              "set the checkpointLocation option (or sinkId)")


def _opts(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise ConfigError(f"Invalid value '{text}' for option '{name}', must be true or false")


def _positive(opts: dict[str, str], name: str) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"Invalid value '{text}' for option '{name}', must be a positive "
                          f"integer")
    return value


def _long(opts: dict[str, str], name: str) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(f"Invalid value '{text}' for option '{name}', must be a long "
                          f"(epoch milliseconds)") from None


def _json_object(text: str, name: str) -> dict:
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise ConfigError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":"
                          f"{{\"0\":-2}}}}, got {text} (option '{name}')")
    return obj


def _partition_map(text: str, name: str) -> dict[tuple[str, int], int]:
    """``{"t": {"0": 23}}`` as ``{("t", 0): 23}`` (offsets or timestamps)."""
    out = {}
    for topic, parts in _json_object(text, name).items():
        if not isinstance(parts, dict):
            raise ConfigError(f"Expected a JSON object of partition to value for topic "
                              f"{topic!r} in option '{name}', got {parts!r}")
        for part, value in parts.items():
            try:
                p = int(part)
            except (TypeError, ValueError):
                p = -1
            if p < 0 or isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"Expected a partition number and an integer in option "
                                  f"'{name}', got {part!r}: {value!r}")
            out[(str(topic), p)] = value
    return out


def offsets_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """``{("t", 0): 23}`` as Spark-Kafka's offset JSON object ``{"t": {"0": 23}}``,
    topics and partitions in order (the form Spark writes to ``offsets/N``)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def parse_offsets_json(obj: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    """The inverse of :func:`offsets_json` (what a checkpoint hands back)."""
    if isinstance(obj, str):
        return _partition_map(obj, "offsets")
    return {(str(t), int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: ``kind`` is "earliest", "latest", "offsets"
    (``offsets`` per partition, -2/-1 allowed), "timestamp" (one ``timestamp`` for all
    partitions) or "timestamps" (``timestamps`` per partition)."""

    kind: str
    offsets: dict = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ReadOptions:
    """The parsed reader options; see :func:`parse_read_options`."""

    path: str
    strategy: str                    # "subscribe" | "subscribepattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_bytes_per_partition: int = 128 << 20
    split_by: str = "segment"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    batch_rows: int = 65536
    pushdown: bool = False
    #: ``storage.<name>`` reader options: the store's settings (kafkastore.storage.OPTIONS)
    storage_options: tuple[tuple[str, str], ...] = ()
    #: ``kafka.isolation.level``: read_committed stops at the last stable offset and
    #: drops the records of aborted transactions
    isolation_level: str = "read_uncommitted"
    #: ``tieredStorage``: the URI of a tiered-storage copy (KIP-405 remote segments) read
    #: below the log directory's log start offsets, or alone when there is no ``path``
    tiered: TieredOptions | None = None

    @property
    def source(self) -> str:
        """What the read names in messages: the log directory, the tiered copy, or both."""
        if self.tiered is None:
            return self.path
        if not self.path:
            return self.tiered.uri
        return f"{self.path} (and the tiered copy {self.tiered.uri})"

    @property
    def storage(self) -> dict[str, str]:
        """The storage options as a dict, for :func:`kafkastore.storage.open_storage`."""
        return dict(self.storage_options)

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads (before ``assign``'s partitions)."""
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "subscribepattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assign)


@dataclass(frozen=True)
class TieredOptions:
    """The ``tieredStorage*`` reader options: where a tiered copy is and how to open it
    (:func:`kafkastore.tiered.open_tiered`'s arguments, as strings)."""

    uri: str
    layout: str | None = None            # "aiven" | "local" | None (detected)
    key_prefix: str = ""
    #: ``tieredStorage.keyRing``: a :meth:`KeyRing.from_spec
    #: <kafkastore.tiered.crypto.KeyRing.from_spec>` string, ``id=/path.pem,...``
    key_ring: str | None = None
    #: the store's settings: ``tieredStorage.storage.<name>``, else the read's
    #: ``storage.<name>`` when both URIs are the same kind of store
    storage_options: tuple[tuple[str, str], ...] = ()

    @property
    def storage(self) -> dict[str, str]:
        return dict(self.storage_options)


_TIERED_LAYOUTS = ("aiven", "local")


def _absolute(uri: str) -> str:
    """``uri`` with a relative local path made absolute, here: the driver parses the
    options when it plans, and the tasks run in executors whose working directories are
    others (a Spark worker's work directory), where a relative path names another
    directory or none. URIs and absolute paths are returned as given."""
    from kafkastore.storage import split_uri

    scheme, text = split_uri(uri)
    if not text or scheme or os.path.isabs(text):
        return uri
    return os.path.abspath(text)


def _store_kind(uri: str) -> str:
    from kafkastore.storage import split_uri

    scheme = split_uri(uri)[0]
    return {"": "file", "local": "file", "s3a": "s3", "gcs": "gs", "abfss": "abfs",
            "az": "abfs", "viewfs": "hdfs"}.get(scheme, scheme)


def _tiered_options(opts: dict[str, str], path: str | None,
                    storage: tuple[tuple[str, str], ...]) -> TieredOptions | None:
    """The ``tieredStorage*`` options (None without ``tieredStorage``); sub-options
    without it are refused, as are an unknown layout and unknown storage names."""
    uri = _absolute(opts.get("tieredstorage", "").strip())
    subs = sorted(k for k in opts if k.startswith("tieredstorage."))
    if not uri:
        if subs:
            raise ConfigError(f"Option '{subs[0]}' needs the option 'tieredStorage' (the "
                              f"URI of the tiered-storage copy)")
        return None
    known = ("tieredstorage.layout", "tieredstorage.keyprefix", "tieredstorage.keyring")
    unknown = [k for k in subs if k not in known and not k.startswith("tieredstorage.storage.")]
    if unknown:
        raise ConfigError(f"Unknown option '{unknown[0]}': the tiered-storage options are "
                          f"tieredStorage, tieredStorage.layout, tieredStorage.keyPrefix, "
                          f"tieredStorage.keyRing and tieredStorage.storage.<name>")
    layout = opts.get("tieredstorage.layout", "").strip().lower() or None
    if layout is not None and layout not in _TIERED_LAYOUTS:
        raise ConfigError(f"Invalid value '{layout}' for option 'tieredStorage.layout': "
                          f"'aiven' or 'local' (or leave it out to detect the layout)")
    own = tuple(sorted((k[len("tieredstorage.storage."):], v) for k, v in opts.items()
                       if k.startswith("tieredstorage.storage.")))
    if not own and path and _store_kind(path) == _store_kind(uri):
        own = storage   # the same kind of store: most likely the same credentials
    from kafkastore.storage import check_options
    check_options(uri, dict(own))
    return TieredOptions(uri=uri, layout=layout,
                         key_prefix=opts.get("tieredstorage.keyprefix", ""),
                         key_ring=opts.get("tieredstorage.keyring") or None,
                         storage_options=own)


def _spec(opts: dict[str, str], prefix: str, default: str) -> OffsetSpec:
    """The starting (or ending) position, by Spark-Kafka's precedence: the global
    timestamp, then timestamps per partition, then offsets."""
    ts = _long(opts, f"{prefix}Timestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts)
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", timestamps=_partition_map(
            by_ts, f"{prefix}OffsetsByTimestamp"))
    text = opts.get(f"{prefix}offsets")
    if text is None:
        return OffsetSpec(default)
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low)
    return OffsetSpec("offsets", offsets=_partition_map(text, f"{prefix}Offsets"))


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check the options of a read (``streaming`` for ``readStream``) as Spark-Kafka does.

    Raises :class:`~kafkastore.errors.ConfigError` with Spark-Kafka's wording where it
    has one: no or several subscription strategies, an unsupported ``kafka.*`` consumer
    option, ``latest`` as a batch start, ``earliest`` as a batch end, ending offsets in a
    stream, non-positive ``minPartitions``/``maxRecordsPerPartition``, ``minOffsetsPerTrigger``
    above ``maxOffsetsPerTrigger``.
    """
    opts = _opts(options)
    path = _absolute(opts.get("path") or "")
    if not path and not opts.get("tieredstorage", "").strip():
        raise ConfigError("The kafkastore source needs the log directory: "
                          "spark.read.format('kafkastore').option('subscribe', ...)"
                          ".load('/path/to/log-dir')")
    for key, why in _UNSUPPORTED_KAFKA.items():
        if key in opts:
            raise ConfigError(f"Kafka option '{key[len('kafka.'):]}' is not supported. {why}")
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in _ACCEPTED_ISOLATION:
        raise ConfigError(
            f"Invalid value '{isolation}' for kafka.isolation.level: 'read_uncommitted' or "
            "'read_committed'")
    given = [s for s in _STRATEGIES if s in opts]
    if not given:
        raise ConfigError("One of the following options must be specified for Kafka "
                          "source: subscribe, subscribePattern, assign. See the docs for "
                          "more details.")
    if len(given) > 1:
        raise ConfigError("Only one of the following options can be specified for Kafka "
                          "source: subscribe, subscribePattern, assign. See the docs for "
                          "more details.")
    strategy = given[0]
    topics: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    value = opts[strategy]
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ConfigError(f"No topics to subscribe to as specified value for option "
                              f"'subscribe' is '{value}'")
    elif strategy == "subscribepattern":
        pattern = value.strip()
        if not pattern:
            raise ConfigError("Pattern to subscribe is empty as specified value for option "
                              "'subscribePattern' is ''")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"Invalid subscribePattern {pattern!r}: {exc}") from None
    else:
        obj = _json_object(value, "assign")
        pairs = []
        for topic, parts in obj.items():
            if not isinstance(parts, list) or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
                raise ConfigError(f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got "
                                  f"{value} (option 'assign')")
            pairs.extend((str(topic), p) for p in parts)
        if not pairs:
            raise ConfigError(f"No topic partitions to assign as specified value for option "
                              f"'assign' is '{value}'")
        assign = tuple(sorted(set(pairs)))
    starting = _spec(opts, "starting", "latest" if streaming else "earliest")
    if streaming:
        for name in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if name in opts:
                raise ConfigError(f"Ending offset not valid in streaming queries: option "
                                  f"'{name}' is for batch queries only")
    ending = _spec(opts, "ending", "latest")
    if not streaming:
        if starting.kind == "latest":
            raise ConfigError("starting offset can't be latest for batch queries on Kafka")
        if ending.kind == "earliest":
            raise ConfigError("ending offset can't be earliest for batch queries on Kafka")
        for (topic, part), off in starting.offsets.items():
            if off == LATEST:
                raise ConfigError(f"startingOffsets for {topic}-{part} can't be latest for "
                                  f"batch queries on Kafka")
        for (topic, part), off in ending.offsets.items():
            if off == EARLIEST:
                raise ConfigError(f"endingOffsets for {topic}-{part} can't be earliest for "
                                  f"batch queries on Kafka")
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        for (topic, part), off in spec.offsets.items():
            if off < EARLIEST:
                raise ConfigError(f"Invalid offset {off} for {topic}-{part} in option "
                                  f"'{name}': use an offset, -2 (earliest) or -1 (latest)")
    ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if ts_strategy not in ("error", "latest"):
        raise ConfigError(f"Invalid value '{ts_strategy}' for option "
                          f"'startingOffsetsByTimestampStrategy': 'error' or 'latest'")
    max_trigger = _positive(opts, "maxOffsetsPerTrigger")
    min_trigger = _positive(opts, "minOffsetsPerTrigger")
    if max_trigger is not None and min_trigger is not None:
        if min_trigger > max_trigger:
            raise ConfigError(f"The value of minOffsetPerTrigger({min_trigger}) is higher "
                              f"than the maxOffsetsPerTrigger({max_trigger}).")
        raise ConfigError("minOffsetsPerTrigger and maxOffsetsPerTrigger cannot both be set: "
                          "Spark's Python streaming API takes one read limit per trigger")
    if "maxtriggerdelay" in opts:
        raise ConfigError("maxTriggerDelay is not supported: Spark's Python streaming API "
                          "has no trigger delay")
    split_by = opts.get("splitby", "segment").strip().lower()
    if split_by not in ("segment", "topicpartition"):
        raise ConfigError(f"Invalid value '{split_by}' for option 'splitBy': 'segment' or "
                          f"'topicpartition'")
    storage = _storage_options(opts, path) if path else ()
    tiered = _tiered_options(opts, path, storage)
    if not path and any(k.startswith("storage.") for k in opts):
        raise ConfigError("The storage.<name> options are for the log directory (the path); "
                          "a tiered copy read alone takes tieredStorage.storage.<name>")
    return ReadOptions(
        path=path, strategy=strategy, topics=topics, pattern=pattern, assign=assign,
        starting=starting, ending=ending, timestamp_strategy=ts_strategy,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_positive(opts, "minPartitions"),
        max_records_per_partition=_positive(opts, "maxRecordsPerPartition"),
        max_bytes_per_partition=_positive(opts, "maxBytesPerPartition") or 128 << 20,
        split_by=split_by,
        max_offsets_per_trigger=max_trigger,
        min_offsets_per_trigger=min_trigger,
        batch_rows=_positive(opts, "arrowBatchRows") or 65536,
        pushdown=_bool(opts, "pushdown", False),
        storage_options=storage,
        isolation_level=isolation,
        tiered=tiered,
    )


def _storage_options(opts: dict[str, str], path: str) -> tuple[tuple[str, str], ...]:
    """The ``storage.<name>`` options, checked against the store ``path`` names (an
    unknown name is a :class:`~kafkastore.errors.ConfigError` listing the known ones)."""
    from kafkastore.storage import check_options

    found = tuple(sorted((k[len("storage."):], v) for k, v in opts.items()
                         if k.startswith("storage.")))
    check_options(path, dict(found))
    return found


@dataclass(frozen=True)
class WriteOptions:
    """The parsed writer options; see :func:`parse_write_options`."""

    path: str
    topic: str | None = None
    partitions: int | None = None
    compression: str = "producer"
    batch_records: int = 16384
    batch_bytes: int = 1_000_000     # records per batch, under max.message.bytes (1 MiB + 12)
    sink_id: str | None = None
    lock_timeout_ms: int = 60_000
    staging_ttl_ms: int = 3_600_000
    topic_config: dict = field(default_factory=dict)


def parse_write_options(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    """Check the options of a write (``streaming`` for ``writeStream``, which needs
    ``checkpointLocation`` or ``sinkId``). ``kafka.*`` producer settings are accepted and
    ignored except ``kafka.compression.type`` (the batches' codec). Topic settings for
    topics this write creates go in ``topic.<kafka topic config>`` options, e.g.
    ``topic.segment.bytes``."""
    opts = _opts(options)
    path = opts.get("path")
    if not path:
        raise ConfigError("The kafkastore sink needs the log directory: "
                          "df.write.format('kafkastore').mode('append').save('/path')")
    # refused here, on the driver when Spark plans the write: before any task runs and
    # before any directory is made (never a local directory named "s3:/bucket/...")
    from kafkastore.storage import require_local_path
    path = os.path.abspath(require_local_path(path, "The kafkastore Spark sink"))
    topic = opts.get("topic")
    if topic is not None:
        from kafkastore.topic import validate_topic
        validate_topic(topic)
    compression = opts.get("compression", opts.get("kafka.compression.type", "producer"))
    from kafkastore.types import CompressionType
    if compression.strip().lower() != "producer":
        CompressionType.parse(compression.strip().lower())
    sink_id = opts.get("sinkid") or opts.get("checkpointlocation")
    if streaming and sink_id is None:
        raise ConfigError(NO_SINK_ID)
    topic_config = {k[len("topic."):]: v for k, v in opts.items() if k.startswith("topic.")}
    return WriteOptions(
        path=path, topic=topic, partitions=_positive(opts, "partitions"),
        compression=compression.strip().lower(),
        batch_records=_positive(opts, "batchRecords") or 16384,
        batch_bytes=_positive(opts, "batchBytes") or 1_000_000,
        sink_id=sink_id,
        lock_timeout_ms=_positive(opts, "lockTimeoutMs") or 60_000,
        staging_ttl_ms=_positive(opts, "stagingTtlMs") or 3_600_000,
        topic_config=topic_config,
    )
