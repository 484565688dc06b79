import Age
import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

/// Every C2SP CCTV age vector (../shared/vectors/age, format in its README.md).
@Suite struct CCTVTests {
    /// The CCTV `expect` value an ``AgeError`` code stands for.
    static func expectation(for code: AgeError.Code) -> String {
        switch code {
        case .noMatchingIdentity: "no match"
        case .headerMACFailure: "HMAC failure"
        case .malformedHeader, .unsupportedVersion, .workFactorTooLarge: "header failure"
        case .payloadFailure: "payload failure"
        case .armorFailure: "armor failure"
        default: "other: \(code)"
        }
    }

    @Test func allVectors() throws {
        let vectors = try Vectors.ageVectors()
        var checked = 0
        for vector in vectors {
            var identities: [any AgeIdentity] = try vector.values("identity").map { string -> any AgeIdentity in
                if string.hasPrefix("AGE-SECRET-KEY-PQ-") { return try HybridIdentity(string: string) }
                return try X25519Identity(string: string)
            }
            identities += vector.values("passphrase").map { ScryptIdentity(passphrase: $0) }
            var released = SHA256()
            var releasedCount = 0
            var outcome = "success"
            do {
                try Age.decrypt(vector.file, identities: identities) { chunk in
                    released.update(data: chunk)
                    releasedCount += chunk.count
                }
            } catch let error as AgeError {
                outcome = Self.expectation(for: error.code)
                #expect(!error.reason.isEmpty)
            }
            let expect = vector.value("expect") ?? "missing"
            #expect(outcome == expect, "\(vector.name): expected \(expect), got \(outcome)")
            if let payload = vector.value("payload") {
                #expect(
                    released.finalize().rawRepresentation.hexString == payload, "\(vector.name): released plaintext")
            } else {
                #expect(releasedCount == 0, "\(vector.name): released \(releasedCount) bytes")
            }
            checked += 1
        }
        #expect(checked == 143)
    }
}
