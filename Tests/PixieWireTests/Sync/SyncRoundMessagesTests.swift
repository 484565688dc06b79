import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("The reconcile round's messages: docs/pixie-sync.md, Messages")
struct SyncRoundMessagesTests {
    static let opening = SyncRoundHeader(
        round: try! SyncRoundID(initiator: Data(repeating: 0xa1, count: 16)),
        sender: try! RelaySubject(rawRepresentation: Data(repeating: 0xb2, count: 32)))
    static let answered = SyncRoundHeader(
        round: try! opening.round.answered(by: Data(repeating: 0xc3, count: 16)), sender: opening.sender)
    static let digests = (1...8).map { SyncDigest(count: UInt32($0), sum: UInt128($0) << 100 | 0xff) }

    /// One of each, for SiblingMessageTests too.
    static let every: [SiblingMessage] = [
        .syncDigest(
            SyncDigests(header: opening, phase: .open, wallClock: 1_800_000_000_123, hlc: 99, digests: digests)),
        .syncDigest(SyncDigests(header: answered, phase: .closeAnswer, wallClock: 5, hlc: 6, digests: digests)),
        .syncSketch(
            SyncSketch(
                header: answered, category: 8, first: 48, total: 1000,
                content: .items([SyncItem(idTag: 1, versionTag: 2), SyncItem(idTag: 3, versionTag: 1 << 63)]))),
        .syncWant(
            SyncWant(
                header: answered,
                entries: [
                    .init(category: 1, kind: .moreSymbols(first: 48, count: 48)),
                    .init(category: 5, kind: .items([SyncItem(idTag: 9, versionTag: 9)])),
                    .init(category: 2, kind: .everything),
                ])),
        .syncRows(SyncRows(header: answered, batch: 3, isLast: true, records: Data([5, 0, 0, 0, 2, 0xaa, 0xbb]))),
        .syncRows(SyncRows(header: answered, batch: 0, isLast: false, records: Data())),
    ]

    @Test("each goes out under its own type and comes back the same", arguments: every)
    func roundTrip(_ message: SiblingMessage) throws {
        #expect(try SiblingMessage(type: message.type, payload: try message.encoded) == message)
        #expect(message.type.wakeClass == .silent)
    }

    @Test("a digest message is 241 bytes, laid out as the table says")
    func digestLayout() throws {
        let message = SyncDigests(
            header: Self.opening, phase: .open, wallClock: 0x0102_0304_0506_0708, hlc: 0x1112_1314_1516_1718,
            digests: Self.digests)
        let bytes = try message.encoded
        #expect(bytes.count == 241)
        #expect(bytes.prefix(16) == Data(repeating: 0xa1, count: 16))
        #expect(bytes[16..<32] == Data(count: 16))
        #expect(bytes[32..<64] == Data(repeating: 0xb2, count: 32))
        #expect(bytes[64] == 1)
        #expect(bytes[65..<73] == Data([1, 2, 3, 4, 5, 6, 7, 8]))
        #expect(bytes[73..<81] == Data([0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]))
        #expect(bytes[81..<101] == Self.digests[0].encoded)
        #expect(bytes.suffix(20) == Self.digests[7].encoded)
        #expect(Self.digests[0].encoded.prefix(4) == Data([0, 0, 0, 1]))
        // A round between equal stores: one of these each way, 482 bytes for all eight categories.
        #expect(2 * bytes.count <= 512)
    }

    struct Malformed: Sendable, CustomTestStringConvertible {
        let name: String
        let type: PayloadType
        let payload: Data
        var testDescription: String { name }
    }

    static func bytes(_ message: SiblingMessage) -> Data { try! message.encoded }

