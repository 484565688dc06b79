import CommandLineKit
import Foundation
import Glibc
import HTTPServer
import PixieWire
import SiblingsCrypto
import SystemCalls
import WebSockets

/// The protocol a connection speaks.
enum Wire: String, ExpressibleByArgument {
    /// pixie-server's relay: an HTTP/1.1 upgrade to a WebSocket, binary relay frames (docs/pixie-protocol.md).
    case ws
    /// nats-server's text protocol: INFO, CONNECT, SUB, PING/PONG.
    case nats

    init?(argument: String) { self.init(rawValue: argument) }
    static var valueName: String? { "ws|nats" }
}

/// What one run of connections does: the server, the protocol, how many, from where.
struct LoadPlan: Sendable {
    var wire: Wire
    var port: UInt16
    /// The WebSocket endpoint (ws only).
    var path: String
    var connections: Int
    /// The share of connections that subscribe one random subject: SUBSCRIBE (ws) or SUB (nats).
    var subscribeFraction: Double
    /// Distinct source addresses in 127.0.0.0/8 the connections are spread over.
    var sources: Int
    /// Handshakes in flight at most, so the server's listen backlog is not overrun.
    var ramp: Int
    /// Seconds each handshake gets, from connect(2) to its last answer.
    var handshakeTimeout: Double
    /// Whether a subscribing WebSocket waits for the relay's OK before it counts as up (ws only).
    var awaitSubscribeOK: Bool
    /// TLS, checked for the name `localhost`: from the start (ws: wss://), or after the server's INFO (nats, as
    /// nats-server 2.9 asks for it). Nil: plain.
    var tls: TLSContext? = nil
}

/// Where a connection is.
enum Phase: UInt8 {
    /// Not opened yet.
    case unused
    /// Non-blocking connect(2) in progress.
    case connecting
    /// The TLS handshake is under way.
    case securing
    /// ws: the upgrade request is sent; reading the response head.
    case upgrading
    /// ws: upgraded; waiting for the relay's CHALLENGE, which the SUBSCRIBE signs.
    case challenged
    /// ws: SUBSCRIBE is sent; waiting for the relay's OK.
    case subscribing
    /// nats: waiting for the server's INFO.
    case greeting
    /// nats: CONNECT (and SUB) and PING are sent; waiting for PONG.
    case pinging
    /// The handshake is done: held, answering pings.
    case open
    /// Failed or ended; its descriptor is closed.
    case closed

    var isHandshaking: Bool {
        switch self {
        case .connecting, .securing, .upgrading, .challenged, .subscribing, .greeting, .pinging: true
        case .unused, .open, .closed: false
        }
    }

    /// Whether bytes from the server are read in this phase.
    var isReading: Bool {
        switch self {
        case .securing, .upgrading, .challenged, .subscribing, .greeting, .pinging, .open: true
        case .unused, .connecting, .closed: false
        }
    }

    /// Appended to a handshake failure's reason.
    var waitingFor: String {
        switch self {
        case .connecting: "while connecting"
        case .securing: "during the TLS handshake"
        case .upgrading: "before the 101"
        case .challenged: "before the CHALLENGE"
        case .subscribing: "before the SUBSCRIBE's OK"
        case .greeting: "before INFO"
        case .pinging: "before PONG"
        case .unused, .open, .closed: ""
        }
    }
}

/// One connection's state, kept small: a slot per connection in one array.
struct Slot {
    var fd: Int32 = -1
    var phase = Phase.unused
    var subscribes = false
    /// Monotonic nanoseconds by which the handshake must be done.
    var deadline: UInt64 = 0
    /// ws: the `Sec-WebSocket-Key` sent, which the server's answer must match; emptied once checked.
    var webSocketKey = ""
    /// Bytes the socket did not take yet.
    var unsent: [UInt8] = []
    /// Bytes read but not yet a whole line, head or frame.
    var received: [UInt8] = []
    /// The connection's TLS, once it started.
    var tls: TLSEngine?
}

/// Many connections on one thread: non-blocking sockets, one epoll set, a slot per connection. Not thread-safe:
/// one task drives it from start to end.
final class ConnectionLoop {
    static let stopToken = UInt32.max
    static let readSize = 64 << 10
    /// Longest response head, NATS line or WebSocket frame taken from a server.
    static let maximumHead = 16 << 10
    static let maximumLine = 64 << 10
    static let maximumFrame = 1 << 20

