import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage

/// Removing one device and rotating every secret it held (docs/pixie-protocol.md, "Revoking a device"): the
/// remover makes the new keys, the signed statement and one sealed bundle per device that stays (itself included);
/// identity-svc
/// checks them against the account as it stands, commits the removal and the rotation together, and logs the
/// four changed bindings in one checkpoint before it answers. It opens nothing: the bundles are ciphertexts to
/// the devices' own sealing keys, parked until each device fetches them.
extension IdentityService {
    /// How far a statement's time may be from the server's clock: it records when the removal was made.
    static let rotationClockSkew: Int64 = 600
    /// A sealed bundle's size: version, X-Wing encapsulation, the plaintext (≤ 394 bytes) and the tag.
    static let maximumBundleSize = 1 + XWing.ciphertextByteCount + 400 + 16

    /// The lock a change of an account's roster takes on every node (a removal, a grant's redemption): a removal
    /// seals one bundle to each device that stays, so no device may join between its count and its commit.
    static func rosterLock(_ accountID: String) -> String { "roster/\(accountID)" }

    /// POST /v1/auth/devices/remove.
    func removeDevice(_ request: HTTPRequest) async throws -> HTTPResponse {
        let session = try sessions.authenticate(request)
        let body = try request.decode(as: IdentityAPI.RemoveDeviceRequest.self)
        let rotation = try Self.readRotation(body.rotation)
        let challenge = try consumeChallenge(body.passkey.challengeID, purpose: .removeDevice, naming: body.deviceID)
        let now = clock.now().unixSeconds
        let response: IdentityAPI.RemoveDeviceResponse
        let ended: [(RelaySubject, String)]
        do {
            (response, ended) = try store(logger) {
                // One removal per account at a time, on every node: the second reads the epoch the first left.
                try database.transaction(exclusive: Self.rosterLock(session.accountID)) { transaction in
                    try commitRemoval(
                        body, rotation: rotation, challenge: challenge, session: session, now: now, in: transaction)
                }
            }
        } catch let error as HTTPError {
            event("device_removal_refused")
            throw error
        }
        event("device_removed")
        endSubscriptions(ended)
        do {
            try await transparency.publish(accountID: session.accountID)
        } catch {
            // The removal stands (the device's sessions and passkey are gone); the rotation is logged at the next
            // change or start-up. Devices that check the log refuse the new keys until then (fail closed).
            logger.error("a rotation could not be logged", ["error": "\(error)"])
            throw HTTPError(
                .serviceUnavailable, .transparencyUnavailable,
                "the device is removed but the transparency log is unavailable, so the new keys cannot be proven "
                    + "yet; the other devices take them once it is back")
        }
        return try .json(response)
    }

    /// The rotation's parts, read and checked on their own before any row is touched.
    struct ReadRotation {
        let newKey: HybridSignature.PublicKey
        let inbox: RelaySubject
        let discoveryKey: Data
        let statement: AccountRotation
        let encodedStatement: Data
        let bundles: [String: Data]
    }

