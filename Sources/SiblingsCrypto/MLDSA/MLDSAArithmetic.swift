/// Arithmetic in ℤ_q and R_q = ℤ_q[X]/(X^256 + 1) for ML-DSA (FIPS 204, sections 2.3, 7.4 and 7.5):
/// Montgomery reduction, the NTT and its inverse, Power2Round, Decompose, MakeHint and UseHint.
///
/// A polynomial is 256 `Int32` coefficients at an `UnsafeMutablePointer<Int32>`; a vector of polynomials
/// is consecutive polynomials. Everything that may touch secret values (s1, s2, t0, y and what is derived
/// from them) is branch-free, indexes memory only by public loop counters, and uses wrapping operators
/// (`&+`, `&-`, `&*`) so the compiler emits no overflow checks, which would be branches on secret data.
/// Where a secret-derived bit is allowed to become public (the accept/reject decisions of signing), it
/// passes through ``MLDSAConstantTime/declassify(_:)``.
enum MLDSAField {
    static let n = 256
    static let q: Int32 = 8_380_417
    /// q⁻¹ mod 2^32, for Montgomery reduction with R = 2^32.
    static let qInverse: Int32 = 58_728_449
    /// d, the number of dropped bits of t (FIPS 204, Table 1).
    static let d: Int32 = 13
    /// γ2 = (q − 1)/32 for ML-DSA-65.
    static let gamma2: Int32 = 261_888
    /// γ1 = 2^19 for ML-DSA-65.
    static let gamma1: Int32 = 1 << 19

    /// ζ^BitRev8(i) · 2^32 mod q for i in 0..<256 (ζ = 1753, FIPS 204 Appendix B), centred in
    /// (−q/2, q/2]: the NTT's twiddle factors in Montgomery form. Computed, not transcribed.
    static let zetas: [Int32] = {
        func power(_ base: Int64, _ exponent: Int) -> Int64 {
            var result: Int64 = 1
            var base = base % Int64(q)
            var exponent = exponent
            while exponent > 0 {
                if exponent & 1 == 1 { result = result * base % Int64(q) }
                base = base * base % Int64(q)
                exponent >>= 1
            }
            return result
        }
        let montgomery = (Int64(1) << 32) % Int64(q)
        return (0..<256).map { index in
            var reversed = 0
            for bit in 0..<8 where index & (1 << bit) != 0 { reversed |= 1 << (7 - bit) }
            var value = power(1753, reversed) * montgomery % Int64(q)
            if value > Int64(q) / 2 { value -= Int64(q) }
            return Int32(value)
        }
    }()

    /// 2^64 / 256 mod q: multiplying by it with ``montgomeryReduce(_:)`` divides by 256 (the inverse NTT's
    /// scale) and multiplies by 2^32 (undoing the R⁻¹ a Montgomery pointwise product leaves).
    static let inverseNTTFactor: Int32 = Int32((Int64(1) << 56) % Int64(8_380_417))

    // MARK: - Reductions (all branch-free)

    /// a · 2^−32 mod q, in (−q, q) when |a| < 2^31 · q.
    @inline(__always)
    static func montgomeryReduce(_ a: Int64) -> Int32 {
        let t = Int32(truncatingIfNeeded: a) &* qInverse
        return Int32(truncatingIfNeeded: (a &- Int64(t) &* Int64(q)) &>> 32)
    }

    /// A representative of a mod q in [−6283008, 6283008] (Barrett-style, for |a| < 2^31 − 2^22).
    /// When a is congruent to a value x with |x| < 2 000 000, the result is x itself.
    @inline(__always)
    static func reduce32(_ a: Int32) -> Int32 {
        let t = (a &+ (1 << 22)) &>> 23
        return a &- t &* q
    }

    /// Adds q when a is negative.
    @inline(__always)
    static func conditionalAddQ(_ a: Int32) -> Int32 {
        a &+ ((a &>> 31) & q)
    }

    /// Subtracts q when a ≥ q.
    @inline(__always)
    static func conditionalSubtractQ(_ a: Int32) -> Int32 {
        let reduced = a &- q
        return reduced &+ ((reduced &>> 31) & q)
    }

    /// |a| without a branch.
    @inline(__always)
    static func absolute(_ a: Int32) -> Int32 {
        let sign = a &>> 31
        return (a ^ sign) &- sign
    }

    // MARK: - NTT (FIPS 204, Algorithms 41 and 42)

