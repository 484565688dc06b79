import Foundation
@_spi(Testing) import PrivacyPass
import SiblingsCrypto
import SiblingsTestSupport
import Testing

/// RFC 9497 Appendix A vectors (../shared/vectors/voprf/allVectors.json), every ristretto255-SHA512 case in all
/// three modes: DeriveKeyPair, Blind with the given blinds, BlindEvaluate with the given proof randomness,
/// Finalize and Evaluate, single and batched.
@Suite struct VOPRFVectorTests {
    struct Suite: Decodable {
        let identifier: String
        let mode: UInt8
        let seed: String
        let keyInfo: String
        let skSm: String
        let pkSm: String?
        let groupDST: String
        let vectors: [Vector]
    }

    struct Vector: Decodable {
        let Batch: Int
        let Blind: String
        let BlindedElement: String
        let EvaluationElement: String
        let Input: String
        let Output: String
        let Info: String?
        let Proof: Proof?
    }

    struct Proof: Decodable {
        let proof: String
        let r: String
    }

    static func suites() throws -> [Suite] {
        let all = try Vectors.json([Suite].self, "voprf/allVectors.json")
        return all.filter { $0.identifier == VOPRF.identifier }
    }

    static func hex(_ text: String) throws -> Data {
        guard let data = Data(hex: text) else { throw VectorError("not hex: \(text)") }
        return data
    }

    /// A comma-separated list of hex values (the batched vectors).
    static func hexList(_ text: String) throws -> [Data] {
        try text.split(separator: ",").map { try hex(String($0)) }
    }

    @Test func everyRistrettoVectorPasses() throws {
        let suites = try Self.suites()
        #expect(suites.count == 3, "one ristretto255-SHA512 suite per mode")
        var checked = 0
        for suite in suites {
            let mode = try #require(VOPRF.Mode(rawValue: suite.mode))
            let key = try VOPRF.PrivateKey(seed: Self.hex(suite.seed), info: Self.hex(suite.keyInfo), mode: mode)
            #expect(key.rawRepresentation == (try Self.hex(suite.skSm)), "DeriveKeyPair skS, mode \(mode)")
            if let pkSm = suite.pkSm {
                #expect(key.publicKey.rawRepresentation == (try Self.hex(pkSm)), "DeriveKeyPair pkS, mode \(mode)")
            }
            let server = VOPRF.Server(mode: mode, privateKey: key)
            let client = try VOPRF.Client(mode: mode, publicKey: mode == .oprf ? nil : key.publicKey)
            for vector in suite.vectors {
                let inputs = try Self.hexList(vector.Input)
                let blinds = try Self.hexList(vector.Blind)
                let info = try vector.Info.map(Self.hex) ?? Data()
                #expect(inputs.count == vector.Batch)
                let (blinded, state) = try client.blind(inputs, info: info, blinds: blinds, using: SystemRandom())
                #expect(blinded == (try Self.hexList(vector.BlindedElement)), "BlindedElement, mode \(mode)")
                let (evaluated, proof) = try server.blindEvaluate(
                    blinded, info: info, proofRandomness: try vector.Proof.map { try Self.hex($0.r) },
                    using: SystemRandom())
                #expect(evaluated == (try Self.hexList(vector.EvaluationElement)), "EvaluationElement, mode \(mode)")
                #expect(proof == (try vector.Proof.map { try Self.hex($0.proof) }), "Proof, mode \(mode)")
                let outputs = try client.finalize(evaluated, proof: proof, state: state)
                let expected = try Self.hexList(vector.Output)
                #expect(outputs == expected, "Output, mode \(mode)")
                for (input, output) in zip(inputs, expected) {
                    #expect(try server.evaluate(input, info: info) == output, "Evaluate, mode \(mode)")
                }
                checked += 1
            }
        }
        #expect(checked == 8, "2 OPRF + 3 VOPRF + 3 POPRF vectors")
    }

    @Test func groupDSTMatchesTheContextString() throws {
        for suite in try Self.suites() {
            let expected = Data("HashToGroup-OPRFV1-".utf8) + Data([suite.mode]) + Data("-ristretto255-SHA512".utf8)
            #expect(try Self.hex(suite.groupDST) == expected)
        }
    }
}
