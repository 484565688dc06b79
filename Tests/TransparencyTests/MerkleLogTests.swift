import Foundation
import SiblingsTestSupport
import Testing
import Transparency

@Suite struct MerkleLogTests {
    static func leaves(_ n: Int) -> [Data] { (0..<n).map { Data("leaf \($0)".utf8) } }

    static func store(_ leaves: [Data]) -> MemoryLogStore {
        var store = MemoryLogStore()
        for leaf in leaves { store.append(leafHash: MerkleLog.leafHash(leaf)) }
        return store
    }

    /// The RFC 6962 / RFC 9162 test data of the certificate-transparency reference tests and the roots of its
    /// first 1...8 leaves (the vector folder has no Merkle set; these roots were recomputed with Python's hashlib).
    @Test func certificateTransparencyRoots() throws {
        let data: [Data] = [
            Data(), Data([0x00]), Data([0x10]), Data([0x20, 0x21]), Data([0x30, 0x31]), Data([0x40, 0x41, 0x42, 0x43]),
            Data(0x50...0x57), Data(0x60...0x6F),
        ]
        let roots = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ]
        #expect(MerkleLog.emptyRoot.description == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        var store = MemoryLogStore()
        for (leaf, root) in zip(data, roots) {
            store.append(leafHash: MerkleLog.leafHash(leaf))
            #expect(store.root.description == root)
            #expect(try MerkleLog.root(size: store.size, store).description == root)
        }
    }

    /// Every inclusion and consistency proof of every pair m ≤ n ≤ 130 equals the RFC's definition and verifies.
    @Test func allProofsUpTo130() throws {
        let all = Self.leaves(130)
        let store = Self.store(all)
        for n in 1...all.count {
            let prefix = all[..<n]
            let root = ReferenceMerkle.mth(prefix)
            #expect(try MerkleLog.root(size: UInt64(n), store) == root)
            for m in 0..<n {
                let proof = try MerkleLog.inclusionProof(index: UInt64(m), size: UInt64(n), store)
                #expect(proof == ReferenceMerkle.path(m, prefix))
                #expect(
                    MerkleLog.verifyInclusion(
                        leafHash: MerkleLog.leafHash(all[m]), index: UInt64(m), size: UInt64(n), proof: proof,
                        root: root))
            }
            for m in 0...n {
                let proof = try MerkleLog.consistencyProof(from: UInt64(m), to: UInt64(n), store)
                #expect(proof == ReferenceMerkle.proof(m, prefix))
                #expect(
                    MerkleLog.verifyConsistency(
                        oldSize: UInt64(m), newSize: UInt64(n), oldRoot: ReferenceMerkle.mth(all[..<m]), newRoot: root,
                        proof: proof))
            }
        }
    }

    /// Every inclusion proof (each index of each size) and every consistency proof (each pair of sizes) of the
    /// trees of 1 to 300 leaves verifies against the reference roots, and the same proof with one bit changed
    /// (a different hash and bit for each proof), with a hash missing, or with one too many is refused.
    @Test func everyProofUpTo300VerifiesAndEveryAlteredOneFails() throws {
        let all = Self.leaves(300)
        let store = Self.store(all)
        let roots = [MerkleLog.emptyRoot] + (1...all.count).map { ReferenceMerkle.mth(all[..<$0]) }
        func altered(_ proof: [Hash256], _ seed: Int) -> [Hash256] {
            var bytes = proof[seed % proof.count].rawRepresentation
            bytes[seed % 32] ^= UInt8(1 << (seed % 8))
            var copy = proof
            copy[seed % proof.count] = Hash256(bytes)!
            return copy
        }
        var checked = 0
        for n in 1...all.count {
            for m in 0..<n {
                let leaf = MerkleLog.leafHash(all[m])
                let proof = try MerkleLog.inclusionProof(index: UInt64(m), size: UInt64(n), store)
                func verifies(_ proof: [Hash256]) -> Bool {
                    MerkleLog.verifyInclusion(
                        leafHash: leaf, index: UInt64(m), size: UInt64(n), proof: proof, root: roots[n])
                }
                #expect(verifies(proof), "inclusion of \(m) in \(n)")
                #expect(!verifies(proof + [roots[n]]))
                if !proof.isEmpty {
                    #expect(!verifies(altered(proof, m &* 31 &+ n)), "altered inclusion of \(m) in \(n)")
                    #expect(!verifies(Array(proof.dropLast())))
                }
                checked += 1
            }
            for m in 0...n {
                let proof = try MerkleLog.consistencyProof(from: UInt64(m), to: UInt64(n), store)
                func verifies(_ proof: [Hash256]) -> Bool {
                    MerkleLog.verifyConsistency(
                        oldSize: UInt64(m), newSize: UInt64(n), oldRoot: roots[m], newRoot: roots[n], proof: proof)
                }
                #expect(verifies(proof), "consistency \(m) to \(n)")
                if !proof.isEmpty {
                    #expect(!verifies(altered(proof, m &* 17 &+ n)), "altered consistency \(m) to \(n)")
                    #expect(!verifies(Array(proof.dropLast())))
                    #expect(!verifies(proof + [roots[n]]))
                }
                checked += 1
            }
        }
        #expect(checked == 300 * 301 / 2 + (300 * 303 / 2))
    }

    @Test func spotChecksToFiveHundred() throws {
        let all = Self.leaves(517)
        let store = Self.store(all)
        var rng = SplitMix64(seed: 9162)
        for _ in 0..<150 {
            let n = Int.random(in: 131...517, using: &rng)
            let m = Int.random(in: 1...n, using: &rng)
            let root = ReferenceMerkle.mth(all[..<n])
            let inclusion = try MerkleLog.inclusionProof(index: UInt64(m - 1), size: UInt64(n), store)
            #expect(
                MerkleLog.verifyInclusion(
                    leafHash: MerkleLog.leafHash(all[m - 1]), index: UInt64(m - 1), size: UInt64(n), proof: inclusion,
                    root: root))
            let consistency = try MerkleLog.consistencyProof(from: UInt64(m), to: UInt64(n), store)
            #expect(consistency == ReferenceMerkle.proof(m, all[..<n]))
            #expect(
                MerkleLog.verifyConsistency(
                    oldSize: UInt64(m), newSize: UInt64(n), oldRoot: ReferenceMerkle.mth(all[..<m]), newRoot: root,
                    proof: consistency))
        }
    }

    /// Every byte flip of some proofs, a wrong index or root, a missing or extra hash: all refused. (A size is bound
    /// to its root by the signed checkpoint, so a size alone is not tampered with here.)
    @Test func tamperedProofsFail() throws {
        let all = Self.leaves(300)
        let store = Self.store(all)
        for (m, n) in [(0, 1), (5, 8), (6, 7), (12, 300), (299, 300), (128, 129)] where m < n {
            let root = try MerkleLog.root(size: UInt64(n), store)
            let leaf = MerkleLog.leafHash(all[m])
            let proof = try MerkleLog.inclusionProof(index: UInt64(m), size: UInt64(n), store)
            for flipped in byteFlips(proof) {
                #expect(
                    !MerkleLog.verifyInclusion(
                        leafHash: leaf, index: UInt64(m), size: UInt64(n), proof: flipped, root: root))
            }
            #expect(
                !MerkleLog.verifyInclusion(
                    leafHash: leaf, index: UInt64(m), size: UInt64(n), proof: proof + [root], root: root))
            if !proof.isEmpty {
                #expect(
                    !MerkleLog.verifyInclusion(
                        leafHash: leaf, index: UInt64(m), size: UInt64(n), proof: proof.dropLast(), root: root))
                #expect(
                    !MerkleLog.verifyInclusion(
                        leafHash: leaf, index: UInt64(m ^ 1), size: UInt64(n), proof: proof, root: root))
            }
        }
        for (m, n) in [(1, 2), (3, 7), (4, 8), (6, 300), (128, 257), (299, 300)] {
            let oldRoot = try MerkleLog.root(size: UInt64(m), store)
            let newRoot = try MerkleLog.root(size: UInt64(n), store)
            let proof = try MerkleLog.consistencyProof(from: UInt64(m), to: UInt64(n), store)
            #expect(
                MerkleLog.verifyConsistency(
                    oldSize: UInt64(m), newSize: UInt64(n), oldRoot: oldRoot, newRoot: newRoot, proof: proof))
            for flipped in byteFlips(proof) {
                #expect(
                    !MerkleLog.verifyConsistency(
                        oldSize: UInt64(m), newSize: UInt64(n), oldRoot: oldRoot, newRoot: newRoot, proof: flipped))
            }
            #expect(
                !MerkleLog.verifyConsistency(
                    oldSize: UInt64(m), newSize: UInt64(n), oldRoot: newRoot, newRoot: oldRoot, proof: proof))
            #expect(
                !MerkleLog.verifyConsistency(
                    oldSize: UInt64(m), newSize: UInt64(n), oldRoot: oldRoot, newRoot: newRoot,
                    proof: proof.dropLast()))
        }
        // Equal sizes need equal roots; no proof from a larger tree to a smaller one.
        let root = try MerkleLog.root(size: 5, store)
        #expect(MerkleLog.verifyConsistency(oldSize: 5, newSize: 5, oldRoot: root, newRoot: root, proof: []))
        #expect(!MerkleLog.verifyConsistency(oldSize: 5, newSize: 5, oldRoot: root, newRoot: .zero, proof: []))
        #expect(throws: TransparencyError.self) { try MerkleLog.consistencyProof(from: 6, to: 5, store) }
    }

    @Test func proofEncodingsRoundTrip() throws {
        let store = Self.store(Self.leaves(40))
        let inclusion = InclusionProof(
            index: 7, treeSize: 40, hashes: try MerkleLog.inclusionProof(index: 7, size: 40, store))
        #expect(try InclusionProof(encoded: inclusion.encoded) == inclusion)
        let consistency = ConsistencyProof(
            oldSize: 9, newSize: 40, hashes: try MerkleLog.consistencyProof(from: 9, to: 40, store))
        #expect(try ConsistencyProof(encoded: consistency.encoded) == consistency)
        #expect(throws: TransparencyError.self) { try ConsistencyProof(encoded: consistency.encoded + [0]) }
        #expect(throws: TransparencyError.self) { try InclusionProof(encoded: inclusion.encoded.dropLast()) }
    }
}