    static let malformed: [Malformed] = {
        let digest = bytes(every[0])
        let answeredDigest = bytes(every[1])
        let sketch = bytes(every[2])
        let want = bytes(every[3])
        let rows = bytes(every[4])
        func with(_ data: Data, _ offset: Int, _ byte: UInt8) -> Data {
            var copy = data
            copy[offset] = byte
            return copy
        }
        return [
            .init(name: "a digest a byte short", type: .syncDigest, payload: digest.dropLast()),
            .init(name: "a digest a byte long", type: .syncDigest, payload: digest + [0]),
            .init(name: "a digest of phase 5", type: .syncDigest, payload: with(digest, 64, 5)),
            .init(name: "an answer with no responder half", type: .syncDigest, payload: with(digest, 64, 2)),
            .init(name: "an opening with a responder half", type: .syncDigest, payload: with(answeredDigest, 64, 1)),
            .init(name: "a sketch of category 0", type: .syncSketch, payload: with(sketch, 64, 0)),
            .init(name: "a sketch of category 9", type: .syncSketch, payload: with(sketch, 64, 9)),
            .init(name: "a sketch of form 3", type: .syncSketch, payload: with(sketch, 65, 3)),
            .init(name: "a sketch of items read as symbols", type: .syncSketch, payload: with(sketch, 65, 1)),
            .init(name: "a sketch with an item too many", type: .syncSketch, payload: sketch + Data(count: 16)),
            .init(name: "a sketch cut inside an item", type: .syncSketch, payload: sketch.dropLast()),
            .init(name: "a want of no entries", type: .syncWant, payload: with(want, 64, 0)),
            .init(name: "a want of 9 entries", type: .syncWant, payload: with(want, 64, 9)),
            .init(name: "a want of kind 4", type: .syncWant, payload: with(want, 66, 4)),
            .init(name: "a want with bytes after its entries", type: .syncWant, payload: want + [0]),
            .init(name: "a want cut short", type: .syncWant, payload: want.dropLast(5)),
            .init(name: "rows whose last flag is 2", type: .syncRows, payload: with(rows, 66, 2)),
            .init(name: "rows with record code 10", type: .syncRows, payload: with(rows, 67, 10)),
            .init(name: "rows with record code 0", type: .syncRows, payload: with(rows, 67, 0)),
            .init(name: "rows whose record runs past the end", type: .syncRows, payload: rows.dropLast()),
            .init(name: "rows with a stray byte", type: .syncRows, payload: rows + [1]),
            .init(name: "rows without their header", type: .syncRows, payload: rows.prefix(40)),
        ]
    }()

    @Test("malformed messages are refused, never misread", arguments: malformed)
    func refused(_ example: Malformed) {
        #expect(throws: PixieWireError.self) { try SiblingMessage(type: example.type, payload: example.payload) }
    }

    @Test("bounds hold when encoding too")
    func encodingBounds() throws {
        let header = Self.answered
        #expect(throws: PixieWireError.self) {
            try SyncDigests(
                header: header, phase: .answer, wallClock: 0, hlc: 0, digests: Array(Self.digests.prefix(7))
            )
            .encoded
        }
        #expect(throws: PixieWireError.self) {
            try SyncDigests(header: Self.opening, phase: .close, wallClock: 0, hlc: 0, digests: Self.digests).encoded
        }
        #expect(throws: PixieWireError.self) {
            try SyncSketch(header: header, category: 1, first: 0, total: 0, content: .items([])).encoded
        }
        let tooMany = [SyncItem](repeating: SyncItem(idTag: 1, versionTag: 1), count: SyncSketch.maximumItemCount + 1)
        #expect(throws: PixieWireError.self) {
            try SyncSketch(header: header, category: 1, first: 0, total: 0, content: .items(tooMany)).encoded
        }
        #expect(throws: PixieWireError.self) {
            try SyncWant(header: header, entries: [.init(category: 1, kind: .moreSymbols(first: 0, count: 65_537))])
                .encoded
        }
        // Eight entries of 3,200 items each would not fit one envelope.
        let full = [SyncItem](repeating: SyncItem(idTag: 1, versionTag: 1), count: SyncWant.maximumItemCount)
        #expect(throws: PixieWireError.self) {
            try SyncWant(header: header, entries: (1...8).map { .init(category: $0, kind: .items(full)) }).encoded
        }
        var record = Data([5])
        record.append(contentsOf: [0, 0, 0xc0, 0x01])
        record += Data(count: 0xc001)
        #expect(throws: PixieWireError.self) {
            try SyncRows(header: header, batch: 0, isLast: true, records: record).encoded
        }
        // The largest of each fits the envelope.
        let symbols = [CodedSymbol](repeating: CodedSymbol(), count: SyncSketch.maximumSymbolCount)
        let sketch = try SyncSketch(header: header, category: 1, first: 0, total: 0, content: .symbols(symbols)).encoded
        let items = try SyncSketch(
            header: header, category: 1, first: 0, total: 0,
            content: .items(
                [SyncItem](repeating: SyncItem(idTag: 1, versionTag: 1), count: SyncSketch.maximumItemCount))
        ).encoded
        for payload in [sketch, items] { #expect(payload.count <= SealedSenderEnvelope.maximumPayloadByteCount) }
    }

    @Test("the round id's halves: an opening is all zero on the responder's side")
    func roundID() throws {
        let id = try SyncRoundID(initiator: Data(repeating: 1, count: 16))
        #expect(id.isOpening)
        let answered = try id.answered(by: Data(repeating: 2, count: 16))
        #expect(!answered.isOpening && answered.initiator == id.initiator)
        #expect(answered.rawRepresentation.count == 32)
        #expect(throws: PixieWireError.self) { try SyncRoundID(initiator: Data(count: 15)) }
    }
}
