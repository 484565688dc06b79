import Foundation
import SiblingsCrypto

/// A log's public key as verifiers pin it: the signed-note key name (the log's origin) and its hybrid key.
public struct LogKey: Sendable, Equatable {
    /// The checkpoint origin and signed-note key name, such as `pixie.example/kt`.
    public let origin: String
    public let publicKey: HybridSignature.PublicKey

    /// The signed-note signature type for HybridSignature (Ed25519 ‖ ML-DSA-65): 0xFF, which signed-note
    /// reserves for types it assigns no byte to, followed (as it recommends) by a longer identifier
    /// (docs/pixie-protocol.md, "Checkpoints").
    public static let signatureType: UInt8 = 0xFF
    /// The identifier that follows 0xFF in the key ID input.
    public static let signatureTypeIdentifier = Data("pixie/hybrid-ed25519-mldsa65/v1".utf8)
    /// The context string both halves of the checkpoint signature are bound to.
    public static let signatureContext = Data("pixie/kt-checkpoint/v1".utf8)

    public init(origin: String, publicKey: HybridSignature.PublicKey) throws {
        try Checkpoint.checkOrigin(origin)
        self.origin = origin
        self.publicKey = publicKey
    }

    /// The signed-note key ID: SHA-256(name ‖ 0x0A ‖ 0xFF ‖ "pixie/hybrid-ed25519-mldsa65/v1" ‖ public key
    /// (1984 bytes))[0..<4].
    public var keyID: Data {
        var bytes = Data(origin.utf8)
        bytes.append(0x0A)
        bytes.append(LogKey.signatureType)
        bytes.append(LogKey.signatureTypeIdentifier)
        bytes.append(publicKey.rawRepresentation)
        return Data(SHA256.hash(data: bytes).rawRepresentation.prefix(4))
    }
}

/// A signed checkpoint in C2SP tlog-checkpoint form with one extension line, signed as a C2SP signed note
/// (docs/pixie-protocol.md, "Checkpoints"):
/// ```
/// <origin>\n<size>\n<base64 log root>\nmap <base64 map root>\n\n— <origin> <base64(key ID ‖ signature)>\n
/// ```
public struct Checkpoint: Sendable, Hashable {
    public let origin: String
    /// The number of entries in the log.
    public let size: UInt64
    /// The RFC 9162 root of the log's first `size` entries.
    public let logRoot: Hash256
    /// The root of the map of those entries.
    public let mapRoot: Hash256
    /// The whole signed note, as signed: what a server sends and a device pins.
    public let note: String

    /// The note's body, what the signature covers: four lines, each ending in a newline.
    public static func body(origin: String, size: UInt64, logRoot: Hash256, mapRoot: Hash256) -> String {
        "\(origin)\n\(size)\n\(logRoot.rawRepresentation.base64EncodedString())\n"
            + "map \(mapRoot.rawRepresentation.base64EncodedString())\n"
    }

    /// Signs a checkpoint with the log's key (both halves of the hybrid signature).
    public static func sign(
        size: UInt64, logRoot: Hash256, mapRoot: Hash256, origin: String, key: HybridSignature.PrivateKey
    ) throws -> Checkpoint {
        let logKey = try LogKey(origin: origin, publicKey: key.publicKey)
        let body = body(origin: origin, size: size, logRoot: logRoot, mapRoot: mapRoot)
        let signature = try key.signature(for: Data(body.utf8), context: LogKey.signatureContext)
        let line = "— \(origin) \((logKey.keyID + signature.rawRepresentation).base64EncodedString())\n"
        return Checkpoint(origin: origin, size: size, logRoot: logRoot, mapRoot: mapRoot, note: body + "\n" + line)
    }

    private init(origin: String, size: UInt64, logRoot: Hash256, mapRoot: Hash256, note: String) {
        self.origin = origin
        self.size = size
        self.logRoot = logRoot
        self.mapRoot = mapRoot
        self.note = note
    }

