"""StorageRecords: the reading half of FileRecords through the storage seam.

The oracle is FileRecords on the same local file: every walk, search and chunked scan
must give the same headers and bytes, through the local seam and through an fsspec
file system (``memory://``, the pyarrow path without a server).
"""

from __future__ import annotations

import os

import pytest

from kafkastore.errors import KafkaStoreError, StorageFileNotFoundError
from kafkastore.file_records import FileRecords, StorageRecords
from kafkastore.log import Log
from kafkastore.storage import open_storage


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("sr") / "t-0"
    log = Log.open(str(d), {"segment.bytes": 1 << 20, "index.interval.bytes": 512})
    try:
        for i in range(400):
            recs = [(b"k%d" % j, b"v%d" % j * (1 + j % 7)) for j in range(i % 5 + 1)]
            log.append(recs, compression=("none", "lz4", "zstd", "gzip")[i % 4])
    finally:
        log.close()
    return str(d / "00000000000000000000.log")


def _memory_copy(path):
    fsspec = pytest.importorskip("fsspec", reason="fsspec (the test extra) serves memory://")
    pytest.importorskip("pyarrow", reason="pyarrow serves the fsspec bridge")
    mem = fsspec.filesystem("memory")
    target = f"/sr-{os.getpid()}/t-0/00000000000000000000.log"
    with open(path, "rb") as src, mem.open(target, "wb") as dst:
        dst.write(src.read())
    return "memory://" + target


@pytest.mark.parametrize("where", ["local", "memory"])
def test_walks_searches_and_scans_equal_file_records(segment, where):
    uri = segment if where == "local" else _memory_copy(segment)
    storage, path = open_storage(uri)
    fr = FileRecords.open(segment, mutable=False)
    sr = StorageRecords.open_uri(storage, path)
    try:
        assert sr.size == fr.size and sr.path == storage.uri(path)
        headers = list(fr.walk())
        assert list(sr.walk()) == headers and len(headers) == 400
        assert [h for h, _ in sr.walk_headers()] == headers
        last = headers[-1].last_offset
        for target in (0, 1, 57, last // 2, last):
            for start in (0, headers[len(headers) // 3].position):
                want = fr.search_with_data(target, start, 200)
                got = sr.search_with_data(target, start, 200)
                assert got[0] == want[0]
                if want[0] is not None:
                    assert sr.read(got[0].position, 200) == fr.read(want[0].position, 200)
        assert sr.search_with_data(last + 1)[0] is None
        chunks = [(pos, bytes(data[:scan.valid_bytes]), scan.valid_bytes)
                  for data, pos, scan in sr.scan_chunks(chunk_size=4096)]
        assert sum(v for _, _, v in chunks) == fr.size
        assert b"".join(c for _, c, _ in chunks) == fr.read(0, fr.size)
    finally:
        fr.close()
        sr.close()


def test_writes_are_refused_and_close_is_idempotent(segment):
    storage, path = open_storage(segment)
    sr = StorageRecords.open_uri(storage, path)
    for call in (lambda: sr.append(b"x"), lambda: sr.truncate_to(0), lambda: sr.fileno()):
        with pytest.raises(KafkaStoreError, match="read-only|not a local file"):
            call()
    sr.close()
    sr.close()
    with pytest.raises(KafkaStoreError, match="closed"):
        sr.read(0, 10)


def test_a_missing_file_is_a_typed_error(tmp_path):
    storage, path = open_storage(str(tmp_path))
    with pytest.raises(StorageFileNotFoundError) as err:
        StorageRecords.open_uri(storage, storage.join(path, "00000000000000000000.log"))
    assert err.value.path.endswith("00000000000000000000.log")
