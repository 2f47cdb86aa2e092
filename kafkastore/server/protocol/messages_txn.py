"""Kafka's messages of the transaction coordinator's APIs (issue 30): AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions; described as
:mod:`.messages` describes the others (InitProducerId is there; TxnOffsetCommit, a group
API in Kafka, is in :mod:`.messages_group`).

Versions: the ones of transaction protocol version 1 (the clients' default). Kafka's
clients send AddPartitionsToTxn v5, EndTxn v5 and TxnOffsetCommit v5 only when the broker
finalizes the ``transaction.version`` feature at 2 (KIP-890 part 2: an epoch bump at
every EndTxn), which this server does not advertise; AddPartitionsToTxn v4 (the
batched, broker-to-broker form) is answered. ListTransactions v2's regular expression
filter (KIP-1152) is Java's regex dialect: not answered.
"""

from __future__ import annotations

from kafkastore.server.protocol.schema import F, Message

__all__ = ["MESSAGES", "SUPPORTED"]

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66


def _txn_topics(versions: str) -> tuple[F, ...]:
    # Kafka's AddPartitionsToTxnTopic common struct
    return (F("name", "string", versions), F("partitions", "[]int32", versions))


def _topic_results(versions: str) -> tuple[F, ...]:
    # AddPartitionsToTxnTopicResult / AddPartitionsToTxnPartitionResult
    return (F("name", "string", versions),
            F("results_by_partition", "[]AddPartitionsToTxnPartitionResult", versions, fields=(
                F("partition_index", "int32", versions),
                F("partition_error_code", "int16", versions))))


ADD_PARTITIONS_TO_TXN_REQUEST = Message(
    ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnRequest", "0-5", flexible="3+", fields=(
        F("transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=(
            F("transactional_id", "string", "4+"),
            F("producer_id", "int64", "4+"),
            F("producer_epoch", "int16", "4+"),
            F("verify_only", "bool", "4+", default=False),
            F("topics", "[]AddPartitionsToTxnTopic", "4+", fields=_txn_topics("0+")))),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3",
          fields=_txn_topics("0+"))))

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(
    ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnResponse", "0-5", flexible="3+", fields=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "4+"),
        F("results_by_transaction", "[]AddPartitionsToTxnResult", "4+", fields=(
            F("transactional_id", "string", "4+"),
            F("topic_results", "[]AddPartitionsToTxnTopicResult", "4+",
              fields=_topic_results("0+")))),
        F("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3",
          fields=_topic_results("0+"))))

ADD_OFFSETS_TO_TXN_REQUEST = Message(
    ADD_OFFSETS_TO_TXN, "AddOffsetsToTxnRequest", "0-4", flexible="3+", fields=(
        F("transactional_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("group_id", "string", "0+")))

ADD_OFFSETS_TO_TXN_RESPONSE = Message(
    ADD_OFFSETS_TO_TXN, "AddOffsetsToTxnResponse", "0-4", flexible="3+", fields=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+")))

END_TXN_REQUEST = Message(END_TXN, "EndTxnRequest", "0-5", flexible="3+", fields=(
    F("transactional_id", "string", "0+"),
    F("producer_id", "int64", "0+"),
    F("producer_epoch", "int16", "0+"),
    F("committed", "bool", "0+")))

END_TXN_RESPONSE = Message(END_TXN, "EndTxnResponse", "0-5", flexible="3+", fields=(
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("producer_id", "int64", "5+", default=-1),
    F("producer_epoch", "int16", "5+", default=-1)))

DESCRIBE_TRANSACTIONS_REQUEST = Message(
    DESCRIBE_TRANSACTIONS, "DescribeTransactionsRequest", "0", flexible="0+", fields=(
        F("transactional_ids", "[]string", "0+"),))

DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    DESCRIBE_TRANSACTIONS, "DescribeTransactionsResponse", "0", flexible="0+", fields=(
        F("throttle_time_ms", "int32", "0+"),
        F("transaction_states", "[]TransactionState", "0+", fields=(
            F("error_code", "int16", "0+"),
            F("transactional_id", "string", "0+"),
            F("transaction_state", "string", "0+"),
            F("transaction_timeout_ms", "int32", "0+"),
            F("transaction_start_time_ms", "int64", "0+"),
            F("producer_id", "int64", "0+"),
            F("producer_epoch", "int16", "0+"),
            F("topics", "[]TopicData", "0+", fields=(
                F("topic", "string", "0+"),
                F("partitions", "[]int32", "0+")))))))

LIST_TRANSACTIONS_REQUEST = Message(
    LIST_TRANSACTIONS, "ListTransactionsRequest", "0-2", flexible="0+", fields=(
        F("state_filters", "[]string", "0+"),
        F("producer_id_filters", "[]int64", "0+"),
        F("duration_filter", "int64", "1+", default=-1),
        F("transactional_id_pattern", "string", "2+", nullable="2+", default=None)))

LIST_TRANSACTIONS_RESPONSE = Message(
    LIST_TRANSACTIONS, "ListTransactionsResponse", "0-2", flexible="0+", fields=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("unknown_state_filters", "[]string", "0+"),
        F("transaction_states", "[]TransactionState", "0+", fields=(
            F("transactional_id", "string", "0+"),
            F("producer_id", "int64", "0+"),
            F("transaction_state", "string", "0+")))))

#: The requests and responses described here (merged into messages.REQUESTS / RESPONSES).
MESSAGES: tuple[Message, ...] = (
    ADD_PARTITIONS_TO_TXN_REQUEST, ADD_PARTITIONS_TO_TXN_RESPONSE,
    ADD_OFFSETS_TO_TXN_REQUEST, ADD_OFFSETS_TO_TXN_RESPONSE,
    END_TXN_REQUEST, END_TXN_RESPONSE,
    DESCRIBE_TRANSACTIONS_REQUEST, DESCRIBE_TRANSACTIONS_RESPONSE,
    LIST_TRANSACTIONS_REQUEST, LIST_TRANSACTIONS_RESPONSE)
#: {api_key: (min_version, max_version)} the server answers (merged into SUPPORTED_APIS).
SUPPORTED: dict[int, tuple[int, int]] = {
    ADD_PARTITIONS_TO_TXN: (0, 4), ADD_OFFSETS_TO_TXN: (0, 4), END_TXN: (0, 4),
    DESCRIBE_TRANSACTIONS: (0, 0), LIST_TRANSACTIONS: (0, 1)}
