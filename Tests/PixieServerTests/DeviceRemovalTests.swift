import Foundation
import HTTPServer
import PixieDevice
import PixieServer
import PixieWire
import SiblingsCrypto
import SiblingsTestSupport
import Storage
import Testing
import Transparency
import WebAuthn

/// An account's keys as its devices hold them across rotations: the signing key, the discovery key and inbox, and
/// the epoch they belong to.
struct RotatingAccount {
    var ktHandle: String
    var epoch: UInt64 = 1
    var signing: HybridSignature.PrivateKey
    var discovery: XWing.PrivateKey
    var inbox: Data
}

/// A removal as a remover prepares it: the body of `POST /v1/auth/devices/remove`, and the keys it moves to.
struct PreparedRemoval {
    var body: [String: Any]
    var next: RotatingAccount
    var statement: AccountRotation
    /// What each staying device's bundle holds (the same for all).
    var accountSeed: Data
}

extension Fixture {
    /// Four devices of one account: phone made it, tablet, laptop and watch joined with grants from phone.
    func fourDevices() async throws -> (devices: [TestDevice], account: RotatingAccount) {
        var phone = TestDevice(name: "phone")
        let keys = AccountKeys()
        let created = try await createAccount(&phone, account: keys)
        let handle = try #require(created.json["kt_handle"] as? String)
        var devices = [phone]
        for name in ["tablet", "laptop", "watch"] {
            var device = TestDevice(name: name)
            let grant = try #require(await grant(from: phone).json["grant"] as? String)
            #expect(try await register(&device, grant: ["grant": grant]).status == .created)
            devices.append(device)
        }
        return (
            devices,
            RotatingAccount(ktHandle: handle, signing: keys.signing, discovery: keys.discovery, inbox: keys.inbox)
        )
    }

    /// A `remove_device` challenge naming `target`, answered by `signer`'s passkey.
    func removalPasskey(naming target: String, signedBy signer: TestDevice) async throws -> [String: Any] {
        let challenge = await post(
            "/v1/auth/passkey/challenge", object: ["purpose": "remove_device", "device_id": target])
        guard challenge.status == .created, let id = challenge.json["challenge_id"] as? String,
            let bytes = (challenge.json["challenge"] as? String).flatMap(Data.init(base64URLEncoded:))
        else { throw FixtureError("no challenge: \(challenge.bodyText)") }
        let assertion = try signer.authenticator.getAssertion(
            rpID: "localhost", origin: "https://localhost", challenge: bytes, credentialID: signer.credentialID)
        return ["challenge_id": id, "credential": jsonObject(assertion)]
    }

    /// `remover`'s removal of `target` from `account`, with a bundle for each of `staying` (the target left out),
    /// signed by `oldKey` (the account's key, unless an attack says otherwise).
    func prepareRemoval(
        of target: TestDevice, by remover: TestDevice, staying: [TestDevice], account: RotatingAccount,
        oldKey: HybridSignature.PrivateKey? = nil, statementTarget: TestDevice? = nil
    ) throws -> PreparedRemoval {
        let next = RotatingAccount(
            ktHandle: account.ktHandle, epoch: account.epoch + 1, signing: HybridSignature.PrivateKey(),
            discovery: XWing.PrivateKey(), inbox: SecureRandom.bytes(count: 32))
        let discoveryValue = KeyTransparencyCommitment.discovery(
            inbox: try RelaySubject(rawRepresentation: next.inbox),
            discoveryKey: next.discovery.publicKey.rawRepresentation, ktHandle: account.ktHandle)
        let statement = try AccountRotation(
            ktHandle: account.ktHandle, epoch: next.epoch, from: oldKey ?? account.signing, to: next.signing,
            discoveryValue: discoveryValue, remover: remover.identity, removed: (statementTarget ?? target).pubkey,
            time: clock.now)
        let accountSeed = SecureRandom.bytes(count: 32)
        let bundle = try RotationBundle(
            epoch: next.epoch, ktHandle: account.ktHandle, accountSeed: accountSeed,
            discoverySeed: SecureRandom.bytes(count: 32), backupKey: SecureRandom.bytes(count: 32),
            statementHash: Data(SHA256.hash(data: statement.encoded)))
        let bundles: [[String: Any]] = try staying.filter { $0.deviceID != target.deviceID }.map { device in
            [
                "device_id": device.deviceID!,
                "bundle": try bundle.seal(to: device.sealing.publicKey, device: device.pubkey)
                    .base64URLEncodedString(),
            ]
        }
        let body: [String: Any] = [
            "device_id": target.deviceID!, "expected_epoch": account.epoch,
            "rotation": [
                "account_signing_pubkey": next.signing.publicKey.rawRepresentation.base64URLEncodedString(),
                "discovery_inbox": next.inbox.base64URLEncodedString(),
                "discovery_xwing_pubkey": next.discovery.publicKey.rawRepresentation.base64URLEncodedString(),
                "statement": statement.encoded.base64URLEncodedString(), "bundles": bundles,
            ],
        ]
        return PreparedRemoval(body: body, next: next, statement: statement, accountSeed: accountSeed)
    }

