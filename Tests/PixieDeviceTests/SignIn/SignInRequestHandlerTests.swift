import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

/// handleSignInRequest's ladder, and both ends of one sign-in, with no network: each attack is built so that
/// only the rung under test stops it (everything else about it is right).
@Suite("Sign-in: the sibling's guard ladder, the new device's attempt")
struct SignInRequestHandlerTests {
    static let phoneVerify = HybridSignature.PrivateKey()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let discovery = XWing.PrivateKey()
    let phoneID = SecureRandom.bytes(count: 32)

    func cert(for phoneID: Data? = nil, signedBy key: HybridSignature.PrivateKey = Self.phoneVerify) throws -> Data {
        try PhoneOwnershipCert(
            phoneID: phoneID ?? self.phoneID, issuedAt: now.addingTimeInterval(-60),
            expiresAt: now.addingTimeInterval(86_400), signedBy: key
        ).rawRepresentation
    }

    func handler(pinned: [HybridSignature.PublicKey] = [phoneVerify.publicKey]) -> SignInRequestHandler {
        SignInRequestHandler(
            discoveryKey: discovery, phoneVerifier: PhoneOwnershipCert.Verifier(pinnedKeys: pinned), ownPhoneID: phoneID
        )
    }

    func attempt(cert: Data? = nil, at time: Date? = nil, to key: XWing.PublicKey? = nil) throws -> SignInAttempt {
        try SignInAttempt(
            deviceModel: "Pixel 9", phoneCert: cert ?? self.cert(), sealingKey: XWing.PrivateKey().publicKey,
            discoveryKey: key ?? discovery.publicKey, now: time ?? now)
    }

    func prompt(
        _ result: Result<SignInRequestHandler.Prompt, SignInRequestHandler.Drop>
    ) throws
        -> SignInRequestHandler.Prompt
    {
        switch result {
        case .success(let prompt): return prompt
        case .failure(let drop): throw drop
        }
    }

    func drop(_ result: Result<SignInRequestHandler.Prompt, SignInRequestHandler.Drop>) -> SignInRequestHandler.Drop? {
        if case .failure(let drop) = result { return drop }
        return nil
    }

