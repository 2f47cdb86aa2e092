"""Producer ids for ``kafkastore serve``: handed out from blocks recorded in the log
directory (``producer-id-block``) before any id of a block is used, so a restart never
hands one out twice. Shared by InitProducerId for idempotent producers
(:mod:`.handlers.produce`) and the transaction coordinator (a new producer id for a new
transactional id, or when its epoch is exhausted)."""

from __future__ import annotations

import os

from kafkastore.checkpoint import write_atomically
from kafkastore.errors import KafkaStoreError

__all__ = ["PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "ProducerIdManager",
           "producer_id_manager"]

#: The file in the (first) log directory recording the first producer id not yet handed
#: out by any block: one line, the id in decimal. Written (and fsynced) before an id of a
#: new block is used, so ids handed out before a crash are below what the file says.
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
#: Ids per block (Kafka's controller hands out blocks of 1000: ProducerIdManager).
PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Producer ids from blocks recorded in ``producer-id-block`` (the role of Kafka's
    controller-backed ``ProducerIdManager``): the file holds the first id not in any block
    handed out yet; a new block is recorded (write, fsync, rename) before its first id is
    used. A directory without the file starts past every producer id its logs hold."""

    def __init__(self, broker) -> None:
        dirs = broker.manager.log_dirs
        self._path = os.path.join(dirs[0], PRODUCER_ID_BLOCK_FILE)
        self._broker = broker
        self._next = 0
        self._end = 0   # the block is [_next, _end)

    @property
    def path(self) -> str:
        return self._path

    def _recorded(self) -> int:
        try:
            with open(self._path, encoding="ascii") as f:
                return int(f.read().strip() or 0)
        except FileNotFoundError:
            seen = [pid for log in self._broker.manager.logs().values()
                    for pid in log.producer_state_manager.producers]
            return max(seen, default=-1) + 1
        except ValueError as exc:
            raise KafkaStoreError(f"{self._path} does not hold a producer id: {exc}",
                                  path=self._path) from None

    def generate(self) -> int:
        if self._next >= self._end:
            start = self._recorded()
            end = start + PRODUCER_ID_BLOCK_SIZE
            # write .tmp, fsync, rename, fsync the directory (Kafka's checkpoint protocol)
            write_atomically(self._path, f"{end}\n".encode("ascii"))
            self._next, self._end = start, end
        pid = self._next
        self._next += 1
        return pid


def producer_id_manager(broker) -> ProducerIdManager:
    """The broker's one :class:`ProducerIdManager` (kept in ``broker.extras``)."""
    manager = broker.extras.get("producer_ids")
    if manager is None:
        manager = broker.extras["producer_ids"] = ProducerIdManager(broker)
    return manager
