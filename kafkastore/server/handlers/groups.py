"""The groups APIs (issue 30): their handlers, over
:class:`~kafkastore.server.group_coordinator.GroupCoordinator`."""

from __future__ import annotations

from kafkastore.server.broker import Broker
from kafkastore.server.error_codes import ErrorCode
from kafkastore.server.group_coordinator import every_partition

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


# -- the group APIs: checked here, answered by the coordinator -----------------------------

def _coordinator(broker: Broker):
    """The group coordinator, None when there is none (a Broker made without a server):
    the APIs then answer COORDINATOR_NOT_AVAILABLE, as Kafka's before it is loaded."""
    return broker.group_coordinator


_NO_COORDINATOR = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)


async def join_group(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"error_code": _NO_COORDINATOR, "generation_id": -1,
                "member_id": request.get("member_id") or ""}
    answer = await gc.join_group(header.api_version, request, header.client_id or "")
    answer.setdefault("member_id", request.get("member_id") or "")
    answer["throttle_time_ms"] = 0
    return answer


async def sync_group(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"error_code": _NO_COORDINATOR}
    return dict(await gc.sync_group(header.api_version, request), throttle_time_ms=0)


async def heartbeat(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    code = _NO_COORDINATOR if gc is None else gc.heartbeat(request)
    return {"throttle_time_ms": 0, "error_code": code}


async def leave_group(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"error_code": _NO_COORDINATOR}
    return dict(gc.leave_group(header.api_version, request), throttle_time_ms=0)


async def offset_commit(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return every_partition(request, _NO_COORDINATOR)
    return gc.offset_commit(header.api_version, request)


async def txn_offset_commit(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return every_partition(request, _NO_COORDINATOR)
    return gc.txn_offset_commit(header.api_version, request)


async def offset_fetch(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        if header.api_version >= 8:
            return {"groups": [{"group_id": g.get("group_id"), "error_code": _NO_COORDINATOR}
                               for g in request.get("groups") or []]}
        return {"error_code": _NO_COORDINATOR, "topics": []}
    return gc.offset_fetch(header.api_version, request)


async def list_groups(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"error_code": _NO_COORDINATOR, "groups": []}
    return gc.list_groups(request)


async def describe_groups(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"groups": [{"group_id": g, "error_code": _NO_COORDINATOR}
                           for g in request.get("groups") or []]}
    return gc.describe_groups(header.api_version, request)


async def delete_groups(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"results": [{"group_id": g, "error_code": _NO_COORDINATOR}
                            for g in request.get("groups_names") or []]}
    return gc.delete_groups(request)


async def offset_delete(broker: Broker, header, request: dict) -> dict:
    gc = _coordinator(broker)
    if gc is None:
        return {"error_code": _NO_COORDINATOR, "topics": []}
    return gc.offset_delete(request)


HANDLERS: dict = {
    10: find_coordinator,
    11: join_group,
    14: sync_group,
    12: heartbeat,
    13: leave_group,
    8: offset_commit,
    9: offset_fetch,
    16: list_groups,
    15: describe_groups,
    42: delete_groups,
    47: offset_delete,
    28: txn_offset_commit,
}
