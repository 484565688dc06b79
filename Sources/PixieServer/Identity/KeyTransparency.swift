import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage
import Transparency
import TransparencyLog

/// identity-svc's half of key transparency (000_e422bd9a7c930342.txt: the discovery answer "is checked
/// against the transparency log before anything is sealed to it"): every key binding identity-svc serves is
/// appended to the log (docs/transparency.md) before the request that changed it is answered, and the same
/// service serves the proofs.
///
/// Labels (docs/pixie-protocol.md, "Key transparency"):
/// - `discovery/<phone_id>`: discovery_inbox (32) ‖ discovery_xwing_pubkey (1216) ‖ kt_handle;
/// - `account/<kt_handle>`: the account signing public key (1984);
/// - `devices/<kt_handle>`: ``PixieWire/KeyTransparencyCommitment/roster(_:)`` of the account's devices (pubkey,
///   inbox, sealing key);
/// - `account-rotation/<kt_handle>`: ``PixieWire/AccountRotation/encoded`` of the account's latest rotation, once it
///   has one (docs/pixie-protocol.md, "Revoking a device").
struct KeyTransparency: Sendable {
    let sequencer: Sequencer
    let database: any SQLDatabase
    let logger: Logger
    /// One publish of an account at a time, so the last to run reads (and logs) the newest bindings.
    private let publishing = KeyedSerializer<String>()

    // The labels are PixieWire's (a device computes the same ones); each is a valid transparency label, since a
    // base64url phone_id and a kt_handle are [A-Za-z0-9_-] only.
    static func discoveryLabel(phoneID: Data) -> Label { try! Label(KeyTransparencyLabel.discovery(phoneID: phoneID)) }
    static func accountLabel(ktHandle: String) -> Label { try! Label(KeyTransparencyLabel.account(ktHandle: ktHandle)) }
    static func devicesLabel(ktHandle: String) -> Label { try! Label(KeyTransparencyLabel.devices(ktHandle: ktHandle)) }
    static func rotationLabel(ktHandle: String) -> Label {
        try! Label(KeyTransparencyLabel.accountRotation(ktHandle: ktHandle))
    }

    /// The bindings of one account as the store has them now, read in one consistent view: a removal that commits
    /// meanwhile is in all of them or in none, so its key, statement and roster are logged together.
    func bindings(accountID: String) throws -> [(Label, Data)] {
        try database.readTransaction { store in
            guard
                let account = try store.queryOne(
                    "SELECT a.kt_handle, a.account_signing_pubkey, d.phone_id, d.discovery_inbox, "
                        + "d.discovery_xwing_pubkey FROM accounts a JOIN discovery d ON d.account_id = a.account_id "
                        + "WHERE a.account_id = ?",
                    [.text(accountID)])
            else { return [] }
            let handle = try account.string("kt_handle")
            let devices = try store.query(
                "SELECT pubkey, inbox, sealing_key FROM devices WHERE account_id = ? AND removed_at IS NULL",
                [.text(accountID)]
            ).map { row in
                RosterDevice(
                    pubkey: try row.data("pubkey"),
                    inbox: try row.optionalData("inbox").flatMap { try? RelaySubject(rawRepresentation: $0) },
                    sealingKey: try row.optionalData("sealing_key"))
            }
            // The latest rotation's statement goes in with the key it moves to: the auditor reads them together.
            let rotation = try store.queryOne(
                "SELECT statement FROM account_rotations WHERE account_id = ? ORDER BY epoch DESC LIMIT 1",
                [.text(accountID)])
            return [
                (
                    Self.discoveryLabel(phoneID: try account.data("phone_id")),
                    KeyTransparencyCommitment.discovery(
                        inbox: try RelaySubject(rawRepresentation: try account.data("discovery_inbox")),
                        discoveryKey: try account.data("discovery_xwing_pubkey"), ktHandle: handle)
                ),
                (Self.accountLabel(ktHandle: handle), try account.data("account_signing_pubkey")),
                (Self.devicesLabel(ktHandle: handle), KeyTransparencyCommitment.roster(devices)),
            ] + (try rotation.map { [(Self.rotationLabel(ktHandle: handle), try $0.data("statement"))] } ?? [])
        }
    }

