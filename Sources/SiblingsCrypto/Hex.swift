import Foundation

extension DataProtocol {
    /// Lower-case hexadecimal, two digits per byte.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Data {
    /// Decodes hexadecimal (either case, no separators); throws on odd length or a non-hex character.
    public init(hexString: some StringProtocol) throws {
        let utf8 = Array(hexString.utf8)
        guard utf8.count % 2 == 0 else {
            throw CryptoError(.invalidEncoding, "hex has an odd number of digits (\(utf8.count))")
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 2)
        func value(_ c: UInt8) throws -> UInt8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: throw CryptoError(.invalidEncoding, "'\(Character(Unicode.Scalar(c)))' is not a hex digit")
            }
        }
        var index = 0
        while index < utf8.count {
            bytes.append(try value(utf8[index]) << 4 | value(utf8[index + 1]))
            index += 2
        }
        self.init(bytes)
    }
}
