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
#
# The six fields are raw PyObject* slots, not ``object`` fields, because of what
# Cython does with ``object`` fields: its tp_new sets each to None (six INCREFs
# of None) and every first assignment DECREFs that None again: twelve
# read-modify-writes of None's one reference count per record, back to back, a
# dependency chain that was about a tenth of decoding a record (issue 31's
# profile). With raw slots, tp_new (the freelist's memset) leaves them NULL and
# _new_record stores each field once. A NULL slot (only a Record made by
# ``Record.__new__`` without ``__init__``) reads as an unset attribute, as an
# unset __slots__ field of the pure twin does.
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
        _set_slot(&self._offset, offset)
        _set_slot(&self._timestamp, timestamp)
        _set_slot(&self._timestamp_type, timestamp_type)
        _set_slot(&self._key, key)
        _set_slot(&self._value, value)
        _set_slot(&self._headers, headers)

    def __dealloc__(self):
        Py_XDECREF(self._offset)
        Py_XDECREF(self._timestamp)
        Py_XDECREF(self._timestamp_type)
        Py_XDECREF(self._key)
        Py_XDECREF(self._value)
        Py_XDECREF(self._headers)

    cdef tuple _fields(self):
        return (_slot(self._offset, 0), _slot(self._timestamp, 1),
                int(_slot(self._timestamp_type, 2)), _slot(self._key, 3),
                _slot(self._value, 4), _slot(self._headers, 5))

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == (<Record>other)._fields()

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        return (Record, (_slot(self._offset, 0), _slot(self._timestamp, 1),
                         _slot(self._timestamp_type, 2), _slot(self._key, 3),
                         _slot(self._value, 4), _slot(self._headers, 5)))

    def __repr__(self):
        return (
            f"Record(offset={_slot(self._offset, 0)}, timestamp={_slot(self._timestamp, 1)}, "
            f"key={_slot(self._key, 3)!r}, value={_short(_slot(self._value, 4))}, "
            f"headers={_slot(self._headers, 5)!r})"
        )


cdef tuple _RECORD_FIELDS = (b"offset", b"timestamp", b"timestamp_type", b"key", b"value",
                             b"headers")


cdef inline int _set_slot(PyObject** slot, object value) except -1:
    # replace a slot's reference (__init__ may run again on a live Record)
    cdef PyObject* old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    Py_XDECREF(old)
    return 0


cdef object _slot(PyObject* p, int field):
    if p == NULL:
        raise AttributeError((<bytes>_RECORD_FIELDS[field]).decode())
    return <object>p


# Python reads Record's fields through read-only T_OBJECT_EX member
# descriptors over the raw slots: the interpreter reads those through a slot
# directly (LOAD_ATTR_SLOT, about 4 ns; a Cython getset property costs about
# 18 ns, and CPython's attribute cache does not specialise it). Record is read
# four or more times per decoded record.
cdef PyMemberDef _record_members[6]


cdef int _install_record_members() except -1:
    cdef Record probe = Record.__new__(Record)
    cdef char* base = <char*><PyObject*>probe
    cdef Py_ssize_t offsets[6]
    cdef Py_ssize_t i
    cdef dict tp_dict = <dict>(<PyTypeObject*>Record).tp_dict
    offsets[0] = <char*>&probe._offset - base
    offsets[1] = <char*>&probe._timestamp - base
    offsets[2] = <char*>&probe._timestamp_type - base
    offsets[3] = <char*>&probe._key - base
    offsets[4] = <char*>&probe._value - base
    offsets[5] = <char*>&probe._headers - base
    for i in range(6):
        _record_members[i].name = <const char*>(<bytes>_RECORD_FIELDS[i])
        _record_members[i].type = T_OBJECT_EX
        _record_members[i].offset = offsets[i]
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
    # tp_new (Cython's freelist) leaves the slots NULL: each is stored once
    cdef Record rec = Record.__new__(Record)
    Py_INCREF(offset)
    rec._offset = <PyObject*>offset
    Py_INCREF(timestamp)
    rec._timestamp = <PyObject*>timestamp
    Py_INCREF(ts_type)
    rec._timestamp_type = <PyObject*>ts_type
    Py_INCREF(key)
    rec._key = <PyObject*>key
    Py_INCREF(value)
    rec._value = <PyObject*>value
    Py_INCREF(headers)
    rec._headers = <PyObject*>headers
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
