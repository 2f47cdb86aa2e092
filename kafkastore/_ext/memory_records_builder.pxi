# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# Kafka's MemoryRecordsBuilder for magic 2: encode_batch_v2 and its helpers.


cdef struct EncItem:
    const char* key
    Py_ssize_t key_len      # -1: null
    const char* value
    Py_ssize_t value_len    # -1: null
    int64_t ts
    int32_t delta
    const char* headers     # pre-encoded header entries
    Py_ssize_t headers_len
    int32_t header_count
    Py_ssize_t size         # record body size, after its length varint


cdef object _INT_BOUNDS = {16: (-(1 << 15), (1 << 15) - 1), 32: (-(1 << 31), (1 << 31) - 1),
                           64: (-(1 << 63), (1 << 63) - 1)}


cdef int _check_attributes(object value) except? -1:
    """Any 16-bit pattern (the field is an int16; Kafka reads it as a short)."""
    if not isinstance(value, int):
        raise TypeError(f"attributes must be an int, not {type(value).__name__}")
    if not -0x8000 <= value <= 0xFFFF:
        raise ValueError(f"attributes {value} do not fit 16 bits")
    return value & 0xFFFF


cdef object _check_int(object value, int bits, str what):
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    lo, hi = _INT_BOUNDS[bits]
    if not lo <= value <= hi:
        raise ValueError(f"{what} {value} is outside the int{bits} range")
    return value


cdef inline int64_t _ts_value(object ts) except? -1:
    cdef int overflow = 0
    cdef long long v
    if not PyLong_Check(ts):
        raise TypeError(f"record timestamp must be an int or None, not {type(ts).__name__}")
    v = PyLong_AsLongLongAndOverflow(ts, &overflow)
    if overflow:
        raise ValueError(f"timestamp {ts} is outside the int64 range")
    return v


cdef object _as_bytes(object obj, str what):
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        raise TypeError(f"record {what} must be bytes-like or None, not str")
    try:
        return bytes(memoryview(obj))
    except TypeError:
        raise TypeError(
            f"record {what} must be bytes-like or None, not {type(obj).__name__}") from None


cdef bytes _encode_headers(object headers, int32_t* count):
    cdef bytearray out = bytearray()
    cdef uint8_t tmp[10]
    cdef Py_ssize_t k
    cdef int32_t n = 0
    for item in headers:
        try:
            hkey, hval = item
        except (TypeError, ValueError):
            raise TypeError("a header is a (key, value) pair") from None
        if isinstance(hkey, str):
            hkey = (<str>hkey).encode("utf-8", "surrogateescape")
        elif hkey is None:
            raise TypeError("header keys cannot be null")
        else:
            hkey = _as_bytes(hkey, "header key")
        hval = _as_bytes(hval, "header value")
        k = uvarint_write(tmp, zigzag32(<int32_t>len(hkey)))
        out += (<char*>tmp)[:k]
        out += hkey
        if hval is None:
            out += b"\x01"  # zig-zag of -1
        else:
            k = uvarint_write(tmp, zigzag32(<int32_t>len(hval)))
            out += (<char*>tmp)[:k]
            out += hval
        n += 1
    count[0] = n
    return bytes(out)


cdef inline Py_ssize_t _len_field(Py_ssize_t length) noexcept nogil:
    # a varint length plus the bytes; null (-1) is the single byte 0x01
    if length < 0:
        return 1
    return uvarint_size(zigzag32(<int32_t>length)) + length


