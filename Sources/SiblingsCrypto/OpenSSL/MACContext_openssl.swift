internal import COpenSSL
import Foundation

/// Owns one `EVP_MAC_CTX` computing HMAC.
final class HMACContext {
    private let context: OpaquePointer

    init(algorithm: HashAlgorithm, key: SymmetricKey) {
        context = Self.mustSucceed(EVP_MAC_CTX_new(OpenSSLAlgorithms.hmac.pointer), "EVP_MAC_CTX_new")
        // A digest name that OpenSSL knows and a key of any length (HMAC hashes long keys) cannot fail.
        let parameters: OpenSSLParameters
        do {
            parameters = try OpenSSLParameters([.utf8("digest", algorithm.openSSLName)])
        } catch {
            fatalError("cannot build HMAC parameters: \(error)")
        }
        key.withUnsafeBytes { buffer in
            withNonNullBase(buffer) { base, count in
                Self.mustSucceed(
                    EVP_MAC_init(context, base.assumingMemoryBound(to: UInt8.self), count, parameters.pointer),
                    "EVP_MAC_init")
            }
        }
    }

    private init(copying other: HMACContext) {
        context = Self.mustSucceed(EVP_MAC_CTX_dup(other.context), "EVP_MAC_CTX_dup")
    }

    func copy() -> HMACContext { HMACContext(copying: self) }

    func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        Self.mustSucceed(
            EVP_MAC_update(context, base.assumingMemoryBound(to: UInt8.self), buffer.count), "EVP_MAC_update")
    }

    /// The MAC written straight into `output` (wiped memory, when the MAC is a key).
    func finalize(into output: UnsafeMutableRawBufferPointer) {
        var written = 0
        Self.mustSucceed(
            EVP_MAC_final(context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, output.count),
            "EVP_MAC_final")
        precondition(written == output.count)
    }

    func finalize(byteCount: Int) -> Data {
        var output = Data(count: byteCount)
        var written = 0
        output.withUnsafeMutableBytes { buffer in
            Self.mustSucceed(
                EVP_MAC_final(context, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, byteCount),
                "EVP_MAC_final")
        }
        precondition(written == byteCount)
        return output
    }

    deinit { EVP_MAC_CTX_free(context) }

    private static func mustSucceed(_ result: Int32, _ function: String) {
        precondition(result == 1, "\(function) failed: \(OpenSSLError.drainQueue())")
    }

    private static func mustSucceed(_ pointer: OpaquePointer?, _ function: String) -> OpaquePointer {
        guard let pointer else { fatalError("\(function) failed: \(OpenSSLError.drainQueue())") }
        return pointer
    }
}

/// The key-derivation functions (`EVP_KDF`): HKDF and scrypt.
enum OpenSSLKDF {
    /// Runs `kdf` with `parameters`, writing `outputByteCount` bytes into fresh secure storage.
    static func derive(
        _ kdf: FetchedAlgorithm, _ name: String, parameters: [OpenSSLParameter], outputByteCount: Int
    ) throws -> SecureBytes {
        let context = try OpenSSLError.check(EVP_KDF_CTX_new(kdf.pointer), "EVP_KDF_CTX_new")
        defer { EVP_KDF_CTX_free(context) }
        let built = try OpenSSLParameters(parameters)
        return try SecureBytes(count: outputByteCount) { buffer in
            try OpenSSLError.check(
                EVP_KDF_derive(
                    context, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), outputByteCount, built.pointer),
                "EVP_KDF_derive(\(name))")
        }
    }
}
