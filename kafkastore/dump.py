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
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import crc32c

from kafkastore import compression
from kafkastore.errors import (
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    KafkaStoreError,
    UnsupportedCompressionError,
)
from kafkastore.file_records import BatchHeader, FileRecords
from kafkastore.index import OffsetIndex, TimeIndex
from kafkastore.kraft_message import MessageReader, kafka_uuid_string
from kafkastore.producer_state import parse_snapshot
from kafkastore.records import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    V2_HEADER,
    iter_batches,
    parse_control_record,
    read_batch,
)
from kafkastore.segment import snapshot_id_from_file_name
from kafkastore.txn_index import parse_aborted_txns
from kafkastore.types import CompressionType, ControlRecordType, TimestampType

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

#: Every file was dumped.
EXIT_OK = 0
#: At least one file could not be dumped to the end (see the module docstring).
EXIT_FILE_ERROR = 1
#: Invalid options; nothing was dumped.
EXIT_USAGE = 2

#: Kafka's default for ``--max-bytes`` (``Integer.MAX_VALUE``): with it the trailing
#: invalid bytes of a log are reported.
KAFKA_MAX_BYTES_DEFAULT = (1 << 31) - 1


@dataclass
class DumpOptions:
    """The options of ``kafka-dump-log.sh`` that :func:`dump_files` understands.

    Attributes
    ----------
    print_data_log : bool
        ``--print-data-log``: print each record's key and payload (implies deep iteration).
    deep_iteration : bool
        ``--deep-iteration``: print every record, not only every batch.
    verify_index_only : bool
        ``--verify-index-only``: check ``.index``/``.timeindex`` entries against the log
        without printing them.
    index_sanity_check : bool
        ``--index-sanity-check``: run the index's ``sanityCheck()`` only.
    max_message_size : int
        ``--max-message-size`` (default 5 MiB): bytes of the log read at each offset index
        entry's position to find the batch there.
    max_bytes : int or None
        ``--max-bytes``: read only this many bytes of each ``.log``. None means not given
        (Kafka's default ``Integer.MAX_VALUE``); only then is the "invalid bytes at the
        end" line printed.
    skip_record_metadata : bool
        ``--skip-record-metadata``: omit the per-record metadata.
    json : bool
        One JSON object per line instead of Kafka's text (schema in the module docstring).
    """

    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = 5 * 1024 * 1024
    max_bytes: int | None = None
    skip_record_metadata: bool = False
    json: bool = False


ProgressCallback = Callable[[int, int], None]


def dump_files(files: list[str], options: DumpOptions, out: TextIO, err: TextIO, *,
               progress: ProgressCallback | None = None,
               storage_options: dict[str, str] | None = None) -> int:
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

    Returns
    -------
    int
        :data:`EXIT_OK`, :data:`EXIT_FILE_ERROR` or :data:`EXIT_USAGE` (module docstring).
    """
    emitter: _Emitter = _JsonEmitter(out, err) if options.json else _TextEmitter(out, err)
    try:
        return _Dumper(options, emitter, progress, storage_options).run(list(files))
    except _OutputFailed as exc:
        raise exc.__cause__ from None


# -- small helpers ---------------------------------------------------------------------------

_LOG_OVERHEAD = 12
_V2_HEADER_SIZE = 61         # RECORD_BATCH_OVERHEAD
_LEGACY_HEADER_V1 = 26       # 12-byte prefix + crc, magic, attributes, timestamp
_MIN_ENTRY_SIZE = 14         # RECORD_OVERHEAD_V0
_STREAM_THRESHOLD = 8 << 20  # larger entries are CRC-checked in windows when shallow
_STREAM_WINDOW = 1 << 20
_PROGRESS_STEP = 256 << 10
_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_V2_HEADER = V2_HEADER   # (kafkastore.records: one definition of the layout)
_LEGACY_PREFIX = struct.Struct(
    ">"
    "q"  # offset (a wrapper's: its last inner offset)
    "i"  # size
    "I"  # crc: CRC-32 of [magic, end)
    "b"  # magic
    "b"  # attributes
)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CONTROL_KEY = struct.Struct(">hh")  # version, type


def _wrap32(n: int) -> int:
    return ((n + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _wrap64(n: int) -> int:
    return ((n + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``, in Java int arithmetic."""
    if sequence > _wrap32(_INT32_MAX - increment):
        return _wrap32(increment - _wrap32(_INT32_MAX - sequence) - 1)
    return _wrap32(sequence + increment)


def _signed8(b: int) -> int:
    return b - 256 if b >= 128 else b


def _java_path(path: str) -> str:
    """``new File(path).toString()`` on Unix: repeated slashes collapsed, a trailing one
    dropped."""
    norm = re.sub("/+", "/", path)
    if len(norm) > 1 and norm.endswith("/"):
        norm = norm[:-1]
    return norm


def _java_abs(path: str) -> str:
    """``File.getAbsolutePath`` on Unix: the working directory joined, nothing resolved."""
    if path.startswith("/"):
        return path
    cwd = os.getcwd()
    if not path:
        return cwd
    return cwd + path if cwd == "/" else cwd + "/" + path


def _java_parent(path: str) -> str:
    """``getAbsoluteFile().getParent()``."""
    absolute = _java_abs(path)
    cut = absolute.rfind("/")
    return absolute[:cut] if cut > 0 else "/"


def _java_join(parent: str, child: str) -> str:
    return parent + child if parent == "/" else parent + "/" + child


_LONG = re.compile(r"[+-]?[0-9]+")


def _parse_long(text: str, file: str) -> int:
    """Java's ``Long.parseLong``, as Kafka applies it to a file name's first part."""
    if _LONG.fullmatch(text):
        value = int(text)
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
    raise KafkaStoreError(f"file name does not start with an offset: For input string: "
                          f"\"{text}\"", path=file)


# -- Java's UTF-8 decoding ---------------------------------------------------------------------

_REPL = "\ufffd"


