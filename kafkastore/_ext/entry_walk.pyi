# Python API of the entry_walk kernel; kafkastore/_pure/entry_walk.py has the same.
from typing import Callable, Final

from typing_extensions import Buffer

__all__ = ["FOUND", "NEED_MORE", "END", "CORRUPT", "find_entry", "locate_read"]

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
