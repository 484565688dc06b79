import Foundation

/// K-PKE, the public-key encryption scheme inside ML-KEM-768 (FIPS 203, section 5), with k = 3,
/// η1 = η2 = 2, du = 10, dv = 4.
///
/// Polynomials are runs of 256 `UInt32` coefficients; vectors are 3 runs back to back, the matrix Â 9
/// runs in row-major order (Â[i, j] at run 3i + j). Secret intermediate values live in temporary
/// buffers that are wiped before they are released.
enum KPKE {
    static let k = 3
    static let polyBytes = 384  // ByteEncode12 of one polynomial
    static let ciphertext1Bytes = 960  // 3 · 32 · du
    static let ciphertextBytes = 1088

    /// Â from ρ (FIPS 203, Algorithm 13 step 6 and Algorithm 14 step 6): Â[i, j] = SampleNTT(ρ ‖ j ‖ i).
    static func expandMatrix(rho: UnsafeRawBufferPointer, into matrix: UnsafeMutablePointer<UInt32>) {
        for i in 0..<k {
            for j in 0..<k {
                MLKEMMath.sampleNTT(seed: rho, column: UInt8(j), row: UInt8(i), into: matrix + (i * k + j) * 256)
            }
        }
    }

    /// PRF_2(s, b) = SHAKE256(s ‖ b, 128 bytes) sampled by SamplePolyCBD_2 (FIPS 203, equation 4.3). The
    /// PRF runs in OpenSSL, whose freed sponge is cleansed; the 128 bytes are wiped here.
    static func sampleNoise(seed: UnsafeRawBufferPointer, nonce: UInt8, into f: UnsafeMutablePointer<UInt32>) {
        withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { bytes in
            withUnsafeBytes(of: nonce) { DigestContext.keccak(.shake256, seed, $0, into: bytes) }
            MLKEMMath.sampleCBD2(UnsafeRawPointer(bytes.baseAddress!), into: f)
            OpenSSLMemory.cleanse(bytes)
        }
    }

