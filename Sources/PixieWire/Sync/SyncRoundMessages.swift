import Foundation

/// A reconcile round's id (docs/pixie-sync.md, "Rounds"): 16 random bytes of the initiator, then 16 of the
/// responder, zero in the opening message. A device accepts a round message only if its own half is in the id
/// of a round it has open, so a relay that replays an old message changes nothing.
public struct SyncRoundID: Sendable, Hashable, CustomStringConvertible {
    public static let byteCount = 32
    public static let halfByteCount = 16

    public let initiator: Data
    public let responder: Data

    /// The id of an opening: the initiator's half and sixteen zero bytes.
    public init(initiator: Data) throws(PixieWireError) {
        try self.init(initiator: initiator, responder: Data(count: Self.halfByteCount))
    }

    public init(initiator: Data, responder: Data) throws(PixieWireError) {
        guard initiator.count == Self.halfByteCount, responder.count == Self.halfByteCount else {
            throw PixieWireError(.malformed, "a sync round id is two halves of \(Self.halfByteCount) bytes")
        }
        self.initiator = initiator
        self.responder = responder
    }

    /// The same round with the responder's half.
    public func answered(by responder: Data) throws(PixieWireError) -> SyncRoundID {
        try SyncRoundID(initiator: initiator, responder: responder)
    }

    /// True in an opening: the responder's half is all zero.
    public var isOpening: Bool { responder.allSatisfy { $0 == 0 } }

    public var rawRepresentation: Data { initiator + responder }

    public var description: String { rawRepresentation.prefix(4).hexString + "…" }
}

/// The 64 bytes every round message starts with: the round's id and the sending device's inbox, which the
/// receiver looks up in the logged roster (sealed sender names no sender outside).
public struct SyncRoundHeader: Sendable, Hashable {
    public static let byteCount = SyncRoundID.byteCount + RelaySubject.byteCount

    public var round: SyncRoundID
    public var sender: RelaySubject

    public init(round: SyncRoundID, sender: RelaySubject) {
        self.round = round
        self.sender = sender
    }

    var encoded: Data { round.rawRepresentation + sender.rawRepresentation }

    init?(reading reader: inout WireReader) {
        guard let initiator = reader.bytes(SyncRoundID.halfByteCount),
            let responder = reader.bytes(SyncRoundID.halfByteCount), let sender = reader.bytes(RelaySubject.byteCount),
            let round = try? SyncRoundID(initiator: initiator, responder: responder),
            let subject = try? RelaySubject(rawRepresentation: sender)
        else { return nil }
        self.round = round
        self.sender = subject
    }

    static func checkCategory(_ code: UInt8, in what: String) throws(PixieWireError) {
        guard SyncItem.categoryCodes.contains(code) else {
            throw PixieWireError(.malformed, "\(what) names category \(code), not one of 1 to 8")
        }
    }
}

/// A device's eight digests at one point of a round (``PayloadType/syncDigest``; docs/pixie-sync.md,
/// "Messages"). The open and its answer compare the stores; the close carries the digests the responder should
/// hold once the rows are applied, and the close answer the responder's: those two are the round's
/// acknowledgements.
///
///     header (64) ‖ phase (1) ‖ wall clock (8, Unix ms) ‖ hlc (8) ‖ 8 × (count (4) ‖ sum (16))
public struct SyncDigests: Sendable, Equatable {
    public static let byteCount = SyncRoundHeader.byteCount + 1 + 8 + 8 + 8 * SyncDigest.byteCount

    public enum Phase: UInt8, Sendable, CaseIterable {
        case open = 1, answer = 2, close = 3, closeAnswer = 4
    }

    public var header: SyncRoundHeader
    public var phase: Phase
    /// The sender's wall clock, Unix milliseconds: the receiver tells how far apart their clocks are.
    public var wallClock: UInt64
    /// The sender's HLC reading.
    public var hlc: UInt64
    /// One digest per category, conversations (code 1) first.
    public var digests: [SyncDigest]

    public init(header: SyncRoundHeader, phase: Phase, wallClock: UInt64, hlc: UInt64, digests: [SyncDigest]) {
        self.header = header
        self.phase = phase
        self.wallClock = wallClock
        self.hlc = hlc
        self.digests = digests
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            guard digests.count == SyncItem.categoryCodes.count else {
                throw PixieWireError(.malformed, "a sync digest message carries 8 digests, not \(digests.count)")
            }
            guard header.round.isOpening == (phase == .open) else {
                throw PixieWireError(.malformed, "only an opening digest has no responder half in its round id")
            }
            var out = header.encoded
            out.append(phase.rawValue)
            out.appendUInt64(wallClock)
            out.appendUInt64(hlc)
            for digest in digests { out += digest.encoded }
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard payload.count == Self.byteCount, let header = SyncRoundHeader(reading: &reader),
            let phase = reader.byte().flatMap(Phase.init(rawValue:)), let wallClock = reader.uint64(),
            let hlc = reader.uint64()
        else { throw PixieWireError(.malformed, "not a sync digest message") }
        var digests: [SyncDigest] = []
        while let digest = SyncDigest(reading: &reader) { digests.append(digest) }
        guard header.round.isOpening == (phase == .open) else {
            throw PixieWireError(.malformed, "a sync digest message whose round id does not fit its phase")
        }
        self.init(header: header, phase: phase, wallClock: wallClock, hlc: hlc, digests: digests)
    }
}

