#ifndef SIBLINGS_CZLIB_SHIM_H
#define SIBLINGS_CZLIB_SHIM_H

#include <zlib.h>

/// `inflateInit2` is a function-like macro (it passes the library version and struct size).
static inline int CZlib_inflateInit2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

#endif
