import Dispatch
import Foundation
package import SiblingsCrypto
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// One WebSocket message (RFC 6455): text (valid UTF-8, checked on arrival) or binary.
public enum WebSocketMessage: Sendable, Equatable {
    case text(String)
    case binary(Data)
}

/// A close frame's status code (RFC 6455, section 7.4.1).
public struct WebSocketCloseCode: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16

    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let normalClosure = WebSocketCloseCode(1000)
    public static let goingAway = WebSocketCloseCode(1001)
    /// The peer broke the framing rules (an unmasked client frame, reserved bits or opcodes, ...).
    public static let protocolError = WebSocketCloseCode(1002)
    public static let unsupportedData = WebSocketCloseCode(1003)
    /// The close frame carried no code (never sent on the wire).
    public static let noStatusReceived = WebSocketCloseCode(1005)
    /// A text message or close reason that is not UTF-8.
    public static let invalidPayload = WebSocketCloseCode(1007)
    public static let policyViolation = WebSocketCloseCode(1008)
    /// A message longer than the endpoint's maximum.
    public static let messageTooBig = WebSocketCloseCode(1009)
    /// The handler failed.
    public static let internalError = WebSocketCloseCode(1011)
    /// The server cannot serve this connection now; connect again later (IANA's WebSocket close code registry,
    /// "Try Again Later").
    public static let tryAgainLater = WebSocketCloseCode(1013)

    /// Whether a close frame may carry this code: 1000-1003, 1007-1014, and 3000-4999 (RFC 6455, 7.4).
    public var isAllowedOnTheWire: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    public var description: String { String(rawValue) }
}

/// A WebSocket failed: the peer broke the protocol (``closeCode`` says how we closed), the connection
/// dropped without a close handshake, or a message was sent after closing.
public struct WebSocketError: Error, Sendable, CustomStringConvertible {
    /// The close code sent or received when the failure closed the connection, if it did.
    public let closeCode: WebSocketCloseCode?
    public let reason: String

    public init(_ reason: String, closeCode: WebSocketCloseCode? = nil) {
        self.reason = reason
        self.closeCode = closeCode
    }

    public var description: String {
        "WebSocketError: \(reason)" + (closeCode.map { " (close code \($0))" } ?? "")
    }
}

/// One WebSocket connection (RFC 6455), on the server (from ``Router/webSocket(_:maximumMessageSize:handler:)``)
/// or the client side (``WebSocketClient/connect(port:path:headers:maximumMessageSize:handshakeTimeout:)``).
///
/// One of a few event loops (``EventLoop``, epoll) reads its frames: it answers pings with pongs,
/// reassembles fragmented messages, checks the framing (masking by role, reserved bits and opcodes, control
/// frame rules, UTF-8 of text, the maximum message size) and closes with 1002, 1007 or 1009 on a violation,
/// which ``receive()`` then throws. Messages wait in a queue of at most 16; past that the loop stops reading
/// this socket, so a slow consumer slows the peer down instead of filling memory. With a
/// ``WebSocketConsumer`` instead, the loop hands it every message a read completed, on the loop's thread,
/// with no task in between.
///
/// Sends may come from any thread or task, and each frame is written whole and in order. ``send(binary:)`` and
/// the other sends block their thread until the kernel has taken the frame (a peer that stops reading stalls
/// them); ``trySend(binaries:)`` never waits for the peer: what the kernel does not take at once is kept, and
/// written before anything else by the next send or ``flush()``.
public final class WebSocket: AsyncSequence, Sendable {
    public typealias Element = WebSocketMessage

    package enum Role: Sendable {
        case server
        case client
    }

    /// The socket, and the bytes of frames it did not take yet (written before any other).
    private struct Transport {
        /// `true` while the socket is open.
        var open = true
        var unsent = Data()
        /// How much of `unsent` is written already.
        var unsentStart = 0
        /// The connection's TLS (`wss://`), if any: frames are sealed into records as they are queued, and what
        /// is read is opened before the frame parser sees it. Only used under the lock.
        let tls: TLSEngine?

        var hasUnsent: Bool { unsentStart < unsent.count }

