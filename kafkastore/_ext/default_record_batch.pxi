# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# Kafka's DefaultRecordBatch: the magic 2 batch (its 61-byte header decoded on
# construction, records parsed lazily by _RecordIterator with the one record
# parser), record_summary for LogValidator, and Java's sequence arithmetic.


cdef inline int32_t _last_sequence(int32_t base_sequence, int32_t delta) noexcept nogil:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` in Java int arithmetic.

    A sequence wraps past INT32_MAX back to 0; a corrupt negative delta is
    computed exactly as Java computes it.
    """
    if base_sequence == -1:
        return -1
    if base_sequence > sub32(2147483647, delta):
        return sub32(sub32(delta, sub32(2147483647, base_sequence)), 1)
    return <int32_t>(<uint32_t>base_sequence + <uint32_t>delta)


# -- v2 batches ---------------------------------------------------------------------


cdef class RecordBatch:
    """A magic 2 record batch over a buffer, parsed lazily.

    The 61-byte header is decoded on construction; records are decoded only
    when the batch is iterated, and a compressed payload is inflated then
    (bounded by ``max_decompressed_bytes``). The batch keeps a zero-copy view
    of the caller's buffer, so a ``bytearray`` or ``mmap`` under it must not
    shrink while the batch is alive.

    Construction checks only what is needed to read the header safely: the
    magic, that ``batchLength`` covers the header, and that the buffer holds
    the whole batch. :meth:`validate` checks the CRC; iteration checks each
    record's structure. Not thread-safe to iterate concurrently with the
    buffer's owner mutating it; otherwise immutable.
    """

    def __init__(self, buffer, position=0, *,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
        cdef const uint8_t[::1] view = as_view(buffer)
        self._init(view, check_position(position, view.shape[0]),
                   _limit(max_decompressed_bytes))

    cdef int _init(self, const uint8_t[::1] view, Py_ssize_t position,
                   Py_ssize_t limit) except -1:
        cdef Py_ssize_t avail = view.shape[0] - position
        cdef const uint8_t* p
        if avail < RECORD_BATCH_OVERHEAD:
            _corrupt(f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, only "
                     f"{avail} remain", position)
        p = &view[position]
        self.base_offset = be_i64(p)
        self.batch_length = be_i32(p + LENGTH_OFFSET)
        self.partition_leader_epoch = be_i32(p + PARTITION_LEADER_EPOCH_OFFSET)
        self.magic = <int8_t>p[MAGIC_OFFSET]
        self.crc = ks_load_be32(p + CRC_OFFSET)
        self.attributes = be_i16(p + ATTRIBUTES_OFFSET)
        self.last_offset_delta = be_i32(p + LAST_OFFSET_DELTA_OFFSET)
        self.first_timestamp = be_i64(p + BASE_TIMESTAMP_OFFSET)
        self.max_timestamp = be_i64(p + MAX_TIMESTAMP_OFFSET)
        self.producer_id = be_i64(p + PRODUCER_ID_OFFSET)
        self.producer_epoch = be_i16(p + PRODUCER_EPOCH_OFFSET)
        self.base_sequence = be_i32(p + BASE_SEQUENCE_OFFSET)
        self.record_count = be_i32(p + RECORDS_COUNT_OFFSET)
        if self.magic != 2:
            _corrupt(f"Unsupported magic byte {self.magic}", position, self.base_offset)
        if self.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            _corrupt(f"Record batch size {LOG_OVERHEAD + <int64_t>self.batch_length} is "
                     f"smaller than the minimum batch overhead ({RECORD_BATCH_OVERHEAD})",
                     position, self.base_offset)
        if self.batch_length > avail - LOG_OVERHEAD:
            _corrupt(f"Record batch of {LOG_OVERHEAD + <int64_t>self.batch_length} bytes "
                     f"extends past the end of the buffer ({avail} bytes remain)",
                     position, self.base_offset)
        self._view = view[position:position + LOG_OVERHEAD + self.batch_length]
        self.position = position
        self.max_decompressed_bytes = limit
        return 0

    @property
    def size_in_bytes(self):
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def last_offset(self):
        return add64(self.base_offset, self.last_offset_delta)

    @property
    def next_offset(self):
        return add64(self.base_offset, <int64_t>self.last_offset_delta + 1)

    @property
    def compression(self):
        return _codec(self.attributes, 2, self.position)

    @property
    def timestamp_type(self):
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def is_transactional(self):
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self):
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self):
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self):
        return self.first_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self):
        return _last_sequence(self.base_sequence, self.last_offset_delta)

    def compute_crc(self):
        """CRC-32C of bytes [21, end), as stored in a valid batch."""
        return _crc32c(self._view[ATTRIBUTES_OFFSET:])

    def is_valid(self):
        """Kafka's ``isValid``: size >= 61 and the stored CRC matches."""
        return self.compute_crc() == self.crc

    def validate(self):
        """Kafka's ``ensureValid``; raises :class:`InvalidCrcError`."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise InvalidCrcError(
                f"Record batch is corrupt (stored crc = {self.crc}, computed crc = "
                f"{computed})", stored=self.crc, computed=computed,
                position=self.position, offset=self.base_offset)

    def to_bytes(self):
        """The whole entry, 12-byte prefix included."""
        return bytes(self._view)

    def payload(self):
        """The records section as stored (compressed or not), zero-copy."""
        return memoryview(self._view[RECORD_BATCH_OVERHEAD:])

    def _records_data(self):
        cdef int codec = self.attributes & CODEC_MASK
        if codec == 0:
            return self.payload()
        _codec(self.attributes, 2, self.position)
        return _inflate(codec, self.payload(), self.max_decompressed_bytes, 2, self.position)

    def __iter__(self):
        if self.record_count < 0:
            raise CorruptRecordError(f"Found invalid record count {self.record_count}",
                                     position=self.position, offset=self.base_offset)
        return self._records(self._records_data())

    def _records(self, data):
        return _RecordIterator._new(self, data)

    def record_summary(self):
        """What LogValidator needs of the records, decoding no key, value or header.

        Returns ``(count, max_timestamp, index_of_max, min_timestamp, null_keys,
        sequential)``: the records parsed (they must be ``record_count``, with every
        length checked as when iterating); the largest record timestamp
        (``firstTimestamp + delta``) above -1 and the index of the first record holding
        it (-1, -1 if none); the smallest timestamp other than -1 (None if none); how
        many records have a null key; whether the offset deltas are 0, 1, 2, ...
        """
        cdef const uint8_t[::1] view
        cdef const uint8_t* p
        cdef Py_ssize_t pos = 0, end
        cdef int32_t i, n = self.record_count
        cdef RecordSpan span
        cdef int64_t ts, max_ts = -1, min_ts = 0
        cdef int32_t max_index = -1, nulls = 0
        cdef bint have_min = False, sequential = True
        if n < 0:
            raise CorruptRecordError(f"Found invalid record count {self.record_count}",
                                     position=self.position, offset=self.base_offset)
        view = as_view(self._records_data())
        p = view_ptr(view)
        end = view.shape[0]
        for i in range(n):
            if pos >= end:
                raise CorruptRecordError("Incorrect declared batch size, premature EOF reached",
                                         position=self.position, offset=self.base_offset)
            parse_record(p, pos, end, &span, self.position)
            pos = span.next_pos
            ts = add64(self.first_timestamp, span.ts_delta)
            if ts > max_ts:
                max_ts = ts
                max_index = i
            if ts != -1 and (not have_min or ts < min_ts):
                min_ts = ts
                have_min = True
            if span.key_len < 0:
                nulls += 1
            if span.offset_delta != i:
                sequential = False
        if pos != end:
            raise CorruptRecordError(
                "Incorrect declared batch size, records still remaining in file",
                position=self.position, offset=self.base_offset)
        return n, max_ts, max_index, (min_ts if have_min else None), nulls, sequential

    def __repr__(self):
        return (
            f"RecordBatch(magic=2, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, count={self.record_count}, "
            f"size={self.size_in_bytes}, position={self.position})"
        )


@cython.final
cdef class _RecordIterator:
    """Decodes the records of one v2 batch, one per ``__next__``."""

    cdef const uint8_t[::1] _data
    cdef const uint8_t* _ptr
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _end
    cdef int32_t _remaining
    cdef int64_t _base_offset
    cdef int64_t _base_ts
    cdef bint _log_append
    cdef object _ts_type
    cdef Py_ssize_t _where
    # the last timestamp handed out and its int object: records of a batch mostly
    # share a timestamp (a producer's batch fills within a millisecond or so), and
    # ints are immutable, so consecutive equal timestamps share one object
    cdef int64_t _ts_value
    cdef object _ts_obj

    @staticmethod
    cdef _RecordIterator _new(RecordBatch batch, object data):
        cdef _RecordIterator it = _RecordIterator.__new__(_RecordIterator)
        it._data = as_view(data)
        it._ptr = view_ptr(it._data)
        it._pos = 0
        it._end = it._data.shape[0]
        it._remaining = batch.record_count
        it._base_offset = batch.base_offset
        it._base_ts = batch.first_timestamp
        it._log_append = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
        it._ts_type = _TS_TYPES[it._log_append]
        it._where = batch.position
        it._ts_value = batch.max_timestamp
        it._ts_obj = batch.max_timestamp
        return it

    def __iter__(self):
        return self

    def __next__(self):
        # _remaining is -1 once the iteration has ended, by exhaustion or by an
        # error: like a generator, it then only raises StopIteration
        cdef RecordSpan span
        cdef int64_t ts
        cdef int32_t remaining = self._remaining
        if remaining <= 0:
            self._remaining = -1
            if remaining == 0 and self._pos != self._end:
                raise CorruptRecordError(
                    "Incorrect declared batch size, records still remaining in file",
                    position=self._where, offset=self._base_offset)
            raise StopIteration
        self._remaining = -1
        if self._pos >= self._end:
            raise CorruptRecordError("Incorrect declared batch size, premature EOF reached",
                                     position=self._where, offset=self._base_offset)
        parse_record(self._ptr, self._pos, self._end, &span, self._where)
        self._pos = span.next_pos
        self._remaining = remaining - 1
        if not self._log_append:
            ts = add64(self._base_ts, span.ts_delta)
            if ts != self._ts_value:
                self._ts_obj = ts
                self._ts_value = ts
        return _new_record_at(
            add64(self._base_offset, span.offset_delta), self._ts_obj, self._ts_type,
            self._ptr, span.key_pos, span.key_len, span.value_pos, span.value_len,
            _decode_headers(self._ptr, span.headers_pos, span.header_count)
            if span.header_count else _EMPTY)
