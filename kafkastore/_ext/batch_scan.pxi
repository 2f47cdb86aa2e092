# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# Walking a buffer of entries (Kafka's FileLogInputStream and LogSegment.recover):
# read_batch, iter_batches, and scan_batches, which reads only headers into numpy
# columns (BatchScan) and never raises for bad bytes.


cdef Py_ssize_t _end_of(const uint8_t[::1] view, object start, object end) except -1:
    # compared as Python ints first, so a huge value is a ValueError (or is
    # clamped, for ``end``), never an OverflowError, exactly as in the pure twin
    cdef Py_ssize_t n = view.shape[0]
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise TypeError("start and end must be ints")
    e = n if end is None or end > n else end
    if start < 0 or start > e:
        raise ValueError(f"start {start} is outside [0, {e}]")
    return e


cdef object _read_batch(const uint8_t[::1] view, Py_ssize_t position, Py_ssize_t limit):
    cdef Py_ssize_t avail = view.shape[0] - position
    cdef const uint8_t* p
    cdef int32_t size
    cdef int magic
    cdef RecordBatch batch
    cdef LegacyRecordBatch legacy
    if avail < HEADER_SIZE_UP_TO_MAGIC:
        _corrupt("entry header truncated", position)
    p = &view[position]
    size = be_i32(p + LENGTH_OFFSET)
    if size < MIN_ENTRY_SIZE:
        _corrupt(f"Record size {size} is smaller than the minimum record overhead "
                 f"({MIN_ENTRY_SIZE})", position, be_i64(p))
    magic = p[MAGIC_OFFSET]
    if magic == 2:
        batch = RecordBatch.__new__(RecordBatch)
        batch._init(view, position, limit)
        return batch
    if magic < 2:
        legacy = LegacyRecordBatch.__new__(LegacyRecordBatch)
        legacy._init(view, position, limit)
        return legacy
    _corrupt(f"Unsupported magic byte {magic}", position, be_i64(p))


