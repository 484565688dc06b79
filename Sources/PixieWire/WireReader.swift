import Foundation

/// Reads the big-endian fields of PixieWire's binary structures, returning nil past the end (the caller says
/// which structure was short).
struct WireReader {
    let data: Data
    var offset: Int

    init(_ data: Data) {
        self.data = data
        self.offset = data.startIndex
    }

    var isAtEnd: Bool { offset == data.endIndex }
    var remaining: Int { data.endIndex - offset }

    mutating func byte() -> UInt8? {
        guard offset < data.endIndex else { return nil }
        defer { offset += 1 }
        return data[offset]
    }

    mutating func bytes(_ count: Int) -> Data? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return data.subdata(in: offset..<(offset + count))
    }

    mutating func uint16() -> UInt16? {
        guard let b = bytes(2) else { return nil }
        return UInt16(b[b.startIndex]) << 8 | UInt16(b[b.startIndex + 1])
    }

    mutating func uint32() -> UInt32? {
        guard let b = bytes(4) else { return nil }
        return b.reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64() -> UInt64? {
        guard let b = bytes(8) else { return nil }
        return b.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A field with a 2-byte length before it.
    mutating func shortField() -> Data? {
        guard let count = uint16() else { return nil }
        return bytes(Int(count))
    }

    mutating func rest() -> Data {
        defer { offset = data.endIndex }
        return data.subdata(in: offset..<data.endIndex)
    }
}

extension Data {
    mutating func appendUInt16(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xff))
    }

    mutating func appendUInt32(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff),
        ])
    }

    mutating func appendUInt64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(value >> UInt64(shift) & 0xff)) }
    }

    /// `field` with a 2-byte length before it; the caller has checked it fits.
    mutating func appendShortField(_ field: some DataProtocol) {
        appendUInt16(UInt16(field.count))
        append(contentsOf: field)
    }
}