def java_utf8(data: bytes) -> str:
    """``new String(data, StandardCharsets.UTF_8)``: malformed input replaced as Java does.

    Valid UTF-8 decodes the same everywhere. For malformed input Java and Python both
    follow the Unicode "maximal subpart" practice, except that Java turns an encoded
    surrogate (``ED A0 80``) into one U+FFFD where Python makes three; this is a port of
    the JDK's ``String.decodeUTF8_UTF16`` with replacement.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _java_utf8_slow(bytes(data))


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _java_utf8_slow(src: bytes) -> str:
    out: list[str] = []
    sp, sl = 0, len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif (b1 >> 5) == 0b110 and (b1 & 0x1E) != 0:        # C2..DF: 2 bytes
            if sp < sl:
                b2 = src[sp]
                if not _cont(b2):
                    out.append(_REPL)
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                    sp += 1
                continue
            out.append(_REPL)
            break
        elif (b1 >> 4) == 0b1110:                               # E0..EF: 3 bytes
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append(_REPL)
                    # malformed3: how many bytes the bad sequence spans (lead included)
                    sp += 0 if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(_REPL if 0xD800 <= c <= 0xDFFF else chr(c))
                    sp += 2
                continue
            if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _cont(src[sp])):
                out.append(_REPL)
                continue
            out.append(_REPL)
            break
        elif (b1 >> 3) == 0b11110:                              # F0..F7: 4 bytes
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(_REPL)
                    # malformed4
                    if (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                            or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2)):
                        pass
                    elif not _cont(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                    sp += 3
                continue
            if b1 > 0xF4 or (sp < sl and (
                    (b1 == 0xF0 and not 0x90 <= src[sp] <= 0xBF)
                    or (b1 == 0xF4 and (src[sp] & 0xF0) != 0x80) or not _cont(src[sp]))):
                out.append(_REPL)
                continue
            sp += 1
            out.append(_REPL)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            out.append(_REPL)
    return "".join(out)


# -- Kafka's JSON for KRaft control records ----------------------------------------------------


class _ControlValue(MessageReader):
    """A KRaft control record's value (the shared KRaft message reader); its errors carry
    the record's offset, worded as the dump has always worded them."""

    __slots__ = ("offset",)

    def __init__(self, data: bytes, offset: int) -> None:
        super().__init__(bytes(data))
        self.offset = offset

    def error(self, message: str) -> CorruptRecordError:
        return CorruptRecordError(message, offset=self.offset)

    def truncated(self, what: str, n: int) -> CorruptRecordError:
        return self.error("control record value ends before its message does")

    def bad_varint(self, what: str, at: int, truncated: bool) -> CorruptRecordError:
        if truncated:
            return self.truncated(what, 1)
        return self.error("Varint is too long")

    def decode(self, raw: bytes) -> str:
        return java_utf8(raw)


