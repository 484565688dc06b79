import Age
import Foundation
import Sempere
import SiblingsCrypto
import Testing

@Suite("Sempere: a removed device saves what it had not synced")
struct RemovedDeviceTests {
    @Test(
        "only its own signed notes that the removal did not record, offline edits too; a planted note is not among them"
    )
    func unsynced() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-removed-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = VaultFolder(url: root)
        try folder.create()
        let home = DeviceKeys.generate(postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Mac", credentials: home, postQuantum: false)
        let vault = try VaultHome(credentials: home).approve(
            name: "Phone", signingKey: phone.signingKey.publicKey, wrapRecipient: phone.identity.recipientString,
            in: created.vault)
        func write(_ markdown: String) throws -> String {
            let path = VaultFolder.notePath(author: phone.id, noteID: VaultFolder.newNoteID())
            try folder.writeNote(
                try VaultNote.seal(markdown: markdown, path: path, vault: vault.body, author: phone), at: path)
            return path
        }
        let synced = try write("synced")
        let edited = try write("synced, then edited")
        let recorded = try folder.noteReferences()  // what home saw when it removed the phone
        let unsyncedPath = try write("not synced")
        // An offline edit of a note the removal recorded: the same path, a file the record does not list.
        try folder.writeNote(
            try VaultNote.seal(markdown: "edited offline", path: edited, vault: vault.body, author: phone, version: 2),
            at: edited)
        // The provider plants a note in the phone's folder, encrypted to the old (public) recipient.
        let planted = VaultFolder.notePath(author: phone.id, noteID: VaultFolder.newNoteID())
        let recipient = try #require(try AgeKeyFile.recipients(from: vault.body.currentEpoch.recipient).first)
        try folder.writeNote(
            try Age.encrypt(Data("pay up\n<!-- sempere-note v1 -->\n".utf8), to: [recipient]), at: planted)

        let change = try VaultHome(credentials: home).remove(deviceID: phone.id, from: vault, existingNotes: recorded)
        try folder.write(change.fileList)
        let removed = change.vault
        let error = #expect(throws: SempereError.self) { try VaultKeyring(vault: removed.body, credentials: phone) }
        #expect(error?.code == .removed && error?.reason.contains("export --unsynced") == true)

        let saved = try VaultNote.unsynced(folder: folder, vault: removed.body, credentials: phone)
        #expect(Set(saved.map(\.path)) == [unsyncedPath, edited])
        #expect(saved.first { $0.path == unsyncedPath }?.markdown == "not synced")
        #expect(saved.first { $0.path == edited }?.markdown == "edited offline")
        #expect(!saved.contains { $0.path == synced || $0.path == planted })
    }
}
