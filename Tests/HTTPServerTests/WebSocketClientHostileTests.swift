import Foundation
import HTTPServer
import SiblingsCrypto
import SiblingsTestSupport
import Testing
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// A server that does what no good server does, to our WebSocket client (the relay client's transport), plain and
/// over TLS alike: each connection accepted runs one script on a thread of its own, on a blocking socket.
final class HostileServer: Sendable {
    enum Step: Sendable {
        /// The TLS handshake, as a server (only with TLS): all of it, or the first `bytes` of its flight, then a stall.
        case handshake
        case handshakeStalledAfter(bytes: Int)
        /// Reads the upgrade request and answers 101 with the right accept key.
        case upgrade
        /// Bytes as they are, sealed when over TLS.
        case send(Data)
        /// Stops sending and keeps the connection until the client goes.
        case stall
        /// Closes the connection: `clean` sends TLS's close_notify first (over TLS); otherwise the TCP connection
        /// just ends, as when a record or a frame is cut by someone on the path.
        case close(clean: Bool)
    }

    let port: UInt16
    private let listener: Int32

    init(tls: TLSContext?, script: [Step]) throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        guard socket >= 0, bound == 0, listen(socket, 16) == 0 else {
            throw RawClient.Failure(description: "the hostile server could not listen")
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        listener = socket
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread {
            while case let fd = accept(socket, nil, nil), fd >= 0 {
                Thread.detachNewThread { Self.run(script, fd: fd, tls: tls) }
            }
        }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private static func run(_ script: [Step], fd: Int32, tls: TLSContext?) {
        defer { close(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let engine = tls.flatMap { try? TLSEngine(server: $0) }
        var inbound = Data()
        func receive() -> Bool {
            var buffer = [UInt8](repeating: 0, count: 16 << 10)
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return false }
            if let engine {
                engine.receive(Data(buffer[0..<count]))
                if engine.isHandshakeComplete { inbound.append((try? engine.read()) ?? Data()) }
            } else {
                inbound.append(contentsOf: buffer[0..<count])
            }
            return true
        }
        func raw(_ bytes: Data) {
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        func sealed(_ bytes: Data) {
            if let engine {
                try? engine.write(bytes)
                raw(engine.takeOutput())
            } else {
                raw(bytes)
            }
        }
        for step in script {
            switch step {
            case .handshake, .handshakeStalledAfter:
                guard let engine else { continue }
                var stallAfter: Int?
                if case .handshakeStalledAfter(let bytes) = step { stallAfter = bytes }
                while !engine.isHandshakeComplete {
                    guard receive() else { return }
                    guard (try? engine.handshake()) != nil else { return }
                    let flight = engine.takeOutput()
                    if let stallAfter {
                        raw(flight.prefix(stallAfter))
                        while receive() {}
                        return
                    }
                    raw(flight)
                }
            case .upgrade:
                while inbound.firstRange(of: Data("\r\n\r\n".utf8)) == nil {
                    guard receive() else { return }
                }
                let head = String(decoding: inbound, as: UTF8.self)
                let key =
                    head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                    .map { String($0.dropFirst("sec-websocket-key:".count)).trimmingCharacters(in: .whitespaces) }
                    ?? ""
                sealed(
                    Data(
                        ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Accept: \(WebSocket.acceptKey(for: key))\r\n\r\n").utf8))
            case .send(let bytes):
                sealed(bytes)
            case .stall:
                while receive() {}
                return
            case .close(let clean):
                if clean, let engine {
                    engine.close()
                    raw(engine.takeOutput())
                }
                return
            }
        }
    }
}

@Suite("our WebSocket client against a hostile server, plain and over TLS")
struct WebSocketClientHostileTests {
    static let certificates = Result { try TestCertificates() }

    /// The server's and the client's TLS contexts, or neither.
    static func contexts(_ tls: Bool) throws -> (server: TLSContext?, client: TLSContext?) {
        guard tls else { return (nil, nil) }
        let certificates = try Self.certificates.get()
        return (
            try TLSContext(
                .server(
                    certificateChainFile: certificates.path("server.pem"),
                    privateKeyFile: certificates.path("server.key"))),
            try TLSContext(.client(trust: .caFile(certificates.path("ca.pem"))))
        )
    }

    static func connect(_ server: HostileServer, _ client: TLSContext?, maximum: Int = 1000) async throws -> WebSocket {
        try await WebSocketClient.connect(
            host: "localhost", port: server.port, path: "/", maximumMessageSize: maximum,
            handshakeTimeout: .seconds(10), tls: client)
    }

    /// Reads until the socket ends; the error it ended with, or nil for a clean close.
    static func drain(_ socket: WebSocket) async -> WebSocketError? {
        do {
            while try await socket.receive() != nil {}
            return nil
        } catch let error as WebSocketError {
            return error
        } catch {
            return WebSocketError("\(error)")
        }
    }

    /// Frames no server may send, and the code the client must close with.
    static let violations: [(name: String, bytes: Data, code: UInt16)] = [
        ("a masked frame from the server", RawWebSocket.frame(0x1, Data("hi".utf8), masked: true), 1002),
        ("RSV1 set", RawWebSocket.frame(0x1, Data("hi".utf8), masked: false, rsv: 0x40), 1002),
        ("reserved opcode 3", RawWebSocket.frame(0x3, Data(), masked: false), 1002),
        ("ping over 125 bytes", RawWebSocket.frame(0x9, Data(count: 126), masked: false), 1002),
        ("text that is not UTF-8", RawWebSocket.frame(0x1, Data([0x68, 0xC3, 0x28]), masked: false), 1007),
        ("a message over the maximum", RawWebSocket.frame(0x2, Data(count: 1001), masked: false), 1009),
        ("close code 999", RawWebSocket.frame(0x8, Data([0x03, 0xE7]), masked: false), 1002),
    ]

    @Test("each violation from the server closes with its code", arguments: [false, true])
    func violations(tls: Bool) async throws {
        let (serverTLS, clientTLS) = try Self.contexts(tls)
        for violation in Self.violations {
            let server = try HostileServer(
                tls: serverTLS, script: [.handshake, .upgrade, .send(violation.bytes), .close(clean: false)])
            let socket = try await Self.connect(server, clientTLS)
            let error = await Self.drain(socket)
            #expect(
                error?.closeCode?.rawValue == violation.code,
                "\(violation.name), tls \(tls): \(String(describing: error))")
        }
    }

    @Test("a frame cut off by the server's close: an error that says the connection dropped", arguments: [false, true])
    func cutMidFrame(tls: Bool) async throws {
        let (serverTLS, clientTLS) = try Self.contexts(tls)
        // A binary frame announcing 100 bytes, of which 10 come; then the TCP connection ends (no close_notify).
        let half = RawWebSocket.frame(0x2, Data(count: 100), masked: false).prefix(12)
        let server = try HostileServer(
            tls: serverTLS,
            script: [
                .handshake, .upgrade, .send(RawWebSocket.frame(0x1, Data("first".utf8), masked: false)), .send(half),
                .close(clean: false),
            ])
        let socket = try await Self.connect(server, clientTLS)
        // The error overtakes the message queued before it: nothing of a connection that broke is mistaken for whole.
        let error = await Self.drain(socket)
        #expect(error?.reason.contains("dropped without a close frame") == true, "\(String(describing: error))")
    }

    @Test("a TLS server that stalls partway through its handshake flight: the client gives up at its timeout")
    func stallMidHandshake() async throws {
        let (serverTLS, clientTLS) = try Self.contexts(true)
        let server = try HostileServer(tls: serverTLS, script: [.handshakeStalledAfter(bytes: 40)])
        let started = ContinuousClock.now
        do {
            _ = try await WebSocketClient.connect(
                host: "localhost", port: server.port, handshakeTimeout: .milliseconds(300), tls: clientTLS)
            Issue.record("a handshake cut short completed")
        } catch let error as WebSocketError {
            #expect(error.reason.contains("TLS handshake"), "\(error)")
        }
        #expect(ContinuousClock.now - started < .seconds(60))
        // The same server stalling in the upgrade's answer instead, after a whole handshake.
        let slow = try HostileServer(
            tls: serverTLS, script: [.handshake, .send(Data("HTTP/1.1 101 Switching".utf8)), .stall])
        let error = await #expect(throws: WebSocketError.self) {
            _ = try await WebSocketClient.connect(
                host: "localhost", port: slow.port, handshakeTimeout: .milliseconds(300), tls: clientTLS)
        }
        #expect(
            error?.reason.contains("did not answer the WebSocket handshake") == true, "\(String(describing: error))")
    }

    @Test(
        "fuzzed frames from the server: the client ends each connection with a close or an error, never hangs or crashes",
        arguments: [false, true])
    func fuzzedFrames(tls: Bool) async throws {
        let (serverTLS, clientTLS) = try Self.contexts(tls)
        var random = SplitMix64(seed: tls ? 0x5EED_71 : 0x5EED_70)
        for round in 0..<300 {
            // Frame-shaped noise: a plausible first byte and length byte, then random bytes, some of it valid.
            var bytes = Data()
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let first = [0x81, 0x82, 0x01, 0x80, 0x88, 0x89, 0x8A, 0xC1, 0x83][
                    Int.random(in: 0..<9, using: &random)]
                let length = Int.random(in: 0...130, using: &random)
                bytes.append(UInt8(first))
                bytes.append(UInt8(min(length, 127)))
                bytes.append(
                    contentsOf: (0..<Int.random(in: 0...140, using: &random)).map { _ in
                        UInt8.random(in: 0...255, using: &random)
                    })
            }
            // The end: TLS's close_notify, or the TCP connection cut (a record or frame may be left half).
            let server = try HostileServer(
                tls: serverTLS, script: [.handshake, .upgrade, .send(bytes), .close(clean: round.isMultiple(of: 2))])
            let socket = try await Self.connect(server, clientTLS)
            _ = await Self.drain(socket)
        }
    }
}