        /// Queues `bytes` (frames) for the socket, sealed when the connection has TLS.
        mutating func enqueue(_ bytes: Data) throws {
            guard let tls else {
                unsent.append(bytes)
                return
            }
            do {
                try tls.write(bytes)
            } catch {
                throw WebSocketError("the TLS connection can no longer send: \(error)")
            }
            unsent.append(tls.takeOutput())
        }

        /// Opens `ciphertext` read from the socket: the plaintext it completes, and any record TLS answers with
        /// queued. Throws once the TLS connection is over (closed, or a record that does not authenticate).
        mutating func open(_ ciphertext: Data) throws(TLSError) -> Data {
            guard let tls else { return ciphertext }
            tls.receive(ciphertext)
            let plaintext = try tls.read()
            let answer = tls.takeOutput()
            if !answer.isEmpty { unsent.append(answer) }
            return plaintext
        }
    }

    private struct State {
        var closeSent = false
        var readerDone = false
        var closeCode: WebSocketCloseCode?
        var doneWaiters: [CheckedContinuation<Void, Never>] = []
    }

    package let role: Role
    /// The longest message accepted, in bytes; longer ones close the connection with 1009.
    public let maximumMessageSize: Int
    private let fd: Int32
    /// The loop that reads this socket and keeps its timers.
    private let loop: EventLoop
    private let keepalive: WebSocketKeepalive?
    /// Every write and the final release hold this lock, so no write reaches a descriptor that was closed
    /// (and perhaps reused); a write that waits for the peer lets go of it while it waits.
    private let transport: Mutex<Transport>
    /// True for a `wss://` connection (``Transport/tls``).
    private let hasTLS: Bool
    /// Set once ``start(consumer:)`` was given a consumer: ``receive()`` is then not for this socket.
    private let consumed = Atomic(false)
    private let release: @Sendable (_ silent: Bool) -> Void
    private let state = Mutex(State())
    private let messages = HandoffQueue<WebSocketMessage>(capacity: 16) { _ in 1 }
    /// The reader's state, on the loop's thread only.
    private let reader: ReaderState
    /// Signalled once when the reader has finished and released the socket (for the daemon's shutdown).
    private let finished = DispatchSemaphore(value: 0)

    /// `release` closes the socket; it is called once, on the loop's thread, when the reader ends (`silent`: the
    /// peer answered no ping).
    /// `initialBytes` were read from the socket before this. The socket must be non-blocking. With `keepalive`,
    /// a peer that sends no frame for its interval gets a ping, and one that answers nothing in its timeout is
    /// closed. `initialOutput` is owed to the peer before any frame (a TLS terminator's sealed 101 that the
    /// socket had not taken yet).
    package init(
        role: Role, fd: Int32, maximumMessageSize: Int, initialBytes: Data = Data(),
        keepalive: WebSocketKeepalive? = nil, tls: sending TLSEngine? = nil, initialOutput: Data = Data(),
        release: @escaping @Sendable (_ silent: Bool) -> Void
    ) {
        hasTLS = tls != nil
        transport = Mutex(Transport(unsent: initialOutput, tls: tls))
        self.role = role
        self.fd = fd
        self.maximumMessageSize = Swift.max(0, maximumMessageSize)
        self.keepalive = keepalive
        self.release = release
        loop = EventLoop.next()
        reader = ReaderState(
            inbound: [UInt8](initialBytes),
            parser: WebSocketFrameParser(role: role, maximumMessageSize: Swift.max(0, maximumMessageSize)))
    }

    /// Hands the socket to its event loop; with a `consumer`, it takes the messages instead of ``receive()``.
    package func start(consumer: (any WebSocketConsumer)? = nil) {
        if consumer != nil { consumed.store(true, ordering: .relaxed) }
        loop.execute { self.attach(consumer: consumer) }
    }

    // MARK: Public API

    /// Sends a text message in one frame.
    public func send(text: String) async throws { try sendFrame(opcode: Opcode.text, payload: Data(text.utf8)) }

    /// Sends a binary message in one frame.
    public func send(binary: Data) async throws { try sendFrame(opcode: Opcode.binary, payload: binary) }

