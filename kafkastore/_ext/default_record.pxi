# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# Kafka's DefaultRecord on the Python side: the immutable Record type every
# reader yields, and turning a record the one parser (default_record.pxd)
# validated into Python objects (key, value, headers). parse_record() is the
# raising form of that parser for the readers of this module.


# no_gc: a Record holds bytes, ints, an enum member and a tuple of
# (str, bytes) pairs, none of which can lead back to it, so it cannot be part
# of a reference cycle. Leaving it out of the cyclic GC saves the gen-0
# collections that allocating millions of records would otherwise trigger.
@cython.no_gc
@cython.freelist(512)
cdef class Record:
    """One record read from a batch. Immutable.

    ``timestamp`` is what a Kafka consumer reports: the batch's maxTimestamp
    for a LogAppendTime batch (the wrapper's timestamp for a legacy
    wrapper), -1 for magic 0. ``headers`` is a tuple of ``(str, bytes | None)``
    pairs; header keys are decoded as UTF-8 with ``surrogateescape`` so that
    invalid bytes survive a round trip.
    """

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    cdef tuple _fields(self):
        return (self.offset, self.timestamp, int(self.timestamp_type), self.key,
                self.value, self.headers)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == (<Record>other)._fields()

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.timestamp_type, self.key,
                         self.value, self.headers))

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"key={self.key!r}, value={_short(self.value)}, headers={self.headers!r})"
        )


# Cython exposes ``cdef readonly object`` fields through getset descriptors,
# which CPython's attribute cache does not specialise (about 18 ns a read).
# Record is read four or more times per decoded record, so its fields are
# re-exposed as read-only T_OBJECT_EX member descriptors, which the
# interpreter reads through a slot directly (LOAD_ATTR_SLOT, about 4 ns).
# Offsets are found by planting distinct sentinels in a probe instance, so
# nothing depends on the name of Cython's generated struct.
cdef PyMemberDef _record_members[6]
cdef tuple _RECORD_FIELDS = (b"offset", b"timestamp", b"timestamp_type", b"key", b"value",
                             b"headers")


cdef Py_ssize_t _slot_offset(object probe, object sentinel) except -1:
    cdef PyObject** words = <PyObject**><PyObject*>probe
    cdef object tp = type(probe)
    cdef Py_ssize_t i
    for i in range(1, (<PyTypeObject*>tp).tp_basicsize // <Py_ssize_t>sizeof(PyObject*)):
        if words[i] == <PyObject*>sentinel:
            return i * <Py_ssize_t>sizeof(PyObject*)
    raise RuntimeError("Record slot not found")


cdef int _install_record_members() except -1:
    cdef Record probe = Record.__new__(Record)
    cdef list sentinels = [object() for _ in range(6)]
    cdef Py_ssize_t i
    cdef dict tp_dict = <dict>(<PyTypeObject*>Record).tp_dict
    probe.offset, probe.timestamp, probe.timestamp_type = sentinels[0], sentinels[1], sentinels[2]
    probe.key, probe.value, probe.headers = sentinels[3], sentinels[4], sentinels[5]
    for i in range(6):
        _record_members[i].name = <const char*>(<bytes>_RECORD_FIELDS[i])
        _record_members[i].type = T_OBJECT_EX
        _record_members[i].offset = _slot_offset(probe, sentinels[i])
        _record_members[i].flags = READONLY
        _record_members[i].doc = NULL
        tp_dict[(<bytes>_RECORD_FIELDS[i]).decode()] = PyDescr_NewMember(
            <PyTypeObject*>Record, &_record_members[i])
    # Cython installs its own tp_getattro; the interpreter specialises slot
    # reads only for the generic one, which behaves the same here (no __dict__,
    # no __getattr__).
    ks_use_generic_getattr(<PyTypeObject*>Record)
    PyType_Modified(<PyTypeObject*>Record)
    return 0


_install_record_members()


def _short(value):
    if value is not None and len(value) > 40:
        return repr(bytes(value[:40])) + "..."
    return repr(value)


cdef inline Record _new_record(object offset, object timestamp, object ts_type, object key,
                               object value, object headers):
    cdef Record rec = Record.__new__(Record)
    rec.offset = offset
    rec.timestamp = timestamp
    rec.timestamp_type = ts_type
    rec.key = key
    rec.value = value
    rec.headers = headers
    return rec


cdef int _record_error(const RecordError* e, Py_ssize_t where) except -1:
    _corrupt(record_error_message(e), where)


cdef inline int parse_record(const uint8_t* data, Py_ssize_t pos, Py_ssize_t end,
                             RecordSpan* out, Py_ssize_t where) except -1:
    """Parse and fully validate one v2 record at ``pos``; fill ``out``.

    The one parser (default_record.pxd's read_record); on malformed bytes it raises
    CorruptRecordError at ``where`` (the batch's position), out of line, so the
    common path is branches and loads only.
    """
    cdef RecordError err
    if read_record(data, pos, end, out, &err) < 0:
        return _record_error(&err, where)
    return 0


cdef tuple _decode_headers(const uint8_t* data, Py_ssize_t pos, int32_t count):
    """Headers of a record that parse_record already validated."""
    cdef list out = []
    cdef int32_t klen = 0, vlen = 0, i
    cdef Py_ssize_t n
    for i in range(count):
        n = varint_read(data + pos, 5, &klen)
        pos += n
        hkey = PyUnicode_DecodeUTF8(<const char*>data + pos, klen, "surrogateescape")
        pos += klen
        n = varint_read(data + pos, 5, &vlen)
        pos += n
        if vlen >= 0:
            hval = PyBytes_FromStringAndSize(<const char*>data + pos, vlen)
            pos += vlen
        else:
            hval = None
        out.append((hkey, hval))
    return tuple(out)


cdef inline object _bytes_or_none(const uint8_t* data, Py_ssize_t pos, int32_t length):
    if length < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>data + pos, length)
