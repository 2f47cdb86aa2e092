"""kafkastore.file_records: Kafka's FileRecordsTest (kafka-storage.md §10.8) and the file walk
of §2.7 (FileLogInputStream).

Entries are built with kafkastore.records.encode_batch; expected sizes, positions and offsets
come from the test's own inputs, from Kafka's rules or from the segment vectors' expected.json
(the batch table of an independently produced .log file). File sizes are checked with os.fstat
and system calls are observed through the kafkastore._fileio seam, never through the object
under test.
"""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest
from _vectors import VECTORS

from kafkastore import _fileio
from kafkastore.batch_header import EntryHeader
from kafkastore.errors import CorruptRecordError, KafkaStoreError
from kafkastore.file_records import MAX_SEGMENT_SIZE, FileRecords, LogSlice
from kafkastore.records import encode_batch, iter_batches

VALUES = (b"abcd", b"efgh", b"ijkl")  # FileRecordsTest's three values, one batch each
INT_MAX = (1 << 31) - 1


def batch(offset: int, value: bytes, **kw) -> bytes:
    """One v2 batch holding one record (MemoryRecords.withRecords(offset, NONE, record))."""
    return encode_batch([(None, value, 1_000 + offset)], base_offset=offset, **kw)


@pytest.fixture
def log_path(tmp_path):
    return str(tmp_path / "00000000000000000000.log")


@pytest.fixture
def entries():
    return [batch(i, v) for i, v in enumerate(VALUES)]


@pytest.fixture
def file_records(log_path, entries):
    """FileRecordsTest.setup: a file holding the three batches at offsets 0, 1, 2."""
    fr = FileRecords.open(log_path)
    for e in entries:
        fr.append(e)
    yield fr
    fr.close()


def physical_size(fr: FileRecords) -> int:
    return os.fstat(fr.fileno()).st_size


def values_of(slice_or_bytes) -> list[bytes]:
    data = slice_or_bytes.to_bytes() if isinstance(slice_or_bytes, LogSlice) else slice_or_bytes
    return [r.value for b in iter_batches(data) for r in b]


class Recording(_fileio.FileSystem):
    """Records the ftruncate, fsync, close and pread calls the storage layer makes."""

    def __init__(self):
        self.calls = []

    def ftruncate(self, fd, size):
        self.calls.append(("ftruncate", fd, size))
        super().ftruncate(fd, size)

    def fsync(self, fd):
        self.calls.append(("fsync", fd))
        super().fsync(fd)

    def close(self, fd):
        self.calls.append(("close", fd))
        super().close(fd)

    def pread(self, fd, size, position):
        self.calls.append(("pread", fd, size, position))
        return super().pread(fd, size, position)


@pytest.fixture
def recording():
    fs = Recording()
    old = _fileio.install(fs)
    try:
        yield fs
    finally:
        _fileio.install(old)


# -- sizes and appends -----------------------------------------------------------------------


def test_file_size_matches_the_file_after_every_append(log_path):
    """testFileSize: the cached size equals the channel size after each append."""
    fr = FileRecords.open(log_path)
    try:
        assert fr.size == physical_size(fr) == 0
        total = 0
        for i in range(20):
            data = batch(i, b"abcd")
            assert fr.append(data) == len(data)
            total += len(data)
            assert fr.size == physical_size(fr) == total
    finally:
        fr.close()


def test_append_past_the_int32_limit_is_refused_before_writing(log_path):
    """An append that would take the file past Integer.MAX_VALUE bytes raises (Kafka:
    IllegalArgumentException) and writes nothing. The logical size is set near the limit
    through the constructor, as Kafka's test mocks the channel size."""
    fd = os.open(log_path, os.O_RDWR | os.O_CREAT)
    fr = FileRecords(log_path, fd, MAX_SEGMENT_SIZE - 10)
    try:
        data = batch(0, b"x")
        assert len(data) > 10
        with pytest.raises(ValueError):
            fr.append(data)
        assert fr.size == MAX_SEGMENT_SIZE - 10
        assert os.fstat(fd).st_size == 0
        fr.append(b"\0" * 10)  # exactly up to the limit is allowed
        assert fr.size == MAX_SEGMENT_SIZE
    finally:
        fr.close_handlers()


