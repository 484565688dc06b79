import Age
import Foundation
import Processes
import SiblingsCrypto
import SiblingsTestSupport
import Synchronization
import Testing

/// The age plugin protocol (C2SP age-plugin.md), client side: ``AgePluginRecipient`` and ``AgePluginIdentity`` drive
/// age-plugin-siblingstest, a plugin written for the tests from the spec in Python (``TestAgePlugin``). Debian's
/// stock `age` (Go) drives the same plugin, and each opens what the other made through it.
@Suite struct PluginTests {
    /// Runs Debian's `age` with `arguments`, `input` on standard input, the plugin in `PATH`.
    static func age(
        _ arguments: [String], input: Data, plugin: TestAgePlugin, mode: String? = nil
    ) throws -> (
        status: Int32, out: Data, err: String
    ) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/age")
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(plugin.environment(mode: mode)) { $1 }
        let (stdin, stdout, stderr) = (Pipe(), Pipe(), Pipe())
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        try stdin.fileHandleForWriting.write(contentsOf: input)
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, out, err)
    }

    @Test("stock age and this client drive the same plugin to the same result, each way")
    func stockAgeAndThisClientAgree() throws {
        let plugin = try TestAgePlugin()
        defer { plugin.remove() }
        let recipient = try AgePluginRecipient(string: plugin.recipient, searchPath: plugin.directory.path)
        let identity = try AgePluginIdentity(string: plugin.identity, searchPath: plugin.directory.path)
        for size in [0, 1, 100_000] {
            let plaintext = SecureRandom.bytes(count: size)
            // Wrapped here through the plugin's recipient-v1, unwrapped by stock age through its identity-v1.
            let ours = try Age.encrypt(plaintext, to: [recipient])
            let opened = try Self.age(["-d", "-i", plugin.identityFile.path], input: ours, plugin: plugin)
            #expect(opened.status == 0 && opened.out == plaintext, "\(opened.err)")
            // Wrapped by stock age through the plugin, unwrapped here through it.
            let theirs = try Self.age(["-e", "-r", plugin.recipient], input: plaintext, plugin: plugin)
            #expect(theirs.status == 0, "\(theirs.err)")
            #expect(try Age.decrypt(theirs.out, identities: [identity]) == plaintext)
        }
        // The plugin did the work: both state machines ran, for both clients.
        let runs = plugin.runs()
        #expect(runs.filter { $0.hasPrefix("--age-plugin=recipient-v1") }.count == 6)
        #expect(runs.filter { $0.hasPrefix("--age-plugin=identity-v1") }.count == 6)
        // The stanza is the plugin's own, not X25519: no software key here could open it.
        let file = String(decoding: try Age.encrypt(Data("x".utf8), to: [recipient], armor: false), as: UTF8.self)
        #expect(file.contains("\n-> siblingstest ") && !file.contains("X25519"))
    }

    @Test("a plugin recipient mixes with an X25519 one; each identity opens the file alone")
    func mixedRecipients() throws {
        let plugin = try TestAgePlugin()
        defer { plugin.remove() }
        let software = X25519Identity()
        let recipient = try AgePluginRecipient(string: plugin.recipient, searchPath: plugin.directory.path)
        let file = try Age.encrypt(Data("both".utf8), to: [software.recipient, recipient])
        #expect(try Age.decrypt(file, identities: [software]) == Data("both".utf8))
        let identity = try AgePluginIdentity(string: plugin.identity, searchPath: plugin.directory.path)
        #expect(try Age.decrypt(file, identities: [identity]) == Data("both".utf8))
        // A file not wrapped to the plugin's key: the plugin finds nothing, and that is no matching identity.
        let other = try Age.encrypt(Data("other".utf8), to: [X25519Identity().recipient])
        #expect(throws: AgeError.self) {
            do { _ = try Age.decrypt(other, identities: [identity]) } catch let error as AgeError {
                #expect(error.code == .noMatchingIdentity)
                throw error
            }
        }
    }

    /// Each failure is `.plugin`, says what happened, and is never mistaken for "no matching identity".
    @Test(
        "a missing, unplugged or crashing plugin is a clear error; one found only in a relative PATH entry is not run")
    func failures() throws {
        let plugin = try TestAgePlugin()
        defer { plugin.remove() }
        let file = try Age.encrypt(
            Data("kept".utf8), to: [try AgePluginRecipient(string: plugin.recipient, searchPath: plugin.directory.path)]
        )
        func failure(searchPath: String) -> AgeError? {
            do {
                let identity = try AgePluginIdentity(string: plugin.identity, searchPath: searchPath)
                _ = try Age.decrypt(file, identities: [identity])
                return nil
            } catch {
                return error as? AgeError
            }
        }
        let missing = try #require(failure(searchPath: "/nonexistent:/usr/bin"))
        #expect(missing.code == .plugin && missing.reason.contains("age-plugin-siblingstest is not installed"))
        let absent = try #require(failure(searchPath: try plugin.searchPath(mode: "absent")))
        #expect(absent.code == .plugin && absent.reason.contains("the test token is not plugged in"), "\(absent)")
        let crashed = try #require(failure(searchPath: try plugin.searchPath(mode: "crash")))
        #expect(crashed.code == .plugin && crashed.reason.contains("crashed on purpose"), "\(crashed)")
        #expect(crashed.reason.contains("exit status 3"), "\(crashed)")
        // The spec: never run a plugin found through a relative PATH entry (one that resolves from the working
        // directory), even one that leads to it.
        let depth = FileManager.default.currentDirectoryPath.split(separator: "/").count
        let relativePath = String(repeating: "../", count: depth) + plugin.directory.path.dropFirst()
        #expect(FileManager.default.isExecutableFile(atPath: relativePath + "/age-plugin-siblingstest"))
        let relative = try #require(failure(searchPath: relativePath))
        #expect(relative.code == .plugin && relative.reason.contains("not installed"))
        // Wrapping needs the plugin too.
        #expect(throws: AgeError.self) {
            _ = try Age.encrypt(
                Data("x".utf8), to: [try AgePluginRecipient(string: plugin.recipient, searchPath: "/nonexistent")])
        }
        // The file is as it was: the right plugin opens it.
        #expect(failure(searchPath: plugin.directory.path) == nil)
    }

    @Test("the plugin's PIN request and message reach the UI; no PIN, or a wrong one, is the plugin's error")
    func requestsReachTheUI() throws {
        let plugin = try TestAgePlugin()
        defer { plugin.remove() }
        let file = try Age.encrypt(
            Data("pinned".utf8),
            to: [try AgePluginRecipient(string: plugin.recipient, searchPath: plugin.directory.path)])
        let asked = Mutex<[String]>([])
        func open(mode: String, answer: String?) throws -> Data {
            let ui = AgePluginUI(
                showMessage: { message in
                    asked.withLock { $0.append("msg: " + message) }
                    return true
                },
                requestSecret: { message in
                    asked.withLock { $0.append("secret: " + message) }
                    return answer
                })
            let identity = try AgePluginIdentity(
                string: plugin.identity, ui: ui, searchPath: try plugin.searchPath(mode: mode))
            return try Age.decrypt(file, identities: [identity])
        }
        #expect(try open(mode: "pin", answer: "123456") == Data("pinned".utf8))
        #expect(asked.withLock { $0 } == ["secret: PIN for the test token"])
        for answer in ["654321", nil] {
            let error = #expect(throws: AgeError.self) { _ = try open(mode: "pin", answer: answer) }
            #expect(error?.code == .plugin && error?.reason.contains("wrong PIN") == true)
        }
        // Unattended: the request fails, and so does the unwrap, saying why.
        let unattended = try AgePluginIdentity(string: plugin.identity, searchPath: try plugin.searchPath(mode: "pin"))
        #expect(throws: AgeError.self) { _ = try Age.decrypt(file, identities: [unattended]) }
        asked.withLock { $0 = [] }
        #expect(try open(mode: "msg", answer: nil) == Data("pinned".utf8))
        #expect(asked.withLock { $0 } == ["msg: touch the test token"])
    }

    @Test("unknown commands are answered unsupported, requests fail unattended; labels not asked for are refused")
    func greaseAndLabels() throws {
        let plugin = try TestAgePlugin()
        defer { plugin.remove() }
        let file = try Age.encrypt(
            Data("greased".utf8),
            to: [try AgePluginRecipient(string: plugin.recipient, searchPath: plugin.directory.path)])
        // The plugin fails (error internal) unless the answers are unsupported, then ok or fail.
        let identity = try AgePluginIdentity(string: plugin.identity, searchPath: try plugin.searchPath(mode: "grease"))
        #expect(try Age.decrypt(file, identities: [identity]) == Data("greased".utf8))
        // A plugin that labels its stanzas "postquantum" unasked: refused, not mixed with anything.
        let labelled = try AgePluginRecipient(
            string: plugin.recipient, searchPath: try plugin.searchPath(mode: "labels"))
        let error = #expect(throws: AgeError.self) { _ = try Age.encrypt(Data("x".utf8), to: [labelled]) }
        #expect(error?.code == .plugin && error?.reason.contains("labels") == true, "\(String(describing: error))")
    }

    @Test("plugin strings: names, Bech32 and case are checked; key files hold plugin identities and recipients")
    func strings() throws {
        let plugin = try TestAgePlugin()
        defer { plugin.remove() }
        let recipient = try AgePluginRecipient(string: plugin.recipient)
        #expect(recipient.name == "siblingstest" && recipient.string == plugin.recipient)
        let identity = try AgePluginIdentity(string: plugin.identity.lowercased())
        #expect(identity.name == "siblingstest" && identity.string == plugin.identity)
        // The description never shows the identity string, which may name a key.
        #expect(!"\(identity)".contains(plugin.identity))
        var damaged = Array(plugin.recipient)
        damaged[damaged.count - 3] = damaged[damaged.count - 3] == "q" ? "p" : "q"
        for bad in [
            String(damaged), "age1" + plugin.recipient.dropFirst(4).uppercased(), "age1", X25519Identity().string,
        ] {
            #expect(throws: AgeError.self) { _ = try AgePluginRecipient(string: bad) }
        }
        for bad in [X25519Identity().recipient.string, "AGE-PLUGIN-1QQQQ", plugin.recipient] {
            #expect(throws: AgeError.self) { _ = try AgePluginIdentity(string: bad) }
        }
        let identities = try AgeKeyFile.identities(from: plugin.identityText)
        #expect((identities.first as? AgePluginIdentity)?.string == plugin.identity)
        let recipients = try AgeKeyFile.recipients(from: plugin.recipient + "\n" + X25519Identity().recipient.string)
        #expect((recipients.first as? AgePluginRecipient)?.name == "siblingstest")
        #expect(recipients.last is X25519Recipient)
    }
}
