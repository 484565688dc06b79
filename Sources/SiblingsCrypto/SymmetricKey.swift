import Foundation

/// A symmetric key: bytes that are wiped from memory when the last copy of the key goes away.
///
/// The same shape as CryptoKit's `SymmetricKey`.
public struct SymmetricKey: Sendable, ContiguousBytes {
    let bytes: SecureBytes
    /// Cipher contexts already keyed with these bytes (see ``KeyedContexts``).
    let contexts = KeyedContexts()

    /// A fresh random key of `size` bits from the system CSPRNG.
    public init(size: SymmetricKeySize) {
        bytes = SecureBytes(count: size.bitCount / 8) { SecureRandom.fill($0) }
    }

    /// A key holding a copy of `data`.
    public init(data: some DataProtocol) {
        bytes = SecureBytes(data)
    }

    init(secureBytes: SecureBytes) {
        bytes = secureBytes
    }

    /// A key of `byteCount` bytes written by `initializer` straight into wiped memory, so the key never
    /// passes through a `Data` that nobody wipes (for this package's formats: age's file key). If
    /// `initializer` throws, the bytes are wiped and freed.
    package init(
        byteCount: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void
    ) rethrows {
        bytes = try SecureBytes(count: byteCount, initializer: initializer)
    }

    /// The key's length in bits.
    public var bitCount: Int { bytes.count * 8 }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    /// Throws unless the key is exactly `byteCount` bytes.
    func require(byteCount: Int, for algorithm: String) throws {
        guard bytes.count == byteCount else {
            throw CryptoError.incorrectKeySize("a \(algorithm) key", expected: byteCount, got: bytes.count)
        }
    }
}

extension SymmetricKey: Equatable {
    /// Constant-time comparison of the key bytes.
    public static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool {
        lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in safeCompare(left, right) } }
    }
}

/// The size of a symmetric key.
public struct SymmetricKeySize: Sendable, Hashable {
    public let bitCount: Int

    /// A size of `bitCount` bits; `bitCount` must be a positive multiple of 8.
    public init(bitCount: Int) {
        precondition(bitCount > 0 && bitCount % 8 == 0, "a key size is a positive whole number of bytes")
        self.bitCount = bitCount
    }

    public static let bits128 = SymmetricKeySize(bitCount: 128)
    public static let bits192 = SymmetricKeySize(bitCount: 192)
    public static let bits256 = SymmetricKeySize(bitCount: 256)
}
