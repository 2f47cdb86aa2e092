"""kafkastore.txn_index: a port of Kafka's ``TransactionIndexTest``, plus the on-disk format.

The first part follows ``storage/src/test/java/org/apache/kafka/storage/internals/log/
TransactionIndexTest.java`` test by test (``testUpdateParentDir`` has no counterpart: a
:class:`TransactionIndex` holds a path, which :meth:`TransactionIndex.rename_to` changes).
The second part checks what Kafka's test leaves implicit: the exact bytes of the
``.txnindex`` file (built and read here with :mod:`struct`, never with the module's own
encoder), torn tails, foreign versions, when the file appears and that no descriptor is
kept open.
"""

from __future__ import annotations

import os
import struct

import pytest

from kafkastore.errors import CorruptIndexError
from kafkastore.txn_index import (
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    collect_aborted_txns,
    parse_aborted_txns,
)

ENTRY = struct.Struct(">hqqqq")   # version, producerId, firstOffset, lastOffset, LSO
ENTRY_SIZE = 34

# the four transactions most of Kafka's tests append: AbortedTxn(pid, first, last, lso)
FOUR = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "00000000000000000000.txnindex")


@pytest.fixture
def index(path) -> TransactionIndex:
    return TransactionIndex(0, path)


def entry(pid: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    """One ``.txnindex`` entry by hand."""
    return ENTRY.pack(version, pid, first, last, lso)


def read_entries(path: str) -> list[tuple[int, int, int, int, int]]:
    """The whole entries of the file, decoded with struct."""
    with open(path, "rb") as f:
        data = f.read()
    return [ENTRY.unpack_from(data, p) for p in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE)]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- Kafka's TransactionIndexTest ---------------------------------------------------------------


def test_position_set_correctly_when_opened(index, path):
    """testPositionSetCorrectlyWhenOpened: an index reopened on an existing file appends
    after the entries already there, not over them."""
    for txn in FOUR:
        index.append(txn)
    reopened = TransactionIndex(0, path)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_aborted_txns() == FOUR + [another]
    assert os.path.getsize(path) == 5 * ENTRY_SIZE


def test_sanity_check(index, path):
    """testSanityCheck: reopened with a start offset above the entries' last offsets, the
    index fails its sanity check with a CorruptIndexException."""
    for txn in FOUR:
        index.append(txn)
    index.sanity_check()   # start offset 0: every last offset lies in the segment
    with pytest.raises(CorruptIndexError) as info:
        TransactionIndex(100, path).sanity_check()
    assert path in str(info.value)
    assert "is less than start offset 100" in str(info.value)


def test_sanity_check_boundary(index, path):
    """sanityCheck compares ``lastOffset < startOffset``: a last offset equal to the start
    offset is in the segment."""
    index.append(AbortedTxn(0, 3, 10, 11))
    TransactionIndex(10, path).sanity_check()
    with pytest.raises(CorruptIndexError):
        TransactionIndex(11, path).sanity_check()


def test_last_offset_must_increase(index):
    """testLastOffsetMustIncrease: an entry with the same last offset as the previous one is
    refused (IllegalArgumentException)."""
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="must increase sequentially"):
        index.append(AbortedTxn(0, 0, 15, 11))
    assert index.all_aborted_txns() == [AbortedTxn(1, 5, 15, 13)]


def test_last_offset_cannot_decrease(index):
    """testLastOffsetCannotDecrease: an entry with a lower last offset is refused."""
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="must increase sequentially"):
        index.append(AbortedTxn(0, 0, 10, 11))
    assert index.all_aborted_txns() == [AbortedTxn(1, 5, 15, 13)]


def test_collect_aborted_transactions(index):
    """testCollectAbortedTransactions: entries with ``lastOffset >= fetch`` and
    ``firstOffset < upper`` are collected; the search is complete at the first entry whose
    lastStableOffset reaches the upper bound."""
    for txn in FOUR:
        index.append(txn)
    cases = [
        ((0, 100), FOUR, False),
        ((0, 32), FOUR[0:3], True),
        ((0, 35), FOUR, True),
        ((10, 35), FOUR, True),
        ((11, 35), FOUR[1:4], True),
        ((20, 41), FOUR[2:4], False),
    ]
    for (fetch, upper), aborted, complete in cases:
        result = index.collect_aborted_txns(fetch, upper)
        assert isinstance(result, TxnIndexSearchResult)
        assert result.aborted == aborted, (fetch, upper)
        assert result.complete is complete, (fetch, upper)


