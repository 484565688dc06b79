import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

@Suite("SyncBlobRecord: rows too large for a frame, sealed for blob-svc, their hash in the sealed message")
struct SyncBlobTests {
    static let key = Data(repeating: 0x42, count: 32)
    static let nonce = Data(repeating: 0x07, count: 12)

    static func rows() -> [StoreRow] {
        let body = String(repeating: "a long note. ", count: 8000)
        return [
            StoreRow(
                category: .notebookNotes, id: "n1", version: RowVersion(hlc: 1 << 40, author: AuthorTag(rawValue: 9)),
                isDeleted: false, fields: ["title": .text("Long"), "body": .text(body)]),
            StoreRow(
                category: .providerAPIKeys, id: "openai",
                version: RowVersion(hlc: 2 << 40, author: AuthorTag(rawValue: 9)), isDeleted: false,
                fields: ["provider": .text("openai"), "api_key": .text("sk-" + String(repeating: "k", count: 60_000))]),
        ]
    }

    static func sealed() throws -> (Data, SyncBlobRecord) {
        let sealed = try SyncBlobRecord.seal(rows(), key: SymmetricKey(data: key), nonce: nonce)
        let record = SyncBlobRecord(
            blobID: Data(repeating: 1, count: 16), key: key, nonce: nonce, sha256: Data(SHA256.hash(data: sealed)),
            sizeBytes: UInt64(sealed.count))
        return (sealed, record)
    }

    @Test("the record is 106 bytes, reads back as written, and its rows open from the blob it names")
    func roundTrip() throws {
        let (sealed, record) = try Self.sealed()
        let encoded = record.encoded
        #expect(encoded.count == 106 && encoded.first == 9)
        #expect(try SyncBlobRecord(body: encoded.dropFirst(5)) == record)
        #expect(try record.open(sealed) == Self.rows())
        // Nothing of the rows is in the clear.
        #expect(sealed.range(of: Data("a long note.".utf8)) == nil)
    }

    @Test("a blob whose bytes, size or hash differ from the record's opens nothing, and says so")
    func tampered() throws {
        let (sealed, record) = try Self.sealed()
        var flipped = sealed
        flipped[flipped.startIndex + 100] ^= 1
        #expect(throws: SyncBlobError.self) { try record.open(flipped) }
        #expect(throws: SyncBlobError.self) { try record.open(sealed.dropLast()) }
        // A blob-svc that serves other bytes with a hash to match them still fails: the hash is the sealed record's.
        let other = try SyncBlobRecord.seal(
            [Self.rows()[0]], key: SymmetricKey(data: Self.key), nonce: Self.nonce)
        #expect(throws: SyncBlobError.self) { try record.open(other) }
        // A record of another length, or another blob format, is refused as it is read.
        #expect(throws: SyncBlobError.self) { try SyncBlobRecord(body: record.encoded.dropFirst(6)) }
        var format = record.encoded.dropFirst(5)
        format[format.startIndex + 16] = 2
        #expect(throws: SyncBlobError.self) { try SyncBlobRecord(body: format) }
    }
}
