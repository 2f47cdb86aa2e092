# cdef API of the murmur2 kernel: Kafka's Utils.murmur2 over raw bytes, inline so a
# kernel that cimports it (a record writer placing keys) hashes without a call. The
# Python API is in murmur2.pyi; kafkastore/_pure/murmur2.py describes the algorithm.
from libc.stdint cimport int32_t, uint8_t, uint32_t


cdef inline uint32_t murmur2_hash(const uint8_t* data, size_t length) noexcept nogil:
    """Kafka's murmur2 of ``length`` bytes at ``data``, unsigned (cast to int32_t for
    Java's int). All arithmetic is on uint32_t, so it wraps as Java's int does."""
    cdef uint32_t m = 0x5bd1e995
    cdef uint32_t h = <uint32_t>0x9747b28c ^ <uint32_t>length   # seed ^ length
    cdef uint32_t k
    cdef size_t i, words = length >> 2
    cdef const uint8_t* p = data
    for i in range(words):
        # a little-endian word; compilers fuse the four loads into one on LE hosts
        k = (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
             | (<uint32_t>p[3] << 24))
        k *= m
        k ^= k >> 24                                              # r = 24
        k *= m
        h *= m
        h ^= k
        p += 4
    # the 1..3 bytes left: Java's switch falls through from case 3 to case 1
    if length & 3:
        if (length & 3) == 3:
            h ^= <uint32_t>p[2] << 16
        if (length & 3) >= 2:
            h ^= <uint32_t>p[1] << 8
        h ^= p[0]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


cdef inline int32_t murmur2_partition(uint32_t h, uint32_t num_partitions) noexcept nogil:
    """Kafka's default partition for hash ``h``: toPositive(h) % num_partitions.
    The caller guarantees ``num_partitions >= 1``."""
    return <int32_t>((h & 0x7fffffff) % num_partitions)