    static func readRotation(_ rotation: IdentityAPI.RemoveDeviceRequest.Rotation) throws(HTTPError) -> ReadRotation {
        guard let newKey = try? HybridSignature.PublicKey(rawRepresentation: rotation.accountSigningPubkey.data) else {
            throw HTTPError(
                .badRequest, .invalidField,
                "rotation.account_signing_pubkey is not a \(HybridSignature.publicKeyByteCount)-byte hybrid public key")
        }
        guard let inbox = try? RelaySubject(rawRepresentation: rotation.discoveryInbox.data) else {
            throw HTTPError(.badRequest, .invalidField, "rotation.discovery_inbox is a 32-byte relay subject")
        }
        guard (try? XWing.PublicKey(rawRepresentation: rotation.discoveryXWingPubkey.data)) != nil else {
            throw HTTPError(
                .badRequest, .invalidField,
                "rotation.discovery_xwing_pubkey is not a \(XWing.publicKeyByteCount)-byte X-Wing public key")
        }
        let statement: AccountRotation
        do {
            statement = try AccountRotation(decoding: rotation.statement.data)
        } catch {
            throw HTTPError(.badRequest, .invalidField, "rotation.statement: \(error.reason)")
        }
        var bundles: [String: Data] = [:]
        for sealed in rotation.bundles {
            guard sealed.bundle.data.count > 1 + XWing.ciphertextByteCount + 16,
                sealed.bundle.data.count <= maximumBundleSize
            else {
                throw HTTPError(
                    .badRequest, .invalidField,
                    "the bundle for device \(sealed.deviceID) is not a sealed rotation bundle")
            }
            guard bundles.updateValue(sealed.bundle.data, forKey: sealed.deviceID) == nil else {
                throw HTTPError(.badRequest, .invalidField, "two bundles for device \(sealed.deviceID); send one each")
            }
        }
        return ReadRotation(
            newKey: newKey, inbox: inbox, discoveryKey: rotation.discoveryXWingPubkey.data, statement: statement,
            encodedStatement: rotation.statement.data, bundles: bundles)
    }

