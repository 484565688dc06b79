import Age
import Foundation
import SiblingsCrypto
import Testing

/// Encrypting and decrypting between file handles.
@Suite struct StreamingTests {
    static func temporaryFile(_ contents: Data = Data()) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("age-test-\(UUID().uuidString)")
        try contents.write(to: url)
        return url
    }

    static func roundTrip(_ plaintext: Data, armor: Bool) throws -> (file: Data, plaintext: Data) {
        let identity = X25519Identity()
        let plainURL = try temporaryFile(plaintext)
        let cipherURL = try temporaryFile()
        let outURL = try temporaryFile()
        defer { for url in [plainURL, cipherURL, outURL] { try? FileManager.default.removeItem(at: url) } }
        do {
            let input = try FileHandle(forReadingFrom: plainURL)
            let output = try FileHandle(forWritingTo: cipherURL)
            defer {
                try? input.close()
                try? output.close()
            }
            try Age.encrypt(from: input, to: output, recipients: [identity.recipient], armor: armor)
        }
        do {
            let input = try FileHandle(forReadingFrom: cipherURL)
            let output = try FileHandle(forWritingTo: outURL)
            defer {
                try? input.close()
                try? output.close()
            }
            try Age.decrypt(from: input, to: output, identities: [identity])
        }
        let file = try Data(contentsOf: cipherURL)
        #expect(try Age.decrypt(file, identities: [identity]) == plaintext)
        return (file, try Data(contentsOf: outURL))
    }

    @Test(arguments: [0, 1, 65535, 65536, 65537, 10 << 20])
    func roundTrip(count: Int) throws {
        let plaintext = SecureRandom.bytes(count: count)
        for armor in [false, true] {
            let (file, decrypted) = try Self.roundTrip(plaintext, armor: armor)
            #expect(decrypted == plaintext)
            if !armor {
                // Header (168) + nonce (16) + one 16-byte tag per chunk; an empty payload is one empty chunk.
                let chunks = max(1, (count + 65535) / 65536)
                #expect(file.count == 168 + 16 + count + 16 * chunks)
            }
        }
    }

    @Test func truncatedIsAnError() throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: 3 * 65536)
        let file = try Age.encrypt(plaintext, to: [identity.recipient])
        // Cut at a chunk boundary, inside a chunk, and inside the nonce: never a short success.
        for cut in [200 + 65536 + 16, 200 + 65536 + 16 + 10, 190, file.count - 1] {
            let url = try Self.temporaryFile(file.prefix(cut))
            let outURL = try Self.temporaryFile()
            defer {
                try? FileManager.default.removeItem(at: url)
                try? FileManager.default.removeItem(at: outURL)
            }
            let input = try FileHandle(forReadingFrom: url)
            let output = try FileHandle(forWritingTo: outURL)
            do {
                try Age.decrypt(from: input, to: output, identities: [identity])
                Issue.record("a file cut at \(cut) of \(file.count) bytes decrypted")
            } catch let error as AgeError {
                #expect(error.code == .payloadFailure || error.code == .malformedHeader, "\(error)")
            }
            try input.close()
            try output.close()
            let written = try Data(contentsOf: outURL)
            #expect(written.count % 65536 == 0)
            #expect(written == plaintext.prefix(written.count))
        }
    }
}
