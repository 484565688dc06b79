import Foundation
public import SiblingsCrypto
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// A WebSocket client (RFC 6455) over a TCP socket, plain (`ws://`) or with TLS (`wss://`, a ``TLSContext``'s
/// checks: the chain, the name, pins): a device's relay session and the tests use it. Frames it sends are masked with a fresh random key each; frames it receives must not be.
public enum WebSocketClient {
    /// Connects to `ws://host:port/path` (`host` a name or an IPv4 or IPv6 address; each address it resolves to is
    /// tried in turn), performs the opening handshake (checking the server's answer as RFC 6455, section 4.1,
    /// asks: ``WebSocketUpgradeResponse``), and returns the open socket, with the same message API as the
    /// server's.
    ///
    /// `headers` are added to the upgrade request (an `Authorization`, say). The server must answer the
    /// handshake within `handshakeTimeout`; afterwards reads wait as long as the connection lives. Throws
    /// ``WebSocketError`` saying what failed: the connection, or a server that answered other than 101 (its
    /// status and body are in the reason).
    ///
    /// With `tls`, the connection is `wss://`: the TLS handshake comes first, within `handshakeTimeout` too, and
    /// the server's certificate must be valid for `host`; a TLS failure throws ``TLSError`` saying which.
    public static func connect(
        host: String = "127.0.0.1", port: UInt16, path: String = "/", headers: [(name: String, value: String)] = [],
        maximumMessageSize: Int = 1 << 20,
        handshakeTimeout: Duration = .seconds(10), tls: TLSContext? = nil
    ) async throws -> WebSocket {
        try await connect(
            host: host, port: port, path: path, headers: headers, maximumMessageSize: maximumMessageSize,
            handshakeTimeout: handshakeTimeout, tls: tls, make: nil)
    }

    /// Connects as ``connect(port:path:headers:maximumMessageSize:handshakeTimeout:)`` does; the messages go
    /// to the ``WebSocketConsumer`` that `consumer` makes for the open socket, on its event-loop thread.
    public static func connect(
        host: String = "127.0.0.1", port: UInt16, path: String = "/", headers: [(name: String, value: String)] = [],
        maximumMessageSize: Int = 1 << 20,
        handshakeTimeout: Duration = .seconds(10), tls: TLSContext? = nil,
        consumer: @escaping @Sendable (WebSocket) -> any WebSocketConsumer
    ) async throws -> WebSocket {
        try await connect(
            host: host, port: port, path: path, headers: headers, maximumMessageSize: maximumMessageSize,
            handshakeTimeout: handshakeTimeout, tls: tls, make: consumer)
    }

