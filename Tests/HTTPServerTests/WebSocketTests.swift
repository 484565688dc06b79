import Foundation
import HTTPServer
import SiblingsTestSupport
import Synchronization
import Testing
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// A WebSocket peer that writes whatever bytes a test gives it, to break the protocol on purpose. Blocking:
/// use it inside ``onThread(_:)``.
final class RawWebSocket {
    let fd: Int32
    private var buffer = Data()

    /// Connects and upgrades to `path`; throws unless the server answers 101.
    init(port: UInt16, path: String) throws {
        fd = try RawClient.connect(port: port).get()
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        try send(
            Data(
                ("GET \(path) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        while buffer.range(of: Data("\r\n\r\n".utf8)) == nil {
            guard try fill() else { throw RawClient.Failure(description: "no handshake answer") }
        }
        let end = buffer.range(of: Data("\r\n\r\n".utf8))!
        let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
        buffer = Data(buffer[end.upperBound...])
        guard head.hasPrefix("HTTP/1.1 101"), head.contains(WebSocket.acceptKey(for: key)) else {
            throw RawClient.Failure(description: "not upgraded: \(head)")
        }
    }

    deinit { close(fd) }

    func send(_ bytes: Data) throws {
        try bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw RawClient.Failure(description: "send: errno \(errno)") }
                sent += n
            }
        }
    }

    /// A client frame: masked unless told otherwise, FIN and RSV bits and the opcode as given.
    static func frame(
        _ opcode: UInt8, _ payload: Data, fin: Bool = true, masked: Bool = true, rsv: UInt8 = 0,
        lengthOverride: UInt8? = nil
    ) -> Data {
        var frame = Data([(fin ? 0x80 : 0) | rsv | opcode])
        let mask: UInt8 = masked ? 0x80 : 0
        if let lengthOverride {
            frame.append(mask | lengthOverride)
            if lengthOverride == 126 {
                frame.append(contentsOf: [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)])
            }
        } else if payload.count < 126 {
            frame.append(mask | UInt8(payload.count))
        } else if payload.count < 65536 {
            frame.append(mask | 126)
            frame.append(contentsOf: [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)])
        } else {
            frame.append(mask | 127)
            frame.append(contentsOf: (0..<8).reversed().map { UInt8(truncatingIfNeeded: payload.count >> ($0 * 8)) })
        }
        guard masked else { return frame + payload }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame.append(contentsOf: key)
        frame.append(contentsOf: payload.enumerated().map { $0.element ^ key[$0.offset & 3] })
        return frame
    }

    @discardableResult
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n < 0 { throw RawClient.Failure(description: "recv: errno \(errno)") }
        if n == 0 { return false }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    private func take(_ count: Int) throws -> Data {
        while buffer.count < count {
            guard try fill() else { throw RawClient.Failure(description: "the connection closed mid-frame") }
        }
        defer { buffer = Data(buffer.dropFirst(count)) }
        return Data(buffer.prefix(count))
    }

    /// The next server frame (which must be unmasked): FIN, opcode and payload.
    func readFrame() throws -> (fin: Bool, opcode: UInt8, payload: Data) {
        let head = try take(2)
        #expect(head[1] & 0x80 == 0, "the server masked a frame")
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            length = try take(2).reduce(0) { $0 << 8 | Int($1) }
        } else if length == 127 {
            length = try take(8).reduce(0) { $0 << 8 | Int($1) }
        }
        return (head[0] & 0x80 != 0, head[0] & 0x0F, try take(length))
    }

    /// Reads frames until a close frame, and returns its code; then expects the server to close the TCP
    /// connection.
    func expectClose() throws -> UInt16? {
        while true {
            let frame = try readFrame()
            guard frame.opcode == 0x8 else { continue }
            let code = frame.payload.count >= 2 ? UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]) : nil
            try? send(Self.frame(0x8, frame.payload.prefix(2)))
            return code
        }
    }

    /// Whether the server has closed the connection (reads to EOF, discarding).
    func closedByServer() -> Bool {
        while true {
            guard let more = try? fill() else { return true }
            if !more { return true }
        }
    }
}

