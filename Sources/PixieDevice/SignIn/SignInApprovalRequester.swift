import Foundation
import PixieWire
import SiblingsCrypto
import Synchronization

/// SignInApprovalRequester (000_e422bd9a7c930342.txt): the new device's "May I join?", from the cached phone cert
/// to an account seed it has checked against the log.
///
/// 1. `POST /v1/discovery/own` with the cert; the answer is verified against the transparency log before
///    anything is sealed to it, and the sign-in does not proceed if the log cannot prove it.
/// 2. Tokens from the pre-session mint, whose served key list the log must also prove (``TokenWallet``).
/// 3. The SignInRequest is sealed in a DiscoveryBox to the discovery key; its reply subject is subscribed first.
/// 4. The request is sent to the discovery inbox, and sent again on a schedule until a sibling acknowledges it:
///    the relay keeps nothing, so a sibling that comes online later only sees a re-send.
/// 5. An approval must name the KT handle the log binds to this number, carry the discovery seed of the key the
///    request was sealed to, and its account seed must derive the account signing key the log holds under that
///    handle; only then is it returned, the seed adopted before the grant is surfaced.
///
/// "If no sibling is online, nothing answers": the wait ends after ``Configuration/maximumWait`` with
/// ``SignInError/noAnswer(waited:)``, and a rejection with ``SignInError/rejected``. In neither case does the
/// device join, in any form. Cancelling the task stops the wait with ``SignInError/cancelled``; then, as after no
/// answer, a ``SignInSettlement`` tells the siblings to dismiss the prompt.
public struct SignInApprovalRequester: Sendable {
    public struct Configuration: Sendable {
        /// For people on the sibling: "Pixel 9", "Linux laptop".
        public var deviceModel: String
        /// The first re-send comes this long after the request; each later one waits twice as long as the one
        /// before, up to ``longestResendInterval``.
        public var resendInterval: Duration = .seconds(5)
        public var longestResendInterval: Duration = .seconds(40)
        /// How long to wait for an answer, the grant's own lifetime by default.
        public var maximumWait: Duration = .seconds(180)
        /// How far a request's time may be from a sibling's clock before the sibling drops it (rung 5 of
        /// ``SignInRequestHandler``, 5 minutes either way). When this device's clock is more than half of it off
        /// the server's, the requester says so before it sends (``Event/clockOff(by:)``).
        public var freshness: TimeInterval = 300

        /// The defaults send the request 7 times in 3 minutes (at 0, 5, 15, 35, 75, 115 and 155 s): two
        /// pre-session mints of 4 tokens, so the number's hourly budget of 40 covers five whole attempts.
        public init(deviceModel: String) { self.deviceModel = deviceModel }

        /// The send times, from the request, that fit in ``maximumWait``.
        public var sendSchedule: [Duration] {
            var times: [Duration] = [.zero]
            var interval = resendInterval
            var next = interval
            while interval > Duration.zero, next < maximumWait {
                times.append(next)
                interval = min(interval * 2, longestResendInterval)
                next += interval
            }
            return times
        }
    }

    /// What the new device shows while it waits.
    public enum Event: Sendable, Equatable {
        /// The request went out: show the check code, which the person types on the sibling before Approve.
        case waiting(checkCode: String)
        /// A sibling has it: "Approve on your <family>".
        case acknowledged(deviceFamily: String)
        /// Before anything is sent: this device's clock is this many seconds ahead of the server's (behind, when
        /// negative), more than half the window siblings hold requests to. A sibling whose clock is right drops a
        /// request whose time is off by more than the window, silently, as the seed requires; so the person hears
        /// it here, while the request still goes out.
        case clockOff(by: TimeInterval)
    }

    /// An approval whose seed the log backs.
    public struct Approval: Sendable {
        /// The `add` grant, for register-with-grant with revoke_others false.
        public let grant: String
        public let ktHandle: String
        /// The account signing key, derived from the approval's seed and equal to the logged one.
        public let accountKey: HybridSignature.PrivateKey
        public let accountSeed: Data
        public let discoverySeed: Data
    }

    private let client: PixieClient
    private let bindings: LoggedBindings
    private let relay: any RelayConnection
    private let phoneCert: Data
    private let phoneID: Data
    private let sealingKey: XWing.PublicKey
    private let configuration: Configuration
    private let environment: DeviceEnvironment

    /// `phoneCert` is this device's verified PhoneOwnershipCert (its number's `phoneID`), `sealingKey` its X-Wing
    /// public key, `relay` a connection it keeps open; `environment` gives the clock (what the request's timestamp
    /// says, and the re-sends' waits).
    public init(
        client: PixieClient, bindings: LoggedBindings, relay: any RelayConnection, phoneCert: Data, phoneID: Data,
        sealingKey: XWing.PublicKey, configuration: Configuration, environment: DeviceEnvironment = DeviceEnvironment()
    ) {
        self.environment = environment
        self.client = client
        self.bindings = bindings
        self.relay = relay
        self.phoneCert = phoneCert
        self.phoneID = phoneID
        self.sealingKey = sealingKey
        self.configuration = configuration
    }

