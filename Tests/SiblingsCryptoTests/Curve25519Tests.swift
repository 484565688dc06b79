import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("X25519")
struct X25519Tests {
    typealias PrivateKey = Curve25519.KeyAgreement.PrivateKey
    typealias PublicKey = Curve25519.KeyAgreement.PublicKey

    @Test("RFC 7748 section 5.2 vectors")
    func rfc7748() throws {
        let records = try Vectors.records("classic/x25519-rfc7748.txt")
        #expect(records.count == 3)
        for record in records {
            let key = try PrivateKey(rawRepresentation: try record.bytes("INPUT_SCALAR"))
            let peer = try PublicKey(rawRepresentation: try record.bytes("INPUT_U"))
            let shared = try key.sharedSecretFromKeyAgreement(with: peer)
            #expect(shared.withUnsafeBytes { Data($0) } == (try record.bytes("OUTPUT_U")), "\(record)")
        }
    }

    @Test("agreement with pyca/cryptography both ways")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let ours = PrivateKey()
            #expect(
                ours.publicKey.rawRepresentation
                    == (try oracle.bytes("x25519_public", ["private": ours.rawRepresentation])))
            let theirs = try oracle.call("x25519_generate")
            let theirPublic = try PublicKey(rawRepresentation: try #require(Data(hex: theirs["public"] as! String)))
            let theirPrivate = try #require(Data(hex: theirs["private"] as! String))
            let shared = try ours.sharedSecretFromKeyAgreement(with: theirPublic).withUnsafeBytes { Data($0) }
            let referenceShared = try oracle.bytes(
                "x25519_shared", ["private": theirPrivate, "peer": ours.publicKey.rawRepresentation])
            #expect(shared == referenceShared)
        }
    }

    @Test("a low-order peer key gives an all-zero secret, which is refused")
    func lowOrderPeer() throws {
        let key = PrivateKey()
        for u in [Data(count: 32), Data([1]) + Data(count: 31)] {
            expectCryptoError(.invalidSharedSecret) {
                try key.sharedSecretFromKeyAgreement(with: try PublicKey(rawRepresentation: u))
            }
        }
    }

    @Test("keys of the wrong length are refused")
    func sizes() {
        expectCryptoError(.incorrectKeySize) { try PrivateKey(rawRepresentation: Data(count: 31)) }
        expectCryptoError(.incorrectKeySize) { try PublicKey(rawRepresentation: Data(count: 33)) }
    }

    @Test("HKDF from a shared secret equals HKDF over its bytes")
    func sharedSecretHKDF() throws {
        let a = PrivateKey()
        let b = PrivateKey()
        let secret = try a.sharedSecretFromKeyAgreement(with: b.publicKey)
        let derived = try secret.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: Data("s".utf8), sharedInfo: Data("i".utf8), outputByteCount: 32)
        let direct = try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret.withUnsafeBytes { Data($0) }), salt: Data("s".utf8),
            info: Data("i".utf8),
            outputByteCount: 32)
        #expect(derived == direct)
        #expect(
            try b.sharedSecretFromKeyAgreement(with: a.publicKey).withUnsafeBytes { Data($0) }
                == secret.withUnsafeBytes { Data($0) })
    }
}

@Suite("Ed25519")
struct Ed25519Tests {
    typealias PrivateKey = Curve25519.Signing.PrivateKey
    typealias PublicKey = Curve25519.Signing.PublicKey

    struct EdgeCase: Decodable {
        let number: Int
        let key: String
        let sig: String
        let msg: String
        let flags: [String]?
    }

