import Foundation
public import SiblingsCrypto

/// The world a device runs in: the network to its server and to the relay, its clock, its randomness and its log.
/// An app uses the defaults; a test brings its own (an in-process transport, the in-memory relay, a manual clock),
/// and a device's protocol logic reaches none of them except through here.
public struct DeviceEnvironment: Sendable {
    /// The HTTP network to the server at a base URL.
    public var transport: @Sendable (URL) -> any HTTPTransport
    /// A new connection to the relay of the server at a base URL.
    public var relay: RelayConnector
    /// The wall clock and the waits.
    public var clock: any DeviceClock
    /// Where random bytes come from (request ids, reply subjects, keys, jitter). Not public API: only tests
    /// replace it, to make a run repeatable.
    var random: any SecureRandomSource
    /// Lines for the device's own log (never sent anywhere): frames dropped and why, reconnections, the TLS
    /// version and key exchange of each connection to the server.
    public var log: @Sendable (String) -> Void
    /// Whom the default transport and relay trust for an `https://` server: the system's trust store, or a
    /// private CA; and the keys pinned, if any.
    public let tls: TLSConfiguration

    /// The network is ``SocketHTTPTransport`` and ``WebSocketRelayConnection`` unless `transport` and `relay`
    /// say otherwise; both check an `https://` server's certificate as `tls` says.
    public init(
        transport: (@Sendable (URL) -> any HTTPTransport)? = nil,
        relay: RelayConnector? = nil,
        clock: any DeviceClock = SystemDeviceClock(),
        tls: TLSConfiguration = .client(),
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.transport = transport ?? { SocketHTTPTransport(baseURL: $0, tls: tls, log: log) }
        self.relay = relay ?? { try await WebSocketRelayConnection.connect(to: $0, tls: tls) }
        self.clock = clock
        self.tls = tls
        self.random = SystemRandom()
        self.log = log
    }

    /// The same world with `random` as its randomness (tests only).
    @_spi(Testing) public func withRandomness(_ random: any SecureRandomSource) -> DeviceEnvironment {
        var copy = self
        copy.random = random
        return copy
    }

    /// A random number in `range`, from ``random`` (for jitter).
    func randomFraction(in range: ClosedRange<Double>) -> Double {
        let word = random.bytes(count: 8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let unit = Double(word >> 11) / Double(1 << 53)
        return range.lowerBound + unit * (range.upperBound - range.lowerBound)
    }
}