    /// Parses `note` strictly and verifies its signature from `key`: exactly the four body lines, one blank line,
    /// then 1–100 signature lines; lines from other keys (witnesses) are allowed and ignored, the line from `key`
    /// must be present once and both halves of its signature must verify.
    public init(note: String, verifyingWith key: LogKey) throws {
        guard note.utf8.count <= 1 << 20 else { throw TransparencyError(.malformed, "a checkpoint is over 1 MiB") }
        guard !note.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\n" || $0.value == 0x7F }) else {
            throw TransparencyError(.malformed, "a signed note has no control characters other than newline")
        }
        guard let split = note.range(of: "\n\n", options: .backwards) else {
            throw TransparencyError(.malformed, "a checkpoint is a signed note: text, a blank line, signature lines")
        }
        let body = String(note[..<split.lowerBound]) + "\n"
        let signatures = note[split.upperBound...]
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        guard lines.count == 4 else {
            throw TransparencyError(
                .malformed,
                "a checkpoint's text has 4 lines (origin, size, log root, map root), not \(lines.count)")
        }
        let origin = String(lines[0])
        guard origin == key.origin else {
            throw TransparencyError(
                .malformed, "the checkpoint is from \(origin.debugDescription), not the pinned log \(key.origin)")
        }
        let sizeText = lines[1]
        guard let size = UInt64(sizeText), String(size) == sizeText else {
            throw TransparencyError(.malformed, "the checkpoint size \(sizeText.debugDescription) is not a decimal")
        }
        let logRoot = try Checkpoint.hash(base64: lines[2], what: "log root")
        guard lines[3].hasPrefix("map ") else {
            throw TransparencyError(.malformed, "the checkpoint's fourth line is `map <base64 map root>`")
        }
        let mapRoot = try Checkpoint.hash(base64: lines[3].dropFirst(4), what: "map root")

        guard signatures.hasSuffix("\n") else {
            throw TransparencyError(.malformed, "the checkpoint's signature lines must end with a newline")
        }
        let signatureLines = signatures.dropLast().split(separator: "\n", omittingEmptySubsequences: false)
        guard (1...100).contains(signatureLines.count) else {
            throw TransparencyError(.malformed, "a checkpoint has 1 to 100 signature lines")
        }
        var ours: Data?
        for line in signatureLines {
            guard line.hasPrefix("— ") else {
                throw TransparencyError(.malformed, "a signature line starts with an em dash and a space")
            }
            let parts = line.dropFirst(2).split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, let blob = Data(base64Encoded: String(parts[1])),
                blob.base64EncodedString() == parts[1], blob.count > 4
            else {
                throw TransparencyError(.malformed, "a signature line is `— <name> <base64(key ID ‖ signature)>`")
            }
            guard parts[0] == key.origin, blob.prefix(4) == key.keyID else { continue }
            guard ours == nil else {
                throw TransparencyError(.malformed, "the checkpoint carries two signatures from the log's key")
            }
            ours = Data(blob.dropFirst(4))
        }
        guard let ours else {
            throw TransparencyError(.badSignature, "the checkpoint is not signed by the pinned log key \(key.origin)")
        }
        guard let signature = try? HybridSignature.Signature(rawRepresentation: ours),
            key.publicKey.isValidSignature(signature, for: Data(body.utf8), context: LogKey.signatureContext)
        else {
            throw TransparencyError(
                .badSignature,
                "the checkpoint's signature from \(key.origin) does not verify (both Ed25519 and ML-DSA-65 halves "
                    + "must): refuse it")
        }
        self.init(origin: origin, size: size, logRoot: logRoot, mapRoot: mapRoot, note: note)
    }

    static func hash(base64 text: Substring, what: String) throws -> Hash256 {
        guard let bytes = Data(base64Encoded: String(text)), bytes.base64EncodedString() == text,
            let hash = Hash256(bytes)
        else { throw TransparencyError(.malformed, "the checkpoint's \(what) is not 32 bytes in canonical base64") }
        return hash
    }

    static func checkOrigin(_ origin: String) throws {
        guard !origin.isEmpty, !origin.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == "+" }),
            !origin.unicodeScalars.contains(where: { $0.value < 0x20 })
        else {
            throw TransparencyError(
                .malformed, "an origin (key name) is non-empty with no spaces or '+', such as pixie.example/kt")
        }
    }
}
