"""The server benchmark's CPU meter (issue 29, speed): the server's CPU seconds are read
per thread in nanoseconds, not in 10 ms ticks, and fall back to the ticks when a thread
came or went in the phase (its time would be lost otherwise). No timing is asserted."""

from __future__ import annotations

import os
import threading

import pytest

from kafkastore.bench.server import ServerResult, _cpu_between, _cpu_meter

_LINUX = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task"),
                            reason="needs Linux /proc/<pid>/task")


def _burn(n: int = 20_000) -> int:
    return sum(i * i for i in range(n))


@_LINUX
def test_meter_is_finer_than_ticks():
    pid = os.getpid()
    tick = 1 / os.sysconf("SC_CLK_TCK")
    readings = []
    for _ in range(20):
        _burn()
        exact, tids, ticks = _cpu_meter(pid)
        assert str(threading.get_native_id()) in tids
        readings.append(exact)
    if readings[0] is None:
        pytest.skip("no /proc/<pid>/task/<tid>/schedstat (kernel without schedstats)")
    assert readings == sorted(readings)   # never goes backwards
    # some reading falls between two ticks: tick-rounded values never do
    assert any(abs(r / tick - round(r / tick)) > 1e-6 for r in readings)


@_LINUX
def test_between_uses_the_exact_sum_while_the_threads_stay():
    pid = os.getpid()
    before = _cpu_meter(pid)
    _burn()
    after = _cpu_meter(pid)
    if before[0] is None:
        pytest.skip("no schedstat")
    assert _cpu_between(before, after) == after[0] - before[0]


def test_between_falls_back_to_ticks_when_threads_changed():
    before = (1.0, frozenset({"1", "2"}), 0.5)
    after = (1.5, frozenset({"1"}), 0.9)   # thread 2 exited: its time left the sum
    assert _cpu_between(before, after) == pytest.approx(0.4)
    assert _cpu_between((None, frozenset(), 0.5), (None, frozenset(), 0.7)) == \
        pytest.approx(0.2)
    assert _cpu_between((None, frozenset(), None), (None, frozenset(), None)) is None


def test_capacity_and_ratios():
    r = ServerResult(records=1000, value_bytes=100_000, log_bytes=110_000, produce_s=2.0,
                     fetch_s=4.0, append_batches_s=0.1, read_sendfile_s=0.05,
                     produce_cpu_s=0.2, fetch_cpu_s=0.025, produce_client_cpu_s=1.0,
                     fetch_client_cpu_s=1.0, latency_p50_ms=0.2, latency_p99_ms=0.3,
                     latency_samples=10, append_batches_cpu_s=0.1,
                     read_sendfile_cpu_s=0.01)
    # 100 kB of values in 0.2 s of server CPU: 0.5 MB/s; append_batches did them in 0.1 s
    assert r.capacity(0.2) == pytest.approx(0.5)
    assert r.capacity_ratios() == (pytest.approx(0.5), pytest.approx(2.0))
    no_proc = ServerResult(**{**r.as_dict(), "produce_cpu_s": None, "fetch_cpu_s": None})
    assert no_proc.capacity(None) is None and no_proc.capacity_ratios() == (None, None)