    /// Sends several binary messages with one write to the socket (in order; for a writer that drains a
    /// queue). Nothing is sent when the socket is closing.
    public func send(binaries: [Data]) async throws {
        guard let bytes = try frames(binaries) else { return }
        try write(bytes)
    }

    /// Sends binary messages without waiting for the peer: the kernel takes what it can at once, and the rest
    /// is kept and written, before any other frame, by the next send or ``flush()``. Returns `true` if
    /// everything was written, `false` if some is kept (the caller's writer should call ``flush()`` where it
    /// may block). Throws ``WebSocketError`` when the socket is closing or the connection dropped.
    ///
    /// It waits only for the lock of a send in progress on another thread, never for the peer.
    public func trySend(binaries: [Data]) throws -> Bool {
        guard let bytes = try frames(binaries) else { return !transport.withLock { $0.hasUnsent } }
        return try sendWithoutWaiting(bytes)
    }

    /// Appends `bytes` to what is kept and sends what the kernel takes at once; `true` once nothing is kept.
    private func sendWithoutWaiting(_ bytes: Data) throws -> Bool {
        try transport.withLock { transport in
            guard transport.open else { throw WebSocketError("the WebSocket is closed; open a new connection") }
            try transport.enqueue(bytes)
            return try Self.sendUnsent(fd, &transport)
        }
    }

    /// Blocks until every byte ``trySend(binaries:)`` kept is written; throws ``WebSocketError`` if the
    /// connection dropped or closed first.
    public func flush() throws { try write(Data()) }

    /// Sends a ping (at most 125 bytes of payload); the peer's pong is consumed by the reader.
    public func ping(_ payload: Data = Data()) async throws {
        guard payload.count <= 125 else {
            throw WebSocketError("a ping carries at most 125 bytes; send \(payload.count) bytes as a message")
        }
        try sendFrame(opcode: Opcode.ping, payload: payload)
    }

    /// The next message; `nil` once the connection has closed with a close handshake. Throws
    /// ``WebSocketError`` if it failed (a protocol violation, whose code is in the error, or a connection
    /// that dropped without a close frame).
    public func receive() async throws -> WebSocketMessage? {
        guard !consumed.load(ordering: .relaxed) else {
            throw WebSocketError("this WebSocket's messages go to its WebSocketConsumer; receive() is not for it")
        }
        return try await messages.next()
    }