    /// The checks and the writes, in one transaction: a refusal throws, and nothing of it is written.
    func commitRemoval(
        _ body: IdentityAPI.RemoveDeviceRequest, rotation: ReadRotation, challenge: Data, session: Session, now: Int64,
        in transaction: any SQLTransaction
    ) throws -> (IdentityAPI.RemoveDeviceResponse, ended: [(RelaySubject, String)]) {
        let accountID = session.accountID
        // The caller may have been removed while this request waited for the lock.
        guard
            let caller = try transaction.queryOne(
                "SELECT d.pubkey, d.removed_at, r.name AS remover FROM devices d "
                    + "LEFT JOIN devices r ON r.device_id = d.removed_by WHERE d.device_id = ?",
                [.text(session.deviceID)])
        else { throw Sessions.unauthorized("the session's device is not known; sign in again") }
        if let removedAt = try caller.optionalInt64("removed_at") {
            throw Sessions.deviceRemoved(at: removedAt, by: try caller.optionalString("remover"))
        }
        try verifyAssertion(
            body.passkey.credential, challenge: challenge, of: session.deviceID, userVerified: true, in: transaction)
        guard body.deviceID != session.deviceID else {
            throw HTTPError(
                .badRequest, .invalidField,
                "a device does not remove itself: sign out on it instead, or remove it from another device")
        }
        guard
            let target = try transaction.queryOne(
                "SELECT pubkey, inbox, removed_at FROM devices WHERE device_id = ? AND account_id = ?",
                [.text(body.deviceID), .text(accountID)])
        else { throw HTTPError(.notFound, .deviceNotFound, "no device \(body.deviceID) is in this account") }
        guard try target.optionalInt64("removed_at") == nil else {
            throw HTTPError(.conflict, .deviceNotFound, "device \(body.deviceID) was removed already")
        }
        guard
            let account = try transaction.queryOne(
                "SELECT a.kt_handle, a.account_signing_pubkey, a.epoch, d.phone_id, d.discovery_inbox "
                    + "FROM accounts a JOIN discovery d ON d.account_id = a.account_id WHERE a.account_id = ?",
                [.text(accountID)])
        else { throw HTTPError(.notFound, .noAccount, "the session's account is gone") }
        let epoch = UInt64(try account.int64("epoch"))
        guard body.expectedEpoch == epoch else {
            throw HTTPError(
                .conflict, .epochChanged,
                "the account was rotated meanwhile (its epoch is \(epoch), the request was made at "
                    + "\(body.expectedEpoch)): take the newer keys, then remove the device again")
        }
        let ktHandle = try account.string("kt_handle")
        let statement = rotation.statement
        do {
            try statement.verify(
                previousKey: try HybridSignature.PublicKey(
                    rawRepresentation: try account.data("account_signing_pubkey")))
        } catch let error as PixieWireError {
            throw HTTPError(.badRequest, .rotationInvalid, error.reason)
        }
        let discoveryValue = KeyTransparencyCommitment.discovery(
            inbox: rotation.inbox, discoveryKey: rotation.discoveryKey, ktHandle: ktHandle)
        let mismatch: String? =
            if statement.ktHandle != ktHandle {
                "it names another account"
            } else if statement.epoch != epoch + 1 {
                "it is for epoch \(statement.epoch), and this removal makes epoch \(epoch + 1)"
            } else if statement.newKey != rotation.newKey {
                "its new key is not rotation.account_signing_pubkey"
            } else if statement.discoveryValueHash != Data(SHA256.hash(data: discoveryValue)) {
                "it does not commit to rotation.discovery_inbox and rotation.discovery_xwing_pubkey"
            } else if statement.removerKeyHash != Data(SHA256.hash(data: try caller.data("pubkey"))) {
                "it names another remover than this session's device"
            } else if statement.removedKeyHash != Data(SHA256.hash(data: try target.data("pubkey"))) {
                "it names another device than device_id"
            } else if abs(Int64(clamping: statement.time) - now) > Self.rotationClockSkew {
                "its time is more than ten minutes from the server's; check the device's clock"
            } else {
                nil
            }
        if let mismatch {
            throw HTTPError(
                .badRequest, .rotationInvalid, "the rotation statement does not fit this removal: \(mismatch)")
        }
        // Exactly one bundle for each device that stays, the remover included: one that loses the answer takes its
        // new keys as any sibling does.
        let staying = Set(
            try transaction.query(
                "SELECT device_id FROM devices WHERE account_id = ? AND removed_at IS NULL AND device_id <> ?",
                [.text(accountID), .text(body.deviceID)]
            ).map { try $0.string("device_id") })
        guard Set(rotation.bundles.keys) == staying else {
            let missing = staying.subtracting(rotation.bundles.keys).sorted()
            let extra = Set(rotation.bundles.keys).subtracting(staying).sorted()
            throw HTTPError(
                .badRequest, .rotationInvalid,
                "send one bundle for each device that stays, the remover included"
                    + (missing.isEmpty ? "" : "; missing: \(missing.joined(separator: ", "))")
                    + (extra.isEmpty ? "" : "; not staying devices: \(extra.joined(separator: ", "))"))
        }

        // The removal.
        _ = try transaction.execute(
            "UPDATE devices SET removed_at = ?, removed_by = ? WHERE device_id = ?",
            [.integer(now), .text(session.deviceID), .text(body.deviceID)])
        _ = try transaction.execute("DELETE FROM passkeys WHERE device_id = ?", [.text(body.deviceID)])
        _ = try transaction.execute(
            "UPDATE sessions SET revoked_at = ? WHERE device_id = ? AND revoked_at IS NULL",
            [.integer(now), .text(body.deviceID)])
        // As revoke_others does: no grant minted before the rotation (by the removed device, or its thief) survives.
        _ = try transaction.execute(
            "UPDATE recovery_grants SET expires_at = ? WHERE account_id = ? AND used_at IS NULL AND expires_at > ?",
            [.integer(now), .text(accountID), .integer(now)])
        _ = try transaction.execute(
            "DELETE FROM rotation_bundles WHERE device_id = ?", [.text(body.deviceID)])

        // The rotation: the new keys, the statement, and the bundles parked for the devices that stay.
        _ = try transaction.execute(
            "UPDATE accounts SET account_signing_pubkey = ?, epoch = ?, kt_dirty = kt_dirty + 1 WHERE account_id = ?",
            [.blob(rotation.newKey.rawRepresentation), .integer(Int64(epoch + 1)), .text(accountID)])
        try insertUnique(
            transaction,
            "UPDATE discovery SET discovery_inbox = ?, discovery_xwing_pubkey = ?, updated_at = ? WHERE account_id = ?",
            [
                .blob(rotation.inbox.rawRepresentation), .blob(rotation.discoveryKey), .integer(now), .text(accountID),
            ],
            conflict: "this discovery_inbox is already in use; make the rotation again with a fresh one")
        _ = try transaction.execute(
            "INSERT INTO account_rotations (account_id, epoch, statement, remover, removed, created_at) "
                + "VALUES (?, ?, ?, ?, ?, ?)",
            [
                .text(accountID), .integer(Int64(epoch + 1)), .blob(rotation.encodedStatement),
                .text(session.deviceID), .text(body.deviceID), .integer(now),
            ])
        for (deviceID, bundle) in rotation.bundles {
            _ = try transaction.execute(
                "INSERT INTO rotation_bundles (device_id, epoch, bundle) VALUES (?, ?, ?)",
                [.text(deviceID), .integer(Int64(epoch + 1)), .blob(bundle)])
        }
        var ended: [(RelaySubject, String)] = []
        if let inbox = try target.optionalData("inbox").flatMap({ try? RelaySubject(rawRepresentation: $0) }) {
            ended.append((inbox, "this device was removed from the account"))
        }
        if let old = try? RelaySubject(rawRepresentation: try account.data("discovery_inbox")) {
            ended.append((old, "the account's discovery inbox was rotated when a device was removed"))
        }
        return (IdentityAPI.RemoveDeviceResponse(epoch: epoch + 1, removedDeviceID: body.deviceID), ended)
    }