    let plan: LoadPlan
    private let epoll: Epoll
    private let stop: StopSignal
    private let readBuffer: UnsafeMutableRawPointer
    private var random = FastRandom()
    private var slots: [Slot] = []
    private var nextToOpen = 0
    private var inFlight = 0
    private var lastSweep: UInt64 = 0

    /// Handshakes that completed, and that failed, since the last `reset`.
    private(set) var connected = 0
    private(set) var failed = 0
    /// Connections open now (handshake done, not ended).
    private(set) var live = 0
    /// Why handshakes failed, and why open connections ended, since the last `reset`.
    private(set) var failures = Tally()
    private(set) var drops = Tally()
    /// Whether a connect was refused since the last `reset` (nothing listens: the server is gone).
    private(set) var refusedSeen = false
    /// Whether SIGTERM or SIGINT came.
    private(set) var stopRequested = false
    /// Stop opening connections once one is refused (churn: the server is gone, say so at once).
    var stopOpeningOnRefusal = false
    /// Called each time a handshake finishes, either way (a progress bar).
    var onHandshakeEnded: (() -> Void)?

    /// Raises the descriptor limit and checks that `plan.connections` fit under it.
    init(plan: LoadPlan) throws {
        let limit = HTTPServer.raiseOpenFileLimit()
        guard plan.connections + 64 <= limit else {
            throw BenchError(
                "\(plan.connections) connections need \(plan.connections + 64) file descriptors, but RLIMIT_NOFILE "
                    + "is \(limit) even with the soft limit raised to the hard one: raise the hard limit "
                    + "(ulimit -Hn as root, LimitNOFILE= for a service) or ask for fewer connections")
        }
        let epoll = try Epoll()
        let stop = try StopSignal()
        self.plan = plan
        self.epoll = epoll
        self.stop = stop
        readBuffer = UnsafeMutableRawPointer.allocate(byteCount: ConnectionLoop.readSize, alignment: 16)
        let added = epoll.add(stop.readEnd, token: ConnectionLoop.stopToken, mask: Epoll.input)
        guard added == 0 else { throw BenchError("epoll_ctl failed for the signal pipe: \(describe(errno: added))") }
    }

    deinit {
        closeAll(abruptly: false)
        readBuffer.deallocate()
    }

    /// Forgets the last run (close it first) and plans new connections: `plan.connections` of them with
    /// `plan.subscribeFraction` subscribing, unless told otherwise (at most `plan.connections`).
    func reset(connections: Int? = nil, subscribeFraction: Double? = nil) {
        slots = [Slot](repeating: Slot(), count: min(connections ?? plan.connections, plan.connections))
        let fraction = subscribeFraction ?? plan.subscribeFraction
        // Exactly round-down(n × fraction) subscribers, spread evenly over the slots.
        for index in slots.indices {
            slots[index].subscribes = Int(Double(index + 1) * fraction) > Int(Double(index) * fraction)
        }
        nextToOpen = 0
        inFlight = 0
        connected = 0
        failed = 0
        live = 0
        failures = Tally()
        drops = Tally()
        refusedSeen = false
    }

    /// Opens every planned connection, at most `plan.ramp` handshakes at a time, until each has finished its
    /// handshake or failed, or SIGTERM/SIGINT came. Returns the seconds it took.
    func establish() throws -> Double {
        let start = monotonicNanoseconds()
        while !stopRequested {
            openMore()
            let opening = nextToOpen < slots.count && !(stopOpeningOnRefusal && refusedSeen)
            if inFlight == 0 && !opening { break }
            try turn(milliseconds: 50)
        }
        return Double(monotonicNanoseconds() - start) / 1e9
    }

    /// Keeps the connections open, answering pings, until `deadline` (monotonic nanoseconds; nil for none) or
    /// SIGTERM/SIGINT.
    func hold(until deadline: UInt64?) throws {
        while !stopRequested {
            var wait: Int32 = 1000
            if let deadline {
                let now = monotonicNanoseconds()
                if now >= deadline { break }
                wait = Int32(min(1000, (deadline - now) / 1_000_000 + 1))
            }
            try turn(milliseconds: wait)
        }
    }

