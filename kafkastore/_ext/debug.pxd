# Declaration for csrc/ks_debug.h.
#
# KS_DEBUG is 0 in release builds and 1 when built with KAFKASTORE_DEBUG=1.
# Guard invariant checks with it; in release builds the C compiler sees
# `if (0)` and drops the check:
#
#     from kafkastore._ext.debug cimport KS_DEBUG
#     if KS_DEBUG:
#         assert lo <= hi, (lo, hi)


cdef extern from "ks_debug.h":
    const int KS_DEBUG
