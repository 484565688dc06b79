import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("AES-256-GCM")
struct AESGCMTests {
    /// Our policy for NIST's parameter sets: 96- and 1024-bit IVs are accepted (the 8-bit IVs are
    /// refused: shorter than 12 bytes); only full 128-bit tags are produced or accepted.
    @Test("NIST CAVP encrypt set (gcmEncryptExtIV256.rsp): every record")
    func nistEncrypt() throws {
        var checked = 0
        for record in try Vectors.records("classic/gcmEncryptExtIV256.rsp") {
            let key = SymmetricKey(data: try record.bytes("Key"))
            let iv = try record.bytes("IV")
            let tagLength = try record.int("Taglen") / 8
            guard iv.count >= 12 else {
                expectCryptoError(.incorrectParameterSize) { try AES.GCM.Nonce(data: iv) }
                continue
            }
            let box = try AES.GCM.seal(
                try record.bytes("PT"), using: key, nonce: try AES.GCM.Nonce(data: iv),
                authenticating: try record.bytes("AAD"))
            #expect(box.ciphertext == (try record.bytes("CT")), "\(record)")
            // A truncated NIST tag is the prefix of the full tag we always produce.
            #expect(box.tag.prefix(tagLength) == (try record.bytes("Tag")), "\(record)")

            var sealer = try AES.GCM.StreamingSealer(
                using: key, nonce: try AES.GCM.Nonce(data: iv), authenticating: try record.bytes("AAD"))
            var streamed = Data()
            var rest = try record.bytes("PT")
            while !rest.isEmpty {
                let take = min(rest.count, randomLength(1...20))
                streamed += try sealer.update(rest.prefix(take))
                rest = rest.dropFirst(take)
            }
            #expect(streamed == box.ciphertext)
            #expect(try sealer.finalize() == box.tag)
            checked += 1
        }
        #expect(checked == 7875 * 2 / 3)
    }

