"""Kafka's offset and time indexes: the ``.index`` and ``.timeindex`` files of a segment.

Both are sparse, memory-mapped arrays of fixed-size big-endian entries, written exactly
as Kafka's ``AbstractIndex``, ``OffsetIndex`` and ``TimeIndex`` write them
(kafka-storage.md section 3)::

    offset index (.index), 8 bytes an entry       time index (.timeindex), 12 bytes an entry
    +0  relativeOffset  int32                     +0  timestamp       int64
    +4  position        int32                     +8  relativeOffset  int32

This module is the public face; the classes live one per Kafka class, each module
documenting its part of the format:

* :mod:`kafkastore.abstract_index`: :class:`AbstractIndex` (Kafka's ``AbstractIndex``):
  the mapped file, its sizing (preallocation, trimming, why an untrimmed file counts its
  zero padding as entries), truncation, durability, life cycle and thread safety.
* :mod:`kafkastore.offset_index`: :class:`OffsetIndex` and :class:`OffsetPosition`
  (Kafka's ``OffsetIndex``): the ``.index`` entry layout and its invariants.
* :mod:`kafkastore.time_index`: :class:`TimeIndex`, :class:`TimestampOffset` and
  :data:`NO_TIMESTAMP` (Kafka's ``TimeIndex``): the ``.timeindex`` entry layout and its
  invariants.
* :mod:`kafkastore.index_view`: :class:`OffsetIndexView` and :class:`TimeIndexView`, the
  read-only twins over bytes already in memory.

Import from here (``from kafkastore.index import OffsetIndex``) or from those modules.
"""

from __future__ import annotations

from kafkastore.abstract_index import DEFAULT_MAX_INDEX_SIZE, AbstractIndex
from kafkastore.index_view import OffsetIndexView, TimeIndexView
from kafkastore.offset_index import OffsetIndex, OffsetPosition
from kafkastore.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset

__all__ = [
    "AbstractIndex",
    "OffsetIndex",
    "TimeIndex",
    "OffsetPosition",
    "TimestampOffset",
    "OffsetIndexView",
    "TimeIndexView",
    "DEFAULT_MAX_INDEX_SIZE",
    "NO_TIMESTAMP",
]
