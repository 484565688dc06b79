import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage

/// phone-verify-svc (000_e422bd9a7c930342.txt): SMS-OTP for a number, then a PhoneOwnershipCert for it.
///
/// - `POST /v1/phone/verifications` `{"phone_number": "+14155550123"}` sends a 6-digit code and answers
///   `201 {"verification_id", "expires_at", "code_length": 6, "attempts_allowed": 5}`.
/// - `POST /v1/phone/verifications/check` `{"verification_id", "code"}` answers
///   `200 {"phone_cert", "phone_id", "expires_at"}` once, for the right code within its lifetime and attempts.
///
/// The number itself is never stored: rows hold its phone_id (a keyed hash) and a MAC of the code.
/// Limits: a code lives 10 minutes and allows 5 attempts (both in the store, so they hold across restarts
/// and instances); a number gets at most `sendsPerNumberPerHour` codes an hour (counted in the store); a
/// client address gets `clientRequestsPerMinute` requests a minute (in memory).
public struct PhoneVerifyService: Sendable {
    public struct Configuration: Sendable {
        public var codeLifetime: TimeInterval = 600
        public var attemptsAllowed = 5
        public var sendsPerNumberPerHour = 5
        public var clientRequestsPerMinute = 60
        /// How long a PhoneOwnershipCert stays valid.
        public var certLifetime: TimeInterval = 86_400

        public init() {}
    }

