"""Kafka record batches: read, scan, decode to columns, and write.

Pure-Python twin of ``kafkastore/_ext/record_batch.pyx``: the same names,
signatures, results and errors. It is the readable reference and the oracle
the compiled kernel is tested against.

This module is the kernel's face (what ``kafkastore._kernels`` imports) and
the documentation of the formats below; the code lives in one module per
Kafka class, listed so that each imports only modules above it (the builder
also takes its varint writers from ``varint``):

``reader``                layout constants, big-endian field layouts, the
                          bounded varint reader, Java int/long arithmetic,
                          the codec check and the decompressor hook
``default_record``        ``DefaultRecord``: the one v2 record parser
                          (also the cleaner's), ``Record``, header decoding
``default_record_batch``  ``DefaultRecordBatch``: ``RecordBatch``
``legacy_record``         ``LegacyRecord`` and wrappers: ``LegacyRecordBatch``
``batch_scan``            ``read_batch``, ``iter_batches``, ``scan_batches``
``record_columns``        ``decode_columns``
``column_pool``           ``set_column_pool_limit``
``memory_records_builder`` ``MemoryRecordsBuilder``: ``encode_batch_v2``

Entries in a log
----------------
A log (a ``.log`` segment, a fetch response, a ``.bin`` vector) is entries
back to back, with no file header and no padding. Every entry starts with::

    offset   int64    0   v2: base offset; v0/v1: the message's (last) offset
    size     int32    8   bytes after these 12 (LOG_OVERHEAD)
    ...              12   v2: partitionLeaderEpoch; v0/v1: crc
    magic    int8    16   0, 1 or 2 -- at byte 16 in every format

so a reader dispatches on byte 16 before parsing anything else.

RecordBatch v2 (magic 2), 61-byte header, big-endian
----------------------------------------------------
::

    baseOffset            int64    0   first offset of the original batch
    batchLength           int32    8   total size - 12
    partitionLeaderEpoch  int32   12   not covered by the CRC
    magic                 int8    16   2
    crc                   uint32  17   CRC-32C of bytes [21, end)
    attributes            int16   21   bits 0-2 codec, 3 timestamp type,
                                       4 transactional, 5 control,
                                       6 delete horizon set
    lastOffsetDelta       int32   23
    baseTimestamp         int64   27   first record's timestamp, or the
                                       delete horizon when bit 6 is set
    maxTimestamp          int64   35
    producerId            int64   43
    producerEpoch         int16   51
    baseSequence          int32   53
    recordsCount          int32   57
    records                       61   raw, or one compressed stream

Record (inside the records section)::

    length          varint   bytes after this field
    attributes      int8     unused
    timestampDelta  varlong
    offsetDelta     varint
    keyLength       varint   negative = null
    key             bytes
    valueLength     varint   negative = null
    value           bytes
    headersCount    varint   must be >= 0
      headerKeyLength   varint  must be >= 0
      headerKey         UTF-8
      headerValueLength varint  negative = null
      headerValue       bytes

Legacy message (magic 0 and 1), after the 12-byte offset and size::

    crc         uint32   0   CRC-32 (IEEE) of bytes [4, end)
    magic       int8     4
    attributes  int8     5   bits 0-2 codec, bit 3 (v1) timestamp type
    timestamp   int64    6   v1 only
    keyLength   int32        negative = null
    key
    valueLength int32        negative = null
    value

A compressed legacy message (a wrapper) carries a compressed stream of inner
entries as its value. Inner offsets are absolute for v0 and relative
(0..n-1) for v1, where the wrapper's offset is the last inner offset.
"""

from __future__ import annotations

from kafkastore._pure.batch_scan import BatchScan, iter_batches, read_batch, scan_batches
from kafkastore._pure.column_pool import _column_pool_retained as _column_pool_retained
from kafkastore._pure.column_pool import set_column_pool_limit
from kafkastore._pure.default_record import Record
from kafkastore._pure.default_record_batch import RecordBatch
from kafkastore._pure.legacy_record import LegacyRecordBatch
from kafkastore._pure.memory_records_builder import encode_batch_v2
from kafkastore._pure.reader import DEFAULT_MAX_DECOMPRESSED_BYTES, set_decompressor
from kafkastore._pure.record_columns import decode_columns

__all__ = [
    "Record",
    "RecordBatch",
    "LegacyRecordBatch",
    "BatchScan",
    "iter_batches",
    "read_batch",
    "scan_batches",
    "decode_columns",
    "encode_batch_v2",
    "set_decompressor",
    "set_column_pool_limit",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
]
