import Foundation

/// Arithmetic in R_q = Z_q[X]/(X^256 + 1), q = 3329 (FIPS 203, sections 2.4 and 4.3).
///
/// Coefficients are `UInt32` in [0, q) between operations (inside the NTTs they are lazily reduced
/// `Int32` bit patterns). Every operation on them is branch-free: reductions are Barrett and Montgomery
/// multiplications and masked subtractions, never `%` or `/` (whose timing can depend on the operand;
/// see KyberSlash). Loops run over public bounds only. The reductions' ranges are checked exhaustively
/// by Tests/SiblingsCryptoTests/MLKEM/MLKEMArithmeticTests.swift.
enum MLKEMMath {
    static let n = 256
    static let q: UInt32 = 3329

    /// x mod q for x < 2^32: floor(x · ⌊2^36/q⌋ / 2^36) is ⌊x/q⌋ or one less, so the remainder is
    /// in [0, 2q) before one masked subtraction.
    @inline(__always)
    static func reduce(_ x: UInt32) -> UInt32 {
        let quotient = UInt32(truncatingIfNeeded: (UInt64(x) &* 20_642_678) >> 36)
        return subtractQ(x &- quotient &* q)
    }

    /// x − q if x ≥ q, else x; for x < 2q.
    @inline(__always)
    static func subtractQ(_ x: UInt32) -> UInt32 {
        let y = x &- q
        // The top bit of y is set exactly when x < q: keep x then.
        return y &+ (q & (0 &- (y >> 31)))
    }

    @inline(__always)
    static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 { reduce(a &* b) }

    /// ζ^BitRev7(i) mod q for i = 0..<128, ζ = 17 (FIPS 203, section 4.3; the table in Appendix A).
    static let zetas: [UInt32] = (0..<128).map { power(17, bitReverse7($0)) }
    /// The same twiddles in Montgomery form, ζ^BitRev7(i) · 2^32 mod q, centred in (−q/2, q/2], for
    /// ``montgomeryMultiply(_:_:)``: computed, not transcribed.
    static let montgomeryZetas: [Int32] = zetas.map { centred(UInt32((UInt64($0) << 32) % UInt64(q))) }
    /// 128⁻¹ · 2^32 mod q, centred: the inverse NTT's scale in Montgomery form (128⁻¹ = 3303).
    static let montgomeryInverseScale: Int32 = centred(UInt32((UInt64(3303) << 32) % UInt64(q)))
    /// ζ^(2·BitRev7(i) + 1) mod q, the γ of BaseCaseMultiply (FIPS 203, Algorithm 12).
    static let gammas: [UInt32] = (0..<128).map { power(17, 2 * bitReverse7($0) + 1) }

    static func bitReverse7(_ i: Int) -> Int {
        var result = 0
        for bit in 0..<7 where i & (1 << bit) != 0 { result |= 1 << (6 - bit) }
        return result
    }

    /// base^exponent mod q, for the public constant tables only.
    static func power(_ base: UInt32, _ exponent: Int) -> UInt32 {
        var result: UInt32 = 1
        for _ in 0..<exponent { result = result * base % q }
        return result
    }

    /// x ∈ [0, q) as its representative in (−q/2, q/2], for the public constant tables only.
    static func centred(_ x: UInt32) -> Int32 { x > q / 2 ? Int32(x) - Int32(q) : Int32(x) }

    /// q⁻¹ mod 2^32, for Montgomery reduction with R = 2^32.
    static let qInverse: Int32 = 0x6ba8_f301

    /// a · 2^−32 mod q, in (−q, q), for |a| < q · 2^31 (Montgomery reduction, R = 2^32), branch-free.
    @inline(__always)
    static func montgomeryReduce(_ a: Int64) -> Int32 {
        let t = Int32(truncatingIfNeeded: a) &* qInverse
        return Int32(truncatingIfNeeded: (a &- Int64(t) &* Int64(q)) &>> 32)
    }

    /// a · b · 2^−32 mod q, in (−q, q), for |a · b| < q · 2^31.
    @inline(__always)
    static func montgomeryMultiply(_ a: Int32, _ b: Int32) -> Int32 {
        montgomeryReduce(Int64(a) &* Int64(b))
    }

    /// a mod q in [0, q) for |a| < 2^15 (signed Barrett reduction with ⌊(2^26 + q/2)/q⌋ = 20159, then a
    /// masked addition of q), branch-free.
    @inline(__always)
    static func reduceSigned(_ a: Int32) -> UInt32 {
        let quotient = (a &* 20159 &+ (1 << 25)) &>> 26
        let r = a &- quotient &* Int32(q)
        return UInt32(bitPattern: r &+ (Int32(q) & (r &>> 31)))
    }

