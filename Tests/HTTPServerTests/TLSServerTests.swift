import Foundation
import HTTPServer
import SiblingsCrypto
import SiblingsTestSupport
import Synchronization
import Testing
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// The server's own TLS (``HTTPServer/Configuration/tls``): requests, bodies both ways and WebSockets through it,
/// the certificate reloaded under open connections, and clients that do not speak TLS or do not speak at all.
@Suite("HTTPServer serving TLS itself")
struct TLSServerTests {
    /// The server's certificate and key, copied where a renewal can replace them.
    final class Served: Sendable {
        let certificates: TestCertificates
        let chain: String
        let key: String

        init() throws {
            certificates = try TestCertificates()
            chain = certificates.path("served-chain.pem")
            key = certificates.path("served-key.pem")
            try renew(to: "server")
        }

        /// Puts `stem`.pem and `stem`.key where the server reads its certificate, as certbot renews in place.
        func renew(to stem: String) throws {
            for (from, to) in [("\(stem).pem", chain), ("\(stem).key", key)] {
                try Data(contentsOf: URL(fileURLWithPath: certificates.path(from))).write(to: URL(fileURLWithPath: to))
            }
        }

        func client(_ ca: String = "ca.pem") throws -> TLSContext {
            try TLSContext(.client(trust: .caFile(certificates.path(ca))))
        }
    }

    static func router() -> Router {
        var router = WebSocketTests.router()
        router.get("/who") { request, _ in
            HTTPResponse(status: .ok, headers: [:], body: Data((request.remoteAddress ?? "nobody").utf8))
        }
        router.post("/mirror") { request, _ in HTTPResponse(status: .ok, headers: [:], body: request.body) }
        return router
    }