@Suite("WebSocket (RFC 6455) server and client")
struct WebSocketTests {
    static func router() -> Router {
        var router = Router()
        router.webSocket("/echo", maximumMessageSize: 4 << 20) { _, socket in
            while let message = try await socket.receive() {
                if case .text(let text) = message, text.hasPrefix("close ") {
                    await socket.close(code: WebSocketCloseCode(UInt16(text.dropFirst(6)) ?? 1000), reason: "asked to")
                    return
                }
                switch message {
                case .text(let text): try await socket.send(text: text)
                case .binary(let data): try await socket.send(binary: data)
                }
            }
        }
        router.webSocket("/small", maximumMessageSize: 1000) { _, socket in
            for try await message in socket {
                if case .binary(let data) = message { try await socket.send(binary: data) }
            }
        }
        router.webSocket("/greet") { request, socket in
            try await socket.send(text: "hello \(request.query("name") ?? "")")
            try await socket.send(text: "bye")
        }
        router.webSocket("/fail") { _, _ in throw HTTPError(.badRequest, .badRequest, "nope") }
        router.webSocket("/batch") { _, socket in
            try await socket.send(binaries: [Data([1]), Data(repeating: 2, count: 300), Data(), Data([3])])
            try await socket.send(binaries: [])
        }
        return router
    }

    static func start() throws -> HTTPServer { try HTTPServer(responder: router()) }

    @Test("Sec-WebSocket-Accept is base64(SHA-1(key + GUID)): RFC 6455's example")
    func acceptKey() {
        #expect(WebSocket.acceptKey(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test("bad upgrades: 426 without an upgrade or with another version, 400 for a bad key")
    func badUpgrades() async throws {
        let router = Self.router()
        let plain = await router.test(.get, "/echo")
        #expect(plain.status == .upgradeRequired)
        #expect(plain.headers["Sec-WebSocket-Version"] == "13")
        let upgrade: HTTPHeaders = ["Upgrade": "websocket", "Connection": "keep-alive, Upgrade"]
        var version8 = upgrade
        version8["Sec-WebSocket-Version"] = "8"
        version8["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
        let old = await router.test(.get, "/echo", headers: version8)
        #expect(old.status == .upgradeRequired)
        #expect(old.headers["Sec-WebSocket-Version"] == "13")
        var badKey = upgrade
        badKey["Sec-WebSocket-Version"] = "13"
        badKey["Sec-WebSocket-Key"] = "c2hvcnQ="
        #expect(await router.test(.get, "/echo", headers: badKey).status == .badRequest)
        var good = badKey
        good["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
        let accepted = await router.test(.get, "/echo", headers: good)
        #expect(accepted.status == .switchingProtocols)
        #expect(accepted.headers["Sec-WebSocket-Accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(await router.test(.post, "/echo").status == .methodNotAllowed)

        let server = try Self.start()
        let reply = try await RawClient.request(port: server.port, head: "GET /echo HTTP/1.1\r\nHost: x")
        #expect(reply.status == 426)
        await #expect(throws: WebSocketError.self) {
            _ = try await WebSocketClient.connect(port: server.port, path: "/nope")
        }
        await server.shutdown()
    }

    @Test("the client gives up on a server that accepts the connection and never answers the handshake")
    func handshakeTimeout() async throws {
        // A listening socket nobody accepts on: the kernel completes the TCP handshake, nothing answers.
        let (fd, port) = try #require(loopbackListener(), "no loopback listener (errno \(errno))")
        defer { close(fd) }
        let started = ContinuousClock.now
        let timedOut = await #expect(throws: WebSocketError.self) {
            _ = try await WebSocketClient.connect(port: port, path: "/", handshakeTimeout: .milliseconds(200))
        }
        #expect(timedOut?.reason.contains("did not answer the WebSocket handshake within") == true)
        // It waited for the limit, not for ever (the upper bound is a hang's, not a timing check).
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        #expect(ContinuousClock.now - started < .seconds(120))
        let error = await #expect(throws: WebSocketError.self) {
            _ = try await WebSocketClient.connect(port: port, path: "/", handshakeTimeout: .zero)
        }
        #expect(error?.reason.contains("positive") == true)
    }

