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
