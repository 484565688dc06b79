import Foundation
import HTTPServer
import SiblingsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal HTTP/1.1 client on a POSIX socket: one request per connection (`Connection: close`).
enum RawClient {
    struct Reply {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A connected socket to 127.0.0.1:`port`, or the errno of a failed connect.
    static func connect(port: UInt16) -> Result<Int32, Failure> {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(Failure(description: "socket: errno \(errno)")) }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)  // a hang's limit, not a timing check: the suite runs at once
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(Failure(description: "connect: errno \(code)"))
        }
        return .success(fd)
    }

    /// Sends `head` (the request line and headers, without the blank line) and `body`, reads to EOF.
    static func send(port: UInt16, head: String, body: Data = Data()) throws -> Reply {
        let fd = try connect(port: port).get()
        defer { close(fd) }
        var bytes = Data((head + "\r\nConnection: close\r\n\r\n").utf8)
        bytes.append(body)
        try bytes.withUnsafeBytes { buffer in
            var sent = 0
            while sent < buffer.count {
                let n = Glibc.send(fd, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    // The server may answer 413 and close before reading it all; read what it said.
                    if errno == EPIPE || errno == ECONNRESET { break }
                    throw Failure(description: "send: errno \(errno)")
                }
                sent += n
            }
        }
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 {
                if errno == ECONNRESET && !received.isEmpty { break }
                throw Failure(description: "recv: errno \(errno)")
            }
            if n == 0 { break }
            received.append(contentsOf: chunk[0..<n])
        }
        return try parse(received)
    }

    /// ``send(port:head:body:)`` on a thread of its own: the blocking socket calls must not hold a thread
    /// of the Swift concurrency pool, which the server's responder needs to answer (2 cores, 2 threads),
    /// nor one of Dispatch's global queue, which adds threads only after a second of them being blocked.
    static func request(port: UInt16, head: String, body: Data = Data()) async throws -> Reply {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try send(port: port, head: head, body: body) })
            }
        }
    }

    /// Writes `bytes` as they are (one request or several) and reads to EOF: the raw answer.
    static func exchange(port: UInt16, _ bytes: Data) async throws -> Data {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        let fd = try connect(port: port).get()
                        defer { close(fd) }
                        let sent = bytes.withUnsafeBytes {
                            Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                        }
                        guard sent == bytes.count else { throw Failure(description: "send: errno \(errno)") }
                        var received = Data()
                        var chunk = [UInt8](repeating: 0, count: 4096)
                        while case let n = recv(fd, &chunk, chunk.count, 0), n > 0 {
                            received.append(contentsOf: chunk[0..<n])
                        }
                        return received
                    })
            }
        }
    }

    static func parse(_ data: Data) throws -> Reply {
        guard let split = data.range(of: Data("\r\n\r\n".utf8)) else {
            throw Failure(description: "no header end in \(String(decoding: data, as: UTF8.self))")
        }
        let lines = String(decoding: data[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(lines[0])")
        }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(
                String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return Reply(status: status, headers: headers, body: Data(data[split.upperBound...]))
    }
}

@Suite("HTTPServer on a real socket")
struct ServerTests {
    struct Echo: Codable {
        var method: String
        var path: String
        var query: [String]
        var agent: String
        var body: String
        var remote: String
    }

    static func start(maximumBodySize: Int = 64) throws -> HTTPServer {
        var router = Router()
        router.get("/healthz") { _, _ in .text("ok") }
        router.on(.post, "/echo/:name") { request, context in
            try .json(
                Echo(
                    method: request.method.rawValue, path: "\(request.path) \(try context.parameter("name"))",
                    query: request.queryItems.map { "\($0.name)=\($0.value)" },
                    agent: request.headers["user-agent"] ?? "", body: request.bodyText,
                    remote: request.remoteAddress ?? "none"),
                status: .created)
        }
        router.get("/slow/:n") { _, context in
            try await Task.sleep(for: .milliseconds(5))
            return .text("slow \(try context.parameter("n"))")
        }
        router.get("/boom") { _, _ in throw CancellationError() }
        router.get("/custom") { _, _ in
            HTTPResponse(status: .accepted, headers: ["X-One": "1", "Content-Length": "999"], body: Data("abc".utf8))
        }
        return try HTTPServer(
            responder: router, configuration: HTTPServer.Configuration(maximumBodySize: maximumBodySize))
    }

    @Test func servesRoutesAndShutsDown() async throws {
        let server = try Self.start()
        #expect(server.port != 0)
        #expect(server.isRunning)

        let health = try await RawClient.request(port: server.port, head: "GET /healthz HTTP/1.1\r\nHost: x")
        #expect(health.status == 200)
        #expect(health.headers["content-type"] == "text/plain; charset=utf-8")
        #expect(health.headers["Content-Length"] == "2")
        #expect(String(decoding: health.body, as: UTF8.self) == "ok")

        let body = Data("hello body".utf8)
        let echo = try await RawClient.request(
            port: server.port,
            head: "POST /echo/a%20b?x=1&y=two HTTP/1.1\r\nHost: x\r\nUser-Agent: raw\r\nContent-Length: \(body.count)",
            body: body)
        #expect(echo.status == 201)
        #expect(echo.headers["Content-Type"] == "application/json")
        let decoded = try JSONDecoder().decode(Echo.self, from: echo.body)
        #expect(decoded.method == "POST")
        #expect(decoded.path == "/echo/a b a b")
        #expect(decoded.query == ["x=1", "y=two"])
        #expect(decoded.agent == "raw")
        #expect(decoded.body == "hello body")
        #expect(decoded.remote == "127.0.0.1")

        let custom = try await RawClient.request(port: server.port, head: "GET /custom HTTP/1.1\r\nHost: x")
        #expect(custom.status == 202)
        #expect(custom.headers["x-one"] == "1")
        #expect(custom.headers["content-length"] == "3")
        #expect(custom.body == Data("abc".utf8))

        let missing = try await RawClient.request(port: server.port, head: "GET /nope HTTP/1.1\r\nHost: x")
        #expect(missing.status == 404)
        let wrong = try await RawClient.request(port: server.port, head: "DELETE /healthz HTTP/1.1\r\nHost: x")
        #expect(wrong.status == 405)
        #expect(wrong.headers["Allow"] == "GET, HEAD")
        let head = try await RawClient.request(port: server.port, head: "HEAD /healthz HTTP/1.1\r\nHost: x")
        #expect(head.status == 200)
        #expect(head.headers["Content-Length"] == "2")
        #expect(head.body.isEmpty)

        await server.shutdown()
        #expect(!server.isRunning)
        await server.shutdown()
        guard case .failure = RawClient.connect(port: server.port) else {
            Issue.record("the port still accepts connections after shutdown")
            return
        }
    }

    @Test func declaredBodyOverTheLimitIs413() async throws {
        let server = try Self.start(maximumBodySize: 64)
        let atLimit = try await RawClient.request(
            port: server.port, head: "POST /echo/n HTTP/1.1\r\nHost: x\r\nContent-Length: 64",
            body: Data(repeating: 0x61, count: 64))
        #expect(atLimit.status == 201)
        let over = try await RawClient.request(
            port: server.port, head: "POST /echo/n HTTP/1.1\r\nHost: x\r\nContent-Length: 65",
            body: Data(repeating: 0x61, count: 65))
        #expect(over.status == 413)
        let reply = try JSONDecoder().decode([String: String].self, from: over.body)
        #expect(reply["error"] == "content_too_large")
        await server.shutdown()
    }

    /// libmicrohttpd 0.9.75 refuses these itself and sends its header block twice (HTTPServer's
    /// MalformedContentLength answers in its place): each answer must be one status line and headers, then
    /// exactly the body its Content-Length declares, our JSON.
    @Test(
        "a Content-Length libmicrohttpd cannot parse gets one well-formed JSON answer, also on a kept-alive connection")
    func malformedContentLengthIsAnsweredOnce() async throws {
        let server = try Self.start()
        func expectWellFormed(
            _ raw: Data, status: Int, code: String, sourceLocation: SourceLocation = #_sourceLocation
        )
            throws
        {
            let reply = try RawClient.parse(raw)
            #expect(reply.status == status, sourceLocation: sourceLocation)
            #expect(reply.headers["Content-Length"] == "\(reply.body.count)", sourceLocation: sourceLocation)
            #expect(
                raw.split(separator: Data("HTTP/1.1 ".utf8)).count == 1, "\(String(decoding: raw, as: UTF8.self))",
                sourceLocation: sourceLocation)
            let body = try JSONDecoder().decode([String: String].self, from: reply.body)
            #expect(body["error"] == code, sourceLocation: sourceLocation)
            #expect(body["reason"]?.contains("Content-Length") == true, sourceLocation: sourceLocation)
        }
        for (value, status, code) in [
            ("abc", 400, "bad_request"), ("2 ", 400, "bad_request"), ("-1", 400, "bad_request"),
            ("99999999999999999999999", 413, "content_too_large"),
        ] {
            let raw = try await RawClient.exchange(
                port: server.port, Data("POST /echo/n HTTP/1.1\r\nHost: x\r\nContent-Length: \(value)\r\n\r\n".utf8))
            try expectWellFormed(raw, status: status, code: code)
        }
        // The second request of a kept-alive connection: the first is answered as usual, the second once.
        let raw = try await RawClient.exchange(
            port: server.port,
            Data(
                ("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "POST /echo/n HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n").utf8))
        let first = try RawClient.parse(raw)
        #expect(first.status == 200)
        let length = try #require(first.headers["Content-Length"].flatMap { Int($0) })
        let second = raw.suffix(from: raw.count - (first.body.count - length))
        #expect(String(decoding: first.body.prefix(length), as: UTF8.self) == "ok")
        try expectWellFormed(Data(second), status: 400, code: "bad_request")
        // The server still serves.
        #expect(try await RawClient.request(port: server.port, head: "GET /healthz HTTP/1.1\r\nHost: x").status == 200)
        await server.shutdown()
    }

    @Test func chunkedBodyOverTheLimitIs413() async throws {
        let server = try Self.start(maximumBodySize: 64)
        var chunked = Data()
        for _ in 0..<3 { chunked.append(Data("20\r\n".utf8) + Data(repeating: 0x62, count: 32) + Data("\r\n".utf8)) }
        chunked.append(Data("0\r\n\r\n".utf8))
        let over = try await RawClient.request(
            port: server.port, head: "POST /echo/n HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked", body: chunked)
        #expect(over.status == 413)

        let small = Data("20\r\n".utf8) + Data(repeating: 0x62, count: 32) + Data("\r\n0\r\n\r\n".utf8)
        let fits = try await RawClient.request(
            port: server.port, head: "POST /echo/n HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked", body: small)
        #expect(fits.status == 201)
        #expect(try JSONDecoder().decode(Echo.self, from: fits.body).body == String(repeating: "b", count: 32))
        await server.shutdown()
    }

    @Test func concurrentRequestsAreAnsweredSeparately() async throws {
        let server = try Self.start()
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for n in 0..<16 {
                group.addTask {
                    let reply = try await RawClient.request(
                        port: server.port, head: "GET /slow/\(n) HTTP/1.1\r\nHost: x")
                    return String(decoding: reply.body, as: UTF8.self)
                }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(bodies == Set((0..<16).map { "slow \($0)" }))
        await server.shutdown()
    }

    @Test func handlerErrorIs500OverTheSocket() async throws {
        let server = try Self.start()
        let reply = try await RawClient.request(port: server.port, head: "GET /boom HTTP/1.1\r\nHost: x")
        #expect(reply.status == 500)
        let body = try JSONDecoder().decode([String: String].self, from: reply.body)
        #expect(body["error"] == "internal_error")
        await server.shutdown()
    }

    @Test func badConfigurationThrows() {
        #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: Router(), configuration: HTTPServer.Configuration(connectionLimit: 0))
        }
        #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: Router(), configuration: HTTPServer.Configuration(maximumBodySize: -1))
        }
    }

    @Test func portInUseThrows() async throws {
        let first = try Self.start()
        #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: Router(), configuration: HTTPServer.Configuration(port: first.port))
        }
        await first.shutdown()
    }

    /// A server with one streaming upload route, and a client connected to it that has sent the head of a
    /// 2000-byte upload and `sent` bytes of its body; returns once the handler is reading.
    static func uploadInFlight(sent: Int) async throws -> (server: HTTPServer, fd: Int32) {
        let started = DispatchSemaphore(value: 0)
        var router = Router()
        router.post("/upload", body: .stream(limit: 1 << 20)) { request, _ in
            started.signal()
            return .text("got \(try await request.bodyStream!.collect(upTo: 1 << 20).count)")
        }
        // No idle timeout and no minimum body rate: with the whole suite running, this test may wait tens of
        // seconds between its steps, and its body stalls on purpose.
        var configuration = HTTPServer.Configuration(connectionTimeout: 0)
        configuration.limits.minimumBodyRate = nil
        configuration.limits.headerTimeout = nil
        let server = try HTTPServer(responder: router, configuration: configuration)
        let fd = try RawClient.connect(port: server.port).get()
        let head = Data("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n".utf8) + Data(count: sent)
        let written = head.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(written == head.count)
        try await onThread { started.wait() }
        return (server, fd)
    }

    @Test("shutdown refuses new connections at once, answers the request in flight, then closes")
    func shutdownFinishesTheRequestInFlight() async throws {
        // Half the body is sent, and the handler is reading it, when shutdown begins.
        let (server, fd) = try await Self.uploadInFlight(sent: 1000)
        defer { close(fd) }
        let port = server.port
        func send(_ data: Data) -> Bool {
            data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) == $0.count }
        }
        let shutdown = Task { await server.shutdown(gracePeriod: .seconds(120)) }
        var refused = false
        for _ in 0..<2000 where !refused {
            if case .failure = RawClient.connect(port: port) {
                refused = true
            } else {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        #expect(refused, "a new connection was still taken while shutting down")
        // The rest of the body: the request in flight is answered in full.
        #expect(send(Data(count: 1000)))
        let reply = try await onThread { () throws -> RawClient.Reply in
            var received = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while received.range(of: Data("got 2000".utf8)) == nil {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                received.append(contentsOf: buffer[0..<n])
            }
            return try RawClient.parse(received)
        }
        #expect(reply.status == 200)
        #expect(String(decoding: reply.body, as: UTF8.self) == "got 2000")
        #expect(await shutdown.value == 0)
        #expect(!server.isRunning)
    }

    @Test("a request still unanswered when the grace period ends is cut off, and counted")
    func shutdownCutsOffAfterTheGracePeriod() async throws {
        let (server, fd) = try await Self.uploadInFlight(sent: 10)
        defer { close(fd) }
        // The client never sends the rest: after the grace period the server gives up on it.
        #expect(await server.shutdown(gracePeriod: .milliseconds(50)) == 1)
        #expect(!server.isRunning)
        var byte: UInt8 = 0
        #expect(recv(fd, &byte, 1, 0) <= 0, "the cut-off connection is closed")
    }
}
