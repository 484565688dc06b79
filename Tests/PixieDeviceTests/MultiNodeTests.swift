import Foundation
import PixieDevice
import PixieWire
import Processes
import SiblingsCrypto
import SiblingsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Two pixie-server processes, as two nodes: one PostgreSQL database (a scratch schema on the test server, through
/// `PIXIE_DATABASE`), the same keys (copied from the first node's data directory, as an operator distributes
/// them), and a data directory each (each writes its own development SMS outbox).
struct TwoNodes {
    let directories: [URL]
    let nodes: [RunningServer]
    let database: String

    /// With `relay`, the relay nodes share the test command's nats-server, and blob-svc a blob directory.
    /// `natsURLs`: each node's own NATS URL (a proxy the test can cut, for one), instead of the test command's.
    static func start(
        relay: Bool = false, relayTokens: String = "credential", environment extra: [String: String] = [:],
        natsURLs: [String]? = nil
    ) async throws -> TwoNodes {
        let database = try TestDatabase.scratchPostgresURL()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-nodes-\(UUID())")
        let directories = [root.appendingPathComponent("a"), root.appendingPathComponent("b")]
        for directory in directories {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        var environment = ["PIXIE_DATABASE": database].merging(extra) { $1 }
        if relay {
            guard let nats = ProcessInfo.processInfo.environment["SIBLINGS_NATS_URL"], !nats.isEmpty else {
                throw Failure(
                    description: "SIBLINGS_NATS_URL is not set: run the test command (scripts/test.sh), which starts "
                        + "nats-server, or `eval \"$(scripts/engines.sh start)\"`")
            }
            environment["PIXIE_RELAY_NATS_URL"] = nats
            environment["PIXIE_BLOB_DIR"] = root.appendingPathComponent("shared-blobs").path
        }
        func settings(of node: Int) -> [String: String] {
            guard let natsURLs else { return environment }
            return environment.merging(["PIXIE_RELAY_NATS_URL": natsURLs[node]]) { $1 }
        }
        let first = try await RunningServer(
            dataDirectory: directories[0], relayTokens: relayTokens, environment: settings(of: 0))
        try FileManager.default.copyItem(
            at: directories[0].appendingPathComponent("keys"), to: directories[1].appendingPathComponent("keys"))
        let second = try await RunningServer(
            dataDirectory: directories[1], relayTokens: relayTokens, environment: settings(of: 1))
        return TwoNodes(directories: directories, nodes: [first, second], database: database)
    }

    /// The account's first device, "phone", in `directory`, made through node 0.
    func createAccount(in directory: URL, bundle: TrustBundle) async throws -> DeviceHome {
        let phone = try DeviceHome(directory: directory)
        _ = try await OnboardingFlow(home: phone).createAccount(
            server: nodes[0].base, trustBundle: bundle, name: "phone", phoneNumber: TwoDevices.number,
            code: { number, _ in try #require(try AgainstTheServerTests.lastCode(to: number, in: directories[0])) })
        return phone
    }

    func stop() {
        for node in nodes { node.stop() }
        try? FileManager.default.removeItem(at: directories[0].deletingLastPathComponent())
    }

    /// The trust bundle, as `pixie-server trust-bundle` prints it for this deployment.
    func trustBundle() throws -> TrustBundle {
        try JSONDecoder().decode(
            TrustBundle.self,
            from: Data(
                try AgainstTheServerTests.run([
                    "trust-bundle", "--data-dir", directories[0].path, "--database", database,
                ]).utf8))
    }
}

@Suite("Two pixie-server nodes on one PostgreSQL database")
struct MultiNodeTests {
    @Test("a code sent through one node is checked on the other, and a phone cert comes back once")
    func codeAcrossNodes() async throws {
        let deployment = try await TwoNodes.start()
        defer { deployment.stop() }
        let number = "+14155550177"
        let started = try await PixieClient(baseURL: deployment.nodes[0].base).startPhoneVerification(number)
        let code = try #require(try AgainstTheServerTests.lastCode(to: number, in: deployment.directories[0]))
        let other = PixieClient(baseURL: deployment.nodes[1].base)
        let checked = try await other.checkPhoneVerification(id: started.verificationID, code: code)
        #expect(!checked.phoneCert.data.isEmpty)
        // Used is used, whichever node is asked.
        await #expect(throws: PixieClientError.self) {
            _ = try await PixieClient(baseURL: deployment.nodes[0].base).checkPhoneVerification(
                id: started.verificationID, code: code)
        }
    }

    @Test("accounts made through both nodes at once: one transparency log, proven by either node, audited clean")
    func accountsOnBothNodes() async throws {
        let deployment = try await TwoNodes.start()
        defer { deployment.stop() }
        let bundle = try deployment.trustBundle()
        let root = deployment.directories[0].deletingLastPathComponent()
        let homes = try await withThrowingTaskGroup(of: DeviceHome.self) { group in
            for index in 0..<4 {
                group.addTask {
                    let node = index % 2
                    let number = "+1415555020\(index)"
                    let home = try DeviceHome(directory: root.appendingPathComponent("device-\(index)"))
                    _ = try await OnboardingFlow(home: home).createAccount(
                        server: deployment.nodes[node].base, trustBundle: bundle, name: "phone \(index)",
                        phoneNumber: number,
                        code: { number, _ in
                            try #require(
                                try AgainstTheServerTests.lastCode(to: number, in: deployment.directories[node]))
                        })
                    return home
                }
            }
            return try await group.reduce(into: [DeviceHome]()) { $0.append($1) }
        }
        // Each device checks its roster against the log through the node it did not use.
        for home in homes {
            let used = try #require(try home.load()?.server)
            let other = deployment.nodes.first { $0.base.absoluteString != used } ?? deployment.nodes[0]
            try home.update { $0.server = other.base.absoluteString }
            let devices = try await OnboardingFlow(home: home).devices()
            #expect(devices.count == 1 && devices[0].isThisDevice)
        }
        // An auditor following each node from the start finds one consistent history.
        let bundleFile = root.appendingPathComponent("bundle.json")
        try JSONEncoder().encode(bundle).write(to: bundleFile)
        var sizes: [String] = []
        for node in deployment.nodes {
            let report = try AgainstTheServerTests.run([
                "audit", "--url", node.base.absoluteString, "--trust-bundle", bundleFile.path,
            ])
            sizes.append(report)
        }
        #expect(sizes[0].hasPrefix("ok:") && sizes[0] == sizes[1], "\(sizes)")
    }

    @Test("a relay node dies mid-session: its client connects to the other node, and frames reach it there")
    func relayNodeDies() async throws {
        let deployment = try await TwoNodes.start(relay: true, relayTokens: "insecure-dev")
        defer { deployment.stop() }
        let key = RelaySubjectKey()
        let sender = try await WebSocketRelayConnection.connect(to: deployment.nodes[1].base)
        var listener = try await WebSocketRelayConnection.connect(to: deployment.nodes[0].base)
        try await listener.subscribe(key)
        try await sender.send(Data("before".utf8), to: key.subject, wake: .silent, token: SecureRandom.bytes(count: 32))
        #expect(await Self.next(listener)?.payload == Data("before".utf8))

        deployment.nodes[0].stop()
        // The session ends with the node, so the device knows to reconnect, and does, to the node still up.
        #expect(await Self.next(listener) == nil)
        listener = try await WebSocketRelayConnection.connect(to: deployment.nodes[1].base)
        try await listener.subscribe(key)
        try await sender.send(Data("after".utf8), to: key.subject, wake: .silent, token: SecureRandom.bytes(count: 32))
        #expect(await Self.next(listener)?.payload == Data("after".utf8))
        await listener.close()
        await sender.close()
    }

    @Test("a listener whose relay node loses NATS is told (1013), reconnects with backoff, and answers a sign-in")
    func listenerReconnects() async throws {
        guard let nats = ProcessInfo.processInfo.environment["SIBLINGS_NATS_URL"],
            let natsPort = URLComponents(string: nats)?.port
        else { throw Failure(description: "SIBLINGS_NATS_URL is not set: run the test command (scripts/test.sh)") }
        let proxy = try CuttableProxy(to: natsPort)
        defer { proxy.stop() }
        let deployment = try await TwoNodes.start(relay: true, natsURLs: ["nats://127.0.0.1:\(proxy.port)", nats])
        defer { deployment.stop() }
        let bundle = try deployment.trustBundle()
        let root = deployment.directories[0].deletingLastPathComponent()
        // The phone's account and listener are on node 0, whose link to NATS goes through the proxy.
        let phone = try await deployment.createAccount(in: root.appendingPathComponent("phone"), bundle: bundle)
        let checkCode = Shared<String?>(nil)
        let reports = Shared<[InboxListener.Outcome]>([])
        let listening = try await TwoDevices.listen(phone, checkCode: checkCode, reports: reports) {
            $0.reconnectDelay = .milliseconds(100)
            $0.longestReconnectDelay = .milliseconds(400)
        }
        defer { listening.cancel() }

        // Node 0 loses NATS: it closes the listener's connection saying why, and refuses it until the link is back.
        proxy.cut()
        func reconnecting() -> [String] {
            reports.get().compactMap { if case .reconnecting(let reason, _) = $0 { reason } else { nil } }
        }
        try await waitFor("the listener was not told", seconds: 30) { reconnecting().count >= 2 }
        #expect(reconnecting().first?.contains("lost its link to the other relay nodes") == true, "\(reports.get())")
        #expect(!reports.get().contains(.reconnected))
        proxy.mend()
        try await waitFor("the listener did not reconnect", seconds: 60) { reports.get().contains(.reconnected) }

        // A new device on the other node signs in: the request crosses NATS to the listener's new connection.
        let laptop = try DeviceHome(directory: root.appendingPathComponent("laptop"))
        try await TwoDevices.signIn(
            laptop, name: "laptop", server: deployment.nodes[1], directory: deployment.directories[1], bundle: bundle,
            checkCode: checkCode)
        #expect(try await OnboardingFlow(home: laptop).devices().count == 2)
        #expect(reports.get().contains(.approved(deviceModel: "Laptop")), "\(reports.get())")
    }

    /// Polls `condition` every 20 ms for up to `seconds` (a hang's limit, not a timing check).
    func waitFor(_ what: String, seconds: Int, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw Failure(description: what) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The next delivery, or nil once the session ended.
    static func next(_ session: WebSocketRelayConnection) async -> RelayDelivery? {
        for await delivery in session.deliveries { return delivery }
        return nil
    }

    @Test("a new device signs in through one node, approved by a phone listening on the other, and absorbs its store")
    func signInAcrossNodes() async throws {
        let deployment = try await TwoNodes.start(relay: true)
        defer { deployment.stop() }
        let bundle = try deployment.trustBundle()
        let root = deployment.directories[0].deletingLastPathComponent()
        let phone = try await deployment.createAccount(in: root.appendingPathComponent("phone"), bundle: bundle)
        let phoneStore = try DeviceStore(home: phone)
        try populate(phoneStore)
        try phoneStore.put(
            .notebookNotes, id: "big",
            fields: ["title": .text("Big"), "body": .text(String(repeating: "x", count: 20_000))])
        let checkCode = Shared<String?>(nil)
        let listening = try await TwoDevices.listen(
            phone, sync: SyncAgainstTheServerTests.fast(), checkCode: checkCode)
        defer { listening.cancel() }

        // The laptop talks to the other node only: its request and the approval cross NATS.
        let laptop = try DeviceHome(directory: root.appendingPathComponent("laptop"))
        try await TwoDevices.signIn(
            laptop, name: "laptop", server: deployment.nodes[1], directory: deployment.directories[1], bundle: bundle,
            checkCode: checkCode)
        #expect(try await OnboardingFlow(home: laptop).devices().count == 2)

        // The phone uploads the store through its node; the laptop downloads it in ranges through the other.
        let service = try await SyncService.connect(
            context: try DeviceContext(home: laptop), configuration: SyncAgainstTheServerTests.fast())
        let outcome = try await service.absorb()
        await service.close()
        guard case .absorbed(let summary) = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        let rows = try everyRow(phoneStore)
        #expect(summary.inserted == rows.count)
        #expect(try everyRow(try DeviceStore(home: laptop)) == rows)
    }

    @Test(
        "docs/deploy/nginx.conf with TLS in front of two nodes: an account, a sign-in and an absorption over https and wss"
    )
    func theFront() async throws {
        let deployment = try await TwoNodes.start(relay: true, environment: ["PIXIE_TRUSTED_PROXIES": "127.0.0.1"])
        defer { deployment.stop() }
        let certificates = try TestCertificates()
        let front = try NginxFront(nodes: deployment.nodes, certificates: certificates)
        defer { front.stop() }
        #expect(front.base.scheme == "https")
        let bundle = try deployment.trustBundle()
        let root = deployment.directories[0].deletingLastPathComponent()
        // The devices trust the test's own CA, as `pixie --ca-file` makes them; they log each connection's TLS.
        let lines = Shared<[String]>([])
        let environment = DeviceEnvironment(
            tls: .client(trust: .caFile(certificates.path("ca.pem"))), log: { line in lines.change { $0.append(line) } }
        )
        // The front sends each request to either node: the code is in the outbox written last.
        let code: OnboardingFlow.CodeSource = { number, _ in
            let newest = deployment.directories.max { a, b in
                Self.modified(a.appendingPathComponent("sms-outbox.jsonl"))
                    < Self.modified(b.appendingPathComponent("sms-outbox.jsonl"))
            }!
            return try #require(try AgainstTheServerTests.lastCode(to: number, in: newest))
        }
        let phone = try DeviceHome(directory: root.appendingPathComponent("phone"))
        _ = try await OnboardingFlow(home: phone, environment: environment).createAccount(
            server: front.base, trustBundle: bundle, name: "phone", phoneNumber: TwoDevices.number, code: code)
        let phoneStore = try DeviceStore(home: phone)
        try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
        let checkCode = Shared<String?>(nil)
        let listening = try await TwoDevices.listen(phone, checkCode: checkCode, environment: environment)
        defer { listening.cancel() }
        let laptop = try DeviceHome(directory: root.appendingPathComponent("laptop"))
        checkCode.change { $0 = nil }
        var configuration = SignInApprovalRequester.Configuration(deviceModel: "Laptop")
        configuration.maximumWait = .seconds(60)
        _ = try await OnboardingFlow(home: laptop, environment: environment).signIn(
            server: front.base, trustBundle: bundle, name: "laptop", phoneNumber: TwoDevices.number, code: code,
            configuration: configuration,
            events: { event in
                if case .waiting(let code) = event { checkCode.change { $0 = code } }
            })
        #expect(try await OnboardingFlow(home: laptop, environment: environment).devices().count == 2)
        // The laptop absorbs the phone's store: the offer over wss, the blob through blob-svc over https.
        let service = try await SyncService.connect(
            context: try DeviceContext(home: laptop, environment: environment))
        let outcome = try await service.absorb()
        await service.close()
        guard case .absorbed = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        #expect(try DeviceStore(home: laptop).row(.notebookNotes, id: "n1")?["body"] == .text("milk"))
        #expect(lines.get().contains { $0.contains("TLSv1.3") }, "\(lines.get())")
        // A device that trusts only the system's store is refused, and told why.
        do {
            _ = try await OnboardingFlow(home: laptop).devices()
            Issue.record("a device that does not trust the test CA reached the front")
        } catch {
            #expect("\(error)".contains("not signed by a CA this device trusts"), "\(error)")
        }
        let bundleFile = root.appendingPathComponent("bundle.json")
        try JSONEncoder().encode(bundle).write(to: bundleFile)
        // The operator's audit reads the log from a node (its URLSession trusts the system's store only).
        let audit = try AgainstTheServerTests.run([
            "audit", "--url", deployment.nodes[0].base.absoluteString, "--trust-bundle", bundleFile.path,
        ])
        #expect(audit.hasPrefix("ok:"), "\(audit)")
    }

    @Test(
        "PostgreSQL restarted while accounts are being made: the server carries on, and every account acknowledged is there"
    )
    func databaseRestartUnderLoad() async throws {
        let engines = try PrivateEngines()
        defer { engines.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-restart-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await RunningServer(
            dataDirectory: directory, environment: ["PIXIE_DATABASE": engines.postgresURL])
        defer { server.stop() }
        let bundle = try JSONDecoder().decode(
            TrustBundle.self,
            from: Data(
                try AgainstTheServerTests.run([
                    "trust-bundle", "--data-dir", directory.path, "--database", engines.postgresURL,
                ]).utf8))
        var acknowledged: [DeviceHome] = []
        var refusals: [String] = []
        var restart: Task<Void, any Error>?
        var index = 0
        // Accounts one after another until 12 are made; the restart runs beside them after the fourth.
        while acknowledged.count < 12, index < 60 {
            if acknowledged.count == 4, restart == nil { restart = Task.detached { try engines.restartPostgres() } }
            let home = try DeviceHome(directory: directory.appendingPathComponent("device-\(index)"))
            do {
                _ = try await OnboardingFlow(home: home).createAccount(
                    server: server.base, trustBundle: bundle, name: "phone \(index)",
                    phoneNumber: "+1415555" + String(format: "%04d", 300 + index),
                    code: { number, _ in try #require(try AgainstTheServerTests.lastCode(to: number, in: directory)) })
                acknowledged.append(home)
            } catch {
                refusals.append("\(error)")
                try await Task.sleep(for: .milliseconds(100))
            }
            index += 1
        }
        try await restart?.value
        // The server carried on once the database was back.
        #expect(acknowledged.count == 12, "\(acknowledged.count) accounts; refused: \(refusals)")
        // Every account the server acknowledged is stored and logged: its device finds itself in its roster,
        // checked against the transparency log.
        for home in acknowledged {
            let devices = try await OnboardingFlow(home: home).devices()
            #expect(devices.count == 1 && devices[0].isThisDevice)
        }
    }

    static func modified(_ file: URL) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: file.path))?[.modificationDate] as? Date) ?? .distantPast
    }
}

/// nginx running docs/deploy/nginx.conf on a free loopback port, in front of `nodes` (each both a service and a
/// relay node), with TLS by the test CA's certificate for localhost and 127.0.0.1; its files in a temporary prefix.
struct NginxFront {
    let port: Int
    let prefix: URL
    private let process: ChildProcess

    var base: URL { URL(string: "https://localhost:\(port)")! }

    init(nodes: [RunningServer], certificates: TestCertificates) throws {
        let binary = "/usr/sbin/nginx"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw Failure(description: "nginx is not installed at \(binary): run scripts/setup.sh")
        }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        var text = try String(
            contentsOf: repository.appendingPathComponent("docs/deploy/nginx.conf"), encoding: .utf8)
        let upstreams = nodes.map { "        server 127.0.0.1:\($0.port);" }.joined(separator: "\n")
        for example in ["10.0.0.11:8080", "10.0.0.21:8080"] {
            text = text.replacingOccurrences(of: "        server \(example);", with: upstreams)
        }
        text = text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("server 10.0.0.") }
            .joined(separator: "\n")
        text = text.replacingOccurrences(of: "/etc/ssl/pixie/fullchain.pem", with: certificates.path("server.pem"))
        text = text.replacingOccurrences(of: "/etc/ssl/pixie/privkey.pem", with: certificates.path("server.key"))
        port = try Loopback.freePort()
        text = text.replacingOccurrences(of: "listen 443 ssl;", with: "listen 127.0.0.1:\(port) ssl;")
        text = text.replacingOccurrences(of: "worker_processes auto;", with: "worker_processes 1;")
        prefix = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-\(UUID())")
        try FileManager.default.createDirectory(
            at: prefix.appendingPathComponent("logs"), withIntermediateDirectories: true)
        let config = prefix.appendingPathComponent("nginx.conf")
        try Data(text.utf8).write(to: config)
        process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [
            "-p", prefix.path, "-c", config.path, "-e", prefix.appendingPathComponent("logs/error.log").path, "-g",
            "daemon off; pid \(prefix.appendingPathComponent("nginx.pid").path);",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<500 {
            if Self.accepts(port) { return }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        let log = (try? String(contentsOf: prefix.appendingPathComponent("logs/error.log"), encoding: .utf8)) ?? ""
        process.terminate()
        throw Failure(description: "nginx did not start on port \(port): \(log)")
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: prefix)
    }

    static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }
}

