import Age
import Foundation
import SiblingsCrypto

/// An age identity that can also say its own Bech32 string and recipient: what a vault identity, a
/// device's identity (``DeviceKeys``) and the recovery identity are (X25519, or X-Wing in a post-quantum
/// vault).
public enum WrapIdentity: Sendable {
    case x25519(X25519Identity)
    case hybrid(HybridIdentity)

    /// A fresh identity of the vault's kind.
    public static func generate(postQuantum: Bool) -> WrapIdentity {
        postQuantum ? .hybrid(HybridIdentity()) : .x25519(X25519Identity())
    }

    /// Parses `AGE-SECRET-KEY-1...` or `AGE-SECRET-KEY-PQ-1...`.
    public init(string: String) throws {
        let trimmed = string.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.uppercased().hasPrefix("AGE-SECRET-KEY-PQ-1") {
            self = .hybrid(try HybridIdentity(string: trimmed))
        } else {
            self = .x25519(try X25519Identity(string: trimmed))
        }
    }

    /// The identity, to pass to `Age.decrypt(_:identities:)`.
    public var ageIdentity: any AgeIdentity {
        switch self {
        case .x25519(let identity): return identity
        case .hybrid(let identity): return identity
        }
    }

    /// The recipient that wraps to this identity.
    public var recipient: any AgeRecipient {
        switch self {
        case .x25519(let identity): return identity.recipient
        case .hybrid(let identity): return identity.recipient
        }
    }

    /// Whether this is the post-quantum hybrid identity (mlkem768x25519).
    public var isPostQuantum: Bool {
        if case .hybrid = self { return true }
        return false
    }

    public var string: String {
        switch self {
        case .x25519(let identity): return identity.string
        case .hybrid(let identity): return identity.string
        }
    }

    public var recipientString: String {
        switch self {
        case .x25519(let identity): return identity.recipient.string
        case .hybrid(let identity): return identity.recipient.string
        }
    }
}

enum VaultKeys {
    /// The age recipient in a vault body (`age1...` or `age1pq1...`).
    static func recipient(_ string: String) throws -> any AgeRecipient {
        guard let recipient = try AgeKeyFile.recipients(from: string).first else {
            throw SempereError(.malformedVault, "a recipient in vault.json is empty")
        }
        return recipient
    }

    /// An identity's Bech32 string as an armored age file to `recipient`.
    ///
    /// A device whose key an age plugin holds (`age1<name>1...`) is wrapped to through that plugin, which must be
    /// installed here; when it is not, or fails, nothing is written and the error says which plugin it takes.
    static func wrap(_ identity: WrapIdentity, to recipient: String) throws -> String {
        do {
            let file = try Age.encrypt(Data(identity.string.utf8), to: [try Self.recipient(recipient)], armor: true)
            return String(decoding: file, as: UTF8.self)
        } catch let error as AgeError where error.code == .plugin {
            throw SempereError(
                .keyUnavailable,
                "a device of this vault keeps its key with an age plugin, and wrapping the vault key to it failed "
                    + "here: \(error.reason). This device wraps the vault key to every device when they change, so "
                    + "it needs that plugin too; nothing was changed")
        }
    }

    /// Opens a wrap with `identity`.
    ///
    /// - Throws: ``SempereError/Code/keyUnavailable`` when the key does not open it (another token plugged in than
    ///   the device's), or its plugin fails; ``SempereError/Code/malformedVault`` for a damaged wrap.
    static func unwrap(_ wrap: String, with identity: any AgeIdentity) throws -> WrapIdentity {
        let plaintext: Data
        do {
            plaintext = try Age.decrypt(Data(wrap.utf8), identities: [identity])
        } catch let error as AgeError where error.code == .noMatchingIdentity {
            throw SempereError(
                .keyUnavailable,
                "this device's key does not open its wrap of the vault key: the key is not the one this device "
                    + "joined with (another token plugged in, or a key store restored from another device)")
        } catch let error as AgeError {
            throw SempereError(.malformedVault, "a key wrap in vault.json is damaged: \(error.reason)")
        }
        return try WrapIdentity(string: String(decoding: plaintext, as: UTF8.self))
    }

