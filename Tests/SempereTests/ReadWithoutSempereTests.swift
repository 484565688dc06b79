import Foundation
import Processes
import Testing

/// docs/read-without-sempere.md, run as written: its `sh read-current` and `sh read-older` blocks, with
/// Debian's `/usr/bin/age` and `age-keygen`, on a vault made with the `sempere` command.
@Suite("Reading notes with stock age, as docs/read-without-sempere.md says")
struct ReadWithoutSempereTests {
    /// The fenced block of the document whose info string is `sh <name>`.
    static func block(_ name: String) throws -> String {
        let doc = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/read-without-sempere.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        let start = try #require(text.range(of: "```sh \(name)\n"), "docs/read-without-sempere.md has no `sh \(name)`")
        let end = try #require(text.range(of: "\n```\n", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    @Test("the documented commands read a note of the current epoch and one of the epoch before")
    func documentedCommands() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/age") else {
            Issue.record("Debian's age is not installed: run scripts/setup.sh")
            return
        }
        let scratch = try CLITests.Scratch()
        defer { scratch.remove() }
        _ = try CLITests.twoDevices(scratch)
        let old = try scratch.run("A", ["new", "Before", "--text", "written in epoch 1", "--json"])
        let oldPath = try #require((try old.json() as? [String: Any])?["path"] as? String)
        #expect(try scratch.run("A", ["devices", "remove", "Phone"]).status == 0)
        let new = try scratch.run("A", ["new", "After", "--text", "written in epoch 2", "--json"])
        let newPath = try #require((try new.json() as? [String: Any])?["path"] as? String)

        let script =
            "set -eu\n" + (try Self.block("read-current")) + "\n" + (try Self.block("read-older"))
            + "\nrm -r \"$work\"\n"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script]
        process.currentDirectoryURL = URL(fileURLWithPath: scratch.vault)
        process.environment = [
            "PATH": "/usr/bin:/bin", "KEY": scratch.config("A") + "/keys/device-age-identity.key", "NOTE": newPath,
            "OLD_NOTE": oldPath, "TMPDIR": scratch.root.path,
        ]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(errors)")
        #expect(text.hasPrefix("# After\n\nwritten in epoch 2\n\n<!-- sempere-note v2 author="), "\(text.prefix(200))")
        #expect(text.contains(" epoch=2 ") && text.contains("# Before\n\nwritten in epoch 1\n\n<!-- sempere-note v2"))
        // The plaintext vault keys went with the private temporary folder.
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.root.path)
        #expect(!left.contains { $0.hasPrefix("tmp.") })
    }
}
