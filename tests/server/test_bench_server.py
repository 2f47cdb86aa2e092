"""The server benchmark's workload runs end to end at a tiny size (no timing checked)."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
pytestmark = pytest.mark.timeout(240)


def test_server_workload_smoke(tmp_path):
    from kafkastore.bench.server import format_result, run_server_workload

    r = run_server_workload(2000, latency_samples=20, directory=str(tmp_path))
    assert r.records == 2000 and r.value_bytes == 200_000
    # the batches read back hold the 2000 records' values and their framing
    assert r.log_bytes > r.value_bytes
    assert r.latency_samples == 20 and r.latency_p50_ms <= r.latency_p99_ms
    text = format_result(r)
    assert "produce (server)" in text and "read + sendfile" in text


def test_suite_lists_the_server_workload():
    from kafkastore.bench.suite import WORKLOADS, count_steps

    assert "server" in WORKLOADS
    assert count_steps(["server"], ["none"]) == 1
