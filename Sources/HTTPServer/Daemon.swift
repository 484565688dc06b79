internal import CMicroHTTPD
import Foundation
import SiblingsCrypto
import Synchronization
import WebSockets

/// Owns one `MHD_Daemon*`: started in `init`, stopped in `deinit`.
final class Daemon {
    let port: UInt16
    private let handle: OpaquePointer
    /// What the C callbacks reach through their `cls` pointer; retained here so it outlives the daemon
    /// (`deinit` stops the daemon, and so every callback, before this reference is released).
    private let core: Core

    init(responder: some HTTPResponder, configuration: HTTPServer.Configuration) throws(HTTPError) {
        guard configuration.maximumBodySize >= 0, configuration.connectionLimit > 0,
            configuration.connectionTimeout >= 0,
            configuration.responderTimeout.map({ $0 > .zero }) ?? true,
            let connectionLimit = UInt32(exactly: configuration.connectionLimit),
            let connectionTimeout = UInt32(exactly: configuration.connectionTimeout)
        else {
            throw HTTPError(
                .internalServerError, .server,
                "the configuration is out of range: maximumBodySize and connectionTimeout must be 0 or more, "
                    + "connectionLimit and responderTimeout more than 0")
        }
        if let reason = EventLoop.unavailable { throw HTTPError(.internalServerError, .server, reason) }
        let connections = ConnectionGuard(
            limits: configuration.limits, connectionLimit: Int(connectionLimit),
            descriptorsPerConnection: configuration.tls == nil ? 1 : 3)
        let core = Core(
            responder: responder, maximumBodySize: configuration.maximumBodySize,
            responderTimeout: configuration.responderTimeout, webSocketKeepalive: configuration.webSocketKeepalive,
            connections: connections)
        let cls = Unmanaged.passUnretained(core).toOpaque()
        // A thread per connection: a request's thread may wait for its responder without holding up others,
        // and block while a streamed body's consumer or producer is slow. Upgrades carry WebSockets. The
        // inter-thread channel lets `drain` stop the listener while connections finish (MHD_quiesce_daemon).
        // poll(2), not select(2): select cannot watch a descriptor past 1023, and libmicrohttpd would refuse it.
        // Its error log goes to MalformedContentLength's logger, which answers the one refusal it garbles.
        // With TLS, libmicrohttpd listens on nothing: the TLS terminator accepts, and adds each connection's
        // plaintext end (MHD_add_connection).
        let flags = UInt32(
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_THREAD_PER_CONNECTION.rawValue
                | MHD_ALLOW_UPGRADE.rawValue | MHD_USE_ITC.rawValue | MHD_USE_POLL.rawValue
                | MHD_USE_ERROR_LOG.rawValue | (configuration.tls == nil ? 0 : MHD_USE_NO_LISTEN_SOCKET.rawValue))
        errno = 0
        guard
            let handle = CMicroHTTPD_start_loopback(
                flags, configuration.tls == nil ? configuration.port : 0, UInt32(connections.httpConnectionLimit),
                connectionTimeout, acceptPolicy, accessHandler, requestCompleted, notifyConnection,
                MalformedContentLength.logger, MalformedContentLength.uriLog, cls)
        else {
            let detail = errno == 0 ? "" : " (\(String(cString: strerror(errno))))"
            throw HTTPError(
                .internalServerError, .server,
                "could not listen on 127.0.0.1:\(configuration.port)\(detail); choose another port or stop the "
                    + "program using it")
        }
        if let tls = configuration.tls {
            let daemon = DaemonHandle(handle)
            let listener: TLSTerminator
            do {
                listener = try TLSTerminator(
                    address: tls.address, port: configuration.port,
                    configuration: .server(
                        certificateChainFile: tls.certificateChainFile, privateKeyFile: tls.privateKeyFile),
                    share: connections
                ) { fd, address, length in MHD_add_connection(daemon.handle, fd, address, length) == .YES }
            } catch {
                connections.stop()
                MHD_stop_daemon(handle)
                throw error
            }
            terminator = listener
            core.tls.withLock { $0 = listener }
            port = listener.port
        } else {
            terminator = nil
            port = CMicroHTTPD_bound_port(handle)
            guard port != 0 else {
                connections.stop()
                MHD_stop_daemon(handle)
                throw HTTPError(.internalServerError, .server, "libmicrohttpd started but did not report its port")
            }
        }
        self.handle = handle
        self.core = core
    }

