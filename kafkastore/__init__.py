"""kafkastore: Apache Kafka's local log storage, byte-compatible, for Python.

The public API is re-exported here (``__all__``); see the documentation for the layers
(records, indexes, segments, logs, retention, compaction). Importing this package
imports numpy and the codec packages, never pyspark. The log, segment, manager and
cleaner classes (``Log``, ``LogConfig``, ``LogManager``, ``LogSegment``, ``clean``,
``CleanerConfig``) and the read-only logs are loaded on first use (PEP 562): those
layers would add about 70% to ``import kafkastore`` and to the start of every CLI
command that does not need them. ``from kafkastore import Log`` works as for any other
name; type checkers see the names through the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from kafkastore import errors
from kafkastore._kernels import BACKEND
from kafkastore.errors import (
    CorruptIndexError,
    CorruptRecordError,
    IndexClosedError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidCrcError,
    InvalidOffsetError,
    InvalidTimestampError,
    KafkaStoreError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from kafkastore.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from kafkastore.records import (
    BatchScan,
    ControlRecord,
    LegacyRecordBatch,
    Record,
    RecordBatch,
    RecordColumns,
    decode_columns,
    encode_batch,
    encode_control_batch,
    iter_batches,
    iter_records,
    parse_control_record,
    read_batch,
    scan_batches,
)
from kafkastore.types import CompressionType, ControlRecordType, TimestampType

if TYPE_CHECKING:
    from kafkastore.cleaner import CleanerConfig, clean
    from kafkastore.config import LogConfig
    from kafkastore.log import Log
    from kafkastore.log_view import ReadOnlyLog, ReadOnlyLogDir
    from kafkastore.manager import LogManager
    from kafkastore.segment import LogSegment

#: The names loaded on first use, and the module each comes from.
_LAZY = {
    "CleanerConfig": "kafkastore.cleaner",
    "Log": "kafkastore.log",
    "LogConfig": "kafkastore.config",
    "LogManager": "kafkastore.manager",
    "LogSegment": "kafkastore.segment",
    "ReadOnlyLog": "kafkastore.log_view",
    "ReadOnlyLogDir": "kafkastore.log_view",
    "clean": "kafkastore.cleaner",
}

try:
    __version__ = version("kafkastore")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "BACKEND",
    "BatchScan",
    "CleanerConfig",
    "CompressionType",
    "ControlRecord",
    "ControlRecordType",
    "CorruptIndexError",
    "CorruptRecordError",
    "IndexClosedError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidCrcError",
    "InvalidOffsetError",
    "InvalidTimestampError",
    "KafkaStoreError",
    "LegacyRecordBatch",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "OffsetPosition",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "RecordTooLargeError",
    "ReadOnlyLog",
    "ReadOnlyLogDir",
    "TimeIndex",
    "TimestampOffset",
    "TimestampType",
    "UnsupportedCompressionError",
    "clean",
    "decode_columns",
    "encode_batch",
    "encode_control_batch",
    "errors",
    "iter_batches",
    "iter_records",
    "parse_control_record",
    "read_batch",
    "scan_batches",
    "__version__",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
