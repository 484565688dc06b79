import Foundation
import PixieWire
import SiblingsCrypto
import Synchronization
import WebSockets

/// The device's ``RelayConnection`` over a WebSocket (`ws://host:port/v1/relay`, docs/pixie-protocol.md,
/// "Relay"): it proves the subjects it listens on over the connection's CHALLENGE, sends token-paid frames to any
/// subject, and hands out what is delivered. A relay that closes the connection with 1013 ends it with
/// ``RelayConnectionError/unavailable(_:)``: the node lost its link to the other nodes.
public final class WebSocketRelayConnection: RelayConnection {

    private let socket: WebSocket
    private let challenge: Data
    private let state = Mutex(State())
    /// Every delivery, in order, until the connection ends.
    public let deliveries: AsyncStream<RelayDelivery>
    private let deliveriesContinuation: AsyncStream<RelayDelivery>.Continuation
    /// The relay's ERRORs with request id 0.
    public let notices: AsyncStream<RelayConnectionError>
    private let noticesContinuation: AsyncStream<RelayConnectionError>.Continuation

    private struct State {
        var nextRequestID: UInt32 = 1
        var waiting: [UInt32: CheckedContinuation<Void, any Error>] = [:]
        var ended: RelayConnectionError?
    }

    private init(socket: WebSocket, challenge: Data) {
        self.socket = socket
        self.challenge = challenge
        (deliveries, deliveriesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1024))
        (notices, noticesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(16))
    }

    /// Connects to the relay of the server at `baseURL` (`https://host[:port]`: the relay is
    /// `wss://host[:port]/v1/relay`, TLS checked as `tls` says; `http://host:port`: plain `ws://`) and reads its
    /// CHALLENGE.
    public static func connect(
        to baseURL: URL, tls: TLSConfiguration = .client()
    ) async throws -> WebSocketRelayConnection {
        guard let address = ServerAddress(baseURL) else {
            throw RelayConnectionError.unsupported(
                "\(baseURL.absoluteString) is not an http:// or https:// server address, so its relay cannot be found")
        }
        var context: TLSContext?
        if address.isTLS {
            do throws(TLSError) {
                context = try TLSContext(tls)
            } catch {
                throw RelayConnectionError.closed("TLS to the relay cannot be set up: \(error.message)")
            }
        }
        let socket: WebSocket
        do {
            socket = try await WebSocketClient.connect(
                host: address.host, port: address.port,
                path: PixieAPI.relayConnect.target(), tls: context)
        } catch let error as WebSocketError {
            throw RelayConnectionError.closed("could not open the relay: \(error.reason)")
        } catch let error as TLSError {
            throw RelayConnectionError.closed("could not open the relay: \(error.message)")
        }
        // The CHALLENGE is the relay's first frame; one that sends nothing within the request timeout is no relay.
        let watchdog = Task {
            try await Task.sleep(for: requestTimeout)
            await socket.close()
        }
        defer { watchdog.cancel() }
        guard case .binary(let first)? = try? await socket.receive(),
            case .challenge(let nonce)? = try? RelayServerFrame(decoding: first)
        else {
            await socket.close()
            throw RelayConnectionError.closed("the relay did not begin with a CHALLENGE frame; is this a pixie relay?")
        }
        let session = WebSocketRelayConnection(socket: socket, challenge: nonce)
        // receive() awaits the event loop's queue, so the reader holds no thread while it waits.
        Task { await session.read() }
        return session
    }

    /// Listens on `key`'s subject (and registers `pushToken` for it, when given).
    public func subscribe(_ key: RelaySubjectKey, pushToken: Data) async throws {
        let id = nextID()
        try await request(id, try key.subscribe(requestID: id, challenge: challenge, pushToken: pushToken))
    }

    /// Sends `payload` to `subject`, paid with `token`; returns once the relay took it (not once anyone read it).
    public func send(_ payload: Data, to subject: RelaySubject, wake: WakeClass, token: Data) async throws {
        let id = nextID()
        try await request(id, .send(requestID: id, subject: subject, wake: wake, token: token, payload: payload))
    }

    public func close() async {
        await socket.close()
    }

    /// Why the session ended, once it has (``deliveries`` finished); nil while it is open.
    public var ended: RelayConnectionError? { state.withLock { $0.ended } }

    private func nextID() -> UInt32 {
        state.withLock { state in
            defer { state.nextRequestID &+= 1 }
            return state.nextRequestID
        }
    }

    /// Sends `frame` and waits for the relay's OK or ERROR; cancelling the task stops the wait (with
    /// `CancellationError`), and a relay that answers nothing within ``requestTimeout`` fails it.
    private func request(_ id: UInt32, _ frame: RelayClientFrame) async throws {
        let timeout = Task { [self] in
            try await Task.sleep(for: Self.requestTimeout)
            finish(
                id,
                with: .failure(RelayConnectionError.closed("the relay did not answer within \(Self.requestTimeout)")))
        }
        defer { timeout.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ended = state.withLock { state -> (any Error)? in
                    if let ended = state.ended { return ended }
                    if Task.isCancelled { return CancellationError() }
                    state.waiting[id] = continuation
                    return nil
                }
                if let ended { return continuation.resume(throwing: ended) }
                Task {
                    do {
                        try await socket.send(binary: frame.encoded())
                    } catch {
                        finish(id, with: .failure(RelayConnectionError.closed("the relay connection dropped")))
                    }
                }
            }
        } onCancel: {
            finish(id, with: .failure(CancellationError()))
        }
    }

    /// How long a SUBSCRIBE or SEND may wait for the relay's answer.
    static let requestTimeout: Duration = .seconds(30)

    private func finish(_ id: UInt32, with result: Result<Void, any Error>) {
        state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(with: result)
    }

    private func read() async {
        var reason = "the relay closed the connection"
        do {
            while let message = try await socket.receive() {
                guard case .binary(let bytes) = message, let frame = try? RelayServerFrame(decoding: bytes) else {
                    reason = "the relay sent a frame that is not the protocol"
                    break
                }
                switch frame {
                case .deliver(let subject, let wake, let payload):
                    deliveriesContinuation.yield(RelayDelivery(subject: subject, wake: wake, payload: payload))
                case .ok(let id):
                    finish(id, with: .success(()))
                case .error(0, let code, let text):
                    // Not an answer: the relay ended a subscription of this connection on its own.
                    noticesContinuation.yield(.refused(code, text))
                case .error(let id, let code, let text):
                    finish(id, with: .failure(RelayConnectionError.refused(code, text)))
                case .challenge:
                    continue
                }
            }
        } catch let error as WebSocketError {
            reason = "the relay connection ended: \(error.reason)"
        } catch {
            reason = "the relay connection ended"
        }
        // 1013: the node lost its link to the other relay nodes, and closed its subscribers so they know.
        let ending: RelayConnectionError =
            socket.closeCode == .tryAgainLater
            ? .unavailable(
                "the relay node lost its link to the other relay nodes and closed this connection (1013, try again "
                    + "later): connect again, and subscribe again")
            : .closed(reason)
        let waiting = state.withLock { state in
            state.ended = ending
            defer { state.waiting = [:] }
            return state.waiting
        }
        for continuation in waiting.values { continuation.resume(throwing: ending) }
        deliveriesContinuation.finish()
        noticesContinuation.finish()
        await socket.close()
    }
}
