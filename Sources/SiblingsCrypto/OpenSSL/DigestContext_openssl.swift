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
