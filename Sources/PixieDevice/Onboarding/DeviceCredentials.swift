import Foundation
import PixieWire

/// The enrolled device's login session and its SenderCert, each renewed before it expires, so that a device that
/// stays online (`pixie listen`) or comes back after weeks keeps working without its person signing in again.
///
/// - The session (30 days on pixie-server by default) is renewed by a passkey login once less than
///   ``sessionRenewalMargin`` is left. The new token is saved in the home first; then the old one is revoked.
/// - The SenderCert (1 hour by default), which the sealed-sender envelope carries inside, is fetched again once
///   less than ``senderCertRenewalMargin`` is left; it is verified under the pinned sender-cert key before use.
///
/// Renewal happens on use, not on a timer: whatever asks for a session or a cert gets one that is good for at
/// least the margin.
public actor DeviceCredentials {
    /// Renew the session once this little of it is left.
    public let sessionRenewalMargin: TimeInterval
    /// Fetch a new SenderCert once this little of it is left.
    public let senderCertRenewalMargin: TimeInterval

    private let flow: OnboardingFlow
    private let now: @Sendable () -> Date
    private var senderCert: SenderCert?

    public init(
        flow: OnboardingFlow, sessionRenewalMargin: TimeInterval = 86_400, senderCertRenewalMargin: TimeInterval = 300
    ) {
        let clock = flow.environment.clock
        self.init(
            flow: flow, sessionRenewalMargin: sessionRenewalMargin, senderCertRenewalMargin: senderCertRenewalMargin,
            now: { clock.now })
    }

    /// With the clock a test runs (the server's manual clock).
    @_spi(Testing) public init(
        flow: OnboardingFlow, sessionRenewalMargin: TimeInterval = 86_400, senderCertRenewalMargin: TimeInterval = 300,
        now: @escaping @Sendable () -> Date
    ) {
        self.flow = flow
        self.sessionRenewalMargin = sessionRenewalMargin
        self.senderCertRenewalMargin = senderCertRenewalMargin
        self.now = now
    }

    /// A session token good for at least ``sessionRenewalMargin``, renewed first if it is not. Callers that ask
    /// while a renewal runs wait for that one: two logins at once would trip the passkey's counter.
    public func session() async throws -> String {
        if let renewal { return try await renewal.value }
        let task = Task { try await currentSession() }
        renewal = task
        defer { renewal = nil }
        return try await task.value
    }

    private var renewal: Task<String, any Error>?

    private func currentSession() async throws -> String {
        let state = try flow.home.state()
        let membership = try flow.member(state)
        let left = TimeInterval(membership.sessionExpiresAt) - now().timeIntervalSince1970
        guard left <= sessionRenewalMargin else { return membership.sessionToken }
        let client = flow.client(try state.serverURL)
        var renewing = state
        let renewed: IdentityAPI.EnrolledResponse
        do {
            renewed = try await flow.login(client, &renewing)
        } catch PixieClientError.refused(let status, let error) where status == 401 || status == 403 {
            throw DeviceError.notSetUp(
                "this device's session \(left > 0 ? "ends soon" : "has ended") and renewing it was refused "
                    + "(\(error.error): \(error.reason)); it may have been removed from the account. Run `pixie "
                    + "signout --last-device` here (nothing on the server is left to end), then `pixie signin`")
        }
        try flow.home.update {
            $0.membership?.sessionToken = renewed.sessionToken
            $0.membership?.sessionExpiresAt = renewed.sessionExpiresAt
        }
        // The old session is of no more use; one that cannot be revoked now still ends on its own.
        try? await client.revokeSession(membership.sessionToken)
        senderCert = nil
        return renewed.sessionToken
    }

    /// A verified SenderCert for this device, good for at least ``senderCertRenewalMargin``.
    public func currentSenderCert() async throws -> SenderCert {
        if let senderCert, senderCert.expiresAt.timeIntervalSince(now()) > senderCertRenewalMargin {
            return senderCert
        }
        let state = try flow.home.state()
        let session = try await session()
        let answer = try await flow.client(try state.serverURL).senderCert(session: session)
        let verifier = SenderCert.Verifier(pinnedKeys: [state.trustBundle.senderCertKey])
        let cert = try verifier.verify(answer.senderCert.data, now: now())
        senderCert = cert
        return cert
    }
}
