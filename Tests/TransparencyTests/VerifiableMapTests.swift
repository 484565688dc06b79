import Foundation
import SiblingsTestSupport
import Testing
import Transparency

@Suite struct VerifiableMapTests {
    static func leaves(_ n: Int, seed: UInt64) -> [(key: Hash256, value: Hash256)] {
        var rng = SplitMix64(seed: seed)
        return (0..<n).map { _ in (randomHash(&rng), randomHash(&rng)) }
    }

    @Test func smallMaps() throws {
        #expect(VerifiableMap().root == .zero)
        let one = Self.leaves(1, seed: 1)
        let map = try VerifiableMap(leaves: one)
        #expect(map.root == VerifiableMap.leafHash(key: one[0].key, value: one[0].value))
        #expect(map.proof(for: one[0].key).siblings.isEmpty)
    }

    /// Batches inserted one after another give the same root as one bulk build and as the definition.
    @Test func incrementalBatchesMatchTheDefinition() throws {
        let all = Self.leaves(600, seed: 2)
        var map = VerifiableMap()
        var start = 0
        for size in [1, 1, 2, 7, 50, 139, 400] {
            try map.insert(Array(all[start..<start + size]))
            start += size
            #expect(map.root == ReferenceMap.root(Array(all[..<start])))
        }
        #expect(try VerifiableMap(leaves: all.reversed()).root == map.root)
        // A bulk-built map (start-up) takes incremental batches like any other.
        var rebuilt = try VerifiableMap(leaves: Array(all[..<300]))
        try rebuilt.insert(Array(all[300...]))
        #expect(rebuilt.root == map.root)
        #expect(throws: TransparencyError.self) { try VerifiableMap(leaves: [all[0], all[1], all[0]]) }
        #expect(map.count == 600)
        #expect(throws: TransparencyError.self) { try map.insert([all[3]]) }
    }

    /// Keys sharing long prefixes (chains of inner nodes with one empty side).
    @Test func keysWithLongCommonPrefixes() throws {
        var leaves: [(key: Hash256, value: Hash256)] = []
        for i in 0..<20 {
            var bytes = Data(repeating: 0xAB, count: 32)
            bytes[31] = UInt8(i)
            bytes[20] = UInt8(i & 1)
            leaves.append((Hash256(bytes)!, Hash256(Data(repeating: UInt8(i), count: 32))!))
        }
        let map = try VerifiableMap(leaves: leaves)
        #expect(map.root == ReferenceMap.root(leaves))
        for leaf in leaves {
            let proof = map.proof(for: leaf.key)
            #expect(proof.terminal == .leaf(key: leaf.key, value: leaf.value))
            #expect(proof.root(for: leaf.key) == map.root)
            #expect(try MapProof(encoded: proof.encoded) == proof)
        }
    }

    @Test func membershipAndNonMembershipProofs() throws {
        let all = Self.leaves(300, seed: 3)
        let map = try VerifiableMap(leaves: all)
        for leaf in all.prefix(50) {
            let proof = map.proof(for: leaf.key)
            #expect(proof.terminal == .leaf(key: leaf.key, value: leaf.value))
            #expect(proof.root(for: leaf.key) == map.root)
            #expect(try MapProof(encoded: proof.encoded) == proof)
            #expect(map.value(for: leaf.key) == leaf.value)
        }
        var rng = SplitMix64(seed: 4)
        for _ in 0..<50 {
            let absent = randomHash(&rng)
            let proof = map.proof(for: absent)
            #expect(proof.root(for: absent) == map.root)
            if case .leaf(let key, _) = proof.terminal { #expect(key != absent) }
            #expect(map.value(for: absent) == nil)
            // A proof for one key says nothing about another key on a different path.
            #expect(proof.root(for: all[0].key) != map.root)
        }
    }

    @Test func tamperedMapProofsFail() throws {
        let all = Self.leaves(200, seed: 5)
        let map = try VerifiableMap(leaves: all)
        let key = all[17].key
        let proof = map.proof(for: key)
        for flipped in byteFlips(proof.siblings) {
            #expect(MapProof(siblings: flipped, terminal: proof.terminal).root(for: key) != map.root)
        }
        #expect(MapProof(siblings: proof.siblings, terminal: .empty).root(for: key) != map.root)
        #expect(MapProof(siblings: proof.siblings.dropLast(), terminal: proof.terminal).root(for: key) != map.root)
        #expect(
            MapProof(siblings: proof.siblings, terminal: .leaf(key: key, value: all[18].value)).root(for: key)
                != map.root)
        var encoded = proof.encoded
        encoded.append(0)
        #expect(throws: TransparencyError.self) { try MapProof(encoded: encoded) }
    }
}
