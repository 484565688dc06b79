import Foundation
import SiblingsCrypto

/// The public keys a device must pin, and the transparency checkpoint it starts from, printed by
/// `pixie-server trust-bundle` and shipped with the app (never learned from the first answer on the network).
/// JSON, byte fields base64url without padding:
///
///     {"version": 2, "phone_verify_key": …, "transparency_log_key": …, "transparency_log_origin": "…",
///      "sender_cert_key": …, "transparency_checkpoint": "<signed note>"}
///
/// with `"additional_phone_verify_keys": [ … ]` during a phone-verify key rotation: the keys pinned beside
/// `phone_verify_key` (the one phone-verify signs with now), so that certs under the old key and the new one both
/// verify on every device while both are pinned. Absent, or empty, when there is no rotation.
///
/// (1984-byte hybrid keys; the origin is the log's checkpoint origin and signed-note key name; the checkpoint
/// is the log's signed note as `GET /v1/kt/checkpoint` returns it). Version 1, from before the checkpoint
/// shipped, reads with no checkpoint; a device verifier refuses such a bundle (PixieDevice), since a new device
/// would otherwise pin whatever checkpoint the server shows it first: the seed's "no prior state" moment.
public struct TrustBundle: Codable, Sendable, Equatable {
    /// 2 with a checkpoint, 1 without.
    public var version: Int { transparencyCheckpoint == nil ? 1 : 2 }
    /// The key phone-verify signs PhoneOwnershipCerts with now.
    public var phoneVerifyKey: HybridSignature.PublicKey
    /// Keys pinned beside it during a rotation (the old one, or the next).
    public var additionalPhoneVerifyKeys: [HybridSignature.PublicKey]
    /// Every phone-verify key a device pins: ``phoneVerifyKey``, then ``additionalPhoneVerifyKeys``.
    public var phoneVerifyKeys: [HybridSignature.PublicKey] { [phoneVerifyKey] + additionalPhoneVerifyKeys }
    public var transparencyLogKey: HybridSignature.PublicKey
    public var transparencyLogOrigin: String
    public var senderCertKey: HybridSignature.PublicKey
    /// The log's signed checkpoint at the time the bundle was made; every later one must extend it.
    public var transparencyCheckpoint: String?

    public init(
        phoneVerifyKey: HybridSignature.PublicKey, transparencyLogKey: HybridSignature.PublicKey,
        transparencyLogOrigin: String, senderCertKey: HybridSignature.PublicKey, transparencyCheckpoint: String? = nil,
        additionalPhoneVerifyKeys: [HybridSignature.PublicKey] = []
    ) {
        self.phoneVerifyKey = phoneVerifyKey
        self.additionalPhoneVerifyKeys = additionalPhoneVerifyKeys
        self.transparencyLogKey = transparencyLogKey
        self.transparencyLogOrigin = transparencyLogOrigin
        self.senderCertKey = senderCertKey
        self.transparencyCheckpoint = transparencyCheckpoint
    }

    enum CodingKeys: String, CodingKey {
        case version
        case phoneVerifyKey = "phone_verify_key"
        case additionalPhoneVerifyKeys = "additional_phone_verify_keys"
        case transparencyLogKey = "transparency_log_key"
        case transparencyLogOrigin = "transparency_log_origin"
        case senderCertKey = "sender_cert_key"
        case transparencyCheckpoint = "transparency_checkpoint"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let version = try container.decode(Int.self, forKey: .version)
        guard version == 1 || version == 2 else {
            throw DecodingError.dataCorruptedError(
                forKey: .version, in: container, debugDescription: "this build reads trust bundle versions 1 and 2")
        }
        func key(_ field: CodingKeys) throws -> HybridSignature.PublicKey {
            let bytes = try container.decode(Base64URLBytes.self, forKey: field)
            do {
                return try HybridSignature.PublicKey(rawRepresentation: bytes.data)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: field, in: container, debugDescription: "not a 1984-byte hybrid public key")
            }
        }
        phoneVerifyKey = try key(.phoneVerifyKey)
        let additional = try container.decodeIfPresent([Base64URLBytes].self, forKey: .additionalPhoneVerifyKeys) ?? []
        additionalPhoneVerifyKeys = try additional.map { bytes in
            do {
                return try HybridSignature.PublicKey(rawRepresentation: bytes.data)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .additionalPhoneVerifyKeys, in: container,
                    debugDescription: "not a list of 1984-byte hybrid public keys")
            }
        }
        transparencyLogKey = try key(.transparencyLogKey)
        transparencyLogOrigin = try container.decode(String.self, forKey: .transparencyLogOrigin)
        senderCertKey = try key(.senderCertKey)
        transparencyCheckpoint =
            version == 2 ? try container.decode(String.self, forKey: .transparencyCheckpoint) : nil
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(Base64URLBytes(phoneVerifyKey.rawRepresentation), forKey: .phoneVerifyKey)
        if !additionalPhoneVerifyKeys.isEmpty {
            try container.encode(
                additionalPhoneVerifyKeys.map { Base64URLBytes($0.rawRepresentation) },
                forKey: .additionalPhoneVerifyKeys)
        }
        try container.encode(Base64URLBytes(transparencyLogKey.rawRepresentation), forKey: .transparencyLogKey)
        try container.encode(transparencyLogOrigin, forKey: .transparencyLogOrigin)
        try container.encode(Base64URLBytes(senderCertKey.rawRepresentation), forKey: .senderCertKey)
        try container.encodeIfPresent(transparencyCheckpoint, forKey: .transparencyCheckpoint)
    }
}
