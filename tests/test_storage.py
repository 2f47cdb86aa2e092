"""The storage seam itself (kafkastore.storage): choosing a store by URI, options,
exact ranged reads and counts, missing files, listings.

Remote behaviour under faults is tests/test_storage_faults.py; reads of whole logs are
tests/test_log_view.py.
"""

from __future__ import annotations

import os

import pytest

from kafkastore.errors import ConfigError, StorageFileNotFoundError
from kafkastore.storage import (
    ArrowStorage,
    LocalStorage,
    check_options,
    is_local,
    open_storage,
    require_local_path,
    split_uri,
)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "t-0").mkdir()
    data = bytes(range(256)) * 40
    (tmp_path / "t-0" / "00000000000000000000.log").write_bytes(data)
    (tmp_path / "t-0" / "00000000000000000000.index").write_bytes(b"\0" * 16)
    (tmp_path / "t-1").mkdir()
    (tmp_path / "top").write_bytes(b"x")
    return tmp_path, data


def _memory(tree_root):
    fsspec = pytest.importorskip("fsspec", reason="fsspec (the test extra) serves memory://")
    pytest.importorskip("pyarrow", reason="pyarrow serves the fsspec bridge")
    mem = fsspec.filesystem("memory")
    base = f"/storage-{os.getpid()}-{id(tree_root)}"
    for d, _, files in os.walk(tree_root):
        for f in files:
            src = os.path.join(d, f)
            with open(src, "rb") as a, mem.open(base + "/" + os.path.relpath(src, tree_root),
                                                "wb") as b:
                b.write(a.read())
    return "memory://" + base


@pytest.mark.parametrize("where", ["path", "file", "memory"])
def test_reads_listings_and_counts(tree, where):
    root, data = tree
    uri = {"path": str(root), "file": f"file://{root}"}.get(where) or _memory(root)
    storage, path = open_storage(uri)
    assert isinstance(storage, LocalStorage if where != "memory" else ArrowStorage)
    names = [i.name for i in storage.list_dir(path)]
    # fsspec's memory file system has no empty directories: t-1 is not there
    assert names == (["t-0", "t-1", "top"] if where != "memory" else ["t-0", "top"])
    everything = {storage.basename(i.path) for i in storage.walk(path) if not i.is_dir}
    assert {"00000000000000000000.log", "00000000000000000000.index", "top"} <= everything
    seg = storage.join(path, "t-0", "00000000000000000000.log")
    assert storage.size(seg) == len(data) and storage.exists(seg)
    storage.stats.reset()
    with storage.open(seg) as r:
        assert r.size == len(data)
        assert r.read(10, 100) == data[10:110]
        assert r.read(len(data) - 5, 100) == data[-5:]          # clipped at the end
        assert r.read(len(data) + 5, 10) == b""
        buf = bytearray(64)
        assert r.readinto(buf, 300) == 64 and bytes(buf) == data[300:364]
    st = storage.stats
    assert st.bytes_read == 100 + 5 + 64
    assert st.reads >= 3 and st.retries == 0
    assert storage.read_file(storage.join(path, "t-0", "00000000000000000000.index")) \
        == b"\0" * 16
    assert storage.read_file(storage.join(path, "t-0", "nothing")) is None
    with pytest.raises(StorageFileNotFoundError) as err:
        storage.open(storage.join(path, "t-0", "nothing.log"))
    assert isinstance(err.value, FileNotFoundError) and "nothing.log" in str(err.value)
    with pytest.raises(StorageFileNotFoundError):
        storage.list_dir(storage.join(path, "missing-dir"))


def test_options_are_checked_before_anything_connects():
    with pytest.raises(ConfigError) as err:
        check_options("s3://bucket/logs", {"endpoint": "http://127.0.0.1:1"})
    assert "Unknown storage option(s) endpoint" in str(err.value)
    assert "endpoint_override" in str(err.value) and "retry_attempts" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_options("s3://bucket/logs", {"connect_timeout": "soon"})
    assert "connect_timeout" in str(err.value) and "float" in str(err.value)
    with pytest.raises(ConfigError):
        check_options("/data/logs", {"region": "x"})      # local takes the seam's only
    check_options("/data/logs", {"retry_attempts": "2"})
    check_options("s3://bucket/logs", {"anonymous": "true", "request_timeout": "2.5"})
    with pytest.raises(ConfigError):
        check_options("s3://bucket/logs", {"anonymous": "maybe"})


def test_a_scheme_nothing_serves_is_a_config_error():
    pytest.importorskip("pyarrow", reason="the remote stores need pyarrow")
    with pytest.raises(ConfigError) as err:
        open_storage("nosuchscheme://bucket/logs")
    assert "nosuchscheme" in str(err.value)


def test_uris_split_and_writers_need_a_local_path(tmp_path):
    assert split_uri("s3://b/p")[0] == "s3" and split_uri("/a/b")[0] == ""
    assert is_local("/a/b") and is_local(f"file://{tmp_path}") and not is_local("s3://b/p")
    assert require_local_path(f"file://{tmp_path}", "test") == str(tmp_path)
    with pytest.raises(ConfigError) as err:
        require_local_path("gs://bucket/logs", "Log.open")
    assert "Log.open cannot write to gs://bucket/logs" in str(err.value)
    assert "POSIX" in str(err.value)
