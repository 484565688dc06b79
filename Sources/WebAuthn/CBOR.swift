import Foundation

/// A CBOR data item (RFC 8949 §3), limited to what WebAuthn carries: integers, byte and text strings,
/// arrays, maps, and the simple values false, true and null.
///
/// Tags, floating-point numbers, `undefined` and the other simple values never appear in attestation
/// objects, authenticatorData or COSE_Keys, so ``CBORDecoder`` refuses them rather than carry code no
/// ceremony exercises.
public indirect enum CBOR: Sendable, Hashable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the integer −1 − `n` (so `.negative(0)` is −1 and `.negative(6)` is −7).
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes(Data)
    /// Major type 3: a UTF-8 text string.
    case text(String)
    /// Major type 4: an array.
    case array([CBOR])
    /// Major type 5: a map. Keys are unique (RFC 8949 §5.6: the decoder refuses duplicates); the
    /// encoder writes them in CTAP2 canonical order.
    case map([CBOR: CBOR])
    /// Major type 7, simple values 20 and 21.
    case boolean(Bool)
    /// Major type 7, simple value 22.
    case null

    /// An integer as the CBOR major type that carries it (0 for n ≥ 0, 1 for n < 0).
    public init(_ value: Int) {
        self = value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// The value as an `Int`, when it is an integer that fits one.
    public var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    /// The bytes of a byte string.
    public var bytesValue: Data? {
        if case .bytes(let data) = self { return data }
        return nil
    }

    /// The string of a text string.
    public var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    /// The entries of a map.
    public var mapValue: [CBOR: CBOR]? {
        if case .map(let map) = self { return map }
        return nil
    }
}

/// A strict decoder of one CBOR data item (RFC 8949).
///
/// It accepts only definite lengths (§3.2.2's indefinite-length items are refused), only the shortest
/// encoding of every integer and length (§4.2.1's preferred serialization, which CTAP2 canonical CBOR
/// requires of authenticators), unique map keys (§5.6), well-formed UTF-8 in text strings (§3.1), nesting
/// up to ``maximumDepth`` and input up to ``maximumSize`` bytes; bytes after the item are refused.
/// Map key order is not checked: RFC 8949 does not require it, and a relying party gains nothing by
/// refusing an otherwise valid item over it.
public struct CBORDecoder: Sendable {
    /// The deepest nesting of arrays and maps accepted (a COSE_Key in an attestation object is depth 2).
    public var maximumDepth: Int
    /// The largest input accepted, in bytes.
    public var maximumSize: Int

    public init(maximumDepth: Int = 16, maximumSize: Int = 64 * 1024) {
        self.maximumDepth = maximumDepth
        self.maximumSize = maximumSize
    }

    /// Decodes exactly one data item; throws ``WebAuthnError/Code/invalidCBOR`` on anything else.
    public func decode(_ data: some DataProtocol) throws -> CBOR {
        let bytes = [UInt8](data)
        let (item, end) = try decodePrefix(bytes, from: 0)
        guard end == bytes.count else {
            throw WebAuthnError(.invalidCBOR, "\(bytes.count - end) trailing bytes after the CBOR item")
        }
        return item
    }