    /// Closes every descriptor; `abruptly` sets SO_LINGER to {on, 0} first, so the server gets an RST, not a FIN.
    func closeAll(abruptly: Bool) {
        for index in slots.indices where slots[index].fd >= 0 {
            if abruptly {
                var option = linger(l_onoff: 1, l_linger: 0)
                _ = setsockopt(slots[index].fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
            }
            _ = Glibc.close(slots[index].fd)
            slots[index].fd = -1
            slots[index].phase = .closed
        }
        live = 0
        inFlight = 0
    }

    // MARK: The loop

    private func openMore() {
        while inFlight < plan.ramp && nextToOpen < slots.count && !(stopOpeningOnRefusal && refusedSeen) {
            let index = nextToOpen
            nextToOpen += 1
            open(index)
        }
    }

    /// One epoll wait and the events it reports; then, at most every 250 ms, the handshake deadlines.
    private func turn(milliseconds: Int32) throws {
        try epoll.wait(milliseconds: milliseconds) { token, mask in
            if token == ConnectionLoop.stopToken {
                stop.drain()
                stopRequested = true
            } else {
                handle(Int(token), mask)
            }
        }
        let now = monotonicNanoseconds()
        if inFlight > 0 && now - lastSweep >= 250_000_000 {
            lastSweep = now
            for index in 0..<nextToOpen where slots[index].phase.isHandshaking && slots[index].deadline <= now {
                terminate(index, "timeout after \(String(format: "%g", plan.handshakeTimeout)) s")
            }
        }
    }

    /// Starts slot `index`'s connection: socket, bind to its source address, non-blocking connect, epoll.
    private func open(_ index: Int) {
        slots[index].phase = .connecting
        slots[index].deadline = monotonicNanoseconds() + UInt64(plan.handshakeTimeout * 1e9)
        inFlight += 1
        let fd = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            terminate(index, "socket: \(describe(errno: errno))")
            return
        }
        slots[index].fd = fd
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // The local port is chosen at connect(2), for the whole 4-tuple, not at bind(2) for the address alone.
        _ = setsockopt(fd, Int32(IPPROTO_IP), IP_BIND_ADDRESS_NO_PORT, &one, socklen_t(MemoryLayout<Int32>.size))

        // Source 127.0.<1-250>.<1-250>: the connections are spread over plan.sources addresses.
        let source = index % plan.sources
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = 0
        let host: UInt32 = 127 << 24 | UInt32(source / 250 + 1) << 8 | UInt32(source % 250 + 1)
        local.sin_addr.s_addr = host.bigEndian
        let bindError = withUnsafePointer(to: &local) { pointer -> Int32 in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 ? 0 : errno
            }
        }
        guard bindError == 0 else {
            terminate(index, "bind to a 127.0.0.0/8 source address: \(describe(errno: bindError))")
            return
        }

