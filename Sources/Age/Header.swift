import Foundation
import SiblingsCrypto

/// One recipient stanza of an age header: `-> type arguments...` and a body.
public struct AgeStanza: Sendable, Equatable {
    /// The first argument: `X25519`, `scrypt`, `mlkem768x25519`, or anything else (ignored by identities
    /// that do not know it).
    public var type: String
    /// The arguments after the type.
    public var arguments: [String]
    public var body: Data

    public init(type: String, arguments: [String], body: Data) {
        self.type = type
        self.arguments = arguments
        self.body = body
    }

    /// The stanza as the header writes it (and the plugin protocol sends it): `-> type arguments...`, then the
    /// body in canonical unpadded base64, 64 columns a line, the last line shorter (empty when the body fills
    /// whole lines, or is empty).
    var encoded: String {
        var text = "-> " + ([type] + arguments).joined(separator: " ") + "\n"
        let encodedBody = StrictBase64.encodeUnpadded(body)
        var index = encodedBody.startIndex
        while true {
            let end =
                encodedBody.index(index, offsetBy: AgeHeader.columns, limitedBy: encodedBody.endIndex)
                ?? encodedBody.endIndex
            text += encodedBody[index..<end] + "\n"
            if encodedBody.distance(from: index, to: end) < AgeHeader.columns { break }
            index = end
        }
        return text
    }
}

/// The age v1 header (age spec, "Header"): the version line, the stanzas and the MAC.
struct AgeHeader {
    static let versionLine = "age-encryption.org/v1"
    static let columns = 64
    /// The longest header line read before giving up (a hybrid stanza's argument line is ~1.5 KB).
    static let lineLimit = 1 << 20

    var stanzas: [AgeStanza]
    /// The header from its first byte through `---`: what the MAC covers.
    var authenticatedBytes: Data
    var mac: Data

    /// `true` when every byte is a VCHAR (0x21...0x7E), the spec's "arbitrary string".
    static func isArbitraryString(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7e }
    }

    /// The header without its MAC, through `---`.
    static func encode(_ stanzas: [AgeStanza]) -> Data {
        Data((versionLine + "\n" + stanzas.map(\.encoded).joined() + "---").utf8)
    }

    /// The MAC key: HKDF-SHA-256(file key, salt empty, info "header").
    static func mac(fileKey: SymmetricKey, authenticatedBytes: Data) throws -> Data {
        let key = try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: fileKey, info: Data("header".utf8), outputByteCount: 32)
        return HMAC<SHA256>.authenticationCode(for: authenticatedBytes, using: key).rawRepresentation
    }

    /// Parses a header in exactly the spec's grammar, consuming it (and its final `\n`) from `input`.
    static func parse(_ input: ByteInput) throws -> AgeHeader {
        var authenticated = Data()
        func line() throws -> (text: Substring, raw: Data) {
            guard
                let raw = try input.readLine(
                    limit: lineLimit, tooLong: AgeError.header("a header line is longer than \(lineLimit) bytes"))
            else { throw AgeError.header("the header ends before its MAC line") }
            guard raw.last == 0x0a else { throw AgeError.header("the header ends before its MAC line") }
            guard let text = String(data: raw.dropLast(), encoding: .utf8) else {
                throw AgeError.header("a header line is not text")
            }
            return (Substring(text), raw)
        }

        guard let first = try input.readLine(limit: 256, tooLong: AgeError.header("the first line is too long")),
            !first.isEmpty
        else { throw AgeError.header("the file is empty") }
        guard first == Data((versionLine + "\n").utf8) else {
            let prefix = Data("age-encryption.org/".utf8)
            if first.starts(with: prefix), !first.starts(with: Data(versionLine.utf8)) {
                throw AgeError(
                    .unsupportedVersion,
                    "the file is for age format \(String(decoding: first.dropLast(), as: UTF8.self)), "
                        + "this library reads only age-encryption.org/v1: use a newer age to decrypt it")
            }
            throw AgeError.header("the first line is not exactly \"\(versionLine)\" followed by a line feed")
        }
        authenticated.append(first)

        var stanzas: [AgeStanza] = []
        while true {
            let (text, raw) = try line()
            if text.hasPrefix("---") {
                guard text.hasPrefix("--- ") else { throw AgeError.header("the MAC line does not start with \"--- \"") }
                guard let mac = StrictBase64.decodeUnpadded(text.dropFirst(4)), mac.count == 32 else {
                    throw AgeError.header("the MAC is not 32 bytes of canonical unpadded base64")
                }
                authenticated.append(Data("---".utf8))
                return AgeHeader(stanzas: stanzas, authenticatedBytes: authenticated, mac: mac)
            }
            guard text.hasPrefix("-> ") else {
                throw AgeError.header(
                    "a line that should start a stanza (\"-> \") or the MAC (\"--- \") starts otherwise")
            }
            let arguments = text.dropFirst(3).split(separator: " ", omittingEmptySubsequences: false)
            guard arguments.allSatisfy(isArbitraryString) else {
                throw AgeError.header("a stanza argument is empty or has a character outside ASCII 0x21...0x7E")
            }
            authenticated.append(raw)
            var body = Data()
            while true {
                let (bodyLine, bodyRaw) = try line()
                guard bodyLine.utf8.count <= columns else {
                    throw AgeError.header("a stanza body line is longer than \(columns) columns")
                }
                guard let decoded = StrictBase64.decodeUnpadded(bodyLine) else {
                    throw AgeError.header("a stanza body line is not canonical unpadded base64")
                }
                authenticated.append(bodyRaw)
                body.append(decoded)
                if bodyLine.utf8.count < columns { break }
            }
            stanzas.append(
                AgeStanza(type: String(arguments[0]), arguments: arguments.dropFirst().map(String.init), body: body))
        }
    }
}
