"""``kafkastore.bench.suite`` and ``kafkastore bench``: every workload runs, the comparisons
are well formed, missing peers are reported as skipped, bad options are usage errors.

Nothing here asserts on timings (the brief: no timing assertions in unit tests); the
checks are on what was run and how it is reported. Tiny sizes keep this quick.
"""

from __future__ import annotations

import json

import pytest

from kafkastore.bench import suite, workload
from kafkastore.bench.suite import WORKLOADS, Comparison, format_table, run_suite
from kafkastore.cli import EXIT_OK, EXIT_USAGE, main

#: Peers each workload is compared with, by name (the table's "peer" column).
EXPECTED_PEERS = {
    "encode": ["aiokafka_c", "kafka_python"],
    "decode": ["aiokafka_c_crc", "kafka_python_crc"],
    "columns": ["aiokafka_c_crc"],
    "scan": ["aiokafka_c", "kafka_python", "crc32c (raw)"],
    "index": ["numpy searchsorted"],
    "append": ["naive aiokafka_c log"],
    "read": ["os.pread"],
    "recovery": ["crc32c (raw)"],
    "clean": ["naive aiokafka_c compactor"],
    "tiered": ["AESGCM alone", "local columns() + AESGCM alone",
               "local columns() + zstandard alone", "local log directory", "zstandard alone"],
    "server": ["Log.append_batches", "read + sendfile"],
}


def _installed(name: str) -> bool:
    try:
        workload.load_impl(name)
        return True
    except NotImplementedError:
        return False


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    labels = []
    out = run_suite(2000, codecs=("none", "zstd"), reps=1, progress=labels.append,
                    directory=str(tmp_path_factory.mktemp("bench")))
    return out, labels


def test_every_workload_runs_against_its_peers(results):
    out, labels = results
    assert [c.workload for c in out][0] == "encode"
    for name in WORKLOADS:
        rows = [c for c in out if c.workload == name]
        expected = EXPECTED_PEERS[name]
        if name == "server" and not any(c.skipped for c in rows):
            # with confluent-kafka, the coordinators' rows too: the group's has no peer
            expected = expected + ["-", "same records, no transactions"]
        assert sorted({c.peer for c in rows}) == sorted(expected), name
        for c in rows:
            # (the server rows' own side is confluent-kafka through the server: without
            # the client there is no time of either side, only the reason)
            assert c.count > 0 and (c.kafkastore_s > 0 or
                                    (name == "server" and c.skipped is not None))
            if c.peer == "-":   # a row of its own numbers (the group coordinator's)
                assert c.peer_s is None and c.ratio is None and c.skipped is None
            elif c.skipped is None:
                assert c.peer_s > 0 and c.ratio == pytest.approx(c.peer_s / c.kafkastore_s)
            else:
                assert c.peer_s is None and c.ratio is None
    # one row per codec for the record workloads, and the progress callback saw each step
    assert sorted(c.variant for c in out if c.workload == "encode"
                  and c.peer == "kafka_python") == ["none", "zstd"]
    assert labels[:3] == ["encode none", "encode zstd", "decode none"]
    assert labels[-3:] == ["clean", "tiered", "server"]


def test_record_counts_and_units(results):
    out, _ = results
    by = {(c.workload, c.variant, c.peer): c for c in out}
    assert by["encode", "none", "aiokafka_c"].count == 2000
    assert by["encode", "none", "aiokafka_c"].unit == "records"
    assert by["scan", "none", "crc32c (raw)"].unit == "bytes"
    assert by["index", "1000 random lookups, 10 MiB index", "numpy searchsorted"].count == 1000


@pytest.mark.parametrize("peer", ["aiokafka_c", "kafka_python"])
def test_installed_peers_are_measured(results, peer):
    if not _installed(peer):
        pytest.skip(f"{peer} is not installed here")
    out, _ = results
    rows = [c for c in out if c.peer == peer]
    assert rows and all(c.skipped is None for c in rows)


