import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What one client may hold of the server, and how fast it must talk (docs/operations.md, "What one client
/// can do to the others").
public struct ConnectionLimits: Sendable, Equatable {
    /// HTTP connections open at once from one address (the socket's); past it a new connection is closed at
    /// once, unanswered. Each holds a thread while it is open, so a limit keeps one address from taking
    /// ``HTTPServer/Configuration/connectionLimit`` for itself; `nil` (the default, since an embedding app
    /// knows its clients) is none. pixie-server sets 64.
    public var httpConnectionsPerAddress: Int?
    /// Addresses whose HTTP connections are not counted per address: the operator's reverse proxies, which
    /// carry many clients.
    public var exemptAddresses: Set<String> = []
    /// WebSockets open at once in all; past it an upgrade gets 503 `too_many_connections`. Also bounded by the
    /// open-file limit (``HTTPServer/raiseOpenFileLimit()``).
    public var webSockets = 100_000
    /// WebSockets open at once per client address: the request's ``HTTPRequest/remoteAddress``, which a
    /// forwarded-for middleware sets to the client behind a trusted proxy. Past it an upgrade gets 429
    /// `too_many_connections`. `nil`: no limit.
    public var webSocketsPerAddress: Int? = 1000
    /// The longest a connection may take to deliver a request head, counted from when it opened or its last
    /// exchange ended (so it is also how long an idle keep-alive connection stays). A trickle of bytes does not
    /// extend it. `nil`: libmicrohttpd's idle timeout alone.
    public var headerTimeout: Duration? = .seconds(20)
    /// The slowest request body accepted. Time the server itself holds the body back (a streaming handler that
    /// is behind) does not count. `nil`: no minimum.
    public var minimumBodyRate: BodyRate? = BodyRate()

    public init() {}
}

/// A minimum rate for request bodies: at least `bytesPerSecond` on average over each `window`, so a
/// multi-GiB upload over a slow phone link succeeds and a trickle does not.
public struct BodyRate: Sendable, Equatable {
    public var bytesPerSecond: Int
    public var window: Duration

    public init(bytesPerSecond: Int = 500, window: Duration = .seconds(20)) {
        self.bytesPerSecond = bytesPerSecond
        self.window = window
    }
}

extension HTTPServer {
    /// What the server holds now and what it refused so far (for `/metrics`).
    public struct Statistics: Sendable, Equatable {
        public var httpConnections = 0
        public var httpConnectionLimit = 0
        public var webSockets = 0
        public var webSocketLimit = 0
        /// The most HTTP connections (WebSockets) any one address holds now.
        public var busiestAddressHTTPConnections = 0
        public var busiestAddressWebSockets = 0
        /// Connections closed unanswered because their address held its share.
        public var httpConnectionsRefusedPerAddress = 0
        /// Upgrades answered 429 (per address) and 503 (in all).
        public var webSocketsRefusedPerAddress = 0
        public var webSocketsRefusedAtLimit = 0
        /// Connections closed for a head that did not arrive in time, or a body below the minimum rate.
        public var headerTimeouts = 0
        public var slowBodies = 0
        /// WebSockets closed because the peer answered no ping.
        public var webSocketsSilent = 0
    }

    /// Raises this process's soft limit on open files to the hard limit (as nginx's `worker_rlimit_nofile` or
    /// Go's runtime do), and returns the soft limit now in force. A server sizes its connection limits by it.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) != 0 {
                // An unlimited hard limit cannot be the soft one for descriptors (fs.nr_open caps it).
                raised.rlim_cur = Swift.min(limit.rlim_max, 1 << 20)
                _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised)
            }
        }
        return openFileLimit()
    }

    /// The soft limit on open files now in force.
    static func openFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(clamping: limit.rlim_cur)
    }
}

/// One HTTP connection libmicrohttpd holds, watched for the header deadline and the body rate.
final class WatchedConnection: Sendable {
    enum Phase {
        /// Waiting for a request head since then.
        case head(since: ContinuousClock.Instant)
        /// Taking a body: `bytes` since `windowStart`.
        case body(windowStart: ContinuousClock.Instant, bytes: Int)
        /// The server holds the body back (a streaming handler is behind): the window stopped with `elapsed` of
        /// it gone and `bytes` in it.
        case bodyHeld(elapsed: Duration, bytes: Int)
        /// The server is busy (a responder, or a handler behind on a streamed body): no deadline.
        case server
        /// Shut down by the watchdog, or closed by libmicrohttpd (the descriptor may be reused).
        case done
    }

    let fd: Int32
    let address: String?
    private let phase: Mutex<Phase>

    init(fd: Int32, address: String?) {
        self.fd = fd
        self.address = address
        phase = Mutex(.head(since: .now))
    }

