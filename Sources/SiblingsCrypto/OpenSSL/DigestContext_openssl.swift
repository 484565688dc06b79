internal import COpenSSL

/// Owns one `EVP_MD_CTX`.
final class DigestContext {
    private let context: OpaquePointer

    init(_ algorithm: HashAlgorithm) {
        context = Self.newContext()
        Self.mustSucceed(EVP_DigestInit_ex2(context, OpenSSLAlgorithms.digest(algorithm).pointer, nil))
    }

    private init(copying other: DigestContext) {
        context = Self.newContext()
        Self.mustSucceed(EVP_MD_CTX_copy_ex(context, other.context))
    }

    func copy() -> DigestContext { DigestContext(copying: self) }

    func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        Self.mustSucceed(EVP_DigestUpdate(context, base, buffer.count))
    }

    func finalize(into output: UnsafeMutableRawBufferPointer) {
        var length: UInt32 = 0
        precondition(output.count >= Int(EVP_MAX_MD_SIZE))
        Self.mustSucceed(EVP_DigestFinal_ex(context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length))
    }

    deinit { EVP_MD_CTX_free(context) }

    /// One-shot `EVP_Digest`: one context set up and torn down inside OpenSSL.
    static func digest(
        _ algorithm: HashAlgorithm, _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(output.count >= Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        withNonNullBase(input) { base, count in
            mustSucceed(
                EVP_Digest(
                    base, count, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length,
                    OpenSSLAlgorithms.digest(algorithm).pointer, nil))
        }
    }

    /// The Keccak functions OpenSSL computes in one call (its assembly permutation where it has one).
    enum Keccak {
        case sha3_256, sha3_512, shake128, shake256

        var algorithm: FetchedAlgorithm {
            switch self {
            case .sha3_256: return OpenSSLAlgorithms.sha3_256
            case .sha3_512: return OpenSSLAlgorithms.sha3_512
            case .shake128: return OpenSSLAlgorithms.shake128
            case .shake256: return OpenSSLAlgorithms.shake256
            }
        }

        var isXOF: Bool { self == .shake128 || self == .shake256 }
    }

    /// One-shot SHA3-256/512 of `parts` (then `output` is 32 or 64 bytes), or SHAKE128/256 of `parts`
    /// with exactly `output.count` bytes of output (`EVP_DigestFinalXOF`), written straight into
    /// `output`, which may be wiped memory. The context is freed before returning, and OpenSSL cleanses
    /// a freed Keccak state (`OPENSSL_clear_free`), so the secrets a sponge absorbed do not outlive the
    /// call. OpenSSL 3.0 squeezes an XOF once only: incremental squeezing stays in Swift (``Keccak``).
    static func keccak(
        _ function: Keccak, _ parts: UnsafeRawBufferPointer..., into output: UnsafeMutableRawBufferPointer
    ) {
        let context = newContext()
        defer { EVP_MD_CTX_free(context) }
        mustSucceed(EVP_DigestInit_ex2(context, function.algorithm.pointer, nil))
        for part in parts {
            guard let base = part.baseAddress, part.count > 0 else { continue }
            mustSucceed(EVP_DigestUpdate(context, base, part.count))
        }
        let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        if function.isXOF {
            mustSucceed(EVP_DigestFinalXOF(context, out, output.count))
        } else {
            precondition(output.count == (function == .sha3_256 ? 32 : 64), "a SHA-3 digest buffer of the wrong size")
            var length: UInt32 = 0
            mustSucceed(EVP_DigestFinal_ex(context, out, &length))
        }
    }

    private static func newContext() -> OpaquePointer {
        guard let context = EVP_MD_CTX_new() else { fatalError("out of memory: EVP_MD_CTX_new") }
        return context
    }

    /// Hashing with a fetched SHA-2 has no input-dependent failure; a failure here means OpenSSL
    /// itself is broken (out of memory), where CryptoKit traps too.
    private static func mustSucceed(_ result: Int32, function: StaticString = #function) {
        precondition(result == 1, "OpenSSL digest call failed in \(function): \(OpenSSLError.drainQueue())")
    }
}
