import Age
import Foundation
import Sempere
import SiblingsCrypto
import Testing

/// Replacing the recovery kit: at once when the current kit co-signs, after a delay when home asks alone,
/// and what a stolen home can and cannot do with that.
@Suite("Sempere replacing the recovery kit")
struct KitReplacementTests {
    typealias Vault = TakeoverTests.Vault
    static let start = Date(timeIntervalSince1970: 1_900_000_000)

    @Test("co-signed by the current kit: immediate, a new epoch the old kit never gets, and the old kit is dead")
    func coSigned() throws {
        let v = try Vault()
        let replaced = try VaultHome(credentials: v.ipad).replaceKit(
            in: v.vault, currentKit: v.kit, existingNotes: [], now: Self.start)
        let body = replaced.vault.body
        #expect(replaced.effectiveAt == nil && body.currentEpoch.reason == "kit")
        #expect(body.recovery.signingKey == (try replaced.kit.signingKey().publicKey.rawRepresentation))
        let pin = try replaced.vault.accept(pinned: v.phonePin, now: Self.start)
        #expect(pin.previousRecoverySigningKey == nil)
        #expect(
            SignedVault.trustedKits(pin, now: Int64(Self.start.timeIntervalSince1970)) == [body.recovery.signingKey])
        // The old kit opens no wrap of the new epoch, and a takeover made with it is refused.
        let oldWrap = try v.kit.wrapIdentity(postQuantum: false)
        #expect(
            body.currentEpoch.wraps.values.allSatisfy { wrap in
                (try? Age.decrypt(Data(wrap.utf8), identities: [oldWrap.ageIdentity])) == nil
            })
        let replay = try VaultTakeover.takeOver(
            v.vault, kit: v.kit, newHome: v.mac, newHomeName: nil, keep: [v.mac.id], existingNotes: [])
        let error = expectSempereError(.badSignature) { try replay.vault.accept(pinned: pin, now: Self.start) }
        #expect(error?.reason.contains("not signed by the recovery kit this device follows") == true)
        // The new kit takes over.
        let takeover = try VaultTakeover.takeOver(
            replaced.vault, kit: replaced.kit, newHome: v.mac, newHomeName: nil, keep: [v.mac.id], existingNotes: [],
            currentIdentity: nil)
        #expect(try takeover.vault.accept(pinned: pin, now: Self.start).takeoverGeneration == 1)
    }

    @Test("home alone: it waits the delay, both kits hold the epoch meanwhile, and the old kit's takeover cancels it")
    func delayed() throws {
        let v = try Vault()
        let home = VaultHome(credentials: v.ipad)
        let replaced = try home.replaceKit(in: v.vault, currentKit: nil, existingNotes: [], now: Self.start)
        let delay = TimeInterval(VaultBody.defaultKitReplacementDelay)
        #expect(replaced.effectiveAt == Self.start.addingTimeInterval(delay))
        let pending = replaced.vault.body
        #expect(pending.kitReplacement != nil && pending.recovery == v.vault.body.recovery)
        #expect(pending.currentEpoch.wraps["recovery"] != nil && pending.currentEpoch.wraps["recovery-next"] != nil)
        let pin = try replaced.vault.accept(pinned: v.phonePin, now: Self.start)
        #expect(pin.kitReplacementSeenAt == Int64(Self.start.timeIntervalSince1970))

        // Not before its time; then a new epoch that only the devices and the new kit get.
        #expect(try home.completeKitReplacement(in: replaced.vault, existingNotes: [], now: Self.start) == nil)
        let done = try #require(
            try home.completeKitReplacement(
                in: replaced.vault, existingNotes: [], now: Self.start.addingTimeInterval(delay)))
        #expect(done.vault.body.kitReplacement == nil && done.vault.body.currentEpoch.reason == "kit")
        #expect(done.vault.body.currentEpoch.wraps["recovery-next"] == nil)

        // During the delay, the owner takes over with the current kit: the replacement is cancelled.
        let cancel = try VaultTakeover.takeOver(
            replaced.vault, kit: v.kit, newHome: v.mac, newHomeName: nil, keep: [v.mac.id, v.phone.id],
            existingNotes: [])
        #expect(cancel.vault.body.kitReplacement == nil && cancel.vault.body.recovery == v.vault.body.recovery)
        let after = try cancel.vault.accept(pinned: pin, now: Self.start.addingTimeInterval(3600))
        #expect(after.takeoverGeneration == 1 && after.previousRecoverySigningKey == nil)
    }

    @Test(
        "a stolen home that skips the delay: devices keep the old kit for the delay by their own clocks, and refuse the thief's kit"
    )
    func stolenHomeSkipsTheDelay() throws {
        let v = try Vault()
        // The thief signs a list with a kit of its own, neither waiting nor co-signed.
        let thiefKit = RecoveryKit(vaultID: v.vault.body.vaultID)
        var body = v.vault.body
        body.generation += 1
        body.recovery = VaultBody.Recovery(
            kitID: "thief", signingKey: try thiefKit.signingKey().publicKey.rawRepresentation,
            wrapRecipient: try thiefKit.wrapIdentity(postQuantum: false).recipientString)
        let switched = try SignedVault.sign(body, signer: v.ipad.id, key: v.ipad.signingKey)
        let pin = try switched.accept(pinned: v.phonePin, now: Self.start)
        let seen = Int64(Self.start.timeIntervalSince1970)
        #expect(pin.previousRecoverySigningKey == v.vault.body.recovery.signingKey)
        #expect(pin.previousRecoveryValidUntil == seen + VaultBody.defaultKitReplacementDelay)
        #expect(SignedVault.trustedKits(pin, now: seen) == [v.vault.body.recovery.signingKey])

        // The thief takes over with its kit at once: refused while the old kit's grace runs.
        let thiefTakeover = try VaultTakeover.takeOver(
            switched, kit: thiefKit, newHome: v.ipad, newHomeName: nil, keep: [v.ipad.id], existingNotes: [],
            currentIdentity: try VaultKeyring(vault: switched.body, credentials: v.ipad).current)
        expectSempereError(.badSignature) { try thiefTakeover.vault.accept(pinned: pin, now: Self.start) }

        // The owner takes over with the paper kit, from the Mac: accepted, and the old kit is the vault's again.
        let owner = try VaultTakeover.takeOver(
            switched, kit: v.kit, newHome: v.mac, newHomeName: nil, keep: [v.mac.id, v.phone.id], existingNotes: [],
            currentIdentity: try VaultKeyring(vault: switched.body, credentials: v.mac).current,
            trustedKits: SignedVault.trustedKits(pin, now: seen))
        #expect(owner.vault.body.recovery == v.vault.body.recovery)
        let after = try owner.vault.accept(pinned: pin, now: Self.start.addingTimeInterval(3600))
        #expect(after.homeSigningKey == v.mac.publicKey.rawRepresentation)
        #expect(after.recoverySigningKey == v.vault.body.recovery.signingKey && after.previousRecoverySigningKey == nil)

        // Once the delay has passed on this device, the old kit is no longer accepted.
        let late = Self.start.addingTimeInterval(TimeInterval(VaultBody.defaultKitReplacementDelay) + 1)
        expectSempereError(.badSignature) { try owner.vault.accept(pinned: pin, now: late) }
    }
}