    /// The TLS listener in front of libmicrohttpd, when the server speaks TLS itself.
    let terminator: TLSTerminator?

    /// The listening socket `drain` took back from libmicrohttpd; closed only after the daemon stops (its
    /// threads may still hold it until then). Touched by `drain` and `deinit`, which the owner never runs at once.
    private var quiescedSocket: Int32?

    /// Stops taking connections (new ones are refused), closes the WebSockets, and waits until every request
    /// in flight has been answered or `deadline` has passed. Returns how many were still in flight then.
    func drain(until deadline: ContinuousClock.Instant) -> Int {
        terminator?.stopAccepting()
        if quiescedSocket == nil {
            let socket = MHD_quiesce_daemon(handle)
            if socket >= 0 {
                quiescedSocket = socket
                // Refuse new connections now rather than leave them in the backlog until the daemon stops: the
                // socket stays open (libmicrohttpd's threads may still hold it), but shut down it accepts nothing.
                _ = CMicroHTTPD_refuse_connections(socket)
            }
        }
        core.closeWebSockets()
        while core.requestsInFlight > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        return core.requestsInFlight
    }

    var connections: ConnectionGuard { core.connections }

    deinit {
        // The WebSockets are the server's own sockets: close them with it.
        core.closeWebSockets()
        // No connection may reach libmicrohttpd once it is stopped.
        terminator?.stopAccepting()
        MHD_stop_daemon(handle)
        core.connections.stop()
        if let quiescedSocket { close(quiescedSocket) }
    }
}

/// The daemon's handle, for the TLS terminator's thread: libmicrohttpd takes added connections from any thread
/// (MHD_USE_ITC), and the terminator stops adding before the daemon stops.
private struct DaemonHandle: @unchecked Sendable {
    let handle: OpaquePointer
    init(_ handle: OpaquePointer) { self.handle = handle }
}

/// The daemon's configuration and responder, shared by every connection thread, and its open WebSockets.
private final class Core: Sendable {
    let responder: any HTTPResponder
    let maximumBodySize: Int
    let responderTimeout: Duration?
    let webSocketKeepalive: WebSocketKeepalive?
    let connections: ConnectionGuard
    /// The server's own TLS, set once right after the daemon starts (before any connection can reach it).
    let tls = Mutex<TLSTerminator?>(nil)
    private let webSockets = Mutex<(next: Int, open: [Int: WebSocket])>((0, [:]))
    /// Requests whose head has arrived and whose exchange has not ended (`requestCompleted` not yet called).
    private let inFlight = Mutex(0)

    var requestsInFlight: Int { inFlight.withLock { $0 } }
    func requestStarted() { inFlight.withLock { $0 += 1 } }
    func requestEnded() { inFlight.withLock { $0 -= 1 } }

    init(
        responder: any HTTPResponder, maximumBodySize: Int, responderTimeout: Duration?,
        webSocketKeepalive: WebSocketKeepalive?, connections: ConnectionGuard
    ) {
        self.webSocketKeepalive = webSocketKeepalive
        self.connections = connections
        self.responder = responder
        self.maximumBodySize = maximumBodySize
        self.responderTimeout = responderTimeout
    }

    /// Runs `upgrade` on the upgraded socket `fd` (ours: closed when the WebSocket's reader ends), in the place
    /// ``ConnectionGuard/reserveWebSocket(for:)`` took for it.
    func startWebSocket(_ upgrade: WebSocketUpgrade, fd given: Int32, extra bytes: Data) {
        // Over the server's own TLS the WebSocket takes the client's socket and TLS state from the tunnel, and the
        // pair's end libmicrohttpd handed over is closed.
        let fd: Int32
        let extra: Data
        let engine: TLSEngine?
        var owed = Data()
        if let terminator = tls.withLock({ $0 }) {
            guard let handoff = terminator.takeOver(applicationEnd: given) else {
                _ = Glibc.close(given)
                connections.webSocketEnded(address: upgrade.request.remoteAddress, silent: false)
                return
            }
            _ = Glibc.close(given)
            (fd, extra, engine) = (handoff.network, bytes + handoff.pending, handoff.engine)
            owed = handoff.unsent
        } else {
            (fd, extra, engine) = (given, bytes, nil)
        }
        // libmicrohttpd turned Nagle back on for the upgrade; frames go out as they are written.
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let key = webSockets.withLock { sockets in
            defer { sockets.next += 1 }
            return sockets.next
        }
        let address = upgrade.request.remoteAddress
        let socket = WebSocket(
            role: .server, fd: fd, maximumMessageSize: upgrade.maximumMessageSize, initialBytes: extra,
            keepalive: webSocketKeepalive, tls: engine, initialOutput: owed
        ) { [self] silent in
            _ = Glibc.close(fd)
            _ = webSockets.withLock { $0.open.removeValue(forKey: key) }
            connections.webSocketEnded(address: address, silent: silent)
        }
        webSockets.withLock { $0.open[key] = socket }
        switch upgrade.run {
        case .consumer(let make):
            socket.start(consumer: make(upgrade.request, socket))
        case .handler(let handler):
            socket.start()
            Task(executorPreference: ResponderExecutor.shared) {
                do {
                    try await handler(upgrade.request, socket)
                    await socket.close()
                } catch {
                    await socket.close(code: .internalError, reason: "the server failed")
                }
            }
        }
    }

