import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

/// Who may have made the rotations a device takes (docs/pixie-protocol.md, "Revoking a device", "Who may revoke"):
/// every step's remover is on the account's logged roster now or was removed by a later step, and none was removed
/// by an earlier one. Each refused row is a chain a removed device could get a lying server to log with the old
/// account key it kept.
@Suite("Account rotator: the removers of a chain of rotations")
struct AccountRotatorTests {
    /// Four devices and a key no device of the account holds (one a removed device made up).
    static let keys = (0..<5).map { _ in HybridSignature.PrivateKey() }
    static let accountKeys = (0..<4).map { _ in HybridSignature.PrivateKey() }
    static let names = ["phone", "laptop", "tablet", "watch", "stranger"]

    static func hash(_ name: String) -> Data {
        Data(SHA256.hash(data: keys[names.firstIndex(of: name)!].publicKey.rawRepresentation))
    }

    /// Step `index` of a chain: `remover` removes `removed`, from account key `index` to `index + 1`.
    static func step(_ index: Int, _ remover: String, removes removed: String) throws -> AccountRotation {
        try AccountRotation(
            ktHandle: "handle", epoch: UInt64(index + 2), from: accountKeys[index], to: accountKeys[index + 1],
            discoveryValue: Data([1]), remover: keys[names.firstIndex(of: remover)!],
            removed: keys[names.firstIndex(of: removed)!].publicKey.rawRepresentation, time: Date())
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let steps: [(String, String)]
        let listed: [String]
        let refusedAt: UInt64?
        var testDescription: String {
            steps.map { "\($0.0) removes \($0.1)" }.joined(separator: ", ") + "; listed now: "
                + listed.joined(separator: " ") + (refusedAt.map { " → refused at epoch \($0)" } ?? " → taken")
        }
    }

    static let rows: [Row] = [
        Row(steps: [("phone", "watch")], listed: ["phone", "laptop", "tablet"], refusedAt: nil),
        // The owner's removal of the watch, substituted by a rotation the watch made under a key it made up.
        Row(steps: [("stranger", "watch")], listed: ["phone", "laptop", "tablet"], refusedAt: 2),
        // A remover that a later step removed is accounted for.
        Row(steps: [("phone", "watch"), ("laptop", "phone")], listed: ["laptop", "tablet"], refusedAt: nil),
        // The removed watch, rotating on after its removal (with a server that lets it): refused.
        Row(steps: [("phone", "watch"), ("watch", "laptop")], listed: ["phone", "tablet", "watch"], refusedAt: 3),
        // A remover that is not listed now and that nothing later removed: refused, at its step.
        Row(steps: [("phone", "watch"), ("stranger", "tablet")], listed: ["phone", "laptop"], refusedAt: 3),
        // The thief first, with a listed device: taken, and the log shows the watch removing the phone.
        Row(steps: [("watch", "phone")], listed: ["laptop", "tablet", "watch"], refusedAt: nil),
    ]

    @Test("a chain of rotations is taken only from removers the roster accounts for", arguments: rows)
    func removers(_ row: Row) throws {
        let chain = try row.steps.enumerated().map { try Self.step($0.offset, $0.element.0, removes: $0.element.1) }
        let listed = Set(row.listed.map(Self.hash))
        if let epoch = row.refusedAt {
            let error = #expect(throws: RotationError.self) { try AccountRotator.checkRemovers(chain, listed: listed) }
            guard case .forged(let at, let reason) = error else {
                Issue.record("refused otherwise: \(String(describing: error))")
                return
            }
            #expect(at == epoch)
            #expect(reason.contains("device"))
        } else {
            try AccountRotator.checkRemovers(chain, listed: listed)
        }
        for (index, step) in chain.enumerated() {
            try step.verify(previousKey: Self.accountKeys[index].publicKey)
        }
    }
}
