import Foundation
import PixieWire
import SiblingsCrypto
import Synchronization

/// A sibling online (`pixie listen`): it listens on the account's discovery inbox and on this device's own inbox,
/// and hands each frame to what answers it.
///
/// - On the discovery inbox, sign-in requests: every one runs through handleSignInRequest's ladder
///   (``SignInRequestHandler``); the ones that pass are acknowledged with the device family, the person is asked,
///   and the answer is sealed back. Settlements take a prompt away when another sibling answered.
/// - On its own inbox, a new device's request for the store and what follows it (``SyncService``).
///
/// A device answers only while it listens (the seed: "If no sibling is online, nothing answers"); with a
/// ``pushToken`` a sign-in request or a SyncRequest wakes it to listen again.
public struct InboxListener: Sendable {
    /// The person's answer to one prompt.
    public enum Decision: Sendable, Equatable {
        /// Approve, with the check code the person read off the new device (it must match).
        case approve(checkCode: String)
        case reject
        /// Leave it unanswered.
        case ignore
    }

    /// What became of a request.
    public enum Outcome: Sendable, Equatable {
        case approved(deviceModel: String)
        case rejected(deviceModel: String)
        case ignored(deviceModel: String)
        /// The person's code did not match; nothing was sealed.
        case wrongCheckCode(deviceModel: String)
        /// A frame the ladder dropped, silently as far as the sender can tell.
        case dropped(SignInRequestHandler.Drop)
        /// Answering failed (the relay, a token, the grant); the reason says what.
        case failed(deviceModel: String, reason: String)
        /// Approved with its check code; the device was enrolled already (by a six-digit code), so it got the
        /// seeds and no grant.
        case approvedByCode(deviceModel: String)
        /// The request was settled elsewhere (another sibling answered, or the new device gave up), so its prompt
        /// was taken away and nothing was sent.
        case dismissed(deviceModel: String, SignInSettlement.Outcome)
        /// What became of a frame on this device's own inbox: a new device of the account asking for the store
        /// (``SyncService``), or its ack.
        case sync(SyncService.SiblingOutcome)
        /// The relay ended the connection (or could not be reached again); the listener connects again after
        /// this wait.
        case reconnecting(reason: String, after: Duration)
        /// Connected and subscribed again: requests reach this device once more.
        case reconnected
        /// What the reconcile loop did: a round with a sibling, tombstones collected, a message dropped.
        case reconcile(SyncLoop.Event)
        /// The account's keys were rotated (a device was removed): the listener took the new ones and listens on
        /// under them, on the new discovery inbox.
        case rotated(epoch: UInt64)
        /// The account's keys were rotated, and this device could not take the new ones (a withheld bundle, a
        /// rotation that does not check out); it listens on under the old ones, and says why.
        case rotationRefused(reason: String)
    }

    /// The context the listener runs on; replaced by one with the new keys when the account is rotated.
    public private(set) var context: DeviceContext
    public let deviceFamily: String
    /// How far a request's clock may be from this device's.
    public var freshness: TimeInterval = 300
    /// How long a prompt may wait for its person: an answer after it is not sent (the new device has given up,
    /// and a grant would outlive its use). The grant's own lifetime by default.
    public var promptLifetime: TimeInterval = 180
    /// How this device answers a new device's request for the store.
    public var syncConfiguration = SyncService.Configuration()
    /// How the reconcile loop runs while this device listens (docs/pixie-sync.md).
    public var reconcileConfiguration = SyncLoop.Configuration()
    /// The first wait before connecting to the relay again after it ended the connection; each failure doubles
    /// it up to ``longestReconnectDelay``, and each wait is jittered down by up to half.
    public var reconnectDelay: Duration = .milliseconds(250)
    public var longestReconnectDelay: Duration = .seconds(30)
    /// How often the listener asks the log whether the account's keys were rotated (docs/pixie-protocol.md, "How
    /// the devices learn it"): the seed's devices check at most once a minute while they run.
    public var rotationCheckInterval: Duration = .seconds(60)
    /// The least time between two checks that frames failing on this device's inbox ask for early (a stranger's
    /// junk costs the log one lookup per gap at most).
    public var rotationNudgeGap: Duration = .seconds(5)
    /// The app's push token (APNs, FCM), registered with the relay for this device's own inbox and for the
    /// account's discovery inbox each time it listens: while it does not, a new device's SignInRequest or
    /// SyncRequest (wake class Sync) wakes it with one alert push per wake episode, and it listens again within
    /// the new device's re-sends (docs/pixie-protocol.md, "Relay"). Nil registers none.
    public var pushToken: Data?