    /// Appends every binding of `accountID` whose logged value differs from the store's, and returns once a
    /// checkpoint includes them (the seed's order: a binding is served only once it can be proven).
    ///
    /// Every transaction that changes an account's bindings also raises its `kt_dirty` counter; once the
    /// bindings read here are logged, the counter is cleared only if no change came in meanwhile, so an
    /// account whose change was committed but never logged (a crash in between) stays marked for
    /// ``reconcile()``.
    ///
    /// Publishes of one account run one at a time in a process: two that interleaved could each read the store
    /// before the other's change and append the older roster last. Across nodes (docs/storage.md, "PostgreSQL")
    /// they can still interleave, so a publish reads the store again once its appends are in: if it changed
    /// meanwhile, what this publish appended may be older than what another logged, and it publishes again. Every
    /// stale append is so followed by a newer one from the same publish, and the last value logged is the store's.
    func publish(accountID: String) async throws {
        try await publishing.run(accountID) { try await publishNow(accountID: accountID) }
    }

    private func publishNow(accountID: String) async throws {
        var dirty = try dirtyCount(accountID)
        var wanted = try bindings(accountID: accountID)
        for _ in 0..<8 {
            // Every binding that changed goes in as one batch, so one checkpoint holds them all.
            var changed: [(Label, Data)] = []
            for (label, value) in wanted {
                let (_, proof) = try await sequencer.lookup(label)
                if proof.entry?.value != value { changed.append((label, value)) }
            }
            _ = try await sequencer.append(changed)
            let latestDirty = try dirtyCount(accountID)
            let latest = try bindings(accountID: accountID)
            guard Self.same(latest, wanted) else {
                (dirty, wanted) = (latestDirty, latest)
                continue
            }
            try database.execute(
                "UPDATE accounts SET kt_dirty = 0 WHERE account_id = ? AND kt_dirty = ?",
                [.text(accountID), .integer(dirty)])
            return
        }
        // Still dirty: the next change, or reconcile() at the next start, logs it.
        throw ServerError(
            .storage, "the bindings of account \(accountID) kept changing while they were logged; they stay marked")
    }

    private func dirtyCount(_ accountID: String) throws -> Int64 {
        try database.queryOne("SELECT kt_dirty FROM accounts WHERE account_id = ?", [.text(accountID)])?
            .int64("kt_dirty") ?? 0
    }

