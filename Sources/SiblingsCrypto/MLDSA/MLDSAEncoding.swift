/// The byte encodings of ML-DSA-65 (FIPS 204, sections 7.1 and 7.2): bit packing of polynomials,
/// pkEncode/pkDecode, skEncode, sigEncode/sigDecode, w1Encode and HintBitPack/HintBitUnpack.
///
/// Packing is branch-free in the coefficient values (the loops depend only on the public bit width), so
/// it may encode secret polynomials.
enum MLDSAEncoding {
    static let k = 6
    static let l = 5
    static let omega = 55
    static let challengeByteCount = 48
    /// Bytes of one polynomial packed at 10, 4, 13 and 20 bits per coefficient.
    static let t1PolyByteCount = 320
    static let etaPolyByteCount = 128
    static let t0PolyByteCount = 416
    static let zPolyByteCount = 640
    static let w1PolyByteCount = 128

    // MARK: - Bit packing (FIPS 204, Algorithms 16–19)

    /// Packs `count` values `transform(values[i])`, each in [0, 2^bits), least significant bit first
    /// (SimpleBitPack and BitPack, FIPS 204, Algorithms 16 and 17). Writes count·bits/8 bytes.
    @inline(__always)
    static func packBits(
        _ values: UnsafePointer<Int32>, count: Int, bits: Int, into out: UnsafeMutablePointer<UInt8>,
        _ transform: (Int32) -> Int32
    ) {
        var accumulator: UInt64 = 0
        var filled = 0
        var position = 0
        for i in 0..<count {
            accumulator |= UInt64(UInt32(bitPattern: transform(values[i]))) &<< UInt64(filled)
            filled += bits
            while filled >= 8 {
                out[position] = UInt8(truncatingIfNeeded: accumulator)
                position += 1
                accumulator &>>= 8
                filled -= 8
            }
        }
    }

    /// Unpacks `count` values of `bits` bits, least significant bit first, as `transform(value)`
    /// (SimpleBitUnpack and BitUnpack, FIPS 204, Algorithms 18 and 19).
    @inline(__always)
    static func unpackBits(
        _ input: UnsafePointer<UInt8>, count: Int, bits: Int, into values: UnsafeMutablePointer<Int32>,
        _ transform: (Int32) -> Int32
    ) {
        let mask = (UInt64(1) << UInt64(bits)) - 1
        var accumulator: UInt64 = 0
        var filled = 0
        var position = 0
        for i in 0..<count {
            while filled < bits {
                accumulator |= UInt64(input[position]) &<< UInt64(filled)
                position += 1
                filled += 8
            }
            values[i] = transform(Int32(truncatingIfNeeded: accumulator & mask))
            accumulator &>>= UInt64(bits)
            filled -= bits
        }
    }

    // MARK: - Keys (FIPS 204, Algorithms 22–24)

    /// pkEncode(ρ, t1) (FIPS 204, Algorithm 22): ρ ‖ SimpleBitPack(t1[i], 2^10 − 1) for each i.
    static func encodePublicKey(
        _ out: UnsafeMutablePointer<UInt8>, rho: UnsafeRawBufferPointer, t1: UnsafePointer<Int32>
    ) {
        UnsafeMutableRawPointer(out).copyMemory(from: rho.baseAddress!, byteCount: 32)
        packBits(t1, count: k * 256, bits: 10, into: out + 32) { $0 }
    }

    /// pkDecode (FIPS 204, Algorithm 23): ρ is the first 32 bytes; t1 (k·256 values in [0, 2^10)) is
    /// written to `t1`. Every 1952-byte string decodes.
    static func decodePublicKey(_ input: UnsafePointer<UInt8>, t1: UnsafeMutablePointer<Int32>) {
        unpackBits(input + 32, count: k * 256, bits: 10, into: t1) { $0 }
    }

    /// skEncode(ρ, K, tr, s1, s2, t0) (FIPS 204, Algorithm 24): ρ ‖ K ‖ tr ‖ BitPack(s1, η, η) ‖
    /// BitPack(s2, η, η) ‖ BitPack(t0, 2^12 − 1, 2^12), 4032 bytes.
    static func encodePrivateKey(
        _ out: UnsafeMutablePointer<UInt8>, rho: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
        tr: UnsafeRawBufferPointer, s1: UnsafePointer<Int32>, s2: UnsafePointer<Int32>, t0: UnsafePointer<Int32>
    ) {
        UnsafeMutableRawPointer(out).copyMemory(from: rho.baseAddress!, byteCount: 32)
        UnsafeMutableRawPointer(out + 32).copyMemory(from: key.baseAddress!, byteCount: 32)
        UnsafeMutableRawPointer(out + 64).copyMemory(from: tr.baseAddress!, byteCount: 64)
        var offset = 128
        packBits(s1, count: l * 256, bits: 4, into: out + offset) { 4 &- $0 }
        offset += l * etaPolyByteCount
        packBits(s2, count: k * 256, bits: 4, into: out + offset) { 4 &- $0 }
        offset += k * etaPolyByteCount
        packBits(t0, count: k * 256, bits: 13, into: out + offset) { (1 << 12) &- $0 }
    }