    public init(context: DeviceContext, deviceFamily: String) {
        self.context = context
        self.deviceFamily = deviceFamily
    }

    var home: DeviceHome { context.home }

    /// Listens until the task is cancelled; throws if the relay cannot be reached, or refuses, at the start. A
    /// connection the relay ends later is made again, with backoff and jitter (``Outcome/reconnecting(reason:after:)``).
    /// `ready` is called once the discovery inbox is subscribed; `decide` for every request that passed the ladder, one at a time,
    /// in a task that is cancelled if the request is settled elsewhere (the prompt is then dismissed, and `decide`
    /// should return promptly); `report` for what became of every frame.
    ///
    ///
    /// With `offerCode`, the listener first mints a six-digit code grant and hands it over to be shown: a new
    /// device enrolls with it (`pixie signin --grant-code`), then asks for the seeds like any new device, and its
    /// person types its check code here as usual. The code cannot stand in for that: identity-svc mints and sees
    /// it, and the seed's guarantee is that nothing the servers hold admits a device. A device the log's roster
    /// holds already gets the seeds alone, with no grant (``Outcome/approvedByCode(deviceModel:)``).
    ///
    /// When the account's keys are rotated (another device removed one), the listener takes the new keys and goes
    /// on under them (``Outcome/rotated(epoch:)``); if this device was the one removed, `run` throws the server's
    /// `device_removed` refusal.
    public func run(
        ready: @escaping @Sendable () -> Void = {},
        offerCode: (@Sendable (GrantCode) -> Void)? = nil,
        decide: @escaping @Sendable (SignInRequestHandler.Prompt) async -> Decision,
        report: @escaping @Sendable (Outcome) -> Void = { _ in }
    ) async throws {
        var listener = self
        var first = true
        while true {
            if first {
                try await listener.listen(
                    resumed: false, ready: ready, offerCode: offerCode, decide: decide, report: report)
            } else {
                try await listener.listen(resumed: true, ready: {}, offerCode: nil, decide: decide, report: report)
            }
            first = false
            listener.context = try listener.context.reloaded()
            report(.rotated(epoch: listener.context.membership.epoch ?? 1))
        }
    }

