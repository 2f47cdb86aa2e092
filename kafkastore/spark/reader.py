"""Executor side of a Spark read: segment byte ranges to Arrow record batches.

A task gets a :class:`~kafkastore.spark.planner.Split` and yields
``pyarrow.RecordBatch``es whose schema equals Spark's Arrow form of the Kafka
source schema (every field nullable, ``binary`` not ``large_binary``,
``timestamp[us, tz=UTC]``, ``int32`` partition): Spark rejects anything else.

No Python object is made per record: files are read through the storage seam
(:mod:`kafkastore.storage`: ``pread`` locally, ranged GETs on an object store) into
bounded chunks (never mapped, so a file another process truncates cannot kill
the worker), from the planned position to the planned end (the offset index entry
past the range), entries are walked and CRC-checked by ``scan_batches``, records are
decoded by ``decode_columns`` into numpy columns, and the Arrow arrays are built
over those buffers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence

import numpy as np

from kafkastore.batch_header import (
    ENTRY_PREFIX,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    read_batch_header,
)
from kafkastore.errors import KafkaStoreError, StorageFileNotFoundError
from kafkastore.file_records import read_chunks
from kafkastore.records import decode_columns
from kafkastore.spark.planner import SegmentSlice, Split
from kafkastore.txn_index import AbortedTransactionFilter, keep_mask

__all__ = ["KAFKA_FIELDS", "HEADERS_FIELD", "schema_ddl", "arrow_schema", "headers_type",
           "read_split", "columns_to_arrow"]

#: Spark-Kafka's source schema, in order: (name, Spark SQL type).
KAFKA_FIELDS = (
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
)
HEADERS_FIELD = ("headers", "array<struct<key:string,value:binary>>")

_CHUNK = 8 << 20
_UNKNOWN = -(1 << 62)   # "the entry before is unknown": its successor may start anywhere
_HEADERS = ({}, {"headers": True})
_MS_LIMIT = (1 << 63) // 1000


def schema_ddl(include_headers: bool) -> str:
    """The source schema as DDL (what ``DataSource.schema()`` returns)."""
    fields = KAFKA_FIELDS + ((HEADERS_FIELD,) if include_headers else ())
    return ", ".join(f"`{n}` {t}" for n, t in fields)


def _arrow_type(name: str):
    import pyarrow as pa
    return {
        "key": pa.binary(),
        "value": pa.binary(),
        "topic": pa.string(),
        "partition": pa.int32(),
        "offset": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestampType": pa.int32(),
        "headers": headers_type(),
    }[name]


def headers_type():
    """Spark-Kafka's ``array<struct<key:string,value:binary>>`` in Arrow."""
    import pyarrow as pa
    return pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def arrow_schema(names: Sequence[str]):
    """The Arrow schema Spark expects for these Kafka columns, in this order."""
    import pyarrow as pa
    return pa.schema([pa.field(n, _arrow_type(n), nullable=True) for n in names])


