import Age
import Foundation
import Sempere
import Testing

/// Versions and manifests (issue "Sempere, part 3", beyond the guide): a storage provider that puts back an
/// old version of a note, or a deleted one, or holds a note back, is detected by the note's signed version and
/// its author's signed manifest; each attack below would show the old text without the check.
@Suite("Sempere versions and manifests: notes the provider rolls back, resurrects or holds back")
struct NoteTriageTests {
    typealias Pair = VaultSessionTests.Pair

    func file(_ pair: Pair, _ path: String) -> URL { pair.folder.appendingPathComponent(path) }

    @Test("an old version put back is set aside once a newer one was shown; one never shown is pending")
    func oldVersionPutBack() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let path = try pair.phone.newNote(markdown: "# Plan\nv1\n")
        #expect(try pair.home.list().notes.map(\.markdown) == ["# Plan\nv1\n"])
        let first = try Data(contentsOf: file(pair, path))
        try pair.phone.updateNote(at: path, markdown: "# Plan\nv2\n")
        let shown = try pair.home.list().notes
        #expect(shown.map(\.markdown) == ["# Plan\nv2\n"] && shown.map(\.version) == [2])
        let second = try Data(contentsOf: file(pair, path))

        // The provider puts version 1 back: home has shown version 2, so it is set aside, never shown.
        try first.write(to: file(pair, path))
        let listing = try pair.home.list()
        #expect(listing.notes.isEmpty)
        #expect(listing.setAside.map(\.path) == [path])
        #expect(listing.setAside.first?.category == .oldVersionPutBack)
        #expect(listing.setAside.first?.reason.contains("already shown version 2") == true)
        expectSempereError(.untrustedNote) { try pair.home.open(notePath: path) }