    /// Sends `removal` from `remover`, with a fresh passkey assertion by `signer` (the remover by default).
    func remove(
        _ removal: PreparedRemoval, by remover: TestDevice, signedBy signer: TestDevice? = nil,
        naming: String? = nil
    ) async throws -> HTTPResponse {
        var body = removal.body
        body["passkey"] = try await removalPasskey(
            naming: naming ?? (body["device_id"] as! String), signedBy: signer ?? remover)
        return await post("/v1/auth/devices/remove", object: body, token: remover.session)
    }

    /// The size of the log's latest checkpoint, as a device verifies it.
    func logSize() async throws -> UInt64 {
        var verifier = TransparencyVerifier(logKey: logKey)
        _ = try await verifiedLookup("account/none", &verifier)
        return try #require(verifier.pinned?.size)
    }

    func rotations(of device: TestDevice, after: UInt64 = 0) async throws -> IdentityAPI.RotationsResponse {
        let response = await get("/v1/auth/devices/rotations?after=\(after)", token: device.session)
        guard response.status == .ok else { throw FixtureError("rotations: \(response.status) \(response.bodyText)") }
        return try JSONDecoder().decode(IdentityAPI.RotationsResponse.self, from: response.body)
    }
}

/// identity-svc's half of revoking a device (docs/pixie-protocol.md, "Revoking a device"): one device removed with
/// every key it knew rotated, in one transaction and one checkpoint, and every way to misuse it refused.
@Suite("identity-svc removing one device")
struct DeviceRemovalTests {
    @Test("a removal takes the device out, parks a bundle for each that stays, and logs the rotation in one checkpoint")
    func aRemovalRotatesTheAccount() async throws {
        let fixture = try Fixture()
        let (devices, account) = try await fixture.fourDevices()
        let (phone, tablet, laptop, watch) = (devices[0], devices[1], devices[2], devices[3])
        // A grant minted before the removal (by any device: the removed one's thief could have) dies with it.
        let earlier = try #require(await fixture.grant(from: tablet).json["grant"] as? String)
        let watchGrant = try #require(await fixture.grant(from: watch).json["grant"] as? String)
        let logBefore = try await fixture.logSize()

        let removal = try fixture.prepareRemoval(of: watch, by: phone, staying: devices, account: account)
        let removed = try await fixture.remove(removal, by: phone)
        #expect(removed.status == .ok, "\(removed.bodyText)")
        #expect(removed.json["epoch"] as? Int == 2)
        #expect(removed.json["removed_device_id"] as? String == watch.deviceID)

        // The roster: three devices, and the removed one learns why, by whom and when, on every session request.
        #expect(await fixture.siblings(of: phone).count == 3)
        #expect(await !fixture.siblings(of: tablet).contains(watch.pubkey.base64URLEncodedString()))
        for attempt in [
            await fixture.get("/v1/sync/siblings", token: watch.session),
            await fixture.grant(from: watch),
            try await fixture.remove(
                try fixture.prepareRemoval(of: phone, by: watch, staying: devices, account: removal.next), by: watch),
        ] {
            #expect(attempt.status == .unauthorized, "\(attempt.bodyText)")
            #expect(attempt.errorCode == "device_removed")
            #expect(attempt.json["removed_by"] as? String == "phone")
            #expect(attempt.json["removed_at"] as? Int == Int(fixture.clock.now.timeIntervalSince1970))
        }
        var joiner = TestDevice(name: "joiner")
        let late = try await fixture.register(&joiner, grant: ["grant": earlier])
        #expect(late.status.code == 410, "\(late.bodyText)")

        // Each device that stays finds its bundle (the remover too), which opens under its own sealing key only.
        for device in [phone, tablet, laptop] {
            let parked = try await fixture.rotations(of: device, after: 1)
            #expect(parked.epoch == 2)
            let rotation = try #require(parked.rotations.first)
            #expect(parked.rotations.count == 1)
            #expect(rotation.statement.data == removal.statement.encoded)
            let bundle = try RotationBundle.open(
                try #require(rotation.bundle).data, with: device.sealing, device: device.pubkey)
            #expect(bundle.accountSeed == removal.accountSeed)
            #expect(bundle.statementHash == Data(SHA256.hash(data: removal.statement.encoded)))
            #expect(throws: PixieWireError.self) {
                _ = try RotationBundle.open(
                    try #require(rotation.bundle).data, with: watch.sealing, device: watch.pubkey)
            }
        }
        #expect(try await fixture.rotations(of: tablet, after: 2).rotations.isEmpty)

        // The log: the new account key, its statement, the new discovery entry and the roster, in one checkpoint
        // (the auditor's rule reads the key change and its statement together, and passes).
        var verifier = TransparencyVerifier(logKey: fixture.logKey)
        let key = try await fixture.verifiedLookup(KeyTransparencyLabel.account(ktHandle: account.ktHandle), &verifier)
        #expect(key?.value == removal.next.signing.publicKey.rawRepresentation)
        #expect(key?.version == 2)
        let statement = try await fixture.verifiedLookup(
            KeyTransparencyLabel.accountRotation(ktHandle: account.ktHandle), &verifier)
        #expect(statement?.value == removal.statement.encoded)
        let roster = try await fixture.verifiedLookup(
            KeyTransparencyLabel.devices(ktHandle: account.ktHandle), &verifier)
        #expect(roster?.value == KeyTransparencyCommitment.roster([phone.roster, tablet.roster, laptop.roster]))
        let sizes = try JSONDecoder().decode(
            TransparencyAPI.SizesResponse.self,
            from: await fixture.get("/v1/kt/checkpoints?after=\(logBefore)").body)
        #expect(sizes.sizes == [logBefore + 4], "the four bindings are one checkpoint")
        var auditor = Auditor(logKey: fixture.logKey, rules: [AccountRotationRule()])
        _ = try await auditor.follow(fixture.logSource)
        #expect(auditor.failure == nil)

        // A grant the watch minted in the instant its removal committed (its session checked before, its row
        // written after, so the removal's voiding missed it) is refused for its minter; the same for the tablet's
        // still works.
        _ = try fixture.database.execute(
            "UPDATE recovery_grants SET expires_at = ?", [.integer(Int64(fixture.clock.now.timeIntervalSince1970) + 60)]
        )
        var thief = TestDevice(name: "thief")
        let refused = try await fixture.register(&thief, grant: ["grant": watchGrant])
        #expect(refused.status == .forbidden, "\(refused.bodyText)")
        #expect(refused.errorCode == "grant_invalid")
        #expect(refused.bodyText.contains("was removed from the account"))
        var joiner2 = TestDevice(name: "joiner")
        #expect(try await fixture.register(&joiner2, grant: ["grant": earlier]).status == .created)
    }

    @Test("a removal committed while the log is away is logged by the retry once it is back, with no other request")
    func anOwedRotationIsLoggedByTheRetry() async throws {
        nonisolated(unsafe) var made: FaultyDatabase?
        let fixture = try Fixture(
            configure: { $0.ktRetryInterval = .milliseconds(10) },
            faults: { database in
                let faulty = FaultyDatabase(database)
                made = faulty
                return faulty
            })
        let faulty = try #require(made)
        let (devices, account) = try await fixture.fourDevices()
        let (phone, watch) = (devices[0], devices[3])
        let removal = try fixture.prepareRemoval(of: watch, by: phone, staying: devices, account: account)
        faulty.fail { $0.contains("transparency_") }
        let answered = try await fixture.remove(removal, by: phone)
        #expect(answered.status == .serviceUnavailable, "\(answered.bodyText)")
        #expect(answered.errorCode == "transparency_unavailable")
        faulty.fail(when: nil)

        // The log is back, and nobody asks: the removal stands, and the log still holds the old key.
        let label = KeyTransparencyLabel.account(ktHandle: account.ktHandle)
        func logged() async throws -> Data? {
            var verifier = TransparencyVerifier(logKey: fixture.logKey)
            return try await fixture.verifiedLookup(label, &verifier)?.value
        }
        #expect(try await logged() == account.signing.publicKey.rawRepresentation)
        // The retry logs what is owed within its interval, the rotation whole (its key and its statement).
        let retry = Task { await fixture.application.runTransparencyRetry() }
        defer { retry.cancel() }
        let deadline = ContinuousClock.now + .seconds(20)
        while try await logged() != removal.next.signing.publicKey.rawRepresentation, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await logged() == removal.next.signing.publicKey.rawRepresentation)
        var verifier = TransparencyVerifier(logKey: fixture.logKey)
        let statement = try await fixture.verifiedLookup(
            KeyTransparencyLabel.accountRotation(ktHandle: account.ktHandle), &verifier)
        #expect(statement?.value == removal.statement.encoded)
    }

