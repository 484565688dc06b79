import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Synchronization
import Testing
import Transparency
import WebAuthn

/// What a relay session received, collected as it comes, for a test to wait on.
final class Received: Sendable {
    private let frames = Mutex<[RelayDelivery]>([])

    init(_ session: WebSocketRelayConnection) {
        Task { [self] in
            for await delivery in session.deliveries { frames.withLock { $0.append(delivery) } }
        }
    }

    /// The `index`th delivery, once it has come (a hang's limit of 60 s: the suite shares two cores).
    func frame(_ index: Int) async throws -> RelayDelivery {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let frame = frames.withLock({ $0.count > index ? $0[index] : nil }) { return frame }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw Failure(description: "delivery \(index) never came")
    }

    var count: Int { frames.withLock { $0.count } }
}

/// One device's keys and session, as the first device of an account or a new one holds them.
struct TestDevice {
    let identity = HybridSignature.PrivateKey()
    let inbox = RelaySubjectKey()
    let sealing = XWing.PrivateKey()
    let authenticator = SoftwareAuthenticator()

    var fields: IdentityAPI.DeviceFields {
        IdentityAPI.DeviceFields(
            pubkey: Base64URLBytes(identity.publicKey.rawRepresentation), name: "device",
            inbox: Base64URLBytes(inbox.subject.rawRepresentation),
            sealingKey: Base64URLBytes(sealing.publicKey.rawRepresentation))
    }

    func passkey(_ client: PixieClient) async throws -> IdentityAPI.PasskeyRegistration {
        let challenge = try await client.passkeyChallenge(.register)
        let credential = authenticator.makeCredential(
            rpID: challenge.rpID, origin: "https://\(challenge.rpID)", challenge: challenge.challenge.data,
            userID: Data([1]))
        return IdentityAPI.PasskeyRegistration(challengeID: challenge.challengeID, credential: credential)
    }
}

/// The whole authorization half of the seed between two devices and a real pixie-server (its relay spending real
/// rate-limit tokens), through PixieDevice alone: the new device resolves and proves the discovery inbox, pays with
/// its phone cert, seals the request; the sibling's ladder passes it, it acks, its person approves with the check
/// code; the new device checks the seed against the log, adopts it, redeems the grant, and its first sibling frame
/// is MAC'd under the sibling channel key.
@Suite("Sign-in approval end to end, against the real pixie-server")
struct SignInAgainstTheServerTests {
    @Test("approved: the new device joins with the account seed, and its first sibling frame authenticates")
    func approved() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-signin-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bundle = try AgainstTheServerTests.trustBundle(dataDirectory: directory)
        let server = try await RunningServer(dataDirectory: directory)
        defer { server.stop() }
        let client = PixieClient(baseURL: server.base)
        let number = "+14155550199"
        func newPhoneCert() async throws -> Data {
            let started = try await client.startPhoneVerification(number)
            let code = try #require(try AgainstTheServerTests.lastCode(to: number, in: directory))
            return try await client.checkPhoneVerification(id: started.verificationID, code: code).phoneCert.data
        }
        let phoneVerifier = PhoneOwnershipCert.Verifier(pinnedKeys: [bundle.phoneVerifyKey])

