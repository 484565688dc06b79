import Foundation
import HTTPServer
import SiblingsCrypto
import SiblingsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Deterministic bytes for chunk `index` of an upload (byte `j` is `31 j + 7 index` mod 256), so client and
/// handler can hash the same thing; at most 1 MiB. Sliced from one table: debug builds are slow per byte.
func pattern(_ index: Int, count: Int) -> Data {
    precondition(count <= 1 << 20)
    // 31 * 223 = 1 (mod 256), so the row for `index` starts `7 * 223 * index` bytes into the table.
    let start = (index * 7 * 223) & 0xFF
    return patternTable[start..<start + count]
}

private let patternTable = Data((0..<(1 << 20) + 256).map { UInt8(truncatingIfNeeded: $0 &* 31) })

/// Bytes a client thread has sent.
final class Counter: Sendable {
    let value = Mutex(0)
}

/// What a streaming handler saw, for tests to wait on.
final class Probe: Sendable {
    let state = Mutex<(bytes: Int, error: (any Error)?, done: Bool)>((0, nil, false))
    let release = DispatchSemaphore(value: 0)

    /// Waits for the handler to record that it is done. The limit only stops a hang from holding the run up: it
    /// is no timing check, and it is long because the whole suite runs at once on two cores (a CI run once took
    /// over 30 s to deliver a disconnect while hundreds of other tests ran).
    func waitUntilDone(seconds: Double = 180) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if state.withLock({ $0.done }) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}

@Suite("Streamed bodies")
struct BodyStreamTests {
    static let chunk = 1 << 20

    /// Routes: /upload (stream, 128 MiB), /small (stream, 1000 bytes), /slow (stream; waits for the probe),
    /// /probe (records errors), /download (known length), /chunked (no length), /partial (206), /collect.
    static func router(probe: Probe = Probe()) -> Router {
        var router = Router()
        router.post("/upload", body: .stream(limit: 128 << 20)) { request, _ in
            guard let stream = request.bodyStream else { throw HTTPError(.badRequest, .badRequest, "no stream") }
            var hasher = SHA256()
            var count = 0
            var largest = 0
            for try await chunk in stream {
                hasher.update(data: chunk)
                count += chunk.count
                largest = max(largest, chunk.count)
            }
            return .text("\(count) \(hasher.finalize()) \(largest)")
        }
        router.post("/small", body: .stream(limit: 1000)) { request, _ in
            let body = try await request.bodyStream!.collect(upTo: 1 << 20)
            return .text("\(body.count)")
        }
        router.put("/slow", body: .stream(limit: 1 << 30)) { request, _ in
            var iterator = request.bodyStream!.makeAsyncIterator()
            var count = try await iterator.next()?.count ?? 0
            await withCheckedContinuation { done in
                Thread.detachNewThread {
                    probe.release.wait()
                    done.resume()
                }
            }
            while let chunk = try await iterator.next() { count += chunk.count }
            return .text("\(count)")
        }
        router.post("/probe", body: .stream(limit: 1 << 30)) { request, _ in
            do {
                for try await chunk in request.bodyStream! { probe.state.withLock { $0.bytes += chunk.count } }
            } catch {
                probe.state.withLock { $0.error = error }
            }
            probe.state.withLock { $0.done = true }
            return .text("done")
        }
        router.post("/ignore", body: .stream(limit: 1 << 30)) { _, _ in .text("ignored", status: .accepted) }
        router.post("/collect") { request, _ in .text("collected \(request.body.count) \(request.bodyStream == nil)") }
        router.get("/download/:size") { _, context in
            let size = Int(try context.parameter("size")) ?? 0
            return .stream(headers: ["Content-Type": "application/octet-stream"], length: size) { writer in
                var sent = 0
                var index = 0
                while sent < size {
                    let piece = pattern(index, count: min(chunk, size - sent))
                    try await writer.write(piece)
                    sent += piece.count
                    index += 1
                }
            }
        }
        router.get("/chunked") { _, _ in
            let pieces = AsyncStream<Data> { continuation in
                for index in 0..<5 { continuation.yield(pattern(index, count: 1000 + index)) }
                continuation.finish()
            }
            return .stream(chunks: pieces)
        }
        router.get("/partial") { _, _ in
            .stream(
                status: .partialContent,
                headers: ["Content-Range": "bytes 10-19/100", "Accept-Ranges": "bytes", "ETag": "\"v1\""],
                length: 10
            ) { writer in try await writer.write(Data("0123456789".utf8)) }
        }
        router.get("/endless") { _, _ in
            .stream { writer in
                do {
                    for index in 0... {
                        try await writer.write(pattern(index, count: 64 << 10))
                        probe.state.withLock { $0.bytes += 64 << 10 }
                    }
                } catch {
                    probe.state.withLock {
                        $0.error = error
                        $0.done = true
                    }
                    throw error
                }
            }
        }
        router.get("/short") { _, _ in
            .stream(length: 100) { writer in try await writer.write(Data("only this".utf8)) }
        }
        return router
    }