    /// The documented policy (docs/crypto-core.md): accept exactly the vectors whose flags are a subset
    /// of {low_order_component_A, low_order_component_R}; reject every low-order A or R in any encoding,
    /// every non-canonical encoding and every low-order residue.
    @Test("CCTV ed25519 edge cases follow the documented verify_strict policy")
    func edgeCases() throws {
        let cases = try Vectors.json([EdgeCase].self, "ed25519/ed25519vectors.json")
        #expect(cases.count == 914)
        let allowed: Set<String> = ["low_order_component_A", "low_order_component_R"]
        var accepted = 0
        for edge in cases {
            let expected = Set(edge.flags ?? []).isSubset(of: allowed)
            let key = try? PublicKey(rawRepresentation: try #require(Data(hex: edge.key)))
            let verdict = key?.isValidSignature(try #require(Data(hex: edge.sig)), for: Data(edge.msg.utf8)) ?? false
            #expect(verdict == expected, "vector \(edge.number) flags \(edge.flags ?? [])")
            if verdict { accepted += 1 }
        }
        #expect(accepted > 0)
    }

    @Test("sign and verify with pyca/cryptography both ways")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let message = randomBytes(randomLength(0...300))
            let ours = PrivateKey()
            #expect(
                ours.publicKey.rawRepresentation
                    == (try oracle.bytes("ed25519_public", ["private": ours.rawRepresentation])))
            let signature = try ours.signature(for: message)
            #expect(
                try oracle.bool(
                    "ed25519_verify",
                    ["public": ours.publicKey.rawRepresentation, "message": message, "signature": signature]))
            // Ed25519 is deterministic: the reference produces the same bytes.
            #expect(
                signature
                    == (try oracle.bytes("ed25519_sign", ["private": ours.rawRepresentation, "message": message])))

            let theirs = try oracle.call("ed25519_generate")
            let theirPrivate = try #require(Data(hex: theirs["private"] as! String))
            let theirPublic = try PublicKey(rawRepresentation: try #require(Data(hex: theirs["public"] as! String)))
            let theirSignature = try oracle.bytes("ed25519_sign", ["private": theirPrivate, "message": message])
            #expect(theirPublic.isValidSignature(theirSignature, for: message))
            var altered = theirSignature
            altered[Int.random(in: 0..<64)] ^= 0x04
            #expect(!theirPublic.isValidSignature(altered, for: message))
            #expect(!theirPublic.isValidSignature(theirSignature, for: message + Data([0])))
        }
    }

    @Test("one key signs and verifies many messages in turn and from many tasks at once")
    func reuseAndConcurrency() async throws {
        let key = PrivateKey()
        let publicKey = key.publicKey
        let messages = (0..<64).map { Data("message \($0)".utf8) }
        let signatures = try messages.map { try key.signature(for: $0) }
        for (index, message) in messages.enumerated() {
            // Alternate valid and invalid checks on the same key: a reused context must not remember.
            #expect(publicKey.isValidSignature(signatures[index], for: message))
            #expect(!publicKey.isValidSignature(signatures[(index + 1) % messages.count], for: message))
            #expect(try key.signature(for: message) == signatures[index])
        }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<256 {
                group.addTask {
                    let message = messages[index % messages.count]
                    let signature = try key.signature(for: message)
                    return signature == signatures[index % messages.count]
                        && publicKey.isValidSignature(signature, for: message)
                        && !publicKey.isValidSignature(signature, for: message + Data([1]))
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }

    @Test("malformed keys and signatures are refused without a crash")
    func malformed() throws {
        expectCryptoError(.incorrectKeySize) { try PrivateKey(rawRepresentation: Data(count: 64)) }
        expectCryptoError(.incorrectKeySize) { try PublicKey(rawRepresentation: Data(count: 31)) }
        expectCryptoError(.invalidEncoding) { try PublicKey(rawRepresentation: Data([1]) + Data(count: 31)) }
        let key = PrivateKey()
        let signature = try key.signature(for: Data("m".utf8))
        #expect(!key.publicKey.isValidSignature(signature.prefix(63), for: Data("m".utf8)))
        #expect(!key.publicKey.isValidSignature(signature + Data([0]), for: Data("m".utf8)))
        // S ≥ L (non-canonical S) is refused.
        var highS = signature
        highS.replaceSubrange(32..<64, with: Data(repeating: 0xff, count: 32))
        #expect(!key.publicKey.isValidSignature(highS, for: Data("m".utf8)))
        #expect(try PrivateKey(rawRepresentation: key.rawRepresentation).publicKey == key.publicKey)
    }
}