def read_split(split: Split, names: Sequence[str], *, ts_min: int | None = None,
               offset_in: frozenset | None = None, batch_rows: int = 65536,
               chunk_size: int = _CHUNK, storage=None, tiered_storage=None,
               planned_on: str | None = None) -> Iterator:
    """Yield the records of ``split`` as Arrow batches with the columns ``names``.

    ``ts_min`` skips whole batches whose max timestamp is below it (a pushed
    ``timestamp >= T``; Spark re-checks the rows). ``offset_in`` keeps only those
    offsets (a pushed ``offset IN (...)``, which is exact). Control batches are
    skipped; a read_committed split (``split.aborted`` set) also drops the records of
    its aborted transactions (:class:`~kafkastore.txn_index.AbortedTransactionFilter`).
    A corrupt entry raises a :class:`~kafkastore.errors.KafkaStoreError`
    naming the file and position. ``storage`` serves the slices' paths (default: the
    local file system), ``tiered_storage`` those of the tiered slices (the virtual log
    directory of a tiered copy, :class:`kafkastore.tiered.tiered_storage.TieredStorage`).
    ``planned_on`` is the host that listed the slices (None: this one); a local segment
    missing on another host is reported as a path not shared, not as a deletion.
    """
    if storage is None:
        from kafkastore.storage import LocalStorage
        storage = LocalStorage()
    import pyarrow as pa

    headers = "headers" in names
    schema = arrow_schema(names)
    topic = split.topic.encode()
    wanted = None if offset_in is None else np.fromiter(offset_in, dtype=np.int64,
                                                         count=len(offset_in))
    txn_filter = None if split.aborted is None else AbortedTransactionFilter(split.aborted)
    for sl in split.slices:
        if sl.tiered and tiered_storage is None:
            raise KafkaStoreError(f"{sl.path} is a segment of a tiered copy, and the task "
                                  f"was given no tiered storage to read it from")
        store = tiered_storage if sl.tiered else storage
        for cols, i0, i1 in _slice_columns(store, sl, headers, ts_min, chunk_size,
                                           txn_filter, planned_on):
            keep = None if wanted is None else np.isin(cols["offset"][i0:i1], wanted)
            aborted = cols.pop("_aborted", None)
            if aborted is not None:
                committed = keep_mask(cols["offset"][i0:i1], *aborted)
                if committed is not None:
                    keep = committed if keep is None else keep & committed
            if keep is not None and not keep.any():
                continue
            for a in range(i0, i1, batch_rows):
                b = min(a + batch_rows, i1)
                batch = columns_to_arrow(cols, a, b, names, schema, topic, split.partition)
                if keep is not None:   # offset IN (...) or read_committed: exact, so here
                    batch = batch.filter(pa.array(keep[a - i0:b - i0]))
                    if not batch.num_rows:
                        continue
                yield batch


def _verified_start(reader, sl: SegmentSlice) -> tuple[int, int]:
    """Where to start reading ``sl``, and the last offset before that (or
    ``_UNKNOWN``).

    ``sl.position`` if the entry there is the one the index promised, else 0: an index
    entry holds the last offset of the batch at its position (for a legacy entry, the
    offset field itself), and if the segment was replaced since planning (the cleaner
    swaps in a file with the same name), the position no longer holds that batch, and
    the slice is read from the start of the file. When the promised batch ends before
    the slice's first offset (the index's floor is the batch before it), it is skipped
    by its header: on an object store that saves fetching a whole batch for nothing.
    """
    if sl.position == 0 or sl.expect_last < 0:
        return sl.position, _UNKNOWN
    head = reader.read(sl.position, RECORD_BATCH_OVERHEAD) if sl.position < reader.size else b""
    if len(head) >= HEADER_SIZE_UP_TO_MAGIC:
        if head[MAGIC_OFFSET] >= 2 and len(head) == RECORD_BATCH_OVERHEAD:
            h = read_batch_header(head)
            last, size = h.last_offset, h.size
        else:   # a legacy entry's offset field is its last offset
            last, length = ENTRY_PREFIX.unpack_from(head)
            size = LOG_OVERHEAD + length
        if last == sl.expect_last:
            if last < sl.lo and size > LOG_OVERHEAD and sl.position + size <= reader.size:
                return sl.position + size, last
            return sl.position, _UNKNOWN
    return 0, _UNKNOWN


def _gone(storage, sl: SegmentSlice, planned_on: str | None) -> StorageFileNotFoundError:
    uri = storage.uri(sl.path)
    here = socket.gethostname()
    if getattr(storage, "is_local", False) and planned_on not in (None, here):
        # the listing that planned the slice saw the file, but on another host: a local
        # path is only the same directory where a shared mount makes it so
        return StorageFileNotFoundError(
            f"Segment {uri} is not there on host {here}; the query was planned on host "
            f"{planned_on}, whose log directory has it. A local path must name the same "
            f"directory on every executor (a shared mount at the same path), or read the "
            f"log directory through a URI every executor can reach.",
            path=uri, offset=sl.lo)
    return StorageFileNotFoundError(
        f"Segment {uri} was deleted (by retention or the log cleaner) after the query "
        f"was planned; offsets {sl.lo}-{sl.hi} can no longer be read. Run the query "
        f"again.", path=uri, offset=sl.lo)


