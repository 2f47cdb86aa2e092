"""``kafkastore.bench.tiered``: the tiered workload runs at a tiny size and reports its rows.

No timing assertions: the checks are on what was run and how it is counted. The byte
counts of the fetch measurement are deterministic, so their invariants are checked: a
query fetches at least the chunks its answer lies in, and those are among the chunks the
log view asked for.
"""

from __future__ import annotations

import pytest

from kafkastore.bench import tiered
from kafkastore.bench.suite import run_suite
from kafkastore.bench.workload import make_workload

pytest.importorskip("cryptography")
pytest.importorskip("Crypto", reason="the key ring's RSA is pycryptodome's")

N = 2000


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    keys, values = make_workload(N)
    fx = tiered.build_fixture(str(tmp_path_factory.mktemp("tiered")), keys, values)
    yield fx
    fx.close()


def test_every_copy_reads_back_the_partition(fixture):
    assert sorted(fixture.copies) == sorted(c.name for c in tiered.COPIES)
    assert fixture.segments == tiered.SEGMENTS and not fixture.missing
    local = fixture.view("local")
    expected = local.columns()
    assert len(expected) == N
    for name in fixture.copies:
        log = fixture.view(name)
        assert tiered.records_count(log) == N, name
        assert (log.columns().offset == expected.offset).all(), name
        assert tiered.raw_read(fixture.copy(name), log) == fixture.original_bytes, name


def test_the_transforms_alone_make_the_original_bytes(fixture):
    for spec in (tiered.ZSTD, tiered.ZSTD_SMALL):
        chunks = tiered.transformed_chunks(fixture.copy(spec.name), fixture.tp)
        assert tiered.zstd_alone(chunks) == fixture.original_bytes
    copy = fixture.copy(tiered.AES.name)
    chunks = tiered.transformed_chunks(copy, fixture.tp)
    keys = tiered.data_keys(fixture, copy, fixture.tp)
    assert tiered.aesgcm_alone(chunks, keys) == fixture.original_bytes


@pytest.mark.parametrize("name", [tiered.ZSTD.name, tiered.ZSTD_SMALL.name])
def test_fetch_counts(fixture, name):
    out = tiered.measure_fetches(fixture, name, queries=3, records_per_query=300)
    assert [r.query for r in out] == ["records(a, a+300)", "offset_for_timestamp()",
                                      "read()"]
    for r in out:
        assert r.queries == 3 and r.copy == name and r.where == "local"
        assert r.one_time > 0 and r.gets > 0
        assert 0 < r.needed <= r.asked, r
        assert r.fetched >= r.needed, r
        assert r.as_dict()["ratio"] == pytest.approx(r.fetched / r.needed)


def test_suite_runs_the_tiered_workload(tmp_path):
    labels = []
    out = run_suite(N, workloads=["tiered"], reps=1, progress=labels.append,
                    directory=str(tmp_path))
    assert labels == ["tiered"]
    assert {c.workload for c in out} == {"tiered"}
    assert sorted({c.peer for c in out}) == [
        "AESGCM alone", "local columns() + AESGCM alone", "local columns() + zstandard alone",
        "local log directory", "zstandard alone"]
    by_peer = {}
    for c in out:
        assert c.skipped is None and c.kafkastore_s > 0 and c.peer_s > 0 and c.count > 0
        by_peer.setdefault(c.peer, []).append(c.variant)
    assert len(by_peer["local log directory"]) == 6   # 3 reads x 2 plain copies
    assert len(by_peer["zstandard alone"]) == 4       # 2 reads x 2 chunk sizes
    assert len(by_peer["AESGCM alone"]) == 2
    assert len(by_peer["local columns() + zstandard alone"]) == 2   # columns() only
    assert len(by_peer["local columns() + AESGCM alone"]) == 1
    assert {c.unit for c in out if c.peer != "local log directory"} == {"bytes"}