def read_batch(buffer, position=0, *, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
    """The entry at ``position`` as a :class:`RecordBatch` or :class:`LegacyRecordBatch`.

    Raises :class:`CorruptRecordError` when fewer than 17 bytes remain, the
    size field is below 14, the entry is incomplete, or the magic is not 0-2.
    """
    cdef const uint8_t[::1] view = as_view(buffer)
    return _read_batch(view, check_position(position, view.shape[0]),
                       _limit(max_decompressed_bytes))


def iter_batches(buffer, start=0, end=None, *, bint validate=True,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
    """Yield every entry of ``buffer[start:end]`` as a batch object.

    Follows Kafka's ``FileLogInputStream``: fewer than 18 bytes left, or an
    entry that extends past ``end``, ends the iteration silently (a partial
    tail is what a crash leaves); a size field below 14 or an unknown magic
    raises :class:`CorruptRecordError`. With ``validate`` each batch's CRC is
    checked before it is yielded (:class:`InvalidCrcError`).
    """
    cdef const uint8_t[::1] view = as_view(buffer)
    cdef Py_ssize_t stop = _end_of(view, start, end)
    return _BatchIterator._new(view[:stop], start, validate, _limit(max_decompressed_bytes))


@cython.final
cdef class _BatchIterator:
    cdef const uint8_t[::1] _view
    cdef Py_ssize_t _pos
    cdef bint _validate
    cdef Py_ssize_t _limit

    @staticmethod
    cdef _BatchIterator _new(const uint8_t[::1] view, Py_ssize_t start, bint validate,
                             Py_ssize_t limit):
        cdef _BatchIterator it = _BatchIterator.__new__(_BatchIterator)
        it._view = view
        it._pos = start
        it._validate = validate
        it._limit = limit
        return it

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t pos = self._pos
        cdef Py_ssize_t end = self._view.shape[0]
        cdef int32_t size
        if end - pos <= HEADER_SIZE_UP_TO_MAGIC:
            raise StopIteration
        size = be_i32(&self._view[pos] + LENGTH_OFFSET)
        if size < MIN_ENTRY_SIZE:
            self._pos = end  # a corrupt entry ends the walk
            _corrupt(f"Record size {size} is smaller than the minimum record overhead "
                     f"({MIN_ENTRY_SIZE})", pos)
        if size > end - pos - LOG_OVERHEAD:
            self._pos = end
            raise StopIteration
        self._pos = end  # until the entry proves good
        batch = _read_batch(self._view, pos, self._limit)
        if self._validate:
            batch.validate()
        self._pos = pos + LOG_OVERHEAD + size
        return batch


cdef struct ScanRow:
    int64_t position
    int64_t size
    int8_t magic
    int64_t base_offset
    int64_t last_offset
    int64_t max_timestamp
    int32_t record_count


class BatchScan:
    """Result of :func:`scan_batches`: one row per entry, in numpy columns.

    Columns: ``position`` (int64), ``size`` (int64, 12-byte prefix
    included), ``magic`` (int8), ``base_offset`` (int64; -1 for a compressed
    legacy wrapper, whose first offset needs decompression), ``last_offset``
    (int64), ``max_timestamp`` (int64; -1 for magic 0), ``record_count``
    (int32; -1 for a compressed legacy wrapper).

    ``valid_bytes`` counts the bytes from ``start`` up to the end of the last
    good entry. ``error`` is None when the scan reached ``end`` or stopped at
    a partial tail, otherwise the :class:`CorruptRecordError` that stopped it.
    """

    __slots__ = ("position", "size", "magic", "base_offset", "last_offset",
                 "max_timestamp", "record_count", "valid_bytes", "error", "start", "end")

    def __len__(self):
        return len(self.position)

    @property
    def truncated(self):
        """True when bytes follow the last good entry (partial or corrupt)."""
        return self.start + self.valid_bytes < self.end

    def __repr__(self):
        return (f"BatchScan(entries={len(self)}, valid_bytes={self.valid_bytes}, "
                f"error={self.error!r})")


cdef object _scan_entry(const uint8_t* p, Py_ssize_t pos, int32_t size, bint validate,
                        const uint8_t[::1] view, ScanRow* row):
    """Fill ``row`` for the complete entry at ``p``; return an error or None."""
    cdef int magic = p[MAGIC_OFFSET]
    cdef int64_t offset = be_i64(p)
    cdef uint32_t stored
    cdef int attributes
    row.position = pos
    row.size = LOG_OVERHEAD + size
    row.magic = <int8_t>magic
    if magic == 2:
        if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            return CorruptRecordError(
                f"Record batch size {LOG_OVERHEAD + <int64_t>size} is smaller than the "
                f"minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                position=pos, offset=offset)
        stored = ks_load_be32(p + CRC_OFFSET)
        if validate:
            computed = _crc32c(view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + size])
            if computed != stored:
                return InvalidCrcError(
                    f"Record batch is corrupt (stored crc = {stored}, computed crc = "
                    f"{computed})", stored=stored, computed=computed, position=pos,
                    offset=offset)
        row.base_offset = offset
        row.last_offset = add64(offset, be_i32(p + LAST_OFFSET_DELTA_OFFSET))
        row.max_timestamp = be_i64(p + MAX_TIMESTAMP_OFFSET)
        row.record_count = be_i32(p + RECORDS_COUNT_OFFSET)
        return None
    if magic < 2:
        if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
            return CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead for magic "
                f"{magic}", position=pos, offset=offset)
        stored = ks_load_be32(p + LEGACY_CRC_OFFSET)
        if validate:
            computed = _crc32(view[pos + LOG_OVERHEAD + 4:pos + LOG_OVERHEAD + size])
            if computed != stored:
                return InvalidCrcError(
                    f"Record is corrupt (stored crc = {stored}, computed crc = "
                    f"{computed})", stored=stored, computed=computed, position=pos,
                    offset=offset)
        attributes = p[LEGACY_ATTRIBUTES_OFFSET]
        row.max_timestamp = -1 if magic == 0 else be_i64(p + LEGACY_TIMESTAMP_OFFSET)
        row.last_offset = offset
        if attributes & CODEC_MASK:
            row.base_offset = -1
            row.record_count = -1
        else:
            row.base_offset = offset
            row.record_count = 1
        return None
    return CorruptRecordError(f"Unsupported magic byte {magic}", position=pos, offset=offset)


def scan_batches(buffer, start=0, end=None, *, bint validate=True):
    """Walk the entries of ``buffer[start:end]`` reading only their headers.

    Never raises for bad bytes: it stops at the first entry that is
    incomplete (``error`` None) or corrupt (``error`` set) and reports how
    many bytes were good. This is what recovery and index building use.
    With ``validate`` each entry's CRC is checked (CRC-32C for v2, CRC-32
    for v0/v1), as Kafka's ``LogSegment.recover`` does.
    """
    cdef const uint8_t[::1] view = as_view(buffer)
    cdef Py_ssize_t stop = _end_of(view, start, end)
    cdef Py_ssize_t first = start
    cdef Py_ssize_t pos = first
    cdef Py_ssize_t n = 0, cap = 64, i
    cdef ScanRow* rows = <ScanRow*>PyMem_Malloc(cap * sizeof(ScanRow))
    cdef ScanRow* grown
    cdef const uint8_t* p
    cdef int32_t size
    cdef object error = None
    if rows == NULL:
        raise MemoryError()
    try:
        while stop - pos > HEADER_SIZE_UP_TO_MAGIC:
            p = &view[pos]
            size = be_i32(p + LENGTH_OFFSET)
            if size < MIN_ENTRY_SIZE:
                error = CorruptRecordError(
                    f"Record size {size} is smaller than the minimum record overhead "
                    f"({MIN_ENTRY_SIZE})", position=pos, offset=be_i64(p))
                break
            if size > stop - pos - LOG_OVERHEAD:
                break
            if n == cap:
                cap *= 2
                grown = <ScanRow*>PyMem_Realloc(rows, cap * sizeof(ScanRow))
                if grown == NULL:
                    raise MemoryError()
                rows = grown
            error = _scan_entry(p, pos, size, validate, view, &rows[n])
            if error is not None:
                break
            n += 1
            pos += LOG_OVERHEAD + size
        scan = BatchScan()
        scan.start = start
        scan.end = stop
        scan.error = error
        position = np.empty(n, dtype=np.int64)
        sizes = np.empty(n, dtype=np.int64)
        magic = np.empty(n, dtype=np.int8)
        base = np.empty(n, dtype=np.int64)
        last = np.empty(n, dtype=np.int64)
        maxts = np.empty(n, dtype=np.int64)
        count = np.empty(n, dtype=np.int32)
        _fill_scan(rows, n, position, sizes, magic, base, last, maxts, count)
        scan.position, scan.size, scan.magic = position, sizes, magic
        scan.base_offset, scan.last_offset = base, last
        scan.max_timestamp, scan.record_count = maxts, count
        scan.valid_bytes = (rows[n - 1].position + rows[n - 1].size - first) if n else 0
        return scan
    finally:
        PyMem_Free(rows)


cdef void _fill_scan(ScanRow* rows, Py_ssize_t n, int64_t[::1] position, int64_t[::1] sizes,
                     int8_t[::1] magic, int64_t[::1] base, int64_t[::1] last,
                     int64_t[::1] maxts, int32_t[::1] count) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        position[i] = rows[i].position
        sizes[i] = rows[i].size
        magic[i] = rows[i].magic
        base[i] = rows[i].base_offset
        last[i] = rows[i].last_offset
        maxts[i] = rows[i].max_timestamp
        count[i] = rows[i].record_count