def _jackson(value: Any) -> str:
    """Jackson's compact JSON (``ObjectNode.toString``): no spaces, non-ASCII kept,
    control characters escaped with upper-case hex."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_jackson_str(k)}:{_jackson(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_jackson(v) for v in value) + "]"
    if isinstance(value, str):
        return _jackson_str(value)
    return str(value)


_JACKSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                    "\f": "\\f", "\r": "\\r"}


def _jackson_str(s: str) -> str:
    parts = []
    for ch in s:
        esc = _JACKSON_ESCAPES.get(ch)
        if esc is not None:
            parts.append(esc)
        elif ord(ch) < 0x20:
            parts.append(f"\\u{ord(ch):04X}")
        else:
            parts.append(ch)
    return '"' + "".join(parts) + '"'


def _kraft_record(ctype: ControlRecordType, value: bytes | None, offset: int) -> dict:
    """The control record's value as the field map Kafka's ``*JsonConverter.write`` gives."""
    if value is None:
        raise CorruptRecordError(f"{ctype.name} control record has a null value",
                                 offset=offset)
    r = _ControlValue(value, offset)
    out: dict[str, Any] = {"version": r.int16("version")}
    if ctype == ControlRecordType.SNAPSHOT_HEADER:
        out["lastContainedLogTimestamp"] = r.int64("lastContainedLogTimestamp")
    elif ctype == ControlRecordType.KRAFT_VERSION:
        out["kRaftVersion"] = r.int16("kRaftVersion")
    elif ctype == ControlRecordType.KRAFT_VOTERS:
        voters = []
        for _ in range(r.array_length("voters")):
            voter: dict[str, Any] = {"voterId": r.int32("voterId"),
                                     "voterUuid": kafka_uuid_string(r.uuid("voterUuid"))}
            endpoints = []
            for _ in range(r.array_length("endpoints")):
                endpoint = {"name": r.string("name"), "host": r.string("host"),
                            "port": r.uint16("port")}
                r.tagged_fields("Endpoint")
                endpoints.append(endpoint)
            voter["endpoints"] = endpoints
            feature = {"minSupportedVersion": r.int16("minSupportedVersion"),
                       "maxSupportedVersion": r.int16("maxSupportedVersion")}
            r.tagged_fields("KRaftVersionFeature")
            voter["kRaftVersionFeature"] = feature
            r.tagged_fields("Voter")
            voters.append(voter)
        out["voters"] = voters
    r.tagged_fields(_KRAFT_LABELS[ctype])
    return out


_KRAFT_LABELS = {
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}


def _control_info(record) -> tuple[str, dict]:
    """A control record as Kafka prints it (text) and as a JSON field."""
    parsed = parse_control_record(record)   # validates the key (and a marker's value)
    type_id = _CONTROL_KEY.unpack_from(record.key)[1]
    ctype = parsed.type
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return (f" endTxnMarker: {ctype.name} coordinatorEpoch: {parsed.coordinator_epoch}",
                {"type": ctype.name, "id": type_id,
                 "coordinatorEpoch": parsed.coordinator_epoch})
    label = _KRAFT_LABELS.get(ctype)
    if label is not None:
        data = _kraft_record(ctype, record.value, record.offset)
        return f" {label} {_jackson(data)}", {"type": ctype.name, "id": type_id, "data": data}
    return f" controlType: {ctype.name}({type_id})", {"type": ctype.name, "id": type_id}


# -- batches as Kafka's FileChannelRecordBatch sees them ----------------------------------------


class _RawBatch:
    """One entry's header fields read straight from its bytes, as Kafka's
    ``FileChannelRecordBatch`` reads them, for the entries the kernels' batch objects do
    not take (a magic byte above 2, a v2 entry shorter than its header) or that are too
    large to read whole. Has the attributes :func:`kafkastore.cli.batch_line` uses."""

    partition_leader_epoch = producer_id = producer_epoch = base_sequence = -1
    last_sequence = -1
    record_count = None
    is_transactional = is_control = has_delete_horizon = False
    delete_horizon_ms = None

    def __init__(self, fr: FileRecords, h: BatchHeader) -> None:
        self.position = h.position
        self.size_in_bytes = h.size
        magic = _signed8(h.magic)
        self.magic = magic
        # Kafka reads a whole header even past a short entry's end (from the next entry)
        want = _V2_HEADER_SIZE if magic >= 2 else _LEGACY_HEADER_V1 if magic else 18
        head = fr.read(h.position, want)
        if len(head) < want:
            raise CorruptRecordError(
                f"Failed to read record batch header at position {h.position}: the file "
                f"ends {len(head)} bytes into it", position=h.position)
        if magic < 0:
            # LegacyRecord.headerSize(magic) throws for anything but 0 and 1
            raise CorruptRecordError(f"Invalid magic: {magic}", position=h.position,
                                     offset=h.base_offset)
        if magic >= 2:
            (self.base_offset, _, self.partition_leader_epoch, _, self.crc, attributes,
             delta, base_ts, self.max_timestamp, self.producer_id, self.producer_epoch,
             self.base_sequence, self.record_count) = _V2_HEADER.unpack(head)
            self.last_offset = _wrap64(self.base_offset + delta)
            self.last_sequence = (-1 if self.base_sequence == -1 else
                                  _increment_sequence(self.base_sequence, delta))
            self.is_transactional = bool(attributes & 0x10)
            self.is_control = bool(attributes & 0x20)
            self.has_delete_horizon = bool(attributes & 0x40)
            self.delete_horizon_ms = base_ts if self.has_delete_horizon else None
            self.timestamp_type = TimestampType((attributes >> 3) & 1)
            crc_from = 21
        else:
            _, _, self.crc, _, attributes = _LEGACY_PREFIX.unpack_from(head)
            self.base_offset = self.last_offset = h.base_offset
            if magic == 0:
                self.timestamp_type = TimestampType.NO_TIMESTAMP_TYPE
                self.max_timestamp = -1
            else:
                self.timestamp_type = TimestampType((attributes >> 3) & 1)
                self.max_timestamp = _I64.unpack_from(head, 18)[0]
            crc_from = 16
        self.attributes = attributes & 0xFF
        self._valid = self._check_crc(fr, h, crc_from) if (
            magic < 2 or h.size >= _V2_HEADER_SIZE) else False

    def _check_crc(self, fr: FileRecords, h: BatchHeader, start: int) -> bool:
        crc_fn = crc32c.crc32c if self.magic >= 2 else zlib.crc32
        value = 0
        pos, end = h.position + start, h.position + h.size
        while pos < end:
            chunk = fr.read(pos, min(_STREAM_WINDOW, end - pos))
            if not chunk:
                raise CorruptRecordError(f"file ended inside the batch at position "
                                         f"{h.position}", position=h.position)
            value = crc_fn(chunk, value)
            pos += len(chunk)
        return value == self.crc

    def is_valid(self) -> bool:
        return self._valid


def _legacy_meta(entry) -> tuple[int, bool, int, int]:
    """``(crc, isValid, keySize, valueSize)`` of one legacy message, sizes as stored."""
    view = memoryview(entry)
    _, _, crc, magic, _ = _LEGACY_PREFIX.unpack_from(view)
    key_at = 18 if magic == 0 else 26
    key_size = _I32.unpack_from(view, key_at)[0]
    value_size = _I32.unpack_from(view, key_at + 4 + max(key_size, 0))[0]
    return crc, zlib.crc32(view[16:]) == crc, key_size, value_size


def batch_line(batch, position: int | None = None) -> str:
    """One batch as ``kafka-dump-log.sh`` prints it: ``DumpLogSegments.printBatchLevel``.

    Magic 2 (and, as in Kafka, any magic above)::

        baseOffset: B lastOffset: L count: N baseSequence: S lastSequence: S2 producerId: P
        producerEpoch: E partitionLeaderEpoch: PLE isTransactional: false isControl: false
        deleteHorizonMs: OptionalLong.empty position: POS CreateTime: T size: BYTES magic: 2
        compresscodec: none crc: CRC isvalid: true

    (one line), and magic 0/1: ``offset: L position: ... isvalid: ...``, the same tail.
    ``size`` includes the 12-byte prefix, ``crc`` is unsigned, the timestamp label is the
    batch's timestamp type (``NoTimestampType`` for magic 0, timestamp -1), and the codec is
    named from the attribute bits (a legacy zstd id prints ``zstd``, as in Kafka).

    ``batch`` is any object with a batch's header attributes: a
    :class:`~kafkastore.records.RecordBatch` or
    :class:`~kafkastore.records.LegacyRecordBatch`. ``position`` (Kafka prints the sum of
    the sizes of the batches before it) defaults to ``batch.position``. Raises
    :class:`ValueError` for a codec id above 4 (Kafka: "Unknown compression type id").
    """
    if position is None:
        position = batch.position
    if batch.magic >= 2:
        horizon = (f"OptionalLong[{batch.delete_horizon_ms}]"
                   if batch.has_delete_horizon else "OptionalLong.empty")
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
            f"count: {batch.record_count} baseSequence: {batch.base_sequence} "
            f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
            f"producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {'true' if batch.is_transactional else 'false'} "
            f"isControl: {'true' if batch.is_control else 'false'} deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    codec = CompressionType(batch.attributes & 0x07).name.lower()
    return (
        f"{head} position: {position} {batch.timestamp_type.label}: "
        f"{batch.max_timestamp} size: {batch.size_in_bytes} magic: {batch.magic} "
        f"compresscodec: {codec} crc: {batch.crc} "
        f"isvalid: {'true' if batch.is_valid() else 'false'}"
    )


# -- output ------------------------------------------------------------------------------------


class _OutputFailed(Exception):
    """Writing ``out``/``err`` failed: not a problem of the file being dumped."""


class _Emitter:
    """Where the dump's facts go: Kafka's text (:class:`_TextEmitter`) or JSON lines."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out, self._err = out, err

    def _write(self, stream: TextIO, text: str) -> None:
        try:
            stream.write(text)
        except OSError as exc:
            raise _OutputFailed() from exc

    def error(self, file: str, exc: BaseException) -> None:
        self._write(self._err, f"kafkastore: {file}: {_reason(exc, file)}\n")

    def usage_error(self, message: str) -> None:
        self._write(self._err, f"kafkastore: {message}\n")


def _reason(exc: BaseException, file: str) -> str:
    if isinstance(exc, KafkaStoreError):
        where = []
        if exc.path is not None and exc.path not in (file, _java_path(file)):
            where.append(exc.path)
        if exc.position is not None:
            where.append(f"position {exc.position}")
        if exc.offset is not None:
            where.append(f"offset {exc.offset}")
        return exc.message + (f" ({', '.join(where)})" if where else "")
    if isinstance(exc, OSError):
        text = exc.strerror or str(exc)
        if exc.filename is not None and exc.filename not in (file, _java_path(file)):
            text += f": {exc.filename}"
        return text
    if isinstance(exc, MemoryError):
        return "out of memory"
    return str(exc) or type(exc).__name__


