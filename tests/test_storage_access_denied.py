"""A store that refuses the credentials (issue 28, item 6): the read fails at once with
:class:`~kafkastore.errors.StorageAccessDeniedError`, not after the transient-failure
retries, and the error names the object. The 403 comes from tests/_faultproxy.py in
front of moto's S3 server (moto itself accepts any credentials)."""

from __future__ import annotations

import pytest

from kafkastore import storage as _storage
from kafkastore.errors import StorageAccessDeniedError, StorageError


@pytest.fixture
def denied(s3_server, fault_proxy, tmp_path):
    bucket = s3_server.new_bucket("denied")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "00000000000000000000.log").write_bytes(b"x" * 4096)
    uri = s3_server.upload_dir(tmp_path / "d", bucket, "p")
    _storage.clear_cache()   # a client of its own, pointed at the proxy
    store, path = _storage.open_storage(
        uri, s3_server.options(endpoint_override=fault_proxy.endpoint))
    return store, store.join(path, "00000000000000000000.log"), fault_proxy


def test_a_refused_read_is_access_denied_and_not_retried(denied):
    store, path, proxy = denied
    reader = store.open(path)
    proxy.inject("403", contains=".log", ranged=True, times=10)
    with pytest.raises(StorageAccessDeniedError) as info:
        # 4096 bytes: the AWS SDK writes the error's XML into the caller's buffer, and
        # one smaller than the XML turns the 403 into INTERNAL_FAILURE ("Failed to flush
        # response stream"), which is indistinguishable from a transient failure
        reader.read(0, 4096)
    assert isinstance(info.value, StorageError) and isinstance(info.value, PermissionError)
    assert info.value.path == store.uri(path)
    assert "failed" in str(info.value) and " times" not in str(info.value)
    # one request: a refusal is not retried (the same credentials get the same answer)
    assert proxy.rules[0].fired == 1 and store.stats.retries == 0


@pytest.mark.parametrize("message, denied", [
    ("AWS Error ACCESS_DENIED during GetObject operation: No response body.", True),
    ("AWS Error [code 15]: Access Denied", True),
    ("AWS Error INVALID_ACCESS_KEY_ID during HeadObject operation", True),
    ("The request signature we calculated does not match: SignatureDoesNotMatch", True),
    ("HTTP status 403 Forbidden", True),
    ("short read: 403 of 4096 bytes at 0", False),   # a length, not a status
    ("AWS Error SLOW_DOWN during GetObject operation: status code 503", False),
])
def test_what_counts_as_a_refusal(message, denied):
    assert _storage.is_access_denied(OSError(message)) is denied
    if denied:
        assert not _storage.is_transient(OSError(message))