    /// device_id (and kit_id): the first 16 bytes of SHA-256 of the signing public key, in hex.
    static func identifier(for signingKey: HybridSignature.PublicKey) -> String {
        SHA256.hash(data: signingKey.rawRepresentation).rawRepresentation.prefix(16).hexString
    }
}

/// The recovery kit: 32 random bytes that exist only on paper. Everything else is derived from them and
/// the vault id (docs/sempere-format.md, "Keys").
public struct RecoveryKit: Sendable {
    let secret: SymmetricKey
    public let vaultID: String

    /// A fresh kit for `vaultID`.
    public init(vaultID: String) {
        self.init(secret: SymmetricKey(size: .bits256), vaultID: vaultID)
    }

    /// The kit whose secret is `secret` (32 bytes, as printed).
    public init(secret: some DataProtocol, vaultID: String) throws {
        guard secret.count == 32 else {
            throw SempereError(
                .malformedVault,
                "a recovery kit secret is 32 bytes; this one is \(secret.count): check the kit was typed whole")
        }
        self.init(secret: SymmetricKey(data: secret), vaultID: vaultID)
    }

    init(secret: SymmetricKey, vaultID: String) {
        self.secret = secret
        self.vaultID = vaultID
    }

    /// The secret, for printing on the kit. Keep it as safe as the notes deserve.
    public var secretRepresentation: Data { secret.withUnsafeBytes { Data($0) } }

