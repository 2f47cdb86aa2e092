# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# decode_columns: every record of a buffer into numpy columns (_Columns). Ordinary
# records of uncompressed batches go through the C fast path (csrc/ks_v2fast.h),
# which only accelerates: it stops in front of any record it is not sure of, and
# the one record parser (parse_record, default_record.pxd) takes that record.


def decode_columns(buffer, start=0, end=None, *, bint validate=True,
                   bint include_control=False,
                   max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                   bint headers=False, bint copy=True):
    """Decode every record of ``buffer[start:end]`` into numpy columns.

    Returns a dict: ``offset``, ``timestamp`` (int64), ``timestamp_type``
    (int8), ``key_offsets``/``value_offsets`` (int64, n+1 Arrow-style
    offsets into ``key_data``/``value_data``, uint8), ``key_null``/
    ``value_null`` (bool, True where null) and ``header_count`` (int32).
    With ``headers`` it also holds the headers themselves (h of them in
    all): ``header_offsets`` (int64, n+1: record i's headers are entries
    ``header_offsets[i]:header_offsets[i + 1]``), ``header_key_offsets``/
    ``header_value_offsets`` (int64, h+1, into ``header_key_data``/
    ``header_value_data``, uint8: the raw bytes, keys not decoded) and
    ``header_value_null`` (bool, h). Legacy messages have no headers.
    Control batches are skipped unless ``include_control``. Entries are
    walked, checked and rejected as :func:`iter_batches` does, in two
    passes: headers, CRCs of compressed batches, inflation and legacy
    messages first, then each uncompressed batch's CRC and records. When a
    buffer holds several bad entries, the error raised is therefore the
    first one in that order, not necessarily the first in the buffer.

    With ``copy=False`` (the view layout) keys and values are not copied:
    ``key_offsets``/``value_offsets`` are left out and ``key_starts``/
    ``value_starts`` (n; int32 when the data array is below 2 GiB, else
    int64) and ``key_lengths``/``value_lengths``
    (int32, n; 0 for a null) locate each one in ``key_data``/``value_data``,
    which are both the same uint8 array: a view of ``buffer`` itself when
    every entry is an uncompressed v2 batch, else one buffer holding the
    records sections (inflated where compressed) and legacy keys and values.
    """
    # Pass 1 walks the headers, checks and inflates compressed payloads and
    # reads legacy messages, so that pass 2 writes into arrays allocated once.
    # An uncompressed batch's CRC is checked in pass 2, right before it is
    # parsed, so its bytes are read from memory once and parsed from cache.
    # The pure twin follows the same order, so both raise the same error first.
    cdef list parts = []
    cdef Py_ssize_t n = 0, data_cap = 0, records_len, k, nparts
    cdef RecordBatch batch, ahead
    for b in iter_batches(buffer, start, end, validate=False,
                          max_decompressed_bytes=max_decompressed_bytes):
        if type(b) is not RecordBatch:
            if validate:
                b.validate()
            recs = list(b)
            parts.append((None, recs))
            n += len(recs)
            for rec in recs:
                data_cap += len(rec.key or b"") + len(rec.value or b"")
            continue
        batch = <RecordBatch>b
        if batch.attributes & CONTROL_MASK and not include_control:
            if validate:
                batch.validate()
            continue
        if batch.record_count < 0:
            raise CorruptRecordError(
                f"Found invalid record count {batch.record_count}",
                position=batch.position, offset=batch.base_offset)
        if batch.attributes & CODEC_MASK:
            if validate:
                batch.validate()
            data = batch._records_data()
            records_len = len(data)
        else:
            data = None
            records_len = batch.batch_length - (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
        # bound the allocation by the bytes present, not the declared count
        if batch.record_count > records_len // MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record count {batch.record_count} exceeds what {records_len} bytes "
                f"can hold", position=batch.position, offset=batch.base_offset)
        parts.append((batch, data))
        n += batch.record_count
        data_cap += records_len
    cdef bint from_source = not copy
    if not copy:
        for part in parts:
            if part[0] is None or part[1] is not None:
                from_source = False
                break
    cols = _Columns(n, data_cap, headers, not copy,
                    np.frombuffer(buffer, dtype=np.uint8) if from_source else None)
    nparts = len(parts)
    for k in range(nparts):
        owner, data = parts[k]
        if owner is None:
            for rec in data:
                cols.add_record(rec)
        else:
            batch = <RecordBatch>owner
            if data is None:
                if validate:
                    batch.validate()
                data = batch.payload()
            # while this batch is parsed from cache, the memory bus would sit
            # idle: pull the next uncompressed batch in, so that its CRC pass
            # reads from cache too instead of waiting on memory
            ahead = None
            if k + 1 < nparts:
                nxt = parts[k + 1]
                if nxt[0] is not None and nxt[1] is None:
                    ahead = <RecordBatch>nxt[0]
            if ahead is not None and ahead._view.shape[0] > 0:
                cols.add_v2(batch, data, &ahead._view[0], ahead._view.shape[0])
            else:
                cols.add_v2(batch, data, NULL, 0)
    return cols.finish()


