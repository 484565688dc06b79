import Foundation

/// HMAC (RFC 2104, FIPS 198-1) over a ``HashFunction``, on OpenSSL's `EVP_MAC`.
///
/// One-shot ``authenticationCode(for:using:)`` or incremental `update(data:)` then `finalize()`.
/// Authenticators are values: a copy continues independently.
public struct HMAC<H: HashFunction>: @unchecked Sendable {
    // @unchecked: the context is only mutated after `isKnownUniquelyReferenced` makes it unique.
    private var context: HMACContext

    /// Starts an authenticator under `key` (any length; keys longer than the block are hashed first).
    public init(key: SymmetricKey) {
        context = HMACContext(algorithm: H.algorithm, key: key)
    }

    public mutating func update(data: some DataProtocol) {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        for region in data.regions {
            region.withUnsafeBytes { context.update($0) }
        }
    }

    public func finalize() -> HashedAuthenticationCode<H> {
        HashedAuthenticationCode(context.copy().finalize(byteCount: H.byteCount))
    }

    /// The HMAC of `data` under `key`.
    public static func authenticationCode(
        for data: some DataProtocol, using key: SymmetricKey
    )
        -> HashedAuthenticationCode<H>
    {
        var hmac = HMAC(key: key)
        hmac.update(data: data)
        return hmac.finalize()
    }

    /// Whether `code` is the HMAC of `data` under `key`, compared in constant time.
    public static func isValidAuthenticationCode(
        _ code: some DataProtocol, authenticating data: some DataProtocol, using key: SymmetricKey
    ) -> Bool {
        safeCompare(authenticationCode(for: data, using: key).rawRepresentation, code)
    }
}

/// An HMAC output. `==` is constant-time.
public struct HashedAuthenticationCode<H: HashFunction>: Sendable, Hashable, ContiguousBytes, Sequence,
    CustomStringConvertible
{
    public let rawRepresentation: Data

    init(_ bytes: Data) { rawRepresentation = bytes }

    public static var byteCount: Int { H.byteCount }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try rawRepresentation.withUnsafeBytes(body)
    }

    public func makeIterator() -> Data.Iterator { rawRepresentation.makeIterator() }

    public var description: String { rawRepresentation.hexString }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        safeCompare(lhs.rawRepresentation, rhs.rawRepresentation)
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }
}
