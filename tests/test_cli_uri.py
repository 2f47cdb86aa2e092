"""The CLI's read-only commands on URIs: ``describe``, ``consume``, ``dump-log`` and
``verify`` on a log directory copied to fsspec's in-memory file system (``memory://``)
and to a real S3 endpoint (moto's server on 127.0.0.1, ``s3://``) print exactly what
they print for the local directory, but for the names of the files; the mistakes a user
can make with a URI are one line and the documented exit code.

The local output is the reference: each test runs the command on the local directory
and on the copy, and compares after putting the URI where the local path was.
"""

from __future__ import annotations

import json
import logging
import os
import uuid

import pytest

from kafkastore.cli import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, main
from kafkastore.manager import LogManager

SEG = "00000000000000000000"


@pytest.fixture(autouse=True)
def _quiet_s3_server():
    """moto's server logs each request (werkzeug, at INFO) on stderr, which these tests
    read for the CLI's messages."""
    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def make_store(root):
    """Two topics: ``orders`` (2 partitions, small segments, keys, headers, a gzip
    batch, timestamps 1000 + i) and ``users`` (1 partition, whose oldest segments
    retention removed: its log start offset is past 0)."""
    from kafkastore.retention import delete_old_segments

    with LogManager(str(root), {"segment.bytes": 400, "index.interval.bytes": 64,
                                "retention.bytes": 600}, background=False) as m:
        for p in range(2):
            log = m.get_or_create("orders", p)
            for i in range(30):
                log.append([(b"k%d" % (i % 4), b"v%d-%d" % (p, i), 1000 + i,
                             ((b"h", b"%d" % i),))],
                           compression="gzip" if i == 7 else None)
        log = m.get_or_create("users", 0)
        for i in range(40):
            log.append([(b"u%d" % i, b"name-%d" % i)], timestamp=5000 + i)
        assert delete_old_segments(log) > 0
        log.delete_pending_segments(force=True)
    return root


class Copy:
    """A log directory's copy on a store: its ``uri`` and the ``--storage-option``
    arguments that reach the store."""

    def __init__(self, uri: str, options: dict[str, str]) -> None:
        self.uri = uri
        self.args = [a for k, v in options.items()
                     for a in ("--storage-option", f"{k}={v}")]
        self.options = options


