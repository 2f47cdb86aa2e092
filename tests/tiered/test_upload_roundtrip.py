"""Copies written by kafkastore.tiered.upload read back through the tiered reader
(open_tiered): every record of the uploaded segments, in both layouts, with compression
and encryption; an encrypted copy without its key names the key."""

from __future__ import annotations

import pytest

from kafkastore.errors import MissingKeyError
from kafkastore.log_view import ReadOnlyLog
from kafkastore.tiered.crypto import KeyRing
from kafkastore.tiered.upload import UploadOptions, upload_partition
from kafkastore.topic import TopicPartition

tiered_storage = pytest.importorskip("kafkastore.tiered.tiered_storage")

from test_upload import _write_partition  # noqa: E402

TP = TopicPartition("orders", 0)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("roundtrip")
    _write_partition(root / "orders-0", first_compressed=False)
    return root / "orders-0"


@pytest.fixture(scope="module")
def ring():
    return KeyRing.generate("rt-key")[0]


def _rows(log, end):
    return [(r.offset, r.key, r.value, r.timestamp) for r in log.records(end=end)]


@pytest.mark.parametrize("layout, compression, encrypted", [
    ("aiven", False, False), ("aiven", True, False), ("aiven", True, True),
    ("aiven", False, True), ("local", False, False)])
def test_uploaded_copy_reads_as_the_source(source, tmp_path, ring, layout, compression,
                                           encrypted):
    options = UploadOptions(layout=layout, chunk_size=500, compression=compression,
                            key_ring=ring if encrypted else None)
    uploaded = upload_partition(str(source), str(tmp_path / "copy"), options=options)
    end = uploaded[-1].end_offset + 1
    with ReadOnlyLog.open(str(source)) as local, \
            tiered_storage.open_tiered(str(tmp_path / "copy"), key_ring=ring) as copy:
        assert copy.layout == layout
        log = copy.log(TP)
        assert [s.base_offset for s in log.segments] == [u.key.start_offset for u in uploaded]
        assert log.log_end_offset == end
        assert _rows(log, end) == _rows(local, end)


def test_encrypted_copy_without_the_key_names_it(source, tmp_path, ring):
    options = UploadOptions(chunk_size=500, key_ring=ring)
    upload_partition(str(source), str(tmp_path / "copy"), options=options, base_offsets=[0])
    with pytest.raises(MissingKeyError) as info:
        with tiered_storage.open_tiered(str(tmp_path / "copy")) as copy:
            list(copy.log(TP).records())
    assert info.value.key_id == "rt-key"
