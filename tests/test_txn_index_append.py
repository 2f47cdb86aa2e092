"""TransactionIndex.append reads the file once, not at every abort.

It read the whole ``.txnindex`` to find where the whole entries end before each append,
so the n-th abort of a segment cost O(n) and a segment's aborts O(n^2). It now reads the
file once, on the first append, for the last entry's offset (the order check), and only
``fstat``\\ s it afterwards; the bytes written are unchanged, a torn tail is still
overwritten, and a reopened index still checks the order against the file.
"""

from __future__ import annotations

import pytest

from kafkastore import _fileio
from kafkastore.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex


def _count_reads(monkeypatch, path) -> list:
    reads = []
    real = _fileio.read_file

    def read_file(p):
        if str(p) == str(path):
            reads.append(p)
        return real(p)
    monkeypatch.setattr(_fileio, "read_file", read_file)
    return reads


def test_appends_read_the_file_once(tmp_path, monkeypatch):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(0, str(path))
    reads = _count_reads(monkeypatch, path)
    txns = [AbortedTxn(7, 10 * i, 10 * i + 5, 10 * i + 6) for i in range(200)]
    for txn in txns:
        index.append(txn)
    assert len(reads) <= 1
    assert path.read_bytes() == b"".join(t.to_bytes() for t in txns)
    assert TransactionIndex(0, str(path)).all_aborted_txns() == txns


def test_a_torn_tail_is_overwritten_and_the_order_checked_after_a_reopen(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    first = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 8, 9, 10)]
    path.write_bytes(b"".join(t.to_bytes() for t in first) + b"\x00\x01torn")
    index = TransactionIndex(0, str(path))
    with pytest.raises(ValueError, match="must increase"):
        index.append(AbortedTxn(3, 9, 9, 10))      # not after the file's last entry
    index.append(AbortedTxn(3, 11, 12, 13))
    index.append(AbortedTxn(4, 14, 15, 16))
    data = path.read_bytes()
    assert len(data) == 4 * ABORTED_TXN_SIZE
    assert index.all_aborted_txns() == first + [AbortedTxn(3, 11, 12, 13),
                                                AbortedTxn(4, 14, 15, 16)]
