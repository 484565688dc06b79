import Foundation
import PixieWire
import SiblingsCrypto
import Transparency
import WebAuthn

/// Setting a device up, as the seed's OnboardingFlow walks it, for the authorization half: a first device creates
/// the account; a new one asks a sibling ("May I join?") and joins with its approval. State is kept in a
/// ``DeviceHome``. Every binding the server serves is checked against the transparency log first.
///
/// A device that joins starts with an empty store; the state half, absorbing a sibling's store with the 30-second
/// grace before "continue anyway", is ``SyncService``'s (`pixie sync`).
public struct OnboardingFlow: Sendable {
    /// The person's SMS code for `number` (typed, or read from a development outbox).
    public typealias CodeSource = @Sendable (_ number: String, _ codeLength: Int) async throws -> String

    public let home: DeviceHome
    /// The network, the relay, the clock: the system's unless the app (or a test) brings its own.
    public let environment: DeviceEnvironment

    public init(home: DeviceHome, environment: DeviceEnvironment = DeviceEnvironment()) {
        self.home = home
        self.environment = environment
    }

    func client(_ server: URL) -> PixieClient { PixieClient(transport: environment.transport(server)) }

    /// The first device of a new account (`pixie init`): verifies the number, makes the account signing seed, the
    /// discovery key and inbox, enrolls this device and its passkey, and checks all three bindings in the log.
    ///
    /// `family` ("iPhone", "Linux") is enrolled beside the name, for siblings to show.
    public func createAccount(
        server: URL, trustBundle: TrustBundle, name: String, phoneNumber: String, code: CodeSource,
        family: String? = nil
    ) async throws -> DeviceState {
        try refuseIfMember()
        let client = self.client(server)
        // A creation that was cut off (a crash, a timeout after the server committed) left its seeds and keys
        // here: use them again, so the account they made is not lost.
        let pending = try home.load().flatMap { state in
            state.membership?.ktHandle == "" && state.phoneNumber == phoneNumber ? state : nil
        }
        var state = try await fresh(
            server: server, trustBundle: trustBundle, name: name, phoneNumber: phoneNumber, client: client, code: code,
            keeping: pending)
        state.family = family
        let accountSeed = pending?.membership?.accountSeed.data ?? HybridSignature.PrivateKey().seedRepresentation
        let discoverySeed = pending?.membership?.discoverySeed.data ?? SecureRandom.bytes(count: 32)
        let accountKey = try HybridSignature.PrivateKey(seedRepresentation: accountSeed)
        let discoveryKey = try XWing.PrivateKey(seedRepresentation: discoverySeed)
        let discoveryInbox = try RelaySubjectKey(discoverySeed: discoverySeed).subject
        // The seeds are saved before the server hears of them: an account whose seeds no device holds could never
        // approve anyone.
        state.membership = DeviceState.Membership(
            accountID: "", deviceID: "", ktHandle: "", sessionToken: "", sessionExpiresAt: 0,
            accountSeed: Base64URLBytes(accountSeed), discoverySeed: Base64URLBytes(discoverySeed))
        try home.save(state)
        let enrolled: IdentityAPI.EnrolledResponse
        do {
            enrolled = try await client.createAccount(
                IdentityAPI.CreateAccountRequest(
                    phoneCert: state.phoneCert, discoveryInbox: Base64URLBytes(discoveryInbox.rawRepresentation),
                    discoveryXWingPubkey: Base64URLBytes(discoveryKey.publicKey.rawRepresentation),
                    accountSigningPubkey: Base64URLBytes(accountKey.publicKey.rawRepresentation),
                    device: try state.deviceFields, passkey: try await passkey(client, &state)))
        } catch let error as PixieClientError where error.code == "account_exists" && pending != nil {
            // The cut-off creation did go through: sign in with this device's passkey instead.
            enrolled = try await login(client, &state)
        }
        let bindings = try bindings(state, client)
        let discovery = try await client.lookupOwnDiscovery(phoneCert: state.phoneCert.data)
        // What the server now serves about the account must be what the log holds, and the account must be ours.
        let verified = try await bindings.verifiedDiscovery(discovery, phoneID: state.phoneID.data)
        guard verified.key == discoveryKey.publicKey, enrolled.ktHandle.map({ $0 == verified.ktHandle }) ?? true
        else { throw LoggedBindingsError.differs("the discovery key") }
        guard try await bindings.accountSigningKey(ktHandle: verified.ktHandle) == accountKey.publicKey else {
            throw LoggedBindingsError.differs("the account signing key")
        }
        state.membership = DeviceState.Membership(
            accountID: enrolled.accountID, deviceID: enrolled.deviceID, ktHandle: verified.ktHandle,
            sessionToken: enrolled.sessionToken, sessionExpiresAt: enrolled.sessionExpiresAt,
            accountSeed: Base64URLBytes(accountSeed), discoverySeed: Base64URLBytes(discoverySeed))
        try home.save(state)
        _ = try await verifiedRoster(state, client, bindings, including: true)
        state.transparency = Base64URLBytes(await bindings.state)
        try home.save(state)
        return state
    }