class _TextEmitter(_Emitter):
    """Kafka's text, line for line."""

    def dumping(self, file: str, kind: str) -> None:
        self._write(self._out, f"Dumping {file}\n")

    def log_start(self, file: str, base_offset: int) -> None:
        self._write(self._out, f"Log starting offset: {base_offset}\n")

    def snapshot_start(self, file: str, end_offset: int | None, epoch: int | None) -> None:
        if end_offset is None:
            self._write(self._out, "KRaft bootstrap snapshot\n")
        else:
            self._write(self._out, f"Snapshot end offset: {end_offset}, epoch: {epoch}\n")

    def batch(self, file: str, batch, position: int) -> None:
        self._write(self._out, batch_line(batch, position) + "\n")

    def record(self, file: str, batch_position: int, fields: dict, line: str) -> None:
        self._write(self._out, line + "\n")

    def log_end(self, file: str, valid: int, size: int, batches: int) -> None:
        pass

    def invalid_bytes(self, name: str, n: int) -> None:
        self._write(self._out, f"Found {n} invalid bytes at the end of {name}\n")

    def index_empty(self, file: str) -> None:
        self._write(self._out, f"{file} is empty.\n")

    def sanity_passed(self, file: str) -> None:
        self._write(self._out, f"{file} passed sanity check.\n")

    def offset_entry(self, file: str, slot: int, offset: int, position: int) -> None:
        self._write(self._out, f"offset: {offset} position: {position}\n")

    def time_entry(self, file: str, slot: int, timestamp: int, offset: int) -> None:
        self._write(self._out, f"timestamp: {timestamp} offset: {offset}\n")

    def unknown(self, file: str) -> None:
        self._write(self._err, f"Ignoring unknown file {file}\n")

    def not_supported(self, file: str, reason: str) -> None:
        self._write(self._err, f"kafkastore: {file}: {reason}\n")

    def aborted_txn(self, file: str, txn) -> None:
        self._write(self._out, f"version: {txn.version} producerId: {txn.producer_id} "
                               f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
                               f"lastStableOffset: {txn.last_stable_offset}\n")

    def producer(self, file: str, entry) -> None:
        txn = entry.current_txn_first_offset
        line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: "
                f"{'OptionalLong.empty' if txn is None else f'OptionalLong[{txn}]'} "
                f"lastTimestamp: {entry.last_timestamp} ")
        if entry.batch_metadata:
            m = entry.batch_metadata[0]
            line += (f"firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: "
                     f"{m.last_offset} offsetDelta: {m.offset_delta} timestamp: {m.timestamp}")
        self._write(self._out, line + "\n")

    def corrupt_snapshot(self, file: str, exc) -> None:
        self._write(self._err, exc.message + "\n")

    #: Per report kind: the header line (``{path}`` filled in) and each pair's line.
    _REPORT_LINES = {
        "offset_mismatches": ("Mismatches in :{path}", "  Index offset: {}, log offset: {}"),
        "time_mismatches": ("Found timestamp mismatch in :{path}",
                            "  Index timestamp: {}, log timestamp: {}"),
        "time_out_of_order": ("Found out of order timestamp in :{path}",
                              "  Index timestamp: {}, Previously indexed timestamp: {}"),
        "time_not_found": ("The following indexed offsets are not found in the log.",
                           "Indexed offset: {}, found log offset: {}"),
        "non_consecutive": ("Non-consecutive offsets in {path}", "  {} is followed by {}"),
    }

    def reports(self, r: _Reports) -> None:
        lines = []
        for kind, path, pairs in r.in_kafka_order():
            header, line = self._REPORT_LINES[kind]
            lines.append(header.format(path=path))
            lines.extend(line.format(a, b) for a, b in pairs)
        if lines:
            self._write(self._err, "\n".join(lines) + "\n")


def _batch_json(batch, position: int) -> dict:
    d: dict[str, Any] = {"position": position, "magic": batch.magic}
    if batch.magic >= 2:
        d.update(baseOffset=batch.base_offset, lastOffset=batch.last_offset,
                 count=batch.record_count, baseSequence=batch.base_sequence,
                 lastSequence=batch.last_sequence, producerId=batch.producer_id,
                 producerEpoch=batch.producer_epoch,
                 partitionLeaderEpoch=batch.partition_leader_epoch,
                 isTransactional=bool(batch.is_transactional),
                 isControl=bool(batch.is_control),
                 deleteHorizonMs=batch.delete_horizon_ms if batch.has_delete_horizon else None)
    else:
        d["lastOffset"] = batch.last_offset
    d.update(timestampType=batch.timestamp_type.label, maxTimestamp=batch.max_timestamp,
             size=batch.size_in_bytes,
             compression=CompressionType(batch.attributes & 0x07).name.lower(),
             crc=batch.crc, isValid=bool(batch.is_valid()))
    return d


def _json_bytes(data: bytes | None) -> tuple[str | None, bool]:
    if data is None:
        return None, False
    try:
        return bytes(data).decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


