import Foundation

/// SHA3-256 (FIPS 202, section 6.1), written in Swift on ``Keccak``.
public struct SHA3_256: Sendable {
    public static let byteCount = 32
    private var sponge = Keccak(rate: 136, suffix: 0x06)

    public init() {}

    public mutating func update(data: some DataProtocol) { sponge.absorb(data) }
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { sponge.absorb(bufferPointer) }

    /// The digest; the hasher can keep absorbing afterwards (finalising works on a copy).
    public func finalize() -> Data {
        var copy = sponge
        return Data.uninitialized(count: Self.byteCount) { copy.squeeze(into: $0) }
    }

    public static func hash(data: some DataProtocol) -> Data {
        var hasher = Self()
        hasher.update(data: data)
        return hasher.finalize()
    }
}

/// SHA3-512 (FIPS 202, section 6.1), written in Swift on ``Keccak``.
public struct SHA3_512: Sendable {
    public static let byteCount = 64
    private var sponge = Keccak(rate: 72, suffix: 0x06)

    public init() {}

    public mutating func update(data: some DataProtocol) { sponge.absorb(data) }
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { sponge.absorb(bufferPointer) }

    public func finalize() -> Data {
        var copy = sponge
        return Data.uninitialized(count: Self.byteCount) { copy.squeeze(into: $0) }
    }

    public static func hash(data: some DataProtocol) -> Data {
        var hasher = Self()
        hasher.update(data: data)
        return hasher.finalize()
    }
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

    /// SHAKE128(`data`, 8·`outputByteCount`).
    public static func hash(data: some DataProtocol, outputByteCount: Int) -> Data {
        var shake = Self()
        shake.absorb(data)
        return shake.squeeze(count: outputByteCount)
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

    /// SHAKE256(`data`, 8·`outputByteCount`).
    public static func hash(data: some DataProtocol, outputByteCount: Int) -> Data {
        var shake = Self()
        shake.absorb(data)
        return shake.squeeze(count: outputByteCount)
    }
}