def test_opening_a_file_larger_than_int32_fails_and_closes_it(tmp_path, recording):
    """Opening an existing file of 2**31 bytes (sparse) raises KafkaException with the path,
    and the descriptor is not leaked."""
    path = str(tmp_path / "00000000000000000000.log")
    with open(path, "wb") as f:
        f.truncate(MAX_SEGMENT_SIZE + 1)
    with pytest.raises(KafkaStoreError) as info:
        FileRecords.open(path, file_already_exists=True)
    assert info.value.path == path
    assert "maximum allowed segment size" in str(info.value)
    closes = [c for c in recording.calls if c[0] == "close"]
    assert len(closes) == 1
    with pytest.raises(OSError):
        os.fstat(closes[0][1])


def test_opening_an_existing_file_without_the_flag_keeps_its_data(log_path, entries):
    """Kafka's FileRecords.open(file) (fileAlreadyExists=false, no preallocation) takes the
    file's length as its size: appending to it continues after the existing data instead
    of overwriting it."""
    with open(log_path, "wb") as f:
        f.write(b"".join(entries))
    fr = FileRecords.open(log_path)
    try:
        assert fr.size == sum(map(len, entries))
        fr.append(batch(3, b"mnop"))
        assert values_of(fr.slice(0, fr.size)) == [*VALUES, b"mnop"]
    finally:
        fr.close()


# -- iteration ---------------------------------------------------------------------------------


@pytest.mark.parametrize("garbage", [0, 2, 4, 5, 6, 17])
def test_partial_trailing_bytes_do_not_break_iteration(log_path, entries, garbage):
    """testIterationOverPartialAndTruncation: zero bytes after the last entry (Kafka writes
    0, 2, 4, 5 and 6 of them) are not an entry. Up to 17 trailing bytes are never read as
    one (§2.7 step 1); the file is reopened so its logical size includes them."""
    with open(log_path, "wb") as f:
        f.write(b"".join(entries) + b"\0" * garbage)
    fr = FileRecords.open(log_path, file_already_exists=True)
    try:
        assert fr.size == sum(map(len, entries)) + garbage
        assert [h.position for h in fr.walk()] == [0, len(entries[0]),
                                                   len(entries[0]) + len(entries[1])]
        assert values_of(fr.slice(0, fr.size)) == list(VALUES)
    finally:
        fr.close_handlers()


def test_eighteen_zero_bytes_are_a_corrupt_entry_with_path_and_position(log_path, entries):
    """With 18 bytes left the 17-byte header is read; its size field 0 < 14 raises
    CorruptRecordException (§2.7 step 3), reported with the file and the entry position."""
    data = b"".join(entries)
    with open(log_path, "wb") as f:
        f.write(data + b"\0" * 18)
    fr = FileRecords.open(log_path, file_already_exists=True)
    try:
        walked = []
        with pytest.raises(CorruptRecordError) as info:
            for header in fr.walk():
                walked.append(header.position)
        assert len(walked) == 3  # the good entries come first
        assert info.value.position == len(data)
        assert info.value.path == log_path
        assert "smaller than minimum record overhead (14)" in str(info.value)
    finally:
        fr.close_handlers()


@pytest.mark.parametrize("size_field", [0, 13, -1, -(1 << 31)])
def test_size_field_below_fourteen_is_corrupt(log_path, entries, size_field):
    good = b"".join(entries)
    bad = (7).to_bytes(8, "big") + size_field.to_bytes(4, "big", signed=True) + b"\x02" * 40
    with open(log_path, "wb") as f:
        f.write(good + bad)
    fr = FileRecords.open(log_path, file_already_exists=True)
    try:
        with pytest.raises(CorruptRecordError) as info:
            list(fr.walk())
        assert (info.value.position, info.value.offset, info.value.path) == (
            len(good), 7, log_path)
    finally:
        fr.close_handlers()