    @Test(
        "a grant redeemed while a removal holds the roster waits for it, and finds the grant voided",
        arguments: TestDatabase.allCases)
    func aRedemptionWaitsForARemoval(backend: TestDatabase) async throws {
        let fixture = try Fixture(store: try backend.make())
        var phone = TestDevice(name: "phone")
        let accountID = try #require(try await fixture.createAccount(&phone).json["account_id"] as? String)
        let grant = try #require(await fixture.grant(from: phone).json["grant"] as? String)
        var joiner = TestDevice(name: "joiner")
        let body: [String: Any] = [
            "grant": grant, "device": joiner.deviceObject, "passkey": try await fixture.passkey(for: &joiner),
            "revoke_others": false,
        ]
        // A removal under way, on another connection: it has counted the devices that stay (one bundle each), and
        // voids the account's unredeemed grants a second later, as commitRemoval does. Without the roster lock a
        // redemption in that second enrolled a device with no bundle (on PostgreSQL; SQLite has one writer).
        let now = Int64(fixture.clock.now.timeIntervalSince1970)
        let counted = AsyncStream<Void>.makeStream()
        let removal = Task.detached {
            try fixture.database.transaction(exclusive: "roster/\(accountID)") { transaction in
                _ = try transaction.query(
                    "SELECT device_id FROM devices WHERE account_id = ? AND removed_at IS NULL", [.text(accountID)])
                counted.continuation.yield()
                Thread.sleep(forTimeInterval: 1)
                _ = try transaction.execute(
                    "UPDATE recovery_grants SET expires_at = ? WHERE account_id = ? AND used_at IS NULL",
                    [.integer(now), .text(accountID)])
            }
        }
        var waiting = counted.stream.makeAsyncIterator()
        _ = await waiting.next()
        let redeemed = await fixture.post("/v1/auth/devices/register", object: body)
        try await removal.value
        #expect(redeemed.status.code == 410, "\(redeemed.bodyText)")
        #expect(redeemed.errorCode == "grant_expired")
        #expect(await fixture.siblings(of: phone).count == 1)
    }