    /// Starts the close handshake with `code` and `reason` (at most 123 bytes of UTF-8), then waits until
    /// the peer answers or 5 seconds pass, and closes the connection. Calling it again only waits.
    /// Messages still unread are dropped.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") async {
        startClosing(code: code, reason: reason)
        await waitUntilClosed()
    }

    /// Starts the close handshake as ``close(code:reason:)`` does, without waiting for it to end: the socket
    /// closes when the peer answers or 5 seconds pass (a consumer hears of it in
    /// ``WebSocketConsumer/ended(_:)``). Never blocks: what the kernel does not take at once (earlier frames
    /// kept by ``trySend(binaries:)``, the close frame) the event loop writes as the peer reads.
    public func startClosing(code: WebSocketCloseCode = .normalClosure, reason: String = "") {
        sendClose(code: code, reason: reason)
        messages.abandon()
        loop.execute { self.closing(within: .seconds(5)) }
    }

    /// The close code: the one the peer sent, or the one we closed with after a protocol violation; `nil`
    /// while the connection is open.
    public var closeCode: WebSocketCloseCode? { state.withLock { $0.closeCode } }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let socket: WebSocket

        public mutating func next() async throws -> WebSocketMessage? { try await socket.receive() }
    }

    /// The messages until the connection closes (``receive()`` in a loop).
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(socket: self) }

    // MARK: Handshake

    /// RFC 6455's GUID, appended to the client's key before hashing (section 1.3).
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for `key`: base64(SHA-1(key + GUID)) (RFC 6455, section 4.2.2).
    public static func acceptKey(for key: String) -> String {
        Data(Insecure.SHA1.hash(data: Data((key + guid).utf8)).rawRepresentation).base64EncodedString()
    }

    // MARK: Frames

    enum Opcode {
        static let continuation: UInt8 = 0x0
        static let text: UInt8 = 0x1
        static let binary: UInt8 = 0x2
        static let close: UInt8 = 0x8
        static let ping: UInt8 = 0x9
        static let pong: UInt8 = 0xA
    }

    /// One frame with FIN set; masked with a random key when sent by a client (RFC 6455, 5.2 and 5.3).
    static func frame(opcode: UInt8, payload: Data, masked: Bool) -> Data {
        var frame = Data([0x80 | opcode])
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            frame.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(maskBit | 126)
            frame.append(contentsOf: withUnsafeBytes(of: UInt16(payload.count).bigEndian, Array.init))
        } else {
            frame.append(maskBit | 127)
            frame.append(contentsOf: withUnsafeBytes(of: UInt64(payload.count).bigEndian, Array.init))
        }
        guard masked else {
            frame.append(payload)
            return frame
        }
        var generator = SystemRandomNumberGenerator()
        let key = withUnsafeBytes(of: generator.next() as UInt32, Array.init)
        frame.append(contentsOf: key)
        var body = [UInt8](payload)
        for index in body.indices { body[index] ^= key[index & 3] }
        frame.append(contentsOf: body)
        return frame
    }

    private func sendFrame(opcode: UInt8, payload: Data) throws {
        if opcode < 0x8, state.withLock({ $0.closeSent }) {
            throw WebSocketError("the WebSocket is closing; open a new connection to send more", closeCode: closeCode)
        }
        try write(Self.frame(opcode: opcode, payload: payload, masked: role == .client))
    }

    /// `binaries` as binary frames, one after the other; nil for none. Throws once the close was sent.
    private func frames(_ binaries: [Data]) throws -> Data? {
        guard !binaries.isEmpty else { return nil }
        if state.withLock({ $0.closeSent }) {
            throw WebSocketError("the WebSocket is closing; open a new connection to send more", closeCode: closeCode)
        }
        var bytes = Data()
        for payload in binaries {
            bytes.append(Self.frame(opcode: Opcode.binary, payload: payload, masked: role == .client))
        }
        return bytes
    }

    /// Writes `bytes` after whatever ``trySend(binaries:)`` kept, blocking until the kernel has taken it all.
    /// While the peer's window is full it waits in `poll(2)` without the lock, so ``shutdownNow()`` (the close
    /// watchdog, a server shutdown) can still end the connection.
    private func write(_ bytes: Data) throws {
        var appended = false
        while true {
            let done = try transport.withLock { transport in
                guard transport.open else { throw WebSocketError("the WebSocket is closed; open a new connection") }
                if !appended {
                    try transport.enqueue(bytes)
                    appended = true
                }
                return try Self.sendUnsent(fd, &transport)
            }
            if done { return }
            var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&descriptor, 1, 100)
        }
    }

    /// Sends what the kernel takes of `transport.unsent` without blocking; `true` once nothing is left.
    private static func sendUnsent(_ fd: Int32, _ transport: inout Transport) throws -> Bool {
        while transport.hasUnsent {
            let n = transport.unsent.withUnsafeBytes { buffer in
                retryingInterrupts {
                    Glibc.send(
                        fd, buffer.baseAddress! + transport.unsentStart, buffer.count - transport.unsentStart,
                        Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
            }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { return false }
                throw WebSocketError("the connection dropped while sending (errno \(errno))")
            }
            transport.unsentStart += n
        }
        transport.unsent.removeAll(keepingCapacity: transport.unsent.count <= 1 << 20)
        transport.unsentStart = 0
        return true
    }
    /// Sends a close frame unless one was sent already, without waiting: what the kernel does not take at once
    /// is kept, and the event loop writes it as the peer reads.
    private func sendClose(code: WebSocketCloseCode, reason: String) {
        let first = state.withLock { state -> Bool in
            defer { state.closeSent = true }
            return !state.closeSent
        }
        guard first else { return }
        var payload = Data(withUnsafeBytes(of: code.rawValue.bigEndian, Array.init))
        var reasonBytes = Data(reason.utf8)
        while reasonBytes.count > 123 || String(validating: reasonBytes, as: UTF8.self) == nil {
            reasonBytes = reasonBytes.dropLast()
        }
        payload.append(reasonBytes)
        _ = try? sendWithoutWaiting(Self.frame(opcode: Opcode.close, payload: payload, masked: role == .client))
    }

    /// Sends 1001 (going away) and shuts the socket down without waiting for the answer (server shutdown).
    package func goAway() {
        sendClose(code: .goingAway, reason: "the server is shutting down")
        shutdownNow()
    }

    /// Shuts the socket down `delay` from now unless it has closed by then: a deadline for a connection
    /// its owner gave up on (a relay slow consumer), whose writer may be waiting for a peer that reads
    /// nothing. Every send then throws, and the reader ends the connection.
    public func shutDown(after delay: Duration) {
        loop.execute { self.closing(within: delay) }
    }

    /// Shuts the socket down at once: the reader sees the end and releases the connection.
    package func shutdownNow() {
        transport.withLock { transport in
            if transport.open { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Returns once the reader has finished and the socket is released.
    func waitUntilClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.readerDone { return true }
                state.doneWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Blocks until the reader has released the socket, or `deadline`; `false` on timeout. One caller only.
    package func waitUntilClosed(deadline: DispatchTime) -> Bool {
        guard finished.wait(timeout: deadline) == .success else { return false }
        finished.signal()
        return true
    }

    // MARK: Reader (on the event loop's thread)

    private enum Ending {
        /// The peer sent a close frame (answered already).
        case closed
        /// The peer broke the protocol: close with this code.
        case failed(WebSocketCloseCode, String)
        /// The connection ended without a close frame.
        case dropped
    }

    /// What the reader keeps between readiness events; touched on the loop's thread only.
    private final class ReaderState: @unchecked Sendable {
        // @unchecked: the loop's thread is the only one that reads or writes these.
        /// Bytes read and not yet parsed, from `start` on (empty, with no storage, while the peer is idle).
        var inbound: [UInt8]
        var start = 0
        /// The frames' state between reads: a fragmented message under way.
        var parser: WebSocketFrameParser
        var batch: [WebSocketMessage] = []
        var consumer: (any WebSocketConsumer)?
        var tag: UInt64?
        /// What epoll watches for now, and whether something is owed to the peer (so writes are watched).
        var reading = true
        var watchingWrites = false
        var writing = false
        /// The receive queue is full: reads wait until ``receive()`` takes a message.
        var queueFull = false
        /// The peer's end of the stream was read: once every frame read is parsed, the connection ends.
        var endOfStream = false
        /// Ending, and waiting until this instant for the peer's close or the end of the stream (after a
        /// violation), or for what is owed to be written (after the peer's close); `error` is what the end is.
        var ending: (deadline: ContinuousClock.Instant, error: WebSocketError?)?
        /// Closed at this instant unless the connection has ended by then (``startClosing(code:reason:)``,
        /// ``shutDown(after:)``).
        var closeBy: ContinuousClock.Instant?
        var lastFrame = ContinuousClock.now
        var pingSent: ContinuousClock.Instant?
        var done = false

        init(inbound: [UInt8], parser: WebSocketFrameParser) {
            self.inbound = inbound
            self.parser = parser
        }
    }

    private func attach(consumer: (any WebSocketConsumer)?) {
        reader.consumer = consumer
        // Deadlines are coarse: an eighth of the keepalive's shorter period, at most a second.
        let slack = Swift.min(keepalive.map { Swift.min($0.interval, $0.timeout) / 8 } ?? .seconds(1), .seconds(1))
        guard let tag = loop.add(self, fd: fd, reading: true, writing: false, timerSlack: slack) else {
            return finish(WebSocketError("the event loop could not watch the socket (errno \(errno))"))
        }
        reader.tag = tag
        if let keepalive { loop.schedule(at: reader.lastFrame + keepalive.interval) }
        // Bytes that came with the upgrade are frames already.
        if !reader.inbound.isEmpty { process(endOfStream: false) }
        // Bytes owed from before (``init``'s `initialOutput`) go out as the peer takes them.
        if transport.withLock({ $0.hasUnsent }) { _ = flushOwed() }
    }

    /// Called on the loop (``startClosing(code:reason:)``, ``shutDown(after:)``): writes what is owed as the
    /// peer reads, and ends the connection `delay` from now unless it has ended before.
    private func closing(within delay: Duration) {
        guard !reader.done else { return }
        let due = ContinuousClock.now + delay
        reader.closeBy = Swift.min(reader.closeBy ?? due, due)
        loop.schedule(at: due)
        flushOwed()
    }

    private func process(endOfStream: Bool) {
        if endOfStream && !reader.endOfStream {
            reader.endOfStream = true
            // Nothing more can come, and a hung-up socket would be reported ready for ever: stop watching it,
            // keeping the channel for its timers.
            if let tag = reader.tag { loop.unwatch(tag, fd: fd) }
        }
        if reader.ending != nil {
            // Only the end of the stream (or the deadline) is awaited now; what arrives is dropped.
            reader.inbound = []
            reader.start = 0
            if reader.endOfStream { finish(reader.ending?.error) }
            return
        }
        let ending = parseFrames()
        if reader.start == reader.inbound.count {
            reader.inbound = []
            reader.start = 0
        } else if reader.start > 64 << 10 {
            reader.inbound.removeFirst(reader.start)
            reader.start = 0
        }
        handOver()
        if let ending { return end(ending) }
        // Frames still unparsed behind a full queue are delivered first; the end comes after them.
        if reader.endOfStream, !reader.queueFull { return end(.dropped) }
        updateInterest()
    }

    private func handOver() {
        guard let consumer = reader.consumer, !reader.batch.isEmpty else { return }
        let ready = reader.batch
        reader.batch = []
        consumer.received(ready)
    }

    private func end(_ ending: Ending) {
        switch ending {
        case .closed:
            // Our answer (or our own close, which this answered) goes out first; the peer gets 2 s to read it.
            reader.ending = (ContinuousClock.now + .seconds(2), nil)
            loop.schedule(at: reader.ending!.deadline)
            if !flushOwed() { return }
            finish(nil)
        case .failed(let code, let reason):
            state.withLock { $0.closeCode = code }
            sendClose(code: code, reason: reason)
            // Give the peer a moment to read the close frame and answer before the socket closes.
            let error = WebSocketError("the peer broke the WebSocket protocol: \(reason)", closeCode: code)
            reader.ending = (ContinuousClock.now + .seconds(2), error)
            loop.schedule(at: reader.ending!.deadline)
            flushOwed()
            updateInterest()
        case .dropped:
            finish(
                state.withLock({ $0.closeSent }) ? nil : WebSocketError("the connection dropped without a close frame"))
        }
    }

    /// Writes what is kept for the peer; `true` once nothing is. While something is, reads wait (a peer that
    /// sends pings and reads nothing cannot make pongs pile up) and the loop writes on `EPOLLOUT`.
    @discardableResult
    private func flushOwed() -> Bool {
        let done = (try? transport.withLock { try Self.sendUnsent(fd, &$0) }) ?? true
        reader.writing = !done
        updateInterest()
        return done
    }

    private func updateInterest() {
        guard let tag = reader.tag, !reader.done, !reader.endOfStream else { return }
        let reading = !reader.queueFull && !reader.writing
        if reading != reader.reading || reader.writing != reader.watchingWrites {
            reader.reading = reading
            reader.watchingWrites = reader.writing
            loop.watch(tag, fd: fd, reading: reading, writing: reader.writing)
        }
    }

    /// The connection is over: the socket is released, the queue ended, the consumer and waiters told.
    private func finish(_ error: WebSocketError?, silent: Bool = false) {
        guard !reader.done else { return }
        reader.done = true
        if let tag = reader.tag { loop.remove(tag, fd: fd) }
        if let error { messages.finish(throwing: error) } else { messages.finish() }
        transport.withLock { transport in
            guard transport.open else { return }
            transport.open = false
            transport.unsent = Data()
            release(silent)
        }
        reader.consumer?.ended(error)
        reader.consumer = nil
        reader.inbound = []
        reader.parser.reset()
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.readerDone = true
            defer { state.doneWaiters = [] }
            return state.doneWaiters
        }
        for waiter in waiters { waiter.resume() }
        finished.signal()
    }

    /// The frames complete in `inbound`, acted on in order (``WebSocketFrameParser``); stops at the first that is
    /// not all there, or at a close or a violation (judged from the header, before the payload arrives).
    private func parseFrames() -> Ending? {
        while true {
            let before = reader.start
            let event = reader.parser.next(reader.inbound, start: &reader.start)
            // Any frame taken, a fragment's included, shows the peer alive.
            if reader.start != before {
                reader.lastFrame = ContinuousClock.now
                reader.pingSent = nil
            }
            guard let event else { return nil }
            switch event {
            case .ping(let payload):
                _ = try? sendWithoutWaiting(
                    Self.frame(opcode: Opcode.pong, payload: Data(payload), masked: role == .client))
                if !flushOwed() { return nil }
            case .pong:
                continue
            case .close(let code):
                return closeReceived(code)
            case .failed(let code, let reason):
                return .failed(code, reason)
            case .message(let message):
                deliver(message)
            }
            // A full receive queue stops the reader until receive() takes a message.
            if reader.queueFull { return nil }
        }
    }

    private func deliver(_ message: WebSocketMessage) {
        if reader.consumer != nil {
            reader.batch.append(message)
        } else if !messages.offer(message, whenSpace: { [self] in loop.execute { self.queueHasSpace() } }) {
            reader.queueFull = true
        }
    }

    private func queueHasSpace() {
        guard reader.queueFull, !reader.done else { return }
        reader.queueFull = false
        // Frames already read are parsed before the socket is read again.
        process(endOfStream: reader.endOfStream)
    }

    private func closeReceived(_ code: WebSocketCloseCode) -> Ending {
        state.withLock { $0.closeCode = code }
        sendClose(code: code == .noStatusReceived ? .normalClosure : code, reason: "")
        return .closed
    }
}

extension WebSocket: EventLoopChannel {
    package func readable() {
        guard !reader.done else { return }
        let buffer = loop.readBuffer
        var endOfStream = false
        var total = 0
        // At most 1 MiB per turn, so one busy peer cannot starve the others on this loop.
        while total < 1 << 20 {
            let n = retryingInterrupts { Glibc.recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                if reader.ending == nil {
                    let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                    if hasTLS {
                        // Opened under the lock every send takes, since one TLS connection both reads and writes.
                        let opened = transport.withLock { transport -> Result<Data, TLSError> in
                            do {
                                return .success(try transport.open(Data(bytes)))
                            } catch let error as TLSError {
                                return .failure(error)
                            } catch {
                                return .failure(TLSError(.closed, "\(error)"))
                            }
                        }
                        switch opened {
                        case .success(let plaintext): reader.inbound.append(contentsOf: plaintext)
                        case .failure(let error):
                            // Frames complete before the break are still taken; then the connection ends, saying
                            // why (a close_notify, or a record that did not authenticate).
                            process(endOfStream: false)
                            finish(WebSocketError("the TLS connection ended: \(error)"))
                            return
                        }
                    } else {
                        reader.inbound.append(contentsOf: bytes)
                    }
                }
                total += n
                if n < buffer.count { break }
                continue
            }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { break }
            endOfStream = true
            break
        }
        process(endOfStream: endOfStream)
    }

    package func writable() {
        guard !reader.done else { return }
        let owedWritten = flushOwed()
        if owedWritten, let ending = reader.ending, ending.error == nil {
            // After the close handshake: the answer is out, the connection is done.
            finish(nil)
        } else if owedWritten, reader.ending == nil {
            // Frames read while the answer waited are parsed now, and reads resume.
            process(endOfStream: reader.endOfStream)
        }
    }

    package func timerFired(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard !reader.done else { return nil }
        if let ending = reader.ending, now >= ending.deadline {
            finish(ending.error)
            return nil
        }
        if let closeBy = reader.closeBy, now >= closeBy {
            // Our close went unanswered (or the owner gave up on the peer).
            finish(
                state.withLock({ $0.closeSent }) ? nil : WebSocketError("the connection was shut down by its owner"))
            return nil
        }
        var next = [reader.ending?.deadline, reader.closeBy].compactMap { $0 }.min()
        if let keepalive, reader.ending == nil {
            if let pingSent = reader.pingSent {
                if now >= pingSent + keepalive.timeout {
                    sendClose(code: .goingAway, reason: "no answer to a ping")
                    finish(
                        WebSocketError(
                            "the peer answered no ping within \(keepalive.timeout); the connection was closed",
                            closeCode: .goingAway), silent: true)
                    return nil
                }
                next = Swift.min(next ?? (pingSent + keepalive.timeout), pingSent + keepalive.timeout)
            } else if now >= reader.lastFrame + keepalive.interval, !state.withLock({ $0.closeSent }) {
                reader.pingSent = now
                _ = try? sendWithoutWaiting(Self.frame(opcode: Opcode.ping, payload: Data(), masked: role == .client))
                flushOwed()
                next = Swift.min(next ?? (now + keepalive.timeout), now + keepalive.timeout)
            } else {
                let due = reader.lastFrame + keepalive.interval
                next = Swift.min(next ?? due, due)
            }
        }
        return next
    }
}

/// When a server's WebSocket hears nothing from its peer: a ping after `interval` without a frame, and the
/// connection closed (1001) if nothing comes back within `timeout` of it. Any complete frame from the peer
/// (a message, a ping, a pong) counts; bytes of a frame still arriving do not, so a trickle cannot hold a
/// connection open.
public struct WebSocketKeepalive: Sendable, Equatable {
    public var interval: Duration
    public var timeout: Duration

    public init(interval: Duration = .seconds(60), timeout: Duration = .seconds(30)) {
        self.interval = interval
        self.timeout = timeout
    }
}

/// Blocking POSIX socket helpers shared by the WebSocket reader and client.
enum Socket {
    /// Writes all of `bytes`; `false` (with `errno` set) if the connection failed.
    static func sendAll(_ fd: Int32, _ bytes: Data) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var sent = 0
            while sent < buffer.count {
                let n = retryingInterrupts {
                    Glibc.send(fd, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                }
                if n < 0 { return false }
                sent += n
            }
            return true
        }
    }

    /// Reads exact byte counts from a socket, through a buffer, opening TLS records first when there is `tls`.
    struct Reader {
        let fd: Int32
        var buffered: [UInt8]
        var tls: TLSEngine?
        /// Why reading stopped, when it was the TLS connection.
        private(set) var tlsFailure: TLSError?
        private var start = 0
        private var chunk = [UInt8](repeating: 0, count: 64 << 10)

        init(fd: Int32, buffered: [UInt8], tls: TLSEngine? = nil) {
            self.fd = fd
            self.buffered = buffered
            self.tls = tls
        }

        /// The bytes read from the socket but not yet taken.
        var remaining: [UInt8] { Array(buffered[start...]) }

        /// Exactly `count` bytes, blocking until they come; `nil` at the end of the stream or on an error.
        mutating func read(_ count: Int) -> [UInt8]? {
            while buffered.count - start < count {
                if start > 0 {
                    buffered.removeFirst(start)
                    start = 0
                }
                let n = chunk.withUnsafeMutableBytes { bytes in
                    retryingInterrupts { Glibc.recv(fd, bytes.baseAddress, bytes.count, 0) }
                }
                guard n > 0 else { return nil }
                if let tls {
                    tls.receive(Data(chunk[0..<n]))
                    do {
                        buffered.append(contentsOf: try tls.read())
                    } catch {
                        tlsFailure = error
                        return nil
                    }
                } else {
                    buffered.append(contentsOf: chunk[0..<n])
                }
            }
            defer { start += count }
            return Array(buffered[start..<start + count])
        }
    }
}
