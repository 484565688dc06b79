import Foundation
import Processes
import SiblingsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 14's crash: a thousand relay WebSockets opened, half of them subscribed, then all reset at once, twenty
/// times over. Before the upgraded sockets were taken off libmicrohttpd (docs/http-platform.md), glibc aborted
/// the server within a few such cycles in four runs of five.
@Suite("The relay under churn")
struct RelayChurnTests {
    static var loadClient: URL {
        ServerProcess.binary.deletingLastPathComponent().appendingPathComponent("connection-bench")
    }

    @Test("20 cycles of 1,000 WebSockets opened, subscribed and reset: every handshake answered, the server alive")
    func churn() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory, extraArguments: ["relay", "--relay-tokens", "insecure-dev"])
        let port = server.address.port!
        let client = Self.loadClient
        guard FileManager.default.isExecutableFile(atPath: client.path) else {
            throw ProcessTestError(
                "connection-bench is not built at \(client.path): build with `swift build --build-tests`")
        }
        let (status, output) = try await onThread { () -> (Int32, String) in
            let process = ChildProcess()
            process.executableURL = client
            process.arguments = ["churn", "--port", "\(port)", "--connections", "1000", "--cycles", "20"]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        #expect(
            status == 0,
            "connection-bench churn failed:\n\(output.suffix(2000))\nserver:\n\(server.logText.suffix(3000))")
        #expect(output.contains("churn connected=20000 failed=0"), "\(output.suffix(500))")
        #expect(server.isRunning, "the server died:\n\(server.logText.suffix(3000))")
        #expect(try await server.request("GET", "/healthz").status == 200)
        // Every socket's place was given back: no WebSocket is left open.
        var metrics = ""
        for _ in 0..<200 {
            metrics = String(decoding: try await server.request("GET", "/metrics").body, as: UTF8.self)
            if metrics.contains("\npixie_websockets 0\n") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(metrics.contains("\npixie_websockets 0\n"), "\(metrics)")
        #expect(server.terminate() == 0)
    }
}