def test_collect_stops_at_the_first_entry_past_the_upper_bound(index):
    """collectAbortedTxns returns as soon as an entry's lastStableOffset >= upper: later
    entries are not looked at even if they would match the range."""
    txns = [AbortedTxn(0, 0, 10, 30), AbortedTxn(1, 5, 15, 16)]
    for txn in txns:
        index.append(txn)
    # the second entry matches [0, 20) too, but the first one ends the search
    assert index.collect_aborted_txns(0, 20) == TxnIndexSearchResult([txns[0]], True)
    assert index.collect_aborted_txns(11, 20) == TxnIndexSearchResult([], True)
    assert index.collect_aborted_txns(0, 31) == TxnIndexSearchResult(txns, False)


def test_collect_across_segments():
    """UnifiedLog.collectAbortedTransactions walks the segments' indexes from the fetch
    offset's on and stops at the first complete result (the function over entries)."""
    segments = [[AbortedTxn(1, 0, 10, 11)],
                [AbortedTxn(2, 12, 25, 30), AbortedTxn(3, 20, 40, 41)],
                [AbortedTxn(4, 45, 50, 51)]]
    found, complete = [], False
    for entries in segments:
        result = collect_aborted_txns(entries, 5, 28)
        found += result.aborted
        if result.complete:
            complete = True
            break
    assert found == [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 12, 25, 30)]
    assert complete
    assert collect_aborted_txns([], 0, 10) == TxnIndexSearchResult([], False)


def test_truncate(index):
    """testTruncate: truncateTo(o) drops the entries from the first one whose last offset is
    >= o; reset empties the index."""
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25),
            AbortedTxn(3, 32, 50, 40)]
    for txn in txns:
        index.append(txn)
    index.truncate_to(51)
    assert index.collect_aborted_txns(0, 100).aborted == txns
    index.truncate_to(50)
    assert index.collect_aborted_txns(0, 100).aborted == txns[0:3]
    assert os.path.getsize(index.path) == 3 * ENTRY_SIZE
    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted == []
    assert os.path.getsize(index.path) == 0


def test_truncate_then_append_checks_the_new_last_offset(index):
    """After truncateTo the last offset is the last kept entry's (Kafka's newLastOffset):
    an append above it is accepted, one at or below it refused."""
    for txn in FOUR:
        index.append(txn)
    index.truncate_to(36)   # keeps lastOffsets 10, 15, 35
    with pytest.raises(ValueError):
        index.append(AbortedTxn(7, 30, 35, 36))
    index.append(AbortedTxn(7, 30, 36, 37))
    assert index.all_aborted_txns() == FOUR[0:3] + [AbortedTxn(7, 30, 36, 37)]
    index.truncate_to(0)    # everything goes
    assert index.all_aborted_txns() == []
    index.append(AbortedTxn(8, 0, 1, 2))
    assert index.all_aborted_txns() == [AbortedTxn(8, 0, 1, 2)]


def test_reset_forgets_the_last_offset(index):
    """reset sets lastOffset to empty: any last offset may be appended afterwards."""
    index.append(AbortedTxn(1, 5, 15, 13))
    index.reset()
    index.append(AbortedTxn(0, 0, 3, 4))
    assert index.all_aborted_txns() == [AbortedTxn(0, 0, 3, 4)]


def test_reset_and_truncate_of_a_missing_file(index, path):
    """reset and truncateTo of an index whose file was never created do nothing (Kafka has
    no channel then) and do not create it."""
    index.reset()
    index.truncate_to(0)
    assert not os.path.exists(path)
    assert index.all_aborted_txns() == []


def test_aborted_txn_serde():
    """testAbortedTxnSerde: the fields of an AbortedTxn, version CURRENT_VERSION (0), and
    its 34 bytes decode back to the same fields."""
    txn = AbortedTxn(983493, 137, 299, 200)
    assert (txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
            txn.last_stable_offset) == (0, 983493, 137, 299, 200)
    data = txn.to_bytes()
    assert data == entry(983493, 137, 299, 200)
    assert parse_aborted_txns(data) == [txn]


