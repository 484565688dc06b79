import Foundation
import Storage
import Testing
import Transparency
import TransparencyLog

/// A server that lies in each way the seed's fail-closed check must catch, and the error that catches it.
@Suite struct MisbehavingServerTests {
    /// An honest log with alice at version 2, bob at 1 and some others; returns it with its entries.
    static func honestLog() async throws -> (Sequencer, [Entry]) {
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory())
        try await sequencer.integrate([("account/alice", Data("alice-key-1".utf8)), ("account/bob", Data("bob".utf8))])
        try await sequencer.integrate((0..<20).map { (try Label("discovery/\($0)"), Data([UInt8($0)])) })
        try await sequencer.integrate([("account/alice", Data("alice-key-2".utf8))])
        let size = await sequencer.latestCheckpoint().size
        return (sequencer, try await sequencer.entries(0..<size))
    }

    static func map(_ entries: some Sequence<Entry>) throws -> VerifiableMap {
        try VerifiableMap(leaves: entries.map { ($0.mapKey, $0.leafHash) })
    }

    static func pinnedVerifier(_ sequencer: Sequencer) async throws -> TransparencyVerifier {
        var verifier = try TransparencyVerifier(logKey: testLogKey, state: nil)
        try verifier.accept(checkpoint: await sequencer.latestCheckpoint().note, consistencyProof: nil)
        return verifier
    }

    @Test func honestAnswersVerifyAndStatePersists() async throws {
        let (sequencer, _) = try await Self.honestLog()
        let verifier = try await Self.pinnedVerifier(sequencer)
        let (_, proof) = try await sequencer.lookup("account/alice", withInclusion: true)
        #expect(try verifier.verifyLookup(proof, for: "account/alice")?.value == Data("alice-key-2".utf8))
        // The device's flow: an answer since what it pinned, across new updates.
        var device = verifier
        _ = try await sequencer.append(label: "account/alice", value: Data("alice-key-3".utf8))
        let answer = try await sequencer.answer(for: "account/alice", since: device.pinned?.size)
        #expect(answer.consistencyProof != nil)
        #expect(try device.verify(label: "account/alice", answer: answer)?.version == 3)
        #expect(device.pinned?.size == verifier.pinned!.size + 1)
        expectError(.missingProof) { _ = try device.verify(label: "account/alice", answer: nil) }
        let restored = try TransparencyVerifier(logKey: testLogKey, state: verifier.state)
        #expect(restored.pinned == verifier.pinned)
        #expect(try restored.verifyLookup(proof, for: "account/alice")?.version == 2)
    }

    @Test func oldValueAfterAnUpdate() async throws {
        let (sequencer, entries) = try await Self.honestLog()
        let verifier = try await Self.pinnedVerifier(sequencer)
        let map = try Self.map(entries)
        let old = entries[0]
        #expect(old.label == "account/alice" && old.version == 1)
        let next = VerifiableMap.key(label: "account/alice", version: 2)
        let stale = LookupProof(
            label: "account/alice", entry: old, membership: map.proof(for: old.mapKey),
            nonMembership: map.proof(for: next), inclusion: nil)
        expectError(.staleValue) { _ = try verifier.verifyLookup(stale, for: "account/alice") }
        // Hiding version 2 behind an empty path does not lead to the signed root.
        let hidden = LookupProof(
            label: "account/alice", entry: old, membership: map.proof(for: old.mapKey),
            nonMembership: MapProof(siblings: map.proof(for: next).siblings, terminal: .empty), inclusion: nil)
        expectError(.badProof) { _ = try verifier.verifyLookup(hidden, for: "account/alice") }
        // Nor does claiming alice was never written.
        let never = LookupProof(
            label: "account/alice", entry: nil, membership: nil,
            nonMembership: map.proof(for: VerifiableMap.key(label: "account/alice", version: 1)), inclusion: nil)
        expectError(.staleValue) { _ = try verifier.verifyLookup(never, for: "account/alice") }
    }

    @Test func rewrittenEntry() async throws {
        let (sequencer, entries) = try await Self.honestLog()
        let verifier = try await Self.pinnedVerifier(sequencer)
        let (_, honest) = try await sequencer.lookup("account/alice", withInclusion: true)
        let forged = try Entry(
            label: "account/alice", version: 2, value: Data("attacker-key".utf8), timestamp: honest.entry!.timestamp)
        let lie = LookupProof(
            label: "account/alice", entry: forged, membership: honest.membership,
            nonMembership: honest.nonMembership, inclusion: honest.inclusion)
        expectError(.badProof) { _ = try verifier.verifyLookup(lie, for: "account/alice") }

        // The auditor, given the rewritten entry, finds the log root does not match.
        var rewritten = entries
        rewritten[rewritten.count - 1] = forged
        var auditor = Auditor(logKey: testLogKey)
        let last = await sequencer.latestCheckpoint()
        expectError(.logRootMismatch) {
            try auditor.ingest(checkpoint: last.note, entries: rewritten, consistencyProof: nil)
        }
        // Having failed, it stays failed.
        expectError(.logRootMismatch) {
            try auditor.ingest(checkpoint: last.note, entries: entries, consistencyProof: nil)
        }
        var honestAuditor = Auditor(logKey: testLogKey)
        try honestAuditor.ingest(checkpoint: last.note, entries: entries, consistencyProof: nil)
        // Missing entries are a log root mismatch too.
        var short = Auditor(logKey: testLogKey)
        expectError(.logRootMismatch) {
            try short.ingest(checkpoint: last.note, entries: entries.dropLast(), consistencyProof: nil)
        }
    }

    @Test func twoCheckpointsOfOneSize() async throws {
        let (sequencer, entries) = try await Self.honestLog()
        var verifier = try await Self.pinnedVerifier(sequencer)
        let honest = await sequencer.latestCheckpoint()
        let other = try Checkpoint.sign(
            size: honest.size, logRoot: MerkleLog.leafHash(Data("other".utf8)), mapRoot: honest.mapRoot,
            origin: testOrigin, key: testKey)
        expectError(.fork) { try verifier.accept(checkpoint: other.note, consistencyProof: nil) }
        let otherMap = try Checkpoint.sign(
            size: honest.size, logRoot: honest.logRoot, mapRoot: .zero, origin: testOrigin, key: testKey)
        expectError(.fork) { try verifier.accept(checkpoint: otherMap.note, consistencyProof: nil) }
        #expect(verifier.pinned == honest)
        // The same checkpoint again is fine and needs no proof.
        try verifier.accept(checkpoint: honest.note, consistencyProof: nil)

        // A bigger checkpoint on another history: its consistency proof cannot verify.
        var store = MemoryLogStore()
        for entry in entries.dropLast() { store.append(leafHash: entry.leafHash) }
        store.append(leafHash: MerkleLog.leafHash(Data("rewritten".utf8)))
        store.append(leafHash: MerkleLog.leafHash(Data("more".utf8)))
        let forked = try Checkpoint.sign(
            size: store.size, logRoot: store.root, mapRoot: .zero, origin: testOrigin, key: testKey)
        let proof = ConsistencyProof(
            oldSize: honest.size, newSize: store.size,
            hashes: try MerkleLog.consistencyProof(from: honest.size, to: store.size, store))
        expectError(.inconsistent) { try verifier.accept(checkpoint: forked.note, consistencyProof: proof) }
        expectError(.missingProof) { try verifier.accept(checkpoint: forked.note, consistencyProof: nil) }
        #expect(verifier.pinned == honest)
    }

    @Test func checkpointThatShrinks() async throws {
        let (sequencer, _) = try await Self.honestLog()
        var verifier = try await Self.pinnedVerifier(sequencer)
        let older = try await sequencer.checkpoint(size: 2)
        expectError(.rollback) { try verifier.accept(checkpoint: older.note, consistencyProof: nil) }
        // Through the one-call check, the state does not move on failure.
        let state = verifier.state
        let (_, proof) = try await sequencer.lookup("account/alice")
        expectError(.rollback) {
            _ = try verifier.verify(
                label: "account/alice", checkpoint: older.note, consistencyProof: nil, lookup: proof)
        }
        #expect(verifier.state == state)
    }

    @Test func proofForAnotherLabel() async throws {
        let (sequencer, _) = try await Self.honestLog()
        let verifier = try await Self.pinnedVerifier(sequencer)
        let (_, bob) = try await sequencer.lookup("account/bob")
        expectError(.wrongLabel) { _ = try verifier.verifyLookup(bob, for: "account/alice") }
        // Relabelled: the proof claims alice but carries bob's entry.
        let relabelled = LookupProof(
            label: "account/alice", entry: bob.entry, membership: bob.membership, nonMembership: bob.nonMembership,
            inclusion: nil)
        expectError(.wrongLabel) { _ = try verifier.verifyLookup(relabelled, for: "account/alice") }
    }

    @Test func checkpointSignedByOneHalf() async throws {
        let (sequencer, _) = try await Self.honestLog()
        let latest = await sequencer.latestCheckpoint()
        let start = latest.note.range(of: "\n\n— \(testOrigin) ")!.upperBound
        for byte in [4 + 5, 4 + 64 + 5] {
            var blob = Data(base64Encoded: String(latest.note[start...].dropLast()))!
            blob[byte] ^= 0x80
            let forged = String(latest.note[..<start]) + blob.base64EncodedString() + "\n"
            var verifier = TransparencyVerifier(logKey: testLogKey)
            expectError(.badSignature) { try verifier.accept(checkpoint: forged, consistencyProof: nil) }
            #expect(verifier.pinned == nil)
        }
    }

    @Test func noProofNoAnswer() async throws {
        let (sequencer, _) = try await Self.honestLog()
        let unpinned = TransparencyVerifier(logKey: testLogKey)
        let (_, proof) = try await sequencer.lookup("account/alice")
        expectError(.missingProof) { _ = try unpinned.verifyLookup(proof, for: "account/alice") }
        let verifier = try await Self.pinnedVerifier(sequencer)
        expectError(.missingProof) { _ = try verifier.verifyLookup(nil, for: "account/alice") }
        let noMembership = LookupProof(
            label: "account/alice", entry: proof.entry, membership: nil, nonMembership: proof.nonMembership,
            inclusion: nil)
        expectError(.badProof) { _ = try verifier.verifyLookup(noMembership, for: "account/alice") }
        // An inclusion proof for the wrong index.
        let wrongIndex = LookupProof(
            label: "account/alice", entry: proof.entry, membership: proof.membership,
            nonMembership: proof.nonMembership,
            inclusion: try await sequencer.inclusionProof(index: 0, size: await sequencer.latestCheckpoint().size))
        expectError(.badProof) { _ = try verifier.verifyLookup(wrongIndex, for: "account/alice") }
    }

    @Test func withheldUpdate() async throws {
        let (sequencer, entries) = try await Self.honestLog()
        let honest = await sequencer.latestCheckpoint()
        // The log holds alice's version 2, the map does not.
        let withheld = try Checkpoint.sign(
            size: honest.size, logRoot: honest.logRoot, mapRoot: try Self.map(entries.dropLast()).root,
            origin: testOrigin, key: testKey)
        var auditor = Auditor(logKey: testLogKey)
        expectError(.mapRootMismatch) {
            try auditor.ingest(checkpoint: withheld.note, entries: entries, consistencyProof: nil)
        }
        #expect(auditor.failure?.code == .mapRootMismatch)

        // A version gap is caught before anything else.
        var store = MemoryLogStore()
        let skipped = try Entry(label: "account/carol", version: 2, value: Data(), timestamp: 0)
        store.append(leafHash: skipped.leafHash)
        let gap = try Checkpoint.sign(
            size: 1, logRoot: store.root, mapRoot: try Self.map([skipped]).root, origin: testOrigin, key: testKey)
        var gapAuditor = Auditor(logKey: testLogKey)
        expectError(.versionGap) {
            try gapAuditor.ingest(checkpoint: gap.note, entries: [skipped], consistencyProof: nil)
        }
    }

    @Test func auditorChecksConsistencyBetweenCheckpoints() async throws {
        let (sequencer, entries) = try await Self.honestLog()
        var auditor = Auditor(logKey: testLogKey)
        let first = try await sequencer.checkpoint(size: 2)
        try auditor.ingest(checkpoint: first.note, entries: Array(entries[..<2]), consistencyProof: nil)
        let second = try await sequencer.checkpoint(size: 22)
        expectError(.missingProof) {
            var copy = auditor
            try copy.ingest(checkpoint: second.note, entries: Array(entries[2..<22]), consistencyProof: nil)
        }
        try auditor.ingest(
            checkpoint: second.note, entries: Array(entries[2..<22]),
            consistencyProof: try await sequencer.consistencyProof(from: 2, to: 22))
        #expect(auditor.size == 22)
    }
}
