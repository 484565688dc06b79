import Foundation

/// Arithmetic in R_q = Z_q[X]/(X^256 + 1), q = 3329 (FIPS 203, sections 2.4 and 4.3).
///
/// Coefficients are `UInt32` in [0, q) between operations (the NTTs work on a lazily reduced 16-bit
/// copy). Every operation on them is branch-free: reductions are Barrett and Montgomery
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

    /// The twiddles ζ^BitRev7(i) · 2^16 mod q, centred, for ``montgomeryMultiply(_:_:)``: computed, not
    /// transcribed.
    static let montgomeryZetas: [Int16] = zetas.map { Int16(centred(UInt32((UInt64($0) << 16) % UInt64(q)))) }
    /// 128⁻¹ · 2^16 mod q, centred: the inverse NTT's scale in Montgomery form (128⁻¹ = 3303).
    static let montgomeryInverseScale = Int16(centred(UInt32((UInt64(3303) << 16) % UInt64(q))))
    /// q⁻¹ mod 2^16, as a signed 16-bit value.
    static let qInverse: Int16 = -3327

    /// The high half of the 32-bit product of two 16-bit values (x86's `pmulhw`, which the compiler emits
    /// for this shape once a loop is vectorized).
    @inline(__always)
    static func multiplyHigh(_ a: Int16, _ b: Int16) -> Int16 {
        Int16(truncatingIfNeeded: (Int32(a) &* Int32(b)) &>> 16)
    }

    /// a · b · 2^−16 mod q, in (−q, q), for |a · b| < q · 2^15: Montgomery multiplication in 16-bit lanes
    /// (Seiler, "Faster AVX2 optimized NTT multiplication for Ring-LWE lattice cryptography", 2018, as the
    /// Kyber reference's fqmul): with t = a·b·q⁻¹ mod 2^16, a·b − t·q is divisible by 2^16, so its quotient
    /// is the difference of the two high halves. Branch-free.
    @inline(__always)
    static func montgomeryMultiply(_ a: Int16, _ b: Int16) -> Int16 {
        let t = (a &* b) &* qInverse
        return multiplyHigh(a, b) &- multiplyHigh(t, Int16(q))
    }

    /// A representative of a mod q in (−q/2, q/2], for any 16-bit a: Barrett reduction with
    /// ⌊(2^26 + q/2)/q⌋ = 20159, the quotient rounded as ⌊(⌊a · 20159 / 2^16⌋ + 2^9) / 2^10⌋. Branch-free.
    @inline(__always)
    static func barrettReduce(_ a: Int16) -> Int16 {
        let quotient = (multiplyHigh(a, 20159) &+ (1 << 9)) &>> 10
        return a &- quotient &* Int16(q)
    }

    /// a ∈ (−q, q) as the representative in [0, q).
    @inline(__always)
    static func canonical(_ a: Int16) -> UInt32 {
        UInt32(truncatingIfNeeded: a &+ (Int16(q) & (a &>> 15)))
    }

    /// Runs `body` on a 16-bit copy of the 256 coefficients at `f` (each in [0, q)), then writes the result
    /// back in [0, q) with `finish`; the copy is wiped, since the coefficients may be secret.
    @inline(__always)
    static func inSixteenBits(
        _ f: UnsafeMutablePointer<UInt32>, _ body: (UnsafeMutablePointer<Int16>) -> Void,
        finish: (Int16) -> UInt32
    ) {
        withUnsafeTemporaryAllocation(of: Int16.self, capacity: 256) { buffer in
            let r = buffer.baseAddress!
            for j in 0..<256 { r[j] = Int16(truncatingIfNeeded: f[j]) }
            body(r)
            for j in 0..<256 { f[j] = finish(r[j]) }
            OpenSSLMemory.cleanse(UnsafeMutableRawBufferPointer(buffer))
        }
    }

    /// NTT (FIPS 203, Algorithm 9), in place on 256 coefficients in [0, q), leaving them in [0, q).
    ///
    /// Cooley–Tukey butterflies on 16-bit coefficients with Montgomery twiddles and lazy reduction, as
    /// the Kyber reference does: each product is Montgomery-reduced into (−q, q) and the sums and
    /// differences are not reduced, so after the seven layers every coefficient lies in (−8q, 8q), inside
    /// 16 bits; one ``barrettReduce(_:)`` each brings them back at the end. The 16-bit lanes let the compiler
    /// vectorize the layers whose butterflies are 8 or more apart.
    static func ntt(_ f: UnsafeMutablePointer<UInt32>) {
        inSixteenBits(f) { r in
            montgomeryZetas.withUnsafeBufferPointer { zetas in
                var index = 1
                var length = 128
                while length >= 2 {
                    var start = 0
                    while start < 256 {
                        let zeta = zetas[index]
                        index += 1
                        // Pointers, not r[j + length]: index arithmetic with overflow checks keeps the
                        // compiler from vectorizing the loop.
                        let low = r + start
                        let high = low + length
                        for j in 0..<length {
                            let t = montgomeryMultiply(zeta, high[j])
                            high[j] = low[j] &- t
                            low[j] = low[j] &+ t
                        }
                        start += 2 * length
                    }
                    length >>= 1
                }
            }
        } finish: {
            canonical(barrettReduce($0))
        }
    }

    /// NTT⁻¹ (FIPS 203, Algorithm 10), in place, including the final multiplication by 128⁻¹ = 3303;
    /// coefficients in [0, q) in and out.
    ///
    /// Gentleman–Sande butterflies on 16-bit coefficients, as the Kyber reference does: each sum is
    /// Barrett-reduced into (−q/2, q/2], each difference (below 2q) Montgomery-multiplied by its twiddle
    /// into (−q, q), and the scale 128⁻¹ is one more Montgomery multiplication.
    static func inverseNTT(_ f: UnsafeMutablePointer<UInt32>) {
        inSixteenBits(f) { r in
            montgomeryZetas.withUnsafeBufferPointer { zetas in
                var index = 127
                var length = 2
                while length <= 128 {
                    var start = 0
                    while start < 256 {
                        let zeta = zetas[index]
                        index -= 1
                        let low = r + start
                        let high = low + length
                        for j in 0..<length {
                            let t = low[j]
                            low[j] = barrettReduce(t &+ high[j])
                            high[j] = montgomeryMultiply(zeta, high[j] &- t)
                        }
                        start += 2 * length
                    }
                    length <<= 1
                }
            }
        } finish: {
            canonical(montgomeryMultiply($0, montgomeryInverseScale))
        }
    }

    /// h ← h + f ×_T g (FIPS 203, Algorithms 11 and 12, accumulated). Results stay below 2^32
    /// unreduced for up to 3 accumulations, so only `finish` reduces: call it after the last one.
    static func multiplyAccumulate(
        _ h: UnsafeMutablePointer<UInt32>, _ f: UnsafePointer<UInt32>, _ g: UnsafePointer<UInt32>
    ) {
        gammas.withUnsafeBufferPointer { gammas in
            // Wrapping index arithmetic: an overflow check on 2i would be a branch in the loop.
            for i in 0..<128 {
                let even = i &<< 1
                let odd = even | 1
                let a0 = f[even]
                let a1 = f[odd]
                let b0 = g[even]
                let b1 = g[odd]
                h[even] = h[even] &+ a0 &* b0 &+ multiply(a1, b1) &* gammas[i]
                h[odd] = h[odd] &+ a0 &* b1 &+ a1 &* b0
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

    /// ByteEncode_d (FIPS 203, Algorithm 5) of 256 coefficients of `d` bits into 32·d bytes, with the
    /// widths ML-KEM-768 uses (4, 10, 12) packed a group of whole bytes at a time.
    static func encode(_ f: UnsafePointer<UInt32>, bits d: Int, into out: UnsafeMutableRawPointer) {
        let bytes = out.assumingMemoryBound(to: UInt8.self)
        switch d {
        case 4:
            for i in 0..<128 {
                let c = f + (i &<< 1)
                bytes[i] = UInt8(truncatingIfNeeded: c[0] | c[1] << 4)
            }
        case 10:
            for i in 0..<64 {
                let c = f + (i &<< 2)
                let o = bytes + i &* 5
                o[0] = UInt8(truncatingIfNeeded: c[0])
                o[1] = UInt8(truncatingIfNeeded: c[0] >> 8 | c[1] << 2)
                o[2] = UInt8(truncatingIfNeeded: c[1] >> 6 | c[2] << 4)
                o[3] = UInt8(truncatingIfNeeded: c[2] >> 4 | c[3] << 6)
                o[4] = UInt8(truncatingIfNeeded: c[3] >> 2)
            }
        case 12:
            for i in 0..<128 {
                let c = f + (i &<< 1)
                let o = bytes + i &* 3
                o[0] = UInt8(truncatingIfNeeded: c[0])
                o[1] = UInt8(truncatingIfNeeded: c[0] >> 8 | c[1] << 4)
                o[2] = UInt8(truncatingIfNeeded: c[1] >> 4)
            }
        default:
            preconditionFailure("ML-KEM-768 packs 4, 10 or 12 bits, not \(d)")
        }
    }

    /// ByteDecode_d (FIPS 203, Algorithm 6) of 32·d bytes into 256 coefficients of `d` bits (not yet
    /// reduced mod q for d = 12: see `decode12`), the widths ML-KEM-768 uses a group of bytes at a time.
    static func decode(_ input: UnsafeRawPointer, bits d: Int, into f: UnsafeMutablePointer<UInt32>) {
        let bytes = input.assumingMemoryBound(to: UInt8.self)
        switch d {
        case 4:
            for i in 0..<128 {
                let b = UInt32(bytes[i])
                let c = f + (i &<< 1)
                c[0] = b & 0x0f
                c[1] = b >> 4
            }
        case 10:
            for i in 0..<64 {
                let b = bytes + i &* 5
                let c = f + (i &<< 2)
                c[0] = (UInt32(b[0]) | UInt32(b[1]) << 8) & 0x3ff
                c[1] = (UInt32(b[1]) >> 2 | UInt32(b[2]) << 6) & 0x3ff
                c[2] = (UInt32(b[2]) >> 4 | UInt32(b[3]) << 4) & 0x3ff
                c[3] = (UInt32(b[3]) >> 6 | UInt32(b[4]) << 2) & 0x3ff
            }
        case 12:
            for i in 0..<128 {
                let b = bytes + i &* 3
                let c = f + (i &<< 1)
                c[0] = (UInt32(b[0]) | UInt32(b[1]) << 8) & 0xfff
                c[1] = UInt32(b[1]) >> 4 | UInt32(b[2]) << 4
            }
        default:
            preconditionFailure("ML-KEM-768 unpacks 4, 10 or 12 bits, not \(d)")
        }
    }

    /// ByteDecode_12 with its values taken mod q (FIPS 203: "for d = 12, ... m = q"), branch-free.
    static func decode12(_ input: UnsafeRawPointer, into f: UnsafeMutablePointer<UInt32>) {
        decode(input, bits: 12, into: f)
        for j in 0..<256 { f[j] = subtractQ(f[j]) }
    }
}
