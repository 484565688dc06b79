import Foundation
import SiblingsCrypto

/// The post-quantum hybrid recipient (age v1.3, "mlkem768x25519"): `age1pq1...`, an X-Wing public key.
/// Its stanza is HPKE base mode (X-Wing, HKDF-SHA256, ChaCha20-Poly1305) with info
/// "age-encryption.org/mlkem768x25519" and empty aad. It cannot share a file with X25519 recipients.
public struct HybridRecipient: AgeRecipient, Equatable, CustomStringConvertible {
    static let hrp = "age1pq"
    static let stanzaType = "mlkem768x25519"
    static let info = Data("age-encryption.org/mlkem768x25519".utf8)

    public let publicKey: XWing.PublicKey

    public init(publicKey: XWing.PublicKey) { self.publicKey = publicKey }

    /// Parses an `age1pq1...` recipient string.
    public init(string: String) throws {
        let data = try AgeKeyString.decode(
            string, hrp: Self.hrp, what: "an age hybrid recipient", code: .invalidRecipient)
        guard data.count == XWing.publicKeyByteCount else {
            throw AgeError(
                .invalidRecipient,
                "an age hybrid recipient holds \(XWing.publicKeyByteCount) bytes, this one \(data.count)")
        }
        do {
            publicKey = try XWing.PublicKey(rawRepresentation: data)
        } catch {
            throw AgeError(.invalidRecipient, "the hybrid recipient's ML-KEM key is not valid: \(error)")
        }
    }

    public var string: String { Bech32.encode(hrp: Self.hrp, data: publicKey.rawRepresentation) }
    public var description: String { string }
    public var labels: Set<String> { ["postquantum"] }

    public func wrap(fileKey: SymmetricKey) throws -> [AgeStanza] {
        var sender = try HPKE.Sender(
            recipientKey: publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Self.info)
        let body = try fileKey.withUnsafeBytes { try sender.seal($0) }
        return [
            AgeStanza(
                type: Self.stanzaType, arguments: [StrictBase64.encodeUnpadded(sender.encapsulatedKey)], body: body)
        ]
    }
}

/// The post-quantum hybrid identity: `AGE-SECRET-KEY-PQ-1...`, a 32-byte X-Wing seed.
public struct HybridIdentity: AgeIdentity, CustomStringConvertible {
    static let hrp = "AGE-SECRET-KEY-PQ-"

    public let privateKey: XWing.PrivateKey

    public init() { privateKey = XWing.PrivateKey() }

    public init(privateKey: XWing.PrivateKey) { self.privateKey = privateKey }

    /// Parses an `AGE-SECRET-KEY-PQ-1...` identity string.
    public init(string: String) throws {
        let data = try AgeKeyString.decode(
            string, hrp: Self.hrp, what: "an age hybrid identity", code: .invalidIdentity)
        guard data.count == XWing.seedByteCount else {
            throw AgeError(
                .invalidIdentity, "an age hybrid identity holds a 32-byte seed, this one \(data.count) bytes")
        }
        privateKey = try XWing.PrivateKey(seedRepresentation: data)
    }

    public var string: String { Bech32.encode(hrp: Self.hrp, data: privateKey.seedRepresentation, uppercase: true) }
    public var description: String { "HybridIdentity(\(recipient.string.prefix(20))...)" }
    public var recipient: HybridRecipient { HybridRecipient(publicKey: privateKey.publicKey) }

    public func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey? {
        for stanza in stanzas where stanza.type == HybridRecipient.stanzaType {
            guard stanza.arguments.count == 1 else {
                throw AgeError.header(
                    "an mlkem768x25519 stanza has \(stanza.arguments.count) arguments after its type, not 1")
            }
            let enc = try StanzaCrypto.decode(
                stanza.arguments[0], count: XWing.ciphertextByteCount, what: "encapsulated key",
                stanza: "mlkem768x25519")
            try StanzaCrypto.checkBody(stanza)
            var recipient: HPKE.Recipient
            do {
                recipient = try HPKE.Recipient(
                    privateKey: privateKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly,
                    info: HybridRecipient.info,
                    encapsulatedKey: enc)
            } catch let error as CryptoError where error.code == .invalidSharedSecret {
                throw AgeError.header(
                    "an mlkem768x25519 stanza's X25519 part is a low-order point (all-zero shared secret)")
            }
            guard var opened = try? recipient.open(stanza.body) else { continue }
            defer { opened.cleanse() }
            return SymmetricKey(data: opened)
        }
        return nil
    }
}
