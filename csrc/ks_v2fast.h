/*
 * ks_v2fast.h - the fast path of the columnar decoder for magic 2 records.
 *
 * decode_columns spends most of its time parsing records of uncompressed
 * batches into column arrays. ks_v2_fast_records() does that for a run of
 * ordinary records in one tight loop: positions are pointers, varints of one
 * to three bytes are decoded inline, the column pointers live in registers,
 * and keys and values are copied in 32-byte chunks where the bytes around
 * them allow it.
 *
 * It is an accelerator, not a second record parser: THE v2 record parser
 * is read_record in kafkastore/_ext/default_record.pxd (Kafka's
 * DefaultRecord.readFrom rules), which the reader, this decoder's checked
 * path and the log cleaner's kernel all use. This loop never raises and
 * never decides that bytes are corrupt. It takes only records it is sure of
 * under that parser's rules and stops in front of the first record it does
 * not take - anything malformed or unusual: a varint that is truncated,
 * longer than three bytes or runs past the record, a length past the record
 * end, a record body under six bytes, a negative header count or header key
 * length, a record whose fields do not end exactly at its declared end - and
 * reports how many records it consumed. The caller parses that record with
 * the one parser (parse_record in record_batch.pyx's default_record.pxi),
 * which either handles it or raises the precise error, and then calls back
 * in. So both the results and the errors are exactly the parser's.
 *
 * Lengths follow the parser's one rule, so the two cannot disagree on a
 * record this loop takes: any negative key, value or header value length
 * is null (Kafka's rule; a key length of -2 is a null key, not an error);
 * a negative header key length or header count is never taken here (the
 * parser rejects it). A change to the rule in default_record.pxd must be
 * made here too, or made a reason to stop; tests/test_parser_agreement.py
 * checks that decode_columns accepts and rejects what the reader does.
 *
 * Bounds: every byte read lies in [data, data + end) and is checked before
 * it is read: each varint byte against the record end (itself checked
 * against the records end), each key, value and header length against the
 * bytes left in the record. A chunked copy may read up to 31 bytes past a
 * key or value, and write up to 31 bytes past it, only when at least that
 * many bytes are left before the end of the records section and of the
 * destination buffer; otherwise it is a plain memcpy.
 *
 * Team-written; no Python.h, every symbol prefixed with ks_.
 */
#ifndef KS_V2FAST_H
#define KS_V2FAST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ks_prefetch.h"

#if defined(__GNUC__) || defined(__clang__)
#  define KS_LIKELY(x) __builtin_expect(!!(x), 1)
#  define KS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define KS_LIKELY(x) (x)
#  define KS_UNLIKELY(x) (x)
#endif

/* Column arrays of decode_columns and how far they are filled. */
typedef struct {
    int64_t *offset;
    int64_t *timestamp;
    int32_t *header_count;
    uint8_t *key_null;
    uint8_t *value_null;
    int64_t *key_offsets;      /* row i sets entry i + 1 */
    int64_t *value_offsets;
    uint8_t *key_data;
    uint8_t *value_data;
    ptrdiff_t key_cap;         /* bytes allocated behind key_data / value_data */
    ptrdiff_t value_cap;
    ptrdiff_t key_used;        /* bytes written so far */
    ptrdiff_t value_used;
    ptrdiff_t row;             /* next row to write */
    /* the view layout (ks_v2_fast_views): no copy, each key and value is a
       (start, length) pair into the data buffer the records lie in */
    int64_t *key_starts;       /* row i sets entry i (ks_v2_fast_views) */
    int64_t *value_starts;
    int32_t *key_starts32;     /* the same, for a data buffer below 2 GiB */
    int32_t *value_starts32;   /* (ks_v2_fast_views32): half the bytes written */
    int32_t *key_lengths;      /* 0 for a null */
    int32_t *value_lengths;
    ptrdiff_t base;            /* position of data[0] in that buffer */
} ks_cols;

/* The batch whose records are being decoded, and the next one to prefetch. */
typedef struct {
    int64_t base_offset;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int log_append_time;       /* every timestamp is max_timestamp */
    const unsigned char *ahead;   /* next entry's bytes, pulled into cache meanwhile */
    ptrdiff_t ahead_len;
    ptrdiff_t ahead_pos;
    ptrdiff_t ahead_step;      /* bytes prefetched per record, a multiple of 64 */
} ks_v2batch;

/* Unsigned varint of one to three bytes at *pp, every byte below lim.
   Returns 1 and advances *pp; 0 (nothing consumed) otherwise. */
