import Foundation
import Testing

/// A device whose sync provider has delivered a new vault.json and not yet the record that came with it (issue 42):
/// what depends on the record waits for it, and nothing is set aside or offered for deletion on knowledge that is
/// not complete yet.
extension CLITests {
    @Test("a vault.json of a removal without its record: the removed device's notes wait; nothing set aside or deleted")
    func partlySynced() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try Self.twoDevices(scratch)
        let asked = try scratch.run("C", ["join", scratch.vault, "--name", "Tablet", "--json"])
        let words = try #require((try asked.json() as? [String: Any])?["words"] as? String, "\(asked.err)")
        let approved = try scratch.run("A", ["devices", "approve", "--words", words, "--json"])
        let homeWords = try #require((try approved.json() as? [String: Any])?["words"] as? String, "\(approved.err)")
        #expect(try scratch.run("C", ["join", scratch.vault, "--words", homeWords]).status == 0)
        let written = try scratch.run("B", ["new", "Phone notes", "--text", "written before its removal", "--json"])
        let id = try #require((try written.json() as? [String: Any])?["id"] as? String, "\(written.err)")
        #expect(try scratch.run("C", ["ls"]).out.contains("Phone notes"))
        let removed = try scratch.run("A", ["devices", "remove", "Phone"])
        #expect(removed.status == 0, "\(removed.err)")

        // The provider has brought the tablet the new vault.json, and not yet the record beside it.
        let records = URL(fileURLWithPath: scratch.vault).appendingPathComponent("records")
        let held = scratch.root.appendingPathComponent("held-records")
        try FileManager.default.moveItem(at: records, to: held)
        let listed = try #require(try scratch.run("C", ["ls", "--json"]).json() as? [String: Any])
        let pending = try #require(listed["pending"] as? [[String: Any]])
        #expect(pending.contains { ($0["reason"] as? String)?.contains("waiting for sync") == true }, "\(pending)")
        #expect((listed["set_aside"] as? [Any])?.isEmpty == true, "\(listed)")
        // `sempere status` says so at a glance.
        let status = try #require(try scratch.run("C", ["status", "--json"]).json() as? [String: Any])
        #expect(status["waiting_for_sync"] as? Int == 1, "\(status)")
        #expect((status["set_aside"] as? [String: Int])?.isEmpty == true)
        #expect((status["devices"] as? [[String: String]])?.compactMap { $0["name"] }.sorted() == ["Laptop", "Tablet"])
        #expect((status["home"] as? [String: String])?["name"] == "Laptop")
        #expect((status["this_device"] as? [String: String])?["name"] == "Tablet")
        let plainStatus = try scratch.run("C", ["status"])
        #expect(
            plainStatus.out.contains("1 waiting for sync") && plainStatus.out.contains("Tablet"), "\(plainStatus.out)")
        let repair = try #require(try scratch.run("C", ["repair", "list", "--json"]).json() as? [[String: Any]])
        #expect(repair.allSatisfy { ($0["entries"] as? [Any])?.isEmpty == true }, "\(repair)")
        let deleted = try scratch.run("C", ["repair", "delete", String(id.prefix(8)), "--yes"])
        #expect(deleted.status == 1 && deleted.err.contains("nothing set aside"), "\(deleted.out) \(deleted.err)")
        let notes = try FileManager.default.contentsOfDirectory(
            atPath: URL(fileURLWithPath: scratch.vault).appendingPathComponent("notes").path)
        #expect(!notes.isEmpty)

        // The record arrives: the note is shown again, as the removed device's note from before its removal.
        try FileManager.default.moveItem(at: held, to: records)
        let after = try scratch.run("C", ["ls"])
        #expect(after.status == 0 && after.out.contains("Phone notes"), "\(after.out) \(after.err)")
    }
}
