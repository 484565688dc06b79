import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Storage
import Testing
import Transparency
import TransparencyLog

/// RFC 9162 §2.1 written literally over arrays (MTH, PATH, PROOF/SUBPROOF): the oracle the stored-subtree
/// implementation is compared with.
enum ReferenceMerkle {
    static func split(_ n: Int) -> Int {
        var k = 1
        while k * 2 < n { k *= 2 }
        return k
    }

    static func mth(_ leaves: ArraySlice<Data>) -> Hash256 {
        switch leaves.count {
        case 0: return MerkleLog.emptyRoot
        case 1: return MerkleLog.leafHash(leaves.first!)
        default:
            let k = split(leaves.count)
            let start = leaves.startIndex
            return MerkleLog.nodeHash(mth(leaves[start..<start + k]), mth(leaves[(start + k)...]))
        }
    }

    static func path(_ m: Int, _ leaves: ArraySlice<Data>) -> [Hash256] {
        let n = leaves.count
        if n <= 1 { return [] }
        let k = split(n)
        let start = leaves.startIndex
        if m < k { return path(m, leaves[start..<start + k]) + [mth(leaves[(start + k)...])] }
        return path(m - k, leaves[(start + k)...]) + [mth(leaves[start..<start + k])]
    }

    static func proof(_ m: Int, _ leaves: ArraySlice<Data>) -> [Hash256] {
        m == 0 || m == leaves.count ? [] : subproof(m, leaves, true)
    }

    static func subproof(_ m: Int, _ leaves: ArraySlice<Data>, _ b: Bool) -> [Hash256] {
        let n = leaves.count
        if m == n { return b ? [] : [mth(leaves)] }
        let k = split(n)
        let start = leaves.startIndex
        if m <= k { return subproof(m, leaves[start..<start + k], b) + [mth(leaves[(start + k)...])] }
        return subproof(m - k, leaves[(start + k)...], false) + [mth(leaves[start..<start + k])]
    }
}

/// The compacted sparse Merkle tree of docs/pixie-protocol.md ("Map") computed from sorted leaves by its definition.
enum ReferenceMap {
    static func bit(_ key: Hash256, _ i: Int) -> Int {
        Int(key.rawRepresentation[i / 8] >> (7 - UInt8(i % 8))) & 1
    }

    static func root(_ leaves: [(key: Hash256, value: Hash256)]) -> Hash256 {
        subtree(ArraySlice(leaves.sorted { $0.key < $1.key }), depth: 0)
    }

    static func subtree(_ leaves: ArraySlice<(key: Hash256, value: Hash256)>, depth: Int) -> Hash256 {
        if leaves.isEmpty { return .zero }
        if leaves.count == 1 { return VerifiableMap.leafHash(key: leaves.first!.key, value: leaves.first!.value) }
        let mid = leaves.firstIndex { bit($0.key, depth) == 1 } ?? leaves.endIndex
        return VerifiableMap.innerHash(
            subtree(leaves[..<mid], depth: depth + 1), subtree(leaves[mid...], depth: depth + 1))
    }
}

func randomHash(_ rng: inout SplitMix64) -> Hash256 {
    Hash256(Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }))!
}

/// Every hash with one byte changed (each byte of each hash, xor 0x01).
func byteFlips(_ hashes: [Hash256]) -> [[Hash256]] {
    var out: [[Hash256]] = []
    for i in hashes.indices {
        for j in 0..<32 {
            var bytes = hashes[i].rawRepresentation
            bytes[j] ^= 0x01
            var copy = hashes
            copy[i] = Hash256(bytes)!
            out.append(copy)
        }
    }
    return out
}

/// One log key for the whole test run (key generation is the slow part of a hybrid key).
let testKey = try! HybridSignature.PrivateKey(seedRepresentation: Data(repeating: 7, count: 32))
let testOrigin = "pixie.test/kt"
let testLogKey = try! LogKey(origin: testOrigin, publicKey: testKey.publicKey)

/// Waits until `open()` is called; the sequencer's injected sleep in tests that control when a batch runs.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}

func makeSequencer(
    _ database: any SQLDatabase, interval: Duration = .milliseconds(5),
    sleep: (@Sendable (Duration) async throws -> Void)? = nil
) throws -> Sequencer {
    try Sequencer(
        database: database, key: testKey, origin: testOrigin, interval: interval,
        sleep: sleep ?? { try await Task.sleep(for: $0) }, now: { 1_764_000_000_000 })
}

/// Expects `body` to throw a ``TransparencyError`` with `code`.
func expectError(
    _ code: TransparencyError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected TransparencyError.\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as TransparencyError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected TransparencyError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
}
