import Foundation
import HTTPServer
import SiblingsTestSupport
import Testing
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP client from a chosen 127.x address, for the per-address limits and the deadlines.
final class SourcedSocket {
    let fd: Int32

    /// Connects to 127.0.0.1:`port` from `source` (any address in 127.0.0.0/8).
    init(port: UInt16, source: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawClient.Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)  // a hang's limit, not a timing check
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        remote.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, connected == 0 else {
            close(fd)
            throw RawClient.Failure(description: "bind/connect from \(source): errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Sends `text`; false once the server has closed the connection.
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) == $0.count }
    }

    /// Everything until the server closes (or resets) the connection.
    func readToEnd() -> String {
        var received = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { break }
            received += chunk[0..<n]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Reads until a whole response head has arrived; nil if the server closed first.
    func readHead() -> String? {
        var received = [UInt8]()
        var byte: UInt8 = 0
        while !received.ends(with: Array("\r\n\r\n".utf8)) {
            guard recv(fd, &byte, 1, 0) == 1 else { return nil }
            received.append(byte)
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Whether the server closes the connection within `limit` (what it still sends is read and dropped).
    func closedByServer(within limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        var chunk = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) >= 0 else { return false }
            guard descriptor.revents != 0 else { continue }
            if recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT)) <= 0 { return true }
        }
        return false
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

/// Stands in for a forwarded-for middleware: the client is whoever `X-Client` names.
struct ClientHeaderMiddleware: HTTPMiddleware {
    func handle(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        var request = request
        if let client = request.headers["X-Client"] { request.remoteAddress = client }
        return try await next(request)
    }
}

@Suite("What one client may hold and how fast it must talk")
struct ConnectionGuardTests {
    static func server(_ configure: (inout HTTPServer.Configuration) -> Void) throws -> HTTPServer {
        var router = Router()
        router.get("/healthz") { _, _ in .text("ok") }
        router.post("/upload") { request, _ in .text("\(request.body.count)") }
        router.post("/slow-reader", body: .stream(limit: 4 << 20)) { request, _ in
            // The handler falls behind on purpose: that time is the server's, not the client's.
            try await Task.sleep(for: .milliseconds(600))
            var count = 0
            for try await chunk in request.bodyStream! { count += chunk.count }
            return .text("\(count)")
        }
        router.add(middleware: ClientHeaderMiddleware())
        router.webSocket("/ws") { _, socket in
            for try await message in socket { if case .text(let text) = message { try await socket.send(text: text) } }
        }
        var configuration = HTTPServer.Configuration(connectionLimit: 64)
        configure(&configuration)
        return try HTTPServer(responder: router, configuration: configuration)
    }

    static let get = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    static let upgrade =
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

    @Test("an address past its share of HTTP connections is closed unanswered; others and exempt ones are not")
    func httpConnectionsPerAddress() async throws {
        let server = try Self.server { $0.limits.httpConnectionsPerAddress = 3 }
        let port = server.port
        let (refused, other, freed) = try await onThread { () -> (String, String, String) in
            let held = try (0..<3).map { _ in try SourcedSocket(port: port) }
            // Each is accepted and counted before the next (a request answered on each proves it).
            for socket in held {
                socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                _ = socket.readHead()
            }
            let fourth = try SourcedSocket(port: port)
            fourth.send(Self.get)
            let refused = fourth.readToEnd()
            let elsewhere = try SourcedSocket(port: port, source: "127.0.0.2")
            elsewhere.send(Self.get)
            let other = elsewhere.readToEnd()
            _ = held[0].send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            _ = held[0].readToEnd()
            Thread.sleep(forTimeInterval: 0.1)
            let again = try SourcedSocket(port: port)
            again.send(Self.get)
            return (refused, other, again.readToEnd())
        }
        #expect(refused.isEmpty, "the fourth connection from 127.0.0.1 got an answer: \(refused)")
        #expect(other.hasPrefix("HTTP/1.1 200"), "\(other)")
        #expect(freed.hasPrefix("HTTP/1.1 200"), "a closed connection's place was not given back: \(freed)")
        #expect(server.statistics.httpConnectionsRefusedPerAddress == 1)

        let exempt = try Self.server {
            $0.limits.httpConnectionsPerAddress = 1
            $0.limits.exemptAddresses = ["127.0.0.1"]
        }
        let exemptPort = exempt.port
        let answers = try await onThread { () -> [String] in
            let held = try SourcedSocket(port: exemptPort)
            held.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = held.readHead()
            let second = try SourcedSocket(port: exemptPort)
            second.send(Self.get)
            return [second.readToEnd()]
        }
        #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") }, "\(answers)")
        await server.shutdown(gracePeriod: .seconds(1))
        await exempt.shutdown(gracePeriod: .seconds(1))
    }