    /// NTT(w) in place (FIPS 204, Algorithm 41). Inputs |w_j| < q; outputs |ŵ_j| < 9q.
    static func ntt(_ w: UnsafeMutablePointer<Int32>) {
        zetas.withUnsafeBufferPointer { zetas in
            var m = 0
            var length = 128
            while length > 0 {
                var start = 0
                while start < 256 {
                    m += 1
                    let zeta = Int64(zetas[m])
                    let low = w + start
                    let high = low + length
                    for j in 0..<length {
                        let t = montgomeryReduce(zeta &* Int64(high[j]))
                        high[j] = low[j] &- t
                        low[j] = low[j] &+ t
                    }
                    start += 2 &* length
                }
                length >>= 1
            }
        }
    }

    /// NTT⁻¹(ŵ) · 2^32 in place (FIPS 204, Algorithm 42, with the final scaling by 256⁻¹ folded into a
    /// Montgomery multiplication that also cancels the 2^−32 of a Montgomery pointwise product). Inputs
    /// |ŵ_j| < q; outputs |w_j| < q.
    static func inverseNTT(_ w: UnsafeMutablePointer<Int32>) {
        zetas.withUnsafeBufferPointer { zetas in
            var m = 256
            var length = 1
            while length < 256 {
                var start = 0
                while start < 256 {
                    m -= 1
                    let zeta = -Int64(zetas[m])
                    let low = w + start
                    let high = low + length
                    for j in 0..<length {
                        let t = low[j]
                        low[j] = t &+ high[j]
                        high[j] = montgomeryReduce(zeta &* Int64(t &- high[j]))
                    }
                    start += 2 &* length
                }
                length <<= 1
            }
        }
        let factor = Int64(inverseNTTFactor)
        for j in 0..<256 {
            w[j] = montgomeryReduce(factor &* Int64(w[j]))
        }
    }

    /// `count` polynomials NTT'd in place.
    static func ntt(_ w: UnsafeMutablePointer<Int32>, count: Int) {
        for index in 0..<count { ntt(w + index &* 256) }
    }

    /// `count` polynomials inverse-NTT'd in place.
    static func inverseNTT(_ w: UnsafeMutablePointer<Int32>, count: Int) {
        for index in 0..<count { inverseNTT(w + index &* 256) }
    }

    /// out = Σ_j matrix[row j] ∘ vector[j] for a k×l matrix in NTT form (row-major) times an l-vector in
    /// NTT form (FIPS 204, Algorithms 45–48, fused): products accumulate in 64 bits and are reduced once
    /// per coefficient. Inputs: matrix entries |a| < q, vector entries |v| < 9q. Output |w| < q, scaled by
    /// 2^−32 (``inverseNTT(_:)`` removes it).
    static func multiplyMatrixVector(
        _ out: UnsafeMutablePointer<Int32>, matrix: UnsafePointer<Int32>, vector: UnsafePointer<Int32>,
        rows: Int, columns: Int
    ) {
        for row in 0..<rows {
            let destination = out + row &* 256
            let matrixRow = matrix + row &* columns &* 256
            for i in 0..<256 {
                var sum: Int64 = 0
                for column in 0..<columns {
                    sum = sum &+ Int64(matrixRow[column &* 256 &+ i]) &* Int64(vector[column &* 256 &+ i])
                }
                destination[i] = montgomeryReduce(sum)
            }
        }
    }

    /// out_j = c ∘ v_j (NTT domain, Montgomery product, so scaled by 2^−32) for `count` polynomials.
    static func multiplyPolynomial(
        _ out: UnsafeMutablePointer<Int32>, _ c: UnsafePointer<Int32>, _ v: UnsafePointer<Int32>, count: Int
    ) {
        for index in 0..<count {
            let destination = out + index &* 256
            let source = v + index &* 256
            for i in 0..<256 {
                destination[i] = montgomeryReduce(Int64(c[i]) &* Int64(source[i]))
            }
        }
    }

    // MARK: - Rounding (FIPS 204, section 7.4)

    /// Power2Round (FIPS 204, Algorithm 35) for r in [0, q): (r1, r0) with r = r1·2^13 + r0 and
    /// r0 ∈ (−2^12, 2^12].
    @inline(__always)
    static func power2Round(_ r: Int32) -> (r1: Int32, r0: Int32) {
        let r1 = (r &+ (1 << 12) &- 1) &>> 13
        return (r1, r &- (r1 &<< 13))
    }

