"""What an append to a :class:`~kafkastore.log.Log` is made of, apart from the log itself.

Kafka's ``LogAppendInfo`` (:class:`LogAppendInfo`, the answer of an append); the append
plan a log derives from its config once per config (:class:`AppendPlan`, with
:func:`target_codec`); the header scan of appended bytes for the common case of a few
sound v2 batches (:func:`scan_v2`); and Kafka's CreateTime window check of an append
(:func:`check_timestamps`). Values and pure functions: no state, no lock.
"""

from __future__ import annotations

from typing import NamedTuple

import crc32c

from kafkastore._kernels import entry_walk
from kafkastore.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    UINT32,
)
from kafkastore.config import LogConfig
from kafkastore.records import CompressionType, TimestampType, iter_batches
from kafkastore.validator import check_timestamp_window, codec_level
from kafkastore.validator import target_codec as validator_target_codec

__all__ = ["AppendPlan", "LogAppendInfo", "check_timestamps", "scan_v2", "target_codec"]

_find_entry = entry_walk.find_entry
_FOUND, _END = entry_walk.FOUND, entry_walk.END
_FIRST_OFFSET = -(1 << 63)
_NO_LIMIT = (1 << 63) - 1


class LogAppendInfo(NamedTuple):
    """What an append did: Kafka's ``LogAppendInfo``, the parts a storage user needs."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int          # -1 unless the log uses LogAppendTime
    log_start_offset: int
    valid_bytes: int
    num_batches: int
    duplicate: bool = False       # a producer's retried batch: nothing was written


class AppendPlan(NamedTuple):
    """What :meth:`Log.append <kafkastore.log.Log.append>` derives from the config, once
    per config, not per call."""

    attributes: int          # codec and timestamp type bits of the batches appended
    level: int | None        # the codec's configured level
    log_append_time: bool
    timestamp_window: bool   # message.timestamp.before/after.max.ms limit anything

    @classmethod
    def of(cls, config: LogConfig) -> AppendPlan:
        codec = target_codec(config, None)
        log_append = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        return cls(int(codec) | (TIMESTAMP_TYPE_MASK if log_append else 0),
                   codec_level(config, codec), log_append,
                   config.message_timestamp_before_max_ms < _NO_LIMIT
                   or config.message_timestamp_after_max_ms < _NO_LIMIT)


def target_codec(config: LogConfig, compression) -> CompressionType:
    """The codec of an append: the call's, else ``compression.type``
    (:func:`kafkastore.validator.target_codec`; for ``producer``, uncompressed, as records
    appended here come from no producer)."""
    if compression is not None:
        return CompressionType.parse(compression)
    return validator_target_codec(config, CompressionType.NONE)


def check_timestamps(data, now: int, config: LogConfig, directory: str) -> None:
    """Kafka's CreateTime window over every record of ``data``
    (:func:`~kafkastore.validator.check_timestamp_window`, batch by batch)."""
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    for batch in iter_batches(data, validate=False):
        check_timestamp_window(batch, now, before, after, directory)


def scan_v2(view: memoryview):
    """The headers of ``view``'s whole entries, CRC-checked, as ``(positions, sizes,
    magics, last_offsets, max_timestamps, base_offsets, valid_bytes)``: the result of
    ``scan_batches(view, validate=True)`` without its fixed cost, for the common input of
    a few v2 batches. None when an entry is not a sound v2 batch (legacy, short, a bad
    CRC, a bad size): the full scan then gives the answer or the error.
    """
    positions, sizes, lasts, max_tss, bases = [], [], [], [], []
    limit = len(view)
    pos = 0
    while True:
        status, pos, size, magic, base, last, max_ts = _find_entry(view, pos, limit,
                                                                   _FIRST_OFFSET)
        if status != _FOUND:
            if status != _END:
                return None
            break
        if magic != 2 or size < RECORD_BATCH_OVERHEAD or \
                crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) != \
                UINT32.unpack_from(view, pos + CRC_OFFSET)[0]:
            return None
        positions.append(pos)
        sizes.append(size)
        lasts.append(last)
        max_tss.append(max_ts)
        bases.append(base)
        pos += size
    return positions, sizes, [2] * len(sizes), lasts, max_tss, bases, pos
