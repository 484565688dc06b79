import Foundation
@_spi(Testing) import PrivacyPass
import SiblingsCrypto
import Testing

/// Round trips and every refusal of the VOPRF layer.
@Suite struct VOPRFTests {
    let inputs = [Data("alpha".utf8), Data("beta".utf8), Data(), Data(repeating: 7, count: 300)]

    @Test(arguments: VOPRF.Mode.allCases) func roundTripMatchesEvaluate(mode: VOPRF.Mode) throws {
        let key = VOPRF.PrivateKey()
        let info = mode == .poprf ? Data("epoch 7".utf8) : Data()
        let client = try VOPRF.Client(mode: mode, publicKey: mode == .oprf ? nil : key.publicKey)
        let server = VOPRF.Server(mode: mode, privateKey: key)
        let (blinded, state) = try client.blind(inputs, info: info)
        let (evaluated, proof) = try server.blindEvaluate(blinded, info: info)
        #expect((proof == nil) == (mode == .oprf))
        let outputs = try client.finalize(evaluated, proof: proof, state: state)
        #expect(outputs.count == inputs.count)
        for (input, output) in zip(inputs, outputs) {
            #expect(output.count == 64)
            #expect(try server.evaluate(input, info: info) == output)
        }
        #expect(Set(outputs).count == outputs.count)
    }

    @Test func keySerializationRoundTrips() throws {
        let key = VOPRF.PrivateKey()
        let again = try VOPRF.PrivateKey(rawRepresentation: key.rawRepresentation)
        #expect(again.publicKey == key.publicKey)
        #expect(try VOPRF.PublicKey(rawRepresentation: key.publicKey.rawRepresentation) == key.publicKey)
        #expect(key.rawRepresentation.count == 32 && key.publicKey.rawRepresentation.count == 32)
    }

    @Test func refusesBadKeys() throws {
        expectCode(.invalidScalar) { _ = try VOPRF.PrivateKey(rawRepresentation: Data(count: 32)) }
        expectCode(.invalidScalar) { _ = try VOPRF.PrivateKey(rawRepresentation: Data(repeating: 0xFF, count: 32)) }
        expectCode(.invalidScalar) { _ = try VOPRF.PrivateKey(rawRepresentation: Data(count: 31)) }
        expectCode(.invalidElement) { _ = try VOPRF.PublicKey(rawRepresentation: Data(count: 32)) }
        expectCode(.invalidElement) { _ = try VOPRF.PublicKey(rawRepresentation: Data(repeating: 0xFF, count: 32)) }
        expectCode(.invalidInput) { _ = try VOPRF.PrivateKey(seed: Data(count: 16), info: Data(), mode: .voprf) }
        expectCode(.invalidInput) { _ = try VOPRF.Client(mode: .voprf, publicKey: nil) }
        expectCode(.invalidInput) { _ = try VOPRF.Client(mode: .oprf, publicKey: VOPRF.PrivateKey().publicKey) }
    }