    /// Runs `body` with a zeroed scratch buffer of `count` coefficients, wiped afterwards.
    static func withScratch<R>(_ count: Int, _ body: (UnsafeMutablePointer<UInt32>) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: UInt32.self, capacity: count) { buffer in
            buffer.initialize(repeating: 0)
            defer { OpenSSLMemory.cleanse(UnsafeMutableRawBufferPointer(buffer)) }
            return try body(buffer.baseAddress!)
        }
    }

    /// K-PKE.KeyGen (FIPS 203, Algorithm 13) from the 32-byte d. Writes t̂, Â and ŝ; returns ρ.
    static func keyGen(
        d: UnsafeRawBufferPointer, tHat: UnsafeMutablePointer<UInt32>, matrix: UnsafeMutablePointer<UInt32>,
        sHat: UnsafeMutablePointer<UInt32>
    ) -> Data {
        withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { rhoSigma in
            defer { OpenSSLMemory.cleanse(rhoSigma) }
            // (ρ, σ) = G(d ‖ k), hashed straight into the wiped buffer.
            withUnsafeBytes(of: UInt8(k)) { DigestContext.keccak(.sha3_512, d, $0, into: rhoSigma) }
            let rho = UnsafeRawBufferPointer(rebasing: rhoSigma[0..<32])
            let sigma = UnsafeRawBufferPointer(rebasing: rhoSigma[32..<64])
            // ρ is published in ek, and SampleNTT's rejections on it are public (the constant-time check).
            ConstantTimeTesting.declassify(rho, site: "mlkem.keygen.rho")
            expandMatrix(rho: rho, into: matrix)
            withScratch(k * 256) { e in
                for i in 0..<k { sampleNoise(seed: sigma, nonce: UInt8(i), into: sHat + i * 256) }
                for i in 0..<k { sampleNoise(seed: sigma, nonce: UInt8(k + i), into: e + i * 256) }
                for i in 0..<k {
                    MLKEMMath.ntt(sHat + i * 256)
                    MLKEMMath.ntt(e + i * 256)
                }
                for i in 0..<k {
                    let row = tHat + i * 256
                    row.update(repeating: 0, count: 256)
                    for j in 0..<k { MLKEMMath.multiplyAccumulate(row, matrix + (i * k + j) * 256, sHat + j * 256) }
                    MLKEMMath.finish(row)
                    MLKEMMath.add(row, e + i * 256)
                }
            }
            // t̂ is published in ek.
            ConstantTimeTesting.declassify(
                UnsafeRawBufferPointer(start: tHat, count: k * 256 * 4), site: "mlkem.keygen.tHat")
            return Data(rho)
        }
    }

    /// K-PKE.Encrypt (FIPS 203, Algorithm 14) of the 32-byte message `m` with randomness `r`, under the
    /// public key's t̂ and Â, into 1088 bytes at `out`.
    static func encrypt(
        tHat: UnsafePointer<UInt32>, matrix: UnsafePointer<UInt32>, m: UnsafeRawBufferPointer,
        r: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer
    ) {
        withScratch(3 * k * 256 + 2 * 256) { scratch in
            let y = scratch
            let e1 = scratch + k * 256
            let u = scratch + 2 * k * 256
            let e2 = scratch + 3 * k * 256
            let v = e2 + 256
            for i in 0..<k { sampleNoise(seed: r, nonce: UInt8(i), into: y + i * 256) }
            for i in 0..<k { sampleNoise(seed: r, nonce: UInt8(k + i), into: e1 + i * 256) }
            sampleNoise(seed: r, nonce: UInt8(2 * k), into: e2)
            for i in 0..<k { MLKEMMath.ntt(y + i * 256) }
            // u = NTT⁻¹(Âᵀ ∘ ŷ) + e1
            for i in 0..<k {
                let ui = u + i * 256
                for j in 0..<k { MLKEMMath.multiplyAccumulate(ui, matrix + (j * k + i) * 256, y + j * 256) }
                MLKEMMath.finish(ui)
                MLKEMMath.inverseNTT(ui)
                MLKEMMath.add(ui, e1 + i * 256)
            }
            // v = NTT⁻¹(t̂ᵀ ∘ ŷ) + e2 + Decompress_1(ByteDecode_1(m))
            for j in 0..<k { MLKEMMath.multiplyAccumulate(v, tHat + j * 256, y + j * 256) }
            MLKEMMath.finish(v)
            MLKEMMath.inverseNTT(v)
            MLKEMMath.add(v, e2)
            for index in 0..<256 {
                let bit = UInt32(m[index >> 3] >> (index & 7)) & 1
                // Decompress_1(bit) = bit · ⌈q/2⌋ = bit · 1665, without a branch.
                v[index] = MLKEMMath.subtractQ(v[index] &+ (1665 & (0 &- bit)))
            }
            for index in 0..<(k &* 256) { u[index] = MLKEMMath.compress(u[index], bits: 10) }
            for index in 0..<256 { v[index] = MLKEMMath.compress(v[index], bits: 4) }
            for i in 0..<k { MLKEMMath.encode(u + i * 256, bits: 10, into: out + i * 320) }
            MLKEMMath.encode(v, bits: 4, into: out + ciphertext1Bytes)
        }
    }

    /// K-PKE.Decrypt (FIPS 203, Algorithm 15): the 32-byte message into `m`.
    static func decrypt(
        sHat: UnsafePointer<UInt32>, ciphertext: UnsafeRawPointer, into m: UnsafeMutableRawBufferPointer
    ) {
        withScratch(k * 256 + 2 * 256) { scratch in
            let u = scratch
            let w = scratch + k * 256
            let v = w + 256
            for i in 0..<k {
                let ui = u + i &* 256
                MLKEMMath.decode(ciphertext + i &* 320, bits: 10, into: ui)
                for index in 0..<256 { ui[index] = MLKEMMath.decompress(ui[index], bits: 10) }
                MLKEMMath.ntt(ui)
            }
            MLKEMMath.decode(ciphertext + ciphertext1Bytes, bits: 4, into: v)
            for index in 0..<256 { v[index] = MLKEMMath.decompress(v[index], bits: 4) }
            for j in 0..<k { MLKEMMath.multiplyAccumulate(w, sHat + j * 256, u + j * 256) }
            MLKEMMath.finish(w)
            MLKEMMath.inverseNTT(w)
            m.initializeMemory(as: UInt8.self, repeating: 0)
            for index in 0..<256 {
                let bit = MLKEMMath.compress(MLKEMMath.subtractQ(v[index] &+ MLKEMMath.q &- w[index]), bits: 1)
                m[index >> 3] |= UInt8(truncatingIfNeeded: bit << (index & 7))
            }
        }
    }
}
