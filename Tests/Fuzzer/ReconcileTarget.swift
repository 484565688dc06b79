import Foundation
import PixieDevice
import PixieWire

/// The reconcile loop's messages (docs/pixie-sync.md, "Messages"), as a device reads a sibling's: the first byte of
/// an input picks `sync_digest`, `sync_sketch`, `sync_want` or `sync_rows`, the rest is the payload. Beyond "no
/// crash, only PixieWireError":
/// - an accepted message encodes back to the same bytes;
/// - a sketch's symbols go through the decoder against a fixed set of this device's items, and when it says it
///   has decoded, this device's set changed by what it found encodes to exactly the symbols received;
/// - a batch's row records are read as the round reads them, refusing with `BackupServiceError` only;
/// - a blob record (code 9) is read as the round reads it, refusing with `SyncBlobError` only, and an accepted one
///   encodes back to its bytes.
let reconcileTarget = FuzzTarget(
    name: "reconcile",
    summary: "the reconcile loop's sync_digest, sync_sketch, sync_want and sync_rows, and the symbol decoder",
    maximumLength: 16_384,
    seeds: {
        let header = SyncRoundHeader(
            round: try SyncRoundID(initiator: Data(repeating: 1, count: 16), responder: Data(repeating: 2, count: 16)),
            sender: try RelaySubject(rawRepresentation: Data(repeating: 3, count: 32)))
        let opening = SyncRoundHeader(
            round: try SyncRoundID(initiator: Data(repeating: 1, count: 16)), sender: header.sender)
        let digests = (1...8).map { SyncDigest(count: UInt32($0), sum: UInt128($0) << 77) }
        var records = Data()
        StoreSnapshot.append(
            StoreRow(
                category: .notebookNotes, id: "n1", version: RowVersion(hlc: 1 << 40, author: AuthorTag(rawValue: 7)),
                isDeleted: false, fields: ["title": .text("t"), "body": .text("b")]), to: &records)
        StoreSnapshot.append(
            StoreRow(
                category: .messages, id: "m1", version: RowVersion(hlc: 1 << 41, author: AuthorTag(rawValue: 8)),
                isDeleted: true, fields: [:]), to: &records)
        records +=
            SyncBlobRecord(
                blobID: Data(repeating: 4, count: 16), key: Data(repeating: 5, count: 32),
                nonce: Data(repeating: 6, count: 12),
                sha256: Data(repeating: 7, count: 32), sizeBytes: 4096
            ).encoded
        let remote = reconcileLocal.dropFirst(3) + [SyncItem(idTag: 42, versionTag: 1 << 63)]
        let messages: [SiblingMessage] = [
            .syncDigest(SyncDigests(header: opening, phase: .open, wallClock: 1, hlc: 2, digests: digests)),
            .syncDigest(SyncDigests(header: header, phase: .close, wallClock: 1, hlc: 2, digests: digests)),
            .syncSketch(
                SyncSketch(
                    header: header, category: 5, first: 0, total: UInt32(remote.count),
                    content: .symbols(RatelessSketch.encode(remote, symbols: 0..<24)))),
            .syncSketch(
                SyncSketch(header: header, category: 2, first: 0, total: 2, content: .items(Array(remote.prefix(2))))),
            .syncWant(
                SyncWant(
                    header: header,
                    entries: [
                        .init(category: 1, kind: .moreSymbols(first: 24, count: 24)),
                        .init(category: 3, kind: .items(Array(remote.prefix(3)))),
                        .init(category: 8, kind: .everything),
                    ])),
            .syncRows(SyncRows(header: header, batch: 1, isLast: true, records: records)),
        ]
        return try messages.map { message in Data([reconcileCode(message.type)]) + (try message.encoded) }
    },
    run: { input in
        guard let first = input.first else { return }
        let types: [PayloadType] = [.syncDigest, .syncSketch, .syncWant, .syncRows]
        let type = types[Int(first) % types.count]
        let payload = input.dropFirst()
        var message: SiblingMessage?
        expectOnly(PixieWireError.self, "a \(type) payload") {
            message = try SiblingMessage(type: type, payload: payload)
        }
        guard let message else { return }
        expectOnly(PixieWireError.self, "encoding an accepted \(type)") {
            expectRoundTrip(Data(payload), try message.encoded, "\(type)")
        }
        switch message {
        case .syncSketch(let sketch):
            guard case .symbols(let symbols) = sketch.content, sketch.first == 0 else { return }
            var decoder = RatelessDecoder(local: reconcileLocal)
            var complete = false
            expectOnly(PixieWireError.self, "decoding symbols") { complete = try decoder.add(symbols) }
            guard complete else { return }
            let remote = Set(reconcileLocal).subtracting(decoder.localOnly).union(decoder.remoteOnly)
            guard RatelessSketch.encode(remote, symbols: 0..<symbols.count) == symbols else {
                finding("a decoded difference does not give back the symbols it was decoded from")
            }
        case .syncRows(let rows):
            var offset = rows.records.startIndex
            while offset < rows.records.endIndex {
                let code = rows.records[offset]
                let length = Int(rows.records[(offset + 1)..<(offset + 5)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                let body = Data(rows.records[(offset + 5)..<(offset + 5 + length)])
                offset += 5 + length
                if code == SyncBlobRecord.code {
                    expectOnly(SyncBlobError.self, "a blob record") {
                        let record = try SyncBlobRecord(body: body)
                        expectRoundTrip(body, Data(record.encoded.dropFirst(5)), "a blob record")
                    }
                    continue
                }
                guard let category = StoreCategory(snapshotCode: code) else { continue }
                expectOnly(BackupServiceError.self, "a row record") {
                    _ = try StoreSnapshot.Reader.decodeRow(body, category, schema: 2)
                }
            }
        default:
            break
        }
    })

/// The items the fuzzed decoder holds as this device's.
let reconcileLocal: [SyncItem] = (0..<12).map {
    SyncItem(idTag: UInt64($0) &* 0x9e37_79b9_7f4a_7c15, versionTag: UInt64($0) << 3)
}

func reconcileCode(_ type: PayloadType) -> UInt8 {
    switch type {
    case .syncDigest: 0
    case .syncSketch: 1
    case .syncWant: 2
    default: 3
    }
}