    /// A new device (`pixie signin`): verifies the number, asks the account's siblings, and once one approves,
    /// adopts the seed (saved before the grant is used), enrolls with the grant (revoke_others false) and checks
    /// that the roster the log backs now holds it.
    ///
    /// With `grantCode`, the six digits a sibling showed (`pixie listen --grant-code`), the device enrolls first,
    /// by the code with its phone cert, and then asks for the seeds the same sealed way, with the check code typed
    /// on the sibling as always (identity-svc mints the code and sees it, so it cannot stand in for the person).
    /// A device cut off between the two steps asks again for the seeds when run again.
    public func signIn(
        server: URL, trustBundle: TrustBundle, name: String, phoneNumber: String, code: CodeSource,
        grantCode: String? = nil, family: String? = nil, configuration: SignInApprovalRequester.Configuration,
        events: @escaping @Sendable (SignInApprovalRequester.Event) -> Void = { _ in }
    ) async throws -> DeviceState {
        let pending = try home.load().flatMap { $0.membership?.isEnrolledWithoutSeeds == true ? $0 : nil }
        if pending == nil { try refuseIfMember() }
        let client = self.client(server)
        var state: DeviceState
        if let pending {
            state = pending
        } else {
            state = try await fresh(
                server: server, trustBundle: trustBundle, name: name, phoneNumber: phoneNumber, client: client,
                code: code)
            state.family = family
            try home.save(state)
        }
        if let grantCode, pending == nil {
            // Enrolled by the code: a member of the roster, with no seed yet.
            let enrolled = try await client.registerWithGrant(
                IdentityAPI.RegisterRequest(
                    code: grantCode, phoneCert: state.phoneCert, device: try state.deviceFields,
                    passkey: try await passkey(client, &state), revokeOthers: false))
            state.membership = DeviceState.Membership(
                accountID: enrolled.accountID, deviceID: enrolled.deviceID, ktHandle: enrolled.ktHandle ?? "",
                sessionToken: enrolled.sessionToken, sessionExpiresAt: enrolled.sessionExpiresAt,
                accountSeed: Base64URLBytes(Data()), discoverySeed: Base64URLBytes(Data()))
            try home.save(state)
        }
        let enrolledAlready = state.membership?.isEnrolledWithoutSeeds == true
        let bindings = try bindings(state, client)
        let relay = try await environment.relay(server)
        let approval: SignInApprovalRequester.Approval
        do {
            approval = try await SignInApprovalRequester(
                client: client, bindings: bindings, relay: relay, phoneCert: state.phoneCert.data,
                phoneID: state.phoneID.data, sealingKey: try state.sealing.publicKey, configuration: configuration,
                environment: environment
            ).requestApproval(events: events)
        } catch {
            await relay.close()
            throw error
        }
        await relay.close()
        guard enrolledAlready || !approval.grant.isEmpty else {
            throw DeviceError.notSetUp(
                "the approving device sent the seeds without a grant, as it does for a device enrolled by a code "
                    + "already; this device is not, so it did not join: sign in again")
        }
        if enrolledAlready, let membership = state.membership, !membership.ktHandle.isEmpty,
            membership.ktHandle != approval.ktHandle
        {
            throw SignInError.anotherAccount
        }
        // From here the approval is used: cancelling the wait no longer applies, since stopping halfway could
        // leave this device enrolled on the server with nothing saved here.
        let finished = Task { [self, state] in
            try await finish(
                state, approval: approval, enrolledAlready: enrolledAlready, client: client, bindings: bindings)
        }
        return try await finished.value
    }