    @Test("echo of text and binary with 7-, 16- and 64-bit lengths through our client")
    func echo() async throws {
        let server = try Self.start()
        let socket = try await WebSocketClient.connect(port: server.port, path: "/echo", maximumMessageSize: 4 << 20)
        for text in ["", "hello", "häagen-dazs ✓", String(repeating: "x", count: 300)] {
            try await socket.send(text: text)
            #expect(try await socket.receive() == .text(text))
        }
        for size in [0, 125, 126, 65535, 65536, 3 << 20] {
            let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) })
            try await socket.send(binary: data)
            #expect(try await socket.receive() == .binary(data), "size \(size)")
        }
        try await socket.ping(Data("ping".utf8))
        try await socket.send(text: "after ping")
        #expect(try await socket.receive() == .text("after ping"))
        await socket.close()
        #expect(socket.closeCode == .normalClosure)
        #expect(try await socket.receive() == nil)
        await #expect(throws: WebSocketError.self) { try await socket.send(text: "late") }
        await server.shutdown()
    }

    @Test("the handler's request, messages the server sends first, and its close when it returns")
    func serverSends() async throws {
        let server = try Self.start()
        let socket = try await WebSocketClient.connect(port: server.port, path: "/greet?name=ada")
        #expect(try await socket.receive() == .text("hello ada"))
        #expect(try await socket.receive() == .text("bye"))
        #expect(try await socket.receive() == nil)
        #expect(socket.closeCode == .normalClosure)

        let failing = try await WebSocketClient.connect(port: server.port, path: "/fail")
        #expect(try await failing.receive() == nil)
        #expect(failing.closeCode == .internalError)

        let closing = try await WebSocketClient.connect(port: server.port, path: "/echo")
        try await closing.send(text: "close 4000")
        #expect(try await closing.receive() == nil)
        #expect(closing.closeCode == WebSocketCloseCode(4000))
        await server.shutdown()
    }

    @Test("several binary messages sent with one write arrive as separate messages, in order")
    func batchedSend() async throws {
        let server = try Self.start()
        let socket = try await WebSocketClient.connect(port: server.port, path: "/batch")
        #expect(try await socket.receive() == .binary(Data([1])))
        #expect(try await socket.receive() == .binary(Data(repeating: 2, count: 300)))
        #expect(try await socket.receive() == .binary(Data()))
        #expect(try await socket.receive() == .binary(Data([3])))
        #expect(try await socket.receive() == nil)
        #expect(socket.closeCode == .normalClosure)
        await server.shutdown()
    }

    @Test("fragmented messages with a ping between fragments; ping answered with pong")
    func fragmentsAndPing() async throws {
        let server = try Self.start()
        try await onThread {
            let raw = try RawWebSocket(port: server.port, path: "/echo")
            try raw.send(RawWebSocket.frame(0x9, Data("abc".utf8)))
            let pong = try raw.readFrame()
            #expect(pong.opcode == 0xA)
            #expect(pong.payload == Data("abc".utf8))

            try raw.send(RawWebSocket.frame(0x1, Data("Hel".utf8), fin: false))
            try raw.send(RawWebSocket.frame(0x0, Data("lo, ".utf8), fin: false))
            try raw.send(RawWebSocket.frame(0x9, Data("mid".utf8)))
            try raw.send(RawWebSocket.frame(0x0, Data("wörld".utf8)))
            let midPong = try raw.readFrame()
            #expect(midPong.opcode == 0xA && midPong.payload == Data("mid".utf8))
            let echo = try raw.readFrame()
            #expect(echo.opcode == 0x1 && echo.fin)
            #expect(String(decoding: echo.payload, as: UTF8.self) == "Hello, wörld")

            // A UTF-8 sequence split across fragments is fine: validity is judged on the whole message.
            let snowman = Data("☃".utf8)
            try raw.send(RawWebSocket.frame(0x1, snowman.prefix(1), fin: false))
            try raw.send(RawWebSocket.frame(0x0, snowman.dropFirst()))
            #expect(try raw.readFrame().payload == snowman)

            try raw.send(RawWebSocket.frame(0x2, Data([1, 2]), fin: false))
            try raw.send(RawWebSocket.frame(0x0, Data([3]), fin: false))
            try raw.send(RawWebSocket.frame(0x0, Data([4])))
            let binary = try raw.readFrame()
            #expect(binary.opcode == 0x2 && binary.payload == Data([1, 2, 3, 4]))

            // The close handshake: our code comes back, and the server closes the TCP connection.
            try raw.send(RawWebSocket.frame(0x8, Data([0x0F, 0xA0]) + Data("bye".utf8)))
            let close = try raw.readFrame()
            #expect(close.opcode == 0x8)
            #expect(close.payload.prefix(2) == Data([0x0F, 0xA0]))
            #expect(raw.closedByServer())
        }
        await server.shutdown()
    }

    /// Each violation, on a fresh connection, and the close code the server must answer it with.
    static let violations: [(name: String, path: String, bytes: Data, code: UInt16)] = [
        ("unmasked frame", "/echo", RawWebSocket.frame(0x1, Data("hi".utf8), masked: false), 1002),
        ("RSV1 set", "/echo", RawWebSocket.frame(0x1, Data("hi".utf8), rsv: 0x40), 1002),
        ("RSV3 set", "/echo", RawWebSocket.frame(0x2, Data([1]), rsv: 0x10), 1002),
        ("reserved data opcode 3", "/echo", RawWebSocket.frame(0x3, Data()), 1002),
        ("reserved control opcode 0xB", "/echo", RawWebSocket.frame(0xB, Data()), 1002),
        ("fragmented ping", "/echo", RawWebSocket.frame(0x9, Data("x".utf8), fin: false), 1002),
        ("ping over 125 bytes", "/echo", RawWebSocket.frame(0x9, Data(count: 126)), 1002),
        ("continuation with nothing to continue", "/echo", RawWebSocket.frame(0x0, Data("x".utf8)), 1002),
        (
            "new message inside a fragmented one", "/echo",
            RawWebSocket.frame(0x1, Data("a".utf8), fin: false) + RawWebSocket.frame(0x1, Data("b".utf8)), 1002
        ),
        ("close with a 1-byte payload", "/echo", RawWebSocket.frame(0x8, Data([3])), 1002),
        ("close code 1005 on the wire", "/echo", RawWebSocket.frame(0x8, Data([0x03, 0xED])), 1002),
        ("close code 999", "/echo", RawWebSocket.frame(0x8, Data([0x03, 0xE7])), 1002),
        ("text that is not UTF-8", "/echo", RawWebSocket.frame(0x1, Data([0x68, 0xC3, 0x28])), 1007),
        ("close reason not UTF-8", "/echo", RawWebSocket.frame(0x8, Data([0x03, 0xE8, 0xFF, 0xFE])), 1007),
        ("message over the maximum", "/small", RawWebSocket.frame(0x2, Data(count: 1001)), 1009),
        (
            "fragments adding up past the maximum", "/small",
            RawWebSocket.frame(0x2, Data(count: 600), fin: false) + RawWebSocket.frame(0x0, Data(count: 600)), 1009
        ),
        (
            "64-bit length past the maximum, payload never sent", "/small",
            Data([0x82, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4]), 1009
        ),
    ]

    @Test("every protocol violation closes with its code", arguments: 0..<violations.count)
    func violation(_ index: Int) async throws {
        let violation = Self.violations[index]
        let server = try Self.start()
        try await onThread {
            let raw = try RawWebSocket(port: server.port, path: violation.path)
            try raw.send(violation.bytes)
            #expect(try raw.expectClose() == violation.code, "\(violation.name)")
            #expect(raw.closedByServer(), "\(violation.name)")
        }
        await server.shutdown()
    }

    @Test("a message of exactly the maximum passes; one byte more closes with 1009")
    func maximumMessageSize() async throws {
        let server = try Self.start()
        let socket = try await WebSocketClient.connect(port: server.port, path: "/small")
        try await socket.send(binary: Data(count: 1000))
        #expect(try await socket.receive() == .binary(Data(count: 1000)))
        try await socket.send(binary: Data(count: 1001))
        #expect(try await socket.receive() == nil)
        #expect(socket.closeCode == .messageTooBig)

        // Our client enforces its own maximum on what the server sends.
        let strict = try await WebSocketClient.connect(port: server.port, path: "/echo", maximumMessageSize: 100)
        try await strict.send(binary: Data(count: 101))
        await #expect(throws: WebSocketError.self) { _ = try await strict.receive() }
        #expect(strict.closeCode == .messageTooBig)
        await server.shutdown()
    }

    @Test("shutdown closes open WebSockets with 1001")
    func shutdownClosesSockets() async throws {
        let server = try Self.start()
        let socket = try await WebSocketClient.connect(port: server.port, path: "/echo")
        try await socket.send(text: "one")
        #expect(try await socket.receive() == .text("one"))
        await server.shutdown()
        #expect(try await socket.receive() == nil)
        #expect(socket.closeCode == .goingAway)
    }
}