    // MARK: - Signatures (FIPS 204, Algorithms 20, 21, 26, 27 and 28)

    /// sigEncode(c̃, z, h) (FIPS 204, Algorithm 26): c̃ ‖ BitPack(z[i], γ1 − 1, γ1) ‖ HintBitPack(h), with
    /// z centred (|z| < γ1) and h of at most ω ones. All of it is public once the signature is accepted.
    static func encodeSignature(
        _ out: UnsafeMutablePointer<UInt8>, challenge: UnsafeRawBufferPointer, z: UnsafePointer<Int32>,
        hint: UnsafePointer<Int32>
    ) {
        UnsafeMutableRawPointer(out).copyMemory(from: challenge.baseAddress!, byteCount: challengeByteCount)
        packBits(z, count: l * 256, bits: 20, into: out + challengeByteCount) { MLDSAField.gamma1 &- $0 }
        packHint(out + challengeByteCount + l * zPolyByteCount, hint: hint)
    }

    /// sigDecode (FIPS 204, Algorithm 27): c̃ is the first 48 bytes; z (l·256 values in (−γ1, γ1]) goes
    /// to `z` and h (k·256 values in {0, 1}) to `hint`. Returns false when the hint is malformed
    /// (HintBitUnpack returns ⊥). The input must be exactly 3309 bytes.
    static func decodeSignature(
        _ input: UnsafePointer<UInt8>, z: UnsafeMutablePointer<Int32>, hint: UnsafeMutablePointer<Int32>
    ) -> Bool {
        unpackBits(input + challengeByteCount, count: l * 256, bits: 20, into: z) { MLDSAField.gamma1 &- $0 }
        return unpackHint(input + challengeByteCount + l * zPolyByteCount, hint: hint)
    }

    /// HintBitPack(h) (FIPS 204, Algorithm 20): ω + k bytes; the indices of the ones of each polynomial in
    /// increasing order, then for each polynomial the running count. h is public (an accepted signature's).
    static func packHint(_ out: UnsafeMutablePointer<UInt8>, hint: UnsafePointer<Int32>) {
        out.update(repeating: 0, count: omega + k)
        var index = 0
        for i in 0..<k {
            for j in 0..<256 where hint[i * 256 + j] != 0 {
                precondition(index < omega, "a signature with more than ω hints reached the encoder")
                out[index] = UInt8(j)
                index += 1
            }
            out[omega + i] = UInt8(index)
        }
    }

    /// HintBitUnpack (FIPS 204, Algorithm 21): false (⊥) when a running count decreases or exceeds ω,
    /// when the indices within one polynomial are not strictly increasing, or when a byte after the last
    /// index is not zero. Public data only.
    static func unpackHint(_ input: UnsafePointer<UInt8>, hint: UnsafeMutablePointer<Int32>) -> Bool {
        hint.update(repeating: 0, count: k * 256)
        var index = 0
        for i in 0..<k {
            let end = Int(input[omega + i])
            if end < index || end > omega { return false }
            let first = index
            while index < end {
                if index > first && input[index - 1] >= input[index] { return false }
                hint[i * 256 + Int(input[index])] = 1
                index += 1
            }
        }
        for position in index..<omega where input[position] != 0 { return false }
        return true
    }

    /// w1Encode(w1) (FIPS 204, Algorithm 28) of w1 = HighBits(w) for each of the k·256 coefficients of w
    /// (in [0, q)): SimpleBitPack at 4 bits, k·128 bytes.
    static func encodeHighBits(_ out: UnsafeMutablePointer<UInt8>, w: UnsafePointer<Int32>) {
        for i in 0..<(k * 128) {
            let low = MLDSAField.highBits(w[2 * i])
            let high = MLDSAField.highBits(w[2 * i + 1])
            out[i] = UInt8(truncatingIfNeeded: low | high << 4)
        }
    }
}
