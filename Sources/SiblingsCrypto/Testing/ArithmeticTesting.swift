/// The internal arithmetic of ML-KEM-768 and ML-DSA-65, reachable from tests only (`@_spi(Testing)`), so
/// that the ranges the comments claim can be checked exhaustively (Tests/SiblingsCryptoTests/MLKEM and
/// MLDSA, "ArithmeticTests"). Nothing here is API: it may change with the implementation.
@_spi(Testing)
public enum ArithmeticTesting {
    // MARK: ML-KEM (FIPS 203)

    public static var mlkemQ: Int32 { Int32(MLKEMMath.q) }
    /// ζ^BitRev7(i) · 2^16 mod q, centred, as the NTTs use them.
    public static var mlkemMontgomeryZetas: [Int16] { MLKEMMath.montgomeryZetas }
    public static var mlkemMontgomeryInverseScale: Int16 { MLKEMMath.montgomeryInverseScale }
    public static func mlkemMontgomeryMultiply(_ a: Int16, _ b: Int16) -> Int16 { MLKEMMath.montgomeryMultiply(a, b) }
    public static func mlkemBarrettReduce(_ a: Int16) -> Int16 { MLKEMMath.barrettReduce(a) }
    public static func mlkemReduce(_ a: UInt32) -> UInt32 { MLKEMMath.reduce(a) }
    public static func mlkemCompress(_ x: UInt32, bits: Int) -> UInt32 { MLKEMMath.compress(x, bits: bits) }
    public static func mlkemDecompress(_ y: UInt32, bits: Int) -> UInt32 { MLKEMMath.decompress(y, bits: bits) }

    /// NTT of 256 coefficients in [0, q).
    public static func mlkemNTT(_ f: [UInt32]) -> [UInt32] {
        precondition(f.count == 256)
        var out = f
        out.withUnsafeMutableBufferPointer { MLKEMMath.ntt($0.baseAddress!) }
        return out
    }

    /// NTT⁻¹ of 256 coefficients in [0, q).
    public static func mlkemInverseNTT(_ f: [UInt32]) -> [UInt32] {
        precondition(f.count == 256)
        var out = f
        out.withUnsafeMutableBufferPointer { MLKEMMath.inverseNTT($0.baseAddress!) }
        return out
    }

    /// SampleNTT(ρ ‖ j ‖ i) with the first OpenSSL squeeze of `firstSqueezeBlocks` blocks (4 in use; 1
    /// makes the Swift fallback run).
    public static func mlkemSampleNTT(seed: [UInt8], column: UInt8, row: UInt8, firstSqueezeBlocks: Int) -> [UInt32] {
        var out = [UInt32](repeating: 0, count: 256)
        seed.withUnsafeBytes { seed in
            out.withUnsafeMutableBufferPointer {
                MLKEMMath.sampleNTT(
                    seed: seed, column: column, row: row, into: $0.baseAddress!, firstSqueezeBlocks: firstSqueezeBlocks)
            }
        }
        return out
    }

    // MARK: ML-DSA (FIPS 204)

    public static var mldsaQ: Int32 { MLDSAField.q }
    public static var mldsaGamma2: Int32 { MLDSAField.gamma2 }
    public static func mldsaPower2Round(_ r: Int32) -> (r1: Int32, r0: Int32) { MLDSAField.power2Round(r) }
    public static func mldsaDecompose(_ r: Int32) -> (r1: Int32, r0: Int32) { MLDSAField.decompose(r) }
    public static func mldsaUseHint(_ h: Int32, _ r: Int32) -> Int32 { MLDSAField.useHint(h, r) }
    public static func mldsaReduce32(_ a: Int32) -> Int32 { MLDSAField.reduce32(a) }

    /// SampleInBall(c̃) with `tau` signs (ML-DSA-65's is 49; larger ones make the samplers read past the
    /// first block), by the variable-time sampler (`constantTime` false, verification's) or the
    /// constant-time one (signing's).
    public static func mldsaSampleInBall(_ challenge: [UInt8], constantTime: Bool, tau: Int = 49) -> [Int32] {
        var out = [Int32](repeating: 0, count: 256)
        challenge.withUnsafeBytes { challenge in
            out.withUnsafeMutableBufferPointer {
                if constantTime {
                    MLDSASampling.sampleInBallConstantTime($0.baseAddress!, challenge: challenge, tau: tau)
                } else {
                    MLDSASampling.sampleInBall($0.baseAddress!, challenge: challenge, tau: tau)
                }
            }
        }
        return out
    }
}
