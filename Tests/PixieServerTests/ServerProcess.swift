import Foundation
import Processes
import SiblingsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The built `pixie-server` binary, run as an operator runs it (README.md): a real process on a real port.
///
/// The binary is found beside the test bundle (`.build/debug` or `.build/release`), as CommandLineKitTests'
/// BinaryTests finds `bench`.
final class ServerProcess: Sendable {
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("pixie-server")
    }

    /// The repository root (for docs/openapi.yaml and the venv).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// A fresh, empty data directory under the system's temporary directory.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Runs `pixie-server arguments` to completion (for subcommands and start-up failures).
    static func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try requireBinary()
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: outData, as: UTF8.self),
            String(decoding: errData, as: UTF8.self)
        )
    }

    static func requireBinary() throws {
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw ProcessTestError(
                "pixie-server is not built at \(binary.path): build with `swift build --build-tests` first")
        }
    }

    // MARK: - A running server

    let dataDirectory: URL
    /// `http://127.0.0.1:PORT`, from the "listening" log line.
    let address: URL
    private let process: ChildProcess
    private let log: LogCollector

    /// Starts `pixie-server --data-dir DIR --port 0 extra...` and waits (up to 120 s, a hang's limit) for its
    /// "listening" line, without holding a thread of the concurrency pool.
    init(dataDirectory: URL, extraArguments: [String] = []) async throws {
        try Self.requireBinary()
        self.dataDirectory = dataDirectory
        let process = ChildProcess()
        process.executableURL = Self.binary
        process.arguments = ["--data-dir", dataDirectory.path, "--port", "0"] + extraArguments
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        let log = LogCollector()
        try process.run()
        log.drain(err.fileHandleForReading)
        self.process = process
        self.log = log
        let deadline = Date().addingTimeInterval(120)  // a hang's limit: start-up shares two cores with the suite
        while true {
            if let address = log.listeningAddress {
                self.address = address
                return
            }
            guard process.isRunning, Date() < deadline else {
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
                log.waitForEnd()  // the last lines say why
                throw ProcessTestError("pixie-server did not report \"listening\"; its log:\n\(log.text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    /// The server's process id (for /proc/<pid>/status).
    var processIdentifier: Int32 { process.processIdentifier }

    /// Whether the server is still running (not exited, whether or not anything has waited for it).
    var isRunning: Bool { process.isRunning }

    /// Everything the server wrote to standard error so far.
    var logText: String { log.text }

    /// Waits for the process to exit by itself (after a signal the test sent) and returns its status.
    func waitForExit() -> Int32 {
        process.waitUntilExit()
        // The pipe may still hold the last lines when the process is gone: read them all.
        log.waitForEnd()
        return process.terminationStatus
    }

    /// Sends SIGTERM and waits for the exit status.
    func terminate() -> Int32 {
        process.terminate()
        return waitForExit()
    }

    /// The requests' session: its limit is a hang's (FoundationNetworking ignores a request's own timeout for
    /// a server that never answers).
    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 120
        configuration.timeoutIntervalForResource = 120
        return URLSession(configuration: configuration)
    }()

    /// One request over real HTTP; returns the status, the headers and the body.
    func request(
        _ method: String, _ path: String, json: [String: Any]? = nil, headers: [String: String] = [:]
    ) async throws -> (status: Int, headers: [AnyHashable: Any], body: Data) {
        var request = URLRequest(url: address.appendingPathComponent(path))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
        }
        let (body, response) = try await Self.session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw ProcessTestError("not an HTTP response") }
        return (http.statusCode, http.allHeaderFields, body)
    }
}

/// Collects a process's standard error as it comes, on a thread of its own, to the end of the pipe.
private final class LogCollector: Sendable {
    private let data = Mutex(Data())
    private let ended = DispatchSemaphore(value: 0)

    /// Reads `handle` to its end on a thread of its own (not the Dispatch pool, which the suite keeps busy).
    func drain(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while case let chunk = handle.availableData, !chunk.isEmpty {
                data.withLock { $0.append(chunk) }
            }
            ended.signal()
        }
    }

    /// Waits until the process's standard error is closed and read (a hang's limit: 120 s).
    func waitForEnd() {
        if ended.wait(timeout: .now() + 120) == .success { ended.signal() }
    }

    var text: String { String(decoding: data.withLock { $0 }, as: UTF8.self) }

    /// The address of the first `"msg":"listening"` line.
    var listeningAddress: URL? {
        for line in text.split(separator: "\n") where line.contains("\"msg\":\"listening\"") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let address = object["address"] as? String
            else { continue }
            return URL(string: address)
        }
        return nil
    }
}

struct ProcessTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Data {
    /// The body as a JSON object (empty when it is not one).
    var jsonObject: [String: Any] { (try? JSONSerialization.jsonObject(with: self) as? [String: Any]) ?? [:] }
}

/// A blocking TCP connection to 127.0.0.1, for tests that send a request in pieces, write bytes no client
/// would (half a WebSocket frame), or vanish halfway.
final class RawSocket {
    let fd: Int32

    /// Connects to 127.0.0.1:`port`; nil when the connection is refused (or cannot be made).
    init?(port: Int) {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)  // a hang's limit, not a timing check
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { close() }

    private var closed = false

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Sends all of `data`; false once the peer has gone.
    @discardableResult
    func send(_ data: Data) -> Bool {
        var rest = data[...]
        while !rest.isEmpty {
            let written = rest.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            rest = rest.dropFirst(written)
        }
        return true
    }

    /// Reads one byte at a time to the end of an HTTP head (`\r\n\r\n`), leaving what follows unread.
    func readHead() -> String {
        var head = Data()
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual("\r\n\r\n".utf8), recv(fd, &byte, 1, 0) == 1 { head.append(byte) }
        return String(decoding: head, as: UTF8.self)
    }

    /// Reads until the peer closes, `done` says the bytes are enough, or the read times out.
    func receive(until done: (Data) -> Bool = { _ in false }) -> Data {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !done(received) {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        return received
    }
}