    public static let codeLength = 6
    static let component = "phone-verify"
    static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE phone_verifications (
                    verification_id TEXT PRIMARY KEY,
                    phone_id BLOB NOT NULL,
                    code_mac BLOB NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    attempts BIGINT NOT NULL DEFAULT 0,
                    completed_at BIGINT
                );
                CREATE INDEX phone_verifications_by_phone ON phone_verifications (phone_id, created_at);
                """)
    ]

    let database: any SQLDatabase
    let keys: ServiceKeys
    let sms: any SMSSender
    let configuration: Configuration
    let clock: PixieClock
    let random: any SecureRandomSource
    let logger: Logger
    let metrics: Metrics
    let clientLimiter: RateLimiter

    public init(
        database: any SQLDatabase, keys: ServiceKeys, sms: any SMSSender, configuration: Configuration = .init(),
        clock: PixieClock = .system, logger: Logger, metrics: Metrics
    ) throws(ServerError) {
        try self.init(
            database: database, keys: keys, sms: sms, configuration: configuration, clock: clock,
            random: SystemRandom(), logger: logger, metrics: metrics)
    }

    /// The same, with `random` for codes, IDs and keys (`@_spi(Testing)`: tests make them deterministic).
    @_spi(Testing)
    public init(
        database: any SQLDatabase, keys: ServiceKeys, sms: any SMSSender, configuration: Configuration = .init(),
        clock: PixieClock = .system, random: any SecureRandomSource, logger: Logger,
        metrics: Metrics
    ) throws(ServerError) {
        do {
            try database.migrate(component: Self.component, migrations: Self.migrations)
        } catch {
            throw ServerError(.storage, "phone-verify's tables could not be migrated: \(error)")
        }
        self.database = database
        self.keys = keys
        self.sms = sms
        self.configuration = configuration
        self.clock = clock
        self.random = random
        self.logger = logger
        self.metrics = metrics
        self.clientLimiter = RateLimiter(
            capacity: configuration.clientRequestsPerMinute, per: 60, clock: clock)
        metrics.describe("pixie_phone_codes_sent_total", type: "counter", help: "SMS codes sent.")
        metrics.describe("pixie_phone_certs_minted_total", type: "counter", help: "PhoneOwnershipCerts minted.")
        metrics.describe(
            "pixie_phone_code_failures_total", type: "counter", help: "Code checks refused, by reason.")
    }

    /// The phone_id of a number: HMAC-SHA-256 under the phone-id key of "pixie/phone-id/v1" ‖ E.164.
    public static func phoneID(of number: PhoneNumber, key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data("pixie/phone-id/v1".utf8) + Data(number.e164.utf8), using: key))
    }

    public func addRoutes(to router: inout Router) {
        router.on(PixieAPI.startPhoneVerification) { request, _ in try await start(request) }
        router.on(PixieAPI.checkPhoneVerification) { request, _ in try await check(request) }
    }

    // MARK: - Start

    func start(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decode(as: PhoneVerifyAPI.StartRequest.self)
        let number: PhoneNumber
        do {
            number = try PhoneNumber(body.phoneNumber)
        } catch {
            throw HTTPError(.badRequest, .invalidPhoneNumber, error.reason)
        }
        try clientLimiter.admit(request)
        let phoneID = Self.phoneID(of: number, key: keys.phoneIDKey)
        let now = clock.now()
        let verificationID = random.bytes(count: 16).base64URLEncodedString()
        let code = Self.randomCode(random)
        // nil once the verification is stored; otherwise the seconds until the oldest code of the last hour
        // leaves the window and another may be sent.
        let refusedFor = try store(logger) { () throws -> Int64? in
            try database.transaction { transaction in
                let recent = try transaction.queryOne(
                    "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM phone_verifications "
                        + "WHERE phone_id = ? AND created_at > ?",
                    [.blob(phoneID), .integer(now.unixSeconds - 3600)])
                if let recent, try recent.int64("n") >= Int64(configuration.sendsPerNumberPerHour) {
                    let oldest = try recent.optionalInt64("oldest") ?? now.unixSeconds
                    return max(1, oldest + 3600 - now.unixSeconds)
                }
                try transaction.execute(
                    "INSERT INTO phone_verifications (verification_id, phone_id, code_mac, created_at, expires_at) "
                        + "VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(verificationID), .blob(phoneID), .blob(codeMAC(verificationID, code)),
                        .integer(now.unixSeconds), .integer(now.unixSeconds + Int64(configuration.codeLifetime)),
                    ])
                return nil
            }
        }
        if let refusedFor {
            metrics.increment("pixie_phone_code_failures_total", labels: ["reason": "number_rate_limited"])
            throw HTTPError(
                .tooManyRequests, .rateLimited,
                "this number has been sent \(configuration.sendsPerNumberPerHour) codes in the last hour; try again "
                    + "in \(refusedFor) seconds",
                headers: ["Retry-After": "\(refusedFor)"])
        }
        do {
            try await sms.send("Your Pixie code is \(code). It expires in 10 minutes.", to: number)
        } catch {
            // Nothing usable is left behind: the row is deleted, so the number may try again at once.
            _ = try? database.execute(
                "DELETE FROM phone_verifications WHERE verification_id = ?", [.text(verificationID)])
            logger.error("could not send an SMS", ["to": number.redacted, "error": error.reason])
            throw HTTPError(.badGateway, .smsFailed, "the code could not be sent; try again in a minute")
        }
        metrics.increment("pixie_phone_codes_sent_total")
        return try .json(
            PhoneVerifyAPI.StartResponse(
                verificationID: verificationID, expiresAt: now.unixSeconds + Int64(configuration.codeLifetime),
                codeLength: Self.codeLength, attemptsAllowed: configuration.attemptsAllowed),
            status: .created)
    }

    // MARK: - Check

    private enum CheckOutcome {
        case notFound, used, expired, locked
        case wrong(remaining: Int)
        case verified(phoneID: Data)
    }

    func check(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decode(as: PhoneVerifyAPI.CheckRequest.self)
        guard body.code.count == Self.codeLength, body.code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw HTTPError(.badRequest, .invalidCode, "the code is \(Self.codeLength) digits, 0 to 9")
        }
        guard !body.verificationID.isEmpty, body.verificationID.count <= 64 else {
            throw HTTPError(.badRequest, .badRequest, "verification_id is the value the start request returned")
        }
        try clientLimiter.admit(request)
        let now = clock.now()
        let mac = codeMAC(body.verificationID, body.code)
        let outcome = try store(logger) { () throws -> CheckOutcome in
            try database.transaction { transaction in
                guard
                    let row = try transaction.queryOne(
                        "SELECT phone_id, code_mac, expires_at, attempts, completed_at FROM phone_verifications "
                            + "WHERE verification_id = ?", [.text(body.verificationID)])
                else { return .notFound }
                if try row.optionalInt64("completed_at") != nil { return .used }
                if try row.int64("expires_at") <= now.unixSeconds { return .expired }
                let attempts = Int(try row.int64("attempts"))
                if attempts >= configuration.attemptsAllowed { return .locked }
                let right = safeCompare(try row.data("code_mac"), mac)
                try transaction.execute(
                    "UPDATE phone_verifications SET attempts = attempts + 1, completed_at = ? WHERE verification_id = ?",
                    [right ? .integer(now.unixSeconds) : .null, .text(body.verificationID)])
                return right
                    ? .verified(phoneID: try row.data("phone_id"))
                    : .wrong(remaining: configuration.attemptsAllowed - attempts - 1)
            }
        }
        switch outcome {
        case .notFound:
            throw refusal(.notFound, .verificationNotFound, "no such verification; start again")
        case .used:
            throw refusal(.conflict, .codeAlreadyUsed, "this code was already used; start a new verification")
        case .expired:
            throw refusal(.gone, .codeExpired, "the code has expired; start a new verification")
        case .locked:
            throw refusal(
                .tooManyRequests, .tooManyAttempts,
                "too many wrong codes for this verification; start a new verification")
        case .wrong(let remaining):
            throw refusal(
                .forbidden, .wrongCode,
                remaining > 0
                    ? "the code is wrong; \(remaining) attempt\(remaining == 1 ? "" : "s") left"
                    : "the code is wrong and no attempts are left; start a new verification")
        case .verified(let phoneID):
            let expiresAt = now.addingTimeInterval(configuration.certLifetime)
            let cert = try PhoneOwnershipCert(
                phoneID: phoneID, issuedAt: now, expiresAt: expiresAt, signedBy: keys.phoneVerify)
            metrics.increment("pixie_phone_certs_minted_total")
            return try .json(
                PhoneVerifyAPI.CheckResponse(
                    phoneCert: Base64URLBytes(cert.rawRepresentation), phoneID: Base64URLBytes(phoneID),
                    expiresAt: cert.expiresAt.unixSeconds))
        }
    }

    private func refusal(_ status: HTTPResponse.Status, _ code: HTTPError.Code, _ reason: String) -> HTTPError {
        metrics.increment("pixie_phone_code_failures_total", labels: ["reason": code.rawValue])
        return HTTPError(status, code, reason)
    }

    // MARK: - Pieces

    /// HMAC-SHA-256 under the phone-id key of "pixie/otp/v1" ‖ verification_id ‖ 0x00 ‖ code: the stored
    /// form of a code, useless without the key.
    private func codeMAC(_ verificationID: String, _ code: String) -> Data {
        Data(
            HMAC<SHA256>.authenticationCode(
                for: Data("pixie/otp/v1".utf8) + Data(verificationID.utf8) + Data([0]) + Data(code.utf8),
                using: keys.phoneIDKey))
    }

    /// A uniformly random 6-digit code (rejection sampling over 32-bit values); `@_spi(Testing)` as a public
    /// entry point.
    @_spi(Testing)
    public static func randomCode(_ random: any SecureRandomSource) -> String {
        let bound: UInt32 = 1_000_000
        let limit = UInt32.max - UInt32.max % bound
        while true {
            let value = random.bytes(count: 4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if value < limit {
                let digits = String(value % bound)
                return String(repeating: "0", count: codeLength - digits.count) + digits
            }
        }
    }
}
