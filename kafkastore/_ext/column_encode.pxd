# cdef API of the column_encode kernel: RecordBatch v2 records written straight from
# Arrow-style columns. The Python API is in column_encode.pyi; the input layout, the
# batching rule and the order of the checks are documented in
# kafkastore/_pure/column_encode.py.
from libc.stdint cimport int64_t, uint8_t


cdef struct BinaryColumn:
    # Arrow binary/large_binary: entry i is data[offsets[i]:offsets[i + 1]]
    const uint8_t* data
    Py_ssize_t size             # bytes at data
    const char* offsets         # `entries + 1` int32 (wide 0) or int64 (wide 1) values
    bint wide
    Py_ssize_t entries
    const uint8_t* valid        # `entries` bools, 0 = null; NULL: no nulls


cdef struct ColumnBatch:
    Py_ssize_t start            # position in the encoding order of its first record
    Py_ssize_t count
    int64_t body                # bytes of its uncompressed records section
    int64_t base_ts
    int64_t max_ts


cdef struct ColumnError:
    int code                    # an _E_* code of column_encode.pyx; 0: none
    int what                    # which column (_W_*)
    Py_ssize_t pos              # position in the encoding order
    int64_t row
    int64_t entry               # header entry
    int64_t a                   # start offset, header start, timestamp
    int64_t b                   # end offset, header end, base timestamp
    int64_t size                # bytes of data, or header entries


cdef struct ColumnInput:
    Py_ssize_t n                # rows in the columns
    Py_ssize_t m                # records to encode
    const char* rows            # m int32/int64 row indices; NULL: 0 .. n-1
    bint rows_wide
    const int64_t* ts           # n timestamps; NULL: default_ts for all
    int64_t default_ts
    bint has_keys
    BinaryColumn key
    BinaryColumn value
    bint has_headers
    const char* hoffs           # n + 1 offsets into the header entries
    bint hoffs_wide
    BinaryColumn hkey           # H entries, never null
    BinaryColumn hvalue         # H entries
    int64_t max_records
    int64_t max_bytes
    int64_t* payload            # m: each record's bytes after its offset delta
    ColumnBatch* batches
    Py_ssize_t nbatches
    Py_ssize_t cap_batches
    ColumnError err


# Validate every record in encoding order, size it and split the records into batches
# (into c.batches, which it allocates with malloc; the caller frees it). 0, or -1 with
# c.err set.
cdef int plan_column_batches(ColumnInput* c) noexcept nogil

# Write batch b's uncompressed records section to out[0:b.body], checking every span
# again (the arrays may have changed since they were planned). b.body, or -1 when what
# the columns hold now no longer matches the plan (nothing past out + b.body is written).
cdef int64_t write_column_records(const ColumnInput* c, const ColumnBatch* b,
                                  uint8_t* out) noexcept nogil
