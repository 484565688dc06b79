import Foundation
@_spi(Testing) import PixieDevice
import PixieDeviceTestSupport
import PixieWire
import SiblingsCrypto
import SiblingsTestSupport
import Storage
import Testing

@Suite("DeviceStore and the reconcile loop: versions, the fold, digests kept current (docs/pixie-sync.md)")
struct DeviceStoreSyncTests {
    static let seed = Data((0..<32).map { UInt8($0 * 3) })
    static let itemKey = try! SyncItemKey(accountSeed: seed)

    static func device(_ author: UInt64, skew: TimeInterval = 0) throws -> (DeviceStore, ManualDeviceClock) {
        let clock = ManualDeviceClock(Date(timeIntervalSince1970: 1_800_000_000 + skew))
        return (
            try DeviceStore(
                writer: try StoreWriter(author: AuthorTag(rawValue: author), accountSeed: seed), clock: clock), clock
        )
    }

    static func note(_ body: String) -> [String: StoreValue] { ["title": .text("t"), "body": .text(body)] }

    static func everything(_ store: DeviceStore) throws -> [StoreRow] {
        try StoreCategory.allCases.flatMap { try store.rows($0, includingDeleted: true) }
    }

    /// The digests as the text defines them, computed from the rows alone.
    static func expectedDigests(_ store: DeviceStore) throws -> [SyncDigest] {
        try StoreCategory.allCases.map { category in
            SyncDigest(
                items: try store.rows(category, includingDeleted: true).map {
                    itemKey.item(category: category.snapshotCode, id: $0.id, version: $0.version, deleted: $0.isDeleted)
                })
        }
    }

