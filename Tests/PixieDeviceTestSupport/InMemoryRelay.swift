import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Synchronization

/// A relay in memory, for tests of devices against each other in one process (the other side of the device's
/// ``RelayConnection`` seam; hummingbird's in-memory test client is the model).
///
/// It keeps the rules of pixie-server's relay that a device depends on:
/// - a SUBSCRIBE must prove the subject's key over the connection's own challenge (``RelaySubject/isProven``);
/// - a SEND is paid with a token that ``tokenCheck`` accepts (by default any non-empty token, each once);
/// - a payload is at most ``maximumPayloadBytes`` (64 KiB, the server's default);
/// - nothing is stored: a frame reaches the connections subscribed when it is sent, and no other.
///
/// And on command it misbehaves as a network and a relay may: it drops frames, holds them back and lets them go
/// in reverse order (a reorder), delays them, delivers them twice or again later (``replay(_:)``), or ends every
/// connection (a node that lost its bus: 1013).
public final class InMemoryRelay: Sendable {
    /// What the relay does with a frame it accepted.
    public enum Fault: Sendable {
        /// Forwards nothing (the sender was told OK).
        case drop
        /// Keeps it until ``releaseHeld()``, which delivers the held frames newest first.
        case hold
        /// Delivers it after this long.
        case delay(Duration)
        /// Delivers it twice.
        case duplicate
    }

    /// The default token check: a token is a non-empty byte string, good once.
    public static func spendOnce() -> @Sendable (Data) -> RelayErrorCode? {
        let spent = Mutex<Set<Data>>([])
        return { token in
            guard !token.isEmpty else { return .tokenInvalid }
            return spent.withLock { $0.insert(token).inserted } ? nil : .tokenSpent
        }
    }

    public let maximumPayloadBytes: Int
    private let tokenCheck: @Sendable (Data) -> RelayErrorCode?
    private let state = Mutex(State())

    private struct State {
        var connections: [ObjectIdentifier: InMemoryRelayConnection] = [:]
        var faults: [(rule: @Sendable (RelayDelivery) -> Bool, fault: Fault, remaining: Int?)] = []
        var held: [RelayDelivery] = []
        var accepted: [RelayDelivery] = []
        var pushTokens: [RelaySubject: Data] = [:]
    }

    public init(
        maximumPayloadBytes: Int = 64 << 10, tokenCheck: @escaping @Sendable (Data) -> RelayErrorCode? = spendOnce()
    ) {
        self.maximumPayloadBytes = maximumPayloadBytes
        self.tokenCheck = tokenCheck
    }

    /// A new connection, as a device's ``DeviceEnvironment/relay`` would open one.
    public func connect() -> InMemoryRelayConnection {
        let connection = InMemoryRelayConnection(relay: self)
        state.withLock { $0.connections[ObjectIdentifier(connection)] = connection }
        return connection
    }

    /// A ``RelayConnector`` for a ``DeviceEnvironment``: every device of a test on this one relay.
    public var connector: RelayConnector { { [self] _ in connect() } }

    /// From now on, the frames `rule` matches meet `fault` (the first `count` of them, or all when nil).
    public func inject(
        _ fault: Fault, count: Int? = nil, where rule: @escaping @Sendable (RelayDelivery) -> Bool = { _ in true }
    ) {
        state.withLock { $0.faults.append((rule, fault, count)) }
    }

    /// No more faults (frames held stay held until ``releaseHeld()``).
    public func clearFaults() { state.withLock { $0.faults = [] } }

    /// Delivers the frames held back, newest first: what a reordering network does.
    public func releaseHeld() {
        let held = state.withLock { state in
            defer { state.held = [] }
            return state.held
        }
        for delivery in held.reversed() { deliver(delivery) }
    }

    /// Every frame the relay accepted (paid and within the limit), in order, faults or not.
    public var accepted: [RelayDelivery] { state.withLock { $0.accepted } }

    /// The push token registered for `subject`, if any.
    public func pushToken(for subject: RelaySubject) -> Data? { state.withLock { $0.pushTokens[subject] } }

    /// How many open connections listen on `subject`.
    public func subscriberCount(_ subject: RelaySubject) -> Int {
        state.withLock { $0.connections.values.filter { $0.isSubscribed(subject) }.count }
    }

    /// Ends every open connection with `reason`, as a node that lost its link to the bus does (1013).
    public func endAll(
        _ reason: RelayConnectionError = .unavailable("the in-memory relay ended the connection (1013)")
    ) {
        let all = state.withLock { state in
            defer { state.connections = [:] }
            return Array(state.connections.values)
        }
        for connection in all { connection.end(reason) }
    }

    /// Ends every subscription of `subject` with ERROR id 0 `device_removed`, as identity-svc has the relay do for
    /// a removed device's inbox and a rotated-away discovery inbox; the connections stay open.
    public func endSubscriptions(
        of subject: RelaySubject, code: RelayErrorCode = .deviceRemoved,
        reason: String = "this device was removed from the account"
    ) {
        let all = state.withLock { Array($0.connections.values) }
        for connection in all { connection.endSubscription(subject, code: code, reason: reason) }
    }

