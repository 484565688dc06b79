import Foundation
import SiblingsCrypto
import Synchronization
import WebSockets

/// A running HTTP/1.1 server on 127.0.0.1 (libmicrohttpd) that hands each complete request to a responder.
///
/// It starts in `init` and stops in ``shutdown()`` (or when released). Bodies are collected up to
/// ``Configuration/maximumBodySize``; a longer one is answered with 413 and never buffered past the limit.
/// Routes that opt in (``HTTPResponder/bodyPolicy(for:)``) read their body as a stream instead, responses may
/// stream theirs (``HTTPResponse/stream(status:headers:length:producer:)``), and WebSocket routes take over
/// the connection (``Router/webSocket(_:maximumMessageSize:handler:)``); shutdown closes open WebSockets.
/// Errors a responder throws become responses as described on ``HTTPResponder``.
///
/// Each connection gets its own libmicrohttpd thread, which waits while the responder runs on the Swift
/// concurrency pool; ``Configuration/connectionLimit`` bounds those threads. Do not call ``shutdown()``
/// from inside a handler: it waits for every request in flight, that one included. Releasing the server
/// without ``shutdown()`` stops it the same way, blocking the releasing thread.
public final class HTTPServer: Sendable {
    public struct Configuration: Sendable {
        /// The TCP port (on 127.0.0.1, or on ``TLS-swift.struct/address`` with TLS); 0 lets the system choose one
        /// (read it from ``HTTPServer/port``).
        public var port: UInt16
        /// The longest request body accepted, in bytes; longer ones get 413.
        public var maximumBodySize: Int
        /// Connections open at once; more are refused until one closes.
        public var connectionLimit: Int
        /// Seconds a connection may sit idle before the server closes it.
        public var connectionTimeout: Int
        /// How long a responder may take once the body is in (on a streaming route: once the last byte of
        /// it has arrived) before the client gets a 503 ``HTTPError/Code/timeout`` and the responder's task
        /// is cancelled; `nil` waits as long as it takes. Streamed response bodies and WebSockets are not
        /// timed (a download of many GiB may take long); only the wait for the response's head is.
        public var responderTimeout: Duration?
        /// When the server pings a quiet WebSocket and closes one that does not answer; `nil` never does.
        public var webSocketKeepalive: WebSocketKeepalive? = WebSocketKeepalive()
        /// Per-address and overall limits, the header deadline and the minimum body rate.
        public var limits = ConnectionLimits()
        /// Serve HTTPS (and WSS) itself rather than plain HTTP on 127.0.0.1; `nil` (the default) is plain HTTP for a
        /// TLS-terminating proxy on the same machine.
        public var tls: TLS?

        /// HTTPS served by the server itself (TLS 1.2 and 1.3, ``TLSConfiguration``).
        public struct TLS: Sendable, Equatable {
            /// PEM, leaf first (certbot's `fullchain.pem`).
            public var certificateChainFile: String
            /// PEM (certbot's `privkey.pem`).
            public var privateKeyFile: String
            /// The IP address to listen on: `0.0.0.0` or `::` for every interface, 127.0.0.1 for this machine only.
            public var address: String

            public init(certificateChainFile: String, privateKeyFile: String, address: String = "127.0.0.1") {
                self.certificateChainFile = certificateChainFile
                self.privateKeyFile = privateKeyFile
                self.address = address
            }
        }

        public init(
            port: UInt16 = 0, maximumBodySize: Int = 1 << 20, connectionLimit: Int = 64, connectionTimeout: Int = 30,
            responderTimeout: Duration? = .seconds(30)
        ) {
            self.port = port
            self.maximumBodySize = maximumBodySize
            self.connectionLimit = connectionLimit
            self.connectionTimeout = connectionTimeout
            self.responderTimeout = responderTimeout
        }
    }

    /// The port the server listens on (the chosen one when the configuration said 0).
    public let port: UInt16

    private let daemon: Mutex<Daemon?>
    private let connections: ConnectionGuard

    /// Starts listening on 127.0.0.1 at `configuration.port`; throws ``HTTPError/Code/server`` if it cannot.
    public init(responder: some HTTPResponder, configuration: Configuration = Configuration()) throws(HTTPError) {
        let daemon = try Daemon(responder: responder, configuration: configuration)
        self.port = daemon.port
        connections = daemon.connections
        self.daemon = Mutex(daemon)
    }

    /// Reads the TLS certificate chain and key again, from the files the configuration named (after a renewal):
    /// connections made from now on show the new certificate, and those open keep theirs. On failure the old ones
    /// stay in use. Does nothing for a server without TLS.
    public func reloadTLS() throws(TLSError) {
        guard let terminator = daemon.withLock({ $0?.terminator }) else { return }
        try terminator.reload()
    }

    /// The connections held now and the limits in force (cut to the open-file limit), and what was refused.
    public var statistics: HTTPServer.Statistics { connections.statistics }

    /// Whether the server still listens.
    public var isRunning: Bool { daemon.withLock { $0 != nil } }

    /// Stops listening (new connections are refused at once), sends every WebSocket a close frame (1001, going
    /// away), waits up to `gracePeriod` for the requests in flight to be answered, then closes every connection.
    /// Returns how many requests were still unanswered when the grace period ran out (they are cut off).
    /// Calling it again does nothing and returns 0.
    ///
    /// The wait happens on a thread of its own, not the caller's: the requests being finished need the
    /// Swift concurrency pool, and a pool thread blocked here could be the one they are waiting for (nor a
    /// Dispatch queue's, whose few threads other blocking work may hold).
    @discardableResult
    public func shutdown(gracePeriod: Duration = .seconds(30)) async -> Int {
        await withCheckedContinuation { (done: CheckedContinuation<Int, Never>) in
            Thread.detachNewThread {
                let deadline = ContinuousClock.now + gracePeriod
                // The lock is held throughout, so a second call waits for the first and then finds nothing.
                let cutOff = self.daemon.withLock { daemon -> Int in
                    defer { daemon = nil }
                    return daemon?.drain(until: deadline) ?? 0
                }
                done.resume(returning: cutOff)
            }
        }
    }
}
