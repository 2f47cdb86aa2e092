"""The dump itself: each file walked as ``DumpLogSegments`` walks it, its facts handed to an
emitter (the behaviour, options, output and errors are documented in :mod:`kafkastore.dump`).

:class:`Dumper` runs one :func:`~kafkastore.dump.dump_files` call: it checks the options,
computes the bytes to read for the progress callback, and dumps each file by its suffix
(``.log`` and KRaft ``.checkpoint`` batch by batch and record by record, ``.index`` and
``.timeindex`` entry by entry against their log, ``.txnindex`` and producer ``.snapshot``
whole), collecting the problems Kafka reports after the last file
(:class:`~kafkastore.dump.emitters.Reports`). A file's error ends that file's dump only.
Its parts: :mod:`~kafkastore.dump.sources` (where bytes come from),
:mod:`~kafkastore.dump.raw_batch` (entries the kernels refuse),
:mod:`~kafkastore.dump.control_records` and :mod:`~kafkastore.dump.java_format` (how Kafka
prints values), :mod:`~kafkastore.dump.emitters` (text or JSON).

A :class:`Dumper` serves one call, from one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kafkastore import compression
from kafkastore.batch_header import CODEC_MASK, MAGIC_OFFSET, EntryHeader, increment_sequence
from kafkastore.dump.coordinator_decoders import parse_internal_record
from kafkastore.dump.control_records import control_info
from kafkastore.dump.emitters import Emitter, Reports, json_bytes
from kafkastore.dump.java_format import (
    INT32_MAX,
    INT64_MAX,
    java_utf8,
    parse_long,
    signed8,
    wrap32,
)
from kafkastore.dump.raw_batch import V2_HEADER_SIZE, RawBatch, legacy_meta
from kafkastore.dump.sources import LocalFiles, StorageFiles
from kafkastore.errors import (
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    KafkaStoreError,
    UnsupportedCompressionError,
)
from kafkastore.file_records import FileRecords
from kafkastore.producer_state import parse_snapshot
from kafkastore.records import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    iter_batches,
    read_batch,
)
from kafkastore.segment import snapshot_id_from_file_name
from kafkastore.txn_index import parse_aborted_txns

__all__ = [
    "EXIT_FILE_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "KAFKA_MAX_BYTES_DEFAULT",
    "DumpOptions",
    "Dumper",
    "ProgressCallback",
]

#: Every file was dumped.
EXIT_OK = 0
#: At least one file could not be dumped to the end (see :mod:`kafkastore.dump`).
EXIT_FILE_ERROR = 1
#: Invalid options; nothing was dumped.
EXIT_USAGE = 2

#: Kafka's default for ``--max-bytes`` (``Integer.MAX_VALUE``): with it the trailing
#: invalid bytes of a log are reported.
KAFKA_MAX_BYTES_DEFAULT = (1 << 31) - 1


@dataclass
class DumpOptions:
    """The options of ``kafka-dump-log.sh`` that :func:`~kafkastore.dump.dump_files` understands.

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
        One JSON object per line instead of Kafka's text (schema in :mod:`kafkastore.dump`).
    decoder : str or None
        ``--offsets-decoder`` (``"offsets"``) or ``--transaction-log-decoder``
        (``"transaction-log"``): print each record's key and payload as Kafka's parser
        for that internal topic prints them (implies ``print_data_log``;
        :mod:`kafkastore.dump.coordinator_decoders`).
    """

    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = 5 * 1024 * 1024
    max_bytes: int | None = None
    skip_record_metadata: bool = False
    json: bool = False
    decoder: str | None = None


ProgressCallback = Callable[[int, int], None]


_STREAM_THRESHOLD = 8 << 20  # larger entries are CRC-checked in windows when shallow
_PROGRESS_STEP = 256 << 10

_KINDS = {".log": "log", ".checkpoint": "snapshot", ".index": "offset_index",
          ".timeindex": "time_index", ".txnindex": "txn_index", ".snapshot": "producer_snapshot"}
_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"


class Dumper:
    def __init__(self, options: DumpOptions, emitter: Emitter,
                 progress: ProgressCallback | None, storage_options=None,
                 resolve=None) -> None:
        self.opts = options
        self._local = LocalFiles()
        self._remote: StorageFiles | None = None
        self._storage_options = storage_options
        self._resolve = resolve
        self.src = self._local   # where the file being dumped (and its siblings) are read
        self._sizes: dict[str, int] = {}
        self.deep = options.deep_iteration or options.print_data_log or bool(options.decoder)
        self.emit = emitter
        self.reports = Reports()
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
        """The local file system for a plain path, the storage seam for a URI (and for
        every name when a resolver says where names are)."""
        from kafkastore.storage import split_uri

        if self._resolve is None and not split_uri(arg)[0]:
            return self._local
        if self._remote is None:
            self._remote = StorageFiles(self._storage_options, self._resolve)
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
            if value is not None and not 0 <= value <= INT32_MAX:
                self.emit.usage_error(f"invalid {name}: {value} (it must be between 0 "
                                      f"and {INT32_MAX})")
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
        parse_long(name.split(".")[0], file)   # Kafka's offsetFromFile
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
            self.emit.log_start(file, parse_long(name.split(".")[0], file))
        elif name == _BOOTSTRAP_SNAPSHOT:
            self.emit.snapshot_start(file, None, None)
        else:
            snapshot = snapshot_id_from_file_name(name)
            if snapshot is None or snapshot[0] > INT64_MAX or snapshot[1] > INT32_MAX:
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

    def _entry(self, fr: FileRecords, h: EntryHeader, records: bool):
        """``(batch to print, batch to iterate or None)`` for the entry ``h``."""
        magic = signed8(h.magic)
        if not records and h.size > _STREAM_THRESHOLD:
            shown = RawBatch(fr, h)
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
            shown = RawBatch(fr, h)
            self._check_codec(shown)
            if not records:
                return shown, None
            return shown, self._iterable(data, h, shown)
        self._check_codec(batch)
        return batch, batch

    @staticmethod
    def _check_codec(batch) -> None:
        codec = batch.attributes & CODEC_MASK
        if codec > 4:
            raise UnsupportedCompressionError(f"Unknown compression type id: {codec}",
                                              position=batch.position)

    @staticmethod
    def _iterable(data: bytes, h: EntryHeader, shown: RawBatch):
        """A batch object to iterate for an entry the kernels refused as it is."""
        if shown.magic > 2 and h.size >= V2_HEADER_SIZE:
            # Kafka reads any magic above 2 as a v2 batch; the magic byte is not covered
            # by the CRC, so the batch with magic 2 written in is the same batch
            patched = bytearray(data)
            patched[MAGIC_OFFSET] = 2
            return read_batch(bytes(patched))
        if shown.magic >= 2:
            raise CorruptRecordError(
                f"Record batch size {h.size} is smaller than the minimum batch overhead "
                f"({V2_HEADER_SIZE}): it has no records to read", position=h.position,
                offset=h.base_offset)
        # a legacy message the kernel refused: read it again for its reason
        return read_batch(data)

    def _records(self, file: str, abs_path: str, batch, h: EntryHeader, position: int,
                 last_offset: int) -> int:
        """Print the records of ``batch``; return the last offset seen (for the gaps)."""
        opts = self.opts
        skip = opts.skip_record_metadata
        show_data = (opts.print_data_log or bool(opts.decoder)) and not batch.is_control
        decoder = opts.decoder
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
                        sequence = (increment_sequence(base_sequence,
                                                        wrap32(offset - base_offset))
                                    if base_sequence >= 0 else -1)
                        keys = [java_utf8(k.encode("utf-8", "surrogateescape"))
                                for k, _ in rec.headers]
                        parts.append(f" sequence: {sequence} headerKeys: [{','.join(keys)}]")
                        fields.update(sequence=sequence, headerKeys=keys)
                    if legacy is not None:
                        parts.append(f" isValid: {'true' if valid else 'false'} crc: {crc}}}")
                        fields.update(isValid=valid, crc=crc)
                    if is_control:
                        text, control = control_info(rec)
                        parts.append(text)
                        fields["control"] = control
                if show_data and decoder is not None:
                    # Kafka's DumpLogSegments with a parser: its key and payload texts
                    key_text, payload_text = parse_internal_record(decoder, rec.key,
                                                                   rec.value, offset)
                    if json_mode:
                        fields.update(key=key_text, value=payload_text)
                    else:
                        if key_text is not None:
                            parts.append(f"{prefix}key: {key_text}")
                        if payload_text is not None:
                            parts.append(f" payload: {payload_text}")
                elif show_data:
                    key, value = rec.key, rec.value
                    if json_mode:
                        k, kb = json_bytes(key)
                        v, vb = json_bytes(value)
                        fields.update(key=k, keyBase64=kb, value=v, valueBase64=vb)
                        if magic >= 2:
                            headers = []
                            for hk, hv in rec.headers:
                                s, b64 = json_bytes(hv)
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
        if batch.attributes & CODEC_MASK == 0:
            for rec in batch:
                yield rec, legacy_meta(entry)
            return
        records = list(batch)   # validates the wrapper and computes absolute offsets
        payload = batch.payload()
        inner = compression.decompress(batch.attributes & CODEC_MASK, payload,
                                       max_size=DEFAULT_MAX_DECOMPRESSED_BYTES, magic=magic)
        metas = [legacy_meta(m.to_bytes()) for m in iter_batches(inner, validate=False)]
        if len(metas) != len(records):
            raise CorruptRecordError("compressed message holds a partial inner message",
                                     position=0, offset=batch.last_offset)
        yield from zip(records, metas, strict=False)

    # .index

    def _index_paths(self, file: str, name: str) -> tuple[int, str, str]:
        prefix = name.split(".")[0]
        base = parse_long(prefix, file)
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
    def _kafka_last_offset(fr: FileRecords, h: EntryHeader) -> int:
        """``FileChannelRecordBatch.lastOffset``: a legacy entry's offset field, else the v2
        header's baseOffset + lastOffsetDelta (read past a short entry, as Kafka does)."""
        if signed8(h.magic) < 2:
            return h.base_offset
        if h.size >= V2_HEADER_SIZE:
            return h.last_offset
        return RawBatch(fr, h).last_offset

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
