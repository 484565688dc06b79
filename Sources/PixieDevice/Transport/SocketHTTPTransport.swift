import Foundation
public import SiblingsCrypto
import Synchronization
import WebSockets

/// HTTP/1.1 (RFC 9112) to pixie-server on connections of its own: plain to an `http://` server, with TLS to an
/// `https://` one (OpenSSL through ``TLSContext``: the system's trust store or a private CA, the host name or IP
/// address checked, optional pins; TLS 1.2 the floor, X25519MLKEM768 asked for first). It is the device's default
/// transport: unlike URLSession on Linux, it tells an untrusted certificate, a wrong host, an expired certificate
/// and a server that speaks no TLS apart, and it can trust a private CA and pin a key.
///
/// Connections are kept open between exchanges (at most ``idleLimit``) and checked before reuse; each exchange
/// runs on a thread of its own, since its socket blocks. Each read and write waits at most `timeout`.
public final class SocketHTTPTransport: HTTPTransport {
    public let baseURL: URL
    /// How long one read or write may wait (for a streamed body, how long it may go without progress).
    public let timeout: TimeInterval
    private let endpoint: Result<Endpoint, PixieClientError>
    private let idle = Mutex<[ClientConnection]>([])
    private let log: @Sendable (String) -> Void

    /// Connections kept open between exchanges.
    public static let idleLimit = 4
    /// The largest answer body taken (a blob range is at most a few MiB; nothing the server sends comes near).
    static let maximumBodyByteCount = 1 << 30
    /// The largest response head taken.
    static let maximumHeadByteCount = 64 << 10

    private struct Endpoint: Sendable {
        let host: String
        let port: UInt16
        let tls: TLSContext?
        /// `host:port` as the Host header writes it.
        let hostHeader: String
    }

    /// A transport to the server at `baseURL` (`https://host[:port]`, or `http://` for a server on this machine).
    /// `tls` says whom to trust for an `https://` server (the system's trust store by default); `log` hears which
    /// TLS version and key-exchange group each new connection agreed. A bad `baseURL` or CA file is reported by the
    /// first exchange, as an error that says what to fix.
    public init(
        baseURL: URL, tls: TLSConfiguration = .client(), timeout: TimeInterval = 30,
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.baseURL = baseURL
        self.timeout = timeout
        self.log = log
        endpoint = Result { () throws(PixieClientError) -> Endpoint in
            guard let address = ServerAddress(baseURL) else {
                throw .unreachable("\(baseURL.absoluteString) is not an http:// or https:// server address")
            }
            var context: TLSContext?
            if address.isTLS {
                do throws(TLSError) {
                    context = try TLSContext(tls)
                } catch {
                    throw .unreachable("TLS to \(baseURL.absoluteString) cannot be set up: \(error.message)")
                }
            }
            return Endpoint(host: address.host, port: address.port, tls: context, hostHeader: address.hostHeader)
        }
    }