    @Test("each write is stamped after the last by this device's clock, and carries its author")
    func stamps() throws {
        let (store, clock) = try Self.device(0x77)
        let one = try store.put(.notebookNotes, id: "n", fields: Self.note("a"))
        #expect(
            one.version == RowVersion(hlc: HybridLogicalClock.reading(at: clock.now), author: AuthorTag(rawValue: 0x77))
        )
        let two = try store.put(.notebookNotes, id: "n", fields: Self.note("b"))
        #expect(two.version.hlc == one.version.hlc + 1, "the same millisecond counts up")
        clock.advance(by: -3600)
        let three = try store.delete(.notebookNotes, id: "n")
        #expect(three.version.hlc == two.version.hlc + 1, "a clock set back does not move versions back")
    }

    @Test("the digests are current after every kind of change, and equal ones rebuilt from the rows")
    func digestsKeptCurrent() throws {
        let (store, _) = try Self.device(1)
        let (other, _) = try Self.device(2)
        try store.put(.conversations, id: "c", fields: ["title": .text("c"), "created_at": .integer(1)])
        try store.put(
            .messages, id: "m",
            fields: ["conversation_id": .text("c"), "sender": .text("me"), "body": .text("hi"), "sent_at": .integer(2)])
        try store.put(.notebookNotes, id: "n", fields: Self.note("a"))
        try store.put(.notebookNotes, id: "n", fields: Self.note("b"))
        try store.delete(.conversations, id: "c")
        try other.put(.plans, id: "p", fields: ["title": .text("p"), "body": .text("p")])
        try store.apply(try Self.everything(other))
        #expect(try store.syncSummary()?.digests == Self.expectedDigests(store))
        let summary = try #require(try store.syncSummary())
        #expect(summary.digests[StoreCategory.allCases.firstIndex(of: .messages)!].count == 1)
        // Collecting the tombstones takes them out of the digest too.
        #expect(try store.collectTombstones(.messages, throughSeq: summary.seq) == 1)
        #expect(try store.collectTombstones(.conversations, throughSeq: summary.seq) == 1)
        #expect(try store.row(.messages, id: "m") == nil)
        #expect(try store.syncSummary()?.digests == Self.expectedDigests(store))
    }

    struct Race: Sendable, CustomTestStringConvertible {
        let name: String
        let category: StoreCategory
        /// Which write is later by the clock: the edit (true) or the deletion.
        let editIsLater: Bool
        /// What both devices hold in the end: a tombstone (true) or the edit.
        let deleted: Bool
        var testDescription: String { name }
    }

    static let races: [Race] = [
        Race(
            name: "a note edited after its deletion comes back", category: .notebookNotes, editIsLater: true,
            deleted: false),
        Race(
            name: "a note deleted after its edit stays deleted", category: .notebookNotes, editIsLater: false,
            deleted: true),
        Race(
            name: "a message edit racing its deletion folds into the deletion", category: .messages, editIsLater: true,
            deleted: true),
        Race(
            name: "a message deleted after its edit stays deleted", category: .messages, editIsLater: false,
            deleted: true),
        Race(
            name: "a memory event forgotten stays forgotten", category: .memoryEvents, editIsLater: true, deleted: true),
        Race(name: "a plan edited after its deletion comes back", category: .plans, editIsLater: true, deleted: false),
    ]

    static func fields(_ category: StoreCategory, _ body: String) -> [String: StoreValue] {
        switch category {
        case .messages:
            ["conversation_id": .text("c"), "sender": .text("me"), "body": .text(body), "sent_at": .integer(1)]
        case .memoryEvents: ["kind": .text("fact"), "body": .text(body), "occurred_at": .integer(1)]
        case .plans, .notebookNotes: ["title": .text("t"), "body": .text(body)]
        default: [:]
        }
    }

    @Test(
        "an edit and a deletion made without seeing each other fold by the category's rule, in either order",
        arguments: races)
    func editRacingDelete(_ race: Race) throws {
        let (phone, phoneClock) = try Self.device(1)
        let (laptop, laptopClock) = try Self.device(2)
        try phone.put(.conversations, id: "c", fields: ["title": .text("c"), "created_at": .integer(1)])
        try phone.put(race.category, id: "r", fields: Self.fields(race.category, "first"))
        try laptop.apply(try Self.everything(phone))
        // Apart: the phone edits, the laptop deletes; whichever the race says comes later by the clock.
        (race.editIsLater ? phoneClock : laptopClock).advance(by: 10)
        let edit = try phone.put(race.category, id: "r", fields: Self.fields(race.category, "edited"))
        let deletion = try laptop.delete(race.category, id: "r")
        #expect((edit.version > deletion.version) == race.editIsLater)
        // Together again, in both directions.
        try phone.apply(try Self.everything(laptop))
        try laptop.apply(try Self.everything(phone))
        for store in [phone, laptop] {
            let row = try #require(try store.row(race.category, id: "r"))
            #expect(row.isDeleted == race.deleted)
            #expect(row == (race.deleted ? deletion : edit))
        }
        #expect(try phone.syncSummary()?.digests == laptop.syncSummary()?.digests)
    }

    @Test("a message of a deletion is final: it cannot be written again, nor moved to another conversation")
    func finalDeletions() throws {
        let (store, _) = try Self.device(1)
        try store.put(.conversations, id: "c", fields: ["title": .text("c"), "created_at": .integer(1)])
        try store.put(.conversations, id: "d", fields: ["title": .text("d"), "created_at": .integer(1)])
        try store.put(.messages, id: "m", fields: Self.fields(.messages, "hi"))
        var moved = Self.fields(.messages, "hi")
        moved["conversation_id"] = .text("d")
        #expect(throws: DeviceStoreError.self) { try store.put(.messages, id: "m", fields: moved) }
        try store.put(.messages, id: "m", fields: Self.fields(.messages, "edited"))
        try store.delete(.messages, id: "m")
        #expect(throws: DeviceStoreError.self) {
            try store.put(.messages, id: "m", fields: Self.fields(.messages, "back"))
        }
        #expect(try store.row(.messages, id: "m")?.isDeleted == true)
    }

    @Test("a message that arrives for a deleted conversation is deleted on arrival, and both devices agree")
    func orphanMessage() throws {
        let (phone, _) = try Self.device(1)
        let (laptop, _) = try Self.device(2)
        try phone.put(.conversations, id: "c", fields: ["title": .text("c"), "created_at": .integer(1)])
        try laptop.apply(try Self.everything(phone))
        try laptop.delete(.conversations, id: "c")
        try phone.put(.messages, id: "late", fields: Self.fields(.messages, "are you there?"))
        let report = try laptop.apply(try Self.everything(phone))
        #expect(report.written.map(\.id) == ["late"] && report.written.first?.isDeleted == true)
        try phone.apply(try Self.everything(laptop))
        #expect(try phone.row(.messages, id: "late")?.isDeleted == true)
        #expect(try phone.syncSummary()?.digests == laptop.syncSummary()?.digests)
    }

    static func contact(_ name: String, hash: Data) -> [String: StoreValue] {
        [
            "display_name": .text(name), "pubkey": .blob(Data(repeating: 1, count: 32)), "user_id_hash": .blob(hash),
            "account_signing_pubkey": .blob(Data(repeating: 2, count: 32)),
            "channel_key": .blob(Data(repeating: 3, count: 32)),
        ]
    }

    @Test("two devices adding one person: the newer contact stays on both, the other is tombstoned")
    func duplicateContacts() throws {
        let hash = Data(repeating: 9, count: 32)
        let (phone, _) = try Self.device(1)
        let (laptop, laptopClock) = try Self.device(2)
        laptopClock.advance(by: 1)
        try phone.put(.contacts, id: "ada-phone", fields: Self.contact("Ada", hash: hash))
        let newer = try laptop.put(.contacts, id: "ada-laptop", fields: Self.contact("Ada L.", hash: hash))
        try phone.apply(try Self.everything(laptop))
        try laptop.apply(try Self.everything(phone))
        try phone.apply(try Self.everything(laptop))
        for store in [phone, laptop] {
            #expect(try store.contact(userIDHash: hash) == newer)
            #expect(try store.row(.contacts, id: "ada-phone")?.isDeleted == true)
        }
        #expect(try phone.syncSummary()?.digests == laptop.syncSummary()?.digests)
    }

    @Test("the last local write moves with puts, deletes and a contact tombstoned on arrival, not with rows applied")
    func lastLocalWrite() throws {
        let (phone, phoneClock) = try Self.device(1)
        let (laptop, _) = try Self.device(2)
        #expect(try phone.lastLocalWrite() == 0 && phone.isUnsynced)
        try phone.put(.notebookNotes, id: "n", fields: Self.note("milk"))
        let afterPut = try phone.lastLocalWrite()
        #expect(try afterPut > 0 && !phone.isUnsynced)
        // What arrives from a sibling is no local write: a loop that pushed it back would never rest.
        try laptop.apply(try Self.everything(phone))
        #expect(try laptop.lastLocalWrite() == 0 && !laptop.isUnsynced)
        try laptop.delete(.notebookNotes, id: "n")
        let afterDelete = try laptop.lastLocalWrite()
        #expect(afterDelete > 0)
        #expect(try laptop.tombstones(.notebookNotes) == (1, afterDelete))
        // A contact of a person this store holds arrives newer: the local one is tombstoned here, a local write.
        let hash = Data(repeating: 7, count: 32)
        try laptop.put(.contacts, id: "ada-laptop", fields: Self.contact("Ada", hash: hash))
        let beforeArrival = try laptop.lastLocalWrite()
        phoneClock.advance(by: 1)
        try phone.put(.contacts, id: "ada-phone", fields: Self.contact("Ada P.", hash: hash))
        #expect(try phone.lastLocalWrite() > afterPut)
        try laptop.apply(try phone.rows(.contacts))
        #expect(try laptop.row(.contacts, id: "ada-laptop")?.isDeleted == true)
        #expect(try laptop.lastLocalWrite() > beforeArrival)
    }

    @Test("a round's end is recorded per sibling, replacing the last, with the clock difference if known")
    func recordedRounds() throws {
        let (store, _) = try Self.device(1)
        #expect(try store.siblingRounds().isEmpty)
        let sibling = AuthorTag(rawValue: 0xfeed)
        let first = Date(timeIntervalSince1970: 1_800_000_000.25)
        try store.recordRound(with: sibling, at: first, clockDifference: -1500)
        try store.recordRound(with: AuthorTag(rawValue: 3), at: first, clockDifference: nil)
        #expect(try store.siblingRounds().first { $0.sibling == sibling }?.clockDifference == -1500)
        #expect(try !store.isUnsynced)
        try store.recordRound(
            with: sibling, at: first.addingTimeInterval(60), clockDifference: 20, agreed: [.messages, .plans])
        let rounds = try store.siblingRounds()
        #expect(rounds.count == 2)
        let last = try #require(rounds.first { $0.sibling == sibling })
        #expect(last.clockDifference == 20 && abs(last.at.timeIntervalSince(first) - 60) < 0.002)
        #expect(last.agreed == [.messages, .plans])
        #expect(rounds.first { $0.sibling == AuthorTag(rawValue: 3) }?.clockDifference == nil)
    }

    @Test("a row more than five minutes ahead of this clock is held, and applied once the clock catches up")
    func heldRows() throws {
        let (fast, _) = try Self.device(1, skew: 3600)
        let (store, clock) = try Self.device(2)
        let row = try fast.put(.notebookNotes, id: "n", fields: Self.note("from the future"))
        let before = try #require(try store.syncSummary())
        let report = try store.apply([row])
        #expect(report.held == [row] && report.applied.isEmpty)
        #expect(try store.row(.notebookNotes, id: "n") == nil)
        #expect(try store.syncSummary()?.hlc == before.hlc, "a held row does not move the clock")
        clock.advance(by: 3600 - 299)
        #expect(try store.apply([row]).applied == [row])
        #expect(try store.put(.notebookNotes, id: "mine", fields: Self.note("x")).version > row.version)
    }

    @Test("rows that are not the category's are refused one by one; duplicates and older versions change nothing")
    func refusedAndIgnored() throws {
        let (store, _) = try Self.device(1)
        let (other, _) = try Self.device(2)
        let old = try other.put(.notebookNotes, id: "n", fields: Self.note("old"))
        let new = try other.put(.notebookNotes, id: "n", fields: Self.note("new"))
        let bad = StoreRow(
            category: .plans, id: "p", version: new.version, isDeleted: false, fields: ["colour": .text("red")])
        let report = try store.apply([new, bad, old, new])
        #expect(report.applied == [new] && report.ignored == 2 && report.refused.count == 1)
        #expect(report.refused.first?.contains("no field colour") == true)
        #expect(try store.rows(.notebookNotes) == [new])
    }

    @Test(
        "three devices, seeded random writes and partial, duplicated, reordered exchanges: one fold, as the text says")
    func convergence() throws {
        for seed in UInt64(1)...6 {
            var random = SeededGenerator(seed: seed)
            let devices = try [Self.device(1), Self.device(2, skew: -90), Self.device(3, skew: 120)]
            let stores = devices.map(\.0)
            try stores[0].put(.conversations, id: "c", fields: ["title": .text("c"), "created_at": .integer(1)])
            for store in stores.dropFirst() { try store.apply(try Self.everything(stores[0])) }
            var written: [StoreRow] = []
            let hashes = (0..<2).map { Data(repeating: UInt8($0 + 1), count: 32) }
            for step in 0..<300 {
                let which = Int.random(in: 0..<3, using: &random)
                let store = stores[which]
                devices[which].1.advance(by: Double.random(in: 0...0.01, using: &random))
                let category: StoreCategory = [.notebookNotes, .messages, .plans, .memoryEvents, .contacts]
                    .randomElement(using: &random)!
                let id = "\(category.rawValue)-\(Int.random(in: 0..<6, using: &random))"
                do {
                    if Bool.random(using: &random) || category == .contacts {
                        let fields =
                            category == .contacts
                            ? Self.contact("p\(step)", hash: hashes.randomElement(using: &random)!)
                            : Self.fields(category, "s\(step)")
                        written.append(try store.put(category, id: id, fields: fields))
                    } else {
                        written.append(try store.delete(category, id: id))
                    }
                } catch is DeviceStoreError {}  // deleted for good, nothing to delete, a contact's hash held: refused
                if Int.random(in: 0..<4, using: &random) == 0 {
                    let from = stores.randomElement(using: &random)!
                    var rows = try Self.everything(from).filter { _ in Bool.random(using: &random) }
                    rows += rows.prefix(3)
                    rows.shuffle(using: &random)
                    written += try stores.randomElement(using: &random)!.apply(rows).written
                }
            }
            for _ in 0..<3 {
                for from in stores {
                    for to in stores where to !== from { written += try to.apply(try Self.everything(from)).written }
                }
            }
            let first = try Self.everything(stores[0])
            for store in stores.dropFirst() {
                #expect(
                    try Self.everything(store).sorted { $0.id < $1.id } == first.sorted { $0.id < $1.id },
                    "seed \(seed)")
                #expect(try store.syncSummary()?.digests == stores[0].syncSummary()?.digests, "seed \(seed)")
            }
            #expect(try stores[0].syncSummary()?.digests == Self.expectedDigests(stores[0]))
            // The fold is the text's: for every row, the version that outranks every other version ever written.
            var expected: [String: StoreRow] = [:]
            for row in written where row.category != .contacts {
                let key = "\(row.category.rawValue)/\(row.id)"
                if let held = expected[key], !row.outranks(held) { continue }
                expected[key] = row
            }
            for (key, row) in expected {
                #expect(try stores[0].row(row.category, id: row.id) == row, "seed \(seed), \(key)")
            }
            // One live contact per userIDHash.
            let live = try stores[0].rows(.contacts)
            #expect(Set(live.compactMap { $0["user_id_hash"] }).count == live.count, "seed \(seed)")
        }
    }

    @Test("a store written before versions migrates: counters become readings, and items follow on first use")
    func migration() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrate-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("store.sqlite").path
        do {
            let old = try SQLiteDatabase(path: path)
            try old.migrate(component: "device-store", migrations: Array(DeviceStore.schemaMigrations.prefix(1)))
            try old.execute(
                "INSERT INTO notebook_notes (id, version, deleted, title, body) VALUES ('n', 3, 0, 't', 'b')", [])
            try old.execute("INSERT INTO plans (plan_id, version, deleted) VALUES ('p', 2, 1)", [])
            old.close()
        }
        let store = try DeviceStore(
            path: path, writer: try StoreWriter(author: AuthorTag(rawValue: 5), accountSeed: Self.seed))
        #expect(try store.row(.notebookNotes, id: "n")?.version == RowVersion(hlc: 3, author: .migrated))
        #expect(try store.row(.plans, id: "p")?.isDeleted == true)
        #expect(try store.syncSummary()?.digests == Self.expectedDigests(store))
        let edited = try store.put(.notebookNotes, id: "n", fields: Self.note("new"))
        #expect(edited.version > RowVersion(hlc: 3, author: .migrated))
        #expect(try store.syncSummary()?.digests == Self.expectedDigests(store))
    }
}