    @Test("refused: no user verification, a challenge for another device, another's passkey, itself, a stale epoch")
    func whatIsRefused() async throws {
        let fixture = try Fixture()
        var (devices, account) = try await fixture.fourDevices()
        var lax = TestDevice(name: "lax", authenticator: SoftwareAuthenticator(userVerifying: false))
        let grant = try #require(await fixture.grant(from: devices[0]).json["grant"] as? String)
        #expect(try await fixture.register(&lax, grant: ["grant": grant]).status == .created)
        devices.append(lax)
        let (phone, tablet, watch) = (devices[0], devices[1], devices[3])
        let checkpoint = try await fixture.logSize()
        let good = try fixture.prepareRemoval(of: watch, by: phone, staying: devices, account: account)

        func refused(_ response: HTTPResponse, _ status: HTTPResponse.Status, _ code: String) {
            #expect(response.status == status, "\(response.bodyText)")
            #expect(response.errorCode == code, "\(response.bodyText)")
        }
        // Possession without the unlock: an assertion without user verification.
        refused(
            try await fixture.remove(
                try fixture.prepareRemoval(of: watch, by: lax, staying: devices, account: account), by: lax),
            .forbidden, "user_verification_required")
        // A challenge made to remove another device.
        refused(try await fixture.remove(good, by: phone, naming: tablet.deviceID), .badRequest, "challenge_invalid")
        // Another device's passkey does not speak for this session.
        refused(try await fixture.remove(good, by: phone, signedBy: tablet), .unauthorized, "passkey_invalid")
        // A session alone.
        refused(
            await fixture.post("/v1/auth/devices/remove", object: good.body, token: phone.session), .badRequest,
            "invalid_json")
        // Itself.
        refused(
            try await fixture.remove(
                try fixture.prepareRemoval(of: phone, by: phone, staying: devices, account: account), by: phone),
            .badRequest, "invalid_field")
        // Made at an epoch that is not the account's.
        var stale = account
        stale.epoch = 2
        refused(
            try await fixture.remove(
                try fixture.prepareRemoval(of: watch, by: phone, staying: devices, account: stale), by: phone),
            .conflict, "epoch_changed")
        // A statement signed by a key that is not the account's (the removed device cannot forge one either).
        refused(
            try await fixture.remove(
                try fixture.prepareRemoval(
                    of: watch, by: phone, staying: devices, account: account, oldKey: HybridSignature.PrivateKey()),
                by: phone),
            .badRequest, "rotation_invalid")
        // A statement naming another device than the one removed.
        refused(
            try await fixture.remove(
                try fixture.prepareRemoval(
                    of: watch, by: phone, staying: devices, account: account, statementTarget: tablet),
                by: phone),
            .badRequest, "rotation_invalid")
        // A device that stays left without its bundle.
        refused(
            try await fixture.remove(
                try fixture.prepareRemoval(of: watch, by: phone, staying: Array(devices.dropLast()), account: account),
                by: phone),
            .badRequest, "rotation_invalid")
        // A challenge for remove_device names its device; no other purpose takes one.
        refused(
            await fixture.post("/v1/auth/passkey/challenge", object: ["purpose": "remove_device"]), .badRequest,
            "invalid_field")
        refused(
            await fixture.post(
                "/v1/auth/passkey/challenge", object: ["purpose": "login", "device_id": watch.deviceID!]),
            .badRequest, "invalid_field")

        // Nothing moved: the roster, the epoch, the log.
        #expect(await fixture.siblings(of: phone).count == 5)
        #expect(try await fixture.rotations(of: tablet).epoch == 1)
        #expect(try await fixture.logSize() == checkpoint)
        // And the good one goes through after all of them.
        let removed = try await fixture.remove(good, by: phone)
        #expect(removed.status == .ok, "\(removed.bodyText)")
        account = good.next
        #expect(try await fixture.rotations(of: tablet).epoch == account.epoch)
    }

