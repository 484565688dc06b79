import Foundation
import PixieDevice
import PixieWire
@_spi(Testing) import PrivacyPass
import SiblingsCrypto
import Synchronization
import Testing
import Transparency

/// An identity-svc or credential-svc that lies: it passes every exchange through and rewrites the answers of one
/// path.
struct HostileTransport: HTTPTransport {
    let inner: any HTTPTransport
    let path: String
    let rewrite: @Sendable (inout [String: Any]) -> Void

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        var response = try await inner.send(request)
        guard request.target == path,
            var object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        else { return response }
        rewrite(&object)
        response.body = try JSONSerialization.data(withJSONObject: object)
        return response
    }
}

/// A real pixie-server with an account whose first device listens on the discovery inbox and answers sign-in
/// requests through its ladder, as `decide` says.
struct SignInWorld {
    enum Decision: Sendable {
        case approve
        case reject
        case ignore
        /// A device that kept this account's discovery seed (a removed or stolen one) answers with a grant, seed
        /// and KT handle of another account it controls.
        case approveIntoAnotherAccount
    }

    let directory: URL
    let bundle: TrustBundle
    let server: RunningServer
    let client: PixieClient
    let number = "+14155550142"
    let accountID: String
    let ktHandle: String
    let sessionToken: String
    let sibling: Task<Void, Never>
    let siblingRelay: WebSocketRelayConnection
    /// Requests the sibling's ladder passed.
    let prompts = Counter()