cdef inline Py_ssize_t _write_record(uint8_t* out, EncItem* item, int64_t base_ts) noexcept:
    cdef Py_ssize_t i = uvarint_write(out, zigzag32(<int32_t>item.size))
    out[i] = 0  # attributes
    i += 1
    i += uvarint_write(out + i, zigzag64(<int64_t>(<uint64_t>item.ts - <uint64_t>base_ts)))
    i += uvarint_write(out + i, zigzag32(item.delta))
    if item.key_len < 0:
        out[i] = 1
        i += 1
    else:
        i += uvarint_write(out + i, zigzag32(<int32_t>item.key_len))
        memcpy(out + i, item.key, item.key_len)
        i += item.key_len
    if item.value_len < 0:
        out[i] = 1
        i += 1
    else:
        i += uvarint_write(out + i, zigzag32(<int32_t>item.value_len))
        memcpy(out + i, item.value, item.value_len)
        i += item.value_len
    i += uvarint_write(out + i, zigzag32(item.header_count))
    if item.headers_len:
        memcpy(out + i, item.headers, item.headers_len)
        i += item.headers_len
    return i


cdef inline void _prefetch_record(list seq, Py_ssize_t i, Py_ssize_t n) noexcept:
    # Hide cold-cache latency: the tuple 8 records ahead, and the key and value
    # objects of the tuple 4 ahead (its header is in cache by then).
    cdef PyObject* ahead
    if i + 8 < n:
        ks_prefetch(PyList_GET_ITEM(seq, i + 8))
    if i + 4 < n:
        ahead = PyList_GET_ITEM(seq, i + 4)
        if ahead.ob_type == &PyTuple_Type and Py_SIZE(ahead) >= 2:
            ks_prefetch((<PyTupleObject*>ahead).ob_item[0])
            ks_prefetch((<PyTupleObject*>ahead).ob_item[1])


cdef int _fill_item(EncItem* item, object rec, int64_t default_ts, list keep) except -1:
    """Borrow pointers to one record's parts; ``keep`` holds converted objects."""
    cdef Py_ssize_t n
    cdef object key, value, ts = None, headers = None
    cdef tuple t
    if type(rec) is tuple:
        # typed: the items are read straight from the tuple (no generic getitem, no len())
        t = <tuple>rec
        n = PyTuple_GET_SIZE(t)
        if n < 2 or n > 4:
            raise TypeError("a record tuple is (key, value[, timestamp[, headers]])")
        key = t[0]
        value = t[1]
        if n > 2:
            ts = t[2]
            if n > 3:
                headers = t[3]
    elif type(rec) is list:
        return _fill_item(item, tuple(rec), default_ts, keep)
    elif isinstance(rec, (tuple, list)):
        return _fill_item(item, tuple(rec), default_ts, keep)
    else:
        try:
            key = rec.key
            value = rec.value
        except AttributeError:
            raise TypeError(
                "a record is a (key, value[, timestamp[, headers]]) tuple or an object "
                f"with key and value attributes, not {type(rec).__name__}") from None
        ts = getattr(rec, "timestamp", None)
        headers = getattr(rec, "headers", None)
    if type(key) is not bytes and key is not None:
        key = _as_bytes(key, "key")
        keep.append(key)
    if type(value) is not bytes and value is not None:
        value = _as_bytes(value, "value")
        keep.append(value)
    if key is None:
        item.key = NULL
        item.key_len = -1
    else:
        item.key = PyBytes_AS_STRING(key)
        item.key_len = PyBytes_GET_SIZE(key)
    if value is None:
        item.value = NULL
        item.value_len = -1
    else:
        item.value = PyBytes_AS_STRING(value)
        item.value_len = PyBytes_GET_SIZE(value)
    item.ts = default_ts if ts is None else _ts_value(ts)
    if headers:
        encoded = _encode_headers(headers, &item.header_count)
        keep.append(encoded)
        item.headers = PyBytes_AS_STRING(encoded)
        item.headers_len = PyBytes_GET_SIZE(encoded)
    else:
        item.header_count = 0
        item.headers = NULL
        item.headers_len = 0
    return 0