    /// Sends every open WebSocket a close frame with 1001 (going away), shuts it down, and waits (up to 2 s in
    /// all) until each has been released.
    func closeWebSockets() {
        let open = webSockets.withLock { Array($0.open.values) }
        for socket in open { socket.goAway() }
        let deadline = DispatchTime.now() + 2
        for socket in open { _ = socket.waitUntilClosed(deadline: deadline) }
    }
}

/// One request's state between access-handler calls, kept in libmicrohttpd's `con_cls` slot. Created on
/// the first call and released by `requestCompleted`. With a thread per connection, the callbacks for a
/// connection run on its thread (or, at shutdown, after that thread is joined), never two at once, so this
/// needs no lock; it never reaches Swift concurrency (the request is copied out of it).
private final class PendingRequest {
    /// The method, path, query and headers, read on the first call.
    let head: HTTPRequest
    /// The most body bytes accepted: the route's stream limit, or the server's maximum.
    let limit: Int
    /// Set on a streaming route: the connection thread puts the body in as it arrives.
    var stream: HTTPBodyStream?
    var received = 0
    var body = Data()
    /// The body passed the limit: what came is dropped, the rest is discarded, and the answer is 413.
    var tooLarge = false
    /// A response is already queued (the declared length was too large); the rest of the body is discarded.
    var answered = false
    /// The responder's task: started when the body is in, or with the head on a streaming route.
    var task: Task<Void, Never>?
    var exchange: Exchange?
    /// The WebSocket to run once libmicrohttpd hands over the upgraded socket.
    var webSocket: WebSocketUpgrade?
    /// A WebSocket place is taken for this request's 101, under this client address (the upgrade request's,
    /// which a forwarded-for middleware may have set), and not yet handed to the socket.
    var webSocketPlace: String??
    /// The connection's deadlines (nil if libmicrohttpd did not report the connection).
    var watched: WatchedConnection?

    init(head: HTTPRequest, limit: Int) {
        self.head = head
        self.limit = limit
    }

    /// Starts the responder on `request` in a task on the responders' own executor (not the pool, which
    /// other work may have filled).
    func start(_ request: HTTPRequest, responder: any HTTPResponder) {
        let exchange = Exchange()
        self.exchange = exchange
        task = Task(executorPreference: ResponderExecutor.shared) {
            let response = await responder.response(to: request)
            // The handler is done with the body: the connection thread discards what is left of it.
            request.bodyStream?.queue.abandon()
            exchange.response.withLock { $0 = response }
            exchange.done.signal()
        }
    }

    /// Waits on this connection's own libmicrohttpd thread (not a Swift concurrency thread, so the pool is
    /// never blocked) for the responder's answer, or a 503 once `timeout` has passed (the task is cancelled).
    func response(timeout: Duration?) -> HTTPResponse {
        guard let exchange else {
            return HTTPError(.internalServerError, .internalError, "the server failed to answer; try again later")
                .response
        }
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
            let limit =
                nanoseconds.overflow ? Int.max : Int(clamping: nanoseconds.partialValue + attoseconds / 1_000_000_000)
            if exchange.done.wait(timeout: .now() + .nanoseconds(limit)) == .timedOut {
                task?.cancel()
                return HTTPError(
                    .serviceUnavailable, .timeout,
                    "the server took longer than \(timeout) to answer; try again later"
                ).response
            }
        } else {
            exchange.done.wait()
        }
        // The semaphore orders the Mutex write before this read.
        return exchange.response.withLock { $0 }
            ?? HTTPError(.internalServerError, .internalError, "the server failed to answer; try again later")
            .response
    }
}