/// Part of one category's sketch (``PayloadType/syncSketch``): coded symbols from index `first`, or the sender's
/// plain item list from position `first` when that is shorter.
///
///     header (64) ‖ category (1) ‖ form (1): 1 symbols, 2 items ‖ first (4) ‖ total (4) ‖ n (2) ‖ n entries
public struct SyncSketch: Sendable, Equatable {
    public static let maximumSymbolCount = 1800
    public static let maximumItemCount = 3200

    public enum Content: Sendable, Equatable {
        case symbols([CodedSymbol])
        case items([SyncItem])
    }

    public var header: SyncRoundHeader
    public var category: UInt8
    /// The index of the first symbol, or the position of the first item in the sender's list.
    public var first: UInt32
    /// The sender's row count in the category.
    public var total: UInt32
    public var content: Content

    public init(header: SyncRoundHeader, category: UInt8, first: UInt32, total: UInt32, content: Content) {
        self.header = header
        self.category = category
        self.first = first
        self.total = total
        self.content = content
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncRoundHeader.checkCategory(category, in: "a sync sketch")
            var out = header.encoded
            out.append(category)
            switch content {
            case .symbols(let symbols):
                guard (1...Self.maximumSymbolCount).contains(symbols.count) else {
                    throw PixieWireError(.malformed, "a sync sketch carries 1 to \(Self.maximumSymbolCount) symbols")
                }
                out.append(1)
                out.appendUInt32(first)
                out.appendUInt32(total)
                out.appendUInt16(UInt16(symbols.count))
                for symbol in symbols { out += symbol.encoded }
            case .items(let items):
                guard (1...Self.maximumItemCount).contains(items.count) else {
                    throw PixieWireError(.malformed, "a sync sketch carries 1 to \(Self.maximumItemCount) items")
                }
                out.append(2)
                out.appendUInt32(first)
                out.appendUInt32(total)
                out.appendUInt16(UInt16(items.count))
                for item in items { out += item.rawRepresentation }
            }
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let header = SyncRoundHeader(reading: &reader), let category = reader.byte(), let form = reader.byte(),
            let first = reader.uint32(), let total = reader.uint32(), let count = reader.uint16().map(Int.init)
        else { throw PixieWireError(.malformed, "not a sync sketch") }
        try SyncRoundHeader.checkCategory(category, in: "a sync sketch")
        switch form {
        case 1:
            guard (1...Self.maximumSymbolCount).contains(count), reader.remaining == count * CodedSymbol.byteCount
            else { throw PixieWireError(.malformed, "a sync sketch whose symbols do not fill it") }
            var symbols: [CodedSymbol] = []
            while let symbol = CodedSymbol(reading: &reader) { symbols.append(symbol) }
            content = .symbols(symbols)
        case 2:
            guard (1...Self.maximumItemCount).contains(count), reader.remaining == count * SyncItem.byteCount else {
                throw PixieWireError(.malformed, "a sync sketch whose items do not fill it")
            }
            var items: [SyncItem] = []
            while let bytes = reader.bytes(SyncItem.byteCount) { items.append(try SyncItem(rawRepresentation: bytes)) }
            content = .items(items)
        default:
            throw PixieWireError(.malformed, "a sync sketch of form \(form), neither symbols (1) nor items (2)")
        }
        self.header = header
        self.category = category
        self.first = first
        self.total = total
    }
}

/// What a device asks of the other in a round (``PayloadType/syncWant``): more symbols of a category, the rows
/// behind some items, or every row of a category (when it holds none).
///
///     header (64) ‖ n (1, 1-8) ‖ n × (category (1) ‖ kind (1) ‖ body)
///       kind 1, more symbols: first (4) ‖ count (4, 1-65,536)
///       kind 2, items: k (2, 1-3,200) ‖ k × item (16)
///       kind 3, every row: nothing
public struct SyncWant: Sendable, Equatable {
    public static let maximumSymbolRequest: UInt32 = 65_536
    public static let maximumItemCount = 3200

    public enum Kind: Sendable, Equatable {
        case moreSymbols(first: UInt32, count: UInt32)
        case items([SyncItem])
        case everything
    }

    public struct Entry: Sendable, Equatable {
        public var category: UInt8
        public var kind: Kind

        public init(category: UInt8, kind: Kind) {
            self.category = category
            self.kind = kind
        }
    }

    public var header: SyncRoundHeader
    public var entries: [Entry]

