"""Where the dump's facts go: Kafka's text or JSON lines (:mod:`kafkastore.dump`'s schema).

:class:`TextEmitter` writes ``kafka-dump-log.sh``'s lines: the batch line is
:func:`batch_line` (``DumpLogSegments.printBatchLevel``), record lines come ready-made from
the dumper (they interleave Kafka's quirks with the record's fields), and the problem
reports Kafka prints after the last file (:class:`Reports`) go to ``err`` in Kafka's
order. :class:`JsonEmitter` writes the same facts as one JSON object per line. Both write
each fact as it is found (nothing is buffered beyond the stream's own buffer), and a
failed write to ``out`` or ``err`` raises :class:`OutputFailed`, which the dump turns
back into the stream's own error (a closed pipe is not a problem of the file dumped).

One emitter serves one dump, from one thread.
"""

from __future__ import annotations

import base64
import json
from typing import Any, TextIO

from kafkastore.batch_header import CODEC_MASK
from kafkastore.dump.java_format import java_path
from kafkastore.errors import KafkaStoreError
from kafkastore.types import CompressionType

__all__ = [
    "Emitter",
    "JsonEmitter",
    "OutputFailed",
    "Reports",
    "TextEmitter",
    "batch_line",
    "json_bytes",
]


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
    codec = CompressionType(batch.attributes & CODEC_MASK).name.lower()
    return (
        f"{head} position: {position} {batch.timestamp_type.label}: "
        f"{batch.max_timestamp} size: {batch.size_in_bytes} magic: {batch.magic} "
        f"compresscodec: {codec} crc: {batch.crc} "
        f"isvalid: {'true' if batch.is_valid() else 'false'}"
    )


class OutputFailed(Exception):
    """Writing ``out``/``err`` failed: not a problem of the file being dumped."""


class Emitter:
    """Where the dump's facts go: Kafka's text (:class:`TextEmitter`) or JSON lines."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out, self._err = out, err

    def _write(self, stream: TextIO, text: str) -> None:
        try:
            stream.write(text)
        except OSError as exc:
            raise OutputFailed() from exc

    def error(self, file: str, exc: BaseException) -> None:
        self._write(self._err, f"kafkastore: {file}: {_reason(exc, file)}\n")

    def usage_error(self, message: str) -> None:
        self._write(self._err, f"kafkastore: {message}\n")


def _reason(exc: BaseException, file: str) -> str:
    if isinstance(exc, KafkaStoreError):
        where = []
        if exc.path is not None and exc.path not in (file, java_path(file)):
            where.append(exc.path)
        if exc.position is not None:
            where.append(f"position {exc.position}")
        if exc.offset is not None:
            where.append(f"offset {exc.offset}")
        return exc.message + (f" ({', '.join(where)})" if where else "")
    if isinstance(exc, OSError):
        text = exc.strerror or str(exc)
        if exc.filename is not None and exc.filename not in (file, java_path(file)):
            text += f": {exc.filename}"
        return text
    if isinstance(exc, MemoryError):
        return "out of memory"
    return str(exc) or type(exc).__name__


class TextEmitter(Emitter):
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

    def reports(self, r: Reports) -> None:
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
             compression=CompressionType(batch.attributes & CODEC_MASK).name.lower(),
             crc=batch.crc, isValid=bool(batch.is_valid()))
    return d


def json_bytes(data: bytes | None) -> tuple[str | None, bool]:
    if data is None:
        return None, False
    try:
        return bytes(data).decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


class JsonEmitter(Emitter):
    """One JSON object per line (schema in :mod:`kafkastore.dump`)."""

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

    def reports(self, r: Reports) -> None:
        for kind, path, pairs in r.in_kafka_order():
            name, first, second = self._REPORT_FIELDS[kind]
            for a, b in pairs:
                self._obj("problem", path, kind=name, **{first: a, second: b})


class Reports:
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
