import Foundation
import HTTPServer
import PixieDevice
import PixieServer
import PixieWire
@_spi(Testing) import PrivacyPass
import SiblingsCrypto
import Storage
import StoragePostgreSQL
import Testing
import Transparency

extension Fixture {
    /// The device's verifier for the served key list, over this fixture's `POST /v1/kt/lookup`.
    func keyListVerifier() -> LoggedBindings {
        LoggedBindings(verifier: TransparencyVerifier(logKey: logKey)) { label, since in
            try await lookupAnswer(label.rawValue, since: since)
        }
    }

    /// What a new device does before asking for tokens: fetch the served key list and build a client whose mint
    /// checks it against the transparency log (label oprf-keys) and takes only a key in the logged list.
    func tokenClient() async throws -> TokenClient {
        _ = try await application.reconcileTransparency()
        let served = await get("/v1/tokens/keys")
        let list = try #require((served.json["key_list"] as? String).flatMap(Data.init(base64URLEncoded:)))
        let keyID = try #require((served.json["token_key_id"] as? String).flatMap(Data.init(base64URLEncoded:)))
        return try await TokenClient(
            tokenKeyID: keyID, servedKeyList: list, verifier: keyListVerifier(), now: clock.now)
    }

    /// Mints `count` tokens through the pre-session challenge with `cert`.
    func approvalTokens(_ client: TokenClient, cert: Data, count: Int = 4) async throws -> (HTTPResponse, [Token]) {
        let (request, pending) = try client.begin(count: count)
        let response = await post(
            "/v1/approval-tokens/challenge",
            object: ["phone_cert": cert.base64URLEncodedString(), "token_request": request.base64URLEncodedString()])
        guard response.status == .ok else { return (response, []) }
        let bytes = try #require((response.json["token_response"] as? String).flatMap(Data.init(base64URLEncoded:)))
        return (response, try client.finish(bytes, pending: pending))
    }
}

@Suite("credential-svc rate-limit tokens")
struct CredentialTokenTests {
    @Test func aNewDeviceMintsFourTokensWithItsCertAndSpendsEachOnce() async throws {
        let fixture = try Fixture()
        let client = try await fixture.tokenClient()
        let cert = try await fixture.phoneCert()
        let (response, tokens) = try await fixture.approvalTokens(client, cert: cert)
        #expect(response.status == .ok, "\(response.bodyText)")
        #expect(tokens.count == 4)
        let spender = try #require(fixture.application.credential?.spender)
        for token in tokens { try spender.spend(token.rawRepresentation) }
        // A double spend, a forged token and garbage are refused.
        for token in tokens.prefix(2) {
            let again = #expect(throws: HTTPError.self) { try spender.spend(token.rawRepresentation) }
            #expect(again?.code == .tokenSpent)
        }
        var forged = tokens[2].rawRepresentation
        forged[forged.count - 1] ^= 1
        do {
            try spender.spend(forged)
            Issue.record("a forged token was accepted")
        } catch {
            #expect(error.code == .tokenInvalid)
        }
        do {
            try spender.spend(Data(count: 10))
            Issue.record("garbage was accepted")
        } catch {
            #expect(error.code == .tokenInvalid)
        }
    }

