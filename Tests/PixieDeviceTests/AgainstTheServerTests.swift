import Foundation
import PixieDevice
import PixieWire
import Processes
import SiblingsCrypto
import Testing
import Transparency
import WebAuthn
import WebSockets

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The device side against the real `pixie-server` binary, in another process. This target cannot import
/// PixieServer (it is not among its dependencies in Package.swift: PixieDevice, PixieWire, Transparency and
/// HTTPServer's WebSocket client), so what a device must agree on with the server (the trust bundle, the
/// checkpoint, the relay frames and subject proofs) comes from modules a device may link.
@Suite("A device-side client against the real pixie-server, without linking PixieServer")
struct AgainstTheServerTests {
    static var binary: URL { RunningServer.binary }

    /// Runs `pixie-server arguments` to completion; its standard output.
    static func run(_ arguments: [String]) throws -> String {
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "pixie-server \(arguments) failed") }
        return String(decoding: data, as: UTF8.self)
    }

    /// The trust bundle `pixie-server trust-bundle` makes for `dataDirectory`, as the app ships it.
    static func trustBundle(dataDirectory directory: URL) throws -> TrustBundle {
        try JSONDecoder().decode(
            TrustBundle.self, from: Data(try run(["trust-bundle", "--data-dir", directory.path]).utf8))
    }

    @Test("a first device enrolls through PixieClient, and checks its discovery entry and roster against the log")
    func aDeviceEnrollsWithTheWireTypes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-device-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bundle = try AgainstTheServerTests.trustBundle(dataDirectory: directory)
        let server = try await RunningServer(dataDirectory: directory)
        defer { server.stop() }
        let client = PixieClient(baseURL: server.base)
        let bindings = LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client)

        // phone-verify-svc: the code comes from the development outbox, the cert verifies under the pinned key.
        let number = "+14155550188"
        let started = try await client.startPhoneVerification(number)
        #expect(started.codeLength == 6)
        let code = try #require(try Self.lastCode(to: number, in: directory))
        let checked = try await client.checkPhoneVerification(id: started.verificationID, code: code)
        let cert = try PhoneOwnershipCert.Verifier(pinnedKeys: [bundle.phoneVerifyKey]).verify(
            checked.phoneCert.data, now: Date())
        #expect(cert.phoneID == checked.phoneID.data)
        // The same code again: the server's refusal, decoded as PixieWire's error body.
        let again = try await #require(throws: PixieClientError.self) {
            try await client.checkPhoneVerification(id: started.verificationID, code: code)
        }
        #expect(again.code == "code_already_used")
        guard case .refused(409, _) = again else { throw Failure(description: "\(again)") }

        // identity-svc: a passkey, then the account with this device's inbox and sealing key.
        let challenge = try await client.passkeyChallenge(.register)
        let authenticator = SoftwareAuthenticator()
        let credential = authenticator.makeCredential(
            rpID: challenge.rpID, origin: "https://\(challenge.rpID)", challenge: challenge.challenge.data,
            userID: Data([1]))
        let discoverySeed = SecureRandom.bytes(count: 32)
        let discoveryKey = try XWing.PrivateKey(seedRepresentation: discoverySeed)
        let discoveryInbox = try RelaySubjectKey(discoverySeed: discoverySeed).subject
        let device = IdentityAPI.DeviceFields(
            pubkey: Base64URLBytes(HybridSignature.PrivateKey().publicKey.rawRepresentation), name: "phone",
            inbox: Base64URLBytes(RelaySubjectKey().subject.rawRepresentation),
            sealingKey: Base64URLBytes(XWing.PrivateKey().publicKey.rawRepresentation))
        let enrolled = try await client.createAccount(
            IdentityAPI.CreateAccountRequest(
                phoneCert: checked.phoneCert, discoveryInbox: Base64URLBytes(discoveryInbox.rawRepresentation),
                discoveryXWingPubkey: Base64URLBytes(discoveryKey.publicKey.rawRepresentation),
                accountSigningPubkey: Base64URLBytes(HybridSignature.PrivateKey().publicKey.rawRepresentation),
                device: device,
                passkey: IdentityAPI.PasskeyRegistration(challengeID: challenge.challengeID, credential: credential)))
        let ktHandle = try #require(enrolled.ktHandle)

        // Discovery: exactly what was enrolled, and the same in the log.
        let discovery = try await client.lookupOwnDiscovery(phoneCert: checked.phoneCert.data)
        #expect(discovery.discoveryInbox.data == discoveryInbox.rawRepresentation)
        let verifiedKey = try await bindings.verifiedDiscovery(discovery, phoneID: cert.phoneID).key
        #expect(verifiedKey == discoveryKey.publicKey)
        // A substituted discovery key (a hostile identity-svc) fails closed.
        var substituted = discovery
        substituted.discoveryXWingPubkey = Base64URLBytes(XWing.PrivateKey().publicKey.rawRepresentation)
        await #expect(throws: LoggedBindingsError.differs("the discovery inbox and key")) {
            try await bindings.verifiedDiscovery(substituted, phoneID: cert.phoneID)
        }

        // The roster: the device finds itself, and the list it was given is the one the log commits to.
        let siblings = try await client.siblings(session: enrolled.sessionToken)
        #expect(siblings.devices.map(\.deviceID) == [enrolled.deviceID])
        #expect(siblings.devices.first?.inbox == device.inbox)
        #expect(try await bindings.verifiedRoster(siblings, ktHandle: ktHandle).count == 1)
        var altered = siblings
        altered.devices[0].sealingKey = Base64URLBytes(XWing.PrivateKey().publicKey.rawRepresentation)
        await #expect(throws: LoggedBindingsError.self) {
            try await bindings.verifiedRoster(altered, ktHandle: ktHandle)
        }

        // A grant: add by default; replace_all without this device's passkey is refused in PixieWire's terms.
        let grant = try await client.mintGrant(session: enrolled.sessionToken)
        #expect(grant.kind == .token)
        #expect(grant.scope == .add)
        let bare = try await #require(throws: PixieClientError.self) {
            try await client.mintGrant(.init(scope: .replaceAll), session: enrolled.sessionToken)
        }
        #expect(bare.code == "passkey_required")

        // credential-svc: a sender cert for this device, and tokens minted against the logged key list.
        let senderCert = try await client.senderCert(session: enrolled.sessionToken)
        #expect(senderCert.expiresAt > Int64(Date().timeIntervalSince1970))
        let wallet = TokenWallet(client: client, keyListVerifier: bindings, payer: .session(enrolled.sessionToken))
        _ = try await wallet.take()
        #expect(await wallet.count == TokenWallet.sessionBatchSize - 1)
        // Signing out ends the session.
        try await client.revokeSession(enrolled.sessionToken)
        let out = try await #require(throws: PixieClientError.self) {
            try await client.siblings(session: enrolled.sessionToken)
        }
        #expect(out.code == "unauthorized")
    }

    /// The code of the last development SMS to `number` (`sms-outbox.jsonl` in the data directory).
    static func lastCode(to number: String, in directory: URL) throws -> String? {
        DevelopmentOutbox.latestCode(
            in: try Data(contentsOf: directory.appendingPathComponent("sms-outbox.jsonl")), to: number)
    }

    @Test("the shipped checkpoint verifies the live log, and a proven subject goes through the relay")
    func aDeviceTalksToTheServer() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw Failure(description: "pixie-server is not built at \(Self.binary.path): swift build --build-tests")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-device-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The app's trust bundle, made before the server ever ran (the empty log's checkpoint).
        let bundle = try AgainstTheServerTests.trustBundle(dataDirectory: directory)
        var verifier = try TransparencyVerifier(trustBundle: bundle)

        let server = try await RunningServer(dataDirectory: directory, relayTokens: "insecure-dev")
        defer { server.stop() }
        let port = server.port
        let base = server.base

        // The log grew at start (the OPRF key list): its checkpoint must extend the shipped one.
        let (noteData, _) = try await URLSession.shared.data(from: base.appendingPathComponent("v1/kt/checkpoint"))
        let note = String(decoding: noteData, as: UTF8.self)
        let latest = try Checkpoint(note: note, verifyingWith: verifier.logKey)
        let from = try #require(verifier.pinned?.size)
        #expect(latest.size > from)
        var components = URLComponents(
            url: base.appendingPathComponent("v1/kt/consistency"), resolvingAgainstBaseURL: false)!
        components.queryItems = [.init(name: "from", value: "\(from)"), .init(name: "to", value: "\(latest.size)")]
        let (proofData, _) = try await URLSession.shared.data(from: components.url!)
        let proof = try ConsistencyProof(
            encoded: try JSONDecoder().decode(TransparencyAPI.ProofResponse.self, from: proofData).proof.data)
        #expect(try verifier.accept(checkpoint: note, consistencyProof: proof).size == latest.size)

        // The relay: a subject this device owns, proven over the connection's CHALLENGE, and a SEND to it.
        let inbox = RelaySubjectKey()
        let listener = try await WebSocketClient.connect(port: UInt16(port), path: "/v1/relay")
        let sender = try await WebSocketClient.connect(port: UInt16(port), path: "/v1/relay")
        func next(_ socket: WebSocket) async throws -> RelayServerFrame {
            guard case .binary(let bytes)? = try await socket.receive() else {
                throw Failure(description: "the relay closed the connection")
            }
            return try RelayServerFrame(decoding: bytes)
        }
        guard case .challenge(let nonce) = try await next(listener), case .challenge = try await next(sender) else {
            throw Failure(description: "the relay's first frame was not a CHALLENGE")
        }
        try await listener.send(binary: try inbox.subscribe(requestID: 1, challenge: nonce).encoded())
        #expect(try await next(listener) == .ok(requestID: 1))
        let payload = Data("sealed".utf8)
        try await sender.send(
            binary: RelayClientFrame.send(
                requestID: 2, subject: inbox.subject, wake: .silent, token: Data("t1".utf8), payload: payload
            ).encoded())
        #expect(try await next(sender) == .ok(requestID: 2))
        #expect(try await next(listener) == .deliver(subject: inbox.subject, wake: .silent, payload: payload))
        await listener.close()
        await sender.close()
    }
}
