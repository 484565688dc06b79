#ifndef SIBLINGS_CSODIUM_SHIM_H
#define SIBLINGS_CSODIUM_SHIM_H

// libsodium 1.0.18 (Debian 12 libsodium-dev): only the ristretto255 group and scalar functions, plus
// sodium_init, sodium_memzero and sodium_is_zero. The PrivacyPass module is the only user; it does the
// hashing (SHA-512, expand_message_xmd) on SiblingsCrypto.
#include <sodium/core.h>
#include <sodium/crypto_core_ristretto255.h>
#include <sodium/crypto_scalarmult_ristretto255.h>
#include <sodium/utils.h>

#endif
