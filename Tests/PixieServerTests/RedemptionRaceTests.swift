import Foundation
import HTTPServer
import PixieServer
import SiblingsCrypto
import SiblingsTestSupport
import Storage
import Testing

/// Everything single-use, redeemed by many requests at the same moment, on each backend: exactly one wins.
///
/// The services read a row and then mark it used inside one transaction. SQLite's single writer serializes
/// those; on PostgreSQL, SERIALIZABLE transactions do (docs/storage.md), and PostgreSQLTests shows the same
/// read-then-write redeeming twice at READ COMMITTED. Each request's body is made first, so that the requests
/// themselves race.
@Suite("Single-use things redeemed at once, on SQLite and on PostgreSQL")
struct RedemptionRaceTests {
    static let racers = 6

    /// The statuses of `bodies` posted to `path` all at once.
    static func race(_ fixture: Fixture, _ path: String, _ bodies: [[String: Any]]) async -> [Int] {
        let encoded = bodies.map { String(decoding: try! JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        return await withTaskGroup(of: Int.self) { group in
            for body in encoded {
                group.addTask { await fixture.post(path, body).status.code }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test("one sign-in grant, redeemed by several new devices at once, enrolls one", arguments: TestDatabase.allCases)
    func grant(backend: TestDatabase) async throws {
        let fixture = try Fixture(store: try backend.make())
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        let grant = try #require(await fixture.grant(from: phone).json["grant"] as? String)
        var bodies: [[String: Any]] = []
        for index in 0..<Self.racers {
            var device = TestDevice(name: "device \(index)")
            bodies.append([
                "grant": grant, "device": device.deviceObject, "passkey": try await fixture.passkey(for: &device),
                "revoke_others": false,
            ])
        }
        let statuses = await Self.race(fixture, "/v1/auth/devices/register", bodies)
        #expect(statuses.filter { $0 == 201 }.count == 1, "\(statuses)")
        #expect(statuses.filter { $0 != 201 }.allSatisfy { $0 == 409 }, "\(statuses)")
        #expect(await fixture.siblings(of: phone).count == 2)
    }

    @Test(
        "one six-digit code grant, typed on several new devices at once, enrolls one", arguments: TestDatabase.allCases)
    func code(backend: TestDatabase) async throws {
        let fixture = try Fixture(store: try backend.make())
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        let code = try #require(await fixture.grant(from: phone, kind: "code").json["grant"] as? String)
        let cert = try await fixture.phoneCert().base64URLEncodedString()
        var bodies: [[String: Any]] = []
        for index in 0..<Self.racers {
            var device = TestDevice(name: "device \(index)")
            bodies.append([
                "code": code, "phone_cert": cert, "device": device.deviceObject,
                "passkey": try await fixture.passkey(for: &device), "revoke_others": false,
            ])
        }
        let statuses = await Self.race(fixture, "/v1/auth/devices/register", bodies)
        #expect(statuses.filter { $0 == 201 }.count == 1, "\(statuses)")
        #expect(await fixture.siblings(of: phone).count == 2)
    }

    @Test("one SMS code, checked by several requests at once, gives one phone cert", arguments: TestDatabase.allCases)
    func verificationCode(backend: TestDatabase) async throws {
        let fixture = try Fixture(store: try backend.make())
        let number = "+14155550123"
        let started = await fixture.post("/v1/phone/verifications", object: ["phone_number": number])
        let id = try #require(started.json["verification_id"] as? String)
        let code = try #require(fixture.sms.lastCode(to: number))
        let body: [String: Any] = ["verification_id": id, "code": code]
        let statuses = await Self.race(
            fixture, "/v1/phone/verifications/check", Array(repeating: body, count: Self.racers))
        #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
    }

    @Test("one rate-limit token, spent by several frames at once, is accepted once", arguments: TestDatabase.allCases)
    func token(backend: TestDatabase) async throws {
        let fixture = try Fixture(store: try backend.make())
        let client = try await fixture.tokenClient()
        let (_, tokens) = try await fixture.approvalTokens(client, cert: try await fixture.phoneCert())
        let spender = try #require(fixture.application.credential?.spender)
        let token = try #require(tokens.first).rawRepresentation
        let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<Self.racers {
                group.addTask {
                    try await Self.onThread {
                        do {
                            try spender.spend(token)
                            return true
                        } catch let error as HTTPError where error.code == .tokenSpent {
                            return false
                        }
                    }
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(accepted.filter { $0 }.count == 1, "\(accepted)")
    }

    /// Runs `body` on a thread of its own, so that the spends block at the database together.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }
}
