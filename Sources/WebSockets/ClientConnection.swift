import Foundation
public import SiblingsCrypto
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP connection a client opens, plain or with TLS (a ``TLSContext``'s checks: the chain, the name,
/// the pins): what ``WebSocketClient``'s handshake and a device's HTTP transport stand on. Reads and writes wait at
/// most the connection's `timeout` each; use it from a thread of its own, never from the Swift concurrency pool.
public final class ClientConnection: @unchecked Sendable {
    /// The host it reached, as asked for (for messages).
    public let host: String
    public let port: UInt16
    let fd: Int32
    /// The TLS connection on top of the socket, if any.
    let tls: TLSEngine?
    /// Plaintext read from the socket and not yet taken.
    private var buffered: [UInt8] = []
    private var start = 0
    private var chunk = [UInt8](repeating: 0, count: 64 << 10)
    private var closed = false

    /// Why a ``ClientConnection`` could not be opened or went on no further (TLS failures are ``TLSError``).
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            /// The host name does not resolve.
            case unresolved
            /// Nothing accepted the connection.
            case refused
            /// The peer did not answer within the timeout.
            case timedOut
            /// The connection broke or the peer closed it.
            case dropped
        }
        public let kind: Kind
        public let message: String
        public var description: String { message }
    }

    /// Connects to `host`:`port` (a name or an IPv4 or IPv6 address; each address it resolves to is tried in turn)
    /// and, with `tls`, runs the TLS handshake, checking the server's certificate for `host`. Each read and write
    /// waits at most `timeout`. Throws ``Failure`` or ``TLSError``, each saying what failed.
    public init(host: String, port: UInt16, tls: TLSContext?, timeout: Duration) throws {
        self.host = host
        self.port = port
        let fd = try Self.connectSocket(host: host, port: port)
        self.fd = fd
        Self.setTimeouts(fd, timeout)
        var engine: TLSEngine?
        do {
            if let tls {
                engine = try TLSEngine(client: tls, serverName: host)
                try Self.tlsHandshake(fd, engine!, timeout: timeout)
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.tls = engine
    }

    deinit { close() }

    /// The TLS version agreed (`TLSv1.3`), or nil for a plain connection.
    public var tlsVersion: String? { tls?.protocolVersion }
    /// The key-exchange group agreed (`X25519MLKEM768`, `X25519`), or nil for a plain connection.
    public var tlsGroup: String? { tls?.agreedGroup }

    /// Sends all of `bytes` (sealed first, with TLS).
    public func send(_ bytes: Data) throws {
        var out = bytes
        if let tls {
            try tls.write(bytes)
            out = tls.takeOutput()
        }
        guard Socket.sendAll(fd, out) else { throw dropped("while sending", errno: errno) }
    }

    /// Some bytes, waiting for them; nil once the peer closed the connection.
    public func receive() throws -> Data? {
        guard start == buffered.count else {
            defer {
                buffered = []
                start = 0
            }
            return Data(buffered[start...])
        }
        return try readSocket()
    }

    /// Whether the peer closed the connection without TLS's close_notify (what a cut by an attacker looks like).
    public private(set) var endedUncleanly = false

    /// Exactly `count` bytes; throws ``Failure`` (`.dropped`) if the connection ends first.
    public func receive(exactly count: Int) throws -> Data {
        while buffered.count - start < count {
            guard let more = try readSocket() else {
                throw Failure(kind: .dropped, message: "\(host) closed the connection in the middle of an answer")
            }
            buffered.append(contentsOf: more)
        }
        defer { start += count }
        return Data(buffered[start..<start + count])
    }

    /// The bytes up to and including the first `delimiter`, at most `limit` of them; nil if the connection closed
    /// before any byte came.
    public func receive(through delimiter: [UInt8], limit: Int) throws -> Data? {
        var searched = start
        while true {
            if let end = Self.find(delimiter, in: buffered, from: max(start, searched - delimiter.count + 1)) {
                defer { start = end }
                return Data(buffered[start..<end])
            }
            searched = buffered.count
            guard buffered.count - start <= limit else {
                throw Failure(kind: .dropped, message: "\(host) sent a line longer than \(limit) bytes")
            }
            guard let more = try readSocket() else {
                if buffered.count == start { return nil }
                throw Failure(kind: .dropped, message: "\(host) closed the connection in the middle of an answer")
            }
            buffered.append(contentsOf: more)
        }
    }

    /// Everything until the peer closes; over TLS, the close must be TLS's own (close_notify), or the answer may
    /// have been cut short by someone on the path.
    public func receiveUntilClosed(limit: Int) throws -> Data {
        var out = Data(buffered[start...])
        buffered = []
        start = 0
        while let more = try readSocket() {
            out += more
            guard out.count <= limit else {
                throw Failure(kind: .dropped, message: "\(host) sent an answer longer than \(limit) bytes")
            }
        }
        if endedUncleanly {
            throw Failure(
                kind: .dropped, message: "the TLS connection to \(host) ended without closing: the answer may be cut")
        }
        return out
    }

    /// Whether the connection may carry another exchange: nothing unread, and the peer has not closed it.
    public var isReusable: Bool {
        guard !closed, start == buffered.count else { return false }
        var byte: UInt8 = 0
        let n = Glibc.recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// Closes the connection (with close_notify, over TLS).
    public func close() {
        guard !closed else { return }
        closed = true
        if let tls {
            tls.close()
            _ = Socket.sendAll(fd, tls.takeOutput())
        }
        Glibc.close(fd)
    }

    /// Bytes from the socket (opened, with TLS), waiting for them; nil once the peer closed.
    private func readSocket() throws -> Data? {
        while true {
            // The close_notify may have come in the record after the last data taken.
            if let tls, tls.receivedCloseNotify { return nil }
            errno = 0
            let n = chunk.withUnsafeMutableBytes { bytes in
                retryingInterrupts { Glibc.recv(fd, bytes.baseAddress, bytes.count, 0) }
            }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw Failure(kind: .timedOut, message: "\(host) did not answer in time")
                }
                throw dropped("while receiving", errno: errno)
            }
            guard let tls else { return n == 0 ? nil : Data(chunk[0..<n]) }
            if n == 0 {
                endedUncleanly = true
                return nil
            }
            tls.receive(Data(chunk[0..<n]))
            do {
                let plaintext = try tls.read()
                // A record may carry no application data (a session ticket): read on.
                if !plaintext.isEmpty { return plaintext }
                let handshake = tls.takeOutput()
                if !handshake.isEmpty, !Socket.sendAll(fd, handshake) { throw dropped("while receiving", errno: errno) }
            } catch let error as TLSError where error.kind == .closed && tls.receivedCloseNotify {
                return nil
            }
        }
    }

    private func dropped(_ when: String, errno code: Int32) -> Failure {
        Failure(
            kind: .dropped, message: "the connection to \(host) dropped \(when) (\(String(cString: strerror(code))))")
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = max(from, 0)
        while index + needle.count <= haystack.count {
            if haystack[index] == needle[0], Array(haystack[index..<index + needle.count]) == needle {
                return index + needle.count
            }
            index += 1
        }
        return nil
    }

    /// Runs the TLS handshake on the blocking socket `fd` (its timeouts set to `timeout`): throws the ``TLSError``
    /// that says why it failed, or a ``Failure`` for a server that stalls or drops.
    static func tlsHandshake(_ fd: Int32, _ engine: TLSEngine, timeout: Duration) throws {
        let server = engine.serverName ?? "the server"
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
                throw Failure(kind: .dropped, message: "the connection to \(server) dropped during the TLS handshake")
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
                throw Failure(
                    kind: .timedOut,
                    message: "\(server) did not complete the TLS handshake within \(timeout); is it a TLS server, or "
                        + "overloaded?")
            }
            // The peer closed: what it sent (a plain HTTP answer, an alert) may say why.
            if try engine.handshake() { return }
            throw TLSError(.closed, "\(server) closed the connection during the TLS handshake")
        }
    }

    /// A connected TCP socket to `host`:`port`, trying each address `getaddrinfo(3)` gives; throws naming what
    /// failed.
    static func connectSocket(host: String, port: UInt16) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw Failure(
                kind: .unresolved,
                message: "could not resolve \(host) (\(String(cString: gai_strerror(resolved)))); check the address")
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
            Glibc.close(fd)
        }
        throw Failure(
            kind: .refused,
            message: "could not connect to \(host):\(port) (\(String(cString: strerror(lastError)))); is the server "
                + "running there?")
    }

    /// `SO_RCVTIMEO` and `SO_SNDTIMEO`: reads and writes give up after `duration` (`.zero`: they wait as long as
    /// the connection lives).
    static func setTimeouts(_ fd: Int32, _ duration: Duration, sending: Bool = true) {
        let (seconds, attoseconds) = duration.components
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if sending { _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) }
    }
}