def test_rename_index(index, tmp_path):
    """testRenameIndex: after renameTo the index appends to, and reads from, the new file."""
    renamed = str(tmp_path / "renamed.txnindex")
    old = index.path
    index.append(AbortedTxn(0, 0, 10, 2))
    index.rename_to(renamed)
    index.append(AbortedTxn(1, 5, 15, 16))
    aborted = index.collect_aborted_txns(0, 100).aborted
    assert [t.first_offset for t in aborted] == [0, 5]
    assert index.path == renamed
    assert not os.path.exists(old)
    assert [e[2] for e in read_entries(renamed)] == [0, 5]


def test_rename_before_the_file_exists(index, tmp_path):
    """renameTo of an index with no file yet only changes its path (Kafka: the move runs
    only ``if (file.exists())``, the path changes in ``finally``)."""
    renamed = str(tmp_path / "renamed.txnindex")
    index.rename_to(renamed)
    assert index.path == renamed
    assert not os.path.exists(renamed)
    index.append(AbortedTxn(0, 0, 10, 2))
    assert read_entries(renamed) == [(0, 0, 0, 10, 2)]


def test_flush(tmp_path):
    """testFlush: flush of an index whose file does not exist works; after an append and a
    flush the file is not empty."""
    path = str(tmp_path / "missing.txnindex")
    index = TransactionIndex(0, path)
    index.flush()
    assert not os.path.exists(path)
    index.append(AbortedTxn(0, 0, 10, 2))
    index.flush()
    assert os.path.getsize(path) == ENTRY_SIZE


def test_delete_if_exists(index, path):
    """testDeleteIfExists: deleteIfExists removes the file and says whether it did."""
    index.append(AbortedTxn(0, 0, 10, 2))
    assert os.path.exists(path)
    assert index.delete_if_exists() is True
    assert not os.path.exists(path)
    assert index.delete_if_exists() is False


def test_append_after_delete_starts_over(index, path):
    """A deleted index has no last offset: the next append recreates the file with one
    entry, whatever its last offset."""
    index.append(AbortedTxn(0, 0, 10, 2))
    index.delete_if_exists()
    index.append(AbortedTxn(1, 0, 5, 6))
    assert read_entries(path) == [(0, 1, 0, 5, 6)]


# -- the on-disk format -----------------------------------------------------------------------


def test_file_bytes_are_34_byte_big_endian_entries(index, path):
    """AbortedTxn's layout: int16 version 0, int64 producerId, firstOffset, lastOffset and
    lastStableOffset, big-endian, back to back, no header."""
    txns = [AbortedTxn(2**62 + 5, 1, 2, 3), AbortedTxn(-1, -2, 2**40, 2**63 - 1)]
    for txn in txns:
        index.append(txn)
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 2 * ENTRY_SIZE
    assert data == entry(2**62 + 5, 1, 2, 3) + entry(-1, -2, 2**40, 2**63 - 1)
    assert data[:2] == b"\x00\x00"
    assert data[2:10] == (2**62 + 5).to_bytes(8, "big")


def test_reads_a_file_written_by_hand(tmp_path):
    """Entries written with struct are read back as they were written."""
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(entry(5, 90, 100, 101) + entry(6, 95, 120, 121))
    index = TransactionIndex(100, str(path))
    assert index.all_aborted_txns() == [AbortedTxn(5, 90, 100, 101), AbortedTxn(6, 95, 120, 121)]
    index.sanity_check()
    with pytest.raises(ValueError):   # the last offset on disk is 120
        index.append(AbortedTxn(7, 110, 120, 130))
    index.append(AbortedTxn(7, 110, 121, 130))
    assert len(read_entries(str(path))) == 3


def test_reopened_index_checks_against_the_last_entry_on_disk(index, path):
    """kafkastore loads the last offset of an existing file before the first append (Kafka
    starts a reopened index with none): a reopened index still refuses a last offset that
    does not increase."""
    for txn in FOUR:
        index.append(txn)
    reopened = TransactionIndex(0, path)
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(9, 40, 50, 51))
    assert reopened.all_aborted_txns() == FOUR