    static func expected(chunks: Int, size: Int = chunk) -> (count: Int, hash: String) {
        var hasher = SHA256()
        for index in 0..<chunks { hasher.update(data: pattern(index, count: size)) }
        return (chunks * size, hasher.finalize().description)
    }

    // MARK: In memory

    @Test func inMemoryClientStreamsTheBody() async throws {
        let body = (0..<3).reduce(into: Data()) { $0.append(pattern($1, count: Self.chunk)) }
        let response = await Self.router().test(.post, "/upload", body: body)
        let fields = response.bodyText.split(separator: " ")
        #expect(fields.count == 3)
        #expect(fields.first.map(String.init) == "\(3 << 20)")
        #expect(fields.dropFirst().first.map(String.init) == Self.expected(chunks: 3).hash)
        #expect(Int(fields.last ?? "") ?? .max <= 64 << 10)
        #expect(await Self.router().test(.post, "/collect", body: "abc").bodyText == "collected 3 true")
    }

    @Test func inMemoryClientRefusesTooLongStreams() async throws {
        let router = Self.router()
        #expect(await router.test(.post, "/small", body: Data(count: 1000)).bodyText == "1000")
        let over = await router.test(.post, "/small", body: Data(count: 1001))
        #expect(over.status == .contentTooLarge)
        let declared = await router.test(.post, "/small", headers: ["Content-Length": "5000"], body: Data(count: 10))
        #expect(declared.status == .contentTooLarge)
        #expect(router.bodyPolicy(for: HTTPRequest(method: .post, path: "/small")) == .stream(limit: 1000))
        #expect(router.bodyPolicy(for: HTTPRequest(method: .post, path: "/collect")) == .collect)
        #expect(router.bodyPolicy(for: HTTPRequest(method: .get, path: "/nowhere")) == .collect)
    }

    @Test func inMemoryClientCollectsStreamedResponses() async throws {
        let router = Self.router()
        let download = await router.test(.get, "/download/3000000")
        #expect(download.status == .ok)
        #expect(download.body.count == 3_000_000)
        #expect(download.body.prefix(10) == pattern(0, count: 10))
        let partial = await router.test(.get, "/partial")
        #expect(partial.status == .partialContent)
        #expect(partial.headers["Content-Range"] == "bytes 10-19/100")
        #expect(partial.bodyText == "0123456789")
        #expect(await router.test(.get, "/short").status == .internalServerError)
    }

    // MARK: Over a socket

