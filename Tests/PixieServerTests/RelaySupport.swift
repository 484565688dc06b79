import Foundation
import HTTPServer
import PixieServer
import PixieWire
import Storage
import Synchronization
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// A relay-only Application on a real HTTPServer (port 0), with tokens from an ``InMemoryTokenSpender`` and
/// wakes recorded by a ``RecordingPushGateway``. Two harnesses given one bus and one spender are two relay
/// nodes behind one fan-out; two given a NATS bus each are two nodes on one NATS.
///
/// Its bus is, unless given, the one `$SIBLINGS_RELAY_BUS` names: `nats` (a ``NATSRelayBus`` on the test
/// command's nats-server, `$SIBLINGS_NATS_URL`), or in-process by default; scripts/test.sh runs the relay suites
/// on both.
struct RelayHarness {
    let tokens: InMemoryTokenSpender
    let push = RecordingPushGateway()
    let metrics = Metrics()
    let application: Application
    let server: HTTPServer

    init(
        maximumQueuedFrames: Int = 256, maximumSubjects: Int = 16, maximumPayloadBytes: Int = 64 << 10,
        connectionTimeout: Int = 30, bus: (any RelayBus)? = nil, tokens: InMemoryTokenSpender? = nil,
        spender: (any TokenSpender)? = nil, database: (any SQLDatabase)? = nil, logger: Logger = .discard
    ) throws {
        self.tokens = tokens ?? InMemoryTokenSpender()
        var configuration = PixieConfiguration()
        configuration.services = [.relay]
        configuration.relayMaximumQueuedFrames = maximumQueuedFrames
        configuration.relayMaximumSubjects = maximumSubjects
        configuration.relayMaximumPayloadBytes = maximumPayloadBytes
        application = try Application(
            configuration: configuration, keys: ServiceKeys.generate(),
            database: try database ?? SQLiteDatabase.inMemory(),
            sms: RecordingSMSSender(), logger: logger, metrics: metrics, tokens: spender ?? self.tokens, push: push,
            bus: try bus ?? Self.defaultBus())
        server = try HTTPServer(
            responder: application.router,
            configuration: HTTPServer.Configuration(
                port: 0, connectionLimit: 1024, connectionTimeout: connectionTimeout, responderTimeout: nil))
    }

    var port: UInt16 { server.port }

    /// The bus `$SIBLINGS_RELAY_BUS` names (see above).
    static func defaultBus() throws -> any RelayBus {
        guard ProcessInfo.processInfo.environment["SIBLINGS_RELAY_BUS"] == "nats" else { return InProcessRelayBus() }
        return try NATSRelayBus(url: try natsURL())
    }

    /// The test command's nats-server.
    static func natsURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["SIBLINGS_NATS_URL"], !url.isEmpty else {
            throw FixtureError(
                "SIBLINGS_NATS_URL is not set, so there is no nats-server for this test: run the test command "
                    + "(scripts/test.sh), which starts one on loopback, or `eval \"$(scripts/engines.sh start)\"`")
        }
        return url
    }

    func connect() async throws -> RelayTestClient {
        try await RelayTestClient.connect(port: port)
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

/// The keys of the subjects ``randomSubject()`` made, so a test client can prove the ones it subscribes.
let subjectKeys = Mutex<[RelaySubject: RelaySubjectKey]>([:])

/// A fresh subject, owned by a fresh key the test's clients can sign with (``RelayTestClient/subscribe(_:pushToken:)``).
func randomSubject() -> RelaySubject {
    let key = RelaySubjectKey()
    subjectKeys.withLock { $0[key.subject] = key }
    return key.subject
}

/// Polls `condition` every 10 ms until it holds. The 120 s limit is a hang's, not a timing check: the whole
/// suite shares two cores, and the relay's own timers (the slow consumer's 5 s cut) run inside it.
func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(120)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw FixtureError("timed out: \(what)")
}

/// A device's side of the relay protocol over our WebSocketClient.
final class RelayTestClient: Sendable {
    let socket: WebSocket
    /// The nonce of the relay's CHALLENGE, the connection's first frame.
    let challenge: Data
    private let nextID = Mutex<UInt32>(1)

    init(socket: WebSocket, challenge: Data) {
        self.socket = socket
        self.challenge = challenge
    }

    /// Connects to `ws://127.0.0.1:port/v1/relay` and reads the relay's CHALLENGE. The handshake's limit is a
    /// hang's: hundreds of upgrades at once on a loaded machine take a while.
    static func connect(port: UInt16) async throws -> RelayTestClient {
        let socket = try await WebSocketClient.connect(port: port, path: "/v1/relay", handshakeTimeout: .seconds(120))
        guard case .binary(let bytes)? = try await socket.receive(),
            case .challenge(let nonce) = try RelayServerFrame(decoding: bytes)
        else { throw FixtureError("the relay's first frame was not a CHALLENGE") }
        return RelayTestClient(socket: socket, challenge: nonce)
    }

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
        guard let key = subjectKeys.withLock({ $0[subject] }) else {
            throw FixtureError("the test holds no key for \(subject); make subjects with randomSubject()")
        }
        return try await subscribe(key, pushToken: pushToken)
    }

    /// SUBSCRIBE with `key`'s proof over this connection's CHALLENGE.
    @discardableResult
    func subscribe(_ key: RelaySubjectKey, pushToken: Data = Data()) async throws -> RelayServerFrame {
        try await request { try! key.subscribe(requestID: $0, challenge: challenge, pushToken: pushToken) }
    }

    @discardableResult
    func send(
        _ payload: Data, to subject: RelaySubject, wake: WakeClass = .silent, token: Data
    ) async throws -> RelayServerFrame {
        try await request { .send(requestID: $0, subject: subject, wake: wake, token: token, payload: payload) }
    }

    func close() async { await socket.close() }
}

/// A spender whose store is down: every token gets a 503, as the SQLite spender answers when its write fails.
struct UnavailableTokenSpender: TokenSpender {
    func spend(_ tokens: [Data]) -> [Result<Void, HTTPError>] {
        tokens.map { _ in
            .failure(HTTPError(.serviceUnavailable, HTTPError.Code("storage"), "the spent set cannot be written"))
        }
    }
}
