# Part of kafkastore._ext.record_batch (included by record_batch.pyx; not a module).
#
# The memory pool behind decode_columns' large output arrays.
#
# A fresh multi-megabyte array costs a page fault and a zeroed page per 4 KiB
# the first time it is written: for a million records, about 15 ms of the
# kernel's time, as much as the decoding itself. Decoding segment after
# segment (analytics, the Spark reader) allocates and frees the same sizes
# again and again, so the large column buffers come from a small pool: a
# block whose last array died goes back to the pool with its pages still
# mapped, and the next decode writes into warm memory. Blocks remember the
# column they served, so keys get back key memory and values value memory.
# The pool keeps at most ``_pool_limit`` bytes of *written* pages (256 MiB by
# default; ``set_column_pool_limit`` changes it, 0 disables it) and frees
# everything beyond. All of it runs under the GIL.

cdef Py_ssize_t _POOL_MIN_BLOCK = 1 << 20   # smaller arrays come from numpy as usual
cdef Py_ssize_t _pool_limit = 256 * 1024 * 1024
cdef Py_ssize_t _pool_retained = 0            # written bytes held by pooled blocks
cdef list _pool = []                          # (capacity, touched, role, address)
cdef char* _FORMAT_B = "B"


def set_column_pool_limit(limit):
    """Bound the memory :func:`decode_columns` keeps for reuse; return the old bound.

    ``limit`` counts bytes of pages already written. 0 turns the pool off and
    frees what it holds.
    """
    global _pool_limit
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"pool limit must be a non-negative int, not {limit!r}")
    old = _pool_limit
    _pool_limit = min(limit, PY_SSIZE_T_MAX)
    _pool_trim()
    return old


def _column_pool_retained():
    """Bytes of written pages the pool holds (for tests)."""
    return _pool_retained


cdef void _pool_trim() noexcept:
    global _pool_retained
    cdef size_t address
    while _pool and _pool_retained > _pool_limit:
        capacity, touched, role, address = _pool.pop(0)
        _pool_retained -= touched
        free(<void*>address)


@cython.final
cdef class _PoolBlock:
    """Memory of one large output column; back to the pool when its last view dies."""

    cdef char* data
    cdef Py_ssize_t capacity
    cdef Py_ssize_t touched      # high-water mark of bytes written: pages committed
    cdef object role
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self.shape[0] = self.capacity
        self.strides[0] = 1
        buf.buf = self.data
        buf.obj = self
        buf.len = self.capacity
        buf.readonly = 0
        buf.itemsize = 1
        buf.format = _FORMAT_B
        buf.ndim = 1
        buf.shape = self.shape
        buf.strides = self.strides
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass

    def __dealloc__(self):
        global _pool_retained
        if self.data == NULL:
            return
        if _pool_retained + self.touched <= _pool_limit:
            _pool.append((self.capacity, self.touched, self.role, <size_t>self.data))
            _pool_retained += self.touched
        else:
            free(self.data)
        self.data = NULL


cdef _PoolBlock _pool_get(Py_ssize_t nbytes, object role):
    """A block of at least ``nbytes``: a pooled one that fits, else a new one."""
    global _pool_retained
    cdef _PoolBlock block = _PoolBlock.__new__(_PoolBlock)
    cdef Py_ssize_t i, best = -1, best_capacity = 0, capacity
    cdef bint best_same_role = False, same
    cdef size_t address
    for i in range(len(_pool)):
        capacity = _pool[i][0]
        # fits, and wastes at most half (plus a block) of its address space
        if capacity < nbytes or capacity > 2 * nbytes + _POOL_MIN_BLOCK:
            continue
        same = _pool[i][2] == role
        if best < 0 or (same and not best_same_role) or \
                (same == best_same_role and capacity < best_capacity):
            best, best_capacity, best_same_role = i, capacity, same
    if best >= 0:
        capacity, touched, _, address = _pool.pop(best)
        _pool_retained -= touched
        block.data = <char*>address
        block.capacity = capacity
        block.touched = touched
    else:
        block.data = <char*>malloc(nbytes)
        if block.data == NULL:
            raise MemoryError(f"cannot allocate {nbytes} bytes for a column")
        block.capacity = nbytes
        block.touched = 0
    block.role = role
    return block


cdef object _column(Py_ssize_t n, object dtype, Py_ssize_t itemsize, object role,
                    list blocks):
    """An uninitialised 1-D array of ``n`` items; large ones from the pool."""
    cdef Py_ssize_t nbytes = n * itemsize
    cdef _PoolBlock block
    if nbytes < _POOL_MIN_BLOCK or _pool_limit == 0:
        return np.empty(n, dtype=dtype)
    block = _pool_get(nbytes, role)
    blocks.append(block)
    return np.frombuffer(block, dtype=dtype, count=n)
