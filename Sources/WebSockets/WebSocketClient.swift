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
        let fd: Int32
        do {
            fd = try ClientConnection.connectSocket(host: host, port: port)
        } catch let failure as ClientConnection.Failure {
            throw WebSocketError(failure.message)
        }
        var handedOver = false
        defer { if !handedOver { close(fd) } }
        // The handshake must answer in time; afterwards reads wait as long as the connection lives.
        ClientConnection.setTimeouts(fd, handshakeTimeout, sending: false)
        var engine: TLSEngine?
        if let tls {
            let started = try TLSEngine(client: tls, serverName: host)
            do {
                try ClientConnection.tlsHandshake(fd, started, timeout: handshakeTimeout)
            } catch let failure as ClientConnection.Failure {
                throw WebSocketError(failure.message)
            }
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
        ClientConnection.setTimeouts(fd, .zero, sending: false)
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

    /// `host` as the Host header writes it: an IPv6 address in brackets.
    private static func hostHeader(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