@pytest.mark.parametrize("keep", [12, 17, 18, 40, -1])
def test_walk_stops_silently_at_a_partial_entry(log_path, entries, keep):
    """A crash mid-write leaves the head of an entry: iteration ends before it (§2.7 step 4),
    whatever part of it survived."""
    tail = batch(3, b"mnop")[:keep]
    with open(log_path, "wb") as f:
        f.write(b"".join(entries) + tail)
    fr = FileRecords.open(log_path, file_already_exists=True)
    try:
        assert [h.last_offset for h in fr.walk()] == [0, 1, 2]
        assert values_of(fr.slice(0, fr.size)) == list(VALUES)
    finally:
        fr.close_handlers()


def test_walk_honours_its_end(file_records, entries):
    """An entry running past the walk's end is not yielded (a slice shorter than a batch
    yields nothing)."""
    first, second = len(entries[0]), len(entries[1])
    assert [h.last_offset for h in file_records.walk(0, first + second)] == [0, 1]
    assert [h.last_offset for h in file_records.walk(0, first + second - 1)] == [0]
    assert [h.last_offset for h in file_records.walk(first, first + second)] == [1]
    assert list(file_records.walk(first, first + second - 1)) == []


def test_iteration_does_not_move_the_descriptor_position(file_records):
    """testIterationDoesntChangePosition: reads use pread."""
    fd = file_records.fileno()
    before = os.lseek(fd, 0, os.SEEK_CUR)
    assert values_of(file_records.slice(0, file_records.size)) == list(VALUES)
    list(file_records.walk())
    file_records.read(0, file_records.size)
    assert os.lseek(fd, 0, os.SEEK_CUR) == before


@pytest.mark.parametrize("name", ["s1_v2_mixed_codecs", "s2_mixed_magic"])
def test_walk_reads_the_headers_of_a_reference_segment(tmp_path, name):
    """Every entry of the vectors' .log files (v0, v1, compressed wrappers, v2 of every
    codec) walks to the position, size, magic, last offset and max timestamp of its
    expected.json batch table. base_offset is the stored offset field (a legacy wrapper's
    is its last inner offset)."""
    if VECTORS is None:
        pytest.skip("segment vectors not available (see tests/_vectors.py)")
    directory = VECTORS / "segments" / name
    expected = json.loads((directory / "expected.json").read_text())
    fr = FileRecords.open(str(directory / expected["files"]["log"]["name"]),
                          file_already_exists=True)
    try:
        walked = [(h.position, h.size, h.magic, h.last_offset, h.max_timestamp)
                  for h in fr.walk()]
        assert walked == [(b["position"], b["sizeInBytes"], b["magic"], b["lastOffset"],
                           b["maxTimestamp"]) for b in expected["batches"]]
        bases = [h.base_offset for h in fr.walk()]
        assert bases == [b["baseOffset"] if b["magic"] == 2 else b["offset"]
                         for b in expected["batches"]]
    finally:
        fr.close_handlers()


# -- reads and slices --------------------------------------------------------------------------


def test_read_through_slices(file_records, entries):
    """testRead."""
    size = file_records.size
    first, second = len(entries[0]), len(entries[1])
    whole = file_records.slice(0, size)
    assert whole.size == size
    assert whole.to_bytes() == b"".join(entries)
    rest = [VALUES[1], VALUES[2]]
    for length in (size - first, size, INT_MAX):  # exact, past the end, position + size overflows
        read = file_records.slice(first, length)
        assert read.size == size - first
        assert values_of(read) == rest
    read = file_records.slice(first, second)
    assert read.size == second
    assert read.to_bytes() == entries[1]
    assert values_of(read) == [VALUES[1]]


def test_slice_bounds(file_records):
    size = file_records.size
    assert file_records.slice(size, 10).size == 0  # at the end: empty
    with pytest.raises(ValueError):
        file_records.slice(size + 1, 10)  # Kafka: "Slice from position ... exceeds end position"
    with pytest.raises(ValueError):
        file_records.slice(-1, 10)
    with pytest.raises(ValueError):
        file_records.slice(0, -1)