    /// Asks, waits, and returns the verified approval.
    public func requestApproval(events: @escaping @Sendable (Event) -> Void = { _ in }) async throws -> Approval {
        let discovery = try await client.lookupOwnDiscovery(phoneCert: phoneCert)
        let verified = try await bindings.verifiedDiscovery(discovery, phoneID: phoneID)
        let discoveryKey = verified.key
        let inbox = verified.inbox
        let wallet = TokenWallet(client: client, keyListVerifier: bindings, payer: .phoneCert(phoneCert))
        // The server's clock stands in for the siblings': a request whose time is off it by more than half the
        // window is likely to be dropped unseen. A server that gives no date is not a reason to stop.
        let now = environment.clock.now
        if let serverNow = try? await client.serverDate() {
            let offset = now.timeIntervalSince(serverNow)
            if abs(offset) > configuration.freshness / 2 { events(.clockOff(by: offset)) }
        }
        let attempt = try SignInAttempt(
            deviceModel: configuration.deviceModel, phoneCert: phoneCert, sealingKey: sealingKey,
            discoveryKey: discoveryKey, now: now)
        try await relay.subscribe(attempt.replySubjectKey)
        let acknowledged = AcknowledgedFlag()
        let approved: SignInApproval.Approved
        do {
            approved = try await wait(
                for: attempt, inbox: inbox, wallet: wallet, acknowledged: acknowledged, events: events)
        } catch let error as SignInError where error == .noAnswer(waited: configuration.maximumWait) {
            await settle(attempt, inbox: inbox, wallet: wallet)
            throw error
        } catch  where Task.isCancelled || error is CancellationError {
            // Given up on this device: the siblings showing the prompt are told to take it away.
            await settle(attempt, inbox: inbox, wallet: wallet)
            throw SignInError.cancelled
        }
        // The approval must be for this number's account, as the log binds it, and carry this account's discovery
        // key: otherwise whoever could open the request (a removed device that kept the discovery seed) could
        // enroll this device into an account of its own choosing.
        guard approved.ktHandle == verified.ktHandle else { throw SignInError.anotherAccount }
        guard let seedKey = try? XWing.PrivateKey(seedRepresentation: approved.discoverySeed),
            seedKey.publicKey == discoveryKey,
            (try? RelaySubjectKey(discoverySeed: approved.discoverySeed).subject) == inbox
        else { throw SignInError.anotherAccount }
        let logged = try await bindings.accountSigningKey(ktHandle: approved.ktHandle)
        let accountKey = try SignInAttempt.accountKey(from: approved, loggedAccountKey: logged.rawRepresentation)
        return Approval(
            grant: approved.grant, ktHandle: approved.ktHandle, accountKey: accountKey,
            accountSeed: approved.accountSeed, discoverySeed: approved.discoverySeed)
    }

    /// Sends the request on its schedule and waits for the answer, until the deadline.
    private func wait(
        for attempt: SignInAttempt, inbox: RelaySubject, wallet: TokenWallet, acknowledged: AcknowledgedFlag,
        events: @escaping @Sendable (Event) -> Void
    ) async throws -> SignInApproval.Approved {
        let relay = relay
        let configuration = configuration
        let clock = environment.clock
        return try await withThrowingTaskGroup(of: SignInApproval.Approved?.self) { group in
            group.addTask {
                for await delivery in relay.deliveries where delivery.subject == attempt.replySubjectKey.subject {
                    // Anything not sealed on this request's channel (a forgery) is dropped, and the wait goes on.
                    switch try? attempt.read(delivery.payload) {
                    case .acknowledged(let family)?:
                        acknowledged.set()
                        events(.acknowledged(deviceFamily: family))
                    case .approved(let approved)?: return approved
                    case .rejected?: throw SignInError.rejected
                    case nil: continue
                    }
                }
                throw RelayConnectionError.closed("the relay connection ended while waiting for a sibling")
            }
            let start = clock.now
            group.addTask {
                // The code first: a fast acknowledgement must not be shown before it.
                events(.waiting(checkCode: attempt.checkCode))
                for (index, time) in configuration.sendSchedule.enumerated() {
                    try await clock.sleep(until: start.addingTimeInterval(time.timeInterval))
                    if index > 0, acknowledged.isSet { break }
                    do {
                        try await relay.send(
                            attempt.box, to: inbox, wake: PayloadType.signInRequest.wakeClass,
                            token: try await wallet.take())
                    } catch let error where index > 0 && !(error is CancellationError) {
                        // A re-send that fails (the relay busy, the token budget spent) ends the re-sends, not the
                        // wait: the request already went out once.
                        break
                    }
                }
                return nil
            }
            // The deadline on its own, so that a send stuck on the relay cannot hold the wait open past it.
            group.addTask {
                try await clock.sleep(until: start.addingTimeInterval(configuration.maximumWait.timeInterval))
                throw SignInError.noAnswer(waited: configuration.maximumWait)
            }
            defer { group.cancelAll() }
            // The sender finishing (nil) is no answer; the reader's approval, or a throw, ends the wait.
            while let result = try await group.next() {
                if let approved = result { return approved }
            }
            throw SignInError.noAnswer(waited: configuration.maximumWait)
        }
    }

    /// Tells the siblings that this request is over (it was cancelled, or nobody answered in time), so that a
    /// prompt still showing is dismissed. Best effort: it runs in a task of its own, since the caller's may be
    /// cancelled, and a sibling it does not reach cannot use the request anyway (its grant goes unredeemed and
    /// expires; its answer is sealed to a channel this device no longer reads).
    private func settle(_ attempt: SignInAttempt, inbox: RelaySubject, wallet: TokenWallet) async {
        guard let frame = try? attempt.cancellation() else { return }
        let relay = relay
        try? await Task {
            try await relay.send(
                frame, to: inbox, wake: PayloadType.signInSettled.wakeClass, token: try await wallet.take())
        }.value
    }
}

/// Set once a sibling acknowledged the request: the re-sends stop.
private final class AcknowledgedFlag: Sendable {
    private let flag = Mutex(false)
    func set() { flag.withLock { $0 = true } }
    var isSet: Bool { flag.withLock { $0 } }
}