    public init(header: SyncRoundHeader, entries: [Entry]) {
        self.header = header
        self.entries = entries
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            guard (1...8).contains(entries.count) else {
                throw PixieWireError(.malformed, "a sync want carries 1 to 8 entries, not \(entries.count)")
            }
            var out = header.encoded
            out.append(UInt8(entries.count))
            for entry in entries {
                try SyncRoundHeader.checkCategory(entry.category, in: "a sync want")
                out.append(entry.category)
                switch entry.kind {
                case .moreSymbols(let first, let count):
                    guard (1...Self.maximumSymbolRequest).contains(count) else {
                        throw PixieWireError(.malformed, "a sync want asks for 1 to 65,536 symbols at a time")
                    }
                    out.append(1)
                    out.appendUInt32(first)
                    out.appendUInt32(count)
                case .items(let items):
                    guard (1...Self.maximumItemCount).contains(items.count) else {
                        throw PixieWireError(.malformed, "a sync want names 1 to \(Self.maximumItemCount) items")
                    }
                    out.append(2)
                    out.appendUInt16(UInt16(items.count))
                    for item in items { out += item.rawRepresentation }
                case .everything:
                    out.append(3)
                }
            }
            guard out.count <= SealedSenderEnvelope.maximumPayloadByteCount else {
                throw PixieWireError(.malformed, "a sync want of \(out.count) bytes does not fit one envelope")
            }
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let header = SyncRoundHeader(reading: &reader), let count = reader.byte(), (1...8).contains(count) else {
            throw PixieWireError(.malformed, "not a sync want")
        }
        var entries: [Entry] = []
        for _ in 0..<count {
            guard let category = reader.byte(), let kind = reader.byte() else {
                throw PixieWireError(.malformed, "a sync want ends inside an entry")
            }
            try SyncRoundHeader.checkCategory(category, in: "a sync want")
            switch kind {
            case 1:
                guard let first = reader.uint32(), let symbols = reader.uint32(),
                    (1...Self.maximumSymbolRequest).contains(symbols)
                else { throw PixieWireError(.malformed, "a sync want's request for symbols is malformed") }
                entries.append(Entry(category: category, kind: .moreSymbols(first: first, count: symbols)))
            case 2:
                guard let items = reader.uint16().map(Int.init), (1...Self.maximumItemCount).contains(items),
                    let bytes = reader.bytes(items * SyncItem.byteCount)
                else { throw PixieWireError(.malformed, "a sync want's list of items is malformed") }
                var list: [SyncItem] = []
                for offset in stride(from: bytes.startIndex, to: bytes.endIndex, by: SyncItem.byteCount) {
                    list.append(try SyncItem(rawRepresentation: bytes[offset..<(offset + SyncItem.byteCount)]))
                }
                entries.append(Entry(category: category, kind: .items(list)))
            case 3:
                entries.append(Entry(category: category, kind: .everything))
            default:
                throw PixieWireError(.malformed, "a sync want of kind \(kind), which is not 1, 2 or 3")
            }
        }
        guard reader.isAtEnd else { throw PixieWireError(.malformed, "a sync want with bytes after its entries") }
        self.init(header: header, entries: entries)
    }
}

/// A batch of rows in a round (``PayloadType/syncRows``): the snapshot's row records with version 2 bodies
/// (docs/pixie-protocol.md, "The snapshot"), or a blob record (code 9) for rows too large for a frame. PixieWire
/// checks the records' framing; the device reads each record as it reads a snapshot's.
///
///     header (64) ‖ batch (2) ‖ last (1): 0 or 1 ‖ records: code (1, 1-9) ‖ u32 length ‖ body, to the end
public struct SyncRows: Sendable, Equatable {
    /// The most bytes of records in one batch: 48 KiB, so that a batch fits the envelope's 52 KiB.
    public static let maximumRecordsByteCount = 48 * 1024
    /// The record code of a blob reference.
    public static let blobRecordCode: UInt8 = 9

    public var header: SyncRoundHeader
    /// The batch's number, from 0, per round and sender.
    public var batch: UInt16
    /// True on the sender's last batch of the round.
    public var isLast: Bool
    /// The records, back to back.
    public var records: Data

    public init(header: SyncRoundHeader, batch: UInt16, isLast: Bool, records: Data) {
        self.header = header
        self.batch = batch
        self.isLast = isLast
        self.records = records
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            try Self.checkFraming(records)
            var out = header.encoded
            out.appendUInt16(batch)
            out.append(isLast ? 1 : 0)
            out += records
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let header = SyncRoundHeader(reading: &reader), let batch = reader.uint16(), let last = reader.byte(),
            last <= 1
        else { throw PixieWireError(.malformed, "not a sync rows batch") }
        let records = reader.rest()
        try Self.checkFraming(records)
        self.init(header: header, batch: batch, isLast: last == 1, records: records)
    }

    /// Each record is `code (1-9) ‖ u32 length ‖ body` and they fill `records` exactly, within the batch's size.
    static func checkFraming(_ records: Data) throws(PixieWireError) {
        guard records.count <= maximumRecordsByteCount else {
            throw PixieWireError(.malformed, "a sync rows batch carries at most 48 KiB of records")
        }
        var reader = WireReader(records)
        while !reader.isAtEnd {
            guard let code = reader.byte(), (1...blobRecordCode).contains(code), let length = reader.uint32(),
                reader.bytes(Int(length)) != nil
            else { throw PixieWireError(.malformed, "a sync rows batch whose records are not whole") }
        }
    }
}
