"""A smoke test of kafkastore.bench.groups with tiny sizes (issue 30)."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")

from kafkastore.bench.groups import format_groups, run_group_workload  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def test_group_workload_tiny():
    r = run_group_workload(members=2, partitions=3, commits=20)
    assert (r.members, r.partitions, r.commits) == (2, 3, 20)
    assert 0 < r.form_s < 60 and 0 < r.rebalance_s < 60 and r.commit_s > 0
    assert r.commits_per_s == pytest.approx(20 / r.commit_s)
    assert "20 synchronous commits" in format_groups(r)


def test_group_workload_refuses_nonsense():
    with pytest.raises(ValueError):
        run_group_workload(members=0)
