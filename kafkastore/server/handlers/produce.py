"""Produce and InitProducerId: the write path of ``kafkastore serve``.

Produce appends each partition's records with :meth:`Log.append_batches
<kafkastore.log.Log.append_batches>` as a leader (offsets assigned, the validator, producer
state and idempotent deduplication) and answers per partition as Kafka's
``ReplicaManager.appendToLocalLog`` does. InitProducerId hands out producer ids for
idempotent producers from blocks recorded in the log directory (``producer-id-block``)
before any id of a block is used, so a restart never hands one out twice.
"""

from __future__ import annotations

import logging

from kafkastore.batch_header import ATTRIBUTES_OFFSET, CODEC_MASK, LENGTH_OFFSET, \
    LOG_OVERHEAD, MAGIC_OFFSET
from kafkastore.errors import InvalidRecordError, InvalidRecordTimestampError, KafkaStoreError, \
    RecordTooLargeError
from kafkastore.records import iter_batches
from kafkastore.server.broker import Broker, CloseConnection
from kafkastore.server.error_codes import ErrorCode, error_code_for
from kafkastore.server.handlers.offsets import leader_epoch_of
from kafkastore.server.handlers.transactions import init_producer_id_transactional
from kafkastore.server.producer_ids import PRODUCER_ID_BLOCK_FILE, PRODUCER_ID_BLOCK_SIZE, \
    ProducerIdManager, producer_id_manager

__all__ = ["HANDLERS", "PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "ProducerIdManager",
           "produce", "init_producer_id"]

_log = logging.getLogger("kafkastore.server")

PRODUCE = 0
INIT_PRODUCER_ID = 22

_ZSTD = 4


# -- Produce -------------------------------------------------------------------------------

def _partition_error(code: ErrorCode, *, log_start_offset: int = -1,
                     record_errors: list | None = None,
                     error_message: str | None = None) -> dict:
    # Kafka's PartitionResponse(error): base offset -1, no timestamp, log start -1 unless
    # the append reached the log (ReplicaManager.processFailedRecord gives it then)
    return {"error_code": int(code), "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": log_start_offset, "record_errors": record_errors or [],
            "error_message": error_message}


def _validate_records(version: int, records) -> ErrorCode | None:
    """Kafka's ``ProduceRequest.validateRecords``: from v3 on a partition's records are
    exactly one batch of magic 2 (zstd only from v7)."""
    if version < 3:
        return None
    if records is None or len(records) <= MAGIC_OFFSET:
        return ErrorCode.INVALID_RECORD
    if records[MAGIC_OFFSET] != 2:
        return ErrorCode.INVALID_RECORD
    if len(records) > ATTRIBUTES_OFFSET + 1:
        codec = records[ATTRIBUTES_OFFSET + 1] & CODEC_MASK
        if version < 7 and codec == _ZSTD:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    size = LOG_OVERHEAD + int.from_bytes(records[LENGTH_OFFSET:LENGTH_OFFSET + 4], "big",
                                         signed=True)
    if len(records) > size:   # a second batch (or trailing bytes of one)
        return ErrorCode.INVALID_RECORD
    return None


def _record_errors(exc: KafkaStoreError, log, records) -> tuple[ErrorCode, list, str] | None:
    """KIP-467 for a refusal of records (Kafka's ``LogValidator.processRecordErrors``
    wrapped in a ``RecordValidationException``): the code, ``record_errors`` (the index of
    the record in its batch and why) and the summary Kafka puts in ``error_message``; None
    for a refusal of the batch as a whole (``LogValidator.validateBatch``'s plain
    ``InvalidRecordException``), which carries no record errors."""
    text = str(exc)
    if isinstance(exc, InvalidRecordTimestampError):
        # the validator names the record by its offset in the batch (its index: a
        # producer's batch has base offset 0)
        index = exc.offset if exc.offset is not None and exc.offset >= 0 else 0
        return (ErrorCode.INVALID_TIMESTAMP,
                [{"batch_index": index, "batch_index_error_message": text}],
                "One or more records have been rejected due to invalid timestamp")
    if not (isinstance(exc, InvalidRecordError) and log.config.compact):
        return None
    index = _first_record_without_key(records)   # validateKey's refusal, if it was that
    if index is None:
        return None
    errors = [{"batch_index": index, "batch_index_error_message": text}]
    return (ErrorCode.INVALID_RECORD, errors,
            "One or more records have been rejected due to 1 record errors in total, and "
            f"only showing the first three errors at most: [{text}]")


def _first_record_without_key(records) -> int | None:
    try:
        for batch in iter_batches(records, validate=False):
            for i, record in enumerate(batch):
                if record.key is None:
                    return i
    except KafkaStoreError:
        pass
    return None


