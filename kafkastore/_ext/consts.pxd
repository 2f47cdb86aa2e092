# Layout constants of Kafka's record formats, shared by the compiled kernels.
# The pure twins and the layers above the kernels take them from kafkastore/_pure/consts.py,
# its Python mirror (tests/kernels/test_consts.py keeps the two equal).
# cdef enum instead of DEF: DEF is deprecated in Cython 3.

cdef enum:
    LOG_OVERHEAD = 12              # offset int64 + size int32 before every entry
    MAGIC_OFFSET = 16              # the magic byte sits here in every format
    HEADER_SIZE_UP_TO_MAGIC = 17
    MIN_ENTRY_SIZE = 14            # smallest legal size field (a v0 message)
    MIN_RECORD_SIZE = 7            # smallest v2 record: seven 1-byte fields

    # RecordBatch v2 header, byte offsets from the start of the entry
    BASE_OFFSET_OFFSET = 0
    LENGTH_OFFSET = 8
    PARTITION_LEADER_EPOCH_OFFSET = 12
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    LAST_OFFSET_DELTA_OFFSET = 23
    BASE_TIMESTAMP_OFFSET = 27
    MAX_TIMESTAMP_OFFSET = 35
    PRODUCER_ID_OFFSET = 43
    PRODUCER_EPOCH_OFFSET = 51
    BASE_SEQUENCE_OFFSET = 53
    RECORDS_COUNT_OFFSET = 57
    RECORD_BATCH_OVERHEAD = 61     # = RECORDS_OFFSET

    # attribute bits
    CODEC_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_MASK = 0x20
    DELETE_HORIZON_MASK = 0x40

    # legacy (magic 0/1) message, offsets from the start of the entry
    LEGACY_CRC_OFFSET = 12
    LEGACY_ATTRIBUTES_OFFSET = 17
    LEGACY_TIMESTAMP_OFFSET = 18   # v1 only
    LEGACY_HEADER_V0 = 6           # crc + magic + attributes
    LEGACY_HEADER_V1 = 14          # + timestamp
    LEGACY_OVERHEAD_V1 = 22        # v1 header + key and value lengths

    # Kafka's index files (kafkastore/_ext/index_search.pyx documents the layouts)
    OFFSET_INDEX_ENTRY_SIZE = 8    # relativeOffset int32 + position int32
    TIME_INDEX_ENTRY_SIZE = 12     # timestamp int64 + relativeOffset int32
    INDEX_WARM_SECTION_BYTES = 8192  # AbstractIndex's warm section: the last 8 KiB of entries
