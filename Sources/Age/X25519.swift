import Foundation
import SiblingsCrypto

/// The native X25519 recipient (age spec, "The X25519 recipient type"): `age1...`.
public struct X25519Recipient: AgeRecipient, Equatable, CustomStringConvertible {
    static let hrp = "age"
    static let label = "age-encryption.org/v1/X25519"

    public let publicKey: Curve25519.KeyAgreement.PublicKey

    public init(publicKey: Curve25519.KeyAgreement.PublicKey) { self.publicKey = publicKey }

    /// Parses an `age1...` recipient string.
    public init(string: String) throws {
        let data = try AgeKeyString.decode(
            string, hrp: Self.hrp, what: "an age X25519 recipient", code: .invalidRecipient)
        guard data.count == 32 else {
            throw AgeError(.invalidRecipient, "an age X25519 recipient holds 32 bytes, this one \(data.count)")
        }
        publicKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: data)
    }

    /// The `age1...` string.
    public var string: String { Bech32.encode(hrp: Self.hrp, data: publicKey.rawRepresentation) }
    public var description: String { string }

    public func wrap(fileKey: SymmetricKey) throws -> [AgeStanza] {
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        let share = ephemeral.publicKey.rawRepresentation
        let secret = try ephemeral.sharedSecretFromKeyAgreement(with: publicKey)
        let wrapKey = try secret.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: share + publicKey.rawRepresentation, sharedInfo: Data(Self.label.utf8),
            outputByteCount: 32)
        return [
            AgeStanza(
                type: "X25519", arguments: [StrictBase64.encodeUnpadded(share)],
                body: try StanzaCrypto.seal(fileKey: fileKey, wrapKey: wrapKey))
        ]
    }
}

/// The native X25519 identity: `AGE-SECRET-KEY-1...`.
public struct X25519Identity: AgeIdentity, CustomStringConvertible {
    static let hrp = "AGE-SECRET-KEY-"

    public let privateKey: Curve25519.KeyAgreement.PrivateKey

    /// A new random identity.
    public init() { privateKey = Curve25519.KeyAgreement.PrivateKey() }

    public init(privateKey: Curve25519.KeyAgreement.PrivateKey) { self.privateKey = privateKey }

    /// Parses an `AGE-SECRET-KEY-1...` identity string.
    public init(string: String) throws {
        let data = try AgeKeyString.decode(
            string, hrp: Self.hrp, what: "an age X25519 identity", code: .invalidIdentity)
        guard data.count == 32 else {
            throw AgeError(.invalidIdentity, "an age X25519 identity holds 32 bytes, this one \(data.count)")
        }
        privateKey = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: data)
    }

    /// The `AGE-SECRET-KEY-1...` string (uppercase, as age writes it). Keep it secret.
    public var string: String { Bech32.encode(hrp: Self.hrp, data: privateKey.rawRepresentation, uppercase: true) }
    public var description: String { "X25519Identity(\(recipient))" }

    public var recipient: X25519Recipient { X25519Recipient(publicKey: privateKey.publicKey) }

    public func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey? {
        let ourKey = privateKey.publicKey.rawRepresentation
        for stanza in stanzas where stanza.type == "X25519" {
            guard stanza.arguments.count == 1 else {
                throw AgeError.header("an X25519 stanza has \(stanza.arguments.count) arguments after its type, not 1")
            }
            let share = try StanzaCrypto.decode(stanza.arguments[0], count: 32, what: "share", stanza: "X25519")
            try StanzaCrypto.checkBody(stanza)
            let secret: SharedSecret
            do {
                secret = try privateKey.sharedSecretFromKeyAgreement(
                    with: try Curve25519.KeyAgreement.PublicKey(rawRepresentation: share))
            } catch let error as CryptoError where error.code == .invalidSharedSecret {
                throw AgeError.header("an X25519 stanza's share is a low-order point (all-zero shared secret)")
            }
            let wrapKey = try secret.hkdfDerivedSymmetricKey(
                using: SHA256.self, salt: share + ourKey, sharedInfo: Data(X25519Recipient.label.utf8),
                outputByteCount: 32)
            if let fileKey = try StanzaCrypto.open(body: stanza.body, wrapKey: wrapKey) { return fileKey }
        }
        return nil
    }
}