/// Carries the responder's answer from the Swift task back to the waiting connection thread.
private final class Exchange: Sendable {
    let response = Mutex<HTTPResponse?>(nil)
    let done = DispatchSemaphore(value: 0)
}

/// Collects `name: value` pairs through `MHD_get_connection_values`; used on one thread only.
private final class FieldCollector {
    var fields: [(name: String, value: String)] = []
}

private let collectField: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let collector = Unmanaged<FieldCollector>.fromOpaque(cls).takeUnretainedValue()
    collector.fields.append((String(cString: key), value.map { String(cString: $0) } ?? ""))
    return .YES
}

private func values(of connection: OpaquePointer, kind: MHD_ValueKind) -> [(name: String, value: String)] {
    let collector = FieldCollector()
    withExtendedLifetime(collector) {
        _ = MHD_get_connection_values(
            connection, kind, collectField, Unmanaged.passUnretained(collector).toOpaque())
    }
    return collector.fields
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, _, slot, termination in
    guard let slot, let raw = slot.pointee else { return }
    let pending = Unmanaged<PendingRequest>.fromOpaque(raw).takeRetainedValue()
    slot.pointee = nil
    pending.watched?.awaitingHead()
    if let cls {
        let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
        core.requestEnded()
        // The 101 was never sent, or its socket never handed over.
        if let address = pending.webSocketPlace {
            core.connections.webSocketEnded(address: address, silent: false)
        }
    }
    guard termination.rawValue != 0 else { return }  // 0 is MHD_REQUEST_TERMINATED_COMPLETED_OK
    // The client went away (or the server is stopping) before the exchange finished: a handler still
    // reading the body learns it from the stream, and its task is cancelled.
    pending.stream?.queue.finish(
        throwing: HTTPError(
            .badRequest, .clientDisconnected, "the client disconnected before sending the whole body"))
    pending.task?.cancel()
}

