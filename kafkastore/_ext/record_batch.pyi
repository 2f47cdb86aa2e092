# Python API of the record_batch kernel; kafkastore/_pure/record_batch.py has the same.
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from typing_extensions import Buffer

from kafkastore.types import CompressionType, TimestampType

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

DEFAULT_MAX_DECOMPRESSED_BYTES: int

Decompressor = Callable[[int, Buffer, int, int], bytes]

def set_decompressor(fn: Decompressor | None) -> None: ...
def set_column_pool_limit(limit: int) -> int: ...

class Record:
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: TimestampType,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> None: ...

class RecordBatch:
    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    max_decompressed_bytes: int
    def __init__(
        self, buffer: Buffer, position: int = 0, *, max_decompressed_bytes: int = ...
    ) -> None: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def compression(self) -> CompressionType: ...
    @property
    def timestamp_type(self) -> TimestampType: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def delete_horizon_ms(self) -> int | None: ...
    @property
    def last_sequence(self) -> int: ...
    def compute_crc(self) -> int: ...
    def is_valid(self) -> bool: ...
    def validate(self) -> None: ...
    def to_bytes(self) -> bytes: ...
    def payload(self) -> memoryview: ...
    def record_summary(self) -> tuple[int, int, int, int | None, int, bool]: ...
    def __iter__(self) -> Iterator[Record]: ...

class LegacyRecordBatch:
    position: int
    last_offset: int
    batch_length: int
    magic: int
    crc: int
    attributes: int
    timestamp: int
    max_decompressed_bytes: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    last_offset_delta: None
    record_count: None
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    delete_horizon_ms: None
    def __init__(
        self, buffer: Buffer, position: int = 0, *, max_decompressed_bytes: int = ...
    ) -> None: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def first_timestamp(self) -> int: ...
    @property
    def compression(self) -> CompressionType: ...
    @property
    def timestamp_type(self) -> TimestampType: ...
    def validate_inner(self) -> None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def base_offset(self) -> int: ...
    def compute_crc(self) -> int: ...
    def is_valid(self) -> bool: ...
    def validate(self) -> None: ...
    def to_bytes(self) -> bytes: ...
    def payload(self) -> memoryview | None: ...
    def __iter__(self) -> Iterator[Record]: ...

class BatchScan:
    position: np.ndarray
    size: np.ndarray
    magic: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray
    max_timestamp: np.ndarray
    record_count: np.ndarray
    valid_bytes: int
    error: Exception | None
    start: int
    end: int
    def __len__(self) -> int: ...
    @property
    def truncated(self) -> bool: ...

def read_batch(
    buffer: Buffer, position: int = 0, *, max_decompressed_bytes: int = ...
) -> RecordBatch | LegacyRecordBatch: ...
def iter_batches(
    buffer: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    validate: bool = True,
    max_decompressed_bytes: int = ...,
) -> Iterator[RecordBatch | LegacyRecordBatch]: ...
def scan_batches(
    buffer: Buffer, start: int = 0, end: int | None = None, *, validate: bool = True
) -> BatchScan: ...
# The columns: offset, timestamp, timestamp_type, key_offsets, key_data, key_null,
# value_offsets, value_data, value_null, header_count; with headers=True also
# header_offsets, header_key_offsets, header_key_data, header_value_offsets,
# header_value_data, header_value_null.
def decode_columns(
    buffer: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    validate: bool = True,
    include_control: bool = False,
    max_decompressed_bytes: int = ...,
    headers: bool = False,
    copy: bool = True,
) -> dict[str, np.ndarray]: ...
def encode_batch_v2(
    records: Iterable[Any],
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    default_timestamp: int = -1,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    offsets: Sequence[int] | None = None,
    delete_horizon_ms: int | None = None,
    compress: Callable[[memoryview], bytes] | None = None,
) -> bytes: ...
