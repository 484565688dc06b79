internal import COpenSSL
import Foundation

/// Owns one `EVP_PKEY`: an X25519, Ed25519 or P-256 key. Immutable once made; OpenSSL allows
/// concurrent use of one `EVP_PKEY` by operations that each create their own context, which is all
/// this class does.
final class PKey: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(owning pointer: OpaquePointer) { self.pointer = pointer }

    enum RawType {
        case x25519, ed25519

        var nid: Int32 {
            switch self {
            case .x25519: return EVP_PKEY_X25519
            case .ed25519: return EVP_PKEY_ED25519
            }
        }
    }

    /// A key from a 32-byte raw private key (an X25519 scalar or an Ed25519 seed).
    static func rawPrivate(_ type: RawType, _ bytes: SecureBytes) throws -> PKey {
        try bytes.withUnsafeBytes { buffer in
            PKey(
                owning: try OpenSSLError.check(
                    EVP_PKEY_new_raw_private_key(
                        type.nid, nil, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count),
                    "EVP_PKEY_new_raw_private_key"))
        }
    }

    /// A key from a 32-byte raw public key.
    static func rawPublic(_ type: RawType, _ bytes: Data) throws -> PKey {
        try bytes.withUnsafeBytes { buffer in
            PKey(
                owning: try OpenSSLError.check(
                    EVP_PKEY_new_raw_public_key(
                        type.nid, nil, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count),
                    "EVP_PKEY_new_raw_public_key"))
        }
    }

    func rawPublicKey() throws -> Data {
        var length = 0
        try OpenSSLError.check(EVP_PKEY_get_raw_public_key(pointer, nil, &length), "EVP_PKEY_get_raw_public_key")
        var out = Data(count: length)
        try out.withUnsafeMutableBytes { buffer in
            try OpenSSLError.check(
                EVP_PKEY_get_raw_public_key(pointer, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &length),
                "EVP_PKEY_get_raw_public_key")
        }
        return out
    }

    /// X25519 (RFC 7748): the shared secret with `peer`. Throws
    /// ``CryptoError/Code/invalidSharedSecret`` when it is all zeros (a low-order peer key), which
    /// OpenSSL refuses to return.
    func deriveX25519(with peer: PKey) throws -> SecureBytes {
        let context = try OpenSSLError.check(
            EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil), "EVP_PKEY_CTX_new_from_pkey")
        defer { EVP_PKEY_CTX_free(context) }
        try OpenSSLError.check(EVP_PKEY_derive_init(context), "EVP_PKEY_derive_init")
        try OpenSSLError.check(EVP_PKEY_derive_set_peer(context, peer.pointer), "EVP_PKEY_derive_set_peer")
        return try SecureBytes(count: 32) { buffer in
            var length = 32
            guard EVP_PKEY_derive(context, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &length) == 1 else {
                OpenSSLError.clearQueue()
                throw CryptoError(
                    .invalidSharedSecret,
                    "X25519 produced the all-zero shared secret: the peer's public key is a low-order point")
            }
            precondition(length == 32)
        }
    }

    /// One `EVP_MD_CTX` per direction, initialised with this key once and reused for every Ed25519
    /// signature or verification: OpenSSL 3.0's `EVP_DigestSignInit` costs about a fifth of an
    /// Ed25519 signature, and a one-shot `EVP_DigestSign`/`EVP_DigestVerify` leaves the context ready for
    /// the next message. A call that finds the context busy (another thread) uses a fresh one.
    private let reusableSigner = ReusableContext()
    private let reusableVerifier = ReusableContext()

    deinit { EVP_PKEY_free(pointer) }

    /// A one-shot signature (`EVP_DigestSign`); `digest` nil for Ed25519, which hashes internally.
    func sign(digest: FetchedAlgorithm?, message: some DataProtocol) throws -> Data {
        try withContiguousBytes(message) { base, count in
            try withContext(signing: true, digest: digest) { context in
                var length = 0
                try OpenSSLError.check(EVP_DigestSign(context, nil, &length, base, count), "EVP_DigestSign (size)")
                var signature = Data(count: length)
                try signature.withUnsafeMutableBytes { buffer in
                    try OpenSSLError.check(
                        EVP_DigestSign(
                            context, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, base, count),
                        "EVP_DigestSign")
                }
                return signature.prefix(length)
            }
        }
    }

    /// Whether `signature` verifies (`EVP_DigestVerify` returned 1). Any other result, including an
    /// error about a malformed signature, is a plain `false`.
    func verify(digest: FetchedAlgorithm?, signature: Data, message: some DataProtocol) -> Bool {
        defer { OpenSSLError.clearQueue() }
        return withContiguousBytes(message) { base, count in
            signature.withUnsafeBytes { sig in
                withNonNullBase(UnsafeRawBufferPointer(sig)) { sigBase, sigCount in
                    (try? withContext(signing: false, digest: digest) { context in
                        EVP_DigestVerify(context, sigBase.assumingMemoryBound(to: UInt8.self), sigCount, base, count)
                            == 1
                    }) ?? false
                }
            }
        }
    }

    /// Runs `body` with a signing or verifying context for this key: the reusable one for Ed25519
    /// (`digest` nil) when it is free, otherwise a fresh one.
    private func withContext<R>(
        signing: Bool, digest: FetchedAlgorithm?, _ body: (OpaquePointer) throws -> R
    ) throws -> R {
        if digest == nil {
            let reusable = signing ? reusableSigner : reusableVerifier
            if reusable.lock.try() {
                defer { reusable.lock.unlock() }
                let context = try reusable.context ?? newContext(signing: signing, digest: nil)
                reusable.context = context
                do {
                    return try body(context)
                } catch {
                    // A context that failed mid-operation is not trusted with the next message.
                    EVP_MD_CTX_free(context)
                    reusable.context = nil
                    throw error
                }
            }
        }
        let context = try newContext(signing: signing, digest: digest)
        defer { EVP_MD_CTX_free(context) }
        return try body(context)
    }

    private func newContext(signing: Bool, digest: FetchedAlgorithm?) throws -> OpaquePointer {
        let context = try OpenSSLError.check(EVP_MD_CTX_new(), "EVP_MD_CTX_new")
        let name = digest.map { EVP_MD_get0_name($0.pointer) } ?? nil
        let result =
            signing
            ? EVP_DigestSignInit_ex(context, nil, name, nil, nil, pointer, nil)
            : EVP_DigestVerifyInit_ex(context, nil, name, nil, nil, pointer, nil)
        guard result == 1 else {
            EVP_MD_CTX_free(context)
            throw OpenSSLError.failure(signing ? "EVP_DigestSignInit_ex" : "EVP_DigestVerifyInit_ex")
        }
        return context
    }

    /// An EC key on P-256 from its uncompressed public point and, for a private key, its scalar.
    static func p256(uncompressedPoint: Data, privateScalar: Data?) throws -> PKey {
        var parameters: [OpenSSLParameter] = [
            .utf8("group", "prime256v1"), .octets("pub", uncompressedPoint),
        ]
        if let privateScalar { parameters.append(.bignum("priv", privateScalar)) }
        let built = try OpenSSLParameters(parameters)
        let context = try OpenSSLError.check(EVP_PKEY_CTX_new_from_name(nil, "EC", nil), "EVP_PKEY_CTX_new_from_name")
        defer { EVP_PKEY_CTX_free(context) }
        try OpenSSLError.check(EVP_PKEY_fromdata_init(context), "EVP_PKEY_fromdata_init")
        var key: OpaquePointer?
        let selection = privateScalar == nil ? COpenSSL_EVP_PKEY_PUBLIC_KEY() : COpenSSL_EVP_PKEY_KEYPAIR()
        try OpenSSLError.check(EVP_PKEY_fromdata(context, &key, selection, built.pointer), "EVP_PKEY_fromdata")
        return PKey(owning: try OpenSSLError.check(key, "EVP_PKEY_fromdata"))
    }
}