static inline int ks_v2_uvarint3(const unsigned char **pp, const unsigned char *lim,
                                 uint32_t *out)
{
    const unsigned char *p = *pp;
    uint32_t b0, b1, b2;
    if (KS_UNLIKELY(p >= lim))
        return 0;
    b0 = p[0];
    if (KS_LIKELY(b0 < 0x80)) {
        *out = b0;
        *pp = p + 1;
        return 1;
    }
    if (lim - p < 2)
        return 0;
    b1 = p[1];
    if (b1 < 0x80) {
        *out = (b0 & 0x7F) | (b1 << 7);
        *pp = p + 2;
        return 1;
    }
    if (lim - p < 3)
        return 0;
    b2 = p[2];
    if (b2 < 0x80) {
        *out = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14);
        *pp = p + 3;
        return 1;
    }
    return 0;
}

/* Zig-zag decode of a value below 2**21 (what ks_v2_uvarint3 returns). */
static inline int32_t ks_v2_zigzag(uint32_t v)
{
    return (int32_t)((v >> 1) ^ (0u - (v & 1u)));
}

/* Copy n bytes; in 32-byte chunks when 32 more bytes than n remain readable
   before slim and writable before dlim, else with memcpy. */
static inline void ks_v2_copy(unsigned char *d, const unsigned char *dlim,
                              const unsigned char *s, const unsigned char *slim,
                              ptrdiff_t n)
{
    if (KS_LIKELY(n <= slim - s - 32 && n <= dlim - d - 32)) {
        ptrdiff_t o = 0;
        do {
            memcpy(d + o, s + o, 32);
            o += 32;
        } while (o < n);
    } else {
        memcpy(d, s, (size_t)n);
    }
}

#if defined(__GNUC__) || defined(__clang__)
#  define KS_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#  define KS_ALWAYS_INLINE static inline
#endif

/* The one loop of every layout; ``views`` (0: copy, 1: int64 starts, 2: int32
   starts) is a constant in each caller below, so the compiler makes one loop
   per layout without the test. */
