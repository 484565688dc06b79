#ifndef SIBLINGS_CMALLOC_SHIM_H
#define SIBLINGS_CMALLOC_SHIM_H

// glibc's mallopt(3), which Swift's Glibc module does not include.

#include <malloc.h>

/// Allocations of `bytes` and more are mapped on their own, and unmapped when freed (M_MMAP_THRESHOLD, which also
/// stops glibc from raising the threshold as large blocks are freed); mallopt's result (1 on success).
static inline int CMalloc_mapAllocationsFrom(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

#endif
