import Foundation
import Sempere
import Testing

/// The built `sempere` killed with SIGKILL at every write of a handoff, a takeover, a kit replacement and a
/// create: strace stops it at the n-th rename (before the rename happens) or the n-th unlink (which each
/// atomic write makes right after its rename), for n = 1, 2, … until the command runs to its end. After
/// each kill the vault opens on every device, no note is lost, and the next command finishes the change
/// (or it had already taken effect). No hook in the binary: the kill comes from outside, as a power cut.
@Suite("sempere killed at every write (SIGKILL through strace)")
struct CLICrashTests {
    typealias Scratch = CLITests.Scratch
    typealias Result = CLITests.Result

    static let strace = "/usr/bin/strace"
    /// The two kinds of kill point: before each rename, and right after it.
    static let killPoints = ["rename,renameat,renameat2", "unlink,unlinkat"]

    /// A vault with a home (A, "Laptop") and a phone (B), a note from each, and the kit.
    struct Fixture {
        let scratch: Scratch
        let pristine: URL
        let kit: String
        var notes: [String]

        init() throws {
            scratch = try Scratch()
            kit = try CLITests.twoDevicesWithKit(scratch).kit
            var notes: [String] = []
            for (device, title) in [("A", "From the laptop"), ("B", "From the phone")] {
                let made = try scratch.run(device, ["new", title, "--text", "kept"])
                #expect(made.status == 0, "\(made.err)")
                notes.append(made.out.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            self.notes = notes
            pristine = scratch.root.deletingLastPathComponent().appendingPathComponent(
                scratch.root.lastPathComponent + ".pristine")
            try FileManager.default.copyItem(at: scratch.root, to: pristine)
        }

        /// Makes the scratch as it is now the state `restore()` puts back.
        func snapshot() throws {
            try FileManager.default.removeItem(at: pristine)
            try FileManager.default.copyItem(at: scratch.root, to: pristine)
        }

        /// Puts the scratch back as it was before the change (same absolute paths, which the states hold).
        func restore() throws {
            try FileManager.default.removeItem(at: scratch.root)
            try FileManager.default.copyItem(at: pristine, to: scratch.root)
        }

        func remove() {
            scratch.remove()
            try? FileManager.default.removeItem(at: pristine)
        }

        /// `ls` on `device` opens the vault and lists every note of the fixture.
        func expectAllNotes(
            on device: String, _ comment: String, sourceLocation: SourceLocation = #_sourceLocation
        )
            throws
        {
            let listed = try scratch.run(device, ["ls", "--json"])
            #expect(listed.status == 0, "\(comment): ls on \(device): \(listed.err)", sourceLocation: sourceLocation)
            guard listed.status == 0 else { return }
            let ids = ((try listed.json() as? [String: Any])?["notes"] as? [[String: Any]] ?? []).compactMap {
                $0["id"] as? String
            }
            #expect(
                Set(notes).isSubset(of: Set(ids)), "\(comment): \(device) lists \(ids), not all of \(notes)",
                sourceLocation: sourceLocation)
        }

        func vault() throws -> SignedVault {
            try SignedVault(parsing: try Data(contentsOf: URL(fileURLWithPath: scratch.vault + "/vault.json")))
        }
    }

