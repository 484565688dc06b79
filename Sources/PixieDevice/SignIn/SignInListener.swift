import Foundation
import PixieWire
import SiblingsCrypto

/// A sibling online for sign-ins (`pixie listen`): it listens on the account's discovery inbox, runs every request
/// through handleSignInRequest's ladder (``SignInRequestHandler``), acknowledges the ones that pass with its device
/// family, asks its person, and seals the answer. Sign-in frames are Silent and wake no one, so a device answers
/// only while it listens (the seed: "If no sibling is online, nothing answers").
public struct SignInListener: Sendable {
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
    }

    public let home: DeviceHome
    public let deviceFamily: String
    /// How far a request's clock may be from this device's.
    public var freshness: TimeInterval = 300
    /// How long a prompt may wait for its person: an answer after it is not sent (the new device has given up,
    /// and a grant would outlive its use). The grant's own lifetime by default.
    public var promptLifetime: TimeInterval = 180

    public init(home: DeviceHome, deviceFamily: String) {
        self.home = home
        self.deviceFamily = deviceFamily
    }

    /// Listens until the task is cancelled or the relay closes the connection (which throws). `ready` is called
    /// once the discovery inbox is subscribed; `decide` for every request that passed the ladder; `report` for
    /// what became of every frame.
    public func run(
        ready: @escaping @Sendable () -> Void = {},
        decide: @escaping @Sendable (SignInRequestHandler.Prompt) async -> Decision,
        report: @escaping @Sendable (Outcome) -> Void = { _ in }
    ) async throws {
        let flow = OnboardingFlow(home: home)
        let state = try home.state()
        let membership = try flow.member(state)
        let server = try state.serverURL
        let client = PixieClient(baseURL: server)
        let bindings = try flow.bindings(state, client)
        let wallet = TokenWallet(client: client, keyListVerifier: bindings, payer: .session(membership.sessionToken))
        let discoveryKey = try XWing.PrivateKey(seedRepresentation: membership.discoverySeed.data)
        let discoveryInbox = try RelaySubjectKey(discoverySeed: membership.discoverySeed.data)
        var ladder = SignInRequestHandler(
            discoveryKey: discoveryKey,
            phoneVerifier: PhoneOwnershipCert.Verifier(pinnedKeys: [state.trustBundle.phoneVerifyKey]),
            ownPhoneID: state.phoneID.data, freshness: freshness)
        let relay = try await RelaySession.connect(to: server)
        defer { Task { await relay.close() } }
        try await relay.subscribe(discoveryInbox)
        try await relay.subscribe(try state.inbox)
        ready()
        for await delivery in relay.deliveries where delivery.subject == discoveryInbox.subject {
            try Task.checkCancellation()
            let prompt: SignInRequestHandler.Prompt
            switch ladder.handle(delivery.payload, now: Date()) {
            case .success(let passed): prompt = passed
            case .failure(let drop):
                report(.dropped(drop))
                continue
            }
            let model = prompt.request.deviceModel
            let reply = prompt.request.replySubject
            do {
                try await relay.send(
                    try prompt.acknowledgement(deviceFamily: deviceFamily), to: reply, wake: .silent,
                    token: try await wallet.take())
                ladder.acknowledged(prompt, now: Date())
                let asked = Date()
                let decision = await decide(prompt)
                if decision != .ignore, Date().timeIntervalSince(asked) > promptLifetime {
                    report(
                        .failed(
                            deviceModel: model,
                            reason: "the answer came after \(Int(promptLifetime)) s, so it was not sent; sign in "
                                + "again on the new device"))
                    continue
                }
                switch decision {
                case .ignore:
                    report(.ignored(deviceModel: model))
                case .reject:
                    try await relay.send(
                        try prompt.rejection(), to: reply, wake: .silent, token: try await wallet.take())
                    report(.rejected(deviceModel: model))
                case .approve(let code):
                    guard prompt.matches(checkCode: code) else {
                        report(.wrongCheckCode(deviceModel: model))
                        continue
                    }
                    // An `add` grant: nothing here is a revocation.
                    let grant = try await client.mintGrant(session: membership.sessionToken)
                    let approval = try prompt.approval(
                        .init(
                            grant: grant.grant, accountSeed: membership.accountSeed.data, ktHandle: membership.ktHandle,
                            discoverySeed: membership.discoverySeed.data), checkCode: code)
                    try await relay.send(approval, to: reply, wake: .silent, token: try await wallet.take())
                    report(.approved(deviceModel: model))
                    // The checkpoint the wallet's key-list check advanced to, kept for the next run.
                    let pin = Base64URLBytes(await bindings.state)
                    try? home.update { $0.transparency = pin }
                }
            } catch {
                report(.failed(deviceModel: model, reason: "\(error)"))
            }
        }
        try Task.checkCancellation()
        throw RelaySessionError.closed("the relay closed the connection; listen again")
    }
}