@pytest.mark.parametrize("tail", [b"\xab" * 10, b"\x00" * 33, b"\x01"])
def test_torn_tail_is_ignored_and_overwritten(index, path, tail):
    """A partial entry at the end (a torn write) is no entry: readers skip it (Kafka's
    iterator stops when fewer than 34 bytes remain) and the next append overwrites it, so
    the file stays a whole number of entries."""
    index.append(AbortedTxn(0, 0, 10, 11))
    index.append(AbortedTxn(1, 5, 15, 16))
    with open(path, "ab") as f:
        f.write(tail)
    assert index.all_aborted_txns() == [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 16)]
    assert TransactionIndex(0, path).all_aborted_txns() == index.all_aborted_txns()
    assert index.collect_aborted_txns(0, 100).aborted == index.all_aborted_txns()
    index.sanity_check()

    index.append(AbortedTxn(2, 16, 20, 21))
    assert os.path.getsize(path) == 3 * ENTRY_SIZE
    assert read_entries(path) == [(0, 0, 0, 10, 11), (0, 1, 5, 15, 16), (0, 2, 16, 20, 21)]


def test_torn_tail_overwritten_by_a_reopened_index(index, path):
    """A new TransactionIndex on a file with a torn tail appends over the tail too."""
    index.append(AbortedTxn(0, 0, 10, 11))
    with open(path, "ab") as f:
        f.write(b"\xff" * 10)
    reopened = TransactionIndex(0, path)
    reopened.append(AbortedTxn(1, 5, 15, 16))
    assert os.path.getsize(path) % ENTRY_SIZE == 0
    assert read_entries(path) == [(0, 0, 0, 10, 11), (0, 1, 5, 15, 16)]


def test_torn_tail_alone(tmp_path):
    """A file holding only a partial entry has no entry; the first append goes to byte 0."""
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(b"\x00" * 20)
    index = TransactionIndex(0, str(path))
    assert index.all_aborted_txns() == []
    index.append(AbortedTxn(4, 1, 2, 3))
    assert path.read_bytes() == entry(4, 1, 2, 3)


def test_truncate_drops_a_torn_tail_with_the_entries(index, path):
    """truncateTo cuts the file at the first dropped entry, torn tail included."""
    for txn in FOUR:
        index.append(txn)
    with open(path, "ab") as f:
        f.write(b"\x07" * 10)
    index.truncate_to(35)
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    assert index.all_aborted_txns() == FOUR[0:2]


@pytest.mark.parametrize("version, read_as", [(1, 0), (255, 0), (-1, -1), (-256, -1)])
def test_the_version_is_read_as_one_byte_as_kafka_does(tmp_path, version, read_as):
    """Kafka's AbortedTxn.version() reads one byte, the int16's high byte: 0x0001 and
    0x00FF read as version 0, 0xFFFF and 0xFF00 as -1 (not above 0: accepted)."""
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(entry(2, 12, 20, 21, version=version))
    (txn,) = TransactionIndex(0, str(path)).all_aborted_txns()
    assert (txn.version, txn.producer_id, txn.last_offset) == (read_as, 2, 20)


@pytest.mark.parametrize("version", [256, 0x7F00, 0x0100 + 7])
def test_unknown_version_is_corrupt(tmp_path, version):
    """An entry whose version byte is above 0 raises CorruptIndexError naming the file
    (Kafka raises on a version above CURRENT_VERSION while iterating)."""
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(entry(1, 0, 10, 11) + entry(2, 12, 20, 21, version=version))
    index = TransactionIndex(0, str(path))
    with pytest.raises(CorruptIndexError) as info:
        index.all_aborted_txns()
    assert str(path) in str(info.value)
    assert info.value.path == str(path)
    with pytest.raises(CorruptIndexError):
        index.collect_aborted_txns(0, 100)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    with pytest.raises(CorruptIndexError) as info:
        parse_aborted_txns(path.read_bytes(), str(path))
    assert str(path) in str(info.value)


def test_file_not_created_until_the_first_append(index, path):
    """Kafka creates the .txnindex on first append: constructing, reading, collecting,
    checking and flushing an empty index leave no file."""
    assert index.all_aborted_txns() == []
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    index.sanity_check()
    index.flush()
    assert not os.path.exists(path)
    assert not index.exists
    index.append(AbortedTxn(0, 0, 10, 11))
    assert os.path.exists(path)
    assert index.exists


def test_no_file_descriptor_stays_open(index, path):
    """The index keeps no descriptor between calls (the segment's only one is its .log)."""
    before = open_fds()
    for i in range(5):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.all_aborted_txns()
    index.collect_aborted_txns(0, 100)
    index.sanity_check()
    index.flush()
    index.truncate_to(30)
    assert open_fds() == before
    reopened = TransactionIndex(0, path)
    reopened.append(AbortedTxn(9, 30, 40, 41))
    reopened.reset()
    assert open_fds() == before
    assert len(read_entries(path)) == 0
