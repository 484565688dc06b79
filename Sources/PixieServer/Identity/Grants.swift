import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage
import Transparency
import TransparencyLog

/// Grants (docs/pixie-protocol.md, "Grants"): minting one on a sibling, and redeeming it (or its six-digit code) to
/// enroll a new device in the account.
extension IdentityService {
    // MARK: - Grants

    /// POST /v1/auth/devices/grant: a row in recovery_grants with a three-minute expiry, single use, minted
    /// by an enrolled device for its own account, with its scope: `add` (the default, and what the sign-in
    /// approval mints: "nothing here is a revocation") or `replace_all`, which only a device whose person is
    /// present may mint (a fresh assertion of its own passkey), since redeeming it evicts every other device.
    func mintGrant(_ request: HTTPRequest) throws -> HTTPResponse {
        let session = try sessions.authenticate(request)
        let body =
            request.body.isEmpty
            ? IdentityAPI.GrantRequest() : try request.decode(as: IdentityAPI.GrantRequest.self)
        let kind = body.kind ?? .token
        let scope = body.scope ?? .add
        if scope == .replaceAll {
            guard let passkey = body.passkey else {
                throw HTTPError(
                    .forbidden, .passkeyRequired,
                    "a replace_all grant removes every other device: send passkey, an assertion of this device's "
                        + "passkey over a challenge with purpose \"replace_all\"")
            }
            let challenge = try consumeChallenge(passkey.challengeID, purpose: .replaceAll)
            _ = try store(logger) {
                try database.transaction { transaction in
                    try verifyAssertion(passkey.credential, challenge: challenge, of: session.deviceID, in: transaction)
                }
            }
        }
        let now = clock.now().unixSeconds
        let expiresAt = now + Int64(configuration.grantLifetime)
        let minted: String? = try store(logger) {
            try database.transaction { transaction in
                // The minter must still be listed when its grant is written (a removal may have committed since its
                // session was checked).
                if let removedAt = try transaction.queryOne(
                    "SELECT removed_at FROM devices WHERE device_id = ?", [.text(session.deviceID)]
                )?.optionalInt64("removed_at") {
                    var error = HTTPError(
                        .unauthorized, .deviceRemoved,
                        "this device was removed from the account while the grant was being made; it can mint none")
                    error.details = ["removed_at": .integer(removedAt)]
                    throw error
                }
                // Six digits repeat: a spent or expired code of this account with the same digits gives way (its
                // row is dead), and one still live makes this mint draw again. Tokens never collide.
                for _ in 0..<16 {
                    let grant =
                        kind == .token
                        ? random.bytes(count: 32).base64URLEncodedString() : PhoneVerifyService.randomCode(random)
                    let hash = Self.grantHash(grant, kind: kind, accountID: session.accountID)
                    if let existing = try transaction.queryOne(
                        "SELECT used_at, expires_at FROM recovery_grants WHERE grant_hash = ?", [.blob(hash)])
                    {
                        if try existing.optionalInt64("used_at") == nil, try existing.int64("expires_at") > now {
                            continue
                        }
                        _ = try transaction.execute("DELETE FROM recovery_grants WHERE grant_hash = ?", [.blob(hash)])
                    }
                    _ = try transaction.execute(
                        "INSERT INTO recovery_grants "
                            + "(grant_hash, account_id, issued_by, kind, scope, created_at, expires_at) "
                            + "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [
                            .blob(hash), .text(session.accountID), .text(session.deviceID), .text(kind.rawValue),
                            .text(scope.rawValue), .integer(now), .integer(expiresAt),
                        ])
                    return grant
                }
                return nil
            }
        }
        guard let grant = minted else {
            throw HTTPError(
                .serviceUnavailable, .rateLimited,
                "too many codes are live for this account; try again in a few minutes")
        }
        event(scope == .replaceAll ? "grant_minted_replace_all" : "grant_minted")
        return try .json(
            IdentityAPI.GrantResponse(grant: grant, kind: kind, scope: scope, expiresAt: expiresAt), status: .created)
    }

    /// A token grant is found by its hash alone; a code grant only within the account of the cert that comes
    /// with it (six digits are not unique across accounts).
    /// The answer to any code, right or wrong, once an account's live codes have had too many wrong tries.
    static let tooManyCodeAttempts = HTTPError(
        .tooManyRequests, .tooManyAttempts, "too many wrong codes; approve again")

    static func grantHash(_ grant: String, kind: IdentityAPI.GrantKind, accountID: String) -> Data {
        let input = kind == .token ? "pixie/grant/token/v1\0" + grant : "pixie/grant/code/v1\0\(accountID)\0\(grant)"
        return Data(SHA256.hash(data: Data(input.utf8)))
    }

    // MARK: - Register with grant

    /// The register-with-grant passkey enrollment: a grant (or a six-digit code with the number's cert)
    /// and a passkey registration enroll a new device in the grant's account; `revoke_others` (false on the
    /// sign-in path) removes every other device and ends their sessions.
    func registerWithGrant(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decode(as: IdentityAPI.RegisterRequest.self)
        try clientLimiter.admit(request)
        try validate(body.device)
        let lookup: (hash: Data, accountID: String?)
        switch (body.grant, body.code, body.phoneCert) {
        case (let grant?, nil, nil):
            guard let bytes = Data(base64URLEncoded: grant), bytes.count == 32 else {
                throw HTTPError(.badRequest, .invalidField, "grant is the 32-byte token the approving device sent")
            }
            lookup = (Self.grantHash(grant, kind: .token, accountID: ""), nil)
        case (nil, let code?, let certBytes?):
            guard code.count == 6, code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw HTTPError(.badRequest, .invalidCode, "code is the six digits the approving device shows")
            }
            let cert = try verify(certBytes)
            let account = try store(logger) {
                try database.queryOne("SELECT account_id FROM accounts WHERE phone_id = ?", [.blob(cert.phoneID)])
            }
            guard let accountID = try account.map({ row in try store(logger) { try row.string("account_id") } })
            else {
                throw HTTPError(.notFound, .noAccount, "no account is registered for this number")
            }
            lookup = (Self.grantHash(code, kind: .code, accountID: accountID), accountID)
        default:
            throw HTTPError(
                .badRequest, .invalidField, "send either grant, or code together with phone_cert (and not both)")
        }
        let deviceID = random.bytes(count: 16).base64URLEncodedString()
        let now = clock.now().unixSeconds
        let challenge = try consumeChallenge(body.passkey.challengeID, purpose: .register)
        // A redemption changes the roster, so it takes the account's removal lock (a removal counts the devices
        // that stay, one bundle each: a device enrolled between that count and the removal's commit would have
        // none), and under it sees what a removal committed, its voided grants included.
        let lockedAccount =
            try lookup.accountID
            ?? store(logger) {
                try database.queryOne(
                    "SELECT account_id FROM recovery_grants WHERE grant_hash = ?", [.blob(lookup.hash)])?
                    .string("account_id")
            }
        let outcome: Result<IdentityAPI.EnrolledResponse, HTTPError> = try store(logger) {
            try database.transaction(exclusive: Self.rosterLock(lockedAccount ?? "unknown-grant")) { transaction in
                guard
                    let grant = try transaction.queryOne(
                        "SELECT g.account_id, g.issued_by, g.expires_at, g.used_at, g.failed_attempts, g.scope, "
                            + "d.removed_at AS issuer_removed_at FROM recovery_grants g "
                            + "LEFT JOIN devices d ON d.device_id = g.issued_by WHERE g.grant_hash = ?",
                        [.blob(lookup.hash)])
                else {
                    if let accountID = lookup.accountID {
                        // Past the limit a wrong code is answered as the right one is (429), so the answers do
                        // not tell which code was real (issue 14).
                        let most = try transaction.queryOne(
                            "SELECT MAX(failed_attempts) AS most FROM recovery_grants "
                                + "WHERE account_id = ? AND kind = 'code' AND used_at IS NULL AND expires_at > ?",
                            [.text(accountID), .integer(now)])
                        if try most?.optionalInt64("most") ?? 0 >= Int64(configuration.codeAttemptsAllowed) {
                            return .failure(Self.tooManyCodeAttempts)
                        }
                        // A wrong code counts against every live code of the account; past the limit they are void.
                        _ = try transaction.execute(
                            "UPDATE recovery_grants SET failed_attempts = failed_attempts + 1 "
                                + "WHERE account_id = ? AND kind = 'code' AND used_at IS NULL",
                            [.text(accountID)])
                        return .failure(
                            HTTPError(.forbidden, .grantInvalid, "the code is wrong; check it on the other device"))
                    }
                    return .failure(HTTPError(.forbidden, .grantInvalid, "the grant is not known"))
                }
                if try grant.optionalInt64("used_at") != nil {
                    return .failure(HTTPError(.conflict, .grantUsed, "the grant was already used; ask for a new one"))
                }
                if try grant.int64("expires_at") <= now {
                    return .failure(HTTPError(.gone, .grantExpired, "the grant has expired; approve again"))
                }
                if try grant.int64("failed_attempts") >= Int64(configuration.codeAttemptsAllowed) {
                    return .failure(Self.tooManyCodeAttempts)
                }
                // A grant outlives its minter only as long as the minter is listed: one minted in the instant a
                // removal committed (its session checked before, its row written after) must not let the removed
                // device, or its thief, back in.
                if try grant.optionalInt64("issuer_removed_at") != nil {
                    return .failure(
                        HTTPError(
                            .forbidden, .grantInvalid,
                            "the device that made this grant was removed from the account; approve from another "
                                + "device"))
                }
                // The redeemer does not choose the scope: the minting device did. Refused before anything is
                // spent, so the same grant still adds the device without revoke_others.
                if body.revokeOthers, try grant.string("scope") != IdentityAPI.GrantScope.replaceAll.rawValue {
                    return .failure(
                        HTTPError(
                            .forbidden, .grantScope,
                            "this grant adds a device beside the others; revoke_others needs a replace_all grant "
                                + "minted by a device of the account with its passkey"))
                }
                let accountID = try grant.string("account_id")
                guard accountID == lockedAccount else {
                    return .failure(HTTPError(.forbidden, .grantInvalid, "the grant is not known"))
                }
                let credential = try verifyRegistration(body.passkey.credential, challenge: challenge)
                _ = try transaction.execute(
                    "UPDATE recovery_grants SET used_at = ? WHERE grant_hash = ?", [.integer(now), .blob(lookup.hash)])
                // The roster changes in this transaction: its binding is owed to the log until published.
                _ = try transaction.execute(
                    "UPDATE accounts SET kt_dirty = kt_dirty + 1 WHERE account_id = ?", [.text(accountID)])
                if body.revokeOthers {
                    _ = try transaction.execute(
                        "UPDATE sessions SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL",
                        [.integer(now), .text(accountID)])
                    // Grants the removed devices minted and nobody redeemed yet die with them.
                    _ = try transaction.execute(
                        "UPDATE recovery_grants SET expires_at = ? "
                            + "WHERE account_id = ? AND used_at IS NULL AND expires_at > ?",
                        [.integer(now), .text(accountID), .integer(now)])
                    _ = try transaction.execute(
                        "UPDATE devices SET removed_at = ? WHERE account_id = ? AND removed_at IS NULL",
                        [.integer(now), .text(accountID)])
                    _ = try transaction.execute("DELETE FROM passkeys WHERE account_id = ?", [.text(accountID)])
                }
                try enroll(
                    device: body.device, deviceID: deviceID, accountID: accountID, credential: credential,
                    addedBy: try grant.string("issued_by"), in: transaction)
                let (token, expiresAt) = try sessions.create(
                    accountID: accountID, deviceID: deviceID, in: transaction)
                return .success(
                    IdentityAPI.EnrolledResponse(
                        accountID: accountID, deviceID: deviceID, sessionToken: token,
                        sessionExpiresAt: expiresAt.unixSeconds))
            }
        }
        // A refusal is returned rather than thrown out of the transaction, so a wrong code's count is kept.
        switch outcome {
        case .failure(let error):
            event("grant_refused")
            throw error
        case .success(var response):
            do {
                try await transparency.publish(accountID: response.accountID)
            } catch {
                // The enrollment stands (its grant is spent); the roster change is logged at the next start-up
                // reconciliation. Devices that check the roster against the log refuse until then (fail closed).
                logger.error("a roster change could not be logged", ["error": "\(error)"])
                throw HTTPError(
                    .serviceUnavailable, .transparencyUnavailable,
                    "the device is enrolled but the transparency log is unavailable; try signing in again shortly")
            }
            response.ktHandle = try store(logger) {
                try database.queryOne(
                    "SELECT kt_handle FROM accounts WHERE account_id = ?", [.text(response.accountID)])?
                    .string("kt_handle")
            }
            event(body.revokeOthers ? "device_enrolled_revoking_others" : "device_enrolled")
            return try .json(response, status: .created)
        }
    }
}
