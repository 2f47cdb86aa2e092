"""The transactions workload: transactions per second of one confluent-kafka producer
through ``kafkastore serve``, beside the same records produced without transactions.

A server process over a temporary directory (``kafkastore serve``, as
:mod:`kafkastore.bench.server` starts it), one topic of one partition; a transactional
producer runs ``transactions`` transactions of ``records_per_transaction`` records each
(begin, produce, commit: each commit is an EndTxn whose markers and
``__transaction_state`` records are written before it is answered), then an idempotent
producer (no transactional id) produces the same number of records of the same size and
waits for their acknowledgements. Both are wall-clock seconds on the client's side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafkastore.bench.server import require_confluent, served_topic

__all__ = ["TransactionsResult", "run_transaction_workload", "format_transactions"]

TOPIC = "bench-txn"
VALUE_SIZE = 100


@dataclass
class TransactionsResult:
    """One run's numbers (seconds are wall clock, measured by the client)."""

    transactions: int
    records_per_transaction: int
    #: the transactional producer: init_transactions excluded, every commit included
    transactional_s: float
    #: the same records without transactions (idempotent producer, acks=all)
    plain_s: float

    @property
    def records(self) -> int:
        return self.transactions * self.records_per_transaction

    @property
    def transactions_per_s(self) -> float:
        return self.transactions / self.transactional_s if self.transactional_s else 0.0

    @property
    def transactional_records_per_s(self) -> float:
        return self.records / self.transactional_s if self.transactional_s else 0.0

    @property
    def plain_records_per_s(self) -> float:
        return self.records / self.plain_s if self.plain_s else 0.0


def _send(p, n: int, failed: list) -> None:
    """The one produce loop both producers run (so only the transactions differ)."""
    value = b"v" * VALUE_SIZE
    for _ in range(n):
        p.produce(TOPIC, value=value, partition=0,
                  on_delivery=lambda err, msg: err is not None and failed.append(err))
        p.poll(0)


def _transactional(ck, bootstrap: str, transactions: int, per_txn: int) -> float:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-txn",
                     "linger.ms": 1})
    p.init_transactions(60)
    failed: list = []
    t0 = time.perf_counter()
    for _ in range(transactions):
        p.begin_transaction()
        _send(p, per_txn, failed)
        p.commit_transaction(60)   # (flushes the transaction's records first)
    elapsed = time.perf_counter() - t0
    if failed:
        raise RuntimeError(f"the transactional produce failed: {failed[:3]}")
    return elapsed


def _plain(ck, bootstrap: str, n: int) -> float:
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 1})
    failed: list = []
    t0 = time.perf_counter()
    _send(p, n, failed)
    left = p.flush(60)
    elapsed = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"the plain produce failed: {left} records left, "
                           f"errors {failed[:3]}")
    return elapsed


def run_transaction_workload(transactions: int = 200, records_per_transaction: int = 100, *,
                             directory: str | None = None,
                             config: dict[str, object] | None = None) -> TransactionsResult:
    """Run the workload once (see the module's docstring); files go to a temporary
    directory under ``directory``, removed at the end. ``NotImplementedError`` without
    confluent-kafka."""
    ck = require_confluent()
    if transactions < 1 or records_per_transaction < 1:
        raise ValueError("transactions and records_per_transaction must be at least 1")
    with served_topic(TOPIC, 1, config, directory=directory,
                      prefix="kafkastore-bench-txn-") as bootstrap:
        txn_s = _transactional(ck, bootstrap, transactions, records_per_transaction)
        plain_s = _plain(ck, bootstrap, transactions * records_per_transaction)
    return TransactionsResult(transactions, records_per_transaction, txn_s, plain_s)


def format_transactions(r: TransactionsResult) -> str:
    return (f"{r.transactions} transactions x {r.records_per_transaction} records: "
            f"{r.transactions_per_s:,.1f} transactions/s "
            f"({r.transactional_records_per_s:,.0f} records/s); without transactions "
            f"{r.plain_records_per_s:,.0f} records/s")