    private func derive(_ label: String) throws -> Data {
        try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: secret, salt: Data(vaultID.utf8), info: Data("sempere/v1/recovery/\(label)".utf8),
            outputByteCount: 32
        ).withUnsafeBytes { Data($0) }
    }

    /// The recovery wrap identity of the vault's kind.
    public func wrapIdentity(postQuantum: Bool) throws -> WrapIdentity {
        if postQuantum {
            return .hybrid(HybridIdentity(privateKey: try XWing.PrivateKey(seedRepresentation: try derive("xwing"))))
        }
        return .x25519(
            X25519Identity(privateKey: try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: try derive("x25519"))))
    }

    /// The kit secret as people copy it: Bech32 (checksummed, so a typo is caught) with the prefix
    /// `SEMPERE-KIT-1`, uppercase.
    public var secretString: String {
        Bech32.encode(hrp: Self.stringPrefix, data: secretRepresentation, uppercase: true)
    }

    static let stringPrefix = "sempere-kit-"

    /// The kit from its printed string (either case) and the vault it belongs to.
    public init(secretString: String, vaultID: String) throws {
        let trimmed = secretString.filter { !$0.isWhitespace }
        guard let (hrp, data) = Bech32.decode(trimmed), hrp == Self.stringPrefix else {
            throw SempereError(
                .malformedVault,
                "that is not a recovery kit secret (SEMPERE-KIT-1...), or it has a typo: check it against the kit")
        }
        try self.init(secret: data, vaultID: vaultID)
    }

    /// The passphrase copy kept in the vault (recovery.age): an age key file of the recovery wrap
    /// identity, encrypted with `passphrase`, so stock `age -d -i recovery.age` opens the recovery wraps
    /// after asking for it. A comment line carries the kit secret, so Sempere can take over with it too.
    public func passphraseCopy(passphrase: String, postQuantum: Bool, workFactor: Int = 18) throws -> Data {
        try Self.checkPassphrase(passphrase)
        let identity = try wrapIdentity(postQuantum: postQuantum)
        let keyFile =
            "# Sempere recovery key for vault \(vaultID)\n# sempere-kit: \(secretString)\n"
            + "# public key: \(identity.recipientString)\n\(identity.string)\n"
        return try AgeKeyFile.encrypt(keyFile, passphrase: passphrase, workFactor: workFactor)
    }

    /// The shortest passphrase the passphrase copy accepts, in characters.
    public static let minimumPassphraseLength = 16
    /// The fewest different characters it must use.
    public static let minimumDistinctCharacters = 8

    /// Refuses a passphrase too weak for the copy, which sits in the synced folder: the storage provider
    /// (and anyone who gets the files) can try guesses offline, for ever, at the price of one scrypt
    /// (about a second of one core at work factor 18). A guess list of common passwords is tried in
    /// hours, every 8-character password in years on a GPU farm. 16 characters of a sentence, or four
    /// random words, are out of such reach (age's own passphrase suggestion is ten random words). So:
    /// at least ``minimumPassphraseLength`` characters, of which at least ``minimumDistinctCharacters``
    /// differ (which turns away "aaaa…" and "1234123412341234").
    public static func checkPassphrase(_ passphrase: String) throws {
        guard passphrase.count >= minimumPassphraseLength, Set(passphrase).count >= minimumDistinctCharacters
        else {
            throw SempereError(
                .weakPassphrase,
                "the passphrase copy needs a passphrase of at least \(minimumPassphraseLength) characters, at least "
                    + "\(minimumDistinctCharacters) of them different (this one has \(passphrase.count), "
                    + "\(Set(passphrase).count) different): the copy sits in the synced folder, where the storage "
                    + "provider can try guesses offline for ever. Four random words, or a sentence only you know, "
                    + "will do")
        }
    }

    /// The kit recovered from its passphrase copy.
    public init(passphraseCopy: Data, passphrase: String, vaultID: String) throws {
        let plaintext: Data
        do {
            plaintext = try Age.decrypt(passphraseCopy, identities: [ScryptIdentity(passphrase: passphrase)])
        } catch let error as AgeError where error.code == .noMatchingIdentity {
            throw SempereError(
                .wrongPassphrase, "wrong passphrase for the recovery copy: try again, or use the paper kit")
        } catch let error as AgeError {
            throw SempereError(
                .malformedVault,
                "the passphrase copy (recovery.age) is damaged or is not one (\(error.reason)): use the paper kit")
        }
        let line = String(decoding: plaintext, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("# sempere-kit: ") }
        guard let line else {
            throw SempereError(.malformedVault, "the recovery copy has no sempere-kit line: it is not Sempere's")
        }
        try self.init(secretString: String(line.dropFirst("# sempere-kit: ".count)), vaultID: vaultID)
    }

    /// The printable kit: an HTML page with the secret, its QR code, and what to do with it (the guide's
    /// "What to keep in mind"). Print it; do not keep the file.
    public func page(vaultName: String = "your Sempere vault") throws -> String {
        let qr = try QRCode(text: secretString, errorCorrection: .quartile)
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;")
        }
        let groups = stride(from: 0, to: secretString.count, by: 4).map { offset -> String in
            let start = secretString.index(secretString.startIndex, offsetBy: offset)
            return String(
                secretString[start..<secretString.index(start, offsetBy: min(4, secretString.count - offset))])
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Sempere recovery kit</title>
            <style>body{font-family:sans-serif;max-width:170mm;margin:15mm auto}code{font-size:14pt;word-spacing:.4em}
            li{margin:.3em 0}</style></head><body>
            <h1>Sempere recovery kit</h1>
            <p>For \(escape(vaultName)), vault id <code>\(vaultID)</code>.</p>
            \(qr.svg())
            <p><code>\(groups.joined(separator: " "))</code></p>
            <ul>
            <li>This kit holds the recovery key. With it, a device can take over the vault when the home device is \
            lost, stolen or broken.</li>
            <li>Whoever holds this kit and your files can read the vault and take it over. Keep it as safe as the \
            notes deserve: on paper, not in the synced folder, not in a photo.</li>
            <li>If you did not do a takeover and your devices show one, someone has this kit: replace the kit from \
            the device that now manages devices, at once.</li>
            </ul></body></html>
            """
    }

    /// The recovery signing key (used by a takeover, part 2).
    public func signingKey() throws -> HybridSignature.PrivateKey {
        try HybridSignature.PrivateKey(seedRepresentation: try derive("signing"))
    }
}