    @Test("approved: ack, then an approval whose seed the new device checks against the logged key")
    func approved() throws {
        var sibling = handler()
        let attempt = try attempt()
        let prompt = try prompt(sibling.handle(attempt.box, now: now))
        #expect(prompt.request == attempt.request)
        #expect(prompt.certificate.phoneID == phoneID)
        #expect(prompt.matches(checkCode: attempt.checkCode))

        #expect(try attempt.read(prompt.acknowledgement(deviceFamily: "Linux")) == .acknowledged(deviceFamily: "Linux"))
        let account = HybridSignature.PrivateKey()
        let approved = SignInApproval.Approved(
            grant: "grant", accountSeed: account.seedRepresentation, ktHandle: "handle",
            discoverySeed: discovery.seedRepresentation)
        let answer = try attempt.read(try prompt.approval(approved, checkCode: attempt.checkCode))
        #expect(answer == .approved(approved))
        let adopted = try SignInAttempt.accountKey(
            from: approved, loggedAccountKey: account.publicKey.rawRepresentation)
        #expect(adopted.publicKey == account.publicKey)
        // A seed for another key than the log's is refused, whoever sealed it.
        #expect(throws: SignInError.seedDoesNotMatchTheLog) {
            try SignInAttempt.accountKey(
                from: approved, loggedAccountKey: HybridSignature.PrivateKey().publicKey.rawRepresentation)
        }
    }

    @Test("Approve refuses a wrong check code; Reject carries no grant")
    func checkCodeAndReject() throws {
        var sibling = handler()
        let attempt = try attempt()
        let prompt = try prompt(sibling.handle(attempt.box, now: now))
        let code = attempt.checkCode
        let wrong = String(code.dropLast()) + (code.last == "9" ? "0" : "9")
        let approved = SignInApproval.Approved(
            grant: "g", accountSeed: SecureRandom.bytes(count: 32), ktHandle: "k",
            discoverySeed: SecureRandom.bytes(count: 32))
        #expect(throws: SignInError.wrongCheckCode) { try prompt.approval(approved, checkCode: wrong) }
        #expect(try attempt.read(try prompt.rejection()) == .rejected)
        #expect(try prompt.rejection().count == 1 + 1120 + 12 + 1 + 1 + 16)
    }

    @Test("the default re-send schedule fits five whole attempts in the number's hourly budget of 40 tokens")
    func resendSchedule() {
        let schedule = SignInApprovalRequester.Configuration(deviceModel: "x").sendSchedule
        #expect(schedule == [0, 5, 15, 35, 75, 115, 155].map { Duration.seconds($0) })
        let mints = (schedule.count + TokenWallet.approvalBatchSize - 1) / TokenWallet.approvalBatchSize
        #expect(5 * mints * TokenWallet.approvalBatchSize <= 40)
    }

    @Test("rung 1: a box sealed to another account's discovery key is dropped")
    func rung1() throws {
        var sibling = handler()
        #expect(drop(sibling.handle(try attempt(to: XWing.PrivateKey().publicKey).box, now: now)) == .notForThisAccount)
        #expect(drop(sibling.handle(SecureRandom.bytes(count: 2000), now: now)) == .notForThisAccount)
    }

    @Test("rung 2: a cert signed by an unpinned key, an expired one, and any cert with no pinned key are dropped")
    func rung2() throws {
        var sibling = handler()
        let forged = try attempt(cert: try cert(signedBy: HybridSignature.PrivateKey()))
        #expect(drop(sibling.handle(forged.box, now: now)) == .certificateRefused(.unknownSigner))
        let expired = try attempt(at: now.addingTimeInterval(86_500))
        #expect(drop(sibling.handle(expired.box, now: now.addingTimeInterval(86_500))) == .certificateRefused(.expired))
        var unpinned = handler(pinned: [])
        #expect(drop(unpinned.handle(try attempt().box, now: now)) == .certificateRefused(.noPinnedKey))
    }

    @Test("rung 3: a box with the right cert and another payload type is dropped")
    func rung3() throws {
        var sibling = handler()
        let request = try attempt().request
        for (type, payload) in [(PayloadType.syncRequest, try request.encoded), (.signInRequest, Data([1, 2, 3]))] {
            let (box, _) = try DiscoveryBox(phoneCert: try cert(), type: type, payload: payload).sealed(
                to: discovery.publicKey)
            #expect(drop(sibling.handle(box, now: now)) == .notASignInRequest)
        }
    }

    @Test("rung 4: a valid request for another number (someone who resolved the published inbox) is dropped")
    func rung4() throws {
        var sibling = handler()
        let stranger = try attempt(cert: try cert(for: SecureRandom.bytes(count: 32)))
        #expect(drop(sibling.handle(stranger.box, now: now)) == .anotherNumber)
    }

    @Test("rung 5: a stale request, and a replayed one, are dropped")
    func rung5() throws {
        var sibling = handler()
        let old = try attempt(at: now.addingTimeInterval(-301))
        #expect(drop(sibling.handle(old.box, now: now)) == .stale)
        let future = try attempt(at: now.addingTimeInterval(301))
        #expect(drop(sibling.handle(future.box, now: now)) == .stale)
        let fresh = try attempt(at: now.addingTimeInterval(-299))
        let first = try prompt(sibling.handle(fresh.box, now: now))
        // Until it is acknowledged, a re-send is still answerable (an acknowledgement that failed to go out).
        _ = try prompt(sibling.handle(fresh.box, now: now))
        sibling.acknowledged(first, now: now)
        #expect(drop(sibling.handle(fresh.box, now: now.addingTimeInterval(1))) == .replayed)
        // Another box with the same reply subject (made by someone who saw it at SUBSCRIBE, and holds a cert for
        // the number) does not shadow the real one: both are prompts, told apart by the check code.
        var sibling2 = handler()
        let real = try attempt()
        let (shadow, shadowChannel) = try DiscoveryBox(
            phoneCert: try cert(), type: .signInRequest, payload: try real.request.encoded
        ).sealed(to: discovery.publicKey)
        let shadowPrompt = try prompt(sibling2.handle(shadow, now: now))
        sibling2.acknowledged(shadowPrompt, now: now)
        let realPrompt = try prompt(sibling2.handle(real.box, now: now))
        #expect(realPrompt.matches(checkCode: real.checkCode))
        #expect(!shadowPrompt.matches(checkCode: real.checkCode) || shadowChannel.checkCode == real.checkCode)
        // Once the window has passed, the same bytes are stale anyway.
        #expect(drop(sibling.handle(fresh.box, now: now.addingTimeInterval(700))) == .stale)
    }

    @Test("a hostile relay's forged approval, a well-formed HPKE seal to the requester's own key, is refused")
    func forgedApproval() throws {
        let sealing = XWing.PrivateKey()
        let attempt = try SignInAttempt(
            deviceModel: "Pixel 9", phoneCert: try cert(), sealingKey: sealing.publicKey,
            discoveryKey: discovery.publicKey, now: now)
        // The relay knows the reply subject; give it the requester's public key as well.
        let approval = SignInApproval.approved(
            .init(
                grant: "stolen", accountSeed: SecureRandom.bytes(count: 32), ktHandle: "k",
                discoverySeed: SecureRandom.bytes(count: 32)))
        for info in ["pixie/discovery-box/v1", "pixie/sealed-sender/v1", ""] {
            var forger = try HPKE.Sender(
                recipientKey: attempt.request.sealingKey, ciphersuite: .XWingMLKEM768X25519_SHA256_AES_GCM_256,
                info: Data(info.utf8))
            let header = Data([1]) + forger.encapsulatedKey
            let forged = header + (try forger.seal(Data([0x03]) + (try approval.encoded), authenticating: header))
            #expect(throws: PixieWireError.self) { try attempt.read(forged) }
        }
    }
}
