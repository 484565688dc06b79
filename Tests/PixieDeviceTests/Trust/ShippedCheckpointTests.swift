import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Storage
import Testing
import Transparency
import TransparencyLog

/// A log with `count` entries under `key`; a second one under the same key with other entries is a fork.
private func log(_ key: HybridSignature.PrivateKey, entries: [String]) async throws -> Sequencer {
    let sequencer = try Sequencer(
        database: try SQLiteDatabase.inMemory(), key: key, origin: "test.localhost/kt", interval: .milliseconds(1))
    for (index, value) in entries.enumerated() {
        _ = try await sequencer.append(label: try Label("label-\(index)"), value: Data(value.utf8))
    }
    return sequencer
}

private func bundle(_ key: HybridSignature.PrivateKey, checkpoint: String?) -> TrustBundle {
    TrustBundle(
        phoneVerifyKey: HybridSignature.PrivateKey().publicKey, transparencyLogKey: key.publicKey,
        transparencyLogOrigin: "test.localhost/kt", senderCertKey: HybridSignature.PrivateKey().publicKey,
        transparencyCheckpoint: checkpoint)
}

@Suite("A new device starts from the checkpoint its app shipped with")
struct ShippedCheckpointTests {
    @Test("a consistent later checkpoint is accepted; a fork of the shipped history is refused")
    func laterCheckpointsMustExtendTheShippedOne() async throws {
        let key = HybridSignature.PrivateKey()
        let honest = try await log(key, entries: ["a", "b", "c"])
        let shipped = await honest.latestCheckpoint()
        let trustBundle = bundle(key, checkpoint: shipped.note)
        // The bundle survives its JSON form, checkpoint and all.
        let decoded = try JSONDecoder().decode(TrustBundle.self, from: try JSONEncoder().encode(trustBundle))
        #expect(decoded == trustBundle)
        #expect(decoded.version == 2)

        // The honest log grows: its next checkpoint extends the shipped one, with a consistency proof.
        for value in ["d", "e"] { _ = try await honest.append(label: try Label("more-\(value)"), value: Data()) }
        let grown = await honest.latestCheckpoint()
        var device = try TransparencyVerifier(trustBundle: decoded)
        #expect(device.pinned?.size == 3)
        let proof = try await honest.consistencyProof(from: 3, to: grown.size)
        #expect(try device.accept(checkpoint: grown.note, consistencyProof: proof).size == 5)

        // A log that signs another history under the same key, shown to a brand-new device: refused whether it
        // shows the same size (a fork) or a larger one with a proof of its own history (inconsistent).
        let forked = try await log(key, entries: ["a", "x", "c"])
        var fresh = try TransparencyVerifier(trustBundle: decoded)
        let sameSize = await forked.latestCheckpoint().note
        let fork = #expect(throws: TransparencyError.self) {
            try fresh.accept(checkpoint: sameSize, consistencyProof: nil)
        }
        #expect(fork?.code == .fork)
        for value in ["d", "e"] { _ = try await forked.append(label: try Label("more-\(value)"), value: Data()) }
        let forkedGrown = await forked.latestCheckpoint()
        let forkedProof = try await forked.consistencyProof(from: 3, to: forkedGrown.size)
        let rewritten = #expect(throws: TransparencyError.self) {
            try fresh.accept(checkpoint: forkedGrown.note, consistencyProof: forkedProof)
        }
        #expect(rewritten?.code == .inconsistent)
        // Without the shipped checkpoint the same device would have pinned the fork at once.
        var unpinned = TransparencyVerifier(logKey: try LogKey(origin: "test.localhost/kt", publicKey: key.publicKey))
        #expect(try unpinned.accept(checkpoint: forkedGrown.note, consistencyProof: nil).size == 5)
    }

    @Test("a bundle without a checkpoint, or with one another key signed, makes no verifier")
    func aBundleMustShipAGoodCheckpoint() async throws {
        let key = HybridSignature.PrivateKey()
        #expect(throws: TransparencyError.self) { try TransparencyVerifier(trustBundle: bundle(key, checkpoint: nil)) }
        let other = try await log(HybridSignature.PrivateKey(), entries: ["a"])
        let foreign = bundle(key, checkpoint: await other.latestCheckpoint().note)
        #expect(throws: TransparencyError.self) { try TransparencyVerifier(trustBundle: foreign) }
        // A version-1 bundle (from before the checkpoint shipped) still reads, without one.
        var object = try #require(
            try JSONSerialization.jsonObject(with: try JSONEncoder().encode(bundle(key, checkpoint: nil)))
                as? [String: Any])
        #expect(object["version"] as? Int == 1)
        object["version"] = 3
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(TrustBundle.self, from: try JSONSerialization.data(withJSONObject: object))
        }
    }
}
