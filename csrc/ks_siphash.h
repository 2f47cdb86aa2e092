/*
 * ks_siphash.h - SipHash-2-4 with a 128-bit output, for the log cleaner's offset map.
 *
 * The offset map (kafkastore/_ext/offset_map.pyx) keeps only a 16-byte digest of each
 * record key. Kafka uses MD5 there; kafkastore uses SipHash-2-4-128 under a secret
 * random key instead: it is several times faster than MD5 on short keys, and as a keyed
 * PRF its digests cannot be predicted, so nobody can craft a key that collides with
 * another key's digest (which would make the cleaner drop that key's latest value).
 *
 * Written from the algorithm's description in "SipHash: a fast short-input PRF"
 * (Aumasson and Bernstein, 2012) and its 128-bit-output variant: the message is read
 * as little-endian 64-bit words m_i; the last word holds the remaining 0..7 bytes and
 * (len mod 256) in its top byte. State init v0..v3 = key words xor the four ASCII
 * constants, v1 ^= 0xee for the 128-bit variant; each word is absorbed as v3 ^= m,
 * two SipRounds, v0 ^= m; finalization v2 ^= 0xee, four SipRounds, first half
 * v0^v1^v2^v3; then v1 ^= 0xdd, four SipRounds, second half v0^v1^v2^v3. Each half is
 * written little-endian, so out[0..7] is the first. Checked against the reference
 * vectors (key 00..0f, message 00..n-1) in tests/test_offset_map.py.
 *
 * Loads are memcpy + a byte swap on big-endian hosts (ks_endian.h's host-order
 * detection), so `data` may have any alignment. `data` may be NULL when len is 0:
 * it is then never dereferenced or offset.
 *
 * Team-written; no Python.h, every symbol prefixed with ks_.
 */
#ifndef KS_SIPHASH_H
#define KS_SIPHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ks_endian.h"

/* ---- little-endian 64-bit words ---------------------------------------- */

static inline uint64_t ks_sip_load_le64(const uint8_t *p)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
    uint64_t v;
    memcpy(&v, p, sizeof v);
#  if defined(KS_HOST_BIG_ENDIAN)
    v = ks_bswap64(v);
#  endif
    return v;
#else
    return (uint64_t)p[0]         | ((uint64_t)p[1] << 8)  |
           ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
           ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
#endif
}

static inline void ks_sip_store_le64(uint8_t *p, uint64_t v)
{
#if defined(KS_HOST_LITTLE_ENDIAN) || defined(KS_HOST_BIG_ENDIAN)
#  if defined(KS_HOST_BIG_ENDIAN)
    v = ks_bswap64(v);
#  endif
    memcpy(p, &v, sizeof v);
#else
    int i;
    for (i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

/* ---- the permutation ----------------------------------------------------- */

#define KS_SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

/* One SipRound: two add-rotate-xor half-rounds on (v0, v1) and (v2, v3). */
#define KS_SIP_ROUND(v0, v1, v2, v3)                                    \
    do {                                                                \
        (v0) += (v1); (v1) = KS_SIP_ROTL((v1), 13); (v1) ^= (v0);       \
        (v0) = KS_SIP_ROTL((v0), 32);                                   \
        (v2) += (v3); (v3) = KS_SIP_ROTL((v3), 16); (v3) ^= (v2);       \
        (v0) += (v3); (v3) = KS_SIP_ROTL((v3), 21); (v3) ^= (v0);       \
        (v2) += (v1); (v1) = KS_SIP_ROTL((v1), 17); (v1) ^= (v2);       \
        (v2) = KS_SIP_ROTL((v2), 32);                                   \
    } while (0)

/* ---- SipHash-2-4-128 ----------------------------------------------------- */

/* out[0..15] = SipHash-2-4 with 128-bit output of data[0..len) under key[0..15]. */
static inline void ks_siphash128(const uint8_t key[16], const uint8_t *data, size_t len,
                                 uint8_t out[16])
{
    const uint64_t k0 = ks_sip_load_le64(key);
    const uint64_t k1 = ks_sip_load_le64(key + 8);
    /* "somepseudorandomlygeneratedbytes" as four big-endian words */
    uint64_t v0 = k0 ^ UINT64_C(0x736f6d6570736575);
    uint64_t v1 = k1 ^ UINT64_C(0x646f72616e646f6d) ^ UINT64_C(0xee);
    uint64_t v2 = k0 ^ UINT64_C(0x6c7967656e657261);
    uint64_t v3 = k1 ^ UINT64_C(0x7465646279746573);
    const size_t whole = len - (len & 7);   /* bytes in complete 8-byte words */
    size_t i;
    uint64_t m;

    for (i = 0; i < whole; i += 8) {
        m = ks_sip_load_le64(data + i);
        v3 ^= m;
        KS_SIP_ROUND(v0, v1, v2, v3);
        KS_SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }

    /* last word: the 0..7 remaining bytes, and the length mod 256 in the top byte */
    m = (uint64_t)(len & 0xff) << 56;
    for (i = 0; i < (len & 7); i++)
        m |= (uint64_t)data[whole + i] << (8 * i);
    v3 ^= m;
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    v0 ^= m;

    v2 ^= UINT64_C(0xee);
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    ks_sip_store_le64(out, v0 ^ v1 ^ v2 ^ v3);

    v1 ^= UINT64_C(0xdd);
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    KS_SIP_ROUND(v0, v1, v2, v3);
    ks_sip_store_le64(out + 8, v0 ^ v1 ^ v2 ^ v3);
}

#endif /* KS_SIPHASH_H */
