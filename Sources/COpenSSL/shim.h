#ifndef SIBLINGS_COPENSSL_SHIM_H
#define SIBLINGS_COPENSSL_SHIM_H

// libcrypto 3.0 (Debian 12 libssl-dev). Only non-deprecated 3.0 APIs are used, so the Swift build
// stays warning-free under -warnings-as-errors.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/opensslv.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>

/// `OPENSSL_free` is a function-like macro (it passes file and line).
static inline void COpenSSL_free(void *pointer) { OPENSSL_free(pointer); }

/// `EVP_PKEY_KEYPAIR` is a compound macro Swift does not import.
static inline int COpenSSL_EVP_PKEY_KEYPAIR(void) { return EVP_PKEY_KEYPAIR; }
static inline int COpenSSL_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

#endif
