import Age
import Foundation
import Sempere
import SiblingsCrypto
import Testing

/// Takeover with the recovery kit when home is lost or stolen, and the races the guide implies.
@Suite("Sempere takeover with the recovery kit")
struct TakeoverTests {
    /// Home (the iPad, which will be stolen), a Mac and a phone; the kit on paper.
    struct Vault {
        let ipad = DeviceKeys.generate(postQuantum: false)
        let mac = DeviceKeys.generate(postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let kit: RecoveryKit
        var vault: SignedVault
        var macPin: VaultPin
        var phonePin: VaultPin

        init() throws {
            let created = try VaultHome.createVault(homeName: "iPad", credentials: ipad, postQuantum: false)
            kit = created.kit
            let home = VaultHome(credentials: ipad)
            vault = try home.approve(
                name: "Mac", signingKey: mac.publicKey, wrapRecipient: mac.identity.recipientString,
                in: created.vault)
            vault = try home.approve(
                name: "Phone", signingKey: phone.publicKey, wrapRecipient: phone.identity.recipientString, in: vault)
            macPin = try vault.accept(pinned: created.pin)
            phonePin = macPin
        }

        /// The Mac takes over, keeping itself and the phone.
        func macTakesOver(from base: SignedVault? = nil) throws -> VaultHome.EpochChange {
            try VaultTakeover.takeOver(
                base ?? vault, kit: kit, newHome: mac, newHomeName: nil, keep: [mac.id, phone.id], existingNotes: [])
        }
    }

    @Test("a takeover beats everything the stolen home signs, before it (at any generation) and after it")
    func beatsTheStolenHome() throws {
        var v = try Vault()
        // The thief, holding the iPad, adds a device of its own and hands it the home role, many generations
        // ahead; the phone, online, follows all of it.
        let thief = DeviceKeys.generate(postQuantum: false)
        var stolen = try VaultHome(credentials: v.ipad).approve(
            name: "Spare", signingKey: thief.publicKey, wrapRecipient: thief.identity.recipientString, in: v.vault)
        for index in 0..<5 {
            stolen = try VaultHome(credentials: v.ipad).rename(deviceID: v.mac.id, to: "Mac \(index)", in: stolen)
        }
        stolen = try VaultHome(credentials: v.ipad).makeHome(deviceID: thief.id, in: stolen, existingNotes: []).vault
        v.phonePin = try stolen.accept(pinned: v.phonePin)
        #expect(v.phonePin.homeSigningKey == thief.publicKey.rawRepresentation)

        // The Mac, which saw none of it, takes over from the list it has (a lower generation).
        let takeover = try v.macTakesOver()
        #expect(takeover.vault.body.generation < stolen.body.generation)
        #expect(takeover.vault.body.takeoverGeneration == 1 && takeover.vault.body.home == v.mac.id)
        #expect(Set(takeover.vault.body.removed.map(\.device.id)) == [v.ipad.id])
        let phoneAfter = try takeover.vault.accept(pinned: v.phonePin)
        #expect(phoneAfter.homeSigningKey == v.mac.publicKey.rawRepresentation && phoneAfter.takeoverGeneration == 1)
        // The thief's device, added in a change the takeover did not see, is not in the new list.
        #expect(takeover.vault.body.device(thief.id) == nil)

        // After the takeover, the thief's lists are refused, however new their generation.
        var later = try VaultHome(credentials: thief).rename(deviceID: v.mac.id, to: "Mine", in: stolen)
        for _ in 0..<10 { later = try VaultHome(credentials: thief).rename(deviceID: v.mac.id, to: "Mine!", in: later) }
        let refused = expectSempereError(.rollback) { try later.accept(pinned: phoneAfter) }
        #expect(refused?.reason.contains("from before a takeover") == true)
        // The new epoch's key went to the kept devices and the kit only.
        #expect(Set(takeover.vault.body.currentEpoch.wraps.keys) == [v.mac.id, v.phone.id, "recovery"])
        expectSempereError(.removed) { try VaultKeyring(vault: takeover.vault.body, credentials: v.ipad) }
    }