/// A PostgreSQL server of a test's own (scripts/engines.sh), which the test may restart.
struct PrivateEngines {
    let directory: String
    let postgresURL: String
    let postgresBinary: String
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/engines.sh").path

    init() throws {
        // Its exports through a file, not a pipe: the servers it starts outlive it, and hold their output open.
        let exports = FileManager.default.temporaryDirectory.appendingPathComponent("engines-\(UUID()).sh")
        defer { try? FileManager.default.removeItem(at: exports) }
        guard FileManager.default.createFile(atPath: exports.path, contents: nil) else {
            throw Failure(description: "cannot create \(exports.path)")
        }
        let file = try FileHandle(forWritingTo: exports)
        defer { try? file.close() }
        try Self.run(["/bin/bash", Self.script, "start"], output: file)
        let output = try String(contentsOf: exports, encoding: .utf8)
        func value(_ name: String) throws -> String {
            guard let range = output.range(of: "\(name)='") else {
                throw Failure(description: "scripts/engines.sh start printed no \(name): \(output)")
            }
            return String(output[range.upperBound...].prefix { $0 != "'" })
        }
        directory = try value("SIBLINGS_ENGINES_DIR")
        postgresURL = try value("SIBLINGS_POSTGRES_URL")
        postgresBinary = try value("SIBLINGS_POSTGRES_BIN")
    }

    /// `pg_ctl restart -m fast`: every connection is ended, and the server comes back on the same port.
    func restartPostgres() throws {
        // With its log file: without one, the new server would write to (and hold open) this process's pipe.
        let pgctl = [
            postgresBinary + "/pg_ctl", "-D", directory + "/pg", "-l", directory + "/postgres.log", "-m", "fast", "-w",
            "restart",
        ]
        try Self.run(getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + pgctl : pgctl)
    }

    func stop() { try? Self.run(["/bin/bash", Self.script, "stop", directory]) }

    /// Runs `arguments` and waits for it alone: the servers it starts outlive it. A ChildProcess, not system(3),
    /// which would hand them every descriptor open in this process at that moment, other tests' pipes among them:
    /// a PostgreSQL server that held the write end of another test's oracle's input kept that oracle, and the
    /// test waiting for it, alive for as long as the server ran.
    static func run(_ arguments: [String], output: FileHandle = FileHandle.nullDevice) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(
                description: "\(arguments.joined(separator: " ")) failed (status \(process.terminationStatus))")
        }
    }
}
