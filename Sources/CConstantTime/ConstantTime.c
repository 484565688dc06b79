#include "CConstantTime.h"

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define SIBLINGS_HAVE_VALGRIND 1
#endif
#endif

void siblings_ct_poison(const void *address, size_t length) {
#ifdef SIBLINGS_HAVE_VALGRIND
    VALGRIND_MAKE_MEM_UNDEFINED(address, length);
#else
    (void)address;
    (void)length;
#endif
}

void siblings_ct_declassify(const void *address, size_t length) {
#ifdef SIBLINGS_HAVE_VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(address, length);
#else
    (void)address;
    (void)length;
#endif
}

int siblings_ct_running_on_valgrind(void) {
#ifdef SIBLINGS_HAVE_VALGRIND
    return RUNNING_ON_VALGRIND ? 1 : 0;
#else
    return 0;
#endif
}
