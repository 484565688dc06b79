import Foundation
import HTTPServer
@_spi(Testing) import PixieServer
import PixieWire
import SiblingsCrypto
import Testing

@Suite("phone-verify-svc")
struct PhoneVerifyServiceTests {
    let number = "+14155550123"

    func start(_ fixture: Fixture, _ number: String? = nil) async -> HTTPResponse {
        await fixture.post("/v1/phone/verifications", object: ["phone_number": number ?? self.number])
    }

    func check(_ fixture: Fixture, _ id: String, _ code: String) async -> HTTPResponse {
        await fixture.post("/v1/phone/verifications/check", object: ["verification_id": id, "code": code])
    }

    /// A POST that arrives from the client address `address`.
    func post(
        _ fixture: Fixture, _ path: String, from address: String, _ object: [String: String]
    ) async
        -> HTTPResponse
    {
        let body = try! JSONSerialization.data(withJSONObject: object)
        return await fixture.router.test(
            .post, path, headers: ["Content-Type": "application/json"], body: body, remoteAddress: address)
    }

    @Test func aVerifiedNumberGetsACertForItsPhoneID() async throws {
        let fixture = try Fixture()
        let started = await start(fixture, "+1 (415) 555-0123")
        #expect(started.status == .created)
        #expect(started.json["code_length"] as? Int == 6)
        #expect(started.json["attempts_allowed"] as? Int == 5)
        let id = try #require(started.json["verification_id"] as? String)
        let code = try #require(fixture.sms.lastCode(to: number))
        let checked = await check(fixture, id, code)
        #expect(checked.status == .ok)
        let raw = try #require((checked.json["phone_cert"] as? String).flatMap(Data.init(base64URLEncoded:)))
        let cert = try PhoneOwnershipCert.Verifier(pinnedKeys: [fixture.keys.phoneVerify.publicKey])
            .verify(raw, now: fixture.clock.now)
        let expectedID = PhoneVerifyService.phoneID(of: try PhoneNumber(number), key: fixture.keys.phoneIDKey)
        #expect(cert.phoneID == expectedID)
        #expect(cert.expiresAt == fixture.clock.now + 86_400)
        // The number itself is stored nowhere.
        let rows = try fixture.database.query("SELECT * FROM phone_verifications", [])
        #expect(rows.count == 1)
        #expect(!String(describing: rows).contains("4155550123"))
    }

    @Test func aCodeWorksOnce() async throws {
        let fixture = try Fixture()
        let id = try #require(await start(fixture).json["verification_id"] as? String)
        let code = try #require(fixture.sms.lastCode(to: number))
        #expect(await check(fixture, id, code).status == .ok)
        let replay = await check(fixture, id, code)
        #expect(replay.status == .conflict)
        #expect(replay.errorCode == "code_already_used")
    }

    @Test func wrongCodesCountAndTheFifthLocks() async throws {
        let fixture = try Fixture()
        let id = try #require(await start(fixture).json["verification_id"] as? String)
        let code = try #require(fixture.sms.lastCode(to: number))
        let wrong = code == "000000" ? "111111" : "000000"
        for remaining in [4, 3, 2, 1] {
            let response = await check(fixture, id, wrong)
            #expect(response.status == .forbidden)
            #expect(response.errorCode == "wrong_code")
            #expect((response.json["reason"] as? String)?.contains("\(remaining) attempt") == true)
        }
        #expect(await check(fixture, id, wrong).status == .forbidden)
        // Five attempts are spent: even the right code is refused now.
        let locked = await check(fixture, id, code)
        #expect(locked.status == .tooManyRequests)
        #expect(locked.errorCode == "too_many_attempts")
    }

    @Test func aCodeExpiresAfterTenMinutes() async throws {
        let fixture = try Fixture()
        let id = try #require(await start(fixture).json["verification_id"] as? String)
        let code = try #require(fixture.sms.lastCode(to: number))
        fixture.clock.advance(by: 600)
        let expired = await check(fixture, id, code)
        #expect(expired.status.code == 410)
        #expect(expired.errorCode == "code_expired")
    }