def test_a_missing_peer_is_reported_as_skipped(monkeypatch, tmp_path):
    real = workload.load_impl

    def load(name):
        if name.startswith("kafka_python"):
            raise NotImplementedError("kafka-python is not installed (test)")
        return real(name)

    monkeypatch.setattr(workload, "load_impl", load)
    out = run_suite(1000, workloads=["encode", "decode"], codecs=["none"], reps=1,
                    directory=str(tmp_path))
    skipped = [c for c in out if c.skipped]
    assert [(c.workload, c.peer) for c in skipped] == [("encode", "kafka_python"),
                                                      ("decode", "kafka_python_crc")]
    assert "kafka-python is not installed (test)" in format_table(out)
    assert all(c.skipped is None for c in out if not c.peer.startswith("kafka_python"))


@pytest.mark.parametrize("kwargs, message", [
    ({"workloads": ["encode", "nope"]}, "unknown workload(s) nope"),
    ({"codecs": ["brotli"]}, "unknown codec 'brotli'"),
    ({"records": 10}, "at least 1000"),
    ({"reps": 0}, "reps must be at least 1"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_suite(**{"records": 1000, **kwargs})


def test_format_table_text_and_markdown():
    rows = [Comparison("encode", "none", "aiokafka_c", 0.002, 0.005, 100_000, "records"),
            Comparison("read", "x", "os.pread", 0.010, 0.004, 2000, "reads"),
            Comparison("decode", "none", "kafka_python_crc", 0.01, None, 100_000, "records",
                       skipped="absent")]
    text = format_table(rows).splitlines()
    assert text[0].split()[:3] == ["workload", "variant", "kafkastore"]
    assert text[1].split() == ["encode", "none", "2.00", "ms", "50.00", "M", "rec/s",
                               "aiokafka_c", "5.00", "ms", "2.50x"]
    assert text[2].endswith("0.40x") and "5.00 us/read" in text[2]
    assert text[3].endswith("skipped: absent")
    md = format_table(rows, markdown=True).splitlines()
    assert md[0].startswith("| workload |") and md[1].startswith("|---|")
    assert md[2] == "| encode | none | 2.00 ms | 50.00 M rec/s | aiokafka_c | 5.00 ms | 2.50x |"


def test_environment_names_versions():
    env = suite.environment()
    assert env["kafkastore"].endswith("kernels)") and env["python"]
    for peer in ("aiokafka_c", "kafka_python"):
        assert env[peer].startswith("absent: ") != _installed(peer)


def test_cli_bench_prints_the_table_and_json(capsys, tmp_path):
    code = main(["bench", "--records", "1000", "--reps", "1", "--workloads", "encode,scan",
                 "--codecs", "none", "--tmp-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == EXIT_OK and err == ""   # stderr is not a terminal: no progress bar
    lines = out.splitlines()
    assert lines[0].startswith("kafkastore bench: 1,000 records, best of 1 reps")
    table = lines[lines.index("") + 1:]
    assert table[0].split()[0] == "workload"
    assert [line.split()[0] for line in table[1:]] == ["encode"] * 2 + ["scan"] * 3
    code = main(["bench", "--records", "1000", "--reps", "1", "--workloads", "recovery",
                 "--json", "--tmp-dir", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and doc["records"] == 1000
    assert [r["workload"] for r in doc["results"]] == ["recovery"]
    assert doc["results"][0]["peer"] == "crc32c (raw)" and doc["results"][0]["ratio"] > 0
    assert list(tmp_path.iterdir()) == []   # the workload's files are removed


@pytest.mark.parametrize("argv, message", [
    (["--workloads", "encode,bogus"], "unknown workload(s) bogus"),
    (["--codecs", "lzma"], "unknown codec 'lzma'"),
    (["--records", "5"], "at least 1000"),
])
def test_cli_bench_usage_errors(capsys, argv, message):
    code = main(["bench", *argv])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    assert err.startswith("kafkastore bench: ") and message in err