        var server = sockaddr_in()
        server.sin_family = sa_family_t(AF_INET)
        server.sin_port = plan.port.bigEndian
        server.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connectError = withUnsafePointer(to: &server) { pointer -> Int32 in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 ? 0 : errno
            }
        }
        guard connectError == 0 || connectError == EINPROGRESS else {
            terminate(index, describe(errno: connectError))
            return
        }
        // Edge-triggered: writable once connected (or failed), readable whenever bytes arrive; each event is read or
        // written until EAGAIN. An already-connected socket is reported at once.
        let mask = Epoll.input | Epoll.output | Epoll.readHangUp | Epoll.edgeTriggered
        let added = epoll.add(fd, token: UInt32(index), mask: mask)
        guard added == 0 else {
            terminate(index, "epoll_ctl: \(describe(errno: added))")
            return
        }
    }

    private func handle(_ index: Int, _ mask: UInt32) {
        guard index < slots.count else { return }
        switch slots[index].phase {
        case .unused, .closed:
            return
        case .connecting:
            guard mask & (Epoll.output | Epoll.error | Epoll.hangUp) != 0 else { return }
            var problem: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(slots[index].fd, SOL_SOCKET, SO_ERROR, &problem, &length) != 0 { problem = errno }
            guard problem == 0 else {
                terminate(index, describe(errno: problem))
                return
            }
            if plan.tls != nil, plan.wire == .ws { startTLS(index) } else { startHandshake(index) }
            guard slots[index].phase.isReading else { return }
        case .securing, .upgrading, .challenged, .subscribing, .greeting, .pinging, .open:
            break
        }
        if mask & Epoll.output != 0 && !slots[index].unsent.isEmpty {
            guard flush(index) else { return }
        }
        if mask & (Epoll.input | Epoll.error | Epoll.hangUp | Epoll.readHangUp) != 0 { readAvailable(index) }
    }

    /// TCP is up: the protocol's handshake begins.
    private func startHandshake(_ index: Int) {
        switch plan.wire {
        case .ws:
            let key = Data(random.bytes(16)).base64EncodedString()
            slots[index].webSocketKey = key
            slots[index].phase = .upgrading
            let request =
                "GET \(plan.path) HTTP/1.1\r\nHost: 127.0.0.1:\(plan.port)\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
            _ = queue(index, Array(request.utf8))
        case .nats:
            slots[index].phase = .greeting
        }
    }

    /// Reads until the socket has nothing more (EAGAIN), handing each read to the protocol.
    private func readAvailable(_ index: Int) {
        let fd = slots[index].fd
        while slots[index].phase.isReading {
            let count = retryingInterrupts { Glibc.recv(fd, readBuffer, ConnectionLoop.readSize, 0) }
            if count > 0 {
                let bytes = UnsafeRawBufferPointer(start: readBuffer, count: count)
                if let engine = slots[index].tls {
                    guard secure(index, engine, Data(bytes)) else { return }
                } else {
                    slots[index].received.append(contentsOf: bytes)
                }
                switch plan.wire {
                case .ws: consumeWebSocket(index)
                case .nats: consumeNATS(index)
                }
                continue
            }
            if count == 0 {
                terminate(index, "closed by the server")
                return
            }
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK { return }
            terminate(index, describe(errno: code))
            return
        }
    }

    /// Appends `bytes` to what `index` sends (sealed, once TLS is up) and writes what the socket takes; false when
    /// the connection ended.
    private func queue(_ index: Int, _ bytes: [UInt8]) -> Bool {
        if let engine = slots[index].tls {
            do {
                try engine.write(Data(bytes))
            } catch {
                terminate(index, error.message)
                return false
            }
            slots[index].unsent.append(contentsOf: engine.takeOutput())
        } else {
            slots[index].unsent.append(contentsOf: bytes)
        }
        return flush(index)
    }

    // MARK: TLS

    /// Starts the TLS handshake: the ClientHello goes out.
    private func startTLS(_ index: Int) {
        guard let context = plan.tls else { return }
        do {
            let engine = try TLSEngine(client: context, serverName: "localhost")
            try engine.handshake()
            slots[index].tls = engine
            slots[index].phase = .securing
            slots[index].unsent.append(contentsOf: engine.takeOutput())
            _ = flush(index)
        } catch {
            terminate(index, error.message)
        }
    }

    /// Takes TLS records from the server: the handshake's, then application data into `received`. False when the
    /// connection ended.
    private func secure(_ index: Int, _ engine: TLSEngine, _ records: Data) -> Bool {
        engine.receive(records)
        do {
            if slots[index].phase == .securing {
                guard try engine.handshake() else {
                    slots[index].unsent.append(contentsOf: engine.takeOutput())
                    return flush(index)
                }
                slots[index].unsent.append(contentsOf: engine.takeOutput())
                guard flush(index) else { return false }
                switch plan.wire {
                case .ws: startHandshake(index)
                case .nats: sendNATSHello(index)
                }
                guard slots[index].phase.isReading else { return false }
            }
            slots[index].received.append(contentsOf: try engine.read())
        } catch {
            terminate(index, error.message)
            return false
        }
        slots[index].unsent.append(contentsOf: engine.takeOutput())
        return flush(index)
    }

    /// Writes `index`'s unsent bytes until the socket takes no more (the next writable edge resumes); false when the
    /// connection ended.
    private func flush(_ index: Int) -> Bool {
        let fd = slots[index].fd
        while !slots[index].unsent.isEmpty {
            let (written, code) = slots[index].unsent.withUnsafeBytes { bytes -> (Int, Int32) in
                let count = retryingInterrupts { Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
                return (count, count < 0 ? errno : 0)
            }
            if written > 0 {
                slots[index].unsent.removeFirst(written)
                continue
            }
            if written == 0 || code == EAGAIN || code == EWOULDBLOCK { return true }
            terminate(index, describe(errno: code))
            return false
        }
        return true
    }

    /// The handshake of `index` is done: it is held from now on.
    private func handshakeDone(_ index: Int) {
        slots[index].phase = .open
        slots[index].webSocketKey = ""
        inFlight -= 1
        connected += 1
        live += 1
        onHandshakeEnded?()
    }

    /// Ends `index` (closing its descriptor): a failed handshake, or an open connection the server ended.
    private func terminate(_ index: Int, _ reason: String) {
        let phase = slots[index].phase
        guard phase != .unused && phase != .closed else { return }
        if slots[index].fd >= 0 { _ = Glibc.close(slots[index].fd) }
        slots[index] = Slot(fd: -1, phase: .closed, subscribes: slots[index].subscribes)
        if phase == .open {
            live -= 1
            drops.add(reason)
            return
        }
        inFlight -= 1
        failed += 1
        if reason == Reason.refused {
            refusedSeen = true
            failures.add(reason)
        } else {
            failures.add("\(reason) \(phase.waitingFor)")
        }
        onHandshakeEnded?()
    }

    // MARK: WebSocket (ws)

    private func consumeWebSocket(_ index: Int) {
        if slots[index].phase == .upgrading {
            guard let end = firstIndex(of: [13, 10, 13, 10], in: slots[index].received) else {
                if slots[index].received.count > ConnectionLoop.maximumHead {
                    terminate(index, "a response head longer than 16 KiB")
                }
                return
            }
            let head = slots[index].received[..<end]
            let rest = Array(slots[index].received[(end + 4)...])
            slots[index].received = rest
            guard upgraded(index, head: head) else { return }
        }
        guard [.challenged, .subscribing, .open].contains(slots[index].phase) else { return }

        let bytes = slots[index].received
        slots[index].received = []
        var offset = 0
        while bytes.count - offset >= 2 {
            let first = bytes[offset]
            let second = bytes[offset + 1]
            let masked = (second & 0x80) != 0
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 {
                guard bytes.count - offset >= 4 else { break }
                length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                header = 4
            } else if length == 127 {
                guard bytes.count - offset >= 10 else { break }
                var value: UInt64 = 0
                for byte in bytes[(offset + 2)..<(offset + 10)] { value = value << 8 | UInt64(byte) }
                guard value <= UInt64(ConnectionLoop.maximumFrame) else {
                    terminate(index, "a WebSocket frame of \(value) bytes")
                    return
                }
                length = Int(value)
                header = 10
            }
            if masked { header += 4 }
            guard length <= ConnectionLoop.maximumFrame else {
                terminate(index, "a WebSocket frame of \(length) bytes")
                return
            }
            guard bytes.count - offset >= header + length else { break }
            let start = offset + header
            offset = start + length
            let opcode = first & 0x0F
            // Only pings, closes and binary messages are looked at; continuations, text and pongs are skipped.
            guard opcode == 0x9 || opcode == 0x8 || opcode == 0x2 else { continue }
            var payload = Array(bytes[start..<(start + length)])
            if masked {
                for position in payload.indices { payload[position] ^= bytes[start - 4 + (position & 3)] }
            }
            webSocketFrame(index, opcode: opcode, payload: payload)
            guard slots[index].phase.isReading else { return }
        }
        if offset < bytes.count { slots[index].received = Array(bytes[offset...]) }
    }

    /// Checks the response head (without its blank line) as the project's client does
    /// (``WebSocketUpgradeResponse``: status 101, Upgrade, Connection and the right `Sec-WebSocket-Accept`). Then
    /// sends SUBSCRIBE when the slot subscribes. False when the connection ended.
    private func upgraded(_ index: Int, head: ArraySlice<UInt8>) -> Bool {
        do {
            try WebSocketUpgradeResponse(head: Array(head)).validate(key: slots[index].webSocketKey)
        } catch {
            terminate(index, error.reason)
            return false
        }
        slots[index].webSocketKey = ""
        guard slots[index].subscribes else {
            handshakeDone(index)
            return true
        }
        // The relay's first frame is its CHALLENGE; the SUBSCRIBE signs it.
        slots[index].phase = .challenged
        return true
    }

    /// SUBSCRIBE (docs/pixie-protocol.md, "Relay") of a fresh key's subject, with its proof over `challenge`.
    private func subscribe(_ index: Int, challenge: Data) {
        let frame: RelayClientFrame
        do {
            frame = try RelaySubjectKey().subscribe(requestID: 1, challenge: challenge)
        } catch {
            return terminate(index, "could not sign SUBSCRIBE: \(error)")
        }
        guard queue(index, WebSocketWire.maskedFrame(opcode: 0x2, payload: Array(frame.encoded()), random: &random))
        else { return }
        if plan.awaitSubscribeOK {
            slots[index].phase = .subscribing
        } else {
            handshakeDone(index)
        }
    }

    /// A whole ping, close or binary frame from the relay, unmasked.
    private func webSocketFrame(_ index: Int, opcode: UInt8, payload: [UInt8]) {
        switch opcode {
        case 0x9:
            _ = queue(index, WebSocketWire.maskedFrame(opcode: 0xA, payload: payload, random: &random))
        case 0x8:
            let code = payload.count >= 2 ? "code \(Int(payload[0]) << 8 | Int(payload[1]))" : "no code"
            terminate(index, "the server closed the WebSocket (\(code))")
        default:
            // A binary message: the CHALLENGE (0x84) opens the connection; while subscribing, OK (0x82) or
            // ERROR (0x83) answers the SUBSCRIBE.
            if slots[index].phase == .challenged, payload.count == 33, payload.first == 0x84 {
                return subscribe(index, challenge: Data(payload[1...]))
            }
            guard slots[index].phase == .subscribing, let kind = payload.first else { return }
            if kind == 0x82 {
                handshakeDone(index)
            } else if kind == 0x83 {
                let code = payload.count >= 7 ? Int(payload[5]) << 8 | Int(payload[6]) : 0
                let text = payload.count > 7 ? String(decoding: payload[7...], as: UTF8.self) : ""
                terminate(index, "SUBSCRIBE answered ERROR \(code) \(text.prefix(80))")
            }
        }
    }

    // MARK: NATS (nats)

    private func consumeNATS(_ index: Int) {
        let bytes = slots[index].received
        slots[index].received = []
        var offset = 0
        lines: while let lineEnd = firstIndex(of: [13, 10], in: bytes, from: offset) {
            let line = String(decoding: bytes[offset..<lineEnd], as: UTF8.self)
            var next = lineEnd + 2
            switch line.prefix(while: { $0 != " " && $0 != "\t" }).uppercased() {
            case "INFO":
                if slots[index].phase == .greeting {
                    // With TLS, nats-server 2.9 sends INFO in the clear and then waits for the ClientHello.
                    if plan.tls != nil { return startTLS(index) }
                    guard sendNATSHello(index) else { return }
                }
            case "PING":
                guard queue(index, Array("PONG\r\n".utf8)) else { return }
            case "PONG":
                if slots[index].phase == .pinging { handshakeDone(index) }
            case "MSG", "HMSG":
                // Nobody publishes to these subjects, but a message's payload is skipped, not read as lines.
                guard let size = line.split(separator: " ").last.flatMap({ Int($0) }), size >= 0 else {
                    terminate(index, "a malformed \(line.prefix(80))")
                    return
                }
                guard bytes.count >= next + size + 2 else { break lines }
                next += size + 2
            case "-ERR":
                terminate(index, "nats-server said \(line.prefix(100))")
                return
            default:
                break  // +OK, and anything this client does not need
            }
            offset = next
        }
        guard offset < bytes.count else { return }
        guard bytes.count - offset <= ConnectionLoop.maximumLine else {
            terminate(index, "a line longer than 64 KiB from nats-server")
            return
        }
        slots[index].received = Array(bytes[offset...])
    }

    /// CONNECT (and SUB) and PING; false when the connection ended.
    @discardableResult
    private func sendNATSHello(_ index: Int) -> Bool {
        var hello = "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n"
        if slots[index].subscribes {
            let subject = random.bytes(8).map { String(format: "%02x", $0) }.joined()
            hello += "SUB bench.\(subject) 1\r\n"
        }
        hello += "PING\r\n"
        slots[index].phase = .pinging
        return queue(index, Array(hello.utf8))
    }

    /// Where `pattern` first starts in `bytes` at or after `start`.
    private func firstIndex(of pattern: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
        guard bytes.count - start >= pattern.count else { return nil }
        var index = start
        let last = bytes.count - pattern.count
        while index <= last {
            if bytes[index] == pattern[0] {
                var matched = 1
                while matched < pattern.count && bytes[index + matched] == pattern[matched] { matched += 1 }
                if matched == pattern.count { return index }
            }
            index += 1
        }
        return nil
    }
}
