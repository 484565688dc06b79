import Foundation
import Processes
import SiblingsTestSupport
import Testing

/// A device's unwrap key held by an age plugin (docs/sempere-format.md, "An unwrap key in hardware"), through
/// age-plugin-siblingstest, the plugin written for the tests from C2SP age-plugin.md (``TestAgePlugin``). The key
/// store keeps only the plugin's identity file; every unwrap runs the plugin; stock `age` drives the same plugin to
/// the same note; and a plugin that is missing, unplugged, crashing or given a wrong PIN is a clear error that
/// changes nothing.
@Suite("sempere: the device's unwrap key in an age plugin")
struct CLIKeyPluginTests {
    typealias Scratch = CLITests.Scratch

    /// Every file under `path` with its bytes: what a failed command must leave as it was.
    static func snapshot(_ path: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let relative = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = path + "/" + relative
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[relative] = try Data(contentsOf: URL(fileURLWithPath: full))
            }
        }
        return files
    }

    /// Runs stock `age` with `arguments` in `directory`, the plugin in `PATH`; its standard output.
    static func age(_ arguments: [String], in directory: URL, plugin: TestAgePlugin) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/age")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(plugin.environment()) { $1 }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "age \(arguments): \(said)")
        return String(decoding: data, as: UTF8.self)
    }

    /// vault.json's signed body, as JSON.
    static func body(_ scratch: Scratch) throws -> [String: Any] {
        let file = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: scratch.vault + "/vault.json")))
                as? [String: Any])
        let body = try #require(file["body"] as? String)
        return try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    }

    @Test("create --unwrap-key-plugin: the store keeps only the plugin's identity file; stock age opens the same note")
    func createWithAPluginKey() throws {
        let scratch = try Scratch()
        let plugin = try TestAgePlugin()
        defer {
            scratch.remove()
            plugin.remove()
        }
        let environment = plugin.environment()
        let created = try scratch.run(
            "A",
            ["create", scratch.vault, "--name", "Laptop", "--unwrap-key-plugin", plugin.identityFile.path, "--json"],
            environment: environment)
        #expect(created.status == 0, "\(created.err)")
        let deviceID = try #require((try created.json() as? [String: Any])?["device_id"] as? String)
        // The key store holds the plugin's identity file, which names the key; no age secret key anywhere in it.
        let keys = try Self.snapshot(scratch.config("A") + "/keys")
        #expect(
            keys["device-age-identity.key"].map { String(decoding: $0, as: UTF8.self) }
                == "# recipient: \(plugin.recipient)\n\(plugin.identity)\n")
        #expect(!keys.values.contains { String(decoding: $0, as: UTF8.self).contains("AGE-SECRET-KEY") })
        let devices = try #require(try Self.body(scratch)["devices"] as? [[String: Any]])
        #expect(devices.first?["wrap_recipient"] as? String == plugin.recipient)

        let written = try scratch.run("A", ["new", "Plugged", "--text", "kept in hardware"], environment: environment)
        #expect(written.status == 0, "\(written.err)")
        let id = written.out.trimmingCharacters(in: .whitespacesAndNewlines)
        let before = plugin.runs().count
        let cat = try scratch.run("A", ["cat", id], environment: environment)
        #expect(cat.status == 0 && cat.out.contains("kept in hardware"), "\(cat.err)")
        // Reading ran the plugin's unwrap: the key was nowhere else.
        #expect(plugin.runs().dropFirst(before).contains { $0.hasPrefix("--age-plugin=identity-v1") })

        // Stock age, driving the same plugin: the device's wrap in vault.json gives the epoch's key, which opens the
        // note's file, and the text is the note's.
        let epochs = try #require(try Self.body(scratch)["epochs"] as? [[String: Any]])
        let wrap = try #require((epochs.last?["wraps"] as? [String: String])?[deviceID])
        let work = scratch.root.appendingPathComponent("stock-age")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        try wrap.write(to: work.appendingPathComponent("wrap.age"), atomically: true, encoding: .utf8)
        let epochKey = try Self.age(["-d", "-i", plugin.identityFile.path, "wrap.age"], in: work, plugin: plugin)
        #expect(epochKey.hasPrefix("AGE-SECRET-KEY-1"))
        try epochKey.write(to: work.appendingPathComponent("epoch.key"), atomically: true, encoding: .utf8)
        let note = try Self.age(
            ["-d", "-i", "epoch.key", scratch.vault + "/notes/\(deviceID)/\(id).age"], in: work, plugin: plugin)
        #expect(note.hasPrefix("# Plugged\n\nkept in hardware"))
    }

    @Test(
        "a plugin missing, unplugged, crashing or given a wrong PIN: a clear error, nothing changed; the PIN is asked")
    func failingPlugin() throws {
        let scratch = try Scratch()
        let plugin = try TestAgePlugin()
        defer {
            scratch.remove()
            plugin.remove()
        }
        // Made with the token asking for its PIN: create tries the key, and the PIN is asked on the terminal.
        let created = try CLITests.onTerminal(
            scratch, "A",
            ["create", scratch.vault, "--name", "Laptop", "--unwrap-key-plugin", plugin.identityFile.path],
            typing: "123456", after: "PIN for the test token", environment: plugin.environment(mode: "pin"))
        #expect(created.status == 0 && created.screen.contains("RECOVERY KIT"), "\(created.screen)")
        let written = try scratch.run(
            "A", ["new", "Kept", "--text", "nothing lost"], environment: plugin.environment())
        let id = written.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(written.status == 0, "\(written.err)")
        let vault = try Self.snapshot(scratch.vault)
        let config = try Self.snapshot(scratch.config("A"))

        let cases: [(environment: [String: String], says: String)] = [
            (plugin.environment(mode: "absent"), "the test token is not plugged in"),
            (plugin.environment(mode: "crash"), "crashed on purpose"),
            (["PATH": "/usr/bin:/bin"], "age-plugin-siblingstest is not installed"),
        ]
        for (environment, says) in cases {
            for arguments in [["cat", id], ["new", "Lost?", "--text", "not written"], ["rm", id], ["ls"]] {
                let failed = try scratch.run("A", arguments, environment: environment)
                #expect(failed.status == 1, "\(arguments) \(says): \(failed.out)")
                #expect(failed.err.contains("held by an age plugin that could not use it"), "\(failed.err)")
                #expect(failed.err.contains(says), "\(arguments): \(failed.err)")
                #expect(!failed.err.contains("unexpected error"), "\(failed.err)")
            }
        }
        // A wrong PIN, typed on the terminal: refused the same way, after one try only (a YubiKey blocks its PIN
        // after three wrong ones, so a command never sends a PIN that failed again).
        try? FileManager.default.removeItem(at: plugin.log)
        let wrongPIN = try CLITests.onTerminal(
            scratch, "A", ["cat", id], typing: "000000", after: "PIN for the test token",
            environment: plugin.environment(mode: "pin"))
        #expect(wrongPIN.status == 1 && wrongPIN.screen.contains("wrong PIN"), "\(wrongPIN.screen)")
        #expect(plugin.runs() == ["--age-plugin=identity-v1 pin"])
        #expect(try Self.snapshot(scratch.vault) == vault)
        #expect(try Self.snapshot(scratch.config("A")) == config)

        // The right PIN, on the terminal with echo off: the note, as it was.
        let pinned = try CLITests.onTerminal(
            scratch, "A", ["cat", id], typing: "123456", after: "PIN for the test token",
            environment: plugin.environment(mode: "pin"))
        #expect(pinned.status == 0 && pinned.screen.contains("nothing lost"), "\(pinned.screen)")
        #expect(!pinned.screen.contains("123456"), "the PIN was echoed: \(pinned.screen)")
        // The plugin's message reaches standard error.
        let touched = try scratch.run("A", ["cat", id], environment: plugin.environment(mode: "msg"))
        #expect(touched.status == 0 && touched.err.contains("touch the test token"), "\(touched.err)")
    }

    @Test("a token that goes away in the middle of a command: the command stops, and no cache is written over")
    func tokenGoneMidCommand() throws {
        let scratch = try Scratch()
        let plugin = try TestAgePlugin()
        defer {
            scratch.remove()
            plugin.remove()
        }
        let environment = plugin.environment()
        #expect(
            try scratch.run(
                "A", ["create", scratch.vault, "--name", "Laptop", "--unwrap-key-plugin", plugin.identityFile.path],
                environment: environment
            ).status == 0)
        let written = try scratch.run("A", ["new", "Kept", "--text", "through every run"], environment: environment)
        #expect(written.status == 0, "\(written.err)")
        for _ in 0..<2 { #expect(try scratch.run("A", ["ls"], environment: environment).status == 0) }
        let config = try Self.snapshot(scratch.config("A"))
        let vault = try Self.snapshot(scratch.vault)
        // The n-th unwrap of a command fails, for each n the command reaches: it stops, saying why, and the note
        // index (the versions shown) and the epoch keys this device remembers are as they were.
        var failedRuns = 0
        for run in 1...8 {
            try? FileManager.default.removeItem(at: plugin.log)
            var failing = environment
            failing["AGE_PLUGIN_SIBLINGSTEST_FAIL_RUN"] = String(run)
            let listed = try scratch.run("A", ["ls"], environment: failing)
            let unwraps = plugin.runs().filter { $0.hasPrefix("--age-plugin=identity-v1") }.count
            guard unwraps >= run else {
                #expect(listed.status == 0, "\(listed.err)")
                break
            }
            failedRuns += 1
            #expect(listed.status == 1 && listed.err.contains("not plugged in"), "run \(run): \(listed.err)")
            #expect(unwraps == run, "the command went on after the failing run \(run)")
            #expect(try Self.snapshot(scratch.config("A")) == config, "run \(run) changed the device's state")
            #expect(try Self.snapshot(scratch.vault) == vault, "run \(run) changed the vault")
        }
        #expect(failedRuns >= 2)
        let read = try scratch.run("A", ["ls"], environment: environment)
        #expect(read.status == 0 && read.out.contains("Kept"), "\(read.err)")
    }

    @Test("a plugin key that cannot be used is refused before anything is written, and never in a post-quantum vault")
    func refusedUpFront() throws {
        let scratch = try Scratch()
        let plugin = try TestAgePlugin()
        defer {
            scratch.remove()
            plugin.remove()
        }
        func nothingWritten(_ device: String) throws {
            #expect(!FileManager.default.fileExists(atPath: scratch.vault + "/vault.json"))
            #expect(try Self.snapshot(scratch.config(device) + "/keys").isEmpty)
        }
        let noRecipient = scratch.root.appendingPathComponent("no-recipient.txt")
        try (plugin.identity + "\n").write(to: noRecipient, atomically: true, encoding: .utf8)
        let withoutRecipient = try scratch.run(
            "A", ["create", scratch.vault, "--name", "Laptop", "--unwrap-key-plugin", noRecipient.path],
            environment: plugin.environment())
        #expect(withoutRecipient.status == 1 && withoutRecipient.err.contains("does not say its recipient"))
        try nothingWritten("A")
        let unplugged = try scratch.run(
            "A", ["create", scratch.vault, "--name", "Laptop", "--unwrap-key-plugin", plugin.identityFile.path],
            environment: plugin.environment(mode: "absent"))
        // Its PIN asked on the terminal while create tries the key; the wrong one stops create with nothing written.
        let wrongPIN = try CLITests.onTerminal(
            scratch, "A",
            ["create", scratch.vault, "--name", "Laptop", "--unwrap-key-plugin", plugin.identityFile.path],
            typing: "000000", after: "PIN for the test token", environment: plugin.environment(mode: "pin"))
        #expect(wrongPIN.status == 1 && wrongPIN.screen.contains("wrong PIN"), "\(wrongPIN.screen)")
        try nothingWritten("A")
        #expect(unplugged.status == 1 && unplugged.err.contains("not plugged in"), "\(unplugged.err)")
        try nothingWritten("A")
        let postQuantum = try scratch.run(
            "A",
            [
                "create", scratch.vault, "--name", "Laptop", "--post-quantum", "--unwrap-key-plugin",
                plugin.identityFile.path,
            ],
            environment: plugin.environment())
        #expect(postQuantum.status == 64 && postQuantum.err.contains("classical"), "\(postQuantum.err)")

        // A post-quantum vault: a device asking to join with a plugin key is refused, and makes no keys.
        let made = try scratch.run("A", ["create", scratch.vault, "--name", "Laptop", "--post-quantum"])
        #expect(made.status == 0, "\(made.err)")
        let asked = try scratch.run(
            "B", ["join", scratch.vault, "--name", "Phone", "--unwrap-key-plugin", plugin.identityFile.path],
            environment: plugin.environment())
        #expect(asked.status == 1 && asked.err.contains("post-quantum"), "\(asked.err)")
        #expect(try Self.snapshot(scratch.config("B") + "/keys").isEmpty)
        #expect(try Self.snapshot(scratch.vault + "/requests").isEmpty)
    }

    @Test("a phone joins with its key in a plugin: home wraps to it only where the plugin is; without, nothing changes")
    func joinWithAPluginKey() throws {
        let scratch = try Scratch()
        let plugin = try TestAgePlugin()
        defer {
            scratch.remove()
            plugin.remove()
        }
        #expect(try scratch.run("A", ["create", scratch.vault, "--name", "Laptop"]).status == 0)
        let asked = try scratch.run(
            "B", ["join", scratch.vault, "--name", "Phone", "--unwrap-key-plugin", plugin.identityFile.path, "--json"],
            environment: plugin.environment())
        #expect(asked.status == 0, "\(asked.err)")
        let words = try #require((try asked.json() as? [String: Any])?["words"] as? String)
        let list = try Data(contentsOf: URL(fileURLWithPath: scratch.vault + "/vault.json"))
        let homeless = try scratch.run(
            "A", ["devices", "approve", "--words", words], environment: ["PATH": "/usr/bin:/bin"])
        #expect(homeless.status == 1 && homeless.err.contains("keeps its key with an age plugin"), "\(homeless.err)")
        #expect(homeless.err.contains("age-plugin-siblingstest is not installed"), "\(homeless.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: scratch.vault + "/vault.json")) == list)

        let approved = try scratch.run(
            "A", ["devices", "approve", "--words", words, "--json"], environment: plugin.environment())
        #expect(approved.status == 0, "\(approved.err)")
        let homeWords = try #require((try approved.json() as? [String: Any])?["words"] as? String)
        let joined = try scratch.run(
            "B", ["join", scratch.vault, "--words", homeWords], environment: plugin.environment())
        #expect(joined.status == 0, "\(joined.err)")
        let written = try scratch.run("A", ["new", "For the phone", "--text", "wrapped by the plugin"])
        let id = written.out.trimmingCharacters(in: .whitespacesAndNewlines)
        let read = try scratch.run("B", ["cat", id], environment: plugin.environment())
        #expect(read.status == 0 && read.out.contains("wrapped by the plugin"), "\(read.err)")
        // The phone's key is the plugin's: unplugged, the phone reads nothing.
        let unplugged = try scratch.run("B", ["cat", id], environment: plugin.environment(mode: "absent"))
        #expect(unplugged.status == 1 && unplugged.err.contains("not plugged in"), "\(unplugged.err)")
    }
}
