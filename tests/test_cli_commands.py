"""The log-directory commands of the ``kafkastore`` CLI: describe, produce, consume,
verify (and --repair), compact and retention, through ``main(argv)`` and once as a real
process. Expected values follow from what each test writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kafkastore.cli import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, main
from kafkastore.manager import LogManager


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def make_store(root, topic="orders", partitions=2, per_partition=20, **config):
    with LogManager(str(root), {"segment.bytes": 300, **config}, background=False) as m:
        for p in range(partitions):
            log = m.get_or_create(topic, p)
            for i in range(per_partition):
                log.append([(b"k%d" % (i % 3), b"v%d-%d" % (p, i))], timestamp=1000 + i)
    return root


def test_describe_lists_partitions_offsets_and_sizes(tmp_path, capsys):
    make_store(tmp_path)
    code, out, err = run(capsys, "describe", tmp_path, "--json")
    assert code == EXIT_OK and err == ""
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["topic"], r["partition"]) for r in rows] == [("orders", 0), ("orders", 1)]
    for r in rows:
        assert (r["log_start_offset"], r["log_end_offset"], r["max_timestamp"]) == (0, 20, 1019)
        assert r["segments"] > 1 and r["log_bytes"] <= r["bytes_on_disk"]
    code, out, _ = run(capsys, "describe", tmp_path)
    assert code == EXIT_OK and "orders-1" in out and "partition" in out.splitlines()[0]


def _policies(out):
    return {(r["topic"], r["partition"]): (r["cleanup_policy"], r["cleanup_policy_source"])
            for r in map(json.loads, out.splitlines())}


def test_describe_cleanup_policy_from_a_kraft_metadata_log(tmp_path, capsys):
    """A KRaft broker's log directory: cleanup.policy comes from __cluster_metadata-0 (the
    topic's own config, else the cluster default), which is not listed as a partition."""
    import uuid

    from _kraft import BROKER, TOPIC, config_record, topic_record, write_segment

    make_store(tmp_path, topic="orders", partitions=1)
    make_store(tmp_path, topic="users", partitions=1)
    make_store(tmp_path, topic="events", partitions=1)
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    write_segment(meta, 0, [
        topic_record("users", uuid.UUID(int=1)),
        config_record(TOPIC, "users", "cleanup.policy", "compact"),
        topic_record("orders", uuid.UUID(int=2)),
        config_record(TOPIC, "orders", "retention.ms", "1000"),
    ])
    code, out, err = run(capsys, "describe", tmp_path, "--json")
    assert code == EXIT_OK and err == ""
    assert _policies(out) == {("events", 0): ("delete", "default"),
                              ("orders", 0): ("delete", "default"),
                              ("users", 0): ("compact", "metadata")}
    # a cluster-wide default reaches the topics without their own
    write_segment(meta, 4, [config_record(BROKER, "", "log.cleanup.policy", "compact,delete")])
    code, out, _ = run(capsys, "describe", tmp_path, "--json")
    assert _policies(out)[("orders", 0)] == ("compact,delete", "metadata: cluster default")
    assert _policies(out)[("users", 0)] == ("compact", "metadata")
    code, out, _ = run(capsys, "describe", tmp_path)
    lines = out.splitlines()
    assert lines[0].endswith("cleanup policy")
    assert lines[-1].startswith(f"KRaft metadata log {meta}: 2 topics, read to offset 5")
    assert [line.split()[0] for line in lines[1:-1]] == ["events-0", "orders-0", "users-0"]
    assert lines[3].endswith("compact (metadata)")
    # --config wins; --metadata-dir reads one kept elsewhere
    code, out, _ = run(capsys, "describe", tmp_path, "--json", "--config",
                       "cleanup.policy=delete")
    assert set(_policies(out).values()) == {("delete", "--config")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    meta.rename(elsewhere / "__cluster_metadata-0")
    code, out, _ = run(capsys, "describe", tmp_path, "--json")
    assert _policies(out)[("users", 0)] == ("delete", "default")
    code, out, _ = run(capsys, "describe", tmp_path, "--json", "--metadata-dir", elsewhere)
    assert _policies(out)[("users", 0)] == ("compact", "metadata")


def test_describe_with_an_unreadable_metadata_log_warns_and_goes_on(tmp_path, capsys):
    make_store(tmp_path, partitions=1)
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    from _kraft import write_segment

    write_segment(meta, 0, [b"\x00\x02\x00"])          # frame version 0: refused
    code, out, err = run(capsys, "describe", tmp_path, "--json")
    assert code == EXIT_OK and _policies(out) == {("orders", 0): ("delete", "default")}
    assert err.startswith(f"kafkastore describe: {meta}: cannot read the metadata log")
    code, _, err = run(capsys, "describe", tmp_path, "--metadata-dir", tmp_path / "orders-0")
    assert code == EXIT_USAGE and "no KRaft metadata log" in err
    code, _, err = run(capsys, "describe", tmp_path, "--config", "cleanup.policy=sometimes")
    assert code == EXIT_USAGE and "cleanup.policy" in err


def test_consume_from_offsets_timestamps_and_the_end(tmp_path, capsys):
    make_store(tmp_path)
    code, out, _ = run(capsys, "consume", tmp_path, "orders", "--partition", 1,
                       "--max-records", 3, "--print-key", "--print-offset")
    assert code == EXIT_OK
    assert out.splitlines() == ["1:0\tk0\tv1-0", "1:1\tk1\tv1-1", "1:2\tk2\tv1-2"]
    code, out, _ = run(capsys, "consume", tmp_path, "orders", "--partition", 0,
                       "--timestamp", 1017, "--format", "json")
    got = [json.loads(line) for line in out.splitlines()]
    assert [(g["offset"], g["value"], g["timestamp"]) for g in got] == [
        (17, "v0-17", 1017), (18, "v0-18", 1018), (19, "v0-19", 1019)]
    code, out, _ = run(capsys, "consume", tmp_path, "orders", "--partition", 0, "--last", 2)
    assert out.splitlines() == ["v0-18", "v0-19"]
    code, out, _ = run(capsys, "consume", tmp_path, "orders", "--offset", 19)
    assert out.splitlines() == ["v0-19", "v1-19"]


def test_produce_places_keyed_records_by_murmur2(tmp_path, capsys):
    from kafkastore._kernels import murmur2

    src = tmp_path / "in.txt"
    keys = [b"alpha", b"beta", b"gamma", b"delta", b"alpha"]
    src.write_text("".join(f"{k.decode()}:value-{i}\n" for i, k in enumerate(keys)))
    code, out, err = run(capsys, "produce", tmp_path / "logs", "orders", "--input", src,
                         "--key-separator", ":", "--partitions", 3, "--compression", "lz4")
    assert code == EXIT_OK, err
    assert out.startswith("produced 5 records to orders")
    code, out, _ = run(capsys, "consume", tmp_path / "logs", "orders", "--format", "json")
    got = [json.loads(line) for line in out.splitlines()]
    assert len(got) == 5
    for g in got:
        assert g["partition"] == murmur2.partition(g["key"].encode(), 3)
    by_key = {}
    for g in got:
        by_key.setdefault(g["key"], set()).add(g["partition"])
    assert all(len(p) == 1 for p in by_key.values())   # a key always lands together


def test_produce_json_lines_with_headers_and_partition(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text('{"key": "a", "value": {"x": 1}, "headers": {"h": "1"}, "partition": 1}\n'
                   '{"value": "plain"}\n')
    code, _, err = run(capsys, "produce", tmp_path / "logs", "t", "--input", src,
                       "--format", "json", "--partitions", 2)
    assert code == EXIT_OK, err
    code, out, _ = run(capsys, "consume", tmp_path / "logs", "t", "--format", "json")
    got = sorted((json.loads(line) for line in out.splitlines()),
                 key=lambda g: g["partition"])
    assert got[1]["partition"] == 1 and got[1]["key"] == "a"
    assert json.loads(got[1]["value"]) == {"x": 1} and got[1]["headers"] == {"h": "1"}
    assert got[0]["key"] is None and got[0]["value"] == "plain"


def test_verify_finds_a_torn_tail_and_repair_truncates_it(tmp_path, capsys):
    make_store(tmp_path, partitions=1)
    seg = sorted((tmp_path / "orders-0").glob("*.log"))[-2]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x50\x00\x00\x01\x00garbage")
    code, out, _ = run(capsys, "verify", tmp_path)
    assert code == EXIT_PROBLEM and "partial entry at the end" in out
    code, out, _ = run(capsys, "verify", tmp_path, "--repair")
    assert code == EXIT_OK and "bytes truncated" in out
    code, out, _ = run(capsys, "verify", tmp_path)
    assert code == EXIT_OK and "no problems" in out


def test_verify_reports_a_corrupt_entry(tmp_path, capsys):
    make_store(tmp_path, partitions=1)
    seg = sorted((tmp_path / "orders-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[70] ^= 0xFF
    seg.write_bytes(bytes(data))
    code, out, _ = run(capsys, "verify", tmp_path)
    assert code == EXIT_PROBLEM and "corrupt entry" in out


def test_compact_and_retention_print_what_changed(tmp_path, capsys):
    make_store(tmp_path, partitions=1)
    code, out, _ = run(capsys, "compact", tmp_path, "--roll", "--config",
                       "cleanup.policy=compact", "--dedupe-buffer-size", 1 << 20)
    assert code == EXIT_OK
    assert "read 20 records, kept 3, removed 17" in out
    code, out, _ = run(capsys, "consume", tmp_path, "orders")
    assert out.splitlines() == ["v0-17", "v0-18", "v0-19"]
    make_store(tmp_path / "r", partitions=1)
    code, out, _ = run(capsys, "retention", tmp_path / "r", "--config", "retention.bytes=300")
    assert code == EXIT_OK and "removed" in out
    code, out, _ = run(capsys, "describe", tmp_path / "r", "--json")
    assert json.loads(out)["log_start_offset"] > 0


class _Terminal:
    """A stand-in for a terminal's stderr: progress bars draw only on a terminal."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, s):
        self.text += s

    def flush(self):
        pass


@pytest.mark.parametrize("argv", [
    ["compact", "{root}", "--roll", "--config", "cleanup.policy=compact"],
    ["verify", "{root}"],
    ["produce", "{root}", "more", "--input", "{input}"],
])
def test_progress_bars_only_on_a_terminal(tmp_path, capsys, monkeypatch, argv):
    make_store(tmp_path / "root", partitions=2, per_partition=200)
    (tmp_path / "in.txt").write_text("".join(f"line {i}\n" for i in range(1000)))
    argv = [a.format(root=tmp_path / "root", input=tmp_path / "in.txt") for a in argv]
    code, _, err = run(capsys, *argv)          # not a terminal: no bar
    assert code == EXIT_OK and err == ""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(argv) == EXIT_OK
    label = argv[0]
    assert f"\r{label}" in terminal.text and "%" in terminal.text
    assert "100.0%" in terminal.text
    assert terminal.text.endswith("\r")          # the bar's line is cleared at the end


@pytest.mark.parametrize("argv, message", [
    (["describe", "{missing}"], "no such log directory"),
    (["consume", "{root}", "nope"], "no partition of topic 'nope'"),
    (["consume", "{root}", "bad topic!"], "bad topic!"),
    (["produce", "{root}", "t", "--input", "{missing}"], "No such file"),
    (["retention", "{root}", "--config", "retention.bytes"], "--config expects name=value"),
    (["retention", "{root}", "--config", "retention.bytes=lots"], "retention.bytes"),
    (["produce", "{root}", "t", "--partitions", "0"], "--partitions must be at least 1"),
])
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    make_store(tmp_path / "root", partitions=1)
    subs = {"root": tmp_path / "root", "missing": tmp_path / "missing"}
    code, out, err = run(capsys, *(a.format(**subs) for a in argv))
    assert code == EXIT_USAGE
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1


def _process(*argv, stdin=None):
    """``python -m kafkastore ARGV`` as a real process (this interpreter, this kafkastore)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "kafkastore", *map(str, argv)],
                          input=stdin, capture_output=True, text=True, env=env, timeout=300)


def test_every_command_runs_as_a_real_process(tmp_path):
    """A user's session, each step a process of its own: produce from a file, describe,
    consume, dump-log, verify (clean, then broken: exit 1), verify --repair, compact,
    retention, bench and demo."""
    root = tmp_path / "logs"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"key": f"k{i % 4}", "value": f"v{i}"}) + "\n"
                              for i in range(40)))
    res = _process("produce", root, "users", "--input", source, "--format", "json",
                   "--partitions", "2", "--batch-size", "7", "--config", "segment.bytes=400")
    assert res.returncode == 0 and res.stderr == ""
    assert "40 records" in res.stdout

    res = _process("describe", root, "--json")
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert res.returncode == 0 and [r["partition"] for r in rows] == [0, 1]
    assert sum(r["log_end_offset"] for r in rows) == 40

    res = _process("consume", root, "users", "--format", "json")
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert res.returncode == 0 and sorted(int(g["value"][1:]) for g in got) == list(range(40))
    # keyed records: one key, one partition (murmur2), whatever the order of arrival
    assert all(len({g["partition"] for g in got if g["key"] == k}) == 1
               for k in ("k0", "k1", "k2", "k3"))

    segments = sorted((root / "users-0").glob("*.log"))
    res = _process("dump-log", "--files", ",".join(map(str, segments)), "--deep-iteration")
    assert res.returncode == 0 and res.stdout.startswith(f"Dumping {segments[0]}")
    assert res.stdout.count("| offset: ") == rows[0]["log_end_offset"]

    res = _process("verify", root)
    assert res.returncode == 0 and "no problems" in res.stdout
    with open(segments[-1], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00")   # a torn batch header
    res = _process("verify", root)
    assert res.returncode == 1 and "partial entry" in res.stdout
    res = _process("verify", root, "--repair")
    assert res.returncode == 0 and "users-0: recovered; 10 bytes truncated" in res.stdout
    assert _process("verify", root).returncode == 0

    res = _process("compact", root, "--roll", "--config", "cleanup.policy=compact")
    assert res.returncode == 0 and "removed" in res.stdout
    res = _process("consume", root, "users", "--format", "json")
    survivors = [json.loads(line) for line in res.stdout.splitlines()]
    assert sorted(g["value"] for g in survivors) == ["v36", "v37", "v38", "v39"]

    res = _process("retention", root, "--config", "retention.ms=0")
    assert res.returncode == 0 and res.stdout.count("removed") == 2

    res = _process("bench", "--records", "1000", "--reps", "1", "--workloads", "scan")
    assert res.returncode == 0 and res.stdout.count("\nscan ") == 3

    res = _process("demo", tmp_path / "demo", "--records", "2000")
    assert res.returncode == 0 and "produced 2000 records to orders" in res.stdout
    assert res.stdout.rstrip().endswith("go into a broker's log.dirs)")


@pytest.mark.parametrize("argv, code, message", [
    (["describe", "{missing}"], 2, "no such log directory"),
    (["produce", "{root}", "bad/topic"], 2, "bad/topic"),
    (["consume", "{root}", "nope"], 2, "no partition of topic 'nope'"),
    (["dump-log", "--files", "{missing}/0.log"], 1, "0.log"),
    (["verify", "{missing}"], 2, "no such log directory"),
    (["compact", "{missing}"], 2, "no such log directory"),
    (["retention", "{root}", "--config", "retention.ms=soon"], 2, "retention.ms"),
    (["bench", "--workloads", "warp"], 2, "unknown workload(s) warp"),
    (["consume"], 2, "the following arguments are required"),
])
def test_mistakes_in_a_real_process_exit_with_one_line(tmp_path, argv, code, message):
    make_store(tmp_path / "root", partitions=1)
    subs = {"root": tmp_path / "root", "missing": tmp_path / "missing"}
    res = _process(*(a.format(**subs) for a in argv), stdin="")
    assert res.returncode == code, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    # dump-log prints "Dumping <file>" before it tries to open the file, as Kafka's does
    assert res.stdout == "" or argv[0] == "dump-log"


@pytest.mark.parametrize("command", ["demo", "dump-log", "describe", "produce", "consume",
                                     "verify", "compact", "retention", "bench", "serve"])
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and f"usage: kafkastore {command}" in out
    if command != "demo":
        assert "example:\n  kafkastore " in out or "example:\n  printf" in out


def test_the_installed_console_script(tmp_path):
    """The ``kafkastore`` entry point installed next to this interpreter, when there is
    one (CI installs the wheel; a source checkout may not have it)."""
    script = os.path.join(os.path.dirname(sys.executable), "kafkastore")
    if not os.path.exists(script):
        pytest.skip(f"no console script at {script}: kafkastore is not installed here")
    make_store(tmp_path, partitions=1)
    res = subprocess.run([script, "consume", str(tmp_path), "orders", "--last", "1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout == "v0-19\n"


def test_dump_log_through_the_cli_matches_the_module(tmp_path, capsys):
    """``kafkastore dump-log`` is kafkastore.dump with Kafka's options; both spellings of
    --print-data-log work; a missing file is one line and exit code 1."""
    import io

    from kafkastore.dump import DumpOptions, dump_files

    make_store(tmp_path, partitions=1)
    seg = sorted((tmp_path / "orders-0").glob("*.log"))[0]
    for flag in ("--print-data-log", "--print-data-logs"):
        code, out, err = run(capsys, "dump-log", "--files", seg, flag)
        assert code == 0 and err == ""
        expected = io.StringIO()
        dump_files([str(seg)], DumpOptions(print_data_log=True), expected, io.StringIO())
        assert out == expected.getvalue()
        assert "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 4" in out
        assert "key: k0 payload: v0-0" in out
    code, out, err = run(capsys, "dump-log", "--files", tmp_path / "nope.log")
    assert code == 1 and "nope.log" in err and "Traceback" not in err