    private static func same(_ a: [(Label, Data)], _ b: [(Label, Data)]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    /// Logs the bindings of every account still marked dirty (a crash between a commit and its append); run
    /// at start-up. Costs one query when nothing is owed, however many accounts there are.
    func reconcile() async throws -> Int {
        let accounts = try database.query("SELECT account_id FROM accounts WHERE kt_dirty > 0", []).map {
            try $0.string("account_id")
        }
        var changed = 0
        for account in accounts {
            let before = await sequencer.latestCheckpoint().size
            try await publish(accountID: account)
            if await sequencer.latestCheckpoint().size != before { changed += 1 }
        }
        if changed > 0 { logger.warning("logged bindings the log was missing", ["accounts": changed]) }
        return changed
    }

    // MARK: - Endpoints

    func addRoutes(to router: inout Router) {
        router.on(PixieAPI.ktCheckpoint) { request, _ in try await checkpoint(request) }
        router.on(PixieAPI.ktCheckpointSizes) { request, _ in try await checkpointSizes(request) }
        router.on(PixieAPI.ktConsistency) { request, _ in try await consistency(request) }
        router.on(PixieAPI.ktEntries) { request, _ in try await entries(request) }
        router.on(PixieAPI.ktLookup) { request, _ in try await lookup(request) }
    }

    /// The latest checkpoint, or the one of `?size=N`, as its signed note (`text/plain`).
    func checkpoint(_ request: HTTPRequest) async throws -> HTTPResponse {
        let note: String
        if let size = try Self.number(request, "size") {
            note = try await proving { try await sequencer.checkpoint(size: size).note }
        } else {
            note = await sequencer.latestCheckpoint().note
        }
        return HTTPResponse(
            status: .ok, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(note.utf8))
    }

    /// The sizes of the checkpoints after `?after=N` (default 0), at most `?limit=` (default and cap 1000).
    func checkpointSizes(_ request: HTTPRequest) async throws -> HTTPResponse {
        let after = try Self.number(request, "after") ?? 0
        let limit = Int(min(try Self.number(request, "limit") ?? 1000, 1000))
        guard limit > 0 else { throw HTTPError(.badRequest, .badRequest, "limit must be 1 to 1000") }
        return try .json(
            TransparencyAPI.SizesResponse(
                sizes: try await proving { try await sequencer.checkpointSizes(after: after, limit: limit) }))
    }

    /// The consistency proof between `?from=` and `?to=` (RFC 9162 §2.1.4, encoded as docs/pixie-protocol.md, "Proofs", says).
    func consistency(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard let from = try Self.number(request, "from"), let to = try Self.number(request, "to") else {
            throw HTTPError(.badRequest, .badRequest, "send ?from=<size>&to=<size>")
        }
        let proof = try await proving { try await sequencer.consistencyProof(from: from, to: to) }
        return try .json(TransparencyAPI.ProofResponse(proof: Base64URLBytes(proof.encoded)))
    }

    /// The encoded entries `?start=` ..< `?end=` (at most 10,000), for auditors.
    func entries(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard let start = try Self.number(request, "start"), let end = try Self.number(request, "end"),
            start <= end
        else {
            throw HTTPError(.badRequest, .badRequest, "send ?start=<index>&end=<index> with start ≤ end")
        }
        let entries = try await proving { try await sequencer.entries(start..<end) }
        return try .json(TransparencyAPI.EntriesResponse(entries: entries.map { Base64URLBytes($0.encoded) }))
    }

    /// A label's lookup proof at the latest checkpoint, with the consistency proof from the size the device
    /// pinned (`since`): everything ``Transparency/TransparencyVerifier`` needs in one answer.
    func lookup(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decode(as: TransparencyAPI.LookupRequest.self)
        let label: Label
        do {
            label = try Label(body.label)
        } catch let error as TransparencyError {
            throw HTTPError(.badRequest, .invalidField, error.reason)
        }
        let answer = try await proving { try await sequencer.answer(for: label, since: body.since) }
        return try .json(
            TransparencyAPI.LookupResponse(
                checkpoint: answer.checkpoint, consistency: answer.consistencyProof.map { Base64URLBytes($0.encoded) },
                lookup: Base64URLBytes(answer.lookup.encoded)))
    }

    /// Runs a prover call; a request outside the log (a size it never had) is the client's 400, anything else
    /// a 503 with the details in the log.
    private func proving<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TransparencyError where error.code == .outOfRange {
            throw HTTPError(.badRequest, .outOfRange, error.reason)
        } catch {
            logger.error("the transparency log failed", ["error": "\(error)"])
            throw HTTPError(
                .serviceUnavailable, .transparencyUnavailable, "the transparency log is unavailable; try again shortly")
        }
    }

    private static func number(_ request: HTTPRequest, _ name: String) throws(HTTPError) -> UInt64? {
        guard let text = request.query(name) else { return nil }
        guard let value = UInt64(text) else {
            throw HTTPError(.badRequest, .badRequest, "?\(name)= must be a whole number, not \"\(text)\"")
        }
        return value
    }
}

extension HTTPError.Code {
    static let outOfRange = HTTPError.Code("out_of_range")
    static let transparencyUnavailable = HTTPError.Code("transparency_unavailable")
}
