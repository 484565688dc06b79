import Foundation
import HTTPServer
import PixieServer
import PixieWire
import Storage
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A relay-only Application on a real HTTPServer (port 0), with tokens from an ``InMemoryTokenSpender`` and
/// wakes recorded by a ``RecordingPushGateway``.
struct RelayHarness {
    let tokens = InMemoryTokenSpender()
    let push = RecordingPushGateway()
    let metrics = Metrics()
    let application: Application
    let server: HTTPServer

    init(
        maximumQueuedFrames: Int = 256, maximumSubjects: Int = 16, maximumPayloadBytes: Int = 64 << 10,
        connectionTimeout: Int = 30
    ) throws {
        var configuration = PixieConfiguration()
        configuration.services = [.relay]
        configuration.relayMaximumQueuedFrames = maximumQueuedFrames
        configuration.relayMaximumSubjects = maximumSubjects
        configuration.relayMaximumPayloadBytes = maximumPayloadBytes
        application = try Application(
            configuration: configuration, keys: ServiceKeys.generate(), database: try SQLiteDatabase.inMemory(),
            sms: RecordingSMSSender(), logger: .discard, metrics: metrics, tokens: tokens, push: push)
        server = try HTTPServer(
            responder: application.router,
            configuration: HTTPServer.Configuration(
                port: 0, connectionLimit: 1024, connectionTimeout: connectionTimeout, responderTimeout: nil))
    }

    var port: UInt16 { server.port }

    func connect() async throws -> RelayTestClient {
        RelayTestClient(socket: try await WebSocketClient.connect(port: port, path: "/v1/relay"))
    }

    /// A fresh token the relay will accept once.
    func token() -> Data {
        let token = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        tokens.issue([token])
        return token
    }

    /// Waits until the relay has no open connections (cleanup runs after a socket closes).
    func waitForNoConnections() async throws {
        try await eventually("the relay still has open connections") {
            metrics.counter("pixie_relay_connections") == 0
        }
    }
}

func randomSubject() -> RelaySubject {
    try! RelaySubject(rawRepresentation: (0..<32).map { _ in UInt8.random(in: 0...255) })
}

/// Polls `condition` every 10 ms for up to 10 s.
func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
    for _ in 0..<1000 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw FixtureError("timed out: \(what)")
}

/// A device's side of the relay protocol over our WebSocketClient.
final class RelayTestClient: Sendable {
    let socket: WebSocket
    private let nextID = Mutex<UInt32>(1)

    init(socket: WebSocket) { self.socket = socket }

    private func id() -> UInt32 {
        nextID.withLock { next in
            defer { next += 1 }
            return next
        }
    }

    /// The next relay frame; throws if the connection closed.
    func next() async throws -> RelayServerFrame {
        guard case .binary(let bytes)? = try await socket.receive() else {
            throw FixtureError("the relay connection closed (code \(socket.closeCode.map { "\($0)" } ?? "none"))")
        }
        return try RelayServerFrame(decoding: bytes)
    }

    func request(_ make: (UInt32) -> RelayClientFrame) async throws -> RelayServerFrame {
        let frame = make(id())
        try await socket.send(binary: frame.encoded())
        return try await next()
    }

    @discardableResult
    func subscribe(_ subject: RelaySubject, pushToken: Data = Data()) async throws -> RelayServerFrame {
        try await request { .subscribe(requestID: $0, subject: subject, pushToken: pushToken) }
    }

    @discardableResult
    func send(
        _ payload: Data, to subject: RelaySubject, wake: WakeClass = .silent, token: Data
    ) async throws -> RelayServerFrame {
        try await request { .send(requestID: $0, subject: subject, wake: wake, token: token, payload: payload) }
    }

    func close() async { await socket.close() }
}

/// A raw TCP connection to 127.0.0.1 for writing bytes no WebSocket client would (half a frame).
final class RawSocket {
    let fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { throw FixtureError("cannot connect to 127.0.0.1:\(port)") }
    }

    func write(_ bytes: Data) {
        bytes.withUnsafeBytes { _ = Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until the end of the HTTP head (`\r\n\r\n`).
    func readHead() -> String {
        var head = Data()
        var byte: UInt8 = 0
        while !head.hasSuffix("\r\n\r\n"), recv(fd, &byte, 1, 0) == 1 { head.append(byte) }
        return String(decoding: head, as: UTF8.self)
    }

    func close() { _ = Glibc.close(fd) }
}

extension Data {
    fileprivate func hasSuffix(_ text: String) -> Bool {
        count >= text.utf8.count && suffix(text.utf8.count).elementsEqual(text.utf8)
    }
}
