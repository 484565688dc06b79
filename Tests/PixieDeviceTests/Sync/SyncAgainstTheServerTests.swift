import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Synchronization
import Testing
import Transparency

/// A value shared between tasks.
final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func get() -> Value { value.withLock { $0 } }
    func change(_ body: (inout Value) -> Void) { value.withLock { body(&$0) } }
}

/// Two devices of one account and a real pixie-server: the phone creates the account and listens, the laptop signs
/// in with the phone's approval, then absorbs the phone's whole store through blob-svc.
struct TwoDevices {
    let directory: URL
    let server: RunningServer
    let phone: DeviceHome
    let laptop: DeviceHome
    let listener: Task<Void, any Error>
    let siblingReports: Shared<[InboxListener.Outcome]>
    /// The check code the device signing in shows, which the phone's listener approves with.
    let checkCode: Shared<String?>

    static let number = "+14155550144"

    static func make(
        sync: SyncService.Configuration = SyncService.Configuration(), serverEnvironment: [String: String] = [:]
    ) async throws -> TwoDevices {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-sync-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let bundle = try AgainstTheServerTests.trustBundle(dataDirectory: directory)
        let server = try await RunningServer(dataDirectory: directory, environment: serverEnvironment)
        let code: OnboardingFlow.CodeSource = { number, _ in
            try #require(try AgainstTheServerTests.lastCode(to: number, in: directory))
        }
        let phone = try DeviceHome(directory: directory.appendingPathComponent("phone"))
        _ = try await OnboardingFlow(home: phone).createAccount(
            server: server.base, trustBundle: bundle, name: "phone", phoneNumber: number, code: code)
        let checkCode = Shared<String?>(nil)
        let reports = Shared<[InboxListener.Outcome]>([])
        let listening = try await listen(phone, sync: sync, checkCode: checkCode, reports: reports)
        let laptop = try DeviceHome(directory: directory.appendingPathComponent("laptop"))
        do {
            try await signIn(
                laptop, name: "laptop", server: server, directory: directory, bundle: bundle, checkCode: checkCode)
        } catch {
            // Say what the phone's listener did, to tell a slow machine from a listener that stopped.
            listening.cancel()
            let ended = await listening.result
            server.stop()
            throw Failure(
                description:
                    "the laptop did not join (\(error)); the phone reported \(reports.get()), its listener \(ended)")
        }
        return TwoDevices(
            directory: directory, server: server, phone: phone, laptop: laptop, listener: listening,
            siblingReports: reports, checkCode: checkCode)
    }

    /// Starts `phone`'s listener, which approves each request with the code in `checkCode` once a device shows
    /// one, and returns once it listens.
    static func listen(
        _ phone: DeviceHome, sync: SyncService.Configuration = SyncService.Configuration(),
        checkCode: Shared<String?>, reports: Shared<[InboxListener.Outcome]> = Shared([]),
        environment: DeviceEnvironment = DeviceEnvironment(), configure: (inout InboxListener) -> Void = { _ in }
    ) async throws -> Task<Void, any Error> {
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        var listener = InboxListener(
            context: try DeviceContext(home: phone, environment: environment), deviceFamily: "Phone")
        listener.syncConfiguration = sync
        configure(&listener)
        let listening = Task { [listener] in
            try await listener.run(
                ready: { readyContinuation.yield() },
                decide: { _ in
                    for _ in 0..<6000 {
                        if let code = checkCode.get() { return .approve(checkCode: code) }
                        try? await Task.sleep(for: .milliseconds(10))
                    }
                    return .ignore
                },
                report: { outcome in reports.change { $0.append(outcome) } })
        }
        for await _ in ready { break }
        return listening
    }

