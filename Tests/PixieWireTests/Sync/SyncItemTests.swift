import Foundation
import PixieWire
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("SyncItem, SyncItemKey and SyncDigest: docs/pixie-sync.md, Digests")
struct SyncItemTests {
    static let seed = Data((0..<32).map { UInt8($0) })

    @Test("an item is HMACs under the HKDF'd item key, as the text says (pyca/cryptography)")
    func againstTheText() throws {
        let oracle = try ReferenceOracle()
        let key = try oracle.bytes(
            "hkdf",
            [
                "hash": "sha256", "ikm": Self.seed, "salt": Data(), "info": Data("pixie/sync/item-key/v1".utf8),
                "length": 32,
            ])
        let itemKey = try SyncItemKey(accountSeed: Self.seed)
        for (category, id, hlc, author, deleted) in [
            (UInt8(5), "note-1", UInt64(0x0192_3456_7890_0001), UInt64(0xa1b2_c3d4_e5f6_0718), false),
            (UInt8(2), "ünïcode message", UInt64(7), UInt64(0), true),
            (UInt8(7), String(repeating: "p", count: 128), UInt64.max >> 1, UInt64.max, false),
        ] {
            var row = Data([category])
            row.append(UInt8(id.utf8.count >> 8))
            row.append(UInt8(id.utf8.count & 0xff))
            row += Data(id.utf8)
            let version = RowVersion(hlc: hlc, author: AuthorTag(rawValue: author))
            let idTag = try oracle.bytes(
                "hmac", ["hash": "sha256", "key": key, "message": Data("pixie/sync/item-id/v1\0".utf8) + row])
            var versionTag = try oracle.bytes(
                "hmac",
                [
                    "hash": "sha256", "key": key,
                    "message": Data("pixie/sync/item-version/v1\0".utf8) + row + version.encoded,
                ]
            ).prefix(8)
            versionTag[versionTag.startIndex] = versionTag[versionTag.startIndex] & 0x7f | (deleted ? 0x80 : 0)
            let item = itemKey.item(category: category, id: id, version: version, deleted: deleted)
            #expect(item.rawRepresentation == idTag.prefix(8) + versionTag)
            #expect(item.isTombstone == deleted)
            #expect(itemKey.idTag(category: category, id: id) == item.idTag)
            #expect(try SyncItem(rawRepresentation: item.rawRepresentation) == item)
        }
    }

    @Test("versions of one row share the id tag; rows and categories do not")
    func idTags() throws {
        let key = try SyncItemKey(accountSeed: Self.seed)
        let one = key.item(category: 5, id: "a", version: RowVersion(hlc: 1, author: .migrated), deleted: false)
        let two = key.item(category: 5, id: "a", version: RowVersion(hlc: 2, author: .migrated), deleted: true)
        #expect(one.idTag == two.idTag && one != two)
        #expect(key.idTag(category: 6, id: "a") != one.idTag)
        #expect(key.idTag(category: 5, id: "b") != one.idTag)
        // The caller's kept id tag gives the same item with one HMAC fewer.
        #expect(
            key.item(
                category: 5, id: "a", version: RowVersion(hlc: 2, author: .migrated), deleted: true, idTag: one.idTag)
                == two)
        // Another account's key gives other items.
        let stranger = try SyncItemKey(accountSeed: Data(repeating: 9, count: 32))
        #expect(
            stranger.item(category: 5, id: "a", version: RowVersion(hlc: 1, author: .migrated), deleted: false) != one)
        #expect(throws: PixieWireError.self) { try SyncItemKey(accountSeed: Data(count: 31)) }
    }

    @Test("a digest kept by inserts, replacements and removals equals one rebuilt from scratch")
    func digestArithmetic() throws {
        var random = SeededGenerator(seed: 1)
        var items: [UInt64: SyncItem] = [:]
        var kept = SyncDigest()
        for _ in 0..<3000 {
            let id = random.next() % 200
            let new = SyncItem(idTag: id, versionTag: random.next())
            switch (items[id], random.next() % 4) {
            case (nil, _):
                kept.insert(new)
                items[id] = new
            case (let old?, 0):
                kept.remove(old)
                items[id] = nil
            case (let old?, _):
                kept.replace(old, with: new)
                items[id] = new
            }
        }
        let rebuilt = SyncDigest(items: items.values.shuffled())
        #expect(kept == rebuilt)
        #expect(kept.count == UInt32(items.count))
        #expect(try SyncDigest(count: kept.count, sumBytes: kept.sumBytes) == kept)
        #expect(kept.encoded.count == SyncDigest.byteCount)
        #expect(SyncDigest(items: items.values.dropFirst()) != rebuilt)
    }

    @Test("the sum wraps modulo 2^128, big-endian")
    func wraps() throws {
        let top = SyncItem(idTag: .max, versionTag: .max)
        let digest = SyncDigest(items: [top, SyncItem(idTag: 0, versionTag: 2)])
        #expect(digest.sumBytes == Data(repeating: 0, count: 15) + [1])
        #expect(digest.encoded.prefix(4) == Data([0, 0, 0, 2]))
    }

    @Test("the check is SplitMix64's finaliser of hi xor rotl(lo, 32), as the text says (Python)")
    func check() throws {
        let oracle = try ReferenceOracle()
        var random = SeededGenerator(seed: 3)
        for _ in 0..<20 {
            let item = SyncItem(idTag: random.next(), versionTag: random.next())
            let answer = try oracle.call("riblt_indices", ["item": item.rawRepresentation, "below": 1])
            #expect(answer["check"] as? String == String(format: "%016llx", item.check))
        }
    }
}