/// The peer's IP address as text, or nil when libmicrohttpd cannot say.
private func clientAddress(of connection: OpaquePointer) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    guard CMicroHTTPD_client_address(connection, &buffer, buffer.count) == 1 else { return nil }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private let accessHandler: MHD_AccessHandlerCallback = {
    cls, connection, url, method, _, uploadData, uploadDataSize, slot in
    guard let cls, let connection, let url, let method, let uploadDataSize, let slot else { return .NO }
    let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()

    // The first call: only the headers are in. Ask how the body is taken, and refuse a declared length past
    // the limit before reading it.
    guard let existing = slot.pointee else {
        var headers = HTTPHeaders()
        for field in values(of: connection, kind: .HEADER_KIND) { headers.add(field.name, field.value) }
        let head = HTTPRequest(
            method: HTTPMethod(String(cString: method)), path: String(cString: url),
            queryItems: values(of: connection, kind: .GET_ARGUMENT_KIND), headers: headers,
            remoteAddress: clientAddress(of: connection))
        let policy = core.responder.bodyPolicy(for: head)
        var limit = core.maximumBodySize
        if case .stream(let streamLimit) = policy { limit = max(0, streamLimit) }
        let pending = PendingRequest(head: head, limit: limit)
        pending.watched = CMicroHTTPD_socket_context(connection).map {
            Unmanaged<WatchedConnection>.fromOpaque($0).takeUnretainedValue()
        }
        pending.watched?.bodyStarted()
        slot.pointee = Unmanaged.passRetained(pending).toOpaque()
        core.requestStarted()
        let declared = headers["Content-Length"].flatMap { Int($0) }
        if let declared, declared > limit {
            pending.answered = true
            return queue(HTTPError.tooLarge(limit: limit).response, on: connection, core: core, pending: pending)
        }
        if case .stream = policy {
            let stream = HTTPBodyStream()
            pending.stream = stream
            var request = head
            request.bodyStream = stream
            pending.start(request, responder: core.responder)
        }
        return .YES
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()

    // A piece of the body: keep it (or hand it to the stream, blocking while the handler is behind) while
    // under the limit, drop everything once past it.
    if uploadDataSize.pointee != 0 {
        let count = uploadDataSize.pointee
        uploadDataSize.pointee = 0
        if pending.answered || pending.tooLarge { return .YES }
        guard let uploadData, pending.received + count <= pending.limit else {
            pending.body = Data()
            guard let stream = pending.stream else {
                pending.tooLarge = true
                return .YES
            }
            // The handler learns from its stream; the client gets 413 now, or at the end if it cannot be
            // queued while the body is still coming.
            stream.queue.finish(throwing: HTTPError.tooLarge(limit: pending.limit))
            pending.task?.cancel()
            if queueOnce(HTTPError.tooLarge(limit: pending.limit).response, on: connection, core: core) {
                pending.answered = true
            } else {
                pending.tooLarge = true
            }
            return .YES
        }
        pending.received += count
        pending.watched?.received(count)
        let piece = Data(bytes: uploadData, count: count)
        if let stream = pending.stream {
            // While the handler is behind, the client is not the slow one: the rate clock stops.
            pending.watched?.holdBody()
            stream.queue.put(piece)
            pending.watched?.resumeBody()
        } else {
            pending.body.append(piece)
        }
        return .YES
    }

    // The last call: the whole request is in.
    pending.watched?.serverBusy()
    if pending.answered { return .YES }
    if pending.tooLarge {
        return queue(HTTPError.tooLarge(limit: pending.limit).response, on: connection, core: core, pending: pending)
    }
    if let stream = pending.stream {
        stream.queue.finish()
    } else {
        var request = pending.head
        request.body = pending.body
        pending.body = Data()
        pending.start(request, responder: core.responder)
    }
    let response = pending.response(timeout: core.responderTimeout)
    return queue(response, on: connection, core: core, pending: pending)
}

/// Queues `response`; if libmicrohttpd refuses it (a header it will not send), queues a bare 500 instead.
/// `.NO` closes the connection, for when not even that can be queued.
private func queue(
    _ response: HTTPResponse, on connection: OpaquePointer, core: Core, pending: PendingRequest
) -> MHD_Result {
    var response = response
    if let upgrade = response.webSocket {
        // Counted under the client the router saw (behind a trusted proxy, the forwarded address).
        let address = upgrade.request.remoteAddress
        if let refusal = core.connections.reserveWebSocket(for: address) {
            response = refusal.response
        } else {
            pending.webSocketPlace = .some(address)
        }
    }
    pending.webSocket = response.webSocket
    if queueOnce(response, on: connection, core: core) { return .YES }
    pending.webSocket = nil
    if let address = pending.webSocketPlace {
        pending.webSocketPlace = nil
        core.connections.webSocketEnded(address: address, silent: false)
    }
    let fallback = HTTPError(.internalServerError, .server, "the server built a response it cannot send").response
    return queueOnce(fallback, on: connection, core: core) ? .YES : .NO
}

private func queueOnce(_ response: HTTPResponse, on connection: OpaquePointer, core: Core) -> Bool {
    guard let status = UInt32(exactly: response.status.code), (100...999).contains(status) else { return false }
    let created: OpaquePointer?
    if response.webSocket != nil {
        // The upgrade handler finds the WebSocket to run in the request's `con_cls` (set by `queue`).
        created = MHD_create_response_for_upgrade(upgradeHandler, Unmanaged.passUnretained(core).toOpaque())
    } else if let stream = response.bodyStream {
        guard stream.length.map({ $0 >= 0 }) ?? true else { return false }
        let pipe = ResponsePipe()
        let size = stream.length.map { UInt64($0) } ?? UInt64.max  // UInt64.max is MHD_SIZE_UNKNOWN: chunked
        let cls = Unmanaged.passRetained(pipe).toOpaque()
        created = MHD_create_response_from_callback(size, 64 << 10, readStream, cls, freeStream)
        guard created != nil else {
            Unmanaged<ResponsePipe>.fromOpaque(cls).release()
            return false
        }
        Task(executorPreference: ResponderExecutor.shared) {
            do {
                try await stream.producer(HTTPBodyWriter { try await pipe.write($0) })
                pipe.finish(throwing: nil)
            } catch {
                pipe.finish(throwing: error)
            }
        }
    } else {
        created = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
    }
    guard let created else { return false }
    defer { MHD_destroy_response(created) }
    for (name, value) in response.headers {
        // libmicrohttpd sets the framing headers from the body itself (or the stream's length).
        let lowered = name.lowercased()
        if lowered == "content-length" || lowered == "transfer-encoding" { continue }
        guard MHD_add_response_header(created, name, value) == .YES else { return false }
    }
    return MHD_queue_response(connection, status, created) == .YES
}

/// libmicrohttpd's content reader for a streamed response: blocks the connection thread until the producer
/// has written some bytes. -1 is MHD_CONTENT_READER_END_OF_STREAM, -2 MHD_CONTENT_READER_END_WITH_ERROR
/// (the connection is dropped, so a client sees a failed producer as a truncated body).
private let readStream: MHD_ContentReaderCallback = { cls, _, buffer, count in
    guard let cls, let buffer else { return -2 }
    let pipe = Unmanaged<ResponsePipe>.fromOpaque(cls).takeUnretainedValue()
    switch pipe.read(into: buffer, count: count) {
    case .bytes(let n): return n
    case .end: return -1
    case .failed: return -2
    }
}

/// libmicrohttpd is done with a streamed response (sent, or the client left): the producer stops.
private let freeStream: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let pipe = Unmanaged<ResponsePipe>.fromOpaque(cls).takeRetainedValue()
    pipe.readerGone()
}