    @Test func aNumberGetsFiveCodesAnHour() async throws {
        let fixture = try Fixture()
        #expect(await start(fixture).status == .created)
        fixture.clock.advance(by: 600)
        for _ in 0..<4 { #expect(await start(fixture).status == .created) }
        let limited = await start(fixture)
        #expect(limited.status == .tooManyRequests)
        #expect(limited.errorCode == "rate_limited")
        // Retry-After is when the oldest code of the hour leaves it: 3600 - 600 seconds from now.
        #expect(limited.headers["Retry-After"] == "3000")
        #expect(fixture.sms.messages.count == 5)
        // Another number is not affected; once the oldest code has left the hour, this one may try again.
        #expect(await start(fixture, "+442079460958").status == .created)
        fixture.clock.advance(by: 2999)
        #expect(await start(fixture).status == .tooManyRequests)
        fixture.clock.advance(by: 1)
        #expect(await start(fixture).status == .created)
    }

    /// Issue 14: "+1415555\u{200D}0123" used to get 201, a phone_id and a budget of codes of its own. Every
    /// spelling that is not ASCII digits is now a 400 that sends nothing, so none dodges the per-number limit.
    @Test func lookalikeSpellingsCannotDodgeThePerNumberLimit() async throws {
        let fixture = try Fixture()
        for _ in 0..<5 {
            #expect(await start(fixture).status == .created)
            fixture.clock.advance(by: 600)
        }
        #expect(await start(fixture).status == .tooManyRequests)
        for variant in ["+1415555\u{200D}0123", "+14155550123\u{0301}", "+\u{FF11}4155550123", "+1\u{0664}155550123"] {
            let response = await start(fixture, variant)
            #expect(response.status.code == 400, "\(response.status) \(response.bodyText)")
            #expect(response.errorCode != nil)
        }
        #expect(fixture.sms.messages.count == 5)
    }

    @Test func aClientIsRateLimited() async throws {
        let fixture = try Fixture()
        var statuses: [Int] = []
        for index in 0..<70 {
            statuses.append(await start(fixture, "+1415555\(String(format: "%04d", index))").status.code)
        }
        #expect(statuses.prefix(60).allSatisfy { $0 == 201 })
        #expect(statuses.suffix(10).allSatisfy { $0 == 429 })
        fixture.clock.advance(by: 60)
        #expect(await start(fixture, "+14155559999").status == .created)
    }

    @Test func eachClientAddressHasItsOwnBucketForCodes() async throws {
        let fixture = try Fixture()
        func start(from address: String, _ index: Int) async -> HTTPResponse {
            await post(
                fixture, "/v1/phone/verifications", from: address,
                ["phone_number": "+1415555\(String(format: "%04d", index))"])
        }
        for index in 0..<60 {
            let response = await start(from: "192.0.2.1", index)
            #expect(response.status == .created, "\(index): \(response.bodyText)")
        }
        let limited = await start(from: "192.0.2.1", 60)
        #expect(limited.status == .tooManyRequests)
        #expect(limited.errorCode == "rate_limited")
        #expect(limited.headers["Retry-After"] != nil)
        // Another address, IPv4 or IPv6, and a request with no address at all, each have a full bucket.
        for (offset, address) in ["192.0.2.2", "2001:db8::1"].enumerated() {
            for index in 0..<60 {
                #expect(await start(from: address, 100 * (offset + 1) + index).status == .created, "\(address)")
            }
            #expect(await start(from: address, 999).status == .tooManyRequests, "\(address)")
        }
        #expect(await self.start(fixture, "+14155559999").status == .created)
        // The first address is still over its limit until its bucket refills.
        #expect(await start(from: "192.0.2.1", 61).status == .tooManyRequests)
        #expect(fixture.sms.messages.count == 181)
        fixture.clock.advance(by: 60)
        #expect(await start(from: "192.0.2.1", 61).status == .created)
    }

    /// Behind the operator's proxy (trusted_proxies), the client is the rightmost X-Forwarded-For address the
    /// proxy did not write itself; from any other peer the header is ignored, so nobody picks their own bucket.
    @Test func behindATrustedProxyEachForwardedClientHasItsOwnBucket() async throws {
        let fixture = try Fixture {
            $0.trustedProxies = ["127.0.0.1", "::1"]
            $0.clientRequestsPerMinute = 3
        }
        var numbers = 0
        func start(from peer: String, forwardedFor: String?) async -> HTTPResponse {
            numbers += 1
            var headers: HTTPHeaders = ["Content-Type": "application/json"]
            if let forwardedFor { headers["X-Forwarded-For"] = forwardedFor }
            let body = try! JSONSerialization.data(
                withJSONObject: ["phone_number": "+1415555\(String(format: "%04d", numbers))"])
            return await fixture.router.test(
                .post, "/v1/phone/verifications", headers: headers, body: body, remoteAddress: peer)
        }
        // Two clients through the proxy: three each. What a client wrote left of its own address is ignored.
        for _ in 0..<3 {
            #expect(await start(from: "127.0.0.1", forwardedFor: "203.0.113.7").status == .created)
            #expect(await start(from: "::1", forwardedFor: "1.2.3.4, 203.0.113.8, 127.0.0.1").status == .created)
        }
        #expect(await start(from: "127.0.0.1", forwardedFor: "203.0.113.7").status == .tooManyRequests)
        #expect(await start(from: "127.0.0.1", forwardedFor: "9.9.9.9, 203.0.113.8").status == .tooManyRequests)
        // A peer that is not a trusted proxy is counted as itself, whatever it claims.
        for claimed in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
            #expect(await start(from: "192.0.2.50", forwardedFor: claimed).status == .created)
        }
        #expect(await start(from: "192.0.2.50", forwardedFor: "198.51.100.4").status == .tooManyRequests)
        // A header that names no address leaves the proxy's own bucket in charge.
        #expect(await start(from: "127.0.0.1", forwardedFor: "unknown").status == .created)

        var configuration = PixieConfiguration()
        try configuration.set("trusted_proxies", "127.0.0.1, ::1", source: "--trusted-proxies")
        #expect(configuration.trustedProxies == ["127.0.0.1", "::1"])
        #expect(throws: ServerError.self) { try configuration.set("trusted_proxies", "nginx", source: "test") }
    }