cdef inline int64_t* _i64_ptr(object array) except NULL:
    cdef int64_t[::1] view = array
    return &view[0]


cdef inline uint8_t* _u8_ptr(object array) except NULL:
    cdef uint8_t[::1] view = array.view(np.uint8)
    return &view[0]


cdef inline Py_ssize_t _headers_at(const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                                   Py_ssize_t* rend, int32_t* count) noexcept nogil:
    """Skip the v2 record at ``pos`` up to its headers.

    Returns where its first header starts, with the record's end in ``rend``
    and its header count in ``count``; -1 where the bytes are not what
    parse_record accepts (the caller then lets parse_record raise). Every
    varint and length is checked against the record's end first.

    Like csrc/ks_v2fast.h, an accelerator under the one parser's rules (a
    negative key or value length is null), not a second parser: it decides
    nothing. It skips the headers that _take_headers walks next; parsing the
    record with read_record instead walks them twice (decode_columns with
    headers about 20% slower).
    """
    cdef int32_t length = 0, n = 0
    cdef int64_t ts_delta = 0
    cdef Py_ssize_t p = read_varint(data, pos, end, &length)
    cdef Py_ssize_t e
    if p < 0 or length <= 0 or length > end - p:
        return -1
    e = p + length
    p = read_varlong(data, p + 1, e, &ts_delta)    # past the attributes byte
    if p < 0:
        return -1
    p = read_varint(data, p, e, &n)               # offset delta
    if p < 0:
        return -1
    p = read_varint(data, p, e, &n)               # key length, negative: null
    if p < 0 or n > e - p:
        return -1
    if n > 0:
        p += n
    p = read_varint(data, p, e, &n)               # value length, negative: null
    if p < 0 or n > e - p:
        return -1
    if n > 0:
        p += n
    p = read_varint(data, p, e, &n)               # header count
    if p < 0 or n < 0 or n > (e - p) // 2:
        return -1
    rend[0] = e
    count[0] = n
    return p