def test_iterator_with_limits(file_records, entries):
    """testIteratorWithLimits: a slice of exactly one batch yields it; one byte less, none."""
    start = file_records.search_for_offset_with_size(1).position
    size = len(entries[1])
    assert [b.last_offset for b in file_records.slice(start, size).batches()] == [1]
    assert list(file_records.slice(start, size - 1).batches()) == []


def test_slice_end_is_fixed_at_creation(file_records, entries):
    """A slice taken before a concurrent append does not grow with the file."""
    read = file_records.slice(0, INT_MAX)
    before = read.to_bytes()
    file_records.append(batch(3, b"mnop"))
    assert read.size == len(before) == sum(map(len, entries))
    assert read.to_bytes() == before
    assert values_of(file_records.slice(0, INT_MAX)) == [*VALUES, b"mnop"]


def test_slice_records_start_at_first_offset(file_records):
    """LogSlice.records() drops the records below the offset the read asked for."""
    read = LogSlice(file_records, 0, file_records.size, first_offset=1)
    assert [(r.offset, r.value) for r in read.records()] == [(1, b"efgh"), (2, b"ijkl")]


def test_search_for_offset_with_size(file_records, entries):
    """testSearch: exact offsets, from a position, and a missing offset finds the next batch."""
    file_records.append(batch(50, b"test"))
    sizes = [len(e) for e in entries] + [len(batch(50, b"test"))]

    def found(target, start=0):
        h = file_records.search_for_offset_with_size(target, start)
        return (h.last_offset, h.position, h.size)

    assert found(0) == (0, 0, sizes[0])
    assert found(1) == (1, sizes[0], sizes[1])
    assert found(1, sizes[0]) == (1, sizes[0], sizes[1])
    pos4 = sizes[0] + sizes[1] + sizes[2]
    assert found(3, pos4) == (50, pos4, sizes[3])
    assert found(3) == (50, pos4, sizes[3])
    assert found(50, pos4) == (50, pos4, sizes[3])
    assert file_records.search_for_offset_with_size(51) is None
    assert isinstance(file_records.search_for_offset_with_size(0), EntryHeader)


def _mixed_file(path):
    """v2 batches of 1-3 records with gaps, two legacy wrappers among them, small and large."""
    fr = FileRecords.open(path)
    offset = 0
    for i in range(40):
        n = 1 + i % 3
        if i in (7, 23):
            data = encode_batch([(None, b"L%d" % j, 5) for j in range(n)], magic=1,
                                compression="gzip", base_offset=offset)
        else:
            value = b"x" * (9000 if i % 11 == 0 else 20)
            data = encode_batch([(None, value, 5)] * n, base_offset=offset)
        fr.append(data)
        offset += n + (i % 4 == 0)  # a gap after some batches, as compaction leaves
    return fr


def test_search_hints_never_change_the_answer(tmp_path):
    """The read fast path (next_position, at_start) only saves reads: for every target,
    every start and every hint - right, stale, pointing mid-entry or at a legacy wrapper -
    the header and bytes found are those of the plain walk."""
    fr = _mixed_file(str(tmp_path / "00000000000000000000.log"))
    try:
        headers = list(fr.walk())
        positions = [h.position for h in headers]
        hints = [-1, 0, 5, fr.size, fr.size + 100] + positions
        last = headers[-1].last_offset
        for target in range(-1, last + 3):
            for start in positions[::5]:
                want_header, _ = fr.search_with_data(target, start, 0)
                want_bytes = None if want_header is None else \
                    fr.read(want_header.position, 300)
                for hint in hints:
                    for at_start in (False, True):
                        header, data = fr.search_with_data(
                            target, start, 300, next_position=hint, at_start=at_start)
                        assert header == want_header, (target, start, hint, at_start)
                        assert data is None or data == want_bytes
    finally:
        fr.close()


def test_search_with_an_index_hint_reads_once(tmp_path, recording):
    """With the next index entry's position, a read of a v2 batch costs one pread."""
    fr = _mixed_file(str(tmp_path / "00000000000000000000.log"))
    try:
        headers = list(fr.walk())
        before, wanted = headers[10], headers[11]
        assert wanted.magic == 2
        recording.calls.clear()
        header, data = fr.search_with_data(wanted.base_offset, before.position, 100,
                                           next_position=wanted.position)
        assert [c[0] for c in recording.calls] == ["pread"]
        assert header == wanted and data == fr.read(wanted.position, 100)
    finally:
        fr.close()


