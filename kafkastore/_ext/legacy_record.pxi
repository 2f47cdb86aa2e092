# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# Kafka's LegacyRecord / AbstractLegacyRecordBatch: a magic 0 or 1 message, and a
# compressed wrapper whose value holds inner messages (decoded on first use).


cdef class LegacyRecordBatch:
    """A magic 0 or 1 message (a "batch" of one, or a compressed wrapper).

    Exposes the same attributes as :class:`RecordBatch`, with Kafka's values
    for legacy formats: no producer state (-1), leader epoch -1, never
    transactional or control, ``record_count`` None. ``last_offset`` is the
    stored offset; ``base_offset`` of a wrapper is the first inner offset,
    which needs decompression, so it is computed on first use (like Kafka).
    Iterating a wrapper inflates its value and yields the inner messages
    with absolute offsets.
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
        cdef int64_t offset
        cdef int32_t size, key_len, value_len
        cdef int magic
        cdef Py_ssize_t pos, end
        if avail < LOG_OVERHEAD + MIN_ENTRY_SIZE:
            _corrupt("legacy message truncated", position)
        p = &view[position]
        offset = be_i64(p)
        size = be_i32(p + LENGTH_OFFSET)
        magic = p[MAGIC_OFFSET]
        if magic > 1:
            _corrupt(f"Unsupported magic byte {magic}", position, offset)
        if size < (MIN_ENTRY_SIZE if magic == 0 else LEGACY_OVERHEAD_V1):
            _corrupt(f"Record size {size} is smaller than the minimum record overhead for "
                     f"magic {magic}", position, offset)
        if size > avail - LOG_OVERHEAD:
            _corrupt(f"Message of {LOG_OVERHEAD + <int64_t>size} bytes extends past the end "
                     f"of the buffer", position, offset)
        self.crc = ks_load_be32(p + LEGACY_CRC_OFFSET)
        self.attributes = p[LEGACY_ATTRIBUTES_OFFSET]
        if magic == 0:
            self.timestamp = -1
            pos = LOG_OVERHEAD + LEGACY_HEADER_V0
        else:
            self.timestamp = be_i64(p + LEGACY_TIMESTAMP_OFFSET)
            pos = LOG_OVERHEAD + LEGACY_HEADER_V1
        end = LOG_OVERHEAD + size
        # the minimum sizes above guarantee the two 4-byte length fields fit
        key_len = be_i32(p + pos)
        pos += 4
        if key_len >= 0:
            if key_len > end - pos - 4:
                _corrupt("message key extends past the message end", position, offset)
            self._key_pos = pos
            self._key_len = key_len
            pos += key_len
        else:
            self._key_pos = pos
            self._key_len = -1
        value_len = be_i32(p + pos)
        pos += 4
        if value_len >= 0:
            if value_len > end - pos:
                _corrupt("message value extends past the message end", position, offset)
            self._value_len = value_len
        else:
            self._value_len = -1
        self._value_pos = pos
        self._view = view[position:position + end]
        self.position = position
        self.last_offset = offset
        self.batch_length = size
        self.magic = <int8_t>magic
        self.max_decompressed_bytes = limit
        self._inner = None
        return 0

    @property
    def partition_leader_epoch(self):
        return -1

    @property
    def producer_id(self):
        return -1

    @property
    def producer_epoch(self):
        return -1

    @property
    def base_sequence(self):
        return -1

    @property
    def last_sequence(self):
        return -1

    @property
    def last_offset_delta(self):
        return None

    @property
    def record_count(self):
        return None

    @property
    def is_transactional(self):
        return False

    @property
    def is_control(self):
        return False

    @property
    def has_delete_horizon(self):
        return False

    @property
    def delete_horizon_ms(self):
        return None

    @property
    def size_in_bytes(self):
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def next_offset(self):
        return add64(self.last_offset, 1)

    @property
    def max_timestamp(self):
        return self.timestamp

    @property
    def first_timestamp(self):
        return self.timestamp

    @property
    def compression(self):
        return _codec(self.attributes, self.magic, self.position)

    @property
    def timestamp_type(self):
        if self.magic == 0:
            return _NO_TIMESTAMP_TYPE
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def key(self):
        return _bytes_or_none(&self._view[0], self._key_pos, self._key_len)

    @property
    def value(self):
        return _bytes_or_none(&self._view[0], self._value_pos, self._value_len)

    @property
    def base_offset(self):
        if self.attributes & CODEC_MASK == 0:
            return self.last_offset
        return self._inner_records()[0].offset

    def compute_crc(self):
        """CRC-32 of bytes [magic, end), as stored in a valid message."""
        return _crc32(self._view[LOG_OVERHEAD + 4:])

    def is_valid(self):
        return self.compute_crc() == self.crc

    def validate(self):
        computed = self.compute_crc()
        if computed != self.crc:
            raise InvalidCrcError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                stored=self.crc, computed=computed, position=self.position,
                offset=self.last_offset)

    def validate_inner(self):
        """Check the CRC of every inner message of a compressed wrapper (Kafka's
        ``LogValidator`` does for legacy compressed input: the wrapper's CRC covers the
        compressed bytes only); an uncompressed message has none. Raises
        :class:`~kafkastore.errors.InvalidCrcError` at the wrapper's position with the
        inner message's offset."""
        cdef LegacyRecordBatch msg
        if self.attributes & CODEC_MASK == 0:
            return
        self._inner_records()
        for msg in self._inner_messages:
            computed = msg.compute_crc()
            if computed != msg.crc:
                raise InvalidCrcError(
                    f"Record is corrupt (stored crc = {msg.crc}, computed crc = {computed}) "
                    f"in an inner message of the compressed message", stored=msg.crc,
                    computed=computed, position=self.position, offset=msg.last_offset)

    def to_bytes(self):
        return bytes(self._view)

    def payload(self):
        """The message value as stored (the compressed stream of a wrapper)."""
        if self._value_len < 0:
            return None
        return memoryview(self._view[self._value_pos:self._value_pos + self._value_len])

    def __iter__(self):
        if self.attributes & CODEC_MASK == 0:
            return iter((_new_record(self.last_offset, self.timestamp, self.timestamp_type,
                                     self.key, self.value, _EMPTY),))
        return iter(self._inner_records())

    cdef list _inner_records(self):
        if self._inner is None:
            self._inner = self._decode_wrapper()
        return self._inner

    cdef list _decode_wrapper(self):
        cdef Py_ssize_t where = self.position
        cdef const uint8_t[::1] data
        cdef Py_ssize_t pos = 0, end
        cdef LegacyRecordBatch msg
        cdef list inner = []
        cdef list out = []
        cdef int64_t base = 0, last_inner
        cdef bint log_append
        codec = self.compression
        payload = self.payload()
        if payload is None:
            _corrupt("compressed message has a null value", where, self.last_offset)
        data = as_view(_inflate(int(codec), payload, self.max_decompressed_bytes, self.magic,
                                 where))
        end = data.shape[0]
        while pos < end:
            if end - pos < LOG_OVERHEAD + MIN_ENTRY_SIZE:
                _corrupt("truncated inner message in compressed message", where,
                         self.last_offset)
            msg = LegacyRecordBatch.__new__(LegacyRecordBatch)
            try:
                msg._init(data, pos, self.max_decompressed_bytes)
            except CorruptRecordError as err:
                err.position = where
                raise
            if msg.magic != self.magic:
                _corrupt(f"inner message magic {msg.magic} does not match wrapper magic "
                         f"{self.magic}", where, self.last_offset)
            if msg.attributes & CODEC_MASK:
                _corrupt("compressed message contains a compressed inner message", where,
                         self.last_offset)
            inner.append(msg)
            pos += LOG_OVERHEAD + msg.batch_length
        if not inner:
            _corrupt("compressed message has no inner messages", where, self.last_offset)
        self._inner_messages = inner
        if self.magic == 0:
            base = 0  # v0 inner offsets are absolute
        else:
            last_inner = (<LegacyRecordBatch>inner[len(inner) - 1]).last_offset
            if self.last_offset == 0:
                base = 0  # some librdkafka versions leave the wrapper offset at 0
            elif self.last_offset < last_inner:
                _corrupt(f"wrapper offset {self.last_offset} is below its last inner offset "
                         f"{last_inner}", where, self.last_offset)
            else:
                # a hostile inner offset near INT64_MIN overflows the difference
                base = sub64(self.last_offset, last_inner)
        log_append = self.magic == 1 and (self.attributes & TIMESTAMP_TYPE_MASK)
        for msg in inner:
            if log_append:
                ts, ts_type = self.timestamp, _LOG_APPEND_TIME
            else:
                ts, ts_type = msg.timestamp, msg.timestamp_type
            out.append(_new_record(add64(base, msg.last_offset), ts, ts_type, msg.key,
                                   msg.value, _EMPTY))
        return out

    def __repr__(self):
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.last_offset}, "
            f"codec={self.attributes & CODEC_MASK}, size={self.size_in_bytes}, "
            f"position={self.position})"
        )