def _slice_columns(storage, sl: SegmentSlice, headers: bool, ts_min: int | None,
                   chunk_size: int, txn_filter=None, planned_on: str | None = None):
    """Yield ``(columns, i0, i1)``: decoded chunks of ``sl`` and the rows in ``[lo, hi)``
    (with ``txn_filter``, the columns also hold ``_aborted``: the offset ranges of the
    aborted batches, for :func:`~kafkastore.txn_index.keep_mask`)."""
    try:
        reader = storage.open(sl.path, sl.size if sl.size >= 0 else None)
    except StorageFileNotFoundError:
        raise _gone(storage, sl, planned_on) from None
    try:
        yield from _read_slice(storage, reader, sl, headers, ts_min, chunk_size, txn_filter)
    except StorageFileNotFoundError:
        raise _gone(storage, sl, planned_on) from None
    finally:
        reader.close()


def _read_slice(storage, reader, sl: SegmentSlice, headers: bool, ts_min: int | None,
                chunk_size: int, txn_filter=None):
    size = reader.size
    start, prev_last = _verified_start(reader, sl)
    # the planned end bounds the ranged reads; it is an index position of the file that
    # was planned, so only trusted when the start was (a replaced file reads to its end)
    bound = sl.end if 0 <= sl.end <= size and (start > 0 or sl.position == 0) else size
    if sl.floor > start:    # bytes before the floor are another task's (a byte cut)
        start, prev_last = sl.floor, _UNKNOWN
    if sl.ceiling >= 0:     # and so are those from the ceiling on
        size = min(size, sl.ceiling)
        bound = min(bound, size)
        if start >= size:
            return
    local = storage.is_local
    buf = bytearray()

    def read(position: int, n: int):
        if not local:
            return reader.read(position, n)
        # one buffer for the whole slice: a fresh 8 MiB bytes per chunk would cost
        # its page faults on every read (decode_columns copies what it keeps)
        nonlocal buf
        if len(buf) < n:
            buf = bytearray(n)
        got = reader.readinto(memoryview(buf)[:n], position)
        return memoryview(buf)[:got]

    position = start
    while True:
        done = False
        for pos, data, scan in read_chunks(read, position, bound, chunk_size, validate=True):
            n = len(scan)
            if n:
                last = scan.last_offset
                # a legacy entry's first offset is not in its header (a compressed
                # wrapper's offset is its last inner one): it is past the entry before
                first = np.where(scan.magic >= 2, scan.base_offset,
                                 np.concatenate(([prev_last], last[:-1])) + 1)
                prev_last = int(last[-1])
                keep = last >= sl.lo
                after = first >= sl.hi
                stop = bool(after.any())
                keep &= ~after
                aborted = None
                if txn_filter is not None:
                    # every batch of the range, in order (markers included): the
                    # filter's state follows the partition
                    rows = np.flatnonzero(keep)
                    aborted = txn_filter.aborted_ranges(data, scan.position[rows],
                                                        scan.size[rows], scan.magic[rows])
                if ts_min is not None:
                    keep &= scan.max_timestamp >= ts_min
                for a, b in _runs(keep):
                    begin = int(scan.position[a])
                    end = int(scan.position[b - 1] + scan.size[b - 1])
                    # the copying layout, not the views (copy=False): Spark takes
                    # only ``binary`` (the data source compares the batch's schema
                    # with it), whose values lie back to back, so one copy is needed
                    # either way and this one writes them where Spark reads them;
                    # views would also point into ``buf``, which the next chunk reuses
                    cols = _as_dict(decode_columns(data, begin, end, validate=False,
                                                   copy=True, **_HEADERS[headers]))
                    offs = cols["offset"]
                    i0 = int(np.searchsorted(offs, sl.lo, side="left"))
                    i1 = int(np.searchsorted(offs, sl.hi, side="left"))
                    if i0 < i1:
                        if aborted is not None and aborted[0].size:
                            cols["_aborted"] = aborted
                        yield cols, i0, i1
                if stop or prev_last >= sl.hi - 1:
                    return
                position = pos + scan.valid_bytes
            if scan.error is not None:
                raise scan.error.with_context(path=storage.uri(sl.path), position_base=pos)
        else:
            done = True
        if not done or bound >= size:
            return
        # the bound came before the range's end (an index that no longer matches the
        # file): read on to the end of the file rather than miss a row
        bound = size


