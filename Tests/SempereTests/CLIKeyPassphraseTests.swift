import Foundation
import Processes
import SiblingsTestSupport
import Testing

/// A passphrase for the device's own keys (docs/sempere-format.md, "A passphrase for the device's keys"): the keys
/// as age scrypt files that pyrage (an outside age implementation) opens with the passphrase, asked by every
/// command, and a wrong or missing one a clear error that changes nothing.
@Suite("sempere: a passphrase for this device's keys")
struct CLIKeyPassphraseTests {
    typealias Scratch = CLITests.Scratch

    static let passphrase = "correct horse battery"

    func keyFiles(_ scratch: Scratch, _ device: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: scratch.config(device) + "/keys").sorted()
    }

    /// The age identity in the device's passphrase-protected key file, opened by pyrage with `passphrase`.
    func openedByPyrage(_ scratch: Scratch, _ device: String, passphrase: String) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try ReferenceOracle.python())
        process.arguments = [
            "-c",
            "import sys, pyrage.passphrase as p; "
                + "sys.stdout.write(p.decrypt(open(sys.argv[1], 'rb').read(), sys.argv[2]).decode())",
            scratch.config(device) + "/keys/device-age-identity.age", passphrase,
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = Pipe()
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test("create --protect-keys: scrypt key files; every command asks; wrong or missing passphrase changes nothing")
    func protectedFromCreation() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let environment = ["KEYS": Self.passphrase, "WRONG": "not the passphrase at all", "SHORT": "short"]
        func run(_ arguments: [String], passphrase variable: String? = "KEYS") throws -> CLITests.Result {
            try scratch.run(
                "A", arguments + (variable.map { ["--keys-passphrase-env", $0] } ?? []), environment: environment)
        }
        let weak = try run(["create", scratch.vault, "--name", "Laptop", "--protect-keys"], passphrase: "SHORT")
        #expect(weak.status == 1 && weak.err.contains("at least 10 characters"), "\(weak.err)")
        #expect(!FileManager.default.fileExists(atPath: scratch.vault + "/vault.json"))
        let created = try run(["create", scratch.vault, "--name", "Laptop", "--protect-keys"])
        #expect(created.status == 0, "\(created.err)")
        #expect(created.err.contains("reading the passphrase of this device's keys from $KEYS"))
        // Both keys are age scrypt files (`age -p`'s kind), nothing of them in the clear.
        #expect(try keyFiles(scratch, "A") == ["device-age-identity.age", "device-signing-key.age"])
        let file = try Data(contentsOf: URL(fileURLWithPath: scratch.config("A") + "/keys/device-signing-key.age"))
        #expect(String(decoding: file.prefix(32), as: UTF8.self).hasPrefix("age-encryption.org/v1\n-> scrypt "))
        #expect(try openedByPyrage(scratch, "A", passphrase: Self.passphrase).hasPrefix("AGE-SECRET-KEY-1"))
        #expect(try openedByPyrage(scratch, "A", passphrase: "wrong").isEmpty)

        let written = try run(["new", "Secret", "--text", "kept"])
        #expect(written.status == 0, "\(written.err)")
        let id = written.out.trimmingCharacters(in: .whitespacesAndNewlines)
        // No terminal and no variable named: refused, saying how to give it; a wrong one: refused, nothing done.
        let missing = try run(["ls"], passphrase: nil)
        #expect(missing.status == 1 && missing.err.contains("--keys-passphrase-env"), "\(missing.err)")
        let wrong = try run(["rm", id], passphrase: "WRONG")
        #expect(wrong.status == 1 && wrong.err.contains("does not open this device's keys"), "\(wrong.err)")
        #expect(try run(["cat", id]).out.contains("kept"))

        // Removed, the keys are plain files again and no command asks; added again under a new passphrase.
        let removed = try run(["keys", "passphrase", "--remove"])
        #expect(removed.status == 0, "\(removed.err)")
        #expect(try keyFiles(scratch, "A") == ["device-age-identity.key", "device-signing-key.key"])
        #expect(try run(["cat", id], passphrase: nil).out.contains("kept"))
        let added = try scratch.run(
            "A", ["keys", "passphrase", "--new-passphrase-env", "NEW"],
            environment: ["NEW": "a new passphrase, longer"])
        #expect(added.status == 0 && added.out.contains("protected"), "\(added.err)")
        #expect(try keyFiles(scratch, "A") == ["device-age-identity.age", "device-signing-key.age"])
        #expect(try run(["cat", id]).err.contains("does not open"))
        let changed = try scratch.run(
            "A", ["keys", "passphrase", "--keys-passphrase-env", "NEW", "--new-passphrase-env", "KEYS"],
            environment: environment.merging(["NEW": "a new passphrase, longer"]) { $1 })
        #expect(changed.status == 0 && changed.out.contains("changed"), "\(changed.err)")
        #expect(try run(["cat", id]).out.contains("kept"))
    }

    @Test("join --protect-keys: the new device's keys are protected before it ever asks")
    func protectedFromJoining() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        #expect(try scratch.run("A", ["create", scratch.vault, "--name", "Laptop"]).status == 0)
        let environment = ["KEYS": Self.passphrase]
        let asked = try scratch.run(
            "B",
            ["join", scratch.vault, "--name", "Phone", "--protect-keys", "--keys-passphrase-env", "KEYS", "--json"],
            environment: environment)
        #expect(asked.status == 0, "\(asked.err)")
        #expect(try keyFiles(scratch, "B") == ["device-age-identity.age", "device-signing-key.age"])
        let words = try #require((try asked.json() as? [String: Any])?["words"] as? String)
        let approved = try scratch.run("A", ["devices", "approve", "--words", words, "--json"])
        let homeWords = try #require((try approved.json() as? [String: Any])?["words"] as? String)
        let refused = try scratch.run("B", ["join", scratch.vault, "--words", homeWords])
        #expect(refused.status == 1 && refused.err.contains("--keys-passphrase-env"), "\(refused.err)")
        let joined = try scratch.run(
            "B", ["join", scratch.vault, "--words", homeWords, "--keys-passphrase-env", "KEYS"],
            environment: environment)
        #expect(joined.status == 0 && joined.out.contains("Joined the vault"), "\(joined.err)")
    }
}
