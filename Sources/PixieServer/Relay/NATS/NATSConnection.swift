internal import CNATS
import Foundation
import Storage
import Synchronization

/// One connection to a NATS server (libnats, the NATS C client), owning its handle: publish, flush, subscribe,
/// request. libnats is thread-safe; callbacks of a subscription run on libnats' own threads.
///
/// It reconnects by itself (forever, every 100 ms), but keeps nothing to publish while it does: libnats would
/// hold publishes in an 8 MB buffer and send them once back, long after the relay answered; here its buffer is
/// one byte, so a publish while disconnected fails, and ``isConnected`` says so before anything is tried.
public final class NATSConnection: @unchecked Sendable {
    // @unchecked: the handle is libnats', which is thread-safe; it is destroyed once, in deinit.
    private let handle: OpaquePointer
    /// What hears the link go down and come back. libnats holds a retain of its own as its callbacks' closure,
    /// which its closed callback (its last, also when libnats closes the connection by itself) gives back.
    private let link: LinkWatch
    /// Where it connects, for messages and logs: the URL with its password or token masked
    /// (``ConnectionURL/redacted(_:)``). The URL as given is never kept.
    public let url: String

    /// Connects to `url` (`nats://host:port`). With `sendImmediately`, each publish is written at once instead of
    /// with the next flush (libnats' SendAsap). With `tlsCAFile`, the connection must be TLS, and the server's
    /// certificate must chain to a CA in that PEM file and name the URL's host.
    ///
    /// - Throws: ``NATSError`` when the server cannot be reached.
    ///
    /// `onLink` is called on a libnats thread each time the connection goes down (false: the server went away,
    /// or stopped answering its PINGs, every ``pingInterval``, two unanswered at most) and comes back (true).
    public init(
        url given: String, sendImmediately: Bool = false, tlsCAFile: String? = nil,
        onLink: @escaping @Sendable (Bool) -> Void = { _ in }
    ) throws(NATSError) {
        let url = ConnectionURL.redacted(given)
        let link = LinkWatch(onLink)
        let forLibnats = Unmanaged.passRetained(link)
        var connected = false
        defer { if !connected { forLibnats.release() } }
        var options: OpaquePointer?
        try Self.check(natsOptions_Create(&options), "create its options", url: url)
        defer { natsOptions_Destroy(options) }
        try Self.check(natsOptions_SetURL(options, given), "take the URL", url: url)
        if let tlsCAFile {
            try Self.check(natsOptions_SetSecure(options, true), "require TLS", url: url)
            try Self.check(
                natsOptions_LoadCATrustedCertificates(options, tlsCAFile), "read the CA file \(tlsCAFile)", url: url)
        }
        try Self.check(natsOptions_SetAllowReconnect(options, true), "allow reconnects", url: url)
        try Self.check(natsOptions_SetMaxReconnect(options, -1), "reconnect forever", url: url)
        try Self.check(natsOptions_SetReconnectWait(options, 100), "set the reconnect wait", url: url)
        try Self.check(natsOptions_SetReconnectBufSize(options, 1), "set the reconnect buffer", url: url)
        // A node delivers to its own subscribers itself; NATS carries frames to the other nodes only.
        try Self.check(natsOptions_SetNoEcho(options, true), "set no-echo", url: url)
        try Self.check(natsOptions_SetSendAsap(options, sendImmediately), "set SendAsap", url: url)
        // A link that goes silent (no close, no answer) is down after two unanswered PINGs.
        try Self.check(
            natsOptions_SetPingInterval(options, Self.milliseconds(Self.pingInterval)), "set the PING interval",
            url: url)
        try Self.check(natsOptions_SetMaxPingsOut(options, 2), "set the PINGs outstanding", url: url)
        let watch = forLibnats.toOpaque()
        try Self.check(
            natsOptions_SetDisconnectedCB(
                options,
                { _, closure in
                    if let closure { Unmanaged<LinkWatch>.fromOpaque(closure).takeUnretainedValue().changed(false) }
                }, watch), "watch for disconnects", url: url)
        try Self.check(
            natsOptions_SetReconnectedCB(
                options,
                { _, closure in
                    if let closure { Unmanaged<LinkWatch>.fromOpaque(closure).takeUnretainedValue().changed(true) }
                }, watch), "watch for reconnects", url: url)
        // libnats runs its callbacks on a thread of its own, possibly after natsConnection_Destroy returned; the
        // closed callback is the last it runs, so it lets the closure go.
        try Self.check(
            natsOptions_SetClosedCB(
                options,
                { _, closure in
                    if let closure { Unmanaged<LinkWatch>.fromOpaque(closure).release() }
                }, watch), "watch for the close", url: url)
        var connection: OpaquePointer?
        try Self.check(natsConnection_Connect(&connection, options), "connect", url: url)
        guard let connection else { throw NATSError("libnats gave no connection to \(url)") }
        self.handle = connection
        self.url = url
        self.link = link
        connected = true
    }