@pytest.fixture(params=["memory", "s3"])
def store(request):
    """``put(local_dir) -> Copy`` on the backend of the parameter."""
    if request.param == "memory":
        fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed")
        fs = fsspec.filesystem("memory")
        roots = []

        def put(local_dir, name="logs"):
            root = f"/kafkastore-cli-{uuid.uuid4().hex}/{name}"
            fs.put(str(local_dir), root, recursive=True)
            roots.append(root.rsplit("/", 1)[0])
            return Copy(f"memory:/{root}", {})

        yield put
        for root in roots:
            fs.rm(root, recursive=True)
        return
    s3 = request.getfixturevalue("s3_server")

    def put_s3(local_dir, name="logs"):
        bucket = s3.new_bucket()
        return Copy(s3.upload_dir(local_dir, bucket, name), s3.options())

    yield put_s3


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The reference log directory (built once: every test only reads it)."""
    return make_store(tmp_path_factory.mktemp("cli-uri") / "logs")


def same(capsys, local_dir, copy, *argv, expect=EXIT_OK):
    """Run ``argv`` with ``{dir}`` as the local directory, then as the copy's URI (with
    its storage options); assert the same exit code and the same stdout once the URI is
    put where the path was. Returns the local stdout."""
    code, out, err = run(capsys, *(str(a).format(dir=local_dir) for a in argv))
    assert code == expect, err
    code_u, out_u, err_u = run(capsys, *(str(a).format(dir=copy.uri) for a in argv),
                               *copy.args)
    assert code_u == expect, err_u
    assert out_u == out.replace(str(local_dir), copy.uri)
    assert "Traceback" not in err_u
    return out


# -- describe, consume, verify -----------------------------------------------------------


def test_describe_table_and_json_equal_the_local_directory(capsys, local, store):
    copy = store(local)
    out = same(capsys, local, copy, "describe", "{dir}")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [
        "orders-0", "orders-1", "users-0"]
    out = same(capsys, local, copy, "describe", "{dir}", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["log_end_offset"] for r in rows] == [30, 30, 40]
    assert rows[2]["log_start_offset"] > 0 and rows[0]["max_timestamp"] == 1029
    same(capsys, local, copy, "describe", "{dir}", "--json", "--scan-all", "--topic", "users")
    same(capsys, local, copy, "describe", "{dir}", "--topic", "nothing")


@pytest.mark.parametrize("start", [
    [],
    ["--from-beginning", "--max-records", "7"],
    ["--offset", "13"],
    ["--offset", "0", "--partition", "1"],
    ["--timestamp", "1017"],
    ["--timestamp", "99999"],
    ["--last", "3"],
])
def test_consume_equals_the_local_directory(capsys, local, store, start):
    copy = store(local)
    out = same(capsys, local, copy, "consume", "{dir}", "orders", *start,
               "--print-offset", "--print-key", "--print-headers", "--print-timestamp")
    if start == ["--last", "3"]:
        assert out.splitlines()[0] == "0:27\t1027\tk3\th:27\tv0-27"
    # users has no partition 1: the same usage error for both
    same(capsys, local, copy, "consume", "{dir}", "users", *start, "--format", "json",
         expect=EXIT_USAGE if "--partition" in start else EXIT_OK)


def test_verify_equals_the_local_directory_clean_and_broken(capsys, tmp_path, store):
    root = make_store(tmp_path / "logs")
    copy = store(root)
    out = same(capsys, root, copy, "verify", "{dir}")
    assert out == "verified 3 partitions: no problems\n"
    # a torn tail, a corrupt entry and a missing index: verify finds each of them
    part = root / "orders-1"
    logs = sorted(part.glob("*.log"))
    with open(logs[-2], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x50\x00\x00\x01\x00garbage")
    data = bytearray(logs[0].read_bytes())
    data[70] ^= 0xFF
    logs[0].write_bytes(bytes(data))
    os.unlink(logs[1].with_suffix(".timeindex"))
    copy = store(root, "broken")
    out = same(capsys, root, copy, "verify", "{dir}", expect=EXIT_PROBLEM)
    assert "corrupt entry at position" in out and "partial entry at the end" in out
    assert "missing (recovery rebuilds it)" in out and "3 problem(s)" in out


# -- dump-log -----------------------------------------------------------------------------


@pytest.mark.parametrize("files, flags", [
    ([f"orders-0/{SEG}.log"], ["--deep-iteration", "--print-data-log"]),
    ([f"orders-0/{SEG}.log"], ["--print-data-log", "--json"]),
    ([f"orders-1/{SEG}.log"], ["--max-bytes", "300"]),
    ([f"orders-0/{SEG}.index", f"orders-0/{SEG}.timeindex"], []),
    ([f"orders-0/{SEG}.index", f"orders-0/{SEG}.timeindex"], ["--json"]),
    ([f"orders-1/{SEG}.index"], ["--verify-index-only"]),
    ([f"orders-1/{SEG}.timeindex"], ["--index-sanity-check"]),
])
def test_dump_log_equals_the_local_files(capsys, local, store, files, flags):
    copy = store(local)
    out = same(capsys, local, copy, "dump-log", "--files",
               ",".join("{dir}/" + f for f in files), *flags)
    assert out.count(f"{local}/") >= len(files)     # names were there to replace


def test_dump_log_of_a_broken_segment_reports_the_same_problems(capsys, tmp_path, store):
    root = make_store(tmp_path / "logs")
    log = root / "orders-0" / f"{SEG}.log"
    with open(log, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"torn")   # 16 invalid bytes
    index = root / "orders-0" / f"{SEG}.index"
    data = bytearray(index.read_bytes())
    data[3] += 1                                   # an entry's offset one off
    index.write_bytes(bytes(data))
    copy = store(root)
    argv = ["dump-log", "--files", f"{{dir}}/orders-0/{SEG}.log,{{dir}}/orders-0/{SEG}.index"]
    code, out, err = run(capsys, *(a.format(dir=root) for a in argv))
    code_u, out_u, err_u = run(capsys, *(a.format(dir=copy.uri) for a in argv), *copy.args)
    assert code == code_u == EXIT_OK
    assert out_u == out.replace(str(root), copy.uri)
    assert "Found 16 invalid bytes at the end of" in out_u
    # the problem reports name each file's absolute path: the URI for the copy
    assert err_u == err.replace(str(root), copy.uri) and "Mismatches in :" in err_u


def test_dump_log_reads_only_what_it_prints(capsys, local, s3_server):
    """``--max-bytes`` on S3: ranged reads of the part dumped, not the file; a whole
    dump of a segment smaller than the read-ahead (1 MiB) is one ranged read of it,
    not a request per batch."""
    from kafkastore.storage import open_storage

    copy = Copy(s3_server.upload_dir(local, s3_server.new_bucket(), "logs"),
                s3_server.options())
    uri = f"{copy.uri}/orders-0/{SEG}.log"
    storage, _ = open_storage(uri, copy.options)
    size = os.path.getsize(local / "orders-0" / f"{SEG}.log")
    storage.stats.reset()
    code, out, _ = run(capsys, "dump-log", "--files", uri, "--max-bytes", "100", *copy.args)
    assert code == EXIT_OK and out.startswith(f"Dumping {uri}\nLog starting offset: 0\n")
    assert 0 < storage.stats.bytes_read <= 100 < size
    storage.stats.reset()
    code, out, _ = run(capsys, "dump-log", "--files", uri, "--deep-iteration", *copy.args)
    assert code == EXIT_OK and out.count("baseOffset:") > 1
    assert (storage.stats.reads, storage.stats.bytes_read) == (1, size)


def test_file_uris_equal_the_local_directory(capsys, local):
    copy = Copy(f"file://{local}", {})
    same(capsys, local, copy, "describe", "{dir}", "--json")
    # the seam's own options are valid for every directory, local ones too
    same(capsys, local, copy, "describe", "{dir}", "--storage-option", "retry_attempts=2")
    same(capsys, local, copy, "consume", "{dir}", "orders", "--last", "2")
    same(capsys, local, copy, "verify", "{dir}")
    same(capsys, local, copy, "dump-log", "--files", f"{{dir}}/orders-1/{SEG}.log",
         "--deep-iteration")


# -- mistakes -------------------------------------------------------------------------------


def _one_line(err: str) -> None:
    assert "Traceback" not in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("command", [
    ["describe", "{dir}"],
    ["consume", "{dir}", "orders"],
    ["verify", "{dir}"],
    ["dump-log", "--files", "{dir}/orders-0/" + SEG + ".log"],
])
def test_an_unknown_storage_option_is_a_usage_error(capsys, local, s3_server, command):
    copy = Copy(s3_server.upload_dir(local, s3_server.new_bucket(), "logs"),
                s3_server.options())
    for where, extra in ((copy.uri, copy.args), (str(local), [])):
        code, out, err = run(capsys, *(a.format(dir=where) for a in command), *extra,
                             "--storage-option", "endpoint=http://127.0.0.1:1")
        assert code == EXIT_USAGE and out == ""
        _one_line(err)
        assert f"kafkastore {command[0]}: --storage-option: Unknown storage option" in err
        assert "option(s) endpoint for " in err and "accepted: " in err
        assert "retry_attempts" in err
        if where == copy.uri:
            assert "endpoint_override" in err
    code, _, err = run(capsys, *(a.format(dir=copy.uri) for a in command),
                       "--storage-option", "region")
    assert code == EXIT_USAGE and "--storage-option expects NAME=VALUE" in err
    code, _, err = run(capsys, *(a.format(dir=copy.uri) for a in command), *copy.args,
                       "--storage-option", "connect_timeout=soon")
    assert code == EXIT_USAGE and "connect_timeout" in err and "float" in err


@pytest.mark.parametrize("command", [
    ["describe", "{dir}"],
    ["describe", "{dir}", "--json"],
    ["consume", "{dir}", "orders"],
    ["verify", "{dir}"],
])
def test_a_missing_prefix_is_a_missing_directory(capsys, tmp_path, local, store, command):
    copy = store(local)
    code, _, err = run(capsys, *(a.format(dir=tmp_path / "missing") for a in command))
    assert code == EXIT_USAGE and "no such log directory" in err
    missing = copy.uri.rsplit("/", 1)[0] + "/missing"
    code, out, err = run(capsys, *(a.format(dir=missing) for a in command), *copy.args)
    assert code == EXIT_USAGE and out == ""
    _one_line(err)
    assert err == f"kafkastore {command[0]}: {missing}: no such log directory\n"


def test_a_missing_bucket_is_a_missing_directory(capsys, s3_server):
    uri = f"s3://no-such-bucket-{uuid.uuid4().hex[:12]}/logs"
    code, out, err = run(capsys, "describe", uri, *Copy(uri, s3_server.options()).args)
    assert code == EXIT_USAGE and out == ""
    _one_line(err)
    assert err == f"kafkastore describe: {uri}: no such log directory\n"


def test_consume_of_a_topic_the_copy_lacks(capsys, local, store):
    copy = store(local)
    code, _, err = run(capsys, "consume", copy.uri, "nope", *copy.args)
    assert code == EXIT_USAGE
    assert err == f"kafkastore consume: {copy.uri}: no partition of topic 'nope'\n"


def test_verify_repair_needs_a_local_directory(capsys, local, store):
    copy = store(local)
    code, out, err = run(capsys, "verify", copy.uri, "--repair", *copy.args)
    assert code == EXIT_USAGE and out == ""
    _one_line(err)
    assert f"--repair needs a local directory" in err and copy.uri in err


def test_dump_log_of_a_missing_object_goes_on_as_for_a_missing_file(capsys, local, store):
    copy = store(local)
    argv = ["dump-log", "--files", f"{{dir}}/orders-0/99.log,{{dir}}/orders-0/{SEG}.log"]
    code, out, err = run(capsys, *(a.format(dir=local) for a in argv))
    code_u, out_u, err_u = run(capsys, *(a.format(dir=copy.uri) for a in argv), *copy.args)
    assert code == code_u == 1
    assert out_u == out.replace(str(local), copy.uri)
    assert err_u == err.replace(str(local), copy.uri)
    assert err_u.startswith(f"kafkastore: {copy.uri}/orders-0/99.log: No such file")
