"""The storage seam under a failing object store (issue 17).

moto's S3 server behind tests/_faultproxy.py: 503 SlowDown, 500 InternalError and a
connection cut mid-body, on the reads the seam makes. A read either returns exactly the
bytes of the object (compared with the file uploaded) or raises a typed
:class:`~kafkastore.errors.StorageError` naming the object, never short or wrong bytes;
an object deleted after it was listed is :class:`~kafkastore.errors.StorageFileNotFoundError`
at once, not retried. The same through :class:`~kafkastore.log_view.ReadOnlyLog`:
records equal to kafkastore's ``Log`` on the local directory.
"""

from __future__ import annotations

import os

import pytest

from kafkastore.errors import StorageError, StorageFileNotFoundError
from kafkastore.log import Log
from kafkastore.log_view import ReadOnlyLog
from kafkastore.storage import open_storage


@pytest.fixture(scope="module")
def segment_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("faults") / "t-0"
    log = Log.open(str(d), {"segment.bytes": 64 << 10, "index.interval.bytes": 1024})
    try:
        for i in range(300):
            log.append([(b"k%d" % j, b"value-%d-%d" % (i, j) * 8) for j in range(1 + i % 4)],
                       compression=(None, "zstd")[i % 2])
    finally:
        log.close()
    return d


@pytest.fixture
def uploaded(s3_server, segment_dir):
    bucket = s3_server.new_bucket("faults")
    s3_server.upload_dir(segment_dir, bucket, "t-0")
    return bucket


def _through(proxy, bucket, **extra):
    # small seam delays keep the test fast; the SDK's own retries are turned off
    # (retry_attempts counts only the seam's) by pyarrow's default strategy staying
    # as it is: the faults below outnumber what it retries
    options = {"endpoint_override": proxy.endpoint, "access_key": "testing",
               "secret_key": "testing", "region": "us-east-1", "retry_base_delay_ms": "1",
               "retry_max_delay_ms": "20", **extra}
    return open_storage(f"s3://{bucket}/t-0", options)


def _first_segment(segment_dir):
    return sorted(p for p in os.listdir(segment_dir) if p.endswith(".log"))[0]


@pytest.mark.parametrize("kind", ["503", "500", "cut"])
def test_a_transient_fault_is_retried_and_the_bytes_are_exact(fault_proxy, uploaded,
                                                              segment_dir, kind):
    storage, path = _through(fault_proxy, uploaded)
    name = _first_segment(segment_dir)
    want = (segment_dir / name).read_bytes()
    reader = storage.open(storage.join(path, name))
    try:
        fault_proxy.inject(kind, contains=name, ranged=True, times=5)
        got = reader.read(1000, 30_000)
    finally:
        reader.close()
    assert got == want[1000:31_000]
    fired = [s for s in fault_proxy.gets(name) if s.range]
    assert len(fired) >= 6, fired          # five faults, then the read that worked
    assert storage.stats.retries >= 1


def test_faults_past_the_bound_raise_a_typed_error(fault_proxy, uploaded, segment_dir):
    storage, path = _through(fault_proxy, uploaded, retry_attempts="2")
    name = _first_segment(segment_dir)
    reader = storage.open(storage.join(path, name))
    try:
        fault_proxy.inject("503", contains=name, ranged=True, times=1000)
        with pytest.raises(StorageError) as err:
            reader.read(0, 4096)
    finally:
        reader.close()
    assert not isinstance(err.value, StorageFileNotFoundError)
    assert name in str(err.value) and "failed 2 times" in str(err.value)


def test_an_object_deleted_after_listing_is_not_found_at_once(s3_server, fault_proxy,
                                                              uploaded, segment_dir):
    storage, path = _through(fault_proxy, uploaded)
    name = _first_segment(segment_dir)
    listed = {f.name for f in storage.list_dir(path)}
    assert name in listed
    s3_server.delete(uploaded, f"t-0/{name}")
    fault_proxy.clear()
    with pytest.raises(StorageFileNotFoundError) as err:
        storage.open(storage.join(path, name))
    assert name in str(err.value)
    assert storage.stats.retries == 0


def test_a_read_only_log_under_faults_equals_the_log(fault_proxy, uploaded, segment_dir):
    storage, path = _through(fault_proxy, uploaded)
    view = ReadOnlyLog.open(path, storage=storage)
    log = Log.open(str(segment_dir))
    try:
        want = [(r.offset, r.key, r.value) for r in _records(log)]
        # every third ranged GET of a segment fails, alternating the kinds
        for k, kind in enumerate(("503", "cut", "500") * 4):
            fault_proxy.inject(kind, contains=".log", ranged=True, times=1)
        got = [(r.offset, r.key, r.value) for r in view.records()]
        assert got == want
        assert sum(r.fired for r in fault_proxy.rules) == 12
    finally:
        view.close()
        log.close()


def _records(log):
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for b in log.read(offset, 1 << 20).batches():
            for r in b:
                if r.offset >= offset:
                    yield r
            offset = max(offset, b.last_offset + 1)


@pytest.mark.parametrize("message", [
    # what pyarrow's S3 client says after its own retries (found by the tests above:
    # the seam took these for permanent and failed the read at once)
    "AWS Error SERVICE_UNAVAILABLE during GetObject operation: ",
    "AWS Error INTERNAL_FAILURE during GetObject operation: ",
    "AWS Error SLOW_DOWN during GetObject operation: Please reduce your request rate.",
    "AWS Error NETWORK_CONNECTION during GetObject operation: curl code 56",
])
def test_the_s3_clients_transient_errors_are_transient(message):
    from kafkastore.storage import is_transient

    assert is_transient(OSError(message))


@pytest.mark.parametrize("message", [
    "AWS Error ACCESS_DENIED during GetObject operation: Access Denied",
    "AWS Error NO_SUCH_BUCKET during ListObjectsV2 operation",
])
def test_permanent_errors_are_not_retried(message):
    from kafkastore.storage import is_transient

    assert not is_transient(OSError(message))