    func awaitingHead() { set(.head(since: .now)) }
    func bodyStarted() { set(.body(windowStart: .now, bytes: 0)) }
    func serverBusy() { set(.server) }

    /// Stops the body's rate clock while the server holds the body back; ``resumeBody()`` starts it again
    /// where it stopped.
    func holdBody() {
        phase.withLock { phase in
            if case .body(let start, let bytes) = phase { phase = .bodyHeld(elapsed: .now - start, bytes: bytes) }
        }
    }

    func resumeBody() {
        phase.withLock { phase in
            if case .bodyHeld(let elapsed, let bytes) = phase {
                phase = .body(windowStart: .now - elapsed, bytes: bytes)
            }
        }
    }

    func received(_ count: Int) {
        phase.withLock { phase in
            if case .body(let start, let bytes) = phase { phase = .body(windowStart: start, bytes: bytes + count) }
        }
    }

    func closed() { phase.withLock { $0 = .done } }

    private func set(_ next: Phase) {
        phase.withLock { phase in
            if case .done = phase { return }
            phase = next
        }
    }

    enum Verdict {
        case fine
        case headTooSlow
        case bodyTooSlow
    }

    /// Shuts the socket down if it broke a deadline at `now`. Under the lock, so libmicrohttpd (which marks the
    /// connection closed before closing its descriptor) cannot have closed it meanwhile.
    func check(now: ContinuousClock.Instant, limits: ConnectionLimits) -> Verdict {
        phase.withLock { phase in
            var verdict = Verdict.fine
            switch phase {
            case .head(let since):
                if let timeout = limits.headerTimeout, now - since >= timeout { verdict = .headTooSlow }
            case .body(let start, let bytes):
                guard let rate = limits.minimumBodyRate, now - start >= rate.window else { break }
                let (seconds, attoseconds) = rate.window.components
                let needed = Double(rate.bytesPerSecond) * (Double(seconds) + Double(attoseconds) / 1e18)
                if Double(bytes) < needed {
                    verdict = .bodyTooSlow
                } else {
                    phase = .body(windowStart: now, bytes: 0)
                }
            case .bodyHeld, .server, .done:
                break
            }
            if verdict != .fine {
                _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
                phase = .done
            }
            return verdict
        }
    }
}

/// Counts connections per address and in all, refuses past the limits, and runs the watchdog that closes
/// connections too slow with their head or body. Shared by libmicrohttpd's threads and the WebSockets.
final class ConnectionGuard: Sendable {
    let limits: ConnectionLimits
    let httpConnectionLimit: Int
    let webSocketLimit: Int

    private struct State {
        var http: [String: Int] = [:]
        /// With the server's own TLS: connections taken per address, from their accept to their end (or their
        /// upgrade), counted before libmicrohttpd takes them up on a thread of its own.
        var tunnels: [String: Int] = [:]
        var webSockets: [String: Int] = [:]
        var watched: [ObjectIdentifier: WatchedConnection] = [:]
        var statistics = HTTPServer.Statistics()
    }

    private let state = Mutex(State())
    private let timer: Mutex<(any DispatchSourceTimer)?>

