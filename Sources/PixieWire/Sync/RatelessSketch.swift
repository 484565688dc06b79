import Foundation

/// One coded symbol of a rateless invertible Bloom lookup table (docs/pixie-sync.md, "Symbols"): the XOR of the
/// items mapped to it, the XOR of their checks, and how many there are (mod 2^32).
///
///     sum (16) ‖ check (8) ‖ count (4)
public struct CodedSymbol: Sendable, Hashable {
    public static let byteCount = 28

    var sum: UInt128
    var check: UInt64
    var count: UInt32

    public init() {
        sum = 0
        check = 0
        count = 0
    }

    var isZero: Bool { sum == 0 && check == 0 && count == 0 }

    /// Adds (`sign` 1) or takes away (`sign` -1) one item.
    mutating func toggle(_ item: SyncItem, sign: Int32) {
        sum ^= item.value
        check ^= item.check
        count = count &+ UInt32(bitPattern: sign)
    }

    /// This symbol minus `other`: the symbol of the set difference.
    func subtracting(_ other: CodedSymbol) -> CodedSymbol {
        var out = self
        out.sum ^= other.sum
        out.check ^= other.check
        out.count = count &- other.count
        return out
    }

    /// The item it holds if it holds exactly one, added (1) or taken away (-1); nil otherwise.
    var pure: (item: SyncItem, sign: Int32)? {
        guard count == 1 || count == .max else { return nil }
        let item = SyncItem(sum)
        guard item.check == check else { return nil }
        return (item, count == 1 ? 1 : -1)
    }

    public var encoded: Data {
        var out = SyncItem(sum).rawRepresentation
        out.appendUInt64(check)
        out.appendUInt32(count)
        return out
    }

    init?(reading reader: inout WireReader) {
        guard let sum = reader.bytes(16), let check = reader.uint64(), let count = reader.uint32() else { return nil }
        self.sum = sum.reduce(UInt128(0)) { $0 << 8 | UInt128($1) }
        self.check = check
        self.count = count
    }
}

/// The encoder of a rateless invertible Bloom lookup table (Yang, Gilad, Alizadeh, "Practical Rateless Set
/// Reconciliation", SIGCOMM 2024), with the mapping docs/pixie-sync.md ("Which symbols an item is mapped to")
/// fixes byte for byte: an item is in symbol 0, and then in an increasing sequence of symbols, landing in
/// symbol `i` with probability about 1 / (1 + i/2). A set of any size has an endless stream of symbols; the
/// difference of two sets of `d` items decodes from about 1.35·d of them.
public enum RatelessSketch {
    /// Calls `body` with each symbol index of `item` below `end`, in increasing order (0 first).
    public static func forEachIndex(of item: SyncItem, below end: Int, _ body: (Int) -> Void) {
        guard end > 0 else { return }
        body(0)
        var state = item.check
        var index: UInt64 = 0
        while true {
            state = state &* 0xda94_2042_e4dd_58b5
            let step = ((Double(index) + 1.5) * (4_294_967_296.0 / (Double(state) + 1).squareRoot() - 1)).rounded(.up)
            guard step < 4_294_967_296.0 else { return }
            index += max(1, UInt64(step))
            guard index < UInt64(end) else { return }
            body(Int(index))
        }
    }

    /// The symbols `range` of the set `items`.
    public static func encode<S: Sequence>(_ items: S, symbols range: Range<Int>) -> [CodedSymbol]
    where S.Element == SyncItem {
        var symbols = [CodedSymbol](repeating: CodedSymbol(), count: range.count)
        for item in items {
            forEachIndex(of: item, below: range.upperBound) { index in
                if index >= range.lowerBound { symbols[index - range.lowerBound].toggle(item, sign: 1) }
            }
        }
        return symbols
    }
}

/// The decoder: given this device's items and the other side's symbols, as many as it takes, the exact
/// symmetric difference (docs/pixie-sync.md, "Decoding"). It subtracts its own symbols from the other's and
/// peels pure symbols; symbols that arrive later continue where the last ones stopped.
public struct RatelessDecoder: Sendable {
    /// The most symbols one decoder takes: 1 Mi (28 MiB of symbols, about 750,000 differences), past which a
    /// difference is better sent as a snapshot.
    public static let maximumSymbolCount = 1 << 20

    private let local: [SyncItem]
    private let localSet: Set<SyncItem>
    private var difference: [CodedSymbol] = []
    private var peeled: Set<SyncItem> = []
    /// Items the other side has and this one lacks.
    public private(set) var remoteOnly: [SyncItem] = []
    /// Items this side has and the other lacks.
    public private(set) var localOnly: [SyncItem] = []

    public init<S: Sequence>(local: S) where S.Element == SyncItem {
        self.local = Array(local)
        self.localSet = Set(self.local)
    }

    /// How many of the other side's symbols it has taken.
    public var symbolCount: Int { difference.count }

    /// True once the difference is known: every symbol peeled to zero.
    public var isComplete: Bool { !difference.isEmpty && difference.allSatisfy(\.isZero) }

    /// Takes the other side's symbols from index ``symbolCount`` on, and peels what it can. Returns
    /// ``isComplete``. Throws if the symbols would pass ``maximumSymbolCount``, or peel to an item this side holds
    /// as the other's, or lacks as its own (symbols that were not made from a set).
    @discardableResult
    public mutating func add(_ remote: [CodedSymbol]) throws(PixieWireError) -> Bool {
        let range = difference.count..<(difference.count + remote.count)
        guard range.upperBound <= Self.maximumSymbolCount else {
            throw PixieWireError(
                .malformed, "a reconciliation past \(Self.maximumSymbolCount) symbols; absorb a snapshot instead")
        }
        let own = RatelessSketch.encode(local, symbols: range)
        difference += zip(remote, own).map { $0.subtracting($1) }
        // Items already peeled are in the new symbols too: take them out (a remote-only item counts +1 there).
        for (item, sign) in remoteOnly.map({ ($0, Int32(1)) }) + localOnly.map({ ($0, Int32(-1)) }) {
            RatelessSketch.forEachIndex(of: item, below: range.upperBound) { index in
                if index >= range.lowerBound { difference[index].toggle(item, sign: -sign) }
            }
        }
        var pending = Array(range)
        while let index = pending.popLast() {
            guard let (item, sign) = difference[index].pure, peeled.insert(item).inserted else { continue }
            // A symbol that peels to an item this side holds (as the other's) or lacks (as its own) was not made
            // from a set: the sender is broken, or the bytes were forged.
            guard (sign == -1) == localSet.contains(item) else {
                throw PixieWireError(
                    .malformed, "the symbols do not describe a set: decoding them contradicts this one")
            }
            if sign == 1 { remoteOnly.append(item) } else { localOnly.append(item) }
            RatelessSketch.forEachIndex(of: item, below: difference.count) { other in
                difference[other].toggle(item, sign: -sign)
                pending.append(other)
            }
        }
        return isComplete
    }
}
