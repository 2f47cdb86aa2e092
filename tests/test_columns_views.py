"""decode_columns' view layout (``copy=False``): keys and values left where they are.

What must hold, on both kernels: every column but the keys' and values' is the copy
layout's; record i's key and value, read through ``*_starts``/``*_lengths``, are the
bytes the record objects of ``iter_records`` hold (an independent oracle); for
uncompressed v2 input the data array is the source itself (same address, no copy) and
keeps it alive; compressed and legacy input gets one buffer of its own; errors are those
of the copy layout; ``to_arrow`` gives ``binary_view`` columns over the source.
"""

from __future__ import annotations

import gc
import mmap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkastore import records
from kafkastore.errors import CorruptRecordError, InvalidCrcError

OTHER_COLUMNS = ("offset", "timestamp", "timestamp_type", "key_null", "value_null",
                 "header_count")


def _batches(codec="none", magic=2, n_batches=3, per_batch=5, base=0):
    out = []
    for b in range(n_batches):
        recs = []
        for i in range(per_batch):
            j = b * per_batch + i
            key = None if j % 4 == 1 else b"key-%d" % j
            value = None if j % 5 == 2 else b"v" * (j * 7 % 40)
            recs.append((key, value, 1000 + j))
        out.append(records.encode_batch(recs, base_offset=base + b * per_batch,
                                        compression=codec, magic=magic))
    return b"".join(out)


INPUTS = {
    "uncompressed": lambda: _batches(),
    "gzip": lambda: _batches("gzip"),
    "zstd": lambda: _batches("zstd"),
    "mixed": lambda: _batches() + _batches("lz4", base=15) + _batches(base=30),
    "legacy-v1": lambda: _batches(magic=1),
    "legacy-v0-gzip": lambda: _batches("gzip", magic=0),
    "legacy-and-v2": lambda: _batches(magic=1) + _batches(base=15),
    "empty": lambda: b"",
}


def _expected(buf):
    return [(r.offset, r.key, r.value) for r in records.iter_records(buf)]


def _views(cols: dict, name: str):
    data, starts, lengths, null = (cols[name + "_data"], cols[name + "_starts"],
                                   cols[name + "_lengths"], cols[name + "_null"])
    return [None if null[i] else data[starts[i]:starts[i] + lengths[i]].tobytes()
            for i in range(len(starts))]


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_views_give_the_records_keys_and_values(rb, kind):
    buf = INPUTS[kind]()
    views = rb.decode_columns(buf, copy=False)
    copied = rb.decode_columns(buf)
    expected = _expected(buf)
    assert list(zip(views["offset"].tolist(), _views(views, "key"),
                    _views(views, "value"))) == expected
    for name in OTHER_COLUMNS:
        np.testing.assert_array_equal(views[name], copied[name], err_msg=name)
    assert "key_offsets" not in views and "value_offsets" not in views
    assert views["key_data"] is views["value_data"]
    # positions in a data array below 2 GiB are int32 (the kernel writes half the bytes)
    assert views["key_starts"].dtype == views["value_starts"].dtype == np.int32
    assert views["key_lengths"].dtype == views["value_lengths"].dtype == np.int32
    # a null has length 0
    assert not views["key_lengths"][views["key_null"]].any()
    assert not views["value_lengths"][views["value_null"]].any()


def test_uncompressed_views_are_the_source_itself(rb):
    buf = _batches()
    cols = rb.decode_columns(buf, copy=False)
    data = cols["value_data"]
    assert data.ctypes.data == np.frombuffer(buf, dtype=np.uint8).ctypes.data
    assert len(data) == len(buf) and np.shares_memory(data, np.frombuffer(buf, np.uint8))
    # positions are the buffer's: each value is at its start in the source bytes
    for value, s, n, null in zip(_views(cols, "value"), cols["value_starts"],
                                 cols["value_lengths"], cols["value_null"]):
        assert null or buf[s:s + n] == value


def test_a_range_keeps_the_buffers_positions(rb):
    first = _batches(n_batches=1)
    buf = first + _batches(base=5)
    cols = rb.decode_columns(buf, len(first), copy=False)
    assert cols["offset"].tolist() == [r[0] for r in _expected(buf)][5:]
    assert cols["value_starts"].min() > len(first)
    assert _views(cols, "value") == [r[2] for r in _expected(buf)][5:]


@pytest.mark.parametrize("kind", ["gzip", "mixed", "legacy-v1"])
def test_compressed_or_legacy_input_gets_one_buffer_of_its_own(rb, kind):
    buf = INPUTS[kind]()
    cols = rb.decode_columns(buf, copy=False)
    assert not np.shares_memory(cols["value_data"], np.frombuffer(buf, np.uint8))
    assert _views(cols, "value") == [r[2] for r in _expected(buf)]


def test_headers_are_decoded_alike_in_both_layouts(rb):
    recs = [(b"k", b"v", 5, [("h1", b"x"), ("h2", None)]), (None, b"w", 6, [])]
    buf = records.encode_batch(recs)
    views = rb.decode_columns(buf, copy=False, headers=True)
    copied = rb.decode_columns(buf, headers=True)
    for name in [n for n in copied if n.startswith("header_")]:
        np.testing.assert_array_equal(views[name], copied[name], err_msg=name)
    assert _views(views, "value") == [b"v", b"w"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.none() | st.binary(max_size=300),
                                   st.none() | st.binary(max_size=300)),
                         min_size=1, max_size=8), max_size=5),
       st.sampled_from(["none", "none", "lz4"]))
