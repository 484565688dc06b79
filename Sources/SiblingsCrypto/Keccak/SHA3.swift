import Foundation

/// A fixed-length SHAKE of `data` through OpenSSL (``DigestContext/keccak(_:_:into:)``).
private func oneShot(_ function: DigestContext.Keccak, _ data: some DataProtocol, outputByteCount: Int) -> Data {
    precondition(outputByteCount >= 0, "a SHAKE output length cannot be negative")
    guard outputByteCount > 0 else { return Data() }
    let bytes = data.asData
    return Data.uninitialized(count: outputByteCount) { out in
        bytes.withUnsafeBytes { DigestContext.keccak(function, $0, into: out) }
    }
}

/// SHA3-256 (FIPS 202, section 6.1) on OpenSSL (its assembly Keccak), shaped like CryptoKit's `SHA3_256`.
public struct SHA3_256: HashFunction {
    public static let byteCount = 32
    public static let blockByteCount = 136
    public static let algorithm = HashAlgorithm(backing: .sha3_256)
    public typealias Digest = HashDigest<SHA3_256>
    private var state = SHA2State(algorithm)

    public init() {}

    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { state.update(bufferPointer) }
    public func finalize() -> Digest { Digest(state.finalize(byteCount: Self.byteCount)) }
}

/// SHA3-512 (FIPS 202, section 6.1) on OpenSSL, shaped like CryptoKit's `SHA3_512`.
public struct SHA3_512: HashFunction {
    public static let byteCount = 64
    public static let blockByteCount = 72
    public static let algorithm = HashAlgorithm(backing: .sha3_512)
    public typealias Digest = HashDigest<SHA3_512>
    private var state = SHA2State(algorithm)

    public init() {}

    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { state.update(bufferPointer) }
    public func finalize() -> Digest { Digest(state.finalize(byteCount: Self.byteCount)) }
}

/// SHAKE128 (FIPS 202, section 6.2): absorb any amount, then squeeze any amount, in as many calls
/// as you like. Once squeezing has started, absorbing again is a programming error.
public struct SHAKE128: Sendable {
    private var sponge = Keccak(rate: 168, suffix: 0x1f)

    public init() {}

    public mutating func absorb(_ data: some DataProtocol) { sponge.absorb(data) }
    public mutating func absorb(bufferPointer: UnsafeRawBufferPointer) { sponge.absorb(bufferPointer) }

    /// The next `count` bytes of output.
    public mutating func squeeze(count: Int) -> Data {
        Data.uninitialized(count: count) { sponge.squeeze(into: $0) }
    }

    /// Fills `buffer` with the next bytes of output.
    public mutating func squeeze(into buffer: UnsafeMutableRawBufferPointer) { sponge.squeeze(into: buffer) }

    /// SHAKE128(`data`, 8·`outputByteCount`), in one call to OpenSSL.
    public static func hash(data: some DataProtocol, outputByteCount: Int) -> Data {
        oneShot(.shake128, data, outputByteCount: outputByteCount)
    }
}

/// SHAKE256 (FIPS 202, section 6.2): absorb any amount, then squeeze any amount, in as many calls
/// as you like. Once squeezing has started, absorbing again is a programming error.
public struct SHAKE256: Sendable {
    private var sponge = Keccak(rate: 136, suffix: 0x1f)

    public init() {}

    public mutating func absorb(_ data: some DataProtocol) { sponge.absorb(data) }
    public mutating func absorb(bufferPointer: UnsafeRawBufferPointer) { sponge.absorb(bufferPointer) }

    public mutating func squeeze(count: Int) -> Data {
        Data.uninitialized(count: count) { sponge.squeeze(into: $0) }
    }

    public mutating func squeeze(into buffer: UnsafeMutableRawBufferPointer) { sponge.squeeze(into: buffer) }

    /// SHAKE256(`data`, 8·`outputByteCount`), in one call to OpenSSL.
    public static func hash(data: some DataProtocol, outputByteCount: Int) -> Data {
        oneShot(.shake256, data, outputByteCount: outputByteCount)
    }
}