    /// Listens under the context's keys until the task is cancelled, or until the account's keys are rotated
    /// (then it returns, for ``run(ready:offerCode:decide:report:)`` to listen again under the new ones).
    ///
    /// `resumed`: listening again after a rotation, so a relay that cannot be reached at once is waited for, as
    /// after any connection that ended, rather than ending `run`.
    private func listen(
        resumed: Bool,
        ready: @escaping @Sendable () -> Void,
        offerCode: (@Sendable (GrantCode) -> Void)?,
        decide: @escaping @Sendable (SignInRequestHandler.Prompt) async -> Decision,
        report: @escaping @Sendable (Outcome) -> Void
    ) async throws {
        let context = self.context
        let state = context.state
        let membership = context.membership
        let clock = context.clock
        guard !membership.isEnrolledWithoutSeeds else {
            throw DeviceError.notSetUp(
                "this device was enrolled by a code but holds no account seed yet, so it cannot answer anyone: run "
                    + "`pixie signin --grant-code` on it again while the device that showed the code listens")
        }
        let client = context.client
        let credentials = context.credentials
        let wallet = context.wallet
        let discoveryKey = try XWing.PrivateKey(seedRepresentation: membership.discoverySeed.data)
        let discoveryInbox = try RelaySubjectKey(discoverySeed: membership.discoverySeed.data)
        var ladder = SignInRequestHandler(
            discoveryKey: discoveryKey,
            phoneVerifier: PhoneOwnershipCert.Verifier(pinnedKeys: state.trustBundle.phoneVerifyKeys),
            ownPhoneID: state.phoneID.data, freshness: freshness, answered: try home.answeredSignIns())
        // The record of answered requests is saved after each answer, so a request replayed after a restart is
        // still dropped as one (issue 37, 1). A record that cannot be saved is said, not hidden.
        func remember(_ prompt: SignInRequestHandler.Prompt) {
            let now = clock.now
            ladder.acknowledged(prompt, now: now)
            do {
                try home.saveAnsweredSignIns(ladder.answeredRequests(now: now))
            } catch {
                report(
                    .failed(
                        deviceModel: prompt.request.deviceModel,
                        reason: "the request was answered, but the record of answered requests was not saved, so a "
                            + "replay of it after a restart may prompt again: \(error)"))
            }
        }
        let ownInbox = try state.inbox
        // Prompts are asked one at a time, in the order their requests came; the loop below keeps reading the
        // inbox meanwhile, so that a settlement (another sibling answered, or the new device gave up) dismisses a
        // prompt that is showing or waiting its turn. They outlive a reconnection: an answer goes out on the
        // connection that is current when the person gives it.
        let prompts = PendingPrompts()
        defer { prompts.cancelAll() }
        let current = CurrentRelay(clock: clock)
        defer { current.set(nil) }
        var previous: Task<Void, Never>?
        var started = resumed
        var failures = 0
        // One connection at a time: when the relay ends it (the node lost its bus link and said so, or the
        // connection dropped), connect again with backoff and jitter, through whatever balancer is in front, and
        // subscribe again. Only the first connection's failure ends `run`.
        while true {
            let relay: any RelayConnection
            let sync: SyncService
            let loop: SyncLoop
            do {
                relay = try await context.connectRelay()
                do {
                    try await relay.subscribe(discoveryInbox, pushToken: pushToken ?? Data())
                    try await relay.subscribe(ownInbox, pushToken: pushToken ?? Data())
                    // A new device of the account asks for the store on this device's own inbox.
                    sync = try SyncService(context: context, relay: relay, configuration: syncConfiguration)
                    loop = try sync.reconcileLoop(configuration: reconcileConfiguration) { report(.reconcile($0)) }
                } catch {
                    await relay.close()
                    throw error
                }
            } catch  where started && Self.isTransient(error) && !Task.isCancelled {
                failures += 1
                let delay = reconnectDelay(after: failures)
                report(.reconnecting(reason: "\(error)", after: delay))
                try await clock.sleep(for: delay)
                continue
            }
            current.set(relay)
            if !started {
                started = true
                if let offerCode {
                    let minted = try await client.mintGrant(
                        IdentityAPI.GrantRequest(kind: .code), session: try await credentials.session())
                    offerCode(
                        GrantCode(
                            code: minted.grant, expiresAt: Date(timeIntervalSince1970: TimeInterval(minted.expiresAt))))
                }
                ready()
            } else {
                report(.reconnected)
            }
            let connectedAt = clock.now
            // The reconcile loop runs while this connection lasts: a round with every sibling now (to catch what
            // changed while this device was away), then on its interval.
            let reconciling = Task { await loop.run() }
            // The log is asked for the account's epoch on an interval; new keys end this connection, and `run`
            // listens again under them.
            let rotation = RotationWatch()
            // Whether the account's keys moved: the log is asked, and new keys (or this device's removal) end this
            // connection for `run` to listen again under them. Returns whether it ended.
            let check: @Sendable () async -> Bool = {
                rotation.checked(at: clock.now)
                switch await context.checkRotation() {
                case .unchanged: return false
                case .refused(let reason):
                    report(.rotationRefused(reason: reason))
                    return false
                case .rotated: rotation.flag()
                case .removed(let error): rotation.remove(error)
                }
                await relay.close()
                return true
            }
            // On an interval, and early when a frame on this device's inbox fails its check (a sibling may be
            // writing under keys this device does not have yet), at most once per ``rotationNudgeGap``.
            let watching = Task { [rotationCheckInterval] in
                while !Task.isCancelled {
                    do {
                        try await clock.sleep(for: rotationCheckInterval)
                    } catch {
                        return
                    }
                    if await check() { return }
                }
            }
            // The relay ending a subscription on its own (device_removed: this device was removed, or the discovery
            // inbox rotated away) asks the log at once, and again after each ``rotationNudgeGap`` a few times while
            // the log does not show it yet (the relay hears of a removal before the log's next checkpoint).
            let noticed = Task { [rotationNudgeGap] in
                for await notice in relay.notices {
                    guard case .refused(let code, _) = notice, code == .deviceRemoved else { continue }
                    for _ in 0..<3 {
                        if await check() { return }
                        do {
                            try await clock.sleep(for: rotationNudgeGap)
                        } catch {
                            return
                        }
                    }
                }
            }
            for await delivery in relay.deliveries {
                if Task.isCancelled { break }
                if delivery.subject == ownInbox.subject {
                    // Opened here, in order, so a round's messages reach the loop in the order they came.
                    let opened: (sender: SenderCert, message: SiblingMessage)
                    do {
                        opened = try sync.open(delivery.payload)
                    } catch {
                        report(.sync(.dropped("\(error)")))
                        if rotation.mayNudge(at: clock.now, gap: rotationNudgeGap) { Task { _ = await check() } }
                        continue
                    }
                    if SyncLoop.header(of: opened.message) != nil {
                        loop.deliver(sender: opened.sender, message: opened.message)
                    } else {
                        Task { await sync.respond(opened: opened) { report(.sync($0)) } }
                    }
                    continue
                }
                guard delivery.subject == discoveryInbox.subject else { continue }
                if SignInSettlement.requestDigest(of: delivery.payload) != nil {
                    if let (prompt, outcome) = prompts.settle(by: delivery.payload) {
                        remember(prompt)
                        report(.dismissed(deviceModel: prompt.request.deviceModel, outcome))
                    }
                    continue
                }
                let prompt: SignInRequestHandler.Prompt
                switch ladder.handle(delivery.payload, now: clock.now) {
                case .success(let passed): prompt = passed
                case .failure(let drop):
                    report(.dropped(drop))
                    continue
                }
                do {
                    try await relay.send(
                        try prompt.acknowledgement(deviceFamily: deviceFamily), to: prompt.request.replySubject,
                        wake: .silent, token: try await wallet.take())
                    remember(prompt)
                } catch {
                    report(.failed(deviceModel: prompt.request.deviceModel, reason: "\(error)"))
                    continue
                }
                let turn = previous
                // Registered before its task can run, so that the task's own removal always finds it.
                prompts.add(prompt)
                let answering = Task { [self] in
                    await turn?.value
                    guard !Task.isCancelled else { return }
                    await answer(
                        prompt, decide: decide, report: report, relay: current, discoveryInbox: discoveryInbox.subject,
                        prompts: prompts)
                }
                prompts.attach(answering, to: prompt)
                previous = answering
            }
            reconciling.cancel()
            watching.cancel()
            noticed.cancel()
            _ = await reconciling.value
            _ = await watching.value
            _ = await noticed.value
            current.set(nil)
            await relay.close()
            try Task.checkCancellation()
            if let removed = rotation.removed { throw removed }
            if rotation.isFlagged { return }
            // Backoff starts over only after a connection that lasted: a node that keeps closing its subscribers
            // at once is come back to more and more slowly.
            if clock.now.timeIntervalSince(connectedAt) >= longestReconnectDelay.timeInterval { failures = 0 }
            failures += 1
            let delay = reconnectDelay(after: failures)
            report(
                .reconnecting(
                    reason: relay.ended?.description ?? "the relay closed the connection", after: delay))
            try await clock.sleep(for: delay)
        }
    }