    /// Ends every relay subscription of `subjects`, on every node the bus reaches: each connection holding one drops
    /// it and is sent `ERROR device_removed` (request id 0) with the reason. Best effort by nature: a node the bus
    /// cannot reach now ends nothing, and a device's subscription of a subject nobody sends to any more costs only
    /// a slot; what the removal guarantees (no key, no session, no place in the roster) does not rest on it.
    func endSubscriptions(_ subjects: [(RelaySubject, String)]) {
        guard let relay else { return }
        for (subject, reason) in subjects {
            let frame = RelayServerFrame.error(requestID: 0, code: .deviceRemoved, reason: reason).encoded()
            do {
                try relay.publish(frame, to: subject)
            } catch {
                logger.warning("a removed device's relay subscription could not be ended", ["error": "\(error)"])
            }
        }
        relay.flush { _ in }
    }

    /// GET /v1/auth/devices/rotations?after=N: the account's epoch, and each rotation past `N` with the bundle
    /// sealed to this device (null where the server holds none: the device reports it as withheld).
    func rotations(_ request: HTTPRequest) throws -> HTTPResponse {
        let session = try sessions.authenticate(request)
        let after: Int64
        if let text = request.query("after") {
            guard let value = Int64(text), value >= 0 else {
                throw HTTPError(.badRequest, .badRequest, "?after= is an epoch, a whole number")
            }
            after = value
        } else {
            after = 0
        }
        let response = try store(logger) {
            try database.readTransaction { transaction in
                let epoch =
                    try transaction.queryOne(
                        "SELECT epoch FROM accounts WHERE account_id = ?", [.text(session.accountID)])?
                    .int64("epoch") ?? 1
                let rotations = try transaction.query(
                    "SELECT r.epoch, r.statement, b.bundle FROM account_rotations r "
                        + "LEFT JOIN rotation_bundles b ON b.epoch = r.epoch AND b.device_id = ? "
                        + "WHERE r.account_id = ? AND r.epoch > ? ORDER BY r.epoch",
                    [.text(session.deviceID), .text(session.accountID), .integer(after)]
                ).map { row in
                    IdentityAPI.RotationsResponse.Rotation(
                        epoch: UInt64(try row.int64("epoch")), statement: Base64URLBytes(try row.data("statement")),
                        bundle: try row.optionalData("bundle").map(Base64URLBytes.init))
                }
                return IdentityAPI.RotationsResponse(epoch: UInt64(epoch), rotations: rotations)
            }
        }
        return try .json(response)
    }
}

extension HTTPError.Code {
    static let deviceNotFound = HTTPError.Code("device_not_found")
    /// The removal was made at an epoch another removal has moved past.
    static let epochChanged = HTTPError.Code("epoch_changed")
    /// The rotation statement or bundles do not fit the removal.
    static let rotationInvalid = HTTPError.Code("rotation_invalid")
}
