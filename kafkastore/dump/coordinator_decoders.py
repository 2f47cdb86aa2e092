"""The parsers of ``kafka-dump-log.sh --offsets-decoder`` and
``--transaction-log-decoder``: a record of ``__consumer_offsets`` or
``__transaction_state`` printed as Kafka's ``DumpLogSegments.OffsetsMessageParser`` and
``TransactionLogMessageParser`` print it (the formats: :mod:`kafkastore.internal_topics`).
"""

from __future__ import annotations

from kafkastore.internal_topics import group_records, txn_records

__all__ = ["DECODERS", "parse_internal_record"]

#: ``DumpOptions.decoder`` -> the parser of that internal topic's records.
DECODERS = {"offsets": group_records.parse_for_dump,
            "transaction-log": txn_records.parse_for_dump}


def parse_internal_record(decoder: str, key: bytes | None, value: bytes | None,
                          offset: int = 0) -> tuple[str | None, str | None]:
    """(key text, payload text) of the record at ``offset`` for ``decoder`` (a key of
    :data:`DECODERS`); None for a part Kafka's parser leaves out. (Kafka's parsers
    name the record's offset in what they print for a record they cannot decode.)"""
    return DECODERS[decoder](key, value, offset)
