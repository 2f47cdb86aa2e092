"""The consumer-groups workload: the rebalance time of a group of confluent-kafka
consumers and the synchronous commits per second of one consumer, through
``kafkastore serve``.

A server process over a temporary directory (``kafkastore serve``, as
:mod:`kafkastore.bench.server` starts it, with ``group.initial.rebalance.delay.ms=0`` so
that the group's first rebalance does not wait), one topic of ``partitions`` partitions.

- Rebalance: ``members`` consumers subscribe to the topic in one group; the time from the
  first ``subscribe`` until every partition is assigned to exactly one of them (each with
  a share) is the group's forming; then one more member joins and the time until the
  partitions are split again among all of them is one rebalance of a stable group
  (every member rejoins: the eager protocol). Wall clock, on the client's side.
- Commits: one consumer of its own group commits ``commits`` offsets one at a time,
  synchronously (each an OffsetCommit answered once its ``__consumer_offsets`` record is
  appended).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafkastore.bench.server import require_confluent, served_topic

__all__ = ["GroupsResult", "run_group_workload", "format_groups"]

TOPIC = "bench-groups"


@dataclass
class GroupsResult:
    """One run's numbers (seconds are wall clock, measured by the client)."""

    members: int
    partitions: int
    #: from the first subscribe until the group's assignment covers every partition
    form_s: float
    #: one more member joins a stable group of ``members``: until the split is whole again
    rebalance_s: float
    commits: int
    commit_s: float

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.commit_s if self.commit_s else 0.0


def _settled(consumers, partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.01)
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        flat = sorted(p for s in owned for p in s)
        if flat == list(range(partitions)) and all(owned[:partitions]):
            return
    raise RuntimeError(f"the group's assignment did not settle within {timeout} s")


def run_group_workload(members: int = 5, partitions: int = 10, commits: int = 1000,
                       timeout: float = 120.0) -> GroupsResult:
    """Run the workload (see the module docstring) against a fresh server process."""
    ck = require_confluent()
    if members < 1 or partitions < 1 or commits < 1:
        raise ValueError("members, partitions and commits must be at least 1")
    config = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
              "offsets.topic.num.partitions": 1}
    with served_topic(TOPIC, partitions, config, prefix="kafkastore-bench-groups-") as bs:
        consumers = []

        def consumer(group: str):
            c = ck.Consumer({"bootstrap.servers": bs, "group.id": group,
                             "enable.auto.commit": False, "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 100})
            consumers.append(c)
            return c

        try:
            group = [consumer("bench-rebalance") for _ in range(members)]
            start = time.perf_counter()
            for c in group:
                c.subscribe([TOPIC])
            _settled(group, partitions, timeout)
            form_s = time.perf_counter() - start
            group.append(consumer("bench-rebalance"))
            start = time.perf_counter()
            group[-1].subscribe([TOPIC])
            _settled(group, partitions, timeout)
            rebalance_s = time.perf_counter() - start

            committer = consumer("bench-commits")
            committer.subscribe([TOPIC])
            _settled([committer], partitions, timeout)
            tp = ck.TopicPartition
            start = time.perf_counter()
            for i in range(commits):
                committer.commit(offsets=[tp(TOPIC, i % partitions, i)], asynchronous=False)
            commit_s = time.perf_counter() - start
        finally:
            for c in consumers:   # (before the server stops)
                c.close()
    return GroupsResult(members, partitions, form_s, rebalance_s, commits, commit_s)


def format_groups(r: GroupsResult) -> str:
    return (f"group of {r.members} over {r.partitions} partitions: formed in "
            f"{r.form_s * 1000:.0f} ms, one more member rebalanced in "
            f"{r.rebalance_s * 1000:.0f} ms; {r.commits} synchronous commits in "
            f"{r.commit_s:.2f} s ({r.commits_per_s:.0f}/s)")
