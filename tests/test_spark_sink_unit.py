"""The Spark sink's staging and commit protocol, without a Spark session.

Tasks are played by :class:`TaskStager` over pyarrow batches, the driver by
``commit_job``/``abort_job``; crashes are injected between the commit's steps.
"""

from __future__ import annotations

import json
import os

import pytest
from _logtools import topic_records

from kafkastore.errors import ConfigError
from kafkastore.manager import LogManager
from kafkastore.spark import writer as W
from kafkastore.spark.layout import STAGING_DIR
from kafkastore.spark.options import parse_write_options

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")

T0 = 1_700_000_000_000


def batch(n, start=0, key=True):
    cols = {"value": pa.array([f"v{start + i}".encode() for i in range(n)], pa.binary()),
            "timestamp": pa.array([T0 + start + i for i in range(n)], pa.int64())}
    if key:
        cols["key"] = pa.array([None if i % 5 == 0 else f"k{i}" for i in range(n)],
                               pa.string())
    return pa.RecordBatch.from_pydict(cols)


def stage(opts, job, task, *batches):
    s = W.TaskStager(opts, job, task, 0, f"0-{task}-0-{task}")
    for b in batches:
        s.add(b)
    return s.finish()


@pytest.fixture
def opts(tmp_path):
    return parse_write_options({"path": str(tmp_path / "logs"), "topic": "t",
                                "partitions": "3"}, streaming=False)


def test_commit_appends_in_task_order(opts):
    job = W.new_job_id()
    m1 = stage(opts, job, 1, batch(50, 1000))
    m0 = stage(opts, job, 0, batch(50, 0), batch(20, 500))
    W.commit_job(opts, job, [m1, None, m0])
    logs = topic_records(opts.path, "t")
    assert sorted(logs) == [0, 1, 2]
    for recs in logs.values():
        assert [r.offset for r in recs] == list(range(len(recs)))
        ts = [r.timestamp - T0 for r in recs]
        # task 0's rows (0..519) come before task 1's (1000..), each task's in order
        assert ts == sorted(ts)
    assert sum(len(v) for v in logs.values()) == 120
    assert not any(STAGING_DIR in dp for dp, _, _ in os.walk(opts.path))


def test_a_crash_inside_a_commit_is_rolled_back_by_the_next(opts, monkeypatch):
    with LogManager(opts.path, background=False) as m:
        for p in range(3):
            m.get_or_create("t", p).append([(b"old", b"x", T0)])
    job = W.new_job_id()
    msg = stage(opts, job, 0, batch(300))
    calls = []
    real = W._append_file

    def crash_after_first(log, *a):
        real(log, *a)
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("driver killed mid-commit")

    monkeypatch.setattr(W, "_append_file", crash_after_first)
    with pytest.raises(KeyboardInterrupt):
        W.commit_job(opts, job, [msg])
    monkeypatch.setattr(W, "_append_file", real)
    journals = [n for n in os.listdir(opts.path) if n.startswith(W.JOURNAL_PREFIX)]
    assert len(journals) == 1
    assert sum(len(v) for v in topic_records(opts.path, "t").values()) > 3   # half appended
    # the next write (any job) rolls the half-done commit back, then commits its own
    job2 = W.new_job_id()
    W.commit_job(opts, job2, [stage(opts, job2, 0, batch(9, 5000))])
    logs = topic_records(opts.path, "t")
    assert sum(len(v) for v in logs.values()) == 3 + 9
    assert all(v[0].value == b"x" for v in logs.values())
    assert not [n for n in os.listdir(opts.path) if n.startswith(W.JOURNAL_PREFIX)]


def test_streaming_batches_commit_once(tmp_path):
    opts = parse_write_options({"path": str(tmp_path / "logs"), "topic": "t",
                                "checkpointLocation": "/chk/q1"}, streaming=True)
    job = W.new_job_id()
    W.commit_job(opts, job, [stage(opts, job, 0, batch(10))], batch_id=0)
    W.commit_job(opts, job, [stage(opts, job, 0, batch(10))], batch_id=0)   # a replay
    W.commit_job(opts, job, [stage(opts, job, 0, batch(5))], batch_id=1)
    assert len(topic_records(opts.path, "t")[0]) == 15
    assert W.committed_batch(opts.path, "/chk/q1") == 1
    # a crash after the batch id was recorded but before the journal went: complete,
    # so the next commit must not roll it back
    with open(os.path.join(opts.path, W.JOURNAL_PREFIX + "dead.json"), "w") as f:
        json.dump({"job": "dead", "sink": "/chk/q1", "batch": 1, "leo": {"t": {"0": 10}}}, f)
    W.commit_job(opts, job, [stage(opts, job, 0, batch(1))], batch_id=2)
    assert len(topic_records(opts.path, "t")[0]) == 16
    with pytest.raises(ConfigError, match="stable id"):
        W.commit_job(parse_write_options({"path": opts.path, "topic": "t"}, streaming=True),
                     job, [], batch_id=3)


def test_abort_and_sweep(opts):
    job = W.new_job_id()
    stage(opts, job, 0, batch(30))
    assert any(STAGING_DIR in dp for dp, _, _ in os.walk(opts.path))
    W.abort_job(opts, job, [None])
    # partition directories that only staging had created are gone too
    assert [n for n in os.listdir(opts.path) if not n.startswith(".")] == []
    # a task that outlives the abort discards its own files
    late = W.TaskStager(opts, job, 5, 0, "late")
    late.add(batch(3))
    with pytest.raises(Exception, match="aborted"):
        late.finish()
    assert not any(STAGING_DIR in dp for dp, _, _ in os.walk(opts.path))
    # leftovers of another job: swept only once idle for longer than the TTL
    job2 = W.new_job_id()
    stage(opts, job2, 0, batch(30))
    assert W.sweep_staging(opts.path, 3_600_000) == []
    removed = W.sweep_staging(opts.path, 0, now=__import__("time").time() + 10)
    assert any(job2 in r for r in removed)
    assert not any(STAGING_DIR in dp for dp, _, _ in os.walk(opts.path))


def test_bad_columns(opts):
    s = W.TaskStager(opts, "j", 0, 0, "x")
    with pytest.raises(ConfigError, match="Required attribute 'value' not found"):
        s.add(pa.RecordBatch.from_pydict({"key": pa.array([b"k"])}))
    with pytest.raises(ConfigError, match="must be a string or binary"):
        s.add(pa.RecordBatch.from_pydict({"value": pa.array([1])}))
    bad = pa.RecordBatch.from_pydict({"value": pa.array([b"v"]), "partition": pa.array([7])})
    with pytest.raises(ConfigError, match="Partition 7 of topic t does not exist"):
        s.add(bad)
    s.discard()
    with pytest.raises(ConfigError, match="never removes partitions"):
        W.partition_count(opts.path, "t", 1) if os.makedirs(
            os.path.join(opts.path, "t-4"), exist_ok=True) is None else None
