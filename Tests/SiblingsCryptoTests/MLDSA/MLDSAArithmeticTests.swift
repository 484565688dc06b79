import Foundation
@_spi(Testing) import SiblingsCrypto
import Testing

/// The ML-DSA arithmetic over every input of the domain each function is used on, against FIPS 204's
/// definitions written here with plain integer division.
@Suite("ML-DSA-65 arithmetic, exhaustively")
struct MLDSAArithmeticTests {
    static let q = ArithmeticTesting.mldsaQ
    static let gamma2 = ArithmeticTesting.mldsaGamma2

    /// r mod± α: the representative in (−α/2, α/2] (FIPS 204, section 2.3).
    static func centredMod(_ r: Int32, _ alpha: Int32) -> Int32 {
        var x = ((r % alpha) + alpha) % alpha
        if x > alpha / 2 { x -= alpha }
        return x
    }

    /// Decompose (FIPS 204, Algorithm 36).
    static func decompose(_ r: Int32) -> (Int32, Int32) {
        let r0 = centredMod(r, 2 * gamma2)
        if r - r0 == q - 1 { return (0, r0 - 1) }
        return ((r - r0) / (2 * gamma2), r0)
    }

    @Test("Decompose, Power2Round and UseHint for every r in [0, q)")
    func decomposition() {
        var mismatches = 0
        for r in Int32(0)..<Self.q {
            let (r1, r0) = ArithmeticTesting.mldsaDecompose(r)
            let expected = Self.decompose(r)
            if r1 != expected.0 || r0 != expected.1 { mismatches += 1 }
            // Power2Round (Algorithm 35): r0 = r mod± 2^13, r1 = (r − r0)/2^13.
            let power = ArithmeticTesting.mldsaPower2Round(r)
            let low = Self.centredMod(r, 1 << 13)
            if power.r0 != low || power.r1 != (r - low) >> 13 { mismatches += 1 }
            // UseHint (Algorithm 40), m = 16.
            if ArithmeticTesting.mldsaUseHint(0, r) != expected.0 { mismatches += 1 }
            let hinted = expected.1 > 0 ? (expected.0 + 1) % 16 : (expected.0 + 15) % 16
            if ArithmeticTesting.mldsaUseHint(1, r) != hinted { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }

    @Test("reduce32: congruent and within ±6 283 008 for every |a| < 2^24, and for a sweep of the whole range")
    func reduce32() {
        var mismatches = 0
        func check(_ a: Int32) {
            let r = ArithmeticTesting.mldsaReduce32(a)
            if (Int64(a) - Int64(r)) % Int64(Self.q) != 0 || abs(r) > 6_283_008 { mismatches += 1 }
        }
        for a in Int32(-(1 << 24))..<Int32(1 << 24) { check(a) }
        let limit = Int32((1 << 31) - (1 << 22))
        var a = -limit + 1
        while a < limit - 4099 {
            check(a)
            a += 4099
        }
        for a in (limit - 1_000_000)..<limit { check(a) }
        for a in (-limit + 1)..<(-limit + 1_000_000) { check(a) }
        #expect(mismatches == 0)
    }

    @Test("reduce32 returns x itself for every |x| < 2 000 000 plus a multiple of q")
    func reduce32Exact() {
        var mismatches = 0
        for k: Int32 in [-200, -1, 0, 1, 200] {
            for x in Int32(-1_999_999)..<Int32(2_000_000) where ArithmeticTesting.mldsaReduce32(x &+ k &* Self.q) != x {
                mismatches += 1
            }
        }
        #expect(mismatches == 0)
    }

    @Test("the constant-time SampleInBall gives the same polynomial as verification's, with τ = 49 signs")
    func sampleInBallAgrees() {
        for _ in 0..<1000 {
            let challenge = [UInt8](randomBytes(48))
            let constantTime = ArithmeticTesting.mldsaSampleInBall(challenge, constantTime: true)
            #expect(constantTime == ArithmeticTesting.mldsaSampleInBall(challenge, constantTime: false))
            #expect(constantTime.filter { $0 != 0 }.count == 49)
            #expect(constantTime.allSatisfy { $0 == 0 || $0 == 1 || $0 == -1 })
        }
        // Larger τ: the early positions reject most bytes, so both samplers squeeze further blocks (the
        // constant-time one's multi-block path, which τ = 49 all but never takes).
        for tau in [128, 200, 255] {
            for _ in 0..<50 {
                let challenge = [UInt8](randomBytes(48))
                let constantTime = ArithmeticTesting.mldsaSampleInBall(challenge, constantTime: true, tau: tau)
                #expect(constantTime == ArithmeticTesting.mldsaSampleInBall(challenge, constantTime: false, tau: tau))
                #expect(constantTime.filter { $0 != 0 }.count == tau)
            }
        }
    }
}
