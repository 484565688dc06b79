import Foundation
import SiblingsCrypto

/// Something a file key can be wrapped to: one or more header stanzas (age spec, "Recipient stanzas").
public protocol AgeRecipient: Sendable {
    /// Wraps the 16-byte file key into the stanzas that go into the header.
    func wrap(fileKey: SymmetricKey) throws -> [AgeStanza]
    /// Recipients in one file must all have the same labels (age's `RecipientWithLabels`): hybrid
    /// recipients are `["postquantum"]`, so they cannot be mixed with X25519 ones, and a passphrase has a
    /// label of its own, so it cannot be mixed with anything. Empty by default.
    var labels: Set<String> { get }
}

extension AgeRecipient {
    public var labels: Set<String> { [] }
}

/// Something that can unwrap a file key from a header's stanzas.
public protocol AgeIdentity: Sendable {
    /// The file key when one of `stanzas` is for this identity and opens, nil when none is. Throws
    /// `.malformedHeader` when a stanza of this identity's type is malformed (wrong arguments, a body that
    /// is not 32 bytes, a low-order share), as the spec says such a file must be rejected.
    func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey?
}

/// The pieces every stanza type shares.
enum StanzaCrypto {
    static let fileKeySize = 16
    static let bodySize = fileKeySize + 16

    /// A fresh random 16-byte file key, made in wiped memory.
    static func newFileKey() -> SymmetricKey {
        SymmetricKey(byteCount: fileKeySize) { SecureRandom.fill($0) }
    }

    /// ChaCha20-Poly1305 of the file key under `wrapKey` with the zero nonce, sealed from the key's own
    /// wiped bytes (no copy of the file key is made).
    static func seal(fileKey: SymmetricKey, wrapKey: SymmetricKey) throws -> Data {
        let nonce = Data(count: 12)
        var body = Data(count: bodySize)
        try body.withUnsafeMutableBytes { output in
            try fileKey.withUnsafeBytes { key in
                try nonce.withUnsafeBytes { try ChaChaPoly.seal(key, into: output, using: wrapKey, nonce: $0) }
            }
        }
        return body
    }

    /// The file key, or nil when the body does not open under `wrapKey` (not for this identity); opened
    /// straight into the key's wiped memory.
    static func open(body: Data, wrapKey: SymmetricKey) throws -> SymmetricKey? {
        guard body.count == bodySize else { return nil }
        let nonce = Data(count: 12)
        var opened = false
        let key = try SymmetricKey(byteCount: fileKeySize) { output in
            opened = try body.withUnsafeBytes { sealed in
                try nonce.withUnsafeBytes { try ChaChaPoly.open(sealed, into: output, using: wrapKey, nonce: $0) }
            }
        }
        return opened ? key : nil
    }

    /// One argument that must be canonical unpadded base64 of exactly `count` bytes.
    static func decode(_ argument: String, count: Int, what: String, stanza: String) throws -> Data {
        guard let data = StrictBase64.decodeUnpadded(argument), data.count == count else {
            throw AgeError.header("the \(stanza) stanza's \(what) is not \(count) bytes of canonical unpadded base64")
        }
        return data
    }

    static func checkBody(_ stanza: AgeStanza) throws {
        guard stanza.body.count == bodySize else {
            throw AgeError.header(
                "the \(stanza.type) stanza's body is \(stanza.body.count) bytes, not \(bodySize) (a wrapped 16-byte file key)"
            )
        }
    }
}

/// Decoding the Bech32 strings of recipients and identities.
enum AgeKeyString {
    static func decode(_ string: String, hrp: String, what: String, code: AgeError.Code) throws -> Data {
        guard let (decodedHRP, data) = Bech32.decode(string) else {
            throw AgeError(
                code,
                "\"\(string.prefix(24))...\" is not valid Bech32 (checksum, characters or mixed case): check that \(what) was copied whole"
            )
        }
        guard decodedHRP == hrp.lowercased() else {
            throw AgeError(code, "the string starts with \"\(decodedHRP)1\", not \"\(hrp)1\": it is not \(what)")
        }
        return data
    }
}