KS_ALWAYS_INLINE ptrdiff_t ks_v2_records(const unsigned char *data, ptrdiff_t *pos,
                                         ptrdiff_t end, ptrdiff_t max_records,
                                         ks_v2batch *b, ks_cols *c, const int views)
{
    const unsigned char *p = data + *pos;
    const unsigned char *const lim = data + end;
    int64_t *const offset = c->offset;
    int64_t *const timestamp = c->timestamp;
    int32_t *const header_count = c->header_count;
    uint8_t *const key_null = c->key_null;
    uint8_t *const value_null = c->value_null;
    int64_t *const key_offsets = c->key_offsets;
    int64_t *const value_offsets = c->value_offsets;
    uint8_t *const key_data = c->key_data;
    uint8_t *const value_data = c->value_data;
    const unsigned char *const key_lim = key_data + c->key_cap;
    const unsigned char *const value_lim = value_data + c->value_cap;
    const uint64_t base_offset = (uint64_t)b->base_offset;
    const uint64_t base_ts = (uint64_t)b->base_timestamp;
    const int64_t max_ts = b->max_timestamp;
    const int log_append = b->log_append_time;
    const unsigned char *const ahead = b->ahead;
    const ptrdiff_t ahead_len = b->ahead_len, ahead_step = b->ahead_step;
    ptrdiff_t ahead_pos = b->ahead_pos;
    ptrdiff_t key_used = c->key_used, value_used = c->value_used;
    ptrdiff_t row = c->row, k, o;
    int64_t *const key_starts = c->key_starts;
    int64_t *const value_starts = c->value_starts;
    int32_t *const key_starts32 = c->key_starts32;
    int32_t *const value_starts32 = c->value_starts32;
    int32_t *const key_lengths = c->key_lengths;
    int32_t *const value_lengths = c->value_lengths;
    const int64_t base = (int64_t)c->base;

    for (k = 0; k < max_records; k++) {
        const unsigned char *r = p, *rend, *key, *value;
        uint32_t u;
        int32_t length, offset_delta, key_len, value_len, count, h, n;
        int64_t ts_delta;

        if (ahead_pos < ahead_len) {
            for (o = 0; o < ahead_step; o += 64)
                ks_prefetch(ahead + ahead_pos + o);
            ahead_pos += ahead_step;
        }
        if (!ks_v2_uvarint3(&r, lim, &u))
            break;
        length = ks_v2_zigzag(u);
        if (KS_UNLIKELY(length < 6 || length > lim - r))
            break;
        rend = r + length;
        r += 1;  /* attributes: unused */
        if (!ks_v2_uvarint3(&r, rend, &u))
            break;
        ts_delta = ks_v2_zigzag(u);
        if (!ks_v2_uvarint3(&r, rend, &u))
            break;
        offset_delta = ks_v2_zigzag(u);
        if (!ks_v2_uvarint3(&r, rend, &u))
            break;
        key_len = ks_v2_zigzag(u);
        key = r;
        if (key_len >= 0) {
            if (KS_UNLIKELY(key_len > rend - r))
                break;
            r += key_len;
        }
        if (!ks_v2_uvarint3(&r, rend, &u))
            break;
        value_len = ks_v2_zigzag(u);
        value = r;
        if (value_len >= 0) {
            if (KS_UNLIKELY(value_len > rend - r))
                break;
            r += value_len;
        }
        if (!ks_v2_uvarint3(&r, rend, &u))
            break;
        count = ks_v2_zigzag(u);
        if (count != 0) {
            /* each header takes at least two bytes */
            if (count < 0 || count > (rend - r) / 2)
                break;
            for (h = 0; h < count; h++) {
                if (!ks_v2_uvarint3(&r, rend, &u))
                    break;
                n = ks_v2_zigzag(u);
                if (n < 0 || n > rend - r)
                    break;
                r += n;
                if (!ks_v2_uvarint3(&r, rend, &u))
                    break;
                n = ks_v2_zigzag(u);
                if (n >= 0) {
                    if (n > rend - r)
                        break;
                    r += n;
                }
            }
            if (h != count)
                break;
        }
        if (KS_UNLIKELY(r != rend))
            break;

        /* the record is well formed: fill its row */
        offset[row] = (int64_t)(base_offset + (uint64_t)(int64_t)offset_delta);
        timestamp[row] = log_append ? max_ts : (int64_t)(base_ts + (uint64_t)ts_delta);
        header_count[row] = count;
        if (views) {
            /* positions only: the bytes stay where they are (a null: length 0) */
            if (views == 2)
                key_starts32[row] = (int32_t)(base + (key - data));
            else
                key_starts[row] = base + (key - data);
            key_lengths[row] = key_len >= 0 ? key_len : 0;
            key_null[row] = key_len < 0;
            if (views == 2)
                value_starts32[row] = (int32_t)(base + (value - data));
            else
                value_starts[row] = base + (value - data);
            value_lengths[row] = value_len >= 0 ? value_len : 0;
            value_null[row] = value_len < 0;
            row++;
            p = rend;
            continue;
        }
        if (key_len >= 0) {
            ks_v2_copy(key_data + key_used, key_lim, key, lim, key_len);
            key_used += key_len;
            key_null[row] = 0;
        } else {
            key_null[row] = 1;
        }
        if (value_len >= 0) {
            ks_v2_copy(value_data + value_used, value_lim, value, lim, value_len);
            value_used += value_len;
            value_null[row] = 0;
        } else {
            value_null[row] = 1;
        }
        row++;
        key_offsets[row] = key_used;
        value_offsets[row] = value_used;
        p = rend;
    }
    *pos = p - data;
    b->ahead_pos = ahead_pos;
    c->key_used = key_used;
    c->value_used = value_used;
    c->row = row;
    return k;
}

/* Decode up to max_records ordinary records from data[*pos:end) into c,
   copying keys and values into key_data / value_data.
   Returns how many; *pos and c advance past them (see the top of the file).
   The caller guarantees room for max_records rows, and for the keys and
   values, which are bytes of data[0:end), in key_data / value_data. */
static ptrdiff_t ks_v2_fast_records(const unsigned char *data, ptrdiff_t *pos, ptrdiff_t end,
                                    ptrdiff_t max_records, ks_v2batch *b, ks_cols *c)
{
    return ks_v2_records(data, pos, end, max_records, b, c, 0);
}

/* The same, in the view layout: each key and value becomes its position
   (c->base + its index in data) and length, nothing is copied; key_data,
   value_data, key_offsets and value_offsets are not touched. */
static ptrdiff_t ks_v2_fast_views(const unsigned char *data, ptrdiff_t *pos, ptrdiff_t end,
                                  ptrdiff_t max_records, ks_v2batch *b, ks_cols *c)
{
    return ks_v2_records(data, pos, end, max_records, b, c, 1);
}

/* ks_v2_fast_views with int32 starts (key_starts32 / value_starts32): the caller
   guarantees every position fits (a data buffer below 2 GiB). */
static ptrdiff_t ks_v2_fast_views32(const unsigned char *data, ptrdiff_t *pos,
                                    ptrdiff_t end, ptrdiff_t max_records, ks_v2batch *b,
                                    ks_cols *c)
{
    return ks_v2_records(data, pos, end, max_records, b, c, 2);
}

#endif /* KS_V2FAST_H */