# -- truncation --------------------------------------------------------------------------------


def test_truncate(file_records, entries):
    """testTruncate: truncateTo(end of the first batch) leaves only it."""
    end = file_records.search_for_offset_with_size(1).position
    assert file_records.truncate_to(end) == sum(map(len, entries)) - end
    assert [h.last_offset for h in file_records.walk()] == [0]
    assert file_records.size == len(entries[0]) == physical_size(file_records)


def test_truncate_not_called_if_size_is_same_as_target(file_records, recording):
    """testTruncateNotCalledIfSizeIsSameAsTargetSize: no truncate system call (some
    systems touch the mtime)."""
    size = file_records.size
    assert file_records.truncate_to(size) == 0
    assert [c for c in recording.calls if c[0] == "ftruncate"] == []


def test_truncate_beyond_size_or_negative_raises(file_records, recording):
    """testTruncateNotCalledIfSizeIsBiggerThanTargetSize: KafkaException, nothing cut."""
    size = file_records.size
    for target in (size + 1, -1):
        with pytest.raises(KafkaStoreError):
            file_records.truncate_to(target)
    assert [c for c in recording.calls if c[0] == "ftruncate"] == []
    assert file_records.size == physical_size(file_records) == size


def test_truncate_called_once_if_size_differs(file_records, recording):
    """testTruncateIfSizeIsDifferentToTargetSize."""
    file_records.truncate_to(23)
    assert [c for c in recording.calls if c[0] == "ftruncate"] == [
        ("ftruncate", file_records.fileno(), 23)]
    assert file_records.size == physical_size(file_records) == 23


# -- preallocation, close ----------------------------------------------------------------------


PREALLOCATED = 512 * 1024 * 1024  # Kafka's 512 MiB (sparse)


def test_preallocate_true(log_path):
    fr = FileRecords.open(log_path, init_file_size=PREALLOCATED, preallocate=True)
    try:
        assert fr.size == 0
        assert os.path.getsize(log_path) == PREALLOCATED
    finally:
        fr.close_handlers()


def test_preallocate_false(log_path):
    fr = FileRecords.open(log_path, init_file_size=PREALLOCATED, preallocate=False)
    try:
        assert fr.size == 0
        assert os.path.getsize(log_path) == 0
    finally:
        fr.close()


def test_preallocate_clean_shutdown_trims(log_path, entries):
    """testPreallocateClearShutdown: appends fill the preallocated file from byte 0; close
    trims it; reopening sees exactly the data."""
    fr = FileRecords.open(log_path, init_file_size=PREALLOCATED, preallocate=True)
    for e in entries:
        fr.append(e)
    old_size = fr.size
    assert old_size == sum(map(len, entries))
    assert os.path.getsize(log_path) == PREALLOCATED
    fr.close()
    assert os.path.getsize(log_path) == old_size
    reopened = FileRecords.open(log_path, file_already_exists=True, init_file_size=PREALLOCATED,
                                preallocate=True)
    try:
        assert reopened.size == old_size == os.path.getsize(log_path)
        assert values_of(reopened.slice(0, reopened.size)) == list(VALUES)
    finally:
        reopened.close()


def test_preallocated_file_reopened_after_a_crash_exposes_zeros(log_path, entries):
    """Without the trim of a clean close, a reopened preallocated file's size is its
    physical length (§4.1): the data reads back, then the zeros are a corrupt entry."""
    init = 64 * 1024
    fr = FileRecords.open(log_path, init_file_size=init, preallocate=True)
    for e in entries:
        fr.append(e)
    data_end = fr.size
    fr.close_handlers()  # a crash: nothing trimmed
    assert os.path.getsize(log_path) == init
    reopened = FileRecords.open(log_path, file_already_exists=True)
    try:
        assert reopened.size == init
        assert values_of(reopened.slice(0, data_end)) == list(VALUES)
        with pytest.raises(CorruptRecordError) as info:
            list(reopened.walk())
        assert (info.value.position, info.value.path) == (data_end, log_path)
        assert reopened.read(data_end, 64) == b"\0" * 64
    finally:
        reopened.close_handlers()


