import Age
import Foundation
import Sempere
import SiblingsCrypto
import Testing

/// Make Home, and the compact record of the files that existed at an epoch's end.
@Suite("Sempere Make Home and epoch records")
struct HandoffTests {
    /// Home (the iPad), a Mac and a phone, all listed; the phone's pin from then.
    typealias Trio = TakeoverTests.Vault

    @Test("Make Home: the Mac is home from then on, in a new epoch; a device that missed the handoff follows it")
    func makeHome() throws {
        var t = try Trio()
        let change = try VaultHome(credentials: t.ipad).makeHome(deviceID: t.mac.id, in: t.vault, existingNotes: [])
        #expect(change.vault.body.home == t.mac.id && change.vault.body.currentEpoch.reason == "handoff")
        #expect(change.vault.body.epochs.count == 2 && change.vault.body.records.count == 1)
        #expect(change.vault.body.currentEpoch.wraps[t.ipad.id] != nil)  // the old home stays listed
        t.vault = change.vault

        // The old home manages nothing now; the Mac does.
        expectSempereError(.notHome) {
            try VaultHome(credentials: t.ipad).rename(deviceID: t.phone.id, to: "x", in: t.vault)
        }
        let renamed = try VaultHome(credentials: t.mac).rename(deviceID: t.phone.id, to: "Work phone", in: t.vault)

        // The phone was offline for the handoff: it sees only the Mac's later list, and follows it through
        // the handoff record in it; from then on it follows the Mac.
        let pin = try SignedVault(parsing: try renamed.encoded()).accept(pinned: t.phonePin)
        #expect(pin.homeSigningKey == t.mac.publicKey.rawRepresentation && pin.generation == renamed.body.generation)
        // The handoff's own vault.json, accepted before the rename, is accepted again (every command re-reads it).
        let atHandoff = try t.vault.accept(pinned: t.phonePin)
        #expect(try t.vault.accept(pinned: atHandoff) == atHandoff)
        #expect(try renamed.accept(pinned: atHandoff).generation == renamed.body.generation)
        // The old home, stolen, signs a list of its own after the handoff: devices that follow the Mac refuse it.
        var stolen = t.vault.body
        stolen.generation = renamed.body.generation + 1
        stolen.home = t.ipad.id
        let forged = try SignedVault.sign(stolen, signer: t.ipad.id, key: t.ipad.signingKey)
        let refused = expectSempereError(.badSignature) { try forged.accept(pinned: pin) }
        #expect(
            refused?.reason.contains("no handoff from the home this device follows") == true,
            "\(String(describing: refused))")
    }

    @Test("a handoff naming a device that is not listed, or signed by a device that is not home, is refused")
    func forgedHandoffs() throws {
        let t = try Trio()
        let stranger = DeviceKeys.generate(postQuantum: false)
        expectSempereError(.notFound) {
            try VaultHome(credentials: t.ipad).makeHome(deviceID: stranger.id, in: t.vault, existingNotes: [])
        }
        // A listed device that is not home cannot hand the role on through the library...
        expectSempereError(.notHome) {
            try VaultHome(credentials: t.phone).makeHome(deviceID: t.phone.id, in: t.vault, existingNotes: [])
        }
        // ...nor by writing the body itself: a handoff to itself, signed with its own key.
        var body = t.vault.body
        body.generation += 1
        var handoff = VaultBody.Handoff(
            generation: body.generation, from: t.phone.id, to: t.phone.id,
            toSigningKey: t.phone.publicKey.rawRepresentation, signature: Data())
        handoff.signature = try t.phone.signingKey.signature(
            for: Data(body.vaultID.utf8) + Data([0]) + Data(String(body.generation).utf8) + Data([0])
                + Data(t.phone.id.utf8) + Data([0]) + Data(t.phone.id.utf8) + Data([0])
                + t.phone.publicKey.rawRepresentation,
            context: Data("sempere/v1/handoff".utf8)
        ).rawRepresentation
        body.handoffs.append(handoff)
        body.home = t.phone.id
        let forged = try SignedVault.sign(body, signer: t.phone.id, key: t.phone.signingKey)
        let error = expectSempereError(.badSignature) { try forged.accept(pinned: t.phonePin) }
        #expect(error?.reason.contains("without the signature of the home this device follows") == true)
        // A genuine handoff record copied into a body that names another home is refused too.
        let genuine = try VaultHome(credentials: t.ipad).makeHome(deviceID: t.mac.id, in: t.vault, existingNotes: [])
        var swapped = genuine.vault.body
        swapped.home = t.phone.id
        let resigned = try SignedVault.sign(swapped, signer: t.ipad.id, key: t.ipad.signingKey)
        expectSempereError(.badSignature) { try resigned.accept(pinned: t.phonePin) }
    }

    @Test("compact records: vault.json commits to the list; an altered list sets notes aside, a missing one waits")
    func compactRecords() throws {
        let folderURL = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folderURL) }
        let folder = VaultFolder(url: folderURL)
        try folder.create()
        let t = try Trio()
        // 300 notes of the phone, then the phone is removed.
        for _ in 0..<300 {
            let path = VaultFolder.notePath(author: t.phone.id, noteID: VaultFolder.newNoteID())
            try folder.writeNote(
                try VaultNote.seal(markdown: "# note\n", path: path, vault: t.vault.body, author: t.phone), at: path)
        }
        let before = try t.vault.encoded().count
        let change = try VaultHome(credentials: t.ipad).remove(
            deviceID: t.phone.id, from: t.vault, existingNotes: try folder.noteReferences())
        let record = try #require(change.vault.body.records.first)
        #expect(record.notes == nil && record.notesCount == 300 && record.notesSHA256 == change.fileList.sha256)
        // vault.json grows by the epoch and its record, not by the list (about 33 kB here).
        let growth = try change.vault.encoded().count - before
        #expect(growth < 8_000, "\(growth)")
        #expect(change.fileList.bytes.count > 30_000)
        try folder.write(change.fileList)
        try folder.write(change.vault)

        let path = try #require(try folder.notePaths().first)
        func open() throws -> VaultNote.Opened {
            try VaultNote.open(
                try folder.readNote(at: path), path: path, vault: change.vault.body,
                keyring: try VaultKeyring(
                    vault: change.vault.body, credentials: t.mac, fileLists: EpochFileLists(folder: folder)))
        }
        #expect(try open().author == t.phone.id)

        // The provider drops one entry from the list: the commitment no longer matches, so nothing of that
        // epoch by the removed phone is trusted.
        let listURL = folderURL.appendingPathComponent(EpochFileList.path(epoch: 1))
        let original = try Data(contentsOf: listURL)
        var text = String(decoding: original, as: UTF8.self)
        let cut = try #require(text.range(of: "{\"path\":\"\(path)\""))
        let end = try #require(text.range(of: "},", range: cut.upperBound..<text.endIndex))
        text.removeSubrange(cut.lowerBound..<end.upperBound)
        try Data(text.utf8).write(to: listURL)
        let altered = expectSempereError(.untrustedNote) { try open() }
        #expect(
            altered?.reason.contains("is not the list vault.json commits to") == true, "\(String(describing: altered))")
        try FileManager.default.removeItem(at: listURL)
        // The list not there (not yet synced, or held back): the note waits for it, set aside in no category.
        let missing = expectSempereError(.untrustedNote) { try open() }
        #expect(missing?.setAsideCategory == .waitingForSync, "\(String(describing: missing))")
        #expect(missing?.reason.contains("has not reached this device yet") == true, "\(String(describing: missing))")
        #expect(altered?.setAsideCategory == .fromBeforeADeviceChange)
        try original.write(to: listURL)
        #expect(try open().author == t.phone.id)
    }

    @Test("a vault made by sempere 0.1 (format v1, the list inline) is read as it is")
    func readsVersionOne() throws {
        let t = try Trio()
        let note = try VaultNote.seal(
            markdown: "# old\n", path: "notes/\(t.phone.id)/\(String(repeating: "a", count: 32)).age",
            vault: t.vault.body,
            author: t.phone)
        let path = "notes/\(t.phone.id)/\(String(repeating: "a", count: 32)).age"
        let reference = VaultBody.NoteReference(path: path, sha256: SHA256.hash(data: note).description)
        let change = try VaultHome(credentials: t.ipad).remove(
            deviceID: t.phone.id, from: t.vault, existingNotes: [reference])
        var body = change.vault.body
        body.records[0].notes = [reference]
        body.records[0].notesSHA256 = nil
        body.records[0].notesCount = nil
        let v2 = try SignedVault.sign(body, signer: t.ipad.id, key: t.ipad.signingKey)
        let v1 = String(decoding: try v2.encoded(), as: UTF8.self).replacingOccurrences(
            of: "\"sempere-vault-v2\"", with: "\"sempere-vault-v1\"")
        let parsed = try SignedVault(parsing: Data(v1.utf8))
        #expect(try parsed.accept(pinned: t.phonePin).generation == body.generation)
        let opened = try VaultNote.open(
            note, path: path, vault: parsed.body, keyring: try VaultKeyring(vault: parsed.body, credentials: t.mac))
        #expect(opened.markdown == "# old\n")
        let future = v1.replacingOccurrences(of: "\"sempere-vault-v1\"", with: "\"sempere-vault-v9\"")
        let error = expectSempereError(.malformedVault) { try SignedVault(parsing: Data(future.utf8)) }
        #expect(error?.reason.contains("update sempere") == true)
    }
}