    /// How often libnats PINGs the server; two unanswered, and the link counts as down.
    public static let pingInterval: Duration = .seconds(2)

    deinit {
        // Closing is no lost link; libnats' retain of the closure is given back by its closed callback.
        link.stop()
        natsConnection_Close(handle)
        natsConnection_Destroy(handle)
    }

    /// Whether the connection is up now (not reconnecting, not closed).
    public var isConnected: Bool { natsConnection_Status(handle) == NATS_CONN_STATUS_CONNECTED }

    /// The connection's state in words, with libnats' last error when it has one: for logs and diagnostics.
    public var stateDescription: String {
        let state: String
        switch natsConnection_Status(handle) {
        case NATS_CONN_STATUS_DISCONNECTED: state = "disconnected"
        case NATS_CONN_STATUS_CONNECTING: state = "connecting"
        case NATS_CONN_STATUS_CONNECTED: state = "connected"
        case NATS_CONN_STATUS_CLOSED: state = "closed"
        case NATS_CONN_STATUS_RECONNECTING: state = "reconnecting"
        default: state = "draining"
        }
        var text: UnsafePointer<CChar>?
        let error = natsConnection_GetLastError(handle, &text)
        guard error != NATS_OK, let text else { return state }
        return "\(state), last error: \(String(cString: text))"
    }

    /// Publishes `data` on `subject` (libnats writes it with the next flush).
    public func publish(_ data: Data, to subject: String) throws(NATSError) {
        let status = data.withUnsafeBytes { natsConnection_Publish(handle, subject, $0.baseAddress, Int32($0.count)) }
        try Self.check(status, "publish on \(subject)", url: url)
    }

    /// How many times libnats has reconnected this connection (`natsStatistics`' reconnects); nil if libnats
    /// could not say. ``flush(timeout:reconnectsBefore:)`` compares it.
    public var reconnects: UInt64? {
        var statistics: OpaquePointer?
        guard natsStatistics_Create(&statistics) == NATS_OK, let statistics else { return nil }
        defer { natsStatistics_Destroy(statistics) }
        var (inMessages, inBytes, outMessages, outBytes, count): (UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0)
        guard natsConnection_GetStats(handle, statistics) == NATS_OK,
            natsStatistics_GetCounts(statistics, &inMessages, &inBytes, &outMessages, &outBytes, &count) == NATS_OK
        else { return nil }
        return count
    }

    /// Returns once the server has everything published so far (a PING's PONG), or throws after `timeout`.
    ///
    /// libnats 3.4's flush (`natsConnection_FlushTimeout`) has two holes, closed here:
    /// - It returns OK without any PONG when the PING cannot be written, which is what happens when the server
    ///   has just gone and libnats has not noticed yet; what was written with the PING is lost. The failed write
    ///   is left only in this thread's last libnats error, so that is cleared before and read after.
    /// - It waits through a reconnect, and the new server's PONG then ends it well, though what was written
    ///   before went down with the old connection. So the connection must be up when it starts, and with
    ///   `reconnectsBefore` (``reconnects`` taken before those publishes) no reconnect may have happened since.
    public func flush(timeout: Duration, reconnectsBefore: UInt64? = nil) throws(NATSError) {
        guard isConnected else {
            throw NATSError("NATS at \(url) is not connected, so nothing sent to it can be confirmed; try again")
        }
        nats_clearLastError()
        try Self.check(natsConnection_FlushTimeout(handle, Self.milliseconds(timeout)), "flush", url: url)
        var written = NATS_OK
        let reason = nats_GetLastError(&written).map { String(cString: $0) } ?? ""
        guard written == NATS_OK else {
            throw NATSError("NATS at \(url) could not be written to (\(reason)); what was sent is lost, try again")
        }
        if let reconnectsBefore, reconnects != reconnectsBefore {
            throw NATSError(
                "NATS at \(url) reconnected meanwhile; what was sent before went down with the old connection, "
                    + "try again")
        }
    }

