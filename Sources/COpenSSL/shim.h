#ifndef SIBLINGS_COPENSSL_SHIM_H
#define SIBLINGS_COPENSSL_SHIM_H

// libcrypto and libssl 3.0 (Debian 12 libssl-dev). Only non-deprecated 3.0 APIs are used, so the Swift build
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
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

/// `OPENSSL_free` is a function-like macro (it passes file and line).
static inline void COpenSSL_free(void *pointer) { OPENSSL_free(pointer); }

/// `EVP_PKEY_KEYPAIR` is a compound macro Swift does not import.
static inline int COpenSSL_EVP_PKEY_KEYPAIR(void) { return EVP_PKEY_KEYPAIR; }
static inline int COpenSSL_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

// TLS (SiblingsCrypto's TLSContext and TLSEngine): the SSL_ctrl macros Swift does not import.
static inline int COpenSSL_SSL_CTX_set_min_proto_version(SSL_CTX *context, int version) {
    return (int)SSL_CTX_set_min_proto_version(context, version);
}
static inline int COpenSSL_SSL_CTX_set1_groups_list(SSL_CTX *context, const char *list) {
    return (int)SSL_CTX_set1_groups_list(context, list);
}
static inline int COpenSSL_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
static inline int COpenSSL_SSL_get_negotiated_group(SSL *ssl) { return (int)SSL_get_negotiated_group(ssl); }
static inline int COpenSSL_TLS1_2_VERSION(void) { return TLS1_2_VERSION; }
static inline int COpenSSL_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *COpenSSL_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}
static inline size_t COpenSSL_BIO_pending(BIO *bio) { return BIO_ctrl_pending(bio); }
/// SSL_MODE_RELEASE_BUFFERS: an idle connection gives its record buffers back (about 34 KiB).
static inline long COpenSSL_SSL_CTX_release_buffers(SSL_CTX *context) {
    return SSL_CTX_set_mode(context, SSL_MODE_RELEASE_BUFFERS);
}
/// No server-side session cache: TLS 1.3 resumes from stateless tickets, and a cache would grow with every client.
static inline long COpenSSL_SSL_CTX_no_session_cache(SSL_CTX *context) {
    return SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
}

#endif
