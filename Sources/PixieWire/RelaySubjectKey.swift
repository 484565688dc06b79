import Foundation
import SiblingsCrypto

/// The key that owns a relay subject (docs/pixie-protocol.md, "Self-certifying subjects"). The subject is
///
///     SHA-256("pixie/relay/subject/v1" ‖ 0x00 ‖ public key)
///
/// of an Ed25519 public key (RFC 8032), so whoever knows a subject can SEND to it, but only the holder of the
/// private key can SUBSCRIBE it and register a push target for it: SUBSCRIBE carries the public key and a
/// signature over the connection's CHALLENGE. A device inbox and a reply subject each get a fresh key; the
/// account's discovery inbox gets one every sibling derives from the account's discovery key
/// (``init(discoverySeed:)``), so the approval need carry nothing more.
public struct RelaySubjectKey: Sendable {
    public let signingKey: Curve25519.Signing.PrivateKey

    /// A fresh random key (a device inbox, a reply subject).
    public init() { signingKey = Curve25519.Signing.PrivateKey() }

    public init(signingKey: Curve25519.Signing.PrivateKey) { self.signingKey = signingKey }

    /// The discovery inbox's key, from the account's discovery X-Wing seed (32 bytes, which every sibling
    /// holds): the Ed25519 seed is HKDF-SHA256 (RFC 5869) of it with an empty salt and the info
    /// "pixie/relay/discovery-subscribe/v1", 32 bytes.
    public init(discoverySeed: some DataProtocol) throws {
        guard discoverySeed.count == 32 else {
            throw PixieWireError(.malformed, "a discovery seed is 32 bytes, not \(discoverySeed.count)")
        }
        let seed = try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(discoverySeed)), salt: Data(),
            info: Data("pixie/relay/discovery-subscribe/v1".utf8), outputByteCount: 32)
        signingKey = try seed.withUnsafeBytes { try Curve25519.Signing.PrivateKey(rawRepresentation: $0) }
    }

    public var publicKey: Curve25519.Signing.PublicKey { signingKey.publicKey }

    /// The subject this key owns.
    public var subject: RelaySubject { RelaySubject(owner: publicKey) }

    /// The SUBSCRIBE for this key's subject on a connection whose CHALLENGE carried `challenge`.
    public func subscribe(requestID: UInt32, challenge: Data, pushToken: Data = Data()) throws -> RelayClientFrame {
        let signature = try signingKey.signature(
            for: RelaySubject.subscribeMessage(challenge: challenge, subject: subject, pushToken: pushToken))
        return .subscribe(
            requestID: requestID, subject: subject, publicKey: publicKey.rawRepresentation, signature: signature,
            pushToken: pushToken)
    }
}

extension RelaySubject {
    static let ownerLabel = Data("pixie/relay/subject/v1\u{0}".utf8)
    static let subscribeLabel = Data("pixie/relay/subscribe/v1\u{0}".utf8)

    /// The subject `owner` owns: SHA-256("pixie/relay/subject/v1" ‖ 0x00 ‖ owner).
    public init(owner: Curve25519.Signing.PublicKey) {
        var hasher = SHA256()
        hasher.update(data: Self.ownerLabel)
        hasher.update(data: owner.rawRepresentation)
        rawRepresentation = Data(hasher.finalize())
    }

    /// What a SUBSCRIBE's signature covers: "pixie/relay/subscribe/v1" ‖ 0x00 ‖ challenge (32) ‖ subject (32) ‖
    /// push token length (u16 BE) ‖ push token. The challenge ties it to one connection, the push token to
    /// the registration the holder asked for.
    public static func subscribeMessage(challenge: Data, subject: RelaySubject, pushToken: Data) -> Data {
        var message = subscribeLabel
        message.append(challenge)
        message.append(subject.rawRepresentation)
        message.append(UInt8(truncatingIfNeeded: pushToken.count >> 8))
        message.append(UInt8(truncatingIfNeeded: pushToken.count))
        message.append(pushToken)
        return message
    }

    /// Whether a SUBSCRIBE proves its sender holds this subject's key: `publicKey` hashes to the subject and
    /// `signature` verifies over ``subscribeMessage(challenge:subject:pushToken:)``.
    public func isProven(publicKey: Data, signature: Data, challenge: Data, pushToken: Data) -> Bool {
        guard let owner = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey),
            RelaySubject(owner: owner) == self
        else { return false }
        return owner.isValidSignature(
            signature, for: Self.subscribeMessage(challenge: challenge, subject: self, pushToken: pushToken))
    }
}