    /// Signs the device in `home` in, approved by the phone's listener with the check code it shows.
    static func signIn(
        _ home: DeviceHome, name: String, server: RunningServer, directory: URL, bundle: TrustBundle,
        checkCode: Shared<String?>
    ) async throws {
        // The phone approves with whatever code is here: none until this device shows its own.
        checkCode.change { $0 = nil }
        var signIn = SignInApprovalRequester.Configuration(deviceModel: name.capitalized)
        signIn.maximumWait = .seconds(60)
        _ = try await OnboardingFlow(home: home).signIn(
            server: server.base, trustBundle: bundle, name: name, phoneNumber: number,
            code: { number, _ in try #require(try AgainstTheServerTests.lastCode(to: number, in: directory)) },
            configuration: signIn,
            events: { event in
                if case .waiting(let code) = event { checkCode.change { $0 = code } }
            })
    }

    /// A third device of the account, signed in as the laptop was.
    func signIn(_ name: String) async throws -> DeviceHome {
        let home = try DeviceHome(directory: directory.appendingPathComponent(name))
        try await Self.signIn(
            home, name: name, server: server, directory: directory, bundle: try bundle, checkCode: checkCode)
        return home
    }

    var bundle: TrustBundle { get throws { try AgainstTheServerTests.trustBundle(dataDirectory: directory) } }

    /// The roster entry of the device in `home`: its inbox and sealing key, as a sibling finds them.
    func rosterEntry(of home: DeviceHome) async throws -> IdentityAPI.SiblingsResponse.Device {
        let ownKey = try #require(try await OnboardingFlow(home: home).devices().first(where: \.isThisDevice)).pubkey
        let session = try #require(try phone.load()?.membership?.sessionToken)
        let roster = try await PixieClient(baseURL: server.base).siblings(session: session)
        return try #require(roster.devices.first { $0.pubkey.data == ownKey })
    }

    /// A device of another account (its own number), which `home`'s device knows as a contact: the contact row
    /// holds the stranger's userIDHash and a channel key both share, so a frame from it has a valid MAC.
    func stranger(knownTo home: DeviceHome) async throws -> Stranger {
        let strangerHome = try DeviceHome(directory: directory.appendingPathComponent("stranger"))
        let bundle = try bundle
        _ = try await OnboardingFlow(home: strangerHome).createAccount(
            server: server.base, trustBundle: bundle, name: "stranger", phoneNumber: "+14155550145",
            code: { [directory] number, _ in
                try #require(try AgainstTheServerTests.lastCode(to: number, in: directory))
            })
        let credentials = DeviceCredentials(flow: OnboardingFlow(home: strangerHome))
        let cert = try await credentials.currentSenderCert()
        let channelKey = SymmetricKey(size: .bits256)
        try DeviceStore(home: home).put(
            .contacts, id: "stranger",
            fields: [
                "display_name": .text("Stranger"), "pubkey": .blob(cert.deviceKey),
                "user_id_hash": .blob(cert.userIDHash),
                "account_signing_pubkey": .blob(Data([1])),
                "channel_key": .blob(channelKey.withUnsafeBytes { Data($0) }),
            ])
        let client = PixieClient(baseURL: server.base)
        let wallet = TokenWallet(
            client: client,
            keyListVerifier: LoggedBindings(verifier: try TransparencyVerifier(trustBundle: bundle), client: client),
            payer: .credentials(credentials))
        return Stranger(
            credentials: credentials, channelKey: channelKey, wallet: wallet,
            relay: try await WebSocketRelayConnection.connect(to: server.base))
    }

    func stop() {
        listener.cancel()
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Waits (up to 60 s) until the phone reported something `matching`.
    func phoneReported(_ matching: (InboxListener.Outcome) -> Bool) async throws {
        for _ in 0..<6000 {
            if siblingReports.get().contains(where: matching) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw Failure(description: "the phone never reported it; it reported \(siblingReports.get())")
    }
}

/// Another account's device that some device of ours has as a contact.
struct Stranger {
    let credentials: DeviceCredentials
    let channelKey: SymmetricKey
    let wallet: TokenWallet
    let relay: WebSocketRelayConnection

    /// Seals `payload` to the device at `entry` under the contact channel key, with the stranger's own SenderCert.
    func send(
        _ type: PayloadType, _ payload: Data, to entry: IdentityAPI.SiblingsResponse.Device, of home: DeviceHome
    )
        async throws
    {
        let cert = try await credentials.currentSenderCert()
        let accountID = try #require(try home.load()?.membership?.accountID)
        let key = channelKey
        let keys = try ChannelKeys(ownUserIDHash: cert.userIDHash, accountSeed: nil) { _ in key }
        let inbox = try RelaySubject(rawRepresentation: try #require(entry.inbox).data)
        let envelope = try keys.seal(
            type, payload, senderCert: cert, to: SenderCert.computeUserIDHash(accountID),
            recipientKey: try XWing.PublicKey(rawRepresentation: try #require(entry.sealingKey).data), recipient: inbox)
        try await relay.send(envelope, to: inbox, wake: type.wakeClass, token: try await wallet.take())
    }
}

/// The laptop's network with a hook on every answer: to alter a blob, cut a download, count what it fetched.
struct HookedTransport: HTTPTransport {
    let inner: SocketHTTPTransport
    let hook: @Sendable (TransportRequest, TransportResponse) async throws -> TransportResponse

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        try await hook(request, try await inner.send(request))
    }
}

/// A store with rows of every category (a tombstone, a changed row, a provider API key).
func populate(_ store: DeviceStore) throws {
    try store.put(.conversations, id: "family", fields: ["title": .text("Family"), "created_at": .integer(1)])
    try store.put(
        .messages, id: "m1",
        fields: [
            "conversation_id": .text("family"), "sender": .text("ada"), "body": .text("hi"), "sent_at": .integer(2),
        ])
    try store.put(
        .contacts, id: "ada",
        fields: [
            "display_name": .text("Ada"), "pubkey": .blob(SecureRandom.bytes(count: 32)),
            "user_id_hash": .blob(SecureRandom.bytes(count: 32)),
            "account_signing_pubkey": .blob(SecureRandom.bytes(count: 64)),
            "channel_key": .blob(SecureRandom.bytes(count: 32)),
        ])
    try store.put(
        .memoryEvents, id: "e1", fields: ["kind": .text("fact"), "body": .text("tea"), "occurred_at": .integer(3)])
    try store.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
    try store.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk, eggs")])
    try store.put(.notebookNotes, id: "n2", fields: ["title": .text("Old"), "body": .text("gone")])
    try store.delete(.notebookNotes, id: "n2")
    try store.put(
        .sagaChapters, id: "s1",
        fields: ["saga_id": .text("s"), "number": .integer(1), "title": .text("I"), "body": .text("x")])
    try store.put(.plans, id: "plan-1", fields: ["title": .text("Trip"), "body": .text("pack")])
    try store.put(.providerAPIKeys, id: "openai", fields: ["provider": .text("openai"), "api_key": .text("sk-live-1")])
}

func everyRow(_ store: DeviceStore) throws -> [StoreRow] {
    try StoreCategory.allCases.flatMap { try store.rows($0, includingDeleted: true) }
}

@Suite("Absorbing a sibling's store end to end, against the real pixie-server", .serialized)
struct SyncAgainstTheServerTests {
    static func fast() -> SyncService.Configuration {
        var configuration = SyncService.Configuration()
        configuration.resendInterval = .milliseconds(300)
        configuration.rangeByteCount = 4096
        return configuration
    }

    @Test("every category, secrets included, arrives through blob-svc; the blob is deleted; a re-import is a no-op")
    func absorbs() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        let phoneStore = try DeviceStore(home: devices.phone)
        try populate(phoneStore)
        // Big enough for several 4 KiB ranges.
        try phoneStore.put(
            .notebookNotes, id: "big",
            fields: ["title": .text("Big"), "body": .text(String(repeating: "x", count: 20_000))])

        let service = try await SyncService.connect(
            context: try DeviceContext(home: devices.laptop), configuration: Self.fast())
        let seen = Shared<[SyncService.Event]>([])
        let outcome = try await service.absorb { event in seen.change { $0.append(event) } }
        await service.close()
        guard case .absorbed(let summary) = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        let laptopStore = try DeviceStore(home: devices.laptop)
        let rows = try everyRow(phoneStore)
        #expect(summary.rows == rows.count && summary.inserted == rows.count)
        #expect(try everyRow(laptopStore) == rows)
        // The provider API key rode the same-account path.
        #expect(try laptopStore.row(.providerAPIKeys, id: "openai")?["api_key"] == .text("sk-live-1"))
        // It downloaded in ranges, said it was preparing, importing, and the phone heard the ack.
        let events = seen.get()
        #expect(events.contains { if case .preparing = $0 { true } else { false } })
        #expect(events.contains(.importing))
        #expect(events.filter { if case .downloading = $0 { true } else { false } }.count > 2)
        try await devices.phoneReported { $0 == .sync(.acknowledged(ok: true, reason: "")) }
        try await devices.phoneReported { if case .sync(.sent) = $0 { true } else { false } }
        // The blob was deleted at once (the receipt), not left to its 24-hour TTL.
        let blobs = try FileManager.default.contentsOfDirectory(
            atPath: devices.directory.appendingPathComponent("blobs").path
        ).filter { $0 != "tmp" }
        #expect(blobs.isEmpty, "\(blobs)")
        // Nothing is left in the laptop's sync folder.
        let left = try FileManager.default.contentsOfDirectory(
            atPath: devices.laptop.directory.appendingPathComponent("sync").path)
        #expect(left.isEmpty, "\(left)")

        // Again: the same rows, none new.
        let again = try await SyncService.connect(
            context: try DeviceContext(home: devices.laptop), configuration: Self.fast())
        let second = try await again.absorb()
        await again.close()
        guard case .absorbed(let repeated) = second else {
            Issue.record("expected the store again, got \(second)")
            return
        }
        #expect(repeated.inserted == 0 && repeated.present == rows.count)
    }

    static func absorbing(
        _ devices: TwoDevices, configuration: SyncService.Configuration = fast(),
        hook: (@Sendable (TransportRequest, TransportResponse) async throws -> TransportResponse)? = nil,
        events: @escaping @Sendable (SyncService.Event) -> Void = { _ in }
    ) async throws -> SyncService.Outcome {
        let environment = DeviceEnvironment(transport: { base in
            guard let hook else { return SocketHTTPTransport(baseURL: base) }
            return HookedTransport(inner: SocketHTTPTransport(baseURL: base), hook: hook)
        })
        let service = try await SyncService.connect(
            context: try DeviceContext(home: devices.laptop, environment: environment), configuration: configuration)
        do {
            let outcome = try await service.absorb(events: events)
            await service.close()
            return outcome
        } catch {
            await service.close()
            throw error
        }
    }

    @Test("a stranger's sync_offer is dropped by isSameAccount, though its MAC is valid, and no contact key changes")
    func strangerOffer() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        devices.listener.cancel()  // the phone is away: only the stranger answers
        let stranger = try await devices.stranger(knownTo: devices.laptop)
        let laptopStore = try DeviceStore(home: devices.laptop)
        let before = try everyRow(laptopStore)
        let seen = Shared<[SyncService.Event]>([])
        let absorbing = Task {
            try await Self.absorbing(devices, events: { event in seen.change { $0.append(event) } })
        }
        let entry = try await devices.rosterEntry(of: devices.laptop)
        let offer = SyncOffer(
            requestID: SecureRandom.bytes(count: 16), blobID: SecureRandom.bytes(count: 16),
            key: SecureRandom.bytes(count: 32), nonce: SecureRandom.bytes(count: 12),
            sha256: SecureRandom.bytes(count: 32), sizeBytes: 100)
        let dropped = SyncService.Event.dropped("a frame from another account")
        for _ in 0..<50 where !seen.get().contains(dropped) {
            try await stranger.send(.syncOffer, try offer.encoded, to: entry, of: devices.laptop)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(seen.get().contains(dropped))
        #expect(try await absorbing.value == .noAnswer)
        #expect(try everyRow(laptopStore) == before)
        await stranger.relay.close()
    }

    @Test("a stranger's sync_request is dropped by isSameAccount, though its MAC is valid, and nothing is exported")
    func strangerRequest() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        try populate(try DeviceStore(home: devices.phone))
        let stranger = try await devices.stranger(knownTo: devices.phone)
        let phoneEntry = try await devices.rosterEntry(of: devices.phone)
        // The reply goes to a device of the account's roster, so that only isSameAccount stands in the way.
        let laptopEntry = try await devices.rosterEntry(of: devices.laptop)
        let request = SyncRequest(
            requestID: SecureRandom.bytes(count: 16),
            replySubject: try RelaySubject(rawRepresentation: try #require(laptopEntry.inbox).data),
            replyPubkey: try XWing.PublicKey(rawRepresentation: try #require(laptopEntry.sealingKey).data),
            timestamp: Date())
        try await stranger.send(.syncRequest, try request.encoded, to: phoneEntry, of: devices.phone)
        try await devices.phoneReported { $0 == .sync(.dropped("a frame from another account")) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!devices.siblingReports.get().contains { if case .sync(.sent) = $0 { true } else { false } })
        // blob-svc has stored nothing (it makes its folder at the first upload).
        let stored =
            ((try? FileManager.default.contentsOfDirectory(
                atPath: devices.directory.appendingPathComponent("blobs").path)) ?? []).filter { $0 != "tmp" }
        #expect(stored.isEmpty)
        await stranger.relay.close()
    }

    @Test("a blob altered on its way gives ok:false to the sibling, and nothing is imported")
    func tamperedBlob() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        try populate(try DeviceStore(home: devices.phone))
        let laptopStore = try DeviceStore(home: devices.laptop)
        let before = try everyRow(laptopStore)
        await #expect {
            _ = try await Self.absorbing(devices) { request, response in
                guard request.target.hasPrefix("/v1/blobs/"), response.status == 206, !response.body.isEmpty else {
                    return response
                }
                var altered = response
                altered.body[altered.body.count / 2] ^= 0x01
                return altered
            }
        } throws: { error in
            guard case .tampered(let reason) = error as? BackupServiceError else { return false }
            return reason.contains("SHA-256")
        }
        #expect(try everyRow(laptopStore) == before)
        try await devices.phoneReported {
            if case .sync(.acknowledged(false, let reason)) = $0 { reason.contains("SHA-256") } else { false }
        }
    }

    @Test("a download cut in the middle resumes by range in the next run, fetching only what it lacked")
    func resumes() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        let phoneStore = try DeviceStore(home: devices.phone)
        try populate(phoneStore)
        try phoneStore.put(
            .notebookNotes, id: "big",
            fields: ["title": .text("Big"), "body": .text(String(repeating: "y", count: 30_000))])
        let ranges = Shared(0)
        let firstRun = Shared<UInt64>(0)
        await #expect(throws: PixieClientError.self) {
            _ = try await Self.absorbing(devices) { request, response in
                guard request.target.hasPrefix("/v1/blobs/"), request.method == "GET" else { return response }
                var count = 0
                ranges.change {
                    $0 += 1
                    count = $0
                }
                if count == 4 { throw PixieClientError.unreachable("the connection dropped (test)") }
                firstRun.change { $0 += UInt64(response.body.count) }
                return response
            }
        }
        let kept = firstRun.get()
        #expect(kept == 3 * 4096)
        let secondRun = Shared<UInt64>(0)
        let total = Shared<UInt64>(0)
        let outcome = try await Self.absorbing(
            devices,
            hook: { request, response in
                if request.target.hasPrefix("/v1/blobs/"), request.method == "GET" {
                    secondRun.change { $0 += UInt64(response.body.count) }
                }
                return response
            },
            events: { event in
                if case .downloading(_, let size) = event { total.change { $0 = size } }
            })
        guard case .absorbed = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        #expect(secondRun.get() == total.get() - kept)
        #expect(try everyRow(try DeviceStore(home: devices.laptop)) == everyRow(phoneStore))
    }

    @Test("the same request played again after its export finished (a relay's replay, a late re-send) starts none")
    func oneExportPerRequest() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        try populate(try DeviceStore(home: devices.phone))
        // The laptop's own request, sealed as SyncService seals it, sent twice by hand.
        let state = try #require(try devices.laptop.load())
        let membership = try #require(state.membership)
        let credentials = DeviceCredentials(flow: OnboardingFlow(home: devices.laptop))
        let cert = try await credentials.currentSenderCert()
        let keys = try ChannelKeys(ownUserIDHash: cert.userIDHash, accountSeed: membership.accountSeed.data) { _ in nil
        }
        let laptopEntry = try await devices.rosterEntry(of: devices.laptop)
        let phoneEntry = try await devices.rosterEntry(of: devices.phone)
        let request = SyncRequest(
            requestID: SecureRandom.bytes(count: 16),
            replySubject: try RelaySubject(rawRepresentation: try #require(laptopEntry.inbox).data),
            replyPubkey: try XWing.PublicKey(rawRepresentation: try #require(laptopEntry.sealingKey).data),
            timestamp: Date())
        let phoneInbox = try RelaySubject(rawRepresentation: try #require(phoneEntry.inbox).data)
        let envelope = try keys.seal(
            .syncRequest, try request.encoded, senderCert: cert, to: cert.userIDHash,
            recipientKey: try XWing.PublicKey(rawRepresentation: try #require(phoneEntry.sealingKey).data),
            recipient: phoneInbox)
        let client = PixieClient(baseURL: devices.server.base)
        let wallet = TokenWallet(
            client: client,
            keyListVerifier: LoggedBindings(
                verifier: try TransparencyVerifier(trustBundle: try devices.bundle), client: client),
            payer: .credentials(credentials))
        let relay = try await WebSocketRelayConnection.connect(to: devices.server.base)
        try await relay.send(envelope, to: phoneInbox, wake: .sync, token: try await wallet.take())
        try await devices.phoneReported { if case .sync(.sent) = $0 { true } else { false } }
        try await relay.send(envelope, to: phoneInbox, wake: .sync, token: try await wallet.take())
        try await Task.sleep(for: .milliseconds(800))
        await relay.close()
        #expect(devices.siblingReports.get().filter { if case .sync(.sent) = $0 { true } else { false } }.count == 1)
        // One blob: the offer nobody took (the laptop was not listening), and no second.
        let blobs =
            ((try? FileManager.default.contentsOfDirectory(
                atPath: devices.directory.appendingPathComponent("blobs").path)) ?? []).filter { $0 != "tmp" }
        #expect(blobs.count == 1, "\(blobs)")
    }

    @Test("the sibling vanishes before uploading: the re-send budget runs out in an explicit noAnswer")
    func vanishesBefore() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        devices.listener.cancel()
        let seen = Shared<[SyncService.Event]>([])
        #expect(try await Self.absorbing(devices, events: { event in seen.change { $0.append(event) } }) == .noAnswer)
        let rounds = seen.get().compactMap { if case .requesting(1, let attempt) = $0 { attempt } else { nil } }
        #expect(rounds == Array(1...7))
    }

    @Test("the sibling vanishes after uploading: the blob is on blob-svc, and the new device absorbs it")
    func vanishesAfter() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        let phoneStore = try DeviceStore(home: devices.phone)
        try populate(phoneStore)
        let listener = devices.listener
        let outcome = try await Self.absorbing(devices) { request, response in
            // The offer is here: the phone goes away before the download starts.
            if request.target.hasPrefix("/v1/blobs/"), request.method == "GET", !listener.isCancelled {
                listener.cancel()
                try await Task.sleep(for: .milliseconds(200))
            }
            return response
        }
        guard case .absorbed = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        #expect(try everyRow(try DeviceStore(home: devices.laptop)) == everyRow(phoneStore))
    }

    @Test("a sleeping sibling is woken by one push per wake episode, and a failed push lets the next re-send retry")
    func wakesASleepingSibling() async throws {
        let wake = Shared<(@Sendable () -> Void)?>(nil)
        // The push provider fails the first wake; on the next, the phone wakes and listens.
        let receiver = try PushReceiver { index, _ in
            guard index > 0 else { return 503 }
            wake.get()?()
            return 202
        }
        defer { receiver.stop() }
        var configuration = Self.fast()
        configuration.resendInterval = .seconds(1)
        let devices = try await TwoDevices.make(
            sync: configuration, serverEnvironment: ["PIXIE_RELAY_PUSH_WEBHOOK_URL": receiver.url])
        defer { devices.stop() }
        let phoneStore = try DeviceStore(home: devices.phone)
        try populate(phoneStore)
        devices.listener.cancel()
        _ = await devices.listener.result

        // The phone registers its push token for its own inbox as it listens, then sleeps (no connection).
        let pushToken = SecureRandom.bytes(count: 32)
        let listener = try await Self.registerThenSleep(devices.phone, pushToken: pushToken, sync: configuration)
        let reports = Shared<[InboxListener.Outcome]>([])
        let awake = Shared<Task<Void, any Error>?>(nil)
        wake.change {
            $0 = {
                awake.change { running in
                    guard running == nil else { return }
                    running = Task { [listener] in
                        try await listener.run(
                            decide: { _ in .ignore }, report: { outcome in reports.change { $0.append(outcome) } })
                    }
                }
            }
        }
        defer { awake.get()?.cancel() }

        let outcome = try await Self.absorbing(devices, configuration: configuration)
        guard case .absorbed = outcome else {
            Issue.record("expected the store, got \(outcome); the woken phone reported \(reports.get())")
            return
        }
        #expect(try everyRow(try DeviceStore(home: devices.laptop)) == everyRow(phoneStore))
        // Two wakes: the one that failed and the retry. None after the phone held its inbox again, though the
        // re-sends went on until it answered.
        let inbox = try #require(try await devices.rosterEntry(of: devices.phone).inbox).data.base64URLEncodedString()
        let wakes = receiver.wakes
        #expect(wakes.count == 2, "\(wakes)")
        for posted in wakes {
            #expect(posted["wake"] == "sync" && posted["subject"] == inbox, "\(posted)")
            #expect(posted["push_token"] == pushToken.base64URLEncodedString())
        }
    }

    @Test("a sleeping sibling is woken by a sign-in through its push, listens again within the re-sends, and prompts")
    func signInWakesASleepingSibling() async throws {
        let wake = Shared<(@Sendable () -> Void)?>(nil)
        let receiver = try PushReceiver { _, _ in
            wake.get()?()
            return 202
        }
        defer { receiver.stop() }
        let devices = try await TwoDevices.make(
            sync: Self.fast(), serverEnvironment: ["PIXIE_RELAY_PUSH_WEBHOOK_URL": receiver.url])
        defer { devices.stop() }
        devices.listener.cancel()
        _ = await devices.listener.result

        // The phone registers its push token as it listens, then sleeps: no connection holds the discovery inbox.
        let pushToken = SecureRandom.bytes(count: 32)
        let listener = try await Self.registerThenSleep(devices.phone, pushToken: pushToken)

        // Woken, it listens again and approves with the code the new device shows.
        let prompted = Shared(0)
        let awake = Shared<Task<Void, any Error>?>(nil)
        let checkCode = devices.checkCode
        wake.change {
            $0 = {
                awake.change { running in
                    guard running == nil else { return }
                    running = Task { [listener] in
                        try await listener.run(decide: { _ in
                            prompted.change { $0 += 1 }
                            for _ in 0..<6000 {
                                if let code = checkCode.get() { return .approve(checkCode: code) }
                                try? await Task.sleep(for: .milliseconds(10))
                            }
                            return .ignore
                        })
                    }
                }
            }
        }
        defer { awake.get()?.cancel() }

        let tablet = try await devices.signIn("tablet")
        #expect(try tablet.state().membership?.accountSeed.data.isEmpty == false)
        #expect(prompted.get() == 1)
        // One push for the episode, to the discovery inbox, though the request was sent again until answered.
        let discovery = try RelaySubjectKey(
            discoverySeed: try #require(try devices.phone.state().membership).discoverySeed.data
        ).subject.rawRepresentation.base64URLEncodedString()
        let wakes = receiver.wakes
        #expect(wakes.count == 1, "\(wakes)")
        #expect(wakes.first?["subject"] == discovery && wakes.first?["wake"] == "sync", "\(wakes)")
        #expect(wakes.first?["push_token"] == pushToken.base64URLEncodedString())
    }

    /// `phone` listens once with `pushToken`, which registers it with the relay for both its inboxes, then stops
    /// (a phone asleep, no connection); the listener, to run again when a push wakes it.
    static func registerThenSleep(
        _ phone: DeviceHome, pushToken: Data, sync: SyncService.Configuration = SyncService.Configuration()
    ) async throws -> InboxListener {
        var listener = InboxListener(context: try DeviceContext(home: phone), deviceFamily: "Phone")
        listener.syncConfiguration = sync
        listener.pushToken = pushToken
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        let registering = Task { [listener] in
            try await listener.run(ready: { readyContinuation.yield() }, decide: { _ in .ignore })
        }
        for await _ in ready { break }
        registering.cancel()
        _ = await registering.result
        try await Task.sleep(for: .milliseconds(300))  // the relay sees the connection go
        return listener
    }

    /// A phone whose store holds `megabytes` notes of 1 MiB each.
    static func bigStore(_ devices: TwoDevices, megabytes: Int) throws -> DeviceStore {
        let store = try DeviceStore(home: devices.phone)
        let body = String(repeating: "x", count: 1 << 20)
        for index in 0..<megabytes {
            try store.put(
                .notebookNotes, id: "big-\(index)", fields: ["title": .text("\(index)"), "body": .text(body)])
        }
        return store
    }

    @Test("the sibling seals and uploads as it exports, saying how far it is, and the whole store arrives")
    func pipelinesWithProgress() async throws {
        var configuration = Self.fast()
        configuration.progressInterval = .milliseconds(2)
        configuration.rangeByteCount = 1 << 20
        let devices = try await TwoDevices.make(sync: configuration)
        defer { devices.stop() }
        let phoneStore = try Self.bigStore(devices, megabytes: 24)
        let seen = Shared<[SyncService.Event]>([])
        let outcome = try await Self.absorbing(
            devices, configuration: configuration, events: { event in seen.change { $0.append(event) } })
        guard case .absorbed = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        #expect(try everyRow(try DeviceStore(home: devices.laptop)) == everyRow(phoneStore))
        let progress = seen.get().compactMap { if case .preparing(_, let done) = $0 { done } else { nil } }
        #expect(progress.first == 0)
        #expect(progress.contains { $0 > 0 }, "\(progress)")
        #expect(progress == progress.sorted())
    }

    @Test("blob-svc refusing the upload midway is a SyncFailure the new device hears, and nothing is left stored")
    func uploadRefusedMidway() async throws {
        // Each upload token buys 100 kB here, and the sibling brings two (for its 64 MiB a token): the snapshot
        // passes what they buy in the middle of its chunked body.
        let devices = try await TwoDevices.make(
            sync: Self.fast(), serverEnvironment: ["PIXIE_BLOB_BYTES_PER_UPLOAD_TOKEN": "100000"])
        defer { devices.stop() }
        _ = try Self.bigStore(devices, megabytes: 2)
        let seen = Shared<[SyncService.Event]>([])
        let outcome = try await Self.absorbing(devices, events: { event in seen.change { $0.append(event) } })
        guard case .refused(let reasons) = outcome else {
            Issue.record("expected a refusal, got \(outcome)")
            return
        }
        #expect(reasons.count == 1 && reasons[0].contains("blob-svc did not take the snapshot"), "\(reasons)")
        #expect(seen.get().contains { if case .siblingFailed(.uploadFailed, _) = $0 { true } else { false } })
        try await devices.phoneReported { if case .sync(.failed) = $0 { true } else { false } }
        let blobs = try FileManager.default.contentsOfDirectory(
            atPath: devices.directory.appendingPathComponent("blobs").path
        ).filter { $0 != "tmp" }
        #expect(blobs.isEmpty, "\(blobs)")
        #expect(try DeviceStore(home: devices.laptop).rows(.notebookNotes).isEmpty)
    }

    @Test("two siblings answer: the new device follows the first, cancels the other, and no blob is left behind")
    func twoSiblings() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        let tablet = try await devices.signIn("tablet")
        let phoneStore = try DeviceStore(home: devices.phone)
        try populate(phoneStore)
        // The tablet holds the same rows (it absorbed them, as a sibling would have).
        let tabletService = try await SyncService.connect(
            context: try DeviceContext(home: tablet), configuration: Self.fast())
        guard case .absorbed = try await tabletService.absorb() else {
            Issue.record("the tablet did not absorb the phone's store")
            return
        }
        await tabletService.close()
        // The phone's reports from here on are the laptop's absorption: its ack of the tablet's is left out.
        try await devices.phoneReported { $0 == .sync(.acknowledged(ok: true, reason: "")) }
        let earlier = devices.siblingReports.get().count
        var tabletListener = InboxListener(context: try DeviceContext(home: tablet), deviceFamily: "Tablet")
        tabletListener.syncConfiguration = Self.fast()
        let tabletReports = Shared<[InboxListener.Outcome]>([])
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        let listening = Task { [tabletListener] in
            try await tabletListener.run(
                ready: { readyContinuation.yield() }, decide: { _ in .ignore },
                report: { outcome in tabletReports.change { $0.append(outcome) } })
        }
        defer { listening.cancel() }
        for await _ in ready { break }

        let seen = Shared<[SyncService.Event]>([])
        let outcome = try await Self.absorbing(devices, events: { event in seen.change { $0.append(event) } })
        guard case .absorbed = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        #expect(try everyRow(try DeviceStore(home: devices.laptop)) == everyRow(phoneStore))
        #expect(seen.get().contains { if case .requesting(2, _) = $0 { true } else { false } })
        // One sibling's snapshot was taken; the other was cancelled, or (if it was done first) its offer was
        // turned down with ok:false and its blob deleted.
        func ended(_ reports: [InboxListener.Outcome]) -> (sent: Bool, declined: Bool) {
            let syncs = reports.compactMap { if case .sync(let outcome) = $0 { outcome } else { nil } }
            let taken = syncs.contains(.acknowledged(ok: true, reason: ""))
            // Cancelled while it exported, turned down after its offer, or cancelled before its request was
            // handled (each frame has a task of its own), when it starts nothing and drops the cancel.
            let other =
                syncs.contains(.cancelled)
                || syncs.contains { if case .acknowledged(false, _) = $0 { true } else { false } }
                || syncs.contains { if case .dropped(let why) = $0 { why.contains("not started") } else { false } }
            return (taken, other)
        }
        for _ in 0..<500 {
            let (phone, tablet) = (
                ended(Array(devices.siblingReports.get().dropFirst(earlier))), ended(tabletReports.get())
            )
            if (phone.sent && tablet.declined) || (tablet.sent && phone.declined) { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let (phone, tabletEnd) = (
            ended(Array(devices.siblingReports.get().dropFirst(earlier))), ended(tabletReports.get())
        )
        #expect(phone.sent != tabletEnd.sent, "phone \(devices.siblingReports.get()), tablet \(tabletReports.get())")
        #expect(phone.declined != tabletEnd.declined)
        let blobs = try FileManager.default.contentsOfDirectory(
            atPath: devices.directory.appendingPathComponent("blobs").path
        ).filter { $0 != "tmp" }
        #expect(blobs.isEmpty, "\(blobs)")
    }

    @Test("a device whose own account hash is missing refuses every frame: isSameAccount is false for all")
    func noOwnHash() async throws {
        let devices = try await TwoDevices.make(sync: Self.fast())
        defer { devices.stop() }
        let accountID = try #require(try devices.laptop.load()?.membership?.accountID)
        let own = SenderCert.computeUserIDHash(accountID)
        let service = try await SyncService.connect(
            context: try DeviceContext(home: devices.laptop), configuration: Self.fast())
        #expect(service.isSameAccount(own))
        #expect(!service.isSameAccount(Data(own.prefix(31))))
        await service.close()
        // No account id: no own hash. Not even the hash of an empty id, which a stranger's cert could carry.
        try devices.laptop.update { $0.membership?.accountID = "" }
        let blank = try await SyncService.connect(
            context: try DeviceContext(home: devices.laptop), configuration: Self.fast())
        defer { Task { await blank.close() } }
        #expect(!blank.isSameAccount(own))
        #expect(!blank.isSameAccount(SenderCert.computeUserIDHash("")))
        #expect(!blank.isSameAccount(Data()))
    }
}
