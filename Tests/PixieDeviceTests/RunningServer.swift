import Foundation
import Processes
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct Failure: Error, CustomStringConvertible {
    let description: String
}

/// `pixie-server --data-dir DIR --port 0`, started as an operator runs it; the port comes from its "listening"
/// log line.
final class RunningServer: Sendable {
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "pixie-server")
    }

    private let process: ChildProcess
    let port: Int
    /// Whether it serves TLS itself (`--tls-cert`).
    let isTLS: Bool
    /// `http://127.0.0.1:PORT`, or with TLS `https://localhost:PORT` (the name its certificate carries).
    var base: URL { URL(string: isTLS ? "https://localhost:\(port)" : "http://127.0.0.1:\(port)")! }

    /// `relayTokens`: `credential` (the default: every SEND spends a real rate-limit token) or `insecure-dev`.
    /// `environment`: extra `PIXIE_<SETTING>` variables (`PIXIE_GRANT_LIFETIME`). `tls`: the certificate chain and
    /// key files it serves https:// with (`--tls-cert`, `--tls-key`).
    init(
        dataDirectory: URL, relayTokens: String = "credential", environment: [String: String] = [:],
        tls: (chain: String, key: String)? = nil
    ) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw Failure(description: "pixie-server is not built at \(Self.binary.path): swift build --build-tests")
        }
        let process = ChildProcess()
        process.executableURL = Self.binary
        process.arguments =
            ["--data-dir", dataDirectory.path, "--port", "0", "--relay-tokens", relayTokens]
            + (tls.map { ["--tls-cert", $0.chain, "--tls-key", $0.key] } ?? [])
        isTLS = tls != nil
        let scheme = tls == nil ? "http" : "https"
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // The "listening" line names the port (a hang's limit of 120 s: the suite shares two cores).
        do {
            port = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
                Thread.detachNewThread {
                    var text = ""
                    let deadline = Date().addingTimeInterval(120)
                    while Date() < deadline {
                        let chunk = err.fileHandleForReading.availableData
                        if chunk.isEmpty { break }
                        text += String(decoding: chunk, as: UTF8.self)
                        if let range = text.range(of: #""address":"\#(scheme)://127.0.0.1:"#),
                            let port = Int(text[range.upperBound...].prefix { $0.isNumber })
                        {
                            continuation.resume(returning: port)
                            // Keep draining, so the server never blocks on a full pipe.
                            while !err.fileHandleForReading.availableData.isEmpty {}
                            return
                        }
                    }
                    continuation.resume(throwing: Failure(description: "pixie-server did not start: \(text)"))
                }
            }
        } catch {
            process.terminate()
            process.waitUntilExit()
            throw error
        }
        self.process = process
    }

    /// SIGHUP: reload the TLS certificate.
    func hangUp() { process.hangUp() }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