    /// Adopts the approval's seeds (saved first), enrolls with its grant unless this device is enrolled already (a
    /// grant it carries then is left to expire), and checks that the roster the log backs holds this device.
    private func finish(
        _ state: DeviceState, approval: SignInApprovalRequester.Approval, enrolledAlready: Bool, client: PixieClient,
        bindings: LoggedBindings
    ) async throws -> DeviceState {
        var state = state
        // The seed first: it is what makes this device able to speak to its siblings at all.
        var membership =
            state.membership
            ?? DeviceState.Membership(
                accountID: "", deviceID: "", ktHandle: "", sessionToken: "", sessionExpiresAt: 0,
                accountSeed: Base64URLBytes(Data()), discoverySeed: Base64URLBytes(Data()))
        membership.ktHandle = approval.ktHandle
        membership.accountSeed = Base64URLBytes(approval.accountSeed)
        membership.discoverySeed = Base64URLBytes(approval.discoverySeed)
        state.membership = membership
        try home.save(state)
        if !enrolledAlready {
            let enrolled = try await client.registerWithGrant(
                IdentityAPI.RegisterRequest(
                    grant: approval.grant, device: try state.deviceFields, passkey: try await passkey(client, &state),
                    revokeOthers: false))
            state.membership?.accountID = enrolled.accountID
            state.membership?.deviceID = enrolled.deviceID
            state.membership?.sessionToken = enrolled.sessionToken
            state.membership?.sessionExpiresAt = enrolled.sessionExpiresAt
            try home.save(state)
        }
        _ = try await verifiedRoster(state, client, bindings, including: true)
        state.transparency = Base64URLBytes(await bindings.state)
        try home.save(state)
        return state
    }

    /// Takes the keys of `bundle`, the app's own (shipped with a release newer than the one this device enrolled
    /// with), in place of those saved at enrollment: the phone-verify keys (a rotation: docs/operations.md,
    /// "Rotating the phone-verify key") and the sender-cert key. Only a bundle of the same transparency log (key
    /// and origin) is taken, and the checkpoint this device has pinned stays: a bundle can add keys to trust, never
    /// move the device to another log or back in this one. Returns whether anything changed.
    @discardableResult
    public func adoptTrustBundle(_ bundle: TrustBundle) throws -> Bool {
        let saved = try home.state().trustBundle
        guard bundle.transparencyLogKey == saved.transparencyLogKey,
            bundle.transparencyLogOrigin == saved.transparencyLogOrigin
        else {
            throw DeviceError.notSetUp(
                "that trust bundle is of another transparency log than the one this device enrolled with, so it was "
                    + "not taken; use the bundle of this device's server")
        }
        guard
            bundle.phoneVerifyKeys != saved.phoneVerifyKeys || bundle.senderCertKey != saved.senderCertKey
        else { return false }
        try home.update { state in
            state.trustBundle.phoneVerifyKey = bundle.phoneVerifyKey
            state.trustBundle.additionalPhoneVerifyKeys = bundle.additionalPhoneVerifyKeys
            state.trustBundle.senderCertKey = bundle.senderCertKey
        }
        return true
    }