    @Test("WebSockets past an address's share get 429, past the server's limit 503; a closed one frees its place")
    func webSocketLimits() async throws {
        let server = try Self.server {
            $0.limits.webSocketsPerAddress = 2
            $0.limits.webSockets = 3
        }
        let port = server.port
        let heads = try await onThread { () -> [String] in
            var open: [SourcedSocket] = []
            var heads: [String] = []
            for source in ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"] {
                let socket = try SourcedSocket(port: port, source: source)
                socket.send(Self.upgrade)
                heads.append(socket.readHead() ?? "closed")
                open.append(socket)
            }
            // One of 127.0.0.1's closes: its place is free again.
            open[0] = try SourcedSocket(port: port, source: "127.0.0.9")
            var waited = 0
            while waited < 200 {
                Thread.sleep(forTimeInterval: 0.01)
                waited += 1
                let retry = try SourcedSocket(port: port, source: "127.0.0.1")
                retry.send(Self.upgrade)
                let head = retry.readHead() ?? "closed"
                if head.hasPrefix("HTTP/1.1 101") {
                    heads.append(head)
                    break
                }
            }
            return heads
        }
        #expect(heads[0].hasPrefix("HTTP/1.1 101") && heads[1].hasPrefix("HTTP/1.1 101"))
        #expect(heads[2].hasPrefix("HTTP/1.1 429"), "\(heads[2])")
        #expect(heads[3].hasPrefix("HTTP/1.1 101"), "\(heads[3])")
        #expect(heads[4].hasPrefix("HTTP/1.1 503"), "\(heads[4])")
        #expect(heads.count == 6, "the place of a closed WebSocket was never given back")
        let statistics = server.statistics
        #expect(statistics.webSocketsRefusedPerAddress >= 1 && statistics.webSocketsRefusedAtLimit >= 1)
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test(
        "WebSockets are counted under the client the router saw (behind a proxy), and every close gives back its place")
    func webSocketsPerForwardedAddress() async throws {
        let server = try Self.server { $0.limits.webSocketsPerAddress = 2 }
        let port = server.port
        @Sendable func upgrade(as client: String) -> String {
            Self.upgrade.replacingOccurrences(of: "\r\n\r\n", with: "\r\nX-Client: \(client)\r\n\r\n")
        }
        for round in 0..<4 {
            let heads = try await onThread { () -> [String] in
                // Every socket comes from 127.0.0.1, the "proxy"; the clients are 10.0.0.1 and 10.0.0.2.
                let sockets = try (0..<4).map { _ in try SourcedSocket(port: port) }
                var heads: [String] = []
                for (socket, client) in zip(sockets, ["10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2"]) {
                    socket.send(upgrade(as: client))
                    heads.append(socket.readHead() ?? "closed")
                }
                return heads
            }
            #expect(heads[0].hasPrefix("HTTP/1.1 101") && heads[1].hasPrefix("HTTP/1.1 101"), "round \(round)")
            #expect(heads[2].hasPrefix("HTTP/1.1 429"), "round \(round): \(heads[2])")
            #expect(heads[3].hasPrefix("HTTP/1.1 101"), "round \(round): 10.0.0.2 paid for 10.0.0.1: \(heads[3])")
            // The sockets closed with the thread's scope: the places come back before the next round.
            // Up to 30 s: a hang's limit, not a timing check (the suite shares two cores with busy event loops).
            for _ in 0..<3000 where server.statistics.webSockets > 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(server.statistics.webSockets == 0)
            #expect(server.statistics.busiestAddressWebSockets == 0)
        }
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test("a request head trickled a byte at a time is cut off at the header deadline, idle keep-alive too")
    func headerDeadline() async throws {
        let server = try Self.server { $0.limits.headerTimeout = .milliseconds(300) }
        let port = server.port
        let (trickleAnswered, sentAll, idleClosed, normal) = try await onThread {
            () -> (String, Bool, Bool, String) in
            // Without the deadline each byte would reset libmicrohttpd's 30 s idle timeout, and the head would
            // arrive whole after 3 s and be answered.
            let trickler = try SourcedSocket(port: port)
            var sentAll = true
            for byte in Self.get {
                guard trickler.send(String(byte)) else {
                    sentAll = false
                    break
                }
                Thread.sleep(forTimeInterval: 0.1)
            }
            let answer = trickler.readToEnd()
            let keepAlive = try SourcedSocket(port: port)
            keepAlive.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = keepAlive.readHead()
            let idleClosed = keepAlive.closedByServer(within: .seconds(10))
            let normal = try SourcedSocket(port: port)
            normal.send(Self.get)
            return (answer, sentAll, idleClosed, normal.readToEnd())
        }
        #expect(!sentAll || !trickleAnswered.hasPrefix("HTTP/1.1 200"), "the trickled head was answered")
        #expect(!trickleAnswered.hasPrefix("HTTP/1.1 200"))
        #expect(idleClosed, "an idle keep-alive connection outlived the header deadline")
        #expect(normal.hasPrefix("HTTP/1.1 200"), "\(normal)")
        #expect(server.statistics.headerTimeouts >= 2)
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test("a body below the minimum rate is cut off; a fast one and one the handler holds back are not")
    func minimumBodyRate() async throws {
        let server = try Self.server {
            $0.limits.minimumBodyRate = BodyRate(bytesPerSecond: 2000, window: .milliseconds(200))
        }
        let port = server.port
        let (trickle, streamTrickle, fast, heldBack) = try await onThread { () -> (String, String, String, String) in
            let trickler = try SourcedSocket(port: port)
            trickler.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\nConnection: close\r\n\r\n")
            for _ in 0..<40 {
                guard trickler.send(String(repeating: "a", count: 10)) else { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            let trickle = trickler.readToEnd()
            let body = String(repeating: "b", count: 200_000)
            let fast = try SourcedSocket(port: port)
            fast.send(
                "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                    + body)
            let fastAnswer = fast.readToEnd()
            let streamTrickler = try SourcedSocket(port: port)
            streamTrickler.send(
                "POST /slow-reader HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n"
                    + "Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
            for _ in 0..<40 {
                guard streamTrickler.send(String(repeating: "s", count: 10)) else { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            let streamTrickle = streamTrickler.readToEnd()
            let streamed = String(repeating: "c", count: 3_000_000)
            let held = try SourcedSocket(port: port)
            held.send(
                "POST /slow-reader HTTP/1.1\r\nHost: x\r\nContent-Length: \(streamed.utf8.count)\r\n"
                    + "Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n" + streamed)
            return (trickle, streamTrickle, fastAnswer, held.readToEnd())
        }
        #expect(!trickle.hasPrefix("HTTP/1.1 200"), "a 10-bytes-per-50-ms body was taken: \(trickle)")
        #expect(fast.hasPrefix("HTTP/1.1 200") && fast.hasSuffix("200000"), "\(fast.prefix(200))")
        #expect(heldBack.hasPrefix("HTTP/1.1 200") && heldBack.hasSuffix("3000000"), "\(heldBack.prefix(200))")
        #expect(!streamTrickle.hasPrefix("HTTP/1.1 200"), "a trickle to a streaming route was taken: \(streamTrickle)")
        #expect(server.statistics.slowBodies == 2)
        await server.shutdown(gracePeriod: .seconds(1))
    }
}
