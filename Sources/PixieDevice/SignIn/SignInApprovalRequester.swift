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
        let approved: SignInApproval.Approved
        do {
            approved = try await wait(for: attempt, inbox: inbox, wallet: wallet, events: events)
        } catch let error as SignInError where error == .noAnswer(waited: configuration.maximumWait) {
            await settle(attempt, inbox: inbox, wallet: wallet)
            throw error
        } catch  where Task.isCancelled || error is CancellationError {
            // Given up on this device: the siblings showing the prompt are told to take it away.
            await settle(attempt, inbox: inbox, wallet: wallet)
            throw SignInError.cancelled
        } catch let error where !(error is SignInError) {
            // The first send failed, or the relay went away: a sibling may have the request and prompt for it
            // all the same, so it is told to dismiss it (best effort: this may not get through either).
            await settle(attempt, inbox: inbox, wallet: wallet)
            throw error
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

    /// Sends the request on its schedule and waits for the answer, until the deadline: the I/O around
    /// ``SignInApprovalStateMachine``. Each send, each timer and the reply subject's reader are tasks of their own
    /// that hand the machine events.
    private func wait(
        for attempt: SignInAttempt, inbox: RelaySubject, wallet: TokenWallet,
        events: @escaping @Sendable (Event) -> Void
    ) async throws -> SignInApproval.Approved {
        let relay = relay
        let clock = environment.clock
        var machine = SignInApprovalStateMachine(
            checkCode: attempt.checkCode, schedule: configuration.sendSchedule,
            maximumWait: configuration.maximumWait)
        let (arrivals, arrive) = AsyncStream.makeStream(of: SignInApprovalStateMachine.Event.self)
        let reader = Task {
            for await delivery in relay.deliveries where delivery.subject == attempt.replySubjectKey.subject {
                // Anything not sealed on this request's channel (a forgery) is dropped, and the wait goes on.
                if let answer = try? attempt.read(delivery.payload) { arrive.yield(.answer(answer)) }
            }
            arrive.yield(.relayClosed)
        }
        let firstSendError = FirstSendError()
        var tasks: [Task<Void, Never>] = []
        var timers: [SignInApprovalStateMachine.Timer: Task<Void, Never>] = [:]
        defer {
            reader.cancel()
            for task in tasks + timers.values { task.cancel() }
            arrive.finish()
        }
        let start = clock.now
        var pending = machine.handle(.start)
        var iterator = arrivals.makeAsyncIterator()
        while true {
            for action in pending {
                switch action {
                case .report(let event):
                    events(event)
                case .send(let index):
                    tasks.append(
                        Task {
                            do {
                                try await relay.send(
                                    attempt.box, to: inbox, wake: PayloadType.signInRequest.wakeClass,
                                    token: try await wallet.take())
                                arrive.yield(.sendEnded(index: index, succeeded: true))
                            } catch {
                                if index == 0 { firstSendError.error.withLock { $0 = error } }
                                arrive.yield(.sendEnded(index: index, succeeded: false))
                            }
                        })
                case .startTimer(let timer, let at):
                    timers[timer]?.cancel()
                    timers[timer] = clock.timer(until: start.addingTimeInterval(at.timeInterval)) {
                        arrive.yield(.timerFired(timer))
                    }
                case .cancelTimer(let timer):
                    timers.removeValue(forKey: timer)?.cancel()
                case .approve(let approved):
                    return approved
                case .fail(.rejected):
                    throw SignInError.rejected
                case .fail(.noAnswer):
                    throw SignInError.noAnswer(waited: configuration.maximumWait)
                case .fail(.relayClosed):
                    throw RelayConnectionError.closed("the relay connection ended while waiting for a sibling")
                case .fail(.firstSendFailed):
                    throw firstSendError.error.withLock { $0 }
                        ?? RelayConnectionError.closed("the request could not be sent")
                }
            }
            // The stream ends only when this task is cancelled.
            guard let event = await iterator.next() else { throw CancellationError() }
            pending = machine.handle(event)
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

/// The first send's error, kept for the wait to end with.
private final class FirstSendError: Sendable {
    let error = Mutex<(any Error)?>(nil)
}
