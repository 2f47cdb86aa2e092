"""The groups APIs (issue 30): their handlers, over :class:`~kafkastore.server.group_coordinator.GroupCoordinator`."""

from __future__ import annotations

from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode

__all__ = ["HANDLERS"]

#: FindCoordinator's key types (Kafka's ``FindCoordinatorRequest.CoordinatorType``);
#: SHARE (2) is not served here
_GROUP, _TRANSACTION = 0, 1


async def _coordinator_for(broker: Broker, key_type: int) -> tuple[int, str | None]:
    """(error code, message) of finding ``key_type``'s coordinator: this node, once the
    coordinator's internal topic exists (Kafka's ``KafkaApis.getCoordinator`` creates it on
    first need)."""
    if key_type == _GROUP:
        coordinator = broker.group_coordinator
        if coordinator is None:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), None
        await coordinator.ensure_offsets_topic()
        return 0, None
    if key_type == _TRANSACTION:
        coordinator = broker.txn_coordinator
        if coordinator is None:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), None
        await coordinator.ensure_state_topic()
        return 0, None
    # Kafka's CoordinatorType.forId throws InvalidRequestException for another type
    return int(ErrorCode.INVALID_REQUEST), f"Unknown coordinator type {key_type}"


async def find_coordinator(broker: Broker, header, request: dict) -> dict:
    key_type = int(request.get("key_type", _GROUP))
    host, port = broker.advertised()
    if header.api_version >= 4:
        # batched (KIP-699): one answer per key, each with its own error
        coordinators = []
        error, message = None, None
        for key in request.get("coordinator_keys") or []:
            if error is None:
                error, message = await _coordinator_for(broker, key_type)
            found = error == 0
            coordinators.append({"key": key, "node_id": broker.node_id if found else -1,
                                 "host": host if found else "", "port": port if found else -1,
                                 "error_code": error, "error_message": message})
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    error, message = await _coordinator_for(broker, key_type)
    found = error == 0
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message,
            "node_id": broker.node_id if found else -1, "host": host if found else "",
            "port": port if found else -1}


HANDLERS: dict = {
    10: find_coordinator,
}