    /// NTT (FIPS 203, Algorithm 9), in place on 256 coefficients in [0, q), leaving them in [0, q).
    ///
    /// Cooley–Tukey butterflies with Montgomery twiddles and lazy reduction: each layer's products are
    /// Montgomery-reduced into (−q, q), and the sums and differences are not reduced at all, so after
    /// the seven layers every coefficient (kept as the bit pattern of an `Int32`) lies in (−8q, 8q), well
    /// inside ``reduceSigned(_:)``'s range, which brings it back to [0, q) once at the end.
    static func ntt(_ f: UnsafeMutablePointer<UInt32>) {
        montgomeryZetas.withUnsafeBufferPointer { zetas in
            var index = 1
            var length = 128
            while length >= 2 {
                var start = 0
                while start < 256 {
                    let zeta = zetas[index]
                    index += 1
                    for j in start..<(start + length) {
                        let t = montgomeryMultiply(zeta, Int32(bitPattern: f[j + length]))
                        let a = Int32(bitPattern: f[j])
                        f[j + length] = UInt32(bitPattern: a &- t)
                        f[j] = UInt32(bitPattern: a &+ t)
                    }
                    start += 2 * length
                }
                length >>= 1
            }
        }
        for j in 0..<256 { f[j] = reduceSigned(Int32(bitPattern: f[j])) }
    }

    /// NTT⁻¹ (FIPS 203, Algorithm 10), in place, including the final multiplication by 128⁻¹ = 3303;
    /// coefficients in [0, q) in and out.
    ///
    /// Gentleman–Sande butterflies with Montgomery twiddles and lazy reduction: a sum is not reduced, so
    /// it at most doubles per layer (below 2^7 · q after seven layers), and each difference is
    /// Montgomery-multiplied back into (−q, q); every product stays far below the q · 2^31 that
    /// ``montgomeryReduce(_:)`` allows. The scale 128⁻¹ is one more Montgomery multiplication.
    static func inverseNTT(_ f: UnsafeMutablePointer<UInt32>) {
        montgomeryZetas.withUnsafeBufferPointer { zetas in
            var index = 127
            var length = 2
            while length <= 128 {
                var start = 0
                while start < 256 {
                    let zeta = zetas[index]
                    index -= 1
                    for j in start..<(start + length) {
                        let t = Int32(bitPattern: f[j])
                        let u = Int32(bitPattern: f[j + length])
                        f[j] = UInt32(bitPattern: t &+ u)
                        f[j + length] = UInt32(bitPattern: montgomeryMultiply(zeta, u &- t))
                    }
                    start += 2 * length
                }
                length <<= 1
            }
        }
        for j in 0..<256 {
            let r = montgomeryMultiply(Int32(bitPattern: f[j]), montgomeryInverseScale)
            f[j] = UInt32(bitPattern: r &+ (Int32(q) & (r &>> 31)))
        }
    }

    /// h ← h + f ×_T g (FIPS 203, Algorithms 11 and 12, accumulated). Results stay below 2^32
    /// unreduced for up to 3 accumulations, so only `finish` reduces: call it after the last one.
    static func multiplyAccumulate(
        _ h: UnsafeMutablePointer<UInt32>, _ f: UnsafePointer<UInt32>, _ g: UnsafePointer<UInt32>
    ) {
        gammas.withUnsafeBufferPointer { gammas in
            for i in 0..<128 {
                let a0 = f[2 * i]
                let a1 = f[2 * i + 1]
                let b0 = g[2 * i]
                let b1 = g[2 * i + 1]
                h[2 * i] = h[2 * i] &+ a0 &* b0 &+ multiply(a1, b1) &* gammas[i]
                h[2 * i + 1] = h[2 * i + 1] &+ a0 &* b1 &+ a1 &* b0
            }
        }
    }

    /// Reduces every coefficient of an accumulated polynomial into [0, q).
    static func finish(_ h: UnsafeMutablePointer<UInt32>) {
        for j in 0..<256 { h[j] = reduce(h[j]) }
    }

    /// f ← f + g (both reduced).
    static func add(_ f: UnsafeMutablePointer<UInt32>, _ g: UnsafePointer<UInt32>) {
        for j in 0..<256 { f[j] = subtractQ(f[j] &+ g[j]) }
    }

    /// Compress_d (FIPS 203, equation 4.7): ⌈(2^d/q)·x⌋ mod 2^d, as ⌊(2^(d+1)·x + q) / 2q⌋ with the
    /// division done by a multiplication (exact for every x < q; checked exhaustively by the tests).
    @inline(__always)
    static func compress(_ x: UInt32, bits d: Int) -> UInt32 {
        let numerator = UInt64(x) << (d + 1) &+ UInt64(q)
        let quotient = (numerator &* 2_580_335) >> 34  // ⌊numerator / 6658⌋ for numerator < 2^23
        return UInt32(truncatingIfNeeded: quotient) & ((1 << d) - 1)
    }

    /// Decompress_d (FIPS 203, equation 4.8): ⌈(q/2^d)·y⌋.
    @inline(__always)
    static func decompress(_ y: UInt32, bits d: Int) -> UInt32 {
        (y &* q &+ (1 << (d - 1))) >> d
    }

