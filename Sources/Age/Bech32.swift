import Foundation

/// Bech32 (BIP 173, with its constant 1, not Bech32m) as age uses it: no 90-character limit, and a
/// string must be all lowercase or all uppercase. Public because the same encoding serves other keys
/// people copy by hand (Sempere's recovery kit).
public enum Bech32 {
    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (index, character) in charset.enumerated() { table[Int(character)] = Int8(index) }
        return table
    }()

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]
        var checksum: UInt32 = 1
        for value in values {
            let top = checksum >> 25
            checksum = (checksum & 0x1ff_ffff) << 5 ^ UInt32(value)
            for bit in 0..<5 where (top >> bit) & 1 == 1 { checksum ^= generator[bit] }
        }
        return checksum
    }

    private static func expand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    /// Regroups bits (BIP 173's convertbits); `pad` false refuses leftover bits that are not zero padding.
    private static func convert(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var accumulator = 0
        var bits = 0
        var out: [UInt8] = []
        let maxValue = (1 << to) - 1
        for value in data {
            guard Int(value) >> from == 0 else { return nil }
            accumulator = accumulator << from | Int(value)
            bits += from
            while bits >= to {
                bits -= to
                out.append(UInt8((accumulator >> bits) & maxValue))
            }
            accumulator &= (1 << bits) - 1
        }
        if pad {
            if bits > 0 { out.append(UInt8((accumulator << (to - bits)) & maxValue)) }
        } else if bits >= from || (accumulator << (to - bits)) & maxValue != 0 {
            return nil
        }
        return out
    }

    /// Encodes `data` under the human-readable part `hrp`, in lowercase or, with `uppercase`, uppercase.
    public static func encode(hrp: String, data: Data, uppercase: Bool = false) -> String {
        let hrpBytes = Array(hrp.lowercased().utf8)
        let values = convert(Array(data), from: 8, to: 5, pad: true) ?? []
        let polymodValue = polymod(expand(hrpBytes) + values + [0, 0, 0, 0, 0, 0]) ^ 1
        let checksum = (0..<6).map { UInt8((polymodValue >> (5 * (5 - $0))) & 31) }
        let text = String(
            decoding: hrpBytes + [UInt8(ascii: "1")] + (values + checksum).map { charset[Int($0)] },
            as: UTF8.self)
        return uppercase ? text.uppercased() : text
    }

    /// Decodes a Bech32 string; returns the human-readable part in lowercase and the data, or nil when the
    /// string is mixed case, has characters outside the charset, or a wrong checksum.
    public static func decode(_ string: String) -> (hrp: String, data: Data)? {
        let bytes = Array(string.utf8)
        guard bytes.allSatisfy({ $0 >= 33 && $0 <= 126 }) else { return nil }
        let hasLower = bytes.contains { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }
        let hasUpper = bytes.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
        guard !(hasLower && hasUpper) else { return nil }
        let lower = bytes.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }
        guard let separator = lower.lastIndex(of: UInt8(ascii: "1")), separator >= 1,
            separator + 7 <= lower.count
        else { return nil }
        let hrp = Array(lower[..<separator])
        var values: [UInt8] = []
        for character in lower[(separator + 1)...] {
            guard character < 128, reverse[Int(character)] >= 0 else { return nil }
            values.append(UInt8(reverse[Int(character)]))
        }
        guard polymod(expand(hrp) + values) == 1,
            let data = convert(Array(values.dropLast(6)), from: 5, to: 8, pad: false)
        else { return nil }
        return (String(decoding: hrp, as: UTF8.self), Data(data))
    }
}