    init(decide: Decision, environment: [String: String] = [:]) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-requester-\(UUID())")
        bundle = try AgainstTheServerTests.trustBundle(dataDirectory: directory)
        server = try await RunningServer(dataDirectory: directory, environment: environment)
        client = PixieClient(baseURL: server.base)
        let account = HybridSignature.PrivateKey()
        let discoverySeed = SecureRandom.bytes(count: 32)
        let discoveryKey = try XWing.PrivateKey(seedRepresentation: discoverySeed)
        let discoveryInbox = try RelaySubjectKey(discoverySeed: discoverySeed)
        let phone = TestDevice()
        let cert = try await Self.phoneCert(client: client, number: number, directory: directory)
        let enrolled = try await client.createAccount(
            IdentityAPI.CreateAccountRequest(
                phoneCert: Base64URLBytes(cert),
                discoveryInbox: Base64URLBytes(discoveryInbox.subject.rawRepresentation),
                discoveryXWingPubkey: Base64URLBytes(discoveryKey.publicKey.rawRepresentation),
                accountSigningPubkey: Base64URLBytes(account.publicKey.rawRepresentation), device: phone.fields,
                passkey: try await phone.passkey(client)))
        accountID = enrolled.accountID
        ktHandle = try #require(enrolled.ktHandle)
        sessionToken = enrolled.sessionToken
        let bindings = LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client)
        let wallet = TokenWallet(client: client, keyListVerifier: bindings, payer: .session(enrolled.sessionToken))
        let relay = try await WebSocketRelayConnection.connect(to: server.base)
        try await relay.subscribe(discoveryInbox)
        siblingRelay = relay
        let verifier = PhoneOwnershipCert.Verifier(pinnedKeys: [bundle.phoneVerifyKey])
        var ladder = SignInRequestHandler(
            discoveryKey: discoveryKey, phoneVerifier: verifier,
            ownPhoneID: try verifier.verify(cert, now: Date()).phoneID)
        // The other account, for approveIntoAnotherAccount: its grant, seed and handle are the attacker's to give.
        var other: (session: String, seed: Data, handle: String)?
        if case .approveIntoAnotherAccount = decide {
            let otherAccount = HybridSignature.PrivateKey()
            let otherSeed = SecureRandom.bytes(count: 32)
            let otherDevice = TestDevice()
            let otherEnrolled = try await client.createAccount(
                IdentityAPI.CreateAccountRequest(
                    phoneCert: Base64URLBytes(
                        try await Self.phoneCert(client: client, number: "+14155550143", directory: directory)),
                    discoveryInbox: Base64URLBytes(
                        try RelaySubjectKey(discoverySeed: otherSeed).subject.rawRepresentation),
                    discoveryXWingPubkey: Base64URLBytes(
                        try XWing.PrivateKey(seedRepresentation: otherSeed).publicKey.rawRepresentation),
                    accountSigningPubkey: Base64URLBytes(otherAccount.publicKey.rawRepresentation),
                    device: otherDevice.fields, passkey: try await otherDevice.passkey(client)))
            other = (otherEnrolled.sessionToken, otherAccount.seedRepresentation, try #require(otherEnrolled.ktHandle))
        }
        let client = client
        let ktHandle = ktHandle
        let prompts = prompts
        let attacker = other
        // The person on the sibling reads the check code off the new device's screen; here it comes through
        // `codes`, set by the test from the requester's `.waiting` event.
        let codes = CheckCodes.shared
        sibling = Task {
            for await delivery in relay.deliveries {
                guard case .success(let prompt) = ladder.handle(delivery.payload, now: Date()) else { continue }
                prompts.value.withLock { $0 += 1 }
                let reply = prompt.request.replySubject
                do {
                    try await relay.send(
                        try prompt.acknowledgement(deviceFamily: "Linux"), to: reply, wake: .silent,
                        token: try await wallet.take())
                    switch decide {
                    case .ignore: continue
                    case .reject:
                        try await relay.send(
                            try prompt.rejection(), to: reply, wake: .silent, token: try await wallet.take())
                    case .approveIntoAnotherAccount:
                        guard let attacker else { continue }
                        let grant = try await client.mintGrant(session: attacker.session)
                        let code = try await codes.next()
                        let approval = try prompt.approval(
                            .init(
                                grant: grant.grant, accountSeed: attacker.seed, ktHandle: attacker.handle,
                                discoverySeed: discoverySeed), checkCode: code)
                        try await relay.send(approval, to: reply, wake: .silent, token: try await wallet.take())
                    case .approve:
                        let grant = try await client.mintGrant(session: enrolled.sessionToken)
                        let code = try await codes.next()
                        let approval = try prompt.approval(
                            .init(
                                grant: grant.grant, accountSeed: account.seedRepresentation, ktHandle: ktHandle,
                                discoverySeed: discoverySeed), checkCode: code)
                        try await relay.send(approval, to: reply, wake: .silent, token: try await wallet.take())
                    }
                } catch {
                    continue
                }
            }
        }
    }

    static func phoneCert(client: PixieClient, number: String, directory: URL) async throws -> Data {
        let started = try await client.startPhoneVerification(number)
        let code = try #require(try AgainstTheServerTests.lastCode(to: number, in: directory))
        return try await client.checkPhoneVerification(id: started.verificationID, code: code).phoneCert.data
    }

    /// A new device's requester for the account's number, through `transport` (the real one by default).
    func requester(
        transport: (any HTTPTransport)? = nil, clock: any DeviceClock = SystemDeviceClock(),
        configure: (inout SignInApprovalRequester.Configuration) -> Void = { _ in }
    ) async throws -> (SignInApprovalRequester, WebSocketRelayConnection) {
        let client = transport.map { PixieClient(transport: $0) } ?? self.client
        let cert = try await Self.phoneCert(client: self.client, number: number, directory: directory)
        let relay = try await WebSocketRelayConnection.connect(to: server.base)
        var configuration = SignInApprovalRequester.Configuration(deviceModel: "Linux laptop")
        configuration.resendInterval = .milliseconds(100)
        configuration.longestResendInterval = .milliseconds(400)
        configuration.maximumWait = .seconds(20)
        configure(&configuration)
        let requester = SignInApprovalRequester(
            client: client,
            bindings: LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client),
            relay: relay, phoneCert: cert,
            phoneID: try PhoneOwnershipCert.Verifier(pinnedKeys: [bundle.phoneVerifyKey]).verify(cert, now: Date())
                .phoneID,
            sealingKey: XWing.PrivateKey().publicKey, configuration: configuration,
            environment: DeviceEnvironment(clock: clock))
        return (requester, relay)
    }

    func stop() async {
        sibling.cancel()
        await siblingRelay.close()
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

final class Counter: Sendable {
    let value = Mutex(0)
}

/// The check codes the new devices show, handed to the sibling's person in order.
final class CheckCodes: Sendable {
    static let shared = CheckCodes()
    private let codes = Mutex<[String]>([])

    func put(_ code: String) { codes.withLock { $0.append(code) } }

    func next() async throws -> String {
        for _ in 0..<6000 {
            if let code = codes.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return code }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw Failure(description: "no check code was shown")
    }
}

@Suite("SignInApprovalRequester against the real pixie-server", .serialized)
struct SignInApprovalRequesterTests {
    @Test("approved: waiting with a check code, acknowledged, then an approval whose seed the log backs")
    func approved() async throws {
        let world = try await SignInWorld(decide: .approve)
        let (requester, relay) = try await world.requester()
        let events = Mutex<[SignInApprovalRequester.Event]>([])
        let approval = try await requester.requestApproval { event in
            events.withLock { $0.append(event) }
            if case .waiting(let code) = event { CheckCodes.shared.put(code) }
        }
        #expect(approval.ktHandle == world.ktHandle)
        #expect(events.withLock { $0.contains(.acknowledged(deviceFamily: "Linux")) })
        // The grant it carries enrolls the device beside the first one.
        let laptop = TestDevice()
        let joined = try await world.client.registerWithGrant(
            IdentityAPI.RegisterRequest(
                grant: approval.grant, device: laptop.fields, passkey: try await laptop.passkey(world.client)))
        #expect(joined.accountID == world.accountID)
        #expect(try await world.client.siblings(session: joined.sessionToken).devices.count == 2)
        await relay.close()
        await world.stop()
    }

    @Test("an approval into another account, from a device that kept the discovery seed, is refused")
    func anotherAccount() async throws {
        let world = try await SignInWorld(decide: .approveIntoAnotherAccount)
        let (requester, relay) = try await world.requester()
        await #expect(throws: SignInError.anotherAccount) {
            try await requester.requestApproval { event in
                if case .waiting(let code) = event { CheckCodes.shared.put(code) }
            }
        }
        #expect(try await world.client.siblings(session: world.sessionToken).devices.count == 1)
        await relay.close()
        await world.stop()
    }

    @Test("rejected: the wait ends with a clear error, and nothing joins")
    func rejected() async throws {
        let world = try await SignInWorld(decide: .reject)
        let (requester, relay) = try await world.requester()
        await #expect(throws: SignInError.rejected) { try await requester.requestApproval() }
        #expect(try await world.client.siblings(session: world.sessionToken).devices.count == 1)
        await relay.close()
        await world.stop()
    }

    @Test("no sibling online: the request goes out on its schedule, nothing answers, the wait ends")
    func noSiblingOnline() async throws {
        let world = try await SignInWorld(decide: .ignore)
        // The sibling goes offline before the request is made.
        await world.siblingRelay.close()
        let (requester, relay) = try await world.requester {
            $0.maximumWait = .milliseconds(1500)
        }
        let error = await #expect(throws: SignInError.self) { try await requester.requestApproval() }
        #expect(error == .noAnswer(waited: .milliseconds(1500)))
        #expect(world.prompts.value.withLock { $0 } == 0)
        #expect(try await world.client.siblings(session: world.sessionToken).devices.count == 1)
        await relay.close()
        await world.stop()
    }

    @Test("a device whose clock is 10 minutes ahead is told so before it sends; the sibling drops it, as the seed says")
    func clockOff() async throws {
        let world = try await SignInWorld(decide: .approve)
        let (requester, relay) = try await world.requester(clock: OffsetClock(offset: 600)) {
            $0.maximumWait = .milliseconds(1500)
        }
        let events = Mutex<[SignInApprovalRequester.Event]>([])
        let error = await #expect(throws: SignInError.self) {
            try await requester.requestApproval { event in events.withLock { $0.append(event) } }
        }
        // Said first, before the request went out with its check code.
        let said = events.withLock { $0 }
        guard case .clockOff(let offset)? = said.first else {
            Issue.record("no clock warning before sending: \(said)")
            return
        }
        #expect((598...602).contains(offset))
        #expect(said.count == 2)
        // The sibling's ladder dropped it, silently: no prompt, no answer; the error names the clock.
        #expect(error == .noAnswer(waited: .milliseconds(1500)))
        #expect(error?.description.contains("this device's clock") == true)
        #expect(world.prompts.value.withLock { $0 } == 0)
        await relay.close()
        await world.stop()
    }

    @Test("a clock within the window's half says nothing")
    func clockRight() async throws {
        let world = try await SignInWorld(decide: .ignore)
        let (requester, relay) = try await world.requester(clock: OffsetClock(offset: -100)) {
            $0.maximumWait = .milliseconds(500)
        }
        let events = Mutex<[SignInApprovalRequester.Event]>([])
        _ = try? await requester.requestApproval { event in events.withLock { $0.append(event) } }
        #expect(!events.withLock { $0 }.contains { if case .clockOff = $0 { true } else { false } })
        await relay.close()
        await world.stop()
    }

    @Test("a hostile identity-svc substituting the discovery key fails closed: nothing is sealed or sent")
    func substitutedDiscoveryKey() async throws {
        let world = try await SignInWorld(decide: .approve)
        let attacker = XWing.PrivateKey().publicKey.rawRepresentation.base64URLEncodedString()
        let hostile = HostileTransport(inner: world.client.transport, path: "/v1/discovery/own") {
            $0["discovery_xwing_pubkey"] = attacker
        }
        let (requester, relay) = try await world.requester(transport: hostile)
        await #expect(throws: LoggedBindingsError.differs("the discovery inbox and key")) {
            try await requester.requestApproval()
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(world.prompts.value.withLock { $0 } == 0)
        await relay.close()
        await world.stop()
    }

    @Test("a per-user OPRF key from credential-svc is refused before any token is minted")
    func perUserKeyList() async throws {
        let world = try await SignInWorld(decide: .approve)
        // A key made for this device alone, in a well-formed list of its own.
        let tagging = VOPRF.PrivateKey()
        let now = UInt64(Date().timeIntervalSince1970)
        let list = try KeyList(
            epoch: 99, entries: [try .init(publicKey: tagging.publicKey, notBefore: now - 60, notAfter: now + 86_400)])
        let hostile = HostileTransport(inner: world.client.transport, path: "/v1/tokens/keys") {
            $0["key_list"] = list.encoded.base64URLEncodedString()
            $0["token_key_id"] = tagging.publicKey.tokenKeyID.base64URLEncodedString()
        }
        let (requester, relay) = try await world.requester(transport: hostile)
        let error = await #expect(throws: PrivacyPassError.self) { try await requester.requestApproval() }
        #expect(error?.code == .keyNotInList)
        try await Task.sleep(for: .milliseconds(300))
        #expect(world.prompts.value.withLock { $0 } == 0)
        await relay.close()
        await world.stop()
    }

    @Test("a grant that expired before redemption enrolls nothing")
    func expiredGrant() async throws {
        let world = try await SignInWorld(decide: .approve, environment: ["PIXIE_GRANT_LIFETIME": "1"])
        let (requester, relay) = try await world.requester()
        let approval = try await requester.requestApproval { event in
            if case .waiting(let code) = event { CheckCodes.shared.put(code) }
        }
        try await Task.sleep(for: .milliseconds(2100))
        let laptop = TestDevice()
        let refused = await #expect(throws: PixieClientError.self) {
            try await world.client.registerWithGrant(
                IdentityAPI.RegisterRequest(
                    grant: approval.grant, device: laptop.fields, passkey: try await laptop.passkey(world.client)))
        }
        #expect(refused?.code == "grant_expired")
        #expect(try await world.client.siblings(session: world.sessionToken).devices.count == 1)
        await relay.close()
        await world.stop()
    }
}

/// The system's clock, its wall time moved by `offset` seconds: a device whose clock is wrong.
struct OffsetClock: DeviceClock {
    let offset: TimeInterval
    var now: Date { Date().addingTimeInterval(offset) }
    func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}