    /// Decodes the one data item that starts at `start`, returning it and the index just past it. Used where
    /// a CBOR item is followed by more fields (the COSE_Key inside authenticatorData, §6.5.1).
    func decodePrefix(_ bytes: [UInt8], from start: Int) throws -> (CBOR, Int) {
        guard bytes.count - start <= maximumSize else {
            throw WebAuthnError(
                .invalidCBOR, "CBOR input of \(bytes.count - start) bytes exceeds the limit of \(maximumSize)")
        }
        var reader = Reader(bytes: bytes, index: start, maximumDepth: maximumDepth)
        let item = try reader.item(depth: 0)
        return (item, reader.index)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index: Int
        let maximumDepth: Int

        var remaining: Int { bytes.count - index }

        mutating func byte() throws -> UInt8 {
            guard index < bytes.count else { throw WebAuthnError(.invalidCBOR, "CBOR input ends inside an item") }
            defer { index += 1 }
            return bytes[index]
        }

        /// The argument of a head (§3), refusing reserved values, indefinite lengths and non-shortest forms.
        mutating func argument(_ info: UInt8, major: UInt8) throws -> UInt64 {
            let width: Int
            switch info {
            case 0..<24: return UInt64(info)
            case 24: width = 1
            case 25: width = 2
            case 26: width = 4
            case 27: width = 8
            case 31:
                throw WebAuthnError(
                    .invalidCBOR, "indefinite-length CBOR (major type \(major)) is not accepted; use definite lengths")
            default:
                throw WebAuthnError(.invalidCBOR, "reserved CBOR additional information \(info) (RFC 8949 §3)")
            }
            guard remaining >= width else { throw WebAuthnError(.invalidCBOR, "CBOR input ends inside a head") }
            var value: UInt64 = 0
            for _ in 0..<width { value = value << 8 | UInt64(try byte()) }
            let smallest: UInt64 = width == 1 ? 24 : 1 << (UInt64(width) * 4)
            guard value >= smallest else {
                throw WebAuthnError(
                    .invalidCBOR, "CBOR value \(value) is not in its shortest form (RFC 8949 §4.2.1)")
            }
            return value
        }

        mutating func length(_ info: UInt8, major: UInt8, unit: Int) throws -> Int {
            let value = try argument(info, major: major)
            // Every element takes at least `unit` bytes, so a count larger than what is left is a lie and
            // is refused before anything is allocated for it.
            guard value <= UInt64(remaining / unit) else {
                throw WebAuthnError(
                    .invalidCBOR, "CBOR length \(value) is more than the \(remaining) bytes left in the input")
            }
            return Int(value)
        }

        mutating func item(depth: Int) throws -> CBOR {
            let initial = try byte()
            let major = initial >> 5
            let info = initial & 0x1f
            switch major {
            case 0:
                return .unsigned(try argument(info, major: major))
            case 1:
                return .negative(try argument(info, major: major))
            case 2:
                let count = try length(info, major: major, unit: 1)
                defer { index += count }
                return .bytes(Data(bytes[index..<index + count]))
            case 3:
                let count = try length(info, major: major, unit: 1)
                defer { index += count }
                guard let text = String(validating: bytes[index..<index + count], as: UTF8.self) else {
                    throw WebAuthnError(.invalidCBOR, "a CBOR text string is not valid UTF-8")
                }
                return .text(text)
            case 4:
                let count = try length(info, major: major, unit: 1)
                try checkDepth(depth)
                var items: [CBOR] = []
                items.reserveCapacity(count)
                for _ in 0..<count { items.append(try item(depth: depth + 1)) }
                return .array(items)
            case 5:
                let count = try length(info, major: major, unit: 2)
                try checkDepth(depth)
                var map: [CBOR: CBOR] = [:]
                for _ in 0..<count {
                    let key = try item(depth: depth + 1)
                    let value = try item(depth: depth + 1)
                    guard map.updateValue(value, forKey: key) == nil else {
                        throw WebAuthnError(.invalidCBOR, "a CBOR map repeats the key \(key) (RFC 8949 §5.6)")
                    }
                }
                return .map(map)
            case 6:
                throw WebAuthnError(.invalidCBOR, "CBOR tags (major type 6) are not accepted in WebAuthn data")
            default:
                switch info {
                case 20: return .boolean(false)
                case 21: return .boolean(true)
                case 22: return .null
                case 25, 26, 27:
                    throw WebAuthnError(.invalidCBOR, "CBOR floating-point numbers are not accepted in WebAuthn data")
                case 31:
                    throw WebAuthnError(.invalidCBOR, "a CBOR break code outside an indefinite-length item")
                default:
                    throw WebAuthnError(
                        .invalidCBOR, "CBOR simple value (additional information \(info)) is not false, true or null")
                }
            }
        }

        func checkDepth(_ depth: Int) throws {
            guard depth < maximumDepth else {
                throw WebAuthnError(.invalidCBOR, "CBOR nesting deeper than \(maximumDepth) levels")
            }
        }
    }
}

extension CBOR {
    /// The CTAP2 canonical encoding (CTAP 2.1 §8, "Message Encoding"): shortest heads, definite lengths,
    /// map keys sorted by major type, then by encoded length, then bytewise. This is also RFC 8949
    /// §4.2.1's preferred serialization, so ``CBORDecoder`` reads back everything this writes.
    public func encoded() -> Data {
        var out = Data()
        encode(into: &out)
        return out
    }

    private func encode(into out: inout Data) {
        switch self {
        case .unsigned(let n): Self.head(0, n, into: &out)
        case .negative(let n): Self.head(1, n, into: &out)
        case .bytes(let data):
            Self.head(2, UInt64(data.count), into: &out)
            out.append(data)
        case .text(let text):
            let utf8 = Data(text.utf8)
            Self.head(3, UInt64(utf8.count), into: &out)
            out.append(utf8)
        case .array(let items):
            Self.head(4, UInt64(items.count), into: &out)
            for item in items { item.encode(into: &out) }
        case .map(let map):
            Self.head(5, UInt64(map.count), into: &out)
            let entries = map.map { (key: $0.key.encoded(), value: $0.value) }
                .sorted { Self.canonicallyPrecedes($0.key, $1.key) }
            for entry in entries {
                out.append(entry.key)
                entry.value.encode(into: &out)
            }
        case .boolean(let value): out.append(value ? 0xf5 : 0xf4)
        case .null: out.append(0xf6)
        }
    }

    private static func canonicallyPrecedes(_ lhs: Data, _ rhs: Data) -> Bool {
        let (lhsMajor, rhsMajor) = (lhs.first! >> 5, rhs.first! >> 5)
        if lhsMajor != rhsMajor { return lhsMajor < rhsMajor }
        if lhs.count != rhs.count { return lhs.count < rhs.count }
        return lhs.lexicographicallyPrecedes(rhs)
    }

    private static func head(_ major: UInt8, _ value: UInt64, into out: inout Data) {
        let type = major << 5
        switch value {
        case 0..<24: out.append(type | UInt8(value))
        case 24..<0x100: out.append(contentsOf: [type | 24, UInt8(value)])
        case 0x100..<0x1_0000: out.append(type | 25); appendBigEndian(value, width: 2, into: &out)
        case 0x1_0000..<0x1_0000_0000: out.append(type | 26); appendBigEndian(value, width: 4, into: &out)
        default: out.append(type | 27); appendBigEndian(value, width: 8, into: &out)
        }
    }

    private static func appendBigEndian(_ value: UInt64, width: Int, into out: inout Data) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> shift))
        }
    }
}
