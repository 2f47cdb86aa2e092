"""Reaching an object store's endpoint (issue 28, item 11): the two mistakes a first
run meets, against moto's S3 server on 127.0.0.1 (plain HTTP).

* ``endpoint_override=127.0.0.1:PORT`` without a scheme means https (pyarrow's and the
  AWS SDK's default); the TLS handshake is answered in plain text. That is a
  configuration error: one attempt, then a :class:`~kafkastore.errors.ConfigError`
  saying to write ``http://``, not six retries (~10 s) and an SSL message.
* A port nothing listens on: the retries run (a server may be starting), then the
  error says the connection was refused and names the endpoint.

Attempts are counted through the storage's own counters (``stats.requests``), never
timed.
"""

from __future__ import annotations

import logging
import pickle
import socket
import sys

import pytest

from kafkastore.cli import EXIT_USAGE, main
from kafkastore.errors import ConfigError, StorageError
from kafkastore.storage import clear_cache, open_storage


@pytest.fixture(autouse=True)
def _fresh_clients():
    """Each test's options make their own client (the seam caches them per options)."""
    clear_cache()
    logger = logging.getLogger("werkzeug")   # moto logs each (garbled) request at INFO
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)
    clear_cache()


def _host_port(endpoint: str) -> str:
    return endpoint.partition("://")[2]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bucket(s3_server, tmp_path):
    (tmp_path / "orders-0").mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    return s3_server.upload_dir(tmp_path, s3_server.new_bucket(), "logs")


def test_an_endpoint_without_a_scheme_on_a_plain_port_fails_at_once(s3_server, bucket):
    host_port = _host_port(s3_server.endpoint)
    storage, path = open_storage(bucket, s3_server.options(endpoint_override=host_port))
    with pytest.raises(ConfigError) as info:
        storage.list_dir(path)
    err = info.value
    assert f"write endpoint_override=http://{host_port}" in str(err)
    assert "does not speak TLS" in str(err)
    assert err.key == "endpoint_override"
    # one attempt: the seam did not retry a configuration error
    assert storage.stats.requests == 1 and storage.stats.retries == 0


def test_the_same_endpoint_with_http_reads(s3_server, bucket):
    """The advice given is the fix: the same host and port with http:// lists."""
    storage, path = open_storage(
        bucket, s3_server.options(endpoint_override=f"http://{_host_port(s3_server.endpoint)}"))
    assert [i.name for i in storage.list_dir(path)] == ["orders-0"]
    assert storage.stats.retries == 0


def test_a_closed_port_is_named_after_the_retries(s3_server):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    storage, path = open_storage("s3://nothing-here/logs", s3_server.options(
        endpoint_override=endpoint, retry_attempts="3", retry_base_delay_ms="1",
        retry_max_delay_ms="1"))
    with pytest.raises(StorageError) as info:
        storage.list_dir(path)
    text = str(info.value)
    assert f"nothing accepts connections at {endpoint}" in text
    assert "connection refused, 3 attempts" in text
    # the refusal is still retried (a server may be starting), as many times as asked
    assert storage.stats.requests == 3 and storage.stats.retries == 2


def test_the_endpoint_survives_pickling(s3_server):
    """Spark ships the storage to its workers: their errors name the endpoint too."""
    storage, _ = open_storage("s3://b/logs", s3_server.options(endpoint_override="127.0.0.1:9"))
    assert pickle.loads(pickle.dumps(storage)).endpoint == "https://127.0.0.1:9"


def test_the_cli_says_to_write_http(capsys, s3_server, bucket):
    host_port = _host_port(s3_server.endpoint)
    opts = [a for k, v in s3_server.options(endpoint_override=host_port).items()
            for a in ("--storage-option", f"{k}={v}")]
    code = main(["describe", bucket, *opts])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    assert f"endpoint_override=http://{host_port}" in err
    assert len(err.strip().splitlines()) == 1


def test_without_pyarrow_the_hint_installs_what_exists(monkeypatch):
    """No package index has kafkastore yet (issue 28, item 2): the hint for a missing
    pyarrow names installs that work, never ``pip install 'kafkastore[remote]'``."""
    monkeypatch.setitem(sys.modules, "pyarrow.fs", None)   # the import raises ImportError
    with pytest.raises(ConfigError) as info:
        open_storage("s3://bucket/logs")
    text = str(info.value)
    assert "pip install 'pyarrow>=18'" in text and "pip install '.[remote]'" in text
    assert "kafkastore[" not in text