    /// One device of the account, as `pixie devices` lists it.
    public struct Sibling: Sendable, Equatable {
        public let deviceID: String
        public let pubkey: Data
        /// The name and family it enrolled with, as the server lists them (not in the log: labels for people).
        public let name: String
        public let family: String?
        public let isThisDevice: Bool
        /// When it enrolled, the device that added it (nil for the account's first) and when it was last seen, as
        /// the server records them: labels for people, not in the log.
        public let addedAt: Date?
        public let addedBy: String?
        public let lastSeenAt: Date?
    }

    /// The account's devices, checked against the log (`pixie devices`).
    public func devices() async throws -> [Sibling] {
        let state = try home.state()
        let client = self.client(try state.serverURL)
        let bindings = try bindings(state, client)
        let membership = try member(state)
        let listed = try await client.siblings(session: try await DeviceCredentials(flow: self).session())
        let roster = try await bindings.verifiedRoster(listed, ktHandle: membership.ktHandle)
        let own = try state.identity.publicKey.rawRepresentation
        // Only the advanced pin is written back, and only if the device is still set up here.
        let pin = Base64URLBytes(await bindings.state)
        try home.update { $0.transparency = pin }
        return zip(listed.devices, roster).map {
            Sibling(
                deviceID: $0.0.deviceID, pubkey: $0.1.pubkey, name: $0.0.name, family: $0.0.family,
                isThisDevice: $0.1.pubkey == own,
                addedAt: $0.0.addedAt.map { Date(timeIntervalSince1970: TimeInterval($0)) }, addedBy: $0.0.addedBy,
                lastSeenAt: $0.0.lastSeenAt.map { Date(timeIntervalSince1970: TimeInterval($0)) })
        }
    }

    /// Ends this device's session on the server and forgets the account here: its seeds, session, keys and store
    /// (`pixie signout`). The roster keeps the device until another device removes it.
    ///
    /// The last device of an account holds the only copy of its account seed and its data, so signing it out
    /// would lose the account: that is refused unless `evenIfLast` says the person means it.
    public func signOut(evenIfLast: Bool = false) async throws {
        let state = try home.state()
        if let membership = state.membership, !membership.sessionToken.isEmpty {
            let client = self.client(try state.serverURL)
            if !evenIfLast {
                do {
                    let devices = try await self.devices()
                    if devices.allSatisfy(\.isThisDevice) {
                        throw DeviceError.lastDevice(
                            "this is the account's only device: signing out would lose its account seed and its "
                                + "store for good. Sign another device in first (`pixie signin` there, `pixie listen` "
                                + "here), or pass --last-device to lose them")
                    }
                } catch PixieClientError.refused(401, _) {
                    // The session is over already: nothing on the server to ask, or to revoke.
                }
            }
            do {
                try await client.revokeSession(membership.sessionToken)
            } catch PixieClientError.refused(401, _) {
                // Already ended: nothing to revoke.
            }
        }
        try home.erase()
    }

    // MARK: pieces

    func member(_ state: DeviceState) throws -> DeviceState.Membership {
        guard let membership = state.membership, !membership.sessionToken.isEmpty else {
            throw DeviceError.notSetUp("this device is not in an account yet: run `pixie init` or `pixie signin`")
        }
        return membership
    }

    private func refuseIfMember() throws {
        if let state = try home.load(), state.membership?.sessionToken.isEmpty == false {
            throw DeviceError.alreadySetUp(
                "\(home.directory.path) already holds a device of an account; use another --home, or `pixie signout` "
                    + "first")
        }
    }

    func bindings(_ state: DeviceState, _ client: PixieClient) throws -> LoggedBindings {
        let logKey = try LogKey(
            origin: state.trustBundle.transparencyLogOrigin, publicKey: state.trustBundle.transparencyLogKey)
        return LoggedBindings(
            verifier: try TransparencyVerifier(logKey: logKey, state: state.transparency.data), client: client)
    }