class _JsonEmitter(_Emitter):
    """One JSON object per line (schema in the module docstring)."""

    def _obj(self, obj_type: str, file: str, **fields) -> None:
        obj = {"type": obj_type, "file": file}
        obj.update(fields)
        self._write(self._out, json.dumps(obj, ensure_ascii=False) + "\n")

    def dumping(self, file: str, kind: str) -> None:
        self._obj("file", file, kind=kind)

    def log_start(self, file: str, base_offset: int) -> None:
        self._obj("log_start", file, baseOffset=base_offset)

    def snapshot_start(self, file: str, end_offset: int | None, epoch: int | None) -> None:
        if end_offset is None:
            self._obj("log_start", file, bootstrap=True)
        else:
            self._obj("log_start", file, snapshotEndOffset=end_offset, snapshotEpoch=epoch)

    def batch(self, file: str, batch, position: int) -> None:
        self._obj("batch", file, **_batch_json(batch, position))

    def record(self, file: str, batch_position: int, fields: dict, line: str) -> None:
        self._obj("record", file, batchPosition=batch_position, **fields)

    def log_end(self, file: str, valid: int, size: int, batches: int) -> None:
        self._obj("log_end", file, validBytes=valid, sizeInBytes=size, batches=batches)

    def invalid_bytes(self, name: str, n: int) -> None:
        self._obj("problem", name, kind="invalid_bytes", bytes=n)

    def index_empty(self, file: str) -> None:
        self._obj("index_empty", file)

    def sanity_passed(self, file: str) -> None:
        self._obj("sanity_check", file, passed=True)

    def offset_entry(self, file: str, slot: int, offset: int, position: int) -> None:
        self._obj("index_entry", file, kind="offset_index", slot=slot, offset=offset,
                  position=position)

    def time_entry(self, file: str, slot: int, timestamp: int, offset: int) -> None:
        self._obj("index_entry", file, kind="time_index", slot=slot, timestamp=timestamp,
                  offset=offset)

    def unknown(self, file: str) -> None:
        self._obj("problem", file, kind="unknown_file")

    def not_supported(self, file: str, reason: str) -> None:
        self._obj("problem", file, kind="not_supported", reason=reason)

    def aborted_txn(self, file: str, txn) -> None:
        self._obj("aborted_txn", file, version=txn.version, producerId=txn.producer_id,
                  firstOffset=txn.first_offset, lastOffset=txn.last_offset,
                  lastStableOffset=txn.last_stable_offset)

    def producer(self, file: str, entry) -> None:
        batch = None
        if entry.batch_metadata:
            m = entry.batch_metadata[0]
            batch = {"firstSequence": m.first_seq, "lastSequence": m.last_seq,
                     "lastOffset": m.last_offset, "offsetDelta": m.offset_delta,
                     "timestamp": m.timestamp}
        self._obj("producer", file, producerId=entry.producer_id,
                  producerEpoch=entry.producer_epoch, coordinatorEpoch=entry.coordinator_epoch,
                  currentTxnFirstOffset=entry.current_txn_first_offset,
                  lastTimestamp=entry.last_timestamp, batch=batch)

    def corrupt_snapshot(self, file: str, exc) -> None:
        self._obj("problem", file, kind="corrupt_snapshot", message=exc.message)

    def error(self, file: str, exc: BaseException) -> None:
        super().error(file, exc)
        if isinstance(exc, KafkaStoreError):
            where = {k: v for k, v in (("position", exc.position), ("offset", exc.offset))
                     if v is not None}
            self._obj("error", file, error=type(exc).__name__, message=exc.message, **where)
        else:
            self._obj("error", file, error=type(exc).__name__, message=_reason(exc, file))

    #: Per report kind: the JSON ``kind`` and the names of the pair's two fields.
    _REPORT_FIELDS = {
        "offset_mismatches": ("offset_index_mismatch", "indexOffset", "logOffset"),
        "time_mismatches": ("time_index_mismatch", "indexTimestamp", "logTimestamp"),
        "time_out_of_order": ("time_index_out_of_order", "indexTimestamp",
                              "previousTimestamp"),
        "time_not_found": ("time_index_offset_not_found", "indexOffset", "logOffset"),
        "non_consecutive": ("non_consecutive_offsets", "first", "second"),
    }

    def reports(self, r: _Reports) -> None:
        for kind, path, pairs in r.in_kafka_order():
            name, first, second = self._REPORT_FIELDS[kind]
            for a, b in pairs:
                self._obj("problem", path, kind=name, **{first: a, second: b})


class _Reports:
    """The problems Kafka accumulates per file and prints after the last one (each list
    in the order found; the emitters reverse the ones Kafka prepends)."""

    def __init__(self) -> None:
        self.offset_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    @staticmethod
    def add(table: dict[str, list[tuple[int, int]]], path: str, a: int, b: int) -> None:
        table.setdefault(path, []).append((a, b))

    #: Kafka prepends to these two lists (Scala ``::``), so it prints them newest first.
    _PREPENDED = ("offset_mismatches", "non_consecutive")

    def in_kafka_order(self):
        """``(kind, path, pairs)`` in the order Kafka prints its reports: kind by kind
        (the attribute names above), file by file, each kind's pairs as Kafka lists them."""
        for kind in ("offset_mismatches", "time_mismatches", "time_out_of_order",
                     "time_not_found", "non_consecutive"):
            for path, pairs in getattr(self, kind).items():
                yield kind, path, pairs[::-1] if kind in self._PREPENDED else pairs


# -- the dump ----------------------------------------------------------------------------------

_KINDS = {".log": "log", ".checkpoint": "snapshot", ".index": "offset_index",
          ".timeindex": "time_index", ".txnindex": "txn_index", ".snapshot": "producer_snapshot"}
_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"


def _open_log(path: str) -> FileRecords:
    """The ``.log`` opened read-only (Kafka's ``FileRecords.open(file, false)``)."""
    return FileRecords.open(path, file_already_exists=True, mutable=False)


def _stat_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class _LocalFiles:
    """Where a plain path's bytes come from: the local file system, as Kafka reads it
    (``pread`` on the ``.log``, the indexes mapped read-only), and how its names print
    (``java.io.File``'s normalisation, absolute paths in the problem reports)."""

    display = staticmethod(_java_path)
    absolute = staticmethod(_java_abs)
    size = staticmethod(_stat_size)

    @staticmethod
    def open_log(path: str, limit: int | None = None) -> FileRecords:
        return _open_log(path)

    @staticmethod
    def file_bytes(path: str) -> bytes:
        """A small file whole (a ``.txnindex``, a ``.snapshot``)."""
        with open(path, "rb") as f:
            return f.read()

    @staticmethod
    def sibling(file: str, name: str) -> str:
        return _java_join(_java_parent(file), name)

    @staticmethod
    def offset_index(file: str, base: int) -> OffsetIndex:
        return OffsetIndex(file, base, writable=False)

    @staticmethod
    def time_index(file: str, base: int) -> TimeIndex:
        return TimeIndex(file, base, writable=False)

    @staticmethod
    def entries(index) -> int:
        return index.entries

    @staticmethod
    def close_index(index) -> None:
        index.close_handler()


class _ReadAhead:
    """A :class:`~kafkastore.storage.RangeReader` with a bounded read-ahead, for the
    dump's sequential walk: a read that misses fetches ``block`` bytes from its position
    (never past ``limit``, the part of the file the dump reads), so the walk's 8 KiB
    header windows and each batch's own read come out of one ranged GET per MiB, not one
    request each. Reads of a block or more go straight to the reader. At most one block
    is held. One thread at a time, as the reader."""

    __slots__ = ("_reader", "path", "size", "_limit", "_block", "_start", "_buf")

    def __init__(self, reader, limit: int | None = None, block: int = 1 << 20) -> None:
        self._reader = reader
        self.path = reader.path
        self.size = reader.size
        self._limit = reader.size if limit is None else min(limit, reader.size)
        self._block = block
        self._start = 0
        self._buf = b""

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.size)
        if position < 0 or position >= end:
            return b""
        start = self._start
        if start <= position and end <= start + len(self._buf):
            return self._buf[position - start:end - start]
        if end - position >= self._block:
            return self._reader.read(position, end - position)
        ahead = max(end, min(position + self._block, self._limit))
        self._buf = self._reader.read(position, ahead - position)
        self._start = position
        return self._buf[:end - position]

    def close(self) -> None:
        self._buf = b""
        self._reader.close()


