import Foundation
import PixieDevice
import PixieWire
import SiblingsTestSupport
import Testing

/// Two pixie-server processes, as two nodes: one PostgreSQL database (a scratch schema on the test server, through
/// `PIXIE_DATABASE`), the same keys (copied from the first node's data directory, as an operator distributes
/// them), and a data directory each (each writes its own development SMS outbox).
struct TwoNodes {
    let directories: [URL]
    let nodes: [RunningServer]
    let database: String

    static func start() async throws -> TwoNodes {
        let database = try TestDatabase.scratchPostgresURL()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-nodes-\(UUID())")
        let directories = [root.appendingPathComponent("a"), root.appendingPathComponent("b")]
        for directory in directories {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        let environment = ["PIXIE_DATABASE": database]
        let first = try await RunningServer(dataDirectory: directories[0], environment: environment)
        try FileManager.default.copyItem(
            at: directories[0].appendingPathComponent("keys"), to: directories[1].appendingPathComponent("keys"))
        let second = try await RunningServer(dataDirectory: directories[1], environment: environment)
        return TwoNodes(directories: directories, nodes: [first, second], database: database)
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
}
