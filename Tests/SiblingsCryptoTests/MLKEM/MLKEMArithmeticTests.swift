import Foundation
@_spi(Testing) import SiblingsCrypto
import Testing

/// The ML-KEM arithmetic over every input of the domain each function is used on, against definitions
/// written here from FIPS 203 with plain integer division (not the implementation's tricks).
@Suite("ML-KEM-768 arithmetic, exhaustively")
struct MLKEMArithmeticTests {
    static let q = Int64(ArithmeticTesting.mlkemQ)

    /// x mod q in [0, q).
    static func mod(_ x: Int64) -> Int64 { ((x % q) + q) % q }

    /// ⌈a/b⌋ for a ≥ 0, b > 0 odd (no exact halves): FIPS 203's rounding.
    static func rounded(_ a: Int64, _ b: Int64) -> Int64 { a / b + (2 * (a % b) >= b ? 1 : 0) }

    @Test("Compress_d for every x < q and Decompress_d for every y < 2^d (d = 1, 4, 5, 10, 11)")
    func compressAndDecompress() {
        for d in [1, 4, 5, 10, 11] {
            var mismatches = 0
            for x in 0..<Self.q {
                let expected = Self.rounded(x << d, Self.q) % (1 << d)
                if Int64(ArithmeticTesting.mlkemCompress(UInt32(x), bits: d)) != expected { mismatches += 1 }
            }
            for y in 0..<(Int64(1) << d) {
                let expected = Self.rounded(Self.q * y, 1 << d)
                if Int64(ArithmeticTesting.mlkemDecompress(UInt32(y), bits: d)) != expected { mismatches += 1 }
            }
            #expect(mismatches == 0, "d = \(d)")
        }
    }

    @Test("16-bit Barrett reduction for every 16-bit a: congruent, and within ±(q − 1)/2")
    func barrettReduce() {
        var mismatches = 0
        for a in Int16.min...Int16.max {
            let r = Int64(ArithmeticTesting.mlkemBarrettReduce(a))
            if Self.mod(r - Int64(a)) != 0 || abs(r) > (Self.q - 1) / 2 { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }

    @Test("unsigned Barrett reduction for every x < 2^26 (products of two reduced values are below q^2 < 2^24)")
    func reduceUnsigned() {
        var mismatches = 0
        for x in UInt32(0)..<(1 << 26) where ArithmeticTesting.mlkemReduce(x) != x % UInt32(Self.q) {
            mismatches += 1
        }
        // The accumulated base-case products stay below 2^32: the top of the range, and every multiple of q
        // near it, where an off-by-one quotient would show.
        for x in (UInt32.max - (1 << 20))...UInt32.max where ArithmeticTesting.mlkemReduce(x) != x % UInt32(Self.q) {
            mismatches += 1
        }
        #expect(mismatches == 0)
    }

    @Test("16-bit Montgomery multiplication by every twiddle and the inverse scale, for every 16-bit x")
    func montgomeryTwiddles() {
        let zetas = ArithmeticTesting.mlkemMontgomeryZetas + [ArithmeticTesting.mlkemMontgomeryInverseScale]
        // What each Montgomery constant c stands for: c · 2^−16 mod q.
        let rInverse = Self.inverse(Self.mod(Int64(1) << 16))
        var wrong = 0
        var outOfRange = 0
        for zeta in zetas {
            let plain = Self.mod(Int64(zeta) * rInverse)
            for x in Int16.min...Int16.max {
                let r = Int64(ArithmeticTesting.mlkemMontgomeryMultiply(zeta, x))
                if Self.mod(r - plain * Int64(x)) != 0 { wrong += 1 }
                if r <= -Self.q || r >= Self.q { outOfRange += 1 }
            }
        }
        #expect(wrong == 0)
        #expect(outOfRange == 0)
        // |ζ| ≤ q/2, so every 16-bit operand is within the method's bound |a · b| < q · 2^15.
        #expect(zetas.allSatisfy { abs(Int64($0)) * 32768 < Self.q << 15 })
    }

    static func inverse(_ a: Int64) -> Int64 {
        var result: Int64 = 1
        var base = a
        var exponent = q - 2
        while exponent > 0 {
            if exponent & 1 == 1 { result = result * base % q }
            base = base * base % q
            exponent >>= 1
        }
        return result
    }

    /// NTT(f) by FIPS 203's definition: f̂[2i] = f_even(ζ^(2·BitRev7(i)+1)), f̂[2i+1] = f_odd(the same), with
    /// f_even, f_odd the polynomials of the even and odd coefficients, evaluated with plain `%` arithmetic.
    static func schoolbookNTT(_ f: [UInt32]) -> [UInt32] {
        func power(_ base: Int64, _ exponent: Int) -> Int64 {
            var result: Int64 = 1
            for _ in 0..<exponent { result = result * base % q }
            return result
        }
        func bitReverse7(_ i: Int) -> Int { (0..<7).reduce(0) { $0 | ((i >> $1) & 1) << (6 - $1) } }
        var out = [UInt32](repeating: 0, count: 256)
        for i in 0..<128 {
            let point = power(17, 2 * bitReverse7(i) + 1)
            var even: Int64 = 0
            var odd: Int64 = 0
            var x: Int64 = 1
            for j in 0..<128 {
                even = (even + Int64(f[2 * j]) * x) % q
                odd = (odd + Int64(f[2 * j + 1]) * x) % q
                x = x * point % q
            }
            out[2 * i] = UInt32(even)
            out[2 * i + 1] = UInt32(odd)
        }
        return out
    }

    @Test("NTT agrees with the schoolbook definition, and NTT⁻¹ undoes it, at the extremes and at random")
    func nttMatchesDefinition() {
        var inputs: [[UInt32]] = [
            [UInt32](repeating: 0, count: 256), [UInt32](repeating: UInt32(Self.q - 1), count: 256),
            (0..<256).map { $0 % 2 == 0 ? UInt32(Self.q - 1) : 0 },
        ]
        for _ in 0..<50 { inputs.append((0..<256).map { _ in UInt32.random(in: 0..<UInt32(Self.q)) }) }
        for f in inputs {
            let transformed = ArithmeticTesting.mlkemNTT(f)
            #expect(transformed == Self.schoolbookNTT(f))
            #expect(ArithmeticTesting.mlkemInverseNTT(transformed) == f)
        }
    }

    @Test("SampleNTT's Swift fallback continues OpenSSL's fixed squeeze exactly")
    func sampleNTTFallback() {
        for _ in 0..<40 {
            let seed = [UInt8](randomBytes(32))
            let column = UInt8.random(in: 0..<3)
            let row = UInt8.random(in: 0..<3)
            let usual = ArithmeticTesting.mlkemSampleNTT(seed: seed, column: column, row: row, firstSqueezeBlocks: 4)
            let fallback = ArithmeticTesting.mlkemSampleNTT(seed: seed, column: column, row: row, firstSqueezeBlocks: 1)
            #expect(usual == fallback)
            #expect(usual.allSatisfy { Int64($0) < Self.q })
        }
    }
}