def test_close_flushes_trims_and_releases_the_descriptor(log_path, entries, recording):
    fr = FileRecords.open(log_path, init_file_size=4096, preallocate=True)
    for e in entries:
        fr.append(e)
    fd = fr.fileno()
    fr.close()
    assert ("fsync", fd) in recording.calls
    assert ("close", fd) in recording.calls
    assert recording.calls.index(("fsync", fd)) < recording.calls.index(("close", fd))
    assert os.path.getsize(log_path) == sum(map(len, entries))
    assert fr.closed
    with pytest.raises(OSError):
        os.fstat(fd)
    fr.close()  # idempotent: nothing more happens
    assert recording.calls.count(("close", fd)) == 1
    for call in (fr.fileno, lambda: fr.append(entries[0]), lambda: fr.read(0, 10),
                 lambda: list(fr.walk()), fr.flush, lambda: fr.truncate_to(0)):
        with pytest.raises(KafkaStoreError):
            call()


def test_close_handlers_writes_nothing(log_path, entries, recording):
    fr = FileRecords.open(log_path, init_file_size=4096, preallocate=True)
    fr.append(entries[0])
    fd = fr.fileno()
    fr.close_handlers()
    assert recording.calls == [("ftruncate", fd, 4096), ("close", fd)]
    assert os.path.getsize(log_path) == 4096


def test_rename_and_delete(tmp_path, file_records, entries):
    new = str(tmp_path / "00000000000000000000.log.deleted")
    old = file_records.path
    file_records.rename_to(new)
    assert file_records.path == new
    assert not os.path.exists(old)
    file_records.append(batch(3, b"mnop"))  # the descriptor follows the file
    with open(new, "rb") as f:
        assert values_of(f.read()) == [*VALUES, b"mnop"]
    assert file_records.delete_if_exists() is True
    assert not os.path.exists(new)
    assert file_records.delete_if_exists() is False


# -- zero-copy send ----------------------------------------------------------------------------


def _send_and_receive(read: LogSlice) -> tuple[int, bytes]:
    a, b = socket.socketpair()
    received = bytearray()

    def drain():
        while True:
            chunk = b.recv(65536)
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        sent = read.sendfile(a)
    finally:
        a.shutdown(socket.SHUT_WR)
        reader.join(10)
        a.close()
        b.close()
    return sent, bytes(received)


def test_sendfile_sends_exactly_the_slice(file_records, entries):
    """writeTo transfers exactly the requested range (sendfile to a socket)."""
    big = encode_batch([(b"k%d" % i, os.urandom(1000), 5) for i in range(300)], base_offset=3)
    file_records.append(big)
    first = len(entries[0])
    for position, size in ((0, file_records.size), (first, len(entries[1])),
                           (first, len(entries[1]) + 7), (first + len(entries[1]), 100_000),
                           (5, 0)):
        read = file_records.slice(position, size)
        sent, received = _send_and_receive(read)
        assert sent == read.size == len(received)
        assert received == read.to_bytes()
        with open(file_records.path, "rb") as f:
            f.seek(position)
            assert received == f.read(read.size)


# -- chunked scan (recovery's reader) ----------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [64, 200, 1 << 20])
def test_scan_chunks_covers_every_entry_even_ones_bigger_than_a_chunk(log_path, chunk_size):
    data = [batch(0, b"a"), encode_batch([(None, b"x" * 500, 1)], base_offset=1),
            batch(2, b"b"), encode_batch([(None, b"y" * 300, 1)] * 3, base_offset=3)]
    fr = FileRecords.open(log_path)
    try:
        for d in data:
            fr.append(d)
        fr.append(data[0][:30])  # a partial tail: not an entry, not an error
        positions = []
        for _buf, base, scan in fr.scan_chunks(0, chunk_size=chunk_size):
            assert scan.error is None
            positions += [base + p for p in scan.position.tolist()]
        expected = [0]
        for d in data[:-1]:
            expected.append(expected[-1] + len(d))
        assert positions == expected
    finally:
        fr.close_handlers()


