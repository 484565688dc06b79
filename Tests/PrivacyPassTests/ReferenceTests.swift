import Foundation
import PrivacyPass
import SiblingsTestSupport
import Testing

/// Cross-checks with an implementation no one here wrote: PyPI `voprf` 0.2.0 (asterized/voprf, Rust; RFC 9497
/// VOPRF mode with ristretto255-SHA512), through Tests/Reference/voprf_oracle.py in the project's venv
/// (requirements.txt; scripts/setup.sh installs it). Each direction: its proofs verify here and ours there, and
/// both sides' outputs agree with each other's Evaluate.
@Suite struct ReferenceTests {
    static func oracle() throws -> ReferenceOracle {
        let oracle = try ReferenceOracle(script: "voprf_oracle.py")
        do {
            _ = try oracle.call("check")
        } catch {
            throw VectorError("the VOPRF reference (PyPI voprf) is not in the venv: \(error); run scripts/setup.sh")
        }
        return oracle
    }

    static func list(_ value: Any?) throws -> [Data] {
        guard let text = value as? String else { throw VectorError("the reference returned no list") }
        return try text.split(separator: ",").map {
            guard let data = Data(hex: String($0)) else { throw VectorError("the reference returned bad hex") }
            return data
        }
    }

    static func joined(_ items: [Data]) -> String { items.map(\.hex).joined(separator: ",") }

    let info = Data("pixie credential-svc".utf8)

    @Test func keysAndEvaluateAgree() throws {
        let oracle = try Self.oracle()
        for index in 0..<8 {
            let seed = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 * 7 + index) })
            let key = try VOPRF.PrivateKey(seed: seed, info: info, mode: .voprf)
            #expect(try oracle.bytes("derive", ["seed": seed, "info": info]) == key.publicKey.rawRepresentation)
            let input = Data("input \(index)".utf8)
            let ours = try VOPRF.Server(mode: .voprf, privateKey: key).evaluate(input)
            #expect(try oracle.bytes("evaluate", ["seed": seed, "info": info, "input": input]) == ours)
        }
    }

    @Test(arguments: [1, 4]) func theirClientVerifiesOurServer(batch: Int) throws {
        let oracle = try Self.oracle()
        let seed = Data(repeating: 0x42, count: 32)
        let key = try VOPRF.PrivateKey(seed: seed, info: info, mode: .voprf)
        let inputs = (0..<batch).map { Data("token input \($0)".utf8) }
        let blinded = try oracle.call("blind", ["inputs": Self.joined(inputs)])
        let session = try #require(blinded["session"] as? Int)
        let server = VOPRF.Server(mode: .voprf, privateKey: key)
        let (evaluated, proof) = try server.blindEvaluate(try Self.list(blinded["blinded"]))
        let outputs = try Self.list(
            try oracle.call(
                "finalize",
                [
                    "session": session, "proof": try #require(proof), "elements": Self.joined(evaluated),
                    "public_key": key.publicKey.rawRepresentation,
                ])["outputs"])
        #expect(outputs == (try inputs.map { try server.evaluate($0) }))
    }

    @Test(arguments: [1, 4]) func ourClientVerifiesTheirServer(batch: Int) throws {
        let oracle = try Self.oracle()
        let seed = Data(repeating: 0x17, count: 32)
        let key = try VOPRF.PrivateKey(seed: seed, info: info, mode: .voprf)
        let client = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey)
        let inputs = (0..<batch).map { Data("token input \($0)".utf8) }
        let (blinded, state) = try client.blind(inputs)
        let answer = try oracle.call("blind_evaluate", ["seed": seed, "info": info, "blinded": Self.joined(blinded)])
        let proof = try #require((answer["proof"] as? String).flatMap { Data(hex: $0) })
        let outputs = try client.finalize(try Self.list(answer["elements"]), proof: proof, state: state)
        for (input, output) in zip(inputs, outputs) {
            #expect(try oracle.bytes("evaluate", ["seed": seed, "info": info, "input": input]) == output)
        }
        // Their proof with one bit flipped is refused here too.
        var bad = proof
        bad[5] ^= 1
        expectCode(.proofVerificationFailed) {
            _ = try client.finalize(try Self.list(answer["elements"]), proof: bad, state: state)
        }
    }
}
