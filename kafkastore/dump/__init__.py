"""The engine of ``kafkastore dump-log``: Kafka's ``kafka-dump-log.sh``, byte for byte.

:func:`dump_files` is Kafka's ``kafka.tools.DumpLogSegments`` (kafka-storage.md section 9):
for each file, in the order given, ``Dumping <file>`` on ``out`` and then a dump chosen by
the file's suffix (the text from its *last* dot):

``.log``
    ``Log starting offset: <base>``, one line per batch, with deep iteration one line per
    record, and ``Found <n> invalid bytes at the end of <name>`` when bytes that hold no
    complete batch follow the last one (only when ``max_bytes`` is not given).
``.checkpoint``
    A KRaft snapshot: ``Snapshot end offset: <o>, epoch: <e>`` (or ``KRaft bootstrap
    snapshot``), then the same dump as a ``.log``.
``.index``
    ``offset: <o> position: <p>`` per entry (or ``<file> is empty.``); every entry is
    checked against the log: the first batch found at its position must end at its offset.
``.timeindex``
    ``timestamp: <t> offset: <o>`` per entry; every entry is checked against the log's
    batch that ends at its offset.
``.txnindex``
    ``version: <v> producerId: <p> firstOffset: <f> lastOffset: <l> lastStableOffset:
    <lso>`` per aborted transaction (a partial entry at the end is ignored, as Kafka's
    iterator does).
``.snapshot``
    A producer-state snapshot: per producer ``producerId: <p> producerEpoch: <e>
    coordinatorEpoch: <c> currentTxnFirstOffset: OptionalLong[<o>]`` (or
    ``OptionalLong.empty``) ``lastTimestamp: <t> `` and, when the producer has a batch,
    ``firstSequence: <f> lastSequence: <l> lastOffset: <o> offsetDelta: <d> timestamp:
    <t>``; a corrupt snapshot prints Kafka's message on ``err`` instead (not a file error,
    as in Kafka).
anything else
    ``Ignoring unknown file <file>`` on ``err``.

After the last file the problems found go to ``err`` in Kafka's words and order: offset
index mismatches, time index timestamp mismatches, out-of-order time index entries, time
index offsets not found in the log, non-consecutive offsets. Within a file, offset index
mismatches and non-consecutive offsets are listed newest first (Kafka prepends them to a
list); the time index problems oldest first (Kafka appends them). Files are reported in
the order they were dumped (Kafka iterates a hash map there, so with several files its
order is not defined).

Exact output
------------
Every line Kafka prints is reproduced exactly, quirks included: legacy (magic 0/1) record
lines end with a stray ``}``; with ``skip_record_metadata`` a record line is ``| key: ...``,
or `` payload: ...`` with no ``|`` when the record has no key, or empty; keys, payloads
and header keys are decoded as Java's ``new String(bytes, UTF_8)`` does (each malformed
sequence becomes one U+FFFD by Java's rules, which differ from Python's for encoded
surrogates); control records print their marker (``endTxnMarker: COMMIT coordinatorEpoch:
N``), KRaft records as Kafka's JSON, other types as ``controlType: NAME(id)``; positions
printed for an index's problems and for non-consecutive offsets are Java's
``getAbsolutePath`` (the working directory joined to a relative path, not normalised), and
file names are printed as ``java.io.File`` normalises them (repeated and trailing slashes
dropped). ``max_bytes`` equal to Kafka's default (2147483647) counts as not given, as in
Kafka, which compares the value.

Batches the kernels refuse but Kafka prints (a magic byte above 2, a v2 entry shorter than
its 61-byte header, a legacy zstd codec) are printed from their raw header bytes as Kafka
prints them; an entry larger than 8 MiB is CRC-checked in windows instead of being read
whole (unless its records are printed).

Errors and exit codes
---------------------
Where Kafka stops with an exception (a file that cannot be opened, a size field below 14,
records that do not parse, an index that fails ``index_sanity_check``, an index entry that
points past the log or at no complete batch, a file name that holds no offset) the file's
dump stops, one line ``kafkastore: <file>: <reason>`` goes to ``err`` (never a
traceback), and the remaining files are still dumped; the problems collected are reported
at the end as usual. Return values:

* ``0`` (:data:`EXIT_OK`): every file was dumped. Problems found in the data
  (mismatches, gaps, invalid bytes, batches with a bad CRC) do not change it, as in Kafka;
  neither do unknown or unsupported files, which are reported on ``err``.
* ``1`` (:data:`EXIT_FILE_ERROR`): at least one file could not be dumped to the end.
* ``2`` (:data:`EXIT_USAGE`): invalid options (a negative ``max_bytes`` or
  ``max_message_size``); nothing was dumped.

Errors writing to ``out`` or ``err`` (a closed pipe) are not file errors: they propagate.

Memory
------
A ``.log`` is read entry by entry with ``pread`` (the walk reads headers in 8 KiB windows,
then each entry is read on its own), never whole; only one entry, or one decompressed
payload, is in memory at a time.

Files given as URIs
-------------------
A file given as a URI (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``, ``file://``, any
fsspec scheme) is read through :mod:`kafkastore.storage`: the ``.log`` with the same
walk, as ranged reads (:class:`~kafkastore.file_records.StorageRecords`), the indexes
whole (they are small) through :class:`~kafkastore.index.OffsetIndexView` and
``TimeIndexView``. The same code parses and prints both, so the output is a local
file's but for the names: a URI is printed as given, and stands for its own absolute
path in the problem reports.

JSON output (``json=True``)
---------------------------
One JSON object per line on ``out``, instead of Kafka's text (``err`` still gets the error
lines). Every object has ``type`` and ``file`` (the file as given, normalised as above;
for problems from an index or from deep iteration, the absolute path Kafka prints). Types:

``file``
    ``{"type": "file", "file", "kind"}``: one per file, first. ``kind`` is ``log``,
    ``snapshot``, ``offset_index``, ``time_index``, ``txn_index``, ``producer_snapshot``
    or ``unknown``.
``log_start``
    ``{"baseOffset"}`` for a ``.log``; ``{"snapshotEndOffset", "snapshotEpoch"}`` or
    ``{"bootstrap": true}`` for a ``.checkpoint``.
``batch``
    Always ``position, magic, lastOffset, timestampType`` (``CreateTime``,
    ``LogAppendTime`` or ``NoTimestampType``), ``maxTimestamp, size`` (12-byte prefix
    included), ``compression`` (``none`` ... ``zstd``), ``crc`` (unsigned), ``isValid``.
    Magic 2 and above add ``baseOffset, count, baseSequence, lastSequence, producerId,
    producerEpoch, partitionLeaderEpoch, isTransactional, isControl, deleteHorizonMs``
    (an int or null).
``record``
    Always ``batchPosition, offset``. Unless ``skip_record_metadata``: ``timestampType,
    timestamp, keySize, valueSize`` (-1 for null); magic 2 adds ``sequence`` and
    ``headerKeys`` (a list of strings); magic 0/1 add ``isValid`` and ``crc``; control
    records add ``control``: ``{"type": "COMMIT"|"ABORT", "id", "coordinatorEpoch"}``,
    ``{"type": "SNAPSHOT_HEADER"|..., "id", "data": {...}}`` (Kafka's JSON of the
    record) or ``{"type": "LEADER_CHANGE"|"UNKNOWN"|..., "id"}``. With
    ``print_data_log``, for non-control records: ``key``, ``keyBase64``, ``value``,
    ``valueBase64`` (a string or null; the string is the bytes as UTF-8 when they are
    valid UTF-8, else their standard base64 and the ``...Base64`` flag is true) and, for
    magic 2, ``headers``: ``[{"key", "value", "valueBase64"}]``.
``log_end``
    ``{"validBytes", "sizeInBytes", "batches"}``: after a complete ``.log`` dump
    (``sizeInBytes`` is the part read: the file, or its first ``max_bytes`` bytes).
``index_entry``
    ``{"kind": "offset_index", "slot", "offset", "position"}`` or ``{"kind":
    "time_index", "slot", "timestamp", "offset"}``: not with ``verify_index_only``.
``aborted_txn``
    ``{"version", "producerId", "firstOffset", "lastOffset", "lastStableOffset"}``: one
    per ``.txnindex`` entry.
``producer``
    ``{"producerId", "producerEpoch", "coordinatorEpoch", "currentTxnFirstOffset"`` (an
    int or null) ``, "lastTimestamp", "batch"}``, ``batch`` null or ``{"firstSequence",
    "lastSequence", "lastOffset", "offsetDelta", "timestamp"}``: one per producer of a
    ``.snapshot``; a corrupt snapshot is a ``problem`` of kind ``corrupt_snapshot`` with
    ``message``.
``index_empty``, ``sanity_check``
    ``<file> is empty.`` and ``{"passed": true}`` for ``<file> passed sanity check.``
``problem``
    ``kind`` and its fields: ``invalid_bytes`` (``bytes``; ``file`` is the file name, as
    in Kafka's line), ``offset_index_mismatch`` (``indexOffset, logOffset``),
    ``time_index_mismatch`` (``indexTimestamp, logTimestamp``),
    ``time_index_out_of_order`` (``indexTimestamp, previousTimestamp``),
    ``time_index_offset_not_found`` (``indexOffset, logOffset``),
    ``non_consecutive_offsets`` (``first, second``), ``unknown_file``, ``not_supported``
    (``reason``). They come where Kafka prints the same facts: ``invalid_bytes`` after
    its log, the others after the last file, in the text order above.
``error``
    ``{"error": <exception class>, "message"}``, and ``position``/``offset`` when known:
    the file's dump stopped there.

The package
-----------
The public API is what this module exports; its parts are internal:
:mod:`~kafkastore.dump.dumper` (the walk over each file, :class:`DumpOptions` and the
exit codes), :mod:`~kafkastore.dump.emitters` (Kafka's text, :func:`batch_line`, and the
JSON lines), :mod:`~kafkastore.dump.sources` (local files and URIs),
:mod:`~kafkastore.dump.raw_batch` (the raw header parse of entries the kernels refuse),
:mod:`~kafkastore.dump.control_records` (markers and KRaft control records, read with
the shared :mod:`kafkastore.kraft_message` reader) and :mod:`~kafkastore.dump.java_format`
(Java's strings, paths, int arithmetic and Jackson's JSON).
"""

