internal import CMicroHTTPD
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Our own answer to a request whose `Content-Length` libmicrohttpd cannot parse.
///
/// libmicrohttpd 0.9.75 (Debian 12's) refuses such a request itself, 400 for a value that is not digits (a
/// trailing space included) and 413 for one past 2^64, but sends its error page's header block twice, so the
/// client reads a body that does not match its `Content-Length`. In `parse_connection_headers` the refusal
/// queues the page and builds its headers, then `MHD_connection_handle_idle` overwrites the connection's state
/// and builds them again (connection.c 3611-3637 and 4538-4545; fixed upstream in 1.0.0). The request never
/// reaches the access handler.
///
/// The one moment an application runs in between is the error logger: libmicrohttpd logs why it refuses just
/// before it answers, on the connection's own thread (a thread per connection). So the URI log callback, which
/// runs on that thread when the request line arrives, notes the connection for the thread; on one of those two
/// messages the logger writes the documented JSON `{"error", "reason"}` answer on that connection's socket and
/// shuts the socket for writing. libmicrohttpd's own answer then fails to send, and it closes the connection.
/// A newer libmicrohttpd that answers well is unaffected: ours goes first, and its answer is dropped.
enum MalformedContentLength {
    /// The connection whose request line this thread read last, set by ``uriLog``.
    private static let current: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    /// MHD_OPTION_URI_LOG_CALLBACK: notes the connection for the thread; returns no `con_cls`.
    static let uriLog: CMicroHTTPD_URILogCallback = { _, _, connection in
        if let key = current { _ = pthread_setspecific(key, UnsafeRawPointer(connection)) }
        return nil
    }

    /// MHD_OPTION_EXTERNAL_LOGGER: answers the two refusals it is told of; every other message is dropped (as
    /// without a logger).
    static let logger: MHD_LogCallback = { _, format, _ in
        guard let format, let key = current, let connection = pthread_getspecific(key) else { return }
        let message = String(cString: format)
        guard message.contains("Content-Length' header") else { return }
        let error =
            message.contains("Too large")
            ? HTTPError(
                .contentTooLarge, .contentTooLarge,
                "Content-Length is past what any server can take (2^64 bytes); send the body's real length")
            : HTTPError(
                .badRequest, .badRequest,
                "Content-Length must be the body's length in decimal digits and nothing else, or leave it out and "
                    + "send the body chunked")
        answer(error, on: OpaquePointer(connection))
    }

    private static func answer(_ error: HTTPError, on connection: OpaquePointer) {
        let fd = CMicroHTTPD_connection_fd(connection)
        guard fd >= 0 else { return }
        let response = error.response
        var bytes = Data(
            ("HTTP/1.1 \(error.status.code) \(phrase(error.status.code))\r\nConnection: close\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(response.body.count)\r\n\r\n").utf8)
        bytes.append(response.body)
        // A new connection's send buffer takes a few hundred bytes at once. If it does not, libmicrohttpd's own
        // answer is left to go out rather than none.
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(Glibc.MSG_NOSIGNAL)) }
        guard sent > 0 else { return }
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    private static func phrase(_ code: Int) -> String { code == 413 ? "Content Too Large" : "Bad Request" }
}