class _StorageFiles:
    """Where a URI's bytes come from (``s3://``, ``gs://``, ``memory://``, ``file://``
    ...): :mod:`kafkastore.storage`. The ``.log`` is read through
    :class:`~kafkastore.file_records.StorageRecords` (ranged reads of what the dump
    walks, through a 1 MiB read-ahead, never a download of the file); an index, a few MiB at most, is read whole
    and searched through :class:`~kafkastore.index.OffsetIndexView` /
    ``TimeIndexView``, the read-only twins of the mapped indexes. Everything the dump
    parses goes through the same :class:`_Dumper` code as a local file, so the output is
    the same but for the names: a URI prints as it was given, and is its own absolute
    path.

    One storage is opened per directory (the URI up to its last ``/``), with the
    ``options`` given (:func:`kafkastore.storage.open_storage`).
    """

    def __init__(self, options) -> None:
        self.options = dict(options or {})
        self._dirs: dict[str, tuple] = {}

    @staticmethod
    def display(uri: str) -> str:
        return uri

    @staticmethod
    def absolute(uri: str) -> str:
        return uri

    @staticmethod
    def sibling(uri: str, name: str) -> str:
        return uri.rsplit("/", 1)[0] + "/" + name

    def _resolve(self, uri: str):
        """``(storage, path)`` of ``uri``."""
        from kafkastore.storage import open_storage

        parent, _, name = uri.rpartition("/")
        hit = self._dirs.get(parent)
        if hit is None:
            storage, path = open_storage(uri, self.options)
            hit = self._dirs[parent] = (storage, storage.dirname(path))
        storage, directory = hit
        return storage, storage.join(directory, name)

    @staticmethod
    def _missing(uri: str) -> FileNotFoundError:
        # worded as a local file's: the dump's lines differ only in the names
        import errno

        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), uri)

    def size(self, uri: str) -> int:
        try:
            storage, path = self._resolve(uri)
            return storage.size(path)
        except (KafkaStoreError, OSError):
            return 0

    def open_log(self, uri: str, limit: int | None = None) -> FileRecords:
        from kafkastore.errors import StorageFileNotFoundError
        from kafkastore.file_records import StorageRecords

        storage, path = self._resolve(uri)
        try:
            reader = storage.open(path)
        except StorageFileNotFoundError:
            raise self._missing(uri) from None
        return StorageRecords(_ReadAhead(reader, limit), uri)

    def _index_bytes(self, uri: str) -> bytes:
        storage, path = self._resolve(uri)
        data = storage.read_file(path)
        if data is None:
            raise self._missing(uri)
        return data

    file_bytes = _index_bytes

    def offset_index(self, uri: str, base: int):
        from kafkastore.index import OffsetIndexView

        # trusted: every whole entry, as the local file's mapped index counts them (the
        # dump shows a crash's zero padding, and its checks report it)
        return OffsetIndexView(self._index_bytes(uri), base, uri, trusted=True)

    def time_index(self, uri: str, base: int):
        from kafkastore.index import TimeIndexView

        return TimeIndexView(self._index_bytes(uri), base, uri, trusted=True)

    @staticmethod
    def entries(index) -> int:
        return index.entries

    @staticmethod
    def close_index(index) -> None:
        """A view holds bytes, nothing to release."""