    /// The relay spends a burst's tokens with one call: each gets its own outcome, in order, and a token
    /// repeated within the burst is spent once.
    @Test func aBatchOfTokensIsSpentTokenByToken() async throws {
        let fixture = try Fixture { $0.approvalTokensPerHour = 16 }
        let client = try await fixture.tokenClient()
        let cert = try await fixture.phoneCert()
        let tokens =
            try await fixture.approvalTokens(client, cert: cert).1 + fixture.approvalTokens(client, cert: cert).1
        try #require(tokens.count == 8)
        let spender = try #require(fixture.application.credential?.spender)
        let raw = tokens.map(\.rawRepresentation)
        try spender.spend(raw[0])
        var forged = raw[1]
        forged[forged.count - 1] ^= 1
        let batch = [raw[2], raw[0], forged, raw[3], raw[3], Data(count: 10), raw[4]]
        let outcomes = spender.spend(batch).map { result -> String in
            switch result {
            case .success: "spent"
            case .failure(let error): error.code.rawValue
            }
        }
        #expect(
            outcomes == ["spent", "token_spent", "token_invalid", "spent", "token_spent", "token_invalid", "spent"])
        #expect(try fixture.count("spent_tokens") == 4)
        #expect(spender.spend([]).isEmpty)
    }

    /// A store that fails a burst's write spends none of its tokens: each verified one is a 503, and spends
    /// once the store is back.
    @Test func aFailedStoreWriteSpendsNoneOfTheBatch() async throws {
        let fixture = try Fixture()
        let client = try await fixture.tokenClient()
        let (_, tokens) = try await fixture.approvalTokens(client, cert: try await fixture.phoneCert())
        try #require(tokens.count == 4)
        let spender = try #require(fixture.application.credential?.spender)
        let raw = tokens.map(\.rawRepresentation)
        // The third token's insert fails, after the first two were written in the same transaction.
        let third = Data(SHA256.hash(data: raw[2])).map { String(format: "%02X", $0) }.joined()
        let postgres = fixture.database is PostgreSQLDatabase
        try fixture.database.transaction {
            if postgres {
                try $0.executeScript(
                    "CREATE FUNCTION fail_third() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.token_hash = "
                        + "'\\x\(third)'::bytea THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$; "
                        + "CREATE TRIGGER fail_third BEFORE INSERT ON spent_tokens FOR EACH ROW EXECUTE FUNCTION "
                        + "fail_third();")
            } else {
                try $0.executeScript(
                    "CREATE TRIGGER fail_third BEFORE INSERT ON spent_tokens WHEN NEW.token_hash = X'\(third)' "
                        + "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;")
            }
        }
        let outcomes = spender.spend(raw).map { result -> String in
            switch result {
            case .success: "spent"
            case .failure(let error): "\(error.status.code) \(error.code)"
            }
        }
        #expect(outcomes == Array(repeating: "503 storage", count: 4))
        #expect(try fixture.count("spent_tokens") == 0)
        try fixture.database.transaction {
            try $0.executeScript(postgres ? "DROP TRIGGER fail_third ON spent_tokens;" : "DROP TRIGGER fail_third;")
        }
        #expect(spender.spend(raw).allSatisfy { if case .success = $0 { true } else { false } })
        #expect(try fixture.count("spent_tokens") == 4)
    }

    @Test func theBucketIsThePhoneIDsAndRefills() async throws {
        let fixture = try Fixture { $0.approvalTokensPerHour = 8 }
        let client = try await fixture.tokenClient()
        let cert = try await fixture.phoneCert()
        #expect(try await fixture.approvalTokens(client, cert: cert).0.status == .ok)
        #expect(try await fixture.approvalTokens(client, cert: cert).0.status == .ok)
        let exhausted = try await fixture.approvalTokens(client, cert: cert).0
        #expect(exhausted.status == .tooManyRequests)
        #expect(exhausted.headers["Retry-After"] != nil)
        // Another number has its own bucket; a new cert for the same number does not reset it.
        let other = try await fixture.phoneCert(for: "+442079460958")
        #expect(try await fixture.approvalTokens(client, cert: other).0.status == .ok)
        let again = try await fixture.phoneCert()
        #expect(try await fixture.approvalTokens(client, cert: again).0.status == .tooManyRequests)
        fixture.clock.advance(by: 1800)  // half an hour refills half the bucket: one more batch of 4
        #expect(try await fixture.approvalTokens(client, cert: cert).0.status == .ok)
        #expect(try await fixture.approvalTokens(client, cert: cert).0.status == .tooManyRequests)
    }

    @Test func withoutAPinnedKeyThePreSessionMintRefuses() async throws {
        let fixture = try Fixture(services: [.credential], pinned: false)
        let keys = await fixture.get("/v1/tokens/keys")
        let list = try KeyList(
            encoded: try #require((keys.json["key_list"] as? String).flatMap(Data.init(base64URLEncoded:))))
        let client = try TokenClient(publicKey: list.entries[0].publicKey, keyList: list, now: fixture.clock.now)
        let cert = try PhoneOwnershipCert(
            phoneID: Data(count: 32), issuedAt: fixture.clock.now, expiresAt: fixture.clock.now + 60,
            signedBy: fixture.keys.phoneVerify)
        let (response, tokens) = try await fixture.approvalTokens(client, cert: cert.rawRepresentation)
        #expect(response.status == .serviceUnavailable)
        #expect(response.errorCode == "phone_verify_key_not_pinned")
        #expect(tokens.isEmpty)
    }

    @Test func aPerUserKeyIsCaughtAgainstTheLog() async throws {
        let fixture = try Fixture()
        let honest = try await fixture.tokenClient()  // the shared key's list is logged, and it mints
        let served = await fixture.get("/v1/tokens/keys")
        let logged = try #require((served.json["key_list"] as? String).flatMap(Data.init(base64URLEncoded:)))
        // A misbehaving credential-svc hands this device a key of its own, with a list naming it (alone or beside
        // the shared key), or the real list with the rogue key's id: the mint refuses each, against the log.
        let rogue = VOPRF.PrivateKey()
        let rogueEntry = try KeyList.Entry(publicKey: rogue.publicKey, notBefore: 0, notAfter: 4_102_444_800)
        let sharedEntries = try KeyList(encoded: logged).entries
        for list in [
            try KeyList(epoch: 1, entries: [rogueEntry]).encoded,
            try KeyList(epoch: 1, entries: sharedEntries + [rogueEntry]).encoded, logged,
        ] {
            do {
                _ = try await TokenClient(
                    tokenKeyID: rogue.publicKey.tokenKeyID, servedKeyList: list, verifier: fixture.keyListVerifier(),
                    now: fixture.clock.now)
                Issue.record("a per-user key was accepted")
            } catch let error as PrivacyPassError {
                #expect(error.code == .keyNotInList)
            }
        }
        #expect(honest.tokenKeyID != rogue.publicKey.tokenKeyID)
    }

    @Test func enrolledDevicesMintWithTheirSessionWithinTheAccountsBudget() async throws {
        let fixture = try Fixture { $0.accountTokensPerHour = 20 }
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        let client = try await fixture.tokenClient()
        func mint(_ count: Int, token: String?) async throws -> HTTPResponse {
            let (request, _) = try client.begin(count: count)
            return await fixture.post(
                "/v1/tokens", object: ["token_request": request.base64URLEncodedString()], token: token)
        }
        #expect(try await mint(16, token: phone.session).status == .ok)
        #expect(try await mint(4, token: phone.session).status == .ok)
        #expect(try await mint(1, token: phone.session).status == .tooManyRequests)
        #expect(try await mint(1, token: nil).status == .unauthorized)
        #expect(try await mint(17, token: phone.session).status == .badRequest)
    }

    @Test func malformedRequestsAreClear400s() async throws {
        let fixture = try Fixture()
        let client = try await fixture.tokenClient()
        let cert = try await fixture.phoneCert().base64URLEncodedString()
        let (three, _) = try client.begin(count: 3)
        var wrongKey = try client.begin(count: 4).request
        wrongKey[5] ^= 1
        for body: [String: Any] in [
            [:], ["phone_cert": cert], ["phone_cert": cert, "token_request": "AAAA"],
            ["phone_cert": cert, "token_request": three.base64URLEncodedString()],
            ["phone_cert": cert, "token_request": wrongKey.base64URLEncodedString()],
            ["phone_cert": 1, "token_request": three.base64URLEncodedString()],
        ] {
            let response = await fixture.post("/v1/approval-tokens/challenge", object: body)
            #expect(response.status == .badRequest, "\(body): \(response.bodyText)")
        }
        let badCert = await fixture.post(
            "/v1/approval-tokens/challenge",
            object: [
                "phone_cert": Data(count: 3430).base64URLEncodedString(),
                "token_request": three.base64URLEncodedString(),
            ])
        #expect(badCert.status == .unauthorized)
    }
}