    /// Runs `arguments` on `device`, killed at each point in turn. After each kill: `readers` list every
    /// note; then `finish` (given the killed run) completes the change and checks the end state.
    static func sweep(
        _ fixture: Fixture, device: String, _ arguments: [String], environment: [String: String] = [:],
        input: String? = nil, readers: [String], finish: (_ point: String) throws -> Void
    ) throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: strace),
            "\(strace) is missing: run `bash scripts/setup.sh`, which installs it")
        for syscalls in killPoints {
            var completed = false
            for n in 1...60 {
                try fixture.restore()
                let point = "\(arguments.prefix(2).joined(separator: " ")) killed at \(syscalls.prefix(6)) #\(n)"
                let killed = try fixture.scratch.run(
                    device, arguments, input: input, environment: environment,
                    wrapper: [
                        strace, "-f", "-qq", "-o", "/dev/null", "-e", "inject=\(syscalls):signal=SIGKILL:when=\(n)",
                    ])
                guard killed.killed else {
                    #expect(killed.status == 0, "\(point): ran to the end but failed: \(killed.err)")
                    completed = true
                    break
                }
                #expect(killed.status == SIGKILL, "\(point): \(killed.status) \(killed.err)")
                for reader in readers { try fixture.expectAllNotes(on: reader, "\(point), before finishing") }
                try finish(point)
                for reader in readers { try fixture.expectAllNotes(on: reader, "\(point), after finishing") }
            }
            #expect(completed, "\(arguments) never ran to its end under strace")
        }
    }

    /// Whether `device` is home, as its own `devices list` says.
    static func home(_ fixture: Fixture, as device: String) throws -> String? {
        let list = try fixture.scratch.run(device, ["devices", "list", "--json"])
        #expect(list.status == 0, "\(list.err)")
        let devices = (try list.json() as? [String: Any])?["devices"] as? [[String: Any]] ?? []
        return devices.first { $0["home"] as? Bool == true }?["name"] as? String
    }

    @Test("Make Home: after a kill at any write the handoff has happened or not, and running it again finishes it")
    func makeHome() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        try Self.sweep(fixture, device: "A", ["devices", "make-home", "Phone"], readers: ["A", "B"]) { point in
            if try Self.home(fixture, as: "A") == "Laptop" {
                let again = try fixture.scratch.run("A", ["devices", "make-home", "Phone"])
                #expect(again.status == 0, "\(point): make-home again: \(again.err)")
            }
            #expect(try Self.home(fixture, as: "A") == "Phone", "\(point)")
            #expect(try Self.home(fixture, as: "B") == "Phone", "\(point)")
            let epochs = try fixture.vault().body.epochs.count
            #expect(epochs == 2, "\(point): \(epochs) epochs: the handoff happened once")
        }
    }

    @Test("takeover from a listed device: after a kill, the next command finishes it, or it runs again")
    func takeoverFromAMember() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let kit = ["SEMPERE_KIT": fixture.kit]
        try Self.sweep(
            fixture, device: "B",
            ["takeover", fixture.scratch.vault, "--keep", "Laptop", "--secret-env", "SEMPERE_KIT"], environment: kit,
            readers: ["A", "B"]
        ) { point in
            if try Self.home(fixture, as: "B") != "Phone" {
                let again = try fixture.scratch.run(
                    "B", ["takeover", fixture.scratch.vault, "--keep", "Laptop", "--secret-env", "SEMPERE_KIT"],
                    environment: kit)
                #expect(again.status == 0, "\(point): takeover again: \(again.err)")
            }
            #expect(try Self.home(fixture, as: "A") == "Phone", "\(point)")
            #expect(try fixture.vault().body.takeoverGeneration == 1, "\(point)")
        }
    }

    @Test("takeover from nothing but the kit: after a kill, running it again finishes the same takeover")
    func takeoverFromTheKit() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let arguments = [
            "takeover", fixture.scratch.vault, "--name", "Desk", "--keep", "Phone", "--secret-env", "SEMPERE_KIT",
        ]
        try Self.sweep(
            fixture, device: "C", arguments, environment: ["SEMPERE_KIT": fixture.kit], readers: ["B"]
        ) { point in
            let again = try fixture.scratch.run("C", arguments, environment: ["SEMPERE_KIT": fixture.kit])
            #expect(again.status == 0, "\(point): takeover again: \(again.err)")
            try fixture.expectAllNotes(on: "C", point)
            #expect(try Self.home(fixture, as: "B") == "Desk", "\(point)")
            // Once: a takeover stopped after vault.json was written is finished, not made a second time.
            #expect(try fixture.vault().body.takeoverGeneration == 1, "\(point)")
        }
    }

    /// After a killed `kit replace`: the kit the vault now names (or waits for) is one the person can get,
    /// from `kit print` when the command stopped before showing it, or by running it again.
    static func finishKitReplacement(
        _ fixture: Fixture, point: String, again: [String], environment: [String: String]
    ) throws -> RecoveryKit {
        let vaultID = try fixture.vault().body.vaultID
        let before = try fixture.vault().body
        let opened = try fixture.scratch.run("A", ["ls"])
        let secret: String
        if opened.err.contains("was never shown") {
            let printed = try fixture.scratch.run("A", ["kit", "print"])
            #expect(printed.status == 0, "\(point): kit print: \(printed.err)")
            secret =
                printed.out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                .first { $0.hasPrefix("SEMPERE-KIT-") } ?? ""
            #expect(!(try fixture.scratch.run("A", ["ls"])).err.contains("was never shown"), "\(point)")
        } else {
            #expect(before.kitReplacement == nil && before.kitChanges.isEmpty, "\(point): a kit nobody was shown")
            let replaced = try fixture.scratch.run("A", again + ["--json"], environment: environment)
            #expect(replaced.status == 0, "\(point): kit replace again: \(replaced.err)")
            secret = (try? replaced.json() as? [String: Any])?["recovery_kit"] as? String ?? ""
        }
        return try RecoveryKit(secretString: secret, vaultID: vaultID)
    }

    @Test("kit replace by home alone: after a kill the pending kit is never one nobody has seen")
    func kitReplaceDelayed() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        try Self.sweep(fixture, device: "A", ["kit", "replace"], readers: ["A", "B"]) { point in
            let kit = try Self.finishKitReplacement(fixture, point: point, again: ["kit", "replace"], environment: [:])
            let pending = try #require(try fixture.vault().body.kitReplacement, "\(point)")
            #expect(try kit.signingKey().publicKey.rawRepresentation == pending.recovery.signingKey, "\(point)")
            #expect(try fixture.scratch.run("B", ["ls"]).err.contains("BEING REPLACED"), "\(point)")
        }
    }

    @Test("kit replace with the current kit: after a kill the vault's kit is one the person gets")
    func kitReplaceCoSigned() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let arguments = ["kit", "replace", "--with-current-kit", "--secret-env", "SEMPERE_KIT"]
        let environment = ["SEMPERE_KIT": fixture.kit]
        try Self.sweep(fixture, device: "A", arguments, environment: environment, readers: ["A", "B"]) { point in
            let kit = try Self.finishKitReplacement(fixture, point: point, again: arguments, environment: environment)
            let body = try fixture.vault().body
            #expect(try kit.signingKey().publicKey.rawRepresentation == body.recovery.signingKey, "\(point)")
            #expect(body.kitChanges.count == 1, "\(point): replaced once")
        }
    }

    @Test("create: after a kill, running it again finishes the same vault and shows its kit")
    func create() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let pristine = scratch.root.appendingPathExtension("pristine")
        try FileManager.default.copyItem(at: scratch.root, to: pristine)
        defer { try? FileManager.default.removeItem(at: pristine) }
        let arguments = ["create", scratch.vault, "--name", "Desk", "--json"]
        for syscalls in Self.killPoints {
            var completed = false
            for n in 1...60 {
                try FileManager.default.removeItem(at: scratch.root)
                try FileManager.default.copyItem(at: pristine, to: scratch.root)
                let point = "create killed at \(syscalls.prefix(6)) #\(n)"
                let killed = try scratch.run(
                    "D", arguments,
                    wrapper: [
                        Self.strace, "-f", "-qq", "-o", "/dev/null", "-e",
                        "inject=\(syscalls):signal=SIGKILL:when=\(n)",
                    ])
                guard killed.killed else {
                    completed = killed.status == 0
                    break
                }
                let again = try scratch.run("D", arguments)
                #expect(again.status == 0, "\(point): create again: \(again.err)")
                guard again.status == 0 else { continue }
                let secret = try #require((try again.json() as? [String: Any])?["recovery_kit"] as? String)
                let body = try SignedVault(
                    parsing: try Data(contentsOf: URL(fileURLWithPath: scratch.vault + "/vault.json"))
                ).body
                let kit = try RecoveryKit(secretString: secret, vaultID: body.vaultID)
                #expect(try kit.signingKey().publicKey.rawRepresentation == body.recovery.signingKey, "\(point)")
                let listed = try scratch.run("D", ["ls"])
                #expect(listed.status == 0 && !listed.err.contains("never shown"), "\(point): \(listed.err)")
            }
            #expect(completed, "create never ran to its end under strace")
        }
    }

    @Test("reencrypt with the current kit: after a kill at any write every note opens, and running it again ends it")
    func reencrypt() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let arguments = ["reencrypt", "--with-current-kit", "--secret-env", "SEMPERE_KIT"]
        let environment = ["SEMPERE_KIT": fixture.kit]
        try Self.sweep(fixture, device: "A", arguments, environment: environment, readers: ["A", "B"]) { point in
            let body = try fixture.vault().body
            if body.currentEpoch.reason != "reencrypt" {
                // Stopped before the new epoch was written: nothing happened, so it runs again from the start.
                let again = try fixture.scratch.run("A", arguments + ["--json"], environment: environment)
                #expect(again.status == 0, "\(point): again: \(again.err)")
            } else {
                // The new kit is in effect: if the command stopped before showing it, `kit print` does.
                if try fixture.scratch.run("A", ["ls"]).err.contains("was never shown") {
                    let printed = try fixture.scratch.run("A", ["kit", "print"])
                    #expect(printed.status == 0 && printed.out.contains("SEMPERE-KIT-1"), "\(point): \(printed.err)")
                }
                if !body.reencryptions.contains(where: { $0.epoch == body.currentEpoch.number }) {
                    // The re-encryption had started: running it again (no kit now) goes on with it.
                    let resumed = try fixture.scratch.run("A", ["reencrypt", "--json"])
                    #expect(resumed.status == 0, "\(point): resumed: \(resumed.err)")
                    let out = try? resumed.json() as? [String: Any]
                    #expect(out?["recovery_kit"] == nil && out?["reencrypted"] as? Int == 2, "\(point): \(resumed.out)")
                }
            }
            // The phone's next command removes its old file; then no note is under an old key any more.
            #expect(try fixture.scratch.run("B", ["ls"]).status == 0, "\(point)")
            let after = try fixture.vault().body
            #expect(after.reencryptions.count == 1 && after.kitChanges.count == 1, "\(point): once, one kit")
            let listed = try fixture.scratch.run("A", ["ls", "--json"])
            let waiting = (try? listed.json() as? [String: Any])?["waiting_for_removal"] as? [String]
            #expect(waiting == [], "\(point): \(listed.out)")
            #expect(try VaultFolder(url: URL(fileURLWithPath: fixture.scratch.vault)).notePaths().isEmpty, "\(point)")
            #expect(!(try fixture.scratch.run("A", ["ls"])).err.contains("never shown"), "\(point)")
        }
    }

    @Test("a late file: after a kill at any write of its re-encryption the note opens, and the next command ends it")
    func lateFile() throws {
        var fixture = try Fixture()
        defer { fixture.remove() }
        // The phone, offline, writes while home replaces the kit (a new epoch): its note is under epoch 1's key.
        let phoneConfig = URL(fileURLWithPath: fixture.scratch.config("B"))
        let stale = try VaultSession(configRoot: phoneConfig, folder: fixture.scratch.vault)
        let replaced = try fixture.scratch.run(
            "A", ["kit", "replace", "--with-current-kit", "--secret-env", "SEMPERE_KIT"],
            environment: ["SEMPERE_KIT": fixture.kit])
        #expect(replaced.status == 0, "\(replaced.err)")
        let late = try stale.newNote(markdown: "# Written offline\n")
        fixture.notes.append(VaultSession.noteID(late))
        try fixture.snapshot()
        let homeConfig = URL(fileURLWithPath: fixture.scratch.config("A"))
        try Self.sweep(fixture, device: "B", ["ls"], readers: ["A", "B"]) { point in
            #expect(try fixture.scratch.run("B", ["ls"]).status == 0, "\(point)")
            let home = try VaultSession(configRoot: homeConfig, folder: fixture.scratch.vault)
            let note = try #require(try home.list().notes.first { $0.path == late }, "\(point)")
            #expect(
                note.keyEpoch == home.body.currentEpoch.number && note.markdown == "# Written offline\n", "\(point)")
        }
    }
}
