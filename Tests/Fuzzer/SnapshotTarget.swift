import Foundation
import PixieDevice
import PixieWire

/// The store snapshot a sibling sends a new device (docs/pixie-protocol.md, "The snapshot"), as the device reads
/// it once BlobCrypto has opened the blob: `StoreSnapshot.Reader`, which hands out rows as their records arrive.
/// Every error must be a `BackupServiceError`, and beyond that:
/// - the same rows and the same outcome whether the bytes arrive at once or cut in two (at a point the input's
///   last byte picks), since a blob's chunks may end anywhere;
/// - a snapshot of the current schema (2) read to its end record encodes back, row by row, to the same bytes; one of
///   schema 1 (an archive made before versions) reads every row with the migrated author.
let snapshotTarget = FuzzTarget(
    name: "snapshot",
    summary: "the store snapshot a sibling sends, read in pieces (PixieDevice)",
    maximumLength: 65_536,
    seeds: {
        let rows = [
            StoreRow(
                category: .conversations, id: "c1", version: RowVersion(hlc: 1, author: AuthorTag(rawValue: 0xab)),
                isDeleted: false,
                fields: ["title": .text("Trip"), "created_at": .integer(1_800_000_000)]),
            StoreRow(
                category: .messages, id: "m1", version: RowVersion(hlc: 3, author: AuthorTag(rawValue: 0xab)),
                isDeleted: false,
                fields: [
                    "conversation_id": .text("c1"), "sender": .text("me"), "body": .text("Hello ✈︎"),
                    "sent_at": .integer(-1),
                ]),
            StoreRow(
                category: .contacts, id: "k1", version: RowVersion(hlc: 2, author: AuthorTag(rawValue: 0xab)),
                isDeleted: false,
                fields: [
                    "display_name": .text("Ada"), "pubkey": .blob(Data(repeating: 1, count: 65)),
                    "user_id_hash": .blob(Data(repeating: 2, count: 32)),
                    "account_signing_pubkey": .blob(Data(repeating: 3, count: 32)),
                    "channel_key": .blob(Data(repeating: 4, count: 32)),
                ]),
            StoreRow(
                category: .plans, id: "p1", version: RowVersion(hlc: 9, author: AuthorTag(rawValue: 0xab)),
                isDeleted: true, fields: [:]),
            StoreRow(
                category: .providerAPIKeys, id: "a1", version: RowVersion(hlc: 1, author: AuthorTag(rawValue: 0xab)),
                isDeleted: false,
                fields: ["provider": .text("example"), "api_key": .text("sk-0123")]),
        ]
        return [
            snapshot(rows, secrets: true), snapshot(Array(rows.dropLast()), secrets: false),
            snapshot([], secrets: false),
        ]
    },
    run: { input in
        let whole = read([input])
        if let split = input.last.map({ Int($0) % input.count }) {
            let pieces = read([input.prefix(split), input.dropFirst(split)])
            guard pieces.rows == whole.rows, pieces.outcome == whole.outcome else {
                finding(
                    "the snapshot read whole (\(whole.rows.count) rows, \(whole.outcome)) and cut at \(split) "
                        + "(\(pieces.rows.count) rows, \(pieces.outcome)) differ")
            }
        }
        guard whole.outcome == .finished else { return }
        if input[input.startIndex + 17] == 1 {
            // Schema 1 (an archive made before versions): every row reads with the migrated author.
            guard whole.rows.allSatisfy({ $0.version.author == .migrated }) else {
                finding("a schema 1 snapshot read a row with an author")
            }
        } else {
            expectRoundTrip(input, snapshot(whole.rows, secrets: whole.includesSecrets), "StoreSnapshot.Reader")
        }
    })

/// A snapshot of `rows`, as a sibling writes it.
private func snapshot(_ rows: [StoreRow], secrets: Bool) -> Data {
    var out = StoreSnapshot.header(includeSecrets: secrets)
    for row in rows { StoreSnapshot.append(row, to: &out) }
    return out + StoreSnapshot.end(rowCount: UInt64(rows.count))
}

/// How reading a snapshot ended.
private enum SnapshotOutcome: Equatable {
    case finished
    case refused(BackupServiceError)
}

/// Feeds `pieces` to a reader in order, then asks it to finish; a thrown error other than a
/// `BackupServiceError` is a finding.
private func read(_ pieces: [Data]) -> (rows: [StoreRow], outcome: SnapshotOutcome, includesSecrets: Bool) {
    var reader = StoreSnapshot.Reader()
    var rows: [StoreRow] = []
    do {
        for piece in pieces { try reader.feed(Data(piece)) { rows.append($0) } }
        try reader.finish()
        return (rows, .finished, reader.includesSecrets)
    } catch let error as BackupServiceError {
        return (rows, .refused(error), reader.includesSecrets)
    } catch {
        finding("StoreSnapshot.Reader threw \(type(of: error)), not BackupServiceError: \(error)")
    }
}
