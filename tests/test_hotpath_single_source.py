"""Code folded back into one place (issue 36's maintenance): what the folds keep.

(``LogSegment.needs_roll``'s rules, now each in one home, are pinned by
tests/test_segment.py and tests/test_log.py: each of Kafka's roll conditions fails a
test there when it is dropped.)

* ``RecordColumns.key`` and ``value`` take a record number the same way in both layouts,
  negative numbers counted from the end (as :meth:`RecordColumns.headers` and a list
  take them): the copy layout used to answer ``b""`` for a negative number.
"""

from __future__ import annotations

import pytest

from kafkastore.records import decode_columns, encode_batch


def _columns():
    batch = encode_batch([(b"k0", b"v0", 5), (None, b"v1", 6), (b"k2", None, 7),
                          (b"k3", b"value-three", 8)], base_offset=10)
    return decode_columns(batch), decode_columns(batch, copy=False)


@pytest.mark.parametrize("layout", ["copy", "view"])
def test_columns_key_and_value_take_negative_record_numbers(layout):
    copied, viewed = _columns()
    cols = copied if layout == "copy" else viewed
    n = len(cols)
    assert cols.is_view is (layout == "view")
    for i in range(n):
        assert cols.key(i - n) == cols.key(i)
        assert cols.value(i - n) == cols.value(i)
    assert (cols.key(-1), cols.value(-1)) == (b"k3", b"value-three")
    assert (cols.key(-3), cols.value(-3)) == (None, b"v1")
    assert (cols.key(-2), cols.value(-2)) == (b"k2", None)


@pytest.mark.parametrize("layout", ["copy", "view"])
@pytest.mark.parametrize("i", [4, -5, 100])
def test_columns_key_and_value_out_of_range(layout, i):
    copied, viewed = _columns()
    cols = copied if layout == "copy" else viewed
    with pytest.raises(IndexError, match="out of range"):
        cols.key(i)
    with pytest.raises(IndexError, match="out of range"):
        cols.value(i)


def test_columns_layouts_agree():
    """Both layouts give every record's key and value alike, by either numbering."""
    copied, viewed = _columns()
    n = len(copied)
    for i in range(-n, n):
        assert (copied.key(i), copied.value(i)) == (viewed.key(i), viewed.value(i))
