"""The transactions benchmark's workload runs end to end at a tiny size (no timing
checked)."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
pytestmark = pytest.mark.timeout(240)


def test_transaction_workload_smoke(tmp_path):
    from kafkastore.bench.transactions import format_transactions, run_transaction_workload

    r = run_transaction_workload(3, 5, directory=str(tmp_path))
    assert (r.transactions, r.records_per_transaction, r.records) == (3, 5, 15)
    assert r.transactional_s > 0 and r.plain_s > 0
    assert r.transactions_per_s == pytest.approx(3 / r.transactional_s)
    assert "transactions/s" in format_transactions(r)
    # the temporary directory is gone
    assert list(tmp_path.iterdir()) == []


def test_transaction_workload_refuses_nonsense():
    from kafkastore.bench.transactions import run_transaction_workload

    with pytest.raises(ValueError):
        run_transaction_workload(0, 100)
