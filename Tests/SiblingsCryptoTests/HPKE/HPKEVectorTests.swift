import Foundation
@_spi(Testing) import SiblingsCrypto
import SiblingsTestSupport
import Testing

/// Our own pinned vectors for HPKE with X-Wing (hpke-xwing-vectors.json beside this file, written by
/// Tests/Reference/pinned_vectors.py): DeriveKeyPair, X-Wing's derandomized encapsulation (kyber-py,
/// pyca's X25519, checked by xwing-kem), an RFC 9180 key schedule written in Python on hashlib/hmac,
/// pyca's AEADs, and pyca's own HPKE opening each case's first message. Both ciphersuites.
@Suite("HPKE with X-Wing: pinned vectors from Python (hashlib key schedule, kyber-py, xwing-kem, pyca)")
struct HPKEVectorTests {
    struct VectorFile: Decodable {
        let kemId: Int
        let kdfId: Int
        let cases: [Case]
    }

    struct Case: Decodable {
        let aead: String
        let aeadId: UInt16
        let ikm: String
        let seed: String
        let publicKey: String
        let info: String
        let eseed: String
        let enc: String
        let sharedSecret: String
        let suiteId: String
        let key: String
        let baseNonce: String
        let exporterSecret: String
        /// One context's messages at sequence 0, 1, 2, 3, in order.
        let messages: [Message]
        /// Messages sealed under the same key at large sequence numbers (2^32 + 5, 2^48 + 258).
        let largeSequence: [Message]
        let exports: [Export]
    }

    struct Message: Decodable {
        let sequence: UInt64
        let nonce: String
        let pt: String
        let aad: String
        let ct: String
    }

    struct Export: Decodable {
        let exporterContext: String
        let length: Int
        let value: String

        enum CodingKeys: String, CodingKey {
            case exporterContext
            case length = "L"
            case value
        }
    }

    static func load() throws -> VectorFile { try PinnedVectors.load(VectorFile.self, "hpke-xwing-vectors.json") }

    static func hex(_ text: String) throws -> Data { try PinnedVectors.hex(text) }

    static func data(_ key: SymmetricKey) -> Data { key.withUnsafeBytes { Data($0) } }

    static func ciphersuite(_ vector: Case) throws -> HPKE.Ciphersuite {
        guard let aead = HPKE.AEAD(rawValue: vector.aeadId) else {
            throw VectorError("no AEAD with id \(vector.aeadId)")
        }
        return HPKE.Ciphersuite(kem: .XWingMLKEM768X25519, kdf: .HKDF_SHA256, aead: aead)
    }

    static func privateKey(_ vector: Case) throws -> XWing.PrivateKey {
        try HPKE.deriveKeyPair(inputKeyMaterial: try hex(vector.ikm))
    }

    /// base_nonce XOR I2OSP(sequence, 12) (RFC 9180, section 5.2).
    static func nonce(_ baseNonce: Data, _ sequence: UInt64) -> Data {
        var nonce = baseNonce
        for index in 0..<8 {
            nonce[nonce.endIndex - 1 - index] ^= UInt8(truncatingIfNeeded: sequence >> (8 * index))
        }
        return nonce
    }

