import Foundation
import PixieWire
import Testing

/// The JSON examples of docs/pixie-protocol.md, as written there, decoded with PixieWire's own types: each one
/// marked `<!-- example: TYPE -->` right before its ```json block must decode as TYPE and encode back to the same
/// keys and values, so the document and the code cannot drift apart. `"<base64url, N bytes>"` and
/// `"<hex, N bytes>"` stand for values of that many bytes.
@Suite("docs/pixie-protocol.md: every JSON example decodes with PixieWire and encodes back the same")
struct DocumentedExamplesTests {
    /// Each documented type: decode the example, and encode what was decoded.
    static let types: [String: @Sendable (Data) throws -> Data] = [
        "APIErrorResponse": { try again(APIErrorResponse.self, $0) },
        "PhoneVerifyAPI.StartResponse": { try again(PhoneVerifyAPI.StartResponse.self, $0) },
        "PhoneVerifyAPI.CheckResponse": { try again(PhoneVerifyAPI.CheckResponse.self, $0) },
        "IdentityAPI.DiscoveryResponse": { try again(IdentityAPI.DiscoveryResponse.self, $0) },
        "IdentityAPI.SiblingsResponse": { try again(IdentityAPI.SiblingsResponse.self, $0) },
        "CredentialAPI.SenderCertResponse": { try again(CredentialAPI.SenderCertResponse.self, $0) },
        "BlobAPI.UploadResponse": { try again(BlobAPI.UploadResponse.self, $0) },
        "TrustBundle": { try again(TrustBundle.self, $0) },
    ]

    static func again<T: Codable>(_ type: T.Type, _ data: Data) throws -> Data {
        try JSONEncoder().encode(try JSONDecoder().decode(type, from: data))
    }

    /// The examples in the document, in order: the type each is marked with, and its JSON.
    static func examples() throws -> [(type: String, json: String, line: Int)] {
        let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/pixie-protocol.md")
        let lines = try String(contentsOf: document, encoding: .utf8).components(separatedBy: "\n")
        var found: [(String, String, Int)] = []
        var index = 0
        while index < lines.count {
            let line = lines[index].trimmingCharacters(in: .whitespaces)
            guard line.hasPrefix("<!-- example: "), line.hasSuffix(" -->") else {
                index += 1
                continue
            }
            let type = String(line.dropFirst("<!-- example: ".count).dropLast(" -->".count))
            guard index + 1 < lines.count, lines[index + 1].trimmingCharacters(in: .whitespaces) == "```json" else {
                throw Failure("the example for \(type) at line \(index + 1) is not followed by a ```json block")
            }
            var body: [String] = []
            index += 2
            while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                body.append(lines[index])
                index += 1
            }
            found.append((type, body.joined(separator: "\n"), index))
        }
        return found
    }

    /// `json` with its placeholders replaced by values of their length.
    static func filled(_ json: String) throws -> String {
        var text = json
        for (pattern, encode) in [
            (#""<base64url, (\d+) bytes>""#, { (bytes: Data) in bytes.base64URLEncodedString() }),
            (#""<hex, (\d+) bytes>""#, { (bytes: Data) in bytes.map { String(format: "%02x", $0) }.joined() }),
        ] {
            let expression = try NSRegularExpression(pattern: pattern)
            while let match = expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
                let whole = Range(match.range, in: text), let count = Range(match.range(at: 1), in: text)
            {
                let bytes = Data((0..<Int(text[count])!).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
                text.replaceSubrange(whole, with: "\"" + encode(bytes) + "\"")
            }
        }
        return text
    }

    @Test("each example decodes as its type, and encodes back to exactly its keys and values")
    func examplesDecode() throws {
        let examples = try Self.examples()
        // The siblings list, discovery, phone verification, sender certs, blobs, errors and the trust bundle.
        #expect(examples.count >= 9)
        #expect(Set(examples.map(\.type)) == Set(Self.types.keys))
        for example in examples {
            guard let decode = Self.types[example.type] else {
                Issue.record("line \(example.line): no PixieWire type is registered as \(example.type)")
                continue
            }
            let written = Data(try Self.filled(example.json).utf8)
            let encoded: Data
            do {
                encoded = try decode(written)
            } catch {
                Issue.record("line \(example.line): the \(example.type) example does not decode: \(error)")
                continue
            }
            // Decoding ignores keys a type does not know, so the example must also be what the type writes.
            let documented = try JSONSerialization.jsonObject(with: written) as? NSDictionary
            let actual = try JSONSerialization.jsonObject(with: encoded) as? NSDictionary
            #expect(
                documented == actual,
                "line \(example.line): \(example.type) writes \(String(decoding: encoded, as: UTF8.self))")
        }
    }

    @Test("a documented key the type does not have is caught")
    func strayKeyCaught() throws {
        let written = Data(#"{"error": "x", "reason": "y", "hint": "z"}"#.utf8)
        let encoded = try Self.again(APIErrorResponse.self, written)
        #expect(
            try JSONSerialization.jsonObject(with: written) as? NSDictionary
                != JSONSerialization.jsonObject(with: encoded) as? NSDictionary)
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
