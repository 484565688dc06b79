import Foundation
import Testing

/// A device that was removed, and wants back in (issue 42): one clear message, the way to save what it had not
/// synced, and `sempere join` that asks again with a fresh key, the old state kept aside.
extension CLITests {
    @Test("a removed device is told plainly, joins again with a fresh key, and can still save its unsynced notes")
    func aRemovedDeviceJoinsAgain() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (_, phoneID) = try Self.twoDevices(scratch)
        #expect(try scratch.run("A", ["new", "Laptop notes", "--text", "from home"]).status == 0)
        #expect(try scratch.run("B", ["new", "Phone notes", "--text", "synced before"]).status == 0)
        #expect(try scratch.run("A", ["devices", "remove", "Phone"]).status == 0)

        let told = try scratch.run("B", ["ls"])
        #expect(told.status == 1)
        #expect(
            told.err.contains("this device was removed from the vault") && told.err.contains("export --unsynced")
                && told.err.contains("sempere join"), "\(told.err)")
        #expect(!told.err.contains("already in the vault"))
        let status = try scratch.run("B", ["status"])
        #expect(status.status == 0 && status.out.contains("removed from the vault"), "\(status.out) \(status.err)")

        // Back in: a fresh key, the old state kept aside, and home approves it as a new device.
        let asked = try scratch.run("B", ["join", scratch.vault, "--name", "Phone", "--json"])
        #expect(asked.status == 0, "\(asked.err)")
        #expect(asked.err.contains("had been removed from the vault") && asked.err.contains("kept in"), "\(asked.err)")
        let request = try #require(try asked.json() as? [String: Any])
        #expect(request["device_id"] as? String != phoneID)
        let words = try #require(request["words"] as? String)
        let approved = try scratch.run("A", ["devices", "approve", "--words", words, "--json"])
        #expect(approved.status == 0, "\(approved.err)")
        let homeWords = try #require((try approved.json() as? [String: Any])?["words"] as? String)
        let joined = try scratch.run("B", ["join", scratch.vault, "--words", homeWords])
        #expect(joined.status == 0, "\(joined.err)")
        let listed = try scratch.run("B", ["ls"])
        #expect(listed.status == 0 && listed.out.contains("Laptop notes") && listed.out.contains("Phone notes"))

        // The old state, kept aside, is a configuration directory: what the old key wrote unsynced is saved from it.
        let removed = URL(fileURLWithPath: scratch.config("B")).appendingPathComponent("removed")
        let aside = try #require(try FileManager.default.contentsOfDirectory(atPath: removed.path).first)
        let saved = try scratch.run(
            "B",
            [
                "export", "--unsynced", scratch.root.appendingPathComponent("saved").path, "--config",
                removed.appendingPathComponent(aside).path,
            ])
        #expect(saved.status == 0, "\(saved.err)")
    }
}