    /// Opens `sealed` (ciphertext ‖ tag) with the crypto core's AEAD directly, outside any HPKE context.
    static func open(
        _ aead: HPKE.AEAD, key: SymmetricKey, nonce: Data, sealed: Data, aad: Data
    ) throws -> Data {
        switch aead {
        case .AES_GCM_256:
            return try AES.GCM.open(
                try AES.GCM.SealedBox(
                    nonce: try AES.GCM.Nonce(data: nonce), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16)),
                using: key, authenticating: aad)
        case .chaChaPoly:
            return try ChaChaPoly.open(
                try ChaChaPoly.SealedBox(
                    nonce: try ChaChaPoly.Nonce(data: nonce), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16)),
                using: key, authenticating: aad)
        }
    }

    @Test("the file covers both ciphersuites with KEM 0x647a, KDF 0x0001 and the RFC 9180 suite_id")
    func coverage() throws {
        let file = try Self.load()
        #expect(file.kemId == Int(HPKE.KEM.XWingMLKEM768X25519.rawValue))
        #expect(file.kdfId == Int(HPKE.KDF.HKDF_SHA256.rawValue))
        #expect(file.cases.count == 6)
        #expect(Set(file.cases.map(\.aeadId)) == Set<UInt16>([0x0002, 0x0003]))
        for vector in file.cases {
            let aead = try Self.ciphersuite(vector).aead
            #expect(vector.aead == (aead == .AES_GCM_256 ? "aes-256-gcm" : "chacha20-poly1305"))
            let suiteID = Data("HPKE".utf8) + Data([0x64, 0x7a, 0x00, 0x01, 0x00, UInt8(vector.aeadId)])
            #expect(try Self.hex(vector.suiteId) == suiteID, "\(vector.aead)")
            #expect(vector.messages.map(\.sequence) == [0, 1, 2, 3], "\(vector.aead)")
            #expect(vector.largeSequence.map(\.sequence).contains((1 << 32) + 5), "\(vector.aead)")
            let lengths = vector.exports.map(\.length)
            #expect(lengths.count >= 3 && lengths.contains(1) && lengths.contains(64), "\(vector.aead)")
        }
    }

    @Test("DeriveKeyPair(ikm): the X-Wing seed and public key")
    func deriveKeyPair() throws {
        for vector in try Self.load().cases {
            let key = try Self.privateKey(vector)
            #expect(key.seedRepresentation == (try Self.hex(vector.seed)), "\(vector.aead), ikm \(vector.ikm)")
            #expect(key.publicKey.rawRepresentation == (try Self.hex(vector.publicKey)), "\(vector.aead)")
        }
    }

    @Test("X-Wing with the eseed: enc and the shared secret, both ways")
    func encapsulation() throws {
        for vector in try Self.load().cases {
            let key = try Self.privateKey(vector)
            let enc = try Self.hex(vector.enc)
            let sharedSecret = try Self.hex(vector.sharedSecret)
            let result = try key.publicKey.encapsulate(randomness: try Self.hex(vector.eseed))
            #expect(result.encapsulated == enc, "\(vector.aead)")
            #expect(Self.data(result.sharedSecret) == sharedSecret, "\(vector.aead)")
            #expect(Self.data(try key.decapsulate(enc)) == sharedSecret, "\(vector.aead)")
        }
    }

    @Test("a Sender with the eseed seals the pinned ciphertexts in order and exports the pinned values")
    func sender() throws {
        for vector in try Self.load().cases {
            let key = try Self.privateKey(vector)
            var sender = try HPKE.Sender(
                recipientKey: key.publicKey, ciphersuite: try Self.ciphersuite(vector),
                info: try Self.hex(vector.info), randomness: try Self.hex(vector.eseed))
            #expect(sender.encapsulatedKey == (try Self.hex(vector.enc)), "\(vector.aead)")
            for message in vector.messages {
                let sealed = try sender.seal(try Self.hex(message.pt), authenticating: try Self.hex(message.aad))
                #expect(sealed == (try Self.hex(message.ct)), "\(vector.aead) sequence \(message.sequence)")
            }
            for export in vector.exports {
                let value = try sender.exportSecret(
                    context: try Self.hex(export.exporterContext), outputByteCount: export.length)
                #expect(Self.data(value) == (try Self.hex(export.value)), "\(vector.aead) L = \(export.length)")
            }
        }
    }

    @Test("a Recipient opens the pinned ciphertexts in order and exports the pinned values")
    func recipient() throws {
        for vector in try Self.load().cases {
            var recipient = try HPKE.Recipient(
                privateKey: try Self.privateKey(vector), ciphersuite: try Self.ciphersuite(vector),
                info: try Self.hex(vector.info), encapsulatedKey: try Self.hex(vector.enc))
            for message in vector.messages {
                let opened = try recipient.open(try Self.hex(message.ct), authenticating: try Self.hex(message.aad))
                #expect(opened == (try Self.hex(message.pt)), "\(vector.aead) sequence \(message.sequence)")
            }
            for export in vector.exports {
                let value = try recipient.exportSecret(
                    context: try Self.hex(export.exporterContext), outputByteCount: export.length)
                #expect(Self.data(value) == (try Self.hex(export.value)), "\(vector.aead) L = \(export.length)")
            }
        }
    }

    @Test("a Recipient refuses the pinned messages out of order, replayed or skipped; a refusal does not advance it")
    func outOfOrder() throws {
        for vector in try Self.load().cases {
            let messages = try vector.messages.map {
                (ct: try Self.hex($0.ct), aad: try Self.hex($0.aad), pt: try Self.hex($0.pt))
            }
            var recipient = try HPKE.Recipient(
                privateKey: try Self.privateKey(vector), ciphersuite: try Self.ciphersuite(vector),
                info: try Self.hex(vector.info), encapsulatedKey: try Self.hex(vector.enc))
            // Sequence 0 expected: the second and the last message are refused.
            expectCryptoError(.authenticationFailure) {
                try recipient.open(messages[1].ct, authenticating: messages[1].aad)
            }
            expectCryptoError(.authenticationFailure) {
                try recipient.open(messages[3].ct, authenticating: messages[3].aad)
            }
            #expect(
                try recipient.open(messages[0].ct, authenticating: messages[0].aad) == messages[0].pt, "\(vector.aead)")
            // Sequence 1 expected: the first again (a replay) and the third are refused.
            expectCryptoError(.authenticationFailure) {
                try recipient.open(messages[0].ct, authenticating: messages[0].aad)
            }
            expectCryptoError(.authenticationFailure) {
                try recipient.open(messages[2].ct, authenticating: messages[2].aad)
            }
            for message in messages.dropFirst() {
                #expect(try recipient.open(message.ct, authenticating: message.aad) == message.pt, "\(vector.aead)")
            }
            let late = try #require(vector.largeSequence.first)
            expectCryptoError(.authenticationFailure) {
                try recipient.open(try Self.hex(late.ct), authenticating: try Self.hex(late.aad))
            }
        }
    }

    /// The key schedule's outputs cannot be read from an `HPKE.Context` here (it is internal, and the tests
    /// build in release without testability), so this checks that the pinned key, base_nonce and
    /// exporter_secret are the ones behind the pinned ciphertexts and exports, with the crypto core's AEAD
    /// and HKDF used directly. The Sender test above then ties them to our key schedule. The nonces at
    /// large sequence numbers are checked the same way; our context's own nonce there is not reachable.
    @Test("the pinned key, base_nonce and exporter_secret give the pinned ciphertexts (to sequence 2^48) and exports")
    func keySchedule() throws {
        for vector in try Self.load().cases {
            let aead = try Self.ciphersuite(vector).aead
            let key = SymmetricKey(data: try Self.hex(vector.key))
            let baseNonce = try Self.hex(vector.baseNonce)
            #expect(key.bitCount == 256 && baseNonce.count == 12, "\(vector.aead)")
            for message in vector.messages + vector.largeSequence {
                let nonce = Self.nonce(baseNonce, message.sequence)
                #expect(nonce == (try Self.hex(message.nonce)), "\(vector.aead) sequence \(message.sequence)")
                let opened = try Self.open(
                    aead, key: key, nonce: nonce, sealed: try Self.hex(message.ct), aad: try Self.hex(message.aad))
                #expect(opened == (try Self.hex(message.pt)), "\(vector.aead) sequence \(message.sequence)")
            }
            // Export (section 5.3): LabeledExpand(exporter_secret, "sec", exporter_context, L).
            let exporterSecret = SymmetricKey(data: try Self.hex(vector.exporterSecret))
            let suiteID = try Self.hex(vector.suiteId)
            for export in vector.exports {
                let exporterContext = try Self.hex(export.exporterContext)
                let length = Data([UInt8(export.length >> 8), UInt8(export.length & 0xff)])
                let info = length + Data("HPKE-v1".utf8) + suiteID + Data("sec".utf8) + exporterContext
                let value = try HKDF<SHA256>.expand(
                    pseudoRandomKey: exporterSecret, info: info, outputByteCount: export.length)
                #expect(Self.data(value) == (try Self.hex(export.value)), "\(vector.aead) L = \(export.length)")
            }
        }
    }
}
