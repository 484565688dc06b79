import Foundation
import Processes
import Testing

/// The built `sempere` binary, run as a new user would: two devices (two configuration directories)
/// share one vault folder directly (no sync simulation).
@Suite("sempere, the command-line program")
struct CLITests {
    struct Result {
        let status: Int32
        let out: String
        let err: String
        /// Whether the program was killed by a signal (`status` is then the signal's number).
        var killed = false

        func json() throws -> Any { try JSONSerialization.jsonObject(with: Data(out.utf8)) }
    }

    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("sempere")
            .path
    }

    /// A scratch area: one vault folder and a configuration directory per device.
    struct Scratch {
        let root: URL
        var vault: String { root.appendingPathComponent("vault").path }
        func config(_ device: String) -> String { root.appendingPathComponent("config-\(device)").path }

        init(root: URL = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-cli-\(UUID())")) throws
        {
            self.root = root
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        }

        func remove() { try? FileManager.default.removeItem(at: root) }

        /// Runs `sempere` as `device` (its config in $SEMPERE_CONFIG), with `input` on standard input.
        /// With `wrapper` (a program and its arguments, such as strace), `sempere` runs under it.
        func run(
            _ device: String, _ arguments: [String], input: String? = nil, environment extra: [String: String] = [:],
            wrapper: [String] = []
        ) throws -> Result {
            var environment = ProcessInfo.processInfo.environment
            environment["SEMPERE_CONFIG"] = config(device)
            environment["HOME"] = root.path
            environment.merge(extra) { $1 }
            return try CLITests.run(
                arguments, environment: environment, input: input, directory: root, wrapper: wrapper)
        }
    }

    static func run(
        _ arguments: [String], environment: [String: String]? = nil, input: String? = nil, directory: URL? = nil,
        wrapper: [String] = []
    ) throws -> Result {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            Issue.record("sempere is not built at \(binary): build with `swift build --build-tests` first")
            return Result(status: -1, out: "", err: "")
        }
        let process = ChildProcess()
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = wrapper.dropFirst() + [binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
        }
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = directory }
        let out = Pipe()
        let err = Pipe()
        let inPipe = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = inPipe
        try process.run()
        inPipe.fileHandleForWriting.write(Data((input ?? "").utf8))
        try inPipe.fileHandleForWriting.close()
        // Drain both pipes concurrently so a full one never blocks the program.
        // The second reader gets a thread of its own: a Dispatch worker held for the program's lifetime
        // would be one fewer for the in-process servers of other tests.
        let errBox = DataBox()
        let errRead = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            errBox.data = err.fileHandleForReading.readDataToEndOfFile()
            errRead.signal()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        errRead.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, out: String(decoding: outData, as: UTF8.self),
            err: String(decoding: errBox.data, as: UTF8.self), killed: process.terminationReason == .uncaughtSignal)
    }

    final class DataBox: @unchecked Sendable {
        var data = Data()
    }

    /// Create on A, join from B with six words each way.
    static func twoDevices(_ scratch: Scratch) throws -> (homeID: String, phoneID: String) {
        let made = try twoDevicesWithKit(scratch)
        return (made.homeID, made.phoneID)
    }

    /// ``twoDevices(_:)``, and the recovery kit that create printed.
    static func twoDevicesWithKit(_ scratch: Scratch) throws -> (homeID: String, phoneID: String, kit: String) {
        let created = try scratch.run("A", ["create", scratch.vault, "--name", "Laptop", "--json"])
        #expect(created.status == 0, "\(created.err)")
        let kit = try #require(try created.json() as? [String: Any])
        #expect((kit["recovery_kit"] as? String)?.hasPrefix("SEMPERE-KIT-1") == true)
        let asked = try scratch.run("B", ["join", scratch.vault, "--name", "Phone", "--json"])
        #expect(asked.status == 0, "\(asked.err)")
        let request = try #require(try asked.json() as? [String: Any])
        let words = try #require(request["words"] as? String)
        let approved = try scratch.run("A", ["devices", "approve", "--words", words, "--json"])
        #expect(approved.status == 0, "\(approved.err)")
        let homeWords = try #require((try approved.json() as? [String: Any])?["words"] as? String)
        let joined = try scratch.run("B", ["join", scratch.vault, "--words", homeWords])
        #expect(joined.status == 0, "\(joined.err)")
        #expect(joined.out.contains("Joined the vault"))
        return (
            try #require(kit["device_id"] as? String), try #require(request["device_id"] as? String),
            try #require(kit["recovery_kit"] as? String)
        )
    }

    @Test("create, join with the words, write on A and read on B, list, remove B: B is refused")
    func walkthrough() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let created = try scratch.run("A", ["create", scratch.vault, "--name", "Laptop"])
        #expect(created.status == 0, "\(created.err)")
        #expect(created.out.contains("RECOVERY KIT") && created.out.contains("SEMPERE-KIT-1"))
        #expect(created.out.contains("Print this page"))

        // B asks; A's wrong words are refused; then the right ones.
        let asked = try scratch.run("B", ["join", scratch.vault, "--name", "Phone"])
        #expect(asked.status == 0, "\(asked.err)")
        let wrong = try scratch.run("A", ["devices", "approve", "--words", "person hall golf dabble vein mind"])
        #expect(wrong.status == 1 && wrong.err.contains("no join request here shows the words"))
        #expect(wrong.out.isEmpty)
        let typo = try scratch.run("A", ["devices", "approve", "--words", "person hall golf"])
        #expect(typo.status == 1 && typo.err.contains("sempere: error:"), "\(typo.err)")
        let words = try #require(
            asked.out.split(separator: "\n").first { $0.hasPrefix("    ") && !$0.contains("sempere") })
        let approved = try scratch.run("A", ["devices", "approve", "--words", String(words)])
        #expect(approved.status == 0, "\(approved.err)")
        let homeWords = try #require(
            approved.out.split(separator: "\n").first { $0.hasPrefix("    ") && !$0.contains("sempere") })

        // B types other words: refused, nothing pinned; then home's words.
        let mismatch = try scratch.run("B", ["join", scratch.vault, "--words", "person hall golf dabble vein mind"])
        #expect(mismatch.status == 1 && mismatch.err.contains("the words do not match this vault"))
        let early = try scratch.run("B", ["ls"])
        #expect(early.status == 1 && early.err.contains("in no vault yet"))
        let joined = try scratch.run("B", ["join", scratch.vault, "--words", String(homeWords)])
        #expect(joined.status == 0, "\(joined.err)")

        // Only home manages devices.
        let notHome = try scratch.run("B", ["devices", "rename", "Laptop", "Mine"])
        #expect(notHome.status == 1 && notHome.err.contains("only the home device (Laptop) manages devices"))
        let devices = try #require(try scratch.run("B", ["devices", "list", "--json"]).json() as? [String: Any])
        let listed = try #require(devices["devices"] as? [[String: Any]])
        #expect(listed.map { $0["name"] as? String } == ["Laptop", "Phone"])
        #expect(listed[0]["home"] as? Bool == true && listed[1]["this_device"] as? Bool == true)
        let table = try scratch.run("A", ["devices", "list"])
        #expect(table.out.contains("Manages devices, this device") && table.out.contains("Phone"))

        // A writes (from standard input and from --text); B reads.
        let written = try scratch.run("A", ["new", "Groceries", "--json"], input: "- milk\n- eggs\n")
        #expect(written.status == 0, "\(written.err)")
        let id = try #require((try written.json() as? [String: Any])?["id"] as? String)
        let read = try scratch.run("B", ["cat", String(id.prefix(8))])
        #expect(read.status == 0 && read.out == "# Groceries\n\n- milk\n- eggs\n", "\(read.out) \(read.err)")
        #expect(try scratch.run("A", ["new", "Plans", "--text", "Sail on Sunday"]).status == 0)

        let list = try #require(try scratch.run("B", ["ls", "--json"]).json() as? [String: Any])
        let notes = try #require(list["notes"] as? [[String: Any]])
        #expect(Set(notes.compactMap { $0["title"] as? String }) == ["Groceries", "Plans"])
        #expect(notes.allSatisfy { $0["author_name"] as? String == "Laptop" && $0["mine"] as? Bool == false })
        #expect((list["set_aside"] as? [Any])?.isEmpty == true)

        let found = try scratch.run("B", ["search", "SUNDAY"])
        #expect(found.status == 0 && found.out.contains("Plans") && found.out.contains("Sail on Sunday"))

        // B removes A's note, for both devices (any device deletes any note); B's trash brings it back.
        let theirs = try scratch.run("B", ["rm", id])
        #expect(theirs.status == 0 && theirs.out.contains("trash"), "\(theirs.err)")
        #expect(try scratch.run("A", ["cat", id]).err.contains("no note"))
        #expect(try scratch.run("B", ["trash", "restore", id]).status == 0)
        #expect(try scratch.run("A", ["cat", id]).out == "# Groceries\n\n- milk\n- eggs\n")
        let mine = try scratch.run("B", ["new", "Scratch", "--text", "x"])
        let mineID = mine.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try scratch.run("B", ["rm", mineID]).status == 0)
        #expect(try scratch.run("A", ["cat", mineID]).err.contains("no note"))

        // Home removes B; B no longer reads, even what it could read before.
        let removed = try scratch.run("A", ["devices", "remove", "Phone"])
        #expect(removed.status == 0 && removed.out.contains("Removed Phone"), "\(removed.err)")
        let refused = try scratch.run("B", ["cat", id])
        #expect(refused.status == 1 && refused.err.contains("this device was removed from the vault"), "\(refused.err)")
        #expect(refused.err.contains("export --unsynced"))
        // It may still save what it had not synced: here everything was recorded, so nothing.
        let saved = try scratch.run(
            "B", ["export", "--unsynced", "--json", scratch.root.appendingPathComponent("saved").path])
        #expect(saved.status == 0 && saved.out.filter { !$0.isWhitespace } == "[]", "\(saved.err)")
        #expect(try scratch.run("A", ["cat", id]).status == 0)
        #expect(try scratch.run("A", ["devices", "list"]).out.contains("Phone") == false)
    }

    @Test("a rolled-back vault.json and a forged note are refused, with the library's reasons")
    func tampering() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (_, phoneID) = try Self.twoDevices(scratch)
        let vaultFile = URL(fileURLWithPath: scratch.vault).appendingPathComponent("vault.json")
        let old = try Data(contentsOf: vaultFile)
        #expect(try scratch.run("A", ["devices", "rename", "Phone", "Old phone"]).status == 0)
        #expect(try scratch.run("B", ["devices", "list"]).out.contains("Old phone"))
        try old.write(to: vaultFile)
        // The phone refuses it and changes nothing; it says that home puts its list back.
        let rolledBack = try scratch.run("B", ["ls"])
        #expect(rolledBack.status == 1 && rolledBack.err.contains("older than generation"), "\(rolledBack.err)")
        #expect(rolledBack.err.contains("the home device puts back the list it signed"), "\(rolledBack.err)")

        // Home refuses the old copy too, and never signs on top of it: it puts back the list it follows,
        // says so, and renames on top of that; the phone then follows.
        let restored = try scratch.run("A", ["devices", "rename", "Old phone", "Phone"])
        #expect(restored.status == 0, "\(restored.err)")
        #expect(restored.err.contains("older than generation") && restored.err.contains("put back the device list"))
        #expect(try Data(contentsOf: vaultFile) != old)
        let phoneList = try scratch.run("B", ["devices", "list"])
        #expect(phoneList.status == 0 && phoneList.out.contains("Phone"), "\(phoneList.err)")
        #expect(!phoneList.out.contains("Old phone"))

        // A note the provider forged and a conflict copy are set aside, never shown.
        let strayScratch = try Scratch()
        defer { strayScratch.remove() }
        _ = try Self.twoDevices(strayScratch)
        try Data("not a note".utf8).write(
            to: URL(fileURLWithPath: strayScratch.vault).appendingPathComponent(
                "notes/\(phoneID.prefix(8)) (conflicted copy).age"))
        let notePath = URL(fileURLWithPath: strayScratch.vault).appendingPathComponent(
            "notes/\(String(repeating: "cd", count: 16))")
        try FileManager.default.createDirectory(at: notePath, withIntermediateDirectories: true)
        try Data("age-encryption.org/v1\n".utf8).write(
            to: notePath.appendingPathComponent("\(String(repeating: "ef", count: 16)).age"))
        let listing = try strayScratch.run("B", ["ls"])
        #expect(listing.status == 0 && listing.out.contains("Set aside"), "\(listing.err)")
        let json = try #require(try strayScratch.run("B", ["ls", "--json"]).json() as? [String: Any])
        let setAside = try #require(json["set_aside"] as? [[String: String]])
        #expect(setAside.count == 2)
        #expect(setAside.contains { $0["reason"]?.contains("does not open with any of this vault's keys") == true })
        #expect(setAside.contains { $0["reason"]?.contains("conflict copy") == true })
        let cat = try strayScratch.run("B", ["cat", "efef"])
        #expect(cat.status == 1 && cat.out.isEmpty && cat.err.contains("set aside"))
    }

    @Test("rm keeps a file that is set aside: another device's note the provider put into this folder survives")
    func removeKeepsSetAsideNotes() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (homeID, phoneID) = try Self.twoDevices(scratch)
        let written = try scratch.run("A", ["new", "Taxes", "--text", "keep me", "--json"])
        let id = try #require((try written.json() as? [String: Any])?["id"] as? String)
        // The provider moves the laptop's note into the phone's folder, where `rm` on the phone would reach it:
        // set aside there, and the laptop's note is missing, so nothing is removed.
        let notes = URL(fileURLWithPath: scratch.vault).appendingPathComponent("notes")
        let original = notes.appendingPathComponent("\(homeID)/\(id).age")
        let moved = notes.appendingPathComponent("\(phoneID)/\(id).age")
        try FileManager.default.createDirectory(
            at: moved.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.moveItem(at: original, to: moved)
        let listing = try #require(try scratch.run("B", ["ls", "--json"]).json() as? [String: Any])
        #expect((listing["set_aside"] as? [Any])?.count == 1)
        let removed = try scratch.run("B", ["rm", String(id.prefix(8))])
        #expect(removed.status == 1 && removed.err.contains("pending"), "\(removed.err)")
        #expect(FileManager.default.fileExists(atPath: moved.path))
        // A copy of it there instead, beside the laptop's own: the phone's `rm` deletes the note, which goes from
        // the laptop's folder, and leaves the set-aside copy in its own folder for Repair.
        try FileManager.default.copyItem(at: moved, to: original)
        let deleted = try scratch.run("B", ["rm", String(id.prefix(8))])
        #expect(deleted.status == 0, "\(deleted.err)")
        #expect(FileManager.default.fileExists(atPath: moved.path))
        let after = try #require(try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])
        #expect((after["notes"] as? [Any])?.isEmpty == true)
        #expect(!FileManager.default.fileExists(atPath: original.path))
    }

    @Test("a folder named like a note and a note that cannot be read are set aside; everything else is listed")
    func oneBadEntryBlocksNothing() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (homeID, _) = try Self.twoDevices(scratch)
        #expect(try scratch.run("A", ["new", "Groceries", "--text", "milk"]).status == 0)
        let folder = URL(fileURLWithPath: scratch.vault).appendingPathComponent("notes/\(homeID)")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("\(String(repeating: "ab", count: 16)).age"),
            withIntermediateDirectories: true)
        // A file that cannot be read (a link to nowhere, which even root cannot read).
        try FileManager.default.createSymbolicLink(
            atPath: folder.appendingPathComponent("\(String(repeating: "cd", count: 16)).age").path,
            withDestinationPath: "/nonexistent/sempere-note")
        for device in ["A", "B"] {
            let listing = try scratch.run(device, ["ls", "--json"])
            #expect(listing.status == 0, "\(listing.err)")
            let json = try #require(try listing.json() as? [String: Any])
            #expect((json["notes"] as? [[String: Any]])?.map { $0["title"] as? String } == ["Groceries"])
            let setAside = try #require(json["set_aside"] as? [[String: String]])
            #expect(setAside.count == 2, "\(setAside)")
            #expect(setAside.contains { $0["reason"]?.contains("cannot be read") == true })
            #expect(setAside.contains { $0["path"]?.hasSuffix("abababababababababababababababab.age") == true })
            let found = try scratch.run(device, ["search", "milk"])
            #expect(found.status == 0 && found.out.contains("Groceries"), "\(found.err)")
            // The plain listing names each set-aside path once, then its reason.
            let plain = try scratch.run(device, ["ls"])
            let line = try #require(plain.out.split(separator: "\n").first { $0.contains("cdcdcdcd") })
            #expect(line.components(separatedBy: String(repeating: "cd", count: 16)).count == 2, "\(line)")
        }
    }

    @Test("edit goes through a private temporary file that is gone afterwards")
    func edit() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try Self.twoDevices(scratch)
        let id = try scratch.run("A", ["new", "Todo", "--text", "- call"]).out
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let temporary = scratch.root.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        let log = scratch.root.appendingPathComponent("editor.log").path
        let script = scratch.root.appendingPathComponent("editor.sh")
        try """
        #!/bin/sh
        stat -c '%a' "$1" >> '\(log)'
        stat -c '%a' "$(dirname "$1")" >> '\(log)'
        echo "$1" >> '\(log)'
        echo '- and write' >> "$1"
        """.write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        let edited = try scratch.run(
            "A", ["edit", id], environment: ["EDITOR": script.path, "VISUAL": "", "TMPDIR": temporary.path])
        #expect(edited.status == 0 && edited.out.contains("Saved note"), "\(edited.err)")
        #expect(try scratch.run("B", ["cat", id]).out == "# Todo\n\n- call\n- and write\n")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.prefix(2) == ["600", "700"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty)

        // An editor that fails leaves the note as it was, and still no temporary file.
        let failed = try scratch.run(
            "A", ["edit", id], environment: ["EDITOR": "false", "VISUAL": "", "TMPDIR": temporary.path])
        #expect(failed.status == 1 && failed.err.contains("unchanged"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty)
        // B edits A's note too: its version, signed by B, is the note on both.
        let theirs = try scratch.run("B", ["edit", id], environment: ["EDITOR": script.path, "VISUAL": ""])
        #expect(theirs.status == 0, "\(theirs.err)")
        #expect(try scratch.run("A", ["cat", id]).out == "# Todo\n\n- call\n- and write\n- and write\n")
        let listed = try #require(try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])
        #expect((listed["notes"] as? [[String: Any]])?.first?["author_name"] as? String == "Phone")
    }

    @Test("import, export (plaintext, with a warning), --config and a passphrase copy")
    func importExport() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let config = scratch.config("C")
        let created = try Self.run(
            [
                "create", scratch.vault, "--name", "Desk", "--config", config, "--passphrase-copy", "--secret-env",
                "SEMPERE_PASSPHRASE",
            ],
            environment: ["HOME": scratch.root.path, "SEMPERE_PASSPHRASE": "correct horse battery staple"])
        #expect(created.status == 0, "\(created.err)")
        #expect(FileManager.default.fileExists(atPath: scratch.vault + "/recovery.age"))
        let secret = try #require(created.out.split(separator: "\n").first { $0.contains("SEMPERE-KIT-1") })
            .trimmingCharacters(in: .whitespaces)

        // The kit, printed again from the passphrase copy, with its page; a wrong passphrase is refused.
        let page = scratch.root.appendingPathComponent("kit.html")
        let reprinted = try Self.run(
            ["kit", "print", "--html", page.path, "--config", config, "--secret-env", "SEMPERE_PASSPHRASE"],
            environment: ["HOME": scratch.root.path, "SEMPERE_PASSPHRASE": "correct horse battery staple"])
        #expect(reprinted.status == 0 && reprinted.out.contains(secret), "\(reprinted.err)")
        let html = try String(contentsOf: page, encoding: .utf8)
        #expect(html.contains("<svg") && html.filter { $0 != " " }.contains(secret))
        let wrong = try Self.run(
            ["kit", "print", "--config", config, "--secret-env", "SEMPERE_PASSPHRASE"],
            environment: ["HOME": scratch.root.path, "SEMPERE_PASSPHRASE": "nope"])
        #expect(wrong.status == 1 && wrong.err.contains("wrong passphrase"))
        let again = try Self.run(
            ["create", scratch.vault, "--name", "Desk", "--config", config], environment: ["HOME": scratch.root.path])
        #expect(again.status == 1 && again.err.contains("already holds a vault"))

        let one = scratch.root.appendingPathComponent("one.md")
        let two = scratch.root.appendingPathComponent("two.md")
        try "# One\nfirst\n".write(to: one, atomically: true, encoding: .utf8)
        try "Two\nsecond\n".write(to: two, atomically: true, encoding: .utf8)
        let imported = try Self.run(
            ["import", one.path, two.path, "--config", config, "--json"], environment: ["HOME": scratch.root.path])
        #expect(imported.status == 0, "\(imported.err)")
        #expect((try imported.json() as? [Any])?.count == 2)

        let out = scratch.root.appendingPathComponent("export")
        let exported = try Self.run(
            ["export", out.path, "--config", config], environment: ["HOME": scratch.root.path])
        #expect(exported.status == 0 && exported.err.contains("plaintext"), "\(exported.err)")
        let files = try FileManager.default.contentsOfDirectory(atPath: out.path).sorted()
        #expect(files.count == 2 && files[0].hasPrefix("One-") && files[1].hasPrefix("Two-"))
        #expect(try String(contentsOf: out.appendingPathComponent(files[0]), encoding: .utf8) == "# One\nfirst\n")
        let mode =
            try FileManager.default.attributesOfItem(atPath: out.appendingPathComponent(files[0]).path)[
                .posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("--post-quantum: age1pq vault and device identities, a note written and read back")
    func postQuantum() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let created = try scratch.run("Q", ["create", scratch.vault, "--name", "Quantum", "--post-quantum"])
        #expect(created.status == 0, "\(created.err)")
        let vault = try String(contentsOfFile: scratch.vault + "/vault.json", encoding: .utf8)
        #expect(vault.contains("age1pq1") && vault.contains("\\\"post_quantum\\\":true"))
        let written = try scratch.run("Q", ["new", "Secret", "--text", "post-quantum"])
        let id = written.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(written.status == 0 && !id.isEmpty, "\(written.err)")
        let read = try scratch.run("Q", ["cat", id])
        #expect(read.status == 0 && read.out.contains("post-quantum"), "\(read.err)")
        // The note is one mlkem768x25519 stanza.
        let noteFile = try #require(
            FileManager.default.enumerator(atPath: scratch.vault + "/notes")?.compactMap { $0 as? String }
                .first { $0.hasSuffix(".age") })
        let header = try Data(contentsOf: URL(fileURLWithPath: scratch.vault + "/notes/" + noteFile)).prefix(64)
        #expect(String(decoding: header, as: UTF8.self).contains("-> mlkem768x25519 "))
    }

    @Test("repair lists by category and asks before it restores or deletes; reencrypt shows progress and a new kit")
    func repairAndReencrypt() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (homeID, _, kit) = try Self.twoDevicesWithKit(scratch)
        let made = try scratch.run("A", ["new", "Plan", "--text", "v1"])
        let id = made.out.trimmingCharacters(in: .whitespacesAndNewlines)
        let path = URL(fileURLWithPath: scratch.vault).appendingPathComponent("notes/\(homeID)/\(id).age")
        #expect(try scratch.run("B", ["ls"]).out.contains("Plan"))
        let first = try Data(contentsOf: path)
        #expect(try scratch.run("A", ["rm", id]).status == 0)
        try first.write(to: path)

        // The phone lists the deleted note put back under its category, with the reason.
        let listed = try scratch.run("B", ["repair"])
        #expect(listed.status == 0 && listed.out.contains("Deleted Notes Put Back (1):"), "\(listed.out)")
        #expect(listed.out.contains("its author deleted this note"))
        let json = try #require(try scratch.run("B", ["repair", "list", "--json"]).json() as? [[String: Any]])
        #expect(json.map { $0["category"] as? String }.contains("deleted-note-put-back"))
        // Not from a terminal and without --yes, nothing is done; with --yes, its text becomes the phone's note.
        let refused = try scratch.run("B", ["repair", "restore", id])
        #expect(refused.status == 1 && refused.err.contains("add --yes"), "\(refused.err)")
        let restored = try scratch.run("B", ["repair", "restore", id, "--yes"])
        #expect(restored.status == 0 && restored.out.contains("Restored as note"), "\(restored.err)")
        #expect(restored.out.contains("The set-aside file stays"), "\(restored.out)")
        // The laptop, whose folder it is, deletes it.
        #expect(try scratch.run("A", ["repair"]).out.contains("Nothing is set aside"))
        #expect(!FileManager.default.fileExists(atPath: path.path))

        let reencrypted = try scratch.run(
            "A", ["reencrypt", "--with-current-kit", "--secret-env", "SEMPERE_KIT"], environment: ["SEMPERE_KIT": kit])
        #expect(reencrypted.status == 0, "\(reencrypted.err)")
        #expect(reencrypted.out.contains("NEW RECOVERY KIT") && reencrypted.out.contains("Re-encrypted 1 note under"))
        #expect(reencrypted.err.contains("re-encrypted 1 of 1 notes"), "\(reencrypted.err)")
        #expect(reencrypted.out.contains("old file(s) still open with an old key"), "\(reencrypted.out)")
        #expect(try scratch.run("B", ["ls"]).out.contains("Plan"))
        let after = try #require(try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])
        #expect(after["waiting_for_removal"] as? [String] == [])
        // The old kit no longer takes over.
        let takeover = try scratch.run(
            "B", ["takeover", scratch.vault, "--keep", "Laptop", "--secret-env", "SEMPERE_KIT"],
            environment: ["SEMPERE_KIT": kit])
        #expect(takeover.status == 1, "\(takeover.out)")
    }

    @Test("--help exits 0; usage errors exit 64 and point to --help")
    func usage() throws {
        for arguments in [
            ["--help"], ["create", "--help"], ["join", "--help"], ["devices", "--help"],
            ["devices", "approve", "--help"],
            ["new", "--help"], ["ls", "--help"], ["edit", "--help"], ["import", "--help"], ["--version"],
        ] {
            let result = try Self.run(arguments)
            #expect(result.status == 0 && !result.out.isEmpty && result.err.isEmpty, "\(arguments)")
        }
        #expect(try Self.run(["--help"]).out.contains("SUBCOMMANDS:"))
        for arguments in [
            ["frobnicate"], ["create", "/tmp/x"], ["join", "/tmp/x"],
            ["join", "/tmp/x", "--name", "a", "--words", "b"],
            ["new"], ["devices", "approve", "--words", "a", "--code", "b"], ["import"], ["ls", "--bogus"],
            ["devices", "rename", "a"],
        ] {
            let result = try Self.run(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.err.contains("error: ") && result.err.contains("--help' for usage."), "\(arguments)")
            #expect(result.out.isEmpty)
        }
    }
}