    /// `connectionLimit` and the WebSocket limit are cut to what the open-file limit leaves room for (64
    /// descriptors kept back for the store, logs and listeners), at `descriptorsPerConnection` each (3 with the
    /// server's own TLS: the client's socket and the two ends of the pair libmicrohttpd reads).
    init(limits: ConnectionLimits, connectionLimit: Int, descriptorsPerConnection: Int = 1) {
        self.limits = limits
        let room = Swift.max(16, (HTTPServer.openFileLimit() - 64) / Swift.max(1, descriptorsPerConnection))
        httpConnectionLimit = Swift.min(connectionLimit, room)
        webSocketLimit = Swift.max(0, Swift.min(limits.webSockets, room - httpConnectionLimit))
        let periods = [limits.headerTimeout, limits.minimumBodyRate?.window].compactMap { $0 }
        if let shortest = periods.min() {
            let tick = Swift.max(Swift.min(shortest / 4, .seconds(1)), .milliseconds(1))
            let (seconds, attoseconds) = tick.components
            let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
            let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "http-connection-watchdog"))
            source.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
            timer = Mutex(source)
        } else {
            timer = Mutex(nil)
        }
        state.withLock {
            $0.statistics.httpConnectionLimit = httpConnectionLimit
            $0.statistics.webSocketLimit = webSocketLimit
        }
        timer.withLock { timer in
            timer?.setEventHandler { [weak self] in self?.scan() }
            timer?.resume()
        }
    }

    func stop() { timer.withLock { $0?.cancel() } }

    deinit { stop() }

    // MARK: HTTP connections (libmicrohttpd's listen thread, and each connection's)

    /// Whether a new connection from `address` may open (libmicrohttpd's accept policy).
    func admits(_ address: String?) -> Bool {
        guard let perAddress = limits.httpConnectionsPerAddress, let address, !limits.exemptAddresses.contains(address)
        else { return true }
        return state.withLock { state in
            guard state.http[address, default: 0] >= perAddress else { return true }
            state.statistics.httpConnectionsRefusedPerAddress += 1
            return false
        }
    }

    /// With the server's own TLS: takes a place for a connection from `address` as it is accepted, before its
    /// handshake, or refuses it (counted as a per-address refusal) when the address holds its share. libmicrohttpd
    /// counts a connection only once its thread takes it up, later, so its accept policy alone would let a burst
    /// from one address through. The place is given back with ``tunnelEnded(_:)``.
    func reserveTunnel(_ address: String?) -> Bool {
        guard let perAddress = limits.httpConnectionsPerAddress, let address, !limits.exemptAddresses.contains(address)
        else { return true }
        return state.withLock { state in
            guard state.tunnels[address, default: 0] < perAddress else {
                state.statistics.httpConnectionsRefusedPerAddress += 1
                return false
            }
            state.tunnels[address, default: 0] += 1
            return true
        }
    }

    func tunnelEnded(_ address: String?) {
        guard limits.httpConnectionsPerAddress != nil, let address, !limits.exemptAddresses.contains(address) else {
            return
        }
        state.withLock { state in
            let left = state.tunnels[address, default: 1] - 1
            state.tunnels[address] = left > 0 ? left : nil
        }
    }

    func connectionStarted(fd: Int32, address: String?) -> WatchedConnection {
        let watched = WatchedConnection(fd: fd, address: address)
        state.withLock { state in
            state.watched[ObjectIdentifier(watched)] = watched
            state.statistics.httpConnections += 1
            if let address { state.http[address, default: 0] += 1 }
        }
        return watched
    }

    func connectionClosed(_ watched: WatchedConnection) {
        watched.closed()
        state.withLock { state in
            state.watched[ObjectIdentifier(watched)] = nil
            state.statistics.httpConnections -= 1
            if let address = watched.address { Self.decrement(&state.http, address) }
        }
    }

    // MARK: WebSockets

    /// Takes a place for a WebSocket from `address`, or says why there is none (429 or 503).
    func reserveWebSocket(for address: String?) -> HTTPError? {
        state.withLock { state in
            guard state.statistics.webSockets < webSocketLimit else {
                state.statistics.webSocketsRefusedAtLimit += 1
                return HTTPError(
                    .serviceUnavailable, .tooManyConnections,
                    "the server holds all the WebSockets it can (\(webSocketLimit)); try again later",
                    headers: ["Retry-After": "5"])
            }
            if let address, let perAddress = limits.webSocketsPerAddress,
                state.webSockets[address, default: 0] >= perAddress
            {
                state.statistics.webSocketsRefusedPerAddress += 1
                return HTTPError(
                    .tooManyRequests, .tooManyConnections,
                    "\(address) holds \(perAddress) WebSockets already, the most one address may; close one first",
                    headers: ["Retry-After": "5"])
            }
            state.statistics.webSockets += 1
            if let address { state.webSockets[address, default: 0] += 1 }
            return nil
        }
    }

    func webSocketEnded(address: String?, silent: Bool) {
        state.withLock { state in
            state.statistics.webSockets -= 1
            if silent { state.statistics.webSocketsSilent += 1 }
            if let address { Self.decrement(&state.webSockets, address) }
        }
    }

    var statistics: HTTPServer.Statistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.busiestAddressHTTPConnections = state.http.values.max() ?? 0
            statistics.busiestAddressWebSockets = state.webSockets.values.max() ?? 0
            return statistics
        }
    }

    private static func decrement(_ counts: inout [String: Int], _ address: String) {
        let left = counts[address, default: 1] - 1
        counts[address] = left > 0 ? left : nil
    }

    /// The watchdog's pass: every watched connection is checked against the deadlines.
    private func scan() {
        let now = ContinuousClock.now
        let watched = state.withLock { Array($0.watched.values) }
        var heads = 0
        var bodies = 0
        for connection in watched {
            switch connection.check(now: now, limits: limits) {
            case .fine: break
            case .headTooSlow: heads += 1
            case .bodyTooSlow: bodies += 1
            }
        }
        if heads + bodies > 0 {
            state.withLock {
                $0.statistics.headerTimeouts += heads
                $0.statistics.slowBodies += bodies
            }
        }
    }
}