/// The 101 was sent. libmicrohttpd 0.9.75 has a use-after-free when `MHD_upgrade_action(CLOSE)` comes from
/// another thread while its listen thread cleans up (fixed upstream in 0.9.77, "Fixed data races when closing
/// upgraded connection"; Debian 12 ships 0.9.75): under churn of a thousand WebSockets it corrupted the heap.
/// So the upgraded socket is duplicated and handed back at once, here on the connection's own thread, where that
/// close is safe; the WebSocket owns the duplicate and closes it with close(2), and libmicrohttpd closes its own
/// descriptor without shutting the connection down (docs/http-platform.md, "WebSockets off libmicrohttpd").
private let upgradeHandler: MHD_UpgradeHandler = { cls, _, slot, extraIn, extraCount, fd, urh in
    guard let urh else { return }
    let extra = extraIn.map { Data(bytes: $0, count: extraCount) } ?? Data()
    let own = fcntl(fd, F_DUPFD_CLOEXEC, 0)
    // Fails only for a handle already closed, which nothing here does.
    _ = CMicroHTTPD_upgrade_close(urh)
    guard own >= 0, let cls, let slot else {
        if own >= 0 { close(own) }
        return
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(slot).takeUnretainedValue()
    // libmicrohttpd's descriptor shares the connection with ours: the watchdog must never shut it down.
    pending.watched?.closed()
    guard let upgrade = pending.webSocket, pending.webSocketPlace != nil else {
        close(own)
        return
    }
    // The place goes to the socket, which gives it back when it closes.
    pending.webSocketPlace = nil
    let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
    core.startWebSocket(upgrade, fd: own, extra: extra)
}

/// libmicrohttpd's accept policy: refuses a connection whose address holds its share already (closed unanswered).
private let acceptPolicy: MHD_AcceptPolicyCallback = { cls, address, _ in
    guard let cls else { return .YES }
    let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    let text =
        CMicroHTTPD_address_text(address, &buffer, buffer.count) == 1
        ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    return core.connections.admits(text) ? .YES : .NO
}

/// A connection opened or closed: counted per address, and watched for its deadlines while open. libmicrohttpd
/// reports the close before it closes the descriptor, so the watchdog never shuts down a reused one.
private let notifyConnection: MHD_NotifyConnectionCallback = { cls, connection, context, event in
    guard let cls, let connection, let context else { return }
    let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
    switch event {
    case MHD_ConnectionNotificationCode(rawValue: 0):  // MHD_CONNECTION_NOTIFY_STARTED
        let watched = core.connections.connectionStarted(
            fd: CMicroHTTPD_connection_fd(connection), address: clientAddress(of: connection))
        context.pointee = Unmanaged.passRetained(watched).toOpaque()
    case MHD_ConnectionNotificationCode(rawValue: 1):  // MHD_CONNECTION_NOTIFY_CLOSED
        guard let raw = context.pointee else { return }
        context.pointee = nil
        core.connections.connectionClosed(Unmanaged<WatchedConnection>.fromOpaque(raw).takeRetainedValue())
    default:
        break
    }
}
