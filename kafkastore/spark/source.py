"""The PySpark data source ``kafkastore``: Spark's Kafka source and sink, on log files.

Importing this module imports pyspark; :mod:`kafkastore.spark` imports it lazily.
Spark calls these classes in different processes (see the reference in
``docs/spark.rst``): ``DataSource`` and the readers' ``pushFilters``/``partitions``
run in short-lived driver-side Python workers, ``read``/``write`` in executors, the
writers' ``commit``/``abort`` on the driver, and a stream reader lives in one
driver-side worker for the whole query. Everything here is picklable and opens no
file until a method runs.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from kafkastore.errors import ConfigError, StorageAccessDeniedError, StorageError
from kafkastore.spark import layout as _layout
from kafkastore.spark.options import (
    APPEND_ONLY,
    offsets_json,
    parse_offsets_json,
    parse_read_options,
    parse_write_options,
)
from kafkastore.spark.planner import (
    NEVER_NULL,
    Pushdown,
    plan_splits,
    rate_limit,
    resolve_ranges,
    selected_partitions,
    start_offsets,
)
from kafkastore.spark.reader import HEADERS_FIELD, KAFKA_FIELDS, read_split, schema_ddl
from kafkastore.spark.writer import (
    StagedCommit,
    TaskStager,
    abort_job,
    commit_job,
    new_job_id,
    sweep_staging,
)
from kafkastore.topic import TopicPartition

__all__ = ["KafkaStoreDataSource"]

_TYPES = dict(KAFKA_FIELDS + (HEADERS_FIELD,))


def _column_names(schema, include_headers: bool) -> list[str]:
    """The requested columns: the whole Kafka schema, or a by-name subset of it (the
    only way to project a Python data source)."""
    if schema is None:
        return [n for n, _ in KAFKA_FIELDS] + (["headers"] if include_headers else [])
    names = []
    for f in schema.fields:
        want = _TYPES.get(f.name)
        got = f.dataType.simpleString()
        if want is None:
            raise ConfigError(f"Column {f.name!r} is not in the Kafka source schema "
                              f"({schema_ddl(True)})")
        if got != want:
            raise ConfigError(f"Column {f.name!r} has type {got}; the Kafka source gives "
                              f"{want}")
        names.append(f.name)
    return names


class KafkaStoreDataSource(DataSource):
    """Format ``kafkastore``: read, stream and write Kafka log directories.

    Options and schema are Spark-Kafka's (see ``docs/spark.rst``); the path is the log
    directory. A read may also (or instead) name a tiered-storage copy with the option
    ``tieredStorage`` (:mod:`kafkastore.spark.tiered`).
    """

    @classmethod
    def name(cls) -> str:
        return "kafkastore"

    def schema(self):
        headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return schema_ddl(headers)

    def reader(self, schema):
        opts = parse_read_options(self.options, streaming=False)
        names = _column_names(schema, opts.include_headers)
        if opts.pushdown:
            return KafkaStorePushdownReader(opts, names)
        return KafkaStoreReader(opts, names)

    def streamReader(self, schema):
        opts = parse_read_options(self.options, streaming=True)
        return KafkaStoreStreamReader(opts, _column_names(schema, opts.include_headers))

    def writer(self, schema, overwrite):
        _refuse_overwrite(overwrite)
        opts = parse_write_options(self.options, streaming=False)
        sweep_staging(opts.path, opts.staging_ttl_ms)
        return KafkaStoreWriter(opts, new_job_id())

    def streamWriter(self, schema, overwrite):
        _refuse_overwrite(overwrite)
        opts = parse_write_options(self.options, streaming=True)
        sweep_staging(opts.path, opts.staging_ttl_ms)
        return KafkaStoreStreamWriter(opts, new_job_id())


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise ConfigError(APPEND_ONLY, key="mode", value="Overwrite")


class KafkaStorePartition(InputPartition):
    """One task: a :class:`~kafkastore.spark.planner.Split`, and what the pushed
    filters ask of its rows (``ts_min``, ``offset_in``); for a split of a tiered copy,
    the storage its remote slices are read through (``tiered``: what
    :func:`kafkastore.spark.tiered.task_storage` ships, so the task neither lists the
    copy nor fetches a manifest). ``planned_on``: the host whose listing planned it (a
    local segment missing on another host is a path the executors do not share, not a
    deleted segment)."""

    def __init__(self, split, ts_min=None, offset_in=None, tiered=None,
                 planned_on=None) -> None:
        super().__init__(split)
        self.ts_min = ts_min
        self.offset_in = offset_in
        self.tiered = tiered
        self.planned_on = planned_on


def _scan(opts, copy=None) -> dict:
    """The driver's one listing of the log directory (a path or a URI); with
    ``tieredStorage``, of the tiered copy too (``copy``, when already open), as
    :class:`~kafkastore.spark.tiered.UnionLog` views."""
    if opts.tiered is None:
        return _layout.scan(opts.path, opts.storage)
    from kafkastore.spark.tiered import open_copy, scan_union

    return scan_union(opts, copy if copy is not None else open_copy(opts.tiered))


def _close(layouts) -> None:
    for view in layouts.values():
        view.close()


def _plan(opts, pushdown: Pushdown, starts=None, ends=None, layouts=None) -> list:
    own = layouts is None
    if own:
        layouts = _scan(opts)
    try:
        ranges = resolve_ranges(opts, layouts, pushdown, starts=starts, ends=ends)
        splits = plan_splits(opts, layouts, ranges)
        stores = [None] * len(splits)
        if opts.tiered is not None:
            from kafkastore.spark.tiered import task_storage
            stores = [task_storage(layouts, s) for s in splits]
        host = socket.gethostname()
        return [KafkaStorePartition(s, pushdown.ts_min, pushdown.offset_in, store, host)
                for s, store in zip(splits, stores)]
    finally:
        if own:
            _close(layouts)


def _read(names, opts, partition) -> Iterator:
    split = getattr(partition, "value", None)
    if split is None:   # Spark's stand-in when partitions() planned nothing
        return
    try:
        storage = None
        if any(not sl.tiered for sl in split.slices):
            from kafkastore.storage import open_storage

            # one client per worker process and store (open_storage caches remote ones)
            storage, _ = open_storage(opts.path, opts.storage)
        yield from read_split(split, names, ts_min=partition.ts_min,
                              offset_in=partition.offset_in, batch_rows=opts.batch_rows,
                              storage=storage,
                              tiered_storage=getattr(partition, "tiered", None),
                              planned_on=getattr(partition, "planned_on", None))
    except StorageError as exc:
        raise in_task(exc) from exc


#: What an executor's failed read adds when the store refused its credentials.
EXECUTOR_CREDENTIALS = (
    "The executor read with its own credentials: an executor's environment is the one "
    "its Spark worker started with, and the driver's environment (AWS_* or other "
    "variables exported in the driver's shell, its profile or config files) does not "
    "travel to executors. Give the executors credentials with "
    "spark.executorEnv.<NAME> (e.g. --conf spark.executorEnv.AWS_ACCESS_KEY_ID=...), "
    "in conf/spark-env.sh on every worker, by an instance role, or as the read's "
    "storage.* options (see docs/cluster.rst)")


def in_task(exc: StorageError) -> StorageError:
    """``exc`` (a failed read in a Spark task), saying where it ran: the executor's host
    and the task; for a refusal of credentials, that the executor's credentials are not
    the driver's (a user who exported them in the driver's shell saw planning work and
    every task fail). The same class, so callers catch what they caught before."""
    import socket

    where = socket.gethostname()   # as the planned_on host of a partition is named
    task = ""
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:
            task = (f", task {ctx.partitionId()} of stage {ctx.stageId()} "
                    f"(attempt {ctx.attemptNumber()})")
    except Exception:   # context is a courtesy: never hide the error behind another
        pass
    message = f"{exc.message} [read by an executor on host {where}{task}]"
    if isinstance(exc, StorageAccessDeniedError):
        message += ". " + EXECUTOR_CREDENTIALS
    return type(exc)(message, position=exc.position, offset=exc.offset, path=exc.path)


class KafkaStoreReader(DataSourceReader):
    """Batch reader without filter pushdown (the default; see ``pushdown`` in
    ``docs/spark.rst``): Spark filters the rows, the options choose the ranges."""

    def __init__(self, opts, names) -> None:
        self.opts = opts
        self.names = names
        self.pushdown = Pushdown()

    def partitions(self):
        return _plan(self.opts, self.pushdown)

    def read(self, partition):
        return _read(self.names, self.opts, partition)


class KafkaStorePushdownReader(KafkaStoreReader):
    """Batch reader that takes ``topic``, ``partition`` and ``offset`` filters exactly
    and uses ``timestamp >= T`` to skip data (Spark re-checks that one).

    Option ``pushdown=true`` (and ``spark.sql.python.filterPushdown.enabled``). Not the
    default: Spark 4.3 keeps the partitions planned for a filtered DataFrame on the data
    source shared with the DataFrame it was derived from, so that DataFrame, run later,
    reads only the filtered rows (upstream fixed it by scoping the plan to the scan).
    """

    def pushFilters(self, filters):
        pd = self.pushdown = Pushdown()
        for f in filters:
            if not _push(pd, f):
                yield f


def _push(pd: Pushdown, f) -> bool:
    """Fold ``f`` into ``pd``; True when it is handled exactly (Spark drops it)."""
    col = f.attribute[0] if len(f.attribute) == 1 else None
    if isinstance(f, IsNotNull):
        return col in NEVER_NULL
    value = getattr(f, "value", None)
    if col in ("topic", "partition"):
        kind = "topics" if col == "topic" else "partitions"
        typ = str if col == "topic" else int
        if isinstance(f, (EqualTo, EqualNullSafe)) and type(value) is typ:
            pd.allow_in(kind, [value])
            return True
        if isinstance(f, In) and all(type(v) is typ for v in value):
            pd.allow_in(kind, value)
            return True
        return False
    if col == "offset":
        if isinstance(f, In) and all(type(v) is int for v in value):
            values = frozenset(value)
            pd.offset_in = values if pd.offset_in is None else pd.offset_in & values
            return True
        if type(value) is not int:
            return False
        if isinstance(f, (EqualTo, EqualNullSafe)):
            pd.offsets_at_least(value)
            pd.offsets_below(value + 1)
        elif isinstance(f, GreaterThan):
            pd.offsets_at_least(value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            pd.offsets_at_least(value)
        elif isinstance(f, LessThan):
            pd.offsets_below(value)
        elif isinstance(f, LessThanOrEqual):
            pd.offsets_below(value + 1)
        else:
            return False
        return True
    if col == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)):
        pd.timestamp_at_least(value)
    return False


class KafkaStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Structured Streaming source; offsets are Spark-Kafka's checkpoint JSON."""

    def __init__(self, opts, names) -> None:
        self.opts = opts
        self.names = names
        self._pinned: dict | None = None
        self._available: dict | None = None   # the LEOs latestOffset last saw
        self._listing: dict | None = None     # the views latestOffset listed
        self._copy = None                     # the tiered copy, listed once (see _layouts)

    def _layouts(self, relist_copy: bool = False):
        # one listing per micro-batch: latestOffset lists, and partitions() plans the
        # same micro-batch from that listing. A tiered copy under a log directory is
        # listed once per query (its offsets are history, below the log directory's)
        # and again only when a micro-batch needs offsets that listing lacks
        # (relist_copy); read alone it is the only source of new offsets, so it is
        # listed every micro-batch
        if self._listing is not None:
            _close(self._listing)
        copy = None
        if self.opts.tiered is not None and self.opts.path:
            if self._copy is None or relist_copy:
                from kafkastore.spark.tiered import open_copy
                self._copy = open_copy(self.opts.tiered)
            copy = self._copy
        self._listing = _scan(self.opts, copy)
        return self._listing

    def _leos(self, layouts) -> dict:
        return {tp: layouts[tp].fetch_end_offset(self.opts.isolation_level)
                for tp in selected_partitions(self.opts, layouts)}

    def initialOffset(self) -> dict:
        layouts = self._layouts()
        tps = selected_partitions(self.opts, layouts)
        return offsets_json(start_offsets(self.opts, layouts, tps))

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._pinned = self._leos(self._layouts())

    def reportLatestOffset(self):
        # Spark asks right after latestOffset: report what that call found rather
        # than listing the directory and walking the segment tails again
        leos = self._available if self._available is not None else \
            self._leos(self._layouts())
        return offsets_json(leos)

    def latestOffset(self, start: dict, limit) -> dict:
        layouts = self._layouts()
        self._available = self._leos(layouts)
        leos = dict(self._available)
        if self._pinned is not None:
            leos = {tp: min(off, self._pinned[tp]) for tp, off in leos.items()
                    if tp in self._pinned}
        begin = {TopicPartition(*k): v for k, v in parse_offsets_json(start).items()}
        if isinstance(limit, ReadMaxRows):
            leos = rate_limit(begin, leos, layouts, limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            backlog = sum(max(0, e - begin.get(tp, layouts[tp].log_start_offset))
                          for tp, e in leos.items())
            if backlog < limit.min_rows:
                return start
        # never move a partition backwards (a log truncated below what was read)
        for tp, off in begin.items():
            if tp in leos and leos[tp] < off:
                leos[tp] = off
        return offsets_json(leos)

    def partitions(self, start: dict, end: dict):
        starts = {TopicPartition(*k): v for k, v in parse_offsets_json(start).items()}
        ends = {TopicPartition(*k): v for k, v in parse_offsets_json(end).items()}
        listing = self._listing
        if listing is None or any(tp not in listing for tp in ends):
            listing = self._layouts()   # a restarted query's first batch: list now
        if self.opts.tiered is not None and self.opts.path and _stale(listing, starts, ends):
            # offsets the copy's listing lacks: list it again (segments uploaded since
            # the query started are in the new listing; a real gap stays one)
            listing = self._layouts(relist_copy=True)
        return _plan(self.opts, Pushdown(), starts=starts, ends=ends, layouts=listing)

    def read(self, partition):
        return _read(self.names, self.opts, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the query's checkpoint holds the offsets."""

    def stop(self) -> None:
        """Close the views of the last listing."""
        if self._listing is not None:
            _close(self._listing)
            self._listing = None


def _stale(listing, starts, ends) -> bool:
    """Whether a micro-batch ``[starts, ends)`` needs offsets that are in neither the
    log directory nor the (cached) listing of the tiered copy."""
    for tp, end in ends.items():
        view = listing.get(tp)
        missing = getattr(view, "missing", None)
        if missing is not None and missing(starts.get(tp, view.log_start_offset), end):
            return True
    return False


class KafkaStoreCommit(WriterCommitMessage):
    """A task's :class:`~kafkastore.spark.writer.StagedCommit`, as Spark carries it."""

    def __init__(self, staged: StagedCommit) -> None:
        self.staged = staged


def _stage(opts, job: str, iterator) -> KafkaStoreCommit:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    task = ctx.partitionId() if ctx else 0
    attempt = ctx.attemptNumber() if ctx else 0
    tag = f"{ctx.stageId()}-{task}-{attempt}-{ctx.taskAttemptId()}" if ctx else "0-0-0-0"
    stager = TaskStager(opts, job, task, attempt, tag)
    try:
        for batch in iterator:
            stager.add(batch)
    except BaseException:
        stager.discard()   # nothing of a failed task may be left for the abort to miss
        raise
    return KafkaStoreCommit(stager.finish())


def _staged(messages):
    return [m.staged if isinstance(m, KafkaStoreCommit) else None for m in messages]


class KafkaStoreWriter(DataSourceArrowWriter):
    """Batch sink: tasks stage, the driver's commit appends (all or nothing)."""

    def __init__(self, opts, job: str) -> None:
        self.opts = opts
        self.job = job

    def write(self, iterator):
        return _stage(self.opts, self.job, iterator)

    def commit(self, messages) -> None:
        commit_job(self.opts, self.job, _staged(messages))

    def abort(self, messages) -> None:
        abort_job(self.opts, self.job, _staged(messages))


class KafkaStoreStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: exactly once, by the batch id recorded with each commit."""

    def __init__(self, opts, job: str) -> None:
        self.opts = opts
        self.job = job

    def write(self, iterator):
        return _stage(self.opts, self.job, iterator)

    def commit(self, messages, batchId: int) -> None:
        commit_job(self.opts, self.job, _staged(messages), batch_id=batchId)

    def abort(self, messages, batchId: int) -> None:
        abort_job(self.opts, self.job, _staged(messages))
