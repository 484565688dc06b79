import Foundation

/// The hash functions the crypto core computes (a closed set: HMAC and HKDF are generic over it).
public struct HashAlgorithm: Sendable, Hashable {
    enum Backing: Sendable, Hashable {
        case sha256, sha384, sha512
        case sha3_256, sha3_512
        /// Only for ``Insecure/SHA1`` (RFC 6455's accept key); never offered where security depends on it.
        case sha1
    }

    let backing: Backing
}

/// A hash function, shaped like CryptoKit's `HashFunction`: one-shot `hash(data:)`, or incremental
/// `update(data:)` then `finalize()`. Hashers are values: a copy continues independently.
public protocol HashFunction: Sendable {
    /// The digest length in bytes.
    static var byteCount: Int { get }
    /// The input block length in bytes (HMAC's `B`, RFC 2104).
    static var blockByteCount: Int { get }
    /// Which hash this is.
    static var algorithm: HashAlgorithm { get }

    init()
    mutating func update(bufferPointer: UnsafeRawBufferPointer)
    func finalize() -> HashDigest<Self>
}

extension HashFunction {
    /// Adds `data` to the running hash.
    public mutating func update(data: some DataProtocol) {
        for region in data.regions {
            region.withUnsafeBytes { update(bufferPointer: $0) }
        }
    }

    /// The digest of `data`.
    public static func hash(data: some DataProtocol) -> HashDigest<Self> {
        if data.regions.count == 1, let region = data.regions.first {
            return region.withUnsafeBytes { HashDigest(SHA2State.digest(algorithm, $0, byteCount: byteCount)) }
        }
        var hasher = Self()
        hasher.update(data: data)
        return hasher.finalize()
    }
}

/// A hash's output. Comparison with `==` is constant-time.
public struct HashDigest<Function: HashFunction>: Sendable, Hashable, ContiguousBytes, Sequence,
    CustomStringConvertible
{
    /// The digest bytes.
    public let rawRepresentation: Data

    init(_ bytes: Data) {
        precondition(bytes.count == Function.byteCount)
        rawRepresentation = bytes
    }

    public static var byteCount: Int { Function.byteCount }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try rawRepresentation.withUnsafeBytes(body)
    }

    public func makeIterator() -> Data.Iterator { rawRepresentation.makeIterator() }

    /// Lower-case hex.
    public var description: String { rawRepresentation.hexString }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        safeCompare(lhs.rawRepresentation, rhs.rawRepresentation)
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }
}

/// The state of an OpenSSL-backed hasher (SHA-2, and SHA-1 for ``Insecure/SHA1``), copied on write so hashers keep value semantics.
struct SHA2State: @unchecked Sendable {
    // @unchecked: the context is only mutated through `mutate`, which first makes it unique, so no
    // two values ever share a context that one of them writes.
    private var context: DigestContext
    private let algorithm: HashAlgorithm

    init(_ algorithm: HashAlgorithm) {
        self.algorithm = algorithm
        context = DigestContext(algorithm)
    }

    mutating func update(_ buffer: UnsafeRawBufferPointer) {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        context.update(buffer)
    }

    static func digest(_ algorithm: HashAlgorithm, _ buffer: UnsafeRawBufferPointer, byteCount: Int) -> Data {
        var output = Data(count: 64)
        output.withUnsafeMutableBytes { DigestContext.digest(algorithm, buffer, into: $0) }
        return output.prefix(byteCount)
    }

    func finalize(byteCount: Int) -> Data {
        let finishing = context.copy()
        var output = Data(count: 64)
        output.withUnsafeMutableBytes { finishing.finalize(into: $0) }
        return output.prefix(byteCount)
    }
}

/// SHA-256 (FIPS 180-4) on OpenSSL.
public struct SHA256: HashFunction {
    public static let byteCount = 32
    public static let blockByteCount = 64
    public static let algorithm = HashAlgorithm(backing: .sha256)
    public typealias Digest = HashDigest<SHA256>
    private var state = SHA2State(algorithm)

    public init() {}
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { state.update(bufferPointer) }
    public func finalize() -> Digest { Digest(state.finalize(byteCount: Self.byteCount)) }
}

/// SHA-384 (FIPS 180-4) on OpenSSL.
public struct SHA384: HashFunction {
    public static let byteCount = 48
    public static let blockByteCount = 128
    public static let algorithm = HashAlgorithm(backing: .sha384)
    public typealias Digest = HashDigest<SHA384>
    private var state = SHA2State(algorithm)

    public init() {}
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { state.update(bufferPointer) }
    public func finalize() -> Digest { Digest(state.finalize(byteCount: Self.byteCount)) }
}

/// SHA-512 (FIPS 180-4) on OpenSSL.
public struct SHA512: HashFunction {
    public static let byteCount = 64
    public static let blockByteCount = 128
    public static let algorithm = HashAlgorithm(backing: .sha512)
    public typealias Digest = HashDigest<SHA512>
    private var state = SHA2State(algorithm)

    public init() {}
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { state.update(bufferPointer) }
    public func finalize() -> Digest { Digest(state.finalize(byteCount: Self.byteCount)) }
}

/// Hash functions kept only for old protocols that require them, under CryptoKit's name for them.
public enum Insecure {}

extension Insecure {
    /// SHA-1 (FIPS 180-4) on OpenSSL, for RFC 6455 only: the WebSocket handshake's
    /// `Sec-WebSocket-Accept` is base64(SHA-1(key + GUID)) (RFC 6455, section 4.2.2).
    ///
    /// SHA-1 is broken for collision resistance (SHAttered, 2017). Do not use it for signatures,
    /// integrity, key derivation or anything else where security depends on the hash.
    public struct SHA1: HashFunction {
        public static let byteCount = 20
        public static let blockByteCount = 64
        public static let algorithm = HashAlgorithm(backing: .sha1)
        public typealias Digest = HashDigest<SHA1>
        private var state = SHA2State(algorithm)

        public init() {}
        public mutating func update(bufferPointer: UnsafeRawBufferPointer) { state.update(bufferPointer) }
        public func finalize() -> Digest { Digest(state.finalize(byteCount: Self.byteCount)) }
    }
}
