"""Enumerations of Kafka's record format, shared by every layer.

A leaf module: it imports nothing from the package, so the compiled kernels
can return these types directly. Values are Kafka's wire values.
"""

from __future__ import annotations

import enum

__all__ = ["CompressionType", "TimestampType", "ControlRecordType"]


class CompressionType(enum.IntEnum):
    """Codec id stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4  # magic 2 only

    @classmethod
    def parse(cls, value: CompressionType | int | str | None) -> CompressionType:
        """Accept an enum member, a codec id, or a name such as ``"lz4"``.

        ``None`` and ``"none"``/``"uncompressed"`` mean :attr:`NONE`.
        """
        if type(value) is cls:   # the common case, without the enum call (~0.4 us)
            return value
        if value is None:
            return cls.NONE
        if isinstance(value, str):
            name = value.strip().upper()
            if name == "UNCOMPRESSED":
                name = "NONE"
            try:
                return cls[name]
            except KeyError:
                raise ValueError(f"unknown compression type {value!r}") from None
        return cls(value)


class TimestampType(enum.IntEnum):
    """Meaning of a record's timestamp (attribute bit 3; none for magic 0)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        """Kafka's display name: ``CreateTime``, ``LogAppendTime``, ``NoTimestampType``."""
        return _TS_LABELS[self]


_TS_LABELS = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class ControlRecordType(enum.IntEnum):
    """Type field of a control record's key (Kafka's ``ControlRecordType``)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