    /// Decompose (FIPS 204, Algorithm 36) for γ2 = (q − 1)/32 and r in [0, q), branch-free:
    /// r = r1·2γ2 + r0 with r0 ∈ (−γ2, γ2] and r1 ∈ [0, 15], except that r − r0 = q − 1 gives r1 = 0
    /// and r0 − 1.
    @inline(__always)
    static func decompose(_ r: Int32) -> (r1: Int32, r0: Int32) {
        // r1' = ⌊(r + γ2 − 1) / 2γ2⌋ with 2γ2 = 512 · 1023: divide by 512 with a shift, then by 1023
        // with ⌊(y + 1) · 1025 / 2^20⌋, which is exact for 0 ≤ y ≤ 16 879 (checked exhaustively).
        let y = (r &+ (gamma2 &- 1)) &>> 9
        let r1 = (((y &+ 1) &* 1025) &>> 20) & 15
        // r1' = 16 exactly when r − r0 = q − 1; r1' & 15 = 0 then leaves r0 = r > (q − 1)/2, and
        // subtracting q (only then) gives FIPS 204's r0 − 1 = r − q.
        let r0 = r &- r1 &* (2 &* gamma2)
        return (r1, r0 &- (((((q &- 1) / 2) &- r0) &>> 31) & q))
    }

    /// HighBits (FIPS 204, Algorithm 37) for r in [0, q).
    @inline(__always)
    static func highBits(_ r: Int32) -> Int32 { decompose(r).r1 }

    /// UseHint (FIPS 204, Algorithm 40) for r in [0, q) and a public hint h ∈ {0, 1} (verification only).
    @inline(__always)
    static func useHint(_ h: Int32, _ r: Int32) -> Int32 {
        let (r1, r0) = decompose(r)
        if h == 0 { return r1 }
        return r0 > 0 ? (r1 &+ 1) & 15 : (r1 &- 1) & 15
    }

    /// 1 when a ≠ 0, else 0, without a branch.
    @inline(__always)
    static func isNonzero(_ a: Int32) -> Int32 {
        Int32(bitPattern: UInt32(bitPattern: a | (0 &- a)) &>> 31)
    }

    /// Whether any of `count` coefficients (each congruent to a value of absolute value below 2 000 000
    /// and given as ``reduce32(_:)`` leaves it) has ‖·‖∞ ≥ `bound`, as an all-ones mask (−1) or 0.
    /// Examines every coefficient without an early exit: the caller declassifies only the final bit.
    static func normExceedsMask(_ w: UnsafePointer<Int32>, count: Int, bound: Int32) -> Int32 {
        var exceeds: Int32 = 0
        for i in 0..<count {
            exceeds |= (bound &- 1) &- absolute(w[i])
        }
        return exceeds &>> 31
    }
}

/// Where secret-derived values are allowed to become public.
///
/// Signing's rejection loop (FIPS 204, Algorithm 7) reveals one bit per candidate: whether it was
/// accepted. Nothing else about a rejected candidate may leak: not which of the four checks failed,
/// and not its challenge c̃. c̃ is a hash output, but a rejected candidate's c̃ is never published, and
/// leaked rejected challenges do weaken the scheme (Karabulut, Alkim and Aysu, "Single-Trace Side-Channel
/// Attacks on ω-Small Polynomial Sampling", HOST 2021) and, with the rejected response, give the key
/// away (TCHES 2025). So signing computes every check over every coefficient, ORs the four masks, and
/// declassifies that one word; SampleInBall on a secret c̃ is constant time
/// (``MLDSASampling/sampleInBallConstantTime(_:challenge:tau:)``); c̃, z and h are declassified only
/// once a candidate is accepted and they are the signature. The other values that are public by
/// construction pass through here too: the public seed ρ in key generation, and which rejection-sampled
/// nibbles ExpandS discarded (independent of the coefficients it kept). Only these functions mark values
/// as defined (`VALGRIND_MAKE_MEM_DEFINED`), so the constant-time check under valgrind flags every other
/// branch or index on secret data, and its declassification audit
/// (``ConstantTimeTesting/startDeclassificationAudit()``) checks what signing declassifies.
enum MLDSAConstantTime {
    /// Declassifies one word: under valgrind's constant-time check it becomes "defined" (public);
    /// elsewhere this is a no-op (ConstantTimeTesting).
    /// `site` names the call site for the declassification audit.
    @inline(never)
    static func declassify(_ value: Int32, site: StaticString) -> Int32 {
        ConstantTimeTesting.declassified(value, site: site)
    }

    /// Declassifies a buffer in place (see above).
    @inline(never)
    static func declassify(_ buffer: UnsafeMutableRawBufferPointer, site: StaticString) {
        ConstantTimeTesting.declassify(UnsafeRawBufferPointer(buffer), site: site)
    }
}
