"""The log cleaner's settings (Kafka's ``CleanerConfig``): the broker's ``log.cleaner.*``
keys, with Kafka's names, defaults and checks.

One check spans keys: the offset map a cleaner gets (``log.cleaner.dedupe.buffer.size``
divided between ``log.cleaner.threads``, at most ``2**31 - 1`` bytes, 24 bytes a slot)
must hold more than one entry at ``log.cleaner.io.buffer.load.factor``; a
:class:`~kafkastore.cleaner.Cleaner` built with its own map checks the same.
Immutable, so shared freely between threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kafkastore.config import (
    Check,
    ConfigBase,
    ConfigError,
    ConfigKey,
    at_least,
    parse_bool,
    parse_double,
    parse_long,
)

__all__ = ["CleanerConfig"]

_INT_MAX = (1 << 31) - 1


def _positive(v: float) -> str | None:
    return "must be positive" if v <= 0 else None


def _load_factor(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


_POSITIVE = Check(_positive, "(0,...]")


@dataclass(frozen=True, init=False, repr=False, slots=True)
class CleanerConfig(ConfigBase):
    """The broker's ``log.cleaner.*`` settings (Kafka's ``CleanerConfig``), Kafka's names
    and defaults; the Python spellings (``log_cleaner_dedupe_buffer_size``,
    ``dedupe_buffer_size``) work too, as for every :class:`~kafkastore.config.ConfigBase`.

    ``log.cleaner.dedupe.buffer.size`` (128 MiB) is shared by the cleaner threads, each
    map taking ``min(size / threads, 2**31 - 1)`` bytes; kafkastore cleans one log at a
    time on the manager's scheduler, so ``log.cleaner.threads`` only sets that share.
    ``log.cleaner.io.buffer.size`` (512 KiB) is likewise split, half for reading and
    half for writing, per thread. The map must hold more than one entry at the load
    factor (Kafka's ``Cleaner`` checks the same). Immutable.

    ``producer.id.expiration.ms`` is not a cleaner setting (Kafka's ``CleanerConfig``
    has none): it is the :class:`~kafkastore.manager.ManagerConfig`'s (and
    ``Log.open``'s), and the cleaner keeps the last batch of every producer a log's
    state still holds. Given here it raises :class:`~kafkastore.errors.ConfigError`
    saying so.
    """

    CONFIG_KEYS = (
        ConfigKey("log.cleaner.enable", "enable_cleaner", parse_bool, True, None,
                  "Run the log cleaner on the logs whose ``cleanup.policy`` has "
                  "``compact``."),
        ConfigKey("log.cleaner.threads", "num_threads", parse_long, 1, at_least(1),
                  "Cleaner threads the dedupe and I/O buffers are divided between."),
        ConfigKey("log.cleaner.dedupe.buffer.size", "dedupe_buffer_size", parse_long,
                  134217728, _POSITIVE, "Bytes of the offset maps of all cleaner threads "
                  "(128 MiB; 24 bytes an entry)."),
        ConfigKey("log.cleaner.io.buffer.load.factor", "dedupe_buffer_load_factor",
                  parse_double, 0.9, Check(_load_factor, "(0,...,1]"),
                  "How full an offset map may get."),
        ConfigKey("log.cleaner.io.buffer.size", "io_buffer_size", parse_long, 524288,
                  _POSITIVE, "Bytes of the read and write buffers of all cleaner threads "
                  "(512 KiB)."),
        ConfigKey("log.cleaner.io.max.bytes.per.second", "max_io_bytes_per_second",
                  parse_double, math.inf, _POSITIVE,
                  "Throttle: the most bytes a second the cleaner reads and writes."),
        ConfigKey("log.cleaner.backoff.ms", "backoff_ms", parse_long, 15000, _POSITIVE,
                  "How often the log manager's scheduler runs the cleaner (Kafka: how "
                  "long a cleaner thread sleeps when no log needs cleaning)."),
    )
    _WHAT = "log cleaner"

    enable_cleaner: bool
    num_threads: int
    dedupe_buffer_size: int
    dedupe_buffer_load_factor: float
    io_buffer_size: int
    max_io_bytes_per_second: float
    backoff_ms: int

    @classmethod
    def _validate_values(cls, values: dict[str, object]) -> None:
        memory = _map_memory(values["dedupe_buffer_size"], values["num_threads"])  # type: ignore[arg-type]
        _check_map_size(memory // _BYTES_PER_SLOT, values["dedupe_buffer_load_factor"])  # type: ignore[arg-type]

    @classmethod
    def _unknown(cls, name: object) -> ConfigError:
        if isinstance(name, str) and name in _MOVED:
            return ConfigError(f"{name!r} is not a log cleaner setting: {_MOVED[name]}",
                               key=name)
        return ConfigBase._unknown.__func__(cls, name)  # (slots: no zero-argument super)

    @property
    def map_memory(self) -> int:
        """Bytes of one cleaner's offset map."""
        return _map_memory(self.dedupe_buffer_size, self.num_threads)

    @property
    def read_buffer_size(self) -> int:
        """Bytes a cleaner reads at a time (grown for a larger batch)."""
        return max(self.io_buffer_size // self.num_threads // 2, 1)


def _map_memory(dedupe_buffer_size: int, num_threads: int) -> int:
    return min(dedupe_buffer_size // num_threads, _INT_MAX)


#: Settings CleanerConfig once had, and where they went.
_MOVED = dict.fromkeys(
    ("producer.id.expiration.ms", "producer_id_expiration_ms"),
    "producer.id.expiration.ms is a ManagerConfig setting (or Log.open's "
    "producer_id_expiration_ms); the cleaner keeps the last batch of every producer the "
    "log's state holds, as Kafka's does")

_BYTES_PER_SLOT = 24   # SkimpyOffsetMap: a 16-byte digest and an 8-byte offset


def _check_map_size(slots: int, load_factor: float) -> None:
    # Kafka's Cleaner constructor asserts the same
    if slots * load_factor <= 1:
        raise ConfigError(
            "offset map is too small to fit in even a single message, so log cleaning "
            "will never make progress. You can increase log.cleaner.dedupe.buffer.size "
            "or decrease log.cleaner.threads", key="log.cleaner.dedupe.buffer.size")
