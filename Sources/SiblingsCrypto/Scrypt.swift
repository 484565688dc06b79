import Foundation

/// scrypt (RFC 7914), on OpenSSL's `EVP_KDF` "SCRYPT".
public enum Scrypt {
    /// The memory scrypt needs for these parameters: 128 · r · (N + p) bytes, plus OpenSSL's working space.
    public static func memoryRequired(cost n: UInt64, blockSize r: UInt32, parallelism p: UInt32) -> UInt64 {
        128 * UInt64(r) * (n + UInt64(p) + 2) + 4096
    }

    /// Derives `outputByteCount` bytes from `password` and `salt`.
    ///
    /// - Parameters:
    ///   - n: the CPU/memory cost, a power of two greater than 1 (age writes it as log2, "logN").
    ///   - r: the block size (8 in age).
    ///   - p: the parallelisation (1 in age).
    ///   - memoryLimit: refuse parameters that would need more memory than this many bytes (default 2 GiB),
    ///     so a hostile file cannot make a reader allocate without bound.
    public static func deriveKey(
        password: some DataProtocol, salt: some DataProtocol, cost n: UInt64, blockSize r: UInt32 = 8,
        parallelism p: UInt32 = 1, outputByteCount: Int, memoryLimit: UInt64 = 2 << 30
    ) throws -> SymmetricKey {
        guard n > 1, n & (n - 1) == 0 else {
            throw CryptoError(.invalidParameter, "scrypt's cost N must be a power of two greater than 1, got \(n)")
        }
        guard r > 0, p > 0, UInt64(r) * UInt64(p) < 1 << 30 else {
            throw CryptoError(
                .invalidParameter, "scrypt needs r ≥ 1, p ≥ 1 and r·p < 2^30 (RFC 7914), got r=\(r) p=\(p)")
        }
        guard n < UInt64(1) << (16 * UInt64(r)) || r >= 4 else {
            throw CryptoError(
                .invalidParameter, "scrypt's N must be less than 2^(128·r/8) (RFC 7914), got N=\(n) r=\(r)")
        }
        guard outputByteCount > 0 else {
            throw CryptoError(.invalidParameter, "scrypt output must be at least 1 byte")
        }
        let memory = memoryRequired(cost: n, blockSize: r, parallelism: p)
        guard memory <= memoryLimit else {
            throw CryptoError(
                .invalidParameter,
                "scrypt with N=\(n) r=\(r) p=\(p) needs \(memory >> 20) MiB, over the limit of \(memoryLimit >> 20) MiB; "
                    + "raise memoryLimit only for parameters you chose yourself")
        }
        return SymmetricKey(
            secureBytes: try OpenSSLKDF.derive(
                OpenSSLAlgorithms.scrypt, "scrypt",
                parameters: [
                    .octets("pass", Data(password)), .octets("salt", Data(salt)), .uint64("n", n), .uint32("r", r),
                    .uint32("p", p), .uint64("maxmem_bytes", memory + (1 << 20)),
                ],
                outputByteCount: outputByteCount))
    }
}
