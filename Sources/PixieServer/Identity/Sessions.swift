import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage

/// A signed-in device: who a bearer token speaks for.
public struct Session: Sendable, Equatable {
    public let accountID: String
    public let deviceID: String
    public let expiresAt: Date
    /// SHA-256 of the bearer token: the row's key, for revoking this session.
    let tokenHash: Data
}

/// Bearer sessions: 32 random bytes handed to the device once, stored only as SHA-256, with an expiry and a
/// revocation time. The account a request acts on always comes from here, never from the request.
struct Sessions: Sendable {
    let database: any SQLDatabase
    let clock: PixieClock
    let random: any SecureRandomSource
    let lifetime: TimeInterval
    let logger: Logger

    static let migration = """
        CREATE TABLE sessions (
            token_hash BLOB PRIMARY KEY,
            account_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            revoked_at BIGINT
        );
        CREATE INDEX sessions_by_device ON sessions (device_id);
        """

    /// Creates a session inside `transaction`; returns the token, which is never stored.
    func create(accountID: String, deviceID: String, in transaction: any SQLTransaction) throws -> (String, Date) {
        let token = random.bytes(count: 32)
        let now = clock.now()
        let expiresAt = now.addingTimeInterval(lifetime)
        try transaction.execute(
            "INSERT INTO sessions (token_hash, account_id, device_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            [
                .blob(Self.hash(token)), .text(accountID), .text(deviceID), .integer(now.unixSeconds),
                .integer(expiresAt.unixSeconds),
            ])
        return (token.base64URLEncodedString(), Date(timeIntervalSince1970: TimeInterval(expiresAt.unixSeconds)))
    }

    /// The session behind `Authorization: Bearer <token>`, or a 401 that says what is wrong.
    func authenticate(_ request: HTTPRequest) throws -> Session {
        guard let header = request.headers["Authorization"] else {
            throw Self.unauthorized("this endpoint needs a session: send Authorization: Bearer <session token>")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", let token = Data(base64URLEncoded: parts[1]),
            token.count == 32
        else {
            throw Self.unauthorized("the Authorization header must be Bearer and a session token")
        }
        let now = clock.now()
        let tokenHash = Self.hash(token)
        let found = try store(logger) {
            () throws -> (Session, revoked: Bool, removed: (at: Int64, by: String?)?, seen: Int64?)? in
            guard
                let row = try database.queryOne(
                    "SELECT s.account_id, s.device_id, s.expires_at, s.revoked_at, d.removed_at, d.last_seen_at, "
                        + "r.name AS remover FROM sessions s JOIN devices d ON d.device_id = s.device_id "
                        + "LEFT JOIN devices r ON r.device_id = d.removed_by WHERE s.token_hash = ?",
                    [.blob(tokenHash)])
            else { return nil }
            let session = Session(
                accountID: try row.string("account_id"), deviceID: try row.string("device_id"),
                expiresAt: Date(timeIntervalSince1970: TimeInterval(try row.int64("expires_at"))), tokenHash: tokenHash)
            return (
                session, try row.optionalInt64("revoked_at") != nil,
                try row.optionalInt64("removed_at").map { ($0, try row.optionalString("remover")) },
                try row.optionalInt64("last_seen_at")
            )
        }
        guard let (session, revoked, removed, seen) = found else {
            throw Self.unauthorized("the session token is not known; sign in again")
        }
        // Removal first: a removed device's sessions are revoked too, and it must learn why.
        if let removed { throw Self.deviceRemoved(at: removed.at, by: removed.by) }
        guard !revoked else { throw Self.unauthorized("the session was revoked; sign in again") }
        guard now < session.expiresAt else { throw Self.unauthorized("the session has expired; sign in again") }
        // When the device was last seen (`pixie devices`): written at most once a minute, not on every request.
        if seen.map({ now.unixSeconds - $0 >= Self.lastSeenGranularity }) ?? true {
            _ = try store(logger) {
                try database.execute(
                    "UPDATE devices SET last_seen_at = ? WHERE device_id = ?",
                    [.integer(now.unixSeconds), .text(session.deviceID)])
            }
        }
        return session
    }

    /// Revokes the session behind `request`'s token.
    func revoke(_ request: HTTPRequest) throws {
        let session = try authenticate(request)
        _ = try store(logger) {
            try database.execute(
                "UPDATE sessions SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL",
                [.integer(clock.now().unixSeconds), .blob(session.tokenHash)])
        }
    }

    static func hash(_ token: Data) -> Data { Data(SHA256.hash(data: token)) }

    /// Seconds between two writes of a device's last-seen time.
    static let lastSeenGranularity: Int64 = 60

    /// `401 device_removed`, with when and by which device (docs/pixie-protocol.md, "How the devices learn it").
    static func deviceRemoved(at: Int64, by remover: String?) -> HTTPError {
        var error = HTTPError(
            .unauthorized, .deviceRemoved,
            "this device was removed from the account"
                + (remover.map { " by \"\($0)\"" } ?? " when another device replaced all the others")
                + "; it cannot act for the account again, but what it holds stays on it and can be exported",
            headers: ["WWW-Authenticate": "Bearer"])
        error.details = ["removed_at": .integer(at), "removed_by": remover.map { .text($0) } ?? .null]
        return error
    }

    static func unauthorized(_ reason: String) -> HTTPError {
        HTTPError(.unauthorized, .unauthorized, reason, headers: ["WWW-Authenticate": "Bearer"])
    }
}

extension HTTPError.Code {
    static let unauthorized = HTTPError.Code("unauthorized")
    static let deviceRemoved = HTTPError.Code("device_removed")
}