def encode_batch_v2(records, base_offset=0, partition_leader_epoch=-1, attributes=0,
                    producer_id=-1, producer_epoch=-1, base_sequence=-1, default_timestamp=-1,
                    max_timestamp=None, last_offset_delta=None, offsets=None,
                    delete_horizon_ms=None, compress=None):
    """Build one magic 2 batch; return its bytes, CRC-32C included.

    ``records`` items are ``(key, value[, timestamp[, headers]])`` tuples or
    objects with ``key``/``value`` (and optional ``timestamp``/``headers``)
    attributes, such as a decoded :class:`Record`. A record without a
    timestamp gets ``default_timestamp``. ``attributes`` carries the codec,
    timestamp type, transactional and control bits; bit 6 is set when
    ``delete_horizon_ms`` is given, and then ``baseTimestamp`` is the
    horizon. ``offsets`` optionally gives each record's absolute offset
    (strictly increasing, within int32 of ``base_offset``), as a compacted
    batch keeps; ``last_offset_delta`` may then exceed the last record's.
    ``max_timestamp`` overrides the computed maximum (used for
    LogAppendTime). ``compress(view) -> bytes`` compresses the records
    section when the codec bits are not 0.
    """
    cdef int64_t c_base_offset = _check_int(base_offset, 64, "base offset")
    cdef int32_t c_epoch = _check_int(partition_leader_epoch, 32, "partition leader epoch")
    cdef int c_attributes = _check_attributes(attributes)
    cdef int64_t c_pid = _check_int(producer_id, 64, "producer id")
    cdef int16_t c_pepoch = _check_int(producer_epoch, 16, "producer epoch")
    cdef int32_t c_seq = _check_int(base_sequence, 32, "base sequence")
    cdef int64_t c_default_ts = _check_int(default_timestamp, 64, "timestamp")
    if max_timestamp is not None:
        _check_int(max_timestamp, 64, "max timestamp")
    if last_offset_delta is not None:
        _check_int(last_offset_delta, 32, "last offset delta")
    if delete_horizon_ms is not None:
        _check_int(delete_horizon_ms, 64, "delete horizon")
    cdef list seq = records if type(records) is list else list(records)
    cdef Py_ssize_t n = len(seq), i
    cdef list offs = None
    cdef list keep = []
    cdef EncItem* items
    cdef EncItem* item
    cdef int64_t base_ts, max_ts, ts_delta
    cdef int64_t delta = -1, prev = -1, last_delta
    cdef Py_ssize_t body = 0, total, w
    cdef uint8_t* out
    cdef bytes result
    if offsets is not None:
        offs = list(offsets)
        if len(offs) != n:
            raise ValueError(f"{len(offs)} offsets given for {n} records")
    c_attributes &= 0x3F  # bit 6 is ours to set; bits 7-15 are unused and written as 0
    if delete_horizon_ms is not None:
        c_attributes |= DELETE_HORIZON_MASK
    items = <EncItem*>PyMem_Malloc((n if n else 1) * sizeof(EncItem))
    if items == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            item = &items[i]
            _prefetch_record(seq, i, n)
            _fill_item(item, seq[i], c_default_ts, keep)
            if offs is None:
                delta = i
            else:
                _check_int(offs[i], 64, "offset")
                d = offs[i] - base_offset
                if not 0 <= d <= INT32_MAX_ or d <= prev:
                    raise ValueError(
                        f"offset {offs[i]} must be above the previous one and within "
                        f"int32 of base offset {base_offset}")
                delta = d
            item.delta = <int32_t>delta
            prev = delta
        if n:
            base_ts = items[0].ts if delete_horizon_ms is None else delete_horizon_ms
            if max_timestamp is None:
                max_ts = items[0].ts
                for i in range(1, n):
                    if items[i].ts > max_ts:
                        max_ts = items[i].ts
            else:
                max_ts = max_timestamp
            last_delta = prev
        else:
            # Kafka's writeEmptyHeader: no first timestamp, the max timestamp kept
            max_ts = -1 if max_timestamp is None else max_timestamp
            base_ts = -1 if delete_horizon_ms is None else delete_horizon_ms
            last_delta = 0
        if last_offset_delta is not None:
            if not last_delta <= last_offset_delta <= INT32_MAX_:
                raise ValueError(
                    f"last offset delta {last_offset_delta} is below the last record's "
                    f"delta {last_delta} or above int32")
            last_delta = last_offset_delta
        for i in range(n):
            item = &items[i]
            ts_delta = <int64_t>(<uint64_t>item.ts - <uint64_t>base_ts)
            if ((item.ts ^ base_ts) & (item.ts ^ ts_delta)) < 0:  # the subtraction overflowed
                raise ValueError(
                    f"timestamp {item.ts} is too far from the base timestamp {base_ts}")
            item.size = (1 + uvarint_size(zigzag64(ts_delta))
                         + uvarint_size(zigzag32(item.delta))
                         + _len_field(item.key_len) + _len_field(item.value_len)
                         + uvarint_size(zigzag32(item.header_count)) + item.headers_len)
            if item.size > INT32_MAX_:
                raise RecordTooLargeError("record does not fit Kafka's int32 size field",
                                          limit=INT32_MAX_)
            body += uvarint_size(zigzag32(<int32_t>item.size)) + item.size
        codec = c_attributes & CODEC_MASK
        if codec == 0:
            total = RECORD_BATCH_OVERHEAD + body
            if total - LOG_OVERHEAD > INT32_MAX_:
                raise RecordTooLargeError(
                    f"batch of {total} bytes does not fit Kafka's int32 size",
                    limit=<int64_t>INT32_MAX_ + LOG_OVERHEAD)
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t*>PyBytes_AS_STRING(result)
            w = RECORD_BATCH_OVERHEAD
            for i in range(n):
                w += _write_record(out + w, &items[i], base_ts)
        else:
            if compress is None:
                raise ValueError("a compressed batch needs a compress function")
            raw = PyBytes_FromStringAndSize(NULL, body)
            out = <uint8_t*>PyBytes_AS_STRING(raw)
            w = 0
            for i in range(n):
                w += _write_record(out + w, &items[i], base_ts)
            compressed = compress(memoryview(raw))
            del raw
            clen = len(compressed)
            total = RECORD_BATCH_OVERHEAD + clen
            if total - LOG_OVERHEAD > INT32_MAX_:
                raise RecordTooLargeError(
                    f"batch of {total} bytes does not fit Kafka's int32 size",
                    limit=<int64_t>INT32_MAX_ + LOG_OVERHEAD)
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t*>PyBytes_AS_STRING(result)
            _copy_into(out + RECORD_BATCH_OVERHEAD, compressed, clen)
    finally:
        PyMem_Free(items)
    ks_store_be64(out, <uint64_t>c_base_offset)
    ks_store_be32(out + LENGTH_OFFSET, <uint32_t>(total - LOG_OVERHEAD))
    ks_store_be32(out + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>c_epoch)
    out[MAGIC_OFFSET] = 2
    ks_store_be16(out + ATTRIBUTES_OFFSET, <uint16_t>c_attributes)
    ks_store_be32(out + LAST_OFFSET_DELTA_OFFSET, <uint32_t>last_delta)
    ks_store_be64(out + BASE_TIMESTAMP_OFFSET, <uint64_t>base_ts)
    ks_store_be64(out + MAX_TIMESTAMP_OFFSET, <uint64_t>max_ts)
    ks_store_be64(out + PRODUCER_ID_OFFSET, <uint64_t>c_pid)
    ks_store_be16(out + PRODUCER_EPOCH_OFFSET, <uint16_t>c_pepoch)
    ks_store_be32(out + BASE_SEQUENCE_OFFSET, <uint32_t>c_seq)
    ks_store_be32(out + RECORDS_COUNT_OFFSET, <uint32_t>n)
    crc = _crc32c(memoryview(result)[ATTRIBUTES_OFFSET:])
    ks_store_be32(out + CRC_OFFSET, <uint32_t>crc)
    return result


cdef int _copy_into(uint8_t* dest, object src, Py_ssize_t n) except -1:
    cdef const uint8_t[::1] view = as_view(src)
    if n:
        memcpy(dest, &view[0], n)
    return 0
