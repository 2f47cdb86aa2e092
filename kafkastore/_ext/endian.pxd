# Declarations for csrc/ks_endian.h: portable big-endian loads and stores.
#
# Kafka's on-disk format is big-endian. Kernels keep `const unsigned char*`
# (or `const uint8_t[::1]`) views of Kafka bytes and decode each field with
# these; any alignment is fine. Extern C functions are implicitly noexcept.
#
#     from kafkastore._ext.endian cimport ks_load_be32
#     rel_offset = ks_load_be32(&entries[slot * 8])

from libc.stdint cimport uint16_t, uint32_t, uint64_t


cdef extern from "ks_endian.h" nogil:
    uint16_t ks_load_be16(const unsigned char *p)
    uint32_t ks_load_be32(const unsigned char *p)
    uint64_t ks_load_be64(const unsigned char *p)

    void ks_store_be16(unsigned char *p, uint16_t v)
    void ks_store_be32(unsigned char *p, uint32_t v)
    void ks_store_be64(unsigned char *p, uint64_t v)