/// What a slow handler saw of a socket: how many messages, and how the stream ended.
final class SlowReaderTally: Sendable {
    let result = Mutex<(messages: Int, ending: String)?>(nil)
    let done = DispatchSemaphore(value: 0)
}

@Suite("WebSocket: a peer that sends everything and hangs up while the server is behind")
struct WebSocketHangUpTests {
    @Test("every message and the close frame behind a full queue are delivered, then the end")
    func messagesBehindAFullQueueSurviveTheHangUp() async throws {
        let tally = SlowReaderTally()
        var router = Router()
        router.webSocket("/slow") { _, socket in
            var count = 0
            var ending = "closed"
            do {
                for try await _ in socket {
                    try await Task.sleep(for: .milliseconds(10))
                    count += 1
                }
            } catch {
                ending = "\(error)"
            }
            tally.result.withLock { $0 = (count, ending) }
            tally.done.signal()
        }
        let server = try HTTPServer(responder: router)
        let port = server.port
        let result = try await onThread { () -> (messages: Int, ending: String)? in
            let raw = try RawWebSocket(port: port, path: "/slow")
            // 40 messages (past the queue of 16), a close frame, and our half of the TCP connection closed.
            var burst = Data()
            for index in 0..<40 { burst += RawWebSocket.frame(0x1, Data("m\(index)".utf8)) }
            burst += RawWebSocket.frame(0x8, Data([0x03, 0xE8]))
            try raw.send(burst)
            shutdown(raw.fd, Int32(SHUT_WR))
            guard tally.done.wait(timeout: .now() + 120) == .success else { return nil }
            return tally.result.withLock { $0 }
        }
        #expect(result?.messages == 40, "\(String(describing: result))")
        #expect(result?.ending == "closed", "\(String(describing: result))")
        await server.shutdown(gracePeriod: .seconds(1))
    }
}