def test_random_batches_agree_with_the_records(batches, codec):
    buf = b"".join(records.encode_batch(b, base_offset=100 * i, compression=codec)
                   for i, b in enumerate(batches))
    cols = records.decode_columns(buf, copy=False)
    assert [(cols.key(i), cols.value(i)) for i in range(len(cols))] == \
        [(k, v) for b in batches for k, v in b]
    copied = records.decode_columns(buf)
    gathered = cols.contiguous()
    for name in ("key_offsets", "key_data", "value_offsets", "value_data"):
        np.testing.assert_array_equal(getattr(gathered, name), getattr(copied, name),
                                      err_msg=name)


def _corrupt_record_length(buf: bytes) -> bytes:
    # the first record's length varint (right after the 61-byte header): past the batch
    out = bytearray(buf)
    out[records.RECORD_BATCH_OVERHEAD] = 0x7E
    return bytes(out)


@pytest.mark.parametrize("copy", [True, False])
def test_errors_are_the_copy_layouts(rb, copy):
    buf = _batches()
    bad = bytearray(buf)
    bad[-1] ^= 0xFF
    with pytest.raises(InvalidCrcError) as crc_error:
        rb.decode_columns(bytes(bad), copy=copy)
    with pytest.raises(CorruptRecordError) as record_error:
        rb.decode_columns(_corrupt_record_length(buf), validate=False,
                                         copy=copy)
    with pytest.raises(InvalidCrcError) as crc_copy:
        rb.decode_columns(bytes(bad))
    with pytest.raises(CorruptRecordError) as record_copy:
        rb.decode_columns(_corrupt_record_length(buf), validate=False)
    assert str(crc_error.value) == str(crc_copy.value)
    assert str(record_error.value) == str(record_copy.value)
    assert record_error.value.position == record_copy.value.position == 0


# -- the RecordColumns API and the source's lifetime -----------------------------------------


def test_record_columns_accessors_read_either_layout():
    buf = _batches() + _batches("zstd", base=15)
    views, copied = records.decode_columns(buf, copy=False), records.decode_columns(buf)
    assert views.is_view and not copied.is_view
    assert views.key_offsets is None and copied.key_starts is None
    assert [views.value(i) for i in range(len(views))] == \
        [copied.value(i) for i in range(len(copied))]
    assert [views.key(i) for i in range(len(views))] == \
        [copied.key(i) for i in range(len(copied))]
    assert copied.contiguous() is copied


def test_views_keep_a_dropped_source_alive():
    def decode():
        return records.decode_columns(bytearray(_batches()), copy=False)

    cols = decode()
    gc.collect()
    assert [cols.value(i) for i in range(len(cols))] == [r[2] for r in _expected(_batches())]


def test_a_bytearray_source_is_shared_and_cannot_be_resized():
    src = bytearray(_batches())
    cols = records.decode_columns(src, copy=False)
    with pytest.raises(BufferError):
        src.extend(b"x")
    i = int(np.flatnonzero(cols.value_lengths)[0])
    src[int(cols.value_starts[i])] ^= 0xFF   # the caller's change shows through
    assert cols.value(i)[0] == (_expected(_batches())[i][2][0] ^ 0xFF)
    del cols
    gc.collect()
    src.extend(b"x")   # released with the columns


def test_an_mmap_source_stays_referenced(tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(_batches())
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    cols = records.decode_columns(mm, copy=False)
    with pytest.raises(BufferError):
        mm.close()
    assert [cols.value(i) for i in range(len(cols))] == [r[2] for r in _expected(_batches())]
    del cols
    gc.collect()
    mm.close()


# -- Arrow -------------------------------------------------------------------------------------


def _check_arrow_over(buf, raw, pa) -> None:
    table = records.decode_columns(buf, copy=False).to_arrow()
    src = pa.py_buffer(buf)
    for name in ("key", "value"):
        arr = table.column(name).chunks[0]
        assert arr.type == pa.binary_view()
        arr.validate(full=True)
        data = arr.buffers()[2]
        assert src.address <= data.address, name
        assert data.address + data.size <= src.address + src.size, name
    assert table.column("value").to_pylist() == [r[2] for r in _expected(raw)]
    assert table.column("key").to_pylist() == [r[1] for r in _expected(raw)]
    copied = records.decode_columns(raw).to_arrow()
    for name in ("offset", "timestamp", "timestamp_type", "header_count"):
        assert table.column(name).equals(copied.column(name)), name


@pytest.mark.parametrize("source", [bytes, bytearray, "mmap"])
def test_arrow_value_buffer_lies_inside_the_source(tmp_path, source):
    pa = pytest.importorskip("pyarrow")
    raw = _batches(per_batch=20)
    if source != "mmap":
        _check_arrow_over(source(raw), raw, pa)
        return
    path = tmp_path / "segment.log"
    path.write_bytes(raw)
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    _check_arrow_over(buf, raw, pa)
    gc.collect()
    buf.close()   # nothing of the table is left holding it


def test_arrow_of_compressed_views_points_into_the_decoders_buffer():
    pa = pytest.importorskip("pyarrow")
    buf = _batches("zstd")
    cols = records.decode_columns(buf, copy=False)
    arr = cols.to_arrow().column("value").chunks[0]
    assert arr.buffers()[2].address == cols.value_data.ctypes.data
    assert arr.to_pylist() == [r[2] for r in _expected(buf)]