    deinit {
        for connection in idle.withLock({ $0 }) { connection.close() }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let endpoint = try endpoint.get()
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { [self] in
                continuation.resume(with: Result { try exchange(request, endpoint) })
            }
        }
    }

    // MARK: one exchange, on its own thread

    private func exchange(_ request: TransportRequest, _ endpoint: Endpoint) throws -> TransportResponse {
        defer { request.bodyPipe?.readerStopped() }
        let path = request.path
        // A connection kept from before may have been closed by the server just as it was taken: an exchange whose
        // method may be repeated (RFC 9110, section 9.2.2) is tried once more on a new one if nothing came back.
        let mayRepeat = ["GET", "HEAD", "PUT", "DELETE"].contains(request.method) && request.bodyPipe == nil
        while true {
            let (connection, reused) = try connection(endpoint)
            do {
                try write(request, endpoint, on: connection)
                let (response, reusable) = try read(request, from: connection)
                if reusable, keep(connection) {
                } else {
                    connection.close()
                }
                return response
            } catch NothingCameBack.nothing where reused && mayRepeat {
                connection.close()
                continue
            } catch {
                connection.close()
                throw explain(error, request: request, path: path)
            }
        }
    }

    private enum NothingCameBack: Error { case nothing }

    /// A kept connection that is still open, or a new one.
    private func connection(_ endpoint: Endpoint) throws -> (ClientConnection, reused: Bool) {
        while let kept = idle.withLock({ $0.popLast() }) {
            if kept.isReusable { return (kept, true) }
            kept.close()
        }
        let connection: ClientConnection
        do {
            connection = try ClientConnection(
                host: endpoint.host, port: endpoint.port, tls: endpoint.tls, timeout: .seconds(timeout))
        } catch {
            throw explain(error, request: nil, path: "")
        }
        if let version = connection.tlsVersion {
            log("TLS to \(endpoint.host): \(version), key exchange \(connection.tlsGroup ?? "unknown")")
        }
        return (connection, false)
    }

    private func keep(_ connection: ClientConnection) -> Bool {
        idle.withLock { idle in
            guard idle.count < Self.idleLimit else { return false }
            idle.append(connection)
            return true
        }
    }

    private func write(_ request: TransportRequest, _ endpoint: Endpoint, on connection: ClientConnection) throws {
        var head = "\(request.method) \(request.target) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\n"
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key })
        where !["host", "content-length", "transfer-encoding", "connection"].contains(name.lowercased()) {
            guard Self.isToken(name), !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw PixieClientError.unexpected("the header \(name) of \(request.method) is not valid HTTP")
            }
            head += "\(name): \(value)\r\n"
        }
        if request.bodyPipe != nil {
            head += "Transfer-Encoding: chunked\r\n\r\n"
        } else if let body = request.body {
            head += "Content-Length: \(body.count)\r\n\r\n"
        } else {
            head += ["POST", "PUT", "PATCH"].contains(request.method) ? "Content-Length: 0\r\n\r\n" : "\r\n"
        }
        guard let pipe = request.bodyPipe else {
            try connection.send(Data(head.utf8) + (request.body ?? Data()))
            return
        }
        try connection.send(Data(head.utf8))
        // The body as it is made, in chunks (RFC 9112, section 7.1).
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBufferPointer { pipe.read(into: $0.baseAddress!, count: $0.count) }
            if count < 0 {
                throw PixieClientError.unreachable(
                    "the body of \(request.method) \(request.path) stopped: what was "
                        + "making it failed")
            }
            if count == 0 {
                try connection.send(Data("0\r\n\r\n".utf8))
                return
            }
            var chunk = Data(String(count, radix: 16).utf8) + Data("\r\n".utf8)
            chunk.append(contentsOf: buffer[0..<count])
            chunk += Data("\r\n".utf8)
            try connection.send(chunk)
        }
    }

    /// The answer to `request`, and whether the connection may carry another exchange.
    private func read(
        _ request: TransportRequest, from connection: ClientConnection
    ) throws -> (TransportResponse, reusable: Bool) {
        var parsed: ResponseHead
        repeat {
            guard let head = try connection.receive(through: [13, 10, 13, 10], limit: Self.maximumHeadByteCount)
            else { throw NothingCameBack.nothing }
            parsed = try ResponseHead(head)
            // An interim answer (100 Continue) is followed by the real one (RFC 9110, section 15.2).
        } while (100..<200).contains(parsed.status)
        var reusable = parsed.keepsAlive
        let body: Data
        if request.method == "HEAD" || parsed.status == 204 || parsed.status == 304 {
            body = Data()
        } else if parsed.headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = try readChunked(from: connection)
        } else if let length = parsed.headers["content-length"] {
            guard let count = Int(length.trimmingCharacters(in: .whitespaces)), count >= 0,
                count <= Self.maximumBodyByteCount
            else { throw Malformed("a Content-Length of \(length)") }
            body = try connection.receive(exactly: count)
        } else {
            body = try connection.receiveUntilClosed(limit: Self.maximumBodyByteCount)
            reusable = false
        }
        return (TransportResponse(status: parsed.status, headers: parsed.headers, body: body), reusable)
    }

    private func readChunked(from connection: ClientConnection) throws -> Data {
        var body = Data()
        while true {
            guard let line = try connection.receive(through: [13, 10], limit: 1024) else {
                throw Malformed("a chunked body that ends early")
            }
            let size = String(decoding: line.dropLast(2), as: UTF8.self).split(separator: ";").first ?? ""
            guard let count = Int(size.trimmingCharacters(in: .whitespaces), radix: 16), count >= 0,
                body.count + count <= Self.maximumBodyByteCount
            else { throw Malformed("a chunk size of \(size)") }
            if count == 0 {
                // Trailer fields, up to the empty line.
                while let trailer = try connection.receive(through: [13, 10], limit: 8 << 10), trailer.count > 2 {}
                return body
            }
            body += try connection.receive(exactly: count)
            guard try connection.receive(exactly: 2) == Data([13, 10]) else {
                throw Malformed("a chunk that does not end with CRLF")
            }
        }
    }

    /// An answer that is not HTTP/1.1.
    struct Malformed: Error {
        let what: String
        init(_ what: String) { self.what = what }
    }

    struct ResponseHead {
        let status: Int
        /// Field names lowercased; a repeated field's values joined with ", ".
        let headers: [String: String]
        let keepsAlive: Bool

        init(_ head: Data) throws {
            let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
            let statusLine = lines[0].split(separator: " ", maxSplits: 2)
            guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), statusLine[1].count == 3,
                let status = Int(statusLine[1])
            else { throw Malformed("a status line \(lines[0].prefix(40))") }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() where !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { throw Malformed("a header line without a colon") }
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                headers[name] = headers[name].map { "\($0), \(value)" } ?? value
            }
            self.status = status
            self.headers = headers
            let connection = headers["connection"]?.lowercased() ?? ""
            keepsAlive =
                statusLine[0] == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")
        }
    }

    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (0x21...0x7e).contains(byte) && !"()<>@,;:\\\"/[]?={}".utf8.contains(byte)
            }
    }

    /// What went wrong, said for a person: which server, what failed, what to do.
    private func explain(_ error: any Error, request: TransportRequest?, path: Substring) -> any Error {
        let server = baseURL.absoluteString
        let what = request.map { "\($0.method) \(path)" } ?? "the connection"
        switch error {
        case let error as PixieClientError: return error
        case let error as TLSError: return PixieClientError.unreachable(error.message)
        case let failure as ClientConnection.Failure:
            switch failure.kind {
            case .unresolved:
                return PixieClientError.unreachable("\(baseURL.host ?? server) does not resolve; check the address")
            case .refused:
                return PixieClientError.unreachable("nothing answers at \(server); is pixie-server running there?")
            case .timedOut where request == nil:
                return PixieClientError.unreachable("\(failure.message); try again, or check the server")
            case .timedOut:
                return PixieClientError.unreachable(
                    "\(server) did not answer \(what) within \(Duration.seconds(timeout)); try again, or check the "
                        + "server")
            case .dropped:
                return PixieClientError.unreachable("\(failure.message) (\(what)); try again")
            }
        case NothingCameBack.nothing:
            return PixieClientError.unreachable("\(server) closed the connection without answering \(what); try again")
        case let malformed as Malformed:
            return PixieClientError.unexpected("\(server) answered \(what) with \(malformed.what), not HTTP/1.1")
        default: return PixieClientError.unreachable("\(what) to \(server) failed (\(type(of: error)))")
        }
    }
}
