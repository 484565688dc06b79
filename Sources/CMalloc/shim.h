#ifndef SIBLINGS_CMALLOC_SHIM_H
#define SIBLINGS_CMALLOC_SHIM_H

// glibc's mallopt(3), which Swift's Glibc module does not include.

#include <malloc.h>

/// Allocations of `bytes` and more are mapped on their own, and unmapped when freed (M_MMAP_THRESHOLD, which also
/// stops glibc from raising the threshold as large blocks are freed); mallopt's result (1 on success).
static inline int CMalloc_mapAllocationsFrom(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

/// At most `count` malloc arenas (M_ARENA_MAX): glibc otherwise gives threads arenas of their own, up to eight per
/// core, each keeping what was freed in it; mallopt's result (1 on success).
static inline int CMalloc_limitArenas(int count) { return mallopt(M_ARENA_MAX, count); }

/// Free memory at the top of the heap is given back to the system only past `bytes` (M_TRIM_THRESHOLD): glibc's
/// default, 128 KiB once M_MMAP_THRESHOLD is set, hands back and faults in again the buffers a stream reuses;
/// mallopt's result (1 on success).
static inline int CMalloc_keepFreedUpTo(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }

#endif
