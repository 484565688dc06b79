#ifndef SIBLINGS_CCONSTANTTIME_H
#define SIBLINGS_CCONSTANTTIME_H

#include <stddef.h>

/// Constant-time checking the ctgrind way (valgrind memcheck): secret bytes are marked "undefined",
/// so memcheck reports any branch or memory index that depends on them. Outside valgrind, or where
/// valgrind's headers are absent, these calls do nothing.

/// Marks `length` bytes at `address` as secret.
void siblings_ct_poison(const void *address, size_t length);

/// Marks `length` bytes at `address` as public again (a value the algorithm makes public, such as
/// a rejection-sampling decision, or a result handed to the caller).
void siblings_ct_declassify(const void *address, size_t length);

/// 1 when running under valgrind.
int siblings_ct_running_on_valgrind(void);

#endif
