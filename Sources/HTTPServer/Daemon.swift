internal import CMicroHTTPD
import Foundation
import Synchronization

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
            let connectionLimit = UInt32(exactly: configuration.connectionLimit),
            let connectionTimeout = UInt32(exactly: configuration.connectionTimeout)
        else {
            throw HTTPError(
                .internalServerError, .server,
                "the configuration is out of range: maximumBodySize and connectionTimeout must be 0 or more, "
                    + "connectionLimit more than 0")
        }
        let core = Core(responder: responder, maximumBodySize: configuration.maximumBodySize)
        let cls = Unmanaged.passUnretained(core).toOpaque()
        // A thread per connection: a request's thread may wait for its responder without holding up others.
        let flags = UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_THREAD_PER_CONNECTION.rawValue)
        errno = 0
        guard
            let handle = CMicroHTTPD_start_loopback(
                flags, configuration.port, connectionLimit, connectionTimeout, accessHandler, cls, requestCompleted,
                cls)
        else {
            let detail = errno == 0 ? "" : " (\(String(cString: strerror(errno))))"
            throw HTTPError(
                .internalServerError, .server,
                "could not listen on 127.0.0.1:\(configuration.port)\(detail); choose another port or stop the "
                    + "program using it")
        }
        let port = CMicroHTTPD_bound_port(handle)
        guard port != 0 else {
            MHD_stop_daemon(handle)
            throw HTTPError(.internalServerError, .server, "libmicrohttpd started but did not report its port")
        }
        self.handle = handle
        self.core = core
        self.port = port
    }

    deinit {
        MHD_stop_daemon(handle)
    }
}

/// The daemon's configuration and responder, shared by every connection thread. Immutable.
private final class Core: Sendable {
    let responder: any HTTPResponder
    let maximumBodySize: Int

    init(responder: any HTTPResponder, maximumBodySize: Int) {
        self.responder = responder
        self.maximumBodySize = maximumBodySize
    }
}

/// One request's state between access-handler calls, kept in libmicrohttpd's `con_cls` slot. Created on
/// the first call and released by `requestCompleted`. With a thread per connection, the callbacks for a
/// connection run on its thread (or, at shutdown, after that thread is joined), never two at once, so this
/// needs no lock; it never reaches Swift concurrency (the request is copied out of it).
private final class PendingRequest {
    var body = Data()
    /// The body passed the limit: what came is dropped, the rest is discarded, and the answer is 413.
    var tooLarge = false
    /// A response is already queued (the declared length was too large); the rest of the body is discarded.
    var answered = false
}

/// Carries the responder's answer from the Swift task back to the waiting connection thread.
private final class Handoff: Sendable {
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

private let requestCompleted: MHD_RequestCompletedCallback = { _, _, slot, _ in
    guard let slot, let pending = slot.pointee else { return }
    Unmanaged<PendingRequest>.fromOpaque(pending).release()
    slot.pointee = nil
}

private let accessHandler: MHD_AccessHandlerCallback = {
    cls, connection, url, method, _, uploadData, uploadDataSize, slot in
    guard let cls, let connection, let url, let method, let uploadDataSize, let slot else { return .NO }
    let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()

    // The first call: only the headers are in. Refuse a declared length past the limit before reading it.
    guard let existing = slot.pointee else {
        let pending = PendingRequest()
        slot.pointee = Unmanaged.passRetained(pending).toOpaque()
        let declared = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length")
            .flatMap { Int(String(cString: $0)) }
        if let declared, declared > core.maximumBodySize {
            pending.answered = true
            return queue(tooLarge(core), on: connection)
        }
        return .YES
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()

    // A piece of the body: keep it while under the limit, drop everything once past it.
    if uploadDataSize.pointee != 0 {
        let count = uploadDataSize.pointee
        uploadDataSize.pointee = 0
        if pending.answered || pending.tooLarge { return .YES }
        guard let uploadData, pending.body.count + count <= core.maximumBodySize else {
            pending.tooLarge = true
            pending.body = Data()
            return .YES
        }
        pending.body.append(UnsafeRawPointer(uploadData).assumingMemoryBound(to: UInt8.self), count: count)
        return .YES
    }

    // The last call: the whole request is in.
    if pending.answered { return .YES }
    if pending.tooLarge { return queue(tooLarge(core), on: connection) }
    var headers = HTTPHeaders()
    for field in values(of: connection, kind: .HEADER_KIND) { headers.add(field.name, field.value) }
    let request = HTTPRequest(
        method: HTTPMethod(String(cString: method)), path: String(cString: url),
        queryItems: values(of: connection, kind: .GET_ARGUMENT_KIND), headers: headers, body: pending.body)
    pending.body = Data()

    // Wait on this connection's own libmicrohttpd thread (not a Swift concurrency thread, so the pool is
    // never blocked) while the responder runs in a task on the responders' own executor (not the pool,
    // which other work may have filled); the semaphore orders the Mutex write before the read.
    let handoff = Handoff()
    let responder = core.responder
    Task(executorPreference: ResponderExecutor.shared) {
        let response = await responder.response(to: request)
        handoff.response.withLock { $0 = response }
        handoff.done.signal()
    }
    handoff.done.wait()
    let response =
        handoff.response.withLock { $0 }
        ?? HTTPError(.internalServerError, .internalError, "the server failed to answer; try again later").response
    return queue(response, on: connection)
}

private func tooLarge(_ core: Core) -> HTTPResponse {
    HTTPError(
        .contentTooLarge, .contentTooLarge,
        "the body is larger than \(core.maximumBodySize) bytes; send less"
    ).response
}

/// Queues `response`; if libmicrohttpd refuses it (a header it will not send), queues a bare 500 instead.
/// `.NO` closes the connection, for when not even that can be queued.
private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
    if queueOnce(response, on: connection) { return .YES }
    let fallback = HTTPError(.internalServerError, .server, "the server built a response it cannot send").response
    return queueOnce(fallback, on: connection) ? .YES : .NO
}

private func queueOnce(_ response: HTTPResponse, on connection: OpaquePointer) -> Bool {
    guard let status = UInt32(exactly: response.status.code), (100...999).contains(status) else { return false }
    let created = response.body.withUnsafeBytes { bytes in
        MHD_create_response_from_buffer(
            bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let created else { return false }
    defer { MHD_destroy_response(created) }
    for (name, value) in response.headers {
        // libmicrohttpd sets the framing headers from the body itself.
        let lowered = name.lowercased()
        if lowered == "content-length" || lowered == "transfer-encoding" { continue }
        guard MHD_add_response_header(created, name, value) == .YES else { return false }
    }
    return MHD_queue_response(connection, status, created) == .YES
}