    @Test("two devices removing each other at once: one removal, and the other is told it was removed, by whom")
    func twoRemovingEachOther() async throws {
        let fixture = try Fixture()
        let (devices, account) = try await fixture.fourDevices()
        let (phone, tablet) = (devices[0], devices[1])
        let phoneRemoves = try fixture.prepareRemoval(of: tablet, by: phone, staying: devices, account: account)
        let tabletRemoves = try fixture.prepareRemoval(of: phone, by: tablet, staying: devices, account: account)
        async let first = fixture.remove(phoneRemoves, by: phone)
        async let second = fixture.remove(tabletRemoves, by: tablet)
        let answers = try await [first, second]
        let winners = answers.filter { $0.status == .ok }
        #expect(winners.count == 1, "\(answers.map(\.bodyText))")
        let loser = try #require(answers.first { $0.status != .ok })
        #expect(loser.status == .unauthorized, "\(loser.bodyText)")
        #expect(loser.errorCode == "device_removed")
        let winnerName = answers[0].status == .ok ? "phone" : "tablet"
        #expect(loser.json["removed_by"] as? String == winnerName)
        #expect(await fixture.siblings(of: answers[0].status == .ok ? phone : tablet).count == 3)
        #expect(try await fixture.rotations(of: devices[2]).epoch == 2)
    }

