import Foundation
import SiblingsCrypto
import Testing
import Transparency

@Suite struct CheckpointTests {
    static let logRoot = Hash256(Data(repeating: 1, count: 32))!
    static let mapRoot = Hash256(Data(repeating: 2, count: 32))!

    static func signed(size: UInt64 = 42) throws -> Checkpoint {
        try Checkpoint.sign(size: size, logRoot: logRoot, mapRoot: mapRoot, origin: testOrigin, key: testKey)
    }

    @Test func signAndParse() throws {
        let checkpoint = try Self.signed()
        #expect(
            checkpoint.note.hasPrefix(
                "pixie.test/kt\n42\nAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"
                    + "map AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n\n— pixie.test/kt "))
        let parsed = try Checkpoint(note: checkpoint.note, verifyingWith: testLogKey)
        #expect(parsed == checkpoint)
        #expect(parsed.size == 42 && parsed.logRoot == Self.logRoot && parsed.mapRoot == Self.mapRoot)
        #expect(testLogKey.keyID.count == 4)
        // A witness's cosignature line is ignored.
        let witnessed = checkpoint.note + "— witness.example/w \(Data(repeating: 9, count: 68).base64EncodedString())\n"
        #expect(try Checkpoint(note: witnessed, verifyingWith: testLogKey).size == 42)
    }

    @Test(arguments: [
        ("pixie.test/kt\n42\n", "\npixie.test/kt\n"),  // an extra line before the size
        ("\n42\n", "\n042\n"),  // a leading zero
        ("\n42\n", "\n+42\n"),
        ("\nmap ", "\nmap  "),
        ("\nmap ", "\nmaps "),
        ("pixie.test/kt\n", "pixie.other/kt\n"),
        ("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ=="),
        ("\n\n— ", "\n\n-- "),
        ("\n\n— ", "\n\n\n— "),
        ("\n\n— ", "\n\n— \r"),
        ("\n42\n", "\n42\r\n"),
    ])
    func strictParsing(find: String, replace: String) throws {
        let note = try Self.signed().note
        let changed = note.replacingOccurrences(of: find, with: replace)
        #expect(changed != note)
        #expect(throws: TransparencyError.self) { try Checkpoint(note: changed, verifyingWith: testLogKey) }
    }

    @Test func missingNewlineOrSignature() throws {
        let note = try Self.signed().note
        // The log key's line twice.
        let line = note[note.range(of: "\n\n")!.upperBound...]
        expectError(.malformed) { _ = try Checkpoint(note: note + line, verifyingWith: testLogKey) }
        for bad in [String(note.dropLast()), String(note[..<note.range(of: "\n\n")!.upperBound]), note + "\n"] {
            #expect(throws: TransparencyError.self) { try Checkpoint(note: bad, verifyingWith: testLogKey) }
        }
    }

    /// A checkpoint whose hybrid signature has only one valid half is refused, whichever half it is.
    @Test(arguments: [0, 10, 63, 64, 100, 3372])
    func oneValidHalfIsRefused(byte: Int) throws {
        let checkpoint = try Self.signed()
        let note = checkpoint.note
        let lineStart = note.range(of: "\n\n— pixie.test/kt ")!.upperBound
        var blob = Data(base64Encoded: String(note[lineStart...].dropLast()))!
        blob[4 + byte] ^= 0x01
        let forged = String(note[..<lineStart]) + blob.base64EncodedString() + "\n"
        expectError(.badSignature) {
            _ = try Checkpoint(note: forged, verifyingWith: testLogKey)
        }
    }

    /// A note signed with only the Ed25519 half of the right key and another key's ML-DSA half.
    @Test func halfFromAnotherKey() throws {
        let other = try HybridSignature.PrivateKey(seedRepresentation: Data(repeating: 8, count: 32))
        let body = Checkpoint.body(origin: testOrigin, size: 5, logRoot: Self.logRoot, mapRoot: Self.mapRoot)
        let good = try testKey.signature(for: Data(body.utf8), context: LogKey.signatureContext).rawRepresentation
        let bad = try other.signature(for: Data(body.utf8), context: LogKey.signatureContext).rawRepresentation
        for mixed in [good.prefix(64) + bad.dropFirst(64), bad.prefix(64) + good.dropFirst(64)] {
            let note = body + "\n— \(testOrigin) \((testLogKey.keyID + mixed).base64EncodedString())\n"
            expectError(.badSignature) {
                _ = try Checkpoint(note: note, verifyingWith: testLogKey)
            }
        }
        let otherKey = try LogKey(origin: testOrigin, publicKey: other.publicKey)
        expectError(.badSignature) {
            _ = try Checkpoint(note: try Self.signed().note, verifyingWith: otherKey)
        }
    }

    @Test func entriesAndLabels() throws {
        let entry = try Entry(label: "discovery/+15551234567", version: 3, value: Data([1, 2, 3]), timestamp: 99)
        #expect(try Entry(encoded: entry.encoded) == entry)
        #expect(
            entry.encoded
                == Data([0x01, 0x00, 0x16]) + Data("discovery/+15551234567".utf8) + Data([0, 0, 0, 0, 0, 0, 0, 3])
                + Data([0, 0, 0, 0, 0, 0, 0, 99]) + Data([0, 0, 0, 3, 1, 2, 3]))
        for bad in ["", "Discovery/x", "/x", "a\nb", String(repeating: "a", count: 33)] {
            #expect(throws: TransparencyError.self) { try Label(bad) }
        }
        for good in ["oprf-keys", "account/abc", "devices/acct/with/slashes"] { _ = try Label(good) }
        #expect(throws: TransparencyError.self) { try Entry(label: "a", version: 0, value: Data(), timestamp: 0) }
        #expect(throws: TransparencyError.self) { try Entry(encoded: entry.encoded + [0]) }
    }
}
