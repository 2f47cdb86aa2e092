"""``kafkastore serve`` with confluent-kafka beside the library's own paths (issue 29).

The workload and its measurement are :mod:`kafkastore.bench.server` (one run: produce,
fetch, ``Log.append_batches`` and ``read`` + ``sendfile`` of the same batches, the
server's CPU time, the 1-record produce latency), run once in ``setup_cache`` at
:data:`N_RECORDS` (smaller than the issue's million: ``kafkastore bench --workloads server
--records 1000000`` is the full size) and tracked here. Skipped without confluent-kafka.
"""

from __future__ import annotations

from kafkastore.bench.server import require_confluent, run_server_workload

from . import skip_slow

N_RECORDS = 100_000


class ServerWorkload:
    timeout = 600
    number = 1
    repeat = 1

    def setup_cache(self):
        require_confluent()
        return run_server_workload(N_RECORDS, latency_samples=200).as_dict()

    def setup(self, r):
        skip_slow()

    def track_produce_mb_s(self, r):
        return r["value_bytes"] / r["produce_s"] / 1e6
    track_produce_mb_s.unit = "MB/s"

    def track_fetch_mb_s(self, r):
        return r["value_bytes"] / r["fetch_s"] / 1e6
    track_fetch_mb_s.unit = "MB/s"

    def track_produce_over_append_batches(self, r):
        """The server's produce speed as a fraction of ``Log.append_batches`` (bar 0.5)."""
        return r["append_batches_s"] / r["produce_s"]
    track_produce_over_append_batches.unit = "ratio"

    def track_fetch_over_read_sendfile(self, r):
        """The server's fetch speed as a fraction of ``read`` + ``sendfile`` (bar 0.5)."""
        return r["read_sendfile_s"] / r["fetch_s"]
    track_fetch_over_read_sendfile.unit = "ratio"

    def track_produce_cpu_s_per_gb(self, r):
        if r["produce_cpu_s"] is None:
            raise NotImplementedError("no /proc: the server's CPU time is not measured")
        return r["produce_cpu_s"] / (r["log_bytes"] / 1e9)
    track_produce_cpu_s_per_gb.unit = "s/GB"

    def track_fetch_cpu_s_per_gb(self, r):
        if r["fetch_cpu_s"] is None:
            raise NotImplementedError("no /proc: the server's CPU time is not measured")
        return r["fetch_cpu_s"] / (r["log_bytes"] / 1e9)
    track_fetch_cpu_s_per_gb.unit = "s/GB"

    def track_produce_latency_p99_ms(self, r):
        return r["latency_p99_ms"]
    track_produce_latency_p99_ms.unit = "ms"

    def track_produce_latency_p50_ms(self, r):
        return r["latency_p50_ms"]
    track_produce_latency_p50_ms.unit = "ms"


class CoordinatorWorkloads:
    """The coordinators (issue 30): a 5-member confluent-kafka group's forming and a 6th
    member's rebalance, one consumer's synchronous commits per second
    (:mod:`kafkastore.bench.groups`), and transactions of 100 records per second beside the
    same records without transactions (:mod:`kafkastore.bench.transactions`)."""

    timeout = 600
    number = 1
    repeat = 1

    def setup_cache(self):
        require_confluent()
        from kafkastore.bench.groups import run_group_workload
        from kafkastore.bench.transactions import run_transaction_workload

        g = run_group_workload(members=5, partitions=10, commits=500)
        t = run_transaction_workload(100, 100)
        return {"form_ms": g.form_s * 1e3, "rebalance_ms": g.rebalance_s * 1e3,
                "commits_per_s": g.commits_per_s,
                "transactions_per_s": t.transactions_per_s,
                "transactional_records_per_s": t.transactional_records_per_s,
                "plain_records_per_s": t.plain_records_per_s}

    def setup(self, r):
        skip_slow()

    def track_group_formed_ms(self, r):
        return r["form_ms"]
    track_group_formed_ms.unit = "ms"

    def track_rebalance_ms(self, r):
        return r["rebalance_ms"]
    track_rebalance_ms.unit = "ms"

    def track_commits_per_s(self, r):
        return r["commits_per_s"]
    track_commits_per_s.unit = "commits/s"

    def track_transactions_per_s(self, r):
        return r["transactions_per_s"]
    track_transactions_per_s.unit = "transactions/s"

    def track_transactional_over_plain_records(self, r):
        """Records/s in transactions of 100 over the same records without transactions."""
        return r["transactional_records_per_s"] / r["plain_records_per_s"]
    track_transactional_over_plain_records.unit = "ratio"
