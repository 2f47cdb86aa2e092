/*
 * ks_prefetch.h - a portable read-prefetch hint for kafkastore's kernels.
 *
 * The batch encoder walks a Python list of records whose tuples and bytes
 * objects are scattered over the heap; on a cold cache each record costs
 * three dependent misses. Hinting the next records' objects a few
 * iterations ahead overlaps those misses. A hint never faults, so a wrong
 * or NULL address is harmless.
 *
 * Team-written; no Python.h, every symbol prefixed with ks_.
 */
#ifndef KS_PREFETCH_H
#define KS_PREFETCH_H

#if defined(__GNUC__) || defined(__clang__)
#  define ks_prefetch(p) __builtin_prefetch((const void *)(p), 0, 3)
#else
#  define ks_prefetch(p) ((void)(p))
#endif

#endif /* KS_PREFETCH_H */
