"""Copies written by kafkastore.tiered.upload read back through the tiered reader
(open_tiered): every record of the uploaded segments, in both layouts, with compression
and encryption; an encrypted copy without its key names the key."""

from __future__ import annotations

import pytest
from test_upload import _write_partition

from kafkastore.errors import CorruptChunkError, MissingKeyError
from kafkastore.log_view import ReadOnlyLog
from kafkastore.tiered import tiered_storage
from kafkastore.tiered.crypto import KeyRing
from kafkastore.tiered.upload import UploadOptions, upload_partition
from kafkastore.topic import TopicPartition

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


@pytest.mark.parametrize("layout, compression, encrypted", [
    ("aiven", True, True), ("local", False, False)])
def test_round_trip_through_the_s3_emulator(source, ring, s3_server, layout, compression,
                                            encrypted):
    bucket = s3_server.new_bucket("roundtrip")
    options = UploadOptions(layout=layout, chunk_size=700, compression=compression,
                            key_ring=ring if encrypted else None)
    uri = f"s3://{bucket}/remote"
    uploaded = upload_partition(str(source), uri, options=options,
                                storage_options=s3_server.options())
    end = uploaded[-1].end_offset + 1
    with ReadOnlyLog.open(str(source)) as local, \
            tiered_storage.open_tiered(uri, key_ring=ring,
                                       storage_options=s3_server.options()) as copy:
        assert copy.layout == layout
        assert _rows(copy.log(TP), end) == _rows(local, end)


@pytest.mark.parametrize("damage", ["tag", "iv", "truncated"])
def test_a_damaged_encrypted_chunk_names_segment_and_chunk(source, tmp_path, ring, damage):
    options = UploadOptions(chunk_size=500, compression=True, key_ring=ring)
    upload_partition(str(source), str(tmp_path / "copy"), options=options, base_offsets=[0])
    log_obj = next((tmp_path / "copy").rglob("*.log"))
    with tiered_storage.open_tiered(str(tmp_path / "copy"), key_ring=ring) as copy:
        chunk = copy.resolution(TP).segments[0].manifest.chunk_index.chunk(1)
    data = bytearray(log_obj.read_bytes())
    end = chunk.transformed_position + chunk.transformed_size
    if damage == "tag":
        data[end - 1] ^= 0x01
    elif damage == "iv":
        data[chunk.transformed_position] ^= 0x80
    else:
        del data[end - 3:]
    log_obj.write_bytes(bytes(data))
    with tiered_storage.open_tiered(str(tmp_path / "copy"), key_ring=ring) as copy:
        with pytest.raises(CorruptChunkError) as info:
            list(copy.log(TP).records())
    if damage != "truncated":
        assert info.value.chunk == 1
    assert info.value.path.endswith(log_obj.name)


def test_the_wrong_key_under_the_right_id_is_a_typed_error(source, tmp_path, ring):
    options = UploadOptions(chunk_size=500, key_ring=ring)
    upload_partition(str(source), str(tmp_path / "copy"), options=options, base_offsets=[0])
    impostor = KeyRing.generate("rt-key")[0]
    with pytest.raises((CorruptChunkError, tiered_storage.CorruptManifestError)) as info:
        with tiered_storage.open_tiered(str(tmp_path / "copy"), key_ring=impostor) as copy:
            list(copy.log(TP).records())
    assert info.value.path


def test_a_task_storage_carries_data_keys_never_the_private_key(source, tmp_path):
    """What a Spark task is shipped (TieredStorage.for_files) reads the encrypted
    segments it names with their data keys alone: no RSA private key in its bytes."""
    import pickle

    ring, pem = KeyRing.generate("task-key")
    options = UploadOptions(chunk_size=500, compression=True, key_ring=ring)
    upload_partition(str(source), str(tmp_path / "copy"), options=options)
    with tiered_storage.open_tiered(str(tmp_path / "copy"), key_ring=ring) as copy:
        log = copy.log(TP)
        seg = log.segments[1]
        shipped = pickle.dumps(copy.tiered_storage.for_files(TP, [seg.path]))
        assert b"PRIVATE KEY" not in shipped and pem not in shipped
        assert pickle.loads(pickle.dumps(ring)) is not None   # the ring itself does pickle
        task = pickle.loads(shipped)
        assert task.key_ring is None
        with task.open(seg.path) as reader:
            got = reader.read(0, reader.size)
        with copy.tiered_storage.open(seg.path) as reader:
            assert got == reader.read(0, reader.size)