    /// Whether anything subscribes `subject` on the server: a request that some subscriber answers, or that the
    /// server answers with "no responders" at once. A timeout counts as no.
    public func hasResponders(_ subject: String, timeout: Duration) -> Bool {
        var reply: OpaquePointer?
        let status = natsConnection_Request(&reply, handle, subject, nil, 0, Self.milliseconds(timeout))
        if let reply { natsMsg_Destroy(reply) }
        return status == NATS_OK
    }

    /// Calls `handler` with each message's data on `subject` (on a libnats thread), and answers each request
    /// (a message with a reply subject) with `answer` when it is given.
    public func subscribe(
        _ subject: String, answer: Data? = nil, handler: @escaping @Sendable (Data) -> Void
    ) throws(NATSError) -> NATSSubscription {
        let box = NATSSubscription.Box(handler: handler, answer: answer)
        var subscription: OpaquePointer?
        let status = natsConnection_Subscribe(
            &subscription, handle, subject,
            { connection, _, message, closure in
                guard let message, let closure else { return }
                let box = Unmanaged<NATSSubscription.Box>.fromOpaque(closure).takeUnretainedValue()
                let data = Data(bytes: natsMsg_GetData(message), count: Int(natsMsg_GetDataLength(message)))
                if let answer = box.answer, let reply = natsMsg_GetReply(message) {
                    _ = answer.withUnsafeBytes {
                        natsConnection_Publish(connection, reply, $0.baseAddress, Int32($0.count))
                    }
                }
                natsMsg_Destroy(message)
                box.handler(data)
            }, Unmanaged.passRetained(box).toOpaque())
        guard status == NATS_OK, let subscription else {
            Unmanaged.passUnretained(box).release()
            try Self.check(status, "subscribe \(subject)", url: url)
            throw NATSError("libnats gave no subscription for \(subject)")
        }
        // libnats holds the box until the subscription is closed and its last callback has returned.
        natsSubscription_SetOnCompleteCB(
            subscription,
            { closure in
                if let closure { Unmanaged<NATSSubscription.Box>.fromOpaque(closure).release() }
            }, Unmanaged.passUnretained(box).toOpaque())
        return NATSSubscription(handle: subscription)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    static func check(_ status: natsStatus, _ what: String, url: String) throws(NATSError) {
        guard status == NATS_OK else {
            throw NATSError(
                "NATS at \(url) could not \(what): \(String(cString: natsStatus_GetText(status))); check that "
                    + "nats-server runs there")
        }
    }
}

/// One subscription; ended by ``cancel()`` or when it is released. A callback already under way when it ends may
/// still finish.
public final class NATSSubscription: @unchecked Sendable {
    // @unchecked: libnats' handle is thread-safe; `ended` guards the one unsubscribe.
    final class Box: Sendable {
        let handler: @Sendable (Data) -> Void
        let answer: Data?
        init(handler: @escaping @Sendable (Data) -> Void, answer: Data?) {
            self.handler = handler
            self.answer = answer
        }
    }

    private let handle: OpaquePointer
    private let ended = Atomic(false)

    init(handle: OpaquePointer) { self.handle = handle }

    /// Unsubscribes. Idempotent.
    public func cancel() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        natsSubscription_Unsubscribe(handle)
    }

    deinit {
        cancel()
        natsSubscription_Destroy(handle)
    }
}

/// A NATS failure, with what to check.
public struct NATSError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The closure of a connection's disconnect and reconnect callbacks.
final class LinkWatch: Sendable {
    private let handler: @Sendable (Bool) -> Void
    private let stopped = Atomic(false)

    init(_ handler: @escaping @Sendable (Bool) -> Void) { self.handler = handler }

    func changed(_ up: Bool) {
        guard !stopped.load(ordering: .acquiring) else { return }
        handler(up)
    }

    /// The connection is being closed by its owner: that is no lost link.
    func stop() { stopped.store(true, ordering: .releasing) }
}