    @Test("the removed device's relay subscription ends at once, with device_removed; the others' go on")
    func theRemovedDevicesSubscriptionEnds() async throws {
        let bus = try RelayHarness.defaultBus()
        let fixture = try Fixture(bus: bus)
        let relay = try RelayHarness(bus: bus)
        let (devices, account) = try await fixture.fourDevices()
        let (phone, tablet, watch) = (devices[0], devices[1], devices[3])
        let watchListens = try await relay.connect()
        let tabletListens = try await relay.connect()
        #expect(try await watchListens.subscribe(watch.inbox, pushToken: Data("watch".utf8)) == .ok(requestID: 1))
        #expect(try await tabletListens.subscribe(tablet.inbox) == .ok(requestID: 1))

        let removal = try fixture.prepareRemoval(of: watch, by: phone, staying: devices, account: account)
        #expect(try await fixture.remove(removal, by: phone).status == .ok)
        guard case .error(0, .deviceRemoved, let reason) = try await watchListens.next() else {
            Issue.record("the removed device's connection was not told")
            return
        }
        #expect(reason.contains("removed"))
        // Its subscription is gone, and its push registration with it: a Sync frame sent to its inbox now reaches
        // nobody and wakes nobody, and its connection's next frame is the answer to its own PING. The tablet still
        // hears its own inbox.
        let sender = try await relay.connect()
        #expect(
            try await sender.send(Data("late".utf8), to: watch.inbox.subject, wake: .sync, token: relay.token())
                == .ok(requestID: 1))
        #expect(try await watchListens.request { .ping(requestID: $0) } == .ok(requestID: 2))
        #expect(relay.metrics.counter("pixie_relay_pushes_total", labels: ["outcome": "unregistered"]) == 1)
        #expect(relay.push.wakes.isEmpty)
        #expect(
            try await sender.send(Data("hi".utf8), to: tablet.inbox.subject, token: relay.token()) == .ok(requestID: 2))
        #expect(
            try await tabletListens.next()
                == .deliver(subject: tablet.inbox.subject, wake: .silent, payload: Data("hi".utf8)))
        await watchListens.close()
        await tabletListens.close()
        await sender.close()
    }

    @Test("a contact that knew the old account key takes the new one through the signed statement, and no other")
    func aContactFollowsTheStatement() async throws {
        let fixture = try Fixture()
        let (devices, account) = try await fixture.fourDevices()
        let contact = LoggedBindings(verifier: TransparencyVerifier(logKey: fixture.logKey)) { label, since in
            try await fixture.lookupAnswer(label.description, since: since)
        }
        let old = account.signing.publicKey
        #expect(try await contact.followedAccountKey(ktHandle: account.ktHandle, known: old) == old)

        let removal = try fixture.prepareRemoval(of: devices[3], by: devices[0], staying: devices, account: account)
        #expect(try await fixture.remove(removal, by: devices[0]).status == .ok)
        let new = removal.next.signing.publicKey
        #expect(try await contact.followedAccountKey(ktHandle: account.ktHandle, known: old) == new)
        // Someone who knew another key (never the account's) is not moved by the statement.
        await #expect(throws: RotationError.self) {
            _ = try await contact.followedAccountKey(
                ktHandle: account.ktHandle, known: HybridSignature.PrivateKey().publicKey)
        }
        // A server that logs a key of its own, with no statement for it: refused, though the log proves the key.
        let log = try #require(fixture.application.log)
        _ = try await log.append(
            label: try Label(KeyTransparencyLabel.account(ktHandle: account.ktHandle)),
            value: HybridSignature.PrivateKey().publicKey.rawRepresentation)
        await #expect(throws: RotationError.self) {
            _ = try await contact.followedAccountKey(ktHandle: account.ktHandle, known: new)
        }
        let swapped = await #expect(throws: RotationError.self) {
            _ = try await contact.followedAccountKey(ktHandle: account.ktHandle, known: old)
        }
        #expect("\(swapped.map { "\($0)" } ?? "")".contains("not the one its rotation statement signs for"))
    }
}