@Suite("credential-svc tokens spent by blob-svc")
struct TokenSpendingTests {
    @Test func aBlobUploadSpendsARealTokenOnce() async throws {
        let fixture = try Fixture()
        let client = try await fixture.tokenClient()
        let (_, tokens) = try await fixture.approvalTokens(client, cert: try await fixture.phoneCert())
        let token = try #require(tokens.first).rawRepresentation.base64URLEncodedString()
        func upload() async -> HTTPResponse {
            await fixture.router.test(
                .post, "/v1/blobs",
                headers: ["Content-Type": "application/x-pixie-sync", "Authorization": "PrivateToken token=\(token)"],
                body: Data("sealed snapshot".utf8))
        }
        let first = await upload()
        #expect(first.status == .created, "\(first.bodyText)")
        let second = await upload()
        #expect(second.status == .conflict)
        #expect(second.errorCode == "token_spent")
    }

    @Test("a sibling pays a whole-store upload with upload tokens, unlinked from its account; a number's tokens cannot")
    func uploadTokensPayUnlinkably() async throws {
        // Small prices, so small bodies show the budgets: a send token buys 100 bytes, an upload token 1,000.
        let fixture = try Fixture {
            $0.blobBytesPerToken = 100
            $0.blobBytesPerUploadToken = 1000
        }
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        _ = try await fixture.application.reconcileTransparency()
        // The upload class's key list is logged under a label of its own, and checked there.
        let served = await fixture.get("/v1/tokens/keys?class=upload")
        let list = try #require((served.json["key_list"] as? String).flatMap(Data.init(base64URLEncoded:)))
        let keyID = try #require((served.json["token_key_id"] as? String).flatMap(Data.init(base64URLEncoded:)))
        #expect(
            keyID
                != (await fixture.get("/v1/tokens/keys").json["token_key_id"] as? String).flatMap {
                    Data(base64URLEncoded: $0)
                })
        await #expect(throws: PrivacyPassError.self) {
            _ = try await TokenClient(
                tokenKeyID: keyID, servedKeyList: list, verifier: fixture.keyListVerifier(), now: fixture.clock.now)
        }
        let client = try await TokenClient(
            tokenKeyID: keyID, servedKeyList: list,
            verifier: UploadKeyListVerifier(bindings: fixture.keyListVerifier()),
            now: fixture.clock.now)
        func mintUploadTokens(_ count: Int, session: String?) async throws -> (HTTPResponse, [Token]) {
            let (request, pending) = try client.begin(count: count)
            let response = await fixture.post(
                "/v1/tokens", object: ["token_request": request.base64URLEncodedString(), "class": "upload"],
                token: session)
            guard response.status == .ok else { return (response, []) }
            let bytes = try #require(
                (response.json["token_response"] as? String).flatMap(Data.init(base64URLEncoded:)))
            return (response, try client.finish(bytes, pending: pending))
        }
        // Only a session mints them.
        #expect(try await mintUploadTokens(2, session: nil).0.status == .unauthorized)
        let (minted, uploadTokens) = try await mintUploadTokens(3, session: phone.session)
        #expect(minted.status == .ok, "\(minted.bodyText)")
        func upload(_ tokens: [Token], bytes: Int) async -> HTTPResponse {
            let header = tokens.map { "token=\($0.rawRepresentation.base64URLEncodedString())" }
                .joined(separator: ", ")
            return await fixture.router.test(
                .post, "/v1/blobs",
                headers: ["Content-Type": "application/x-pixie-sync", "Authorization": "PrivateToken \(header)"],
                body: Data(repeating: 7, count: bytes))
        }
        // A stranger with the number's tokens (the pre-session mint gives send tokens only) cannot buy the bytes.
        let (_, numberTokens) = try await fixture.approvalTokens(
            try await fixture.tokenClient(), cert: try await fixture.phoneCert())
        let stranger = await upload(numberTokens, bytes: 1500)
        #expect(stranger.status == .tooManyRequests, "\(stranger.bodyText)")
        // Two upload tokens buy it, with no session: nothing in the store ties the blob to the account.
        let paid = await upload(Array(uploadTokens.prefix(2)), bytes: 1500)
        #expect(paid.status == .created, "\(paid.bodyText)")
        #expect(try fixture.database.query("SELECT account_id FROM blob_budgets", []).isEmpty)
        // An upload token pays blob-svc only: the relay's spender does not know its key.
        let relaySpender = try CredentialTokenSpender(
            keys: fixture.keys, database: fixture.database, clock: fixture.clock.clock, logger: .discard)
        let refused = relaySpender.spend([try #require(uploadTokens.last).rawRepresentation])
        #expect(throws: HTTPError.self) { try refused[0].get() }
    }
}
