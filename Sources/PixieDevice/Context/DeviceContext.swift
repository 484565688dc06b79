import Foundation
import PixieWire

/// Everything a set-up device's components need, in one value passed instead of long parameter lists
/// (docs/pixie-device.md, "Layers"): its home and state (keys, membership), its store, its client and the log
/// checks over it, its session and SenderCert, its relay tokens, and the ``DeviceEnvironment`` it runs in (the
/// network, the relay, the clock, randomness, the log).
///
/// ``SyncService`` and ``InboxListener`` run on one; so will everything a device does once it is a member. A
/// device that is not one yet (creating an account, signing in) runs on an ``OnboardingFlow`` and its environment.
public struct DeviceContext: Sendable {
    public let home: DeviceHome
    public let environment: DeviceEnvironment
    /// The device's state as it was when the context was made: its keys, its trust bundle, its membership.
    public let state: DeviceState
    public let membership: DeviceState.Membership
    public let store: DeviceStore
    public let client: PixieClient
    /// The server's answers checked against the transparency log, from the checkpoint this device pinned.
    public let bindings: LoggedBindings
    public let credentials: DeviceCredentials
    /// Send-class relay tokens, paid for with the session.
    public let wallet: TokenWallet
    /// The environment's clock corrected by the device's offset from the server's (``correctClock()``): the clock
    /// of everything on this context (``clock``, ``environment``), the store's stamps and the loop's judgments too.
    public let correctedClock: CorrectedClock
    let flow: OnboardingFlow

    /// The context of the device set up in `home` (a member of an account: `pixie init` or `pixie signin` ran).
    ///
    /// Its clock is `environment`'s corrected by the device's last measured offset from the server's clock
    /// (``correctedClock``), so that a device whose clock is wrong by hours still dates, checks and judges by the
    /// server's time once the loop has measured it.
    public init(home: DeviceHome, environment: DeviceEnvironment = DeviceEnvironment()) throws {
        let state = try home.state()
        let correctedClock = CorrectedClock(
            base: environment.clock, offset: TimeInterval(state.serverClockOffset ?? 0) / 1000)
        var environment = environment
        environment.clock = correctedClock
        let flow = OnboardingFlow(home: home, environment: environment)
        let membership = try flow.member(state)
        let client = flow.client(try state.serverURL)
        let bindings = try flow.bindings(state, client)
        let credentials = DeviceCredentials(flow: flow)
        self.home = home
        self.environment = environment
        self.state = state
        self.membership = membership
        self.correctedClock = correctedClock
        self.store = try DeviceStore(home: home, clock: correctedClock)
        self.client = client
        self.bindings = bindings
        self.credentials = credentials
        self.wallet = TokenWallet(client: client, keyListVerifier: bindings, payer: .credentials(credentials))
        self.flow = flow
    }

    public var clock: any DeviceClock { environment.clock }

    /// Measures this device's clock against the server's (the `Date` of its answer to `GET /healthz`), puts the
    /// offset in use, and keeps it in the device's state for the home's other processes. Returns the offset, or nil
    /// when the server could not be asked or gave no date (the last offset stays).
    @discardableResult
    public func correctClock() async -> TimeInterval? {
        let sent = correctedClock.base.now
        guard let date = try? await client.serverDate() else { return nil }
        let offset = correctedClock.correct(serverDate: date, sent: sent, received: correctedClock.base.now)
        let kept = Int64((offset * 1000).rounded())
        if (try? home.state().serverClockOffset) != kept { try? home.update { $0.serverClockOffset = kept } }
        return offset
    }

    /// A new connection to this device's relay.
    public func connectRelay() async throws -> any RelayConnection {
        try await environment.relay(try state.serverURL)
    }

    /// Keeps the checkpoint the log checks advanced to, for the next run (only if the device is still set up).
    func keepTransparencyPin() async {
        let pin = Base64URLBytes(await bindings.state)
        try? home.update { $0.transparency = pin }
    }
}
