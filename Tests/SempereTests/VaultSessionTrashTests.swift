import Foundation
import Sempere
import Testing

/// The trash (issue 42): `rm` keeps the note on the device that removed it for 30 days, restorable; then the
/// deletion is final. The vault records the deletion at once, as before.
extension VaultSessionTests {
    @Test("a removed note is in the trash for 30 days: restored, every device shows it again; after, it is gone")
    func trash() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let kept = try pair.phone.newNote(markdown: "# Packing list\n\ntent\n")
        let dropped = try pair.phone.newNote(markdown: "# Old idea\n")
        try pair.phone.removeNote(at: kept)
        try pair.phone.removeNote(at: dropped)
        #expect(try pair.home.list().notes.isEmpty)
        let entries = try pair.phone.trash()
        #expect(Set(entries.map(\.title)) == ["Packing list", "Old idea"])
        #expect(try pair.home.trash().isEmpty, "the trash is the removing device's own")
        // Nothing of it in the synced folder: the trash is in this device's configuration.
        let everything = try FileManager.default.subpathsOfDirectory(atPath: pair.folder.path)
        #expect(!everything.contains { $0.contains("trash") })

        // Restored: the same note, its next version, shown on every device again.
        let id = VaultSession.noteID(kept)
        let trashDirectory = pair.phone.state.trashDirectory(root: pair.phone.configRoot)
        let entryName = try #require(
            try FileManager.default.contentsOfDirectory(atPath: trashDirectory.path).first { $0.hasPrefix(id) })
        let entryFile = trashDirectory.appendingPathComponent(entryName)
        let entryBytes = try Data(contentsOf: entryFile)
        #expect(try pair.phone.restoreFromTrash(String(id.prefix(8))) == kept)
        let shown = try pair.home.list().notes
        #expect(shown.map(\.id) == [id] && shown.first?.markdown == "# Packing list\n\ntent\n")
        #expect(shown.first?.version == 2)
        #expect(try pair.phone.trash().map(\.title) == ["Old idea"])
        expectSempereError(.notFound) { try pair.phone.restoreFromTrash(String(id.prefix(8))) }
        // An entry whose note is live (an `rm` that stopped after keeping it), edited since: restoring it would
        // write the old text over the edit, so it is refused and the entry dropped.
        try pair.phone.updateNote(at: kept, markdown: "# Packing list\n\ntent, stove\n")
        try entryBytes.write(to: entryFile)
        let live = expectSempereError(.notFound) { try pair.phone.restoreFromTrash(String(id.prefix(8))) }
        #expect(live?.reason.contains("never removed from the vault") == true)
        #expect(try pair.home.list().notes.first?.markdown == "# Packing list\n\ntent, stove\n")
        #expect(try pair.phone.trash().map(\.title) == ["Old idea"])

        // Thirty days and a second later, the other entry is gone for good.
        let later = try VaultSession(
            configRoot: pair.phone.configRoot, folder: pair.folder.path,
            now: Date().addingTimeInterval(TimeInterval(VaultSession.trashDays) * 86_400 + 1))
        #expect(try later.trash().isEmpty)
        let dropID = VaultSession.noteID(dropped)
        expectSempereError(.notFound) { try later.restoreFromTrash(String(dropID.prefix(8))) }
    }
}