    /// SamplePolyCBD_2 (FIPS 203, Algorithm 8, η = 2) from 128 bytes, branch-free.
    static func sampleCBD2(_ bytes: UnsafeRawPointer, into f: UnsafeMutablePointer<UInt32>) {
        for word in 0..<32 {
            let t = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4 * word, as: UInt32.self))
            let d = (t & 0x5555_5555) &+ ((t >> 1) & 0x5555_5555)
            for j in 0..<8 {
                let a = (d >> (4 * j)) & 3
                let b = (d >> (4 * j + 2)) & 3
                f[8 * word + j] = subtractQ(a &+ q &- b)
            }
        }
    }

    /// SampleNTT (FIPS 203, Algorithm 7): rejection sampling from SHAKE128(ρ ‖ j ‖ i). The input
    /// and the rejections are public (they depend on ρ only).
    ///
    /// OpenSSL 3.0 squeezes a SHAKE once only, so one call takes four blocks (672 bytes, 448 candidates
    /// for the 256 coefficients, each candidate kept with probability 3329/4096): they run short with
    /// probability below 2^−40, and then the Swift sponge (``SHAKE128``) starts again and carries on
    /// where the four blocks ended.
    /// (`firstSqueezeBlocks` is 4; tests make it 1 to run the fallback.)
    static func sampleNTT(
        seed: UnsafeRawBufferPointer, column j: UInt8, row i: UInt8, into a: UnsafeMutablePointer<UInt32>,
        firstSqueezeBlocks: Int = 4
    ) {
        let blockBytes = 168
        let firstSqueeze = firstSqueezeBlocks * blockBytes
        withUnsafeTemporaryAllocation(byteCount: firstSqueeze, alignment: 8) { block in
            let bytes = UnsafeRawBufferPointer(block)
            withUnsafeBytes(of: (j, i)) { DigestContext.keccak(.shake128, seed, $0, into: block) }
            var count = 0
            var position = 0
            var available = firstSqueeze
            var fallback: SHAKE128?
            while count < 256 {
                if position + 3 > available {
                    if fallback == nil {
                        var xof = SHAKE128()
                        xof.absorb(bufferPointer: seed)
                        withUnsafeBytes(of: (j, i)) { xof.absorb(bufferPointer: $0) }
                        xof.squeeze(into: block)  // the blocks already used
                        fallback = xof
                    }
                    fallback!.squeeze(into: UnsafeMutableRawBufferPointer(rebasing: block[0..<blockBytes]))
                    position = 0
                    available = blockBytes
                }
                let b0 = UInt32(bytes[position])
                let b1 = UInt32(bytes[position + 1])
                let b2 = UInt32(bytes[position + 2])
                position += 3
                let d1 = b0 | (b1 & 0x0f) << 8
                let d2 = b1 >> 4 | b2 << 4
                if d1 < q {
                    a[count] = d1
                    count += 1
                }
                if d2 < q && count < 256 {
                    a[count] = d2
                    count += 1
                }
            }
        }
    }

    /// ByteEncode_d (FIPS 203, Algorithm 5) of 256 coefficients of `d` bits into 32·d bytes.
    static func encode(_ f: UnsafePointer<UInt32>, bits d: Int, into out: UnsafeMutableRawPointer) {
        var accumulator: UInt64 = 0
        var filled = 0
        var offset = 0
        for j in 0..<256 {
            accumulator |= UInt64(f[j]) << filled
            filled += d
            while filled >= 8 {
                out.storeBytes(of: UInt8(truncatingIfNeeded: accumulator), toByteOffset: offset, as: UInt8.self)
                offset += 1
                accumulator >>= 8
                filled -= 8
            }
        }
    }

    /// ByteDecode_d (FIPS 203, Algorithm 6) of 32·d bytes into 256 coefficients of `d` bits (not yet
    /// reduced mod q for d = 12: see `decode12`).
    static func decode(_ input: UnsafeRawPointer, bits d: Int, into f: UnsafeMutablePointer<UInt32>) {
        var accumulator: UInt64 = 0
        var filled = 0
        var offset = 0
        let mask: UInt64 = (1 << d) - 1
        for j in 0..<256 {
            while filled < d {
                accumulator |= UInt64(input.load(fromByteOffset: offset, as: UInt8.self)) << filled
                offset += 1
                filled += 8
            }
            f[j] = UInt32(truncatingIfNeeded: accumulator & mask)
            accumulator >>= d
            filled -= d
        }
    }

    /// ByteDecode_12 with its values taken mod q (FIPS 203: "for d = 12, ... m = q"), branch-free.
    static func decode12(_ input: UnsafeRawPointer, into f: UnsafeMutablePointer<UInt32>) {
        decode(input, bits: 12, into: f)
        for j in 0..<256 { f[j] = subtractQ(f[j]) }
    }
}
