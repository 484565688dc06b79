import Foundation
import SiblingsCrypto

/// The passphrase recipient (age spec, "The scrypt recipient type"). It must be the only recipient.
public struct ScryptRecipient: AgeRecipient {
    static let saltLabel = "age-encryption.org/v1/scrypt"
    /// age's default: 2^18 iterations, about a second on a laptop, 256 MiB.
    public static let defaultWorkFactor = 18

    let passphrase: String
    public let workFactor: Int
    private let uniqueLabel = SecureRandom.bytes(count: 16).hexString

    /// - Parameter workFactor: log2 of scrypt's N, 1...30; readers refuse more than their limit (age: 22).
    public init(passphrase: String, workFactor: Int = ScryptRecipient.defaultWorkFactor) throws {
        guard (1...30).contains(workFactor) else {
            throw AgeError(
                .invalidRecipient, "the scrypt work factor must be 1...30 (age's default is 18), got \(workFactor)")
        }
        guard !passphrase.isEmpty else { throw AgeError(.invalidRecipient, "the passphrase is empty: choose one") }
        self.passphrase = passphrase
        self.workFactor = workFactor
    }

    /// A label no other recipient has, so a passphrase is always alone in its file.
    public var labels: Set<String> { [uniqueLabel] }

    static func key(passphrase: String, salt: Data, workFactor: Int) throws -> SymmetricKey {
        let n = UInt64(1) << UInt64(workFactor)
        return try Scrypt.deriveKey(
            password: Data(passphrase.utf8), salt: Data(saltLabel.utf8) + salt, cost: n, blockSize: 8,
            parallelism: 1, outputByteCount: 32,
            memoryLimit: Scrypt.memoryRequired(cost: n, blockSize: 8, parallelism: 1))
    }

    public func wrap(fileKey: SymmetricKey) throws -> [AgeStanza] {
        let salt = SecureRandom.bytes(count: 16)
        let wrapKey = try Self.key(passphrase: passphrase, salt: salt, workFactor: workFactor)
        return [
            AgeStanza(
                type: "scrypt", arguments: [StrictBase64.encodeUnpadded(salt), String(workFactor)],
                body: try StanzaCrypto.seal(fileKey: fileKey, wrapKey: wrapKey))
        ]
    }
}

/// The passphrase identity: unwraps a scrypt stanza whose work factor is at most `maxWorkFactor`.
public struct ScryptIdentity: AgeIdentity {
    let passphrase: String
    public let maxWorkFactor: Int

    /// - Parameter maxWorkFactor: the largest log2(N) accepted (age's 22: 4 GiB, many seconds), so a hostile
    ///   file cannot make decryption take minutes or exhaust memory.
    public init(passphrase: String, maxWorkFactor: Int = 22) {
        self.passphrase = passphrase
        self.maxWorkFactor = maxWorkFactor
    }

    public func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey? {
        for stanza in stanzas where stanza.type == "scrypt" {
            guard stanzas.count == 1 else {
                throw AgeError.header("a scrypt stanza is not the only stanza in the header")
            }
            guard stanza.arguments.count == 2 else {
                throw AgeError.header("a scrypt stanza has \(stanza.arguments.count) arguments after its type, not 2")
            }
            let salt = try StanzaCrypto.decode(stanza.arguments[0], count: 16, what: "salt", stanza: "scrypt")
            let text = stanza.arguments[1]
            guard let first = text.utf8.first, first != UInt8(ascii: "0"),
                text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                text.utf8.count <= 2, let workFactor = Int(text), workFactor > 0
            else {
                throw AgeError.header(
                    "the scrypt work factor \"\(text.prefix(20))\" is not a decimal number 1...99 without leading zeros"
                )
            }
            guard workFactor <= maxWorkFactor else {
                throw AgeError(
                    .workFactorTooLarge,
                    "the file's scrypt work factor is \(workFactor), above the limit of \(maxWorkFactor): "
                        + "decrypting would take very long; raise maxWorkFactor only if you trust the file's origin")
            }
            try StanzaCrypto.checkBody(stanza)
            let wrapKey = try ScryptRecipient.key(passphrase: passphrase, salt: salt, workFactor: workFactor)
            if let fileKey = try StanzaCrypto.open(body: stanza.body, wrapKey: wrapKey) { return fileKey }
        }
        return nil
    }
}