class _Dumper:
    def __init__(self, options: DumpOptions, emitter: _Emitter,
                 progress: ProgressCallback | None, storage_options=None) -> None:
        self.opts = options
        self._local = _LocalFiles()
        self._remote: _StorageFiles | None = None
        self._storage_options = storage_options
        self.src = self._local   # where the file being dumped (and its siblings) are read
        self._sizes: dict[str, int] = {}
        self.deep = options.deep_iteration or options.print_data_log
        self.emit = emitter
        self.reports = _Reports()
        self.progress = progress
        self.total = 0
        self.done = 0
        self._reported = 0
        self.failed = False

    # progress

    def _advance(self, n: int, force: bool = False) -> None:
        self.done += n
        if self.progress is not None and (force or self.done - self._reported >= _PROGRESS_STEP):
            self._reported = self.done
            self.progress(min(self.done, self.total), self.total)

    def _source(self, arg: str):
        """The local file system for a plain path, the storage seam for a URI."""
        from kafkastore.storage import split_uri

        if not split_uri(arg)[0]:
            return self._local
        if self._remote is None:
            self._remote = _StorageFiles(self._storage_options)
        return self._remote

    def _work(self, path: str) -> int:
        kind = _KINDS.get(os.path.splitext(path)[1])
        if kind not in ("log", "snapshot", "offset_index", "time_index"):
            return 0
        size = self._sizes.get(path)
        if size is None:   # asked twice per file: once a request is enough for a URI
            size = self._sizes[path] = self._source(path).size(path)
        if kind in ("log", "snapshot"):
            return size if self.opts.max_bytes is None else min(size, self.opts.max_bytes)
        return size

    # the run

    def run(self, files: list[str]) -> int:
        opts = self.opts
        for name, value in (("max_bytes", opts.max_bytes),
                            ("max_message_size", opts.max_message_size)):
            if value is not None and not 0 <= value <= _INT32_MAX:
                self.emit.usage_error(f"invalid {name}: {value} (it must be between 0 "
                                      f"and {_INT32_MAX})")
                return EXIT_USAGE
        self.total = sum(self._work(f) for f in files)
        for arg in files:
            self.src = self._source(arg)
            file = self.src.display(arg)
            name = file.rsplit("/", 1)[-1]
            dot = name.rfind(".")
            kind = _KINDS.get(name[dot:]) if dot >= 0 else None
            self.emit.dumping(file, kind or "unknown")
            start = self.done
            try:
                if kind in ("log", "snapshot"):
                    self._dump_log(file, name, kind)
                elif kind == "offset_index":
                    self._dump_index(file, name)
                elif kind == "time_index":
                    self._dump_time_index(file, name)
                elif kind == "txn_index":
                    self._dump_txn_index(file, name)
                elif kind == "producer_snapshot":
                    self._dump_producer_snapshot(file)
                else:
                    self.emit.unknown(file)
            except (KafkaStoreError, OSError, ValueError, MemoryError) as exc:
                self.failed = True
                self.emit.error(file, exc)
            # whatever was skipped counts as done
            self._advance(max(0, start + self._work(arg) - self.done), force=True)
        self.emit.reports(self.reports)
        return EXIT_FILE_ERROR if self.failed else EXIT_OK

    # .txnindex, .snapshot

    def _dump_txn_index(self, file: str, name: str) -> None:
        _parse_long(name.split(".")[0], file)   # Kafka's offsetFromFile
        for txn in parse_aborted_txns(self.src.file_bytes(file), file):
            self.emit.aborted_txn(file, txn)

    def _dump_producer_snapshot(self, file: str) -> None:
        data = self.src.file_bytes(file)
        try:
            entries = parse_snapshot(data, file)
        except CorruptSnapshotError as exc:
            self.emit.corrupt_snapshot(file, exc)   # Kafka: the message on stderr
            return
        for entry in entries:
            self.emit.producer(file, entry)

    # .log

    def _dump_log(self, file: str, name: str, kind: str) -> None:
        if kind == "log":
            self.emit.log_start(file, _parse_long(name.split(".")[0], file))
        elif name == _BOOTSTRAP_SNAPSHOT:
            self.emit.snapshot_start(file, None, None)
        else:
            snapshot = snapshot_id_from_file_name(name)
            if snapshot is None or snapshot[0] > _INT64_MAX or snapshot[1] > _INT32_MAX:
                raise KafkaStoreError(f"not a snapshot file name: {name}", path=file)
            self.emit.snapshot_start(file, *snapshot)
        fr = self.src.open_log(file, self.opts.max_bytes)
        try:
            max_bytes = self.opts.max_bytes
            limit = fr.size if max_bytes is None else min(fr.size, max_bytes)
            valid = 0
            batches = 0
            last_offset = -1
            abs_path = self.src.absolute(file)
            for h in fr.walk(0, limit):
                shown, batch = self._entry(fr, h, self.deep)
                self.emit.batch(file, shown, valid)
                if self.deep:
                    last_offset = self._records(file, abs_path, batch, h, valid, last_offset)
                valid += h.size
                batches += 1
                self._advance(h.size)
            self.emit.log_end(file, valid, limit, batches)
            trailing = limit - valid
            if trailing > 0 and (max_bytes is None or max_bytes == KAFKA_MAX_BYTES_DEFAULT):
                self.emit.invalid_bytes(name, trailing)
        finally:
            fr.close_handlers()

    def _entry(self, fr: FileRecords, h: BatchHeader, records: bool):
        """``(batch to print, batch to iterate or None)`` for the entry ``h``."""
        magic = _signed8(h.magic)
        if not records and h.size > _STREAM_THRESHOLD:
            shown = _RawBatch(fr, h)
            self._check_codec(shown)
            return shown, None
        data = fr.read(h.position, h.size)
        if len(data) < h.size:
            raise CorruptRecordError(f"file ended inside the batch at position {h.position}",
                                     position=h.position)
        batch = None
        try:
            if 0 <= magic <= 2:
                batch = read_batch(data, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES)
        except CorruptRecordError:
            batch = None
        if batch is None:
            # Kafka prints what the kernels refuse: read the header as Kafka does
            shown = _RawBatch(fr, h)
            self._check_codec(shown)
            if not records:
                return shown, None
            return shown, self._iterable(data, h, shown)
        self._check_codec(batch)
        return batch, batch

    @staticmethod
    def _check_codec(batch) -> None:
        codec = batch.attributes & 0x07
        if codec > 4:
            raise UnsupportedCompressionError(f"Unknown compression type id: {codec}",
                                              position=batch.position)

    @staticmethod
    def _iterable(data: bytes, h: BatchHeader, shown: _RawBatch):
        """A batch object to iterate for an entry the kernels refused as it is."""
        if shown.magic > 2 and h.size >= _V2_HEADER_SIZE:
            # Kafka reads any magic above 2 as a v2 batch; the magic byte is not covered
            # by the CRC, so the batch with magic 2 written in is the same batch
            patched = bytearray(data)
            patched[16] = 2
            return read_batch(bytes(patched))
        if shown.magic >= 2:
            raise CorruptRecordError(
                f"Record batch size {h.size} is smaller than the minimum batch overhead "
                f"({_V2_HEADER_SIZE}): it has no records to read", position=h.position,
                offset=h.base_offset)
        # a legacy message the kernel refused: read it again for its reason
        return read_batch(data)

    def _records(self, file: str, abs_path: str, batch, h: BatchHeader, position: int,
                 last_offset: int) -> int:
        """Print the records of ``batch``; return the last offset seen (for the gaps)."""
        opts = self.opts
        skip = opts.skip_record_metadata
        show_data = opts.print_data_log and not batch.is_control
        magic = batch.magic
        label = batch.timestamp_type.label
        is_control = batch.is_control
        base_offset = batch.base_offset if magic >= 2 else 0
        base_sequence = batch.base_sequence if magic >= 2 else -1
        json_mode = opts.json
        try:
            for rec, legacy in self._iter_records(batch, magic):
                offset = rec.offset
                if last_offset != -1 and offset != last_offset + 1:
                    self.reports.add(self.reports.non_consecutive, abs_path, last_offset, offset)
                last_offset = offset
                parts = []
                fields: dict[str, Any] = {"offset": offset}
                prefix = "| "
                if not skip:
                    if legacy is not None:
                        crc, valid, key_size, value_size = legacy
                    else:
                        key_size = -1 if rec.key is None else len(rec.key)
                        value_size = -1 if rec.value is None else len(rec.value)
                    parts.append(f"| offset: {offset} {label}: {rec.timestamp} "
                                 f"keySize: {key_size} valueSize: {value_size}")
                    prefix = " "
                    fields.update(timestampType=label, timestamp=rec.timestamp,
                                  keySize=key_size, valueSize=value_size)
                    if magic >= 2:
                        sequence = (_increment_sequence(base_sequence,
                                                        _wrap32(offset - base_offset))
                                    if base_sequence >= 0 else -1)
                        keys = [java_utf8(k.encode("utf-8", "surrogateescape"))
                                for k, _ in rec.headers]
                        parts.append(f" sequence: {sequence} headerKeys: [{','.join(keys)}]")
                        fields.update(sequence=sequence, headerKeys=keys)
                    if legacy is not None:
                        parts.append(f" isValid: {'true' if valid else 'false'} crc: {crc}}}")
                        fields.update(isValid=valid, crc=crc)
                    if is_control:
                        text, control = _control_info(rec)
                        parts.append(text)
                        fields["control"] = control
                if show_data:
                    key, value = rec.key, rec.value
                    if json_mode:
                        k, kb = _json_bytes(key)
                        v, vb = _json_bytes(value)
                        fields.update(key=k, keyBase64=kb, value=v, valueBase64=vb)
                        if magic >= 2:
                            headers = []
                            for hk, hv in rec.headers:
                                s, b64 = _json_bytes(hv)
                                headers.append({"key": java_utf8(
                                    hk.encode("utf-8", "surrogateescape")),
                                    "value": s, "valueBase64": b64})
                            fields["headers"] = headers
                    else:
                        if key is not None:
                            parts.append(f"{prefix}key: {java_utf8(key)}")
                        if value is not None:
                            parts.append(f" payload: {java_utf8(value)}")
                self.emit.record(file, position, fields, "".join(parts))
        except KafkaStoreError as exc:
            raise exc.with_context(position_base=h.position) from None
        return last_offset

    @staticmethod
    def _iter_records(batch, magic: int) -> Iterator[tuple[Any, tuple | None]]:
        """Each record with, for a legacy message, the inner message's stored
        ``(crc, isValid, keySize, valueSize)`` (Kafka prints the inner message's own)."""
        if magic >= 2:
            for rec in batch:
                yield rec, None
            return
        entry = batch.to_bytes()
        if batch.attributes & 0x07 == 0:
            for rec in batch:
                yield rec, _legacy_meta(entry)
            return
        records = list(batch)   # validates the wrapper and computes absolute offsets
        payload = batch.payload()
        inner = compression.decompress(batch.attributes & 0x07, payload,
                                       max_size=DEFAULT_MAX_DECOMPRESSED_BYTES, magic=magic)
        metas = [_legacy_meta(m.to_bytes()) for m in iter_batches(inner, validate=False)]
        if len(metas) != len(records):
            raise CorruptRecordError("compressed message holds a partial inner message",
                                     position=0, offset=batch.last_offset)
        yield from zip(records, metas, strict=False)

    # .index

    def _index_paths(self, file: str, name: str) -> tuple[int, str, str]:
        prefix = name.split(".")[0]
        base = _parse_long(prefix, file)
        sibling = self.src.sibling
        return base, sibling(file, prefix + ".log"), sibling(file, prefix + ".index")

    def _dump_index(self, file: str, name: str) -> None:
        base, log_path, _ = self._index_paths(file, name)
        src = self.src
        fr = src.open_log(log_path)
        index = None
        try:
            index = src.offset_index(file, base)
            entries = src.entries(index)
            if entries == 0:
                self.emit.index_empty(file)
                return
            if self.opts.index_sanity_check:
                index.sanity_check(full=False)
                self.emit.sanity_passed(file)
                return
            abs_path = src.absolute(file)
            max_message_size = self.opts.max_message_size
            for i in range(entries):
                offset, position = index.entry(i)
                if offset == base and i > 0:
                    return   # zero padding of an index a crash left untrimmed
                found = self._first_last_offset(fr, position, max_message_size, i, offset)
                if found != offset:
                    self.reports.add(self.reports.offset_mismatches, abs_path, offset, found)
                if not self.opts.verify_index_only:
                    self.emit.offset_entry(file, i, offset, position)
                self._advance(8)
        finally:
            if index is not None:
                src.close_index(index)
            fr.close_handlers()

    def _first_last_offset(self, fr: FileRecords, position: int, size: int, slot: int,
                           offset: int) -> int:
        """The last offset of the first batch in the ``size`` bytes at ``position``."""
        if position < 0 or position > fr.size:
            raise CorruptIndexError(
                f"index entry {slot} (offset {offset}) points at position {position}, "
                f"outside the log ({fr.size} bytes)")
        for h in fr.walk(position, position + size):
            return self._kafka_last_offset(fr, h)
        raise CorruptIndexError(
            f"index entry {slot} (offset {offset}) points at position {position}, where no "
            f"complete batch starts within --max-message-size ({size}) bytes")

    @staticmethod
    def _kafka_last_offset(fr: FileRecords, h: BatchHeader) -> int:
        """``FileChannelRecordBatch.lastOffset``: a legacy entry's offset field, else the v2
        header's baseOffset + lastOffsetDelta (read past a short entry, as Kafka does)."""
        if _signed8(h.magic) < 2:
            return h.base_offset
        if h.size >= _V2_HEADER_SIZE:
            return h.last_offset
        return _RawBatch(fr, h).last_offset

    # .timeindex

    def _dump_time_index(self, file: str, name: str) -> None:
        base, log_path, index_path = self._index_paths(file, name)
        src = self.src
        fr = src.open_log(log_path)
        index = time_index = None
        try:
            index = src.offset_index(index_path, base)
            time_index = src.time_index(file, base)
            if self.opts.index_sanity_check:
                time_index.sanity_check(full=False)
                self.emit.sanity_passed(file)
                return
            abs_path = src.absolute(file)
            reports = self.reports
            prev_timestamp = -1
            for i in range(src.entries(time_index)):
                timestamp, offset = time_index.entry(i)
                if offset == base and i > 0:
                    return   # zero padding
                position = index.lookup(offset).position
                if position < 0 or position > fr.size:
                    raise CorruptIndexError(
                        f"offset index entry for offset {offset} points at position "
                        f"{position}, outside the log ({fr.size} bytes)")
                found = None
                for h in fr.walk(position):
                    last = self._kafka_last_offset(fr, h)
                    if last >= offset:
                        found = (h, last)
                        break
                if found is None:
                    reports.add(reports.time_not_found, abs_path, offset, -1)
                elif found[1] != offset:
                    reports.add(reports.time_not_found, abs_path, offset, found[1])
                else:
                    h = found[0]
                    _, batch = self._entry(fr, h, True)
                    max_timestamp = -1
                    try:
                        for rec, _ in self._iter_records(batch, batch.magic):
                            max_timestamp = max(max_timestamp, rec.timestamp)
                    except KafkaStoreError as exc:
                        raise exc.with_context(position_base=h.position) from None
                    if max_timestamp != timestamp:
                        reports.add(reports.time_mismatches, abs_path, timestamp, max_timestamp)
                    if prev_timestamp >= timestamp:
                        reports.add(reports.time_out_of_order, abs_path, timestamp,
                                    prev_timestamp)
                if not self.opts.verify_index_only:
                    self.emit.time_entry(file, i, timestamp, offset)
                prev_timestamp = timestamp
                self._advance(12)
        finally:
            for ix in (time_index, index):
                if ix is not None:
                    src.close_index(ix)
            fr.close_handlers()