/// A cached `EVP_MD_CTX` and the lock that gives one caller at a time the use of it.
final class ReusableContext: @unchecked Sendable {
    // @unchecked: `context` is only read or written while `lock` is held.
    let lock = NSLock()
    var context: OpaquePointer?

    deinit { context.map { EVP_MD_CTX_free($0) } }
}

/// P-256 group arithmetic for key validation and public-key derivation (`EC_GROUP`, `EC_POINT`).
final class P256Group: @unchecked Sendable {
    // @unchecked: the group is never modified after creation; OpenSSL's const EC_GROUP operations
    // are safe to run concurrently.
    static let shared = P256Group()

    private let group: OpaquePointer

    private init() {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            fatalError("OpenSSL has no P-256 group: \(OpenSSLError.drainQueue())")
        }
        self.group = group
    }

    /// Whether `scalar` (32 big-endian bytes) is in [1, n − 1].
    func isValidPrivateScalar(_ scalar: Data) throws -> Bool {
        let number = try BigNumber(bigEndian: scalar)
        guard let order = EC_GROUP_get0_order(group) else { throw OpenSSLError.failure("EC_GROUP_get0_order") }
        return BN_is_zero(number.pointer) == 0 && BN_cmp(number.pointer, order) < 0
    }

    /// The uncompressed encoding of `scalar` × G.
    func publicPoint(forPrivateScalar scalar: Data) throws -> Data {
        let number = try BigNumber(bigEndian: scalar)
        let point = try OpenSSLError.check(EC_POINT_new(group), "EC_POINT_new")
        defer { EC_POINT_free(point) }
        try OpenSSLError.check(EC_POINT_mul(group, point, number.pointer, nil, nil, nil), "EC_POINT_mul")
        return try encode(point, form: POINT_CONVERSION_UNCOMPRESSED, byteCount: 65)
    }

    /// Decodes an X9.62 point (compressed `02/03 ‖ x` or uncompressed `04 ‖ x ‖ y`), checks that it is on
    /// the curve and not the identity, and returns its uncompressed encoding.
    func uncompressed(_ encoded: Data) throws -> Data {
        let point = try OpenSSLError.check(EC_POINT_new(group), "EC_POINT_new")
        defer { EC_POINT_free(point) }
        let decoded = encoded.withUnsafeBytes { buffer in
            EC_POINT_oct2point(group, point, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count, nil)
        }
        guard decoded == 1, EC_POINT_is_at_infinity(group, point) == 0 else {
            OpenSSLError.clearQueue()
            throw CryptoError(.invalidEncoding, "the bytes are not a point on P-256")
        }
        return try encode(point, form: POINT_CONVERSION_UNCOMPRESSED, byteCount: 65)
    }

    /// The compressed encoding (`02/03 ‖ x`) of an uncompressed point already validated.
    func compressed(_ uncompressed: Data) throws -> Data {
        let point = try OpenSSLError.check(EC_POINT_new(group), "EC_POINT_new")
        defer { EC_POINT_free(point) }
        try uncompressed.withUnsafeBytes { buffer in
            try OpenSSLError.check(
                EC_POINT_oct2point(
                    group, point, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count, nil),
                "EC_POINT_oct2point")
        }
        return try encode(point, form: POINT_CONVERSION_COMPRESSED, byteCount: 33)
    }

    private func encode(_ point: OpaquePointer, form: point_conversion_form_t, byteCount: Int) throws -> Data {
        var out = Data(count: byteCount)
        let written = out.withUnsafeMutableBytes { buffer in
            EC_POINT_point2oct(
                group, point, form, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), byteCount, nil)
        }
        guard written == byteCount else { throw OpenSSLError.failure("EC_POINT_point2oct") }
        return out
    }
}