        // The first device creates the account and listens on its discovery inbox.
        let account = HybridSignature.PrivateKey()
        let discoverySeed = SecureRandom.bytes(count: 32)
        let discoveryKey = try XWing.PrivateKey(seedRepresentation: discoverySeed)
        let discoveryInbox = try RelaySubjectKey(discoverySeed: discoverySeed)
        let phone = TestDevice()
        let phoneCert = try await newPhoneCert()
        let enrolled = try await client.createAccount(
            IdentityAPI.CreateAccountRequest(
                phoneCert: Base64URLBytes(phoneCert),
                discoveryInbox: Base64URLBytes(discoveryInbox.subject.rawRepresentation),
                discoveryXWingPubkey: Base64URLBytes(discoveryKey.publicKey.rawRepresentation),
                accountSigningPubkey: Base64URLBytes(account.publicKey.rawRepresentation), device: phone.fields,
                passkey: try await phone.passkey(client)))
        let ktHandle = try #require(enrolled.ktHandle)
        let phoneBindings = LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client)
        let phoneWallet = TokenWallet(
            client: client, keyListVerifier: phoneBindings, payer: .session(enrolled.sessionToken))
        let phoneRelay = try await WebSocketRelayConnection.connect(to: server.base)
        let phoneFrames = Received(phoneRelay)
        try await phoneRelay.subscribe(discoveryInbox)
        try await phoneRelay.subscribe(phone.inbox)
        var ladder = SignInRequestHandler(
            discoveryKey: discoveryKey, phoneVerifier: phoneVerifier,
            ownPhoneID: try phoneVerifier.verify(phoneCert, now: Date()).phoneID)

        // The new device: its own cert for the number, the discovery answer proven against the log, tokens paid
        // with the cert (the key list proven too), the reply subject subscribed before the request goes out.
        let laptop = TestDevice()
        let laptopCert = try await newPhoneCert()
        let laptopBindings = LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client)
        let discovery = try await client.lookupOwnDiscovery(phoneCert: laptopCert)
        let sealTo = try await laptopBindings.verifiedDiscovery(
            discovery, phoneID: try phoneVerifier.verify(laptopCert, now: Date()).phoneID)
        let laptopWallet = TokenWallet(client: client, keyListVerifier: laptopBindings, payer: .phoneCert(laptopCert))
        let attempt = try SignInAttempt(
            deviceModel: "Linux laptop", phoneCert: laptopCert, sealingKey: laptop.sealing.publicKey,
            discoveryKey: sealTo.key, now: Date())
        let laptopRelay = try await WebSocketRelayConnection.connect(to: server.base)
        let laptopFrames = Received(laptopRelay)
        try await laptopRelay.subscribe(attempt.replySubjectKey)
        try await laptopRelay.send(
            attempt.box, to: try RelaySubject(rawRepresentation: discovery.discoveryInbox.data),
            wake: PayloadType.signInRequest.wakeClass, token: try await laptopWallet.take())
        #expect(await laptopWallet.count == TokenWallet.approvalBatchSize - 1)

        // The sibling: the ladder passes it; ack at once, then the person approves with the code the laptop shows.
        let request = try await phoneFrames.frame(0)
        #expect(request.subject == discoveryInbox.subject)
        // The request wakes a sleeping sibling (beyond the seed); the relay learns only that class.
        #expect(request.wake == .sync)
        let prompt = try ladder.handle(request.payload, now: Date()).get()
        #expect(prompt.request.deviceModel == "Linux laptop")
        let reply = prompt.request.replySubject
        try await phoneRelay.send(
            try prompt.acknowledgement(deviceFamily: "Linux"), to: reply, wake: .silent,
            token: try await phoneWallet.take())
        let grant = try await client.mintGrant(session: enrolled.sessionToken)
        #expect(grant.scope == .add)
        let approval = try prompt.approval(
            .init(
                grant: grant.grant, accountSeed: account.seedRepresentation, ktHandle: ktHandle,
                discoverySeed: discoverySeed),
            checkCode: attempt.checkCode)
        try await phoneRelay.send(approval, to: reply, wake: .silent, token: try await phoneWallet.take())

        // The new device: "Approve on your Linux", then the approval; the seed must derive the logged key.
        #expect(try attempt.read(try await laptopFrames.frame(0).payload) == .acknowledged(deviceFamily: "Linux"))
        guard case .approved(let approved) = try attempt.read(try await laptopFrames.frame(1).payload) else {
            throw Failure(description: "no approval")
        }
        let logged = try await laptopBindings.accountSigningKey(ktHandle: approved.ktHandle)
        let adopted = try SignInAttempt.accountKey(from: approved, loggedAccountKey: logged.rawRepresentation)
        #expect(adopted.publicKey == account.publicKey)
        let joined = try await client.registerWithGrant(
            IdentityAPI.RegisterRequest(
                grant: approved.grant, device: laptop.fields, passkey: try await laptop.passkey(client),
                revokeOthers: false))
        #expect(joined.accountID == enrolled.accountID)
        // Nothing here is a revocation: both devices are in the roster, which the log backs.
        let roster = try await laptopBindings.verifiedRoster(
            try await client.siblings(session: joined.sessionToken), ktHandle: approved.ktHandle)
        #expect(
            Set(roster.map(\.pubkey)) == [
                phone.identity.publicKey.rawRepresentation, laptop.identity.publicKey.rawRepresentation,
            ])
        _ = try await client.siblings(session: enrolled.sessionToken)

        // The first sibling frame: sealed sender to the phone's inbox, MAC'd under the adopted seed's channel key.
        let userIDHash = SenderCert.computeUserIDHash(joined.accountID)
        let laptopKeys = try ChannelKeys(
            ownUserIDHash: userIDHash, accountSeed: approved.accountSeed, contacts: { _ in nil })
        let senderCert = try SenderCert(
            unverifiedRepresentation: try await client.senderCert(session: joined.sessionToken).senderCert.data)
        await laptopWallet.pay(with: .session(joined.sessionToken))
        let frame = try laptopKeys.seal(
            .syncRequest, Data("request".utf8), senderCert: senderCert, to: userIDHash,
            recipientKey: phone.sealing.publicKey, recipient: phone.inbox.subject)
        try await laptopRelay.send(frame, to: phone.inbox.subject, wake: .sync, token: try await laptopWallet.take())
        let delivered = try await phoneFrames.frame(1)
        let phoneKeys = try ChannelKeys(
            ownUserIDHash: SenderCert.computeUserIDHash(enrolled.accountID), accountSeed: account.seedRepresentation,
            contacts: { _ in nil })
        let opened = try phoneKeys.open(
            delivered.payload, sealingKey: phone.sealing, inbox: phone.inbox.subject,
            senderCerts: SenderCert.Verifier(pinnedKeys: [bundle.senderCertKey]), now: Date())
        #expect(opened.type == .syncRequest)
        #expect(opened.payload == Data("request".utf8))
        #expect(opened.sender.deviceKey == laptop.identity.publicKey.rawRepresentation)
        await phoneRelay.close()
        await laptopRelay.close()
    }
}