    // MARK: for the connections

    func forget(_ connection: InMemoryRelayConnection) {
        _ = state.withLock { $0.connections.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    func registered(_ pushToken: Data, for subject: RelaySubject) {
        if !pushToken.isEmpty { state.withLock { $0.pushTokens[subject] = pushToken } }
    }

    /// Takes a SEND: checks its size and token, then forwards it (or meets a fault).
    func accept(_ delivery: RelayDelivery, token: Data) throws(RelayConnectionError) {
        guard delivery.payload.count <= maximumPayloadBytes else {
            throw .refused(
                .frameTooLarge,
                "the payload is \(delivery.payload.count) bytes; this relay forwards at most \(maximumPayloadBytes)")
        }
        if let refusal = tokenCheck(token) { throw .refused(refusal, "the token was refused (\(refusal))") }
        let fault = state.withLock { state -> Fault? in
            state.accepted.append(delivery)
            guard let index = state.faults.firstIndex(where: { $0.rule(delivery) }) else { return nil }
            let fault = state.faults[index].fault
            if let remaining = state.faults[index].remaining {
                if remaining <= 1 {
                    state.faults.remove(at: index)
                } else {
                    state.faults[index].remaining = remaining - 1
                }
            }
            if case .hold = fault { state.held.append(delivery) }
            return fault
        }
        switch fault {
        case nil: deliver(delivery)
        case .drop?, .hold?: return
        case .duplicate?:
            deliver(delivery)
            deliver(delivery)
        case .delay(let duration)?:
            Task {
                try? await Task.sleep(for: duration)
                self.deliver(delivery)
            }
        }
    }

    /// Delivers `deliveries` again, as a relay replaying frames it forwarded before would.
    public func replay(_ deliveries: [RelayDelivery]) {
        for delivery in deliveries { deliver(delivery) }
    }

    private func deliver(_ delivery: RelayDelivery) {
        let listeners = state.withLock { $0.connections.values.filter { $0.isSubscribed(delivery.subject) } }
        for connection in listeners { connection.receive(delivery) }
    }
}

/// One device's connection to an ``InMemoryRelay``.
public final class InMemoryRelayConnection: RelayConnection {
    private let relay: InMemoryRelay
    private let challenge = SecureRandom.bytes(count: 32)
    private let state = Mutex<(subjects: Set<RelaySubject>, ended: RelayConnectionError?)>(([], nil))
    public let deliveries: AsyncStream<RelayDelivery>
    private let continuation: AsyncStream<RelayDelivery>.Continuation
    public let notices: AsyncStream<RelayConnectionError>
    private let noticesContinuation: AsyncStream<RelayConnectionError>.Continuation

    init(relay: InMemoryRelay) {
        self.relay = relay
        (deliveries, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1024))
        (notices, noticesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(16))
    }

    public var ended: RelayConnectionError? { state.withLock { $0.ended } }

    public func subscribe(_ key: RelaySubjectKey, pushToken: Data) async throws {
        try checkOpen()
        // The proof goes through the wire frame, as it would over the WebSocket.
        guard
            case .subscribe(_, let subject, let publicKey, let signature, let token) = try key.subscribe(
                requestID: 1, challenge: challenge, pushToken: pushToken),
            subject.isProven(publicKey: publicKey, signature: signature, challenge: challenge, pushToken: token)
        else { throw RelayConnectionError.refused(.subjectNotProven, "the SUBSCRIBE does not prove its subject") }
        state.withLock { _ = $0.subjects.insert(subject) }
        relay.registered(token, for: subject)
    }

    public func send(_ payload: Data, to subject: RelaySubject, wake: WakeClass, token: Data) async throws {
        try checkOpen()
        try relay.accept(RelayDelivery(subject: subject, wake: wake, payload: payload), token: token)
    }

    public func close() async { end(.closed("the connection was closed")) }

    func isSubscribed(_ subject: RelaySubject) -> Bool {
        state.withLock { $0.ended == nil && $0.subjects.contains(subject) }
    }

    func receive(_ delivery: RelayDelivery) { continuation.yield(delivery) }

    /// Ends this connection's subscription of `subject`, if it has one, and says so with ERROR id 0 `code`.
    func endSubscription(_ subject: RelaySubject, code: RelayErrorCode, reason: String) {
        guard state.withLock({ $0.ended == nil && $0.subjects.remove(subject) != nil }) else { return }
        noticesContinuation.yield(.refused(code, reason))
    }

    func end(_ reason: RelayConnectionError) {
        let first = state.withLock { state -> Bool in
            guard state.ended == nil else { return false }
            state.ended = reason
            return true
        }
        guard first else { return }
        relay.forget(self)
        continuation.finish()
        noticesContinuation.finish()
    }

    private func checkOpen() throws(RelayConnectionError) {
        if let ended = state.withLock({ $0.ended }) { throw ended }
    }
}
