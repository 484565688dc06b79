import Foundation

/// age key files (identity files) and recipient files, as `age-keygen` writes and `age -i`/`-R` read them:
/// one key per line; empty lines and lines starting with `#` (such as `# created:` and `# public key:`)
/// are comments. An identity file may itself be an age file encrypted with a passphrase, as
/// `age-keygen | age -p -a > key.age` makes and `age -d -i key.age` accepts.
public enum AgeKeyFile {
    /// The identities in a key file's text (X25519 `AGE-SECRET-KEY-1...` and hybrid `AGE-SECRET-KEY-PQ-1...`).
    public static func identities(from text: String) throws -> [any AgeIdentity] {
        let identities = try keyLines(text).enumerated().map { index, line -> any AgeIdentity in
            let upper = line.uppercased()
            if upper.hasPrefix(HybridIdentity.hrp + "1") { return try HybridIdentity(string: line) }
            if upper.hasPrefix(X25519Identity.hrp + "1") { return try X25519Identity(string: line) }
            if upper.hasPrefix("AGE-PLUGIN-") { return try AgePluginIdentity(string: line) }
            throw AgeError(
                .invalidIdentity,
                "key file line \(index + 1) of the keys is not an age identity (AGE-SECRET-KEY-1..., "
                    + "AGE-SECRET-KEY-PQ-1... or AGE-PLUGIN-...); SSH keys are not supported")
        }
        guard !identities.isEmpty else {
            throw AgeError(.invalidIdentity, "the key file holds no identity: is it the right file?")
        }
        return identities
    }

    /// The identities in a key file given as bytes: plain text, or an age file (binary or armored) that is
    /// decrypted with the passphrase `passphrase` returns (asked only then).
    public static func identities(
        from data: Data, maxWorkFactor: Int = 22, passphrase: () throws -> String
    ) throws -> [any AgeIdentity] {
        let trimmed = data.drop(while: AgeArmor.isWhitespace)
        if data.starts(with: Age.binaryPrefix) || trimmed.starts(with: Data(AgeArmor.begin.utf8)) {
            let plaintext = try Age.decrypt(
                data, identities: [ScryptIdentity(passphrase: try passphrase(), maxWorkFactor: maxWorkFactor)])
            return try identities(from: String(decoding: plaintext, as: UTF8.self))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw AgeError(.invalidIdentity, "the key file is neither text nor an age file")
        }
        return try identities(from: text)
    }

    /// The recipients in a recipients file's text: `age1...`, `age1pq1...`, and plugin recipients
    /// (`age1<name>1...`, ``AgePluginRecipient``).
    public static func recipients(from text: String) throws -> [any AgeRecipient] {
        try keyLines(text).map { line -> any AgeRecipient in
            let lower = line.lowercased()
            if lower.hasPrefix(HybridRecipient.hrp + "1") { return try HybridRecipient(string: line) }
            // A plugin recipient's Bech32 prefix is longer than "age": its last "1" comes after the fourth character.
            if let separator = lower.lastIndex(of: "1"), lower.distance(from: lower.startIndex, to: separator) > 3 {
                return try AgePluginRecipient(string: line)
            }
            return try X25519Recipient(string: line)
        }
    }

    /// A key file as `age-keygen` writes it: `# created:`, `# public key:`, then the key.
    public static func encode(_ identity: X25519Identity, created: Date = Date()) -> String {
        encode(identity: identity.string, recipient: identity.recipient.string, created: created)
    }

    /// A key file for a hybrid identity, as `age-keygen -pq` writes it.
    public static func encode(_ identity: HybridIdentity, created: Date = Date()) -> String {
        encode(identity: identity.string, recipient: identity.recipient.string, created: created)
    }

    /// A key file encrypted with a passphrase (armored), which `age -d -i` accepts after asking for it.
    public static func encrypt(
        _ keyFile: String, passphrase: String, workFactor: Int = ScryptRecipient.defaultWorkFactor
    ) throws -> Data {
        try Age.encrypt(
            Data(keyFile.utf8), to: [try ScryptRecipient(passphrase: passphrase, workFactor: workFactor)], armor: true)
    }

    static func encode(identity: String, recipient: String, created: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return "# created: \(formatter.string(from: created))\n# public key: \(recipient)\n\(identity)\n"
    }

    /// The lines that are not comments, trimmed of a trailing CR and surrounding spaces.
    static func keyLines(_ text: String) -> [String] {
        // Split on bytes: "\n" is always a grapheme boundary (alone, or in "\r\n", whose "\r" the trim removes), and
        // splitting Characters goes through grapheme breaking, 100 times slower on a long file.
        text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { trimmed(String(decoding: $0, as: UTF8.self)) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// `line` without the Unicode white space (the White_Space property: what `.whitespacesAndNewlines` holds)
    /// at either end, trimmed on scalars: Foundation's trimming goes through UTF-16 and costs far more.
    private static func trimmed(_ line: String) -> String {
        let scalars = line.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}
