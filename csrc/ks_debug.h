/*
 * ks_debug.h - compile-time debug switch for kafkastore kernels.
 *
 * KS_DEBUG is 0 unless the build defines it (KAFKASTORE_DEBUG=1 in setup.py
 * passes -DKS_DEBUG=1). Kernels guard expensive invariant checks with
 * `if KS_DEBUG:` (declared in kafkastore/_ext/debug.pxd); in a release build
 * the C compiler sees `if (0)` and removes the check entirely.
 */
#ifndef KS_DEBUG_H
#define KS_DEBUG_H

#ifndef KS_DEBUG
#  define KS_DEBUG 0
#endif

#endif /* KS_DEBUG_H */
