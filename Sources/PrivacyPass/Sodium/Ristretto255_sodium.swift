internal import CSodium
import Foundation
import SiblingsCrypto

/// The ristretto255 group (RFC 9496) on libsodium 1.0.18: the backend of ``VOPRF``. Nothing outside this file
/// touches libsodium, so another backend can replace it without changing the public API.
///
/// Elements and scalars are 32-byte arrays in their canonical encodings. An ``Element`` built here is always a
/// valid point; the identity (32 zero bytes) appears only inside sums (``Ristretto255/add(_:_:)``).
enum Ristretto255 {
    static let elementByteCount = 32
    static let scalarByteCount = 32

    /// `sodium_init()`, once per process; every entry point that creates group values calls ``ready()``.
    private static let initResult: Int32 = sodium_init()

    /// ``ready()`` for callers that cannot throw: a libsodium that cannot initialize leaves no safe way on, so
    /// that stops the process (as SiblingsCrypto does when the CSPRNG fails).
    static func readyOrTrap() {
        do { try ready() } catch { preconditionFailure("\(error)") }
    }

    static func ready() throws {
        guard initResult >= 0 else {
            throw PrivacyPassError(.underlyingLibrary, "sodium_init() failed (\(initResult)); libsodium is unusable")
        }
    }

    struct Element: Sendable, Equatable {
        let bytes: [UInt8]
        var isIdentity: Bool { bytes.allSatisfy { $0 == 0 } }
        static let identity = Element(bytes: [UInt8](repeating: 0, count: 32))
    }

    /// A scalar modulo the group order L. Secret scalars are wiped by the classes that own them.
    struct Scalar: Sendable, Equatable {
        let bytes: [UInt8]
        var isZero: Bool { bytes.reduce(0) { $0 | $1 } == 0 }
    }

    // MARK: - Encodings

    /// DeserializeElement (RFC 9497 §4.1): canonical ristretto255 encoding, not the identity.
    static func element(_ bytes: some DataProtocol, what: String) throws -> Element {
        try ready()
        let array = [UInt8](bytes)
        guard array.count == elementByteCount else {
            throw PrivacyPassError(
                .invalidElement, "\(what) must be a 32-byte ristretto255 element, got \(array.count) bytes")
        }
        guard crypto_core_ristretto255_is_valid_point(array) == 1 else {
            throw PrivacyPassError(
                .invalidElement, "\(what) is not a canonical ristretto255 encoding; the sender is broken or hostile")
        }
        guard !array.allSatisfy({ $0 == 0 }) else {
            throw PrivacyPassError(.invalidElement, "\(what) is the identity element, which the protocol refuses")
        }
        return Element(bytes: array)
    }

    /// DeserializeScalar (RFC 9497 §4.1): 32 bytes, little-endian, below L.
    static func scalar(_ bytes: some DataProtocol, what: String) throws -> Scalar {
        try ready()
        let array = [UInt8](bytes)
        guard array.count == scalarByteCount else {
            throw PrivacyPassError(.invalidScalar, "\(what) must be a 32-byte scalar, got \(array.count) bytes")
        }
        var wide = array + [UInt8](repeating: 0, count: 32)
        defer { sodium_memzero(&wide, wide.count) }
        let reduced = reduce(wide)
        guard reduced.bytes == array else {
            throw PrivacyPassError(
                .invalidScalar, "\(what) is not a canonical scalar (it is not below the ristretto255 group order)")
        }
        return reduced
    }

    // MARK: - Scalars

    /// A 64-byte little-endian number modulo L.
    static func reduce(_ wide: [UInt8]) -> Scalar {
        precondition(wide.count == 64)
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_reduce(&out, wide)
        return Scalar(bytes: out)
    }

    /// RandomScalar: 64 bytes from `random` reduced modulo L, never zero.
    static func randomScalar(using random: some SecureRandomSource) -> Scalar {
        while true {
            var wide = [UInt8](repeating: 0, count: 64)
            wide.withUnsafeMutableBytes { random.fill($0) }
            let scalar = reduce(wide)
            sodium_memzero(&wide, wide.count)
            if !scalar.isZero { return scalar }
        }
    }

    static func add(_ a: Scalar, _ b: Scalar) -> Scalar {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_add(&out, a.bytes, b.bytes)
        return Scalar(bytes: out)
    }

    static func sub(_ a: Scalar, _ b: Scalar) -> Scalar {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_sub(&out, a.bytes, b.bytes)
        return Scalar(bytes: out)
    }

    static func mul(_ a: Scalar, _ b: Scalar) -> Scalar {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_mul(&out, a.bytes, b.bytes)
        return Scalar(bytes: out)
    }

    /// ScalarInverse; throws for zero, which has none.
    static func invert(_ a: Scalar) throws -> Scalar {
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_core_ristretto255_scalar_invert(&out, a.bytes) == 0 else {
            throw PrivacyPassError(.invalidScalar, "the scalar is zero and has no inverse")
        }
        return Scalar(bytes: out)
    }

    // MARK: - Elements

    /// `scalar` · `element`. libsodium refuses a result that is the identity (a zero scalar); that is thrown.
    static func multiply(_ scalar: Scalar, _ element: Element) throws -> Element {
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_scalarmult_ristretto255(&out, scalar.bytes, element.bytes) == 0 else {
            throw PrivacyPassError(
                .invalidElement, "a scalar multiplication gave the identity element (zero scalar or identity input)")
        }
        return Element(bytes: out)
    }

    /// ScalarMultGen: `scalar` · G; throws for a zero scalar (identity result).
    static func multiplyBase(_ scalar: Scalar) throws -> Element {
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_scalarmult_ristretto255_base(&out, scalar.bytes) == 0 else {
            throw PrivacyPassError(.invalidScalar, "a base-point multiplication by zero gave the identity element")
        }
        return Element(bytes: out)
    }

    /// `a` + `b`; either may be the identity.
    static func add(_ a: Element, _ b: Element) throws -> Element {
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_core_ristretto255_add(&out, a.bytes, b.bytes) == 0 else {
            throw PrivacyPassError(.invalidElement, "crypto_core_ristretto255_add refused its inputs")
        }
        return Element(bytes: out)
    }

    /// hash_to_ristretto255 (RFC 9380 Appendix B / RFC 9496 §4.3.4) with expand_message_xmd(SHA-512).
    static func hashToGroup(_ message: [UInt8], dst: [UInt8]) throws -> Element {
        try ready()
        let uniform = try ExpandMessage.xmdSHA512(message, dst: dst, length: 64)
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_core_ristretto255_from_hash(&out, uniform) == 0 else {
            throw PrivacyPassError(.underlyingLibrary, "crypto_core_ristretto255_from_hash failed")
        }
        return Element(bytes: out)
    }

    /// HashToScalar for ristretto255-SHA512 (RFC 9497 §4.1): expand_message_xmd to 64 bytes, reduced mod L.
    static func hashToScalar(_ message: [UInt8], dst: [UInt8]) throws -> Scalar {
        reduce(try ExpandMessage.xmdSHA512(message, dst: dst, length: 64))
    }

    /// Overwrites `bytes` with zeros (`sodium_memzero`, which the compiler may not remove).
    static func wipe(_ bytes: inout [UInt8]) {
        sodium_memzero(&bytes, bytes.count)
    }
}