@cython.final
cdef class _Columns:
    cdef object offset, timestamp, timestamp_type, header_count
    cdef object key_offsets, value_offsets, key_data, value_data, key_null, value_null
    cdef int64_t[::1] _offset, _timestamp, _key_offsets, _value_offsets
    cdef int8_t[::1] _ts_type
    cdef int32_t[::1] _hcount
    cdef uint8_t[::1] _key_data, _value_data, _key_null, _value_null
    cdef Py_ssize_t n, cap, key_used, value_used
    cdef list _blocks                 # pooled blocks behind the arrays, in creation order
    # the view layout (copy=False): positions and lengths into one data array,
    # the source itself (from_source) or an arena the records sections are joined in
    cdef bint views, from_source
    cdef object key_starts, value_starts, key_lengths, value_lengths, view_data
    cdef bint narrow                  # the data array is below 2 GiB: int32 starts
    cdef void* _key_starts            # int32_t* if narrow, else int64_t*
    cdef void* _value_starts
    cdef int32_t[::1] _key_lengths, _value_lengths
    cdef uint8_t* _arena
    cdef Py_ssize_t arena_used
    # the header contents, with headers=True only. Header keys and values are
    # bytes of the records, so their buffers are sized as key_data is. Header
    # entries (h of them) are not counted in pass 1: their arrays start small
    # and grow, never past what the records bytes can hold (hmax); the raw
    # pointers are reloaded whenever an array is replaced.
    cdef bint with_headers
    cdef object header_offsets, header_key_offsets, header_key_data
    cdef object header_value_offsets, header_value_data, header_value_null
    cdef int64_t* _hoff
    cdef int64_t* _hkoff
    cdef int64_t* _hvoff
    cdef uint8_t* _hkdata
    cdef uint8_t* _hvdata
    cdef uint8_t* _hvnull
    cdef Py_ssize_t hcap              # header entries the arrays hold
    cdef Py_ssize_t hmax              # most header entries the records bytes can hold
    cdef Py_ssize_t hdata_cap         # bytes behind header_key_data / header_value_data
    cdef Py_ssize_t hused, hkey_used, hval_used

    def __cinit__(self, Py_ssize_t n, Py_ssize_t data_cap, bint headers=False,
                  bint views=False, object source=None):
        cdef list blocks = []
        self._blocks = blocks
        self.cap = n
        self.offset = _column(n, np.int64, 8, "offset", blocks)
        self.timestamp = _column(n, np.int64, 8, "timestamp", blocks)
        self.timestamp_type = _column(n, np.int8, 1, "timestamp_type", blocks)
        self.header_count = _column(n, np.int32, 4, "header_count", blocks)
        self.key_null = _column(n, np.bool_, 1, "key_null", blocks)
        self.value_null = _column(n, np.bool_, 1, "value_null", blocks)
        self._offset = self.offset
        self._timestamp = self.timestamp
        self._ts_type = self.timestamp_type
        self._hcount = self.header_count
        self._key_null = self.key_null.view(np.uint8)
        self._value_null = self.value_null.view(np.uint8)
        self.views = views
        if views:
            # int32 positions where they fit: 8 bytes fewer written per record
            self.narrow = (len(source) if source is not None else data_cap) < (1 << 31)
            if self.narrow:
                self.key_starts = _column(n, np.int32, 4, "key_starts", blocks)
                self.value_starts = _column(n, np.int32, 4, "value_starts", blocks)
            else:
                self.key_starts = _column(n, np.int64, 8, "key_starts", blocks)
                self.value_starts = _column(n, np.int64, 8, "value_starts", blocks)
            self.key_lengths = _column(n, np.int32, 4, "key_lengths", blocks)
            self.value_lengths = _column(n, np.int32, 4, "value_lengths", blocks)
            if n:
                self._key_starts = <void*>_u8_ptr(self.key_starts)
                self._value_starts = <void*>_u8_ptr(self.value_starts)
            self._key_lengths = self.key_lengths
            self._value_lengths = self.value_lengths
            self.from_source = source is not None
            if self.from_source:
                self.view_data = source
            else:
                # the records sections joined (inflated ones as inflated): at
                # most the records bytes pass 1 counted
                self.view_data = _column(max(data_cap, 1), np.uint8, 1, "view_data", blocks)
                self._arena = _u8_ptr(self.view_data)
        else:
            self.key_offsets = _column(n + 1, np.int64, 8, "key_offsets", blocks)
            self.value_offsets = _column(n + 1, np.int64, 8, "value_offsets", blocks)
            # keys and values together never exceed the records bytes they come
            # from; untouched pages of these buffers are never committed
            self.key_data = _column(max(data_cap, 1), np.uint8, 1, "key_data", blocks)
            self.value_data = _column(max(data_cap, 1), np.uint8, 1, "value_data", blocks)
            self._key_offsets = self.key_offsets
            self._value_offsets = self.value_offsets
            self._key_data = self.key_data
            self._value_data = self.value_data
            self._key_offsets[0] = 0
            self._value_offsets[0] = 0
        self.with_headers = headers
        if headers:
            self.header_offsets = _column(n + 1, np.int64, 8, "header_offsets", blocks)
            self._hoff = _i64_ptr(self.header_offsets)
            self._hoff[0] = 0
            # header keys and values are bytes of the same records too
            self.hdata_cap = max(data_cap, 1)
            self.header_key_data = _column(self.hdata_cap, np.uint8, 1, "header_key_data",
                                           blocks)
            self.header_value_data = _column(self.hdata_cap, np.uint8, 1,
                                             "header_value_data", blocks)
            self._hkdata = _u8_ptr(self.header_key_data)
            self._hvdata = _u8_ptr(self.header_value_data)
            # a header takes at least two bytes (its key and value length varints);
            # start small, then size from what the first records hold
            self.hmax = data_cap // 2
            self._header_entries(min(n, self.hmax, 256))

    cdef int _header_entries(self, Py_ssize_t cap) except -1:
        """(Re)allocate the per-header arrays for ``cap`` entries, keeping those written."""
        cdef Py_ssize_t h = self.hused
        cdef _PoolBlock block
        cdef list blocks = []
        key_offsets = _column(cap + 1, np.int64, 8, "header_key_offsets", blocks)
        value_offsets = _column(cap + 1, np.int64, 8, "header_value_offsets", blocks)
        value_null = _column(max(cap, 1), np.bool_, 1, "header_value_null", blocks)
        if self.header_key_offsets is None:
            _i64_ptr(key_offsets)[0] = 0
            _i64_ptr(value_offsets)[0] = 0
        else:
            memcpy(_i64_ptr(key_offsets), self._hkoff, (h + 1) * 8)
            memcpy(_i64_ptr(value_offsets), self._hvoff, (h + 1) * 8)
            if h:
                memcpy(_u8_ptr(value_null), self._hvnull, h)
            # the old arrays' pooled blocks go back to the pool once they die
            for block in list(self._blocks):
                if block.role in ("header_key_offsets", "header_value_offsets",
                                  "header_value_null"):
                    block.touched = max(block.touched, min(
                        block.capacity, (h + 1) * 8 if block.role != "header_value_null"
                        else h))
                    self._blocks.remove(block)
        self._blocks.extend(blocks)
        self.header_key_offsets = key_offsets
        self.header_value_offsets = value_offsets
        self.header_value_null = value_null
        self._hkoff = _i64_ptr(key_offsets)
        self._hvoff = _i64_ptr(value_offsets)
        self._hvnull = _u8_ptr(value_null)
        self.hcap = cap
        return 0

    cdef int _take_headers(self, const uint8_t* data, Py_ssize_t p, Py_ssize_t rend,
                           int32_t count, Py_ssize_t row, Py_ssize_t end) except -2:
        """Append the ``count`` headers of row ``row`` at ``data[p:rend]``: 0, or -1
        if malformed.

        Every length is checked against ``rend`` before the bytes are
        copied; the record was validated already, so -1 means the caller
        lets the checked parser raise its error. ``data[:end]`` are the
        records (the chunked copies may read that far).
        """
        cdef int32_t k, klen = 0, vlen = 0
        cdef Py_ssize_t j = self.hused, kused = self.hkey_used, vused = self.hval_used
        cdef const uint8_t* lim = data + end
        cdef uint8_t* kdata
        cdef uint8_t* vdata
        cdef uint8_t* vnull
        cdef int64_t* koff
        cdef int64_t* voff
        cdef Py_ssize_t dcap = self.hdata_cap, grow
        cdef double guess
        if count > self.hcap - j:
            # grow to what the records so far say all of them hold, plus an
            # eighth, at least double; bounded by what the bytes can hold
            # (count itself was checked against the bytes left in the record)
            guess = <double>(j + count) * self.cap / (row + 1) * 1.125
            grow = self.hmax if guess >= <double>self.hmax else <Py_ssize_t>guess
            self._header_entries(max(j + count, min(max(2 * self.hcap, grow), self.hmax)))
        # locals: the byte stores below may alias anything, fields would be reloaded
        kdata, vdata, vnull = self._hkdata, self._hvdata, self._hvnull
        koff, voff = self._hkoff, self._hvoff
        for k in range(count):
            p = read_varint(data, p, rend, &klen)
            if p < 0 or klen < 0 or klen > rend - p or klen > dcap - kused:
                return -1
            ks_v2_copy(kdata + kused, kdata + dcap, data + p, lim, klen)
            kused += klen
            p += klen
            p = read_varint(data, p, rend, &vlen)
            if p < 0:
                return -1
            if vlen >= 0:
                if vlen > rend - p or vlen > dcap - vused:
                    return -1
                ks_v2_copy(vdata + vused, vdata + dcap, data + p, lim, vlen)
                vused += vlen
                p += vlen
                vnull[j] = 0
            else:
                vnull[j] = 1
            j += 1
            koff[j] = kused
            voff[j] = vused
        if p != rend:
            return -1
        self.hused = j
        self.hkey_used = kused
        self.hval_used = vused
        return 0

    cdef int _headers_of_run(self, const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                             Py_ssize_t nrec, Py_ssize_t row, Py_ssize_t where) except -1:
        """Headers of the ``nrec`` records at ``data[pos:]``, rows ``row`` on.

        These are records the fast path took (so well formed); each is walked
        again, with every length checked, to copy its headers out.
        """
        cdef Py_ssize_t k, hp, rend = 0
        cdef int32_t count = 0
        cdef RecordSpan span
        for k in range(nrec):
            hp = _headers_at(data, pos, end, &rend, &count)
            if hp < 0 or (hp != rend if count == 0 else
                          self._take_headers(data, hp, rend, count, row, end) < 0):
                parse_record(data, pos, end, &span, where)  # raises the precise error
                raise RuntimeError("decode_columns: the header walk rejected a valid record")
            row += 1
            self._hoff[row] = self.hused
            pos = rend
        return 0

    cdef int add_v2(self, RecordBatch batch, object data, const uint8_t* ahead,
                    Py_ssize_t ahead_len) except -1:
        cdef const uint8_t[::1] view = as_view(data)
        cdef const uint8_t* ptr = view_ptr(view)
        cdef Py_ssize_t pos = 0, end = view.shape[0], i = self.n, run_pos, run_row, taken
        cdef int32_t remaining = batch.record_count
        cdef RecordSpan span
        cdef Py_ssize_t where = batch.position
        cdef ks_cols c
        cdef ks_v2batch b
        if remaining > self.cap - i:  # pass 1 sized the arrays from these same counts
            raise RuntimeError("column arrays smaller than the records counted")
        if remaining <= 0:  # (with no records the arrays may be empty: no [0] to take)
            if pos != end:
                _corrupt("Incorrect declared batch size, records still remaining in file",
                         where, batch.base_offset)
            return 0
        # raw pointers, loaded once: the uint8 stores of the loop may alias
        # anything, so through the memoryviews every store would reload them
        memset(&c, 0, sizeof(c))   # the layout not in use keeps NULL pointers
        c.offset = &self._offset[0]
        c.timestamp = &self._timestamp[0]
        c.header_count = &self._hcount[0]
        c.key_null = &self._key_null[0]
        c.value_null = &self._value_null[0]
        if self.views:
            if self.narrow:
                c.key_starts32 = <int32_t*>self._key_starts
                c.value_starts32 = <int32_t*>self._value_starts
            else:
                c.key_starts = <int64_t*>self._key_starts
                c.value_starts = <int64_t*>self._value_starts
            c.key_lengths = &self._key_lengths[0]
            c.value_lengths = &self._value_lengths[0]
            if self.from_source:
                # the records section's place in the source (positions are the buffer's)
                c.base = batch.position + RECORD_BATCH_OVERHEAD
            else:
                # pass 1 counted this section into the arena's size
                if end > self.view_data.shape[0] - self.arena_used:
                    raise RuntimeError("decode_columns: arena smaller than the records")
                memcpy(self._arena + self.arena_used, ptr, end)
                c.base = self.arena_used
                self.arena_used += end
        else:
            c.key_offsets = &self._key_offsets[0]
            c.value_offsets = &self._value_offsets[0]
            c.key_data = &self._key_data[0]
            c.value_data = &self._value_data[0]
            c.key_cap = self._key_data.shape[0]
            c.value_cap = self._value_data.shape[0]
        c.key_used = self.key_used
        c.value_used = self.value_used
        c.row = i
        b.base_offset = batch.base_offset
        b.base_timestamp = batch.first_timestamp
        b.max_timestamp = batch.max_timestamp
        b.log_append_time = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
        # prefetch the next batch in equal steps, one per record, so that it
        # has all been requested by the time this batch's last record is read
        b.ahead = ahead
        b.ahead_len = ahead_len if ahead != NULL else 0
        b.ahead_pos = 0
        b.ahead_step = (ahead_len // remaining + 64) & ~(<Py_ssize_t>63)
        # one timestamp type for the whole batch
        memset(&self._ts_type[i], 1 if b.log_append_time else 0, remaining)
        try:
            while True:
                # ordinary records in C; it stops in front of any record it does
                # not take, which the checked parser below handles or rejects
                run_pos = pos
                run_row = c.row
                if self.views and self.narrow:
                    taken = ks_v2_fast_views32(ptr, &pos, end, remaining, &b, &c)
                elif self.views:
                    taken = ks_v2_fast_views(ptr, &pos, end, remaining, &b, &c)
                else:
                    taken = ks_v2_fast_records(ptr, &pos, end, remaining, &b, &c)
                remaining -= <int32_t>taken
                if self.with_headers and taken:
                    # the fast path only counts headers; copy them out of its run
                    self._headers_of_run(ptr, run_pos, end, taken, run_row, where)
                if remaining == 0:
                    break
                if pos >= end:
                    _corrupt("Incorrect declared batch size, premature EOF reached", where,
                             b.base_offset)
                parse_record(ptr, pos, end, &span, where)
                pos = span.next_pos
                remaining -= 1
                i = c.row
                c.offset[i] = add64(b.base_offset, span.offset_delta)
                c.timestamp[i] = (b.max_timestamp if b.log_append_time
                                  else add64(b.base_timestamp, span.ts_delta))
                c.header_count[i] = span.header_count
                # the key and value lie inside this batch's records, which pass 1
                # counted into the data capacity, so the copies stay in bounds
                if self.views:
                    self._put_start(self._key_starts, i, c.base + span.key_pos)
                    c.key_lengths[i] = span.key_len if span.key_len >= 0 else 0
                    c.key_null[i] = span.key_len < 0
                    self._put_start(self._value_starts, i, c.base + span.value_pos)
                    c.value_lengths[i] = span.value_len if span.value_len >= 0 else 0
                    c.value_null[i] = span.value_len < 0
                else:
                    if span.key_len >= 0:
                        memcpy(c.key_data + c.key_used, ptr + span.key_pos, span.key_len)
                        c.key_used += span.key_len
                        c.key_null[i] = 0
                    else:
                        c.key_null[i] = 1
                    if span.value_len >= 0:
                        memcpy(c.value_data + c.value_used, ptr + span.value_pos,
                               span.value_len)
                        c.value_used += span.value_len
                        c.value_null[i] = 0
                    else:
                        c.value_null[i] = 1
                if self.with_headers:
                    if self._take_headers(ptr, span.headers_pos, span.next_pos,
                                          span.header_count, i, end) < 0:
                        raise RuntimeError(
                            "decode_columns: the header walk rejected a valid record")
                    self._hoff[i + 1] = self.hused
                i += 1
                if not self.views:
                    c.key_offsets[i] = c.key_used
                    c.value_offsets[i] = c.value_used
                c.row = i
        finally:
            self.key_used = c.key_used
            self.value_used = c.value_used
            self.n = c.row
        if pos != end:
            _corrupt("Incorrect declared batch size, records still remaining in file",
                     where, b.base_offset)
        return 0

    cdef int add_record(self, Record rec) except -1:
        # rec comes from a batch's iteration: every slot is set
        cdef Py_ssize_t i = self.n
        cdef const uint8_t[::1] b
        cdef object key = <object>rec._key, value = <object>rec._value
        self._offset[i] = <object>rec._offset
        self._timestamp[i] = <object>rec._timestamp
        self._ts_type[i] = int(<object>rec._timestamp_type)
        self._hcount[i] = len(<object>rec._headers)
        if self.views:
            self._view_of(key, i, self._key_starts, self._key_lengths, self._key_null)
            self._view_of(value, i, self._value_starts, self._value_lengths,
                          self._value_null)
        else:
            if key is not None:
                b = key
                if b.shape[0]:
                    memcpy(&self._key_data[self.key_used], &b[0], b.shape[0])
                self.key_used += b.shape[0]
                self._key_null[i] = 0
            else:
                self._key_null[i] = 1
            if value is not None:
                b = value
                if b.shape[0]:
                    memcpy(&self._value_data[self.value_used], &b[0], b.shape[0])
                self.value_used += b.shape[0]
                self._value_null[i] = 0
            else:
                self._value_null[i] = 1
        if self.with_headers:
            # only legacy messages come this way, and they have no headers
            if <object>rec._headers:
                raise RuntimeError("decode_columns: a legacy record with headers")
            self._hoff[i + 1] = self.hused
        self.n = i + 1
        if not self.views:
            self._key_offsets[i + 1] = self.key_used
            self._value_offsets[i + 1] = self.value_used
        return 0

    cdef inline void _put_start(self, void* starts, Py_ssize_t i, Py_ssize_t pos) noexcept:
        if self.narrow:
            (<int32_t*>starts)[i] = <int32_t>pos
        else:
            (<int64_t*>starts)[i] = pos

    cdef int _view_of(self, object part, Py_ssize_t i, void* starts,
                      int32_t[::1] lengths, uint8_t[::1] null) except -1:
        """A legacy key or value into the arena, as row ``i``'s view."""
        cdef const uint8_t[::1] b
        cdef Py_ssize_t size = 0
        self._put_start(starts, i, self.arena_used)
        if part is None:
            lengths[i] = 0
            null[i] = 1
            return 0
        b = part
        size = b.shape[0]
        # pass 1 counted every legacy key and value into the arena's size
        if size > self.view_data.shape[0] - self.arena_used:
            raise RuntimeError("decode_columns: arena smaller than the records")
        if size:
            memcpy(self._arena + self.arena_used, &b[0], size)
        self.arena_used += size
        lengths[i] = <int32_t>size
        null[i] = 0
        return 0

    cdef dict finish(self):
        cdef _PoolBlock block
        cdef Py_ssize_t written
        for block in self._blocks:
            # record how much of each block now holds committed pages
            if block.role == "view_data":
                written = self.arena_used
            elif block.role == "key_data":
                written = self.key_used
            elif block.role == "value_data":
                written = self.value_used
            elif not self.with_headers:
                written = block.capacity
            elif block.role == "header_key_data":
                written = self.hkey_used
            elif block.role == "header_value_data":
                written = self.hval_used
            elif block.role in ("header_key_offsets", "header_value_offsets"):
                written = (self.hused + 1) * 8
            elif block.role == "header_value_null":
                written = self.hused
            else:
                written = block.capacity
            if written > block.touched:
                block.touched = written
        self._blocks = None
        out = {
            "offset": self.offset,
            "timestamp": self.timestamp,
            "timestamp_type": self.timestamp_type,
            "key_null": self.key_null,
            "value_null": self.value_null,
            "header_count": self.header_count,
        }
        if self.views:
            data = self.view_data if self.from_source else self.view_data[:self.arena_used]
            out.update(key_starts=self.key_starts, key_lengths=self.key_lengths,
                       value_starts=self.value_starts, value_lengths=self.value_lengths,
                       key_data=data, value_data=data)
        else:
            out.update(key_offsets=self.key_offsets, key_data=self.key_data[:self.key_used],
                       value_offsets=self.value_offsets,
                       value_data=self.value_data[:self.value_used])
        if self.with_headers:
            out["header_offsets"] = self.header_offsets
            out["header_key_offsets"] = self.header_key_offsets[:self.hused + 1]
            out["header_key_data"] = self.header_key_data[:self.hkey_used]
            out["header_value_offsets"] = self.header_value_offsets[:self.hused + 1]
            out["header_value_data"] = self.header_value_data[:self.hval_used]
            out["header_value_null"] = self.header_value_null[:self.hused]
        return out