def _append(broker: Broker, topic: str, partition: int, records, version: int) -> dict:
    log = broker.log(topic, partition)
    if log is None:
        # Kafka's KafkaApis.handleProduceRequest: a partition the metadata does not hold
        # is UNKNOWN_TOPIC_OR_PARTITION; topics are auto-created by Metadata, never by a
        # produce
        return _partition_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    refused = _validate_records(version, records)
    if refused is not None:
        return _partition_error(refused)
    if records is None or len(records) == 0:   # (before v3 only) nothing to append
        return {"error_code": 0, "base_offset": -1, "log_append_time_ms": -1,
                "log_start_offset": log.log_start_offset, "record_errors": [],
                "error_message": None}
    try:
        info = log.append_batches(records, leader_epoch=leader_epoch_of(log))
    except RecordTooLargeError:
        # (ReplicaManager: RecordTooLargeException has no custom message, no log start)
        return _partition_error(ErrorCode.MESSAGE_TOO_LARGE)
    except KafkaStoreError as exc:
        refusal = _record_errors(exc, log, records)
        if refusal is not None:
            code, errors, message = refusal
            return _partition_error(code, log_start_offset=log.log_start_offset,
                                    record_errors=errors, error_message=message)
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            _log.error("Error processing append operation on partition %s-%d", topic,
                       partition, exc_info=exc)
        # Kafka's processFailedRecord: the log start offset comes with the error, except
        # for the refusals of corrupt bytes and of a failed disk (UNKNOWN_LOG_APPEND_INFO)
        start = -1 if code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR) \
            else log.log_start_offset
        return _partition_error(code, log_start_offset=start)
    # a retried batch (info.duplicate) is answered as Kafka does: NONE, with the offsets
    # of the batch it retries and its timestamp as the append time (UnifiedLog.append,
    # the maybeDuplicate case)
    if not info.duplicate:
        broker.notify_append(topic, partition)
    return {"error_code": 0, "base_offset": info.first_offset,
            "log_append_time_ms": info.log_append_time,
            "log_start_offset": info.log_start_offset, "record_errors": [],
            "error_message": None}


async def produce(broker: Broker, header, request: dict) -> dict | CloseConnection | None:
    """Produce (v0-v11)."""
    acks = request.get("acks", 1)
    version = header.api_version
    responses = []
    for topic_data in request.get("topic_data") or ():
        name = topic_data["name"]
        partitions = []
        for data in topic_data.get("partition_data") or ():
            index = data["index"]
            if acks not in (0, 1, -1):
                answer = _partition_error(ErrorCode.INVALID_REQUIRED_ACKS)
            else:
                answer = _append(broker, name, index, data.get("records"), version)
            answer["index"] = index
            partitions.append(answer)
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        # no response at all; when a partition failed the connection is closed, which is
        # how an acks=0 client learns of it (and refreshes its metadata): Kafka's
        # KafkaApis.handleProduceRequest -> requestHelper.closeConnection
        failed = [f"{topic['name']}-{p['index']}={ErrorCode(p['error_code']).name}"
                  for topic in responses for p in topic["partition_responses"]
                  if p["error_code"]]
        if failed:
            return CloseConnection(
                f"error during produce request with correlation id {header.correlation_id} "
                f"from client id {header.client_id} with ack=0; topic and partition to "
                f"errors: {', '.join(failed)}")
        return None
    # acks=-1 (all) on a single node: the leader is the whole ISR, so it is acknowledged
    # as soon as the append is done (the log's flush settings decide the fsync, as Kafka's)
    return {"responses": responses, "throttle_time_ms": 0}


# -- InitProducerId -------------------------------------------------------------------------

async def init_producer_id(broker: Broker, header, request: dict) -> dict:
    """InitProducerId (v0-v5) for idempotent producers."""
    def answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> dict:
        return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid,
                "producer_epoch": epoch}

    pid, epoch = request.get("producer_id", -1), request.get("producer_epoch", -1)
    if (pid == -1) != (epoch == -1):
        # KafkaApis.handleInitProducerIdRequest: both or neither
        return answer(ErrorCode.INVALID_REQUEST)
    if request.get("transactional_id") is not None:
        # the transaction coordinator's (KafkaApis.handleInitProducerIdRequest)
        return await init_producer_id_transactional(broker, header, request)
    manager = producer_id_manager(broker)
    try:
        new_id = manager.generate()
    except (OSError, KafkaStoreError) as exc:
        _log.error("Cannot record a producer id block in %s", manager.path, exc_info=exc)
        return answer(ErrorCode.KAFKA_STORAGE_ERROR)
    # Kafka's TransactionCoordinator.handleInitProducerId with a null transactional id
    # "always blindly accepts the request": a new producer id at epoch 0, also when the
    # producer sent its current id and epoch (KIP-360 bumps epochs for transactional ids)
    return answer(ErrorCode.NONE, new_id, 0)


HANDLERS = {PRODUCE: produce, INIT_PRODUCER_ID: init_producer_id}
