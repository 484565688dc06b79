import Foundation
import PixieWire
import SiblingsCrypto
import Testing
import Transparency

/// The auditor's rule for account keys: each attack is a log a server could write, and only the rule refuses it.
@Suite("AccountRotationRule: an account key changes only with a statement signed by the old key and the new")
struct AccountRotationRuleTests {
    let handle = "h-0123456789abcdefghij"
    let keys = (0..<3).map { _ in HybridSignature.PrivateKey() }

    func key(_ version: UInt64, _ key: HybridSignature.PrivateKey) throws -> Entry {
        try Entry(
            label: Label("account/\(handle)"), version: version, value: key.publicKey.rawRepresentation, timestamp: 0)
    }

    func rotation(
        _ version: UInt64, epoch: UInt64? = nil, from: HybridSignature.PrivateKey, to: HybridSignature.PrivateKey
    ) throws -> Entry {
        let statement = try AccountRotation(
            ktHandle: handle, epoch: epoch ?? version + 1, from: from, to: to, discoveryValue: Data([1]),
            remover: HybridSignature.PrivateKey(), removed: Data([3]), time: Date(timeIntervalSince1970: 1_800_000_000))
        return try Entry(
            label: Label("account-rotation/\(handle)"), version: version, value: statement.encoded, timestamp: 0)
    }

    /// A rule that has seen the account created with keys[0].
    func created() throws -> AccountRotationRule {
        var rule = AccountRotationRule()
        try rule.check([try key(1, keys[0])])
        return rule
    }

    func refuses(_ rule: AccountRotationRule, _ entries: [Entry], _ comment: Comment) {
        var copy = rule
        let error = #expect(throws: TransparencyError.self, comment) { try copy.check(entries) }
        #expect(error?.code == .badValue, comment)
    }

    @Test("two honest rotations in turn pass, each beside its key")
    func honest() throws {
        var rule = try created()
        try rule.check([try rotation(1, from: keys[0], to: keys[1]), try key(2, keys[1])])
        try rule.check([try key(3, keys[2]), try rotation(2, from: keys[1], to: keys[2])])
        // Other labels are not the rule's business.
        try rule.check([try Entry(label: Label("devices/\(handle)"), version: 1, value: Data([9]), timestamp: 0)])
    }

    @Test("a key changed without a statement, or with one the old key did not sign, or for another epoch: refused")
    func forgeries() throws {
        let rule = try created()
        let stranger = HybridSignature.PrivateKey()
        refuses(rule, [try key(2, keys[1])], "a new key with no statement")
        refuses(
            rule, [try key(2, keys[1]), try rotation(1, from: stranger, to: keys[1])],
            "a statement from a key the account never had (the server's own)")
        // The right old key named, but sig_old made by another key.
        let honest = try AccountRotation(decoding: try rotation(1, from: keys[0], to: keys[1]).value)
        var forged = honest.encoded
        let offset = honest.statement.count
        forged.replaceSubrange(
            offset..<(offset + HybridSignature.signatureByteCount),
            with: try stranger.signature(for: honest.statement, context: AccountRotation.context).rawRepresentation)
        refuses(
            rule,
            [
                try key(2, keys[1]),
                try Entry(label: Label("account-rotation/\(handle)"), version: 1, value: forged, timestamp: 0),
            ],
            "sig_old by another key")
        refuses(
            rule, [try key(2, keys[1]), try rotation(1, epoch: 3, from: keys[0], to: keys[1])],
            "a statement for another epoch")
        refuses(
            rule, [try key(2, keys[2]), try rotation(1, from: keys[0], to: keys[1])], "a statement for another key")
        refuses(rule, [try rotation(1, from: keys[0], to: keys[1])], "a statement with no key change beside it")
        refuses(
            rule,
            [
                try key(2, keys[1]),
                try Entry(label: Label("account-rotation/\(handle)"), version: 1, value: Data(count: 40), timestamp: 0),
            ],
            "a statement that is not one")
    }
}
