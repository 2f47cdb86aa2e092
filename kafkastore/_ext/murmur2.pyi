# Python API of the murmur2 kernel; kafkastore/_pure/murmur2.py has the same.
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

__all__ = ["murmur2", "to_positive", "partition", "partitions"]

_OffsetsPair = tuple[npt.NDArray[np.int64] | npt.NDArray[np.int32], Buffer]

def murmur2(data: Buffer) -> int: ...
def to_positive(h: int) -> int: ...
def partition(key: Buffer, num_partitions: int) -> int: ...
def partitions(
    keys: Iterable[Buffer] | _OffsetsPair, num_partitions: int
) -> npt.NDArray[np.int32]: ...
