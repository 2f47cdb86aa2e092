/*
 * ks_endian.h - portable big-endian loads and stores for kafkastore.
 *
 * Kafka's on-disk format is big-endian throughout (Java ByteBuffer's default):
 * RecordBatch header fields, .index entries (4-byte relative offset, 4-byte
 * position) and .timeindex entries (8-byte timestamp, 4-byte relative offset).
 * Kernels read those from `const unsigned char *` views and decode each field
 * with one call here, so no typed memoryview over a Kafka file is ever needed.
 *
 * Every function copies through memcpy, so the pointer may have any alignment
 * (index entries in a byte view are not aligned to their field size), and then
 * swaps bytes on little-endian hosts. Compilers turn memcpy + bswap into a
 * single load (+ bswap / movbe) at -O2.
 *
 * Host byte order:
 *   - GCC and Clang:  __BYTE_ORDER__ (predefined macro);
 *   - Windows:        always little-endian (_WIN32);
 *   - anything else:  shift-based code that is correct on any host order.
 *
 * Team-written; no Python.h, every symbol prefixed with ks_.
 */
#ifndef KS_ENDIAN_H
#define KS_ENDIAN_H

#include <stdint.h>
#include <string.h>

/* ---- byte swaps -------------------------------------------------------- */

#if defined(_MSC_VER)
#  include <stdlib.h>
#  define ks_bswap16(x) ((uint16_t)_byteswap_ushort((unsigned short)(x)))
#  define ks_bswap32(x) ((uint32_t)_byteswap_ulong((unsigned long)(x)))
#  define ks_bswap64(x) ((uint64_t)_byteswap_uint64((unsigned __int64)(x)))
#elif defined(__GNUC__) || defined(__clang__)
#  define ks_bswap16(x) ((uint16_t)__builtin_bswap16((uint16_t)(x)))
#  define ks_bswap32(x) ((uint32_t)__builtin_bswap32((uint32_t)(x)))
#  define ks_bswap64(x) ((uint64_t)__builtin_bswap64((uint64_t)(x)))
#else
static inline uint16_t ks_bswap16(uint16_t x)
{
    return (uint16_t)((x >> 8) | (x << 8));
}

static inline uint32_t ks_bswap32(uint32_t x)
{
    return ((x & 0x000000FFu) << 24) | ((x & 0x0000FF00u) << 8) |
           ((x & 0x00FF0000u) >> 8)  | ((x & 0xFF000000u) >> 24);
}

static inline uint64_t ks_bswap64(uint64_t x)
{
    return ((uint64_t)ks_bswap32((uint32_t)(x & 0xFFFFFFFFu)) << 32) |
           (uint64_t)ks_bswap32((uint32_t)(x >> 32));
}
#endif

/* ---- host byte order --------------------------------------------------- */

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define KS_HOST_LITTLE_ENDIAN 1
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#  define KS_HOST_BIG_ENDIAN 1
#elif defined(_WIN32)
   /* Every Windows target (x86, x64, ARM, ARM64) is little-endian. */
#  define KS_HOST_LITTLE_ENDIAN 1
#endif
/* Neither defined: the shift-based code below, correct on any host. */

/* ---- loads: big-endian bytes -> host integer --------------------------- */

static inline uint16_t ks_load_be16(const unsigned char *p)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
    uint16_t v;
    memcpy(&v, p, sizeof v);
#  if defined(KS_HOST_LITTLE_ENDIAN)
    v = ks_bswap16(v);
#  endif
    return v;
#else
    return (uint16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
#endif
}

static inline uint32_t ks_load_be32(const unsigned char *p)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
    uint32_t v;
    memcpy(&v, p, sizeof v);
#  if defined(KS_HOST_LITTLE_ENDIAN)
    v = ks_bswap32(v);
#  endif
    return v;
#else
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8)  |  (uint32_t)p[3];
#endif
}

static inline uint64_t ks_load_be64(const unsigned char *p)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
    uint64_t v;
    memcpy(&v, p, sizeof v);
#  if defined(KS_HOST_LITTLE_ENDIAN)
    v = ks_bswap64(v);
#  endif
    return v;
#else
    return ((uint64_t)ks_load_be32(p) << 32) | (uint64_t)ks_load_be32(p + 4);
#endif
}

/* ---- stores: host integer -> big-endian bytes -------------------------- */

static inline void ks_store_be16(unsigned char *p, uint16_t v)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
#  if defined(KS_HOST_LITTLE_ENDIAN)
    v = ks_bswap16(v);
#  endif
    memcpy(p, &v, sizeof v);
#else
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
#endif
}

static inline void ks_store_be32(unsigned char *p, uint32_t v)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
#  if defined(KS_HOST_LITTLE_ENDIAN)
    v = ks_bswap32(v);
#  endif
    memcpy(p, &v, sizeof v);
#else
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
#endif
}

static inline void ks_store_be64(unsigned char *p, uint64_t v)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
#  if defined(KS_HOST_LITTLE_ENDIAN)
    v = ks_bswap64(v);
#  endif
    memcpy(p, &v, sizeof v);
#else
    ks_store_be32(p, (uint32_t)(v >> 32));
    ks_store_be32(p + 4, (uint32_t)v);
#endif
}

#endif /* KS_ENDIAN_H */