    @Test func tamperedProofIsRefused() throws {
        let key = VOPRF.PrivateKey()
        let client = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey)
        let (blinded, state) = try client.blind(inputs)
        let (evaluated, proof) = try VOPRF.Server(mode: .voprf, privateKey: key).blindEvaluate(blinded)
        let good = try #require(proof)
        for index in [0, 31, 32, 63] {
            var bad = good
            bad[index] ^= 0x01
            expectCode(.proofVerificationFailed) { _ = try client.finalize(evaluated, proof: bad, state: state) }
        }
        expectCode(.proofVerificationFailed) { _ = try client.finalize(evaluated, proof: nil, state: state) }
        expectCode(.proofVerificationFailed) {
            _ = try client.finalize(evaluated, proof: Data(count: 64), state: state)
        }
        expectCode(.proofVerificationFailed) {
            _ = try client.finalize(evaluated, proof: good.prefix(63), state: state)
        }
        // Swapped evaluations: each element is right, but not for its position.
        expectCode(.proofVerificationFailed) {
            _ = try client.finalize(Array(evaluated.reversed()), proof: good, state: state)
        }
    }

    @Test(arguments: [VOPRF.Mode.voprf, .poprf]) func wrongKeyIsRefused(mode: VOPRF.Mode) throws {
        let published = VOPRF.PrivateKey()
        let other = VOPRF.PrivateKey()
        let client = try VOPRF.Client(mode: mode, publicKey: published.publicKey)
        let info = mode == .poprf ? Data("i".utf8) : Data()
        let (blinded, state) = try client.blind(inputs, info: info)
        let (evaluated, proof) = try VOPRF.Server(mode: mode, privateKey: other).blindEvaluate(blinded, info: info)
        expectCode(.proofVerificationFailed) { _ = try client.finalize(evaluated, proof: proof, state: state) }
    }

    @Test func poprfInfoMismatchIsRefused() throws {
        let key = VOPRF.PrivateKey()
        let client = try VOPRF.Client(mode: .poprf, publicKey: key.publicKey)
        let (blinded, state) = try client.blind(inputs, info: Data("a".utf8))
        let (evaluated, proof) = try VOPRF.Server(mode: .poprf, privateKey: key).blindEvaluate(
            blinded, info: Data("b".utf8))
        expectCode(.proofVerificationFailed) { _ = try client.finalize(evaluated, proof: proof, state: state) }
        expectCode(.invalidInput) {
            _ = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey).blind(inputs, info: Data("a".utf8))
        }
    }

    @Test func invalidAndIdentityElementsAreRefused() throws {
        let key = VOPRF.PrivateKey()
        let server = VOPRF.Server(mode: .voprf, privateKey: key)
        let client = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey)
        let (blinded, state) = try client.blind([Data("x".utf8)])
        let nonCanonical = Data(repeating: 0xFF, count: 32)
        let identity = Data(count: 32)
        for bad in [nonCanonical, identity, Data(count: 31), blinded[0] + Data([0])] {
            expectCode(.invalidElement) { _ = try server.blindEvaluate([bad]) }
            let (_, proof) = try server.blindEvaluate(blinded)
            expectCode(.invalidElement) { _ = try client.finalize([bad], proof: proof, state: state) }
        }
    }

    @Test func batchSizeMismatchIsRefused() throws {
        let key = VOPRF.PrivateKey()
        let client = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey)
        let server = VOPRF.Server(mode: .voprf, privateKey: key)
        let (blinded, state) = try client.blind(inputs)
        let (evaluated, proof) = try server.blindEvaluate(blinded)
        expectCode(.batchSizeMismatch) {
            _ = try client.finalize(Array(evaluated.dropLast()), proof: proof, state: state)
        }
        expectCode(.batchSizeMismatch) {
            _ = try client.blind(inputs, blinds: [Data(count: 32)], using: SystemRandom())
        }
        expectCode(.batchSizeMismatch) { _ = try client.blind([]) }
        expectCode(.batchSizeMismatch) { _ = try server.blindEvaluate([]) }
    }

    /// Unlinkability, as far as a test can show it: what the server sees (blinded elements) differs from, and is
    /// unrelated by any fixed map to, what is later revealed (inputs and outputs); the same input blinded twice
    /// gives different blinded elements but the same output.
    @Test func serverSeesOnlyFreshBlindedElements() throws {
        let key = VOPRF.PrivateKey()
        let client = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey)
        let server = VOPRF.Server(mode: .voprf, privateKey: key)
        let input = Data("the same input".utf8)
        let (first, firstState) = try client.blind([input])
        let (second, secondState) = try client.blind([input])
        #expect(first != second)
        let a = try server.blindEvaluate(first)
        let b = try server.blindEvaluate(second)
        #expect(a.evaluatedElements != b.evaluatedElements)
        let outputA = try client.finalize(a.evaluatedElements, proof: a.proof, state: firstState)
        let outputB = try client.finalize(b.evaluatedElements, proof: b.proof, state: secondState)
        #expect(outputA == outputB)
        // With the blind 1 the "blinded" element is HashToGroup(input) itself, which anyone can compute from
        // the input: a client that skipped blinding would send exactly that.
        let one = Data([1] + [UInt8](repeating: 0, count: 31))
        let (unblinded, _) = try client.blind([input], blinds: [one], using: SystemRandom())
        #expect(first[0] != unblinded[0] && second[0] != unblinded[0])
    }

    /// The DLEQ proof's scalar r is fresh for every proof: two proofs with one r reveal the key (s = r − c·k,
    /// so k = (s1 − s2)/(c2 − c1)), so the same batch evaluated twice must carry two different proofs, each
    /// valid. A server whose r were fixed, or derived from the batch alone, fails this.
    @Test func everyProofHasAFreshScalar() throws {
        let key = VOPRF.PrivateKey()
        let client = try VOPRF.Client(mode: .voprf, publicKey: key.publicKey)
        let server = VOPRF.Server(mode: .voprf, privateKey: key)
        let (blinded, state) = try client.blind(inputs)
        let first = try server.blindEvaluate(blinded)
        let second = try server.blindEvaluate(blinded)
        #expect(first.evaluatedElements == second.evaluatedElements)
        #expect(first.proof != nil && first.proof != second.proof)
        // Both verify, and the proof's challenge half differs too (r enters c through the commitments).
        #expect(try client.finalize(first.evaluatedElements, proof: first.proof, state: state).count == inputs.count)
        #expect(try client.finalize(second.evaluatedElements, proof: second.proof, state: state).count == inputs.count)
        #expect(first.proof?.prefix(32) != second.proof?.prefix(32))
    }
}

func expectCode(
    _ code: PrivacyPassError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected PrivacyPassError.\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as PrivacyPassError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(!error.reason.isEmpty, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected PrivacyPassError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
}
