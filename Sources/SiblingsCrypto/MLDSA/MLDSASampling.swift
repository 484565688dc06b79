/// The pseudorandom samplers of ML-DSA (FIPS 204, section 7.3): RejNTTPoly for ExpandA, RejBoundedPoly
/// for ExpandS, ExpandMask and SampleInBall. Outputs are polynomials of 256 `Int32` coefficients.
enum MLDSASampling {
    /// SHAKE128's rate in bytes: RejNTTPoly squeezes whole blocks, each a whole number of 3-byte groups.
    private static let shake128Rate = 168
    /// SHAKE256's rate in bytes.
    private static let shake256Rate = 136

    /// A SHAKE256 sponge for secret input, which ``Keccak/wipe()`` can clear afterwards.
    static func secretSHAKE256() -> Keccak { Keccak(rate: shake256Rate, suffix: 0x1f) }

    // MARK: - ExpandA (FIPS 204, Algorithms 30 and 32)

    /// ExpandA(ρ) (FIPS 204, Algorithm 32): the k×l matrix Â in NTT form, row-major, each entry
    /// RejNTTPoly(ρ ‖ IntegerToBytes(s, 1) ‖ IntegerToBytes(r, 1)) with coefficients in [0, q). ρ is public.
    static func expandA(rho: UnsafeRawBufferPointer, rows: Int, columns: Int) -> [Int32] {
        precondition(rho.count == 32)
        return [Int32](unsafeUninitializedCapacity: rows * columns * 256) { matrix, initialized in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 34) { seed in
                let seedBytes = UnsafeMutableRawBufferPointer(seed)
                seedBytes.copyMemory(from: rho)
                for row in 0..<rows {
                    for column in 0..<columns {
                        seed[32] = UInt8(column)
                        seed[33] = UInt8(row)
                        rejectionSampleNTT(
                            matrix.baseAddress! + (row * columns + column) * 256,
                            seed: UnsafeRawBufferPointer(seedBytes))
                    }
                }
            }
            initialized = rows * columns * 256
        }
    }

    /// RejNTTPoly (FIPS 204, Algorithm 30) with CoeffFromThreeBytes (Algorithm 14): 23-bit little-endian
    /// values from SHAKE128(seed), kept when below q. The seed and so every decision here are public.
    static func rejectionSampleNTT(_ out: UnsafeMutablePointer<Int32>, seed: UnsafeRawBufferPointer) {
        var shake = SHAKE128()
        shake.absorb(bufferPointer: seed)
        // Five blocks (840 bytes, 280 candidates) almost always suffice; more come a block at a time.
        let firstSqueeze = 5 * shake128Rate
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: firstSqueeze) { buffer in
            shake.squeeze(into: UnsafeMutableRawBufferPointer(buffer))
            var available = firstSqueeze
            var position = 0
            var count = 0
            while count < 256 {
                if position == available {
                    shake.squeeze(into: UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: shake128Rate))
                    available = shake128Rate
                    position = 0
                }
                let value =
                    Int32(buffer[position]) | Int32(buffer[position + 1]) << 8
                    | Int32(buffer[position + 2] & 0x7f) << 16
                position += 3
                if value < MLDSAField.q {
                    out[count] = value
                    count += 1
                }
            }
        }
    }

    // MARK: - ExpandS (FIPS 204, Algorithms 31 and 33)

    /// ExpandS(ρ′) (FIPS 204, Algorithm 33) for η = 4: s1 (`l` polynomials) then s2 (`k` polynomials),
    /// each RejBoundedPoly(ρ′ ‖ IntegerToBytes(index, 2)), coefficients in [−4, 4]. ρ′ is secret.
    static func expandS(
        rhoPrime: UnsafeRawBufferPointer, s1: UnsafeMutablePointer<Int32>, l: Int, s2: UnsafeMutablePointer<Int32>,
        k: Int
    ) {
        precondition(rhoPrime.count == 64)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 66) { seed in
            let seedBytes = UnsafeMutableRawBufferPointer(seed)
            seedBytes.copyMemory(from: rhoPrime)
            for index in 0..<(l + k) {
                seed[64] = UInt8(truncatingIfNeeded: index)
                seed[65] = UInt8(truncatingIfNeeded: index >> 8)
                let out = index < l ? s1 + index * 256 : s2 + (index - l) * 256
                rejectionSampleBounded(out, seed: UnsafeRawBufferPointer(seedBytes))
            }
            OpenSSLMemory.cleanse(seedBytes)
        }
    }

    /// RejBoundedPoly (FIPS 204, Algorithm 31) with CoeffFromHalfByte (Algorithm 15) for η = 4: each byte of
    /// SHAKE256(seed) gives two nibbles b, low one first; b < 9 yields the coefficient 4 − b.
    ///
    /// Constant time: the coefficients are computed without branches; which nibbles are rejected is
    /// declassified (one word per byte). That reveals only where the discarded nibbles were, which is
    /// independent of the values of the kept ones, so it says nothing about s1 or s2.
    static func rejectionSampleBounded(_ out: UnsafeMutablePointer<Int32>, seed: UnsafeRawBufferPointer) {
        var sponge = secretSHAKE256()
        sponge.absorb(seed)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: shake256Rate) { buffer in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            var count = 0
            outer: while true {
                sponge.squeeze(into: bytes)
                for position in 0..<shake256Rate {
                    let low = Int32(buffer[position] & 0x0f)
                    let high = Int32(buffer[position] >> 4)
                    // Bit 0: the low nibble is accepted; bit 1: the high one is.
                    let accepted = MLDSAConstantTime.declassify(
                        ((low &- 9) &>> 31) & 1 | ((high &- 9) &>> 31) & 2, site: "expandS.rejections")
                    if accepted & 1 != 0 {
                        out[count] = 4 &- low
                        count += 1
                    }
                    if accepted & 2 != 0 && count < 256 {
                        out[count] = 4 &- high
                        count += 1
                    }
                    if count == 256 { break outer }
                }
            }
            OpenSSLMemory.cleanse(bytes)
        }
        sponge.wipe()
    }

    // MARK: - ExpandMask (FIPS 204, Algorithm 34)

    /// ExpandMask(ρ″, κ) (FIPS 204, Algorithm 34) for γ1 = 2^19: `l` polynomials, the r-th
    /// BitUnpack(SHAKE256(ρ″ ‖ IntegerToBytes(κ + r, 2), 640 bytes), γ1 − 1, γ1), so coefficients are
    /// γ1 − (20-bit value), in (−γ1, γ1]. Secret; branch-free.
    static func expandMask(
        _ out: UnsafeMutablePointer<Int32>, rhoDoublePrime: UnsafeRawBufferPointer, kappa: Int, l: Int
    ) {
        precondition(rhoDoublePrime.count == 64)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 640 + 66) { storage in
            let buffer = storage.baseAddress!
            let seed = UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(storage)[640..<706])
            seed.copyMemory(from: rhoDoublePrime)
            for r in 0..<l {
                let counter = kappa + r
                seed[64] = UInt8(truncatingIfNeeded: counter)
                seed[65] = UInt8(truncatingIfNeeded: counter >> 8)
                // One OpenSSL call; its freed sponge is cleansed, and the buffer is wiped below.
                DigestContext.keccak(
                    .shake256, UnsafeRawBufferPointer(seed),
                    into: UnsafeMutableRawBufferPointer(start: buffer, count: 640))
                let poly = out + r * 256
                for pair in 0..<128 {
                    let b = buffer + pair * 5
                    let v0 = Int32(b[0]) | Int32(b[1]) << 8 | Int32(b[2] & 0x0f) << 16
                    let v1 = Int32(b[2] >> 4) | Int32(b[3]) << 4 | Int32(b[4]) << 12
                    poly[2 * pair] = MLDSAField.gamma1 &- v0
                    poly[2 * pair + 1] = MLDSAField.gamma1 &- v1
                }
            }
            OpenSSLMemory.cleanse(UnsafeMutableRawBufferPointer(storage))
        }
    }

    // MARK: - SampleInBall (FIPS 204, Algorithm 29)

    /// SampleInBall(c̃) (FIPS 204, Algorithm 29): a polynomial with τ coefficients ±1 and the rest 0, from
    /// SHAKE256 of the whole of c̃. For a public c̃ (verification), so this may branch and index on it.
    static func sampleInBall(_ out: UnsafeMutablePointer<Int32>, challenge: UnsafeRawBufferPointer, tau: Int) {
        var shake = SHAKE256()
        shake.absorb(bufferPointer: challenge)
        out.update(repeating: 0, count: 256)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: shake256Rate) { buffer in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            shake.squeeze(into: bytes)
            var signs: UInt64 = 0
            for index in 0..<8 { signs |= UInt64(buffer[index]) << (8 * index) }
            var position = 8
            for i in (256 - tau)..<256 {
                var j: Int
                repeat {
                    if position == shake256Rate {
                        shake.squeeze(into: bytes)
                        position = 0
                    }
                    j = Int(buffer[position])
                    position += 1
                } while j > i
                out[i] = out[j]
                out[j] = 1 - 2 * Int32(signs & 1)
                signs >>= 1
            }
        }
    }

    /// SampleInBall(c̃) for a secret c̃ (signing, before the candidate is accepted), in constant time: the
    /// same polynomial as ``sampleInBall(_:challenge:tau:)``, with no branch or memory index that depends
    /// on c̃.
    ///
    /// Every byte of a squeezed block is a candidate j. Whether it is taken (j ≤ i, while fewer than τ
    /// were), the counter i, the swap out[i] ← out[j], out[j] ← ±1 and the sign bit's shift are all
    /// masked arithmetic; the reads and writes at i and j are scans over all 256 coefficients. Only
    /// "all τ placed" is declassified, once per 136-byte block: the first block's 128 candidates are enough
    /// unless about 80 of them are rejected, which happens with probability far below 2^−60, so the
    /// number of blocks reveals nothing in practice.
    static func sampleInBallConstantTime(
        _ out: UnsafeMutablePointer<Int32>, challenge: UnsafeRawBufferPointer, tau: Int
    ) {
        var sponge = secretSHAKE256()
        sponge.absorb(challenge)
        out.update(repeating: 0, count: 256)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: shake256Rate) { buffer in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            sponge.squeeze(into: bytes)
            var signs: UInt64 = 0
            for index in 0..<8 { signs |= UInt64(buffer[index]) << (8 * index) }
            var i = Int32(256 - tau)
            var position = 8
            while true {
                while position < shake256Rate {
                    let j = Int32(buffer[position])
                    position += 1
                    // −1 when j ≤ i and i < 256 (this candidate is taken), else 0.
                    let taken = ~((i &- j) &>> 31) & ((i &- 256) &>> 31)
                    let sign = 1 &- 2 &* Int32(truncatingIfNeeded: signs & 1)
                    var atJ: Int32 = 0
                    for k in 0..<256 { atJ |= out[k] & equalMask(Int32(k), j) }
                    for k in 0..<256 {
                        let isJ = equalMask(Int32(k), j) & taken
                        // out[j] ← sign is written after out[i] ← out[j]: when i = j, the sign wins.
                        let isI = equalMask(Int32(k), i) & taken & ~isJ
                        out[k] = (out[k] & ~(isJ | isI)) | (sign & isJ) | (atJ & isI)
                    }
                    let takenBit = UInt64(truncatingIfNeeded: taken) & 1
                    signs = signs &>> takenBit
                    i &-= taken
                }
                if MLDSAConstantTime.declassify(MLDSAField.isNonzero(i ^ 256), site: "sampleInBall.done") == 0 { break }
                sponge.squeeze(into: bytes)
                position = 0
            }
            OpenSSLMemory.cleanse(bytes)
        }
        sponge.wipe()
    }

    /// −1 when a = b, else 0, for 0 ≤ a, b < 2^31, without a branch.
    @inline(__always)
    private static func equalMask(_ a: Int32, _ b: Int32) -> Int32 {
        ((a ^ b) &- 1) &>> 31
    }
}