    /// Whether `error` is one a later connection may not meet: the relay unreachable, its node without its bus,
    /// a connection that dropped. A refusal that says this device is wrong (not proven, too many subjects) is not.
    static func isTransient(_ error: any Error) -> Bool {
        switch error {
        case RelayConnectionError.closed, RelayConnectionError.unavailable: true
        case RelayConnectionError.refused(let code, _): code == .unavailable
        default: false
        }
    }

    /// The wait before the `failures`th attempt to connect again: ``reconnectDelay`` doubled each time up to
    /// ``longestReconnectDelay``, then a random half of it taken off (jitter), so that the devices a node closed
    /// at once do not all come back at once.
    func reconnectDelay(after failures: Int) -> Duration {
        var delay = reconnectDelay
        for _ in 1..<max(1, failures) where delay < longestReconnectDelay { delay *= 2 }
        delay = min(delay, longestReconnectDelay)
        return delay * context.environment.randomFraction(in: 0.5...1)
    }

    /// Asks the person about one prompt and sends what they decided. Cancelled when the request is settled
    /// elsewhere: then nothing is sent.
    private func answer(
        _ prompt: SignInRequestHandler.Prompt, decide: @Sendable (SignInRequestHandler.Prompt) async -> Decision,
        report: @Sendable (Outcome) -> Void, relay current: CurrentRelay, discoveryInbox: RelaySubject,
        prompts: PendingPrompts
    ) async {
        let (client, wallet, membership) = (context.client, context.wallet, context.membership)
        let model = prompt.request.deviceModel
        let reply = prompt.request.replySubject
        let asked = context.clock.now
        let decision = await decide(prompt)
        // Decided here: from now on a settlement (this device's own, coming back on the inbox) dismisses nothing.
        guard prompts.remove(prompt) else { return }
        if decision != .ignore, context.clock.now.timeIntervalSince(asked) > promptLifetime {
            report(
                .failed(
                    deviceModel: model,
                    reason: "the answer came after \(Int(promptLifetime)) s, so it was not sent; sign in again on the "
                        + "new device"))
            return
        }
        do {
            switch decision {
            case .ignore:
                report(.ignored(deviceModel: model))
                return
            case .reject:
                try await current.session().send(
                    try prompt.rejection(), to: reply, wake: .silent, token: try await wallet.take())
            case .approve(let code):
                guard prompt.matches(checkCode: code) else {
                    report(.wrongCheckCode(deviceModel: model))
                    return
                }
                // A device the log's roster holds already (enrolled by a six-digit code) gets the seeds alone; any
                // other an `add` grant beside them. Nothing here is a revocation.
                let session = try await context.credentials.session()
                let roster = try await context.bindings.verifiedRoster(
                    try await client.siblings(session: session), ktHandle: membership.ktHandle)
                let key = prompt.request.sealingKey.rawRepresentation
                let enrolled = roster.contains { $0.sealingKey == key }
                // Only the account's current seeds go out: a rotation since this listener started (it takes the new
                // keys within its check) would leave the new device with keys the log no longer holds.
                let held = try HybridSignature.PrivateKey(seedRepresentation: membership.accountSeed.data).publicKey
                guard try await context.bindings.accountSigningKey(ktHandle: membership.ktHandle) == held else {
                    throw DeviceError.notSetUp(
                        "the account's keys were rotated a moment ago (a device was removed), so this device's are "
                            + "not the account's; it takes the new ones within its next check. Ask again from the new "
                            + "device")
                }
                let grant = enrolled ? "" : try await client.mintGrant(session: session).grant
                let approval = try prompt.approval(
                    .init(
                        grant: grant, accountSeed: membership.accountSeed.data, ktHandle: membership.ktHandle,
                        discoverySeed: membership.discoverySeed.data), checkCode: code)
                try await current.session().send(approval, to: reply, wake: .silent, token: try await wallet.take())
                // The checkpoint the log checks advanced to, kept for the next run.
                await context.keepTransparencyPin()
                await settle(prompt, .approved, relay: current, wallet: wallet, discoveryInbox: discoveryInbox)
                report(enrolled ? .approvedByCode(deviceModel: model) : .approved(deviceModel: model))
                return
            }
        } catch {
            report(.failed(deviceModel: model, reason: "\(error)"))
            return
        }
        await settle(prompt, .rejected, relay: current, wallet: wallet, discoveryInbox: discoveryInbox)
        report(.rejected(deviceModel: model))
    }