/// ECDSA signature encodings (`ECDSA_SIG`): DER (X9.62 / RFC 3279) and raw `r ‖ s`.
enum ECDSASignatureCoding {
    /// Parses strict DER and returns `r ‖ s` (32 bytes each). Non-canonical DER (what OpenSSL would
    /// re-encode differently) is refused, as OpenSSL's own verifier does.
    static func raw(fromDER der: Data) throws -> Data {
        let signature: OpaquePointer? = der.withUnsafeBytes { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else {
            OpenSSLError.clearQueue()
            throw CryptoError(.invalidEncoding, "the bytes are not a DER ECDSA signature (SEQUENCE of two INTEGERs)")
        }
        defer { ECDSA_SIG_free(signature) }
        guard try encodeDER(signature) == der else {
            throw CryptoError(.invalidEncoding, "the DER ECDSA signature is not canonical (extra bytes or padding)")
        }
        do {
            return try BigNumber.bigEndian(ECDSA_SIG_get0_r(signature), byteCount: 32)
                + BigNumber.bigEndian(ECDSA_SIG_get0_s(signature), byteCount: 32)
        } catch {
            throw CryptoError(.invalidEncoding, "an ECDSA P-256 signature's r and s must each fit in 32 bytes")
        }
    }

    /// DER for `r ‖ s` (64 bytes).
    static func der(fromRaw raw: Data) throws -> Data {
        precondition(raw.count == 64)
        let signature = try OpenSSLError.check(ECDSA_SIG_new(), "ECDSA_SIG_new")
        defer { ECDSA_SIG_free(signature) }
        let r = try BigNumber(bigEndian: raw.prefix(32))
        let s = try BigNumber(bigEndian: raw.suffix(32))
        guard let rCopy = BN_dup(r.pointer), let sCopy = BN_dup(s.pointer) else { throw OpenSSLError.failure("BN_dup") }
        guard ECDSA_SIG_set0(signature, rCopy, sCopy) == 1 else {
            BN_free(rCopy)
            BN_free(sCopy)
            throw OpenSSLError.failure("ECDSA_SIG_set0")
        }
        return try encodeDER(signature)
    }

    private static func encodeDER(_ signature: OpaquePointer) throws -> Data {
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { throw OpenSSLError.failure("i2d_ECDSA_SIG") }
        var out = Data(count: Int(length))
        let written = out.withUnsafeMutableBytes { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        guard written == length else { throw OpenSSLError.failure("i2d_ECDSA_SIG") }
        return out
    }
}
