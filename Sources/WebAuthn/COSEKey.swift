import Foundation
import SiblingsCrypto

/// An ES256 credential public key as a COSE_Key (RFC 9052 §7, RFC 9053 §7.1.1 "Double Coordinate
/// Curves"): the map `{1: 2 (kty EC2), 3: −7 (alg ES256), −1: 1 (crv P-256), −2: x, −3: y}`, x and y
/// 32 bytes each. WebAuthn L3 §6.5.1.1 requires the `alg` member.
///
/// ES256 is the only algorithm accepted: every passkey provider offers it, and it is the only one our
/// crypto core verifies for WebAuthn. Other algorithms are refused with
/// ``WebAuthnError/Code/unsupportedAlgorithm``, naming the algorithm.
public struct COSEKey: Sendable, Equatable {
    /// COSE algorithm ES256: ECDSA with SHA-256 (RFC 9053 §2.1).
    public static let es256Algorithm = -7

    /// The P-256 public key.
    public let publicKey: P256.Signing.PublicKey

    /// The key as it arrived (from ``init(cborRepresentation:)``) or as ``init(publicKey:)`` encoded it.
    public let cborRepresentation: Data

    /// Wraps `publicKey` in its canonical COSE_Key encoding.
    public init(publicKey: P256.Signing.PublicKey) {
        self.publicKey = publicKey
        let raw = publicKey.rawRepresentation
        cborRepresentation = CBOR.map([
            CBOR(1): CBOR(2),
            CBOR(3): CBOR(Self.es256Algorithm),
            CBOR(-1): CBOR(1),
            CBOR(-2): .bytes(raw.prefix(32)),
            CBOR(-3): .bytes(raw.suffix(32)),
        ]).encoded()
    }

    /// Parses an encoded COSE_Key; throws unless it is an ES256 key on P-256 with a valid point.
    public init(cborRepresentation: some DataProtocol) throws {
        let bytes = Data(cborRepresentation)
        let item: CBOR
        do {
            item = try CBORDecoder().decode(bytes)
        } catch let error as WebAuthnError {
            throw WebAuthnError(.invalidCOSEKey, "the COSE_Key is not valid CBOR: \(error.reason)")
        }
        try self.init(item, encoded: bytes)
    }

    init(_ item: CBOR, encoded: Data) throws {
        guard let map = item.mapValue else {
            throw WebAuthnError(.invalidCOSEKey, "a COSE_Key must be a CBOR map")
        }
        guard let algorithm = map[CBOR(3)]?.intValue else {
            throw WebAuthnError(.invalidCOSEKey, "the COSE_Key has no integer alg (label 3), which WebAuthn requires")
        }
        guard algorithm == Self.es256Algorithm else {
            throw WebAuthnError(
                .unsupportedAlgorithm,
                "the credential uses COSE algorithm \(algorithm) (\(Self.name(of: algorithm))); only ES256 (-7) is accepted"
            )
        }
        guard let keyType = map[CBOR(1)]?.intValue, keyType == 2 else {
            throw WebAuthnError(.unsupportedAlgorithm, "an ES256 COSE_Key must have kty 2 (EC2)")
        }
        guard let curve = map[CBOR(-1)]?.intValue, curve == 1 else {
            throw WebAuthnError(.unsupportedAlgorithm, "an ES256 COSE_Key must have crv 1 (P-256)")
        }
        guard let x = map[CBOR(-2)]?.bytesValue, x.count == 32 else {
            throw WebAuthnError(.invalidCOSEKey, "the COSE_Key's x coordinate (label -2) must be a 32-byte string")
        }
        guard let y = map[CBOR(-3)]?.bytesValue, y.count == 32 else {
            throw WebAuthnError(.invalidCOSEKey, "the COSE_Key's y coordinate (label -3) must be a 32-byte string")
        }
        do {
            publicKey = try P256.Signing.PublicKey(rawRepresentation: x + y)
        } catch {
            throw WebAuthnError(.invalidCOSEKey, "the COSE_Key's (x, y) is not a point on P-256")
        }
        cborRepresentation = encoded
    }

    static func name(of algorithm: Int) -> String {
        switch algorithm {
        case -8: return "EdDSA"
        case -35: return "ES384"
        case -36: return "ES512"
        case -37: return "PS256"
        case -257: return "RS256"
        case -47: return "ES256K"
        default: return "unknown"
        }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.publicKey == rhs.publicKey }
}
