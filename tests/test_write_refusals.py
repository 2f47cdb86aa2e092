"""Writers refuse object-store URIs before they create anything (issue 17).

Before, ``Log.open("s3://bucket/t-0")``, a ``LogManager`` on ``gs://...`` and ``kafkastore
produce s3://...`` each made a local directory literally named ``s3:/bucket/...`` under the
working directory and reported success: the data never reached the store. Writing a Kafka
log needs POSIX files (appends, fsync, renames, a lock), so every place that creates a
log directory refuses such a URI, saying why and what to do instead; ``file://`` URIs and
plain paths keep working.
"""

from __future__ import annotations

import os

import pytest

from kafkastore import _fileio
from kafkastore.cli import EXIT_USAGE, main
from kafkastore.errors import ConfigError
from kafkastore.log import Log
from kafkastore.manager import LogManager
from kafkastore.storage import require_local_path

URIS = ["s3://bucket/logs", "gs://bucket/logs", "abfs://c@acct.dfs.core.windows.net/logs",
        "hdfs://namenode:8020/logs", "memory://logs"]


def _nothing_created(where) -> None:
    made = [p for p in os.listdir(where)]
    assert made == [], f"created {made} in {where}"


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """An empty working directory: a URI taken for a relative path would land here."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("uri", URIS)
def test_log_open_refuses_a_uri_and_creates_nothing(cwd, uri):
    with pytest.raises(ConfigError) as err:
        Log.open(uri + "/orders-0")
    text = str(err.value)
    assert "Log.open" in text and uri in text and "POSIX" in text
    _nothing_created(cwd)


@pytest.mark.parametrize("uri", URIS)
def test_log_manager_refuses_a_uri_and_creates_nothing(cwd, uri):
    with pytest.raises(ConfigError) as err:
        LogManager(uri, background=False)
    assert "LogManager" in str(err.value) and uri in str(err.value)
    _nothing_created(cwd)


def test_log_manager_refuses_when_any_of_its_dirs_is_a_uri(cwd):
    local = str(cwd / "local")
    with pytest.raises(ConfigError):
        LogManager([local, "s3://bucket/logs"], background=False)
    _nothing_created(cwd)   # checked before the first directory was made


def test_the_makedirs_backstop_refuses_a_uri(cwd):
    with pytest.raises(ConfigError):
        _fileio.makedirs("s3://bucket/logs/orders-0")
    _nothing_created(cwd)


def test_file_uris_and_paths_still_open(cwd):
    log = Log.open(f"file://{cwd}/orders-0")
    try:
        log.append([(b"k", b"v")])
    finally:
        log.close()
    assert os.path.isfile(cwd / "orders-0" / "00000000000000000000.log")
    with LogManager(f"file://{cwd}/store", background=False) as m:
        m.get_or_create("t", 0).append([(b"k", b"v")])
    assert os.path.isdir(cwd / "store" / "t-0")


def test_cli_produce_refuses_a_uri_with_one_line(cwd, capsys, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO("k:v\n"))
    code = main(["produce", "s3://bucket/logs", "orders", "--key-separator", ":"])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and "s3://bucket/logs" in err and "POSIX" in err
    _nothing_created(cwd)


def test_require_local_path_answers():
    assert require_local_path("/data/logs", "x") == "/data/logs"
    assert require_local_path("relative/logs", "x") == "relative/logs"
    assert require_local_path("file:///data/logs", "x") == "/data/logs"
    assert require_local_path("file://localhost/data/a%20b", "x") == "/data/a b"
    with pytest.raises(ConfigError, match="not host"):
        require_local_path("file://otherhost/data", "x")
    with pytest.raises(ConfigError, match="reading s3:// directly is supported"):
        require_local_path("s3://b/x", "The sink")