    private static func connect(
        host: String, port: UInt16, path: String, headers: [(name: String, value: String)], maximumMessageSize: Int,
        handshakeTimeout: Duration, tls: TLSContext?,
        make: (@Sendable (WebSocket) -> any WebSocketConsumer)?
    ) async throws -> WebSocket {
        if let reason = EventLoop.unavailable { throw WebSocketError(reason) }
        guard handshakeTimeout >= .microseconds(1) else {
            throw WebSocketError("handshakeTimeout is \(handshakeTimeout); give the server a positive time to answer")
        }
        // The handshake blocks on the socket: on a thread of its own, not the Swift concurrency pool.
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try handshake(
                            host: host, port: port, path: path, headers: headers,
                            maximumMessageSize: maximumMessageSize,
                            handshakeTimeout: handshakeTimeout, tls: tls, make: make)
                    })
            }
        }
    }

    private static func handshake(
        host: String, port: UInt16, path: String, headers: [(name: String, value: String)], maximumMessageSize: Int,
        handshakeTimeout: Duration, tls: TLSContext?,
        make: (@Sendable (WebSocket) -> any WebSocketConsumer)?
    ) throws -> WebSocket {
        let fd = try connectSocket(host: host, port: port)
        var handedOver = false
        defer { if !handedOver { close(fd) } }
        // The handshake must answer in time; afterwards reads wait as long as the connection lives.
        setReceiveTimeout(fd, handshakeTimeout)
        var engine: TLSEngine?
        if let tls {
            let started = try TLSEngine(client: tls, serverName: host)
            try tlsHandshake(fd, started, timeout: handshakeTimeout)
            engine = started
        }

        var generator = SystemRandomNumberGenerator()
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
        var request = "GET \(path) HTTP/1.1\r\nHost: \(hostHeader(host)):\(port)\r\nUpgrade: websocket\r\n"
        request += "Connection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        var upgrade = Data(request.utf8)
        if let engine {
            try engine.write(upgrade)
            upgrade = engine.takeOutput()
        }
        guard Socket.sendAll(fd, upgrade) else {
            throw WebSocketError("the connection dropped while sending the upgrade request (errno \(errno))")
        }

        var reader = Socket.Reader(fd: fd, buffered: [], tls: engine)
        var head: [UInt8] = []
        while !head.ends(with: [13, 10, 13, 10]) {
            errno = 0
            guard head.count < WebSocketUpgradeResponse.maximumHeadByteCount, let byte = reader.read(1) else {
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw WebSocketError(
                        "the server did not answer the WebSocket handshake within \(handshakeTimeout); "
                            + "is it overloaded, or not a WebSocket server?")
                }
                if let failure = reader.tlsFailure { throw failure }
                throw WebSocketError("the server closed the connection or sent no complete response head")
            }
            head += byte
        }
        let response = WebSocketUpgradeResponse(head: head)
        let body = response.status == 101 ? [] : response.refusalBodyByteCount.flatMap { reader.read($0) } ?? []
        // Subprotocol names compare exactly (RFC 6455, section 4.1); a caller may offer some in `headers`.
        let offered = headers.filter { $0.name.lowercased() == "sec-websocket-protocol" }.flatMap {
            $0.value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        try response.validate(key: key, offeredProtocols: offered, body: body)
        setReceiveTimeout(fd, .zero)
        // From here the socket is read by an event loop, which never waits on it.
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw WebSocketError("could not make the socket non-blocking (errno \(errno))")
        }
        let remaining = Data(reader.remaining)
        reader.tls = nil
        let socket = WebSocket(
            role: .client, fd: fd, maximumMessageSize: maximumMessageSize, initialBytes: remaining, tls: engine
        ) { _ in _ = Glibc.close(fd) }
        handedOver = true
        socket.start(consumer: make?(socket))
        return socket
    }

    /// Runs the TLS handshake on the blocking socket `fd` (its receive timeout set to `timeout`): throws the
    /// ``TLSError`` that says why it failed, or a ``WebSocketError`` for a server that stalls or drops.
    private static func tlsHandshake(_ fd: Int32, _ engine: TLSEngine, timeout: Duration) throws {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let done: Bool
            do {
                done = try engine.handshake()
            } catch {
                // The alert that says why goes to the server too.
                _ = Socket.sendAll(fd, engine.takeOutput())
                throw error
            }
            let out = engine.takeOutput()
            guard out.isEmpty || Socket.sendAll(fd, out) else {
                throw WebSocketError("the connection dropped during the TLS handshake (errno \(errno))")
            }
            if done { return }
            errno = 0
            let n = chunk.withUnsafeMutableBytes { bytes in
                retryingInterrupts { Glibc.recv(fd, bytes.baseAddress, bytes.count, 0) }
            }
            if n > 0 {
                engine.receive(Data(chunk[0..<n]))
                continue
            }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                throw WebSocketError(
                    "the server did not complete the TLS handshake within \(timeout); is it a TLS server, or overloaded?"
                )
            }
            // The peer closed: what it sent (a plain HTTP answer, an alert) may say why.
            if try engine.handshake() { return }
            throw TLSError(.closed, "the server closed the connection during the TLS handshake")
        }
    }

    /// A connected TCP socket to `host`:`port`, trying each address `getaddrinfo(3)` gives; throws naming what
    /// failed.
    private static func connectSocket(host: String, port: UInt16) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw WebSocketError(
                "could not resolve \(host) (\(String(cString: gai_strerror(resolved)))); check the server's address")
        }
        defer { freeaddrinfo(first) }
        var lastError: Int32 = 0
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let address = next {
            next = address.pointee.ai_next
            let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
            guard fd >= 0 else {
                lastError = errno
                continue
            }
            if Glibc.connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 { return fd }
            lastError = errno
            close(fd)
        }
        throw WebSocketError(
            "could not connect to \(host):\(port) (\(String(cString: strerror(lastError)))); is the server running "
                + "there?")
    }

    /// `host` as the Host header writes it: an IPv6 address in brackets.
    private static func hostHeader(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    /// `SO_RCVTIMEO`: reads give up after `duration` (`.zero`: they wait as long as the connection lives).
    private static func setReceiveTimeout(_ fd: Int32, _ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
