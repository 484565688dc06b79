import Foundation
import PixieWire

/// A device's connection to the relay (docs/pixie-protocol.md, "Relay"): the seam between the device's protocol
/// logic and the network. ``WebSocketRelayConnection`` is the real one; the test support's in-memory relay is the
/// other, so that several devices can run against each other in one process with drops, reorders and delays on
/// command.
///
/// The relay forwards to live connections only and stores nothing. Every request waits for the relay's answer: a
/// SUBSCRIBE proves the subject's key over the connection's challenge, and a SEND is paid with a spend-once token.
/// A connection the relay ends fails every request in flight and finishes ``deliveries``, and ``ended`` says why.
/// A connection does not reconnect by itself: ``InboxListener`` does, with backoff and jitter.
public protocol RelayConnection: AnyObject, Sendable {
    /// Every delivery, in order, until the connection ends. One reader.
    var deliveries: AsyncStream<RelayDelivery> { get }
    /// What the relay says on its own, not in answer to a request (ERROR with request id 0, docs/pixie-protocol.md,
    /// "Relay"), as ``RelayConnectionError/refused(_:_:)``: `device_removed` when identity-svc ended a subscription
    /// of this connection (this device was removed, or the account's discovery inbox was rotated away). The
    /// connection stays open. One reader; finishes with the connection.
    var notices: AsyncStream<RelayConnectionError> { get }
    /// Listens on `key`'s subject, and registers `pushToken` for it (none when empty).
    func subscribe(_ key: RelaySubjectKey, pushToken: Data) async throws
    /// Sends `payload` to `subject`, paid with `token`; returns once the relay took it (not once anyone read it).
    func send(_ payload: Data, to subject: RelaySubject, wake: WakeClass, token: Data) async throws
    /// Ends the connection; ``deliveries`` finishes.
    func close() async
    /// Why the connection ended, once it has; nil while it is open.
    var ended: RelayConnectionError? { get }
}

extension RelayConnection {
    /// Listens on `key`'s subject, with no push target.
    public func subscribe(_ key: RelaySubjectKey) async throws { try await subscribe(key, pushToken: Data()) }
}

/// How a device reaches the relay of the server at a base URL: a new connection each call.
public typealias RelayConnector = @Sendable (_ server: URL) async throws -> any RelayConnection

/// A frame the relay delivered on a subject the connection subscribed.
public struct RelayDelivery: Sendable, Equatable {
    public let subject: RelaySubject
    public let wake: WakeClass
    public let payload: Data

    public init(subject: RelaySubject, wake: WakeClass, payload: Data) {
        self.subject = subject
        self.wake = wake
        self.payload = payload
    }
}

/// Why a relay request failed or a connection ended.
public enum RelayConnectionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The relay answered a request with ERROR.
    case refused(RelayErrorCode, String)
    /// The connection is gone (or never came up).
    case closed(String)
    /// The relay node closed the connection because it cannot serve it now (it lost its link to the other
    /// nodes): connect again, through whatever balancer is in front, and subscribe again.
    case unavailable(String)
    /// Something this build cannot do.
    case unsupported(String)

    public var description: String {
        switch self {
        case .refused(let code, let reason): "the relay refused (\(code)): \(reason)"
        case .closed(let reason), .unsupported(let reason), .unavailable(let reason): reason
        }
    }
}