    static func start(_ served: Served, limits: ConnectionLimits = ConnectionLimits()) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration(maximumBodySize: 8 << 20)
        configuration.limits = limits
        configuration.tls = .init(certificateChainFile: served.chain, privateKeyFile: served.key)
        return try HTTPServer(responder: router(), configuration: configuration)
    }

    /// One request on its own connection (`Connection: close`): the response's status line and body.
    static func exchange(
        port: UInt16, tls: TLSContext, host: String = "localhost", _ head: String, body: Data = Data()
    ) throws -> (status: String, body: Data) {
        let connection = try ClientConnection(host: host, port: port, tls: tls, timeout: .seconds(60))
        defer { connection.close() }
        var request = Data(
            "\(head)\r\nHost: \(host)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8)
        request.append(body)
        try connection.send(request)
        let reply = try connection.receiveUntilClosed(limit: 64 << 20)
        guard let end = reply.firstRange(of: Data("\r\n\r\n".utf8)) else {
            return (String(decoding: reply, as: UTF8.self), Data())
        }
        let status = String(decoding: reply[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")[0]
        return (status, Data(reply[end.upperBound...]))
    }

    @Test("requests over TLS 1.3: the client's own address, and 3 MiB each way through the tunnel")
    func servesHTTPS() async throws {
        let served = try Served()
        let server = try Self.start(served)
        let tls = try served.client()
        for host in ["localhost", "127.0.0.1"] {
            let who = try Self.exchange(port: server.port, tls: tls, host: host, "GET /who HTTP/1.1")
            #expect(who.status == "HTTP/1.1 200 OK")
            #expect(String(decoding: who.body, as: UTF8.self) == "127.0.0.1")
        }
        let big = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        let mirrored = try Self.exchange(port: server.port, tls: tls, "POST /mirror HTTP/1.1", body: big)
        #expect(mirrored.status == "HTTP/1.1 200 OK")
        #expect(mirrored.body == big)
        let connection = try ClientConnection(host: "localhost", port: server.port, tls: tls, timeout: .seconds(60))
        #expect(connection.tlsVersion == "TLSv1.3")
        connection.close()
        await server.shutdown()
    }

    @Test("a WebSocket over TLS outlives a renewal: new connections get the new certificate, the open one goes on")
    func renewalUnderAnOpenWebSocket() async throws {
        let served = try Served()
        let server = try Self.start(served)
        let socket = try await WebSocketClient.connect(
            host: "localhost", port: server.port, path: "/echo", tls: try served.client())
        try await socket.send(text: "before")
        #expect(try await socket.receive() == .text("before"))

        // Renewed to a certificate of another CA, so that which one a connection gets cannot be mistaken.
        try served.renew(to: "other")
        try server.reloadTLS()
        let refused = #expect(throws: TLSError.self) {
            _ = try Self.exchange(port: server.port, tls: try served.client("ca.pem"), "GET /who HTTP/1.1")
        }
        #expect(refused?.kind == .untrusted)
        let renewed = try Self.exchange(port: server.port, tls: try served.client("other-ca.pem"), "GET /who HTTP/1.1")
        #expect(renewed.status == "HTTP/1.1 200 OK")
        try await socket.send(binary: Data(repeating: 7, count: 200_000))
        #expect(try await socket.receive() == .binary(Data(repeating: 7, count: 200_000)))

        // A renewal that left a broken file behind is refused, and the certificate in use stays.
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: served.chain))
        let broken = #expect(throws: TLSError.self) { try server.reloadTLS() }
        #expect(broken?.kind == .configuration)
        #expect(broken?.message.contains(served.chain) == true)
        let still = try Self.exchange(port: server.port, tls: try served.client("other-ca.pem"), "GET /who HTTP/1.1")
        #expect(still.status == "HTTP/1.1 200 OK")
        try await socket.send(text: "after")
        #expect(try await socket.receive() == .text("after"))

        // Shutting down says goodbye on the TLS WebSocket as on a plain one.
        await server.shutdown(gracePeriod: .seconds(5))
        #expect(try await socket.receive() == nil)
        #expect(socket.closeCode == .goingAway)
    }

    @Test("a body refused early (413) is answered over TLS while the client is still sending it, not reset")
    func anEarlyAnswerReachesTheClient() async throws {
        let served = try Served()
        let server = try Self.start(served)
        let connection = try ClientConnection(
            host: "localhost", port: server.port, tls: try served.client(), timeout: .seconds(60))
        defer { connection.close() }
        // 64 MiB announced against the 8 MiB limit: libmicrohttpd answers 413 from the head and stops reading.
        try connection.send(
            Data("POST /mirror HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(64 << 20)\r\n\r\n".utf8))
        let chunk = Data(count: 256 << 10)
        for _ in 0..<32 {
            do { try connection.send(chunk) } catch { break }
        }
        let head = try connection.receive(through: Array("\r\n".utf8), limit: 4096)
        #expect(head.map { String(decoding: $0, as: UTF8.self).hasPrefix("HTTP/1.1 413") } == true)
        await server.shutdown()
    }

    @Test("frames sent with the upgrade request, before the 101, reach the WebSocket that takes the TLS connection")
    func framesWithTheUpgrade() async throws {
        let served = try Served()
        let server = try Self.start(served)
        let connection = try ClientConnection(
            host: "localhost", port: server.port, tls: try served.client(), timeout: .seconds(60))
        defer { connection.close() }
        let key = Data((0..<16).map { UInt8($0) }).base64EncodedString()
        var bytes = Data(
            ("GET /echo HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)
        // Two frames in the same write as the request, one of them large: whatever libmicrohttpd read past the
        // request, and whatever the tunnel still held, must come to the WebSocket in order.
        let large = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        bytes.append(RawWebSocket.frame(0x1, Data("early".utf8)))
        bytes.append(RawWebSocket.frame(0x2, large))
        try connection.send(bytes)
        let head = try #require(try connection.receive(through: Array("\r\n\r\n".utf8), limit: 4096))
        let text = String(decoding: head, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 101"), "\(text)")
        #expect(text.contains(WebSocket.acceptKey(for: key)))
        // The echoes: unmasked frames from the server, "early" then the large one.
        let first = try connection.receive(exactly: 2)
        #expect(first == Data([0x81, 5]))
        #expect(try connection.receive(exactly: 5) == Data("early".utf8))
        let second = try connection.receive(exactly: 10)
        #expect(second.prefix(2) == Data([0x82, 127]))
        #expect(try connection.receive(exactly: large.count) == large)
        await server.shutdown()
    }

    /// Whether `work` returns true within ten seconds. Not awaited: work on a stopped loop would never return, and
    /// the test must fail, not hang.
    static func within10Seconds(_ work: @escaping @Sendable () async throws -> Bool) async throws -> Bool {
        let done = Atomic(false)
        let task = Task.detached { if try await work() { done.store(true, ordering: .relaxed) } }
        for _ in 0..<1000 where !done.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(10)) }
        task.cancel()
        return done.load(ordering: .relaxed)
    }

    @Test("a TLS server released on a WebSocket loop (its last socket ending there) lets go without waiting for it")
    func releasedOnItsOwnLoop() async throws {
        let served = try Served()
        // The last reference to a server can go on a loop: a consumer's WebSocket, held by its loop alone, holds the
        // server's core until it ends. Released on each loop in turn, one of them is the TLS acceptor's own; a
        // release that waited for its own loop would stop that loop for good.
        final class Holder: @unchecked Sendable {
            var server: HTTPServer?
        }
        for (index, loop) in EventLoop.all.enumerated() {
            let holder = Holder()
            holder.server = try Self.start(served)
            let port = try #require(holder.server?.port)
            #expect(
                try Self.exchange(port: port, tls: try served.client(), "GET /who HTTP/1.1").status.hasSuffix("200 OK"))
            loop.execute { holder.server = nil }
            // The release happens on the loop, soon: the port refuses connections once it has.
            var closed = false
            for _ in 0..<500 where !closed {
                closed = (try? ClientConnection(host: "127.0.0.1", port: port, tls: nil, timeout: .seconds(1))) == nil
                if !closed { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(closed, "loop \(index): the server released there still listens")
            // A stopped loop would hang what comes next.
            guard closed else { return }
        }
        // Every loop still turns: WebSockets on each of them echo.
        let plain = try HTTPServer(responder: WebSocketTests.router(), configuration: .init())
        for round in 0..<8 {
            let echoed = try await Self.within10Seconds {
                let socket = try await WebSocketClient.connect(host: "127.0.0.1", port: plain.port, path: "/echo")
                try await socket.send(text: "round \(round)")
                let back = try await socket.receive()
                await socket.close()
                return back == .text("round \(round)")
            }
            #expect(echoed, "round \(round): a WebSocket loop no longer answers")
        }
        await plain.shutdown()
    }

    @Test("a plain request, a silent client, a client past its address's share: each closed, and the server serves on")
    func clientsThatDoNotSpeakTLS() async throws {
        let served = try Served()
        var limits = ConnectionLimits()
        limits.headerTimeout = .milliseconds(300)
        let server = try Self.start(served, limits: limits)
        let tls = try served.client()

        // Plain HTTP on the TLS port: no HTTP answer, only the close (and whatever alert OpenSSL sends).
        let plain = try ClientConnection(host: "127.0.0.1", port: server.port, tls: nil, timeout: .seconds(60))
        try plain.send(Data("GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        let answer = try plain.receiveUntilClosed(limit: 1 << 16)
        #expect(!answer.starts(with: Data("HTTP/".utf8)))
        plain.close()

        // Connected, and never a ClientHello: closed at the header deadline, which counts the handshake too.
        let silent = try ClientConnection(host: "127.0.0.1", port: server.port, tls: nil, timeout: .seconds(60))
        #expect(try silent.receiveUntilClosed(limit: 1 << 16).isEmpty)
        silent.close()

        // Two held connections are the address's share: a third is closed before its handshake ends. (On a server
        // of its own, whose header deadline cannot close the two held ones first.)
        var shared = ConnectionLimits()
        shared.httpConnectionsPerAddress = 2
        let sharing = try Self.start(served, limits: shared)
        let held = try (0..<2).map { _ in
            try ClientConnection(host: "localhost", port: sharing.port, tls: tls, timeout: .seconds(60))
        }
        // libmicrohttpd counts a connection once its thread takes it up, which a busy machine may delay.
        for _ in 0..<3000 where sharing.statistics.httpConnections < 2 { try await Task.sleep(for: .milliseconds(10)) }
        let third = #expect(throws: TLSError.self) {
            _ = try ClientConnection(host: "localhost", port: sharing.port, tls: tls, timeout: .seconds(60))
        }
        #expect(third?.kind == .closed)
        for connection in held { connection.close() }
        #expect(sharing.statistics.httpConnectionsRefusedPerAddress >= 1)
        await sharing.shutdown()

        // A ClientHello cut off mid-record, then the close: the server lets it go and serves the next.
        let cut = try ClientConnection(host: "127.0.0.1", port: server.port, tls: nil, timeout: .seconds(60))
        try cut.send(Data([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]))
        cut.close()
        var answered = false
        for _ in 0..<100 where !answered {
            // The cut connection's place comes back once the server has seen it close.
            if let reply = try? Self.exchange(port: server.port, tls: tls, "GET /who HTTP/1.1") {
                answered = reply.status == "HTTP/1.1 200 OK"
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(answered)
        await server.shutdown()
    }

    @Test("a certificate that cannot be read, or an address that is none, stops the server from starting")
    func badSettings() throws {
        let served = try Served()
        var configuration = HTTPServer.Configuration()
        configuration.tls = .init(
            certificateChainFile: served.certificates.path("missing.pem"), privateKeyFile: served.key)
        let missing = #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: Self.router(), configuration: configuration)
        }
        #expect(missing?.reason.contains("missing.pem") == true)
        configuration.tls = .init(
            certificateChainFile: served.chain, privateKeyFile: served.certificates.path("other.key"))
        let mismatched = #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: Self.router(), configuration: configuration)
        }
        #expect(mismatched?.reason.contains("not the certificate's key") == true)
        configuration.tls = .init(
            certificateChainFile: served.chain, privateKeyFile: served.key, address: "example.com")
        let named = #expect(throws: HTTPError.self) {
            _ = try HTTPServer(responder: Self.router(), configuration: configuration)
        }
        #expect(named?.reason.contains("not an IP address") == true)
    }
}