def _as_dict(cols) -> dict:
    return {name: getattr(cols, name) for name in type(cols).__slots__
            if getattr(cols, name, None) is not None}


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[a, b)`` index runs where ``mask`` is True."""
    if mask.all():
        return [(0, len(mask))] if len(mask) else []
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist()))


def _binary(pa, typ, offsets: np.ndarray, data: np.ndarray, null: np.ndarray | None,
            a: int, b: int):
    lo, hi = int(offsets[a]), int(offsets[b])
    if hi - lo >= 1 << 31:
        raise KafkaStoreError(f"{hi - lo} bytes of keys or values in one Arrow batch; "
                              "lower the arrowBatchRows option")
    offs = (offsets[a:b + 1] - lo).astype(np.int32)
    validity = None
    nulls = 0
    if null is not None:
        part = null[a:b]
        nulls = int(np.count_nonzero(part))
        if nulls:
            validity = pa.py_buffer(np.packbits(~part, bitorder="little"))
    return pa.Array.from_buffers(typ, b - a, [validity, pa.py_buffer(offs),
                                              pa.py_buffer(data[lo:hi])], null_count=nulls)


def columns_to_arrow(cols: dict, a: int, b: int, names: Sequence[str], schema,
                     topic: bytes, partition: int):
    """Rows ``[a, b)`` of decoded columns as one ``pyarrow.RecordBatch`` of ``schema``."""
    import pyarrow as pa

    n = b - a
    arrays = []
    for name in names:
        if name == "key":
            arr = _binary(pa, pa.binary(), cols["key_offsets"], cols["key_data"],
                          cols["key_null"], a, b)
        elif name == "value":
            arr = _binary(pa, pa.binary(), cols["value_offsets"], cols["value_data"],
                          cols["value_null"], a, b)
        elif name == "topic":
            offs = np.arange(n + 1, dtype=np.int32) * len(topic)
            arr = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offs),
                                                         pa.py_buffer(topic * n)])
        elif name == "partition":
            arr = pa.array(np.full(n, partition, dtype=np.int32))
        elif name == "offset":
            arr = pa.array(cols["offset"][a:b])
        elif name == "timestamp":
            ms = cols["timestamp"][a:b]
            bad = (ms >= _MS_LIMIT) | (ms <= -_MS_LIMIT)
            us = ms * 1000
            if bad.any():   # beyond what microseconds hold: null rather than wrapped
                arr = pa.array(np.where(bad, 0, us), type=pa.timestamp("us", tz="UTC"),
                               mask=bad)
            else:
                arr = pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n,
                                            [None, pa.py_buffer(us)])
        elif name == "timestampType":
            arr = pa.array(cols["timestamp_type"][a:b].astype(np.int32))
        elif name == "headers":
            arr = _headers(pa, cols, a, b)
        else:  # pragma: no cover - names are checked by the source
            raise ValueError(f"unknown column {name}")
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(pa, cols: dict, a: int, b: int):
    """``list<struct<key: string, value: binary>>``; null (not empty) for a record
    without headers, as Spark-Kafka gives."""
    ho = cols["header_offsets"]
    h0, h1 = int(ho[a]), int(ho[b])
    counts = np.diff(ho[a:b + 1])
    keys = _binary(pa, pa.string(), cols["header_key_offsets"], cols["header_key_data"],
                   None, h0, h1)
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        # Kafka stores header keys as bytes; Spark-Kafka decodes them as Java's
        # new String(bytes, UTF_8) does, replacing what is not UTF-8 with U+FFFD
        raw = pa.Array.from_buffers(pa.binary(), len(keys), keys.buffers())
        keys = pa.array([b.decode("utf-8", "replace") for b in raw.to_pylist()],
                        type=pa.string())
    values = _binary(pa, pa.binary(), cols["header_value_offsets"],
                     cols["header_value_data"], cols["header_value_null"], h0, h1)
    struct = pa.StructArray.from_arrays([keys, values],
                                        fields=list(headers_type().value_type))
    none = counts == 0
    nulls = int(np.count_nonzero(none))
    validity = pa.py_buffer(np.packbits(~none, bitorder="little")) if nulls else None
    list_offsets = (ho[a:b + 1] - h0).astype(np.int32)
    return pa.ListArray.from_buffers(headers_type(), b - a,
                                     [validity, pa.py_buffer(list_offsets)],
                                     null_count=nulls, children=[struct])