    @Test("a takeover signed by only one of the two keys is refused, either way round")
    func bothKeysSign() throws {
        let v = try Vault()
        let genuine = try v.macTakesOver()
        func resigned(_ edit: (inout VaultBody.Takeover) throws -> Void) throws -> SignedVault {
            var body = genuine.vault.body
            try edit(&body.takeovers[body.takeovers.count - 1])
            return try SignedVault.sign(body, signer: v.mac.id, key: v.mac.signingKey)
        }
        let bytes = genuine.vault.body.takeovers[0].signedBytes(vaultID: v.vault.body.vaultID)
        let context = Data("sempere/v1/takeover".utf8)
        // The Mac alone, with a "kit" signature of its own key (it does not hold the kit).
        let homeOnly = try resigned {
            $0.kitSignature = try v.mac.signingKey.signature(for: bytes, context: context).rawRepresentation
        }
        let noKit = expectSempereError(.badSignature) { try homeOnly.accept(pinned: v.phonePin) }
        #expect(noKit?.reason.contains("not signed by the recovery kit") == true, "\(String(describing: noKit))")
        // The kit alone: the new home's signature made by another key.
        let kitOnly = try resigned {
            $0.homeSignature = try v.phone.signingKey.signature(for: bytes, context: context).rawRepresentation
        }
        let noHome = expectSempereError(.badSignature) { try kitOnly.accept(pinned: v.phonePin) }
        #expect(noHome?.reason.contains("as well as by the kit") == true, "\(String(describing: noHome))")
        // A record that names more devices kept than the kit signed for.
        let widened = try resigned { $0.kept.append(v.ipad.id) }
        expectSempereError(.badSignature) { try widened.accept(pinned: v.phonePin) }
        // The genuine one is accepted.
        #expect(try genuine.vault.accept(pinned: v.phonePin).takeoverGeneration == 1)
    }

    @Test("two holders of the kit racing: a device follows the first it sees, and says the kit is in other hands")
    func twoKitHolders() throws {
        let v = try Vault()
        let mine = try v.macTakesOver()
        let theirs = try VaultTakeover.takeOver(
            v.vault, kit: v.kit, newHome: v.phone, newHomeName: nil, keep: [v.phone.id], existingNotes: [])
        let pin = try mine.vault.accept(pinned: v.phonePin)
        let error = expectSempereError(.fork) { try theirs.vault.accept(pinned: pin) }
        #expect(error?.reason.contains("someone has your kit") == true, "\(String(describing: error))")
        // Taking over again from a device this person holds beats both.
        let again = try VaultTakeover.takeOver(
            mine.vault, kit: v.kit, newHome: v.mac, newHomeName: nil, keep: [v.mac.id], existingNotes: [])
        #expect(try again.vault.accept(pinned: pin).takeoverGeneration == 2)
        let fromTheirs = try theirs.vault.accept(pinned: v.phonePin)
        #expect(try again.vault.accept(pinned: fromTheirs).homeSigningKey == v.mac.publicKey.rawRepresentation)
    }

    @Test(
        "starting again from nothing but the kit: a new device checks the chain from the kit, takes over, reads old notes"
    )
    func fromNothingButTheKit() throws {
        var v = try Vault()
        v.vault = try VaultHome(credentials: v.ipad).makeHome(deviceID: v.mac.id, in: v.vault, existingNotes: []).vault
        let path = "notes/\(v.mac.id)/\(String(repeating: "b", count: 32)).age"
        let note = try VaultNote.seal(markdown: "# kept\n", path: path, vault: v.vault.body, author: v.mac)
        let reference = VaultBody.NoteReference(path: path, sha256: SHA256.hash(data: note).description)

        let kitKey = try v.kit.signingKey().publicKey
        let checked = try v.vault.accept(kitSigningKey: kitKey)
        #expect(checked.homeSigningKey == v.mac.publicKey.rawRepresentation)
        // A vault.json the provider made up, listing the kit's public key, does not check out from the kit.
        let providerHome = DeviceKeys.generate(postQuantum: false)
        let fake = try VaultHome.createVault(homeName: "iPad", credentials: providerHome, postQuantum: false)
        var fakeBody = fake.vault.body
        fakeBody.vaultID = v.vault.body.vaultID
        fakeBody.recovery = v.vault.body.recovery
        let forged = try SignedVault.sign(fakeBody, signer: fakeBody.home, key: providerHome.signingKey)
        expectSempereError(.badSignature) { try forged.accept(kitSigningKey: kitKey) }

        let fresh = DeviceKeys.generate(postQuantum: false)
        let change = try VaultTakeover.takeOver(
            v.vault, kit: v.kit, newHome: fresh, newHomeName: "New laptop", keep: [], existingNotes: [reference])
        let body = change.vault.body
        #expect(body.home == fresh.id && body.devices.map(\.id) == [fresh.id])
        let pin = try change.vault.accept(pinned: checked)
        #expect(pin.homeSigningKey == fresh.publicKey.rawRepresentation)
        // The Mac's note of the epoch before opens for the new home, through the record the takeover wrote.
        let keys = try VaultKeyring(vault: body, credentials: fresh, fileLists: EpochFileLists([change.fileList]))
        #expect(try VaultNote.open(note, path: path, vault: body, keyring: keys).markdown == "# kept\n")
        // And the chain from the kit still checks out after the takeover.
        #expect(try change.vault.accept(kitSigningKey: kitKey).takeoverGeneration == 1)
        // Another vault's kit is refused.
        expectSempereError(.wrongVault) {
            try VaultTakeover.takeOver(
                v.vault, kit: fake.kit, newHome: fresh, newHomeName: "x", keep: [], existingNotes: [])
        }
    }
}
