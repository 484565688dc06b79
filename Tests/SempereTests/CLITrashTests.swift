import Foundation
import Testing

extension CLITests {
    @Test("sempere rm moves a note to the trash; sempere trash lists it and restores it")
    func trashCommands() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try Self.twoDevices(scratch)
        let made = try scratch.run("B", ["new", "Packing", "--text", "tent", "--json"])
        let id = try #require((try made.json() as? [String: Any])?["id"] as? String, "\(made.err)")
        let removed = try scratch.run("B", ["rm", String(id.prefix(8))])
        #expect(removed.status == 0 && removed.out.contains("sempere trash restore"), "\(removed.err)")
        #expect(!(try scratch.run("A", ["ls"])).out.contains("Packing"))
        let listed = try scratch.run("B", ["trash"])
        #expect(listed.status == 0 && listed.out.contains("Packing") && listed.out.contains("kept until"))
        let restored = try scratch.run("B", ["trash", "restore", String(id.prefix(8))])
        #expect(restored.status == 0, "\(restored.err)")
        #expect(try scratch.run("A", ["cat", String(id.prefix(8))]).out.contains("tent"))
        #expect(try scratch.run("B", ["trash"]).out.contains("The trash is empty."))
        let missing = try scratch.run("B", ["trash", "restore", "ffff"])
        #expect(missing.status == 1 && missing.err.contains("the trash holds no note"), "\(missing.err)")
    }
}
