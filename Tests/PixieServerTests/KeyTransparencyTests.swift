import Foundation
import HTTPServer
import PixieDevice
import PixieServer
import PixieWire
import SiblingsCrypto
import Storage
import Testing
import Transparency

extension Fixture {
    var logKey: LogKey { try! LogKey(origin: "pixie.localhost/kt", publicKey: keys.transparencyLog.publicKey) }

    /// identity-svc's answer to `POST /v1/kt/lookup` for `label`, unverified, as a device receives it.
    func lookupAnswer(_ label: String, since: UInt64?) async throws -> LookupAnswer {
        let body = try JSONEncoder().encode(TransparencyAPI.LookupRequest(label: label, since: since))
        let response = await post("/v1/kt/lookup", String(decoding: body, as: UTF8.self))
        guard response.status == .ok else {
            throw FixtureError("lookup failed: \(response.status) \(response.bodyText)")
        }
        return try LookupAnswer(try JSONDecoder().decode(TransparencyAPI.LookupResponse.self, from: response.body))
    }

    /// `POST /v1/kt/lookup` for `label`, checked by `verifier` as a device would.
    func verifiedLookup(_ label: String, _ verifier: inout TransparencyVerifier) async throws -> Entry? {
        let answer = try await lookupAnswer(label, since: verifier.pinned?.size)
        return try verifier.verify(label: try Label(label), answer: answer)
    }

    /// The log read through the router's own endpoints, as `pixie-server audit` reads it over HTTP.
    var logSource: HTTPLogSource {
        HTTPLogSource(logKey: logKey) { [router] path in
            let response = await router.test(.get, path)
            return (response.status.code, response.body)
        }
    }
}

@Suite("identity-svc key transparency")
struct KeyTransparencyTests {
    /// `pixie-server audit` against a server that takes its requests and never answers: an error naming the
    /// endpoint, not a hang.
    @Test(.timeLimit(.minutes(1)))
    func anAuditOfAStalledServerFailsAfterItsTimeout() async throws {
        let stalled = try StalledGateway()
        let source = HTTPLogSource(
            baseURL: try #require(URL(string: "/", relativeTo: stalled.url)?.absoluteURL),
            logKey: try LogKey(origin: "pixie.localhost/kt", publicKey: HybridSignature.PrivateKey().publicKey),
            timeout: 1)
        let error = await #expect(throws: ServerError.self) { _ = try await source.checkpointSizes(after: 0, limit: 8) }
        #expect(error?.reason.contains("/v1/kt/checkpoints") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("did not finish answering within 1 s") == true)
        await stalled.stop()
    }

