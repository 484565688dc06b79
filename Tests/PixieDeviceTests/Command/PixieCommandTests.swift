import Foundation
import PixieDevice
import PixieWire
import Processes
import SiblingsCrypto
import SiblingsTestSupport
import Synchronization
import Testing
import Transparency
import WebSockets

/// A `pixie` process (the binary beside the test bundle), its output collected as it comes and its input open.
final class PixieProcess: Sendable {
    static var binary: URL { RunningServer.binary.deletingLastPathComponent().appendingPathComponent("pixie") }

    private let process: ChildProcess
    private let input: Pipe
    private let output = Mutex(Data())
    /// Set once the output pipe reached its end: everything the process printed is in `output`.
    private let drained = Atomic(false)

    init(_ arguments: [String], in directory: URL) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw Failure(description: "pixie is not built at \(Self.binary.path): swift build --build-tests")
        }
        process = ChildProcess()
        process.executableURL = Self.binary
        process.arguments = arguments
        process.currentDirectoryURL = directory
        input = Pipe()
        let out = Pipe()
        process.standardInput = input
        process.standardOutput = out
        process.standardError = out
        try process.run()
        Thread.detachNewThread { [self] in
            while case let chunk = out.fileHandleForReading.availableData, !chunk.isEmpty {
                output.withLock { $0.append(chunk) }
            }
            drained.store(true, ordering: .releasing)
        }
    }

    var text: String { output.withLock { String(decoding: $0, as: UTF8.self) } }

    /// The JSON lines printed so far.
    var events: [[String: Any]] {
        text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits (up to 60 s: the suite shares two cores) for the `occurrence`th JSON line whose "event" is `name`.
    func event(_ name: String, occurrence: Int = 1) async throws -> [String: Any] {
        func found() -> [String: Any]? {
            let matches = events.filter { $0["event"] as? String == name }
            return matches.count >= occurrence ? matches[occurrence - 1] : nil
        }
        for _ in 0..<6000 {
            if let found = found() { return found }
            if !process.isRunning, found() == nil {
                throw Failure(description: "pixie ended without \(name): \(text)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw Failure(description: "pixie never printed \(name): \(text)")
    }

    func type(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    /// Waits for the process to end and for all it printed to be read; its status.
    func exit() async -> Int32 {
        while process.isRunning || !drained.load(ordering: .acquiring) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        // A suspended process takes its SIGTERM once it goes on.
        process.resume()
    }

    /// Ctrl-C.
    func interrupt() { process.interrupt() }

    /// Stops it where it is (SIGSTOP), as a phone whose app the system suspended; ``resume()`` lets it go on.
    func suspend() { process.suspend() }
    func resume() { process.resume() }
}

/// The `pixie` command acting out the authorization half with a real pixie-server: one home per device.
@Suite("pixie, one device per --home, against the real pixie-server", .serialized)
struct PixieCommandTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-cli-\(UUID())")
    let number = "+14155550177"

    func setUp() async throws -> RunningServer {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let bundle = try AgainstTheServerTests.run([
            "trust-bundle", "--data-dir", directory.appendingPathComponent("data").path,
        ])
        try Data(bundle.utf8).write(to: directory.appendingPathComponent("bundle.json"))
        return try await RunningServer(dataDirectory: directory.appendingPathComponent("data"))
    }

    func setup(_ server: RunningServer, home: String, name: String) -> [String] {
        [
            "--home", home, "--server", server.base.absoluteString, "--trust-bundle", "bundle.json", "--phone", number,
            "--name", name, "--sms-outbox", "data/sms-outbox.jsonl", "--json",
        ]
    }

    /// `pixie init` of the account's first device, "phone".
    func createAccount(_ server: RunningServer) async throws {
        let created = try PixieProcess(["init"] + setup(server, home: "phone", name: "phone"), in: directory)
        #expect(await created.exit() == 0, "\(created.text)")
    }

    /// How many devices `pixie devices` lists for `home`, checked against the log.
    func deviceCount(home: String) async throws -> Int? {
        let devices = try PixieProcess(["devices", "--home", home, "--json"], in: directory)
        #expect(await devices.exit() == 0, "\(devices.text)")
        return (try JSONSerialization.jsonObject(with: Data(devices.text.utf8)) as? [Any])?.count
    }

    @Test("init, listen, signin with the check code (a wrong one first), devices, signout")
    func approved() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let created = try PixieProcess(["init"] + setup(server, home: "phone", name: "phone"), in: directory)
        #expect(await created.exit() == 0, "\(created.text)")
        // The home is private: a 0700 directory and a 0600 file.
        let attributes = try FileManager.default.attributesOfItem(
            atPath: directory.appendingPathComponent("phone").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        let file = try FileManager.default.attributesOfItem(
            atPath: directory.appendingPathComponent("phone/device.json").path)
        #expect((file[.posixPermissions] as? Int) == 0o600)

        // The account's only device holds the only copy of its seed: signing it out is refused.
        let alone = try PixieProcess(["signout", "--home", "phone"], in: directory)
        #expect(await alone.exit() == 1)
        #expect(alone.text.contains("only device"), "\(alone.text)")

        let listener = try PixieProcess(["listen", "--home", "phone", "--once", "--json"], in: directory)
        defer { listener.stop() }
        _ = try await listener.event("listening")
        let laptop = try PixieProcess(
            ["signin"] + setup(server, home: "laptop", name: "laptop") + ["--wait", "60", "--no-sync"], in: directory)
        defer { laptop.stop() }
        let code = try #require(try await laptop.event("waiting")["check_code"] as? String)
        #expect(try await laptop.event("acknowledged")["device_family"] as? String == "Linux")
        #expect(try await listener.event("prompt")["device_model"] as? String == "laptop")
        listener.type(String(code.reversed()) == code ? "00000000" : String(code.reversed()))
        _ = try await listener.event("wrong_check_code")
        listener.type(code.prefix(4) + " " + code.dropFirst(4))
        _ = try await listener.event("approved")
        let joined = try await laptop.event("joined")
        #expect(await laptop.exit() == 0, "\(laptop.text)")
        let status = await listener.exit()
        #expect(status == 0, "pixie listen exited with \(status): \(listener.text)")

        let devices = try PixieProcess(["devices", "--home", "laptop", "--json"], in: directory)
        #expect(await devices.exit() == 0, "\(devices.text)")
        let list = try #require(
            try JSONSerialization.jsonObject(with: Data(devices.text.utf8)) as? [[String: Any]])
        #expect(list.count == 2)
        #expect(
            list.contains {
                $0["device_id"] as? String == joined["device_id"] as? String && $0["this_device"] as? Bool == true
            })
        // Each with the name and family it enrolled with, when it was added and by whom, and when it was last seen.
        #expect(Set(list.compactMap { $0["name"] as? String }) == ["phone", "laptop"])
        #expect(list.allSatisfy { $0["family"] as? String == "Linux" })
        let phoneRow = try #require(list.first { $0["name"] as? String == "phone" })
        let laptopRow = try #require(list.first { $0["name"] as? String == "laptop" })
        #expect(phoneRow["added_by"] is NSNull, "the account's first device was added by none")
        #expect(laptopRow["added_by"] as? String == phoneRow["device_id"] as? String)
        #expect(list.allSatisfy { ($0["added_at"] as? Int64 ?? 0) > 1_700_000_000 })
        #expect(list.allSatisfy { ($0["last_seen_at"] as? Int64 ?? 0) > 1_700_000_000 })
        let plain = try PixieProcess(["devices", "--home", "laptop"], in: directory)
        #expect(await plain.exit() == 0, "\(plain.text)")
        #expect(plain.text.contains(" by phone; last seen "), "\(plain.text)")

        // The store, standing in for the app: rows written, changed, deleted and listed.
        let added = try PixieProcess(
            ["store", "add", "notebook_notes", "title=Groceries", "body=milk", "--home", "laptop", "--json"],
            in: directory)
        #expect(await added.exit() == 0, "\(added.text)")
        let note = try #require(try JSONSerialization.jsonObject(with: Data(added.text.utf8)) as? [String: Any])
        let id = try #require(note["id"] as? String)
        let changed = try PixieProcess(
            ["store", "add", "notebook-notes", "--id", id, "title=Groceries", "body=milk, eggs", "--home", "laptop"],
            in: directory)
        #expect(await changed.exit() == 0, "\(changed.text)")
        #expect(changed.text.contains("version 20"), "a version is an HLC reading: \(changed.text)")
        let wrong = try PixieProcess(["store", "add", "plans", "colour=red", "--home", "laptop"], in: directory)
        #expect(await wrong.exit() == 64)
        #expect(wrong.text.contains("no field colour"), "\(wrong.text)")
        let listed = try PixieProcess(["store", "list", "notebook_notes", "--home", "laptop", "--json"], in: directory)
        #expect(await listed.exit() == 0, "\(listed.text)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.text.utf8)) as? [[String: Any]])
        let before = try #require(note["hlc"] as? UInt64)
        #expect(rows.count == 1 && rows.first?["body"] as? String == "milk, eggs")
        #expect(try #require(rows.first?["hlc"] as? UInt64) > before)
        #expect(rows.first?["author"] as? String == note["author"] as? String)
        #expect(
            await (try PixieProcess(["store", "rm", "notebook_notes", id, "--home", "laptop"], in: directory)).exit()
                == 0)
        let gone = try PixieProcess(
            ["store", "list", "notebook_notes", "--deleted", "--home", "laptop"], in: directory)
        #expect(await gone.exit() == 0)
        #expect(gone.text.contains(id) && gone.text.contains("(deleted)"), "\(gone.text)")

        // The phone removes the laptop: the account's keys rotate, and the laptop is told why it can do nothing.
        let unknown = try PixieProcess(["devices", "remove", "tablet", "--home", "phone"], in: directory)
        #expect(await unknown.exit() == 1)
        #expect(unknown.text.contains("no device of this account is named \"tablet\""), "\(unknown.text)")
        let removed = try PixieProcess(["devices", "remove", "laptop", "--home", "phone"], in: directory)
        #expect(await removed.exit() == 0, "\(removed.text)")
        #expect(removed.text.contains("Removed \"laptop\"") && removed.text.contains("epoch 2"), "\(removed.text)")
        let told = try PixieProcess(["devices", "--home", "laptop"], in: directory)
        #expect(await told.exit() == 1)
        #expect(
            told.text.contains("this device was removed from the account by the device \"phone\" on ")
                && told.text.contains("pixie backup export"), "\(told.text)")
        // What it holds stays readable to it: the export the message offers works without the server.
        let saved = try PixieProcess(["backup", "export", "kept.pixie-archive", "--home", "laptop"], in: directory)
        #expect(await saved.exit() == 0, "\(saved.text)")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("kept.pixie-archive").path))
        let left = try PixieProcess(["devices", "--home", "phone", "--json"], in: directory)
        #expect(await left.exit() == 0, "\(left.text)")
        #expect((try JSONSerialization.jsonObject(with: Data(left.text.utf8)) as? [[String: Any]])?.count == 1)

        let out = try PixieProcess(["signout", "--home", "laptop"], in: directory)
        #expect(await out.exit() == 0, "\(out.text)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("laptop/store.sqlite").path))
        let after = try PixieProcess(["devices", "--home", "laptop"], in: directory)
        #expect(await after.exit() == 1)
        #expect(after.text.contains("no device is set up"), "\(after.text)")
    }

    @Test("once one sibling answers, the other's prompt is dismissed; a sign-in cancelled with Ctrl-C dismisses both")
    func dismissals() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        let phone = try PixieProcess(["listen", "--home", "phone", "--json"], in: directory)
        defer { phone.stop() }
        _ = try await phone.event("listening")
        // A second sibling, approved by the first.
        let tabletJoining = try PixieProcess(
            ["signin", "--no-sync"] + setup(server, home: "tablet", name: "tablet"), in: directory)
        defer { tabletJoining.stop() }
        let tabletCode = try #require(try await tabletJoining.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt")
        phone.type(tabletCode)
        #expect(await tabletJoining.exit() == 0, "\(tabletJoining.text)")
        let tablet = try PixieProcess(["listen", "--home", "tablet", "--json"], in: directory)
        defer { tablet.stop() }
        _ = try await tablet.event("listening")

        // Both siblings ask; the tablet's person answers, and the phone's prompt goes away.
        let laptop = try PixieProcess(
            ["signin", "--no-sync"] + setup(server, home: "laptop", name: "laptop"), in: directory)
        defer { laptop.stop() }
        let laptopCode = try #require(try await laptop.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt", occurrence: 2)
        _ = try await tablet.event("prompt")
        tablet.type(laptopCode)
        _ = try await tablet.event("approved")
        #expect(await laptop.exit() == 0, "\(laptop.text)")
        let dismissed = try await phone.event("dismissed")
        #expect((dismissed["detail"] as? String)?.contains("approved on another device") == true, "\(phone.text)")

        // A new device gives up (Ctrl-C): both prompts go away, and it says it did not join.
        let desk = try PixieProcess(["signin", "--no-sync"] + setup(server, home: "desk", name: "desk"), in: directory)
        defer { desk.stop() }
        _ = try await desk.event("acknowledged")
        _ = try await phone.event("prompt", occurrence: 3)
        _ = try await tablet.event("prompt", occurrence: 2)
        desk.interrupt()
        #expect(await desk.exit() == 1)
        #expect(desk.text.contains("cancelled"), "\(desk.text)")
        for sibling in [phone, tablet] {
            let event = try await sibling.event("dismissed", occurrence: sibling === phone ? 2 : 1)
            #expect((event["detail"] as? String)?.contains("cancelled on the new device") == true, "\(sibling.text)")
        }
        // The line typed next goes to no prompt that is gone: a later request is answered with it.
        let again = try PixieProcess(
            ["signin", "--no-sync"] + setup(server, home: "desk", name: "desk"), in: directory)
        defer { again.stop() }
        let deskCode = try #require(try await again.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt", occurrence: 4)
        phone.type(deskCode)
        #expect(await again.exit() == 0, "\(again.text)")
        #expect(try await deviceCount(home: "desk") == 4)
    }

    @Test("sync absorbs the listening phone's store, secrets too; backup moves it as an archive once the key is here")
    func syncAndBackup() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        for row in [
            ["notebook_notes", "--id", "n1", "title=Groceries", "body=milk"],
            ["provider_api_keys", "--id", "k1", "provider=openai", "api_key=sk-secret"],
        ] {
            let added = try PixieProcess(["store", "add"] + row + ["--home", "phone"], in: directory)
            #expect(await added.exit() == 0, "\(added.text)")
        }
        let phone = try PixieProcess(["listen", "--home", "phone", "--json"], in: directory)
        defer { phone.stop() }
        _ = try await phone.event("listening")
        let joining = try PixieProcess(["signin"] + setup(server, home: "laptop", name: "laptop"), in: directory)
        defer { joining.stop() }
        let code = try #require(try await joining.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt")
        phone.type(code)
        // Signing in goes on to absorb the store: one command, as the seed's one spinner.
        #expect(await joining.exit() == 0, "\(joining.text)")
        _ = try await joining.event("joined")
        let absorbed = try await joining.event("absorbed")
        #expect(absorbed["rows"] as? Int == 2 && absorbed["inserted"] as? Int == 2, "\(joining.text)")
        #expect(joining.events.contains { $0["event"] as? String == "downloading" })
        _ = try await phone.event("sync_absorbed")
        // With a store here, `pixie sync` runs a reconcile round: the phone's store is here already.
        let sync = try PixieProcess(["sync", "--home", "laptop", "--json"], in: directory)
        #expect(await sync.exit() == 0, "\(sync.text)")
        let reconciled = try await sync.event("reconciled")
        #expect(reconciled["siblings"] as? Int == 1 && reconciled["rows_in"] as? Int == 0, "\(sync.text)")
        let status = try PixieProcess(["sync", "status", "--home", "laptop", "--json"], in: directory)
        #expect(await status.exit() == 0, "\(status.text)")
        #expect(status.text.contains("\"state\":\"absorbed\""), "\(status.text)")
        let keys = try PixieProcess(
            ["store", "list", "provider_api_keys", "--home", "laptop", "--json"], in: directory)
        #expect(await keys.exit() == 0)
        #expect(keys.text.contains("sk-secret"), "\(keys.text)")
        // Asking again changes nothing.
        let retry = try PixieProcess(["sync", "retry", "--home", "laptop", "--json"], in: directory)
        #expect(await retry.exit() == 0, "\(retry.text)")
        #expect(try await retry.event("absorbed")["inserted"] as? Int == 0)

        // The archive: the tablet-to-be is the laptop with its rows gone; it needs the phone's BackupKey.
        let exported = try PixieProcess(["backup", "export", "store.pixie-archive", "--home", "phone"], in: directory)
        #expect(await exported.exit() == 0, "\(exported.text)")
        let again = try PixieProcess(["backup", "export", "store.pixie-archive", "--home", "phone"], in: directory)
        #expect(await again.exit() == 1)
        #expect(again.text.contains("exists already"), "\(again.text)")
        #expect(
            await (try PixieProcess(["store", "rm", "notebook_notes", "n1", "--home", "laptop"], in: directory)).exit()
                == 0)
        let locked = try PixieProcess(["backup", "import", "store.pixie-archive", "--home", "laptop"], in: directory)
        #expect(await locked.exit() == 1)
        #expect(locked.text.contains("pixie backup-key import"), "\(locked.text)")
        let key = try PixieProcess(["backup-key", "export", "phone.key", "--home", "phone"], in: directory)
        #expect(await key.exit() == 0, "\(key.text)")
        let brought = try PixieProcess(["backup-key", "import", "phone.key", "--home", "laptop"], in: directory)
        #expect(await brought.exit() == 0, "\(brought.text)")
        let imported = try PixieProcess(["backup", "import", "store.pixie-archive", "--home", "laptop"], in: directory)
        #expect(await imported.exit() == 0, "\(imported.text)")
        // Insert-if-absent: the laptop's tombstone of n1 stays; the archive never held the API key.
        #expect(imported.text.contains("1 rows, 0 new"), "\(imported.text)")
    }

    @Test(
        "pixie-server's own TLS: init, listen over wss, signin and absorption over https; a renewal under the open relay"
    )
    func overTheServersOwnTLS() async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificates = try TestCertificates()
        let chain = directory.appendingPathComponent("fullchain.pem")
        let key = directory.appendingPathComponent("privkey.pem")
        func install(_ stem: String) throws {
            try Data(contentsOf: URL(fileURLWithPath: certificates.path("\(stem).pem"))).write(to: chain)
            try Data(contentsOf: URL(fileURLWithPath: certificates.path("\(stem).key"))).write(to: key)
        }
        try install("server")
        let bundle = try AgainstTheServerTests.run([
            "trust-bundle", "--data-dir", directory.appendingPathComponent("data").path,
        ])
        try Data(bundle.utf8).write(to: directory.appendingPathComponent("bundle.json"))
        let server = try await RunningServer(
            dataDirectory: directory.appendingPathComponent("data"), tls: (chain.path, key.path))
        defer { server.stop() }
        #expect(server.base.absoluteString.hasPrefix("https://localhost:"))
        let ca = ["--ca-file", certificates.path("ca.pem")]

        // A device that trusts only the system's CAs is refused, saying what to do.
        let untrusted = try PixieProcess(["init"] + setup(server, home: "stranger", name: "stranger"), in: directory)
        #expect(await untrusted.exit() != 0)
        #expect(untrusted.text.contains("not signed by a CA this device trusts"), "\(untrusted.text)")
        #expect(untrusted.text.contains("--ca-file"), "\(untrusted.text)")

        let created = try PixieProcess(["init"] + setup(server, home: "phone", name: "phone") + ca, in: directory)
        #expect(await created.exit() == 0, "\(created.text)")
        let added = try PixieProcess(
            ["store", "add", "notebook_notes", "title=Renewal", "body=certbot", "--home", "phone"], in: directory)
        #expect(await added.exit() == 0, "\(added.text)")
        let phone = try PixieProcess(["listen", "--home", "phone", "--json"], in: directory)
        defer { phone.stop() }
        _ = try await phone.event("listening")

        // The certificate is renewed in place (same CA, new key) and the server told: the key a client pins to the
        // old certificate stops matching once the new one is served, which is how the test knows the reload happened.
        let pinnedToOld = try TLSContext(
            .client(trust: .caFile(certificates.path("ca.pem")), pinnedKeys: [certificates.serverPin]))
        _ = try ClientConnection(host: "localhost", port: UInt16(server.port), tls: pinnedToOld, timeout: .seconds(30))
        try install("renewed")
        server.hangUp()
        var renewed = false
        for _ in 0..<500 where !renewed {
            do {
                _ = try ClientConnection(
                    host: "localhost", port: UInt16(server.port), tls: pinnedToOld, timeout: .seconds(30))
                try await Task.sleep(for: .milliseconds(20))
            } catch let error as TLSError where error.kind == .pinMismatch {
                renewed = true
            }
        }
        #expect(renewed, "the server still shows the old certificate after SIGHUP")

        // The phone's relay connection was made before the renewal and is still the one it listens on.
        let laptop = try PixieProcess(["signin"] + setup(server, home: "laptop", name: "laptop") + ca, in: directory)
        defer { laptop.stop() }
        let code = try #require(try await laptop.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt")
        phone.type(code)
        #expect(await laptop.exit() == 0, "\(laptop.text)")
        let absorbed = try await laptop.event("absorbed")
        #expect(absorbed["rows"] as? Int == 1, "\(laptop.text)")
        #expect(!phone.events.contains { $0["event"] as? String == "reconnecting" }, "\(phone.text)")
        let listed = try PixieProcess(["store", "list", "notebook_notes", "--home", "laptop", "--json"], in: directory)
        #expect(await listed.exit() == 0)
        #expect(listed.text.contains("certbot"), "\(listed.text)")

        // The auditor reads the same log over the server's own TLS, trusting the private CA; without it, refused.
        let audit = [
            "audit", "--url", server.base.absoluteString, "--trust-bundle",
            directory.appendingPathComponent("bundle.json").path,
        ]
        let audited = try AgainstTheServerTests.run(audit + ["--ca-file", certificates.path("ca.pem")])
        #expect(audited.contains("the log is consistent"), "\(audited)")
        #expect(throws: (any Error).self) { _ = try AgainstTheServerTests.run(audit) }
    }

    @Test("plain http:// to another machine is refused before anything is sent, and says how to go on")
    func plainHTTPElsewhere() async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for server in ["http://192.0.2.10:8080", "http://pixie.example", "http://[2001:db8::1]:8080"] {
            let refused = try PixieProcess(
                [
                    "init", "--home", "phone", "--server", server, "--trust-bundle", "bundle.json", "--phone", number,
                    "--name", "phone",
                ], in: directory)
            #expect(await refused.exit() != 0)
            #expect(
                refused.text.contains("--insecure-plain-http") && refused.text.contains("https://"), "\(refused.text)")
        }
        // A private CA is for an https:// server; a file that holds none is refused before anything is sent.
        let caForHTTP = try PixieProcess(
            [
                "init", "--home", "phone", "--server", "http://127.0.0.1:1", "--ca-file", "ca.pem", "--trust-bundle",
                "bundle.json", "--phone", number, "--name", "phone",
            ], in: directory)
        #expect(await caForHTTP.exit() != 0)
        #expect(caForHTTP.text.contains("--ca-file is for an https:// server"), "\(caForHTTP.text)")
        // Loopback is this machine: no refusal for the scheme (the missing trust bundle is what stops it here).
        for server in ["http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1"] {
            let local = try PixieProcess(
                [
                    "init", "--home", "phone", "--server", server, "--trust-bundle", "bundle.json", "--phone", number,
                    "--name", "phone",
                ], in: directory)
            #expect(await local.exit() != 0)
            #expect(
                !local.text.contains("--insecure-plain-http") && local.text.contains("bundle.json"), "\(local.text)")
        }
    }

    @Test("two devices stay in step: writes on either side reach the other, and pixie sync cooperates with listen")
    func staysInStep() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        func store(_ arguments: [String]) async throws -> String {
            let process = try PixieProcess(["store"] + arguments, in: directory)
            #expect(await process.exit() == 0, "\(process.text)")
            return process.text
        }
        _ = try await store(["add", "notebook_notes", "--id", "n1", "title=Groceries", "body=milk", "--home", "phone"])
        let phone = try PixieProcess(["listen", "--home", "phone", "--json"], in: directory)
        defer { phone.stop() }
        _ = try await phone.event("listening")
        let joining = try PixieProcess(
            ["signin", "--no-sync"] + setup(server, home: "laptop", name: "laptop"), in: directory)
        defer { joining.stop() }
        let code = try #require(try await joining.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt")
        phone.type(code)
        #expect(await joining.exit() == 0, "\(joining.text)")
        // A laptop that joined without the store: `pixie sync` absorbs it whole.
        let first = try PixieProcess(["sync", "--home", "laptop", "--json"], in: directory)
        #expect(await first.exit() == 0, "\(first.text)")
        #expect(try await first.event("absorbed")["inserted"] as? Int == 1)
        // The absorption's worker runs a round of its own once the store is in; it ends before the laptop writes, so
        // that the write goes with the round below and not with that one.
        let events = directory.appendingPathComponent("laptop/sync/events.jsonl")
        for _ in 0..<600 {
            let text = (try? String(contentsOf: events, encoding: .utf8)) ?? ""
            if text.contains("\"event\":\"reconciled\"") || text.contains("\"event\":\"round_failed\"") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        // A write on the laptop goes to the phone with the next round.
        _ = try await store(["add", "plans", "--id", "p1", "title=Trip", "body=pack", "--home", "laptop"])
        let round = try PixieProcess(["sync", "--home", "laptop", "--json"], in: directory)
        #expect(await round.exit() == 0, "\(round.text)")
        #expect(try await round.event("reconciled")["rows_out"] as? Int == 1, "\(round.text)")
        #expect(try await store(["list", "plans", "--home", "phone", "--json"]).contains("pack"))
        // The laptop listens too; edits and a deletion on the phone reach it, pushed by the phone's listener.
        let laptop = try PixieProcess(["listen", "--home", "laptop", "--json"], in: directory)
        defer { laptop.stop() }
        _ = try await laptop.event("listening")
        _ = try await store([
            "add", "notebook_notes", "--id", "n1", "title=Groceries", "body=milk, eggs", "--home", "phone",
        ])
        _ = try await store(["rm", "plans", "p1", "--home", "phone"])
        var laptopNotes = ""
        for _ in 0..<1000 {
            laptopNotes = try await store(["list", "notebook_notes", "--home", "laptop", "--json"])
            let plans = try await store(["list", "plans", "--home", "laptop", "--json"])
            if laptopNotes.contains("milk, eggs"), !plans.contains("pack") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(laptopNotes.contains("milk, eggs"), "\(laptopNotes)")
        // `pixie sync` beside the laptop's `pixie listen`: its round is its own, and the listener leaves it alone.
        let beside = try PixieProcess(["sync", "--home", "laptop", "--json"], in: directory)
        #expect(await beside.exit() == 0, "\(beside.text)")
        #expect(try await beside.event("reconciled")["siblings"] as? Int == 1, "\(beside.text)")
        #expect(!laptop.events.contains { $0["event"] as? String == "sync_round_dropped" }, "\(laptop.text)")
        #expect(!laptop.events.contains { $0["event"] as? String == "sync_dropped" }, "\(laptop.text)")
        // `pixie sync status` says the laptop agrees with the phone on every category.
        let status = try PixieProcess(["sync", "status", "--home", "laptop", "--json"], in: directory)
        #expect(await status.exit() == 0, "\(status.text)")
        let shown = try #require(try JSONSerialization.jsonObject(with: Data(status.text.utf8)) as? [String: Any])
        let siblings = try #require(shown["siblings"] as? [[String: Any]], "\(status.text)")
        #expect(siblings.count == 1 && siblings.first?["name"] as? String == "phone", "\(status.text)")
        let categories = try #require(siblings.first?["categories"] as? [String: [String: Any]])
        #expect(
            categories.count == 8 && categories.values.allSatisfy { $0["agrees"] as? Bool == true }, "\(status.text)")
        #expect(siblings.first?["last_round_at"] is Int, "\(status.text)")
    }

    @Test("the six-digit code enrolls a device, which then gets the seeds (and no grant) once its check code is typed")
    func grantCode() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        let phone = try PixieProcess(["listen", "--home", "phone", "--grant-code", "--json"], in: directory)
        defer { phone.stop() }
        let code = try #require(try await phone.event("grant_code")["code"] as? String)
        _ = try await phone.event("listening")

        // The tablet enrolls with the code: it is in the roster before any seed reaches it.
        let tablet = try PixieProcess(
            ["signin", "--no-sync"] + setup(server, home: "tablet", name: "tablet") + ["--grant-code", code],
            in: directory)
        defer { tablet.stop() }
        let tabletCode = try #require(try await tablet.event("waiting")["check_code"] as? String)
        #expect(try await phone.event("prompt")["device_model"] as? String == "tablet")
        // The code does not stand in for the person (identity-svc minted it): a wrong check code sends nothing.
        phone.type("00000000" == tabletCode ? "11111111" : "00000000")
        _ = try await phone.event("wrong_check_code")
        phone.type(tabletCode)
        _ = try await phone.event("approved_by_code")
        _ = try await tablet.event("joined")
        #expect(await tablet.exit() == 0, "\(tablet.text)")

        // The code is spent: another device signs in the usual way.
        let desk = try PixieProcess(["signin", "--no-sync"] + setup(server, home: "desk", name: "desk"), in: directory)
        defer { desk.stop() }
        let deskCode = try #require(try await desk.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt", occurrence: 2)
        phone.type(deskCode)
        _ = try await phone.event("approved")
        #expect(await desk.exit() == 0, "\(desk.text)")

        // The tablet holds the seeds: it can answer the next device itself.
        let tabletListens = try PixieProcess(["listen", "--home", "tablet", "--once", "--json"], in: directory)
        defer { tabletListens.stop() }
        _ = try await tabletListens.event("listening")
        let laptop = try PixieProcess(
            ["signin", "--no-sync"] + setup(server, home: "laptop", name: "laptop"), in: directory)
        defer { laptop.stop() }
        let laptopCode = try #require(try await laptop.event("waiting")["check_code"] as? String)
        _ = try await tabletListens.event("prompt")
        tabletListens.type(laptopCode)
        #expect(await laptop.exit() == 0, "\(laptop.text)")
        #expect(try await deviceCount(home: "laptop") == 4)
    }

    @Test("rejected, and no sibling online: the new device does not join, and says why")
    func refusals() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        let listener = try PixieProcess(["listen", "--home", "phone", "--reject", "--once", "--json"], in: directory)
        defer { listener.stop() }
        _ = try await listener.event("listening")
        let refused = try PixieProcess(["signin"] + setup(server, home: "tablet", name: "tablet"), in: directory)
        #expect(await refused.exit() == 1)
        #expect(refused.text.contains("rejected on the other device"), "\(refused.text)")
        _ = try await listener.event("rejected")

        // Nobody listens now.
        let lonely = try PixieProcess(
            ["signin"] + setup(server, home: "tablet", name: "tablet") + ["--wait", "2"], in: directory)
        #expect(await lonely.exit() == 1)
        #expect(lonely.text.contains("no device of this account answered within 2 s"), "\(lonely.text)")
        #expect(try await deviceCount(home: "phone") == 1)

        // Usage errors are 64.
        let usage = try PixieProcess(["signin", "--home", "x", "--server", "ftp://x"], in: directory)
        #expect(await usage.exit() == 64)
    }

    @Test("a request answered before the listener restarted is a replay after it: no second prompt, no ack")
    func replayAfterRestart() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        // A new device's request, made with the SDK so the test holds the very box a relay could keep.
        let bundle = try JSONDecoder().decode(
            TrustBundle.self, from: Data(contentsOf: directory.appendingPathComponent("bundle.json")))
        let client = PixieClient(baseURL: server.base)
        let started = try await client.startPhoneVerification(number)
        let code = try #require(
            try AgainstTheServerTests.lastCode(to: number, in: directory.appendingPathComponent("data")))
        let phoneCert = try await client.checkPhoneVerification(id: started.verificationID, code: code).phoneCert.data
        let bindings = LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client)
        let phoneID = try PhoneOwnershipCert.Verifier(pinnedKeys: [bundle.phoneVerifyKey]).verify(
            phoneCert, now: Date()
        )
        .phoneID
        let discovery = try await client.lookupOwnDiscovery(phoneCert: phoneCert)
        let sealTo = try await bindings.verifiedDiscovery(discovery, phoneID: phoneID)
        let wallet = TokenWallet(client: client, keyListVerifier: bindings, payer: .phoneCert(phoneCert))
        let attempt = try SignInAttempt(
            deviceModel: "replayed tablet", phoneCert: phoneCert, sealingKey: XWing.PrivateKey().publicKey,
            discoveryKey: sealTo.key, now: Date())
        let relay = try await WebSocketRelayConnection.connect(to: server.base)
        let answers = Received(relay)
        try await relay.subscribe(attempt.replySubjectKey)
        let inbox = try RelaySubject(rawRepresentation: discovery.discoveryInbox.data)

        let first = try PixieProcess(["listen", "--home", "phone", "--reject", "--once", "--json"], in: directory)
        defer { first.stop() }
        _ = try await first.event("listening")
        try await relay.send(attempt.box, to: inbox, wake: .silent, token: try await wallet.take())
        _ = try await first.event("rejected")
        #expect(await first.exit() == 0, "\(first.text)")
        // The ack, then the rejection.
        #expect(try attempt.read(try await answers.frame(0).payload) == .acknowledged(deviceFamily: "Linux"))
        _ = try await answers.frame(1)

        // The listener restarts; the relay posts the same box again, inside its freshness window.
        let second = try PixieProcess(["listen", "--home", "phone", "--reject", "--json"], in: directory)
        defer { second.stop() }
        _ = try await second.event("listening")
        try await relay.send(attempt.box, to: inbox, wake: .silent, token: try await wallet.take())
        let dropped = try await second.event("dropped")
        #expect((dropped["detail"] as? String)?.contains("replayed") == true, "\(second.text)")
        #expect(!second.text.contains("rejected") && !second.text.contains("\"prompt\""), "\(second.text)")
        // The ladder dropped it before anything was sealed back: the reply subject got the first two frames only.
        #expect(answers.count == 2)
        await relay.close()
    }

    @Test(
        "a sibling that says it is preparing and sends no byte: continue is offered at the grace, and the store comes")
    func graceWhilePreparing() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        // A store big enough that the phone is still sealing and uploading when the laptop hears it is preparing.
        let store = try DeviceStore(home: try DeviceHome(directory: directory.appendingPathComponent("phone")))
        let body = String(repeating: "x", count: 1 << 20)
        for index in 0..<64 {
            try store.put(
                .notebookNotes, id: "big-\(index)", fields: ["title": .text("\(index)"), "body": .text(body)])
        }
        let phone = try PixieProcess(["listen", "--home", "phone", "--json"], in: directory)
        defer { phone.stop() }
        _ = try await phone.event("listening")
        let laptop = try PixieProcess(
            ["signin"] + setup(server, home: "laptop", name: "laptop") + ["--grace", "1"], in: directory)
        defer { laptop.stop() }
        let code = try #require(try await laptop.event("waiting")["check_code"] as? String)
        _ = try await phone.event("prompt")
        phone.type(code)
        _ = try await laptop.event("joined")
        // The phone says it is preparing, and then its app is suspended: a promise of bytes, and no bytes.
        _ = try await laptop.event("preparing")
        phone.suspend()
        _ = try await laptop.event("may_continue")
        #expect(!laptop.events.contains { $0["event"] as? String == "downloading" }, "\(laptop.text)")
        laptop.type("")
        let continued = try await laptop.event("continued")
        #expect(await laptop.exit() == 0, "\(laptop.text)")
        // The absorption goes on in the background, and says where it is.
        let running = try PixieProcess(["sync", "status", "--home", "laptop", "--json"], in: directory)
        #expect(await running.exit() == 0)
        #expect(running.text.contains("\"state\":\"running\""), "\(running.text)")
        let pid = try #require(continued["pid"] as? Int)
        #expect(kill(pid_t(pid), 0) == 0)
        // The phone wakes up and finishes: the store arrives with nobody watching.
        phone.resume()
        var state = ""
        for _ in 0..<600 where state != "absorbed" {
            try await Task.sleep(for: .milliseconds(100))
            let status = try PixieProcess(["sync", "status", "--home", "laptop", "--json"], in: directory)
            _ = await status.exit()
            state =
                (try? JSONSerialization.jsonObject(with: Data(status.text.utf8)) as? [String: Any])?["state"]
                as? String ?? ""
            #expect(["running", "absorbed"].contains(state), "\(status.text)")
        }
        #expect(state == "absorbed")
        #expect(
            try DeviceStore(home: try DeviceHome(directory: directory.appendingPathComponent("laptop"))).rows(
                .notebookNotes
            ).count == 64)
    }

    @Test("listen --trust-bundle takes a newer bundle's phone-verify keys (a rotation), never another log's")
    func adoptsANewerTrustBundle() async throws {
        let server = try await setUp()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        try await createAccount(server)
        var bundle = try JSONDecoder().decode(
            TrustBundle.self, from: Data(contentsOf: directory.appendingPathComponent("bundle.json")))
        let next = HybridSignature.PrivateKey().publicKey
        bundle.additionalPhoneVerifyKeys = [next]
        try JSONEncoder().encode(bundle).write(to: directory.appendingPathComponent("rotating.json"))
        let listener = try PixieProcess(
            ["listen", "--home", "phone", "--trust-bundle", "rotating.json", "--json"], in: directory)
        _ = try await listener.event("listening")
        listener.stop()
        _ = await listener.exit()
        let saved = try DeviceHome(directory: directory.appendingPathComponent("phone")).state().trustBundle
        #expect(saved.phoneVerifyKeys == [bundle.phoneVerifyKey, next])
        // A bundle of another log is refused, and changes nothing.
        var other = bundle
        other.transparencyLogKey = HybridSignature.PrivateKey().publicKey
        other.additionalPhoneVerifyKeys = []
        try JSONEncoder().encode(other).write(to: directory.appendingPathComponent("other.json"))
        let refused = try PixieProcess(
            ["listen", "--home", "phone", "--trust-bundle", "other.json"], in: directory)
        #expect(await refused.exit() == 1)
        #expect(refused.text.contains("another transparency log"), "\(refused.text)")
        #expect(try DeviceHome(directory: directory.appendingPathComponent("phone")).state().trustBundle == saved)
    }
}