        // A device that never showed version 2 (its index gone) calls it pending: the manifest lists 2.
        try FileManager.default.removeItem(at: pair.home.state.noteIndexFile(root: pair.home.configRoot))
        let fresh = try pair.home.list()
        #expect(fresh.notes.isEmpty && fresh.setAside.isEmpty)
        #expect(fresh.pending.map(\.path) == [path] && fresh.pending.first?.expected == 2)
        #expect(fresh.pending.first?.version == 1)
        // Once version 2 arrives, it is the note again.
        try second.write(to: file(pair, path))
        #expect(try pair.home.list().notes.map(\.markdown) == ["# Plan\nv2\n"])
    }

    @Test("a deleted note put back is set aside on the other devices, and its author deletes it again")
    func deletedNotePutBack() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let path = try pair.phone.newNote(markdown: "# Secret\n")
        #expect(try pair.home.list().notes.count == 1)
        let bytes = try Data(contentsOf: file(pair, path))
        try pair.phone.removeNote(at: path)
        try bytes.write(to: file(pair, path))

        let listing = try pair.home.list()
        #expect(listing.notes.isEmpty)
        #expect(listing.setAside.map(\.category) == [.deletedNotePutBack])
        #expect(listing.setAside.first?.reason.contains("its author deleted this note") == true)
        // The author, which deleted it, deletes it again (its deletion is what its manifest says).
        #expect(try pair.phone.list().notes.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: file(pair, path).path))
        #expect(try pair.home.list().setAside.isEmpty)
    }

    @Test("a note the provider deletes or holds back is pending on every other device, never silently gone")
    func heldBack() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let path = try pair.phone.newNote(markdown: "# Kept\n")
        let bytes = try Data(contentsOf: file(pair, path))
        try FileManager.default.removeItem(at: file(pair, path))
        let listing = try pair.home.list()
        #expect(listing.notes.isEmpty && listing.pending.map(\.path) == [path])
        #expect(listing.pending.first?.version == nil && listing.pending.first?.expected == 1)
        try bytes.write(to: file(pair, path))
        #expect(try pair.home.list().notes.map(\.path) == [path])
    }

    @Test("an author's manifest put back to an older one is not followed; a forged one is refused")
    func manifestRollback() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let first = try pair.phone.newNote(markdown: "# One\n")
        #expect(try pair.home.list().notes.count == 1)
        let manifest = file(pair, NoteManifest.path(device: pair.phone.keys.id))
        let old = try Data(contentsOf: manifest)
        try pair.phone.updateNote(at: first, markdown: "# One, again\n")
        #expect(try pair.home.list().notes.map(\.version) == [2])
        let firstV2 = try Data(contentsOf: file(pair, first))

        try old.write(to: manifest)
        let listing = try pair.home.list()
        #expect(listing.warnings.contains { $0.contains("older than one this device has seen") })
        #expect(listing.notes.map(\.version) == [2])
        // Home follows the newer manifest it kept: version 1 put back with the old manifest is still refused
        // even with its index gone (pending, since the kept manifest lists version 2).
        try FileManager.default.removeItem(at: pair.home.state.noteIndexFile(root: pair.home.configRoot))
        let v1 = try VaultNote.seal(
            markdown: "# One\n", path: first, vault: pair.phone.body, author: pair.phone.keys, version: 1)
        try v1.write(to: file(pair, first))
        #expect(try pair.home.list().pending.map(\.path) == [first])
        try firstV2.write(to: file(pair, first))

        // A manifest the phone did not sign is refused, said so, and not followed.
        var forged = try JSONSerialization.jsonObject(with: old) as! [String: Any]
        forged["body"] = (forged["body"] as! String).replacingOccurrences(of: "\"sequence\":1", with: "\"sequence\":99")
        try JSONSerialization.data(withJSONObject: forged).write(to: manifest)
        let refused = try pair.home.list()
        #expect(refused.warnings.contains { $0.contains("refused") && $0.contains("not signed by its device") })
        #expect(refused.notes.map(\.version) == [2])
    }

    @Test("a note moved into another device's folder: set aside there, deleted only by that folder's device")
    func movedNote() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let homeNote = try pair.home.newNote(markdown: "# Taxes\n")
        let moved = "notes/\(pair.phone.keys.id)/\(VaultSession.noteID(homeNote)).age"
        try FileManager.default.createDirectory(
            at: file(pair, "notes/\(pair.phone.keys.id)"), withIntermediateDirectories: true)
        try FileManager.default.moveItem(at: file(pair, homeNote), to: file(pair, moved))

        let onHome = try pair.home.list()
        #expect(onHome.setAside.map(\.path) == [moved] && onHome.setAside.first?.category == .untrusted)
        // Home's own note is gone from its folder: pending (its manifest lists it), not silently absent.
        #expect(onHome.pending.map(\.path) == [homeNote])
        // Home may not delete in the phone's folder; restoring copies the text into a note of its own.
        let entry = try pair.home.setAsideEntry(moved)
        expectSempereError(.notHome) { try pair.home.repairDelete(entry) }
        let restored = try pair.home.repairRestore(entry)
        #expect(!restored.removedSetAside && restored.keptBecause?.contains("only that device writes") == true)
        #expect(try pair.home.open(notePath: restored.path).markdown == "# Taxes\n")
        // The phone, whose folder it is, deletes it after being asked (the CLI asks).
        try pair.phone.repairDelete(try pair.phone.setAsideEntry(moved))
        #expect(!FileManager.default.fileExists(atPath: file(pair, moved).path))
    }

    @Test("a manifest's canonical body is signed; its bytes parse back to the same versions")
    func manifestBytes() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let a = try pair.phone.newNote(markdown: "# A\n")
        let b = try pair.phone.newNote(markdown: "# B\n")
        try pair.phone.removeNote(at: a)
        let data = try Data(contentsOf: file(pair, NoteManifest.path(device: pair.phone.keys.id)))
        let outer = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(outer["format"] as? String == "sempere-manifest-v1")
        let body = try #require(outer["body"] as? String)
        let idA = VaultSession.noteID(a)
        let idB = VaultSession.noteID(b)
        #expect(
            body == "{\"deleted\":{\"\(idA)\":1},\"device\":\"\(pair.phone.keys.id)\",\"notes\":{\"\(idB)\":1},"
                + "\"sequence\":3,\"vault_id\":\"\(pair.phone.body.vaultID)\"}")
    }
}