    @Test func theDiscoveryAnswerAndItsProofAgree() async throws {
        let fixture = try Fixture()
        var phone = TestDevice(name: "phone")
        let account = AccountKeys()
        let created = try await fixture.createAccount(&phone, account: account)
        let handle = try #require(created.json["kt_handle"] as? String)

        // The new device: its cert, the directory's answer, and the log's proof for its own phone_id's label.
        let cert = try await fixture.phoneCert()
        let phoneID = try PhoneOwnershipCert(unverifiedRepresentation: cert).phoneID
        let discovery = await fixture.post("/v1/discovery/own", object: ["phone_cert": cert.base64URLEncodedString()])
        var verifier = TransparencyVerifier(logKey: fixture.logKey)
        let entry = try #require(
            try await fixture.verifiedLookup("discovery/" + phoneID.base64URLEncodedString(), &verifier))
        let inbox = try #require((discovery.json["discovery_inbox"] as? String).flatMap(Data.init(base64URLEncoded:)))
        let key = try #require(
            (discovery.json["discovery_xwing_pubkey"] as? String).flatMap(Data.init(base64URLEncoded:)))
        // Version 2 of the value names the account's KT handle: the number is bound to its account.
        #expect(entry.value == inbox + key + Data(handle.utf8))
        #expect(KeyTransparencyCommitment.DiscoveryBinding(logged: entry.value)?.ktHandle == handle)
        #expect(entry.version == 1)

        // The account's KT handle binds its signing key; the roster commitment matches the siblings list.
        let signing = try #require(try await fixture.verifiedLookup("account/" + handle, &verifier))
        #expect(signing.value == account.signing.publicKey.rawRepresentation)
        let roster = try #require(try await fixture.verifiedLookup("devices/" + handle, &verifier))
        #expect(roster.value == KeyTransparencyCommitment.roster([phone.roster]))

        // A second device joins: the roster's binding moves to version 2, and the device that pinned the
        // earlier checkpoint follows with a consistency proof.
        let grant = try #require(await fixture.grant(from: phone).json["grant"] as? String)
        var tablet = TestDevice(name: "tablet")
        let registered = try await fixture.register(&tablet, grant: ["grant": grant])
        #expect(registered.json["kt_handle"] as? String == handle)
        let pinned = try #require(verifier.pinned?.size)
        let updated = try #require(try await fixture.verifiedLookup("devices/" + handle, &verifier))
        #expect(updated.version == 2)
        #expect(updated.value == KeyTransparencyCommitment.roster([phone.roster, tablet.roster]))
        #expect(try #require(verifier.pinned?.size) > pinned)

        // A label nobody registered is proven absent, not merely missing.
        #expect(
            try await fixture.verifiedLookup("discovery/" + Data(count: 32).base64URLEncodedString(), &verifier) == nil)
    }

    @Test func anAuditorFollowsTheLogThroughTheEndpoints() async throws {
        let fixture = try Fixture()
        var alice = TestDevice(name: "alice")
        _ = try await fixture.createAccount(&alice, number: "+14155550123")
        var bob = TestDevice(name: "bob")
        _ = try await fixture.createAccount(&bob, number: "+442079460958")
        let grant = try #require(await fixture.grant(from: alice, scope: "replace_all").json["grant"] as? String)
        var laptop = TestDevice(name: "laptop")
        _ = try await fixture.register(&laptop, grant: ["grant": grant], revokeOthers: true)

        var auditor = Auditor(logKey: fixture.logKey)
        let checked = try await auditor.follow(fixture.logSource)
        #expect(checked >= 2)
        #expect(auditor.size == 7)  // 3 bindings per account, and alice's roster once more
        #expect(auditor.failure == nil)
    }

    /// The logged roster is the one `GET /v1/sync/siblings` serves, after joins that race each other and after
    /// a removal: publishes of one account are serialized, so the last one logs the newest roster.
    @Test func theLoggedRosterFollowsConcurrentJoinsAndARemoval() async throws {
        // Checkpoints 20 ms apart, so the twelve joins' publishes overlap.
        let fixture = try Fixture { $0.checkpointInterval = .milliseconds(20) }
        var phone = TestDevice(name: "phone")
        let created = try await fixture.createAccount(&phone)
        let handle = try #require(created.json["kt_handle"] as? String)
        var grants: [String] = []
        for _ in 0..<12 { grants.append(try #require(await fixture.grant(from: phone).json["grant"] as? String)) }
        let joined = try await withThrowingTaskGroup(of: TestDevice.self) { group in
            for (index, grant) in grants.enumerated() {
                group.addTask {
                    var device = TestDevice(name: "device \(index)")
                    let response = try await fixture.register(&device, grant: ["grant": grant])
                    guard response.status == .created else { throw FixtureError("join \(index): \(response.bodyText)") }
                    return device
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(joined.count == 12)

        func loggedRosterMatchesSiblings(of device: TestDevice) async throws {
            var verifier = TransparencyVerifier(logKey: fixture.logKey)
            let logged = try #require(try await fixture.verifiedLookup("devices/" + handle, &verifier))
            let served = try await fixture.siblingRoster(of: device)
            #expect(logged.value == KeyTransparencyCommitment.roster(served))
        }
        try await loggedRosterMatchesSiblings(of: phone)
        #expect(await fixture.siblings(of: phone).count == 13)

        // A removal (revoke_others) is logged the same way: the roster shrinks to the one device left.
        let grant = try #require(await fixture.grant(from: phone, scope: "replace_all").json["grant"] as? String)
        var laptop = TestDevice(name: "laptop")
        #expect(try await fixture.register(&laptop, grant: ["grant": grant], revokeOthers: true).status == .created)
        #expect(await fixture.siblings(of: laptop) == [laptop.pubkey.base64URLEncodedString()])
        try await loggedRosterMatchesSiblings(of: laptop)
        #expect(try await fixture.application.reconcileTransparency() == 0)
    }

    @Test func aCrashBetweenCommitAndAppendIsRepairedAtStart() async throws {
        let fixture = try Fixture()
        var phone = TestDevice(name: "phone")
        let created = try await fixture.createAccount(&phone)
        let handle = try #require(created.json["kt_handle"] as? String)
        // A roster change the log never heard of (as if the process died right after the commit, which
        // marks the account dirty in the same transaction).
        let other = SecureRandom.bytes(count: 40)
        try fixture.database.transaction { transaction in
            try transaction.execute(
                "INSERT INTO devices (device_id, account_id, pubkey, name, created_at) "
                    + "SELECT 'ghost', account_id, ?, 'ghost', 0 FROM accounts", [.blob(other)])
            try transaction.execute("UPDATE accounts SET kt_dirty = kt_dirty + 1", [])
        }
        var verifier = TransparencyVerifier(logKey: fixture.logKey)
        let before = try #require(try await fixture.verifiedLookup("devices/" + handle, &verifier))
        #expect(before.value == KeyTransparencyCommitment.roster([phone.roster]))

        #expect(try await fixture.application.reconcileTransparency() == 1)
        let after = try #require(try await fixture.verifiedLookup("devices/" + handle, &verifier))
        #expect(after.version == 2)
        #expect(
            after.value
                == KeyTransparencyCommitment.roster([
                    phone.roster, RosterDevice(pubkey: other, inbox: nil, sealingKey: nil),
                ]))
        // Nothing left to repair.
        #expect(try await fixture.application.reconcileTransparency() == 0)
    }

    /// Migration 3 (issue 15) added each device's inbox and sealing key and version 2 of the roster commitment;
    /// an account from before it must be logged again under version 2 when the upgraded server starts.
    @Test("an account from before device addressing is logged again at the first start after the upgrade")
    func anAccountFromBeforeDeviceAddressingIsLoggedAgain() async throws {
        let store = try SQLiteDatabase.inMemory()
        let keys = ServiceKeys.generate()
        let before = try Fixture(store: store, keys: keys)
        var phone = TestDevice(name: "phone")
        let handle = try #require(try await before.createAccount(&phone).json["kt_handle"] as? String)
        // Back to the store as the server before migration 3 left it: no addressing columns, nothing owed to
        // the log, migrations 3 and 4 not recorded.
        try store.execute("ALTER TABLE devices DROP COLUMN inbox", [])
        try store.execute("ALTER TABLE devices DROP COLUMN sealing_key", [])
        try store.execute("ALTER TABLE devices DROP COLUMN family", [])
        try store.execute("ALTER TABLE devices DROP COLUMN added_by", [])
        try store.execute("ALTER TABLE devices DROP COLUMN last_seen_at", [])
        try store.execute("ALTER TABLE devices DROP COLUMN removed_by", [])
        try store.execute("ALTER TABLE webauthn_challenges DROP COLUMN device_id", [])
        try store.execute("ALTER TABLE accounts DROP COLUMN epoch", [])
        try store.execute("DROP TABLE account_rotations", [])
        try store.execute("DROP TABLE rotation_bundles", [])
        try store.execute("UPDATE accounts SET kt_dirty = 0", [])
        try store.execute("DELETE FROM schema_migrations WHERE component = 'identity' AND version >= 3", [])
        var verifier = TransparencyVerifier(logKey: before.logKey)
        let old = try #require(try await before.verifiedLookup("devices/" + handle, &verifier))

        // The upgraded server: the migration marks the account, the start-up reconciliation logs it.
        let after = try Fixture(store: store, keys: keys)
        #expect(try await after.application.reconcileTransparency() == 1)
        let relogged = try #require(try await after.verifiedLookup("devices/" + handle, &verifier))
        #expect(relogged.version == old.version + 1)
        let legacy = RosterDevice(pubkey: phone.pubkey, inbox: nil, sealingKey: nil)
        #expect(relogged.value == KeyTransparencyCommitment.roster([legacy]))
        #expect(try await after.siblingRoster(of: phone) == [legacy])
        #expect(try await after.application.reconcileTransparency() == 0)
    }

    @Test("the siblings list, inboxes and sealing keys included, matches the logged roster; an altered one does not")
    func theSiblingsListMatchesTheLoggedRoster() async throws {
        let fixture = try Fixture()
        var phone = TestDevice(name: "phone")
        let created = try await fixture.createAccount(&phone)
        let handle = try #require(created.json["kt_handle"] as? String)
        let grant = try #require(await fixture.grant(from: phone).json["grant"] as? String)
        var tablet = TestDevice(name: "tablet")
        _ = try await fixture.register(&tablet, grant: ["grant": grant])

        let served = try await fixture.siblingRoster(of: tablet)
        #expect(Set(served.map(\.pubkey)) == [phone.pubkey, tablet.pubkey])
        // Each sibling's addressing is what it registered: where to send, and what to seal to.
        #expect(served.first { $0.pubkey == phone.pubkey } == phone.roster)
        var verifier = TransparencyVerifier(logKey: fixture.logKey)
        let logged = try #require(try await fixture.verifiedLookup("devices/" + handle, &verifier))
        #expect(logged.value == KeyTransparencyCommitment.roster(served))

        // What a server could change in the list without the log: another inbox for a sibling (to read what
        // is sent to it), another sealing key (to open what is sealed to it), a device dropped or added.
        var redirected = served
        redirected[0].inbox = RelaySubjectKey().subject
        var resealed = served
        resealed[1].sealingKey = XWing.PrivateKey().publicKey.rawRepresentation
        let dropped = Array(served.dropFirst())
        let added = served + [RosterDevice(pubkey: SecureRandom.bytes(count: 64), inbox: nil, sealingKey: nil)]
        for altered in [redirected, resealed, dropped, added] {
            #expect(logged.value != KeyTransparencyCommitment.roster(altered))
        }
        // The order the list comes in does not matter.
        #expect(logged.value == KeyTransparencyCommitment.roster(served.reversed()))
    }

    @Test("a device enrolls only with a 32-byte inbox and an X-Wing sealing key")
    func enrollmentNeedsTheDevicesAddressing() async throws {
        let fixture = try Fixture()
        for (field, value) in [
            ("inbox", SecureRandom.bytes(count: 31).base64URLEncodedString()),
            ("sealing_key", SecureRandom.bytes(count: 32).base64URLEncodedString()),
        ] {
            var device = TestDevice(name: "phone")
            var object = device.deviceObject
            object[field] = value
            let cert = try await fixture.phoneCert()
            let account = AccountKeys()
            var body = fixture.accountBody(
                device, account: account, passkey: try await fixture.passkey(for: &device),
                cert: cert.base64URLEncodedString())
            body["device"] = object
            let refused = await fixture.post("/v1/accounts", object: body)
            #expect(refused.status == .badRequest, "\(field): \(refused.bodyText)")
            #expect(refused.errorCode == "invalid_field")
        }
    }

    @Test("with the log unavailable, identity-svc answers 503 transparency_unavailable and serves nothing unlogged")
    func anUnavailableLogServesNothingUnlogged() async throws {
        nonisolated(unsafe) var made: FaultyDatabase?
        let fixture = try Fixture(faults: { database in
            let faulty = FaultyDatabase(database)
            made = faulty
            return faulty
        })
        let faulty = try #require(made)
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        let grant = try #require(await fixture.grant(from: phone).json["grant"] as? String)
        let cert = try await fixture.phoneCert(for: "+442079460958").base64URLEncodedString()

        // The log's tables fail from here on.
        faulty.fail { $0.contains("transparency_") }
        var second = TestDevice(name: "second")
        let refused = try await fixture.createAccount(&second, number: "+442079460958")
        #expect(refused.status == .serviceUnavailable, "\(refused.bodyText)")
        #expect(refused.errorCode == "transparency_unavailable")
        // The account was taken back: its number has none, and may create one later.
        let lookup = await fixture.post("/v1/discovery/own", object: ["phone_cert": cert])
        #expect(lookup.status == .notFound, "\(lookup.bodyText)")

        // A join whose roster cannot be logged: enrolled, but the roster is not served until it is logged.
        var laptop = TestDevice(name: "laptop")
        let joined = try await fixture.register(&laptop, grant: ["grant": grant])
        #expect(joined.errorCode == "transparency_unavailable", "\(joined.bodyText)")
        let roster = await fixture.get("/v1/sync/siblings", token: phone.session)
        #expect(roster.status == .serviceUnavailable)
        #expect(roster.errorCode == "transparency_unavailable")

        // When the rollback fails too, the account stays but is not served, and the failure is counted.
        faulty.fail(when: nil)
        let thirdCert = try await fixture.phoneCert(for: "+33142685300").base64URLEncodedString()
        faulty.fail { $0.contains("transparency_") || $0.hasPrefix("DELETE FROM sessions WHERE account_id") }
        var third = TestDevice(name: "third")
        let kept = try await fixture.createAccount(&third, number: "+33142685300")
        #expect(kept.errorCode == "transparency_unavailable")
        #expect(
            fixture.application.metrics.counter(
                "pixie_identity_events_total", labels: ["kind": "account_rollback_failed"]) == 1)
        let unlogged = await fixture.post("/v1/discovery/own", object: ["phone_cert": thirdCert])
        #expect(unlogged.status == .serviceUnavailable, "an unlogged account was served: \(unlogged.bodyText)")
        #expect(unlogged.errorCode == "transparency_unavailable")

        // The log is back: what was owed is logged on the next request, and served with its proof.
        faulty.fail(when: nil)
        let served = await fixture.post("/v1/discovery/own", object: ["phone_cert": thirdCert])
        #expect(served.status == .ok, "\(served.bodyText)")
        #expect(await fixture.siblings(of: phone).count == 2)
    }

    @Test func malformedQueriesAreClear400s() async throws {
        let fixture = try Fixture()
        for path in [
            "/v1/kt/consistency", "/v1/kt/consistency?from=0&to=99", "/v1/kt/consistency?from=x&to=1",
            "/v1/kt/entries?start=0&end=5", "/v1/kt/entries?start=3&end=1", "/v1/kt/checkpoint?size=42",
            "/v1/kt/checkpoints?limit=0", "/v1/kt/checkpoints?after=-1",
        ] {
            let response = await fixture.get(path)
            #expect(response.status == .badRequest, "\(path): \(response.status) \(response.bodyText)")
            #expect(response.errorCode != nil)
        }
        for body in [#"{}"#, #"{"label": ""}"#, #"{"label": "Discovery/x"}"#, #"{"label": "a", "since": -1}"#] {
            #expect(await fixture.post("/v1/kt/lookup", body).status == .badRequest, "\(body)")
        }
        let empty = await fixture.get("/v1/kt/checkpoint")
        #expect(empty.status == .ok)
        #expect(empty.headers["Content-Type"]?.hasPrefix("text/plain") == true)
        #expect(try Checkpoint(note: empty.bodyText, verifyingWith: fixture.logKey).size == 0)
    }
}
