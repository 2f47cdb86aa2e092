# Python API of the entry_walk kernel; kafkastore/_pure/entry_walk.py has the same.
from typing import Any, Callable, Final

from typing_extensions import Buffer

__all__ = ["FOUND", "NEED_MORE", "END", "CORRUPT", "find_entry", "locate_read", "read_at",
           "read_segment"]

FOUND: Final = 0
NEED_MORE: Final = 1
END: Final = 2
CORRUPT: Final = 3

def find_entry(
    buffer: Buffer, position: int, limit: int, target_offset: int
) -> tuple[int, int, int, int, int, int, int]: ...
def locate_read(
    index: Buffer, entries: int, base_offset: int, target_offset: int,
    pread: Callable[[int, int, int], bytes], fd: int, stop: int, window: int,
) -> tuple[int, int, bytes] | None: ...
def read_at(
    segments: tuple[Any, ...], bases: tuple[int, ...], target_offset: int, max_size: int,
    min_one_message: bool, fs: Any, plan: tuple[type, type, Callable[..., Any], int, int, Callable[..., bytes]],
) -> Any | None: ...
def read_segment(
    segment: Any, target_offset: int, max_size: int, max_position: int | None,
    min_one_message: bool, fs: Any, plan: tuple[type, type, Callable[..., Any], int, int, Callable[..., bytes]],
) -> Any | None: ...
