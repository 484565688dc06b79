import Foundation
import Testing

/// `sempere` with a note edited on two devices at once and resolved on a third (docs/sempere-format.md,
/// "Editing any note").
@Suite("sempere: a conflict made on two devices, shown by ls and cat, resolved on a third")
struct CLIConflictTests {
    typealias Scratch = CLITests.Scratch

    /// Joins device `device` as `name` to the vault the laptop (A) manages.
    static func join(_ scratch: Scratch, _ device: String, name: String) throws {
        let asked = try scratch.run(device, ["join", scratch.vault, "--name", name, "--json"])
        let words = try #require((try asked.json() as? [String: Any])?["words"] as? String, "\(asked.err)")
        let approved = try scratch.run("A", ["devices", "approve", "--words", words, "--json"])
        let homeWords = try #require((try approved.json() as? [String: Any])?["words"] as? String, "\(approved.err)")
        #expect(try scratch.run(device, ["join", scratch.vault, "--words", homeWords]).status == 0)
    }

    /// An editor that appends `line` to the file it is given, after running `before` (a shell command).
    static func editor(_ scratch: Scratch, _ name: String, appending line: String, before: String = "") throws -> String
    {
        let script = scratch.root.appendingPathComponent("\(name).sh")
        try "#!/bin/sh\nset -e\n\(before)\necho '\(line)' >> \"$1\"\n".write(
            to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        return script.path
    }

    @Test(
        "the phone edits while the laptop saves its own edit: both kept; the tablet sees the conflict and resolves it")
    func conflictOnTwoDevicesResolvedOnAThird() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try CLITests.twoDevices(scratch)
        try Self.join(scratch, "C", name: "Tablet")
        let id = try scratch.run("A", ["new", "Trip", "--text", "dates: May"]).out
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try scratch.run("B", ["ls"]).out.contains("Trip"))

        // The phone opens the note in its editor; while it is open, the laptop edits and saves the same note.
        let laptopEditor = try Self.editor(scratch, "laptop", appending: "by train")
        let phoneEditor = try Self.editor(
            scratch, "phone", appending: "by bike",
            before: "SEMPERE_CONFIG='\(scratch.config("A"))' EDITOR='\(laptopEditor)' VISUAL= '\(CLITests.binary)' "
                + "edit \(id) >/dev/null")
        let edited = try scratch.run("B", ["edit", id], environment: ["EDITOR": phoneEditor, "VISUAL": ""])
        #expect(edited.status == 0 && edited.out.contains("Saved note"), "\(edited.err)")

        // Both versions survive: ls marks the note once, cat shows both between markers (and says so).
        let listed = try scratch.run("C", ["ls"])
        let line = try #require(listed.out.split(separator: "\n").first { $0.contains("Trip") }, "\(listed.out)")
        #expect(line.contains("conflict: 2 versions") && line.contains("Laptop") && line.contains("Phone"))
        #expect(listed.out.split(separator: "\n").filter { $0.contains("Trip") }.count == 1)
        let json = try #require(try scratch.run("C", ["ls", "--json"]).json() as? [String: Any])
        let notes = try #require(json["notes"] as? [[String: Any]])
        #expect(notes.count == 2 && notes.allSatisfy { ($0["conflict_with"] as? [String])?.count == 1 })
        let shown = try scratch.run("C", ["cat", id])
        #expect(shown.status == 0 && shown.err.contains("has 2 versions"))
        #expect(shown.out.contains("by train") && shown.out.contains("by bike") && shown.out.contains("<<<<<<< "))
        let status = try scratch.run("C", ["status"])
        #expect(status.out.contains("1 in conflict"), "\(status.out)")

        // The tablet keeps the phone's version: one version everywhere, written (and signed) by the tablet.
        let wrong = try scratch.run("C", ["resolve", id, "--keep", "Watch"])
        #expect(wrong.status == 1 && wrong.err.contains("Laptop") && wrong.err.contains("Phone"))
        let resolved = try scratch.run("C", ["resolve", id, "--keep", "Phone"])
        #expect(resolved.status == 0, "\(resolved.err)")
        for device in ["A", "B", "C"] {
            let cat = try scratch.run(device, ["cat", id])
            #expect(cat.out == "# Trip\n\ndates: May\nby bike\n" && cat.err.isEmpty, "\(device): \(cat.err)")
        }
        let after = try #require(try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])
        let one = try #require((after["notes"] as? [[String: Any]])?.first)
        #expect(one["author_name"] as? String == "Tablet" && (one["conflict_with"] as? [String])?.isEmpty == true)
        // Each writer's replaced file is gone from the folder once it has listed.
        let folders = try FileManager.default.subpathsOfDirectory(atPath: scratch.vault + "/notes")
        #expect(folders.filter { $0.hasSuffix("\(id).age") }.count == 1, "\(folders)")

        // The laptop deletes the tablet's note, for every device.
        #expect(try scratch.run("A", ["rm", id]).status == 0)
        #expect(try scratch.run("C", ["cat", id]).err.contains("no note"))
    }
}