    /// The other siblings take their prompts for this request away. Best effort: one that misses it can no
    /// longer use the request (the new device has its answer and reads that channel no more).
    private func settle(
        _ prompt: SignInRequestHandler.Prompt, _ outcome: SignInSettlement.Outcome, relay current: CurrentRelay,
        wallet: TokenWallet, discoveryInbox: RelaySubject
    ) async {
        guard let frame = try? prompt.settlement(outcome) else { return }
        try? await current.session().send(
            frame, to: discoveryInbox, wake: PayloadType.signInSettled.wakeClass, token: try await wallet.take())
    }
}

/// The listener's connection to the relay now, replaced as it reconnects: an answer the person gives goes out on
/// whichever connection is current, waiting a while for one while the listener reconnects.
final class CurrentRelay: Sendable {
    private let relay = Mutex<(any RelayConnection)?>(nil)
    private let clock: any DeviceClock

    init(clock: any DeviceClock) { self.clock = clock }

    func set(_ connection: (any RelayConnection)?) { relay.withLock { $0 = connection } }

    /// The current connection, waiting up to `patience` for one.
    func session(patience: Duration = .seconds(30)) async throws -> any RelayConnection {
        let deadline = clock.now.addingTimeInterval(patience.timeInterval)
        while true {
            if let connection = relay.withLock({ $0 }) { return connection }
            guard clock.now < deadline else {
                throw RelayConnectionError.closed(
                    "the relay has been unreachable for \(patience.components.seconds) s, so the answer was not sent")
            }
            try await clock.sleep(for: .milliseconds(50))
        }
    }
}

