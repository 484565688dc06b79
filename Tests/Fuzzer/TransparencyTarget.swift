import Foundation
import SiblingsCrypto
import Transparency

/// The key-transparency answers a device parses from the server (docs/transparency.md): entries, inclusion,
/// consistency, map and lookup proofs, and checkpoints, verified under a fixed log key (the seeds' checkpoint is
/// signed by it, so mutations reach the signature check). Every error must be a `TransparencyError`.
let transparencyTarget = FuzzTarget(
    name: "transparency",
    summary: "KT entries, inclusion/consistency/map/lookup proofs and checkpoints (Transparency)",
    maximumLength: 16_384,
    seeds: {
        let hashes = (1...5).map { Hash256(Data(repeating: UInt8($0), count: 32))! }
        let label: Label = "roster/a"
        let entry = try Entry(label: label, version: 2, value: Data("value".utf8), timestamp: 1_800_000_000)
        let map = try VerifiableMap(leaves: [(hashes[0], hashes[1]), (hashes[2], hashes[3])])
        let inclusion = InclusionProof(index: 3, treeSize: 8, hashes: Array(hashes.prefix(3)))
        let lookup = LookupProof(
            label: label, entry: entry, membership: map.proof(for: hashes[0]), nonMembership: map.proof(for: hashes[4]),
            inclusion: inclusion)
        let checkpoint = try Checkpoint.sign(
            size: 8, logRoot: hashes[0], mapRoot: map.root, origin: transparencyOrigin, key: transparencyKey)
        return [
            entry.encoded, inclusion.encoded, ConsistencyProof(oldSize: 3, newSize: 8, hashes: hashes).encoded,
            map.proof(for: hashes[2]).encoded, lookup.encoded, Data(checkpoint.note.utf8),
        ]
    },
    run: { input in
        expectOnly(TransparencyError.self, "Entry(encoded:)") { _ = try Entry(encoded: input) }
        expectOnly(TransparencyError.self, "InclusionProof(encoded:)") { _ = try InclusionProof(encoded: input) }
        expectOnly(TransparencyError.self, "ConsistencyProof(encoded:)") { _ = try ConsistencyProof(encoded: input) }
        expectOnly(TransparencyError.self, "MapProof(encoded:)") { _ = try MapProof(encoded: input) }
        expectOnly(TransparencyError.self, "LookupProof(encoded:)") { _ = try LookupProof(encoded: input) }
        expectOnly(TransparencyError.self, "Checkpoint(note:verifyingWith:)") {
            _ = try Checkpoint(note: String(decoding: input, as: UTF8.self), verifyingWith: transparencyLogKey)
        }
        expectOnly(TransparencyError.self, "Label") { _ = try Label(String(decoding: input, as: UTF8.self)) }
    })

let transparencyOrigin = "fuzz.example/kt"

/// The fixed log key of the transparency target's seeds.
let transparencyKey: HybridSignature.PrivateKey = {
    do {
        return try HybridSignature.PrivateKey(seedRepresentation: Data(repeating: 8, count: 32))
    } catch {
        fatalError("the fuzz target's fixed log key does not derive: \(error)")
    }
}()

let transparencyLogKey: LogKey = {
    do {
        return try LogKey(origin: transparencyOrigin, publicKey: transparencyKey.publicKey)
    } catch {
        fatalError("the fuzz target's fixed log key is refused: \(error)")
    }
}()
