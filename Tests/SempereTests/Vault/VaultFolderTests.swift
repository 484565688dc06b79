import Foundation
import Sempere
import SiblingsCrypto
import Testing

@Suite("Sempere vault folder: layout, atomic writes, conflict copies")
struct VaultFolderTests {
    static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-folder-\(UUID())")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("vault.json and notes are written in the layout and read back; strays are set aside, never read")
    func layout() throws {
        let root = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = VaultFolder(url: root)
        try folder.create()
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Mac", credentials: home, postQuantum: false)
        try folder.write(created.vault)

        let path = VaultFolder.notePath(author: home.id, noteID: VaultFolder.newNoteID())
        try folder.writeNote(
            try VaultNote.seal(markdown: "# One", path: path, vault: created.vault.body, author: home), at: path)
        #expect(try folder.notePaths() == [path])
        #expect(try folder.noteReferences().map(\.path) == [path])

        // A provider's conflict copy of the note and a stray file: set aside, not listed as notes.
        let copy = path.replacingOccurrences(of: ".age", with: " (conflicted copy 2026-11-29).age")
        try Data("x".utf8).write(to: root.appendingPathComponent(copy))
        try Data("y".utf8).write(to: root.appendingPathComponent("notes.txt"))
        #expect(try folder.notePaths() == [path])
        #expect(try folder.setAside() == [copy, "notes.txt"].sorted())
        #expect(throws: SempereError.self) { try folder.writeNote(Data(), at: "notes/../vault.json") }

        let (vault, pin, refused) = try folder.vault(pinned: created.pin)
        #expect(vault.body == created.vault.body && pin.generation == 1 && refused.isEmpty)
        let opened = try VaultNote.open(
            try folder.readNote(at: path), path: path, vault: vault.body,
            keyring: try VaultKeyring(vault: vault.body, credentials: home))
        #expect(opened.markdown == "# One")
        // No temporary files are left by the atomic writes.
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).allSatisfy { !$0.hasPrefix(".") })
    }

    @Test("of vault.json and its conflict copies, the newest accepted wins; a rolled-back vault.json is shown")
    func conflictCopies() throws {
        let root = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = VaultFolder(url: root)
        try folder.create()
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Mac", credentials: home, postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let generation2 = try VaultHome(credentials: home).approve(
            name: "Phone", signingKey: phone.signingKey.publicKey, wrapRecipient: phone.identity.recipientString,
            in: created.vault)
        try folder.write(generation2)
        let (_, pin2, _) = try folder.vault(pinned: created.pin)
        #expect(pin2.generation == 2)

        // The provider puts generation 1 back as vault.json, and keeps generation 2 as a "conflicted copy".
        try created.vault.encoded().write(to: root.appendingPathComponent("vault.json"))
        try generation2.encoded().write(to: root.appendingPathComponent("vault (conflicted copy).json"))
        let (vault, pin, refused) = try folder.vault(pinned: pin2)
        #expect(vault.body.generation == 2 && pin == pin2)
        #expect(refused.map(\.0) == ["vault.json"] && refused.first?.1.code == .rollback)

        // With only old copies left, the device refuses and says why.
        try FileManager.default.removeItem(at: root.appendingPathComponent("vault (conflicted copy).json"))
        let error = #expect(throws: SempereError.self) { try folder.vault(pinned: pin2) }
        #expect(error?.code == .rollback)
    }

    @Test("join requests are written and read back; a tampered one is skipped")
    func requests() throws {
        let root = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = VaultFolder(url: root)
        try folder.create()
        let request = try JoinRequest(name: "Phone", credentials: .generate(postQuantum: false))
        try folder.write(request)
        let tampered = try JoinRequest(name: "Tablet", credentials: .generate(postQuantum: false))
        var bytes = try tampered.encoded()
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: root.appendingPathComponent("requests/\(tampered.body.requestID).json"))
        #expect(try folder.requests().map(\.body.requestID) == [request.body.requestID])
    }
}
