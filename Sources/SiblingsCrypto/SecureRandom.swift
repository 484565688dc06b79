import Foundation

/// Where the crypto core gets its randomness.
///
/// Production code uses ``SystemRandom`` (OpenSSL's CSPRNG). Tests that need reproducible keys inject
/// another source into the APIs that take one; nothing in the core reads a global that tests replace.
public protocol SecureRandomSource: Sendable {
    /// Fills `buffer` with random bytes.
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension SecureRandomSource {
    /// `count` random bytes.
    public func bytes(count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { fill($0) }
        return data
    }
}

/// OpenSSL's CSPRNG (`RAND_bytes`, seeded from the operating system).
public struct SystemRandom: SecureRandomSource {
    public init() {}

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        SecureRandom.fill(buffer)
    }
}

/// The system CSPRNG as a namespace, for call sites that never need another source.
public enum SecureRandom {
    /// `count` bytes from the system CSPRNG.
    public static func bytes(count: Int) -> Data {
        SystemRandom().bytes(count: count)
    }

    /// Fills `buffer` from the system CSPRNG.
    ///
    /// A CSPRNG that cannot produce output leaves no safe way to continue (every key made after it would
    /// be guessable), so that failure stops the process, as CryptoKit does, rather than returning.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        OpenSSLRandom.fill(buffer)
    }
}
