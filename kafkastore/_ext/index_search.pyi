# Python API of the index_search kernel; kafkastore/_pure/index_search.py has the same.
from typing import Final

from typing_extensions import Buffer

__all__ = [
    "OFFSET_INDEX",
    "TIME_INDEX",
    "KEY",
    "VALUE",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY_SIZE",
    "WARM_SECTION_BYTES",
    "entry_size",
    "largest_lower_bound_slot",
    "smallest_upper_bound_slot",
    "largest_lower_bound_entry",
    "lower_entry_and_next",
    "read_entry",
    "first_out_of_order",
    "REBUILD_STATE_SLOTS",
    "rebuild_entries",
]

OFFSET_INDEX: Final = 0
TIME_INDEX: Final = 1
KEY: Final = 0
VALUE: Final = 1
OFFSET_ENTRY_SIZE: Final = 8
TIME_ENTRY_SIZE: Final = 12
WARM_SECTION_BYTES: Final = 8192
REBUILD_STATE_SLOTS: Final = 11

def entry_size(kind: int) -> int: ...
def largest_lower_bound_slot(
    buffer: Buffer, entries: int, kind: int, target: int, search: int = 0
) -> int: ...
def smallest_upper_bound_slot(
    buffer: Buffer, entries: int, kind: int, target: int, search: int = 0
) -> int: ...
def largest_lower_bound_entry(
    buffer: Buffer, entries: int, kind: int, target: int, search: int = 0
) -> tuple[int, int] | None: ...
def lower_entry_and_next(
    buffer: Buffer, entries: int, kind: int, target: int, search: int = 0
) -> tuple[int, int, int, int, int]: ...
def read_entry(buffer: Buffer, entries: int, kind: int, slot: int) -> tuple[int, int]: ...
def first_out_of_order(buffer: Buffer, entries: int, kind: int) -> int: ...
def rebuild_entries(
    last_offset: Buffer, size: Buffer, max_timestamp: Buffer, start: int, base_offset: int,
    interval: int, state: Buffer, offset_index: Buffer, time_index: Buffer,
) -> int: ...
