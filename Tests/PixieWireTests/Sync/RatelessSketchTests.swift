import Foundation
import PixieWire
import SiblingsTestSupport
import Testing

@Suite("RatelessSketch and RatelessDecoder: docs/pixie-sync.md, Reconciliation")
struct RatelessSketchTests {
    static func items(_ count: Int, _ random: inout SeededGenerator) -> [SyncItem] {
        (0..<count).map { _ in SyncItem(idTag: random.next(), versionTag: random.next()) }
    }

    @Test("an item's symbols are the ones the text's formula gives (a second reading, in Python)")
    func mapping() throws {
        let oracle = try ReferenceOracle()
        var random = SeededGenerator(seed: 11)
        for _ in 0..<40 {
            let item = SyncItem(idTag: random.next(), versionTag: random.next())
            let expected = try oracle.call("riblt_indices", ["item": item.rawRepresentation, "below": 1 << 20])
            var indices: [Int] = []
            RatelessSketch.forEachIndex(of: item, below: 1 << 20) { indices.append($0) }
            #expect(indices == expected["indices"] as? [Int])
        }
    }

    @Test("an item lands in symbol i with probability about 1 / (1 + i/2)")
    func density() {
        var random = SeededGenerator(seed: 12)
        let items = Self.items(40_000, &random)
        var hits = [Int](repeating: 0, count: 64)
        for item in items { RatelessSketch.forEachIndex(of: item, below: 64) { hits[$0] += 1 } }
        #expect(hits[0] == items.count)
        for index in [1, 2, 10, 40, 63] {
            let expected = Double(items.count) / (1 + Double(index) / 2)
            #expect(abs(Double(hits[index]) - expected) < 0.06 * expected, "symbol \(index): \(hits[index])")
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let shared: Int
        let remoteOnly: Int
        let localOnly: Int
        var testDescription: String { "\(shared) shared, \(remoteOnly) + \(localOnly) different" }
    }

    @Test(
        "the decoder finds exactly the symmetric difference, streaming symbols until it does",
        arguments: [
            Case(shared: 2000, remoteOnly: 0, localOnly: 0), Case(shared: 2000, remoteOnly: 1, localOnly: 0),
            Case(shared: 2000, remoteOnly: 0, localOnly: 1), Case(shared: 5000, remoteOnly: 5, localOnly: 5),
            Case(shared: 5000, remoteOnly: 60, localOnly: 40), Case(shared: 3000, remoteOnly: 700, localOnly: 300),
            Case(shared: 0, remoteOnly: 50, localOnly: 0),
        ])
    func decodes(_ example: Case) throws {
        var random = SeededGenerator(seed: UInt64(example.shared + example.remoteOnly * 7 + example.localOnly * 13))
        let shared = Self.items(example.shared, &random)
        let remoteOnly = Self.items(example.remoteOnly, &random)
        let localOnly = Self.items(example.localOnly, &random)
        let remote = shared + remoteOnly
        var decoder = RatelessDecoder(local: (shared + localOnly).shuffled())
        var sent = 0
        var batch = 48
        while !decoder.isComplete {
            let symbols = RatelessSketch.encode(remote.shuffled(), symbols: sent..<(sent + batch))
            try decoder.add(symbols)
            sent += batch
            batch = sent
            #expect(sent <= 1 << 16, "no decoding after \(sent) symbols")
            if sent > 1 << 16 { return }
        }
        #expect(Set(decoder.remoteOnly) == Set(remoteOnly) && decoder.remoteOnly.count == remoteOnly.count)
        #expect(Set(decoder.localOnly) == Set(localOnly) && decoder.localOnly.count == localOnly.count)
        let differences = example.remoteOnly + example.localOnly
        #expect(sent <= max(48, 4 * differences), "took \(sent) symbols for \(differences) differences")
    }

    @Test("a difference of d items decodes from about 1.35·d symbols once d is large")
    func overhead() throws {
        var random = SeededGenerator(seed: 99)
        let shared = Self.items(1000, &random)
        let extra = Self.items(2000, &random)
        let remote = RatelessSketch.encode(shared + extra, symbols: 0..<4000)
        var decoder = RatelessDecoder(local: shared)
        var used = 0
        while !decoder.isComplete, used < remote.count {
            try decoder.add(Array(remote[used..<(used + 50)]))
            used += 50
        }
        #expect(decoder.isComplete)
        #expect(used <= 3000, "2000 differences took \(used) symbols")
    }

    @Test("symbols encode to 28 bytes and back")
    func symbolBytes() throws {
        var random = SeededGenerator(seed: 5)
        let symbols = RatelessSketch.encode(Self.items(10, &random), symbols: 0..<4)
        for symbol in symbols { #expect(symbol.encoded.count == CodedSymbol.byteCount) }
        let header = SyncRoundHeader(
            round: try SyncRoundID(initiator: Data(repeating: 1, count: 16)),
            sender: try RelaySubject(rawRepresentation: Data(repeating: 2, count: 32)))
        let sketch = SyncSketch(header: header, category: 1, first: 0, total: 10, content: .symbols(symbols))
        #expect(try SyncSketch(decoding: try sketch.encoded) == sketch)
    }

    @Test("a decoder refuses to grow past its limit")
    func limit() throws {
        var decoder = RatelessDecoder(local: [])
        #expect(throws: PixieWireError.self) {
            try decoder.add([CodedSymbol](repeating: CodedSymbol(), count: RatelessDecoder.maximumSymbolCount + 1))
        }
        #expect(decoder.symbolCount == 0)
    }
}

@Suite("RatelessDecoder against symbols not made from a set")
struct RatelessForgeryTests {
    @Test("a symbol that peels to an item this side has, as the other's, is refused")
    func contradiction() throws {
        let mine = [SyncItem(idTag: 1, versionTag: 2), SyncItem(idTag: 3, versionTag: 4)]
        // The other side claims to have both of mine and, in symbol 0, one of mine a second time.
        let symbols = RatelessSketch.encode(mine + mine.prefix(1), symbols: 0..<1)
        var decoder = RatelessDecoder(local: mine)
        #expect(throws: PixieWireError.self) { try decoder.add(symbols) }
        // And one that says this side holds an item it does not: a symbol of count -1, forged in its bytes.
        let forged = SyncItem(idTag: 9, versionTag: 9)
        var bytes = Data(repeating: 1, count: 32) + Data(repeating: 2, count: 32)  // the round id and sender
        bytes += Data([5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]) + forged.rawRepresentation
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: forged.check >> UInt64(shift)))
        }
        bytes += Data([0xff, 0xff, 0xff, 0xff])
        let sketch = try SyncSketch(decoding: bytes)
        guard case .symbols(let received) = sketch.content else { throw PixieWireError(.malformed, "not symbols") }
        var empty = RatelessDecoder(local: [])
        #expect(throws: PixieWireError.self) { try empty.add(received) }
    }
}