def test_scan_chunks_stops_at_a_corrupt_entry_and_unmaps(log_path):
    """Recovery's reader: the scan stops at the entry whose CRC fails, reports it, and
    the generator finishes cleanly (the file map is released) even while the caller still
    holds the scan and its error."""
    data = [batch(i, b"value %d" % i) for i in range(4)]
    bad = bytearray(data[2])
    bad[-1] ^= 0xFF  # flips a CRC-covered byte
    fr = FileRecords.open(log_path)
    try:
        for d in (data[0], data[1], bytes(bad), data[3]):
            fr.append(d)
        chunks = list(fr.scan_chunks(0))  # runs the generator to its end, and its finally
        assert len(chunks) == 1
        _buf, base, scan = chunks[0]
        assert base == 0
        assert scan.position.tolist() == [0, len(data[0])]
        assert scan.valid_bytes == len(data[0]) + len(data[1])
        assert isinstance(scan.error, CorruptRecordError)
        assert scan.error.position == len(data[0]) + len(data[1])
    finally:
        fr.close_handlers()


def test_a_read_racing_a_close_raises_instead_of_returning_unknown_bytes(file_records):
    """A segment deleted under a slow reader: if the file is closed while the pread runs,
    the descriptor number may already name another file, so the bytes are refused."""
    class ClosingRead(_fileio.FileSystem):
        def pread(self, fd, size, position):
            data = super().pread(fd, size, position)
            file_records.close_handlers()   # what a delayed deletion does meanwhile
            return data

    old = _fileio.install(ClosingRead())
    try:
        with pytest.raises(KafkaStoreError, match="closed"):
            file_records.read(0, 10)
    finally:
        _fileio.install(old)


@pytest.mark.parametrize("window", [64, 200, 16384])
def test_walk_headers_gives_each_entry_and_its_first_bytes(tmp_path, window):
    """walk_headers: the walk's headers with the first bytes of each entry, whether the
    window holds them (small batches) or not (large ones, a window smaller than a header)."""
    data = b"".join(encode_batch([(b"k%d" % i, b"v" * (i * 300))], base_offset=i,
                                 producer_id=i, producer_epoch=i)
                    for i in range(12))
    fr = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    fr.append(data)
    got = list(fr.walk_headers(window=window))
    assert [h for h, _ in got] == list(fr.walk())
    assert [raw for _, raw in got] == [data[h.position:h.position + 61] for h, _ in got]
    assert [int.from_bytes(raw[43:51], "big") for _, raw in got] == list(range(12))
    assert list(fr.walk_headers(header_size=20)) == [
        (h, data[h.position:h.position + 20]) for h, _ in got]
    fr.close()


def test_read_chunks_bounds_its_reads_and_stops_at_a_partial_or_corrupt_entry():
    from kafkastore.file_records import read_chunks

    batches = [encode_batch([(b"k", b"v" * n)], base_offset=i)
               for i, n in enumerate([10, 5000, 20, 3000, 15])]
    data = b"".join(batches)
    reads = []

    def read(pos, size):
        reads.append(size)
        return data[pos:pos + size]

    chunks = list(read_chunks(read, 0, len(data), 1024))
    assert sum(s.valid_bytes for _, _, s in chunks) == len(data)
    assert [p for p, _, _ in chunks] == sorted(p for p, _, _ in chunks)
    assert max(reads) == max(map(len, batches))   # a big entry gets a read of its size
    # a partial entry at the end: the walk stops in front of it
    cut = len(data) - 7
    got = list(read_chunks(lambda p, n: data[:cut][p:p + n], 0, cut, 1024))
    assert sum(s.valid_bytes for _, _, s in got) == len(data) - len(batches[-1])
    # a corrupt entry: its chunk is the last, with the error
    bad = bytearray(data)
    bad[len(batches[0]) + 30] ^= 0xFF
    got = list(read_chunks(lambda p, n: bytes(bad[p:p + n]), 0, len(bad), 1 << 20))
    assert got[-1][2].error is not None and got[-1][2].valid_bytes == len(batches[0])
