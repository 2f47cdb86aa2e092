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
# profile). With raw slots, a new record's slots start NULL (zeroed memory) and
# _new_record stores each field once. A NULL slot (only a Record made by
# ``Record.__new__`` without ``__init__``) reads as an unset attribute, as an
# unset __slots__ field of the pure twin does.
#
# Records are recycled through a freelist of their own (ks_record_alloc /
# ks_record_dealloc below), not Cython's, for one more saving: a record going
# back on the freelist keeps its key and value bytes objects when nothing else
# references them (refcount 1: they would be freed otherwise) and they are
# small; the next record decoded into it rewrites a kept object of the same
# length in place instead of freeing one bytes object and allocating another.
# Decoding fixed-size keys and values (the common case) then allocates no bytes
# objects at all once the freelist is warm.
@cython.no_gc
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


cdef extern from *:
    """
    /* kafkastore Record recycling (default_record.pxi explains it). */
    #define KS_REC_FREELIST 512
    #define KS_REC_KEEP_MAX 512   /* bytes objects kept with a free record: at most this long */
    static Py_ssize_t ks_rec_off[6];          /* the slots' offsets, set at module init */
    static PyObject *ks_rec_free[KS_REC_FREELIST];
    static int ks_rec_nfree = 0;
    static PyTypeObject *ks_rec_type = NULL;
    #define KS_REC_SLOT(o, i) (*(PyObject **)((char *)(o) + ks_rec_off[i]))
    /* Rewriting a kept bytes object in place must also forget its cached hash:
       the ob_shash field, there (deprecated, not removed) up to 3.14 at least.
       Where it may be gone, nothing is kept. */
    #if PY_VERSION_HEX < 0x030F0000 && !defined(Py_LIMITED_API)
    #define KS_REC_KEEP 1
    #else
    #define KS_REC_KEEP 0
    #endif

    /* the freelist is module state guarded by the GIL: none without one */
    #if defined(Py_GIL_DISABLED)
    #define KS_REC_FREELIST_ON 0
    #else
    #define KS_REC_FREELIST_ON 1
    #endif

    static PyObject *ks_record_alloc(void) {
        PyObject *o;
        if (KS_REC_FREELIST_ON && ks_rec_nfree) {
            o = ks_rec_free[--ks_rec_nfree];
            (void)PyObject_Init(o, ks_rec_type);
            return o;
        }
        return ks_rec_type->tp_alloc(ks_rec_type, 0);   /* zeroed */
    }

    /* a kept key or value slot may hold a bytes object: reuse it when it has
       the length wanted, else replace it; a negative length is None */
    static int ks_record_set_bytes(PyObject *o, int i, const char *src, Py_ssize_t len) {
        PyObject *old = KS_REC_SLOT(o, i), *b;
        if (len < 0) {
            Py_INCREF(Py_None);
            KS_REC_SLOT(o, i) = Py_None;
            Py_XDECREF(old);
            return 0;
        }
    #if KS_REC_KEEP
        if (old != NULL && Py_SIZE(old) == len) {
            /* kept by ks_record_dealloc: an exact bytes object nothing else references */
            memcpy(PyBytes_AS_STRING(old), src, (size_t)len);
    #if defined(__GNUC__)
    #pragma GCC diagnostic push
    #pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    #endif
            ((PyBytesObject *)old)->ob_shash = -1;
    #if defined(__GNUC__)
    #pragma GCC diagnostic pop
    #endif
            return 0;
        }
    #endif
        b = PyBytes_FromStringAndSize(src, len);
        if (b == NULL)
            return -1;
        KS_REC_SLOT(o, i) = b;
        Py_XDECREF(old);
        return 0;
    }

    static void ks_record_dealloc(PyObject *o) {
        PyTypeObject *tp = Py_TYPE(o);
        PyObject *p;
        int i, keep = KS_REC_FREELIST_ON && ks_rec_nfree < KS_REC_FREELIST && tp == ks_rec_type;
        for (i = 0; i < 6; i++) {
            p = KS_REC_SLOT(o, i);
    #if KS_REC_KEEP
            if (keep && (i == 3 || i == 4) && p != NULL && Py_REFCNT(p) == 1
                    && PyBytes_CheckExact(p) && Py_SIZE(p) > 0 && Py_SIZE(p) <= KS_REC_KEEP_MAX)
                continue;
    #endif
            KS_REC_SLOT(o, i) = NULL;
            Py_XDECREF(p);
        }
        /* the decrefs may have run code that filled the freelist: check again */
        if (keep && ks_rec_nfree < KS_REC_FREELIST) {
            ks_rec_free[ks_rec_nfree++] = o;
        } else {
            Py_CLEAR(KS_REC_SLOT(o, 3));
            Py_CLEAR(KS_REC_SLOT(o, 4));
            tp->tp_free(o);
        }
        if (PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE))
            Py_DECREF(tp);
    }

    static void ks_record_install(PyTypeObject *t, const Py_ssize_t *offsets) {
        int i;
        for (i = 0; i < 6; i++)
            ks_rec_off[i] = offsets[i];
        ks_rec_type = t;
        t->tp_dealloc = ks_record_dealloc;
    }
    """
    object ks_record_alloc()
    int ks_record_set_bytes(object rec, int i, const char* src, Py_ssize_t length) except -1
    void ks_record_install(PyTypeObject* t, const Py_ssize_t* offsets)


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
    ks_record_install(<PyTypeObject*>Record, offsets)
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


cdef inline Record _alloc_record(object offset, object timestamp, object ts_type,
                                 object headers):
    # a record fresh from ks_record_alloc: these slots are NULL; the key and value slots
    # may hold the freelist's kept bytes objects (the caller sets them)
    cdef Record rec = <Record>ks_record_alloc()
    Py_INCREF(offset)
    rec._offset = <PyObject*>offset
    Py_INCREF(timestamp)
    rec._timestamp = <PyObject*>timestamp
    Py_INCREF(ts_type)
    rec._timestamp_type = <PyObject*>ts_type
    Py_INCREF(headers)
    rec._headers = <PyObject*>headers
    return rec


cdef inline Record _new_record(object offset, object timestamp, object ts_type, object key,
                               object value, object headers):
    cdef Record rec = _alloc_record(offset, timestamp, ts_type, headers)
    _set_slot(&rec._key, key)
    _set_slot(&rec._value, value)
    return rec


cdef inline Record _new_record_at(object offset, object timestamp, object ts_type,
                                  const uint8_t* data, Py_ssize_t key_pos, int32_t key_len,
                                  Py_ssize_t value_pos, int32_t value_len, object headers):
    """A record whose key and value are ``data``'s bytes at the given positions
    (a negative length: None), rewriting the freelist's kept bytes objects where
    their lengths match."""
    cdef Record rec = _alloc_record(offset, timestamp, ts_type, headers)
    ks_record_set_bytes(rec, 3, <const char*>data + key_pos, key_len)
    ks_record_set_bytes(rec, 4, <const char*>data + value_pos, value_len)
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
