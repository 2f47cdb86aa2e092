# Python API of the column_encode kernel; kafkastore/_pure/column_encode.py has the same
# and documents the layouts, the batching rule and the errors.
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

__all__ = ["encode_columns"]

_Offsets = npt.NDArray[np.int32] | npt.NDArray[np.int64]
_Valid = npt.NDArray[np.bool_] | None
# (offsets, data, valid): Arrow binary / large_binary; data None counts as empty
_Binary = tuple[_Offsets, Buffer | None, _Valid]
# (header_offsets, key_offsets, key_data, value_offsets, value_data, value_valid):
# Arrow list<struct<key: string, value: binary>>
_Headers = tuple[_Offsets, _Offsets, Buffer | None, _Offsets, Buffer | None, _Valid]

def encode_columns(
    rows: _Offsets | None,
    keys: _Binary | None,
    values: _Binary,
    *,
    timestamps: npt.NDArray[np.int64] | None = None,
    default_timestamp: int,
    headers: _Headers | None = None,
    max_batch_records: int = 2147483647,
    max_batch_bytes: int = 1048576,
    attributes: int = 0,
    compress: Callable[[memoryview], Buffer] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    first_offset: int = 0,
) -> bytes: ...