/// A six-digit code grant for a new device to type (``InboxListener/run(ready:offerCode:decide:report:)``).
public struct GrantCode: Sendable, Equatable {
    public let code: String
    public let expiresAt: Date
}

/// The prompts a listener has acknowledged and not finished, each with the task that asks and answers it.
///
/// A prompt's task may run, decide and take its prompt out before the listener attaches the task to it (a person
/// who answered already, a `decide` that returns at once): attaching then does nothing, since that task is past
/// the point where a settlement could stop it, and cancelling it would throw away an answer already being sent.
/// Only a prompt settled before its task was attached has that task cancelled on attaching.
@_spi(Testing) public final class PendingPrompts: Sendable {
    private struct Entry {
        let prompt: SignInRequestHandler.Prompt
        var task: Task<Void, Never>?
        /// Settled elsewhere before its task was attached: the task is cancelled as it is attached.
        var settled = false
    }

    private let pending = Mutex<[Entry]>([])

    public init() {}

    public func add(_ prompt: SignInRequestHandler.Prompt) {
        pending.withLock { $0.append(Entry(prompt: prompt)) }
    }

    /// Gives `prompt` the task that answers it. A prompt settled already has the task cancelled at once; one that
    /// is gone (its task decided and took it out) leaves the task alone.
    public func attach(_ task: Task<Void, Never>, to prompt: SignInRequestHandler.Prompt) {
        let cancel = pending.withLock { pending -> Bool in
            guard let index = pending.firstIndex(where: { $0.prompt.digest == prompt.digest }) else { return false }
            guard !pending[index].settled else {
                pending.remove(at: index)
                return true
            }
            pending[index].task = task
            return false
        }
        if cancel { task.cancel() }
    }

    /// Takes `prompt` out once its person decided: true if its answer is to be sent, false if a settlement took
    /// it (and cancelled its task, or will as it is attached).
    public func remove(_ prompt: SignInRequestHandler.Prompt) -> Bool {
        pending.withLock { pending in
            guard let index = pending.firstIndex(where: { $0.prompt.digest == prompt.digest }) else { return false }
            return !pending.remove(at: index).settled
        }
    }

    /// The prompt `frame` settles, now cancelled (or marked, to be cancelled as its task is attached), and how it
    /// was settled; nil if it settles none of those still waiting for their person.
    public func settle(by frame: Data) -> (SignInRequestHandler.Prompt, SignInSettlement.Outcome)? {
        let (found, task) = pending.withLock {
            pending -> ((SignInRequestHandler.Prompt, SignInSettlement.Outcome)?, Task<Void, Never>?) in
            for (index, entry) in pending.enumerated() where !entry.settled {
                guard let outcome = entry.prompt.settled(by: frame) else { continue }
                if let task = entry.task {
                    pending.remove(at: index)
                    return ((entry.prompt, outcome), task)
                }
                pending[index].settled = true
                return ((entry.prompt, outcome), nil)
            }
            return (nil, nil)
        }
        task?.cancel()
        return found
    }

    public func cancelAll() { pending.withLock { $0.forEach { $0.task?.cancel() } } }
}

/// What the rotation watch of one connection found (new keys, or this device's removal), and when it last asked.
private final class RotationWatch: Sendable {
    private struct State {
        var flagged = false
        var removed: (any Error)?
        var lastCheck: Date?
    }

    private let state = Mutex(State())

    func flag() { state.withLock { $0.flagged = true } }
    func remove(_ error: any Error) { state.withLock { $0.removed = error } }
    var isFlagged: Bool { state.withLock { $0.flagged } }
    var removed: (any Error)? { state.withLock { $0.removed } }
    func checked(at now: Date) { state.withLock { $0.lastCheck = now } }

    /// Whether an early check may start now: none ran within `gap`. Claims it.
    func mayNudge(at now: Date, gap: Duration) -> Bool {
        state.withLock { state in
            if let last = state.lastCheck, now.timeIntervalSince(last) < gap.timeInterval { return false }
            state.lastCheck = now
            return true
        }
    }
}