    /// Sends `head` and then `chunks` pieces of ``pattern(_:count:)`` from a thread, counting what the
    /// kernel accepted in `sent`; returns the reply (or nil if the server closed first).
    static func upload(
        port: UInt16, head: String, chunks: Int, size: Int = chunk, chunked: Bool = false,
        sent: Counter? = nil, stopAfter: Int? = nil
    ) throws -> RawClient.Reply? {
        let fd = try RawClient.connect(port: port).get()
        defer { close(fd) }
        var timeout = timeval(tv_sec: 180, tv_usec: 0)  // a hang's limit, not a timing check
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func write(_ data: Data) -> Bool {
            data.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let n = Glibc.send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                    if n <= 0 { return false }
                    offset += n
                    sent?.value.withLock { $0 += n }
                }
                return true
            }
        }
        guard write(Data((head + "\r\nConnection: close\r\n\r\n").utf8)) else { return nil }
        for index in 0..<chunks {
            if let stopAfter, index == stopAfter { return nil }
            var piece = pattern(index, count: size)
            if chunked {
                piece = Data(String(size, radix: 16).utf8) + Data("\r\n".utf8) + piece + Data("\r\n".utf8)
            }
            guard write(piece) else { break }
        }
        if chunked { _ = write(Data("0\r\n\r\n".utf8)) }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        return try RawClient.parse(received)
    }

    static func start(_ router: Router, timeout: Duration? = .seconds(30)) throws -> HTTPServer {
        try HTTPServer(
            responder: router, configuration: HTTPServer.Configuration(maximumBodySize: 1024, responderTimeout: timeout)
        )
    }

    @Test("a 64 MiB upload streams through with every byte seen, in chunks of bounded size")
    func largeUpload() async throws {
        let server = try Self.start(Self.router())
        let chunks = 64
        let reply = try await onThread {
            try Self.upload(
                port: server.port, head: "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(chunks << 20)",
                chunks: chunks)
        }
        let expected = Self.expected(chunks: chunks)
        let fields = String(decoding: reply?.body ?? Data(), as: UTF8.self).split(separator: " ")
        #expect(reply?.status == 200)
        #expect(fields.first.map(String.init) == "\(expected.count)")
        #expect(fields.dropFirst().first.map(String.init) == expected.hash)
        // libmicrohttpd hands over what one read brought; nothing like the whole body at once.
        #expect(Int(fields.last ?? "") ?? .max <= 1 << 20)

        // Chunked transfer encoding streams the same way.
        let chunkedReply = try await onThread {
            try Self.upload(
                port: server.port, head: "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked",
                chunks: 8, chunked: true)
        }
        #expect(chunkedReply?.status == 200)
        let chunkedText = String(decoding: chunkedReply?.body ?? Data(), as: UTF8.self)
        #expect(chunkedText.hasPrefix("\(8 << 20) "))
        await server.shutdown()
    }

    @Test("a handler that answers without reading the stream: the rest is discarded, the answer sent")
    func unreadBody() async throws {
        let server = try Self.start(Self.router())
        let reply = try await onThread {
            try Self.upload(
                port: server.port, head: "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: \(16 << 20)", chunks: 16)
        }
        #expect(reply?.status == 202)
        #expect(String(decoding: reply?.body ?? Data(), as: UTF8.self) == "ignored")
        await server.shutdown()
    }

    @Test("a slow consumer holds the sender back: the server buffers a bounded amount")
    func backPressure() async throws {
        let probe = Probe()
        let server = try Self.start(Self.router(probe: probe))
        let sent = Counter()
        let total = 96
        let upload = Task {
            try await onThread {
                try Self.upload(
                    port: server.port, head: "PUT /slow HTTP/1.1\r\nHost: x\r\nContent-Length: \(total << 20)",
                    chunks: total, sent: sent)
            }
        }
        try await Task.sleep(for: .seconds(1))
        let stalled = sent.value.withLock { $0 }
        // The handler holds one chunk; the stream queues about 1 MiB, libmicrohttpd's buffer and the loopback
        // socket buffers hold some MiB more. Without back-pressure the whole 96 MiB would be in by now.
        #expect(stalled < 40 << 20, "the client sent \(stalled) bytes while the handler read nothing")
        probe.release.signal()
        let reply = try await upload.value
        #expect(reply?.status == 200)
        #expect(String(decoding: reply?.body ?? Data(), as: UTF8.self) == "\(total << 20)")
        await server.shutdown()
    }

    @Test("413 for a declared and for an undeclared body past the route's limit")
    func tooLong() async throws {
        let server = try Self.start(Self.router())
        let fits = try await RawClient.request(
            port: server.port, head: "POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 1000", body: Data(count: 1000))
        #expect(fits.status == 200)
        #expect(String(decoding: fits.body, as: UTF8.self) == "1000")

        let declared = try await RawClient.request(
            port: server.port, head: "POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 1001", body: Data(count: 1001))
        #expect(declared.status == 413)
        #expect(try JSONDecoder().decode([String: String].self, from: declared.body)["error"] == "content_too_large")

        let undeclared = try await onThread {
            try Self.upload(
                port: server.port, head: "POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked", chunks: 3,
                size: 600, chunked: true)
        }
        #expect(undeclared?.status == 413)
        // The streaming limit is the route's own: far past the server-wide 1024 bytes is fine on /upload.
        let collected = try await RawClient.request(
            port: server.port, head: "POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 2000",
            body: Data(count: 2000))
        #expect(collected.status == 413)
        await server.shutdown()
    }

    @Test("a client that disconnects mid-body makes the stream throw clientDisconnected")
    func clientDisconnects() async throws {
        let probe = Probe()
        let server = try Self.start(Self.router(probe: probe))
        _ = try await onThread {
            try Self.upload(
                port: server.port, head: "POST /probe HTTP/1.1\r\nHost: x\r\nContent-Length: \(10 << 20)", chunks: 10,
                stopAfter: 2)
        }
        #expect(await probe.waitUntilDone())
        let (bytes, error) = probe.state.withLock { ($0.bytes, $0.error) }
        #expect(bytes <= 2 << 20)
        #expect(
            (error as? HTTPError)?.code == .clientDisconnected, "the stream ended with \(String(describing: error))")
        await server.shutdown()
    }

    @Test("streamed downloads: Content-Length when known, chunked when not, 206 headers pass through")
    func downloads() async throws {
        let server = try Self.start(Self.router())
        let size = 8 << 20 | 12345
        let known = try await RawClient.request(port: server.port, head: "GET /download/\(size) HTTP/1.1\r\nHost: x")
        #expect(known.status == 200)
        #expect(known.headers["Content-Length"] == "\(size)")
        #expect(known.headers["Transfer-Encoding"] == nil)
        #expect(known.body.count == size)
        var hasher = SHA256()
        var offset = 0
        var index = 0
        while offset < size {
            let piece = pattern(index, count: min(Self.chunk, size - offset))
            hasher.update(data: piece)
            offset += piece.count
            index += 1
        }
        #expect(SHA256.hash(data: known.body) == hasher.finalize())

        let chunked = try await RawClient.request(port: server.port, head: "GET /chunked HTTP/1.1\r\nHost: x")
        #expect(chunked.status == 200)
        #expect(chunked.headers["Content-Length"] == nil)
        #expect(chunked.headers["Transfer-Encoding"]?.lowercased() == "chunked")
        let expected = (0..<5).reduce(into: Data()) { $0.append(pattern($1, count: 1000 + $1)) }
        #expect(try Self.dechunk(chunked.body) == expected)

        let partial = try await RawClient.request(port: server.port, head: "GET /partial HTTP/1.1\r\nHost: x")
        #expect(partial.status == 206)
        #expect(partial.headers["Content-Range"] == "bytes 10-19/100")
        #expect(partial.headers["Accept-Ranges"] == "bytes")
        #expect(partial.headers["ETag"] == "\"v1\"")
        #expect(partial.headers["Content-Length"] == "10")
        #expect(String(decoding: partial.body, as: UTF8.self) == "0123456789")

        let head = try await RawClient.request(port: server.port, head: "HEAD /download/\(size) HTTP/1.1\r\nHost: x")
        #expect(head.status == 200)
        #expect(head.headers["Content-Length"] == "\(size)")
        #expect(head.body.isEmpty)

        // A producer that writes less than it declared: the connection drops and the body is short.
        let short = try await RawClient.request(port: server.port, head: "GET /short HTTP/1.1\r\nHost: x")
        #expect(short.headers["Content-Length"] == "100")
        #expect(short.body.count < 100)
        await server.shutdown()
    }

    @Test("a client that leaves mid-download makes the producer's write throw clientDisconnected")
    func downloadDisconnects() async throws {
        let probe = Probe()
        let server = try Self.start(Self.router(probe: probe))
        try await onThread {
            let fd = try RawClient.connect(port: server.port).get()
            let request = Data("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            _ = recv(fd, &buffer, buffer.count, Int32(MSG_WAITALL))
            close(fd)
        }
        #expect(await probe.waitUntilDone())
        let (bytes, error) = probe.state.withLock { ($0.bytes, $0.error) }
        #expect(bytes < 64 << 20, "the producer kept going after the client left")
        #expect(
            (error as? HTTPError)?.code == .clientDisconnected, "the producer ended with \(String(describing: error))")
        await server.shutdown()
    }

    static func dechunk(_ data: Data) throws -> Data {
        var body = Data()
        var rest = data[...]
        while true {
            guard let lineEnd = rest.range(of: Data("\r\n".utf8)) else {
                throw RawClient.Failure(description: "bad chunk")
            }
            let sizeText = String(decoding: rest[..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else {
                throw RawClient.Failure(description: "bad chunk size \(sizeText)")
            }
            if size == 0 { return body }
            let start = lineEnd.upperBound
            body.append(rest[start..<start + size])
            rest = rest[(start + size + 2)...]
        }
    }

    /// No clock is read: the handler would sleep for ten minutes, so a 503 and a cancelled handler within
    /// the time limit can only come from the timeout.
    @Test(
        "a responder slower than responderTimeout gets a 503 and its task is cancelled", .timeLimit(.minutes(1)))
    func responderTimeout() async throws {
        let probe = Probe()
        var router = Router()
        router.get("/sleepy") { _, _ in
            do {
                try await Task.sleep(for: .seconds(600))
            } catch {
                probe.state.withLock {
                    $0.error = error
                    $0.done = true
                }
                throw error
            }
            return .text("late")
        }
        router.get("/quick") { _, _ in .text("quick") }
        // Long enough that /quick, queued behind a busy pool, still answers in time; /sleepy never does.
        let server = try Self.start(router, timeout: .seconds(2))
        let reply = try await RawClient.request(port: server.port, head: "GET /sleepy HTTP/1.1\r\nHost: x")
        #expect(reply.status == 503)
        let body = try JSONDecoder().decode([String: String].self, from: reply.body)
        #expect(body["error"] == "timeout")
        #expect(body["reason"]?.contains("try again later") == true)
        #expect(await probe.waitUntilDone())
        #expect(probe.state.withLock { $0.error } is CancellationError)
        let quick = try await RawClient.request(port: server.port, head: "GET /quick HTTP/1.1\r\nHost: x")
        #expect(quick.status == 200)
        await server.shutdown()
        #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: router, configuration: HTTPServer.Configuration(responderTimeout: .zero))
        }
    }
}