@Suite("WebSocket keepalive: a quiet peer is pinged, a silent one closed")
struct WebSocketKeepaliveTests {
    static func start() throws -> HTTPServer {
        var configuration = HTTPServer.Configuration()
        // A second to answer: the suite loads two cores, and a client's answer may wait that long for its loop.
        configuration.webSocketKeepalive = WebSocketKeepalive(interval: .milliseconds(100), timeout: .seconds(1))
        return try HTTPServer(responder: WebSocketTests.router(), configuration: configuration)
    }

    @Test("a peer that answers no ping is closed with 1001; one that answers stays")
    func silentPeerIsClosed() async throws {
        let server = try Self.start()
        let port = server.port
        let (opcodes, closeCode) = try await onThread { () -> ([UInt8], UInt16?) in
            let raw = try RawWebSocket(port: port, path: "/echo")
            var opcodes: [UInt8] = []
            while true {
                let frame = try raw.readFrame()
                opcodes.append(frame.opcode)
                if frame.opcode == 0x8 {
                    let code = frame.payload.count >= 2 ? UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]) : nil
                    #expect(raw.closedByServer())
                    return (opcodes, code)
                }
            }
        }
        #expect(opcodes.first == 0x9, "the server closed before it pinged: \(opcodes)")
        #expect(closeCode == 1001)
        // Counted as the server ends the connection, which may be just after the close frame reached us.
        for _ in 0..<300 where server.statistics.webSocketsSilent == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(server.statistics.webSocketsSilent == 1)

        // Our client answers pings, so across many intervals (past the point where a silent one is closed) the
        // connection stays and still echoes.
        let socket = try await WebSocketClient.connect(port: port, path: "/echo")
        try await Task.sleep(for: .milliseconds(2500))
        try await socket.send(text: "still here")
        #expect(try await socket.receive() == .text("still here"))
        await socket.close()
        #expect(server.statistics.webSocketsSilent == 1)
        await server.shutdown(gracePeriod: .seconds(1))
    }
}