    /// A new device's keys, and a verified cert for `phoneNumber`.
    private func fresh(
        server: URL, trustBundle: TrustBundle, name: String, phoneNumber: String, client: PixieClient,
        code: CodeSource, keeping previous: DeviceState? = nil
    ) async throws -> DeviceState {
        let verifier = try TransparencyVerifier(trustBundle: trustBundle)
        let started = try await client.startPhoneVerification(phoneNumber)
        let typed = try await code(phoneNumber, started.codeLength)
        let checked = try await client.checkPhoneVerification(id: started.verificationID, code: typed)
        let cert = try PhoneOwnershipCert.Verifier(pinnedKeys: trustBundle.phoneVerifyKeys).verify(
            checked.phoneCert.data, now: environment.clock.now)
        if var previous {
            previous.phoneCert = checked.phoneCert
            previous.phoneID = Base64URLBytes(cert.phoneID)
            return previous
        }
        return DeviceState(
            server: server.absoluteString, trustBundle: trustBundle, name: name, phoneNumber: phoneNumber,
            phoneCert: checked.phoneCert, phoneID: Base64URLBytes(cert.phoneID),
            identitySeed: Base64URLBytes(HybridSignature.PrivateKey().seedRepresentation),
            sealingSeed: Base64URLBytes(XWing.PrivateKey().seedRepresentation),
            inboxKey: Base64URLBytes(Curve25519.Signing.PrivateKey().rawRepresentation),
            passkey: Base64URLBytes(SoftwareAuthenticator().exportState()),
            transparency: Base64URLBytes(verifier.state),
            membership: nil)
    }

    /// A passkey registration from this device's authenticator, whose state is saved in `state`.
    private func passkey(
        _ client: PixieClient, _ state: inout DeviceState
    ) async throws
        -> IdentityAPI.PasskeyRegistration
    {
        let authenticator = try SoftwareAuthenticator(state: state.passkey.data)
        let challenge = try await client.passkeyChallenge(.register)
        let credential = authenticator.makeCredential(
            rpID: challenge.rpID, origin: "https://\(challenge.rpID)", challenge: challenge.challenge.data,
            userID: try state.identity.publicKey.rawRepresentation.prefix(32))
        state.passkey = Base64URLBytes(authenticator.exportState())
        try home.save(state)
        return IdentityAPI.PasskeyRegistration(challengeID: challenge.challengeID, credential: credential)
    }

    /// A session from this device's passkey (`POST /v1/auth/passkey/login`).
    func login(_ client: PixieClient, _ state: inout DeviceState) async throws -> IdentityAPI.EnrolledResponse {
        let authenticator = try SoftwareAuthenticator(state: state.passkey.data)
        let challenge = try await client.passkeyChallenge(.login)
        // The first credential is the one the cut-off creation registered (the retry made another, unused).
        let assertion = try authenticator.getAssertion(
            rpID: challenge.rpID, origin: "https://\(challenge.rpID)", challenge: challenge.challenge.data,
            credentialID: authenticator.credentialIDs(rpID: challenge.rpID).first)
        state.passkey = Base64URLBytes(authenticator.exportState())
        // Only the passkey's counter is written back, under the home's lock, and only if the device is still set
        // up here: a renewal must not undo what another process saved, or bring back a signed-out device.
        let passkey = state.passkey
        try home.update { $0.passkey = passkey }
        return try await client.passkeyLogin(
            IdentityAPI.PasskeyAssertion(challengeID: challenge.challengeID, credential: assertion))
    }

    private func verifiedRoster(
        _ state: DeviceState, _ client: PixieClient, _ bindings: LoggedBindings, including: Bool
    ) async throws -> [RosterDevice] {
        let membership = try member(state)
        let roster = try await bindings.verifiedRoster(
            try await client.siblings(session: membership.sessionToken), ktHandle: membership.ktHandle)
        let own = try state.identity.publicKey.rawRepresentation
        guard roster.contains(where: { $0.pubkey == own }) == including else {
            throw LoggedBindingsError.differs("the account's roster (this device is missing from it)")
        }
        return roster
    }
}