    @Test("NIST CAVP decrypt set (gcmDecrypt256.rsp): every passing record opens, every FAIL record is refused")
    func nistDecrypt() throws {
        var opened = 0
        var refused = 0
        for record in try Vectors.records("classic/gcmDecrypt256.rsp") {
            let key = SymmetricKey(data: try record.bytes("Key"))
            let iv = try record.bytes("IV")
            let tag = try record.bytes("Tag")
            guard iv.count >= 12 else {
                expectCryptoError(.incorrectParameterSize) { try AES.GCM.Nonce(data: iv) }
                continue
            }
            guard tag.count == 16 else {
                expectCryptoError(.incorrectParameterSize) {
                    try AES.GCM.SealedBox(
                        nonce: try AES.GCM.Nonce(data: iv), ciphertext: try record.bytes("CT"), tag: tag)
                }
                continue
            }
            let box = try AES.GCM.SealedBox(
                nonce: try AES.GCM.Nonce(data: iv), ciphertext: try record.bytes("CT"), tag: tag)
            if record.has("FAIL") {
                expectCryptoError(.authenticationFailure) {
                    try AES.GCM.open(box, using: key, authenticating: try record.bytes("AAD"))
                }
                refused += 1
            } else {
                #expect(
                    try AES.GCM.open(box, using: key, authenticating: try record.bytes("AAD"))
                        == (try record.bytes("PT")))
                opened += 1
            }
        }
        #expect(opened > 0 && refused > 0)
    }

    @Test("pyca/cryptography opens what we seal, and we open what it seals")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let key = randomBytes(32)
            let nonce = randomBytes(12)
            let aad = randomBytes(randomLength(0...64))
            let plaintext = randomBytes(randomLength(0...2000))
            let box = try AES.GCM.seal(
                plaintext, using: SymmetricKey(data: key), nonce: try AES.GCM.Nonce(data: nonce), authenticating: aad)
            let opened = try oracle.bytes(
                "aead_open",
                [
                    "cipher": "aes-256-gcm", "key": key, "nonce": nonce, "aad": aad,
                    "ciphertext": box.ciphertext + box.tag,
                ])
            #expect(opened == plaintext)

            let theirs = try oracle.bytes(
                "aead_seal", ["cipher": "aes-256-gcm", "key": key, "nonce": nonce, "aad": aad, "plaintext": plaintext])
            let combined = try AES.GCM.SealedBox(combined: nonce + theirs)
            #expect(try AES.GCM.open(combined, using: SymmetricKey(data: key), authenticating: aad) == plaintext)
        }
    }

    @Test("any change to ciphertext, tag, nonce or associated data is refused")
    func tampering() throws {
        let key = SymmetricKey(size: .bits256)
        let aad = Data("header".utf8)
        let box = try AES.GCM.seal(Data("attack at dawn".utf8), using: key, authenticating: aad)
        let combined = try #require(box.combined)
        for index in combined.indices {
            var altered = combined
            altered[index] ^= 0x80
            expectCryptoError(.authenticationFailure) {
                try AES.GCM.open(try AES.GCM.SealedBox(combined: altered), using: key, authenticating: aad)
            }
        }
        expectCryptoError(.authenticationFailure) {
            try AES.GCM.open(box, using: key, authenticating: Data("headex".utf8))
        }
        expectCryptoError(.authenticationFailure) {
            try AES.GCM.open(box, using: SymmetricKey(size: .bits256), authenticating: aad)
        }
    }

    @Test("one key seals and opens many messages in turn and from many tasks: same bytes as a fresh key")
    func keyReuse() async throws {
        let key = SymmetricKey(size: .bits256)
        let messages = (0..<50).map { randomBytes($0 * 37) }
        for message in messages {
            let nonce = AES.GCM.Nonce()
            let box = try AES.GCM.seal(message, using: key, nonce: nonce, authenticating: Data("a".utf8))
            // A key made from the same bytes has no cached contexts: the results must be identical.
            let fresh = try AES.GCM.seal(
                message, using: SymmetricKey(data: key.withUnsafeBytes { Data($0) }), nonce: nonce,
                authenticating: Data("a".utf8))
            #expect(box.ciphertext == fresh.ciphertext && box.tag == fresh.tag)
            // A failed open in between must not disturb the next operation on the same key.
            expectCryptoError(.authenticationFailure) {
                try AES.GCM.open(box, using: key, authenticating: Data("b".utf8))
            }
            #expect(try AES.GCM.open(box, using: key, authenticating: Data("a".utf8)) == message)
        }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let message = messages[index % messages.count]
                    let box = try AES.GCM.seal(message, using: key)
                    return try AES.GCM.open(box, using: key) == message
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }

    @Test("wrong key, nonce, tag and box sizes are typed errors")
    func sizes() {
        expectCryptoError(.incorrectKeySize) { try AES.GCM.seal(Data(), using: SymmetricKey(size: .bits128)) }
        expectCryptoError(.incorrectParameterSize) { try AES.GCM.Nonce(data: Data(count: 11)) }
        expectCryptoError(.incorrectParameterSize) { try AES.GCM.SealedBox(combined: Data(count: 27)) }
        expectCryptoError(.incorrectParameterSize) {
            try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(), ciphertext: Data(), tag: Data(count: 12))
        }
    }

    @Test("file seal and open round-trip in pieces; a tampered file leaves nothing at the destination")
    func files() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("siblings-gcm-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let plain = folder.appendingPathComponent("plain")
        let sealed = folder.appendingPathComponent("sealed")
        let opened = folder.appendingPathComponent("opened")
        let message = randomBytes(3 * 4096 + 17)
        try message.write(to: plain)
        let key = SymmetricKey(size: .bits256)
        let nonce = AES.GCM.Nonce()

        try AES.GCM.seal(fileAt: plain, to: sealed, using: key, nonce: nonce, chunkByteCount: 4096)
        let sealedBytes = try Data(contentsOf: sealed)
        let oneShot = try AES.GCM.seal(message, using: key, nonce: nonce)
        #expect(sealedBytes == oneShot.ciphertext + oneShot.tag)

        try AES.GCM.open(fileAt: sealed, to: opened, using: key, nonce: nonce, chunkByteCount: 4096)
        #expect(try Data(contentsOf: opened) == message)

        for index in [0, 5000, sealedBytes.count - 1] {
            var altered = sealedBytes
            altered[index] ^= 0x01
            try altered.write(to: sealed)
            let target = folder.appendingPathComponent("must-not-appear")
            expectCryptoError(.authenticationFailure) {
                try AES.GCM.open(fileAt: sealed, to: target, using: key, nonce: nonce, chunkByteCount: 4096)
            }
            #expect(!FileManager.default.fileExists(atPath: target.path))
        }
        try Data(count: 15).write(to: sealed)
        expectCryptoError(.authenticationFailure) {
            try AES.GCM.open(fileAt: sealed, to: opened, using: key, nonce: nonce)
        }
        // No temporary files are left behind by any failure.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["opened", "plain", "sealed"])
        expectCryptoError(.io) {
            try AES.GCM.seal(fileAt: folder.appendingPathComponent("absent"), to: sealed, using: key, nonce: nonce)
        }
    }
}
