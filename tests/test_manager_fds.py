"""File descriptors per segment (issue 18, defect 11).

A ``LogManager`` held about two descriptors per rolled segment (Python's ``mmap`` keeps a
duplicate descriptor per index map), so thousands of partitions ran out of descriptors,
and ``close()`` then stopped at the first failure. Kafka keeps one per segment (the
``.log``); kafkastore now keeps that plus one per open partition (its directory lock).
Each scenario runs in a child process with its own ``RLIMIT_NOFILE``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="counts descriptors in /proc/self/fd")

_CHILD = textwrap.dedent("""
    import json, os, resource, sys
    from kafkastore.manager import LogManager

    root, partitions, segments, limit = sys.argv[1], *map(int, sys.argv[2:5])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    fds = lambda: len(os.listdir("/proc/self/fd"))
    base = fds()
    out = {"written": {}, "error": None, "close_error": None}
    m = LogManager(root, {"segment.bytes": 1 << 20}, background=False)
    try:
        for p in range(partitions):
            log = m.get_or_create("t", p)
            for s in range(segments):
                log.append([(b"k", b"v%d" % s, 1_700_000_000_000)])
                log.flush()                      # acknowledged: must survive
                out["written"][p] = s + 1
                if s + 1 < segments:
                    log.roll()
        out["segments"] = sum(len(l.segments) for l in m.logs().values())
        out["fds"] = fds() - base
    except OSError as exc:
        out["error"] = repr(exc)
    try:
        m.close()
    except OSError as exc:
        out["close_error"] = repr(exc)
    out["fds_after_close"] = fds() - base
    print(json.dumps(out))
""")


def _run(tmp_path, partitions: int, segments: int, limit: int) -> dict:
    root = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(partitions),
                           str(segments), str(limit)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _reopen(tmp_path) -> dict:
    from kafkastore.manager import LogManager
    with LogManager(str(tmp_path / "logs"), background=False) as m:
        return {tp.partition: [r.value for r in _all(log)] for tp, log in m.logs().items()}


def _all(log):
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = list(log.read(offset, 1 << 20).records())
        out += records
        offset = records[-1].offset + 1
    return out


def test_one_descriptor_per_segment_fits_a_limit_two_per_segment_did_not(tmp_path):
    """300 partitions of 5 segments under a 2,000 descriptor limit: 1,500 ``.log`` files
    and 300 directory locks; with two per segment it failed."""
    out = _run(tmp_path, 300, 5, 2000)
    assert out["error"] is None and out["close_error"] is None, out
    assert out["segments"] == 1500
    assert out["fds"] <= 1500 + 300 + 8, out   # one per segment, one per partition
    assert out["fds_after_close"] == 0
    got = _reopen(tmp_path)
    assert got == {p: [b"v%d" % s for s in range(5)] for p in range(300)}


def test_running_out_of_descriptors_loses_nothing_acknowledged_and_close_releases_all(
        tmp_path):
    """Under a limit too low for the workload, the write fails with a typed OSError;
    close() then closes every log (no descriptor left), and every flushed record is
    there after a reopen."""
    out = _run(tmp_path, 300, 5, 600)
    assert out["error"] is not None and "Too many open files" in out["error"], out
    assert out["fds_after_close"] == 0, out
    got = _reopen(tmp_path)
    for p, n in out["written"].items():
        assert got[int(p)][:n] == [b"v%d" % s for s in range(n)], p