    @Test func checksAreRateLimitedPerClientToo() async throws {
        let fixture = try Fixture()
        let started = await post(fixture, "/v1/phone/verifications", from: "198.51.100.7", ["phone_number": number])
        let id = try #require(started.json["verification_id"] as? String)
        let code = try #require(fixture.sms.lastCode(to: number))
        func check(from address: String, _ id: String, _ code: String) async -> HTTPResponse {
            await post(fixture, "/v1/phone/verifications/check", from: address, ["verification_id": id, "code": code])
        }
        // A guesser spends its whole minute (the start and the checks share one bucket per address)...
        for index in 0..<60 {
            let response = await check(from: "203.0.113.9", "guess-\(index)", "123456")
            #expect(response.status == .notFound, "\(index): \(response.bodyText)")
        }
        let over = await check(from: "203.0.113.9", id, code)
        #expect(over.status == .tooManyRequests)
        #expect(over.errorCode == "rate_limited")
        #expect(over.headers["Retry-After"] != nil)
        #expect(
            await post(fixture, "/v1/phone/verifications", from: "203.0.113.9", ["phone_number": number]).status
                == .tooManyRequests)
        // ...and a refused check counts no attempt: the owner, from its own address, still gets its cert.
        let owner = await check(from: "198.51.100.7", id, code)
        #expect(owner.status == .ok, "\(owner.bodyText)")
        #expect(owner.json["phone_cert"] is String)
    }

    @Test func aFailedSMSLeavesNothingBehind() async throws {
        let fixture = try Fixture()
        fixture.sms.failing.withLock { $0 = true }
        let response = await start(fixture)
        #expect(response.status.code == 502)
        #expect(response.errorCode == "sms_failed")
        #expect(try fixture.count("phone_verifications") == 0)
    }

    @Test func malformedRequestsAreClear4xxAndStoreNothing() async throws {
        let fixture = try Fixture()
        let bodies: [(String, String)] = [
            ("/v1/phone/verifications", ""),
            ("/v1/phone/verifications", "not json"),
            ("/v1/phone/verifications", "[]"),
            ("/v1/phone/verifications", "{}"),
            ("/v1/phone/verifications", #"{"phone_number": 14155550123}"#),
            ("/v1/phone/verifications", #"{"phone_number": null}"#),
            ("/v1/phone/verifications", #"{"phone_number": "14155550123"}"#),
            ("/v1/phone/verifications", #"{"phone_number": "+1415555012x"}"#),
            ("/v1/phone/verifications", #"{"phone_number": "+1"}"#),
            ("/v1/phone/verifications/check", "{}"),
            ("/v1/phone/verifications/check", #"{"verification_id": "x"}"#),
            ("/v1/phone/verifications/check", #"{"verification_id": "x", "code": "12345"}"#),
            ("/v1/phone/verifications/check", #"{"verification_id": "x", "code": "１２３４５６"}"#),
            ("/v1/phone/verifications/check", #"{"verification_id": "x", "code": 123456}"#),
            ("/v1/phone/verifications/check", #"{"verification_id": "", "code": "123456"}"#),
        ]
        for (path, body) in bodies {
            let response = await fixture.post(path, body)
            #expect(response.status.code == 400, "\(path) \(body): \(response.status) \(response.bodyText)")
            #expect(response.errorCode != nil)
            #expect((response.json["reason"] as? String)?.isEmpty == false)
        }
        let unknown = await check(fixture, "no-such-verification", "123456")
        #expect(unknown.status == .notFound)
        #expect(try fixture.count("phone_verifications") == 0)
        #expect(fixture.sms.messages.isEmpty)
    }

    @Test func codesAreUniformSixDigitStrings() {
        struct Counter: SecureRandomSource {
            func fill(_ buffer: UnsafeMutableRawBufferPointer) {
                for index in buffer.indices { buffer[index] = 0 }
            }
        }
        #expect(PhoneVerifyService.randomCode(Counter()) == "000000")
        var seen = Set<String>()
        for _ in 0..<200 {
            let code = PhoneVerifyService.randomCode(SystemRandom())
            #expect(code.count == 6 && code.allSatisfy(\.isNumber))
            seen.insert(code)
        }
        #expect(seen.count > 190)
    }
}
