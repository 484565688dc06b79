import Foundation
@_spi(Testing) import SiblingsCrypto
import SiblingsTestSupport
import Testing

/// Our own pinned vectors for the hybrid signature (hybrid-keygen-vectors.json beside this file, written by
/// Tests/Reference/pinned_vectors.py from pyca/cryptography and dilithium-py): the seed's expansion into
/// the Ed25519 seed and ML-DSA-65's ξ, the public key, and a signature over M' whose Ed25519 half is
/// pyca's and whose ML-DSA-65 half is dilithium-py's deterministic (rnd = 0^32) signature.
@Suite("Hybrid signature key derivation: pinned vectors from pyca/cryptography and dilithium-py")
struct HybridKeygenVectorTests {
    struct VectorFile: Decodable {
        let domain: String
        let keygenLabel: String
        let cases: [Case]
    }

    struct Case: Decodable {
        let seed: String
        let ed25519Seed: String
        let mldsaXi: String
        let publicKey: String
        let message: String
        let context: String
        let representative: String
        let ed25519Signature: String
        let mldsaSignature: String
    }

    static let domain = Data("siblings/hybrid-signature/v1".utf8)

    static func load() throws -> VectorFile { try PinnedVectors.load(VectorFile.self, "hybrid-keygen-vectors.json") }

    static func hex(_ text: String) throws -> Data { try PinnedVectors.hex(text) }

    @Test("the file's labels are the ones the code uses")
    func labels() throws {
        let file = try Self.load()
        #expect(try Self.hex(file.domain) == Self.domain)
        #expect(try Self.hex(file.keygenLabel) == Data("siblings/hybrid-signature/v1/keygen".utf8))
        #expect(file.cases.count == 8)
    }

    @Test("seed → Ed25519 seed ‖ ML-DSA-65 ξ → public key, as pyca and dilithium-py derive them")
    func keys() throws {
        for (index, vector) in try Self.load().cases.enumerated() {
            let seed = try Self.hex(vector.seed)
            let publicKey = try Self.hex(vector.publicKey)
            let key = try HybridSignature.PrivateKey(seedRepresentation: seed)
            #expect(key.seedRepresentation == seed, "case \(index)")
            #expect(key.publicKey.rawRepresentation == publicKey, "case \(index)")
            #expect(try HybridSignature.PublicKey(rawRepresentation: publicKey) == key.publicKey, "case \(index)")
            // Each half of the public key comes from its half of the expanded seed.
            let ed25519 = try Curve25519.Signing.PrivateKey(rawRepresentation: try Self.hex(vector.ed25519Seed))
            #expect(ed25519.publicKey.rawRepresentation == publicKey.prefix(32), "case \(index)")
            let mldsa = try MLDSA65.PrivateKey(seedRepresentation: try Self.hex(vector.mldsaXi))
            #expect(mldsa.publicKey.rawRepresentation == publicKey.dropFirst(32), "case \(index)")
        }
    }

    @Test("M', the Ed25519 half and the deterministic ML-DSA-65 half match; the pinned signature verifies")
    func signatures() throws {
        for (index, vector) in try Self.load().cases.enumerated() {
            let message = try Self.hex(vector.message)
            let context = try Self.hex(vector.context)
            let representative = try Self.hex(vector.representative)
            let ed25519Signature = try Self.hex(vector.ed25519Signature)
            let mldsaSignature = try Self.hex(vector.mldsaSignature)
            #expect(
                representative == Self.domain + Data([0, UInt8(context.count)]) + context + message, "case \(index)")

            let key = try HybridSignature.PrivateKey(seedRepresentation: try Self.hex(vector.seed))
            let signature = try HybridSignature.Signature(rawRepresentation: ed25519Signature + mldsaSignature)
            #expect(key.publicKey.isValidSignature(signature, for: message, context: context), "case \(index)")
            #expect(
                !key.publicKey.isValidSignature(signature, for: message, context: context + Data([0])),
                "case \(index)")

            // Ed25519 is deterministic, so our hybrid signature's first half is pyca's exactly.
            let ours = try key.signature(for: message, context: context)
            #expect(ours.rawRepresentation.prefix(64) == ed25519Signature, "case \(index)")
            #expect(key.publicKey.isValidSignature(ours, for: message, context: context), "case \(index)")
            // Our hybrid signing is hedged; with rnd = 0^32, ML-DSA-65 under ξ gives dilithium-py's half.
            let mldsa = try MLDSA65.PrivateKey(seedRepresentation: try Self.hex(vector.mldsaXi))
            #expect(
                try mldsa.deterministicSignature(for: representative, context: Self.domain) == mldsaSignature,
                "case \(index)")
        }
    }
}