from __future__ import annotations

from typing import TextIO

from kafkastore.dump.dumper import (
    EXIT_FILE_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    KAFKA_MAX_BYTES_DEFAULT,
    Dumper,
    DumpOptions,
    ProgressCallback,
)
from kafkastore.dump.emitters import Emitter, JsonEmitter, OutputFailed, TextEmitter, batch_line
from kafkastore.dump.java_format import java_utf8

__all__ = [
    "EXIT_FILE_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "KAFKA_MAX_BYTES_DEFAULT",
    "DumpOptions",
    "batch_line",
    "dump_files",
    "java_utf8",
]


def dump_files(files: list[str], options: DumpOptions, out: TextIO, err: TextIO, *,
               progress: ProgressCallback | None = None,
               storage_options: dict[str, str] | None = None, resolve=None) -> int:
    """Dump ``files`` as ``kafka-dump-log.sh --files`` does; return the exit code.

    Parameters
    ----------
    files : list of str
        Paths or URIs (``s3://bucket/t-0/00000000000000000000.log``, ``file://``, any
        scheme :func:`kafkastore.storage.open_storage` serves), dumped in this order.
        A URI's ``.log`` is read with ranged reads, its indexes whole; its lines are a
        local file's, but for the name, printed as given.
    options : DumpOptions
    out, err : text streams
        Kafka's stdout and stderr.
    progress : callable, optional
        ``progress(done_bytes, total_bytes)``, called as the dump goes (about every
        256 KiB, and after each file). ``total_bytes`` is the bytes to read: each
        ``.log`` up to ``max_bytes``, each ``.index``/``.timeindex`` file.
    storage_options : dict, optional
        Options of the store the URIs name (:data:`kafkastore.storage.OPTIONS`: an
        endpoint, a region, credentials); an unknown name raises
        :class:`~kafkastore.errors.ConfigError` when the first URI is opened.
    resolve : callable, optional
        ``resolve(name) -> (storage, path)``: where each file is read, for every name
        (a :class:`~kafkastore.storage.ReadOnlyStorage` and its path); names are printed
        as given. ``kafkastore dump-log --tiered`` passes a tiered copy's virtual log
        directory (:mod:`kafkastore.tiered`), whose ``.log`` is the original segment.

    Returns
    -------
    int
        :data:`EXIT_OK`, :data:`EXIT_FILE_ERROR` or :data:`EXIT_USAGE` (module docstring).
    """
    emitter: Emitter = JsonEmitter(out, err) if options.json else TextEmitter(out, err)
    try:
        return Dumper(options, emitter, progress, storage_options, resolve).run(list(files))
    except OutputFailed as exc:
        raise exc.__cause__ from None
