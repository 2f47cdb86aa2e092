"""kafkastore: Apache Kafka's local log storage, byte-compatible, for Python.

The public API is re-exported here; see the documentation for the layers
(records, indexes, segments, logs, retention, compaction). Importing this
package imports numpy and the codec packages, never pyspark.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

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

try:
    __version__ = version("kafkastore")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "BACKEND",
    "BatchScan",
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


def __getattr__(name: str):
    # the read-only log API loads the segment and storage layers: only when asked for
    if name in ("ReadOnlyLog", "ReadOnlyLogDir"):
        from kafkastore import log_view
        return getattr(log_view, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
